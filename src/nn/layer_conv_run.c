/* Forward and backward of the CNN kinds (see layer_conv.c for their shapes and FLOPs):
 * convolution (nn/ops_conv.h), max and average pooling. */
#include "nn/layer_run.h"
#include "nn/ops_conv.h"

static void conv_fwd(ht_model *m, int i, int B, ht_act act) {
    const ht_layer *l = &m->layers[i];
    ht_conv2d_shape s = conv_shape(l, B);
    ht_conv2d_forward(m->dev, ht_model_act(m, i + 1),
                      act != HT_ACT_NONE ? ht_model_act(m, i + 2) : ht_view_none(),
                      ht_model_act(m, i), ht_layer_param(m, l, 0), ht_layer_param(m, l, 1),
                      ht_model_work(m), &s, act);
}

/* part: both halves, the input gradient only (B) or the weight and bias gradients only (W).
 * W recomputes the output gradient's pass (scale * da * act'(y)) from the slot's da and y,
 * which stay there until W runs, as linear's W reads its saved input and dy: nothing more
 * is kept per micro-batch, and the same kernels on the same operands make B then W equal
 * the whole backward bit for bit. */
enum { CONV_BOTH, CONV_B, CONV_W };
static void conv_part(ht_model *m, int i, int B, ht_act act, float scale, int accumulate,
                      int part) {
    const ht_layer *l = &m->layers[i];
    ht_conv2d_shape s = conv_shape(l, B);
    /* fused: the activation's output gradient, act' applied inside (dact i+1 not written) */
    ht_view da = ht_model_dact(m, act != HT_ACT_NONE ? i + 2 : i + 1);
    ht_view dx = i > 0 && part != CONV_W ? ht_model_dact(m, i) : ht_view_none();
    ht_view dw = part != CONV_B ? ht_layer_grad(m, l, 0) : ht_view_none();
    ht_view db = part != CONV_B ? ht_layer_grad(m, l, 1) : ht_view_none();
    ht_conv2d_backward(m->dev, dx, dw, db, da, ht_model_act(m, i + 1), ht_model_act(m, i),
                       ht_layer_param(m, l, 0), ht_model_work(m), &s, act, scale, accumulate);
}

static void conv_bwd(ht_model *m, int i, int B, ht_act act, float scale, int accumulate) {
    conv_part(m, i, B, act, scale, accumulate, CONV_BOTH);
}
static void conv_bwd_in(ht_model *m, int i, int B, ht_act act, float scale, int accumulate) {
    conv_part(m, i, B, act, scale, accumulate, CONV_B);
}
static void conv_bwd_w(ht_model *m, int i, int B, ht_act act, float scale, int accumulate) {
    conv_part(m, i, B, act, scale, accumulate, CONV_W);
}

static void maxpool_fwd(ht_model *m, int i, int B, ht_act unused) {
    ht_pool2d_shape s = pool_shape(&m->layers[i], B);
    ht_maxpool2d_forward(m->dev, ht_model_act(m, i + 1), ht_model_act(m, i), &s);
}

static void maxpool_bwd(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    ht_pool2d_shape s = pool_shape(&m->layers[i], B);
    if (i > 0)
        ht_maxpool2d_backward(m->dev, ht_model_dact(m, i), ht_model_dact(m, i + 1),
                              ht_model_act(m, i), &s);
}

/* No padding (the layer has no pad option), so include_pad = 1, PyTorch's default
 * count_include_pad=True, divides by k*k like include_pad = 0 would. */
static void avgpool_fwd(ht_model *m, int i, int B, ht_act unused) {
    ht_pool2d_shape s = pool_shape(&m->layers[i], B);
    ht_avgpool2d_forward(m->dev, ht_model_act(m, i + 1), ht_model_act(m, i), &s, 1);
}

static void avgpool_bwd(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    ht_pool2d_shape s = pool_shape(&m->layers[i], B);
    if (i > 0) ht_avgpool2d_backward(m->dev, ht_model_dact(m, i), ht_model_dact(m, i + 1), &s, 1);
}

/* The pools have no parameters: a zero-bubble schedule runs their backward in B. */
const ht_layer_run ht_run_conv = {conv_fwd, conv_bwd, conv_bwd_in, conv_bwd_w};
const ht_layer_run ht_run_maxpool = {maxpool_fwd, maxpool_bwd, NULL, NULL};
const ht_layer_run ht_run_avgpool = {avgpool_fwd, avgpool_bwd, NULL, NULL};
