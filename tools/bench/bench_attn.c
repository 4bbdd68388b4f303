/* Attention core forward + backward: the T^2 kernels of cl/attn.cl (automatic choice: one
 * work-group per head where its tiles fit in local memory, else one work-item per row) beside
 * the fused kernels of cl/flash.cl (online softmax, probabilities recomputed), at the GPT
 * shapes of tools/bench (GPT-small: B 16, T 64, C 128, 4 heads; the 85M GPT: B 8, T 256,
 * C 768, 12 heads; T 1024) and the device memory each needs beyond qkv, out and their
 * gradients (T^2 kernels: att and the backward scratch, 2 B NH T^2 floats; fused: lse and dsum,
 * 2 B NH T). Rounds alternate the two (old, fused, old, ...); the median of N is printed with
 * the load average before and after.
 * --rows: both with one work-item per row (no per-head work-groups).
 * usage: bench_attn [--device SEL] [--reps N] [--only S] [--rows] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "nn/ops_tf.h"
#include "ocl/ocl.h"

typedef struct { const char *what; int B, T, C, NH; } shape;

static const shape SHAPES[] = {
    {"gpt-small", 16, 64, 128, 4},  {"gpt-small T256", 4, 256, 128, 4},
    {"85M T256", 8, 256, 768, 12},  {"85M T512", 2, 512, 768, 12},
    {"85M T1024", 1, 1024, 768, 12},
    {"small T1024", 2, 1024, 128, 4},
};

static void loadavg(const char *when) {
    FILE *f = fopen("/proc/loadavg", "r");
    char line[128] = "?\n";
    if (f) {
        if (!fgets(line, sizeof line, f)) ht_strlcpy(line, "?\n", sizeof line);
        fclose(f);
    }
    printf("load average %s: %s", when, line);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct { ht_buf *qkv, *out, *dout, *dqkv, *big, *scr; } bufs;

/* One forward + backward, timed to completion (the forward alone into *fwd): flash = 1 the
 * fused kernels. */
static double step(ht_dev *d, const shape *s, bufs *b, int flash, double *fwd) {
    ht_view qkv = ht_view_at(b->qkv, 0), out = ht_view_at(b->out, 0),
            dout = ht_view_at(b->dout, 0), dqkv = ht_view_at(b->dqkv, 0),
            big = ht_view_at(b->big, 0), scr = ht_view_at(b->scr, 0);
    double t0 = ht_now();
    if (flash) {
        ht_attention_flash_forward(d, out, big, qkv, s->B, s->T, s->C, s->NH);
        ht_dev_finish(d);
        *fwd = ht_now() - t0;
        ht_attention_flash_backward(d, dqkv, scr, dout, out, qkv, big, s->B, s->T, s->C, s->NH);
    } else {
        ht_attention_forward(d, out, big, qkv, s->B, s->T, s->C, s->NH);
        ht_dev_finish(d);
        *fwd = ht_now() - t0;
        ht_attention_backward(d, dqkv, scr, dout, qkv, big, s->B, s->T, s->C, s->NH);
    }
    ht_dev_finish(d);
    return ht_now() - t0;
}

static void run_shape(ht_dev *d, const shape *s, int reps) {
    size_t nq = (size_t)s->B * s->T * 3 * s->C, no = (size_t)s->B * s->T * s->C,
           na = (size_t)s->B * s->NH * s->T * s->T, nr = (size_t)s->B * s->NH * s->T;
    float *hq = ht_xmalloc(nq * 4);
    for (size_t i = 0; i < nq; i++) hq[i] = ht_rng_uniform(3, i) * 2 - 1;
    bufs b = {ht_buf_new(d, nq * 4, "qkv"), ht_buf_new(d, no * 4, "out"),
              ht_buf_new(d, no * 4, "dout"), ht_buf_new(d, nq * 4, "dqkv"),
              ht_buf_new(d, na * 4, "att"), ht_buf_new(d, na * 4, "scratch")};
    ht_buf_write(d, b.qkv, 0, nq * 4, hq);
    ht_buf_write(d, b.dout, 0, no * 4, hq);
    double *t[4];
    for (int f = 0; f < 4; f++) t[f] = ht_xcalloc((size_t)reps, sizeof(double));
    double w;
    step(d, s, &b, 0, &w), step(d, s, &b, 1, &w); /* warm-up */
    for (int r = 0; r < reps; r++)
        for (int f = 0; f < 2; f++) t[f][r] = step(d, s, &b, f, &t[2 + f][r]);
    for (int f = 0; f < 4; f++) qsort(t[f], (size_t)reps, sizeof(double), cmp);
    const int h = reps / 2;
    printf("%-15s B=%d T=%d C=%d NH=%d  T^2 kernels %8.2f ms (fwd %7.2f) %7.1f MiB | fused "
           "%8.2f ms (fwd %7.2f) %6.2f MiB | fused/T^2 time %.2f\n",
           s->what, s->B, s->T, s->C, s->NH, t[0][h] * 1e3, t[2][h] * 1e3,
           2.0 * na * 4 / 1048576.0, t[1][h] * 1e3, t[3][h] * 1e3, 2.0 * nr * 4 / 1048576.0,
           t[1][h] / t[0][h]);
    fflush(stdout);
    ht_buf_free(b.qkv), ht_buf_free(b.out), ht_buf_free(b.dout), ht_buf_free(b.dqkv),
        ht_buf_free(b.big), ht_buf_free(b.scr);
    free(hq);
    for (int f = 0; f < 4; f++) free(t[f]);
}

int main(int argc, char **argv) {
    const char *sel = "", *only = NULL;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--rows")) ht_attention_force(HT_ATTN_ROWS);
        else ht_die(HT_EINPUT, "usage: bench_attn [--device SEL] [--reps N] [--only S] [--rows]");
    }
    if (reps < 1) ht_die(HT_EINPUT, "--reps must be >= 1");
    int idx;
    ht_exit_on_error(ht_ocl_select(sel, &idx));
    ht_dev_opts opts = ht_dev_opts_default();
    ht_dev *d;
    ht_exit_on_error(ht_dev_open(&d, idx, &opts));
    printf("device: %s; median of %d alternating rounds, forward + backward\n",
           ht_dev_info(d)->name, reps);
    loadavg("before");
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++)
        if (!only || strstr(SHAPES[i].what, only)) run_shape(d, &SHAPES[i], reps);
    loadavg("after");
    ht_dev_close(d);
    return 0;
}
