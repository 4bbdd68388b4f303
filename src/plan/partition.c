/* Cutting a model's layers into pipeline stages (pure): by count, by measured time (the
 * linear partition problem, solved exactly), and HePipe's two-level partition over hosts and
 * devices of different speeds and memory (partition_dp.c holds its dynamic programs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "plan/partition.h"

/* ---------------------------------------------------------------- by count */

int ht_part_uniform(int L, int D, int *bounds) {
    if (D < 1 || D > L)
        return ht_error(HT_EINPUT,
                        "uniform partition: %d stages for %d layers; every stage needs a layer, "
                        "so use 1 to %d stages",
                        D, L, L);
    int q = L / D, r = L % D;
    bounds[0] = 0;
    for (int s = 0; s < D; s++)
        bounds[s + 1] = bounds[s] + q + (s < r); /* the longer stages first */
    return HT_OK;
}

/* ---------------------------------------------------------------- by time */

int ht_part_balanced(int L, int D, const double *t, int *bounds) {
    if (D < 1 || D > L)
        return ht_error(HT_EINPUT,
                        "balanced partition: %d stages for %d layers; every stage needs a layer, "
                        "so use 1 to %d stages",
                        D, L, L);
    for (int l = 0; l < L; l++)
        if (!isfinite(t[l]) || t[l] < 0)
            return ht_error(HT_EINPUT,
                            "balanced partition: layer %d has time %g; times must be finite and "
                            ">= 0 (was it measured?)",
                            l, t[l]);
    double *P = ht_xmalloc((size_t)(L + 1) * sizeof *P);
    double *f = ht_xmalloc((size_t)(L + 1) * sizeof *f), *g = ht_xmalloc((size_t)(L + 1) * sizeof *g);
    P[0] = 0;
    for (int l = 0; l < L; l++)
        P[l + 1] = P[l] + t[l];
    /* f[i]: the smallest largest stage over the first i layers cut into s stages */
    for (int i = 0; i <= L; i++)
        f[i] = i >= 1 ? P[i] : INFINITY;
    for (int s = 2; s <= D; s++) {
        for (int i = 0; i <= L; i++) {
            g[i] = INFINITY;
            for (int j = s - 1; j < i; j++) {
                double v = fmax(f[j], P[i] - P[j]);
                if (v < g[i]) g[i] = v;
            }
        }
        memcpy(f, g, (size_t)(L + 1) * sizeof *f);
    }
    double opt = f[L] * (1 + 1e-12);
    /* From the back, each stage takes as many layers as fit under the optimum while leaving
     * one for each earlier stage: the cuts land as far forward as any optimal split allows. */
    bounds[D] = L;
    for (int s = D - 1; s >= 0; s--) {
        int lo = bounds[s + 1] - 1;
        while (lo > s && P[bounds[s + 1]] - P[lo - 1] <= opt)
            lo--;
        bounds[s] = s == 0 ? 0 : lo;
    }
    free(P);
    free(f);
    free(g);
    return HT_OK;
}

/* ---------------------------------------------------------------- printing */

static void layer_list(char *buf, size_t n, const uint8_t *rc, int lo, int hi) {
    size_t k = 0;
    buf[0] = 0;
    for (int l = lo; l < hi && k + 8 < n; l++)
        if (rc[l]) k += (size_t)snprintf(buf + k, n - k, "%s%d", k ? "," : "", l);
    if (!k) snprintf(buf, n, "-");
}

void ht_partition_print(FILE *f, const ht_partition *p) {
    fprintf(f, "pipeline partition: %d stages over %d ranks, %d micro-batches of %d samples\n",
            p->D, p->R, p->N, p->mb);
    fprintf(f, "%5s %9s %4s %5s %5s %5s %10s %12s %8s %21s\n", "stage", "layers", "host", "rank",
            "share", "slots", "ms/mbatch", "recompute", "acts MB", "memory MB / limit");
    for (int s = 0; s < p->D; s++) {
        const ht_part_stage *st = &p->stage[s];
        for (int k = 0; k < st->nrep; k++) {
            int r = st->rank[k];
            char lay[24], rc[64], lim[24];
            snprintf(lay, sizeof lay, "%d-%d", st->lo, st->hi - 1);
            layer_list(rc, sizeof rc, p->recompute + (size_t)r * p->L, st->lo, st->hi);
            if (p->limit[r] > 0)
                snprintf(lim, sizeof lim, "%.1f", p->limit[r] / 1e6);
            else
                snprintf(lim, sizeof lim, "none");
            const ht_mem_use *u = &p->mem[r];
            fprintf(f, "%5d %9s %4d %5d %5d %5d %10.3f %12s %8.2f %10.1f / %8s\n", s, lay,
                    st->host, r, st->share[k], st->slots, st->time * 1e3, rc,
                    (u->acts + u->live + u->work) / 1e6, u->total / 1e6, lim);
        }
    }
    for (int r = 0; r < p->R; r++)
        if (p->stage_of[r] < 0) fprintf(f, "rank %d: idle\n", r);
    fprintf(f, "predicted: slowest stage %.3f ms per micro-batch, step %.3f ms\n",
            p->bottleneck * 1e3, p->step_time * 1e3);
}

double ht_part_affine(double t, double t1, int mb, double *per) {
    double b = mb > 1 ? (t - t1) / (mb - 1) : t;
    if (b < 0) b = 0;
    if (t - b * mb < 0) b = t / mb;
    *per = b;
    return t - b * mb;
}

void ht_partition_groups(const ht_partition *p, int *first, int *off, int *cnt) {
    for (int q = 0; q < p->D; q++) {
        const ht_part_stage *st = &p->stage[q];
        first[q] = st->rank[0];
        for (int k = 0, at = 0; k < st->nrep; k++) {
            off[st->rank[k]] = at, cnt[st->rank[k]] = st->share[k];
            at += st->share[k];
        }
    }
    first[p->D] = p->R;
}

void ht_partition_export(const ht_partition *p, const ht_mem_desc *d, int weight_versions,
                         int *bounds, double *stage_time, int *max_inflight) {
    for (int s = 0; s < p->D; s++) {
        const ht_part_stage *st = &p->stage[s];
        if (bounds) bounds[s] = st->lo, bounds[s + 1] = st->hi;
        if (stage_time) stage_time[s] = st->time;
        if (!max_inflight) continue;
        max_inflight[s] = p->N;
        for (int k = 0; k < st->nrep; k++) {
            int r = st->rank[k];
            int n = ht_mem_max_slots(d, st->lo, st->hi, st->share[k], weight_versions,
                                     p->recompute + (size_t)r * p->L, p->limit[r], p->N);
            if (n < max_inflight[s]) max_inflight[s] = n;
        }
    }
}

void ht_partition_free(ht_partition *p) {
    free(p->recompute);
    p->recompute = NULL;
}
