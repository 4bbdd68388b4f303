/* The core of a model as a chain of layers, the pure part: building the chain (parameter
 * layout, activation, saved-state and workspace regions), the cut rule, FLOPs and metadata.
 * The buffers, batches and forward/backward are model_run.c's; what a layer does is its
 * kind's business (layer_*.c). */
#include "nn/model.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
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

double ht_layer_flops_weights(const ht_layer *l) {
    return l->ops->flops_weights ? l->ops->flops_weights(l) : l->ops->flops_backward(l, 0);
}

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

int ht_chain_finish(ht_model *m, int classes, int rows, int max_batch) {
    m->classes = classes;
    m->rows = rows;
    m->max_batch = max_batch;
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
    return HT_OK;
}

void ht_model_keep_bw_layout(ht_model *m) {
    if (m->keep_bw) return;
    m->keep_bw = 1;
    const size_t B = (size_t)m->max_batch;
    m->save_floats = 0;
    for (int i = 0; i < m->nlayers; i++) {
        ht_layer *l = &m->layers[i];
        if (l->ops->save_bw) l->save += l->ops->save_bw(l);
        l->save_off = m->save_floats;
        m->save_floats += B * l->save;
    }
}

void ht_model_stage_floats(const ht_model *m, int lo, int hi, int B, size_t *act, size_t *save,
                           size_t *work) {
    const size_t b = (size_t)B;
    *act = b * (size_t)m->width[lo], *save = 0, *work = 0;
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &m->layers[i];
        if (!ht_layer_aliases(l)) *act += b * (size_t)l->out;
        *save += b * l->save;
        size_t w = ht_layer_work_floats(l, B);
        if (w > *work) *work = w;
    }
    if (lo > 0) *act += b * (size_t)m->width[0];
}

void ht_model_free(ht_model *m) {
    if (m->release) m->release(m);
    free(m->layers);
    free(m->width);
    free(m->act_off);
    free(m->host_loss);
    free(m->host_correct);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- batches */

void ht_model_set_training(ht_model *m, int on, uint64_t seed, int64_t step) {
    m->training = on;
    m->dropout_seed = seed;
    m->dropout_step = (uint64_t)step;
}

void ht_model_set_row_offset(ht_model *m, int64_t first_row) {
    if (first_row < 0) ht_die(HT_ERUNTIME, "nn: row offset %lld < 0", (long long)first_row);
    m->dropout_row0 = first_row;
}

/* ---------------------------------------------------------------- views */

/* ---------------------------------------------------------------- forward */

/* ---------------------------------------------------------------- backward */

/* ---------------------------------------------------------------- readback, metadata */

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

/* ---------------------------------------------------------------- a stage's windows */

/* [off, off + n) ∩ [lo, lo + len) into dst (dst[0] is layout float lo); 1 when not empty. */
static int put_part(size_t off, size_t n, const float *src, size_t lo, size_t len, float *dst) {
    const size_t a = off > lo ? off : lo, b = off + n < lo + len ? off + n : lo + len;
    if (a >= b) return 0;
    memcpy(dst + (a - lo), src + (a - off), (b - a) * sizeof(float));
    return 1;
}

int ht_model_put(const ht_model *m, size_t off, size_t n, const float *src, float *host) {
    int any = 0;
    for (int w = 0; w < m->nwin; w++)
        any |= put_part(off, n, src, m->win[w].base, m->win[w].n, host + m->win[w].at);
    return any;
}

static int overlaps(size_t off, size_t n, size_t lo, size_t len) {
    return off < lo + len && lo < off + n;
}

int ht_model_holds(const ht_model *m, size_t off, size_t n) {
    for (int w = 0; w < m->nwin; w++)
        if (overlaps(off, n, m->win[w].base, m->win[w].n)) return 1;
    return 0;
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
