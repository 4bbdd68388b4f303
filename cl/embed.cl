/* Token + position embedding of a byte-level GPT (llm.c's encoder_forward/backward) over
 * flat buffers with offsets in floats (int32 for tokens). Backward sums without atomics:
 * every output element has one owner that adds its terms in a fixed order. */

/* Horizontal sum of a float16 in a fixed order (every tf_ file may use it). */
float tf_hsum16(float16 v) {
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

float tf_hsum8(float8 v) {
    float4 b = v.lo + v.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* out(BT,C) = wte[tok[r]] + wpe[r % T]. Range (ceil(C/16), BT): work-item (j, r) covers columns
 * [16j, 16j+16) of row r. A token outside [0,V) reads nothing out of bounds and writes NaN
 * over its row, so a bad input cannot train silently (the host should reject it). */
__kernel void tf_embed_fwd(__global float *out, const int oo, __global const int *tok,
                           const int to, __global const float *wte, const int weo,
                           __global const float *wpe, const int wpo, const int BT, const int T,
                           const int C, const int V) {
    int j = 16 * get_global_id(0), r = get_global_id(1);
    if (j >= C || r >= BT) return;
    const int v = tok[to + r];
    __global float *o = out + oo + (size_t)r * C;
    __global const float *p = wpe + wpo + (size_t)(r % T) * C;
    if (v < 0 || v >= V) {
        for (int e = min(j + 16, C); j < e; j++) o[j] = NAN;
        return;
    }
    __global const float *w = wte + weo + (size_t)v * C;
    if (j + 16 <= C) vstore16(vload16(0, w + j) + vload16(0, p + j), 0, o + j);
    else
        for (; j < C; j++) o[j] = w[j] + p[j];
}

/* dwte(V,C) [+]= sum over rows r with tok[r] == v of dout[r]. Work-item (v, blk) owns columns
 * [blk*CB, blk*CB+CB) of vocab row v: it scans all BT tokens in order and adds the matching
 * rows of dout into that slice (so the sum order is the row order: deterministic). Rows of
 * unused tokens get 0 (or keep their value with accumulate). Range (V, ceil(C/CB)); CB is a
 * multiple of 16. */
__kernel void tf_embed_bwd_wte(__global float *dwte, const int dwo, __global const float *dout,
                               const int doo, __global const int *tok, const int to, const int BT,
                               const int C, const int V, const int CB, const int accumulate) {
    const int v = get_global_id(0), blk = get_global_id(1);
    const int j0 = blk * CB, j1 = min(j0 + CB, C);
    if (v >= V || j0 >= C) return;
    __global float *g = dwte + dwo + (size_t)v * C;
    if (!accumulate)
        for (int j = j0; j < j1; j++) g[j] = 0.0f;
    /* the scan reads 16 tokens at a time and looks closer only where one matches */
    for (int r0 = 0; r0 < BT; r0 += 16) {
        if (r0 + 16 <= BT && !any(vload16(0, tok + to + r0) == v)) continue;
        for (int r = r0; r < min(r0 + 16, BT); r++) {
            if (tok[to + r] != v) continue;
            __global const float *d = dout + doo + (size_t)r * C;
            int j = j0;
            for (; j + 16 <= j1; j += 16)
                vstore16(vload16(0, g + j) + vload16(0, d + j), 0, g + j);
            for (; j < j1; j++) g[j] += d[j];
        }
    }
}

/* dwpe(T,C) [+]= sum over b of dout[b, t]: work-item (j, t) owns columns [16j, 16j+16) of
 * position t and adds the B rows in order. Range (ceil(C/16), T). */
__kernel void tf_embed_bwd_wpe(__global float *dwpe, const int dpo, __global const float *dout,
                               const int doo, const int B, const int T, const int C,
                               const int accumulate) {
    int j = 16 * get_global_id(0), t = get_global_id(1);
    if (j >= C || t >= T) return;
    __global float *g = dwpe + dpo + (size_t)t * C;
    __global const float *d = dout + doo + (size_t)t * C;
    const size_t stride = (size_t)T * C;
    if (j + 16 <= C) {
        float16 s = accumulate ? vload16(0, g + j) : (float16)(0.0f);
        for (int b = 0; b < B; b++) s += vload16(0, d + b * stride + j);
        vstore16(s, 0, g + j);
    } else {
        for (; j < C; j++) {
            float s = accumulate ? g[j] : 0.0f;
            for (int b = 0; b < B; b++) s += d[b * stride + j];
            g[j] = s;
        }
    }
}
