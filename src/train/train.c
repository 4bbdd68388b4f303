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

#include "build/build.h"
#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/data.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "io/trace.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "plan/plan.h"
#include "prof/profile.h"
#include "sync/sync.h"
#include "train/async.h"
#include "train/checkpoint.h"
#include "train/cluster.h"
#include "train/source.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    if (g_stop) signal(sig, SIG_DFL); /* a second ^C ends at once */
    g_stop = 1;
}

void ht_train_install_signal_handlers(void) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
}

/* Ends a trace span after the device has finished its work (only when tracing: the extra
 * synchronisation would cost time otherwise). */
static void trace_end(ht_dev *dev) {
    if (!ht_trace_on()) return;
    ht_dev_finish(dev);
    ht_trace_end();
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---------------------------------------------------------------- run */

/* This rank's speed (samples/s at `share`) from the hetprof profile in cluster.profile: the
 * entry of the same device name and platform. Bad or non-matching profiles are bad input. */
/* This rank's cost model (samples/s beyond a fixed cost per step, and that cost) from the
 * profile's per-layer times at its share s and at s/4. */
static int profile_model(const ht_config *cfg, const ht_model *m, const ht_devinfo *di, int share,
                         double *speed, double *fixed) {
    ht_profile *p = ht_xmalloc(sizeof *p);
    int rc = ht_profile_load(cfg->cluster.profile, p);
    int found = -1;
    for (int i = 0; rc == HT_OK && i < p->ndev && found < 0; i++)
        if (!strcmp(p->dev[i].name, di->name) && !strcmp(p->dev[i].platform, di->platform))
            found = i;
    if (rc == HT_OK && found < 0)
        rc = ht_error(HT_EINPUT,
                      "%s: no device '%s' (%s) in the profile; profile this rank's device with "
                      "hetprof --device, or set cluster.profile = \"\"",
                      cfg->cluster.profile, di->name, di->platform);
    const int s2 = share >= 4 ? share / 4 : share;
    double v1 = 0, v2 = 0;
    if (rc == HT_OK && !((v1 = ht_profile_speed(p, found, share)) > 0 &&
                         (v2 = ht_profile_speed(p, found, s2)) > 0))
        rc = ht_error(HT_EINPUT,
                      "%s: device '%s' has no layer times or samples_per_s to derive "
                      "a speed from; run hetprof -c %s",
                      cfg->cluster.profile, di->name, cfg->source);
    if (rc == HT_OK && strcmp(p->model, m->desc))
        ht_log_warn("%s was measured for model '%s', this job trains '%s'; speeds may mislead",
                    cfg->cluster.profile, p->model, m->desc);
    if (rc == HT_OK) {
        ht_plan_affine_from(share, share / v1, s2, s2 / v2, speed, fixed);
        ht_log_info("speed of this rank from %s: %.1f samples/s at %d (%.1f beyond a fixed "
                    "%.2f ms per step)",
                    cfg->cluster.profile, v1, share, *speed, 1e3 * *fixed);
    }
    free(p);
    return rc;
}

/* This rank's forward + backward on the first s samples of the loaded batch: the best of
 * `reps` timed passes, emulated slowdown included. */
static double time_pass(ht_model *m, int s, float scale, int reps, double slowdown) {
    double best = INFINITY;
    for (int k = 0; k < reps; k++) {
        double t0 = ht_now();
        ht_model_forward(m, s, 1);
        ht_model_backward(m, s, scale);
        ht_dev_finish(m->dev);
        double t = ht_now() - t0;
        if (t < best) best = t;
    }
    return best * slowdown;
}

int ht_train(const ht_config *cfg, const ht_train_opts *opts, ht_train_result *res) {
    double t_start = ht_now();
    memset(res, 0, sizeof *res);
    int rc, dev_index = 0;
    ht_cluster cl;
    if ((rc = ht_cluster_init(&cl, cfg)) != HT_OK) return rc;
    const int dp = cl.world > 1; /* data parallel under mpirun */
    if (dp) {
        ht_log_set_rank(cl.rank);
        /* one voice: rank 0 reports, the others only warn */
        if (cl.rank != 0 && ht_log_level() == HT_LOG_INFO) ht_log_set_level(HT_LOG_WARN);
    }
    ht_sync_layout L;
    if ((rc = ht_sync_layout_of(cfg, cl.world, &L)) != HT_OK) goto out_cluster;
    const int async = L.mode != HT_SYNC_BSP;
    if (async && (opts->resume || opts->trace || opts->stop_after)) {
        rc = ht_error(HT_EINPUT,
                      "%s: sync.mode \"%s\": --resume, --stop-after and --trace work "
                      "with sync.mode \"bsp\" only",
                      cfg->source, cfg->sync.mode);
        goto out_cluster;
    }
    const char *sel = ht_build_selector(cfg, opts->device, cl.rank);
    ht_sync_stats sstats = {0};
    if (cl.rank >= L.workers) { /* a parameter server or coordinator of an async policy */
        ht_cluster_announce(&cl, L.mode <= HT_SYNC_DASP ? "(parameter server)" : "(coordinator)");
        rc = ht_sync_serve(cfg, &L, cl.rank, sel, &sstats);
        if (rc != HT_OK) ht_die(rc, "%s", ht_errmsg()); /* the workers would wait for ever */
        ht_cluster_sync_records(&cl, &L, &sstats, NULL);
        goto out_cluster;
    }
    if ((rc = ht_ocl_select(sel, &dev_index)) != HT_OK) goto out_cluster;

    ht_source src = {0};
    if ((rc = ht_source_load(cfg, &src)) != HT_OK) goto out_data;

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
    if ((rc = ht_build_model(&model, dev, cfg, src.train.features, src.train.classes, B)) !=
        HT_OK)
        goto out_dev;
    if (ht_log_level() >= HT_LOG_DEBUG) ht_model_print(&model, stderr);
    ht_model_init_params(&model, cfg->train.seed);
    ht_optim_cfg ocfg = ht_optim_cfg_from(cfg);
    ht_optim opt;
    ht_optim_init(&opt, dev, &ocfg, model.nparams);
    ht_lr_sched sched = ht_lr_sched_from(cfg);
    /* an epoch: every training sample, or as many windows as the text has bytes */
    double per_epoch = src.text ? (double)src.ttrain.n / src.T : (double)src.train.n;
    int64_t total = cfg->train.steps > 0 ? cfg->train.steps
                                         : (int64_t)ceil(cfg->train.epochs * per_epoch / (double)B);
    if (total < 1) total = 1;
    /* the loss is the mean over B x rows rows (a GPT: every position of every window) */
    const double rows = (double)B * model.rows;

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
    ht_log_info("model: %s, %zu parameters; %lld steps of batch %d, optimizer %s", model.desc,
                model.nparams, (long long)total, B, cfg->optim.type);
    /* rank 0's parameters everywhere (after a resume every rank loaded the same file);
     * workers of an async policy start from the same seed, hence the same parameters */
    if (dp && !async) ht_cluster_bcast_params(&cl, &model);

    ht_metrics *metrics = NULL;
    ht_sync *bsp = NULL;
    if (cl.rank == 0 && *cfg->log.metrics &&
        (rc = ht_metrics_open(&metrics, cfg->log.metrics, opts->resume && step > 0)) != HT_OK)
        goto out_model;

    ht_source_start(&src, cfg, B);
    if (dp && !cfg->cluster.nshares && !strcmp(cfg->cluster.split, "speed")) {
        /* each rank's cost model, a fixed cost per step plus a cost per sample, from the
         * profile or from timed passes on its equal share s and on s/4 (the best of two
         * each, after one that compiles and allocates), emulated slowdown included */
        const int s1 = cl.hi - cl.lo, s2 = s1 >= 4 ? s1 / 4 : s1;
        double sp = 0, fx = 0;
        if (*cfg->cluster.profile) {
            if ((rc = profile_model(cfg, &model, ht_dev_info(dev), s1, &sp, &fx)) != HT_OK)
                goto out_loop;
            sp /= cl.slowdown, fx *= cl.slowdown;
        } else {
            ht_source_batch(&src, &model, 0, B, cl.lo, cl.hi);
            ht_model_set_training(&model, 1, cfg->train.seed, 0);
            const float scale = (float)(1.0 / rows);
            time_pass(&model, s1, scale, 1, 1);
            double t1 = time_pass(&model, s1, scale, 2, cl.slowdown);
            double t2 = time_pass(&model, s2, scale, 2, cl.slowdown);
            ht_plan_affine_from(s1, t1 > 1e-9 ? t1 : 1e-9, s2, t2, &sp, &fx);
        }
        if ((rc = ht_cluster_split_by_model(&cl, sp, fx)) != HT_OK) goto out_loop;
    }
    if (opts->trace) ht_cluster_trace_start(&cl);
    /* after the speed split, so that the table shows the shares used */
    ht_cluster_announce(&cl, ht_dev_info(dev)->name);
    if (async) { /* (no speed split or trace: ht_sync_layout_of and the checks above) */
        ht_async_job job = {cfg,  &L,     cl.rank, cl.slowdown, dev,   &model,
                            &opt, &sched, &src,    metrics,     total, t_start};
        if ((rc = ht_train_async(&job, res, &sstats)) != HT_OK ||
            (rc = ht_cluster_sync_records(&cl, &L, &sstats, metrics)) != HT_OK)
            goto out_loop;
        if (cl.rank == 0 && *ckpt)
            rc = ht_checkpoint_save(ckpt, &model, &opt, res->steps, cfg->optim.type);
        goto out_loop;
    }
    int b = cl.hi - cl.lo; /* this rank's share of the global batch (rebalancing moves it) */
    bsp = ht_sync_open(cfg, &L, cl.rank, &model, &opt, total); /* sums the gradients */
    int64_t global;
    ht_progress prog;
    /* -q (log level below info) silences progress too; only rank 0 reports. */
    int show = cl.rank == 0 && ht_log_level() >= HT_LOG_INFO;
    ht_progress_init(&prog, stderr, total, show ? cfg->log.progress : "none", cfg->log.every);

    double vloss = NAN, vacc = NAN, t_loop = ht_now(), t_mark = t_loop, t_eval = 0;
    int64_t mark_step = step, start_step = step;
    int64_t end = total;
    if (opts->stop_after > 0 && step + opts->stop_after < total) end = step + opts->stop_after;
    int stop = g_stop;
    for (; step < end && !stop; step++) {
        float lr = (float)ht_lr_at(&sched, step, total);
        double tc = ht_now();
        b = cl.hi - cl.lo;
        ht_trace_set_step(step);
        ht_trace_begin("batch");
        ht_source_batch(&src, &model, step, B, cl.lo, cl.hi);
        trace_end(dev);
        ht_model_set_training(&model, 1, cfg->train.seed, step);
        ht_trace_begin("forward");
        ht_model_forward(&model, b, 1);
        trace_end(dev);
        /* 1/rows with the GLOBAL batch: each rank's gradient is its part of the full-batch
         * mean, so the plain sum over ranks is exact whatever the shares */
        /* under mpirun: backward in gradient buckets, each all-reduced while the layers
         * below still compute (sync/bsp.c; cluster.overlap = false: all after) */
        ht_trace_begin("backward + reduce");
        ht_sync_backward(bsp, b, (float)(1.0 / rows), tc, &g_stop);
        trace_end(dev);
        ht_trace_begin("optimizer step");
        ht_sync_step(bsp, b, lr, &stop, &global);
        trace_end(dev);
        ht_sync_stats st_now = ht_sync_stats_now(bsp);
        int64_t done = step + 1;
        if (step == start_step) {
            ht_dev_finish(dev);
            res->first_step_s = ht_now() - t_start;
            ht_log_debug("first step done %.2f s after start", res->first_step_s);
        }
        if (done % cfg->log.every == 0 || done == total) {
            double lsum;
            int correct;
            ht_model_loss(&model, b, &lsum, &correct);
            if (dp) { /* global sums: every rank gets the same numbers */
                double v[2] = {lsum, correct};
                ht_cluster_sum(v, 2);
                lsum = v[0];
                correct = (int)v[1];
                if ((rc = ht_cluster_record(&cl, metrics, done, &st_now)) != HT_OK) goto out_loop;
            }
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
            if (metrics) ht_metrics_train(metrics, done, lsum / rows, lr, sps);
            ht_progress_update(&prog, done, lsum / rows, lr, sps);
            t_mark = now;
            mark_step = done;
        }
        if (cl.rank == 0 && cfg->train.eval_every > 0 && done % cfg->train.eval_every == 0 &&
            done != total) {
            double t0 = ht_now();
            ht_source_evaluate(&model, &src, &vloss, &vacc);
            t_eval += ht_now() - t0;
            if (metrics) ht_metrics_eval(metrics, done, vloss, vacc, ht_now() - t_loop - t_eval);
            ht_progress_note(&prog, "step %lld: val_loss %.4f val_acc %.2f%%", (long long)done,
                             vloss, 100 * vacc);
            t_mark = ht_now(); /* evaluation time is not training throughput */
            mark_step = done;
        }
        if (cl.rank == 0 && *ckpt && cfg->checkpoint.every > 0 &&
            done % cfg->checkpoint.every == 0 &&
            (rc = ht_checkpoint_save(ckpt, &model, &opt, done, cfg->optim.type)) != HT_OK)
            goto out_loop;
        /* new shares (if any) from the next step on: after this step's loss and records */
        if ((rc = ht_cluster_rebalance(&cl, metrics, done, &st_now)) != HT_OK) goto out_loop;
    }
    ht_dev_finish(dev);
    double t_train = ht_now() - t_loop - t_eval;
    ht_progress_finish(&prog);
    if (cl.rank == 0 && *ckpt && step > start_step &&
        (rc = ht_checkpoint_save(ckpt, &model, &opt, step, cfg->optim.type)) != HT_OK)
        goto out_loop;
    if (step < total) {
        ht_log_info("stopped at step %lld of %lld%s%s", (long long)step, (long long)total,
                    *ckpt ? "; checkpoint saved to " : " (no checkpoint.path set)", ckpt);
    }
    if (stop) {
        rc = ht_error(HT_ERUNTIME, "interrupted at step %lld%s%s", (long long)step,
                      *ckpt ? "; checkpoint saved to " : " (no checkpoint.path set)", ckpt);
        goto out_loop;
    }
    /* rank 0 evaluates for everyone (the others' models are identical) */
    if (cl.rank == 0) ht_source_evaluate(&model, &src, &vloss, &vacc);
    if (metrics) ht_metrics_eval(metrics, step, vloss, vacc, t_train);
    res->steps = step;
    res->val_loss = vloss;
    res->val_acc = vacc;
    res->samples_per_s = step > start_step ? (double)(step - start_step) * B / t_train : 0;
    sstats = ht_sync_close(bsp);
    bsp = NULL;
    if (dp && (rc = ht_cluster_sync_records(&cl, &L, &sstats, metrics)) != HT_OK) goto out_loop;
    if (opts->profile) ht_dev_profile_report(dev, stderr);
    ht_trace_set_step(-1);
    if (opts->trace && (rc = ht_cluster_trace_write(&cl, opts->trace)) != HT_OK) goto out_loop;
    rc = HT_OK;

out_loop:
    if (bsp) ht_sync_close(bsp);
    if (metrics && ht_metrics_close(metrics) != HT_OK && rc == HT_OK) rc = HT_ERUNTIME;
out_model:
    ht_optim_free(&opt);
    ht_model_free(&model);
out_dev:
    ht_dev_close(dev);
out_data:
    ht_source_free(&src);
out_cluster:
    ht_cluster_free(&cl);
    ht_trace_stop();
    return rc;
}
