/* Learning-rate schedules (pure, no device): hand-computed rates at warmup boundaries, step
 * decays, and cosine annealing at its start, middle and end, with and without min_lr. */
#include <math.h>
#include <string.h>

#include "optim/lr_schedule.h"
#include "tap.h"

static void expect(const ht_lr_sched *s, int64_t step, int64_t total, double want,
                   const char *what) {
    double got = ht_lr_at(s, step, total);
    tap_ok(fabs(got - want) <= 1e-12 * (fabs(want) + 1e-12),
           "%s: step %lld of %lld -> %.15g (want %.15g)", what, (long long)step, (long long)total,
           got, want);
}

int main(void) {
    /* constant with warmup 4: lr*(step+1)/4 for steps 0..3, then lr */
    ht_lr_sched c = {.type = HT_SCHED_CONSTANT, .lr = 0.1, .warmup = 4};
    expect(&c, 0, 100, 0.025, "constant warmup first step");
    expect(&c, 1, 100, 0.05, "constant warmup");
    expect(&c, 3, 100, 0.1, "constant last warmup step reaches lr");
    expect(&c, 4, 100, 0.1, "constant after warmup");
    expect(&c, 99, 100, 0.1, "constant last step");
    expect(&c, -3, 100, 0.025, "negative step is step 0");
    c.warmup = 0;
    expect(&c, 0, 100, 0.1, "constant without warmup");

    /* step: warmup 2, then halve every 3 steps counted from the end of warmup */
    ht_lr_sched st = {.type = HT_SCHED_STEP, .lr = 0.1, .warmup = 2, .step_size = 3, .gamma = 0.5};
    expect(&st, 0, 50, 0.05, "step warmup");
    expect(&st, 1, 50, 0.1, "step last warmup step");
    expect(&st, 2, 50, 0.1, "step first after warmup");
    expect(&st, 4, 50, 0.1, "step just before first decay");
    expect(&st, 5, 50, 0.05, "step first decay");
    expect(&st, 7, 50, 0.05, "step before second decay");
    expect(&st, 8, 50, 0.025, "step second decay");
    expect(&st, 11, 50, 0.0125, "step third decay");
    ht_lr_sched st0 = {.type = HT_SCHED_STEP, .lr = 0.3, .step_size = 10, .gamma = 0.1};
    expect(&st0, 9, 50, 0.3, "step no warmup, before decay");
    expect(&st0, 10, 50, 0.03, "step no warmup, first decay");
    expect(&st0, 25, 50, 0.003, "step no warmup, two decays");
    st0.step_size = 0;
    expect(&st0, 25, 50, 0.3, "step_size 0 never decays");

    /* cosine over 100 steps, no warmup, min_lr 0 */
    ht_lr_sched cs = {.type = HT_SCHED_COSINE, .lr = 1.0};
    expect(&cs, 0, 100, 1.0, "cosine start");
    expect(&cs, 25, 100, 0.5 + 0.5 * sqrt(0.5), "cosine quarter");
    expect(&cs, 50, 100, 0.5, "cosine middle");
    expect(&cs, 100, 100, 0.0, "cosine end");
    expect(&cs, 250, 100, 0.0, "cosine past the end is clamped");

    /* cosine with warmup 10 and min_lr 0.1 over 110 steps: progress counted from step 10 */
    ht_lr_sched cw = {.type = HT_SCHED_COSINE, .lr = 1.1, .warmup = 10, .min_lr = 0.1};
    expect(&cw, 0, 110, 0.11, "cosine warmup first step");
    expect(&cw, 4, 110, 0.55, "cosine warmup middle");
    expect(&cw, 9, 110, 1.1, "cosine last warmup step reaches lr");
    expect(&cw, 10, 110, 1.1, "cosine start after warmup");
    expect(&cw, 60, 110, 0.6, "cosine middle with min_lr");
    expect(&cw, 85, 110, 0.1 + 0.5 * (1.0 - sqrt(0.5)), "cosine three quarters with min_lr");
    expect(&cw, 110, 110, 0.1, "cosine end is min_lr");
    expect(&cw, 12, 5, 0.1, "cosine with total_steps <= warmup: min_lr after warmup");

    /* from a config's optim group */
    ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.optim.schedule, "step");
    cfg.optim.lr = 0.2;
    cfg.optim.warmup = 3;
    cfg.optim.step_size = 7;
    cfg.optim.gamma = 0.25;
    cfg.optim.min_lr = 0.01;
    ht_lr_sched f = ht_lr_sched_from(&cfg);
    tap_ok(f.type == HT_SCHED_STEP && f.lr == 0.2 && f.warmup == 3 && f.step_size == 7 &&
               f.gamma == 0.25 && f.min_lr == 0.01,
           "ht_lr_sched_from copies the optim group");
    expect(&f, 10, 100, 0.05, "from config: one decay at step 10");
    strcpy(cfg.optim.schedule, "cosine");
    tap_ok(ht_lr_sched_from(&cfg).type == HT_SCHED_COSINE, "schedule \"cosine\"");
    strcpy(cfg.optim.schedule, "constant");
    tap_ok(ht_lr_sched_from(&cfg).type == HT_SCHED_CONSTANT, "schedule \"constant\"");
    return tap_done();
}
