/* Layer kinds of an MLP: linear (over the last dimension, so a GPT head applies it per
 * position), ReLU/GELU, and flatten (a reinterpretation that shares its input's region).
 * A linear layer runs a following activation in its own bias pass (fuses_act). */
#include <math.h>
#include <stdio.h>

#include "core/err.h"
#include "nn/layer.h"

/* ---------------------------------------------------------------- linear */

static double linear_flops_fwd(const ht_layer *l) {
    double fin = lin_fin(l), fout = lin_fout(l);
    return lin_rows(l) * (2.0 * fin * fout + fout);
}

static double linear_flops_bwd(const ht_layer *l, int with_dx) {
    double fin = lin_fin(l), fout = lin_fout(l); /* dW GEMM, db sums, dx GEMM */
    return lin_rows(l) * (2.0 * fin * fout + fout + (with_dx ? 2.0 * fin * fout : 0.0));
}

const ht_layer_ops ht_ops_linear = {
    .kind = "linear",
    .flops_forward = linear_flops_fwd,
    .flops_backward = linear_flops_bwd,
    .fuses_act = 1,
    .scales = 1,
};

int ht_layer_add_linear(ht_model *m, const char *name, int out, int gpt_init, float std,
                        const char *what) {
    ht_shape in = ht_chain_shape(m);
    char s[32];
    ht_shape_str(&in, s, sizeof s);
    if (in.ndim > 2)
        return ht_error(HT_EINPUT,
                        "%s: the input is %s (C,H,W); add \"flatten\" before a linear "
                        "layer",
                        what, s);
    if (out < 1) return ht_error(HT_EINPUT, "%s: %d outputs (must be >= 1)", what, out);
    ht_layer *l = ht_chain_add(m, HT_LAYER_LINEAR, &ht_ops_linear, name);
    int fin = in.d[in.ndim - 1];
    l->out_shape.d[in.ndim - 1] = out;
    l->out = ht_shape_count(&l->out_shape);
    int64_t ws[2] = {out, fin}, bs[1] = {out};
    /* PyTorch's nn.Linear: kaiming_uniform(a = sqrt(5)) gives bound 1/sqrt(fan_in), and
     * the bias takes the same bound; GPT-2: N(0, std), bias 0 */
    float bound = 1.0f / sqrtf((float)fin);
    ht_layer_tensor(m, l, "weight", 2, ws, gpt_init ? HT_INIT_NORMAL : HT_INIT_UNIFORM,
                    gpt_init ? std : bound);
    l->boff = ht_layer_tensor(m, l, "bias", 1, bs, gpt_init ? HT_INIT_CONST : HT_INIT_UNIFORM,
                              gpt_init ? 0.0f : bound);
    return HT_OK;
}

int ht_layer_add_linear_tied(ht_model *m, const char *name, const ht_param_tensor *w,
                             const char *what) {
    ht_param_tensor wt = *w; /* copied before the append moves the layers */
    ht_shape in = ht_chain_shape(m);
    if (wt.ndim != 2 || in.ndim < 1 || in.d[in.ndim - 1] != wt.shape[1])
        return ht_error(HT_EINPUT, "%s: a tied weight (%lld,%lld) does not take a %d-wide input",
                        what, (long long)wt.shape[0], (long long)wt.shape[1],
                        in.ndim ? in.d[in.ndim - 1] : 0);
    ht_layer *l = ht_chain_add(m, HT_LAYER_LINEAR, &ht_ops_linear, name);
    l->out_shape.d[in.ndim - 1] = (int)wt.shape[0];
    l->out = ht_shape_count(&l->out_shape);
    ht_param_tensor *t = &l->t[l->ntensors++];
    *t = wt;
    ht_strlcpy(t->name, "weight", sizeof t->name);
    t->tied = 1; /* no bias, as GPT-2's head: the layer owns no parameters (woff, nparams 0) */
    return HT_OK;
}

/* ---------------------------------------------------------------- activations */

static double act_flops_fwd(const ht_layer *l) { return (double)l->out; }
static double act_flops_bwd(const ht_layer *l, int with_dx) {
    return with_dx ? (double)l->out : 0.0;
}

const ht_layer_ops ht_ops_relu = {
    .kind = "relu",
    .flops_forward = act_flops_fwd,
    .flops_backward = act_flops_bwd,
    .scales = 1,
};
const ht_layer_ops ht_ops_gelu = {
    .kind = "gelu",
    .flops_forward = act_flops_fwd,
    .flops_backward = act_flops_bwd,
    .scales = 1,
};

int ht_layer_add_act(ht_model *m, const char *name, ht_act act, const char *what) {
    if (act != HT_ACT_RELU && act != HT_ACT_GELU)
        return ht_error(HT_EINPUT, "%s: activation must be relu or gelu", what);
    ht_chain_add(m, act == HT_ACT_RELU ? HT_LAYER_RELU : HT_LAYER_GELU,
                 act == HT_ACT_RELU ? &ht_ops_relu : &ht_ops_gelu, name);
    return HT_OK;
}

/* ---------------------------------------------------------------- flatten */

static double zero_flops_fwd(const ht_layer *l) { return 0.0; }
static double zero_flops_bwd(const ht_layer *l, int with_dx) { return 0.0; }
const ht_layer_ops ht_ops_flatten = {
    .kind = "flatten",
    .flops_forward = zero_flops_fwd,
    .flops_backward = zero_flops_bwd,
    .aliases = 1,
};

int ht_layer_add_flatten(ht_model *m, const char *name, const char *what) {
    ht_layer *l = ht_chain_add(m, HT_LAYER_FLATTEN, &ht_ops_flatten, name);
    l->out_shape = ht_shape1(l->in);
    return HT_OK;
}
