/* The plan's memory decision (plan/job.h, plan/mem_decide.h): taken for the slots in flight
 * of the schedule the plan generates and checks (its peak per rank). hepipe takes it twice:
 * first for 1F1B's depths, its generation then keeping within the limits found (it may hold
 * fewer, or more where they fit), then again for the depths it chose, so that what is run is
 * the decision for its own stream. Moved here from the pipeline engine, which executes it. */
#include "plan/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/sched_2bw.h"
#include "plan/exec_mem.h"

static const char *src_of(const ht_config *cfg) { return cfg->source[0] ? cfg->source : "--set"; }

/* The plan's stream (2bw: three periods chained, as the engine checks it) checked: its peak
 * slots in flight per schedule rank into slots. */
static int checked_slots(const ht_config *cfg, const ht_plan *p, int *slots) {
    ht_pipe_sched s, chk;
    int rc = ht_plan_schedule(cfg, &p->pp, &s);
    if (rc != HT_OK) return rc;
    const int tbw = ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_NO_FLUSH);
    if (tbw && (rc = ht_pipe_2bw_unroll(&s, 3, &chk)) != HT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ht_errmsg());
        ht_pipe_sched_free(&s);
        return ht_error(rc, "%s: pipe: %s", src_of(cfg), msg);
    }
    ht_pipe_report rep;
    if (ht_pipe_check(tbw ? &chk : &s, 2.0, NULL, &rep) != HT_OK) /* a bug, not the user's */
        rc = ht_error(HT_ERUNTIME, "pipe: the generated schedule is wrong: %s", ht_errmsg());
    for (int q = 0; rc == HT_OK && q < p->pp.D; q++)
        slots[q] = q < 64 ? rep.peak_inflight[q] : s.nbuf[q];
    ht_pipe_sched_free(&s);
    if (tbw) ht_pipe_sched_free(&chk);
    return rc;
}

/* One decision for slots[] (flexible: hepipe before its generation). */
static int decide(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                  const ht_plan_costs *c, ht_plan *p, const int *slots, int flexible,
                  const double *fwd) {
    const ht_plan_mem_in in = {.m = m,
                               .kind = p->pp.kind,
                               .v = p->pp.v,
                               .bounds = p->bounds,
                               .grp = &p->grp,
                               .mb = p->mb,
                               .N = p->pp.N,
                               .slots = slots,
                               .flexible = flexible,
                               .opt_states = c ? c->opt_states : 0,
                               .weight_versions =
                                   ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_NO_FLUSH) ? 2 : 1,
                               .fwd = fwd,
                               .calib = ht_plan_calib_samples(cfg, cl->world, p->mb),
                               .limit = cl->dev_limit,
                               .from_cfg = cfg->device.memory_mb > 0,
                               .dev_rank = cl->dev_rank,
                               .dev_name = cl->dev_name};
    return ht_plan_mem_decide(&p->mem, cfg->pipe.recompute, &in, src_of(cfg));
}

int ht_plan_job_memory(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                       const ht_plan_costs *c, ht_plan *p) {
    const int Q = p->pp.D, L = m->nlayers;
    const int hep = ht_pipe_kind_has(p->pp.kind, HT_PIPE_F_STAGE_TIMES);
    int *slots = ht_xmalloc((size_t)Q * sizeof *slots), rc = HT_OK;
    double *fwd = NULL;
    if (c && c->cal) { /* the recompute costs: the layers' measured (or modelled) times */
        fwd = ht_xmalloc((size_t)Q * (L ? L : 1) * sizeof *fwd);
        ht_pipe_plan_layer_fwd(m, c->cal, cl->world, &p->grp, p->mb, fwd);
    }
    if (hep) {
        for (int q = 0; q < Q; q++)
            slots[q] = p->pp.N < Q - q ? p->pp.N : Q - q;
        rc = decide(cfg, m, cl, c, p, slots, 1, fwd);
        if (rc == HT_OK && p->mem.mode == HT_RECOMP_AUTO) {
            p->inflight = ht_xmalloc((size_t)Q * sizeof *p->inflight);
            memcpy(p->inflight, p->mem.max_inflight, (size_t)Q * sizeof *p->inflight);
            p->pp.max_inflight = p->inflight;
        }
    }
    if (rc == HT_OK) rc = checked_slots(cfg, p, slots);
    if (rc == HT_OK) rc = decide(cfg, m, cl, c, p, slots, 0, fwd);
    free(slots), free(fwd);
    return rc;
}
