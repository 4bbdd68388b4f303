/* Stage boundaries (see bounds.h). */
#include "pipe/bounds.h"

#include <float.h>
#include <stdlib.h>

#include "core/err.h"
#include "nn/layer.h"

int ht_pipe_can_cut(const ht_model *m, int i) {
    if (i <= 0 || i >= m->nlayers) return 0;
    const ht_layer *l = &m->layers[i], *p = &m->layers[i - 1];
    int act = l->kind == HT_LAYER_RELU || l->kind == HT_LAYER_GELU;
    return !(act && p->ops && p->ops->fuses_act);
}

int ht_pipe_max_stages(const ht_model *m) {
    int n = 1;
    for (int i = 1; i < m->nlayers; i++)
        n += ht_pipe_can_cut(m, i);
    return n;
}

/* Forward + backward FLOPs per sample of layers [lo, hi). */
static double cost(const ht_model *m, int lo, int hi) {
    double f = 0;
    for (int i = lo; i < hi; i++)
        f += ht_layer_flops_forward(&m->layers[i]) + ht_layer_flops_backward(&m->layers[i], i > 0);
    return f;
}

/* The cut points: unit k starts at layer start[k]; returns the number of units. */
static int units(const ht_model *m, int *start) {
    int n = 0;
    start[n++] = 0;
    for (int i = 1; i < m->nlayers; i++)
        if (ht_pipe_can_cut(m, i)) start[n++] = i;
    start[n] = m->nlayers;
    return n;
}

/* Minimises the largest stage cost over S contiguous groups of the U units (O(S U^2)). */
static void balanced(const ht_model *m, const int *start, int U, int S, int *bounds) {
    double *best = ht_xmalloc((size_t)(S + 1) * (size_t)(U + 1) * sizeof(double));
    int *from = ht_xmalloc((size_t)(S + 1) * (size_t)(U + 1) * sizeof(int));
#define AT(a, b) ((size_t)(a) * (size_t)(U + 1) + (size_t)(b))
    for (int s = 0; s <= S; s++)
        for (int u = 0; u <= U; u++)
            best[AT(s, u)] = DBL_MAX, from[AT(s, u)] = -1;
    best[AT(0, 0)] = 0;
    for (int s = 1; s <= S; s++)
        for (int u = s; u <= U - (S - s); u++) /* s stages over the first u units */
            for (int k = s - 1; k < u; k++) {
                if (best[AT(s - 1, k)] == DBL_MAX) continue;
                double c = cost(m, start[k], start[u]);
                double v = best[AT(s - 1, k)] > c ? best[AT(s - 1, k)] : c;
                if (v < best[AT(s, u)]) best[AT(s, u)] = v, from[AT(s, u)] = k;
            }
    for (int s = S, u = U; s > 0; s--) {
        bounds[s] = start[u];
        u = from[AT(s, u)];
    }
    bounds[0] = 0;
#undef AT
    free(best);
    free(from);
}

int ht_pipe_bounds(const ht_model *m, int S, int how, int *bounds) {
    int *start = ht_xmalloc((size_t)(m->nlayers + 1) * sizeof(int));
    int U = units(m, start);
    if (S < 1 || S > U) {
        free(start);
        return ht_error(HT_EINPUT,
                        "key 'pipe.stages' (x pipe.chunks): %d stages asked for, but model '%s' "
                        "can be cut into at most %d (a layer and its fused activation stay "
                        "together)",
                        S, m->desc, U);
    }
    if (how == HT_PIPE_BALANCED) {
        balanced(m, start, U, S, bounds);
    } else {
        for (int s = 0, u = 0; s < S; s++) {
            bounds[s] = start[u];
            u += U / S + (s < U % S);
        }
        bounds[S] = m->nlayers;
    }
    free(start);
    return HT_OK;
}

int ht_pipe_bounds_explicit(const ht_model *m, const int *first, int n, const char *where,
                            int *bounds) {
    bounds[0] = 0;
    for (int k = 0; k < n; k++) {
        int b = first[k];
        if (b <= bounds[k] || b >= m->nlayers || !ht_pipe_can_cut(m, b))
            return ht_error(HT_EINPUT,
                            "%s: key 'pipe.boundaries'[%d]: found %d, expected a layer index "
                            "above %d and below %d where a stage may start (not an activation "
                            "fused with the layer before it)",
                            where, k, b, bounds[k], m->nlayers);
        bounds[k + 1] = b;
    }
    bounds[n + 1] = m->nlayers;
    return HT_OK;
}
