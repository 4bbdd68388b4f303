/* Data-parallel planning (pure: no MPI, no OpenCL, no I/O, no globals): how many samples of the
 * global batch each rank computes, given measured speeds and device-memory caps, and an online
 * rebalancer that moves samples between ranks when their measured speeds drift. */
#ifndef HT_PLAN_PLAN_H
#define HT_PLAN_PLAN_H

#include <stdint.h>

/* A max_share[] entry meaning "this rank has no memory cap". 0 is a real cap (the device cannot
 * hold a single sample), so a split that has to give that rank its one sample fails loudly. */
#define HT_PLAN_NO_CAP (-1)

/* Splits the global batch B across n ranks in proportion to speed[i] (samples/s, finite, > 0)
 * into integer shares: every share >= 1, the shares sum exactly to B, and
 * share[i] <= max_share[i] unless max_share is NULL or max_share[i] < 0 (HT_PLAN_NO_CAP).
 *
 * The split is the integer minimiser of the synchronous step time max_i share[i]/speed[i]:
 * the proportional part (floor of B*s_i/sum s, clamped to [1, cap]) first, then the leftover
 * samples one at a time to the rank whose time after taking one more is smallest, the lowest
 * rank on ties. With equal speeds that is largest-remainder rounding, lowest rank first
 * (B=10, speeds 1,1,1 -> 4,3,3). With unequal speeds plain largest remainder can be slower than
 * necessary (B=9, speeds 1,1,4: it gives 2,1,6, 2.0 s; this gives 1,1,7, 1.75 s), so the
 * leftovers follow the step time instead. Without caps, and when every B*s_i/sum s >= 1, each
 * share is >= floor(B*s_i/sum s). Capped ranks' excess goes to the others by speed.
 *
 * Returns HT_OK, or HT_EINPUT with ht_errmsg() saying why and what to change: n < 1, B < n, a
 * non-positive or non-finite speed, a cap of 0, caps summing to less than B. share[] is left
 * untouched on error. */
int ht_plan_batch_split(int B, int n, const double *speed, const int *max_share, int *share);

/* The same with a fixed cost per step: rank i's step takes fixed[i] + share[i]/speed[i] seconds
 * (launches, synchronisation, the emulated idle on them: what does not grow with the share),
 * and the split minimises the largest of these. fixed == NULL is ht_plan_batch_split; a fixed
 * time must be finite and >= 0 (else HT_EINPUT). */
int ht_plan_batch_split_affine(int B, int n, const double *speed, const double *fixed,
                               const int *max_share, int *share);

/* Predicted synchronous step time of a split: max_i share[i]/speed[i] (0 when n < 1). */
double ht_plan_step_time(int n, const int *share, const double *speed);
/* max_i fixed[i] + share[i]/speed[i]; fixed may be NULL (0). */
double ht_plan_step_time_affine(int n, const int *share, const double *speed, const double *fixed);

/* Memory cap in samples for a device: floor((device_bytes * usable_fraction - fixed_bytes) /
 * bytes_per_sample), at least 0 and at most INT32_MAX. usable_fraction is clamped to [0, 1]
 * (NaN counts as 0). bytes_per_sample == 0 (nothing grows with the batch) gives INT32_MAX when
 * the fixed part fits, else 0.
 * A result of 0 means the device cannot hold one sample: ht_plan_batch_split rejects it. */
int ht_plan_max_share(uint64_t device_bytes, double usable_fraction, uint64_t fixed_bytes,
                      uint64_t bytes_per_sample);

/* ---------------------------------------------------------------- online rebalancing */

/* Models each rank's compute time per step as fixed[i] + share/ema_speed[i], from exponentially
 * weighted moments of its (share, compute seconds) observations: while the shares have not
 * varied, fixed = 0 and ema_speed = E[share]/E[time] (proportional); once they have (by more
 * than 5% of their mean), a least-squares line gives the fixed part, clamped to [0, 0.95 E[time]]
 * and kept while the shares are steady. It re-splits the batch optimally under that model
 * (ht_plan_batch_split_affine), but only when that is predicted to shorten the step by more than
 * a hysteresis fraction, and not more often than every min_interval steps, so that measurement
 * noise never makes the shares oscillate. A rank with a large fixed cost (launch and
 * synchronisation overheads; an emulated slowdown multiplies them) is then not mistaken for a
 * slow one and starved of samples. */
typedef struct ht_rebalancer {
    int n;               /* ranks */
    double alpha;        /* EMA weight of the newest observation, in (0, 1] */
    double hysteresis;   /* adopt only if (t_now - t_new) > hysteresis * t_now, >= 0 (e.g. 0.05) */
    int min_interval;    /* steps between changes (and from the first counted observation), >= 0 */
    int warmup;          /* observations ignored at the start (compilation, allocation), >= 0 */
    int64_t last_change; /* step of the last change, or of the first counted observation */
    int64_t seen;        /* valid observations so far, warmup included */
    int64_t counted;     /* observations averaged into ema_speed */
    double *ema_speed;   /* [n] samples/s beyond the fixed cost */
    double *fixed;       /* [n] seconds per step that do not grow with the share */
    double *mom;         /* [4n] EMA moments per rank: E b, E t, E b^2, E bt */
    int *proposal;       /* [n] scratch: the split of ema_speed */
} ht_rebalancer;

/* Returns HT_OK, or HT_EINPUT (message in ht_errmsg()) for n < 1 or a parameter out of range;
 * on error *r is zeroed and needs no ht_rebalancer_free. */
int ht_rebalancer_init(ht_rebalancer *r, int n, double alpha, double hysteresis, int min_interval,
                       int warmup);
void ht_rebalancer_free(ht_rebalancer *r);

/* Feeds the compute seconds that each rank spent on its current share[i] at step `step` (steps
 * increase). Observations with a non-positive or non-finite time (or a share < 1) are skipped
 * whole. The first `warmup` observations are ignored; the EMA starts as a plain mean (weight
 * max(alpha, 1/k) for the k-th) so its first value is not one noisy sample. Once
 * step - last_change >= min_interval it proposes ht_plan_batch_split(B, ema_speed, max_share)
 * and adopts it if the predicted step time (ht_plan_step_time under ema_speed) improves by more
 * than the hysteresis fraction. Returns 1 when share[] was changed, 0 when not, or -HT_EINPUT
 * (message in ht_errmsg()) when share[] does not sum to B or the caps make B infeasible; share[]
 * is then unchanged. */
int ht_rebalancer_update(ht_rebalancer *r, int64_t step, int B, const double *compute_s,
                         const int *max_share, int *share);

#endif
