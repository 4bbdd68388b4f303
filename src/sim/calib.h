/* The cost model's side of the plan phase (plan/job.h): the costs the trainer measures at
 * start-up, from the cost model instead, and the trainer's plan from them. hetsim and the
 * planner call these, so that what they simulate is what the trainer would run. */
#ifndef HT_SIM_CALIB_H
#define HT_SIM_CALIB_H

#include "config/config.h"
#include "nn/model.h"
#include "plan/job.h"
#include "sim/sim.h"

/* Every layer's forward and backward seconds at `samples` on ranks 0..n-1 of c, laid out as
 * the trainer's start-up calibration (ht_pipe_plan_calibrate): [n * 2 * nlayers], the caller
 * frees. */
double *ht_sim_calibration(const ht_sim_cluster *c, const ht_sim_model *sm, int n, int samples);

/* ht_plan_job for cfg's job on ranks 0..n-1 of c, with the costs ht_plan_needs asks for from
 * the cost model and the hosts of the first replica's ranks as the trainer gathers them. */
/* What each schedule rank q < plan->pp.D of the plan allocates in the trainer, into bytes[q]:
 * the executor's buffers (plan/exec_mem.h: its stages only where every rank holds only its
 * stages, the same model as the memory decision's stage plan, else the whole model), or the
 * decision's stage plan where that is larger. s: the plan's stream (its slots). */
void ht_sim_plan_bytes(const ht_config *cfg, const ht_model *m, const ht_sim_model *sm,
                       const ht_plan *plan, const ht_pipe_sched *s, int n, double *bytes);

/* A data-parallel job of cfg on ranks 0..n-1 of c: what each rank allocates into bytes[n]
 * (plan/zero_mem.h: the whole model at the global batch, with cluster.shard only its slice of
 * the optimizer state, and of the gradients with "gradients"), and the slices into cut[n + 1],
 * cut in proportion to each rank's memory as the trainer cuts them (device.memory_mb, else
 * the rank's device kind's mem_gb; equal where neither is known). */
void ht_sim_dp_memory(const ht_sim_cluster *c, const ht_config *cfg, const ht_model *m,
                      const ht_sim_model *sm, int n, size_t *cut, double *bytes);

int ht_sim_job_plan(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_model *m,
                    const ht_config *cfg, int n, ht_plan *plan);

#endif
