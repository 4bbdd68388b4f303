/* Start-up without the whole model (issue 24): when the pipeline's cut follows from the
 * config and the model's description alone (pipe.partition uniform or balanced, or
 * pipe.boundaries; no stage times to measure), a rank knows its stage before anything is
 * allocated. Its model is then attached as that stage only (parameters, gradients,
 * activations); setup initialises the window with the one-process values (counter-based
 * draws), the optimizer is made over it and --resume loads only its part of the checkpoint,
 * so no device buffer of the whole model ever exists and the measured peak covers start-up.
 * Where the plan decides the cut (hepipe and the hetero cut time every layer first, replicated
 * stages), a rank starts with no parameters at all: the calibration times each layer in
 * buffers of its own (pipe_calib_win.c), and after the plan ht_pipe_start_chunks allocates the
 * stage, initialises it and loads the checkpoint's part (--resume, with no window yet, read
 * only the checkpoint's headers and kept the files open in j->eng.ckpt: the headers are read
 * once; train/checkpoint.c reads a rank's ranges). Ranks of
 * interleaved, chimera and zb-v run several stages (chunks) each: they start the same way and
 * after the plan allocate one parameter window per chunk (nn: ht_model_attach_chunks).
 * Otherwise (a sharded optimizer) the whole model is built and pipe_local.c narrows it after
 * the plan, or keeps it. pipe.rebalance on the hetero cut starts as the hetero cut does, and a
 * new cut moves each rank's window (pipe_repart.c). A tied GPT's rank that runs the head but
 * not the embedding holds a copy of wte as one more window (nn: ht_model_chunk_windows; its
 * gradient is summed with the first stage's, train/pipe_tied.h); model.init_from fills only
 * the windows. */
#include <stdlib.h>

#include "config/modes.h"
#include "pipe/schedule.h"
#include "plan/bounds.h"
#include "plan/job.h"
#include "train/checkpoint.h"
#include "train/engine_pipe.h"
#include "train/init_from.h"

/* 1 when every rank of this job may hold only its stages (one, or several: interleaved's
 * chunks, Chimera's two directions, zb-v's V), allocated after the plan; 2 when, besides, a
 * rank runs one stage and the cut and its stage follow from the config and the description
 * (allocated now). */
static int stage_only(const ht_job *j) {
    const ht_config *cfg = j->cfg;
    const int k = cfg->pipe.schedule;
    int cal, cal1;
    ht_plan_needs(cfg, j->world, &cal, &cal1);
    const int several = k == HT_PIPE_INTERLEAVED || k == HT_PIPE_CHIMERA || k == HT_PIPE_ZBV;
    const int kinds = k == HT_PIPE_GPIPE || k == HT_PIPE_1F1B || k == HT_PIPE_2BW ||
                      k == HT_PIPE_ZBH1 || k == HT_PIPE_HEPIPE || several;
    /* pipe.rebalance (the hetero cut) moves a rank's window with its stage (pipe_repart.c);
     * a model holds at most HT_MODEL_MAX_CHUNKS chunks */
    if (!kinds || (k == HT_PIPE_INTERLEAVED && cfg->pipe.chunks > HT_MODEL_MAX_CHUNKS) ||
        cfg->cluster.shard != HT_SHARD_NONE || j->world % cfg->pipe.stages)
        return 0;
    return 1 + (!several && !cal && !cal1 && k != HT_PIPE_HEPIPE &&
                cfg->pipe.partition != HT_PART_HETERO && !cfg->pipe.nstage_ranks &&
                !cfg->pipe.replicate);
}

int ht_pipe_start_window(ht_job *j, const ht_model *m, size_t *pbase, size_t *pres, int *lo,
                         int *hi) {
    const ht_config *cfg = j->cfg;
    const int D = cfg->pipe.stages;
    const int how = stage_only(j);
    if (how == 1) { /* nothing yet: ht_pipe_start_chunks after the plan */
        *pbase = *pres = 0, *lo = *hi = 0;
        return 2;
    }
    if (how != 2) return 0;
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
        *pbase = *pres = 0, *lo = *hi = 0;
        return 2;
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
    *pbase = any ? a : 0, *pres = any ? e - a : 0; /* (a tied head's wte: one more window) */
    return 1;
}

/* The stage's values, the optimizer over the resident windows and, on --resume, the
 * checkpoint's part of them. */
static int start_state(ht_job *j) {
    ht_model *m = &j->model;
    ht_model_init_params(m, j->cfg->train.seed);
    int rc = ht_job_init_from(j);
    if (rc != HT_OK) return rc;
    ht_optim o; /* the same optimizer over the windows (its state is still empty) */
    ht_optim_init(&o, j->dev, &j->opt.cfg, m->pres);
    o.t = j->opt.t, o.track_norm = j->opt.track_norm;
    ht_optim_free(&j->opt);
    j->opt = o;
    j->eng.windowed = 1;
    if (!j->eng.resumed) return HT_OK;
    /* the same checkpoint, opened at --resume (train.c: headers read once), now its windows'
     * ranges; the step was read then */
    int64_t step = 0;
    ht_st_file *f = j->eng.ckpt;
    j->eng.ckpt = NULL;
    if (!f) rc = ht_checkpoint_open(&f, j->cfg->checkpoint.path);
    if (rc == HT_OK)
        rc = ht_checkpoint_load_from(f, j->cfg->checkpoint.path, m, &j->opt, &step,
                                     j->cfg->optim.type);
    ht_st_close(f);
    if (rc == HT_OK && step != j->start)
        rc = ht_error(HT_EINPUT, "%s: changed while the job started (step %lld, then %lld)",
                      j->cfg->checkpoint.path, (long long)j->start, (long long)step);
    return rc;
}

int ht_pipe_start_chunks(ht_job *j, int n, const int *lo, const int *hi) {
    int rc = ht_model_restage_chunks(&j->model, n, lo, hi);
    return rc == HT_OK ? start_state(j) : rc;
}
