/* The configuration schema: one row per key, read by the loader (config.c) to parse and
 * validate, and here to print the key reference (--help-config, conf/README.md) and to
 * write a configuration back out in libconfig syntax. */
#include "config/schema.h"

#include "config/choices.h"
#include "config/config.h"
#include "config/modes.h"
#include "core/err.h"
#include "nn/layer_spec.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------ */
/* The table                                                                            */

/* the enum keys' fields are written through int pointers */
_Static_assert(sizeof(ht_sync_mode) == sizeof(int) && sizeof(ht_pipe_kind) == sizeof(int) &&
                   sizeof(ht_split) == sizeof(int) && sizeof(ht_allreduce) == sizeof(int) &&
                   sizeof(ht_shard) == sizeof(int) && sizeof(ht_partition_kind) == sizeof(int) &&
                   sizeof(ht_recompute) == sizeof(int),
               "config enums are ints");

const char *const ht_config_groups[] = {"model",      "data",    "train", "optim", "device", "log",
                                        "checkpoint", "cluster", "sync",  "pipe",  NULL};

/* One model.layers element: the layer grammar of nn/layer_spec.h, with a suggestion
 * when the first word is a misspelt layer kind. */
static int check_layer(const char *v, char *err, size_t n) {
    ht_layer_spec spec;
    if (ht_layer_spec_parse(v, &spec, err, n) == HT_OK) return HT_OK;
    char word[32] = "";
    sscanf(v, " %31s", word);
    int nk = 0, known = 0;
    for (; ht_layer_spec_kinds[nk]; nk++)
        known |= !strcmp(word, ht_layer_spec_kinds[nk]);
    const char *best = known || !word[0] ? NULL : ht_closest(word, ht_layer_spec_kinds, nk);
    size_t len = strlen(err);
    if (best && len < n) snprintf(err + len, n - len, " (did you mean \"%s\"?)", best);
    return HT_EINPUT;
}

/* The MNIST CNN: 28x28x1 -> conv 5x5 32 -> ReLU -> max-pool 2 -> conv 5x5 64 -> ReLU ->
 * max-pool 2 -> linear 512 -> ReLU -> linear 10 (the PyTorch / TensorFlow tutorial net). */
#define DEFAULT_CNN                                                                                \
    "[\"conv 5 32 pad=2\", \"relu\", \"maxpool 2\", \"conv 5 64 pad=2\", \"relu\", "               \
    "\"maxpool 2\", \"flatten\", \"linear 512\", \"relu\", \"linear 10\"]"

/* offset, size and (unused) count offset of a scalar or string field */
#define FIELD(f) offsetof(ht_config, f), sizeof(((ht_config *)0)->f), 0
#define GE HT_CF_GE
#define GT HT_CF_GT
#define LT HT_CF_LT
#define LE HT_CF_LE
#define REQ HT_CF_REQ

/* path, kind, flags, default (libconfig syntax), min, max, choices, field, doc */
const ht_ckey ht_config_keys[] = {
    {"model.type", HT_CK_STR, 0, "\"mlp\"", 0, 0, ht_model_type_names, FIELD(model.type),
     "model family"},
    {"model.hidden", HT_CK_INTS, GE, "[128]", 1, 0, NULL, offsetof(ht_config, model.hidden),
     sizeof(((ht_config *)0)->model.hidden), offsetof(ht_config, model.nhidden),
     "hidden layer widths, input side first; [] = no hidden layer"},
    {"model.activation", HT_CK_STR, 0, "\"relu\"", 0, 0, ht_activation_names,
     FIELD(model.activation), "activation after each hidden layer"},
    {"model.layers", HT_CK_STRS, 0, DEFAULT_CNN, 0, HT_MAX_LAYERS, NULL,
     offsetof(ht_config, model.layers), sizeof(((ht_config *)0)->model.layers),
     offsetof(ht_config, model.nlayers),
     "cnn: layers, input side first: \"conv K N [stride=S] [pad=P]\", \"maxpool K [stride=S]\", "
     "\"avgpool K [stride=S]\", \"relu\", \"gelu\", \"flatten\", \"linear N\"; the default is "
     "the MNIST CNN"},
    {"model.input_shape", HT_CK_INTS, GE, "[]", 1, 0, NULL, offsetof(ht_config, model.input_shape),
     sizeof(((ht_config *)0)->model.input_shape), offsetof(ht_config, model.ninput_shape),
     "cnn: input [C, H, W]; [] = from the data (1 x S x S for S*S features, as MNIST)"},
    {"model.n_layer", HT_CK_INT, GE | LE, "4", 0, 10000, NULL, FIELD(model.n_layer),
     "gpt: transformer blocks"},
    {"model.d_model", HT_CK_INT, GE | LE, "128", 1, 1 << 20, NULL, FIELD(model.d_model),
     "gpt: channels of the residual stream"},
    {"model.n_head", HT_CK_INT, GE, "4", 1, 0, NULL, FIELD(model.n_head),
     "gpt: attention heads; must divide d_model"},
    {"model.context", HT_CK_INT, GE, "64", 1, 0, NULL, FIELD(model.context),
     "gpt: context length in tokens (T)"},
    {"model.vocab", HT_CK_INT, GE | LE, "256", 1, 65536, NULL, FIELD(model.vocab),
     "gpt: vocabulary size (token ids 0..vocab-1); 256 for byte-level text, e.g. 50257 for "
     "GPT-2's BPE token files"},
    {"model.tie_embeddings", HT_CK_BOOL, 0, "false", 0, 0, NULL, FIELD(model.tie_embeddings),
     "gpt: the head is the token embedding wte, without bias (GPT-2's tying: one tensor, "
     "its gradient summed from both uses; under a pipeline the last stage holds a copy, kept "
     "equal by summing the two copies' gradients)"},
    {"model.init_from", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(model.init_from),
     "initial weights instead of the random init: a hettrain checkpoint (parameters only), or "
     "gpt: a Hugging Face GPT-2 model.safetensors or its sharded index json; \"\" = random"},
    {"model.dropout", HT_CK_NUM, GE | LT, "0", 0, 1, NULL, FIELD(model.dropout),
     "gpt: dropout on the embedding and the residual branches while training"},

    {"data.kind", HT_CK_STR, 0, "\"synthetic\"", 0, 0, ht_data_kind_names, FIELD(data.kind),
     "data source: generated samples, IDX files (MNIST), a text file read as bytes, or token "
     "files (the last two for model.type gpt)"},
    {"data.images", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(data.images),
     "IDX image file, plain or .gz; required when kind = \"idx\""},
    {"data.labels", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(data.labels),
     "IDX label file, plain or .gz; required when kind = \"idx\""},
    {"data.path", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(data.path),
     "text file, read as bytes (vocabulary 256), or token files: one file or a glob of shards "
     "(nanoGPT's raw uint16, llm.c's .bin shards); required when kind = \"text\" or "
     "\"tokens\""},
    {"data.val_path", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(data.val_path),
     "tokens: validation token files (a file or a glob); \"\" = hold out the last "
     "val_fraction of data.path"},
    {"data.val_fraction", HT_CK_NUM, GE | LT, "0.2", 0, 1, NULL, FIELD(data.val_fraction),
     "last fraction of the samples (text, tokens: of the stream) held out for validation"},
    {"data.samples", HT_CK_INT, GE, "10000", 1, 0, NULL, FIELD(data.samples),
     "synthetic: number of samples"},
    {"data.features", HT_CK_INT, GE, "64", 1, 0, NULL, FIELD(data.features),
     "synthetic: input dimension"},
    {"data.classes", HT_CK_INT, GE, "10", 2, 0, NULL, FIELD(data.classes),
     "synthetic: number of classes"},
    {"data.seed", HT_CK_U64, GE, "1", 0, 0, NULL, FIELD(data.seed), "synthetic: generator seed"},
    {"data.shuffle", HT_CK_BOOL, 0, "true", 0, 0, NULL, FIELD(data.shuffle),
     "shuffle the training samples each epoch"},

    {"train.batch", HT_CK_INT, REQ | GE, NULL, 1, 0, NULL, FIELD(train.batch), "global batch size"},
    {"train.steps", HT_CK_INT, GE, "0", 0, 0, NULL, FIELD(train.steps),
     "optimizer steps; 0 = derive from epochs (steps or epochs must be > 0)"},
    {"train.epochs", HT_CK_NUM, GE | LE, "0", 0, 1e6, NULL, FIELD(train.epochs),
     "passes over the training set, used when steps = 0"},
    {"train.seed", HT_CK_U64, GE, "42", 0, 0, NULL, FIELD(train.seed),
     "seed for initialisation and data order"},
    {"train.eval_every", HT_CK_INT, GE, "0", 0, 0, NULL, FIELD(train.eval_every),
     "steps between validations; 0 = only at the end"},
    {"train.eval_batches", HT_CK_INT, GE, "20", 1, 0, NULL, FIELD(train.eval_batches),
     "text: batches of fixed validation windows per evaluation"},

    {"optim.type", HT_CK_STR, 0, "\"sgd\"", 0, 0, ht_optimizer_names, FIELD(optim.type),
     "optimizer"},
    {"optim.lr", HT_CK_NUM, REQ | GT, NULL, 0, 0, NULL, FIELD(optim.lr),
     "learning rate: the peak value, reached after warmup"},
    {"optim.momentum", HT_CK_NUM, GE | LT, "0.9", 0, 1, NULL, FIELD(optim.momentum),
     "sgd: momentum"},
    {"optim.nesterov", HT_CK_BOOL, 0, "false", 0, 0, NULL, FIELD(optim.nesterov),
     "sgd: Nesterov momentum"},
    {"optim.beta1", HT_CK_NUM, GE | LT, "0.9", 0, 1, NULL, FIELD(optim.beta1),
     "adamw: decay of the first moment"},
    {"optim.beta2", HT_CK_NUM, GE | LT, "0.999", 0, 1, NULL, FIELD(optim.beta2),
     "adamw: decay of the second moment"},
    {"optim.eps", HT_CK_NUM, GT, "1e-8", 0, 0, NULL, FIELD(optim.eps),
     "adamw: added to the denominator"},
    {"optim.weight_decay", HT_CK_NUM, GE, "0", 0, 0, NULL, FIELD(optim.weight_decay),
     "weight decay coefficient"},
    {"optim.schedule", HT_CK_STR, 0, "\"constant\"", 0, 0, ht_lr_schedule_names,
     FIELD(optim.schedule), "learning-rate schedule after warmup"},
    {"optim.warmup", HT_CK_INT, GE, "0", 0, 0, NULL, FIELD(optim.warmup),
     "linear warmup steps from 0 to lr"},
    {"optim.step_size", HT_CK_INT, GE, "1000", 1, 0, NULL, FIELD(optim.step_size),
     "step: decay the rate every step_size steps"},
    {"optim.gamma", HT_CK_NUM, GT, "0.1", 0, 0, NULL, FIELD(optim.gamma),
     "step: factor applied at each decay"},
    {"optim.min_lr", HT_CK_NUM, GE, "0", 0, 0, NULL, FIELD(optim.min_lr),
     "cosine: floor of the rate (at most lr)"},
    {"optim.clip", HT_CK_NUM, GE, "0", 0, 0, NULL, FIELD(optim.clip),
     "clip the global gradient norm to this; 0 = off"},

    {"device.select", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(device.select),
     "device: \"\" (the host's GPUs, else device 0), an index, \"cpu\", \"gpu\", or a "
     "name/vendor/platform substring, :N = match N from 0; under mpirun a rank takes the match "
     "at its local rank"},
    {"device.cache", HT_CK_BOOL, 0, "true", 0, 0, NULL, FIELD(device.cache),
     "cache compiled OpenCL programs on disk"},
    {"device.cache_dir", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(device.cache_dir),
     "program cache folder; \"\" = $XDG_CACHE_HOME/hettrain or ~/.cache/hettrain"},
    {"device.tuning", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(device.tuning),
     "CLBlast tuning file, applied on top of the built-in set: one more GEMM variant the "
     "probe measures (HT_GEMM=clblast-tuned forces it); \"\" = none"},
    {"device.memory_mb", HT_CK_NUM, GE, "0", 0, 0, NULL, FIELD(device.memory_mb),
     "memory limit of each rank's device in MB (10^6 bytes) that a pipeline plans against "
     "(recomputation, micro-batches in flight, the hetero partition); 0 = the device's "
     "reported global memory"},

    {"log.metrics", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(log.metrics),
     "JSON Lines metrics file; \"\" = none"},
    {"log.tensorboard", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(log.tensorboard),
     "folder for TensorBoard event files of the same records (created when absent); \"\" = none"},
    {"log.progress", HT_CK_STR, 0, "\"auto\"", 0, 0, ht_progress_names, FIELD(log.progress),
     "progress display"},
    {"log.every", HT_CK_INT, GE, "10", 1, 0, NULL, FIELD(log.every),
     "steps between plain progress lines and metrics records"},

    {"checkpoint.path", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(checkpoint.path),
     "checkpoint file (safetensors); \"\" = none"},
    {"checkpoint.every", HT_CK_INT, GE, "0", 0, 0, NULL, FIELD(checkpoint.every),
     "steps between checkpoints; 0 = only at the end"},
    {"checkpoint.shards", HT_CK_INT, GE, "0", 0, 0, NULL, FIELD(checkpoint.shards),
     "0 = one file; K = a sharded set of K files in Hugging Face's layout (PATH-0000i-of-0000K"
     ".safetensors and the index json), committed atomically; data-parallel ranks each write "
     "theirs"},

    {"cluster.shares", HT_CK_INTS, GE, "[]", 1, 0, NULL, offsetof(ht_config, cluster.shares),
     sizeof(((ht_config *)0)->cluster.shares), offsetof(ht_config, cluster.nshares),
     "mpirun: samples of train.batch per rank, one per rank, summing to train.batch; [] = by "
     "cluster.split"},
    {"cluster.split", HT_CK_ENUM, 0, "\"equal\"", 0, 0, ht_split_names, FIELD(cluster.split),
     "mpirun, no shares: how train.batch is split (speed: a rank that costs more than its "
     "samples save gets share 0)"},
    {"cluster.profile", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(cluster.profile),
     "mpirun, split \"speed\": hetprof profile giving each rank's device speed for this model; "
     "\"\" = time one pass per rank at start-up"},
    {"cluster.rebalance", HT_CK_BOOL, 0, "true", 0, 0, NULL, FIELD(cluster.rebalance),
     "mpirun, split \"speed\": keep re-splitting the batch as the measured per-rank step times "
     "drift (a fixed plus a per-sample cost per rank, fitted online)"},
    {"cluster.exclude_slow", HT_CK_BOOL, 0, "true", 0, 0, NULL, FIELD(cluster.exclude_slow),
     "mpirun, split \"speed\", bsp: a rank the split leaves out (share 0: it would make the "
     "step slower) takes no part at all (not even in the gradient sums) and exits 0 at the end, "
     "so that adding a device never slows the job; false = every rank stays in: a share-0 rank "
     "synchronises, and the rebalancer may bring it back"},
    {"cluster.devices", HT_CK_STRS, 0, "[]", 0, HT_MAX_RANKS, NULL,
     offsetof(ht_config, cluster.devices), sizeof(((ht_config *)0)->cluster.devices),
     offsetof(ht_config, cluster.ndevices),
     "mpirun: device selector per rank (as device.select), or one for all; [] = device.select"},
    {"cluster.slowdown", HT_CK_NUMS, GE | LE, "[]", 1, HT_MAX_SLOWDOWN, NULL,
     offsetof(ht_config, cluster.slowdown), sizeof(((ht_config *)0)->cluster.slowdown),
     offsetof(ht_config, cluster.nslowdown),
     "mpirun: emulated heterogeneity, one factor per rank: a rank idles (f-1) x its compute "
     "time after each compute phase; [] = none"},
    {"cluster.slowdown_from", HT_CK_INTS, GE, "[]", 0, 0, NULL,
     offsetof(ht_config, cluster.slowdown_from), sizeof(((ht_config *)0)->cluster.slowdown_from),
     offsetof(ht_config, cluster.nslowdown_from),
     "mpirun, with cluster.slowdown: the step from which each rank's slowdown applies (before "
     "it the rank runs at its own speed), one per rank; [] = from the start"},
    {"cluster.hosts", HT_CK_INTS, GE, "[]", 0, 0, NULL, offsetof(ht_config, cluster.hosts),
     sizeof(((ht_config *)0)->cluster.hosts), offsetof(ht_config, cluster.nhosts),
     "mpirun: a host id per rank for the pipeline's hetero partition (HePipe's first level: "
     "cuts between hosts, replicated stages within one), e.g. [0, 0, 1, 1] to emulate two "
     "hosts on one machine; [] = by host name"},
    {"cluster.allreduce", HT_CK_ENUM, 0, "\"ring\"", 0, 0, ht_allreduce_names,
     FIELD(cluster.allreduce), "mpirun: the gradient all-reduce"},
    {"cluster.shard", HT_CK_ENUM, 0, "\"none\"", 0, 0, ht_shard_names, FIELD(cluster.shard),
     "mpirun, bsp: \"optimizer\" (ZeRO-1): each rank keeps the optimizer state of its slice of "
     "the parameters only, slices in proportion to each rank's device memory (device.memory_mb, "
     "else the device's); the updated slices are all-gathered"},
    {"cluster.overlap", HT_CK_BOOL, 0, "true", 0, 0, NULL, FIELD(cluster.overlap),
     "mpirun: reduce gradients in buckets while backward runs (false: all after backward)"},
    {"cluster.bucket_first_mb", HT_CK_NUM, GT, "1", 0, 0, NULL, FIELD(cluster.bucket_first_mb),
     "mpirun, overlap: size of the first gradient bucket (the last layers), MiB"},
    {"cluster.bucket_cap_mb", HT_CK_NUM, GT, "25", 0, 0, NULL, FIELD(cluster.bucket_cap_mb),
     "mpirun, overlap: size cap of the other gradient buckets, MiB"},

    {"sync.mode", HT_CK_ENUM, 0, "\"bsp\"", 0, 0, ht_sync_mode_names, FIELD(sync.mode),
     "mpirun: synchronisation policy (parameter servers: the last sync.servers ranks; partial "
     "reduce and gossip: the last rank coordinates)"},
    {"sync.servers", HT_CK_INT, GE, "1", 1, 0, NULL, FIELD(sync.servers),
     "asp, ssp, dasp: parameter server ranks (the last ranks), each holding a contiguous shard"},
    {"sync.staleness", HT_CK_INT, GE, "3", 0, 0, NULL, FIELD(sync.staleness),
     "ssp: bound s: a worker at clock c waits until every worker has reached c - s"},
    {"sync.group", HT_CK_INT, GE, "2", 2, 0, NULL, FIELD(sync.group),
     "preduce, sap-reduce: group size P (the first P ready workers average their models)"},
    {"sync.deadline_ms", HT_CK_NUM, GE, "100", 0, 0, NULL, FIELD(sync.deadline_ms),
     "preduce, sap-reduce: a group forms with fewer than P when the oldest waiting worker has "
     "waited this long; 0 = never"},
    {"sync.global_every", HT_CK_INT, GE, "10", 0, 0, NULL, FIELD(sync.global_every),
     "preduce, sap-reduce: every N-th group is global (all workers); 0 = never"},
    {"sync.alpha", HT_CK_NUM, GT | LT, "0.9", 0, 1, NULL, FIELD(sync.alpha),
     "sap-reduce: staleness level k gets mass alpha^(k-1) (1 - alpha)"},
    {"sync.period", HT_CK_INT, GE, "1", 1, 0, NULL, FIELD(sync.period),
     "gossip: steps between exchanges with a peer"},
    {"sync.threshold", HT_CK_NUM, GE, "0.01", 0, 0, NULL, FIELD(sync.threshold),
     "gossip-adaptive: exchange when ||w - w_last|| / ||w_last|| exceeds this"},
    {"sync.max_period", HT_CK_INT, GE, "20", 1, 0, NULL, FIELD(sync.max_period),
     "gossip-adaptive: exchange at least every this many steps"},
    {"sync.similar", HT_CK_NUM, GE, "1.5", 1, 0, NULL, FIELD(sync.similar),
     "dasp: workers whose iteration times are within this ratio of their group's fastest "
     "synchronise with each other"},
    {"sync.interval", HT_CK_INT, GE, "20", 1, 0, NULL, FIELD(sync.interval),
     "dasp: server updates between re-evaluations of the workers' parallel states"},
    {"sync.max_ahead", HT_CK_INT, GE, "50", 0, 0, NULL, FIELD(sync.max_ahead),
     "dasp: an ASYNC worker more than this many clocks ahead of the slowest waits; 0 = never"},
    {"sync.log", HT_CK_STR, 0, "\"\"", 0, 0, NULL, FIELD(sync.log),
     "the server's / coordinator's decision log (JSON Lines: releases, groups, states); "
     "\"\" = none"},
    {"pipe.schedule", HT_CK_ENUM, 0, "\"none\"", HT_PIPE_NONE, 0, ht_pipe_schedule_names,
     FIELD(pipe.schedule), "mpirun: pipeline schedule"},
    {"pipe.stages", HT_CK_INT, GE, "2", 1, 0, NULL, FIELD(pipe.stages),
     "pipeline ranks D; the ranks are D x replicas, each replica a data-parallel copy"},
    {"pipe.micro_batches", HT_CK_INT, GE, "4", 1, 0, NULL, FIELD(pipe.micro_batches),
     "micro-batches N per global batch and replica; train.batch must be a multiple of "
     "N x replicas"},
    {"pipe.chunks", HT_CK_INT, GE, "2", 1, 0, NULL, FIELD(pipe.chunks),
     "interleaved: model chunks v per rank (stages = D x v)"},
    {"pipe.partition", HT_CK_ENUM, 0, "\"uniform\"", 0, 0, ht_partition_names, FIELD(pipe.partition),
     "how layers become stages"},
    {"pipe.recompute", HT_CK_ENUM, 0, "\"auto\"", 0, 0, ht_recompute_names, FIELD(pipe.recompute),
     "which activations a pipeline stage recomputes"},
    {"pipe.rebalance", HT_CK_BOOL, 0, "true", 0, 0, NULL, FIELD(pipe.rebalance),
     "partition \"hetero\" with gpipe, 1f1b or hepipe: cut the model again while it trains "
     "when a rank's measured compute drifts from its start-up times (10% to gain, every 10 "
     "steps at most, undone if the step gets slower)"},
    {"pipe.replicate", HT_CK_BOOL, 0, "false", 0, 0, NULL, FIELD(pipe.replicate),
     "partition \"hetero\" with gpipe, 1f1b or hepipe: a stage may run on several adjacent "
     "ranks of a host, each computing its speed's share of every micro-batch and all of them "
     "summing the stage's gradients (fewer stages than pipe.stages ranks: HePipe's replicated "
     "stages); the cut then stays as planned (no pipe.rebalance)"},
    {"pipe.boundaries", HT_CK_INTS, GE, "[]", 1, 0, NULL, offsetof(ht_config, pipe.boundaries),
     sizeof(((ht_config *)0)->pipe.boundaries), offsetof(ht_config, pipe.nboundaries),
     "explicit stage boundaries: the first layer of stages 1 .. S-1, increasing (overrides "
     "pipe.partition); [] = none"},
    {"pipe.stage_ranks", HT_CK_INTS, GE, "[]", 1, 0, NULL, offsetof(ht_config, pipe.stage_ranks),
     sizeof(((ht_config *)0)->pipe.stage_ranks), offsetof(ht_config, pipe.nstage_ranks),
     "with pipe.boundaries and gpipe, 1f1b or hepipe: how many adjacent ranks run each stage "
     "(summing to pipe.stages), each computing an equal share of every micro-batch (explicit "
     "replicated stages; pipe.replicate lets the hetero partition choose them by speed); [] = "
     "one rank each"},
};
const int ht_config_nkeys = (int)(sizeof ht_config_keys / sizeof ht_config_keys[0]);

/* ------------------------------------------------------------------------------------ */
/* Lookups and descriptions                                                             */

size_t ht_ckey_elem(const ht_ckey *k) { return k->size / (size_t)k->max; }

int ht_ckey_check_elem(const ht_ckey *k, const char *value, char *err, size_t n) {
    if (!strcmp(k->path, "model.layers")) return check_layer(value, err, n);
    return HT_OK;
}

int ht_ckey_find(const char *path) {
    for (int i = 0; i < ht_config_nkeys; i++)
        if (strcmp(ht_config_keys[i].path, path) == 0) return i;
    return -1;
}

const char *ht_ckey_type_name(ht_ckind kind) {
    switch (kind) {
    case HT_CK_INT:
    case HT_CK_U64:
        return "integer";
    case HT_CK_NUM:
        return "number";
    case HT_CK_BOOL:
        return "boolean";
    case HT_CK_STR:
    case HT_CK_ENUM:
        return "string";
    case HT_CK_INTS:
        return "int array";
    case HT_CK_NUMS:
        return "number array";
    case HT_CK_STRS:
        return "string array";
    }
    return "?";
}

void ht_fmt_num(double v, char *buf, size_t n) {
    /* shortest of %.15g / %.17g that reads back as the same double */
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
}

void ht_ckey_expect(const ht_ckey *k, char *buf, size_t n) {
    char lo[32], hi[32];
    size_t len;
    if (k->choices) {
        len = (size_t)snprintf(buf, n, "one of");
        for (int i = 0; k->choices[i] && len < n; i++)
            len += (size_t)snprintf(buf + len, n - len, "%s \"%s\"", i ? "," : "", k->choices[i]);
        return;
    }
    switch (k->kind) {
    case HT_CK_NUM:
    case HT_CK_NUMS:
        len = (size_t)snprintf(buf, n, "a number");
        break;
    case HT_CK_BOOL:
        snprintf(buf, n, "a boolean (true or false)");
        return;
    case HT_CK_STR:
    case HT_CK_STRS:
        snprintf(buf, n, "a string");
        return;
    default:
        len = (size_t)snprintf(buf, n, "an integer");
        break;
    }
    ht_fmt_num(k->min, lo, sizeof lo);
    ht_fmt_num(k->max, hi, sizeof hi);
    const char *lop = k->flags & HT_CF_GT ? ">" : ">=", *hip = k->flags & HT_CF_LT ? "<" : "<=";
    int has_lo = (k->flags & (HT_CF_GE | HT_CF_GT)) != 0;
    int has_hi = (k->flags & (HT_CF_LE | HT_CF_LT)) != 0;
    if (has_lo && len < n) len += (size_t)snprintf(buf + len, n - len, " %s %s", lop, lo);
    if (has_hi && len < n) snprintf(buf + len, n - len, "%s %s %s", has_lo ? " and" : "", hip, hi);
}

/* ------------------------------------------------------------------------------------ */
/* Did you mean                                                                         */

int ht_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return (int)(la > lb ? la : lb); /* names are short */
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* Distance, counting "one is a prefix of the other" (optimizer/optim) as 1. */
static int name_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), m = la < lb ? la : lb;
    int d = ht_edit_distance(a, b);
    if (d > 1 && m >= 3 && strncmp(a, b, m) == 0) d = 1;
    return d;
}

static int close_enough(int dist, const char *name) {
    size_t len = strlen(name);
    int limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    return dist <= limit;
}

const char *ht_closest(const char *name, const char *const *cand, int ncand) {
    const char *best = NULL;
    int bestd = INT_MAX;
    for (int i = 0; i < ncand; i++) {
        int d = name_distance(name, cand[i]);
        if (d < bestd) bestd = d, best = cand[i];
    }
    return best && close_enough(bestd, name) ? best : NULL;
}

const char *ht_closest_key(const char *group, const char *leaf) {
    char full[256];
    snprintf(full, sizeof full, "%s%s%s", group, group[0] ? "." : "", leaf);
    const char *best = NULL;
    int bestd = INT_MAX;
    for (int i = 0; i < ht_config_nkeys; i++) {
        const char *path = ht_config_keys[i].path, *dot = strchr(path, '.');
        int same_group = strlen(group) == (size_t)(dot - path) &&
                         strncmp(group, path, (size_t)(dot - path)) == 0;
        int d = ht_edit_distance(full, path);
        int dleaf = name_distance(leaf, dot + 1) + !same_group;
        if (dleaf < d) d = dleaf;
        if (d < bestd) bestd = d, best = path;
    }
    return best && close_enough(bestd, leaf) ? best : NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Printing the schema and writing a configuration                                     */

void ht_config_print_schema(void *file) {
    FILE *f = file;
    char expect[256];
    fprintf(f, "# %-24s %-10s %-12s %s\n", "key", "type", "default", "meaning");
    for (int i = 0; i < ht_config_nkeys; i++) {
        const ht_ckey *k = &ht_config_keys[i];
        fprintf(f, "%-26s %-10s %-12s %s", k->path, ht_ckey_type_name(k->kind),
                k->def ? k->def : "(required)", k->doc);
        int ranged = (k->flags & (HT_CF_GE | HT_CF_GT | HT_CF_LE | HT_CF_LT)) != 0;
        const char *const *docs = ht_choice_docs(k->choices);
        if (docs) {
            fputs("; one of:", f);
            for (int c = 0; k->choices[c]; c++)
                fprintf(f, "%s \"%s\" = %s", c ? ";" : "", k->choices[c], docs[c]);
        } else if (k->choices || ranged) {
            ht_ckey_expect(k, expect, sizeof expect);
            fprintf(f, "; %s%s", k->kind == HT_CK_INTS || k->kind == HT_CK_NUMS ? "each " : "",
                    expect);
        }
        fputc('\n', f);
    }
}

static void write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void write_value(FILE *f, const ht_ckey *k, const char *base) {
    const void *p = base + k->off;
    char num[40];
    switch (k->kind) {
    case HT_CK_INT:
        fprintf(f, "%d", *(const int *)p);
        break;
    case HT_CK_U64: {
        unsigned long long v = *(const uint64_t *)p;
        fprintf(f, "%llu%s", v, v > INT_MAX ? "L" : "");
        break;
    }
    case HT_CK_NUM:
        ht_fmt_num(*(const double *)p, num, sizeof num);
        fputs(num, f);
        break;
    case HT_CK_BOOL:
        fputs(*(const int *)p ? "true" : "false", f);
        break;
    case HT_CK_STR:
        write_string(f, p);
        break;
    case HT_CK_ENUM:
        write_string(f, k->choices[*(const int *)p - (int)k->min]);
        break;
    case HT_CK_INTS: {
        int count = *(const int *)(base + k->off_count);
        fputc('[', f);
        for (int j = 0; j < count; j++)
            fprintf(f, "%s%d", j ? ", " : "", ((const int *)p)[j]);
        fputc(']', f);
        break;
    }
    case HT_CK_NUMS: {
        int count = *(const int *)(base + k->off_count);
        fputc('[', f);
        for (int j = 0; j < count; j++) {
            ht_fmt_num(((const double *)p)[j], num, sizeof num);
            /* an integral value gets a ".0": libconfig arrays hold one type */
            fprintf(f, "%s%s%s", j ? ", " : "", num, strpbrk(num, ".eEn") ? "" : ".0");
        }
        fputc(']', f);
        break;
    }
    case HT_CK_STRS: {
        int count = *(const int *)(base + k->off_count);
        fputc('[', f);
        for (int j = 0; j < count; j++) {
            if (j) fputs(", ", f);
            write_string(f, (const char *)p + (size_t)j * ht_ckey_elem(k));
        }
        fputc(']', f);
        break;
    }
    }
}

/* 1 when key k holds the same value in the configurations at a and b. */
static int same_value(const ht_ckey *k, const char *a, const char *b) {
    const char *x = a + k->off, *y = b + k->off;
    switch (k->kind) {
    case HT_CK_INT:
    case HT_CK_BOOL:
    case HT_CK_ENUM:
        return *(const int *)x == *(const int *)y;
    case HT_CK_U64:
        return *(const uint64_t *)x == *(const uint64_t *)y;
    case HT_CK_NUM:
        return *(const double *)x == *(const double *)y;
    case HT_CK_STR:
        return !strcmp(x, y);
    default: {
        int n = *(const int *)(a + k->off_count);
        if (n != *(const int *)(b + k->off_count)) return 0;
        size_t elem = k->kind == HT_CK_INTS   ? sizeof(int)
                      : k->kind == HT_CK_NUMS ? sizeof(double)
                                              : ht_ckey_elem(k);
        for (int j = 0; j < n; j++) /* strings: compare up to the terminator only */
            if (k->kind == HT_CK_STRS ? strcmp(x + j * elem, y + j * elem) != 0
                                      : memcmp(x + j * elem, y + j * elem, elem) != 0)
                return 0;
        return 1;
    }
    }
}

/* The model family a model.* key belongs to ("": model.type, or a key not listed here, which
 * is then written when it differs from its default). */
static const char *model_family(const char *path) {
    static const char *const fam[][2] = {
        {"model.hidden", "mlp"},      {"model.activation", "mlp"},    {"model.layers", "cnn"},
        {"model.input_shape", "cnn"}, {"model.n_layer", "gpt"},       {"model.d_model", "gpt"},
        {"model.n_head", "gpt"},      {"model.context", "gpt"},       {"model.dropout", "gpt"},
        {"model.vocab", "gpt"},       {"model.tie_embeddings", "gpt"}};
    for (size_t i = 0; i < sizeof fam / sizeof *fam; i++)
        if (!strcmp(path, fam[i][0])) return fam[i][1];
    return "";
}

/* Writes the keys with keep[i] set, group by group (a group with none is left out). */
static void write_keys(FILE *f, const ht_config *cfg, const unsigned char *keep) {
    const char *base = (const char *)cfg;
    size_t glen = 0;
    int open = 0;
    for (int i = 0; i < ht_config_nkeys; i++) {
        const ht_ckey *k = &ht_config_keys[i];
        const char *dot = strchr(k->path, '.');
        if (keep && !keep[i]) continue;
        if (!open || strncmp(k->path, ht_config_keys[open - 1].path, glen + 1) != 0) {
            if (open) fputs("};\n", f);
            glen = (size_t)(dot - k->path);
            fprintf(f, "%.*s = {\n", (int)glen, k->path);
        }
        open = i + 1;
        fprintf(f, "    %s = ", dot + 1);
        write_value(f, k, base);
        fputs(";\n", f);
    }
    if (open) fputs("};\n", f);
}

void ht_config_write(void *file, const ht_config *cfg) {
    FILE *f = file;
    fprintf(f, "# hettrain configuration%s%s\n", cfg->source[0] ? ", read from " : "", cfg->source);
    write_keys(f, cfg, NULL);
}

int ht_config_write_changes(void *file, const ht_config *cfg) {
    static const char *const req[] = {"train.batch=1", "optim.lr=1", "train.steps=1"};
    ht_config *def = ht_xmalloc(sizeof *def); /* the defaults, with placeholders for the
                                                 required keys (always written) */
    int rc = ht_config_load(def, NULL, req, 3);
    unsigned char *keep = ht_xcalloc((size_t)ht_config_nkeys, 1);
    for (int i = 0; rc == HT_OK && i < ht_config_nkeys; i++) {
        const ht_ckey *k = &ht_config_keys[i];
        const char *fam = strncmp(k->path, "model.", 6) ? "" : model_family(k->path);
        if (fam[0]) /* a model family's keys: its own, always; another's, never */
            keep[i] = !strcmp(fam, cfg->model.type);
        else
            keep[i] = (k->flags & HT_CF_REQ) || !strcmp(k->path, "model.type") ||
                      !strcmp(k->path, "train.steps") || /* a placeholder above, like REQ */
                      !same_value(k, (const char *)cfg, (const char *)def);
    }
    if (rc == HT_OK) write_keys(file, cfg, keep);
    free(keep);
    free(def);
    return rc;
}
