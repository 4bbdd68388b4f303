/* Memory-driven recomputation and in-flight limits for the pipeline engine (see pipe_mem.h). */
#include "train/pipe_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "io/metrics.h"
#include "plan/bounds.h"
#include "pipe/schedule.h"

/* ---------------------------------------------------------------- limits */

void ht_pipe_mem_init(ht_pipe_mem *pm, const ht_config *cfg, const ht_devinfo *dev, int world,
                      int D, int L) {
    memset(pm, 0, sizeof *pm);
    pm->D = D, pm->L = L, pm->world = world;
    pm->mode = !strcmp(cfg->pipe.recompute, "none")  ? HT_PIPE_MEM_NONE
               : !strcmp(cfg->pipe.recompute, "all") ? HT_PIPE_MEM_ALL
                                                     : HT_PIPE_MEM_AUTO;
    pm->from_cfg = cfg->device.memory_mb > 0;
    struct {
        double limit;
        char name[128];
    } mine = {pm->from_cfg ? cfg->device.memory_mb * 1e6 : (double)dev->global_mem, ""}, *all;
    snprintf(mine.name, sizeof mine.name, "%s", dev->name);
    all = ht_xcalloc((size_t)world, sizeof *all);
    ht_comm_allgather(&mine, sizeof mine, all);
    pm->limit = ht_xcalloc((size_t)D, sizeof *pm->limit);
    pm->dev_rank = ht_xcalloc((size_t)D, sizeof *pm->dev_rank);
    pm->name = ht_xcalloc((size_t)world, sizeof *pm->name);
    for (int w = 0; w < world; w++) {
        memcpy(pm->name[w], all[w].name, sizeof pm->name[w]);
        int q = w % D; /* world rank = replica x D + pipeline rank */
        if (w < D || all[w].limit < pm->limit[q]) pm->limit[q] = all[w].limit, pm->dev_rank[q] = w;
    }
    free(all);
    pm->layers = ht_xcalloc((size_t)D * (L ? L : 1), 1);
    pm->any = ht_xcalloc((size_t)D, 1);
    pm->max_inflight = ht_xcalloc((size_t)D, sizeof *pm->max_inflight);
    pm->plan = ht_xcalloc((size_t)D, sizeof *pm->plan);
    pm->chunks = ht_xcalloc((size_t)D, sizeof *pm->chunks);
}

void ht_pipe_mem_free(ht_pipe_mem *pm) {
    free(pm->limit), free(pm->dev_rank), free(pm->name), free(pm->layers), free(pm->any);
    free(pm->max_inflight), free(pm->plan), free(pm->chunks);
    free(pm->gfirst), free(pm->rlimit), free(pm->rdev), free(pm->rcnt);
    memset(pm, 0, sizeof *pm);
}

void ht_pipe_mem_regroup(ht_pipe_mem *pm, int Q, const int *first, const int *cnt) {
    const int P = first[Q];
    pm->gfirst = ht_xmalloc((size_t)(Q + 1) * sizeof *pm->gfirst);
    memcpy(pm->gfirst, first, (size_t)(Q + 1) * sizeof *first);
    pm->rlimit = ht_xmalloc((size_t)P * sizeof *pm->rlimit);
    pm->rdev = ht_xmalloc((size_t)P * sizeof *pm->rdev);
    pm->rcnt = ht_xmalloc((size_t)P * sizeof *pm->rcnt);
    memcpy(pm->rlimit, pm->limit, (size_t)P * sizeof *pm->rlimit);
    memcpy(pm->rdev, pm->dev_rank, (size_t)P * sizeof *pm->rdev);
    memcpy(pm->rcnt, cnt, (size_t)P * sizeof *pm->rcnt);
    for (int q = 0; q < Q; q++) { /* until a decision names the tightest member */
        int best = first[q];
        for (int r = first[q]; r < first[q + 1]; r++)
            if (pm->rlimit[r] < pm->rlimit[best]) best = r;
        pm->limit[q] = pm->rlimit[best], pm->dev_rank[q] = pm->rdev[best];
    }
    pm->D = Q;
}

const double *ht_pipe_mem_part_limits(const ht_pipe_mem *pm) {
    return pm->mode == HT_PIPE_MEM_AUTO || pm->from_cfg ? pm->limit : NULL;
}

/* ---------------------------------------------------------------- the decision */

/* The layer ranges pipeline rank q holds (both of Chimera's directions), into lo/hi and as
 * text; returns their count. */
static int chunks_of(ht_pipe_mem *pm, int q, int kind, int v, const int *bounds, int *lo, int *hi) {
    const int S = pm->D * v, ndir = ht_pipe_kind_has(kind, HT_PIPE_F_TWO_WAY) ? 2 : 1;
    int n = 0;
    size_t k = 0;
    for (int s = 0; s < S; s++)
        for (int dir = 0; dir < ndir; dir++)
            if (ht_pipe_stage_rank(kind, pm->D, v, dir, s) == q) {
                lo[n] = bounds[s], hi[n] = bounds[s + 1];
                if (k + 16 < sizeof pm->chunks[q])
                    k += (size_t)snprintf(pm->chunks[q] + k, sizeof pm->chunks[q] - k, "%s%d-%d",
                                          n ? "," : "", lo[n], hi[n] - 1);
                n++;
            }
    return n;
}

static int infeasible(const ht_pipe_mem *pm, int q, int mb, const char *where) {
    const ht_mem_plan *p = &pm->plan[q];
    const int w = pm->dev_rank[q];
    return ht_error(HT_EINPUT,
                    "%s: key 'device.memory_mb': no plan fits rank %d's device \"%s\" (limit "
                    "%.2f MB, %s): layers %s with %d micro-batch(es) of %d samples in flight "
                    "need at least %.2f MB%s (weights, gradients and optimizer %.2f MB, "
                    "activations and workspace %.2f MB): short by %.2f MB; raise "
                    "device.memory_mb, use more stages or smaller micro-batches",
                    where, w, pm->name[w], pm->limit[q] / 1e6,
                    pm->from_cfg ? "device.memory_mb" : "its reported global memory", pm->chunks[q],
                    p->slots, mb, p->use.total / 1e6,
                    p->nrc ? " with every layer that frees memory recomputed" : "",
                    p->use.state / 1e6, (p->use.acts + p->use.live + p->use.work) / 1e6,
                    (p->use.total - pm->limit[q]) / 1e6);
}

/* Forward seconds per sample from FLOPs (only their ratios matter to the choice). */
static double *flops_times(const ht_model *m, int D) {
    const int L = m->nlayers;
    double *f = ht_xmalloc((size_t)D * (L ? L : 1) * sizeof *f);
    for (int q = 0; q < D; q++)
        for (int l = 0; l < L; l++)
            f[q * L + l] = ht_layer_flops_forward(&m->layers[l]) * 1e-9;
    return f;
}

/* What a decision shares between ranks: the model, per-layer forward seconds, fused pairs,
 * the chunks of the schedule rank being planned. */
typedef struct dctx {
    const ht_pipe_mem *pm;
    const ht_model *m;
    const double *t; /* [L] seconds per sample of the schedule rank's layers */
    const uint8_t *fused;
    int nc;
    const int *lo, *hi;
    int N, flexible, opt_states, wv;
} dctx;

/* One rank's plan at mq samples a micro-batch and `slots` in flight against limit (auto):
 * recomputed layers into set, the plan into *p ("all": every layer, whatever the memory). */
static void plan_member(const dctx *c, int mq, int slots, double limit, uint8_t *set,
                        ht_mem_plan *p) {
    ht_mem_desc d;
    ht_mem_desc_from_model(&d, c->m, mq, c->opt_states);
    const double lim = c->pm->mode == HT_PIPE_MEM_AUTO ? limit : 0;
    ht_mem_plan_rank(&d, c->t, c->fused, c->nc, c->lo, c->hi, mq, slots,
                     c->flexible ? 1 : slots, c->N, c->wv, lim, set, p);
    if (c->pm->mode == HT_PIPE_MEM_ALL) {
        p->nrc = 0, p->extra_s = 0;
        for (int k = 0; k < c->nc; k++)
            for (int l = c->lo[k]; l < c->hi[k]; l++)
                set[l] = 1, p->nrc++, p->extra_s += mq * c->t[l];
        ht_mem_rank(&d, c->nc, c->lo, c->hi, mq, p->slots, c->wv, set, &p->use);
    }
    ht_mem_desc_free(&d);
}

/* A group (schedule rank q on pipeline ranks [r0, r1)): every member planned with its own
 * limit and samples; the union of their layers into set; *p the plan of the member that the
 * union leaves closest to (or furthest past) its limit, with the fewest slots any fits. *who:
 * that member, or the first that fits no plan. */
static void plan_group(const dctx *c, int r0, int r1, int slots, uint8_t *set, ht_mem_plan *p,
                       int *who) {
    const ht_pipe_mem *pm = c->pm;
    uint8_t *mine = ht_xmalloc((size_t)(pm->L ? pm->L : 1));
    int fewest = slots, most = 1 << 30, bad = -1;
    for (int r = r0; r < r1; r++) {
        ht_mem_plan pr;
        memset(mine, 0, (size_t)pm->L);
        plan_member(c, pm->rcnt[r], slots, pm->rlimit[r], mine, &pr);
        for (int l = 0; l < pm->L; l++)
            set[l] |= mine[l];
        if (!pr.fits && bad < 0) bad = r, *p = pr;
        if (pr.slots < fewest) fewest = pr.slots;
        if (pr.max_slots < most) most = pr.max_slots;
    }
    free(mine);
    if (bad >= 0) {
        *who = bad;
        return;
    }
    double worst = -1e300;
    for (int r = r0; r < r1; r++) {
        ht_mem_desc d;
        ht_mem_desc_from_model(&d, c->m, pm->rcnt[r], c->opt_states);
        ht_mem_use u;
        ht_mem_rank(&d, c->nc, c->lo, c->hi, pm->rcnt[r], fewest, c->wv, set, &u);
        ht_mem_desc_free(&d);
        const double over = pm->rlimit[r] > 0 ? u.total - pm->rlimit[r] : u.total - 1e300;
        if (over > worst) {
            worst = over, *who = r;
            *p = (ht_mem_plan){.fits = 1, .slots = fewest, .max_slots = most, .use = u};
            for (int k = 0; k < c->nc; k++)
                for (int l = c->lo[k]; l < c->hi[k]; l++)
                    if (set[l]) p->nrc++, p->extra_s += pm->rcnt[r] * c->t[l];
        }
    }
}

int ht_pipe_mem_decide(ht_pipe_mem *pm, const ht_model *m, int kind, int v, const int *bounds,
                       int mb, int N, const int *slots, int flexible, int opt_states,
                       int weight_versions, const double *fwd, const char *where) {
    const int D = pm->D, L = pm->L;
    double *own = fwd ? NULL : flops_times(m, D);
    const double *t = fwd ? fwd : own;
    uint8_t *fused = ht_xcalloc((size_t)(L ? L : 1), 1);
    for (int l = 1; l < L; l++)
        fused[l] = !ht_pipe_can_cut(m, l);
    int *lo = ht_xmalloc((size_t)2 * D * v * sizeof *lo), *hi = lo + D * v, rc = HT_OK;
    memset(pm->layers, 0, (size_t)D * L);
    for (int q = 0; q < D && rc == HT_OK; q++) {
        const dctx c = {pm, m, t + (size_t)q * L, fused, chunks_of(pm, q, kind, v, bounds, lo, hi),
                        lo, hi, N, flexible, opt_states, weight_versions};
        uint8_t *set = pm->layers + (size_t)q * L;
        ht_mem_plan *p = &pm->plan[q];
        int mq = mb;
        if (pm->gfirst) { /* a group: its tightest member speaks for it */
            int who = pm->gfirst[q];
            plan_group(&c, pm->gfirst[q], pm->gfirst[q + 1], slots[q], set, p, &who);
            pm->limit[q] = pm->rlimit[who], pm->dev_rank[q] = pm->rdev[who], mq = pm->rcnt[who];
        } else {
            plan_member(&c, mb, slots[q], pm->limit[q], set, p);
        }
        pm->any[q] = p->nrc > 0;
        pm->max_inflight[q] = p->max_slots;
        if (pm->mode == HT_PIPE_MEM_AUTO && !p->fits)
            rc = infeasible(pm, q, mq, where);
        else if (pm->mode != HT_PIPE_MEM_AUTO && p->use.total > pm->limit[q] && pm->from_cfg &&
                 ht_comm_rank() == 0)
            ht_log_warn("pipeline rank %d: predicted %.2f MB exceeds its limit of %.2f MB "
                        "(device.memory_mb) with pipe.recompute \"%s\"; \"auto\" would plan "
                        "for it",
                        q, p->use.total / 1e6, pm->limit[q] / 1e6,
                        pm->mode == HT_PIPE_MEM_NONE ? "none" : "all");
    }
    free(lo), free(fused), free(own);
    return rc;
}

/* ---------------------------------------------------------------- report */

static void layer_list(char *buf, size_t n, const uint8_t *set, int L) {
    size_t k = 0;
    buf[0] = 0;
    for (int l = 0; l < L && k + 8 < n; l++)
        if (set[l]) k += (size_t)snprintf(buf + k, n - k, "%s%d", k ? "," : "", l);
}

int ht_pipe_mem_report(const ht_pipe_mem *pm, const ht_model *m, ht_metrics *metrics) {
    (void)m;
    int rc = HT_OK;
    for (int q = 0; q < pm->D && rc == HT_OK; q++) {
        const ht_mem_plan *p = &pm->plan[q];
        const int w = pm->dev_rank[q];
        char layers[256];
        layer_list(layers, sizeof layers, pm->layers + (size_t)q * pm->L, pm->L);
        ht_log_info("memory: pipeline rank %d (%s): predicted %.2f MB of its %.2f MB limit%s "
                    "(weights, gradients and optimizer %.2f MB, activations and workspace "
                    "%.2f MB), layers %s, %d micro-batch(es) in flight (room for %d); %s%s%s",
                    q, pm->name[w], p->use.total / 1e6, pm->limit[q] / 1e6,
                    pm->from_cfg ? " (device.memory_mb)" : "", p->use.state / 1e6,
                    (p->use.acts + p->use.live + p->use.work) / 1e6, pm->chunks[q], p->slots,
                    p->max_slots, p->nrc ? "recomputes layers " : "no recomputation", layers,
                    pm->mode == HT_PIPE_MEM_AUTO ? "" : " (pipe.recompute)");
        if (metrics)
            rc = ht_metrics_write(metrics,
                                  "type=%s rank=%d device=%s predicted_bytes=%g limit_bytes=%g "
                                  "state_bytes=%g activation_bytes=%g slots=%d max_inflight=%d "
                                  "recompute=%s recompute_s_per_mbatch=%g",
                                  "pipe_memory", q, pm->name[w], p->use.total, pm->limit[q],
                                  p->use.state, p->use.acts + p->use.live + p->use.work, p->slots,
                                  p->max_slots, layers, p->extra_s);
    }
    return rc;
}

/* ---------------------------------------------------------------- validation */

int ht_pipe_mem_validate(ht_pipe_mem *pm, const ht_model *m, ht_dev *dev, int kind, int v,
                         const int *bounds, int built, int mb, int prank, int nslot,
                         int opt_states, int weight_versions, ht_metrics *metrics) {
    const int L = pm->L;
    ht_mem_desc d, dB;
    ht_mem_desc_from_model(&d, m, mb, opt_states);
    ht_mem_desc_from_model(&dB, m, built, opt_states);
    int *lo = ht_xmalloc((size_t)2 * pm->D * v * sizeof *lo), *hi = lo + pm->D * v;
    const int nc = chunks_of(pm, prank, kind, v, bounds, lo, hi);
    const uint8_t *rc = pm->layers + (size_t)prank * L;
    ht_mem_exec_use e;
    ht_mem_executor(&d, &dB, built, mb, m->rows, nc, lo, hi, nslot, weight_versions, rc, &e);
    free(lo);
    ht_mem_desc_free(&d), ht_mem_desc_free(&dB);
    uint64_t now, peak, gemm;
    ht_dev_mem(dev, &now, &peak, &gemm, 0);
    /* per rank: pipeline rank, peak, GEMM workspace, predicted total and its parts */
    enum { F = 8 };
    double mine[F] = {prank, (double)peak, (double)gemm, e.total, e.model, e.slots + e.work,
                      e.versions, pm->plan[prank].use.total};
    double *all = ht_xmalloc((size_t)pm->world * F * sizeof *all);
    ht_comm_allgather(mine, sizeof mine, all);
    int rc2 = HT_OK;
    for (int r = 0; ht_comm_rank() == 0 && r < pm->world && rc2 == HT_OK; r++) {
        const double *a = all + (size_t)r * F;
        const double held = a[1] - a[2], err = held > 0 ? (a[3] - held) / held : 0;
        ht_log_info("memory: rank %d (pipeline rank %d): allocated %.3f MB at peak, %.3f MB of "
                    "it the tiled GEMM's packing (not modelled); predicted %.3f MB for the rest "
                    "(the model as built %.3f, pipeline slots and work set %.3f, 2bw %.3f): "
                    "error %+.2f%%; the stage plan that decides recomputation: %.3f MB; "
                    "limit %.2f MB (%s)",
                    r, (int)a[0], a[1] / 1e6, a[2] / 1e6, a[3] / 1e6, a[4] / 1e6, a[5] / 1e6,
                    a[6] / 1e6, 100 * err, a[7] / 1e6, pm->limit[(int)a[0]] / 1e6,
                    pm->from_cfg ? "device.memory_mb" : "the device's reported memory");
        if (a[1] > pm->limit[(int)a[0]])
            ht_log_warn("memory: rank %d allocated %.3f MB, more than its limit of %.2f MB%s: "
                        "the limit bounds the stage plan (%.3f MB), while every rank also "
                        "holds the whole model as built: every layer for a micro-batch (%.3f MB)",
                        r, a[1] / 1e6, pm->limit[(int)a[0]] / 1e6,
                        pm->from_cfg ? " (device.memory_mb)" : "", a[7] / 1e6, a[4] / 1e6);
        if (metrics)
            rc2 = ht_metrics_write(metrics,
                                   "type=%s rank=%d prank=%d allocated_peak_bytes=%g "
                                   "gemm_workspace_bytes=%g predicted_bytes=%g "
                                   "predicted_model_bytes=%g predicted_pipeline_bytes=%g "
                                   "predicted_2bw_bytes=%g error=%g plan_bytes=%g "
                                   "limit_bytes=%g",
                                   "pipe_memory_measured", r, (int)a[0], a[1], a[2], a[3], a[4],
                                   a[5], a[6], err, a[7], pm->limit[(int)a[0]]);
    }
    free(all);
    return rc2;
}
