/* What a job's ranks allocate, from the description (plan/exec_mem.h). */
#include "plan/exec_mem.h"

#include <stdlib.h>

#include "config/modes.h"
#include "core/err.h"
#include "plan/partition.h"

int ht_plan_stage_local(const ht_config *cfg, int world) {
    const int k = cfg->pipe.schedule;
    const int one_stage = k == HT_PIPE_GPIPE || k == HT_PIPE_1F1B || k == HT_PIPE_2BW ||
                          k == HT_PIPE_ZBH1 || k == HT_PIPE_HEPIPE;
    /* pipe.rebalance acts on the hetero cut only (train/pipe_repart.c) */
    const int repart = cfg->pipe.rebalance && cfg->pipe.partition == HT_PART_HETERO &&
                       !cfg->pipe.nboundaries && !cfg->pipe.replicate;
    return one_stage && !repart && cfg->cluster.shard == HT_SHARD_NONE && cfg->pipe.stages > 0 &&
           world % cfg->pipe.stages == 0;
}

/* Bytes of the activation, gradient, saved-state and work buffers the model builds for layers
 * [lo, hi) at B samples (ht_model_stage_floats's layout; an empty buffer is one float). */
static double act_bytes(const ht_model *m, int lo, int hi, int B) {
    size_t act, save, work;
    ht_model_stage_floats(m, lo, hi, B, &act, &save, &work);
    return (2.0 * (act ? act : 1) + (save ? save : 1) + (work ? work : 1)) * sizeof(float);
}

/* Bytes of parameters a stage-local rank of layers [lo, hi) holds: its window and the tied
 * copy (nn/model.h ht_model_stage_tail). */
static double held_bytes(const ht_model *m, int lo, int hi) {
    size_t a = 0, e = 0, toff, tn;
    int any = 0;
    for (int l = lo; l < hi; l++) {
        if (!m->layers[l].nparams) continue;
        if (!any) a = m->layers[l].woff;
        e = m->layers[l].woff + m->layers[l].nparams, any = 1;
    }
    ht_model_stage_tail(m, lo, hi, a, e - a, &toff, &tn);
    return (double)(e - a + tn) * sizeof(float);
}

double ht_plan_exec_bytes(const ht_config *cfg, const ht_model *m, const ht_plan *p,
                          const ht_pipe_sched *s, int opt_states, int world, int q) {
    const int L = m->nlayers, Q = p->pp.D, v = p->pp.v > 0 ? p->pp.v : 1;
    const int mb = p->mb, B = p->model_batch > 0 ? p->model_batch : mb;
    const int wv = ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_NO_FLUSH) ? 2 : 1;
    int *lo = ht_xmalloc((size_t)4 * Q * v * sizeof *lo), *hi = lo + 2 * Q * v;
    const int nc = ht_plan_mem_chunks(p->pp.kind, Q, v, p->bounds, q, lo, hi);
    ht_mem_desc d, dB;
    ht_mem_desc_from_model(&d, m, mb, opt_states);
    ht_mem_desc_from_model(&dB, m, B, opt_states);
    const uint8_t *rc = p->mem.layers ? p->mem.layers + (size_t)q * L : NULL;
    const int nslot = s->nbuf[q] > 0 ? s->nbuf[q] : 1;
    ht_mem_exec_use e;
    ht_mem_executor(&d, &dB, B, mb, m->rows, nc, lo, hi, nslot, wv, rc, &e);
    double total = e.total;
    if (nc == 1 && ht_plan_stage_local(cfg, world)) {
        /* what train/pipe_local.c's narrowing leaves out (its `account`); a tied GPT's last
         * stage holds wte's copy besides its window */
        const double gone = (double)m->nparams * sizeof(float) - held_bytes(m, lo[0], hi[0]);
        total -= gone * (2 + opt_states) + act_bytes(m, 0, L, B) - act_bytes(m, lo[0], hi[0], B);
        if (wv > 1) total -= 2 * gone;
    }
    ht_mem_desc_free(&d), ht_mem_desc_free(&dB);
    free(lo);
    return total;
}

double ht_plan_whole_bytes(const ht_model *m, int B, int opt_states) {
    size_t act, save, work;
    ht_model_stage_floats(m, 0, m->nlayers, B, &act, &save, &work);
    return (double)m->nparams * sizeof(float) * (2 + opt_states) +
           (2.0 * act + save + work) * sizeof(float) + 12.0 * B * m->rows;
}
