/* cluster.shard (ZeRO): the slices of the optimizer state, in proportion to device memory. */
#include "train/zero.h"

#include <stdlib.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
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
