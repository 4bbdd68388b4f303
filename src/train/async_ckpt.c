/* Checkpoints of the asynchronous policies: the "sync.*" state beside the job's model (see
 * async_ckpt.h). Written at quiesce points only (sync/segment.c), where no message is in
 * flight, so the saved state is complete. */
#include "train/async_ckpt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

#define SYNC_FORMAT "1" /* the version of the sync.* fields below; checked on load */

/* ------------------------------------------------------------------------ layout */

int ht_async_check_resume(const ht_config *cfg, const ht_sync_layout *L) {
    const char *path = cfg->checkpoint.path;
    struct stat st;
    if (!*path || stat(path, &st) != 0) return HT_OK; /* train.c says what is missing */
    ht_st_file *f = NULL;
    int rc = ht_st_open(&f, path);
    if (rc != HT_OK) return rc;
    const char *mode = ht_st_meta(f, "sync.mode");
    int64_t w = 0, x = 0;
    if (mode) rc = ht_checkpoint_meta_int(f, path, "sync.workers", &w);
    if (mode && rc == HT_OK) rc = ht_checkpoint_meta_int(f, path, "sync.extra", &x);
    if (mode && rc == HT_OK &&
        (strcmp(mode, ht_sync_mode_name(L->mode)) || w != L->workers || x != L->extra))
        rc = ht_error(HT_EINPUT,
                      "%s: checkpoint of sync.mode \"%s\" with %lld workers + %lld extra "
                      "rank(s); this run is sync.mode \"%s\" with %d workers + %d extra rank(s) "
                      "(%d ranks): the policy's saved state (per-worker models, servers' "
                      "shards) belongs to that layout; resume with mpirun -np %lld and that "
                      "sync.mode, or resume its model with sync.mode \"bsp\" at any rank count",
                      path, mode, (long long)w, (long long)x, ht_sync_mode_name(L->mode),
                      L->workers, L->extra, L->world, (long long)(w + x));
    ht_st_close(f);
    return rc;
}

/* -------------------------------------------------------------------------- save */

/* Tensors sync.worker.<w>.params and sync.worker.<w>.<state> of snap (names into names). */
static int worker_tensors(const ht_sync_snap *sn, ht_optim *o, ht_st_tensor *t, char (*names)[64]) {
    int nt = 0;
    for (int w = 0; w < sn->workers; w++)
        for (int i = -1; i < sn->nstates; i++, nt++) {
            const char *name = "params";
            ht_buf *buf;
            size_t n;
            if (i >= 0) ht_optim_state(o, i, &name, &buf, &n);
            snprintf(names[nt], 64, "sync.worker.%d.%s", w, name);
            t[nt].name = names[nt];
            t[nt].ndim = 1;
            t[nt].shape[0] = (int64_t)sn->n;
            t[nt].data = i < 0 ? sn->params + (size_t)w * sn->n
                               : sn->states + ((size_t)w * sn->nstates + (size_t)i) * sn->n;
        }
    return nt;
}

/* A space-separated list of n integers (or, v non-NULL, HT_SYNC_NV numbers) into out. */
static char *list_of(const int64_t *a, const double *v, int n) {
    char *out = ht_xmalloc((size_t)n * 28 + 1), *p = out;
    *p = 0;
    for (int i = 0; i < n; i++)
        p += v ? sprintf(p, "%s%.17g", i ? " " : "", v[i])
               : sprintf(p, "%s%lld", i ? " " : "", (long long)a[i]);
    return out;
}

/* The sync.* metadata of snap into keys/vals (vals malloc'd from index 0; returns the count). */
static int sync_meta(const ht_job *j, const ht_sync_snap *sn, const char **keys, char **vals,
                     char (*knames)[32]) {
    int k = 0;
    keys[k] = "sync.format", vals[k++] = strdup(SYNC_FORMAT);
    keys[k] = "sync.mode", vals[k++] = strdup(ht_sync_mode_name(j->cfg->sync.mode));
    int64_t nums[3] = {sn->workers, j->world - sn->workers, sn->samples};
    const char *nk[3] = {"sync.workers", "sync.extra", "sync.samples"};
    for (int i = 0; i < 3; i++)
        keys[k] = nk[i], vals[k++] = list_of(&nums[i], NULL, 1);
    for (int w = 0; w < sn->workers; w++) {
        snprintf(knames[w], 32, "sync.worker.%d", w);
        keys[k] = knames[w], vals[k++] = list_of(NULL, sn->v + (size_t)w * HT_SYNC_NV, HT_SYNC_NV);
    }
    if (sn->servers) {
        keys[k] = "sync.server_versions", vals[k++] = list_of(sn->version, NULL, sn->servers);
        keys[k] = "sync.server_optimizer_steps", vals[k++] = list_of(sn->opt_t, NULL, sn->servers);
    }
    return k;
}

int ht_async_save(ht_job *j, ht_sync *s, int64_t step) {
    ht_sync_snap sn;
    ht_sync_snapshot(s, &sn); /* collective over the workers */
    if (j->rank != 0) return ht_job_save(j, step, NULL);
    const int W = sn.workers, nmax = 7 + W;
    const char **keys = ht_xcalloc((size_t)nmax, sizeof *keys);
    char **vals = ht_xcalloc((size_t)nmax, sizeof *vals);
    char(*knames)[32] = ht_xcalloc((size_t)W, sizeof *knames);
    int nt = sn.models ? W * (sn.nstates + 1) : 0;
    ht_st_tensor *t = ht_xcalloc((size_t)(nt ? nt : 1), sizeof *t);
    char(*tnames)[64] = ht_xcalloc((size_t)(nt ? nt : 1), sizeof *tnames);
    if (nt) worker_tensors(&sn, &j->opt, t, tnames);
    ht_ckpt_extra x = {.t = t, .nt = nt, .keys = keys, .vals = (const char *const *)vals};
    x.nk = sync_meta(j, &sn, keys, vals, knames);
    /* the job's model where the one-process tensors go; worker 0's own back after */
    const size_t bytes = sn.n * sizeof(float);
    if (sn.models) ht_buf_write(j->dev, j->model.params, 0, bytes, sn.job);
    int rc = ht_job_save(j, step, &x);
    if (sn.models) ht_buf_write(j->dev, j->model.params, 0, bytes, sn.params);
    for (int i = 0; i < x.nk; i++)
        free(vals[i]);
    free(keys);
    free(vals);
    free(knames);
    free(t);
    free(tnames);
    ht_sync_snap_free(&sn);
    return rc;
}

/* ----------------------------------------------------------------------- restore */

/* Metadata key as exactly n finite numbers (ints: non-negative integers below 2^53). */
static int meta_list(const ht_st_file *f, const char *path, const char *key, int n, int ints,
                     double *out) {
    const char *v = ht_st_meta(f, key), *p = v;
    int i = 0, bad = !v;
    while (!bad && i < n) {
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        bad = end == p || errno == ERANGE || !isfinite(d) || (*end && *end != ' ') ||
              (ints && (d < 0 || d > 9007199254740992.0 || d != floor(d)));
        out[i++] = d;
        p = *end ? end + 1 : end;
    }
    if (bad || *p || i != n)
        return ht_error(HT_EINPUT,
                        "%s: metadata '%s' is %s%s%s, expected %d %s separated by spaces", path,
                        key, v ? "'" : "missing", v ? v : "", v ? "'" : "", n,
                        ints ? "non-negative integers" : "finite numbers");
    return HT_OK;
}

/* This worker's own model and optimizer buffers from sync.worker.<rank>.*. */
static int load_own(ht_job *j, const ht_st_file *f, const char *path) {
    const int ns = ht_optim_state_count(&j->opt);
    const float **src = ht_xcalloc((size_t)ns + 1, sizeof *src);
    int rc = HT_OK;
    for (int i = -1; rc == HT_OK && i < ns; i++) {
        const char *name = "params";
        ht_buf *buf;
        size_t n;
        if (i >= 0) ht_optim_state(&j->opt, i, &name, &buf, &n);
        char tn[64];
        snprintf(tn, sizeof tn, "sync.worker.%d.%s", j->rank, name);
        src[i + 1] = ht_checkpoint_tensor(f, path, tn, j->model.nparams, &rc);
    }
    for (int i = -1; rc == HT_OK && i < ns; i++) { /* all checked: now the device */
        const char *name;
        ht_buf *buf = j->model.params;
        size_t n = j->model.nparams;
        if (i >= 0) ht_optim_state(&j->opt, i, &name, &buf, &n);
        ht_buf_write(j->dev, buf, 0, n * sizeof(float), src[i + 1]);
    }
    free(src);
    return rc;
}

/* The sync.* state of f (format checked) into this worker and s. */
static int restore_from(ht_job *j, ht_sync *s, const ht_st_file *f, const char *path) {
    const char *fmt = ht_st_meta(f, "sync.format");
    if (strcmp(fmt, SYNC_FORMAT))
        return ht_error(HT_EINPUT, "%s: metadata 'sync.format' is '%s', expected '%s'", path, fmt,
                        SYNC_FORMAT);
    int64_t samples = 0;
    int rc = ht_checkpoint_meta_int(f, path, "sync.samples", &samples);
    int64_t at = samples / j->B < j->total ? samples / j->B : j->total; /* as async_loop */
    if (rc == HT_OK && at != j->start)
        rc = ht_error(HT_EINPUT,
                      "%s: metadata 'sync.samples' is %lld, expected %lld to %lld (step %lld of "
                      "batch %d)%s",
                      path, (long long)samples, (long long)(j->start * j->B),
                      (long long)((j->start + 1) * j->B - 1), (long long)j->start, j->B,
                      j->start == j->total ? " or more (the last step)" : "");
    char key[32];
    snprintf(key, sizeof key, "sync.worker.%d", j->rank);
    double v[HT_SYNC_NV];
    if (rc == HT_OK) rc = meta_list(f, path, key, HT_SYNC_NV, 0, v);
    if (rc == HT_OK && (v[0] < 0 || v[0] != floor(v[0]) || v[1] < 0 || v[1] != floor(v[1])))
        rc = ht_error(HT_EINPUT,
                      "%s: metadata '%s': local and optimizer steps %g and %g, expected "
                      "non-negative integers",
                      path, key, v[0], v[1]);
    const int S = ht_sync_servers(s);
    double *sv = ht_xcalloc((size_t)(2 * S + 1), sizeof *sv);
    if (rc == HT_OK && S) rc = meta_list(f, path, "sync.server_versions", S, 1, sv);
    if (rc == HT_OK && S) rc = meta_list(f, path, "sync.server_optimizer_steps", S, 1, sv + S);
    if (rc == HT_OK && ht_sync_own_models(s)) rc = load_own(j, f, path);
    if (rc == HT_OK) {
        int64_t *iv = ht_xcalloc((size_t)(2 * S + 1), sizeof *iv);
        for (int i = 0; i < 2 * S; i++)
            iv[i] = (int64_t)sv[i];
        ht_sync_restore(s, samples, v, S ? iv : NULL, S ? iv + S : NULL);
        free(iv);
    }
    free(sv);
    return rc;
}

int ht_async_restore(ht_job *j, ht_sync *s) {
    const char *path = j->cfg->checkpoint.path;
    if (!j->opts->resume || j->start == 0) return HT_OK;
    ht_st_file *f = NULL;
    int rc = ht_st_open(&f, path);
    if (rc != HT_OK) return rc;
    if (ht_st_meta(f, "sync.format")) {
        rc = restore_from(j, s, f, path);
    } else { /* a bsp checkpoint: every worker from the job's model at that step */
        double v[HT_SYNC_NV];
        ht_sync_state(s, v);
        v[0] = (double)j->start;
        v[1] = (double)j->opt.t;
        ht_sync_restore(s, j->start * j->B, v, NULL, NULL);
        if (j->rank == 0)
            ht_log_info("%s holds no %s state: every worker starts from its model", path,
                        ht_sync_mode_name(j->cfg->sync.mode));
    }
    ht_st_close(f);
    return rc;
}
