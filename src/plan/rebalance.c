/* Online rebalancing of the batch split (pure): a model of each rank's step time as a fixed
 * cost plus a cost per sample, fitted to exponentially weighted moments of its (share, time)
 * observations, an optimal re-split under that model, and hysteresis plus a minimum interval
 * between changes, so that noise in the timings never makes shares oscillate while a real
 * slowdown is followed in a few steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "plan/plan.h"

int ht_rebalancer_init(ht_rebalancer *r, int n, double alpha, double hysteresis, int min_interval,
                       int warmup) {
    memset(r, 0, sizeof *r);
    if (n < 1) return ht_error(HT_EINPUT, "rebalancer: %d ranks; need at least 1", n);
    if (!(alpha > 0 && alpha <= 1))
        return ht_error(HT_EINPUT, "rebalancer: smoothing alpha %g; expected a value in (0, 1]",
                        alpha);
    if (!(hysteresis >= 0 && hysteresis < 1))
        return ht_error(HT_EINPUT,
                        "rebalancer: hysteresis %g; expected a fraction in [0, 1) such as 0.05",
                        hysteresis);
    if (min_interval < 0 || warmup < 0)
        return ht_error(HT_EINPUT, "rebalancer: min_interval %d, warmup %d; expected steps >= 0",
                        min_interval, warmup);
    r->n = n;
    r->alpha = alpha;
    r->hysteresis = hysteresis;
    r->min_interval = min_interval;
    r->warmup = warmup;
    r->ema_speed = ht_xcalloc((size_t)n, sizeof *r->ema_speed);
    r->fixed = ht_xcalloc((size_t)n, sizeof *r->fixed);
    r->mom = ht_xcalloc((size_t)n * 4, sizeof *r->mom);
    r->proposal = ht_xcalloc((size_t)n, sizeof *r->proposal);
    return HT_OK;
}

void ht_rebalancer_free(ht_rebalancer *r) {
    free(r->ema_speed);
    free(r->fixed);
    free(r->mom);
    free(r->proposal);
    memset(r, 0, sizeof *r);
}

int ht_rebalancer_update(ht_rebalancer *r, int64_t step, int B, const double *compute_s,
                         const int *max_share, int *share) {
    const int n = r->n;
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += share[i];
    if (sum != B)
        return -ht_error(HT_EINPUT,
                         "rebalancer: the current shares sum to %lld, not the global batch %d",
                         (long long)sum, B);
    for (int i = 0; i < n; i++)
        if (!isfinite(compute_s[i]) || compute_s[i] <= 0 || share[i] <= 0) return 0;

    if (++r->seen <= r->warmup) return 0;
    r->counted++;
    /* A plain mean while it has fewer than 1/alpha samples, then the EMA proper. */
    const double w = r->alpha > 1.0 / (double)r->counted ? r->alpha : 1.0 / (double)r->counted;
    for (int i = 0; i < n; i++) {
        /* moments of (b, t): E b, E t, E b^2, E bt */
        const double b = share[i], t = compute_s[i], x[4] = {b, t, b * b, b * t};
        double *m = r->mom + 4 * i;
        for (int j = 0; j < 4; j++)
            m[j] = r->counted == 1 ? x[j] : w * x[j] + (1 - w) * m[j];
        /* t = a + c b by least squares once the shares have varied enough (more than 5% of
         * their mean, as rebalancing makes them) and time grows with the share; the fixed part
         * a is kept in [0, 0.95 E t] and stays at its last fit (within that bound) while the
         * shares are steady */
        const double var = m[2] - m[0] * m[0], cov = m[3] - m[0] * m[1];
        if (var > 0.0025 * m[0] * m[0] && cov > 0) {
            double a = m[1] - cov / var * m[0];
            r->fixed[i] = a < 0 ? 0 : a > 0.95 * m[1] ? 0.95 * m[1] : a;
        }
        if (r->fixed[i] > 0.95 * m[1]) r->fixed[i] = 0.95 * m[1]; /* times fell since the fit */
        r->ema_speed[i] = m[0] / (m[1] - r->fixed[i]);
    }
    if (r->counted == 1) r->last_change = step; /* the interval also runs from the first sample */
    if (step - r->last_change < r->min_interval) return 0;

    int rc = ht_plan_batch_split_affine(B, n, r->ema_speed, r->fixed, max_share, r->proposal);
    if (rc != HT_OK) return -rc;
    const double t_now = ht_plan_step_time_affine(n, share, r->ema_speed, r->fixed);
    const double t_new = ht_plan_step_time_affine(n, r->proposal, r->ema_speed, r->fixed);
    if (!(t_now - t_new > r->hysteresis * t_now)) return 0;
    memcpy(share, r->proposal, (size_t)n * sizeof *share);
    r->last_change = step;
    return 1;
}
