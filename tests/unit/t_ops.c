/* Every nn op forward and backward on the device against the double-accumulation CPU
 * references of tests/lib/ref.c, on odd shapes, at odd buffer offsets with guard cells around
 * every tensor, plus finite-difference checks of each backward (as ggml's test-backend-ops);
 * the in-place scale bit for bit against the host's product. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "nn/ops.h"
#include "ref.h"
#include "devtensor.h"
#include "tap.h"
#include "testdev.h"

_Static_assert((int)REF_ACT_RELU == (int)HT_ACT_RELU && (int)REF_ACT_GELU == (int)HT_ACT_GELU,
               "act codes");

static ht_dev *D;

/* Tolerances (stated once): GEMM-based results vs double references, normalised by the
 * tensor's largest magnitude; elementwise results relative per element; finite differences
 * |fd - analytic| / max(1, |analytic|) with float steps of 1e-2. */
#define TOL_GEMM 1e-4
#define TOL_ELEM 1e-5
#define TOL_FD 2e-3
/* Elementwise gradients are O(1) and gelu' crosses 0 near x = -0.75, where only absolute
 * accuracy means anything: relative error with this floor on |reference|. */
#define GRAD_FLOOR 1e-3
#define FD_STEP 1e-2f

/* ---------------------------------------------------------------- device tensors */


/* ---------------------------------------------------------------- linear forward */

/* Parameters live in one buffer as [pad 5][W (out,in)][b (out)] like a model's flat buffer. */
static void test_linear_forward(int B, int in, int out, ht_act act, uint64_t seed) {
    size_t nw = (size_t)out * in, np = 5 + nw + out;
    float *x = hnew((size_t)B * in, -1, 1, seed), *p = hnew(np, -0.5f, 0.5f, seed + 1);
    float *yr = malloc(sizeof(float) * B * out), *ar = malloc(sizeof(float) * B * out);
    float *y = malloc(sizeof(float) * B * out), *a = malloc(sizeof(float) * B * out);
    dt tx = dt_new((size_t)B * in, x), tp = dt_new(np, p), ty = dt_new((size_t)B * out, NULL),
       ta = dt_new((size_t)B * out, NULL);
    ht_linear_act_forward(D, dt_view(ty), dt_view(ta), dt_view(tx), dt_view_at(tp, 5), dt_view_at(tp, 5 + nw), B, in, out, act);
    dt_get(ty, y);
    ref_linear_forward(yr, x, p + 5, p + 5 + nw, B, in, out);
    double ey = nerr(y, yr, (size_t)B * out);
    tap_ok(ey < TOL_GEMM && dt_guards_ok(ty) && dt_guards_ok(tp),
           "linear%s%s forward B=%d in=%d out=%d: y err %.2e", act ? "+" : "",
           act ? ht_act_name(act) : "", B, in, out, ey);
    if (act != HT_ACT_NONE) {
        dt_get(ta, a);
        for (int i = 0; i < B * out; i++)
            ar[i] = (float)ref_act(act, y[i]);
        double ea = tap_max_relerr(a, ar, (size_t)B * out, 1e-6);
        tap_ok(ea < TOL_ELEM && dt_guards_ok(ta), "linear+%s forward B=%d: act err %.2e",
               ht_act_name(act), B, ea);
    }
    dt_free(tx), dt_free(tp), dt_free(ty), dt_free(ta);
    free(x), free(p), free(yr), free(ar), free(y), free(a);
}

/* ---------------------------------------------------------------- linear backward */

/* Gradients at [pad 5][dW][db]; accumulate=0 starts from NaN (beta = 0 must not read C),
 * accumulate=1 from random values. with_dx=0 checks dx is left untouched. */
static void test_linear_backward(int B, int in, int out, ht_act act, float scale, int accumulate,
                                 int with_dx, uint64_t seed) {
    size_t nw = (size_t)out * in, np = 5 + nw + out, nx = (size_t)B * in, ny = (size_t)B * out;
    float *x = hnew(nx, -1, 1, seed), *p = hnew(np, -0.5f, 0.5f, seed + 1);
    float *da = hnew(ny, -1, 1, seed + 2), *ypre = hnew(ny, -2, 2, seed + 3);
    float *g0 = accumulate ? hnew(np, -1, 1, seed + 4) : hnan(np);
    float *dx0 = hnan(nx);
    float *gr = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
    float *dxr = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dyr = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
    dt tx = dt_new(nx, x), tp = dt_new(np, p), tda = dt_new(ny, da), ty = dt_new(ny, ypre),
       tg = dt_new(np, g0), tdx = dt_new(nx, with_dx ? dx0 : NULL), tdy = dt_new(ny, NULL);
    ht_view vdx = with_dx ? dt_view(tdx) : ht_view_none();
    if (act == HT_ACT_NONE)
        ht_linear_backward(D, vdx, dt_view_at(tg, 5), dt_view_at(tg, 5 + nw), dt_view(tda), dt_view(tx), dt_view_at(tp, 5), B, in,
                           out, scale, accumulate);
    else
        ht_linear_act_backward(D, vdx, dt_view_at(tg, 5), dt_view_at(tg, 5 + nw), dt_view(tdy), dt_view(tda), dt_view(ty), dt_view(tx),
                               dt_view_at(tp, 5), B, in, out, act, scale, accumulate);
    /* reference: the pre-activation gradient in float as the device holds it */
    double s = scale;
    if (act != HT_ACT_NONE) {
        for (size_t i = 0; i < ny; i++)
            dyr[i] = (float)(scale * da[i] * ref_act_grad(act, ypre[i]));
        s = 1.0;
    } else {
        memcpy(dyr, da, ny * sizeof(float));
    }
    memcpy(gr, g0, np * sizeof(float));
    ref_linear_backward(dxr, gr + 5, gr + 5 + nw, dyr, x, p + 5, B, in, out, s, accumulate);
    dt_get(tg, g);
    dt_get(tdx, dx);
    double ew = nerr(g + 5, gr + 5, nw), eb = nerr(g + 5 + nw, gr + 5 + nw, (size_t)out);
    double ex = with_dx ? nerr(dx, dxr, nx) : 0, edy = 0;
    int untouched = 1;
    if (!with_dx)
        for (size_t i = 0; i < nx; i++)
            untouched &= dx[i] == SENT;
    if (act != HT_ACT_NONE) {
        dt_get(tdy, dy);
        edy = tap_max_relerr(dy, dyr, ny, GRAD_FLOOR);
    }
    int guards = dt_guards_ok(tg) && dt_guards_ok(tdx) && dt_guards_ok(tdy);
    tap_ok(ew < TOL_GEMM && eb < TOL_GEMM && ex < TOL_GEMM && edy < TOL_ELEM && untouched && guards,
           "linear%s%s backward B=%d in=%d out=%d scale=%g acc=%d dx=%s: dW %.2e db %.2e dx %.2e "
           "dy %.2e",
           act ? "+" : "", act ? ht_act_name(act) : "", B, in, out, scale, accumulate,
           with_dx ? "yes" : "skipped(untouched)", ew, eb, ex, edy);
    dt_free(tx), dt_free(tp), dt_free(tda), dt_free(ty), dt_free(tg), dt_free(tdx), dt_free(tdy);
    free(x), free(p), free(da), free(ypre), free(g0), free(dx0), free(gr), free(g), free(dxr),
        free(dx), free(dyr), free(dy);
}

/* ---------------------------------------------------------------- activations */

static void test_act(ht_act act) {
    enum { N = 1003 }; /* not a multiple of 8: the kernels' scalar tail runs */
    float *x = hnew(N, -6, 6, 77), *dyv = hnew(N, -1, 1, 78);
    const float special[] = {0.0f,  -0.0f,  -1.0f,  1.0f,   -30.0f,  30.0f, 1e-3f, -1e-3f,
                             25.0f, -25.0f, -0.75f, 1e-30f, -1e-30f, 5.0f,  -5.0f, 19.9f};
    memcpy(x, special, sizeof special);
    float y[N], yr[N], dx[N], dxr[N];
    for (int i = 0; i < N; i++) {
        yr[i] = (float)ref_act(act, x[i]);
        dxr[i] = (float)(0.5 * dyv[i] * ref_act_grad(act, x[i]));
    }
    dt tx = dt_new(N, x), ty = dt_new(N, NULL), tdy = dt_new(N, dyv), tdx = dt_new(N, NULL);
    ht_act_forward(D, act, dt_view(ty), dt_view(tx), N);
    ht_act_backward(D, act, dt_view(tdx), dt_view(tdy), dt_view(tx), N, 0.5f);
    dt_get(ty, y);
    dt_get(tdx, dx);
    double ef = tap_max_relerr(y, yr, N, 1e-30), eb = tap_max_relerr(dx, dxr, N, GRAD_FLOOR);
    int zero_ok = y[0] == 0.0f && y[1] == 0.0f; /* f(0) = f(-0) = 0 for both */
    tap_ok(ef < TOL_ELEM && eb < TOL_ELEM && zero_ok && dt_guards_ok(ty) && dt_guards_ok(tdx),
           "%s forward/backward n=%d incl. 0, -0, +-1e-3, +-25, +-30: fwd rel err %.2e, bwd "
           "rel err %.2e (f(0)=%g f'(0)*dy/2=%g)",
           ht_act_name(act), N, ef, eb, y[0], dx[0]);
    if (act == HT_ACT_RELU) {
        int neg = 1;
        for (int i = 0; i < N; i++)
            if (x[i] < 0) neg &= y[i] == 0.0f && dx[i] == 0.0f;
        tap_ok(neg && dx[0] == 0.0f, "relu is 0 with zero gradient at negative x and at x=0");
    } else {
        /* gelu(-30) underflows to -0 in float and gelu'(0) = 0.5 */
        tap_ok(fabsf(y[4]) == 0.0f && y[5] == 30.0f && fabs(dx[0] - 0.25 * dyv[0]) < 1e-7,
               "gelu(-30)=%g gelu(30)=%g gelu'(0)*dy*0.5=%g (want %g)", y[4], y[5], dx[0],
               0.25 * dyv[0]);
    }
    /* in place: y aliases x, dx aliases dy */
    ht_act_forward(D, act, dt_view(tx), dt_view(tx), N);
    ht_act_backward(D, act, dt_view(tdy), dt_view(tdy), dt_view(ty), N, 1.0f);
    float yi[N], dxi[N];
    dt_get(tx, yi);
    dt_get(tdy, dxi);
    for (int i = 0; i < N; i++)
        dxr[i] = (float)(dyv[i] * ref_act_grad(act, y[i]));
    double ei = tap_max_relerr(yi, y, N, 1e-30), ej = tap_max_relerr(dxi, dxr, N, GRAD_FLOOR);
    tap_ok(ei == 0 && ej < TOL_ELEM, "%s in place: fwd diff %.2e, bwd rel err %.2e",
           ht_act_name(act), ei, ej);
    dt_free(tx), dt_free(ty), dt_free(tdy), dt_free(tdx);
    free(x), free(dyv);
}

/* ---------------------------------------------------------------- softmax cross-entropy */

typedef struct xent_out {
    float *loss, *dl;
    int *correct;
} xent_out;

/* Runs the op on (B,C) logits; dlogits in a separate tensor, in place, or not at all. */
enum { XENT_SEPARATE, XENT_INPLACE, XENT_FWD_ONLY };
static void run_xent(const float *z, const int32_t *lab, int B, int C, float gs, int mode,
                     xent_out *o, int *guards) {
    size_t n = (size_t)B * C;
    dt tz = dt_new(n, z), tl = dt_new((size_t)B, NULL), tc = dt_new((size_t)B, NULL),
       td = dt_new(n, NULL);
    dt tlab = dt_new((size_t)B, NULL);
    ht_buf_write(D, tlab.buf, GUARD * sizeof(float), (size_t)B * sizeof(int32_t), lab);
    ht_view dl = mode == XENT_SEPARATE ? dt_view(td) : mode == XENT_INPLACE ? dt_view(tz) : ht_view_none();
    ht_softmax_xent(D, dt_view(tl), dt_view(tc), dl, dt_view(tz), dt_view(tlab), B, C, gs);
    dt_get(tl, o->loss);
    ht_buf_read(D, tc.buf, GUARD * sizeof(float), (size_t)B * sizeof(int), o->correct);
    dt_get(mode == XENT_INPLACE ? tz : td, o->dl);
    *guards = dt_guards_ok(tz) && dt_guards_ok(tl) && dt_guards_ok(tc) && dt_guards_ok(td);
    if (mode == XENT_FWD_ONLY) { /* nothing written: td keeps its sentinels, z unchanged */
        float *zz = malloc(n * sizeof(float));
        dt_get(tz, zz);
        for (size_t i = 0; i < n; i++)
            *guards &= o->dl[i] == SENT && zz[i] == z[i];
        free(zz);
    }
    dt_free(tz), dt_free(tl), dt_free(tc), dt_free(td), dt_free(tlab);
}

static void test_xent(int B, int C, float lo, float hi, int mode, uint64_t seed) {
    size_t n = (size_t)B * C;
    float *z = hnew(n, lo, hi, seed), *dlr = malloc(n * sizeof(float));
    int32_t *lab = malloc(B * sizeof(int32_t));
    for (int r = 0; r < B; r++)
        lab[r] = (int32_t)ht_rng_below(seed, 1000 + r, (uint32_t)C);
    double *lr = malloc(B * sizeof(double));
    int *cr = malloc(B * sizeof(int));
    xent_out o = {malloc(B * sizeof(float)), malloc(n * sizeof(float)), malloc(B * sizeof(int))};
    int guards;
    float gs = 1.0f / (float)B;
    run_xent(z, lab, B, C, gs, mode, &o, &guards);
    ref_softmax_xent(lr, cr, dlr, z, lab, B, C, gs);
    double el = 0, ed = 0;
    int finite = 1, corr = 1;
    for (int r = 0; r < B; r++) {
        double e = fabs(o.loss[r] - lr[r]) / fmax(fabs(lr[r]), 1e-3);
        el = tap_worse(el, e);
        finite &= isfinite(o.loss[r]);
        corr &= o.correct[r] == cr[r];
    }
    if (mode != XENT_FWD_ONLY) {
        ed = tap_max_abserr(o.dl, dlr, n) / gs; /* softmax probabilities: absolute error */
        for (size_t i = 0; i < n; i++)
            finite &= isfinite(o.dl[i]);
    }
    const char *m = mode == XENT_SEPARATE  ? ""
                    : mode == XENT_INPLACE ? " in place"
                                           : " forward only";
    tap_ok(el < TOL_ELEM && ed < TOL_ELEM && finite && corr && guards,
           "softmax-xent%s B=%d C=%d logits [%g,%g]: loss rel err %.2e, dlogits abs err %.2e, "
           "correct flags %s, finite",
           m, B, C, lo, hi, el, ed, corr ? "match" : "DIFFER");
    free(z), free(dlr), free(lab), free(lr), free(cr), free(o.loss), free(o.dl), free(o.correct);
}

/* Hand-built rows: ties go to the lowest index; out-of-range labels are flagged. The rows
 * are padded with -100 to C columns so both kernels (a row per work-item for narrow rows, a
 * group per row for wide ones) see them. */
static void test_xent_cases(int C) {
    enum { B = 7, C0 = 4 };
    const float z0[B * C0] = {1,   3,  3, 0,  /* tie at 1,2: label 1 correct */
                              1,   3,  3, 0,  /* label 2 wrong (argmax is 1) */
                              2,   2,  2, 2,  /* all equal: label 0 correct */
                              0,   0,  0, 9,  /* max at index 3: label 3 correct */
                              -80, 80, 0, 80, /* large logits, tie at 1 and 3: label 3 wrong */
                              0,   1,  2, 3,  /* label -1: flagged */
                              0,   1,  2, 3}; /* label C: flagged */
    const int32_t lab[B] = {1, 2, 0, 3, 3, -1, C};
    const int want[B] = {1, 0, 1, 1, 0, -1, -1};
    float *z = malloc(sizeof(float) * B * C);
    for (int r = 0; r < B; r++)
        for (int j = 0; j < C; j++)
            z[r * C + j] = j < C0 ? z0[r * C0 + j] : -100.0f;
    xent_out o = {malloc(B * sizeof(float)), malloc(B * C * sizeof(float)),
                  malloc(B * sizeof(int))};
    int guards, ok = 1, count = 0;
    run_xent(z, lab, B, C, 1.0f, XENT_SEPARATE, &o, &guards);
    for (int r = 0; r < B; r++) {
        ok &= o.correct[r] == want[r];
        count += o.correct[r] == 1;
    }
    tap_ok(ok && count == 3,
           "C=%d: argmax ties to the lowest index: correct count %d (want 3), "
           "flags %d %d %d %d %d",
           C, count, o.correct[0], o.correct[1], o.correct[2], o.correct[3], o.correct[4]);
    int zero = 1;
    for (int j = 0; j < 2 * C; j++)
        zero &= o.dl[5 * C + j] == 0.0f;
    tap_ok(guards && o.correct[5] == -1 && o.correct[6] == -1 && isnan(o.loss[5]) &&
               isnan(o.loss[6]) && zero && isfinite(o.loss[4]),
           "C=%d: labels -1 and C: flag -1, loss NaN, zero gradient, no out-of-bounds write", C);
    free(z), free(o.loss), free(o.dl), free(o.correct);
}

/* ---------------------------------------------------------------- scale */

/* ht_scale on [lo, lo+n) of a tensor of `len` floats (odd offset, guard cells): inside,
 * bit for bit the host's float product alpha * x (one IEEE multiply; the sign of a zero
 * included), outside the range and in the guards nothing changes. Special values lead x. */
static void test_scale(size_t len, size_t lo, size_t n, float alpha, uint64_t seed) {
    float *x = hnew(len, -3, 3, seed), *y = malloc(len * sizeof(float));
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -3e38f, 3e38f};
    for (size_t i = 0; i < sizeof special / sizeof *special && lo + i < len; i++)
        x[lo + i] = special[i];
    dt t = dt_new(len, x);
    ht_scale(D, dt_view_at(t, lo), n, alpha);
    dt_get(t, y);
    size_t bad = len;
    for (size_t i = 0; i < len && bad == len; i++) {
        float want = i >= lo && i < lo + n ? alpha * x[i] : x[i];
        if (memcmp(&want, &y[i], sizeof want)) bad = i;
    }
    if (bad < len)
        tap_diag("element %zu: %a * %a gave %a", bad, (double)alpha, (double)x[bad],
                 (double)y[bad]);
    tap_ok(bad == len && dt_guards_ok(t),
           "scale alpha=%g on [%zu,%zu) of %zu: bit for bit alpha*x (signed zeros, +-3e38), "
           "the rest and the guard cells untouched",
           alpha, lo, lo + n, len);
    dt_free(t);
    free(x), free(y);
}

/* ---------------------------------------------------------------- finite differences */

/* L = sum_i r_i * out_i in double over the float outputs of one device forward. */
typedef struct fd_ctx {
    int kind; /* 0: linear(+act), 1: softmax-xent */
    int B, in, out;
    ht_act act;
    float *x, *p, *r; /* host inputs: x, parameters [W][b], output weights */
    int32_t *lab;
    dt tx, tp, ty, ta, tl, tc, tlab;
    float *y; /* last pre-activations read back (kink detection) */
} fd_ctx;

static double fd_loss(fd_ctx *c) {
    size_t ny = (size_t)c->B * c->out;
    double L = 0;
    dt_set(c->tx, c->x);
    if (c->kind == 0) {
        size_t nw = (size_t)c->out * c->in;
        dt_set(c->tp, c->p);
        ht_linear_act_forward(D, dt_view(c->ty), dt_view(c->ta), dt_view(c->tx), dt_view(c->tp), dt_view_at(c->tp, nw), c->B,
                              c->in, c->out, c->act);
        float *a = malloc(ny * sizeof(float));
        dt_get(c->ty, c->y);
        dt_get(c->act ? c->ta : c->ty, a);
        for (size_t i = 0; i < ny; i++)
            L += (double)c->r[i] * a[i];
        free(a);
    } else {
        float *l = malloc(c->B * sizeof(float));
        ht_softmax_xent(D, dt_view(c->tl), dt_view(c->tc), ht_view_none(), dt_view(c->tx), dt_view(c->tlab), c->B, c->out,
                        1.0f);
        dt_get(c->tl, l);
        for (int b = 0; b < c->B; b++)
            L += (double)l[b] / c->B;
        free(l);
    }
    return L;
}

/* Central difference of L with respect to h[i]; returns 0 and sets *kink if a ReLU
 * pre-activation changed sign between the two evaluations. */
static double fd_at(fd_ctx *c, float *h, size_t i, int *kink) {
    size_t ny = (size_t)c->B * c->out;
    float v = h[i], vp = v + FD_STEP, vm = v - FD_STEP;
    float *yp = malloc(ny * sizeof(float));
    h[i] = vp;
    double lp = fd_loss(c);
    memcpy(yp, c->y, ny * sizeof(float));
    h[i] = vm;
    double lm = fd_loss(c);
    h[i] = v;
    *kink = 0;
    if (c->kind == 0 && c->act == HT_ACT_RELU)
        for (size_t k = 0; k < ny; k++)
            *kink |= (yp[k] > 0) != (c->y[k] > 0);
    free(yp);
    return (lp - lm) / ((double)vp - (double)vm);
}

/* Compares analytic gradients g (same layout as h) with finite differences at `count`
 * indices spread over h; returns the worst |fd - g| / max(1, |g|). */
static double fd_check(fd_ctx *c, float *h, const float *g, size_t n, int count, int *checked) {
    double worst = 0;
    for (int k = 0; k < count; k++) {
        size_t i = (size_t)((k * 7919u + 13u) % n);
        int kink;
        double fd = fd_at(c, h, i, &kink);
        if (kink) continue; /* the derivative does not exist across the kink */
        double e = fabs(fd - g[i]) / fmax(1.0, fabs(g[i]));
        worst = tap_worse(worst, e);
        (*checked)++;
    }
    return worst;
}

static void test_fd_linear(ht_act act) {
    fd_ctx c = {.kind = 0, .B = 7, .in = 13, .out = 37, .act = act};
    size_t nx = (size_t)c.B * c.in, ny = (size_t)c.B * c.out, nw = (size_t)c.out * c.in,
           np = nw + c.out;
    c.x = hnew(nx, -1, 1, 501), c.p = hnew(np, -0.5f, 0.5f, 502), c.r = hnew(ny, -1, 1, 503);
    c.y = malloc(ny * sizeof(float));
    c.tx = dt_new(nx, c.x), c.tp = dt_new(np, c.p), c.ty = dt_new(ny, NULL),
    c.ta = dt_new(ny, NULL);
    dt tdx = dt_new(nx, NULL), tg = dt_new(np, NULL), tdy = dt_new(ny, NULL), tr = dt_new(ny, c.r);
    fd_loss(&c); /* forward at the unperturbed point for the saved pre-activation */
    ht_linear_act_backward(D, dt_view(tdx), dt_view(tg), dt_view_at(tg, nw), dt_view(tdy), dt_view(tr), dt_view(c.ty), dt_view(c.tx), dt_view(c.tp),
                           c.B, c.in, c.out, act, 1.0f, 0);
    float *gx = malloc(nx * sizeof(float)), *gp = malloc(np * sizeof(float));
    dt_get(tdx, gx);
    dt_get(tg, gp);
    int checked = 0;
    double ex = fd_check(&c, c.x, gx, nx, 12, &checked);
    double ew = fd_check(&c, c.p, gp, nw, 12, &checked);
    double eb = 0;
    for (int k = 0; k < 6; k++) { /* biases: the tail of the parameter block */
        size_t i = nw + (size_t)(k * 11 % c.out);
        int kink;
        double fd = fd_at(&c, c.p, i, &kink);
        if (kink) continue;
        double e = fabs(fd - gp[i]) / fmax(1.0, fabs(gp[i]));
        eb = tap_worse(eb, e);
        checked++;
    }
    tap_ok(ex < TOL_FD && ew < TOL_FD && eb < TOL_FD && checked >= 20,
           "finite differences, linear%s%s B=7 in=13 out=37 (%d points, step %g): dx %.2e dW %.2e "
           "db %.2e",
           act ? "+" : "", act ? ht_act_name(act) : "", checked, (double)FD_STEP, ex, ew, eb);
    dt_free(c.tx), dt_free(c.tp), dt_free(c.ty), dt_free(c.ta), dt_free(tdx), dt_free(tg),
        dt_free(tdy), dt_free(tr);
    free(c.x), free(c.p), free(c.r), free(c.y), free(gx), free(gp);
}

static void test_fd_xent(int B, int C) {
    fd_ctx c = {.kind = 1, .B = B, .out = C};
    size_t n = (size_t)B * C;
    c.x = hnew(n, -3, 3, 601);
    c.y = malloc(n * sizeof(float));
    c.lab = malloc(B * sizeof(int32_t));
    for (int r = 0; r < B; r++)
        c.lab[r] = (int32_t)ht_rng_below(602, r, (uint32_t)C);
    c.tx = dt_new(n, c.x), c.tl = dt_new((size_t)B, NULL), c.tc = dt_new((size_t)B, NULL);
    c.tlab = dt_new((size_t)B, NULL);
    ht_buf_write(D, c.tlab.buf, GUARD * sizeof(float), (size_t)B * sizeof(int32_t), c.lab);
    dt td = dt_new(n, NULL);
    ht_softmax_xent(D, dt_view(c.tl), dt_view(c.tc), dt_view(td), dt_view(c.tx), dt_view(c.tlab), B, C, 1.0f / (float)B);
    float *g = malloc(n * sizeof(float));
    dt_get(td, g);
    int checked = 0;
    double e = fd_check(&c, c.x, g, n, 16, &checked);
    tap_ok(e < TOL_FD && checked == 16,
           "finite differences, softmax-xent B=%d C=%d, mean loss (%d points): err %.2e", B, C,
           checked, e);
    dt_free(c.tx), dt_free(c.tl), dt_free(c.tc), dt_free(c.tlab), dt_free(td);
    free(c.x), free(c.y), free(c.lab), free(g);
}

/* Elementwise activation backward by finite differences of L = sum r * act(x). */
static void test_fd_act(ht_act act) {
    enum { N = 257 };
    float *x = hnew(N, -3, 3, 701), *r = hnew(N, -1, 1, 702), y[N], g[N];
    dt tx = dt_new(N, x), ty = dt_new(N, NULL), tr = dt_new(N, r), tg = dt_new(N, NULL);
    ht_act_backward(D, act, dt_view(tg), dt_view(tr), dt_view(tx), N, 1.0f);
    dt_get(tg, g);
    double worst = 0;
    int checked = 0;
    for (int i = 0; i < N; i += 8) {
        if (act == HT_ACT_RELU && fabsf(x[i]) < 2 * FD_STEP) continue; /* kink */
        double L[2];
        for (int s = 0; s < 2; s++) {
            float v = x[i];
            x[i] = s ? v - FD_STEP : v + FD_STEP;
            dt_set(tx, x);
            x[i] = v;
            ht_act_forward(D, act, dt_view(ty), dt_view(tx), N);
            dt_get(ty, y);
            L[s] = 0;
            for (int k = 0; k < N; k++)
                L[s] += (double)r[k] * y[k];
        }
        double fd = (L[0] - L[1]) / ((double)(x[i] + FD_STEP) - (double)(x[i] - FD_STEP));
        double e = fabs(fd - g[i]) / fmax(1.0, fabs(g[i]));
        worst = tap_worse(worst, e);
        checked++;
    }
    tap_ok(worst < TOL_FD && checked > 20, "finite differences, %s n=%d (%d points): err %.2e",
           ht_act_name(act), N, checked, worst);
    dt_free(tx), dt_free(ty), dt_free(tr), dt_free(tg);
    free(x), free(r);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    D = test_dev_open();
    dt_use(D);
    /* GEMM shapes are limited to B in {1, 7} x (13, 37): CLBlast compiles per process */
    test_linear_forward(7, 13, 37, HT_ACT_NONE, 11);
    test_linear_forward(1, 13, 37, HT_ACT_NONE, 12);
    test_linear_forward(7, 13, 37, HT_ACT_RELU, 13);
    test_linear_forward(7, 13, 37, HT_ACT_GELU, 14);

    test_linear_backward(7, 13, 37, HT_ACT_NONE, 1.0f, 0, 1, 21);
    test_linear_backward(7, 13, 37, HT_ACT_NONE, 0.25f, 1, 1, 22);
    test_linear_backward(1, 13, 37, HT_ACT_NONE, 1.0f, 0, 0, 23);
    test_linear_backward(7, 13, 37, HT_ACT_RELU, 0.5f, 0, 1, 24);
    test_linear_backward(7, 13, 37, HT_ACT_GELU, 1.0f, 1, 0, 25);
    test_linear_backward(1, 13, 37, HT_ACT_GELU, 0.125f, 0, 1, 26);

    test_act(HT_ACT_RELU);
    test_act(HT_ACT_GELU);

    /* odd n: the last work-item runs the scalar tail; 1 and 15: only a tail; 160: none */
    test_scale(1003, 0, 1003, 0.5f, 41);
    test_scale(1003, 0, 1003, -1.0f, 42);
    test_scale(1003, 0, 1003, 0.0f, 43);
    test_scale(1003, 0, 1003, 0.3f, 44);
    test_scale(1003, 0, 1003, 1.0f, 45);
    test_scale(1003, 5, 997, 0.5f, 46); /* a range inside the tensor, at an odd offset */
    test_scale(160, 0, 160, -1.0f, 47);
    test_scale(20, 3, 1, 0.0f, 48);
    test_scale(20, 2, 15, 0.5f, 49);
    test_scale(20, 7, 0, 0.0f, 50);

    test_xent(7, 10, -5, 5, XENT_SEPARATE, 31);
    test_xent(7, 3, -5, 5, XENT_SEPARATE, 32);
    test_xent(1, 10, -5, 5, XENT_INPLACE, 33);
    test_xent(7, 10, -80, 80, XENT_SEPARATE, 34);
    test_xent(5, 3, -80, 80, XENT_INPLACE, 35);
    test_xent(7, 10, -5, 5, XENT_FWD_ONLY, 36);
    /* C > 64 (on a CPU device C > 4096): a work-group per row; C > 256: its lanes loop */
    test_xent(7, 100, -80, 80, XENT_SEPARATE, 37);
    test_xent(2, 100, -5, 5, XENT_INPLACE, 38);
    test_xent(3, 300, -5, 5, XENT_SEPARATE, 39);
    test_xent(3, 5003, -80, 80, XENT_SEPARATE, 40);
    test_xent(2, 4097, -5, 5, XENT_INPLACE, 41);
    test_xent_cases(4);
    test_xent_cases(70);

    test_fd_linear(HT_ACT_NONE);
    test_fd_linear(HT_ACT_RELU);
    test_fd_linear(HT_ACT_GELU);
    test_fd_act(HT_ACT_RELU);
    test_fd_act(HT_ACT_GELU);
    test_fd_xent(7, 10);
    test_fd_xent(4, 3);
    test_fd_xent(3, 70);

    ht_dev_close(D);
    return tap_done();
}
