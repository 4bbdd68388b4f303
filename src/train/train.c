/* A training run: setup builds what every engine needs from the config (ranks, device, data,
 * model, optimizer, schedule, resume, metrics), the engine for the job (report.c's ht_engine_for)
 * runs the steps and reports them, and finish closes and frees (see engine.h). */
#include "train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "build/build.h"
#include "build/fit.h"
#include "build/place.h"
#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/path.h"
#include "io/trace.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/init_from.h"
#include "train/vtime.h"
#include "train/zero.h"

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 || ht_st_exists(path); /* a file or a sharded set */
}

/* ---------------------------------------------------------------- setup */

/* This rank's device (j->selector), the data, and the device opened. */
static int setup_device(ht_job *j) {
    const ht_config *cfg = j->cfg;
    int rc, dev_index = j->dev_index;
    if ((rc = ht_source_load(cfg, &j->src)) != HT_OK) return rc;
    ht_dev_opts dopts = ht_dev_opts_default();
    dopts.cache = cfg->device.cache;
    dopts.cache_dir = cfg->device.cache_dir;
    dopts.tuning = cfg->device.tuning;
    dopts.profile = j->opts->profile;
    if ((rc = ht_dev_open(&j->dev, dev_index, &dopts)) != HT_OK) return rc;
    int hit = 0;
    double tb = ht_dev_build_seconds(j->dev, &hit);
    ht_log_info("device %d: %s (%s), kernels %s in %.2f s", dev_index, ht_dev_info(j->dev)->name,
                ht_dev_info(j->dev)->platform, hit ? "loaded from cache" : "built", tb);
    return HT_OK;
}

/* --resume: the checkpoint's parameters, optimizer state and step, if the file exists. */
static int resume(ht_job *j) {
    const char *ckpt = j->cfg->checkpoint.path;
    if (!*ckpt) return ht_error(HT_EINPUT, "--resume needs checkpoint.path in %s", j->cfg->source);
    if (!file_exists(ckpt)) {
        ht_log_info("no checkpoint at %s yet; starting from step 0", ckpt);
        return HT_OK;
    }
    /* a rank with no window yet (windowed 2) reads the headers and the step now, its window
     * after the plan from the same opened file (train/pipe_start.c) */
    ht_st_file *f = NULL;
    int rc = ht_checkpoint_open(&f, ckpt);
    if (rc == HT_OK)
        rc = ht_checkpoint_load_from(f, ckpt, &j->model, &j->opt, &j->start, j->cfg->optim.type);
    if (rc == HT_OK && j->eng.windowed == 2)
        j->eng.ckpt = f;
    else
        ht_st_close(f);
    if (rc == HT_OK) rc = ht_checkpoint_check_step(ckpt, j->start, j->total);
    if (rc == HT_OK) ht_log_info("resumed from %s at step %lld", ckpt, (long long)j->start);
    j->eng.resumed = rc == HT_OK;
    return rc;
}

/* --trace-layers: a span per layer's forward ("fwd fc2") and backward ("bwd fc2"; a fused
 * pair "fwd fc1+relu1"), and the loss ("loss"). */
static void trace_layer(void *ctx, int layer, int n, int kind, double t0, double t1) {
    const ht_model *m = ctx;
    char name[2 * sizeof m->layers[0].name + 8] = "loss"; /* the trace keeps HT_TRACE_NAME - 1 */
    if (kind != 2)
        snprintf(name, sizeof name, "%s %s%s%s", kind ? "bwd" : "fwd", m->layers[layer].name,
                 n > 1 ? "+" : "", n > 1 ? m->layers[layer + 1].name : "");
    ht_trace_span(name, t0, t1);
}

/* The model, initialised from train.seed or model.init_from. */
static int setup_net(ht_job *j) {
    const ht_config *cfg = j->cfg;
    const ht_source *src = &j->src;
    if (j->eng.peak_from_model) { /* the probe first: its buffers would be the peak */
        ht_dev_gemm_choice(j->dev);
        ht_dev_mem(j->dev, NULL, NULL, NULL, 1);
    }
    /* sizes against the device before anything is allocated: exit 2 naming the keys (at the
     * batch the model is built for: a pipeline's micro-batch) */
    int rc = ht_fit_check(cfg, ht_dev_info(j->dev), src->train.features, src->train.classes,
                          j->model_batch);
    if (rc == HT_OK)
        rc = ht_build_desc(&j->model, cfg, src->train.features, src->train.classes,
                           j->model_batch);
    /* ZeRO: the cut (collective), and ZeRO-2's gradient window before anything is allocated */
    if (j->eng.zero_init) ht_zero_setup(j, rc);
    if (rc != HT_OK) return rc;
    /* a pipeline stage known now: only its window is ever allocated (train/pipe_start.c) */
    size_t pbase = 0, pres = j->model.nparams;
    int lo = 0, hi = j->model.nlayers;
    j->eng.windowed = j->eng.window ? j->eng.window(j, &j->model, &pbase, &pres, &lo, &hi) : 0;
    if ((rc = ht_model_attach_stage(&j->model, j->dev, pbase, pres, lo, hi)) != HT_OK) return rc;
    if (ht_log_level() >= HT_LOG_DEBUG) ht_model_print(&j->model, stderr);
    ht_model_init_params(&j->model, cfg->train.seed);
    if ((rc = ht_job_init_from(j)) != HT_OK) return rc;
    if ((rc = ht_vtime_setup(cfg, &j->model, j->rank, j->world)) != HT_OK) return rc;
    if (j->opts->trace_layers) {
        j->model.layer_hook = trace_layer;
        j->model.layer_hook_ctx = &j->model;
    }
    return HT_OK;
}

/* The model (setup_net), optimizer, schedule and step budget; the resumed state; the metrics
 * file (rank 0); the batch stream. */
static int setup_model(ht_job *j) {
    const ht_config *cfg = j->cfg;
    const ht_source *src = &j->src;
    int rc = setup_net(j);
    if (j->eng.zero_init) ht_comm_exit_if_any(rc); /* ranks that failed after the cut */
    if (rc != HT_OK) return rc;
    ht_optim_cfg ocfg = ht_optim_cfg_from(cfg);
    if (j->eng.zero_init) { /* ZeRO: this rank's slice of the state, never the whole */
        ht_optim_init_slice(&j->opt, j->dev, &ocfg, j->model.nparams,
                            j->eng.zero_cut[j->rank], j->eng.zero_cut[j->rank + 1]);
        if (j->model.gwin) ht_optim_grads_from(&j->opt, j->model.gbase); /* ZeRO-2 */
    } else {
        ht_optim_init(&j->opt, j->dev, &ocfg, j->model.pres); /* a stage's, or all */
    }
    j->sched = ht_lr_sched_from(cfg);
    /* an epoch: every training sample, or as many windows as the stream has tokens */
    const size_t stream = src->tokens ? src->ktrain.n : src->ttrain.n;
    double per_epoch = src->text ? (double)stream / src->T : (double)src->train.n;
    j->total = cfg->train.steps > 0 ? cfg->train.steps
                                    : (int64_t)ceil(cfg->train.epochs * per_epoch / (double)j->B);
    if (j->total < 1) j->total = 1;
    /* the loss is the mean over B x rows rows (a GPT: every position of every window) */
    j->rows = (double)j->B * j->model.rows;
    if (j->opts->resume && (rc = resume(j)) != HT_OK) return rc;
    ht_log_info("model: %s, %zu parameters; %lld steps of batch %d, optimizer %s", j->model.desc,
                j->model.nparams, (long long)j->total, j->B, cfg->optim.type);
    j->end = j->total;
    if (j->opts->stop_after > 0 && j->start + j->opts->stop_after < j->total)
        j->end = j->start + j->opts->stop_after;
    j->rep.ckpt_every = cfg->checkpoint.every;
    if (j->rank == 0 && (*cfg->log.metrics || *cfg->log.tensorboard) &&
        (rc = ht_metrics_open(&j->metrics, cfg->log.metrics, j->opts->resume && j->start > 0)) !=
            HT_OK)
        return rc;
    if (j->metrics && *cfg->log.tensorboard &&
        (rc = ht_metrics_tensorboard(j->metrics, cfg->log.tensorboard)) != HT_OK)
        return rc;
    ht_source_start(&j->src, cfg, j->B);
    return HT_OK;
}

/* ---------------------------------------------------------------- run */

/* Setup up to the engine's check; under mpirun rank 0 reports, the others only warn. */
static int setup_ranks(ht_job *j, const ht_engine *e) {
    j->rank = j->cl->rank;
    j->world = j->cl->world;
    if (j->world > 1) {
        ht_log_set_rank(j->rank);
        if (j->rank != 0 && ht_log_level() == HT_LOG_INFO) ht_log_set_level(HT_LOG_WARN);
    }
    j->holds_model = 1;
    j->B = j->model_batch = j->cfg->train.batch;
    /* collective: every rank's host, local rank and device; a failed selector names the
     * rank, its host and its key, and ends every rank (the caller's ht_comm_exit_if_any) */
    ht_place pl;
    int rc = ht_place_device(j->cfg, j->opts->device, j->rank, j->world, &pl);
    if (rc != HT_OK) return rc;
    j->dev_index = pl.device;
    snprintf(j->selector_text, sizeof j->selector_text, "%d", pl.device);
    j->selector = j->selector_text; /* a server's device (src/sync) is this one */
    return e->check ? e->check(j) : HT_OK;
}

/* Everything setup made, in reverse; a failing metrics close fails the run. */
static int finish(ht_job *j, int rc) {
    if (j->metrics && ht_metrics_close(j->metrics) != HT_OK && rc == HT_OK) rc = HT_ERUNTIME;
    if (j->model.dev) {
        ht_optim_free(&j->opt);
        ht_model_free(&j->model);
    }
    if (j->dev) ht_dev_close(j->dev);
    ht_source_free(&j->src);
    free(j->eng.state);
    free(j->eng.zero_cut);
    ht_st_close(j->eng.ckpt);
    return rc;
}

int ht_train(const ht_config *cfg, const ht_train_opts *opts, ht_train_result *res) {
    memset(res, 0, sizeof *res);
    ht_job j = {.cfg = cfg, .opts = opts, .t_start = ht_now()};
    ht_cluster cl;
    int rc = ht_cluster_init(&cl, cfg);
    /* under mpirun a setup error is every rank's: printed once by the first rank that has
     * it, and all end with its status (no MPI_Abort); each call is collective */
    if (cl.world > 1) ht_comm_exit_if_any(rc);
    if (rc != HT_OK) return rc;
    j.cl = &cl;
    const ht_engine *e = ht_engine_for(cfg);
    rc = setup_ranks(&j, e);
    if (j.world > 1) ht_comm_exit_if_any(rc);
    if (rc == HT_OK && j.holds_model && (rc = setup_device(&j)) == HT_OK) rc = setup_model(&j);
    if (j.world > 1) ht_comm_exit_if_any(rc);
    if (rc == HT_OK) rc = e->run(&j, res);
    rc = finish(&j, rc);
    ht_cluster_free(&cl);
    ht_trace_stop();
    return rc;
}
