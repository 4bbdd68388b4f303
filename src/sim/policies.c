/* Timing of the synchronisation policies (timing only: the model's values are not
 * simulated), driving the rules of src/sync/rules.h as the runtime does: workers 0 .. W-1
 * compute their equal slice of each global batch at their own speed, then
 *   asp / ssp / dasp   push their gradient shards to the servers (ranks W ..), which apply
 *               them one push at a time and reply with the shard; ssp holds a reply while
 *               the worker is more than `staleness` clocks ahead of the slowest
 *               (ht_ssp_may_run); dasp re-assigns states every `interval` updates
 *               (ht_dasp_assign over the workers' compute times): a SYNC group's members
 *               wait until all have pushed and their update is applied once, ASYNC workers
 *               go on as asp, held only past max_ahead;
 *   preduce / sap-reduce   report ready to the group generator (ht_pgroup: full groups of P,
 *               the deadline, every global_every-th group global) and all-reduce the model
 *               within each group;
 *   gossip      every `period` local steps push the model to the round-robin peer
 *               (ht_gossip_peer) without waiting, as push-sum (below); gossip-fixed
 *               exchanges with it and waits until the peer is there (run_gossip_fixed);
 *               gossip-adaptive
 *               when its trigger (ht_gossip_due) fires,
 *               fed the relative model change since the last exchange as `drift` per local
 *               step, accumulated linearly (a timing simulation has no weights: the drift
 *               is an input; 0 leaves the rule's max_period floor alone);
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

/* The gossip policies' next event: the worker whose compute ends first, its b samples
 * counted and *end moved to its time; -1 when none computes or the budget is spent (the
 * step that spends it is counted, and ends the run). */
static int next_step(const wk *w, int W, int b, int64_t budget, int64_t *samples, double *end) {
    const int i = next_worker(w, W);
    if (i < 0 || *samples >= budget) return -1;
    *samples += b;
    if (w[i].t > *end) *end = w[i].t;
    return *samples >= budget ? -1 : i;
}

static void start_compute(wk *w, double t, double dt) {
    w->t = t + dt;
    w->busy += dt;
    w->state = 0;
    w->clock++;
}

/* The parameter servers' state (asp, ssp, dasp). */
typedef struct ps {
    const ht_sim_cluster *c;
    const ht_sim_model *sm;
    const ht_sim_sync *p;
    const double *tc;
    wk *w;
    int W, S;
    double shard, *sfree, *held; /* held[i]: when worker i's reply could have left */
    int64_t *clk, version, last_assign;
    int *active, *state, *group, *pushed, units;
    double *tau;
} ps;

/* One update applied by every server, the shards of worker i's step that ended at t: when
 * worker i can compute again. As src/sync/ps.c: the worker reads each shard of its gradient
 * from the device and sends it; a server makes `passes` host passes over its shard (the
 * scaling, a SYNC group's sums), copies it to its device, steps, copies the shard back and
 * into each of `replies` replies (one pass each); the worker writes the parameters to its
 * device once every reply is in. Servers apply in arrival order. */
static double ps_apply(ps *v, int i, double t, int passes, int replies) {
    double d2h, h2d = ht_sim_host_copy(v->c, i, &d2h), done = t, sent = t;
    const double pass = v->c->host_add_gbs > 0 ? v->shard / (v->c->host_add_gbs * 1e9) : 0;
    for (int j = 0; j < v->S; j++) {
        int srv = v->W + j;
        double sd2h, sh2d = ht_sim_host_copy(v->c, srv, &sd2h);
        sent += v->shard * d2h;
        double arr = sent + link_time(v->c, i, srv, v->shard);
        double st = arr > v->sfree[j] ? arr : v->sfree[j];
        v->sfree[j] = st + (passes + replies) * pass + v->shard * (sh2d + sd2h) +
                      ht_sim_optim_time(v->c, srv, v->sm, v->shard);
        double rep = v->sfree[j] + link_time(v->c, srv, i, v->shard);
        if (rep > done) done = rep;
    }
    v->version++;
    return done + v->sm->param_bytes * h2d;
}

/* Worker k, held since its push, goes on at `go` (>= the reply time). */
static void ps_release(ps *v, int k, double go) {
    wk *m = &v->w[k];
    if (go < v->held[k]) go = v->held[k];
    m->comm += v->held[k] - m->t;
    m->idle += go - v->held[k];
    start_compute(m, go, v->tc[k]);
}

/* DASP: SYNC group g's update, once all its active members pushed: one apply, all released. */
static void dasp_flush(ps *v, int g, double now) {
    int last = -1;
    for (int k = 0; k < v->W; k++)
        if (v->group[k] == g && v->pushed[k]) last = k;
    if (last < 0) return;
    int n = 0;
    for (int k = 0; k < v->W; k++)
        n += v->group[k] == g && v->pushed[k];
    double done = ps_apply(v, last, now, n, n); /* a sum per push, no scaling, n replies */
    for (int k = 0; k < v->W; k++)
        if (v->group[k] == g && v->pushed[k]) {
            v->pushed[k] = 0;
            v->held[k] = done;
            ps_release(v, k, done);
        }
}

static void dasp_push(ps *v, int i, double t) {
    int g = v->group[i];
    v->pushed[i] = 1;
    v->w[i].state = 1;
    v->held[i] = t;
    int waiting = 0;
    for (int k = 0; k < v->W; k++)
        waiting += v->active[k] && v->group[k] == g && v->state[k] == HT_DASP_SYNC && !v->pushed[k];
    if (!waiting) dasp_flush(v, g, t);
}

/* asp / ssp / dasp: a worker's push is applied (dasp SYNC members: their group's at once),
 * and its reply held while the policy says so. */
static void run_ps(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                   const double *tc, wk *w, double *end) {
    int W = p->workers;
    ps v = {.c = c, .sm = sm, .p = p, .tc = tc, .w = w, .W = W, .S = p->servers,
            .shard = sm->param_bytes / p->servers};
    v.sfree = ht_xcalloc((size_t)v.S, sizeof *v.sfree);
    v.held = ht_xcalloc((size_t)W, sizeof *v.held);
    v.clk = ht_xcalloc((size_t)W, sizeof *v.clk);
    v.active = ht_xmalloc((size_t)W * sizeof *v.active);
    v.state = ht_xcalloc((size_t)W, sizeof *v.state); /* HT_DASP_ASYNC until assigned */
    v.group = ht_xmalloc((size_t)W * sizeof *v.group);
    v.pushed = ht_xcalloc((size_t)W, sizeof *v.pushed);
    v.tau = ht_xmalloc((size_t)W * sizeof *v.tau);
    for (int i = 0; i < W; i++) {
        v.active[i] = 1;
        v.group[i] = -1;
        v.tau[i] = tc[i]; /* the EMA of a constant compute time */
        start_compute(&w[i], 0, tc[i]);
        w[i].clock = 0;
    }
    const unsigned flags = ht_sync_rows[p->mode].flags;
    int dasp = (flags & HT_SYNC_F_STATES) != 0;
    int bound = flags & HT_SYNC_F_STALENESS ? p->staleness : dasp && p->max_ahead > 0 ? p->max_ahead : -1;
    int64_t samples = 0, budget = (int64_t)p->steps * p->B;
    int b = p->B / W;
    /* a push is b / B of a step: SGD scales the gradient by it (a host pass), AdamW its rate */
    double gs, ls;
    ht_ps_share_scales(sm->adamw, (double)b / p->B, &gs, &ls);
    for (int i; (i = next_worker(w, W)) >= 0;) {
        double t = w[i].t;
        samples += b;
        v.clk[i]++;
        if (dasp && v.state[i] == HT_DASP_SYNC) {
            dasp_push(&v, i, t);
        } else {
            double done = ps_apply(&v, i, t, gs != 1, 1);
            if (done > *end) *end = done;
            /* ssp (and dasp's max_ahead for ASYNC workers): held while too far ahead */
            if (bound >= 0 && !ht_ssp_may_run(v.clk[i], ht_ssp_min_clock(v.clk, v.active, W), bound)) {
                w[i].state = 1;
                v.held[i] = done;
            } else {
                w[i].comm += done - t;
                start_compute(&w[i], done, tc[i]);
            }
        }
        if (samples >= budget) break; /* the servers stop the job */
        for (int k = 0; bound >= 0 && k < W; k++) /* this push may release held ones */
            if (w[k].state == 1 && !v.pushed[k] &&
                ht_ssp_may_run(v.clk[k], ht_ssp_min_clock(v.clk, v.active, W), bound))
                ps_release(&v, k, t);
        if (dasp && v.version - v.last_assign >= p->interval) { /* new states (rules.h) */
            for (int g = 0; g < W; g++)
                dasp_flush(&v, g, t);
            v.units = ht_dasp_assign(v.tau, v.active, W, p->similar, v.state, v.group);
            v.last_assign = v.version;
        }
    }
    for (int j = 0; j < v.S; j++)
        if (v.sfree[j] > *end) *end = v.sfree[j];
    free(v.sfree);
    free(v.held);
    free(v.clk);
    free(v.active);
    free(v.state);
    free(v.group);
    free(v.pushed);
    free(v.tau);
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
            double fin = start + (n > 1 ? ht_sim_ring_cost(c, HT_SIM_RING, out, n, bytes) : 0);
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

/* gossip, as src/sync/gossip.c runs push-sum: nobody waits. After each local step (compute
 * and optimizer) a worker takes every model sent to it by then (the receive copies it over
 * the link: a large message leaves its sender only when taken) and merges it (a pass over
 * the model on the host); when an exchange is due and its own last model has been taken,
 * it sends the model to the round's peer (copied into the send buffer: one pass;
 * gossip-adaptive also keeps it as the last exchanged and takes its norm: two more); gossip-adaptive measures its change
 * since the last exchange every step (one pass). The model is read from the device when a
 * step needs it on the host, and written back after a merge. Host passes run at the
 * cluster's host_add_gbs (free when 0). */
typedef struct gmsg {
    int to;      /* -1: none in flight (a worker sends only when its last one was taken) */
    double sent; /* taken at the receiver's first step end after this */
} gmsg;

static void run_gossip(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                       const double *tc, wk *w, double *end) {
    const int W = p->workers, period = p->period > 0 ? p->period : 1;
    const double bytes = sm->param_bytes;
    const double pass = c->host_add_gbs > 0 ? bytes / (c->host_add_gbs * 1e9) : 0;
    int64_t *round = ht_xcalloc((size_t)W, sizeof *round);
    int64_t *steps = ht_xcalloc((size_t)W, sizeof *steps);
    int *since = ht_xcalloc((size_t)W, sizeof *since); /* local steps since the last exchange */
    gmsg *out = ht_xmalloc((size_t)W * sizeof *out);   /* each worker's model in flight */
    for (int i = 0; i < W; i++) {
        start_compute(&w[i], 0, tc[i]);
        out[i].to = -1;
    }
    int64_t samples = 0, budget = (int64_t)p->steps * p->B;
    const int b = p->B / W;
    for (int i; (i = next_step(w, W, b, budget, &samples, end)) >= 0;) {
        const double t = w[i].t;
        steps[i]++, since[i]++;
        double d2h, h2d = ht_sim_host_copy(c, i, &d2h), host = 0;
        int read = 0, merged = 0;
        for (int j = 0; j < W; j++)
            if (out[j].to == i && out[j].sent <= t) {
                if (!read++) host += bytes * d2h;
                host += link_time(c, j, i, bytes) + pass;
                out[j].to = -1;
                merged = 1;
            }
        /* as src/sync/gossip.c exchange_due: the change since the last exchange relative to
         * the model then (here: since x drift of a model of norm 1), measured every step */
        if (p->adaptive) {
            if (!read++) host += bytes * d2h;
            host += pass;
        }
        const int due = p->adaptive ? ht_gossip_due(since[i] * p->drift, 1.0, p->threshold,
                                                    since[i], p->max_period)
                                    : steps[i] % period == 0;
        int q = -1;
        if (out[i].to < 0 && due)
            q = ht_gossip_peer(i, (int)(round[i]++ % (W > 1 ? 2 * W : 1)), W);
        if (q >= 0) {
            if (!read++) host += bytes * d2h;
            host += (p->adaptive ? 3 : 1) * pass;
            out[i] = (gmsg){.to = q, .sent = t + host};
            since[i] = 0;
        }
        if (merged) host += bytes * h2d;
        w[i].comm += host;
        start_compute(&w[i], t + host, tc[i]);
    }
    free(round), free(steps), free(since), free(out);
}

/* gossip-fixed, as src/sync/gossip.c pair_exchange: every `period` local steps a worker
 * reads its model to the host (copied to the send buffer: one pass) and waits until the
 * round's peer is there too (state 1 from wait_from); then both send at once, merge (one
 * pass), write the model back and go on. The matching is symmetric, so the waiting peer of
 * the same round is this worker's. */
static void pair_meet(const ht_sim_cluster *c, double bytes, double pass, const double *tc,
                      wk *w, int i, int q, double ready) {
    const double x = fmax(link_time(c, i, q, bytes), link_time(c, q, i, bytes));
    const double T = fmax(ready, w[q].wait_from) + x + pass;
    const int k[2] = {i, q};
    for (int j = 0; j < 2; j++) {
        double d2h, h2d = ht_sim_host_copy(c, k[j], &d2h);
        const double from = j ? w[q].wait_from : ready;
        w[k[j]].idle += T - x - pass - from;
        w[k[j]].comm += from - w[k[j]].t + x + pass + bytes * h2d;
        start_compute(&w[k[j]], T + bytes * h2d, tc[k[j]]);
    }
}

static void run_gossip_fixed(const ht_sim_cluster *c, const ht_sim_model *sm,
                             const ht_sim_sync *p, const double *tc, wk *w, double *end) {
    const int W = p->workers, period = p->period > 0 ? p->period : 1;
    const double bytes = sm->param_bytes;
    const double pass = c->host_add_gbs > 0 ? bytes / (c->host_add_gbs * 1e9) : 0;
    int64_t *round = ht_xcalloc((size_t)W, sizeof *round);
    for (int i = 0; i < W; i++)
        start_compute(&w[i], 0, tc[i]);
    int64_t samples = 0, budget = (int64_t)p->steps * p->B;
    const int b = p->B / W;
    for (int i; (i = next_step(w, W, b, budget, &samples, end)) >= 0;) {
        const double t = w[i].t;
        int q = w[i].clock % period == 0
                    ? ht_gossip_peer(i, (int)(round[i]++ % (W > 1 ? 2 * W : 1)), W)
                    : -1;
        if (q < 0) {
            start_compute(&w[i], t, tc[i]);
            continue;
        }
        double d2h;
        ht_sim_host_copy(c, i, &d2h);
        const double ready = t + bytes * d2h + pass;
        if (w[q].state == 1 && round[q] == round[i]) {
            pair_meet(c, bytes, pass, tc, w, i, q, ready);
        } else {
            w[i].state = 1;
            w[i].wait_from = ready;
        }
    }
    free(round);
}

int ht_sim_run_sync(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                    ht_sim_result *res) {
    memset(res, 0, sizeof *res);
    int W = p->workers;
    const ht_sync_row *row = ht_sync_row_of(p->mode);
    if (!row || row->family == HT_SYNC_FAM_ALLREDUCE)
        return ht_error(HT_EINPUT, "sync mode %d: not an asynchronous policy (bsp is timed as "
                        "data parallel)", (int)p->mode);
    const int ps_mode = row->family == HT_SYNC_FAM_PS;
    /* gossip's coordinator only counts progress: not timed */
    int extra = ps_mode ? p->servers : row->family == HT_SYNC_FAM_GOSSIP ? 0 : 1;
    if (W < 1 || W + extra > c->nranks || p->B < W)
        return ht_error(HT_EINPUT, "%s: %d workers + %d serving ranks do not fit %d ranks (or "
                        "batch %d < workers)", c->source, W, extra, c->nranks, p->B);
    double *tc = ht_xmalloc((size_t)W * sizeof *tc);
    for (int i = 0; i < W; i++)
        tc[i] = ht_sim_range_time(c, i, sm, 0, sm->nlayers, p->B / W, 0) +
                ht_sim_range_time(c, i, sm, 0, sm->nlayers, p->B / W, 1) +
                (ps_mode ? 0 : ht_sim_optim_time(c, i, sm, sm->param_bytes));
    wk *w = ht_xcalloc((size_t)W, sizeof *w);
    double end = 0;
    if (ps_mode) run_ps(c, sm, p, tc, w, &end);
    else if (row->family == HT_SYNC_FAM_GROUP) run_preduce(c, sm, p, tc, w, &end);
    else if (row->flags & HT_SYNC_F_BLOCKING) run_gossip_fixed(c, sm, p, tc, w, &end);
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
