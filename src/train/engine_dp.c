/* The data-parallel engine: every rank holds the whole model and trains on its share of each
 * global batch (a pure function of seed and step), the bsp policy (src/sync/bsp.c) sums the
 * gradients, and every rank takes the same optimizer step. Shares are equal, explicit, or by
 * speed (a cost model per rank from the profile or from timed passes, then rebalanced online
 * from measured step times: train/ranks.c). One process is the case of one rank. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "io/trace.h"
#include "plan/job.h"
#include "plan/plan.h"
#include "prof/profile.h"
#include "prof/roof.h"
#include "sync/sync.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/zero.h"

/* Ends a trace span after the device has finished its work (only when tracing: the extra
 * synchronisation would cost time otherwise). */
static void trace_end(ht_dev *dev) {
    if (!ht_trace_on()) return;
    ht_dev_finish(dev);
    ht_trace_end();
}

/* ---------------------------------------------------------------- speed split */

/* This rank's cost model (samples/s beyond a fixed cost per step, and that cost) from the
 * hetprof profile in cluster.profile (the entry of the same device name and platform): its
 * per-layer times at its share s and at s/4. Bad or non-matching profiles are bad input. */
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
static double time_pass(ht_job *j, int s, float scale, int reps, double slowdown) {
    ht_model *m = &j->model;
    double best = INFINITY;
    for (int k = 0; k < reps; k++) {
        double t0 = ht_now();
        ht_model_forward(m, s, 1);
        ht_zero_backward(j, s, scale); /* ZeRO-2's per-slice gradients: bucket by bucket */
        ht_dev_finish(m->dev);
        double t = ht_now() - t0;
        if (t < best) best = t;
    }
    return best * slowdown;
}

/* cluster.split "speed": each rank's cost model, a fixed cost per step plus a cost per
 * sample, from the profile or from timed passes on its equal share s and on s/4 (the best of
 * two each, after one that compiles and allocates), emulated slowdown included; then the
 * split that makes the slowest rank's predicted step shortest. Collective. */
static int split_by_speed(ht_job *j) {
    ht_cluster *cl = j->cl;
    const int s1 = cl->hi - cl->lo, s2 = s1 >= 4 ? s1 / 4 : s1;
    double sp = 0, fx = 0;
    if (*j->cfg->cluster.profile) {
        int rc = profile_model(j->cfg, &j->model, ht_dev_info(j->dev), s1, &sp, &fx);
        if (rc != HT_OK) return rc;
        sp /= cl->slowdown, fx *= cl->slowdown;
    } else {
        ht_source_batch(&j->src, &j->model, 0, j->B, cl->lo, cl->hi);
        ht_model_set_training(&j->model, 1, j->cfg->train.seed, 0);
        const float scale = (float)(1.0 / j->rows);
        time_pass(j, s1, scale, 1, 1);
        double t1 = time_pass(j, s1, scale, 2, cl->slowdown);
        double t2 = time_pass(j, s2, scale, 2, cl->slowdown);
        ht_plan_affine_from(s1, t1 > 1e-9 ? t1 : 1e-9, s2, t2, &sp, &fx);
    }
    /* every rank's model, then the plan's split (plan/job.h: the one hetsim simulates) */
    double *all_sp = ht_xcalloc((size_t)cl->world, sizeof *all_sp);
    double *all_fx = ht_xcalloc((size_t)cl->world, sizeof *all_fx);
    ht_cluster_gather_model(cl, sp, fx, all_sp, all_fx);
    const ht_plan_cluster pc = {.world = cl->world};
    const ht_plan_costs costs = {.speed = all_sp, .fixed = all_fx};
    ht_plan plan;
    int rc = ht_plan_job(j->cfg, &j->model, &pc, &costs, &plan);
    if (rc == HT_OK)
        rc = ht_cluster_adopt_split(cl, plan.shares, all_sp, all_fx, plan.t_all, plan.t_kept);
    if (rc == HT_OK) ht_plan_free(&plan);
    free(all_sp), free(all_fx);
    return rc;
}

/* ---------------------------------------------------------------- steps */

/* One global step: this rank's share of batch `step`, forward, backward with the gradient
 * sum over ranks, the optimizer step. *stop: any rank was asked to stop. */
static void dp_step(ht_job *j, ht_sync *s, int64_t step, float lr, int *stop) {
    ht_cluster *cl = j->cl;
    ht_model *m = &j->model;
    const int b = cl->hi - cl->lo; /* this rank's share (rebalancing moves it) */
    double tc = ht_now();
    int64_t global;
    ht_trace_set_step(step);
    /* cluster.slowdown_from; the lists are per rank of the job (cl->wrank) */
    cl->slowdown = ht_config_slowdown_at(j->cfg, cl->wrank[cl->rank], step);
    ht_sync_set_slowdown(s, cl->slowdown);
    if (b > 0) { /* share 0 (left out by the speed split): zero gradients, same collectives */
        ht_trace_begin("batch");
        ht_source_batch(&j->src, m, step, j->B, cl->lo, cl->hi);
        trace_end(j->dev);
        ht_model_set_training(m, 1, j->cfg->train.seed, step);
        ht_trace_begin("forward");
        /* the NaN watch: marked by the loss kernel, read with the next log step or checkpoint */
        m->watch = j->eng.loss_flag;
        m->watch_step = step + 1 < INT32_MAX ? (int)(step + 1) : INT32_MAX - 1;
        ht_model_forward(m, b, 1);
        m->watch = NULL;
        trace_end(j->dev);
    }
    /* 1/rows with the GLOBAL batch: each rank's gradient is its part of the full-batch
     * mean, so the plain sum over ranks is exact whatever the shares. Under mpirun: backward
     * in gradient buckets, each all-reduced while the layers below still compute
     * (cluster.overlap = false: all after). */
    ht_trace_begin("backward + reduce");
    ht_sync_backward(s, b, (float)(1.0 / j->rows), tc);
    trace_end(j->dev);
    ht_trace_begin("optimizer step");
    ht_sync_step(s, b, lr, stop, &global);
    trace_end(j->dev);
}

/* After step `done`: the loss over all ranks and the per-rank records on log steps, the
 * shared reporting, then new shares (if any) from the next step on. */
static int dp_after(ht_job *j, ht_sync *s, int64_t done, float lr) {
    ht_cluster *cl = j->cl;
    double lsum = 0; /* share 0: nothing to add; not a log step: the NaN watch has it */
    int rc;
    ht_sync_stats now = ht_sync_stats_now(s);
    if (ht_job_logs_at(j, done)) {
        int correct = 0;
        if (cl->hi > cl->lo) ht_model_loss(&j->model, cl->hi - cl->lo, &lsum, &correct);
        if (cl->nworld > 1) { /* global sums: every rank gets the same numbers */
            double v[2] = {lsum, correct};
            ht_cluster_sum(v, 2);
            lsum = v[0];
            if ((rc = ht_cluster_record(cl, j->metrics, done, &now)) != HT_OK) return rc;
        }
    }
    if ((rc = ht_job_after_step(j, done, lsum, lr)) != HT_OK) return rc;
    /* after this step's loss and records */
    return ht_cluster_rebalance(cl, j->metrics, done, &now);
}

static int dp_loop(ht_job *j, ht_sync *s, ht_train_result *res) {
    int64_t step = j->start;
    int stop = ht_stop_requested(), rc;
    ht_job_loop_start(j);
    for (; step < j->end && !stop; step++) {
        float lr = (float)ht_lr_at(&j->sched, step, j->total);
        dp_step(j, s, step, lr, &stop);
        int64_t done = step + 1;
        j->eng.samples = done * j->B;
        if (step == j->start) ht_job_first_step(j, res);
        j->eng.last = done == j->total;
        if ((rc = dp_after(j, s, done, lr)) != HT_OK) return rc;
    }
    j->eng.interrupted = stop;
    return ht_job_loop_finish(j, step, res);
}

/* cluster.exclude_slow: the ranks the speed split left out leave (ht_cluster_detach); the
 * others go on as a smaller world (cl->rank, cl->world; cl->wrank[] their ranks in the job,
 * which the per-rank config lists cluster.slowdown and cluster.slowdown_from are read by).
 * *left: this rank left and must return. */
static int exclude(ht_job *j, ht_sync_layout *L, int *left) {
    ht_cluster *cl = j->cl;
    int rc = ht_cluster_detach(cl, j->metrics, left);
    if (*left || rc != HT_OK) return rc;
    return ht_sync_layout_of(j->cfg, cl->world, L);
}

/* cluster.shard = "optimizer" (ZeRO-1): this rank keeps the optimizer state of its slice,
 * the slices in proportion to the ranks' device memory. Setup already allocated only the
 * slice unless the ranks that stay were known only now (cluster.exclude_slow): then the
 * slice is copied out of the whole state. */
static void shard_optimizer(ht_job *j) {
    if (j->eng.zero_cut || j->cfg->cluster.shard == HT_SHARD_NONE || ht_comm_size() < 2) return;
    size_t *cut = ht_zero_cut(j);
    const int r = ht_comm_rank();
    ht_optim_shard(&j->opt, cut[r], cut[r + 1]);
    j->eng.zero_cut = cut;
}

static int dp_run(ht_job *j, ht_train_result *res) {
    const ht_train_opts *opts = j->opts;
    ht_cluster *cl = j->cl;
    ht_sync_layout L;
    int rc = ht_sync_layout_of(j->cfg, j->world, &L); /* bsp: every rank a worker */
    if (rc != HT_OK) return rc;
    /* rank 0's parameters everywhere (after a resume every rank loaded the same file) */
    ht_cluster_bcast_params(cl, &j->model);
    cl->slowdown = ht_config_slowdown_at(j->cfg, j->rank, j->start); /* the calibration's */
    if (j->world > 1 && !j->cfg->cluster.nshares && j->cfg->cluster.split == HT_SPLIT_SPEED &&
        (rc = split_by_speed(j)) != HT_OK)
        return rc;
    if (opts->trace) ht_cluster_trace_start(cl);
    /* after the speed split, so that the table shows the shares used */
    ht_cluster_announce(cl, ht_dev_info(j->dev)->name);
    int left = 0;
    if (cl->excluding && ((rc = exclude(j, &L, &left)) != HT_OK || left))
        return rc; /* a rank that left: nothing more to do (it exits with the others) */
    /* from here the ranks are the cluster's (fewer after an exclusion) */
    shard_optimizer(j);
    ht_sync *s = ht_sync_open(j->cfg, &L, cl->rank, &j->model, &j->opt, j->total);
    ht_sync_set_slowdown(s, ht_config_slowdown_at(j->cfg, cl->wrank[cl->rank], 0));
    int32_t none = INT32_MAX;
    j->eng.loss_flag = ht_buf_new(j->dev, sizeof none, "NaN watch");
    ht_buf_write(j->dev, j->eng.loss_flag, 0, sizeof none, &none);
    j->eng.all_hold = 1;
    rc = dp_loop(j, s, res);
    ht_buf_free(j->eng.loss_flag);
    j->eng.loss_flag = NULL;
    ht_sync_stats st = ht_sync_close(s);
    if (rc == HT_OK && cl->world > 1) rc = ht_cluster_sync_records(cl, &L, &st, j->metrics);
    if (rc == HT_OK && opts->profile) ht_prof_roof_report(j->dev, stderr);
    ht_trace_set_step(-1);
    if (rc == HT_OK && opts->trace) rc = ht_cluster_trace_write(cl, opts->trace);
    return rc;
}

const ht_engine ht_engine_dp = {"data parallel", ht_zero_check, dp_run};
