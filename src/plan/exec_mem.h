/* What a job's ranks allocate, predicted from the config and the model's description alone
 * (issue 24), for the planner (`hettrain plan`, src/sim/planner.c) to keep to
 * device.memory_mb what the trainer will really hold: a pipeline rank that keeps only its
 * stage, one that keeps the whole model, a data-parallel rank. Pure: no MPI, no OpenCL. */
#ifndef HT_PLAN_EXEC_MEM_H
#define HT_PLAN_EXEC_MEM_H

#include "config/config.h"
#include "nn/model.h"
#include "pipe/schedule.h"
#include "plan/job.h"

/* 1 when every rank of a pipeline job of `world` ranks holds only its stages from start-up on
 * (train/pipe_start.c's rule: gpipe, 1f1b, 2bw, zb-h1, hepipe, and with one window per stage
 * interleaved, chimera, zb-v; no sharded optimizer; a tied GPT's rank that runs the head
 * without the embedding holds a copy of wte as one more window);
 * 0 when every rank builds the whole model, if only at start-up. Kept in step with
 * pipe_start.c by tests/integration/plan_fit.t, which runs what the planner proposes. */
int ht_plan_stage_local(const ht_config *cfg, int world);

/* Bytes the pipeline executor allocates on schedule rank q of plan p, whose stream s the plan
 * generated (s->nbuf: its slots), as train/pipe_mem.c predicts them after the run: the model
 * as built at one micro-batch plus the further slots (ht_mem_executor), or on a stage-local
 * rank only its stages' parameters, gradients, optimizer state and buffers
 * (ht_mem_executor_local, the stage plan's model), the tiled GEMM's packing workspace of the
 * rank's largest product included. */
double ht_plan_exec_bytes(const ht_config *cfg, const ht_model *m, const ht_plan *p,
                          const ht_pipe_sched *s, int opt_states, int world, int q);

/* The samples at which every rank times every layer at start-up (ht_plan_needs: hepipe, the
 * hetero partition; at the micro-batch mb, or at 1 sample for replicated stages alone), or
 * 0: no such calibration (see ht_mem_desc_calibrated). */
int ht_plan_calib_samples(const ht_config *cfg, int world, int mb);

/* Bytes a rank that holds the whole model at B samples allocates (one process, data
 * parallel: build/fit.c's total, which device.memory_mb bounds there): parameters, gradients,
 * opt_states floats a parameter, activations and their gradients, saved state, workspace,
 * labels, losses and flags, and the GEMM packing workspace of its largest product. */
double ht_plan_whole_bytes(const ht_model *m, int B, int opt_states);

#endif
