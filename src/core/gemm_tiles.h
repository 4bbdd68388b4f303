/* The packed SGEMM's tile and packing numbers (cl/gemm.cl's GEMM_TM, GEMM_TN, GEMM_RUN,
 * GEMM_PK, GEMM_PL) and the floats of its packing workspace: one header for the kernels' host
 * code (src/ocl/gemm.c) and the memory model (src/plan/gemm_ws.c), so that the prediction
 * and the allocation cannot drift apart. */
#ifndef HT_CORE_GEMM_TILES_H
#define HT_CORE_GEMM_TILES_H

#include <stddef.h>

#define HT_GEMM_TM 6         /* GEMM_TM: tile rows */
#define HT_GEMM_TN 16        /* GEMM_TN: tile columns */
#define HT_GEMM_PACK_RUN 128 /* GEMM_RUN */
#define HT_GEMM_PACK_K 16    /* GEMM_PK */
#define HT_GEMM_PACK_L 256   /* GEMM_PL */

/* Floats of the packed panels of B (ceil(n/16) x 16 x k) and A (ceil(m/6) x 6 x k). */
static inline size_t ht_gemm_packed_b(size_t n, size_t k) {
    return (n + HT_GEMM_TN - 1) / HT_GEMM_TN * HT_GEMM_TN * k;
}
static inline size_t ht_gemm_packed_a(size_t m, size_t k) {
    return (m + HT_GEMM_TM - 1) / HT_GEMM_TM * HT_GEMM_TM * k;
}

/* The ways a product runs (src/ocl/gemm.c; the values of ocl.h's HT_TILED_*): both operands
 * packed (gemm_packed), B packed and A read in place (gemm_rows), both in place
 * (gemm_direct). */
enum { HT_GEMM_WAY_PACKED = 1, HT_GEMM_WAY_ROWS = 2, HT_GEMM_WAY_DIRECT = 3 };

/* The way gemm.c picks for C(m, n) = op(A)(m, k) op(B)(k, n) unless forced (its kind_auto:
 * see there for the measurements behind it). */
static inline int ht_gemm_way(int trans_a, int trans_b, size_t m, size_t n, size_t k) {
    if (!trans_b && m <= HT_GEMM_TN) return HT_GEMM_WAY_DIRECT;
    if (!trans_a && (n <= HT_GEMM_TN || k <= 1024)) return HT_GEMM_WAY_ROWS;
    return HT_GEMM_WAY_PACKED;
}

/* The workspace floats of that product: B's panels and A's, B's alone, or none. */
static inline size_t ht_gemm_ws_floats(int trans_a, int trans_b, size_t m, size_t n, size_t k) {
    const int way = ht_gemm_way(trans_a, trans_b, m, n, k);
    return way == HT_GEMM_WAY_DIRECT ? 0
           : ht_gemm_packed_b(n, k) + (way == HT_GEMM_WAY_ROWS ? 0 : ht_gemm_packed_a(m, k));
}

#endif
