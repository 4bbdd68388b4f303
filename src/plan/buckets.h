/* How bsp cuts the flat gradient buffer into all-reduce buckets (sync/bsp.h): pure, so that
 * the simulator (sim/dp.c) predicts the very buckets the trainer reduces. */
#ifndef HT_PLAN_BUCKETS_H
#define HT_PLAN_BUCKETS_H

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

/* Pure: ZeRO-2's per-slice gradients for the slice [lo, hi) of the parameters, bucket by
 * bucket: the gradient buffer holds [*wlo, *whi), the union of the buckets b[0..nb) that
 * intersect the slice (their backward writes there; an empty slice: an empty window at lo),
 * and *stage floats (the largest bucket outside it) hold each other bucket's gradients
 * while it is reduced. */
void ht_reduce_window(const ht_bucket *b, int nb, size_t lo, size_t hi, size_t *wlo, size_t *whi,
                      size_t *stage);

#endif
