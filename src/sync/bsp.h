/* bsp, the synchronous policy: every step, the gradients of all ranks are summed (our ring or
 * MPI_Allreduce) before one identical optimizer step on every rank. The sum is bucketed and
 * overlapped with backward (PyTorch DDP style): the flat gradient buffer is cut into buckets
 * of whole layers in reverse layer order (a small first bucket, then buckets up to a cap);
 * backward runs bucket by bucket, and each bucket is read to the host and its nonblocking
 * all-reduce started as soon as its layers are done, so the sums of the last layers travel
 * while the first layers still compute. The trainer drives it through sync.h like the other
 * policies (ht_sync_backward, ht_sync_step); this header is the pure bucket plan. */
#ifndef HT_SYNC_BSP_H
#define HT_SYNC_BSP_H

#include <stddef.h>

#include "nn/model.h"

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

#endif
