/* 2-D max and average pooling over NCHW planes, forward and backward. Backward kernels
 * give each work-item a whole plane of dx and walk the windows in ascending (oh, ow) order,
 * so there are no atomics and every pixel's sum has a fixed order. Max-pool
 * saves nothing: backward recomputes each window's argmax from the saved input with the
 * same rule as forward. Offsets in floats; `planes` = batch * channels.
 * Window (oh, ow) covers rows oh*s - p .. oh*s - p + k - 1 (likewise columns), clipped to
 * the image; the host guarantees p <= k/2, so every window holds at least one pixel. */

/* Index (ih*W + iw) of the window's maximum: the first in row-major order wins ties; a NaN
 * wins over numbers (the first NaN), so divergence stays visible as in PyTorch. */
int pool_argmax(__global const float *plane, const int H, const int W, const int h0,
                const int w0, const int k) {
    const int ha = max(h0, 0), hb = min(h0 + k, H), wa = max(w0, 0), wb = min(w0 + k, W);
    int best = ha * W + wa;
    float m = plane[best];
    for (int ih = ha; ih < hb; ih++)
        for (int iw = wa; iw < wb; iw++) {
            const float v = plane[ih * W + iw];
            if (v > m || (isnan(v) && !isnan(m))) {
                m = v;
                best = ih * W + iw;
            }
        }
    return best;
}

/* Number of pixels the average divides by: k*k with padding counted (PyTorch's default
 * count_include_pad=True: with floor-mode output sizes no window reaches past the padding),
 * else only the window's pixels inside the image. */
int pool_avg_count(const int H, const int W, const int h0, const int w0, const int k,
                   const int include_pad) {
    if (include_pad) return k * k;
    return (min(h0 + k, H) - max(h0, 0)) * (min(w0 + k, W) - max(w0, 0));
}

/* Range (planes*Ho): work-item (plane, oh) writes one output row (a work-item per output
 * was several times slower on PoCL: too little work per item). */
__kernel void pool_max_fwd(__global float *y, const int yo, __global const float *x, const int xo,
                           const int H, const int W, const int Ho, const int Wo, const int k,
                           const int s, const int p, const int planes) {
    const int row = get_global_id(0);
    if (row >= planes * Ho) return;
    const int pl = row / Ho, oh = row - pl * Ho;
    __global const float *plane = x + xo + pl * H * W;
    __global float *dst = y + yo + row * Wo;
    for (int ow = 0; ow < Wo; ow++)
        dst[ow] = plane[pool_argmax(plane, H, W, oh * s - p, ow * s - p, k)];
}

/* dx(planes, H, W): work-item `plane` owns one plane of dx, zeroes it, then adds each
 * window's dy to the window's argmax, windows in ascending (oh, ow) order: where windows
 * overlap, a pixel's sum has that fixed order. Pixels no window picks stay 0. */
__kernel void pool_max_bwd(__global float *dx, const int dxo, __global const float *dy,
                           const int dyo, __global const float *x, const int xo, const int H,
                           const int W, const int Ho, const int Wo, const int k, const int s,
                           const int p, const int planes) {
    const int pl = get_global_id(0);
    if (pl >= planes) return;
    __global const float *plane = x + xo + pl * H * W;
    __global const float *g = dy + dyo + pl * Ho * Wo;
    __global float *dst = dx + dxo + pl * H * W;
    for (int i = 0; i < H * W; i++) dst[i] = 0.0f;
    for (int oh = 0; oh < Ho; oh++)
        for (int ow = 0; ow < Wo; ow++)
            dst[pool_argmax(plane, H, W, oh * s - p, ow * s - p, k)] += g[oh * Wo + ow];
}

/* Range (planes*Ho): one output row per work-item; each window summed in row-major order. */
__kernel void pool_avg_fwd(__global float *y, const int yo, __global const float *x, const int xo,
                           const int H, const int W, const int Ho, const int Wo, const int k,
                           const int s, const int p, const int planes, const int include_pad) {
    const int row = get_global_id(0);
    if (row >= planes * Ho) return;
    const int pl = row / Ho, oh = row - pl * Ho, h0 = oh * s - p;
    __global const float *plane = x + xo + pl * H * W;
    __global float *dst = y + yo + row * Wo;
    for (int ow = 0; ow < Wo; ow++) {
        const int w0 = ow * s - p;
        float sum = 0.0f;
        for (int ih = max(h0, 0); ih < min(h0 + k, H); ih++)
            for (int iw = max(w0, 0); iw < min(w0 + k, W); iw++) sum += plane[ih * W + iw];
        dst[ow] = sum / (float)pool_avg_count(H, W, h0, w0, k, include_pad);
    }
}

/* Work-item `plane` owns one plane of dx: zeroes it, then adds dy / count over each window,
 * windows in ascending (oh, ow) order (a fixed order per pixel). Range (planes). */
__kernel void pool_avg_bwd(__global float *dx, const int dxo, __global const float *dy,
                           const int dyo, const int H, const int W, const int Ho, const int Wo,
                           const int k, const int s, const int p, const int planes,
                           const int include_pad) {
    const int pl = get_global_id(0);
    if (pl >= planes) return;
    __global const float *g = dy + dyo + pl * Ho * Wo;
    __global float *dst = dx + dxo + pl * H * W;
    for (int i = 0; i < H * W; i++) dst[i] = 0.0f;
    for (int oh = 0; oh < Ho; oh++)
        for (int ow = 0; ow < Wo; ow++) {
            const int h0 = oh * s - p, w0 = ow * s - p;
            const float v = g[oh * Wo + ow] / (float)pool_avg_count(H, W, h0, w0, k, include_pad);
            for (int ih = max(h0, 0); ih < min(h0 + k, H); ih++)
                for (int iw = max(w0, 0); iw < min(w0 + k, W); iw++) dst[ih * W + iw] += v;
        }
}

/* ---------------------------------------------------------------- 2x2, stride 2, no padding */

/* The common case, 8 windows at a time (then 4, then one): a float16 of each of the two
 * input rows holds 8 windows, .even the left and .odd the right column. POOL_TAKE(v, m) is
 * the rule of pool_argmax per lane (order: top-left, top-right, bottom-left, bottom-right),
 * POOL_TAKE1 the same for scalars (whose isnan gives 1, not -1). A work-item takes R output
 * rows of a plane: one row per item (14 windows of the MNIST CNN) spent more time starting
 * items than pooling on PoCL. The generic kernels above ran 3-4x slower. */
#define POOL_TAKE(v, m) (isgreater((v), (m)) | (isnan(v) & ~isnan(m)))
#define POOL_TAKE1(v, m) (isgreater((v), (m)) || (isnan(v) && !isnan(m)))

/* Which of the window's 4 pixels (top-left, top-right, bottom-left, bottom-right) is its max
 * (scalar tail of the rows below). */
int pool_max2_at(__global const float *r0, __global const float *r1, const int c, float *mx) {
    float m = r0[c];
    int at = 0;
    if (POOL_TAKE1(r0[c + 1], m)) m = r0[c + 1], at = 1;
    if (POOL_TAKE1(r1[c], m)) m = r1[c], at = 2;
    if (POOL_TAKE1(r1[c + 1], m)) m = r1[c + 1], at = 3;
    *mx = m;
    return at;
}

/* One output row from input rows r0, r1. */
void pool_max2_row(__global float *dst, __global const float *r0, __global const float *r1,
                   const int W, const int Wo) {
    int ow = 0;
    for (; 2 * ow + 16 <= W && ow + 8 <= Wo; ow += 8) {
        const float16 a = vload16(0, r0 + 2 * ow), b = vload16(0, r1 + 2 * ow);
        float8 m = a.even;
        m = select(m, a.odd, POOL_TAKE(a.odd, m));
        m = select(m, b.even, POOL_TAKE(b.even, m));
        m = select(m, b.odd, POOL_TAKE(b.odd, m));
        vstore8(m, 0, dst + ow);
    }
    for (; 2 * ow + 8 <= W && ow + 4 <= Wo; ow += 4) { /* narrow planes: 4 windows */
        const float8 a = vload8(0, r0 + 2 * ow), b = vload8(0, r1 + 2 * ow);
        float4 m = a.even;
        m = select(m, a.odd, POOL_TAKE(a.odd, m));
        m = select(m, b.even, POOL_TAKE(b.even, m));
        m = select(m, b.odd, POOL_TAKE(b.odd, m));
        vstore4(m, 0, dst + ow);
    }
    for (; ow < Wo; ow++) {
        float m;
        pool_max2_at(r0, r1, 2 * ow, &m);
        dst[ow] = m;
    }
}

/* Range (planes * ceil(Ho/R)): work-item (plane, j) writes output rows [jR, jR + R). */
__kernel void pool_max2_fwd(__global float *y, const int yo, __global const float *x,
                            const int xo, const int H, const int W, const int Ho, const int Wo,
                            const int planes, const int R) {
    const int item = get_global_id(0), per = (Ho + R - 1) / R;
    if (item >= planes * per) return;
    const int pl = item / per, oh0 = (item - pl * per) * R, oh1 = min(Ho, oh0 + R);
    __global const float *plane = x + xo + pl * H * W;
    for (int oh = oh0; oh < oh1; oh++)
        pool_max2_row(y + yo + (pl * Ho + oh) * Wo, plane + 2 * oh * W, plane + (2 * oh + 1) * W,
                      W, Wo);
}

/* dx rows d0, d1 from input rows r0, r1 and dy row g: dy at each window's argmax, 0
 * elsewhere, including a last column no window covers. */
void pool_max2_bwd_row(__global float *d0, __global float *d1, __global const float *r0,
                       __global const float *r1, __global const float *g, const int W,
                       const int Wo) {
    int ow = 0;
    for (; 2 * ow + 16 <= W && ow + 8 <= Wo; ow += 8) {
        const float16 a = vload16(0, r0 + 2 * ow), b = vload16(0, r1 + 2 * ow);
        const float8 gv = vload8(0, g + ow), z = 0.0f;
        float8 m = a.even;
        int8 sel = 0, t;
        t = POOL_TAKE(a.odd, m), m = select(m, a.odd, t), sel = select(sel, (int8)1, t);
        t = POOL_TAKE(b.even, m), m = select(m, b.even, t), sel = select(sel, (int8)2, t);
        t = POOL_TAKE(b.odd, m), sel = select(sel, (int8)3, t);
        float16 top, bot;
        top.even = select(z, gv, sel == 0);
        top.odd = select(z, gv, sel == 1);
        bot.even = select(z, gv, sel == 2);
        bot.odd = select(z, gv, sel == 3);
        vstore16(top, 0, d0 + 2 * ow);
        vstore16(bot, 0, d1 + 2 * ow);
    }
    for (; 2 * ow + 8 <= W && ow + 4 <= Wo; ow += 4) { /* narrow planes: 4 windows */
        const float8 a = vload8(0, r0 + 2 * ow), b = vload8(0, r1 + 2 * ow);
        const float4 gv = vload4(0, g + ow), z = 0.0f;
        float4 m = a.even;
        int4 sel = 0, t;
        t = POOL_TAKE(a.odd, m), m = select(m, a.odd, t), sel = select(sel, (int4)1, t);
        t = POOL_TAKE(b.even, m), m = select(m, b.even, t), sel = select(sel, (int4)2, t);
        t = POOL_TAKE(b.odd, m), sel = select(sel, (int4)3, t);
        float8 top, bot;
        top.even = select(z, gv, sel == 0);
        top.odd = select(z, gv, sel == 1);
        bot.even = select(z, gv, sel == 2);
        bot.odd = select(z, gv, sel == 3);
        vstore8(top, 0, d0 + 2 * ow);
        vstore8(bot, 0, d1 + 2 * ow);
    }
    for (; ow < Wo; ow++) {
        float m;
        const int at = pool_max2_at(r0, r1, 2 * ow, &m);
        d0[2 * ow] = at == 0 ? g[ow] : 0.0f;
        d0[2 * ow + 1] = at == 1 ? g[ow] : 0.0f;
        d1[2 * ow] = at == 2 ? g[ow] : 0.0f;
        d1[2 * ow + 1] = at == 3 ? g[ow] : 0.0f;
    }
    for (int iw = 2 * Wo; iw < W; iw++) d0[iw] = d1[iw] = 0.0f;
}

/* Range (planes * ceil(Ho/R)): work-item (plane, j) owns input rows [2jR, 2jR + 2R) of dx
 * (windows do not overlap); the item of the last output row also zeroes a last input row
 * no window covers (odd H). */
__kernel void pool_max2_bwd(__global float *dx, const int dxo, __global const float *dy,
                            const int dyo, __global const float *x, const int xo, const int H,
                            const int W, const int Ho, const int Wo, const int planes,
                            const int R) {
    const int item = get_global_id(0), per = (Ho + R - 1) / R;
    if (item >= planes * per) return;
    const int pl = item / per, oh0 = (item - pl * per) * R, oh1 = min(Ho, oh0 + R);
    __global const float *plane = x + xo + pl * H * W;
    __global float *dpl = dx + dxo + pl * H * W;
    for (int oh = oh0; oh < oh1; oh++)
        pool_max2_bwd_row(dpl + 2 * oh * W, dpl + (2 * oh + 1) * W, plane + 2 * oh * W,
                          plane + (2 * oh + 1) * W, dy + dyo + (pl * Ho + oh) * Wo, W, Wo);
    if (oh1 == Ho)
        for (int i = 2 * Ho * W; i < H * W; i++) dpl[i] = 0.0f;
}
