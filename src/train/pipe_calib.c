/* The pipeline planner's runtime inputs (see pipe_calib.h): layer times measured on this
 * rank's device, and the ranks' hosts, both gathered over MPI. The planning itself is pure
 * (pipe_plan.c). */
#include "train/pipe_calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"

#define REPEATS 5

/* ---------------------------------------------------------------- calibration */

/* The last layer's forward includes the loss and its gradient, as the last stage's FWD runs
 * them (exec.c): left out, the last stage looked up to 3 ms per micro-batch cheaper than it
 * is on a rank slowed 3x, and the cut moved a block too many onto it. */
static double best_of(ht_model *m, int l, int mb, int bwd) {
    double best = 1e300;
    for (int k = 0; k < REPEATS; k++) {
        double t0 = ht_now();
        if (bwd) ht_model_backward_range(m, l, l + 1, mb, 1.0f, 0);
        else ht_model_forward_range(m, l, l + 1, mb);
        if (!bwd && l == m->nlayers - 1) ht_model_loss_forward(m, mb, 1);
        ht_dev_finish(m->dev);
        double t = ht_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* One layer's zero-bubble half (B or W), best of REPEATS; B first left what W reads */
static double best_part(ht_model *m, int l, int mb, ht_bw_part part) {
    double best = 1e300;
    for (int k = 0; k < REPEATS; k++) {
        double t0 = ht_now();
        ht_model_backward_part(m, l, l + 1, mb, 1.0f, 0, part);
        ht_dev_finish(m->dev);
        double t = ht_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

void ht_pipe_plan_calibrate_bw(ht_model *m, int mb, double slowdown, double *times) {
    int L = m->nlayers;
    double *mine = ht_xmalloc((size_t)2 * L * sizeof *mine);
    ht_model_set_training(m, 0, 0, 0);
    ht_model_forward_range(m, 0, L, mb); /* defined activations (after ht_pipe_plan_calibrate) */
    ht_model_loss_forward(m, mb, 1);
    for (int l = L - 1; l >= 0; l--) { /* each B then its W, top down as a stage runs them */
        mine[l] = best_part(m, l, mb, HT_BW_INPUT) * slowdown;
        mine[L + l] = best_part(m, l, mb, HT_BW_WEIGHTS) * slowdown;
    }
    ht_comm_allgather(mine, (size_t)2 * L * sizeof *mine, times);
    free(mine);
}

void ht_pipe_plan_calibrate(ht_model *m, int mb, double slowdown, double *times) {
    int L = m->nlayers;
    double *mine = ht_xmalloc((size_t)2 * L * sizeof *mine);
    const int whole = m->pres == m->nparams; /* else each layer in buffers of its own */
    ht_model_set_training(m, 0, 0, 0);
    ht_buf_zero(m->dev, m->acts, 0, ht_buf_size(m->acts)); /* defined values, tokens 0 */
    ht_buf_zero(m->dev, m->dacts, 0, ht_buf_size(m->dacts));
    ht_buf_zero(m->dev, m->labels, 0, ht_buf_size(m->labels)); /* class 0: in range */
    if (whole) { /* warm-up: every kernel once */
        ht_model_forward_range(m, 0, L, mb);
        ht_model_loss_forward(m, mb, 1);
        ht_model_backward_range(m, 0, L, mb, 1.0f, 0);
        ht_dev_finish(m->dev);
    }
    for (int l = 0; l < L; l++) {
        ht_calib_win w;
        if (!whole) ht_calib_win_begin(m, l, &w), best_of(m, l, mb, 0), best_of(m, l, mb, 1);
        mine[l] = best_of(m, l, mb, 0) * slowdown;
        mine[L + l] = best_of(m, l, mb, 1) * slowdown;
        if (!whole) ht_calib_win_end(m, l, &w);
    }
    ht_comm_allgather(mine, (size_t)2 * L * sizeof *mine, times);
    free(mine);
}

const int *ht_pipe_plan_gather_hosts(const ht_config *cfg, int rank, int world, int D, int *host) {
    char name[64] = "";
    if (gethostname(name, sizeof name - 1) != 0) snprintf(name, sizeof name, "?");
    if (cfg->cluster.nhosts) snprintf(name, sizeof name, "%d", cfg->cluster.hosts[rank]);
    char *all = ht_xcalloc((size_t)world, sizeof name);
    ht_comm_allgather(name, sizeof name, all);
    int *id = ht_xmalloc((size_t)(D ? D : 1) * sizeof *id), alternating = 0;
    for (int q = 0; q < D; q++) { /* the first rank with the same name */
        id[q] = 0;
        while (strcmp(all + (size_t)id[q] * sizeof name, all + (size_t)q * sizeof name))
            id[q]++;
    }
    const int *h = D <= HT_PART_MAX_RANKS ? ht_pipe_plan_hosts(id, D, host, &alternating) : NULL;
    free(id), free(all);
    if (alternating && rank == 0)
        ht_log_warn("pipe.partition \"hetero\": the pipeline ranks' hosts alternate (e.g. "
                    "mpirun --map-by node); the partition plans them as one host, so stages "
                    "and replicas may span hosts: map the ranks by slot to keep a host's ranks "
                    "together");
    return h;
}
