/* Pipeline schedules (pure, no device): every generator over many (D, N, v) passes the checker
 * and meets the published closed forms for makespan, bubble and activations in flight; a
 * hand-computed stream and timeline; bad parameters; and hand-broken schedules the checker
 * must reject (missing RECV, slot reuse, order deadlock, FWD twice, BWD before FWD, missing
 * OPT_STEP, ...). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/rng.h"
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
    /* planned for B = 2F: the basic unit beats 1F1B's 3(N+D-1) (D > 2), and for N = kD the
     * order planned for B = 2F is never slower at B = 2F than the one planned for F = B */
    bad = 0, n = 0;
    for (int D = 2; D <= 8; D += 2)
        for (int N = D; N <= 4 * D; N += D) {
            ht_pipe_params p = {.kind = HT_PIPE_CHIMERA, .D = D, .N = N, .v = 1, .bf_ratio = 2};
            ht_pipe_sched s, s1;
            ht_pipe_report r, r1;
            int rc = ht_pipe_generate(&p, &s);
            if (!rc) rc = ht_pipe_check(&s, 2.0, NULL, &r);
            p.bf_ratio = 0;
            if (!rc) rc = ht_pipe_generate(&p, &s1);
            if (!rc) rc = ht_pipe_check(&s1, 2.0, NULL, &r1), ht_pipe_sched_free(&s1);
            if (rc || r.makespan > r1.makespan ||
                (N == D && (D > 2 ? r.makespan >= 3.0 * (N + D - 1) : r.makespan > 3.0 * (N + D - 1))))
                if (!bad++)
                    tap_diag("D=%d N=%d: %s %g (F=B plan %g)", D, N, rc ? ht_errmsg() : "",
                             rc ? 0 : r.makespan, rc ? 0 : r1.makespan);
            n++;
            if (!rc) ht_pipe_sched_free(&s);
        }
    tap_ok(!bad, "chimera planned for B=2F: %d of %d no slower at B=2F than planned for F=B, "
                 "and at N=D faster than 1F1B", n - bad, n);
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

/* ---------------------------------------------------------------- hand-computed cases */

static int find(const ht_pipe_sched *s, int r, int op, int mb, int from) {
    for (int i = from; i < s->len[r]; i++)
        if (s->ins[r][i].op == op && (mb < 0 || s->ins[r][i].mb == mb)) return i;
    return -1;
}

/* 1F1B, D = 2, N = 2 written out by hand: rank 0 warms up with one forward. */
static void test_stream_by_hand(void) {
    static const char *want0[] = {
        "LOAD mb=0 stage=0 buf=0", "FWD mb=0 stage=0 buf=0",  "SEND_ACT mb=0 stage=0 peer=1 buf=0",
        "LOAD mb=1 stage=0 buf=1", "FWD mb=1 stage=0 buf=1",  "SEND_ACT mb=1 stage=0 peer=1 buf=1",
        "RECV_GRAD mb=0 stage=0 peer=1 buf=0", "BWD mb=0 stage=0 buf=0",
        "RECV_GRAD mb=1 stage=0 peer=1 buf=1", "BWD mb=1 stage=0 buf=1",
        "REDUCE_GRADS stage=0 chunk=0", "OPT_STEP"};
    static const char *want1[] = {
        "RECV_ACT mb=0 stage=1 peer=0 buf=0", "LOAD mb=0 stage=1 buf=0", "FWD mb=0 stage=1 buf=0",
        "BWD mb=0 stage=1 buf=0", "SEND_GRAD mb=0 stage=1 peer=0 buf=0",
        "RECV_ACT mb=1 stage=1 peer=0 buf=0", "LOAD mb=1 stage=1 buf=0", "FWD mb=1 stage=1 buf=0",
        "BWD mb=1 stage=1 buf=0", "SEND_GRAD mb=1 stage=1 peer=0 buf=0",
        "REDUCE_GRADS stage=1 chunk=0", "OPT_STEP"};
    ht_pipe_sched s;
    int ok = !gen(HT_PIPE_1F1B, 2, 2, 1, &s) && s.len[0] == 12 && s.len[1] == 12;
    char buf[128];
    for (int i = 0; ok && i < 12; i++) {
        ht_pipe_instr_str(&s.ins[0][i], buf, sizeof buf);
        if (strcmp(buf, want0[i])) ok = 0, tap_diag("rank 0 [%d] %s, expected %s", i, buf, want0[i]);
        ht_pipe_instr_str(&s.ins[1][i], buf, sizeof buf);
        if (strcmp(buf, want1[i])) ok = 0, tap_diag("rank 1 [%d] %s, expected %s", i, buf, want1[i]);
    }
    tap_ok(ok, "1f1b D=2 N=2: both streams as written by hand (slots 0,1 on rank 0, one on rank 1)");
    ht_pipe_sched_free(&s);

    /* GPipe D=2 N=2 by hand: rank 1's backwards at 3, 4; rank 0's at 4, 5 */
    ok = !gen(HT_PIPE_GPIPE, 2, 2, 1, &s);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    ht_pipe_print_timeline(&s, 1.0, f);
    fclose(f);
    ok = ok && strstr(text, "rank  0 | F0 F1 .  .  B1 B0 \n") &&
         strstr(text, "rank  1 | .  F0 F1 B1 B0 .  \n") && strstr(text, "makespan 6,") &&
         strstr(text, "bubble 0.3333") && strstr(text, "peak slots in flight: 2 2 (max 2)");
    tap_ok(ok, "gpipe D=2 N=2: text timeline as drawn by hand");
    if (!ok) tap_diag("%s", text);
    free(text);

    /* Chrome trace: one track per rank, one span per FWD / BWD */
    char path[] = "/tmp/t_pipe_XXXXXX";
    int fd = mkstemp(path);
    ok = fd >= 0 && !ht_pipe_write_trace(&s, 2.0, path);
    if (fd >= 0) close(fd);
    f = ok ? fopen(path, "r") : NULL;
    int spans = 0, tracks = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        spans += strstr(line, "\"ph\":\"X\"") != NULL;
        tracks += strstr(line, "\"process_name\"") != NULL;
        if (strstr(line, "BWD mb=0 stage=0") && !strstr(line, "\"ts\":7000.000,\"dur\":2000.000"))
            ok = 0, tap_diag("%s", line); /* GPipe at B = 2F: F 0..3 on rank 0, B0 at 7..9 */
    }
    if (f) fclose(f);
    unlink(path);
    tap_ok(ok && spans == 8 && tracks == 2, "gpipe trace: %d tracks, %d spans (expected 2, 8)", tracks, spans);
    ht_pipe_sched_free(&s);
}

static void test_bad_params(void) {
    static const struct {
        int kind, D, N, v;
        const char *msg;
    } cases[] = {
        {HT_PIPE_1F1B, 0, 4, 1, "0 pipeline stages"},
        {HT_PIPE_GPIPE, 4, 0, 1, "0 micro-batches"},
        {HT_PIPE_1F1B, 4, 4, 2, "only \"interleaved\""},
        {HT_PIPE_INTERLEAVED, 4, 6, 2, "multiple"},
        {HT_PIPE_INTERLEAVED, 4, 4, 0, "0 model chunks"},
        {HT_PIPE_CHIMERA, 3, 6, 1, "even"},
        {HT_PIPE_CHIMERA, 1, 6, 1, "even"},
        {HT_PIPE_2BW, 4, 3, 1, "at least as many micro-batches as stages"},
        {HT_PIPE_NKINDS, 4, 8, 1, "out of range"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ht_pipe_sched s;
        memset(&s, 0x5a, sizeof s);
        int rc = gen(cases[k].kind, cases[k].D, cases[k].N, cases[k].v, &s);
        tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), cases[k].msg) && s.len == (void *)0x5a5a5a5a5a5a5a5aULL,
               "kind %d D=%d N=%d v=%d refused: %s", cases[k].kind, cases[k].D, cases[k].N,
               cases[k].v, ht_errmsg());
    }
    int ok = 1;
    for (int k = 0; k < HT_PIPE_NKINDS; k++)
        ok = ok && ht_pipe_kind_parse(ht_pipe_kind_names[k]) == k;
    tap_ok(ok && ht_pipe_kind_parse("GPipe") == -1 && ht_pipe_kind_parse(NULL) == -1,
           "kind names parse back, others do not");
}

/* ---------------------------------------------------------------- broken schedules */

static void del(ht_pipe_sched *s, int r, int i) {
    memmove(&s->ins[r][i], &s->ins[r][i + 1], (size_t)(s->len[r] - i - 1) * sizeof **s->ins);
    s->len[r]--;
}

static void ins_at(ht_pipe_sched *s, int r, int i, ht_pipe_instr in) {
    s->ins[r] = realloc(s->ins[r], (size_t)(s->len[r] + 1) * sizeof **s->ins);
    memmove(&s->ins[r][i + 1], &s->ins[r][i], (size_t)(s->len[r] - i) * sizeof **s->ins);
    s->ins[r][i] = in;
    s->len[r]++;
}

static void move(ht_pipe_sched *s, int r, int from, int to) {
    ht_pipe_instr in = s->ins[r][from];
    del(s, r, from);
    ins_at(s, r, to, in);
}

static void expect_reject(ht_pipe_sched *s, const char *what, const char *msg) {
    int rc = ht_pipe_check(s, 1.0, NULL, NULL);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), msg), "rejects %s: %s", what, ht_errmsg());
    ht_pipe_sched_free(s);
}

static void test_broken(void) {
    ht_pipe_sched s;
    /* the unmodified schedule passes: each case below breaks one thing */
    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    tap_ok(!ht_pipe_check(&s, 1.0, NULL, NULL), "1f1b D=2 N=2 unmodified passes");
    ht_pipe_sched_free(&s);

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    del(&s, 1, find(&s, 1, HT_PI_RECV_ACT, 1, 0));
    expect_reject(&s, "a missing RECV_ACT", "rank 0 instruction 5 (SEND_ACT mb=1 stage=0 peer=1 buf=1): no matching RECV_ACT on rank 1");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    del(&s, 0, find(&s, 0, HT_PI_SEND_ACT, 0, 0));
    expect_reject(&s, "a missing SEND_ACT", "no matching SEND_ACT on rank 0");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s); /* rank 0 loads mb 1 into slot 0 while mb 0 holds it */
    s.ins[0][find(&s, 0, HT_PI_LOAD, 1, 0)].buf = 0;
    expect_reject(&s, "slot reuse while in use", "rank 0 instruction 3 (LOAD mb=1 stage=0 buf=0): slot 0 is still in use by mb=0 stage=0");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s); /* rank 1 takes mb 1 before sending mb 0's gradient */
    move(&s, 1, find(&s, 1, HT_PI_SEND_GRAD, 0, 0), s.len[1] - 3);
    expect_reject(&s, "slot reuse (RECV_ACT into a slot awaiting its SEND_GRAD)", "slot 0 is still in use");

    gen(HT_PIPE_1F1B, 2, 1, 1, &s); /* both ranks start with a RECV: circular wait */
    move(&s, 0, find(&s, 0, HT_PI_RECV_GRAD, 0, 0), 0);
    expect_reject(&s, "an order deadlock",
                  "that never comes: rank 0 at "
                  "instruction 0 (RECV_GRAD mb=0 stage=0 peer=1 buf=0); rank 1 at instruction 0 "
                  "(RECV_ACT mb=0 stage=1 peer=0 buf=0)");

    gen(HT_PIPE_GPIPE, 3, 2, 1, &s); /* rank 1 waits for mb 1's gradient before sending its
                                        activation on; rank 0 then waits for rank 1 */
    move(&s, 1, find(&s, 1, HT_PI_RECV_GRAD, 1, 0), find(&s, 1, HT_PI_SEND_ACT, 1, 0));
    expect_reject(&s, "a deadlock over three ranks",
                  "rank 0 at instruction 6 (RECV_GRAD mb=1 stage=0 peer=1 buf=1); rank 1 at "
                  "instruction 5 (RECV_GRAD mb=1 stage=1 peer=2 buf=1); rank 2 at instruction 3 "
                  "(RECV_ACT mb=1 stage=2 peer=1 buf=1)");

    gen(HT_PIPE_CHIMERA, 2, 2, 1, &s); /* rank 0 swaps its two reductions: they cross */
    { int a = find(&s, 0, HT_PI_REDUCE_GRADS, -1, 0), b = find(&s, 0, HT_PI_REDUCE_GRADS, -1, a + 1);
      move(&s, 0, a, b); }
    expect_reject(&s, "crossing Chimera reductions", "REDUCE_GRADS for the stage's other replica, that never comes");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    { int i = find(&s, 0, HT_PI_FWD, 0, 0); ins_at(&s, 0, i + 1, s.ins[0][i]); }
    expect_reject(&s, "FWD twice", "rank 0 instruction 2 (FWD mb=0 stage=0 buf=0): FWD of this micro-batch and stage runs twice");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    move(&s, 1, find(&s, 1, HT_PI_BWD, 0, 0), find(&s, 1, HT_PI_FWD, 0, 0));
    expect_reject(&s, "BWD before FWD", "rank 1 instruction 2 (BWD mb=0 stage=1 buf=0): BWD before FWD");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    s.len[1]--;
    expect_reject(&s, "a missing OPT_STEP", "rank 1 has no OPT_STEP");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    del(&s, 0, find(&s, 0, HT_PI_BWD, 1, 0));
    expect_reject(&s, "a missing BWD", "REDUCE_GRADS before the last BWD of chunk 0 (1 of 2 done)");

    gen(HT_PIPE_GPIPE, 2, 2, 1, &s); /* REDUCE_GRADS moved before rank 0's last BWD */
    move(&s, 0, find(&s, 0, HT_PI_REDUCE_GRADS, -1, 0), find(&s, 0, HT_PI_BWD, 0, 0));
    expect_reject(&s, "REDUCE_GRADS before the last BWD", "REDUCE_GRADS before the last BWD of chunk 0 (1 of 2 done)");

    gen(HT_PIPE_GPIPE, 2, 2, 1, &s);
    move(&s, 0, s.len[0] - 1, 0);
    expect_reject(&s, "OPT_STEP first", "OPT_STEP before the last BWD of chunk 0 (0 of 2 done)");

    gen(HT_PIPE_1F1B, 3, 2, 1, &s);
    s.ins[1][find(&s, 1, HT_PI_SEND_ACT, 0, 0)].peer = 0;
    expect_reject(&s, "a wrong peer", "peer 0, but the neighbouring stage runs on rank 2");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s);
    s.ins[0][find(&s, 0, HT_PI_FWD, 1, 0)].stage = 1;
    expect_reject(&s, "a stage on the wrong rank", "stage 1 of pipeline 0 runs on rank 1, not here");

    gen(HT_PIPE_1F1B, 2, 2, 1, &s); /* last stage computes the loss without its labels */
    del(&s, 1, find(&s, 1, HT_PI_LOAD, 1, 0));
    expect_reject(&s, "a missing label LOAD", "FWD of the last stage before LOAD of its labels");

    gen(HT_PIPE_CHIMERA, 4, 4, 1, &s); /* an up micro-batch sent down the wrong pipeline */
    { int i = find(&s, 0, HT_PI_FWD, 0, 0); s.ins[0][i].mb = 2; }
    expect_reject(&s, "a micro-batch in the wrong pipeline", "micro-batch 2 goes through pipeline 1, not 0");
}

/* Unequal stages by hand: GPipe D=2 N=2, stage 1 three times slower (F 3, B 3).
 * rank 0: F0 0-1, F1 1-2, B1 10-11, B0 13-14; rank 1: F0 1-4, F1 4-7, B1 7-10, B0 10-13. */
static void test_stage_times(void) {
    ht_pipe_sched s;
    gen(HT_PIPE_GPIPE, 2, 2, 1, &s);
    double sf[2] = {1, 3}, *t0[2], *t1[2];
    for (int r = 0; r < 2; r++)
        t0[r] = calloc((size_t)s.len[r], sizeof(double)), t1[r] = calloc((size_t)s.len[r], sizeof(double));
    ht_pipe_report rep;
    int ok = !ht_pipe_timeline(&s, 1.0, sf, t0, t1, &rep);
    static const double want[2][4][2] = {{{0, 1}, {1, 2}, {10, 11}, {13, 14}},
                                         {{1, 4}, {4, 7}, {7, 10}, {10, 13}}};
    for (int r = 0; ok && r < 2; r++) {
        int k = 0;
        for (int i = 0; i < s.len[r]; i++) {
            int op = s.ins[r][i].op;
            if (op != HT_PI_FWD && op != HT_PI_BWD) continue;
            if (!near(t0[r][i], want[r][k][0]) || !near(t1[r][i], want[r][k][1]))
                ok = 0, tap_diag("rank %d op %d: %g-%g, expected %g-%g", r, k, t0[r][i], t1[r][i],
                                 want[r][k][0], want[r][k][1]);
            k++;
        }
    }
    tap_ok(ok && near(rep.makespan, 14) && near(rep.busy, 16) && near(rep.bubble, 1 - 16.0 / 28),
           "gpipe with stage times 1, 3: start/end of every FWD/BWD, makespan 14, bubble 3/7 by hand");
    for (int r = 0; r < 2; r++)
        free(t0[r]), free(t1[r]);
    ht_pipe_sched_free(&s);
}

/* REDUCE_GRADS: one per chunk by default; one with stage -1 covers all chunks. Chimera's two
 * replicas of a stage reduce in the same order on both of their ranks, so blocking
 * collectives cannot cross. */
static void test_reduce(void) {
    ht_pipe_sched s;
    gen(HT_PIPE_INTERLEAVED, 2, 4, 3, &s);
    int n = 0;
    for (int i = 0; i < s.len[0]; i++)
        n += s.ins[0][i].op == HT_PI_REDUCE_GRADS;
    /* keep only the last per-chunk reduction and make it cover every chunk */
    int last = find(&s, 0, HT_PI_OPT_STEP, -1, 0) - 1, rc;
    for (int i = last - 1; i >= 0; i--)
        if (s.ins[0][i].op == HT_PI_REDUCE_GRADS) del(&s, 0, i), last--;
    s.ins[0][last].stage = -1, s.ins[0][last].chunk = -1;
    rc = ht_pipe_check(&s, 1.0, NULL, NULL);
    tap_ok(n == 3 && !rc, "interleaved v=3: 3 REDUCE_GRADS per rank; one over all chunks also passes %s",
           rc ? ht_errmsg() : "");
    ht_pipe_sched_free(&s);

    int bad = 0;
    for (int D = 2; D <= 8; D += 2)
        for (int N = 1; N <= 3 * D; N++) {
            gen(HT_PIPE_CHIMERA, D, N, 1, &s);
            for (int r = 0; r < D; r++) {
                int a = find(&s, r, HT_PI_REDUCE_GRADS, -1, 0), b = find(&s, D - 1 - r, HT_PI_REDUCE_GRADS, -1, 0);
                int a2 = find(&s, r, HT_PI_REDUCE_GRADS, -1, a + 1);
                /* rank r's first reduction is of the stage whose other replica rank D-1-r
                 * reduces first, with the other direction */
                if (a < 0 || b < 0 || a2 < 0 || s.ins[r][a].stage != s.ins[D - 1 - r][b].stage ||
                    s.ins[r][a].dir == s.ins[D - 1 - r][b].dir) {
                    if (!bad) tap_diag("D=%d N=%d rank %d: %d %d %d", D, N, r, a, b, a2);
                    bad++;
                }
            }
            ht_pipe_sched_free(&s);
        }
    tap_ok(!bad, "chimera: both replicas of each stage reduce in the same order (%d mismatches)", bad);
}

/* Random damage to generated schedules: the checker answers HT_OK or HT_EINPUT with a
 * message naming a rank, never crashes (the ASan build runs this too); dropping a compute
 * instruction is always caught. */
static void test_fuzz(void) {
    int bad = 0, caught = 0, dropped = 0;
    uint64_t seed = 20261123;
    for (int it = 0; it < 600; it++) {
        uint64_t k = (uint64_t)it * 16;
        int kind = (int)(ht_rng_u64(seed, k) % 4), D = 1 + (int)(ht_rng_u64(seed, k + 1) % 4);
        int N = 1 + (int)(ht_rng_u64(seed, k + 2) % 6), v = kind == HT_PIPE_INTERLEAVED ? 2 : 1;
        if (kind == HT_PIPE_CHIMERA) D = 2 * ((D + 1) / 2);
        if (kind == HT_PIPE_INTERLEAVED) N = D * (1 + N % 2);
        ht_pipe_sched s;
        if (gen(kind, D, N, v, &s)) {
            bad++;
            continue;
        }
        int r = (int)(ht_rng_u64(seed, k + 3) % (uint64_t)D);
        int i = (int)(ht_rng_u64(seed, k + 4) % (uint64_t)s.len[r]);
        int64_t val = (int64_t)(ht_rng_u64(seed, k + 5) % 12) - 2;
        ht_pipe_instr *in = &s.ins[r][i];
        int what = (int)(ht_rng_u64(seed, k + 6) % 8), compute = in->op == HT_PI_FWD || in->op == HT_PI_BWD;
        switch (what) {
        case 0: in->op = (uint8_t)(val < 0 ? 200 : val); break;
        case 1: in->dir = (uint8_t)(val & 3); break;
        case 2: in->chunk = (int16_t)val; break;
        case 3: in->stage = (int32_t)val; break;
        case 4: in->mb = (int32_t)val; break;
        case 5: in->peer = (int32_t)val; break;
        case 6: in->buf = (int32_t)val; break;
        case 7: del(&s, r, i); dropped += compute; break;
        }
        int rc = ht_pipe_check(&s, 1.0 + (it % 3) * 0.5, NULL, NULL);
        if (rc != HT_OK && (rc != HT_EINPUT || !strstr(ht_errmsg(), "schedule"))) bad++;
        if (what == 7 && compute) caught += rc == HT_EINPUT;
        ht_pipe_sched_free(&s);
    }
    tap_ok(!bad && caught == dropped && dropped > 20,
           "600 damaged schedules: every answer HT_OK or HT_EINPUT; %d of %d dropped FWD/BWD caught",
           caught, dropped);
}

/* 1F1B D=2 N=2 with stage forwards 1, 2 and backwards 2, 4, worked by hand: rank 0 F0 [0,1]
 * F1 [1,2]; rank 1 F0 [1,3] B0 [3,7] F1 [7,9] B1 [9,13]; rank 0 B0 [7,9] B1 [13,15]: makespan
 * 15, busy 6 + 12 = 18 of 2 x 15, bubble 0.4. With one ratio (B = 2F) it is the same; with
 * backwards 3, 4 rank 0's B0 [7,10], B1 [13,16]: makespan 16, busy 8 + 12 = 20. */
static void test_costs(void) {
    ht_pipe_params p = {.kind = HT_PIPE_1F1B, .D = 2, .N = 2, .v = 1};
    ht_pipe_sched s;
    ht_pipe_report r, r2;
    const double f[2] = {1, 2}, b[2] = {2, 4}, b2[2] = {3, 4};
    int ok = ht_pipe_generate(&p, &s) == HT_OK && ht_pipe_check_costs(&s, f, b, &r) == HT_OK &&
             ht_pipe_check_costs(&s, f, b2, &r2) == HT_OK;
    tap_ok(ok && r.makespan == 15 && fabs(r.bubble - 0.4) < 1e-12 && r2.makespan == 16 &&
               fabs(r2.bubble - (1 - 20.0 / 32)) < 1e-12,
           "per-stage forward and backward times: makespans 15 and 16 as worked by hand (%g, %g)",
           r.makespan, r2.makespan);
    const double zero[2] = {2, 0};
    tap_ok(ht_pipe_check_costs(&s, f, zero, NULL) == HT_EINPUT &&
               strstr(ht_errmsg(), "stage 1 backward time 0"),
           "a zero backward time is refused: %s", ht_errmsg());
    ht_pipe_sched_free(&s);
}

int main(void) {
    test_costs();
    test_fuzz();
    test_stage_times();
    test_reduce();
    test_stream_by_hand();
    test_bad_params();
    test_broken();
    test_gpipe_1f1b();
    test_interleaved();
    test_chimera();
    return tap_done();
}
