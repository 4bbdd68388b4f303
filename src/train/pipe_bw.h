/* Zero-bubble schedules in the executor (issue 27): which part of a stage's backward an
 * instruction runs. */
#ifndef HT_TRAIN_PIPE_BW_H
#define HT_TRAIN_PIPE_BW_H

#include "pipe/schedule.h"

/* The ht_bw_part (nn/model.h) that instruction op (BWD or BWD_W) of schedule s runs, or -1:
 * nothing. A schedule without the split runs its whole backward in BWD. A split one runs the
 * input gradients in BWD and the weight gradients in BWD_W, except on a recomputing rank
 * (rc): its stages run in one shared work set that the next micro-batch overwrites before the
 * deferred W, so there BWD runs the whole backward and BWD_W nothing (correct, no overlap). */
int ht_pipe_bw_part(const ht_pipe_sched *s, int op, int rc);

/* Logs (info) zb-het's stage times as measured at start-up, F, B and W apart (p's
 * stage_time, stage_b, stage_w), and the checker's makespan and bubble of s and of zb-h1
 * under them. */
void ht_pipe_log_zbhet(const ht_pipe_sched *s, const ht_pipe_params *p);

#endif
