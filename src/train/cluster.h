/* Synchronous data parallelism for the trainer: one OpenCL device per rank, the global batch
 * split into per-rank shares, gradients summed over ranks on the host (our ring or
 * MPI_Allreduce) between backward and the optimizer step. Internal to src/train. */
#ifndef HT_TRAIN_CLUSTER_H
#define HT_TRAIN_CLUSTER_H

#include <stdint.h>

#include "config/config.h"
#include "io/metrics.h"
#include "nn/model.h"
#include "plan/plan.h"
#include "sync/sync.h"

#define HT_HOST_TEXT 64
#define HT_DEVNAME_TEXT 96

typedef struct ht_cluster {
    int rank, world;
    int B;           /* global batch */
    int *shares;     /* [world] samples per rank, sum B */
    int lo, hi;      /* this rank's slice [lo, hi) of the global batch */
    double slowdown; /* this rank's emulated slowdown (1 = none) */
    int ring;        /* 1: ht_comm_ring_allreduce, 0: MPI_Allreduce */
    float *host;     /* nparams + 1 floats: gradients, then the stop flag */
    size_t n;
    /* per-rank identity, gathered at start: world * HT_HOST_TEXT, world * HT_DEVNAME_TEXT */
    char *hosts, *devnames;
    /* seconds since the last record: compute (+ emulated idle), wait, communication (with
     * cluster.overlap: what is left after backward), communication hidden behind backward */
    double t_compute, t_wait, t_comm, t_hidden;
    double sum_compute, sum_wait, sum_comm; /* the same over the whole run */
    int64_t sum_steps, samples;             /* samples: this rank's, over the whole run */
    struct ht_reduce *red; /* bucketed reduction state (train/reduce.c), made on first use */
    int64_t nsteps;
    /* online rebalancing (cluster.split "speed" with cluster.rebalance): t_compute at the last
     * rebalance, so that t_compute - rb_mark is the last step's compute seconds, emulated
     * slowdown included (it stands for a slower device) */
    int rebalance;
    ht_rebalancer rb;
    double rb_mark;
} ht_cluster;

/* Rank and world from src/comm; checks the per-rank lists against the world size (exit 2
 * on mismatch is the caller's: returns HT_EINPUT); explicit or equal shares. */
int ht_cluster_init(ht_cluster *c, const ht_config *cfg);
/* Re-splits the batch under each rank's cost model (gathered here: `speed` samples/s beyond a
 * `fixed` cost in seconds per step) with src/plan, so that the slowest rank's predicted step
 * is shortest; every rank computes the same split, and the rebalancer starts from the model. */
int ht_cluster_split_by_model(ht_cluster *c, double speed, double fixed);
/* Gathers host and device names; with several ranks, rank 0 logs the rank -> host -> device
 * -> share table (call it after any split by speed: it shows the shares used). Names this
 * rank's trace track (call it after ht_cluster_trace_start). */
void ht_cluster_announce(ht_cluster *c, const char *devname);
void ht_cluster_free(ht_cluster *c);

/* Makes every rank start from rank 0's parameters (identical even across device kinds). */
void ht_cluster_bcast_params(ht_cluster *c, ht_model *m);
/* After backward on this rank's share: emulated slowdown idle for `compute_s`, then sums the
 * gradients over ranks into m->grads; *stop becomes 1 on every rank when any rank's was set. */
void ht_cluster_reduce(ht_cluster *c, ht_model *m, double compute_s, int *stop);
/* Collective, after step `step` (every rank): with rebalancing on, gathers every rank's
 * compute seconds of the step and feeds the same numbers to the rebalancer on every rank, so all
 * adopt the same new shares for the next step; rank 0 logs each change and writes a "rebalance"
 * metrics record. Returns HT_OK or the error of the metrics write / the rebalancer. */
int ht_cluster_rebalance(ht_cluster *c, ht_metrics *metrics, int64_t step);
/* Collective: starts trace recording on every rank from a common time origin (a barrier). */
void ht_cluster_trace_start(ht_cluster *c);
/* Collective: rank 0 gathers every rank's trace events (src/io/trace) and writes one Chrome
 * trace file to path, atomically. HT_OK, or HT_ERUNTIME (on rank 0) when it cannot. */
int ht_cluster_trace_write(ht_cluster *c, const char *path);
/* Collective: every rank's totals over the run as src/sync's end-of-run stats; on rank 0 one
 * "sync" metrics record per rank, as the other policies write. */
int ht_cluster_final_records(ht_cluster *c, ht_metrics *metrics);
/* Collective over all ranks: gathers every rank's end-of-run stats (`mine`) and rank 0 writes
 * one "sync" record per rank of layout L to metrics (NULL: none). */
int ht_cluster_sync_records(ht_cluster *c, const ht_sync_layout *L, const ht_sync_stats *mine,
                            ht_metrics *metrics);
/* Sums per-rank loss sums and correct counts (double, in place, n values). */
void ht_cluster_sum(double *v, int n);
/* Collective (every rank, same steps): rank 0 writes one "rank" metrics record per rank with
 * the mean per-step compute/wait/comm seconds since the last call; the counters restart. */
int ht_cluster_record(ht_cluster *c, ht_metrics *metrics, int64_t step);

#endif
