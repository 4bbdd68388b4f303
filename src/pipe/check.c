/* The schedule checker: validates every instruction's fields, matches every SEND with one
 * RECV, then runs the D streams under the executor's semantics (SEND never waits, RECV waits
 * for its SEND; compute on unit time) while tracking each (micro-batch, stage)'s progress
 * and each rank's slots. What it measures (makespan, bubble, peak slots) is what the tests
 * compare with the papers' closed forms. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/internal.h"

enum { F_IN = 1, F_LAB = 2, F_FWD = 4, F_GIN = 8, F_BWD = 16, F_W = 32 };

typedef struct ctx {
    const ht_pipe_sched *s;
    int D, N, S, ndir, nch;
    double bf;
    const double *sf, *sb; /* per-stage forward / backward times, NULL: 1 and bf x forward */
    const double *sw;      /* per-stage W times (sb is then B only), NULL: B = W = sb / 2 */
    int split;             /* BWD is the input gradient, BWD_W the weights' (and frees) */
    uint8_t *cell;   /* [ndir * S * N] F_* flags per (dir, stage, mb) */
    double *msg_t;   /* [2 * ndir * S * N] time a SEND was issued, -1 before */
    int *pc;         /* [D] next instruction */
    double *clock;   /* [D] */
    int **owner;     /* [D][nbuf] cell holding the slot, -1 free */
    int *held, *peak;
    int *bwd_need, *bwd_done; /* [D * nch]: gradients completed (BWD, or BWD_W if split) */
    uint8_t *reduced, *opt;   /* [D * nch], [D] */
    double *arrive;           /* [ndir * S] when a replica reached its REDUCE_GRADS, -1 */
    double busy;
    double *const *t0, *const *t1; /* optional per-instruction start / end */
} ctx;

static int fail(const ctx *c, int r, int i, const char *fmt, ...) HT_PRINTF(4, 5);
static int fail(const ctx *c, int r, int i, const char *fmt, ...) {
    char what[512], ins[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ht_pipe_instr_str(&c->s->ins[r][i], ins, sizeof ins);
    return ht_error(HT_EINPUT, "schedule: rank %d instruction %d (%s): %s", r, i, ins, what);
}

static int has_buf(int op) { return op <= HT_PI_RECOMPUTE || op == HT_PI_BWD_W; }

/* Field ranges, placement, peers: everything one instruction says about itself. */
static int check_fields(const ctx *c, int r, int i) {
    const ht_pipe_sched *s = c->s;
    const ht_pipe_instr *in = &s->ins[r][i];
    int kind = s->p.kind, D = c->D, v = s->p.v;
    if (in->op >= HT_PI_NOPS) return fail(c, r, i, "unknown operation %d", in->op);
    if (in->dir >= c->ndir)
        return fail(c, r, i, "pipeline %d, this schedule has %d", in->dir, c->ndir);
    if (in->op == HT_PI_OPT_STEP) return HT_OK;
    if (in->op == HT_PI_REDUCE_GRADS && in->stage == -1) return HT_OK;
    if (in->stage < 0 || in->stage >= c->S)
        return fail(c, r, i, "stage %d out of range 0..%d", in->stage, c->S - 1);
    int owner = ht_pipe_stage_rank(kind, D, v, in->dir, in->stage);
    if (owner != r)
        return fail(c, r, i, "stage %d of pipeline %d runs on rank %d, not here", in->stage,
                    in->dir, owner);
    if (in->chunk != ht_pipe_stage_chunk(kind, D, in->dir, in->stage))
        return fail(c, r, i, "stage %d is this rank's chunk %d, not chunk %d", in->stage,
                    ht_pipe_stage_chunk(kind, D, in->dir, in->stage), in->chunk);
    if (in->op == HT_PI_REDUCE_GRADS) return HT_OK;
    if (in->mb < 0 || in->mb >= c->N)
        return fail(c, r, i, "micro-batch %d out of range 0..%d", in->mb, c->N - 1);
    if (s->mb_dir[in->mb] != in->dir)
        return fail(c, r, i, "micro-batch %d goes through pipeline %d, not %d", in->mb,
                    s->mb_dir[in->mb], in->dir);
    if (has_buf(in->op) && (in->buf < 0 || in->buf >= s->nbuf[r]))
        return fail(c, r, i, "slot %d out of range 0..%d", in->buf, s->nbuf[r] - 1);
    int last = c->S - 1, want = -2;
    switch (in->op) {
    case HT_PI_LOAD:
        if (in->stage != 0 && in->stage != last)
            return fail(c, r, i, "LOAD on stage %d: only the first (0) and last (%d) stages load",
                        in->stage, last);
        break;
    case HT_PI_SEND_ACT:
    case HT_PI_RECV_GRAD:
        if (in->stage == last) return fail(c, r, i, "the last stage has no next stage");
        want = ht_pipe_stage_rank(kind, D, v, in->dir, in->stage + 1);
        break;
    case HT_PI_RECV_ACT:
    case HT_PI_SEND_GRAD:
        if (in->stage == 0) return fail(c, r, i, "stage 0 has no previous stage");
        want = ht_pipe_stage_rank(kind, D, v, in->dir, in->stage - 1);
        break;
    default: break;
    }
    if (want != -2 && in->peer != want)
        return fail(c, r, i, "peer %d, but the neighbouring stage runs on rank %d", in->peer, want);
    return HT_OK;
}

/* Every message has exactly one SEND and one RECV, on the ranks its stages run on. */
static int check_pairs(const ctx *c) {
    const ht_pipe_sched *s = c->s;
    size_t nmsg = (size_t)2 * c->ndir * c->S * c->N;
    int *at = ht_xmalloc(nmsg * 4 * sizeof *at); /* send rank, send index, recv rank, index */
    for (size_t k = 0; k < nmsg * 4; k++)
        at[k] = -1;
    int rc = HT_OK;
    for (int r = 0; r < c->D && !rc; r++)
        for (int i = 0; i < s->len[r] && !rc; i++) {
            const ht_pipe_instr *in = &s->ins[r][i];
            int tag = ht_pipe_msg_tag(s, in);
            if (tag < 0) continue;
            int recv = in->op == HT_PI_RECV_ACT || in->op == HT_PI_RECV_GRAD;
            int *a = &at[(size_t)tag * 4 + 2 * recv];
            if (a[0] >= 0)
                rc = fail(c, r, i, "the same message was already %s at rank %d instruction %d",
                          recv ? "received" : "sent", a[0], a[1]);
            a[0] = r, a[1] = i;
        }
    for (size_t k = 0; k < nmsg && !rc; k++) {
        int *a = &at[k * 4];
        if (a[0] >= 0 && a[2] < 0) {
            const ht_pipe_instr *in = &s->ins[a[0]][a[1]];
            rc = fail(c, a[0], a[1], "no matching %s on rank %d",
                      in->op == HT_PI_SEND_ACT ? "RECV_ACT" : "RECV_GRAD", in->peer);
        } else if (a[0] < 0 && a[2] >= 0) {
            const ht_pipe_instr *in = &s->ins[a[2]][a[3]];
            rc = fail(c, a[2], a[3], "no matching %s on rank %d",
                      in->op == HT_PI_RECV_ACT ? "SEND_ACT" : "SEND_GRAD", in->peer);
        }
    }
    free(at);
    return rc;
}

/* ------------------------------------------------------------------ running the streams */

static int cell_of(const ctx *c, const ht_pipe_instr *in) {
    return (in->dir * c->S + in->stage) * c->N + in->mb;
}

static void cell_name(const ctx *c, int cell, char *buf, size_t n) {
    snprintf(buf, n, "mb=%d stage=%d%s", cell % c->N, cell / c->N % c->S,
             cell / (c->N * c->S) ? " dir=1" : "");
}

static int slot_take(ctx *c, int r, int i, const ht_pipe_instr *in) {
    int *o = &c->owner[r][in->buf], cell = cell_of(c, in);
    if (*o == cell) return HT_OK;
    if (*o >= 0) {
        char who[64];
        cell_name(c, *o, who, sizeof who);
        return fail(c, r, i,
                    "slot %d is still in use by %s (its BWD / SEND_GRAD has not run): reusing "
                    "it would overwrite those activations",
                    in->buf, who);
    }
    *o = cell;
    if (++c->held[r] > c->peak[r]) c->peak[r] = c->held[r];
    return HT_OK;
}

static int slot_holds(const ctx *c, int r, int i, const ht_pipe_instr *in) {
    int o = c->owner[r][in->buf];
    if (o == cell_of(c, in)) return HT_OK;
    if (o < 0)
        return fail(c, r, i, "slot %d holds no micro-batch (LOAD / RECV_ACT did not fill it)",
                    in->buf);
    char who[64];
    cell_name(c, o, who, sizeof who);
    return fail(c, r, i, "slot %d holds %s, not this micro-batch", in->buf, who);
}

static void slot_free(ctx *c, int r, const ht_pipe_instr *in) {
    c->owner[r][in->buf] = -1;
    c->held[r]--;
}

static double fwd_time(const ctx *c, int stage) { return c->sf ? c->sf[stage] : 1.0; }
/* The full backward (non-split), or B; W. Given only a full backward, B and W take half. */
static double bwd_time(const ctx *c, int stage) {
    double full = c->sb ? c->sb[stage] : c->bf * fwd_time(c, stage);
    if (c->sw) return c->split ? full : full + c->sw[stage];
    return c->split ? full / 2 : full;
}
static double w_time(const ctx *c, int stage) {
    if (c->sw) return c->sw[stage];
    return (c->sb ? c->sb[stage] : c->bf * fwd_time(c, stage)) / 2;
}

static int bwd_all_done(const ctx *c, int r, int i, int ch, const char *what) {
    int k = r * c->nch + ch;
    if (c->bwd_done[k] < c->bwd_need[k])
        return fail(c, r, i, "%s before the last %s of chunk %d (%d of %d done)", what,
                    c->split ? "BWD_W" : "BWD", ch, c->bwd_done[k], c->bwd_need[k]);
    return HT_OK;
}

/* REDUCE_GRADS of one chunk (in->stage >= 0) or of all. With two pipelines (Chimera) it is a
 * rendezvous with the stage's other replica: it waits (*blocked) until that one arrived. */
static int run_reduce(ctx *c, int r, int i, const ht_pipe_instr *in, int *blocked, double *t) {
    int lo = in->stage >= 0 ? in->chunk : 0, hi = in->stage >= 0 ? in->chunk + 1 : c->nch;
    for (int ch = lo; ch < hi; ch++)
        if (bwd_all_done(c, r, i, ch, "REDUCE_GRADS")) return HT_EINPUT;
    for (int ch = lo; ch < hi && c->ndir == 2; ch++) {
        int dir, st = ht_pipe_chunk_stage(c->s, r, ch, &dir);
        double *mine = &c->arrive[dir * c->S + st], other = c->arrive[(1 - dir) * c->S + st];
        if (*mine < 0) *mine = *t;
        if (other < 0) *blocked = 1;
        else if (other > *t) *t = other;
    }
    if (*blocked) return HT_OK;
    for (int ch = lo; ch < hi; ch++) {
        if (c->reduced[r * c->nch + ch]) return fail(c, r, i, "chunk %d reduced twice", ch);
        c->reduced[r * c->nch + ch] = 1;
    }
    return HT_OK;
}

static int run_sync(ctx *c, int r, int i, const ht_pipe_instr *in, int *blocked) {
    double t = c->clock[r];
    if (in->op == HT_PI_REDUCE_GRADS) {
        int rc = run_reduce(c, r, i, in, blocked, &t);
        if (rc || *blocked) return rc;
    } else {
        if (c->opt[r]) return fail(c, r, i, "a second OPT_STEP");
        for (int ch = 0; ch < c->nch; ch++) {
            if (bwd_all_done(c, r, i, ch, "OPT_STEP")) return HT_EINPUT;
            if (!c->reduced[r * c->nch + ch])
                return fail(c, r, i, "OPT_STEP before REDUCE_GRADS of chunk %d", ch);
        }
        c->opt[r] = 1;
    }
    if (c->t0) c->t0[r][i] = c->t1[r][i] = t;
    c->clock[r] = t;
    return HT_OK;
}

/* Runs instruction i of rank r; *blocked = 1 when it is a RECV whose SEND has not been
 * issued yet, or a Chimera REDUCE_GRADS whose partner has not arrived (which only records
 * its own arrival). */
static int step(ctx *c, int r, int i, int *blocked) {
    const ht_pipe_instr *in = &c->s->ins[r][i];
    int op = in->op;
    *blocked = 0;
    if (c->opt[r] && op != HT_PI_OPT_STEP) return fail(c, r, i, "runs after OPT_STEP");
    if (op == HT_PI_REDUCE_GRADS || op == HT_PI_OPT_STEP) return run_sync(c, r, i, in, blocked);
    int tag = ht_pipe_msg_tag(c->s, in), cl = cell_of(c, in), last = in->stage == c->S - 1;
    uint8_t *f = &c->cell[cl];
    double t = c->clock[r], dt = 0;
    if (op == HT_PI_RECV_ACT || op == HT_PI_RECV_GRAD) {
        if (c->msg_t[tag] < 0) return *blocked = 1, HT_OK;
        if (c->msg_t[tag] > t) t = c->msg_t[tag];
    }
    int rc = op == HT_PI_LOAD || op == HT_PI_RECV_ACT ? slot_take(c, r, i, in)
                                                      : slot_holds(c, r, i, in);
    if (rc) return rc;
    switch (op) {
    case HT_PI_LOAD:
        if (in->stage == 0) {
            if (*f & F_IN) return fail(c, r, i, "the input was already loaded");
            *f |= F_IN;
        }
        if (last) {
            if (*f & F_LAB) return fail(c, r, i, "the labels were already loaded");
            *f |= F_LAB;
        }
        break;
    case HT_PI_RECV_ACT: *f |= F_IN; break;
    case HT_PI_FWD:
        if (*f & F_FWD) return fail(c, r, i, "FWD of this micro-batch and stage runs twice");
        if (!(*f & F_IN)) return fail(c, r, i, "FWD before its input arrived (LOAD / RECV_ACT)");
        if (last && !(*f & F_LAB)) return fail(c, r, i, "FWD of the last stage before LOAD of its labels");
        *f |= F_FWD, dt = fwd_time(c, in->stage);
        break;
    case HT_PI_SEND_ACT:
        if (!(*f & F_FWD)) return fail(c, r, i, "SEND_ACT before its FWD");
        c->msg_t[tag] = t;
        break;
    case HT_PI_RECV_GRAD:
        if (!(*f & F_FWD)) return fail(c, r, i, "RECV_GRAD before the FWD it belongs to");
        *f |= F_GIN;
        break;
    case HT_PI_RECOMPUTE:
        if (!(*f & F_FWD) || (*f & F_BWD)) return fail(c, r, i, "RECOMPUTE outside FWD .. BWD");
        dt = fwd_time(c, in->stage);
        break;
    case HT_PI_BWD:
        if (!(*f & F_FWD)) return fail(c, r, i, "BWD before FWD");
        if (*f & F_BWD) return fail(c, r, i, "BWD of this micro-batch and stage runs twice");
        if (!last && !(*f & F_GIN)) return fail(c, r, i, "BWD before its RECV_GRAD");
        *f |= F_BWD, dt = bwd_time(c, in->stage);
        if (c->split) break; /* the slot stays for the BWD_W */
        c->bwd_done[r * c->nch + in->chunk]++;
        if (in->stage == 0) slot_free(c, r, in);
        break;
    case HT_PI_BWD_W:
        if (!c->split)
            return fail(c, r, i, "BWD_W in a \"%s\" schedule, whose BWD is the whole backward",
                        ht_pipe_kind_names[c->s->p.kind]);
        if (!(*f & F_BWD))
            return fail(c, r, i, "BWD_W before its BWD: the weight gradient needs the output "
                        "gradient that the input-gradient pass (BWD) consumes first");
        if (*f & F_W) return fail(c, r, i, "BWD_W of this micro-batch and stage runs twice");
        *f |= F_W, dt = w_time(c, in->stage);
        c->bwd_done[r * c->nch + in->chunk]++;
        slot_free(c, r, in);
        break;
    case HT_PI_SEND_GRAD:
        if (!(*f & F_BWD)) return fail(c, r, i, "SEND_GRAD before its BWD");
        c->msg_t[tag] = t;
        if (!c->split) slot_free(c, r, in);
        break;
    }
    if (c->t0) c->t0[r][i] = t, c->t1[r][i] = t + dt;
    c->clock[r] = t + dt;
    c->busy += dt;
    return HT_OK;
}

static int deadlock(const ctx *c) {
    char msg[1024], ins[128];
    size_t k = (size_t)snprintf(msg, sizeof msg, "schedule deadlocks: every unfinished rank waits, in a RECV for a SEND or in a "
                                       "REDUCE_GRADS for the stage's other replica, that never comes:");
    int shown = 0;
    for (int r = 0; r < c->D; r++) {
        if (c->pc[r] >= c->s->len[r]) continue;
        if (shown++ == 4) {
            k += (size_t)snprintf(msg + k, sizeof msg - k, " ...");
            break;
        }
        ht_pipe_instr_str(&c->s->ins[r][c->pc[r]], ins, sizeof ins);
        if (k < sizeof msg)
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%s rank %d at instruction %d (%s)",
                                  shown > 1 ? ";" : "", r, c->pc[r], ins);
    }
    return ht_error(HT_EINPUT, "%s", msg);
}

static int finish(const ctx *c) {
    for (int cl = 0; cl < c->ndir * c->S * c->N; cl++) {
        int mb = cl % c->N, st = cl / c->N % c->S, dir = cl / (c->N * c->S);
        if (c->s->mb_dir[mb] != dir) continue;
        int r = ht_pipe_stage_rank(c->s->p.kind, c->D, c->s->p.v, dir, st);
        int want = F_FWD | F_BWD | (c->split ? F_W : 0), got = c->cell[cl] & want;
        if (got != want)
            return ht_error(HT_EINPUT, "schedule: micro-batch %d never runs %s of stage %d%s (rank %d)",
                            mb, !(got & F_FWD) ? "FWD" : !(got & F_BWD) ? "BWD" : "BWD_W", st,
                            dir ? " of pipeline 1" : "", r);
    }
    for (int r = 0; r < c->D; r++) {
        if (!c->opt[r]) return ht_error(HT_EINPUT, "schedule: rank %d has no OPT_STEP", r);
        for (int b = 0; b < c->s->nbuf[r]; b++)
            if (c->owner[r][b] >= 0) {
                char who[64];
                cell_name(c, c->owner[r][b], who, sizeof who);
                return ht_error(HT_EINPUT, "schedule: rank %d ends with slot %d still holding %s", r, b, who);
            }
    }
    return HT_OK;
}

static int check_shape(const ht_pipe_sched *s) {
    const ht_pipe_params *p = &s->p;
    if (!s->len || !s->ins || !s->nbuf || !s->mb_dir || p->D < 1 || p->N < 1 || p->v < 1 ||
        p->kind < 0 || p->kind >= HT_PIPE_NKINDS || s->S != p->D * p->v || s->ndir < 1 ||
        s->ndir > 2)
        return ht_error(HT_EINPUT, "schedule: malformed (D=%d N=%d v=%d S=%d ndir=%d)", p->D,
                        p->N, p->v, s->S, s->ndir);
    for (int m = 0; m < p->N; m++)
        if (s->mb_dir[m] < 0 || s->mb_dir[m] >= s->ndir)
            return ht_error(HT_EINPUT, "schedule: micro-batch %d in pipeline %d of %d", m,
                            s->mb_dir[m], s->ndir);
    return HT_OK;
}

static void ctx_init(ctx *c, const ht_pipe_sched *s, double bf, const double *sf) {
    memset(c, 0, sizeof *c);
    c->s = s, c->D = s->p.D, c->N = s->p.N, c->S = s->S, c->ndir = s->ndir;
    c->nch = ht_pipe_nchunks(s), c->bf = bf, c->sf = sf;
    c->split = ht_pipe_kind_split(s->p.kind);
    size_t cells = (size_t)c->ndir * c->S * c->N, D = (size_t)c->D;
    c->cell = ht_xcalloc(cells, 1);
    c->msg_t = ht_xmalloc(2 * cells * sizeof *c->msg_t);
    for (size_t k = 0; k < 2 * cells; k++)
        c->msg_t[k] = -1;
    c->pc = ht_xcalloc(D, sizeof *c->pc);
    c->clock = ht_xcalloc(D, sizeof *c->clock);
    c->owner = ht_xcalloc(D, sizeof *c->owner);
    c->held = ht_xcalloc(D, sizeof *c->held);
    c->peak = ht_xcalloc(D, sizeof *c->peak);
    c->bwd_need = ht_xcalloc(D * (size_t)c->nch, sizeof *c->bwd_need);
    c->bwd_done = ht_xcalloc(D * (size_t)c->nch, sizeof *c->bwd_done);
    c->reduced = ht_xcalloc(D * (size_t)c->nch, 1);
    c->opt = ht_xcalloc(D, 1);
    c->arrive = ht_xmalloc((size_t)c->ndir * c->S * sizeof *c->arrive);
    for (int k = 0; k < c->ndir * c->S; k++)
        c->arrive[k] = -1;
    for (int r = 0; r < c->D; r++) {
        int nb = s->nbuf[r] > 0 ? s->nbuf[r] : 1;
        c->owner[r] = ht_xmalloc((size_t)nb * sizeof *c->owner[r]);
        for (int b = 0; b < nb; b++)
            c->owner[r][b] = -1;
        for (int ch = 0; ch < c->nch; ch++) {
            int dir;
            ht_pipe_chunk_stage(s, r, ch, &dir);
            for (int m = 0; m < c->N; m++)
                c->bwd_need[r * c->nch + ch] += s->mb_dir[m] == dir;
        }
    }
}

static void ctx_free(ctx *c) {
    for (int r = 0; r < c->D; r++)
        free(c->owner[r]);
    free(c->cell), free(c->msg_t), free(c->pc), free(c->clock), free(c->owner);
    free(c->held), free(c->peak), free(c->bwd_need), free(c->bwd_done), free(c->reduced);
    free(c->opt), free(c->arrive);
}

/* Runs every rank as far as it can, round after round, until all ended or none can move.
 * Times do not depend on the round order: a RECV's time is its SEND's, fixed once issued. */
static int run(ctx *c) {
    int moved;
    do {
        moved = 0;
        for (int r = 0; r < c->D; r++)
            while (c->pc[r] < c->s->len[r]) {
                int blocked, rc = step(c, r, c->pc[r], &blocked);
                if (rc) return rc;
                if (blocked) break;
                c->pc[r]++, moved = 1;
            }
    } while (moved);
    for (int r = 0; r < c->D; r++)
        if (c->pc[r] < c->s->len[r]) return deadlock(c);
    return finish(c);
}

static int check_all(const ht_pipe_sched *s, double bf, const double *sf, const double *sb,
                     const double *sw, ht_pipe_report *rep, double *const *t0, double *const *t1) {
    int rc = check_shape(s);
    if (rc) return rc;
    if (!(bf > 0)) return ht_error(HT_EINPUT, "schedule check: backward/forward ratio %g, expected > 0", bf);
    for (int st = 0; sf && st < s->S; st++)
        if (!(sf[st] > 0))
            return ht_error(HT_EINPUT, "schedule check: stage %d forward time %g, expected > 0", st, sf[st]);
    for (int st = 0; sb && st < s->S; st++)
        if (!(sb[st] > 0))
            return ht_error(HT_EINPUT, "schedule check: stage %d backward time %g, expected > 0", st, sb[st]);
    for (int st = 0; sw && st < s->S; st++)
        if (!(sw[st] > 0))
            return ht_error(HT_EINPUT, "schedule check: stage %d weight-gradient time %g, expected > 0", st, sw[st]);
    ctx c;
    ctx_init(&c, s, bf, sf);
    c.sb = sb, c.sw = sw;
    c.t0 = t0, c.t1 = t1;
    for (int r = 0; r < c.D && !rc; r++)
        for (int i = 0; i < s->len[r] && !rc; i++)
            rc = check_fields(&c, r, i);
    if (!rc) rc = check_pairs(&c);
    if (!rc) rc = run(&c);
    if (!rc && rep) {
        memset(rep, 0, sizeof *rep);
        for (int r = 0; r < c.D; r++) {
            if (c.clock[r] > rep->makespan) rep->makespan = c.clock[r];
            if (r < 64) rep->peak_inflight[r] = c.peak[r];
            if (c.peak[r] > rep->peak_max) rep->peak_max = c.peak[r];
        }
        rep->busy = c.busy;
        rep->bubble = rep->makespan > 0 ? 1 - c.busy / (c.D * rep->makespan) : 0;
    }
    ctx_free(&c);
    return rc;
}

int ht_pipe_check(const ht_pipe_sched *s, double bf_ratio, const double *stage_fwd,
                  ht_pipe_report *r) {
    return check_all(s, bf_ratio, stage_fwd, NULL, NULL, r, NULL, NULL);
}

int ht_pipe_check_costs(const ht_pipe_sched *s, const double *stage_fwd, const double *stage_bwd,
                        ht_pipe_report *r) {
    return check_all(s, 1.0, stage_fwd, stage_bwd, NULL, r, NULL, NULL);
}

int ht_pipe_check_fbw(const ht_pipe_sched *s, const double *stage_fwd, const double *stage_b,
                      const double *stage_w, ht_pipe_report *r) {
    if (!stage_fwd || !stage_b || !stage_w)
        return ht_error(HT_EINPUT, "schedule check: F, B and W times are all needed");
    return check_all(s, 1.0, stage_fwd, stage_b, stage_w, r, NULL, NULL);
}

int ht_pipe_timeline(const ht_pipe_sched *s, double bf_ratio, const double *stage_fwd,
                     double *const *start, double *const *end, ht_pipe_report *r) {
    return check_all(s, bf_ratio, stage_fwd, NULL, NULL, r, start, end);
}
