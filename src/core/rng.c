/* Normal deviates from the counter-based generator. */
#include "core/rng.h"

#include <math.h>

float ht_rng_normal(uint64_t seed, uint64_t counter) {
    double u1 = ((double)(ht_rng_u64(seed, 2 * counter) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(ht_rng_u64(seed, 2 * counter + 1) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
