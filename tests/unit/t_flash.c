/* Fused causal attention (ht_attention_flash_*, cl/flash.cl: online softmax over key tiles of
 * 32, probabilities recomputed in the backward) against tests/lib/ref_tf.c's plain-C attention
 * and a plain-C log-sum-exp here: T below, at and across the tile size (1, 5, 31, 32, 33, 67,
 * 100), head sizes 1, 5, 24, 37, 64 (float8 blocks, 32-column blocks, scalar tails), several
 * B and NH; finite differences on q, k and v; every output element written (NaN-filled dqkv,
 * dsum); guard cells around every tensor; T = 1024 with a reference. A GPT whose blocks use
 * the fused kernels gives the loss and gradients of the same GPT on the T^2 kernels, and its
 * saved state per sample is smaller by exactly n_layer NH (T^2 - T) floats. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "nn/model.h"
#include "nn/ops_tf.h"
#include "ref.h"
#include "ref_tf.h"
#include "devtensor.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;

/* Device floats against the double reference: out and dqkv as max |err| / max |ref|, lse as
 * max absolute error; finite differences |fd - g| / max(1, |g|) with float steps of 1e-2 and
 * L = sum r . out accumulated in double (as t_attn.c). */
#define TOL_OUT 1e-5
#define TOL_LSE 1e-5
#define TOL_GRAD 2e-5
#define TOL_FD 2e-3
#define FD_STEP 1e-2f

typedef struct prob {
    int B, T, C, NH;
    size_t nqkv, nout, nrow;
    float *qkv, *dout;
    dt tqkv, tout, tlse, tdout, tdqkv, tdsum;
} prob;

static prob prob_new(int B, int T, int C, int NH, float range, uint64_t seed) {
    prob p = {.B = B, .T = T, .C = C, .NH = NH};
    p.nqkv = (size_t)B * T * 3 * C, p.nout = (size_t)B * T * C, p.nrow = (size_t)B * NH * T;
    p.qkv = hnew(p.nqkv, -range, range, seed), p.dout = hnew(p.nout, -1, 1, seed + 1);
    float *nan = hnan(p.nqkv);
    p.tqkv = dt_new(p.nqkv, p.qkv), p.tout = dt_new(p.nout, nan), p.tlse = dt_new(p.nrow, nan),
    p.tdout = dt_new(p.nout, p.dout), p.tdqkv = dt_new(p.nqkv, nan),
    p.tdsum = dt_new(p.nrow, nan);
    free(nan);
    return p;
}
static void prob_free(prob *p) {
    dt_free(p->tqkv), dt_free(p->tout), dt_free(p->tlse), dt_free(p->tdout), dt_free(p->tdqkv),
        dt_free(p->tdsum);
    free(p->qkv), free(p->dout);
}
static void prob_forward(prob *p) {
    ht_attention_flash_forward(D, dt_view(p->tout), dt_view(p->tlse), dt_view(p->tqkv), p->B,
                               p->T, p->C, p->NH);
}
static void prob_backward(prob *p) {
    ht_attention_flash_backward(D, dt_view(p->tdqkv), dt_view(p->tdsum), dt_view(p->tdout),
                                dt_view(p->tout), dt_view(p->tqkv), dt_view(p->tlse), p->B, p->T,
                                p->C, p->NH);
}
static int prob_guards_ok(prob *p) {
    return dt_guards_ok(p->tqkv) && dt_guards_ok(p->tout) && dt_guards_ok(p->tlse) &&
           dt_guards_ok(p->tdout) && dt_guards_ok(p->tdqkv) && dt_guards_ok(p->tdsum);
}

/* lse(B,NH,T): log sum_{t2<=t} exp(q_t . k_t2 / sqrt(hs)) in double, by the definition. */
static void ref_lse(double *lse, const float *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double m = -INFINITY, s = 0, *sc = malloc(sizeof(double) * (size_t)(t + 1));
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    double dot = 0;
                    for (int i = 0; i < hs; i++)
                        dot += (double)q[i] * k[i];
                    sc[t2] = dot * scale;
                    if (sc[t2] > m) m = sc[t2];
                }
                for (int t2 = 0; t2 <= t; t2++)
                    s += exp(sc[t2] - m);
                lse[((size_t)b * NH + h) * T + t] = m + log(s);
                free(sc);
            }
}

static void test_flash(int B, int T, int C, int NH, float range, uint64_t seed) {
    prob p = prob_new(B, T, C, NH, range, seed);
    float *out = malloc(p.nout * 4), *outr = malloc(p.nout * 4), *lse = malloc(p.nrow * 4),
          *g = malloc(p.nqkv * 4), *gr = malloc(p.nqkv * 4), *g2 = malloc(p.nqkv * 4);
    double *lser = malloc(p.nrow * sizeof(double)), el = 0;
    prob_forward(&p);
    prob_backward(&p);
    dt_get(p.tout, out), dt_get(p.tlse, lse), dt_get(p.tdqkv, g);
    ref_attention_forward(outr, NULL, p.qkv, B, T, C, NH);
    ref_attention_backward(gr, p.dout, p.qkv, B, T, C, NH);
    ref_lse(lser, p.qkv, B, T, C, NH);
    for (size_t r = 0; r < p.nrow; r++) {
        double e = fabs((double)lse[r] - lser[r]);
        el = e > el || e != e ? e : el;
    }
    double eo = nerr(out, outr, p.nout), eq = nerr(g, gr, p.nqkv);
    tap_ok(eo < TOL_OUT && el < TOL_LSE && prob_guards_ok(&p),
           "fused attention forward B=%d T=%d C=%d NH=%d (hs=%d) qkv in +-%g: out err %.2e, lse "
           "abs err %.2e",
           B, T, C, NH, C / NH, range, eo, el);
    prob_backward(&p); /* again with dsum and dqkv holding the first run's values */
    dt_get(p.tdqkv, g2);
    tap_ok(eq < TOL_GRAD && !memcmp(g, g2, p.nqkv * 4) && prob_guards_ok(&p),
           "fused attention backward B=%d T=%d C=%d NH=%d: dqkv err %.2e, every element "
           "written, deterministic",
           B, T, C, NH, eq);
    prob_free(&p);
    free(out), free(outr), free(lse), free(g), free(gr), free(g2), free(lser);
}

/* The forward from the host's qkv, its output to out (ref_fd_qkv). */
static void fd_forward(void *ctx, float *out) {
    prob *p = ctx;
    dt_set(p->tqkv, p->qkv);
    prob_forward(p);
    dt_get(p->tout, out);
}

/* L = sum r . out; central differences on q, k and v entries spread over qkv. */
static void test_fd(int B, int T, int C, int NH) {
    prob p = prob_new(B, T, C, NH, 1.0f, 500 + (uint64_t)C);
    float *g = malloc(p.nqkv * 4);
    prob_forward(&p);
    prob_backward(&p);
    dt_get(p.tdqkv, g);
    double worst[3];
    ref_fd_qkv(worst, fd_forward, &p, p.qkv, (size_t)B * T, C, p.dout, p.nout, g, FD_STEP);
    tap_ok(worst[0] < TOL_FD && worst[1] < TOL_FD && worst[2] < TOL_FD,
           "finite differences, fused attention B=%d T=%d C=%d NH=%d (45 points): dq %.2e, dk "
           "%.2e, dv %.2e",
           B, T, C, NH, worst[0], worst[1], worst[2]);
    prob_free(&p);
    free(g);
}

/* ---------------------------------------------------------------- in a GPT */

static ht_model gpt_with(int fused, int B, int T, int L, int C, int H, int V) {
    ht_model m;
    ht_attention_force(fused ? HT_ATTN_FUSED : HT_ATTN_ROWS);
    ht_exit_on_error(ht_model_gpt(&m, D, V, T, L, C, H, 0.0f, B, 0));
    ht_attention_force(HT_ATTN_AUTO);
    size_t np = m.nparams;
    float *p = malloc(np * sizeof(float));
    ref_fill_uniform(p, np, -0.5f, 0.5f, 17); /* larger than GPT-2's init: more to check */
    ht_buf_write(D, m.params, 0, np * sizeof(float), p);
    free(p);
    int32_t *tok = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4);
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)ht_rng_below(21, (uint64_t)i, (uint32_t)V);
        tgt[i] = (int32_t)ht_rng_below(22, (uint64_t)i, (uint32_t)V);
    }
    ht_model_set_batch_tokens(&m, tok, tgt, B);
    free(tok), free(tgt);
    ht_model_forward(&m, B, 1);
    ht_model_backward(&m, B, 1.0f / (float)(B * T));
    return m;
}

static size_t saved_floats(const ht_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->nlayers; i++) n += m->layers[i].save;
    return n;
}

/* The same GPT, parameters and batch on both kernel sets: loss to 1e-5 relative, gradients
 * to 1e-4 of their largest (float sums in another order through two blocks). */
static void test_gpt(int B, int T, int L, int C, int H, int V) {
    ht_model f = gpt_with(1, B, T, L, C, H, V), u = gpt_with(0, B, T, L, C, H, V);
    double lf, lu;
    ht_model_loss(&f, B, &lf, NULL), ht_model_loss(&u, B, &lu, NULL);
    size_t np = f.nparams;
    float *gf = malloc(np * 4), *gu = malloc(np * 4);
    ht_buf_read(D, f.grads, 0, np * 4, gf), ht_buf_read(D, u.grads, 0, np * 4, gu);
    double eg = nerr(gf, gu, np), el = fabs(lf - lu) / fabs(lu);
    size_t want = (size_t)L * H * ((size_t)T * T - T);
    tap_ok(f.layers[1].flash && !u.layers[1].flash && el < 1e-5 && eg < 1e-4 &&
               saved_floats(&u) - saved_floats(&f) == want,
           "GPT L%d C%d H%d T%d B%d, fused attention vs the T^2 kernels: loss %.6f vs %.6f (rel "
           "%.1e), gradients err %.2e; saved state %zu vs %zu floats per sample (L H (T^2 - T) "
           "= %zu fewer)",
           L, C, H, T, B, lf / (B * T), lu / (B * T), el, eg, saved_floats(&f), saved_floats(&u),
           want);
    ht_model_free(&f), ht_model_free(&u);
    free(gf), free(gu);
}

/* The default choice: fused from HT_ATTN_FUSED_MIN_T; the 85M GPT at T = 1024 described
 * (no device) both ways: its attention state per sample. */
static void test_choice(void) {
    ht_model a, b;
    ht_exit_on_error(ht_model_gpt_desc(&a, 256, 1024, 12, 768, 12, 0.0f, 1, 0));
    ht_attention_force(HT_ATTN_ROWS);
    ht_exit_on_error(ht_model_gpt_desc(&b, 256, 1024, 12, 768, 12, 0.0f, 1, 0));
    ht_attention_force(HT_ATTN_AUTO);
    int small = ht_attention_fused(HT_ATTN_FUSED_MIN_T - 1);
    double sa = (double)saved_floats(&a) * 4 / 1048576, sb = (double)saved_floats(&b) * 4 / 1048576;
    tap_ok(a.layers[1].flash && !b.layers[1].flash && !small &&
               ht_attention_fused(HT_ATTN_FUSED_MIN_T),
           "T >= %d chooses fused attention, T below it the T^2 kernels; 85M GPT at T = 1024: "
           "saved state %.1f MiB per sample fused, %.1f MiB with the T^2 probabilities",
           HT_ATTN_FUSED_MIN_T, sa, sb);
    ht_model_free(&a), ht_model_free(&b);
}

int main(void) {
    D = test_dev_open();
    dt_use(D);
    /* both kernel sets: one work-group per head (chosen where its tiles fit in the device's
     * local memory; at T = 1024 with fewer work-items), one work-item per row */
    for (int pass = 0; pass < 2; pass++) {
        ht_attention_force(pass ? HT_ATTN_ROWS : HT_ATTN_AUTO);
        tap_diag("fused attention kernels: %s", pass ? "one work-item per row" : "automatic");
        test_flash(1, 1, 8, 2, 1.0f, 11);     /* T = 1: out is v, lse is the one score */
        test_flash(2, 5, 15, 3, 1.0f, 12);    /* hs = 5: scalar tail only */
        test_flash(2, 31, 72, 3, 1.0f, 13);   /* hs = 24: float8 blocks; one tile short of 32 */
        test_flash(1, 32, 72, 3, 1.0f, 14);   /* exactly one tile */
        test_flash(3, 33, 72, 3, 1.0f, 15);   /* a tile and one key */
        test_flash(2, 67, 111, 3, 1.0f, 16);  /* hs = 37: a 32-column block, a float8, a tail */
        test_flash(2, 100, 128, 2, 1.0f, 17); /* hs = 64, four tiles */
        test_flash(2, 67, 72, 3, 4.0f, 18);   /* peaked softmax: rescaling across tiles */
        test_flash(1, 40, 4, 4, 1.0f, 19);    /* hs = 1 */
        if (!pass) test_flash(1, 1024, 24, 1, 1.0f, 20); /* T = 1024, fewer work-items */
        test_fd(1, 5, 12, 3);
        test_fd(2, 37, 72, 3);
        test_fd(1, 70, 48, 2);
    }
    ht_attention_force(HT_ATTN_AUTO);
    test_gpt(3, 5, 2, 8, 2, 11);
    test_gpt(2, 45, 2, 48, 2, 13); /* hs = 24, T across a tile */
    test_choice();
    ht_dev_close(D);
    return tap_done();
}
