/* A pipeline's memory decision (see mem_decide.h). Moved from the pipeline engine
 * (train/pipe_mem.c), which now executes it. */
#include "plan/mem_decide.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/schedule.h"
#include "plan/bounds.h"

void ht_plan_mem_free(ht_plan_mem *d) {
    free(d->layers), free(d->any), free(d->max_inflight), free(d->plan), free(d->who);
    free(d->chunks);
    memset(d, 0, sizeof *d);
}

void ht_plan_mem_move(ht_plan_mem *to, ht_plan_mem *from) {
    if (to == from) return;
    ht_plan_mem_free(to);
    *to = *from;
    memset(from, 0, sizeof *from);
}

/* The layer ranges schedule rank q holds (both of Chimera's directions), into lo/hi and as
 * text; returns their count. */
static int chunks_of(ht_plan_mem *d, const ht_plan_mem_in *in, int q, int *lo, int *hi) {
    const int S = d->Q * in->v, ndir = ht_pipe_kind_has(in->kind, HT_PIPE_F_TWO_WAY) ? 2 : 1;
    int n = 0;
    size_t k = 0;
    for (int s = 0; s < S; s++)
        for (int dir = 0; dir < ndir; dir++)
            if (ht_pipe_stage_rank(in->kind, d->Q, in->v, dir, s) == q) {
                lo[n] = in->bounds[s], hi[n] = in->bounds[s + 1];
                if (k + 16 < sizeof d->chunks[q])
                    k += (size_t)snprintf(d->chunks[q] + k, sizeof d->chunks[q] - k, "%s%d-%d",
                                          n ? "," : "", lo[n], hi[n] - 1);
                n++;
            }
    return n;
}

int ht_plan_mem_chunks(int kind, int Q, int v, const int *bounds, int q, int *lo, int *hi) {
    const int ndir = ht_pipe_kind_has(kind, HT_PIPE_F_TWO_WAY) ? 2 : 1;
    int n = 0;
    for (int s = 0; s < Q * v; s++)
        for (int dir = 0; dir < ndir; dir++)
            if (ht_pipe_stage_rank(kind, Q, v, dir, s) == q) lo[n] = bounds[s], hi[n++] = bounds[s + 1];
    return n;
}

static double limit_of(const ht_plan_mem_in *in, int r) { return in->limit ? in->limit[r] : 0; }

static int infeasible(const ht_plan_mem *d, const ht_plan_mem_in *in, int q, int mq,
                      const char *where) {
    const ht_mem_plan *p = &d->plan[q];
    const int r = d->who[q], w = in->dev_rank ? in->dev_rank[r] : r;
    const double lim = limit_of(in, r);
    return ht_error(HT_EINPUT,
                    "%s: key 'device.memory_mb': no plan fits rank %d's device \"%s\" (limit "
                    "%.2f MB, %s): layers %s with %d micro-batch(es) of %d samples in flight "
                    "need at least %.2f MB%s (weights, gradients and optimizer %.2f MB, "
                    "activations and workspace %.2f MB): short by %.2f MB; raise "
                    "device.memory_mb, use more stages or smaller micro-batches",
                    where, w, in->dev_name ? in->dev_name[w] : "?", lim / 1e6,
                    in->from_cfg ? "device.memory_mb" : "its reported global memory",
                    d->chunks[q], p->slots, mq, p->use.total / 1e6,
                    p->nrc ? " with every layer that frees memory recomputed" : "",
                    p->use.state / 1e6, (p->use.acts + p->use.live + p->use.work) / 1e6,
                    (p->use.total - lim) / 1e6);
}

/* Forward seconds per sample from FLOPs (only their ratios matter to the choice). */
static double *flops_times(const ht_model *m, int Q) {
    const int L = m->nlayers;
    double *f = ht_xmalloc((size_t)Q * (L ? L : 1) * sizeof *f);
    for (int q = 0; q < Q; q++)
        for (int l = 0; l < L; l++)
            f[q * L + l] = ht_layer_flops_forward(&m->layers[l]) * 1e-9;
    return f;
}

/* What a decision shares between ranks: the inputs, per-layer forward seconds, fused pairs,
 * the chunks of the schedule rank being planned. */
typedef struct dctx {
    const ht_plan_mem_in *in;
    int mode, L;
    const double *t; /* [L] seconds per sample of the schedule rank's layers */
    const uint8_t *fused;
    int nc;
    const int *lo, *hi;
} dctx;

/* One rank's plan at mq samples a micro-batch and `slots` in flight against limit (auto):
 * recomputed layers into set, the plan into *p ("all": every layer, whatever the memory). */
static void plan_member(const dctx *c, int mq, int slots, double limit, uint8_t *set,
                        ht_mem_plan *p) {
    const ht_plan_mem_in *in = c->in;
    ht_mem_desc d;
    ht_mem_desc_from_model(&d, in->m, mq, in->opt_states);
    ht_mem_desc_calibrated(&d, in->m, in->calib);
    const double lim = c->mode == HT_RECOMP_AUTO ? limit : 0;
    ht_mem_plan_rank(&d, c->t, c->fused, c->nc, c->lo, c->hi, mq, slots,
                     in->flexible ? 1 : slots, in->N, in->weight_versions, lim, set, p);
    if (c->mode == HT_RECOMP_ALL) {
        p->nrc = 0, p->extra_s = 0;
        for (int k = 0; k < c->nc; k++)
            for (int l = c->lo[k]; l < c->hi[k]; l++)
                set[l] = 1, p->nrc++, p->extra_s += mq * c->t[l];
        ht_mem_rank(&d, c->nc, c->lo, c->hi, mq, p->slots, in->weight_versions, set, &p->use);
    }
    ht_mem_desc_free(&d);
}

/* Of a group that fits: the member that the union `set` leaves closest to (or furthest past)
 * its limit, with `fewest` slots, into *p and *who. */
static void group_speaker(const dctx *c, int r0, int r1, int fewest, int most,
                          const uint8_t *set, ht_mem_plan *p, int *who) {
    const ht_plan_mem_in *in = c->in;
    double worst = -HUGE_VAL; /* without limits: the member with the most bytes */
    for (int r = r0; r < r1; r++) {
        ht_mem_desc d;
        ht_mem_desc_from_model(&d, in->m, in->grp->cnt[r], in->opt_states);
        ht_mem_use u;
        ht_mem_rank(&d, c->nc, c->lo, c->hi, in->grp->cnt[r], fewest, in->weight_versions, set,
                    &u);
        ht_mem_desc_free(&d);
        const double lim = limit_of(in, r), over = lim > 0 ? u.total - lim : u.total - 1e300;
        if (over > worst) {
            worst = over, *who = r;
            *p = (ht_mem_plan){.fits = 1, .slots = fewest, .max_slots = most, .use = u};
            for (int k = 0; k < c->nc; k++)
                for (int l = c->lo[k]; l < c->hi[k]; l++)
                    if (set[l]) p->nrc++, p->extra_s += in->grp->cnt[r] * c->t[l];
        }
    }
}

/* A group (schedule rank on pipeline ranks [r0, r1)): every member planned with its own
 * limit and samples; the union of their layers into set; *p the plan of the member that the
 * union leaves closest to (or furthest past) its limit, with the fewest slots any fits. *who:
 * that member, or the first that fits no plan. */
static void plan_group(const dctx *c, int r0, int r1, int slots, uint8_t *set, ht_mem_plan *p,
                       int *who) {
    uint8_t *mine = ht_xmalloc((size_t)(c->L ? c->L : 1));
    int fewest = slots, most = 1 << 30, bad = -1;
    for (int r = r0; r < r1; r++) {
        ht_mem_plan pr;
        memset(mine, 0, (size_t)c->L);
        plan_member(c, c->in->grp->cnt[r], slots, limit_of(c->in, r), mine, &pr);
        for (int l = 0; l < c->L; l++)
            set[l] |= mine[l];
        if (!pr.fits && bad < 0) bad = r, *p = pr;
        if (pr.slots < fewest) fewest = pr.slots;
        if (pr.max_slots < most) most = pr.max_slots;
    }
    free(mine);
    if (bad >= 0)
        *who = bad;
    else
        group_speaker(c, r0, r1, fewest, most, set, p, who);
}

static void alloc_decision(ht_plan_mem *d, int Q, int L, int mode) {
    ht_plan_mem_free(d);
    d->Q = Q, d->L = L, d->mode = mode;
    d->layers = ht_xcalloc((size_t)Q * (L ? L : 1), 1);
    d->any = ht_xcalloc((size_t)Q, 1);
    d->max_inflight = ht_xcalloc((size_t)Q, sizeof *d->max_inflight);
    d->plan = ht_xcalloc((size_t)Q, sizeof *d->plan);
    d->who = ht_xcalloc((size_t)Q, sizeof *d->who);
    d->chunks = ht_xcalloc((size_t)Q, sizeof *d->chunks);
}

int ht_plan_mem_decide(ht_plan_mem *d, ht_recompute mode, const ht_plan_mem_in *in, const char *where) {
    const ht_pipe_groups *g = in->grp;
    const int Q = g->Q, L = in->m->nlayers, grouped = ht_pipe_groups_replicated(g);
    alloc_decision(d, Q, L, mode);
    double *own = in->fwd ? NULL : flops_times(in->m, Q);
    const double *t = in->fwd ? in->fwd : own;
    uint8_t *fused = ht_xcalloc((size_t)(L ? L : 1), 1);
    for (int l = 1; l < L; l++)
        fused[l] = !ht_pipe_can_cut(in->m, l);
    int *lo = ht_xmalloc((size_t)2 * Q * in->v * sizeof *lo), *hi = lo + Q * in->v, rc = HT_OK;
    for (int q = 0; q < Q && rc == HT_OK; q++) {
        const dctx c = {in, mode, L, t + (size_t)q * L, fused, chunks_of(d, in, q, lo, hi), lo,
                        hi};
        uint8_t *set = d->layers + (size_t)q * L;
        ht_mem_plan *p = &d->plan[q];
        d->who[q] = g->first[q];
        if (grouped) /* a group: its tightest member speaks for it */
            plan_group(&c, g->first[q], g->first[q + 1], in->slots[q], set, p, &d->who[q]);
        else
            plan_member(&c, in->mb, in->slots[q], limit_of(in, q), set, p);
        d->any[q] = p->nrc > 0;
        d->max_inflight[q] = p->max_slots;
        if (mode == HT_RECOMP_AUTO && !p->fits)
            rc = infeasible(d, in, q, grouped ? g->cnt[d->who[q]] : in->mb, where);
    }
    free(lo), free(fused), free(own);
    if (rc != HT_OK) ht_plan_mem_free(d);
    return rc;
}
