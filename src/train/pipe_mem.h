/* Memory-driven recomputation and in-flight limits for the pipeline engine (issue 11:
 * HePipe's dynamic recomputation by memory prediction). Every rank's memory limit
 * (device.memory_mb, or its device's reported global memory) is gathered; for every pipeline
 * rank the memory model (plan/partition.h) predicts the peak of its stages with the
 * micro-batches its schedule holds in flight, and pipe.recompute = "auto" recomputes only
 * where that exceeds the limit (ht_mem_plan_rank: which layers; hepipe may hold fewer
 * micro-batches instead when even recomputing everything is not enough). The decision is
 * computed alike on every rank from the same gathered figures, logged on rank 0 (predicted
 * bytes against the limit, the recomputed layers) and written as "pipe_memory" metrics.
 *
 * What it bounds is the prediction of a stage's own memory: every rank still allocates the
 * whole model's parameters, optimizer state and one activation set of every layer for a
 * micro-batch (the executor's design, so that checkpoints are the one-process format and rank
 * 0 can evaluate), which the prediction leaves out; ht_pipe_mem_validate measures both. */
#ifndef HT_TRAIN_PIPE_MEM_H
#define HT_TRAIN_PIPE_MEM_H

#include <stdint.h>

#include "config/config.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "plan/partition.h"

struct ht_metrics;

/* D counts pipeline ranks, or after ht_pipe_mem_regroup the schedule's ranks (groups of
 * pipeline ranks running one stream): each [D] array is per schedule rank then. */
typedef struct ht_pipe_mem {
    int D, L, world;
    int mode;           /* HT_PIPE_MEM_AUTO, _NONE, _ALL */
    double *limit;      /* [D] bytes: the smallest over the pipeline rank's replicas (a
                           group's: its tightest member's in the last decision) */
    int *dev_rank;      /* [D] the world rank whose device sets it */
    char (*name)[128];  /* [world] device names */
    int from_cfg;       /* the limit is device.memory_mb (else the devices' reports) */
    uint8_t *layers;    /* [D * L] layers each recomputes */
    uint8_t *any;       /* [D] 1 where it recomputes any (ht_pipe_add_recompute's input) */
    int *max_inflight;  /* [D] the most micro-batches each fits in flight (hepipe's limits) */
    ht_mem_plan *plan;  /* [D] (a group's: its tightest member's) */
    char (*chunks)[64]; /* [D] its layer ranges as text, for the log */
    /* after ht_pipe_mem_regroup: schedule rank q on pipeline ranks [gfirst[q], gfirst[q+1]),
     * pipeline rank r with its own limit, device and samples per micro-batch */
    int *gfirst;        /* [D + 1], NULL: no groups */
    double *rlimit;
    int *rdev, *rcnt;
} ht_pipe_mem;

enum { HT_PIPE_MEM_AUTO, HT_PIPE_MEM_NONE, HT_PIPE_MEM_ALL };

/* Gathers every rank's limit and device name (collective: all ranks call it). */
void ht_pipe_mem_init(ht_pipe_mem *pm, const ht_config *cfg, const ht_devinfo *dev, int world,
                      int D, int L);
void ht_pipe_mem_free(ht_pipe_mem *pm);

/* Replicated stages (pipe.replicate): from here on the decision is per schedule rank q
 * (Q of them), which runs on pipeline ranks [first[q], first[q + 1]), pipeline rank p on
 * cnt[p] samples of each micro-batch. Each member is planned with its own limit and samples;
 * the group recomputes the union of their layers (one stream) and holds in flight the fewest
 * any of them fits. */
void ht_pipe_mem_regroup(ht_pipe_mem *pm, int Q, const int *first, const int *cnt);

/* Per pipeline rank limits for ht_part_hetero's mem_limit ([D]), or NULL when the partition
 * should not plan memory (recompute "none" / "all" without device.memory_mb). */
const double *ht_pipe_mem_part_limits(const ht_pipe_mem *pm);

/* The decision for a schedule of `kind` with D ranks x v chunks (S = D v stages, bounds[0..S]),
 * mb samples per micro-batch, N micro-batches, slots[q] in flight on pipeline rank q by the
 * schedule (flexible: hepipe, which may hold as few as 1; slots[q] is then what it would like),
 * opt_states optimizer floats per parameter, weight_versions (2: 2bw), fwd [D * L] seconds per
 * sample of each layer on each pipeline rank (NULL: from FLOPs). "auto": HT_EINPUT naming the
 * key, the device and the shortfall when a rank fits in no way ("where" is the config's
 * source); "none": a warning where the prediction exceeds the limit; "all": every layer. */
int ht_pipe_mem_decide(ht_pipe_mem *pm, const ht_model *m, int kind, int v, const int *bounds,
                       int mb, int N, const int *slots, int flexible, int opt_states,
                       int weight_versions, const double *fwd, const char *where);

/* After the run (collective): each rank's device memory as allocated (ht_dev_mem: the peak,
 * and the tiled GEMM's packing workspace within it, which no model here covers: it follows the
 * GEMM path's panel sizes) against the executor's predicted allocation (ht_mem_executor, from
 * the layer description; `built` is the batch the model was built for) and the stage plan
 * the recompute decision used (ht_mem_rank). Rank 0 logs a line per rank with the error of the
 * prediction against the peak less the GEMM workspace, and writes "pipe_memory_measured"
 * records. nslot: the executor's slots on this rank. */
int ht_pipe_mem_validate(ht_pipe_mem *pm, const ht_model *m, ht_dev *dev, int kind, int v,
                         const int *bounds, int built, int mb, int prank, int nslot,
                         int opt_states, int weight_versions, struct ht_metrics *metrics);

/* Rank 0's log lines and "pipe_memory" metrics records (m may be NULL). HT_OK or the metrics
 * error. */
int ht_pipe_mem_report(const ht_pipe_mem *pm, const ht_model *m, struct ht_metrics *metrics);

#endif
