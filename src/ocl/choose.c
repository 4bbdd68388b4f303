/* Which SGEMM variant a device runs - our tiled kernels, or CLBlast with its own parameters,
 * the built-in set or the tuning file (ocl.h) - chosen by measurement rather than by its
 * type or name: the first time ht_sgemm runs on a device with HT_GEMM=auto, every variant is
 * timed on the PROBE shapes and the fastest kept. The choice and its times are
 * cached on disk next to the program binaries (keyed like them by our kernel sources, device,
 * driver and platform version, plus the CLBlast tuning file), so a device is probed once per
 * machine and again when the kernels change.
 * Why measure: the paths' ranking is not a property of the device type. On PoCL's CPU
 * device our packed tiled kernels run 1.6-2x CLBlast; on Mesa's rusticl (llvmpipe, also a
 * CPU device) CLBlast's kernels train the quickstart 10x faster than ours, and CLBlast's
 * own parameters there are as fast as the set tuned on PoCL, which on PoCL is 8-25x faster
 * than CLBlast's own. A GPU vendor needs no new code: its device is probed like any other
 * (a set tuned for it is one more table entry or tuning file, tried everywhere). */
#include "ocl/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"

/* Variants are tried in the order of ht_gemm_name (tiled, native, CLBlast's own, the built-in set,
 * the tuning file): a later one must be faster by MARGIN to be chosen, so that measurement
 * noise between near-equal variants does not flip the choice run to run. */
#define FIRST HT_GEMM_TILED
#define NV HT_GEMM_NVARIANTS
#define MARGIN 0.9

/* Two stages of a dense layer's three products (forward NT, input gradient NN, weight
 * gradient TN). Stage 0 is small, so that a path that is far slower on this device (our
 * tiled kernels on llvmpipe: ~0.03 GFLOP/s, 1.5 s for stage 0) is found cheaply and dropped
 * when it takes more than DROP times the best (noise on a loaded machine stays well
 * inside that: 1.2x at worst seen; the gap on llvmpipe is 28x); stage 1, at batch 256 and
 * width 512, decides among the rest at shapes where the kernels, not launch overhead,
 * dominate (on PoCL the two paths tie at stage 0 but the tiled kernels are 1.6x faster at
 * the MLP's shapes). */
static const struct {
    int ta, tb;
    size_t m, n, k;
} PROBE[2][3] = {{{0, 1, 128, 256, 256}, {0, 0, 128, 256, 256}, {1, 0, 256, 256, 128}},
                 {{0, 1, 256, 512, 512}, {0, 0, 256, 512, 512}, {1, 0, 512, 512, 256}}};
#define NPROBE 3
#define PROBE_FLOATS (512 * 512)
#define DROP 8.0
#define REPS 2

const char *ht_gemm_path_name(int path) {
    const char *n = ht_gemm_name(path);
    return n ? n : "?";
}

static void cache_path(const ht_dev *d, char *out, size_t n) {
    /* the program's key covers our kernels, the device, driver and platform version */
    uint64_t h = d->program_hash;
    const char *parts[] = {"gemm-choice-v5", d->tuning};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *p = parts[i];; p++) {
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            if (!*p) break;
        }
    snprintf(out, n, "%s/%016llx.gemm", d->cache_dir, (unsigned long long)h);
}

/* "clblast 1.234 0.456 0.789 0\n": the variant's name, then each variant's probe time in
 * ms (0: not measured). */
static int cache_load(ht_dev *d, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char name[32];
    double ms[NV] = {0};
    int ok = fscanf(f, "%31s", name) == 1;
    for (int v = FIRST; ok && v < NV; v++)
        ok = fscanf(f, "%lf", &ms[v]) == 1 && isfinite(ms[v]);
    fclose(f);
    for (int v = FIRST; ok && v < NV; v++)
        if (!strcmp(name, ht_gemm_name(v)) && ms[v] > 0) {
            d->gemm_choice.path = v;
            memcpy(d->gemm_choice.ms, ms, sizeof ms);
            d->gemm_choice.cached = 1;
            return 1;
        }
    ht_log_warn("GEMM choice cache '%s' is damaged; measuring again", path);
    return 0;
}

static void cache_store(const ht_dev *d, const char *path) {
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return; /* the program cache warns about an unwritable directory */
    fprintf(f, "%s", ht_gemm_path_name(d->gemm_choice.path));
    for (int v = FIRST; v < NV; v++)
        fprintf(f, " %.17g", d->gemm_choice.ms[v]);
    fprintf(f, "\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) remove(tmp);
}

/* Best of REPS of the stage's products on `path`, in ms, after one untimed pass (compiles:
 * its seconds in *first); stops early once a repetition takes more than `cutoff` ms (the
 * path is then dropped). */
static double probe(ht_dev *d, int stage, int v, ht_buf *a, ht_buf *b, ht_buf *c,
                    double cutoff, double *first) {
    double best = 1e30, t_first = ht_now();
    if (v >= HT_GEMM_CLBLAST) ht_exit_on_error(ht_blas_use(d, v)); /* checked at open */
    d->gemm = v;
    for (int r = 0; r <= REPS; r++) {
        if (r == 1) *first = ht_now() - t_first;
        ht_dev_finish(d);
        double t0 = ht_now();
        for (int i = 0; i < NPROBE; i++) {
            size_t m = PROBE[stage][i].m, n = PROBE[stage][i].n, k = PROBE[stage][i].k;
            int ta = PROBE[stage][i].ta, tb = PROBE[stage][i].tb;
            ht_sgemm(d, ta, tb, m, n, k, 1.0f, a, 0, ta ? m : k, b, 0, tb ? k : n, 0.0f, c, 0, n);
        }
        ht_dev_finish(d);
        double t = (ht_now() - t0) * 1e3;
        if (r > 0 && t < best) best = t;
        if (r > 0 && t > cutoff) break;
    }
    d->gemm = HT_GEMM_AUTO;
    return best;
}

/* Whether variant v is tried on d: the tuning-file variant only with a file; the native one
 * (OpenBLAS) never by the automatic choice, only when asked for (HT_GEMM=native, on a CPU
 * device that runs native kernels): its rounding depends on the product's shape and
 * threads, so a pipeline's micro-batches drift from the one-process run by more than the
 * tests allow after AdamW (tests/integration/pipe.t, GPT D=4 N=12: h5.mlp.proj.weight) */
static int tried(const ht_dev *d, int v) {
    return (v != HT_GEMM_CLBLAST_TUNED || d->tuning[0]) && v != HT_GEMM_NATIVE;
}

/* The fastest of variants [lo, NV) by ms (> 0: measured at stage 1), a later one only when
 * faster than MARGIN times the best before it; 0 when none was. */
static int fastest(const double *ms, int lo) {
    int best = 0;
    for (int v = lo; v < NV; v++)
        if (ms[v] > 0 && (!best || ms[v] < MARGIN * ms[best])) best = v;
    return best;
}

/* ms[v]: variant v's stage-1 time; one dropped at stage 0 gets minus its stage-0 time. */
static void measure(ht_dev *d) {
    size_t floats = PROBE_FLOATS;
    float *h = ht_xmalloc(floats * sizeof *h);
    for (size_t i = 0; i < floats; i++)
        h[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    ht_buf *a = ht_buf_new(d, floats * sizeof *h, "gemm probe A");
    ht_buf *b = ht_buf_new(d, floats * sizeof *h, "gemm probe B");
    ht_buf *c = ht_buf_new(d, floats * sizeof *h, "gemm probe C");
    ht_buf_write(d, a, 0, floats * sizeof *h, h);
    ht_buf_write(d, b, 0, floats * sizeof *h, h);
    free(h);
    int prof = d->profile;
    d->profile = HT_PROF_OFF; /* the probe's calls are not the job's */
    double t0[NV] = {0}, best0 = 1e30, *ms = d->gemm_choice.ms, first;
    for (int v = FIRST; v < NV; v++)
        if (tried(d, v)) { /* progress: a CLBlast variant's first call compiles its kernels */
            t0[v] = probe(d, 0, v, a, b, c, DROP * best0, &first);
            best0 = t0[v] < best0 ? t0[v] : best0;
            ht_log_info("SGEMM probe: %s, first call (compiles) %.1f s, then %.2f ms",
                        ht_gemm_path_name(v), first, t0[v]);
        }
    for (int v = FIRST; v < NV; v++)
        if (tried(d, v))
            ms[v] = t0[v] <= DROP * best0 ? probe(d, 1, v, a, b, c, 1e30, &first) : -t0[v];
    d->profile = prof;
    d->gemm = HT_GEMM_AUTO;
    d->gemm_choice.path = fastest(ms, FIRST);
    ht_buf_free(a), ht_buf_free(b), ht_buf_free(c);
    /* the tiled kernels' packing workspace grew to the probe's panels: let it grow again to
     * what the model's products need, not hold 1.6 MB more for the whole run */
    if (d->gemm_ws) ht_buf_free(d->gemm_ws), d->gemm_ws = NULL;
}

int ht_gemm_choose(ht_dev *d) {
    if (d->gemm != HT_GEMM_AUTO) return d->gemm;
    if (d->gemm_choice.path) return d->gemm_choice.path;
    char path[1300];
    cache_path(d, path, sizeof path);
    if (!(d->use_cache && cache_load(d, path))) {
        double t = ht_now();
        ht_log_info("choosing the SGEMM kernels for '%s' by measurement (%s%s)", d->info.name,
                    d->use_cache ? "first run on this device only; cached in "
                                 : "every run: the cache is off",
                    d->use_cache ? d->cache_dir : "");
        measure(d);
        if (d->use_cache) cache_store(d, path);
        ht_log_info("SGEMM: %s, chosen in %.1f s", ht_gemm_path_name(d->gemm_choice.path),
                    ht_now() - t);
    }
    /* CLBlast runs the best CLBlast set also when the tiled kernels won: they hand it the
     * shapes they cannot take */
    const int cl = fastest(d->gemm_choice.ms, HT_GEMM_CLBLAST);
    if (cl) ht_exit_on_error(ht_blas_use(d, cl));
    char times[256] = "";
    size_t len = 0;
    const double *ms = d->gemm_choice.ms;
    for (int v = FIRST; v < NV && len < sizeof times; v++)
        if (ms[v] != 0)
            len += (size_t)snprintf(times + len, sizeof times - len, "%s%s %.2f ms%s",
                                    len ? ", " : "", ht_gemm_name(v), fabs(ms[v]),
                                    ms[v] < 0 ? " (small shapes, dropped)" : "");
    ht_log_debug("device '%s' (%s): SGEMM %s, by measurement%s (%d layer-shaped products: %s)",
                 d->info.name, d->info.platform, ht_gemm_path_name(d->gemm_choice.path),
                 d->gemm_choice.cached ? " cached" : "", NPROBE, times);
    return d->gemm_choice.path;
}

const ht_gemm_choice *ht_dev_gemm_choice(ht_dev *d) {
    if (d->gemm == HT_GEMM_AUTO)
        ht_gemm_choose(d);
    else {
        memset(&d->gemm_choice, 0, sizeof d->gemm_choice);
        d->gemm_choice.path = d->gemm;
    }
    return &d->gemm_choice;
}
