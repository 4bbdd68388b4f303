/* Stage-local parameter memory for pipeline ranks (issue 24, first step): a rank whose stream
 * runs one stage keeps on its device only that stage's parameters, gradients and optimizer
 * state (2bw's second versions follow: the executor sizes them from the resident window), as
 * a window [pbase, pbase + pres) of the model's layout; the model description stays whole.
 *
 * Rank 0 narrows too: evaluation runs over the stages and each stage's owner writes its own
 * shard of the checkpoint (pipe_eval.c), so no rank needs the whole model after start-up.
 * Kept whole on every rank, for now (the log says which applies; rank 0 then gathers):
 * - ranks whose stream runs several stages (interleaved, chimera, zb-v: one window would span
 *   the stages between), a sharded optimizer.
 * pipe.rebalance moves a stage-local rank's window with its stage (pipe_repart.c).
 * A tied GPT's last stage keeps a copy of wte after its window (its gradient summed with the
 * first stage's, train/pipe_tied.h), and the optimizer state for it: both copies take the same
 * step from the same summed gradient, so no update need be sent.
 * The model's own activation, activation-gradient, saved-state and workspace buffers (the
 * executor's first slot) shrink to the stage too, at the model's batch (one micro-batch).
 * Every rank still builds the whole model once at start (initialisation, a resumed
 * checkpoint, the start-up calibration run every layer) and narrows it here, before the
 * executor allocates its slots: the measured peak restarts after the narrowing. */
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "optim/optim.h"
#include "train/engine_pipe.h"

/* The one stage schedule rank q's stream runs, or -1 when it runs several (or none). */
static int only_stage(const pipe_state *p, int q) {
    int st = -1;
    for (int i = 0; i < p->sched.len[q]; i++) {
        const int s = p->sched.ins[q][i].stage;
        if (s < 0) continue;
        if (st >= 0 && s != st) return -1;
        st = s;
    }
    return st;
}

/* Why every pipeline rank must keep the whole model in this job (NULL: ranks other than 0
 * with one stage may narrow). The same on every rank. */
static const char *whole_reason(const ht_job *j, const pipe_state *p) {
    for (int q = 0; q < p->sched.p.D; q++)
        if (p->sched.p.v > 1 || p->sched.ndir > 1 || only_stage(p, q) < 0)
            return "its schedule runs several stages per rank";
    if (j->opt.off != 0 || j->opt.n != j->opt.n_full) return "the optimizer state is sharded";
    return NULL;
}

/* Floats [lo, lo + n) of the whole-model buffer b, then m's tied copy's [tail_off, tail_off +
 * tail_n), in a new buffer of their own; b freed. */
static ht_buf *narrow(const ht_model *m, ht_buf *b, size_t lo, size_t n, const char *what) {
    ht_dev *d = m->dev;
    ht_buf *o = ht_buf_new(d, (n + m->tail_n ? n + m->tail_n : 1) * sizeof(float), what);
    if (n) ht_buf_copy(d, o, 0, b, lo * sizeof(float), n * sizeof(float));
    if (m->tail_n)
        ht_buf_copy(d, o, n * sizeof(float), b, m->tail_off * sizeof(float),
                    m->tail_n * sizeof(float));
    ht_buf_free(b);
    return o;
}

/* The optimizer again over the window [lo, lo + n) and m's tied copy, its state theirs in
 * the old one's. */
static void narrow_optim(ht_job *j, size_t lo, size_t n) {
    const ht_model *m = &j->model;
    ht_optim o;
    ht_optim_init(&o, j->dev, &j->opt.cfg, n + m->tail_n ? n + m->tail_n : 1);
    for (int k = 0; k < ht_optim_state_count(&o) && n + m->tail_n; k++) {
        const char *name;
        ht_buf *from, *to;
        size_t fn, tn;
        ht_optim_state(&j->opt, k, &name, &from, &fn);
        ht_optim_state(&o, k, &name, &to, &tn);
        if (n) ht_buf_copy(j->dev, to, 0, from, lo * sizeof(float), n * sizeof(float));
        if (m->tail_n)
            ht_buf_copy(j->dev, to, n * sizeof(float), from, m->tail_off * sizeof(float),
                        m->tail_n * sizeof(float));
    }
    o.t = j->opt.t;
    o.track_norm = j->opt.track_norm;
    ht_optim_free(&j->opt);
    j->opt = o;
}

/* Bytes of the model's own activation, gradient, saved and work buffers as built whole, less
 * what they hold now. */
static double acts_shed(const ht_model *m) {
    size_t act, save, work;
    ht_model_stage_floats(m, 0, m->nlayers, m->max_batch, &act, &save, &work);
    return (2.0 * act + save + work) * sizeof(float) -
           (2.0 * (m->act_floats ? m->act_floats : 1) + (m->save_floats ? m->save_floats : 1) +
            (m->work_floats ? m->work_floats : 1)) * sizeof(float);
}

/* The model's own activation buffers for layers [lo, hi) only, laid out as the executor's
 * stage layouts (stage input at 0, its layers' outputs, then a LOAD's inputs). The
 * whole-model offsets (act_off, save_off) stay: the executor rebases them. */
static void narrow_acts(ht_model *m, int lo, int hi) {
    size_t act, save, work;
    ht_model_stage_floats(m, lo, hi, m->max_batch, &act, &save, &work);
    ht_buf_free(m->acts), ht_buf_free(m->dacts), ht_buf_free(m->saved), ht_buf_free(m->work);
    m->acts = ht_buf_new(m->dev, (act ? act : 1) * sizeof(float), "activations (stage)");
    m->dacts = ht_buf_new(m->dev, (act ? act : 1) * sizeof(float), "activation gradients (stage)");
    m->saved = ht_buf_new(m->dev, (save ? save : 1) * sizeof(float), "saved state (stage)");
    m->work = ht_buf_new(m->dev, (work ? work : 1) * sizeof(float), "workspace (stage)");
    m->act_floats = act, m->save_floats = save, m->work_floats = work;
}

/* What the memory model's prediction for this rank leaves out: the state of the parameters
 * outside its window, the activation buffers of the other layers, 2bw's versions of both. */
static void account(pipe_state *p, const ht_model *m, int nst) {
    const double gone = (double)(m->nparams - ht_model_resident(m)) * sizeof(float);
    p->mem.shed_model = gone * (2 + nst) + acts_shed(m);
    p->mem.shed_versions = p->tbw ? 2 * gone : 0;
}

int ht_pipe_local_shrink(ht_job *j, pipe_state *p) {
    ht_model *m = &j->model;
    const char *why = whole_reason(j, p);
    const int st = only_stage(p, p->q);
    p->local = why == NULL;
    if (j->rank == 0 && why)
        ht_log_info("memory: every pipeline rank keeps the whole model's parameters, gradients "
                    "and optimizer state: %s",
                    why);
    else if (j->rank == 0)
        ht_log_info("memory: every pipeline rank keeps only its stage's parameters, gradients, "
                    "optimizer state and activation buffers; evaluation runs over the stages "
                    "and each stage's owner writes its shard of the checkpoint set (%d shards); "
                    "%s",
                    p->sched.S,
                    j->eng.windowed ? "from start-up (no rank builds the whole model)"
                                    : "after start-up (each rank built the whole model first)");
    if ((why || st < 0) && j->eng.windowed) /* pipe_start.c and this disagree: a bug */
        ht_die(HT_ERUNTIME, "pipe: rank %d was built for one stage, but %s", j->rank,
               why ? why : "its stream runs several");
    if (why || st < 0) return HT_OK;
    size_t lo = 0, hi = 0;
    int any = 0;
    for (int i = p->bounds[st]; i < p->bounds[st + 1]; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) lo = l->woff;
        hi = l->woff + l->nparams, any = 1;
    }
    const size_t n = any ? hi - lo : 0;
    const int nst = ht_optim_state_count(&j->opt);
    int rc;
    if (j->eng.windowed == 2 && (rc = ht_pipe_start_stage(j, p->bounds[st], p->bounds[st + 1],
                                                          any ? lo : 0, n)) != HT_OK)
        return rc;
    if (j->eng.windowed) { /* built as this stage at start: nothing to narrow */
        if (m->pbase != (any ? lo : 0) || m->pres != n)
            ht_die(HT_ERUNTIME, "pipe: rank %d was built for parameters [%zu, %zu), but the plan "
                                "gives its stage %d [%zu, %zu)", j->rank, m->pbase,
                   m->pbase + m->pres, st, lo, lo + n);
        account(p, m, nst);
        return HT_OK;
    }
    if (m->pbase != 0 || m->pres != m->nparams) return HT_OK;
    ht_dev_finish(j->dev);
    ht_model_stage_tail(m, p->bounds[st], p->bounds[st + 1], lo, n, &m->tail_off, &m->tail_n);
    m->params = narrow(m, m->params, lo, n, "parameters (stage)");
    m->grads = narrow(m, m->grads, lo, n, "gradients (stage)");
    if (n + m->tail_n) ht_buf_zero(j->dev, m->grads, 0, (n + m->tail_n) * sizeof(float));
    narrow_optim(j, lo, n);
    m->pbase = lo, m->pres = n;
    narrow_acts(m, p->bounds[st], p->bounds[st + 1]);
    account(p, m, nst);
    ht_dev_finish(j->dev);
    ht_dev_mem(j->dev, NULL, NULL, NULL, 1);
    ht_log_debug("rank %d: stage %d's parameters [%zu, %zu) resident (%zu of %zu)", j->rank, st, lo,
                 lo + n, n, m->nparams);
    return HT_OK;
}
