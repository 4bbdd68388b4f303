/* The model on a device (see model.h): its buffers, initialisation, batches, and
 * forward/backward over any contiguous range of layers, pairing a layer with a following
 * activation it can fuse (the cut rule, ht_model_fused_with_below). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/vcost.h"
#include "nn/layer_run.h"

/* ---------------------------------------------------------------- buffers */

/* ht_model_free's device part (m->release). */
static void release(ht_model *m) {
    ht_buf *bufs[] = {m->params, m->grads,  m->acts,   m->dacts,  m->saved,
                      m->work,   m->labels, m->losses, m->correct};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) ht_buf_free(bufs[i]);
    m->dev = NULL;
    m->release = NULL;
}

int ht_model_attach(ht_model *m, ht_dev *d) {
    return ht_model_attach_stage(m, d, 0, m->nparams, 0, m->nlayers);
}

/* The buffers of the windows and chunks set in m (params, grads zeroed, activations, their
 * gradients, saved state, workspace). */
static void alloc_bufs(ht_model *m) {
    ht_dev *d = m->dev;
    ht_model_chunk_floats(m, m->nchunk, m->chunk_lo, m->chunk_hi, m->max_batch, &m->act_floats,
                          &m->save_floats, &m->work_floats);
    size_t pbytes = m->pres * sizeof(float), abytes = m->act_floats * sizeof(float);
    const int whole = m->pres == m->nparams && m->nchunk == 1 && m->chunk_lo[0] == 0 &&
                      m->chunk_hi[0] == m->nlayers;
    m->params = ht_buf_new(d, pbytes ? pbytes : sizeof(float), whole ? "parameters" : "parameters (stage)");
    if (!m->gwin) m->gbase = m->pbase, m->gres = m->pres;
    const size_t gbytes = m->gres * sizeof(float);
    m->grads = ht_buf_new(d, gbytes ? gbytes : sizeof(float),
                          m->gwin ? "gradients (slice)" : whole ? "gradients" : "gradients (stage)");
    m->acts = ht_buf_new(d, abytes ? abytes : sizeof(float), "activations");
    m->dacts = ht_buf_new(d, abytes ? abytes : sizeof(float), "activation gradients");
    m->saved = ht_buf_new(d, (m->save_floats ? m->save_floats : 1) * sizeof(float), "saved state");
    m->work = ht_buf_new(d, (m->work_floats ? m->work_floats : 1) * sizeof(float), "workspace");
    if (gbytes) ht_buf_zero(d, m->grads, 0, gbytes);
}

/* One window [pbase, pbase + pres) (and a tied layer's shared tensor outside it) and one
 * chunk [lo, hi). */
static void set_stage(ht_model *m, size_t pbase, size_t pres, int lo, int hi) {
    size_t floats;
    m->nwin = ht_model_stage_windows(m, pbase, pres, lo, hi, m->win, &floats);
    if (!m->nwin) m->nwin = 1, m->win[0] = (ht_pwin){pbase, 0, 0}; /* none: pbase kept */
    m->pbase = m->win[0].base, m->pres = floats;
    m->nchunk = 1, m->chunk_lo[0] = lo, m->chunk_hi[0] = hi;
}

/* The windows of chunks [lo[k], hi[k]); HT_EINPUT for too many or a bad range. */
static int set_chunks(ht_model *m, int n, const int *lo, const int *hi) {
    if (n < 1 || n > HT_MODEL_MAX_CHUNKS)
        return ht_error(HT_EINPUT, "nn: %d chunks, expected 1 to %d", n, HT_MODEL_MAX_CHUNKS);
    for (int k = 0; k < n; k++)
        if (lo[k] < 0 || lo[k] > hi[k] || hi[k] > m->nlayers)
            return ht_error(HT_EINPUT, "nn: chunk %d is layers [%d, %d) of %d", k, lo[k], hi[k],
                            m->nlayers);
    size_t floats;
    m->nwin = ht_model_chunk_windows(m, n, lo, hi, m->win, &floats);
    m->pbase = m->nwin ? m->win[0].base : 0, m->pres = floats;
    m->nchunk = n;
    for (int k = 0; k < n; k++)
        m->chunk_lo[k] = lo[k], m->chunk_hi[k] = hi[k];
    return HT_OK;
}

/* The labels, losses and host copies (max_batch rows), the release hook. */
static void alloc_rows(ht_model *m) {
    ht_dev *d = m->dev;
    size_t nrows = (size_t)m->max_batch * (size_t)m->rows;
    m->labels = ht_buf_new(d, nrows * sizeof(int32_t), "labels");
    m->losses = ht_buf_new(d, nrows * sizeof(float), "losses");
    m->correct = ht_buf_new(d, nrows * sizeof(int32_t), "correct flags");
    m->host_loss = ht_xmalloc(nrows * sizeof(float));
    m->host_correct = ht_xmalloc(nrows * sizeof(int32_t));
    m->release = release;
}

int ht_model_attach_chunks(ht_model *m, ht_dev *d, int n, const int *lo, const int *hi) {
    int rc = set_chunks(m, n, lo, hi);
    if (rc != HT_OK) return rc;
    m->dev = d;
    alloc_bufs(m);
    alloc_rows(m);
    return HT_OK;
}

/* ht_model_restage's freeing part. */
static void free_bufs(ht_model *m) {
    ht_dev_finish(m->dev);
    ht_buf *b[] = {m->params, m->grads, m->acts, m->dacts, m->saved, m->work};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        ht_buf_free(b[i]);
}

int ht_model_restage_chunks(ht_model *m, int n, const int *lo, const int *hi) {
    int rc = set_chunks(m, n, lo, hi);
    if (rc != HT_OK) return rc;
    free_bufs(m);
    alloc_bufs(m);
    return HT_OK;
}

int ht_model_attach_stage(ht_model *m, ht_dev *d, size_t pbase, size_t pres, int lo, int hi) {
    m->dev = d;
    set_stage(m, pbase, pres, lo, hi);
    alloc_bufs(m);
    alloc_rows(m);
    return HT_OK;
}

void ht_model_restage(ht_model *m, size_t pbase, size_t pres, int lo, int hi) {
    free_bufs(m);
    set_stage(m, pbase, pres, lo, hi);
    alloc_bufs(m);
}

void ht_model_grad_window(ht_model *m, size_t gbase, size_t gres) {
    m->gbase = gbase, m->gres = gres, m->gwin = 1;
}

/* ---------------------------------------------------------------- builders */

static int attach_if(ht_model *m, ht_dev *d, int rc) {
    return rc == HT_OK && d ? ht_model_attach(m, d) : rc;
}

int ht_model_mlp(ht_model *m, ht_dev *d, int in_features, const int *hidden, int nhidden,
                 int classes, const char *activation, int max_batch) {
    return attach_if(
        m, d, ht_model_mlp_desc(m, in_features, hidden, nhidden, classes, activation, max_batch));
}

int ht_model_cnn(ht_model *m, ht_dev *d, ht_shape in, const char *const *specs, int nspecs,
                 int classes, int max_batch) {
    return attach_if(m, d, ht_model_cnn_desc(m, in, specs, nspecs, classes, max_batch));
}

int ht_model_gpt(ht_model *m, ht_dev *d, int vocab, int T, int n_layer, int d_model, int n_head,
                 float dropout, int max_batch, int tie) {
    return attach_if(
        m, d, ht_model_gpt_desc(m, vocab, T, n_layer, d_model, n_head, dropout, max_batch, tie));
}

/* ---------------------------------------------------------------- kinds */

const ht_layer_run *ht_layer_run_of(const ht_layer *l) {
    switch (l->kind) {
    case HT_LAYER_LINEAR:
        return &ht_run_linear;
    case HT_LAYER_RELU:
    case HT_LAYER_GELU:
        return &ht_run_act;
    case HT_LAYER_CONV:
        return &ht_run_conv;
    case HT_LAYER_MAXPOOL:
        return &ht_run_maxpool;
    case HT_LAYER_AVGPOOL:
        return &ht_run_avgpool;
    case HT_LAYER_FLATTEN:
        return &ht_run_flatten;
    case HT_LAYER_EMBED:
        return &ht_run_embed;
    case HT_LAYER_BLOCK:
        return &ht_run_block;
    case HT_LAYER_LAYERNORM:
        return &ht_run_layernorm;
    }
    ht_die(HT_ERUNTIME, "nn: layer %s of unknown kind %d", l->name, (int)l->kind);
}

static ht_act layer_act(const ht_layer *l) {
    return l->kind == HT_LAYER_RELU   ? HT_ACT_RELU
           : l->kind == HT_LAYER_GELU ? HT_ACT_GELU
                                      : HT_ACT_NONE;
}

/* Layout floats [lo, hi) of m's tensors by their rules into p[0, hi - lo). */
static void init_range(const ht_model *m, uint64_t stream, size_t lo, size_t hi, float *p) {
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        for (int j = 0; j < l->ntensors; j++) {
            const ht_param_tensor *t = &l->t[j];
            if (t->tied) continue; /* initialised as the tensor it shares */
            size_t n = 1;
            for (int k = 0; k < t->ndim; k++)
                n *= (size_t)t->shape[k];
            const size_t a = t->off > lo ? t->off : lo, b = t->off + n < hi ? t->off + n : hi;
            for (size_t k = a; k < b; k++) {
                if (t->init == HT_INIT_UNIFORM)
                    p[k - lo] = (2.0f * ht_rng_uniform(stream, k) - 1.0f) * t->init_a;
                else if (t->init == HT_INIT_NORMAL)
                    p[k - lo] = ht_rng_normal(stream, k) * t->init_a;
                else
                    p[k - lo] = t->init_a;
            }
        }
    }
}

void ht_model_init_params(ht_model *m, uint64_t seed) {
    const size_t n = m->pres;
    if (!n) return;
    float *p = ht_xmalloc(n * sizeof(float));
    uint64_t stream = ht_rng_stream(seed, 0x1a17 /* "init" */);
    for (int w = 0; w < m->nwin; w++) /* the resident windows only */
        init_range(m, stream, m->win[w].base, m->win[w].base + m->win[w].n, p + m->win[w].at);
    ht_buf_write(m->dev, m->params, 0, n * sizeof(float), p);
    free(p);
}

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

uint64_t ht_model_dropout_seed(const ht_model *m, int i, int site) {
    return ht_rng_stream(m->dropout_seed, 0xd0000000ull + 16ull * (uint64_t)i + (uint64_t)site);
}

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

/* Where tensor j of l is in params/grads: its resident window's place (one window, the common
 * case: its offset less pbase; a tied one's shared tensor may be a window of its own). */
static size_t local(const ht_model *m, const ht_layer *l, int j) {
    const size_t off = l->t[j].off;
    if (m->nwin == 1 && off >= m->pbase) return off - m->pbase;
    const size_t at = ht_model_span(m, off, 0);
    if (at == (size_t)-1)
        ht_die(HT_ERUNTIME, "nn: %s.%s (parameter float %zu) is not resident on this rank",
               l->name, l->t[j].name, off);
    return at;
}

/* A tensor the layer lacks (a linear layer without bias) is no view: the ops skip it. */
ht_view ht_layer_param(const ht_model *m, const ht_layer *l, int j) {
    return j < l->ntensors ? ht_view_at(m->params, local(m, l, j)) : ht_view_none();
}

ht_view ht_layer_grad(const ht_model *m, const ht_layer *l, int j) {
    if (j >= l->ntensors) return ht_view_none();
    /* ZeRO-2's gradient window (data parallel: one window) or the parameters' layout */
    return ht_view_at(m->grads, m->gwin ? l->t[j].off - m->gbase : local(m, l, j));
}

/* With a layer hook: the queue idle before a timed piece (returns its start), and finished
 * and reported after it. */
static double hook_start(ht_model *m) {
    if (!m->layer_hook) return 0;
    ht_dev_finish(m->dev);
    return ht_now();
}

static void hook_end(ht_model *m, int layer, int n, int kind, double t0, int B, int vc) {
    if (vc >= 0) ht_vcost(vc, layer, n, B, 0); /* virtual time; the loss: in the last layer's */
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
        ht_layer_run_of(l)->forward(m, i, B, a);
        hook_end(m, i, a != HT_ACT_NONE ? 2 : 1, 0, t0, B, HT_VC_FWD);
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
    hook_end(m, n, 0, 2, t0, B, -1);
}

void ht_model_forward(ht_model *m, int B, int with_grad) {
    ht_model_forward_range(m, 0, m->nlayers, B);
    ht_model_loss_forward(m, B, with_grad);
}

void ht_model_backward_range(ht_model *m, int lo, int hi, int B, float grad_scale, int accumulate) {
    ht_model_backward_part(m, lo, hi, B, grad_scale, accumulate, HT_BW_WHOLE);
}

void ht_model_backward_into(ht_model *m, int lo, int hi, int B, float grad_scale, ht_buf *g,
                            size_t gbase) {
    ht_buf *keep = m->grads;
    const size_t kbase = m->gbase;
    m->grads = g, m->gbase = gbase; /* ht_layer_grad's base while the layers enqueue */
    ht_model_backward_part(m, lo, hi, B, grad_scale, 0, HT_BW_WHOLE);
    m->grads = keep, m->gbase = kbase;
}

/* Layer j's share of a backward part (a = the fused activation, or none) */
static int has_split(const ht_model *m, int j) {
    const ht_layer_run *r = ht_layer_run_of(&m->layers[j]);
    return r->backward_input && r->backward_weights && (!m->layers[j].ops->save_bw || m->keep_bw);
}

static void backward_layer(ht_model *m, int j, int B, ht_act a, float s, int acc, ht_bw_part part) {
    const ht_layer_run *r = ht_layer_run_of(&m->layers[j]);
    const int split = has_split(m, j);
    if (part == HT_BW_WHOLE || (part == HT_BW_INPUT && !split)) r->backward(m, j, B, a, s, acc);
    else if (part == HT_BW_INPUT) r->backward_input(m, j, B, a, s, acc);
    else if (split) r->backward_weights(m, j, B, a, s, acc);
}

void ht_model_backward_part(ht_model *m, int lo, int hi, int B, float grad_scale, int accumulate,
                            ht_bw_part part) {
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
            /* the top layer cannot fold the scale in: scale its incoming gradient in place
             * (the W half finds it scaled there) */
            if (part != HT_BW_WEIGHTS)
                ht_scale(m->dev, ht_model_dact(m, i + 1), (size_t)B * (size_t)m->width[i + 1], s);
            s = 1.0f;
        }
        double t0 = part == HT_BW_WEIGHTS ? 0 : hook_start(m);
        backward_layer(m, j, B, a, s, accumulate, part);
        /* virtual time: a split layer's B and W each declare their share of the backward */
        const int split = has_split(m, j);
        if (part != HT_BW_WEIGHTS)
            hook_end(m, j, i - j + 1, 1, t0, B, part == HT_BW_INPUT && split ? HT_VC_BWD_B : HT_VC_BWD);
        else if (split)
            ht_vcost(HT_VC_BWD_W, j, i - j + 1, B, 0);
        i = j - 1;
    }
}

void ht_model_keep_bw(ht_model *m) {
    if (m->keep_bw) return;
    ht_model_keep_bw_layout(m);
    if (!m->saved) return;
    size_t act, work; /* a pipeline stage attached alone: its layers' saved state only */
    ht_model_chunk_floats(m, m->nchunk, m->chunk_lo, m->chunk_hi, m->max_batch, &act,
                          &m->save_floats, &work);
    ht_buf_free(m->saved);
    m->saved = ht_buf_new(m->dev, (m->save_floats ? m->save_floats : 1) * sizeof(float),
                          "saved state");
}

void ht_model_backward(ht_model *m, int B, float grad_scale) {
    ht_model_backward_range(m, 0, m->nlayers, B, grad_scale, 0);
}

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
