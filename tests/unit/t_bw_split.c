/* The backward in two halves for zero-bubble schedules (issue 27), on the device: the linear
 * layer's input gradient (B, ht_linear_backward_input) and weight gradients (W,
 * ht_linear_backward_weights). Run in the zero-bubble order (B first, W later, accumulating
 * into gradients that already hold a micro-batch's), they equal today's
 * ht_linear_backward bit for bit; each half against central finite differences of
 * L = scale * sum(dy . y), y = x W^T + b computed by the device's forward (float, step 1e-2:
 * L is linear in x, W and b, so the difference is exact up to float rounding). The same for
 * LayerNorm (ht_layernorm_backward_input / _weights) with L = sum(dout . LN(x)). The
 * fused linear+activation (ht_linear_act_backward_input / ht_linear_backward_weights) against
 * plain C. The embedding needs no split: its input is token ids, so its whole backward is W.
 * At the model level (what the pipeline executor runs): ht_model_backward_part's B over a
 * stage's layers, then its W, gives the whole backward's gradients and input gradient bit
 * for bit, for an MLP (fused linear+ReLU) and a GPT (dropout on, tied and untied head),
 * with a grad_scale on a top layer that folds it (the head) and one that does not (ln_f),
 * and for a CNN (conv+ReLU, pool, strided padded conv).
 * The GPT block splits with ht_model_keep_bw (its internal gradients kept from B to W): bit
 * for bit again, B alone leaves its weight gradients (but fc's bias) untouched, and each
 * half against finite differences of the model's loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "nn/model.h"
#include "nn/ops.h"
#include "nn/ops_tf.h"
#include "devtensor.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;
#define TOL_FD 2e-3
#define STEP 1e-2f

/* L = scale * sum(dy . (x W^T + b)) on the device's forward, summed in double. */
static double loss(const float *x, const float *w, const float *b, const float *dy, int B,
                   int in, int out, float scale) {
    dt tx = dt_new((size_t)B * in, x), tw = dt_new((size_t)out * in, w), tb = dt_new((size_t)out, b),
       ty = dt_new((size_t)B * out, NULL);
    float *y = malloc(sizeof(float) * B * out);
    ht_linear_forward(D, dt_view(ty), dt_view(tx), dt_view(tw), dt_view(tb), B, in, out);
    dt_get(ty, y);
    double l = 0;
    for (int i = 0; i < B * out; i++)
        l += (double)scale * dy[i] * y[i];
    dt_free(tx), dt_free(tw), dt_free(tb), dt_free(ty);
    free(y);
    return l;
}

/* Worst |fd - g| / max(1, |g|) over k sampled entries of v (perturbed in place, restored). */
static double fd_err(float *v, size_t n, const float *g, int k, float *x, float *w, float *b,
                     const float *dy, int B, int in, int out, float scale) {
    double worst = 0;
    for (int j = 0; j < k; j++) {
        size_t i = (size_t)j * 7919 % n;
        float keep = v[i];
        v[i] = keep + STEP;
        double lp = loss(x, w, b, dy, B, in, out, scale);
        v[i] = keep - STEP;
        double lm = loss(x, w, b, dy, B, in, out, scale);
        v[i] = keep;
        double fd = (lp - lm) / (2.0 * STEP), e = fabs(fd - g[i]) / fmax(1.0, fabs(g[i]));
        worst = tap_worse(worst, e);
    }
    return worst;
}

static void test_linear(int B, int in, int out, float scale, uint64_t seed) {
    size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = hnew(nx, -1, 1, seed), *w = hnew(nw, -0.5f, 0.5f, seed + 1);
    float *b = hnew((size_t)out, -0.5f, 0.5f, seed + 2), *dy = hnew(ny, -1, 1, seed + 3);
    float *g0 = hnew(nw + out, -1, 1, seed + 4); /* an earlier micro-batch's gradients */
    float *dxf = malloc(nx * 4), *dxs = malloc(nx * 4), *gf = malloc((nw + out) * 4),
          *gs = malloc((nw + out) * 4);
    dt tx = dt_new(nx, x), tw = dt_new(nw, w), tdy = dt_new(ny, dy);
    dt tdxf = dt_new(nx, NULL), tdxs = dt_new(nx, NULL), tgf = dt_new(nw + out, g0),
       tgs = dt_new(nw + out, g0);
    ht_linear_backward(D, dt_view(tdxf), dt_view(tgf), dt_view_at(tgf, nw), dt_view(tdy),
                       dt_view(tx), dt_view(tw), B, in, out, scale, 1);
    ht_linear_backward_input(D, dt_view(tdxs), dt_view(tdy), dt_view(tw), B, in, out, scale);
    ht_linear_backward_weights(D, dt_view(tgs), dt_view_at(tgs, nw), dt_view(tdy), dt_view(tx),
                               B, in, out, scale, 1);
    dt_get(tdxf, dxf), dt_get(tdxs, dxs), dt_get(tgf, gf), dt_get(tgs, gs);
    int guards = dt_guards_ok(tdxs) && dt_guards_ok(tgs);
    tap_ok(!memcmp(dxf, dxs, nx * 4) && !memcmp(gf, gs, (nw + out) * 4) && guards,
           "linear B=%d in=%d out=%d scale=%g: B then W (accumulating) = the whole backward, "
           "bit for bit", B, in, out, scale);
    /* finite differences: the W half's increment (g - g0) and the B half's dx */
    float *inc = malloc((nw + out) * 4);
    for (size_t i = 0; i < nw + out; i++)
        inc[i] = gs[i] - g0[i];
    double ex = fd_err(x, nx, dxs, 12, x, w, b, dy, B, in, out, scale);
    double ew = fd_err(w, nw, inc, 12, x, w, b, dy, B, in, out, scale);
    double eb = fd_err(b, (size_t)out, inc + nw, 8, x, w, b, dy, B, in, out, scale);
    tap_ok(ex < TOL_FD, "linear B half: dx against finite differences, err %.2e", ex);
    tap_ok(ew < TOL_FD && eb < TOL_FD, "linear W half: dW, db against finite differences, "
           "err %.2e, %.2e", ew, eb);
    dt_free(tx), dt_free(tw), dt_free(tdy), dt_free(tdxf), dt_free(tdxs), dt_free(tgf),
        dt_free(tgs);
    free(x), free(w), free(b), free(dy), free(g0), free(dxf), free(dxs), free(gf), free(gs),
        free(inc);
}

/* ---------------------------------------------------------------- LayerNorm */

static double ln_loss(const float *x, const float *w, const float *b, const float *dout, int N,
                      int C) {
    dt tx = dt_new((size_t)N * C, x), tw = dt_new((size_t)C, w), tb = dt_new((size_t)C, b),
       ty = dt_new((size_t)N * C, NULL), tm = dt_new((size_t)N, NULL), tr = dt_new((size_t)N, NULL);
    float *y = malloc(sizeof(float) * N * C);
    ht_layernorm_forward(D, dt_view(ty), dt_view(tm), dt_view(tr), dt_view(tx), dt_view(tw),
                         dt_view(tb), N, C);
    dt_get(ty, y);
    double l = 0;
    for (int i = 0; i < N * C; i++)
        l += (double)dout[i] * y[i];
    dt_free(tx), dt_free(tw), dt_free(tb), dt_free(ty), dt_free(tm), dt_free(tr);
    free(y);
    return l;
}

static double ln_fd(float *v, size_t n, const float *g, int k, const float *x, const float *w,
                    const float *b, const float *dout, int N, int C) {
    double worst = 0;
    for (int j = 0; j < k; j++) {
        size_t i = (size_t)j * 7919 % n;
        float keep = v[i];
        v[i] = keep + STEP;
        double lp = ln_loss(x, w, b, dout, N, C);
        v[i] = keep - STEP;
        double lm = ln_loss(x, w, b, dout, N, C);
        v[i] = keep;
        worst = tap_worse(worst, fabs((lp - lm) / (2.0 * STEP) - g[i]) / fmax(1.0, fabs(g[i])));
    }
    return worst;
}

static void test_layernorm(int N, int C, uint64_t seed) {
    size_t n = (size_t)N * C;
    float *x = hnew(n, -2, 2, seed), *w = hnew((size_t)C, 0.5f, 1.5f, seed + 1);
    float *b = hnew((size_t)C, -0.5f, 0.5f, seed + 2), *dout = hnew(n, -1, 1, seed + 3);
    float *g0 = hnew(2 * (size_t)C, -1, 1, seed + 4), *dx0 = hnew(n, -1, 1, seed + 5);
    float *dxf = malloc(n * 4), *dxs = malloc(n * 4), *gf = malloc(8 * (size_t)C),
          *gs = malloc(8 * (size_t)C);
    dt tx = dt_new(n, x), tw = dt_new((size_t)C, w), tb = dt_new((size_t)C, b),
       tdo = dt_new(n, dout), ty = dt_new(n, NULL), tm = dt_new((size_t)N, NULL),
       tr = dt_new((size_t)N, NULL);
    ht_layernorm_forward(D, dt_view(ty), dt_view(tm), dt_view(tr), dt_view(tx), dt_view(tw),
                         dt_view(tb), N, C);
    /* add_dinp and accumulate: as a pre-LN block runs it, onto earlier gradients */
    dt tdxf = dt_new(n, dx0), tdxs = dt_new(n, dx0), tgf = dt_new(2 * (size_t)C, g0),
       tgs = dt_new(2 * (size_t)C, g0);
    ht_layernorm_backward(D, dt_view(tdxf), dt_view(tgf), dt_view_at(tgf, (size_t)C),
                          dt_view(tdo), dt_view(tx), dt_view(tw), dt_view(tm), dt_view(tr), N, C,
                          1, 1);
    ht_layernorm_backward_input(D, dt_view(tdxs), dt_view(tdo), dt_view(tx), dt_view(tw),
                                dt_view(tm), dt_view(tr), N, C, 1);
    ht_layernorm_backward_weights(D, dt_view(tgs), dt_view_at(tgs, (size_t)C), dt_view(tdo),
                                  dt_view(tx), dt_view(tm), dt_view(tr), N, C, 1);
    dt_get(tdxf, dxf), dt_get(tdxs, dxs), dt_get(tgf, gf), dt_get(tgs, gs);
    tap_ok(!memcmp(dxf, dxs, n * 4) && !memcmp(gf, gs, 8 * (size_t)C) && dt_guards_ok(tdxs) &&
               dt_guards_ok(tgs),
           "layernorm N=%d C=%d: B then W (adding, accumulating) = the whole backward, bit for "
           "bit", N, C);
    for (size_t i = 0; i < n; i++)
        dxs[i] -= dx0[i]; /* the increments each half added */
    for (size_t i = 0; i < 2 * (size_t)C; i++)
        gs[i] -= g0[i];
    double ex = ln_fd(x, n, dxs, 12, x, w, b, dout, N, C);
    double ew = ln_fd(w, (size_t)C, gs, 8, x, w, b, dout, N, C);
    double eb = ln_fd(b, (size_t)C, gs + C, 8, x, w, b, dout, N, C);
    tap_ok(ex < TOL_FD, "layernorm B half: dx against finite differences, err %.2e", ex);
    tap_ok(ew < TOL_FD && eb < TOL_FD, "layernorm W half: dw, db against finite differences, "
           "err %.2e, %.2e", ew, eb);
    dt_free(tx), dt_free(tw), dt_free(tb), dt_free(tdo), dt_free(ty), dt_free(tm), dt_free(tr);
    dt_free(tdxf), dt_free(tdxs), dt_free(tgf), dt_free(tgs);
    free(x), free(w), free(b), free(dout), free(g0), free(dx0), free(dxf), free(dxs), free(gf),
        free(gs);
}

/* ---------------------------------------------------------------- fused linear + ReLU */

/* ht_linear_act_backward_input then ht_linear_backward_weights (accumulating onto g0) against
 * the whole fused backward bit for bit, and each half against plain C in double:
 * dy = scale da (y > 0), db = g0 + sum dy, dx = dy W, dW = g0 + dy^T x. */
static void test_linear_relu(int B, int in, int out, float scale, uint64_t seed) {
    size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = hnew(nx, -1, 1, seed), *w = hnew(nw, -0.5f, 0.5f, seed + 1);
    float *y = hnew(ny, -1, 1, seed + 2), *da = hnew(ny, -1, 1, seed + 3);
    float *g0 = hnew(nw + out, -1, 1, seed + 4);
    float *dxf = malloc(nx * 4), *dxs = malloc(nx * 4), *gf = malloc((nw + out) * 4),
          *gs = malloc((nw + out) * 4), *dyf = malloc(ny * 4), *dys = malloc(ny * 4);
    dt tx = dt_new(nx, x), tw = dt_new(nw, w), ty = dt_new(ny, y), tda = dt_new(ny, da);
    dt tdyf = dt_new(ny, NULL), tdys = dt_new(ny, NULL), tdxf = dt_new(nx, NULL),
       tdxs = dt_new(nx, NULL), tgf = dt_new(nw + out, g0), tgs = dt_new(nw + out, g0);
    ht_linear_act_backward(D, dt_view(tdxf), dt_view(tgf), dt_view_at(tgf, nw), dt_view(tdyf),
                           dt_view(tda), dt_view(ty), dt_view(tx), dt_view(tw), B, in, out,
                           HT_ACT_RELU, scale, 1);
    ht_linear_act_backward_input(D, dt_view(tdxs), dt_view_at(tgs, nw), dt_view(tdys),
                                 dt_view(tda), dt_view(ty), dt_view(tw), B, in, out, HT_ACT_RELU,
                                 scale, 1);
    ht_linear_backward_weights(D, dt_view(tgs), ht_view_none(), dt_view(tdys), dt_view(tx), B, in,
                               out, 1.0f, 1);
    dt_get(tdxf, dxf), dt_get(tdxs, dxs), dt_get(tgf, gf), dt_get(tgs, gs), dt_get(tdyf, dyf),
        dt_get(tdys, dys);
    int guards = dt_guards_ok(tdxs) && dt_guards_ok(tgs) && dt_guards_ok(tdys);
    tap_ok(!memcmp(dxf, dxs, nx * 4) && !memcmp(gf, gs, (nw + out) * 4) &&
               !memcmp(dyf, dys, ny * 4) && guards,
           "linear+relu B=%d in=%d out=%d: B then W (accumulating) = the fused backward, bit for "
           "bit", B, in, out);
    double edy = 0, edx = 0, edw = 0, edb = 0;
    for (size_t i = 0; i < ny; i++)
        edy = tap_worse(edy, fabs(dys[i] - (y[i] > 0 ? (double)scale * da[i] : 0.0)));
    for (int o = 0; o < out; o++) {
        double sb = g0[nw + o];
        for (int r = 0; r < B; r++)
            sb += dys[(size_t)r * out + o];
        edb = tap_worse(edb, fabs(gs[nw + o] - sb) / fmax(1.0, fabs(sb)));
        for (int i = 0; i < in; i++) {
            double sw = g0[(size_t)o * in + i];
            for (int r = 0; r < B; r++)
                sw += (double)dys[(size_t)r * out + o] * x[(size_t)r * in + i];
            edw = tap_worse(edw, fabs(gs[(size_t)o * in + i] - sw) / fmax(1.0, fabs(sw)));
        }
    }
    for (int r = 0; r < B; r++)
        for (int i = 0; i < in; i++) {
            double sx = 0;
            for (int o = 0; o < out; o++)
                sx += (double)dys[(size_t)r * out + o] * w[(size_t)o * in + i];
            edx = tap_worse(edx, fabs(dxs[(size_t)r * in + i] - sx) / fmax(1.0, fabs(sx)));
        }
    tap_ok(edy < 1e-6 && edx < 1e-5 && edb < 1e-5,
           "linear+relu B half: dy, dx, db against plain C, err %.2e %.2e %.2e", edy, edx, edb);
    tap_ok(edw < 1e-5, "linear+relu W half: dW against plain C, err %.2e", edw);
    dt_free(tx), dt_free(tw), dt_free(ty), dt_free(tda), dt_free(tdyf), dt_free(tdys),
        dt_free(tdxf), dt_free(tdxs), dt_free(tgf), dt_free(tgs);
    free(x), free(w), free(y), free(da), free(g0), free(dxf), free(dxs), free(gf), free(gs),
        free(dyf), free(dys);
}

/* One run of layers [lo, hi) backward from a fresh forward (the same dropout masks): grads
 * start from g0; whole (part < 0) or B then W. Returns grads and dact(lo) in g, dx. */
static void model_run(ht_model *m, int B, int lo, int hi, float scale, const float *g0, int part,
                      float *g, float *dx) {
    const size_t np = m->nparams * sizeof(float), nx = (size_t)B * m->width[lo] * sizeof(float);
    ht_buf_write(D, m->grads, 0, np, g0);
    ht_model_set_training(m, 1, 11, 3);
    ht_model_set_row_offset(m, 0);
    ht_model_forward(m, B, 1);
    const size_t nt = (size_t)B * m->width[hi];
    if (hi < m->nlayers) { /* a stage's incoming gradient (the last one's is the loss's) */
        float *t = malloc(nt * sizeof(float));
        for (size_t i = 0; i < nt; i++)
            t[i] = (float)(ht_rng_below(1000, i, 9) - 500) * 1e-3f;
        ht_buf_write(D, m->dacts, ht_model_dact(m, hi).off * sizeof(float), nt * sizeof(float), t);
        free(t);
    }
    if (part < 0) ht_model_backward_range(m, lo, hi, B, scale, 1);
    else {
        ht_model_backward_part(m, lo, hi, B, scale, 1, HT_BW_INPUT);
        ht_model_backward_part(m, lo, hi, B, scale, 1, HT_BW_WEIGHTS);
    }
    ht_buf_read(D, m->grads, 0, np, g);
    if (lo > 0) ht_buf_read(D, m->dacts, ht_model_dact(m, lo).off * sizeof(float), nx, dx);
}

/* B then W against the whole backward over [lo, hi): bit for bit */
static void model_split(ht_model *m, int B, int lo, int hi, float scale, const char *what) {
    const size_t np = m->nparams, nx = (size_t)B * m->width[lo];
    float *g0 = calloc(np, sizeof(float)), *ga = malloc(np * sizeof(float)),
          *gb = malloc(np * sizeof(float)), *xa = calloc(nx, sizeof(float)),
          *xb = calloc(nx, sizeof(float));
    for (size_t i = 0; i < np; i++) /* a micro-batch's gradient already there */
        g0[i] = (float)(ht_rng_below(1000, i, 7) - 500) * 1e-4f;
    model_run(m, B, lo, hi, scale, g0, -1, ga, xa);
    model_run(m, B, lo, hi, scale, g0, 0, gb, xb);
    size_t moved = 0;
    for (size_t i = 0; i < np; i++)
        moved += ga[i] != g0[i];
    tap_ok(!memcmp(ga, gb, np * sizeof(float)) && !memcmp(xa, xb, nx * sizeof(float)) &&
               moved > 0,
           "%s, layers [%d, %d), scale %g: B then W = the whole backward bit for bit (%zu of "
           "%zu gradients changed)",
           what, lo, hi, scale, moved, np);
    free(g0), free(ga), free(gb), free(xa), free(xb);
}

static void test_model_mlp(void) {
    enum { IN = 9, C = 5, B = 6 };
    const int hidden[] = {11, 7};
    ht_model m;
    ht_exit_on_error(ht_model_mlp(&m, D, IN, hidden, 2, C, "relu", B));
    ht_model_init_params(&m, 42);
    float x[B * IN];
    int32_t y[B];
    for (int i = 0; i < B * IN; i++)
        x[i] = (float)(ht_rng_below(1000, i, 5) - 500) * 4e-3f;
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)ht_rng_below(10, i, C);
    ht_model_set_batch(&m, x, y, B);
    model_split(&m, B, 0, m.nlayers, 0.5f, "MLP");
    model_split(&m, B, 2, m.nlayers, 0.25f, "MLP, upper stage");
    model_split(&m, B, 0, 2, 1.0f, "MLP, lower stage");
    ht_model_free(&m);
}

/* Which parameters the block's B half alone moves: only fc's bias (it rides on the GELU
 * pass) of the blocks' tensors; W moves the rest. g0 = 0, so "moved" is "nonzero". */
static void block_halves(ht_model *m, int B) {
    const size_t np = m->nparams;
    float *g0 = calloc(np, sizeof(float)), *g = malloc(np * sizeof(float));
    ht_buf_write(D, m->grads, 0, np * sizeof(float), g0);
    ht_model_set_training(m, 1, 11, 3);
    ht_model_forward(m, B, 1);
    int bad_b = 0, moved_w = 0, nt = 0;
    for (int pass = 0; pass < 2; pass++) {
        ht_model_backward_part(m, 0, m->nlayers, B, 1.0f, 1, pass ? HT_BW_WEIGHTS : HT_BW_INPUT);
        ht_buf_read(D, m->grads, 0, np * sizeof(float), g);
        for (int i = 0; i < m->nlayers; i++) {
            const ht_layer *l = &m->layers[i];
            if (l->kind != HT_LAYER_BLOCK) continue;
            for (int j = 0; j < l->ntensors; j++) {
                size_t n = 1, nz = 0;
                for (int k = 0; k < l->t[j].ndim; k++)
                    n *= (size_t)l->t[j].shape[k];
                for (size_t k = 0; k < n; k++)
                    nz += g[l->t[j].off + k] != 0.0f;
                const int fcb = !strcmp(l->t[j].name, "mlp.fc.bias");
                if (!pass) bad_b += fcb ? nz == 0 : nz != 0;
                else moved_w += nz > 0, nt++;
            }
        }
    }
    tap_ok(bad_b == 0 && moved_w == nt && nt > 0,
           "GPT blocks: B leaves every weight gradient but fc's bias to W (%d wrong), W moves "
           "all %d tensors (%d)", bad_b, nt, moved_w);
    free(g0), free(g);
}

/* The block's halves against central differences of the summed loss (no dropout): W's
 * gradient of a few elements of every tensor of block 1, and B's input gradient through
 * both blocks, ln_f and the head (dact(1), read before W runs) against wpe's perturbation
 * (dL/dwpe[t,c] = sum over b of dact(1)[b,t,c]). */
static double loss_of(ht_model *m, int B) {
    double l;
    ht_model_forward(m, B, 0);
    ht_model_loss(m, B, &l, NULL);
    return l;
}

/* a smaller step than the ops' (the loss is far from linear in the block's parameters);
 * the summed float losses' rounding then stays near 1e-4 */
#define MSTEP 1e-3f
static double fd_at(ht_model *m, int B, size_t k) {
    float p0, p;
    ht_buf_read(D, m->params, k * sizeof(float), sizeof p0, &p0);
    p = p0 + MSTEP;
    ht_buf_write(D, m->params, k * sizeof(float), sizeof p, &p);
    double lp = loss_of(m, B);
    p = p0 - MSTEP;
    ht_buf_write(D, m->params, k * sizeof(float), sizeof p, &p);
    double lm = loss_of(m, B);
    ht_buf_write(D, m->params, k * sizeof(float), sizeof p0, &p0);
    return (lp - lm) / (2.0 * MSTEP);
}

static void test_block_fd(void) {
    enum { V = 11, T = 4, B = 2, C = 8 };
    ht_model m;
    ht_exit_on_error(ht_model_gpt(&m, D, V, T, 2, C, 2, 0.0f, B, 0));
    ht_model_keep_bw(&m);
    ht_model_init_params(&m, 44);
    int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)ht_rng_below(22, i, V), tgt[i] = (int32_t)ht_rng_below(23, i, V);
    ht_model_set_batch_tokens(&m, tok, tgt, B);
    ht_model_set_training(&m, 0, 0, 0);
    const size_t np = m.nparams;
    float *g = malloc(np * sizeof(float)), dx[B * T * C];
    ht_model_forward(&m, B, 1);
    ht_model_backward_part(&m, 0, m.nlayers, B, 1.0f, 0, HT_BW_INPUT);
    ht_buf_read(D, m.dacts, ht_model_dact(&m, 1).off * sizeof(float), sizeof dx, dx);
    ht_model_backward_part(&m, 0, m.nlayers, B, 1.0f, 0, HT_BW_WEIGHTS);
    ht_buf_read(D, m.grads, 0, np * sizeof(float), g);
    double ew = 0, eb = 0;
    const ht_layer *l = &m.layers[2]; /* block 1 */
    for (int j = 0; j < l->ntensors; j++) {
        size_t n = 1;
        for (int k = 0; k < l->t[j].ndim; k++)
            n *= (size_t)l->t[j].shape[k];
        for (size_t q = 0; q < 3; q++) {
            size_t k = l->t[j].off + (q * 7 + (size_t)j) % n;
            double fd = fd_at(&m, B, k);
            ew = tap_worse(ew, fabs(g[k] - fd) / fmax(1.0, fabs(fd)));
        }
    }
    const ht_param_tensor *wpe = &m.layers[0].t[1];
    for (int q = 0; q < 6; q++) {
        int t = q % T, c = (q * 5) % C;
        double sb = 0;
        for (int b = 0; b < B; b++)
            sb += dx[((size_t)b * T + t) * C + c];
        double fd = fd_at(&m, B, wpe->off + (size_t)t * C + c);
        eb = tap_worse(eb, fabs(sb - fd) / fmax(1.0, fabs(fd)));
    }
    tap_ok(ew < TOL_FD, "GPT block W half: 36 weight gradients of block 1 against finite "
                        "differences of the loss, err %.2e", ew);
    tap_ok(eb < TOL_FD, "GPT blocks' B half: input gradient against finite differences (wpe), "
                        "err %.2e", eb);
    free(g);
    ht_model_free(&m);
}

static void test_model_gpt(int tie, int keep) {
    enum { V = 13, T = 8, B = 3 };
    ht_model m;
    ht_exit_on_error(ht_model_gpt(&m, D, V, T, 2, 16, 2, 0.1f, B, tie));
    if (keep) ht_model_keep_bw(&m); /* the blocks split; without it they run whole in B */
    ht_model_init_params(&m, 43);
    int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)ht_rng_below(20, i, V), tgt[i] = (int32_t)ht_rng_below(21, i, V);
    ht_model_set_batch_tokens(&m, tok, tgt, B);
    const char *w = keep ? (tie ? "GPT, tied head, blocks split" : "GPT, blocks split")
                         : (tie ? "GPT, tied head" : "GPT");
    model_split(&m, B, 0, m.nlayers, 0.5f, w); /* embed, 2 blocks, ln_f, head */
    model_split(&m, B, 1, m.nlayers - 1, 0.25f, w); /* the blocks and ln_f: scaled in place */
    model_split(&m, B, 2, 3, 1.0f, w);              /* one block: a stage's input gradient */
    if (keep && !tie) block_halves(&m, B);
    ht_model_free(&m);
}

/* A CNN with a fused conv+ReLU, a conv without activation after a pool, stride 2 and padding,
 * odd sizes and a batch that is not a multiple of the chunk: B then W = whole bit for bit
 * (conv's W recomputes the output gradient's pass from the slot's da and y). */
static void test_model_cnn(void) {
    enum { B = 5, C = 4 };
    const char *const specs[] = {"conv 3 6 pad=1", "relu",   "maxpool 2",
                                 "conv 3 5 stride=2 pad=2", "flatten", "linear 4"};
    ht_model m;
    ht_exit_on_error(ht_model_cnn(&m, D, (ht_shape){3, {2, 11, 9}}, specs, 6, C, B));
    ht_model_init_params(&m, 44);
    float x[B * 2 * 11 * 9];
    int32_t y[B];
    for (int i = 0; i < B * 2 * 11 * 9; i++)
        x[i] = (float)(ht_rng_below(1000, i, 6) - 500) * 4e-3f;
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)ht_rng_below(10, i, C);
    ht_model_set_batch(&m, x, y, B);
    model_split(&m, B, 0, m.nlayers, 0.5f, "CNN");
    model_split(&m, B, 3, m.nlayers, 0.25f, "CNN, upper stage (conv stride 2 first)");
    model_split(&m, B, 0, 3, 0.5f, "CNN, lower stage (conv+relu, pool: scaled in place)");
    ht_model_free(&m);
}

int main(void) {
    D = test_dev_open();
    dt_use(D);
    /* the shapes t_ops uses (CLBlast compiles per shape and process) */
    test_linear(7, 13, 37, 0.25f, 31);
    test_linear(1, 13, 37, 1.0f, 32);
    test_layernorm(5, 12, 41);
    test_layernorm(3, 37, 42);
    test_linear_relu(7, 13, 37, 0.25f, 51);
    test_model_mlp();
    test_model_gpt(0, 0);
    test_model_gpt(1, 0);
    test_model_gpt(0, 1);
    test_model_gpt(1, 1);
    test_block_fd();
    test_model_cnn();
    ht_dev_close(D);
    return tap_done();
}
