/* The pipeline engine's state, shared by engine_pipe.c (setup, steps, gather) and
 * pipe_repart.c (pipe.rebalance: online re-partitioning), and the functions each calls of
 * the other. Not for other engines. */
#ifndef HT_TRAIN_ENGINE_PIPE_H
#define HT_TRAIN_ENGINE_PIPE_H

#include "train/pipe_exec.h"
#include "pipe/schedule.h"
#include "plan/repart.h"
#include "train/engine.h"
#include "train/pipe_mem.h"
#include "plan/job.h"
#include "plan/pipe_plan.h"

enum {
    TAG_GATHER = 900, /* stage owner -> rank 0, below the executor's tags */
    TAG_MOVE = 901,   /* a layer's old owner -> its new one (re-partitioning) */
    TAG_EVAL = 902,   /* a stage's owner -> the next one's: a validation batch's activation */
};

typedef struct pipe_state {
    ht_pipe_sched sched;
    ht_pipe_exec *x;
    int *bounds;
    ht_pipe_place place;
    ht_pipe_groups grp; /* the pipeline ranks of each schedule rank (pipe.replicate) */
    int q;              /* the schedule rank this rank runs */
    int hostbuf[HT_PART_MAX_RANKS];
    const int *host;    /* hetero: host id of each pipeline rank (hostbuf), or NULL: one host */
    int mb;
    float clip;
    double bubble_unit; /* the checker's bubble at F = 1, B = 2 */
    /* 2bw: sched is the period stream, chk three periods chained for the checker */
    int tbw;
    ht_pipe_sched chk;
    int64_t last;  /* the last batch run */
    float pend_lr; /* the learning rate of that batch: its gradient is applied with it */
    ht_pipe_mem mem; /* limits, recomputed layers and in-flight limits per pipeline rank */
    double *cal;     /* every layer's start-up times on every rank (hepipe, hetero), or NULL */
    double *cal1;    /* the same at 1 sample per micro-batch (pipe.replicate), or NULL */
    double *cal_bw;  /* zb-het: every layer's B and W timed apart (pipe_calib.h), or NULL */
    ht_pipe_params pp; /* the schedule's parameters, kept to generate it again */
    /* pipe.rebalance (hetero, gpipe / 1f1b / hepipe): the start-up problem and the rule */
    int repart;
    ht_pipe_problem prob;
    ht_repart rp;
    int told; /* a refused return was logged since the last change */
    int local; /* every rank holds only its stage (pipe_local.c): no gather, ht_pipe_eval */
} pipe_state;

/* Floats [off, off + n) of the parameters and of every optimizer state buffer, from rank
 * `from` to rank `to` (blocking; this rank is one of the two). */
void ht_pipe_send_state(ht_job *j, size_t off, size_t n, int from, int to, int tag);
/* Rank 0's start-up table: stage -> rank(s), layers, parameters. */
void ht_pipe_announce(const ht_job *j, const pipe_state *p);
/* The streams, the memory decision, recomputation, the check and the executor for the cut
 * in p->bounds. */
int ht_pipe_make_schedule(ht_job *j, ht_pipe_params *pp, pipe_state *p, double slowdown,
                          ht_pipe_report *rep);

/* What the plan knows of this cluster (hosts, memory limits, devices), and the plan adopted:
 * its cut, groups, schedule parameters and memory decision move into p and *pp (*times:
 * hepipe's stage times, the caller frees; times may be NULL). */
ht_plan_cluster ht_pipe_plan_cluster(const ht_job *j, const pipe_state *p);
void ht_pipe_adopt_plan(pipe_state *p, ht_plan *plan, ht_pipe_params *pp, double **times);

/* pipe_local.c: a rank running one stage narrows its parameters, gradients and optimizer
 * state to that stage's windows, or allocates its stages' windows when it started with none
 * (pipe_start.c); not with a sharded optimizer or, when built whole, several stages per rank:
 * then every rank keeps the whole model and rank 0 gathers; sets p->local; logs which on
 * rank 0. Before the executor is built. */
int ht_pipe_local_shrink(ht_job *j, pipe_state *p);

/* pipe_start.c (the engine's j->eng.window): 1 with this rank's stage, layers [*lo, *hi) and
 * its parameter window [*pbase, *pbase + *pres), when the cut follows from the config and
 * the description alone and the rank runs that one stage; 2 with an empty window when the
 * rank will hold stages that the plan decides (then ht_pipe_start_chunks); 0: build the
 * whole model. */
int ht_pipe_start_window(ht_job *j, const ht_model *m, size_t *pbase, size_t *pres, int *lo,
                         int *hi);
/* After the plan, on a rank started with an empty window: its stages' buffers (chunk k:
 * layers [lo[k], hi[k])), parameters initialised as the one-process run's, the optimizer
 * over them, and on --resume the checkpoint's part loaded. */
int ht_pipe_start_chunks(ht_job *j, int n, const int *lo, const int *hi);

/* pipe_eval.c (when p->local): validation as a forward-only pass over the stages, its loss
 * and accuracy on every rank; the checkpoint as one set with a shard per stage, written by
 * the stages' owners and committed atomically. Both collective. */
void ht_pipe_eval(ht_job *j, pipe_state *p, double *loss, double *acc);
int ht_pipe_save_stages(ht_job *j, pipe_state *p, int64_t step);

/* pipe_repart.c: whether this job re-partitions (p->repart) and its rule's state. */
int ht_pipe_repart_init(ht_job *j, pipe_state *p);
/* The rule on one step's all-reduced times (t[2r], t[2r + 1]: rank r's compute and whole
 * step); a new cut moves the layers and rebuilds the executor. Collective. */
int ht_pipe_repartition(ht_job *j, pipe_state *p, int64_t step, const double *t);

#endif
