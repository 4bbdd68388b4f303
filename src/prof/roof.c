/* The ceilings of --profile's roofline (core/roofline.h), measured on the device after a
 * run: the best of a few runs of multiply-add chains (compute: fma() or mad(), the faster;
 * cl/prof.cl says why both) and of a streaming copy over buffers larger than a CPU's caches
 * (memory), and the median round trip of an empty kernel (launch). Best, not median, for the
 * two ceilings: a ceiling is what the device can do, and on a shared machine the slower runs
 * measure the other processes. After the run, not before: a CPU's clock after minutes of work
 * can be well below a short burst's (this machine: 158 GFLOP/s after the 85M GPT's steps,
 * 186-199 after a few seconds' work), and the run's kernels ran at the former. */
#include "prof/roof.h"

#include <stdlib.h>

#include "core/log.h"

enum { REPS = 8, LAUNCHES = 50 };

static double run_fma(ht_dev *d, const char *k, ht_buf *out, size_t items, int iters) {
    double t0 = ht_now();
    ht_launch(d, k, 1, &items, NULL, HT_BUF(out), HT_FLOAT(0.999f), HT_FLOAT(1e-3f),
              HT_INT(iters));
    ht_dev_finish(d);
    return ht_now() - t0;
}

/* Kernel k's multiply-add rate: enough work-items to fill every compute unit several times
 * over, and iterations for about 10 ms a run (scaled from a short first run); the runs 30 ms
 * apart, since this VM's second core was seen missing for ~250 ms at a time (half the rate
 * in every run of a burst). */
static double measure_flops(ht_dev *d, const char *k) {
    const ht_devinfo *info = ht_dev_info(d);
    size_t items = (size_t)(info->compute_units ? info->compute_units : 1) * info->max_wg * 4;
    if (items < 4096) items = 4096;
    if (items > (size_t)1 << 20) items = (size_t)1 << 20;
    ht_buf *out = ht_buf_new(d, items * sizeof(float), "roofline fma");
    int iters = 64;
    double t = run_fma(d, k, out, items, iters); /* also creates the kernel */
    t = run_fma(d, k, out, items, iters);
    double want = 0.01 / (t > 1e-6 ? t : 1e-6) * iters;
    iters = want > 1 << 20 ? 1 << 20 : want < 64 ? 64 : (int)want;
    double best = 0;
    for (int r = 0; r < REPS; r++) {
        if (r) ht_sleep(0.03);
        double rate = 128.0 * (double)iters * (double)items / run_fma(d, k, out, items, iters);
        if (rate > best) best = rate;
    }
    ht_buf_free(out);
    return best;
}

size_t ht_prof_copy_bytes(ht_dev *d, size_t want) {
    const ht_devinfo *info = ht_dev_info(d);
    size_t bytes = want;
    while (bytes > 1 << 20 && (bytes > info->max_alloc || 3 * bytes > info->global_mem / 2))
        bytes /= 2;
    return bytes;
}

static double measure_bytes(ht_dev *d) {
    size_t bytes = ht_prof_copy_bytes(d, (size_t)64 << 20);
    ht_buf *a = ht_buf_new(d, bytes, "roofline copy src"), *b = ht_buf_new(d, bytes, "roofline copy dst");
    size_t n = bytes / 16;
    double best = 0;
    for (int r = 0; r <= REPS; r++) { /* the first run touches the pages: not counted */
        double t0 = ht_now();
        ht_launch1d(d, "prof_copy_f4", n, HT_BUF(a), HT_BUF(b), HT_INT((int)n));
        ht_dev_finish(d);
        double rate = 2.0 * (double)bytes / (ht_now() - t0);
        if (r > 0 && rate > best) best = rate;
    }
    ht_buf_free(a), ht_buf_free(b);
    return best;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double measure_launch(ht_dev *d) {
    double t[LAUNCHES];
    size_t one = 1;
    ht_launch(d, "prof_empty", 1, &one, NULL, HT_INT(0));
    ht_dev_finish(d);
    for (int i = 0; i < LAUNCHES; i++) {
        double t0 = ht_now();
        ht_launch(d, "prof_empty", 1, &one, NULL, HT_INT(0));
        ht_dev_finish(d);
        t[i] = ht_now() - t0;
    }
    qsort(t, LAUNCHES, sizeof *t, cmp_double);
    return t[LAUNCHES / 2];
}

void ht_prof_roof(ht_dev *d, ht_roof *out) {
    int prev = ht_dev_profile_swap(d, HT_PROF_OFF); /* not the job's kernels */
    ht_dev_finish(d);
    double fused = measure_flops(d, "prof_fma"), plain = measure_flops(d, "prof_mad");
    out->flops = fused > plain ? fused : plain; /* the faster way the device offers */
    out->bytes_s = measure_bytes(d);
    out->launch_s = measure_launch(d);
    ht_dev_profile_swap(d, prev);
}

void ht_prof_roof_report(ht_dev *d, FILE *f) {
    ht_dev_profile_report(d, NULL, NULL); /* fold the run's events before measuring */
    if (ht_dev_profile_no_timestamps(d)) {
        ht_dev_profile_report(d, f, NULL); /* counts only: nothing to set beside a ceiling */
        return;
    }
    ht_roof roof;
    ht_prof_roof(d, &roof);
    ht_dev_profile_report(d, f, &roof);
}
