/* Resident parameter windows and chunk sizes (see model.h): a pipeline rank that runs several
 * stages keeps the parameters of their layers only, packed window after window in params and
 * grads; layers keep their global offsets and are mapped through the windows. */
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

int ht_model_chunk_windows(const ht_model *m, int n, const int *lo, const int *hi, ht_pwin *win,
                           size_t *floats) {
    int nw = 0;
    for (int k = 0; k < n; k++) {
        size_t a = 0, e = 0;
        if (layer_params(m, lo[k], hi[k], &a, &e)) win[nw++] = (ht_pwin){a, e - a, 0};
    }
    qsort(win, (size_t)nw, sizeof *win, by_base);
    int w = 0; /* merged: a stage held twice (Chimera's middle rank) or chunks that touch */
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
    if (m->tail_n && off >= m->tail_off && off + n <= m->tail_off + m->tail_n)
        return m->pres + (off - m->tail_off); /* the tied copy after the windows */
    return (size_t)-1;
}
