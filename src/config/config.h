/* Typed configuration: libconfig files -> ht_config, validated against one schema.
 * Every error (unknown key with a "did you mean", wrong type, missing required key,
 * value out of range) returns HT_EINPUT with "FILE:LINE: key 'a.b': found X, expected Y".
 * --set overrides ("a.b=value") pass through the same checks. */
#ifndef HT_CONFIG_CONFIG_H
#define HT_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config/choices.h"
#include "config/modes.h"

#define HT_PATH_MAX 1024
#define HT_MAX_HIDDEN 16
#define HT_MAX_LAYERS 32 /* model.layers elements */
#define HT_LAYER_TEXT 64 /* characters per model.layers element, with the terminator */
#define HT_MAX_RANKS 64  /* cluster.* per-rank lists */
/* cluster.slowdown: a rank idles (f-1) x its compute time per phase; at 10^6 a 1 ms phase
 * already idles 17 minutes, past the 600 s other ranks wait for it (HT_COMM_TIMEOUT), and a
 * larger factor (up to the 3.4e38 a float holds) only makes a step that never ends */
#define HT_MAX_SLOWDOWN 1e6
#define HT_SEL_TEXT 256  /* characters per cluster.devices element, with the terminator (a
                          * device name, up to 127, copied from --list-devices fits) */

typedef struct ht_config {
    char source[HT_PATH_MAX]; /* the file it was read from */

    struct {
        char type[16];             /* "mlp" | "cnn" | "gpt" */
        int hidden[HT_MAX_HIDDEN]; /* mlp: hidden layer widths */
        int nhidden;
        char activation[16];       /* mlp: "relu" | "gelu" */
        char layers[HT_MAX_LAYERS][HT_LAYER_TEXT]; /* cnn: "conv 5 32 pad=2", "relu", ... */
        int nlayers;
        int input_shape[3];        /* cnn: (C,H,W); ninput_shape == 0: from the data */
        int ninput_shape;
        int n_layer;               /* gpt: transformer blocks */
        int d_model;               /* gpt: channels */
        int n_head;                /* gpt: attention heads (divides d_model) */
        int context;               /* gpt: context length T in tokens */
        int vocab;                 /* gpt: vocabulary size (256: byte-level text) */
        int tie_embeddings;        /* gpt: the head's weight is wte (GPT-2) */
        char init_from[HT_PATH_MAX]; /* initial weights: a checkpoint or GPT-2 safetensors */
        double dropout;            /* gpt: dropout probability, [0, 1) */
    } model;

    struct {
        char kind[16];              /* "synthetic" | "idx" | "text" | "tokens" */
        char path[HT_PATH_MAX];     /* text: any file, read as bytes; tokens: a file or glob */
        char val_path[HT_PATH_MAX]; /* tokens: validation files; "" = split off data.path */
        char images[HT_PATH_MAX];   /* idx: IDX image file (plain or .gz) */
        char labels[HT_PATH_MAX];   /* idx: IDX label file */
        double val_fraction;        /* last fraction of the samples (text: of the bytes) held out */
        int samples;                /* synthetic: number of samples (default 10000) */
        int features;               /* synthetic: input dimension (default 64) */
        int classes;                /* synthetic: number of classes (default 10) */
        uint64_t seed;              /* synthetic: generator seed (default 1) */
        int shuffle;                /* shuffle training samples each epoch (default true) */
    } data;

    struct {
        int batch;         /* global batch size (required) */
        int steps;         /* number of optimizer steps; 0 = derive from epochs */
        double epochs;     /* used when steps == 0 */
        uint64_t seed;     /* init and data order (default 42) */
        int eval_every;    /* steps between validations; 0 = only at the end */
        int eval_batches;  /* text: batches of fixed validation windows per evaluation */
    } train;

    struct {
        char type[16];       /* "sgd" | "adamw" */
        double lr;
        double momentum;     /* sgd */
        int nesterov;        /* sgd */
        double beta1, beta2, eps; /* adamw */
        double weight_decay;
        char schedule[16];   /* "constant" | "step" | "cosine" */
        int warmup;          /* linear warmup steps */
        int step_size;       /* step: decay every step_size steps */
        double gamma;        /* step: multiply by gamma */
        double min_lr;       /* cosine: floor */
        double clip;         /* clip global grad norm to this; 0 = off */
    } optim;

    struct {
        char select[256];          /* selector: "" (first), index, "cpu", "gpu", or name/vendor substring */
        int cache;                 /* program binary cache on/off (default true) */
        char cache_dir[HT_PATH_MAX]; /* "" = $XDG_CACHE_HOME/hettrain or ~/.cache/hettrain */
        char tuning[HT_PATH_MAX];  /* CLBlast tuning file; "" = built-in defaults */
        double memory_mb;          /* memory limit per rank, 10^6 bytes; 0 = the device's */
    } device;

    struct {
        char metrics[HT_PATH_MAX]; /* JSON Lines file; "" = none */
        char tensorboard[HT_PATH_MAX]; /* folder for TensorBoard event files; "" = none */
        char progress[16];         /* "auto" | "bar" | "plain" | "none" */
        int every;                 /* steps between plain progress lines / metrics records */
    } log;

    struct {
        char path[HT_PATH_MAX]; /* checkpoint file; "" = none */
        int every;              /* steps between checkpoints; 0 = only at the end */
        int shards;             /* 0 = one file; K = a sharded set of K files */
    } checkpoint;

    /* Data parallelism under mpirun (one OpenCL device per rank); ignored by one process. */
    struct {
        int shares[HT_MAX_RANKS]; /* samples of train.batch per rank; nshares == 0: by split */
        int nshares;
        ht_split split;           /* equal | speed: shares when none are given */
        char profile[HT_PATH_MAX]; /* split "speed": hetprof profile; "" = a timed pass */
        int rebalance;            /* split "speed": re-split online as measured speeds drift */
        int exclude_slow;         /* split "speed": a share-0 rank leaves the job (not rank 0) */
        char devices[HT_MAX_RANKS][HT_SEL_TEXT]; /* device selector per rank, or one for all */
        int ndevices;
        double slowdown[HT_MAX_RANKS]; /* emulated slowdown per rank (>= 1); 0 values: none */
        int nslowdown;
        int slowdown_from[HT_MAX_RANKS]; /* step from which each rank's slowdown applies */
        int nslowdown_from;              /* 0 values: from step 0 */
        int hosts[HT_MAX_RANKS];  /* host id per rank (the pipeline's hetero partition) */
        int nhosts;               /* 0 values: by host name */
        ht_allreduce allreduce;   /* ring | mpi */
        ht_shard shard;           /* none | optimizer (ZeRO-1) */
        double bucket_first_mb;   /* overlapped reduction: first (top layers') bucket, MiB */
        double bucket_cap_mb;     /* overlapped reduction: size cap of the other buckets, MiB */
        int overlap;              /* reduce gradient buckets during backward (default true) */
        /* where the per-rank lists were set ("job.cfg:12", "--set cluster.shares=[..]", ""
         * for the default), for errors that need the world size: ht_config_check_world */
        char at_shares[HT_PATH_MAX + 32], at_devices[HT_PATH_MAX + 32],
            at_slowdown[HT_PATH_MAX + 32], at_slowdown_from[HT_PATH_MAX + 32],
            at_hosts[HT_PATH_MAX + 32];
    } cluster;

    /* Synchronisation policy under mpirun (src/sync); conf/README.md explains each key. */
    struct {
        ht_sync_mode mode;     /* a row of config/modes.h (sync.mode names it) */
        int servers;           /* asp/ssp/dasp: parameter server ranks */
        int staleness;         /* ssp: bound s */
        int group;             /* preduce/sap-reduce: P */
        double deadline_ms;    /* preduce/sap-reduce: group deadline; 0 = none */
        int global_every;      /* preduce/sap-reduce: every N-th group global; 0 = never */
        double alpha;          /* sap-reduce */
        int period;            /* gossip: steps between exchanges */
        double threshold;      /* gossip-adaptive: theta */
        int max_period;        /* gossip-adaptive */
        double similar;        /* dasp: speed ratio of a sync group */
        int interval;          /* dasp: updates between state re-evaluations */
        int max_ahead;         /* dasp: clocks ahead of the slowest before waiting; 0 = never */
        char log[HT_PATH_MAX]; /* decision log of the server/coordinator; "" = none */
    } sync;

    /* Pipeline parallelism under mpirun (src/pipe): the model's layers cut into stages over
     * ranks; conf/README.md#pipe explains each key. */
    struct {
        ht_pipe_kind schedule; /* a row of config/modes.h, or HT_PIPE_NONE ("none") */
        int stages;            /* pipeline ranks D (ranks = D x replicas) */
        int micro_batches;     /* N per global batch (per replica) */
        int chunks;            /* interleaved: model chunks per rank */
        ht_partition_kind partition; /* uniform | balanced | hetero; pipe.boundaries overrides */
        ht_recompute recompute; /* auto (by memory) | none | all (stages keep only inputs) */
        int rebalance;         /* "hetero": cut again as measured stage times drift */
        int replicate;         /* "hetero": a stage may run on adjacent ranks, splitting
                                  each micro-batch by speed */
        int boundaries[HT_MAX_LAYERS]; /* explicit: first layer of stages 1 .. S-1 */
        int nboundaries;
        int stage_ranks[HT_MAX_LAYERS]; /* explicit replicated stages: ranks of each stage */
        int nstage_ranks;
    } pipe;
} ht_config;

/* Fills cfg with defaults, parses path, applies the overrides ("a.b=value", nset of
 * them), and validates. Returns HT_OK or HT_EINPUT with ht_errmsg() set.
 * path may be NULL: defaults plus overrides only (the required keys must then come
 * from --set). Overrides take libconfig values (64, 0.1, true, [512, 256], "adamw");
 * string keys also take the bare text (optim.type=adamw, device.select=1).
 * Relative @include paths in the file are taken relative to the file's folder.
 * On error cfg is left half-filled and must not be used. */
int ht_config_load(ht_config *cfg, const char *path, const char *const *sets, int nset);

/* The checks that need the number of ranks: cluster.shares and cluster.slowdown hold one
 * value per rank (or none), cluster.devices one per rank or one for all (or none), and
 * without shares train.batch must give every rank a sample. HT_EINPUT naming file:line
 * (or the --set) of the key. */
int ht_config_check_world(const ht_config *cfg, int world);

/* The emulated slowdown of `rank` in effect at step `step` (0-based): cluster.slowdown[rank]
 * from step cluster.slowdown_from[rank] on (from 0 without the list), 1 before it and without
 * cluster.slowdown. */
double ht_config_slowdown_at(const ht_config *cfg, int rank, int64_t step);

/* Every output the run will write (checkpoint.path, log.metrics, sync.log, and trace_path
 * from --trace, which may be NULL): each must be absent or a regular file, in a folder that
 * exists and is writable. HT_EINPUT naming the key otherwise. Called at start, before any
 * training, so that a bad path fails in a second, not after the run. */
int ht_config_check_outputs(const ht_config *cfg, const char *trace_path);

/* "FILE:LINE" where key ("data.samples") is set in cfg->source or a file it includes; the
 * file alone when the key is not in it (a default or a --set); "" without a file. For
 * messages about values that turn out wrong only later (data sizes, val_fraction). */
void ht_config_where(const ht_config *cfg, const char *key, char *buf, size_t n);

/* Prints every key with its type, default and meaning (for --help / README). */
void ht_config_print_schema(void *file /* FILE* */);

/* Writes cfg as a complete libconfig file (every key, exact values) that
 * ht_config_load reads back to the same ht_config: for logs and reproducing a run. */
void ht_config_write(void *file /* FILE* */, const ht_config *cfg);
/* Writes only what a job needs: model.type and its family's keys (an MLP's hidden and
 * activation, a CNN's layers and input_shape, a GPT's n_layer .. dropout; never another
 * family's), the required keys, and every other key whose value differs from its default;
 * a group with none is left out. ht_config_load reads it back to the same job. No header
 * line (the caller writes its own comments). HT_OK, or an error from loading the defaults. */
int ht_config_write_changes(void *file /* FILE* */, const ht_config *cfg);

#endif
