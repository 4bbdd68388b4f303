/* Batch split across ranks of different speeds (pure). In synchronous data parallelism a step
 * lasts max_i b_i/s_i; subject to sum b_i = B that is smallest when every rank finishes at once,
 * b_i = B*s_i/sum s (were some b_i/s_i below the max, moving work to it from the last rank to
 * finish would shorten the step), so the split is speed-proportional, then rounded optimally. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "core/err.h"
#include "plan/plan.h"

/* ---------------------------------------------------------------- validation */

static int check_inputs(int B, int n, const double *speed, const int *max_share) {
    if (n < 1) return ht_error(HT_EINPUT, "batch split: %d ranks; need at least 1", n);
    if (B < n)
        return ht_error(HT_EINPUT,
                        "batch split: global batch %d is smaller than the %d ranks, and every "
                        "rank needs at least one sample: raise the batch size to at least %d or "
                        "run fewer ranks",
                        B, n, n);
    for (int i = 0; i < n; i++)
        if (!isfinite(speed[i]) || speed[i] <= 0)
            return ht_error(HT_EINPUT,
                            "batch split: rank %d has speed %g samples/s; speeds must be finite "
                            "and > 0 (was the rank measured?)",
                            i, speed[i]);
    if (!max_share) return HT_OK;
    int64_t room = 0;
    for (int i = 0; i < n; i++) {
        if (max_share[i] == 0)
            return ht_error(HT_EINPUT,
                            "batch split: rank %d's device memory holds 0 samples, and every rank "
                            "needs at least one: free device memory, shrink the model, or run "
                            "without that device",
                            i);
        room += max_share[i] < 0 ? B : (max_share[i] < B ? max_share[i] : B);
    }
    if (room < B)
        return ht_error(HT_EINPUT,
                        "batch split: the ranks' device memory holds %lld samples in all, fewer "
                        "than the global batch %d: lower the batch size to at most %lld, free "
                        "device memory, or add ranks",
                        (long long)room, B, (long long)room);
    return HT_OK;
}

/* ---------------------------------------------------------------- split */

/* Upper bound of rank i: its cap, and never more than leaves one sample for each other rank. */
static int upper(int B, int n, const int *max_share, int i) {
    int hi = B - (n - 1);
    if (max_share && max_share[i] >= 0 && max_share[i] < hi) hi = max_share[i];
    return hi;
}

/* Share of rank i if every rank may run for time t: floor(t*s_i) clamped to [1, hi]. */
static int share_at(double t, double s, int hi) {
    double b = floor(t * s);
    if (b < 1) return 1;
    if (b >= hi) return hi;
    return (int)b;
}

/* fixed[i] seconds (0 when fixed is NULL) */
static double fixed_of(const double *fixed, int i) { return fixed ? fixed[i] : 0; }

static int64_t fill_at(double t, int B, int n, const double *speed, const double *fixed,
                       const int *max_share) {
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += share_at(t - fixed_of(fixed, i), speed[i], upper(B, n, max_share, i));
    return sum;
}

/* Think of sample k of rank i as costing time f_i + k/s_i: a split's step time is its dearest
 * sample, so the best split takes the B - n cheapest samples beyond each rank's first (caps
 * allowed). Bisection finds the largest time t at which the samples costing <= t still fit in
 * B; the few left (those costing just above t) go one by one to the cheapest, lowest rank on
 * ties. */
int ht_plan_batch_split_affine(int B, int n, const double *speed, const double *fixed,
                               const int *max_share, int *share) {
    int rc = check_inputs(B, n, speed, max_share);
    if (rc != HT_OK) return rc;
    double fmax = 0;
    for (int i = 0; fixed && i < n; i++) {
        if (!isfinite(fixed[i]) || fixed[i] < 0)
            return ht_error(HT_EINPUT,
                            "batch split: rank %d has a fixed cost of %g s per step; expected a "
                            "finite time >= 0",
                            i, fixed[i]);
        if (fixed[i] > fmax) fmax = fixed[i];
    }

    double smin = speed[0];
    for (int i = 1; i < n; i++)
        if (speed[i] < smin) smin = speed[i];
    /* fill(lo) = n <= B; fill(hi) = the sum of the uppers >= B */
    double lo = 0, hi = fmax + (double)B / smin + 1;
    /* Ends when lo and hi are adjacent doubles; 2200 halvings span the whole double range. */
    for (int it = 0; it < 2200; it++) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        if (fill_at(mid, B, n, speed, fixed, max_share) <= B)
            lo = mid;
        else
            hi = mid;
    }

    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        share[i] = share_at(lo - fixed_of(fixed, i), speed[i], upper(B, n, max_share, i));
        sum += share[i];
    }
    for (; sum < B; sum++) {
        int best = -1;
        double best_t = 0;
        for (int i = 0; i < n; i++) {
            if (share[i] >= upper(B, n, max_share, i)) continue;
            double t = fixed_of(fixed, i) + (share[i] + 1.0) / speed[i];
            if (best < 0 || t < best_t) {
                best = i;
                best_t = t;
            }
        }
        share[best] += 1; /* best >= 0: the uppers sum to >= B (checked) */
    }
    return HT_OK;
}

/* ---------------------------------------------------------------- step time, memory cap */

double ht_plan_step_time_affine(int n, const int *share, const double *speed, const double *fixed) {
    double t = 0;
    for (int i = 0; i < n; i++) {
        if (share[i] < 1) continue; /* left out: no forward or backward */
        double ti = fixed_of(fixed, i) + share[i] / speed[i];
        if (ti > t) t = ti;
    }
    return t;
}

int ht_plan_max_share(uint64_t device_bytes, double usable_fraction, uint64_t fixed_bytes,
                      uint64_t bytes_per_sample) {
    if (!(usable_fraction > 0)) return 0; /* also NaN */
    if (usable_fraction > 1) usable_fraction = 1;
    double usable = floor((double)device_bytes * usable_fraction);
    if (usable <= (double)fixed_bytes) return 0;
    if (bytes_per_sample == 0) return INT32_MAX;
    double k = floor((usable - (double)fixed_bytes) / (double)bytes_per_sample);
    return k >= (double)INT32_MAX ? INT32_MAX : (int)k;
}
