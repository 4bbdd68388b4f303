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

#endif
