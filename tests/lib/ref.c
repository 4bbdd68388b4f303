#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

void ref_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed) {
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ht_rng_uniform(seed, i);
}

/* ---------------------------------------------------------------- activations */

static const double GELU_K0 = 0.79788456080286535588; /* sqrt(2/pi) */
static const double GELU_K1 = 0.044715;

double ref_act(int act, double x) {
    if (act == REF_ACT_RELU) return x > 0 ? x : 0;
    if (act == REF_ACT_GELU) return 0.5 * x * (1.0 + tanh(GELU_K0 * (x + GELU_K1 * x * x * x)));
    return x;
}

double ref_act_grad(int act, double x) {
    if (act == REF_ACT_RELU) return x > 0 ? 1 : 0;
    if (act == REF_ACT_GELU) {
        double t = tanh(GELU_K0 * (x + GELU_K1 * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * GELU_K1 * x * x);
    }
    return 1;
}

/* ---------------------------------------------------------------- linear */

void ref_linear_forward(float *y, const float *x, const float *w, const float *b, int B, int in,
                        int out) {
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++)
                s += (double)x[r * in + i] * w[o * in + i];
            y[r * out + o] = (float)s;
        }
}

void ref_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, int B, int in, int out, double scale, int accumulate) {
    if (dx)
        for (int r = 0; r < B; r++)
            for (int i = 0; i < in; i++) {
                double s = 0;
                for (int o = 0; o < out; o++)
                    s += (double)dy[r * out + o] * w[o * in + i];
                dx[r * in + i] = (float)(scale * s);
            }
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int r = 0; r < B; r++)
                s += (double)dy[r * out + o] * x[r * in + i];
            dw[o * in + i] = (float)(scale * s + (accumulate ? dw[o * in + i] : 0.0));
        }
    if (db)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (int r = 0; r < B; r++)
                s += dy[r * out + o];
            db[o] = (float)(scale * s + (accumulate ? db[o] : 0.0));
        }
}

/* ---------------------------------------------------------------- loss */

void ref_softmax_xent(double *loss, int *correct, float *dlogits, const float *logits,
                      const int32_t *labels, int B, int C, double grad_scale) {
    for (int r = 0; r < B; r++) {
        const float *z = logits + (size_t)r * C;
        int lab = labels[r], am = 0;
        for (int j = 1; j < C; j++)
            if (z[j] > z[am]) am = j;
        double m = z[am], s = 0;
        for (int j = 0; j < C; j++)
            s += exp((double)z[j] - m);
        int valid = lab >= 0 && lab < C;
        loss[r] = valid ? log(s) + m - z[lab] : NAN;
        correct[r] = valid ? (am == lab) : -1;
        if (dlogits)
            for (int j = 0; j < C; j++)
                dlogits[(size_t)r * C + j] =
                    valid ? (float)((exp((double)z[j] - m) / s - (j == lab)) * grad_scale) : 0.0f;
    }
}

/* ---------------------------------------------------------------- MLP */

void ref_mlp_forward(double *loss, int *correct, signed char *signs, const float *params,
                     const int *sizes, int nsizes, int act, const float *x, const int32_t *y,
                     int B) {
    int maxw = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > maxw) maxw = sizes[i];
    double *h = malloc(sizeof(double) * (size_t)B * maxw);
    double *g = malloc(sizeof(double) * (size_t)B * maxw);
    for (int r = 0; r < B; r++)
        for (int i = 0; i < sizes[0]; i++)
            h[r * sizes[0] + i] = x[r * sizes[0] + i];
    const float *p = params;
    for (int l = 0; l + 1 < nsizes; l++) {
        int in = sizes[l], out = sizes[l + 1], last = l + 2 == nsizes;
        const float *w = p, *b = p + (size_t)out * in;
        for (int r = 0; r < B; r++)
            for (int o = 0; o < out; o++) {
                double s = b[o];
                for (int i = 0; i < in; i++)
                    s += h[r * in + i] * w[o * in + i];
                if (!last && signs) *signs++ = (signed char)((s > 0) - (s < 0));
                g[r * out + o] = last ? s : ref_act(act, s);
            }
        double *t = h;
        h = g;
        g = t;
        p += (size_t)out * in + out;
    }
    int C = sizes[nsizes - 1];
    for (int r = 0; r < B; r++) {
        const double *z = h + (size_t)r * C;
        int am = 0;
        for (int j = 1; j < C; j++)
            if (z[j] > z[am]) am = j;
        double s = 0;
        for (int j = 0; j < C; j++)
            s += exp(z[j] - z[am]);
        loss[r] = log(s) + z[am] - z[y[r]];
        if (correct) correct[r] = am == y[r];
    }
    free(h);
    free(g);
}

void ref_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, const float *c0, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = (float)(alpha * s + (beta != 0 ? beta * (double)c0[i * ldc + j] : 0));
        }
}

ref_gemm_case ref_gemm_case_new(int ta, int tb, int m, int n, int k, float alpha, float beta,
                                int pad, size_t oa, size_t ob, size_t oc) {
    ref_gemm_case g = {ta,
                       tb,
                       m,
                       n,
                       k,
                       (ta ? m : k) + pad,
                       (tb ? k : n) + pad,
                       n + pad,
                       alpha,
                       beta,
                       oa,
                       ob,
                       oc,
                       0,
                       0,
                       0,
                       NULL,
                       NULL,
                       NULL,
                       NULL,
                       NULL};
    if (g.lda < 1) g.lda = 1;
    if (g.ldb < 1) g.ldb = 1;
    g.na = oa + (size_t)(ta ? k : m) * g.lda + 1;
    g.nb = ob + (size_t)(tb ? n : k) * g.ldb + 1;
    g.nc = oc + (size_t)m * g.ldc;
    g.a = calloc(g.na, 4), g.b = calloc(g.nb, 4);
    g.c0 = malloc(g.nc * 4), g.c = malloc(g.nc * 4), g.r = malloc(g.nc * 4);
    ref_fill_uniform(g.a, g.na, -1, 1, 100 + (uint64_t)m);
    ref_fill_uniform(g.b, g.nb, -1, 1, 200 + (uint64_t)n);
    ref_fill_uniform(g.c0, g.nc, -1, 1, 300 + (uint64_t)k);
    if (beta == 0)
        for (size_t i = oc; i < g.nc; i++)
            if ((i - oc) % (size_t)g.ldc < (size_t)n) g.c0[i] = NAN;
    return g;
}

void ref_gemm_case_free(ref_gemm_case *g) {
    free(g->a), free(g->b), free(g->c0), free(g->c), free(g->r);
}

ref_gemm_diff ref_gemm_check(ref_gemm_case *g) {
    memcpy(g->r, g->c0, g->nc * 4);
    ref_gemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a + g->oa, g->lda, g->b + g->ob, g->ldb,
             g->beta, g->c0 + g->oc, g->r + g->oc, g->ldc);
    /* fp32 sums of k products of magnitude <= 1: error ~ sqrt(k) eps; the bound is loose */
    ref_gemm_diff d = {0, 0, 0, (1e-6 * g->k + 1e-5) * (fabs(g->alpha) > 1 ? fabs(g->alpha) : 1),
                       0};
    for (size_t i = 0; i < g->nc; i++) {
        int inside = i >= g->oc && (i - g->oc) % (size_t)g->ldc < (size_t)g->n;
        if (!inside) { /* bit for bit untouched (a NaN stays a NaN) */
            if (memcmp(&g->c[i], &g->r[i], 4)) d.touched++;
            continue;
        }
        double e = fabs((double)g->c[i] - (double)g->r[i]);
        if (!(e <= d.tol)) { /* also NaN */
            if (!d.bad++) d.first = i;
        } else if (e > d.worst) {
            d.worst = e;
        }
    }
    return d;
}

const ref_gemm_shape ref_gemm_shapes[] = {
    {0, 0, 13, 37, 29, 1.0f, 0.0f, 0, 0, 0, 0}, {0, 0, 7, 11, 5, -0.5f, 1.5f, 3, 5, 2, 7},
    {0, 1, 13, 37, 29, 1.0f, 0.0f, 0, 0, 0, 0}, {0, 1, 7, 11, 5, -0.5f, 1.5f, 3, 5, 2, 7},
    {1, 0, 13, 37, 29, 1.0f, 0.0f, 0, 0, 0, 0}, {1, 0, 7, 11, 5, -0.5f, 1.5f, 3, 5, 2, 7},
    {1, 1, 13, 37, 29, 1.0f, 0.0f, 0, 0, 0, 0}, {1, 1, 7, 11, 5, -0.5f, 1.5f, 3, 5, 2, 7},
    {0, 0, 1, 1, 1, 1.0f, 0.0f, 0, 0, 0, 0},    {1, 1, 1, 17, 1, 2.0f, 0.5f, 1, 1, 1, 1},
    {0, 1, 19, 1, 3, 1.0f, -1.0f, 2, 3, 0, 4},
};
const int ref_gemm_nshapes = (int)(sizeof ref_gemm_shapes / sizeof *ref_gemm_shapes);
