/* Optimizer kernels over flat buffers (src/optim): the global gradient norm as a two-pass
 * deterministic reduction, and one fused update kernel per optimizer (SGD, SGD with
 * momentum/Nesterov, AdamW) that applies the clip scale the norm pass left in stat[1]. */

/* ---------------------------------------------------------------- gradient norm */

/* Pass 1: each group reduces its work-items' sums of x[i]^2 as a tree in local memory and
 * writes part[group]. Which elements a work-item sums depends on the device, one kernel per
 * walk: optim_sumsq_stride (GPUs) has item j take i = j + k*G*L, so neighbours read
 * neighbouring floats (coalesced); optim_sumsq_chunk (CPUs, where PoCL runs one work-item
 * after another) has item j take the contiguous range [j*chunk, (j+1)*chunk), read as float4
 * into four running sums, which streams through the cache instead of striding by G*L floats.
 * Two kernels rather than one branching on `chunk`: Mesa's llvmpipe (rusticl) warned
 * "Treating load_kernel_arg in control flow as uniform, results may be incorrect" for the
 * argument loads its compiler had sunk into the two arms of that branch. G, L and chunk are
 * fixed per device and n, so the order of every addition is too: bit-identical sums on every
 * run. The tree over the group is shared. */
#define OPTIM_GROUP_SUM(s, part, acc)                                                              \
    do {                                                                                           \
        const uint lid = get_local_id(0), l = get_local_size(0);                                   \
        acc[lid] = (s);                                                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (uint h = l / 2; h > 0; h /= 2) {                                                      \
            if (lid < h) acc[lid] += acc[lid + h];                                                 \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        }                                                                                          \
        if (lid == 0) part[get_group_id(0)] = acc[0];                                              \
    } while (0)

__kernel void optim_sumsq_chunk(__global const float *x, const int n, const int chunk,
                                __global float *part, __local float *acc) {
    const uint lo = (uint)get_global_id(0) * (uint)chunk; /* n <= INT_MAX: no overflow */
    const uint hi = min(lo + (uint)chunk, (uint)n);
    float4 s4 = (float4)(0.0f);
    uint i = lo;
    for (; i + 4 <= hi; i += 4) {
        const float4 v = vload4(0, x + i);
        s4 += v * v;
    }
    for (; i < hi; i++) s4.x += x[i] * x[i];
    OPTIM_GROUP_SUM((s4.x + s4.y) + (s4.z + s4.w), part, acc);
}

__kernel void optim_sumsq_stride(__global const float *x, const int n, __global float *part,
                                 __local float *acc) {
    const uint stride = get_global_size(0); /* i + stride fits a uint */
    float s = 0.0f;
    for (uint i = get_global_id(0); i < (uint)n; i += stride) s += x[i] * x[i];
    OPTIM_GROUP_SUM(s, part, acc);
}

/* Pass 2, one work-group: sums the ng partials (strided, then a tree), and writes
 * stat[0] = ||g||_2 and stat[1] = min(1, clip / (||g|| + 1e-6)) (1 when clip <= 0), the
 * factor torch.nn.utils.clip_grad_norm_ multiplies the gradients by. */
__kernel void optim_norm_final(__global const float *part, const int ng, __global float *stat,
                               const float clip, __local float *acc) {
    const uint lid = get_local_id(0), l = get_local_size(0);
    float s = 0.0f;
    for (uint i = lid; i < (uint)ng; i += l) s += part[i];
    acc[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = l / 2; h > 0; h /= 2) {
        if (lid < h) acc[lid] += acc[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        const float norm = sqrt(acc[0]);
        stat[0] = norm;
        stat[1] = clip > 0.0f ? fmin(1.0f, clip / (norm + 1e-6f)) : 1.0f;
    }
}

/* ---------------------------------------------------------------- updates */

/* Every update kernel handles eight consecutive elements per work-item as float8 (vload8 and
 * vstore8 need only float alignment), the last partial group element by element. On PoCL
 * (CPU) this is 4-6x faster than one float per work-item, which its work-item loops did not
 * vectorise, and float8 beat float4 by ~1.3x for AdamW (its sqrt and divide fill AVX2).
 * stat[1] is the clip scale: exactly 1.0f unless clipping is on, so the multiply never
 * changes an unclipped gradient. */

#define OPTIM_VEC 8
#define OPTIM_FIRST(i, n)                                                                          \
    const uint i = OPTIM_VEC * (uint)get_global_id(0);                                             \
    if (i >= (uint)(n)) return

/* torch.optim.SGD, momentum 0: g += wd*w (coupled L2); w -= lr*g. */
__kernel void optim_sgd(__global float *w, __global const float *g, __global const float *stat,
                        const int n, const float lr, const float wd, const int off,
                        const int goff) {
    w += off; /* a data-parallel rank's slice (cluster.shard): the state starts at 0 */
    g += goff; /* its gradients: at off, or at 0 of a per-slice gradient buffer (ZeRO-2) */
    OPTIM_FIRST(i, n);
    const float sc = stat[1];
    if (i + OPTIM_VEC <= (uint)n) {
        const float8 wv = vload8(0, w + i);
        const float8 d = vload8(0, g + i) * sc + wd * wv;
        vstore8(wv - lr * d, 0, w + i);
        return;
    }
    for (uint k = i; k < (uint)n; k++) w[k] -= lr * (g[k] * sc + wd * w[k]);
}

/* torch.optim.SGD with momentum mu, dampening 0: d = g + wd*w; buf = first ? d : mu*buf + d;
 * d' = nesterov ? d + mu*buf : buf; w -= lr*d'. */
#define OPTIM_SGD_MOM(T, wv, gv, bv)                                                               \
    {                                                                                              \
        const T d = (gv) * sc + wd * (wv);                                                         \
        bv = first ? d : mu * (bv) + d;                                                            \
        wv -= lr * (nesterov ? d + mu * (bv) : (bv));                                              \
    }

__kernel void optim_sgd_momentum(__global float *w, __global const float *g, __global float *buf,
                                 __global const float *stat, const int n, const float lr,
                                 const float wd, const float mu, const int nesterov,
                                 const int first, const int off, const int goff) {
    w += off;
    g += goff;
    OPTIM_FIRST(i, n);
    const float sc = stat[1];
    if (i + OPTIM_VEC <= (uint)n) {
        float8 wv = vload8(0, w + i), bv = vload8(0, buf + i);
        const float8 gv = vload8(0, g + i);
        OPTIM_SGD_MOM(float8, wv, gv, bv);
        vstore8(wv, 0, w + i);
        vstore8(bv, 0, buf + i);
        return;
    }
    for (uint k = i; k < (uint)n; k++) {
        float wv = w[k], bv = buf[k];
        const float gv = g[k];
        OPTIM_SGD_MOM(float, wv, gv, bv);
        w[k] = wv;
        buf[k] = bv;
    }
}

/* torch.optim.AdamW (Loshchilov & Hutter, decoupled decay): w *= 1 - lr*wd;
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= step_size * m / (sqrt(v)/bc2_sqrt + eps)
 * with step_size = lr/(1-b1^t) and bc2_sqrt = sqrt(1-b2^t) computed on the host in double. */
#define OPTIM_ADAMW(T, wv, gv, mv, vv)                                                             \
    {                                                                                              \
        const T gs = (gv) * sc;                                                                    \
        mv = b1 * (mv) + omb1 * gs;                                                                \
        vv = b2 * (vv) + omb2 * gs * gs;                                                           \
        wv = (wv) * decay - step_size * (mv) / (sqrt(vv) / bc2_sqrt + eps);                        \
    }

__kernel void optim_adamw(__global float *w, __global const float *g, __global float *m,
                          __global float *v, __global const float *stat, const int n,
                          const float decay, const float b1, const float omb1, const float b2,
                          const float omb2, const float step_size, const float bc2_sqrt,
                          const float eps, const int off, const int goff) {
    w += off;
    g += goff;
    OPTIM_FIRST(i, n);
    const float sc = stat[1];
    if (i + OPTIM_VEC <= (uint)n) {
        float8 wv = vload8(0, w + i), mv = vload8(0, m + i), vv = vload8(0, v + i);
        const float8 gv = vload8(0, g + i);
        OPTIM_ADAMW(float8, wv, gv, mv, vv);
        vstore8(wv, 0, w + i);
        vstore8(mv, 0, m + i);
        vstore8(vv, 0, v + i);
        return;
    }
    for (uint k = i; k < (uint)n; k++) {
        float wv = w[k], mv = m[k], vv = v[k];
        const float gv = g[k];
        OPTIM_ADAMW(float, wv, gv, mv, vv);
        w[k] = wv;
        m[k] = mv;
        v[k] = vv;
    }
}
