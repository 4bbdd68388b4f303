/* CLBlast SGEMM tuning (moved here from tools/tune/tune_sgemm.c): a bounded, seeded search
 * of CLBlast's parameter sets for one device, measured end to end through ht_sgemm (so
 * hettrain's own choices - column-major swap, sub-buffers for views - are part of what is
 * measured) at a model's real GEMM shapes.
 *
 * CLBlast's SGEMM has seven parameter sets ("kernels"): Xgemm (the fast kernel of the
 * indirect path), XgemmDirect (the one-kernel path for small problems), the helpers that
 * pad/copy/transpose operands for the indirect path (Copy, Pad, Transpose, Padtranspose),
 * and GemmRoutine (XGEMM_MIN_INDIRECT_SIZE: problems with m*n*k below its cube go direct).
 * Every candidate is a complete set: CLBlast compiles its whole GEMM program per set
 * (seconds on PoCL), which bounds the search to about one candidate per 5-20 s.
 *
 * Stages, each with a share of the budget: Xgemm (all shapes forced indirect), the helper
 * kernels (idem), XgemmDirect (all shapes forced direct); then both paths of the result
 * are measured side by side to choose the threshold, and the result is checked against
 * the start set the same way (skipped when no stage improved: the start set stays, with
 * the threshold from its first measurement). Within a stage: from the incumbent, either a
 * fresh random valid point (30%) or a mutation of one or two parameters. Every candidate
 * is timed in the same process as the incumbent, the two sets switched before each call,
 * because on a CPU device other processes' load moves timings by 2x; it must beat the
 * incumbent by 2% on the summed time of one training step's GEMMs with the best routing
 * of each shape (for XgemmDirect: on the shapes where the direct kernel is within 3x of
 * the indirect path). Parameter ranges and constraints are CLBlast 1.5's
 * (src/tuning/kernels/ and the kernels' #if checks), widened where the kernels allow it
 * and narrowed where measurements on PoCL ruled values out; each candidate's results are
 * checked against a CPU dot product.
 *
 * Each candidate runs in a forked child (OpenCL is only ever initialised in children), so
 * a parameter set that crashes the compiler or makes CLBlast fail costs one candidate, not
 * the search; a child that runs past the timeout is killed. */
#include <errno.h>
#include <libconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cfgfile.h"
#include "core/err.h"
#include "core/log.h"
#include "core/path.h"
#include "core/rng.h"
#include "ocl/ocl.h" /* ht_dev_tune switches CLBlast parameter sets on an open device */
#include "prof/tune.h"
#include "prof/tune_space.h"

static FILE *g_log;

/* ---------------------------------------------------------------- shapes */

typedef struct {
    char what[32];
    int ta, tb, m, n, k;
} shape;

#define MAXSHAPES 64
static shape g_shapes[MAXSHAPES];
static int g_nshapes;

static unsigned long long mnk(const shape *s) {
    return (unsigned long long)s->m * (unsigned long long)s->n * (unsigned long long)s->k;
}

/* ---------------------------------------------------------------- tuning files */

static void print_libconfig(FILE *f, const config *c) {
    fprintf(f, "clblast = {\n");
    for (int k = 0; k < NKERN; k++) {
        fprintf(f, "    %s = {", ht_tune_space[k].kernel);
        for (int i = 0; i < ht_tune_space[k].np; i++)
            fprintf(f, " %s = %zu;", ht_tune_space[k].p[i].name, P(c, k, i));
        fprintf(f, " };\n");
    }
    fprintf(f, "};\n");
}

static int write_config(const char *path, const config *c, const char *comment) {
    FILE *f = fopen(path, "w");
    if (!f) return ht_error(HT_ERUNTIME, "cannot write '%s': %s", path, strerror(errno));
    if (comment) fputs(comment, f);
    print_libconfig(f, c);
    if (fclose(f) != 0) return ht_error(HT_ERUNTIME, "cannot write '%s'", path);
    return HT_OK;
}

/* Reads the kernels a tuning file gives over *c (the others keep their values). */
static int read_config(const char *path, config *c) {
    config_t cf;
    int rc = ht_cfg_read_file(&cf, path, "tuning file"); /* never blocks */
    if (rc != HT_OK) return rc;
    for (int k = 0; rc == HT_OK && k < NKERN; k++) {
        char key[64];
        snprintf(key, sizeof key, "clblast.%s", ht_tune_space[k].kernel);
        if (!config_lookup(&cf, key)) continue;
        for (int i = 0; i < ht_tune_space[k].np; i++) {
            char pk[128];
            int v;
            snprintf(pk, sizeof pk, "%s.%s", key, ht_tune_space[k].p[i].name);
            if (config_lookup_int(&cf, pk, &v) != CONFIG_TRUE || v < 0) {
                rc =
                    ht_error(HT_EINPUT, "%s: '%s' missing or not a non-negative integer", path, pk);
                break;
            }
            P(c, k, i) = (size_t)v;
        }
    }
    config_destroy(&cf);
    return rc;
}

/* ---------------------------------------------------------------- measuring (child side) */

typedef struct {
    const char *sel;
    int batch;
    size_t offset;
    double timeout;
} setup;

/* What a child reports: two parameter sets measured side by side (or one). */
typedef struct {
    int ok; /* every set ran and gave right results */
    char msg[256];
    double open_s, first_s; /* device open, and first calls (CLBlast compiles) */
    double t[2][MAXSHAPES]; /* best seconds per shape, per set */
    double bg;              /* cores' worth of CPU other processes used while timing */
    size_t local_mem, max_wg;
    char device[128];
} result;

/* CPU seconds all cores spent busy (from /proc/stat), and this process's CPU seconds. */
static double busy_seconds(void) {
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (!f) return 0;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8) return 0;
    long hz = sysconf(_SC_CLK_TCK);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)(hz > 0 ? hz : 100);
}

static double self_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double dot_ref(const shape *s, const float *a, const float *b, int i, int j, double *mag) {
    size_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    double acc = 0, m = 0;
    for (int p = 0; p < s->k; p++) {
        double x = s->ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
        double y = s->tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
        acc += x * y;
        m += fabs(x * y);
    }
    *mag = m;
    return acc;
}

typedef struct {
    ht_dev *d;
    ht_buf *a, *b, *c;
    size_t off;
} bench;

static void call(const bench *w, const shape *s) {
    size_t lda = (size_t)(s->ta ? s->m : s->k), ldb = (size_t)(s->tb ? s->k : s->n);
    ht_sgemm(w->d, s->ta, s->tb, (size_t)s->m, (size_t)s->n, (size_t)s->k, 1.0f, w->a, w->off, lda,
             w->b, w->off, ldb, 0.0f, w->c, w->off, (size_t)s->n);
}

/* Opens the device with files[0] and measures it, and files[1] when given, side by side:
 * the sets are switched (CLBlast keeps both programs compiled) before every timed call, so
 * both see the same background load - on a shared CPU that matters more than anything. */
static void measure(const setup *su, const char *const files[2], result *r) {
    memset(r, 0, sizeof *r);
    int idx, nsets = files[1] ? 2 : 1;
    if (ht_ocl_select(su->sel, &idx) != HT_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", ht_errmsg());
        return;
    }
    ht_dev_opts o = ht_dev_opts_default();
    o.tuning = files[0];
    o.gemm = HT_GEMM_CLBLAST_TUNED; /* files[0]: CLBlast, also where auto would pick tiled */
    bench w = {.off = su->offset};
    double t0 = ht_now();
    if (ht_dev_open(&w.d, idx, &o) != HT_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", ht_errmsg());
        return;
    }
    r->open_s = ht_now() - t0;
    const ht_devinfo *info = ht_dev_info(w.d);
    ht_strlcpy(r->device, info->name, sizeof r->device);
    r->local_mem = (size_t)info->local_mem;
    r->max_wg = info->max_wg;
    size_t maxa = 0, maxb = 0, maxc = 0, off = su->offset;
    for (int i = 0; i < g_nshapes; i++) {
        const shape *s = &g_shapes[i];
        size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
        maxa = na > maxa ? na : maxa, maxb = nb > maxb ? nb : maxb, maxc = nc > maxc ? nc : maxc;
    }
    float *ha = ht_xmalloc((maxa + off) * 4), *hb = ht_xmalloc((maxb + off) * 4),
          *hc = ht_xmalloc(maxc * 4);
    for (size_t i = 0; i < maxa + off; i++)
        ha[i] = ht_rng_uniform(11, i) - 0.5f;
    for (size_t i = 0; i < maxb + off; i++)
        hb[i] = ht_rng_uniform(12, i) - 0.5f;
    w.a = ht_buf_new(w.d, (maxa + off) * 4, "A");
    w.b = ht_buf_new(w.d, (maxb + off) * 4, "B");
    w.c = ht_buf_new(w.d, (maxc + off) * 4, "C");
    ht_buf_write(w.d, w.a, 0, (maxa + off) * 4, ha);
    ht_buf_write(w.d, w.b, 0, (maxb + off) * 4, hb);

    /* first calls (CLBlast compiles) and correctness on 24 sampled entries per shape: a
     * wrong parameter set must not win */
    t0 = ht_now();
    r->ok = 1;
    for (int set = nsets - 1; set >= 0 && r->ok; set--) {
        if (nsets == 2 && ht_dev_tune(w.d, files[set]) != HT_OK) {
            r->ok = 0;
            snprintf(r->msg, sizeof r->msg, "%s", ht_errmsg());
        }
        for (int i = 0; i < g_nshapes && r->ok; i++) {
            const shape *s = &g_shapes[i];
            call(&w, s);
            ht_buf_read(w.d, w.c, off * 4, (size_t)s->m * s->n * 4, hc);
            for (int q = 0; q < 24 && r->ok; q++) {
                int ii = (int)ht_rng_below(13, (uint64_t)(i * 64 + q), (uint32_t)s->m);
                int jj = (int)ht_rng_below(14, (uint64_t)(i * 64 + q), (uint32_t)s->n);
                double mag, ref = dot_ref(s, ha + off, hb + off, ii, jj, &mag);
                if (fabs(hc[(size_t)ii * s->n + jj] - ref) > 1e-4 * mag + 1e-6) {
                    r->ok = 0;
                    snprintf(r->msg, sizeof r->msg,
                             "set %d: wrong result at %.31s C[%d][%d]: %g, expected %g", set,
                             s->what, ii, jj, hc[(size_t)ii * s->n + jj], ref);
                }
            }
        }
    }
    r->first_s = ht_now() - t0;

    /* timing: per shape, best of at least 5 calls and 40 ms (at most 60 calls) per set */
    double busy0 = busy_seconds(), self0 = self_seconds();
    t0 = ht_now();
    for (int i = 0; i < g_nshapes && r->ok; i++) {
        const shape *s = &g_shapes[i];
        double spent[2] = {0, 0};
        r->t[0][i] = r->t[1][i] = 1e30;
        for (int rep = 0; rep < 60 && (rep < 5 || spent[0] < 0.04); rep++) {
            for (int set = 0; set < nsets; set++) {
                if (nsets == 2) ht_dev_tune(w.d, files[set]); /* both applied fine above */
                double ts = ht_now();
                call(&w, s);
                ht_dev_finish(w.d);
                double dt = ht_now() - ts;
                spent[set] += dt;
                if (dt < r->t[set][i]) r->t[set][i] = dt;
            }
        }
    }
    double wall = ht_now() - t0;
    r->bg = wall > 0 ? ((busy_seconds() - busy0) - (self_seconds() - self0)) / wall : 0;
    ht_buf_free(w.a), ht_buf_free(w.b), ht_buf_free(w.c);
    ht_dev_close(w.d);
    free(ha), free(hb), free(hc);
}

typedef struct {
    const setup *su;
    const char *const *files;
} measure_ctx;

static void measure_child(void *ctx, void *out) {
    const measure_ctx *c = ctx;
    measure(c->su, c->files, out);
}

/* Runs measure() in a child; OpenCL is never initialised in this (parent) process. */
static void measure_forked(const setup *su, const char *const files[2], result *r) {
    measure_ctx c = {su, files};
    char msg[256];
    if (!ht_prof_forked(measure_child, &c, r, sizeof *r, su->timeout, msg, sizeof msg)) {
        memset(r, 0, sizeof *r);
        ht_strlcpy(r->msg, msg, sizeof r->msg);
    }
}

/* ---------------------------------------------------------------- search (parent side) */

typedef struct {
    uint64_t seed, counter;
} rng;

static uint32_t rnd(rng *g, uint32_t n) { return ht_rng_below(g->seed, g->counter++, n); }

static int index_of(int k, int i, size_t v) {
    for (int j = 0; j < ht_tune_space[k].p[i].nv; j++)
        if (ht_tune_space[k].p[i].v[j] == v) return j;
    return -1;
}

/* Xgemm parameters that valid_xgemm() ties to others. */
static void pin_xgemm(config *c) {
    if (P(c, K_XGEMM, 0) == 1) { /* GEMMK=1 */
        P(c, K_XGEMM, 2) = P(c, K_XGEMM, 3) = 1;
        P(c, K_XGEMM, 10) = P(c, K_XGEMM, 11) = P(c, K_XGEMM, 12) = P(c, K_XGEMM, 13) = 0;
        P(c, K_XGEMM, 9) = P(c, K_XGEMM, 6);
        P(c, K_XGEMM, 4) = P(c, K_XGEMM, 7) = P(c, K_XGEMM, 8) = P(c, K_XGEMM, 5);
        return;
    }
    if (P(c, K_XGEMM, 10) == 0) P(c, K_XGEMM, 4) = P(c, K_XGEMM, 5);
    if (P(c, K_XGEMM, 11) == 0) P(c, K_XGEMM, 7) = P(c, K_XGEMM, 8);
}

static void randomize(config *c, int k, rng *g) {
    for (int tries = 0; tries < 20000; tries++) {
        for (int i = 0; i < ht_tune_space[k].np; i++)
            P(c, k, i) = ht_tune_space[k].p[i].v[rnd(g, (uint32_t)ht_tune_space[k].p[i].nv)];
        if (k == K_XGEMM) pin_xgemm(c);
        if (ht_tune_valid(c, k)) return;
    }
}

/* Changes one or two parameters of kernel k to a neighbouring (or, 1 in 4, any) value. */
static int mutate(config *c, int k, rng *g) {
    config orig = *c;
    for (int tries = 0; tries < 2000; tries++) {
        *c = orig;
        int changes = 1 + (int)rnd(g, 2);
        for (int ch = 0; ch < changes; ch++) {
            int i = (int)rnd(g, (uint32_t)ht_tune_space[k].np);
            int nv = ht_tune_space[k].p[i].nv, j = index_of(k, i, P(c, k, i));
            if (nv < 2) continue;
            if (j < 0 || rnd(g, 4) == 0)
                j = (int)rnd(g, (uint32_t)nv);
            else
                j = rnd(g, 2) ? (j + 1 < nv ? j + 1 : j - 1) : (j > 0 ? j - 1 : j + 1);
            P(c, k, i) = ht_tune_space[k].p[i].v[j];
            /* keep tied parameters tied, as the GEMMK=1 tuner does */
            if (k == K_XGEMM && P(c, k, 0) == 1) { /* GEMMK=1: M and N mirror each other */
                static const int mirror[16] = {0, 1, 2,  3,  5,  4,  9,  8,
                                               7, 6, 10, 11, 12, 13, 14, 15};
                P(c, k, mirror[i]) = P(c, k, i);
                if (i == 4 || i == 5 || i == 7 || i == 8)
                    P(c, k, 4) = P(c, k, 5) = P(c, k, 7) = P(c, k, 8) = P(c, k, i);
            }
            if (k == K_XGEMM) pin_xgemm(c);
        }
        if (ht_tune_valid(c, k) && memcmp(c, &orig, sizeof orig)) return 1;
    }
    *c = orig;
    return 0;
}

/* Candidates already measured (hash of the whole set) so none is paid for twice. */
#define MAXSEEN 4096
static uint64_t g_seen[MAXSEEN];
static int g_nseen;

static uint64_t hash_config(const config *c) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < NKERN; k++)
        for (int i = 0; i < ht_tune_space[k].np; i++)
            h = ht_mix64(h ^ (P(c, k, i) + 1315423911ull * k + i));
    return h;
}

static int seen(const config *c) {
    uint64_t h = hash_config(c);
    for (int i = 0; i < g_nseen; i++)
        if (g_seen[i] == h) return 1;
    if (g_nseen < MAXSEEN) g_seen[g_nseen++] = h;
    return 0;
}

/* Best split of the shapes between the two paths: those with m*n*k < T^3 run direct.
 * td/ti: per-shape times of the direct and the indirect path (NULL: path unknown).
 * Returns the summed time and sets *t to the threshold. */
#define NEVER_INDIRECT 1000000 /* 10^18 > any m*n*k here */
static double route(const double *td, const double *ti, size_t *t) {
    if (!td || !ti) {
        *t = td ? NEVER_INDIRECT : 0;
        double s = 0;
        for (int i = 0; i < g_nshapes; i++)
            s += td ? td[i] : ti[i];
        return s;
    }
    double best = 1e30;
    *t = 0;
    /* candidate thresholds: 0 (all indirect) and just above each shape's m*n*k */
    for (int c = -1; c < g_nshapes; c++) {
        size_t thr = 0;
        if (c >= 0) {
            double cr = cbrt((double)mnk(&g_shapes[c]));
            thr = (size_t)floor(cr);
            while ((unsigned long long)thr * thr * thr <= mnk(&g_shapes[c]))
                thr++;
        }
        unsigned long long t3 = (unsigned long long)thr * thr * thr;
        double s = 0;
        for (int i = 0; i < g_nshapes; i++)
            s += mnk(&g_shapes[i]) < t3 ? td[i] : ti[i];
        if (s < best - 1e-12) best = s, *t = thr;
    }
    return best;
}

typedef struct {
    setup su;
    double t_start, budget;
    char tmp[2][256];
    int evals, failed;
} search;

static double elapsed(const search *s) { return ht_now() - s->t_start; }

static void print_config(FILE *f, const config *c, int k) {
    fprintf(f, "%s:", ht_tune_space[k].kernel);
    for (int i = 0; i < ht_tune_space[k].np; i++)
        fprintf(f, " %s=%zu", ht_tune_space[k].p[i].name, P(c, k, i));
}

/* Measures set a and, when b is given, set b beside it; 0 when it failed (says why). */
static int evaluate(search *s, const config *a, const config *b, result *r, const char *tag) {
    if (write_config(s->tmp[0], a, NULL) != HT_OK) ht_exit_on_error(HT_ERUNTIME);
    if (b && write_config(s->tmp[1], b, NULL) != HT_OK) ht_exit_on_error(HT_ERUNTIME);
    const char *files[2] = {s->tmp[0], b ? s->tmp[1] : NULL};
    measure_forked(&s->su, files, r);
    s->evals++;
    if (r->ok) return 1;
    s->failed++;
    fprintf(g_log, "[%6.0f s] %-7s failed (%s): ", elapsed(s), tag, r->msg);
    const config *c = b ? b : a;
    print_config(g_log, c, K_XGEMM), fputc(' ', g_log), print_config(g_log, c, K_DIRECT);
    fputc('\n', g_log);
    return 0;
}

static double sum(const double *t) {
    double x = 0;
    for (int i = 0; i < g_nshapes; i++)
        x += t[i];
    return x;
}

static void keep_min(double *acc, const double *t) {
    for (int i = 0; i < g_nshapes; i++)
        acc[i] = t[i] < acc[i] ? t[i] : acc[i];
}

/* Routed step time of a set whose threshold is thr, from both paths' per-shape times. */
static double step_at(const double *td, const double *ti, size_t thr) {
    unsigned long long t3 = (unsigned long long)thr * thr * thr;
    double x = 0;
    for (int i = 0; i < g_nshapes; i++)
        x += mnk(&g_shapes[i]) < t3 ? td[i] : ti[i];
    return x;
}

/* A stage's objective for per-shape times t of its path: the step time with the best
 * routing against the other path. For the direct path that is flat while the direct
 * kernel loses every shape, so it is the direct time of the shapes where the direct
 * kernel is within 3x of the indirect one (mask), which still rewards progress. */
static double objective(int direct, const double *t, const double *other, const int *mask) {
    size_t thr;
    if (!direct) return route(other, t, &thr);
    double x = 0;
    int any = 0;
    for (int i = 0; i < g_nshapes; i++)
        if (mask[i]) x += t[i], any = 1;
    return any ? x : route(t, other, &thr);
}

/* One stage: improves kernel k (or one of the four helper kernels when k < 0) of *best,
 * with GemmRoutine forcing every shape down the path the stage tunes. Each candidate is
 * measured beside the incumbent and must beat it by 2% on the objective (noise on a shared
 * CPU is about that, measured side by side). *times keeps the incumbent's best per-shape
 * times seen. */
static void stage(search *s, const char *tag, int k, int direct, config *best, double *times,
                  const double *other_path, double until, rng *g) {
    int tried = 0, improved = 0;
    while (elapsed(s) < until) {
        config c = *best;
        static const int helpers[4] = {K_COPY, K_PAD, K_TRA, K_PADTRA};
        int kk = k >= 0 ? k : helpers[rnd(g, 4)];
        if (rnd(g, 100) < 30)
            randomize(&c, kk, g);
        else if (!mutate(&c, kk, g))
            continue;
        P(&c, K_ROUTE, 0) = direct ? NEVER_INDIRECT : 0;
        if (seen(&c)) {
            if (++tried > 100000) break; /* space exhausted */
            continue;
        }
        result r;
        double t0 = ht_now();
        if (!evaluate(s, best, &c, &r, tag)) continue;
        int mask[MAXSHAPES];
        for (int i = 0; i < g_nshapes; i++)
            mask[i] = r.t[0][i] < 3 * other_path[i] || r.t[1][i] < 3 * other_path[i];
        double oc = objective(direct, r.t[1], other_path, mask);
        double oi = objective(direct, r.t[0], other_path, mask);
        int better = oc < 0.98 * oi;
        fprintf(g_log, "[%6.0f s] %-7s %7.2f ms vs %7.2f%s (%3.0f s, bg %.2f) ", elapsed(s), tag,
                oc * 1e3, oi * 1e3, better ? " *" : "  ", ht_now() - t0, r.bg);
        print_config(g_log, &c, kk);
        fputc('\n', g_log);
        if (better) {
            *best = c, improved++;
            memcpy(times, r.t[1], sizeof r.t[1]);
        } else {
            keep_min(times, r.t[0]);
        }
    }
    fprintf(g_log, "[%6.0f s] %s stage done: %d improvement(s)\n", elapsed(s), tag, improved);
}

/* ---------------------------------------------------------------- entry point */

static void to_kparams(const config *c, ht_prof_tune_result *res) {
    res->nk = 0;
    for (int k = 0; k < NKERN && k < HT_PROF_MAX_KERNELS; k++) {
        ht_prof_kparams *kp = &res->k[res->nk++];
        memset(kp, 0, sizeof *kp);
        ht_strlcpy(kp->kernel, ht_tune_space[k].kernel, sizeof kp->kernel);
        kp->n = ht_tune_space[k].np;
        for (int i = 0; i < ht_tune_space[k].np; i++) {
            ht_strlcpy(kp->names[i], ht_tune_space[k].p[i].name, sizeof kp->names[i]);
            kp->values[i] = (long)P(c, k, i);
        }
    }
}

/* The result of the stages: indirect-path kernels from `ind`, XgemmDirect from `dir`, the
 * routing threshold chosen from both paths measured side by side, then checked against the
 * start set; the faster one goes into res. */
static int finish(search *s, const config *start_c, const config *ind, const config *dir,
                  double *ti, double *td, ht_prof_tune_result *res) {
    result r;
    size_t thr;
    config fin = *ind;
    memcpy(fin.v[K_DIRECT], dir->v[K_DIRECT], sizeof fin.v[K_DIRECT]);
    config fi = fin, fd = fin;
    P(&fi, K_ROUTE, 0) = 0;
    P(&fd, K_ROUTE, 0) = NEVER_INDIRECT;
    if (evaluate(s, &fi, &fd, &r, "route")) {
        memcpy(ti, r.t[0], sizeof r.t[0]);
        memcpy(td, r.t[1], sizeof r.t[1]);
    }
    route(td, ti, &thr);
    P(&fin, K_ROUTE, 0) = thr;
    fprintf(g_log, "[%6.0f s] route   threshold %zu: direct for m*n*k < %zu^3\n", elapsed(s), thr,
            thr);

    /* verification: start and result measured side by side, twice, best per shape kept */
    double vs[MAXSHAPES], vf[MAXSHAPES];
    for (int i = 0; i < g_nshapes; i++)
        vs[i] = vf[i] = 1e30;
    for (int round = 0; round < 2; round++)
        if (evaluate(s, start_c, &fin, &r, "verify")) keep_min(vs, r.t[0]), keep_min(vf, r.t[1]);
    if (vf[0] >= 1e30) {
        return ht_error(HT_ERUNTIME, "CLBlast tuning: the result set failed to run; see the log");
    }
    int keep_start = sum(vs) <= sum(vf);
    res->start_ms = sum(vs) * 1e3;
    res->result_ms = sum(keep_start ? vs : vf) * 1e3;
    to_kparams(keep_start ? start_c : &fin, res);
    if (keep_start)
        fprintf(g_log, "the start set stays: the result was not faster when re-measured\n");
    return HT_OK;
}

int ht_prof_tune(const ht_prof_tune_opts *o, ht_prof_tune_result *res) {
    FILE *devnull = NULL;
    g_log = o->log;
    if (!g_log) g_log = devnull = fopen("/dev/null", "w");
    if (!g_log) return ht_error(HT_ERUNTIME, "cannot open /dev/null: %s", strerror(errno));
    memset(res, 0, sizeof *res);
    char sel[16];
    snprintf(sel, sizeof sel, "%d", o->device);
    search s = {
        .su = {.sel = sel, .offset = o->offset, .timeout = o->timeout > 0 ? o->timeout : 120},
        .budget = o->budget};
    g_nshapes = g_nseen = 0;
    for (int i = 0; i < o->nshapes && i < MAXSHAPES; i++) {
        const ht_prof_gemm *q = &o->shapes[i];
        shape *sh = &g_shapes[g_nshapes++];
        *sh = (shape){"", q->ta, q->tb, q->m, q->n, q->k};
        snprintf(sh->what, sizeof sh->what, "gemm%d", i);
    }
    int rc = HT_OK;
    if (g_nshapes == 0) {
        rc = ht_error(HT_EINPUT, "CLBlast tuning needs at least one GEMM shape");
        goto out;
    }
    s.t_start = ht_now();
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 0; i < 2; i++)
        snprintf(s.tmp[i], sizeof s.tmp[i], "%s/hetprof-tune.%ld.%d.cfg", tmpdir, (long)getpid(),
                 i);
    config start_c;
    for (int k = 0; k < NKERN; k++)
        for (int i = 0; i < MAXP; i++)
            start_c.v[k][i] = ht_tune_start[k][i];
    if (o->start && *o->start && (rc = read_config(o->start, &start_c)) != HT_OK) goto out;

    /* the start set down both paths (which also probes the device's limits) */
    result r;
    config ind = start_c, dir = start_c;
    P(&ind, K_ROUTE, 0) = 0;
    P(&dir, K_ROUTE, 0) = NEVER_INDIRECT;
    seen(&ind), seen(&dir);
    if (!evaluate(&s, &ind, &dir, &r, "start")) {
        rc = ht_error(HT_ERUNTIME, "CLBlast tuning: the start set failed on device %d: %s",
                      o->device, r.msg);
        goto out;
    }
    double ti[MAXSHAPES], td[MAXSHAPES];
    memcpy(ti, r.t[0], sizeof ti);
    memcpy(td, r.t[1], sizeof td);
    ht_tune_local_mem = r.local_mem, ht_tune_max_wg = r.max_wg;
    ht_strlcpy(res->device, r.device, sizeof res->device);
    fprintf(g_log,
            "device %s (local memory %zu B, work-group <= %zu); start set: step %.2f ms "
            "(indirect only %.2f, direct only %.2f; compile %.0f s)\n",
            res->device, ht_tune_local_mem, ht_tune_max_wg, step_at(td, ti, P(&start_c, K_ROUTE, 0)) * 1e3,
            sum(ti) * 1e3, sum(td) * 1e3, r.first_s);

    rng g = {o->seed, 0};
    double setup_s = elapsed(&s), left = s.budget - setup_s;
    if (left < 0) left = 0;
    double t_x = setup_s + 0.45 * left, t_h = t_x + 0.12 * left, t_d = t_h + 0.28 * left;
    config ind0 = ind, dir0 = dir;
    stage(&s, "xgemm", K_XGEMM, 0, &ind, ti, td, t_x, &g);
    stage(&s, "helpers", -1, 0, &ind, ti, td, t_h, &g);
    stage(&s, "direct", K_DIRECT, 1, &dir, td, ti, t_d, &g);

    size_t thr;
    if (!memcmp(&ind, &ind0, sizeof ind) && !memcmp(&dir, &dir0, sizeof dir)) {
        /* nothing better found: the start set, routed by its own side-by-side times */
        double t = route(td, ti, &thr);
        P(&start_c, K_ROUTE, 0) = thr;
        res->start_ms = step_at(td, ti, ht_tune_start[K_ROUTE][0]) * 1e3;
        res->result_ms = t * 1e3;
        to_kparams(&start_c, res);
        fprintf(g_log, "[%6.0f s] no faster set found; threshold %zu\n", elapsed(&s), thr);
        goto done;
    }
    if ((rc = finish(&s, &start_c, &ind, &dir, ti, td, res)) != HT_OK) goto out;
done:
    res->evals = s.evals, res->failed = s.failed;
    fprintf(g_log,
            "[%6.0f s] tuning done: %d measurements (%d failed); step %.2f ms (start %.2f)\n",
            elapsed(&s), s.evals, s.failed, res->result_ms, res->start_ms);
out:
    if (s.tmp[0][0]) unlink(s.tmp[0]), unlink(s.tmp[1]);
    if (devnull) fclose(devnull);
    return rc;
}
