/* The executor's allocation on a pipeline rank that holds only its stages (issue 24:
 * train/pipe_local.c, pipe_start.c), predicted from the description alone; see partition.h. */
#include <stdlib.h>

#include "core/err.h"
#include "plan/partition.h"

/* Per sample at the model's own buffers: chunk [lo, hi)'s arena (its input, outputs and, after
 * the first stage, the model's input a LOAD writes), saved state and workspace. */
static void own_chunk(const ht_mem_desc *d, int lo, int hi, double *arena, double *save,
                      double *work) {
    *arena = (lo == 0 ? d->in_bytes : d->out_bytes[lo - 1]) + (lo > 0 ? d->in_bytes : 0);
    *save = *work = 0;
    for (int l = lo; l < hi; l++) {
        *arena += d->arena_bytes[l];
        *save += d->save_bytes[l];
        if (d->work_bytes[l] > *work) *work = d->work_bytes[l];
    }
}

double ht_mem_executor_local(const ht_mem_desc *d, const ht_mem_desc *dB, int B, int mb, int rows,
                             int nchunk, const int *lo, const int *hi, int nslot,
                             int weight_versions, const uint8_t *rc, ht_mem_exec_use *u) {
    ht_mem_exec_use m; /* the slots beyond the first are the whole-model executor's */
    ht_mem_executor(d, dB, B, mb, rows, nchunk, lo, hi, nslot, weight_versions, rc, &m);
    uint8_t *held = ht_xcalloc((size_t)(dB->L ? dB->L : 1), 1);
    double a = 0, s = 0, w = 0, state = 0, params = 0;
    for (int c = 0; c < nchunk; c++) {
        double ca, cs, cw;
        own_chunk(dB, lo[c], hi[c], &ca, &cs, &cw);
        if (ca > a) a = ca;
        if (cs > s) s = cs;
        if (cw > w) w = cw;
        for (int l = lo[c]; l < hi[c]; l++)
            held[l] = 1; /* Chimera's middle rank holds one stage twice: one window */
    }
    for (int l = 0; l < dB->L; l++)
        if (held[l]) state += dB->state_bytes[l], params += dB->param_bytes[l];
    /* a tied head without the embedding holds wte's copy (as ht_mem_rank counts it) */
    if (dB->tied_layer > 0 && held[dB->tied_layer] && !held[0])
        state += dB->tied_state, params += dB->tied_param;
    free(held);
    m.model = state + (double)B * (2 * a + s + w) + 3.0 * B * rows * 4;
    m.versions = weight_versions > 1 ? 2 * params : 0;
    /* a recomputing rank runs in the model's own buffers: they hold its largest chunk at B
     * samples, so (B >= mb) no work set of its own */
    if (m.work > 0 && B >= mb) m.work = 0;
    m.total = m.model + m.slots + m.work + m.versions;
    if (u) *u = m;
    return m.total;
}
