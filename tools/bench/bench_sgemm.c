/* SGEMM GFLOP/s through hettrain's ht_sgemm (the packed kernels of cl/gemm.cl on CPU
 * devices, CLBlast elsewhere or with HT_GEMM=clblast, with the parameters ht_dev_open
 * applies or those of --tuning FILE) beside OpenBLAS's cblas_sgemm on the same host, at
 * 1024^3, at the MLP's real shapes (784-1024-1024-10, batch 256: forward,
 * input-gradient, weight-gradient) and at the GPTs' (GPT-small and the 85M GPT; the same list
 * as tools/bench/torch_peer.py sgemm).
 * Each repetition times one call of each library back to back (ours waits for the
 * device), and the best and the median of N are printed: on a shared machine the minimum is
 * the figure least disturbed by other processes, but for a 0.1-1 ms product it is also a
 * lucky draw of how fast PoCL's worker threads woke up, which the median is not; the load
 * average is printed before and after. "queued ms" is the mean of N calls enqueued back to
 * back with one wait at the end, as a training step issues them (no wake-up between calls);
 * "cpu ms" the median CPU time of the process a call (PoCL's worker threads and ours), which
 * other processes on a loaded machine disturb less than the wall time.
 * Before the shapes, the round trip of an empty kernel (enqueue, run, clFinish: what every
 * product pays once on top of its kernels) with 1 work-item and with 64 work-groups.
 * --offset F places every operand F floats into its buffer, as the model's views into
 * its parameter and activation arenas are (0: operands at the start of their buffers).
 * --only S runs the shapes whose name contains S; --kinds times the tiled path's three ways
 * (packed, rows, direct: src/ocl/gemm.c) against each other instead; --profile prints the
 * per-kernel device times of our calls at the end (e.g. packing vs the GEMM kernel of the
 * tiled path).
 * usage: bench_sgemm [--device SEL] [--reps N] [--offset F] [--tuning FILE] [--only S]
 *                    [--profile] [--kinds] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    /* GPT-small (conf/shakespeare-gpt.cfg: d 128, T 64, batch 16: 1024 rows) */
    {"gpt qkv fwd", 0, 1, 1024, 384, 128},
    {"gpt qkv dX", 0, 0, 1024, 128, 384},
    {"gpt qkv dW", 1, 0, 384, 128, 1024},
    {"gpt proj fwd", 0, 1, 1024, 128, 128},
    {"gpt fc fwd", 0, 1, 1024, 512, 128},
    {"gpt fc2 fwd", 0, 1, 1024, 128, 512},
    {"gpt fc2 dX", 0, 0, 1024, 512, 128},
    {"gpt fc2 dW", 1, 0, 128, 512, 1024},
    {"gpt head fwd", 0, 1, 1024, 256, 128},
    /* the 85M GPT (d 768, T 256, batch 8: 2048 rows, 256-token vocabulary) */
    {"g85 qkv fwd", 0, 1, 2048, 2304, 768},
    {"g85 proj fwd", 0, 1, 2048, 768, 768},
    {"g85 fc fwd", 0, 1, 2048, 3072, 768},
    {"g85 fc2 fwd", 0, 1, 2048, 768, 3072},
    {"g85 fc2 dX", 0, 0, 2048, 3072, 768},
    {"g85 fc dW", 1, 0, 3072, 768, 2048},
    {"g85 head fwd", 0, 1, 2048, 256, 768},
    {"g85 head dW", 1, 0, 256, 768, 2048},
};

static void loadavg(const char *when) {
    FILE *f = fopen("/proc/loadavg", "r");
    char line[128] = "?";
    if (f) {
        if (!fgets(line, sizeof line, f)) ht_strlcpy(line, "?\n", sizeof line);
        fclose(f);
    }
    printf("load average %s: %s", when, line);
}

static void call_ours(ht_dev *d, const shape *s, ht_buf *a, ht_buf *b, ht_buf *c, size_t off) {
    size_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    ht_sgemm(d, s->ta, s->tb, s->m, s->n, s->k, 1, a, off, lda, b, off, ldb, 0, c, off, s->n);
}

/* CPU seconds of this process (all its threads: PoCL's workers do the products). */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Wall seconds of one call and its wait; its CPU seconds in *cpu. */
static double time_ours(ht_dev *d, const shape *s, ht_buf *a, ht_buf *b, ht_buf *c, size_t off,
                        double *cpu) {
    double c0 = cpu_now(), t0 = ht_now();
    call_ours(d, s, a, b, c, off);
    ht_dev_finish(d);
    double t = ht_now() - t0;
    *cpu = cpu_now() - c0;
    return t;
}

/* Mean seconds a call of `reps` calls enqueued back to back, one wait at the end. */
static double time_queued(ht_dev *d, const shape *s, ht_buf *a, ht_buf *b, ht_buf *c,
                          size_t off, int reps) {
    ht_dev_finish(d);
    double t0 = ht_now();
    for (int r = 0; r < reps; r++) call_ours(d, s, a, b, c, off);
    ht_dev_finish(d);
    return (ht_now() - t0) / reps;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The median of t[0..n-1] (sorts t). */
static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Best and median microseconds of an empty kernel's enqueue + clFinish over `groups`
 * work-groups of one work-item, and the median CPU microseconds of the process for it (t,
 * u: reps doubles of scratch). */
static void launch_trip(ht_dev *d, size_t groups, int reps, double *t, double *u) {
    size_t one = 1;
    ht_launch(d, "prof_empty", 1, &groups, &one, HT_INT(0));
    ht_dev_finish(d);
    for (int r = 0; r < reps; r++) {
        double c0 = cpu_now(), t0 = ht_now();
        ht_launch(d, "prof_empty", 1, &groups, &one, HT_INT(0));
        ht_dev_finish(d);
        t[r] = (ht_now() - t0) * 1e6;
        u[r] = (cpu_now() - c0) * 1e6;
    }
    double best = t[0];
    for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
    printf("empty kernel, %zu work-group%s: enqueue + finish best %.1f us, median %.1f us "
           "(CPU %.1f us)\n",
           groups, groups > 1 ? "s" : "", best, median(t, reps), median(u, reps));
}

#ifdef HT_HAVE_OPENBLAS
static double time_blas(const shape *s, const float *a, const float *b, float *c) {
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    enum CBLAS_TRANSPOSE ta = s->ta ? CblasTrans : CblasNoTrans,
                         tb = s->tb ? CblasTrans : CblasNoTrans;
    double t0 = ht_now();
    cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1, a, lda, b, ldb, 0, c, s->n);
    return ht_now() - t0;
}
#endif

/* --kinds: the three ways of the tiled path (ht_gemm_tiled_force) interleaved call by call,
 * so that a loaded machine's slow moments fall on each alike; median wall and CPU ms. */
static void compare_kinds(ht_dev *d, const shape *s, ht_buf *a, ht_buf *b, ht_buf *c, size_t off,
                          int reps) {
    static const char *const name[] = {"auto", "packed", "rows", "direct"};
    double *t = ht_xmalloc(4 * (size_t)reps * sizeof *t),
           *u = ht_xmalloc(4 * (size_t)reps * sizeof *u);
    int nk = s->tb ? 3 : 4;
    for (int kind = 0; kind < nk; kind++) {
        ht_gemm_tiled_force(d, kind);
        time_ours(d, s, a, b, c, off, &u[0]);
    }
    for (int r = 0; r < reps; r++)
        for (int kind = 0; kind < nk; kind++) {
            ht_gemm_tiled_force(d, kind);
            t[kind * reps + r] = time_ours(d, s, a, b, c, off, &u[kind * reps + r]);
        }
    ht_gemm_tiled_force(d, HT_TILED_AUTO);
    printf("%-18s %c%c %5d %5d %5d  median ms (cpu ms):", s->what, s->ta ? 'T' : 'N',
           s->tb ? 'T' : 'N', s->m, s->n, s->k);
    for (int kind = 0; kind < nk; kind++)
        printf(" %s %.3f (%.3f)", name[kind], median(t + kind * reps, reps) * 1e3,
               median(u + kind * reps, reps) * 1e3);
    printf("\n");
    fflush(stdout);
    free(t), free(u);
}

/* What a row needs: the device, its operand buffers at float offset off and their host copies
 * (OpenBLAS's operands and C), and room for reps timings (ours, OpenBLAS's, our CPU time). */
typedef struct {
    ht_dev *d;
    ht_buf *a, *b, *c;
    float *ha, *hb, *hc, *got;
    size_t off;
    int reps;
    double *tt, *tb, *tc;
} bench;

/* One shape's row: best and median of reps calls beside OpenBLAS's, the queued mean, the CPU
 * time and the largest difference to OpenBLAS. */
static void one_shape(const bench *x, const shape *s) {
    double flop = 2.0 * s->m * s->n * s->k;
    /* warm-up (CLBlast compiles its kernels on first use) */
    double cpu;
    time_ours(x->d, s, x->a, x->b, x->c, x->off, &cpu);
    double best = 1e30, best_blas = 1e30, err = 0;
#ifdef HT_HAVE_OPENBLAS
    time_blas(s, x->ha + x->off, x->hb + x->off, x->hc + x->off);
#endif
    for (int r = 0; r < x->reps; r++) {
        double t = x->tt[r] = time_ours(x->d, s, x->a, x->b, x->c, x->off, &x->tc[r]);
        if (t < best) best = t;
        x->tb[r] = 1e30;
#ifdef HT_HAVE_OPENBLAS
        t = x->tb[r] = time_blas(s, x->ha + x->off, x->hb + x->off, x->hc + x->off);
        if (t < best_blas) best_blas = t;
#endif
    }
    double med = median(x->tt, x->reps), med_blas = median(x->tb, x->reps);
    double med_cpu = median(x->tc, x->reps);
    double queued = time_queued(x->d, s, x->a, x->b, x->c, x->off, x->reps);
#ifdef HT_HAVE_OPENBLAS
    /* largest difference to OpenBLAS, relative to the largest |C| entry */
    size_t nc = (size_t)s->m * s->n;
    ht_buf_read(x->d, x->c, x->off * 4, nc * 4, x->got);
    double cmax = 0;
    for (size_t j = 0; j < nc; j++) {
        double e = fabs((double)x->got[j] - x->hc[x->off + j]);
        if (e > err) err = e;
        if (fabs(x->hc[x->off + j]) > cmax) cmax = fabs(x->hc[x->off + j]);
    }
    err = cmax > 0 ? err / cmax : err;
    double blas = flop / best_blas * 1e-9;
#else
    double blas = 0;
#endif
    double ours = flop / best * 1e-9;
    printf("%-18s %c%c %5d %5d %5d %9.3f %12.1f %12.1f %7.2f %9.1e %8.3f %8.1f %8.1f %9.3f "
           "%7.3f\n",
           s->what, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->m, s->n, s->k, best * 1e3, ours,
           blas, blas > 0 ? ours / blas : 0, err, med * 1e3, flop / med * 1e-9,
           blas > 0 ? flop / med_blas * 1e-9 : 0, queued * 1e3, med_cpu * 1e3);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *sel = "", *tuning = NULL, *only = NULL;
    int reps = 10, profile = 0, kinds = 0;
    long offset = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--offset") && i + 1 < argc) offset = atol(argv[++i]);
        else if (!strcmp(argv[i], "--tuning") && i + 1 < argc) tuning = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--kinds")) kinds = 1;
        else ht_die(HT_EINPUT, "usage: bench_sgemm [--device SEL] [--reps N] [--offset F] "
                               "[--tuning FILE] [--only S] [--profile] [--kinds]");
    }
    if (reps < 1 || offset < 0 || offset > (1L << 24))
        ht_die(HT_EINPUT, "--reps must be >= 1 and --offset in 0..16777216 floats");
    int idx;
    ht_exit_on_error(ht_ocl_select(sel, &idx));
    ht_dev_opts opts = ht_dev_opts_default();
    opts.tuning = tuning;
    opts.profile = profile;
    ht_dev *d;
    ht_exit_on_error(ht_dev_open(&d, idx, &opts));
    size_t off = (size_t)offset, maxn = 0; /* the largest operand of any shape */
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        size_t m = (size_t)SHAPES[i].m, n = (size_t)SHAPES[i].n, k = (size_t)SHAPES[i].k;
        size_t big = m * k > k * n ? m * k : k * n;
        maxn = big > maxn ? big : maxn, maxn = m * n > maxn ? m * n : maxn;
    }
    size_t total = maxn + off;
    float *ha = ht_xcalloc(total, 4), *hb = ht_xcalloc(total, 4), *hc = ht_xcalloc(total, 4);
    float *got = ht_xmalloc(total * 4);
    for (size_t i = 0; i < maxn; i++) {
        ha[off + i] = ht_rng_uniform(1, i) - 0.5f;
        hb[off + i] = ht_rng_uniform(2, i) - 0.5f;
    }
    ht_buf *a = ht_buf_new(d, total * 4, "A"), *b = ht_buf_new(d, total * 4, "B"),
           *c = ht_buf_new(d, total * 4, "C");
    ht_buf_write(d, a, 0, total * 4, ha);
    ht_buf_write(d, b, 0, total * 4, hb);
    printf("device: %s (%s)%s%s, operands at offset %zu floats, best and median of %d\n",
           ht_dev_info(d)->name, ht_dev_info(d)->platform, tuning ? ", tuning " : "",
           tuning ? tuning : "", off, reps);
    loadavg("before");
    double *tt = ht_xmalloc((size_t)reps * sizeof *tt), *tb = ht_xmalloc((size_t)reps * sizeof *tb),
           *tc = ht_xmalloc((size_t)reps * sizeof *tc);
    const bench x = {d, a, b, c, ha, hb, hc, got, off, reps, tt, tb, tc};
    launch_trip(d, 1, reps, tt, tc);
    launch_trip(d, 64, reps, tt, tc);
    /* best first (the columns scripts read: ms, GF/s, OpenBLAS GF/s), then the medians */
    printf("%-18s %2s %5s %5s %5s %9s %12s %12s %7s %9s %8s %8s %8s %9s %7s\n", "shape", "op", "M",
           "N", "K", "ours ms", "hettrain GF/s", "OpenBLAS GF/s", "ratio", "max err", "med ms",
           "med GF/s", "BLAS med", "queued ms", "cpu ms");
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        const shape *s = &SHAPES[i];
        if (only && !strstr(s->what, only)) continue;
        if (kinds) {
            compare_kinds(d, s, a, b, c, off, reps);
            continue;
        }
        one_shape(&x, s);
    }
    loadavg("after");
    if (profile) ht_dev_profile_report(d, stdout, NULL);
    ht_buf_free(a), ht_buf_free(b), ht_buf_free(c);
    ht_dev_close(d);
    free(ha), free(hb), free(hc), free(got), free(tt), free(tb), free(tc);
    return 0;
}
