/* Heterogeneity-aware pipeline planning for the pipeline engine (issue 11, HePipe): the
 * "hetero" stage partition and hepipe's per-stage times, from each layer's forward and
 * backward time measured at start-up on every rank's own device (times its emulated
 * cluster.slowdown), the slowest replica of a pipeline rank pacing it. Pure: the trainer
 * measures (train/pipe_calib.h), hetsim models the times, both plan with these functions. */
#ifndef HT_PLAN_PIPE_PLAN_H
#define HT_PLAN_PIPE_PLAN_H

#include "nn/model.h"
#include "plan/partition.h"

/* The hetero partition's problem from the calibration (the arguments as for
 * ht_pipe_plan_hetero below): in.fwd/bwd seconds per sample of every layer on every pipeline
 * rank (its slowest replica), the model's memory description, where cuts may fall. It points
 * at mem_limit, which must outlive it. Free with ht_pipe_problem_free. */
typedef struct ht_pipe_problem {
    ht_part_input in;
    ht_mem_desc desc;
    double *fwd, *bwd, *fixed;
    uint8_t *cut;
} ht_pipe_problem;
/* times1 (may be NULL) is a second calibration at 1 sample per micro-batch: each layer's time
 * is then affine in its samples (in.fixed, the part that does not shrink with them, and
 * in.fwd/bwd the rest per sample), which is what decides how a replicated stage splits its
 * micro-batch; without it the times are proportional to the samples. */
void ht_pipe_problem_init(ht_pipe_problem *pb, const ht_model *m, const double *times,
                          const double *times1, int world, int kind, int D, int N, int mb,
                          int opt_states, const double *mem_limit, int allow_recompute);
void ht_pipe_problem_free(ht_pipe_problem *pb);

/* Which pipeline ranks run each of the schedule's ranks (train/pipe_exec.h's ht_pipe_place): the
 * schedule's rank q on pipeline ranks [first[q], first[q + 1]), pipeline rank p computing
 * samples [off[p], off[p] + cnt[p]) of every micro-batch. Without replicated stages Q = D,
 * first[q] = q, off 0 and cnt the micro-batch. */
typedef struct ht_pipe_groups {
    int D, Q;               /* pipeline ranks, schedule ranks */
    int *first, *off, *cnt; /* [Q + 1], [D], [D] */
} ht_pipe_groups;

/* One pipeline rank per schedule rank, whole micro-batches of mb. Every setter frees what g
 * held (g starts zeroed); ht_pipe_groups_free frees it. */
void ht_pipe_groups_none(ht_pipe_groups *g, int D, int mb);
void ht_pipe_groups_free(ht_pipe_groups *g);
/* pipe.stage_ranks: Q stages, stage q on the next sizes[q] of D pipeline ranks (summing to
 * D, each <= mb), every micro-batch of mb split equally (the first mb % k of a stage of k
 * ranks one sample more). */
void ht_pipe_groups_explicit(ht_pipe_groups *g, int D, const int *sizes, int Q, int mb);
/* 1 when some schedule rank runs on more than one pipeline rank. */
int ht_pipe_groups_replicated(const ht_pipe_groups *g);

/* Host ids of pipeline ranks 0..D-1 for ht_pipe_plan_hetero from any per-rank id (equal ids:
 * one host): host[q] = the first rank with q's id. NULL when they all share one host, or when
 * a host's ranks are not contiguous (*alternating = 1; the partition in rank order needs them
 * so, and plans them as one host then); else host. */
const int *ht_pipe_plan_hosts(const int *id, int D, int *host, int *alternating);
/* bounds[0..Q] by ht_part_hetero (times1 as for ht_pipe_problem_init; host [D] the host id
 * of each pipeline rank, its ranks contiguous, or NULL: one host; a replicated stage stays
 * on one host, and the cut between hosts falls where HePipe's first level puts it) (stages in rank order, every rank running one, cuts only
 * where plan/bounds.h allows; the schedule `kind`'s slots in flight; opt_states optimizer
 * floats per parameter; mem_limit [D] bytes per pipeline rank or NULL: none; with
 * allow_recompute the partition may count on recomputation to fit them). Without
 * allow_replicas stage s runs on pipeline rank s (Q = D); with it a stage may run on a run of
 * adjacent ranks of a host, each micro-batch split between them by speed, and *g (may be
 * NULL without replicas) says how. bounds has room for D + 1. With `print`, logs the
 * partition table. HT_OK or HT_EINPUT with ht_errmsg(). */
int ht_pipe_plan_hetero(const ht_model *m, const double *times, const double *times1,
                        int world, int kind, int D, int N, int mb, int opt_states,
                        const double *mem_limit, int allow_recompute, int allow_replicas,
                        const int *host, int print, int *bounds, ht_pipe_groups *g);

/* Forward seconds per sample of every layer on every schedule rank of g (the slowest of its
 * pipeline ranks and their data-parallel replicas), from the calibration: fwd[q * L + l], the
 * memory decision's recompute costs. */
void ht_pipe_plan_layer_fwd(const ht_model *m, const double *times, int world,
                            const ht_pipe_groups *g, int mb, double *fwd);

/* Forward seconds per micro-batch of each stage of bounds[0..Q] on its schedule rank of g
 * (the slowest pipeline rank at its share of the micro-batch of mb, and of their replicas),
 * from the calibration: hepipe's ht_pipe_params.stage_time. A share is costed as affine in
 * its samples when times1 (the calibration at 1 sample, or NULL) is given, else in
 * proportion. */
void ht_pipe_plan_stage_times(const ht_model *m, const double *times, const double *times1,
                              int world, const ht_pipe_groups *g, int mb, const int *bounds,
                              double *stage_time);

#endif
