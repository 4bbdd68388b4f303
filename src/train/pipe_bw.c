/* Zero-bubble schedules in the executor (see pipe_bw.h). */
#include "train/pipe_bw.h"

#include "core/err.h"
#include "nn/model.h"

int ht_pipe_bw_part(const ht_pipe_sched *s, int op, int rc) {
    const int split = ht_pipe_kind_split(s->p.kind) && !rc;
    if (op == HT_PI_BWD) return split ? HT_BW_INPUT : HT_BW_WHOLE;
    if (op != HT_PI_BWD_W) ht_die(HT_ERUNTIME, "pipe: ht_pipe_bw_part of instruction %d", op);
    /* the checker refuses a BWD_W in a kind without the split */
    return split ? HT_BW_WEIGHTS : -1;
}
