/* PipeDream-2BW (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training", ICML
 * 2021): 1F1B without a flush, double-buffered weights, gradients applied with a delay of one
 * step (pure: no MPI, no OpenCL).
 *
 * Versions. Version v of a stage's weights is what v optimizer steps made of it (version 0:
 * the initial weights). Every micro-batch of batch b runs its forward AND its backward on
 * every stage with version max(0, b - 1); the optimizer step that applies batch b's gradient
 * (computed at version max(0, b - 1)) turns version b into version b + 1:
 *     W(b+1) = W(b) - lr * grad f_b(W(b-1)).
 * So a stage needs two weight buffers: while batch b runs, version b - 1 (its own) and
 * version b (made by the step that applied batch b - 1's gradient, for batch b + 1); the step
 * applying batch b's gradient writes version b + 1 over version b - 1, whose last user was
 * batch b's last backward on that stage, just before the step.
 *
 * Streams. ht_pipe_generate(kind "2bw") gives one batch in flushed form: 1F1B's order
 * (warm-up D-1-r forwards, one forward / one backward, cool-down), checkable like any
 * schedule; it needs N >= D (a batch's micro-batches must outnumber the stages for two
 * versions to suffice). ht_pipe_2bw_steady gives the *period* stream that the executor runs
 * once per batch without a flush: on rank r (w = D-1-r) for k = 0 .. N-1, FWD of micro-batch k
 * of this batch, then BWD of the micro-batch w places earlier in the endless sequence: of the
 * previous batch while k < w. Those carry mb = k - w < 0 (micro-batch N + mb of the previous
 * batch) on their RECV_GRAD / BWD / SEND_GRAD. REDUCE_GRADS + OPT_STEP follow the backward of
 * a batch's last micro-batch: in the middle of the period (after the previous batch's last
 * backward) when w > 0, at its end on the last stage. Slots are fixed per micro-batch index
 * so the stream is the same every period (a rank may need a few more slots than 1F1B's w + 1
 * when w + 1 does not divide N).
 *
 * Chaining (the executor): for batches 0 .. T-1 run the period stream for t = 0 .. T (T + 1
 * times), skipping every instruction whose batch t + ht_pipe_2bw_batch(...) is outside
 * [0, T): period 0 has no previous batch, period T (the drain: before an evaluation, a
 * checkpoint or the end) runs only the last batch's remaining backwards and its step. A
 * message may be sent in one period and received in the next (the gradient of the previous
 * batch's micro-batch N - w): message tags must carry the batch. Activations of the previous
 * batch stay in their slots between periods; the gradient buffer is zeroed after each
 * OPT_STEP, not at the start of a period. The executor (ht_pipe_exec_2bw_period) takes the
 * step at the end of the period instead, with a second gradient buffer (batch b's gradient
 * in buffer b mod 2, zeroed when its period starts): the same versions, because no
 * instruction after a mid-period OPT_STEP reads the version it makes, and a step at one
 * point on every rank, where clipping by the global norm can sum over all ranks. */
#ifndef HT_PIPE_SCHED_2BW_H
#define HT_PIPE_SCHED_2BW_H

#include <stdint.h>

#include "pipe/schedule.h"

/* The weight version batch b's micro-batches use for forward and backward: max(0, b - 1). */
int64_t ht_pipe_2bw_version(int64_t batch);

/* The period stream (p->kind is ignored; p->D, p->N as for ht_pipe_generate, N >= D). HT_OK
 * or HT_EINPUT (N < D, or a bad D / N); free with ht_pipe_sched_free. */
int ht_pipe_2bw_steady(const ht_pipe_params *p, ht_pipe_sched *s);

/* Which batch instruction i of rank r's period stream works for, relative to the period's:
 * 0 (this batch) or -1 (the previous one). REDUCE_GRADS / OPT_STEP: the batch whose last
 * backward precedes them. */
int ht_pipe_2bw_batch(const ht_pipe_sched *steady, int r, int i);

/* T batches of the period stream chained as above, written as one flushed schedule over T * N
 * micro-batches (micro-batch k of batch b is b * N + k) with the one REDUCE_GRADS + OPT_STEP
 * per rank at the end (the intermediate ones dropped), so that ht_pipe_check can prove the
 * chain free of circular waits and slot reuse and measure its makespan. T >= 1. */
int ht_pipe_2bw_unroll(const ht_pipe_sched *steady, int T, ht_pipe_sched *out);

#endif
