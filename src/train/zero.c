/* cluster.shard (ZeRO): the slices of the optimizer state, in proportion to device memory. */
#include "train/zero.h"

#include <stdlib.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "plan/zero_mem.h"
#include "train/checkpoint.h"

int ht_zero_check(ht_job *j) {
    j->eng.peak_from_model = 1;
    const ht_config *c = j->cfg;
    /* only a speed split without explicit shares can leave a rank out */
    const int may_exclude =
        c->cluster.exclude_slow && c->cluster.split == HT_SPLIT_SPEED && !c->cluster.nshares;
    j->eng.zero_init = c->cluster.shard != HT_SHARD_NONE && j->world > 1 && !may_exclude;
    return HT_OK;
}

size_t *ht_zero_cut(ht_job *j) {
    const int w = ht_comm_size(), r = ht_comm_rank();
    double mine = j->cfg->device.memory_mb > 0 ? j->cfg->device.memory_mb
                                               : (double)ht_dev_info(j->dev)->global_mem / 1e6;
    double *all = ht_xmalloc((size_t)w * sizeof *all);
    ht_comm_allgather(&mine, sizeof mine, all);
    size_t *cut = ht_xmalloc((size_t)(w + 1) * sizeof *cut);
    ht_checkpoint_shard_cuts(j->model.nparams, all, w, cut);
    ht_log_info("cluster.shard: rank %d keeps the optimizer state of parameters [%zu, %zu) "
                "(%.1f%% of %zu; device memory %.0f MB)",
                r, cut[r], cut[r + 1],
                100.0 * (double)(cut[r + 1] - cut[r]) /
                    (double)(j->model.nparams ? j->model.nparams : 1),
                j->model.nparams, mine);
    free(all);
    return cut;
}

void ht_zero_setup(ht_job *j, int rc) {
    ht_comm_exit_if_any(rc); /* the cut is collective: no rank may have left */
    j->eng.zero_cut = ht_zero_cut(j);
    ht_model *m = &j->model;
    const ht_config *c = j->cfg;
    /* the bucketed ZeRO-2 path only; a tied head writes wte's gradient from another bucket */
    if (!ht_plan_zero2_windowed(c, m)) return;
    const size_t *cut = j->eng.zero_cut;
    size_t wlo, whi, stage;
    const size_t gres = ht_plan_zero2_grad(c, m, cut[j->rank], cut[j->rank + 1], &wlo, &whi,
                                           &stage);
    ht_model_grad_window(m, wlo, gres);
    ht_log_info("cluster.shard = gradients: rank %d holds the gradients of [%zu, %zu) (its "
                "slice's buckets; the other buckets, at most %zu floats, pass through the same "
                "buffer): %zu bytes instead of %zu",
                j->rank, wlo, whi, stage, gres * sizeof(float), m->nparams * sizeof(float));
}

void ht_zero_backward(ht_job *j, int B, float grad_scale) {
    ht_model *m = &j->model;
    if (!m->gwin) {
        ht_model_backward(m, B, grad_scale);
        return;
    }
    ht_bucket *b;
    const int nb = ht_plan_buckets(j->cfg, m, &b);
    for (int k = 0; k < nb; k++) {
        const float sc = k == 0 ? grad_scale : 1.0f; /* scales the top gradient, once */
        if (b[k].off >= m->gbase && b[k].off + b[k].n <= m->gbase + m->gres)
            ht_model_backward_range(m, b[k].lo, b[k].hi, B, sc, 0);
        else /* through the buffer's start, as bsp does */
            ht_model_backward_into(m, b[k].lo, b[k].hi, B, sc, m->grads, b[k].off);
    }
    ht_dev_finish(m->dev);
    free(b);
}
