/* Online re-partitioning of a synchronous pipeline (issue 11, pure: no MPI, no OpenCL).
 *
 * The "hetero" partition is cut once from each layer's time measured at start-up on every
 * pipeline rank's device. When a device later runs slower or faster as a whole (throttling,
 * a shared host, cluster.slowdown_from), the cut no longer balances the stages. This rule
 * follows each pipeline rank's measured compute seconds per step against what the start-up
 * times predict for its current stage (k[q], an exponentially weighted mean of the median of
 * the last HT_REPART_WINDOW ratios, so that one step slowed by the host moves nothing), cuts
 * the model again with ht_part_hetero on the start-up times scaled by k (memory limits,
 * recomputation and where a cut may fall as there), and adopts the new cut only when its
 * predicted slowest stage is shorter than the current one's by more than a hysteresis
 * fraction, and not more often than every min_interval steps. The prediction of both cuts is
 * the same: max over ranks q of k[q] x N micro-batches x the summed forward and backward
 * times of q's layers. A proposal to return to the cut the last change left (or the last
 * reversal abandoned) is refused while every k is within a factor 1 + 4 x hysteresis of k
 * then, unless that cut's measured median step beat the current one's by the hysteresis.
 * Every change is on trial as in the data-parallel rebalancer
 * (plan.h): if the median step time of the HT_REPART_WINDOW steps after it exceeds that of
 * the steps before by more than the hysteresis, the cut goes back and no change is tried for
 * `hold` steps (min_interval + HT_REPART_WINDOW, doubling with each failure). Every rank
 * feeds the same inputs and so takes the same decision. */
#ifndef HT_PLAN_REPART_H
#define HT_PLAN_REPART_H

#include <stdint.h>

#include "plan/partition.h"

#define HT_REPART_WINDOW 5

/* Proposes the cut for the factors k ([D]: measured / start-up compute per rank) into
 * cut[0..D]: HT_OK, or an error (memory: no cut fits), which changes nothing. The pipeline
 * engine's plans the job again (ht_plan_job) on its start-up costs scaled by k. */
typedef int (*ht_repart_propose)(void *ctx, const double *k, int *cut);

typedef struct ht_repart {
    int D;               /* pipeline ranks, 1 .. HT_PART_MAX_RANKS */
    double alpha;        /* EMA weight of the newest ratio, in (0, 1] */
    double hysteresis;   /* adopt only if the predicted slowest stage shrinks by more, [0, 1) */
    int min_interval;    /* steps between changes (and from the first counted step), >= 0 */
    int warmup;          /* observations ignored at the start and after every change (the new
                            executor's first steps allocate), >= 0 */
    int64_t seen;        /* observations since the start or the last change */
    int64_t counted;     /* ratios folded into k */
    int64_t last_change; /* step of the last change, or of the first counted observation */
    double k[HT_PART_MAX_RANKS];                         /* measured / predicted compute */
    double ratio[HT_PART_MAX_RANKS][HT_REPART_WINDOW];   /* the latest ratios per rank */
    double tstep[HT_REPART_WINDOW];                      /* the latest step times */
    int nratio, nstep;                                   /* entries in those windows */
    int prev[HT_PART_MAX_RANKS + 1]; /* the cut before the change on trial */
    int trial;                       /* a change is on trial (its steps: nstep) */
    int reverted;                    /* the last update's change was a reversal */
    int kept;                        /* the last update ended a trial that held */
    double t_before, t_after;        /* median step seconds before and under the last change */
    double pred_before, pred_after;  /* predicted slowest stage (s per step) of the last change */
    /* the cut left by the last change or reversal, its measured median step and the factors
     * then: going back to it needs the measurement's support while the factors have not
     * moved by 4 x the hysteresis (a per-rank factor is not a property of the rank alone
     * when its layers differ: moving the head alone shifted it 10-15% and the cut flipped
     * back and forth every ~10 steps between two cuts measured alike) */
    int other[HT_PART_MAX_RANKS + 1], has_other;
    double t_other, k_other[HT_PART_MAX_RANKS];
    int blocked; /* the last update refused a return to `other` */
    int64_t hold, hold_until;        /* no change tried before step hold_until */
    /* the proposer (set after ht_repart_init), or NULL: ht_part_hetero on the start-up
     * problem's times scaled by k */
    ht_repart_propose propose;
    void *ctx;
} ht_repart;

/* HT_OK, or HT_EINPUT (ht_errmsg()) for a parameter out of range. */
int ht_repart_init(ht_repart *r, int D, double alpha, double hysteresis, int min_interval,
                   int warmup);

/* Predicted compute seconds per step of pipeline rank q on stage [bounds[q], bounds[q+1]):
 * k x B samples x the sum of its layers' fwd + bwd seconds per sample (in->fwd/bwd [q*L+l]),
 * B = in->B (every micro-batch passes every stage). */
double ht_repart_rank_time(const ht_part_input *in, const int *bounds, int q, double k);

/* Feeds step `step` (increasing): compute_s[q] the compute seconds of pipeline rank q in it
 * (FWD, BWD, recompute, emulated slowdown; its slowest replica), step_s the slowest rank's
 * whole step. `in` is the start-up problem (ht_part_hetero's input with in->R = D ranks in
 * rank order: fwd/bwd the start-up times per sample, memory limits, cuts); bounds[0..D] the
 * cut in force. A step with a non-finite or non-positive time is skipped. Returns 1 when
 * bounds[] was changed (r->reverted: back to the cut before the last change), else 0
 * (r->kept: the change on trial held, t_before / t_after the medians that judged it); a
 * proposal ht_part_hetero cannot make (memory) changes nothing. */
int ht_repart_update(ht_repart *r, int64_t step, const ht_part_input *in, const double *compute_s,
                     double step_s, int *bounds);

#endif
