/* The plan phase (issue 23): one pure function decides what a run needs before any engine
 * starts, from the config, the model's description, a description of the cluster and the
 * costs. The trainer calls it with the costs it measures at start-up (train/pipe_calib.h's
 * calibration, every rank's timed passes), hetsim with the cost model's; both then obey the
 * same plan. No MPI, no OpenCL, no I/O (except the partition table logged on request). */
#ifndef HT_PLAN_JOB_H
#define HT_PLAN_JOB_H

#include "config/config.h"
#include "nn/model.h"
#include "pipe/schedule.h"
#include "plan/mem_decide.h"
#include "plan/pipe_plan.h"
#include "plan/sync_layout.h"

/* Which engine runs a job. One order for everyone: a pipeline schedule first (a pipeline
 * runs under bsp only: its checks refuse other policies, rather than running them as an
 * asynchronous job), then an asynchronous policy, else data parallel. */
typedef enum { HT_PLAN_DP, HT_PLAN_ASYNC, HT_PLAN_PIPE } ht_plan_engine;

ht_plan_engine ht_plan_engine_of(const ht_config *cfg);
/* The engine's name as the trainer logs it ("data parallel", "asynchronous", "pipeline"). */
const char *ht_plan_engine_name(ht_plan_engine e);

/* What the plan needs to know of the cluster. */
typedef struct ht_plan_cluster {
    int world;               /* ranks */
    const int *host;         /* [D] host id of each pipeline rank (ht_pipe_plan_hosts), or NULL */
    const double *mem_limit; /* [D] bytes per pipeline rank for the hetero cut, or NULL: none */
    int allow_recompute;     /* the hetero cut may count on recomputation to fit them */
    int verbose;             /* log the hetero partition table (the trainer's rank 0) */
    const int *max_share;    /* [world] data parallel: each rank's memory cap in samples
                                (HT_PLAN_NO_CAP: none), or NULL: no caps */
    /* the memory decision's limits: [P] bytes of each pipeline rank's device (the smallest of
     * its replicas'), or NULL: none; for its error, the world rank of that device [P] and the
     * device names [world] (each may be NULL) */
    const double *dev_limit;
    const int *dev_rank;
    const char (*dev_name)[128];
} ht_plan_cluster;

/* The costs, measured or modelled. Which ones a job needs: ht_plan_needs. */
typedef struct ht_plan_costs {
    /* every layer's forward and backward seconds per micro-batch on every rank, laid out as
     * ht_pipe_plan_calibrate's: [world * 2 * nlayers] at mb samples (cal) and at 1 (cal1) */
    const double *cal, *cal1;
    /* zb-het: every layer's B and W halves timed apart (ht_pipe_plan_calibrate_bw's layout:
     * B where cal has the forward, W where it has the backward), or NULL */
    const double *cal_bw;
    int opt_states;      /* optimizer floats per parameter */
    /* data parallel split "speed": each rank's samples/s beyond a fixed cost per step and
     * that cost (seconds), [world] each, or NULL: shares equal (or cluster.shares) */
    const double *speed, *fixed;
} ht_plan_costs;

/* The costs a job's plan reads: *cal (at the micro-batch), *cal1 (at 1 sample). */
void ht_plan_needs(const ht_config *cfg, int world, int *cal, int *cal1);
/* 1 when the job's schedule plans from B and W timed apart (zb-het): cal_bw, besides cal. */
int ht_plan_needs_bw(const ht_config *cfg);

typedef struct ht_plan {
    ht_plan_engine engine;
    ht_sync_layout sync; /* who trains and who serves (every engine: bsp's has no servers) */
    int B;           /* global batch */
    int model_batch; /* the samples the model's buffers hold (a pipeline: one micro-batch) */
    /* data parallel: each rank's samples of a global batch, [world] (NULL for the other
     * engines, or when no speeds were given: the cluster's own equal or given shares);
     * t_all / t_kept the predicted step time with every rank and with those kept */
    int *shares;
    double t_all, t_kept;
    /* pipeline (engine HT_PLAN_PIPE): P pipeline ranks x R replicas, N micro-batches of mb */
    int P, R, N, mb, S;
    ht_pipe_params pp;   /* the schedule's parameters; pp.D = schedule ranks (groups' Q) */
    int *bounds;         /* [S + 1] the first layer of each stage, then nlayers */
    ht_pipe_groups grp;  /* the pipeline ranks of each schedule rank */
    double *stage_time;  /* [P] hepipe: each stage's forward seconds (pp.stage_time), or NULL */
    /* the memory decision for the plan's stream: recomputed layers, slots, predicted bytes
     * per schedule rank (mem_decide.h); hepipe under "auto": the in-flight limits its stream
     * is generated with ([pp.D], pp.max_inflight), else NULL */
    ht_plan_mem mem;
    int *inflight;
} ht_plan;

/* The data-parallel split by speed: ht_plan_batch_split_exclude with a 5% minimum gain
 * (ranks that cost more than their samples save get share 0). max_share, t_all, t_kept may
 * be NULL. */
int ht_plan_dp_split(int B, int n, const double *speed, const double *fixed,
                     const int *max_share, int *share, double *t_all, double *t_kept);

/* Decides the plan of cfg's job on cl with costs c (the ones ht_plan_needs asks for; others
 * may be NULL). The config has passed the engine's checks. Returns HT_OK, or HT_EINPUT naming
 * the keys (prefix: the config's source) with *p freed. Free with ht_plan_free. */
int ht_plan_job(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                const ht_plan_costs *c, ht_plan *p);
void ht_plan_free(ht_plan *p);
/* Part of ht_plan_job (plan/job_mem.c): p->mem (and hepipe's p->inflight) for a pipeline plan
 * whose stages, groups and schedule parameters are decided. */
int ht_plan_job_memory(const ht_config *cfg, const ht_model *m, const ht_plan_cluster *cl,
                       const ht_plan_costs *c, ht_plan *p);

/* The schedule stream of a plan's pp (2bw: the steady period the executor chains; hepipe
 * with pp->max_inflight from the memory decision), errors prefixed with the config's source. */
int ht_plan_schedule(const ht_config *cfg, const ht_pipe_params *pp, ht_pipe_sched *s);

#endif
