/* What a job's ranks allocate, from the description (plan/exec_mem.h). */
#include "plan/exec_mem.h"

#include <stdlib.h>

#include "config/modes.h"
#include "core/err.h"
#include "plan/gemm_ws.h"
#include "plan/partition.h"

int ht_plan_stage_local(const ht_config *cfg, int world) {
    const int k = cfg->pipe.schedule;
    /* one stage a rank, or several: one window per stage (at most HT_MODEL_MAX_CHUNKS), and
     * a tied head's copy of wte one more; pipe.rebalance moves a rank's window with its stage
     * (train/pipe_repart.c) */
    const int several = k == HT_PIPE_INTERLEAVED || k == HT_PIPE_CHIMERA || k == HT_PIPE_ZBV;
    const int kinds = k == HT_PIPE_GPIPE || k == HT_PIPE_1F1B || k == HT_PIPE_2BW ||
                      k == HT_PIPE_ZBH1 || k == HT_PIPE_HEPIPE || several;
    return kinds && !(k == HT_PIPE_INTERLEAVED && cfg->pipe.chunks > HT_MODEL_MAX_CHUNKS) &&
           cfg->cluster.shard == HT_SHARD_NONE && cfg->pipe.stages > 0 &&
           world % cfg->pipe.stages == 0;
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
    ht_mem_desc_calibrated(&d, m, ht_plan_calib_samples(cfg, world, mb));
    const uint8_t *rc = p->mem.layers ? p->mem.layers + (size_t)q * L : NULL;
    const int nslot = s->nbuf[q] > 0 ? s->nbuf[q] : 1;
    ht_mem_exec_use e; /* (train/pipe_mem.c's prediction after the run) */
    (ht_plan_stage_local(cfg, world) ? ht_mem_executor_local : ht_mem_executor)(
        &d, &dB, B, mb, m->rows, nc, lo, hi, nslot, wv, rc, &e);
    const double total = e.total;
    ht_mem_desc_free(&d), ht_mem_desc_free(&dB);
    free(lo);
    return total;
}

int ht_plan_calib_samples(const ht_config *cfg, int world, int mb) {
    int cal, cal1;
    ht_plan_needs(cfg, world, &cal, &cal1);
    return cal ? mb : cal1 ? 1 : 0;
}

double ht_plan_whole_bytes(const ht_model *m, int B, int opt_states) {
    size_t act, save, work;
    ht_model_stage_floats(m, 0, m->nlayers, B, &act, &save, &work);
    return (double)m->nparams * sizeof(float) * (2 + opt_states) +
           (2.0 * act + save + work) * sizeof(float) + 12.0 * B * m->rows +
           (double)ht_plan_gemm_ws(m, 0, m->nlayers, B) * sizeof(float);
}
