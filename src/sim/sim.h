/* hetsim: a deterministic discrete-event simulator of hettrain's own step structures on a
 * cost model (pure C: no MPI, no OpenCL, no clocks). Executors turn a job into per-rank
 * streams of simulator operations (compute, point-to-point send / receive, collective start
 * and wait), and the engine runs the streams: each rank has a device timeline and a network
 * interface (sends and collectives are serialised on it), messages are matched by (source,
 * destination, tag), a collective starts when its last member has issued it and the members'
 * interfaces are free, and takes its algorithm's closed-form step structure.
 *
 * What runs unchanged from the trainer: the batch split (src/plan), the gradient bucketing
 * (src/plan/buckets.h ht_reduce_plan), every pipeline schedule's instruction stream
 * (src/pipe/schedule.h, instruction by instruction). Cost model: per-layer forward/backward
 * time per device interpolated over the batch size from a hetprof profile, or a roofline from
 * a device's peak GFLOP/s and memory bandwidth (FLOPs and bytes from the model description);
 * launch overhead, optimizer time, links as latency + bytes / bandwidth (intra / inter host),
 * our ring all-reduce at a measured step rate (ring_gbs) where every link of the ring has one,
 * emulated slowdowns as cluster.slowdown. */
#ifndef HT_SIM_SIM_H
#define HT_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "config/modes.h"
#include "pipe/schedule.h"
#include "prof/profile.h"

struct ht_model;
struct ht_config;

/* ------------------------------------------------------------------ cluster */

#define HT_SIM_NAME 64

/* One device kind: a profile entry (optionally a scaled copy: times divided by `scale`), or
 * a roofline from gflops and mem_bw_gbs. */
typedef struct ht_sim_devtype {
    char name[HT_SIM_NAME];
    int prof_dev;       /* entry of the cluster's profile, -1: roofline */
    double scale;       /* speed factor over the profile entry (> 0; 1 = as measured) */
    double gflops;      /* roofline: sustained GFLOP/s (0: from the profile's best GEMM) */
    double mem_bw_gbs;  /* device memory bandwidth (optimizer, memory-bound layers) */
    double mem_gb;      /* device memory, GB (1e9 bytes); 0 = unlimited */
    double launch_us;   /* per kernel launch */
    double h2d_gbs, d2h_gbs; /* host staging of gradient buckets (0: none, e.g. GPU-direct) */
    double cores;       /* host cores its kernels keep busy (a CPU device), 0: none of them */
} ht_sim_devtype;

typedef struct ht_sim_link {
    double latency_s, bw_Bps; /* seconds, bytes / second */
    double ring_Bps; /* a ring all-reduce step as measured (hetprof: our ring over the pair,
                        its additions included), bytes of a chunk / second; 0: a step is a
                        transfer at bw_Bps plus the additions at the cluster's host_add_gbs */
} ht_sim_link;

typedef struct ht_sim_cluster {
    char source[1024];
    ht_profile *prof;       /* NULL: none (owned) */
    ht_sim_devtype *types;  /* [ntypes] */
    int ntypes;
    int nranks;
    int *rank_type;   /* [nranks] device kind of rank r (ranks host by host) */
    int *rank_host;   /* [nranks] */
    double *slowdown; /* [nranks] >= 1: host cores shared (hosts[].cores), times the job's
                         cluster.slowdown */
    int nhosts;
    ht_sim_link intra, inter;
    double host_add_gbs; /* host memory bandwidth for the additions (0: free) of our ring
                            where its links have no ring_Bps, of MPI's algorithms, of gossip */
} ht_sim_cluster;

/* Reads a cluster description (format in conf/README.md). HT_EINPUT with "FILE:LINE: what,
 * expected what" for bad files. */
int ht_sim_cluster_load(const char *path, ht_sim_cluster *c);
/* A cluster from a hetprof profile: rank r runs device r (as mpirun hetprof numbers them), on
 * hosts by the devices' host names (one host without them); links from the profile's: intra
 * the slowest between devices of one host, inter the slowest between hosts, each standing in
 * for the other when there is none; device memory from its mem_mb (0: unlimited); a CPU
 * device's kind has cores = 1 (its all-reduce holds its rank), host cores are not modelled,
 * host_add_gbs is the first CPU device's memory bandwidth. HT_EINPUT for a bad profile,
 * several devices without links, or a host whose devices are not numbered together. */
int ht_sim_cluster_from_profile(const char *path, ht_sim_cluster *c);
/* Builds a cluster by hand: n ranks of one kind on hosts of per_host ranks. */
void ht_sim_cluster_uniform(ht_sim_cluster *c, const ht_sim_devtype *t, int n, int per_host,
                            ht_sim_link intra, ht_sim_link inter);
void ht_sim_cluster_free(ht_sim_cluster *c);
/* The link between two ranks. */
ht_sim_link ht_sim_link_of(const ht_sim_cluster *c, int a, int b);
/* The slower of two links, field by field: the larger latency, the smaller bandwidth and ring
 * step (a link without a measured step, 0, makes the result have none). */
ht_sim_link ht_sim_link_slower(ht_sim_link a, ht_sim_link b);

/* ------------------------------------------------------------------ model and costs */

typedef struct ht_sim_layer {
    char name[32];
    int kind;            /* ht_layer_kind */
    double flops_f;      /* per sample */
    double flops_b;      /* per sample, with the input gradient */
    double flops_w;      /* per sample: the weight-gradient part of flops_b (zero-bubble's W) */
    double act_bytes;    /* per sample kept for backward (ht_layer_act_bytes) */
    double out_bytes;    /* per sample: the layer's output (what a stage boundary sends) */
    double in_bytes;     /* per sample: its input */
    double param_bytes;  /* 4 * nparams */
    int launches;        /* kernels per forward (backward: twice) */
} ht_sim_layer;

typedef struct ht_sim_model {
    int nlayers;
    ht_sim_layer *l;
    double param_bytes; /* total */
    double tied_bytes;  /* a tied head's weight (GPT-2's wte, the first layer's), 0: none; a
                           pipeline's last stage holds a copy (src/train/pipe_tied.h) */
    double in_bytes;    /* per sample input */
    int optim_bytes_per_param; /* optimizer traffic per parameter: sgd 20, adamw 28 */
    int optim_state_floats;    /* per parameter besides params and grads: sgd 1, adamw 2 */
    int adamw;                 /* a parameter server scales AdamW's rate, not its gradient */
} ht_sim_model;

/* Description of m (built with d == NULL is enough); optim "sgd" | "adamw". */
void ht_sim_model_from(ht_sim_model *sm, const struct ht_model *m, const char *optim);
void ht_sim_model_free(ht_sim_model *sm);

/* Seconds of layer l's forward (bwd = 0) or backward (bwd = 1; with_dx = 0 on a first layer
 * is ignored: the profile times include it) on rank r's device at batch b, slowdown included. */
double ht_sim_layer_time(const ht_sim_cluster *c, int r, const ht_sim_model *m, int l, int b,
                         int bwd);
/* Sum over layers [lo, hi). */
double ht_sim_range_time(const ht_sim_cluster *c, int r, const ht_sim_model *m, int lo, int hi,
                         int b, int bwd);
/* One optimizer step over param_bytes of parameters on rank r. */
double ht_sim_optim_time(const ht_sim_cluster *c, int r, const ht_sim_model *m, double param_bytes);

/* A device-to-device copy of `bytes` on rank r (read and write at its memory bandwidth, one
 * launch), slowdown included. */
double ht_sim_copy_time(const ht_sim_cluster *c, int r, double bytes);

/* Seconds per byte of host -> device copies on rank r (the kind's h2d_gbs, else its profile
 * entry's; 0 when neither: GPU-direct), and of device -> host in *d2h (may be NULL). */
double ht_sim_host_copy(const ht_sim_cluster *c, int r, double *d2h);

/* ------------------------------------------------------------------ engine */

enum { HT_SIM_COMPUTE, HT_SIM_SEND, HT_SIM_RECV, HT_SIM_COLL, HT_SIM_WAIT };
/* What a span counts as in the split. */
enum { HT_SIM_CAT_COMPUTE, HT_SIM_CAT_COMM, HT_SIM_CAT_OPT };
enum { HT_SIM_RING, HT_SIM_MPI }; /* collective algorithms */

typedef struct ht_sim_op {
    uint8_t kind, cat;
    int32_t peer;  /* SEND / RECV: the other rank; COLL / WAIT: collective id */
    int64_t tag;   /* SEND / RECV match key */
    double dur;    /* COMPUTE: seconds */
    double bytes;  /* SEND: bytes */
    int32_t name;  /* index into the engine's name table (trace) */
    double mem;    /* change of the rank's memory in bytes at the op's start (+ or -) */
} ht_sim_op;

typedef struct ht_sim ht_sim;

ht_sim *ht_sim_new(const ht_sim_cluster *c, int nranks, int trace);
void ht_sim_free(ht_sim *s);
/* Interns a span name for the trace; returns its index. */
int ht_sim_name(ht_sim *s, const char *name);
/* Appends one op to rank r's stream. */
void ht_sim_push(ht_sim *s, int r, ht_sim_op op);
void ht_sim_compute(ht_sim *s, int r, double dur, int cat, int name);
void ht_sim_send(ht_sim *s, int r, int to, int64_t tag, double bytes, int name);
void ht_sim_recv(ht_sim *s, int r, int from, int64_t tag, int name);
/* A collective over members[0..n) reducing `bytes` with algorithm alg; returns its id.
 * Every member must push HT_SIM_COLL (start) and later HT_SIM_WAIT with that id. */
int ht_sim_coll_new(ht_sim *s, const int *members, int n, double bytes, int alg);
/* Half an all-reduce of `bytes` (the whole buffer): a reduce-scatter (HT_SIM_RS, each member
 * ends with the sum of its part) or an all-gather (HT_SIM_AG): n - 1 ring steps of one chunk,
 * the reduce-scatter's adds included. */
enum { HT_SIM_RS = 1, HT_SIM_AG = 2 };
int ht_sim_coll_half(ht_sim *s, const int *members, int n, double bytes, int alg, int half);
void ht_sim_coll(ht_sim *s, int r, int id, int name);
void ht_sim_wait(ht_sim *s, int r, int id, int name);
/* Memory: the last op pushed on rank r also changes its memory by delta bytes (at the op's
 * start); base bytes (parameters, gradients, optimizer state) count from the beginning. */
void ht_sim_mem_at_last(ht_sim *s, int r, double delta);
void ht_sim_mem_base(ht_sim *s, int r, double bytes);

/* Closed-form cost of a collective over n ranks on link l: our ring 2 (n-1) (lat + B/(n bw))
 * plus the reduce-scatter's additions at add_Bps, or 2 (n-1) (lat + B/(n ring)) with a
 * measured step of it (l.ring_Bps); mpi (MPI's own algorithms, which the measured step says
 * nothing of): the smaller of that ring on bw plus additions and recursive doubling
 * ceil(log2 n) (lat + B/bw) plus its additions. */
double ht_sim_coll_cost(int alg, int n, double bytes, ht_sim_link l, double add_Bps);
/* The same over the ring members[0..n) of cluster c: its slowest link between neighbours
 * bounds every step. */
double ht_sim_ring_cost(const ht_sim_cluster *c, int alg, const int *members, int n,
                        double bytes);

typedef struct ht_sim_rank {
    double end;     /* its last op's end */
    double busy;    /* compute */
    double comm;    /* host staging, and waiting while its data was in flight */
    double opt;     /* optimizer */
    double idle;    /* the rest of the makespan */
    double peak_mem;
    double bytes_sent;
} ht_sim_rank;

typedef struct ht_sim_result {
    int nranks;
    double makespan;     /* seconds of one step (the last rank's end) */
    double throughput;   /* samples / s (set by the executor) */
    int samples;
    double bytes;        /* moved over links, all ranks */
    double peak_mem;     /* max over ranks */
    ht_sim_rank *rank;   /* [nranks] */
    double busy, comm, idle, opt; /* means over ranks, seconds */
    int64_t events;      /* ops executed */
} ht_sim_result;

/* Runs every stream to its end. HT_OK, or HT_EINPUT naming a rank that waits forever
 * (deadlock: a RECV with no SEND, a collective a member never joins). */
int ht_sim_run(ht_sim *s, ht_sim_result *res);
void ht_sim_result_free(ht_sim_result *res);
/* Chrome trace of the last run (the format of src/io/trace.c; needs trace = 1). */
int ht_sim_write_trace(const ht_sim *s, const char *path);

/* ------------------------------------------------------------------ executors */

/* A data-parallel step (bsp). */
typedef struct ht_sim_dp {
    int B;                  /* global batch */
    const int *shares;      /* [nranks] or NULL: split by `speed` */
    int speed;              /* 1: split by the cost model's speeds (ht_plan_batch_split_affine),
                               0: equal */
    int alg;                /* HT_SIM_RING | HT_SIM_MPI */
    int overlap;            /* bucketed reduction during backward */
    double bucket_first_mb, bucket_cap_mb;
    int steps;              /* > 1: run the rebalancer over steps (speed split), last step
                               reported */
    int exclude;            /* speed split: a rank but rank 0 that the start-up split leaves
                               out (share 0) takes no part (cluster.exclude_slow) */
    /* cluster.shard (ZeRO) as src/sync/bsp.c runs it: with "optimizer" each rank updates its
     * slice [cut[r], cut[r+1]) and the parameters are all-gathered; with "gradients" the
     * buckets are reduce-scattered instead of all-reduced and only the slice is written back.
     * cut: [n + 1] floats (plan/zero_mem.h), NULL without sharding */
    int shard;
    const size_t *cut;
    const double *rank_bytes; /* [n] what each rank allocates (plan/zero_mem.h), or NULL: the
                                 simulator's own tally */
} ht_sim_dp;

/* Simulates one step of m over the cluster's first n ranks. out_shares (may be NULL) gets
 * the split used. */
int ht_sim_run_dp(const ht_sim_cluster *c, int n, const struct ht_model *model,
                  const ht_sim_model *sm, const ht_sim_dp *p, int trace_on, const char *trace,
                  ht_sim_result *res, int *out_shares);

/* A pipeline step: W replicas of the schedule s (D = s->p.D ranks each, rank w * D + d), the
 * model's layers cut into s->S stages at bounds[0..S] (as the executor cuts them:
 * ht_pipe_bounds of src/plan/bounds.h), micro-batches of mb samples; REDUCE_GRADS among the
 * copies of a stage (ring or mpi). */
typedef struct ht_sim_pipe {
    const ht_pipe_sched *s;
    int W;
    int mb;
    const int *bounds;
    int alg;
    int chain;  /* > 0: s is a PipeDream-2BW period stream (ht_pipe_2bw_steady), run without
                   a flush as the executor chains it, `chain` and 2 x `chain` batches; the
                   result is per batch in the steady state (their difference over chain) */
    /* Replicated stages as the executor runs them (train/pipe_exec.h's ht_pipe_place; first NULL:
     * none): the schedule's rank q on pipeline ranks [first[q], first[q + 1]) of P, rank p
     * computing cnt[p] samples of every micro-batch from off[p]; a boundary moves in pieces
     * between the ranks whose samples overlap, REDUCE_GRADS spans a stage's ranks. */
    int P;
    const int *first, *off, *cnt;
    /* [D] what each schedule rank allocates in the trainer (ht_sim_plan_bytes: the executor
     * allocates its slots at start-up, so this is its peak), or NULL: the simulator's own
     * tally of parameters, gradients and optimizer state and the slots in use */
    const double *rank_bytes;
} ht_sim_pipe;

int ht_sim_run_pipe(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_pipe *p,
                    int trace_on, const char *trace, ht_sim_result *res);


/* Sync policies (timing only; src/sim/policies.c): workers 0 .. workers-1, then the serving
 * ranks (asp / ssp / dasp: `servers` parameter servers; preduce: one group generator). The
 * run is the mode's family's (config/modes.h): the parameter server, the group reduce
 * (sap-reduce timed as preduce), or gossip; bsp is ht_sim_run_dp's. */
typedef struct ht_sim_sync {
    ht_sync_mode mode; /* a row of config/modes.h, not bsp */
    int workers, servers;
    int B, steps;      /* budget: steps x B samples, B / workers per local step */
    int staleness;     /* ssp */
    int group;         /* preduce: P */
    double deadline_s; /* preduce */
    int global_every;  /* preduce */
    int period;        /* gossip: local steps between exchanges */
    int adaptive;      /* gossip-adaptive: exchange when ht_gossip_due fires (not `period`) */
    double threshold;  /* gossip-adaptive: relative model change that triggers an exchange */
    int max_period;    /* gossip-adaptive: exchange at least every this many steps */
    double drift;      /* gossip-adaptive: relative model change per local step (||w_{t+1} -
                          w_t|| / ||w_t||), accumulated linearly; 0 = unknown */
    double similar;    /* dasp: speed ratio of a sync group */
    int interval;      /* dasp: updates between state assignments */
    int max_ahead;     /* dasp: clocks an ASYNC worker may run ahead; 0 = unbounded */
} ht_sim_sync;

/* Runs the budget; res->makespan is its time, throughput samples / s, rank[] per worker. */
int ht_sim_run_sync(const ht_sim_cluster *c, const ht_sim_model *sm, const ht_sim_sync *p,
                    ht_sim_result *res);

/* ------------------------------------------------------------------ planner */

/* One configuration the planner tried. */
#define HT_SIM_MAX_STAGES 64
typedef struct ht_sim_cand {
    int kind;        /* -1: data parallel, else ht_pipe_kind */
    int speed;       /* data parallel: speed split */
    int shard;       /* data parallel: cluster.shard (HT_SHARD_*; tried where the unsharded
                        state does not fit device.memory_mb) */
    int by_speed;    /* gpipe / 1f1b: stages cut by device speed (else balanced FLOPs) */
    int rep;         /* gpipe / 1f1b: the trainer's hetero partition with replicated stages
                        (pipe.replicate): Q stages on the D ranks, first / off / cnt as in
                        ht_sim_pipe */
    int Q, first[HT_SIM_MAX_STAGES + 1], off[HT_SIM_MAX_STAGES], cnt[HT_SIM_MAX_STAGES];
    int recompute;   /* pipe.recompute = "all" (tried for pipelines that do not fit without) */
    int bounds[HT_SIM_MAX_STAGES + 1]; /* the stage cut simulated */
    int D, W, N, v;  /* pipeline ranks, replicas, micro-batches, chunks */
    int ok;          /* simulated and fits memory */
    double step, throughput, peak_mem, busy, comm, idle; /* busy..idle: fractions of the step */
    /* what the trainer allocates (plan/exec_mem.h), the largest rank's: bytes, that rank (a
     * pipeline's schedule rank), and 1 when each pipeline rank holds only its stage */
    double need_mem;
    int need_rank, local;
    char why[256];   /* why it lost (or could not run) */
} ht_sim_cand;

/* "1f1b D=4 x2 replicas, N=8", "data parallel, speed split". */
const char *ht_sim_cand_name(const ht_sim_cand *k, char *buf, size_t n);

/* Tries every configuration of the job (model m / sm, global batch B) on the cluster's first
 * n ranks: data parallel (equal and speed split, bucketed overlapped reduction), and gpipe,
 * 1f1b, interleaved (v = 2) and chimera with every D >= 2 dividing n (W = n / D replicas)
 * and N = D, 2D, 4D micro-batches where W N divides B, partition balanced by FLOPs (and, on
 * mixed devices or slowdowns, gpipe / 1f1b also cut by device speed: the cut minimising the
 * slowest stage's time on its devices, and the trainer's hetero partition with replicated
 * stages, pipe.replicate); a pipeline that does not fit memory is tried again with
 * recomputation. *out (free it) gets them best first; HT_EINPUT when none fits. */
int ht_sim_plan(const ht_sim_cluster *c, int n, const struct ht_model *m, const ht_sim_model *sm,
                int B, int alg, ht_sim_cand **out, int *nout);
/* The same with the job's data-parallel reduction (dp: B, alg, overlap, bucket sizes; its
 * shares, speed and steps are ignored) and the job's other keys (base), so that the job the plan writes simulates to the
 * figure the plan printed; ht_sim_plan uses overlap on, buckets of 1 and 25 MiB. */
int ht_sim_plan_job(const ht_sim_cluster *c, int n, const struct ht_model *m,
                    const ht_sim_model *sm, const struct ht_config *base, const ht_sim_dp *dp,
                    ht_sim_cand **out, int *nout);
/* The job a candidate is (what the plan writes): base with the candidate's schedule, stages,
 * micro-batches, chunks, partition ("balanced", the cut by speed as pipe.boundaries, or
 * "hetero" with pipe.replicate) and pipe.recompute ("all" or "none"). Every pipeline
 * candidate is simulated as ht_plan_job plans this job (plan/job.h), the plan the trainer runs. */
void ht_sim_cand_config(const struct ht_config *base, const ht_sim_cand *k, struct ht_config *c);

/* What ht_sim_plan leaves out of its search for n ranks and batch B, and why, as lines for
 * the user ("pipelines: none tried: ... train.batch = 16 is not a multiple of 6: ..."): no
 * pipeline when B is not a multiple of n (N = D, 2D, 4D micro-batches on n / D replicas
 * split it into n, 2n, 4n), fewer micro-batch counts, stage counts past the model's cuts.
 * Returns the number of lines written into buf (0: nothing left out). */
int ht_sim_plan_left_out(const struct ht_model *m, int n, int B, char *buf, size_t len);

#endif
