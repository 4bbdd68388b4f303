/* Memory-driven recomputation and in-flight limits for the pipeline engine (issue 11:
 * HePipe's dynamic recomputation by memory prediction). Every rank's memory limit
 * (device.memory_mb, or its device's reported global memory) is gathered; for every pipeline
 * rank the memory model (plan/partition.h) predicts the peak of its stages with the
 * micro-batches its schedule holds in flight, and pipe.recompute = "auto" recomputes only
 * where that exceeds the limit (ht_mem_plan_rank: which layers; hepipe may hold fewer
 * micro-batches instead when even recomputing everything is not enough). The decision is
 * the plan's (plan/mem_decide.h, ht_plan_job), taken alike on every rank from the same
 * gathered figures; here it is logged on rank 0 (predicted
 * bytes against the limit, the recomputed layers) and written as "pipe_memory" metrics.
 *
 * What it bounds is the prediction of a stage's own memory. A rank that holds only its stages
 * (train/pipe_local.c) allocates about that; one that keeps the whole model (a tied head,
 * pipe.rebalance, ...) also holds every layer's parameters, optimizer state and one
 * activation set for a micro-batch, which the stage plan leaves out; ht_pipe_mem_validate
 * measures what is allocated against the executor's prediction for either. */
#ifndef HT_TRAIN_PIPE_MEM_H
#define HT_TRAIN_PIPE_MEM_H

#include <stdint.h>

#include "config/config.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "plan/mem_decide.h"
#include "plan/partition.h"

struct ht_metrics;

/* The device side of the plan's memory decision (plan/mem_decide.h): every pipeline rank's
 * limit and device, and the decision the plan took, which the engine executes. */
typedef struct ht_pipe_mem {
    int P, world;
    ht_recompute mode;  /* pipe.recompute */
    double *limit;      /* [P] bytes: the smallest over the pipeline rank's replicas */
    int *dev_rank;      /* [P] the world rank whose device sets it */
    char (*name)[128];  /* [world] device names */
    int from_cfg;       /* the limit is device.memory_mb (else the devices' reports) */
    ht_plan_mem dec;    /* the plan's decision, per schedule rank */
    int *inflight;      /* hepipe under "auto": the plan's in-flight limits, or NULL */
    /* 1: this rank holds only its stages (train/pipe_local.c): ht_pipe_mem_validate predicts
     * with ht_mem_executor_local, else with the whole model as built (ht_mem_executor) */
    int local;
    int cal, cal1; /* every layer timed at start-up at the micro-batch, at 1 sample
                      (ht_plan_needs: the GEMM packing grows to the whole model's there) */
} ht_pipe_mem;

/* Gathers every rank's limit and device name (collective: all ranks call it). */
void ht_pipe_mem_init(ht_pipe_mem *pm, const ht_config *cfg, const ht_devinfo *dev, int world,
                      int P);
void ht_pipe_mem_free(ht_pipe_mem *pm);

/* Per pipeline rank limits for ht_part_hetero's mem_limit ([P]), or NULL when the partition
 * should not plan memory (recompute "none" / "all" without device.memory_mb). */
const double *ht_pipe_mem_part_limits(const ht_pipe_mem *pm);

/* The plan's decision (and hepipe's in-flight limits) moved into pm. */
void ht_pipe_mem_adopt(ht_pipe_mem *pm, ht_plan_mem *dec, int **inflight);

/* After the run (collective): each rank's device memory as allocated (ht_dev_mem: the peak,
 * and the tiled GEMM's packing workspace within it) against the executor's predicted
 * allocation (ht_mem_executor, from the layer description; `built` is the batch the model was
 * built for; the packing predicted apart, plan/gemm_ws.h) and the stage plan the recompute
 * decision used (ht_mem_rank). Rank 0 logs a line per rank with the error of the prediction
 * against the peak less the GEMM workspace and of the whole prediction against the peak,
 * and writes "pipe_memory_measured" records. nslot: the executor's slots on this rank. */
int ht_pipe_mem_validate(ht_pipe_mem *pm, const ht_model *m, ht_dev *dev, int kind, int v,
                         const int *bounds, int built, int mb, int prank, int nslot,
                         int opt_states, int weight_versions, struct ht_metrics *metrics);

/* Rank 0's log lines and "pipe_memory" metrics records (m may be NULL). HT_OK or the metrics
 * error. */
int ht_pipe_mem_report(const ht_pipe_mem *pm, const ht_model *m, struct ht_metrics *metrics);

#endif
