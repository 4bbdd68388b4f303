/* The command line of hetsim (and of `hettrain plan`): predicts a hettrain job's step on a
 * described cluster (src/sim) without running it: data parallel (cluster.* keys) or a
 * pipeline (pipe.* keys), with --scale over rank counts and --plan to pick the configuration.
 * Exit 0, 2 on bad input (file:line), 1 on runtime failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "core/err.h"
#include "data/data.h"
#include "nn/model.h"
#include "pipe/transform.h"
#include "plan/job.h"
#include "sim/calib.h"
#include "sim/sim.h"
#include "build/build.h"
#include "cli/hetsim.h"
#include "cli/opts.h"

static const char *g_name = "hetsim"; /* "hettrain plan" there */

static void usage(FILE *f, int plan_only) {
    if (plan_only) {
        fprintf(f,
                "usage: hettrain plan (--cluster FILE | --profile FILE) -c JOB.cfg\n"
                "                     [--set KEY=VALUE]... [--ranks N] [--top K] [-o PLAN.cfg]\n"
                "\n"
                "Picks the job's configuration: simulates every data-parallel split and pipeline\n"
                "(schedule, stages, micro-batches, partition, recomputation) that fits device\n"
                "memory on the cluster, prints the best K (default 5) and why the others lost,\n"
                "and with -o writes the job with the winner's settings, ready for hettrain -c.\n"
                "The same as hetsim --plan (hetsim --help).\n"
                "  --cluster FILE   cluster description (conf/README.md, section hetsim)\n"
                "  --profile FILE   or a profile from mpirun hetprof: rank r on device r, hosts\n"
                "                   by the devices' host names, the slowest measured links\n"
                "  -c FILE          the job (model, train.batch, optim; its cluster.* and pipe.*\n"
                "                   keys are what the plan replaces)\n"
                "  --set KEY=VALUE  override a job key\n"
                "  --ranks N        plan for the first N ranks (default: all)\n"
                "  --top K          print the best K (default 5)\n"
                "  -o FILE          write the job with the winner's settings\n");
        return;
    }
    fprintf(f,
            "usage: hetsim (--cluster FILE | --profile FILE) -c JOB.cfg [--set KEY=VALUE]...\n"
            "              [--ranks N] [--steps N] [--drift X] [--trace FILE] [--scale]\n"
            "              [--plan [-o PLAN.cfg] [--top K]]\n"
            "\n"
            "Simulates one training step of the job on the cluster description (conf/README.md,\n"
            "section hetsim) and prints the predicted step time, throughput, per-rank busy /\n"
            "communication / idle split, peak memory and bytes moved.\n"
            "  --cluster FILE   cluster description (devices, hosts, links)\n"
            "  --profile FILE   or a profile from mpirun hetprof: rank r on device r, hosts by\n"
            "                   the devices' host names, links the slowest measured within a\n"
            "                   host and between hosts\n"
            "  -c FILE          the job (model, train.batch, cluster.*, pipe.*)\n"
            "  --set KEY=VALUE  override a job key\n"
            "  --ranks N        use the cluster's first N ranks (default: all)\n"
            "  --steps N        data parallel with split \"speed\" and cluster.rebalance: run the\n"
            "                   rebalancer over N simulated steps, report the last (default 1)\n"
            "  --drift X        sync.mode \"gossip-adaptive\": the model's relative change per\n"
            "                   local step (||w' - w|| / ||w||), which its trigger reads; without\n"
            "                   it only the rule's sync.max_period fires\n"
            "  --trace FILE     Chrome trace of the simulated step (ui.perfetto.dev)\n"
            "  --scale          the job at 1, 2, 4, ... ranks up to N: throughput, efficiency,\n"
            "                   and the simulator's own time\n"
            "  --plan           try every configuration (data parallel, pipelines), print the\n"
            "                   best K (--top, default 5) and why the others lost\n"
            "  -o FILE          with --plan: write the job with the winner's settings\n");
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* The job's model, description only (features and classes from the data keys). */
static void build_model(const ht_config *cfg, ht_model *m) {
    int features = cfg->data.features, classes = cfg->data.classes;
    if (!strcmp(cfg->data.kind, "idx")) {
        ht_dataset ds;
        ht_exit_on_error(ht_idx_load(&ds, cfg->data.images, cfg->data.labels));
        features = ds.features, classes = ds.classes;
        ht_dataset_free(&ds);
    }
    /* A description (no device): the simulator takes every size per sample, so one sample
     * sizes it. At train.batch a large job's global batch would trip the per-tensor limit
     * that a rank's batch, a micro-batch of it, never reaches. */
    ht_exit_on_error(ht_build_desc(m, cfg, features, classes, 1));
    /* zero-bubble: the GPT block's gradients kept from B to W count in its slots */
    if (ht_pipe_kind_split(cfg->pipe.schedule)) ht_model_keep_bw_layout(m);
}

typedef struct job {
    const ht_config *cfg;
    const ht_sim_cluster *c;
    const ht_model *m;
    const ht_sim_model *sm;
    int steps;
    double drift; /* gossip-adaptive: relative model change per local step, -1: not given */
    char *stages; /* [256] a pipeline's replicated stages as text ("" none), or NULL */
} job;

/* "0+1 (6+6): layers 0-4 | 2+3 (4+8): layers 5-8" */
static void groups_text(const ht_pipe_groups *g, const int *bounds, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    for (int q = 0; q < g->Q && k + 48 < n; q++) {
        k += (size_t)snprintf(out + k, n - k, "%s", q ? " | " : "");
        for (int p = g->first[q]; p < g->first[q + 1] && k + 24 < n; p++)
            k += (size_t)snprintf(out + k, n - k, "%s%d", p > g->first[q] ? "+" : "", p);
        for (int p = g->first[q]; p < g->first[q + 1] && k + 24 < n; p++)
            k += (size_t)snprintf(out + k, n - k, "%s%d", p > g->first[q] ? "+" : " (", g->cnt[p]);
        k += (size_t)snprintf(out + k, n - k, "): layers %d-%d", bounds[q], bounds[q + 1] - 1);
    }
}

/* An asynchronous policy over the budget train.steps x train.batch (src/sim/policies.c). */
static int simulate_sync(const job *j, int n, ht_sim_result *r, int *W_out) {
    const ht_config *cfg = j->cfg;
    const ht_sync_row *row = ht_sync_row_of(cfg->sync.mode);
    ht_sim_sync p = {.mode = cfg->sync.mode, .B = cfg->train.batch, .steps = cfg->train.steps,
                     .servers = cfg->sync.servers, .staleness = cfg->sync.staleness,
                     .group = cfg->sync.group, .deadline_s = cfg->sync.deadline_ms * 1e-3,
                     .global_every = cfg->sync.global_every, .period = cfg->sync.period};
    p.similar = cfg->sync.similar;
    p.interval = cfg->sync.interval;
    p.max_ahead = cfg->sync.max_ahead;
    p.workers = n - ht_sync_extra_ranks(cfg->sync.mode, cfg->sync.servers);
    if (row->flags & HT_SYNC_F_ADAPTIVE) { /* its rule, ht_gossip_due */
        p.adaptive = 1, p.threshold = cfg->sync.threshold, p.max_period = cfg->sync.max_period;
        p.drift = j->drift > 0 ? j->drift : 0;
        if (j->drift < 0)
            fprintf(stderr, "%s: %s without --drift: its trigger sees no model change, so only "
                            "sync.max_period = %d fires\n",
                    g_name, row->name, p.max_period);
    }
    if (p.steps < 1)
        return ht_error(HT_EINPUT, "%s: an asynchronous policy is simulated over train.steps "
                        "(set it, --set train.steps=N)", cfg->source);
    *W_out = p.workers;
    return ht_sim_run_sync(j->c, j->sm, &p, r);
}

/* pipe.stage_ranks against the micro-batch (the world rule of config/crosskey.c over the
 * simulated ranks; its sum and boundaries were checked when the config loaded). */
static int check_stage_ranks(const ht_config *cfg, int mb) {
    for (int q = 0; q < cfg->pipe.nstage_ranks; q++)
        if (cfg->pipe.stage_ranks[q] > mb)
            return ht_error(HT_EINPUT, "%s: pipe.stage_ranks: a stage on %d ranks cannot split "
                            "micro-batches of %d samples", cfg->source, cfg->pipe.stage_ranks[q], mb);
    return HT_OK;
}

/* The description is per sample; what hettrain would refuse to build is refused too. */
static int refused(void) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ht_errmsg());
    return ht_error(HT_EINPUT, "hettrain would refuse this job: %s", msg);
}

/* One simulated step of the job on n ranks; shares (room for n) gets the split. */
static int simulate(const job *j, int n, const char *trace, ht_sim_result *r, int *shares,
                    int *W_out) {
    const ht_config *cfg = j->cfg;
    int alg = cfg->cluster.allreduce != HT_ALLRED_MPI ? HT_SIM_RING : HT_SIM_MPI;
    const ht_plan_engine e = ht_plan_engine_of(cfg); /* the trainer's choice */
    if (e == HT_PLAN_ASYNC) return simulate_sync(j, n, r, W_out);
    if (e == HT_PLAN_DP) {
        /* hettrain builds a data-parallel rank's model at the global batch */
        if (ht_model_check_batch(j->m, cfg->train.batch) != HT_OK) return refused();
        if (cfg->cluster.nshares && cfg->cluster.nshares != n)
            return ht_error(HT_EINPUT, "%s: cluster.shares has %d values for %d ranks", cfg->source,
                            cfg->cluster.nshares, n);
        ht_sim_dp p = {.B = cfg->train.batch, .shares = cfg->cluster.nshares ? cfg->cluster.shares : NULL,
                       .speed = cfg->cluster.split == HT_SPLIT_SPEED, .alg = alg,
                       .overlap = cfg->cluster.overlap, .bucket_first_mb = cfg->cluster.bucket_first_mb,
                       .bucket_cap_mb = cfg->cluster.bucket_cap_mb,
                       .steps = cfg->cluster.rebalance ? j->steps : 1,
                       .exclude = cfg->cluster.exclude_slow, .shard = cfg->cluster.shard};
        /* each rank's memory and slice, as the trainer allocates and cuts them */
        size_t *cut = ht_xmalloc((size_t)(n + 1) * sizeof *cut);
        double *bytes = ht_xmalloc((size_t)n * sizeof *bytes);
        ht_sim_dp_memory(j->c, cfg, j->m, j->sm, n, cut, bytes);
        p.cut = cut, p.rank_bytes = bytes;
        *W_out = n;
        int rc = ht_sim_run_dp(j->c, n, j->m, j->sm, &p, trace != NULL, trace, r, shares);
        free(cut), free(bytes);
        return rc;
    }
    int D = cfg->pipe.stages, N = cfg->pipe.micro_batches;
    if (n % D)
        return ht_error(HT_EINPUT, "%s: pipe.stages = %d does not divide the %d ranks", cfg->source, D, n);
    int W = n / D;
    *W_out = W;
    if (cfg->train.batch % (W * N))
        return ht_error(HT_EINPUT, "%s: train.batch = %d is not a multiple of replicas x "
                        "micro-batches = %d x %d", cfg->source, cfg->train.batch, W, N);
    int mb = cfg->train.batch / (W * N);
    if (ht_model_check_batch(j->m, mb) != HT_OK) return refused(); /* built at a micro-batch */
    int rc = HT_OK;
    /* the schedule against replicated stages and the hetero partition: config time's */
    if (cfg->pipe.nstage_ranks && (rc = check_stage_ranks(cfg, mb)) != HT_OK) return rc;
    /* the "hetero" cut and hepipe's order come from each layer's time on each rank's
     * device, which the trainer measures at start-up: here the cost model's, through the
     * very same plan (plan/job.h) */
    ht_plan plan;
    rc = ht_sim_job_plan(j->c, j->sm, j->m, cfg, n, &plan);
    if (rc != HT_OK) return rc;
    const int no_flush = ht_pipe_kind_has(plan.pp.kind, HT_PIPE_F_NO_FLUSH);
    ht_pipe_sched s;
    /* 2bw: the period stream the executor chains without a flush (the steady state) */
    if ((rc = ht_plan_schedule(cfg, &plan.pp, &s)) != HT_OK) {
        ht_plan_free(&plan);
        return rc;
    }
    const int *bounds = plan.bounds;
    const ht_pipe_groups g = plan.grp;
    int any = 0; /* the plan's memory decision, as the pipeline engine executes it */
    for (int q = 0; q < plan.mem.Q; q++)
        any |= plan.mem.any[q];
    if (any) ht_pipe_add_recompute(&s, plan.mem.any);
    /* each rank's memory: what the trainer allocates (the executor's model, sim/calib.h) */
    double *bytes = ht_xcalloc((size_t)plan.pp.D, sizeof *bytes);
    ht_sim_plan_bytes(cfg, j->m, j->sm, &plan, &s, n, bytes);
    ht_sim_pipe p = {.s = &s, .W = W, .mb = mb, .bounds = bounds, .alg = alg,
                     .chain = no_flush ? 4 : 0, .P = D,
                     .first = ht_pipe_groups_replicated(&g) ? g.first : NULL, .off = g.off,
                     .cnt = g.cnt, .rank_bytes = bytes};
    if (j->stages) {
        j->stages[0] = 0;
        if (p.first) groups_text(&g, bounds, j->stages, 256);
    }
    if (rc == HT_OK) rc = ht_sim_run_pipe(j->c, j->sm, &p, trace != NULL, trace, r);
    free(bytes);
    ht_pipe_sched_free(&s);
    ht_plan_free(&plan);
    return rc;
}

static void print_result(const job *j, int n, const ht_sim_result *r, const int *shares, int W) {
    const ht_config *cfg = j->cfg;
    int pipe = cfg->pipe.schedule != HT_PIPE_NONE;
    if (!pipe && !(ht_sync_rows[cfg->sync.mode].flags & HT_SYNC_F_LOCKSTEP)) {
        printf("mode         sync %s, %d workers, budget %d steps of batch %d\n",
               ht_sync_mode_name(cfg->sync.mode), W,
               cfg->train.steps, cfg->train.batch);
        printf("time         %.6g s for the budget\n", r->makespan);
        printf("throughput   %.6g samples/s\n", r->throughput);
        printf("split        busy %.1f%%  communication %.1f%%  idle %.1f%% (mean over workers)\n",
               100 * r->busy / r->makespan, 100 * r->comm / r->makespan, 100 * r->idle / r->makespan);
        return;
    }
    if (pipe)
        printf("mode         pipeline %s, D=%d x %d replicas, %d micro-batches of %d%s\n",
               ht_pipe_kind_name(cfg->pipe.schedule), cfg->pipe.stages, W,
               cfg->pipe.micro_batches, cfg->train.batch / (W * cfg->pipe.micro_batches),
               !ht_pipe_kind_has(cfg->pipe.schedule, HT_PIPE_F_NO_FLUSH) ? ""
                                                  : "; no flush: per batch in the steady state "
                                                    "(4 and 8 batches chained; a trace shows the 8)");
    else
        printf("mode         data parallel (bsp), %d ranks, split %s, %s all-reduce, overlap %s\n", n,
               cfg->cluster.nshares ? "given" : ht_split_names[cfg->cluster.split],
               ht_allreduce_names[cfg->cluster.allreduce],
               cfg->cluster.overlap ? "on" : "off");
    if (j->stages && j->stages[0]) printf("stages       %s\n", j->stages);
    printf("step time    %.6g ms\n", r->makespan * 1e3);
    printf("throughput   %.6g samples/s\n", r->throughput);
    printf("split        busy %.1f%%  communication %.1f%%  optimizer %.1f%%  idle %.1f%% (mean over ranks)\n",
           100 * r->busy / r->makespan, 100 * r->comm / r->makespan, 100 * r->opt / r->makespan,
           100 * r->idle / r->makespan);
    printf("bytes moved  %.6g MB per step\n", r->bytes / 1e6);
    printf("peak memory  %.6g MB (largest rank)\n", r->peak_mem / 1e6);
    for (int i = 0; i < n; i++) { /* the planner's rule: 90% of a device is usable */
        double cap = j->c->types[j->c->rank_type[i]].mem_gb * 1e9 * 0.9;
        if (cap > 0 && r->rank[i].peak_mem > cap) {
            printf("warning      rank %d needs %.4g GB, its device has %.4g GB usable: the job "
                   "would not fit\n", i, r->rank[i].peak_mem / 1e9, cap / 1e9);
            break;
        }
    }
    if (n > 64) return;
    printf("%5s %-16s %6s %10s %10s %10s %10s %10s %10s\n", "rank", "device", pipe ? "" : "share",
           "busy ms", "comm ms", "opt ms", "idle ms", "peak MB", "sent MB");
    for (int i = 0; i < n; i++) {
        const ht_sim_rank *k = &r->rank[i];
        char sh[16] = "";
        if (!pipe) snprintf(sh, sizeof sh, "%d", shares[i]);
        printf("%5d %-16.16s %6s %10.4f %10.4f %10.4f %10.4f %10.3f %10.3f\n", i,
               j->c->types[j->c->rank_type[i]].name, sh, k->busy * 1e3, k->comm * 1e3, k->opt * 1e3,
               k->idle * 1e3, k->peak_mem / 1e6, k->bytes_sent / 1e6);
    }
}

static int do_scale(const job *j, int nmax) {
    printf("%7s %14s %16s %12s %12s %10s\n", "ranks", "step ms", "samples/s", "speedup", "efficiency",
           "sim s");
    double base = 0;
    for (int n = 1; n <= nmax; n *= 2) {
        int *sh = ht_xcalloc((size_t)n, sizeof *sh), W;
        ht_sim_result r;
        double t0 = now_s();
        int rc = simulate(j, n, NULL, &r, sh, &W);
        double dt = now_s() - t0;
        free(sh);
        if (rc != HT_OK) {
            printf("%7d  (%s)\n", n, ht_errmsg());
            continue;
        }
        if (base == 0) base = r.throughput / n;
        printf("%7d %14.6g %16.6g %12.3f %11.1f%% %10.3f\n", n, r.makespan * 1e3, r.throughput,
               r.throughput / base, 100 * r.throughput / (base * n), dt);
        ht_sim_result_free(&r);
        if (n < nmax && 2 * n > nmax) n = nmax / 2; /* end at nmax */
    }
    return HT_OK;
}

/* A host's name for the launch line: the profile's (hetprof records each device's), else a
 * placeholder numbered as the cluster description's hosts. */
static void host_name(const ht_sim_cluster *c, int r, char *buf, size_t n) {
    if (c->prof && r < c->prof->ndev && c->prof->dev[r].host[0])
        snprintf(buf, n, "%s", c->prof->dev[r].host);
    else
        snprintf(buf, n, "host%d", c->rank_host[r]);
}

/* How to launch the plan, as comment lines: mpirun with each host's slot count in rank order
 * (by slot, so that a host's ranks stay together, as the plan assumes), and the rank -> host
 * -> device mapping it was simulated on. */
static void launch_comment(FILE *f, const ht_sim_cluster *c, int n, const char *path) {
    char hosts[1024] = "", h[64];
    size_t at = 0;
    int fits = 1;
    for (int r = 0, cnt = 0; r < n; r++) {
        cnt++;
        if (r + 1 < n && c->rank_host[r + 1] == c->rank_host[r]) continue;
        host_name(c, r, h, sizeof h);
        if (at + strlen(h) + 16 < sizeof hosts)
            at += (size_t)snprintf(hosts + at, sizeof hosts - at, "%s%s:%d", at ? "," : "", h, cnt);
        else
            fits = 0;
        cnt = 0;
    }
    if (!fits) /* too many hosts for one line: a host file in the same order */
        snprintf(hosts, sizeof hosts, "HOSTFILE");
    int named = c->prof && c->prof->ndev > 0 && c->prof->dev[0].host[0];
    fprintf(f, "#\n# Run it (%d ranks%s):\n#   mpirun -np %d --%s %s --map-by slot hettrain -c %s\n",
            n, named ? "" : "; hostN: your hosts' names, in the cluster description's order", n,
            fits ? "host" : "hostfile", hosts, path);
    if (!fits)
        fprintf(f, "# (HOSTFILE: a line \"NAME slots=K\" per host, in the order of the ranks "
                   "below)\n");
    fprintf(f, "# The ranks it assumes (rank -> host, local rank -> device):\n");
    for (int r = 0, local = 0; r < n && r < 256; r++) {
        host_name(c, r, h, sizeof h);
        local = r && c->rank_host[r] == c->rank_host[r - 1] ? local + 1 : 0;
        fprintf(f, "#   rank %d -> %s, local rank %d -> %s\n", r, h, local,
                c->prof && r < c->prof->ndev ? c->prof->dev[r].name : c->types[c->rank_type[r]].name);
    }
    if (n > 256) fprintf(f, "#   ... %d ranks in all\n", n);
    fprintf(f, "#\n");
}

/* The job with the winner's settings (what differs from the defaults): hettrain -c runs it. */
static int write_plan(const job *j, const ht_sim_cand *k, const char *path) {
    ht_config c;
    ht_sim_cand_config(j->cfg, k, &c);
    if (k->kind >= 0 && !k->rep && k->by_speed && k->D * k->v - 1 > HT_MAX_LAYERS)
        fprintf(stderr, "%s: %d stage boundaries do not fit pipe.boundaries (%d): the "
                        "plan says \"balanced\" instead of the cut by speed\n",
                g_name, k->D * k->v - 1, HT_MAX_LAYERS);
    FILE *f = fopen(path, "w");
    if (!f) return ht_error(HT_ERUNTIME, "cannot create %s: %s", path, strerror(errno));
    char name[128];
    const int n = k->kind < 0 ? k->W : k->D * k->W;
    fprintf(f, "# %s: %s, predicted %.6g samples/s for %s on %s (%d ranks)\n", g_name,
            ht_sim_cand_name(k, name, sizeof name), k->throughput, j->cfg->source, j->c->source, n);
    launch_comment(f, j->c, n, path);
    fprintf(f, "# Below: the keys that differ from their defaults (hettrain --help-config lists "
               "every key).\n");
    int rc = ht_config_write_changes(f, &c);
    if (fclose(f) != 0 && rc == HT_OK) rc = ht_error(HT_ERUNTIME, "cannot write %s", path);
    return rc;
}

/* What the winner's ranks will allocate in the trainer (plan/exec_mem.h), beside
 * device.memory_mb when the job sets it. */
static void plan_memory_note(const job *j, const ht_sim_cand *k) {
    const double lim = j->cfg->device.memory_mb * 1e6;
    char limit[96] = "";
    if (lim > 0) snprintf(limit, sizeof limit, " (device.memory_mb: %.2f MB)", lim / 1e6);
    if (k->kind < 0 && k->local)
        printf("memory: every rank holds the whole model's parameters and its slice of the %s "
               "(cluster.shard = \"%s\"); the largest, rank %d, allocates %.2f MB%s\n",
               k->shard == HT_SHARD_GRADIENTS ? "gradients and optimizer state" : "optimizer state",
               ht_shard_names[k->shard], k->need_rank, k->need_mem / 1e6, limit);
    else if (k->kind < 0)
        printf("memory: every rank holds the whole model: %.2f MB%s\n", k->need_mem / 1e6, limit);
    else
        printf("memory: %s; the largest, pipeline rank %d, allocates %.2f MB%s, the GEMM "
               "packing workspace included\n",
               k->local ? "each pipeline rank holds only its stage"
                        : "every pipeline rank holds the whole model's parameters, gradients "
                          "and optimizer state",
               k->need_rank, k->need_mem / 1e6, limit);
}

/* The configurations past --top in one line: how many, how much slower, and why those that
 * could not run did not (their reasons up to the first ':', counted). */
static void summarise_rest(const ht_sim_cand *v, int k, int all) {
    int slower = 0, nwhy = 0, count[4] = {0};
    double lo = 0, hi = 0;
    char why[4][64];
    for (int i = 0; i < k; i++) {
        if (v[i].ok) {
            double p = v[i].why[0] ? atof(v[i].why) : 0; /* "14.0% slower than the best: ..." */
            lo = slower && lo < p ? lo : p;
            hi = slower && hi > p ? hi : p;
            slower++;
            continue;
        }
        char w[64];
        snprintf(w, sizeof w, "%.*s", (int)strcspn(v[i].why, ":"), v[i].why);
        int q = 0;
        while (q < nwhy && strcmp(why[q], w)) q++;
        if (q == nwhy && nwhy < 4) memcpy(why[nwhy++], w, sizeof w);
        count[q < 4 ? q : 3]++;
    }
    printf("  ... %d more (--top %d lists every one):", k, all);
    if (slower) printf(" %d from %.1f%% to %.1f%% slower%s", slower, lo, hi, nwhy ? ";" : "");
    for (int q = 0; q < nwhy; q++)
        printf(" %d %s%s", count[q], why[q], q + 1 < nwhy ? ";" : "");
    printf("\n");
}

static int do_plan(const job *j, int n, int top, const char *out) {
    int alg = j->cfg->cluster.allreduce != HT_ALLRED_MPI ? HT_SIM_RING : HT_SIM_MPI;
    ht_sim_cand *v;
    int nv;
    double t0 = now_s();
    const ht_config *cfg = j->cfg;
    ht_sim_dp dp = {.B = cfg->train.batch, .alg = alg, .overlap = cfg->cluster.overlap,
                    .bucket_first_mb = cfg->cluster.bucket_first_mb,
                    .bucket_cap_mb = cfg->cluster.bucket_cap_mb,
                    .exclude = cfg->cluster.exclude_slow};
    int rc = ht_sim_plan_job(j->c, n, j->m, j->sm, cfg, &dp, &v, &nv);
    printf("%s: %d configurations of %d ranks simulated in %.2f s\n", g_name, nv, n,
           now_s() - t0);
    char name[128];
    printf("%4s %-40s %14s %10s %12s\n", "#", "configuration", "samples/s", "step ms", "peak MB");
    for (int i = 0; i < nv && i < top; i++)
        if (v[i].ok)
            printf("%4d %-40s %14.6g %10.4g %12.4g\n", i + 1, ht_sim_cand_name(&v[i], name, sizeof name),
                   v[i].throughput, v[i].step * 1e3, v[i].peak_mem / 1e6);
    if (nv > 1) printf("why the others lost:\n");
    for (int i = 1; i < nv && i < top; i++)
        printf("  %-40s %s\n", ht_sim_cand_name(&v[i], name, sizeof name), v[i].why);
    if (nv > top && top >= 1) summarise_rest(v + top, nv - top, nv);
    char left[1024];
    if (ht_sim_plan_left_out(j->m, n, j->cfg->train.batch, left, sizeof left)) printf("%s", left);
    if (rc == HT_OK) plan_memory_note(j, &v[0]);
    if (rc == HT_OK && out) {
        rc = write_plan(j, &v[0], out);
        if (rc == HT_OK) printf("wrote %s (%s)\n", out, ht_sim_cand_name(&v[0], name, sizeof name));
    }
    free(v);
    return rc;
}

/* What a profile from an older hetprof leaves out, said once. */
static void profile_notes(const ht_sim_cluster *c) {
    int nomem = 0;
    for (int d = 0; d < c->prof->ndev; d++)
        nomem += c->prof->dev[d].mem_mb <= 0;
    if (nomem)
        fprintf(stderr, "%s: note: %d device(s) of %s have no mem_mb (a profile from before "
                "hetprof recorded it): their memory is taken as unlimited\n",
                g_name, nomem, c->source);
    if (c->prof->ndev > 1 && !c->prof->dev[0].host[0])
        fprintf(stderr, "%s: note: %s records no host names: every device is taken as on one "
                "host\n", g_name, c->source);
}

int ht_sim_cli(int argc, char **argv, int plan_only) {
    g_name = plan_only ? "hettrain plan" : "hetsim";
    ht_args_sim a;
    ht_args_sim_init(&a);
    int bad = 0, unknown = 0;
    if (ht_opts_parse(plan_only ? ht_opts_plan : ht_opts_sim, argc, argv, &a, &bad, &unknown) !=
        HT_OK) {
        if (!unknown) ht_exit_on_error(HT_EINPUT);
        usage(stderr, plan_only);
        const char *o = argv[bad];
        int sim_only = !strcmp(o, "--steps") || !strcmp(o, "--drift") || !strcmp(o, "--trace") ||
                       !strcmp(o, "--scale");
        if (plan_only && sim_only)
            ht_die(HT_EINPUT, "%s: hettrain plan only plans (hetsim simulates one configuration)",
                   o);
        ht_die(HT_EINPUT, "unknown option '%s'", o);
    }
    if (a.help) {
        usage(stdout, plan_only);
        return 0;
    }
    const char *cluster = a.cluster, *profile = a.profile, *cfg_path = a.config, *trace = a.trace,
               *out = a.out;
    int ranks = (int)a.ranks, scale = a.scale, plan = plan_only || a.plan;
    int top = a.top ? (int)a.top : 5, steps = a.steps ? (int)a.steps : 1;
    double drift = a.drift;
    if (!!cluster + !!profile != 1 || !cfg_path) {
        usage(stderr, plan_only);
        ht_die(HT_EINPUT, "%s, and -c JOB.cfg, are required",
               cluster && profile ? "one of --cluster FILE and --profile FILE, not both,"
                                  : "--cluster FILE or --profile FILE");
    }
    if (profile) cluster = profile; /* the name the messages give */
    if (out && !plan) ht_die(HT_EINPUT, "-o needs --plan");
    ht_config cfg;
    ht_exit_on_error(ht_config_load(&cfg, cfg_path, a.sets, a.nset));
    ht_sim_cluster c;
    ht_exit_on_error(profile ? ht_sim_cluster_from_profile(profile, &c)
                             : ht_sim_cluster_load(cluster, &c));
    if (profile) profile_notes(&c);
    if (ranks > c.nranks)
        ht_die(HT_EINPUT, "--ranks %d: %s describes %d ranks", ranks, cluster, c.nranks);
    int n = ranks ? ranks : c.nranks;
    for (int i = 0; i < cfg.cluster.nslowdown && i < n; i++)
        if (cfg.cluster.slowdown[i] > 0) c.slowdown[i] *= cfg.cluster.slowdown[i];
    ht_model m;
    build_model(&cfg, &m);
    ht_sim_model sm;
    ht_sim_model_from(&sm, &m, cfg.optim.type);
    if (c.prof && c.prof->model[0] && strcmp(c.prof->model, m.desc))
        fprintf(stderr,
                "%s: warning: the cluster's profile was measured for model '%s', this job "
                "trains '%s': layer times are taken by layer name, so they may not fit (profile "
                "this job's model: hetprof -c JOB)\n",
                g_name, c.prof->model, m.desc);
    char stages[256] = "";
    job j = {&cfg, &c, &m, &sm, steps, drift, stages};
    printf("%s: %s on %s: %d ranks on %d hosts, model %s (%zu parameters), batch %d\n",
           g_name, cfg_path, cluster, n, c.rank_host[n - 1] + 1, m.desc, m.nparams,
           cfg.train.batch);
    int rc;
    if (plan) rc = do_plan(&j, n, top, out);
    else if (scale) rc = do_scale(&j, n);
    else {
        int *sh = ht_xcalloc((size_t)n, sizeof *sh), W = 1;
        ht_sim_result r;
        double t0 = now_s();
        rc = simulate(&j, n, trace, &r, sh, &W);
        if (rc == HT_OK) {
            print_result(&j, n, &r, sh, W);
            printf("simulated    %lld events in %.3f s%s%s\n", (long long)r.events, now_s() - t0,
                   trace ? ", trace " : "", trace ? trace : "");
            ht_sim_result_free(&r);
        }
        free(sh);
    }
    ht_sim_model_free(&sm);
    ht_model_free(&m);
    ht_sim_cluster_free(&c);
    fflush(stdout);
    ht_exit_on_error(rc);
    return 0;
}
