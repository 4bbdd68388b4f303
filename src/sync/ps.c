/* Parameter servers: asp, ssp and dasp. The flat parameters are cut into sync.servers
 * contiguous shards (src/comm's ring chunks), one per server rank; each server keeps its
 * shard and the optimizer state for it on its own device and applies the updates there.
 *
 * A worker's step: push its gradient shards (with its clock, the server version its
 * parameters came from and its compute seconds), then pull the parameters back; the pull
 * reply may be held by the server. A server serves whichever worker's push arrives first
 * (nonblocking receives posted for every worker), so no worker blocks another. Every gradient
 * is applied as its share of the global batch (b / train.batch) of a step: train.batch samples'
 * worth of pushes move the parameters as far as one bsp step. SGD scales the gradient; AdamW,
 * whose update does not change when its gradients are scaled, takes the share of the learning
 * rate (before 2026-11-28 it scaled the gradient too, so every push was a whole step).
 *
 *   asp   apply at once, reply at once.
 *   ssp   apply at once; reply when the worker's next clock c is allowed: every active worker
 *         has reached c - s (Ho et al., NIPS 2013).
 *   dasp  our rule for Ma Xiang et al. (2023), of which only the abstract is at hand. The
 *         server keeps each worker's state: a moving average of its iteration time (the
 *         compute seconds its pushes report, EMA weight 0.3), its clock, the staleness of its
 *         pushes. Every sync.interval updates it re-assigns parallel states (rules.h
 *         ht_dasp_assign): workers within sync.similar of their group's fastest form a SYNC
 *         group, run as BSP among themselves (their gradients summed into one update once
 *         every member has pushed, all released together); every other worker is ASYNC: its
 *         gradient is applied at once, scaled by min(1, units / staleness) (units: SYNC groups
 *         plus ASYNC workers), so a much slower worker's stale gradient counts less; an ASYNC
 *         worker more than sync.max_ahead clocks ahead of the slowest WAITs (its reply is
 *         held, as SSP with that bound; SYNC groups are paced by their slowest member).
 *
 * Server 0 also counts samples against the budget and sets the stop flag in its replies; a
 * stopped worker says BYE to every server; a server ends when every worker has, and then
 * sends worker 0 its final shard. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "core/vcost.h"
#include "io/metrics.h"
#include "io/trace.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "optim/lr_schedule.h"
#include "sync/internal.h"
#include "sync/rules.h"

/* ------------------------------------------------------------------------ worker side */

typedef struct ps_worker {
    int S;            /* servers */
    int ns;           /* optimizer state buffers (a server's state travels with its shard) */
    size_t *lo, *hi;  /* shard j: parameters [lo[j], hi[j]) */
    void **out, **in; /* per server: header + shard (push); header + shard + states (pull,
                         final) */
    int64_t clock;    /* pushes done */
    ht_metrics *log;  /* with sync.log: this worker's pushes and replies (tests/integration/sync.t) */
} ps_worker;

static size_t shard_bytes(const ps_worker *p, int j) {
    return sizeof(msg_hdr) + (p->hi[j] - p->lo[j]) * sizeof(float);
}

/* A shard with its optimizer state: INIT and FINAL. */
static size_t state_bytes(const ps_worker *p, int j) {
    return sizeof(msg_hdr) + (size_t)(p->ns + 1) * (p->hi[j] - p->lo[j]) * sizeof(float);
}

static void ps_open(ht_sync *s) {
    ps_worker *p = ht_xcalloc(1, sizeof *p);
    s->impl = p;
    p->S = s->L.extra;
    p->ns = ht_optim_state_count(s->opt);
    p->lo = ht_xcalloc((size_t)p->S, sizeof(size_t));
    p->hi = ht_xcalloc((size_t)p->S, sizeof(size_t));
    p->out = ht_xcalloc((size_t)p->S, sizeof(void *));
    p->in = ht_xcalloc((size_t)p->S, sizeof(void *));
    s->version = ht_xcalloc((size_t)p->S, sizeof(int64_t));
    s->opt_t = ht_xcalloc((size_t)p->S, sizeof(int64_t));
    for (int j = 0; j < p->S; j++) {
        s->opt_t[j] = s->opt->t; /* a resumed run's optimizer steps (one-process checkpoint) */
        ht_comm_ring_chunk(s->n, p->S, j, &p->lo[j], &p->hi[j]);
        p->out[j] = ht_xcalloc(1, state_bytes(p, j));
        p->in[j] = ht_xcalloc(1, state_bytes(p, j));
    }
    /* the worker's own account beside the server's decision log, "<sync.log>.w<rank>": a
     * check of the staleness bound need not trust the server's record of clocks */
    if (s->cfg->sync.log[0]) {
        char path[sizeof s->cfg->sync.log + 16];
        snprintf(path, sizeof path, "%s.w%d", s->cfg->sync.log, s->rank);
        ht_sync_logged(ht_metrics_open(&p->log, path, 0));
    }
}

/* Shard j of the device buffer b into x (len floats). */
static void shard_read(ht_sync *s, const ht_buf *b, int j, float *x) {
    ps_worker *p = s->impl;
    ht_buf_read(s->m->dev, b, p->lo[j] * sizeof(float), (p->hi[j] - p->lo[j]) * sizeof(float), x);
    ht_vcost(HT_VC_D2H, 0, 0, 0, p->hi[j] - p->lo[j]); /* virtual time, as hetsim's */
}

static void shard_write(ht_sync *s, ht_buf *b, int j, const float *x) {
    ps_worker *p = s->impl;
    ht_buf_write(s->m->dev, b, p->lo[j] * sizeof(float), (p->hi[j] - p->lo[j]) * sizeof(float),
                 x);
    ht_vcost(HT_VC_H2D, 0, 0, 0, p->hi[j] - p->lo[j]);
}

/* Worker 0 hands each server its shard, optimizer state, version and optimizer steps (at
 * the start: the initial or resumed model; later: what the server sent at the quiesce). */
static void ps_begin(ht_sync *s, int64_t until) {
    ps_worker *p = s->impl;
    if (s->rank != 0) return;
    for (int j = 0; j < p->S; j++) {
        size_t len = p->hi[j] - p->lo[j];
        float *x = PAYLOAD(p->out[j]);
        shard_read(s, s->m->params, j, x);
        for (int i = 0; i < p->ns; i++) {
            const char *name;
            ht_buf *buf;
            size_t n;
            ht_optim_state(s->opt, i, &name, &buf, &n);
            shard_read(s, buf, j, x + (size_t)(i + 1) * len);
        }
        msg_hdr h = {.version = s->version[j], .aux = s->opt_t[j]};
        ht_sync_send_init(s, s->L.workers + j, until, &h, (int64_t)len, x, (p->ns + 1) * len);
    }
}

static void ps_step(ht_sync *s, int b, float lr) {
    (void)lr; /* the servers follow the schedule */
    ps_worker *p = s->impl;
    double t0 = ht_now();
    ht_comm_msg **msgs = ht_xcalloc((size_t)(2 * p->S), sizeof *msgs);
    for (int j = 0; j < p->S; j++) {
        msg_hdr *h = p->out[j];
        *h = (msg_hdr){.kind = MSG_PUSH,
                       .clock = p->clock,
                       .samples = b,
                       .version = s->version[j],
                       .held_s = s->last_compute,
                       .aux = ht_stop_requested()};
        shard_read(s, s->m->grads, j, PAYLOAD(h));
        msgs[2 * j + 1] = ht_comm_irecv(p->in[j], shard_bytes(p, j), s->L.workers + j, TAG_PULL);
        msgs[2 * j] = ht_comm_isend(h, shard_bytes(p, j), s->L.workers + j, TAG_PUSH);
    }
    double held = 0;
    for (int k = 0; k < 2 * p->S; k++)
        ht_comm_msg_wait(msgs[k], NULL, NULL);
    free(msgs);
    for (int j = 0; j < p->S; j++) {
        const msg_hdr *h = p->in[j];
        if (h->kind != MSG_PARAMS) ht_die(HT_ERUNTIME, "sync: unexpected reply from server %d", j);
        shard_write(s, s->m->params, j, PAYLOAD(h));
        s->version[j] = h->version;
        if (h->held_s > held) held = h->held_s;
        if (h->id == STOP_INTERRUPT) s->told_interrupt = 1;
        if (j == 0) {
            s->global = h->samples;
            s->stop = h->id != STOP_NO;
        }
    }
    double t1 = ht_now(), t = t1 - t0;
    if (p->log) /* t_push before the push left, t_reply after the reply came */
        ht_sync_logged(ht_metrics_write(p->log,
                                        "type=%s worker=%d clock=%lld t_push=%f t_reply=%f stop=%d",
                                        "push", s->rank, (long long)p->clock, t0, t1, s->stop));
    p->clock++;
    if (held > 0) ht_trace_span("wait (reply held)", t1 - (held < t ? held : t), t1);
    s->st.wait_s += held < t ? held : t;
    s->st.comm_s += held < t ? t - held : 0;
}

/* BYE to every server; worker 0 then takes each server's shard, optimizer state, version
 * and optimizer steps into its own model and optimizer (the job's state). */
static void ps_quiesce(ht_sync *s) {
    ps_worker *p = s->impl;
    msg_hdr bye = {.kind = MSG_BYE, .clock = p->clock};
    for (int j = 0; j < p->S; j++)
        ht_comm_send(&bye, sizeof bye, s->L.workers + j, TAG_PUSH);
    if (s->rank != 0) return;
    for (int j = 0; j < p->S; j++) {
        size_t len = p->hi[j] - p->lo[j];
        ht_comm_msg_wait(ht_comm_irecv(p->in[j], state_bytes(p, j), s->L.workers + j, TAG_FINAL),
                         NULL, NULL);
        const msg_hdr *h = p->in[j];
        const float *x = PAYLOAD(h);
        shard_write(s, s->m->params, j, x);
        for (int i = 0; i < p->ns; i++) {
            const char *name;
            ht_buf *buf;
            size_t n;
            ht_optim_state(s->opt, i, &name, &buf, &n);
            shard_write(s, buf, j, x + (size_t)(i + 1) * len);
        }
        s->version[j] = h->version;
        s->opt_t[j] = h->aux;
    }
    s->opt->t = s->opt_t[0];
}

static void ps_get(const ht_sync *s, double *v) { v[0] = (double)((ps_worker *)s->impl)->clock; }
static void ps_set(ht_sync *s, const double *v) { ((ps_worker *)s->impl)->clock = (int64_t)v[0]; }

static void ps_close(ht_sync *s) {
    ps_worker *p = s->impl;
    if (p->log) ht_sync_logged(ht_metrics_close(p->log));
    for (int j = 0; j < p->S; j++) {
        free(p->out[j]);
        free(p->in[j]);
    }
    free(p->out);
    free(p->in);
    free(p->lo);
    free(p->hi);
    free(p);
}

/* ------------------------------------------------------------------------ server side */

typedef struct server {
    const ht_config *cfg;
    int mode, W, first; /* first: this is server 0 (budget, stop, log) */
    size_t len;         /* shard floats */
    ht_dev *dev;
    ht_optim opt;
    ht_buf *params, *grads;
    ht_lr_sched sched;
    int64_t total, until, samples, version; /* until: the segment's end in samples */
    int stop, ns;
    float *x;         /* the shard on the host, as after the last update */
    void **in, **out; /* per worker: header + shard */
    ht_comm_msg **rmsg, **smsg;
    int64_t *clock;
    int *active, nactive;
    int *pending; /* a reply is owed */
    double *since, *tau;
    /* dasp */
    int *state, *group, *pushed, units;
    float *acc; /* [W] x len: a SYNC group's summed gradients, by group number */
    double *accw; /* [W] the shares summed into each group's acc */
    int *nacc;  /* [W] members summed per group */
    int64_t last_assign;
    ht_metrics *log;
    ht_sync_stats *st;
} server;

/* One optimizer update of the shard with gradient g (len floats, scaled in place by gscale)
 * at lrscale x the schedule's rate. Virtual time (core/vcost.h), as hetsim's ps_apply charges
 * it: the scaling pass, the copies to and from the device and the optimizer step (which
 * reports itself). */
static void apply(server *v, float *g, double gscale, double lrscale) {
    if (gscale != 1) {
        for (size_t i = 0; i < v->len; i++)
            g[i] = (float)(g[i] * gscale);
        ht_vcost(HT_VC_HOST, 0, 0, 0, v->len);
    }
    int64_t step = v->samples / v->cfg->train.batch;
    float lr = (float)ht_lr_at(&v->sched, step < v->total ? step : v->total - 1, v->total);
    lr = (float)(lr * lrscale);
    ht_buf_write(v->dev, v->grads, 0, v->len * sizeof(float), g);
    ht_vcost(HT_VC_H2D, 0, 0, 0, v->len);
    ht_optim_step(&v->opt, v->params, v->grads, lr);
    ht_buf_read(v->dev, v->params, 0, v->len * sizeof(float), v->x);
    ht_vcost(HT_VC_D2H, 0, 0, 0, v->len);
    v->version++;
    v->st->steps++;
}

/* An update worth `share` of a bsp step, from gradient g (rules.h ht_ps_share_scales). */
static void apply_share(server *v, float *g, double share) {
    double gs, ls;
    ht_ps_share_scales(v->opt.cfg.type == HT_OPT_ADAMW, share, &gs, &ls);
    apply(v, g, gs, ls);
}

static int64_t min_clock(const server *v) { return ht_ssp_min_clock(v->clock, v->active, v->W); }

static int may_release(const server *v, int w) {
    if (v->stop || !v->active[w]) return 1;
    switch (v->mode) {
    case HT_SYNC_SSP:
        return ht_ssp_may_run(v->clock[w], min_clock(v), v->cfg->sync.staleness);
    case HT_SYNC_DASP:
        if (v->pushed[w]) return 0; /* its SYNC group has not all pushed yet */
        /* SYNC members are paced by their group (holding one for the slowest could wait on
         * a group mate held in turn: a cycle); WAIT is for ASYNC workers */
        return v->state[w] == HT_DASP_SYNC || v->cfg->sync.max_ahead == 0 ||
               ht_ssp_may_run(v->clock[w], min_clock(v), v->cfg->sync.max_ahead);
    default:
        return 1;
    }
}

static void reply(server *v, int w) {
    if (v->smsg[w]) ht_comm_msg_wait(v->smsg[w], NULL, NULL);
    double now = ht_now();
    msg_hdr *h = v->out[w];
    *h = (msg_hdr){.kind = MSG_PARAMS,
                   .samples = v->samples,
                   .version = v->version,
                   .id = v->stop,
                   .held_s = now - v->since[w]};
    memcpy(PAYLOAD(h), v->x, v->len * sizeof(float));
    ht_vcost(HT_VC_HOST, 0, 0, 0, v->len);
    v->smsg[w] = ht_comm_isend(h, sizeof(msg_hdr) + v->len * sizeof(float), w, TAG_PULL);
    v->pending[w] = 0;
    if (v->log)
        ht_sync_logged(
            ht_metrics_write(v->log,
                             "type=%s t=%f worker=%d clock=%lld min_clock=%lld held_ms=%f "
                             "version=%lld stop=%d",
                             "release", now, w, (long long)v->clock[w], (long long)min_clock(v),
                             1e3 * (now - v->since[w]), (long long)v->version, v->stop));
}

/* DASP: applies SYNC group g's summed gradients as one update; its members may go on. */
static void flush_group(server *v, int g) {
    /* acc holds sum share_i g_i: SGD applies it as is; AdamW its mean gradient at accw of
     * the rate (scaling its gradient would change nothing) */
    float *a = v->acc + (size_t)g * v->len;
    double sum = v->accw[g];
    if (v->opt.cfg.type == HT_OPT_ADAMW && sum > 0)
        apply(v, a, 1.0 / sum, sum);
    else
        apply(v, a, 1.0, 1.0);
    memset(a, 0, v->len * sizeof(float));
    v->nacc[g] = 0;
    v->accw[g] = 0;
    for (int w = 0; w < v->W; w++)
        if (v->group[w] == g) v->pushed[w] = 0;
}

/* DASP: a SYNC group whose active members have all pushed applies their update. */
static void dasp_complete_groups(server *v) {
    for (int g = 0; g < v->W; g++) {
        if (!v->nacc[g]) continue;
        int waiting = 0;
        for (int w = 0; w < v->W; w++)
            waiting +=
                v->active[w] && v->group[w] == g && v->state[w] == HT_DASP_SYNC && !v->pushed[w];
        if (!waiting) flush_group(v, g);
    }
}

/* DASP: new parallel states from the measured iteration times (partial groups flushed
 * first, so nobody waits for a group it is no longer in). */
static void dasp_assign(server *v) {
    for (int g = 0; g < v->W; g++)
        if (v->nacc[g]) flush_group(v, g);
    v->units = ht_dasp_assign(v->tau, v->active, v->W, v->cfg->sync.similar, v->state, v->group);
    if (v->log) {
        char states[1024] = "", groups[512] = "", taus[1024] = "";
        for (int w = 0; w < v->W; w++) {
            ht_sync_cat(states, sizeof states, "%s",
                        v->state[w] == HT_DASP_SYNC ? "sync" : "async");
            ht_sync_cat(groups, sizeof groups, "%d", v->group[w]);
            ht_sync_cat(taus, sizeof taus, "%.3f", 1e3 * v->tau[w]);
        }
        ht_sync_logged(ht_metrics_write(v->log,
                                        "type=%s t=%f version=%lld states=%s groups=%s tau_ms=%s "
                                        "units=%d",
                                        "assign", ht_now(), (long long)v->version, states, groups,
                                        taus, v->units));
    }
    v->last_assign = v->version;
}

static void on_push(server *v, int w) {
    msg_hdr *h = v->in[w];
    double now = ht_now();
    /* the worker's own compute seconds, not the time between its pushes: waiting in a SYNC
     * group must not make a worker look slow */
    double dt = h->held_s;
    v->tau[w] = v->tau[w] > 0 ? 0.7 * v->tau[w] + 0.3 * dt : dt;
    v->samples += h->samples;
    v->clock[w] = h->clock + 1;
    int64_t sigma = v->version - h->version;
    /* a push of b samples is b / train.batch of a global step: W equal pushes move the
     * parameters as far as one bsp step (and a SYNC group of all workers is exactly bsp) */
    double share = (double)h->samples / v->cfg->train.batch;
    if (v->mode != HT_SYNC_DASP) {
        apply_share(v, PAYLOAD(h), share);
    } else if (v->state[w] == HT_DASP_SYNC) {
        float *a = v->acc + (size_t)v->group[w] * v->len;
        const float *g = PAYLOAD(h);
        for (size_t i = 0; i < v->len; i++)
            a[i] += (float)(share * g[i]);
        ht_vcost(HT_VC_HOST, 0, 0, 0, v->len);
        v->nacc[v->group[w]]++;
        v->accw[v->group[w]] += share;
        v->pushed[w] = 1;
    } else {
        apply_share(v, PAYLOAD(h), share * ht_dasp_scale(sigma, v->units));
    }
    v->pending[w] = 1;
    v->since[w] = now;
    if (v->first) v->stop = ht_sync_stop_update(v->stop, v->samples, v->until, h->aux);
}

static void server_free(server *v) {
    for (int w = 0; v->in && w < v->W; w++) {
        if (v->smsg[w]) ht_comm_msg_wait(v->smsg[w], NULL, NULL);
        free(v->in[w]);
        free(v->out[w]);
    }
    free(v->in);
    free(v->out);
    free(v->rmsg);
    free(v->smsg);
    free(v->clock);
    free(v->active);
    free(v->pending);
    free(v->since);
    free(v->tau);
    free(v->state);
    free(v->group);
    free(v->pushed);
    free(v->acc);
    free(v->nacc);
    free(v->accw);
    free(v->x);
    if (v->params) ht_buf_free(v->params);
    if (v->grads) ht_buf_free(v->grads);
    if (v->dev) {
        ht_optim_free(&v->opt);
        ht_dev_close(v->dev);
    }
}

/* The device, optimizer and per-worker arrays, at the first INIT (h: its header). */
static int server_open(server *v, const msg_hdr *h, const char *sel) {
    const ht_config *cfg = v->cfg;
    v->len = (size_t)h->n;
    v->x = ht_xmalloc((v->len ? v->len : 1) * sizeof(float));
    int idx = 0, rc = ht_ocl_select(sel, &idx);
    ht_dev_opts dopts = ht_dev_opts_default();
    dopts.cache = cfg->device.cache;
    dopts.cache_dir = cfg->device.cache_dir;
    dopts.tuning = cfg->device.tuning;
    if (rc == HT_OK) rc = ht_dev_open(&v->dev, idx, &dopts);
    if (rc != HT_OK) return rc; /* the caller's error exits the job (MPI_Abort) */
    ht_optim_cfg ocfg = ht_optim_cfg_from(cfg);
    ht_optim_init(&v->opt, v->dev, &ocfg, v->len ? v->len : 1);
    v->ns = ht_optim_state_count(&v->opt);
    v->params = ht_buf_new(v->dev, (v->len ? v->len : 1) * sizeof(float), "server parameters");
    v->grads = ht_buf_new(v->dev, (v->len ? v->len : 1) * sizeof(float), "server gradients");
    v->sched = ht_lr_sched_from(cfg);
    if (v->first && cfg->sync.log[0] && (rc = ht_metrics_open(&v->log, cfg->sync.log, 0)) != HT_OK)
        return rc;
    int W = v->W;
    size_t bytes = sizeof(msg_hdr) + v->len * sizeof(float);
    v->in = ht_xcalloc((size_t)W, sizeof(void *));
    v->out = ht_xcalloc((size_t)W, sizeof(void *));
    v->rmsg = ht_xcalloc((size_t)W, sizeof(ht_comm_msg *));
    v->smsg = ht_xcalloc((size_t)W, sizeof(ht_comm_msg *));
    v->clock = ht_xcalloc((size_t)W, sizeof(int64_t));
    v->active = ht_xcalloc((size_t)W, sizeof(int));
    v->pending = ht_xcalloc((size_t)W, sizeof(int));
    v->since = ht_xcalloc((size_t)W, sizeof(double));
    v->tau = ht_xcalloc((size_t)W, sizeof(double));
    v->state = ht_xcalloc((size_t)W, sizeof(int));
    v->group = ht_xcalloc((size_t)W, sizeof(int));
    v->pushed = ht_xcalloc((size_t)W, sizeof(int));
    v->nacc = ht_xcalloc((size_t)W, sizeof(int));
    v->accw = ht_xcalloc((size_t)W, sizeof(double));
    if (v->mode == HT_SYNC_DASP) v->acc = ht_xcalloc((size_t)W * v->len + 1, sizeof(float));
    for (int w = 0; w < W; w++) {
        /* the largest message: a final shard with its optimizer state */
        v->in[w] = ht_xcalloc(1, bytes);
        v->out[w] = ht_xcalloc(1, sizeof(msg_hdr) + (size_t)(v->ns + 1) * v->len * sizeof(float));
    }
    return HT_OK;
}

/* A segment's start (h: its INIT): shard, optimizer state, counters from worker 0; every
 * worker active again, DASP's states as at the start (re-measured). */
static void server_begin(server *v, const msg_hdr *h) {
    float *pay = ht_xmalloc((size_t)(v->ns + 1) * (v->len ? v->len : 1) * sizeof(float));
    ht_comm_recv(pay, (size_t)(v->ns + 1) * v->len * sizeof(float), 0, TAG_INIT);
    memcpy(v->x, pay, v->len * sizeof(float));
    ht_buf_write(v->dev, v->params, 0, v->len * sizeof(float), v->x);
    for (int i = 0; i < v->ns; i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(&v->opt, i, &name, &buf, &n);
        ht_buf_write(v->dev, buf, 0, v->len * sizeof(float), pay + (size_t)(i + 1) * v->len);
    }
    free(pay);
    v->opt.t = h->aux;
    v->version = v->last_assign = h->version;
    v->samples = h->clock;
    v->until = h->samples;
    v->total = h->id;
    v->stop = STOP_NO;
    size_t bytes = sizeof(msg_hdr) + v->len * sizeof(float);
    for (int w = 0; w < v->W; w++) {
        v->active[w] = 1;
        v->pending[w] = v->pushed[w] = v->nacc[w] = 0, v->accw[w] = 0;
        v->clock[w] = 0;
        v->tau[w] = 0;
        v->state[w] = HT_DASP_ASYNC;
        v->group[w] = -1;
        v->rmsg[w] = ht_comm_irecv(v->in[w], bytes, w, TAG_PUSH);
    }
    if (v->acc) memset(v->acc, 0, (size_t)v->W * v->len * sizeof(float));
    v->nactive = v->W;
    v->units = v->W; /* every worker ASYNC until iteration times are known */
}

/* Serves pushes until every worker has said BYE. */
static void server_segment(server *v) {
    const int W = v->W;
    ht_sync_stats *st = v->st;
    size_t bytes = sizeof(msg_hdr) + v->len * sizeof(float);
    while (v->nactive > 0) {
        double t0 = ht_now();
        int w = ht_comm_msg_waitany(v->rmsg, W, -1);
        double t1 = ht_now();
        st->wait_s += t1 - t0;
        ht_trace_span("wait", t0, t1);
        ht_comm_msg_free(v->rmsg[w]);
        v->rmsg[w] = NULL;
        const msg_hdr *m = v->in[w];
        if (m->kind == MSG_BYE) {
            v->active[w] = 0;
            v->nactive--;
            v->pushed[w] = 0;
        } else {
            on_push(v, w);
            v->rmsg[w] = ht_comm_irecv(v->in[w], bytes, w, TAG_PUSH);
        }
        if (v->mode == HT_SYNC_DASP) {
            if (v->version - v->last_assign >= v->cfg->sync.interval) dasp_assign(v);
            dasp_complete_groups(v);
        }
        for (int k = 0; k < W; k++)
            if (v->pending[k] && may_release(v, k)) reply(v, k);
        ht_trace_span(w >= 0 && m->kind == MSG_BYE ? "bye" : "update", t1, ht_now());
        st->comm_s += ht_now() - t1;
    }
}

/* Every worker has said BYE: the shard, its optimizer state, version and optimizer steps to
 * worker 0 (DASP: a SYNC group's partial sum is applied first). */
static void server_final(server *v) {
    for (int g = 0; v->mode == HT_SYNC_DASP && g < v->W; g++)
        if (v->nacc[g]) flush_group(v, g);
    msg_hdr *f = v->out[0];
    if (v->smsg[0]) ht_comm_msg_wait(v->smsg[0], NULL, NULL);
    v->smsg[0] = NULL;
    *f = (msg_hdr){
        .kind = MSG_PARAMS, .samples = v->samples, .version = v->version, .aux = v->opt.t};
    float *x = PAYLOAD(f);
    memcpy(x, v->x, v->len * sizeof(float));
    for (int i = 0; i < v->ns; i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(&v->opt, i, &name, &buf, &n);
        ht_buf_read(v->dev, buf, 0, v->len * sizeof(float), x + (size_t)(i + 1) * v->len);
    }
    ht_comm_send(f, sizeof(msg_hdr) + (size_t)(v->ns + 1) * v->len * sizeof(float), 0, TAG_FINAL);
}

static int ps_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                    ht_sync_stats *st) {
    server v = {
        .cfg = cfg, .mode = L->mode, .W = L->workers, .first = rank == L->workers, .st = st};
    msg_hdr h;
    int rc = HT_OK, opened = 0;
    while (rc == HT_OK && ht_sync_recv_init(&h) == MSG_INIT) {
        if (!opened && (rc = server_open(&v, &h, sel)) != HT_OK) break;
        opened = 1;
        server_begin(&v, &h);
        st->samples -= v.samples; /* this process's samples, as the workers' records */
        server_segment(&v);
        server_final(&v);
        st->samples += v.samples;
    }
    if (rc == HT_OK) rc = ht_sync_fin_rc(&h);
    if (v.log) {
        ht_sync_logged(ht_metrics_write(v.log, "type=%s t=%f updates=%lld samples=%lld", "end",
                                        ht_now(), (long long)v.version, (long long)v.samples));
        int crc = ht_metrics_close(v.log);
        if (rc == HT_OK) rc = crc;
    }
    server_free(&v);
    return rc;
}

const ht_sync_policy ht_ps_policy = {.open = ps_open,
                                     .step = ps_step,
                                     .close = ps_close,
                                     .serve = ps_serve,
                                     .begin = ps_begin,
                                     .quiesce = ps_quiesce,
                                     .get = ps_get,
                                     .set = ps_set};
