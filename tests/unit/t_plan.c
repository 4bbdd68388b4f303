/* Batch planning (pure, no device): hand-computed splits, exact sums and bounds over many seeded
 * random inputs, optimality against brute force on small cases, memory caps, infeasible inputs,
 * and the online rebalancer under noise, a real slowdown, hysteresis, min_interval and warmup. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/rng.h"
#include "plan/plan.h"
#include "tap.h"

#define MAXN 64

static double unif(uint64_t seed, uint64_t k) { /* [0, 1) with 53 bits */
    return (double)(ht_rng_u64(seed, k) >> 11) * (1.0 / 9007199254740992.0);
}

static int64_t sum_of(int n, const int *b) {
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += b[i];
    return s;
}

static int same(int n, const int *a, const int *b) { return !memcmp(a, b, (size_t)n * sizeof *a); }

static const char *fmt_shares(int n, const int *b) {
    static char buf[512];
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k + 16 < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", i ? "," : "", b[i]);
    return buf;
}

/* Largest-remainder rounding, lowest rank on ties; only for inputs where every floor is >= 1. */
static void largest_remainder(int B, int n, const double *s, int *b) {
    double S = 0, frac[MAXN];
    for (int i = 0; i < n; i++)
        S += s[i];
    int left = B;
    for (int i = 0; i < n; i++) {
        double q = B * s[i] / S;
        b[i] = (int)floor(q);
        frac[i] = q - b[i];
        left -= b[i];
    }
    for (; left > 0; left--) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (frac[i] > frac[best]) best = i;
        b[best]++;
        frac[best] = -1;
    }
}

/* Smallest step time over every integer split of `left` samples over ranks i..n-1, each share
 * in [1, cap] (n <= 3 keeps it small); b[0..i-1] already chosen. */
static double brute_force(int left, int i, int n, const double *s, const int *cap, int *b) {
    if (i == n) return left == 0 ? ht_plan_step_time_affine(n, b, s, NULL) : INFINITY;
    double best = INFINITY;
    for (b[i] = 1; b[i] <= left; b[i]++) {
        if (cap && cap[i] >= 0 && b[i] > cap[i]) break;
        double t = brute_force(left - b[i], i + 1, n, s, cap, b);
        if (t < best) best = t;
    }
    return best;
}

/* ---------------------------------------------------------------- hand-computed splits */

static void expect_split(int B, int n, const double *s, const int *cap, const int *want,
                         const char *what) {
    int got[MAXN];
    int rc = ht_plan_batch_split_affine(B, n, s, NULL, cap, got);
    tap_ok(rc == HT_OK && same(n, got, want), "%s: B=%d -> %s (%s)", what, B,
           rc == HT_OK ? fmt_shares(n, got) : "error", rc == HT_OK ? "ok" : ht_errmsg());
}

static void test_hand(void) {
    expect_split(256, 4, (double[]){1, 1, 2, 4}, NULL, (int[]){32, 32, 64, 128},
                 "speeds 1,1,2,4 exactly proportional");
    expect_split(10, 3, (double[]){1, 1, 1}, NULL, (int[]){4, 3, 3},
                 "speeds 1,1,1: the leftover sample goes to the lowest rank");
    expect_split(11, 3, (double[]){1, 1, 1}, NULL, (int[]){4, 4, 3}, "speeds 1,1,1, two left");
    expect_split(9, 3, (double[]){1, 1, 4}, NULL, (int[]){1, 1, 7},
                 "speeds 1,1,4: 1,1,7 (1.75 s) beats largest remainder's 2,1,6 (2 s)");
    expect_split(5, 5, (double[]){1, 7, 3, 1000, 0.5}, NULL, (int[]){1, 1, 1, 1, 1},
                 "B == n: all ones");
    expect_split(16, 2, (double[]){1, 1000}, NULL, (int[]){1, 15},
                 "speeds 1:1000: the slow rank still gets one sample");
    expect_split(1000, 2, (double[]){1000, 1}, NULL, (int[]){999, 1},
                 "speeds 1000:1, B=1000: slow rank 1 (quota 0.999)");
    expect_split(4, 4, (double[]){1, 1, 1, 1000}, NULL, (int[]){1, 1, 1, 1},
                 "three slow ranks forced to 1 take samples from the fast one");
    expect_split(7, 1, (double[]){3}, NULL, (int[]){7}, "one rank takes the batch");
    expect_split(100, 4, (double[]){1, 1, 1, 1}, (int[]){10, -1, -1, -1}, (int[]){10, 30, 30, 30},
                 "cap 10 on rank 0: its excess spread evenly");
    expect_split(60, 3, (double[]){4, 1, 1}, (int[]){20, HT_PLAN_NO_CAP, HT_PLAN_NO_CAP},
                 (int[]){20, 20, 20}, "speeds 4,1,1, fast rank capped at 20");
    expect_split(60, 3, (double[]){1, 2, 3}, (int[]){-1, -1, 10}, (int[]){17, 33, 10},
                 "speeds 1,2,3, rank 2 capped at 10: 50 left split 1:2, tie to the lowest rank");
    expect_split(12, 3, (double[]){1, 2, 3}, (int[]){-1, -1, 1000}, (int[]){2, 4, 6},
                 "caps above the quota do nothing");
    expect_split(6, 3, (double[]){1, 1, 1}, (int[]){2, 2, 2}, (int[]){2, 2, 2},
                 "caps summing exactly to B");
}

/* ---------------------------------------------------------------- random inputs */

static void test_random(void) {
    const uint64_t seed = 0x91a2b3c4d5e6f701ull;
    int bad_sum = 0, bad_min = 0, bad_cap = 0, bad_floor = 0, bad_upper = 0, bad_lr = 0,
        bad_equal = 0, errors = 0, runs = 0, off_by_one_or_more = 0, cap_runs = 0;
    uint64_t k = 0;
    for (int trial = 0; trial < 20000; trial++) {
        int n = 1 + (int)(unif(seed, k++) * 16);
        int kind = trial % 4; /* 0: log-uniform 1..1000, 1: 1..4, 2: all equal, 3: with caps */
        double s[MAXN];
        int cap[MAXN], b[MAXN];
        for (int i = 0; i < n; i++)
            s[i] = kind == 1   ? 1 + floor(unif(seed, k++) * 4)
                   : kind == 2 ? 2.5
                               : pow(1000.0, unif(seed, k++));
        int B = n + (int)(unif(seed, k++) * (trial % 10 == 0 ? 4 : 2000));
        int *capp = NULL;
        if (kind == 3) {
            /* caps around the quota, some absent; raised until they hold B */
            double S = 0;
            for (int i = 0; i < n; i++)
                S += s[i];
            int64_t room = 0;
            for (int i = 0; i < n; i++) {
                double u = unif(seed, k++);
                cap[i] = u < 0.3 ? HT_PLAN_NO_CAP : 1 + (int)(B * s[i] / S * 2 * u);
                room += cap[i] < 0 ? B : cap[i];
            }
            for (int i = 0; room < B; i = (i + 1) % n)
                if (cap[i] >= 0) cap[i]++, room++;
            capp = cap;
            cap_runs++;
        }
        if (ht_plan_batch_split_affine(B, n, s, NULL, capp, b) != HT_OK) {
            if (errors++ < 3) tap_diag("unexpected error: %s", ht_errmsg());
            continue;
        }
        runs++;
        if (sum_of(n, b) != B) bad_sum++;
        double S = 0, smin = s[0];
        int all_floor_pos = 1;
        for (int i = 0; i < n; i++) {
            S += s[i];
            if (s[i] < smin) smin = s[i];
        }
        for (int i = 0; i < n; i++) {
            if (b[i] < 1) bad_min++;
            if (capp && cap[i] >= 0 && b[i] > cap[i]) bad_cap++;
            if (B * s[i] / S < 1) all_floor_pos = 0;
        }
        if (capp || !all_floor_pos) continue;
        int lr[MAXN];
        largest_remainder(B, n, s, lr);
        int off = 0;
        for (int i = 0; i < n; i++) {
            double q = B * s[i] / S;
            if (b[i] < floor(q)) bad_floor++;
            if (!(b[i] < q + s[i] / smin + 1e-9)) bad_upper++;
            if (fabs(b[i] - q) >= 1) off = 1;
        }
        off_by_one_or_more += off;
        if (kind == 2 && off) bad_equal++;
        if (ht_plan_step_time_affine(n, b, s, NULL) >
            ht_plan_step_time_affine(n, lr, s, NULL) * (1 + 1e-12))
            bad_lr++;
    }
    tap_ok(errors == 0 && runs == 20000, "20000 random splits (n 1..16, B n..n+2000) succeed");
    tap_ok(bad_sum == 0, "shares sum exactly to B (%d bad)", bad_sum);
    tap_ok(bad_min == 0, "every share >= 1 (%d bad)", bad_min);
    tap_ok(bad_cap == 0, "caps respected in %d capped splits (%d bad)", cap_runs, bad_cap);
    tap_ok(bad_floor == 0, "uncapped: share_i >= floor(B*s_i/sum s) (%d bad)", bad_floor);
    tap_ok(bad_upper == 0, "uncapped: share_i < B*s_i/sum s + s_i/s_min (%d bad)", bad_upper);
    tap_ok(bad_equal == 0, "equal speeds: |share_i - B/n| < 1 (%d bad)", bad_equal);
    tap_ok(bad_lr == 0, "step time never worse than largest-remainder rounding (%d worse)", bad_lr);
    tap_diag(
        "%d uncapped splits have some |share_i - B*s_i/sum s| >= 1 (each one to finish sooner)",
        off_by_one_or_more);

    /* Two ranks have either no fractions or two, and one leftover: always within one sample. */
    int bad_prop = 0;
    for (int trial = 0; trial < 2000; trial++) {
        double s[2] = {1, pow(1000.0, unif(seed, k++))};
        int B = 2 + (int)(unif(seed, k++) * 500), b[2];
        ht_plan_batch_split_affine(B, 2, s, NULL, NULL, b);
        for (int i = 0; i < 2; i++)
            if (B * s[i] / (s[0] + s[1]) >= 1 && fabs(b[i] - B * s[i] / (s[0] + s[1])) >= 1)
                bad_prop++;
    }
    tap_ok(bad_prop == 0, "two ranks: |share_i - B*s_i/sum s| < 1 (%d bad)", bad_prop);
}

/* ---------------------------------------------------------------- brute force */

static void test_brute_force(void) {
    const uint64_t seed = 0x5eed0fb7u;
    uint64_t k = 0;
    int cases = 0, worse = 0, errors = 0;
    for (int n = 1; n <= 3; n++)
        for (int B = n; B <= 12; B++)
            for (int rep = 0; rep < 60; rep++) {
                double s[3];
                int cap[3], b[3];
                for (int i = 0; i < n; i++)
                    s[i] =
                        rep % 3 == 0 ? 1 + floor(unif(seed, k++) * 5) : pow(100, unif(seed, k++));
                int *capp = NULL;
                if (rep % 2) {
                    int room = 0;
                    for (int i = 0; i < n; i++) {
                        cap[i] = unif(seed, k++) < 0.3 ? -1 : 1 + (int)(unif(seed, k++) * B);
                        room += cap[i] < 0 ? B : cap[i];
                    }
                    if (room < B) continue;
                    capp = cap;
                }
                cases++;
                if (ht_plan_batch_split_affine(B, n, s, NULL, capp, b) != HT_OK) {
                    errors++;
                    continue;
                }
                int tmp[3];
                double want = brute_force(B, 0, n, s, capp, tmp),
                       got = ht_plan_step_time_affine(n, b, s, NULL);
                if (got > want * (1 + 1e-12)) {
                    if (worse++ < 5)
                        tap_diag("n=%d B=%d: %s takes %.17g, best %.17g", n, B, fmt_shares(n, b),
                                 got, want);
                }
            }
    tap_ok(errors == 0 && worse == 0,
           "n <= 3, B <= 12, %d cases with and without caps: step time equals the brute-force "
           "minimum (%d worse, %d errors)",
           cases, worse, errors);
}

/* ---------------------------------------------------------------- infeasible inputs */

static void expect_einput(int B, int n, const double *s, const int *cap, const char *needle,
                          const char *what) {
    int b[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    ht_error_clear();
    int rc = ht_plan_batch_split_affine(B, n, s, NULL, cap, b);
    int untouched = 1;
    for (int i = 0; i < 8; i++)
        if (b[i] != -7) untouched = 0;
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), needle) && untouched, "%s: \"%s\"", what,
           ht_errmsg());
}

static void test_infeasible(void) {
    double ones[4] = {1, 1, 1, 1};
    expect_einput(3, 4, ones, NULL, "raise the batch size to at least 4", "B < n");
    expect_einput(3, 0, ones, NULL, "0 ranks", "no ranks");
    expect_einput(8, 3, (double[]){1, 0, 1}, NULL, "rank 1 has speed 0", "zero speed");
    expect_einput(8, 3, (double[]){1, 1, -2}, NULL, "rank 2 has speed -2", "negative speed");
    expect_einput(8, 2, (double[]){NAN, 1}, NULL, "rank 0 has speed nan", "NaN speed");
    expect_einput(8, 2, (double[]){1, INFINITY}, NULL, "rank 1 has speed inf", "infinite speed");
    expect_einput(100, 4, ones, (int[]){10, 20, 30, 39}, "holds 99 samples in all",
                  "caps summing to less than B");
    expect_einput(100, 4, ones, (int[]){10, 20, 30, 39}, "lower the batch size to at most 99",
                  "the cap message says what to do");
    expect_einput(8, 2, ones, (int[]){0, -1}, "rank 0's device memory holds 0 samples",
                  "a cap of 0 (device too small)");
}

/* ---------------------------------------------------------------- memory cap, step time */

static void test_memory_cap(void) {
    const uint64_t GiB = 1ull << 30, MiB = 1ull << 20;
    tap_ok(ht_plan_max_share(16 * GiB, 0.9, 2 * GiB, 64 * MiB) == 198,
           "16 GiB * 0.9 - 2 GiB over 64 MiB/sample = 198 (got %d)",
           ht_plan_max_share(16 * GiB, 0.9, 2 * GiB, 64 * MiB));
    tap_ok(ht_plan_max_share(1000, 1.0, 100, 300) == 3, "floor(900/300) = 3");
    tap_ok(ht_plan_max_share(1000, 1.0, 100, 301) == 2, "floor(900/301) = 2");
    tap_ok(ht_plan_max_share(1000, 0.5, 600, 1) == 0, "fixed part larger than usable -> 0");
    tap_ok(ht_plan_max_share(1000, 1.0, 1000, 1) == 0, "nothing left -> 0");
    tap_ok(ht_plan_max_share(1000, 1.0, 0, 0) == INT32_MAX, "0 bytes per sample -> INT32_MAX");
    tap_ok(ht_plan_max_share(UINT64_MAX, 1.0, 0, 1) == INT32_MAX,
           "huge device clamps to INT32_MAX");
    tap_ok(ht_plan_max_share(1000, NAN, 0, 1) == 0 && ht_plan_max_share(1000, -1, 0, 1) == 0,
           "NaN or negative usable fraction -> 0");
    tap_ok(ht_plan_max_share(1000, 7.0, 0, 10) == 100, "usable fraction above 1 clamps to 1");

    tap_ok(ht_plan_step_time_affine(4, (int[]){32, 32, 64, 128}, (double[]){1, 1, 2, 4}, NULL) ==
               32,
           "step time of a proportional split");
    tap_ok(ht_plan_step_time_affine(3, (int[]){2, 1, 6}, (double[]){1, 1, 4}, NULL) == 2,
           "step time is the slowest rank's");
    tap_ok(ht_plan_step_time_affine(0, NULL, NULL, NULL) == 0, "no ranks: 0");
}

/* ---------------------------------------------------------------- rebalancer */

typedef struct sim {
    ht_rebalancer r;
    int n, B, share[MAXN], changes;
    int64_t first_change, last_change_step;
    uint64_t seed, k;
} sim;

/* One step: rank i computes share[i] samples at speed[i], times off by up to +-noise. */
static int sim_step(sim *m, int64_t step, const double *speed, double noise) {
    double t[MAXN];
    for (int i = 0; i < m->n; i++)
        t[i] = m->share[i] / speed[i] * (1 + noise * (2 * unif(m->seed, m->k++) - 1));
    int rc = ht_rebalancer_update(&m->r, step, m->B, t, NULL, m->share);
    if (rc == 1) {
        if (m->changes++ == 0) m->first_change = step;
        m->last_change_step = step;
    }
    return rc;
}

static void sim_init(sim *m, int n, int B, double alpha, double hyst, int min_interval,
                     int warmup) {
    memset(m, 0, sizeof *m);
    m->n = n;
    m->B = B;
    m->seed = 0xc0ffee12345ull;
    m->first_change = m->last_change_step = -1;
    ht_rebalancer_init(&m->r, n, alpha, hyst, min_interval, warmup);
    for (int i = 0; i < n; i++)
        m->share[i] = B / n + (i < B % n);
}

static int near_split(int n, const int *b, const int *want, double tol) {
    for (int i = 0; i < n; i++)
        if (abs(b[i] - want[i]) > tol * want[i]) return 0;
    return 1;
}

static void test_rebalancer(void) {
    const double speed[4] = {100, 200, 300, 400};
    sim m;

    /* Stable speeds with +-3% noise: one adoption (from the even start), then nothing. */
    sim_init(&m, 4, 1000, 0.1, 0.05, 10, 5);
    for (int64_t step = 0; step < 1000; step++)
        sim_step(&m, step, speed, 0.03);
    tap_ok(m.changes == 1, "stable speeds, +-3%% noise, 1000 steps: %d change(s), want 1",
           m.changes);
    tap_ok(m.first_change == 5 + 10, "first adoption at step %lld (warmup 5 + min_interval 10)",
           (long long)m.first_change);
    tap_ok(near_split(4, m.share, (int[]){100, 200, 300, 400}, 0.05),
           "shares near 100,200,300,400: %s", fmt_shares(4, m.share));

    ht_rebalancer_free(&m.r);

    /* One rank becomes 2x slower at step 300: followed within a few steps, then settles. */
    sim_init(&m, 4, 1000, 0.3, 0.05, 3, 5);
    double slow[4] = {100, 200, 300, 200};
    int64_t first_after = -1;
    int changes_before = 0, late_changes = 0;
    for (int64_t step = 0; step < 700; step++) {
        int rc = sim_step(&m, step, step < 300 ? speed : slow, 0.03);
        if (step == 299) changes_before = m.changes;
        if (rc == 1 && step >= 300 && first_after < 0) first_after = step;
        if (rc == 1 && step >= 500) late_changes++;
    }
    tap_ok(first_after >= 300 && first_after <= 305,
           "rank 3 2x slower at step 300: first change at step %lld", (long long)first_after);
    tap_ok(near_split(4, m.share, (int[]){125, 250, 375, 250}, 0.05),
           "shares follow to near 125,250,375,250: %s (%d changes before, %d after)",
           fmt_shares(4, m.share), changes_before, m.changes - changes_before);
    tap_ok(late_changes == 0, "settled: %d changes in steps 500..699", late_changes);

    ht_rebalancer_free(&m.r);

    /* Caps hold through rebalancing: rank 3 (the fastest) may take at most 300. */
    sim_init(&m, 4, 1000, 0.3, 0.05, 3, 0);
    const int caps[4] = {-1, -1, -1, 300};
    int over = 0;
    for (int64_t step = 0; step < 200; step++) {
        double t[4];
        for (int i = 0; i < 4; i++)
            t[i] = m.share[i] / speed[i] * (1 + 0.03 * (2 * unif(m.seed, m.k++) - 1));
        if (ht_rebalancer_update(&m.r, step, 1000, t, caps, m.share) == 1) m.changes++;
        if (m.share[3] > 300) over++;
    }
    tap_ok(over == 0 && m.changes >= 1 && near_split(4, m.share, (int[]){117, 233, 350, 300}, 0.05),
           "cap 300 on the fastest rank held over 200 steps (%d over): %s", over,
           fmt_shares(4, m.share));
    ht_rebalancer_free(&m.r);

    /* Hysteresis: a 3% slower rank improves the step by ~2.3%, below 5%: never adopted; with a
     * 1% hysteresis it is. Noise-free so that only the threshold decides. */
    const double even[4] = {100, 100, 100, 100}, bit_slow[4] = {97, 100, 100, 100};
    sim_init(&m, 4, 1000, 0.2, 0.05, 2, 0);
    for (int64_t step = 0; step < 500; step++)
        sim_step(&m, step, step < 50 ? even : bit_slow, 0);
    tap_ok(m.changes == 0, "hysteresis 0.05 blocks a 2.3%% improvement: %d changes", m.changes);
    ht_rebalancer_free(&m.r);
    sim_init(&m, 4, 1000, 0.2, 0.01, 2, 0);
    for (int64_t step = 0; step < 500; step++)
        sim_step(&m, step, step < 50 ? even : bit_slow, 0);
    tap_ok(m.changes >= 1 && m.first_change >= 50 && m.first_change < 60,
           "hysteresis 0.01 adopts it: %d change(s), first at step %lld, shares %s", m.changes,
           (long long)m.first_change, fmt_shares(4, m.share));

    /* min_interval: after a change, none for min_interval steps even if speeds keep moving. */
    ht_rebalancer_free(&m.r);
    sim_init(&m, 2, 1000, 1.0, 0.0, 20, 0);
    int64_t prev = -1, min_gap = INT64_MAX;
    for (int64_t step = 0; step < 400; step++) {
        double sp[2] = {100, 100 + (double)step}; /* keeps drifting */
        if (sim_step(&m, step, sp, 0) == 1) {
            if (prev >= 0 && step - prev < min_gap) min_gap = step - prev;
            prev = step;
        }
    }
    tap_ok(m.changes >= 5 && min_gap >= 20,
           "drifting speeds, min_interval 20: %d changes, smallest gap %lld steps", m.changes,
           (long long)min_gap);

    /* Warmup: the first observations are ignored, however wild. */
    ht_rebalancer_free(&m.r);
    ht_rebalancer r;
    ht_rebalancer_init(&r, 2, 0.5, 0.05, 0, 3);
    int sh[2] = {50, 50}, rc;
    for (int64_t step = 0; step < 3; step++)
        tap_ok(ht_rebalancer_update(&r, step, 100, (double[]){100.0, 0.5}, NULL, sh) == 0,
               "warmup step %lld ignored", (long long)step);
    rc = ht_rebalancer_update(&r, 3, 100, (double[]){0.5, 0.5}, NULL, sh);
    tap_ok(rc == 0 && r.ema_speed[0] == 100 && r.ema_speed[1] == 100 && sh[0] == 50,
           "first counted observation seeds the EMA (100, 100 samples/s): %g, %g", r.ema_speed[0],
           r.ema_speed[1]);
    tap_ok(ht_rebalancer_update(&r, 4, 100, (double[]){0.5, NAN}, NULL, sh) == 0 && r.seen == 4,
           "an observation with a NaN time is skipped whole");
    tap_ok(ht_rebalancer_update(&r, 5, 99, (double[]){0.5, 0.5}, NULL, sh) == -HT_EINPUT &&
               strstr(ht_errmsg(), "sum to 100, not the global batch 99"),
           "shares not summing to B: \"%s\"", ht_errmsg());
    tap_ok(ht_rebalancer_update(&r, 6, 100, (double[]){0.5, 0.5}, (int[]){10, 20}, sh) ==
                   -HT_EINPUT &&
               strstr(ht_errmsg(), "holds 30 samples"),
           "infeasible caps reported: \"%s\"", ht_errmsg());
    /* Rank 1 now 3x slower (33 samples/s). One such step is outvoted by the median of its
     * last ratios (1, 1, 3); after a second, the median 2 takes k to 1.5 (EMA weight 1/2),
     * 67 samples/s, a 20% gain. */
    rc = ht_rebalancer_update(&r, 7, 100, (double[]){0.5, 1.5}, NULL, sh);
    tap_ok(rc == 0 && sh[0] == 50 && r.k[1] == 1, "one slow step moves nothing: k %g", r.k[1]);
    rc = ht_rebalancer_update(&r, 8, 100, (double[]){0.5, 1.5}, NULL, sh);
    tap_ok(rc == 1 && sh[0] + sh[1] == 100 && sh[0] == 60 && fabs(r.k[1] - 1.5) < 1e-12,
           "a second one is adopted: %s (k %g)", fmt_shares(2, sh), r.k[1]);
    ht_rebalancer_free(&r);

    tap_ok(ht_rebalancer_init(&r, 2, 0, 0.05, 1, 0) == HT_EINPUT && strstr(ht_errmsg(), "alpha"),
           "alpha 0 rejected: \"%s\"", ht_errmsg());
    tap_ok(ht_rebalancer_init(&r, 2, 0.5, -0.1, 1, 0) == HT_EINPUT, "negative hysteresis rejected");
    tap_ok(ht_rebalancer_init(&r, 0, 0.5, 0.1, 1, 0) == HT_EINPUT, "0 ranks rejected");
    tap_ok(ht_rebalancer_init(&r, 2, 0.5, 0.1, -1, 0) == HT_EINPUT, "negative interval rejected");
}

/* A fixed cost per step: the split and the rebalancer's model of it. */
static void test_affine(void) {
    int b[3];
    /* rank 1 pays 4 s per step before its samples: 7 + 0 = 4 + 3, both 7 s */
    int rc = ht_plan_batch_split_affine(10, 2, (double[]){1, 1}, (double[]){0, 4}, NULL, b);
    tap_ok(rc == HT_OK && b[0] == 7 && b[1] == 3, "fixed 0 and 4 s, speeds 1: 7,3 (%d,%d)", b[0],
           b[1]);
    tap_ok(ht_plan_step_time_affine(2, b, (double[]){1, 1}, (double[]){0, 4}) == 7,
           "its step time is 7 s");
    /* a fixed cost larger than the whole batch's time elsewhere: that rank keeps 1 sample */
    rc = ht_plan_batch_split_affine(12, 3, (double[]){1, 2, 1}, (double[]){0, 0, 50}, NULL, b);
    tap_ok(rc == HT_OK && b[2] == 1 && b[0] + b[1] == 11 && b[1] >= 2 * b[0] - 2,
           "a rank whose fixed cost exceeds everything keeps 1 sample: %d,%d,%d", b[0], b[1], b[2]);
    tap_ok(ht_plan_batch_split_affine(10, 2, (double[]){1, 1}, (double[]){0, -1}, NULL, b) ==
                   HT_EINPUT &&
               strstr(ht_errmsg(), "fixed cost of -1"),
           "a negative fixed cost rejected: \"%s\"", ht_errmsg());

    /* The rebalancer learns it: rank 0 takes b/100 s, rank 1 0.5 + b/200 s (a large fixed
     * cost). From 150,50 the optimum is 100,100 (1.0 s each); the proportional first guess
     * moves the shares, and the fitted line then recovers fixed 0.5 s and 200 samples/s. */
    ht_rebalancer r;
    ht_rebalancer_init(&r, 2, 0.5, 0.01, 1, 0);
    int sh[2] = {150, 50}, changes = 0;
    for (int64_t step = 0; step < 60; step++) {
        double t[2] = {sh[0] / 100.0, 0.5 + sh[1] / 200.0};
        changes += ht_rebalancer_update(&r, step, 200, t, NULL, sh) == 1;
    }
    tap_ok(abs(sh[0] - 100) <= 1 && sh[0] + sh[1] == 200, "converges to 100,100 (%s, %d changes)",
           fmt_shares(2, sh), changes);
    tap_ok(fabs(r.fixed[1] - 0.5) < 0.02 && fabs(r.ema_speed[1] - 200) < 10 && r.fixed[0] < 0.02,
           "fitted: rank 1 fixed %.3f s at %.1f samples/s, rank 0 fixed %.3f s", r.fixed[1],
           r.ema_speed[1], r.fixed[0]);
    /* the device gets 10x faster at steady shares: the times fall below the fitted fixed
     * cost, which follows them down, and every speed stays finite and positive */
    int ok_speeds = 1;
    for (int64_t step = 60; step < 80; step++) {
        double t[2] = {sh[0] / 1000.0, 0.05 + sh[1] / 2000.0};
        if (ht_rebalancer_update(&r, step, 200, t, NULL, sh) < 0) ok_speeds = 0;
        for (int i = 0; i < 2; i++)
            ok_speeds &= isfinite(r.ema_speed[i]) && r.ema_speed[i] > 0 && r.fixed[i] >= 0;
    }
    tap_ok(ok_speeds && sh[0] + sh[1] == 200,
           "times falling below the fitted fixed cost: speeds stay positive (%.1f, %.1f)",
           r.ema_speed[0], r.ema_speed[1]);
    ht_rebalancer_free(&r);
}

/* The calibrated model: the cost model through two timings, and a rebalancer that starts
 * from it under timing noise. */
static void test_calibrated(void) {
    double sp, fx;
    ht_plan_affine_from(100, 1.5, 25, 0.75, &sp, &fx);
    tap_ok(fabs(fx - 0.5) < 1e-12 && fabs(sp - 100) < 1e-9,
           "1.5 s at 100, 0.75 s at 25: fixed 0.5 s, 100 samples/s beyond it (%g, %g)", fx, sp);
    ht_plan_affine_from(64, 2.0, 64, 2.0, &sp, &fx);
    tap_ok(fx == 0 && sp == 32, "one share: proportional, 32 samples/s (%g, %g)", fx, sp);
    ht_plan_affine_from(100, 1.0, 25, 1.2, &sp, &fx);
    tap_ok(fabs(fx - 0.9) < 1e-12 && fabs(sp - 1000) < 1e-6,
           "the larger share timed faster (noise): fixed capped at 0.9 t1 (%g, %g)", fx, sp);
    ht_plan_affine_from(100, 1.0, 25, 0.1, &sp, &fx);
    tap_ok(fx == 0 && sp == 100, "a negative intercept: fixed 0 (%g, %g)", fx, sp);

    /* Rank 0: 0.02 s + b/8000, rank 1 (4x slower, its fixed cost too): 0.08 s + b/2000. The
     * optimum of 2048 equalises b0/8000 + 0.02 = 0.08 + (2048 - b0)/2000: b0 = 1734.4. */
    ht_rebalancer r;
    ht_rebalancer_init(&r, 2, 0.3, 0.05, 5, 2);
    const double speed[2] = {8000, 2000}, fixed[2] = {0.02, 0.08};
    int sh[2] = {0, 0};
    int rc = ht_plan_batch_split_affine(2048, 2, speed, fixed, NULL, sh);
    if (rc == HT_OK) rc = ht_rebalancer_calibrate(&r, speed, fixed);
    tap_ok(rc == HT_OK && abs(sh[0] - 1734) <= 1,
           "calibrated split of 2048: %s (optimum 1734.4 : 313.6)", fmt_shares(2, sh));
    /* +-15% uniform timing noise (what two ranks on two cores showed): rare changes, and the
     * shares stay near the optimum */
    int changes = 0, far = 0;
    uint64_t k = 0;
    for (int64_t step = 0; step < 500; step++) {
        double t[2];
        for (int i = 0; i < 2; i++)
            t[i] = (fixed[i] + sh[i] / speed[i]) * (1 + 0.15 * (2 * unif(77, k++) - 1));
        changes += ht_rebalancer_update(&r, step, 2048, t, NULL, sh) == 1;
        far += abs(sh[0] - 1734) > 0.05 * 1734;
    }
    tap_ok(changes <= 10 && far == 0,
           "+-15%% noise, 500 steps: %d change(s), %d steps more than 5%% off the optimum (%s)",
           changes, far, fmt_shares(2, sh));
    /* then rank 1 gets 2x slower as a whole, 0.16 + b/1000 against 0.02 + b/8000: the
     * optimum is b0 = 2.188 / 0.001125 = 1944.9 (noise-free now) */
    for (int64_t step = 500; step < 600; step++) {
        double t[2] = {fixed[0] + sh[0] / speed[0], 2 * (fixed[1] + sh[1] / speed[1])};
        ht_rebalancer_update(&r, step, 2048, t, NULL, sh);
    }
    tap_ok(abs(sh[0] - 1945) <= 0.02 * 1945,
           "rank 1 2x slower: shares follow to %s (optimum 1945:103, within 2%%)",
           fmt_shares(2, sh));
    tap_ok(ht_rebalancer_calibrate(&r, (double[]){1, 0}, NULL) == HT_EINPUT &&
               strstr(ht_errmsg(), "rank 1 calibrated at 0 samples/s"),
           "a calibration with speed 0 rejected: \"%s\"", ht_errmsg());
    tap_ok(ht_rebalancer_calibrate(&r, (double[]){1, 1}, (double[]){0, -1}) == HT_EINPUT,
           "a negative fixed cost rejected");
    ht_rebalancer_free(&r);
}

/* A change the model gets wrong is undone: rank 1's time is 0.2 s + b/1000 while it has at
 * least 50 samples and 0.5 s below (a device that gets slower with less work, as ranks
 * sharing cores can), which no fixed + per-sample model expresses. From 100,100 (0.3 s) the
 * model moves to 150,50 (0.25 s), then wants 167,33 (0.5 s in truth): that is reverted,
 * and retried ever more rarely (or rank 1 is left out, 200,0: 0.2 s, truly better). */
static void test_revert(void) {
    ht_rebalancer r;
    ht_rebalancer_init(&r, 2, 0.5, 0.05, 3, 0);
    ht_rebalancer_calibrate(&r, (double[]){1000, 1000}, NULL);
    int sh[2] = {100, 100}, reverts = 0, bad = 0, judged_ok = 1, back = 1, hold_ok = 1;
    int64_t first_revert = -1, changes_in_hold = 0, hold_until = -1;
    for (int64_t step = 0; step < 400; step++) {
        /* share 0: rank 1 computes nothing (left out) */
        double t[2] = {sh[0] / 1000.0, sh[1] >= 50 ? 0.2 + sh[1] / 1000.0 : sh[1] ? 0.5 : 0};
        bad += step >= 50 && t[1] >= 0.5;
        int rc = ht_rebalancer_update(&r, step, 200, t, NULL, sh);
        if (rc == 1 && step < hold_until) changes_in_hold++;
        if (rc == 1 && r.reverted) {
            judged_ok &= r.t_after > 1.05 * r.t_before;
            back &= sh[0] == 150 && sh[1] == 50;
            /* held for min_interval + window = 8 steps, then 16, 32, ... */
            hold_ok &= r.hold_until == step + (8 << reverts) && r.hold == (16 << reverts);
            hold_until = r.hold_until;
            if (first_revert < 0) first_revert = step;
            reverts++;
        }
    }
    tap_ok(reverts >= 1 && judged_ok && back,
           "a change that made the slowest rank slower is undone: %d reversal(s) (first at step "
           "%lld), each back to 150,50",
           reverts, (long long)first_revert);
    tap_ok(hold_ok && changes_in_hold == 0,
           "after a reversal no change for 8 steps, doubling with each reversal (%lld changes "
           "inside a hold)",
           (long long)changes_in_hold);
    tap_ok(bad <= 35, "%d of 350 steps at the bad split", bad);
    ht_rebalancer_free(&r);
}

/* ---------------------------------------------------------------- leaving ranks out */

/* Step time of a split in which share 0 means "left out": the max over the ranks with samples. */
static double kept_time(int n, const int *b, const double *s, const double *f) {
    double t = 0;
    for (int i = 0; i < n; i++)
        if (b[i] > 0 && f[i] + b[i] / s[i] > t) t = f[i] + b[i] / s[i];
    return t;
}

static void test_exclude_hand(void) {
    /* the job: PoCL ~125,000 samples/s + 0.5 ms, rusticl ~500/s + 258 ms, B = 128.
     * With both, rusticl's one sample costs 258 + 2 = 260 ms; PoCL alone 0.5 + 128/125 ms. */
    double s[2] = {125000, 500}, f[2] = {0.0005, 0.258}, ta = 0, tk = 0;
    int b[2] = {-1, -1};
    int rc = ht_plan_batch_split_exclude(128, 2, s, f, NULL, 0.05, b, &ta, &tk);
    tap_ok(rc == HT_OK && b[0] == 128 && b[1] == 0 && fabs(ta - 0.260) < 1e-12 &&
               fabs(tk - (0.0005 + 128 / 125000.0)) < 1e-15,
           "PoCL + slow rusticl, B=128: rusticl left out (%s), step %.4g s -> %.4g s",
           fmt_shares(2, b), ta, tk);
    /* equal ranks, no fixed cost: nobody left out, the plain split */
    double s2[3] = {1, 1, 1};
    int b3[3], want[3];
    rc = ht_plan_batch_split_exclude(10, 3, s2, NULL, NULL, 0.0, b3, &ta, &tk);
    ht_plan_batch_split_affine(10, 3, s2, NULL, NULL, want);
    tap_ok(rc == HT_OK && same(3, b3, want) && ta == tk && tk == 4.0,
           "equal ranks B=10: nobody left out (%s, 4 s)", fmt_shares(3, b3));
    /* speeds 1, 1; rank 1's fixed cost f1. Both: its one sample takes f1 + 1 against rank 0's
     * 9 s; alone: rank 0 takes 10 s. f1 = 4.5: both win (7 and 3 samples: 7 s and 7.5 s).
     * f1 = 9: 10 s either way: kept (no gain). f1 = 9.6: 10.6 s with it, 10 s without: a 5.7%
     * gain, taken at min_gain 0.05, not at 0.1. */
    const struct {
        double f1, gain;
        int b0, b1;
        double tk;
    } C[] = {{4.5, 0.0, 7, 3, 7.5}, {9, 0.0, 9, 1, 10}, {9.6, 0.05, 10, 0, 10},
             {9.6, 0.1, 9, 1, 10.6}};
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        double sp[2] = {1, 1}, fx[2] = {0, C[i].f1};
        int bb[2];
        rc = ht_plan_batch_split_exclude(10, 2, sp, fx, NULL, C[i].gain, bb, &ta, &tk);
        tap_ok(rc == HT_OK && bb[0] == C[i].b0 && bb[1] == C[i].b1 && fabs(tk - C[i].tk) < 1e-12,
               "speeds 1,1, fixed 0,%g, min_gain %g, B=10: %s in %g s (want %d,%d in %g s)",
               C[i].f1, C[i].gain, fmt_shares(2, bb), tk, C[i].b0, C[i].b1, C[i].tk);
    }
    /* a cap that the fast rank alone cannot meet keeps the slow one in */
    int cap[2] = {100, HT_PLAN_NO_CAP};
    rc = ht_plan_batch_split_exclude(128, 2, s, f, cap, 0.05, b, &ta, &tk);
    tap_ok(rc == HT_OK && b[0] == 100 && b[1] == 28 && ta == tk,
           "the fast rank capped at 100 of 128: the slow rank stays (%s)", fmt_shares(2, b));
    /* errors: as the plain split over everyone, and min_gain out of range; share untouched */
    int u[2] = {-7, -7};
    ht_error_clear();
    rc = ht_plan_batch_split_exclude(1, 2, s, f, NULL, 0.05, u, NULL, NULL);
    int rc2 = ht_plan_batch_split_exclude(128, 2, s, f, NULL, 1.0, u, NULL, NULL);
    tap_ok(rc == HT_EINPUT && rc2 == HT_EINPUT && u[0] == -7 && u[1] == -7,
           "B < n and min_gain 1 rejected, shares untouched (\"%s\")", ht_errmsg());
}

/* Over all splits with shares >= 0 (at least one rank kept), by enumeration. */
static double brute_kept(int B, int n, const double *s, const double *f) {
    double best = INFINITY;
    for (int b0 = 0; b0 <= B; b0++)
        for (int b1 = 0; b1 <= (n > 1 ? B - b0 : 0); b1++) {
            int b[3] = {b0, b1, B - b0 - b1};
            if (n == 1 && b0 != B) continue;
            if (n == 2 && b0 + b1 != B) continue;
            double t = kept_time(n, b, s, f);
            if (t < best) best = t;
        }
    return best;
}

static void test_exclude_brute(void) {
    const uint64_t seed = 0x5eedec1du;
    uint64_t k = 0;
    int cases = 0, worse = 0, bad = 0;
    for (int n = 1; n <= 3; n++)
        for (int B = n; B <= 12; B++)
            for (int rep = 0; rep < 40; rep++) {
                double s[3], f[3], ta, tk;
                for (int i = 0; i < n; i++) {
                    s[i] = pow(100, unif(seed, k++));
                    f[i] = unif(seed, k++) < 0.4 ? 0 : pow(100, unif(seed, k++)) * 0.01 * B;
                }
                int b[3];
                cases++;
                if (ht_plan_batch_split_exclude(B, n, s, f, NULL, 0.0, b, &ta, &tk) != HT_OK ||
                    sum_of(n, b) != B || fabs(kept_time(n, b, s, f) - tk) > 1e-12 * tk) {
                    bad++;
                    continue;
                }
                double want = brute_kept(B, n, s, f);
                if (tk > want * (1 + 1e-12) && worse++ < 5)
                    tap_diag("n=%d B=%d: %s takes %.17g, best %.17g", n, B, fmt_shares(n, b), tk,
                             want);
            }
    tap_ok(bad == 0 && worse == 0,
           "n <= 3, B <= 12, %d random speeds and fixed costs, min_gain 0: the step time equals "
           "the brute-force minimum over splits that may leave ranks out (%d worse, %d bad)",
           cases, worse, bad);
}

/* Bringing a left-out rank back (issue 14), by hand. Rank 0: 10 samples/s, no fixed cost;
 * rank 1: 10 samples/s beyond a fixed 2 s (its calibration, slowdown included). B = 10:
 * everyone 9,1 takes max(0.9, 2.1) = 2.1 s, rank 0 alone 1.0 s, so rank 1 is left out
 * (10,0). Then rank 0 becomes f times slower (its truth f b/10 s, rank 1's 2 + b/10 s, a
 * share-0 rank computes nothing). Alone: f s. Everyone at its best split under the model:
 *   f = 2.2: 9,1 -> max(1.98, 2.1) = 2.1 s, 4.5% better than 2.2: below 5%, stays 10,0
 *   f = 2.3: 9,1 -> max(2.07, 2.1) = 2.1 s (8,2: 2.2 s), 8.7% better: back, to 9,1
 *   f = 4:   6,4 -> max(2.4, 2.4)  = 2.4 s (5,5: 2.5, 7,3: 2.8), 40% better: back, to 6,4
 * The share-0 rank's reported time (here 123 s of nothing) is ignored. */
static void bring_back(double f, int want0, int want1, int want_changes) {
    ht_rebalancer r;
    ht_rebalancer_init(&r, 2, 1.0, 0.05, 0, 0);
    const double speed[2] = {10, 10}, fixed[2] = {0, 2};
    int sh[2];
    double ta = 0, tk = 0;
    int rc = ht_plan_batch_split_exclude(10, 2, speed, fixed, NULL, 0.05, sh, &ta, &tk);
    tap_ok(rc == HT_OK && sh[0] == 10 && sh[1] == 0 && fabs(ta - 2.1) < 1e-12 &&
               fabs(tk - 1.0) < 1e-12,
           "f=%g: start-up split leaves rank 1 out: %d,%d (2.1 s with it, 1.0 s without)", f,
           sh[0], sh[1]);
    ht_rebalancer_calibrate(&r, speed, fixed);
    int changes = 0, early = 0, errs = 0;
    for (int64_t step = 0; step < 40; step++) {
        const double k = step < 10 ? 1 : f;
        double t[2] = {sh[0] ? k * sh[0] / 10 : 0, sh[1] ? 2 + sh[1] / 10.0 : 123};
        int u = ht_rebalancer_update(&r, step, 10, t, NULL, sh);
        errs += u < 0;
        changes += u == 1;
        early += u == 1 && step < 10;
    }
    tap_ok(!errs && !early && changes == want_changes && sh[0] == want0 && sh[1] == want1,
           "f=%g: %d change(s) (want %d, none before the slowdown), shares %d,%d (want %d,%d)", f,
           changes, want_changes, sh[0], sh[1], want0, want1);
    ht_rebalancer_free(&r);
}

static void test_bring_back(void) {
    bring_back(2.2, 10, 0, 0);
    bring_back(2.3, 9, 1, 1);
    bring_back(4.0, 6, 4, 1);
    /* a share-0 rank never calibrated nor observed cannot be judged: nothing moves */
    ht_rebalancer r;
    ht_rebalancer_init(&r, 2, 1.0, 0.05, 0, 0);
    int sh[2] = {10, 0}, moved = 0;
    for (int64_t step = 0; step < 20; step++)
        moved |= ht_rebalancer_update(&r, step, 10, (double[]){step < 5 ? 1.0 : 8.0, 0}, NULL,
                                      sh) != 0;
    tap_ok(!moved && sh[0] == 10 && sh[1] == 0,
           "an uncalibrated share-0 rank stays out (no model to judge it by)");
    ht_rebalancer_free(&r);
    /* a rank with share 0 costs nothing in the predicted step time */
    tap_ok(ht_plan_step_time_affine(2, (int[]){10, 0}, (double[]){10, 1}, (double[]){0, 5}) == 1.0,
           "step time of 10,0 with rank 1's fixed 5 s: 1 s (share 0 does not count)");
}

int main(void) {
    test_hand();
    test_affine();
    test_random();
    test_brute_force();
    test_infeasible();
    test_memory_cap();
    test_rebalancer();
    test_calibrated();
    test_revert();
    test_exclude_hand();
    test_bring_back();
    test_exclude_brute();
    return tap_done();
}
