/* Row-major SGEMM on CPU devices with the register-tiled kernel of cl/gemm.cl (the design of
 * conv_gemm in cl/conv.cl) instead of CLBlast: no padding or copies except B^T, which is
 * transposed into a per-device workspace so the kernel can load B's rows as float16.
 * Chosen by ht_sgemm_at (blas.c) for devices of type cpu; ht_dev_opts.gemm (default from
 * $HT_GEMM) forces either path (tests, benchmarks, the CLBlast tuner). Each element's sum
 * over k runs in order. */
#include "ocl/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* Whether every index the kernels compute fits in an int. */
static int fits_int(size_t a, size_t b) { return a <= (size_t)INT_MAX && b <= (size_t)INT_MAX - a; }

int ht_gemm_tiled_wanted(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                         const ht_buf *a, const ht_buf *b, const ht_buf *c) {
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k;
    if (d->gemm == HT_GEMM_CLBLAST) return 0;
    if (d->gemm == HT_GEMM_AUTO && strcmp(d->info.type, "cpu")) return 0;
    size_t fa = a->size / sizeof(float), fb = b->size / sizeof(float), fc = c->size / sizeof(float);
    size_t ws = k * n;
    return fits_int(fa, 16) && fits_int(fb, 16) && fits_int(fc, 16) && fits_int(ws, 16);
}

static ht_buf *workspace(ht_dev *d, size_t floats) {
    size_t bytes = floats * sizeof(float);
    if (!d->gemm_ws || d->gemm_ws->size < bytes) {
        if (d->gemm_ws) ht_buf_free(d->gemm_ws);
        d->gemm_ws = ht_buf_new(d, bytes, "gemm workspace");
    }
    return d->gemm_ws;
}

void ht_gemm_tiled(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                   const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                   size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                   int line) {
    const ht_buf *bb = b;
    size_t bo = b_off, ldbb = ldb;
    if (trans_b && k > 0) {
        /* B is stored (n, k): transpose it into (k, n). */
        ht_buf *ws = workspace(d, k * n);
        size_t gws[2] = {(k + 15) / 16, (n + 15) / 16};
        ht_launch_at(d, "gemm_transpose", 2, gws, NULL, 6,
                     (ht_arg[]){HT_BUF(ws), HT_BUF(b), HT_INT(b_off), HT_INT(ldb), HT_INT(n),
                                HT_INT(k)},
                     file, line);
        bb = ws, bo = 0, ldbb = n;
    }
    size_t sam = trans_a ? 1 : lda, sal = trans_a ? lda : 1;
    size_t g1 = (m + 5) / 6, l1 = g1 < 16 ? g1 : 16, cap = ht_kernel_max_wg(d, "gemm_tiled");
    if (l1 > cap) l1 = cap;
    size_t gws[2] = {(n + 15) / 16, (g1 + l1 - 1) / l1 * l1}, lws[2] = {1, l1};
    /* profiled as CLBlast's calls are: hetprof reads the GEMM shapes from these names */
    char name[96];
    snprintf(name, sizeof name, "sgemm %c%c %zux%zux%zu", trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
             m, n, k);
    d->prof_name = name;
    ht_launch_at(d, "gemm_tiled", 2, gws, lws, 15,
                 (ht_arg[]){HT_BUF(c), HT_INT(c_off), HT_INT(ldc), HT_BUF(a), HT_INT(a_off),
                            HT_INT(sam), HT_INT(sal), HT_BUF(bb), HT_INT(bo), HT_INT(ldbb),
                            HT_INT(m), HT_INT(n), HT_INT(k), HT_FLOAT(alpha), HT_FLOAT(beta)},
                 file, line);
    d->prof_name = NULL;
}
