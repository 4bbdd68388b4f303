#include "ref.h"

#include <math.h>
#include <stdlib.h>

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
