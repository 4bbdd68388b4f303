/* Post-passes on generated schedules (see transform.h). */
#include "pipe/transform.h"

#include <stdlib.h>

#include "core/err.h"

void ht_pipe_add_recompute(ht_pipe_sched *s, const uint8_t *recompute) {
    for (int r = 0; r < s->p.D; r++) {
        if (!recompute[r]) continue;
        const ht_pipe_instr *v = s->ins[r];
        int n = s->len[r], nb = 0;
        for (int i = 0; i < n; i++)
            nb += v[i].op == HT_PI_BWD;
        ht_pipe_instr *out = ht_xmalloc((size_t)(n + nb) * sizeof *out);
        int k = 0;
        for (int i = 0; i < n; i++) {
            const ht_pipe_instr *b = &v[i];
            if (b->op == HT_PI_RECV_GRAD && i + 1 < n && v[i + 1].op == HT_PI_BWD)
                b = &v[i + 1]; /* before the gradient's wait */
            else if (b->op != HT_PI_BWD || (i > 0 && v[i - 1].op == HT_PI_RECV_GRAD))
                b = NULL;
            if (b) {
                out[k] = *b;
                out[k++].op = HT_PI_RECOMPUTE;
            }
            out[k++] = v[i];
        }
        free(s->ins[r]);
        s->ins[r] = out;
        s->len[r] = k;
    }
}
