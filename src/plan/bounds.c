/* Stage boundaries (see bounds.h). */
#include "plan/bounds.h"

#include <stdlib.h>

#include "core/err.h"
#include "nn/model.h"
#include "plan/partition.h"

int ht_pipe_can_cut(const ht_model *m, int i) {
    return i > 0 && i < m->nlayers && !ht_model_fused_with_below(m, i);
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
    /* the cuts over units: src/plan's partitions, by count or by FLOPs */
    int *ub = ht_xmalloc((size_t)(S + 1) * sizeof(int));
    int rc;
    if (how == HT_PIPE_BALANCED) {
        double *c = ht_xmalloc((size_t)U * sizeof(double));
        for (int u = 0; u < U; u++)
            c[u] = cost(m, start[u], start[u + 1]);
        rc = ht_part_balanced(U, S, c, ub);
        free(c);
    } else {
        rc = ht_part_uniform(U, S, ub);
    }
    for (int s = 0; s <= S; s++)
        bounds[s] = start[ub[s]];
    free(ub);
    free(start);
    return rc;
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
