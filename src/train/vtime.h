/* Virtual time for hettrain-smpi (issue 26): every compute phase declares its duration from
 * hetsim's cost model (src/sim/cost.c) on the emulated cluster, instead of taking wall time. */
#ifndef HT_TRAIN_VTIME_H
#define HT_TRAIN_VTIME_H

struct ht_config;
struct ht_model;

/* Under SMPI (ht_comm_virtual): loads the cluster description that hettrain emulate names in
 * HT_EMULATE_CLUSTER and makes every forward, backward and optimizer step of this rank
 * (core/vcost.h) take the cost model's seconds on its device (this rank's kind, the cores
 * its host shares; the job's cluster.slowdown stays the engines' emulated idling, as in real
 * runs). HT_EINPUT naming the variable or the file when either is wrong. A no-op returning
 * HT_OK in the normal build. */
int ht_vtime_setup(const struct ht_config *cfg, const struct ht_model *m, int rank, int world);

#endif
