/* Batches and evaluation for the training loops (engine_dp.c, engine_async.c). */
#include "train/source.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "io/trace.h"

/* Prefixes the recorded error with where key was set ("job.cfg:7: key 'data.samples': "). */
static int at_key(const ht_config *cfg, const char *key, int rc) {
    if (rc != HT_EINPUT) return rc;
    char where[HT_PATH_MAX + 32], msg[2048];
    ht_config_where(cfg, key, where, sizeof where);
    const char *m = ht_errmsg();
    size_t kl = strlen(key);
    if (!strncmp(m, key, kl) && !strncmp(m + kl, ": ", 2)) m += kl + 2; /* said below */
    snprintf(msg, sizeof msg, "%s", m);
    return ht_error(rc, "%s%skey '%s': %s", where, where[0] ? ": " : "", key, msg);
}

/* Token files: data.path's stream, and validation from data.val_path's or held out of it. */
static int load_tokens(const ht_config *cfg, ht_source *src) {
    const int V = cfg->model.vocab;
    src->text = src->tokens = 1;
    src->T = cfg->model.context;
    int rc = at_key(cfg, "data.path", ht_tokens_open(&src->kall, cfg->data.path, V, "file"));
    if (rc != HT_OK) return rc;
    if (!cfg->data.val_path[0]) {
        rc = at_key(cfg, "data.val_fraction",
                    ht_tokens_split(&src->kall, cfg->data.val_fraction, src->T, cfg->data.path,
                                    &src->ktrain, &src->kval));
    } else {
        rc = at_key(cfg, "data.path",
                    ht_tokens_whole(&src->kall, src->T, cfg->data.path, &src->ktrain));
        if (rc == HT_OK)
            rc = at_key(cfg, "data.val_path",
                        ht_tokens_open(&src->kvalset, cfg->data.val_path, V, "file"));
        if (rc == HT_OK)
            rc = at_key(cfg, "data.val_path",
                        ht_tokens_whole(&src->kvalset, src->T, cfg->data.val_path, &src->kval));
    }
    if (rc == HT_OK)
        ht_log_info("data: tokens (vocabulary %d) from %d file%s: %zu training, %zu validation%s",
                    V, src->kall.nfiles, src->kall.nfiles == 1 ? "" : "s", src->ktrain.n,
                    src->kval.n, cfg->data.val_path[0] ? " (data.val_path)" : " (by position)");
    return rc;
}

/* A data file that does not exist: exit 2 naming the key, where it was set and the folder a
 * relative path was taken from (the working directory, not the config's folder). */
static int check_exists(const ht_config *cfg, const char *key, const char *path) {
    struct stat st;
    if (!*path || stat(path, &st) == 0 || errno != ENOENT) return HT_OK; /* the reader says why */
    char where[HT_PATH_MAX + 32], cwd[HT_PATH_MAX] = "";
    ht_config_where(cfg, key, where, sizeof where);
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    return ht_error(HT_EINPUT,
                    "%s%skey '%s': data file '%s' does not exist%s%s%s; expected an existing "
                    "file (README.md, \"Getting the data\")",
                    where, where[0] ? ": " : "", key, path,
                    cwd[0] ? " (a relative path is taken from the working directory, " : "", cwd,
                    cwd[0] ? ")" : "");
}

/* Generated data because the job has no data group: said, since a user who forgot the group
 * would otherwise train on noise without knowing. */
static void note_generated(const ht_config *cfg) {
    char where[HT_PATH_MAX + 32];
    ht_config_where(cfg, "data", where, sizeof where);
    if (cfg->source[0] && !strcmp(where, cfg->source))
        ht_log_info("data: %s has no data group: training on generated data (data.kind "
                    "\"synthetic\", the default; README.md, \"Getting the data\")", cfg->source);
}

int ht_source_load(const ht_config *cfg, ht_source *src) {
    ht_dataset all = {0};
    int rc;
    if (!strcmp(cfg->data.kind, "tokens")) return load_tokens(cfg, src);
    if (!strcmp(cfg->data.kind, "text") && (rc = check_exists(cfg, "data.path", cfg->data.path)))
        return rc;
    if (!strcmp(cfg->data.kind, "idx") &&
        ((rc = check_exists(cfg, "data.images", cfg->data.images)) ||
         (rc = check_exists(cfg, "data.labels", cfg->data.labels))))
        return rc;
    if (!strcmp(cfg->data.kind, "synthetic")) note_generated(cfg);
    if (!strcmp(cfg->data.kind, "text")) {
        src->text = 1;
        src->T = cfg->model.context;
        if ((rc = ht_text_load(&src->all, cfg->data.path)) != HT_OK) return rc;
        rc = at_key(cfg, "data.val_fraction",
                    ht_text_split(&src->all, cfg->data.val_fraction, src->T, cfg->data.path,
                                  &src->ttrain, &src->tval));
        if (rc == HT_OK)
            ht_log_info("data: %s, %zu bytes: %zu training, %zu validation (by position)",
                        cfg->data.path, src->all.n, src->ttrain.n, src->tval.n);
        return rc;
    }
    if (!strcmp(cfg->data.kind, "idx"))
        rc = ht_idx_load(&all, cfg->data.images, cfg->data.labels);
    else
        rc = at_key(cfg, "data.samples",
                    ht_synthetic_make(&all, cfg->data.samples, cfg->data.features,
                                      cfg->data.classes, cfg->data.seed));
    if (rc != HT_OK) return rc;
    rc = at_key(cfg, "data.val_fraction",
                ht_dataset_split(&all, cfg->data.val_fraction, &src->train, &src->val));
    ht_dataset_free(&all);
    if (rc == HT_OK && src->train.n < 1)
        rc = at_key(cfg, "data.val_fraction",
                    ht_error(HT_EINPUT, "%.3g leaves no training samples",
                             cfg->data.val_fraction));
    if (rc == HT_OK)
        ht_log_info("data: %d training, %d validation samples, %d features, %d classes",
                    src->train.n, src->val.n, src->train.features, src->train.classes);
    return rc;
}

/* Host staging for batches of B (evaluation of a dataset goes in batches of B too). */
void ht_source_start(ht_source *src, const ht_config *cfg, int B) {
    src->seed = cfg->train.seed;
    src->eval_seed = ht_rng_stream(cfg->train.seed, 0xe7a1 /* "eval" */);
    src->eval_batches = cfg->train.eval_batches;
    src->windows = B;
    if (src->text) {
        src->tok = ht_xmalloc((size_t)B * src->T * sizeof(int32_t));
        src->y = ht_xmalloc((size_t)B * src->T * sizeof(int32_t));
        return;
    }
    ht_sampler_init(&src->sampler, src->train.n, cfg->train.seed, cfg->data.shuffle);
    src->x = ht_xmalloc((size_t)B * src->train.features * sizeof(float));
    src->y = ht_xmalloc((size_t)B * sizeof(int32_t));
    src->idx = ht_xmalloc((size_t)B * sizeof(int));
}

void ht_source_free(ht_source *src) {
    if (!src->text && src->idx) ht_sampler_free(&src->sampler);
    free(src->x);
    free(src->y);
    free(src->tok);
    free(src->idx);
    ht_dataset_free(&src->train);
    ht_dataset_free(&src->val);
    ht_text_free(&src->all);
    ht_tokens_free(&src->kall);
    ht_tokens_free(&src->kvalset);
}

/* Windows of batch `step` of a text or token stream (training or validation part). */
static void lm_batch(ht_source *src, int val, uint64_t seed, int64_t step, int B) {
    if (src->tokens)
        ht_tokens_batch(val ? &src->kval : &src->ktrain, seed, step, B, src->T, src->tok, src->y);
    else
        ht_text_batch(val ? &src->tval : &src->ttrain, seed, step, B, src->T, src->tok, src->y);
}

/* Uploads rows [lo, hi) of global training batch `step` (of B): every rank draws the same
 * global batch and takes its own slice, so the ranks together see exactly the batch one
 * process would. */
void ht_source_batch(ht_source *src, ht_model *m, int64_t step, int B, int lo, int hi) {
    ht_model_set_row_offset(m, lo); /* dropout masks by global row (lo moves when rebalancing) */
    if (src->text) {
        lm_batch(src, 0, src->seed, step, B);
        ht_model_set_batch_tokens(m, src->tok + (size_t)lo * src->T, src->y + (size_t)lo * src->T,
                                  hi - lo);
        return;
    }
    ht_sampler_batch(&src->sampler, step, B, src->idx);
    ht_dataset_gather(&src->train, src->idx + lo, hi - lo, src->x, src->y);
    ht_model_set_batch(m, src->x, src->y, hi - lo);
}

/* Runs a forward-only batch already uploaded and adds its loss and correct rows. */
static void eval_batch(ht_model *m, int b, double *lsum, long *correct) {
    ht_model_forward(m, b, 0);
    double l;
    int c;
    ht_model_loss(m, b, &l, &c);
    *lsum += l;
    *correct += c;
}

/* Mean loss per row and accuracy, forward only, dropout off: the whole validation set in
 * batches of max_batch, or for text eval_batches batches of train.batch fixed validation
 * windows (the same windows at every evaluation and whatever the model's max_batch, so the
 * numbers compare), run max_batch windows at a time. */
void ht_source_evaluate(ht_model *m, ht_source *src, double *loss, double *acc) {
    ht_source_evaluate_by(m, src, NULL, NULL, loss, acc);
}

void ht_source_evaluate_by(ht_model *m, ht_source *src, ht_eval_batch_fn fn, void *ctx,
                           double *loss, double *acc) {
    double lsum = 0;
    long correct = 0, rows = 0;
    int B = m->max_batch;
    ht_trace_begin("evaluate");
    ht_model_set_training(m, 0, 0, 0);
    if (src->text) {
        const int W = src->windows;
        const size_t nval = src->tokens ? src->kval.n : src->tval.n;
        for (int j = 0; nval && j < src->eval_batches; j++) {
            lm_batch(src, 1, src->eval_seed, j, W);
            for (int k = 0; k < W; k += B) {
                const int b = W - k < B ? W - k : B;
                const size_t at = (size_t)k * src->T;
                ht_model_set_batch_tokens(m, src->tok + at, src->y + at, b);
                fn ? fn(ctx, b, &lsum, &correct) : eval_batch(m, b, &lsum, &correct);
                rows += (long)b * src->T;
            }
        }
    } else {
        for (int s = 0; s < src->val.n; s += B) {
            int b = src->val.n - s < B ? src->val.n - s : B;
            for (int i = 0; i < b; i++)
                src->idx[i] = s + i;
            ht_dataset_gather(&src->val, src->idx, b, src->x, src->y);
            ht_model_set_batch(m, src->x, src->y, b);
            fn ? fn(ctx, b, &lsum, &correct) : eval_batch(m, b, &lsum, &correct);
            rows += b;
        }
    }
    ht_trace_end(); /* the loss read-back synchronised */
    *loss = rows ? lsum / rows : NAN;
    *acc = rows ? (double)correct / rows : NAN;
}
