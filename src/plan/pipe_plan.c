/* Heterogeneity-aware pipeline planning (see pipe_plan.h). */
#include "plan/pipe_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "plan/bounds.h"
#include "pipe/schedule.h"
#include "plan/partition.h"

/* Seconds per micro-batch of layer l on pipeline rank q: its slowest replica (world = r D + q). */
static double layer_time(const double *times, int L, int world, int D, int q, int l, int bwd) {
    double t = 0;
    for (int w = q; w < world; w += D)
        if (times[(size_t)w * 2 * L + (size_t)bwd * L + l] > t)
            t = times[(size_t)w * 2 * L + (size_t)bwd * L + l];
    return t;
}

void ht_pipe_groups_free(ht_pipe_groups *g) {
    free(g->first), free(g->off), free(g->cnt);
    memset(g, 0, sizeof *g);
}

/* Room for Q schedule ranks on D pipeline ranks. */
static void groups_alloc(ht_pipe_groups *g, int D, int Q) {
    ht_pipe_groups_free(g);
    g->D = D, g->Q = Q;
    g->first = ht_xcalloc((size_t)Q + 1, sizeof *g->first);
    g->off = ht_xcalloc((size_t)(D ? D : 1), sizeof *g->off);
    g->cnt = ht_xcalloc((size_t)(D ? D : 1), sizeof *g->cnt);
}

void ht_pipe_groups_none(ht_pipe_groups *g, int D, int mb) {
    groups_alloc(g, D, D);
    for (int q = 0; q <= D; q++)
        g->first[q] = q;
    for (int p = 0; p < D; p++)
        g->cnt[p] = mb;
}

void ht_pipe_groups_explicit(ht_pipe_groups *g, int D, const int *sizes, int Q, int mb) {
    groups_alloc(g, D, Q);
    for (int q = 0, p = 0; q < Q; q++) {
        const int k = sizes[q];
        g->first[q] = p;
        for (int i = 0, at = 0; i < k; i++, p++) {
            g->cnt[p] = mb / k + (i < mb % k);
            g->off[p] = at;
            at += g->cnt[p];
        }
    }
    g->first[Q] = D;
}

int ht_pipe_groups_replicated(const ht_pipe_groups *g) { return g->Q < g->D; }

void ht_pipe_plan_stage_times(const ht_model *m, const double *times, const double *times1,
                              int world, const ht_pipe_groups *g, int mb, const int *bounds,
                              double *stage_time) {
    for (int q = 0; q < g->Q; q++) {
        double worst = 0;
        for (int p = g->first[q]; p < g->first[q + 1]; p++) {
            double t = 0, per;
            for (int l = bounds[q]; l < bounds[q + 1]; l++) {
                const double full = layer_time(times, m->nlayers, world, g->D, p, l, 0);
                if (times1 && mb > 1 && g->cnt[p] != mb) /* fixed + per sample x its share */
                    t += ht_part_affine(full, layer_time(times1, m->nlayers, world, g->D, p, l, 0),
                                        mb, &per) + per * g->cnt[p];
                else
                    t += full * g->cnt[p] / mb; /* times are per micro-batch of mb */
            }
            if (t > worst) worst = t;
        }
        stage_time[q] = worst > 0 ? worst : 1e-9;
    }
}

/* ---------------------------------------------------------------- partition */

static void log_table(const ht_partition *p) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return;
    ht_partition_print(f, p);
    fclose(f);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        ht_log_info("%s", line);
    ht_log_info("(layer times measured at start-up on each rank, times its slowdown)");
    free(buf);
}

void ht_pipe_plan_layer_fwd(const ht_model *m, const double *times, int world,
                            const ht_pipe_groups *g, int mb, double *fwd) {
    const int L = m->nlayers;
    for (int q = 0; q < g->Q; q++)
        for (int l = 0; l < L; l++) {
            double t = 0;
            for (int p = g->first[q]; p < g->first[q + 1]; p++) {
                double tp = layer_time(times, L, world, g->D, p, l, 0);
                if (tp > t) t = tp;
            }
            fwd[q * L + l] = t / mb;
        }
}

void ht_pipe_problem_init(ht_pipe_problem *pb, const ht_model *m, const double *times,
                          const double *times1, int world, int kind, int D, int N, int mb,
                          int opt_states, const double *mem_limit, int allow_recompute) {
    const int L = m->nlayers;
    pb->fwd = ht_xmalloc((size_t)D * L * sizeof *pb->fwd);
    pb->bwd = ht_xmalloc((size_t)D * L * sizeof *pb->bwd);
    pb->fixed = times1 && mb > 1 ? ht_xmalloc((size_t)D * L * sizeof *pb->fixed) : NULL;
    for (int q = 0; q < D; q++) /* per sample */
        for (int l = 0; l < L; l++) {
            const double f = layer_time(times, L, world, D, q, l, 0);
            const double b = layer_time(times, L, world, D, q, l, 1);
            const size_t x = (size_t)q * L + l;
            if (pb->fixed) {
                const double f1 = layer_time(times1, L, world, D, q, l, 0);
                const double b1 = layer_time(times1, L, world, D, q, l, 1);
                pb->fixed[x] = ht_part_affine(f, f1, mb, &pb->fwd[x]) +
                               ht_part_affine(b, b1, mb, &pb->bwd[x]);
            } else {
                pb->fwd[q * L + l] = f / mb;
                pb->bwd[q * L + l] = b / mb;
            }
        }
    pb->cut = ht_xmalloc((size_t)L);
    for (int l = 0; l < L; l++)
        pb->cut[l] = l == 0 || ht_pipe_can_cut(m, l);
    ht_mem_desc_from_model(&pb->desc, m, mb, opt_states);
    pb->in = (ht_part_input){.model = &pb->desc, .R = D, .fwd = pb->fwd, .bwd = pb->bwd,
                             .B = N * mb, .N = N,
                             .slots_rule = ht_pipe_kind_has(kind, HT_PIPE_F_ALL_IN_FLIGHT)
                                              ? HT_PART_SLOTS_ALL
                                                                  : HT_PART_SLOTS_1F1B,
                             .weight_versions = ht_pipe_kind_has(kind, HT_PIPE_F_NO_FLUSH) ? 2 : 1, /* 2bw */
                             .mem_limit = mem_limit, .allow_recompute = allow_recompute,
                             .in_rank_order = 1, .can_cut = pb->cut, .fixed = pb->fixed};
}

void ht_pipe_problem_free(ht_pipe_problem *pb) {
    if (!pb->fwd) return;
    ht_mem_desc_free(&pb->desc);
    free(pb->fwd), free(pb->bwd), free(pb->fixed), free(pb->cut);
    memset(pb, 0, sizeof *pb);
}

const int *ht_pipe_plan_hosts(const int *id, int D, int *host, int *alternating) {
    int nhost = 0, ok = 1;
    for (int q = 0; q < D; q++) {
        host[q] = q;
        for (int k = 0; k < q; k++)
            if (id[k] == id[q]) {
                host[q] = host[k];
                break;
            }
        nhost += host[q] == q;
        ok &= q == 0 || host[q] == host[q - 1] || host[q] == q; /* a new host, or the same */
    }
    *alternating = nhost > 1 && !ok;
    return nhost > 1 && ok ? host : NULL;
}

/* The groups of partition p (stages in rank order, each on a run of adjacent ranks). */
static void groups_of(const ht_partition *p, ht_pipe_groups *g) {
    groups_alloc(g, p->R, p->D);
    ht_partition_groups(p, g->first, g->off, g->cnt);
}

int ht_pipe_plan_hetero(const ht_model *m, const double *times, const double *times1,
                        int world, int kind, int D, int N, int mb, int opt_states,
                        const double *mem_limit, int allow_recompute, int allow_replicas,
                        const int *host, int print, int *bounds, ht_pipe_groups *g) {
    if (D > HT_PART_MAX_RANKS)
        return ht_error(HT_EINPUT, "pipe.partition \"hetero\": %d stages; at most %d", D,
                        HT_PART_MAX_RANKS);
    ht_pipe_problem pb;
    ht_pipe_problem_init(&pb, m, times, times1, world, kind, D, N, mb, opt_states, mem_limit,
                         allow_recompute);
    pb.in.allow_replicas = allow_replicas;
    pb.in.host = host;
    ht_partition p;
    int rc = ht_part_hetero(&pb.in, &p);
    if (rc == HT_OK) {
        ht_partition_export(&p, &pb.desc, 1, bounds, NULL, NULL);
        if (g) groups_of(&p, g);
        if (print) log_table(&p);
        ht_partition_free(&p);
    }
    ht_pipe_problem_free(&pb);
    return rc;
}
