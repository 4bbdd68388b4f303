/* Pipeline executor: a schedule's instruction streams (src/pipe/schedule.h), instruction by
 * instruction, as simulator ops. W replicas of the P-rank pipeline run side by side (rank
 * w * P + p; P = D, the schedule's ranks, unless stages are replicated: then pipeline rank p
 * runs schedule rank q's stream on its share of each micro-batch, and a boundary moves in
 * pieces between the ranks whose samples overlap); FWD / BWD / RECOMPUTE take the stage's
 * layer times at the rank's samples per micro-batch on its device; SEND / RECV move the stage boundary's activation or gradient over the
 * link between the two ranks; REDUCE_GRADS is a blocking all-reduce among every rank that
 * holds a copy of the same stages (the replicas, and Chimera's other direction); memory
 * counts the parameters, gradients and optimizer state of the rank's stages plus every slot
 * in use, a slot holding a micro-batch's kept activations of its stage from its first use
 * (LOAD, RECV_ACT, FWD) until the BWD that frees it (only the stage's input between FWD and
 * RECOMPUTE where the stream recomputes).
 * A tied head (sm->tied_bytes, src/train/pipe_tied.h) adds, before each optimizer step, one
 * all-reduce of wte among every rank of the first and last stages (stage 0's REDUCE_GRADS
 * then leaves wte out); the last stage's ranks hold wte too. */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/sched_2bw.h"
#include "sim/sim.h"

/* Rank of `stage` in pipeline `dir` (schedule.h: stage % D; Chimera's up pipeline
 * D - 1 - stage; ZB-V's way back 2D-1-stage). */
static int stage_rank(const ht_pipe_sched *s, int dir, int stage) {
    return ht_pipe_stage_rank(s->p.kind, s->p.D, s->p.v, dir, stage);
}

/* The boundary a message crosses: activations of stage s travel to stage s + 1 (a SEND_ACT
 * names s, its RECV_ACT s + 1), gradients back (a SEND_GRAD names s, its RECV_GRAD s - 1);
 * a message is keyed by its kind, direction, boundary (the later stage) and micro-batch. */
static int64_t tag_of(const ht_pipe_sched *s, const ht_pipe_instr *in) {
    int grad = in->op == HT_PI_SEND_GRAD || in->op == HT_PI_RECV_GRAD;
    int b = in->stage + (in->op == HT_PI_SEND_ACT || in->op == HT_PI_RECV_GRAD);
    return (((int64_t)(grad * 2 + in->dir) * (s->S + 1) + b) * s->p.N) + in->mb;
}

typedef struct ctx {
    const ht_sim_cluster *c;
    const ht_sim_model *sm;
    const ht_sim_pipe *p;
    const ht_pipe_sched *s;
    const int *bounds;
    int D, W, S;
    int P;                   /* pipeline ranks */
    int *first, *off, *cnt;  /* [D + 1], [P], [P]: the groups (ht_sim_pipe) */
    int *q_of;               /* [P] schedule rank of each pipeline rank */
    double *tf, *tb;  /* [rank][S] stage times, filled lazily (< 0: not yet) */
    double *wshare;   /* [S] split kinds: the share of a stage's backward that is W */
    int split;        /* BWD is B only, BWD_W the rest (and frees the slot) */
    double *slot;     /* [S] bytes a slot holds for the stage */
    double *inb;      /* [S] bytes of the stage's input (kept when recomputing) */
    int chained;      /* a 2BW chain (chain_2bw): OPT_STEP also copies the weights */
    int *members;     /* [collective id] ranks in it */
    double tied;      /* wte's bytes when a tied head sits on another stage than wte, else 0 */
    int *tied_ids, ntied; /* the k-th optimizer step's wte all-reduce (-1: none) */
} ctx;

static double stage_time(ctx *x, int r, int st, int bwd) {
    double *t = (bwd ? x->tb : x->tf) + (size_t)r * x->S + st;
    if (*t < 0)
        *t = ht_sim_range_time(x->c, r, x->sm, x->bounds[st], x->bounds[st + 1],
                               x->cnt[r % x->P], bwd);
    return *t;
}

static double stage_params(const ctx *x, int st) {
    double b = 0;
    for (int i = x->bounds[st]; i < x->bounds[st + 1]; i++)
        b += x->sm->l[i].param_bytes;
    return b;
}

/* Stages (over both directions) that rank d holds: mask[st] = 1. */
static void held(const ctx *x, int d, char *mask) {
    memset(mask, 0, (size_t)x->S);
    for (int dir = 0; dir < x->s->ndir; dir++)
        for (int st = 0; st < x->S; st++)
            if (stage_rank(x->s, dir, st) == d) mask[st] = 1;
}

/* The reduction key of a REDUCE_GRADS on pipeline rank d: its stage (0 .. S-1) when it
 * names one, else S + the smallest stage the rank holds (it reduces all of them). */
static int red_key(const ctx *x, int d, const ht_pipe_instr *in, char *mask) {
    if (in->stage >= 0 && in->stage < x->S) return in->stage;
    held(x, d, mask);
    for (int st = 0; st < x->S; st++)
        if (mask[st]) return x->S + st;
    return x->S;
}

/* Bytes a stage's REDUCE_GRADS sums: its parameters, without wte when tied. */
static double red_params(const ctx *x, int st) {
    return stage_params(x, st) - (st == 0 ? x->tied : 0);
}

/* Bytes a key reduces: one stage's parameters, or every stage of the set. */
static double key_bytes(const ctx *x, int key, char *mask) {
    if (key < x->S) return red_params(x, key);
    held(x, stage_rank(x->s, 0, key - x->S) , mask);
    double b = 0;
    for (int st = 0; st < x->S; st++)
        b += mask[st] ? red_params(x, st) : 0;
    return b;
}

/* Whether schedule rank d holds the first (end 0) or last (end 1) stage. */
static int holds_end(const ctx *x, int d, int end, char *mask) {
    held(x, d, mask);
    return mask[end ? x->S - 1 : 0];
}

/* A tied head's all-reduces: one per optimizer step of the streams, among every rank of
 * every replica whose schedule rank holds the first or the last stage. */
static void make_tied(ht_sim *sim, ctx *x) {
    if (x->tied <= 0) return;
    char *mask = ht_xmalloc((size_t)x->S);
    int *members = ht_xmalloc((size_t)x->P * x->W * sizeof *members), n = 0;
    for (int w = 0; w < x->W; w++)
        for (int d = 0; d < x->D; d++)
            for (int p = x->first[d]; (holds_end(x, d, 0, mask) || holds_end(x, d, 1, mask)) &&
                                      p < x->first[d + 1];
                 p++)
                members[n++] = w * x->P + p;
    for (int i = 0; i < x->s->len[0]; i++)
        x->ntied += x->s->ins[0][i].op == HT_PI_OPT_STEP;
    x->tied_ids = ht_xmalloc((size_t)(x->ntied ? x->ntied : 1) * sizeof *x->tied_ids);
    for (int k = 0; k < x->ntied; k++)
        x->tied_ids[k] = n > 1 ? ht_sim_coll_new(sim, members, n, x->tied, x->p->alg) : -1;
    free(members);
    free(mask);
}

/* Creates the REDUCE_GRADS collectives: the k-th REDUCE_GRADS of a key on every rank (of
 * every replica) that issues one joins one all-reduce. Returns ids[key * maxk + k]. */
static int *make_reductions(ht_sim *sim, ctx *x, int *maxk_out) {
    const ht_pipe_sched *s = x->s;
    int D = x->D, W = x->W, K = 2 * x->S;
    char *mask = ht_xmalloc((size_t)x->S);
    int *cnt = ht_xcalloc((size_t)D * K, sizeof *cnt), maxk = 1;
    for (int d = 0; d < D; d++)
        for (int i = 0; i < s->len[d]; i++)
            if (s->ins[d][i].op == HT_PI_REDUCE_GRADS) {
                int c = ++cnt[d * K + red_key(x, d, &s->ins[d][i], mask)];
                if (c > maxk) maxk = c;
            }
    int *ids = ht_xmalloc((size_t)K * maxk * sizeof *ids);
    int *members = ht_xmalloc((size_t)x->P * W * sizeof *members);
    for (int key = 0; key < K; key++)
        for (int k = 0; k < maxk; k++) {
            int n = 0;
            for (int w = 0; w < W; w++)
                for (int d = 0; d < D; d++)
                    for (int p = x->first[d]; cnt[d * K + key] > k && p < x->first[d + 1]; p++)
                        members[n++] = w * x->P + p;
            int id = n ? ht_sim_coll_new(sim, members, n, key_bytes(x, key, mask), x->p->alg) : -1;
            ids[key * maxk + k] = id;
            if (id >= 0) {
                x->members = ht_xrealloc(x->members, (size_t)(id + 1) * sizeof *x->members);
                x->members[id] = n;
            }
        }
    *maxk_out = maxk;
    free(mask);
    free(cnt);
    free(members);
    return ids;
}

/* A SEND (recv 0) or RECV (1) of instruction in on rank w * P + p: one piece per rank of the
 * peer's group whose samples overlap p's, of `per` bytes a sample. */
static void pieces(ht_sim *sim, const ctx *x, int w, int p, const ht_pipe_instr *in, int recv,
                   double per, int name) {
    const int a0 = x->off[p], a1 = a0 + x->cnt[p], r = w * x->P + p;
    for (int o = x->first[in->peer]; o < x->first[in->peer + 1]; o++) {
        const int lo = x->off[o] > a0 ? x->off[o] : a0;
        const int hi = x->off[o] + x->cnt[o] < a1 ? x->off[o] + x->cnt[o] : a1;
        if (lo >= hi) continue;
        if (recv) ht_sim_recv(sim, r, w * x->P + o, tag_of(x->s, in), name);
        else ht_sim_send(sim, r, w * x->P + o, tag_of(x->s, in), per * (hi - lo), name);
    }
}

/* Pipeline rank p of replica w: the stream of its schedule rank d. */
static void push_rank(ht_sim *sim, ctx *x, int w, int p, const int *ids, int maxk,
                      const char *recompute, const int *names) {
    const ht_pipe_sched *s = x->s;
    const int d = x->q_of[p], r = w * x->P + p, mb = x->cnt[p];
    int ntied = 0;
    int *occ = ht_xcalloc((size_t)(2 * x->S), sizeof *occ);
    char *mask = ht_xmalloc((size_t)x->S);
    char *busy = ht_xcalloc((size_t)(s->nbuf[d] > 0 ? s->nbuf[d] : 1), 1);
    double *held_b = ht_xcalloc((size_t)(s->nbuf[d] > 0 ? s->nbuf[d] : 1), sizeof *held_b);
    for (int i = 0; i < s->len[d]; i++) {
        const ht_pipe_instr *in = &s->ins[d][i];
        int st = in->stage, name = names[in->op];
        switch (in->op) {
        case HT_PI_FWD:
        case HT_PI_RECOMPUTE:
            ht_sim_compute(sim, r, stage_time(x, r, st, 0), HT_SIM_CAT_COMPUTE, name);
            break;
        case HT_PI_BWD:
        case HT_PI_BWD_W: { /* split: B the input-gradient share, W the weights' */
            double full = stage_time(x, r, st, 1), wt = x->split ? full * x->wshare[st] : 0;
            ht_sim_compute(sim, r, in->op == HT_PI_BWD ? full - wt : wt, HT_SIM_CAT_COMPUTE, name);
            break;
        }
        case HT_PI_SEND_ACT:
        case HT_PI_SEND_GRAD: {
            int b = in->op == HT_PI_SEND_ACT ? x->bounds[st + 1] - 1 : x->bounds[st];
            pieces(sim, x, w, p, in, 0,
                   in->op == HT_PI_SEND_ACT ? x->sm->l[b].out_bytes : x->sm->l[b].in_bytes, name);
            break;
        }
        case HT_PI_RECV_ACT:
        case HT_PI_RECV_GRAD:
            pieces(sim, x, w, p, in, 1, 0, name);
            break;
        case HT_PI_REDUCE_GRADS: {
            int key = red_key(x, d, in, mask);
            int id = ids[key * maxk + occ[key]++];
            /* the executor (reduce_stage) stages the sum through the host: the stage's
             * gradients read to it, reduced there, written back; alone, nothing moves */
            double d2h, h2d = ht_sim_host_copy(x->c, r, &d2h);
            double b = id >= 0 && x->members[id] > 1 ? key_bytes(x, key, mask) : 0;
            ht_sim_compute(sim, r, b * d2h, HT_SIM_CAT_COMM, name);
            ht_sim_coll(sim, r, id, name);
            ht_sim_wait(sim, r, id, name);
            ht_sim_compute(sim, r, b * h2d, HT_SIM_CAT_COMM, name);
            break;
        }
        case HT_PI_OPT_STEP: {
            const int id = x->tied > 0 && ntied < x->ntied ? x->tied_ids[ntied++] : -1;
            if (id >= 0 && (holds_end(x, d, 0, mask) || holds_end(x, d, 1, mask))) {
                double d2h, h2d = ht_sim_host_copy(x->c, r, &d2h); /* as reduce_stage */
                ht_sim_compute(sim, r, x->tied * d2h, HT_SIM_CAT_COMM, name);
                ht_sim_coll(sim, r, id, name);
                ht_sim_wait(sim, r, id, name);
                ht_sim_compute(sim, r, x->tied * h2d, HT_SIM_CAT_COMM, name);
            }
            double b = holds_end(x, d, 1, mask) && !mask[0] ? x->tied : 0; /* wte's copy */
            held(x, d, mask);
            for (int k = 0; k < x->S; k++)
                b += mask[k] ? stage_params(x, k) : 0;
            /* 2BW: the new version is copied over the oldest, the whole model's parameters
             * (ht_pipe_exec_2bw_period) */
            double cp = x->chained ? ht_sim_copy_time(x->c, r, x->sm->param_bytes) : 0;
            ht_sim_compute(sim, r, ht_sim_optim_time(x->c, r, x->sm, b) + cp, HT_SIM_CAT_OPT, name);
            break;
        }
        default: /* LOAD: the micro-batch's inputs copied to the device */
            ht_sim_compute(sim, r, mb * x->sm->in_bytes * ht_sim_host_copy(x->c, r, NULL),
                           HT_SIM_CAT_COMM, name);
        }
        /* slots: taken at first use, freed by BWD (split: BWD_W); a recomputed stage keeps
         * only its input from its FWD to its RECOMPUTE */
        int bf = in->buf, frees = in->op == (x->split ? HT_PI_BWD_W : HT_PI_BWD);
        if (in->op == HT_PI_BWD && x->split) bf = -1; /* the slot stays for the W */
        if (!x->p->rank_bytes && bf >= 0 && bf < s->nbuf[d] && st >= 0 && st < x->S) {
            int rec = recompute[st];
            double want = frees                                ? 0
                          : rec && in->op != HT_PI_RECOMPUTE ? x->inb[st] * mb
                                                             : x->slot[st] * mb;
            if (frees || in->op == HT_PI_RECOMPUTE || !busy[bf]) {
                ht_sim_mem_at_last(sim, r, want - held_b[bf]);
                held_b[bf] = want;
                busy[bf] = !frees;
            }
        }
    }
    free(busy);
    free(held_b);
    free(occ);
    free(mask);
}

/* Runs the streams of s (p->s or a 2BW chain of it). */
static int run_sched(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_pipe *p,
                     const ht_pipe_sched *s, int chained, int trace_on, const char *trace,
                     ht_sim_result *res) {
    memset(res, 0, sizeof *res);
    ctx x = {.c = c, .sm = sm, .p = p, .s = s, .D = s->p.D, .W = p->W > 0 ? p->W : 1,
             .S = s->S, .chained = chained};
    x.P = p->first ? p->P : x.D;
    int n = x.P * x.W;
    if (n > c->nranks)
        return ht_error(HT_EINPUT, "%s: the pipeline needs %d ranks (%d x %d), the cluster has %d",
                        c->source, n, x.W, x.P, c->nranks);
    if (p->first && (p->first[0] != 0 || p->first[x.D] != x.P))
        return ht_error(HT_EINPUT, "replicated stages: %d schedule ranks grouped over pipeline "
                        "ranks %d..%d, not 0..%d", x.D, p->first[0], p->first[x.D], x.P);
    if (x.S > 4096) return ht_error(HT_EINPUT, "%d stages: at most 4096", x.S);
    if (s->ndir == 2 && x.D % 2)
        return ht_error(HT_EINPUT, "chimera with %d ranks: D must be even", x.D);
    const int *bounds = p->bounds;
    for (int st = 0; st < x.S; st++)
        if (!(bounds[0] == 0 && bounds[x.S] == sm->nlayers && bounds[st] < bounds[st + 1]))
            return ht_error(HT_EINPUT, "pipeline bounds: stage %d's layers [%d, %d) of %d are "
                            "not a proper cut", st, bounds[st], bounds[st + 1], sm->nlayers);
    x.bounds = bounds;
    x.first = ht_xmalloc((size_t)(x.D + 1) * sizeof *x.first);
    x.off = ht_xmalloc((size_t)x.P * sizeof *x.off);
    x.cnt = ht_xmalloc((size_t)x.P * sizeof *x.cnt);
    x.q_of = ht_xmalloc((size_t)x.P * sizeof *x.q_of);
    for (int q = 0; q <= x.D; q++)
        x.first[q] = p->first ? p->first[q] : q;
    for (int q = 0; q < x.D; q++)
        for (int r = x.first[q]; r < x.first[q + 1]; r++)
            x.q_of[r] = q, x.off[r] = p->first ? p->off[r] : 0, x.cnt[r] = p->first ? p->cnt[r] : p->mb;
    int rc;
    x.tf = ht_xmalloc((size_t)n * x.S * sizeof *x.tf);
    x.tb = ht_xmalloc((size_t)n * x.S * sizeof *x.tb);
    for (size_t i = 0; i < (size_t)n * x.S; i++)
        x.tf[i] = x.tb[i] = -1;
    x.split = ht_pipe_kind_split(s->p.kind);
    x.wshare = ht_xcalloc((size_t)x.S, sizeof *x.wshare);
    for (int st = 0; st < x.S; st++) { /* W: the weight-gradient GEMMs' share of the FLOPs */
        double b = 0, w = 0;
        for (int i = bounds[st]; i < bounds[st + 1]; i++)
            b += sm->l[i].flops_b, w += sm->l[i].flops_w;
        x.wshare[st] = b > 0 ? w / b : 0.5;
    }
    x.slot = ht_xcalloc((size_t)x.S, sizeof *x.slot);
    x.inb = ht_xcalloc((size_t)x.S, sizeof *x.inb);
    for (int st = 0; st < x.S; st++) {
        x.inb[st] = bounds[st] == 0 ? sm->in_bytes : sm->l[bounds[st]].in_bytes;
        x.slot[st] = x.inb[st];
        for (int i = bounds[st]; i < bounds[st + 1]; i++)
            x.slot[st] += sm->l[i].act_bytes;
    }
    char *recompute = ht_xcalloc((size_t)x.S, 1);
    for (int d = 0; d < x.D; d++)
        for (int i = 0; i < s->len[d]; i++)
            if (s->ins[d][i].op == HT_PI_RECOMPUTE && s->ins[d][i].stage >= 0 &&
                s->ins[d][i].stage < x.S)
                recompute[s->ins[d][i].stage] = 1;

    ht_sim *sim = ht_sim_new(c, n, trace_on);
    int names[HT_PI_NOPS];
    for (int o = 0; o < HT_PI_NOPS; o++)
        names[o] = ht_sim_name(sim, ht_pipe_op_names[o]);
    int maxk;
    x.tied = x.S > 1 ? sm->tied_bytes : 0;
    int *ids = make_reductions(sim, &x, &maxk);
    make_tied(sim, &x);
    char mask[4096];
    for (int w = 0; w < x.W; w++)
        for (int pr = 0; pr < x.P; pr++) {
            push_rank(sim, &x, w, pr, ids, maxk, recompute, names);
            double b = holds_end(&x, x.q_of[pr], 1, mask) && !mask[0] ? x.tied : 0;
            held(&x, x.q_of[pr], mask);
            for (int st = 0; st < x.S; st++)
                b += mask[st] ? stage_params(&x, st) : 0;
            ht_sim_mem_base(sim, w * x.P + pr, p->rank_bytes ? p->rank_bytes[x.q_of[pr]]
                                                             : b * (2 + sm->optim_state_floats));
        }
    rc = ht_sim_run(sim, res);
    if (rc == HT_OK && trace_on && trace) rc = ht_sim_write_trace(sim, trace);
    res->samples = s->p.N * p->mb * x.W;
    res->throughput = res->makespan > 0 ? res->samples / res->makespan : 0;
    ht_sim_free(sim);
    free(ids);
    free(recompute);
    free(x.tf);
    free(x.tb);
    free(x.slot);
    free(x.wshare);
    free(x.inb);
    free(x.members);
    free(x.tied_ids);
    free(x.first), free(x.off), free(x.cnt), free(x.q_of);
    return rc;
}

/* T batches of PipeDream-2BW without a flush, as the executor chains them
 * (ht_pipe_exec_2bw_period, src/pipe/sched_2bw.h): the period stream runs for t = 0 .. T,
 * each instruction only where its batch t + ht_pipe_2bw_batch() is in [0, T), micro-batch k
 * of batch b numbered b N + k (messages of different batches never match); REDUCE_GRADS
 * stays where the stream has it, and the optimizer step (of the stream's OPT_STEP, which the
 * executor skips) ends every period that has a pending batch: t >= 1. */
static void chain_2bw(const ht_pipe_sched *st, int T, ht_pipe_sched *out) {
    int D = st->p.D, N = st->p.N;
    memset(out, 0, sizeof *out);
    out->p = st->p;
    out->p.N = T * N;
    out->S = st->S;
    out->ndir = 1;
    out->len = ht_xcalloc((size_t)D, sizeof *out->len);
    out->ins = ht_xcalloc((size_t)D, sizeof *out->ins);
    out->nbuf = ht_xcalloc((size_t)D, sizeof *out->nbuf);
    out->mb_dir = ht_xcalloc((size_t)T * N, sizeof *out->mb_dir);
    for (int r = 0; r < D; r++) {
        out->ins[r] = ht_xmalloc(((size_t)(T + 1) * st->len[r] + (size_t)T) * sizeof **out->ins);
        out->nbuf[r] = st->nbuf[r];
        int n = 0;
        for (int t = 0; t <= T; t++) {
            for (int i = 0; i < st->len[r]; i++) {
                ht_pipe_instr in = st->ins[r][i];
                int b = t + ht_pipe_2bw_batch(st, r, i);
                if (b < 0 || b >= T || in.op == HT_PI_OPT_STEP) continue;
                if (in.op != HT_PI_REDUCE_GRADS) /* the others carry a micro-batch */
                    in.mb = b * N + (in.mb < 0 ? in.mb + N : in.mb);
                out->ins[r][n++] = in;
            }
            if (t >= 1)
                out->ins[r][n++] = (ht_pipe_instr){HT_PI_OPT_STEP, 0, 0, -1, -1, -1, -1};
        }
        out->len[r] = n;
    }
}

/* Per-batch figures of a 2BW chain: the difference of chains of T and 2T batches over T, so
 * the fill and the drain (once per run) drop out: the steady state. */
static void per_batch(ht_sim_result *a, const ht_sim_result *b, int T) {
    a->makespan = (b->makespan - a->makespan) / T;
    a->bytes = (b->bytes - a->bytes) / T;
    a->events = b->events;
    a->peak_mem = b->peak_mem;
    a->busy = a->comm = a->idle = a->opt = 0;
    for (int r = 0; r < a->nranks; r++) {
        ht_sim_rank *x = &a->rank[r];
        const ht_sim_rank *y = &b->rank[r];
        x->busy = (y->busy - x->busy) / T, x->comm = (y->comm - x->comm) / T;
        x->opt = (y->opt - x->opt) / T, x->bytes_sent = (y->bytes_sent - x->bytes_sent) / T;
        x->idle = a->makespan - x->busy - x->comm - x->opt;
        if (x->idle < 0) x->idle = 0;
        x->end = y->end, x->peak_mem = y->peak_mem;
        a->busy += x->busy / a->nranks, a->comm += x->comm / a->nranks;
        a->opt += x->opt / a->nranks, a->idle += x->idle / a->nranks;
    }
}

int ht_sim_run_pipe(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_pipe *p,
                    int trace_on, const char *trace, ht_sim_result *res) {
    if (p->chain <= 0) return run_sched(c, sm, p, p->s, 0, trace_on, trace, res);
    int T = p->chain;
    ht_pipe_sched a, b;
    chain_2bw(p->s, T, &a);
    chain_2bw(p->s, 2 * T, &b);
    ht_sim_result r2;
    int rc = run_sched(c, sm, p, &a, 1, 0, NULL, res);
    if (rc == HT_OK) rc = run_sched(c, sm, p, &b, 1, trace_on, trace, &r2);
    if (rc == HT_OK) {
        per_batch(res, &r2, T);
        res->samples = p->s->p.N * p->mb * (p->W > 0 ? p->W : 1);
        res->throughput = res->makespan > 0 ? res->samples / res->makespan : 0;
        ht_sim_result_free(&r2);
    }
    ht_pipe_sched_free(&a);
    ht_pipe_sched_free(&b);
    return rc;
}
