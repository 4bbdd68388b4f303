/* Learning-rate schedules (pure): linear warmup, then constant, step decay or cosine
 * annealing (Loshchilov & Hutter, SGDR, without restarts). */
#include "optim/lr_schedule.h"

#include <math.h>
#include <string.h>

#include "core/err.h"

#define HT_PI 3.14159265358979323846 /* M_PI is not in strict C11 + POSIX */

ht_lr_sched ht_lr_sched_from(const ht_config *cfg) {
    ht_lr_sched s = {0};
    const char *name = cfg->optim.schedule;
    if (!strcmp(name, "constant"))
        s.type = HT_SCHED_CONSTANT;
    else if (!strcmp(name, "step"))
        s.type = HT_SCHED_STEP;
    else if (!strcmp(name, "cosine"))
        s.type = HT_SCHED_COSINE;
    else
        ht_die(HT_EINPUT,
               "%s: key 'optim.schedule': found \"%s\", expected one of \"constant\", \"step\", "
               "\"cosine\"",
               cfg->source, name);
    s.lr = cfg->optim.lr;
    s.warmup = cfg->optim.warmup;
    s.step_size = cfg->optim.step_size;
    s.gamma = cfg->optim.gamma;
    s.min_lr = cfg->optim.min_lr;
    return s;
}

double ht_lr_at(const ht_lr_sched *s, int64_t step, int64_t total_steps) {
    if (step < 0) step = 0;
    if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    const int64_t after = step - (s->warmup > 0 ? s->warmup : 0);
    switch (s->type) {
    case HT_SCHED_STEP:
        if (s->step_size <= 0) return s->lr;
        return s->lr * pow(s->gamma, (double)(after / s->step_size));
    case HT_SCHED_COSINE: {
        const int64_t span = total_steps - (s->warmup > 0 ? s->warmup : 0);
        double p = span > 0 ? (double)after / (double)span : 1.0;
        if (p > 1.0) p = 1.0;
        return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(HT_PI * p));
    }
    default:
        return s->lr;
    }
}
