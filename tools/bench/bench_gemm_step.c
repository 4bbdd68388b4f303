/* The 85M GPT's products (12 x 768, T 256, batch 8: 2048 rows) through ht_sgemm three ways,
 * interleaved in every round so that a shared machine's load falls on all of them alike:
 *  - fresh: A, B, C in buffers of their own, at offset 0, run back to back (what
 *    bench_sgemm measures);
 *  - model: the weight at its real offset in an 85.6M-float parameter buffer (block 6's
 *    tensor, offsets from ht_model_gpt_desc), the activations and the result in one large
 *    arena at odd offsets, as the training step's views are;
 *  - cold: as model, but a 256 MB device copy runs before each product, as the step's other
 *    kernels (attention, GELU, LayerNorm, AdamW over 1 GB of state) stand between two
 *    products and leave nothing of the operands in the caches.
 * Prints each way's median and best wall time a call (packing + product + finish), its
 * median CPU time (all threads), and the medians' ratios to fresh (> 1: faster than fresh). Why: the step's products ran at 91-105 GFLOP/s in one profile
 * against 146-167 alone; this says which of these (offsets/alignment, caches) costs what.
 * --profile opens the device with profiling (an event a launch, as hettrain --profile), to
 * compare with a run without.
 *   usage: bench_gemm_step [--device SEL] [--rounds N] [--only S] [--profile] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "nn/model.h"
#include "ocl/ocl.h"

typedef struct { const char *what, *tensor; int ta, tb, m, n, k; } shape;

/* forward NT (B,out,in), weight gradient TN (out,in,B), input gradient NN (B,in,out) */
static const shape SHAPES[] = {
    {"qkv fwd", "h6.attn.qkv.weight", 0, 1, 2048, 2304, 768},
    {"fc fwd", "h6.mlp.fc.weight", 0, 1, 2048, 3072, 768},
    {"fc2 fwd", "h6.mlp.proj.weight", 0, 1, 2048, 768, 3072},
    {"fc dX", "h6.mlp.fc.weight", 0, 0, 2048, 768, 3072},
    {"fc2 dX", "h6.mlp.proj.weight", 0, 0, 2048, 3072, 768},
    {"fc dW", "h6.mlp.fc.weight", 1, 0, 3072, 768, 2048},
    {"fc2 dW", "h6.mlp.proj.weight", 1, 0, 768, 3072, 2048},
};
#define NWAY 3
static const char *WAYS[NWAY] = {"fresh", "model", "cold"};
#define SWEEP (256u << 20)

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The parameter offset of `name` in the 85M GPT's flat buffer. */
static size_t param_off(const char *name) {
    ht_model m;
    ht_exit_on_error(ht_model_gpt_desc(&m, 256, 256, 12, 768, 12, 0.0f, 8, 0));
    int n = ht_model_param_tensors(&m, NULL, 0);
    ht_param_tensor *t = ht_xmalloc((size_t)n * sizeof *t);
    ht_model_param_tensors(&m, t, n);
    size_t off = (size_t)-1;
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) off = t[i].off;
    free(t);
    ht_model_free(&m);
    if (off == (size_t)-1) ht_die(HT_ERUNTIME, "no tensor '%s' in the 85M GPT", name);
    return off;
}

/* CPU seconds of this process, all threads (PoCL's workers): on a machine loaded past its
 * cores the wall time mostly measures the wait for a core, the CPU time the work done. */
static double cpu_now(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static double once(ht_dev *d, const shape *s, ht_buf *a, size_t ao, ht_buf *b, size_t bo,
                   ht_buf *c, size_t co, double *cpu) {
    size_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    double t0 = ht_now(), c0 = cpu_now();
    ht_sgemm(d, s->ta, s->tb, s->m, s->n, s->k, 1, a, ao, lda, b, bo, ldb, 0, c, co, s->n);
    ht_dev_finish(d);
    *cpu = cpu_now() - c0;
    return ht_now() - t0;
}

int main(int argc, char **argv) {
    const char *sel = "", *only = NULL;
    int rounds = 5, profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else ht_die(HT_EINPUT,
                    "usage: bench_gemm_step [--device SEL] [--rounds N] [--only S] [--profile]");
    }
    if (rounds < 1) ht_die(HT_EINPUT, "--rounds must be >= 1");
    int idx;
    ht_exit_on_error(ht_ocl_select(sel, &idx));
    ht_dev_opts opts = ht_dev_opts_default();
    opts.profile = profile;
    ht_dev *d;
    ht_exit_on_error(ht_dev_open(&d, idx, &opts));
    const size_t big = 2048 * 3072, nparams = 85646080, arena = 4 * big + 64;
    float *h = ht_xmalloc(big * sizeof *h);
    for (size_t i = 0; i < big; i++)
        h[i] = ht_rng_uniform(1, i) - 0.5f;
    ht_buf *fa = ht_buf_new(d, big * 4, "A"), *fb = ht_buf_new(d, big * 4, "B"),
           *fc = ht_buf_new(d, big * 4, "C");
    ht_buf *par = ht_buf_new(d, nparams * 4, "params"), *act = ht_buf_new(d, arena * 4, "acts");
    ht_buf *s0 = ht_buf_new(d, SWEEP, "sweep src"), *s1 = ht_buf_new(d, SWEEP, "sweep dst");
    ht_buf_write(d, fa, 0, big * 4, h), ht_buf_write(d, fb, 0, big * 4, h);
    ht_buf_zero(d, s0, 0, SWEEP);
    /* activations at odd offsets one operand apart in the arena, as the model's views */
    const size_t x1 = 5, x2 = big + 7, x3 = 2 * big + 9;
    ht_buf_write(d, act, x1 * 4, big * 4, h), ht_buf_write(d, act, x2 * 4, big * 4, h);
    printf("profiling %s; load average before: ", profile ? "on" : "off");
    fflush(stdout);
    if (system("cut -d' ' -f1-3 /proc/loadavg") != 0) printf("?\n");
    printf("%-8s %2s %5s %5s %5s %10s | %s\n", "shape", "op", "M", "N", "K", "weight off",
           "a way: median wall ms (best) GFLOP/s, median CPU ms; ratios of medians to fresh");
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        const shape *s = &SHAPES[i];
        if (only && !strstr(s->what, only)) continue;
        size_t wo = param_off(s->tensor);
        size_t wfl = (size_t)s->n * s->k; /* the weight: B of fwd/dX, the other two vary */
        if (s->ta) wfl = (size_t)s->m * s->n; /* dW: C is the weight */
        ht_buf_write(d, par, wo * 4, wfl * 4, h);
        double *t = ht_xmalloc((size_t)rounds * NWAY * sizeof *t),
               *u = ht_xmalloc((size_t)rounds * NWAY * sizeof *u);
        for (int r = -1; r < rounds; r++) /* round -1 warms up (workspace, compiles) */
            for (int w = 0; w < NWAY; w++) {
                if (w == 2) ht_buf_copy(d, s1, 0, s0, 0, SWEEP), ht_dev_finish(d);
                double x, cx;
                if (w == 0) x = once(d, s, fa, 0, fb, 0, fc, 0, &cx);
                else if (s->ta) /* dW = dy^T x: both activations, C the weight's gradient */
                    x = once(d, s, act, x2, act, x1, par, wo, &cx);
                else /* fwd/dX: A an activation, B the weight, C an activation */
                    x = once(d, s, act, x2, par, wo, act, x3, &cx);
                if (r >= 0) t[w * rounds + r] = x, u[w * rounds + r] = cx;
            }
        double flop = 2.0 * s->m * s->n * s->k, med[NWAY], cmed[NWAY];
        printf("%-8s %c%c %5d %5d %5d %10zu |", s->what, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N',
               s->m, s->n, s->k, wo);
        for (int w = 0; w < NWAY; w++) {
            qsort(t + w * rounds, (size_t)rounds, sizeof *t, cmp);
            qsort(u + w * rounds, (size_t)rounds, sizeof *u, cmp);
            med[w] = t[w * rounds + rounds / 2], cmed[w] = u[w * rounds + rounds / 2];
            printf(" %s %.1f (%.1f) %.0f cpu %.1f", WAYS[w], med[w] * 1e3, t[w * rounds] * 1e3,
                   flop / med[w] * 1e-9, cmed[w] * 1e3);
        }
        printf(" | wall model %.2f cold %.2f, cpu model %.2f cold %.2f\n", med[0] / med[1],
               med[0] / med[2], cmed[0] / cmed[1], cmed[0] / cmed[2]);
        fflush(stdout);
        free(t), free(u);
    }
    printf("load average after: ");
    fflush(stdout);
    if (system("cut -d' ' -f1-3 /proc/loadavg") != 0) printf("?\n");
    ht_buf_free(fa), ht_buf_free(fb), ht_buf_free(fc), ht_buf_free(par), ht_buf_free(act);
    ht_buf_free(s0), ht_buf_free(s1);
    ht_dev_close(d);
    free(h);
    return 0;
}
