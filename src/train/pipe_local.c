/* Stage-local parameter memory for pipeline ranks (issue 24): a rank keeps on its device
 * only its stages' parameters, gradients and optimizer state (2bw's second versions follow:
 * the executor sizes them from the resident windows), as windows of the model's layout, one
 * per stage it runs (interleaved's chunks, Chimera's two directions, zb-v's V: nn's
 * ht_model_attach_chunks; a Chimera rank's two replicas of one stage share one); the model
 * description stays whole.
 *
 * Evaluation runs over the stages and each stage's owner writes its own shard of the
 * checkpoint (pipe_eval.c), so no rank needs the whole model after start-up. Where
 * pipe_start.c knew the stages it allocated them (or, when the plan decides them, nothing
 * until ht_pipe_start_chunks here); otherwise the rank built the whole model and one stage is
 * narrowed here (the measured peak restarts then). Kept whole on every rank (the log says
 * which applies; rank 0 then gathers): a sharded optimizer, and several stages a rank on a
 * model built whole. pipe.rebalance moves a stage-local rank's window with its stage
 * (pipe_repart.c). A tied GPT's rank that runs the head but not the embedding keeps a copy
 * of wte as one more window (its gradient summed with the first stage's, train/pipe_tied.h),
 * and the optimizer state for it: both copies take the same step from the same summed
 * gradient, so no update need be sent.
 * The model's own activation, activation-gradient, saved-state and workspace buffers (the
 * executor's first slot) hold the largest of its stages, at the model's batch (one
 * micro-batch). The memory model then predicts the stages' buffers alone
 * (ht_mem_executor_local, from the description). */
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

/* The stages schedule rank q's stream runs (a Chimera replica's once), ascending: their
 * number, at most HT_MODEL_MAX_CHUNKS of them in st. */
static int stages_of(const pipe_state *p, int q, int *st) {
    int n = 0;
    for (int s = 0; s < p->sched.S; s++) {
        int in = 0;
        for (int i = 0; i < p->sched.len[q] && !in; i++)
            in = p->sched.ins[q][i].stage == s;
        if (in && n == HT_MODEL_MAX_CHUNKS) return n + 1;
        if (in) st[n++] = s;
    }
    return n;
}

/* Why every pipeline rank must keep the whole model in this job (NULL: ranks may hold only
 * their stages). The same on every rank. */
static const char *whole_reason(const ht_job *j, const pipe_state *p) {
    int st[HT_MODEL_MAX_CHUNKS];
    for (int q = 0; q < p->sched.p.D; q++) {
        const int several = p->sched.p.v > 1 || p->sched.ndir > 1 || only_stage(p, q) < 0;
        if (several && !j->eng.windowed) /* built whole: pipe_start.c decides it for all */
            return "its schedule runs several stages per rank (built whole)";
        if (several && stages_of(p, q, st) > HT_MODEL_MAX_CHUNKS)
            return "its schedule runs more stages per rank than a model holds windows";
    }
    if (j->opt.off != 0 || j->opt.n != j->opt.n_full) return "the optimizer state is sharded";
    return NULL;
}

/* m's windows of the whole-model buffer b, packed in a new buffer of their own; b freed. */
static ht_buf *narrow(const ht_model *m, ht_buf *b, const char *what) {
    ht_dev *d = m->dev;
    ht_buf *o = ht_buf_new(d, (m->pres ? m->pres : 1) * sizeof(float), what);
    for (int w = 0; w < m->nwin; w++)
        if (m->win[w].n)
            ht_buf_copy(d, o, m->win[w].at * sizeof(float), b, m->win[w].base * sizeof(float),
                        m->win[w].n * sizeof(float));
    ht_buf_free(b);
    return o;
}

/* The optimizer again over m's windows, its state theirs in the old (whole-model) one's. */
static void narrow_optim(ht_job *j) {
    const ht_model *m = &j->model;
    ht_optim o;
    ht_optim_init(&o, j->dev, &j->opt.cfg, m->pres ? m->pres : 1);
    for (int k = 0; k < ht_optim_state_count(&o) && m->pres; k++) {
        const char *name;
        ht_buf *from, *to;
        size_t fn, tn;
        ht_optim_state(&j->opt, k, &name, &from, &fn);
        ht_optim_state(&o, k, &name, &to, &tn);
        for (int w = 0; w < m->nwin; w++)
            if (m->win[w].n)
                ht_buf_copy(j->dev, to, m->win[w].at * sizeof(float), from,
                            m->win[w].base * sizeof(float), m->win[w].n * sizeof(float));
    }
    o.t = j->opt.t;
    o.track_norm = j->opt.track_norm;
    ht_optim_free(&j->opt);
    j->opt = o;
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
    m->nchunk = 1, m->chunk_lo[0] = lo, m->chunk_hi[0] = hi;
}

/* The stages' windows (pipe_start.c's, or allocated now on a rank that started with none),
 * checked against the plan's stages. */
static int stage_windows(ht_job *j, pipe_state *p, int n, const int *st) {
    ht_model *m = &j->model;
    int lo[HT_MODEL_MAX_CHUNKS], hi[HT_MODEL_MAX_CHUNKS], rc;
    for (int k = 0; k < n; k++)
        lo[k] = p->bounds[st[k]], hi[k] = p->bounds[st[k] + 1];
    if (j->eng.windowed == 2 && (rc = ht_pipe_start_chunks(j, n, lo, hi)) != HT_OK) return rc;
    ht_pwin w[HT_MODEL_MAX_WINDOWS];
    size_t floats;
    const int nw = ht_model_chunk_windows(m, n, lo, hi, w, &floats);
    int same = floats == m->pres;
    for (int k = 0; k < nw && same; k++)
        same = ht_model_span(m, w[k].base, w[k].n) == w[k].at;
    if (!same) /* built as one stage at start (pipe_start.c) that the plan does not give it */
        ht_die(HT_ERUNTIME, "pipe: rank %d was built for parameters [%zu, %zu), but the plan "
                            "gives its stage(s) %zu floats from %zu", j->rank, m->pbase,
               m->pbase + m->pres, floats, nw ? w[0].base : 0);
    p->mem.local = 1; /* the memory model predicts the stages' buffers (pipe_mem.c) */
    ht_log_debug("rank %d: %d stage(s) from stage %d resident, %zu of %zu parameters in %d "
                 "window(s)", j->rank, n, st[0], m->pres, m->nparams, m->nwin);
    return HT_OK;
}

size_t ht_pipe_local_bytes(const ht_model *m, size_t off, size_t n) {
    if (n == 0) return 0; /* a stage without parameters: nothing to read */
    const size_t at = ht_model_span(m, off, n);
    if (at == (size_t)-1)
        ht_die(HT_ERUNTIME, "pipe: parameters [%zu, %zu) are not resident on this rank (it "
                            "holds %zu floats in %d window(s) from %zu)", off, off + n, m->pres,
               m->nwin, m->pbase);
    return at * sizeof(float);
}

int ht_pipe_local_shrink(ht_job *j, pipe_state *p) {
    ht_model *m = &j->model;
    const char *why = whole_reason(j, p);
    int sts[HT_MODEL_MAX_CHUNKS];
    const int ns = why ? 0 : stages_of(p, p->q, sts);
    p->local = why == NULL;
    if (j->rank == 0 && why)
        ht_log_info("memory: every pipeline rank keeps the whole model's parameters, gradients "
                    "and optimizer state: %s",
                    why);
    else if (j->rank == 0)
        ht_log_info("memory: every pipeline rank keeps only its stage's parameters, gradients, "
                    "optimizer state and activation buffers%s; evaluation runs over the stages "
                    "and each stage's owner writes its shard of the checkpoint set (%d shards); "
                    "%s",
                    p->sched.S > p->sched.p.D || p->sched.ndir > 1
                        ? " (one window per stage it runs)" : "",
                    p->sched.S,
                    j->eng.windowed ? "from start-up (no rank builds the whole model)"
                                    : "after start-up (each rank built the whole model first)");
    if (why && j->eng.windowed) /* pipe_start.c and this disagree: a bug */
        ht_die(HT_ERUNTIME, "pipe: rank %d was built for its stages, but %s", j->rank, why);
    if (why || ns < 1) return HT_OK;
    if (j->eng.windowed) return stage_windows(j, p, ns, sts);
    const int st = sts[0]; /* built whole, one stage (whole_reason): narrowed here */
    size_t lo = 0, hi = 0;
    int any = 0;
    for (int i = p->bounds[st]; i < p->bounds[st + 1]; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) lo = l->woff;
        hi = l->woff + l->nparams, any = 1;
    }
    const size_t n = any ? hi - lo : 0;
    if (m->pbase != 0 || m->pres != m->nparams) return HT_OK;
    ht_dev_finish(j->dev);
    size_t floats; /* the stage's window, and a tied head's copy of wte */
    m->nwin = ht_model_stage_windows(m, lo, n, p->bounds[st], p->bounds[st + 1], m->win, &floats);
    m->pbase = m->nwin ? m->win[0].base : 0, m->pres = floats;
    m->params = narrow(m, m->params, "parameters (stage)");
    m->grads = narrow(m, m->grads, "gradients (stage)");
    if (m->pres) ht_buf_zero(j->dev, m->grads, 0, m->pres * sizeof(float));
    narrow_optim(j);
    narrow_acts(m, p->bounds[st], p->bounds[st + 1]);
    p->mem.local = 1; /* the memory model predicts the stages' buffers (pipe_mem.c) */
    ht_dev_finish(j->dev);
    ht_dev_mem(j->dev, NULL, NULL, NULL, 1);
    ht_log_debug("rank %d: stage %d's parameters [%zu, %zu) resident (%zu of %zu)", j->rank, st, lo,
                 lo + n, n, m->nparams);
    return HT_OK;
}
