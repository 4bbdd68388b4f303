/* CNN ops on the device against the direct-loop double references of tests/lib/ref_conv.c: conv2d
 * forward/backward on odd shapes (batches 1 and 3, non-square inputs, strides, padding, bias,
 * fused activations, chunked batches), max/avg pooling with ties, finite differences of every
 * backward, guard cells around every tensor and the workspace, shape validation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/rng.h"
#include "nn/ops_conv.h"
#include "ref.h"
#include "ref_conv.h"
#include "devtensor.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;
static const char *IMPL = ""; /* which algorithms the conv tests run (conv_suite) */

/* Tolerances (stated once): GEMM-based results vs double references, normalised by the
 * tensor's largest magnitude; pooling per element relative to max(|ref|, POOL_FLOOR) (sums
 * of a few floats of size ~1, which may cancel; max-pool forward must be exact); finite differences
 * |fd - analytic| / max(1, |analytic|) with float steps of 1e-2. */
#define TOL_GEMM 1e-4
#define TOL_POOL 1e-6
#define POOL_FLOOR 0.1
#define TOL_FD 2e-3
#define FD_STEP 1e-2f

/* ---------------------------------------------------------------- device tensors */


/* ---------------------------------------------------------------- conv configurations */

typedef struct conv_cfg {
    ht_conv2d_shape s;
    int bias;
    ht_act act;
} conv_cfg;

static ref_geom geom_of(const ht_conv2d_shape *s) {
    return (ref_geom){s->B, s->cin, s->h, s->w, s->cout, s->k, s->stride, s->pad};
}
static size_t nx_of(const ht_conv2d_shape *s) { return (size_t)s->B * s->cin * s->h * s->w; }
static size_t ny_of(const ht_conv2d_shape *s) {
    return (size_t)s->B * s->cout * ht_conv2d_oh(s) * ht_conv2d_ow(s);
}
static size_t nw_of(const ht_conv2d_shape *s) { return (size_t)s->cout * s->cin * s->k * s->k; }

static const char *cfg_name(const conv_cfg *c) {
    static char buf[160];
    const ht_conv2d_shape *s = &c->s;
    snprintf(buf, sizeof buf, "[%s] conv B=%d %dx%dx%d->%d k=%d s=%d p=%d%s%s%s", IMPL, s->B,
             s->cin, s->h, s->w, s->cout, s->k, s->stride, s->pad, c->bias ? " +bias" : "",
             c->act ? " +" : "", c->act ? ht_act_name(c->act) : "");
    return buf;
}

/* A workspace of the size the op asks for, with guard cells (overruns show up there). */
static dt ws_new(const ht_conv2d_shape *s) { return dt_new(ht_conv2d_workspace_floats(s), NULL); }

/* ---------------------------------------------------------------- conv forward */

/* Parameters live in one buffer as [pad 5][W (cout,cin,k,k)][b (cout)] like a model's. */
static void test_conv_forward(conv_cfg c, uint64_t seed) {
    const ht_conv2d_shape *s = &c.s;
    size_t nx = nx_of(s), ny = ny_of(s), nw = nw_of(s), np = 5 + nw + s->cout;
    float *x = hnew(nx, -1, 1, seed), *p = hnew(np, -0.5f, 0.5f, seed + 1);
    float *yr = malloc(ny * sizeof(float)), *y = malloc(ny * sizeof(float));
    float *a = malloc(ny * sizeof(float)), *ar = malloc(ny * sizeof(float));
    dt tx = dt_new(nx, x), tp = dt_new(np, p), ty = dt_new(ny, NULL), ta = dt_new(ny, NULL);
    dt tws = ws_new(s);
    ht_view b = c.bias ? dt_view_at(tp, 5 + nw) : ht_view_none();
    ht_conv2d_forward(D, dt_view(ty), dt_view(ta), dt_view(tx), dt_view_at(tp, 5), b, dt_view(tws), s, c.act);
    ref_conv2d_forward(yr, x, p + 5, c.bias ? p + 5 + nw : NULL, geom_of(s));
    dt_get(ty, y);
    dt_get(ta, a);
    double ey = nerr(y, yr, ny), ea = 0;
    int a_untouched = 1;
    if (c.act != HT_ACT_NONE) {
        for (size_t i = 0; i < ny; i++)
            ar[i] = (float)ref_act(c.act, y[i]);
        ea = tap_max_relerr(a, ar, ny, 1e-3);
    } else {
        for (size_t i = 0; i < ny; i++)
            a_untouched &= a[i] == SENT;
    }
    int guards = dt_guards_ok(tx) && dt_guards_ok(tp) && dt_guards_ok(ty) && dt_guards_ok(ta) &&
                 dt_guards_ok(tws);
    tap_ok(ey < TOL_GEMM && ea < 1e-5 && a_untouched && guards,
           "%s forward: y err %.2e, act err %.2e%s, guards %s", cfg_name(&c), ey, ea,
           c.act ? "" : " (a untouched)", guards ? "intact" : "BROKEN");
    dt_free(tx), dt_free(tp), dt_free(ty), dt_free(ta), dt_free(tws);
    free(x), free(p), free(yr), free(y), free(a), free(ar);
}

/* ---------------------------------------------------------------- conv backward */

/* Gradients at [pad 5][dW][db]; accumulate=0 starts from NaN (beta = 0 must not read them),
 * accumulate=1 from random values. with_dx=0 checks dx is left untouched; da and y must not
 * change. */
static int conv_backward_case(conv_cfg c, float scale, int accumulate, int with_dx, uint64_t seed,
                              double *errs) {
    const ht_conv2d_shape *s = &c.s;
    size_t nx = nx_of(s), ny = ny_of(s), nw = nw_of(s), np = 5 + nw + s->cout;
    float *x = hnew(nx, -1, 1, seed), *p = hnew(np, -0.5f, 0.5f, seed + 1);
    float *da = hnew(ny, -1, 1, seed + 2), *ypre = hnew(ny, -2, 2, seed + 3);
    float *g0 = accumulate ? hnew(np, -1, 1, seed + 4) : hnan(np), *dx0 = hnan(nx);
    float *gr = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
    float *dxr = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dyr = malloc(ny * sizeof(float)), *chk = malloc(ny * sizeof(float));
    dt tx = dt_new(nx, x), tp = dt_new(np, p), tda = dt_new(ny, da), ty = dt_new(ny, ypre),
       tg = dt_new(np, g0), tdx = dt_new(nx, with_dx ? dx0 : NULL), tws = ws_new(s);
    ht_view vdx = with_dx ? dt_view(tdx) : ht_view_none();
    ht_view vdb = c.bias ? dt_view_at(tg, 5 + nw) : ht_view_none();
    ht_conv2d_backward(D, vdx, dt_view_at(tg, 5), vdb, dt_view(tda), dt_view(ty), dt_view(tx), dt_view_at(tp, 5), dt_view(tws), s, c.act,
                       scale, accumulate);
    /* reference: the pre-activation gradient in float as the device holds it */
    for (size_t i = 0; i < ny; i++)
        dyr[i] = (float)(scale * da[i] * (c.act ? ref_act_grad(c.act, ypre[i]) : 1.0));
    memcpy(gr, g0, np * sizeof(float));
    ref_conv2d_backward(dxr, gr + 5, c.bias ? gr + 5 + nw : NULL, dyr, x, p + 5, geom_of(s), 1.0,
                        accumulate);
    dt_get(tg, g);
    dt_get(tdx, dx);
    errs[0] = nerr(g + 5, gr + 5, nw);
    errs[1] = c.bias ? nerr(g + 5 + nw, gr + 5 + nw, (size_t)s->cout) : 0;
    errs[2] = with_dx ? nerr(dx, dxr, nx) : 0;
    int ok = 1;
    if (!with_dx)
        for (size_t i = 0; i < nx; i++)
            ok &= dx[i] == SENT;
    if (!c.bias) /* the bias slots keep their initial contents (NaN: compare bit patterns) */
        ok &= !memcmp(g + 5 + nw, g0 + 5 + nw, (size_t)s->cout * sizeof(float));
    ok &= !memcmp(g, g0, 5 * sizeof(float));
    dt_get(tda, chk);
    ok &= !memcmp(chk, da, ny * sizeof(float));
    dt_get(ty, chk);
    ok &= !memcmp(chk, ypre, ny * sizeof(float));
    ok &= dt_guards_ok(tg) && dt_guards_ok(tdx) && dt_guards_ok(tws) && dt_guards_ok(tda);
    dt_free(tx), dt_free(tp), dt_free(tda), dt_free(ty), dt_free(tg), dt_free(tdx), dt_free(tws);
    free(x), free(p), free(da), free(ypre), free(g0), free(dx0), free(gr), free(g), free(dxr),
        free(dx), free(dyr), free(chk);
    return ok;
}

static void test_conv_backward(conv_cfg c, float scale, int accumulate, int with_dx,
                               uint64_t seed) {
    double e[3];
    int ok = conv_backward_case(c, scale, accumulate, with_dx, seed, e);
    tap_ok(ok && e[0] < TOL_GEMM && e[1] < TOL_GEMM && e[2] < TOL_GEMM,
           "%s backward scale=%g acc=%d dx=%s: dW %.2e db %.2e dx %.2e, inputs/guards %s",
           cfg_name(&c), scale, accumulate, with_dx ? "yes" : "skipped(untouched)", e[0], e[1],
           e[2], ok ? "intact" : "BROKEN");
}

/* A small workspace cap splits the batch into chunks (nb = 2 then 1, or 1 each): the
 * results must match the reference, dW/db summed over chunks, with and without accumulate.
 * The smallest cap that gives chunks of nb is found by asking ht_conv2d_chunk. */
static void test_conv_chunked(int nb) {
    conv_cfg c = {{3, 3, 9, 6, 5, 3, 1, 2}, 1, HT_ACT_RELU};
    ht_conv2d_set_ws_cap(0);
    size_t full = ht_conv2d_workspace_floats(&c.s), cap = 1;
    ht_conv2d_set_ws_cap(cap);
    while (ht_conv2d_chunk(D, &c.s) < nb && cap < full)
        ht_conv2d_set_ws_cap(cap += 16);
    size_t small = ht_conv2d_workspace_floats(&c.s);
    int got = ht_conv2d_chunk(D, &c.s);
    char what[64];
    snprintf(what, sizeof what, "[%s] chunks of %d samples", IMPL, nb);
    tap_ok(got == nb && small < full, "%s: chunk %d, workspace %zu floats < %zu for the batch",
           what, got, small, full);
    test_conv_forward(c, 901);
    double e[3], e2[3];
    int ok = conv_backward_case(c, 0.5f, 0, 1, 902, e);
    int ok2 = conv_backward_case(c, 1.0f, 1, 1, 903, e2);
    double worst = 0;
    for (int i = 0; i < 3; i++)
        worst = tap_worse(worst, tap_worse(e[i], e2[i]));
    tap_ok(ok && ok2 && worst < TOL_GEMM, "%s: backward acc=0 and acc=1 match (worst %.2e)", what,
           worst);
    ht_conv2d_set_ws_cap(0);
}

/* Two identical backward runs give bit-identical gradients (fixed reduction order), and the
 * zero-bubble halves (dx alone with dw.buf NULL, then dw/db alone with dx.buf NULL, over a
 * gradient holding an earlier micro-batch's sum: accumulate) equal the whole backward's bits. */
static void test_conv_deterministic(void) {
    conv_cfg c = {{3, 3, 7, 7, 5, 3, 1, 1}, 1, HT_ACT_RELU};
    const ht_conv2d_shape *s = &c.s;
    size_t nx = nx_of(s), ny = ny_of(s), nw = nw_of(s), np = nw + s->cout;
    float *x = hnew(nx, -1, 1, 41), *p = hnew(np, -0.5f, 0.5f, 42), *da = hnew(ny, -1, 1, 43);
    float *y = hnew(ny, -1, 1, 44), *g0 = hnew(np, -1, 1, 45), *r[3][2];
    dt tx = dt_new(nx, x), tp = dt_new(np, p), tda = dt_new(ny, da), ty = dt_new(ny, y);
    dt tg = dt_new(np, NULL), tdx = dt_new(nx, NULL), tws = ws_new(s);
    for (int k = 0; k < 3; k++) {
        dt_set(tg, g0);
        if (k < 2) {
            ht_conv2d_backward(D, dt_view(tdx), dt_view(tg), dt_view_at(tg, nw), dt_view(tda),
                               dt_view(ty), dt_view(tx), dt_view(tp), dt_view(tws), s, c.act,
                               0.5f, 1);
        } else { /* B, then W */
            ht_conv2d_backward(D, dt_view(tdx), ht_view_none(), ht_view_none(), dt_view(tda),
                               dt_view(ty), ht_view_none(), dt_view(tp), dt_view(tws), s, c.act,
                               0.5f, 1);
            ht_conv2d_backward(D, ht_view_none(), dt_view(tg), dt_view_at(tg, nw), dt_view(tda),
                               dt_view(ty), dt_view(tx), dt_view(tp), dt_view(tws), s, c.act,
                               0.5f, 1);
        }
        r[k][0] = malloc(np * sizeof(float)), r[k][1] = malloc(nx * sizeof(float));
        dt_get(tg, r[k][0]);
        dt_get(tdx, r[k][1]);
    }
    tap_ok(!memcmp(r[0][0], r[1][0], np * sizeof(float)) &&
               !memcmp(r[0][1], r[1][1], nx * sizeof(float)),
           "[%s] conv backward twice: dW, db, dx bit-identical", IMPL);
    tap_ok(!memcmp(r[0][0], r[2][0], np * sizeof(float)) &&
               !memcmp(r[0][1], r[2][1], nx * sizeof(float)),
           "[%s] conv backward as dx alone then dW/db alone: bit-identical to the whole", IMPL);
    dt_free(tx), dt_free(tp), dt_free(tda), dt_free(ty), dt_free(tg), dt_free(tdx), dt_free(tws);
    free(x), free(p), free(da), free(y), free(g0);
    for (int k = 0; k < 3; k++)
        free(r[k][0]), free(r[k][1]);
}

/* ---------------------------------------------------------------- pooling */

enum { POOL_MAX, POOL_AVG };

static ref_geom pgeom(const ht_pool2d_shape *s) {
    return (ref_geom){s->B, s->c, s->h, s->w, s->c, s->k, s->stride, s->pad};
}

static void pool_run_fwd(int kind, dt ty, dt tx, const ht_pool2d_shape *s, int inc) {
    if (kind == POOL_MAX)
        ht_maxpool2d_forward(D, dt_view(ty), dt_view(tx), s);
    else
        ht_avgpool2d_forward(D, dt_view(ty), dt_view(tx), s, inc);
}

/* Forward and backward against the reference. ties: inputs drawn from {0, 1, 2}, so most
 * max-pool windows hold equal maxima (first one wins, in both directions). */
static void test_pool(int kind, ht_pool2d_shape s, int inc, int ties, uint64_t seed) {
    int Ho = ht_pool2d_oh(&s), Wo = ht_pool2d_ow(&s);
    size_t nx = (size_t)s.B * s.c * s.h * s.w, ny = (size_t)s.B * s.c * Ho * Wo;
    float *x = hnew(nx, -1, 1, seed), *dy = hnew(ny, -1, 1, seed + 1), *dx0 = hnan(nx);
    if (ties)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)ht_rng_below(seed + 2, i, 3);
    float *y = malloc(ny * sizeof(float)), *yr = malloc(ny * sizeof(float));
    float *dx = malloc(nx * sizeof(float)), *dxr = malloc(nx * sizeof(float));
    dt tx = dt_new(nx, x), ty = dt_new(ny, NULL), tdy = dt_new(ny, dy), tdx = dt_new(nx, dx0);
    pool_run_fwd(kind, ty, tx, &s, inc);
    if (kind == POOL_MAX) {
        ht_maxpool2d_backward(D, dt_view(tdx), dt_view(tdy), dt_view(tx), &s);
        ref_maxpool2d_forward(yr, NULL, x, pgeom(&s));
        ref_maxpool2d_backward(dxr, dy, x, pgeom(&s));
    } else {
        ht_avgpool2d_backward(D, dt_view(tdx), dt_view(tdy), &s, inc);
        ref_avgpool2d_forward(yr, x, pgeom(&s), inc);
        ref_avgpool2d_backward(dxr, dy, pgeom(&s), inc);
    }
    dt_get(ty, y);
    dt_get(tdx, dx);
    double ef = tap_max_relerr(y, yr, ny, POOL_FLOOR), eb = tap_max_relerr(dx, dxr, nx, POOL_FLOOR);
    int guards = dt_guards_ok(tx) && dt_guards_ok(ty) && dt_guards_ok(tdy) && dt_guards_ok(tdx);
    tap_ok((kind == POOL_MAX ? ef == 0 : ef < TOL_POOL) && eb < TOL_POOL && guards,
           "%s-pool B=%d C=%d %dx%d k=%d s=%d p=%d%s%s: fwd err %.2e, bwd err %.2e, guards %s",
           kind == POOL_MAX ? "max" : "avg", s.B, s.c, s.h, s.w, s.k, s.stride, s.pad,
           kind == POOL_AVG ? (inc ? " include_pad" : " exclude_pad") : "", ties ? " (ties)" : "",
           ef, eb, guards ? "intact" : "BROKEN");
    dt_free(tx), dt_free(ty), dt_free(tdy), dt_free(tdx);
    free(x), free(dy), free(dx0), free(y), free(yr), free(dx), free(dxr);
}

/* Hand-built 4x4 plane, k=2 s=2: equal maxima go to the first pixel of the window in
 * row-major order; a NaN wins its window; an all-negative window still has its maximum. */
static void test_maxpool_cases(void) {
    ht_pool2d_shape s = {1, 1, 4, 4, 2, 2, 0};
    const float x[16] = {5,  5,  1, NAN, /* window 0: 5 5 / 5 5 -> index 0 */
                         5,  5,  2, 3,   /* window 1: 1 nan / 2 3 -> NaN at index 3 */
                         -4, -3, 7, 0,   /* window 2: -4 -3 / -3 -2 -> -2 at index 13 */
                         -3, -2, 0, 7};  /* window 3: 7 0 / 0 7 -> index 10 */
    const float dy[4] = {1, 10, 100, 1000};
    float y[4], dx[16];
    dt tx = dt_new(16, x), ty = dt_new(4, NULL), tdy = dt_new(4, dy), tdx = dt_new(16, NULL);
    ht_maxpool2d_forward(D, dt_view(ty), dt_view(tx), &s);
    ht_maxpool2d_backward(D, dt_view(tdx), dt_view(tdy), dt_view(tx), &s);
    dt_get(ty, y);
    dt_get(tdx, dx);
    int ok = y[0] == 5 && isnan(y[1]) && y[2] == -2 && y[3] == 7;
    float want[16] = {0};
    want[0] = 1, want[3] = 10, want[13] = 100, want[10] = 1000;
    ok &= !memcmp(dx, want, sizeof want);
    tap_ok(ok,
           "max-pool ties to the first pixel, NaN wins: y = %g %g %g %g, dx routed to 0/3/13/10",
           y[0], y[1], y[2], y[3]);
    dt_free(tx), dt_free(ty), dt_free(tdy), dt_free(tdx);
}

/* The same rules in the vector 2x2 kernels: a 2x40 plane of 20 windows (two 8-window steps
 * and a 4-window step) with ties, NaN in every window position, two NaNs, all-negative
 * windows; the expected argmax follows the rule directly. */
static void test_maxpool2_vector_cases(void) {
    enum { NW = 20, WD = 2 * NW };
    ht_pool2d_shape s = {1, 1, 2, WD, 2, 2, 0};
    float x[2 * WD], dy[NW], y[NW], dx[2 * WD], want_dx[2 * WD] = {0};
    const float win[NW][4] = {
        {1, 1, 1, 1},     {0, NAN, 5, NAN}, {3, 2, NAN, 9},   {-1, -2, -3, -0.5f},
        {NAN, 1, 2, 3},   {1, 2, 3, NAN},   {2, 2, 1, 2},     {-5, -5, -4, -4},
        {7, 8, 8, 7},     {0, -0.0f, 0, 0}, {1, NAN, NAN, 1}, {4, 3, 2, 1},
        {1, 2, 3, 4},     {2, 4, 4, 1},     {-1, -1, -1, -1}, {9, 9, 9, 10},
        {NAN, NAN, 1, 1}, {0, 0, NAN, 0},   {3, 1, 3, 3},     {-2, -1, -1, NAN}};
    int want_idx[NW];
    for (int w = 0; w < NW; w++) {
        x[2 * w] = win[w][0], x[2 * w + 1] = win[w][1];
        x[WD + 2 * w] = win[w][2], x[WD + 2 * w + 1] = win[w][3];
        dy[w] = (float)(w + 1);
        int best = 0;
        for (int i = 1; i < 4; i++) {
            float v = win[w][i], m = win[w][best];
            if (v > m || (isnan(v) && !isnan(m))) best = i;
        }
        want_idx[w] = (best / 2) * WD + 2 * w + best % 2;
        want_dx[want_idx[w]] = dy[w];
    }
    dt tx = dt_new(2 * WD, x), ty = dt_new(NW, NULL), tdy = dt_new(NW, dy),
       tdx = dt_new(2 * WD, NULL);
    ht_maxpool2d_forward(D, dt_view(ty), dt_view(tx), &s);
    ht_maxpool2d_backward(D, dt_view(tdx), dt_view(tdy), dt_view(tx), &s);
    dt_get(ty, y);
    dt_get(tdx, dx);
    int ok = !memcmp(dx, want_dx, sizeof want_dx);
    for (int w = 0; w < NW; w++) {
        float v = x[want_idx[w]];
        ok &= isnan(v) ? isnan(y[w]) : y[w] == v;
    }
    tap_ok(ok && dt_guards_ok(ty) && dt_guards_ok(tdx),
           "max-pool 2x2 vector path: ties to the first pixel, first NaN wins, in every position");
    dt_free(tx), dt_free(ty), dt_free(tdy), dt_free(tdx);
}

/* ---------------------------------------------------------------- finite differences */

/* L = sum_i r_i * out_i in double over the float outputs of one device forward. */
typedef struct fd_ctx {
    int op; /* 0: conv, 1: max-pool, 2: avg-pool */
    conv_cfg c;
    ht_pool2d_shape ps;
    int inc;
    float *x, *p, *r; /* host inputs, parameters [W][b], output weights */
    size_t ny;
    dt tx, tp, ty, ta, tws;
    float *y; /* last pre-activations read back (kink detection) */
} fd_ctx;

static double fd_loss(fd_ctx *c) {
    double L = 0;
    dt_set(c->tx, c->x);
    if (c->op == 0) {
        size_t nw = nw_of(&c->c.s);
        dt_set(c->tp, c->p);
        ht_conv2d_forward(D, dt_view(c->ty), dt_view(c->ta), dt_view(c->tx), dt_view(c->tp),
                          c->c.bias ? dt_view_at(c->tp, nw) : ht_view_none(), dt_view(c->tws), &c->c.s,
                          c->c.act);
    } else {
        pool_run_fwd(c->op == 1 ? POOL_MAX : POOL_AVG, c->ty, c->tx, &c->ps, c->inc);
    }
    float *a = malloc(c->ny * sizeof(float));
    dt_get(c->ty, c->y);
    dt_get(c->op == 0 && c->c.act ? c->ta : c->ty, a);
    for (size_t i = 0; i < c->ny; i++)
        L += (double)c->r[i] * a[i];
    free(a);
    return L;
}

/* Central difference of L with respect to h[i]; sets *kink when a ReLU pre-activation
 * changed sign between the two evaluations (no derivative across it). */
static double fd_at(fd_ctx *c, float *h, size_t i, int *kink) {
    float v = h[i], vp = v + FD_STEP, vm = v - FD_STEP;
    float *yp = malloc(c->ny * sizeof(float));
    h[i] = vp;
    double lp = fd_loss(c);
    memcpy(yp, c->y, c->ny * sizeof(float));
    h[i] = vm;
    double lm = fd_loss(c);
    h[i] = v;
    *kink = 0;
    if (c->op == 0 && c->c.act == HT_ACT_RELU)
        for (size_t k = 0; k < c->ny; k++)
            *kink |= (yp[k] > 0) != (c->y[k] > 0);
    free(yp);
    return (lp - lm) / ((double)vp - (double)vm);
}

/* Worst |fd - g| / max(1, |g|) over `count` indices spread over [lo, lo + n) of h. */
static double fd_check(fd_ctx *c, float *h, const float *g, size_t lo, size_t n, int count,
                       int *checked) {
    double worst = 0;
    for (int k = 0; k < count; k++) {
        size_t i = lo + (size_t)((k * 7919u + 13u) % n);
        int kink;
        double fd = fd_at(c, h, i, &kink);
        if (kink) continue;
        double e = fabs(fd - g[i]) / fmax(1.0, fabs(g[i]));
        worst = tap_worse(worst, e);
        (*checked)++;
    }
    return worst;
}

static void test_fd_conv(conv_cfg cc) {
    fd_ctx c = {.op = 0, .c = cc};
    const ht_conv2d_shape *s = &cc.s;
    size_t nx = nx_of(s), nw = nw_of(s), np = nw + s->cout;
    c.ny = ny_of(s);
    c.x = hnew(nx, -1, 1, 501), c.p = hnew(np, -0.5f, 0.5f, 502), c.r = hnew(c.ny, -1, 1, 503);
    c.y = malloc(c.ny * sizeof(float));
    c.tx = dt_new(nx, c.x), c.tp = dt_new(np, c.p), c.ty = dt_new(c.ny, NULL),
    c.ta = dt_new(c.ny, NULL), c.tws = ws_new(s);
    dt tdx = dt_new(nx, NULL), tg = dt_new(np, NULL), tr = dt_new(c.ny, c.r);
    fd_loss(&c); /* forward at the unperturbed point for the saved pre-activation */
    ht_conv2d_backward(D, dt_view(tdx), dt_view(tg), cc.bias ? dt_view_at(tg, nw) : ht_view_none(), dt_view(tr), dt_view(c.ty),
                       dt_view(c.tx), dt_view(c.tp), dt_view(c.tws), s, cc.act, 1.0f, 0);
    float *gx = malloc(nx * sizeof(float)), *gp = malloc(np * sizeof(float));
    dt_get(tdx, gx);
    dt_get(tg, gp);
    int checked = 0;
    double ex = fd_check(&c, c.x, gx, 0, nx, 12, &checked);
    double ew = fd_check(&c, c.p, gp, 0, nw, 12, &checked);
    double eb = cc.bias ? fd_check(&c, c.p, gp, nw, (size_t)s->cout, s->cout, &checked) : 0;
    tap_ok(ex < TOL_FD && ew < TOL_FD && eb < TOL_FD && checked >= 20,
           "finite differences, %s (%d points, step %g): dx %.2e dW %.2e db %.2e", cfg_name(&cc),
           checked, (double)FD_STEP, ex, ew, eb);
    dt_free(c.tx), dt_free(c.tp), dt_free(c.ty), dt_free(c.ta), dt_free(c.tws), dt_free(tdx),
        dt_free(tg), dt_free(tr);
    free(c.x), free(c.p), free(c.r), free(c.y), free(gx), free(gp);
}

/* Max-pool inputs are a shuffled ladder 0.05 apart, so a step of 1e-2 never swaps an argmax. */
static void test_fd_pool(int kind, ht_pool2d_shape s, int inc) {
    fd_ctx c = {.op = kind == POOL_MAX ? 1 : 2, .ps = s, .inc = inc};
    size_t nx = (size_t)s.B * s.c * s.h * s.w;
    c.ny = (size_t)s.B * s.c * ht_pool2d_oh(&s) * ht_pool2d_ow(&s);
    c.x = malloc(nx * sizeof(float)), c.r = hnew(c.ny, -1, 1, 703);
    for (size_t i = 0; i < nx; i++)
        c.x[i] = 0.05f * (float)i - 0.025f * (float)nx;
    for (size_t i = nx - 1; i > 0; i--) { /* Fisher-Yates with the test rng */
        size_t j = ht_rng_below(704, i, (uint32_t)(i + 1));
        float t = c.x[i];
        c.x[i] = c.x[j], c.x[j] = t;
    }
    c.y = malloc(c.ny * sizeof(float));
    c.tx = dt_new(nx, c.x), c.ty = dt_new(c.ny, NULL);
    dt tdx = dt_new(nx, NULL), tr = dt_new(c.ny, c.r);
    if (kind == POOL_MAX)
        ht_maxpool2d_backward(D, dt_view(tdx), dt_view(tr), dt_view(c.tx), &s);
    else
        ht_avgpool2d_backward(D, dt_view(tdx), dt_view(tr), &s, inc);
    float *gx = malloc(nx * sizeof(float));
    dt_get(tdx, gx);
    int checked = 0;
    double e = fd_check(&c, c.x, gx, 0, nx, 24, &checked);
    tap_ok(e < TOL_FD && checked == 24,
           "finite differences, %s-pool %dx%d k=%d s=%d p=%d%s (%d points): dx %.2e",
           kind == POOL_MAX ? "max" : "avg", s.h, s.w, s.k, s.stride, s.pad,
           kind == POOL_AVG ? (inc ? " include_pad" : " exclude_pad") : "", checked, e);
    dt_free(c.tx), dt_free(c.ty), dt_free(tdx), dt_free(tr);
    free(c.x), free(c.r), free(c.y), free(gx);
}

/* ---------------------------------------------------------------- shapes */

static void test_shapes(void) {
    int ok = ht_conv_out_size(28, 5, 1, 2) == 28 && ht_conv_out_size(7, 2, 2, 0) == 3 &&
             ht_conv_out_size(7, 3, 2, 0) == 3 && ht_conv_out_size(9, 5, 2, 2) == 5 &&
             ht_conv_out_size(6, 3, 2, 2) == 4 && ht_conv_out_size(2, 5, 1, 1) == 0 &&
             ht_conv_out_size(2, 5, 1, 2) == 2 && ht_conv_out_size(7, 3, 0, 0) == 0 &&
             ht_conv_out_size(7, 3, 1, -1) == 0;
    tap_ok(ok, "output size floor((n + 2p - k)/s) + 1; 0 when the window does not fit");
    ht_conv2d_shape good = {2, 3, 9, 6, 5, 3, 2, 1};
    struct {
        ht_conv2d_shape s;
        const char *needle;
    } bad[] = {
        {{0, 3, 9, 6, 5, 3, 1, 0}, "batch 0"},
        {{2, 3, 9, 6, 0, 3, 1, 0}, "channels 3->0"},
        {{2, 3, 9, 6, 5, 3, 0, 0}, "stride 0"},
        {{2, 3, 9, 6, 5, 3, 1, -1}, "padding -1"},
        {{2, 3, 4, 6, 5, 7, 1, 1}, "does not fit the 4x6 input"},
        {{1 << 20, 64, 64, 64, 5, 3, 1, 0}, "2^31"},
    };
    ok = ht_conv2d_check(&good) == HT_OK;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = ht_conv2d_check(&bad[i].s);
        if (rc != HT_EINPUT || !strstr(ht_errmsg(), bad[i].needle)) {
            tap_diag("case %zu: rc %d, message '%s'", i, rc, ht_errmsg());
            ok = 0;
        }
    }
    tap_ok(ok, "conv2d shape check: accepts a valid shape, names each bad field");
    ht_pool2d_shape pg = {2, 3, 7, 7, 3, 2, 1}, pb1 = {2, 3, 7, 7, 3, 2, 2},
                    pb2 = {2, 3, 1, 7, 3, 1, 0};
    ok = ht_pool2d_check(&pg) == HT_OK && ht_pool2d_check(&pb1) == HT_EINPUT &&
         strstr(ht_errmsg(), "k/2") && ht_pool2d_check(&pb2) == HT_EINPUT &&
         strstr(ht_errmsg(), "does not fit");
    tap_ok(ok, "pool2d shape check: padding above k/2 and windows larger than the input refused");
    ht_error_clear();
}

/* ---------------------------------------------------------------- main */

/* Every conv test with the algorithms of one setting; `some`: a subset of the shapes (the
 * automatic choice measures each new shape: slow on rusticl, where our tiled kernels are). */
static void conv_suite(ht_conv_impl impl, const char *name, int some) {
    ht_conv2d_set_impl(impl);
    IMPL = name;
    /* {B, cin, h, w, cout, k, stride, pad}, bias, act. Tiled: stride 1 runs the implicit
     * kernels (except the input gradient of the last config, pad > k-1), stride 2 im2col;
     * the 24x20 config has N = B*Ho*Wo = 1440 pixels (two dW slices) and rows wider than
     * one 16-pixel tile */
    const conv_cfg cfgs[] = {
        {{1, 1, 7, 7, 5, 3, 1, 0}, 1, HT_ACT_NONE},    {{3, 3, 7, 7, 5, 3, 1, 2}, 1, HT_ACT_RELU},
        {{3, 3, 9, 6, 5, 5, 2, 2}, 0, HT_ACT_NONE},    {{1, 3, 9, 6, 5, 5, 1, 0}, 1, HT_ACT_RELU},
        {{3, 1, 9, 6, 5, 3, 2, 0}, 1, HT_ACT_GELU},    {{3, 3, 7, 7, 5, 5, 2, 2}, 0, HT_ACT_RELU},
        {{3, 1, 7, 7, 5, 5, 1, 2}, 1, HT_ACT_NONE},    {{1, 3, 9, 6, 5, 3, 2, 2}, 1, HT_ACT_RELU},
        {{3, 2, 24, 20, 13, 3, 1, 1}, 1, HT_ACT_RELU}, {{2, 3, 5, 4, 5, 3, 1, 3}, 1, HT_ACT_GELU},
    };
    const int ncfg = (int)(sizeof cfgs / sizeof *cfgs);
    for (int i = 0; i < ncfg; i++)
        if (!some || i % 3 == 1) test_conv_forward(cfgs[i], 100 + 10 * i);
    for (int i = 0; i < ncfg; i++) {
        if (some && i % 3 != 1) continue;
        test_conv_backward(cfgs[i], 1.0f, 0, 1, 200 + 10 * i);
        test_conv_backward(cfgs[i], i % 2 ? 0.25f : 1.0f, 1, i % 3 != 0, 300 + 10 * i);
    }
    if (some) {
        test_conv_deterministic();
        ht_conv2d_set_impl(HT_CONV_AUTO);
        return;
    }
    test_conv_chunked(2);
    test_conv_chunked(1);
    test_conv_deterministic();
    const conv_cfg fd[] = {
        {{2, 2, 6, 5, 3, 3, 1, 1}, 1, HT_ACT_NONE},
        {{2, 2, 7, 6, 3, 3, 2, 2}, 1, HT_ACT_RELU},
        {{1, 3, 6, 6, 2, 5, 1, 2}, 0, HT_ACT_GELU},
    };
    for (size_t i = 0; i < sizeof fd / sizeof *fd; i++)
        test_fd_conv(fd[i]);
    ht_conv2d_set_impl(HT_CONV_AUTO);
}

int main(void) {
    D = test_dev_open();
    dt_use(D);
    test_shapes();
    conv_suite(HT_CONV_TILED, "implicit", 0); /* implicit GEMM where it applies, else tiled */
    conv_suite(HT_CONV_IM2COL, "tiled", 0);   /* im2col + cl/conv.cl's tiled GEMM */
    conv_suite(HT_CONV_CLBLAST, "gemm", 0);   /* im2col + ht_sgemm (chunks: t_conv_chunked) */
    conv_suite(HT_CONV_AUTO, "auto", 1);      /* each shape and pass chosen by measurement */

    /* {B, c, h, w, k, stride, pad} */
    const ht_pool2d_shape p22 = {3, 2, 7, 7, 2, 2, 0}, p32 = {3, 2, 7, 7, 3, 2, 0};
    const ht_pool2d_shape p32p = {2, 3, 9, 6, 3, 2, 1}, p31 = {1, 2, 6, 5, 3, 1, 1};
    /* 2x2/2 has vector kernels (8, then 4 windows per step): a width of 45 runs two 8-steps,
     * a 4-step, a scalar window and an uncovered last column; 9 rows leave an uncovered
     * last row */
    const ht_pool2d_shape p22w = {2, 3, 9, 45, 2, 2, 0};
    /* work-items take several output rows once there are enough planes: whole planes of 4
     * rows (72 planes), and blocks of 3 of 5 rows, the last one short (35 planes) */
    const ht_pool2d_shape p22m = {8, 9, 9, 45, 2, 2, 0}, p22r = {5, 7, 11, 19, 2, 2, 0};
    for (int ties = 0; ties < 2; ties++) {
        test_pool(POOL_MAX, p22w, 0, ties, 450 + ties);
        test_pool(POOL_MAX, p22m, 0, ties, 460 + ties);
        test_pool(POOL_MAX, p22r, 0, ties, 470 + ties);
        test_pool(POOL_MAX, p22, 0, ties, 400 + ties);
        test_pool(POOL_MAX, p32, 0, ties, 410 + ties);
        test_pool(POOL_MAX, p32p, 0, ties, 420 + ties);
        test_pool(POOL_MAX, p31, 0, ties, 430 + ties);
    }
    test_maxpool_cases();
    test_maxpool2_vector_cases();
    test_pool(POOL_AVG, p22, 1, 0, 440);
    test_pool(POOL_AVG, p32, 1, 0, 441);
    test_pool(POOL_AVG, p32p, 1, 0, 442);
    test_pool(POOL_AVG, p32p, 0, 0, 443);
    test_pool(POOL_AVG, p31, 0, 0, 444);
    test_fd_pool(POOL_MAX, p22, 0);
    test_fd_pool(POOL_MAX, p22w, 0);
    test_fd_pool(POOL_MAX, p32p, 0);
    test_fd_pool(POOL_AVG, p32p, 1);
    test_fd_pool(POOL_AVG, p32p, 0);

    ht_dev_close(D);
    return tap_done();
}
