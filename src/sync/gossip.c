/* Gossip: gossip and gossip-adaptive (Ho, Wu, Liu, CCGrid 2018), as push-sum (Kempe et al.
 * 2003; Blot et al., GoSGD 2016) so that no worker ever waits for another. Every worker
 * trains its own model x with weight a (1 at the start) and its own optimizer. When an
 * exchange is due it halves a and sends (x, a) to its peer of the round (rules.h
 * ht_gossip_peer: alternating matchings, so every pair meets once per cycle), without
 * waiting for it; at every step it merges whatever models have arrived:
 * x <- (a x + b y) / (a + b), a <- a + b. The sum of the weights stays the number of workers,
 * so the weighted average of the models is what plain averaging would give. An exchange is
 * due every sync.period steps (gossip), or when ||x - x_last|| / ||x_last|| > sync.threshold
 * since the last exchange, or after sync.max_period steps (gossip-adaptive).
 * The coordinator (the last rank) only counts samples: each worker reports its progress
 * (one small nonblocking message at a time) and reads the coordinator's answers (the global
 * count, then STOP) when they are there. At the end every worker sends FIN to every other
 * one and merges what is still in flight until it has every FIN; the final model is the
 * weighted average sum a_i x_i / sum a_i. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "sync/internal.h"
#include "sync/rules.h"

typedef struct gs_worker {
    float *x, *last;      /* the model on the host; the model at the last exchange */
    void *sbuf, *rbuf;    /* header + n floats */
    ht_comm_msg *sm, *pm; /* the model send and the progress send in flight */
    msg_hdr prog, ctrl;
    double a; /* push-sum weight */
    int64_t round, since, unreported, steps;
    int fins;
    int fresh; /* x holds this step's model */
    double last_norm;
} gs_worker;

/* ||x - y|| (y NULL: ||x||), in double. */
static double dist(const float *x, const float *y, size_t n) {
    double q = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)x[i] - (y ? y[i] : 0);
        q += e * e;
    }
    return sqrt(q);
}

/* The model on the host, read from the device the first time a step needs it. */
static float *model(ht_sync *s, gs_worker *g) {
    if (!g->fresh) ht_sync_params_read(s, g->x);
    g->fresh = 1;
    return g->x;
}

static void gossip_open(ht_sync *s) {
    gs_worker *g = ht_xcalloc(1, sizeof *g);
    s->impl = g;
    g->x = ht_xmalloc(s->n * sizeof(float));
    g->last = ht_xmalloc(s->n * sizeof(float));
    g->sbuf = ht_xcalloc(1, sizeof(msg_hdr) + s->n * sizeof(float));
    g->rbuf = ht_xcalloc(1, sizeof(msg_hdr) + s->n * sizeof(float));
    g->a = 1;
    ht_sync_params_read(s, g->last);
    g->last_norm = dist(g->last, NULL, s->n);
    if (s->rank == 0) ht_sync_send_init(s, s->L.workers, (int64_t)s->n, NULL);
}

/* Receives one waiting model message (or FIN) and merges it into x. */
static void take(ht_sync *s, gs_worker *g, int from) {
    ht_comm_recv(g->rbuf, sizeof(msg_hdr) + s->n * sizeof(float), from, TAG_MODEL);
    const msg_hdr *h = g->rbuf;
    if (h->kind == MSG_FIN) {
        g->fins++;
        return;
    }
    ht_pushsum_merge(g->x, g->a, PAYLOAD(g->rbuf), h->weight, s->n);
    g->a += h->weight;
}

/* Reads the coordinator's answers that have arrived: the global count, STOP. */
static void read_control(ht_sync *s, gs_worker *g) {
    while (ht_comm_probe(s->L.workers, TAG_GROUP, NULL, NULL)) {
        ht_comm_recv(&g->ctrl, sizeof g->ctrl, s->L.workers, TAG_GROUP);
        s->global = g->ctrl.samples;
        if (g->ctrl.kind == MSG_STOP) s->stop = 1;
    }
}

static int exchange_due(ht_sync *s, gs_worker *g) {
    if (s->L.mode == HT_SYNC_GOSSIP) return g->steps % s->cfg->sync.period == 0;
    return ht_gossip_due(dist(model(s, g), g->last, s->n), g->last_norm, s->cfg->sync.threshold,
                         (int)g->since, s->cfg->sync.max_period);
}

static void gossip_step(ht_sync *s, int b, float lr) {
    gs_worker *g = s->impl;
    double tc = ht_now();
    ht_optim_step(s->opt, s->m->params, s->m->grads, lr);
    ht_dev_finish(s->m->dev);
    s->st.compute_s += ht_now() - tc;
    double t0 = ht_now();
    g->steps++;
    g->since++;
    g->fresh = 0;
    int from, merged = 0;
    while (ht_comm_probe(HT_COMM_ANY, TAG_MODEL, &from, NULL)) {
        model(s, g);
        take(s, g, from);
        merged = 1;
    }
    if (exchange_due(s, g)) {
        int peer = ht_gossip_peer(s->rank, (int)g->round++, s->L.workers);
        if (peer >= 0) {
            if (g->sm) ht_comm_msg_wait(g->sm, NULL, NULL);
            g->a /= 2;
            msg_hdr *h = g->sbuf;
            *h = (msg_hdr){.kind = MSG_PUSH, .weight = g->a};
            memcpy(PAYLOAD(h), model(s, g), s->n * sizeof(float));
            g->sm = ht_comm_isend(h, sizeof(msg_hdr) + s->n * sizeof(float), peer, TAG_MODEL);
            memcpy(g->last, g->x, s->n * sizeof(float));
            g->last_norm = dist(g->x, NULL, s->n);
            g->since = 0;
        }
    }
    if (merged) ht_sync_params_write(s, g->x);
    g->unreported += b;
    if (!g->pm || ht_comm_msg_done(g->pm, NULL, NULL)) {
        if (g->pm) ht_comm_msg_free(g->pm);
        g->prog = (msg_hdr){.kind = MSG_READY, .samples = g->unreported, .clock = g->steps};
        g->pm = ht_comm_isend(&g->prog, sizeof g->prog, s->L.workers, TAG_READY);
        g->unreported = 0;
    }
    read_control(s, g);
    s->st.comm_s += ht_now() - t0;
}

static void gossip_finish(ht_sync *s) {
    gs_worker *g = s->impl;
    int W = s->L.workers, coord = s->L.workers;
    /* the coordinator: the last progress, BYE, and its answers up to END */
    if (g->pm) ht_comm_msg_wait(g->pm, NULL, NULL);
    g->pm = NULL;
    msg_hdr bye = {.kind = MSG_BYE, .samples = g->unreported};
    ht_comm_send(&bye, sizeof bye, coord, TAG_READY);
    do
        ht_comm_recv(&g->ctrl, sizeof g->ctrl, coord, TAG_GROUP);
    while (g->ctrl.kind != MSG_FIN);
    /* the other workers: FIN to each, then merge until every FIN is in */
    msg_hdr fin = {.kind = MSG_FIN};
    for (int w = 0; w < W; w++)
        if (w != s->rank) ht_comm_send(&fin, sizeof fin, w, TAG_MODEL);
    ht_sync_params_read(s, g->x);
    while (g->fins < W - 1) {
        int from;
        ht_comm_probe_wait(HT_COMM_ANY, TAG_MODEL, &from, NULL);
        take(s, g, from);
    }
    if (g->sm) ht_comm_msg_wait(g->sm, NULL, NULL);
    g->sm = NULL;
    /* the push-sum average: sum a_i x_i / sum a_i */
    float *y = ht_xmalloc((s->n + 1) * sizeof(float));
    for (size_t i = 0; i < s->n; i++)
        y[i] = (float)(g->a * g->x[i]);
    y[s->n] = (float)g->a;
    ht_sync_workers_sum(s, y, s->n + 1);
    /* push-sum conserves the total weight: anything else is a lost or twice-merged model */
    if (fabs(y[s->n] - W) > 1e-4 * W)
        ht_die(HT_ERUNTIME, "gossip: the push-sum weights sum to %.9g, expected %d", y[s->n], W);
    if (s->rank == 0)
        ht_log_info("gossip: push-sum weights sum to %.9g over %d workers (conserved)", y[s->n], W);
    for (size_t i = 0; i < s->n; i++)
        g->x[i] = y[i] / y[s->n];
    free(y);
    ht_sync_params_write(s, g->x);
}

static void gossip_close(ht_sync *s) {
    gs_worker *g = s->impl;
    free(g->x);
    free(g->last);
    free(g->sbuf);
    free(g->rbuf);
    free(g);
}

/* ------------------------------------------------------------------------ coordinator */

static int gossip_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                        ht_sync_stats *st) {
    (void)sel;
    (void)cfg;
    (void)rank;
    int W = L->workers, byes = 0, stop = 0;
    msg_hdr init;
    ht_sync_recv_init(&init);
    int64_t budget = init.samples, samples = 0;
    msg_hdr *in = ht_xcalloc((size_t)W, sizeof(msg_hdr));
    ht_comm_msg **rmsg = ht_xcalloc((size_t)W, sizeof *rmsg);
    for (int w = 0; w < W; w++)
        rmsg[w] = ht_comm_irecv(&in[w], sizeof in[w], w, TAG_READY);
    while (byes < W) {
        double t0 = ht_now();
        int w = ht_comm_msg_waitany(rmsg, W, -1);
        st->wait_s += ht_now() - t0;
        ht_comm_msg_free(rmsg[w]);
        rmsg[w] = NULL;
        samples += in[w].samples;
        if (!stop && samples >= budget) stop = 1;
        msg_hdr ans = {.kind = in[w].kind == MSG_BYE ? MSG_FIN
                               : stop                ? MSG_STOP
                                                     : MSG_GROUP,
                       .samples = samples};
        ht_comm_send(&ans, sizeof ans, w, TAG_GROUP); /* small: eager, does not block */
        if (in[w].kind == MSG_BYE)
            byes++;
        else
            rmsg[w] = ht_comm_irecv(&in[w], sizeof in[w], w, TAG_READY);
    }
    st->samples = samples;
    free(in);
    free(rmsg);
    return HT_OK;
}

const ht_sync_policy ht_gossip_policy = {gossip_open, gossip_step, gossip_finish, gossip_close,
                                         gossip_serve, NULL};
