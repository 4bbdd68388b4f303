/* Optimizer steps on the device: launch shapes fixed at init (so reductions add in the same
 * order every step), the two-pass gradient norm, and the fused update kernels of cl/optim.cl.
 * Formulas follow torch.optim.SGD / torch.optim.AdamW and torch.nn.utils.clip_grad_norm_. */
#include "optim/optim.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/vcost.h"

/* Pass 1 of the norm uses at most this many groups: enough to keep every core (or a GPU's
 * SMs, modestly) busy, few enough that pass 2 is one small work-group. */
#define NORM_MAX_GROUPS 64
#define NORM_MAX_LOCAL 256
#define UPD_MAX_LOCAL 256

/* ---------------------------------------------------------------- configuration */

ht_optim_cfg ht_optim_cfg_from(const ht_config *cfg) {
    ht_optim_cfg c = {0};
    if (!strcmp(cfg->optim.type, "sgd"))
        c.type = HT_OPT_SGD;
    else if (!strcmp(cfg->optim.type, "adamw"))
        c.type = HT_OPT_ADAMW;
    else
        ht_die(HT_EINPUT, "%s: key 'optim.type': found \"%s\", expected one of \"sgd\", \"adamw\"",
               cfg->source, cfg->optim.type);
    c.momentum = (float)cfg->optim.momentum;
    c.nesterov = cfg->optim.nesterov;
    c.beta1 = (float)cfg->optim.beta1;
    c.beta2 = (float)cfg->optim.beta2;
    c.eps = (float)cfg->optim.eps;
    c.weight_decay = (float)cfg->optim.weight_decay;
    c.clip = (float)cfg->optim.clip;
    return c;
}

static void check_cfg(const ht_optim_cfg *c) {
    if (c->type != HT_OPT_SGD && c->type != HT_OPT_ADAMW)
        ht_die(HT_EINPUT, "optim.type: unknown optimizer %d, expected sgd or adamw", c->type);
    if (!(c->clip >= 0)) ht_die(HT_EINPUT, "optim.clip: found %g, expected a number >= 0", c->clip);
    if (!(c->weight_decay >= 0))
        ht_die(HT_EINPUT, "optim.weight_decay: found %g, expected a number >= 0", c->weight_decay);
    if (c->type == HT_OPT_SGD) {
        if (!(c->momentum >= 0))
            ht_die(HT_EINPUT, "optim.momentum: found %g, expected a number >= 0", c->momentum);
        /* torch.optim.SGD rejects this too: Nesterov needs a momentum buffer */
        if (c->nesterov && c->momentum == 0)
            ht_die(HT_EINPUT, "optim.nesterov = true needs optim.momentum > 0");
    } else {
        if (!(c->beta1 >= 0 && c->beta1 < 1))
            ht_die(HT_EINPUT, "optim.beta1: found %g, expected a number >= 0 and < 1", c->beta1);
        if (!(c->beta2 >= 0 && c->beta2 < 1))
            ht_die(HT_EINPUT, "optim.beta2: found %g, expected a number >= 0 and < 1", c->beta2);
        if (!(c->eps > 0)) ht_die(HT_EINPUT, "optim.eps: found %g, expected a number > 0", c->eps);
    }
}

/* ---------------------------------------------------------------- lifetime */

static size_t pow2_floor(size_t x) {
    size_t p = 1;
    while (p * 2 <= x)
        p *= 2;
    return p;
}

static const char *update_kernel(const ht_optim *o) {
    if (o->cfg.type == HT_OPT_ADAMW) return "optim_adamw";
    return o->cfg.momentum > 0 ? "optim_sgd_momentum" : "optim_sgd";
}

static ht_buf *state_buf(ht_dev *d, size_t n, const char *what) {
    ht_buf *b = ht_buf_new(d, n * sizeof(float), what);
    ht_buf_zero(d, b, 0, n * sizeof(float));
    return b;
}

void ht_optim_init(ht_optim *o, ht_dev *d, const ht_optim_cfg *cfg, size_t n) {
    ht_optim_init_slice(o, d, cfg, n, 0, n);
}

void ht_optim_init_slice(ht_optim *o, ht_dev *d, const ht_optim_cfg *cfg, size_t n, size_t lo,
                         size_t hi) {
    check_cfg(cfg);
    if (n > INT_MAX)
        ht_die(HT_ERUNTIME, "optimizer over %zu floats: at most %d supported", n, INT_MAX);
    if (lo > hi || hi > n)
        ht_die(HT_ERUNTIME, "optimizer slice [%zu, %zu) of %zu floats: invalid", lo, hi, n);
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->dev = d;
    o->n_full = n;
    o->n = hi - lo;
    o->off = lo;
    /* the state of the slice only (an empty slice: one float, as buffers are never empty) */
    const size_t ns = hi - lo ? hi - lo : 1;
    if (cfg->type == HT_OPT_ADAMW) {
        o->m = state_buf(d, ns, "optim.m");
        o->v = state_buf(d, ns, "optim.v");
    } else if (cfg->momentum > 0) {
        o->m = state_buf(d, ns, "optim.momentum");
    }

    /* Local sizes are powers of two (the trees halve) and fit local memory. */
    size_t lmem = (size_t)ht_dev_info(d)->local_mem;
    const int cpu = !strcmp(ht_dev_info(d)->type, "cpu");
    size_t l = ht_kernel_max_wg(d, cpu ? "optim_sumsq_chunk" : "optim_sumsq_stride");
    l = pow2_floor(l < NORM_MAX_LOCAL ? l : NORM_MAX_LOCAL);
    while (l > 1 && l * sizeof(float) > lmem)
        l /= 2;
    o->norm_local = l;
    size_t groups = (n + l - 1) / l;
    o->norm_groups = groups < 1 ? 1 : groups > NORM_MAX_GROUPS ? NORM_MAX_GROUPS : groups;
    /* CPUs run a group's work-items one after another: give each a contiguous chunk (a
     * multiple of 4 floats, for float4 loads) rather than a stride-G*L walk (see optim.cl). */
    if (cpu) {
        const size_t items = o->norm_groups * o->norm_local;
        o->norm_chunk = ((n + items - 1) / items + 3) / 4 * 4;
        if (o->norm_chunk < 4) o->norm_chunk = 4;
    }
    l = ht_kernel_max_wg(d, "optim_norm_final");
    l = pow2_floor(l < NORM_MAX_GROUPS ? l : NORM_MAX_GROUPS);
    while (l > 1 && l * sizeof(float) > lmem)
        l /= 2;
    o->final_local = l;
    l = ht_kernel_max_wg(d, update_kernel(o));
    o->upd_local = l < UPD_MAX_LOCAL ? l : UPD_MAX_LOCAL;

    o->part = ht_buf_new(d, o->norm_groups * sizeof(float), "optim.norm_partials");
    /* stat[1] is the scale every update multiplies g by: 1 until a norm pass says otherwise */
    const float stat0[2] = {NAN, 1.0f};
    o->stat = ht_buf_new(d, sizeof stat0, "optim.norm_stat");
    ht_buf_write(d, o->stat, 0, sizeof stat0, stat0);
}

void ht_optim_free(ht_optim *o) {
    ht_buf_free(o->m);
    ht_buf_free(o->v);
    ht_buf_free(o->part);
    ht_buf_free(o->stat);
    memset(o, 0, sizeof *o);
}

void ht_optim_track_norm(ht_optim *o, int on) { o->track_norm = on != 0; }

/* ---------------------------------------------------------------- step */

/* ||grads||_2 into stat[0] and the clip scale into stat[1]: pass 1 writes one partial per
 * group, pass 2 (a single group) adds them. No float atomics, fixed shapes: deterministic. */
static void grad_norm(ht_optim *o, ht_buf *grads) {
    size_t gws = o->norm_groups * o->norm_local, lws = o->norm_local;
    ht_prof_work(o->dev, 2.0 * (double)o->n_full, 4.0 * (double)o->n_full);
    if (o->norm_chunk > 0)
        ht_launch(o->dev, "optim_sumsq_chunk", 1, &gws, &lws, HT_BUF(grads), HT_INT(o->n_full),
                  HT_INT(o->norm_chunk), HT_BUF(o->part), HT_LOCAL(lws * sizeof(float)));
    else
        ht_launch(o->dev, "optim_sumsq_stride", 1, &gws, &lws, HT_BUF(grads), HT_INT(o->n_full),
                  HT_BUF(o->part), HT_LOCAL(lws * sizeof(float)));
    gws = lws = o->final_local;
    ht_prof_work(o->dev, (double)o->norm_groups, 4.0 * (double)o->norm_groups + 8.0);
    ht_launch(o->dev, "optim_norm_final", 1, &gws, &lws, HT_BUF(o->part), HT_INT(o->norm_groups),
              HT_BUF(o->stat), HT_FLOAT(o->cfg.clip), HT_LOCAL(lws * sizeof(float)));
}

void ht_optim_step(ht_optim *o, ht_buf *params, ht_buf *grads, float lr) {
    const size_t bytes = o->n_full * sizeof(float);
    /* per-slice gradients (ht_optim_grads_from): the slice at off - gbase */
    const size_t goff = o->gwin ? o->off - o->gbase : o->off;
    const size_t gbytes = o->gwin ? (goff + o->n) * sizeof(float) : bytes;
    if (ht_buf_size(params) < bytes || ht_buf_size(grads) < gbytes)
        ht_die(HT_ERUNTIME,
               "optimizer step over %zu floats: params (%zu bytes) or grads (%zu bytes) "
               "too small",
               o->n_full, ht_buf_size(params), ht_buf_size(grads));
    o->t++;
    const int given = o->norm_given;
    o->norm_given = 0;
    if (o->n == 0) return;
    ht_vcost(HT_VC_OPTIM, 0, 0, 0, o->n); /* virtual time (hettrain-smpi) */
    o->norm_valid = o->cfg.clip > 0 || o->track_norm;
    if (o->norm_valid && !given && o->gwin)
        ht_die(HT_ERUNTIME, "optimizer: the norm of per-slice gradients must be given "
                            "(ht_optim_set_norm)");
    if (o->norm_valid && !given) grad_norm(o, grads);

    const ht_optim_cfg *c = &o->cfg;
    const size_t items = (o->n + 7) / 8; /* one work-item per eight floats (OPTIM_VEC) */
    const size_t lws = o->upd_local, gws = (items + lws - 1) / lws * lws;
    if (c->type == HT_OPT_ADAMW) {
        /* torch.optim.AdamW (_single_tensor_adamw): bias corrections in double on the host */
        const double bc1 = 1.0 - pow((double)c->beta1, (double)o->t);
        const double bc2 = 1.0 - pow((double)c->beta2, (double)o->t);
        const double decay = 1.0 - (double)lr * (double)c->weight_decay;
        /* w, g, m, v read; w, m, v written: 28 bytes and about 12 operations a parameter */
        ht_prof_work(o->dev, 12.0 * (double)o->n, 28.0 * (double)o->n);
        ht_launch(o->dev, "optim_adamw", 1, &gws, &lws, HT_BUF(params), HT_BUF(grads), HT_BUF(o->m),
                  HT_BUF(o->v), HT_BUF(o->stat), HT_INT(o->n), HT_FLOAT(decay), HT_FLOAT(c->beta1),
                  HT_FLOAT(1.0 - (double)c->beta1), HT_FLOAT(c->beta2),
                  HT_FLOAT(1.0 - (double)c->beta2), HT_FLOAT((double)lr / bc1), HT_FLOAT(sqrt(bc2)),
                  HT_FLOAT(c->eps), HT_INT(o->off), HT_INT(goff));
    } else if (c->momentum > 0) {
        /* torch.optim.SGD (_single_tensor_sgd), dampening 0: the buffer starts as g */
        ht_prof_work(o->dev, 6.0 * (double)o->n, 20.0 * (double)o->n); /* w, g, buf; w, buf */
        ht_launch(o->dev, "optim_sgd_momentum", 1, &gws, &lws, HT_BUF(params), HT_BUF(grads),
                  HT_BUF(o->m), HT_BUF(o->stat), HT_INT(o->n), HT_FLOAT(lr),
                  HT_FLOAT(c->weight_decay), HT_FLOAT(c->momentum), HT_INT(c->nesterov),
                  HT_INT(o->t == 1), HT_INT(o->off), HT_INT(goff));
    } else {
        ht_prof_work(o->dev, 3.0 * (double)o->n, 12.0 * (double)o->n); /* w, g read; w written */
        ht_launch(o->dev, "optim_sgd", 1, &gws, &lws, HT_BUF(params), HT_BUF(grads),
                  HT_BUF(o->stat), HT_INT(o->n), HT_FLOAT(lr), HT_FLOAT(c->weight_decay),
                  HT_INT(o->off), HT_INT(goff));
    }
}

/* The slice [lo, hi) of one state buffer into a new buffer of hi - lo floats; the old freed. */
static ht_buf *slice(ht_dev *d, ht_buf *b, size_t lo, size_t hi, const char *what) {
    if (!b) return NULL;
    float *h = ht_xmalloc((hi - lo ? hi - lo : 1) * sizeof(float));
    ht_buf *s = state_buf(d, hi - lo ? hi - lo : 1, what);
    if (hi > lo) {
        ht_buf_read(d, b, lo * sizeof(float), (hi - lo) * sizeof(float), h);
        ht_buf_write(d, s, 0, (hi - lo) * sizeof(float), h);
    }
    free(h);
    ht_buf_free(b);
    return s;
}

void ht_optim_shard(ht_optim *o, size_t lo, size_t hi) {
    if (lo > hi || hi > o->n_full || o->n != o->n_full)
        ht_die(HT_ERUNTIME, "optimizer shard [%zu, %zu) of %zu floats (already %zu): invalid", lo,
               hi, o->n_full, o->n);
    const int adamw = o->cfg.type == HT_OPT_ADAMW;
    o->m = slice(o->dev, o->m, lo, hi, adamw ? "optim.m" : "optim.momentum");
    o->v = slice(o->dev, o->v, lo, hi, "optim.v");
    o->off = lo;
    o->n = hi - lo;
}

void ht_optim_grads_from(ht_optim *o, size_t gbase) {
    if (gbase > o->off)
        ht_die(HT_ERUNTIME, "optimizer: gradient buffer from %zu past the slice at %zu", gbase,
               o->off);
    o->gbase = gbase, o->gwin = 1;
}

void ht_optim_set_norm(ht_optim *o, float norm) {
    const float clip = o->cfg.clip;
    const float stat[2] = {norm, clip > 0.0f ? fminf(1.0f, clip / (norm + 1e-6f)) : 1.0f};
    ht_buf_write(o->dev, o->stat, 0, sizeof stat, stat);
    o->norm_given = 1;
}

float ht_optim_last_grad_norm(ht_optim *o) {
    if (!o->norm_valid) return NAN;
    float norm;
    ht_buf_read(o->dev, o->stat, 0, sizeof norm, &norm);
    return norm;
}

/* ---------------------------------------------------------------- checkpoint state */

int ht_optim_state_count(const ht_optim *o) { return (o->m != NULL) + (o->v != NULL); }

void ht_optim_state(const ht_optim *o, int i, const char **name, ht_buf **buf, size_t *n) {
    if (i < 0 || i >= ht_optim_state_count(o))
        ht_die(HT_ERUNTIME, "optimizer state %d requested; it has %d", i, ht_optim_state_count(o));
    const int adamw = o->cfg.type == HT_OPT_ADAMW;
    if (name) *name = adamw ? (i == 0 ? "optim.m" : "optim.v") : "optim.momentum";
    if (buf) *buf = i == 0 ? o->m : o->v;
    if (n) *n = o->n;
}
