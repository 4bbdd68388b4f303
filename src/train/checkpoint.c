/* Checkpoint save/load over the flat parameter and optimizer-state buffers. */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "io/safetensors.h"

#define CKPT_FORMAT "hettrain-checkpoint-1"
#define MAX_STATES 8 /* optimizer state tensors */

/* The builders write the signature (nn/model_build.c): "mlp 784-1024-10 relu",
 * "cnn 1x28x28 conv5x32p2-relu-maxpool2-...", "gpt L4 C128 H4 T64 V256". */
void ht_model_signature(const ht_model *m, char *out, size_t n) { snprintf(out, n, "%s", m->desc); }

/* Index of the first NaN or infinity in p[0..n), or -1. */
static long long first_nonfinite(const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return (long long)i;
    return -1;
}

/* HT_OK when data[0..n) is finite, else code naming tensor `name` of `where`. */
static int check_finite(int code, const char *where, const char *name, const float *data,
                        size_t n) {
    long long bad = first_nonfinite(data, n);
    if (bad < 0) return HT_OK;
    return ht_error(code, "%s: tensor '%s' element %lld of %zu is %s, expected a finite number",
                    where, name, bad, n, isnan(data[bad]) ? "NaN" : "infinite");
}

/* Every parameter tensor of the host copy params, then the optimizer states st[0..ns). */
static int check_all_finite(int code, const char *where, const ht_model *m, const float *params,
                            ht_optim *o, float *const *st) {
    int np = ht_model_param_tensors((ht_model *)m, NULL, 0), rc = HT_OK;
    ht_param_tensor *pt = ht_xmalloc((size_t)(np ? np : 1) * sizeof *pt);
    ht_model_param_tensors((ht_model *)m, pt, np);
    for (int i = 0; rc == HT_OK && i < np; i++) {
        size_t n = 1;
        for (int j = 0; j < pt[i].ndim; j++)
            n *= (size_t)pt[i].shape[j];
        rc = check_finite(code, where, pt[i].name, params + pt[i].off, n);
    }
    free(pt);
    for (int i = 0; rc == HT_OK && o && i < ht_optim_state_count(o); i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(o, i, &name, &buf, &n);
        rc = check_finite(code, where, name, st[i], n);
    }
    return rc;
}

int ht_checkpoint_finite(ht_model *m, ht_optim *o) {
    int ns = o ? ht_optim_state_count(o) : 0;
    if (ns > MAX_STATES) return ht_error(HT_ERUNTIME, "too many optimizer state tensors");
    float *params = ht_xmalloc((m->nparams ? m->nparams : 1) * sizeof(float));
    float *state[MAX_STATES] = {0};
    ht_buf_read(m->dev, m->params, 0, m->nparams * sizeof(float), params);
    for (int i = 0; i < ns; i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(o, i, &name, &buf, &n);
        state[i] = ht_xmalloc((n ? n : 1) * sizeof(float));
        ht_buf_read(m->dev, buf, 0, n * sizeof(float), state[i]);
    }
    int rc = check_all_finite(HT_ERUNTIME, "the model diverged", m, params, o, state);
    free(params);
    for (int i = 0; i < ns; i++)
        free(state[i]);
    return rc;
}

int ht_checkpoint_save(const char *path, ht_model *m, ht_optim *o, int64_t step,
                       const char *optim_name) {
    return ht_checkpoint_save_ex(path, m, o, step, optim_name, NULL);
}

/* The extras' tensors are finite (code and where as check_finite). */
static int extras_finite(int code, const char *where, const ht_ckpt_extra *x) {
    int rc = HT_OK;
    for (int i = 0; x && rc == HT_OK && i < x->nt; i++) {
        size_t n = 1;
        for (int d = 0; d < x->t[i].ndim; d++)
            n *= (size_t)x->t[i].shape[d];
        rc = check_finite(code, where, x->t[i].name, x->t[i].data, n);
    }
    return rc;
}

int ht_checkpoint_save_ex(const char *path, ht_model *m, ht_optim *o, int64_t step,
                          const char *optim_name, const ht_ckpt_extra *x) {
    int np = ht_model_param_tensors(m, NULL, 0), ns = ht_optim_state_count(o);
    if (ns > MAX_STATES) return ht_error(HT_ERUNTIME, "too many optimizer state tensors");
    const int nx = x ? x->nt : 0, nk = x ? x->nk : 0;
    ht_param_tensor *pt = ht_xmalloc((size_t)np * sizeof *pt);
    ht_model_param_tensors(m, pt, np);

    /* One host copy of each flat buffer; the tensors point into it in layout order. */
    float *params = ht_xmalloc(m->nparams * sizeof(float));
    ht_buf_read(m->dev, m->params, 0, m->nparams * sizeof(float), params);
    float *state[MAX_STATES] = {0};
    ht_st_tensor *t = ht_xmalloc((size_t)(np + ns + nx) * sizeof *t);
    int nt = 0;
    for (int i = 0; i < np; i++, nt++) {
        t[nt].name = pt[i].name;
        t[nt].ndim = pt[i].ndim;
        for (int j = 0; j < pt[i].ndim; j++)
            t[nt].shape[j] = pt[i].shape[j];
        t[nt].data = params + pt[i].off;
    }
    for (int i = 0; i < ns; i++, nt++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(o, i, &name, &buf, &n);
        state[i] = ht_xmalloc(n * sizeof(float));
        ht_buf_read(m->dev, buf, 0, n * sizeof(float), state[i]);
        t[nt].name = name;
        t[nt].ndim = 1;
        t[nt].shape[0] = (int64_t)n;
        t[nt].data = state[i];
    }
    for (int i = 0; i < nx; i++, nt++)
        t[nt] = x->t[i];
    /* never a checkpoint of non-finite numbers: the last good one stays */
    char where[64];
    snprintf(where, sizeof where, "step %lld: checkpoint not written", (long long)step);
    int frc = check_all_finite(HT_ERUNTIME, where, m, params, o, state);
    if (frc == HT_OK) frc = extras_finite(HT_ERUNTIME, where, x);
    if (frc != HT_OK) {
        free(params);
        for (int i = 0; i < MAX_STATES; i++)
            free(state[i]);
        free(t);
        free(pt);
        return frc;
    }
    char sig[256], st[32], ot[32];
    ht_model_signature(m, sig, sizeof sig);
    snprintf(st, sizeof st, "%" PRId64, step);
    snprintf(ot, sizeof ot, "%" PRId64, o->t);
    const char **keys = ht_xmalloc((size_t)(5 + nk) * sizeof *keys);
    const char **vals = ht_xmalloc((size_t)(5 + nk) * sizeof *vals);
    const char *k0[] = {"format", "model", "optimizer", "step", "optimizer_steps"};
    const char *v0[] = {CKPT_FORMAT, sig, optim_name, st, ot};
    for (int i = 0; i < 5 + nk; i++) {
        keys[i] = i < 5 ? k0[i] : x->keys[i - 5];
        vals[i] = i < 5 ? v0[i] : x->vals[i - 5];
    }
    int rc = ht_st_write(path, t, nt, keys, vals, 5 + nk);
    free(keys);
    free(vals);
    free(params);
    for (int i = 0; i < MAX_STATES; i++)
        free(state[i]);
    free(t);
    free(pt);
    return rc;
}

static int meta_int(const ht_st_file *f, const char *path, const char *key, int64_t *out) {
    const char *v = ht_st_meta(f, key);
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    /* at most 2^62: the trainer adds --stop-after (< 2^31) to it without overflow */
    if (!v || !*v || *end || x < 0 || errno == ERANGE || v[0] == ' ' || v[0] == '+' ||
        x > (1LL << 62))
        return ht_error(HT_EINPUT,
                        "%s: metadata '%s' is %s%s%s, expected a non-negative integer of at "
                        "most 2^62",
                        path, key, v ? "'" : "missing", v ? v : "", v ? "'" : "");
    *out = x;
    return HT_OK;
}

/* Finds tensor name with exactly n floats in shape (ndim, shape). */
static const float *want(const ht_st_file *f, const char *path, const char *name, int ndim,
                         const int64_t *shape, int *rc) {
    int fnd = 0;
    int64_t fs[HT_ST_MAX_DIM] = {0};
    const float *p = ht_st_get(f, name, &fnd, fs);
    if (!p) {
        *rc = ht_st_dtype(f, name) ? HT_EINPUT
                                   : ht_error(HT_EINPUT, "%s: tensor '%s' is missing", path, name);
        return NULL;
    }
    int same = fnd == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = fs[i] == shape[i];
    if (!same) {
        char a[64] = "", b[64] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", i ? "," : "",
                     (long long)shape[i]);
        for (int i = 0; i < fnd; i++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? "," : "", (long long)fs[i]);
        *rc =
            ht_error(HT_EINPUT, "%s: tensor '%s' has shape [%s], expected [%s]", path, name, b, a);
        return NULL;
    }
    return p;
}

/* ht_st_open has verified the checksums of a file that has them; one without (another tool's)
 * is read as is, with this line (shown also under -q). */
static void note_unverified(const ht_st_file *f, const char *path) {
    if (!ht_st_checksummed(f))
        ht_log_warn("%s has no checksums (not written by this version of hettrain): loaded "
                    "without verifying its bytes",
                    path);
}

/* data[0..n) holds elements [first, first + n) of tensor `name` (total elements): HT_OK when
 * finite, else check_finite's error with the element's index in the tensor. */
static int check_finite_part(const char *path, const char *name, const float *data, size_t n,
                             size_t first, size_t total) {
    long long bad = first_nonfinite(data, n);
    if (bad < 0) return HT_OK;
    return ht_error(HT_EINPUT, "%s: tensor '%s' element %lld of %zu is %s, expected a finite number",
                    path, name, (long long)first + bad, total,
                    isnan(data[bad]) ? "NaN" : "infinite");
}

/* Elements [lo, lo + len) of the layout that tensor `name` (at layout float off, n elements)
 * has, read into dst (dst[0] is layout float lo) and checked finite; nothing when none. */
static int read_part(ht_st_file *f, const char *path, const char *name, size_t off, size_t n,
                     size_t lo, size_t len, float *dst) {
    const size_t a = off > lo ? off : lo, b = off + n < lo + len ? off + n : lo + len;
    if (a >= b) return HT_OK; /* outside: not read */
    int rc = ht_st_read_f32(f, name, a - off, b - a, dst + (a - lo));
    return rc == HT_OK ? check_finite_part(path, name, dst + (a - lo), b - a, a - off, n) : rc;
}

/* Checks format and model signature and every parameter tensor's dtype and shape (from the
 * header), then reads only what the model holds (a pipeline rank's windows, m->win, one per
 * stage it runs and a tied head's copy of wte; the whole model otherwise) into a
 * host copy laid out as its params buffer (*params, to free). */
static int read_params(ht_st_file *f, const char *path, const ht_model *m, float **params) {
    char sig[256];
    ht_model_signature(m, sig, sizeof sig);
    const char *fmt = ht_st_meta(f, "format"), *fsig = ht_st_meta(f, "model");
    *params = NULL;
    if (!fmt || strcmp(fmt, CKPT_FORMAT))
        return ht_error(HT_EINPUT, "%s: metadata 'format' is '%s', expected '%s'", path,
                        fmt ? fmt : "(missing)", CKPT_FORMAT);
    if (!fsig || strcmp(fsig, sig))
        return ht_error(HT_EINPUT,
                        "%s: checkpoint is for model '%s', but the config describes '%s'", path,
                        fsig ? fsig : "(missing)", sig);
    int np = ht_model_param_tensors((ht_model *)m, NULL, 0), rc = HT_OK;
    ht_param_tensor *pt = ht_xmalloc((size_t)(np ? np : 1) * sizeof *pt);
    ht_model_param_tensors((ht_model *)m, pt, np);
    float *p = ht_xmalloc((m->pres ? m->pres : 1) * sizeof(float));
    for (int i = 0; rc == HT_OK && i < np; i++) {
        size_t n = 1;
        for (int j = 0; j < pt[i].ndim; j++)
            n *= (size_t)pt[i].shape[j];
        rc = ht_st_expect_f32(f, pt[i].name, pt[i].ndim, pt[i].shape);
        for (int w = 0; rc == HT_OK && w < m->nwin; w++) /* the windows: a rank's stages */
            rc = read_part(f, path, pt[i].name, pt[i].off, n, m->win[w].base, m->win[w].n,
                           p + m->win[w].at);
    }
    free(pt);
    if (rc != HT_OK)
        free(p);
    else
        *params = p;
    return rc;
}

/* Optimizer state `name`'s floats at each of m's windows, packed into sp as params is. */
static int read_state_windows(ht_st_file *f, const char *path, const ht_model *m,
                              const char *name, float *sp) {
    int rc = HT_OK;
    for (int w = 0; rc == HT_OK && w < m->nwin; w++) {
        const ht_pwin *x = &m->win[w];
        rc = ht_st_read_f32(f, name, x->base, x->n, sp + x->at);
        if (rc == HT_OK) rc = check_finite_part(path, name, sp + x->at, x->n, x->base, m->nparams);
    }
    return rc;
}

/* The optimizer states' part this rank holds ([pbase + o->off, + n) of each flat state the
 * file holds whole, parallel to the parameters) into host copies sp[0..ns), to free. */
static int read_states(ht_st_file *f, const char *path, const ht_model *m, ht_optim *o,
                       float **sp) {
    int ns = ht_optim_state_count(o), rc = HT_OK;
    if (ns > MAX_STATES) return ht_error(HT_ERUNTIME, "too many optimizer states");
    for (int i = 0; rc == HT_OK && i < ns; i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(o, i, &name, &buf, &n);
        int64_t shape[1] = {(int64_t)m->nparams};
        const size_t at = m->pbase + o->off, w = n;
        sp[i] = ht_xmalloc((n ? n : 1) * sizeof(float));
        rc = ht_st_expect_f32(f, name, 1, shape);
        if (rc == HT_OK && (at > m->nparams || w > m->nparams - at))
            rc = ht_error(HT_ERUNTIME, "optimizer state '%s' [%zu, %zu) beyond the %zu of %s",
                          name, at, at + w, m->nparams, path);
        if (rc == HT_OK && m->nwin > 1) { /* several windows (o->off is 0 there) */
            rc = read_state_windows(f, path, m, name, sp[i]);
            continue;
        }
        if (rc == HT_OK) rc = ht_st_read_f32(f, name, at, w, sp[i]);
        if (rc == HT_OK) rc = check_finite_part(path, name, sp[i], w, at, m->nparams);
    }
    return rc;
}

/* Format, optimizer and step metadata of a checkpoint to load into o: *fstep, *ot. */
static int read_steps(ht_st_file *f, const char *path, const char *optim_name, int64_t *fstep,
                      int64_t *ot) {
    const char *fopt = ht_st_meta(f, "optimizer");
    int rc = HT_OK;
    if (!fopt || strcmp(fopt, optim_name))
        rc = ht_error(HT_EINPUT,
                      "%s: checkpoint holds state for optimizer '%s', but the config uses '%s'",
                      path, fopt ? fopt : "(missing)", optim_name);
    if (rc == HT_OK) rc = meta_int(f, path, "step", fstep);
    if (rc == HT_OK) rc = meta_int(f, path, "optimizer_steps", ot);
    /* a parameter server applies each worker's push as one update: up to one per worker
     * per global step, and a segment may end a step late (train/async_ckpt.c) */
    int64_t per = 1, bound = *fstep;
    if (rc == HT_OK && ht_st_meta(f, "sync.workers") &&
        (rc = meta_int(f, path, "sync.workers", &per)) == HT_OK && per > 1)
        bound = *fstep < INT64_MAX / per - 1 ? (*fstep + 1) * per : INT64_MAX;
    if (rc == HT_OK && *ot > bound)
        rc = ht_error(HT_EINPUT,
                      "%s: metadata 'optimizer_steps' is %lld, expected at most %s (%lld): the "
                      "optimizer cannot have stepped more often than the trainer",
                      path, (long long)*ot,
                      per > 1 ? "('step' + 1) x 'sync.workers'" : "'step'", (long long)bound);
    return rc;
}

/* A rank reads only what it holds (ht_st_open_header: the headers, then its ranges), so that
 * a pipeline stage resuming from a large set never has the whole checkpoint in host memory. */
int ht_checkpoint_load(const char *path, ht_model *m, ht_optim *o, int64_t *step,
                       const char *optim_name) {
    ht_st_file *f = NULL;
    int rc = ht_checkpoint_open(&f, path);
    if (rc == HT_OK) rc = ht_checkpoint_load_from(f, path, m, o, step, optim_name);
    ht_st_close(f);
    return rc;
}

int ht_checkpoint_open(ht_st_file **f, const char *path) {
    *f = NULL;
    int rc = ht_st_open_header(f, path);
    if (rc == HT_OK) note_unverified(*f, path);
    if (rc == HT_OK) ht_log_debug("%s: checkpoint headers read", path); /* counted by tests */
    return rc;
}

int ht_checkpoint_load_from(ht_st_file *f, const char *path, ht_model *m, ht_optim *o,
                            int64_t *step, const char *optim_name) {
    int rc = HT_OK;
    float *params = NULL, *sp[MAX_STATES] = {0};
    int64_t fstep = 0, ot = 0;
    int ns = ht_optim_state_count(o);
    /* everything is validated before any device buffer changes */
    rc = read_params(f, path, m, &params);
    if (rc == HT_OK) rc = read_steps(f, path, optim_name, &fstep, &ot);
    if (rc == HT_OK) rc = read_states(f, path, m, o, sp);
    if (rc == HT_OK) { /* a pipeline rank's windows only */
        ht_buf_write(m->dev, m->params, 0, m->pres * sizeof(float), params);
        for (int i = 0; i < ns; i++) {
            const char *name;
            ht_buf *buf;
            size_t n;
            ht_optim_state(o, i, &name, &buf, &n);
            ht_buf_write(m->dev, buf, 0, n * sizeof(float), sp[i]);
        }
        o->t = ot;
        *step = fstep;
    }
    free(params);
    for (int i = 0; i < MAX_STATES; i++)
        free(sp[i]);
    return rc;
}

int ht_checkpoint_load_params(const char *path, ht_model *m, int64_t *step) {
    ht_st_file *f = NULL;
    int rc = ht_st_open_header(&f, path);
    if (rc != HT_OK) return rc;
    note_unverified(f, path);
    float *params = NULL;
    int64_t fstep = 0;
    rc = read_params(f, path, m, &params);
    if (rc == HT_OK) rc = meta_int(f, path, "step", &fstep);
    if (rc == HT_OK) {
        ht_buf_write(m->dev, m->params, 0, m->pres * sizeof(float), params);
        if (step) *step = fstep;
    }
    free(params);
    ht_st_close(f);
    return rc;
}

int ht_checkpoint_check_step(const char *path, int64_t step, int64_t total) {
    if (step > total)
        return ht_error(HT_EINPUT,
                        "%s: metadata 'step' is %lld, beyond the %lld steps this config trains "
                        "(train.steps / train.epochs): expected a checkpoint of this run",
                        path, (long long)step, (long long)total);
    return HT_OK;
}

int ht_checkpoint_meta_int(const ht_st_file *f, const char *path, const char *key, int64_t *out) {
    return meta_int(f, path, key, out);
}

const float *ht_checkpoint_tensor(const ht_st_file *f, const char *path, const char *name,
                                  size_t n, int *rc) {
    int64_t shape[1] = {(int64_t)n};
    *rc = HT_OK;
    const float *p = want(f, path, name, 1, shape, rc);
    if (p) *rc = check_finite(HT_EINPUT, path, name, p, n);
    return *rc == HT_OK ? p : NULL;
}
