/* The plan phase: ht_plan_job (plan/job.h). The pipeline's cut was planned inside the
 * pipeline engine's run and again, re-implemented, by hetsim's command line; the data-parallel
 * speed split inside the engine's run and again by the simulator. Both callers now obey this
 * one function. */
#include "plan/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/modes.h"
#include "core/err.h"
#include "plan/bounds.h"
#include "pipe/sched_2bw.h"
#include "plan/plan.h"

ht_plan_engine ht_plan_engine_of(const ht_config *cfg) {
    if (cfg->pipe.schedule != HT_PIPE_NONE) return HT_PLAN_PIPE;
    /* a policy whose workers step together (bsp) is data parallel's */
    if (!(ht_sync_rows[cfg->sync.mode].flags & HT_SYNC_F_LOCKSTEP)) return HT_PLAN_ASYNC;
    return HT_PLAN_DP;
}

const char *ht_plan_engine_name(ht_plan_engine e) {
    return e == HT_PLAN_PIPE ? "pipeline" : e == HT_PLAN_ASYNC ? "asynchronous" : "data parallel";
}

static const char *src_of(const ht_config *cfg) { return cfg->source[0] ? cfg->source : "--set"; }

static int is_hetero(const ht_config *cfg) { return cfg->pipe.partition == HT_PART_HETERO; }

void ht_plan_needs(const ht_config *cfg, int world, int *cal, int *cal1) {
    *cal = *cal1 = 0;
    if (ht_plan_engine_of(cfg) != HT_PLAN_PIPE) return;
    const int D = cfg->pipe.stages, N = cfg->pipe.micro_batches;
    const int R = D > 0 && world >= D ? world / D : 1;
    const int mb = N > 0 ? cfg->train.batch / (R * N) : 0;
    *cal = ht_pipe_kind_has(cfg->pipe.schedule, HT_PIPE_F_STAGE_TIMES) || is_hetero(cfg) ||
           ht_plan_needs_bw(cfg);
    /* how a replica's time shrinks with its samples: for the hetero cut's replicated stages */
    *cal1 = is_hetero(cfg) && !cfg->pipe.nboundaries && !cfg->pipe.nstage_ranks &&
            cfg->pipe.replicate && mb > 1;
}

int ht_plan_needs_bw(const ht_config *cfg) {
    return ht_plan_engine_of(cfg) == HT_PLAN_PIPE && cfg->pipe.schedule == HT_PIPE_ZBHET;
}

/* zb-het's F, B and W per stage from the measured layer times: [F | B | W] in one array of
 * 3 S (p->stage_time, freed with the plan; pp points into it) */
static void zbhet_times(const ht_model *m, const ht_plan_costs *c, int world, ht_plan *p) {
    const int S = p->grp.Q, L = m->nlayers;
    const size_t n = (size_t)world * 2 * (size_t)L;
    double *t = ht_xmalloc((size_t)3 * S * sizeof *t), *w = ht_xmalloc(n * sizeof *w);
    ht_pipe_plan_stage_times(m, c->cal, c->cal1, world, &p->grp, p->mb, p->bounds, t);
    ht_pipe_plan_stage_times(m, c->cal_bw, NULL, world, &p->grp, p->mb, p->bounds, t + S);
    for (size_t i = 0; i < n; i++) /* W where ht_pipe_plan_stage_times reads the forward */
        w[i] = c->cal_bw[i % (2 * (size_t)L) < (size_t)L ? i + (size_t)L : i];
    ht_pipe_plan_stage_times(m, w, NULL, world, &p->grp, p->mb, p->bounds, t + 2 * S);
    for (int s = 0; s < S; s++) /* a stage without a split layer: W 0, the generator wants > 0 */
        if (t[2 * S + s] < 1e-9) t[2 * S + s] = 1e-9;
    free(w);
    p->stage_time = t;
    p->pp.stage_time = t, p->pp.stage_b = t + S, p->pp.stage_w = t + 2 * S;
}

/* Prefixes the pending error with the config's source (and `what`). */
static int located_as(const ht_config *cfg, int rc, const char *what) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ht_errmsg());
    return ht_error(rc, "%s: %s%s", src_of(cfg), what, msg);
}

static int located(const ht_config *cfg, int rc) { return located_as(cfg, rc, ""); }

/* The stage boundaries p->bounds of S = pp.D * v stages (pp.D: schedule ranks). */
static int make_bounds(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                       const ht_plan_costs *c, ht_plan *p) {
    const int S = p->pp.D * p->pp.v;
    if (cfg->pipe.nboundaries || cfg->pipe.nstage_ranks) { /* stage_ranks: boundaries given */
        /* S - 1 of them: checked when the config loaded */
        return ht_pipe_bounds_explicit(m, cfg->pipe.boundaries, S - 1, src_of(cfg), p->bounds);
    }
    if (is_hetero(cfg)) {
        /* one stage a rank: a config rule */
        /* (the trainer adds the devices to a memory shortfall: it knows them) */
        int rc = ht_pipe_plan_hetero(m, c->cal, c->cal1, cl->world, p->pp.kind, p->P, p->N,
                                     p->mb, c->opt_states, cl->mem_limit, cl->allow_recompute,
                                     cfg->pipe.replicate, cl->host, cl->verbose, p->bounds,
                                     &p->grp);
        return rc == HT_OK ? HT_OK : located(cfg, rc);
    }
    int how = cfg->pipe.partition == HT_PART_BALANCED ? HT_PIPE_BALANCED : HT_PIPE_UNIFORM;
    int rc = ht_pipe_bounds(m, S, how, p->bounds);
    return rc == HT_OK ? HT_OK : located(cfg, rc);
}

/* The pipeline's geometry, cut, rank groups and hepipe's stage times. */
static int plan_pipe(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                     const ht_plan_costs *c, ht_plan *p) {
    const int D = cfg->pipe.stages;
    p->P = D;
    p->R = cl->world / D;
    p->N = cfg->pipe.micro_batches;
    p->mb = p->B / (p->R * p->N);
    p->model_batch = p->mb; /* every layer runs one micro-batch at a time */
    p->pp = (ht_pipe_params){.kind = cfg->pipe.schedule,
                             .D = D,
                             .N = p->N,
                             .v = 1,
                             /* a backward costs about two forwards (Chimera plans its order so) */
                             .bf_ratio = 2.0};
    if (ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_CHUNKS)) p->pp.v = cfg->pipe.chunks;
    if (ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_V)) p->pp.v = 2; /* two stages a rank */
    p->S = D * p->pp.v;
    p->bounds = ht_xmalloc((size_t)(p->S + 1) * sizeof *p->bounds);
    ht_pipe_groups_none(&p->grp, D, p->mb);
    if (cfg->pipe.nstage_ranks) {
        ht_pipe_groups_explicit(&p->grp, D, cfg->pipe.stage_ranks, cfg->pipe.nstage_ranks, p->mb);
        p->pp.D = p->grp.Q;
    }
    int rc = make_bounds(cfg, m, cl, c, p);
    if (rc != HT_OK) return rc;
    /* the schedule runs on the groups */
    p->pp.D = p->grp.Q;
    p->S = p->pp.D * p->pp.v;
    if (ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_STAGE_TIMES)) {
        p->stage_time = ht_xmalloc((size_t)D * sizeof *p->stage_time);
        ht_pipe_plan_stage_times(m, c->cal, c->cal1, cl->world, &p->grp, p->mb, p->bounds,
                                 p->stage_time);
        p->pp.stage_time = p->stage_time;
    }
    if (p->pp.kind == HT_PIPE_ZBHET && c && c->cal && c->cal_bw) zbhet_times(m, c, cl->world, p);
    return ht_plan_job_memory(cfg, m, cl, c, p);
}

int ht_plan_dp_split(int B, int n, const double *speed, const double *fixed,
                     const int *max_share, int *share, double *t_all, double *t_kept) {
    return ht_plan_batch_split_exclude(B, n, speed, fixed, max_share, 0.05, share, t_all, t_kept);
}

/* cluster.split "speed" with every rank's cost model. */
static int plan_dp(const ht_config *cfg, const ht_plan_cluster *cl, const ht_plan_costs *c,
                   ht_plan *p) {
    p->model_batch = p->B; /* a data-parallel rank builds its model at the global batch */
    if (!c || !c->speed || cl->world < 2 || cfg->cluster.nshares ||
        cfg->cluster.split != HT_SPLIT_SPEED)
        return HT_OK;
    p->shares = ht_xcalloc((size_t)cl->world, sizeof *p->shares);
    return ht_plan_dp_split(p->B, cl->world, c->speed, c->fixed, cl->max_share, p->shares,
                            &p->t_all, &p->t_kept);
}

int ht_plan_job(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                const ht_plan_costs *c, ht_plan *p) {
    memset(p, 0, sizeof *p);
    p->engine = ht_plan_engine_of(cfg);
    p->B = cfg->train.batch;
    int rc = ht_sync_layout_of(cfg, cl->world, &p->sync);
    if (rc == HT_OK && p->engine == HT_PLAN_PIPE)
        rc = plan_pipe(cfg, m, cl, c, p);
    else if (rc == HT_OK && p->engine == HT_PLAN_DP)
        rc = plan_dp(cfg, cl, c, p);
    else if (rc == HT_OK)
        p->model_batch = p->B; /* an asynchronous worker trains its share at most */
    if (rc != HT_OK) ht_plan_free(p);
    return rc;
}

void ht_plan_free(ht_plan *p) {
    free(p->shares);
    free(p->bounds);
    free(p->stage_time);
    free(p->inflight);
    ht_plan_mem_free(&p->mem);
    ht_pipe_groups_free(&p->grp);
    memset(p, 0, sizeof *p);
}

int ht_plan_schedule(const ht_config *cfg, const ht_pipe_params *pp, ht_pipe_sched *s) {
    int rc = ht_pipe_kind_has(pp->kind, HT_PIPE_F_NO_FLUSH) ? ht_pipe_2bw_steady(pp, s)
                                                            : ht_pipe_generate(pp, s);
    return rc == HT_OK ? HT_OK : located_as(cfg, rc, "pipe: ");
}
