/* Heterogeneity-aware pipeline planning for the pipeline engine (issue 11, HePipe): the
 * "hetero" stage partition and hepipe's per-stage times, from the model's FLOPs and each
 * rank's speed. Without a measured profile the speeds are the emulated ones: rank r runs at
 * 1 / cluster.slowdown[r] of a nominal 1 GFLOP/s, the slowest replica of a pipeline rank
 * pacing it (equal devices otherwise). */
#ifndef HT_TRAIN_PIPE_PLAN_H
#define HT_TRAIN_PIPE_PLAN_H

#include "config/config.h"
#include "nn/model.h"

/* bounds[0..D] by ht_part_hetero (stage s on pipeline rank s, every rank a stage, cuts only
 * where pipe/bounds.h allows; the schedule `kind`'s slots in flight; opt_states optimizer
 * floats per parameter; no memory limit). With `print`, logs the partition table. HT_OK or
 * HT_EINPUT with ht_errmsg(). */
int ht_pipe_plan_hetero(const ht_config *cfg, const ht_model *m, int world, int kind, int D,
                        int N, int mb, int opt_states, int print, int *bounds);

/* Relative forward time of each stage of bounds[0..D] (hepipe's ht_pipe_params.stage_time):
 * its layers' forward FLOPs per sample times the slowdown of its pipeline rank. */
void ht_pipe_plan_stage_times(const ht_config *cfg, const ht_model *m, int world, int D,
                              const int *bounds, double *stage_time);

#endif
