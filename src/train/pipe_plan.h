/* Heterogeneity-aware pipeline planning for the pipeline engine (issue 11, HePipe): the
 * "hetero" stage partition and hepipe's per-stage times, from each layer's forward and
 * backward time measured at start-up on every rank's own device (times its emulated
 * cluster.slowdown), the slowest replica of a pipeline rank pacing it. */
#ifndef HT_TRAIN_PIPE_PLAN_H
#define HT_TRAIN_PIPE_PLAN_H

#include "config/config.h"
#include "nn/model.h"
#include "plan/partition.h"

/* Times every layer's forward and backward at mb samples on this rank's device (best of 5
 * after a warm-up pass; the model's gradients are overwritten, its parameters untouched),
 * scales them by `slowdown`, and gathers every rank's (collective: all ranks call it):
 * times[w * 2L + l] forward, times[w * 2L + L + l] backward of rank w, seconds per
 * micro-batch; times has world * 2 * nlayers entries. */
void ht_pipe_plan_calibrate(ht_model *m, int mb, double slowdown, double *times);

/* The hetero partition's problem from the calibration (the arguments as for
 * ht_pipe_plan_hetero below): in.fwd/bwd seconds per sample of every layer on every pipeline
 * rank (its slowest replica), the model's memory description, where cuts may fall. It points
 * at mem_limit, which must outlive it. Free with ht_pipe_problem_free. */
typedef struct ht_pipe_problem {
    ht_part_input in;
    ht_mem_desc desc;
    double *fwd, *bwd;
    uint8_t *cut;
} ht_pipe_problem;
void ht_pipe_problem_init(ht_pipe_problem *pb, const ht_model *m, const double *times, int world,
                          int kind, int D, int N, int mb, int opt_states,
                          const double *mem_limit, int allow_recompute);
void ht_pipe_problem_free(ht_pipe_problem *pb);

/* bounds[0..D] by ht_part_hetero (stage s on pipeline rank s, every rank a stage, cuts only
 * where pipe/bounds.h allows; the schedule `kind`'s slots in flight; opt_states optimizer
 * floats per parameter; mem_limit [D] bytes per pipeline rank or NULL: none; with
 * allow_recompute the partition may count on recomputation to fit them). With `print`, logs the partition table. HT_OK or
 * HT_EINPUT with ht_errmsg(). */
int ht_pipe_plan_hetero(const ht_model *m, const double *times, int world, int kind, int D,
                        int N, int mb, int opt_states, const double *mem_limit,
                        int allow_recompute, int print, int *bounds);

/* Forward seconds per sample of every layer on every pipeline rank (its slowest replica),
 * from the calibration: fwd[q * L + l], the memory decision's recompute costs. */
void ht_pipe_plan_layer_fwd(const ht_model *m, const double *times, int world, int D, int mb,
                            double *fwd);

/* Forward seconds per micro-batch of each stage of bounds[0..D] on its pipeline rank (the
 * slowest replica), from the calibration: hepipe's ht_pipe_params.stage_time. */
void ht_pipe_plan_stage_times(const ht_model *m, const double *times, int world, int D,
                              const int *bounds, double *stage_time);

#endif
