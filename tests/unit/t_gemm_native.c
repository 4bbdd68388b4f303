/* SGEMM by OpenBLAS in a native kernel (src/ocl/native.c), forced (HT_GEMM_NATIVE) on a
 * device that runs native kernels, checked against a plain-C reference in double on odd
 * shapes: all four transposes, offsets into A, B and C, leading dimensions wider than the
 * operands (the pad must stay untouched, as must C before its offset), alpha and beta, beta
 * = 0 over a NaN-filled C (never read), k = 0 (C = beta C), and the MLP's skinny shapes
 * (n = 10, k = 10). The device's count of native launches proves that the native path, not
 * CLBlast or our kernels, computed each product. On a device without native kernels
 * (rusticl: tests/rusticl.t runs this file there too) forcing the path is refused at open
 * (exit 2's error, naming the device), and the device says it has none. Which
 * implementations run native kernels is known: PoCL's CPU devices do, rusticl does not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "ocl/ocl.h"
#include "ref.h"
#include "tap.h"
#include "testdev.h"

/* One product with A, B and C at float offsets oa, ob, oc in their buffers and leading
 * dimensions pad wider than the operands. */
static void check(ht_dev *d, int ta, int tb, int m, int n, int k, float alpha, float beta, int pad,
                  size_t oa, size_t ob, size_t oc) {
    ref_gemm_case g = ref_gemm_case_new(ta, tb, m, n, k, alpha, beta, pad, oa, ob, oc);
    ht_buf *ba = ht_buf_new(d, g.na * 4, "A"), *bb = ht_buf_new(d, g.nb * 4, "B"),
           *bc = ht_buf_new(d, g.nc * 4, "C");
    ht_buf_write(d, ba, 0, g.na * 4, g.a);
    ht_buf_write(d, bb, 0, g.nb * 4, g.b);
    ht_buf_write(d, bc, 0, g.nc * 4, g.c0);
    long before = ht_dev_native_calls(d);
    ht_sgemm(d, ta, tb, m, n, k, alpha, ba, oa, g.lda, bb, ob, g.ldb, beta, bc, oc, g.ldc);
    ht_buf_read(d, bc, 0, g.nc * 4, g.c);
    long calls = ht_dev_native_calls(d) - before;
    ref_gemm_diff e = ref_gemm_check(&g);
    tap_ok(!e.bad && !e.touched && calls == 1,
           "native %c%c m=%d n=%d k=%d alpha=%g beta=%g pad %d offsets %zu/%zu/%zu: %zu of %zu "
           "outside %.1e (worst inside %.2e), %zu outside C's window changed, %ld native calls",
           ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, beta, pad, oa, ob, oc, e.bad,
           (size_t)m * n, e.tol, e.worst, e.touched, calls);
    if (e.bad)
        tap_diag("first bad element %zu: got %g, expected %g", e.first, (double)g.c[e.first],
                 (double)g.r[e.first]);
    ht_buf_free(ba), ht_buf_free(bb), ht_buf_free(bc);
    ref_gemm_case_free(&g);
}

int main(void) {
    int idx = test_dev_index();
    ht_dev_opts o = ht_dev_opts_default();
    o.gemm = HT_GEMM_TILED; /* opens anywhere, no probe */
    ht_dev *d;
    ht_exit_on_error(ht_dev_open(&d, idx, &o));
    const ht_devinfo *info = ht_dev_info(d);
    printf("# device: %s (%s)\n", info->name, info->platform);
    int pocl = strstr(info->platform, "Portable Computing Language") != NULL;
    int rusticl = strstr(info->platform, "rusticl") != NULL;
    int has = ht_dev_has_native(d);
    tap_ok(pocl ? has : rusticl ? !has : 1, "native kernels on '%s': %s (PoCL's CPU device runs "
           "them, rusticl does not)", info->platform, has ? "yes" : "no");
    ht_dev_close(d);
    o.gemm = HT_GEMM_NATIVE;
    int rc = ht_dev_open(&d, idx, &o);
    if (!has) {
        tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "HT_GEMM=native") &&
                   strstr(ht_errmsg(), info->name),
               "forcing the native path where there is none is refused at open: %s",
               ht_errmsg());
        ht_error_clear();
        return tap_done();
    }
    ht_exit_on_error(rc);
    tap_ok(ht_dev_gemm_choice(d)->path == HT_GEMM_NATIVE, "forced: the device runs %s",
           ht_gemm_path_name(ht_dev_gemm_choice(d)->path));
    /* every transpose at partial tiles, one row, one column, k = 1 */
    for (int i = 0; i < ref_gemm_nshapes; i++) {
        const ref_gemm_shape *s = &ref_gemm_shapes[i];
        check(d, s->ta, s->tb, s->m, s->n, s->k, s->alpha, s->beta, s->pad, s->oa, s->ob, s->oc);
    }
    /* the MLP's skinny products at batch 64: n = 10 forward, k = 10 input gradient, the
     * 10-row weight gradient; and a product big enough for OpenBLAS to split over threads */
    check(d, 0, 1, 64, 10, 300, 1.0f, 0.0f, 0, 3, 5, 1);
    check(d, 0, 0, 64, 300, 10, 1.0f, 0.0f, 0, 0, 0, 0);
    check(d, 1, 0, 10, 300, 64, 1.0f, 1.0f, 0, 1, 1, 1);
    check(d, 1, 0, 200, 300, 150, 0.5f, 0.0f, 1, 7, 0, 3);
    /* k = 0: C = beta C */
    check(d, 0, 0, 6, 20, 0, 1.0f, 0.5f, 1, 0, 0, 2);
    check(d, 0, 0, 6, 20, 0, 1.0f, 0.0f, 1, 0, 0, 2);
    ht_dev_close(d);
    return tap_done();
}
