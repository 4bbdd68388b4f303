/* SGEMM GFLOP/s through hettrain's CLBlast path (with the parameters ht_dev_open
 * applies) beside OpenBLAS's cblas_sgemm on the same host, at 1024^3 and at the MLP's
 * real shapes (784-1024-1024-10, batch 256: forward, input-gradient, weight-gradient).
 * usage: bench_sgemm [--device SEL] [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "ocl/ocl.h"
#ifdef HT_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef struct { const char *what; int ta, tb, m, n, k; } shape;

static const shape SHAPES[] = {
    {"square 1024^3", 0, 0, 1024, 1024, 1024},
    {"fc1 fwd  x.W1^T", 0, 1, 256, 1024, 784},
    {"fc2 fwd  h.W2^T", 0, 1, 256, 1024, 1024},
    {"fc3 fwd  h.W3^T", 0, 1, 256, 10, 1024},
    {"fc3 dX   dy.W3", 0, 0, 256, 1024, 10},
    {"fc2 dX   dy.W2", 0, 0, 256, 1024, 1024},
    {"fc1 dW   dy^T.x", 1, 0, 1024, 784, 256},
    {"fc2 dW   dy^T.h", 1, 0, 1024, 1024, 256},
    {"fc3 dW   dy^T.h", 1, 0, 10, 1024, 256},
};

static double time_ours(ht_dev *d, const shape *s, ht_buf *a, ht_buf *b, ht_buf *c, int reps) {
    size_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    ht_sgemm(d, s->ta, s->tb, s->m, s->n, s->k, 1, a, 0, lda, b, 0, ldb, 0, c, 0, s->n); /* warm-up */
    ht_dev_finish(d);
    double t0 = ht_now();
    for (int r = 0; r < reps; r++)
        ht_sgemm(d, s->ta, s->tb, s->m, s->n, s->k, 1, a, 0, lda, b, 0, ldb, 0, c, 0, s->n);
    ht_dev_finish(d);
    return (ht_now() - t0) / reps;
}

#ifdef HT_HAVE_OPENBLAS
static double time_blas(const shape *s, const float *a, const float *b, float *c, int reps) {
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    enum CBLAS_TRANSPOSE ta = s->ta ? CblasTrans : CblasNoTrans, tb = s->tb ? CblasTrans : CblasNoTrans;
    cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1, a, lda, b, ldb, 0, c, s->n);
    double t0 = ht_now();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1, a, lda, b, ldb, 0, c, s->n);
    return (ht_now() - t0) / reps;
}
#endif

int main(int argc, char **argv) {
    const char *sel = "";
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else ht_die(HT_EINPUT, "usage: bench_sgemm [--device SEL] [--reps N]");
    }
    int idx;
    ht_exit_on_error(ht_ocl_select(sel, &idx));
    ht_dev *d;
    ht_exit_on_error(ht_dev_open(&d, idx, NULL));
    size_t maxn = 1024 * 1024;
    float *ha = malloc(maxn * 4), *hb = malloc(maxn * 4), *hc = malloc(maxn * 4);
    for (size_t i = 0; i < maxn; i++) {
        ha[i] = ht_rng_uniform(1, i) - 0.5f;
        hb[i] = ht_rng_uniform(2, i) - 0.5f;
    }
    ht_buf *a = ht_buf_new(d, maxn * 4, "A"), *b = ht_buf_new(d, maxn * 4, "B"),
           *c = ht_buf_new(d, maxn * 4, "C");
    ht_buf_write(d, a, 0, maxn * 4, ha);
    ht_buf_write(d, b, 0, maxn * 4, hb);
    printf("device: %s (%s)\n", ht_dev_info(d)->name, ht_dev_info(d)->platform);
    printf("%-18s %2s %5s %5s %5s %12s %12s %7s\n", "shape", "op", "M", "N", "K",
           "hettrain GF/s", "OpenBLAS GF/s", "ratio");
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        const shape *s = &SHAPES[i];
        double flop = 2.0 * s->m * s->n * s->k;
        int r = flop > 1e9 ? reps / 4 + 1 : reps;
        double ours = flop / time_ours(d, s, a, b, c, r) * 1e-9;
#ifdef HT_HAVE_OPENBLAS
        double blas = flop / time_blas(s, ha, hb, hc, r) * 1e-9;
#else
        double blas = 0;
#endif
        printf("%-18s %c%c %5d %5d %5d %12.1f %12.1f %7.2f\n", s->what, s->ta ? 'T' : 'N',
               s->tb ? 'T' : 'N', s->m, s->n, s->k, ours, blas, blas > 0 ? ours / blas : 0);
        fflush(stdout);
    }
    ht_buf_free(a), ht_buf_free(b), ht_buf_free(c);
    ht_dev_close(d);
    free(ha), free(hb), free(hc);
    return 0;
}
