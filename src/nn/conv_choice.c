/* Which algorithm each pass of a convolution runs (see ops_conv.h): forced, or the fastest
 * that applies, timed on one chunk of the shape on the device the first time the shape is
 * met. Chosen once per shape (not per batch: a pipeline's micro-batches and the one-process
 * run's batch get the same algorithms, so the same rounding), kept in a table for the
 * process and cached on disk under a lock, so that ranks starting together agree too. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "nn/conv_plan.h"

static const char *const ALG[] = {"?", "implicit", "tiled", "gemm"};
enum { NALG = 4, REPS = 3 };
/* A later candidate must beat the best before it by this factor (noise must not flip a
 * choice); one whose untimed first run took DROP times the best is not timed further. */
#define MARGIN 0.9
#define DROP 8.0

ht_conv_impl ht_conv_impl_now(void) {
    static int env = -1; /* -1: not read yet; -2: unset */
    if (env == -1) {
        const char *e = getenv("HT_CONV");
        env = -2;
        if (e && *e) {
            if (!strcmp(e, "auto")) env = HT_CONV_AUTO;
            else if (!strcmp(e, "implicit")) env = HT_CONV_TILED;
            else if (!strcmp(e, "tiled")) env = HT_CONV_IM2COL;
            else if (!strcmp(e, "gemm")) env = HT_CONV_GEMM;
            else ht_die(HT_EINPUT, "HT_CONV='%s': expected auto, implicit, tiled or gemm", e);
        }
    }
    return env >= 0 ? (ht_conv_impl)env : ht_conv2d_impl();
}

static int fwd_implicit_ok(const ht_conv2d_shape *s) { return s->stride == 1; }
/* else the padded gradient would need a negative padding */
static int dx_implicit_ok(const ht_conv2d_shape *s) { return s->stride == 1 && s->pad <= s->k - 1; }

static conv_algos forced(ht_conv_impl impl, const ht_conv2d_shape *s) {
    if (impl == HT_CONV_CLBLAST || impl == HT_CONV_GEMM)
        return (conv_algos){HT_CONV_ALG_GEMM, HT_CONV_ALG_GEMM, HT_CONV_ALG_GEMM};
    if (impl == HT_CONV_IM2COL)
        return (conv_algos){HT_CONV_ALG_TILED, HT_CONV_ALG_TILED, HT_CONV_ALG_TILED};
    int f = fwd_implicit_ok(s) ? HT_CONV_ALG_IMPLICIT : HT_CONV_ALG_TILED;
    return (conv_algos){f, dx_implicit_ok(s) ? HT_CONV_ALG_IMPLICIT : HT_CONV_ALG_TILED, f};
}

/* ---------------------------------------------------------------- measurement */

static const conv_algos *g_probe; /* the algorithms under test while measuring */

typedef struct probe_bufs {
    ht_buf *x, *w, *b, *y, *a, *da, *dw, *db, *dx, *ws;
} probe_bufs;

static ht_buf *filled(ht_dev *d, size_t n, const char *what) {
    float *h = ht_xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    ht_buf *b = ht_buf_new(d, n * sizeof *h, what);
    ht_buf_write(d, b, 0, n * sizeof *h, h);
    free(h);
    return b;
}

static ht_view v0(ht_buf *b) { return (ht_view){b, 0}; }

/* One run of pass `pass` (0 forward, 1 input gradient, 2 weight gradient). */
static void run_pass(ht_dev *d, const probe_bufs *p, const ht_conv2d_shape *s, int pass) {
    if (pass == 0)
        ht_conv2d_forward(d, v0(p->y), v0(p->a), v0(p->x), v0(p->w), v0(p->b), v0(p->ws), s,
                          HT_ACT_RELU);
    else
        ht_conv2d_backward(d, pass == 1 ? v0(p->dx) : ht_view_none(),
                           pass == 2 ? v0(p->dw) : ht_view_none(), v0(p->db), v0(p->da), v0(p->y),
                           v0(p->x), v0(p->w), v0(p->ws), s, HT_ACT_RELU, 1.0f, 0);
}

/* Best of REPS runs in ms after an untimed one (PoCL compiles a kernel for its work-group
 * size at its first launch); stops after a run that took more than `cutoff` ms. */
static double time_pass(ht_dev *d, const probe_bufs *p, const ht_conv2d_shape *s, int pass,
                        double cutoff) {
    run_pass(d, p, s, pass);
    ht_dev_finish(d);
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = ht_now();
        run_pass(d, p, s, pass);
        ht_dev_finish(d);
        double t = (ht_now() - t0) * 1e3;
        best = t < best ? t : best;
        if (t > cutoff) break;
    }
    return best;
}

/* ms[pass][alg] (0: does not apply) on one chunk of s; the fastest in *out. */
static void measure(ht_dev *d, const ht_conv2d_shape *s, double ms[3][NALG], conv_algos *out) {
    size_t nx = (size_t)s->B * s->cin * s->h * s->w, nw = (size_t)s->cout * s->cin * s->k * s->k;
    size_t ny = (size_t)s->B * s->cout * ht_conv2d_oh(s) * ht_conv2d_ow(s);
    probe_bufs p = {filled(d, nx, "conv probe x"),   filled(d, nw, "conv probe w"),
                    filled(d, s->cout, "conv probe b"), filled(d, ny, "conv probe y"),
                    filled(d, ny, "conv probe a"),   filled(d, ny, "conv probe da"),
                    filled(d, nw, "conv probe dw"),  filled(d, s->cout, "conv probe db"),
                    filled(d, nx, "conv probe dx"),
                    ht_buf_new(d, ht_conv2d_workspace_floats(s) * sizeof(float), "conv probe ws")};
    int prof = ht_dev_profile_swap(d, HT_PROF_OFF);
    int ok[3][NALG] = {{0, fwd_implicit_ok(s), 1, 1}, {0, dx_implicit_ok(s), 1, 1},
                       {0, fwd_implicit_ok(s), 1, 1}};
    int *choice[3] = {&out->fwd, &out->dx, &out->dw};
    for (int pass = 0; pass < 3; pass++) {
        double best = 1e30;
        *choice[pass] = 0;
        for (int a = 1; a < NALG; a++) {
            ms[pass][a] = 0;
            if (!ok[pass][a]) continue;
            conv_algos t = {a, a, a};
            g_probe = &t;
            ms[pass][a] = time_pass(d, &p, s, pass, DROP * best);
            g_probe = NULL;
            if (!*choice[pass] || ms[pass][a] < MARGIN * best)
                *choice[pass] = a, best = ms[pass][a];
        }
    }
    ht_dev_profile_swap(d, prof);
    ht_buf *all[] = {p.x, p.w, p.b, p.y, p.a, p.da, p.dw, p.db, p.dx, p.ws};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ht_buf_free(all[i]);
}

/* ---------------------------------------------------------------- disk cache */

static int alg_of(const char *name) {
    for (int a = 1; a < NALG; a++)
        if (!strcmp(name, ALG[a])) return a;
    return 0;
}

/* "implicit gemm tiled\n" then the nine times. 1 when a valid line was read. */
static int parse(const char *text, conv_algos *out, double ms[3][NALG]) {
    char n[3][16];
    double t[9];
    if (sscanf(text, "%15s %15s %15s %lf %lf %lf %lf %lf %lf %lf %lf %lf", n[0], n[1], n[2], &t[0],
               &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &t[7], &t[8]) != 12)
        return 0;
    *out = (conv_algos){alg_of(n[0]), alg_of(n[1]), alg_of(n[2])};
    for (int i = 0; i < 9; i++) ms[i / 3][1 + i % 3] = t[i];
    return out->fwd && out->dx && out->dw;
}

/* Reads the choice from the cache file, or measures and writes it, holding an exclusive
 * lock on the file meanwhile. Returns 1 when it came from the file. */
static int cached_choice(ht_dev *d, const char *path, const ht_conv2d_shape *s, conv_algos *out,
                         double ms[3][NALG]) {
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        ht_log_warn("conv choice cache '%s' unusable; measuring without it", path);
        if (fd >= 0) close(fd);
        measure(d, s, ms, out);
        return 0;
    }
    char text[512];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = 0;
    int hit = n > 0 && parse(text, out, ms);
    if (!hit) {
        measure(d, s, ms, out);
        int len = snprintf(text, sizeof text, "%s %s %s", ALG[out->fwd], ALG[out->dx],
                           ALG[out->dw]);
        for (int i = 0; i < 9; i++)
            len += snprintf(text + len, sizeof text - (size_t)len, " %.4f", ms[i / 3][1 + i % 3]);
        len += snprintf(text + len, sizeof text - (size_t)len, "\n");
        if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len)
            ht_log_warn("conv choice cache '%s': could not write it", path);
    }
    flock(fd, LOCK_UN);
    close(fd);
    return hit;
}

/* ---------------------------------------------------------------- the table */

typedef struct entry {
    const ht_dev *d;
    int cin, h, w, cout, k, stride, pad;
    conv_algos a;
} entry;
static entry *g_tab;
static size_t g_n, g_cap;

static void log_choice(ht_dev *d, const ht_conv2d_shape *s, const conv_algos *a,
                       double ms[3][NALG], const char *how) {
    char t[3][64];
    for (int pass = 0; pass < 3; pass++) {
        int len = 0;
        t[pass][0] = 0;
        for (int x = 1; x < NALG; x++)
            if (ms[pass][x] > 0)
                len += snprintf(t[pass] + len, sizeof t[pass] - (size_t)len, "%s%s %.2f",
                                len ? " " : "", ALG[x], ms[pass][x]);
    }
    ht_log_info("conv %dx%dx%d->%d k%d s%d p%d on '%s': forward %s, input gradient %s, weight "
                "gradient %s (%s; ms per %d-sample chunk: %s | %s | %s)",
                s->cin, s->h, s->w, s->cout, s->k, s->stride, s->pad, ht_dev_info(d)->name,
                ALG[a->fwd], ALG[a->dx], ALG[a->dw], how, s->B, t[0], t[1], t[2]);
}

/* Measured (or read from the cache) for shape s on d; logged once. */
static conv_algos choose(ht_dev *d, const ht_conv2d_shape *s0) {
    ht_conv2d_shape s = *s0;
    s.B = 64; /* one chunk of a batch of at least 64: the probe does not depend on the batch */
    s.B = ht_conv_plan_make(ht_conv_cpu_chunks(d), &s).nb;
    const char *gemm = ht_gemm_path_name(ht_dev_gemm_choice(d)->path);
    char tag[256], path[1400];
    snprintf(tag, sizeof tag, "conv-choice-v1 %d %d %d %d %d %d %d %d %s", s.cin, s.h, s.w,
             s.cout, s.k, s.stride, s.pad, s.B, gemm);
    double ms[3][NALG] = {{0}};
    conv_algos a;
    if (ht_dev_cache_file(d, tag, "conv", path, sizeof path)) {
        int hit = cached_choice(d, path, &s, &a, ms);
        log_choice(d, &s, &a, ms, hit ? "cached" : "measured");
    } else {
        measure(d, &s, ms, &a);
        log_choice(d, &s, &a, ms, "measured, the cache is off");
    }
    return a;
}

conv_algos ht_conv_algos_of(ht_dev *d, const ht_conv2d_shape *s) {
    if (g_probe) return *g_probe;
    ht_conv_impl impl = ht_conv_impl_now();
    if (impl != HT_CONV_AUTO) return forced(impl, s);
    for (size_t i = 0; i < g_n; i++) {
        const entry *e = &g_tab[i];
        if (e->d == d && e->cin == s->cin && e->h == s->h && e->w == s->w &&
            e->cout == s->cout && e->k == s->k && e->stride == s->stride && e->pad == s->pad)
            return e->a;
    }
    conv_algos a = choose(d, s);
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 8;
        g_tab = ht_xrealloc(g_tab, g_cap * sizeof *g_tab);
    }
    g_tab[g_n++] = (entry){d, s->cin, s->h, s->w, s->cout, s->k, s->stride, s->pad, a};
    return a;
}
