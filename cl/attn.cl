/* Causal multi-head self-attention core of a GPT (llm.c's attention_forward/backward) over
 * qkv(B,T,3C) from the QKV projection: per head, softmax(q k^T / sqrt(hs)) with the causal
 * mask, times v. Two kernel sets: one work-group per (b, h) with a tile in local memory (used
 * where it fits), and one work-item per (b, h, t) row. Head vectors are read as float8 with a
 * scalar tail (any head size). Backward gathers per query row and per key row: no atomics. */

float tf_hsum8(float8 v); /* in embed.cl (files are one program, concatenated in name order) */

/* a(n) . b(n) for n-float head vectors. */
float tf_attn_dot(__global const float *a, __global const float *b, const int n) {
    float8 s = 0.0f;
    int i = 0;
    for (; i + 8 <= n; i += 8) s += vload8(0, a + i) * vload8(0, b + i);
    float r = tf_hsum8(s);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* Weighted sums of n rows, sum_r w[r*ws] * x[r*xs + 0..7] (float8) or x[r*xs] (scalar), with
 * four independent accumulators: one chain of multiply-adds would wait on the FMA latency at
 * every step (measured with perf: half the kernel's time). One version per address-space
 * pair (OpenCL 1.2 has no generic pointers): gg, lg = local weights, gl = local rows. */
#define TF_WSUM8(NAME, WAS, XAS)                                                                   \
    float8 NAME(WAS const float *w, const int ws, XAS const float *x, const int xs, const int n) { \
        float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;                                         \
        int r = 0;                                                                                 \
        for (; r + 4 <= n; r += 4) {                                                               \
            a0 += w[(size_t)r * ws] * vload8(0, x + (size_t)r * xs);                               \
            a1 += w[(size_t)(r + 1) * ws] * vload8(0, x + (size_t)(r + 1) * xs);                   \
            a2 += w[(size_t)(r + 2) * ws] * vload8(0, x + (size_t)(r + 2) * xs);                   \
            a3 += w[(size_t)(r + 3) * ws] * vload8(0, x + (size_t)(r + 3) * xs);                   \
        }                                                                                          \
        for (; r < n; r++) a0 += w[(size_t)r * ws] * vload8(0, x + (size_t)r * xs);               \
        return (a0 + a1) + (a2 + a3);                                                              \
    }
#define TF_WSUM1(NAME, WAS, XAS)                                                                   \
    float NAME(WAS const float *w, const int ws, XAS const float *x, const int xs, const int n) {  \
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;                                          \
        int r = 0;                                                                                 \
        for (; r + 4 <= n; r += 4) {                                                               \
            a0 += w[(size_t)r * ws] * x[(size_t)r * xs];                                           \
            a1 += w[(size_t)(r + 1) * ws] * x[(size_t)(r + 1) * xs];                               \
            a2 += w[(size_t)(r + 2) * ws] * x[(size_t)(r + 2) * xs];                               \
            a3 += w[(size_t)(r + 3) * ws] * x[(size_t)(r + 3) * xs];                               \
        }                                                                                          \
        for (; r < n; r++) a0 += w[(size_t)r * ws] * x[(size_t)r * xs];                           \
        return (a0 + a1) + (a2 + a3);                                                              \
    }
TF_WSUM8(tf_wsum8_gg, __global, __global)
TF_WSUM8(tf_wsum8_lg, __local, __global)
TF_WSUM8(tf_wsum8_gl, __global, __local)
/* Two neighbouring float8 blocks of tf_wsum8_gl (ws = 1) in one pass: each weight load feeds
 * two multiply-adds, with each block's sums in the same order as tf_wsum8_gl's. */
void tf_wsum8x2_gl(float8 *r0, float8 *r1, __global const float *w, __local const float *x,
                   const int xs, const int n) {
    float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
    int r = 0;
    for (; r + 4 <= n; r += 4) {
        __local const float *x0 = x + (size_t)r * xs;
        const float w0 = w[r], w1 = w[r + 1], w2 = w[r + 2], w3 = w[r + 3];
        a0 += w0 * vload8(0, x0);
        b0 += w0 * vload8(1, x0);
        a1 += w1 * vload8(0, x0 + xs);
        b1 += w1 * vload8(1, x0 + xs);
        a2 += w2 * vload8(0, x0 + 2 * xs);
        b2 += w2 * vload8(1, x0 + 2 * xs);
        a3 += w3 * vload8(0, x0 + 3 * xs);
        b3 += w3 * vload8(1, x0 + 3 * xs);
    }
    for (; r < n; r++) {
        a0 += w[r] * vload8(0, x + (size_t)r * xs);
        b0 += w[r] * vload8(1, x + (size_t)r * xs);
    }
    *r0 = (a0 + a1) + (a2 + a3);
    *r1 = (b0 + b1) + (b2 + b3);
}
TF_WSUM1(tf_wsum1_gg, __global, __global)
TF_WSUM1(tf_wsum1_lg, __local, __global)

/* out(hs) = scale * sum_r w[r*ws] * rows[r*xs + 0..hs) for r < n. Blocks of 32 columns take
 * one pass over the rows with four float8 accumulators (one weight load feeds four
 * multiply-adds); then float8 blocks, then a scalar tail. */
#define TF_ROWS(NAME, WAS, WSUM8, WSUM1)                                                           \
    void NAME(__global float *out, const float scale, WAS const float *w, const int ws,            \
              __global const float *rows, const int xs, const int n, const int hs) {               \
        int c = 0;                                                                                 \
        for (; c + 32 <= hs; c += 32) {                                                            \
            float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;                                     \
            for (int r = 0; r < n; r++) {                                                          \
                const float wr = w[(size_t)r * ws];                                                \
                __global const float *x = rows + (size_t)r * xs + c;                               \
                a0 += wr * vload8(0, x);                                                           \
                a1 += wr * vload8(1, x);                                                           \
                a2 += wr * vload8(2, x);                                                           \
                a3 += wr * vload8(3, x);                                                           \
            }                                                                                      \
            vstore8(scale * a0, 0, out + c);                                                       \
            vstore8(scale * a1, 1, out + c);                                                       \
            vstore8(scale * a2, 2, out + c);                                                       \
            vstore8(scale * a3, 3, out + c);                                                       \
        }                                                                                          \
        for (; c + 8 <= hs; c += 8) vstore8(scale * WSUM8(w, ws, rows + c, xs, n), 0, out + c);    \
        for (; c < hs; c++) out[c] = scale * WSUM1(w, ws, rows + c, xs, n);                        \
    }
TF_ROWS(tf_rows_gg, __global, tf_wsum8_gg, tf_wsum1_gg)
TF_ROWS(tf_rows_lg, __local, tf_wsum8_lg, tf_wsum1_lg)

/* Work-item i = (b*NH + h)*T + t is query row t of head h in sequence b; it also indexes the
 * row of att(B,NH,T,T). Head h's q, k, v of position t sit at qkv + (b*T + t)*3C + h*hs + {0,
 * C, 2C}. */
#define TF_ATTN_ROW                                                                                \
    const int t = i % T, bh = i / T, h = bh % NH, b = bh / NH;                                     \
    const int hs = C / NH, C3 = 3 * C;                                                             \
    __global const float *qb = qkv + qo + (size_t)b * T * C3 + h * hs; /* q of position 0 */

/* att(B,NH,T,T): row (b,h,t) = softmax_t2<=t(q_t . k_t2 / sqrt(hs)), zero for t2 > t (saved
 * for backward). out(B,T,C): head h's slice of row (b,t) = sum_t2 att[t2] v_t2. */
__kernel void tf_attn_fwd(__global float *out, const int oo, __global float *att, const int ao,
                          __global const float *qkv, const int qo, const int B, const int T,
                          const int C, const int NH) {
    const int i = get_global_id(0);
    if (i >= B * NH * T) return;
    TF_ATTN_ROW
    const float scale = 1.0f / sqrt((float)hs);
    __global const float *kb = qb + C, *vb = qb + 2 * C; /* k, v of position 0 */
    __global const float *q = qb + (size_t)t * C3;
    __global float *a = att + ao + (size_t)i * T;
    const int n = t + 1; /* keys 0..t */
    float m = -INFINITY;
    for (int t2 = 0; t2 < n; t2++) {
        float s = tf_attn_dot(q, kb + (size_t)t2 * C3, hs) * scale;
        a[t2] = s;
        m = fmax(m, s);
    }
    float8 s8 = 0.0f;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        float8 e = exp(vload8(0, a + j) - m);
        vstore8(e, 0, a + j);
        s8 += e;
    }
    float sum = tf_hsum8(s8);
    for (; j < n; j++) {
        float e = exp(a[j] - m);
        a[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (j = 0; j + 8 <= n; j += 8) vstore8(vload8(0, a + j) * inv, 0, a + j);
    for (; j < n; j++) a[j] *= inv;
    for (; j < T; j++) a[j] = 0.0f;
    tf_rows_gg(out + oo + ((size_t)b * T + t) * C + h * hs, 1.0f, a, 1, vb, C3, n, hs);
}

/* Backward, pass 1 (per query row, as forward): with do = dout's head slice of row (b,t),
 *   datt[t2] = do . v_t2,  g[t2] = att[t2] (datt[t2] - sum_j att[j] datt[j]) / sqrt(hs)
 * (the pre-softmax gradient, scaled) goes to the scratch row (t2 <= t only), and
 *   dq_t = sum_t2 g[t2] k_t2 into dqkv's q slice. */
__kernel void tf_attn_bwd_q(__global float *dqkv, const int dqo, __global float *scr,
                            const int so, __global const float *dout, const int doo,
                            __global const float *qkv, const int qo, __global const float *att,
                            const int ao, const int B, const int T, const int C, const int NH) {
    const int i = get_global_id(0);
    if (i >= B * NH * T) return;
    TF_ATTN_ROW
    const float scale = 1.0f / sqrt((float)hs);
    __global const float *kb = qb + C, *vb = qb + 2 * C;
    __global const float *d = dout + doo + ((size_t)b * T + t) * C + h * hs;
    __global const float *a = att + ao + (size_t)i * T;
    __global float *g = scr + so + (size_t)i * T;
    const int n = t + 1;
    float s = 0.0f;
    for (int t2 = 0; t2 < n; t2++) {
        float da = tf_attn_dot(d, vb + (size_t)t2 * C3, hs);
        g[t2] = da;
        s += a[t2] * da;
    }
    for (int t2 = 0; t2 < n; t2++) g[t2] = a[t2] * (g[t2] - s) * scale;
    tf_rows_gg(dqkv + dqo + ((size_t)b * T + t) * C3 + h * hs, 1.0f, g, 1, kb, C3, n, hs);
}

/* Backward, pass 2 (per key row: work-item i = (b*NH + h)*T + t2), summing over the query
 * rows t >= t2 that see key t2, in order:
 *   dk_t2 = sum_t g[t][t2] q_t,  dv_t2 = sum_t att[t][t2] do_t   into dqkv's k and v slices. */
__kernel void tf_attn_bwd_kv(__global float *dqkv, const int dqo, __global const float *scr,
                             const int so, __global const float *dout, const int doo,
                             __global const float *qkv, const int qo, __global const float *att,
                             const int ao, const int B, const int T, const int C, const int NH) {
    const int i = get_global_id(0);
    if (i >= B * NH * T) return;
    TF_ATTN_ROW
    const int t2 = t, n = T - t2; /* this work-item's key position; rows t2..T-1 see it */
    const size_t at = ((size_t)bh * T + t2) * T + t2; /* [bh][t2][t2] */
    __global float *dk = dqkv + dqo + ((size_t)b * T + t2) * C3 + C + h * hs;
    tf_rows_gg(dk, 1.0f, scr + so + at, T, qb + (size_t)t2 * C3, C3, n, hs);
    tf_rows_gg(dk + C, 1.0f, att + ao + at, T, dout + doo + ((size_t)b * T + t2) * C + h * hs, C,
               n, hs);
}

/* ---------------------------------------------------------------- one work-group per head */

/* The same maps with one work-group per (b, h) when its tiles fit in local memory (the host
 * checks): K (forward) or V (backward) is first copied transposed into local memory,
 * kt[i*Ts + t2] (Tp = T rounded up to 8, Ts = Tp + 8: a row stride of a multiple of 1 KiB put
 * a column's 64 rows in 4 of the L1's 64 sets; zero padded), so that 8 scores at a time come from
 * float8 multiply-adds over the head dimension, with no horizontal sums. Work-item l takes
 * rows l, l+L, ... in each phase. */

float8 tf_attn_key8(const int j) { return (float8)(0, 1, 2, 3, 4, 5, 6, 7) + (float)(8 * j); }

/* Copies rows 0..T-1 of x (row stride xs, hs floats each) transposed into xt(hs, Tp). */
void tf_attn_transpose(__local float *xt, __global const float *x, const int xs, const int T,
                       const int Tp, const int hs, const int lid, const int L) {
    for (int t = lid; t < Tp; t += L)
        for (int i = 0; i < hs; i++) xt[i * Tp + t] = t < T ? x[(size_t)t * xs + i] : 0.0f;
}

/* Row t of one head's softmax, unnormalised, from K^T in local memory (kt, row stride ks):
 * s[0..8*(t/8+1)) = exp(q . k_t2 * scale - m), 0 for t2 > t (masked to -inf first); returns
 * (m, sum of s), m the row maximum. Shared by tf_attn_fwd_wg and tf_flash_fwd_wg (flash.cl). */
float2 tf_attn_exp_row(__local float *s, __global const float *q, __local const float *kt,
                       const int ks, const int t, const int hs, const float scale) {
    const int nc = t / 8 + 1; /* chunks holding keys 0..t */
    float8 m8 = -INFINITY;
    for (int j = 0; j < nc; j += 2) {
        float8 s8, s9 = -INFINITY;
        if (j + 1 < nc) {
            tf_wsum8x2_gl(&s8, &s9, q, kt + 8 * j, ks, hs);
            s9 = select(s9 * scale, (float8)(-INFINITY), tf_attn_key8(j + 1) > (float)t);
            vstore8(s9, j + 1, s);
        } else {
            s8 = tf_wsum8_gl(q, 1, kt + 8 * j, ks, hs);
        }
        s8 = select(s8 * scale, (float8)(-INFINITY), tf_attn_key8(j) > (float)t);
        vstore8(s8, j, s);
        m8 = fmax(m8, fmax(s8, s9));
    }
    const float4 m4 = fmax(m8.lo, m8.hi);
    const float m = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
    float8 sum8 = 0.0f;
    for (int j = 0; j < nc; j++) {
        const float8 e = exp(vload8(j, s) - m); /* exp(-inf) = 0 above the diagonal */
        vstore8(e, j, s);
        sum8 += e;
    }
    return (float2)(m, tf_hsum8(sum8));
}

/* Scores, softmax and att v for the rows of one (b,h). srow is L*Tp floats of scratch. */
__kernel void tf_attn_fwd_wg(__global float *out, const int oo, __global float *att, const int ao,
                             __global const float *qkv, const int qo, const int T, const int C,
                             const int NH, __local float *kt, __local float *srow) {
    const int bh = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    const int h = bh % NH, b = bh / NH, hs = C / NH, C3 = 3 * C, Tp = (T + 7) / 8 * 8;
    const int Ts = Tp + 8; /* tile row stride, as in flash.cl */
    __global const float *qb = qkv + qo + (size_t)b * T * C3 + h * hs;
    tf_attn_transpose(kt, qb + C, C3, T, Ts, hs, lid, L);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = 1.0f / sqrt((float)hs);
    __local float *s = srow + lid * Tp;
    for (int t = lid; t < T; t += L) {
        const float inv = 1.0f / tf_attn_exp_row(s, qb + (size_t)t * C3, kt, Ts, t, hs, scale).y;
        __global float *a = att + ao + ((size_t)bh * T + t) * T;
        int t2 = 0;
        for (; t2 + 8 <= T; t2 += 8) vstore8(t2 <= t ? vload8(0, s + t2) * inv : 0.0f, 0, a + t2);
        for (; t2 < T; t2++) a[t2] = t2 <= t ? s[t2] * inv : 0.0f;
        tf_rows_lg(out + oo + ((size_t)b * T + t) * C + h * hs, inv, s, 1, qb + 2 * C, C3, t + 1,
                   hs);
    }
}

/* Both backward passes in one group: query rows (pre-softmax gradient g into local memory,
 * dq), a barrier, then key rows (dk, dv), as tf_attn_bwd_q and tf_attn_bwd_kv. gl is T*Ts. */
__kernel void tf_attn_bwd_wg(__global float *dqkv, const int dqo, __global const float *dout,
                             const int doo, __global const float *qkv, const int qo,
                             __global const float *att, const int ao, const int T, const int C,
                             const int NH, __local float *vt, __local float *gl) {
    const int bh = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    const int h = bh % NH, b = bh / NH, hs = C / NH, C3 = 3 * C, Tp = (T + 7) / 8 * 8;
    const int Ts = Tp + 8; /* row stride of vt and gl, as in flash.cl */
    __global const float *qb = qkv + qo + (size_t)b * T * C3 + h * hs;
    __global const float *db = dout + doo + (size_t)b * T * C + h * hs;
    __global const float *ab = att + ao + (size_t)bh * T * T;
    tf_attn_transpose(vt, qb + 2 * C, C3, T, Ts, hs, lid, L);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = 1.0f / sqrt((float)hs);
    for (int t = lid; t < T; t += L) {
        __global const float *d = db + (size_t)t * C;
        __global const float *a = ab + (size_t)t * T;
        __local float *g = gl + t * Ts;
        int j = 0;
        for (; j + 1 <= t / 8; j += 2) {
            float8 g0, g1;
            tf_wsum8x2_gl(&g0, &g1, d, vt + 8 * j, Ts, hs);
            vstore8(g0, j, g);
            vstore8(g1, j + 1, g);
        }
        if (j <= t / 8) vstore8(tf_wsum8_gl(d, 1, vt + 8 * j, Ts, hs), j, g);
        const int n = t + 1;
        float8 s8 = 0.0f;
        int t2 = 0;
        for (; t2 + 8 <= n; t2 += 8) s8 += vload8(0, a + t2) * vload8(0, g + t2);
        float s = tf_hsum8(s8);
        for (; t2 < n; t2++) s += a[t2] * g[t2];
        for (t2 = 0; t2 + 8 <= n; t2 += 8)
            vstore8(vload8(0, a + t2) * (vload8(0, g + t2) - s) * scale, 0, g + t2);
        for (; t2 < n; t2++) g[t2] = a[t2] * (g[t2] - s) * scale;
        tf_rows_lg(dqkv + dqo + ((size_t)b * T + t) * C3 + h * hs, 1.0f, g, 1, qb + C, C3, t + 1,
                   hs);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t2 = lid; t2 < T; t2 += L) {
        __global float *dk = dqkv + dqo + ((size_t)b * T + t2) * C3 + C + h * hs;
        tf_rows_lg(dk, 1.0f, gl + t2 * Ts + t2, Ts, qb + (size_t)t2 * C3, C3, T - t2, hs);
        tf_rows_gg(dk + C, 1.0f, ab + (size_t)t2 * T + t2, T, db + (size_t)t2 * C, C, T - t2, hs);
    }
}
