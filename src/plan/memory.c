/* The memory model of a pipeline rank and the choice of layers to recompute (pure). A rank
 * holds its stage's weights, gradients and optimizer state for the whole run; per micro-batch
 * in flight (a slot) the stage input and what each layer keeps for its backward; for the one
 * micro-batch in backward the gradients at its boundaries and whatever recomputation rebuilt;
 * and one workspace shared by its layers. Recomputation (Chen et al. 2016, "Training deep nets
 * with sublinear memory cost"; HePipe's dynamic recomputation) trades a layer's kept bytes in
 * every slot for one more forward of it per micro-batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "nn/model.h"
#include "plan/gemm_ws.h"
#include "plan/partition.h"

/* ---------------------------------------------------------------- description */

void ht_mem_desc_from_model(ht_mem_desc *d, const ht_model *m, int mb, int opt_states) {
    int L = m->nlayers;
    memset(d, 0, sizeof *d);
    d->L = L;
    d->in_bytes = (double)m->in_features * 4;
    double *all = ht_xcalloc((size_t)(8 * (L ? L : 1)), sizeof *all);
    d->out_bytes = all;
    d->keep_bytes = all + L;
    d->param_bytes = all + 2 * L;
    d->state_bytes = all + 3 * L;
    d->work_bytes = all + 4 * L;
    d->save_bytes = all + 5 * L;
    d->arena_bytes = all + 6 * L;
    d->gemm_bytes = all + 7 * L;
    d->rows = m->rows;
    if (mb < 1) mb = 1;
    for (int l = 0; l < L; l++) {
        const ht_layer *y = &m->layers[l];
        for (int k = 0; k < y->ntensors; k++) {
            if (!y->t[k].tied) continue;
            double c = 4.0;
            for (int e = 0; e < y->t[k].ndim; e++)
                c *= (double)y->t[k].shape[e];
            d->tied_layer = l, d->tied_param = c, d->tied_state = c * (2 + opt_states);
        }
        d->out_bytes[l] = (double)y->out * 4;
        d->keep_bytes[l] = (double)ht_layer_act_bytes(y);
        d->param_bytes[l] = (double)y->nparams * 4;
        d->state_bytes[l] = (double)y->nparams * 4 * (2 + opt_states);
        d->work_bytes[l] = (double)ht_layer_work_floats(y, mb) * 4 / mb;
        d->save_bytes[l] = (double)y->save * 4;
        /* act_bytes is the output (unless it aliases the input) plus the saved state */
        d->arena_bytes[l] = d->keep_bytes[l] - d->save_bytes[l];
        d->gemm_bytes[l] = (double)ht_plan_gemm_ws(m, l, l + 1, mb) * 4;
    }
}

void ht_part_times_from_model(const ht_model *m, int R, const double *flops_per_s,
                              double *fwd, double *bwd) {
    int L = m->nlayers;
    for (int r = 0; r < R; r++)
        for (int l = 0; l < L; l++) {
            fwd[r * L + l] = ht_layer_flops_forward(&m->layers[l]) / flops_per_s[r];
            bwd[r * L + l] = ht_layer_flops_backward(&m->layers[l], l > 0) / flops_per_s[r];
        }
}

void ht_mem_desc_calibrated(ht_mem_desc *d, const ht_model *m, int samples) {
    d->gemm_floor = samples > 0 ? (double)ht_plan_gemm_ws(m, 0, m->nlayers, samples) * 4 : 0;
}

void ht_mem_desc_free(ht_mem_desc *d) {
    free(d->out_bytes);
    memset(d, 0, sizeof *d);
}

/* ---------------------------------------------------------------- the executor */

/* Per sample: one slot's arena (stage input, outputs, a LOAD's model input after stage 0),
 * its saved state, and what a recomputing slot keeps. */
void ht_mem_chunk(const ht_mem_desc *d, int lo, int hi, const uint8_t *rc, double *arena,
                  double *save, double *keep) {
    const double in = lo == 0 ? d->in_bytes : d->out_bytes[lo - 1];
    const double load = lo > 0 ? d->in_bytes : 0;
    *arena = in + load, *save = 0, *keep = in + load;
    for (int l = lo; l < hi; l++) {
        *arena += d->arena_bytes[l];
        *save += d->save_bytes[l];
        if (!rc || !rc[l]) *keep += d->arena_bytes[l] + d->save_bytes[l];
    }
}

double ht_mem_executor(const ht_mem_desc *d, const ht_mem_desc *dB, int B, int mb, int rows,
                       int nchunk, const int *lo, const int *hi, int nslot, int weight_versions,
                       const uint8_t *rc, ht_mem_exec_use *u) {
    ht_mem_exec_use m = {0};
    double arena = dB->in_bytes, save = 0, work = 0, params = 0;
    for (int l = 0; l < dB->L; l++) {
        m.model += dB->state_bytes[l];
        params += dB->param_bytes[l];
        arena += dB->arena_bytes[l];
        save += dB->save_bytes[l];
        if (dB->work_bytes[l] > work) work = dB->work_bytes[l];
    }
    m.model += (double)B * (2 * arena + save + work) + 3.0 * B * rows * 4;
    int recomputes = 0;
    for (int c = 0; c < nchunk && rc; c++)
        for (int l = lo[c]; l < hi[c]; l++)
            recomputes |= rc[l] != 0;
    double a_max = 0, s_max = 0, k_max = 0;
    for (int c = 0; c < nchunk; c++) {
        double a, s, k;
        ht_mem_chunk(d, lo[c], hi[c], recomputes ? rc : NULL, &a, &s, &k);
        if (a > a_max) a_max = a;
        if (s > s_max) s_max = s;
        if (k > k_max) k_max = k;
    }
    /* a recomputing slot's gradient arena and saved state are one float each (never empty);
     * such a rank allocates every slot, and runs in the model's own buffers when they hold
     * its largest chunk (else in a work set of its own); any other rank's slot 0 is them */
    const double per = recomputes ? mb * k_max + 2 * 4 : mb * (2 * a_max + s_max);
    const int extra = recomputes ? nslot : nslot > 1 ? nslot - 1 : 0;
    m.slots = extra * (per + 3.0 * mb * rows * 4);
    const int fits = mb * a_max <= B * arena && mb * s_max <= B * save;
    m.work = recomputes && !fits ? mb * (2 * a_max + s_max) : 0;
    m.versions = weight_versions > 1 ? 2 * params : 0;
    m.gemm = ht_mem_gemm(d, nchunk, lo, hi);
    m.total = m.model + m.slots + m.work + m.versions + m.gemm;
    if (u) *u = m;
    return m.total;
}

double ht_mem_gemm(const ht_mem_desc *d, int nchunk, const int *lo, const int *hi) {
    double g = d->gemm_floor;
    for (int c = 0; c < nchunk && d->gemm_bytes; c++)
        for (int l = lo[c]; l < hi[c]; l++)
            if (d->gemm_bytes[l] > g) g = d->gemm_bytes[l];
    return g;
}

/* ---------------------------------------------------------------- recomputation */

int ht_mem_choose_recompute(const ht_mem_desc *d, const double *fwd, int lo, int hi, int mb,
                            int slots, int weight_versions, double limit, uint8_t *rc,
                            double *extra_s, ht_mem_use *u) {
    ht_mem_plan p;
    int fits = ht_mem_plan_rank(d, fwd, NULL, 1, &lo, &hi, mb, slots, slots, slots,
                                weight_versions, limit, rc, &p);
    *extra_s = p.extra_s;
    if (u) *u = p.use;
    return fits;
}
