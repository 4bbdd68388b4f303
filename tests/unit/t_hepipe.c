/* HePipe's multi-forward 1F1B and PipeDream-2BW (pure, no device). hepipe: equal stages give
 * 1F1B itself; over many seeded unequal stage times every schedule passes the checker, never
 * runs longer than 1F1B under the same costs and keeps within its slot limits; hand cases
 * whose best warm-up depths were found by exhaustive search outside this code (makespan and
 * bubble beside 1F1B's). 2bw: the version rule by hand, the flushed form equals 1F1B, the
 * period stream by hand, T chained periods pass the checker with the makespan of one long
 * 1F1B, and a walk of the chained streams proves that two weight versions suffice and that
 * gradients are applied with a delay of one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/rng.h"
#include "pipe/sched_2bw.h"
#include "pipe/schedule.h"
#include "pipe/transform.h"
#include "tap.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

static int same_streams(const ht_pipe_sched *a, const ht_pipe_sched *b) {
    if (a->p.D != b->p.D) return 0;
    for (int r = 0; r < a->p.D; r++)
        if (a->len[r] != b->len[r] ||
            memcmp(a->ins[r], b->ins[r], (size_t)a->len[r] * sizeof *a->ins[r]))
            return 0;
    return 1;
}

static double plan_bf = 2; /* the B/F ratio schedules are generated and checked for */

static int gen(int kind, int D, int N, const double *t, const int *cap, ht_pipe_sched *s) {
    ht_pipe_params p = {.kind = kind, .D = D, .N = N, .v = 1, .stage_time = t,
                        .max_inflight = cap, .bf_ratio = plan_bf};
    return ht_pipe_generate(&p, s);
}

/* ---------------------------------------------------------------- hepipe */

static void test_hepipe_equal(void) {
    int bad = 0;
    for (int D = 1; D <= 6; D++)
        for (int N = 1; N <= 3 * D; N++) {
            ht_pipe_sched a, b;
            if (gen(HT_PIPE_HEPIPE, D, N, NULL, NULL, &a)) {
                bad++;
                continue;
            }
            gen(HT_PIPE_1F1B, D, N, NULL, NULL, &b);
            bad += !same_streams(&a, &b);
            ht_pipe_sched_free(&a), ht_pipe_sched_free(&b);
        }
    tap_ok(!bad, "hepipe with equal stages is 1F1B, instruction for instruction (D<=6, N<=3D; "
                 "%d differ)",
           bad);
}

/* Makespans under stage times t (B = 2F) of hepipe and 1F1B, and hepipe's report. */
static int both(int D, int N, const double *t, const int *cap, ht_pipe_report *h,
                ht_pipe_report *f) {
    ht_pipe_sched a, b;
    int rc = gen(HT_PIPE_HEPIPE, D, N, t, cap, &a);
    if (rc) return rc;
    rc = ht_pipe_check(&a, plan_bf, t, h);
    ht_pipe_sched_free(&a);
    if (rc || !f) return rc;
    gen(HT_PIPE_1F1B, D, N, NULL, NULL, &b);
    rc = ht_pipe_check(&b, plan_bf, t, f);
    ht_pipe_sched_free(&b);
    return rc;
}

static void test_hepipe_hand(void) {
    /* best depths by exhaustive search over every non-increasing warm-up vector (a Python
     * model of the in-order execution): [4,2,1,1] N=8: 1F1B 98, depths 3,1,0,0 give 96;
     * [2,4,2,3] N=8: 1F1B 109, best 102; [4,1,3,3] N=8: 1F1B 105, best 96 */
    static const struct {
        double t[4];
        double f1b, best;
    } c[] = {{{4, 2, 1, 1}, 98, 96}, {{2, 4, 2, 3}, 109, 102}, {{4, 1, 3, 3}, 105, 96}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ht_pipe_report h, f;
        int rc = both(4, 8, c[i].t, NULL, &h, &f);
        tap_ok(!rc && near(f.makespan, c[i].f1b) && near(h.makespan, c[i].best) &&
                   h.bubble < f.bubble,
               "stage times %g,%g,%g,%g, N=8: hepipe makespan %g (want %g), bubble %.3f; 1F1B "
               "%g (want %g), bubble %.3f; hepipe peak slots %d,%d,%d,%d",
               c[i].t[0], c[i].t[1], c[i].t[2], c[i].t[3], h.makespan, c[i].best, h.bubble,
               f.makespan, c[i].f1b, f.bubble, h.peak_inflight[0], h.peak_inflight[1],
               h.peak_inflight[2], h.peak_inflight[3]);
    }
    ht_pipe_report h;
    double t[] = {4, 2, 1, 1};
    int rc = both(4, 8, t, NULL, &h, NULL);
    tap_ok(!rc && h.peak_inflight[0] == 4 && h.peak_inflight[1] == 2 && h.peak_inflight[2] == 1,
           "4,2,1,1: depths 3,1,0,0 (peak slots 4,2,1,1; got %d,%d,%d,%d)", h.peak_inflight[0],
           h.peak_inflight[1], h.peak_inflight[2], h.peak_inflight[3]);
}

static void test_hepipe_random(double bf) {
    plan_bf = bf;
    int bad = 0, better = 0, n = 0, slow = 0, over = 0;
    char first[256] = "";
    for (int seed = 1; seed <= 120; seed++) {
        int D = 2 + (int)(ht_rng_u64(seed, 0) % 7), N = 1 + (int)(ht_rng_u64(seed, 1) % (3 * D));
        if (seed > 110) D = 8, N = 32; /* beyond the exhaustive search */
        double t[8];
        int cap[8], limit = seed % 3 == 0;
        for (int r = 0; r < D; r++) {
            t[r] = 1 + (double)(ht_rng_u64(seed, 10 + r) % 4);
            cap[r] = 1 + (int)(ht_rng_u64(seed, 20 + r) % (D + 2));
        }
        ht_pipe_report h, f;
        int rc = both(D, N, t, limit ? cap : NULL, &h, &f);
        n++;
        if (rc) {
            if (!bad++) snprintf(first, sizeof first, "seed %d: %s", seed, ht_errmsg());
            continue;
        }
        for (int r = 0; limit && r < D; r++)
            over += h.peak_inflight[r] > cap[r];
        if (!limit) {
            slow += h.makespan > f.makespan * (1 + 1e-12);
            better += h.makespan < f.makespan * (1 - 1e-12);
        }
    }
    plan_bf = 2;
    tap_ok(!bad && !slow && !over,
           "B = %g F: %d seeded cases (D 2..8, N 1..3D, times 1..4, a third with slot limits) pass the "
           "checker; without limits none is slower than 1F1B (%d slower, %d faster); none "
           "exceeds its limit (%d) %s",
           bf, n, slow, better, over, first);
    tap_ok(better > 0, "some unequal cases are strictly faster than 1F1B (%d)", better);
}

static void test_hepipe_errors(void) {
    ht_pipe_sched s;
    double t[] = {1, 0};
    int cap[] = {2, 0};
    tap_ok(gen(HT_PIPE_HEPIPE, 2, 4, t, NULL, &s) == HT_EINPUT && strstr(ht_errmsg(), "stage 1"),
           "a zero stage time is refused: %s", ht_errmsg());
    tap_ok(gen(HT_PIPE_HEPIPE, 2, 4, NULL, cap, &s) == HT_EINPUT && strstr(ht_errmsg(), "rank 1"),
           "a rank with no slot is refused: %s", ht_errmsg());
}

/* ---------------------------------------------------------------- 2bw */

static void test_2bw_rule_and_flushed(void) {
    tap_ok(ht_pipe_2bw_version(0) == 0 && ht_pipe_2bw_version(1) == 0 &&
               ht_pipe_2bw_version(2) == 1 && ht_pipe_2bw_version(7) == 6,
           "2bw: batches 0, 1, 2, 7 use weight versions 0, 0, 1, 6");
    ht_pipe_sched a, b;
    int bad = 0;
    for (int D = 1; D <= 5; D++)
        for (int N = D; N <= 3 * D; N++) {
            ht_pipe_report r;
            if (gen(HT_PIPE_2BW, D, N, NULL, NULL, &a) || ht_pipe_check(&a, 2, NULL, &r)) {
                bad++;
                continue;
            }
            gen(HT_PIPE_1F1B, D, N, NULL, NULL, &b);
            bad += !same_streams(&a, &b);
            ht_pipe_sched_free(&a), ht_pipe_sched_free(&b);
        }
    tap_ok(!bad, "2bw's flushed one-batch form is 1F1B's order and passes the checker (%d bad)",
           bad);
    tap_ok(gen(HT_PIPE_2BW, 4, 3, NULL, NULL, &a) == HT_EINPUT && strstr(ht_errmsg(), "4 or more"),
           "2bw with N < D is refused: %s", ht_errmsg());
}

static void stream_str(const ht_pipe_sched *s, int r, char *buf, size_t n) {
    size_t k = 0;
    for (int i = 0; i < s->len[r] && k + 40 < n; i++) {
        const ht_pipe_instr *in = &s->ins[r][i];
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? " " : "", ht_pipe_op_names[in->op]);
        if (in->buf >= 0)
            k += (size_t)snprintf(buf + k, n - k, ":%d/%d", in->mb, in->buf);
    }
}

static void test_2bw_steady_hand(void) {
    ht_pipe_params p = {.kind = HT_PIPE_2BW, .D = 2, .N = 3, .v = 1};
    ht_pipe_sched s;
    int rc = ht_pipe_2bw_steady(&p, &s);
    char r0[1024] = "", r1[1024] = "";
    if (!rc) stream_str(&s, 0, r0, sizeof r0), stream_str(&s, 1, r1, sizeof r1);
    /* rank 0 (w = 1): F0, then the previous batch's micro-batch 2 (mb -1) and its step; slots
     * k mod 3 (2 do not divide 3) */
    const char *w0 = "LOAD:0/0 FWD:0/0 SEND_ACT:0/0 RECV_GRAD:-1/2 BWD:-1/2 REDUCE_GRADS "
                     "OPT_STEP LOAD:1/1 FWD:1/1 SEND_ACT:1/1 RECV_GRAD:0/0 BWD:0/0 LOAD:2/2 "
                     "FWD:2/2 SEND_ACT:2/2 RECV_GRAD:1/1 BWD:1/1";
    const char *w1 = "RECV_ACT:0/0 LOAD:0/0 FWD:0/0 BWD:0/0 SEND_GRAD:0/0 RECV_ACT:1/0 LOAD:1/0 "
                     "FWD:1/0 BWD:1/0 SEND_GRAD:1/0 RECV_ACT:2/0 LOAD:2/0 FWD:2/0 BWD:2/0 "
                     "SEND_GRAD:2/0 REDUCE_GRADS OPT_STEP";
    tap_ok(!rc && !strcmp(r0, w0) && s.nbuf[0] == 3, "2bw period stream, D=2 N=3, rank 0: %s",
           r0);
    tap_ok(!rc && !strcmp(r1, w1) && s.nbuf[1] == 1, "2bw period stream, rank 1: %s", r1);
    tap_ok(!rc && ht_pipe_2bw_batch(&s, 0, 4) == -1 && ht_pipe_2bw_batch(&s, 0, 6) == -1 &&
               ht_pipe_2bw_batch(&s, 0, 11) == 0 && ht_pipe_2bw_batch(&s, 1, 16) == 0,
           "batch of each instruction: the early BWD and its OPT_STEP belong to the previous");
    if (!rc) ht_pipe_sched_free(&s);
}

static void test_2bw_chain(void) {
    int bad = 0, n = 0;
    char first[256] = "";
    for (int D = 1; D <= 5; D++)
        for (int N = D; N <= 2 * D + 1; N++)
            for (int T = 1; T <= 3; T++) {
                ht_pipe_params p = {.kind = HT_PIPE_2BW, .D = D, .N = N, .v = 1};
                ht_pipe_sched s, u;
                ht_pipe_report r;
                int rc = ht_pipe_2bw_steady(&p, &s);
                if (!rc) rc = ht_pipe_2bw_unroll(&s, T, &u);
                if (!rc) rc = ht_pipe_check(&u, 2, NULL, &r);
                /* no flush between batches: one fill and one drain, (TN + D - 1)(F + B) */
                int ok = !rc && near(r.makespan, 3.0 * (T * N + D - 1));
                for (int st = 0; ok && st < D; st++)
                    ok = r.peak_inflight[st] == D - st;
                if (!ok && !bad++)
                    snprintf(first, sizeof first, "D=%d N=%d T=%d: %s makespan %g", D, N, T,
                             rc ? ht_errmsg() : "", rc ? 0 : r.makespan);
                n++;
                if (!rc) ht_pipe_sched_free(&u);
                ht_pipe_sched_free(&s);
            }
    tap_ok(!bad, "2bw: %d chains of T<=3 periods (D<=5, D<=N<=2D+1) pass the checker with "
                 "makespan 3(TN+D-1) (a flushed 1F1B takes 3T(N+D-1)) and D-s in flight %s",
           n - bad, first);
}

/* Walks rank r's chained period streams for T batches: every FWD / BWD of batch b needs
 * version ht_pipe_2bw_version(b) among the two kept (the newest V and V - 1); the OPT_STEP
 * applying batch b comes after all N of b's BWDs and turns V = b into b + 1. Alongside, a
 * scalar model (loss a w^2 / 2 per micro-batch) follows the stream and must match the
 * closed recursion W(b+1) = W(b) - lr a W(b-1). */
static int walk_versions(const ht_pipe_sched *s, int r, int T, char *why, size_t n) {
    int N = s->p.N;
    int64_t V = 0;
    int nbwd[16] = {0};
    double W[18] = {1.0}, g = 0, a = 0.5, lr = 0.3;
    for (int t = 0; t <= T; t++)
        for (int i = 0; i < s->len[r]; i++) {
            const ht_pipe_instr *in = &s->ins[r][i];
            int b = t + ht_pipe_2bw_batch(s, r, i);
            if (b < 0 || b >= T) continue;
            int64_t need = ht_pipe_2bw_version(b);
            if ((in->op == HT_PI_FWD || in->op == HT_PI_BWD) && (need > V || need < V - 1))
                return snprintf(why, n, "rank %d batch %d needs version %lld, kept %lld..%lld",
                                r, b, (long long)need, (long long)V - 1, (long long)V);
            if (in->op == HT_PI_BWD) nbwd[b]++, g += a * W[need] / N;
            if (in->op == HT_PI_OPT_STEP) {
                if (V != b || nbwd[b] != N)
                    return snprintf(why, n, "rank %d: step for batch %d at version %lld after "
                                            "%d of %d backwards",
                                    r, b, (long long)V, nbwd[b], N);
                W[b + 1] = W[b] - lr * g, g = 0, V = b + 1;
            }
        }
    if (V != T) return snprintf(why, n, "rank %d ends at version %lld, want %d", r, (long long)V, T);
    double c[18] = {1.0}; /* the closed recursion, version max(0, b-1) written out */
    for (int b = 0; b < T; b++)
        c[b + 1] = c[b] - lr * a * c[b > 1 ? b - 1 : 0];
    if (!near(W[T], c[T])) return snprintf(why, n, "rank %d: W(T) %g, recursion %g", r, W[T], c[T]);
    return 0;
}

static void test_2bw_versions(void) {
    int bad = 0;
    char why[256] = "";
    for (int D = 1; D <= 5 && !bad; D++)
        for (int N = D; N <= 2 * D + 1 && !bad; N++) {
            ht_pipe_params p = {.kind = HT_PIPE_2BW, .D = D, .N = N, .v = 1};
            ht_pipe_sched s;
            if (ht_pipe_2bw_steady(&p, &s)) {
                bad++;
                break;
            }
            for (int r = 0; r < D && !bad; r++)
                bad += walk_versions(&s, r, 6, why, sizeof why) > 0;
            ht_pipe_sched_free(&s);
        }
    tap_ok(!bad, "2bw chained streams: each micro-batch's forward and backward find version "
                 "max(0, b-1) among the two kept, each step follows its batch's N backwards, "
                 "and the weights follow W(b+1) = W(b) - lr grad(W(b-1)) %s",
           why);
}

/* ---------------------------------------------------------------- recomputation */

static void test_recompute(void) {
    ht_pipe_sched s;
    ht_pipe_report r;
    uint8_t all[8] = {1, 1, 1, 1, 1, 1, 1, 1}, some[4] = {1, 0, 1, 0};
    /* one rank, 2 micro-batches: F, R + B per micro-batch = 1 + 1 + 2 each: 8 */
    gen(HT_PIPE_1F1B, 1, 2, NULL, NULL, &s);
    ht_pipe_add_recompute(&s, all);
    char buf[512] = "";
    stream_str(&s, 0, buf, sizeof buf);
    int rc = ht_pipe_check(&s, 2, NULL, &r);
    tap_ok(!rc && near(r.makespan, 8) && !strcmp(buf, "LOAD:0/0 FWD:0/0 RECOMPUTE:0/0 BWD:0/0 "
                                                      "LOAD:1/0 FWD:1/0 RECOMPUTE:1/0 BWD:1/0 "
                                                      "REDUCE_GRADS OPT_STEP"),
           "recompute on one rank: %s, makespan %g (want 8)", buf, rc ? -1 : r.makespan);
    ht_pipe_sched_free(&s);
    int bad = 0;
    for (int kind = HT_PIPE_GPIPE; kind <= HT_PIPE_CHIMERA; kind++)
        for (int D = 2; D <= 4; D += 2)
            for (int N = D; N <= 2 * D; N += D) {
                ht_pipe_sched a;
                ht_pipe_report ra, rb;
                ht_pipe_params p = {.kind = kind, .D = D, .N = N,
                                    .v = kind == HT_PIPE_INTERLEAVED ? 2 : 1};
                if (ht_pipe_generate(&p, &a) || ht_pipe_check(&a, 2, NULL, &ra)) {
                    bad++;
                    continue;
                }
                int before = a.len[0], nb0 = 0;
                ht_pipe_add_recompute(&a, some);
                /* every BWD of ranks 0 and 2 gains one RECOMPUTE: busy grows by their number */
                int nb = 0;
                for (int q = 0; q < D; q += 2)
                    for (int i = 0; i < a.len[q]; i++) {
                        nb += a.ins[q][i].op == HT_PI_BWD;
                        nb0 += q == 0 && a.ins[q][i].op == HT_PI_BWD;
                    }
                if (ht_pipe_check(&a, 2, NULL, &rb) || !near(rb.busy, ra.busy + nb) ||
                    rb.makespan < ra.makespan || a.len[0] != before + nb0)
                    bad++;
                ht_pipe_sched_free(&a);
            }
    tap_ok(!bad, "recompute on ranks 0, 2 of gpipe/1f1b/interleaved/chimera: each passes the "
                 "checker, busy time grows by one forward per backward there (%d bad)",
           bad);
}

int main(void) {
    test_hepipe_equal();
    test_hepipe_hand();
    test_hepipe_random(2);
    test_hepipe_random(1);
    test_hepipe_errors();
    test_2bw_rule_and_flushed();
    test_2bw_steady_hand();
    test_2bw_chain();
    test_2bw_versions();
    test_recompute();
    return tap_done();
}
