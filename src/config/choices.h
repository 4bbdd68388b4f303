/* The keys whose value is one of a fixed list, other than the modes (config/modes.h): one
 * row per choice, giving its enum (where the config holds one), its name in a config and
 * one line for --help-config. The schema's choices, the help text, the "expected ..."
 * messages and every user of the key read these rows; no other list of the names exists.
 * X-macro rows for the reason modes.h gives: one list expands into the enum, the names and
 * the descriptions. */
#ifndef HT_CONFIG_CHOICES_H
#define HT_CONFIG_CHOICES_H

/* Each row: X(enum id, name, description). */
#define HT_CHOICE_ID_(id, name, doc) id,

/* pipe.partition: how the layers are cut into stages when pipe.boundaries does not say */
#define HT_PARTITION_ROWS(X)                                                                       \
    X(HT_PART_UNIFORM, "uniform", "equal numbers of layers per stage")                             \
    X(HT_PART_BALANCED, "balanced", "stages of equal forward + backward FLOPs")                    \
    X(HT_PART_HETERO, "hetero",                                                                    \
      "stages cut by layer times measured at start-up on every rank, and memory (HePipe)")
typedef enum { HT_PARTITION_ROWS(HT_CHOICE_ID_) HT_PART_N } ht_partition_kind;

/* pipe.recompute: which stages' activations are recomputed in the backward */
#define HT_RECOMPUTE_ROWS(X)                                                                       \
    X(HT_RECOMP_AUTO, "auto",                                                                      \
      "where a rank's predicted memory exceeds device.memory_mb, drop after the forward and "      \
      "recompute before the backward the layers freeing the most memory per recompute time "       \
      "(hepipe: or hold fewer micro-batches in flight); nothing when it fits")                     \
    X(HT_RECOMP_NONE, "none", "never: every activation is kept")                                   \
    X(HT_RECOMP_ALL, "all", "every stage keeps only its input (about one more forward)")
typedef enum { HT_RECOMPUTE_ROWS(HT_CHOICE_ID_) HT_RECOMP_N } ht_recompute;

/* cluster.split: the batch shares when cluster.shares does not give them */
#define HT_SPLIT_ROWS(X)                                                                           \
    X(HT_SPLIT_EQUAL, "equal", "equal shares")                                                     \
    X(HT_SPLIT_SPEED, "speed", "shares by each rank's measured (or profiled) speed")
typedef enum { HT_SPLIT_ROWS(HT_CHOICE_ID_) HT_SPLIT_N } ht_split;

/* cluster.allreduce: the data-parallel gradient sum */
#define HT_ALLREDUCE_ROWS(X)                                                                       \
    X(HT_ALLRED_RING, "ring", "hettrain's ring over point-to-point messages (deterministic)")      \
    X(HT_ALLRED_MPI, "mpi", "the MPI library's MPI_Allreduce")
typedef enum { HT_ALLREDUCE_ROWS(HT_CHOICE_ID_) HT_ALLRED_N } ht_allreduce;

/* cluster.shard: data-parallel state kept in slices (ZeRO) */
#define HT_SHARD_ROWS(X)                                                                           \
    X(HT_SHARD_NONE, "none", "every rank keeps the whole optimizer state")                         \
    X(HT_SHARD_OPTIMIZER, "optimizer",                                                             \
      "each rank keeps the optimizer state of its slice, sized to its memory (ZeRO-1)")            \
    X(HT_SHARD_GRADIENTS, "gradients",                                                             \
      "as optimizer, and the gradients are reduce-scattered: each rank receives the sum of its "   \
      "slice only (ZeRO-2; the gradients are reduced after backward in one piece)")
typedef enum { HT_SHARD_ROWS(HT_CHOICE_ID_) HT_SHARD_N } ht_shard;

/* Names and descriptions in row order, NULL-terminated (the schema's choices). */
extern const char *const ht_partition_names[], *const ht_partition_docs[];
extern const char *const ht_recompute_names[], *const ht_recompute_docs[];
extern const char *const ht_split_names[], *const ht_split_docs[];
extern const char *const ht_allreduce_names[], *const ht_allreduce_docs[];
extern const char *const ht_shard_names[], *const ht_shard_docs[];

/* Choice keys whose field stays a string (a kind of model, data, optimizer...: their users
 * branch on them in many places): names and descriptions in one table each. */
extern const char *const ht_model_type_names[], *const ht_model_type_docs[];
extern const char *const ht_activation_names[], *const ht_activation_docs[];
extern const char *const ht_data_kind_names[], *const ht_data_kind_docs[];
extern const char *const ht_optimizer_names[], *const ht_optimizer_docs[];
extern const char *const ht_lr_schedule_names[], *const ht_lr_schedule_docs[];
extern const char *const ht_progress_names[], *const ht_progress_docs[];

/* The descriptions of the choices in names (one of the name lists above, or modes.h's
 * ht_sync_mode_names / ht_pipe_schedule_names), in the same order; NULL for another list. */
const char *const *ht_choice_docs(const char *const *names);

#endif
