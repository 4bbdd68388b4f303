/* The training loop of a worker under a policy other than bsp (src/sync): local batches from
 * its own stream, at its own speed; the policy decides what happens after each backward.
 * Internal to src/train. */
#ifndef HT_TRAIN_ASYNC_H
#define HT_TRAIN_ASYNC_H

#include <stdint.h>

#include "config/config.h"
#include "io/metrics.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "sync/sync.h"
#include "train/source.h"
#include "train/train.h"

typedef struct ht_async_job {
    const ht_config *cfg;
    const ht_sync_layout *L;
    int rank;
    double slowdown; /* emulated, this rank */
    ht_dev *dev;
    ht_model *model;
    ht_optim *opt;
    const ht_lr_sched *sched;
    ht_source *src;
    ht_metrics *metrics; /* rank 0, or NULL */
    int64_t total;       /* budget in global steps of train.batch */
    double t_start;      /* ht_now() when the job started (for first_step_s) */
} ht_async_job;

/* Trains until the policy stops the workers, then leaves the final model in worker 0's
 * parameters and evaluates it there (res on rank 0). *stats: this worker's counters. */
int ht_train_async(const ht_async_job *job, ht_train_result *res, ht_sync_stats *stats);

#endif
