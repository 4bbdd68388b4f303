/* LayerNorm over the last dimension (llm.c's layernorm_forward/backward, eps given by the
 * host) and the residual add, over flat buffers with offsets in floats. Rows are walked in
 * float16 chunks plus a scalar tail (explicit SIMD: PoCL does not vectorise these loops
 * across work-items). Parameter-gradient sums run over rows in a fixed order, no atomics. */

float tf_hsum16(float16 v); /* in embed.cl (files are one program, concatenated in name order) */

/* LayerNorm of one row x(C) whose sum s the caller took (tf_ln_fwd from x, tf_add_ln_fwd in
 * resln.cl while it writes x = a + b): the variance pass (two passes in all, biased) and
 * y(C) = (x - mean) * rstd * w + b; *mean = s / C, *rstd = 1/sqrt(var + eps). One body for
 * both kernels, so that the fused op stays bit for bit equal to the unfused ones. */
void tf_ln_row(__global float *y, __global float *mean, __global float *rstd,
               __global const float *x, const float s, __global const float *w,
               __global const float *b, const int C, const float eps) {
    const float m = s / C;
    float16 s16 = 0.0f;
    int i = 0;
    for (; i + 16 <= C; i += 16) {
        float16 dx = vload16(0, x + i) - m;
        s16 += dx * dx;
    }
    float v = tf_hsum16(s16);
    for (; i < C; i++) v += (x[i] - m) * (x[i] - m);
    const float rs = 1.0f / sqrt(v / C + eps);
    for (i = 0; i + 16 <= C; i += 16)
        vstore16((vload16(0, x + i) - m) * rs * vload16(0, w + i) + vload16(0, b + i), 0, y + i);
    for (; i < C; i++) y[i] = (x[i] - m) * rs * w[i] + b[i];
    *mean = m;
    *rstd = rs;
}

/* Row r of inp(N,C): mean(N), rstd(N) = 1/sqrt(var + eps) (biased variance, two passes),
 * out(N,C) = (x - mean) * rstd * w + b. One work-item per row. */
__kernel void tf_ln_fwd(__global float *out, const int oo, __global float *mean, const int mo,
                        __global float *rstd, const int ro, __global const float *inp,
                        const int io, __global const float *w, const int wo,
                        __global const float *b, const int bo, const int N, const int C,
                        const float eps) {
    const int r = get_global_id(0);
    if (r >= N) return;
    __global const float *x = inp + io + (size_t)r * C;
    float16 s16 = 0.0f;
    int i = 0;
    for (; i + 16 <= C; i += 16) s16 += vload16(0, x + i);
    float s = tf_hsum16(s16);
    for (; i < C; i++) s += x[i];
    tf_ln_row(out + oo + (size_t)r * C, mean + mo + r, rstd + ro + r, x, s, w + wo, b + bo, C,
              eps);
}

/* Input gradient, one work-item per row, from the saved mean and rstd:
 *   g = w * dout, n = (x - mean) * rstd,
 *   dinp = [dinp +] rstd * (g - mean(g) - n * mean(g * n))
 * add_dinp adds into dinp (the residual stream's gradient); else dinp is overwritten. */
/* Row r's input gradient: dx = [add[i] +] rstd * (g - mean(g) - n * mean(g * n)); add may be
 * dx itself (the residual stream's gradient accumulated in place, tf_ln_bwd_dx) or another
 * tensor (the residual's gradient, tf_add_ln_bwd_dx in resln.cl): the same float arithmetic in
 * the same order either way, so the two kernels agree bit for bit. */
void tf_ln_bwd_row(__global float *dx, __global const float *add, const int use_add,
                   __global const float *d, __global const float *x, __global const float *w,
                   const float m, const float rs, const int C) {
    float16 sg16 = 0.0f, sgn16 = 0.0f;
    int i = 0;
    for (; i + 16 <= C; i += 16) {
        float16 g = vload16(0, w + i) * vload16(0, d + i);
        sg16 += g;
        sgn16 += g * ((vload16(0, x + i) - m) * rs);
    }
    float sg = tf_hsum16(sg16), sgn = tf_hsum16(sgn16);
    for (; i < C; i++) {
        float g = w[i] * d[i];
        sg += g;
        sgn += g * ((x[i] - m) * rs);
    }
    const float mg = sg / C, mgn = sgn / C;
    for (i = 0; i + 16 <= C; i += 16) {
        float16 g = vload16(0, w + i) * vload16(0, d + i);
        float16 v = rs * (g - mg - (vload16(0, x + i) - m) * rs * mgn);
        vstore16(use_add ? vload16(0, add + i) + v : v, 0, dx + i);
    }
    for (; i < C; i++) {
        float v = rs * (w[i] * d[i] - mg - (x[i] - m) * rs * mgn);
        dx[i] = use_add ? add[i] + v : v;
    }
}

__kernel void tf_ln_bwd_dx(__global float *dinp, const int dio, __global const float *dout,
                           const int doo, __global const float *inp, const int io,
                           __global const float *w, const int wo, __global const float *mean,
                           const int mo, __global const float *rstd, const int ro, const int N,
                           const int C, const int add_dinp) {
    const int r = get_global_id(0);
    if (r >= N) return;
    __global float *dx = dinp + dio + (size_t)r * C;
    tf_ln_bwd_row(dx, dx, add_dinp, dout + doo + (size_t)r * C, inp + io + (size_t)r * C, w + wo,
                  mean[mo + r], rstd[ro + r], C);
}

/* Parameter gradients: dw(C) [+]= sum_r dout * (x - mean) * rstd, db(C) [+]= sum_r dout.
 * Work-item j owns columns [8j, 8j+8) and walks rows 0..N-1 in order (deterministic). The
 * rows are split over the column blocks only: with C = 128 that is 16 work-items, enough for
 * a CPU; each reads its 32-byte slice of every row. */
__kernel void tf_ln_bwd_dwb(__global float *dw, const int dwo, __global float *db, const int dbo,
                            __global const float *dout, const int doo, __global const float *inp,
                            const int io, __global const float *mean, const int mo,
                            __global const float *rstd, const int ro, const int N, const int C,
                            const int accumulate) {
    int j = 8 * get_global_id(0);
    if (j >= C) return;
    if (j + 8 <= C) {
        float8 sw = 0.0f, sb = 0.0f;
        for (int r = 0; r < N; r++) {
            size_t k = (size_t)r * C + j;
            float8 d = vload8(0, dout + doo + k);
            sw += d * ((vload8(0, inp + io + k) - mean[mo + r]) * rstd[ro + r]);
            sb += d;
        }
        if (accumulate) {
            sw += vload8(0, dw + dwo + j);
            sb += vload8(0, db + dbo + j);
        }
        vstore8(sw, 0, dw + dwo + j);
        vstore8(sb, 0, db + dbo + j);
    } else {
        for (; j < C; j++) {
            float sw = 0.0f, sb = 0.0f;
            for (int r = 0; r < N; r++) {
                size_t k = (size_t)r * C + j;
                sw += dout[doo + k] * ((inp[io + k] - mean[mo + r]) * rstd[ro + r]);
                sb += dout[doo + k];
            }
            dw[dwo + j] = accumulate ? dw[dwo + j] + sw : sw;
            db[dbo + j] = accumulate ? db[dbo + j] + sb : sb;
        }
    }
}

/* ---------------------------------------------------------------- residual */

/* out(n) = a(n) + b(n); out may alias a or b. Work-item i covers [16i, 16i+16). */
__kernel void tf_add(__global float *out, const int oo, __global const float *a, const int ao,
                     __global const float *b, const int bo, const int n) {
    int i = 16 * get_global_id(0);
    if (i + 16 <= n) vstore16(vload16(0, a + ao + i) + vload16(0, b + bo + i), 0, out + oo + i);
    else
        for (; i < n; i++) out[oo + i] = a[ao + i] + b[bo + i];
}

/* y(n) [+]= x(n): the residual's backward sends dout to both branches. */
__kernel void tf_acc(__global float *y, const int yo, __global const float *x, const int xo,
                     const int n, const int accumulate) {
    int i = 16 * get_global_id(0);
    if (i + 16 <= n) {
        float16 v = vload16(0, x + xo + i);
        vstore16(accumulate ? vload16(0, y + yo + i) + v : v, 0, y + yo + i);
    } else {
        for (; i < n; i++) y[yo + i] = accumulate ? y[yo + i] + x[xo + i] : x[xo + i];
    }
}
