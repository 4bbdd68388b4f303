/* Counter-based random numbers: every value is a pure function of (seed, counter),
 * so any stream position can be recomputed (data order, init, dropout) without
 * carrying generator state through checkpoints. The mixer is SplitMix64's finaliser. */
#ifndef HT_CORE_RNG_H
#define HT_CORE_RNG_H

#include <stdint.h>

static inline uint64_t ht_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 64 random bits for position `counter` of stream `seed`. */
static inline uint64_t ht_rng_u64(uint64_t seed, uint64_t counter) {
    return ht_mix64(ht_mix64(seed) ^ counter);
}

/* Uniform in [0, 1) with 24 bits of precision. */
static inline float ht_rng_uniform(uint64_t seed, uint64_t counter) {
    return (float)(ht_rng_u64(seed, counter) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, negligible bias for n << 2^32). */
static inline uint32_t ht_rng_below(uint64_t seed, uint64_t counter, uint32_t n) {
    return (uint32_t)(((ht_rng_u64(seed, counter) >> 32) * (uint64_t)n) >> 32);
}

/* Standard normal (Box-Muller over two counters 2c and 2c+1). */
float ht_rng_normal(uint64_t seed, uint64_t counter);

/* Derives an independent stream seed from a parent seed and a tag. */
static inline uint64_t ht_rng_stream(uint64_t seed, uint64_t tag) {
    return ht_mix64(seed ^ ht_mix64(tag + 0x51ed2701ull));
}

#endif
