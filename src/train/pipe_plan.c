/* Heterogeneity-aware pipeline planning (see pipe_plan.h). */
#include "train/pipe_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "pipe/bounds.h"
#include "pipe/schedule.h"
#include "plan/partition.h"

/* The slowest emulated slowdown among the replicas of pipeline rank q (world = r D + q). */
static double rank_slowdown(const ht_config *cfg, int q, int D, int world) {
    double s = 1;
    for (int w = q; w < world && cfg->cluster.nslowdown; w += D)
        if (w < cfg->cluster.nslowdown && cfg->cluster.slowdown[w] > s) s = cfg->cluster.slowdown[w];
    return s;
}

void ht_pipe_plan_stage_times(const ht_config *cfg, const ht_model *m, int world, int D,
                              const int *bounds, double *stage_time) {
    for (int s = 0; s < D; s++) {
        double f = 0;
        for (int l = bounds[s]; l < bounds[s + 1]; l++)
            f += ht_layer_flops_forward(&m->layers[l]);
        stage_time[s] = (f > 0 ? f : 1) * rank_slowdown(cfg, s, D, world);
    }
}

static void log_table(const ht_partition *p) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return;
    ht_partition_print(f, p);
    fclose(f);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        ht_log_info("%s", line);
    ht_log_info("(times from FLOPs at a nominal 1 GFLOP/s over each rank's slowdown)");
    free(buf);
}

int ht_pipe_plan_hetero(const ht_config *cfg, const ht_model *m, int world, int kind, int D,
                        int N, int mb, int opt_states, int print, int *bounds) {
    int L = m->nlayers;
    if (D > HT_PART_MAX_RANKS)
        return ht_error(HT_EINPUT, "pipe.partition \"hetero\": %d stages; at most %d", D,
                        HT_PART_MAX_RANKS);
    double *f = ht_xmalloc((size_t)D * L * sizeof *f), *b = ht_xmalloc((size_t)D * L * sizeof *b);
    double rate[HT_PART_MAX_RANKS];
    for (int q = 0; q < D; q++)
        rate[q] = 1e9 / rank_slowdown(cfg, q, D, world);
    ht_part_times_from_model(m, D, rate, f, b);
    uint8_t *cut = ht_xmalloc((size_t)L);
    for (int l = 0; l < L; l++)
        cut[l] = l == 0 || ht_pipe_can_cut(m, l);
    ht_mem_desc d;
    ht_mem_desc_from_model(&d, m, mb, opt_states);
    ht_part_input in = {.model = &d, .R = D, .fwd = f, .bwd = b, .B = N * mb, .N = N,
                        .slots_rule = kind == HT_PIPE_GPIPE ? HT_PART_SLOTS_ALL
                                                             : HT_PART_SLOTS_1F1B,
                        .weight_versions = 1, .in_rank_order = 1, .can_cut = cut};
    ht_partition p;
    int rc = ht_part_hetero(&in, &p);
    if (rc == HT_OK) {
        ht_partition_export(&p, &d, 1, bounds, NULL, NULL);
        if (print) log_table(&p);
        ht_partition_free(&p);
    }
    ht_mem_desc_free(&d);
    free(f), free(b), free(cut);
    return rc;
}
