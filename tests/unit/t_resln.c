/* The residual add fused with LayerNorm (ht_residual_layernorm_forward, cl/resln.cl) against the
 * unfused ops (ht_residual_forward then ht_layernorm_forward: bit for bit, the same float
 * arithmetic in the same order), the sum by hand (exact: one float add) and
 * tests/lib/ref_tf.c's double LayerNorm of that sum; on odd widths (C = 1, 15, 16, 17, 33, 770:
 * float16 chunks and scalar tails) and several row counts, NaN-filled outputs (every element
 * written) and guard cells around every tensor.
 * Its backward's input half (ht_residual_layernorm_backward_input): bit for bit the unfused
 * residual copy then ht_layernorm_backward_input adding into it, also in place (dx = dres);
 * against ref_layernorm_backward in double; and against central finite differences in double
 * of L(x) = sum(dres * x) + sum(dout * LayerNorm(x)), whose gradient it is. */
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

/* LayerNorm output and rstd vs the double reference: max |err| / max |ref| (as t_tf_ops.c) */
#define TOL_LN 1e-5

static void test_resln(int N, int C, uint64_t seed) {
    size_t n = (size_t)N * C;
    float *a = hnew(n, -2, 2, seed), *b = hnew(n, -1, 1, seed + 1), *w = hnew(C, 0.5f, 1.5f, seed + 2),
          *bias = hnew(C, -0.5f, 0.5f, seed + 3), *nan = hnan(n);
    dt ta = dt_new(n, a), tb = dt_new(n, b), tw = dt_new(C, w), tbias = dt_new(C, bias);
    dt fres = dt_new(n, nan), fout = dt_new(n, nan), fm = dt_new(N, nan), fr = dt_new(N, nan);
    dt ures = dt_new(n, nan), uout = dt_new(n, nan), um = dt_new(N, nan), ur = dt_new(N, nan);
    ht_residual_layernorm_forward(D, dt_view(fres), dt_view(fout), dt_view(fm), dt_view(fr),
                                  dt_view(ta), dt_view(tb), dt_view(tw), dt_view(tbias), N, C);
    ht_residual_forward(D, dt_view(ures), dt_view(ta), dt_view(tb), n);
    ht_layernorm_forward(D, dt_view(uout), dt_view(um), dt_view(ur), dt_view(ures), dt_view(tw),
                         dt_view(tbias), N, C);
    float *res = malloc(n * 4), *out = malloc(n * 4), *m = malloc(N * 4), *r = malloc(N * 4);
    float *res2 = malloc(n * 4), *out2 = malloc(n * 4), *m2 = malloc(N * 4), *r2 = malloc(N * 4);
    float *sum = malloc(n * 4), *outr = malloc(n * 4), *mr = malloc(N * 4), *rr = malloc(N * 4);
    dt_get(fres, res), dt_get(fout, out), dt_get(fm, m), dt_get(fr, r);
    dt_get(ures, res2), dt_get(uout, out2), dt_get(um, m2), dt_get(ur, r2);
    for (size_t i = 0; i < n; i++) sum[i] = a[i] + b[i];
    ref_layernorm_forward(outr, mr, rr, sum, w, bias, N, C);
    int same = !memcmp(res, res2, n * 4) && !memcmp(out, out2, n * 4) && !memcmp(m, m2, N * 4) &&
               !memcmp(r, r2, N * 4);
    double eo = nerr(out, outr, n), er = nerr(r, rr, N);
    int guards = dt_guards_ok(ta) && dt_guards_ok(tb) && dt_guards_ok(tw) &&
                 dt_guards_ok(tbias) && dt_guards_ok(fres) && dt_guards_ok(fout) &&
                 dt_guards_ok(fm) && dt_guards_ok(fr);
    tap_ok(!memcmp(res, sum, n * 4) && eo < TOL_LN && er < TOL_LN && same && guards,
           "residual + LayerNorm fused, N=%d C=%d: sum exact, out err %.2e, rstd err %.2e vs "
           "double; bit for bit the unfused add then LayerNorm",
           N, C, eo, er);
    dt_free(ta), dt_free(tb), dt_free(tw), dt_free(tbias), dt_free(fres), dt_free(fout),
        dt_free(fm), dt_free(fr), dt_free(ures), dt_free(uout), dt_free(um), dt_free(ur);
    free(a), free(b), free(w), free(bias), free(nan), free(res), free(out), free(m), free(r),
        free(res2), free(out2), free(m2), free(r2), free(sum), free(outr), free(mr), free(rr);
}

/* L(x) = sum(g1 * x) + sum(g2 * LN(x)) over row r, in double (LayerNorm with eps 1e-5, the
 * bias does not change the gradient and is left out). */
static double row_loss(const double *x, const float *g1, const float *g2, const float *w, int C) {
    double m = 0, v = 0, l = 0;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    double rs = 1.0 / sqrt(v / C + 1e-5);
    for (int c = 0; c < C; c++) l += g1[c] * x[c] + g2[c] * (x[c] - m) * rs * w[c];
    return l;
}

/* max |dx - finite difference| / max |finite difference| over every element */
static double fd_err(const float *dx, const float *x, const float *g1, const float *g2,
                     const float *w, int N, int C) {
    double *row = malloc((size_t)C * sizeof *row), e = 0, big = 0;
    const double h = 1e-4;
    for (int r = 0; r < N; r++)
        for (int j = 0; j < C; j++) {
            const size_t o = (size_t)r * C;
            for (int c = 0; c < C; c++) row[c] = x[o + c];
            row[j] = x[o + j] + h;
            double lp = row_loss(row, g1 + o, g2 + o, w, C);
            row[j] = x[o + j] - h;
            double fd = (lp - row_loss(row, g1 + o, g2 + o, w, C)) / (2 * h);
            e = fmax(e, fabs(dx[o + j] - fd)), big = fmax(big, fabs(fd));
        }
    free(row);
    return big > 0 ? e / big : e;
}

static void test_resln_bwd(int N, int C, uint64_t seed) {
    size_t n = (size_t)N * C;
    float *x = hnew(n, -2, 2, seed), *w = hnew(C, 0.5f, 1.5f, seed + 1),
          *bias = hnew(C, -0.5f, 0.5f, seed + 2), *dres = hnew(n, -1, 1, seed + 3),
          *dout = hnew(n, -1, 1, seed + 4), *nan = hnan(n);
    dt tx = dt_new(n, x), tw = dt_new(C, w), tbias = dt_new(C, bias), tdres = dt_new(n, dres),
       tdout = dt_new(n, dout), ty = dt_new(n, nan), tm = dt_new(N, nan), tr = dt_new(N, nan);
    dt fdx = dt_new(n, nan), udx = dt_new(n, nan), idx = dt_new(n, dres);
    ht_layernorm_forward(D, dt_view(ty), dt_view(tm), dt_view(tr), dt_view(tx), dt_view(tw),
                         dt_view(tbias), N, C);
    ht_residual_layernorm_backward_input(D, dt_view(fdx), dt_view(tdres), dt_view(tdout),
                                         dt_view(tx), dt_view(tw), dt_view(tm), dt_view(tr), N, C);
    ht_residual_layernorm_backward_input(D, dt_view(idx), dt_view(idx), dt_view(tdout),
                                         dt_view(tx), dt_view(tw), dt_view(tm), dt_view(tr), N, C);
    ht_residual_backward(D, dt_view(udx), ht_view_none(), dt_view(tdres), n, 0);
    ht_layernorm_backward_input(D, dt_view(udx), dt_view(tdout), dt_view(tx), dt_view(tw),
                                dt_view(tm), dt_view(tr), N, C, 1);
    float *got = malloc(n * 4), *unf = malloc(n * 4), *inpl = malloc(n * 4), *ref = malloc(n * 4);
    float *dw = malloc(C * 4), *db = malloc(C * 4);
    dt_get(fdx, got), dt_get(udx, unf), dt_get(idx, inpl);
    memcpy(ref, dres, n * 4);
    ref_layernorm_backward(ref, dw, db, dout, x, w, N, C, 1, 0);
    int same = !memcmp(got, unf, n * 4) && !memcmp(got, inpl, n * 4);
    double er = nerr(got, ref, n), ef = fd_err(got, x, dres, dout, w, N, C);
    int guards = dt_guards_ok(fdx) && dt_guards_ok(idx) && dt_guards_ok(tdres) &&
                 dt_guards_ok(tdout) && dt_guards_ok(tx) && dt_guards_ok(tw);
    tap_ok(same && er < TOL_LN && ef < 1e-3 && guards,
           "residual + LayerNorm backward fused, N=%d C=%d: bit for bit the unfused copy then "
           "add (also in place), err %.2e vs double, %.2e vs finite differences",
           N, C, er, ef);
    dt_free(tx), dt_free(tw), dt_free(tbias), dt_free(tdres), dt_free(tdout), dt_free(ty),
        dt_free(tm), dt_free(tr), dt_free(fdx), dt_free(udx), dt_free(idx);
    free(x), free(w), free(bias), free(dres), free(dout), free(nan), free(got), free(unf),
        free(inpl), free(ref), free(dw), free(db);
}

int main(void) {
    D = test_dev_open();
    dt_use(D);
    test_resln(3, 1, 1);
    test_resln(5, 15, 2);
    test_resln(4, 16, 3);
    test_resln(7, 17, 4);
    test_resln(37, 33, 5);
    test_resln(9, 770, 6);
    test_resln(64, 128, 7);
    /* not C = 1: LayerNorm of one element has no input gradient, and the kernel's product
     * rounding in w*dout - mean(w*dout) (contracted to an fma) is multiplied by
     * rstd = 1/sqrt(eps) = 316 there, 1e-5 relative; the unfused kernel does the same */
    test_resln_bwd(3, 2, 11);
    test_resln_bwd(5, 15, 12);
    test_resln_bwd(4, 16, 13);
    test_resln_bwd(7, 17, 14);
    test_resln_bwd(37, 33, 15);
    test_resln_bwd(3, 770, 16);
    test_resln_bwd(64, 128, 17);
    ht_dev_close(D);
    return tap_done();
}
