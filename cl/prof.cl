/* Kernels for the device measurements of hetprof and --profile (src/prof/measure.c, roof.c):
 * a streaming copy for memory bandwidth, an empty kernel for launch latency, and a chain of
 * fused multiply-adds for the arithmetic ceiling. */

/* dst(n) = src(n) as float4s: one read and one write per element. */
__kernel void prof_copy_f4(__global const float4 *src, __global float4 *dst, const int n) {
    int i = get_global_id(0);
    if (i < n) dst[i] = src[i];
}

/* Does nothing: its enqueue-to-finish time is the launch overhead. */
__kernel void prof_empty(const int n) {}

/* The device's arithmetic ceiling: 8 independent chains of float8 multiply-adds a work-item
 * (enough in flight to cover an FMA unit's latency on CPUs, where PoCL keeps each float8 in a
 * vector register), 128 operations an iteration, one store at the end so the chains are not
 * dropped; a < 1 keeps the values bounded. Twice: with fma(), which PoCL makes one fused
 * instruction (mad(): a multiply and an add, ~0.6x) but rusticl's llvmpipe computes in
 * software (0.3 GFLOP/s), and with mad(), which rusticl runs at speed. */
#define PROF_CHAINS(NAME, OP)                                                                      \
    __kernel void NAME(__global float *out, const float a, const float b, const int iters) {      \
        float s = (float)get_global_id(0) * 1e-7f;                                                 \
        float8 x0 = s, x1 = s + 1, x2 = s + 2, x3 = s + 3, x4 = s + 4, x5 = s + 5, x6 = s + 6,   \
               x7 = s + 7;                                                                         \
        for (int i = 0; i < iters; i++) {                                                          \
            x0 = OP(x0, a, b), x1 = OP(x1, a, b), x2 = OP(x2, a, b), x3 = OP(x3, a, b);            \
            x4 = OP(x4, a, b), x5 = OP(x5, a, b), x6 = OP(x6, a, b), x7 = OP(x7, a, b);            \
        }                                                                                          \
        float8 t = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;                                          \
        out[get_global_id(0)] = t.s0 + t.s1 + t.s2 + t.s3 + t.s4 + t.s5 + t.s6 + t.s7;             \
    }
PROF_CHAINS(prof_fma, fma)
PROF_CHAINS(prof_mad, mad)
