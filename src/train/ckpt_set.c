/* Sharded checkpoints (io/safetensors.h: Hugging Face's layout, committed atomically): each
 * writer saves the part of the flat parameter space it owns, its parameter tensors whole and
 * its slice of every optimizer state as a piece; loading goes through ht_st_open, which reads
 * a set as one file, so every loader takes either form. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "plan/zero_mem.h"
#include "train/checkpoint.h"

#define CKPT_FORMAT "hettrain-checkpoint-1"
#define MAX_STATES 8

void ht_checkpoint_shard_cuts(size_t n, const double *weight, int k, size_t *cut) {
    ht_plan_shard_cuts(n, weight, k, cut); /* the plan sizes sharded ranks by the same cut */
}

void ht_checkpoint_shard_ranges(const ht_model *m, const double *weight, int k, size_t *cut) {
    int np = ht_model_param_tensors((ht_model *)m, NULL, 0);
    ht_param_tensor *pt = ht_xmalloc((size_t)(np ? np : 1) * sizeof *pt);
    ht_model_param_tensors((ht_model *)m, pt, np);
    double sum = 0, acc = 0;
    for (int i = 0; i < k; i++)
        sum += weight ? weight[i] : 1;
    cut[0] = 0;
    cut[k] = m->nparams;
    for (int i = 1; i < k; i++) {
        acc += weight ? weight[i - 1] : 1;
        double target = (double)m->nparams * acc / sum;
        size_t c = m->nparams; /* the first tensor start at or after the target */
        for (int t = 0; t < np; t++)
            if ((double)pt[t].off >= target && pt[t].off < c) c = pt[t].off;
        cut[i] = c < cut[i - 1] ? cut[i - 1] : c;
    }
    free(pt);
}

static int finite_or_refuse(const char *name, const float *p, size_t n, int64_t step) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i]))
            return ht_error(HT_ERUNTIME, "step %lld: checkpoint not written: tensor '%s' element "
                                         "%zu of %zu is %s, expected a finite number",
                            (long long)step, name, i, n, isnan(p[i]) ? "NaN" : "infinite");
    return HT_OK;
}

/* The tensors of [lo, hi): parameters whose start lies there (whole), then each optimizer
 * state's slice as piece NAME#lo; host copies in *bufs (to free). */
static int shard_tensors(ht_model *m, ht_optim *o, size_t lo, size_t hi, int64_t step,
                         ht_st_tensor *t, int *nt, float **bufs, char (*pname)[96]) {
    int np = ht_model_param_tensors(m, NULL, 0), ns = ht_optim_state_count(o), rc = HT_OK;
    ht_param_tensor *pt = ht_xmalloc((size_t)(np ? np : 1) * sizeof *pt);
    ht_model_param_tensors(m, pt, np);
    /* the parameter tensors starting in [lo, hi) may end past hi (cuts need not fall on
     * tensor starts): the host copy spans [lo, end) */
    size_t end = lo;
    for (int i = 0; i < np; i++) {
        size_t n = 1;
        for (int d = 0; d < pt[i].ndim; d++)
            n *= (size_t)pt[i].shape[d];
        if (pt[i].off >= lo && pt[i].off < hi && pt[i].off + n > end) end = pt[i].off + n;
    }
    /* a pipeline rank holds only its windows of the parameters (m->win, ht_model_span), and
     * its optimizer state runs parallel to them (from o->off within them under cluster.shard) */
    const size_t at = end > lo ? ht_model_span(m, lo, end - lo) : 0;
    if (at == (size_t)-1) {
        free(pt);
        return ht_error(HT_ERUNTIME, "checkpoint shard [%zu, %zu): this rank holds parameters "
                                     "[%zu, %zu) in %d window(s), not these", lo, end, m->pbase,
                        m->pbase + m->pres, m->nwin);
    }
    bufs[0] = ht_xmalloc((end - lo ? end - lo : 1) * sizeof(float));
    if (end > lo) ht_buf_read(m->dev, m->params, at * sizeof(float), (end - lo) * sizeof(float),
                              bufs[0]);
    *nt = 0;
    for (int i = 0; rc == HT_OK && i < np; i++) {
        if (pt[i].off < lo || pt[i].off >= hi) continue;
        ht_st_tensor *x = &t[(*nt)++];
        size_t n = 1;
        snprintf(pname[*nt - 1], 96, "%s", pt[i].name);
        x->name = pname[*nt - 1];
        x->ndim = pt[i].ndim;
        for (int d = 0; d < pt[i].ndim; d++)
            n *= (size_t)(x->shape[d] = pt[i].shape[d]);
        x->data = bufs[0] + (pt[i].off - lo);
        rc = finite_or_refuse(pt[i].name, x->data, n, step);
    }
    free(pt);
    for (int i = 0; rc == HT_OK && i < ns; i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(o, i, &name, &buf, &n);
        /* every state runs parallel to the parameters; this rank may hold only the slice
         * [obase, obase + n) of it (cluster.shard, a pipeline stage) */
        size_t a = lo, b = hi;
        if (b == a) continue; /* an empty piece would share its name with the next one's */
        const size_t oa = ht_model_span(m, a, b - a);
        if (oa == (size_t)-1 || oa < o->off || oa - o->off + (b - a) > n) {
            rc = ht_error(HT_ERUNTIME, "checkpoint shard [%zu, %zu) of '%s': this rank holds "
                                       "[%zu, %zu) only", a, b, name, m->pbase + o->off,
                          m->pbase + o->off + n);
            break;
        }
        bufs[1 + i] = ht_xmalloc((b - a) * sizeof(float));
        ht_buf_read(m->dev, buf, (oa - o->off) * sizeof(float), (b - a) * sizeof(float),
                    bufs[1 + i]);
        ht_st_tensor *x = &t[(*nt)++];
        snprintf(pname[*nt - 1], 96, "%s%c%zu", name, HT_ST_SET_PIECE, a);
        x->name = pname[*nt - 1];
        x->ndim = 1;
        x->shape[0] = (int64_t)(b - a);
        x->data = bufs[1 + i];
        rc = finite_or_refuse(name, x->data, b - a, step);
    }
    return rc;
}

int ht_checkpoint_save_shard(const char *base, int i, int k, ht_model *m, ht_optim *o,
                             int64_t step, const char *optim_name, size_t lo, size_t hi) {
    int np = ht_model_param_tensors(m, NULL, 0), ns = ht_optim_state_count(o), nt = 0;
    if (ns > MAX_STATES) return ht_error(HT_ERUNTIME, "too many optimizer state tensors");
    ht_st_tensor *t = ht_xcalloc((size_t)(np + ns + 1), sizeof *t);
    char(*pname)[96] = ht_xmalloc((size_t)(np + ns + 1) * sizeof *pname);
    float *bufs[1 + MAX_STATES] = {0};
    int rc = shard_tensors(m, o, lo, hi, step, t, &nt, bufs, pname);
    char sig[256], st[32], ot[32], flat[MAX_STATES][96], total[MAX_STATES][32];
    const char *keys[5 + MAX_STATES], *vals[5 + MAX_STATES];
    ht_model_signature(m, sig, sizeof sig);
    snprintf(st, sizeof st, "%" PRId64, step);
    snprintf(ot, sizeof ot, "%" PRId64, o->t);
    const char *k0[] = {"format", "model", "optimizer", "step", "optimizer_steps"};
    const char *v0[] = {CKPT_FORMAT, sig, optim_name, st, ot};
    for (int j = 0; j < 5; j++)
        keys[j] = k0[j], vals[j] = v0[j];
    for (int j = 0; j < ns; j++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(o, j, &name, &buf, &n);
        snprintf(flat[j], sizeof flat[j], "set.flat.%s", name);
        (void)n;
        snprintf(total[j], sizeof total[j], "%zu", m->nparams); /* the flat whole */
        keys[5 + j] = flat[j], vals[5 + j] = total[j];
    }
    if (rc == HT_OK) rc = ht_st_set_write_shard(base, i, k, step, t, nt, keys, vals, 5 + ns);
    for (int j = 0; j < 1 + MAX_STATES; j++)
        free(bufs[j]);
    free(t);
    free(pname);
    return rc;
}

int ht_checkpoint_save_set(const char *base, int k, ht_model *m, ht_optim *o, int64_t step,
                           const char *optim_name) {
    size_t *cut = ht_xmalloc((size_t)(k + 1) * sizeof *cut);
    ht_checkpoint_shard_ranges(m, NULL, k, cut);
    int rc = ht_st_set_recover(base);
    for (int i = 0; rc == HT_OK && i < k; i++)
        rc = ht_checkpoint_save_shard(base, i + 1, k, m, o, step, optim_name, cut[i], cut[i + 1]);
    free(cut);
    return rc == HT_OK ? ht_st_set_commit(base, k, step) : rc;
}
