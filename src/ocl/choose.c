/* Which SGEMM path a device runs, chosen by measurement rather than by its type or name:
 * the first time ht_sgemm runs on a device with HT_GEMM=auto, every path of the VARIANTS
 * table is timed on the PROBE shapes and the fastest kept. The choice and its times are
 * cached on disk next to the program binaries (keyed like them by our kernel sources, device,
 * driver and platform version, plus the CLBlast tuning file), so a device is probed once per
 * machine and again when the kernels change.
 * Why measure: the paths' ranking is not a property of the device type. On PoCL's CPU
 * device our packed tiled kernels run 1.6-2x CLBlast; on Mesa's rusticl (llvmpipe, also a
 * CPU device) CLBlast's kernels train the quickstart 10x faster than ours. A GPU vendor
 * needs no new code: its device is probed like any other. */
#include "ocl/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"

/* The paths in order of preference: a later one must be faster by MARGIN to be chosen, so
 * that measurement noise between near-equal paths does not flip the choice run to run. */
static const struct {
    const char *name;
    int path;
} VARIANTS[] = {{"tiled", HT_GEMM_TILED}, {"clblast", HT_GEMM_CLBLAST}};
#define NVARIANTS ((int)(sizeof VARIANTS / sizeof *VARIANTS))
#define MARGIN 0.9
_Static_assert(NVARIANTS == sizeof(((ht_gemm_choice *)0)->ms) / sizeof(double),
               "ht_gemm_choice.ms holds one time per variant");

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
    for (int i = 0; i < NVARIANTS; i++)
        if (VARIANTS[i].path == path) return VARIANTS[i].name;
    return "auto";
}

static void cache_path(const ht_dev *d, char *out, size_t n) {
    /* the program's key covers our kernels, the device, driver and platform version */
    uint64_t h = d->program_hash;
    const char *parts[] = {"gemm-choice-v2", d->tuning};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *p = parts[i];; p++) {
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            if (!*p) break;
        }
    snprintf(out, n, "%s/%016llx.gemm", d->cache_dir, (unsigned long long)h);
}

/* "clblast 1.234 0.456\n": the path's name, then each variant's probe time in ms. */
static int cache_load(ht_dev *d, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char name[32];
    double ms[NVARIANTS];
    int ok = fscanf(f, "%31s", name) == 1;
    for (int i = 0; ok && i < NVARIANTS; i++)
        ok = fscanf(f, "%lf", &ms[i]) == 1 && ms[i] != 0;
    fclose(f);
    for (int i = 0; ok && i < NVARIANTS; i++)
        if (!strcmp(name, VARIANTS[i].name)) {
            d->gemm_choice.path = VARIANTS[i].path;
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
    for (int i = 0; i < NVARIANTS; i++)
        fprintf(f, " %.17g", d->gemm_choice.ms[i]);
    fprintf(f, "\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) remove(tmp);
}

/* Best of REPS of the stage's products on `path`, in ms, after one untimed pass (compiles);
 * stops early once a repetition takes more than `cutoff` ms (the path is then dropped). */
static double probe(ht_dev *d, int stage, int path, ht_buf *a, ht_buf *b, ht_buf *c,
                    double cutoff) {
    double best = 1e30;
    d->gemm = path;
    for (int r = 0; r <= REPS; r++) {
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

/* ms[i]: variant i's stage-1 time; a variant dropped at stage 0 gets minus its stage-0 time. */
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
    int prof = d->profile, best = 0, live[NVARIANTS];
    d->profile = HT_PROF_OFF; /* the probe's calls are not the job's */
    double t0[NVARIANTS], fastest = 1e30;
    for (int i = 0; i < NVARIANTS; i++) {
        t0[i] = probe(d, 0, VARIANTS[i].path, a, b, c, DROP * fastest);
        fastest = t0[i] < fastest ? t0[i] : fastest;
    }
    for (int i = 0; i < NVARIANTS; i++) {
        live[i] = t0[i] <= DROP * fastest;
        d->gemm_choice.ms[i] = live[i] ? probe(d, 1, VARIANTS[i].path, a, b, c, 1e30) : -t0[i];
    }
    for (int i = 1; i < NVARIANTS; i++)
        if (live[i] && (!live[best] || d->gemm_choice.ms[i] < MARGIN * d->gemm_choice.ms[best]))
            best = i;
    d->profile = prof;
    d->gemm_choice.path = VARIANTS[best].path;
    ht_buf_free(a), ht_buf_free(b), ht_buf_free(c);
}

int ht_gemm_choose(ht_dev *d) {
    if (d->gemm != HT_GEMM_AUTO) return d->gemm;
    if (d->gemm_choice.path) return d->gemm_choice.path;
    char path[1300];
    cache_path(d, path, sizeof path);
    if (!(d->use_cache && cache_load(d, path))) {
        measure(d);
        if (d->use_cache) cache_store(d, path);
    }
    char times[256] = "";
    size_t len = 0;
    for (int i = 0; i < NVARIANTS && len < sizeof times; i++)
        len += (size_t)snprintf(times + len, sizeof times - len, "%s%s %.2f ms%s", i ? ", " : "",
                                VARIANTS[i].name, fabs(d->gemm_choice.ms[i]),
                                d->gemm_choice.ms[i] < 0 ? " (small shapes, dropped)" : "");
    ht_log_debug("device '%s' (%s): SGEMM path %s, by measurement%s (%d layer-shaped products: %s)",
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
