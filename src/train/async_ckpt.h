/* Checkpoints of the asynchronous policies (engine_async.c): the job's model and optimizer
 * in the one-process tensors (so that generate, evaluation and a bsp resume read them as any
 * checkpoint), plus the policy's state in "sync.*" metadata and tensors: the layout, the
 * samples seen, each worker's local step, optimizer steps and policy scalars (HT_SYNC_NV),
 * each worker's own model and optimizer buffers where workers keep their own (preduce,
 * sap-reduce, gossip), each server's version and optimizer steps. Internal to src/train. */
#ifndef HT_TRAIN_ASYNC_CKPT_H
#define HT_TRAIN_ASYNC_CKPT_H

#include <stdint.h>

#include "sync/sync.h"
#include "train/engine.h"

/* Every rank, before setup: when --resume finds a checkpoint holding a policy's state, it
 * must be this layout's (same sync.mode, workers and extra ranks): HT_EINPUT naming both. */
int ht_async_check_resume(const ht_config *cfg, const ht_sync_layout *L);
/* Collective over the workers, at a quiesce point: the checkpoint of global step `step`. */
int ht_async_save(ht_job *j, ht_sync *s, int64_t step);
/* Every worker of a resumed run (after train.c loaded the job's model and optimizer): this
 * worker's state, or (a checkpoint without a policy's state: bsp's) every worker starting
 * from the job's model at step j->start. */
int ht_async_restore(ht_job *j, ht_sync *s);

#endif
