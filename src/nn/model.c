/* Models as chains of layers: construction (MLP), parameter layout and initialisation,
 * and forward/backward over any contiguous range of layers. A linear layer followed by
 * its activation runs fused (bias + activation in one pass; activation backward + bias
 * gradient in one pass) when both are in the range. */
#include "nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/rng.h"

/* ---------------------------------------------------------------- layers */

static ht_act layer_act(const ht_layer *l) {
    return l->kind == HT_LAYER_RELU   ? HT_ACT_RELU
           : l->kind == HT_LAYER_GELU ? HT_ACT_GELU
                                      : HT_ACT_NONE;
}

double ht_layer_flops_forward(const ht_layer *l) {
    if (l->kind == HT_LAYER_LINEAR) return 2.0 * l->in * l->out + l->out;
    return (double)l->out;
}

double ht_layer_flops_backward(const ht_layer *l, int with_dx) {
    if (l->kind == HT_LAYER_LINEAR) /* dW GEMM, db sums, dx GEMM */
        return 2.0 * l->in * l->out + l->out + (with_dx ? 2.0 * l->in * l->out : 0.0);
    return with_dx ? (double)l->out : 0.0;
}

size_t ht_layer_act_bytes(const ht_layer *l) { return (size_t)l->out * sizeof(float); }

/* ---------------------------------------------------------------- construction */

static void add_layer(ht_model *m, ht_layer_kind kind, const char *name, int in, int out) {
    ht_layer *l = &m->layers[m->nlayers++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    ht_strlcpy(l->name, name, sizeof l->name);
    l->in = in;
    l->out = out;
    if (kind == HT_LAYER_LINEAR) {
        l->woff = m->nparams;
        l->boff = l->woff + (size_t)out * (size_t)in;
        l->nparams = (size_t)out * (size_t)in + (size_t)out;
        m->nparams += l->nparams;
    }
}

int ht_model_mlp(ht_model *m, ht_dev *d, int in_features, const int *hidden, int nhidden,
                 int classes, const char *activation, int max_batch) {
    memset(m, 0, sizeof *m);
    int act = ht_act_parse(activation);
    if (act <= HT_ACT_NONE && nhidden > 0)
        return ht_error(HT_EINPUT, "model: activation '%s' is not one of relu, gelu",
                        activation ? activation : "");
    if (in_features <= 0 || classes <= 0 || max_batch <= 0 || nhidden < 0 || (nhidden && !hidden))
        return ht_error(HT_EINPUT,
                        "model: need in_features > 0, classes > 0, batch > 0 (got %d, %d, %d)",
                        in_features, classes, max_batch);
    for (int i = 0; i < nhidden; i++)
        if (hidden[i] <= 0)
            return ht_error(HT_EINPUT, "model: hidden layer %d has width %d (must be > 0)", i + 1,
                            hidden[i]);
    m->dev = d;
    m->in_features = in_features;
    m->classes = classes;
    m->max_batch = max_batch;
    m->layers = ht_xcalloc((size_t)(2 * nhidden + 1), sizeof *m->layers);
    char name[32];
    int in = in_features;
    for (int i = 0; i < nhidden; i++) {
        snprintf(name, sizeof name, "fc%d", i + 1);
        add_layer(m, HT_LAYER_LINEAR, name, in, hidden[i]);
        snprintf(name, sizeof name, "%s%d", ht_act_name((ht_act)act), i + 1);
        add_layer(m, act == HT_ACT_RELU ? HT_LAYER_RELU : HT_LAYER_GELU, name, hidden[i],
                  hidden[i]);
        in = hidden[i];
    }
    snprintf(name, sizeof name, "fc%d", nhidden + 1);
    add_layer(m, HT_LAYER_LINEAR, name, in, classes);

    /* activations: width[i] is the input width of layer i, width[nlayers] the logits' */
    m->width = ht_xcalloc((size_t)m->nlayers + 1, sizeof *m->width);
    m->act_off = ht_xcalloc((size_t)m->nlayers + 1, sizeof *m->act_off);
    m->width[0] = in_features;
    for (int i = 0; i < m->nlayers; i++)
        m->width[i + 1] = m->layers[i].out;
    for (int i = 0; i <= m->nlayers; i++) {
        m->act_off[i] = m->act_floats;
        m->act_floats += (size_t)max_batch * (size_t)m->width[i];
    }

    size_t pbytes = m->nparams * sizeof(float), abytes = m->act_floats * sizeof(float);
    m->params = ht_buf_new(d, pbytes, "parameters");
    m->grads = ht_buf_new(d, pbytes, "gradients");
    m->acts = ht_buf_new(d, abytes, "activations");
    m->dacts = ht_buf_new(d, abytes, "activation gradients");
    m->labels = ht_buf_new(d, (size_t)max_batch * sizeof(int32_t), "labels");
    m->losses = ht_buf_new(d, (size_t)max_batch * sizeof(float), "losses");
    m->correct = ht_buf_new(d, (size_t)max_batch * sizeof(int32_t), "correct flags");
    ht_buf_zero(d, m->grads, 0, pbytes);
    m->host_loss = ht_xmalloc((size_t)max_batch * sizeof(float));
    m->host_correct = ht_xmalloc((size_t)max_batch * sizeof(int32_t));
    return HT_OK;
}

void ht_model_free(ht_model *m) {
    if (!m->dev) return;
    ht_buf_free(m->params);
    ht_buf_free(m->grads);
    ht_buf_free(m->acts);
    ht_buf_free(m->dacts);
    ht_buf_free(m->labels);
    ht_buf_free(m->losses);
    ht_buf_free(m->correct);
    free(m->layers);
    free(m->width);
    free(m->act_off);
    free(m->host_loss);
    free(m->host_correct);
    memset(m, 0, sizeof *m);
}

void ht_model_init_params(ht_model *m, uint64_t seed) {
    float *p = ht_xmalloc(m->nparams * sizeof(float));
    uint64_t stream = ht_rng_stream(seed, 0x1a17 /* "init" */);
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        if (l->kind != HT_LAYER_LINEAR) continue;
        float bound = 1.0f / sqrtf((float)l->in);
        for (size_t k = l->woff; k < l->woff + l->nparams; k++)
            p[k] = (2.0f * ht_rng_uniform(stream, k) - 1.0f) * bound;
    }
    ht_buf_write(m->dev, m->params, 0, m->nparams * sizeof(float), p);
    free(p);
}

/* ---------------------------------------------------------------- batches */

static void check_batch(const ht_model *m, int B, const char *what) {
    if (B < 1 || B > m->max_batch)
        ht_die(HT_ERUNTIME, "%s: batch %d outside [1, %d] (the model's max_batch)", what, B,
               m->max_batch);
}

void ht_model_set_batch(ht_model *m, const float *x, const int32_t *y, int B) {
    check_batch(m, B, "ht_model_set_batch");
    for (int i = 0; i < B; i++)
        if (y[i] < 0 || y[i] >= m->classes)
            ht_die(HT_EINPUT, "label %d of sample %d in the batch is outside [0, %d)", (int)y[i], i,
                   m->classes);
    ht_buf_write(m->dev, m->acts, m->act_off[0] * sizeof(float),
                 (size_t)B * (size_t)m->in_features * sizeof(float), x);
    ht_buf_write(m->dev, m->labels, 0, (size_t)B * sizeof(int32_t), y);
}

static void check_range(const ht_model *m, int lo, int hi, const char *what) {
    if (lo < 0 || lo > hi || hi > m->nlayers)
        ht_die(HT_ERUNTIME, "%s: layer range [%d, %d) outside [0, %d]", what, lo, hi, m->nlayers);
}

ht_view ht_model_act(const ht_model *m, int i) { return ht_view_at(m->acts, m->act_off[i]); }
ht_view ht_model_dact(const ht_model *m, int i) { return ht_view_at(m->dacts, m->act_off[i]); }

/* ---------------------------------------------------------------- forward */

static int is_act(const ht_layer *l) { return l->kind != HT_LAYER_LINEAR; }

void ht_model_forward_range(ht_model *m, int lo, int hi, int B) {
    check_batch(m, B, "ht_model_forward_range");
    check_range(m, lo, hi, "ht_model_forward_range");
    for (int i = lo; i < hi;) {
        const ht_layer *l = &m->layers[i];
        if (!is_act(l)) {
            ht_view w = ht_view_at(m->params, l->woff), b = ht_view_at(m->params, l->boff);
            if (i + 1 < hi && is_act(&m->layers[i + 1])) {
                ht_linear_act_forward(m->dev, ht_model_act(m, i + 1), ht_model_act(m, i + 2),
                                      ht_model_act(m, i), w, b, B, l->in, l->out,
                                      layer_act(&m->layers[i + 1]));
                i += 2;
            } else {
                ht_linear_forward(m->dev, ht_model_act(m, i + 1), ht_model_act(m, i), w, b, B,
                                  l->in, l->out);
                i++;
            }
        } else {
            ht_act_forward(m->dev, layer_act(l), ht_model_act(m, i + 1), ht_model_act(m, i),
                           (size_t)B * (size_t)l->out);
            i++;
        }
    }
}

void ht_model_loss_forward(ht_model *m, int B, int with_grad) {
    check_batch(m, B, "ht_model_loss_forward");
    int n = m->nlayers;
    /* grad_scale 1 here: the caller's scale is applied by backward on the GEMM alpha */
    ht_softmax_xent(m->dev, ht_view_at(m->losses, 0), ht_view_at(m->correct, 0),
                    with_grad ? ht_model_dact(m, n) : ht_view_none(), ht_model_act(m, n),
                    ht_view_at(m->labels, 0), B, m->classes, 1.0f);
}

void ht_model_forward(ht_model *m, int B, int with_grad) {
    ht_model_forward_range(m, 0, m->nlayers, B);
    ht_model_loss_forward(m, B, with_grad);
}

/* ---------------------------------------------------------------- backward */

void ht_model_backward_range(ht_model *m, int lo, int hi, int B, float grad_scale, int accumulate) {
    check_batch(m, B, "ht_model_backward_range");
    check_range(m, lo, hi, "ht_model_backward_range");
    float s = grad_scale;
    for (int i = hi - 1; i >= lo; s = 1.0f) {
        const ht_layer *l = &m->layers[i];
        if (is_act(l) && i - 1 >= lo && !is_act(&m->layers[i - 1])) {
            /* activation i after linear i-1: one pass for act' and the bias sums */
            const ht_layer *f = &m->layers[i - 1];
            ht_view dx = i - 1 > 0 ? ht_model_dact(m, i - 1) : ht_view_none();
            ht_linear_act_backward(m->dev, dx, ht_view_at(m->grads, f->woff),
                                   ht_view_at(m->grads, f->boff), ht_model_dact(m, i),
                                   ht_model_dact(m, i + 1), ht_model_act(m, i),
                                   ht_model_act(m, i - 1), ht_view_at(m->params, f->woff), B, f->in,
                                   f->out, layer_act(l), s, accumulate);
            i -= 2;
        } else if (!is_act(l)) {
            ht_view dx = i > 0 ? ht_model_dact(m, i) : ht_view_none();
            ht_linear_backward(m->dev, dx, ht_view_at(m->grads, l->woff),
                               ht_view_at(m->grads, l->boff), ht_model_dact(m, i + 1),
                               ht_model_act(m, i), ht_view_at(m->params, l->woff), B, l->in, l->out,
                               s, accumulate);
            i--;
        } else {
            if (i > 0)
                ht_act_backward(m->dev, layer_act(l), ht_model_dact(m, i), ht_model_dact(m, i + 1),
                                ht_model_act(m, i), (size_t)B * (size_t)l->out, s);
            i--;
        }
    }
}

void ht_model_backward(ht_model *m, int B, float grad_scale) {
    ht_model_backward_range(m, 0, m->nlayers, B, grad_scale, 0);
}

/* ---------------------------------------------------------------- readback, metadata */

void ht_model_loss(ht_model *m, int B, double *loss_sum, int *correct) {
    check_batch(m, B, "ht_model_loss");
    ht_buf_read(m->dev, m->losses, 0, (size_t)B * sizeof(float), m->host_loss);
    ht_buf_read(m->dev, m->correct, 0, (size_t)B * sizeof(int32_t), m->host_correct);
    double s = 0;
    int c = 0;
    for (int i = 0; i < B; i++) {
        s += m->host_loss[i];
        c += m->host_correct[i] == 1;
    }
    if (loss_sum) *loss_sum = s;
    if (correct) *correct = c;
}

int ht_model_param_tensors(const ht_model *m, ht_param_tensor *out, int max) {
    int n = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        if (l->kind != HT_LAYER_LINEAR) continue;
        if (n < max) {
            ht_param_tensor *t = &out[n];
            snprintf(t->name, sizeof t->name, "%s.weight", l->name);
            t->off = l->woff;
            t->ndim = 2;
            t->shape[0] = l->out;
            t->shape[1] = l->in;
        }
        n++;
        if (n < max) {
            ht_param_tensor *t = &out[n];
            snprintf(t->name, sizeof t->name, "%s.bias", l->name);
            t->off = l->boff;
            t->ndim = 1;
            t->shape[0] = l->out;
            t->shape[1] = 0;
        }
        n++;
    }
    return n;
}

double ht_model_flops_per_sample(const ht_model *m) {
    double f = 0;
    for (int i = 0; i < m->nlayers; i++)
        f += ht_layer_flops_forward(&m->layers[i]) + ht_layer_flops_backward(&m->layers[i], i > 0);
    return f;
}
