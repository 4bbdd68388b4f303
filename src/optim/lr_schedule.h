/* Learning-rate schedules: a pure function of (schedule, step, total steps), no OpenCL and no
 * state, so the trainer, a resumed run and the tests all get the same rate for a step. */
#ifndef HT_OPTIM_LR_SCHEDULE_H
#define HT_OPTIM_LR_SCHEDULE_H

#include <stdint.h>

#include "config/config.h"

enum { HT_SCHED_CONSTANT = 0, HT_SCHED_STEP = 1, HT_SCHED_COSINE = 2 };

typedef struct ht_lr_sched {
    int type;          /* HT_SCHED_* */
    double lr;         /* base (peak) rate */
    int64_t warmup;    /* linear warmup steps; 0 = none */
    int64_t step_size; /* step: decay every step_size steps after warmup (<= 0: never) */
    double gamma;      /* step: factor per decay */
    double min_lr;     /* cosine: final rate */
} ht_lr_sched;

/* From the optim group of a validated config (schedule "constant" | "step" | "cosine");
 * an unknown name exits 2. */
ht_lr_sched ht_lr_sched_from(const ht_config *cfg);

/* The rate for 0-based step `step` of a run of total_steps steps:
 *   step < warmup:  lr * (step + 1) / warmup      (reaches lr on the last warmup step)
 *   constant:       lr
 *   step:           lr * gamma^floor((step - warmup) / step_size)
 *   cosine:         min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,
 *                   p = (step - warmup) / (total_steps - warmup) clamped to [0, 1]
 *                   (p = 1 when total_steps <= warmup), as HF's cosine-with-warmup
 * Negative steps are treated as step 0. */
double ht_lr_at(const ht_lr_sched *s, int64_t step, int64_t total_steps);

#endif
