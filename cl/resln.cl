/* The residual add fused with the LayerNorm that follows it (the transformer block's
 * res2 = x + attn branch, then ln2(res2)): one pass over the two inputs writes the sum (the
 * residual stream, kept) and its row sum; the variance and the normalised output read the row
 * back from cache (tf_ln_row, shared with tf_ln_fwd in norm.cl), so the results match the
 * unfused ops bit for bit. */

float tf_hsum16(float16 v); /* in embed.cl (files are one program, concatenated in name order) */
void tf_ln_row(__global float *y, __global float *mean, __global float *rstd,
               __global const float *x, const float s, __global const float *w,
               __global const float *b, const int C, const float eps); /* in norm.cl */
void tf_ln_bwd_row(__global float *dx, __global const float *add, const int use_add,
                   __global const float *d, __global const float *x, __global const float *w,
                   const float m, const float rs, const int C); /* in norm.cl */

/* Row r: res(N,C) = a + b; mean(N), rstd(N), out(N,C) = LayerNorm(res) with w, bias, eps. */
__kernel void tf_add_ln_fwd(__global float *res, const int so, __global float *out, const int oo,
                            __global float *mean, const int mo, __global float *rstd,
                            const int ro, __global const float *a, const int ao,
                            __global const float *b, const int bo, __global const float *w,
                            const int wo, __global const float *bias, const int bio, const int N,
                            const int C, const float eps) {
    const int r = get_global_id(0);
    if (r >= N) return;
    const size_t row = (size_t)r * C;
    __global const float *xa = a + ao + row, *xb = b + bo + row;
    __global float *x = res + so + row, *y = out + oo + row;
    float16 s16 = 0.0f;
    int i = 0;
    for (; i + 16 <= C; i += 16) {
        const float16 v = vload16(0, xa + i) + vload16(0, xb + i);
        vstore16(v, 0, x + i);
        s16 += v;
    }
    float s = tf_hsum16(s16);
    for (; i < C; i++) {
        const float v = xa[i] + xb[i];
        x[i] = v;
        s += v;
    }
    tf_ln_row(y, mean + mo + r, rstd + ro + r, x, s, w + wo, bias + bio, C, eps);
}

/* The backward of the same pair, the block's ln2 and its residual: the residual stream's
 * gradient dx(N,C) = dres + LayerNorm's input gradient from dout, in one pass that reads dres
 * where the unfused ops copied it into dx first (ht_residual_backward) and then read dx back
 * to add into it (tf_ln_bwd_dx with add_dinp): one read and one write of N*C floats fewer. The
 * row is tf_ln_bwd_dx's (tf_ln_bwd_row), so the result matches the unfused ops bit for bit.
 * dx may be dres itself. */
__kernel void tf_add_ln_bwd_dx(__global float *dinp, const int dio, __global const float *dres,
                               const int dro, __global const float *dout, const int doo,
                               __global const float *inp, const int io, __global const float *w,
                               const int wo, __global const float *mean, const int mo,
                               __global const float *rstd, const int ro, const int N,
                               const int C) {
    const int r = get_global_id(0);
    if (r >= N) return;
    const size_t row = (size_t)r * C;
    tf_ln_bwd_row(dinp + dio + row, dres + dro + row, 1, dout + doo + row, inp + io + row, w + wo,
                  mean[mo + r], rstd[ro + r], C);
}
