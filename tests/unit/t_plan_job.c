/* The plan phase (plan/job.h): the trainer's path and hetsim's path give the identical plan
 * from the same costs, for every engine kind: data parallel (equal and by speed), the
 * asynchronous policies, every pipeline schedule (the zero-bubble ones, which only hetsim
 * runs for now, too), replicas, given stage ranks and the hetero
 * partition (with replicated stages on two hosts).
 *
 * The trainer's path is written here as the trainer takes it: each rank times its own layers
 * and the rows are gathered in rank order (ht_pipe_plan_calibrate's layout: rank w's forward
 * of layer l at w * 2L + l, its backward at w * 2L + L + l), the hosts are the first of the
 * pipeline ranks with the same host name (ht_pipe_plan_gather_hosts), a data-parallel rank
 * times its whole model at its equal share and at a quarter of it and fits
 * ht_plan_affine_from; then ht_plan_job. hetsim's path is the code hetsim runs: its cost
 * layout (ht_sim_calibration) and plan (ht_sim_job_plan), and the split the data-parallel
 * simulation uses (ht_sim_run_dp's shares). The "same costs" are the cost model's layer times
 * (ht_sim_layer_time), which the trainer would measure instead.
 *
 * The memory decision (recomputed layers, slots in flight, hepipe's in-flight limits,
 * predicted bytes, the member of a group that speaks for it) is part of the plan and compared
 * field by field, also under device.memory_mb limits that make it recompute; one case by hand
 * (memory_by_hand: the limit that makes exactly layers 0-3 recomputed).
 *
 * Independent checks beside the equality: the engine order (a pipeline schedule wins over an
 * asynchronous sync.mode: the trainer refuses that job rather than running it as
 * asynchronous); the pipeline's geometry by hand (R = world / D, mb = B / (R N)); 2 equal
 * ranks split 12 samples 6/6 and a slower rank gets fewer; the hetero cut gives the slow rank
 * of two the smaller share of the compute. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "nn/model.h"
#include "plan/job.h"
#include "plan/plan.h"
#include "sim/calib.h"
#include "sim/sim.h"
#include "tap.h"

/* An MLP 8 -> 16 x 8 -> 8 (9 linear layers, cuts before each). */
static void mlp(ht_model *m) {
    int hidden[8];
    for (int i = 0; i < 8; i++)
        hidden[i] = 16;
    ht_exit_on_error(ht_model_mlp(m, NULL, 8, hidden, 8, 8, "relu", 64));
}

/* n ranks of a roofline device, per_host to a host, rank r slowed by slow[r]. launch_us 0:
 * times proportional to the samples (no fixed cost). */
static void cluster(ht_sim_cluster *c, int n, int per_host, const double *slow, double launch) {
    ht_sim_devtype t = {.prof_dev = -1, .scale = 1, .gflops = 50, .mem_bw_gbs = 20,
                        .launch_us = launch};
    snprintf(t.name, sizeof t.name, "roofline");
    ht_sim_link l = {1e-5, 1e9, 0};
    ht_sim_cluster_uniform(c, &t, n, per_host, l, l);
    for (int r = 0; r < n; r++)
        c->slowdown[r] = slow ? slow[r] : 1;
}

static int load(ht_config *cfg, const char *const *sets) {
    const char *all[16] = {"optim.lr=0.1", "train.steps=4"};
    int n = 2;
    for (int i = 0; sets[i] && n < 16; i++)
        all[n++] = sets[i];
    return ht_config_load(cfg, NULL, all, n);
}

/* ---------------------------------------------------------------- the trainer's path */

/* Every rank's own layer times at `samples`, gathered in rank order. */
static double *gathered(const ht_sim_cluster *c, const ht_sim_model *sm, int n, int samples) {
    const int L = sm->nlayers;
    double *all = calloc((size_t)n * 2 * (size_t)L, sizeof *all);
    for (int w = 0; w < n; w++) {
        double *mine = all + (size_t)w * 2 * L; /* what rank w sends */
        for (int l = 0; l < L; l++) {
            mine[l] = ht_sim_layer_time(c, w, sm, l, samples, 0);
            mine[L + l] = ht_sim_layer_time(c, w, sm, l, samples, 1);
        }
    }
    return all;
}

static int trainer_plan(const ht_config *cfg, const ht_model *m, const ht_sim_cluster *c,
                        const ht_sim_model *sm, int n, ht_plan *p) {
    int need, need1;
    ht_plan_needs(cfg, n, &need, &need1);
    const int D = cfg->pipe.stages, N = cfg->pipe.micro_batches;
    const int mb = cfg->train.batch / (n / D * N);
    int id[HT_PART_MAX_RANKS], host[HT_PART_MAX_RANKS], alt = 0;
    for (int q = 0; q < D && q < HT_PART_MAX_RANKS; q++) { /* by host name */
        char name[16], other[16];
        snprintf(name, sizeof name, "host%d", c->rank_host[q]);
        id[q] = 0;
        for (;; id[q]++) {
            snprintf(other, sizeof other, "host%d", c->rank_host[id[q]]);
            if (!strcmp(name, other)) break;
        }
    }
    /* every rank's memory limit, the smallest of a pipeline rank's replicas (pipe_mem.c's
     * gather): device.memory_mb here, as the cost model's devices report none */
    double lim[HT_PART_MAX_RANKS];
    int dev[HT_PART_MAX_RANKS];
    const int mode = cfg->pipe.recompute, from_cfg = cfg->device.memory_mb > 0;
    for (int w = 0; from_cfg && w < n; w++) {
        const double mine = cfg->device.memory_mb * 1e6;
        if (w < D || mine < lim[w % D]) lim[w % D] = mine, dev[w % D] = w;
    }
    ht_plan_cluster cl = {.world = n,
                          .host = D <= HT_PART_MAX_RANKS ? ht_pipe_plan_hosts(id, D, host, &alt)
                                                         : NULL,
                          .mem_limit = from_cfg ? lim : NULL,
                          .allow_recompute = from_cfg && mode == HT_RECOMP_AUTO,
                          .dev_limit = from_cfg ? lim : NULL,
                          .dev_rank = from_cfg ? dev : NULL};
    double *sp = NULL, *fx = NULL;
    if (ht_plan_engine_of(cfg) == HT_PLAN_DP && cfg->cluster.split == HT_SPLIT_SPEED) {
        sp = calloc((size_t)n, sizeof *sp), fx = calloc((size_t)n, sizeof *fx);
        const int s1 = cfg->train.batch / n, s2 = s1 >= 4 ? s1 / 4 : s1; /* equal share */
        for (int r = 0; r < n; r++) {
            double t1 = 0, t2 = 0;
            for (int bwd = 0; bwd < 2; bwd++)
                t1 += ht_sim_range_time(c, r, sm, 0, sm->nlayers, s1, bwd),
                    t2 += ht_sim_range_time(c, r, sm, 0, sm->nlayers, s2, bwd);
            ht_plan_affine_from(s1, t1, s2, t2, &sp[r], &fx[r]);
        }
    }
    ht_plan_costs k = {.cal = need ? gathered(c, sm, n, mb) : NULL,
                       .cal1 = need1 ? gathered(c, sm, n, 1) : NULL,
                       .opt_states = sm->optim_state_floats,
                       .speed = sp,
                       .fixed = fx};
    int rc = ht_plan_job(cfg, m, &cl, &k, p);
    free((void *)k.cal), free((void *)k.cal1), free(sp), free(fx);
    return rc;
}

/* ---------------------------------------------------------------- comparison */

static int same_ints(const int *a, const int *b, int n) {
    if (!a || !b) return a == b;
    return !memcmp(a, b, (size_t)n * sizeof *a);
}

static int same_use(const ht_mem_use *a, const ht_mem_use *b) {
    return a->state == b->state && a->acts == b->acts && a->live == b->live &&
           a->work == b->work && a->total == b->total;
}

/* The memory decisions, field by field (bytes and seconds bit for bit). */
static int same_mem(const ht_plan *pa, const ht_plan *pb) {
    const ht_plan_mem *a = &pa->mem, *b = &pb->mem;
    if (a->Q != b->Q || a->L != b->L || a->mode != b->mode || a->Q != pa->pp.D) return 0;
    if (!a->layers || !b->layers) return 0;
    if (memcmp(a->layers, b->layers, (size_t)a->Q * a->L) || memcmp(a->any, b->any, (size_t)a->Q) ||
        !same_ints(a->max_inflight, b->max_inflight, a->Q) || !same_ints(a->who, b->who, a->Q) ||
        memcmp(a->chunks, b->chunks, (size_t)a->Q * sizeof *a->chunks))
        return 0;
    for (int q = 0; q < a->Q; q++) {
        const ht_mem_plan *x = &a->plan[q], *y = &b->plan[q];
        if (x->fits != y->fits || x->slots != y->slots || x->max_slots != y->max_slots ||
            x->nrc != y->nrc || x->extra_s != y->extra_s || !same_use(&x->use, &y->use))
            return 0;
    }
    return same_ints(pa->inflight, pb->inflight, a->Q) &&
           !pa->pp.max_inflight == !pb->pp.max_inflight;
}

/* Every decision of the two plans, field by field (times bit for bit). */
static int same_plan(const ht_plan *a, const ht_plan *b, int world) {
    if (a->engine != b->engine || a->B != b->B || a->model_batch != b->model_batch) return 0;
    if (a->sync.mode != b->sync.mode || a->sync.world != b->sync.world ||
        a->sync.workers != b->sync.workers || a->sync.extra != b->sync.extra)
        return 0;
    if (a->engine != HT_PLAN_PIPE) return 1;
    if (a->P != b->P || a->R != b->R || a->N != b->N || a->mb != b->mb || a->S != b->S) return 0;
    if (a->pp.kind != b->pp.kind || a->pp.D != b->pp.D || a->pp.N != b->pp.N ||
        a->pp.v != b->pp.v || a->pp.bf_ratio != b->pp.bf_ratio)
        return 0;
    if (!same_ints(a->bounds, b->bounds, a->S + 1)) return 0;
    const ht_pipe_groups *g = &a->grp, *h = &b->grp;
    if (g->D != h->D || g->Q != h->Q || !same_ints(g->first, h->first, g->Q + 1) ||
        !same_ints(g->off, h->off, g->D) || !same_ints(g->cnt, h->cnt, g->D))
        return 0;
    if (!a->stage_time != !b->stage_time) return 0;
    if (a->stage_time && memcmp(a->stage_time, b->stage_time, (size_t)a->P * sizeof(double)))
        return 0;
    (void)world;
    return same_mem(a, b);
}

static void bounds_text(const ht_plan *p, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int s = 0; p->bounds && s <= p->S && k + 8 < n; s++)
        k += (size_t)snprintf(buf + k, n - k, "%s%d", s ? "," : "", p->bounds[s]);
}

/* One job on n ranks: both paths plan it, the plans are equal; *out gets the trainer's. */
static void both(const char *what, const char *const *sets, const ht_model *m,
                 const ht_sim_cluster *c, const ht_sim_model *sm, int n, ht_plan *out) {
    ht_config cfg;
    ht_exit_on_error(load(&cfg, sets));
    ht_plan a, b;
    int ra = trainer_plan(&cfg, m, c, sm, n, &a);
    if (ra != HT_OK) tap_diag("trainer: %s", ht_errmsg());
    int rb = ht_sim_job_plan(c, sm, m, &cfg, n, &b);
    if (rb != HT_OK) tap_diag("hetsim: %s", ht_errmsg());
    char ta[128];
    if (ra == HT_OK) bounds_text(&a, ta, sizeof ta);
    tap_ok(ra == HT_OK && rb == HT_OK && same_plan(&a, &b, n),
           "%s: the trainer's plan = hetsim's (%s, bounds %s)", what,
           ra == HT_OK ? ht_plan_engine_name(a.engine) : "-", ra == HT_OK ? ta : "-");
    if (rb == HT_OK) ht_plan_free(&b);
    if (out && ra == HT_OK)
        *out = a;
    else if (ra == HT_OK)
        ht_plan_free(&a);
}

/* ---------------------------------------------------------------- cases */

static void pipelines(const ht_model *m, const ht_sim_model *sm) {
    const double slow4[4] = {1, 2.5, 1, 1.5};
    ht_sim_cluster c;
    cluster(&c, 4, 2, slow4, 10);
    static const char *const kinds[][3] = {
        {"pipe.schedule=\"gpipe\"", "pipe.stages=4", "pipe.chunks=1"},
        {"pipe.schedule=\"1f1b\"", "pipe.stages=4", "pipe.chunks=1"},
        {"pipe.schedule=\"interleaved\"", "pipe.stages=2", "pipe.chunks=2"},
        {"pipe.schedule=\"chimera\"", "pipe.stages=2", "pipe.chunks=1"},
        {"pipe.schedule=\"hepipe\"", "pipe.stages=4", "pipe.chunks=1"},
        {"pipe.schedule=\"2bw\"", "pipe.stages=4", "pipe.chunks=1"},
        {"pipe.schedule=\"zb-h1\"", "pipe.stages=4", "pipe.chunks=1"},
        {"pipe.schedule=\"zb-v\"", "pipe.stages=2", "pipe.chunks=1"},
        {"pipe.schedule=\"zb-het\"", "pipe.stages=4", "pipe.chunks=1"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const char *sets[] = {"train.batch=32", "pipe.micro_batches=4", kinds[k][0], kinds[k][1],
                              kinds[k][2], NULL};
        char what[96];
        snprintf(what, sizeof what, "%s, %s, balanced, 4 ranks", kinds[k][0], kinds[k][1]);
        ht_plan p;
        memset(&p, 0, sizeof p);
        both(what, sets, m, &c, sm, 4, &p);
        const int D = !strcmp(kinds[k][1], "pipe.stages=2") ? 2 : 4;
        tap_ok(p.engine == HT_PLAN_PIPE && p.P == D && p.R == 4 / D && p.mb == 32 / (4 / D * 4) &&
                   p.model_batch == p.mb && p.bounds && p.bounds[0] == 0 &&
                   p.bounds[p.S] == m->nlayers,
               "%s: D=%d, R=%d, micro-batch %d (by hand: %d x %d, %d), bounds cover the model",
               what, p.P, p.R, p.mb, D, 4 / D, 32 / (4 / D * 4));
        ht_plan_free(&p);
    }
    /* the hetero cut, hepipe under it, explicit stage ranks, uniform */
    const char *het[] = {"train.batch=32", "pipe.micro_batches=4", "pipe.schedule=\"1f1b\"",
                         "pipe.stages=2", "pipe.partition=\"hetero\"", NULL};
    both("1f1b hetero, 2 stages x 2 replicas", het, m, &c, sm, 4, NULL);
    const char *hep[] = {"train.batch=32", "pipe.micro_batches=4", "pipe.schedule=\"hepipe\"",
                         "pipe.stages=4", "pipe.partition=\"hetero\"", NULL};
    both("hepipe hetero, 4 stages", hep, m, &c, sm, 4, NULL);
    const char *rep[] = {"train.batch=32", "pipe.micro_batches=2", "pipe.schedule=\"gpipe\"",
                         "pipe.stages=4", "pipe.partition=\"hetero\"", "pipe.replicate=true",
                         NULL};
    both("gpipe hetero with replicated stages, 4 ranks on 2 hosts", rep, m, &c, sm, 4, NULL);
    const char *sr[] = {"train.batch=32", "pipe.micro_batches=2", "pipe.schedule=\"1f1b\"",
                        "pipe.stages=4", "pipe.stage_ranks=[2,2]", "pipe.boundaries=[8]", NULL};
    both("1f1b, pipe.stage_ranks [2,2]", sr, m, &c, sm, 4, NULL);
    const char *uni[] = {"train.batch=32", "pipe.micro_batches=4", "pipe.schedule=\"gpipe\"",
                         "pipe.stages=2", "pipe.partition=\"uniform\"", NULL};
    both("gpipe uniform, 2 stages x 2 replicas", uni, m, &c, sm, 4, NULL);
    ht_sim_cluster_free(&c);

    /* the hetero cut on 2 ranks, rank 1 three times slower: stage 1 has less compute */
    const double slow2[2] = {1, 3};
    cluster(&c, 2, 2, slow2, 0);
    const char *h2[] = {"train.batch=16", "pipe.micro_batches=4", "pipe.schedule=\"gpipe\"",
                        "pipe.stages=2", "pipe.partition=\"hetero\"", NULL};
    ht_plan p;
    memset(&p, 0, sizeof p);
    both("gpipe hetero, 2 ranks, rank 1 slowed 3x", h2, m, &c, sm, 2, &p);
    double w[2] = {0, 0};
    for (int s = 0; s < 2 && p.bounds; s++)
        for (int l = p.bounds[s]; l < p.bounds[s + 1]; l++)
            w[s] += sm->l[l].flops_f + sm->l[l].flops_b;
    tap_ok(p.bounds && w[1] < w[0], "the slow rank's stage has less work (%.0f vs %.0f FLOPs)",
           w[1], w[0]);
    ht_plan_free(&p);
    ht_sim_cluster_free(&c);
}

/* Data parallel by speed: the trainer's split = the simulation's; equal ranks 6 and 6 of 12;
 * a rank 3x slower fewer samples than the other (the roofline's per-step parameter traffic
 * is a fixed cost, so not exactly 3 of 12). */
static void data_parallel(const ht_model *m, const ht_sim_model *sm) {
    const double slow[3][2] = {{1, 1}, {1, 3}, {1, 1.7}};
    const double launch[3] = {0, 0, 20};
    const int want[3][2] = {{6, 6}, {-1, -1}, {-1, -1}};
    for (int k = 0; k < 3; k++) {
        ht_sim_cluster c;
        cluster(&c, 2, 1, slow[k], launch[k]);
        const char *sets[] = {"train.batch=12", "cluster.split=\"speed\"", NULL};
        ht_config cfg;
        ht_exit_on_error(load(&cfg, sets));
        ht_plan a;
        int ra = trainer_plan(&cfg, m, &c, sm, 2, &a);
        ht_sim_dp d = {.B = 12, .speed = 1, .alg = HT_SIM_RING, .steps = 1};
        ht_sim_result r;
        int sh[2] = {-1, -1};
        int rb = ht_sim_run_dp(&c, 2, m, sm, &d, 0, NULL, &r, sh);
        tap_ok(ra == HT_OK && rb == HT_OK && a.shares && a.shares[0] == sh[0] &&
                   a.shares[1] == sh[1] && sh[0] + sh[1] == 12 &&
                   (want[k][0] < 0 || (sh[0] == want[k][0] && sh[1] == want[k][1])) &&
                   (slow[k][1] == 1 || sh[1] < sh[0]),
               "data parallel by speed, slowdowns 1 / %g, launch %g us: trainer %d/%d, hetsim "
               "%d/%d",
               slow[k][1], launch[k], ra == HT_OK && a.shares ? a.shares[0] : -1,
               ra == HT_OK && a.shares ? a.shares[1] : -1, sh[0], sh[1]);
        if (ra == HT_OK) ht_plan_free(&a);
        if (rb == HT_OK) ht_sim_result_free(&r);
        ht_sim_cluster_free(&c);
    }
    ht_sim_cluster c;
    cluster(&c, 2, 1, NULL, 0);
    const char *eq[] = {"train.batch=12", NULL};
    ht_plan p;
    memset(&p, 0, sizeof p);
    both("data parallel, equal split", eq, m, &c, sm, 2, &p);
    tap_ok(p.engine == HT_PLAN_DP && p.model_batch == 12 && !p.shares,
           "bsp without a pipeline: data parallel, the model at the global batch");
    ht_plan_free(&p);
    ht_sim_cluster_free(&c);
}

/* "0-3" / "-": the layers schedule rank q recomputes, and their count into *n. */
static void recomputed(const ht_plan *p, int q, char *buf, size_t len, int *n) {
    size_t k = 0;
    *n = 0;
    buf[0] = 0;
    for (int l = 0; l < p->mem.L && k + 8 < len; l++)
        if (p->mem.layers[(size_t)q * p->mem.L + l])
            k += (size_t)snprintf(buf + k, len - k, "%s%d", k ? "," : "", l), ++*n;
    if (!k) snprintf(buf, len, "-");
}

/* The memory decision under device.memory_mb: the trainer's = hetsim's, field by field, for
 * schedules that hold different depths (1f1b, gpipe, hepipe's in-flight limits, 2bw's second
 * weight version), groups of replicated stages, and "all" / "none". */
static void memory_same(const ht_model *m, const ht_sim_model *sm) {
    const double slow4[4] = {1, 2.5, 1, 1.5};
    ht_sim_cluster c;
    cluster(&c, 4, 2, slow4, 10);
    static const char *const cases[][4] = {
        {"pipe.schedule=\"1f1b\"", "pipe.stages=4", "device.memory_mb=0.02", "auto"},
        {"pipe.schedule=\"gpipe\"", "pipe.stages=2", "device.memory_mb=0.025", "auto"},
        {"pipe.schedule=\"hepipe\"", "pipe.stages=4", "device.memory_mb=0.018", "auto"},
        {"pipe.schedule=\"2bw\"", "pipe.stages=4", "device.memory_mb=0.025", "auto"},
        {"pipe.schedule=\"1f1b\"", "pipe.stages=4", "device.memory_mb=0.03", "all"},
        {"pipe.schedule=\"gpipe\"", "pipe.stages=4", "device.memory_mb=0.03", "none"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char rc[64];
        snprintf(rc, sizeof rc, "pipe.recompute=\"%s\"", cases[k][3]);
        const char *sets[] = {"train.batch=32", "pipe.micro_batches=4", cases[k][0], cases[k][1],
                              cases[k][2], rc, NULL};
        char what[160];
        snprintf(what, sizeof what, "memory: %s, %s, %s, %s", cases[k][0], cases[k][1],
                 cases[k][2], rc);
        ht_plan p;
        memset(&p, 0, sizeof p);
        both(what, sets, m, &c, sm, 4, &p);
        for (int q = 0; q < p.mem.Q; q++) {
            char l[128];
            int n;
            recomputed(&p, q, l, sizeof l, &n);
            tap_diag("  rank %d: recomputes %s, %d in flight (room for %d), %.0f bytes", q, l,
                     p.mem.plan[q].slots, p.mem.plan[q].max_slots, p.mem.plan[q].use.total);
        }
        ht_plan_free(&p);
    }
    const char *rep[] = {"train.batch=32", "pipe.micro_batches=2", "pipe.schedule=\"gpipe\"",
                         "pipe.stages=4", "pipe.partition=\"hetero\"", "pipe.replicate=true",
                         "device.memory_mb=0.03", NULL};
    ht_plan p;
    memset(&p, 0, sizeof p);
    both("memory: gpipe hetero with replicated stages, device.memory_mb 0.03", rep, m, &c, sm, 4,
         &p);
    for (int q = 0; q < p.mem.Q; q++)
        tap_diag("  schedule rank %d: %d layer(s) recomputed, pipeline rank %d speaks for it", q,
                 p.mem.plan[q].nrc, p.mem.who[q]);
    ht_plan_free(&p);
    /* groups: schedule rank q on pipeline ranks 2q, 2q + 1, each on 4 of the 8 samples */
    const char *grp[] = {"train.batch=32", "pipe.micro_batches=4", "pipe.schedule=\"1f1b\"",
                         "pipe.stages=4", "pipe.stage_ranks=[2,2]", "pipe.boundaries=[10]",
                         "device.memory_mb=0.0222", NULL};
    memset(&p, 0, sizeof p);
    both("memory: 1f1b, pipe.stage_ranks [2,2], device.memory_mb 0.0222", grp, m, &c, sm, 4, &p);
    for (int q = 0; q < p.mem.Q; q++)
        tap_diag("  schedule rank %d: %d layer(s) recomputed, %d in flight, pipeline rank %d "
                 "speaks for it", q, p.mem.plan[q].nrc, p.mem.plan[q].slots, p.mem.who[q]);
    ht_plan_free(&p);
    ht_sim_cluster_free(&c);
}

/* By hand: 1f1b on 2 ranks, 2 micro-batches of 8, stages [0, 10) and [10, 17), as the executor
 * allocates them. Every layer keeps its output for its backward (fc: 16 floats, fc9: 8; relu
 * does not run in place), 64 bytes a sample; a relu is fused into the fc below it, so they
 * are recomputed together. Rank 0 holds 2 micro-batches in flight (1F1B: D - q), rank 1 one.
 * A slot holds the stage's arena (its input and outputs), the arena's gradient and 12 bytes
 * a sample of labels, losses and flags; rank 0's arena is 32 + 10 x 64 = 672 bytes a sample:
 * a slot 8 (2 x 672 + 12) = 10848. The tiled GEMM's packing for the largest product, an
 * fc 16 -> 16's (or 16 -> 8's) forward at 8 rows: B's panels 16 x 16 = 256 floats, 1024 bytes
 * (A read in place; the gradients, 8 or 16 rows with B not transposed, read both in place).
 * State: 1232 parameters x 4 x (2 + optimizer floats).
 * None recomputed: state + 2 x 10848 + 1024 = state + 22720. Recomputing p pairs: the own
 * buffers (10848) rebuild one micro-batch and each slot keeps 8 (672 - 128 p) + 8 + 96:
 * state + 22832 - 2048 p. Rank 1: 952 parameters, arena 64 (input) + 32 (the LOAD's model
 * input) + 6 x 64 + 32 = 512, one slot 8 (1024 + 12) = 8288: state + 9312. A limit 1.5 pairs
 * below rank 0's need (state + 19648): rank 1 fits as it is; rank 0 recomputes two pairs
 * (one gives 20784), the relus first (64 bytes kept per 16 FLOPs, against an fc's 272 or
 * 528), lowest first among equals: layers 0-3, predicted state + 18736, and room for 2 in
 * flight ((19648 - 11872) / 3432). */
static void memory_by_hand(const ht_model *m, const ht_sim_model *sm) {
    const double opt = 2 + sm->optim_state_floats;
    const double state0 = 1232 * 4 * opt, state1 = 952 * 4 * opt;
    const double limit = state0 + 22720 - 3072;
    char mem[64];
    snprintf(mem, sizeof mem, "device.memory_mb=%.6f", limit / 1e6);
    ht_sim_cluster c;
    cluster(&c, 2, 2, NULL, 0);
    const char *sets[] = {"train.batch=16", "pipe.micro_batches=2", "pipe.schedule=\"1f1b\"",
                          "pipe.stages=2", "pipe.boundaries=[10]", mem, NULL};
    ht_plan p;
    memset(&p, 0, sizeof p);
    both("memory by hand: 1f1b, 2 ranks, cut at layer 10", sets, m, &c, sm, 2, &p);
    char l0[128] = "", l1[128] = "";
    int n0 = -1, n1 = -1;
    if (p.mem.Q == 2) recomputed(&p, 0, l0, sizeof l0, &n0), recomputed(&p, 1, l1, sizeof l1, &n1);
    const int ok0 = p.mem.Q == 2 && !strcmp(l0, "0,1,2,3") && p.mem.any[0] &&
                    p.mem.plan[0].fits && p.mem.plan[0].slots == 2 &&
                    p.mem.plan[0].max_slots == 2 && p.mem.plan[0].use.total == state0 + 18736;
    tap_ok(ok0, "rank 0 recomputes layers %s (by hand: 0,1,2,3), %d in flight (2), predicted "
           "%.0f bytes (by hand %.0f) under a limit of %.0f",
           l0, p.mem.Q == 2 ? p.mem.plan[0].slots : -1, p.mem.Q == 2 ? p.mem.plan[0].use.total : -1,
           state0 + 18736, limit);
    tap_ok(p.mem.Q == 2 && n1 == 0 && !p.mem.any[1] && p.mem.plan[1].slots == 1 &&
               p.mem.plan[1].use.total == state1 + 9312,
           "rank 1 recomputes nothing (%s), predicted %.0f bytes (by hand %.0f)", l1,
           p.mem.Q == 2 ? p.mem.plan[1].use.total : -1, state1 + 9312);
    ht_plan_free(&p);
    /* "none" under the same limit keeps every layer, past the limit (the engine warns) */
    const char *none[] = {"train.batch=16", "pipe.micro_batches=2", "pipe.schedule=\"1f1b\"",
                          "pipe.stages=2", "pipe.boundaries=[10]", mem, "pipe.recompute=\"none\"",
                          NULL};
    memset(&p, 0, sizeof p);
    both("memory by hand, pipe.recompute none", none, m, &c, sm, 2, &p);
    tap_ok(p.mem.Q == 2 && !p.mem.any[0] && !p.mem.any[1] &&
               p.mem.plan[0].use.total == state0 + 22720,
           "\"none\": nothing recomputed, rank 0 predicted %.0f bytes (by hand %.0f), past its "
           "limit",
           p.mem.Q == 2 ? p.mem.plan[0].use.total : -1, state0 + 22720);
    ht_plan_free(&p);
    ht_sim_cluster_free(&c);
}

static void engines(const ht_model *m, const ht_sim_model *sm) {
    ht_sim_cluster c;
    cluster(&c, 3, 1, NULL, 0);
    static const char *const modes[] = {"sync.mode=\"ssp\"", "sync.mode=\"asp\"",
                                        "sync.mode=\"dasp\"", "sync.mode=\"gossip\"",
                                        "sync.mode=\"preduce\"", "sync.mode=\"sap-reduce\"",
                                        "sync.mode=\"gossip-adaptive\""};
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        const char *sets[] = {"train.batch=12", modes[k], NULL};
        ht_config cfg;
        if (load(&cfg, sets) != HT_OK) { /* a policy this tree does not have */
            tap_ok(0, "%s: %s", modes[k], ht_errmsg());
            continue;
        }
        ht_plan p;
        memset(&p, 0, sizeof p);
        both(modes[k], sets, m, &c, sm, 3, &p);
        /* by hand: 3 ranks; sync.servers defaults to 1, a group or gossip job has 1 coordinator */
        tap_ok(p.engine == HT_PLAN_ASYNC && p.model_batch == 12 && p.sync.world == 3 &&
                   p.sync.workers == 2 && p.sync.extra == 1,
               "%s: the asynchronous engine, 2 workers and 1 serving rank", modes[k]);
        ht_plan_free(&p);
    }
    /* by hand: 2 parameter servers on 5 ranks leave 3 workers; bsp has no serving rank */
    const char *two[] = {"train.batch=12", "sync.mode=\"asp\"", "sync.servers=2", NULL};
    const char *bsp[] = {"train.batch=12", NULL};
    ht_config c2, cb;
    ht_exit_on_error(load(&c2, two));
    ht_exit_on_error(load(&cb, bsp));
    const ht_plan_cluster w5 = {.world = 5};
    ht_plan p2, pb;
    int r2 = ht_plan_job(&c2, m, &w5, NULL, &p2), rbsp = ht_plan_job(&cb, m, &w5, NULL, &pb);
    tap_ok(r2 == HT_OK && rbsp == HT_OK && p2.sync.workers == 3 && p2.sync.extra == 2 &&
               pb.sync.workers == 5 && pb.sync.extra == 0,
           "the plan's sync layout: asp with 2 servers on 5 ranks 3 workers + 2, bsp 5 + 0");
    if (r2 == HT_OK) ht_plan_free(&p2);
    if (rbsp == HT_OK) ht_plan_free(&pb);
    const char *pa[] = {"train.batch=12", "sync.mode=\"asp\"", "pipe.schedule=\"1f1b\"",
                        "pipe.stages=3", "pipe.micro_batches=2", NULL};
    ht_config cfg;
    int rc = load(&cfg, pa);
    tap_ok(rc != HT_OK || ht_plan_engine_of(&cfg) == HT_PLAN_PIPE,
           "a pipeline under sync.mode asp is the pipeline engine's (which refuses it), "
           "never run as asynchronous");
    ht_sim_cluster_free(&c);
}

int main(void) {
    ht_model m;
    mlp(&m);
    ht_sim_model sm;
    ht_sim_model_from(&sm, &m, "sgd");
    pipelines(&m, &sm);
    data_parallel(&m, &sm);
    engines(&m, &sm);
    memory_same(&m, &sm);
    memory_by_hand(&m, &sm);
    ht_sim_model_free(&sm);
    ht_model_free(&m);
    return tap_done();
}
