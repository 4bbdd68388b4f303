/* Row-major SGEMM for CPU devices (src/ocl/gemm.c; CLBlast elsewhere and as the fallback):
 * C = alpha * A(M, K) B(K, N) + beta * C with the register tile of conv_gemm (cl/conv.cl):
 * work-item (j, i) accumulates rows 6i..6i+5 x columns 16j..16j+15 in six float16
 * registers, reading per step l one float16 of B's row l and six scalars of A.
 * A(m, l) = A[m*sam + l*sal] (A or A^T in place); B row-major with leading dimension ldb
 * (gemm.c transposes B^T into a workspace first). Rows past M are clamped for reading and
 * not stored; an edge column tile loads only columns < N (never past the operand). The sum
 * over l runs in order, so every element has a fixed summation order. beta == 0 never
 * reads C. */
#define GEMM_TM 6

void gemm_store_row(__global float *C, const int ldc, const int M, const int N, const int m,
                    const int n0, const float16 acc, const float alpha, const float beta) {
    if (m >= M) return;
    __global float *c = C + m * ldc + n0;
    float16 v = alpha * acc;
    if (n0 + 16 <= N) {
        if (beta != 0.0f) v = fma((float16)beta, vload16(0, c), v);
        vstore16(v, 0, c);
        return;
    }
    float t[16];
    vstore16(v, 0, t);
    for (int j = 0; j < N - n0; j++) c[j] = beta != 0.0f ? fma(beta, c[j], t[j]) : t[j];
}

/* Range (ceil(N/16), ceil(M/6)). */
__kernel void gemm_tiled(__global float *C, const int co, const int ldc, __global const float *A,
                         const int ao, const int sam, const int sal, __global const float *B,
                         const int bo, const int ldb, const int M, const int N, const int K,
                         const float alpha, const float beta) {
    const int n0 = 16 * get_global_id(0), m0 = GEMM_TM * get_global_id(1);
    if (n0 >= N || m0 >= M) return;
    __global const float *a0 = A + ao + min(m0, M - 1) * sam;
    __global const float *a1 = A + ao + min(m0 + 1, M - 1) * sam;
    __global const float *a2 = A + ao + min(m0 + 2, M - 1) * sam;
    __global const float *a3 = A + ao + min(m0 + 3, M - 1) * sam;
    __global const float *a4 = A + ao + min(m0 + 4, M - 1) * sam;
    __global const float *a5 = A + ao + min(m0 + 5, M - 1) * sam;
    __global const float *b = B + bo + n0;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;
    if (n0 + 16 <= N) {
        for (int l = 0; l < K; l++) {
            const float16 bv = vload16(0, b + l * ldb);
            const int al = l * sal;
            c0 = fma((float16)(a0[al]), bv, c0);
            c1 = fma((float16)(a1[al]), bv, c1);
            c2 = fma((float16)(a2[al]), bv, c2);
            c3 = fma((float16)(a3[al]), bv, c3);
            c4 = fma((float16)(a4[al]), bv, c4);
            c5 = fma((float16)(a5[al]), bv, c5);
        }
    } else {
        const int nv = N - n0;
        for (int l = 0; l < K; l++) {
            float t[16];
            __global const float *br = b + l * ldb;
            for (int j = 0; j < 16; j++) t[j] = j < nv ? br[j] : 0.0f;
            const float16 bv = vload16(0, t);
            const int al = l * sal;
            c0 = fma((float16)(a0[al]), bv, c0);
            c1 = fma((float16)(a1[al]), bv, c1);
            c2 = fma((float16)(a2[al]), bv, c2);
            c3 = fma((float16)(a3[al]), bv, c3);
            c4 = fma((float16)(a4[al]), bv, c4);
            c5 = fma((float16)(a5[al]), bv, c5);
        }
    }
    __global float *c = C + co;
    gemm_store_row(c, ldc, M, N, m0, n0, c0, alpha, beta);
    gemm_store_row(c, ldc, M, N, m0 + 1, n0, c1, alpha, beta);
    gemm_store_row(c, ldc, M, N, m0 + 2, n0, c2, alpha, beta);
    gemm_store_row(c, ldc, M, N, m0 + 3, n0, c3, alpha, beta);
    gemm_store_row(c, ldc, M, N, m0 + 4, n0, c4, alpha, beta);
    gemm_store_row(c, ldc, M, N, m0 + 5, n0, c5, alpha, beta);
}

/* dst(cols, rows) = src(rows, cols)^T, src with leading dimension lds, dst packed.
 * Work-item (j, i) moves the 16 x 16 block at rows 16i.., columns 16j... */
__kernel void gemm_transpose(__global float *dst, __global const float *src, const int so,
                             const int lds, const int rows, const int cols) {
    const int c0 = 16 * get_global_id(0), r0 = 16 * get_global_id(1);
    if (c0 >= cols || r0 >= rows) return;
    const int nr = min(16, rows - r0), nc = min(16, cols - c0);
    float t[16][16];
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nc; j++) t[j][i] = src[so + (r0 + i) * lds + c0 + j];
    for (int j = 0; j < nc; j++)
        for (int i = 0; i < nr; i++) dst[(c0 + j) * rows + r0 + i] = t[j][i];
}
