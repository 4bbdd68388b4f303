/* Bucketed, overlapped gradient reduction: the bucket plan (pure), then the step that runs
 * backward bucket by bucket, reads each bucket to the host and starts its nonblocking
 * all-reduce, progressing the outstanding ones between device calls, and measures how much
 * of the communication ran while backward was still going. All MPI goes through src/comm,
 * all device traffic through src/ocl. */
#include "train/reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "io/trace.h"
#include "nn/layer.h"

/* ---------------------------------------------------------------- plan */

/* The activation layer i runs inside layer i-1's backward (fused): no bucket boundary
 * may fall between them. */
static int fused_with_below(const ht_model *m, int i) {
    const ht_layer *l = &m->layers[i];
    return i > 0 && (l->kind == HT_LAYER_RELU || l->kind == HT_LAYER_GELU) &&
           m->layers[i - 1].ops && m->layers[i - 1].ops->fuses_act;
}

/* 1 when every layer's parameters are [woff, woff + nparams) and the layers follow each
 * other in the flat buffer: then layers [lo, hi) own one contiguous range of it. */
static int layout_contiguous(const ht_model *m) {
    size_t next = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (l->woff != next) return 0;
        next = l->woff + l->nparams;
    }
    return next == m->nparams;
}

/* Gradient range of layers [lo, hi) (contiguous layout). */
static void range_of(const ht_model *m, int lo, int hi, size_t *off, size_t *n) {
    size_t a = 0, b = 0;
    int any = 0;
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) a = l->woff;
        b = l->woff + l->nparams;
        any = 1;
    }
    *off = any ? a : 0;
    *n = any ? b - a : 0;
}

int ht_reduce_plan(const ht_model *m, size_t first_bytes, size_t cap_bytes, ht_bucket *out,
                   int max) {
    int nb = 0;
    if (!layout_contiguous(m)) {
        if (max > 0) out[0] = (ht_bucket){0, m->nlayers, 0, m->nparams};
        return 1;
    }
    int hi = m->nlayers;
    size_t bytes = 0;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        bytes += m->layers[i].nparams * sizeof(float);
        size_t limit = nb == 0 ? first_bytes : cap_bytes;
        if (i == 0 || (bytes >= limit && !fused_with_below(m, i))) {
            if (nb < max) {
                out[nb] = (ht_bucket){i, hi, 0, 0};
                range_of(m, i, hi, &out[nb].off, &out[nb].n);
            }
            nb++;
            hi = i;
            bytes = 0;
        }
    }
    return nb;
}

/* ---------------------------------------------------------------- state */

struct ht_reduce {
    int nb;
    ht_bucket *b;
    ht_comm_req **req;
    double *t0, *t1; /* per bucket: all-reduce started, seen complete */
    float *host;     /* nparams + 1: gradients, then the stop flag */
};

static struct ht_reduce *reduce_new(const ht_model *m, const ht_config *cfg) {
    struct ht_reduce *r = ht_xcalloc(1, sizeof *r);
    const double mib = 1024.0 * 1024.0;
    size_t first = (size_t)ceil(cfg->cluster.bucket_first_mb * mib);
    size_t cap = (size_t)ceil(cfg->cluster.bucket_cap_mb * mib);
    r->nb = ht_reduce_plan(m, first, cap, NULL, 0);
    r->b = ht_xcalloc((size_t)r->nb, sizeof *r->b);
    ht_reduce_plan(m, first, cap, r->b, r->nb);
    r->req = ht_xcalloc((size_t)r->nb, sizeof *r->req);
    r->t0 = ht_xcalloc((size_t)r->nb, sizeof(double));
    r->t1 = ht_xcalloc((size_t)r->nb, sizeof(double));
    r->host = ht_xmalloc((m->nparams + 1) * sizeof(float));
    return r;
}

void ht_reduce_free(struct ht_reduce *r) {
    if (!r) return;
    free(r->b);
    free(r->req);
    free(r->t0);
    free(r->t1);
    free(r->host);
    free(r);
}

/* Progresses every outstanding all-reduce and stamps the ones seen complete. */
static void poll(struct ht_reduce *r, int started) {
    ht_comm_test(NULL);
    double now = ht_now();
    for (int k = 0; k < started; k++)
        if (r->t1[k] == 0 && ht_comm_test(r->req[k])) r->t1[k] = now;
}

/* Emulated slowdown (DESIGN.md): idles `s` seconds, keeping communication moving as it
 * would while a slower device computed. */
static void idle_poll(struct ht_reduce *r, int started, double s) {
    if (!(s > 0)) return;
    double start = ht_now(), end = start + s;
    for (;;) {
        poll(r, started);
        double left = end - ht_now();
        if (left <= 0) break;
        if (left > 1e-4) left = 1e-4;
        struct timespec ts = {0, (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
    ht_trace_span("slowdown (emulated)", start, ht_now());
}

/* Length of the union of the in-flight intervals [t0, t1) clipped to [-inf, until). */
static double busy_before(const struct ht_reduce *r, double until) {
    double total = 0, reach = -INFINITY;
    for (int k = 0; k < r->nb; k++) { /* started in time order: t0 ascending */
        double a = r->t0[k], b = r->t1[k] < until ? r->t1[k] : until;
        if (a < reach) a = reach;
        if (b > a) total += b - a;
        if (b > reach) reach = b;
    }
    return total;
}

/* ---------------------------------------------------------------- step */

void ht_reduce_backward(ht_cluster *c, ht_model *m, const ht_config *cfg, int B, float grad_scale,
                        double t_start, volatile sig_atomic_t *stop_src, int *stop) {
    if (c->world == 1 || !cfg->cluster.overlap) {
        ht_model_backward(m, B, grad_scale);
        *stop = *stop_src;
        if (c->world > 1 || c->slowdown != 1) {
            ht_dev_finish(m->dev);
            ht_cluster_reduce(c, m, ht_now() - t_start, stop);
        }
        return;
    }
    if (!c->red) c->red = reduce_new(m, cfg);
    struct ht_reduce *r = c->red;
    const double extra = c->slowdown - 1;
    const size_t n = m->nparams;
    ht_dev_finish(m->dev); /* the forward */
    double compute = ht_now() - t_start;
    idle_poll(r, 0, extra * compute);
    for (int k = 0; k < r->nb; k++) {
        const ht_bucket *b = &r->b[k];
        double a = ht_now();
        ht_model_backward_range(m, b->lo, b->hi, B, k == 0 ? grad_scale : 1.0f, 0);
        poll(r, k);
        size_t len = b->n;
        if (k == 0) {
            /* the first bucket ends at the top of the buffer: the stop flag rides along,
             * so every rank stops after the same step */
            r->host[n] = *stop_src ? 1.0f : 0.0f;
            len++;
        }
        if (b->n)
            ht_buf_read(m->dev, m->grads, b->off * sizeof(float), b->n * sizeof(float),
                        r->host + b->off);
        else
            ht_dev_finish(m->dev);
        double dt = ht_now() - a;
        compute += dt;
        idle_poll(r, k, extra * dt);
        r->t0[k] = ht_now();
        r->t1[k] = 0;
        r->req[k] = ht_comm_iallreduce(r->host + (k == 0 ? n - b->n : b->off), len, c->ring);
        poll(r, k + 1);
    }
    double t_end_bwd = ht_now();
    for (int k = 0; k < r->nb; k++) {
        ht_comm_wait(r->req[k]);
        r->req[k] = NULL;
        if (r->t1[k] == 0) r->t1[k] = ht_now();
        ht_trace_span("all-reduce bucket", r->t0[k], r->t1[k]);
    }
    ht_buf_write(m->dev, m->grads, 0, n * sizeof(float), r->host);
    *stop = r->host[n] > 0;
    double t_done = ht_now();
    double hidden = busy_before(r, t_end_bwd);
    ht_trace_span("all-reduce (not hidden)", t_end_bwd, t_done);
    c->t_compute += compute * c->slowdown;
    c->t_comm += t_done - t_end_bwd;
    c->t_hidden += hidden;
    c->nsteps++;
    c->samples += c->hi - c->lo;
}
