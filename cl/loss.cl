/* Fused, numerically stable softmax + cross-entropy over (B, C) logits with int32 labels:
 * per-sample loss, per-sample correct flag (argmax == label) and, optionally, the logits
 * gradient (softmax - onehot) * grad_scale. One work-group per sample row. */

/* log(1 + x) for finite x >= 0 (the sums of exp(z - max) below), without the library's log1p:
 * Mesa's libclc log1p (and log) read lookup tables behind branches, and llvmpipe (rusticl)
 * then warned "Treating load_kernel_arg in control flow as uniform, results may be
 * incorrect" for our kernels that call it. u = 1 + x = f 2^e with f in [sqrt(1/2), sqrt(2));
 * log f = 2 atanh(s), s = (f - 1)/(f + 1), |s| <= 0.172, by its series to s^11 (the next
 * term is below 2e-11); then Goldberg's correction x / (u - 1) restores the bits of x that
 * 1 + x rounded away (Goldberg 1991, "What every computer scientist should know about
 * floating-point arithmetic", Theorem 4). Within 4 ulp of log1p (3.2 at worst over 120,000
 * points on [1e-12, 1e6], emulated in float32; t_ops compares the loss with a double
 * reference). */
float nn_log1p_pos(const float x) {
    const float u = 1.0f + x;
    if (u == 1.0f) return x;
    int e;
    float f = frexp(u, &e); /* u = f 2^e, f in [0.5, 1) */
    if (f < 0.70710678f) f *= 2.0f, e -= 1;
    const float s = (f - 1.0f) / (f + 1.0f), s2 = s * s;
    const float p =
        s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9 + s2 * (1.0f / 11)))));
    /* e ln2 with ln2 split in a high part exact in products with small e, and the rest */
    const float lg =
        (float)e * 0.693145752f + (2.0f * s + (2.0f * s * p + (float)e * 1.42860677e-6f));
    return lg * (x / (u - 1.0f));
}

/* The trainer's NaN watch (step > 0): the first step whose loss is NaN or infinite goes to
 * watch[0] (INT_MAX until then), so the trainer checks every step's loss without reading it
 * back; it reads watch with a read-back it does anyway. Rows that race write the same step. */
#define NN_WATCH(lv)                                                                               \
    if (step > 0 && !isfinite(lv) && watch[0] == INT_MAX) watch[0] = step

/* Work-group r handles row r; the local size L is a power of two. Each work-item scans
 * columns t, t+L, ... and the partial results are combined by a tree over local memory in a
 * fixed order, so results are deterministic for a given L.
 *   loss(B)    = logsumexp(row) - row[label]          (float)
 *   correct(B) = argmax(row) == label, ties to the lowest index (int32 0/1)
 *   dlogits(B,C) = (softmax(row) - onehot(label)) * grad_scale   (only if with_grad;
 *                  may alias logits: each element is read then written by one work-item)
 * A label outside [0, C) reads and writes nothing out of bounds: loss = NaN (so the run
 * notices), correct = -1 (the flag), and the row's gradient is zero. */
__kernel void nn_softmax_xent(__global float *loss, const int loss_o, __global int *correct,
                              const int correct_o, __global float *dlogits, const int dl_o,
                              __global const float *logits, const int lg_o,
                              __global const int *labels, const int lb_o, const int C,
                              const float grad_scale, const int with_grad,
                              __local float *sval, __local int *sidx, __global int *watch,
                              const int step) {
    const int r = get_group_id(0), t = get_local_id(0), L = get_local_size(0);
    __global const float *row = logits + lg_o + (size_t)r * C;
    const int label = labels[lb_o + r];
    const int valid = label >= 0 && label < C;
    /* read before any gradient is written: dlogits may alias logits */
    const float zlabel = valid ? row[label] : 0.0f;

    /* max with argmax; an index of C means "none yet", so the first value always wins */
    float m = -INFINITY;
    int mi = C;
    for (int j = t; j < C; j += L) {
        float v = row[j];
        if (v > m || (v == m && j < mi)) { m = v; mi = j; }
    }
    sval[t] = m;
    sidx[t] = mi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h /= 2) {
        if (t < h) {
            float v = sval[t + h];
            int vi = sidx[t + h];
            if (v > sval[t] || (v == sval[t] && vi < sidx[t])) { sval[t] = v; sidx[t] = vi; }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = sval[0];
    const int argmax = sidx[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* everyone has read sval[0] before it is reused */

    /* sum without the max element's exp(0) = 1, so that log(sum) = log1p(s) keeps full
     * relative precision when one class dominates (small losses) */
    float s = 0.0f;
    for (int j = t; j < C; j += L)
        if (j != argmax) s += exp(row[j] - m);
    sval[t] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h /= 2) {
        if (t < h) sval[t] += sval[t + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float rest = sval[0];

    if (t == 0) { /* (m - zlabel) first: exactly 0 when the label is the argmax */
        const float lv = valid ? nn_log1p_pos(rest) + (m - zlabel) : NAN;
        loss[loss_o + r] = lv;
        correct[correct_o + r] = valid ? (argmax == label) : -1;
        NN_WATCH(lv);
    }
    if (with_grad) {
        __global float *drow = dlogits + dl_o + (size_t)r * C;
        const float inv = 1.0f / (1.0f + rest);
        for (int j = t; j < C; j += L) {
            float p = exp(row[j] - m) * inv;
            drow[j] = valid ? (p - (j == label ? 1.0f : 0.0f)) * grad_scale : 0.0f;
        }
    }
}

/* The same for narrow rows (C up to a few dozen classes): one work-item per row, three
 * passes over it in order, no local memory or barriers (a group per row costs ~40 us per
 * 256 rows on PoCL in barriers alone). Same outputs and conventions as above. */
__kernel void nn_softmax_xent_rows(__global float *loss, const int loss_o, __global int *correct,
                                   const int correct_o, __global float *dlogits, const int dl_o,
                                   __global const float *logits, const int lg_o,
                                   __global const int *labels, const int lb_o, const int B,
                                   const int C, const float grad_scale, const int with_grad,
                                   __global int *watch, const int step) {
    const int r = get_global_id(0);
    if (r >= B) return;
    __global const float *row = logits + lg_o + (size_t)r * C;
    const int label = labels[lb_o + r];
    const int valid = label >= 0 && label < C;
    const float zlabel = valid ? row[label] : 0.0f;
    float m = row[0];
    int argmax = 0;
    for (int j = 1; j < C; j++)
        if (row[j] > m) { m = row[j]; argmax = j; }
    /* sum of exp(z - m) without the max's own 1; with the gradient each exp is kept in its
     * dlogits slot (which may be the logits' own: each is read before it is written) and
     * scaled below, so every exp is computed once */
    __global float *drow = dlogits + dl_o + (size_t)r * C;
    float rest = 0.0f;
    for (int j = 0; j < C; j++) {
        const float e = exp(row[j] - m);
        if (j != argmax) rest += e;
        if (with_grad) drow[j] = e;
    }
    const float lv = valid ? nn_log1p_pos(rest) + (m - zlabel) : NAN;
    loss[loss_o + r] = lv;
    correct[correct_o + r] = valid ? (argmax == label) : -1;
    NN_WATCH(lv);
    if (with_grad) {
        const float inv = 1.0f / (1.0f + rest);
        for (int j = 0; j < C; j++)
            drow[j] = valid ? (drow[j] * inv - (j == label ? 1.0f : 0.0f)) * grad_scale : 0.0f;
    }
}

