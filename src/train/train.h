/* The single-device training run: config -> device, data, model, optimizer -> steps with
 * evaluation, metrics, progress and checkpoints. The CLI (src/hettrain.c) only parses
 * arguments and calls ht_train(). */
#ifndef HT_TRAIN_TRAIN_H
#define HT_TRAIN_TRAIN_H

#include <stdint.h>

#include "config/config.h"
#include "nn/model.h"

typedef struct ht_train_opts {
    const char *device; /* --device selector; overrides device.select when set */
    int resume;         /* --resume: continue from checkpoint.path if it exists */
    int profile;        /* --profile: per-kernel times at the end */
    int64_t stop_after; /* --stop-after N: at most N steps in this run, then checkpoint (0 = no
                           limit) */
    const char *trace;  /* --trace FILE: Chrome trace of every rank's steps (NULL = none) */
    int trace_layers;   /* --trace-layers: and a span per layer (a sync after each) */
} ht_train_opts;

typedef struct ht_train_result {
    int64_t steps;        /* optimizer steps taken in total (including resumed ones) */
    double val_loss;      /* final evaluation (a language model: nats per byte) */
    double val_acc;       /* a language model: next-byte accuracy */
    double samples_per_s; /* training throughput of this process */
    double first_step_s;  /* process start -> first step done */
} ht_train_result;

/* Runs the job. Returns HT_OK, HT_EINPUT (bad data/checkpoint: message set) or
 * HT_ERUNTIME, or HT_ESTOPPED after a stop request (core/stop.h: checkpoint saved); OpenCL failures exit 1 directly. */
int ht_train(const ht_config *cfg, const ht_train_opts *opts, ht_train_result *res);


#endif
