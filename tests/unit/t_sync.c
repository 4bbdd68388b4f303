/* Synchronisation decision rules (pure, no MPI): SAP-Reduce weights and update against
 * hand-computed values, SSP bounds, DASP speed groups and scaling, the P-Reduce group generator
 * step by step, the gossip round-robin schedule's structure, the adaptive gossip trigger and the
 * push-sum merge. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sync/rules.h"
#include "tap.h"

static int near(double got, double want, double tol) { return fabs(got - want) <= tol; }

static int same_ints(const int *a, const int *b, int n) {
    return !memcmp(a, b, (size_t)n * sizeof *a);
}

static void expect_w(const int64_t *t, int p, double alpha, const double *want, const char *what) {
    double w[16], sum = 0;
    ht_sap_weights(t, p, alpha, w);
    for (int i = 0; i < p; i++) {
        tap_ok(near(w[i], want[i], 1e-12), "%s: w[%d] = %.15g (want %.15g)", what, i, w[i],
               want[i]);
        sum += w[i];
    }
    tap_ok(near(sum, 1.0, 1e-12), "%s: weights sum to 1 (%.17g)", what, sum);
}

/* ------------------------------------------------------------------ SAP-Reduce weights */

static void test_sap_weights(void) {
    for (int p = 1; p <= 4; p++) {
        int64_t t[4] = {7, 7, 7, 7};
        double w[4];
        ht_sap_weights(t, p, 0.9, w);
        int all = 1;
        for (int i = 0; i < p; i++)
            all &= near(w[i], 1.0 / p, 1e-15);
        tap_ok(all, "equal timestamps, p = %d: every weight is 1/%d", p, p);
    }

    /* t = {10, 9, 7}, alpha 0.9: s = {1, 2, 4}, T = 4; level masses 0.1, 0.09, 0.081, 0.0729;
     * level 3 is empty, its 0.081 goes to level 1: {0.181, 0.09, 0.0729} / (1 - 0.9^4 = 0.3439) */
    const int64_t t1[3] = {10, 9, 7};
    const double w1[3] = {0.181 / 0.3439, 0.09 / 0.3439, 0.0729 / 0.3439};
    expect_w(t1, 3, 0.9, w1, "skewed {10, 9, 7} alpha 0.9");
    const int64_t t1p[3] = {7, 10, 9};
    const double w1p[3] = {w1[2], w1[0], w1[1]};
    expect_w(t1p, 3, 0.9, w1p, "skewed, permuted {7, 10, 9}");

    /* t = {5, 4, 4}, alpha 0.5: s = {1, 2, 2}, masses 0.5, 0.25 (split in two), total 0.75 */
    const int64_t t2[3] = {5, 4, 4};
    const double w2[3] = {2.0 / 3, 1.0 / 6, 1.0 / 6};
    expect_w(t2, 3, 0.5, w2, "two members at level 2");

    /* t = {8, 8, 6}, alpha 0.5: s = {1, 1, 3}, masses 0.5, 0.25 (empty), 0.125, total 0.875;
     * level 1 holds 0.75 split in two: {0.375, 0.375, 0.125} / 0.875 = {3/7, 3/7, 1/7} */
    const int64_t t3[3] = {8, 8, 6};
    const double w3[3] = {3.0 / 7, 3.0 / 7, 1.0 / 7};
    expect_w(t3, 3, 0.5, w3, "two members at level 1 plus an empty level");

    /* alpha 0.5, t = {3, 2, 1, 0}: s = 1..4, masses 1/2, 1/4, 1/8, 1/16 over 15/16 */
    const int64_t t4[4] = {3, 2, 1, 0};
    const double w4[4] = {8.0 / 15, 4.0 / 15, 2.0 / 15, 1.0 / 15};
    expect_w(t4, 4, 0.5, w4, "alpha 0.5, staleness 1..4");

    const int64_t t5[1] = {42};
    const double w5[1] = {1.0};
    expect_w(t5, 1, 0.9, w5, "p = 1");

    /* T = 200: s = {1, 2, 101, 200}; levels 3..100 and 102..199 are empty and go to level 1 */
    const int64_t t6[4] = {200, 199, 100, 1};
    double tot = 1 - pow(0.9, 200);
    const double w6[4] = {(tot - 0.09 - 0.1 * pow(0.9, 100) - 0.1 * pow(0.9, 199)) / tot,
                          0.09 / tot, 0.1 * pow(0.9, 100) / tot, 0.1 * pow(0.9, 199) / tot};
    expect_w(t6, 4, 0.9, w6, "T = 200");
    double w[4];
    ht_sap_weights(t6, 4, 0.9, w);
    tap_ok(w[0] > w[1] && w[1] > w[2] && w[2] > w[3] && w[3] > 0,
           "T = 200: weights decrease with staleness and stay positive");
}

/* ------------------------------------------------------------------ SAP-Reduce update */

static void test_sap_update(void) {
    /* equal weights 1/3: members {1,2,3}, {4,5,6}, {7,8,12}: S = {4, 5, 7} */
    float x[3] = {1, 2, 3};
    const float S[3] = {4, 5, 7};
    ht_sap_update(x, S, 3, 1.0 / 3, 3);
    tap_ok(tap_max_abserr(x, S, 3) <= 1e-6, "equal weights: the update is the plain average");

    /* skewed weights of {10, 9, 7} (alpha 0.9), scalar models x = {1, 2, 4}:
     * S = (0.181*1 + 0.09*2 + 0.0729*4) / 0.3439 = 0.6526 / 0.3439; member 2 (w = 0.0729/0.3439):
     * (S - w*4) / (1 - w) = 0.361 / 0.271, so x' = (2 * 0.361/0.271 + 4) / 3 = 2.2214022140... */
    float S1 = (float)(0.6526 / 0.3439);
    float x2 = 4;
    ht_sap_update(&x2, &S1, 1, 0.0729 / 0.3439, 3);
    tap_ok(near(x2, (2 * 0.361 / 0.271 + 4) / 3, 1e-6), "skewed weights, stalest member: %.9g", x2);
    tap_ok(near(x2, 2.2214022140221, 1e-6), "skewed weights, stalest member: 2.2214022");
    /* member 0 (w = 0.181/0.3439): others' weighted mean (0.09*2 + 0.0729*4) / 0.1629 */
    float x0 = 1;
    ht_sap_update(&x0, &S1, 1, 0.181 / 0.3439, 3);
    tap_ok(near(x0, (1 + 2 * 0.4716 / 0.1629) / 3, 1e-6), "skewed weights, freshest member: %.9g",
           x0);

    float one[2] = {1.5f, -2.0f};
    const float S2[2] = {100, 100};
    ht_sap_update(one, S2, 2, 1.0, 1);
    tap_ok(one[0] == 1.5f && one[1] == -2.0f, "p = 1 leaves x unchanged");

    /* equal models stay equal whatever the weights */
    const int64_t t[3] = {10, 9, 7};
    double w[3];
    ht_sap_weights(t, 3, 0.9, w);
    const float c[3] = {0.3f, -1.7f, 2.5f};
    float Sc[3], xs[3][3];
    for (int k = 0; k < 3; k++)
        Sc[k] = (float)((w[0] + w[1] + w[2]) * c[k]);
    for (int j = 0; j < 3; j++) {
        memcpy(xs[j], c, sizeof c);
        ht_sap_update(xs[j], Sc, 3, w[j], 3);
        tap_ok(tap_max_abserr(xs[j], c, 3) <= 1e-6, "equal models stay equal: member %d", j);
    }
}

/* ------------------------------------------------------------------------------- SSP */

static void test_ssp(void) {
    const int64_t clock[4] = {5, 3, 8, 1};
    const int act[4] = {1, 1, 1, 0}, all[4] = {1, 1, 1, 1}, none[4] = {0}, one[4] = {0, 0, 1, 0};
    tap_ok(ht_ssp_min_clock(clock, act, 4) == 3, "min clock ignores the inactive worker");
    tap_ok(ht_ssp_min_clock(clock, all, 4) == 1, "min clock over all");
    tap_ok(ht_ssp_min_clock(clock, one, 4) == 8, "min clock of a single active worker");
    tap_ok(ht_ssp_min_clock(clock, none, 4) == INT64_MAX, "min clock with none active");
    tap_ok(ht_ssp_may_run(7, 3, 4) == 1, "c - min == s may run");
    tap_ok(ht_ssp_may_run(8, 3, 4) == 0, "c - min == s + 1 waits");
    tap_ok(ht_ssp_may_run(3, 3, 0) == 1, "s = 0: level with the slowest may run");
    tap_ok(ht_ssp_may_run(4, 3, 0) == 0, "s = 0: one ahead waits");
    tap_ok(ht_ssp_may_run(2, 3, 0) == 1, "behind the min clock may run");
    tap_ok(ht_ssp_may_run(1000, INT64_MAX, 0) == 1, "nobody active: may run");
}

/* ------------------------------------------------------------------------------ DASP */

static void expect_dasp(const double *tau, const int *active, int n, double similar,
                        const int *want_state, const int *want_group, int want_units,
                        const char *what) {
    int state[16], group[16];
    int units = ht_dasp_assign(tau, active, n, similar, state, group);
    tap_ok(same_ints(state, want_state, n) && same_ints(group, want_group, n) &&
               units == want_units,
           "%s (units %d, want %d)", what, units, want_units);
}

static void test_dasp(void) {
    enum { A = HT_DASP_ASYNC, S = HT_DASP_SYNC };
    const int on[8] = {1, 1, 1, 1, 1, 1, 1, 1};

    const double t1[4] = {1, 1.1, 2, 4};
    expect_dasp(t1, on, 4, 1.5, (int[]){S, S, A, A}, (int[]){0, 0, -1, -1}, 3,
                "{1, 1.1, 2, 4}: 0 and 1 synchronous, 2 and 3 asynchronous");
    const double t2[4] = {2, 2, 2, 2};
    expect_dasp(t2, on, 4, 1.5, (int[]){S, S, S, S}, (int[]){0, 0, 0, 0}, 1,
                "all equal: one synchronous group");
    const double t3[4] = {1, 0, 1.2, -1};
    expect_dasp(t3, on, 4, 1.5, (int[]){S, A, S, A}, (int[]){0, -1, 0, -1}, 3,
                "unknown tau is asynchronous");
    const double t4[3] = {1, 1.1, 1.2};
    expect_dasp(t4, (int[]){1, 0, 1}, 3, 1.5, (int[]){S, A, S}, (int[]){0, -1, 0}, 1,
                "inactive is asynchronous and not an update source");
    const double t5[3] = {1, 1.4, 1.9};
    expect_dasp(t5, on, 3, 1.5, (int[]){S, S, A}, (int[]){0, 0, -1}, 2,
                "chain {1, 1.4, 1.9}: the ratio is to the group's fastest");
    const double t6[4] = {3, 1, 3, 1};
    expect_dasp(t6, on, 4, 1.0, (int[]){S, S, S, S}, (int[]){1, 0, 1, 0}, 2,
                "similar 1: equal taus group together, fastest group is 0");
    /* singletons take no group number: SYNC groups are numbered 0, 1, ... among themselves */
    const double t7[3] = {1, 3, 3.1};
    expect_dasp(t7, on, 3, 1.5, (int[]){A, S, S}, (int[]){-1, 0, 0}, 2,
                "a fast singleton does not take group number 0");
    const double t8[5] = {4, 1, 4.1, 1.2, 10};
    expect_dasp(t8, on, 5, 1.5, (int[]){S, S, S, S, A}, (int[]){1, 0, 1, 0, -1}, 3,
                "two synchronous groups numbered from the fastest");
    expect_dasp(t8, (int[]){0, 0, 0, 0, 0}, 5, 1.5, (int[]){A, A, A, A, A},
                (int[]){-1, -1, -1, -1, -1}, 0, "nobody active: no update sources");

    /* order independence: sorted {1, 1.1 | 2 | 4, 5, 5.5 | 9} with similar 1.5 */
    const double base[7] = {1, 1.1, 2, 4, 5, 5.5, 9};
    const int bs[7] = {S, S, A, S, S, S, A}, bg[7] = {0, 0, -1, 1, 1, 1, -1};
    expect_dasp(base, on, 7, 1.5, bs, bg, 4, "seven workers, sorted input");
    const int perms[4][7] = {
        {6, 5, 4, 3, 2, 1, 0}, {3, 4, 5, 6, 0, 1, 2}, {2, 6, 0, 4, 1, 5, 3}, {5, 0, 3, 1, 6, 2, 4}};
    for (int q = 0; q < 4; q++) {
        double tau[7];
        int ws[7], wg[7];
        for (int k = 0; k < 7; k++) {
            tau[k] = base[perms[q][k]];
            ws[k] = bs[perms[q][k]];
            wg[k] = bg[perms[q][k]];
        }
        expect_dasp(tau, on, 7, 1.5, ws, wg, 4, "permuted input gives the permuted answer");
    }

    tap_ok(ht_dasp_scale(0, 1) == 1.0, "scale: sigma 0, units 1 -> 1");
    tap_ok(ht_dasp_scale(1, 1) == 1.0, "scale: sigma 1, units 1 -> 1");
    tap_ok(ht_dasp_scale(0, 3) == 1.0, "scale: sigma 0, units 3 -> 1");
    tap_ok(ht_dasp_scale(2, 3) == 1.0, "scale: sigma 2, units 3 -> 1 (capped)");
    tap_ok(ht_dasp_scale(3, 3) == 1.0, "scale: sigma 3, units 3 -> 1");
    tap_ok(near(ht_dasp_scale(9, 3), 1.0 / 3, 1e-15), "scale: sigma 9, units 3 -> 1/3");
    tap_ok(ht_dasp_scale(4, 0) == 0.25, "scale: units 0 counts as 1");
    tap_ok(ht_dasp_scale(2, -5) == 0.5, "scale: negative units count as 1");

    /* a server update worth 1/8 of a step: SGD's gradient x 1/8; AdamW's rate x 1/8 (its
     * step m/(sqrt(v)+eps) is the same for g and g/8, so scaling g would change nothing) */
    double gs, ls;
    ht_ps_share_scales(0, 0.125, &gs, &ls);
    tap_ok(gs == 0.125 && ls == 1.0, "server share 1/8, SGD: gradient x 1/8, rate x 1");
    ht_ps_share_scales(1, 0.125, &gs, &ls);
    tap_ok(gs == 1.0 && ls == 0.125, "server share 1/8, AdamW: gradient x 1, rate x 1/8");
}

/* ---------------------------------------------------------- P-Reduce group generator */

static int next_is(ht_pgroup *g, double now, const int *want, int k, const char *what) {
    int out[16];
    int got = ht_pgroup_next(g, now, out);
    return tap_ok(got == k && same_ints(out, want, k), "%s (%d members, want %d)", what, got, k);
}

static void test_pgroup(void) {
    ht_pgroup g;
    int out[16];

    /* P = 2 of 4, no deadline, no global groups */
    ht_pgroup_init(&g, 4, 2, 0, 0);
    tap_ok(ht_pgroup_next(&g, 0, out) == 0, "nothing waiting: no group");
    ht_pgroup_ready(&g, 2, 0.0);
    tap_ok(ht_pgroup_next(&g, 0.05, out) == 0, "one of P = 2 waiting: no group");
    tap_ok(ht_pgroup_wait_hint(&g, 0.05) == -1, "no deadline: wait hint -1");
    ht_pgroup_ready(&g, 0, 0.1);
    next_is(&g, 0.1, (int[]){2, 0}, 2, "ready 2 then 0: group {2, 0}");
    tap_ok(g.groups == 1 && g.len == 0, "one group formed, queue empty");
    ht_pgroup_ready(&g, 3, 1);
    ht_pgroup_ready(&g, 1, 2);
    ht_pgroup_ready(&g, 0, 3);
    next_is(&g, 3, (int[]){3, 1}, 2, "FIFO: the first two of 3, 1, 0");
    tap_ok(ht_pgroup_next(&g, 100, out) == 0, "0 left alone without a deadline waits");
    ht_pgroup_ready(&g, 2, 4);
    next_is(&g, 4, (int[]){0, 2}, 2, "then 0 with 2");
    ht_pgroup_ready(&g, 1, 5);
    ht_pgroup_ready(&g, 1, 6);
    tap_ok(g.len == 1, "ready twice is queued once");
    ht_pgroup_ready(&g, 3, 7);
    next_is(&g, 7, (int[]){1, 3}, 2, "after a double ready: {1, 3}");
    tap_ok(g.groups == 4, "four groups formed");
    ht_pgroup_free(&g);

    /* P = 3 of 4 with a deadline of 2 s */
    ht_pgroup_init(&g, 4, 3, 2.0, 0);
    tap_ok(ht_pgroup_wait_hint(&g, 0) == -1, "deadline, nothing waiting: wait hint -1");
    ht_pgroup_ready(&g, 1, 10.0);
    tap_ok(ht_pgroup_wait_hint(&g, 10.5) == 1.5, "wait hint: 1.5 s to the deadline");
    tap_ok(ht_pgroup_next(&g, 11.0, out) == 0, "before the deadline: no group");
    next_is(&g, 12.0, (int[]){1}, 1, "at the deadline a lone worker goes on alone");
    tap_ok(g.groups == 0, "a group of one is not counted");
    ht_pgroup_ready(&g, 2, 20);
    ht_pgroup_ready(&g, 2, 21);
    tap_ok(ht_pgroup_wait_hint(&g, 21) == 1.0, "a second ready keeps the first time");
    ht_pgroup_ready(&g, 0, 21.5);
    tap_ok(ht_pgroup_next(&g, 21.9, out) == 0, "two of three before the deadline: no group");
    next_is(&g, 22.0, (int[]){2, 0}, 2, "deadline: everyone waiting, {2, 0}");
    tap_ok(g.groups == 1, "the deadline group of two is counted");
    ht_pgroup_ready(&g, 3, 30);
    tap_ok(ht_pgroup_wait_hint(&g, 35) == 0, "wait hint past the deadline is 0");
    ht_pgroup_ready(&g, 1, 30.5);
    ht_pgroup_ready(&g, 0, 31);
    next_is(&g, 31, (int[]){3, 1, 0}, 3, "full before the deadline");
    ht_pgroup_free(&g);

    /* global_every 3: groups 3, 6, ... hold every active worker */
    ht_pgroup_init(&g, 4, 2, 0, 3);
    ht_pgroup_ready(&g, 0, 0);
    ht_pgroup_ready(&g, 1, 0);
    next_is(&g, 0, (int[]){0, 1}, 2, "global_every 3: group 1 is partial");
    ht_pgroup_ready(&g, 2, 1);
    ht_pgroup_ready(&g, 3, 1);
    next_is(&g, 1, (int[]){2, 3}, 2, "group 2 is partial");
    ht_pgroup_ready(&g, 1, 2);
    ht_pgroup_ready(&g, 0, 2);
    tap_ok(ht_pgroup_next(&g, 2, out) == 0, "group 3 waits for everyone though P are ready");
    ht_pgroup_ready(&g, 3, 3);
    tap_ok(ht_pgroup_next(&g, 3, out) == 0, "group 3 still waits with three of four");
    ht_pgroup_ready(&g, 2, 4);
    next_is(&g, 4, (int[]){1, 0, 3, 2}, 4, "group 3 holds all four in queue order");
    ht_pgroup_ready(&g, 3, 5);
    ht_pgroup_ready(&g, 2, 5);
    next_is(&g, 5, (int[]){3, 2}, 2, "group 4 is partial again");
    ht_pgroup_ready(&g, 0, 6);
    ht_pgroup_ready(&g, 1, 6);
    next_is(&g, 6, (int[]){0, 1}, 2, "group 5 is partial");
    ht_pgroup_ready(&g, 0, 7);
    ht_pgroup_ready(&g, 1, 7);
    ht_pgroup_ready(&g, 2, 7);
    tap_ok(ht_pgroup_next(&g, 7, out) == 0, "group 6 waits for worker 3");
    ht_pgroup_leave(&g, 3);
    next_is(&g, 8, (int[]){0, 1, 2}, 3, "after 3 leaves, group 6 holds the other three");
    tap_ok(g.groups == 6, "six groups formed");
    ht_pgroup_free(&g);

    /* leave takes a worker off the queue */
    ht_pgroup_init(&g, 4, 3, 0, 0);
    ht_pgroup_ready(&g, 0, 0);
    ht_pgroup_ready(&g, 1, 0);
    ht_pgroup_leave(&g, 0);
    ht_pgroup_leave(&g, 0);
    tap_ok(g.len == 1 && g.nactive == 3, "leave dequeues once and counts once");
    ht_pgroup_ready(&g, 0, 1);
    tap_ok(g.len == 1, "ready after leave is ignored");
    ht_pgroup_ready(&g, 2, 1);
    tap_ok(ht_pgroup_next(&g, 1, out) == 0, "three active, P = 3, two waiting: no group");
    ht_pgroup_ready(&g, 3, 2);
    next_is(&g, 2, (int[]){1, 2, 3}, 3, "the left worker is not in the group");
    /* rule 3: fewer active than P */
    ht_pgroup_leave(&g, 1);
    ht_pgroup_ready(&g, 3, 3);
    tap_ok(ht_pgroup_next(&g, 3, out) == 0, "two active of P = 3, one waiting: no group");
    ht_pgroup_ready(&g, 2, 4);
    next_is(&g, 4, (int[]){3, 2}, 2, "two active of P = 3, both waiting: group {3, 2}");
    tap_ok(g.groups == 2, "that group is counted");
    ht_pgroup_leave(&g, 2);
    ht_pgroup_ready(&g, 3, 5);
    next_is(&g, 5, (int[]){3}, 1, "the last active worker goes on alone");
    tap_ok(g.groups == 2, "and is not counted");
    ht_pgroup_free(&g);

    /* P > n behaves as n */
    ht_pgroup_init(&g, 3, 5, 0, 0);
    ht_pgroup_ready(&g, 1, 0);
    ht_pgroup_ready(&g, 0, 0);
    tap_ok(ht_pgroup_next(&g, 0, out) == 0, "P = 5 of 3: two waiting is not enough");
    ht_pgroup_ready(&g, 2, 1);
    next_is(&g, 1, (int[]){1, 0, 2}, 3, "P = 5 of 3: all three form a group");
    ht_pgroup_free(&g);
}

/* ------------------------------------------------------------------------------ gossip */

static void test_gossip(void) {
    /* circle method by hand: n = 4 round 0 (centre 3 with 0, 1 with 2); n = 3 round 0 */
    int p4[4], p3[3];
    for (int i = 0; i < 4; i++)
        p4[i] = ht_gossip_peer(i, 0, 4);
    for (int i = 0; i < 3; i++)
        p3[i] = ht_gossip_peer(i, 0, 3);
    tap_ok(same_ints(p4, (int[]){3, 2, 1, 0}, 4), "n = 4, round 0: {0,3} {1,2}");
    tap_ok(same_ints(p3, (int[]){-1, 2, 1}, 3), "n = 3, round 0: {1,2}, 0 sits out");
    tap_ok(ht_gossip_peer(0, 0, 1) == -1 && ht_gossip_peer(0, 5, 1) == -1, "n = 1: no peer");

    for (int n = 2; n <= 9; n++) {
        int cycle = n % 2 ? n : n - 1;
        int sym = 1, self = 0, range = 1, sitout = 1, periodic = 1;
        int meet[9][9] = {{0}};
        for (int r = 0; r < 3 * cycle; r++) {
            int idle = 0;
            for (int i = 0; i < n; i++) {
                int p = ht_gossip_peer(i, r, n);
                if (p == i) self = 1;
                if (p < -1 || p >= n) {
                    range = 0;
                    continue;
                }
                if (p == -1) {
                    idle++;
                    continue;
                }
                if (ht_gossip_peer(p, r, n) != i) sym = 0;
                if (r < cycle && i < p) meet[i][p]++;
                if (p != ht_gossip_peer(i, r + cycle, n)) periodic = 0;
            }
            if (idle != n % 2) sitout = 0;
        }
        int once = 1;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                once &= meet[i][j] == 1;
        tap_ok(range && !self, "n = %d: peers in range, never oneself", n);
        tap_ok(sym, "n = %d: peer(peer(i)) == i", n);
        tap_ok(sitout, "n = %d: %s", n,
               n % 2 ? "exactly one sits out per round" : "nobody sits out");
        tap_ok(once, "n = %d: every pair meets exactly once per cycle of %d rounds", n, cycle);
        tap_ok(periodic, "n = %d: the schedule repeats every %d rounds", n, cycle);
    }

    tap_ok(ht_gossip_due(0.25, 1, 0.25, 0, 0) == 0, "due: change equal to theta is not due");
    tap_ok(ht_gossip_due(0.5, 2, 0.25, 0, 0) == 0, "due: relative change equal to theta");
    tap_ok(ht_gossip_due(0.5000001, 2, 0.25, 0, 0) == 1, "due: just above theta");
    tap_ok(ht_gossip_due(0.1, 2, 0.25, 0, 0) == 0, "due: below theta");
    tap_ok(ht_gossip_due(0, 0, 0.25, 0, 0) == 1, "due: w_last_norm 0 counts as moved");
    tap_ok(ht_gossip_due(0.1, 0, 10, 0, 0) == 1, "due: w_last_norm 0 with a large theta");
    tap_ok(ht_gossip_due(0, 1, 0.25, 5, 5) == 1, "due: max_period reached");
    tap_ok(ht_gossip_due(0, 1, 0.25, 4, 5) == 0, "due: one step before max_period");
    tap_ok(ht_gossip_due(0, 1, 0.25, 1000, 0) == 0, "due: max_period 0 is the threshold alone");
    tap_ok(ht_gossip_due(1, 1, 0.25, 1000, 0) == 1, "due: max_period 0, above the threshold");

    /* (1*1 + 2*4)/3 = 3, (1*2 + 2*8)/3 = 6, (1*-3 + 2*3)/3 = 1 */
    float x[3] = {1, 2, -3};
    const float y[3] = {4, 8, 3};
    ht_pushsum_merge(x, 1, y, 2, 3);
    tap_ok(tap_max_abserr(x, (float[]){3, 6, 1}, 3) <= 1e-6, "push-sum: weights 1 and 2");
    float u[2] = {1, 2};
    ht_pushsum_merge(u, 0.5, (float[]){3, -2}, 0.5, 2);
    tap_ok(tap_max_abserr(u, (float[]){2, 0}, 2) <= 1e-6, "push-sum: equal weights average");
    float v[1] = {4};
    ht_pushsum_merge(v, 3, (float[]){0}, 1, 1);
    tap_ok(near(v[0], 3, 1e-6), "push-sum: weights 3 and 1 -> 3");
}

int main(void) {
    test_sap_weights();
    test_sap_update();
    test_ssp();
    test_dasp();
    test_pgroup();
    test_gossip();
    return tap_done();
}
