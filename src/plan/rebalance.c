/* Online rebalancing of the batch split (pure): a model of each rank's step time as a fixed
 * cost plus a cost per sample, its shape calibrated (timed passes, a profile, and later the
 * observations themselves once they determine it) and its scale followed by an exponentially
 * weighted mean, an optimal re-split under that model, and hysteresis plus a
 * minimum interval between changes, so that noise in the timings never makes shares oscillate
 * while a real slowdown is followed in a few steps. */
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
    r->speed0 = ht_xcalloc((size_t)n, sizeof *r->speed0);
    r->fixed0 = ht_xcalloc((size_t)n, sizeof *r->fixed0);
    r->k = ht_xcalloc((size_t)n, sizeof *r->k);
    r->obs = ht_xcalloc((size_t)n, sizeof *r->obs);
    r->mom = ht_xcalloc((size_t)n * 5, sizeof *r->mom);
    r->last = ht_xcalloc((size_t)n * HT_REBALANCE_WINDOW, sizeof *r->last);
    r->prev = ht_xcalloc((size_t)n, sizeof *r->prev);
    r->hold = min_interval + HT_REBALANCE_WINDOW;
    r->ema_speed = ht_xcalloc((size_t)n, sizeof *r->ema_speed);
    r->fixed = ht_xcalloc((size_t)n, sizeof *r->fixed);
    r->proposal = ht_xcalloc((size_t)n, sizeof *r->proposal);
    return HT_OK;
}

void ht_plan_affine_from(double s1, double t1, double s2, double t2, double *speed, double *fixed) {
    double f = s1 > s2 ? t1 - s1 * (t1 - t2) / (s1 - s2) : 0;
    if (!(f > 0)) f = 0; /* also NaN */
    if (f > 0.9 * t1) f = 0.9 * t1;
    *fixed = f;
    *speed = s1 / (t1 - f);
}

int ht_rebalancer_calibrate(ht_rebalancer *r, const double *speed, const double *fixed) {
    for (int i = 0; i < r->n; i++) {
        double f = fixed ? fixed[i] : 0;
        if (!(isfinite(speed[i]) && speed[i] > 0 && isfinite(f) && f >= 0))
            return ht_error(HT_EINPUT,
                            "rebalancer: rank %d calibrated at %g samples/s with a fixed cost of "
                            "%g s; expected a finite speed > 0 and a finite cost >= 0",
                            i, speed[i], f);
    }
    for (int i = 0; i < r->n; i++) {
        r->speed0[i] = r->ema_speed[i] = speed[i];
        r->fixed0[i] = r->fixed[i] = fixed ? fixed[i] : 0;
        r->k[i] = 1;
    }
    r->calibrated = 1;
    r->counted = 0;
    memset(r->obs, 0, (size_t)r->n * sizeof *r->obs);
    return HT_OK;
}

void ht_rebalancer_free(ht_rebalancer *r) {
    free(r->speed0);
    free(r->fixed0);
    free(r->k);
    free(r->obs);
    free(r->mom);
    free(r->last);
    free(r->prev);
    free(r->ema_speed);
    free(r->fixed);
    free(r->proposal);
    memset(r, 0, sizeof *r);
}

/* The median of v[0..n), 1 <= n <= HT_REBALANCE_WINDOW (the mean of the middle two for even n). */
static double median(const double *v, int n) {
    double s[HT_REBALANCE_WINDOW];
    for (int i = 0; i < n; i++) { /* insertion sort */
        int j = i;
        for (; j > 0 && s[j - 1] > v[i]; j--)
            s[j] = s[j - 1];
        s[j] = v[i];
    }
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Folds rank i's observation (t seconds at share b >= 1) into its model: the k-th of this
 * rank (a rank with share 0 is not observed, so its count may lag the others'). */
static void observe(ht_rebalancer *r, int i, double b, double t) {
    const int64_t c = ++r->obs[i];
    if (c == 1 && !(r->speed0[i] > 0)) { /* no calibration: proportional, this speed */
        r->speed0[i] = b / t;
        r->fixed0[i] = 0;
    }
    /* A plain mean while it has fewer than 1/alpha samples, then the EMA proper. */
    const double w = r->alpha > 1.0 / (double)c ? r->alpha : 1.0 / (double)c;
    const double neff = w > r->alpha ? (double)c : (2 - r->alpha) / r->alpha;
    /* how much of the last-observation window is filled */
    const int full = c < HT_REBALANCE_WINDOW ? (int)c : HT_REBALANCE_WINDOW;
    /* the median of the last few ratios of observed to modelled time: one step slowed by the
     * host (a descheduled process, a page fault storm) moves nothing */
    double *last = r->last + HT_REBALANCE_WINDOW * i;
    last[(c - 1) % HT_REBALANCE_WINDOW] = t / (r->fixed0[i] + b / r->speed0[i]);
    const double ratio = median(last, full);
    r->k[i] = c == 1 ? ratio : w * ratio + (1 - w) * r->k[i];
    /* moments of (b, t): E b, E t, E b^2, E bt, E t^2 */
    const double x[5] = {b, t, b * b, b * t, t * t};
    double *m = r->mom + 5 * i;
    for (int j = 0; j < 5; j++)
        m[j] = c == 1 ? x[j] : w * x[j] + (1 - w) * m[j];
    /* Re-calibrate the shape from the observations once they pin the fixed part down: the
     * least-squares line t = a + c b, taken when the standard error of a is below a quarter
     * of the mean time (shares spread widely compared with the timing noise). */
    const double vb = m[2] - m[0] * m[0], cov = m[3] - m[0] * m[1], vt = m[4] - m[1] * m[1];
    if (c >= 3 && vb > 1e-12 * m[2]) {
        const double sl = cov / vb, s2 = vt - sl * cov > 0 ? vt - sl * cov : 0;
        const double se_a = sqrt(s2 * (1 / neff + m[0] * m[0] / (neff * vb)));
        if (se_a < 0.25 * m[1]) {
            double a = m[1] - sl * m[0];
            a = a < 0 ? 0 : a > 0.95 * m[1] ? 0.95 * m[1] : a;
            r->fixed0[i] = a;
            r->speed0[i] = m[0] / (m[1] - a);
            r->k[i] = 1;
        }
    }
    r->ema_speed[i] = r->speed0[i] / r->k[i];
    r->fixed[i] = r->k[i] * r->fixed0[i];
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
    /* A rank with share 0 (left out) computes nothing: its time says nothing about its
     * speed, and its model stays as last known (its calibration, slowdown included). One
     * that never had a model cannot be judged: then nothing moves. */
    for (int i = 0; i < n; i++)
        if (share[i] > 0 ? !isfinite(compute_s[i]) || compute_s[i] <= 0
                         : share[i] < 0 || (!(r->speed0[i] > 0) && r->obs[i] == 0))
            return 0;

    if (++r->seen <= r->warmup) return 0;
    r->counted++;
    for (int i = 0; i < n; i++)
        if (share[i] > 0) observe(r, i, share[i], compute_s[i]);
    /* the step's slowest compute, whose median over the last few steps judges a change */
    const int full = r->counted < HT_REBALANCE_WINDOW ? (int)r->counted : HT_REBALANCE_WINDOW;
    double slowest = 0; /* of the ranks that compute */
    for (int i = 0; i < n; i++)
        if (share[i] > 0 && compute_s[i] > slowest) slowest = compute_s[i];
    r->tmax[(r->counted - 1) % HT_REBALANCE_WINDOW] = slowest;
    r->reverted = 0;
    if (r->trial && ++r->trial_seen >= HT_REBALANCE_WINDOW) {
        /* the verdict on the last change, from HT_REBALANCE_WINDOW steps under it */
        r->t_after = median(r->tmax, HT_REBALANCE_WINDOW);
        r->trial = 0;
        if (r->t_after > (1 + r->hysteresis) * r->t_before) {
            memcpy(share, r->prev, (size_t)n * sizeof *share);
            r->reverted = 1;
            r->last_change = step;
            r->hold_until = step + r->hold;
            r->hold *= 2; /* each failed change waits twice as long before the next try */
            return 1;
        }
        r->hold = r->min_interval + HT_REBALANCE_WINDOW;
    }
    if (r->counted == 1) r->last_change = step; /* the interval also runs from the first sample */
    if (r->trial || step < r->hold_until || step - r->last_change < r->min_interval) return 0;

    /* the same rule as the start-up split: a rank is left out, or brought back, when the
     * predicted step is shorter by more than the hysteresis that way */
    int rc = ht_plan_batch_split_exclude(B, n, r->ema_speed, r->fixed, max_share, r->hysteresis,
                                         r->proposal, NULL, NULL);
    if (rc != HT_OK) return -rc;
    const double t_now = ht_plan_step_time_affine(n, share, r->ema_speed, r->fixed);
    const double t_new = ht_plan_step_time_affine(n, r->proposal, r->ema_speed, r->fixed);
    if (!(t_now - t_new > r->hysteresis * t_now)) return 0;
    memcpy(r->prev, share, (size_t)n * sizeof *share);
    memcpy(share, r->proposal, (size_t)n * sizeof *share);
    r->last_change = step;
    r->trial = 1; /* judged once HT_REBALANCE_WINDOW steps have run under it */
    r->trial_seen = 0;
    r->t_before = median(r->tmax, full);
    return 1;
}
