/* The cost model's costs for the plan phase (sim/calib.h). */
#include "sim/calib.h"

#include <stdlib.h>

#include "core/err.h"
#include "plan/exec_mem.h"
#include "plan/zero_mem.h"
#include "plan/pipe_plan.h"

double *ht_sim_calibration(const ht_sim_cluster *c, const ht_sim_model *sm, int n, int samples) {
    const int L = sm->nlayers;
    double *cal = ht_xmalloc((size_t)n * 2 * (size_t)(L ? L : 1) * sizeof *cal);
    for (int r = 0; r < n; r++)
        for (int l = 0; l < L; l++) {
            cal[(size_t)r * 2 * L + l] = ht_sim_layer_time(c, r, sm, l, samples, 0);
            cal[(size_t)r * 2 * L + L + l] = ht_sim_layer_time(c, r, sm, l, samples, 1);
        }
    return cal;
}

int ht_sim_job_plan(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_model *m,
                    const ht_config *cfg, int n, ht_plan *plan) {
    int need, need1;
    ht_plan_needs(cfg, n, &need, &need1);
    const int D = cfg->pipe.stages > 0 ? cfg->pipe.stages : 1;
    const int N = cfg->pipe.micro_batches > 0 ? cfg->pipe.micro_batches : 1;
    const int mb = n >= D ? cfg->train.batch / (n / D * N) : 1;
    int host[HT_PART_MAX_RANKS], alternating; /* as the trainer gathers them */
    /* device.memory_mb: every rank's limit, as the trainer sets it (without it the trainer
     * reads its devices' memory, which the cost model's devices do not bound) */
    double *limit = NULL;
    if (cfg->device.memory_mb > 0) {
        limit = ht_xmalloc((size_t)D * sizeof *limit);
        for (int q = 0; q < D; q++)
            limit[q] = cfg->device.memory_mb * 1e6;
    }
    ht_plan_cluster cl = {.world = n,
                          .host = D <= HT_PART_MAX_RANKS && D <= n
                                      ? ht_pipe_plan_hosts(c->rank_host, D, host, &alternating)
                                      : NULL,
                          .mem_limit = limit,
                          .allow_recompute = limit && cfg->pipe.recompute ==
                                                         HT_RECOMP_AUTO,
                          .dev_limit = limit};
    ht_plan_costs k = {.cal = need ? ht_sim_calibration(c, sm, n, mb) : NULL,
                       .cal1 = need1 ? ht_sim_calibration(c, sm, n, 1) : NULL,
                       .opt_states = sm->optim_state_floats};
    int rc = ht_plan_job(cfg, m, &cl, &k, plan);
    free((void *)k.cal), free((void *)k.cal1), free(limit);
    return rc;
}

void ht_sim_plan_bytes(const ht_config *cfg, const ht_model *m, const ht_sim_model *sm,
                       const ht_plan *plan, const ht_pipe_sched *s, int n, double *bytes) {
    for (int q = 0; q < plan->pp.D; q++) {
        double b = ht_plan_exec_bytes(cfg, m, plan, s, sm->optim_state_floats, n, q);
        if (plan->mem.plan && plan->mem.plan[q].use.total > b) b = plan->mem.plan[q].use.total;
        bytes[q] = b;
    }
}

void ht_sim_dp_memory(const ht_sim_cluster *c, const ht_config *cfg, const ht_model *m,
                      const ht_sim_model *sm, int n, size_t *cut, double *bytes) {
    double *w = ht_xmalloc((size_t)n * sizeof *w);
    int known = 1;
    for (int r = 0; r < n; r++) {
        w[r] = cfg->device.memory_mb > 0 ? cfg->device.memory_mb
                                         : c->types[c->rank_type[r]].mem_gb * 1e3;
        known &= w[r] > 0;
    }
    for (int r = 0; r < n && !known; r++)
        w[r] = 1;
    ht_plan_shard_cuts(m->nparams, w, n, cut);
    for (int r = 0; r < n; r++)
        bytes[r] = ht_plan_dp_rank_bytes(cfg, m, cfg->train.batch, sm->optim_state_floats, n, w,
                                         r, NULL, NULL);
    free(w);
}
