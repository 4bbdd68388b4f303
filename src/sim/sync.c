/* Timing of the synchronisation policies (timing only: the model's values are not
 * simulated), driving the rules of src/sync/rules.h as the runtime does: workers 0 .. W-1
 * compute their equal slice of each global batch at their own speed, then
 *   asp / ssp   push their gradient shards to the servers (ranks W ..), which apply them one
 *               push at a time and reply with the shard; ssp holds a reply while the worker
 *               is more than `staleness` clocks ahead of the slowest (ht_ssp_may_run);
 *   preduce / sap-reduce   report ready to the group generator (ht_pgroup: full groups of P,
 *               the deadline, every global_every-th group global) and all-reduce the model
 *               within each group;
 *   gossip      every `period` local steps exchange models with the round-robin peer
 *               (ht_gossip_peer); gossip-adaptive is timed at its max_period (its trigger
 *               reads the model's change, which a timing simulation does not have);
 * until train.steps x train.batch samples have been trained, as the runtime's budget. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/sim.h"
#include "sync/rules.h"

typedef struct wk {
    double t;        /* when its current compute ends (or it became ready) */
    int64_t clock;   /* local steps done */
    int state;       /* 0 computing, 1 waiting, 2 done */
    double busy, comm, idle;
    double wait_from;
} wk;

static double link_time(const ht_sim_cluster *c, int a, int b, double bytes) {
    ht_sim_link l = ht_sim_link_of(c, a, b);
    return l.latency_s + bytes / l.bw_Bps;
}

/* The worker whose compute ends first (ties: lowest index), -1 when none computes. */
static int next_worker(const wk *w, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (w[i].state == 0 && (best < 0 || w[i].t < w[best].t)) best = i;
    return best;
}

static void start_compute(wk *w, double t, double dt) {
    w->t = t + dt;
    w->busy += dt;
    w->state = 0;
    w->clock++;
}

/* asp / ssp: servers apply pushes in arrival order; ssp holds replies. */
static void run_ps(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                   const double *tc, wk *w, double *end) {
    int W = p->workers, S = p->servers;
    double shard = sm->param_bytes / S;
    double *sfree = ht_xcalloc((size_t)S, sizeof *sfree);
    int64_t *clk = ht_xcalloc((size_t)W, sizeof *clk);
    int *active = ht_xmalloc((size_t)W * sizeof *active);
    double *held = ht_xcalloc((size_t)W, sizeof *held); /* pushed, reply not yet released */
    for (int i = 0; i < W; i++) {
        active[i] = 1;
        start_compute(&w[i], 0, tc[i]);
        w[i].clock = 0;
    }
    int64_t samples = 0, budget = (int64_t)p->steps * p->B;
    int b = p->B / W;
    double last = 0;
    for (int i; (i = next_worker(w, W)) >= 0;) {
        double t = w[i].t, done = t;
        for (int j = 0; j < S; j++) { /* push to every server, applied in arrival order */
            int srv = W + j;
            double arr = t + link_time(c, i, srv, shard);
            double st = arr > sfree[j] ? arr : sfree[j];
            sfree[j] = st + ht_sim_optim_time(c, srv, sm, shard);
            double rep = sfree[j] + link_time(c, srv, i, shard);
            if (rep > done) done = rep;
        }
        samples += b;
        clk[i]++;
        if (done > last) last = done;
        if (samples >= budget) { /* the servers stop the job */
            *end = last;
            break;
        }
        /* ssp: released once every active worker has reached clk - s */
        if (p->mode == HT_SYNC_SSP_SIM &&
            !ht_ssp_may_run(clk[i], ht_ssp_min_clock(clk, active, W), p->staleness)) {
            w[i].state = 1;
            w[i].wait_from = done;
            held[i] = done;
        } else {
            w[i].comm += done - t;
            start_compute(&w[i], done, tc[i]);
        }
        for (int k = 0; k < W; k++) /* a slow worker's push may release held ones */
            if (w[k].state == 1 &&
                ht_ssp_may_run(clk[k], ht_ssp_min_clock(clk, active, W), p->staleness)) {
                double go = held[k] > t ? held[k] : t;
                w[k].comm += held[k] - (w[k].t);
                w[k].idle += go - held[k];
                start_compute(&w[k], go, tc[k]);
            }
        *end = last;
    }
    free(sfree);
    free(clk);
    free(active);
    free(held);
}

/* preduce / sap-reduce: groups from ht_pgroup, an all-reduce of the model within each. */
static void run_preduce(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                        const double *tc, wk *w, double *end) {
    int W = p->workers;
    ht_pgroup g;
    ht_pgroup_init(&g, W, p->group, p->deadline_s, p->global_every);
    int *out = ht_xmalloc((size_t)W * sizeof *out);
    for (int i = 0; i < W; i++)
        start_compute(&w[i], 0, tc[i]);
    int64_t samples = 0, budget = (int64_t)p->steps * p->B;
    int b = p->B / W;
    int coord = W; /* the group generator's rank */
    for (;;) {
        int i = next_worker(w, W);
        double t = i >= 0 ? w[i].t : INFINITY;
        if (i < 0) break;
        /* ready reaches the coordinator one message later */
        double ready = t + link_time(c, i, coord < c->nranks ? coord : i, 64);
        w[i].state = 1;
        w[i].wait_from = t;
        samples += b;
        ht_pgroup_ready(&g, i, ready);
        int n;
        while ((n = ht_pgroup_next(&g, ready, out)) > 0) {
            double bytes = sm->param_bytes, start = ready;
            ht_sim_link l = {0, INFINITY};
            for (int k = 0; k < n; k++) {
                ht_sim_link e = ht_sim_link_of(c, out[k], out[(k + 1) % n]);
                if (e.latency_s > l.latency_s) l.latency_s = e.latency_s;
                if (e.bw_Bps < l.bw_Bps) l.bw_Bps = e.bw_Bps;
            }
            double fin = start + (n > 1 ? ht_sim_coll_cost(HT_SIM_RING, n, bytes, l, c->host_add_gbs * 1e9) : 0);
            for (int k = 0; k < n; k++) {
                wk *m = &w[out[k]];
                m->idle += start - m->wait_from;
                m->comm += fin - start;
                start_compute(m, fin, tc[out[k]]);
            }
            if (fin > *end) *end = fin;
        }
        if (samples >= budget) break;
        /* nobody computes and nobody formed a group: the deadline (or the rest) decides */
        if (next_worker(w, W) < 0) {
            double h = ht_pgroup_wait_hint(&g, ready);
            if (h < 0) break;
            ready += h;
            while ((n = ht_pgroup_next(&g, ready, out)) > 0)
                for (int k = 0; k < n; k++) {
                    w[out[k]].idle += ready - w[out[k]].wait_from;
                    start_compute(&w[out[k]], ready, tc[out[k]]);
                }
        }
    }
    ht_pgroup_free(&g);
    free(out);
}

/* gossip: every `period` local steps a pairwise exchange with the round's peer. */
static void run_gossip(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                       const double *tc, wk *w, double *end) {
    int W = p->workers, period = p->period > 0 ? p->period : 1;
    int64_t *round = ht_xcalloc((size_t)W, sizeof *round);
    for (int i = 0; i < W; i++)
        start_compute(&w[i], 0, tc[i]);
    int64_t samples = 0, budget = (int64_t)p->steps * p->B;
    int b = p->B / W;
    for (int i; (i = next_worker(w, W)) >= 0 && samples < budget;) {
        double t = w[i].t;
        samples += b;
        if (t > *end) *end = t;
        if (samples >= budget) break;
        if (w[i].clock % period) {
            start_compute(&w[i], t, tc[i]);
            continue;
        }
        int q = ht_gossip_peer(i, (int)(round[i] % (W > 1 ? 2 * W : 1)), W);
        round[i]++;
        if (q < 0) {
            start_compute(&w[i], t, tc[i]);
            continue;
        }
        w[i].state = 1;
        w[i].wait_from = t;
        if (w[q].state == 1 && round[q] == round[i]) { /* the peer waits for this exchange */
            double fin = t + link_time(c, i, q, sm->param_bytes);
            w[q].idle += t - w[q].wait_from;
            w[q].comm += fin - t;
            w[i].comm += fin - t;
            start_compute(&w[q], fin, tc[q]);
            start_compute(&w[i], fin, tc[i]);
            if (fin > *end) *end = fin;
        }
    }
    free(round);
}

int ht_sim_run_sync(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                    ht_sim_result *res) {
    memset(res, 0, sizeof *res);
    int W = p->workers;
    int extra = p->mode == HT_SYNC_ASP_SIM || p->mode == HT_SYNC_SSP_SIM ? p->servers
                : p->mode == HT_SYNC_GOSSIP_SIM                         ? 0
                                                                       : 1;
    if (W < 1 || W + extra > c->nranks || p->B < W)
        return ht_error(HT_EINPUT, "%s: %d workers + %d serving ranks do not fit %d ranks (or "
                        "batch %d < workers)", c->source, W, extra, c->nranks, p->B);
    double *tc = ht_xmalloc((size_t)W * sizeof *tc);
    for (int i = 0; i < W; i++)
        tc[i] = ht_sim_range_time(c, i, sm, 0, sm->nlayers, p->B / W, 0) +
                ht_sim_range_time(c, i, sm, 0, sm->nlayers, p->B / W, 1) +
                (p->mode == HT_SYNC_ASP_SIM || p->mode == HT_SYNC_SSP_SIM
                     ? 0 : ht_sim_optim_time(c, i, sm, sm->param_bytes));
    wk *w = ht_xcalloc((size_t)W, sizeof *w);
    double end = 0;
    if (p->mode == HT_SYNC_ASP_SIM || p->mode == HT_SYNC_SSP_SIM) run_ps(c, sm, p, tc, w, &end);
    else if (p->mode == HT_SYNC_PREDUCE_SIM) run_preduce(c, sm, p, tc, w, &end);
    else run_gossip(c, sm, p, tc, w, &end);
    res->nranks = W;
    res->rank = ht_xcalloc((size_t)W, sizeof *res->rank);
    res->makespan = end;
    res->samples = p->steps * p->B;
    res->throughput = end > 0 ? res->samples / end : 0;
    for (int i = 0; i < W; i++) {
        double busy = w[i].busy < end ? w[i].busy : end;
        res->rank[i] = (ht_sim_rank){.end = end, .busy = busy, .comm = w[i].comm, .idle = end - busy - w[i].comm};
        if (res->rank[i].idle < 0) res->rank[i].idle = 0;
        res->busy += busy / W;
        res->comm += w[i].comm / W;
        res->idle += res->rank[i].idle / W;
    }
    free(tc);
    free(w);
    return HT_OK;
}
