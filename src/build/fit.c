/* Model size against device memory (fit.h). The sizes come from the same builders that
 * allocate (a model built with dev == NULL is a description), so they cannot drift apart. */
#include "build/fit.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "build/build.h"
#include "core/err.h"

/* The keys that size the model, for messages. */
static const char *model_keys(const ht_config *cfg) {
    if (!strcmp(cfg->model.type, "gpt")) return "model.n_layer, model.d_model or model.context";
    if (!strcmp(cfg->model.type, "cnn")) return "model.layers";
    return "model.hidden";
}

/* Adds one buffer; the largest one is kept for the allocation limit, and a buffer past
 * 2^31 - 1 elements is kept (before any other) for the index limit. */
static void take(ht_fit *f, double bytes, size_t elems, const char *name) {
    f->total += bytes;
    if (bytes > f->largest) f->largest = bytes, f->largest_elems = elems, f->largest_name = name;
    if (elems > INT_MAX && !f->over_name) f->over_elems = elems, f->over_name = name;
}

int ht_fit_measure(const ht_config *cfg, int features, int classes, int batch, ht_fit *f) {
    memset(f, 0, sizeof *f);
    ht_model m;
    int rc = ht_build_desc(&m, cfg, features, classes, batch);
    if (rc != HT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ht_errmsg());
        return ht_error(rc, "%s: keys train.batch (%d) and %s: %s",
                        cfg->source[0] ? cfg->source : "configuration", batch, model_keys(cfg),
                        msg);
    }
    int nstates = !strcmp(cfg->optim.type, "adamw") ? 2 : cfg->optim.momentum > 0 ? 1 : 0;
    double p = (double)m.nparams * sizeof(float), rows = (double)batch * m.rows;
    f->nparams = m.nparams;
    f->params = f->grads = p;
    f->optim = nstates * p;
    f->acts = 2.0 * (double)m.act_floats * sizeof(float); /* activations and their gradients */
    f->saved = (double)m.save_floats * sizeof(float);
    f->work = (double)m.work_floats * sizeof(float);
    f->rows = rows * 12; /* labels, losses, correct flags: 4 bytes each per row */
    take(f, p, m.nparams, "parameters");
    take(f, p, m.nparams, "gradients");
    for (int i = 0; i < nstates; i++)
        take(f, p, m.nparams, "optimizer state");
    take(f, f->acts / 2, m.act_floats, "activations");
    take(f, f->acts / 2, m.act_floats, "activation gradients");
    take(f, f->saved, m.save_floats, "saved state");
    take(f, f->work, m.work_floats, "workspace");
    take(f, f->rows, (size_t)rows * 3, "per-row buffers");
    ht_model_free(&m);
    return HT_OK;
}

/* device.memory_mb bounds a rank that holds the whole model (one process, data parallel):
 * the same total against the limit, before anything is allocated. A pipeline plans its
 * stages against the limit instead (train/pipe_mem.c). */
static int over_limit(const ht_config *cfg, const ht_devinfo *di, int batch, const ht_fit *f,
                      const char *parts) {
    const double limit = cfg->device.memory_mb * 1e6;
    if (cfg->pipe.schedule != HT_PIPE_NONE || limit <= 0 || f->total <= limit) return HT_OK;
    return ht_error(HT_EINPUT,
                    "%s: key device.memory_mb (%g): no plan fits device '%s': the whole model "
                    "(%zu parameters) at train.batch %d needs %.2f MB (%s), but its limit is "
                    "%.2f MB: short by %.2f MB; reduce train.batch or the model, or raise "
                    "device.memory_mb",
                    cfg->source[0] ? cfg->source : "configuration", cfg->device.memory_mb,
                    di && di->name[0] ? di->name : "?", f->nparams, batch, f->total / 1e6, parts,
                    limit / 1e6, (f->total - limit) / 1e6);
}

int ht_fit_check(const ht_config *cfg, const ht_devinfo *di, int features, int classes,
                 int batch) {
    ht_fit f;
    int rc = ht_fit_measure(cfg, features, classes, batch, &f);
    if (rc != HT_OK) return rc;
    const char *src = cfg->source[0] ? cfg->source : "configuration";
    char parts[512];
    snprintf(parts, sizeof parts,
             "parameters %.4g, gradients %.4g, optimizer state %.4g, activations and their "
             "gradients %.4g, saved state %.4g, workspace %.4g bytes",
             f.params, f.grads, f.optim, f.acts, f.saved, f.work);
    if (f.over_name)
        return ht_error(HT_EINPUT,
                        "%s: keys train.batch (%d) and %s: the %s buffer needs %s%zu elements, "
                        "expected at most %d (kernels index with 32-bit integers); reduce "
                        "train.batch or the model",
                        src, batch, model_keys(cfg), f.over_name,
                        f.over_elems == SIZE_MAX ? "more than " : "", f.over_elems, INT_MAX);
    if (di && di->max_alloc && f.largest > (double)di->max_alloc)
        return ht_error(HT_EINPUT,
                        "%s: keys train.batch (%d) and %s: the %s buffer needs %.0f bytes, but "
                        "device '%s' allocates at most %llu bytes at once; reduce train.batch or "
                        "the model",
                        src, batch, model_keys(cfg), f.largest_name, f.largest, di->name,
                        (unsigned long long)di->max_alloc);
    if (di && di->global_mem && f.total > (double)di->global_mem)
        return ht_error(HT_EINPUT,
                        "%s: keys train.batch (%d) and %s: the model (%zu parameters) needs "
                        "%.0f bytes (%s), but device '%s' has %llu bytes of global memory; "
                        "reduce train.batch or the model",
                        src, batch, model_keys(cfg), f.nparams, f.total, parts, di->name,
                        (unsigned long long)di->global_mem);
    return over_limit(cfg, di, batch, &f, parts);
}
