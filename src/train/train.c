/* The training loop of one process on one OpenCL device: build everything from the
 * config, resume if asked, then step: sample a batch (a pure function of seed and step),
 * forward, backward, optimizer update; evaluate, log, checkpoint; summarise. */
#include "train/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err.h"
#include "core/log.h"
#include "data/data.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    if (g_stop) signal(sig, SIG_DFL); /* a second ^C ends at once */
    g_stop = 1;
}

void ht_train_install_signal_handlers(void) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
}

/* ---------------------------------------------------------------- data */

static int load_data(const ht_config *cfg, ht_dataset *train, ht_dataset *val) {
    ht_dataset all = {0};
    int rc;
    if (!strcmp(cfg->data.kind, "idx"))
        rc = ht_idx_load(&all, cfg->data.images, cfg->data.labels);
    else
        rc = ht_synthetic_make(&all, cfg->data.samples, cfg->data.features, cfg->data.classes,
                               cfg->data.seed);
    if (rc != HT_OK) return rc;
    rc = ht_dataset_split(&all, cfg->data.val_fraction, train, val);
    ht_dataset_free(&all);
    if (rc == HT_OK && train->n < 1)
        rc = ht_error(HT_EINPUT, "%s: data.val_fraction %.3g leaves no training samples",
                      cfg->source, cfg->data.val_fraction);
    return rc;
}

/* Mean loss and accuracy over a whole dataset, forward only, in batches of max_batch. */
static void evaluate(ht_model *m, const ht_dataset *ds, float *x, int32_t *y, int *idx,
                     double *loss, double *acc) {
    double lsum = 0;
    long correct = 0;
    for (int s = 0; s < ds->n; s += m->max_batch) {
        int b = ds->n - s < m->max_batch ? ds->n - s : m->max_batch;
        for (int i = 0; i < b; i++) idx[i] = s + i;
        ht_dataset_gather(ds, idx, b, x, y);
        ht_model_set_batch(m, x, y, b);
        ht_model_forward(m, b, 0);
        double l;
        int c;
        ht_model_loss(m, b, &l, &c);
        lsum += l;
        correct += c;
    }
    *loss = ds->n ? lsum / ds->n : NAN;
    *acc = ds->n ? (double)correct / ds->n : NAN;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---------------------------------------------------------------- run */

int ht_train(const ht_config *cfg, const ht_train_opts *opts, ht_train_result *res) {
    double t_start = ht_now();
    memset(res, 0, sizeof *res);
    int rc, dev_index = 0;
    const char *sel = opts->device ? opts->device : cfg->device.select;
    if ((rc = ht_ocl_select(sel, &dev_index)) != HT_OK) return rc;

    ht_dataset train = {0}, val = {0};
    if ((rc = load_data(cfg, &train, &val)) != HT_OK) return rc;
    ht_log_info("data: %d training, %d validation samples, %d features, %d classes", train.n,
                val.n, train.features, train.classes);

    ht_dev_opts dopts = ht_dev_opts_default();
    dopts.cache = cfg->device.cache;
    dopts.cache_dir = cfg->device.cache_dir;
    dopts.tuning = cfg->device.tuning;
    dopts.profile = opts->profile;
    ht_dev *dev = NULL;
    if ((rc = ht_dev_open(&dev, dev_index, &dopts)) != HT_OK) goto out_data;
    int hit = 0;
    double tb = ht_dev_build_seconds(dev, &hit);
    ht_log_info("device %d: %s (%s), kernels %s in %.2f s", dev_index, ht_dev_info(dev)->name,
                ht_dev_info(dev)->platform, hit ? "loaded from cache" : "built", tb);

    const int B = cfg->train.batch;
    ht_model model;
    if ((rc = ht_model_mlp(&model, dev, train.features, cfg->model.hidden, cfg->model.nhidden,
                           train.classes, cfg->model.activation, B)) != HT_OK)
        goto out_dev;
    ht_model_init_params(&model, cfg->train.seed);
    ht_optim_cfg ocfg = ht_optim_cfg_from(cfg);
    ht_optim opt;
    ht_optim_init(&opt, dev, &ocfg, model.nparams);
    ht_lr_sched sched = ht_lr_sched_from(cfg);
    int64_t total = cfg->train.steps > 0
                        ? cfg->train.steps
                        : (int64_t)ceil(cfg->train.epochs * (double)train.n / (double)B);
    if (total < 1) total = 1;

    int64_t step = 0;
    const char *ckpt = cfg->checkpoint.path;
    if (opts->resume) {
        if (!*ckpt) {
            rc = ht_error(HT_EINPUT, "--resume needs checkpoint.path in %s", cfg->source);
            goto out_model;
        }
        if (file_exists(ckpt)) {
            if ((rc = ht_checkpoint_load(ckpt, &model, &opt, &step, cfg->optim.type)) != HT_OK)
                goto out_model;
            ht_log_info("resumed from %s at step %lld", ckpt, (long long)step);
        } else {
            ht_log_info("no checkpoint at %s yet; starting from step 0", ckpt);
        }
    }
    ht_log_info("model: %s, %zu parameters; %lld steps of batch %d, optimizer %s",
                cfg->model.type, model.nparams, (long long)total, B, cfg->optim.type);

    ht_metrics *metrics = NULL;
    if (*cfg->log.metrics &&
        (rc = ht_metrics_open(&metrics, cfg->log.metrics, opts->resume && step > 0)) != HT_OK)
        goto out_model;

    ht_sampler sampler;
    ht_sampler_init(&sampler, train.n, cfg->train.seed, cfg->data.shuffle);
    int emax = B > val.n ? B : val.n;
    float *x = ht_xmalloc((size_t)emax * train.features * sizeof(float));
    int32_t *y = ht_xmalloc((size_t)emax * sizeof(int32_t));
    int *idx = ht_xmalloc((size_t)emax * sizeof(int));
    ht_progress prog;
    ht_progress_init(&prog, stderr, total, cfg->log.progress, cfg->log.every);

    double vloss = NAN, vacc = NAN, t_loop = ht_now(), t_mark = t_loop, t_eval = 0;
    int64_t mark_step = step, start_step = step;
    int64_t end = total;
    if (opts->stop_after > 0 && step + opts->stop_after < total) end = step + opts->stop_after;
    for (; step < end && !g_stop; step++) {
        float lr = (float)ht_lr_at(&sched, step, total);
        ht_sampler_batch(&sampler, step, B, idx);
        ht_dataset_gather(&train, idx, B, x, y);
        ht_model_set_batch(&model, x, y, B);
        ht_model_forward(&model, B, 1);
        ht_model_backward(&model, B, 1.0f / (float)B);
        ht_optim_step(&opt, model.params, model.grads, lr);
        int64_t done = step + 1;
        if (step == start_step) {
            ht_dev_finish(dev);
            res->first_step_s = ht_now() - t_start;
            ht_log_debug("first step done %.2f s after start", res->first_step_s);
        }
        if (done % cfg->log.every == 0 || done == total) {
            double lsum;
            int correct;
            ht_model_loss(&model, B, &lsum, &correct);
            double now = ht_now();
            double sps = (double)(done - mark_step) * B / (now - t_mark);
            if (!isfinite(lsum)) {
                ht_progress_finish(&prog);
                rc = ht_error(HT_ERUNTIME,
                              "loss became %g at step %lld (learning rate %g too high?); the "
                              "last checkpoint, if any, is from before",
                              lsum, (long long)done, lr);
                goto out_loop;
            }
            if (metrics) ht_metrics_train(metrics, done, lsum / B, lr, sps);
            ht_progress_update(&prog, done, lsum / B, lr, sps);
            t_mark = now;
            mark_step = done;
        }
        if (cfg->train.eval_every > 0 && done % cfg->train.eval_every == 0 && done != total) {
            double t0 = ht_now();
            evaluate(&model, &val, x, y, idx, &vloss, &vacc);
            t_eval += ht_now() - t0;
            if (metrics) ht_metrics_eval(metrics, done, vloss, vacc);
            ht_progress_note(&prog, "step %lld: val_loss %.4f val_acc %.2f%%", (long long)done,
                             vloss, 100 * vacc);
            t_mark = ht_now(); /* evaluation time is not training throughput */
            mark_step = done;
        }
        if (*ckpt && cfg->checkpoint.every > 0 && done % cfg->checkpoint.every == 0 &&
            (rc = ht_checkpoint_save(ckpt, &model, &opt, done, cfg->optim.type)) != HT_OK)
            goto out_loop;
    }
    ht_dev_finish(dev);
    double t_train = ht_now() - t_loop - t_eval;
    ht_progress_finish(&prog);
    if (*ckpt && step > start_step &&
        (rc = ht_checkpoint_save(ckpt, &model, &opt, step, cfg->optim.type)) != HT_OK)
        goto out_loop;
    if (step < total) {
        ht_log_info("stopped at step %lld of %lld%s%s", (long long)step, (long long)total,
                    *ckpt ? "; checkpoint saved to " : " (no checkpoint.path set)", ckpt);
    }
    if (g_stop) {
        rc = ht_error(HT_ERUNTIME, "interrupted at step %lld%s%s", (long long)step,
                      *ckpt ? "; checkpoint saved to " : " (no checkpoint.path set)", ckpt);
        goto out_loop;
    }
    evaluate(&model, &val, x, y, idx, &vloss, &vacc);
    if (metrics) ht_metrics_eval(metrics, step, vloss, vacc);
    res->steps = step;
    res->val_loss = vloss;
    res->val_acc = vacc;
    res->samples_per_s = step > start_step ? (double)(step - start_step) * B / t_train : 0;
    if (opts->profile) ht_dev_profile_report(dev, stderr);
    rc = HT_OK;

out_loop:
    free(x);
    free(y);
    free(idx);
    ht_sampler_free(&sampler);
    if (metrics && ht_metrics_close(metrics) != HT_OK && rc == HT_OK) rc = HT_ERUNTIME;
out_model:
    ht_optim_free(&opt);
    ht_model_free(&model);
out_dev:
    ht_dev_close(dev);
out_data:
    ht_dataset_free(&train);
    ht_dataset_free(&val);
    return rc;
}
