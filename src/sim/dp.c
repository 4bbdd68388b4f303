/* Data-parallel (bsp) executor: the trainer's step as simulator ops. The batch is split as
 * the trainer splits it (src/plan: equal, or by each rank's fixed + per-sample cost model
 * taken at its equal share and a quarter of it, as src/train/engine_dp.c does), then forward layer by
 * layer, backward bucket by bucket (ht_reduce_plan, top layers first), each bucket read to
 * the host and its all-reduce started as its layers finish (src/sync/bsp.c), the
 * buckets' sums written back, and the optimizer step. Without overlap: the whole backward,
 * then one all-reduce of every gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/choices.h"
#include "core/err.h"
#include "nn/model.h"
#include "plan/job.h"
#include "plan/plan.h"
#include "sim/sim.h"
#include "plan/buckets.h"

/* Rank r's fixed + per-sample model at share s1 (and s1 / 4), as src/train/engine_dp.c calibrates it. */
static void rank_model(const ht_sim_cluster *c, int r, const ht_sim_model *sm, int s1,
                       double *speed, double *fixed) {
    int s2 = s1 >= 4 ? s1 / 4 : s1;
    double t1 = ht_sim_range_time(c, r, sm, 0, sm->nlayers, s1, 0) +
                ht_sim_range_time(c, r, sm, 0, sm->nlayers, s1, 1);
    double t2 = ht_sim_range_time(c, r, sm, 0, sm->nlayers, s2, 0) +
                ht_sim_range_time(c, r, sm, 0, sm->nlayers, s2, 1);
    ht_plan_affine_from(s1, t1 > 1e-12 ? t1 : 1e-12, s2, t2, speed, fixed);
}

/* Device memory cap in samples: parameters, gradients and optimizer state fixed, the kept
 * activations and input per sample (ht_plan_max_share with 90% usable). */
static int cap_of(const ht_sim_cluster *c, int r, const ht_sim_model *sm) {
    const ht_sim_devtype *t = &c->types[c->rank_type[r]];
    if (t->mem_gb <= 0) return HT_PLAN_NO_CAP;
    double per = sm->in_bytes;
    for (int i = 0; i < sm->nlayers; i++)
        per += sm->l[i].act_bytes;
    double fixed = sm->param_bytes * (2 + sm->optim_state_floats);
    return ht_plan_max_share((uint64_t)(t->mem_gb * 1e9), 0.9, (uint64_t)fixed, (uint64_t)ceil(per));
}

static int split(const ht_sim_cluster *c, int n, const ht_sim_model *sm, const ht_sim_dp *p,
                 int *share) {
    if (p->shares) {
        memcpy(share, p->shares, (size_t)n * sizeof *share);
        return HT_OK;
    }
    double *sp = ht_xmalloc((size_t)n * sizeof *sp), *fx = ht_xcalloc((size_t)n, sizeof *fx);
    int *cap = ht_xmalloc((size_t)n * sizeof *cap);
    int eq = p->B / n > 0 ? p->B / n : 1;
    for (int r = 0; r < n; r++) {
        cap[r] = cap_of(c, r, sm);
        sp[r] = 1;
        if (p->speed) rank_model(c, r, sm, eq, &sp[r], &fx[r]);
    }
    /* as the trainer (src/train/ranks.c): split by speed may leave ranks out (share 0);
     * with p->exclude they then leave the job (ht_sim_run_dp) */
    int rc = p->speed ? ht_plan_dp_split(p->B, n, sp, fx, cap, share, NULL, NULL)
                      : ht_plan_batch_split_affine(p->B, n, sp, NULL, cap, share);
    free(sp);
    free(fx);
    free(cap);
    return rc;
}

/* The sharded step's end (cluster.shard): the slice to the host, the parameters (n floats)
 * all-gathered (collective ag), all of them to the device. */
static void gather_params(ht_sim *s, const ht_sim_cluster *c, int r, const ht_sim_dp *p,
                          size_t n, int ag, int name) {
    double d2h, h2d = ht_sim_host_copy(c, r, &d2h);
    ht_sim_compute(s, r, 4.0 * (double)(p->cut[r + 1] - p->cut[r]) * d2h, HT_SIM_CAT_COMM, name);
    ht_sim_coll(s, r, ag, name);
    ht_sim_wait(s, r, ag, name);
    ht_sim_compute(s, r, 4.0 * (double)n * h2d, HT_SIM_CAT_COMM, name);
}

/* Pushes one step's ops for the split `share`; an excluded rank (out[r]) has none and is in
 * no reduction, as the trainer's ranks that left the job (src/train/ranks.c). */
static void build_step(ht_sim *s, const ht_sim_cluster *c, int n, const ht_sim_model *sm,
                       const ht_bucket *bk, int nb, const ht_sim_dp *p, const int *share,
                       const unsigned char *out) {
    int *all = ht_xmalloc((size_t)n * sizeof *all), nin = 0;
    for (int r = 0; r < n; r++)
        if (!out[r]) all[nin++] = r;
    int *ids = ht_xmalloc((size_t)nb * sizeof *ids);
    const int sharded = p->shard != HT_SHARD_NONE && p->cut && nin > 1;
    const int rs = sharded; /* ZeRO-1 and ZeRO-2 reduce-scatter the buckets (sync/bsp.c) */
    for (int k = 0; k < nb; k++)
        ids[k] = rs ? ht_sim_coll_half(s, all, nin, 4.0 * (double)bk[k].n, p->alg, HT_SIM_RS)
                    : ht_sim_coll_new(s, all, nin, 4.0 * (double)bk[k].n, p->alg);
    const size_t nparams = (size_t)(sm->param_bytes / 4);
    const int ag = sharded ? ht_sim_coll_half(s, all, nin, sm->param_bytes, p->alg, HT_SIM_AG) : -1;
    int nf = ht_sim_name(s, "forward"), nbw = ht_sim_name(s, "backward");
    int nrd = ht_sim_name(s, "read grads"), nal = ht_sim_name(s, "allreduce");
    int nwr = ht_sim_name(s, "write grads"), nop = ht_sim_name(s, "optimizer");
    int nld = ht_sim_name(s, "load batch"), nag = ht_sim_name(s, "all-gather (parameters)");
    for (int r = 0; r < n; r++) {
        if (out[r]) continue;
        double d2h, h2d = ht_sim_host_copy(c, r, &d2h);
        /* the trainer's emulated slowdown idles for (s - 1) x its compute_s, which counts the
         * batch upload and, overlapped, each bucket's read to the host (src/sync/bsp.c) */
        double sl = c->slowdown ? c->slowdown[r] : 1, sr = p->overlap ? sl : 1;
        /* a CPU device (its kernels keep host cores busy) shares its core with the rank's
         * MPI progress, which moves and adds the buckets on the host inside the rank's calls:
         * the reduction does not hide behind backward there, each bucket's all-reduce holds
         * the rank until done (measured: the trainer's backward grew by the reduction's time
         * with overlap on, and the step matched overlap off; BENCHMARKS.md, hetsim validation) */
        const int serial = c->types[c->rank_type[r]].cores > 0;
        ht_sim_compute(s, r, sl * share[r] * sm->in_bytes * h2d, HT_SIM_CAT_COMM, nld);
        /* a rank left out (share 0) computes nothing but joins every reduction */
        const int on = share[r] > 0;
        ht_sim_compute(s, r, on ? ht_sim_range_time(c, r, sm, 0, sm->nlayers, share[r], 0) : 0,
                       HT_SIM_CAT_COMPUTE, nf);
        for (int k = 0; k < nb; k++) {
            ht_sim_compute(s, r,
                           on ? ht_sim_range_time(c, r, sm, bk[k].lo, bk[k].hi, share[r], 1) : 0,
                           HT_SIM_CAT_COMPUTE, nbw);
            if (nin > 1) {
                ht_sim_compute(s, r, sr * 4.0 * (double)bk[k].n * d2h, HT_SIM_CAT_COMM, nrd);
                ht_sim_coll(s, r, ids[k], nal);
                if (serial) ht_sim_wait(s, r, ids[k], nal);
            }
        }
        /* the sums back to the device: every bucket's, or (reduce-scatter) the slice once */
        const double slice = sharded ? 4.0 * (double)(p->cut[r + 1] - p->cut[r]) : sm->param_bytes;
        for (int k = 0; nin > 1 && k < nb; k++) {
            if (!serial) ht_sim_wait(s, r, ids[k], nal);
            if (!rs) ht_sim_compute(s, r, 4.0 * (double)bk[k].n * h2d, HT_SIM_CAT_COMM, nwr);
        }
        if (rs) ht_sim_compute(s, r, slice * h2d, HT_SIM_CAT_COMM, nwr);
        ht_sim_compute(s, r, ht_sim_optim_time(c, r, sm, slice), HT_SIM_CAT_OPT, nop);
        if (sharded) gather_params(s, c, r, p, nparams, ag, nag);
        double act = sm->in_bytes;
        for (int i = 0; i < sm->nlayers; i++)
            act += sm->l[i].act_bytes;
        ht_sim_mem_base(s, r, p->rank_bytes ? p->rank_bytes[r]
                                            : sm->param_bytes * (2 + sm->optim_state_floats) +
                                                  act * share[r]);
    }
    free(all);
    free(ids);
}

/* Simulates one step under the split; compute_s (may be NULL) gets each rank's forward +
 * backward seconds, what the trainer feeds its rebalancer. */
static int one_step(const ht_sim_cluster *c, int n, const ht_sim_model *sm, const ht_bucket *bk,
                    int nb, const ht_sim_dp *p, const int *share, const unsigned char *out,
                    int trace_on, const char *trace, ht_sim_result *res, double *compute_s) {
    ht_sim *s = ht_sim_new(c, n, trace_on);
    build_step(s, c, n, sm, bk, nb, p, share, out);
    int rc = ht_sim_run(s, res);
    if (rc == HT_OK && trace_on && trace) rc = ht_sim_write_trace(s, trace);
    if (rc == HT_OK && compute_s)
        for (int r = 0; r < n; r++)
            compute_s[r] = res->rank[r].busy;
    ht_sim_free(s);
    res->samples = p->B;
    res->throughput = res->makespan > 0 ? p->B / res->makespan : 0;
    return rc;
}

int ht_sim_run_dp(const ht_sim_cluster *c, int n, const ht_model *model, const ht_sim_model *sm,
                  const ht_sim_dp *p, int trace_on, const char *trace, ht_sim_result *res,
                  int *out_shares) {
    memset(res, 0, sizeof *res);
    if (n < 1 || n > c->nranks)
        return ht_error(HT_EINPUT, "%s: %d ranks asked for, the cluster has %d", c->source, n,
                        c->nranks);
    int *share = ht_xmalloc((size_t)n * sizeof *share);
    int rc = split(c, n, sm, p, share);
    ht_bucket one = {0, sm->nlayers, 0, (size_t)(sm->param_bytes / 4)}, *bk = &one;
    int nb = 1;
    if (p->overlap && n > 1 && model) {
        const double mib = 1024.0 * 1024.0;
        size_t first = (size_t)ceil(p->bucket_first_mb * mib), cap = (size_t)ceil(p->bucket_cap_mb * mib);
        nb = ht_reduce_plan(model, first, cap, NULL, 0);
        bk = ht_xmalloc((size_t)nb * sizeof *bk);
        ht_reduce_plan(model, first, cap, bk, nb);
    }
    /* the ranks that leave the job after the start-up split; the rebalancer then runs over
     * the others only, as the trainer's does */
    unsigned char *out = ht_xcalloc((size_t)n, 1);
    int *kept = ht_xmalloc((size_t)n * sizeof *kept), nk = 0;
    for (int r = 0; r < n; r++) {
        out[r] = rc == HT_OK && p->exclude && p->speed && !p->shares && r > 0 && share[r] == 0;
        if (!out[r]) kept[nk++] = r;
    }
    ht_rebalancer rb = {0};
    int steps = p->steps > 1 && p->speed && !p->shares && nk > 1 ? p->steps : 1;
    if (rc == HT_OK && steps > 1) rc = ht_rebalancer_init(&rb, nk, 0.3, 0.05, 5, 2);
    double *cs = ht_xmalloc((size_t)n * sizeof *cs), *kcs = ht_xmalloc((size_t)n * sizeof *kcs);
    int *ksh = ht_xmalloc((size_t)n * sizeof *ksh);
    for (int k = 0; rc == HT_OK && k < steps; k++) {
        int last = k == steps - 1;
        if (k) ht_sim_result_free(res);
        rc = one_step(c, n, sm, bk, nb, p, share, out, trace_on && last, trace, res, cs);
        if (rc == HT_OK && !last) {
            for (int i = 0; i < nk; i++)
                kcs[i] = cs[kept[i]], ksh[i] = share[kept[i]];
            int u = ht_rebalancer_update(&rb, k, p->B, kcs, NULL, ksh);
            if (u < 0) rc = -u;
            for (int i = 0; i < nk; i++)
                share[kept[i]] = ksh[i];
        }
    }
    if (steps > 1) ht_rebalancer_free(&rb);
    free(out), free(kept), free(kcs), free(ksh);
    if (rc == HT_OK && out_shares) memcpy(out_shares, share, (size_t)n * sizeof *share);
    if (bk != &one) free(bk);
    free(cs);
    free(share);
    return rc;
}
