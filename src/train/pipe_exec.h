/* The pipeline executor: runs one rank's instruction stream (src/pipe/schedule.h) on its
 * device, one global batch per call. Every rank holds the whole model's layer list and flat
 * buffers (so a checkpoint is the one-process format, and a Chimera rank's two replicas are
 * two layer ranges of one buffer); a stage runs its contiguous layer range
 * (ht_model_forward_range / backward_range). Each slot of the schedule is its own set of
 * activation, activation-gradient, saved-state and label buffers, swapped into the model for
 * the instruction that uses it. Activations and their gradients travel as host copies with
 * nonblocking point-to-point messages (src/comm), every receive of the step posted at its
 * start. Gradients accumulate over micro-batches; REDUCE_GRADS sums a stage's gradients over
 * the ranks that hold it (data-parallel replicas; Chimera's two directions; the ranks of a
 * replicated stage); a tied head's two copies of wte (first and last stage) get their summed
 * gradient after the step's backwards (train/pipe_tied.h). The optimizer
 * step is the caller's (it may clip by the global norm first: ht_pipe_exec_grad_sq). */
#ifndef HT_TRAIN_PIPE_EXEC_H
#define HT_TRAIN_PIPE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"
#include "pipe/schedule.h"

/* Where this rank sits: world rank = replica * D + prank. */
typedef struct ht_pipe_place {
    int D;        /* pipeline ranks */
    int R;        /* data-parallel replicas of the pipeline */
    int prank;    /* 0 .. D-1 */
    int replica;  /* 0 .. R-1 */
    /* Stages replicated over adjacent pipeline ranks (HePipe; NULL: none, the schedule's
     * rank q is pipeline rank q and runs whole micro-batches): the schedule's rank q runs on
     * pipeline ranks [first[q], first[q + 1]) (first[0] = 0, first[Q] = D for the schedule's
     * Q ranks), and pipeline rank p computes samples [off[p], off[p] + cnt[p]) of every
     * micro-batch (the runs of one group tile it, each cnt[p] >= 1). A boundary activation
     * or gradient goes from each rank of a group to each rank of the next whose samples
     * overlap its own; REDUCE_GRADS sums over every rank holding the stage. */
    const int *first; /* [Q + 1] */
    const int *off, *cnt; /* [D] */
} ht_pipe_place;

/* Loads rows [row0, row0 + n) of global batch `step` into the model's current slot (inputs
 * and labels). */
typedef void (*ht_pipe_load_fn)(void *ctx, ht_model *m, int64_t step, int row0, int n);

/* Per-rank timing of the last step, seconds. */
typedef struct ht_pipe_stats {
    double step;      /* whole step on this rank */
    double compute;   /* FWD + BWD + RECOMPUTE (emulated slowdown included) */
    double wait;      /* blocked in RECV_* */
    double comm;      /* device <-> host copies of messages, posting, REDUCE_GRADS */
    uint64_t p2p_bytes; /* activation and gradient bytes this rank sent */
    size_t slot_bytes;  /* device memory of one slot (a recomputing rank: stage inputs only) */
    int slots;          /* slots the schedule uses on this rank */
    size_t work_bytes;  /* a recomputing rank's one full stage buffer set, else 0 */
} ht_pipe_stats;

typedef struct ht_pipe_exec ht_pipe_exec;

/* bounds[0..S]: stage s runs layers [bounds[s], bounds[s+1]) (bounds[0] = 0, bounds[S] =
 * m->nlayers, increasing). mb: samples per micro-batch (the global batch is R * N * mb; with
 * replicated stages this rank computes place.cnt[prank] of them). The place's arrays are
 * copied.
 * slowdown: emulated (DESIGN.md), 1 = none. recompute[q] != 0 (recompute may be NULL; q the
 * schedule rank this rank runs):
 * this rank's slots keep only its stages' inputs between FWD and BWD, and a RECOMPUTE
 * (src/pipe/transform.h puts one before each BWD) runs the stage forward again, with the
 * same dropout masks, in one work buffer set. Allocates the slots' device buffers and the
 * message staging. */
ht_pipe_exec *ht_pipe_exec_new(ht_model *m, const ht_pipe_sched *s, const int *bounds,
                               ht_pipe_place place, int mb, double slowdown,
                               const uint8_t *recompute);
/* The same with recomputation per layer: layers[l] != 0 (layers: [m->nlayers] for this rank,
 * or NULL: none) for the layers whose activations this rank drops after FWD and rebuilds in
 * its RECOMPUTE; the slots keep the stages' inputs and the other layers' outputs and saved
 * state (copied out of the work set after each FWD and back before the RECOMPUTE, which runs
 * only the recomputed layers). A fused pair (plan/bounds.h) is recomputed whole. Every layer
 * flagged is ht_pipe_exec_new's recompute[q] != 0. */
ht_pipe_exec *ht_pipe_exec_new_layers(ht_model *m, const ht_pipe_sched *s, const int *bounds,
                                      ht_pipe_place place, int mb, double slowdown,
                                      const uint8_t *layers);
void ht_pipe_exec_free(ht_pipe_exec *x);
/* The emulated slowdown from the next step on (cluster.slowdown_from), 1 = none. */
void ht_pipe_exec_set_slowdown(ht_pipe_exec *x, double slowdown);

/* Runs the stream for global batch `step`: parameter gradients zeroed, then accumulated
 * (scaled by grad_scale: 1 / loss rows of the global batch), reduced over replicas. With
 * want_loss, *loss_sum gets the sum of the row losses of the micro-batches whose last stage
 * runs here (0 elsewhere): the caller sums over ranks. Returns when the stream reaches its
 * OPT_STEP; the optimizer step is the caller's. */
void ht_pipe_exec_step(ht_pipe_exec *x, int64_t step, uint64_t seed, float grad_scale,
                       ht_pipe_load_fn load, void *ctx, int want_loss, double *loss_sum);

/* PipeDream-2BW (src/pipe/sched_2bw.h): an executor built on the period stream
 * (ht_pipe_2bw_steady) runs it once per call without a flush, keeping two weight versions and
 * two gradient buffers (the model's own and one more of each). Period t runs batch t's
 * forwards and the backwards placed in it (has_cur; 0: a drain, no new batch) and the pending
 * batch t-1's remaining backwards; every micro-batch of batch b runs on W(b-1) (W(b) at the
 * first batch after the executor's creation: only one version exists then). Returns 1 when
 * batch t-1's gradient is whole: the model's params then point to a copy of the newest
 * version, its grads to that gradient, and the caller must take the optimizer step on them
 * before the next call (W(t) = W(t-1) - lr grad f_{t-1}(W(t-2))); 0 when no step is due.
 * Between calls the model's params are the newest version; a drain (has_cur = 0) applies the
 * last gradient, so that evaluation and checkpoints see every batch, and the batch after it
 * still runs on the version before (the rule holds across drains). Tags carry the batch's
 * parity: a gradient may be sent in one period and received in the next. */
int ht_pipe_exec_2bw_period(ht_pipe_exec *x, int64_t t, int has_cur, uint64_t seed,
                            float grad_scale, ht_pipe_load_fn load, void *ctx, int want_loss,
                            double *loss_sum);
/* 1 when a 2BW batch's gradient is not applied yet (a drain is due before using the weights). */
int ht_pipe_exec_2bw_pending(const ht_pipe_exec *x);

/* Sum of squared gradients over the stages this rank owns for the global norm (each stage
 * counted on one rank only: replica 0, its down-pipeline holder). Reads the gradients back. */
double ht_pipe_exec_grad_sq(ht_pipe_exec *x);

/* 1 when this rank is the one that owns stage s for gathering (replica 0, dir 0 holder, the
 * first of its group). */
int ht_pipe_exec_owns(const ht_pipe_exec *x, int s);
/* Parameter range [*off, *off + *n) of stage s (floats). */
void ht_pipe_exec_stage_params(const ht_pipe_exec *x, int s, size_t *off, size_t *n);
/* The byte offset in m's params/grads of layout floats [off, off + n), which this rank holds
 * (in one of its resident windows; pipe_local.c); a runtime error when it does not. */
size_t ht_pipe_local_bytes(const ht_model *m, size_t off, size_t n);
/* World rank that owns stage s (see ht_pipe_exec_owns). */
int ht_pipe_exec_owner(const ht_pipe_exec *x, int s);

const ht_pipe_stats *ht_pipe_exec_stats(const ht_pipe_exec *x);
/* The tied head's exchange (train/pipe_tied.h: ht_pipe_tied_verify). */
struct ht_pipe_tied *ht_pipe_exec_tied(ht_pipe_exec *x);
/* Mean seconds of one micro-batch's FWD (RECOMPUTE included) and BWD per stage since the
 * last reset, emulated slowdown included (0 for stages this rank does not run); reset != 0
 * starts counting anew. fwd, bwd: [S] or NULL. */
void ht_pipe_exec_stage_times(ht_pipe_exec *x, int reset, double *fwd, double *bwd);

#endif
