/* A tied head under a pipeline, as Megatron-LM keeps it: GPT-2's head reads wte, which the
 * embedding on the first stage owns. The ranks of the last stage hold a copy of wte that the
 * head reads and whose gradient its backward writes: a window of its own when they hold
 * only their stages (nn/model.h, ht_model_chunk_windows; with its own optimizer state), else
 * in the whole flat buffer; no rank of a middle stage holds it. Both copies start equal (every
 * holder initialises or loads the same tensor). After a step's backwards their gradients are summed over every
 * rank holding the first or the last stage (data-parallel replicas, both Chimera directions,
 * every rank of a replicated stage) in one ring all-reduce; the first stage's own
 * REDUCE_GRADS leaves wte out, so that each rank's local gradient counts exactly once and
 * the order of the data-parallel and the tied sums cannot matter. The ring hands every member
 * the same bits, so the same optimizer step follows on every copy and they stay bit-equal.
 * wte stays in stage 0's parameter range: the global norm and the checkpoint gather count it
 * once, from stage 0's owner. */
#ifndef HT_TRAIN_PIPE_TIED_H
#define HT_TRAIN_PIPE_TIED_H

#include <stddef.h>

#include "nn/model.h"
#include "pipe/schedule.h"

typedef struct ht_pipe_tied {
    int on;          /* a tied model cut into several stages: stage 0's reduction skips wte */
    size_t off, n;   /* wte in params / grads (floats) */
    int *members, p; /* world ranks holding the first or the last stage, ascending */
    int mine;        /* this rank is one of them */
    int tag;
    int told; /* the first verification was logged */
} ht_pipe_tied;

/* World ranks holding stage st (every replica r: world rank r * D + pipeline rank; both
 * directions; every rank of a replicated stage's group first[q] .. first[q + 1] - 1),
 * ascending, into out (at least 2 R D entries). Returns their number. */
int ht_pipe_holders(const ht_pipe_sched *s, const int *first, int D, int R, int st, int *out);

/* The exchange for model m cut by schedule s (groups first, D pipeline ranks, R replicas)
 * seen from world rank me; t->on = 0 for an untied model or one stage. */
void ht_pipe_tied_init(ht_pipe_tied *t, const ht_model *m, const ht_pipe_sched *s, const int *first,
                       int D, int R, int me);
void ht_pipe_tied_free(ht_pipe_tied *t);

/* The parts of stage st's parameter range [off, off + n) that its REDUCE_GRADS sums:
 * the whole range, or stage 0's without wte. Returns the number of parts (0 .. 2). */
int ht_pipe_tied_parts(const ht_pipe_tied *t, int st, size_t off, size_t n, size_t *at,
                       size_t *cnt);

/* After a step's backwards (collective over t's members; nothing on other ranks or with
 * fewer than 2 members): m's wte gradient summed over the members, through host (at least
 * t->n floats). */
void ht_pipe_tied_reduce(const ht_pipe_tied *t, ht_model *m, float *host);

/* Collective over every rank: the CRC32C of each member's wte parameters compared, so that a
 * divergence of the copies (a bug) stops the run (exit 1) rather than training two models;
 * rank 0 logs the first agreement. The engine calls it before evaluations and checkpoints. */
void ht_pipe_tied_verify(ht_pipe_tied *t, ht_model *m);

#endif
