/* The engine of the asynchronous policies (sync.mode other than bsp, src/sync): workers train
 * at their own speed and the policy decides what happens after each backward; the extra
 * ranks (parameter servers, a group generator or coordinator) hold no model and only serve.
 * Worker w's local step k trains on its slice of global batch k, the slice bsp would give it
 * with equal shares, so that a worker sees fresh samples at every step whatever its speed,
 * and workers in lockstep (preduce with P = all) see exactly bsp's batches. The learning rate
 * follows the global step (samples over all workers / train.batch), as the policy last
 * reported it. Rank 0 logs, shows progress and evaluates its current model every
 * train.eval_every global steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "sync/sync.h"
#include "train/engine.h"

static int async_wants(const ht_config *cfg) { return strcmp(cfg->sync.mode, "bsp") != 0; }

static int async_check(ht_job *j) {
    const ht_config *cfg = j->cfg;
    ht_sync_layout *L = ht_xcalloc(1, sizeof *L);
    j->engine_state = L;
    int rc = ht_sync_layout_of(cfg, j->world, L);
    if (rc != HT_OK) return rc;
    if (j->opts->resume || j->opts->trace || j->opts->stop_after)
        return ht_error(HT_EINPUT,
                        "%s: sync.mode \"%s\": --resume, --stop-after and --trace work "
                        "with sync.mode \"bsp\" only",
                        cfg->source, cfg->sync.mode);
    j->holds_model = j->rank < L->workers;
    return HT_OK;
}

/* An extra rank: serves the workers until they are done, then joins the end-of-run records. */
static int async_serve(ht_job *j, const ht_sync_layout *L) {
    ht_sync_stats st = {0};
    ht_cluster_announce(j->cl, L->mode <= HT_SYNC_DASP ? "(parameter server)" : "(coordinator)");
    int rc = ht_sync_serve(j->cfg, L, j->rank, j->selector, &st);
    if (rc != HT_OK) ht_die(rc, "%s", ht_errmsg()); /* the workers would wait for ever */
    return ht_cluster_sync_records(j->cl, L, &st, NULL);
}

/* One local step of `b` samples [lo, hi) of global batch `local`: forward, backward, the
 * emulated slowdown, the policy's update and exchange. */
static void async_step(ht_job *j, ht_sync *s, int64_t local, int lo, int hi, float lr, int *stop,
                       int64_t *global) {
    const int b = hi - lo;
    double tc = ht_now();
    ht_source_batch(&j->src, &j->model, local, j->B, lo, hi);
    ht_model_set_training(&j->model, 1, j->cfg->train.seed, local);
    ht_model_forward(&j->model, b, 1);
    ht_sync_backward(s, b, (float)(1.0 / j->rows), tc);
    ht_dev_finish(j->dev);
    double compute = ht_now() - tc;
    ht_sleep((j->cl->slowdown - 1) * compute); /* emulated heterogeneity (DESIGN.md) */
    ht_sync_add_compute(s, compute * j->cl->slowdown);
    ht_sync_step(s, b, lr, stop, global);
}

/* Trains until the policy stops the workers, then leaves the final model in worker 0's
 * parameters and evaluates it there. */
static int async_loop(ht_job *j, ht_sync *s, int lo, int hi, ht_train_result *res) {
    const int B = j->B;
    int stop = 0, rc;
    int64_t global = 0, local = 0;
    ht_job_loop_start(j);
    while (!stop) {
        int64_t g = global / B;
        float lr = (float)ht_lr_at(&j->sched, g < j->total ? g : j->total - 1, j->total);
        async_step(j, s, local, lo, hi, lr, &stop, &global);
        j->samples = global;
        if (local++ == 0) ht_job_first_step(j, res);
        j->last = stop;
        if (j->rank != 0) continue; /* rank 0 reports for the job */
        g = global / B;
        double lsum = NAN;
        if (ht_job_logs_at(j, g)) {
            int correct;
            ht_model_loss(&j->model, hi - lo, &lsum, &correct);
        }
        if ((rc = ht_job_after_step(j, g, lsum, lr)) != HT_OK) return rc;
    }
    ht_sync_finish(s); /* collective over the workers: the job's model into worker 0 */
    return ht_job_loop_finish(j, global / B, res);
}

static int async_run(ht_job *j, ht_train_result *res) {
    const ht_sync_layout *L = j->engine_state;
    if (!j->holds_model) return async_serve(j, L);
    /* no periodic checkpoints: worker 0's model is not the job's until ht_sync_finish */
    j->ckpt_every = 0;
    int lo, hi;
    ht_sync_local_range(j->cfg, L, j->rank, &lo, &hi);
    /* a worker's gradient is the mean over its local batch, and rank 0 reports the mean
     * loss of its own */
    j->rows = (double)(hi - lo) * j->model.rows;
    ht_cluster_announce(j->cl, ht_dev_info(j->dev)->name);
    ht_sync *s = ht_sync_open(j->cfg, L, j->rank, &j->model, &j->opt, j->total);
    if (j->rank == 0)
        ht_log_info("sync: %s, %d workers with %d samples per local step, %d %s",
                    j->cfg->sync.mode, L->workers, hi - lo, L->extra,
                    L->mode <= HT_SYNC_DASP ? "parameter server(s)" : "coordinator");
    int rc = async_loop(j, s, lo, hi, res);
    /* on an error the policy's messages may still be in flight into its buffers: they stay
     * (the error ends the whole job through src/comm's exit hook) */
    if (rc != HT_OK) return rc;
    ht_sync_stats st = ht_sync_close(s);
    return ht_cluster_sync_records(j->cl, L, &st, j->metrics);
}

const ht_engine ht_engine_async = {"asynchronous", async_wants, async_check, async_run};
