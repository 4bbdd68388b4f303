/* The residual add fused with LayerNorm (ht_residual_layernorm_forward, cl/resln.cl) against the
 * unfused ops (ht_residual_forward then ht_layernorm_forward: bit for bit, the same float
 * arithmetic in the same order), the sum by hand (exact: one float add) and
 * tests/lib/ref_tf.c's double LayerNorm of that sum; on odd widths (C = 1, 15, 16, 17, 33, 770:
 * float16 chunks and scalar tails) and several row counts, NaN-filled outputs (every element
 * written) and guard cells around every tensor. */
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
    ht_dev_close(D);
    return tap_done();
}
