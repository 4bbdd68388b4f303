/* The bsp policy (see bsp.h): the bucket plan (pure), then the worker side. Its backward
 * either runs in one piece and sums all gradients after it (one rank, or cluster.overlap =
 * false), or runs bucket by bucket, reads each bucket to the host and starts its nonblocking
 * all-reduce (cluster.shard, "optimizer" or "gradients": its reduce-scatter to the owners of
 * its parts, through two host slots; with "gradients" the buckets outside the rank's
 * gradient window pass through the gradient buffer),
 * progressing the outstanding ones between device calls, and measures how much of the
 * communication ran while backward was still going. Its step is the optimizer step (sharded:
 * the slice's update, then the parameters all-gathered).
 * Emulated slowdown (DESIGN.md) idles where a slower device would still compute. All MPI
 * goes through src/comm, all device traffic through src/ocl. */
#include "sync/bsp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "core/vcost.h"
#include "io/trace.h"
#include "sync/internal.h"

/* ---------------------------------------------------------------- state */

typedef struct bsp {
    int world;
    int ring;        /* 1: ht_comm_ring_allreduce, 0: MPI_Allreduce */
    int overlap;     /* cluster.overlap */
    size_t first, cap; /* bucket sizes in bytes */
    float *host;       /* nparams + 1: gradients, then the stop flag (not sharded and bucketed) */
    float stopf;       /* sharded: the stop flags' sum */
    /* the buckets, made on the first overlapped step */
    int nb;
    ht_bucket *b;
    ht_comm_req **req;
    double *t0, *t1; /* per bucket: all-reduce started, seen complete */
    /* cluster.shard: every rank's slice of the parameters (bytes, rank order) and this rank's
     * updated slice on the host; NULL counts: not sharded */
    size_t *counts;
    float *mine;
    int rs; /* cluster.shard = "gradients": gradients reduce-scattered into the slices */
    /* rs: the slices' first floats (world + 1); bucketed: the owners' floats of each bucket
     * (nb x world, made with the buckets) */
    size_t *cut, *bcnt;
    /* rs, bucketed: the host copies of the buckets in flight, RS_SLOTS slots of the largest
     * bucket (bucket k in slot k % RS_SLOTS), so that host memory follows the slice, not the
     * model (whole: the slots would hold the whole gradient; then it is at its layout offsets
     * and nothing waits); the parameters' all-gather goes through them in rounds */
    float *stage;
    size_t slot, scap; /* the largest bucket; the stage's floats */
    int whole;
} bsp;

#define RS_SLOTS 2

static void bsp_open(ht_sync *s) {
    const ht_config *cfg = s->cfg;
    bsp *p = ht_xcalloc(1, sizeof *p);
    const double mib = 1024.0 * 1024.0;
    p->world = s->L.world;
    p->ring = cfg->cluster.allreduce != HT_ALLRED_MPI;
    p->overlap = cfg->cluster.overlap;
    p->first = (size_t)ceil(cfg->cluster.bucket_first_mb * mib);
    p->cap = (size_t)ceil(cfg->cluster.bucket_cap_mb * mib);
    if (s->opt->n != s->n && p->world > 1) { /* the optimizer updates a slice (ZeRO-1) */
        size_t mine = s->opt->n * sizeof(float);
        p->counts = ht_xmalloc((size_t)p->world * sizeof *p->counts);
        ht_comm_allgather(&mine, sizeof mine, p->counts);
        p->mine = ht_xmalloc(mine ? mine : 1);
        /* ZeRO-1 too: only the slice's sums are needed (reduce-scatter + all-gather is the
         * all-reduce's traffic); ZeRO-2 differs by its gradient window (train/zero.c) */
        p->rs = 1;
        p->cut = ht_xmalloc((size_t)(p->world + 1) * sizeof *p->cut);
        p->cut[0] = 0;
        for (int r = 0; r < p->world; r++)
            p->cut[r + 1] = p->cut[r] + p->counts[r] / sizeof(float);
        ht_log_info("cluster.shard = %s: the gradients are reduce-scattered, %zu of %zu summed "
                    "here; %s",
                    cfg->cluster.shard == HT_SHARD_GRADIENTS ? "gradients" : "optimizer",
                    s->opt->n, s->n,
                    p->overlap ? "bucket by bucket during backward"
                               : "after backward in one piece");
    }
    /* the whole gradient on the host: not for a sharded bucketed rank (its slots) */
    if (!(p->rs && p->overlap))
        p->host = ht_xmalloc((s->n + 1) * sizeof(float));
    s->impl = p;
}

/* ZeRO-2, bucketed: the floats of bucket b that each rank owns (its slice's part). */
static void owners_of(const bsp *p, const ht_bucket *b, size_t *cnt) {
    for (int r = 0; r < p->world; r++) {
        size_t lo = b->off > p->cut[r] ? b->off : p->cut[r];
        size_t hi = b->off + b->n < p->cut[r + 1] ? b->off + b->n : p->cut[r + 1];
        cnt[r] = hi > lo ? hi - lo : 0;
    }
}

/* ZeRO-2, bucketed: the owners' counts per bucket, and the host slots (the largest bucket). */
static void rs_make(bsp *p, size_t n) {
    p->bcnt = ht_xmalloc((size_t)p->nb * (size_t)p->world * sizeof *p->bcnt);
    for (int k = 0; k < p->nb; k++) {
        owners_of(p, &p->b[k], p->bcnt + (size_t)k * (size_t)p->world);
        if (p->b[k].n > p->slot) p->slot = p->b[k].n;
    }
    p->whole = RS_SLOTS * p->slot >= n;
    p->scap = p->whole ? n : RS_SLOTS * p->slot;
    p->stage = ht_xmalloc((p->scap ? p->scap : 1) * sizeof(float));
    const size_t mine = p->cut[ht_comm_rank() + 1] - p->cut[ht_comm_rank()];
    ht_log_debug("bsp: host copies of the gradients: the slice (%zu floats) and %s: %zu bytes "
                 "instead of %zu (the whole gradient)",
                 mine, p->whole ? "the whole gradient (two buckets would be more)"
                                : "2 slots of the largest bucket",
                 (mine + p->scap) * sizeof(float), (mine + n + 1) * sizeof(float));
}

static void buckets_make(bsp *p, const ht_model *m) {
    p->nb = ht_reduce_plan(m, p->first, p->cap, NULL, 0);
    p->b = ht_xcalloc((size_t)p->nb, sizeof *p->b);
    ht_reduce_plan(m, p->first, p->cap, p->b, p->nb);
    p->req = ht_xcalloc((size_t)p->nb, sizeof *p->req);
    p->t0 = ht_xcalloc((size_t)p->nb, sizeof(double));
    p->t1 = ht_xcalloc((size_t)p->nb, sizeof(double));
    if (p->rs) rs_make(p, m->nparams);
}

static void bsp_close(ht_sync *s) {
    bsp *p = s->impl;
    free(p->b);
    free(p->req);
    free(p->t0);
    free(p->t1);
    free(p->host);
    free(p->counts);
    free(p->mine);
    free(p->cut);
    free(p->bcnt);
    free(p->stage);
    free(p);
    s->impl = NULL;
}

/* Progresses every outstanding all-reduce and stamps the ones seen complete. */
static void poll(bsp *p, int started) {
    ht_comm_test(NULL);
    double now = ht_now();
    for (int k = 0; k < started; k++)
        if (p->t1[k] == 0 && ht_comm_test(p->req[k])) p->t1[k] = now;
}

/* Emulated slowdown: idles `sec` seconds, keeping communication moving as it would while a
 * slower device computed. */
static void idle_poll(bsp *p, int started, double sec) {
    if (!(sec > 0)) return;
    double start = ht_now(), end = start + sec;
    for (;;) {
        poll(p, started);
        double left = end - ht_now();
        if (left <= 0 || ht_stop_requested()) break; /* a stop ends the emulated idling */
        ht_sleep(left > 1e-4 ? 1e-4 : left); /* the run's clock: virtual under SMPI */
    }
    ht_trace_span("slowdown (emulated)", start, ht_now());
}

/* Length of the union of the in-flight intervals [t0, t1) clipped to [-inf, until). */
static double busy_before(const bsp *p, double until) {
    double total = 0, reach = -INFINITY;
    for (int k = 0; k < p->nb; k++) { /* started in time order: t0 ascending */
        double a = p->t0[k], b = p->t1[k] < until ? p->t1[k] : until;
        if (a < reach) a = reach;
        if (b > a) total += b - a;
        if (b > reach) reach = b;
    }
    return total;
}

/* ---------------------------------------------------------------- one piece */

/* ZeRO-2, the slice's summed gradients in p->mine: to the device (at the slice's place in the
 * gradient window), and the stop flags and the slice's sum of squares (double) summed over
 * ranks in one all-reduce; the global norm to the optimizer. The stop flag in host[n]. */
static void slice_done(ht_sync *s, int stop) {
    bsp *p = s->impl;
    const ht_optim *o = s->opt;
    const ht_model *m = s->m;
    ht_buf_write(m->dev, m->grads, (o->off - m->gbase) * sizeof(float), o->n * sizeof(float),
                 p->mine);
    ht_vcost(HT_VC_H2D, 0, 0, 0, o->n);
    double sums[2] = {stop ? 1.0 : 0.0, 0.0};
    for (size_t i = 0; i < o->n; i++)
        sums[1] += (double)p->mine[i] * (double)p->mine[i];
    ht_comm_allreduce_sum_f64(sums, 2);
    p->stopf = (float)sums[0];
    ht_optim_set_norm(s->opt, (float)sqrt(sums[1]));
}

/* ZeRO-2: each rank receives the sum of its slice of the gradients only (written at its
 * offset; the rest of its gradient buffer stays unreduced and is never read), the stop flag
 * and the slice's sum of squares summed apart; the global norm (clipping) from those sums,
 * in double: another summation order than the device's norm pass. */
static void reduce_scatter(ht_sync *s) {
    bsp *p = s->impl;
    ht_comm_reduce_scatter_sum(p->host, p->mine, p->counts);
    slice_done(s, p->host[s->n] > 0);
}

/* After a backward in one piece that took the step compute_s seconds so far: idles for the
 * emulated slowdown, then sums the gradients over ranks (the stop flag riding along), with
 * the wait for the slowest rank measured apart from the reduction itself. */
static void reduce_whole(ht_sync *s, double compute_s, int *stop) {
    bsp *p = s->impl;
    ht_model *m = s->m;
    double ti = ht_now();
    ht_sleep((s->slowdown - 1) * compute_s);
    if (s->slowdown != 1) ht_trace_span("slowdown (emulated)", ti, ht_now());
    s->st.compute_s += compute_s * s->slowdown;
    if (p->world == 1) return;
    const size_t n = s->n;
    double t0 = ht_now();
    ht_buf_read(m->dev, m->grads, 0, n * sizeof(float), p->host);
    ht_vcost(HT_VC_D2H, 0, 0, 0, n); /* virtual time: the staging, as hetsim's */
    p->host[n] = *stop ? 1.0f : 0.0f; /* every rank stops after the same step */
    double t1 = ht_now();
    ht_comm_barrier();
    double t2 = ht_now();
    if (p->rs)
        reduce_scatter(s);
    else if (p->ring)
        ht_comm_ring_allreduce(p->host, n + 1);
    else
        ht_comm_allreduce_sum(p->host, n + 1);
    if (!p->rs) ht_buf_write(m->dev, m->grads, 0, n * sizeof(float), p->host);
    if (!p->rs) ht_vcost(HT_VC_H2D, 0, 0, 0, n);
    *stop = (p->rs ? p->stopf : p->host[n]) > 0;
    double t3 = ht_now();
    s->st.wait_s += t2 - t1;
    s->st.comm_s += (t1 - t0) + (t3 - t2);
    ht_trace_span("gradients to host", t0, t1);
    ht_trace_span("wait", t1, t2);
    ht_trace_span("all-reduce", t2, t3);
}

/* ---------------------------------------------------------------- bucketed */

/* Sharded, bucketed: the host slot of bucket k, once the bucket that used it before has been
 * reduced (its request waited for here). */
static float *rs_slot(bsp *p, int k) {
    if (p->whole) return p->stage + p->b[k].off;
    const int old = k - RS_SLOTS;
    if (old >= 0 && p->req[old]) {
        ht_comm_wait(p->req[old]);
        p->req[old] = NULL;
        if (p->t1[old] == 0) p->t1[old] = ht_now();
    }
    return p->stage + (size_t)(k % RS_SLOTS) * p->slot;
}

/* Backward of bucket k, its gradients to the host and its all-reduce started; returns the
 * seconds of compute (emulated slowdown not included). */
static double bucket_start(ht_sync *s, int k, int B, float grad_scale, int stop_flag) {
    bsp *p = s->impl;
    ht_model *m = s->m;
    const ht_bucket *b = &p->b[k];
    const size_t n = s->n;
    /* ZeRO-2's per-slice gradients: a bucket outside the window passes through the gradient
     * buffer from its start; nothing there is needed while it does (the buckets before it
     * were read to the host, the slice's sums are written after the last) */
    const int staged = b->off < m->gbase || b->off + b->n > m->gbase + m->gres;
    ht_buf *g = m->grads;
    const size_t gb = staged ? b->off : m->gbase; /* g's first float in the layout */
    if (staged && b->n > m->gres)
        ht_die(HT_ERUNTIME, "bsp: bucket %d (%zu floats) outside the gradient window exceeds "
                            "the gradient buffer (%zu)", k, b->n, m->gres);
    double a = ht_now();
    if (B > 0 && staged)
        ht_model_backward_into(m, b->lo, b->hi, B, k == 0 ? grad_scale : 1.0f, g, gb);
    else if (B > 0)
        ht_model_backward_range(m, b->lo, b->hi, B, k == 0 ? grad_scale : 1.0f, 0);
    else if (b->n) /* share 0: this rank adds nothing to the sum */
        ht_buf_zero(m->dev, g, (b->off - gb) * sizeof(float), b->n * sizeof(float));
    poll(p, k);
    size_t len = b->n;
    float *h = p->rs ? rs_slot(p, k) : p->host + b->off; /* the bucket's host copy */
    if (k == 0 && !p->rs) {
        /* the first bucket ends at the top of the buffer: the stop flag rides along, so
         * every rank stops after the same step (ZeRO-2: summed after the buckets) */
        p->host[n] = stop_flag ? 1.0f : 0.0f;
        len++;
    }
    if (b->n) {
        ht_buf_read(m->dev, g, (b->off - gb) * sizeof(float), b->n * sizeof(float), h);
        ht_vcost(HT_VC_D2H, 0, 0, 0, b->n); /* virtual time: the staging, as hetsim's */
    } else
        ht_dev_finish(m->dev);
    double dt = ht_now() - a;
    idle_poll(p, k, (s->slowdown - 1) * dt);
    p->t0[k] = ht_now();
    p->t1[k] = 0;
    if (p->rs) { /* each owner receives the sum of its part of the bucket */
        const size_t *cnt = p->bcnt + (size_t)k * (size_t)p->world, me = p->cut[ht_comm_rank()];
        float *into = p->mine + (b->off > me ? b->off - me : 0);
        p->req[k] = ht_comm_ireduce_scatter(h, into, cnt, p->ring);
    } else {
        p->req[k] = ht_comm_iallreduce(p->host + (k == 0 ? n - b->n : b->off), len, p->ring);
    }
    poll(p, k + 1);
    return dt;
}

static void backward_bucketed(ht_sync *s, int B, float grad_scale, double t_start) {
    bsp *p = s->impl;
    ht_model *m = s->m;
    if (!p->b) buckets_make(p, m);
    ht_dev_finish(m->dev); /* the forward */
    double compute = ht_now() - t_start;
    idle_poll(p, 0, (s->slowdown - 1) * compute);
    const int stop = ht_stop_requested();
    for (int k = 0; k < p->nb; k++)
        compute += bucket_start(s, k, B, grad_scale, stop);
    double t_end_bwd = ht_now();
    for (int k = 0; k < p->nb; k++) {
        ht_comm_wait(p->req[k]);
        p->req[k] = NULL;
        if (p->t1[k] == 0) p->t1[k] = ht_now();
        ht_trace_span(p->rs ? "reduce-scatter bucket" : "all-reduce bucket", p->t0[k], p->t1[k]);
    }
    if (p->rs) {
        slice_done(s, stop);
    } else {
        ht_buf_write(m->dev, m->grads, 0, s->n * sizeof(float), p->host);
        ht_vcost(HT_VC_H2D, 0, 0, 0, s->n);
    }
    s->stop = (p->rs ? p->stopf : p->host[s->n]) > 0;
    double t_done = ht_now();
    ht_trace_span("all-reduce (not hidden)", t_end_bwd, t_done);
    s->st.compute_s += compute * s->slowdown;
    s->st.comm_s += t_done - t_end_bwd;
    s->st.hidden_s += busy_before(p, t_end_bwd);
}

/* ---------------------------------------------------------------- policy */

/* Backward plus the sum over ranks. t_start: the start of the step (the forward counts as
 * compute). Timing goes to the stats: compute_s (forward + backward, emulated slowdown
 * included), comm_s (overlapped: the communication left after backward, write-back
 * included), hidden_s (communication in flight while backward ran), wait_s (one piece only;
 * overlapped, waiting for slower ranks shows up in comm_s). */
static void bsp_backward(ht_sync *s, int B, float grad_scale, double t_start) {
    bsp *p = s->impl;
    if (p->world > 1 && p->overlap) {
        backward_bucketed(s, B, grad_scale, t_start);
        return;
    }
    if (B > 0)
        ht_model_backward(s->m, B, grad_scale);
    else /* share 0: this rank adds nothing to the sum */
        ht_buf_zero(s->m->dev, s->m->grads, 0, s->n * sizeof(float));
    int stop = ht_stop_requested();
    if (p->world > 1 || s->slowdown != 1) {
        ht_dev_finish(s->m->dev);
        reduce_whole(s, ht_now() - t_start, &stop);
    }
    s->stop = stop;
}

/* Sharded: each rank updated its slice; all of them to every rank, in rounds through the host
 * buffer (the whole gradient copy, or a bucketed rank's slots: host memory stays the slice's):
 * round j gathers floats [j q, (j + 1) q) of every slice, in place (this rank's part read
 * from the device at its place), and writes the others' parts to the device (its own is
 * there). */
static void gather_params(ht_sync *s) {
    bsp *p = s->impl;
    ht_model *m = s->m;
    const int me = ht_comm_rank(), w = p->world;
    if (!p->host && !p->b) buckets_make(p, m); /* the slots (made by the first backward) */
    float *buf = p->host ? p->host : p->stage;
    const size_t cap = p->host ? s->n + 1 : p->scap;
    const size_t q = cap / (size_t)w > 0 ? cap / (size_t)w : 1;
    size_t most = 0, *c = ht_xmalloc((size_t)w * sizeof *c);
    size_t *at = ht_xmalloc((size_t)w * sizeof *at);
    for (int r = 0; r < w; r++)
        if (p->cut[r + 1] - p->cut[r] > most) most = p->cut[r + 1] - p->cut[r];
    for (size_t lo = 0; lo < most; lo += q) {
        size_t tot = 0;
        for (int r = 0; r < w; r++) {
            const size_t len = p->cut[r + 1] - p->cut[r];
            const size_t f = len > lo ? (len - lo < q ? len - lo : q) : 0;
            c[r] = f * sizeof(float), at[r] = tot, tot += f;
        }
        if (c[me])
            ht_buf_read(m->dev, m->params, (p->cut[me] + lo) * sizeof(float), c[me], buf + at[me]);
        ht_comm_allgatherv(buf + at[me], c[me], buf, c);
        for (int r = 0; r < w; r++)
            if (r != me && c[r])
                ht_buf_write(m->dev, m->params, (p->cut[r] + lo) * sizeof(float), c[r],
                             buf + at[r]);
    }
    free(c);
    free(at);
}

/* The summed gradients are the same on every rank: one identical optimizer step. */
static void bsp_step(ht_sync *s, int b, float lr) {
    (void)b;
    ht_optim_step(s->opt, s->m->params, s->m->grads, lr);
    s->global += s->cfg->train.batch;
    bsp *p = s->impl;
    if (!p->counts) return;
    double t0 = ht_now();
    gather_params(s);
    double t1 = ht_now();
    s->st.comm_s += t1 - t0;
    ht_trace_span("all-gather (parameters)", t0, t1);
}

/* bsp has no extra ranks (serve) and nothing to gather at the end (finish): every rank holds
 * the same model after every step. */
/* no segments: bsp's checkpoints are in the shared step path (train/report.c) */
const ht_sync_policy ht_bsp_policy = {.open = bsp_open,
                                      .step = bsp_step,
                                      .close = bsp_close,
                                      .backward = bsp_backward};
