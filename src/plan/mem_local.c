/* The memory of a pipeline rank that holds only its stages (issue 24: train/pipe_local.c,
 * pipe_start.c), from the description alone: one model for the stage plan that decides
 * recomputation and in-flight slots (ht_mem_rank: the trainer's decision, hetsim, the
 * planner) and for the executor's prediction that pipe_mem.c checks against the measured
 * peak (ht_mem_executor_local); see partition.h. */
#include <math.h>
#include <stdlib.h>

#include "core/err.h"
#include "plan/partition.h"

/* What a rank's chunks need: the state of the layers it holds, and per sample the largest
 * chunk's arena, saved state and what a recomputing slot keeps; the largest workspace per
 * sample at the model's own batch (dB), the tiled GEMM's packing workspace. */
typedef struct parts {
    double state, params;   /* parameters + gradients + optimizer state; parameters alone */
    double arena, save, keep, work, gemm;
    int recomputes;
} parts;

static void parts_of(const ht_mem_desc *d, const ht_mem_desc *dB, int nchunk, const int *lo,
                     const int *hi, const uint8_t *rc, parts *p) {
    *p = (parts){0};
    uint8_t *held = ht_xcalloc((size_t)(d->L ? d->L : 1), 1);
    for (int c = 0; c < nchunk; c++)
        for (int l = lo[c]; l < hi[c]; l++) {
            held[l] = 1; /* Chimera's middle rank holds one stage twice: one window */
            p->recomputes |= rc && rc[l];
            if (dB->work_bytes[l] > p->work) p->work = dB->work_bytes[l];
        }
    for (int l = 0; l < d->L; l++)
        if (held[l]) p->state += d->state_bytes[l], p->params += d->param_bytes[l];
    /* a tied head without the embedding holds wte's copy (src/train/pipe_tied.h) */
    if (d->tied_layer > 0 && held[d->tied_layer] && !held[0])
        p->state += d->tied_state, p->params += d->tied_param;
    free(held);
    for (int c = 0; c < nchunk; c++) {
        double a, s, k;
        ht_mem_chunk(d, lo[c], hi[c], p->recomputes ? rc : NULL, &a, &s, &k);
        if (a > p->arena) p->arena = a;
        if (s > p->save) p->save = s;
        if (k > p->keep) p->keep = k;
    }
    p->gemm = ht_mem_gemm(d, nchunk, lo, hi);
}

/* One slot of mb samples: the arena, its gradient and the saved state, or on a recomputing
 * rank only what it keeps (its gradient arena and saved state are one float each), and its
 * labels, losses and flags. */
static double slot_bytes(const parts *p, int mb, int rows) {
    const double act = p->recomputes ? mb * p->keep + 2 * 4 : mb * (2 * p->arena + p->save);
    return act + 3.0 * mb * rows * 4;
}

/* The model's own buffers at B samples (arena, its gradient, saved state, workspace, labels,
 * losses, flags), sized for the largest chunk. */
static double own_bytes(const parts *p, int B, int rows) {
    return (double)B * (2 * p->arena + p->save + p->work) + 3.0 * B * rows * 4;
}

double ht_mem_executor_local(const ht_mem_desc *d, const ht_mem_desc *dB, int B, int mb, int rows,
                             int nchunk, const int *lo, const int *hi, int nslot,
                             int weight_versions, const uint8_t *rc, ht_mem_exec_use *u) {
    parts p;
    parts_of(d, dB, nchunk, lo, hi, rc, &p);
    ht_mem_exec_use m = {0};
    m.model = p.state + own_bytes(&p, B, rows);
    /* the model's own buffers are a plain rank's slot 0; a recomputing rank allocates every
     * slot and runs in its own buffers (a work set of its own only if they are smaller) */
    const int extra = p.recomputes ? nslot : nslot > 1 ? nslot - 1 : 0;
    m.slots = extra * slot_bytes(&p, mb, rows);
    m.work = p.recomputes && B < mb ? mb * (2 * p.arena + p.save) : 0;
    m.versions = weight_versions > 1 ? 2 * p.params : 0; /* 2BW: weights and gradients */
    m.gemm = p.gemm;
    m.total = m.model + m.slots + m.work + m.versions + m.gemm;
    if (u) *u = m;
    return m.total;
}

double ht_mem_rank(const ht_mem_desc *d, int nchunk, const int *lo, const int *hi, int mb,
                   int slots, int weight_versions, const uint8_t *rc, ht_mem_use *u) {
    /* the executor's model at B = mb (a pipeline builds its model at a micro-batch) */
    const int B = mb;
    parts p;
    parts_of(d, d, nchunk, lo, hi, rc, &p);
    ht_mem_use m = {0};
    m.state = p.state + (weight_versions > 1 ? 2 * p.params : 0);
    m.acts = (double)slots * slot_bytes(&p, mb, d->rows);
    /* the own buffers: a plain rank's slot 0 (in acts; here what B holds beyond mb), where a
     * recomputing rank rebuilds one micro-batch for its BWD */
    const double own = own_bytes(&p, B, d->rows) - (double)B * p.work;
    m.live = p.recomputes ? own : own - (slot_bytes(&p, mb, d->rows));
    m.work = (double)B * p.work + p.gemm;
    m.total = m.state + m.acts + m.live + m.work;
    if (u) *u = m;
    return m.total;
}

double ht_mem_stage(const ht_mem_desc *d, int lo, int hi, int mb, int slots, int weight_versions,
                    const uint8_t *rc, ht_mem_use *u) {
    return ht_mem_rank(d, 1, &lo, &hi, mb, slots, weight_versions, rc, u);
}

int ht_mem_max_slots(const ht_mem_desc *d, int lo, int hi, int mb, int weight_versions,
                     const uint8_t *rc, double limit, int cap) {
    if (limit <= 0) return cap;
    double base = ht_mem_stage(d, lo, hi, mb, 0, weight_versions, rc, NULL);
    double per = ht_mem_stage(d, lo, hi, mb, 1, weight_versions, rc, NULL) - base; /* a slot */
    if (base + per > limit) return 0;
    if (per <= 0) return cap;
    double n = floor((limit - base) / per);
    return n >= cap ? cap : (int)n;
}
