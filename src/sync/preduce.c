/* Partial reduce: preduce (Miao et al., SIGMOD 2021) and sap-reduce (Lizhi Ma et al.).
 * Every worker trains its own model with its own optimizer. After each local step it tells
 * the group generator (the last rank) that it is ready, with its timestamp t (local steps,
 * raised to the group's maximum at every group reduce) and the samples it has trained on;
 * the generator forms groups first come, first served (rules.h ht_pgroup: the first P ready,
 * a deadline, every N-th group global) and sends each member the group's members and
 * weights. The members sum w_j x_j by a ring among themselves only (src/comm), then
 *   preduce:     x_i <- S (weights 1/P: the group's average model);
 *   sap-reduce:  x_i <- [ (S - w_i x_i)(P-1)/(1-w_i) + x_i ] / P with the staleness weights
 *                of rules.h ht_sap_weights, and t_i <- max_j t_j.
 * A group of one (the deadline passed with nobody else ready) goes on alone. The generator
 * counts samples against the budget and answers STOP to each worker's next ready message. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "io/trace.h"
#include "io/metrics.h"
#include "sync/internal.h"
#include "sync/rules.h"

/* A GROUP message: header, then members (int64) and weights (double), W of each. */
static size_t group_bytes(int W) {
    return sizeof(msg_hdr) + (size_t)W * (sizeof(int64_t) + sizeof(double));
}
#define MEMBERS(buf) ((int64_t *)((char *)(buf) + sizeof(msg_hdr)))
#define WEIGHTS(buf, W)                                                                            \
    ((double *)((char *)(buf) + sizeof(msg_hdr) + (size_t)(W) * sizeof(int64_t)))

/* ------------------------------------------------------------------------ worker side */

typedef struct pr_worker {
    int64_t t; /* timestamp */
    float *x, *y;
    void *reply; /* a GROUP message */
    int *members;
} pr_worker;

static void preduce_open(ht_sync *s) {
    pr_worker *p = ht_xcalloc(1, sizeof *p);
    s->impl = p;
    p->x = ht_xmalloc(s->n * sizeof(float));
    p->y = ht_xmalloc(s->n * sizeof(float));
    p->reply = ht_xcalloc(1, group_bytes(s->L.workers));
    p->members = ht_xcalloc((size_t)s->L.workers, sizeof(int));
}

static void preduce_begin(ht_sync *s, int64_t until) {
    if (s->rank == 0) ht_sync_send_init(s, s->L.workers, until, NULL, (int64_t)s->n, NULL, 0);
}

static void preduce_step(ht_sync *s, int b, float lr) {
    pr_worker *p = s->impl;
    int W = s->L.workers, coord = s->L.workers;
    double tc = ht_now();
    ht_optim_step(s->opt, s->m->params, s->m->grads, lr);
    p->t++;
    msg_hdr ready = {.kind = MSG_READY, .clock = p->t, .samples = b, .aux = ht_stop_requested()};
    ht_dev_finish(s->m->dev);
    s->st.compute_s += ht_now() - tc;
    double t0 = ht_now();
    ht_comm_send(&ready, sizeof ready, coord, TAG_READY);
    ht_comm_msg_wait(ht_comm_irecv(p->reply, group_bytes(W), coord, TAG_GROUP), NULL, NULL);
    double t1 = ht_now();
    s->st.wait_s += t1 - t0;
    ht_trace_span("wait (group)", t0, t1);
    const msg_hdr *h = p->reply;
    s->global = h->samples;
    if (h->kind == MSG_STOP) {
        s->stop = 1;
        s->told_interrupt = h->aux != 0;
        return;
    }
    int n = (int)h->n;
    s->told_interrupt |= h->version == STOP_INTERRUPT;
    if (n < 2) {
        s->stop = h->version != 0;
        return;
    }
    double wi = 0;
    for (int k = 0; k < n; k++) {
        p->members[k] = (int)MEMBERS(p->reply)[k];
        if (p->members[k] == s->rank) wi = WEIGHTS(p->reply, W)[k];
    }
    ht_sync_params_read(s, p->x); /* only a worker in a group needs its model on the host */
    for (size_t i = 0; i < s->n; i++)
        p->y[i] = (float)(wi * p->x[i]);
    int tag = HT_COMM_GROUP_TAG + (int)(h->id % (HT_COMM_TAG_MAX - HT_COMM_GROUP_TAG));
    ht_comm_group_allreduce(p->y, s->n, p->members, n, tag);
    if (s->L.mode == HT_SYNC_SAP) {
        ht_sap_update(p->x, p->y, s->n, wi, n);
        ht_sync_params_write(s, p->x);
    } else {
        ht_sync_params_write(s, p->y);
    }
    p->t = h->clock;
    s->stop = h->version != 0;
    s->st.comm_s += ht_now() - t1;
}

/* The workers' plain average into out (every worker). */
static void preduce_average(ht_sync *s, float *out) {
    ht_sync_params_read(s, out);
    ht_sync_workers_sum(s, out, s->n);
    for (size_t i = 0; i < s->n; i++)
        out[i] /= (float)s->L.workers;
}

static void preduce_finish(ht_sync *s) {
    pr_worker *p = s->impl;
    preduce_average(s, p->x);
    ht_sync_params_write(s, p->x);
}

static void preduce_get(const ht_sync *s, double *v) { v[0] = (double)((pr_worker *)s->impl)->t; }
static void preduce_set(ht_sync *s, const double *v) { ((pr_worker *)s->impl)->t = (int64_t)v[0]; }

static void preduce_close(ht_sync *s) {
    pr_worker *p = s->impl;
    free(p->x);
    free(p->y);
    free(p->reply);
    free(p->members);
    free(p);
}

/* ------------------------------------------------------------------- group generator */

typedef struct generator {
    const ht_config *cfg;
    int mode, W;
    void **out; /* per worker: a GROUP message */
    ht_comm_msg **smsg;
    int64_t *t; /* timestamps */
    int64_t samples, until, gid;
    int stop, finished;
    ht_pgroup g;
    ht_metrics *log;
} generator;

static void send_to(generator *v, int w, const msg_hdr *h, const int *members,
                    const double *weights) {
    if (v->smsg[w]) ht_comm_msg_wait(v->smsg[w], NULL, NULL);
    memcpy(v->out[w], h, sizeof *h);
    for (int k = 0; k < h->n; k++) {
        MEMBERS(v->out[w])[k] = members[k];
        WEIGHTS(v->out[w], v->W)[k] = weights[k];
    }
    v->smsg[w] = ht_comm_isend(v->out[w], group_bytes(v->W), w, TAG_GROUP);
}

static void stop_worker(generator *v, int w) {
    msg_hdr h = {.kind = MSG_STOP, .samples = v->samples, .aux = v->stop == STOP_INTERRUPT};
    send_to(v, w, &h, NULL, NULL);
    ht_pgroup_leave(&v->g, w);
    v->finished++;
}

static void form(generator *v, const int *members, int n) {
    int64_t *t = ht_xmalloc((size_t)n * sizeof(int64_t));
    double *w = ht_xmalloc((size_t)n * sizeof(double));
    int64_t tmax = 0;
    for (int k = 0; k < n; k++) {
        t[k] = v->t[members[k]];
        if (t[k] > tmax) tmax = t[k];
    }
    if (v->mode == HT_SYNC_SAP)
        ht_sap_weights(t, n, v->cfg->sync.alpha, w);
    else
        for (int k = 0; k < n; k++)
            w[k] = 1.0 / n;
    int64_t id = n >= 2 ? v->gid++ : -1;
    /* the segment has ended: the members average this last time, then stop */
    msg_hdr h = {.kind = MSG_GROUP,
                 .n = n,
                 .id = id,
                 .clock = tmax,
                 .samples = v->samples,
                 .version = v->stop};
    for (int k = 0; k < n; k++)
        send_to(v, members[k], &h, members, w);
    if (v->log) {
        char list[512] = "", ts[512] = "", ws[1024] = "";
        for (int k = 0; k < n; k++) {
            ht_sync_cat(list, sizeof list, "%d", members[k]);
            ht_sync_cat(ts, sizeof ts, "%lld", (long long)t[k]);
            ht_sync_cat(ws, sizeof ws, "%.6g", w[k]);
        }
        ht_sync_logged(
            ht_metrics_write(v->log, "type=%s t=%f group=%lld members=%s timestamps=%s weights=%s",
                             "group", ht_now(), (long long)id, list, ts, ws));
    }
    free(t);
    free(w);
}

/* One segment: groups until every worker has been told to stop. */
static void generator_segment(generator *v, msg_hdr *in, ht_comm_msg **rmsg, int *members,
                              ht_sync_stats *st) {
    const int W = v->W;
    for (int w = 0; w < W; w++)
        rmsg[w] = ht_comm_irecv(&in[w], sizeof in[w], w, TAG_READY);
    while (v->finished < W) {
        double t0 = ht_now();
        int w = ht_comm_msg_waitany(rmsg, W, ht_pgroup_wait_hint(&v->g, t0));
        double now = ht_now();
        st->wait_s += now - t0;
        ht_trace_span("wait", t0, now);
        if (w >= 0) {
            ht_comm_msg_free(rmsg[w]);
            rmsg[w] = NULL;
            v->samples += in[w].samples;
            v->t[w] = in[w].clock;
            int was = v->stop;
            v->stop = ht_sync_stop_update(v->stop, v->samples, v->until, in[w].aux);
            if (was)
                stop_worker(v, w); /* ready after the segment ended */
            else
                ht_pgroup_ready(&v->g, w, now);
        }
        /* the groups due now form even when the segment ends with this message (their members
         * average once more, then stop: a segment's end changes no group); a member's next
         * ready message can come once it has its group */
        for (int n; (n = ht_pgroup_next(&v->g, now, members)) > 0;) {
            form(v, members, n);
            for (int k = 0; k < n; k++)
                if (v->stop) {
                    ht_pgroup_leave(&v->g, members[k]);
                    v->finished++;
                } else {
                    rmsg[members[k]] =
                        ht_comm_irecv(&in[members[k]], sizeof in[0], members[k], TAG_READY);
                }
        }
        while (v->stop && v->g.len > 0) /* the rest waits for no group */
            stop_worker(v, v->g.queue[0]);
        ht_trace_span("groups", now, ht_now());
        st->comm_s += ht_now() - now;
    }
}

static int preduce_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                         ht_sync_stats *st) {
    (void)sel;
    (void)rank;
    generator v = {.cfg = cfg, .mode = L->mode, .W = L->workers};
    int W = v.W, rc = HT_OK;
    if (cfg->sync.log[0] && (rc = ht_metrics_open(&v.log, cfg->sync.log, 0)) != HT_OK) return rc;
    msg_hdr *in = ht_xcalloc((size_t)W, sizeof(msg_hdr));
    ht_comm_msg **rmsg = ht_xcalloc((size_t)W, sizeof *rmsg);
    v.smsg = ht_xcalloc((size_t)W, sizeof *v.smsg);
    v.out = ht_xcalloc((size_t)W, sizeof(void *));
    v.t = ht_xcalloc((size_t)W, sizeof(int64_t));
    int *members = ht_xcalloc((size_t)W, sizeof(int));
    for (int w = 0; w < W; w++)
        v.out[w] = ht_xcalloc(1, group_bytes(W));
    msg_hdr init;
    while (ht_sync_recv_init(&init) == MSG_INIT) {
        st->samples -= init.clock; /* this process's samples, as the workers' records */
        v.samples = init.clock;
        v.until = init.samples;
        v.stop = STOP_NO;
        v.finished = 0;
        ht_pgroup_init(&v.g, W, cfg->sync.group, cfg->sync.deadline_ms / 1e3,
                       cfg->sync.global_every);
        generator_segment(&v, in, rmsg, members, st);
        ht_pgroup_free(&v.g);
        st->samples += v.samples;
    }
    rc = ht_sync_fin_rc(&init);
    st->steps = v.gid;
    for (int w = 0; w < W; w++) {
        if (v.smsg[w]) ht_comm_msg_wait(v.smsg[w], NULL, NULL);
        free(v.out[w]);
    }
    if (v.log) {
        ht_sync_logged(ht_metrics_write(v.log, "type=%s t=%f groups=%lld samples=%lld", "end",
                                        ht_now(), (long long)v.gid, (long long)v.samples));
        int crc = ht_metrics_close(v.log);
        if (rc == HT_OK) rc = crc;
    }
    free(in);
    free(rmsg);
    free(v.smsg);
    free(v.out);
    free(v.t);
    free(members);
    return rc;
}

const ht_sync_policy ht_preduce_policy = {.open = preduce_open,
                                          .step = preduce_step,
                                          .finish = preduce_finish,
                                          .close = preduce_close,
                                          .serve = preduce_serve,
                                          .begin = preduce_begin,
                                          .average = preduce_average,
                                          .get = preduce_get,
                                          .set = preduce_set};
