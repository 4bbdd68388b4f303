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
#include "pipe/bounds.h"
#include "sim/sim.h"

const char *ht_sim_cand_name(const ht_sim_cand *k, char *buf, size_t n) {
    if (k->kind < 0)
        snprintf(buf, n, "data parallel, %s split", k->speed ? "speed" : "equal");
    else if (k->kind == HT_PIPE_INTERLEAVED)
        snprintf(buf, n, "%s D=%d v=%d x%d replicas, N=%d", ht_pipe_kind_names[k->kind], k->D, k->v,
                 k->W, k->N);
    else
        snprintf(buf, n, "%s D=%d x%d replicas, N=%d", ht_pipe_kind_names[k->kind], k->D, k->W, k->N);
    return buf;
}

/* Simulates one candidate and fills its figures (or its reason). */
static void evaluate(const ht_sim_cluster *c, int n, const ht_model *m, const ht_sim_model *sm,
                     int B, int alg, ht_sim_cand *k) {
    ht_sim_result r;
    int rc;
    if (k->kind < 0) {
        ht_sim_dp p = {.B = B, .speed = k->speed, .alg = alg, .overlap = 1,
                       .bucket_first_mb = 1, .bucket_cap_mb = 25};
        rc = ht_sim_run_dp(c, n, m, sm, &p, 0, NULL, &r, NULL);
    } else {
        ht_pipe_params pp = {.kind = k->kind, .D = k->D, .N = k->N, .v = k->v};
        ht_pipe_sched s;
        int *bounds = ht_xmalloc((size_t)(k->D * k->v + 1) * sizeof *bounds);
        rc = ht_pipe_bounds(m, k->D * k->v, HT_PIPE_BALANCED, bounds);
        if (rc == HT_OK && (rc = ht_pipe_generate(&pp, &s)) == HT_OK) {
            ht_sim_pipe p = {.s = &s, .W = k->W, .mb = B / (k->W * k->N), .bounds = bounds, .alg = alg};
            rc = ht_sim_run_pipe(c, sm, &p, 0, NULL, &r);
            ht_pipe_sched_free(&s);
        }
        free(bounds);
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
    int cap = 64, k = 0;
    ht_sim_cand *v = ht_xcalloc((size_t)cap, sizeof *v);
    for (int sp = 0; sp < 2 && n > 1; sp++)
        v[k++] = (ht_sim_cand){.kind = -1, .speed = sp, .D = 1, .W = n, .N = 1, .v = 1};
    if (n == 1) v[k++] = (ht_sim_cand){.kind = -1, .D = 1, .W = 1, .N = 1, .v = 1};
    static const int kinds[] = {HT_PIPE_GPIPE, HT_PIPE_1F1B, HT_PIPE_INTERLEAVED, HT_PIPE_CHIMERA};
    int maxS = ht_pipe_max_stages(m);
    for (int D = 2; D <= n && D <= maxS; D++) {
        if (n % D) continue;
        int W = n / D;
        for (int ki = 0; ki < 4; ki++) {
            int kind = kinds[ki], vv = kind == HT_PIPE_INTERLEAVED ? 2 : 1;
            if (kind == HT_PIPE_CHIMERA && D % 2) continue;
            if (D * vv > maxS) continue;
            for (int f = 1; f <= 4; f *= 2) { /* N = D, 2D, 4D micro-batches */
                int N = f * D;
                if (B % (W * N)) continue;
                if (k == cap) v = ht_xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
                v[k++] = (ht_sim_cand){.kind = kind, .D = D, .W = W, .N = N, .v = vv};
            }
        }
    }
    for (int i = 0; i < k; i++)
        evaluate(c, n, m, sm, B, alg, &v[i]);
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
