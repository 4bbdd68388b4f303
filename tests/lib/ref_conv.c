/* CPU references for convolution and pooling, straight from the definitions. */
#include "ref_conv.h"

#include <math.h>
#include <stdlib.h>

int ref_out_size(int n, int k, int s, int p) { return (n + 2 * p - k) / s + 1; }

/* ---------------------------------------------------------------- convolution */

void ref_conv2d_forward(float *y, const float *x, const float *w, const float *b, ref_geom g) {
    int Ho = ref_out_size(g.h, g.k, g.s, g.p), Wo = ref_out_size(g.w, g.k, g.s, g.p);
    for (int n = 0; n < g.B; n++)
        for (int co = 0; co < g.cout; co++)
            for (int oh = 0; oh < Ho; oh++)
                for (int ow = 0; ow < Wo; ow++) {
                    double acc = b ? b[co] : 0.0;
                    for (int ci = 0; ci < g.cin; ci++)
                        for (int kh = 0; kh < g.k; kh++)
                            for (int kw = 0; kw < g.k; kw++) {
                                int ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
                                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                                acc += (double)x[((n * g.cin + ci) * g.h + ih) * g.w + iw] *
                                       w[((co * g.cin + ci) * g.k + kh) * g.k + kw];
                            }
                    y[((n * g.cout + co) * Ho + oh) * Wo + ow] = (float)acc;
                }
}

void ref_conv2d_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, ref_geom g, double scale, int accumulate) {
    int Ho = ref_out_size(g.h, g.k, g.s, g.p), Wo = ref_out_size(g.w, g.k, g.s, g.p);
    size_t nx = (size_t)g.B * g.cin * g.h * g.w, nw = (size_t)g.cout * g.cin * g.k * g.k;
    double *gx = calloc(nx, sizeof(double)), *gw = calloc(nw, sizeof(double));
    double *gb = calloc((size_t)g.cout, sizeof(double));
    for (int n = 0; n < g.B; n++)
        for (int co = 0; co < g.cout; co++)
            for (int oh = 0; oh < Ho; oh++)
                for (int ow = 0; ow < Wo; ow++) {
                    double d = scale * dy[((n * g.cout + co) * Ho + oh) * Wo + ow];
                    gb[co] += d;
                    for (int ci = 0; ci < g.cin; ci++)
                        for (int kh = 0; kh < g.k; kh++)
                            for (int kw = 0; kw < g.k; kw++) {
                                int ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
                                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                                size_t xi = ((size_t)(n * g.cin + ci) * g.h + ih) * g.w + iw;
                                size_t wi = ((size_t)(co * g.cin + ci) * g.k + kh) * g.k + kw;
                                gx[xi] += d * w[wi];
                                gw[wi] += d * x[xi];
                            }
                }
    if (dx)
        for (size_t i = 0; i < nx; i++)
            dx[i] = (float)gx[i];
    for (size_t i = 0; i < nw; i++)
        dw[i] = (float)(accumulate ? dw[i] + gw[i] : gw[i]);
    if (db)
        for (int co = 0; co < g.cout; co++)
            db[co] = (float)(accumulate ? db[co] + gb[co] : gb[co]);
    free(gx), free(gw), free(gb);
}

/* ---------------------------------------------------------------- pooling */

void ref_maxpool2d_forward(float *y, int *argmax, const float *x, ref_geom g) {
    int Ho = ref_out_size(g.h, g.k, g.s, g.p), Wo = ref_out_size(g.w, g.k, g.s, g.p);
    for (int pl = 0; pl < g.B * g.cin; pl++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                double m = -INFINITY;
                int best = -1;
                for (int kh = 0; kh < g.k; kh++)
                    for (int kw = 0; kw < g.k; kw++) {
                        int ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
                        if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                        int i = (pl * g.h + ih) * g.w + iw;
                        if (best < 0 || x[i] > m) m = x[i], best = i;
                    }
                int o = (pl * Ho + oh) * Wo + ow;
                y[o] = x[best];
                if (argmax) argmax[o] = best;
            }
}

void ref_maxpool2d_backward(float *dx, const float *dy, const float *x, ref_geom g) {
    int Ho = ref_out_size(g.h, g.k, g.s, g.p), Wo = ref_out_size(g.w, g.k, g.s, g.p);
    size_t nx = (size_t)g.B * g.cin * g.h * g.w, ny = (size_t)g.B * g.cin * Ho * Wo;
    float *y = malloc(ny * sizeof(float));
    int *am = malloc(ny * sizeof(int));
    double *gx = calloc(nx, sizeof(double));
    ref_maxpool2d_forward(y, am, x, g);
    for (size_t o = 0; o < ny; o++)
        gx[am[o]] += dy[o];
    for (size_t i = 0; i < nx; i++)
        dx[i] = (float)gx[i];
    free(y), free(am), free(gx);
}

static int avg_count(ref_geom g, int oh, int ow, int include_pad) {
    if (include_pad) return g.k * g.k;
    int c = 0;
    for (int kh = 0; kh < g.k; kh++)
        for (int kw = 0; kw < g.k; kw++) {
            int ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
            c += ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
        }
    return c;
}

void ref_avgpool2d_forward(float *y, const float *x, ref_geom g, int include_pad) {
    int Ho = ref_out_size(g.h, g.k, g.s, g.p), Wo = ref_out_size(g.w, g.k, g.s, g.p);
    for (int pl = 0; pl < g.B * g.cin; pl++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                double acc = 0;
                for (int kh = 0; kh < g.k; kh++)
                    for (int kw = 0; kw < g.k; kw++) {
                        int ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
                        if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
                            acc += x[(pl * g.h + ih) * g.w + iw];
                    }
                y[(pl * Ho + oh) * Wo + ow] = (float)(acc / avg_count(g, oh, ow, include_pad));
            }
}

void ref_avgpool2d_backward(float *dx, const float *dy, ref_geom g, int include_pad) {
    int Ho = ref_out_size(g.h, g.k, g.s, g.p), Wo = ref_out_size(g.w, g.k, g.s, g.p);
    size_t nx = (size_t)g.B * g.cin * g.h * g.w;
    double *gx = calloc(nx, sizeof(double));
    for (int pl = 0; pl < g.B * g.cin; pl++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                double d = (double)dy[(pl * Ho + oh) * Wo + ow] / avg_count(g, oh, ow, include_pad);
                for (int kh = 0; kh < g.k; kh++)
                    for (int kw = 0; kw < g.k; kw++) {
                        int ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
                        if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
                            gx[(pl * g.h + ih) * g.w + iw] += d;
                    }
            }
    for (size_t i = 0; i < nx; i++)
        dx[i] = (float)gx[i];
    free(gx);
}
