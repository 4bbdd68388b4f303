/* Start-up without the whole model (issue 24): when the pipeline's cut follows from the
 * config and the model's description alone (pipe.partition uniform or balanced, or
 * pipe.boundaries; no stage times to measure), a rank knows its stage before anything is
 * allocated. Its model is then attached as that stage only (parameters, gradients,
 * activations); setup initialises the window with the one-process values (counter-based
 * draws), the optimizer is made over it and --resume loads only its part of the checkpoint,
 * so no device buffer of the whole model ever exists and the measured peak covers start-up.
 * Otherwise (hepipe and the hetero cut time every layer first; interleaved, chimera and zb-v
 * run several stages a rank; a tied head, pipe.rebalance, replicated stages, model.init_from)
 * the whole model is built and pipe_local.c narrows it after the plan. */
#include <stdlib.h>

#include "config/modes.h"
#include "pipe/schedule.h"
#include "plan/bounds.h"
#include "plan/job.h"
#include "train/engine_pipe.h"

/* 1 when this job's cut and this rank's single stage are known before the plan. */
static int known_early(const ht_job *j) {
    const ht_config *cfg = j->cfg;
    const int k = cfg->pipe.schedule;
    int cal, cal1;
    ht_plan_needs(cfg, j->world, &cal, &cal1);
    const int one_stage = k == HT_PIPE_GPIPE || k == HT_PIPE_1F1B || k == HT_PIPE_2BW ||
                          k == HT_PIPE_ZBH1;
    return one_stage && !cal && !cal1 && cfg->pipe.partition != HT_PART_HETERO &&
           !cfg->pipe.nstage_ranks && !cfg->pipe.replicate && !cfg->pipe.rebalance &&
           !cfg->model.tie_embeddings && !cfg->model.init_from[0] &&
           cfg->cluster.shard == HT_SHARD_NONE && j->world % cfg->pipe.stages == 0;
}

int ht_pipe_start_window(ht_job *j, const ht_model *m, size_t *pbase, size_t *pres, int *lo,
                         int *hi) {
    const ht_config *cfg = j->cfg;
    const int D = cfg->pipe.stages;
    if (!known_early(j) || m->tied) return 0;
    int *b = ht_xmalloc((size_t)(D + 1) * sizeof *b);
    int rc = cfg->pipe.nboundaries
                 ? ht_pipe_bounds_explicit(m, cfg->pipe.boundaries, D - 1, "pipe", b)
                 : ht_pipe_bounds(m, D, cfg->pipe.partition == HT_PART_BALANCED ? HT_PIPE_BALANCED
                                                                             : HT_PIPE_UNIFORM,
                                  b);
    int s = -1; /* the stage the schedule puts on this rank's pipeline rank */
    for (int t = 0; rc == HT_OK && t < D; t++)
        if (ht_pipe_stage_rank(cfg->pipe.schedule, D, 1, 0, t) == j->rank % D) s = t;
    if (s < 0) { /* the plan reports a bad cut itself */
        free(b);
        return 0;
    }
    *lo = b[s], *hi = b[s + 1];
    free(b);
    size_t a = 0, e = 0;
    int any = 0;
    for (int i = *lo; i < *hi; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) a = l->woff;
        e = l->woff + l->nparams, any = 1;
    }
    *pbase = any ? a : 0, *pres = any ? e - a : 0;
    return 1;
}
