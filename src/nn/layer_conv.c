/* Layer kinds of a CNN over NCHW activations: 2-D convolution (im2col + GEMM in
 * nn/ops_conv.h; fuses a following ReLU/GELU like linear), max and average pooling. Shapes are
 * checked when the layer is added, naming the config element that asked for it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

#include "nn/layer.h"
#include "nn/ops_conv.h"

/* (C,H,W) input or an error naming `what` and the shape found. */
static int need_chw(const ht_model *m, const char *what, const char *kind) {
    ht_shape in = ht_chain_shape(m);
    if (in.ndim == 3) return HT_OK;
    char s[32];
    ht_shape_str(&in, s, sizeof s);
    return ht_error(HT_EINPUT, "%s: %s needs a (C,H,W) input, but the input here is %s%s", what,
                    kind, s, in.ndim == 1 ? " (after flatten or linear)" : "");
}

/* ---------------------------------------------------------------- conv */

/* per sample: K = cin*k*k column rows, P = Ho*Wo output pixels */
static double conv_gemm_flops(const ht_layer *l) {
    double K = (double)l->in_shape.d[0] * l->k * l->k;
    return 2.0 * K * l->out; /* l->out = cout * P */
}

static double conv_flops_fwd(const ht_layer *l) { return conv_gemm_flops(l) + l->out; }

static double conv_flops_bwd(const ht_layer *l, int with_dx) { /* dW GEMM, db sums, dx GEMM */
    return conv_gemm_flops(l) + l->out + (with_dx ? conv_gemm_flops(l) : 0.0);
}

/* SIZE_MAX (the error recorded) when a tensor of the layer at batch B is past 2^31
 * elements: ht_chain_finish turns it into HT_EINPUT before anything is allocated. */
static size_t conv_work(const ht_layer *l, int B) {
    ht_conv2d_shape s = conv_shape(l, B);
    if (ht_conv2d_check(&s) != HT_OK) return SIZE_MAX;
    return ht_conv2d_workspace_floats(&s);
}

const ht_layer_ops ht_ops_conv = {
    .kind = "conv",
    .flops_forward = conv_flops_fwd,
    .flops_backward = conv_flops_bwd,
    .work_floats = conv_work,
    .fuses_act = 1,
    .scales = 1,
};

int ht_layer_add_conv(ht_model *m, const char *name, int out_ch, int k, int stride, int pad,
                      const char *what) {
    int rc = need_chw(m, what, "conv");
    if (rc != HT_OK) return rc;
    ht_shape in = ht_chain_shape(m);
    ht_conv2d_shape s = {1, in.d[0], in.d[1], in.d[2], out_ch, k, stride, pad};
    if (ht_conv2d_check(&s) != HT_OK) {
        char shape[32], why[256];
        ht_shape_str(&in, shape, sizeof shape);
        snprintf(why, sizeof why, "%s", ht_errmsg()); /* ht_error rewrites the message */
        return ht_error(HT_EINPUT, "%s: on the %s input: %s", what, shape, why);
    }
    ht_layer *l = ht_chain_add(m, HT_LAYER_CONV, &ht_ops_conv, name);
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    l->out_shape = (ht_shape){3, {out_ch, ht_conv2d_oh(&s), ht_conv2d_ow(&s)}};
    l->out = ht_shape_count(&l->out_shape);
    /* PyTorch's nn.Conv2d default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = cin*k*k */
    float bound = 1.0f / sqrtf((float)in.d[0] * (float)k * (float)k);
    int64_t ws[4] = {out_ch, in.d[0], k, k}, bs[1] = {out_ch};
    ht_layer_tensor(m, l, "weight", 4, ws, HT_INIT_UNIFORM, bound);
    l->boff = ht_layer_tensor(m, l, "bias", 1, bs, HT_INIT_UNIFORM, bound);
    return HT_OK;
}

/* ---------------------------------------------------------------- pooling */

/* Max: a comparison per window element; backward recomputes the argmax (as many) and
 * routes. Average: k*k - 1 adds and a divide per window; backward a divide per window and
 * an add per window element into dx. */
static double maxpool_flops_fwd(const ht_layer *l) { return (double)l->out * l->k * l->k; }
static double maxpool_flops_bwd(const ht_layer *l, int with_dx) {
    return with_dx ? (double)l->out * l->k * l->k : 0.0;
}
static double avgpool_flops_fwd(const ht_layer *l) { return (double)l->out * l->k * l->k; }
static double avgpool_flops_bwd(const ht_layer *l, int with_dx) {
    return with_dx ? (double)l->out * (l->k * l->k + 1) : 0.0;
}

const ht_layer_ops ht_ops_maxpool = {
    .kind = "maxpool",
    .flops_forward = maxpool_flops_fwd,
    .flops_backward = maxpool_flops_bwd,
};

const ht_layer_ops ht_ops_avgpool = {
    .kind = "avgpool",
    .flops_forward = avgpool_flops_fwd,
    .flops_backward = avgpool_flops_bwd,
};

static int add_pool(ht_model *m, ht_layer_kind kind, const ht_layer_ops *ops, const char *name,
                    int k, int stride, const char *what) {
    int rc = need_chw(m, what, ops->kind);
    if (rc != HT_OK) return rc;
    ht_shape in = ht_chain_shape(m);
    ht_pool2d_shape s = {1, in.d[0], in.d[1], in.d[2], k, stride, 0};
    if (ht_pool2d_check(&s) != HT_OK) {
        char shape[32], why[256];
        ht_shape_str(&in, shape, sizeof shape);
        snprintf(why, sizeof why, "%s", ht_errmsg()); /* ht_error rewrites the message */
        return ht_error(HT_EINPUT, "%s: on the %s input: %s", what, shape, why);
    }
    ht_layer *l = ht_chain_add(m, kind, ops, name);
    l->k = k;
    l->stride = stride;
    l->out_shape = (ht_shape){3, {in.d[0], ht_pool2d_oh(&s), ht_pool2d_ow(&s)}};
    l->out = ht_shape_count(&l->out_shape);
    return HT_OK;
}

int ht_layer_add_maxpool(ht_model *m, const char *name, int k, int stride, const char *what) {
    return add_pool(m, HT_LAYER_MAXPOOL, &ht_ops_maxpool, name, k, stride, what);
}

int ht_layer_add_avgpool(ht_model *m, const char *name, int k, int stride, const char *what) {
    return add_pool(m, HT_LAYER_AVGPOOL, &ht_ops_avgpool, name, k, stride, what);
}
