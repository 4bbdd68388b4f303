/* Bucketed, overlapped gradient reduction for data parallelism (PyTorch DDP style): the
 * flat gradient buffer is cut into buckets of whole layers in reverse layer order (a small
 * first bucket, then buckets up to a cap); backward runs bucket by bucket, and each bucket
 * is read to the host and its nonblocking all-reduce started as soon as its layers are done,
 * so the sums of the last layers travel while the first layers still compute. Internal to
 * src/train. */
#ifndef HT_TRAIN_REDUCE_H
#define HT_TRAIN_REDUCE_H

#include <signal.h>
#include <stddef.h>

#include "config/config.h"
#include "nn/model.h"
#include "train/cluster.h"

/* Layers [lo, hi) and their gradients grads[off, off + n) (floats). */
typedef struct ht_bucket {
    int lo, hi;
    size_t off, n;
} ht_bucket;

/* Pure: cuts m's layers into buckets, top layers first. A bucket closes once it holds at
 * least first_bytes (the first) or cap_bytes (the others) of gradients, never between a
 * layer and the relu/gelu it runs fused with (so backward computes the same bits as in one
 * piece). Layers without parameters join their neighbours. A model whose layers' parameter
 * ranges are not contiguous in layer order gets one bucket. Returns the number of buckets;
 * writes at most max of them to out (out may be NULL with max 0 to count). */
int ht_reduce_plan(const ht_model *m, size_t first_bytes, size_t cap_bytes, ht_bucket *out,
                   int max);

/* One step's backward plus the gradient sum over ranks, in place of ht_model_backward +
 * ht_cluster_reduce. B, grad_scale as ht_model_backward; t_start: ht_now() at the start of
 * the step (the forward's time counts as compute); *stop becomes 1 on every rank when
 * *stop_src was set on any. With one rank or cluster.overlap = false this is exactly the
 * unbucketed path. Timing goes to c: t_compute (forward + backward), t_comm (communication
 * left after backward, write-back included), t_hidden (communication in flight while
 * backward ran), t_wait (0 here: waiting for slower ranks shows up in t_comm). */
void ht_reduce_backward(ht_cluster *c, ht_model *m, const ht_config *cfg, int B, float grad_scale,
                        double t_start, volatile sig_atomic_t *stop_src, int *stop);

/* Frees the bucket state kept in c (ht_cluster_free calls it). */
void ht_reduce_free(struct ht_reduce *r);

#endif
