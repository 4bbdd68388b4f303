/* The single-direction schedules: GPipe, 1F1B (PipeDream-Flush) and Megatron's interleaved
 * 1F1B. Each only orders FWD / BWD per rank; ht_pipe_emit adds the rest. */
#include <stdlib.h>

#include "core/err.h"
#include "pipe/internal.h"

/* GPipe (Huang et al., NeurIPS 2019): every rank runs all N forwards, then all N backwards in
 * reverse order (the last forward's activations are the freshest, and on the last stage its
 * backward can start at once). N slots in flight on every rank. */
int ht_pipe_gen_gpipe(const ht_pipe_params *p, ht_pipe_sched *s) {
    ht_pipe_order o;
    ht_pipe_order_init(&o, p->D);
    for (int r = 0; r < p->D; r++) {
        for (int m = 0; m < p->N; m++)
            ht_pipe_order_add(&o, r, HT_PI_FWD, 0, r, m);
        for (int m = p->N - 1; m >= 0; m--)
            ht_pipe_order_add(&o, r, HT_PI_BWD, 0, r, m);
    }
    ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
    return HT_OK;
}

/* 1F1B with per-rank warm-up depths (internal.h): 1F1B, HePipe and 2BW share it. */
void ht_pipe_order_warmup(ht_pipe_order *o, int D, int N, const int *w) {
    for (int r = 0; r < D; r++) {
        int ws = w[r] < N ? w[r] : N;
        for (int k = 0; k < ws; k++)
            ht_pipe_order_add(o, r, HT_PI_FWD, 0, r, k);
        for (int i = 0; i < N - ws; i++) {
            ht_pipe_order_add(o, r, HT_PI_FWD, 0, r, ws + i);
            ht_pipe_order_add(o, r, HT_PI_BWD, 0, r, i);
        }
        for (int k = N - ws; k < N; k++)
            ht_pipe_order_add(o, r, HT_PI_BWD, 0, r, k);
    }
}

void ht_pipe_emit_warmup(ht_pipe_sched *s, int D, int N, const int *w) {
    ht_pipe_order o;
    ht_pipe_order_init(&o, D);
    ht_pipe_order_warmup(&o, D, N, w);
    ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
}

/* PipeDream-Flush / 1F1B (Narayanan et al., ICML 2021; DeepSpeed's TrainSchedule): rank r
 * first runs min(N, D-1-r) warm-up forwards, then alternates one forward and one backward,
 * then drains the remaining backwards. At most min(N, D-r) micro-batches are in flight on
 * rank r, against N for GPipe, for the same makespan 2(N+D-1) at F = B = 1. */
static void order_1f1b(ht_pipe_order *o, int D, int N) {
    int *w = ht_xmalloc((size_t)D * sizeof *w);
    for (int r = 0; r < D; r++)
        w[r] = D - 1 - r;
    ht_pipe_order_warmup(o, D, N, w);
    free(w);
}

int ht_pipe_gen_1f1b(const ht_pipe_params *p, ht_pipe_sched *s) {
    ht_pipe_order o;
    ht_pipe_order_init(&o, p->D);
    order_1f1b(&o, p->D, p->N);
    ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
    return HT_OK;
}

/* Interleaved 1F1B (Narayanan et al., SC'21; Megatron-LM's
 * forward_backward_pipelining_with_interleaving): the model is cut into S = vD stages, stage
 * s on rank s % D as the rank's chunk s / D. A rank walks its vN forward "virtual
 * micro-batches" k in groups of D micro-batches per chunk: k -> chunk (k mod vD) / D,
 * micro-batch (k div vD) D + k mod D; backwards walk the chunks in reverse. Warm-up is
 * 2(D-1-r) + (v-1)D forwards (all vN when N = D, as Megatron does), then one forward and one
 * backward alternate. That needs N a multiple of D: each group must hold D micro-batches.
 * The bubble shrinks to (D-1)/(vN) of the ideal time. v = 1 is plain 1F1B. */
static void interleaved_cop(int k, int D, int v, int r, int fwd, int *stage, int *mb) {
    int g = k % (D * v), chunk = g / D;
    if (!fwd) chunk = v - 1 - chunk;
    *stage = chunk * D + r;
    *mb = k / (D * v) * D + k % D;
}

int ht_pipe_gen_interleaved(const ht_pipe_params *p, ht_pipe_sched *s) {
    int D = p->D, N = p->N, v = p->v;
    char why[512];
    if (ht_pipe_kind_shape(p->kind, D, N, v, why, sizeof why) != HT_OK) /* N a multiple of D */
        return ht_error(HT_EINPUT, "%s", why);
    ht_pipe_order o;
    ht_pipe_order_init(&o, D);
    if (v == 1) order_1f1b(&o, D, N);
    else
        for (int r = 0; r < D; r++) {
            int total = N * v, st, mb;
            int w = N == D ? total : 2 * (D - 1 - r) + (v - 1) * D;
            if (w > total) w = total;
            for (int k = 0; k < w; k++) {
                interleaved_cop(k, D, v, r, 1, &st, &mb);
                ht_pipe_order_add(&o, r, HT_PI_FWD, 0, st, mb);
            }
            for (int k = 0; k < total - w; k++) {
                interleaved_cop(k + w, D, v, r, 1, &st, &mb);
                ht_pipe_order_add(&o, r, HT_PI_FWD, 0, st, mb);
                interleaved_cop(k, D, v, r, 0, &st, &mb);
                ht_pipe_order_add(&o, r, HT_PI_BWD, 0, st, mb);
            }
            for (int k = total - w; k < total; k++) {
                interleaved_cop(k, D, v, r, 0, &st, &mb);
                ht_pipe_order_add(&o, r, HT_PI_BWD, 0, st, mb);
            }
        }
    ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
    return HT_OK;
}
