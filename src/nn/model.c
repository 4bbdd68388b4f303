/* The core of a model as a chain of layers: building the chain (parameter layout,
 * activation, saved-state and workspace regions), initialisation, batches, and
 * forward/backward over any contiguous range of layers, pairing a layer with a following
 * activation it can fuse. What a layer does is its kind's business (layer_*.c). */
#include "nn/model.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "nn/layer.h"

/* ---------------------------------------------------------------- shapes */

int ht_shape_count(const ht_shape *s) {
    int n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->d[i];
    return n;
}

ht_shape ht_shape1(int n) { return (ht_shape){1, {n, 0, 0}}; }

void ht_shape_str(const ht_shape *s, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < s->ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%d", i ? "x" : "", s->d[i]);
}

/* ---------------------------------------------------------------- layer metadata */

double ht_layer_flops_forward(const ht_layer *l) { return l->ops->flops_forward(l); }

double ht_layer_flops_backward(const ht_layer *l, int with_dx) {
    return l->ops->flops_backward(l, with_dx);
}

size_t ht_layer_act_bytes(const ht_layer *l) {
    return ((ht_layer_aliases(l) ? 0 : (size_t)l->out) + l->save) * sizeof(float);
}

size_t ht_layer_work_floats(const ht_layer *l, int B) {
    return l->ops->work_floats ? l->ops->work_floats(l, B) : 0;
}

int ht_layer_aliases(const ht_layer *l) { return l->ops && l->ops->aliases; }

int ht_model_fused_with_below(const ht_model *m, int i) {
    if (i <= 0 || i >= m->nlayers) return 0;
    const ht_layer *l = &m->layers[i], *p = &m->layers[i - 1];
    return (l->kind == HT_LAYER_RELU || l->kind == HT_LAYER_GELU) && p->ops && p->ops->fuses_act;
}

/* ---------------------------------------------------------------- building the chain */

void ht_chain_begin(ht_model *m, ht_shape in, int input_tokens) {
    memset(m, 0, sizeof *m);
    m->in_shape = in;
    m->input_tokens = input_tokens;
    m->in_features = ht_shape_count(&in);
    m->rows = 1;
}

ht_shape ht_chain_shape(const ht_model *m) {
    return m->nlayers ? m->layers[m->nlayers - 1].out_shape : m->in_shape;
}

ht_layer *ht_chain_add(ht_model *m, ht_layer_kind kind, const ht_layer_ops *ops, const char *name) {
    if (m->nlayers == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 8;
        m->layers = ht_xrealloc(m->layers, (size_t)m->cap * sizeof *m->layers);
    }
    ht_shape in = ht_chain_shape(m);
    ht_layer *l = &m->layers[m->nlayers++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->ops = ops;
    ht_strlcpy(l->name, name, sizeof l->name);
    l->in_shape = l->out_shape = in;
    l->in = l->out = ht_shape_count(&in);
    l->woff = l->boff = m->nparams;
    return l;
}

size_t ht_layer_tensor(ht_model *m, ht_layer *l, const char *name, int ndim, const int64_t *shape,
                       ht_init_kind init, float a) {
    if (l->ntensors == HT_LAYER_MAX_TENSORS)
        ht_die(HT_ERUNTIME, "layer %s: more than %d parameter tensors", l->name,
               HT_LAYER_MAX_TENSORS);
    ht_param_tensor *t = &l->t[l->ntensors++];
    memset(t, 0, sizeof *t);
    ht_strlcpy(t->name, name, sizeof t->name);
    t->off = m->nparams;
    t->ndim = ndim;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) { /* saturating: SIZE_MAX is refused as too large */
        t->shape[i] = shape[i];
        if (__builtin_mul_overflow(n, (size_t)shape[i], &n)) n = SIZE_MAX;
    }
    t->init = init;
    t->init_a = a;
    if (l->ntensors == 1) l->woff = t->off;
    if (__builtin_add_overflow(l->nparams, n, &l->nparams)) l->nparams = SIZE_MAX;
    if (__builtin_add_overflow(m->nparams, n, &m->nparams)) m->nparams = SIZE_MAX;
    return t->off;
}

static ht_act layer_act(const ht_layer *l) {
    return l->kind == HT_LAYER_RELU   ? HT_ACT_RELU
           : l->kind == HT_LAYER_GELU ? HT_ACT_GELU
                                      : HT_ACT_NONE;
}

int ht_model_check_batch(const ht_model *m, int batch) {
    size_t B = (size_t)batch;
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        size_t w = ht_layer_work_floats(l, batch);
        /* kernels index a batch's tensors with int */
        if (w == SIZE_MAX || B * (size_t)l->out > (size_t)INT_MAX) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", w == SIZE_MAX ? ht_errmsg() : "");
            return ht_error(HT_EINPUT,
                            "layer %s at batch %d: %s%s%zu output values, expected at most "
                            "2^31 - 1 per tensor",
                            l->name, batch, msg, msg[0] ? "; " : "", B * (size_t)l->out);
        }
    }
    return HT_OK;
}

int ht_chain_finish(ht_model *m, ht_dev *d, int classes, int rows, int max_batch) {
    m->classes = classes;
    m->rows = rows;
    m->max_batch = max_batch;
    if (d)
        for (int i = 0; i < m->nlayers; i++)
            if (m->layers[i].ops->needs) {
                int rc = ht_error(HT_EINPUT, "model.type '%s' needs %s (not built yet)", m->type,
                                  m->layers[i].ops->needs);
                ht_model_free(m);
                return rc;
            }

    /* refused here, before any allocation, rather than inside an op after the run started */
    int rc = ht_model_check_batch(m, max_batch);
    if (rc != HT_OK) {
        ht_model_free(m);
        return rc;
    }
    /* activation i: the input of layer i; width[nlayers] is the logits' */
    int n = m->nlayers;
    size_t B = (size_t)max_batch;
    m->width = ht_xcalloc((size_t)n + 1, sizeof *m->width);
    m->act_off = ht_xcalloc((size_t)n + 1, sizeof *m->act_off);
    m->width[0] = m->in_features;
    m->act_floats = B * (size_t)m->width[0];
    for (int i = 0; i < n; i++) {
        ht_layer *l = &m->layers[i];
        m->width[i + 1] = l->out;
        if (ht_layer_aliases(l)) {
            m->act_off[i + 1] = m->act_off[i];
        } else {
            m->act_off[i + 1] = m->act_floats;
            m->act_floats += B * (size_t)l->out;
        }
        l->save_off = m->save_floats;
        m->save_floats += B * l->save;
        size_t w = ht_layer_work_floats(l, max_batch);
        if (w > m->work_floats) m->work_floats = w;
    }
    if (!d) return HT_OK;

    m->dev = d;
    size_t pbytes = m->nparams * sizeof(float), abytes = m->act_floats * sizeof(float);
    size_t nrows = B * (size_t)rows;
    m->params = ht_buf_new(d, pbytes ? pbytes : sizeof(float), "parameters");
    m->grads = ht_buf_new(d, pbytes ? pbytes : sizeof(float), "gradients");
    m->acts = ht_buf_new(d, abytes, "activations");
    m->dacts = ht_buf_new(d, abytes, "activation gradients");
    m->saved = ht_buf_new(d, (m->save_floats ? m->save_floats : 1) * sizeof(float), "saved state");
    m->work = ht_buf_new(d, (m->work_floats ? m->work_floats : 1) * sizeof(float), "workspace");
    m->labels = ht_buf_new(d, nrows * sizeof(int32_t), "labels");
    m->losses = ht_buf_new(d, nrows * sizeof(float), "losses");
    m->correct = ht_buf_new(d, nrows * sizeof(int32_t), "correct flags");
    if (pbytes) ht_buf_zero(d, m->grads, 0, pbytes);
    m->host_loss = ht_xmalloc(nrows * sizeof(float));
    m->host_correct = ht_xmalloc(nrows * sizeof(int32_t));
    return HT_OK;
}

void ht_model_free(ht_model *m) {
    if (m->dev) {
        ht_buf *bufs[] = {m->params, m->grads,  m->acts,   m->dacts,  m->saved,
                          m->work,   m->labels, m->losses, m->correct};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            if (bufs[i]) ht_buf_free(bufs[i]);
    }
    free(m->layers);
    free(m->width);
    free(m->act_off);
    free(m->host_loss);
    free(m->host_correct);
    memset(m, 0, sizeof *m);
}

void ht_model_init_params(ht_model *m, uint64_t seed) {
    if (!m->nparams) return;
    float *p = ht_xmalloc(m->nparams * sizeof(float));
    uint64_t stream = ht_rng_stream(seed, 0x1a17 /* "init" */);
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        for (int j = 0; j < l->ntensors; j++) {
            const ht_param_tensor *t = &l->t[j];
            if (t->tied) continue; /* initialised as the tensor it shares */
            size_t n = 1;
            for (int k = 0; k < t->ndim; k++)
                n *= (size_t)t->shape[k];
            for (size_t k = t->off; k < t->off + n; k++) {
                if (t->init == HT_INIT_UNIFORM)
                    p[k] = (2.0f * ht_rng_uniform(stream, k) - 1.0f) * t->init_a;
                else if (t->init == HT_INIT_NORMAL)
                    p[k] = ht_rng_normal(stream, k) * t->init_a;
                else
                    p[k] = t->init_a;
            }
        }
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

static void check_labels(const ht_model *m, const int32_t *y, int B, const char *what) {
    size_t n = (size_t)B * (size_t)m->rows;
    for (size_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= m->classes) {
            if (m->rows == 1)
                ht_die(HT_EINPUT, "label %d of sample %zu in the batch is outside [0, %d)",
                       (int)y[i], i, m->classes);
            ht_die(HT_EINPUT, "%s %d at sample %zu, position %zu of the batch is outside [0, %d)",
                   what, (int)y[i], i / (size_t)m->rows, i % (size_t)m->rows, m->classes);
        }
}

void ht_model_set_batch(ht_model *m, const float *x, const int32_t *y, int B) {
    check_batch(m, B, "ht_model_set_batch");
    if (m->input_tokens)
        ht_die(HT_ERUNTIME,
               "ht_model_set_batch: this %s model reads tokens "
               "(ht_model_set_batch_tokens)",
               m->type);
    check_labels(m, y, B, "label");
    ht_buf_write(m->dev, m->acts, m->act_off[0] * sizeof(float),
                 (size_t)B * (size_t)m->in_features * sizeof(float), x);
    ht_buf_write(m->dev, m->labels, 0, (size_t)B * (size_t)m->rows * sizeof(int32_t), y);
}

void ht_model_set_batch_tokens(ht_model *m, const int32_t *tokens, const int32_t *targets, int B) {
    check_batch(m, B, "ht_model_set_batch_tokens");
    if (!m->input_tokens)
        ht_die(HT_ERUNTIME, "ht_model_set_batch_tokens: this %s model reads floats", m->type);
    size_t n = (size_t)B * (size_t)m->in_features;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->classes)
            ht_die(HT_EINPUT,
                   "token %d at sample %zu, position %zu of the batch is outside "
                   "[0, %d)",
                   (int)tokens[i], i / (size_t)m->in_features, i % (size_t)m->in_features,
                   m->classes);
    /* int32 bits in the float activation buffer: the embedding reads them as int */
    ht_buf_write(m->dev, m->acts, m->act_off[0] * sizeof(float), n * sizeof(int32_t), tokens);
    if (!targets) return;
    check_labels(m, targets, B, "target");
    ht_buf_write(m->dev, m->labels, 0, (size_t)B * (size_t)m->rows * sizeof(int32_t), targets);
}

void ht_model_set_training(ht_model *m, int on, uint64_t seed, int64_t step) {
    m->training = on;
    m->dropout_seed = seed;
    m->dropout_step = (uint64_t)step;
}

void ht_model_set_row_offset(ht_model *m, int64_t first_row) {
    if (first_row < 0) ht_die(HT_ERUNTIME, "nn: row offset %lld < 0", (long long)first_row);
    m->dropout_row0 = first_row;
}

uint64_t ht_model_dropout_seed(const ht_model *m, int i, int site) {
    return ht_rng_stream(m->dropout_seed, 0xd0000000ull + 16ull * (uint64_t)i + (uint64_t)site);
}

/* ---------------------------------------------------------------- views */

static void check_range(const ht_model *m, int lo, int hi, const char *what) {
    if (lo < 0 || lo > hi || hi > m->nlayers)
        ht_die(HT_ERUNTIME, "%s: layer range [%d, %d) outside [0, %d]", what, lo, hi, m->nlayers);
}

ht_view ht_model_act(const ht_model *m, int i) { return ht_view_at(m->acts, m->act_off[i]); }
ht_view ht_model_dact(const ht_model *m, int i) { return ht_view_at(m->dacts, m->act_off[i]); }
ht_view ht_model_saved(const ht_model *m, int i) {
    return ht_view_at(m->saved, m->layers[i].save_off);
}
ht_view ht_model_work(const ht_model *m) { return ht_view_at(m->work, 0); }

/* A tensor the layer lacks (a linear layer without bias) is no view: the ops skip it. */
ht_view ht_layer_param(const ht_model *m, const ht_layer *l, int j) {
    return j < l->ntensors ? ht_view_at(m->params, l->t[j].off) : ht_view_none();
}
ht_view ht_layer_grad(const ht_model *m, const ht_layer *l, int j) {
    return j < l->ntensors ? ht_view_at(m->grads, l->t[j].off) : ht_view_none();
}

/* ---------------------------------------------------------------- forward */

/* With a layer hook: the queue idle before a timed piece (returns its start), and finished
 * and reported after it. */
static double hook_start(ht_model *m) {
    if (!m->layer_hook) return 0;
    ht_dev_finish(m->dev);
    return ht_now();
}
static void hook_end(ht_model *m, int layer, int n, int kind, double t0) {
    if (!m->layer_hook) return;
    ht_dev_finish(m->dev);
    m->layer_hook(m->layer_hook_ctx, layer, n, kind, t0, ht_now());
}

void ht_model_forward_range(ht_model *m, int lo, int hi, int B) {
    check_batch(m, B, "ht_model_forward_range");
    check_range(m, lo, hi, "ht_model_forward_range");
    for (int i = lo; i < hi;) {
        const ht_layer *l = &m->layers[i];
        ht_act a = i + 1 < hi && ht_model_fused_with_below(m, i + 1) ? layer_act(&m->layers[i + 1])
                                                                       : HT_ACT_NONE;
        double t0 = hook_start(m);
        l->ops->forward(m, i, B, a);
        hook_end(m, i, a != HT_ACT_NONE ? 2 : 1, 0, t0);
        i += a != HT_ACT_NONE ? 2 : 1;
    }
}

void ht_model_loss_forward(ht_model *m, int B, int with_grad) {
    check_batch(m, B, "ht_model_loss_forward");
    int n = m->nlayers;
    double t0 = hook_start(m);
    /* grad_scale 1 here: the caller's scale is applied by backward on the GEMM alpha */
    ht_softmax_xent_watch(m->dev, ht_view_at(m->losses, 0), ht_view_at(m->correct, 0),
                          with_grad ? ht_model_dact(m, n) : ht_view_none(), ht_model_act(m, n),
                          ht_view_at(m->labels, 0), B * m->rows, m->classes, 1.0f,
                          with_grad ? m->watch : NULL, m->watch_step);
    hook_end(m, n, 0, 2, t0);
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
        /* an activation whose producer is in the range runs inside the producer's backward */
        int j = i;
        ht_act a = HT_ACT_NONE;
        if (i - 1 >= lo && ht_model_fused_with_below(m, i)) {
            j = i - 1;
            a = layer_act(&m->layers[i]);
        }
        const ht_layer *l = &m->layers[j];
        if (s != 1.0f && !l->ops->scales) {
            /* the top layer cannot fold the scale in: scale its incoming gradient in place */
            ht_scale(m->dev, ht_model_dact(m, i + 1), (size_t)B * (size_t)m->width[i + 1], s);
            s = 1.0f;
        }
        double t0 = hook_start(m);
        l->ops->backward(m, j, B, a, s, accumulate);
        hook_end(m, j, i - j + 1, 1, t0);
        i = j - 1;
    }
}

void ht_model_backward(ht_model *m, int B, float grad_scale) {
    ht_model_backward_range(m, 0, m->nlayers, B, grad_scale, 0);
}

/* ---------------------------------------------------------------- readback, metadata */

void ht_model_loss(ht_model *m, int B, double *loss_sum, int *correct) {
    check_batch(m, B, "ht_model_loss");
    size_t n = (size_t)B * (size_t)m->rows;
    ht_buf_read(m->dev, m->losses, 0, n * sizeof(float), m->host_loss);
    ht_buf_read(m->dev, m->correct, 0, n * sizeof(int32_t), m->host_correct);
    double s = 0;
    int c = 0;
    for (size_t i = 0; i < n; i++) {
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
        for (int j = 0; j < l->ntensors; j++) {
            if (l->t[j].tied) continue; /* saved once, as the tensor it shares */
            if (n < max) {
                out[n] = l->t[j];
                snprintf(out[n].name, sizeof out[n].name, "%s.%s", l->name, l->t[j].name);
            }
            n++;
        }
    }
    return n;
}

double ht_model_flops_per_sample(const ht_model *m) {
    double f = 0;
    for (int i = 0; i < m->nlayers; i++)
        f += ht_layer_flops_forward(&m->layers[i]) + ht_layer_flops_backward(&m->layers[i], i > 0);
    return f;
}

void ht_model_print(const ht_model *m, FILE *f) {
    char in[32], out[32];
    ht_shape_str(&m->in_shape, in, sizeof in);
    fprintf(f, "model %s: input %s%s, %zu parameters, %.3g FLOPs per sample (fwd+bwd)\n", m->desc,
            in, m->input_tokens ? " tokens" : "", m->nparams, ht_model_flops_per_sample(m));
    fprintf(f, "  %-3s %-10s %-9s %-14s %12s %12s %12s\n", "#", "name", "kind", "output", "params",
            "fwd FLOPs", "act bytes");
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        ht_shape_str(&l->out_shape, out, sizeof out);
        fprintf(f, "  %-3d %-10s %-9s %-14s %12zu %12.4g %12zu\n", i, l->name, l->ops->kind, out,
                l->nparams, ht_layer_flops_forward(l), ht_layer_act_bytes(l));
    }
}
