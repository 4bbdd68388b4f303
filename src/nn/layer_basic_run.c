/* Forward and backward of the MLP kinds (see layer_basic.c for their shapes and FLOPs):
 * linear (fusing a following activation into its bias pass), ReLU/GELU, flatten. */
#include "nn/layer_run.h"

static void linear_fwd(ht_model *m, int i, int B, ht_act act) {
    const ht_layer *l = &m->layers[i];
    int rows = B * lin_rows(l);
    ht_view w = ht_layer_param(m, l, 0), b = ht_layer_param(m, l, 1);
    if (act != HT_ACT_NONE)
        ht_linear_act_forward(m->dev, ht_model_act(m, i + 1), ht_model_act(m, i + 2),
                              ht_model_act(m, i), w, b, rows, lin_fin(l), lin_fout(l), act);
    else
        ht_linear_forward(m->dev, ht_model_act(m, i + 1), ht_model_act(m, i), w, b, rows,
                          lin_fin(l), lin_fout(l));
}

static void linear_bwd(ht_model *m, int i, int B, ht_act act, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    int rows = B * lin_rows(l);
    ht_view dx = i > 0 ? ht_model_dact(m, i) : ht_view_none();
    ht_view w = ht_layer_param(m, l, 0), dw = ht_layer_grad(m, l, 0), db = ht_layer_grad(m, l, 1);
    if (act != HT_ACT_NONE) /* act' and the bias sums in one pass, then the GEMMs */
        ht_linear_act_backward(m->dev, dx, dw, db, ht_model_dact(m, i + 1), ht_model_dact(m, i + 2),
                               ht_model_act(m, i + 1), ht_model_act(m, i), w, rows, lin_fin(l),
                               lin_fout(l), act, scale, accumulate);
    else
        ht_linear_backward(m->dev, dx, dw, db, ht_model_dact(m, i + 1), ht_model_act(m, i), w, rows,
                           lin_fin(l), lin_fout(l), scale, accumulate);
}

static void linear_bwd_in(ht_model *m, int i, int B, ht_act act, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    int rows = B * lin_rows(l);
    ht_view dx = i > 0 ? ht_model_dact(m, i) : ht_view_none(), w = ht_layer_param(m, l, 0);
    if (act != HT_ACT_NONE)
        ht_linear_act_backward_input(m->dev, dx, ht_layer_grad(m, l, 1), ht_model_dact(m, i + 1),
                                     ht_model_dact(m, i + 2), ht_model_act(m, i + 1), w, rows,
                                     lin_fin(l), lin_fout(l), act, scale, accumulate);
    else
        ht_linear_backward_input(m->dev, dx, ht_model_dact(m, i + 1), w, rows, lin_fin(l),
                                 lin_fout(l), scale);
}

/* W: dW from the saved input and dy; with a fused activation dy is the pre-activation's
 * gradient B wrote (scale already in it) and db was summed in B's pass */
static void linear_bwd_w(ht_model *m, int i, int B, ht_act act, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    const int fused = act != HT_ACT_NONE;
    ht_linear_backward_weights(m->dev, ht_layer_grad(m, l, 0),
                               fused ? ht_view_none() : ht_layer_grad(m, l, 1),
                               ht_model_dact(m, i + 1), ht_model_act(m, i), B * lin_rows(l),
                               lin_fin(l), lin_fout(l), fused ? 1.0f : scale, accumulate);
}

static void act_fwd(ht_model *m, int i, int B, ht_act unused) {
    const ht_layer *l = &m->layers[i];
    ht_act_forward(m->dev, act_of(l), ht_model_act(m, i + 1), ht_model_act(m, i),
                   (size_t)B * (size_t)l->out);
}

static void act_bwd(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    if (i > 0)
        ht_act_backward(m->dev, act_of(l), ht_model_dact(m, i), ht_model_dact(m, i + 1),
                        ht_model_act(m, i), (size_t)B * (size_t)l->out, scale);
}

/* NCHW (B,C,H,W) already is the (B, C*H*W) matrix: the output shares the input's region */
static void flatten_fwd(ht_model *m, int i, int B, ht_act a) {}

static void flatten_bwd(ht_model *m, int i, int B, ht_act a, float s, int acc) {}

const ht_layer_run ht_run_linear = {linear_fwd, linear_bwd, linear_bwd_in, linear_bwd_w};
/* no parameters: the whole backward is B (NULL halves) */
const ht_layer_run ht_run_act = {act_fwd, act_bwd, NULL, NULL};
const ht_layer_run ht_run_flatten = {flatten_fwd, flatten_bwd, NULL, NULL};
