#include "ref.h"

#include "core/rng.h"

void ref_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * ht_rng_uniform(seed, i);
}
