/* Resident parameter windows and chunk sizes (see model.h): a pipeline rank that runs several
 * stages keeps the parameters of their layers only, packed window after window in params and
 * grads; layers keep their global offsets and are mapped through the windows. A tied layer
 * (a GPT's head) whose shared tensor (wte) is not among its stages' parameters holds that
 * tensor as one more window: the copy the last stage keeps. */
#include <stdlib.h>

#include "core/err.h"
#include "nn/model.h"

/* The parameter range [*a, *e) of layers [lo, hi); 0 when they have none. */
static int layer_params(const ht_model *m, int lo, int hi, size_t *a, size_t *e) {
    int any = 0;
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) *a = l->woff;
        *e = l->woff + l->nparams, any = 1;
    }
    return any;
}

static int by_base(const void *x, const void *y) {
    const ht_pwin *a = x, *b = y;
    return a->base < b->base ? -1 : a->base > b->base;
}

/* win[nw..) += the ranges of the tensors the tied layers of [lo, hi) share (a GPT's head
 * reads wte: the last stage holds a copy of it, one more window); returns the new count. */
static int add_tied(const ht_model *m, int lo, int hi, ht_pwin *win, int nw, int cap) {
    for (int i = lo; i < hi; i++)
        for (int j = 0; j < m->layers[i].ntensors; j++) {
            const ht_param_tensor *t = &m->layers[i].t[j];
            if (!t->tied) continue;
            if (nw == cap) ht_die(HT_ERUNTIME, "nn: more than %d tied tensors", cap);
            size_t c = 1;
            for (int k = 0; k < t->ndim; k++)
                c *= (size_t)t->shape[k];
            win[nw++] = (ht_pwin){t->off, c, 0};
        }
    return nw;
}

/* win[0..nw) sorted, overlapping or touching ranges merged (a stage held twice: Chimera's
 * middle rank; chunks that touch; a tied tensor within a held stage), packed: their number,
 * the floats in *floats. */
static int pack(ht_pwin *win, int nw, size_t *floats) {
    qsort(win, (size_t)nw, sizeof *win, by_base);
    int w = 0;
    for (int k = 0; k < nw; k++) {
        if (w && win[k].base <= win[w - 1].base + win[w - 1].n) {
            const size_t e = win[k].base + win[k].n;
            if (e > win[w - 1].base + win[w - 1].n) win[w - 1].n = e - win[w - 1].base;
            continue;
        }
        win[w++] = win[k];
    }
    size_t at = 0;
    for (int k = 0; k < w; k++)
        win[k].at = at, at += win[k].n;
    *floats = at;
    return w;
}

/* The packed windows of tmp[0..nw) into out (at most HT_MODEL_MAX_WINDOWS survive: one per
 * chunk, the tied tensors merging with the embedding's or adding one). */
static int pack_out(ht_pwin *tmp, int nw, ht_pwin *out, size_t *floats) {
    const int w = pack(tmp, nw, floats);
    if (w > HT_MODEL_MAX_WINDOWS)
        ht_die(HT_ERUNTIME, "nn: %d parameter windows, more than %d", w, HT_MODEL_MAX_WINDOWS);
    for (int k = 0; k < w; k++)
        out[k] = tmp[k];
    return w;
}

int ht_model_chunk_windows(const ht_model *m, int n, const int *lo, const int *hi, ht_pwin *win,
                           size_t *floats) {
    enum { CAP = 4 * HT_MODEL_MAX_CHUNKS };
    ht_pwin tmp[CAP];
    int nw = 0;
    for (int k = 0; k < n && k < HT_MODEL_MAX_CHUNKS; k++) {
        size_t a = 0, e = 0;
        if (layer_params(m, lo[k], hi[k], &a, &e)) tmp[nw++] = (ht_pwin){a, e - a, 0};
        nw = add_tied(m, lo[k], hi[k], tmp, nw, CAP);
    }
    return pack_out(tmp, nw, win, floats);
}

int ht_model_stage_windows(const ht_model *m, size_t pbase, size_t pres, int lo, int hi,
                           ht_pwin *win, size_t *floats) {
    enum { CAP = 4 * HT_MODEL_MAX_CHUNKS };
    ht_pwin tmp[CAP];
    int nw = 0;
    if (pres) tmp[nw++] = (ht_pwin){pbase, pres, 0};
    nw = add_tied(m, lo, hi, tmp, nw, CAP);
    return pack_out(tmp, nw, win, floats);
}

void ht_model_chunk_floats(const ht_model *m, int n, const int *lo, const int *hi, int B,
                           size_t *act, size_t *save, size_t *work) {
    *act = *save = *work = 0;
    for (int k = 0; k < n; k++) {
        size_t a, s, w;
        ht_model_stage_floats(m, lo[k], hi[k], B, &a, &s, &w);
        if (a > *act) *act = a;
        if (s > *save) *save = s;
        if (w > *work) *work = w;
    }
}

size_t ht_model_span(const ht_model *m, size_t off, size_t n) {
    for (int k = 0; k < m->nwin; k++) {
        const ht_pwin *w = &m->win[k];
        if (off >= w->base && off + n <= w->base + w->n) return w->at + (off - w->base);
    }
    return (size_t)-1;
}
