/* The engine of the asynchronous policies (sync.mode other than bsp, src/sync): workers train
 * at their own speed and the policy decides what happens after each backward; the extra
 * ranks (parameter servers, a group generator or coordinator) hold no model and only serve.
 * Worker w's local step k trains on its slice of global batch k, the slice bsp would give it
 * with equal shares, so that a worker sees fresh samples at every step whatever its speed,
 * and workers in lockstep (preduce with P = all) see exactly bsp's batches. The learning rate
 * follows the global step (samples over all workers / train.batch), as the policy last
 * reported it. Rank 0 logs, shows progress and evaluates its current model every
 * train.eval_every global steps; every worker checks its own loss at every step. The run
 * goes in segments (sync.h) ending at quiesce points: checkpoint.every, --stop-after, a stop
 * request, the end; the checkpoints are written there (async_ckpt.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "io/trace.h"
#include "plan/job.h"
#include "sync/sync.h"
#include "train/async_ckpt.h"
#include "train/engine.h"
#include "train/vtime.h"


static int async_check(ht_job *j) {
    const ht_config *cfg = j->cfg;
    ht_sync_layout *L = ht_xcalloc(1, sizeof *L);
    j->eng.state = L;
    /* the plan: who trains and who serves (the policies need no measured costs) */
    ht_plan plan;
    const ht_plan_cluster pc = {.world = j->world};
    int rc = ht_plan_job(cfg, NULL, &pc, NULL, &plan);
    if (rc == HT_OK) *L = plan.sync, ht_plan_free(&plan);
    if (rc == HT_OK && j->opts->resume) rc = ht_async_check_resume(cfg, L); /* every rank */
    j->holds_model = j->rank < L->workers;
    return rc;
}

/* An extra rank: serves the workers until they are done, then joins the end-of-run records
 * and the trace (HT_ESTOPPED when the workers were interrupted: they skip both). */
static int async_serve(ht_job *j, const ht_sync_layout *L) {
    ht_sync_stats st = {0};
    /* emulated: a server's updates take virtual time on its device (no model here: only the
     * optimizer's kind matters to the cost of its steps and copies) */
    const ht_model none = {0};
    int rc = ht_vtime_setup(j->cfg, &none, j->rank, j->world);
    if (rc != HT_OK) ht_die(rc, "%s", ht_errmsg()); /* the workers would wait for ever */
    if (j->opts->trace) ht_cluster_trace_start(j->cl); /* before announce: it names the track */
    ht_cluster_announce(j->cl, ht_sync_has_servers(L->mode) ? "(parameter server)" : "(coordinator)");
    rc = ht_sync_serve(j->cfg, L, j->rank, j->selector, &st);
    if (rc == HT_ESTOPPED) return rc;
    if (rc != HT_OK) ht_die(rc, "%s", ht_errmsg()); /* the workers would wait for ever */
    if ((rc = ht_cluster_sync_records(j->cl, L, &st, NULL)) != HT_OK) return rc;
    return j->opts->trace ? ht_cluster_trace_write(j->cl, j->opts->trace) : HT_OK;
}

/* One local step of `b` samples [lo, hi) of global batch `local`: forward, backward, the
 * emulated slowdown, the policy's update and exchange; *loss: this worker's loss sum. */
static void async_step(ht_job *j, ht_sync *s, int lo, int hi, float lr, int *stop,
                       int64_t *global, double *loss) {
    const int b = hi - lo;
    const int64_t local = ht_sync_local(s);
    double tc = ht_now();
    ht_trace_set_step(local);
    j->cl->slowdown = ht_config_slowdown_at(j->cfg, j->rank, local); /* cluster.slowdown_from */
    ht_source_batch(&j->src, &j->model, local, j->B, lo, hi);
    ht_model_set_training(&j->model, 1, j->cfg->train.seed, local);
    ht_model_forward(&j->model, b, 1);
    ht_sync_backward(s, b, (float)(1.0 / j->rows), tc);
    ht_dev_finish(j->dev);
    double compute = ht_now() - tc;
    ht_trace_span("forward + backward", tc, tc + compute);
    if (j->cl->slowdown > 1) {
        ht_sleep((j->cl->slowdown - 1) * compute); /* emulated heterogeneity (DESIGN.md) */
        ht_trace_span("slowdown (emulated)", tc + compute, ht_now());
    }
    ht_sync_add_compute(s, compute * j->cl->slowdown);
    double t0 = ht_now();
    ht_sync_step(s, b, lr, stop, global);
    ht_trace_span("update + exchange", t0, ht_now());
    /* the NaN check, every step: the policy's exchange has just read back gradients or
     * parameters (the queue is idle), so this is a small copy, not a wait */
    int correct;
    ht_model_loss(&j->model, b, loss, &correct);
}

/* One segment: local steps until the policy says stop (the job has seen `until` global
 * steps' samples, or a stop was requested). */
static int async_segment(ht_job *j, ht_sync *s, int lo, int hi, int64_t until,
                         ht_train_result *res) {
    const int B = j->B;
    int stop = 0, rc;
    int64_t global = ht_sync_samples(s);
    ht_sync_begin(s, until * B);
    while (!stop) {
        int64_t g = global / B;
        float lr = (float)ht_lr_at(&j->sched, g < j->total ? g : j->total - 1, j->total);
        double lsum;
        async_step(j, s, lo, hi, lr, &stop, &global, &lsum);
        j->eng.samples = global;
        if (res->first_step_s == 0) ht_job_first_step(j, res);
        g = global / B;
        if (j->rank != 0) { /* rank 0 reports for the job; every worker checks its loss */
            if ((rc = ht_job_check_loss(j, g, lsum, lr)) != HT_OK) return rc;
            continue;
        }
        j->eng.last = stop && until >= j->total;
        if ((rc = ht_job_after_step(j, g, lsum, lr)) != HT_OK) return rc;
    }
    return HT_OK;
}

/* The global step the job has reached: its samples over the batch, at most the total (the
 * last segment may end past the budget: the workers' messages in flight when it was spent). */
static int64_t step_of(const ht_job *j) {
    int64_t g = j->eng.samples / j->B;
    return g < j->total ? g : j->total;
}

/* Segments from j->start to j->end, each ending at a quiesce point (the next checkpoint.every
 * step, j->end, a stop request), checkpoints there; then the job's model into worker 0's
 * parameters and the shared end of the loop. */
static int async_loop(ht_job *j, ht_sync *s, int lo, int hi, ht_train_result *res) {
    const int64_t every = j->cfg->checkpoint.every;
    const char *ckpt = j->cfg->checkpoint.path;
    int interrupted = 0, rc;
    ht_job_loop_start_at(j, ht_sync_samples(s));
    for (int64_t done = step_of(j); done < j->end && !interrupted;) {
        int64_t until = j->end;
        if (*ckpt && every > 0 && (done / every + 1) * every < until)
            until = (done / every + 1) * every;
        if ((rc = async_segment(j, s, lo, hi, until, res)) != HT_OK) return rc;
        double t0 = ht_now();
        interrupted = ht_sync_quiesce(s);
        ht_trace_span("quiesce", t0, ht_now());
        j->eng.samples = ht_sync_samples(s);
        done = step_of(j);
        t0 = ht_now();
        if (*ckpt && (rc = ht_async_save(j, s, done)) != HT_OK) return rc;
        ht_trace_span("checkpoint", t0, ht_now());
    }
    ht_sync_end(s, interrupted);
    j->eng.interrupted = interrupted;
    j->eng.last = step_of(j) >= j->total;
    ht_sync_finish(s); /* collective over the workers: the job's model into worker 0 */
    return ht_job_loop_finish(j, step_of(j), res);
}

static int async_run(ht_job *j, ht_train_result *res) {
    const ht_sync_layout *L = j->eng.state;
    if (!j->holds_model) return async_serve(j, L);
    /* checkpoints at quiesce points only (async_loop), not in the shared step path */
    ht_job_engine_saves(j);
    int lo, hi;
    ht_sync_local_range(j->cfg, L, j->rank, &lo, &hi);
    /* a worker's gradient is the mean over its local batch, and rank 0 reports the mean
     * loss of its own */
    j->rows = (double)(hi - lo) * j->model.rows;
    if (j->opts->trace) ht_cluster_trace_start(j->cl); /* before announce: it names the track */
    ht_cluster_announce(j->cl, ht_dev_info(j->dev)->name);
    ht_sync *s = ht_sync_open(j->cfg, L, j->rank, &j->model, &j->opt, j->total);
    int rc = ht_async_restore(j, s);
    if (rc != HT_OK) ht_die(rc, "%s", ht_errmsg()); /* the extra ranks wait for worker 0 */
    if (j->rank == 0)
        ht_log_info("sync: %s, %d workers with %d samples per local step, %d %s",
                    ht_sync_mode_name(L->mode), L->workers, hi - lo, L->extra,
                    ht_sync_has_servers(L->mode) ? "parameter server(s)" : "coordinator");
    rc = async_loop(j, s, lo, hi, res);
    /* on an error the policy's messages may still be in flight into its buffers: they stay
     * (the error ends the whole job through src/comm's exit hook) */
    if (rc != HT_OK) return rc;
    ht_sync_stats st = ht_sync_close(s);
    if ((rc = ht_cluster_sync_records(j->cl, L, &st, j->metrics)) != HT_OK) return rc;
    ht_trace_set_step(-1);
    return j->opts->trace ? ht_cluster_trace_write(j->cl, j->opts->trace) : HT_OK;
}

const ht_engine ht_engine_async = {"asynchronous", async_check, async_run};
