/* CPU references for the transformer ops: llm.c's loops, in double, no tricks. */
#include "ref_tf.h"

#include <math.h>
#include <stdlib.h>

#include "tap.h"

/* ---------------------------------------------------------------- embedding */

void ref_embed_forward(float *out, const int32_t *tok, const float *wte, const float *wpe, int B,
                       int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int v = tok[b * T + t];
            for (int c = 0; c < C; c++)
                out[((size_t)b * T + t) * C + c] =
                    (float)((double)wte[(size_t)v * C + c] + wpe[(size_t)t * C + c]);
        }
}

void ref_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B,
                        int T, int C, int V, int accumulate) {
    double *gw = calloc((size_t)V * C, sizeof(double)), *gp = calloc((size_t)T * C, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int v = tok[b * T + t];
            for (int c = 0; c < C; c++) {
                double d = dout[((size_t)b * T + t) * C + c];
                gw[(size_t)v * C + c] += d;
                gp[(size_t)t * C + c] += d;
            }
        }
    for (size_t i = 0; i < (size_t)V * C; i++)
        dwte[i] = (float)(gw[i] + (accumulate ? dwte[i] : 0.0));
    for (size_t i = 0; i < (size_t)T * C; i++)
        dwpe[i] = (float)(gp[i] + (accumulate ? dwpe[i] : 0.0));
    free(gw);
    free(gp);
}

/* ---------------------------------------------------------------- layernorm */

static void ln_stats(const float *x, int C, double *mean, double *rstd) {
    double m = 0, v = 0;
    for (int c = 0; c < C; c++)
        m += x[c];
    m /= C;
    for (int c = 0; c < C; c++)
        v += (x[c] - m) * (x[c] - m);
    v /= C;
    *mean = m;
    *rstd = 1.0 / sqrt(v + 1e-5);
}

void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *b, int N, int C) {
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        double m, rs;
        ln_stats(x, C, &m, &rs);
        for (int c = 0; c < C; c++)
            out[(size_t)r * C + c] = (float)((x[c] - m) * rs * w[c] + b[c]);
        if (mean) mean[r] = (float)m;
        if (rstd) rstd[r] = (float)rs;
    }
}

void ref_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, int N, int C, int add_dinp, int accumulate) {
    double *gw = calloc((size_t)C, sizeof(double)), *gb = calloc((size_t)C, sizeof(double));
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
        double m, rs;
        ln_stats(x, C, &m, &rs);
        double mg = 0, mgn = 0; /* mean of w*dout and of w*dout*norm */
        for (int c = 0; c < C; c++) {
            double n = (x[c] - m) * rs;
            mg += (double)w[c] * d[c];
            mgn += (double)w[c] * d[c] * n;
            gw[c] += d[c] * n;
            gb[c] += d[c];
        }
        mg /= C;
        mgn /= C;
        for (int c = 0; c < C; c++) {
            double n = (x[c] - m) * rs;
            double g = rs * ((double)w[c] * d[c] - mg - n * mgn);
            float *o = dinp + (size_t)r * C + c;
            *o = (float)(g + (add_dinp ? *o : 0.0));
        }
    }
    for (int c = 0; c < C; c++) {
        dw[c] = (float)(gw[c] + (accumulate ? dw[c] : 0.0));
        db[c] = (float)(gb[c] + (accumulate ? db[c] : 0.0));
    }
    free(gw);
    free(gb);
}

/* ---------------------------------------------------------------- attention */

/* Probabilities of query row t of head h in sequence b, in double, into p[0..t]. */
static void attn_probs(double *p, const float *qkv, int b, int t, int h, int T, int C, int NH) {
    int hs = C / NH;
    const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
    double m = -INFINITY, s = 0;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
        double dot = 0;
        for (int i = 0; i < hs; i++)
            dot += (double)q[i] * k[i];
        p[t2] = dot / sqrt((double)hs);
        if (p[t2] > m) m = p[t2];
    }
    for (int t2 = 0; t2 <= t; t2++) {
        p[t2] = exp(p[t2] - m);
        s += p[t2];
    }
    for (int t2 = 0; t2 <= t; t2++)
        p[t2] /= s;
}

void ref_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    double *p = malloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                attn_probs(p, qkv, b, t, h, T, C, NH);
                if (att)
                    for (int t2 = 0; t2 < T; t2++)
                        att[(((size_t)b * NH + h) * T + t) * T + t2] = t2 <= t ? (float)p[t2] : 0;
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o += p[t2] * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * hs + i];
                    out[((size_t)b * T + t) * C + h * hs + i] = (float)o;
                }
            }
    free(p);
}

void ref_attention_backward(float *dqkv, const float *dout, const float *qkv, int B, int T, int C,
                            int NH) {
    int hs = C / NH;
    size_t n = (size_t)B * T * 3 * C;
    double *g = calloc(n, sizeof(double));
    double *p = malloc((size_t)T * sizeof(double)), *da = malloc((size_t)T * sizeof(double));
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                attn_probs(p, qkv, b, t, h, T, C, NH);
                const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                size_t qi = ((size_t)b * T + t) * 3 * C + h * hs;
                double s = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    size_t vi = ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    da[t2] = 0;
                    for (int i = 0; i < hs; i++) {
                        da[t2] += (double)d[i] * qkv[vi + i];
                        g[vi + i] += p[t2] * d[i]; /* dv */
                    }
                    s += p[t2] * da[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    double dpre = p[t2] * (da[t2] - s) * scale;
                    size_t ki = ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        g[qi + i] += dpre * qkv[ki + i];
                        g[ki + i] += dpre * qkv[qi + i];
                    }
                }
            }
    for (size_t i = 0; i < n; i++)
        dqkv[i] = (float)g[i];
    free(g);
    free(p);
    free(da);
}

/* ---------------------------------------------------------------- finite differences */

static double fd_loss(ref_fd_forward forward, void *ctx, const float *r, float *out, size_t nout) {
    forward(ctx, out);
    double L = 0;
    for (size_t i = 0; i < nout; i++)
        L += (double)r[i] * out[i];
    return L;
}

void ref_fd_qkv(double worst[3], ref_fd_forward forward, void *ctx, float *qkv, size_t BT, int C,
                const float *r, size_t nout, const float *g, float step) {
    float *out = malloc(nout * sizeof *out);
    worst[0] = worst[1] = worst[2] = 0;
    for (int k = 0; k < 45; k++) {
        int part = k % 3; /* q, k, v */
        size_t row = (size_t)(k * 7919u + 13u) % BT, col = (size_t)(k * 31 % C);
        size_t i = row * 3 * C + (size_t)part * C + col;
        float v = qkv[i];
        qkv[i] = v + step;
        double lp = fd_loss(forward, ctx, r, out, nout);
        qkv[i] = v - step;
        double lm = fd_loss(forward, ctx, r, out, nout);
        qkv[i] = v;
        double fd = (lp - lm) / ((double)(v + step) - (double)(v - step));
        worst[part] = tap_worse(worst[part], fabs(fd - g[i]) / fmax(1.0, fabs(g[i])));
    }
    free(out);
}
