/* The planner: every configuration of a job over a cluster's first n ranks that the
 * executors can run (data parallel with an equal or a speed split; each pipeline schedule
 * with every stage count D dividing n, replicas n / D, micro-batch counts that divide the
 * batch, the balanced partition), simulated one by one, ranked by throughput; the ones that
 * do not fit device memory or cannot be generated keep the reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "core/err.h"
#include "nn/model.h"
#include "plan/bounds.h"
#include "pipe/transform.h"
#include "plan/partition.h"
#include "sim/calib.h"
#include "sim/sim.h"
#include "plan/exec_mem.h"
#include "plan/job.h"
#include "plan/pipe_plan.h"
#include "plan/zero_mem.h"

const char *ht_sim_cand_name(const ht_sim_cand *k, char *buf, size_t n) {
    if (k->kind < 0)
        snprintf(buf, n, "data parallel, %s split%s%s", k->speed ? "speed" : "equal",
                 k->shard ? ", shard " : "", k->shard ? ht_shard_names[k->shard] : "");
    else if (ht_pipe_kind_has(k->kind, HT_PIPE_F_CHUNKS))
        snprintf(buf, n, "%s D=%d v=%d x%d replicas, N=%d%s", ht_pipe_kind_names[k->kind], k->D,
                 k->v, k->W, k->N, k->recompute ? ", recompute" : "");
    else if (k->rep) {
        int at = snprintf(buf, n, "%s D=%d x%d replicas, N=%d, hetero ", ht_pipe_kind_names[k->kind],
                          k->D, k->W, k->N);
        for (int q = 0; q < k->Q && at > 0 && (size_t)at + 8 < n; q++)
            for (int r = k->first[q]; r < k->first[q + 1] && (size_t)at + 8 < n; r++)
                at += snprintf(buf + at, n - (size_t)at, "%s%d", r > k->first[q] ? "+" : q ? "|" : "", r);
        if (at > 0 && (size_t)at + 12 < n && k->recompute) snprintf(buf + at, n - (size_t)at, ", recompute");
    } else
        snprintf(buf, n, "%s D=%d x%d replicas, N=%d%s%s", ht_pipe_kind_names[k->kind], k->D, k->W,
                 k->N, k->by_speed ? ", cut by speed" : "", k->recompute ? ", recompute" : "");
    return buf;
}

void ht_sim_cand_config(const ht_config *base, const ht_sim_cand *k, ht_config *c) {
    *c = *base;
    if (k->kind < 0) {
        c->pipe.schedule = HT_PIPE_NONE;
        c->cluster.split = k->speed ? HT_SPLIT_SPEED : HT_SPLIT_EQUAL;
        c->cluster.nshares = 0;
        c->cluster.shard = k->shard;
        return;
    }
    c->pipe.schedule = k->kind;
    c->pipe.stages = k->D;
    c->pipe.micro_batches = k->N;
    c->pipe.chunks = k->v > 1 ? k->v : c->pipe.chunks;
    c->pipe.partition = HT_PART_BALANCED;
    c->pipe.recompute = k->recompute ? HT_RECOMP_ALL : HT_RECOMP_NONE;
    c->pipe.nboundaries = 0;
    c->pipe.nstage_ranks = 0;
    c->pipe.replicate = 0;
    const int S = k->D * k->v;
    if (k->rep) { /* the trainer makes the same partition from its start-up times */
        c->pipe.partition = HT_PART_HETERO;
        c->pipe.replicate = 1;
    } else if (k->by_speed && S - 1 <= HT_MAX_LAYERS) { /* the cut simulated, explicitly */
        c->pipe.nboundaries = S - 1;
        memcpy(c->pipe.boundaries, k->bounds + 1, (size_t)(S - 1) * sizeof *k->bounds);
    }
}

/* The cut of a 1-direction, 1-chunk pipeline (gpipe, 1f1b) that minimises the slowest
 * stage's forward + backward time on the devices that run it (stage d on rank w D + d of
 * every replica w: the slowest of them), by dynamic programming over the legal cuts
 * (ht_pipe_can_cut): for mixed devices, where equal FLOPs leave the fast ones idle. */
static int cut_by_speed(const ht_sim_cluster *c, const ht_model *m, const ht_sim_model *sm,
                        const ht_sim_cand *k, int mb, int *bounds) {
    int L = sm->nlayers, D = k->D;
    double *pre = ht_xcalloc((size_t)D * (L + 1), sizeof *pre); /* [d][i] time of layers < i */
    for (int d = 0; d < D; d++)
        for (int i = 0; i < L; i++) {
            double t = 0;
            for (int w = 0; w < k->W; w++) {
                int r = w * D + d;
                double x = ht_sim_layer_time(c, r, sm, i, mb, 0) + ht_sim_layer_time(c, r, sm, i, mb, 1);
                if (x > t) t = x;
            }
            pre[d * (L + 1) + i + 1] = pre[d * (L + 1) + i] + t;
        }
    double *f = ht_xmalloc((size_t)(D + 1) * (L + 1) * sizeof *f); /* f[s][i]: stages < s over layers < i */
    int *arg = ht_xmalloc((size_t)(D + 1) * (L + 1) * sizeof *arg);
    for (int i = 0; i <= (D + 1) * (L + 1) - 1; i++)
        f[i] = INFINITY;
    f[0] = 0;
    for (int s = 1; s <= D; s++)
        for (int i = s; i <= L; i++) {
            if (i < L && !ht_pipe_can_cut(m, i)) continue;
            for (int j = s - 1; j < i; j++) {
                if (j > 0 && !ht_pipe_can_cut(m, j)) continue;
                double cost = pre[(s - 1) * (L + 1) + i] - pre[(s - 1) * (L + 1) + j];
                double v = f[(s - 1) * (L + 1) + j] > cost ? f[(s - 1) * (L + 1) + j] : cost;
                if (v < f[s * (L + 1) + i]) f[s * (L + 1) + i] = v, arg[s * (L + 1) + i] = j;
            }
        }
    int ok = isfinite(f[D * (L + 1) + L]);
    if (ok) {
        bounds[D] = L;
        for (int s = D; s > 0; s--)
            bounds[s - 1] = arg[s * (L + 1) + bounds[s]];
    }
    free(pre);
    free(f);
    free(arg);
    return ok ? HT_OK : ht_error(HT_EINPUT, "no legal cut of %d layers into %d stages", L, D);
}

/* What the trainer would allocate on each schedule rank of a candidate's plan: the executor's
 * buffers (plan/exec_mem.h: the stage only where every rank holds only its stage, else the
 * whole model), or the memory decision's stage plan where that is larger (the trainer plans
 * recomputation against it). The largest into k; past device.memory_mb the candidate does
 * not fit (and is tried again with recomputation). */
static int fit_limit(const ht_config *cfg, const ht_model *m, const ht_sim_model *sm,
                     const ht_plan *plan, const ht_pipe_sched *s, int n, ht_sim_cand *k,
                     double *bytes) {
    k->local = ht_plan_stage_local(cfg, n);
    k->need_mem = 0, k->need_rank = 0;
    ht_sim_plan_bytes(cfg, m, sm, plan, s, n, bytes);
    for (int q = 0; q < plan->pp.D; q++)
        if (bytes[q] > k->need_mem) k->need_mem = bytes[q], k->need_rank = q;
    const double lim = cfg->device.memory_mb * 1e6;
    if (lim <= 0 || k->need_mem <= lim) return HT_OK;
    return ht_error(HT_EINPUT,
                    "does not fit: pipeline rank %d would allocate %.2f MB (%s), "
                    "device.memory_mb is %.2f MB",
                    k->need_rank, k->need_mem / 1e6,
                    k->local ? "its stage" : "every rank holds the whole model", lim / 1e6);
}

/* A pipeline candidate simulated as the trainer would run its job: the plan ht_plan_job makes
 * of it (sim/calib.h: the cost model's costs; the cut, groups, schedule and memory decision),
 * its stream with the decision's recomputation. The cut and groups into k. */
static int simulate_pipe(const ht_sim_cluster *c, int n, const ht_model *m,
                         const ht_sim_model *sm, const ht_config *base, const ht_sim_dp *dp,
                         ht_sim_cand *k, ht_sim_result *r) {
    const int mb = dp->B / (k->W * k->N);
    int rc = k->by_speed ? cut_by_speed(c, m, sm, k, mb, k->bounds) : HT_OK;
    ht_config cfg;
    ht_sim_cand_config(base, k, &cfg);
    ht_plan plan;
    if (rc != HT_OK || (rc = ht_sim_job_plan(c, sm, m, &cfg, n, &plan)) != HT_OK) return rc;
    memcpy(k->bounds, plan.bounds, (size_t)(plan.S + 1) * sizeof *k->bounds);
    k->Q = plan.grp.Q;
    memcpy(k->first, plan.grp.first, (size_t)(plan.grp.Q + 1) * sizeof *k->first);
    memcpy(k->off, plan.grp.off, (size_t)k->D * sizeof *k->off);
    memcpy(k->cnt, plan.grp.cnt, (size_t)k->D * sizeof *k->cnt);
    ht_pipe_sched s;
    double *bytes = ht_xcalloc((size_t)plan.pp.D, sizeof *bytes);
    if ((rc = ht_plan_schedule(&cfg, &plan.pp, &s)) == HT_OK &&
        (rc = fit_limit(&cfg, m, sm, &plan, &s, n, k, bytes)) != HT_OK)
        ht_pipe_sched_free(&s);
    else if (rc == HT_OK) {
        int any = 0;
        for (int q = 0; q < plan.mem.Q; q++)
            any |= plan.mem.any[q];
        if (any) ht_pipe_add_recompute(&s, plan.mem.any);
        ht_sim_pipe p = {.s = &s, .W = k->W, .mb = mb, .bounds = k->bounds, .alg = dp->alg,
                         .rank_bytes = bytes};
        if (k->Q < k->D) p.P = k->D, p.first = k->first, p.off = k->off, p.cnt = k->cnt;
        rc = ht_sim_run_pipe(c, sm, &p, 0, NULL, r);
        ht_pipe_sched_free(&s);
    }
    free(bytes);
    ht_plan_free(&plan);
    return rc;
}

/* Simulates one candidate and fills its figures (or its reason). */
static void evaluate(const ht_sim_cluster *c, int n, const ht_model *m, const ht_sim_model *sm,
                     const ht_config *base, const ht_sim_dp *dp, ht_sim_cand *k) {
    const int B = dp->B;
    /* the batch hettrain builds its model at: the global batch (data parallel, whose split
     * may move), a micro-batch (pipelines) */
    if (ht_model_check_batch(m, k->kind < 0 ? B : B / (k->W * k->N)) != HT_OK) {
        k->ok = 0;
        snprintf(k->why, sizeof k->why, "hettrain cannot build it: %s", ht_errmsg());
        return;
    }
    ht_sim_result r;
    int rc;
    if (k->kind < 0) {
        ht_config cfg;
        ht_sim_cand_config(base, k, &cfg);
        ht_sim_dp p = *dp; /* the job's reduction settings, as hetsim runs the written job */
        p.speed = k->speed, p.shares = NULL, p.steps = 0, p.shard = k->shard;
        size_t *cut = ht_xmalloc((size_t)(n + 1) * sizeof *cut);
        double *bytes = ht_xmalloc((size_t)n * sizeof *bytes);
        ht_sim_dp_memory(c, &cfg, m, sm, n, cut, bytes); /* as the trainer allocates */
        p.cut = cut, p.rank_bytes = bytes;
        k->need_mem = 0, k->need_rank = 0;
        for (int i = 0; i < n; i++)
            if (bytes[i] > k->need_mem) k->need_mem = bytes[i], k->need_rank = i;
        k->local = ht_plan_zero_init(&cfg, n);
        rc = ht_sim_run_dp(c, n, m, sm, &p, 0, NULL, &r, NULL);
        free(cut), free(bytes);
    } else {
        rc = simulate_pipe(c, n, m, sm, base, dp, k, &r);
    }
    if (rc != HT_OK) {
        k->ok = 0;
        snprintf(k->why, sizeof k->why, "%s", ht_errmsg());
        return;
    }
    k->step = r.makespan;
    k->throughput = r.throughput;
    k->peak_mem = r.peak_mem;
    k->busy = r.busy / r.makespan;
    k->comm = r.comm / r.makespan;
    k->idle = r.idle / r.makespan;
    k->ok = 1;
    /* device.memory_mb: a data-parallel rank holds the whole model at the global batch (the
     * trainer's fit check, build/fit.c); a pipeline's ranks were checked by fit_limit */
    const double lim = base->device.memory_mb * 1e6;
    if (k->kind < 0 && lim > 0 && k->need_mem > lim) {
        k->ok = 0;
        if (k->local) /* sharded from start-up (k->local: plan/zero_mem.h) */
            snprintf(k->why, sizeof k->why,
                     "does not fit: rank %d would allocate %.2f MB (the whole model, its slice "
                     "of the %s) at train.batch %d; device.memory_mb is %.2f MB",
                     k->need_rank, k->need_mem / 1e6,
                     k->shard == HT_SHARD_GRADIENTS ? "gradients and optimizer state"
                                                    : "optimizer state",
                     B, lim / 1e6);
        else
            snprintf(k->why, sizeof k->why,
                     "does not fit: every rank holds the whole model, %.2f MB at train.batch %d; "
                     "device.memory_mb is %.2f MB",
                     k->need_mem / 1e6, B, lim / 1e6);
    }
    /* memory: the smallest device the configuration runs on, 90% usable; where every
     * pipeline rank builds the whole model, the largest rank's allocation on each */
    for (int i = 0; i < n && k->ok; i++) {
        double cap = c->types[c->rank_type[i]].mem_gb * 1e9 * 0.9, need = r.rank[i].peak_mem;
        if (k->kind >= 0 && !k->local && k->need_mem > need) need = k->need_mem;
        if (cap > 0 && need > cap) {
            k->ok = 0;
            snprintf(k->why, sizeof k->why, "does not fit: rank %d needs %.2f GB, its device has %.2f GB usable",
                     i, need / 1e9, cap / 1e9);
            break;
        }
    }
    ht_sim_result_free(&r);
}

static int by_throughput(const void *a, const void *b) {
    const ht_sim_cand *x = a, *y = b;
    if (x->ok != y->ok) return y->ok - x->ok;
    if (x->throughput != y->throughput) return x->throughput < y->throughput ? 1 : -1;
    return 0;
}

int ht_sim_plan(const ht_sim_cluster *c, int n, const ht_model *m, const ht_sim_model *sm, int B,
                int alg, ht_sim_cand **out, int *nout) {
    ht_sim_dp dp = {.B = B, .alg = alg, .overlap = 1, .bucket_first_mb = 1, .bucket_cap_mb = 25,
                    .exclude = 1}; /* cluster.exclude_slow's default */
    char batch[32];
    snprintf(batch, sizeof batch, "train.batch=%d", B);
    /* the defaults for every key a candidate does not set (the learning rate is required,
     * and so is a length: planning reads neither) */
    const char *sets[] = {batch, "optim.lr=0.1", "train.steps=1"};
    ht_config base;
    int rc = ht_config_load(&base, NULL, sets, 3);
    return rc == HT_OK ? ht_sim_plan_job(c, n, m, sm, &base, &dp, out, nout) : rc;
}

int ht_sim_plan_job(const ht_sim_cluster *c, int n, const ht_model *m, const ht_sim_model *sm,
                    const ht_config *base, const ht_sim_dp *dp, ht_sim_cand **out, int *nout) {
    const int B = dp->B;
    int cap = 64, k = 0;
    ht_sim_cand *v = ht_xcalloc((size_t)cap, sizeof *v);
    const int shard = base->cluster.shard; /* the job's own, for its data-parallel rows */
    for (int sp = 0; sp < 2 && n > 1; sp++)
        v[k++] = (ht_sim_cand){.kind = -1, .speed = sp, .shard = shard, .D = 1, .W = n, .N = 1,
                               .v = 1};
    if (n == 1) v[k++] = (ht_sim_cand){.kind = -1, .D = 1, .W = 1, .N = 1, .v = 1};
    int maxS = ht_pipe_max_stages(m), mixed = 0;
    for (int i = 1; i < n; i++) /* a cut by device speed is worth trying on mixed devices */
        mixed |= c->rank_type[i] != c->rank_type[0] || c->slowdown[i] != c->slowdown[0];
    if (maxS > HT_SIM_MAX_STAGES) maxS = HT_SIM_MAX_STAGES;
    for (int D = 2; D <= n && D <= maxS; D++) {
        if (n % D) continue;
        int W = n / D;
        for (int kind = 0; kind < HT_PIPE_NKINDS; kind++) { /* the rows the planner tries */
            const unsigned fl = ht_pipe_rows[kind].flags;
            int vv = fl & HT_PIPE_F_CHUNKS ? 2 : 1, two_way = (fl & HT_PIPE_F_TWO_WAY) != 0;
            if (!(fl & HT_PIPE_F_PLANNED) || (two_way && D % 2)) continue;
            if (D * vv > maxS) continue;
            for (int f = 1; f <= 4; f *= 2) { /* N = D, 2D, 4D micro-batches */
                int N = f * D;
                if (B % (W * N)) continue;
                /* on mixed devices: also cut by speed, and the hetero partition with
                 * replicated stages */
                for (int bs = 0; bs <= (mixed && vv == 1 && !two_way ? 2 : 0); bs++) {
                    if (k == cap) v = ht_xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
                    v[k++] = (ht_sim_cand){.kind = kind, .D = D, .W = W, .N = N, .v = vv,
                                           .by_speed = bs == 1, .rep = bs == 2};
                }
            }
        }
    }
    for (int i = 0; i < k; i++)
        evaluate(c, n, m, sm, base, dp, &v[i]);
    /* recomputation where memory needs it: pipelines that do not fit, again with every
     * stage keeping only its inputs (pipe.recompute = "all"); data parallel with an equal split
     * (every rank sharded from start-up) again with its optimizer state sharded (ZeRO-1), and
     * its gradients too (ZeRO-2) */
    for (int i = 0, k0 = k; i < k0; i++)
        for (int t = 0; t < 2; t++) {
            const ht_sim_cand *x = &v[i];
            const int pipe = x->kind >= 0, dp_eq = x->kind < 0 && !x->speed && !x->shard && n > 1;
            if (x->ok || strncmp(x->why, "does not fit", 12) || !(pipe ? t == 0 : dp_eq)) continue;
            if (k == cap) v = ht_xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
            v[k] = v[i];
            if (pipe) v[k].recompute = 1;
            else v[k].shard = t ? HT_SHARD_GRADIENTS : HT_SHARD_OPTIMIZER;
            v[k].why[0] = 0;
            evaluate(c, n, m, sm, base, dp, &v[k++]);
        }
    qsort(v, (size_t)k, sizeof *v, by_throughput);
    for (int i = 1; i < k; i++)
        if (v[i].ok && v[0].ok)
            snprintf(v[i].why, sizeof v[i].why,
                     "%.1f%% slower than the best: busy %.0f%%, communication %.0f%%, idle %.0f%%",
                     100 * (1 - v[i].throughput / v[0].throughput), 100 * v[i].busy,
                     100 * v[i].comm, 100 * v[i].idle);
    *out = v;
    *nout = k;
    if (k && v[0].ok) return HT_OK;
    /* none runs: the one that needs least memory says by how much it missed */
    int least = 0;
    for (int i = 1; i < k; i++)
        if (v[i].need_mem > 0 && (v[least].need_mem <= 0 || v[i].need_mem < v[least].need_mem))
            least = i;
    char name[128] = "";
    if (k) ht_sim_cand_name(&v[least], name, sizeof name);
    return ht_error(HT_EINPUT, "no configuration of %d ranks fits: %s%s%s", n, name,
                    k ? ": " : "", k ? v[least].why : "none to try");
}

/* "a, b, c" of the stage counts in [lo, hi] dividing n. */
static size_t list_divisors(char *buf, size_t len, int n, int lo, int hi) {
    size_t at = 0;
    for (int D = lo; D <= hi && at + 16 < len; D++)
        if (n % D == 0) at += (size_t)snprintf(buf + at, len - at, "%s%d", at ? ", " : "", D);
    return at;
}

int ht_sim_plan_left_out(const struct ht_model *m, int n, int B, char *buf, size_t len) {
    int maxS = ht_pipe_max_stages(m), lines = 0;
    if (maxS > HT_SIM_MAX_STAGES) maxS = HT_SIM_MAX_STAGES;
    size_t at = 0;
    buf[0] = 0;
    if (n < 2 || len < 64) return 0;
    char ds[256];
    if (list_divisors(ds, sizeof ds, n, 2, n < maxS ? n : maxS) == 0) {
        at += (size_t)snprintf(buf + at, len - at, "pipelines: none tried: their stage counts "
                               "divide the %d ranks and the model has at most %d stages\n", n, maxS);
        return 1;
    }
    /* N = f D micro-batches on n / D replicas: W N = f n, whatever D is */
    if (B % n) {
        int up = (B / n + 1) * n, r = n - 1;
        while (r > 1 && B % r) r--;
        at += (size_t)snprintf(buf + at, len - at,
                               "pipelines: none tried: with N = D, 2D or 4D micro-batches on %d / D "
                               "replicas a step splits the batch into %d, %d or %d micro-batches, "
                               "and train.batch = %d is not a multiple of %d: set train.batch to "
                               "a multiple of %d (e.g. %d)%s",
                               n, n, 2 * n, 4 * n, B, n, n, up, r > 1 ? "" : "\n");
        if (r > 1)
            at += (size_t)snprintf(buf + at, len - at, ", or plan %d ranks (--ranks %d)\n", r, r);
        return 1;
    }
    if (B % (4 * n) && at + 128 < len)
        at += (size_t)snprintf(buf + at, len - at,
                               "pipelines with %s micro-batches not tried: train.batch = %d is not "
                               "a multiple of %d\n", B % (2 * n) ? "2D and 4D" : "4D", B,
                               B % (2 * n) ? 2 * n : 4 * n), lines++;
    if (maxS < n && list_divisors(ds, sizeof ds, n, maxS + 1, n) && at + 128 < len)
        at += (size_t)snprintf(buf + at, len - at, "pipelines of %s stages not tried: the model "
                               "allows at most %d stages (the layers a stage may start at)\n", ds, maxS), lines++;
    return lines;
}
