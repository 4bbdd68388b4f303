/* pipe.rebalance: the pipeline engine's online re-partitioning (engine_pipe.h). Every
 * rank applies the rule (src/plan/repart.h) to the same all-reduced step times; a new cut
 * moves the layers that change rank, with their optimizer state, and rebuilds the schedule
 * and the executor. Where every rank holds only its stage (p->local, issue 24) a rank's
 * window follows its new stage: the new one is allocated, what arrives is written into it,
 * and the old one (with what left) is freed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "io/trace.h"
#include "train/engine_pipe.h"

/* The job planned again (ht_plan_job: the cut, the memory decision, hepipe's stage times)
 * on the start-up costs with every rank's times scaled by its pipeline rank's factor k;
 * with `cut`, that cut (as explicit boundaries), else the hetero partition's. The plan's
 * own rules apply as at start-up. */
static int plan_again(ht_job *j, pipe_state *p, const double *k, const int *cut, ht_plan *plan) {
    const int D = p->pp.D, L = j->model.nlayers;
    const size_t n = (size_t)j->world * 2 * (size_t)L;
    double *cal = ht_xmalloc(n * sizeof *cal);
    for (int w = 0; w < j->world; w++)
        for (int i = 0; i < 2 * L; i++)
            cal[(size_t)w * 2 * L + i] = p->cal[(size_t)w * 2 * L + i] * k[w % D];
    ht_config cfg = *j->cfg;
    if (cut) {
        cfg.pipe.nboundaries = D - 1;
        memcpy(cfg.pipe.boundaries, cut + 1, (size_t)(D - 1) * sizeof *cut);
    }
    ht_plan_cluster cl = ht_pipe_plan_cluster(j, p);
    cl.verbose = 0;
    ht_plan_costs c = {.cal = cal, .opt_states = ht_optim_state_count(&j->opt)};
    int rc = ht_plan_job(&cfg, &j->model, &cl, &c, plan);
    free(cal);
    return rc;
}

/* The rule's proposal for factors k: the cut of the job planned again. */
static int propose(void *ctx, const double *k, int *cut) {
    ht_job *j = ctx;
    pipe_state *p = j->eng.state;
    ht_plan plan;
    int rc = plan_again(j, p, k, NULL, &plan);
    if (rc != HT_OK) return rc;
    memcpy(cut, plan.bounds, (size_t)(p->pp.D + 1) * sizeof *cut);
    ht_plan_free(&plan);
    return HT_OK;
}

/* pipe.rebalance: on for the hetero cut of a flushing schedule (2bw keeps a batch in flight
 * across steps; explicit boundaries are the user's). The rule's interval and hysteresis are
 * wider than the data-parallel rebalancer's (5 steps, 5%): a new cut rebuilds the executor.
 * Its factors are the median of the last 5 ratios, not smoothed further (alpha 1): with 0.3
 * the first move came when rank 1's factor was 2.3-2.7 of a true 3-4 and went half way
 * (BENCHMARKS.md, 2026-11-26: 0.75-0.93x the cut planned for the slowdown, 0.91-1.00x with 1). */
int ht_pipe_repart_init(ht_job *j, pipe_state *p) {
    const ht_config *cfg = j->cfg;
    const int k = p->pp.kind;
    p->repart = cfg->pipe.rebalance && cfg->pipe.partition == HT_PART_HETERO &&
                !cfg->pipe.nboundaries && p->cal && p->pp.D > 1 && !cfg->pipe.replicate &&
                ht_pipe_kind_has(k, HT_PIPE_F_REPLICAS);
    if (!p->repart) return HT_OK;
    ht_pipe_problem_init(&p->prob, &j->model, p->cal, NULL, j->world, k, p->pp.D, p->pp.N, p->mb,
                         ht_optim_state_count(&j->opt), ht_pipe_mem_part_limits(&p->mem),
                         p->mem.mode == HT_RECOMP_AUTO);
    p->prob.in.host = p->host; /* the start-up cut's two levels */
    int rc = ht_repart_init(&p->rp, p->pp.D, 1.0, 0.1, 10, 2);
    p->rp.propose = propose, p->rp.ctx = j;
    return rc;
}

/* "0-5 | 6-9": the layers of each stage. */
static void cut_text(const int *b, int D, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    for (int q = 0; q < D && k + 24 < n; q++)
        k += (size_t)snprintf(out + k, n - k, "%s%d-%d", q ? " | " : "", b[q], b[q + 1] - 1);
}

static int log_repart(ht_job *j, const pipe_state *p, int64_t step, const int *old) {
    const int D = p->pp.D;
    const ht_repart *r = &p->rp;
    char a[256], b[256], ks[256] = "", kv[256] = "";
    cut_text(old, D, a, sizeof a);
    cut_text(p->bounds, D, b, sizeof b);
    for (int q = 0, k = 0, n = 0; q < D && k + 24 < (int)sizeof ks && n + 24 < (int)sizeof kv;
         q++) {
        k += snprintf(ks + k, sizeof ks - (size_t)k, "%srank %d %.2fx", q ? ", " : "", q, r->k[q]);
        n += snprintf(kv + n, sizeof kv - (size_t)n, "%s%.4g", q ? "," : "", r->k[q]);
    }
    if (r->reverted)
        ht_log_info("step %lld: pipeline cut %s undone, back to %s: median step %.4g ms under "
                    "it, %.4g ms before",
                    (long long)step + 1, a, b, r->t_after * 1e3, r->t_before * 1e3);
    else
        ht_log_info("step %lld: pipeline re-partitioned, layers %s -> %s: slowest stage "
                    "predicted %.4g -> %.4g ms per step (compute measured / start-up: %s)",
                    (long long)step + 1, a, b, r->pred_before * 1e3, r->pred_after * 1e3, ks);
    if (!j->metrics) return HT_OK;
    return ht_metrics_write(j->metrics,
                            "type=%s step=%lld from=%s to=%s reverted=%d factors=%s "
                            "predicted_before_s=%g predicted_after_s=%g step_before_s=%g "
                            "step_after_s=%g",
                            "pipe_repartition", (long long)step + 1, a, b, r->reverted, kv,
                            r->pred_before, r->pred_after, r->t_before,
                            r->reverted ? r->t_after : NAN);
}

/* Pipeline rank of layer l under cut b. */
static int stage_of(const int *b, int D, int l) {
    int q = 0;
    while (q + 1 < D && l >= b[q + 1])
        q++;
    return q;
}

/* Every layer whose pipeline rank changes from cut old to p->bounds moves its parameters
 * and optimizer state from the old rank to the new one in each replica; all ranks walk the
 * layers in the same order, so the blocking sends pair up. Collective. */
static void move_layers(ht_job *j, const pipe_state *p, const int *old) {
    const int D = p->pp.D;
    const ht_model *m = &j->model;
    for (int l = 0; l < m->nlayers; l++) {
        const ht_layer *ly = &m->layers[l];
        int from = stage_of(old, D, l), to = stage_of(p->bounds, D, l);
        if (from == to || !ly->nparams) continue;
        from += p->place.replica * D, to += p->place.replica * D;
        if (j->rank == from || j->rank == to)
            ht_pipe_send_state(j, ly->woff, ly->nparams, from, to, TAG_MOVE);
    }
}

/* ---- stage-local ranks (p->local): the window moves with the cut ---------------------- */

/* A rank's parameter windows: its buffers and where they hold the flat layout (a tied
 * head's copy of wte is one of them). */
typedef struct win {
    ht_buf *params;
    ht_optim *o;
    int nwin;
    ht_pwin w[HT_MODEL_MAX_WINDOWS];
} win;

/* Where x holds layout floats [off, off + n) (floats into its buffers); dies when it does
 * not (a bug: the moves cover what each side holds). */
static size_t at_of(const win *x, size_t off, size_t n) {
    for (int k = 0; k < x->nwin; k++)
        if (off >= x->w[k].base && off + n <= x->w[k].base + x->w[k].n)
            return x->w[k].at + (off - x->w[k].base);
    ht_die(HT_ERUNTIME, "pipe: parameters [%zu, %zu) are not in this rank's windows while the "
                        "cut changes", off, off + n);
}

static win win_of(const ht_model *m, ht_buf *params, ht_optim *o) {
    win x = {.params = params, .o = o, .nwin = m->nwin};
    memcpy(x.w, m->win, (size_t)m->nwin * sizeof *x.w);
    return x;
}

/* The parameters [lo, hi) of layers [a, b) (empty: lo = hi = 0). */
static void layer_window(const ht_model *m, int a, int b, size_t *lo, size_t *hi) {
    int any = 0;
    *lo = *hi = 0;
    for (int i = a; i < b; i++) {
        const ht_layer *l = &m->layers[i];
        if (!l->nparams) continue;
        if (!any) *lo = l->woff;
        *hi = l->woff + l->nparams, any = 1;
    }
}

/* Floats [off, off + n) of the parameters and every optimizer state: from `from`'s window s
 * to `to`'s window d (the same rank: a device copy; else one message each, blocking). */
static void move_range(ht_job *j, const win *s, const win *d, size_t off, size_t n, int from,
                       int to, float *h) {
    const int nst = ht_optim_state_count(d->o);
    for (int k = -1; k < nst; k++) {
        ht_buf *sb = s->params, *db = d->params;
        const char *name;
        size_t bn;
        if (k >= 0) ht_optim_state(s->o, k, &name, &sb, &bn), ht_optim_state(d->o, k, &name, &db, &bn);
        if (from == to)
            ht_buf_copy(j->dev, db, at_of(d, off, n) * sizeof(float), sb,
                        at_of(s, off, n) * sizeof(float), n * sizeof(float));
        else if (j->rank == from) {
            ht_buf_read(j->dev, sb, at_of(s, off, n) * sizeof(float), n * sizeof(float), h);
            ht_comm_send(h, n * sizeof(float), to, TAG_MOVE);
        } else {
            ht_comm_recv(h, n * sizeof(float), from, TAG_MOVE);
            ht_buf_write(j->dev, db, at_of(d, off, n) * sizeof(float), n * sizeof(float), h);
        }
    }
}

/* The tied tensors the new windows d hold outside layers [a, b)'s parameters (the last
 * stage's copy of wte: the head never changes stage, so the old windows s hold it too),
 * with their optimizer state, copied on this rank. */
static void tied_copy(ht_job *j, const win *s, const win *d, int a, int b, float *h) {
    const ht_model *m = &j->model;
    size_t lo, hi;
    layer_window(m, a, b, &lo, &hi);
    for (int i = a; i < b; i++)
        for (int k = 0; k < m->layers[i].ntensors; k++) {
            const ht_param_tensor *t = &m->layers[i].t[k];
            size_t n = 1;
            for (int e = 0; e < t->ndim; e++)
                n *= (size_t)t->shape[e];
            if (t->tied && (t->off < lo || t->off + n > hi))
                move_range(j, s, d, t->off, n, j->rank, j->rank, h);
        }
}

/* Every rank holds only its stage: its new stage's window is allocated (parameters, zeroed
 * gradients, activations for the new layers, the optimizer over the window), the layers it
 * keeps are copied on the device, those that change rank arrive from their old rank with
 * their optimizer state (all ranks walk the layers in one order, so the blocking messages
 * pair up), and the old window is freed. Collective. */
static void move_window(ht_job *j, const pipe_state *p, const int *old) {
    const int D = p->pp.D, me = j->rank % D, base = p->place.replica * D;
    ht_model *m = &j->model;
    size_t lo, hi, mx = 1;
    layer_window(m, p->bounds[me], p->bounds[me + 1], &lo, &hi);
    ht_optim o_old = j->opt;
    win s = win_of(m, m->params, &o_old);
    m->params = NULL; /* kept in s till the moves are done; the rest freed now */
    ht_model_restage(m, lo, hi - lo, p->bounds[me], p->bounds[me + 1]); /* + a tied copy */
    ht_optim_init(&j->opt, j->dev, &o_old.cfg, m->pres);
    j->opt.t = o_old.t, j->opt.track_norm = o_old.track_norm;
    win d = win_of(m, m->params, &j->opt);
    for (int l = 0; l < m->nlayers; l++)
        if (m->layers[l].nparams > mx) mx = m->layers[l].nparams;
    float *h = ht_xmalloc(mx * sizeof(float));
    for (int l = 0; l < m->nlayers; l++) {
        const ht_layer *ly = &m->layers[l];
        int from = stage_of(old, D, l), to = stage_of(p->bounds, D, l);
        if (!ly->nparams || (from != me && to != me)) continue;
        move_range(j, &s, &d, ly->woff, ly->nparams, base + from, base + to, h);
    }
    tied_copy(j, &s, &d, p->bounds[me], p->bounds[me + 1], h);
    free(h);
    ht_dev_finish(j->dev);
    ht_buf_free(s.params);
    ht_optim_free(&o_old);
}

/* The plan for the cut in p->bounds on the scaled costs (hepipe: the stage times scaled by
 * each rank's measured factor; the memory decision re-taken for the new stages), then the
 * schedule and the executor it says; device memory counts its peak from here. */
static int rebuild(ht_job *j, pipe_state *p, int64_t step) {
    ht_pipe_exec_free(p->x);
    p->x = NULL;
    ht_pipe_sched_free(&p->sched);
    ht_dev_mem(j->dev, NULL, NULL, NULL, 1);
    int cut[HT_PART_MAX_RANKS + 1];
    memcpy(cut, p->bounds, (size_t)(p->pp.D + 1) * sizeof *cut);
    ht_plan plan;
    int rc = plan_again(j, p, p->rp.k, cut, &plan);
    if (rc != HT_OK) return rc;
    double *times = NULL;
    ht_pipe_adopt_plan(p, &plan, &p->pp, &times);
    ht_pipe_report rep;
    rc = ht_pipe_make_schedule(j, &p->pp, p, ht_config_slowdown_at(j->cfg, j->rank, step + 1), &rep);
    p->pp.stage_time = NULL;
    free(times);
    if (rc != HT_OK) return rc;
    p->bubble_unit = rep.bubble;
    ht_pipe_announce(j, p);
    return HT_OK;
}

/* The rule on this step's times (t[2r], t[2r + 1]: rank r's compute and whole step); a new
 * cut moves the layers and rebuilds. Collective: every rank decides alike from the same
 * all-reduced times. */
int ht_pipe_repartition(ht_job *j, pipe_state *p, int64_t step, const double *t) {
    const int D = p->pp.D;
    double comp[HT_PART_MAX_RANKS] = {0}, slowest = 0;
    for (int r = 0; r < j->world; r++) {
        if (t[2 * r] > comp[r % D]) comp[r % D] = t[2 * r];
        if (t[2 * r + 1] > slowest) slowest = t[2 * r + 1];
    }
    int old[HT_PART_MAX_RANKS + 1];
    memcpy(old, p->bounds, (size_t)(D + 1) * sizeof *old);
    if (!ht_repart_update(&p->rp, step, &p->prob.in, comp, slowest, p->bounds)) {
        if (p->rp.kept && j->rank == 0)
            ht_log_info("step %lld: the new pipeline cut holds: median step %.4g ms under it, "
                        "%.4g ms before",
                        (long long)step + 1, p->rp.t_after * 1e3, p->rp.t_before * 1e3);
        if (p->rp.blocked && !p->told && j->rank == 0) {
            char c[256];
            cut_text(p->rp.other, D, c, sizeof c);
            ht_log_info("step %lld: the model prefers the cut %s again, but it measured %.4g ms "
                        "per step, no faster than now: staying",
                        (long long)step + 1, c, p->rp.t_other * 1e3);
        }
        p->told |= p->rp.blocked;
        return HT_OK;
    }
    p->told = 0;
    int rc = j->rank == 0 ? log_repart(j, p, step, old) : HT_OK;
    double t0 = ht_now();
    if (p->local) { /* the executor gives the model its own buffers back first */
        ht_pipe_exec_free(p->x);
        p->x = NULL;
        move_window(j, p, old);
    } else
        move_layers(j, p, old);
    int rc2 = rebuild(j, p, step);
    ht_trace_span("re-partition (layers moved, executor rebuilt)", t0, ht_now());
    return rc != HT_OK ? rc : rc2;
}

