/* The pipeline engine's side of the plan's memory decision: limits, report, validation
 * (see pipe_mem.h). */
#include "train/pipe_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "io/metrics.h"
#include "plan/job.h"



void ht_pipe_mem_init(ht_pipe_mem *pm, const ht_config *cfg, const ht_devinfo *dev, int world,
                      int P) {
    memset(pm, 0, sizeof *pm);
    pm->P = P, pm->world = world;
    pm->mode = cfg->pipe.recompute;
    pm->from_cfg = cfg->device.memory_mb > 0;
    ht_plan_needs(cfg, world, &pm->cal, &pm->cal1);
    struct {
        double limit;
        char name[128];
    } mine = {pm->from_cfg ? cfg->device.memory_mb * 1e6 : (double)dev->global_mem, ""}, *all;
    snprintf(mine.name, sizeof mine.name, "%s", dev->name);
    all = ht_xcalloc((size_t)world, sizeof *all);
    ht_comm_allgather(&mine, sizeof mine, all);
    pm->limit = ht_xcalloc((size_t)P, sizeof *pm->limit);
    pm->dev_rank = ht_xcalloc((size_t)P, sizeof *pm->dev_rank);
    pm->name = ht_xcalloc((size_t)world, sizeof *pm->name);
    for (int w = 0; w < world; w++) {
        memcpy(pm->name[w], all[w].name, sizeof pm->name[w]);
        int q = w % P; /* world rank = replica x P + pipeline rank */
        if (w < P || all[w].limit < pm->limit[q]) pm->limit[q] = all[w].limit, pm->dev_rank[q] = w;
    }
    free(all);
}

void ht_pipe_mem_free(ht_pipe_mem *pm) {
    free(pm->limit), free(pm->dev_rank), free(pm->name), free(pm->inflight);
    ht_plan_mem_free(&pm->dec);
    memset(pm, 0, sizeof *pm);
}

const double *ht_pipe_mem_part_limits(const ht_pipe_mem *pm) {
    return pm->mode == HT_RECOMP_AUTO || pm->from_cfg ? pm->limit : NULL;
}

void ht_pipe_mem_adopt(ht_pipe_mem *pm, ht_plan_mem *dec, int **inflight) {
    ht_plan_mem_move(&pm->dec, dec);
    free(pm->inflight);
    pm->inflight = *inflight, *inflight = NULL;
}

/* Schedule rank q's limit and the world rank of the device that sets it. */
static double limit_of(const ht_pipe_mem *pm, int q) { return pm->limit[pm->dec.who[q]]; }
static int dev_of(const ht_pipe_mem *pm, int q) { return pm->dev_rank[pm->dec.who[q]]; }

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
    const ht_plan_mem *d = &pm->dec;
    for (int q = 0; q < d->Q && rc == HT_OK; q++) {
        const ht_mem_plan *p = &d->plan[q];
        const int w = dev_of(pm, q);
        if (pm->mode != HT_RECOMP_AUTO && p->use.total > limit_of(pm, q) && pm->from_cfg)
            ht_log_warn("pipeline rank %d: predicted %.2f MB exceeds its limit of %.2f MB "
                        "(device.memory_mb) with pipe.recompute \"%s\"; \"auto\" would plan "
                        "for it",
                        q, p->use.total / 1e6, limit_of(pm, q) / 1e6,
                        ht_recompute_names[pm->mode]);
        char layers[256];
        layer_list(layers, sizeof layers, d->layers + (size_t)q * d->L, d->L);
        ht_log_info("memory: pipeline rank %d (%s): predicted %.2f MB of its %.2f MB limit%s "
                    "(weights, gradients and optimizer %.2f MB, activations and workspace "
                    "%.2f MB), layers %s, %d micro-batch(es) in flight (room for %d); %s%s%s",
                    q, pm->name[w], p->use.total / 1e6, limit_of(pm, q) / 1e6,
                    pm->from_cfg ? " (device.memory_mb)" : "", p->use.state / 1e6,
                    (p->use.acts + p->use.live + p->use.work) / 1e6, d->chunks[q], p->slots,
                    p->max_slots, p->nrc ? "recomputes layers " : "no recomputation", layers,
                    pm->mode == HT_RECOMP_AUTO ? "" : " (pipe.recompute)");
        if (metrics)
            rc = ht_metrics_write(metrics,
                                  "type=%s rank=%d device=%s predicted_bytes=%g limit_bytes=%g "
                                  "state_bytes=%g activation_bytes=%g slots=%d max_inflight=%d "
                                  "recompute=%s recompute_s_per_mbatch=%g",
                                  "pipe_memory", q, pm->name[w], p->use.total, limit_of(pm, q),
                                  p->use.state, p->use.acts + p->use.live + p->use.work, p->slots,
                                  p->max_slots, layers, p->extra_s);
    }
    return rc;
}

/* ---------------------------------------------------------------- validation */

int ht_pipe_mem_validate(ht_pipe_mem *pm, const ht_model *m, ht_dev *dev, int kind, int v,
                         const int *bounds, int built, int mb, int prank, int nslot,
                         int opt_states, int weight_versions, ht_metrics *metrics) {
    const ht_plan_mem *dec = &pm->dec;
    const int L = dec->L;
    ht_mem_desc d, dB;
    ht_mem_desc_from_model(&d, m, mb, opt_states);
    ht_mem_desc_from_model(&dB, m, built, opt_states);
    ht_mem_desc_calibrated(&d, m, pm->cal ? built : pm->cal1 ? 1 : 0); /* at the micro-batch */
    int *lo = ht_xmalloc((size_t)2 * dec->Q * v * sizeof *lo), *hi = lo + dec->Q * v;
    const int nc = ht_plan_mem_chunks(kind, dec->Q, v, bounds, prank, lo, hi);
    const uint8_t *rc = dec->layers + (size_t)prank * L;
    ht_mem_exec_use e;
    (pm->local ? ht_mem_executor_local : ht_mem_executor)(&d, &dB, built, mb, m->rows, nc, lo, hi,
                                                           nslot, weight_versions, rc, &e);
    free(lo);
    ht_mem_desc_free(&d), ht_mem_desc_free(&dB);
    uint64_t now, peak, gemm;
    ht_dev_mem(dev, &now, &peak, &gemm, 0);
    /* per rank: pipeline rank, peak, GEMM workspace, predicted total less the workspace and
     * its parts, the stage plan, the predicted workspace */
    enum { F = 9 };
    double mine[F] = {prank,   (double)peak, (double)gemm, e.total - e.gemm,          e.model,
                      e.slots + e.work, e.versions, dec->plan[prank].use.total, e.gemm};
    double *all = ht_xmalloc((size_t)pm->world * F * sizeof *all);
    ht_comm_allgather(mine, sizeof mine, all);
    int rc2 = HT_OK;
    for (int r = 0; ht_comm_rank() == 0 && r < pm->world && rc2 == HT_OK; r++) {
        const double *a = all + (size_t)r * F;
        const double held = a[1] - a[2], err = held > 0 ? (a[3] - held) / held : 0;
        const double etot = a[1] > 0 ? (a[3] + a[8] - a[1]) / a[1] : 0;
        ht_log_info("memory: rank %d (pipeline rank %d): allocated %.3f MB at peak, %.3f MB of "
                    "it the tiled GEMM's packing (predicted %.3f); predicted %.3f MB for the rest "
                    "(the model as built %.3f, pipeline slots and work set %.3f, 2bw %.3f): "
                    "error %+.2f%%, %+.2f%% with the packing; the stage plan that decides "
                    "recomputation: %.3f MB; limit %.2f MB (%s)",
                    r, (int)a[0], a[1] / 1e6, a[2] / 1e6, a[8] / 1e6, a[3] / 1e6, a[4] / 1e6,
                    a[5] / 1e6, a[6] / 1e6, 100 * err, 100 * etot, a[7] / 1e6,
                    limit_of(pm, (int)a[0]) / 1e6,
                    pm->from_cfg ? "device.memory_mb" : "the device's reported memory");
        if (a[1] > limit_of(pm, (int)a[0]))
            ht_log_warn("memory: rank %d allocated %.3f MB, more than its limit of %.2f MB%s: "
                        "the limit bounds the stage plan (%.3f MB); the model's own "
                        "buffers on this rank took %.3f MB (the whole model unless the rank "
                        "holds only its stage)",
                        r, a[1] / 1e6, limit_of(pm, (int)a[0]) / 1e6,
                        pm->from_cfg ? " (device.memory_mb)" : "", a[7] / 1e6, a[4] / 1e6);
        /* predicted_bytes leaves the packing out (compared with the peak less the measured
         * packing); predicted_gemm_bytes is the packing predicted */
        if (metrics)
            rc2 = ht_metrics_write(metrics,
                                   "type=%s rank=%d prank=%d allocated_peak_bytes=%g "
                                   "gemm_workspace_bytes=%g predicted_bytes=%g "
                                   "predicted_model_bytes=%g predicted_pipeline_bytes=%g "
                                   "predicted_2bw_bytes=%g error=%g plan_bytes=%g "
                                   "limit_bytes=%g predicted_gemm_bytes=%g",
                                   "pipe_memory_measured", r, (int)a[0], a[1], a[2], a[3], a[4],
                                   a[5], a[6], err, a[7], limit_of(pm, (int)a[0]), a[8]);
    }
    free(all);
    return rc2;
}
