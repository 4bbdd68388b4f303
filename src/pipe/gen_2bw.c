/* PipeDream-2BW streams and its version rule (see sched_2bw.h). */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/internal.h"
#include "pipe/sched_2bw.h"

int64_t ht_pipe_2bw_version(int64_t batch) { return batch > 1 ? batch - 1 : 0; }

static int check_2bw(const ht_pipe_params *p) {
    if (p->D < 1 || p->N < 1)
        return ht_error(HT_EINPUT, "schedule \"2bw\": %d stages, %d micro-batches; both must be "
                                   ">= 1",
                        p->D, p->N);
    char why[512];
    if (ht_pipe_kind_shape(HT_PIPE_2BW, p->D, p->N, p->v, why, sizeof why) != HT_OK) /* N >= D */
        return ht_error(HT_EINPUT, "%s", why);
    return HT_OK;
}

int ht_pipe_gen_2bw(const ht_pipe_params *p, ht_pipe_sched *s) {
    int rc = check_2bw(p);
    if (rc) return rc;
    int *w = ht_xmalloc((size_t)p->D * sizeof *w);
    for (int r = 0; r < p->D; r++)
        w[r] = p->D - 1 - r;
    ht_pipe_emit_warmup(s, p->D, p->N, w);
    free(w);
    return HT_OK;
}

/* ---------------------------------------------------------------- the period stream */

static void sched_alloc(ht_pipe_sched *s, const ht_pipe_params *p, int N) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->p.kind = HT_PIPE_2BW, s->p.v = 1, s->p.N = N;
    s->p.stage_time = NULL, s->p.max_inflight = NULL;
    s->S = p->D, s->ndir = 1;
    s->len = ht_xcalloc((size_t)p->D, sizeof *s->len);
    s->ins = ht_xcalloc((size_t)p->D, sizeof *s->ins);
    s->nbuf = ht_xcalloc((size_t)p->D, sizeof *s->nbuf);
    s->mb_dir = ht_xcalloc((size_t)N, sizeof *s->mb_dir);
}

/* Slot of micro-batch k when w + 1 consecutive micro-batches of the endless sequence are in
 * flight: N is cut into q = floor(N / (w+1)) blocks of near-equal size (each >= w + 1) and a
 * micro-batch's slot is its place in its block. Any w + 1 consecutive ones, across a block
 * or a period boundary, get different slots; ceil(N / q) slots in all. */
static int slot_of(int N, int w, int k, int *nslots) {
    int q = N / (w + 1), small = N / q, big = N % q; /* the first `big` blocks hold small + 1 */
    *nslots = big ? small + 1 : small;
    int edge = big * (small + 1);
    return k < edge ? k % (small + 1) : (k - edge) % small;
}

static void push_fwd(ht_pipe_sched *s, int r, int k, int b) {
    int D = s->p.D;
    if (r == 0) ht_pipe_push(s, r, HT_PI_LOAD, 0, 0, k, -1, b);
    else ht_pipe_push(s, r, HT_PI_RECV_ACT, 0, r, k, r - 1, b);
    if (r == D - 1 && D > 1) ht_pipe_push(s, r, HT_PI_LOAD, 0, r, k, -1, b);
    ht_pipe_push(s, r, HT_PI_FWD, 0, r, k, -1, b);
    if (r < D - 1) ht_pipe_push(s, r, HT_PI_SEND_ACT, 0, r, k, r + 1, b);
}

static void push_bwd(ht_pipe_sched *s, int r, int mb, int b) {
    if (r < s->p.D - 1) ht_pipe_push(s, r, HT_PI_RECV_GRAD, 0, r, mb, r + 1, b);
    ht_pipe_push(s, r, HT_PI_BWD, 0, r, mb, -1, b);
    if (r > 0) ht_pipe_push(s, r, HT_PI_SEND_GRAD, 0, r, mb, r - 1, b);
}

int ht_pipe_2bw_steady(const ht_pipe_params *p, ht_pipe_sched *s) {
    int rc = check_2bw(p);
    if (rc) return rc;
    int D = p->D, N = p->N;
    sched_alloc(s, p, N);
    for (int r = 0; r < D; r++) {
        int w = D - 1 - r, ns = 1;
        for (int k = 0; k < N; k++) {
            push_fwd(s, r, k, slot_of(N, w, k, &ns));
            int g = k - w, kk = g < 0 ? g + N : g; /* the backward's micro-batch */
            push_bwd(s, r, g, slot_of(N, w, kk, &ns));
            if (kk == N - 1) {
                ht_pipe_push(s, r, HT_PI_REDUCE_GRADS, 0, r, -1, -1, -1);
                ht_pipe_push(s, r, HT_PI_OPT_STEP, 0, -1, -1, -1, -1);
            }
        }
        s->nbuf[r] = ns;
    }
    return HT_OK;
}

int ht_pipe_2bw_batch(const ht_pipe_sched *steady, int r, int i) {
    const ht_pipe_instr *v = steady->ins[r];
    switch ((ht_pipe_op)v[i].op) {
    case HT_PI_RECV_GRAD:
    case HT_PI_RECOMPUTE: /* pipe/transform.h: before its BWD, of the same batch */
    case HT_PI_BWD:
    case HT_PI_SEND_GRAD: return v[i].mb < 0 ? -1 : 0;
    case HT_PI_REDUCE_GRADS:
    case HT_PI_OPT_STEP:
        for (int j = i - 1; j >= 0; j--)
            if (v[j].op == HT_PI_BWD) return v[j].mb < 0 ? -1 : 0;
        return 0;
    default: return 0;
    }
}

int ht_pipe_2bw_unroll(const ht_pipe_sched *steady, int T, ht_pipe_sched *out) {
    if (T < 1) return ht_error(HT_EINPUT, "2bw unroll: %d batches; need at least 1", T);
    int D = steady->p.D, N = steady->p.N;
    sched_alloc(out, &steady->p, T * N);
    for (int r = 0; r < D; r++) {
        for (int t = 0; t <= T; t++)
            for (int i = 0; i < steady->len[r]; i++) {
                ht_pipe_instr in = steady->ins[r][i];
                int b = t + ht_pipe_2bw_batch(steady, r, i);
                if (b < 0 || b >= T) continue;
                if (in.op == HT_PI_REDUCE_GRADS || in.op == HT_PI_OPT_STEP) {
                    if (b != T - 1) continue;
                } else {
                    in.mb = b * N + (in.mb < 0 ? in.mb + N : in.mb);
                }
                ht_pipe_push(out, r, in.op, in.dir, in.stage, in.mb, in.peer, in.buf);
            }
        out->nbuf[r] = steady->nbuf[r];
    }
    return HT_OK;
}
