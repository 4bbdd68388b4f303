/* The modes a job names: one row per synchronisation policy (sync.mode) and one per pipeline
 * schedule (pipe.schedule). Each row is the only place its mode is listed: its id, its name
 * in a config, what it supports and refuses (flags), and the code that runs it. The loader
 * parses the names into these enums (ht_config holds the enum, never the string); the
 * schema's choices, the help texts, the cross-key checks (config.c), the policies
 * (sync/sync.c), the schedule generators (pipe/schedule.c), the simulator (sim/policies.c) and
 * the planner (sim/planner.c) read the rows. Adding a mode is one row here plus its code.
 *
 * Why X-macro rows: the rows must give an enum (for the config struct), a NULL-terminated
 * name list (the schema's choices) and a table of flags, and some rows name code in folders
 * above this one (a schedule's generator is in src/pipe, which includes config). One
 * HT_*_ROWS(X) list expands into each of them where it is needed, so no second list is kept
 * in step by hand, and this header includes nothing: src/config stays below src/pipe,
 * src/sync and src/sim (the generator column is only expanded in pipe/schedule.c). */
#ifndef HT_CONFIG_MODES_H
#define HT_CONFIG_MODES_H

#include <stddef.h>

/* ------------------------------------------------------------ synchronisation policies */

/* How a policy's ranks are organised; each family is one policy implementation in src/sync
 * (ht_bsp_policy, ht_ps_policy, ht_preduce_policy, ht_gossip_policy) and one model in the
 * simulator (data parallel, or sim/policies.c's run of that family). */
typedef enum {
    HT_SYNC_FAM_ALLREDUCE, /* every rank a worker, gradients summed each step */
    HT_SYNC_FAM_PS,        /* sync.servers parameter-server ranks after the workers */
    HT_SYNC_FAM_GROUP,     /* partial reduce in groups; one group-generator rank */
    HT_SYNC_FAM_GOSSIP,    /* push-sum gossip; one coordinator rank that counts progress */
    HT_SYNC_NFAMILIES
} ht_sync_family;

/* What a policy supports beyond its family's defaults. */
enum {
    HT_SYNC_F_LOCKSTEP = 1 << 0, /* workers step together: cluster.shares, cluster.split
                                    "speed" and pipe.schedule are allowed */
    HT_SYNC_F_STALENESS = 1 << 1, /* a server holds a worker more than sync.staleness ahead */
    HT_SYNC_F_STATES = 1 << 2,    /* servers group workers by speed (dasp) */
    HT_SYNC_F_WEIGHTED = 1 << 3,  /* groups weight models by staleness (sync.alpha) */
    HT_SYNC_F_ADAPTIVE = 1 << 4,  /* exchanges when the model moved (sync.threshold) */
    HT_SYNC_F_BLOCKING = 1 << 5,  /* an exchange waits for its peer (gossip-fixed) */
};

/*   ID               name               family        flags, and a line for --help-config */
#define HT_SYNC_ROWS(X)                                                                            \
    X(BSP, "bsp", HT_SYNC_FAM_ALLREDUCE, HT_SYNC_F_LOCKSTEP,                                       \
      "all-reduce of the gradients every step (bulk synchronous)")                                 \
    X(ASP, "asp", HT_SYNC_FAM_PS, 0,                                                               \
      "parameter servers; workers push and pull without waiting (asynchronous)")                   \
    X(SSP, "ssp", HT_SYNC_FAM_PS, HT_SYNC_F_STALENESS,                                             \
      "parameter servers; a worker waits when sync.staleness clocks ahead (stale synchronous)")    \
    X(DASP, "dasp", HT_SYNC_FAM_PS, HT_SYNC_F_STATES,                                              \
      "parameter servers; workers of similar speed synchronise, the others run ahead (DASP)")      \
    X(PREDUCE, "preduce", HT_SYNC_FAM_GROUP, 0,                                                    \
      "the first sync.group ready workers average their models (partial reduce)")                  \
    X(SAP, "sap-reduce", HT_SYNC_FAM_GROUP, HT_SYNC_F_WEIGHTED,                                    \
      "partial reduce weighting each model by its staleness (SAP-Reduce)")                         \
    X(GOSSIP, "gossip", HT_SYNC_FAM_GOSSIP, 0,                                                     \
      "push-sum gossip with one peer every sync.period steps")                                     \
    X(GOSSIP_FIXED, "gossip-fixed", HT_SYNC_FAM_GOSSIP, HT_SYNC_F_BLOCKING,                                      \
      "gossip exchanging with one peer every sync.period steps, blocking (the paper's baseline)")  \
    X(GOSSIP_ADAPTIVE, "gossip-adaptive", HT_SYNC_FAM_GOSSIP, HT_SYNC_F_ADAPTIVE,                  \
      "push-sum gossip when the model moved more than sync.threshold")

#define HT_SYNC_ID_(id, ...) HT_SYNC_##id,
typedef enum { HT_SYNC_ROWS(HT_SYNC_ID_) HT_SYNC_NMODES } ht_sync_mode;

typedef struct ht_sync_row {
    const char *name;
    const char *doc; /* one line: what it does, and its paper */
    ht_sync_family family;
    unsigned flags; /* HT_SYNC_F_* */
} ht_sync_row;

/* Indexed by ht_sync_mode. */
extern const ht_sync_row ht_sync_rows[HT_SYNC_NMODES];
/* The names in row order, NULL-terminated (the schema's choices for sync.mode). */
extern const char *const ht_sync_mode_names[HT_SYNC_NMODES + 1];
/* Their descriptions in the same order (--help-config). */
extern const char *const ht_sync_mode_docs[HT_SYNC_NMODES + 1];

/* The row of mode; NULL when out of range. */
const ht_sync_row *ht_sync_row_of(int mode);
/* The name of mode ("?" when out of range). */
const char *ht_sync_mode_name(int mode);
/* The mode named name, or -1. */
int ht_sync_mode_parse(const char *name);
/* 1 when mode's extra ranks are sync.servers parameter servers, 0 when they are one
 * coordinator (or, bsp, none). */
int ht_sync_has_servers(int mode);
/* Ranks that serve rather than train: sync.servers for a parameter server, 1 for a
 * coordinator, 0 for bsp. */
int ht_sync_extra_ranks(int mode, int servers);

/* ------------------------------------------------------------------ pipeline schedules */

/* What a schedule supports. */
enum {
    HT_PIPE_F_CHUNKS = 1 << 0,     /* pipe.chunks model chunks per rank (stages = D x v) */
    HT_PIPE_F_TWO_WAY = 1 << 1,    /* two pipelines in opposite directions, a replica of every
                                      stage on two ranks (Chimera): an even pipe.stages */
    HT_PIPE_F_REPLICAS = 1 << 2,   /* replicated stages (pipe.stage_ranks, pipe.replicate) and
                                      re-partitioning (pipe.rebalance) */
    HT_PIPE_F_STAGE_TIMES = 1 << 3, /* plans its order from the stages' measured times */
    HT_PIPE_F_NO_FLUSH = 1 << 4,    /* batches chain without a flush (PipeDream-2BW) */
    HT_PIPE_F_PLANNED = 1 << 5,     /* `hettrain plan` tries it */
    HT_PIPE_F_ALL_IN_FLIGHT = 1 << 6, /* every micro-batch's activations held at once */
    HT_PIPE_F_SPLIT_BW = 1 << 7, /* zero-bubble: each backward split into B (BWD) and W (BWD_W)
                                    passes (issue 27; the executor: train/pipe_bw.h) */
    HT_PIPE_F_V = 1 << 8, /* two chunks a rank in a V: stage s < D on rank s, stage s >= D on
                             rank 2D-1-s (ZB-V) */
};

/*   ID           name           generator (src/pipe)       flags, and a line for --help-config */
#define HT_PIPE_ROWS(X)                                                                            \
    X(GPIPE, "gpipe", ht_pipe_gen_gpipe,                                                           \
      HT_PIPE_F_REPLICAS | HT_PIPE_F_PLANNED | HT_PIPE_F_ALL_IN_FLIGHT,                            \
      "all forwards, then all backwards; every micro-batch in flight (GPipe)")                     \
    X(1F1B, "1f1b", ht_pipe_gen_1f1b, HT_PIPE_F_REPLICAS | HT_PIPE_F_PLANNED,                      \
      "one forward, one backward: at most D micro-batches in flight (PipeDream-Flush)")            \
    X(INTERLEAVED, "interleaved", ht_pipe_gen_interleaved, HT_PIPE_F_CHUNKS | HT_PIPE_F_PLANNED,   \
      "1F1B over pipe.chunks model chunks per rank (Megatron-LM)")                                 \
    X(CHIMERA, "chimera", ht_pipe_gen_chimera, HT_PIPE_F_TWO_WAY | HT_PIPE_F_PLANNED,              \
      "two pipelines in opposite directions, each stage on two ranks (Chimera)")                   \
    X(HEPIPE, "hepipe", ht_pipe_gen_hepipe, HT_PIPE_F_REPLICAS | HT_PIPE_F_STAGE_TIMES,            \
      "order planned from the stages' measured times, for unequal devices (HePipe)")               \
    X(2BW, "2bw", ht_pipe_gen_2bw, HT_PIPE_F_NO_FLUSH,                                             \
      "batches chain without a flush, two weight versions (PipeDream-2BW)")                        \
    X(ZBH1, "zb-h1", ht_pipe_gen_zbh1, HT_PIPE_F_SPLIT_BW,                                         \
      "zero bubble: backward split into input (B) and weight (W) passes, 1F1B's memory (ZB-H1)")   \
    X(ZBV, "zb-v", ht_pipe_gen_zbv, HT_PIPE_F_SPLIT_BW | HT_PIPE_F_V,                              \
      "zero bubble with two chunks a rank in a V shape (ZB-V)")                                    \
    X(ZBHET, "zb-het", ht_pipe_gen_zbhet, HT_PIPE_F_SPLIT_BW,                                      \
      "zero bubble whose W passes fill unequal stages' bubbles")

/* HT_PIPE_NONE: pipe.schedule = "none", no pipeline; the kinds count from 0. */
#define HT_PIPE_ID_(id, ...) HT_PIPE_##id,
typedef enum { HT_PIPE_NONE = -1, HT_PIPE_ROWS(HT_PIPE_ID_) HT_PIPE_NKINDS } ht_pipe_kind;

typedef struct ht_pipe_row {
    const char *name;
    const char *doc; /* one line: what it does, and its paper */
    unsigned flags; /* HT_PIPE_F_* */
} ht_pipe_row;

/* Indexed by ht_pipe_kind (0 .. HT_PIPE_NKINDS - 1). */
extern const ht_pipe_row ht_pipe_rows[HT_PIPE_NKINDS];
/* "gpipe", "1f1b", ..., indexed by ht_pipe_kind. */
extern const char *const ht_pipe_kind_names[HT_PIPE_NKINDS];
/* "none" then the kinds' names, NULL-terminated (the schema's choices for pipe.schedule: the
 * value is the index - 1, so that "none" is HT_PIPE_NONE). */
extern const char *const ht_pipe_schedule_names[HT_PIPE_NKINDS + 2];
/* Their descriptions in the same order (--help-config). */
extern const char *const ht_pipe_schedule_docs[HT_PIPE_NKINDS + 2];

/* The row of kind; NULL for HT_PIPE_NONE and out of range. */
const ht_pipe_row *ht_pipe_row_of(int kind);
/* 1 when kind is a schedule whose row has every flag in flags. */
int ht_pipe_kind_has(int kind, unsigned flags);
/* The kind named name ("gpipe", ...), or -1 (also for "none" and NULL). */
int ht_pipe_kind_parse(const char *name);
/* The name of kind: "none" for HT_PIPE_NONE, "?" when out of range. */
const char *ht_pipe_kind_name(int kind);
/* The shape a schedule's row allows: D pipeline ranks, N micro-batches, v model chunks per
 * rank (chimera: D even; interleaved with v > 1: N a multiple of D; 2bw: N >= D). HT_OK, or
 * HT_EINPUT with the reason in msg. The generators refuse with it, and the config's rules
 * before any device is opened. */
int ht_pipe_kind_shape(int kind, int D, int N, int v, char *msg, size_t n);
/* The names of the kinds whose rows have every flag in want and none in refuse, as prose:
 * "gpipe, 1f1b or hepipe" (0, 0: every kind). For messages and help texts. */
void ht_pipe_kind_list(unsigned want, unsigned refuse, char *buf, size_t n);
/* The names of every sync policy as prose: "bsp, asp, ... or gossip-adaptive". */
void ht_sync_mode_list(char *buf, size_t n);

#endif
