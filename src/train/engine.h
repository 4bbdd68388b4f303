/* A training run is setup -> engine -> finish. Setup (train.c) builds what every engine needs
 * from the config: ranks, device, data, model, optimizer, schedule, metrics, resume; an engine
 * runs the steps its way (data parallel, the asynchronous sync policies, the pipeline
 * executor); finish closes the metrics and frees. Every engine reports through one shared
 * path (ht_job_after_step and friends below): metrics, progress, the NaN check, evaluation and
 * checkpoints behave the same whatever runs the steps. Engines are listed in one table
 * (report.c), picked by the plan phase (plan/job.h). Internal to src/train. */
#ifndef HT_TRAIN_ENGINE_H
#define HT_TRAIN_ENGINE_H

#include <stdint.h>

#include "config/config.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "optim/optim.h"
#include "optim/lr_schedule.h"
#include "train/ranks.h"
#include "train/checkpoint.h"
#include "train/source.h"
#include "train/train.h"

/* The shared reporting state, owned by the report path (report.c: ht_job_loop_start and
 * the ht_job_* functions below); engines read it at most. */
typedef struct ht_job_report {
    ht_progress prog;
    int show; /* this rank reports (rank 0 at info level) */
    double t_loop, t_mark, t_eval, vloss, vacc;
    int64_t mark_samples, next_log, next_eval;
    /* throughput counts from the end of the first step (ht_job_first_step): that step also
     * compiles kernels for their launch sizes and allocates, so a first run would otherwise
     * report a figure that means something else than the second's */
    double t_warm;
    int64_t warm_samples;
    /* Periodic checkpoints in the shared path (checkpoint.every; an engine that saves at its
     * own points clears it with ht_job_engine_saves and saves with ht_job_save) */
    int64_t ckpt_every;
    int64_t saved; /* the step last saved by ht_job_save (-1: none) */
} ht_job_report;

/* The engine's own state and what it keeps current for the report path. */
struct ht_job;
typedef struct ht_job_engine {
    /* Kept current by the engine before ht_job_after_step / ht_job_loop_finish: */
    int64_t samples; /* samples trained on by all ranks since step 0 (bsp: steps x B) */
    int last;        /* this is the run's last step (bsp: step total; async: the policy said so) */
    /* Every rank holds the whole current model and optimizer state (data parallel): the
     * shards of a sharded checkpoint are written by all ranks. */
    int all_hold;
    /* cluster.shard = "optimizer": rank r keeps the optimizer state of params[cut[r],
     * cut[r+1]) (world + 1 entries); its checkpoints are sets of one shard per rank. NULL:
     * not sharded. Freed at finish. */
    size_t *zero_cut;
    /* set by the engine's check: setup cuts before it allocates the optimizer (train/zero.h) */
    int zero_init;
    /* set by the engine's check: the GEMM choice's one-time probe is made before the model is
     * built and the device memory peak restarts there, so that it counts the job's buffers */
    int peak_from_model;
    int interrupted; /* the loop ended on a stop request (core/stop.h: a signal, any rank) */
    /* An engine that does not read the loss back every step (data parallel) marks the first
     * step with a non-finite loss in this device int (ht_nonfinite_mark, INT_MAX = none):
     * read on log steps, before a checkpoint and at the end. NULL: the engine passes every
     * step's loss to ht_job_after_step. */
    ht_buf *loss_flag;
    /* Set by an engine whose rank 0 does not hold the whole model's current parameters and
     * optimizer state at all times (a pipeline: each stage owns a range): called
     * collectively on every rank before an evaluation or a checkpoint, so that rank 0 holds
     * them. NULL: rank 0 already does. */
    void (*gather)(struct ht_job *j);
    /* Set by an engine that evaluates and saves without any rank holding the whole model (a
     * pipeline whose ranks hold only their stages); gather is then not called. Both are
     * collective on every rank: evaluate gives every rank the validation loss and accuracy,
     * save writes the checkpoint of `step` (each stage's owner its shard of one set). */
    void (*evaluate)(struct ht_job *j, double *loss, double *acc);
    int (*save)(struct ht_job *j, int64_t step);
    /* Set by an engine's check whose rank may hold only part of the model from the start (a
     * pipeline stage): given the description, 1 with the parameter window and the layers to
     * allocate (setup then initialises, makes the optimizer over and resumes only that
     * window: `windowed`), 0 for the whole model. */
    int (*window)(struct ht_job *j, const ht_model *m, size_t *pbase, size_t *pres, int *lo,
                  int *hi);
    int windowed; /* 1: the model holds its window; 2: none yet (the engine allocates it) */
    int resumed;  /* --resume loaded a checkpoint (the engine may load its window again) */
    /* windowed == 2 and resumed: --resume's checkpoint, its headers read and its files open,
     * so that the window's load after the plan reads them once (closed by that load, or at
     * the end) */
    struct ht_st_file *ckpt;
    void *state; /* the engine's; freed with free() at finish when still set */
} ht_job_engine;

/* What setup built, handed to the engine (the engine does not change it), then the report
 * path's state and the engine's. Fields an engine does not need may be unset for ranks that
 * hold no model (a parameter server: dev, model and opt unset). */
typedef struct ht_job {
    const ht_config *cfg;
    const ht_train_opts *opts;
    int rank, world;
    ht_cluster *cl;       /* ranks, shares, start-up table, per-rank records (cluster.h) */
    const char *selector; /* this rank's device, resolved: its index as text (build/place.h) */
    char selector_text[16];
    int dev_index;        /* this rank's device (ht_place_device) */
    int holds_model;      /* 1 unless the engine's check cleared it: no device, data, model */
    ht_dev *dev;
    ht_source src;
    ht_model model; /* the whole model (a pipeline stage runs a range of its layers) */
    ht_optim opt;
    ht_lr_sched sched;
    ht_metrics *metrics; /* rank 0 when log.metrics is set, else NULL */
    int B;               /* global batch */
    int model_batch;     /* the samples the model's buffers hold: B, unless the engine's check
                            lowers it (a pipeline runs one micro-batch at a time) */
    double rows;         /* loss rows of a global batch: B x model.rows */
    int64_t total;       /* steps of the run */
    int64_t start;       /* first step (after --resume) */
    int64_t end;         /* one past the last step this process runs (--stop-after) */
    double t_start;      /* ht_now() when the process started the job */
    ht_job_report rep;   /* the report path's (report.c); engines do not write it */
    ht_job_engine eng;   /* the engine's */
} ht_job;

/* An engine: the plan phase picks which runs cfg's job (ht_plan_engine_of); `check` refuses,
 * before any device work, options it cannot honour (HT_EINPUT naming the keys; may be NULL);
 * it sees cfg, opts, rank, world and cl, may lower model_batch and may clear holds_model for
 * this rank (setup's part) and set eng.state; `run` trains from j->start to j->end and fills res
 * (a rank without a model only serves). */
typedef struct ht_engine {
    const char *name;
    int (*check)(ht_job *j);
    int (*run)(ht_job *j, ht_train_result *res);
} ht_engine;

/* The engine for cfg: the one ht_plan_engine_of (plan/job.h) names. Never NULL. */
const ht_engine *ht_engine_for(const ht_config *cfg);

extern const ht_engine ht_engine_dp;    /* engine_dp.c */
extern const ht_engine ht_engine_async; /* engine_async.c */
extern const ht_engine ht_engine_pipe;  /* engine_pipe.c */

/* ------------------------------------------------------------ the shared step path */

/* Starts progress, throughput marks and the log/evaluation schedule (rank 0 reports), the
 * samples counted from j->start x B (ht_job_loop_start_at: from `samples`, an asynchronous
 * policy's count). */
void ht_job_loop_start(ht_job *j);
void ht_job_loop_start_at(ht_job *j, int64_t samples);
/* The engine saves at its own points (ht_job_save): no periodic checkpoints in the shared
 * path. */
void ht_job_engine_saves(ht_job *j);
/* After global step `done` (1-based) has updated the parameters, j->eng.samples and j->eng.last
 * current: loss_sum is checked for finiteness at every step (engines with j->eng.loss_flag pass
 * 0 on other than log steps, and the flag is read on log steps) (HT_ERUNTIME naming the step
 * and the learning rate: a diverged run never writes a checkpoint; under mpirun the rank that
 * sees it ends the job through src/comm's exit hook); on log steps it is the sum of row
 * losses over the global batch (every rank that calls this passes the same value) and goes
 * to metrics and progress, on other steps it may be this rank's part only; on evaluation
 * steps rank 0 evaluates; on checkpoint steps rank 0 saves. Collective when j->eng.gather is
 * set. Returns HT_OK or the error. */
int ht_job_after_step(ht_job *j, int64_t done, double loss_sum, float lr);
/* HT_ERUNTIME naming step `done` and the learning rate when loss_sum is not finite (a
 * diverged run never writes a checkpoint: the last good one stays); HT_OK otherwise. For a
 * rank that does not call ht_job_after_step (an asynchronous worker other than rank 0). */
int ht_job_check_loss(ht_job *j, int64_t done, double loss_sum, float lr);
/* The checkpoint of step `step` with the extras x (may be NULL): after j->eng.gather (if set),
 * rank 0 writes its model and optimizer. ht_job_loop_finish does not save that step again.
 * Collective when j->eng.gather is set. */
int ht_job_save(ht_job *j, int64_t step, const ht_ckpt_extra *x);
/* Collective: shard i of the set checkpoint.path holds the flat parameter range [cut[i],
 * cut[i + 1]) (k + 1 cuts) and is written by rank writer[i] (NULL: i % world), each as a
 * .next; after all are written rank 0 commits the set (a kill at any moment leaves the
 * previous set loadable). HT_ERUNTIME on every rank when any rank failed. */
int ht_job_save_cuts(ht_job *j, int64_t step, int k, const size_t *cut, const int *writer);
/* After the first step's device work, with j->eng.samples current: res->first_step_s, and the
 * throughput clocks restart. */
void ht_job_first_step(ht_job *j, ht_train_result *res);
/* 1 on the steps where ht_job_after_step needs loss_sum (log.every crossed, the last step). */
int ht_job_logs_at(const ht_job *j, int64_t done);
/* 1 when ht_job_after_step(done) would neither evaluate nor save and `done` is not the last
 * step (j->eng.last current): an engine may then report that step later (2bw's step-end
 * reduction completes one period late), since nothing there reads the weights. */
int ht_job_quiet_at(const ht_job *j, int64_t done);
/* After the loop, `step` steps done: final checkpoint (if any step ran), the "stopped at"
 * line, HT_ERUNTIME when interrupted, final evaluation on rank 0, res filled. */
int ht_job_loop_finish(ht_job *j, int64_t step, ht_train_result *res);

#endif
