/* Gossip: gossip and gossip-adaptive (Ho, Wu, Liu, CCGrid 2018), as push-sum (Kempe et al.
 * 2003; Blot et al., GoSGD 2016) so that no worker ever waits for another. Every worker
 * trains its own model x with weight a (1 at the start) and its own optimizer. When an
 * exchange is due it halves a and sends (x, a) to its peer of the round (rules.h
 * ht_gossip_peer: alternating matchings, so every pair meets once per cycle), without
 * waiting for it (and while its last model is still in flight, a due exchange waits for a
 * later step); at every step it merges whatever models have arrived:
 * x <- (a x + b y) / (a + b), a <- a + b. The sum of the weights stays the number of workers,
 * so the weighted average of the models is what plain averaging would give. An exchange is
 * due every sync.period steps (gossip), or when ||x - x_last|| / ||x_last|| > sync.threshold
 * since the last exchange, or after sync.max_period steps (gossip-adaptive).
 * The coordinator (the last rank) only counts samples: each worker reports its progress
 * (one small nonblocking message at a time) and reads the coordinator's answers (the global
 * count, then STOP) when they are there; only when more than GOSSIP_OWED answers are owed
 * does it wait for one, so that a coordinator starved of CPU (ranks sharing cores) cannot
 * leave the count a worker acts on (learning rate, STOP) arbitrarily stale: in CI a worker
 * ran from step 10 to the end of the budget past a --stop-after 20. At the end every worker
 * sends FIN to every other one and merges what is still in flight until it has every FIN;
 * the final model is the weighted average sum a_i x_i / sum a_i. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/vcost.h"
#include "core/stop.h"
#include "io/trace.h"
#include "sync/internal.h"
#include "sync/rules.h"

/* progress messages a worker may have unanswered before it waits for the coordinator: the
 * stop overshoots by at most this many local steps per worker (when the coordinator keeps
 * up, answers come within a step and no worker waits) */
enum { GOSSIP_OWED = 4 };

typedef struct gs_worker {
    float *x, *last;      /* the model on the host; the model at the last exchange */
    void *sbuf, *rbuf;    /* header + n floats */
    void *pbuf;           /* gossip-fixed: the peer's model of a pairwise exchange */
    ht_comm_msg *sm, *pm; /* the model send and the progress send in flight */
    ht_comm_msg *rm;      /* the posted receive of the next model message (or FIN) */
    msg_hdr prog, ctrl;
    double a; /* push-sum weight */
    int64_t round, since, unreported, steps;
    int64_t owed; /* progress messages of this segment not answered yet */
    int64_t served; /* gossip-fixed: exchanges a stopped worker answered (serve_pairs) */
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

/* `passes` passes over the model on the host (a merge, a copy, a norm): virtual time under
 * emulation, as hetsim charges them (host_add_gbs). */
static void host_pass(const ht_sync *s, int passes) {
    ht_vcost(HT_VC_HOST, 0, 0, 0, (size_t)passes * s->n);
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
    g->pbuf = ht_xcalloc(1, sizeof(msg_hdr) + s->n * sizeof(float));
    g->a = 1;
    ht_sync_params_read(s, g->last);
    g->last_norm = dist(g->last, NULL, s->n);
}

static void gossip_begin(ht_sync *s, int64_t until) {
    if (s->rank == 0) ht_sync_send_init(s, s->L.workers, until, NULL, (int64_t)s->n, NULL, 0);
}

/* The receive of the next model message (or FIN) from any worker, posted if it is not. */
static ht_comm_msg *model_recv(ht_sync *s, gs_worker *g) {
    if (!g->rm) g->rm = ht_comm_irecv(g->rbuf, sizeof(msg_hdr) + s->n * sizeof(float),
                                      HT_COMM_ANY, TAG_MODEL);
    return g->rm;
}

/* Merges the model message (or counts the FIN) that the completed receive left in rbuf. */
static void take(ht_sync *s, gs_worker *g) {
    const msg_hdr *h = g->rbuf;
    if (h->kind == MSG_FIN) {
        g->fins++;
        return;
    }
    ht_pushsum_merge(g->x, g->a, PAYLOAD(g->rbuf), h->weight, s->n);
    host_pass(s, 1);
    g->a += h->weight;
}

/* Takes one answer of the coordinator (waiting for it): the global count, STOP. */
static void take_control(ht_sync *s, gs_worker *g) {
    ht_comm_recv(&g->ctrl, sizeof g->ctrl, s->L.workers, TAG_GROUP);
    g->owed--;
    s->global = g->ctrl.samples;
    if (g->ctrl.kind == MSG_STOP) s->stop = 1;
    if (g->ctrl.kind == MSG_STOP && g->ctrl.aux) s->told_interrupt = 1;
}

/* Reads the answers that have arrived, then waits while more than GOSSIP_OWED are owed. */
static void read_control(ht_sync *s, gs_worker *g) {
    while (ht_comm_probe(s->L.workers, TAG_GROUP, NULL, NULL))
        take_control(s, g);
    if (g->owed > GOSSIP_OWED) {
        double t0 = ht_now();
        while (g->owed > GOSSIP_OWED)
            take_control(s, g);
        ht_trace_span("wait (coordinator)", t0, ht_now());
    }
}

static int exchange_due(ht_sync *s, gs_worker *g) {
    if (s->L.mode != HT_SYNC_GOSSIP_ADAPTIVE) return g->steps % s->cfg->sync.period == 0;
    host_pass(s, 1); /* the change's norm */
    return ht_gossip_due(dist(model(s, g), g->last, s->n), g->last_norm, s->cfg->sync.threshold,
                         (int)g->since, s->cfg->sync.max_period);
}

/* Halves the weight and puts (x, a) into sbuf, ready to send. */
static size_t pack_half(ht_sync *s, gs_worker *g) {
    g->a /= 2;
    msg_hdr *h = g->sbuf;
    *h = (msg_hdr){.kind = MSG_PUSH, .weight = g->a};
    memcpy(PAYLOAD(h), model(s, g), s->n * sizeof(float));
    host_pass(s, 1);
    return sizeof(msg_hdr) + s->n * sizeof(float);
}

/* Merges the peer's half in pbuf into x. */
static void take_pair(ht_sync *s, gs_worker *g) {
    const msg_hdr *h = g->pbuf;
    ht_pushsum_merge(g->x, g->a, PAYLOAD(g->pbuf), h->weight, s->n);
    host_pass(s, 1);
    g->a += h->weight;
}

/* gossip-fixed's blocking exchange with the round's peer (the matching is symmetric: the
 * peer's peer of round r is this worker). Both post the receive, then send, then wait for
 * both, on a tag of its own and from that peer only: a wait on a send whose peer's one
 * ANY receive was already filled by another worker's model (and which that peer reposts
 * only after its own send completes) closed a cycle of waits (the withdrawn first version:
 * every worker in MPI_Wait on its send). Here a worker waits only for its round-r peer,
 * which is in round r's exchange too, or serving in gossip_quiesce. */
static void pair_exchange(ht_sync *s, gs_worker *g, int peer) {
    size_t bytes = sizeof(msg_hdr) + s->n * sizeof(float);
    ht_comm_msg *r = ht_comm_irecv(g->pbuf, bytes, peer, TAG_PAIR);
    ht_comm_msg *m = ht_comm_isend(g->sbuf, pack_half(s, g), peer, TAG_PAIR);
    double t0 = ht_now();
    ht_comm_msg_wait(r, NULL, NULL);
    ht_comm_msg_wait(m, NULL, NULL);
    ht_trace_span("wait (gossip peer)", t0, ht_now());
    take_pair(s, g);
}

/* One exchange due now: gossip-fixed's blocking pair exchange, or push-sum's send. */
static void exchange(ht_sync *s, gs_worker *g, int peer) {
    if (s->L.mode == HT_SYNC_GOSSIP_FIXED)
        pair_exchange(s, g, peer);
    else
        g->sm = ht_comm_isend(g->sbuf, pack_half(s, g), peer, TAG_MODEL);
    s->st.exchanges++;
}

/* 1 when a model message (or FIN) has been received into rbuf. For real: the posted receive,
 * tested. Emulated: a receive posted only now, for a message already announced (probe), and
 * waited for: SimGrid moves a large message as soon as a receive matches, on its link's
 * schedule, while for real (Open MPI's rendezvous, above its eager limit) the data moves
 * only once the receiving rank enters MPI at its step end, so a posted receive made the
 * emulated sends complete sooner and the in-flight skip rarer (gossip: 247 exchanges
 * emulated against 185 real). So the receiver takes it at its step end, paying the transfer,
 * as hetsim's run_gossip charges it. */
static int arrived(ht_sync *s, gs_worker *g) {
    if (!ht_comm_virtual()) {
        if (!ht_comm_msg_done(model_recv(s, g), NULL, NULL)) return 0;
        ht_comm_msg_free(g->rm);
        g->rm = NULL;
        return 1;
    }
    int from;
    if (!ht_comm_probe(HT_COMM_ANY, TAG_MODEL, &from, NULL)) return 0;
    ht_comm_msg_wait(ht_comm_irecv(g->rbuf, sizeof(msg_hdr) + s->n * sizeof(float), from,
                                   TAG_MODEL),
                     NULL, NULL);
    return 1;
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
    int merged = 0;
    /* A posted receive, tested, never waited for: a large message moves only while its
     * sender is inside MPI, so a blocking receive of one whose sender was descheduled (or
     * stopped) after announcing it waited for that peer (seen with a worker frozen by
     * SIGSTOP: the others stood still until it resumed). */
    while (arrived(s, g)) {
        model(s, g);
        take(s, g);
        merged = 1;
    }
    /* push-sum never waits for a peer: while the last model sent is still in flight (a
     * large message leaves only when its peer takes it, at the peer's next step) a due
     * exchange waits for a later step instead. Waiting for the send here (as before
     * 2026-11-26) paced a fast worker by a slow one, step for step: 2 workers, one emulated
     * 2x slower, ran at twice the slow one's rate (3,800 samples/s against asp's 7,100). */
    int in_flight = g->sm && !ht_comm_msg_done(g->sm, NULL, NULL);
    if (!in_flight && exchange_due(s, g)) {
        if (g->sm) ht_comm_msg_free(g->sm);
        g->sm = NULL;
        int peer = ht_gossip_peer(s->rank, (int)g->round++, s->L.workers);
        if (peer >= 0) {
            exchange(s, g, peer);
            merged |= s->L.mode == HT_SYNC_GOSSIP_FIXED;
            if (s->L.mode == HT_SYNC_GOSSIP_ADAPTIVE) { /* its rule's reference */
                memcpy(g->last, g->x, s->n * sizeof(float));
                g->last_norm = dist(g->x, NULL, s->n);
                host_pass(s, 2); /* the copy and the norm */
            }
            g->since = 0;
        }
    }
    if (merged) ht_sync_params_write(s, g->x);
    g->unreported += b;
    if (!g->pm || ht_comm_msg_done(g->pm, NULL, NULL)) {
        if (g->pm) ht_comm_msg_free(g->pm);
        g->prog = (msg_hdr){.kind = MSG_READY,
                            .samples = g->unreported,
                            .clock = g->steps,
                            .aux = ht_stop_requested()};
        g->pm = ht_comm_isend(&g->prog, sizeof g->prog, s->L.workers, TAG_READY);
        g->unreported = 0;
        g->owed++;
    }
    read_control(s, g);
    s->st.comm_s += ht_now() - t0;
}

/* The end of a segment: the coordinator gets the last progress and BYE, and answers up to
 * FIN; every worker sends FIN to every other one and merges what is in flight until it has
 * every FIN (a model sent in this segment arrives before its sender's FIN). */
/* FIN to every other worker (a small message: eager). */
static void send_fins(ht_sync *s) {
    msg_hdr fin = {.kind = MSG_FIN};
    for (int w = 0; w < s->L.workers; w++)
        if (w != s->rank) ht_comm_send(&fin, sizeof fin, w, TAG_MODEL);
}

/* gossip-fixed's end, before BYE: a worker that stops says FIN, then answers every pair
 * exchange that a worker still training starts with it (that worker waits for it in
 * pair_exchange, and the coordinator's FIN needs that worker's BYE), until every worker
 * has said FIN; a worker says FIN only after its last exchange completed, so none is left
 * half done and the push-sum weight is conserved. */
static void serve_pairs(ht_sync *s, gs_worker *g) {
    size_t bytes = sizeof(msg_hdr) + s->n * sizeof(float);
    send_fins(s);
    while (g->fins < s->L.workers - 1) {
        int from = -1;
        model_recv(s, g);
        /* a short wait for a FIN (polling with src/comm's backoff), then a look for a pair */
        if (ht_comm_msg_waitany(&g->rm, 1, 1e-3) == 0) {
            ht_comm_msg_free(g->rm);
            g->rm = NULL;
            take(s, g);
        } else if (ht_comm_probe(HT_COMM_ANY, TAG_PAIR, &from, NULL)) {
            /* the sender waits in pair_exchange (inside MPI), so this receive completes */
            ht_comm_recv(g->pbuf, bytes, from, TAG_PAIR);
            ht_comm_send(g->sbuf, pack_half(s, g), from, TAG_PAIR); /* its receive is posted */
            take_pair(s, g);
            g->served++;
        }
    }
}

static void gossip_quiesce(ht_sync *s) {
    gs_worker *g = s->impl;
    int W = s->L.workers, coord = s->L.workers;
    int fixed = s->L.mode == HT_SYNC_GOSSIP_FIXED;
    if (fixed) {
        ht_sync_params_read(s, g->x);
        g->fresh = 1;
        serve_pairs(s, g);
        ht_sync_params_write(s, g->x);
        ht_log_info("gossip-fixed: worker %d started %lld exchanges, answered %lld at its end",
                    s->rank, (long long)s->st.exchanges, (long long)g->served);
    }
    if (g->pm) ht_comm_msg_wait(g->pm, NULL, NULL);
    g->pm = NULL;
    msg_hdr bye = {.kind = MSG_BYE, .samples = g->unreported};
    g->unreported = 0;
    ht_comm_send(&bye, sizeof bye, coord, TAG_READY);
    do
        ht_comm_recv(&g->ctrl, sizeof g->ctrl, coord, TAG_GROUP);
    while (g->ctrl.kind != MSG_FIN);
    g->owed = 0; /* FIN comes after every answer */
    if (!fixed) send_fins(s);
    ht_sync_params_read(s, g->x);
    while (g->fins < W - 1) {
        ht_comm_msg_wait(model_recv(s, g), NULL, NULL); /* waits, then frees it */
        g->rm = NULL;
        take(s, g);
    }
    g->fins = 0;
    if (g->sm) ht_comm_msg_wait(g->sm, NULL, NULL);
    g->sm = NULL;
    ht_sync_params_write(s, g->x);
}

/* The push-sum average sum a_i x_i / sum a_i into out, on every worker (after a quiesce). */
static void gossip_average(ht_sync *s, float *out) {
    gs_worker *g = s->impl;
    const int W = s->L.workers;
    ht_sync_params_read(s, g->x);
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
        out[i] = y[i] / y[s->n];
    free(y);
}

static void gossip_finish(ht_sync *s) {
    gs_worker *g = s->impl;
    gossip_average(s, g->x);
    ht_sync_params_write(s, g->x);
}

static void gossip_get(const ht_sync *s, double *v) {
    const gs_worker *g = s->impl;
    v[0] = g->a, v[1] = (double)g->round, v[2] = (double)g->steps, v[3] = (double)g->since;
}

/* A resumed worker: its weight and counters; the model at the last exchange is the one it
 * resumes with (gossip-adaptive measures its drift from there). */
static void gossip_set(ht_sync *s, const double *v) {
    gs_worker *g = s->impl;
    g->a = v[0], g->round = (int64_t)v[1], g->steps = (int64_t)v[2], g->since = (int64_t)v[3];
    ht_sync_params_read(s, g->last);
    g->last_norm = dist(g->last, NULL, s->n);
}

static void gossip_close(ht_sync *s) {
    gs_worker *g = s->impl;
    free(g->x);
    free(g->last);
    free(g->sbuf);
    free(g->rbuf);
    free(g->pbuf);
    free(g);
}

/* ------------------------------------------------------------------------ coordinator */

/* One segment: counts progress until every worker has said BYE. */
static void coordinator_segment(int W, const msg_hdr *init, ht_sync_stats *st, int64_t *total) {
    int byes = 0, stop = STOP_NO;
    int64_t until = init->samples, samples = init->clock;
    msg_hdr *in = ht_xcalloc((size_t)W, sizeof(msg_hdr));
    ht_comm_msg **rmsg = ht_xcalloc((size_t)W, sizeof *rmsg);
    for (int w = 0; w < W; w++)
        rmsg[w] = ht_comm_irecv(&in[w], sizeof in[w], w, TAG_READY);
    while (byes < W) {
        double t0 = ht_now();
        int w = ht_comm_msg_waitany(rmsg, W, -1);
        st->wait_s += ht_now() - t0;
        ht_trace_span("wait", t0, ht_now());
        ht_comm_msg_free(rmsg[w]);
        rmsg[w] = NULL;
        samples += in[w].samples;
        stop = ht_sync_stop_update(stop, samples, until, in[w].aux);
        msg_hdr ans = {.kind = in[w].kind == MSG_BYE ? MSG_FIN
                               : stop                ? MSG_STOP
                                                     : MSG_GROUP,
                       .samples = samples,
                       .aux = stop == STOP_INTERRUPT};
        ht_comm_send(&ans, sizeof ans, w, TAG_GROUP); /* small: eager, does not block */
        if (in[w].kind == MSG_BYE)
            byes++;
        else
            rmsg[w] = ht_comm_irecv(&in[w], sizeof in[w], w, TAG_READY);
    }
    *total = samples;
    free(in);
    free(rmsg);
}

static int gossip_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                        ht_sync_stats *st) {
    (void)sel;
    (void)cfg;
    (void)rank;
    msg_hdr init;
    int64_t total = 0;
    /* samples counted by this process (as the workers' records): a resumed run's start left out */
    while (ht_sync_recv_init(&init) == MSG_INIT) {
        coordinator_segment(L->workers, &init, st, &total);
        st->samples += total - init.clock;
    }
    return ht_sync_fin_rc(&init);
}

const ht_sync_policy ht_gossip_policy = {.open = gossip_open,
                                         .step = gossip_step,
                                         .finish = gossip_finish,
                                         .close = gossip_close,
                                         .serve = gossip_serve,
                                         .begin = gossip_begin,
                                         .quiesce = gossip_quiesce,
                                         .average = gossip_average,
                                         .get = gossip_get,
                                         .set = gossip_set};
