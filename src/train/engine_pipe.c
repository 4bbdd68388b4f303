/* The pipeline engine: pipe.schedule != "none". The ranks are D pipeline ranks x R
 * data-parallel replicas; every rank builds the whole model (setup), runs its instruction
 * stream (src/train/pipe_exec.c) once per global batch, and updates its parameters with the
 * gradients summed over every copy of its stages. Clipping uses the global norm over all
 * stages. When every rank holds only its stage (pipe_local.c), evaluation runs over the
 * stages and each stage's owner writes its shard of the checkpoint set (pipe_eval.c); else
 * the stage owners send their parameters and optimizer state to rank 0 before an evaluation
 * or a checkpoint (j->eng.gather), and rank 0 evaluates and saves the whole model. Online re-partitioning (pipe.rebalance) is in pipe_repart.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "io/trace.h"
#include "nn/ops.h"
#include "plan/bounds.h"
#include "prof/roof.h"
#include "train/pipe_bw.h"
#include "train/pipe_exec.h"
#include "pipe/sched_2bw.h"
#include "pipe/schedule.h"
#include "train/pipe_tied.h"
#include "pipe/transform.h"
#include "plan/job.h"
#include "train/engine.h"
#include "train/engine_pipe.h"
#include "train/pipe_calib.h"
#include "train/pipe_mem.h"
#include "plan/pipe_plan.h"


static void load(void *ctx, ht_model *m, int64_t step, int row0, int n);

static const ht_pipe_sched *checked(const pipe_state *p) { return p->tbw ? &p->chk : &p->sched; }

static const char *src_of(const ht_config *cfg) { return cfg->source[0] ? cfg->source : "--set"; }

/* The pipeline's rules between keys and against the world size are the config's
 * (config/crosskey.c), checked before this. */
static int check(ht_job *j) {
    const ht_config *cfg = j->cfg;
    const int R = j->world / cfg->pipe.stages;
    /* every layer runs one micro-batch at a time: the model's own buffers (the executor's
     * first slot, and evaluation's) need hold no more (issue 11: 3x less memory per rank on
     * tests/integration/pipe_mem.t's GPT than buffers for the whole batch) */
    j->model_batch = cfg->train.batch / (R * cfg->pipe.micro_batches);
    /* a rank whose stage the config decides allocates only that (train/pipe_start.c); the
     * GEMM probe goes first, so that the measured peak covers start-up without it */
    j->eng.window = ht_pipe_start_window;
    j->eng.peak_from_model = 1;
    return HT_OK;
}

/* ------------------------------------------------------------------ gather */

static void opt_apply(ht_job *j, pipe_state *p, float lr);

/* 2bw: the pending batch's remaining backwards and its optimizer step (collective). */
static void drain_2bw(ht_job *j, pipe_state *p) {
    if (!p->tbw || !ht_pipe_exec_2bw_pending(p->x)) return;
    double l;
    if (ht_pipe_exec_2bw_period(p->x, p->last + 1, 0, j->cfg->train.seed, (float)(1.0 / j->rows),
                                load, j, 0, &l))
        opt_apply(j, p, p->pend_lr);
}

/* Floats [off, off + n) of the parameters and of every optimizer state buffer, from rank
 * `from` to rank `to` (blocking; this rank is one of the two). */
void ht_pipe_send_state(ht_job *j, size_t off, size_t n, int from, int to, int tag) {
    const int nst = ht_optim_state_count(&j->opt);
    float *h = ht_xmalloc(n * sizeof(float));
    for (int k = -1; k < nst; k++) {
        ht_buf *b = j->model.params;
        if (k >= 0) {
            const char *name;
            size_t bn;
            ht_optim_state(&j->opt, k, &name, &b, &bn);
        }
        const size_t at = ht_pipe_local_bytes(&j->model, off, n);
        if (j->rank == from) {
            ht_buf_read(j->dev, b, at, n * sizeof(float), h);
            ht_comm_send(h, n * sizeof(float), to, tag);
        } else {
            ht_comm_recv(h, n * sizeof(float), from, tag);
            ht_buf_write(j->dev, b, at, n * sizeof(float), h);
        }
    }
    free(h);
}

/* Owner of every stage sends its parameters and optimizer state to rank 0 (2bw: the newest
 * weights, after a drain). */
static void gather(ht_job *j) {
    pipe_state *p = j->eng.state;
    drain_2bw(j, p);
    ht_pipe_tied_verify(ht_pipe_exec_tied(p->x), &j->model); /* wte's copies still equal */
    for (int s = 0; s < p->sched.S; s++) {
        int owner = ht_pipe_exec_owner(p->x, s);
        if (owner == 0 || (j->rank != 0 && j->rank != owner)) continue;
        size_t off, n;
        ht_pipe_exec_stage_params(p->x, s, &off, &n);
        if (n) ht_pipe_send_state(j, off, n, owner, 0, TAG_GATHER);
    }
}

/* The hooks of a pipeline whose ranks hold only their stages (pipe_eval.c; 2bw: after a
 * drain, as the gather). */
static void eval_stages(ht_job *j, double *loss, double *acc) {
    pipe_state *p = j->eng.state;
    drain_2bw(j, p);
    ht_pipe_tied_verify(ht_pipe_exec_tied(p->x), &j->model); /* the two stages' wte */
    ht_pipe_eval(j, p, loss, acc);
}

static int save_stages(ht_job *j, int64_t step) {
    pipe_state *p = j->eng.state;
    drain_2bw(j, p);
    ht_pipe_tied_verify(ht_pipe_exec_tied(p->x), &j->model);
    return ht_pipe_save_stages(j, p, step);
}

/* ------------------------------------------------------------------ setup */

/* A memory shortfall of the hetero cut names pipeline ranks: say their devices (the memory
 * decision's names its device already). */
static int name_devices(const pipe_state *p, int D, int rc) {
    char msg[1536];
    int k = snprintf(msg, sizeof msg, "%s", ht_errmsg());
    if (strstr(msg, "no plan fits")) return rc;
    for (int q = 0; strstr(msg, "memory") && q < D && k + 80 < (int)sizeof msg; q++)
        k += snprintf(msg + k, sizeof msg - (size_t)k, "%s rank %d \"%s\"",
                      q ? "," : " (devices:", q, p->mem.name[p->mem.dev_rank[q]]);
    if (strstr(msg, "(devices:")) snprintf(msg + k, sizeof msg - (size_t)k, ")");
    return ht_error(rc, "%s", msg);
}

/* Rank 0's start-up table: stage -> rank(s), layers, parameters. */
void ht_pipe_announce(const ht_job *j, const pipe_state *p) {
    if (j->rank != 0) return;
    const ht_pipe_sched *s = &p->sched;
    const ht_model *m = &j->model;
    ht_log_info("pipeline: %s, %d stage(s) on %d rank(s) x %d replica(s), %d micro-batches of "
                "%d%s",
                ht_pipe_kind_name(j->cfg->pipe.schedule), s->S, p->place.D, p->place.R, s->p.N, p->mb,
                ht_pipe_groups_replicated(&p->grp)
                    ? " (a replicated stage's ranks split each by the samples in brackets)"
                    : "");
    for (int st = 0; st < s->S; st++) {
        size_t off, n;
        ht_pipe_exec_stage_params(p->x, st, &off, &n);
        char ranks[64] = "";
        for (int d = 0; d < s->ndir; d++) {
            const int q = ht_pipe_stage_rank(s->p.kind, s->p.D, s->p.v, d, st);
            for (int r = p->grp.first[q]; r < p->grp.first[q + 1]; r++) {
                size_t len = strlen(ranks);
                snprintf(ranks + len, sizeof ranks - len, "%s%d", d ? "," : r > p->grp.first[q] ? "+" : "", r);
                if (p->grp.first[q + 1] - p->grp.first[q] > 1 && len + 16 < sizeof ranks)
                    snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), " (%d)",
                             p->grp.cnt[r]);
            }
        }
        ht_log_info("  stage %d: rank %s, layers %d-%d (%s .. %s), %zu parameters", st, ranks,
                    p->bounds[st], p->bounds[st + 1] - 1, m->layers[p->bounds[st]].name,
                    m->layers[p->bounds[st + 1] - 1].name, n);
    }
}

/* hepipe's predicted makespan and bubble under its stage times beside 1F1B's (B = 2F). */
static void log_hepipe(const ht_pipe_sched *s, const double *times) {
    ht_pipe_params q = {.kind = HT_PIPE_1F1B, .D = s->p.D, .N = s->p.N, .v = 1};
    ht_pipe_sched o;
    ht_pipe_report h, f;
    if (ht_pipe_generate(&q, &o) != HT_OK) return;
    if (ht_pipe_check(s, 2.0, times, &h) == HT_OK && ht_pipe_check(&o, 2.0, times, &f) == HT_OK)
        ht_log_info("hepipe under the stage times measured at start-up: makespan %.4g ms, "
                    "bubble %.1f%%; 1f1b %.4g ms, bubble %.1f%%",
                    h.makespan * 1e3, 100 * h.bubble, f.makespan * 1e3, 100 * f.bubble);
    ht_pipe_sched_free(&o);
}

/* The costs the plan reads, measured now on every rank (collective): every layer's times
 * (hepipe, hetero) at the micro-batch and, for replicated stages, at 1 sample. */
static void measure_costs(ht_job *j, pipe_state *p, double slowdown) {
    int need, need1;
    ht_plan_needs(j->cfg, j->world, &need, &need1);
    const size_t n = (size_t)j->world * 2 * (size_t)j->model.nlayers;
    if (need) {
        p->cal = ht_xmalloc(n * sizeof *p->cal);
        ht_pipe_plan_calibrate(&j->model, p->mb, slowdown, p->cal);
    }
    if (need1) {
        p->cal1 = ht_xmalloc(n * sizeof *p->cal1);
        ht_pipe_plan_calibrate(&j->model, 1, slowdown, p->cal1);
    }
    if (need && ht_plan_needs_bw(j->cfg)) {
        p->cal_bw = ht_xmalloc(n * sizeof *p->cal_bw);
        ht_pipe_plan_calibrate_bw(&j->model, p->mb, slowdown, p->cal_bw);
    }
}

/* What the plan knows of this cluster: hosts, memory limits and devices. */
ht_plan_cluster ht_pipe_plan_cluster(const ht_job *j, const pipe_state *p) {
    return (ht_plan_cluster){.world = j->world,
                             .host = p->host,
                             .mem_limit = ht_pipe_mem_part_limits(&p->mem),
                             .allow_recompute = p->mem.mode == HT_RECOMP_AUTO,
                             .verbose = j->rank == 0,
                             .dev_limit = p->mem.limit,
                             .dev_rank = p->mem.dev_rank,
                             .dev_name = (const char(*)[128])p->mem.name};
}

/* The engine executes the plan: the cut (p->bounds), the rank groups, the schedule's
 * parameters (*pp), the memory decision move to it; *times: hepipe's stage times ([D], the
 * caller frees) or NULL. */
void ht_pipe_adopt_plan(pipe_state *p, ht_plan *plan, ht_pipe_params *pp, double **times) {
    free(p->bounds);
    p->bounds = plan->bounds, plan->bounds = NULL;
    ht_pipe_groups_free(&p->grp);
    p->grp = plan->grp, memset(&plan->grp, 0, sizeof plan->grp);
    if (times) *times = plan->stage_time, plan->stage_time = NULL;
    *pp = plan->pp;
    ht_pipe_mem_adopt(&p->mem, &plan->mem, &plan->inflight);
    pp->max_inflight = p->mem.inflight;
    ht_plan_free(plan);
}

/* The plan (plan/job.h) from the costs measured now: the stage boundaries (p->bounds), the
 * rank groups, the memory decision and, for hepipe, each stage's time (*times, [D], the
 * caller frees). */
static int plan_stages(ht_job *j, ht_pipe_params *pp, pipe_state *p, double slowdown,
                       double **times) {
    const ht_config *cfg = j->cfg;
    const int D = pp->D;
    measure_costs(j, p, slowdown);
    if (!cfg->pipe.nboundaries && !cfg->pipe.nstage_ranks && cfg->pipe.partition == HT_PART_HETERO)
        p->host = ht_pipe_plan_gather_hosts(cfg, j->rank, j->world, D, p->hostbuf);
    ht_plan_cluster cl = ht_pipe_plan_cluster(j, p);
    ht_plan_costs c = {.cal = p->cal, .cal1 = p->cal1, .cal_bw = p->cal_bw, .opt_states = ht_optim_state_count(&j->opt)};
    ht_plan plan;
    int rc = ht_plan_job(cfg, &j->model, &cl, &c, &plan);
    if (rc != HT_OK)
        return strstr(ht_errmsg(), "memory") ? name_devices(p, D, rc) : rc;
    ht_pipe_adopt_plan(p, &plan, pp, times);
    if (ht_pipe_groups_replicated(&p->grp))
        p->place.first = p->grp.first, p->place.off = p->grp.off, p->place.cnt = p->grp.cnt;
    while (p->grp.first[p->q + 1] <= p->place.prank)
        p->q++;
    return HT_OK;
}

/* The streams (2bw: the steady period, and 3 chained batches for the checker). */
static int generate(ht_job *j, const ht_pipe_params *pp, pipe_state *p) {
    p->tbw = ht_pipe_kind_has(pp->kind, HT_PIPE_F_NO_FLUSH);
    int rc = ht_plan_schedule(j->cfg, pp, &p->sched);
    if (rc == HT_OK && p->tbw && (rc = ht_pipe_2bw_unroll(&p->sched, 3, &p->chk)) != HT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ht_errmsg());
        return ht_error(rc, "%s: pipe: %s", src_of(j->cfg), msg);
    }
    return rc;
}

static int check_sched(const pipe_state *p, ht_pipe_report *rep) {
    if (ht_pipe_check(checked(p), 2.0, NULL, rep) != HT_OK) /* a bug, not the user's */
        return ht_error(HT_ERUNTIME, "pipe: the generated schedule is wrong: %s", ht_errmsg());
    return HT_OK;
}

/* The streams of the plan's parameters (hepipe: within the plan's in-flight limits), its
 * memory decision's recomputation (a RECOMPUTE before each BWD of the ranks that recompute
 * any layer; 2bw: in the period stream, chained again), the check, the executor. */
int ht_pipe_make_schedule(ht_job *j, ht_pipe_params *pp, pipe_state *p, double slowdown,
                          ht_pipe_report *rep) {
    p->tbw = ht_pipe_kind_has(pp->kind, HT_PIPE_F_NO_FLUSH);
    int rc = generate(j, pp, p);
    if (rc == HT_OK) rc = check_sched(p, rep);
    if (rc != HT_OK) return rc;
    if (pp->stage_b && j->rank == 0) ht_pipe_log_zbhet(&p->sched, pp);
    else if (pp->stage_time && j->rank == 0) log_hepipe(&p->sched, pp->stage_time);
    if (j->rank == 0 && (rc = ht_pipe_mem_report(&p->mem, &j->model, j->metrics)) != HT_OK)
        return rc;
    const ht_plan_mem *dec = &p->mem.dec;
    int any = 0;
    for (int q = 0; q < pp->D; q++)
        any |= dec->any[q];
    if (any) {
        ht_pipe_add_recompute(&p->sched, dec->any);
        if (p->tbw) {
            ht_pipe_sched_free(&p->chk);
            if ((rc = ht_pipe_2bw_unroll(&p->sched, 3, &p->chk)) != HT_OK) return rc;
        }
        if ((rc = check_sched(p, rep)) != HT_OK) return rc;
    }
    /* train/pipe_local.c: only this rank's stage resident */
    if ((rc = ht_pipe_local_shrink(j, p)) != HT_OK) return rc;
    p->x = ht_pipe_exec_new_layers(&j->model, &p->sched, p->bounds, p->place, p->mb, slowdown,
                                   any ? dec->layers + (size_t)p->q * (size_t)j->model.nlayers
                                       : NULL);
    return HT_OK;
}

static int setup(ht_job *j, pipe_state *p) {
    const ht_config *cfg = j->cfg;
    const int D = cfg->pipe.stages, R = j->world / D;
    p->pp = (ht_pipe_params){.kind = cfg->pipe.schedule,
                         .D = D,
                         .N = cfg->pipe.micro_batches,
                         .v = ht_pipe_kind_has(cfg->pipe.schedule, HT_PIPE_F_CHUNKS)
                                  ? cfg->pipe.chunks
                                  : 1,
                         /* a backward costs about two forwards (Chimera plans its order so) */
                         .bf_ratio = 2.0};
    ht_pipe_params *pp = &p->pp;
    p->mb = j->B / (R * pp->N);
    p->place = (ht_pipe_place){.D = D, .R = R, .prank = j->rank % D, .replica = j->rank / D};
    /* the calibration's; cluster.slowdown_from changes it in pipe_step */
    double slowdown = ht_config_slowdown_at(cfg, j->rank, j->start);
    double *times = NULL; /* hepipe plans its warm-ups from the stages' times */
    ht_pipe_report rep;
    /* zero-bubble: the GPT block keeps its internal gradients from B to W (counted from here
     * on by the layers' saved state: the plan's memory model, slots, narrowing) */
    if (ht_pipe_kind_split(pp->kind)) ht_model_keep_bw(&j->model);
    ht_pipe_mem_init(&p->mem, cfg, ht_dev_info(j->dev), j->world, D);
    int rc = plan_stages(j, pp, p, slowdown, &times);
    /* before the executor: a re-partitioning job keeps whole-size buffers (pipe_local.c) */
    if (rc == HT_OK) rc = ht_pipe_repart_init(j, p);
    if (rc == HT_OK) rc = ht_pipe_make_schedule(j, pp, p, slowdown, &rep);
    free(times);
    pp->stage_time = NULL;
    if (!p->repart) free(p->cal), p->cal = NULL; /* re-partitioning plans with it again */
    if (rc != HT_OK) return rc;
    /* clipping needs the norm over every stage: the engine clips, the optimizer does not */
    p->clip = (float)j->opt.cfg.clip;
    j->opt.cfg.clip = 0;
    p->bubble_unit = rep.bubble;
    ht_pipe_announce(j, p);
    if (j->rank == 0)
        ht_log_info("schedule (unit times, backward = 2 x forward%s): makespan %.0f, bubble "
                    "%.1f%%, at most %d micro-batches in flight on a rank",
                    p->tbw ? "; 2bw: 3 batches chained, then drained" : "", rep.makespan,
                    100 * rep.bubble, rep.peak_max);
    return HT_OK;
}

/* ------------------------------------------------------------------ steps */

static void load(void *ctx, ht_model *m, int64_t step, int row0, int n) {
    ht_job *j = ctx;
    ht_source_batch(&j->src, m, step, j->B, row0, row0 + n);
}

/* Scales the gradients so that their global norm is at most clip (torch's
 * clip_grad_norm_: coefficient clip / (norm + 1e-6), capped at 1). */
static void clip_global(ht_job *j, pipe_state *p) {
    double sq = ht_pipe_exec_grad_sq(p->x);
    ht_comm_allreduce_sum_f64(&sq, 1);
    double c = p->clip / (sqrt(sq) + 1e-6);
    if (c < 1)
        ht_scale(j->dev, ht_view_at(j->model.grads, 0), j->model.pres, (float)c);
}

/* The checker's bubble under the stage times measured in this run (each stage's mean FWD and
 * BWD over the ranks that ran it; a replicated stage's over its data-parallel copies, each
 * the slowest of its ranks): what the schedule alone costs on these devices, without
 * communication and host copies. Collective. */
static double bubble_measured_costs(ht_job *j, pipe_state *p) {
    const int S = p->sched.S;
    double *v = ht_xcalloc((size_t)S * 3, sizeof(double));
    ht_pipe_exec_stage_times(p->x, 0, v, v + S);
    if (ht_pipe_groups_replicated(&p->grp)) { /* a group's stage: its slowest member's share */
        const int P = p->place.D;
        double *all = ht_xmalloc((size_t)j->world * 2 * S * sizeof *all);
        ht_comm_allgather(v, (size_t)2 * S * sizeof *v, all);
        memset(v, 0, (size_t)S * 3 * sizeof *v);
        for (int s = 0; s < S; s++)
            for (int r = 0; r < p->place.R; r++) {
                double f = 0, b = 0;
                for (int q = 0; q < P; q++) {
                    const double *a = all + (size_t)(r * P + q) * 2 * S;
                    f = a[s] > f ? a[s] : f, b = a[S + s] > b ? a[S + s] : b;
                }
                v[s] += f, v[S + s] += b, v[2 * S + s] += f > 0;
            }
        free(all);
    } else {
        for (int s = 0; s < S; s++)
            v[2 * S + s] = v[s] > 0;
        ht_comm_allreduce_sum_f64(v, (size_t)S * 3);
    }
    double bubble = NAN;
    int all = 1;
    for (int s = 0; s < S; s++) {
        if (v[2 * S + s] > 0) v[s] /= v[2 * S + s], v[S + s] /= v[2 * S + s];
        all &= v[s] > 0 && v[S + s] > 0;
    }
    ht_pipe_report r;
    if (all && ht_pipe_check_costs(checked(p), v, v + S, &r) == HT_OK) bubble = r.bubble;
    free(v);
    return bubble;
}

/* One "pipe" metrics record per rank: its share of the last step. */
static int records(ht_job *j, pipe_state *p, const double *sum, int64_t steps) {
    const ht_pipe_stats *st = ht_pipe_exec_stats(p->x);
    double mine[6] = {sum[0], sum[1], sum[2], sum[3],
                      (double)st->slot_bytes * st->slots + (double)st->work_bytes,
                      (double)st->p2p_bytes};
    double *all = ht_xcalloc((size_t)j->world * 6, sizeof(double));
    ht_comm_allgather(mine, sizeof mine, all);
    int rc = HT_OK;
    for (int r = 0; j->metrics && r < j->world && rc == HT_OK; r++) {
        const double *a = all + 6 * r, n = steps > 0 ? (double)steps : 1;
        rc = ht_metrics_write(j->metrics,
                              "type=%s rank=%d step_s=%g compute_s=%g wait_s=%g comm_s=%g "
                              "idle_fraction=%g activation_bytes=%g p2p_bytes_per_step=%g",
                              "pipe", r, a[0] / n, a[1] / n, a[2] / n, a[3] / n,
                              a[0] > 0 ? 1 - a[1] / a[0] : 0, a[4], a[5]);
    }
    /* the measured bubble as the checker defines it: 1 - busy / (ranks x makespan). The
     * makespan is the slowest rank's stream: the others wait out the rest of it in the
     * step-end collectives, outside their own stream's span. */
    double busy = 0, span = 0;
    for (int r = 0; r < j->world; r++)
        busy += all[6 * r + 1], span = all[6 * r] > span ? all[6 * r] : span;
    double measured = span > 0 ? 1 - busy / (j->world * span) : NAN;
    free(all);
    double pred = bubble_measured_costs(j, p);
    if (rc == HT_OK && j->metrics)
        rc = ht_metrics_write(j->metrics,
                              "type=%s schedule=%s stages=%d micro_batches=%d "
                              "bubble_unit_times=%g bubble_measured_costs=%g bubble_measured=%g",
                              "pipe_summary", ht_pipe_kind_name(j->cfg->pipe.schedule), p->sched.S, p->sched.p.N,
                              p->bubble_unit, pred, measured);
    return rc;
}

/* Clipping by the global norm, then the optimizer step on the model's params and grads. */
static void opt_apply(ht_job *j, pipe_state *p, float lr) {
    if (p->clip > 0) clip_global(j, p);
    double t0 = ht_now();
    ht_optim_step(&j->opt, j->model.params, j->model.grads, lr);
    if (ht_trace_on()) {
        ht_dev_finish(j->dev);
        ht_trace_span("optimizer step", t0, ht_now());
    }
}

/* One global step: the stream, clipping by the global norm, the optimizer step; into v (not
 * yet summed over ranks): the loss of the last stages, this rank's stop request, and its
 * compute and step seconds (v[2 + 2r], v[3 + 2r]: the re-partitioning rule's input). 2bw:
 * one period, and the step that applies the previous batch's gradient (with that batch's
 * learning rate). v: [2 + 2 world]. */
static void pipe_step(ht_job *j, pipe_state *p, int64_t step, float lr, int logs, double *v) {
    memset(v, 0, (size_t)(2 + 2 * j->world) * sizeof *v);
    v[1] = ht_stop_requested() ? 1 : 0;
    ht_trace_set_step(step);
    ht_pipe_exec_set_slowdown(p->x, ht_config_slowdown_at(j->cfg, j->rank, step));
    const uint64_t seed = j->cfg->train.seed;
    const float scale = (float)(1.0 / j->rows);
    if (p->tbw) {
        if (ht_pipe_exec_2bw_period(p->x, step, 1, seed, scale, load, j, logs, &v[0]))
            opt_apply(j, p, p->pend_lr);
        p->last = step, p->pend_lr = lr;
    } else {
        ht_pipe_exec_step(p->x, step, seed, scale, load, j, logs, &v[0]);
        opt_apply(j, p, lr);
    }
    const ht_pipe_stats *st = ht_pipe_exec_stats(p->x);
    v[2 + 2 * j->rank] = st->compute, v[3 + 2 * j->rank] = st->step;
}

/* A step whose sums (v: loss, stop flag, seconds, summed over ranks) are known: the
 * re-partitioning rule and the shared report path. */
static int step_done(ht_job *j, pipe_state *p, int64_t step, float lr, const double *v,
                     int stop) {
    const int64_t done = step + 1;
    int rc = HT_OK;
    j->eng.samples = done * j->B;
    if (p->repart && step != j->start && !stop &&
        (rc = ht_pipe_repartition(j, p, step, v + 2)) != HT_OK)
        return rc;
    return ht_job_after_step(j, done, v[0], lr);
}

/* 2bw's step-end sums complete one period late (PipeDream-2BW's double-buffered weights let
 * the pipeline run on without a flush; a blocking reduction at every step's end would make
 * each period pay the fill and the drain again): started after period t, waited for after
 * period t + 1. Only on quiet steps (ht_job_quiet_at: nothing reads the weights), never the
 * last of the segment or with re-partitioning (it moves layers between steps); the stop flag
 * and the NaN check then act one period later, on every rank alike (a checkpoint step is
 * never quiet: no checkpoint follows a non-finite loss). */
typedef struct late_sum {
    ht_comm_req *req; /* NULL: none outstanding */
    double *v;        /* its buffer */
    int64_t step;
    float lr;
} late_sum;

/* Waits for the outstanding sums, if any, and reports their step; *stop |= its stop flag. */
static int late_finish(ht_job *j, pipe_state *p, late_sum *l, int *stop) {
    if (!l->req) return HT_OK;
    ht_comm_wait(l->req);
    l->req = NULL;
    *stop |= l->v[1] > 0;
    const int last = j->eng.last; /* the current step's: a deferred one never is */
    j->eng.last = 0;
    int rc = step_done(j, p, l->step, l->lr, l->v, l->v[1] > 0);
    j->eng.last = last;
    return rc;
}

/* After the first step: its time, and the stage times counted from the next one on. */
static void first_step(ht_job *j, pipe_state *p, ht_train_result *res, int64_t done) {
    j->eng.samples = done * j->B;
    ht_job_first_step(j, res);
    ht_pipe_exec_stage_times(p->x, 1, NULL, NULL);
}

static int pipe_loop(ht_job *j, pipe_state *p, ht_train_result *res) {
    double sum[4] = {0}; /* step, compute, wait, comm seconds over the counted steps */
    int64_t step = j->start, counted = 0;
    int stop = 0, rc = HT_OK;
    const size_t nv = (size_t)(2 + 2 * j->world);
    double *v = ht_xmalloc(nv * sizeof *v);
    late_sum late = {.v = ht_xmalloc(nv * sizeof *v)};
    ht_job_loop_start(j);
    for (; step < j->end && !stop && rc == HT_OK; step++) {
        const int64_t done = step + 1;
        float lr = (float)ht_lr_at(&j->sched, step, j->total);
        j->eng.last = done == j->total;
        const int defer = p->tbw && !p->repart && done < j->end && ht_job_quiet_at(j, done);
        /* the loss every step: the NaN check (the sum rides on the stop flag's all-reduce) */
        pipe_step(j, p, step, lr, 1, v);
        if (step == j->start && defer) /* the clocks restart where this rank's step ended */
            first_step(j, p, res, done);
        else if (step != j->start) { /* the first step compiles and allocates: not counted */
            const ht_pipe_stats *st = ht_pipe_exec_stats(p->x);
            sum[0] += st->step, sum[1] += st->compute, sum[2] += st->wait, sum[3] += st->comm;
            counted++;
        }
        if ((rc = late_finish(j, p, &late, &stop)) != HT_OK) break;
        if (defer && !stop) { /* this step's sums go on while the next period runs */
            double *t = late.v;
            late = (late_sum){ht_comm_iallreduce_sum_f64(v, nv), v, step, lr};
            v = t;
            continue;
        }
        ht_comm_allreduce_sum_f64(v, nv);
        stop |= v[1] > 0;
        if (step == j->start && !defer) first_step(j, p, res, done);
        rc = step_done(j, p, step, lr, v, v[1] > 0);
    }
    if (rc == HT_OK) rc = late_finish(j, p, &late, &stop); /* none: the last step reports */
    else if (late.req) ht_comm_wait(late.req);
    free(v), free(late.v);
    if (rc != HT_OK) return rc;
    j->eng.interrupted = stop;
    if ((rc = records(j, p, sum, counted)) != HT_OK) return rc;
    return ht_job_loop_finish(j, step, res);
}

static int run(ht_job *j, ht_train_result *res) {
    pipe_state p = {0};
    const int built = j->model.max_batch; /* the executor changes it while it runs */
    /* the memory measured for the model's validation is the pipeline's: the GEMM choice's
     * one-time probe (made at the first product, else in the calibration or first step) goes
     * first, and the peak restarts at what the model holds */
    ht_dev_gemm_choice(j->dev);
    if (!j->eng.windowed) ht_dev_mem(j->dev, NULL, NULL, NULL, 1); /* else: start-up counts */
    int rc = setup(j, &p);
    if (rc == HT_OK) {
        if (j->opts->trace) ht_cluster_trace_start(j->cl);
        /* the table's share: the samples of a step that pass through the rank (its
         * replica's part of the batch), not a data-parallel slice */
        for (int r = 0; r < j->world; r++)
            j->cl->shares[r] = p.sched.p.N * p.grp.cnt[r % p.place.D];
        ht_cluster_announce(j->cl, ht_dev_info(j->dev)->name);
        j->eng.state = &p;
        j->eng.gather = p.local ? NULL : gather;
        j->eng.evaluate = p.local ? eval_stages : NULL;
        j->eng.save = p.local ? save_stages : NULL;
        rc = pipe_loop(j, &p, res);
        if (rc == HT_OK) { /* issue 11: the memory model against what was allocated */
            const int q = p.q, nslot = p.sched.nbuf[q] > 0 ? p.sched.nbuf[q] : 1;
            rc = ht_pipe_mem_validate(&p.mem, &j->model, j->dev, p.sched.p.kind, p.sched.p.v,
                                      p.bounds, built, p.grp.cnt[p.place.prank], q, nslot,
                                      ht_optim_state_count(&j->opt), p.tbw ? 2 : 1, j->metrics);
        }
        j->eng.gather = NULL;
        j->eng.evaluate = NULL;
        j->eng.save = NULL;
        j->eng.state = NULL;
    }
    if (rc == HT_OK && j->opts->profile) ht_prof_roof_report(j->dev, stderr);
    ht_trace_set_step(-1);
    if (rc == HT_OK && j->opts->trace) rc = ht_cluster_trace_write(j->cl, j->opts->trace);
    ht_pipe_exec_free(p.x);
    ht_pipe_sched_free(&p.sched);
    if (p.tbw) ht_pipe_sched_free(&p.chk);
    free(p.bounds);
    free(p.cal), free(p.cal1), free(p.cal_bw);
    ht_pipe_groups_free(&p.grp);
    ht_pipe_problem_free(&p.prob);
    ht_pipe_mem_free(&p.mem);
    return rc;
}

const ht_engine ht_engine_pipe = {"pipeline", check, run};
