/* Causal attention whose memory grows with T, not T^2 (flash attention, Dao et al. 2022, on a
 * CPU-friendly layout): one work-item per (b, h, row), keys (forward) or queries (backward)
 * taken in tiles of TF_FLASH_TILE with an online softmax; nothing of size T^2 is stored.
 * Forward keeps only out and each row's log-sum-exp lse = m + log(sum exp(s - m)); the
 * backward recomputes every probability p = exp(s - lse) tile by tile:
 *   D_t = dO_t . O_t,  dS = p (dO_t . v_t2 - D_t) / sqrt(hs),
 *   dq_t = sum_t2 dS k_t2,  dk_t2 = sum_t dS q_t,  dv_t2 = sum_t p dO_t.
 * Same qkv layout and work-item indexing (TF_ATTN_ROW, tf_attn_dot) as attn.cl; files are one
 * program, concatenated in name order. Tiles live in private memory: no local memory, so no
 * device limit beyond the private arrays below. */

#define TF_FLASH_TILE 32

/* in loss.cl: log(1 + x) without libclc's log, whose table lookups behind branches make Mesa's
 * llvmpipe warn "Treating load_kernel_arg in control flow as uniform" (see there) */
float nn_log1p_pos(const float x);

/* a . x_r for the 4 rows x_r = x + r*xs (r < 4): four independent multiply-add chains (one
 * dot at a time waits on the FMA latency), float8 then a scalar tail. */
float4 tf_flash_dot4(__global const float *a, __global const float *x, const size_t xs,
                     const int n) {
    float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const float8 av = vload8(0, a + i);
        s0 += av * vload8(0, x + i);
        s1 += av * vload8(0, x + xs + i);
        s2 += av * vload8(0, x + 2 * xs + i);
        s3 += av * vload8(0, x + 3 * xs + i);
    }
    float4 r = (float4)(tf_hsum8(s0), tf_hsum8(s1), tf_hsum8(s2), tf_hsum8(s3));
    for (; i < n; i++)
        r += a[i] * (float4)(x[i], x[xs + i], x[2 * xs + i], x[3 * xs + i]);
    return r;
}

/* s[j] = a . x_j for j < n (rows x_j = x + j*xs), four at a time. */
void tf_flash_dots(float *s, __global const float *a, __global const float *x, const int xs,
                   const int n, const int hs) {
    int j = 0;
    for (; j + 4 <= n; j += 4) vstore4(tf_flash_dot4(a, x + (size_t)j * xs, xs, hs), 0, s + j);
    for (; j < n; j++) s[j] = tf_attn_dot(a, x + (size_t)j * xs, hs);
}

/* out(hs) = (first ? 0 : corr * out) + sum_{r<n} w[r] x[r*xs + 0..hs): one tile's weighted
 * rows added to a running row; blocks of 32 columns use four float8 accumulators (one weight
 * load feeds four multiply-adds), then float8 blocks and a scalar tail. `first` never reads
 * out (it may hold anything, NaN included). */
void tf_flash_axpy(__global float *out, const int first, const float corr, const float *w,
                   __global const float *x, const int xs, const int n, const int hs) {
    int c = 0;
    for (; c + 32 <= hs; c += 32) {
        float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (int r = 0; r < n; r++) {
            const float wr = w[r];
            __global const float *xr = x + (size_t)r * xs + c;
            a0 += wr * vload8(0, xr);
            a1 += wr * vload8(1, xr);
            a2 += wr * vload8(2, xr);
            a3 += wr * vload8(3, xr);
        }
        if (!first) {
            a0 += corr * vload8(0, out + c);
            a1 += corr * vload8(1, out + c);
            a2 += corr * vload8(2, out + c);
            a3 += corr * vload8(3, out + c);
        }
        vstore8(a0, 0, out + c);
        vstore8(a1, 1, out + c);
        vstore8(a2, 2, out + c);
        vstore8(a3, 3, out + c);
    }
    for (; c + 8 <= hs; c += 8) {
        float8 a = 0.0f;
        for (int r = 0; r < n; r++) a += w[r] * vload8(0, x + (size_t)r * xs + c);
        if (!first) a += corr * vload8(0, out + c);
        vstore8(a, 0, out + c);
    }
    for (; c < hs; c++) {
        float a = 0.0f;
        for (int r = 0; r < n; r++) a += w[r] * x[(size_t)r * xs + c];
        out[c] = first ? a : corr * out[c] + a;
    }
}

/* out(B,T,C) as tf_attn_fwd; lse(B,NH,T) at row i. Per key tile: scores, the new running
 * maximum m, the old sum and output rescaled by exp(m_old - m), the tile's exp(s - m) added. */
__kernel void tf_flash_fwd(__global float *out, const int oo, __global float *lse, const int lo,
                           __global const float *qkv, const int qo, const int B, const int T,
                           const int C, const int NH) {
    const int i = get_global_id(0);
    if (i >= B * NH * T) return;
    TF_ATTN_ROW
    const float scale = 1.0f / sqrt((float)hs);
    __global const float *kb = qb + C, *vb = qb + 2 * C, *q = qb + (size_t)t * C3;
    __global float *o = out + oo + ((size_t)b * T + t) * C + h * hs;
    float m = -INFINITY, l = 0.0f, p[TF_FLASH_TILE];
    for (int t0 = 0; t0 <= t; t0 += TF_FLASH_TILE) {
        const int n = min(TF_FLASH_TILE, t + 1 - t0);
        float mt = m;
        tf_flash_dots(p, q, kb + (size_t)t0 * C3, C3, n, hs);
        for (int j = 0; j < n; j++) {
            p[j] *= scale;
            mt = fmax(mt, p[j]);
        }
        const float corr = t0 == 0 ? 0.0f : exp(m - mt);
        float st = 0.0f;
        for (int j = 0; j < n; j++) {
            p[j] = exp(p[j] - mt);
            st += p[j];
        }
        l = l * corr + st;
        tf_flash_axpy(o, t0 == 0, corr, p, vb + (size_t)t0 * C3, C3, n, hs);
        m = mt;
    }
    const float inv = 1.0f / l;
    int c = 0;
    for (; c + 8 <= hs; c += 8) vstore8(vload8(0, o + c) * inv, 0, o + c);
    for (; c < hs; c++) o[c] *= inv;
    lse[lo + i] = m + nn_log1p_pos(fmax(l - 1.0f, 0.0f)); /* l >= 1: the maximum's own term */
}

/* Backward, pass 1, per query row i: D_i = dO . O into dsum(B,NH,T) (read by pass 2), and
 * dq_t = sum_t2 dS[t2] k_t2 into dqkv's q slice (every element written). */
__kernel void tf_flash_bwd_q(__global float *dqkv, const int dqo, __global float *dsum,
                             const int dso, __global const float *dout, const int doo,
                             __global const float *out, const int oo, __global const float *qkv,
                             const int qo, __global const float *lse, const int lo, const int B,
                             const int T, const int C, const int NH) {
    const int i = get_global_id(0);
    if (i >= B * NH * T) return;
    TF_ATTN_ROW
    const float scale = 1.0f / sqrt((float)hs);
    __global const float *kb = qb + C, *vb = qb + 2 * C, *q = qb + (size_t)t * C3;
    const size_t row = ((size_t)b * T + t) * C + h * hs;
    __global const float *d = dout + doo + row;
    const float Di = tf_attn_dot(d, out + oo + row, hs), L = lse[lo + i];
    dsum[dso + i] = Di;
    __global float *dq = dqkv + dqo + ((size_t)b * T + t) * C3 + h * hs;
    float g[TF_FLASH_TILE], p[TF_FLASH_TILE];
    for (int t0 = 0; t0 <= t; t0 += TF_FLASH_TILE) {
        const int n = min(TF_FLASH_TILE, t + 1 - t0);
        tf_flash_dots(p, q, kb + (size_t)t0 * C3, C3, n, hs);
        tf_flash_dots(g, d, vb + (size_t)t0 * C3, C3, n, hs);
        for (int j = 0; j < n; j++) g[j] = exp(p[j] * scale - L) * (g[j] - Di) * scale;
        tf_flash_axpy(dq, t0 == 0, 1.0f, g, kb + (size_t)t0 * C3, C3, n, hs);
    }
}

/* Backward, pass 2, per key row (work-item i = (b*NH + h)*T + t2) over the query rows t >= t2
 * that see it, in tiles: dk_t2 = sum_t dS q_t, dv_t2 = sum_t p dO_t into dqkv's k, v slices. */
__kernel void tf_flash_bwd_kv(__global float *dqkv, const int dqo, __global const float *dsum,
                              const int dso, __global const float *dout, const int doo,
                              __global const float *qkv, const int qo, __global const float *lse,
                              const int lo, const int B, const int T, const int C, const int NH) {
    const int i = get_global_id(0);
    if (i >= B * NH * T) return;
    TF_ATTN_ROW
    const int t2 = t;
    const float scale = 1.0f / sqrt((float)hs);
    __global const float *k = qb + C + (size_t)t2 * C3, *v = k + C;
    __global const float *db = dout + doo + (size_t)b * T * C + h * hs; /* dO of position 0 */
    __global const float *ls = lse + lo + (size_t)bh * T, *ds = dsum + dso + (size_t)bh * T;
    __global float *dk = dqkv + dqo + ((size_t)b * T + t2) * C3 + C + h * hs;
    float p[TF_FLASH_TILE], g[TF_FLASH_TILE];
    for (int t0 = t2; t0 < T; t0 += TF_FLASH_TILE) {
        const int n = min(TF_FLASH_TILE, T - t0);
        tf_flash_dots(p, k, qb + (size_t)t0 * C3, C3, n, hs);
        tf_flash_dots(g, v, db + (size_t)t0 * C, C, n, hs);
        for (int j = 0; j < n; j++) {
            p[j] = exp(p[j] * scale - ls[t0 + j]);
            g[j] = p[j] * (g[j] - ds[t0 + j]) * scale;
        }
        tf_flash_axpy(dk + C, t0 == t2, 1.0f, p, db + (size_t)t0 * C, C, n, hs);
        tf_flash_axpy(dk, t0 == t2, 1.0f, g, qb + (size_t)t0 * C3, C3, n, hs);
    }
}

/* ---------------------------------------------------------------- one work-group per head */

/* The same maps with one work-group per (b, h), where the host finds its tiles fit in the
 * device's local memory: K (forward), then K and V, then Q and dO (backward) copied transposed,
 * xt[i*Ts + t] (tf_attn_transpose, attn.cl; Ts = Tp + 8: a row stride of a multiple of 4 KiB
 * would map every row of a column onto the same cache set), so that 8 scores at a time come from float8
 * multiply-adds over the head dimension; each work-item keeps its current row of scores in
 * local memory (rows l, l+L, ...). Local memory is O((hs + L) T): nothing of size T^2. */

/* Forward: kt is hs*Ts floats, srow L*Tp. */
__kernel void tf_flash_fwd_wg(__global float *out, const int oo, __global float *lse,
                              const int lo, __global const float *qkv, const int qo, const int T,
                              const int C, const int NH, __local float *kt,
                              __local float *srow) {
    const int bh = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    const int h = bh % NH, b = bh / NH, hs = C / NH, C3 = 3 * C, Tp = (T + 7) / 8 * 8;
    const int Ts = Tp + 8;
    __global const float *qb = qkv + qo + (size_t)b * T * C3 + h * hs;
    tf_attn_transpose(kt, qb + C, C3, T, Ts, hs, lid, L);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = 1.0f / sqrt((float)hs);
    __local float *s = srow + lid * Tp;
    for (int t = lid; t < T; t += L) {
        const float2 ms = tf_attn_exp_row(s, qb + (size_t)t * C3, kt, Ts, t, hs, scale);
        const float sum = ms.y;
        tf_rows_lg(out + oo + ((size_t)b * T + t) * C + h * hs, 1.0f / sum, s, 1, qb + 2 * C, C3,
                   t + 1, hs);
        lse[lo + bh * T + t] = ms.x + nn_log1p_pos(fmax(sum - 1.0f, 0.0f));
    }
}

/* Chunk j (8 columns) of one backward row, from transposed rows xt, yt (row stride Ts):
 * p = exp(a . x * scale - lse), 0 past column `last`, returned; *g = p (b . y - D) scale (dS).
 * Query rows (a = q, b = dO over K^T, V^T) and key rows (a = k, b = v over Q^T, dO^T). */
float8 tf_flash_p8(float8 *g, __global const float *a, __local const float *xt,
                   __global const float *b, __local const float *yt, const int j, const int Ts,
                   const int hs, const float scale, const float8 lse, const float8 D,
                   const int last) {
    const float8 s8 = tf_wsum8_gl(a, 1, xt + 8 * j, Ts, hs) * scale;
    const float8 p8 = select(exp(s8 - lse), (float8)0.0f, tf_attn_key8(j) > (float)last);
    *g = p8 * (tf_wsum8_gl(b, 1, yt + 8 * j, Ts, hs) - D) * scale;
    return p8;
}

/* Chunks j and j + 1 of tf_flash_p8 in one pass over each tile (tf_wsum8x2_gl), each with
 * tf_flash_p8's arithmetic: returns p of chunk j, *p1 that of j + 1, *g0 and *g1 their dS. */
float8 tf_flash_p8x2(float8 *p1, float8 *g0, float8 *g1, __global const float *a,
                     __local const float *xt, __global const float *b, __local const float *yt,
                     const int j, const int Ts, const int hs, const float scale,
                     const float8 lse0, const float8 lse1, const float8 D0, const float8 D1,
                     const int last) {
    float8 s0, s1, u0, u1;
    tf_wsum8x2_gl(&s0, &s1, a, xt + 8 * j, Ts, hs);
    tf_wsum8x2_gl(&u0, &u1, b, yt + 8 * j, Ts, hs);
    s0 *= scale; /* own statements, as in tf_flash_p8: no multiply-add contracted with lse */
    s1 *= scale;
    const float8 p0 = select(exp(s0 - lse0), (float8)0.0f, tf_attn_key8(j) > (float)last);
    *p1 = select(exp(s1 - lse1), (float8)0.0f, tf_attn_key8(j + 1) > (float)last);
    *g0 = p0 * (u0 - D0) * scale;
    *g1 = *p1 * (u1 - D1) * scale;
    return p0;
}

/* Backward, query rows: p and g = dS rows (prow, grow: L*Tp each) from K^T and V^T, dq = g K;
 * D_t = dO_t . O_t and lse_t kept in local dl, ll (Tp each) for the key rows. */
void tf_flash_bwd_wg_q(__global float *dqkv, __global const float *db,
                       __global const float *ob, __global const float *qb,
                       __global const float *lb, __local float *kt, __local float *vt,
                       __local float *prow, __local float *grow, __local float *dl,
                       __local float *ll, const int T, const int C, const int hs) {
    const int lid = get_local_id(0), L = get_local_size(0), C3 = 3 * C, Tp = (T + 7) / 8 * 8;
    const int Ts = Tp + 8;
    const float scale = 1.0f / sqrt((float)hs);
    __local float *p = prow + lid * Tp, *g = grow + lid * Tp;
    for (int t = lid; t < T; t += L) {
        __global const float *q = qb + (size_t)t * C3, *d = db + (size_t)t * C;
        const float Di = tf_attn_dot(d, ob + (size_t)t * C, hs), lt = lb[t];
        dl[t] = Di;
        ll[t] = lt;
        int j = 0;
        for (; j + 1 <= t / 8; j += 2) {
            float8 p1, g0, g1;
            tf_flash_p8x2(&p1, &g0, &g1, q, kt, d, vt, j, Ts, hs, scale, (float8)lt, (float8)lt,
                          (float8)Di, (float8)Di, t);
            vstore8(g0, j, g);
            vstore8(g1, j + 1, g);
        }
        if (j <= t / 8) {
            float8 g8;
            tf_flash_p8(&g8, q, kt, d, vt, j, Ts, hs, scale, (float8)lt, (float8)Di, t);
            vstore8(g8, j, g);
        }
        tf_rows_lg(dqkv + (size_t)t * C3, 1.0f, g, 1, qb + C, C3, t + 1, hs);
    }
}

/* Backward, key rows (after Q^T and dO^T replace K^T and V^T): for key t2 and queries
 * t >= t2, p = exp(k . q_t * scale - lse_t), g = p (v . dO_t - D_t) scale; dv = p dO, dk = g Q.
 * Chunks start at the one holding t2; entries before t2 are never summed. */
void tf_flash_bwd_wg_kv(__global float *dqkv, __global const float *db,
                        __global const float *qb, __local float *qt, __local float *dot,
                        __local float *prow, __local float *grow, __local float *dl,
                        __local float *ll, const int T, const int C, const int hs) {
    const int lid = get_local_id(0), L = get_local_size(0), C3 = 3 * C, Tp = (T + 7) / 8 * 8;
    const int Ts = Tp + 8;
    const float scale = 1.0f / sqrt((float)hs);
    __local float *p = prow + lid * Tp, *g = grow + lid * Tp;
    for (int t2 = lid; t2 < T; t2 += L) {
        __global const float *k = qb + (size_t)t2 * C3 + C, *v = k + C;
        int j = t2 / 8;
        for (; j + 1 < Tp / 8; j += 2) {
            float8 p1, g0, g1;
            vstore8(tf_flash_p8x2(&p1, &g0, &g1, k, qt, v, dot, j, Ts, hs, scale, vload8(j, ll),
                                  vload8(j + 1, ll), vload8(j, dl), vload8(j + 1, dl), Tp),
                    j, p);
            vstore8(p1, j + 1, p);
            vstore8(g0, j, g);
            vstore8(g1, j + 1, g);
        }
        for (; j < Tp / 8; j++) {
            float8 g8;
            vstore8(tf_flash_p8(&g8, k, qt, v, dot, j, Ts, hs, scale, vload8(j, ll), vload8(j, dl),
                                Tp),
                    j, p);
            vstore8(g8, j, g);
        }
        __global float *dk = dqkv + (size_t)t2 * C3 + C;
        tf_rows_lg(dk + C, 1.0f, p + t2, 1, db + (size_t)t2 * C, C, T - t2, hs);
        tf_rows_lg(dk, 1.0f, g + t2, 1, qb + (size_t)t2 * C3, C3, T - t2, hs);
    }
}

/* Backward: xt, yt are hs*Ts each (K^T, V^T, then Q^T, dO^T), prow, grow L*Tp, dl, ll Tp. */
__kernel void tf_flash_bwd_wg(__global float *dqkv, const int dqo, __global const float *dout,
                              const int doo, __global const float *out, const int oo,
                              __global const float *qkv, const int qo, __global const float *lse,
                              const int lo, const int T, const int C, const int NH,
                              __local float *xt, __local float *yt, __local float *prow,
                              __local float *grow, __local float *dl, __local float *ll) {
    const int bh = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    const int h = bh % NH, b = bh / NH, hs = C / NH, C3 = 3 * C, Tp = (T + 7) / 8 * 8;
    const int Ts = Tp + 8;
    __global const float *qb = qkv + qo + (size_t)b * T * C3 + h * hs;
    __global const float *db = dout + doo + (size_t)b * T * C + h * hs;
    __global float *dq = dqkv + dqo + (size_t)b * T * C3 + h * hs;
    tf_attn_transpose(xt, qb + C, C3, T, Ts, hs, lid, L);
    tf_attn_transpose(yt, qb + 2 * C, C3, T, Ts, hs, lid, L);
    for (int t = T + lid; t < Tp; t += L) { /* padding: p = exp(-inf) = 0, g = 0 */
        dl[t] = 0.0f;
        ll[t] = INFINITY;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    tf_flash_bwd_wg_q(dq, db, out + oo + (size_t)b * T * C + h * hs, qb, lse + lo + bh * T, xt,
                      yt, prow, grow, dl, ll, T, C, hs);
    barrier(CLK_LOCAL_MEM_FENCE);
    tf_attn_transpose(xt, qb, C3, T, Ts, hs, lid, L);
    tf_attn_transpose(yt, db, C, T, Ts, hs, lid, L);
    barrier(CLK_LOCAL_MEM_FENCE);
    tf_flash_bwd_wg_kv(dq, db, qb, xt, yt, prow, grow, dl, ll, T, C, hs);
}
