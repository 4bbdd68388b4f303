/* Transformer ops (src/nn/ops_tf.h): argument checks and kernel launches by name. Kernels
 * take offsets and sizes as int, so every tensor must lie in the first 2^31 elements of its
 * buffer (checked here once per call, as in ops.c). Work sizes are chosen for a CPU first
 * (PoCL: a work-group is one task for one thread), without hurting GPUs. */
#include "nn/ops_tf.h"

#include <limits.h>
#include <math.h>

#include "core/err.h"
#include "nn/ops_util.h"
#include "core/rng.h"

/* ---------------------------------------------------------------- helpers */

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* 1-D range of `items`: local size up to 64, halved (not below 1) until there are at least
 * 4 groups per compute unit, so a few dozen long-running work-items still spread over a
 * CPU's threads. */
static void launch_items(ht_dev *d, const char *name, size_t items, int nargs, const ht_arg *args) {
    size_t l = pow2_at_most(ht_kernel_max_wg(d, name)), cu = ht_dev_info(d)->compute_units;
    if (l > 64) l = 64;
    while (l > 1 && (items + l - 1) / l < 4 * (cu ? cu : 1))
        l /= 2;
    size_t g = round_up(items, l);
    ht_launch_at(d, name, 1, &g, &l, nargs, args, __FILE__, __LINE__);
}

/* 2-D range (n0 column blocks, n1 rows): a group spans up to 16 column blocks of 64/l0 rows. */
static void launch_2d(ht_dev *d, const char *name, size_t n0, size_t n1, int nargs,
                      const ht_arg *args) {
    size_t maxwg = pow2_at_most(ht_kernel_max_wg(d, name));
    size_t l0 = 1;
    while (l0 < n0 && l0 < 16)
        l0 *= 2;
    if (l0 > maxwg) l0 = maxwg;
    size_t l1 = 64 / l0;
    if (l1 * l0 > maxwg) l1 = maxwg / l0;
    if (l1 < 1) l1 = 1;
    size_t lws[2] = {l0, l1}, gws[2] = {round_up(n0, l0), round_up(n1, l1)};
    ht_launch_at(d, name, 2, gws, lws, nargs, args, __FILE__, __LINE__);
}

#define NARGS(a) ((int)(sizeof(a) / sizeof *(a)))

/* ---------------------------------------------------------------- embedding */

void ht_embed_forward(ht_dev *d, ht_view out, ht_view tokens, ht_view wte, ht_view wpe, int B,
                      int T, int C, int V) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    int BT = isize((size_t)B * (size_t)T, "embedding rows");
    isize((size_t)BT * (size_t)C, "embedding output");
    isize((size_t)V * (size_t)C, "wte");
    ht_arg args[] = {HT_BUF(out.buf),    HT_INT(ioff(out.off, "out")),
                     HT_BUF(tokens.buf), HT_INT(ioff(tokens.off, "tokens")),
                     HT_BUF(wte.buf),    HT_INT(ioff(wte.off, "wte")),
                     HT_BUF(wpe.buf),    HT_INT(ioff(wpe.off, "wpe")),
                     HT_INT(BT),         HT_INT(T),
                     HT_INT(C),          HT_INT(V)};
    double btc = (double)BT * C; /* a wte and a wpe row added per output row */
    work(d, btc, 3.0 * btc + BT);
    launch_2d(d, "tf_embed_fwd", ((size_t)C + 15) / 16, (size_t)BT, NARGS(args), args);
}

/* dwte columns per work-item of tf_embed_bwd_wte: the whole row (up to this many floats), so
 * the B*T tokens are scanned V times in all, not V*C/16 times. Measured on PoCL (2 cores
 * shared with another job; B*T = 1024, V = 256, C = 128; both backward kernels, best of 30):
 * whole rows 0.14 ms, 64-column slices 0.23 ms, 16-column slices 0.63 ms. A counting sort of
 * the tokens would scale to large V, but needs three more launches and a scratch buffer. */
enum { EMBED_CB_MAX = 256 };

void ht_embed_backward(ht_dev *d, ht_view dwte, ht_view dwpe, ht_view dout, ht_view tokens, int B,
                       int T, int C, int V, int acc_wte, int acc_wpe) {
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0) return;
    int BT = isize((size_t)B * (size_t)T, "embedding rows");
    isize((size_t)BT * (size_t)C, "embedding output");
    isize((size_t)V * (size_t)C, "wte");
    int cb = C <= EMBED_CB_MAX ? (C + 15) / 16 * 16 : EMBED_CB_MAX;
    ht_arg a1[] = {HT_BUF(dwte.buf),
                   HT_INT(ioff(dwte.off, "dwte")),
                   HT_BUF(dout.buf),
                   HT_INT(ioff(dout.off, "dout")),
                   HT_BUF(tokens.buf),
                   HT_INT(ioff(tokens.off, "tokens")),
                   HT_INT(BT),
                   HT_INT(C),
                   HT_INT(V),
                   HT_INT(cb),
                   HT_INT(acc_wte != 0)};
    size_t nblk = ((size_t)C + (size_t)cb - 1) / (size_t)cb;
    size_t l0 = pow2_at_most(ht_kernel_max_wg(d, "tf_embed_bwd_wte"));
    if (l0 > 16) l0 = 16;
    size_t lws[2] = {l0, 1}, gws[2] = {round_up((size_t)V, l0), nblk};
    double btc = (double)BT * C, vc = (double)V * C;
    work(d, btc, btc + BT + (acc_wte ? 2 : 1) * vc); /* dout and the tokens once, dwte */
    ht_launch_at(d, "tf_embed_bwd_wte", 2, gws, lws, NARGS(a1), a1, __FILE__, __LINE__);
    ht_arg a2[] = {HT_BUF(dwpe.buf), HT_INT(ioff(dwpe.off, "dwpe")),
                   HT_BUF(dout.buf), HT_INT(ioff(dout.off, "dout")),
                   HT_INT(B),        HT_INT(T),
                   HT_INT(C),        HT_INT(acc_wpe != 0)};
    work(d, btc, btc + (acc_wpe ? 2.0 : 1.0) * T * C);
    launch_2d(d, "tf_embed_bwd_wpe", ((size_t)C + 15) / 16, (size_t)T, NARGS(a2), a2);
}

/* ---------------------------------------------------------------- layernorm */

void ht_layernorm_forward(ht_dev *d, ht_view out, ht_view mean, ht_view rstd, ht_view inp,
                          ht_view w, ht_view b, int N, int C) {
    if (N <= 0 || C <= 0) return;
    isize((size_t)N * (size_t)C, "layernorm input");
    ht_arg args[] = {HT_BUF(out.buf),    HT_INT(ioff(out.off, "out")),
                     HT_BUF(mean.buf),   HT_INT(ioff(mean.off, "mean")),
                     HT_BUF(rstd.buf),   HT_INT(ioff(rstd.off, "rstd")),
                     HT_BUF(inp.buf),    HT_INT(ioff(inp.off, "inp")),
                     HT_BUF(w.buf),      HT_INT(ioff(w.off, "w")),
                     HT_BUF(b.buf),      HT_INT(ioff(b.off, "b")),
                     HT_INT(N),          HT_INT(C),
                     HT_FLOAT(HT_LN_EPS)};
    double n = (double)N * C; /* mean, variance, normalise, scale, shift */
    work(d, 8.0 * n, 2.0 * n + 2.0 * C + 2.0 * N);
    launch_items(d, "tf_ln_fwd", (size_t)N, NARGS(args), args);
}

void ht_layernorm_backward_input(ht_dev *d, ht_view dinp, ht_view dout, ht_view inp, ht_view w,
                                 ht_view mean, ht_view rstd, int N, int C, int add_dinp) {
    if (N <= 0 || C <= 0) return;
    isize((size_t)N * (size_t)C, "layernorm input");
    ht_arg a1[] = {HT_BUF(dinp.buf),
                   HT_INT(ioff(dinp.off, "dinp")),
                   HT_BUF(dout.buf),
                   HT_INT(ioff(dout.off, "dout")),
                   HT_BUF(inp.buf),
                   HT_INT(ioff(inp.off, "inp")),
                   HT_BUF(w.buf),
                   HT_INT(ioff(w.off, "w")),
                   HT_BUF(mean.buf),
                   HT_INT(ioff(mean.off, "mean")),
                   HT_BUF(rstd.buf),
                   HT_INT(ioff(rstd.off, "rstd")),
                   HT_INT(N),
                   HT_INT(C),
                   HT_INT(add_dinp != 0)};
    double n = (double)N * C; /* dout, inp, [dinp] read, dinp written */
    work(d, 10.0 * n, (add_dinp ? 4 : 3) * n + C + 2.0 * N);
    launch_items(d, "tf_ln_bwd_dx", (size_t)N, NARGS(a1), a1);
}

void ht_layernorm_backward_weights(ht_dev *d, ht_view dw, ht_view db, ht_view dout, ht_view inp,
                                   ht_view mean, ht_view rstd, int N, int C, int accumulate) {
    if (N <= 0 || C <= 0) return;
    isize((size_t)N * (size_t)C, "layernorm input");
    ht_arg a2[] = {HT_BUF(dw.buf),
                   HT_INT(ioff(dw.off, "dw")),
                   HT_BUF(db.buf),
                   HT_INT(ioff(db.off, "db")),
                   HT_BUF(dout.buf),
                   HT_INT(ioff(dout.off, "dout")),
                   HT_BUF(inp.buf),
                   HT_INT(ioff(inp.off, "inp")),
                   HT_BUF(mean.buf),
                   HT_INT(ioff(mean.off, "mean")),
                   HT_BUF(rstd.buf),
                   HT_INT(ioff(rstd.off, "rstd")),
                   HT_INT(N),
                   HT_INT(C),
                   HT_INT(accumulate != 0)};
    double n = (double)N * C;
    work(d, 4.0 * n, 2.0 * n + 2.0 * N + (accumulate ? 4 : 2) * C);
    launch_items(d, "tf_ln_bwd_dwb", ((size_t)C + 7) / 8, NARGS(a2), a2);
}

void ht_layernorm_backward(ht_dev *d, ht_view dinp, ht_view dw, ht_view db, ht_view dout,
                           ht_view inp, ht_view w, ht_view mean, ht_view rstd, int N, int C,
                           int add_dinp, int accumulate) {
    ht_layernorm_backward_input(d, dinp, dout, inp, w, mean, rstd, N, C, add_dinp);
    ht_layernorm_backward_weights(d, dw, db, dout, inp, mean, rstd, N, C, accumulate);
}

/* ---------------------------------------------------------------- residual */

void ht_residual_forward(ht_dev *d, ht_view out, ht_view a, ht_view b, size_t n) {
    if (n == 0) return;
    ht_arg args[] = {HT_BUF(out.buf),
                     HT_INT(ioff(out.off, "out")),
                     HT_BUF(a.buf),
                     HT_INT(ioff(a.off, "a")),
                     HT_BUF(b.buf),
                     HT_INT(ioff(b.off, "b")),
                     HT_INT(isize(n, "residual"))};
    work(d, (double)n, 3.0 * (double)n);
    launch_items(d, "tf_add", (n + 15) / 16, NARGS(args), args);
}

static void acc_into(ht_dev *d, ht_view y, ht_view x, size_t n, int accumulate) {
    if (!y.buf || (y.buf == x.buf && y.off == x.off && !accumulate)) return;
    if (!accumulate) {
        ht_buf_copy(d, y.buf, y.off * sizeof(float), x.buf, x.off * sizeof(float),
                    n * sizeof(float));
        return;
    }
    ht_arg args[] = {HT_BUF(y.buf),
                     HT_INT(ioff(y.off, "da")),
                     HT_BUF(x.buf),
                     HT_INT(ioff(x.off, "dout")),
                     HT_INT(isize(n, "residual")),
                     HT_INT(1)};
    work(d, (double)n, 3.0 * (double)n);
    launch_items(d, "tf_acc", (n + 15) / 16, NARGS(args), args);
}

void ht_residual_backward(ht_dev *d, ht_view da, ht_view db, ht_view dout, size_t n,
                          int accumulate) {
    if (n == 0) return;
    acc_into(d, da, dout, n, accumulate);
    acc_into(d, db, dout, n, accumulate);
}

/* ---------------------------------------------------------------- dropout */

int ht_dropout_keep(uint64_t seed, uint64_t step, uint64_t i, float p) {
    return ht_rng_uniform(ht_rng_stream(seed, step), i) >= p;
}

static void dropout(ht_dev *d, ht_view y, ht_view x, size_t n, float p, uint64_t seed,
                    uint64_t step, uint64_t first) {
    if (n == 0) return;
    if (!(p >= 0.0f && p <= 1.0f)) ht_die(HT_ERUNTIME, "nn: dropout p = %g outside [0, 1]", p);
    if (p == 0.0f) { /* the identity, bit for bit */
        if (y.buf != x.buf || y.off != x.off)
            ht_buf_copy(d, y.buf, y.off * sizeof(float), x.buf, x.off * sizeof(float),
                        n * sizeof(float));
        return;
    }
    /* u = k * 2^-24 >= p  <=>  k >= ceil(p * 2^24) for the 24-bit integer k (p * 2^24 is
     * exact in double) */
    int thresh = (int)ceil((double)p * 16777216.0);
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    uint64_t key = ht_mix64(ht_rng_stream(seed, step));
    ht_arg args[] = {HT_BUF(y.buf),
                     HT_INT(ioff(y.off, "dropout out")),
                     HT_BUF(x.buf),
                     HT_INT(ioff(x.off, "dropout in")),
                     HT_INT(isize(n, "dropout")),
                     HT_INT((int32_t)(uint32_t)(key & 0xffffffffu)),
                     HT_INT((int32_t)(uint32_t)(key >> 32)),
                     HT_INT(thresh),
                     HT_FLOAT(scale),
                     HT_INT((int32_t)(uint32_t)(first & 0xffffffffu)),
                     HT_INT((int32_t)(uint32_t)(first >> 32))};
    work(d, 12.0 * (double)n, 2.0 * (double)n); /* a counter hash and a scale an element */
    launch_items(d, "tf_dropout", (n + 7) / 8, NARGS(args), args);
}

void ht_dropout_forward(ht_dev *d, ht_view out, ht_view inp, size_t n, float p, uint64_t seed,
                        uint64_t step) {
    dropout(d, out, inp, n, p, seed, step, 0);
}

void ht_dropout_backward(ht_dev *d, ht_view dinp, ht_view dout, size_t n, float p, uint64_t seed,
                         uint64_t step) {
    dropout(d, dinp, dout, n, p, seed, step, 0);
}

void ht_dropout_forward_at(ht_dev *d, ht_view out, ht_view inp, size_t n, float p, uint64_t seed,
                           uint64_t step, uint64_t first) {
    dropout(d, out, inp, n, p, seed, step, first);
}

void ht_dropout_backward_at(ht_dev *d, ht_view dinp, ht_view dout, size_t n, float p,
                            uint64_t seed, uint64_t step, uint64_t first) {
    dropout(d, dinp, dout, n, p, seed, step, first);
}

/* ---------------------------------------------------------------- attention */

static int attn_rows(int B, int T, int C, int NH) {
    if (NH <= 0 || C % NH != 0)
        ht_die(HT_ERUNTIME, "nn: attention with C = %d not divisible by %d heads", C, NH);
    isize((size_t)B * (size_t)T * 3 * (size_t)C, "qkv");
    isize((size_t)B * (size_t)NH * (size_t)T * (size_t)T, "attention matrix");
    return B * NH * T;
}


/* The work of an attention kernel for the profile's roofline, over the causal pairs
 * P = B NH T(T+1)/2: `products` matrix products of 2 P hs operations each (scores, att.V and
 * their gradients), `per_pair` more operations a pair (softmax and its gradient), and
 * `rows` B T C blocks (q, k, v, out, their gradients) plus `pairs` P-sized matrices (the
 * stored attention) moved. */
static void attn_work(ht_dev *d, int B, int T, int C, int NH, double products, double per_pair,
                      double rows, double pairs) {
    double P = (double)B * NH * T * (T + 1.0) / 2.0;
    work(d, products * 2.0 * P * (C / NH) + per_pair * P, rows * B * T * C + pairs * P);
}

/* Work-group size of the per-head kernels: T rounded up to a power of two, at most 64. */
static size_t attn_wg_local_size(ht_dev *d, const char *name, int T) {
    size_t l = 1, cap = pow2_at_most(ht_kernel_max_wg(d, name));
    while (l < (size_t)T && l < 64)
        l *= 2;
    return l < cap ? l : cap;
}

/* Local bytes of the per-head kernels: a transposed (hs, Tp + 8) tile plus `rows` rows of
 * Tp + 8 (an upper bound: the forward's rows are Tp). */
static size_t attn_wg_bytes(int T, int hs, size_t rows) {
    size_t Tp = ((size_t)T + 7) / 8 * 8;
    return ((size_t)hs + rows) * (Tp + 8) * sizeof(float);
}

/* Per head where it fits: on PoCL (2 cores, C = 128, NH = 4, B*T = 1024; best of 40,
 * interleaved) forward/backward take 0.83/1.13 ms per head against 1.07/1.62 ms per row at
 * T = 64, 1.43/2.51 against 1.89/2.77 at T = 128, and about the same at T = 256. */
static int attn_use_heads(ht_dev *d, size_t bytes) {
    if (ht_attention_forced() == HT_ATTN_ROWS) return 0;
    return bytes <= ht_dev_info(d)->local_mem;
}

void ht_attention_forward(ht_dev *d, ht_view out, ht_view att, ht_view qkv, int B, int T, int C,
                          int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    int rows = attn_rows(B, T, C, NH), hs = C / NH;
    const char *k = "tf_attn_fwd_wg";
    size_t l = attn_wg_local_size(d, k, T), Tp = ((size_t)T + 7) / 8 * 8;
    attn_work(d, B, T, C, NH, 2, 5, 4, 1); /* qkv read, out and att written */
    if (attn_use_heads(d, attn_wg_bytes(T, hs, l))) {
        size_t g = (size_t)B * (size_t)NH * l;
        ht_launch(d, k, 1, &g, &l, HT_BUF(out.buf), HT_INT(ioff(out.off, "out")), HT_BUF(att.buf),
                  HT_INT(ioff(att.off, "att")), HT_BUF(qkv.buf), HT_INT(ioff(qkv.off, "qkv")),
                  HT_INT(T), HT_INT(C), HT_INT(NH), HT_LOCAL((size_t)hs * (Tp + 8) * sizeof(float)),
                  HT_LOCAL(l * Tp * sizeof(float)));
        return;
    }
    ht_arg args[] = {HT_BUF(out.buf), HT_INT(ioff(out.off, "out")),
                     HT_BUF(att.buf), HT_INT(ioff(att.off, "att")),
                     HT_BUF(qkv.buf), HT_INT(ioff(qkv.off, "qkv")),
                     HT_INT(B),       HT_INT(T),
                     HT_INT(C),       HT_INT(NH)};
    launch_items(d, "tf_attn_fwd", (size_t)rows, NARGS(args), args);
}

void ht_attention_backward(ht_dev *d, ht_view dqkv, ht_view scratch, ht_view dout, ht_view qkv,
                           ht_view att, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    int rows = attn_rows(B, T, C, NH), hs = C / NH;
    const char *k = "tf_attn_bwd_wg";
    size_t l = attn_wg_local_size(d, k, T), Tp = ((size_t)T + 7) / 8 * 8;
    if (attn_use_heads(d, attn_wg_bytes(T, hs, (size_t)T))) {
        attn_work(d, B, T, C, NH, 4, 4, 7, 1); /* qkv, dout, att read; dqkv written */
        size_t g = (size_t)B * (size_t)NH * l;
        ht_launch(d, k, 1, &g, &l, HT_BUF(dqkv.buf), HT_INT(ioff(dqkv.off, "dqkv")),
                  HT_BUF(dout.buf), HT_INT(ioff(dout.off, "dout")), HT_BUF(qkv.buf),
                  HT_INT(ioff(qkv.off, "qkv")), HT_BUF(att.buf), HT_INT(ioff(att.off, "att")),
                  HT_INT(T), HT_INT(C), HT_INT(NH), HT_LOCAL((size_t)hs * (Tp + 8) * sizeof(float)),
                  HT_LOCAL((size_t)T * (Tp + 8) * sizeof(float)));
        return;
    }
    ht_arg args[] = {HT_BUF(dqkv.buf),    HT_INT(ioff(dqkv.off, "dqkv")),
                     HT_BUF(scratch.buf), HT_INT(ioff(scratch.off, "scratch")),
                     HT_BUF(dout.buf),    HT_INT(ioff(dout.off, "dout")),
                     HT_BUF(qkv.buf),     HT_INT(ioff(qkv.off, "qkv")),
                     HT_BUF(att.buf),     HT_INT(ioff(att.off, "att")),
                     HT_INT(B),           HT_INT(T),
                     HT_INT(C),           HT_INT(NH)};
    attn_work(d, B, T, C, NH, 2, 4, 4, 2); /* dq: dout, k, v, att read, the scores' grad kept */
    launch_items(d, "tf_attn_bwd_q", (size_t)rows, NARGS(args), args);
    attn_work(d, B, T, C, NH, 2, 0, 4, 2); /* dk, dv from it, att, q and dout */
    launch_items(d, "tf_attn_bwd_kv", (size_t)rows, NARGS(args), args);
}

/* ---------------------------------------------------------------- fused attention */

static int flash_rows(int B, int T, int C, int NH) {
    if (NH <= 0 || C % NH != 0)
        ht_die(HT_ERUNTIME, "nn: attention with C = %d not divisible by %d heads", C, NH);
    isize((size_t)B * (size_t)T * 3 * (size_t)C, "qkv");
    return isize((size_t)B * (size_t)NH * (size_t)T, "attention rows");
}

/* Work-group size of a per-head fused kernel whose local memory is (fixed + per_item * L) * Tp
 * floats: the per-head size, halved while that exceeds the device's local memory; 0 (use the
 * per-row kernels) below 8 work-items or when HT_ATTN_ROWS is forced. */
static size_t flash_wg(ht_dev *d, const char *name, int T, size_t fixed, size_t per_item) {
    if (ht_attention_forced() == HT_ATTN_ROWS) return 0;
    size_t l = attn_wg_local_size(d, name, T), Tp = ((size_t)T + 7) / 8 * 8;
    while (l >= 8 && (fixed + per_item * l) * (Tp + 8) * sizeof(float) > ht_dev_info(d)->local_mem)
        l /= 2;
    return l >= 8 || l >= (size_t)T ? l : 0;
}

void ht_attention_flash_forward(ht_dev *d, ht_view out, ht_view lse, ht_view qkv, int B, int T,
                                int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    int rows = flash_rows(B, T, C, NH), hs = C / NH;
    size_t l = flash_wg(d, "tf_flash_fwd_wg", T, (size_t)hs, 1), Tp = ((size_t)T + 7) / 8 * 8;
    size_t Ts = Tp + 8; /* row stride of the transposed tiles (cl/flash.cl) */
    attn_work(d, B, T, C, NH, 2, 5, 4, 0); /* qkv read, out written (lse: a row's float) */
    if (l) {
        size_t g = (size_t)B * (size_t)NH * l;
        ht_launch(d, "tf_flash_fwd_wg", 1, &g, &l, HT_BUF(out.buf), HT_INT(ioff(out.off, "out")),
                  HT_BUF(lse.buf), HT_INT(ioff(lse.off, "lse")), HT_BUF(qkv.buf),
                  HT_INT(ioff(qkv.off, "qkv")), HT_INT(T), HT_INT(C), HT_INT(NH),
                  HT_LOCAL((size_t)hs * Ts * sizeof(float)), HT_LOCAL(l * Tp * sizeof(float)));
        return;
    }
    ht_arg args[] = {HT_BUF(out.buf), HT_INT(ioff(out.off, "out")),
                     HT_BUF(lse.buf), HT_INT(ioff(lse.off, "lse")),
                     HT_BUF(qkv.buf), HT_INT(ioff(qkv.off, "qkv")),
                     HT_INT(B),       HT_INT(T),
                     HT_INT(C),       HT_INT(NH)};
    launch_items(d, "tf_flash_fwd", (size_t)rows, NARGS(args), args);
}

static void flash_backward_wg(ht_dev *d, size_t l, ht_view dqkv, ht_view dout, ht_view out,
                              ht_view qkv, ht_view lse, int B, int T, int C, int NH) {
    size_t g = (size_t)B * (size_t)NH * l, Tp = ((size_t)T + 7) / 8 * 8;
    size_t tile = (size_t)(C / NH) * (Tp + 8) * sizeof(float), row = l * Tp * sizeof(float);
    ht_launch(d, "tf_flash_bwd_wg", 1, &g, &l, HT_BUF(dqkv.buf), HT_INT(ioff(dqkv.off, "dqkv")),
              HT_BUF(dout.buf), HT_INT(ioff(dout.off, "dout")), HT_BUF(out.buf),
              HT_INT(ioff(out.off, "out")), HT_BUF(qkv.buf), HT_INT(ioff(qkv.off, "qkv")),
              HT_BUF(lse.buf), HT_INT(ioff(lse.off, "lse")), HT_INT(T), HT_INT(C), HT_INT(NH),
              HT_LOCAL(tile), HT_LOCAL(tile), HT_LOCAL(row), HT_LOCAL(row),
              HT_LOCAL(Tp * sizeof(float)), HT_LOCAL(Tp * sizeof(float)));
}

void ht_attention_flash_backward(ht_dev *d, ht_view dqkv, ht_view dsum, ht_view dout, ht_view out,
                                 ht_view qkv, ht_view lse, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    int rows = flash_rows(B, T, C, NH), hs = C / NH;
    size_t l = flash_wg(d, "tf_flash_bwd_wg", T, 2 * (size_t)hs + 2, 2);
    if (l) {
        attn_work(d, B, T, C, NH, 5, 6, 8, 0); /* scores recomputed; qkv, dout, out, dqkv */
        flash_backward_wg(d, l, dqkv, dout, out, qkv, lse, B, T, C, NH);
        return;
    }
    ht_arg q[] = {HT_BUF(dqkv.buf), HT_INT(ioff(dqkv.off, "dqkv")),
                  HT_BUF(dsum.buf), HT_INT(ioff(dsum.off, "dsum")),
                  HT_BUF(dout.buf), HT_INT(ioff(dout.off, "dout")),
                  HT_BUF(out.buf),  HT_INT(ioff(out.off, "out")),
                  HT_BUF(qkv.buf),  HT_INT(ioff(qkv.off, "qkv")),
                  HT_BUF(lse.buf),  HT_INT(ioff(lse.off, "lse")),
                  HT_INT(B),        HT_INT(T),
                  HT_INT(C),        HT_INT(NH)};
    attn_work(d, B, T, C, NH, 3, 6, 6, 0); /* scores again, dP, dq; qkv, dout, out, dq */
    launch_items(d, "tf_flash_bwd_q", (size_t)rows, NARGS(q), q);
    /* pass 2 takes the same arguments less out */
    ht_arg kv[] = {q[0], q[1], q[2], q[3], q[4], q[5], q[8], q[9], q[10], q[11], q[12], q[13], q[14], q[15]};
    attn_work(d, B, T, C, NH, 4, 6, 6, 0); /* scores, dP, dk, dv; qkv, dout, dk, dv */
    launch_items(d, "tf_flash_bwd_kv", (size_t)rows, NARGS(kv), kv);
}

/* ---------------------------------------------------------------- residual + LayerNorm */

void ht_residual_layernorm_forward(ht_dev *d, ht_view res, ht_view out, ht_view mean,
                                   ht_view rstd, ht_view a, ht_view b, ht_view w, ht_view bias,
                                   int N, int C) {
    if (N <= 0 || C <= 0) return;
    isize((size_t)N * (size_t)C, "residual + layernorm input");
    ht_arg args[] = {HT_BUF(res.buf),  HT_INT(ioff(res.off, "res")),
                     HT_BUF(out.buf),  HT_INT(ioff(out.off, "out")),
                     HT_BUF(mean.buf), HT_INT(ioff(mean.off, "mean")),
                     HT_BUF(rstd.buf), HT_INT(ioff(rstd.off, "rstd")),
                     HT_BUF(a.buf),    HT_INT(ioff(a.off, "a")),
                     HT_BUF(b.buf),    HT_INT(ioff(b.off, "b")),
                     HT_BUF(w.buf),    HT_INT(ioff(w.off, "w")),
                     HT_BUF(bias.buf), HT_INT(ioff(bias.off, "bias")),
                     HT_INT(N),        HT_INT(C),
                     HT_FLOAT(HT_LN_EPS)};
    double n = (double)N * C; /* a + b kept as res, then LayerNorm of it */
    work(d, 9.0 * n, 4.0 * n + 2.0 * C + 2.0 * N);
    launch_items(d, "tf_add_ln_fwd", (size_t)N, NARGS(args), args);
}

void ht_residual_layernorm_backward_input(ht_dev *d, ht_view dx, ht_view dres, ht_view dout,
                                          ht_view inp, ht_view w, ht_view mean, ht_view rstd,
                                          int N, int C) {
    if (N <= 0 || C <= 0) return;
    isize((size_t)N * (size_t)C, "residual + layernorm input");
    ht_arg args[] = {HT_BUF(dx.buf),   HT_INT(ioff(dx.off, "dx")),
                     HT_BUF(dres.buf), HT_INT(ioff(dres.off, "dres")),
                     HT_BUF(dout.buf), HT_INT(ioff(dout.off, "dout")),
                     HT_BUF(inp.buf),  HT_INT(ioff(inp.off, "inp")),
                     HT_BUF(w.buf),    HT_INT(ioff(w.off, "w")),
                     HT_BUF(mean.buf), HT_INT(ioff(mean.off, "mean")),
                     HT_BUF(rstd.buf), HT_INT(ioff(rstd.off, "rstd")),
                     HT_INT(N),        HT_INT(C)};
    double n = (double)N * C; /* dres, dout, inp read, dx written */
    work(d, 11.0 * n, 4.0 * n + C + 2.0 * N);
    launch_items(d, "tf_add_ln_bwd_dx", (size_t)N, NARGS(args), args);
}
