/* Causal multi-head attention core on the device against tests/lib/ref_tf.c: forward (output and
 * saved probabilities) and backward on odd shapes (T not a multiple of 4, 3 heads, odd head
 * sizes), finite differences on qkv, causality of forward and backward checked on the
 * device, determinism, guard cells around every tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/ops_tf.h"
#include "ref.h"
#include "ref_tf.h"
#include "devtensor.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;

/* Tolerances (stated once), device floats vs the double reference: output and dqkv as
 * max |err| / max |ref| of the tensor; probabilities as max absolute error (they lie in
 * [0,1]). Finite differences: |fd - g| / max(1, |g|), float steps of 1e-2, L = sum r . out
 * accumulated in double. */
#define TOL_OUT 1e-5
#define TOL_ATT 1e-6
#define TOL_GRAD 1e-5
#define TOL_FD 2e-3
#define FD_STEP 1e-2f

/* ---------------------------------------------------------------- device tensors */


/* One problem on the device: qkv, out, att, dout, dqkv, scratch (NaN-filled: must be
 * written before it is read; dqkv NaN-filled: must be fully overwritten). */
typedef struct prob {
    int B, T, C, NH;
    size_t nqkv, nout, natt;
    float *qkv, *dout;
    dt tqkv, tout, tatt, tdout, tdqkv, tscr;
} prob;

static prob prob_new(int B, int T, int C, int NH, float range, uint64_t seed) {
    prob p = {.B = B, .T = T, .C = C, .NH = NH};
    p.nqkv = (size_t)B * T * 3 * C, p.nout = (size_t)B * T * C, p.natt = (size_t)B * NH * T * T;
    p.qkv = hnew(p.nqkv, -range, range, seed), p.dout = hnew(p.nout, -1, 1, seed + 1);
    float *nan = hnan(p.nqkv > p.natt ? p.nqkv : p.natt);
    p.tqkv = dt_new(p.nqkv, p.qkv), p.tout = dt_new(p.nout, NULL), p.tatt = dt_new(p.natt, NULL),
    p.tdout = dt_new(p.nout, p.dout), p.tdqkv = dt_new(p.nqkv, nan), p.tscr = dt_new(p.natt, nan);
    free(nan);
    return p;
}
static void prob_free(prob *p) {
    dt_free(p->tqkv), dt_free(p->tout), dt_free(p->tatt), dt_free(p->tdout), dt_free(p->tdqkv),
        dt_free(p->tscr);
    free(p->qkv), free(p->dout);
}
static void prob_forward(prob *p) {
    ht_attention_forward(D, dt_view(p->tout), dt_view(p->tatt), dt_view(p->tqkv), p->B, p->T, p->C, p->NH);
}
static void prob_backward(prob *p) {
    ht_attention_backward(D, dt_view(p->tdqkv), dt_view(p->tscr), dt_view(p->tdout), dt_view(p->tqkv), dt_view(p->tatt),
                          p->B, p->T, p->C, p->NH);
}
static int prob_guards_ok(prob *p) {
    return dt_guards_ok(p->tqkv) && dt_guards_ok(p->tout) && dt_guards_ok(p->tatt) &&
           dt_guards_ok(p->tdout) && dt_guards_ok(p->tdqkv) && dt_guards_ok(p->tscr);
}

/* ---------------------------------------------------------------- forward and backward */

static void test_attention(int B, int T, int C, int NH, float range, uint64_t seed) {
    prob p = prob_new(B, T, C, NH, range, seed);
    float *out = malloc(p.nout * 4), *outr = malloc(p.nout * 4), *att = malloc(p.natt * 4),
          *attr = malloc(p.natt * 4), *g = malloc(p.nqkv * 4), *gr = malloc(p.nqkv * 4),
          *g2 = malloc(p.nqkv * 4);
    prob_forward(&p);
    prob_backward(&p);
    dt_get(p.tout, out), dt_get(p.tatt, att), dt_get(p.tdqkv, g);
    ref_attention_forward(outr, attr, p.qkv, B, T, C, NH);
    ref_attention_backward(gr, p.dout, p.qkv, B, T, C, NH);
    double eo = nerr(out, outr, p.nout), ea = tap_max_abserr(att, attr, p.natt);
    double eq = nerr(g, gr, p.nqkv);
    int upper_zero = 1; /* probabilities above the diagonal are exactly 0 */
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        for (int t2 = (int)(r % T) + 1; t2 < T; t2++)
            upper_zero &= att[r * T + t2] == 0.0f;
    tap_ok(eo < TOL_OUT && ea < TOL_ATT && upper_zero && prob_guards_ok(&p),
           "attention forward B=%d T=%d C=%d NH=%d (hs=%d) qkv in +-%g: out err %.2e, att abs "
           "err %.2e, zeros above the diagonal",
           B, T, C, NH, C / NH, range, eo, ea);
    /* again with the scratch full of the first run's values: bit-identical */
    prob_backward(&p);
    dt_get(p.tdqkv, g2);
    int same = !memcmp(g, g2, p.nqkv * 4);
    tap_ok(eq < TOL_GRAD && same && prob_guards_ok(&p),
           "attention backward B=%d T=%d C=%d NH=%d: dqkv err %.2e, every element written, "
           "deterministic",
           B, T, C, NH, eq);
    prob_free(&p);
    free(out), free(outr), free(att), free(attr), free(g), free(gr), free(g2);
}

/* ---------------------------------------------------------------- finite differences */

/* The forward from the host's qkv, its output to out (ref_fd_qkv). */
static void fd_forward(void *ctx, float *out) {
    prob *p = ctx;
    dt_set(p->tqkv, p->qkv);
    prob_forward(p);
    dt_get(p->tout, out);
}

/* L = sum r . out; central differences on q, k and v entries spread over qkv. */
static void test_fd_attention(int B, int T, int C, int NH) {
    prob p = prob_new(B, T, C, NH, 1.0f, 300 + (uint64_t)C);
    float *g = malloc(p.nqkv * 4);
    prob_forward(&p);
    prob_backward(&p); /* dout = r: dqkv is dL/dqkv */
    dt_get(p.tdqkv, g);
    double worst[3];
    ref_fd_qkv(worst, fd_forward, &p, p.qkv, (size_t)B * T, C, p.dout, p.nout, g, FD_STEP);
    tap_ok(worst[0] < TOL_FD && worst[1] < TOL_FD && worst[2] < TOL_FD,
           "finite differences, attention B=%d T=%d C=%d NH=%d (45 points): dq %.2e, dk %.2e, "
           "dv %.2e",
           B, T, C, NH, worst[0], worst[1], worst[2]);
    dt_set(p.tqkv, p.qkv);
    prob_free(&p);
    free(g);
}

/* ---------------------------------------------------------------- causality */

/* Forward: changing q, k, v at (b, t) changes nothing at positions < t nor in other
 * sequences (bit for bit), and does change position t. Backward: a gradient only at (b, t)
 * reaches dq only at (b, t) and dk, dv only at positions <= t of sequence b. */
static void test_causality(int B, int T, int C, int NH, int b, int t) {
    prob p = prob_new(B, T, C, NH, 1.0f, 900);
    size_t rowc = (size_t)C, rowq = 3 * (size_t)C;
    float *o1 = malloc(p.nout * 4), *o2 = malloc(p.nout * 4), *a1 = malloc(p.natt * 4),
          *a2 = malloc(p.natt * 4), *g = malloc(p.nqkv * 4);
    prob_forward(&p);
    dt_get(p.tout, o1), dt_get(p.tatt, a1);
    for (size_t c = 0; c < rowq; c++)
        p.qkv[((size_t)b * T + t) * rowq + c] += 0.5f;
    dt_set(p.tqkv, p.qkv);
    prob_forward(&p);
    dt_get(p.tout, o2), dt_get(p.tatt, a2);
    int before_same = 1, at_changed = 0;
    for (int bb = 0; bb < B; bb++)
        for (int tt = 0; tt < T; tt++) {
            const float *x = o1 + ((size_t)bb * T + tt) * rowc,
                        *y = o2 + ((size_t)bb * T + tt) * rowc;
            int same = !memcmp(x, y, rowc * 4);
            if (bb != b || tt < t) before_same &= same;
            if (bb == b && tt == t) at_changed = !same;
            for (int h = 0; h < NH && (bb != b || tt < t); h++) {
                size_t ar = (((size_t)bb * NH + h) * T + tt) * T;
                before_same &= !memcmp(a1 + ar, a2 + ar, (size_t)T * 4);
            }
        }
    tap_ok(before_same && at_changed,
           "attention causality (device), B=%d T=%d: changing qkv at b=%d t=%d leaves out and att "
           "of positions < t and of other sequences bit-identical, changes position t",
           B, T, b, t);

    float *d = calloc(p.nout, 4);
    for (size_t c = 0; c < rowc; c++)
        d[((size_t)b * T + t) * rowc + c] = 1.0f + (float)c / (float)C;
    dt_set(p.tdout, d);
    prob_backward(&p);
    dt_get(p.tdqkv, g);
    int leak = 0, reach = 0;
    for (int bb = 0; bb < B; bb++)
        for (int tt = 0; tt < T; tt++)
            for (size_t c = 0; c < rowq; c++) {
                float v = g[((size_t)bb * T + tt) * rowq + c];
                int part = (int)(c / rowc); /* 0: q, 1: k, 2: v */
                int allowed = bb == b && (part == 0 ? tt == t : tt <= t);
                if (!allowed)
                    leak |= v != 0.0f;
                else if (part == 2)
                    reach |= v != 0.0f;
            }
    tap_ok(!leak && reach && prob_guards_ok(&p),
           "attention backward causality (device): a gradient at b=%d t=%d reaches dq only at t, "
           "dk/dv only at positions <= t, nothing in other sequences",
           b, t);
    prob_free(&p);
    free(o1), free(o2), free(a1), free(a2), free(g), free(d);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    D = test_dev_open();
    dt_use(D);
    /* both kernel sets: per-head work-groups (chosen by default where they fit), per-row */
    for (int pass = 0; pass < 2; pass++) {
        ht_attention_force(pass ? HT_ATTN_ROWS : HT_ATTN_AUTO);
        tap_diag("attention kernels: %s", pass ? "one work-item per row" : "automatic choice");
        test_attention(1, 5, 12, 3, 1.0f, 11); /* hs = 4 */
        test_attention(2, 7, 12, 3, 1.0f, 12);
        test_attention(1, 5, 15, 3, 1.0f, 13); /* hs = 5 */
        test_attention(2, 7, 15, 3, 1.0f, 14);
        test_attention(2, 7, 15, 3, 4.0f, 15);   /* peaked softmax */
        test_attention(1, 9, 27, 3, 1.0f, 16);   /* hs = 9: one float8 block and a tail */
        test_attention(2, 13, 48, 3, 1.0f, 17);  /* hs = 16 */
        test_attention(2, 67, 128, 4, 1.0f, 18); /* hs = 32, T = 67 */
        test_attention(3, 1, 8, 2, 1.0f, 19);    /* T = 1: att is 1, out is v */
        test_attention(2, 8, 16, 2, 1.0f, 20);   /* T a multiple of 8 */
        test_attention(2, 11, 111, 3, 1.0f, 22); /* hs = 37: a 32-column block and a tail */

        test_fd_attention(1, 5, 12, 3);
        test_fd_attention(2, 7, 15, 3);
        test_fd_attention(2, 9, 27, 3);

        test_causality(2, 7, 15, 3, 1, 3);
        test_causality(1, 5, 12, 3, 0, 0);
        test_causality(2, 67, 128, 4, 0, 40);
    }
    /* T = 365: the backward's (hs + T) * T local floats exceed PoCL's 512 KiB, so the
     * automatic choice takes the per-row backward after a per-head forward */
    ht_attention_force(HT_ATTN_AUTO);
    test_attention(1, 365, 12, 3, 1.0f, 21);

    ht_dev_close(D);
    return tap_done();
}
