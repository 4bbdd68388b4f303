/* Transformer ops other than attention (t_attn.c) on the device against tests/lib/ref_tf.c:
 * token+position embedding, LayerNorm, residual add, dropout; forward and backward on odd
 * shapes, finite differences, guard cells around every tensor, dropout's mask properties. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "nn/ops_tf.h"
#include "ref.h"
#include "ref_tf.h"
#include "devtensor.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;

/* Tolerances (stated once). Embedding forward and residual add are one float add: exact.
 * Sums of a few hundred terms (embedding backward, LayerNorm dw/db) and LayerNorm outputs
 * vs double: max |err| / max |ref| below TOL_SUM (means: |err| / max(|mean|, 0.1)). Finite
 * differences |fd - g| / max(1, |g|) with float steps of 1e-2 (L accumulated in double from float
 * outputs). */
#define TOL_SUM 1e-5
#define TOL_FD 2e-3
#define FD_STEP 1e-2f

/* ---------------------------------------------------------------- device tensors */

static float *hfill(size_t n, float v) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = v;
    return h;
}
static float *hcopy(const float *x, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    memcpy(h, x, n * sizeof(float));
    return h;
}

static double dot_d(const float *r, const float *y, size_t n) {
    double L = 0;
    for (size_t i = 0; i < n; i++)
        L += (double)r[i] * y[i];
    return L;
}

/* Tokens with repeats: every third one from {0,1,2,3}, the rest anywhere in [0,V). */
static int32_t *tokens_new(int n, int V, uint64_t seed) {
    int32_t *tok = malloc(n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)ht_rng_below(seed, i, i % 3 ? (uint32_t)V : 4u);
    tok[n - 1] = V - 1;
    return tok;
}

/* ---------------------------------------------------------------- embedding */

/* wpe has T + 3 rows (a model's context may exceed this batch's T): rows >= T must keep their
 * gradient untouched. */
static void test_embed(int B, int T, int C, int V, uint64_t seed) {
    int BT = B * T, P = T + 3;
    size_t no = (size_t)BT * C, nw = (size_t)V * C, np = (size_t)P * C;
    int32_t *tok = tokens_new(BT, V, seed);
    float *wte = hnew(nw, -1, 1, seed + 1), *wpe = hnew(np, -1, 1, seed + 2);
    float *dout = hnew(no, -1, 1, seed + 3), *out = malloc(no * 4), *outr = malloc(no * 4);
    dt ttok = dt_new((size_t)BT, tok), twte = dt_new(nw, wte), twpe = dt_new(np, wpe),
       tout = dt_new(no, NULL), tdout = dt_new(no, dout);
    ht_embed_forward(D, dt_view(tout), dt_view(ttok), dt_view(twte), dt_view(twpe), B, T, C, V);
    dt_get(tout, out);
    ref_embed_forward(outr, tok, wte, wpe, B, T, C);
    int exact = !memcmp(out, outr, no * 4);
    tap_ok(exact && dt_guards_ok(tout), "embedding forward B=%d T=%d C=%d V=%d: exact", B, T, C, V);

    /* overwrite both; add into both (micro-batches); add into dwte only (a tied head wrote
     * its dW there first, wpe is the embedding's alone) */
    for (int mode = 0; mode <= 2; mode++) {
        int aw = mode >= 1, ap = mode == 1;
        float *gw0 = aw ? hnew(nw, -1, 1, seed + 4) : hfill(nw, NAN);
        float *gp0 = ap ? hnew(np, -1, 1, seed + 5) : hfill(np, NAN);
        float *gwr = hcopy(gw0, nw), *gpr = hcopy(gp0, np), *gw = malloc(nw * 4),
              *gp = malloc(np * 4);
        dt tgw = dt_new(nw, gw0), tgp = dt_new(np, gp0);
        ht_embed_backward(D, dt_view(tgw), dt_view(tgp), dt_view(tdout), dt_view(ttok), B, T, C,
                          V, aw, ap);
        dt_get(tgw, gw);
        dt_get(tgp, gp);
        float *spw = hcopy(gw0, nw), *spp = hcopy(gp0, np); /* the other half of each call */
        ref_embed_backward(gwr, spp, dout, tok, B, T, C, V, aw);
        ref_embed_backward(spw, gpr, dout, tok, B, T, C, V, ap);
        free(spw), free(spp);
        double ew = nerr(gw, gwr, nw), ep = nerr(gp, gpr, (size_t)T * C);
        int unused_zero = 1, tail = 1, unused = 0;
        for (int v = 0; v < V && !aw; v++) {
            int used = 0;
            for (int i = 0; i < BT; i++)
                used |= tok[i] == v;
            unused += !used;
            for (int c = 0; c < C && !used; c++)
                unused_zero &= gw[(size_t)v * C + c] == 0.0f;
        }
        for (size_t i = (size_t)T * C; i < np; i++) /* rows >= T untouched */
            tail &= ap ? gp[i] == gp0[i] : isnan(gp[i]);
        tap_ok(ew < TOL_SUM && ep < TOL_SUM && unused_zero && tail && dt_guards_ok(tgw) &&
                   dt_guards_ok(tgp),
               "embedding backward B=%d T=%d C=%d acc_wte=%d acc_wpe=%d: dwte err %.2e, dwpe err "
               "%.2e, %d unused rows exactly 0, wpe rows >= T untouched",
               B, T, C, aw, ap, ew, ep, unused);
        dt_free(tgw), dt_free(tgp);
        free(gw0), free(gp0), free(gwr), free(gpr), free(gw), free(gp);
    }
    dt_free(ttok), dt_free(twte), dt_free(twpe), dt_free(tout), dt_free(tdout);
    free(tok), free(wte), free(wpe), free(dout), free(out), free(outr);
}

/* Tokens -1 and V: NaN rows forward, nothing out of bounds, ignored by dwte. */
static void test_embed_bad_tokens(void) {
    enum { B = 2, T = 5, C = 20, V = 256, BT = B * T };
    int32_t tok[BT] = {3, -1, 7, 3, 255, 0, V, 3, 1, 2};
    float *wte = hnew(V * C, -1, 1, 41), *wpe = hnew(T * C, -1, 1, 42);
    float *dout = hnew(BT * C, -1, 1, 43), out[BT * C], gw[V * C], gp[T * C];
    dt ttok = dt_new(BT, tok), twte = dt_new(V * C, wte), twpe = dt_new(T * C, wpe),
       tout = dt_new(BT * C, NULL), tdout = dt_new(BT * C, dout), tgw = dt_new(V * C, NULL),
       tgp = dt_new(T * C, NULL);
    ht_embed_forward(D, dt_view(tout), dt_view(ttok), dt_view(twte), dt_view(twpe), B, T, C, V);
    ht_embed_backward(D, dt_view(tgw), dt_view(tgp), dt_view(tdout), dt_view(ttok), B, T, C, V, 0, 0);
    dt_get(tout, out), dt_get(tgw, gw), dt_get(tgp, gp);
    int nan_rows = 1, finite = 1;
    for (int r = 0; r < BT; r++)
        for (int c = 0; c < C; c++)
            if (r == 1 || r == 6)
                nan_rows &= isnan(out[r * C + c]) != 0;
            else
                finite &= isfinite(out[r * C + c]) != 0;
    /* reference: bad positions contribute to dwpe only */
    float *dref = hcopy(dout, BT * C), gwr[V * C], gpr[T * C];
    int32_t tref[BT];
    for (int r = 0; r < BT; r++) {
        tref[r] = tok[r] < 0 || tok[r] >= V ? 0 : tok[r];
        if (tok[r] != tref[r])
            for (int c = 0; c < C; c++)
                dref[r * C + c] = 0.0f;
    }
    ref_embed_backward(gwr, gpr, dref, tref, B, T, C, V, 0);
    double ew = nerr(gw, gwr, V * C);
    ref_embed_backward(gwr, gpr, dout, tref, B, T, C, V, 0);
    double ep = nerr(gp, gpr, T * C);
    tap_ok(nan_rows && finite && ew < TOL_SUM && ep < TOL_SUM && dt_guards_ok(tout) &&
               dt_guards_ok(tgw) && dt_guards_ok(tgp),
           "embedding tokens -1 and V: NaN rows, other rows finite, ignored by dwte (err %.2e), "
           "dwpe err %.2e, guards intact",
           ew, ep);
    dt_free(ttok), dt_free(twte), dt_free(twpe), dt_free(tout), dt_free(tdout), dt_free(tgw),
        dt_free(tgp);
    free(wte), free(wpe), free(dout), free(dref);
}

/* L = sum r . out; central differences on wte entries of used and unused rows, wpe entries. */
static void test_fd_embed(void) {
    enum { B = 2, T = 7, C = 15, V = 256, BT = B * T };
    int32_t *tok = tokens_new(BT, V, 51);
    float *wte = hnew(V * C, -1, 1, 52), *wpe = hnew(T * C, -1, 1, 53),
          *r = hnew(BT * C, -1, 1, 54);
    float out[BT * C], gw[V * C], gp[T * C];
    dt ttok = dt_new(BT, tok), twte = dt_new(V * C, wte), twpe = dt_new(T * C, wpe),
       tout = dt_new(BT * C, NULL), tr = dt_new(BT * C, r), tgw = dt_new(V * C, NULL),
       tgp = dt_new(T * C, NULL);
    ht_embed_backward(D, dt_view(tgw), dt_view(tgp), dt_view(tr), dt_view(ttok), B, T, C, V, 0, 0);
    dt_get(tgw, gw), dt_get(tgp, gp);
    double worst = 0;
    int checked = 0, zero_unused = 1, nunused = 0;
    for (int k = 0; k < 40; k++) {
        int which = k % 4 == 3; /* 0: wte, 1: wpe */
        size_t n = which ? T * C : V * C, i = (size_t)(k * 7919u + 13u) % n;
        if (!which && k % 4 == 1) i = (size_t)tok[k % BT] * C + k % C; /* a used row */
        float *h = which ? wpe : wte, *g = which ? gp : gw, v = h[i];
        double L[2];
        for (int s = 0; s < 2; s++) {
            h[i] = s ? v - FD_STEP : v + FD_STEP;
            dt_set(which ? twpe : twte, h);
            ht_embed_forward(D, dt_view(tout), dt_view(ttok), dt_view(twte), dt_view(twpe), B, T, C, V);
            dt_get(tout, out);
            L[s] = dot_d(r, out, BT * C);
        }
        h[i] = v;
        dt_set(which ? twpe : twte, h);
        double fd = (L[0] - L[1]) / ((double)(v + FD_STEP) - (double)(v - FD_STEP));
        double e = fabs(fd - g[i]) / fmax(1.0, fabs(g[i]));
        worst = tap_worse(worst, e);
        int used = which;
        for (int p = 0; p < BT && !which; p++)
            used |= tok[p] == (int)(i / C);
        if (!used) nunused++, zero_unused &= fd == 0.0 && g[i] == 0.0f;
        checked++;
    }
    tap_ok(worst < TOL_FD && zero_unused && nunused >= 5,
           "finite differences, embedding B=2 T=7 C=15 (%d points, %d in unused rows: fd and grad "
           "exactly 0): err %.2e",
           checked, nunused, worst);
    dt_free(ttok), dt_free(twte), dt_free(twpe), dt_free(tout), dt_free(tr), dt_free(tgw),
        dt_free(tgp);
    free(tok), free(wte), free(wpe), free(r);
}

/* ---------------------------------------------------------------- layernorm */

static void test_layernorm(int N, int C, uint64_t seed) {
    size_t n = (size_t)N * C;
    float *x = hnew(n, -2, 2, seed), *w = hnew(C, -1.5f, 1.5f, seed + 1),
          *b = hnew(C, -1, 1, seed + 2), *dout = hnew(n, -1, 1, seed + 3);
    for (int c = 0; c < C; c++)      /* row 0 far from zero mean: mean 100, std 0.12 (a one-pass */
        x[c] = 100.0f + 0.1f * x[c]; /* variance E[x^2] - E[x]^2 would lose it in float) */
    float *out = malloc(n * 4), *outr = malloc(n * 4), *m = malloc(N * 4), *mr = malloc(N * 4),
          *rs = malloc(N * 4), *rsr = malloc(N * 4);
    dt tx = dt_new(n, x), tw = dt_new(C, w), tb = dt_new(C, b), tout = dt_new(n, NULL),
       tm = dt_new(N, NULL), trs = dt_new(N, NULL), tdout = dt_new(n, dout);
    ht_layernorm_forward(D, dt_view(tout), dt_view(tm), dt_view(trs), dt_view(tx), dt_view(tw), dt_view(tb), N, C);
    dt_get(tout, out), dt_get(tm, m), dt_get(trs, rs);
    ref_layernorm_forward(outr, mr, rsr, x, w, b, N, C);
    /* row 0: the float mean is off by ~1e-6 of 100, i.e. ~1e-5 of the std: its own tolerance */
    double eo0 = nerr(out, outr, C), eo = nerr(out + C, outr + C, n - C);
    double em = tap_max_relerr(m, mr, N, 0.1), er = tap_max_relerr(rs, rsr, N, 1e-30);
    tap_ok(eo0 < 1e-3 && eo < TOL_SUM && em < TOL_SUM && er < 1e-4 && dt_guards_ok(tout) &&
               dt_guards_ok(tm) && dt_guards_ok(trs),
           "layernorm forward N=%d C=%d: out err %.2e (row 0 at mean 100, std 0.12: %.2e), mean "
           "%.2e, rstd %.2e",
           N, C, eo, eo0, em, er);

    for (int mode = 0; mode < 3; mode++) { /* 0: overwrite, 1: add_dinp, 2: + accumulate */
        int add = mode >= 1, acc = mode == 2;
        float *dx0 = add ? hnew(n, -1, 1, seed + 4) : hfill(n, NAN);
        float *g0 = acc ? hnew(2 * C, -1, 1, seed + 5) : hfill(2 * C, NAN);
        float *dxr = hcopy(dx0, n), *gr = hcopy(g0, 2 * C), *dx = malloc(n * 4),
              *g = malloc(2 * C * 4);
        dt tdx = dt_new(n, dx0), tg = dt_new(2 * C, g0);
        ht_layernorm_backward(D, dt_view(tdx), dt_view(tg), ht_view_at(tg.buf, GUARD + C), dt_view(tdout), dt_view(tx),
                              dt_view(tw), dt_view(tm), dt_view(trs), N, C, add, acc);
        dt_get(tdx, dx), dt_get(tg, g);
        ref_layernorm_backward(dxr, gr, gr + C, dout, x, w, N, C, add, acc);
        /* row 0 (rstd ~ 9) has larger gradients and the float mean's error: its own scale;
         * its normalised values, off by ~2e-5, enter dw too (1e-4) */
        double ex0 = nerr(dx, dxr, C), ex = nerr(dx + C, dxr + C, n - C);
        double ew = nerr(g, gr, C), eb = nerr(g + C, gr + C, C);
        tap_ok(ex0 < 1e-3 && ex < TOL_SUM && ew < 1e-4 && eb < TOL_SUM && dt_guards_ok(tdx) &&
                   dt_guards_ok(tg),
               "layernorm backward N=%d C=%d add_dinp=%d acc=%d: dinp err %.2e (row 0: %.2e), dw "
               "%.2e, db %.2e",
               N, C, add, acc, ex, ex0, ew, eb);
        if (mode == 0) { /* in place, dinp aliasing dout: the same values */
            float *dx2 = malloc(n * 4);
            ht_layernorm_backward(D, dt_view(tdout), dt_view(tg), ht_view_at(tg.buf, GUARD + C), dt_view(tdout),
                                  dt_view(tx), dt_view(tw), dt_view(tm), dt_view(trs), N, C, 0, 0);
            dt_get(tdout, dx2);
            tap_ok(!memcmp(dx, dx2, n * 4) && dt_guards_ok(tdout),
                   "layernorm backward N=%d C=%d with dinp aliasing dout: identical", N, C);
            dt_set(tdout, dout);
            free(dx2);
        }
        dt_free(tdx), dt_free(tg);
        free(dx0), free(g0), free(dxr), free(gr), free(dx), free(g);
    }
    dt_free(tx), dt_free(tw), dt_free(tb), dt_free(tout), dt_free(tm), dt_free(trs), dt_free(tdout);
    free(x), free(w), free(b), free(dout), free(out), free(outr), free(m), free(mr), free(rs),
        free(rsr);
}

/* L = sum r . LN(x); central differences on x, w and b. */
static void test_fd_layernorm(int N, int C) {
    size_t n = (size_t)N * C;
    float *x = hnew(n, -1, 1, 61), *w = hnew(C, -1.5f, 1.5f, 62), *b = hnew(C, -1, 1, 63),
          *r = hnew(n, -1, 1, 64), *out = malloc(n * 4), *dx = malloc(n * 4),
          *g = malloc(2 * C * 4);
    dt tx = dt_new(n, x), tw = dt_new(C, w), tb = dt_new(C, b), tout = dt_new(n, NULL),
       tm = dt_new(N, NULL), trs = dt_new(N, NULL), tr = dt_new(n, r), tdx = dt_new(n, NULL),
       tg = dt_new(2 * C, NULL);
    ht_layernorm_forward(D, dt_view(tout), dt_view(tm), dt_view(trs), dt_view(tx), dt_view(tw), dt_view(tb), N, C);
    ht_layernorm_backward(D, dt_view(tdx), dt_view(tg), ht_view_at(tg.buf, GUARD + C), dt_view(tr), dt_view(tx), dt_view(tw),
                          dt_view(tm), dt_view(trs), N, C, 0, 0);
    dt_get(tdx, dx), dt_get(tg, g);
    double worst[3] = {0, 0, 0};
    for (int k = 0; k < 36; k++) {
        int which = k % 3; /* x, w, b */
        float *h = which == 0 ? x : which == 1 ? w : b;
        dt th = which == 0 ? tx : which == 1 ? tw : tb;
        size_t i = (size_t)(k * 7919u + 13u) % (which ? (size_t)C : n);
        float gi = which == 0 ? dx[i] : g[(which - 1) * C + i], v = h[i];
        double L[2];
        for (int s = 0; s < 2; s++) {
            h[i] = s ? v - FD_STEP : v + FD_STEP;
            dt_set(th, h);
            ht_layernorm_forward(D, dt_view(tout), dt_view(tm), dt_view(trs), dt_view(tx), dt_view(tw), dt_view(tb), N, C);
            dt_get(tout, out);
            L[s] = dot_d(r, out, n);
        }
        h[i] = v;
        dt_set(th, h);
        double fd = (L[0] - L[1]) / ((double)(v + FD_STEP) - (double)(v - FD_STEP));
        double e = fabs(fd - gi) / fmax(1.0, fabs(gi));
        worst[which] = tap_worse(worst[which], e);
    }
    tap_ok(worst[0] < TOL_FD && worst[1] < TOL_FD && worst[2] < TOL_FD,
           "finite differences, layernorm N=%d C=%d (36 points): dinp %.2e, dw %.2e, db %.2e", N, C,
           worst[0], worst[1], worst[2]);
    dt_free(tx), dt_free(tw), dt_free(tb), dt_free(tout), dt_free(tm), dt_free(trs), dt_free(tr),
        dt_free(tdx), dt_free(tg);
    free(x), free(w), free(b), free(r), free(out), free(dx), free(g);
}

/* ---------------------------------------------------------------- residual */

static void test_residual(size_t n) {
    float *a = hnew(n, -1, 1, 71), *b = hnew(n, -1, 1, 72), *d = hnew(n, -1, 1, 73);
    float *y = malloc(n * 4), *want = malloc(n * 4), *ga = malloc(n * 4), *gb = malloc(n * 4);
    dt ta = dt_new(n, a), tb = dt_new(n, b), to = dt_new(n, NULL), td = dt_new(n, d);
    ht_residual_forward(D, dt_view(to), dt_view(ta), dt_view(tb), n);
    dt_get(to, y);
    for (size_t i = 0; i < n; i++)
        want[i] = a[i] + b[i];
    int fwd = !memcmp(y, want, n * 4) && dt_guards_ok(to);
    ht_residual_forward(D, dt_view(ta), dt_view(ta), dt_view(tb), n); /* in place */
    dt_get(ta, y);
    fwd &= !memcmp(y, want, n * 4);
    tap_ok(fwd, "residual forward n=%zu: exact, also in place", n);

    dt_set(ta, a); /* backward: overwrite, then accumulate, db absent */
    ht_residual_backward(D, dt_view(ta), dt_view(tb), dt_view(td), n, 0);
    dt_get(ta, ga), dt_get(tb, gb);
    int ok = !memcmp(ga, d, n * 4) && !memcmp(gb, d, n * 4);
    dt_set(ta, a), dt_set(tb, b);
    ht_residual_backward(D, dt_view(ta), ht_view_none(), dt_view(td), n, 1);
    dt_get(ta, ga), dt_get(tb, gb);
    for (size_t i = 0; i < n; i++)
        want[i] = a[i] + d[i];
    ok &= !memcmp(ga, want, n * 4) && !memcmp(gb, b, n * 4);
    tap_ok(ok && dt_guards_ok(ta) && dt_guards_ok(tb),
           "residual backward n=%zu: copies dout, accumulates exactly, skips an absent branch", n);
    dt_free(ta), dt_free(tb), dt_free(to), dt_free(td);
    free(a), free(b), free(d), free(y), free(want), free(ga), free(gb);
}

/* ---------------------------------------------------------------- dropout */

static void run_dropout(dt out, dt in, size_t n, float p, uint64_t seed, uint64_t step, float *h) {
    ht_dropout_forward(D, dt_view(out), dt_view(in), n, p, seed, step);
    dt_get(out, h);
}

static void test_dropout(void) {
    enum { N = 100003 }; /* not a multiple of 8: the scalar tail runs */
    float *x = hnew(N, -1, 1, 81), *y = malloc(N * 4), *y2 = malloc(N * 4), *g = malloc(N * 4);
    x[5] = -0.0f;
    dt tx = dt_new(N, x), ty = dt_new(N, NULL), tg = dt_new(N, NULL);
    const uint64_t seed = 1234, step = 7;

    const float ps[] = {0.1f, 0.5f, 0.9f};
    for (int k = 0; k < 3; k++) {
        float p = ps[k], scale = 1.0f / (1.0f - p);
        run_dropout(ty, tx, N, p, seed, step, y);
        size_t kept = 0, mism = 0;
        for (size_t i = 0; i < N; i++) {
            int keep = ht_dropout_keep(seed, step, i, p);
            float want = x[i] * (keep ? scale : 0.0f);
            kept += keep;
            mism += memcmp(&y[i], &want, 4) != 0;
        }
        /* 6 standard deviations of a binomial(N, 1-p) */
        double frac = (double)kept / N, sd = sqrt(p * (1.0 - p) / N);
        tap_ok(mism == 0 && fabs(frac - (1.0 - p)) < 6 * sd && dt_guards_ok(ty),
               "dropout p=%.1f n=%d: mask equals ht_rng_uniform(stream(seed, step), i) >= p on all "
               "elements (%zu mismatches), kept %.4f (want %.1f +- %.4f)",
               p, N, mism, frac, 1.0 - p, 6 * sd);
    }

    run_dropout(ty, tx, N, 0.5f, seed, step, y);
    run_dropout(ty, tx, N, 0.5f, seed, step, y2);
    int same = !memcmp(y, y2, N * 4);
    run_dropout(ty, tx, N, 0.5f, seed + 1, step, y2);
    size_t dseed = 0, dstep = 0;
    for (size_t i = 0; i < N; i++)
        dseed += (y[i] == 0.0f) != (y2[i] == 0.0f);
    run_dropout(ty, tx, N, 0.5f, seed, step + 1, y2);
    for (size_t i = 0; i < N; i++)
        dstep += (y[i] == 0.0f) != (y2[i] == 0.0f);
    /* independent masks at p = 0.5 differ on about half of the elements */
    tap_ok(same && dseed > N / 3 && dstep > N / 3,
           "dropout reproducible for a seed; another seed changes %zu, another step %zu of %d",
           dseed, dstep, N);

    /* backward: same mask and scale on the gradient, also in place */
    float *ones = hfill(N, 1.0f);
    dt tones = dt_new(N, ones);
    run_dropout(ty, tx, N, 0.3f, seed, step, y);
    ht_dropout_backward(D, dt_view(tg), dt_view(tones), N, 0.3f, seed, step);
    dt_get(tg, g);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        bad += y[i] != x[i] * g[i] || (g[i] != 0.0f && g[i] != 1.0f / 0.7f);
    ht_dropout_backward(D, dt_view(tones), dt_view(tones), N, 0.3f, seed, step);
    dt_get(tones, y2);
    bad += memcmp(g, y2, N * 4) != 0;
    tap_ok(bad == 0 && dt_guards_ok(tg) && dt_guards_ok(tones),
           "dropout backward applies the forward's mask and scale 1/(1-p) (%zu differences), also "
           "in place",
           bad);

    /* p = 0: bit-exact identity, separate and in place; p = 1: zeros */
    run_dropout(ty, tx, N, 0.0f, seed, step, y);
    int ident = !memcmp(y, x, N * 4);
    ht_dropout_forward(D, dt_view(tx), dt_view(tx), N, 0.0f, seed, step);
    dt_get(tx, y);
    ident &= !memcmp(y, x, N * 4);
    ht_dropout_backward(D, dt_view(tg), dt_view(tx), N, 0.0f, seed, step);
    dt_get(tg, g);
    ident &= !memcmp(g, x, N * 4);
    run_dropout(ty, tx, N, 1.0f, seed, step, y);
    int zeros = 1;
    for (size_t i = 0; i < N; i++)
        zeros &= y[i] == 0.0f;
    tap_ok(ident && zeros && dt_guards_ok(ty) && dt_guards_ok(tx),
           "dropout p=0 is a bit-exact identity (incl. -0.0, in place, backward); p=1 gives zeros");
    dt_free(tx), dt_free(ty), dt_free(tg), dt_free(tones);
    free(x), free(y), free(y2), free(g), free(ones);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    D = test_dev_open();
    dt_use(D);
    test_embed(1, 5, 12, 256, 11);
    test_embed(2, 7, 15, 256, 12);
    test_embed(2, 7, 40, 256, 13); /* float16 blocks plus a tail of 8 */
    test_embed(3, 67, 128, 256, 14);
    test_embed(2, 5, 300, 7, 15); /* rows wider than one column block of dwte */
    test_embed_bad_tokens();
    test_fd_embed();

    test_layernorm(5, 12, 21);
    test_layernorm(14, 15, 22);
    test_layernorm(7, 40, 23);
    test_layernorm(201, 128, 24);
    test_fd_layernorm(5, 12);
    test_fd_layernorm(14, 15);
    test_fd_layernorm(3, 40);

    test_residual(1003);
    test_residual(7);

    test_dropout();

    ht_dev_close(D);
    return tap_done();
}
