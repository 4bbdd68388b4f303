/* The ranks of a training job: who runs where (the start-up table), the split of the global
 * batch into per-rank shares (equal, explicit, by measured speed, rebalanced online), common
 * parameters at the start, per-rank and end-of-run metrics records, the trace of every rank.
 * Summing the gradients is the bsp sync policy's (src/sync/bsp.c). Internal to src/train. */
#ifndef HT_TRAIN_RANKS_H
#define HT_TRAIN_RANKS_H

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
    double slowdown; /* this rank's emulated slowdown in effect (1 = none) */
    const ht_config *cfg; /* the job's, as at ht_cluster_init (start-up ranks) */
    int ring;        /* 1: ht_comm_ring_allreduce, 0: MPI_Allreduce (for the table) */
    /* per-rank identity, gathered at start: world * HT_HOST_TEXT, world * HT_DEVNAME_TEXT */
    char *hosts, *devnames;
    ht_sync_stats mark; /* the sync counters at the last "rank" record */
    /* online rebalancing (cluster.split "speed" with cluster.rebalance): compute_s at the last
     * rebalance, so that compute_s - rb_mark is the last step's compute seconds, emulated
     * slowdown included (it stands for a slower device) */
    int rebalance;
    ht_rebalancer rb;
    double rb_mark;
    /* cluster.exclude_slow (issue 14): ranks the speed split left out leave the job. The
     * ranks above (rank, world, shares) are then those of the sub-communicator that trains;
     * the start-up ranks are kept for reporting */
    int exclude_slow;
    int nworld;       /* ranks at start (the MPI world) */
    int *wrank;       /* [world] start-up rank of each current rank (identity until detached) */
    char *excluded;   /* [nworld] 1: left the job (ht_cluster_detach) */
    int excluding;    /* set by the speed split: some rank will be excluded */
    double *model_sp, *model_fx; /* [nworld] the speed split's measured cost models (or NULL) */
    double t_all, t_kept;        /* its predicted step times with everyone and as split */
    double *slow;                /* [nworld] every rank's emulated slowdown (announce) */
} ht_cluster;

/* Rank and world from src/comm; checks the per-rank lists against the world size (exit 2
 * on mismatch is the caller's: returns HT_EINPUT); explicit or equal shares. */
int ht_cluster_init(ht_cluster *c, const ht_config *cfg);
/* Every rank's cost model, sp[world] samples/s beyond fx[world] seconds per step, from each
 * rank's own `speed` and `fixed` (collective). */
void ht_cluster_gather_model(const ht_cluster *c, double speed, double fixed, double *sp,
                             double *fx);
/* Takes the plan's split by speed (plan/job.h: every rank computes the same from the
 * gathered models sp, fx), with its predicted step times with every rank and with those
 * kept; ranks left out (share 0) run for synchronisation only, or leave the job
 * (cluster.exclude_slow); the rebalancer starts from the model. */
int ht_cluster_adopt_split(ht_cluster *c, const int *shares, const double *sp, const double *fx,
                           double t_all, double t_kept);
/* Gathers host and device names; with several ranks, rank 0 logs the rank -> host -> device
 * -> share table (call it after any split by speed: it shows the shares used). Names this
 * rank's trace track (call it after ht_cluster_trace_start). */
void ht_cluster_announce(ht_cluster *c, const char *devname);
/* Collective, after ht_cluster_announce: with cluster.exclude_slow, the ranks the speed split
 * left out (share 0, never rank 0) leave the job: src/comm goes on among the others, this
 * cluster is renumbered to them (the rebalancer too), and rank 0 writes one "excluded"
 * metrics record per left-out rank. *left = 1 on a rank that left (it must do nothing
 * collective any more: return from the engine), else 0. Returns HT_OK or the metrics
 * write's / the rebalancer's error. */
int ht_cluster_detach(ht_cluster *c, ht_metrics *metrics, int *left);
void ht_cluster_free(ht_cluster *c);

/* Makes every rank start from rank 0's parameters (identical even across device kinds). */
void ht_cluster_bcast_params(ht_cluster *c, ht_model *m);
/* Collective, after step `step` (every rank; now: this rank's sync counters): with
 * rebalancing on, gathers every rank's compute seconds of the step and feeds the same numbers to the rebalancer on every rank, so all
 * adopt the same new shares for the next step; rank 0 logs each change and writes a "rebalance"
 * metrics record. Returns HT_OK or the error of the metrics write / the rebalancer. */
int ht_cluster_rebalance(ht_cluster *c, ht_metrics *metrics, int64_t step,
                         const ht_sync_stats *now);
/* Collective: starts trace recording on every rank from a common time origin (a barrier). */
void ht_cluster_trace_start(ht_cluster *c);
/* Collective: rank 0 gathers every rank's trace events (src/io/trace) and writes one Chrome
 * trace file to path, atomically. HT_OK, or HT_ERUNTIME (on rank 0) when it cannot. */
int ht_cluster_trace_write(ht_cluster *c, const char *path);
/* Collective over all ranks: gathers every rank's end-of-run stats (`mine`) and rank 0 writes
 * one "sync" record per rank of layout L to metrics (NULL: none). */
int ht_cluster_sync_records(ht_cluster *c, const ht_sync_layout *L, const ht_sync_stats *mine,
                            ht_metrics *metrics);
/* Sums per-rank loss sums and correct counts (double, in place, n values). */
void ht_cluster_sum(double *v, int n);
/* Collective (every rank, same steps): rank 0 writes one "rank" metrics record per rank with
 * the mean per-step compute/wait/comm seconds since the last call, from each rank's sync
 * counters `now`. */
int ht_cluster_record(ht_cluster *c, ht_metrics *metrics, int64_t step, const ht_sync_stats *now);

#endif
