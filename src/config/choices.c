/* The rows of config/choices.h expanded into their name and description lists, and the
 * rows of the choice keys that stay strings. */
#include "config/choices.h"

#include <stddef.h>

#include "config/modes.h"

#define NAME_(id, name, doc) name,
#define DOC_(id, name, doc) doc,
#define LISTS_(rows, prefix)                                                                       \
    const char *const prefix##_names[] = {rows(NAME_) NULL};                                       \
    const char *const prefix##_docs[] = {rows(DOC_) NULL};

LISTS_(HT_PARTITION_ROWS, ht_partition)
LISTS_(HT_RECOMPUTE_ROWS, ht_recompute)
LISTS_(HT_SPLIT_ROWS, ht_split)
LISTS_(HT_ALLREDUCE_ROWS, ht_allreduce)
LISTS_(HT_SHARD_ROWS, ht_shard)

/* The string-valued choice keys: X(-, name, description) rows in the same shape. */
#define MODEL_TYPE_ROWS(X)                                                                         \
    X(-, "mlp", "fully connected layers (model.hidden, model.activation)")                         \
    X(-, "cnn", "the layers listed in model.layers")                                               \
    X(-, "gpt", "a byte- or token-level GPT (model.n_layer, d_model, n_head, context)")
#define ACTIVATION_ROWS(X)                                                                         \
    X(-, "relu", "max(0, x)")                                                                      \
    X(-, "gelu", "x * Phi(x), tanh approximation")
#define DATA_KIND_ROWS(X)                                                                          \
    X(-, "synthetic", "generated samples (data.samples, data.features, data.classes)")             \
    X(-, "idx", "IDX image and label files, plain or gzip (MNIST)")                                \
    X(-, "text", "a text file read as bytes (model.type gpt)")                                     \
    X(-, "tokens", "token files: nanoGPT's raw uint16 or llm.c's .bin shards (model.type gpt)")
#define OPTIMIZER_ROWS(X)                                                                          \
    X(-, "sgd", "stochastic gradient descent with optim.momentum")                                 \
    X(-, "adamw", "Adam with decoupled weight decay")
#define LR_SCHEDULE_ROWS(X)                                                                        \
    X(-, "constant", "optim.lr after warmup")                                                      \
    X(-, "step", "multiplied by optim.gamma every optim.step_size steps")                          \
    X(-, "cosine", "cosine decay to optim.min_lr at train.steps")
#define PROGRESS_ROWS(X)                                                                           \
    X(-, "auto", "a bar on a terminal, plain lines otherwise")                                     \
    X(-, "bar", "a progress bar")                                                                  \
    X(-, "plain", "a line every log.every steps")                                                  \
    X(-, "none", "nothing")

LISTS_(MODEL_TYPE_ROWS, ht_model_type)
LISTS_(ACTIVATION_ROWS, ht_activation)
LISTS_(DATA_KIND_ROWS, ht_data_kind)
LISTS_(OPTIMIZER_ROWS, ht_optimizer)
LISTS_(LR_SCHEDULE_ROWS, ht_lr_schedule)
LISTS_(PROGRESS_ROWS, ht_progress)

const char *const *ht_choice_docs(const char *const *names) {
    static const struct {
        const char *const *names, *const *docs;
    } lists[] = {
        {ht_sync_mode_names, ht_sync_mode_docs},   {ht_pipe_schedule_names, ht_pipe_schedule_docs},
        {ht_partition_names, ht_partition_docs},   {ht_recompute_names, ht_recompute_docs},
        {ht_split_names, ht_split_docs},           {ht_allreduce_names, ht_allreduce_docs},
        {ht_shard_names, ht_shard_docs},           {ht_model_type_names, ht_model_type_docs},
        {ht_activation_names, ht_activation_docs}, {ht_data_kind_names, ht_data_kind_docs},
        {ht_optimizer_names, ht_optimizer_docs},   {ht_lr_schedule_names, ht_lr_schedule_docs},
        {ht_progress_names, ht_progress_docs},
    };
    for (size_t i = 0; names && i < sizeof lists / sizeof lists[0]; i++)
        if (lists[i].names == names) return lists[i].docs;
    return NULL;
}
