/* The table of engines, and the one path every engine reports its steps through: metrics,
 * progress, the NaN check, evaluation and checkpoints (see engine.h). */
#include "train/engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/vcost.h"
#include "plan/job.h"
#include "train/checkpoint.h"

/* The plan phase decides the engine (plan/job.h: the same order for hetsim). */
const ht_engine *ht_engine_for(const ht_config *cfg) {
    switch (ht_plan_engine_of(cfg)) {
    case HT_PLAN_PIPE: return &ht_engine_pipe;
    case HT_PLAN_ASYNC: return &ht_engine_async;
    default: return &ht_engine_dp;
    }
}

/* ------------------------------------------------------------ the shared step path */

/* The first multiple of `every` after `step` (every > 0). */
static int64_t next_multiple(int64_t step, int64_t every) { return (step / every + 1) * every; }

void ht_job_loop_start(ht_job *j) { ht_job_loop_start_at(j, j->start * j->B); }

void ht_job_engine_saves(ht_job *j) { j->rep.ckpt_every = 0; }

void ht_job_loop_start_at(ht_job *j, int64_t samples) {
    const ht_config *cfg = j->cfg;
    /* -q (log level below info) silences progress too; only rank 0 reports. */
    j->rep.show = j->rank == 0 && ht_log_level() >= HT_LOG_INFO;
    ht_progress_init(&j->rep.prog, stderr, j->total, j->rep.show ? cfg->log.progress : "none",
                     cfg->log.every);
    j->rep.vloss = j->rep.vacc = NAN;
    j->rep.t_loop = j->rep.t_mark = ht_now();
    j->rep.t_eval = 0;
    j->eng.samples = j->rep.mark_samples = j->rep.warm_samples = samples;
    j->rep.t_warm = j->rep.t_loop;
    j->rep.next_log = next_multiple(j->start, cfg->log.every);
    j->rep.next_eval = cfg->train.eval_every > 0 ? next_multiple(j->start, cfg->train.eval_every) : 0;
    j->rep.saved = -1;
}

void ht_job_first_step(ht_job *j, ht_train_result *res) {
    if (j->dev) ht_dev_finish(j->dev);
    double now = ht_now();
    res->first_step_s = now - j->t_start;
    ht_log_debug("first step done %.2f s after start", res->first_step_s);
    j->rep.t_warm = j->rep.t_mark = now;
    j->rep.warm_samples = j->rep.mark_samples = j->eng.samples;
}

int ht_job_logs_at(const ht_job *j, int64_t done) { return done >= j->rep.next_log || j->eng.last; }

int ht_job_check_loss(ht_job *j, int64_t done, double loss_sum, float lr) {
    if (isfinite(loss_sum)) return HT_OK;
    ht_progress_finish(&j->rep.prog);
    return ht_error(HT_ERUNTIME,
                    "loss became %g at step %lld (learning rate %g too high?); the last "
                    "checkpoint, if any, is from before",
                    loss_sum, (long long)done, lr);
}

/* HT_ERUNTIME naming the first step the device-side watch (j->eng.loss_flag) marked, if any: a
 * 4-byte read at a point where the engine synchronises anyway. */
static int check_flag(ht_job *j) {
    if (!j->eng.loss_flag) return HT_OK;
    int32_t bad = INT32_MAX;
    ht_buf_read(j->dev, j->eng.loss_flag, 0, sizeof bad, &bad);
    if (bad == INT32_MAX) return HT_OK;
    ht_progress_finish(&j->rep.prog);
    return ht_error(HT_ERUNTIME,
                    "loss became non-finite at step %d (learning rate %g too high?); the last "
                    "checkpoint, if any, is from before",
                    bad, ht_lr_at(&j->sched, bad - 1, j->total));
}

/* The loss of step `done` to metrics and progress. */
static int report(ht_job *j, int64_t done, double loss_sum, float lr) {
    double now = ht_now();
    double sps = (double)(j->eng.samples - j->rep.mark_samples) / (now - j->rep.t_mark);
    if (j->metrics) ht_metrics_train(j->metrics, done, loss_sum / j->rows, lr, sps);
    ht_progress_update(&j->rep.prog, done < j->total ? done : j->total, loss_sum / j->rows, lr, sps);
    j->rep.t_mark = now;
    j->rep.mark_samples = j->eng.samples;
    while (j->rep.next_log <= done)
        j->rep.next_log += j->cfg->log.every;
    return HT_OK;
}

/* -v: the bytes in device buffers now, so that a long run (tools/bench/soak.sh) shows
 * whether they grow; evaluation and checkpoints allocate nothing that should outlive them. */
static void dev_memory(const ht_job *j, int64_t done) {
    if (!j->dev || ht_log_level() < HT_LOG_DEBUG) return;
    uint64_t now = 0, peak = 0;
    ht_dev_mem(j->dev, &now, &peak, NULL, 0);
    ht_log_debug("step %lld: device memory %llu bytes in buffers (peak %llu)", (long long)done,
                 (unsigned long long)now, (unsigned long long)peak);
}

/* Rank 0 evaluates its model at step `done`. Under emulation its forward passes take no
 * virtual time (ht_vcost_pause): the asynchronous policies' other workers train on while rank
 * 0 evaluates, so time_s, which leaves the evaluations out, would otherwise run behind them
 * (and worker 0 would lose steps to it). */
static void evaluate(ht_job *j, int64_t done) {
    double t0 = ht_now();
    ht_vcost_pause(1);
    if (j->eng.evaluate)
        j->eng.evaluate(j, &j->rep.vloss, &j->rep.vacc);
    else if (j->eng.gather)
        j->eng.gather(j);
    if (j->rank == 0 && !j->eng.evaluate)
        ht_source_evaluate(&j->model, &j->src, &j->rep.vloss, &j->rep.vacc);
    ht_vcost_pause(0);
    if (j->rank == 0) {
        j->rep.t_eval += ht_now() - t0;
        if (j->metrics)
            ht_metrics_eval(j->metrics, done, j->rep.vloss, j->rep.vacc, ht_now() - j->rep.t_loop - j->rep.t_eval);
        ht_progress_note(&j->rep.prog, "step %lld: val_loss %.4f val_acc %.2f%%", (long long)done,
                         j->rep.vloss, 100 * j->rep.vacc);
        j->rep.t_mark = ht_now(); /* evaluation time is not training throughput */
        j->rep.mark_samples = j->eng.samples;
    }
    dev_memory(j, done); /* every rank: each has its own device */
    while (j->rep.next_eval <= done)
        j->rep.next_eval += j->cfg->train.eval_every;
}

int ht_job_save_cuts(ht_job *j, int64_t step, int k, const size_t *cut, const int *writer) {
    const char *p = j->cfg->checkpoint.path, *on = j->cfg->optim.type;
    int r = ht_comm_rank(), w = ht_comm_size(), rc = HT_OK;
    /* a commit that a kill interrupted is finished before any rank writes a .next */
    double rec = r == 0 && ht_st_set_recover(p) != HT_OK;
    ht_comm_allreduce_sum_f64(&rec, 1);
    if (rec > 0)
        return r == 0 ? HT_ERUNTIME
                      : ht_error(HT_ERUNTIME, "step %lld: rank 0 could not finish the previous "
                                              "checkpoint's commit", (long long)step);
    for (int i = 0; rc == HT_OK && i < k; i++)
        if ((writer ? writer[i] : i % w) == r)
            rc = ht_checkpoint_save_shard(p, i + 1, k, &j->model, &j->opt, step, on, cut[i],
                                          cut[i + 1]);
    double bad = rc != HT_OK;
    ht_comm_allreduce_sum_f64(&bad, 1); /* every shard is a .next now: the barrier */
    if (bad > 0 && rc == HT_OK)
        rc = ht_error(HT_ERUNTIME, "step %lld: another rank could not write its checkpoint "
                                   "shard; the previous checkpoint is kept", (long long)step);
    if (bad == 0 && r == 0) rc = ht_st_set_commit(p, k, step);
    double c = bad == 0 && rc != HT_OK;
    ht_comm_allreduce_sum_f64(&c, 1);
    if (c > 0 && rc == HT_OK)
        rc = ht_error(HT_ERUNTIME, "step %lld: rank 0 could not commit the checkpoint set",
                      (long long)step);
    return rc;
}

/* Data parallel: rank r writes shards r+1, r+1+world, ...; rank 0 commits once all are
 * written; no rank starts the next save before the commit's renames are done. */
static int save_shards(ht_job *j, int64_t step, int k) {
    if (j->eng.zero_cut) k = ht_comm_size(); /* a rank holds only its slice of the optimizer state */
    size_t *cut = ht_xmalloc((size_t)(k + 1) * sizeof *cut);
    if (j->eng.zero_cut)
        memcpy(cut, j->eng.zero_cut, (size_t)(k + 1) * sizeof *cut);
    else
        ht_checkpoint_shard_ranges(&j->model, NULL, k, cut);
    int rc = ht_job_save_cuts(j, step, k, cut, NULL);
    free(cut);
    return rc;
}

static int save_set(ht_job *j, int64_t step, const ht_ckpt_extra *x) {
    int k = j->cfg->checkpoint.shards;
    if (x)
        return ht_error(HT_EINPUT, "checkpoint.shards = %d: this engine keeps per-worker state "
                                   "that only a single checkpoint file holds; expected "
                                   "checkpoint.shards = 0", k);
    if (j->eng.all_hold && ht_comm_size() > 1) return save_shards(j, step, k);
    if (j->rank != 0) return HT_OK;
    return ht_checkpoint_save_set(j->cfg->checkpoint.path, k, &j->model, &j->opt, step,
                                  j->cfg->optim.type);
}

int ht_job_save(ht_job *j, int64_t step, const ht_ckpt_extra *x) {
    int rc = check_flag(j); /* never a checkpoint after a non-finite loss */
    if (rc != HT_OK) return rc;
    j->rep.saved = step;
    if (j->eng.save) return x ? ht_error(HT_EINPUT, "this engine saves no extras") : j->eng.save(j, step);
    if (j->eng.gather) j->eng.gather(j);
    if (j->cfg->checkpoint.shards > 0 || j->eng.zero_cut) return save_set(j, step, x);
    if (j->rank != 0) return HT_OK;
    return ht_checkpoint_save_ex(j->cfg->checkpoint.path, &j->model, &j->opt, step,
                                 j->cfg->optim.type, x);
}

static int save(ht_job *j, int64_t step) { return ht_job_save(j, step, NULL); }

int ht_job_quiet_at(const ht_job *j, int64_t done) {
    if (j->eng.last || (j->rep.next_eval > 0 && done >= j->rep.next_eval)) return 0;
    return !(*j->cfg->checkpoint.path && j->rep.ckpt_every > 0 && done % j->rep.ckpt_every == 0);
}

int ht_job_after_step(ht_job *j, int64_t done, double loss_sum, float lr) {
    int rc;
    /* the flag first: it names the first bad step, which may be before this one */
    if (ht_job_logs_at(j, done) && (rc = check_flag(j)) != HT_OK) return rc;
    if ((rc = ht_job_check_loss(j, done, loss_sum, lr)) != HT_OK) return rc;
    if (ht_job_logs_at(j, done) && (rc = report(j, done, loss_sum, lr)) != HT_OK) return rc;
    /* the final evaluation is ht_job_loop_finish's */
    if (j->rep.next_eval > 0 && done >= j->rep.next_eval && !j->eng.last) evaluate(j, done);
    if (*j->cfg->checkpoint.path && j->rep.ckpt_every > 0 && done % j->rep.ckpt_every == 0 &&
        (rc = save(j, done)) != HT_OK)
        return rc;
    return HT_OK;
}

int ht_job_loop_finish(ht_job *j, int64_t step, ht_train_result *res) {
    const char *ckpt = j->cfg->checkpoint.path;
    if (j->dev) ht_dev_finish(j->dev);
    double now = ht_now(), t_train = now - j->rep.t_loop - j->rep.t_eval;
    ht_progress_finish(&j->rep.prog);
    int rc, gathered = 0;
    if ((rc = check_flag(j)) != HT_OK) return rc;
    if (*ckpt && step > j->start && j->rep.saved != step) { /* an engine may have saved it */
        if ((rc = save(j, step)) != HT_OK) return rc;
        gathered = 1;
    }
    if (step < j->total && !j->eng.last)
        ht_log_info("stopped at step %lld of %lld%s%s", (long long)step, (long long)j->total,
                    *ckpt ? "; checkpoint saved to " : " (no checkpoint.path set)", ckpt);
    if (j->eng.interrupted)
        return ht_error(HT_ESTOPPED, "interrupted at step %lld%s%s", (long long)step,
                        *ckpt ? "; checkpoint saved to " : " (no checkpoint.path set)", ckpt);
    /* rank 0 evaluates for everyone (the others' models are identical, or gathered there) */
    if (j->eng.evaluate)
        j->eng.evaluate(j, &j->rep.vloss, &j->rep.vacc);
    else if (j->eng.gather && !gathered)
        j->eng.gather(j);
    if (j->rank == 0 && !j->eng.evaluate)
        ht_source_evaluate(&j->model, &j->src, &j->rep.vloss, &j->rep.vacc);
    dev_memory(j, step);
    if (j->metrics) ht_metrics_eval(j->metrics, step, j->rep.vloss, j->rep.vacc, t_train);
    /* from the end of the first step: evaluations all came after it */
    const int64_t done = j->eng.samples - j->rep.warm_samples;
    const double t_timed = now - j->rep.t_warm - j->rep.t_eval;
    res->steps = step;
    res->val_loss = j->rep.vloss;
    res->val_acc = j->rep.vacc;
    res->samples_per_s = done > 0 && t_timed > 0 ? (double)done / t_timed : 0;
    return HT_OK;
}
