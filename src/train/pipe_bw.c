/* Zero-bubble schedules in the executor (see pipe_bw.h). */
#include "train/pipe_bw.h"

#include <stdio.h>

#include "core/err.h"
#include "core/log.h"
#include "nn/model.h"

int ht_pipe_bw_part(const ht_pipe_sched *s, int op, int rc) {
    const int split = ht_pipe_kind_split(s->p.kind) && !rc;
    if (op == HT_PI_BWD) return split ? HT_BW_INPUT : HT_BW_WHOLE;
    if (op != HT_PI_BWD_W) ht_die(HT_ERUNTIME, "pipe: ht_pipe_bw_part of instruction %d", op);
    /* the checker refuses a BWD_W in a kind without the split */
    return split ? HT_BW_WEIGHTS : -1;
}

void ht_pipe_log_zbhet(const ht_pipe_sched *s, const ht_pipe_params *p) {
    char buf[1024];
    int at = 0;
    for (int st = 0; st < s->S && at < (int)sizeof buf - 64; st++)
        at += snprintf(buf + at, sizeof buf - (size_t)at, "%s stage %d %.3g/%.3g/%.3g",
                       st ? ";" : "", st, p->stage_time[st] * 1e3, p->stage_b[st] * 1e3,
                       p->stage_w[st] * 1e3);
    ht_log_info("zb-het: F/B/W ms per micro-batch measured at start-up:%s", buf);
    ht_pipe_params q = {.kind = HT_PIPE_ZBH1, .D = s->p.D, .N = s->p.N, .v = 1};
    ht_pipe_sched o;
    ht_pipe_report z, h;
    if (ht_pipe_generate(&q, &o) != HT_OK) return;
    if (ht_pipe_check_fbw(s, p->stage_time, p->stage_b, p->stage_w, &z) == HT_OK &&
        ht_pipe_check_fbw(&o, p->stage_time, p->stage_b, p->stage_w, &h) == HT_OK)
        ht_log_info("zb-het under them: makespan %.4g ms, bubble %.1f%%; zb-h1 %.4g ms, bubble "
                    "%.1f%%",
                    z.makespan * 1e3, 100 * z.bubble, h.makespan * 1e3, 100 * h.bubble);
    ht_pipe_sched_free(&o);
}
