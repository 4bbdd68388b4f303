/* The planner: every configuration of a job over a cluster's first n ranks that the
 * executors can run (data parallel with an equal or a speed split; each pipeline schedule
 * with every stage count D dividing n, replicas n / D, micro-batch counts that divide the
 * batch, the balanced partition), simulated one by one, ranked by throughput; the ones that
 * do not fit device memory or cannot be generated keep the reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "nn/model.h"
#include "plan/bounds.h"
#include "pipe/transform.h"
#include "plan/partition.h"
#include "sim/calib.h"
#include "sim/sim.h"
#include "plan/pipe_plan.h"

const char *ht_sim_cand_name(const ht_sim_cand *k, char *buf, size_t n) {
    if (k->kind < 0)
        snprintf(buf, n, "data parallel, %s split", k->speed ? "speed" : "equal");
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

/* The trainer's hetero partition with replicated stages (pipe.replicate: stages in rank
 * order, a stage on adjacent ranks of one host with each micro-batch split by speed), by the
 * very function the trainer and hetsim call (plan/pipe_plan.h), on the cost model's layer
 * times laid out as the trainer's start-up calibration (at mb samples and at 1) and the
 * hosts of the first replica's ranks as the trainer gathers them: the job the plan writes
 * ("hetero", replicate) is then cut as simulated here. The cut, the stage count and the
 * groups into k. */
static int cut_replicated(const ht_sim_cluster *c, const ht_model *m, const ht_sim_model *sm,
                          ht_sim_cand *k, int mb) {
    const int n = k->D * k->W;
    double *cal = ht_sim_calibration(c, sm, n, mb),
           *cal1 = mb > 1 ? ht_sim_calibration(c, sm, n, 1) : NULL;
    int host[HT_PART_MAX_RANKS], alternating;
    const int *h = k->D <= HT_PART_MAX_RANKS
                       ? ht_pipe_plan_hosts(c->rank_host, k->D, host, &alternating)
                       : NULL;
    ht_pipe_groups g = {0};
    int rc = ht_pipe_plan_hetero(m, cal, cal1, n, k->kind, k->D, k->N, mb, sm->optim_state_floats,
                                 NULL, 0, 1, h, 0, k->bounds, &g);
    if (rc == HT_OK) {
        k->Q = g.Q;
        memcpy(k->first, g.first, (size_t)(g.Q + 1) * sizeof *g.first);
        memcpy(k->off, g.off, (size_t)k->D * sizeof *g.off);
        memcpy(k->cnt, g.cnt, (size_t)k->D * sizeof *g.cnt);
    }
    ht_pipe_groups_free(&g);
    free(cal), free(cal1);
    return rc;
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

/* Simulates one candidate and fills its figures (or its reason). */
static void evaluate(const ht_sim_cluster *c, int n, const ht_model *m, const ht_sim_model *sm,
                     const ht_sim_dp *dp, ht_sim_cand *k) {
    const int B = dp->B, alg = dp->alg;
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
        ht_sim_dp p = *dp; /* the job's reduction settings, as hetsim runs the written job */
        p.speed = k->speed, p.shares = NULL, p.steps = 0;
        rc = ht_sim_run_dp(c, n, m, sm, &p, 0, NULL, &r, NULL);
    } else {
        ht_pipe_params pp = {.kind = k->kind, .D = k->D, .N = k->N, .v = k->v};
        ht_pipe_sched s;
        int *bounds = k->bounds, mb = B / (k->W * k->N);
        rc = k->rep        ? cut_replicated(c, m, sm, k, mb)
             : k->by_speed ? cut_by_speed(c, m, sm, k, mb, bounds)
                           : ht_pipe_bounds(m, k->D * k->v, HT_PIPE_BALANCED, bounds);
        if (k->rep && rc == HT_OK) pp.D = k->Q;
        if (rc == HT_OK && (rc = ht_pipe_generate(&pp, &s)) == HT_OK) {
            if (k->recompute) { /* pipe.recompute = "all" */
                uint8_t *all = ht_xmalloc((size_t)k->D);
                memset(all, 1, (size_t)k->D);
                ht_pipe_add_recompute(&s, all);
                free(all);
            }
            ht_sim_pipe p = {.s = &s, .W = k->W, .mb = mb, .bounds = bounds, .alg = alg};
            if (k->rep && k->Q < k->D) p.P = k->D, p.first = k->first, p.off = k->off, p.cnt = k->cnt;
            rc = ht_sim_run_pipe(c, sm, &p, 0, NULL, &r);
            ht_pipe_sched_free(&s);
        }
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
    /* memory: the smallest device the configuration runs on, 90% usable */
    for (int i = 0; i < n; i++) {
        double cap = c->types[c->rank_type[i]].mem_gb * 1e9 * 0.9;
        if (cap > 0 && r.rank[i].peak_mem > cap) {
            k->ok = 0;
            snprintf(k->why, sizeof k->why, "does not fit: rank %d needs %.2f GB, its device has %.2f GB usable",
                     i, r.rank[i].peak_mem / 1e9, cap / 1e9);
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
    return ht_sim_plan_job(c, n, m, sm, &dp, out, nout);
}

int ht_sim_plan_job(const ht_sim_cluster *c, int n, const ht_model *m, const ht_sim_model *sm,
                    const ht_sim_dp *dp, ht_sim_cand **out, int *nout) {
    const int B = dp->B;
    int cap = 64, k = 0;
    ht_sim_cand *v = ht_xcalloc((size_t)cap, sizeof *v);
    for (int sp = 0; sp < 2 && n > 1; sp++)
        v[k++] = (ht_sim_cand){.kind = -1, .speed = sp, .D = 1, .W = n, .N = 1, .v = 1};
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
        evaluate(c, n, m, sm, dp, &v[i]);
    /* recomputation where memory needs it: pipelines that do not fit, again with every
     * stage keeping only its inputs (pipe.recompute = "all") */
    for (int i = 0, k0 = k; i < k0; i++)
        if (v[i].kind >= 0 && !v[i].ok && !strncmp(v[i].why, "does not fit", 12)) {
            if (k == cap) v = ht_xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
            v[k] = v[i];
            v[k].recompute = 1;
            v[k].why[0] = 0;
            evaluate(c, n, m, sm, dp, &v[k++]);
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
    return k && v[0].ok ? HT_OK
                        : ht_error(HT_EINPUT, "no configuration of %d ranks fits: %s", n,
                                   k ? v[0].why : "none to try");
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
