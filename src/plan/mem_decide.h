/* A pipeline's memory decision, part of the plan (plan/job.h): for every schedule rank, which
 * of its layers are recomputed and how many micro-batches it holds in flight under its memory
 * limit, with the predicted bytes (HePipe's dynamic recomputation by memory prediction; the
 * one chooser is ht_mem_plan_rank, plan/partition.h). Pure: the trainer executes the decision
 * (train/pipe_mem.h reports and validates it against the device), hetsim and the planner
 * simulate it. */
#ifndef HT_PLAN_MEM_DECIDE_H
#define HT_PLAN_MEM_DECIDE_H

#include <stdint.h>

#include "config/choices.h"
#include "nn/model.h"
#include "plan/partition.h"
#include "plan/pipe_plan.h"

typedef struct ht_plan_mem {
    int Q, L;           /* schedule ranks, layers */
    ht_recompute mode;  /* pipe.recompute */
    uint8_t *layers;    /* [Q * L] the layers each schedule rank recomputes */
    uint8_t *any;       /* [Q] 1 where it recomputes any (ht_pipe_add_recompute's input) */
    int *max_inflight;  /* [Q] the most micro-batches each fits in flight */
    ht_mem_plan *plan;  /* [Q] the prediction (a group's: its tightest member's) */
    int *who;           /* [Q] the pipeline rank whose limit and samples speak for it */
    char (*chunks)[64]; /* [Q] its layer ranges as text ("0-3,8-11") */
} ht_plan_mem;

/* What a decision reads. The limits are bytes per pipeline rank (the smallest of its
 * replicas'), or NULL: none; pipe.recompute "auto" plans against them. */
typedef struct ht_plan_mem_in {
    const ht_model *m;
    int kind, v;                /* the schedule's kind, chunks per rank */
    const int *bounds;          /* [Q v + 1] the stages' first layers */
    const ht_pipe_groups *grp;  /* schedule rank q on pipeline ranks [first[q], first[q+1]) */
    int mb, N;                  /* samples per micro-batch, micro-batches */
    const int *slots;           /* [Q] in flight by the schedule (flexible: what it would like) */
    int flexible;               /* hepipe: may hold as few as 1 */
    int opt_states, weight_versions;
    int calib;                  /* samples of the start-up calibration of every layer, or 0
                                   (ht_plan_calib_samples: its GEMM packing) */
    const double *fwd;          /* [Q * L] seconds per sample of each layer, or NULL: FLOPs */
    const double *limit;        /* [P] or NULL */
    /* for the error message: device.memory_mb set, the world rank setting each pipeline
     * rank's limit [P] and the device names [world] (each may be NULL) */
    int from_cfg;
    const int *dev_rank;
    const char (*dev_name)[128];
} ht_plan_mem_in;

/* The decision into d (allocated here; an earlier one freed). "auto": HT_EINPUT naming the
 * key, the device and the shortfall when a rank fits in no way (`where`: the config's source);
 * "all": every layer; "none": no layer. */
int ht_plan_mem_decide(ht_plan_mem *d, ht_recompute mode, const ht_plan_mem_in *in, const char *where);
void ht_plan_mem_free(ht_plan_mem *d);
/* The layer ranges schedule rank q of Q holds under bounds (both of Chimera's directions)
 * into lo/hi (room for 2 v); returns their count. */
int ht_plan_mem_chunks(int kind, int Q, int v, const int *bounds, int q, int *lo, int *hi);
/* Moves *from into *to (freeing what *to held); *from is left empty. */
void ht_plan_mem_move(ht_plan_mem *to, ht_plan_mem *from);

#endif
