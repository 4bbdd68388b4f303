/* The roofline of a kernel (Williams, Waterman, Patterson, "Roofline: an insightful visual
 * performance model for multicore architectures", CACM 2009): work of F floating-point
 * operations that must move B bytes cannot take less than max(F / compute, B / bandwidth)
 * on a device whose ceilings are `compute` FLOP/s and `bandwidth` bytes/s. --profile prints
 * each kernel's time beside that bound, with ceilings measured on the device itself
 * (src/prof/roof.c), so a reader sees which kernel holds a step back and how far it is
 * from what the device allows. Pure: tested directly (tests/unit/t_roofline.c). */
#ifndef HT_CORE_ROOFLINE_H
#define HT_CORE_ROOFLINE_H

/* A device's ceilings: sustained fp32 FLOP/s and memory bytes/s (each > 0), and the round
 * trip of an empty kernel (enqueue to finish, seconds), which every launch pays on top of
 * its work when the host waits for it. */
typedef struct ht_roof {
    double flops, bytes_s, launch_s;
} ht_roof;

typedef enum { HT_ROOF_COMPUTE, HT_ROOF_MEMORY, HT_ROOF_LAUNCH } ht_roof_bound;

/* The least time work of `flops` operations and `bytes` of traffic can take, seconds. */
static inline double ht_roof_seconds(const ht_roof *r, double flops, double bytes) {
    double c = flops / r->flops, m = bytes / r->bytes_s;
    return c > m ? c : m;
}

/* Which ceiling bounds one launch: launch when even the whole work takes less than an empty
 * kernel's round trip (a queue of such launches is set by the runtime, not the kernel),
 * else compute or memory, whichever term of ht_roof_seconds is larger. */
static inline ht_roof_bound ht_roof_bound_of(const ht_roof *r, double flops, double bytes) {
    if (ht_roof_seconds(r, flops, bytes) < r->launch_s) return HT_ROOF_LAUNCH;
    return flops / r->flops >= bytes / r->bytes_s ? HT_ROOF_COMPUTE : HT_ROOF_MEMORY;
}

static inline const char *ht_roof_bound_name(ht_roof_bound b) {
    return b == HT_ROOF_COMPUTE ? "compute" : b == HT_ROOF_MEMORY ? "memory" : "launch";
}

/* The work of C(m,n) = alpha op(A)(m,k) op(B)(k,n) + beta C: 2mnk operations; A, B and C
 * read once (C only when beta != 0) and C written once, as fp32. */
static inline double ht_roof_gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }
static inline double ht_roof_gemm_bytes(double m, double n, double k, int reads_c) {
    return 4.0 * (m * k + k * n + (reads_c ? 2.0 : 1.0) * m * n);
}

#endif
