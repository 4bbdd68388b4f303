/* Data-parallel sharding in the plan (plan/zero_mem.h). */
#include "plan/zero_mem.h"

#include <math.h>
#include <stdlib.h>

#include "config/modes.h"
#include "core/err.h"
#include "plan/buckets.h"
#include "plan/exec_mem.h"

void ht_plan_shard_cuts(size_t n, const double *weight, int k, size_t *cut) {
    double sum = 0, acc = 0;
    for (int i = 0; i < k; i++)
        sum += weight[i];
    cut[0] = 0;
    cut[k] = n;
    for (int i = 1; i < k; i++) {
        acc += weight[i - 1];
        size_t c = (size_t)((double)n * acc / sum) / 8 * 8; /* the update's float8 loads */
        cut[i] = c < cut[i - 1] ? cut[i - 1] : c > n ? n : c;
    }
}

int ht_plan_zero_init(const ht_config *cfg, int world) {
    const ht_config *c = cfg;
    const int may_exclude =
        c->cluster.exclude_slow && c->cluster.split == HT_SPLIT_SPEED && !c->cluster.nshares;
    return c->cluster.shard != HT_SHARD_NONE && world > 1 && !may_exclude;
}

int ht_plan_buckets(const ht_config *cfg, const ht_model *m, ht_bucket **out) {
    const double mib = 1024.0 * 1024.0; /* cluster.bucket_*_mb, as sync/bsp.c cuts them */
    const size_t first = (size_t)ceil(cfg->cluster.bucket_first_mb * mib);
    const size_t cap = (size_t)ceil(cfg->cluster.bucket_cap_mb * mib);
    const int nb = ht_reduce_plan(m, first, cap, NULL, 0);
    *out = ht_xcalloc((size_t)(nb ? nb : 1), sizeof **out);
    ht_reduce_plan(m, first, cap, *out, nb);
    return nb;
}

int ht_plan_zero2_windowed(const ht_config *cfg, const ht_model *m) {
    return cfg->cluster.shard == HT_SHARD_GRADIENTS && cfg->cluster.overlap && !m->tied;
}

size_t ht_plan_zero2_grad(const ht_config *cfg, const ht_model *m, size_t lo, size_t hi,
                          size_t *wlo, size_t *whi, size_t *stage) {
    ht_bucket *b;
    const int nb = ht_plan_buckets(cfg, m, &b);
    size_t a, z, st;
    ht_reduce_window(b, nb, lo, hi, &a, &z, &st);
    free(b);
    if (wlo) *wlo = a;
    if (whi) *whi = z;
    if (stage) *stage = st;
    /* the other buckets pass through the same buffer (sync/bsp.c): at least the largest */
    return z - a > st ? z - a : st;
}

double ht_plan_dp_rank_bytes(const ht_config *cfg, const ht_model *m, int B, int opt_states,
                             int world, const double *weight, int r, size_t *lo, size_t *hi) {
    double bytes = ht_plan_whole_bytes(m, B, opt_states);
    const size_t n = m->nparams;
    size_t a = 0, z = n;
    if (ht_plan_zero_init(cfg, world)) {
        size_t *cut = ht_xmalloc((size_t)(world + 1) * sizeof *cut);
        ht_plan_shard_cuts(n, weight, world, cut);
        a = cut[r], z = cut[r + 1];
        free(cut);
        bytes -= (double)(n - (z - a)) * sizeof(float) * opt_states;
        if (ht_plan_zero2_windowed(cfg, m))
            bytes -= (double)(n - ht_plan_zero2_grad(cfg, m, a, z, NULL, NULL, NULL)) *
                     sizeof(float);
    }
    if (lo) *lo = a;
    if (hi) *hi = z;
    return bytes;
}
