/* The pipeline planner's runtime inputs, measured and gathered at start-up (collective:
 * every rank calls them); the planning on them is pure (plan/pipe_plan.h). */
#ifndef HT_TRAIN_PIPE_CALIB_H
#define HT_TRAIN_PIPE_CALIB_H

#include "config/config.h"
#include "nn/model.h"
#include "plan/pipe_plan.h"

/* Times every layer's forward and backward at mb samples on this rank's device (best of 5
 * after a warm-up pass; the model's gradients are overwritten, its parameters untouched),
 * scales them by `slowdown`, and gathers every rank's (collective: all ranks call it):
 * times[w * 2L + l] forward, times[w * 2L + L + l] backward of rank w, seconds per
 * micro-batch; times has world * 2 * nlayers entries. */
void ht_pipe_plan_calibrate(ht_model *m, int mb, double slowdown, double *times);
/* Zero-bubble (zb-het): every layer's B (input-gradient half) and W (weight-gradient half)
 * timed apart, laid out the same way: times[w * 2L + l] B, times[w * 2L + L + l] W (a layer
 * without a split: its whole backward as B, W 0). After ht_pipe_plan_calibrate (it needs its
 * defined buffers) and ht_model_keep_bw. Collective. */
void ht_pipe_plan_calibrate_bw(ht_model *m, int mb, double slowdown, double *times);

/* pipe_calib_win.c: on a model that holds only part of its parameters (m->pres < nparams),
 * the calibration times layer l in buffers of its own (its parameters zero), swapped in by
 * begin and freed by end. */
typedef struct ht_calib_win {
    ht_buf *params, *grads, *acts, *dacts, *saved, *work;
    size_t pbase, pres, *act_off, save_off;
    int nwin;
    ht_pwin win[HT_MODEL_MAX_WINDOWS];
} ht_calib_win;
void ht_calib_win_begin(ht_model *m, int l, ht_calib_win *w);
void ht_calib_win_end(ht_model *m, int l, ht_calib_win *w);

/* ht_pipe_plan_hosts (plan/pipe_plan.h) for the job's ranks (the first replica's world
 * ranks 0..D-1) by host name, or by
 * cluster.hosts when given; rank 0 warns when their hosts alternate. NULL also for D >
 * HT_PART_MAX_RANKS. Collective. host: room for D. */
const int *ht_pipe_plan_gather_hosts(const ht_config *cfg, int rank, int world, int D, int *host);

#endif
