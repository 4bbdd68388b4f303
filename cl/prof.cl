/* Kernels for hetprof's device measurements (src/prof/measure.c): a streaming copy for
 * memory bandwidth and an empty kernel for launch latency. */

/* dst(n) = src(n) as float4s: one read and one write per element. */
__kernel void prof_copy_f4(__global const float4 *src, __global float4 *dst, const int n) {
    int i = get_global_id(0);
    if (i < n) dst[i] = src[i];
}

/* Does nothing: its enqueue-to-finish time is the launch overhead. */
__kernel void prof_empty(const int n) {}
