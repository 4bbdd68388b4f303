/* Private to src/nn's ops: checks that turn sizes and offsets into kernel ints (kernels
 * index with int, so every tensor must lie in the first 2^31 elements of its buffer) and
 * power-of-two helpers for choosing work-group sizes. */
#ifndef HT_NN_OPS_UTIL_H
#define HT_NN_OPS_UTIL_H

#include <limits.h>
#include <stddef.h>

#include "core/err.h"
#include "ocl/ocl.h"

static inline int ioff(size_t off, const char *what) {
    if (off > (size_t)INT_MAX)
        ht_die(HT_ERUNTIME, "nn: %s offset %zu exceeds 2^31 elements", what, off);
    return (int)off;
}

static inline int isize(size_t n, const char *what) {
    if (n > (size_t)INT_MAX) ht_die(HT_ERUNTIME, "nn: %s size %zu exceeds 2^31 elements", what, n);
    return (int)n;
}

/* The next launch's work for --profile's roofline: operations, and floats moved at least
 * (each operand read once, each result written once), 4 bytes each. */
static inline void work(ht_dev *d, double flops, double floats) {
    ht_prof_work(d, flops, 4.0 * floats);
}

static inline size_t pow2_at_least(size_t n) {
    size_t p = 1;
    while (p < n) p *= 2;
    return p;
}

static inline size_t pow2_at_most(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

#endif
