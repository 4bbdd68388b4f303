/* Synchronisation policies over the flat parameter and gradient buffers. bsp sums every
 * rank's gradients each step (bucketed and overlapped with backward, sync/bsp.c), every rank
 * a worker in lockstep; the trainer picks the shares of the batch. Under the other policies
 * the ranks split into workers (ranks 0 .. W-1: each trains on its own stream of batches, at
 * its own speed) and extra ranks after them:
 *   asp, ssp, dasp         sync.servers parameter servers, each holding a contiguous shard of
 *                          the parameters and the optimizer state (sync/ps.c);
 *   preduce, sap-reduce    one group generator (sync/preduce.c);
 *   gossip(-adaptive)      one coordinator that only counts progress (sync/gossip.c).
 * The extra rank(s) also decide when the job has seen its budget of samples (train.steps x
 * train.batch, as bsp) and tell the workers to stop. The rules (staleness, weights, states,
 * groups, triggers) are pure functions in sync/rules.h; all bytes move through src/comm. */
#ifndef HT_SYNC_SYNC_H
#define HT_SYNC_SYNC_H

#include <stdint.h>

#include "config/config.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "plan/sync_layout.h"

/* The policies (ht_sync_mode: HT_SYNC_BSP ..), their names and flags are the rows of
 * config/modes.h; each row's family picks its implementation here. */

/* The layout of ranks (who trains, who serves) is the plan's: plan/sync_layout.h. */

/* What every rank reports at the end (ht_sync_report gathers them on rank 0). */
typedef struct ht_sync_stats {
    double wait_s;           /* blocked waiting for other ranks (held replies, group formation) */
    double comm_s;           /* moving bytes, merging and averaging (not waiting) */
    double compute_s;        /* workers: forward + backward + local optimizer (+ emulated idle) */
    double hidden_s;         /* bsp: communication in flight while backward ran (not in comm_s) */
    int64_t steps;           /* workers: local steps; servers: updates applied */
    int64_t samples;         /* workers: samples trained on */
    uint64_t sent, received; /* bytes (src/comm's counters) */
    int64_t exchanges;       /* gossip workers: model exchanges started (0 elsewhere) */
} ht_sync_stats;

/* ------------------------------------------------------------------------ workers */

typedef struct ht_sync ht_sync;

/* A worker's side of the policy for model m (parameters initialised identically on every
 * worker) and its local optimizer. total_steps: the budget in global steps of train.batch.
 * Worker 0 sends the budget (and, to parameter servers, the initial parameters) to the extra
 * ranks. */
ht_sync *ht_sync_open(const ht_config *cfg, const ht_sync_layout *L, int rank, ht_model *m,
                      ht_optim *opt, int64_t total_steps);
/* Backward of a local batch of b samples after its forward (as ht_model_backward: grad_scale
 * scales the loss gradient). bsp also sums the gradients over all ranks, in buckets
 * overlapped with backward, and ORs ht_stop_requested() (core/stop.h, read during the step) over the ranks into the
 * stop that ht_sync_step reports; t_start is ht_now() at the start of the step (its forward
 * counts as compute). The others: ht_model_backward. */
void ht_sync_backward(ht_sync *s, int b, float grad_scale, double t_start);
/* After ht_sync_backward of a local batch of b samples (m->grads holds this batch's mean
 * gradient; bsp: summed over the ranks): the policy's update with learning rate lr (parameter servers use their own, from
 * the global step), then its exchange. *stop becomes 1 when the budget is spent; *global
 * is the latest known number of samples trained on by all workers together. */
void ht_sync_step(ht_sync *s, int b, float lr, int *stop, int64_t *global);
/* The emulated slowdown in effect from now on (ht_config_slowdown_at of this rank at the
 * step about to run; ht_sync_open starts with that of step 0): bsp idles (f - 1) x its
 * compute time. */
void ht_sync_set_slowdown(ht_sync *s, double f);
/* Adds emulated idle or compute seconds to the stats (the loop times its own compute; bsp
 * times its own in ht_sync_backward). */
void ht_sync_add_compute(ht_sync *s, double seconds);
/* This worker's counters so far (traffic not included), for records during the run. */
ht_sync_stats ht_sync_stats_now(const ht_sync *s);
/* After the last step, on every worker: the job's final model into m->params of worker 0
 * (parameter servers: the servers' parameters; the others: the average of the workers'
 * models, push-sum weighted for gossip). Collective over the workers. */
void ht_sync_finish(ht_sync *s);

/* -------------------------------------------- segments (the asynchronous policies) */

/* An asynchronous run goes in segments that end at quiesce points: checkpoints, --stop-after,
 * a stop request (core/stop.h), the end. A segment: ht_sync_begin (worker 0 starts the
 * extra ranks: parameter servers get their shard, optimizer state and version), steps until
 * ht_sync_step says stop (the job has seen `until` samples, or a worker or extra rank was
 * asked to stop: it says so in its next message), ht_sync_quiesce (every message in flight
 * drained; worker 0 then holds the servers' parameters and optimizer state in m and opt).
 * After the last: ht_sync_end, then ht_sync_finish. Collective over the workers except
 * begin and step. */
void ht_sync_begin(ht_sync *s, int64_t until);
/* Returns 1 when any worker or extra rank was asked to stop in the segment (the same on
 * every worker). */
int ht_sync_quiesce(ht_sync *s);
/* Worker 0 tells the extra ranks that no segment follows (interrupted: they return
 * HT_ESTOPPED). */
void ht_sync_end(ht_sync *s, int interrupted);

/* A worker's state beyond its parameters and optimizer buffers: v[0] local steps since
 * step 0, v[1] optimizer steps, then the policy's (ps: clock; preduce: timestamp; gossip:
 * push-sum weight, round, local steps, steps since the last exchange). */
enum { HT_SYNC_NV = 6 };
/* What a checkpoint of an asynchronous job holds beyond the job's model (ht_sync_snapshot
 * fills it on worker 0). */
typedef struct ht_sync_snap {
    int64_t samples;        /* samples trained on by all workers together */
    int workers, servers;   /* the layout */
    int models;             /* 1: every worker's own model and optimizer state below */
    size_t n;               /* parameters */
    int nstates;            /* optimizer state buffers of n floats each */
    double *v;              /* [workers][HT_SYNC_NV] */
    float *job;             /* the job's model (n): average, or the servers' parameters */
    float *params, *states; /* models: [workers][n], [workers][nstates][n] */
    int64_t *version, *opt_t; /* [servers] each server's updates and optimizer steps */
} ht_sync_snap;
/* Collective over the workers after ht_sync_quiesce: worker 0's snap is filled (free with
 * ht_sync_snap_free); the others' is left zero. Changes no worker's state. */
void ht_sync_snapshot(ht_sync *s, ht_sync_snap *snap);
void ht_sync_snap_free(ht_sync_snap *snap);
/* Before the first segment of a resumed run, on every worker: the job's samples, this
 * worker's v (HT_SYNC_NV), and (worker 0 of a parameter-server job) each server's version
 * and optimizer steps. Parameters and optimizer buffers are the caller's to load. */
void ht_sync_restore(ht_sync *s, int64_t samples, const double *v, const int64_t *version,
                     const int64_t *opt_t);
/* Local steps since step 0 (the data stream's batch number for this worker). */
int64_t ht_sync_local(const ht_sync *s);
/* The job's samples as last known (after ht_sync_quiesce: exact, the same on every worker). */
int64_t ht_sync_samples(const ht_sync *s);
/* This worker's v (HT_SYNC_NV) as it is now. */
void ht_sync_state(const ht_sync *s, double *v);
/* Parameter servers in the job (0 for the other policies). */
int ht_sync_servers(const ht_sync *s);
/* 1 when every worker keeps its own model and optimizer (preduce, sap-reduce, gossip). */
int ht_sync_own_models(const ht_sync *s);
ht_sync_stats ht_sync_close(ht_sync *s);

/* --------------------------------------------------------------- extra ranks */

/* Runs this extra rank (a server opens the device sel names for its optimizer) until every
 * worker has finished. Returns HT_OK or an error (message set). */
int ht_sync_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                  ht_sync_stats *stats);

/* ------------------------------------------------------------------------ report */

/* Collective over all ranks: gathers every rank's stats; on rank 0 `all` (world entries) is
 * filled, elsewhere it may be NULL. */
void ht_sync_report(const ht_sync_stats *mine, ht_sync_stats *all);

#endif
