/* Row-major SGEMM for CPU devices (src/ocl/gemm.c; CLBlast elsewhere and as the fallback):
 * C = alpha * op(A)(M, K) op(B)(K, N) + beta * C in two steps, the BLIS scheme without its
 * cache blocking of k:
 *
 * 1. gemm_pack6 / gemm_pack16 copy the operands into a workspace as panels: A as ceil(M/6)
 *    panels of 6 rows, B as ceil(N/16) panels of 16 columns, each panel step-major (the 6
 *    or 16 values of step l side by side) and zero-padded past M or N. Packing reads A, A^T,
 *    B or B^T alike (no separate transpose of B^T), and the kernel then streams two
 *    contiguous arrays instead of rows 4 KiB apart (1024 floats): those all map to one
 *    8-way L1 set and miss in turn, which held the in-place kernel to ~100 GFLOP/s.
 *    Packing costs one read and write of each operand, ~10% of the MLP's GEMM time.
 * 2. gemm_packed: work-item (j, i) accumulates the 6x16 tile rows 6i.., columns 16j.. in six
 *    float16 registers (12 of the 16 AVX2 ymm registers, 2 per float16: the BLIS
 *    Haswell/Zen micro-tile; 8x16 spills), reading per step one float16 of B's panel and
 *    six broadcast scalars of A's, for 12 vector FMAs. A work-group is a column of up to
 *    16 tiles sharing one B panel (64 KiB at K = 1024, held in L2) while A's panels
 *    stream past (gemm.c picks the size).
 *    The sum over l runs in order, so every element has a fixed summation order.
 *    beta == 0 never reads C.
 *
 * The accumulation loop is conv.cl's CONV_TILE_ACC with A's strides (1, 6) and B's row
 * stride 16; it is not shared, as that would tie this file to conv.cl's load order and to
 * its edge rule (conv_load_b reads past N into slack conv's workspace keeps). */
#define GEMM_TM 6
#define GEMM_TN 16

/* Stores row m (if < M) of a tile at columns n0.., the columns < N only. */
void gemm_store_row(__global float *C, const int ldc, const int M, const int N, const int m,
                    const int n0, const float16 acc, const float alpha, const float beta) {
    if (m >= M) return;
    __global float *c = C + m * ldc + n0;
    float16 v = alpha * acc;
    if (n0 + GEMM_TN <= N) {
        if (beta != 0.0f) v = fma((float16)beta, vload16(0, c), v);
        vstore16(v, 0, c);
        return;
    }
    float t[GEMM_TN];
    vstore16(v, 0, t);
    for (int j = 0; j < N - n0; j++) c[j] = beta != 0.0f ? fma(beta, c[j], t[j]) : t[j];
}

/* Stores the 6x16 tile of rows m0.., columns n0.. held in c0..c5 (rows < M, columns < N). */
void gemm_store_tile(__global float *C, const int ldc, const int M, const int N, const int m0,
                     const int n0, const float16 c0, const float16 c1, const float16 c2,
                     const float16 c3, const float16 c4, const float16 c5, const float alpha,
                     const float beta) {
    gemm_store_row(C, ldc, M, N, m0, n0, c0, alpha, beta);
    gemm_store_row(C, ldc, M, N, m0 + 1, n0, c1, alpha, beta);
    gemm_store_row(C, ldc, M, N, m0 + 2, n0, c2, alpha, beta);
    gemm_store_row(C, ldc, M, N, m0 + 3, n0, c3, alpha, beta);
    gemm_store_row(C, ldc, M, N, m0 + 4, n0, c4, alpha, beta);
    gemm_store_row(C, ldc, M, N, m0 + 5, n0, c5, alpha, beta);
}

/* One step of a tile's accumulation: row r of the tile (c0..c5) += A(m0 + r, l) * B(l, n0..). */
#define GEMM_FMA6(bv, a0, a1, a2, a3, a4, a5)                                                      \
    (c0 = fma((float16)(a0), bv, c0), c1 = fma((float16)(a1), bv, c1),                             \
     c2 = fma((float16)(a2), bv, c2), c3 = fma((float16)(a3), bv, c3),                             \
     c4 = fma((float16)(a4), bv, c4), c5 = fma((float16)(a5), bv, c5))

/* Packing. X(rows, K), X(r, l) = src[so + r*sr + l*sl], becomes panels of W rows: panel p
 * at dst + dso + p*K*W holds dst[l*W + i] = X(pW + i, l), 0 past `rows`. One of sr, sl is 1
 * for every caller, and each work-item reads long runs along that contiguous direction
 * (gathering a panel's 64 bytes from each of K rows 4 KiB apart is latency-bound, ~5x
 * slower than a copy):
 *  - sr == 1 (rows side by side: B, or A^T; gemm_pack*_run): work-item (x, y) copies
 *    GEMM_RUN / W panels, GEMM_RUN floats of each step, for the GEMM_PK steps from GEMM_PK*y;
 *    range
 *    (ceil(panels / (GEMM_RUN / W)), ceil(K / GEMM_PK)).
 *  - sl == 1 (steps side by side: B^T, or A; gemm_pack*_gather): work-item (x, y) gathers
 *    steps GEMM_PL*x.. of panel y, reading 4 (or 6) of its rows at a time and storing one vector per step
 *    (16 rows 4 KiB apart read side by side would thrash their one L1 set); range
 *    (ceil(K / GEMM_PL), panels).
 * src/ocl/gemm.c knows these numbers too. */
#define GEMM_RUN 128
#define GEMM_PK 16
#define GEMM_PL 256

/* d[0..W-1] = s[0..W-1] */
#define GEMM_COPY6(d, s) (vstore4(vload4(0, s), 0, d), vstore2(vload2(0, (s) + 4), 0, (d) + 4))
#define GEMM_COPY16(d, s) vstore16(vload16(0, s), 0, d)

/* d[l*W + i] = s[i*sr + l] for l < nl, i < W (a full panel). */
#define GEMM_GATHER6(d, s, sr, nl)                                                                 \
    for (int l = 0; l < (nl); l++) {                                                               \
        vstore4((float4)((s)[l], (s)[(sr) + l], (s)[2 * (sr) + l], (s)[3 * (sr) + l]), 0,          \
                (d) + 6 * l);                                                                      \
        vstore2((float2)((s)[4 * (sr) + l], (s)[5 * (sr) + l]), 0, (d) + 6 * l + 4);               \
    }
#define GEMM_GATHER16(d, s, sr, nl)                                                                \
    for (int h = 0; h < 16; h += 4)                                                                \
        for (int l = 0; l < (nl); l++)                                                             \
            vstore4((float4)((s)[h * (sr) + l], (s)[(h + 1) * (sr) + l], (s)[(h + 2) * (sr) + l],  \
                             (s)[(h + 3) * (sr) + l]),                                             \
                    0, (d) + 16 * l + h)

/* Two kernels per width, one per direction (gemm.c picks by which stride is 1), rather than
 * one branching on `sr`: Mesa's llvmpipe (rusticl) warned "Treating load_kernel_arg in
 * control flow as uniform" for argument loads its compiler had sunk into the two arms. */
#define GEMM_PACK_RUN(NAME, W)                                                                     \
    __kernel void NAME(__global float *dst, const int dso, __global const float *src,              \
                       const int so, const int sr, const int sl, const int rows, const int K) {    \
        const int panels = (rows + (W)-1) / (W);                                                   \
        const int pp = GEMM_RUN / (W), p0 = pp * get_global_id(0);                                 \
        const int l0 = GEMM_PK * get_global_id(1);                                                 \
        if (p0 >= panels || l0 >= K) return;                                                       \
        const int p1 = min(p0 + pp, panels), l1 = min(l0 + GEMM_PK, K);                            \
        for (int p = p0; p < p1; p++) { /* a panel at a time: steps l0..l1 are one run */      \
            __global float *d = dst + dso + (p * K + l0) * (W);                                    \
            __global const float *s = src + so + l0 * sl + p * (W);                                \
            if ((p + 1) * (W) <= rows) {                                                           \
                for (int l = 0; l < l1 - l0; l++)                                                  \
                    GEMM_COPY##W(d + l * (W), s + l * sl);                                         \
            } else {                                                                               \
                for (int l = 0; l < l1 - l0; l++)                                                  \
                    for (int i = 0; i < (W); i++)                                                  \
                        d[l * (W) + i] = p * (W) + i < rows ? s[l * sl + i] : 0.0f;                \
            }                                                                                      \
        }                                                                                          \
    }
#define GEMM_PACK_GATHER(NAME, W)                                                                  \
    __kernel void NAME(__global float *dst, const int dso, __global const float *src,              \
                       const int so, const int sr, const int sl, const int rows, const int K) {    \
        const int panels = (rows + (W)-1) / (W);                                                   \
        const int l0 = GEMM_PL * get_global_id(0), p = get_global_id(1);                           \
        if (l0 >= K || p >= panels) return;                                                        \
        const int nl = min(GEMM_PL, K - l0);                                                       \
        __global float *d = dst + dso + (p * K + l0) * (W);                                        \
        __global const float *s = src + so + p * (W)*sr + l0;                                      \
        if ((p + 1) * (W) <= rows) {                                                               \
            GEMM_GATHER##W(d, s, sr, nl);                                                          \
            return;                                                                                \
        }                                                                                          \
        for (int i = 0; i < (W); i++) /* the last, partial panel */                                \
            for (int l = 0; l < nl; l++)                                                           \
                d[l * (W) + i] = p * (W) + i < rows ? s[i * sr + l] : 0.0f;                        \
    }
GEMM_PACK_RUN(gemm_pack6_run, 6)         /* GEMM_TM wide, sr == 1 */
GEMM_PACK_GATHER(gemm_pack6_gather, 6)   /* sl == 1 */
GEMM_PACK_RUN(gemm_pack16_run, 16)       /* GEMM_TN wide, sr == 1 */
GEMM_PACK_GATHER(gemm_pack16_gather, 16) /* sl == 1 */

/* Range (ceil(N/16), ceil(M/6)); A's panels at P + ao, B's at P + bo (gemm_pack). */
__kernel void gemm_packed(__global float *C, const int co, const int ldc, __global const float *P,
                          const int ao, const int bo, const int M, const int N, const int K,
                          const float alpha, const float beta) {
    const int j = get_global_id(0), i = get_global_id(1);
    const int n0 = GEMM_TN * j, m0 = GEMM_TM * i;
    if (n0 >= N || m0 >= M) return;
    __global const float *a = P + ao + m0 * K;
    __global const float *b = P + bo + n0 * K;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;
    for (int l = 0; l < K; l++) {
        const float16 bv = vload16(l, b);
        __global const float *al = a + GEMM_TM * l;
        GEMM_FMA6(bv, al[0], al[1], al[2], al[3], al[4], al[5]);
    }
    gemm_store_tile(C + co, ldc, M, N, m0, n0, c0, c1, c2, c3, c4, c5, alpha, beta);
}

/* gemm_packed with A read in place, A(i, l) = A[ao + i*sai + l*sal] (A: sai = lda, sal = 1,
 * six rows along k, six streams within L1's eight ways; A^T: sai = 1, sal = lda, six
 * neighbours per step), B from its packed panels: for products where packing A costs a
 * sizeable part of the product (k or n small: each A element is used ceil(N/16) times).
 * Rows past M repeat row M-1 and are not stored; the same fma chain as gemm_packed. */
__kernel void gemm_rows(__global float *C, const int co, const int ldc, __global const float *A,
                        const int ao, const int sai, const int sal, __global const float *P,
                        const int bo, const int M, const int N, const int K, const float alpha,
                        const float beta) {
    const int j = get_global_id(0), i = get_global_id(1);
    const int n0 = GEMM_TN * j, m0 = GEMM_TM * i;
    if (n0 >= N || m0 >= M) return;
    __global const float *a0 = A + ao + min(m0, M - 1) * sai;
    __global const float *a1 = A + ao + min(m0 + 1, M - 1) * sai;
    __global const float *a2 = A + ao + min(m0 + 2, M - 1) * sai;
    __global const float *a3 = A + ao + min(m0 + 3, M - 1) * sai;
    __global const float *a4 = A + ao + min(m0 + 4, M - 1) * sai;
    __global const float *a5 = A + ao + min(m0 + 5, M - 1) * sai;
    __global const float *b = P + bo + n0 * K;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;
    for (int l = 0; l < K; l++) {
        const float16 bv = vload16(l, b);
        const int o = l * sal;
        GEMM_FMA6(bv, a0[o], a1[o], a2[o], a3[o], a4[o], a5[o]);
    }
    gemm_store_tile(C + co, ldc, M, N, m0, n0, c0, c1, c2, c3, c4, c5, alpha, beta);
}

/* gemm_packed with both operands read in place, one launch instead of three: A(i, l) =
 * A[ao + i*sai + l*sal] (A or A^T), B(l, j) = B[bo + l*ldb + j] (B, not B^T), for products
 * where copying B into panels costs more than it saves, e.g. of at most 16 rows (the n = 10
 * layer's weight gradient: each B panel serves at most three tiles; gemm.c picks).
 * Rows past M repeat row M-1 and are not stored; columns past N read as 0, as packing pads
 * them, and each sum runs over l in the same order as gemm_packed's: the same bits. */
__kernel void gemm_direct(__global float *C, const int co, const int ldc, __global const float *A,
                          const int ao, const int sai, const int sal, __global const float *B,
                          const int bo, const int ldb, const int M, const int N, const int K,
                          const float alpha, const float beta) {
    const int j = get_global_id(0), i = get_global_id(1);
    const int n0 = GEMM_TN * j, m0 = GEMM_TM * i;
    if (n0 >= N || m0 >= M) return;
    __global const float *a0 = A + ao + min(m0, M - 1) * sai;
    __global const float *a1 = A + ao + min(m0 + 1, M - 1) * sai;
    __global const float *a2 = A + ao + min(m0 + 2, M - 1) * sai;
    __global const float *a3 = A + ao + min(m0 + 3, M - 1) * sai;
    __global const float *a4 = A + ao + min(m0 + 4, M - 1) * sai;
    __global const float *a5 = A + ao + min(m0 + 5, M - 1) * sai;
    __global const float *b = B + bo + n0;
    const int nb = min(GEMM_TN, N - n0);
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;
    if (nb == GEMM_TN) {
        for (int l = 0; l < K; l++) {
            const float16 bv = vload16(0, b + l * ldb);
            const int o = l * sal;
            GEMM_FMA6(bv, a0[o], a1[o], a2[o], a3[o], a4[o], a5[o]);
        }
    } else { /* the last, partial column panel */
        for (int l = 0; l < K; l++) {
            float t[GEMM_TN];
            for (int q = 0; q < GEMM_TN; q++) t[q] = q < nb ? b[l * ldb + q] : 0.0f;
            const float16 bv = vload16(0, t);
            const int o = l * sal;
            GEMM_FMA6(bv, a0[o], a1[o], a2[o], a3[o], a4[o], a5[o]);
        }
    }
    gemm_store_tile(C + co, ldc, M, N, m0, n0, c0, c1, c2, c3, c4, c5, alpha, beta);
}
