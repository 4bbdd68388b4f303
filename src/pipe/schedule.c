/* Schedule generation: parameter checks, the generator table, and the builder that turns a
 * per-rank order of compute operations into instruction streams (see internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/internal.h"

const char *const ht_pipe_op_names[HT_PI_NOPS] = {
    "LOAD",      "FWD",       "BWD",       "SEND_ACT",     "RECV_ACT",
    "SEND_GRAD", "RECV_GRAD", "RECOMPUTE", "REDUCE_GRADS", "OPT_STEP",
    "BWD_W"};

/* Which generator builds each kind: the generator column of config/modes.h's rows. */
#define GENERATOR(id, name, gen, ...) [HT_PIPE_##id] = gen,
static const ht_pipe_gen_fn generators[HT_PIPE_NKINDS] = {HT_PIPE_ROWS(GENERATOR)};

/* Bounds that keep every id and the checker's tables well inside int32. */
enum { MAX_D = 4096, MAX_V = 64, MAX_N = 1 << 20, MAX_CELLS = 1 << 24 };

int ht_pipe_kind_ndir(int kind) { return ht_pipe_kind_has(kind, HT_PIPE_F_TWO_WAY) ? 2 : 1; }

int ht_pipe_kind_split(int kind) { return ht_pipe_kind_has(kind, HT_PIPE_F_SPLIT_BW); }

int ht_pipe_stage_rank(int kind, int D, int v, int dir, int stage) {
    (void)v;
    if (dir == 1 && ht_pipe_kind_has(kind, HT_PIPE_F_TWO_WAY)) return D - 1 - stage;
    if (stage >= D && ht_pipe_kind_has(kind, HT_PIPE_F_V)) return 2 * D - 1 - stage; /* the V's way back */
    return stage % D;
}

int ht_pipe_stage_chunk(int kind, int D, int dir, int stage) {
    if (ht_pipe_kind_has(kind, HT_PIPE_F_TWO_WAY)) return dir;
    return stage / D;
}

int ht_pipe_nchunks(const ht_pipe_sched *s) { return s->ndir == 2 ? 2 : s->S / s->p.D; }

int ht_pipe_chunk_stage(const ht_pipe_sched *s, int rank, int chunk, int *dir) {
    int D = s->p.D;
    if (s->ndir == 2) {
        if (dir) *dir = chunk;
        return chunk == 0 ? rank : D - 1 - rank;
    }
    if (dir) *dir = 0;
    if (ht_pipe_kind_has(s->p.kind, HT_PIPE_F_V) && chunk == 1) return 2 * D - 1 - rank;
    return chunk * D + rank;
}

int ht_pipe_msg_tag(const ht_pipe_sched *s, const ht_pipe_instr *in) {
    int kind, rstage; /* the message is named after the stage that receives it */
    switch (in->op) {
    case HT_PI_SEND_ACT: kind = 0, rstage = in->stage + 1; break;
    case HT_PI_RECV_ACT: kind = 0, rstage = in->stage; break;
    case HT_PI_SEND_GRAD: kind = 1, rstage = in->stage - 1; break;
    case HT_PI_RECV_GRAD: kind = 1, rstage = in->stage; break;
    default: return -1;
    }
    return ((in->mb * s->ndir + in->dir) * s->S + rstage) * 2 + kind;
}

static int check_params(const ht_pipe_params *p) {
    if (p->kind < 0 || p->kind >= HT_PIPE_NKINDS)
        return ht_error(HT_EINPUT, "pipeline schedule kind %d is out of range 0..%d", p->kind,
                        HT_PIPE_NKINDS - 1);
    const char *k = ht_pipe_kind_names[p->kind];
    if (p->D < 1 || p->D > MAX_D)
        return ht_error(HT_EINPUT, "schedule \"%s\": %d pipeline stages (ranks), expected 1..%d",
                        k, p->D, MAX_D);
    if (p->N < 1 || p->N > MAX_N)
        return ht_error(HT_EINPUT, "schedule \"%s\": %d micro-batches, expected 1..%d", k, p->N,
                        MAX_N);
    if (p->v < 1 || p->v > MAX_V)
        return ht_error(HT_EINPUT, "schedule \"%s\": %d model chunks per rank, expected 1..%d", k,
                        p->v, MAX_V);
    if (ht_pipe_kind_has(p->kind, HT_PIPE_F_V) && p->v > 2)
        return ht_error(HT_EINPUT, "schedule \"%s\" holds two model chunks per rank (a V), "
                        "%d chunks given; expected 1 or 2 (both mean 2)", k, p->v);
    if (p->v > 1 && !ht_pipe_kind_has(p->kind, HT_PIPE_F_CHUNKS) &&
        !ht_pipe_kind_has(p->kind, HT_PIPE_F_V))
        return ht_error(HT_EINPUT,
                        "schedule \"%s\" holds one model chunk per rank, %d chunks given; only "
                        "\"interleaved\" takes more than 1",
                        k, p->v);
    if (!(p->bf_ratio >= 0 && p->bf_ratio <= 64))
        return ht_error(HT_EINPUT, "schedule \"%s\": backward/forward ratio %g, expected 0 (= 1) .. 64",
                        k, p->bf_ratio);
    int vv = ht_pipe_kind_has(p->kind, HT_PIPE_F_V) ? 2 : p->v;
    if ((long long)p->N * p->D * vv * ht_pipe_kind_ndir(p->kind) > MAX_CELLS)
        return ht_error(HT_EINPUT,
                        "schedule \"%s\": %d micro-batches x %d stages x %d chunks is too large "
                        "(at most %d micro-batch-stage pairs)",
                        k, p->N, p->D, p->v, MAX_CELLS);
    if (!generators[p->kind])
        return ht_error(HT_EINPUT, "schedule \"%s\" is not available", k);
    return HT_OK;
}

int ht_pipe_generate(const ht_pipe_params *p, ht_pipe_sched *out) {
    int rc = check_params(p);
    if (rc) return rc;
    ht_pipe_sched s = {0};
    s.p = *p;
    s.p.stage_time = NULL;
    s.p.max_inflight = NULL;
    s.p.stage_b = s.p.stage_w = NULL;
    if (ht_pipe_kind_has(p->kind, HT_PIPE_F_V)) s.p.v = 2;
    s.S = p->D * s.p.v;
    s.ndir = ht_pipe_kind_ndir(p->kind);
    s.len = ht_xcalloc((size_t)p->D, sizeof *s.len);
    s.ins = ht_xcalloc((size_t)p->D, sizeof *s.ins);
    s.nbuf = ht_xcalloc((size_t)p->D, sizeof *s.nbuf);
    s.mb_dir = ht_xcalloc((size_t)p->N, sizeof *s.mb_dir);
    rc = generators[p->kind](p, &s);
    if (rc) {
        ht_pipe_sched_free(&s);
        return rc;
    }
    *out = s;
    return HT_OK;
}

void ht_pipe_sched_free(ht_pipe_sched *s) {
    if (!s) return;
    if (s->ins)
        for (int r = 0; r < s->p.D; r++)
            free(s->ins[r]);
    free(s->ins);
    free(s->len);
    free(s->nbuf);
    free(s->mb_dir);
    memset(s, 0, sizeof *s);
}

void ht_pipe_instr_str(const ht_pipe_instr *in, char *buf, size_t n) {
    const char *name = in->op < HT_PI_NOPS ? ht_pipe_op_names[in->op] : "?";
    size_t k = (size_t)snprintf(buf, n, "%s", name);
#define ADD(...)                                                                    \
    do {                                                                            \
        if (k < n) k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__);            \
    } while (0)
    if (in->mb >= 0) ADD(" mb=%d", (int)in->mb);
    if (in->stage >= 0) ADD(" stage=%d", (int)in->stage);
    if (in->dir) ADD(" dir=%d", (int)in->dir);
    if (in->chunk > 0 || in->op == HT_PI_REDUCE_GRADS) ADD(" chunk=%d", (int)in->chunk);
    if (in->peer >= 0) ADD(" peer=%d", (int)in->peer);
    if (in->buf >= 0) ADD(" buf=%d", (int)in->buf);
#undef ADD
}

/* ---------------------------------------------------------------- builder */

void ht_pipe_order_init(ht_pipe_order *o, int D) {
    o->D = D;
    o->n = ht_xcalloc((size_t)D, sizeof *o->n);
    o->cap = ht_xcalloc((size_t)D, sizeof *o->cap);
    o->op = ht_xcalloc((size_t)D, sizeof *o->op);
}

void ht_pipe_order_add(ht_pipe_order *o, int rank, int op, int dir, int stage, int mb) {
    if (o->n[rank] == o->cap[rank]) {
        o->cap[rank] = o->cap[rank] ? 2 * o->cap[rank] : 16;
        o->op[rank] = ht_xrealloc(o->op[rank], (size_t)o->cap[rank] * sizeof *o->op[rank]);
    }
    o->op[rank][o->n[rank]++] = (ht_pipe_cop){op, dir, stage, mb};
}

void ht_pipe_order_free(ht_pipe_order *o) {
    for (int r = 0; r < o->D; r++)
        free(o->op[r]);
    free(o->op);
    free(o->n);
    free(o->cap);
    memset(o, 0, sizeof *o);
}

void ht_pipe_push(ht_pipe_sched *s, int r, int op, int dir, int stage, int mb, int peer, int buf) {
    int n = s->len[r];
    if (n == 0 || (n >= 16 && (n & (n - 1)) == 0)) /* capacity: 16, then doubling */
        s->ins[r] = ht_xrealloc(s->ins[r], (size_t)(n ? 2 * n : 16) * sizeof *s->ins[r]);
    int chunk = stage >= 0 ? ht_pipe_stage_chunk(s->p.kind, s->p.D, dir, stage) : -1;
    s->ins[r][n] = (ht_pipe_instr){.op = (uint8_t)op,
                                   .dir = (uint8_t)dir,
                                   .chunk = (int16_t)chunk,
                                   .stage = stage,
                                   .mb = mb,
                                   .peer = peer,
                                   .buf = buf};
    s->len[r] = n + 1;
}

/* Slots of one rank while its stream is built: owner key per slot id, -1 when free. */
typedef struct slots {
    int *owner, n, cap;
} slots;

static int slot_take(slots *sl, int key) {
    for (int b = 0; b < sl->n; b++)
        if (sl->owner[b] < 0) return sl->owner[b] = key, b;
    if (sl->n == sl->cap) {
        sl->cap = sl->cap ? 2 * sl->cap : 8;
        sl->owner = ht_xrealloc(sl->owner, (size_t)sl->cap * sizeof *sl->owner);
    }
    sl->owner[sl->n] = key;
    return sl->n++;
}

static int slot_find(const slots *sl, int key) {
    for (int b = 0; b < sl->n; b++)
        if (sl->owner[b] == key) return b;
    return -1;
}

static void emit_fwd(ht_pipe_sched *s, int r, const ht_pipe_cop *c, slots *sl) {
    int S = s->S, kind = s->p.kind, D = s->p.D, v = s->p.v;
    int key = (c->dir * S + c->stage) * s->p.N + c->mb;
    int b = slot_take(sl, key);
    if (c->stage == 0) ht_pipe_push(s, r, HT_PI_LOAD, c->dir, 0, c->mb, -1, b);
    else
        ht_pipe_push(s, r, HT_PI_RECV_ACT, c->dir, c->stage, c->mb,
                     ht_pipe_stage_rank(kind, D, v, c->dir, c->stage - 1), b);
    if (c->stage == S - 1 && S > 1) ht_pipe_push(s, r, HT_PI_LOAD, c->dir, c->stage, c->mb, -1, b);
    ht_pipe_push(s, r, HT_PI_FWD, c->dir, c->stage, c->mb, -1, b);
    if (c->stage < S - 1)
        ht_pipe_push(s, r, HT_PI_SEND_ACT, c->dir, c->stage, c->mb,
                     ht_pipe_stage_rank(kind, D, v, c->dir, c->stage + 1), b);
}

static void emit_bwd(ht_pipe_sched *s, int r, const ht_pipe_cop *c, slots *sl) {
    int S = s->S, kind = s->p.kind, D = s->p.D, v = s->p.v;
    int key = (c->dir * S + c->stage) * s->p.N + c->mb;
    int b = slot_find(sl, key);
    if (c->op == HT_PI_RECOMPUTE) {
        ht_pipe_push(s, r, HT_PI_RECOMPUTE, c->dir, c->stage, c->mb, -1, b);
        return;
    }
    if (c->op == HT_PI_BWD_W) { /* the weight gradient: the slot's last use */
        ht_pipe_push(s, r, HT_PI_BWD_W, c->dir, c->stage, c->mb, -1, b);
        if (b >= 0) sl->owner[b] = -1;
        return;
    }
    if (c->stage < S - 1)
        ht_pipe_push(s, r, HT_PI_RECV_GRAD, c->dir, c->stage, c->mb,
                     ht_pipe_stage_rank(kind, D, v, c->dir, c->stage + 1), b);
    ht_pipe_push(s, r, HT_PI_BWD, c->dir, c->stage, c->mb, -1, b);
    if (c->stage > 0)
        ht_pipe_push(s, r, HT_PI_SEND_GRAD, c->dir, c->stage, c->mb,
                     ht_pipe_stage_rank(kind, D, v, c->dir, c->stage - 1), b);
    if (b >= 0 && !ht_pipe_kind_split(kind)) sl->owner[b] = -1;
}

void ht_pipe_emit(ht_pipe_sched *s, const ht_pipe_order *o) {
    int nch = ht_pipe_nchunks(s);
    int *last = ht_xmalloc((size_t)nch * sizeof *last);
    /* the op that completes a chunk's gradients: W where the backward is split */
    const int done = ht_pipe_kind_split(s->p.kind) ? HT_PI_BWD_W : HT_PI_BWD;
    for (int r = 0; r < s->p.D; r++) {
        slots sl = {0};
        int placed = 0; /* the generator put the REDUCE_GRADS in the order itself */
        for (int c = 0; c < nch; c++)
            last[c] = -1;
        for (int i = 0; i < o->n[r]; i++) {
            const ht_pipe_cop *c = &o->op[r][i];
            if (c->op == done) last[ht_pipe_stage_chunk(s->p.kind, s->p.D, c->dir, c->stage)] = i;
            placed |= c->op == HT_PI_REDUCE_GRADS;
        }
        for (int i = 0; i < o->n[r]; i++) {
            const ht_pipe_cop *c = &o->op[r][i];
            if (c->op == HT_PI_REDUCE_GRADS) {
                ht_pipe_push(s, r, HT_PI_REDUCE_GRADS, c->dir, c->stage, -1, -1, -1);
                continue;
            }
            if (c->op == HT_PI_FWD) emit_fwd(s, r, c, &sl);
            else emit_bwd(s, r, c, &sl);
            int ch = ht_pipe_stage_chunk(s->p.kind, s->p.D, c->dir, c->stage);
            if (!placed && c->op == done && last[ch] == i)
                ht_pipe_push(s, r, HT_PI_REDUCE_GRADS, c->dir, c->stage, -1, -1, -1);
        }
        /* a chunk that ran no micro-batch still takes part in the reduction (its zero
         * gradients are summed with the other replicas') */
        for (int ch = 0; ch < nch && !placed; ch++)
            if (last[ch] < 0) {
                int dir, st = ht_pipe_chunk_stage(s, r, ch, &dir);
                ht_pipe_push(s, r, HT_PI_REDUCE_GRADS, dir, st, -1, -1, -1);
            }
        ht_pipe_push(s, r, HT_PI_OPT_STEP, 0, -1, -1, -1, -1);
        s->nbuf[r] = sl.n;
        free(sl.owner);
    }
    free(last);
}
