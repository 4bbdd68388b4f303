/* hetprof's measurements on one opened device (see measure.h). Timings are wall-clock from
 * a finished queue to a finished queue, the median of several runs: what a training step
 * typically sees, robust to the odd preempted run (on a shared CPU those are 2x). */
#include "prof/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/data.h"
#include "build/build.h"
#include "prof/roof.h"

/* ---------------------------------------------------------------- the model */

int ht_prof_model(ht_model *m, ht_dev *d, const ht_config *cfg, int max_batch) {
    if (!cfg) {
        static const int hidden[2] = {1024, 1024};
        return ht_model_mlp(m, d, 784, hidden, 2, 10, "relu", max_batch);
    }
    int features = cfg->data.features, classes = cfg->data.classes;
    if (!strcmp(cfg->data.kind, "idx")) {
        ht_dataset ds;
        int rc = ht_idx_load(&ds, cfg->data.images, cfg->data.labels);
        if (rc != HT_OK) return rc;
        features = ds.features, classes = ds.classes;
        ht_dataset_free(&ds);
    } else if (!strcmp(cfg->data.kind, "text") || !strcmp(cfg->data.kind, "tokens")) {
        features = cfg->model.context, classes = cfg->model.vocab;
    }
    return ht_build_model(m, d, cfg, features, classes, max_batch);
}

/* ---------------------------------------------------------------- timing */

typedef struct {
    int quick;
    double min_s; /* keep repeating until this much time was spent (and >= min_reps) */
    int min_reps, max_reps;
} reps;

typedef void (*work_fn)(void *ctx);

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of fn over the repetitions; one untimed warm-up call first. The median, not
 * the best: a training step sees a layer's typical time, and the best of up to 100 runs sat
 * 3-14% under the median for this machine's layers (BENCHMARKS.md, hetsim calibration), while
 * the median still ignores the occasional preempted run. */
static double typical_time(ht_dev *d, const reps *r, work_fn fn, void *ctx) {
    fn(ctx);
    ht_dev_finish(d);
    double *t = ht_xmalloc((size_t)r->max_reps * sizeof *t), spent = 0;
    int n = 0;
    while (n < r->max_reps && (n < r->min_reps || spent < r->min_s)) {
        double t0 = ht_now();
        fn(ctx);
        ht_dev_finish(d);
        t[n] = ht_now() - t0;
        spent += t[n++];
    }
    ht_dev_profile_reset(d); /* drop the events profiling collected */
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return med > 0 ? med : 1e-9;
}

/* ---------------------------------------------------------------- bandwidth and latency */

typedef struct {
    ht_dev *d;
    ht_buf *a, *b;
    void *host;
    size_t bytes;
} xfer;

static void do_copy(void *c) {
    xfer *x = c;
    int n = (int)(x->bytes / 16);
    ht_launch1d(x->d, "prof_copy_f4", (size_t)n, HT_BUF(x->a), HT_BUF(x->b), HT_INT(n));
}
static void do_h2d(void *c) {
    xfer *x = c;
    ht_buf_write(x->d, x->a, 0, x->bytes, x->host);
}
static void do_d2h(void *c) {
    xfer *x = c;
    ht_buf_read(x->d, x->a, 0, x->bytes, x->host);
}

static void measure_links(ht_dev *d, const reps *r, ht_prof_dev *out) {
    size_t bytes = ht_prof_copy_bytes(d, (size_t)(r->quick ? 16 : 64) << 20);
    xfer x = {d, ht_buf_new(d, bytes, "prof copy src"), ht_buf_new(d, bytes, "prof copy dst"),
              ht_xmalloc(bytes), bytes};
    memset(x.host, 0, bytes);
    ht_buf_write(d, x.a, 0, bytes, x.host);
    out->mem_bw_gbs = 2.0 * (double)bytes / typical_time(d, r, do_copy, &x) * 1e-9;
    out->h2d_gbs = (double)bytes / typical_time(d, r, do_h2d, &x) * 1e-9;
    out->d2h_gbs = (double)bytes / typical_time(d, r, do_d2h, &x) * 1e-9;
    ht_buf_free(x.a), ht_buf_free(x.b), free(x.host);

    /* launch latency: enqueue to finish of an empty kernel, mean over many */
    int n = r->quick ? 50 : 500;
    size_t one = 1;
    ht_launch(d, "prof_empty", 1, &one, NULL, HT_INT(0));
    ht_dev_finish(d);
    double t0 = ht_now();
    for (int i = 0; i < n; i++) {
        ht_launch(d, "prof_empty", 1, &one, NULL, HT_INT(0));
        ht_dev_finish(d);
    }
    out->launch_us = (ht_now() - t0) / n * 1e6;
    ht_dev_profile_reset(d);
}

/* ---------------------------------------------------------------- GEMM */

/* A random batch of inputs and labels (tokens and targets for a token model). */
static void set_random_batch(ht_model *m, int B, uint64_t seed) {
    size_t nx = (size_t)B * (size_t)m->in_features, ny = (size_t)B * (size_t)m->rows;
    int32_t *y = ht_xmalloc(ny * sizeof *y);
    for (size_t i = 0; i < ny; i++)
        y[i] = (int32_t)ht_rng_below(seed + 1, i, (uint32_t)m->classes);
    if (m->input_tokens) {
        int32_t *t = ht_xmalloc(nx * sizeof *t);
        for (size_t i = 0; i < nx; i++)
            t[i] = (int32_t)ht_rng_below(seed + 2, i, (uint32_t)m->classes);
        ht_model_set_batch_tokens(m, t, y, B);
        free(t);
    } else {
        float *x = ht_xmalloc(nx * sizeof *x);
        for (size_t i = 0; i < nx; i++)
            x[i] = 2.0f * ht_rng_uniform(seed + 2, i) - 1.0f;
        ht_model_set_batch(m, x, y, B);
        free(x);
    }
}

typedef struct {
    ht_model *m;
    int B, layer;
} step_ctx;

static void do_step(void *c) {
    step_ctx *s = c;
    ht_model_forward(s->m, s->B, 1);
    ht_model_backward(s->m, s->B, 1.0f / (float)s->B);
}
static void do_fwd(void *c) {
    step_ctx *s = c;
    ht_model_forward_range(s->m, s->layer, s->layer + 1, s->B);
}
static void do_loss(void *c) {
    step_ctx *s = c;
    ht_model_loss_forward(s->m, s->B, 1);
}
static void do_bwd(void *c) {
    step_ctx *s = c;
    ht_model_backward_range(s->m, s->layer, s->layer + 1, s->B, 1.0f, 0);
}

/* The shapes come from the device's profiling records of one step ("sgemm NT MxNxK"
 * names, src/ocl/blas.c), so they are exactly what the layers call, for every kind. */
int ht_prof_gemm_shapes(ht_model *m, int B, ht_prof_gemm *out, int max) {
    ht_dev_profile_reset(m->dev);
    step_ctx s = {m, B, 0};
    do_step(&s);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    ht_dev_profile_report(m->dev, f, NULL);
    fclose(f);
    ht_dev_profile_reset(m->dev);
    int n = 0;
    for (char *line = text; line && *line && n < max;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char ta, tb;
        int mm, nn, kk;
        if (sscanf(line, "sgemm %c%c %dx%dx%d", &ta, &tb, &mm, &nn, &kk) == 5 && mm > 0 && nn > 0 &&
            kk > 0) {
            ht_prof_gemm g = {mm, nn, kk, ta == 'T', tb == 'T', 0};
            int dup = 0;
            for (int i = 0; i < n; i++)
                dup |= out[i].m == g.m && out[i].n == g.n && out[i].k == g.k && out[i].ta == g.ta &&
                       out[i].tb == g.tb;
            if (!dup) out[n++] = g;
        }
        line = next;
    }
    free(text);
    return n;
}

typedef struct {
    ht_dev *d;
    const ht_prof_gemm *g;
    ht_buf *a, *b, *c;
} gemm_ctx;

static void do_gemm(void *c) {
    gemm_ctx *x = c;
    const ht_prof_gemm *g = x->g;
    size_t lda = (size_t)(g->ta ? g->m : g->k), ldb = (size_t)(g->tb ? g->k : g->n);
    ht_sgemm(x->d, g->ta, g->tb, (size_t)g->m, (size_t)g->n, (size_t)g->k, 1.0f, x->a, 0, lda, x->b,
             0, ldb, 0.0f, x->c, 0, (size_t)g->n);
}

static void measure_gemm(ht_dev *d, const reps *r, ht_prof_gemm *gs, int n, uint64_t seed) {
    size_t ma = 1, mb = 1, mc = 1;
    for (int i = 0; i < n; i++) {
        size_t a = (size_t)gs[i].m * gs[i].k, b = (size_t)gs[i].k * gs[i].n,
               c = (size_t)gs[i].m * gs[i].n;
        ma = a > ma ? a : ma, mb = b > mb ? b : mb, mc = c > mc ? c : mc;
    }
    size_t mx = ma > mb ? ma : mb;
    float *h = ht_xmalloc(mx * sizeof *h);
    for (size_t i = 0; i < mx; i++)
        h[i] = ht_rng_uniform(seed + 3, i) - 0.5f;
    gemm_ctx x = {d, NULL, ht_buf_new(d, ma * 4, "prof A"), ht_buf_new(d, mb * 4, "prof B"),
                  ht_buf_new(d, mc * 4, "prof C")};
    ht_buf_write(d, x.a, 0, ma * 4, h);
    ht_buf_write(d, x.b, 0, mb * 4, h);
    free(h);
    for (int i = 0; i < n; i++) {
        x.g = &gs[i];
        double t = typical_time(d, r, do_gemm, &x);
        gs[i].gflops = 2.0 * gs[i].m * (double)gs[i].n * gs[i].k / t * 1e-9;
    }
    ht_buf_free(x.a), ht_buf_free(x.b), ht_buf_free(x.c);
}

/* ---------------------------------------------------------------- the device */

int ht_prof_measure(int index, const ht_prof_opts *o, ht_prof_dev *out) {
    memset(out, 0, sizeof *out);
    int maxb = 1;
    for (int i = 0; i < o->nbatches; i++)
        maxb = o->batches[i] > maxb ? o->batches[i] : maxb;
    ht_dev_opts dopts = ht_dev_opts_default();
    dopts.profile = 1; /* the GEMM shapes are read from the profiling records */
    dopts.tuning = o->tuning;
    ht_dev *d;
    double t0 = ht_now();
    int rc = ht_dev_open(&d, index, &dopts);
    if (rc != HT_OK) return rc;
    const ht_devinfo *info = ht_dev_info(d);
    ht_strlcpy(out->name, info->name, sizeof out->name);
    ht_strlcpy(out->platform, info->platform, sizeof out->platform);
    ht_strlcpy(out->driver, info->driver, sizeof out->driver);
    ht_strlcpy(out->type, info->type, sizeof out->type);
    out->mem_mb = (double)info->global_mem / (1 << 20);
    /* its host, for a cluster built from the profile (hetsim --profile) */
    char host[256] = ""; /* longer than any host name (the profile keeps 63 characters) */
    if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    ht_strlcpy(out->host, host, sizeof out->host);
    if (o->log)
        fprintf(o->log, "hetprof: device %d: %s: opened in %.1f s\n", index, info->name,
                ht_now() - t0);
    reps r = o->quick ? (reps){1, 0.0, 2, 3} : (reps){0, 0.1, 5, 100};

    measure_links(d, &r, out);

    ht_model m;
    rc = ht_prof_model(&m, d, o->cfg, maxb);
    if (rc != HT_OK) {
        ht_dev_close(d);
        return rc;
    }
    ht_model_init_params(&m, o->seed);
    set_random_batch(&m, maxb, o->seed);
    ht_model_set_training(&m, 1, o->seed, 0);

    /* GEMM shapes of a step at the largest batch (all batches for a full run) */
    t0 = ht_now();
    for (int i = o->nbatches - 1; i >= 0; i--) {
        if (o->quick && o->batches[i] != maxb) continue;
        ht_prof_gemm gs[HT_PROF_MAX_GEMM];
        int n = ht_prof_gemm_shapes(&m, o->batches[i], gs, HT_PROF_MAX_GEMM);
        for (int j = 0; j < n && out->ngemm < HT_PROF_MAX_GEMM; j++) {
            int dup = 0;
            for (int k = 0; k < out->ngemm; k++)
                dup |= !memcmp(&out->gemm[k], &gs[j], sizeof gs[j]);
            if (!dup) out->gemm[out->ngemm++] = gs[j];
        }
    }
    measure_gemm(d, &r, out->gemm, out->ngemm, o->seed);
    const ht_gemm_choice *gc = ht_dev_gemm_choice(d); /* what ht_sgemm above ran on */
    ht_strlcpy(out->gemm_path, ht_gemm_path_name(gc->path), sizeof out->gemm_path);
    int measured = 0;
    for (int v = HT_GEMM_TILED; v < HT_GEMM_NVARIANTS; v++) {
        out->gemm_ms[v] = fabs(gc->ms[v]);
        measured += gc->ms[v] != 0;
        size_t len = strlen(out->gemm_dropped);
        if (gc->ms[v] < 0)
            snprintf(out->gemm_dropped + len, sizeof out->gemm_dropped - len, "%s%s",
                     len ? "," : "", ht_gemm_name(v));
    }
    if (measured < 2) out->gemm_path[0] = 0; /* forced by HT_GEMM */
    if (o->log)
        fprintf(o->log, "hetprof: device %d: %d GEMM shapes in %.1f s\n", index, out->ngemm,
                ht_now() - t0);

    /* per-layer forward / backward and whole steps, per batch size */
    t0 = ht_now();
    for (int b = 0; b < o->nbatches; b++) {
        step_ctx s = {&m, o->batches[b], 0};
        double step = typical_time(d, &r, do_step, &s);
        if (out->nrates < HT_PROF_MAX_BATCHES)
            out->rates[out->nrates++] = (ht_prof_rate){s.B, s.B / step};
        for (int i = 0; i < m.nlayers && out->nlayers < HT_PROF_MAX_LAYERS; i++) {
            s.layer = i;
            ht_prof_layer *l = &out->layers[out->nlayers++];
            ht_strlcpy(l->name, m.layers[i].name, sizeof l->name);
            l->batch = s.B;
            l->fwd_ms = typical_time(d, &r, do_fwd, &s) * 1e3;
            l->bwd_ms = typical_time(d, &r, do_bwd, &s) * 1e3;
        }
        if (out->nlayers < HT_PROF_MAX_LAYERS) { /* on the logits the step above left */
            ht_prof_layer *l = &out->layers[out->nlayers++];
            ht_strlcpy(l->name, HT_PROF_LOSS, sizeof l->name);
            l->batch = s.B;
            l->fwd_ms = typical_time(d, &r, do_loss, &s) * 1e3;
            l->bwd_ms = 0;
        }
    }
    if (o->log)
        fprintf(o->log, "hetprof: device %d: %d layers and the loss x %d batch sizes in %.1f s\n",
                index, m.nlayers, o->nbatches, ht_now() - t0);
    ht_model_free(&m);
    ht_dev_close(d);
    return HT_OK;
}
