/* The pipeline executor (see pipe_exec.h): a switch over one rank's instructions. */
#include "train/pipe_exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "io/trace.h"
#include "nn/model.h"
#include "plan/bounds.h"
#include "pipe/sched_2bw.h"
#include "train/pipe_bw.h"
#include "train/pipe_tied.h"

/* One activation buffer set: what a micro-batch's forward through a stage leaves for its
 * backward. Slot 0 is the model's own buffers. */
typedef struct slot {
    ht_buf *acts, *dacts, *saved, *labels, *losses, *correct;
} slot;

/* One point-to-point message of an instruction: bytes [at, at + bytes) of its staging, the
 * peer's world rank, the request. */
typedef struct piece {
    size_t at, bytes;
    int peer;
    ht_comm_msg *req;
} piece;

/* The messages of a SEND_* or RECV_* instruction: the host staging of this rank's samples of
 * the boundary, its device offset, the tag, one piece per peer whose samples overlap (one
 * without replicated stages). */
typedef struct msg {
    float *host;
    size_t bytes, off; /* device offset (floats) in acts or dacts */
    int tag, np;
    piece *pc;
} msg;

/* Where a stage's activations live in a slot: the model's offsets rebased so that the
 * stage's boundary activations, their gradients and its layers' saved state start at 0 and
 * hold one micro-batch (the whole model's layout holds max_batch samples of every layer).
 * A stage other than the first keeps the inputs a LOAD writes (act_off[0]) after its own. */
typedef struct stage_layout {
    size_t *act_off;  /* [nlayers + 1] */
    size_t *save_off; /* [nlayers] */
    size_t act_floats, save_floats;
    /* a recomputing rank's slot keeps only the stage input (at 0, as in act_off) and, after
     * it, a LOAD's inputs: keep_off is act_off with act_off[0] moved there */
    size_t *keep_off;
    size_t keep_floats;
    /* per-layer recomputation: where a kept layer's output and saved state wait in the slot
     * (floats into the slot's acts, after the inputs), for the layers not recomputed */
    size_t *kout_off, *ksave_off; /* [nlayers], NULL when the rank recomputes every layer */
} stage_layout;

struct ht_pipe_exec {
    ht_model *m;
    stage_layout *lay; /* [S]: the stages this rank holds (act_off NULL for the others) */
    size_t *orig_act_off, *orig_save_off;
    int orig_max_batch;
    const ht_pipe_sched *s;
    int *bounds; /* [S+1] */
    ht_pipe_place pl;
    int me, mb; /* world rank, samples per micro-batch this rank computes */
    int q;      /* the schedule's rank whose stream this rank runs */
    int mbf;    /* samples per micro-batch (all of a replicated stage's ranks together) */
    int *first, *off, *cnt; /* pl's groups, or one rank per group and whole micro-batches */
    double slowdown;
    int nslot;
    slot *slots;
    int rc;       /* this rank recomputes: slots keep stage inputs, stages run in `work` */
    uint8_t *rcl; /* [nlayers] the layers it recomputes (rc: at least one); the others' outputs
                     and saved state are kept in the slot, copied out of `work` after FWD */
    slot work;    /* a recomputing rank's one full stage buffer set (labels stay per slot):
                     the model's own buffers when they are large enough (work_owned 0) */
    int work_owned;
    size_t work_bytes;
    slot own;     /* the model's own buffers, as built (restore) */
    int first_new; /* slots [first_new, nslot) were allocated here; slot 0 may be `own` */
    const ht_pipe_instr *ins;
    int len;
    msg *msgs; /* [len]: used by SEND_* and RECV_* entries */
    float *red; /* host staging of one stage's gradients (the largest this rank holds, or wte) */
    ht_pipe_tied tied; /* a tied head: wte's two copies kept equal (train/pipe_tied.h) */
    ht_pipe_stats st;
    double *t_fwd, *t_bwd; /* [S] seconds of FWD / BWD (RECOMPUTE counts as FWD) since reset */
    int *n_fwd, *n_bwd;
    /* PipeDream-2BW (s is the period stream, sched_2bw.h; see ht_pipe_exec_2bw_period) */
    int tbw;
    ht_buf *pv[2], *gv[2]; /* two weight versions, two gradient buffers (pv[0], gv[0]: the
                              model's own) */
    int newest;            /* pv index of the newest version */
    int has_older;         /* the other pv holds the version before it */
    int64_t pend;          /* the batch whose gradient is not applied yet, -1: none */
    int pend_p, cur_p;     /* pv index that batch pend / the period's batch run on */
    int8_t *rel;           /* [len] ht_pipe_2bw_batch of each instruction */
};

/* ------------------------------------------------------------------ layout */

static int stage_lo(const ht_pipe_exec *x, int s) { return x->bounds[s]; }
static int stage_hi(const ht_pipe_exec *x, int s) { return x->bounds[s + 1]; }

void ht_pipe_exec_stage_params(const ht_pipe_exec *x, int s, size_t *off, size_t *n) {
    const ht_model *m = x->m;
    size_t a = 0, b = 0;
    int any = 0;
    for (int i = stage_lo(x, s); i < stage_hi(x, s); i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) a = l->woff;
        b = l->woff + l->nparams;
        any = 1;
    }
    *off = a;
    *n = any ? b - a : 0;
}

int ht_pipe_exec_owner(const ht_pipe_exec *x, int s) {
    const ht_pipe_params *p = &x->s->p;
    return x->first[ht_pipe_stage_rank(p->kind, p->D, p->v, 0, s)]; /* replica 0: world = prank */
}

int ht_pipe_exec_owns(const ht_pipe_exec *x, int s) {
    return x->pl.replica == 0 && ht_pipe_exec_owner(x, s) == x->pl.prank;
}

/* Message tag: kind (0 activation, 1 gradient), direction, the stage whose input (or input
 * gradient) it carries, micro-batch. Both ends compute the same number. */
static int tag_of(const ht_pipe_exec *x, int kind, int dir, int stage, int mbi) {
    if (mbi < 0) mbi += x->s->p.N; /* 2BW: micro-batch N + mb of the previous batch */
    return 1024 + ((kind * 2 + dir) * x->s->S + stage) * x->s->p.N + mbi;
}

/* 2BW: the tags of batches of odd index follow those of even ones, so that a gradient sent
 * in one period and received in the next never matches the next batch's. */
static int tag_span(const ht_pipe_exec *x) { return 4 * x->s->S * x->s->p.N; }

/* A partly recomputing rank's slot: after the inputs, the output and saved state of each
 * layer it does not recompute. */
static void keep_layout(const ht_pipe_exec *x, stage_layout *L, int lo, int hi) {
    int any = 0;
    for (int i = lo; x->rc && i < hi; i++)
        any |= !x->rcl[i];
    if (!any) return;
    const size_t B = (size_t)x->mb;
    L->kout_off = ht_xcalloc((size_t)x->m->nlayers, sizeof(size_t));
    L->ksave_off = ht_xcalloc((size_t)x->m->nlayers, sizeof(size_t));
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &x->m->layers[i];
        if (x->rcl[i]) continue;
        L->kout_off[i] = L->keep_floats;
        if (!ht_layer_aliases(l)) L->keep_floats += B * (size_t)l->out;
        L->ksave_off[i] = L->keep_floats;
        L->keep_floats += B * l->save;
    }
}

static void layout_init(ht_pipe_exec *x, int s) {
    const ht_model *m = x->m;
    stage_layout *L = &x->lay[s];
    if (L->act_off) return;
    const int lo = stage_lo(x, s), hi = stage_hi(x, s);
    const size_t B = (size_t)x->mb;
    L->act_off = ht_xmalloc((size_t)(m->nlayers + 1) * sizeof(size_t));
    L->save_off = ht_xmalloc((size_t)m->nlayers * sizeof(size_t));
    memcpy(L->act_off, x->orig_act_off, (size_t)(m->nlayers + 1) * sizeof(size_t));
    memcpy(L->save_off, x->orig_save_off, (size_t)m->nlayers * sizeof(size_t));
    L->act_off[lo] = 0;
    L->act_floats = B * (size_t)m->width[lo];
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &m->layers[i];
        if (ht_layer_aliases(l)) {
            L->act_off[i + 1] = L->act_off[i];
        } else {
            L->act_off[i + 1] = L->act_floats;
            L->act_floats += B * (size_t)l->out;
        }
        L->save_off[i] = L->save_floats;
        L->save_floats += B * l->save;
    }
    L->keep_off = ht_xmalloc((size_t)(m->nlayers + 1) * sizeof(size_t));
    memcpy(L->keep_off, L->act_off, (size_t)(m->nlayers + 1) * sizeof(size_t));
    L->keep_floats = B * (size_t)m->width[lo];
    if (lo > 0) { /* a LOAD's inputs (labels are what this stage needs) */
        L->act_off[0] = L->act_floats;
        L->act_floats += B * (size_t)m->width[0];
        L->keep_off[0] = L->keep_floats;
        L->keep_floats += B * (size_t)m->width[0];
    }
    keep_layout(x, L, lo, hi);
}

/* Staging of instruction i: the boundary activation it moves, in one piece per rank of the
 * peer's group whose samples overlap this rank's. */
static void msg_init(ht_pipe_exec *x, int i) {
    const ht_pipe_instr *in = &x->ins[i];
    int key, layer, kind;
    switch (in->op) {
    case HT_PI_SEND_ACT: key = in->stage + 1, layer = stage_hi(x, in->stage), kind = 0; break;
    case HT_PI_RECV_ACT: key = in->stage, layer = stage_lo(x, in->stage), kind = 0; break;
    case HT_PI_SEND_GRAD: key = in->stage, layer = stage_lo(x, in->stage), kind = 1; break;
    case HT_PI_RECV_GRAD: key = in->stage + 1, layer = stage_hi(x, in->stage), kind = 1; break;
    default: return;
    }
    msg *g = &x->msgs[i];
    layout_init(x, in->stage);
    g->off = x->lay[in->stage].act_off[layer];
    const size_t per = (size_t)x->m->width[layer] * sizeof(float); /* one sample */
    g->bytes = (size_t)x->mb * per;
    g->host = ht_xmalloc(g->bytes ? g->bytes : 1);
    g->tag = tag_of(x, kind, in->dir, key, in->mb);
    const int a0 = x->off[x->pl.prank], a1 = a0 + x->mb;
    g->pc = ht_xcalloc((size_t)(x->first[in->peer + 1] - x->first[in->peer]), sizeof *g->pc);
    for (int p = x->first[in->peer]; p < x->first[in->peer + 1]; p++) {
        const int lo = x->off[p] > a0 ? x->off[p] : a0;
        const int hi = x->off[p] + x->cnt[p] < a1 ? x->off[p] + x->cnt[p] : a1;
        if (lo < hi)
            g->pc[g->np++] = (piece){(size_t)(lo - a0) * per, (size_t)(hi - lo) * per,
                                     x->pl.replica * x->pl.D + p, NULL};
    }
}

/* Posts the receives of g under tag. */
static void msg_irecv(msg *g, int tag) {
    for (int k = 0; k < g->np; k++)
        g->pc[k].req = ht_comm_irecv((char *)g->host + g->pc[k].at, g->pc[k].bytes,
                                     g->pc[k].peer, tag);
}

/* Waits for every posted piece of g. */
static void msg_wait(msg *g) {
    for (int k = 0; k < g->np; k++)
        if (g->pc[k].req) {
            ht_comm_msg_wait(g->pc[k].req, NULL, NULL);
            g->pc[k].req = NULL;
        }
}

/* The schedule rank whose group [first[q], first[q + 1]) holds pipeline rank p. */
static int group_of(const int *first, int p) {
    int q = 0;
    while (first[q + 1] <= p)
        q++;
    return q;
}

/* Groups as given, or one pipeline rank per schedule rank with whole micro-batches; the
 * schedule rank this rank runs. */
static void groups_init(ht_pipe_exec *x, const ht_pipe_place *pl, int mb) {
    const int Q = x->s->p.D, D = pl->D;
    x->first = ht_xmalloc((size_t)(Q + 1) * sizeof(int));
    x->off = ht_xmalloc((size_t)D * sizeof(int));
    x->cnt = ht_xmalloc((size_t)D * sizeof(int));
    for (int q = 0; q <= Q; q++)
        x->first[q] = pl->first ? pl->first[q] : q;
    for (int p = 0; p < D; p++)
        x->off[p] = pl->first ? pl->off[p] : 0, x->cnt[p] = pl->first ? pl->cnt[p] : mb;
    /* each group a run of ranks whose samples tile the micro-batch in order */
    for (int q = 0; q < Q; q++) {
        int ok = x->first[q] < x->first[q + 1] && x->first[0] == 0 && x->first[Q] == D;
        for (int p = x->first[q], at = 0; ok && p < x->first[q + 1]; at += x->cnt[p++])
            ok = x->off[p] == at && x->cnt[p] >= 1 && at + x->cnt[p] <= mb &&
                 (p + 1 < x->first[q + 1] || at + x->cnt[p] == mb);
        if (!ok)
            ht_die(HT_ERUNTIME, "pipe: schedule rank %d's pipeline ranks %d..%d (of %d) do not "
                   "split micro-batches of %d samples in order",
                   q, x->first[q], x->first[q + 1] - 1, D, mb);
    }
    x->q = group_of(x->first, pl->prank);
    x->mbf = mb;
    x->mb = x->cnt[pl->prank];
}

/* 2BW: the second weight version and gradient buffer, each instruction's batch. */
static void init_2bw(ht_pipe_exec *x) {
    ht_model *m = x->m;
    const size_t bytes = (m->pres ? m->pres : 1) * sizeof(float);
    x->tbw = 1;
    x->pv[0] = m->params, x->gv[0] = m->grads;
    x->pv[1] = ht_buf_new(m->dev, bytes, "2bw second weight version");
    x->gv[1] = ht_buf_new(m->dev, bytes, "2bw second gradient buffer");
    ht_buf_zero(m->dev, x->gv[1], 0, bytes);
    x->pend = -1;
    x->rel = ht_xmalloc((size_t)(x->len ? x->len : 1));
    for (int i = 0; i < x->len; i++)
        x->rel[i] = (int8_t)ht_pipe_2bw_batch(x->s, x->q, i);
}

/* 2BW at the end: the newest version into the model's own buffer, the second ones freed. */
static void free_2bw(ht_pipe_exec *x) {
    ht_model *m = x->m;
    for (int i = 0; i < x->len; i++) /* every receive was matched in its period */
        msg_wait(&x->msgs[i]);
    if (x->newest == 1 && m->pres)
        ht_buf_copy(m->dev, x->pv[0], 0, x->pv[1], 0, m->pres * sizeof(float));
    m->params = x->pv[0], m->grads = x->gv[0];
    ht_buf_free(x->pv[1]);
    ht_buf_free(x->gv[1]);
    free(x->rel);
}

ht_pipe_exec *ht_pipe_exec_new(ht_model *m, const ht_pipe_sched *s, const int *bounds,
                               ht_pipe_place place, int mb, double slowdown,
                               const uint8_t *recompute) {
    uint8_t *all = NULL;
    const int q = place.first ? group_of(place.first, place.prank) : place.prank;
    if (recompute && recompute[q]) {
        all = ht_xmalloc((size_t)(m->nlayers ? m->nlayers : 1));
        memset(all, 1, (size_t)m->nlayers);
    }
    ht_pipe_exec *x = ht_pipe_exec_new_layers(m, s, bounds, place, mb, slowdown, all);
    free(all);
    return x;
}

ht_pipe_exec *ht_pipe_exec_new_layers(ht_model *m, const ht_pipe_sched *s, const int *bounds,
                                      ht_pipe_place place, int mb, double slowdown,
                                      const uint8_t *layers) {
    ht_pipe_exec *x = ht_xcalloc(1, sizeof *x);
    x->m = m;
    x->s = s;
    x->pl = place;
    x->me = place.replica * place.D + place.prank;
    groups_init(x, &place, mb);
    x->pl.first = x->pl.off = x->pl.cnt = NULL; /* copied: the caller's may go */
    x->slowdown = slowdown;
    for (int i = 0; layers && i < m->nlayers; i++)
        x->rc |= layers[i] != 0;
    if (x->rc) {
        x->rcl = ht_xmalloc((size_t)m->nlayers);
        memcpy(x->rcl, layers, (size_t)m->nlayers);
        for (int i = 1; i < m->nlayers; i++) /* a fused pair is recomputed whole */
            if (!ht_pipe_can_cut(m, i)) x->rcl[i] = x->rcl[i - 1] = x->rcl[i] | x->rcl[i - 1];
    }
    x->bounds = ht_xmalloc((size_t)(s->S + 1) * sizeof(int));
    memcpy(x->bounds, bounds, (size_t)(s->S + 1) * sizeof(int));
    if (1024 + (ht_pipe_kind_has(s->p.kind, HT_PIPE_F_NO_FLUSH) ? 2 : 1) * 4 * s->S * s->p.N >= HT_COMM_GROUP_TAG)
        ht_die(HT_EINPUT, "pipe: %d stages x %d micro-batches need more message tags than MPI "
                          "guarantees; use fewer micro-batches",
               s->S, s->p.N);
    x->ins = s->ins[x->q];
    x->len = s->len[x->q];
    x->orig_act_off = m->act_off;
    x->orig_max_batch = m->max_batch;
    x->orig_save_off = ht_xmalloc((size_t)m->nlayers * sizeof(size_t));
    for (int i = 0; i < m->nlayers; i++)
        x->orig_save_off[i] = m->layers[i].save_off;
    x->lay = ht_xcalloc((size_t)s->S, sizeof *x->lay);
    x->t_fwd = ht_xcalloc((size_t)s->S, sizeof(double));
    x->t_bwd = ht_xcalloc((size_t)s->S, sizeof(double));
    x->n_fwd = ht_xcalloc((size_t)s->S, sizeof(int));
    x->n_bwd = ht_xcalloc((size_t)s->S, sizeof(int));
    x->msgs = ht_xcalloc((size_t)x->len, sizeof *x->msgs);
    size_t red = 1, act = 1, save = 1, keep = 1;
    for (int i = 0; i < x->len; i++) {
        msg_init(x, i);
        const ht_pipe_instr *in = &x->ins[i];
        if (in->stage < 0) continue;
        layout_init(x, in->stage);
        const stage_layout *L = &x->lay[in->stage];
        if (L->act_floats > act) act = L->act_floats;
        if (L->save_floats > save) save = L->save_floats;
        if (L->keep_floats > keep) keep = L->keep_floats;
        size_t off, n; /* REDUCE_GRADS and ht_pipe_exec_grad_sq stage through x->red */
        ht_pipe_exec_stage_params(x, in->stage, &off, &n);
        if (n > red) red = n;
    }
    ht_pipe_tied_init(&x->tied, m, s, x->first, place.D, place.R, x->me);
    if (x->tied.mine && x->tied.n > red) red = x->tied.n;
    x->red = ht_xmalloc(red * sizeof(float));
    /* The model's own buffers (max_batch of every layer: at least one stage's micro-batch)
     * are slot 0, or on a recomputing rank its work set: there every slot holds only what
     * it keeps, so slot 0 is allocated like the others. */
    x->nslot = s->nbuf[x->q] > 0 ? s->nbuf[x->q] : 1;
    x->slots = ht_xcalloc((size_t)x->nslot, sizeof *x->slots);
    x->own = (slot){m->acts, m->dacts, m->saved, m->labels, m->losses, m->correct};
    x->first_new = x->rc ? 0 : 1;
    if (!x->rc) x->slots[0] = x->own;
    const size_t rows = (size_t)x->mb * (size_t)m->rows;
    /* a recomputing rank's slots hold the stage input; its stages run in one work set */
    const size_t sa = x->rc ? keep : act, sd = x->rc ? 1 : act, ss = x->rc ? 1 : save;
    for (int k = x->first_new; k < x->nslot; k++) {
        slot *o = &x->slots[k];
        o->acts = ht_buf_new(m->dev, sa * sizeof(float), "pipeline slot activations");
        o->dacts = ht_buf_new(m->dev, sd * sizeof(float), "pipeline slot gradients");
        o->saved = ht_buf_new(m->dev, ss * sizeof(float), "pipeline slot saved state");
        o->labels = ht_buf_new(m->dev, rows * sizeof(int32_t), "pipeline slot labels");
        o->losses = ht_buf_new(m->dev, rows * sizeof(float), "pipeline slot losses");
        o->correct = ht_buf_new(m->dev, rows * sizeof(int32_t), "pipeline slot flags");
    }
    if (x->rc && act <= m->act_floats && save <= m->save_floats) {
        x->work = x->own;
    } else if (x->rc) {
        x->work_owned = 1;
        x->work.acts = ht_buf_new(m->dev, act * sizeof(float), "pipeline recompute activations");
        x->work.dacts = ht_buf_new(m->dev, act * sizeof(float), "pipeline recompute gradients");
        x->work.saved = ht_buf_new(m->dev, save * sizeof(float), "pipeline recompute state");
        x->work_bytes = (2 * act + save) * sizeof(float);
    }
    x->st.slot_bytes = (sa + sd + ss) * sizeof(float) + 3 * rows * sizeof(float);
    x->st.work_bytes = x->work_bytes;
    x->st.slots = s->nbuf[x->q];
    if (ht_pipe_kind_has(s->p.kind, HT_PIPE_F_NO_FLUSH)) init_2bw(x);
    return x;
}

/* The model as built: its own buffers, layout and batch limit (for evaluation). */
static void restore(ht_pipe_exec *x) {
    const slot *o0 = &x->own;
    ht_model *m = x->m;
    m->acts = o0->acts, m->dacts = o0->dacts, m->saved = o0->saved;
    m->labels = o0->labels, m->losses = o0->losses, m->correct = o0->correct;
    m->act_off = x->orig_act_off;
    for (int i = 0; i < m->nlayers; i++)
        m->layers[i].save_off = x->orig_save_off[i];
    m->max_batch = x->orig_max_batch;
}

void ht_pipe_exec_set_slowdown(ht_pipe_exec *x, double slowdown) { x->slowdown = slowdown; }

void ht_pipe_exec_free(ht_pipe_exec *x) {
    if (!x) return;
    restore(x);
    if (x->tbw) free_2bw(x);
    for (int k = x->first_new; k < x->nslot; k++) {
        slot *o = &x->slots[k];
        ht_buf *b[] = {o->acts, o->dacts, o->saved, o->labels, o->losses, o->correct};
        for (size_t j = 0; j < sizeof b / sizeof b[0]; j++)
            ht_buf_free(b[j]);
    }
    if (x->work_owned) {
        ht_buf_free(x->work.acts);
        ht_buf_free(x->work.dacts);
        ht_buf_free(x->work.saved);
    }
    for (int i = 0; i < x->len; i++)
        free(x->msgs[i].host), free(x->msgs[i].pc);
    free(x->msgs);
    free(x->first), free(x->off), free(x->cnt);
    free(x->slots), free(x->red);
    ht_pipe_tied_free(&x->tied);
    for (int st = 0; st < x->s->S; st++)
        free(x->lay[st].act_off), free(x->lay[st].save_off), free(x->lay[st].keep_off),
            free(x->lay[st].kout_off), free(x->lay[st].ksave_off);
    free(x->rcl), free(x->lay);
    free(x->t_fwd), free(x->t_bwd), free(x->n_fwd), free(x->n_bwd);
    free(x->orig_save_off), free(x->bounds);
    free(x);
}

const ht_pipe_stats *ht_pipe_exec_stats(const ht_pipe_exec *x) { return &x->st; }
ht_pipe_tied *ht_pipe_exec_tied(ht_pipe_exec *x) { return &x->tied; }

/* ------------------------------------------------------------------ instructions */

/* Points the model at slot `in->buf` laid out for the stage of instruction `in`: what the slot
 * keeps (keep = 1: LOAD, RECV_ACT) or where the stage runs (keep = 0): on a recomputing rank
 * the work set, with the slot's labels. */
static void use_slot(ht_pipe_exec *x, const ht_pipe_instr *in, int keep) {
    const int k = in->buf;
    if (k < 0 || k >= x->nslot) ht_die(HT_ERUNTIME, "pipe: slot %d outside [0, %d)", k, x->nslot);
    const slot *o = &x->slots[k], *w = x->rc && !keep ? &x->work : o;
    const stage_layout *L = &x->lay[in->stage];
    ht_model *m = x->m;
    m->acts = w->acts, m->dacts = w->dacts, m->saved = w->saved;
    m->labels = o->labels, m->losses = o->losses, m->correct = o->correct;
    m->act_off = x->rc && keep ? L->keep_off : L->act_off;
    for (int i = stage_lo(x, in->stage); i < stage_hi(x, in->stage); i++)
        m->layers[i].save_off = L->save_off[i];
    m->max_batch = x->mb;
}

/* Global row of this rank's first sample of micro-batch mbi: replica r takes rows
 * [r N mb, (r+1) N mb), and a replicated stage's rank its samples of each micro-batch. */
static int row0_of(const ht_pipe_exec *x, int mbi) {
    if (mbi < 0) mbi += x->s->p.N; /* 2BW: the previous batch's */
    return (x->pl.replica * x->s->p.N + mbi) * x->mbf + x->off[x->pl.prank];
}

/* Ends a compute instruction: waits for the device, idles the emulated extra, books it. */
static void compute_done(ht_pipe_exec *x, double t0, const char *what, const ht_pipe_instr *in) {
    ht_dev_finish(x->m->dev);
    double dt = ht_now() - t0;
    if (x->slowdown != 1) {
        double ts = ht_now();
        ht_sleep((x->slowdown - 1) * dt);
        ht_trace_span("slowdown (emulated)", ts, ht_now()); /* within the instruction's span */
    }
    double t1 = ht_now();
    x->st.compute += t1 - t0;
    if (in->op == HT_PI_BWD || in->op == HT_PI_BWD_W) /* B and W: one backward */
        x->t_bwd[in->stage] += t1 - t0, x->n_bwd[in->stage] += in->op == HT_PI_BWD;
    else x->t_fwd[in->stage] += t1 - t0, x->n_fwd[in->stage]++;
    if (ht_trace_on()) {
        char name[HT_TRACE_NAME];
        snprintf(name, sizeof name, "%s mb%d s%d%s", what, in->mb, in->stage,
                 x->s->ndir > 1 ? (in->dir ? " up" : " down") : "");
        ht_trace_span(name, t0, t1);
    }
}

/* A partly recomputing rank: copies the kept layers' outputs and saved state of the
 * micro-batch in instruction `in` from the work set into its slot (out = 1, after FWD) or
 * back (out = 0, before RECOMPUTE). Device-side copies of what the rank keeps anyway. */
static void keep_move(ht_pipe_exec *x, const ht_pipe_instr *in, int out) {
    const stage_layout *L = &x->lay[in->stage];
    if (!L->kout_off) return;
    ht_model *m = x->m;
    ht_buf *sl = x->slots[in->buf].acts;
    const size_t B = (size_t)x->mb, f = sizeof(float);
    for (int i = stage_lo(x, in->stage); i < stage_hi(x, in->stage); i++) {
        const ht_layer *l = &m->layers[i];
        if (x->rcl[i]) continue;
        const size_t a = B * (size_t)l->out * f, s = B * l->save * f;
        const size_t ka = L->kout_off[i] * f, wa = L->act_off[i + 1] * f;
        const size_t ks = L->ksave_off[i] * f, ws = L->save_off[i] * f;
        if (a && !ht_layer_aliases(l)) {
            if (out) ht_buf_copy(m->dev, sl, ka, x->work.acts, wa, a);
            else ht_buf_copy(m->dev, x->work.acts, wa, sl, ka, a);
        }
        if (s) {
            if (out) ht_buf_copy(m->dev, sl, ks, x->work.saved, ws, s);
            else ht_buf_copy(m->dev, x->work.saved, ws, sl, ks, s);
        }
    }
}

/* RECOMPUTE's forward: each run of recomputed layers of [lo, hi) from its input, which is the
 * stage input or a kept layer's output (runs start and end at pairs' edges: the planner
 * recomputes a fused pair whole, so the kernels and bits are the FWD's). */
static void forward_recomputed(ht_pipe_exec *x, int lo, int hi) {
    for (int a = lo; a < hi;) {
        if (!x->rcl[a]) {
            a++;
            continue;
        }
        int b = a;
        while (b < hi && x->rcl[b])
            b++;
        ht_model_forward_range(x->m, a, b, x->mb);
        a = b;
    }
}

static void exec_fwd(ht_pipe_exec *x, const ht_pipe_instr *in, int64_t step, uint64_t seed,
                     int want_loss, double *loss_sum, int recompute) {
    ht_model *m = x->m;
    double t0 = ht_now();
    const int lo = stage_lo(x, in->stage), hi = stage_hi(x, in->stage);
    use_slot(x, in, 0);
    if (x->rc) /* the kept stage input (at 0 in both layouts) into the work set */
        ht_buf_copy(m->dev, x->work.acts, 0, x->slots[in->buf].acts, 0,
                    (size_t)x->mb * (size_t)m->width[lo] * sizeof(float));
    if (recompute) keep_move(x, in, 0); /* the kept layers back into the work set */
    ht_model_set_training(m, 1, seed, step);
    ht_model_set_row_offset(m, row0_of(x, in->mb));
    if (recompute) forward_recomputed(x, lo, hi);
    else ht_model_forward_range(m, lo, hi, x->mb);
    if (x->rc && !recompute) keep_move(x, in, 1);
    if (hi == m->nlayers) { /* a recompute rebuilds the loss gradient too */
        ht_model_loss_forward(m, x->mb, 1);
        if (want_loss && !recompute) {
            double l = 0;
            ht_model_loss(m, x->mb, &l, NULL);
            *loss_sum += l;
        }
    }
    compute_done(x, t0, recompute ? "RECOMPUTE" : "FWD", in);
}

static void exec_bwd(ht_pipe_exec *x, const ht_pipe_instr *in, int64_t step, uint64_t seed,
                     float grad_scale) {
    ht_model *m = x->m;
    double t0 = ht_now();
    const int part = ht_pipe_bw_part(x->s, in->op, x->rc), hi = stage_hi(x, in->stage);
    if (part < 0) return; /* W on a recomputing rank: its B ran the whole backward */
    use_slot(x, in, 0);
    /* the batch's masks: a 2BW period runs the previous batch's backwards after this one's
     * forwards */
    ht_model_set_training(m, 1, seed, step);
    ht_model_set_row_offset(m, row0_of(x, in->mb)); /* dropout masks as in the forward */
    /* the loss gradient is unscaled; a received gradient already carries the scale. W finds
     * its operands in the slot as B left them: the slot is held until W (the checker) */
    ht_model_backward_part(m, stage_lo(x, in->stage), hi, x->mb,
                           hi == m->nlayers ? grad_scale : 1.0f, 1, (ht_bw_part)part);
    compute_done(x, t0, in->op == HT_PI_BWD_W ? "BWD_W" : "BWD", in);
}

static void exec_send(ht_pipe_exec *x, int i) {
    const ht_pipe_instr *in = &x->ins[i];
    msg *g = &x->msgs[i];
    double t0 = ht_now();
    msg_wait(g); /* 2BW: the last period's send from this staging may still be under way */
    use_slot(x, in, 0);
    const ht_buf *b = in->op == HT_PI_SEND_ACT ? x->m->acts : x->m->dacts;
    ht_buf_read(x->m->dev, b, g->off * sizeof(float), g->bytes, g->host);
    for (int k = 0; k < g->np; k++)
        g->pc[k].req = ht_comm_isend((char *)g->host + g->pc[k].at, g->pc[k].bytes,
                                     g->pc[k].peer, g->tag);
    x->st.p2p_bytes += g->bytes;
    x->st.comm += ht_now() - t0;
    ht_trace_span(in->op == HT_PI_SEND_ACT ? "SEND_ACT" : "SEND_GRAD", t0, ht_now());
}

static void exec_recv(ht_pipe_exec *x, int i) {
    const ht_pipe_instr *in = &x->ins[i];
    msg *g = &x->msgs[i];
    double t0 = ht_now();
    msg_wait(g);
    double t1 = ht_now();
    use_slot(x, in, in->op == HT_PI_RECV_ACT);
    ht_buf *b = in->op == HT_PI_RECV_ACT ? x->m->acts : x->m->dacts;
    ht_buf_write(x->m->dev, b, g->off * sizeof(float), g->bytes, g->host);
    x->st.wait += t1 - t0;
    x->st.comm += ht_now() - t1;
    ht_trace_span(in->op == HT_PI_RECV_ACT ? "wait act" : "wait grad", t0, t1);
}

/* REDUCE_GRADS of stage s: its gradients summed over every rank that holds it, where the
 * stream says (right after the stage's last backward, so that it overlaps the other ranks'
 * remaining work). A blocking ring among the holders: the checker verified that every holder
 * reaches its reductions in the same order (Chimera's two replicas meet as a rendezvous;
 * data-parallel replicas run the same stream). */
static void reduce_stage(ht_pipe_exec *x, int s) {
    int *members = ht_xmalloc((size_t)(2 * x->pl.R * x->pl.D) * sizeof(int));
    int p = ht_pipe_holders(x->s, x->first, x->pl.D, x->pl.R, s, members);
    size_t off, n, at[2], cnt[2];
    ht_pipe_exec_stage_params(x, s, &off, &n);
    if (p >= 2 && n > 0) {
        double t0 = ht_now();
        for (int k = 0, np = ht_pipe_tied_parts(&x->tied, s, off, n, at, cnt); k < np; k++) {
            const size_t o = ht_pipe_local_bytes(x->m, at[k], cnt[k]), b = cnt[k] * sizeof(float);
            ht_buf_read(x->m->dev, x->m->grads, o, b, x->red);
            ht_comm_group_allreduce(x->red, cnt[k], members, p, HT_COMM_GROUP_TAG + s);
            ht_buf_write(x->m->dev, x->m->grads, o, b, x->red);
        }
        x->st.comm += ht_now() - t0;
        ht_trace_span("REDUCE_GRADS", t0, ht_now());
    }
    free(members);
}

/* The tied head's exchange once the step's gradient is whole (train/pipe_tied.h). */
static void tied_reduce(ht_pipe_exec *x) {
    double t0 = ht_now();
    ht_pipe_tied_reduce(&x->tied, x->m, x->red);
    x->st.comm += ht_now() - t0;
}

/* Progresses outstanding sends (MPI moves data only inside its calls). */
static void poll_sends(ht_pipe_exec *x, int upto) {
    for (int i = 0; i < upto; i++) {
        const ht_pipe_instr *in = &x->ins[i];
        if (in->op != HT_PI_SEND_ACT && in->op != HT_PI_SEND_GRAD) continue;
        for (int k = 0; k < x->msgs[i].np; k++)
            if (x->msgs[i].pc[k].req) ht_comm_msg_done(x->msgs[i].pc[k].req, NULL, NULL);
    }
}

/* Instruction i of the stream for global batch `batch`. */
static void run_instr(ht_pipe_exec *x, int i, int64_t batch, uint64_t seed, float grad_scale,
                      ht_pipe_load_fn load, void *ctx, int want_loss, double *loss_sum) {
    const ht_pipe_instr *in = &x->ins[i];
    switch ((ht_pipe_op)in->op) {
    case HT_PI_LOAD:
        use_slot(x, in, 1);
        load(ctx, x->m, batch, row0_of(x, in->mb), x->mb);
        break;
    case HT_PI_FWD: exec_fwd(x, in, batch, seed, want_loss, loss_sum, 0); break;
    case HT_PI_RECOMPUTE: exec_fwd(x, in, batch, seed, 0, loss_sum, 1); break;
    case HT_PI_BWD:
    case HT_PI_BWD_W: exec_bwd(x, in, batch, seed, grad_scale); break;
    case HT_PI_SEND_ACT:
    case HT_PI_SEND_GRAD: exec_send(x, i); break;
    case HT_PI_RECV_ACT:
    case HT_PI_RECV_GRAD: exec_recv(x, i); break;
    case HT_PI_REDUCE_GRADS: reduce_stage(x, in->stage); break;
    case HT_PI_OPT_STEP: break; /* the caller's, after the stream */
    case HT_PI_NOPS: ht_die(HT_ERUNTIME, "pipe: bad instruction %d", in->op);
    }
}

void ht_pipe_exec_step(ht_pipe_exec *x, int64_t step, uint64_t seed, float grad_scale,
                       ht_pipe_load_fn load, void *ctx, int want_loss, double *loss_sum) {
    if (x->tbw) ht_die(HT_ERUNTIME, "pipe: a 2bw stream runs through ht_pipe_exec_2bw_period");
    double t_step = ht_now();
    memset(&x->st, 0, offsetof(ht_pipe_stats, slot_bytes));
    *loss_sum = 0;
    ht_buf_zero(x->m->dev, x->m->grads, 0, x->m->pres * sizeof(float));
    for (int i = 0; i < x->len; i++) /* every receive of the step posted now */
        if (x->ins[i].op == HT_PI_RECV_ACT || x->ins[i].op == HT_PI_RECV_GRAD)
            msg_irecv(&x->msgs[i], x->msgs[i].tag);
    for (int i = 0; i < x->len; i++) {
        run_instr(x, i, step, seed, grad_scale, load, ctx, want_loss, loss_sum);
        poll_sends(x, i + 1);
    }
    for (int i = 0; i < x->len; i++)
        msg_wait(&x->msgs[i]);
    restore(x);
    tied_reduce(x);
    x->st.step = ht_now() - t_step;
}

/* ------------------------------------------------------------------ 2BW */

/* The weights and gradient buffer of the batch of relative index rel (0: this period's
 * batch t, -1: the pending one) into the model. */
static void use_version(ht_pipe_exec *x, int64_t t, int rel) {
    x->m->params = x->pv[rel ? x->pend_p : x->cur_p];
    x->m->grads = x->gv[(t + rel) & 1];
}

/* Whether instruction i runs in period t (has_cur: batch t exists). */
static int runs_2bw(const ht_pipe_exec *x, int i, int has_cur) {
    return x->rel[i] ? x->pend >= 0 : has_cur;
}

int ht_pipe_exec_2bw_period(ht_pipe_exec *x, int64_t t, int has_cur, uint64_t seed,
                            float grad_scale, ht_pipe_load_fn load, void *ctx, int want_loss,
                            double *loss_sum) {
    double t_step = ht_now();
    ht_model *m = x->m;
    memset(&x->st, 0, offsetof(ht_pipe_stats, slot_bytes));
    *loss_sum = 0;
    if (!x->tbw) ht_die(HT_ERUNTIME, "pipe: ht_pipe_exec_2bw_period on a stream other than 2bw");
    if (x->pend >= 0 && x->pend != t - 1)
        ht_die(HT_ERUNTIME, "pipe: 2bw period %lld with batch %lld pending", (long long)t,
               (long long)x->pend);
    /* batch t runs on W(t-1): the newest unless a drain just made W(t) (the other then holds
     * W(t-1)); at the start only one version exists */
    x->cur_p = x->pend < 0 && x->has_older ? 1 - x->newest : x->newest;
    if (has_cur) ht_buf_zero(m->dev, x->gv[t & 1], 0, m->pres * sizeof(float));
    for (int i = 0; i < x->len; i++) {
        const int op = x->ins[i].op;
        if ((op == HT_PI_RECV_ACT || op == HT_PI_RECV_GRAD) && runs_2bw(x, i, has_cur)) {
            msg *g = &x->msgs[i];
            msg_irecv(g, g->tag + (int)((t + x->rel[i]) & 1) * tag_span(x));
        }
    }
    for (int i = 0; i < x->len; i++) {
        if (!runs_2bw(x, i, has_cur)) continue;
        const int op = x->ins[i].op;
        if (op == HT_PI_SEND_ACT || op == HT_PI_SEND_GRAD) { /* the batch's tag */
            msg *g = &x->msgs[i];
            msg_wait(g);
            g->tag = tag_of(x, op == HT_PI_SEND_GRAD, x->ins[i].dir,
                            op == HT_PI_SEND_ACT ? x->ins[i].stage + 1 : x->ins[i].stage,
                            x->ins[i].mb) +
                     (int)((t + x->rel[i]) & 1) * tag_span(x);
        }
        use_version(x, t, x->rel[i]);
        run_instr(x, i, t + x->rel[i], seed, grad_scale, load, ctx, want_loss, loss_sum);
        poll_sends(x, i + 1);
    }
    restore(x);
    int step = x->pend >= 0; /* batch t-1's gradient is whole: W(t) = W(t-1) - lr g(t-1) */
    if (step) {
        const int dst = 1 - x->newest; /* W(t-2), last read by batch t-1's backwards */
        ht_buf_copy(m->dev, x->pv[dst], 0, x->pv[x->newest], 0, m->pres * sizeof(float));
        x->newest = dst, x->has_older = 1;
        m->grads = x->gv[x->pend & 1];
        tied_reduce(x);
    }
    m->params = x->pv[x->newest];
    x->pend = has_cur ? t : -1, x->pend_p = x->cur_p;
    if (!has_cur) /* a drain: every message of the chain matched */
        for (int i = 0; i < x->len; i++)
            msg_wait(&x->msgs[i]);
    x->st.step = ht_now() - t_step;
    return step;
}

int ht_pipe_exec_2bw_pending(const ht_pipe_exec *x) { return x->tbw && x->pend >= 0; }

double ht_pipe_exec_grad_sq(ht_pipe_exec *x) {
    double sq = 0;
    for (int s = 0; s < x->s->S; s++) {
        if (!ht_pipe_exec_owns(x, s)) continue;
        size_t off, n;
        ht_pipe_exec_stage_params(x, s, &off, &n);
        off = ht_pipe_local_bytes(x->m, off, n); /* x->red holds any of this rank's stages */
        ht_buf_read(x->m->dev, x->m->grads, off, n * sizeof(float), x->red);
        for (size_t i = 0; i < n; i++)
            sq += (double)x->red[i] * x->red[i];
    }
    return sq;
}

void ht_pipe_exec_stage_times(ht_pipe_exec *x, int reset, double *fwd, double *bwd) {
    for (int st = 0; st < x->s->S; st++) {
        if (fwd) fwd[st] = x->n_fwd[st] ? x->t_fwd[st] / x->n_fwd[st] : 0;
        if (bwd) bwd[st] = x->n_bwd[st] ? x->t_bwd[st] / x->n_bwd[st] : 0;
        if (reset) x->t_fwd[st] = x->t_bwd[st] = 0, x->n_fwd[st] = x->n_bwd[st] = 0;
    }
}
