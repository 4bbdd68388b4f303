/* What the schedule generators share inside src/pipe (not for the executor or the simulator):
 * the generator signature behind ht_pipe_generate's table, and the builder that turns a
 * per-rank order of compute operations into full instruction streams (LOAD, RECV / SEND
 * pairs, slot ids, REDUCE_GRADS after each chunk's last BWD, the final OPT_STEP). A generator
 * only decides the order of FWD / BWD (/ RECOMPUTE) on each rank; everything else follows
 * from that order, so every kind gets the same communication and slot rules. */
#ifndef HT_PIPE_INTERNAL_H
#define HT_PIPE_INTERNAL_H

#include "pipe/schedule.h"

/* Fills s->mb_dir and the streams for parameters p that ht_pipe_generate already checked
 * for the common ranges (D, N, v >= 1, v == 1 unless the kind allows chunks). s arrives
 * with S, ndir, p set and len / ins / nbuf / mb_dir allocated and zeroed. Returns HT_OK or
 * HT_EINPUT (ht_error) for a combination the scheme does not allow; ht_pipe_generate frees
 * s on error. */
typedef int (*ht_pipe_gen_fn)(const ht_pipe_params *p, ht_pipe_sched *s);

/* Number of pipelines (1 or 2) and chunks per rank of a kind: needed before generating. */
int ht_pipe_kind_ndir(int kind);

/* One operation in a rank's order: HT_PI_FWD, HT_PI_BWD, HT_PI_BWD_W (split kinds) or
 * HT_PI_RECOMPUTE (mb, stage, dir),
 * or HT_PI_REDUCE_GRADS (stage, dir; mb -1) when the generator places reductions itself. */
typedef struct ht_pipe_cop {
    int op, dir, stage, mb;
} ht_pipe_cop;

/* A growable list of compute operations per rank. */
typedef struct ht_pipe_order {
    int D;
    int *n, *cap;
    ht_pipe_cop **op; /* [D][n[r]] */
} ht_pipe_order;

void ht_pipe_order_init(ht_pipe_order *o, int D);
void ht_pipe_order_add(ht_pipe_order *o, int rank, int op, int dir, int stage, int mb);
void ht_pipe_order_free(ht_pipe_order *o);

/* Appends one instruction to rank r's stream. */
void ht_pipe_push(ht_pipe_sched *s, int r, int op, int dir, int stage, int mb, int peer, int buf);

/* Builds every rank's stream from o (see the top of this file): before a FWD its input
 * (LOAD on stage 0, else RECV_ACT from the previous stage's rank) and on the last stage the
 * labels' LOAD, after it SEND_ACT unless last; before a BWD its RECV_GRAD unless last, after
 * it SEND_GRAD unless first; a slot is taken (lowest free id) at the FWD's input and given
 * back after the BWD's SEND_GRAD (stage 0: after the BWD; split kinds: after the BWD_W);
 * REDUCE_GRADS of each chunk right after its last BWD (split kinds: BWD_W) and SEND_GRAD,
 * so the reduction overlaps what the rank still has to do, unless rank r's order holds
 * REDUCE_GRADS operations: then exactly those, where they are; OPT_STEP last. Sets s->len,
 * s->ins, s->nbuf. */
void ht_pipe_emit(ht_pipe_sched *s, const ht_pipe_order *o);

/* Generators (sched_basic.c, sched_chimera.c; HePipe and 2BW in their own files). */
int ht_pipe_gen_gpipe(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_1f1b(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_interleaved(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_chimera(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_hepipe(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_2bw(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_zbh1(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_zbv(const ht_pipe_params *p, ht_pipe_sched *s);
int ht_pipe_gen_zbhet(const ht_pipe_params *p, ht_pipe_sched *s);

/* 1F1B with a warm-up of w[r] forwards on rank r (w[r] >= 0, non-increasing in r, at most N
 * taken): then one forward and one backward alternate, then the remaining backwards.
 * w[r] = D-1-r is PipeDream-Flush; deeper is HePipe's multi-forward warm-up, N - 1 is
 * GPipe's order (sched_basic.c). */
void ht_pipe_order_warmup(ht_pipe_order *o, int D, int N, const int *w);
/* The streams of that order (ht_pipe_emit). */
void ht_pipe_emit_warmup(ht_pipe_sched *s, int D, int N, const int *w);

#endif
