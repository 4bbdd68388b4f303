/* 2-D convolution kernels for src/nn/ops_conv.c: im2col, a register-tiled GEMM for CPUs
 * (forward with bias + activation fused into its NCHW store; split-sum weight gradient),
 * the rearrangements around CLBlast's GEMMs (the alternative on other devices), the output
 * gradient's pass (activation derivative, bias partial sums) and a gathering col2im.
 * Uses nn_relu_v / nn_gelu_v and their derivatives from act.cl (files are concatenated in
 * name order). No atomics: every output element is written by one work-item, sums run in a
 * fixed order. Offsets and sizes are in floats. Notation: K = Cin*k*k rows of the column
 * matrix, P = Ho*Wo output pixels per sample, N = nb*P columns (nb samples of a chunk). */

#define CONV_W 16

/* ---------------------------------------------------------------- im2col */

/* col(K, N) from x(nb, C, H, W): col[r][(bl*Ho + oh)*Wo + ow] = x[bl][c][oh*s-p+kh][ow*s-p+kw]
 * (0 outside the image), with r = (c*k + kh)*k + kw. Range (nb, K): work-item (bl, r) writes
 * the P = Ho*Wo contiguous floats of sample bl in row r (one work-item per row of output
 * pixels was 5x slower on PoCL: too little work per item). The zero borders of each output
 * row are split off, so the middle loop is a plain strided copy. */
__kernel void conv_im2col(__global float *col, const int colo, __global const float *x,
                          const int xo, const int C, const int H, const int W, const int k,
                          const int s, const int p, const int Ho, const int Wo, const int nb) {
    const int bl = get_global_id(0), r = get_global_id(1);
    if (bl >= nb || r >= C * k * k) return;
    const int c = r / (k * k), kh = (r / k) % k, kw = r % k;
    __global float *dst = col + colo + r * (nb * Ho * Wo) + bl * (Ho * Wo);
    __global const float *plane = x + xo + (bl * C + c) * H * W;
    /* valid ow: 0 <= ow*s - p + kw < W */
    const int lo = kw >= p ? 0 : min(Wo, (p - kw + s - 1) / s);
    const int e = W - 1 + p - kw; /* largest ow*s; may be negative (division truncates) */
    const int hi = e < 0 ? lo : max(lo, min(Wo, e / s + 1));
    for (int oh = 0; oh < Ho; oh++, dst += Wo) {
        const int ih = oh * s - p + kh;
        if (ih < 0 || ih >= H) {
            for (int ow = 0; ow < Wo; ow++) dst[ow] = 0.0f;
            continue;
        }
        __global const float *src = plane + ih * W + lo * s - p + kw;
        int ow = 0;
        for (; ow < lo; ow++) dst[ow] = 0.0f;
        if (s == 1)
            for (int i = 0; ow < hi; ow++, i++) dst[ow] = src[i];
        else
            for (int i = 0; ow < hi; ow++, i += s) dst[ow] = src[i];
        for (; ow < Wo; ow++) dst[ow] = 0.0f;
    }
}

/* ---------------------------------------------------------------- CLBlast forward epilogue */

/* y(nb, Cout, P) = tmp(Cout, N) rearranged + b(Cout); a = act(y). For a fixed (sample,
 * channel) both layouts hold the P pixels contiguously, so this is a copy of runs.
 * Range (ceil(P/16), nb*Cout): work-item (i, row = bl*Cout + co) covers pixels [16i, 16i+16).
 * has_bias = 0: b is not read. conv_out_fwd leaves `a` untouched. */
#define CONV_OUT_FWD(NAME, F, STORE)                                                               \
    __kernel void NAME(__global float *y, const int yo, __global float *a, const int ao,           \
                       __global const float *tmp, const int to, __global const float *b,          \
                       const int bo, const int has_bias, const int Cout, const int P,             \
                       const int nb) {                                                             \
        const int q = CONV_W * get_global_id(0), row = get_global_id(1);                          \
        if (q >= P || row >= nb * Cout) return;                                                    \
        const int bl = row / Cout, co = row - bl * Cout;                                           \
        const float bias = has_bias ? b[bo + co] : 0.0f;                                           \
        const int src = to + co * (nb * P) + bl * P + q, dst = row * P + q;                        \
        if (q + CONV_W <= P) {                                                                     \
            float16 v = vload16(0, tmp + src) + bias;                                              \
            vstore16(v, 0, y + yo + dst);                                                          \
            if (STORE) vstore16(F(v), 0, a + ao + dst);                                            \
        } else {                                                                                   \
            for (int i = 0; i < P - q; i++) {                                                      \
                float v = tmp[src + i] + bias;                                                     \
                y[yo + dst + i] = v;                                                               \
                if (STORE) a[ao + dst + i] = F((float16)(v)).s0;                                   \
            }                                                                                      \
        }                                                                                          \
    }
CONV_OUT_FWD(conv_out_fwd, nn_ident_v, 0)
CONV_OUT_FWD(conv_out_relu_fwd, nn_relu_v, 1)
CONV_OUT_FWD(conv_out_gelu_fwd, nn_gelu_v, 1)

/* ---------------------------------------------------------------- backward prologue */

/* Sum of the 16 lanes as a fixed tree (halves added pairwise). */
float conv_hsum16(float16 v) {
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* g(Cout, N) = scale * da(nb, Cout, P) * act'(y) rearranged into the GEMM layout, and the
 * partial bias sums part(Cout, nb): part[co*nb + bl] = sum over the P pixels of g (for
 * CLBlast). Range (nb, Cout): work-item (bl, co) walks its P pixels in order, 16 lanes at a
 * time; the lanes are then added as a fixed tree, so the sum order is fixed. conv_grad_out
 * (no activation) does not read y. */
#define CONV_GRAD_OUT(NAME, G, USE_Y)                                                              \
    __kernel void NAME(__global float *g, const int go, __global float *part, const int po,       \
                       __global const float *da, const int dao, __global const float *y,          \
                       const int yo, const float scale, const int Cout, const int P,               \
                       const int nb) {                                                             \
        const int bl = get_global_id(0), co = get_global_id(1);                                    \
        if (bl >= nb || co >= Cout) return;                                                        \
        const int src = (bl * Cout + co) * P;                                                      \
        __global float *dst = g + go + co * (nb * P) + bl * P;                                     \
        float16 acc = 0.0f;                                                                        \
        int q = 0;                                                                                 \
        for (; q + CONV_W <= P; q += CONV_W) {                                                     \
            float16 v = scale * vload16(0, da + dao + src + q);                                    \
            if (USE_Y) v *= G(vload16(0, y + yo + src + q));                                       \
            vstore16(v, 0, dst + q);                                                               \
            acc += v;                                                                              \
        }                                                                                          \
        float sum = conv_hsum16(acc);                                                              \
        for (; q < P; q++) {                                                                       \
            float v = scale * da[dao + src + q];                                                   \
            if (USE_Y) v *= G((float16)(y[yo + src + q])).s0;                                      \
            dst[q] = v;                                                                            \
            sum += v;                                                                              \
        }                                                                                          \
        part[po + co * nb + bl] = sum;                                                             \
    }
CONV_GRAD_OUT(conv_grad_out, nn_ident_v, 0)
CONV_GRAD_OUT(conv_grad_out_relu, nn_relu_grad_v, 1)
CONV_GRAD_OUT(conv_grad_out_gelu, nn_gelu_grad_v, 1)

/* Stores lanes [0, n) of v at c (n <= 16), in vector pieces. */
void conv_store_n(__global float *c, const int n, const float16 v) {
    if (n >= CONV_W) {
        vstore16(v, 0, c);
        return;
    }
    float t[CONV_W];
    vstore16(v, 0, t);
    int j = 0;
    if (n >= 8) vstore8(v.lo, 0, c), j = 8;
    if (n - j >= 4) vstore4(vload4(0, t + j), 0, c + j), j += 4;
    if (n - j >= 2) vstore2(vload2(0, t + j), 0, c + j), j += 2;
    if (n > j) c[j] = t[j];
}

/* For the tiled kernels: the same values, plus their transpose gt(N, Cout) that the tiled
 * dW reads, and g(Cout, N) only if with_g. Range (nb, ceil(Cout/16), ceil(P/CONV_PQ)):
 * work-item (bl, j, z) takes channels 16j.. (reads past Cout are clamped, never stored) and
 * pixels [z*CONV_PQ, z*CONV_PQ + CONV_PQ), 16 pixels at a time: a float16 per channel
 * (contiguous loads and g stores), transposed through a private 16x16 block into 16
 * contiguous float16 stores of gt (storing gt one float per cache line from the kernel
 * above ran 3x slower for the MNIST CNN's first conv). Bias partials part(Cout, nb, PB):
 * each block's 16 pixels as the fixed tree of conv_hsum16, blocks and the scalar tail in
 * pixel order. */
#define CONV_PQ 64
#define CONV_GRAD_OUT_T(NAME, G, USE_Y)                                                            \
    __kernel void NAME(__global float *g, const int go, const int with_g, __global float *gt,     \
                       const int gto, __global float *part, const int po,                         \
                       __global const float *da, const int dao, __global const float *y,          \
                       const int yo, const float scale, const int Cout, const int P,               \
                       const int nb) {                                                             \
        const int bl = get_global_id(0), co0 = CONV_W * get_global_id(1), z = get_global_id(2);   \
        const int PB = (P + CONV_PQ - 1) / CONV_PQ;                                                \
        if (bl >= nb || co0 >= Cout || z >= PB) return;                                            \
        const int n = min(CONV_W, Cout - co0), q1 = min(P, z * CONV_PQ + CONV_PQ);                 \
        float blk[CONV_W * CONV_W], sum[CONV_W];                                                   \
        for (int j = 0; j < CONV_W; j++) sum[j] = 0.0f;                                            \
        int q = z * CONV_PQ;                                                                       \
        for (; q + CONV_W <= q1; q += CONV_W) {                                                    \
            for (int j = 0; j < CONV_W; j++) {                                                     \
                const int src = (bl * Cout + min(co0 + j, Cout - 1)) * P + q;                      \
                float16 v = scale * vload16(0, da + dao + src);                                    \
                if (USE_Y) v *= G(vload16(0, y + yo + src));                                       \
                if (with_g && j < n) vstore16(v, 0, g + go + (co0 + j) * nb * P + bl * P + q);     \
                sum[j] += conv_hsum16(v);                                                          \
                vstore16(v, 0, blk + j * CONV_W);                                                  \
            }                                                                                      \
            for (int i = 0; i < CONV_W; i++) {                                                     \
                float t[CONV_W];                                                                   \
                for (int j = 0; j < CONV_W; j++) t[j] = blk[j * CONV_W + i];                       \
                conv_store_n(gt + gto + (bl * P + q + i) * Cout + co0, n, vload16(0, t));          \
            }                                                                                      \
        }                                                                                          \
        for (; q < q1; q++)                                                                        \
            for (int j = 0; j < n; j++) {                                                          \
                const int src = (bl * Cout + co0 + j) * P + q;                                     \
                float v = scale * da[dao + src];                                                   \
                if (USE_Y) v *= G((float16)(y[yo + src])).s0;                                      \
                if (with_g) g[go + (co0 + j) * nb * P + bl * P + q] = v;                           \
                gt[gto + (bl * P + q) * Cout + co0 + j] = v;                                       \
                sum[j] += v;                                                                       \
            }                                                                                      \
        for (int j = 0; j < n; j++) part[po + ((co0 + j) * nb + bl) * PB + z] = sum[j];            \
    }
CONV_GRAD_OUT_T(conv_grad_out_t, nn_ident_v, 0)
CONV_GRAD_OUT_T(conv_grad_out_t_relu, nn_relu_grad_v, 1)
CONV_GRAD_OUT_T(conv_grad_out_t_gelu, nn_gelu_grad_v, 1)

/* db(Cout) = [db +] sum_i part[co*nb + i], i in order (nb partials per channel: samples,
 * or (sample, pixel block) pairs from conv_grad_out_t). One work-item per channel. */
__kernel void conv_bias_grad(__global float *db, const int dbo, __global const float *part,
                             const int po, const int Cout, const int nb, const int accumulate) {
    const int co = get_global_id(0);
    if (co >= Cout) return;
    float s = 0.0f;
    for (int bl = 0; bl < nb; bl++) s += part[po + co * nb + bl];
    db[dbo + co] = accumulate ? db[dbo + co] + s : s;
}

/* ---------------------------------------------------------------- register-tiled GEMM */

/* C(M, N) = A(M, L) B(L, N) for CPUs (CLBlast's alternative, chosen on CPU devices by
 * ops_conv.c): work-item (j, i) accumulates rows 6i..6i+5 x columns 16j..16j+15 in six
 * float16 registers, reading per step l one float16 of B's row l and six scalars of A
 * (12 of the 16 AVX registers hold the tile: 6x16 measured 15% faster than 4x16 on PoCL,
 * 8x16 spills and runs at half speed).
 * A(m, l) = A[m*sam + l*sal] (strides let it read W or W^T in place), B row-major with
 * leading dimension ldb. Rows past M are clamped for reading and not stored; columns past N
 * are computed from whatever follows B's rows and not stored. The sum over l runs in order. */
/* An edge tile (n0 + 16 > N) still loads 16 floats: past the row's end it reads the next
 * row, or past the matrix the 16 floats of slack the workspace keeps after every segment
 * (ops_conv.c); those lanes are never stored. */
float16 conv_load_b(__global const float *row, const int n0) { return vload16(0, row + n0); }

#define CONV_TM 6 /* rows per tile; ops_conv.c knows it too */
#define CONV_TILE_ACC(A, sam, sal, B, ldb, M, N, m0, n0, l0, l1)                                   \
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;                      \
    {                                                                                              \
        __global const float *a0 = (A) + min((m0), (M)-1) * (sam);                                 \
        __global const float *a1 = (A) + min((m0) + 1, (M)-1) * (sam);                             \
        __global const float *a2 = (A) + min((m0) + 2, (M)-1) * (sam);                             \
        __global const float *a3 = (A) + min((m0) + 3, (M)-1) * (sam);                             \
        __global const float *a4 = (A) + min((m0) + 4, (M)-1) * (sam);                             \
        __global const float *a5 = (A) + min((m0) + 5, (M)-1) * (sam);                             \
        for (int l = (l0); l < (l1); l++) {                                                        \
            const float16 bv = conv_load_b((B) + l * (ldb), (n0));                            \
            const int al = l * (sal);                                                              \
            c0 = fma((float16)(a0[al]), bv, c0);                                                   \
            c1 = fma((float16)(a1[al]), bv, c1);                                                   \
            c2 = fma((float16)(a2[al]), bv, c2);                                                   \
            c3 = fma((float16)(a3[al]), bv, c3);                                                   \
            c4 = fma((float16)(a4[al]), bv, c4);                                                   \
            c5 = fma((float16)(a5[al]), bv, c5);                                                   \
        }                                                                                          \
    }

/* Stores row i of the tile (if m0 + i < M) at C + row*ldc, the valid lanes only. */
void conv_store_row(__global float *C, const int ldc, const int M, const int N, const int m,
                    const int n0, const float16 v) {
    if (m >= M) return;
    __global float *c = C + m * ldc + n0;
    if (n0 + CONV_W <= N) {
        vstore16(v, 0, c);
        return;
    }
    float t[CONV_W];
    vstore16(v, 0, t);
    for (int j = 0; j < N - n0; j++) c[j] = t[j];
}

/* Plain GEMM with split L: slice z = get_global_id(2) sums l in [z*Ls, min(L, z*Ls + Ls))
 * into C + z*slice (partials the caller reduces in order). Range (ceil(N/16), ceil(M/6), S). */
__kernel void conv_gemm(__global float *C, const int co, const int ldc, const int slice,
                        __global const float *A, const int ao, const int sam, const int sal,
                        __global const float *B, const int bo, const int ldb, const int M,
                        const int N, const int L, const int Ls) {
    const int n0 = CONV_W * get_global_id(0), m0 = CONV_TM * get_global_id(1);
    const int z = get_global_id(2);
    if (n0 >= N || m0 >= M) return;
    const int l0 = z * Ls, l1 = min(L, l0 + Ls);
    CONV_TILE_ACC(A + ao, sam, sal, B + bo, ldb, M, N, m0, n0, l0, l1)
    __global float *c = C + co + z * slice;
    conv_store_row(c, ldc, M, N, m0, n0, c0);
    conv_store_row(c, ldc, M, N, m0 + 1, n0, c1);
    conv_store_row(c, ldc, M, N, m0 + 2, n0, c2);
    conv_store_row(c, ldc, M, N, m0 + 3, n0, c3);
    conv_store_row(c, ldc, M, N, m0 + 4, n0, c4);
    conv_store_row(c, ldc, M, N, m0 + 5, n0, c5);
}

/* Forward: y(nb, Cout, P) = W(Cout, K) col(K, N) + b, a = act(y), written straight into
 * NCHW (no intermediate): column n of the tile is pixel q = n % P of sample n / P. A tile
 * inside one sample stores float16 runs; one straddling two samples (or the end) stores
 * lane by lane. Range (ceil(N/16), ceil(Cout/6)). conv_gemm_out leaves `a` untouched. */
void conv_out_row(__global float *y, __global float *a, const int store_a, const int Cout,
                  const int P, const int N, const int co, const int n0, const float16 v,
                  const float16 f) {
    if (co >= Cout) return;
    const int bl = n0 / P, q = n0 - bl * P;
    if (q + CONV_W <= P && n0 + CONV_W <= N) {
        vstore16(v, 0, y + (bl * Cout + co) * P + q);
        if (store_a) vstore16(f, 0, a + (bl * Cout + co) * P + q);
        return;
    }
    float tv[CONV_W], tf[CONV_W];
    vstore16(v, 0, tv);
    vstore16(f, 0, tf);
    for (int j = 0; j < CONV_W && n0 + j < N; j++) {
        const int n = n0 + j, b2 = n / P, i = (b2 * Cout + co) * P + (n - b2 * P);
        y[i] = tv[j];
        if (store_a) a[i] = tf[j];
    }
}

#define CONV_GEMM_OUT(NAME, F, STORE)                                                              \
    __kernel void NAME(__global float *y, const int yo, __global float *a, const int ao,           \
                       __global const float *b, const int bo, const int has_bias,                 \
                       __global const float *W, const int wo, __global const float *col,          \
                       const int colo, const int Cout, const int K, const int N, const int P) {   \
        const int n0 = CONV_W * get_global_id(0), m0 = CONV_TM * get_global_id(1);                \
        if (n0 >= N || m0 >= Cout) return;                                                         \
        CONV_TILE_ACC(W + wo, K, 1, col + colo, N, Cout, N, m0, n0, 0, K)                          \
        if (has_bias) {                                                                            \
            c0 += b[bo + min(m0, Cout - 1)];                                                       \
            c1 += b[bo + min(m0 + 1, Cout - 1)];                                                   \
            c2 += b[bo + min(m0 + 2, Cout - 1)];                                                   \
            c3 += b[bo + min(m0 + 3, Cout - 1)];                                                   \
            c4 += b[bo + min(m0 + 4, Cout - 1)];                                                   \
            c5 += b[bo + min(m0 + 5, Cout - 1)];                                                   \
        }                                                                                          \
        conv_out_row(y + yo, a + ao, STORE, Cout, P, N, m0, n0, c0, F(c0));                        \
        conv_out_row(y + yo, a + ao, STORE, Cout, P, N, m0 + 1, n0, c1, F(c1));                    \
        conv_out_row(y + yo, a + ao, STORE, Cout, P, N, m0 + 2, n0, c2, F(c2));                    \
        conv_out_row(y + yo, a + ao, STORE, Cout, P, N, m0 + 3, n0, c3, F(c3));                    \
        conv_out_row(y + yo, a + ao, STORE, Cout, P, N, m0 + 4, n0, c4, F(c4));                    \
        conv_out_row(y + yo, a + ao, STORE, Cout, P, N, m0 + 5, n0, c5, F(c5));                    \
    }
CONV_GEMM_OUT(conv_gemm_out, nn_ident_v, 0)
CONV_GEMM_OUT(conv_gemm_out_relu, nn_relu_v, 1)
CONV_GEMM_OUT(conv_gemm_out_gelu, nn_gelu_v, 1)

/* dW(Cout, K) = [dW +] sum_z part[z](K, Cout) transposed, slices in order. Range (K, Cout). */
__kernel void conv_dw_reduce(__global float *dw, const int dwo, __global const float *part,
                             const int po, const int K, const int Cout, const int S,
                             const int accumulate) {
    const int r = get_global_id(0), co = get_global_id(1);
    if (r >= K || co >= Cout) return;
    float s = 0.0f;
    for (int z = 0; z < S; z++) s += part[po + (z * K + r) * Cout + co];
    dw[dwo + co * K + r] = accumulate ? dw[dwo + co * K + r] + s : s;
}

/* ---------------------------------------------------------------- stride 1: implicit GEMM */

/* With stride 1, 16 neighbouring output pixels of one row read 16 neighbouring input pixels
 * for every tap (c, kh, kw), so the tiled GEMM can load its B vectors straight from a
 * zero-padded copy of the input instead of a k*k times larger column matrix (and the input
 * gradient likewise from a padded copy of the output gradient: no dcol, no col2im). A tile
 * is 6 channels x 16 pixels of one row; lanes past the row's end compute garbage from the
 * padding, the next row or the segment's slack, and are not stored. */

/* dst(planes, Hp, Wp) = src(planes, H, W) shifted by p rows and columns, zeros around.
 * Range (planes*Hp): one padded row per work-item. */
__kernel void conv_pad(__global float *dst, const int dsto, __global const float *src,
                       const int srco, const int planes, const int H, const int W, const int p,
                       const int Hp, const int Wp) {
    const int row = get_global_id(0);
    if (row >= planes * Hp) return;
    const int pl = row / Hp, ih = row - pl * Hp - p;
    __global float *d = dst + dsto + row * Wp;
    if (ih < 0 || ih >= H) {
        for (int j = 0; j < Wp; j++) d[j] = 0.0f;
        return;
    }
    __global const float *r = src + srco + (pl * H + ih) * W;
    int j = 0;
    for (; j < p; j++) d[j] = 0.0f;
    for (; j < p + W; j++) d[j] = r[j - p];
    for (; j < Wp; j++) d[j] = 0.0f;
}

/* y(nb, Cout, Ho, Wo) = conv(x) + b, a = act(y), from xp = x padded by p (Hp = Ho + k - 1,
 * Wp). Range (ceil(Wo/16), ceil(Cout/6), nb*Ho): work-item (j, i, bl*Ho + oh) computes
 * channels 6i.. x pixels 16j.. of output row oh of sample bl, taps in W's order (c, kh, kw).
 * conv_igemm_fwd leaves `a` untouched. */
#define CONV_IGEMM_FWD(NAME, F, STORE)                                                             \
    __kernel void NAME(__global float *y, const int yo, __global float *a, const int ao,           \
                       __global const float *b, const int bo, const int has_bias,                 \
                       __global const float *W, const int wo, __global const float *xp,           \
                       const int xpo, const int Cin, const int k, const int Hp, const int Wp,     \
                       const int Cout, const int Ho, const int Wo, const int nb) {                \
        const int ow0 = CONV_W * get_global_id(0), m0 = CONV_TM * get_global_id(1);               \
        const int t = get_global_id(2);                                                            \
        if (ow0 >= Wo || m0 >= Cout || t >= nb * Ho) return;                                       \
        const int bl = t / Ho, oh = t - bl * Ho, K = Cin * k * k;                                  \
        __global const float *base = xp + xpo + (bl * Cin * Hp + oh) * Wp + ow0;                   \
        __global const float *a0 = W + wo + min(m0, Cout - 1) * K;                                 \
        __global const float *a1 = W + wo + min(m0 + 1, Cout - 1) * K;                             \
        __global const float *a2 = W + wo + min(m0 + 2, Cout - 1) * K;                             \
        __global const float *a3 = W + wo + min(m0 + 3, Cout - 1) * K;                             \
        __global const float *a4 = W + wo + min(m0 + 4, Cout - 1) * K;                             \
        __global const float *a5 = W + wo + min(m0 + 5, Cout - 1) * K;                             \
        float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;                  \
        int l = 0;                                                                                 \
        for (int c = 0; c < Cin; c++)                                                              \
            for (int kh = 0; kh < k; kh++) {                                                       \
                __global const float *row = base + (c * Hp + kh) * Wp;                             \
                for (int kw = 0; kw < k; kw++, l++) {                                              \
                    const float16 bv = vload16(0, row + kw);                                       \
                    c0 = fma((float16)(a0[l]), bv, c0);                                            \
                    c1 = fma((float16)(a1[l]), bv, c1);                                            \
                    c2 = fma((float16)(a2[l]), bv, c2);                                            \
                    c3 = fma((float16)(a3[l]), bv, c3);                                            \
                    c4 = fma((float16)(a4[l]), bv, c4);                                            \
                    c5 = fma((float16)(a5[l]), bv, c5);                                            \
                }                                                                                  \
            }                                                                                      \
        float16 acc[CONV_TM] = {c0, c1, c2, c3, c4, c5};                                           \
        const int P = Ho * Wo, n = min(CONV_W, Wo - ow0);                                          \
        for (int i = 0; i < CONV_TM && m0 + i < Cout; i++) {                                       \
            const float16 v = acc[i] + (has_bias ? b[bo + m0 + i] : 0.0f);                         \
            const int off = ((bl * Cout + m0 + i) * Ho + oh) * Wo + ow0;                           \
            conv_store_n(y + yo + off, n, v);                                                      \
            if (STORE) conv_store_n(a + ao + off, n, F(v));                                        \
        }                                                                                          \
    }
CONV_IGEMM_FWD(conv_igemm_fwd, nn_ident_v, 0)
CONV_IGEMM_FWD(conv_igemm_relu_fwd, nn_relu_v, 1)
CONV_IGEMM_FWD(conv_igemm_gelu_fwd, nn_gelu_v, 1)

/* dx(nb, Cin, H, Wd) = sum over (co, kh, kw) of W[co][c][kh][kw] g[co][ih+p-kh][iw+p-kw], from
 * gp = g(Cout, nb, Ho, Wo) padded by k-1-p (Hq = H + k - 1, Wq), which puts every tap inside
 * gp. Range (ceil(Wd/16), ceil(Cin/6), nb*H): work-item (j, i, bl*H + ih) writes channels
 * 6i.. x pixels 16j.. of row ih of sample bl; the sum runs over (co, kh, kw) in order. */
__kernel void conv_igemm_dx(__global float *dx, const int dxo, __global const float *W,
                            const int wo, __global const float *gp, const int gpo, const int Cin,
                            const int H, const int Wd, const int k, const int Cout, const int Hq,
                            const int Wq, const int nb) {
    const int iw0 = CONV_W * get_global_id(0), m0 = CONV_TM * get_global_id(1);
    const int t = get_global_id(2);
    if (iw0 >= Wd || m0 >= Cin || t >= nb * H) return;
    const int bl = t / H, ih = t - bl * H, kk = k * k, K = Cin * kk;
    __global const float *base = gp + gpo + (bl * Hq + ih + k - 1) * Wq + iw0 + k - 1;
    __global const float *a0 = W + wo + min(m0, Cin - 1) * kk;
    __global const float *a1 = W + wo + min(m0 + 1, Cin - 1) * kk;
    __global const float *a2 = W + wo + min(m0 + 2, Cin - 1) * kk;
    __global const float *a3 = W + wo + min(m0 + 3, Cin - 1) * kk;
    __global const float *a4 = W + wo + min(m0 + 4, Cin - 1) * kk;
    __global const float *a5 = W + wo + min(m0 + 5, Cin - 1) * kk;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;
    for (int co = 0; co < Cout; co++)
        for (int kh = 0; kh < k; kh++) {
            __global const float *row = base + (co * nb * Hq - kh) * Wq;
            const int w0 = co * K + kh * k;
            for (int kw = 0; kw < k; kw++) {
                const float16 bv = vload16(0, row - kw);
                c0 = fma((float16)(a0[w0 + kw]), bv, c0);
                c1 = fma((float16)(a1[w0 + kw]), bv, c1);
                c2 = fma((float16)(a2[w0 + kw]), bv, c2);
                c3 = fma((float16)(a3[w0 + kw]), bv, c3);
                c4 = fma((float16)(a4[w0 + kw]), bv, c4);
                c5 = fma((float16)(a5[w0 + kw]), bv, c5);
            }
        }
    float16 acc[CONV_TM] = {c0, c1, c2, c3, c4, c5};
    const int n = min(CONV_W, Wd - iw0);
    for (int i = 0; i < CONV_TM && m0 + i < Cin; i++)
        conv_store_n(dx + dxo + ((bl * Cin + m0 + i) * H + ih) * Wd + iw0, n, acc[i]);
}

/* dW^T(K, Cout) = sum over the pixels of slice z of col(r, pixel) gt(pixel, Cout), reading
 * col's entries straight from xp (r = (c, kh, kw) is a fixed offset into xp, and a run of
 * pixels along an output row a run of xp). Range (ceil(Cout/16), ceil(K/6), S): slice z
 * takes pixels [z*Ls, z*Ls + Ls) in order. direct (one slice): the tile lands transposed
 * in dW, added to it with accumulate; else in partials C + z*K*Cout for conv_dw_reduce. */
__kernel void conv_igemm_dw(__global float *C, const int cofs, const int direct,
                            const int accumulate, __global const float *xp, const int xpo,
                            __global const float *gt, const int gto, const int Cin, const int k,
                            const int Hp, const int Wp, const int Cout, const int Ho,
                            const int Wo, const int nb, const int Ls) {
    const int n0 = CONV_W * get_global_id(0), m0 = CONV_TM * get_global_id(1);
    const int z = get_global_id(2), K = Cin * k * k, P = Ho * Wo, N = nb * P;
    if (n0 >= Cout || m0 >= K) return;
    int off[CONV_TM];
    for (int i = 0; i < CONV_TM; i++) {
        const int r = min(m0 + i, K - 1);
        off[i] = (r / (k * k)) * Hp * Wp + ((r / k) % k) * Wp + r % k;
    }
    const int o0 = off[0], o1 = off[1], o2 = off[2], o3 = off[3], o4 = off[4], o5 = off[5];
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f;
    const int l1 = min(N, z * Ls + Ls);
    int l = z * Ls, bl = l / P, oh = (l - bl * P) / Wo, ow = l - bl * P - oh * Wo;
    while (l < l1) {
        const int run = min(Wo - ow, l1 - l);
        __global const float *xr = xp + xpo + (bl * Cin * Hp + oh) * Wp + ow;
        __global const float *gr = gt + gto + l * Cout + n0;
        for (int j = 0; j < run; j++) {
            const float16 bv = vload16(0, gr + j * Cout);
            c0 = fma((float16)(xr[o0 + j]), bv, c0);
            c1 = fma((float16)(xr[o1 + j]), bv, c1);
            c2 = fma((float16)(xr[o2 + j]), bv, c2);
            c3 = fma((float16)(xr[o3 + j]), bv, c3);
            c4 = fma((float16)(xr[o4 + j]), bv, c4);
            c5 = fma((float16)(xr[o5 + j]), bv, c5);
        }
        l += run, ow = 0;
        if (++oh == Ho) oh = 0, bl++;
    }
    float16 acc[CONV_TM] = {c0, c1, c2, c3, c4, c5};
    for (int i = 0; i < CONV_TM && m0 + i < K; i++) {
        if (!direct) {
            conv_store_n(C + cofs + (z * K + m0 + i) * Cout + n0, min(CONV_W, Cout - n0), acc[i]);
            continue;
        }
        float t[CONV_W];
        vstore16(acc[i], 0, t);
        for (int j = 0; j < CONV_W && n0 + j < Cout; j++) {
            __global float *d = C + cofs + (n0 + j) * K + m0 + i;
            *d = accumulate ? *d + t[j] : t[j];
        }
    }
}

/* ---------------------------------------------------------------- col2im */

/* dx(nb, C, H, W) = the sum of every column-matrix entry that im2col copied from that
 * pixel. Work-item (bl, c, ih) owns one row of dx: it zeroes it, then adds the dcol rows
 * of its taps (kh, kw) in ascending order, each a contiguous run of Wo values (strided by s
 * in dx). So every pixel sums its contributions in the fixed (kh, kw) order: deterministic,
 * no atomics; pixels no window covers stay 0. Range (nb*C*H). */
__kernel void conv_col2im(__global float *dx, const int dxo, __global const float *dcol,
                          const int dco, const int C, const int H, const int W, const int k,
                          const int s, const int p, const int Ho, const int Wo, const int nb) {
    const int row = get_global_id(0);
    if (row >= nb * C * H) return;
    const int ih = row % H, c = (row / H) % C, bl = row / (H * C);
    const int N = nb * Ho * Wo;
    __global float *dst = dx + dxo + row * W;
    for (int iw = 0; iw < W; iw++) dst[iw] = 0.0f;
    for (int kh = 0; kh < k; kh++) {
        const int th = ih + p - kh; /* = oh * s */
        if (th < 0) break;          /* larger kh only lowers th */
        const int oh = th / s;
        if (oh * s != th || oh >= Ho) continue;
        for (int kw = 0; kw < k; kw++) {
            __global const float *src = dcol + dco + ((c * k + kh) * k + kw) * N + (bl * Ho + oh) * Wo;
            /* ow with 0 <= ow*s - p + kw < W, as in im2col */
            const int lo = kw >= p ? 0 : min(Wo, (p - kw + s - 1) / s);
            const int e = W - 1 + p - kw;
            const int hi = e < 0 ? lo : max(lo, min(Wo, e / s + 1));
            __global float *d = dst + lo * s - p + kw;
            if (s == 1)
                for (int ow = lo, i = 0; ow < hi; ow++, i++) d[i] += src[ow];
            else
                for (int ow = lo, i = 0; ow < hi; ow++, i += s) d[i] += src[ow];
        }
    }
}
