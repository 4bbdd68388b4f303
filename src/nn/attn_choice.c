/* Which attention kernels a transformer block uses (nn/ops_tf.h): pure, so that a model's
 * description (hetsim, the planner) sizes its saved state as the trainer does. */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "nn/ops_tf.h"

static ht_attn_kernels attn_force = HT_ATTN_AUTO;

void ht_attention_force(ht_attn_kernels k) { attn_force = k; }

ht_attn_kernels ht_attention_forced(void) { return attn_force; }

int ht_attention_fused(int T) {
    const char *e = getenv("HT_ATTN");
    if (e && *e) {
        if (!strcmp(e, "fused")) return 1;
        if (!strcmp(e, "full")) return 0;
        ht_die(HT_EINPUT, "HT_ATTN='%s': expected fused or full", e);
    }
    if (attn_force != HT_ATTN_AUTO) return attn_force == HT_ATTN_FUSED;
    return T >= HT_ATTN_FUSED_MIN_T;
}
