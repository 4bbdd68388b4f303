/* Leaving a device out of the speed split (pure). A rank's step costs fixed_i + b_i/s_i: a
 * device whose fixed cost per step (launches, its runtime's overheads) exceeds what its
 * samples save the others sets the pace whatever share it gets; with share 0 it only
 * synchronises. Which ranks to keep: rank i can help only if its first sample finishes before
 * the others' step, c_i = fixed_i + 1/s_i < T, so the best kept set holds the ranks of
 * smallest c_i. The candidates are therefore the prefixes of the ranks in order of c_i
 * (ties: lower rank first); each is split optimally (ht_plan_batch_split_affine) and the
 * fastest prefix wins, unless keeping everyone is within min_gain of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "plan/plan.h"

typedef struct {
    double c;
    int i;
} cost_rank;

static int cmp_cost(const void *a, const void *b) {
    const cost_rank *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? -1 : 1;
    return x->i - y->i;
}

/* The split of B over the k ranks ord[0..k-1] into share[] (others 0); its step time, or
 * INFINITY when those ranks cannot take B (their caps hold less, or k > B). */
static double split_prefix(int B, int k, const cost_rank *ord, const double *speed,
                           const double *fixed, const int *max_share, double *sp, double *fx,
                           int *cap, int *sub, int n, int *share) {
    for (int j = 0; j < k; j++) {
        int i = ord[j].i;
        sp[j] = speed[i], fx[j] = fixed ? fixed[i] : 0, cap[j] = max_share ? max_share[i] : -1;
    }
    int64_t room = 0;
    for (int j = 0; j < k; j++)
        room += cap[j] < 0 ? B : cap[j];
    if (k > B || room < B) return INFINITY;
    if (ht_plan_batch_split_affine(B, k, sp, fx, max_share ? cap : NULL, sub) != HT_OK)
        return INFINITY;
    for (int i = 0; i < n; i++)
        share[i] = 0;
    for (int j = 0; j < k; j++)
        share[ord[j].i] = sub[j];
    return ht_plan_step_time_affine(k, sub, sp, fx);
}

int ht_plan_batch_split_exclude(int B, int n, const double *speed, const double *fixed,
                                const int *max_share, double min_gain, int *share, double *t_all,
                                double *t_kept) {
    if (!(min_gain >= 0 && min_gain < 1))
        return ht_error(HT_EINPUT, "batch split: min_gain %g; expected 0 <= min_gain < 1",
                        min_gain);
    /* everyone: also validates every input (speeds, fixed costs, caps, B >= n) */
    int *all = ht_xcalloc((size_t)n > 0 ? (size_t)n : 1, sizeof *all);
    int rc = ht_plan_batch_split_affine(B, n, speed, fixed, max_share, all);
    if (rc != HT_OK) {
        free(all);
        return rc;
    }
    double ta = ht_plan_step_time_affine(n, all, speed, fixed), best_t = ta;
    cost_rank *ord = ht_xcalloc((size_t)n, sizeof *ord);
    double *sp = ht_xcalloc((size_t)n, sizeof *sp), *fx = ht_xcalloc((size_t)n, sizeof *fx);
    int *cap = ht_xcalloc((size_t)n, sizeof *cap), *sub = ht_xcalloc((size_t)n, sizeof *sub);
    int *cand = ht_xcalloc((size_t)n, sizeof *cand), *best = ht_xcalloc((size_t)n, sizeof *best);
    for (int i = 0; i < n; i++)
        ord[i] = (cost_rank){(fixed ? fixed[i] : 0) + 1 / speed[i], i};
    qsort(ord, (size_t)n, sizeof *ord, cmp_cost);
    memcpy(best, all, (size_t)n * sizeof *best);
    for (int k = 1; k < n; k++) {
        double t = split_prefix(B, k, ord, speed, fixed, max_share, sp, fx, cap, sub, n, cand);
        if (t < best_t) best_t = t, memcpy(best, cand, (size_t)n * sizeof *best);
    }
    if (!(best_t < (1 - min_gain) * ta)) /* not worth leaving anyone out */
        best_t = ta, memcpy(best, all, (size_t)n * sizeof *best);
    memcpy(share, best, (size_t)n * sizeof *share);
    if (t_all) *t_all = ta;
    if (t_kept) *t_kept = best_t;
    free(all), free(ord), free(sp), free(fx), free(cap), free(sub), free(cand), free(best);
    return HT_OK;
}
