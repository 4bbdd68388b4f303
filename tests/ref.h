/* Plain-C CPU reference implementations that tests compare the OpenCL kernels against.
 * Written for clarity, in double accumulation, independent of the device code. */
#ifndef HT_TESTS_REF_H
#define HT_TESTS_REF_H

#include <stddef.h>
#include <stdint.h>

/* Fills x[0..n) with uniform values in [lo, hi) from a seed (test data). */
void ref_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);

#endif
