/* Dropout with a counter-based mask: element i of a call is kept when
 *   ht_rng_uniform(stream, first + i) >= p,  stream = ht_rng_stream(seed, step)   (src/core/rng.h)
 * so a mask is a pure function of (seed, step, first + i) and backward recomputes it instead
 * of storing it. first (an element offset, 0 for a whole batch) lets a slice of a batch draw
 * the counters of its place in the whole one (data-parallel ranks: first = first global row x
 * elements per row). The SplitMix64 finaliser below is ht_mix64, bit for bit, in 64-bit ulong. */

ulong8 tf_mix64_v8(ulong8 z) {
    z += 0x9e3779b97f4a7c15UL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    return z ^ (z >> 31);
}

/* y(n) = x(n) * keep(i) * scale (y may alias x; forward and backward are the same map).
 * key = ht_mix64(stream) and first, each split into two ints by the host; keep(i) is
 * (ht_mix64(key ^ (first + i)) >> 40) >= thresh with thresh = ceil(p * 2^24), which is exactly
 * ht_rng_uniform(stream, i) >= p (the uniform is that 24-bit integer times 2^-24).
 * Work-item i covers [8i, 8i+8) as ulong8/float8. */
__kernel void tf_dropout(__global float *y, const int yo, __global const float *x, const int xo,
                         const int n, const int key_lo, const int key_hi, const int thresh,
                         const float scale, const int first_lo, const int first_hi) {
    const int i = 8 * get_global_id(0);
    if (i >= n) return;
    const ulong key = ((ulong)(uint)key_hi << 32) | (ulong)(uint)key_lo;
    const ulong c = (((ulong)(uint)first_hi << 32) | (ulong)(uint)first_lo) + (ulong)i;
    const ulong8 z = tf_mix64_v8(key ^ (c + (ulong8)(0, 1, 2, 3, 4, 5, 6, 7)));
    const int8 keep = convert_int8(z >> 40) >= thresh;
    const float8 m = select((float8)(0.0f), (float8)(scale), keep);
    if (i + 8 <= n) {
        vstore8(vload8(0, x + xo + i) * m, 0, y + yo + i);
    } else {
        float mm[8];
        vstore8(m, 0, mm);
        for (int k = 0; i + k < n; k++) y[yo + i + k] = x[xo + i + k] * mm[k];
    }
}
