/* Activations (ReLU, GELU) forward and backward over flat buffers, and the fused forms the
 * model uses after a linear layer: bias + activation in one pass, and activation backward +
 * bias gradient in one pass. Offsets are in floats; reductions run in a fixed order.
 * Every work-item handles NN_W = 16 consecutive floats as a float16: explicit SIMD, since
 * PoCL does not vectorise the row loops across work-items by itself (measured on PoCL 3.1,
 * AVX2: ReLU backward + bias sums over 256x1024 take 1.6 ms scalar, 190 us with float8,
 * 66 us with float16). Sizes that are not multiples of 16 get a scalar tail. */

#define NN_W 16
#define NN_VEC float16
#define NN_IVEC int16
#define NN_VLOAD vload16
#define NN_VSTORE vstore16

/* GELU, tanh approximation (GPT-2; PyTorch approximate='tanh'):
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
 * 0.5 (1 + tanh(u)) is evaluated as sigmoid(2u) from exp(-2|u|), which keeps full relative
 * precision for negative x (1 + tanh(u) would cancel) and never overflows. x is clamped to
 * +-20 inside u only: beyond that sigmoid(2u) is exactly 0 or 1 in float, and x^3 stays
 * finite. */
#define NN_GELU_K0 0.7978845608028654f
#define NN_GELU_K1 0.044715f

/* Plain functions, not `inline`: C99 inline semantics can leave no external definition.
 * select(a, b, c) is c ? b : a per lane. */
NN_VEC nn_gelu_v(NN_VEC x) {
    NN_VEC xc = clamp(x, -20.0f, 20.0f);
    NN_VEC u = NN_GELU_K0 * (xc + NN_GELU_K1 * xc * xc * xc);
    NN_VEC e = exp(-2.0f * fabs(u)); /* in [0, 1] */
    NN_VEC p = 1.0f / (1.0f + e);    /* sigmoid(2|u|) */
    return x * select(e * p, p, u >= 0.0f);
}

NN_VEC nn_gelu_grad_v(NN_VEC x) {
    NN_VEC xc = clamp(x, -20.0f, 20.0f);
    NN_VEC u = NN_GELU_K0 * (xc + NN_GELU_K1 * xc * xc * xc);
    NN_VEC e = exp(-2.0f * fabs(u));
    NN_VEC p = 1.0f / (1.0f + e);
    NN_IVEC pos = u >= 0.0f;
    NN_VEC s = select(e * p, p, pos);  /* sigmoid(2u) */
    NN_VEC sm = select(p, e * p, pos); /* 1 - sigmoid(2u), without cancellation */
    NN_VEC dudx = NN_GELU_K0 * (1.0f + 3.0f * NN_GELU_K1 * xc * xc);
    return s + 2.0f * xc * s * sm * dudx;
}

/* ReLU keeps NaN visible (x < 0 is false for NaN); its derivative at 0 is 0 like PyTorch. */
NN_VEC nn_relu_v(NN_VEC x) { return select(x, (NN_VEC)(0.0f), x < 0.0f); }
NN_VEC nn_relu_grad_v(NN_VEC x) { return select((NN_VEC)(0.0f), (NN_VEC)(1.0f), x > 0.0f); }
NN_VEC nn_ident_v(NN_VEC x) { return x; }

/* The scalar tail reuses the vector functions on a broadcast value (at most 15 elements). */
#define NN_S(F, v) (F((NN_VEC)(v)).s0)

/* ---------------------------------------------------------------- elementwise */

/* y(n) = act(x(n)); y may alias x. Work-item i covers [16i, 16i+16). */
#define NN_ACT_FWD(NAME, F)                                                                        \
    __kernel void NAME(__global float *y, const int yo, __global const float *x, const int xo,     \
                       const int n) {                                                              \
        int i = NN_W * get_global_id(0);                                                           \
        if (i + NN_W <= n) NN_VSTORE(F(NN_VLOAD(0, x + xo + i)), 0, y + yo + i);                   \
        else                                                                                       \
            for (; i < n; i++) y[yo + i] = NN_S(F, x[xo + i]);                                     \
    }
NN_ACT_FWD(nn_relu_fwd, nn_relu_v)
NN_ACT_FWD(nn_gelu_fwd, nn_gelu_v)

/* dx(n) = scale * dy(n) * act'(x(n)) from the saved input x; dx may alias dy. */
#define NN_ACT_BWD(NAME, G)                                                                        \
    __kernel void NAME(__global float *dx, const int dxo, __global const float *dy, const int dyo, \
                       __global const float *x, const int xo, const int n, const float scale) {    \
        int i = NN_W * get_global_id(0);                                                           \
        if (i + NN_W <= n)                                                                         \
            NN_VSTORE(scale * NN_VLOAD(0, dy + dyo + i) * G(NN_VLOAD(0, x + xo + i)), 0,          \
                      dx + dxo + i);                                                               \
        else                                                                                       \
            for (; i < n; i++) dx[dxo + i] = scale * dy[dyo + i] * NN_S(G, x[xo + i]);             \
    }
NN_ACT_BWD(nn_relu_bwd, nn_relu_grad_v)
NN_ACT_BWD(nn_gelu_bwd, nn_gelu_grad_v)

/* ---------------------------------------------------------------- fused with a linear layer */

/* y(B,N) += b(N) (y becomes the pre-activation kept for backward), a(B,N) = act(y).
 * Range (ceil(N/16), B): work-item (j, r) covers columns [16j, 16j+16) of row r. The GEMM wrote
 * y just before, so this is the only extra pass over the layer output. nn_bias_fwd has no
 * activation and leaves `a` untouched. */
#define NN_BIAS_ACT_FWD(NAME, F, STORE)                                                            \
    __kernel void NAME(__global float *y, const int yo, __global const float *b, const int bo,     \
                       __global float *a, const int ao, const int N, const int B) {                \
        int j = NN_W * get_global_id(0), r = get_global_id(1);                                     \
        if (j >= N || r >= B) return;                                                              \
        int k = r * N + j;                                                                         \
        if (j + NN_W <= N) {                                                                       \
            NN_VEC v = NN_VLOAD(0, y + yo + k) + NN_VLOAD(0, b + bo + j);                          \
            NN_VSTORE(v, 0, y + yo + k);                                                           \
            if (STORE) NN_VSTORE(F(v), 0, a + ao + k);                                             \
        } else {                                                                                   \
            for (; j < N; j++, k++) {                                                              \
                float v = y[yo + k] + b[bo + j];                                                   \
                y[yo + k] = v;                                                                     \
                if (STORE) a[ao + k] = NN_S(F, v);                                                 \
            }                                                                                      \
        }                                                                                          \
    }
NN_BIAS_ACT_FWD(nn_bias_fwd, nn_ident_v, 0)
NN_BIAS_ACT_FWD(nn_bias_relu_fwd, nn_relu_v, 1)
NN_BIAS_ACT_FWD(nn_bias_gelu_fwd, nn_gelu_v, 1)

/* Activation backward with the bias gradient in the same pass. Work-item j owns columns
 * [16j, 16j+16) and walks rows 0..B-1 in order, so every column sum has a fixed order
 * (deterministic) and each row step reads 32 contiguous bytes.
 *   dx(B,N) = scale * dy * act'(x)         (dx may alias dy)
 *   db(N)   = [db +] sum_r dx[r]           (accumulate: add to db; else overwrite, so NaN
 *                                           garbage in a fresh buffer never leaks in) */
#define NN_BWD_BIAS(NAME, G)                                                                       \
    __kernel void NAME(__global float *dx, const int dxo, __global const float *dy, const int dyo, \
                       __global const float *x, const int xo, __global float *db, const int dbo,   \
                       const int N, const int B, const float scale, const int accumulate) {        \
        int j = NN_W * get_global_id(0);                                                           \
        if (j >= N) return;                                                                        \
        if (j + NN_W <= N) {                                                                       \
            NN_VEC s = 0.0f;                                                                       \
            for (int r = 0, k = j; r < B; r++, k += N) {                                           \
                NN_VEC g = scale * NN_VLOAD(0, dy + dyo + k) * G(NN_VLOAD(0, x + xo + k));         \
                NN_VSTORE(g, 0, dx + dxo + k);                                                     \
                s += g;                                                                            \
            }                                                                                      \
            NN_VSTORE(accumulate ? NN_VLOAD(0, db + dbo + j) + s : s, 0, db + dbo + j);            \
        } else {                                                                                   \
            for (; j < N; j++) {                                                                   \
                float s = 0.0f;                                                                    \
                for (int r = 0, k = j; r < B; r++, k += N) {                                       \
                    float g = scale * dy[dyo + k] * NN_S(G, x[xo + k]);                            \
                    dx[dxo + k] = g;                                                               \
                    s += g;                                                                        \
                }                                                                                  \
                db[dbo + j] = accumulate ? db[dbo + j] + s : s;                                    \
            }                                                                                      \
        }                                                                                          \
    }
NN_BWD_BIAS(nn_relu_bwd_bias, nn_relu_grad_v)
NN_BWD_BIAS(nn_gelu_bwd_bias, nn_gelu_grad_v)

/* Bias gradient of a linear layer with nothing after it: db = [db +] scale * sum_r dy[r],
 * columns as above. */
__kernel void nn_bias_bwd(__global const float *dy, const int dyo, __global float *db,
                          const int dbo, const int N, const int B, const float scale,
                          const int accumulate) {
    int j = NN_W * get_global_id(0);
    if (j >= N) return;
    if (j + NN_W <= N) {
        NN_VEC s = 0.0f;
        for (int r = 0, k = j; r < B; r++, k += N) s += NN_VLOAD(0, dy + dyo + k);
        s *= scale;
        NN_VSTORE(accumulate ? NN_VLOAD(0, db + dbo + j) + s : s, 0, db + dbo + j);
    } else {
        for (; j < N; j++) {
            float s = 0.0f;
            for (int r = 0, k = j; r < B; r++, k += N) s += dy[dyo + k];
            s *= scale;
            db[dbo + j] = accumulate ? db[dbo + j] + s : s;
        }
    }
}
