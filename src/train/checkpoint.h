/* Checkpoints: model parameters (one named tensor per layer weight/bias, so NumPy and
 * PyTorch users can read them with safetensors) and optimizer state (flat tensors),
 * with the step and a model signature in the metadata. Written atomically. */
#ifndef HT_TRAIN_CHECKPOINT_H
#define HT_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "io/safetensors.h"
#include "nn/model.h"
#include "optim/optim.h"

/* Identifies what a checkpoint belongs to (the builder's m->desc), e.g. "mlp
 * 784-1024-1024-10 relu", "cnn 1x28x28 conv5x32p2-relu-maxpool2-...", "gpt L4 C128 H4 T64
 * V256". */
void ht_model_signature(const ht_model *m, char *out, size_t n);

/* Writes parameters and optimizer state atomically; refuses (HT_ERUNTIME naming the tensor and
 * element, nothing written, the previous file kept) when any of them is NaN or infinite. */
int ht_checkpoint_save(const char *path, ht_model *m, ht_optim *o, int64_t step,
                       const char *optim_name);
/* What a checkpoint may hold beyond one model and its optimizer (an asynchronous policy's
 * per-worker state): more tensors (checked for finiteness as the others) and metadata. */
typedef struct ht_ckpt_extra {
    const ht_st_tensor *t;
    int nt;
    const char *const *keys, *const *vals;
    int nk;
} ht_ckpt_extra;
/* ht_checkpoint_save with the extras x (may be NULL). */
int ht_checkpoint_save_ex(const char *path, ht_model *m, ht_optim *o, int64_t step,
                          const char *optim_name, const ht_ckpt_extra *x);
/* Reading extras from an opened checkpoint (f from ht_st_open of path): metadata `key` as an
 * integer in [0, 2^62], and tensor `name` of shape [n] with every value finite; HT_EINPUT
 * naming the file and the key or tensor otherwise. */
int ht_checkpoint_meta_int(const ht_st_file *f, const char *path, const char *key, int64_t *out);
const float *ht_checkpoint_tensor(const ht_st_file *f, const char *path, const char *name,
                                  size_t n, int *rc);
/* Loads parameters and optimizer state into device buffers; *step is the step to resume at.
 * HT_EINPUT naming the file and what differs when it does not match the model/optimizer, a
 * tensor holds a NaN or infinity (its name and element), or the metadata do not parse as
 * integers in range (optimizer_steps <= step). Nothing changes on the device then. */
int ht_checkpoint_load(const char *path, ht_model *m, ht_optim *o, int64_t *step,
                       const char *optim_name);
/* ht_checkpoint_load in two parts, for a caller that loads the same checkpoint more than once
 * (the late-start pipeline: the step and the checks at --resume, its window after the plan):
 * open reads the headers only (a file or a set; the descriptors stay open, so a later load
 * reads the same file even if a save replaced it meanwhile); load_from reads the model's
 * window and the optimizer's slice from f (any number of times); ht_st_close(f) at the end. */
int ht_checkpoint_open(ht_st_file **f, const char *path);
int ht_checkpoint_load_from(ht_st_file *f, const char *path, ht_model *m, ht_optim *o,
                            int64_t *step, const char *optim_name);
/* Only the parameters (inference: generation), after the same format and model checks;
 * *step (may be NULL) is the step it was saved at. */
int ht_checkpoint_load_params(const char *path, ht_model *m, int64_t *step);

/* Reads the parameters and optimizer state (o may be NULL) back from the device: HT_OK when
 * every value is finite, else HT_ERUNTIME naming the first tensor and element that is not.
 * The trainer calls it before each save (and may stop on it: the model diverged). */
int ht_checkpoint_finite(ht_model *m, ht_optim *o);

/* HT_EINPUT when a checkpoint's step (from ht_checkpoint_load) is beyond the total steps
 * of this run: resuming it would train nothing and report a finished run. */
int ht_checkpoint_check_step(const char *path, int64_t step, int64_t total);

/* ---- sharded sets (ckpt_set.c; the files and the commit: io/safetensors.h) ---------------
 * Cuts of the flat parameter space into k parts in proportion to weight[0..k) (NULL: equal),
 * each moved to a tensor start: part i is [cut[i], cut[i+1]) (cut has k + 1 entries). */
void ht_checkpoint_shard_ranges(const ht_model *m, const double *weight, int k, size_t *cut);
/* The same cuts of n floats exactly in proportion to weight (each a multiple of 8): the
 * optimizer slices of cluster.shard; a set saved with them holds each parameter tensor whole
 * in the shard where it starts, the optimizer state cut anywhere. */
void ht_checkpoint_shard_cuts(size_t n, const double *weight, int k, size_t *cut);
/* Writes shard i (1-based) of k of the set `base` for the save `step`: the parameter tensors
 * starting in [lo, hi) whole (also where they end past hi), every optimizer state's [lo, hi) as a piece; refuses (nothing
 * written) a NaN or infinity. Then, once every shard is written, ht_st_set_commit. */
int ht_checkpoint_save_shard(const char *base, int i, int k, ht_model *m, ht_optim *o,
                             int64_t step, const char *optim_name, size_t lo, size_t hi);
/* One process writing a whole set of k shards (equal cuts) and committing it. */
int ht_checkpoint_save_set(const char *base, int k, ht_model *m, ht_optim *o, int64_t step,
                           const char *optim_name);

#endif
