/* cluster.shard (ZeRO) for data parallel: where each rank's slice of the optimizer state is
 * cut, and whether the cut is decided before the optimizer is allocated. */
#ifndef HT_TRAIN_ZERO_H
#define HT_TRAIN_ZERO_H

#include <stddef.h>

#include "train/engine.h"

/* The engine's check (data parallel): asks for the device memory peak from the model's build
 * on (eng.peak_from_model: the GEMM probe's buffers are not the job's), and marks j->eng.zero_init
 * when the cut can be decided at setup, before the optimizer state exists, so that a rank never
 * allocates more than its slice. Not where a rank may be left out (cluster.split = "speed" with
 * cluster.exclude_slow and no cluster.shares): the ranks that stay are known only after the
 * speed split, and the engine cuts (and copies out the slice) then. */
int ht_zero_check(ht_job *j);

/* Collective over the current ranks: every rank's memory (device.memory_mb, else the
 * device's global memory) all-gathered, the parameters cut in proportion (world + 1
 * entries, multiples of 8; ht_checkpoint_shard_cuts). The caller frees it. */
size_t *ht_zero_cut(ht_job *j);

/* Setup, collective, after the model's description (rc: this rank's result so far; any rank's
 * error ends every rank first): the cut (eng.zero_cut), and for cluster.shard = "gradients"
 * with cluster.overlap (bucketed), the model's gradient window (ht_model_grad_window: the
 * buckets that intersect this rank's slice, ht_reduce_window; the buffer at least as long as
 * the largest other bucket, which passes through it), unless a tied head makes backward
 * write across buckets. */
void ht_zero_setup(ht_job *j, int rc);

/* ht_model_backward for a model whose gradients may be windowed (ht_zero_setup): bucket by
 * bucket, those outside the window through the buffer's start (their values are lost). For
 * timed passes (the speed split), not for training steps. */
void ht_zero_backward(ht_job *j, int B, float grad_scale);

#endif
