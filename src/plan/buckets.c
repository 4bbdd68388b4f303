/* The data-parallel gradient buckets (see buckets.h). */
#include "plan/buckets.h"

/* 1 when every layer's parameters are [woff, woff + nparams) and the layers follow each
 * other in the flat buffer: then layers [lo, hi) own one contiguous range of it. */
static int layout_contiguous(const ht_model *m) {
    size_t next = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (l->woff != next) return 0;
        next = l->woff + l->nparams;
    }
    return next == m->nparams;
}

/* Gradient range of layers [lo, hi) (contiguous layout). */
static void range_of(const ht_model *m, int lo, int hi, size_t *off, size_t *n) {
    size_t a = 0, b = 0;
    int any = 0;
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) a = l->woff;
        b = l->woff + l->nparams;
        any = 1;
    }
    *off = any ? a : 0;
    *n = any ? b - a : 0;
}

int ht_reduce_plan(const ht_model *m, size_t first_bytes, size_t cap_bytes, ht_bucket *out,
                   int max) {
    int nb = 0;
    if (!layout_contiguous(m)) {
        if (max > 0) out[0] = (ht_bucket){0, m->nlayers, 0, m->nparams};
        return 1;
    }
    int hi = m->nlayers;
    size_t bytes = 0;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        bytes += m->layers[i].nparams * sizeof(float);
        size_t limit = nb == 0 ? first_bytes : cap_bytes;
        if (i == 0 || (bytes >= limit && !ht_model_fused_with_below(m, i))) {
            if (nb < max) {
                out[nb] = (ht_bucket){i, hi, 0, 0};
                range_of(m, i, hi, &out[nb].off, &out[nb].n);
            }
            nb++;
            hi = i;
            bytes = 0;
        }
    }
    return nb;
}

void ht_reduce_window(const ht_bucket *b, int nb, size_t lo, size_t hi, size_t *wlo, size_t *whi,
                      size_t *stage) {
    size_t a = lo, z = lo, st = 0;
    int any = 0;
    for (int k = 0; k < nb; k++) {
        if (!b[k].n) continue;
        const size_t e = b[k].off + b[k].n;
        if (lo < hi && b[k].off < hi && e > lo) { /* intersects the (non-empty) slice */
            if (!any || b[k].off < a) a = b[k].off;
            if (!any || e > z) z = e;
            any = 1;
        } else if (b[k].n > st) {
            st = b[k].n;
        }
    }
    *wlo = a, *whi = any ? z : a, *stage = st;
}
