/* Device tensors for op tests: each tensor sits GUARD floats into its own buffer with
 * sentinel cells on both sides, so a test can check that a kernel wrote nothing outside
 * it; plus host-array helpers and a normalised error measure shared by the op tests. */
#ifndef HT_TESTS_DEVTENSOR_H
#define HT_TESTS_DEVTENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "nn/ops.h"
#include "ocl/ocl.h"

enum { GUARD = 3 };
#define SENT 1234.5f /* the value of the guard cells */

typedef struct dt {
    ht_buf *buf;
    size_t n; /* elements (float or int32) */
} dt;

/* The device every dt_* call uses (set once after opening it). */
void dt_use(ht_dev *d);
/* n elements initialised from init (n floats or int32s), or left as sentinels if NULL. */
dt dt_new(size_t n, const void *init);
void dt_set(dt t, const void *h);
void dt_get(dt t, void *h);
/* 1 when the sentinel cells around the tensor are untouched. */
int dt_guards_ok(dt t);
ht_view dt_view(dt t);
ht_view dt_view_at(dt t, size_t off);
void dt_free(dt t);

/* Host arrays (malloc'd): uniform in [lo, hi) from seed; all NaN. */
float *hnew(size_t n, float lo, float hi, uint64_t seed);
float *hnan(size_t n);
/* max |a-b| / max |b| (NaN propagates as a failure). */
double nerr(const float *a, const float *b, size_t n);

#endif
