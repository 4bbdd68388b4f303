/* Neural-network ops: argument checks, GEMM calls (row-major CLBlast) and kernel launches
 * by name. Kernels take offsets and sizes as int, so every tensor must lie in the first
 * 2^31 elements of its buffer; checked here once per call. */
#include "nn/ops.h"

#include <limits.h>
#include <string.h>

#include "core/err.h"
#include "nn/ops_util.h"

/* ---------------------------------------------------------------- helpers */

/* Kernels in cl/act.cl (and scale_f32 in cl/util.cl) give each work-item 16 consecutive
 * floats (a float16). */
enum { VEC = 16 };
static size_t vec_items(size_t n) { return (n + VEC - 1) / VEC; }

/* Work-group size for a 1-D range of `items`: up to 64, halved (not below 8) until there
 * are a few groups per compute unit, so small ranges still spread over the device. */
static size_t pick_local(ht_dev *d, const char *name, size_t items) {
    size_t l = ht_kernel_max_wg(d, name), cu = ht_dev_info(d)->compute_units;
    l = pow2_at_most(l < 64 ? l : 64);
    while (l > 8 && (items + l - 1) / l < 4 * (cu ? cu : 1))
        l /= 2;
    return l;
}

static void launch_cols(ht_dev *d, const char *name, int N, int nargs, const ht_arg *args) {
    size_t items = vec_items((size_t)N), l = pick_local(d, name, items);
    size_t g = (items + l - 1) / l * l;
    ht_launch_at(d, name, 1, &g, &l, nargs, args, __FILE__, __LINE__);
}

/* 2-D range (ceil(N/16) column blocks, B rows) for the bias passes: a group spans up to 32
 * column blocks of one or more rows, 64 work-items where the sizes allow. */
static void launch_rows(ht_dev *d, const char *name, int N, int B, int nargs, const ht_arg *args) {
    size_t maxwg = pow2_at_most(ht_kernel_max_wg(d, name));
    size_t cols = vec_items((size_t)N), l0 = pow2_at_least(cols);
    if (l0 > 32) l0 = 32;
    if (l0 > maxwg) l0 = maxwg;
    size_t l1 = 64 / l0 ? 64 / l0 : 1;
    if (l1 * l0 > maxwg) l1 = maxwg / l0;
    if (l1 > pow2_at_least((size_t)B)) l1 = pow2_at_least((size_t)B);
    size_t lws[2] = {l0, l1};
    size_t gws[2] = {(cols + l0 - 1) / l0 * l0, ((size_t)B + l1 - 1) / l1 * l1};
    ht_launch_at(d, name, 2, gws, lws, nargs, args, __FILE__, __LINE__);
}

static const char *act_fwd_kernel(ht_act act) {
    return act == HT_ACT_RELU ? "nn_relu_fwd" : "nn_gelu_fwd";
}

/* Operations an element of an activation and of its derivative (cl/act.cl; exp as one), for
 * the profile's roofline only. */
static double act_flops(ht_act act) { return act == HT_ACT_RELU ? 1 : act == HT_ACT_GELU ? 12 : 0; }
static double grad_flops(ht_act act) { return act == HT_ACT_RELU ? 1 : 20; }

/* ---------------------------------------------------------------- linear */

static void bias_act_pass(ht_dev *d, ht_view y, ht_view a, ht_view b, int B, int out, ht_act act) {
    if (!b.buf) { /* no bias: only the activation, if any */
        if (act != HT_ACT_NONE) ht_act_forward(d, act, a, y, (size_t)B * (size_t)out);
        return;
    }
    const char *k = act == HT_ACT_RELU   ? "nn_bias_relu_fwd"
                    : act == HT_ACT_GELU ? "nn_bias_gelu_fwd"
                                         : "nn_bias_fwd";
    ht_buf *abuf = act == HT_ACT_NONE ? y.buf : a.buf; /* nn_bias_fwd does not touch a */
    size_t aoff = act == HT_ACT_NONE ? y.off : a.off;
    ht_arg args[] = {
        HT_BUF(y.buf), HT_INT(ioff(y.off, "y")), HT_BUF(b.buf), HT_INT(ioff(b.off, "b")),
        HT_BUF(abuf),  HT_INT(ioff(aoff, "a")),  HT_INT(out),   HT_INT(B)};
    double n = (double)B * out; /* y read and written, a written unless no activation */
    work(d, n * (1 + act_flops(act)), (act == HT_ACT_NONE ? 2 : 3) * n + out);
    launch_rows(d, k, out, B, (int)(sizeof args / sizeof *args), args);
}

void ht_linear_act_forward(ht_dev *d, ht_view y, ht_view a, ht_view x, ht_view w, ht_view b, int B,
                           int in, int out, ht_act act) {
    if (B <= 0 || out <= 0) return;
    isize((size_t)B * (size_t)out, "linear output");
    ht_sgemm(d, 0, 1, (size_t)B, (size_t)out, (size_t)in, 1.0f, x.buf, x.off, (size_t)in, w.buf,
             w.off, (size_t)in, 0.0f, y.buf, y.off, (size_t)out);
    bias_act_pass(d, y, a, b, B, out, act);
}

void ht_linear_forward(ht_dev *d, ht_view y, ht_view x, ht_view w, ht_view b, int B, int in,
                       int out) {
    ht_linear_act_forward(d, y, y, x, w, b, B, in, out, HT_ACT_NONE);
}

/* The two GEMMs of linear backward, with dy scaled by alpha on the fly. */
static void linear_gemms_backward(ht_dev *d, ht_view dx, ht_view dw, ht_view dy, ht_view x,
                                  ht_view w, int B, int in, int out, float alpha, int accumulate) {
    /* dW(out,in) = alpha * dy^T(out,B) x(B,in) [+ dW] */
    ht_sgemm(d, 1, 0, (size_t)out, (size_t)in, (size_t)B, alpha, dy.buf, dy.off, (size_t)out, x.buf,
             x.off, (size_t)in, accumulate ? 1.0f : 0.0f, dw.buf, dw.off, (size_t)in);
    /* dx(B,in) = alpha * dy(B,out) W(out,in) */
    if (dx.buf)
        ht_sgemm(d, 0, 0, (size_t)B, (size_t)in, (size_t)out, alpha, dy.buf, dy.off, (size_t)out,
                 w.buf, w.off, (size_t)in, 0.0f, dx.buf, dx.off, (size_t)in);
}

void ht_linear_backward(ht_dev *d, ht_view dx, ht_view dw, ht_view db, ht_view dy, ht_view x,
                        ht_view w, int B, int in, int out, float scale, int accumulate) {
    if (B <= 0 || out <= 0) return;
    isize((size_t)B * (size_t)out, "linear output");
    if (db.buf) {
        ht_arg args[] = {HT_BUF(dy.buf),  HT_INT(ioff(dy.off, "dy")),
                         HT_BUF(db.buf),  HT_INT(ioff(db.off, "db")),
                         HT_INT(out),     HT_INT(B),
                         HT_FLOAT(scale), HT_INT(accumulate != 0)};
        work(d, (double)B * out, (double)B * out + 2.0 * out);
        launch_cols(d, "nn_bias_bwd", out, (int)(sizeof args / sizeof *args), args);
    }
    linear_gemms_backward(d, dx, dw, dy, x, w, B, in, out, scale, accumulate);
}

/* The halves: the same launches as ht_linear_backward, so each result is the same bits */
void ht_linear_backward_input(ht_dev *d, ht_view dx, ht_view dy, ht_view w, int B, int in,
                              int out, float scale) {
    if (B <= 0 || out <= 0 || !dx.buf) return;
    isize((size_t)B * (size_t)out, "linear output");
    ht_sgemm(d, 0, 0, (size_t)B, (size_t)in, (size_t)out, scale, dy.buf, dy.off, (size_t)out,
             w.buf, w.off, (size_t)in, 0.0f, dx.buf, dx.off, (size_t)in);
}

void ht_linear_backward_weights(ht_dev *d, ht_view dw, ht_view db, ht_view dy, ht_view x, int B,
                                int in, int out, float scale, int accumulate) {
    ht_linear_backward(d, ht_view_none(), dw, db, dy, x, ht_view_none(), B, in, out, scale,
                       accumulate);
}

void ht_linear_act_backward(ht_dev *d, ht_view dx, ht_view dw, ht_view db, ht_view dy, ht_view da,
                            ht_view y, ht_view x, ht_view w, int B, int in, int out, ht_act act,
                            float scale, int accumulate) {
    if (act == HT_ACT_NONE) {
        /* no activation: da is the output gradient itself, dy is not written */
        ht_linear_backward(d, dx, dw, db, da, x, w, B, in, out, scale, accumulate);
        return;
    }
    if (B <= 0 || out <= 0) return;
    ht_linear_act_backward_input(d, dx, db, dy, da, y, w, B, in, out, act, scale, accumulate);
    ht_linear_backward_weights(d, dw, ht_view_none(), dy, x, B, in, out, 1.0f, accumulate);
}

/* B of the fused pair: act' and the bias sums in one pass (db is cheap and rides on the pass
 * that reads da anyway), then dx; W is then the dW GEMM alone, from dy */
void ht_linear_act_backward_input(ht_dev *d, ht_view dx, ht_view db, ht_view dy, ht_view da,
                                  ht_view y, ht_view w, int B, int in, int out, ht_act act,
                                  float scale, int accumulate) {
    if (act == HT_ACT_NONE) ht_die(HT_ERUNTIME, "nn: ht_linear_act_backward_input without act");
    if (B <= 0 || out <= 0) return;
    size_t n = (size_t)isize((size_t)B * (size_t)out, "linear output");
    if (db.buf) {
        ht_arg args[] = {HT_BUF(dy.buf),  HT_INT(ioff(dy.off, "dy")),
                         HT_BUF(da.buf),  HT_INT(ioff(da.off, "da")),
                         HT_BUF(y.buf),   HT_INT(ioff(y.off, "y")),
                         HT_BUF(db.buf),  HT_INT(ioff(db.off, "db")),
                         HT_INT(out),     HT_INT(B),
                         HT_FLOAT(scale), HT_INT(accumulate != 0)};
        work(d, (double)n * (3 + grad_flops(act)), 3.0 * (double)n + 2.0 * out);
        launch_cols(d, act == HT_ACT_RELU ? "nn_relu_bwd_bias" : "nn_gelu_bwd_bias", out,
                    (int)(sizeof args / sizeof *args), args);
    } else
        ht_act_backward(d, act, dy, da, y, n, scale);
    ht_linear_backward_input(d, dx, dy, w, B, in, out, 1.0f);
}

/* ---------------------------------------------------------------- activations */

void ht_act_forward(ht_dev *d, ht_act act, ht_view y, ht_view x, size_t n) {
    if (n == 0) return;
    if (act == HT_ACT_NONE) {
        if (y.buf != x.buf || y.off != x.off)
            ht_buf_copy(d, y.buf, y.off * sizeof(float), x.buf, x.off * sizeof(float),
                        n * sizeof(float));
        return;
    }
    work(d, (double)n * act_flops(act), 2.0 * (double)n);
    ht_launch1d(d, act_fwd_kernel(act), vec_items(n), HT_BUF(y.buf), HT_INT(ioff(y.off, "y")),
                HT_BUF(x.buf), HT_INT(ioff(x.off, "x")), HT_INT(isize(n, "activation")));
}

void ht_act_backward(ht_dev *d, ht_act act, ht_view dx, ht_view dy, ht_view x, size_t n,
                     float scale) {
    if (n == 0) return;
    /* the identity has no backward pass of its own: callers fold it into the next op */
    if (act == HT_ACT_NONE) ht_die(HT_ERUNTIME, "nn: ht_act_backward called with no activation");
    work(d, (double)n * (2 + grad_flops(act)), 3.0 * (double)n);
    ht_launch1d(d, act == HT_ACT_RELU ? "nn_relu_bwd" : "nn_gelu_bwd", vec_items(n), HT_BUF(dx.buf),
                HT_INT(ioff(dx.off, "dx")), HT_BUF(dy.buf), HT_INT(ioff(dy.off, "dy")),
                HT_BUF(x.buf), HT_INT(ioff(x.off, "x")), HT_INT(isize(n, "activation")),
                HT_FLOAT(scale));
}

/* ---------------------------------------------------------------- elementwise */

void ht_scale(ht_dev *d, ht_view x, size_t n, float alpha) {
    if (n == 0 || alpha == 1.0f) return;
    work(d, (double)n, 2.0 * (double)n);
    ht_launch1d(d, "scale_f32", vec_items(n), HT_BUF(x.buf), HT_INT(ioff(x.off, "x")),
                HT_INT(isize(n, "scale")), HT_FLOAT(alpha));
}

/* ---------------------------------------------------------------- loss */

/* Rows up to this many classes take one work-item each (no barriers); wider rows a group. On
 * a CPU device a group's barriers cost more than its lanes save until rows are long: the
 * character-level GPT's 65 classes ran 6.7 ms a call (batch 1024) as groups of 128 lanes,
 * 9% of its step. */
enum { XENT_ROW_MAX_C = 64, XENT_ROW_MAX_C_CPU = 4096 };

void ht_softmax_xent(ht_dev *d, ht_view loss, ht_view correct, ht_view dlogits, ht_view logits,
                     ht_view labels, int B, int C, float grad_scale) {
    ht_softmax_xent_watch(d, loss, correct, dlogits, logits, labels, B, C, grad_scale, NULL, 0);
}

void ht_softmax_xent_watch(ht_dev *d, ht_view loss, ht_view correct, ht_view dlogits,
                           ht_view logits, ht_view labels, int B, int C, float grad_scale,
                           ht_buf *watch, int step) {
    if (!watch) step = 0, watch = loss.buf; /* any valid buffer: not read with step 0 */
    if (B <= 0 || C <= 0) return;
    isize((size_t)B * (size_t)C, "logits");
    int with_grad = dlogits.buf != NULL;
    ht_view dl = with_grad ? dlogits : logits; /* any valid buffer; not written */
    int a_loss = ioff(loss.off, "loss"), a_corr = ioff(correct.off, "correct");
    int a_dl = ioff(dl.off, "dlogits"), a_lg = ioff(logits.off, "logits");
    int a_lab = ioff(labels.off, "labels");
    const int cpu = !strcmp(ht_dev_info(d)->type, "cpu");
    /* max, exp, sum and scale a logit; logits read, gradient written, labels and loss */
    double bc = (double)B * C;
    work(d, 4.0 * bc, (1 + with_grad) * bc + 3.0 * B);
    if (C <= (cpu ? XENT_ROW_MAX_C_CPU : XENT_ROW_MAX_C)) {
        ht_launch1d(d, "nn_softmax_xent_rows", (size_t)B, HT_BUF(loss.buf), HT_INT(a_loss),
                    HT_BUF(correct.buf), HT_INT(a_corr), HT_BUF(dl.buf), HT_INT(a_dl),
                    HT_BUF(logits.buf), HT_INT(a_lg), HT_BUF(labels.buf), HT_INT(a_lab), HT_INT(B),
                    HT_INT(C), HT_FLOAT(grad_scale), HT_INT(with_grad), HT_BUF(watch),
                    HT_INT(step));
        return;
    }
    /* wide rows: a group per row, enough lanes to cover C, at most 256 (longer rows loop) */
    const char *k = "nn_softmax_xent";
    size_t l = pow2_at_least((size_t)C);
    size_t cap = pow2_at_most(ht_kernel_max_wg(d, k));
    if (cap > 256) cap = 256;
    if (l > cap) l = cap;
    size_t gws = (size_t)B * l;
    work(d, 4.0 * bc, (1 + with_grad) * bc + 3.0 * B);
    ht_launch(d, k, 1, &gws, &l, HT_BUF(loss.buf), HT_INT(a_loss), HT_BUF(correct.buf),
              HT_INT(a_corr), HT_BUF(dl.buf), HT_INT(a_dl), HT_BUF(logits.buf), HT_INT(a_lg),
              HT_BUF(labels.buf), HT_INT(a_lab), HT_INT(C), HT_FLOAT(grad_scale), HT_INT(with_grad),
              HT_LOCAL(l * sizeof(float)), HT_LOCAL(l * sizeof(int)), HT_BUF(watch), HT_INT(step));
}
