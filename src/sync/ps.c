/* Parameter servers: asp, ssp and dasp. The flat parameters are cut into sync.servers
 * contiguous shards (src/comm's ring chunks), one per server rank; each server keeps its
 * shard and the optimizer state for it on its own device and applies the updates there.
 *
 * A worker's step: push its gradient shards (with its clock, the server version its
 * parameters came from and its compute seconds), then pull the parameters back; the pull
 * reply may be held by the server. A server serves whichever worker's push arrives first
 * (nonblocking receives posted for every worker), so no worker blocks another. Every gradient
 * is applied scaled by its share of the global batch (b / train.batch): train.batch samples'
 * worth of pushes move the parameters as far as one bsp step.
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
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "io/metrics.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "sync/internal.h"
#include "sync/rules.h"

/* ------------------------------------------------------------------------ worker side */

typedef struct ps_worker {
    int S;            /* servers */
    size_t *lo, *hi;  /* shard j: parameters [lo[j], hi[j]) */
    void **out, **in; /* per server: header + shard (push), header + shard (pull) */
    int64_t *version; /* per server: the version of the shard last pulled */
    int64_t clock;    /* pushes done */
} ps_worker;

static size_t shard_bytes(const ps_worker *p, int j) {
    return sizeof(msg_hdr) + (p->hi[j] - p->lo[j]) * sizeof(float);
}

static void ps_open(ht_sync *s) {
    ps_worker *p = ht_xcalloc(1, sizeof *p);
    s->impl = p;
    p->S = s->L.extra;
    p->lo = ht_xcalloc((size_t)p->S, sizeof(size_t));
    p->hi = ht_xcalloc((size_t)p->S, sizeof(size_t));
    p->out = ht_xcalloc((size_t)p->S, sizeof(void *));
    p->in = ht_xcalloc((size_t)p->S, sizeof(void *));
    p->version = ht_xcalloc((size_t)p->S, sizeof(int64_t));
    for (int j = 0; j < p->S; j++) {
        ht_comm_ring_chunk(s->n, p->S, j, &p->lo[j], &p->hi[j]);
        p->out[j] = ht_xcalloc(1, shard_bytes(p, j));
        p->in[j] = ht_xcalloc(1, shard_bytes(p, j));
    }
    if (s->rank != 0) return;
    float *x = ht_xmalloc(s->n * sizeof(float));
    ht_sync_params_read(s, x);
    for (int j = 0; j < p->S; j++)
        ht_sync_send_init(s, s->L.workers + j, (int64_t)(p->hi[j] - p->lo[j]), x + p->lo[j]);
    free(x);
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
                       .version = p->version[j],
                       .held_s = s->last_compute};
        ht_buf_read(s->m->dev, s->m->grads, p->lo[j] * sizeof(float),
                    (p->hi[j] - p->lo[j]) * sizeof(float), PAYLOAD(h));
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
        ht_buf_write(s->m->dev, s->m->params, p->lo[j] * sizeof(float),
                     (p->hi[j] - p->lo[j]) * sizeof(float), PAYLOAD(h));
        p->version[j] = h->version;
        if (h->held_s > held) held = h->held_s;
        if (j == 0) {
            s->global = h->samples;
            s->stop = h->id != 0;
        }
    }
    p->clock++;
    double t = ht_now() - t0;
    s->st.wait_s += held < t ? held : t;
    s->st.comm_s += held < t ? t - held : 0;
}

static void ps_finish(ht_sync *s) {
    ps_worker *p = s->impl;
    msg_hdr bye = {.kind = MSG_BYE, .clock = p->clock};
    for (int j = 0; j < p->S; j++)
        ht_comm_send(&bye, sizeof bye, s->L.workers + j, TAG_PUSH);
    if (s->rank != 0) return;
    for (int j = 0; j < p->S; j++) {
        ht_comm_msg_wait(ht_comm_irecv(p->in[j], shard_bytes(p, j), s->L.workers + j, TAG_FINAL),
                         NULL, NULL);
        ht_buf_write(s->m->dev, s->m->params, p->lo[j] * sizeof(float),
                     (p->hi[j] - p->lo[j]) * sizeof(float), PAYLOAD(p->in[j]));
    }
}

static void ps_close(ht_sync *s) {
    ps_worker *p = s->impl;
    for (int j = 0; j < p->S; j++) {
        free(p->out[j]);
        free(p->in[j]);
    }
    free(p->out);
    free(p->in);
    free(p->lo);
    free(p->hi);
    free(p->version);
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
    int64_t total, budget, samples, version;
    int stop;
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
    int *nacc;  /* [W] members summed per group */
    int64_t last_assign;
    ht_metrics *log;
    ht_sync_stats *st;
} server;

/* One optimizer update of the shard with gradient g (len floats, scaled in place by scale). */
static void apply(server *v, float *g, double scale) {
    if (scale != 1)
        for (size_t i = 0; i < v->len; i++)
            g[i] = (float)(g[i] * scale);
    int64_t step = v->samples / v->cfg->train.batch;
    float lr = (float)ht_lr_at(&v->sched, step < v->total ? step : v->total - 1, v->total);
    ht_buf_write(v->dev, v->grads, 0, v->len * sizeof(float), g);
    ht_optim_step(&v->opt, v->params, v->grads, lr);
    ht_buf_read(v->dev, v->params, 0, v->len * sizeof(float), v->x);
    v->version++;
    v->st->steps++;
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
    apply(v, v->acc + (size_t)g * v->len, 1.0);
    memset(v->acc + (size_t)g * v->len, 0, v->len * sizeof(float));
    v->nacc[g] = 0;
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
        apply(v, PAYLOAD(h), share);
    } else if (v->state[w] == HT_DASP_SYNC) {
        float *a = v->acc + (size_t)v->group[w] * v->len;
        const float *g = PAYLOAD(h);
        for (size_t i = 0; i < v->len; i++)
            a[i] += (float)(share * g[i]);
        v->nacc[v->group[w]]++;
        v->pushed[w] = 1;
    } else {
        apply(v, PAYLOAD(h), share * ht_dasp_scale(sigma, v->units));
    }
    v->pending[w] = 1;
    v->since[w] = now;
    if (v->first && v->samples >= v->budget) v->stop = 1;
}

static void server_free(server *v) {
    for (int w = 0; w < v->W; w++) {
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
    free(v->x);
    if (v->params) ht_buf_free(v->params);
    if (v->grads) ht_buf_free(v->grads);
    if (v->dev) {
        ht_optim_free(&v->opt);
        ht_dev_close(v->dev);
    }
}

static int ps_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                    ht_sync_stats *st) {
    server v = {
        .cfg = cfg, .mode = L->mode, .W = L->workers, .first = rank == L->workers, .st = st};
    msg_hdr h;
    ht_sync_recv_init(&h);
    v.len = (size_t)h.n;
    v.total = h.id;
    v.budget = h.samples;
    v.x = ht_xmalloc((v.len ? v.len : 1) * sizeof(float));
    ht_comm_recv(v.x, v.len * sizeof(float), 0, TAG_INIT);

    int idx = 0, rc = ht_ocl_select(sel, &idx);
    ht_dev_opts dopts = ht_dev_opts_default();
    dopts.cache = cfg->device.cache;
    dopts.cache_dir = cfg->device.cache_dir;
    dopts.tuning = cfg->device.tuning;
    if (rc == HT_OK) rc = ht_dev_open(&v.dev, idx, &dopts);
    if (rc != HT_OK) return rc; /* the caller's error exits the job (MPI_Abort) */
    ht_optim_cfg ocfg = ht_optim_cfg_from(cfg);
    ht_optim_init(&v.opt, v.dev, &ocfg, v.len ? v.len : 1);
    v.params = ht_buf_new(v.dev, (v.len ? v.len : 1) * sizeof(float), "server parameters");
    v.grads = ht_buf_new(v.dev, (v.len ? v.len : 1) * sizeof(float), "server gradients");
    ht_buf_write(v.dev, v.params, 0, v.len * sizeof(float), v.x);
    v.sched = ht_lr_sched_from(cfg);
    if (v.first && cfg->sync.log[0] && (rc = ht_metrics_open(&v.log, cfg->sync.log, 0)) != HT_OK) {
        server_free(&v);
        return rc;
    }
    int W = v.W;
    size_t bytes = sizeof(msg_hdr) + v.len * sizeof(float);
    v.in = ht_xcalloc((size_t)W, sizeof(void *));
    v.out = ht_xcalloc((size_t)W, sizeof(void *));
    v.rmsg = ht_xcalloc((size_t)W, sizeof(ht_comm_msg *));
    v.smsg = ht_xcalloc((size_t)W, sizeof(ht_comm_msg *));
    v.clock = ht_xcalloc((size_t)W, sizeof(int64_t));
    v.active = ht_xcalloc((size_t)W, sizeof(int));
    v.pending = ht_xcalloc((size_t)W, sizeof(int));
    v.since = ht_xcalloc((size_t)W, sizeof(double));
    v.tau = ht_xcalloc((size_t)W, sizeof(double));
    v.state = ht_xcalloc((size_t)W, sizeof(int));
    v.group = ht_xcalloc((size_t)W, sizeof(int));
    v.pushed = ht_xcalloc((size_t)W, sizeof(int));
    v.nacc = ht_xcalloc((size_t)W, sizeof(int));
    if (v.mode == HT_SYNC_DASP) v.acc = ht_xcalloc((size_t)W * v.len + 1, sizeof(float));
    for (int w = 0; w < W; w++) {
        v.in[w] = ht_xcalloc(1, bytes);
        v.out[w] = ht_xcalloc(1, bytes);
        v.active[w] = 1;
        v.group[w] = -1;
        v.rmsg[w] = ht_comm_irecv(v.in[w], bytes, w, TAG_PUSH);
    }
    v.nactive = W;
    v.units = W; /* every worker ASYNC until iteration times are known */
    while (v.nactive > 0) {
        double t0 = ht_now();
        int w = ht_comm_msg_waitany(v.rmsg, W, -1);
        st->wait_s += ht_now() - t0;
        double t1 = ht_now();
        ht_comm_msg_free(v.rmsg[w]);
        v.rmsg[w] = NULL;
        const msg_hdr *m = v.in[w];
        if (m->kind == MSG_BYE) {
            v.active[w] = 0;
            v.nactive--;
            v.pushed[w] = 0;
        } else {
            on_push(&v, w);
            v.rmsg[w] = ht_comm_irecv(v.in[w], bytes, w, TAG_PUSH);
        }
        if (v.mode == HT_SYNC_DASP) {
            if (v.version - v.last_assign >= cfg->sync.interval) dasp_assign(&v);
            dasp_complete_groups(&v);
        }
        for (int k = 0; k < W; k++)
            if (v.pending[k] && may_release(&v, k)) reply(&v, k);
        st->comm_s += ht_now() - t1;
    }
    st->samples = v.samples;
    /* every worker has said BYE: the final shard to worker 0 */
    msg_hdr *f = v.out[0];
    if (v.smsg[0]) ht_comm_msg_wait(v.smsg[0], NULL, NULL);
    v.smsg[0] = NULL;
    *f = (msg_hdr){.kind = MSG_PARAMS, .samples = v.samples, .version = v.version};
    memcpy(PAYLOAD(f), v.x, v.len * sizeof(float));
    ht_comm_send(f, bytes, 0, TAG_FINAL);
    if (v.log) {
        ht_sync_logged(ht_metrics_write(v.log, "type=%s t=%f updates=%lld samples=%lld", "end",
                                        ht_now(), (long long)v.version, (long long)v.samples));
        rc = ht_metrics_close(v.log);
    }
    server_free(&v);
    return rc;
}

const ht_sync_policy ht_ps_policy = {ps_open, ps_step, ps_finish, ps_close, ps_serve, NULL};
