/* hetsim (src/sim): hand-computed cases. One rank: the step is the sum of its layer times
 * (interpolated from a hand-made profile) plus the optimizer; two equal ranks data parallel
 * over a known link: compute plus the ring's 2 (n-1) steps in closed form; a pipeline with
 * unit costs: GPipe's (N + D - 1)(1 + b) and 1F1B's same makespan, the hand-written
 * streams' memory; a slowdown of 2 on one rank; the same run twice gives the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "nn/model.h"
#include "pipe/sched_2bw.h"
#include "pipe/schedule.h"
#include "pipe/transform.h"
#include "sim/sim.h"
#include "sync/bsp.h"
#include "tap.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (fabs(b) + 1e-9))

/* An MLP 8 -> 8 x (L-1) -> 8: layers fc1, relu1, ..., fcL. */
static void mlp(ht_model *m, int L) {
    int hidden[16];
    for (int i = 0; i < L - 1; i++)
        hidden[i] = 8;
    ht_exit_on_error(ht_model_mlp(m, NULL, 8, hidden, L - 1, 8, "relu", 64));
}

/* mlp(m, L) and its simulator model with SGD. */
static void mlp_sim(ht_model *m, ht_sim_model *sm, int L) {
    mlp(m, L);
    ht_sim_model_from(sm, m, "sgd");
}

static void free_all(ht_sim_cluster *c, ht_sim_model *sm, ht_model *m) {
    ht_sim_cluster_free(c);
    ht_sim_model_free(sm);
    ht_model_free(m);
}

/* A profile with one device: fc<k> takes fwd[k-1] ms at batch 32 and twice that at 64
 * (backward: bwd_ratio times forward), the relus 0.5 ms at both. */
static ht_profile *profile(int L, const double *fwd, double bwd_ratio) {
    ht_profile *p = ht_xcalloc(1, sizeof *p);
    p->ndev = 1;
    ht_prof_dev *d = &p->dev[0];
    d->mem_bw_gbs = 1e6; /* optimizer time ~ 0 */
    for (int b = 32; b <= 64; b *= 2)
        for (int k = 1; k <= L; k++) {
            ht_prof_layer *l = &d->layers[d->nlayers++];
            snprintf(l->name, sizeof l->name, "fc%d", k);
            l->batch = b;
            l->fwd_ms = fwd[k - 1] * b / 32;
            l->bwd_ms = bwd_ratio * l->fwd_ms;
            if (k < L) {
                l = &d->layers[d->nlayers++];
                snprintf(l->name, sizeof l->name, "relu%d", k);
                l->batch = b;
                l->fwd_ms = l->bwd_ms = 0.5;
            }
        }
    return p;
}

static void cluster(ht_sim_cluster *c, ht_profile *p, int n, double lat, double bw) {
    ht_sim_devtype t = {.prof_dev = p ? 0 : -1, .scale = 1};
    ht_sim_link l = {lat, bw, 0};
    ht_sim_cluster_uniform(c, &t, n, 1, l, l);
    c->prof = p;
}

/* mlp_sim(m, sm, L) on n ranks of profile(L, fwd, 2) joined by links of lat, bw; the
 * profile (c->prof) stays the caller's to change. */
static void setup(ht_model *m, ht_sim_model *sm, ht_sim_cluster *c, int L, const double *fwd,
                  int n, double lat, double bw) {
    mlp_sim(m, sm, L);
    cluster(c, profile(L, fwd, 2), n, lat, bw);
}

/* n equal ranks of a 2-layer MLP (fc1, fc2 1 ms forward at 32) joined by links of lat, bw */
static void two_layers(ht_model *m, ht_sim_model *sm, ht_sim_cluster *c, int n, double lat,
                       double bw) {
    const double fwd[2] = {1, 1};
    setup(m, sm, c, 2, fwd, n, lat, bw);
}

/* One rank's data-parallel step at batch B: ring, overlapped buckets of 1 then 25 MB. */
static int run_one(const ht_sim_cluster *c, const ht_model *m, const ht_sim_model *sm, int B,
                   ht_sim_result *r) {
    ht_sim_dp d = {.B = B, .alg = HT_SIM_RING, .overlap = 1, .bucket_first_mb = 1, .bucket_cap_mb = 25};
    return ht_sim_run_dp(c, 1, m, sm, &d, 0, NULL, r, NULL);
}

/* Free relus in a profile: pipeline stages of unit times. */
static void free_relus(ht_profile *p) {
    for (int i = 0; i < p->dev[0].nlayers; i++)
        if (!strncmp(p->dev[0].layers[i].name, "relu", 4))
            p->dev[0].layers[i].fwd_ms = p->dev[0].layers[i].bwd_ms = 0;
}

static void one_rank(void) {
    const double fwd[3] = {1, 2, 3};
    ht_model m;
    ht_sim_model sm;
    ht_sim_cluster c;
    setup(&m, &sm, &c, 3, fwd, 1, 0, 1);
    ht_sim_result r;
    int rc = run_one(&c, &m, &sm, 48, &r);
    /* batch 48 is halfway between 32 and 64: fc times 1.5x, relus 0.5 ms; fwd + 2 fwd */
    double want = 3 * 1.5e-3 * (1 + 2 + 3) + 2 * 2 * 0.5e-3;
    double opt = 4.0 * (double)m.nparams * 5 / 1e15; /* 20 bytes per parameter at 1e6 GB/s */
    tap_ok(rc == HT_OK && NEAR(r.makespan, want + opt), "one rank: step %.9f s = sum of layers %.9f",
           r.makespan, want + opt);
    tap_ok(rc == HT_OK && NEAR(r.rank[0].busy, want) && r.rank[0].comm == 0 && r.bytes == 0,
           "one rank: all compute, nothing moved");
    ht_sim_result_free(&r);
    free_all(&c, &sm, &m);
}

/* The loss as a profiled layer (HT_PROF_LOSS): 0.4 ms at batch 32, 0.8 at 64, so 0.6 ms at 48,
 * run once per step after the last layer's forward: one_rank's step plus 0.6 ms; an entry
 * that exists at 32 only scales in proportion (48 / 32 x 0.4 = 0.6 ms, the same). */
static void loss_layer(void) {
    const double fwd[3] = {1, 2, 3};
    ht_model m;
    ht_sim_model sm;
    mlp_sim(&m, &sm, 3);
    for (int only32 = 0; only32 < 2; only32++) {
        ht_sim_cluster c;
        ht_profile *p = profile(3, fwd, 2);
        for (int b = 32; b <= (only32 ? 32 : 64); b *= 2) {
            ht_prof_layer *l = &p->dev[0].layers[p->dev[0].nlayers++];
            snprintf(l->name, sizeof l->name, "%s", HT_PROF_LOSS);
            l->batch = b, l->fwd_ms = 0.4 * b / 32, l->bwd_ms = 0;
        }
        cluster(&c, p, 1, 0, 1);
        ht_sim_result r;
        int rc = run_one(&c, &m, &sm, 48, &r);
        double want = 3 * 1.5e-3 * (1 + 2 + 3) + 2 * 2 * 0.5e-3 + 0.6e-3;
        tap_ok(rc == HT_OK && NEAR(r.rank[0].busy, want),
               "the profiled loss (%s): busy %.9f s = one_rank's + 0.6 ms = %.9f",
               only32 ? "batch 32 only" : "batches 32 and 64", r.rank[0].busy, want);
        ht_sim_result_free(&r);
        ht_sim_cluster_free(&c);
    }
    ht_sim_model_free(&sm);
    ht_model_free(&m);
}

/* With whole-step rates in the profile, the layers are scaled to the step measured back to
 * back: sum of the layers at 32 is 3 * (1 + 2 + 3) + 4 * 0.5 = 20 ms, the step 24 ms (1.2x);
 * at 64, 38 ms and a step of 38 ms (1x). Batch 48: 1.1 x (27 + 2) ms; batch 16: the nearest
 * ratio, 1.2 x (9 + 1) ms (the relus' 0.5 ms in proportion, 0.25 ms). */
static void in_step(void) {
    const double fwd[3] = {1, 2, 3};
    ht_model m;
    ht_sim_model sm;
    ht_sim_cluster c;
    setup(&m, &sm, &c, 3, fwd, 1, 0, 1);
    ht_prof_dev *d = &c.prof->dev[0];
    d->rates[0] = (ht_prof_rate){64, 64 / 38e-3};
    d->rates[1] = (ht_prof_rate){32, 32 / 24e-3};
    d->nrates = 2;
    const int B[3] = {48, 16, 128};
    const double want[3] = {1.1 * 29e-3, 1.2 * 10e-3, 1.0 * 76e-3};
    for (int i = 0; i < 3; i++) {
        ht_sim_result r;
        int rc = run_one(&c, &m, &sm, B[i], &r);
        tap_ok(rc == HT_OK && NEAR(r.rank[0].busy, want[i]),
               "in-step ratio: batch %d busy %.9f s, want %.9f", B[i], r.rank[0].busy, want[i]);
        ht_sim_result_free(&r);
    }
    free_all(&c, &sm, &m);
}

/* The emulated slowdown stretches the batch upload as the trainer's does (its compute_s
 * counts it): one rank, slowdown 3, B = 48 of 8 features at 1 GB/s host-to-device: 3 x
 * (48 x 32 bytes / 1e9 + the layers as in one_rank), the optimizer 3x too. */
static void slow_upload(void) {
    const double fwd[3] = {1, 2, 3};
    ht_model m;
    ht_sim_model sm;
    ht_sim_cluster c;
    setup(&m, &sm, &c, 3, fwd, 1, 0, 1);
    c.prof->dev[0].h2d_gbs = 1;
    c.slowdown[0] = 3;
    ht_sim_result r;
    int rc = run_one(&c, &m, &sm, 48, &r);
    double layers = 3 * 1.5e-3 * (1 + 2 + 3) + 2 * 2 * 0.5e-3, load = 48 * 32 / 1e9;
    double opt = 4.0 * (double)m.nparams * 5 / 1e15;
    double want = 3 * (load + layers + opt);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "slowdown 3: step %.9f s = 3 x (upload + layers + optimizer) %.9f",
           r.makespan, want);
    ht_sim_result_free(&r);
    free_all(&c, &sm, &m);
}

/* Two equal ranks, B = 64 split 32 / 32, one all-reduce of every gradient after backward
 * (no overlap): 2 (n - 1) = 2 ring steps of half the gradient each. */
static void two_ranks(double slow1) {
    ht_model m;
    ht_sim_model sm;
    ht_sim_cluster c;
    const double lat = 1e-3, bw = 1e6; /* 1 ms, 1 MB/s */
    two_layers(&m, &sm, &c, 2, lat, bw);
    c.slowdown[1] = slow1;
    ht_sim_dp p = {.B = 64, .alg = HT_SIM_RING, .overlap = 0};
    ht_sim_result r;
    int sh[2];
    int rc = ht_sim_run_dp(&c, 2, &m, &sm, &p, 0, NULL, &r, sh);
    double comp = 3 * 1e-3 * 2 + 2 * 0.5e-3; /* fc1, fc2 fwd + bwd at 32; relu1 fwd + bwd */
    double bytes = 4.0 * (double)m.nparams;
    double ring = 2 * (lat + bytes / 2 / bw);
    double opt = bytes / 4 * 20 / 1e15;
    double want = slow1 * comp + ring + slow1 * opt;
    tap_ok(rc == HT_OK && sh[0] == 32 && sh[1] == 32 && NEAR(r.makespan, want),
           "two ranks, slowdown %g on rank 1: step %.9f s = %g compute + %.9f ring", slow1,
           r.makespan, slow1 * comp, ring);
    tap_ok(rc == HT_OK && NEAR(r.bytes, 2 * bytes), "two ranks: each sends 2 (n-1)/n of the gradient");
    if (slow1 > 1)
        tap_ok(rc == HT_OK && NEAR(r.rank[0].idle, (slow1 - 1) * comp + (slow1 - 1) * opt),
               "rank 0 idles while rank 1 computes (%.6f s)", r.rank[0].idle);
    ht_sim_result_free(&r);
    /* speed split: rank 1 at half speed gets about a third */
    p.speed = 1;
    rc = ht_sim_run_dp(&c, 2, &m, &sm, &p, 0, NULL, &r, sh);
    if (slow1 > 1)
        tap_ok(rc == HT_OK && sh[1] < 32 && sh[0] + sh[1] == 64, "speed split: %d / %d", sh[0], sh[1]);
    /* 1000x slower: its one sample would cost more than it saves (as the trainer decides,
     * ht_plan_batch_split_exclude): left out, it computes nothing and joins the ring */
    if (slow1 >= 1000)
        tap_ok(rc == HT_OK && sh[0] == 64 && sh[1] == 0 &&
                   NEAR(r.rank[1].busy, 0.0) && r.makespan < 2 * comp + ring + slow1 * opt,
               "speed split, slowdown %g: rank 1 left out (64 / %d), step %.6f s", slow1, sh[1],
               r.makespan);
    ht_sim_result_free(&r);
    free_all(&c, &sm, &m);
}

/* A measured ring step (hetprof's ring_gbs) replaces transfer plus additions; the slowest
 * link of the ring bounds it, and one link without the figure sends every step back to
 * bandwidth plus additions. 4 MB over 4 ranks: 6 steps of a 1 MB chunk. */
static void measured_ring(void) {
    ht_sim_link meas = {1e-5, 1e9, 5e8}, raw = {1e-5, 1e9, 0};
    double want = 6 * (1e-5 + 1e6 / 5e8), from_bw = 6 * (1e-5 + 1e6 / 1e9) + 3 * 3 * 1e6 / 1e9;
    double got = ht_sim_coll_cost(HT_SIM_RING, 4, 4e6, meas, 1e9);
    tap_ok(NEAR(got, want), "measured ring step: %.9f s = 6 (lat + chunk / ring) %.9f", got, want);
    got = ht_sim_coll_cost(HT_SIM_RING, 4, 4e6, raw, 1e9);
    tap_ok(NEAR(got, from_bw), "without it: %.9f s = 6 (lat + chunk / bw) + 3 x 3 chunk / add %.9f",
           got, from_bw);
    /* MPI's algorithms are not ours: the measured step does not apply. Recursive doubling,
     * 2 (lat + 4 MB / bw) + 2 x 3 x 4 MB / add = 0.03202 s, loses to the ring on bw. */
    got = ht_sim_coll_cost(HT_SIM_MPI, 4, 4e6, meas, 1e9);
    tap_ok(NEAR(got, from_bw), "mpi: the smaller of a ring on bw and recursive doubling, %.9f s", got);
    ht_sim_devtype t = {.prof_dev = -1, .scale = 1, .gflops = 1, .mem_bw_gbs = 1};
    ht_sim_cluster c;
    ht_sim_cluster_uniform(&c, &t, 4, 2, (ht_sim_link){1e-6, 1e10, 4e9}, meas);
    c.host_add_gbs = 1;
    const int all[4] = {0, 1, 2, 3}, host0[2] = {0, 1};
    got = ht_sim_ring_cost(&c, HT_SIM_RING, all, 4, 4e6);
    tap_ok(NEAR(got, want), "over two hosts the inter-host step bounds the ring: %.9f s", got);
    got = ht_sim_ring_cost(&c, HT_SIM_RING, host0, 2, 4e6);
    tap_ok(NEAR(got, 2 * (1e-6 + 2e6 / 4e9)), "within a host, the intra-host step: %.9f s", got);
    c.inter = raw;
    got = ht_sim_ring_cost(&c, HT_SIM_RING, all, 4, 4e6);
    tap_ok(NEAR(got, from_bw), "an inter-host link without it: bandwidth and additions, %.9f s", got);
    ht_sim_cluster_free(&c);
}

/* A cluster from a profile: 4 devices on hosts a, a, b, b with every pair linked. Intra is
 * the slowest of the two same-host links, inter the slowest of the four cross-host ones; a
 * link without a ring step makes that side's ring step 0 (from bandwidth). */
static void from_profile(void) {
    const double fwd[2] = {1, 1};
    ht_profile *p = profile(2, fwd, 2);
    p->ndev = 4;
    for (int d = 0; d < 4; d++) {
        ht_prof_dev *x = &p->dev[d];
        if (d) *x = p->dev[0];
        snprintf(x->name, sizeof x->name, "dev%d", d);
        strcpy(x->platform, "p"), strcpy(x->driver, "1"), strcpy(x->type, d ? "gpu" : "cpu");
        strcpy(x->host, d < 2 ? "a" : "b");
        x->h2d_gbs = x->d2h_gbs = 10, x->launch_us = 5, x->mem_mb = 1000 * (d + 1);
    }
    /* (a, b, latency us, bandwidth GB/s, ring GB/s) */
    const double L[6][5] = {{0, 1, 1, 10, 6}, {2, 3, 2, 12, 7},  {0, 2, 30, 1.0, 0.6},
                            {0, 3, 25, 1.2, 0}, {1, 2, 20, 1.1, 0.7}, {1, 3, 20, 1.3, 0.8}};
    for (int i = 0; i < 6; i++)
        p->links[i] = (ht_prof_link){(int)L[i][0], (int)L[i][1], L[i][2], L[i][3], L[i][4]};
    p->nlinks = 6;
    char dir[] = "/tmp/t_sim.XXXXXX", path[64];
    int rc = mkdtemp(dir) ? HT_OK : HT_ERUNTIME;
    snprintf(path, sizeof path, "%s/p.cfg", dir);
    if (rc == HT_OK) rc = ht_profile_save(path, p);
    ht_sim_cluster c;
    if (rc == HT_OK) rc = ht_sim_cluster_from_profile(path, &c);
    if (!tap_ok(rc == HT_OK, "a cluster from a 4-device profile")) {
        tap_diag("%s", ht_errmsg());
        unlink(path);
        rmdir(dir);
        free(p);
        return;
    }
    tap_ok(c.nranks == 4 && c.nhosts == 2 && c.rank_host[1] == 0 && c.rank_host[2] == 1 &&
               c.rank_host[3] == 1 && c.rank_type[3] == 3 && c.types[3].prof_dev == 3,
           "rank r on device r, hosts by name: %d ranks, %d hosts", c.nranks, c.nhosts);
    tap_ok(NEAR(c.intra.latency_s, 2e-6) && NEAR(c.intra.bw_Bps, 10e9) && NEAR(c.intra.ring_Bps, 6e9),
           "intra: the slowest same-host link (2 us, 10 GB/s, ring 6 GB/s)");
    tap_ok(NEAR(c.inter.latency_s, 30e-6) && NEAR(c.inter.bw_Bps, 1e9) && c.inter.ring_Bps == 0,
           "inter: the slowest cross-host link (30 us, 1 GB/s), ring 0: one link has none");
    tap_ok(NEAR(c.types[1].mem_gb, 2000 * 1048576 / 1e9) && c.types[0].cores == 1 &&
               c.types[1].cores == 0 && NEAR(c.host_add_gbs, 1e6),
           "memory from mem_mb, cores = 1 for the CPU device, additions at its bandwidth");
    ht_sim_cluster_free(&c);
    /* hosts a, b, a: not numbered together; and 2 devices without links */
    strcpy(p->dev[2].host, "a"), strcpy(p->dev[1].host, "b"), strcpy(p->dev[3].host, "c");
    rc = ht_profile_save(path, p) == HT_OK ? ht_sim_cluster_from_profile(path, &c) : HT_ERUNTIME;
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "devices 0 and 2 are on host 'a' but device 1"),
           "a host's devices not numbered together: %s", ht_errmsg());
    /* hosts named for some devices only */
    p->dev[3].host[0] = 0;
    rc = ht_profile_save(path, p) == HT_OK ? ht_sim_cluster_from_profile(path, &c) : HT_ERUNTIME;
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "device 0 has a host name and device 3 none"),
           "host names for some devices only: %s", ht_errmsg());
    /* no host names (a profile from before them): one host, every link intra-host */
    for (int d = 0; d < 4; d++)
        p->dev[d].host[0] = 0;
    rc = ht_profile_save(path, p) == HT_OK ? ht_sim_cluster_from_profile(path, &c) : HT_ERUNTIME;
    tap_ok(rc == HT_OK && c.nhosts == 1 && c.rank_host[3] == 0 && NEAR(c.intra.latency_s, 30e-6) &&
               NEAR(c.inter.bw_Bps, 1e9),
           "no host names: one host, the slowest of all links within it");
    if (rc == HT_OK) ht_sim_cluster_free(&c);
    p->nlinks = 0, p->ndev = 2;
    rc = ht_profile_save(path, p) == HT_OK ? ht_sim_cluster_from_profile(path, &c) : HT_ERUNTIME;
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "2 devices but no links"),
           "several devices without links: %s", ht_errmsg());
    /* one device: no link is used; a send would find an infinitely fast one, not 0 bytes/s */
    p->ndev = 1;
    rc = ht_profile_save(path, p) == HT_OK ? ht_sim_cluster_from_profile(path, &c) : HT_ERUNTIME;
    tap_ok(rc == HT_OK && c.nranks == 1 && isinf(c.intra.bw_Bps) && isinf(c.inter.bw_Bps),
           "one device: one rank, links that cost nothing");
    if (rc == HT_OK) ht_sim_cluster_free(&c);
    unlink(path);
    rmdir(dir);
    free(p);
}

/* ---------------------------------------------------------------- pipelines by hand */

static void add(ht_pipe_sched *s, int d, int op, int stage, int mb, int peer, int buf) {
    s->ins[d][s->len[d]++] = (ht_pipe_instr){.op = (uint8_t)op, .stage = stage, .mb = mb,
                                             .peer = peer, .buf = buf};
}

/* GPipe (all forwards, then all backwards) or 1F1B (D - d - 1 warm-up forwards, then one
 * forward one backward) on D ranks, N micro-batches, written here independently of src/pipe. */
static void hand_sched(ht_pipe_sched *s, int D, int N, int one_f_one_b) {
    memset(s, 0, sizeof *s);
    s->p = (ht_pipe_params){.kind = one_f_one_b ? HT_PIPE_1F1B : HT_PIPE_GPIPE, .D = D, .N = N, .v = 1};
    s->S = D;
    s->ndir = 1;
    s->len = ht_xcalloc((size_t)D, sizeof *s->len);
    s->nbuf = ht_xcalloc((size_t)D, sizeof *s->nbuf);
    s->ins = ht_xcalloc((size_t)D, sizeof *s->ins);
    for (int d = 0; d < D; d++) {
        s->ins[d] = ht_xcalloc((size_t)(8 * N + 4), sizeof **s->ins);
        s->nbuf[d] = N;
        /* the order of forwards (1) and backwards (0): gpipe N then N; 1f1b warm-up
         * forwards, then forward-backward pairs, then the remaining backwards */
        int warm = one_f_one_b ? (D - d - 1 < N ? D - d - 1 : N) : N, f = 0, b = 0;
        for (int k = 0; k < 2 * N; k++) {
            int fwd = f < N && (k < warm || (k - warm) % 2 == 0);
            if (!one_f_one_b) fwd = k < N;
            if (fwd) {
                if (d == 0) add(s, d, HT_PI_LOAD, d, f, -1, f);
                else add(s, d, HT_PI_RECV_ACT, d, f, d - 1, f);
                add(s, d, HT_PI_FWD, d, f, -1, f);
                if (d < D - 1) add(s, d, HT_PI_SEND_ACT, d, f, d + 1, f);
                f++;
            } else {
                if (d < D - 1) add(s, d, HT_PI_RECV_GRAD, d, b, d + 1, b);
                add(s, d, HT_PI_BWD, d, b, -1, b);
                if (d > 0) add(s, d, HT_PI_SEND_GRAD, d, b, d - 1, b);
                b++;
            }
        }
        add(s, d, HT_PI_REDUCE_GRADS, -1, -1, -1, -1);
        add(s, d, HT_PI_OPT_STEP, -1, -1, -1, -1);
    }
}

static void free_sched(ht_pipe_sched *s) {
    for (int d = 0; d < s->p.D; d++)
        free(s->ins[d]);
    free(s->ins);
    free(s->len);
    free(s->nbuf);
}

/* A tied head (src/pipe/tied.h) on pipelines()'s 1F1B of 4 stages: a 256-byte wte (of fc1's
 * 288 parameter bytes) also held by the last stage's rank 3. Before the optimizer step ranks
 * 0 and 3 read wte's gradients to the host and write the sum back at 1 kB/s each way (free
 * link): + 0.512 s on the makespan; the ring moves 2 x 256 bytes; rank 3 holds 256 more bytes
 * of weights, gradients and momentum (sgd): + 768 at its peak; rank 0 nothing more. */
static void tied_head(const ht_sim_cluster *c, ht_sim_model *sm, ht_profile *p,
                      const int *bounds, int D, int N) {
    ht_pipe_sched s;
    hand_sched(&s, D, N, 1);
    ht_sim_pipe pp = {.s = &s, .W = 1, .mb = 32, .bounds = bounds, .alg = HT_SIM_RING};
    double in = sm->in_bytes;
    sm->in_bytes = 0;
    p->dev[0].d2h_gbs = p->dev[0].h2d_gbs = 1e-6;
    ht_sim_result a, b;
    int rc = ht_sim_run_pipe(c, sm, &pp, 0, NULL, &a);
    sm->tied_bytes = 256;
    int rc2 = ht_sim_run_pipe(c, sm, &pp, 0, NULL, &b);
    tap_ok(rc == HT_OK && rc2 == HT_OK && fabs(b.makespan - a.makespan - 0.512) < 1e-6 &&
               NEAR(b.bytes - a.bytes, 512.0) &&
               NEAR(b.rank[3].peak_mem - a.rank[3].peak_mem, 768.0) &&
               NEAR(b.rank[0].peak_mem, a.rank[0].peak_mem),
           "tied head, 1f1b D=%d: makespan + %.6f s (0.512), ring bytes + %.0f (512), rank 3 "
           "peak + %.0f (768), rank 0 + %.0f (0)",
           D, b.makespan - a.makespan, b.bytes - a.bytes, b.rank[3].peak_mem - a.rank[3].peak_mem,
           b.rank[0].peak_mem - a.rank[0].peak_mem);
    ht_sim_result_free(&a);
    ht_sim_result_free(&b);
    sm->tied_bytes = 0, sm->in_bytes = in;
    p->dev[0].d2h_gbs = p->dev[0].h2d_gbs = 0;
    free_sched(&s);
}

static void pipelines(void) {
    const int D = 4, N = 6;
    double fwd[4] = {1000, 1000, 1000, 1000}; /* 1 s per stage forward at batch 32 */
    ht_model m;
    ht_sim_model sm;
    mlp_sim(&m, &sm, D);
    for (int i = 0; i < sm.nlayers; i++) /* relus free: unit stage times */
        sm.l[i].act_bytes = 1000, sm.l[i].out_bytes = sm.l[i].in_bytes = 0;
    ht_profile *p = profile(D, fwd, 2);
    free_relus(p);
    ht_sim_cluster c;
    cluster(&c, p, 2 * D, 0, 1e30);
    int bounds[5] = {0, 2, 4, 6, 7}; /* fc1 relu1 | fc2 relu2 | fc3 relu3 | fc4 */
    for (int k = 0; k < 2; k++) {
        ht_pipe_sched s;
        hand_sched(&s, D, N, k);
        ht_sim_pipe pp = {.s = &s, .W = 1, .mb = 32, .bounds = bounds, .alg = HT_SIM_RING};
        ht_sim_result r;
        int rc = ht_sim_run_pipe(&c, &sm, &pp, 0, NULL, &r);
        double want = (N + D - 1) * 3.0; /* (N + D - 1)(f + b), b = 2 f: both schedules */
        tap_ok(rc == HT_OK && fabs(r.makespan - want) < 1e-6, "%s D=%d N=%d unit costs: %.6f = %g",
               k ? "1f1b" : "gpipe", D, N, r.makespan, want);
        /* rank 0 holds N slots (gpipe) or D (1f1b) of 2 layers' kept bytes at 32 + input */
        double slot = 32 * (1000 * 2 + 4.0 * 8), base = 3 * 4.0 * (8 * 8 + 8);
        double mem = base + (k ? D : N) * slot;
        tap_ok(rc == HT_OK && NEAR(r.rank[0].peak_mem, mem), "%s: rank 0 peak memory %.0f = %.0f",
               k ? "1f1b" : "gpipe", r.rank[0].peak_mem, mem);
        ht_sim_result_free(&r);
        /* two replicas: REDUCE_GRADS sums each stage over two ranks on a free link */
        pp.W = 2;
        rc = ht_sim_run_pipe(&c, &sm, &pp, 0, NULL, &r);
        tap_ok(rc == HT_OK && fabs(r.makespan - want) < 1e-6 && r.samples == 2 * N * 32,
               "%s, 2 replicas: same makespan, twice the samples", k ? "1f1b" : "gpipe");
        ht_sim_result_free(&r);
        /* every stage on two ranks (pipe.replicate): 16 samples each, half the time; the
         * boundaries move in pieces rank to rank, each stage's gradients reduce over its
         * two ranks (free link) */
        int first[5] = {0, 2, 4, 6, 8}, off[8], cnt[8];
        for (int q = 0; q < 8; q++)
            off[q] = q % 2 * 16, cnt[q] = 16;
        ht_sim_pipe rp = pp;
        rp.W = 1, rp.P = 8, rp.first = first, rp.off = off, rp.cnt = cnt;
        rc = ht_sim_run_pipe(&c, &sm, &rp, 0, NULL, &r);
        tap_ok(rc == HT_OK && fabs(r.makespan - want / 2) < 1e-6 && r.nranks == 8 &&
                   r.samples == N * 32,
               "%s, every stage on 2 ranks of 16 samples: %.6f = %g", k ? "1f1b" : "gpipe",
               rc == HT_OK ? r.makespan : -1, want / 2);
        if (rc == HT_OK) ht_sim_result_free(&r);
        /* the groups must cover the pipeline ranks */
        first[4] = 7;
        rc = ht_sim_run_pipe(&c, &sm, &rp, 0, NULL, &r);
        tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "grouped"), "groups not covering the ranks: %s",
               ht_errmsg());
        /* the reduction staged through the host as the executor's reduce_stage: rank 0
         * (the last to finish) reads its stage's gradients (fc1: 72 floats, 288 bytes) to
         * the host and writes the sum back, at 1 kB/s each way: + 0.576 s (inputs free) */
        double in = sm.in_bytes;
        sm.in_bytes = 0;
        p->dev[0].d2h_gbs = p->dev[0].h2d_gbs = 1e-6;
        rc = ht_sim_run_pipe(&c, &sm, &pp, 0, NULL, &r);
        tap_ok(rc == HT_OK && fabs(r.makespan - (want + 0.576)) < 1e-6,
               "%s, 2 replicas, host staging of REDUCE_GRADS: %.6f = %g", k ? "1f1b" : "gpipe",
               rc == HT_OK ? r.makespan : -1, want + 0.576);
        if (rc == HT_OK) ht_sim_result_free(&r);
        p->dev[0].d2h_gbs = p->dev[0].h2d_gbs = 0;
        sm.in_bytes = in;
        if (k == 0) { /* recomputation (src/pipe/transform.h) on gpipe: the slots keep their
                       * stage input only, one slot at a time grows back for its backward; the
                       * makespan is the checker's, with a third more compute */
            uint8_t all[4] = {1, 1, 1, 1};
            ht_pipe_params gp = {.kind = HT_PIPE_GPIPE, .D = D, .N = N, .v = 1};
            ht_pipe_sched g;
            ht_exit_on_error(ht_pipe_generate(&gp, &g));
            ht_pipe_add_recompute(&g, all);
            ht_sim_pipe gq = {.s = &g, .W = 1, .mb = 32, .bounds = bounds, .alg = HT_SIM_RING};
            rc = ht_sim_run_pipe(&c, &sm, &gq, 0, NULL, &r);
            ht_pipe_report rep;
            int rc2 = ht_pipe_check(&g, 2, NULL, &rep);
            ht_pipe_sched_free(&g);
            double rmem = base + (N - 1) * 32 * 4.0 * 8 + slot;
            tap_ok(rc == HT_OK && rc2 == HT_OK && NEAR(r.rank[0].peak_mem, rmem) &&
                       fabs(r.makespan - rep.makespan) < 1e-6,
                   "gpipe + recompute: rank 0 peak %.0f = %.0f, makespan %.3f = checker %.3f",
                   r.rank[0].peak_mem, rmem, r.makespan, rep.makespan);
            ht_sim_result_free(&r);
        }
        free_sched(&s);
    }
    tied_head(&c, &sm, p, bounds, D, N);
    /* a stream that waits for a message nobody sends: deadlock, not a hang */
    ht_pipe_sched s;
    hand_sched(&s, D, N, 0);
    s.ins[1][0].mb = N + 5;
    ht_sim_pipe pp = {.s = &s, .W = 1, .mb = 32, .bounds = bounds};
    ht_sim_result r;
    int rc = ht_sim_run_pipe(&c, &sm, &pp, 0, NULL, &r);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "deadlock"), "deadlock reported: %s", ht_errmsg());
    ht_sim_result_free(&r);
    free_sched(&s);
    free_all(&c, &sm, &m);
}

/* Sync policies, timing only: asp with one worker and one server is compute + push + the
 * server's update + reply per step; gossip with two equal workers pushing every step (no
 * host copies or passes in this profile): nobody waits, and a worker pays one link time for
 * each model it takes (the receive copies it), after each step but its first (worker 0's
 * first push is taken by worker 1 after its first; the budget ends at the 5th compute of
 * each): steps x compute + (steps - 1) link times. */
static void sync_policies(void) {
    ht_model m;
    ht_sim_model sm;
    ht_sim_cluster c;
    const double lat = 1e-3, bw = 1e6;
    two_layers(&m, &sm, &c, 3, lat, bw);
    double P = 4.0 * (double)m.nparams;
    double comp = 3 * 1e-3 * 2 + 2 * 0.5e-3; /* batch 32, as two_ranks */
    double opt = P / 4 * 20 / 1e15;
    ht_sim_sync p = {.mode = HT_SYNC_ASP, .workers = 1, .servers = 1, .B = 32, .steps = 5};
    ht_sim_result r;
    int rc = ht_sim_run_sync(&c, &sm, &p, &r);
    double want = 5 * (comp + 2 * (lat + P / bw) + opt);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "asp, 1 worker + 1 server: %.9f s = %.9f", r.makespan, want);
    ht_sim_result_free(&r);
    p = (ht_sim_sync){.mode = HT_SYNC_GOSSIP, .workers = 2, .B = 64, .steps = 5, .period = 1};
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    want = 5 * (comp + opt) + 4 * (lat + P / bw);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "gossip, 2 workers, period 1: %.9f s = %.9f",
           r.makespan, want);
    ht_sim_result_free(&r);
    /* gossip-fixed, period 2: both workers meet after their 2nd and 4th steps and wait for
     * each other, both sends at once (one link time each exchange); the budget ends at the
     * 5th compute of each: 5 x compute + 2 link times */
    p = (ht_sim_sync){.mode = HT_SYNC_GOSSIP_FIXED, .workers = 2, .B = 64, .steps = 5, .period = 2};
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    want = 5 * (comp + opt) + 2 * (lat + P / bw);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "gossip-fixed, 2 workers, period 2: %.9f s = %.9f",
           r.makespan, want);
    ht_sim_result_free(&r);
    /* gossip-adaptive by its rule (ht_gossip_due): a drift of 0.004 per step crosses the
     * threshold 0.01 at the 3rd step since the last exchange (0.012), so 7 steps exchange
     * after steps 3 and 6, and each worker takes 2 models; no drift: only max_period = 4
     * fires, after step 4 */
    p = (ht_sim_sync){.mode = HT_SYNC_GOSSIP, .workers = 2, .B = 64, .steps = 7, .adaptive = 1,
                      .threshold = 0.01, .max_period = 20, .drift = 0.004};
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    want = 7 * (comp + opt) + 2 * (lat + P / bw);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "gossip-adaptive, drift 0.004, threshold 0.01: "
           "%.9f s = %.9f (2 exchanges)", r.makespan, want);
    ht_sim_result_free(&r);
    p.drift = 0, p.max_period = 4;
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    want = 7 * (comp + opt) + 1 * (lat + P / bw);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "gossip-adaptive, no drift, max_period 4: "
           "%.9f s = %.9f (1 exchange)", r.makespan, want);
    ht_sim_result_free(&r);
    p.drift = 0.02, p.max_period = 4; /* over the threshold every step */
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    want = 7 * (comp + opt) + 6 * (lat + P / bw);
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "gossip-adaptive, drift 0.02 > threshold: "
           "%.9f s = %.9f (6 exchanges)", r.makespan, want);
    ht_sim_result_free(&r);
    /* preduce with P = 2 of 2 equal workers: lockstep, one ring all-reduce of the model each step */
    p = (ht_sim_sync){.mode = HT_SYNC_PREDUCE, .workers = 2, .B = 64, .steps = 5, .group = 2};
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    want = 5 * (comp + opt + (lat + 64 / bw) + 2 * (lat + P / 2 / bw));
    tap_ok(rc == HT_OK && NEAR(r.makespan, want), "preduce, P = 2 of 2: %.9f s = %.9f (ready message + ring)",
           r.makespan, want);
    ht_sim_result_free(&r);
    ht_sim_cluster_free(&c);
    /* free links and server: ssp with staleness 0 holds the fast worker (compute c) for the
     * one 3x slower, 2 pushes per 3c: 12 pushes in 18c; asp lets it run: 4 pushes per 3c, 12 by
     * 9c (9 fast + 3 slow) */
    ht_sim_devtype t = {.prof_dev = -1, .scale = 1, .gflops = 1, .mem_bw_gbs = 1e12};
    ht_sim_cluster_uniform(&c, &t, 3, 3, (ht_sim_link){0, 1e30, 0}, (ht_sim_link){0, 1e30, 0});
    c.slowdown[1] = 3;
    double cc = ht_sim_range_time(&c, 0, &sm, 0, sm.nlayers, 32, 0) +
                ht_sim_range_time(&c, 0, &sm, 0, sm.nlayers, 32, 1);
    p = (ht_sim_sync){.mode = HT_SYNC_SSP, .workers = 2, .servers = 1, .B = 64, .steps = 6};
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    tap_ok(rc == HT_OK && fabs(r.makespan - 18 * cc) < 1e-9 * cc, "ssp, s = 0, slowdown 3: %.6g = 18 c (c = %.6g)",
           r.makespan, cc);
    ht_sim_result_free(&r);
    p.mode = HT_SYNC_ASP;
    rc = ht_sim_run_sync(&c, &sm, &p, &r);
    tap_ok(rc == HT_OK && fabs(r.makespan - 9 * cc) < 1e-9 * cc, "asp, same: %.6g = 9 c", r.makespan);
    ht_sim_result_free(&r);
    /* host passes priced: an SGD server scales each half-batch push (a pass); an AdamW one
     * scales its rate instead (src/sync/ps.c), so the same run is shorter */
    c.host_add_gbs = 1e-3;
    double ms[2];
    for (int a = 0; a < 2; a++) {
        sm.adamw = a;
        rc = ht_sim_run_sync(&c, &sm, &p, &r);
        ms[a] = rc == HT_OK ? r.makespan : -1;
        ht_sim_result_free(&r);
    }
    tap_ok(ms[1] > 0 && ms[0] > ms[1], "asp, AdamW server: no scaling pass (%.6g s < SGD's %.6g s)",
           ms[1], ms[0]);
    free_all(&c, &sm, &m);
}

/* The same data-parallel job twice: bit-identical results; with a trace, the file is a
 * trace-event JSON object. */
static void determinism(void) {
    ht_model m;
    mlp(&m, 3);
    ht_sim_model sm;
    ht_sim_model_from(&sm, &m, "adamw");
    ht_sim_devtype t = {.prof_dev = -1, .scale = 1, .gflops = 50, .mem_bw_gbs = 5, .launch_us = 7,
                        .h2d_gbs = 3, .d2h_gbs = 2};
    ht_sim_cluster c;
    ht_sim_cluster_uniform(&c, &t, 6, 2, (ht_sim_link){2e-6, 5e9, 0}, (ht_sim_link){3e-5, 1e8, 0});
    c.slowdown[4] = 3;
    ht_sim_dp p = {.B = 61, .speed = 1, .alg = HT_SIM_RING, .overlap = 1, .bucket_first_mb = 1e-4,
                   .bucket_cap_mb = 1e-3, .steps = 12};
    ht_sim_result a, b;
    int sa[6], sb[6];
    char path[] = "/tmp/t_sim_trace_XXXXXX";
    int fd = mkstemp(path);
    int rc = ht_sim_run_dp(&c, 6, &m, &sm, &p, 1, path, &a, sa);
    int rc2 = ht_sim_run_dp(&c, 6, &m, &sm, &p, 0, NULL, &b, sb);
    int same = rc == HT_OK && rc2 == HT_OK && !memcmp(sa, sb, sizeof sa) && a.makespan == b.makespan;
    for (int i = 0; same && i < 6; i++)
        same = !memcmp(&a.rank[i], &b.rank[i], sizeof a.rank[i]);
    tap_ok(same, "determinism: two runs give the same bits (step %.9g s, shares %d..%d)", a.makespan,
           sa[0], sa[5]);
    tap_ok(rc == HT_OK && sa[4] < sa[0], "the rank slowed 3x gets fewer samples (%d < %d)", sa[4], sa[0]);
    close(fd);
    FILE *f = fopen(path, "r");
    char head[64] = {0};
    size_t got = f ? fread(head, 1, sizeof head - 1, f) : 0;
    tap_ok(got > 0 && !strncmp(head, "{\"displayTimeUnit\"", 18), "trace written: %.30s", head);
    if (f) fclose(f);
    remove(path);
    ht_sim_result_free(&a);
    ht_sim_result_free(&b);
    free_all(&c, &sm, &m);
}

/* The planner on hand-made clusters: one device: data parallel (no pipeline); a model too
 * large for one device's memory: a pipeline; hosts joined by a very slow link: no stage
 * boundary across hosts. */
static void planner(void) {
    int hidden[7] = {1024, 1024, 1024, 1024, 1024, 1024, 1024};
    ht_model m;
    ht_exit_on_error(ht_model_mlp(&m, NULL, 1024, hidden, 7, 1024, "relu", 64));
    ht_sim_model sm;
    ht_sim_model_from(&sm, &m, "sgd");
    ht_sim_devtype t = {.prof_dev = -1, .scale = 1, .gflops = 1000, .mem_bw_gbs = 100, .launch_us = 5};
    ht_sim_link fast = {2e-6, 10e9, 0}, slow = {1e-3, 1e6, 0};
    ht_sim_cluster c;
    ht_sim_cand *v;
    int nv;
    ht_sim_cluster_uniform(&c, &t, 1, 1, fast, fast);
    int rc = ht_sim_plan(&c, 1, &m, &sm, 64, HT_SIM_RING, &v, &nv);
    tap_ok(rc == HT_OK && nv == 1 && v[0].kind < 0, "one device: data parallel, nothing else to try");
    free(v);
    ht_sim_cluster_free(&c);
    {
        /* 8 linear layers of 4 MiB each (+ SGD state: x3): 100 MB does not fit a 50 MB device,
         * a quarter of it does */
        t.mem_gb = 0.05;
        ht_sim_cluster_uniform(&c, &t, 4, 4, fast, fast);
        rc = ht_sim_plan(&c, 4, &m, &sm, 64, HT_SIM_RING, &v, &nv);
        char name[128];
        tap_ok(rc == HT_OK && v[0].kind >= 0, "too large for one device: %s",
               rc == HT_OK ? ht_sim_cand_name(&v[0], name, sizeof name) : ht_errmsg());
        int dp_lost = 0;
        for (int i = 0; i < nv; i++)
            if (v[i].kind < 0 && !v[i].ok) dp_lost = 1;
        tap_ok(dp_lost, "data parallel lost for memory");
        free(v);
        ht_sim_cluster_free(&c);
        /* one rank 3x slower: the 1f1b cut by device speed gives it fewer layers and beats the
         * balanced cut of the same configuration */
        t.mem_gb = 0;
        ht_sim_cluster_uniform(&c, &t, 4, 4, fast, fast);
        c.slowdown[2] = 3;
        rc = ht_sim_plan(&c, 4, &m, &sm, 256, HT_SIM_RING, &v, &nv);
        double bal = 0, spd = 0;
        int fewer = 0;
        for (int i = 0; i < nv; i++)
            if (v[i].ok && v[i].kind == HT_PIPE_1F1B && v[i].D == 4 && v[i].N == 8) {
                if (v[i].by_speed) {
                    spd = v[i].throughput;
                    fewer = v[i].bounds[3] - v[i].bounds[2] < v[i].bounds[2] - v[i].bounds[1];
                } else
                    bal = v[i].throughput;
            }
        tap_ok(rc == HT_OK && spd > 1.2 * bal && fewer,
               "slowdown 3 on rank 2: 1f1b cut by speed %.0f samples/s > balanced %.0f, rank 2 "
               "holds fewer layers", spd, bal);
        free(v);
        ht_sim_cluster_free(&c);
        /* 2 hosts of 2 over a 1 MB/s link; a narrow model at a large batch: 1 MiB of
         * activations per stage boundary and step against 16 KiB of gradients per layer, so
         * a stage boundary across the hosts costs more than reducing gradients over them */
        t.mem_gb = 0;
        ht_sim_cluster_uniform(&c, &t, 4, 2, fast, slow);
        ht_model m2;
        int narrow[7] = {64, 64, 64, 64, 64, 64, 64};
        ht_exit_on_error(ht_model_mlp(&m2, NULL, 64, narrow, 7, 64, "relu", 4096));
        ht_sim_model sm2;
        ht_sim_model_from(&sm2, &m2, "sgd");
        rc = ht_sim_plan(&c, 4, &m2, &sm2, 4096, HT_SIM_RING, &v, &nv);
        ht_sim_model_free(&sm2);
        ht_model_free(&m2);
        tap_ok(rc == HT_OK && v[0].D <= 2 && v[0].D * v[0].v <= 2,
               "slow links between hosts: %s (no stage across hosts)",
               rc == HT_OK ? ht_sim_cand_name(&v[0], name, sizeof name) : ht_errmsg());
        free(v);
        ht_sim_cluster_free(&c);
    }
    ht_sim_model_free(&sm);
    ht_model_free(&m);
}

/* Generated schedules (src/pipe) with unit costs: the simulated makespan equals the
 * checker's (ht_pipe_check), forward 1, backward 2, free communication. */
static void against_checker(void) {
    static const struct { int kind, D, N, v; } cases[] = {
        {HT_PIPE_GPIPE, 4, 8, 1},       {HT_PIPE_1F1B, 4, 8, 1},  {HT_PIPE_1F1B, 3, 2, 1},
        {HT_PIPE_INTERLEAVED, 2, 4, 2}, {HT_PIPE_INTERLEAVED, 4, 8, 2},
        {HT_PIPE_CHIMERA, 4, 4, 1},     {HT_PIPE_CHIMERA, 4, 8, 1}, {HT_PIPE_CHIMERA, 6, 6, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ht_pipe_params pp = {.kind = cases[k].kind, .D = cases[k].D, .N = cases[k].N, .v = cases[k].v};
        ht_pipe_sched s;
        if (ht_pipe_generate(&pp, &s) != HT_OK) {
            tap_ok(0, "generate %s: %s", ht_pipe_kind_names[pp.kind], ht_errmsg());
            continue;
        }
        int S = s.S;
        ht_model m;
        mlp(&m, S); /* fc1 relu1 ... fcS: stage s = fc(s+1) and its relu */
        ht_sim_model sm;
        ht_sim_model_from(&sm, &m, "sgd");
        double fwd[64];
        for (int i = 0; i < S; i++)
            fwd[i] = 1000; /* 1 s at batch 32 */
        ht_profile *p = profile(S, fwd, 2);
        free_relus(p);
        ht_sim_cluster c;
        cluster(&c, p, s.p.D, 0, 1e30);
        int bounds[65];
        for (int i = 0; i < S; i++)
            bounds[i] = 2 * i;
        bounds[S] = sm.nlayers;
        ht_pipe_report rep;
        int rc = ht_pipe_check(&s, 2, NULL, &rep);
        ht_sim_pipe sp = {.s = &s, .W = 1, .mb = 32, .bounds = bounds, .alg = HT_SIM_RING};
        ht_sim_result r;
        int rc2 = ht_sim_run_pipe(&c, &sm, &sp, 0, NULL, &r);
        tap_ok(rc == HT_OK && rc2 == HT_OK && fabs(r.makespan - rep.makespan) < 1e-6,
               "%s D=%d N=%d v=%d unit costs: simulated %.6f = checker %.6f",
               ht_pipe_kind_names[pp.kind], pp.D, pp.N, pp.v, rc2 == HT_OK ? r.makespan : -1,
               rc == HT_OK ? rep.makespan : -1);
        if (rc2 == HT_OK) ht_sim_result_free(&r);
        free_all(&c, &sm, &m);
        ht_pipe_sched_free(&s);
    }
}

/* Zero-bubble schedules (issue 27): the simulator costs B and W apart, W taking the share of
 * the stage's backward FLOPs that computes weight gradients. By hand, for this 8-wide MLP
 * per sample: fc's backward 2*64 (dW) + 8 (db) + 2*64 (dx) = 264, of it W 136; relu's 8
 * (all dx); the last fc adds the loss gradient's 2*8 = 16 (dx). A stage of backward 2 s:
 * W = 2 * 136/272 = 1 s (the last stage 2 * 136/280), B the rest. Simulated makespan =
 * the checker's under those F, B, W (ht_pipe_check_fbw), free communication. */
static void zero_bubble(void) {
    static const struct { int kind, D, N; } cases[] = {
        {HT_PIPE_ZBH1, 4, 8}, {HT_PIPE_ZBH1, 3, 3}, {HT_PIPE_ZBV, 2, 4}, {HT_PIPE_ZBV, 4, 8},
        {HT_PIPE_ZBHET, 4, 8},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ht_pipe_params pp = {.kind = cases[k].kind, .D = cases[k].D, .N = cases[k].N, .v = 1};
        ht_pipe_sched s;
        if (ht_pipe_generate(&pp, &s) != HT_OK) {
            tap_ok(0, "generate %s: %s", ht_pipe_kind_names[pp.kind], ht_errmsg());
            continue;
        }
        int S = s.S;
        ht_model m;
        ht_sim_model sm;
        mlp_sim(&m, &sm, S);
        double fwd[64], tf[64], tb[64], tw[64];
        for (int i = 0; i < S; i++) {
            fwd[i] = 1000, tf[i] = 1;
            tw[i] = 2.0 * 136 / (i == S - 1 ? 280 : 272), tb[i] = 2 - tw[i];
        }
        ht_profile *p = profile(S, fwd, 2);
        free_relus(p);
        ht_sim_cluster c;
        cluster(&c, p, s.p.D, 0, 1e30);
        int bounds[65];
        for (int i = 0; i < S; i++)
            bounds[i] = 2 * i;
        bounds[S] = sm.nlayers;
        ht_pipe_report rep;
        int rc = ht_pipe_check_fbw(&s, tf, tb, tw, &rep);
        ht_sim_pipe sp = {.s = &s, .W = 1, .mb = 32, .bounds = bounds, .alg = HT_SIM_RING};
        ht_sim_result r;
        int rc2 = ht_sim_run_pipe(&c, &sm, &sp, 0, NULL, &r);
        tap_ok(rc == HT_OK && rc2 == HT_OK && fabs(r.makespan - rep.makespan) < 1e-6,
               "%s D=%d N=%d, B and W apart: simulated %.6f = checker %.6f",
               ht_pipe_kind_names[pp.kind], pp.D, pp.N, rc2 == HT_OK ? r.makespan : -1,
               rc == HT_OK ? rep.makespan : -1);
        if (rc2 == HT_OK) ht_sim_result_free(&r);
        free_all(&c, &sm, &m);
        ht_pipe_sched_free(&s);
    }
}

/* PipeDream-2BW without a flush (src/pipe/sched_2bw.h, chained as the executor does): with
 * unit stage costs (forward 1 s, backward 2 s, free links and optimizer) the period stream
 * keeps every rank busy, so a batch takes N (1 + 2) in the steady state where 1F1B's flushed
 * batch takes (N + D - 1)(1 + 2); with one stage twice as slow, that stage's N (2 + 4). The
 * weight copy of each period: 2 x the model's bytes at the memory bandwidth. */
static void twobw(void) {
    const int D = 4, N = 8;
    for (int slow = 0; slow < 2; slow++) {
        double fwd[4] = {1000, slow ? 2000 : 1000, 1000, 1000};
        ht_model m;
        ht_sim_model sm;
        mlp_sim(&m, &sm, D);
        ht_profile *p = profile(D, fwd, 2);
        free_relus(p);
        ht_sim_cluster c;
        cluster(&c, p, D, 0, 1e30);
        int bounds[5] = {0, 2, 4, 6, 7};
        ht_pipe_params pp = {.kind = HT_PIPE_2BW, .D = D, .N = N, .v = 1};
        ht_pipe_sched s;
        ht_exit_on_error(ht_pipe_2bw_steady(&pp, &s));
        ht_sim_pipe sp = {.s = &s, .W = 1, .mb = 32, .bounds = bounds, .alg = HT_SIM_RING, .chain = 4};
        ht_sim_result r;
        int rc = ht_sim_run_pipe(&c, &sm, &sp, 0, NULL, &r);
        double want = N * (slow ? 6.0 : 3.0), opt = 2 * sm.param_bytes / 1e15;
        double stage_params = sm.l[0].param_bytes; /* rank 0: fc1 (relu1 has none) */
        opt += stage_params / 4 * 20 / 1e15;
        tap_ok(rc == HT_OK && fabs(r.makespan - want) < 1e-6 && r.samples == N * 32,
               "2bw D=%d N=%d%s, steady state: %.6f s per batch = %g", D, N,
               slow ? ", stage 1 twice as slow" : "", rc == HT_OK ? r.makespan : -1, want);
        if (!slow)
            tap_ok(rc == HT_OK && NEAR(r.rank[0].opt, opt), "2bw: rank 0's optimizer + weight copy "
                   "%.6g s per batch = %.6g", rc == HT_OK ? r.rank[0].opt : -1, opt);
        if (rc == HT_OK) ht_sim_result_free(&r);
        ht_pipe_sched_free(&s);
        free_all(&c, &sm, &m);
    }
}

/* Overlapped buckets (cluster.overlap): on a device that leaves the host cores free (cores
 * = 0) a bucket's all-reduce runs while the next bucket's backward computes; on a CPU device
 * (cores > 0) the rank's own core moves the data, so each all-reduce holds the rank: forward
 * + sum over buckets of (backward + ring) + optimizer. Two equal ranks, free host copies,
 * buckets as the trainer cuts them (ht_reduce_plan: 200 bytes first: fc2, then the rest). */
static void cpu_overlap(void) {
    ht_model m;
    ht_sim_model sm;
    ht_sim_cluster c;
    const double lat = 1e-3, bw = 1e6;
    two_layers(&m, &sm, &c, 2, lat, bw);
    ht_bucket bk[4];
    int nb = ht_reduce_plan(&m, 200, 1 << 20, bk, 4);
    /* layer times at 32: fc fwd 1 ms, bwd 2 ms; relu1 0.5 ms each way */
    double tf = 1e-3 + 0.5e-3 + 1e-3, tb[4] = {0}, ring[4] = {0};
    for (int k = 0; k < nb && k < 4; k++) {
        for (int i = bk[k].lo; i < bk[k].hi; i++)
            tb[k] += strncmp(m.layers[i].name, "relu", 4) ? 2e-3 : 0.5e-3;
        ring[k] = 2 * (lat + 4.0 * (double)bk[k].n / 2 / bw);
    }
    double opt = 4.0 * (double)m.nparams / 4 * 20 / 1e15;
    double serial = tf + opt, end = tf + tb[0], net = 0;
    for (int k = 0; k < nb; k++) {
        serial += tb[k] + ring[k];
        if (k) end += tb[k];
        /* overlapped: bucket k's ring starts when its backward is done and the last ring ended */
        double st = (k ? end : tf + tb[0]) > net ? (k ? end : tf + tb[0]) : net;
        net = st + ring[k];
    }
    double overlapped = net + opt;
    ht_sim_dp p = {.B = 64, .alg = HT_SIM_RING, .overlap = 1, .bucket_first_mb = 200.0 / (1 << 20),
                   .bucket_cap_mb = 1};
    ht_sim_result r;
    int rc = ht_sim_run_dp(&c, 2, &m, &sm, &p, 0, NULL, &r, NULL);
    tap_ok(nb == 2 && rc == HT_OK && NEAR(r.makespan, overlapped),
           "overlap, cores = 0: %d buckets, step %.9f s = %.9f (rings behind backward)", nb,
           rc == HT_OK ? r.makespan : -1, overlapped);
    if (rc == HT_OK) ht_sim_result_free(&r);
    c.types[0].cores = 1;
    rc = ht_sim_run_dp(&c, 2, &m, &sm, &p, 0, NULL, &r, NULL);
    tap_ok(rc == HT_OK && NEAR(r.makespan, serial) && serial > overlapped + 1e-4,
           "overlap on a CPU device (cores = 1): step %.9f s = %.9f (each ring holds the rank)",
           rc == HT_OK ? r.makespan : -1, serial);
    if (rc == HT_OK) ht_sim_result_free(&r);
    free_all(&c, &sm, &m);
}

int main(void) {
    against_checker();
    zero_bubble();
    planner();
    sync_policies();
    determinism();
    one_rank();
    loss_layer();
    in_step();
    slow_upload();
    two_ranks(1);
    two_ranks(2);
    two_ranks(1000);
    measured_ring();
    from_profile();
    pipelines();
    twobw();
    cpu_overlap();
    return tap_done();
}
