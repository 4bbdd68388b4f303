/* The tests' error measures (tap_max_relerr, tap_max_abserr, nerr, tap_worse) against an
 * element a kernel never wrote. The op tests fill outputs with NaN so that such an element
 * shows; a measure that keeps the worst error with `if (!(e <= worst)) worst = e` dropped the
 * NaN at the next finite error, so only a NaN in the last element failed a check. Here a real
 * kernel (gelu forward) runs on a NaN-filled output in two launches that leave one element
 * in the middle unwritten, and every measure must call the result a failure (+inf); the same
 * launch over the whole tensor must pass, so the failure is the missing element's alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "devtensor.h"
#include "nn/ops.h"
#include "ref.h"
#include "tap.h"
#include "testdev.h"

#define TOL 1e-5

/* The measure as the op tests had it: a NaN survives only as the last element. */
static double old_worst(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), 1e-30);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

static void test_worse(void) {
    double w = 0;
    w = tap_worse(w, 1e-7);
    w = tap_worse(w, NAN);
    double after_nan = w;
    w = tap_worse(w, 1e-9);
    w = tap_worse(w, 3.0);
    tap_ok(after_nan == INFINITY && w == INFINITY && tap_worse(NAN, 0) == INFINITY &&
               tap_worse(1e-3, 2e-3) == 2e-3 && tap_worse(2e-3, 1e-3) == 2e-3,
           "tap_worse: a NaN makes the worst error +inf and later finite errors keep it (got "
           "%g then %g)",
           after_nan, w);
}

int main(void) {
    ht_dev *d = test_dev_open();
    dt_use(d);
    test_worse();

    enum { N = 1003 };
    float *x = hnew(N, -3, 3, 5), *nan = hnan(N), y[N], yr[N];
    for (int i = 0; i < N; i++)
        yr[i] = (float)ref_act(HT_ACT_GELU, x[i]);
    dt tx = dt_new(N, x), ty = dt_new(N, nan);

    /* positive control: the whole tensor written, every measure small */
    ht_act_forward(d, HT_ACT_GELU, dt_view(ty), dt_view(tx), N);
    dt_get(ty, y);
    double r = tap_max_relerr(y, yr, N, 1e-6), a = tap_max_abserr(y, yr, N), e = nerr(y, yr, N);
    tap_ok(r < TOL && a < TOL && e < TOL,
           "gelu n=%d, every element written: rel %.2e abs %.2e norm %.2e < %g", N, r, a, e, TOL);

    /* negative controls: one element left NaN, at the start, in the middle, at the end */
    const size_t skips[] = {0, 500, N - 1};
    for (int k = 0; k < 3; k++) {
        size_t s = skips[k];
        dt_set(ty, nan);
        if (s > 0) ht_act_forward(d, HT_ACT_GELU, dt_view(ty), dt_view(tx), s);
        if (s + 1 < N)
            ht_act_forward(d, HT_ACT_GELU, dt_view_at(ty, s + 1), dt_view_at(tx, s + 1),
                           N - s - 1);
        dt_get(ty, y);
        int only = isnan(y[s]);
        for (size_t i = 0; i < N; i++)
            only &= i == s || !isnan(y[i]);
        r = tap_max_relerr(y, yr, N, 1e-6), a = tap_max_abserr(y, yr, N), e = nerr(y, yr, N);
        double old = old_worst(y, yr, N);
        tap_ok(only && r == INFINITY && a == INFINITY && e == INFINITY && !(r < TOL) &&
                   r > TOL,
               "gelu launched around element %zu of %d (left NaN: %s): rel %g abs %g norm %g, "
               "all +inf: a failure",
               s, N, only ? "it alone" : "NOT it alone", r, a, e);
        /* the old measure on the same data: it loses the NaN unless it is the last element */
        if (s < N - 1)
            tap_ok(old < TOL, "the old `if (!(e <= worst))` measure passed it (%.2e < %g): the "
                              "bug this file guards against",
                   old, TOL);
    }
    dt_free(tx), dt_free(ty);
    free(x), free(nan);
    ht_dev_close(d);
    return tap_done();
}
