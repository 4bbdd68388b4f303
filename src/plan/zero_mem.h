/* Data-parallel sharding (cluster.shard, ZeRO) in the plan (pure): where each rank's slice of
 * the parameters is cut, and what a data-parallel rank allocates with it, so that hetsim and
 * `hettrain plan` size a sharded job as the trainer (src/train/zero.c, src/sync/bsp.c) runs
 * it. */
#ifndef HT_PLAN_ZERO_MEM_H
#define HT_PLAN_ZERO_MEM_H

#include <stddef.h>

#include "config/config.h"
#include "nn/model.h"
#include "plan/buckets.h"

/* Cuts n floats into k slices in proportion to weight[0..k) (each cut a multiple of 8, for
 * the update's float8 loads): slice i is [cut[i], cut[i+1]), cut has k + 1 entries. The
 * optimizer slices of cluster.shard (weights: each rank's device memory) and the optimizer
 * pieces of a sharded checkpoint (ht_checkpoint_shard_cuts). */
void ht_plan_shard_cuts(size_t n, const double *weight, int k, size_t *cut);

/* 1 when a data-parallel job of `world` ranks allocates only its slice of the optimizer state
 * from start-up on (train/zero.c's ht_zero_check: cluster.shard set, world > 1, and no rank
 * can be left out: not a speed split with cluster.exclude_slow and no cluster.shares, whose
 * ranks allocate the whole state and copy their slice out later). */
int ht_plan_zero_init(const ht_config *cfg, int world);

/* The gradient buckets of cluster.bucket_first_mb / bucket_cap_mb, cut as sync/bsp.c cuts
 * them (ht_reduce_plan): *out (the caller frees it) gets them; returns their count. */
int ht_plan_buckets(const ht_config *cfg, const ht_model *m, ht_bucket **out);

/* 1 when ZeRO-2 holds only a window of the gradients (train/zero.c): cluster.shard =
 * gradients, bucketed (cluster.overlap), and no tied head (its wte gradient is written from
 * another bucket). */
int ht_plan_zero2_windowed(const ht_config *cfg, const ht_model *m);

/* ZeRO-2's gradient buffer for the slice [lo, hi) (floats): the buckets meeting the slice
 * span [*wlo, *whi) (ht_reduce_window), the largest other bucket is *stage floats, and the
 * buffer (returned, floats) is the longer of the two, since the other buckets pass through
 * it. Any out-pointer may be NULL. */
size_t ht_plan_zero2_grad(const ht_config *cfg, const ht_model *m, size_t lo, size_t hi,
                          size_t *wlo, size_t *whi, size_t *stage);

/* What a data-parallel rank r of `world` allocates at peak with cfg's cluster.shard, the model
 * built at B samples (ht_plan_whole_bytes: parameters, gradients, optimizer state,
 * activations, GEMM packing), weight[0..world) each rank's device memory (the cut's
 * weights): with "optimizer" (ZeRO-1) the optimizer state of its slice only; with
 * "gradients" (ZeRO-2) bucketed (cluster.overlap) and no tied head, also a gradient buffer of
 * only the buckets meeting its slice, or the largest other bucket if longer (ht_reduce_window,
 * train/zero.c). *lo / *hi (may be NULL) get the slice. Bytes. */
double ht_plan_dp_rank_bytes(const ht_config *cfg, const ht_model *m, int B, int opt_states,
                             int world, const double *weight, int r, size_t *lo, size_t *hi);

#endif
