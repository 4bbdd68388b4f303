/* Data-parallel planning (pure: no MPI, no OpenCL, no I/O, no globals): how many samples of the
 * global batch each rank computes, given measured speeds and device-memory caps, and an online
 * rebalancer that moves samples between ranks when their measured speeds drift. */
#ifndef HT_PLAN_PLAN_H
#define HT_PLAN_PLAN_H

#include <stdint.h>

/* A max_share[] entry meaning "this rank has no memory cap". 0 is a real cap (the device cannot
 * hold a single sample), so a split that has to give that rank its one sample fails loudly. */
#define HT_PLAN_NO_CAP (-1)

/* Splits the global batch B across n ranks into integer shares: every share >= 1, the shares
 * sum exactly to B, and share[i] <= max_share[i] unless max_share is NULL or max_share[i] < 0
 * (HT_PLAN_NO_CAP). Rank i's step takes fixed[i] + share[i]/speed[i] seconds (speed in
 * samples/s, finite, > 0; fixed: launches, synchronisation, the emulated idle on them, what
 * does not grow with the share, finite and >= 0; fixed == NULL: none, a split in proportion
 * to speed), and the split is the integer minimiser of the largest of these.
 *
 * Without fixed costs: the proportional part (floor of B*s_i/sum s, clamped to [1, cap]), then
 * the leftover samples one at a time to the rank whose time after taking one more is
 * smallest, the lowest rank on ties. With equal speeds that is largest-remainder rounding,
 * lowest rank first (B=10, speeds 1,1,1 -> 4,3,3). With unequal speeds plain largest
 * remainder can be slower than necessary (B=9, speeds 1,1,4: it gives 2,1,6, 2.0 s; this gives
 * 1,1,7, 1.75 s), so the leftovers follow the step time instead. Without caps, and when every
 * B*s_i/sum s >= 1, each share is >= floor(B*s_i/sum s). Capped ranks' excess goes to the
 * others by speed.
 *
 * Returns HT_OK, or HT_EINPUT with ht_errmsg() saying why and what to change: n < 1, B < n, a
 * non-positive or non-finite speed, a negative or non-finite fixed cost, a cap of 0, caps
 * summing to less than B. share[] is left untouched on error. */
int ht_plan_batch_split_affine(int B, int n, const double *speed, const double *fixed,
                               const int *max_share, int *share);

/* The same split, except that ranks may be left out (share 0: they only synchronise) when
 * that shortens the step: a rank whose fixed cost per step exceeds what its samples save the
 * others sets the pace whatever share it gets (rusticl's llvmpipe beside PoCL: 258 ms of
 * fixed cost per step against PoCL's whole step of ~1 ms). Candidates are the splits over
 * the k ranks of smallest fixed[i] + 1/speed[i] (k = 1..n, ties: lower rank first), each as
 * ht_plan_batch_split_affine; the fastest is kept, and everyone is kept unless leaving ranks
 * out predicts a step shorter by more than min_gain (a fraction in [0, 1), e.g. 0.05), so
 * that timing noise does not drop a rank that nearly pays its way. Every share of a kept rank
 * is >= 1, the shares sum to B, caps hold as there; a prefix whose caps cannot hold B, or
 * with more ranks than B, is not a candidate. *t_all (may be NULL) gets the predicted step
 * time with every rank, *t_kept that of the split returned (equal when nobody is left out).
 * Errors as ht_plan_batch_split_affine over all n ranks (share[] untouched), or HT_EINPUT
 * for min_gain outside [0, 1). */
int ht_plan_batch_split_exclude(int B, int n, const double *speed, const double *fixed,
                                const int *max_share, double min_gain, int *share,
                                double *t_all, double *t_kept);

/* Predicted synchronous step time of a split: max_i fixed[i] + share[i]/speed[i] over the
 * ranks with share[i] >= 1 (a rank with share 0 runs no forward or backward, so its fixed
 * cost does not count); fixed may be NULL (0); 0 when n < 1. */
double ht_plan_step_time_affine(int n, const int *share, const double *speed, const double *fixed);

/* Memory cap in samples for a device: floor((device_bytes * usable_fraction - fixed_bytes) /
 * bytes_per_sample), at least 0 and at most INT32_MAX. usable_fraction is clamped to [0, 1]
 * (NaN counts as 0). bytes_per_sample == 0 (nothing grows with the batch) gives INT32_MAX when
 * the fixed part fits, else 0.
 * A result of 0 means the device cannot hold one sample: ht_plan_batch_split_affine rejects
 * it. */
int ht_plan_max_share(uint64_t device_bytes, double usable_fraction, uint64_t fixed_bytes,
                      uint64_t bytes_per_sample);

/* ---------------------------------------------------------------- online rebalancing */

/* The cost model of one rank through two timings: t1 seconds for s1 samples and t2 for
 * s2 < s1 (s2 may equal s1: then purely proportional). *fixed = t1 - s1 (t1 - t2)/(s1 - s2),
 * clamped to [0, 0.9 t1] (timing noise can make the larger share look no slower), and
 * *speed = s1 / (t1 - *fixed) samples/s beyond it. Needs s1 >= 1 and t1 > 0, finite. */
void ht_plan_affine_from(double s1, double t1, double s2, double t2, double *speed, double *fixed);

/* Models each rank's compute time per step at share b as k[i] (fixed0[i] + b / speed0[i]).
 * The shape (fixed0, speed0) comes from a calibration (ht_rebalancer_calibrate: timed passes at
 * two shares, or a profile), or, without one, from the first counted observation as purely
 * proportional (fixed0 = 0). k[i] is an exponentially weighted mean of the median of the last
 * HT_REBALANCE_WINDOW ratios of observed over modelled time (one step slowed by the host moves
 * nothing), so a device that slows down or speeds up as a whole (throttling, a shared host, an
 * emulated slowdown) is followed from every step whatever the shares. The shape is re-fitted
 * from exponentially weighted moments of the (share, time) observations by least squares only
 * once they determine it: the standard error of the fitted fixed part below a quarter of the
 * mean time, i.e. shares spread widely compared with the timing noise (a fit taken whenever the
 * shares had moved by 5% made the fixed cost swing with +-15% timing noise and starved ranks,
 * while a calibration alone misses costs that appear only at run time, as when ranks share
 * cores and a small share's time hardly shrinks).
 * It re-splits the batch optimally under the model (ht_plan_batch_split_affine), but only when
 * that is predicted to shorten the step by more than a hysteresis fraction, and not more often
 * than every min_interval steps, so that measurement noise never makes the shares oscillate.
 * A change the model got wrong (the measured slowest rank got slower by more than the
 * hysteresis) is undone, with an exponential back-off before the next try. */
#define HT_REBALANCE_WINDOW 5 /* ratios whose median feeds k */
typedef struct ht_rebalancer {
    int n;               /* ranks */
    double alpha;        /* EMA weight of the newest observation, in (0, 1] */
    double hysteresis;   /* adopt only if (t_now - t_new) > hysteresis * t_now, >= 0 (e.g. 0.05) */
    int min_interval;    /* steps between changes (and from the first counted observation), >= 0 */
    int warmup;          /* observations ignored at the start (compilation, allocation), >= 0 */
    int calibrated;      /* the shape came from ht_rebalancer_calibrate */
    int64_t last_change; /* step of the last change, or of the first counted observation */
    int64_t seen;        /* valid observations so far, warmup included */
    int64_t counted;     /* observations averaged into k */
    double *speed0;      /* [n] the shape: samples/s beyond the fixed cost ... */
    double *fixed0;      /* [n] ... and seconds per step that do not grow with the share */
    double *k;           /* [n] EMA of observed / modelled time */
    int64_t *obs;        /* [n] observations folded into each rank's model (share >= 1 only) */
    double *mom;         /* [5n] EMA moments per rank: E b, E t, E b^2, E bt, E t^2 */
    double *last;        /* [HT_REBALANCE_WINDOW n] the latest ratios of observed / modelled time */
    double *ema_speed;   /* [n] the current model: speed0 / k ... */
    double *fixed;       /* [n] ... and k fixed0 */
    int *proposal;       /* [n] scratch: the split under the model */
    /* every change is on trial: if the median slowest-rank compute time of the
     * HT_REBALANCE_WINDOW steps after it exceeds that of the steps before it by more than the
     * hysteresis, the shares go back and no change is tried for `hold` steps (min_interval +
     * HT_REBALANCE_WINDOW, doubling with each failure, back to that after a change that held) */
    double tmax[HT_REBALANCE_WINDOW]; /* the last steps' slowest compute times */
    int *prev;                        /* [n] the shares before the change on trial */
    int trial, trial_seen;            /* a change is on trial; steps seen under it */
    double t_before, t_after;         /* median slowest time before and under the last change */
    int reverted;                     /* the last update's change was a reversal */
    int64_t hold, hold_until;         /* no change tried before step hold_until */
} ht_rebalancer;

/* Returns HT_OK, or HT_EINPUT (message in ht_errmsg()) for n < 1 or a parameter out of range;
 * on error *r is zeroed and needs no ht_rebalancer_free. */
int ht_rebalancer_init(ht_rebalancer *r, int n, double alpha, double hysteresis, int min_interval,
                       int warmup);
void ht_rebalancer_free(ht_rebalancer *r);

/* Sets the shape of every rank's cost model (speed[i] finite > 0, fixed[i] finite >= 0; fixed
 * may be NULL for 0), e.g. from ht_plan_affine_from; k restarts at 1. Returns HT_OK or
 * HT_EINPUT. */
int ht_rebalancer_calibrate(ht_rebalancer *r, const double *speed, const double *fixed);

/* Feeds the compute seconds that each rank spent on its current share[i] at step `step` (steps
 * increase). Observations with a non-positive or non-finite time of a rank with a share >= 1
 * are skipped whole. A rank with share 0 (left out) is not observed: its model stays as last
 * known (the calibration, which includes any emulated slowdown, or its last observations)
 * and judges whether it pays to bring it back; while a share-0 rank has no model at all
 * (never calibrated nor observed) nothing changes. The first `warmup` observations are
 * ignored; the EMA starts as a plain mean (weight max(alpha, 1/k) for the k-th) so its first
 * value is not one noisy sample. Once step - last_change >= min_interval it proposes
 * ht_plan_batch_split_exclude(B, ema_speed, fixed, max_share, hysteresis) (a rank may be left
 * out, or brought back) and adopts it if the predicted step time (ht_plan_step_time_affine)
 * improves by more than the hysteresis fraction. Returns 1 when share[] was changed, 0 when
 * not, or -HT_EINPUT (message in ht_errmsg()) when share[] does not sum to B or the caps make
 * B infeasible; share[] is then unchanged. */
int ht_rebalancer_update(ht_rebalancer *r, int64_t step, int B, const double *compute_s,
                         const int *max_share, int *share);
/* (A return of 1 with r->reverted set is the reversal of the change on trial: share[] is back
 * to r->prev, and r->t_before / r->t_after hold the median slowest times that judged it.) */

#endif
