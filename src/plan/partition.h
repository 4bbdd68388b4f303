/* Pipeline planning (pure: no MPI, no OpenCL, no I/O but the printed table, no globals): how
 * much device memory a pipeline stage needs (weights, gradients, optimizer state, activations
 * of the micro-batches in flight, workspace), which layers to recompute to fit a limit, and how
 * to cut the model's layers into stages: by layer count ("uniform"), by measured per-layer time
 * ("balanced"), or by HePipe's two-level partition over hosts and their devices ("hetero").
 *
 * Units: bytes and seconds, as doubles. A stage is a contiguous layer range [lo, hi). Layer l
 * reads boundary activation l and writes boundary l + 1 (boundary 0 is the model's input,
 * boundary L the logits). Seed: HePipe (Lizhi Ma, Dan Liu), see shared/DESIGN.md. */
#ifndef HT_PLAN_PARTITION_H
#define HT_PLAN_PARTITION_H

#include <stdint.h>
#include <stdio.h>

struct ht_model;

/* ---------------------------------------------------------------- costs */

/* Per-layer times from FLOPs, a stand-in for measured ones (a hetprof profile's or a
 * start-up calibration's): fwd[r*L + l] = forward FLOPs per sample of layer l / flops_per_s[r],
 * bwd likewise (layer 0 without its input gradient). flops_per_s[r] > 0: e.g. a device's
 * GFLOP/s over its emulated slowdown. */
void ht_part_times_from_model(const struct ht_model *m, int R, const double *flops_per_s,
                              double *fwd, double *bwd);

/* ---------------------------------------------------------------- memory model */

/* What memory each layer of a model needs, device-independent. */
typedef struct ht_mem_desc {
    int L;              /* layers */
    double in_bytes;    /* per sample: the model's input (boundary 0) */
    double *out_bytes;  /* [L] per sample: layer l's output, boundary l + 1 (its gradient is as
                           large; it is what a stage boundary after layer l sends) */
    double *keep_bytes; /* [L] per sample kept from a micro-batch's FWD to its BWD: the output
                           (unless it aliases the input) and the layer's saved state */
    double *param_bytes; /* [L] parameters */
    double *state_bytes; /* [L] parameters + their gradients + optimizer state */
    double *work_bytes;  /* [L] workspace per sample (shared by the stage's layers: the max) */
    double *save_bytes;  /* [L] per sample: the layer's saved state alone */
    double *arena_bytes; /* [L] per sample: its output's room in an activation arena (0 when
                            the output aliases the input, as an in-place activation's does) */
    int tied_layer;      /* a tied head's layer (its weight is layer 0's wte), or 0: none */
    double tied_state;   /* wte's parameters + gradient + optimizer state: what a stage that
                            holds the tied head but not layer 0 holds besides (its copy,
                            src/train/pipe_tied.h) */
    double tied_param;   /* wte's parameters alone (a second weight version's copy) */
    int rows;            /* loss rows per sample (labels, losses, flags: 3 x 4 bytes each) */
    double *gemm_bytes;  /* [L] the tiled GEMM's packing workspace for the layer's largest
                            product at the description's mb (not per sample; plan/gemm_ws.h) */
    double gemm_floor;   /* what that workspace reaches whatever a rank's stages: a start-up
                            calibration that times every layer (ht_mem_desc_calibrated), or 0 */
} ht_mem_desc;

/* Fills d from a model (built with or without a device: only the description is read) for
 * micro-batches of mb samples (the workspace is taken at that size) and opt_states optimizer
 * floats per parameter (0: plain SGD, 1: momentum, 2: AdamW). Floats and int32 tokens are 4
 * bytes. Free with ht_mem_desc_free. */
void ht_mem_desc_from_model(ht_mem_desc *d, const struct ht_model *m, int mb, int opt_states);
void ht_mem_desc_free(ht_mem_desc *d);
/* Every rank times every layer of the model at `samples` at start-up (hepipe's order, the
 * hetero partition: train/pipe_calib.c), so the packing workspace grows to the whole
 * model's largest product there: sets d->gemm_floor (samples 0: none). */
void ht_mem_desc_calibrated(ht_mem_desc *d, const struct ht_model *m, int samples);

/* A rank's predicted memory, by part: what the executor allocates on a rank that holds only
 * its stages (mem_local.c; the same model as ht_mem_executor_local at B = mb). */
typedef struct ht_mem_use {
    double state;  /* weights + gradients + optimizer state of the layers held (a tied head's
                      copy of wte included), and 2BW's second weight version and gradients */
    double acts;   /* slots x one slot: the largest chunk's arena (stage input, outputs, the
                      model input a LOAD writes), its gradient and saved state, or on a
                      recomputing rank what the slot keeps; labels, losses, flags */
    double live;   /* a recomputing rank's own buffers, where one micro-batch is rebuilt for
                      its BWD (a plain rank's are its first slot, in acts) */
    double work;   /* mb x the largest per-sample workspace of the chunks' layers, and the
                      tiled GEMM's packing workspace of their largest product */
    double total;
} ht_mem_use;

/* Memory of a rank running stage [lo, hi) on micro-batches of mb samples with `slots` of them
 * in flight (1F1B: min(N, D - s) at stage s; GPipe: N; the checker's peak_inflight for any
 * schedule), weight_versions copies of the weights (2: PipeDream-2BW), recomputing the
 * layers l with rc[l] != 0 (rc may be NULL: none). A recomputed layer keeps nothing per slot
 * (its input is the kept output of the layer before it, or the stage input) and is rebuilt
 * for one micro-batch at a time before its BWD: it costs its forward once more per
 * micro-batch. Returns u->total (u may be NULL). */
double ht_mem_stage(const ht_mem_desc *d, int lo, int hi, int mb, int slots, int weight_versions,
                    const uint8_t *rc, ht_mem_use *u);

/* A rank holding several chunks (interleaved, Chimera: nchunk ranges lo[c]..hi[c]) and `slots`
 * slots in all (the checker's peak for that rank): weights of every chunk, slots sized for
 * the largest chunk, as the executor allocates them (ht_mem_executor_local at B = mb; linear
 * in slots, slots = 0 giving what does not grow with them). rc as above over the model's
 * layers (NULL: none). Returns u->total. */
double ht_mem_rank(const ht_mem_desc *d, int nchunk, const int *lo, const int *hi, int mb,
                   int slots, int weight_versions, const uint8_t *rc, ht_mem_use *u);

/* What the pipeline executor (src/train/pipe_exec.c) allocates on a rank today, predicted from the
 * description alone, to validate the model above against the device memory really held:
 *   model: the model as built on every rank, for B samples (one micro-batch: the pipeline
 *          engine builds it so; the global batch before 2026-11-26): every layer's weights,
 *          gradients and optimizer state; the activation arena (the input and every output
 *          that does not alias), its gradient of the same size, the saved state, the largest
 *          workspace (dB: the description made with mb = B), and labels, losses and flags of
 *          B x rows; it is the executor's first slot;
 *   slots: each further slot (nslot - 1 of them) for one micro-batch of mb samples of the
 *          rank's largest chunk [lo[c], hi[c]): its arena (the stage input, its outputs, and
 *          the model's input for a LOAD after the first stage), the arena's gradient and the
 *          saved state; a recomputing rank (rc non-NULL with a layer of its chunks set)
 *          allocates all nslot slots, each keeping only its inputs and the kept layers'
 *          outputs and state, and runs its stages in the model's own buffers...
 *   work:  ...or, where those cannot hold its largest chunk, in one work set of its own
 *          (arena, its gradient, saved state);
 *   versions: 2BW's second weight version and gradient buffer (weight_versions 2);
 *   gemm:  the tiled GEMM's packing workspace (the chunks' largest product at mb).
 * On a rank that holds only its chunks this is ht_mem_rank's model; here the model is whole.
 * Bytes; total in *u. */
typedef struct ht_mem_exec_use {
    double model, slots, work, versions;
    double gemm; /* the tiled GEMM's packing workspace: the chunks' largest product at mb */
    double total;
} ht_mem_exec_use;
double ht_mem_executor(const ht_mem_desc *d, const ht_mem_desc *dB, int B, int mb, int rows,
                       int nchunk, const int *lo, const int *hi, int nslot, int weight_versions,
                       const uint8_t *rc, ht_mem_exec_use *u);
/* The same on a rank that holds only its chunks (mem_local.c; issue 24): model is the
 * weights, gradients and optimizer state of the chunks' layers (a layer in two chunks, as on
 * Chimera's middle rank, once), the model's own buffers sized for the largest chunk at B
 * samples (arena, its gradient, saved state, workspace) and labels, losses and flags of
 * B x rows; versions is 2BW's second copy of those weights and gradients; slots as above; no
 * work set (the own buffers hold the largest chunk). */
double ht_mem_executor_local(const ht_mem_desc *d, const ht_mem_desc *dB, int B, int mb, int rows,
                             int nchunk, const int *lo, const int *hi, int nslot,
                             int weight_versions, const uint8_t *rc, ht_mem_exec_use *u);

/* Per sample, chunk [lo, hi)'s arena (its input, its outputs, after the first stage the model
 * input a LOAD writes), saved state, and what a slot keeps with the layers rc recomputes. */
void ht_mem_chunk(const ht_mem_desc *d, int lo, int hi, const uint8_t *rc, double *arena,
                  double *save, double *keep);
/* The packing workspace of the chunks' largest product (bytes, at d's mb). */
double ht_mem_gemm(const ht_mem_desc *d, int nchunk, const int *lo, const int *hi);

/* The most micro-batches in flight that stage [lo, hi) fits in `limit` bytes with the layers
 * rc recomputed (NULL: none): the largest n with ht_mem_stage(.., n, ..) <= limit, capped at
 * cap (e.g. N); 0 when not even one fits; cap when limit <= 0 (no limit). A rank's bound for
 * ht_pipe_params.max_inflight (hepipe). */
int ht_mem_max_slots(const ht_mem_desc *d, int lo, int hi, int mb, int weight_versions,
                     const uint8_t *rc, double limit, int cap);

/* ht_mem_plan_rank (below, the one recompute chooser) for one stage [lo, hi) without fused
 * pairs, `slots` fixed: writes rc[lo .. hi), *extra_s the recompute seconds per micro-batch
 * and *u (may be NULL) as its plan's; returns 1 when the stage fits `limit` bytes. */
int ht_mem_choose_recompute(const ht_mem_desc *d, const double *fwd, int lo, int hi, int mb,
                            int slots, int weight_versions, double limit, uint8_t *rc,
                            double *extra_s, ht_mem_use *u);

/* What one pipeline rank recomputes and holds in flight under its memory limit (mem_rank.c). */
typedef struct ht_mem_plan {
    int fits;       /* 1: the rank fits its limit (or has none) with rc and `slots` */
    int slots;      /* micro-batches in flight planned: those asked for, or fewer (down to
                       min_slots) when even recomputing every layer does not fit them */
    int max_slots;  /* the most that fit with rc, at most cap (>= slots when fits) */
    int nrc;        /* layers recomputed */
    double extra_s; /* recompute seconds per micro-batch: mb x their forward seconds */
    ht_mem_use use; /* at `slots` with rc; when it does not fit, the least a choice needs
                       (nothing or everything recomputed, min_slots in flight) */
} ht_mem_plan;

/* The memory decision of a rank holding chunks [lo[c], hi[c]) (c < nchunk; one for a plain
 * pipeline stage) with micro-batches of mb samples, `slots` of them in flight by its
 * schedule (the checker's peak_inflight), weight_versions copies of the weights, `limit`
 * bytes (<= 0: none): with no recomputation when that fits (a job that fits never
 * recomputes); else the layers freeing the most bytes per second of recompute (keep_bytes[l]
 * / fwd[l], fwd [L] seconds per sample on this rank, NULL: bytes alone) added one at a time
 * until it fits, then any that is no longer needed dropped; a layer fused[l] != 0 runs fused
 * inside layer l - 1 and goes with it (fused NULL: none). When even every layer recomputed
 * does not fit `slots`, the same for slots - 1 .. min_slots (a schedule that can hold fewer,
 * hepipe; min_slots = slots for one that cannot). Writes rc over the chunks' layers (others
 * untouched) and *out; returns out->fits. */
int ht_mem_plan_rank(const ht_mem_desc *d, const double *fwd, const uint8_t *fused, int nchunk,
                     const int *lo, const int *hi, int mb, int slots, int min_slots, int cap,
                     int weight_versions, double limit, uint8_t *rc, ht_mem_plan *out);

/* ---------------------------------------------------------------- simple partitions */

/* D stages of L layers by count: bounds[0] = 0 < bounds[1] < ... < bounds[D] = L, stage s is
 * [bounds[s], bounds[s+1]); sizes differ by at most one and the larger stages come first.
 * HT_EINPUT when D < 1 or D > L (every stage needs a layer). */
int ht_part_uniform(int L, int D, int *bounds);

/* D stages minimising the largest stage's summed t[l] (seconds per layer, >= 0, finite):
 * exact (dynamic program). Among equally good splits: the one whose earlier stages are as
 * short as possible (the first stages hold the most in flight). HT_EINPUT as above, or for a
 * negative or non-finite time. */
int ht_part_balanced(int L, int D, const double *t, int *bounds);

/* ---------------------------------------------------------------- hetero (HePipe) */

/* How many micro-batches a stage holds in flight. */
enum {
    HT_PART_SLOTS_1F1B, /* min(N, D - s) at stage s: 1F1B, hepipe, 2bw */
    HT_PART_SLOTS_ALL,  /* N: GPipe */
};

#define HT_PART_MAX_RANKS 64
#define HT_PART_MAX_HOST_RANKS 10 /* the device-level program runs over subsets of a host */
#define HT_PART_MAX_REP 8

typedef struct ht_part_input {
    const ht_mem_desc *model;
    int R;                    /* ranks, 1 .. HT_PART_MAX_RANKS */
    const double *fwd, *bwd;  /* [R*L] seconds per sample of layer l on rank r: [r*L + l] */
    const double *mem_limit;  /* [R] bytes (<= 0: no limit); NULL: none */
    const int *host;          /* [R] host id of each rank (ranks with equal ids share a host;
                                 hosts are ordered by their lowest rank); NULL: one host */
    const double *lat, *bw;   /* [R*R] seconds and bytes/s between ranks a and b ([a*R + b]);
                                 NULL: the defaults below by host */
    double lat_intra, bw_intra; /* default link within a host (bw <= 0: free) */
    double lat_inter, bw_inter; /* default link between hosts (bw <= 0: free) */
    double overhead;          /* seconds per stage and micro-batch that do not grow with its
                                 samples (kernel launches, synchronisation), >= 0 */
    const double *fixed;      /* [R*L] seconds per micro-batch of layer l on rank r (forward +
                                 backward) that do not grow with its samples, >= 0: what a
                                 replica computing a few samples still pays; NULL: none */
    int B;                    /* samples per step through the pipeline, >= 1 */
    int N;                    /* micro-batches, dividing B; 0: the best divisor of B */
    int slots_rule;           /* HT_PART_SLOTS_1F1B or HT_PART_SLOTS_ALL */
    int weight_versions;      /* 1, or 2 (PipeDream-2BW) */
    int allow_recompute;      /* may recompute layers to fit memory */
    int allow_replicas;       /* may run a stage on several devices of a host, each
                                 micro-batch split between them by speed */
    int in_rank_order;        /* every rank runs a stage, stages in rank order: stage s on
                                 rank s, or with allow_replicas on a run of adjacent ranks
                                 (the placements the executor runs: world rank = replica x
                                 D + pipeline rank); needs each host's ranks contiguous */
    const uint8_t *can_cut;   /* [L] 1 where a stage may start (layer 0 always may); NULL:
                                 anywhere (plan/bounds.h: not at an activation fused with the
                                 layer before it) */
} ht_part_input;

typedef struct ht_part_stage {
    int lo, hi;   /* layers [lo, hi) */
    int host;     /* host index (0 = the host of rank 0, ...) */
    int nrep;     /* devices running it: 1, or more when replicated */
    int rank[HT_PART_MAX_REP];  /* their ranks */
    int share[HT_PART_MAX_REP]; /* samples of each micro-batch each one computes */
    int slots;    /* micro-batches in flight on it */
    double time;  /* seconds per micro-batch, FWD + BWD + recompute + boundary transfers +
                     overhead, of its slowest replica (+ its replicas' gradient reduction over
                     the N micro-batches) */
} ht_part_stage;

typedef struct ht_partition {
    int L, R, D, N, mb; /* layers, ranks, stages, micro-batches, samples per micro-batch */
    ht_part_stage stage[HT_PART_MAX_RANKS]; /* [D] in pipeline order */
    int stage_of[HT_PART_MAX_RANKS];        /* [R] stage of each rank, -1 when idle */
    uint8_t *recompute;   /* [R*L] 1: rank r recomputes layer l */
    ht_mem_use mem[HT_PART_MAX_RANKS];      /* [R] predicted peak per rank (zero when idle) */
    double limit[HT_PART_MAX_RANKS];        /* [R] the limits (0: none) */
    double bottleneck;    /* the slowest stage's time per micro-batch */
    double step_time;     /* predicted: sum of stage times + (N - 1) x the slowest */
} ht_partition;

/* HePipe's two-level partition. Level 1 cuts the layers into contiguous groups, one per host
 * in host order (a host may get none), so that the only traffic between hosts is the boundary
 * activations (and their gradients) where one host's group ends and the next begins; level 2
 * cuts each host's group into stages over subsets of its devices (any order, a device may
 * stay idle, a stage may have replicas) by a dynamic program. Both minimise the slowest
 * stage's time per micro-batch (compute at its rank's speed + recompute + the transfers of
 * both its boundaries + overhead) subject to every rank's memory (ht_mem_stage, with
 * recomputation chosen by ht_mem_choose_recompute when allowed): among all partitions, the
 * one with the smallest largest memory shortfall first, then the fastest. Links: a stage
 * boundary inside a host is charged the host's slowest link, one between hosts the slowest
 * link between the two hosts' ranks (conservative: the program does not track which device
 * runs the neighbouring stage). Level 1 sizes memory for the slots of a pipeline in which
 * every rank of the later hosts runs a stage (an upper bound); the result is then evaluated
 * with its true stage count. With N = 0 it tries every divisor of B and keeps the smallest
 * predicted step time (fewest micro-batches on ties).
 * HT_OK with *p filled (free with ht_partition_free), or HT_EINPUT with ht_errmsg() saying
 * what is wrong: bad input (naming the field), or memory: "no partition fits: rank 2 (host
 * 0) needs 1.53 GB for layers 4..7 with 2 slots of 8 samples, its limit is 1.00 GB: short by
 * 0.53 GB" and what to change. *p needs no free on error. */
int ht_part_hetero(const ht_part_input *in, ht_partition *p);
void ht_partition_free(ht_partition *p);

/* Glue for the executor and hepipe (stages in pipeline order, s = 0 .. D-1): bounds[0..D]
 * (stage s runs layers [bounds[s], bounds[s+1])); stage_time[s] its predicted seconds per
 * micro-batch (hepipe's relative stage times); max_inflight[s] the most micro-batches its
 * ranks fit in memory with their recomputation (ht_mem_max_slots, the smallest over its
 * replicas, at most N): hepipe's slot limits. Any output may be NULL. */
void ht_partition_export(const ht_partition *p, const ht_mem_desc *d, int weight_versions,
                         int *bounds, double *stage_time, int *max_inflight);

/* A layer's seconds at mb samples (t) and at 1 (t1) as a + b n: b per sample into *per, a
 * (ht_part_input.fixed) returned. Noise can put t1 off the line: b and a are kept >= 0. */
double ht_part_affine(double t, double t1, int mb, double *per);

/* A partition in rank order (ht_part_input.in_rank_order, every rank in a stage) as the
 * executor's groups (train/pipe_exec.h ht_pipe_place): stage q on ranks [first[q], first[q + 1]),
 * rank r computing samples [off[r], off[r] + cnt[r]) of every micro-batch (its share).
 * first: [D + 1]; off, cnt: [R]. */
void ht_partition_groups(const ht_partition *p, int *first, int *off, int *cnt);

/* The partition as a table: one row per stage (layers, host, ranks and shares, slots, time
 * per micro-batch, recomputed layers, predicted activation memory (acts + live + work) and
 * total memory / limit), then the step time. */
void ht_partition_print(FILE *f, const ht_partition *p);

#endif
