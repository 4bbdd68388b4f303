/* The worker loop of the asynchronous policies (see async.h). Worker w's local step k trains
 * on its slice of global batch k, the slice bsp would give it with equal shares, so that a
 * worker sees fresh samples at every step whatever its speed, and workers in lockstep (preduce
 * with P = all) see exactly bsp's batches. The learning rate follows the global step (samples
 * over all workers / train.batch), as the policy last reported it. Rank 0 logs, shows
 * progress and evaluates its current model every train.eval_every global steps (the metrics'
 * time_s leaves its evaluation time out). */
#include "train/async.h"

#include <math.h>
#include <stdio.h>

#include "core/err.h"
#include "core/log.h"
#include "io/progress.h"

int ht_train_async(const ht_async_job *j, ht_train_result *res, ht_sync_stats *stats) {
    const ht_config *cfg = j->cfg;
    const int B = cfg->train.batch, w = j->rank;
    int lo, hi;
    ht_sync_local_range(cfg, j->L, w, &lo, &hi);
    const int b = hi - lo;
    const double rows = (double)b * j->model->rows;
    ht_sync *s = ht_sync_open(cfg, j->L, w, j->model, j->opt, j->total);
    if (w == 0)
        ht_log_info("sync: %s, %d workers with %d samples per local step, %d %s", cfg->sync.mode,
                    j->L->workers, b, j->L->extra,
                    j->L->mode <= HT_SYNC_DASP ? "parameter server(s)" : "coordinator");
    ht_progress prog;
    int show = w == 0 && ht_log_level() >= HT_LOG_INFO;
    ht_progress_init(&prog, stderr, j->total, show ? cfg->log.progress : "none", cfg->log.every);
    int stop = 0;
    int64_t global = 0, local = 0, next_log = cfg->log.every, next_eval = cfg->train.eval_every;
    double t_loop = ht_now(), t_eval = 0, t_mark = t_loop, vloss = NAN, vacc = NAN;
    int64_t mark = 0;
    while (!stop) {
        int64_t g = global / B;
        float lr = (float)ht_lr_at(j->sched, g < j->total ? g : j->total - 1, j->total);
        double tc = ht_now();
        ht_source_batch(j->src, j->model, local, B, lo, hi);
        ht_model_set_training(j->model, 1, cfg->train.seed, local);
        ht_model_forward(j->model, b, 1);
        ht_sync_backward(s, b, (float)(1.0 / rows), tc, NULL);
        ht_dev_finish(j->dev);
        double compute = ht_now() - tc;
        ht_sleep((j->slowdown - 1) * compute); /* emulated heterogeneity (DESIGN.md) */
        ht_sync_add_compute(s, compute * j->slowdown);
        ht_sync_step(s, b, lr, &stop, &global);
        if (local++ == 0) res->first_step_s = ht_now() - j->t_start;
        if (w != 0) continue;
        g = global / B;
        if (g >= next_log || stop) {
            double lsum;
            int correct;
            ht_model_loss(j->model, b, &lsum, &correct);
            double now = ht_now(), sps = (double)(global - mark) / (now - t_mark);
            if (!isfinite(lsum)) /* ends every rank of the job (src/comm's exit hook) */
                ht_die(HT_ERUNTIME,
                       "loss became %g at global step %lld (learning rate %g too "
                       "high?)",
                       lsum, (long long)g, lr);
            if (j->metrics) ht_metrics_train(j->metrics, g, lsum / rows, lr, sps);
            ht_progress_update(&prog, g < j->total ? g : j->total, lsum / rows, lr, sps);
            t_mark = now;
            mark = global;
            while (next_log <= g)
                next_log += cfg->log.every;
        }
        if (cfg->train.eval_every > 0 && g >= next_eval && !stop) {
            double t0 = ht_now(), at = t0 - t_loop - t_eval;
            ht_source_evaluate(j->model, j->src, &vloss, &vacc);
            t_eval += ht_now() - t0;
            if (j->metrics) ht_metrics_eval(j->metrics, g, vloss, vacc, at);
            ht_progress_note(&prog, "step %lld: val_loss %.4f val_acc %.2f%%", (long long)g, vloss,
                             100 * vacc);
            while (next_eval <= g)
                next_eval += cfg->train.eval_every;
        }
    }
    double t_train = ht_now() - t_loop - t_eval;
    ht_progress_finish(&prog);
    ht_sync_finish(s);
    if (w == 0) {
        ht_source_evaluate(j->model, j->src, &vloss, &vacc);
        if (j->metrics)
            ht_metrics_eval(j->metrics, global / B, vloss, vacc, ht_now() - t_loop - t_eval);
        res->steps = global / B;
        res->val_loss = vloss;
        res->val_acc = vacc;
        res->samples_per_s = global / t_train;
    }
    *stats = ht_sync_close(s);
    return HT_OK;
}
