/* The layout of ranks under a synchronisation policy (plan/sync_layout.h). */
#include "plan/sync_layout.h"

#include <string.h>

#include "config/modes.h"
#include "core/err.h"
#include "core/log.h"

int ht_sync_layout_of(const ht_config *cfg, int world, ht_sync_layout *L) {
    memset(L, 0, sizeof *L);
    L->mode = cfg->sync.mode;
    L->world = world;
    L->extra = ht_sync_extra_ranks(L->mode, cfg->sync.servers);
    L->workers = world - L->extra;
    if (L->extra == 0) return HT_OK;
    /* the rules are ht_config_check_world's; a world they refuse never gets here */
    if (L->workers < 1 || world < 2 || cfg->train.batch < L->workers)
        return ht_error(HT_EINPUT, "sync.mode \"%s\": %d workers for a batch of %d on %d ranks",
                        ht_sync_mode_name(L->mode), L->workers, cfg->train.batch, world);
    if (ht_sync_rows[L->mode].family == HT_SYNC_FAM_GROUP && cfg->sync.group > L->workers)
        ht_log_warn("sync.group %d is more than the %d workers: groups hold every worker",
                    cfg->sync.group, L->workers);
    return HT_OK;
}

void ht_sync_local_range(const ht_config *cfg, const ht_sync_layout *L, int w, int *lo, int *hi) {
    int B = cfg->train.batch, W = L->workers ? L->workers : 1, q = B / W, r = B % W;
    *lo = w * q + (w < r ? w : r);
    *hi = *lo + q + (w < r);
}
