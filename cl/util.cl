/* Small utility kernels: fills and scaled copies over flat buffers (offsets in floats). */

__kernel void fill_f32(__global float *x, const int off, const int n, const float v) {
    int i = get_global_id(0);
    if (i < n) x[off + i] = v;
}

/* x(n) = alpha * x(n) in place: one IEEE multiply per element (exact for powers of two).
 * Work-item i covers [16i, 16i+16) as a float16, like the elementwise kernels of act.cl
 * (explicit SIMD for PoCL); the item holding the end of x runs a scalar tail, items past
 * it (the global size is rounded up) touch nothing. Indices in size_t: 16i may pass
 * INT_MAX when n is close to it. */
__kernel void scale_f32(__global float *x, const int off, const int n, const float alpha) {
    size_t i = 16 * get_global_id(0), end = (size_t)n;
    __global float *p = x + off;
    if (i + 16 <= end)
        vstore16(alpha * vload16(0, p + i), 0, p + i);
    else
        for (; i < end; i++)
            p[i] = alpha * p[i];
}
