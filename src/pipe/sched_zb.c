/* Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): each
 * backward is split into B (BWD: the input gradient, which the previous stage waits for) and
 * W (BWD_W: the weight gradient, which only the optimizer step needs), and the W passes fill
 * the idle time. All three kinds here come from one list scheduler: it plays the pipeline
 * forward in time and, whenever a rank could start something, starts the ready pass of the
 * highest priority (the paper's: B first, it is on the critical path; then F, while the
 * rank's slot limit allows; W last, to fill), a slot being held from the F until its W ends.
 * - zb-h1: the paper's hand-made order (below), not the list scheduler.
 * - zb-v: two chunks per rank in a V (stage s < D on rank s, stage s >= D on rank 2D-1-s),
 *   the same bytes as 1F1B's D slots: 2D slots of half a stage each, one kept for chunk 1.
 * - zb-het: the given per-stage F, B, W times and per-rank slot limits; the best (checker's
 *   makespan under those times, within the limits) of the list scheduler under three
 *   priorities, zb-h1, 1F1B and hepipe (those two with each W right after its B: their
 *   timing exactly), so never slower than any of them at the same memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/internal.h"

enum { PF, PB, PW };                       /* passes */
enum { PRIO_BFW, PRIO_FBW, PRIO_BWF, NPRIO }; /* priority orders of the passes */
static const int prio_rank[NPRIO][3] = {   /* [prio][pass]: lower runs first */
    [PRIO_BFW] = {1, 0, 2}, [PRIO_FBW] = {0, 1, 2}, [PRIO_BWF] = {2, 0, 1}};

typedef struct zb {
    int kind, D, N, S, v, prio;
    const double *tf, *tb, *tw; /* [S] */
    const int *cap;             /* [D] slots */
    double *fe, *be;            /* [S * N] end of F / B, < 0: not run */
    int *nf, *nb, *nw;          /* [S] next micro-batch of each pass (in order per stage) */
    int *held, *held0;          /* [D] slots in use, of them chunk 0's */
    double *clock, *next;       /* [D] rank free; earliest start of its next pass (cache) */
    int *pass, *stage;          /* [D] that pass (cache) */
} zb;

static int rank_of(const zb *z, int st) { return ht_pipe_stage_rank(z->kind, z->D, z->v, 0, st); }

/* When pass `ps` of stage st (on rank r) could start, INFINITY when not yet known. */
static double ready(const zb *z, int r, int ps, int st) {
    int N = z->N, m;
    double t;
    if (ps == PF) {
        if ((m = z->nf[st]) >= N || z->held[r] >= z->cap[r]) return INFINITY;
        /* V: chunk 0 leaves a slot for chunk 1, which every admitted micro-batch needs */
        if (z->v == 2 && st < z->D && z->held0[r] >= z->cap[r] - 1) return INFINITY;
        t = st == 0 ? 0 : z->fe[(st - 1) * N + m];
    } else if (ps == PB) {
        if ((m = z->nb[st]) >= z->nf[st]) return INFINITY;
        t = st == z->S - 1 ? z->fe[st * N + m] : z->be[(st + 1) * N + m];
    } else {
        if ((m = z->nw[st]) >= z->nb[st]) return INFINITY;
        t = z->be[st * N + m];
    }
    if (t < 0) return INFINITY;
    return t > z->clock[r] ? t : z->clock[r];
}

/* The pass rank r starts next: the earliest start; among passes ready then, the priority's
 * first (F: the later stage, which frees memory sooner; B, W: the earlier ready). */
static void choose(zb *z, int r) {
    int sts[2] = {r, 2 * z->D - 1 - r};
    double best = INFINITY;
    for (int k = 0; k < z->v; k++)
        for (int ps = 0; ps < 3; ps++) {
            double t = ready(z, r, ps, sts[k]);
            if (t < best) best = t;
        }
    z->next[r] = best, z->pass[r] = -1;
    if (best == INFINITY) return;
    int bp = 99, bs = -1;
    double bt = INFINITY;
    for (int k = 0; k < z->v; k++)
        for (int ps = 0; ps < 3; ps++) {
            int st = sts[k];
            double t = ready(z, r, ps, st);
            if (t > best + 1e-12) continue;
            int pr = prio_rank[z->prio][ps];
            double key = ps == PF ? -st : t;
            if (pr < bp || (pr == bp && key < bt)) bp = pr, bs = st, bt = key, z->pass[r] = ps;
        }
    z->stage[r] = bs;
}

static void zb_free(zb *z) {
    free(z->fe), free(z->be), free(z->nf), free(z->nb), free(z->nw), free(z->held);
    free(z->held0), free(z->clock), free(z->next), free(z->pass), free(z->stage);
}

/* Plays the list scheduler, appending each rank's passes to o in the order they run.
 * HT_OK, or HT_EINPUT when the slot limits leave every rank waiting (a limit too small). */
static int list_schedule(zb *z, ht_pipe_order *o) {
    int D = z->D, N = z->N, S = z->S;
    size_t sn = (size_t)S * N;
    z->fe = ht_xmalloc(sn * sizeof *z->fe), z->be = ht_xmalloc(sn * sizeof *z->be);
    for (size_t k = 0; k < sn; k++)
        z->fe[k] = z->be[k] = -1;
    z->nf = ht_xcalloc((size_t)S, sizeof(int)), z->nb = ht_xcalloc((size_t)S, sizeof(int));
    z->nw = ht_xcalloc((size_t)S, sizeof(int));
    z->held = ht_xcalloc((size_t)D, sizeof(int)), z->held0 = ht_xcalloc((size_t)D, sizeof(int));
    z->clock = ht_xcalloc((size_t)D, sizeof(double));
    z->next = ht_xcalloc((size_t)D, sizeof(double));
    z->pass = ht_xcalloc((size_t)D, sizeof(int)), z->stage = ht_xcalloc((size_t)D, sizeof(int));
    for (int r = 0; r < D; r++)
        choose(z, r);
    static const int ops[3] = {HT_PI_FWD, HT_PI_BWD, HT_PI_BWD_W};
    for (long left = 3L * (long)sn; left > 0; left--) {
        int r = 0;
        for (int q = 1; q < D; q++)
            if (z->next[q] < z->next[r]) r = q;
        if (z->next[r] == INFINITY) {
            zb_free(z);
            return ht_error(HT_EINPUT, "schedule \"%s\": the slot limits leave every rank "
                            "waiting (%ld passes left); expected larger limits",
                            ht_pipe_kind_names[z->kind], left);
        }
        int ps = z->pass[r], st = z->stage[r];
        double t = z->next[r];
        int m = ps == PF ? z->nf[st]++ : ps == PB ? z->nb[st]++ : z->nw[st]++;
        double d = ps == PF ? z->tf[st] : ps == PB ? z->tb[st] : z->tw[st];
        z->clock[r] = t + d;
        if (ps == PF) z->fe[st * N + m] = t + d, z->held[r]++, z->held0[r] += st < D;
        if (ps == PB) z->be[st * N + m] = t + d;
        if (ps == PW) z->held[r]--, z->held0[r] -= st < D;
        ht_pipe_order_add(o, r, ops[ps], 0, st, m);
        /* what this pass can make ready: its own rank, the neighbouring stages' ranks */
        choose(z, r);
        if (st > 0) choose(z, rank_of(z, st - 1));
        if (st < S - 1) choose(z, rank_of(z, st + 1));
    }
    zb_free(z);
    return HT_OK;
}

/* The list scheduler's streams into s (kind, D, N, v from s). */
static int gen_list(ht_pipe_sched *s, const double *tf, const double *tb, const double *tw,
                    const int *cap, int prio) {
    zb z = {.kind = s->p.kind, .D = s->p.D, .N = s->p.N, .S = s->S, .v = s->p.v, .prio = prio,
            .tf = tf, .tb = tb, .tw = tw, .cap = cap};
    ht_pipe_order o;
    ht_pipe_order_init(&o, z.D);
    int rc = list_schedule(&z, &o);
    if (rc == HT_OK) ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
    return rc;
}

/* Unit plan: F = 1, B = W = bf / 2 per stage (bf 0: 2, the paper's F = B = W). */
static void unit_times(const ht_pipe_params *p, int S, double *tf, double *tb, double *tw) {
    double h = (p->bf_ratio > 0 ? p->bf_ratio : 2) / 2;
    for (int st = 0; st < S; st++)
        tf[st] = 1, tb[st] = tw[st] = h;
}

/* ZB-H1: 1F1B's order (warm-up of D-1-r forwards, then one F and one B alternate), each B's
 * W deferred until r more B's ran on rank r (the rest at the end): the r deferred W's fill
 * the bubbles that 1F1B leaves below rank 0, and every rank holds at most D slots, 1F1B's
 * peak (rank 0's). At F, B, W >= W the makespan is N(F+B+W) + (D-1)(F+B-W), the paper's
 * (its Figure 3, Table 1) against 1F1B's (N+D-1)(F+B+W). */
int ht_pipe_gen_zbh1(const ht_pipe_params *p, ht_pipe_sched *s) {
    int D = p->D, N = p->N;
    ht_pipe_order o;
    ht_pipe_order_init(&o, D);
    for (int r = 0; r < D; r++) {
        int wu = D - 1 - r < N ? D - 1 - r : N, wq = 0; /* next W to run */
        for (int k = 0; k < wu; k++)
            ht_pipe_order_add(&o, r, HT_PI_FWD, 0, r, k);
        for (int i = 0; i < N; i++) {
            if (wu + i < N) ht_pipe_order_add(&o, r, HT_PI_FWD, 0, r, wu + i);
            ht_pipe_order_add(&o, r, HT_PI_BWD, 0, r, i);
            if (i + 1 - wq > r) ht_pipe_order_add(&o, r, HT_PI_BWD_W, 0, r, wq++);
        }
        while (wq < N)
            ht_pipe_order_add(&o, r, HT_PI_BWD_W, 0, r, wq++);
    }
    ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
    return HT_OK;
}

/* ZB-V from the list scheduler at the planned unit times, 2D half-stage slots a rank. */
int ht_pipe_gen_zbv(const ht_pipe_params *p, ht_pipe_sched *s) {
    int S = s->S, D = p->D;
    double *t = ht_xmalloc((size_t)3 * S * sizeof *t);
    int *cap = ht_xmalloc((size_t)D * sizeof *cap);
    unit_times(p, S, t, t + S, t + 2 * S);
    for (int r = 0; r < D; r++)
        cap[r] = 2 * D;
    int rc = gen_list(s, t, t + S, t + 2 * S, cap, PRIO_BFW);
    free(t), free(cap);
    return rc;
}

/* ---------------------------------------------------------------- zb-het */

/* A fresh schedule of s's parameters, arrays allocated as ht_pipe_generate does. */
static void blank(const ht_pipe_sched *s, ht_pipe_sched *t) {
    memset(t, 0, sizeof *t);
    t->p = s->p, t->S = s->S, t->ndir = 1;
    t->len = ht_xcalloc((size_t)s->p.D, sizeof *t->len);
    t->ins = ht_xcalloc((size_t)s->p.D, sizeof *t->ins);
    t->nbuf = ht_xcalloc((size_t)s->p.D, sizeof *t->nbuf);
    t->mb_dir = ht_xcalloc((size_t)s->p.N, sizeof *t->mb_dir);
}

/* A whole-backward schedule u (1F1B, hepipe) as a split one of s's kind: each BWD_W right
 * after its BWD, so B + W run back to back as the whole backward did (same times, same
 * slots: the slot is freed by the W before the SEND_GRAD that freed it). */
static void as_split(const ht_pipe_sched *s, const ht_pipe_sched *u, ht_pipe_sched *t) {
    blank(s, t);
    for (int r = 0; r < u->p.D; r++) {
        t->nbuf[r] = u->nbuf[r];
        for (int i = 0; i < u->len[r]; i++) {
            const ht_pipe_instr *in = &u->ins[r][i];
            ht_pipe_push(t, r, in->op, in->dir, in->stage, in->mb, in->peer, in->buf);
            if (in->op == HT_PI_BWD)
                ht_pipe_push(t, r, HT_PI_BWD_W, in->dir, in->stage, in->mb, -1, in->buf);
        }
    }
}

/* Keeps t in *best when it fits the slot limits and is faster (makespan under the times). */
static void consider(ht_pipe_sched *best, double *best_t, ht_pipe_sched *t, const double *tf,
                     const double *tb, const double *tw, const int *cap) {
    ht_pipe_report rep;
    int fits = ht_pipe_check_fbw(t, tf, tb, tw, &rep) == HT_OK;
    for (int r = 0; fits && r < t->p.D; r++)
        fits = t->nbuf[r] <= cap[r];
    ht_error_clear();
    if (fits && rep.makespan < *best_t * (1 - 1e-12)) {
        ht_pipe_sched_free(best);
        *best = *t, *best_t = rep.makespan;
    } else {
        ht_pipe_sched_free(t);
    }
}

/* The fixed schedules at the same memory, as candidates: zb-h1 (its own plan), 1F1B and
 * hepipe (within the slot limits, planned for the stages' forward times and B + W). */
static void fixed_candidates(const ht_pipe_params *p, ht_pipe_sched *s, ht_pipe_sched *best,
                             double *bt, const double *t, const int *cap) {
    int D = p->D, S = s->S;
    double bf = 0;
    for (int st = 0; st < S; st++)
        bf += (t[S + st] + t[2 * S + st]) / t[st] / S;
    ht_pipe_params q[3] = {{.kind = HT_PIPE_ZBH1, .D = D, .N = p->N, .v = 1, .bf_ratio = p->bf_ratio},
                           {.kind = HT_PIPE_1F1B, .D = D, .N = p->N, .v = 1},
                           {.kind = HT_PIPE_HEPIPE, .D = D, .N = p->N, .v = 1,
                            .stage_time = t, .max_inflight = cap, .bf_ratio = bf > 64 ? 64 : bf}};
    for (int k = 0; k < 3; k++) {
        ht_pipe_sched u, c;
        if (ht_pipe_generate(&q[k], &u)) { /* e.g. limits below hepipe's minimum */
            ht_error_clear();
            continue;
        }
        if (k == 0) c = u, c.p = s->p; /* the same streams, named zb-het */
        else as_split(s, &u, &c), ht_pipe_sched_free(&u);
        consider(best, bt, &c, t, t + S, t + 2 * S, cap);
    }
}

int ht_pipe_gen_zbhet(const ht_pipe_params *p, ht_pipe_sched *s) {
    int D = p->D, S = s->S;
    double *t = ht_xmalloc((size_t)3 * S * sizeof *t), bt = INFINITY;
    int *cap = ht_xmalloc((size_t)D * sizeof *cap);
    unit_times(p, S, t, t + S, t + 2 * S);
    for (int st = 0; st < S; st++) {
        if (p->stage_time) t[st] = p->stage_time[st];
        t[S + st] = p->stage_b ? p->stage_b[st] : t[S + st] * t[st];
        t[2 * S + st] = p->stage_w ? p->stage_w[st] : t[2 * S + st] * t[st];
        if (!(t[st] > 0 && t[S + st] > 0 && t[2 * S + st] > 0)) {
            int rc = ht_error(HT_EINPUT, "schedule \"zb-het\": stage %d's F, B, W times %g, %g, "
                              "%g; expected all > 0", st, t[st], t[S + st], t[2 * S + st]);
            free(t), free(cap);
            return rc;
        }
    }
    for (int r = 0; r < D; r++) /* unlimited: zb-h1's D slots, so that zb-h1 is a candidate */
        cap[r] = p->max_inflight ? p->max_inflight[r] : D;
    ht_pipe_sched best = {0};
    for (int prio = 0; prio < NPRIO; prio++) {
        ht_pipe_sched c;
        blank(s, &c);
        if (gen_list(&c, t, t + S, t + 2 * S, cap, prio) == HT_OK)
            consider(&best, &bt, &c, t, t + S, t + 2 * S, cap);
        else ht_pipe_sched_free(&c), ht_error_clear();
    }
    fixed_candidates(p, s, &best, &bt, t, cap);
    free(t), free(cap);
    if (bt == INFINITY)
        return ht_error(HT_EINPUT, "schedule \"zb-het\": no schedule fits the slot limits "
                        "(max_inflight); expected at least 1 slot per rank, and D - r for the "
                        "fixed schedules");
    ht_pipe_params keep = s->p;
    ht_pipe_sched_free(s);
    *s = best;
    s->p = keep;
    return HT_OK;
}
