/* Where a training run's batches come from, and its evaluation: samples of a dataset (MLP,
 * CNN) in the sampler's order, or random windows of a text (GPT). Internal to src/train. */
#ifndef HT_TRAIN_SOURCE_H
#define HT_TRAIN_SOURCE_H

#include <stdint.h>

#include "config/config.h"
#include "data/data.h"
#include "nn/model.h"

/* Where batches come from: samples of a dataset (MLP, CNN) in the sampler's order, or
 * random windows of a text (GPT). Either way batch `step` is a pure function of the seed
 * and the step, which is what makes a resumed run continue exactly. */
typedef struct ht_source {
    int text;              /* windows of a token stream (GPT): text bytes or token files */
    int tokens;            /* the stream is token files (ktrain, kval), not text bytes */
    ht_dataset train, val; /* samples */
    ht_sampler sampler;
    ht_text all, ttrain, tval;   /* text: the file and two views into it */
    ht_tokens kall, kvalset;     /* tokens: data.path's files, data.val_path's (may be empty) */
    ht_tokview ktrain, kval;     /* tokens: the training and validation streams */
    int T;
    uint64_t seed, eval_seed;
    int eval_batches;
    int windows;      /* text: windows per evaluation batch (the B of ht_source_start) */
    float *x;         /* (emax, features) */
    int32_t *y, *tok; /* (emax * rows) labels or targets; (B, T) tokens */
    int *idx;
} ht_source;

/* Loads the data the config names and splits off the validation part. */
int ht_source_load(const ht_config *cfg, ht_source *src);
/* Host staging for batches of up to B (evaluation goes in batches of B too). */
void ht_source_start(ht_source *src, const ht_config *cfg, int B);
void ht_source_free(ht_source *src);
/* Uploads rows [lo, hi) of global training batch `step` (of B). */
void ht_source_batch(ht_source *src, ht_model *m, int64_t step, int B, int lo, int hi);
/* Mean validation loss per row and accuracy (forward only, dropout off). */
void ht_source_evaluate(ht_model *m, ht_source *src, double *loss, double *acc);
/* The same batches (each uploaded to m first: inputs at act_off[0], labels), each run by
 * fn(ctx, b, lsum, correct), which adds its loss sum and correct rows (a pipeline stage runs
 * its layers; only the last stage adds). fn NULL: the whole model's forward. */
typedef void (*ht_eval_batch_fn)(void *ctx, int b, double *lsum, long *correct);
void ht_source_evaluate_by(ht_model *m, ht_source *src, ht_eval_batch_fn fn, void *ctx,
                           double *loss, double *acc);

#endif
