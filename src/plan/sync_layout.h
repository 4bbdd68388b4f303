/* Who does what in a job under a synchronisation policy (pure; part of the plan, plan/job.h):
 * the workers and the ranks that serve them (parameter servers or one coordinator), and each
 * worker's rows of a global batch. The policies (src/sync) run on this layout. */
#ifndef HT_PLAN_SYNC_LAYOUT_H
#define HT_PLAN_SYNC_LAYOUT_H

#include "config/config.h"

/* Who does what in a job of `world` ranks. */
typedef struct ht_sync_layout {
    ht_sync_mode mode;
    int world;   /* ranks */
    int workers; /* ranks 0 .. workers-1 train */
    int extra;   /* ranks workers .. world-1 serve (0 for bsp) */
} ht_sync_layout;

/* The layout of cfg's sync.mode over world ranks. The rules (enough ranks, no cluster.shares
 * or split "speed" outside bsp) are ht_config_check_world's, made before: HT_EINPUT here only
 * for a world they would have refused. (ht_sync_mode_name: config/modes.h.) */
int ht_sync_layout_of(const ht_config *cfg, int world, ht_sync_layout *L);
/* Worker w's rows [lo, hi) of a global batch: train.batch split equally over the workers
 * (the first batch % workers take one more). */
void ht_sync_local_range(const ht_config *cfg, const ht_sync_layout *L, int w, int *lo, int *hi);

#endif
