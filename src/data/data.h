/* Training data: in-memory datasets (MNIST-style IDX files or generated), the
 * train/validation split, a deterministic epoch-by-epoch sample order that any
 * step can be recomputed from (checkpoint resume), and data-parallel sharding. */
#ifndef HT_DATA_DATA_H
#define HT_DATA_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct ht_dataset {
    int n;        /* samples */
    int features; /* floats per sample */
    int classes;
    float *x;   /* n*features, row-major */
    int32_t *y; /* n labels in [0, classes) */
} ht_dataset;

/* ---------------------------------------------------------------- IDX files */

/* MNIST normalisation applied to every IDX pixel p (u8):
 *   x = (p / 255 - HT_MNIST_MEAN) / HT_MNIST_STD
 * (the training-set mean and std used by the usual PyTorch MNIST examples), so
 * 0 -> -0.4242 and 255 -> 2.8215. */
#define HT_MNIST_MEAN 0.1307
#define HT_MNIST_STD 0.3081

/* Largest image set accepted: n*rows*cols <= 2^28 pixels (1 GiB as float). The
 * header is checked against it before anything is allocated. */
#define HT_IDX_MAX_VALUES (1ull << 28)

/* Loads an MNIST-style IDX pair: images (magic 0x00000803, u8, dims n, rows, cols)
 * and labels (magic 0x00000801, u8, n), each plain or gzip (zlib reads both).
 * features = rows*cols; classes = 1 + the largest label (10 for MNIST).
 * Bytes after the data are an error (a longer file is not the file its header
 * describes). Every problem with the files returns HT_EINPUT with a message
 * naming the file, the byte offset (of the decompressed stream for .gz), what was
 * found and what was expected; a corrupt gzip stream likewise. On error *ds is
 * left empty (nothing to free). */
int ht_idx_load(ht_dataset *ds, const char *images_path, const char *labels_path);

/* As ht_idx_load, but when classes > 0 the class count is fixed: a label >= classes
 * is HT_EINPUT (naming the file, offset and label) and ds->classes = classes even if
 * the largest label is smaller. classes == 0 behaves like ht_idx_load. */
int ht_idx_load_classes(ht_dataset *ds, const char *images_path, const char *labels_path,
                        int classes);

/* ------------------------------------------------------------ generated data */

/* Generated classification data, a pure function of (n, features, classes, seed):
 * each class is 2 Gaussian clusters in an 8-dimensional latent space (centres ~
 * N(0, 2^2), unit spread), mixed into all features by a fixed random matrix plus
 * a little per-feature noise (each feature has variance ~1); classes are drawn
 * uniformly (roughly balanced) and 2% of labels are replaced by random classes.
 * Not linearly separable: with 10 classes a small MLP reaches ~90% validation
 * accuracy in a few hundred steps, softmax regression ~70%. A larger n only
 * appends samples (sample i depends on seed, features, classes and i alone).
 * HT_EINPUT for n < 1, features < 1, classes < 2 (or > 2^20) or n*features above
 * HT_IDX_MAX_VALUES. */
int ht_synthetic_make(ht_dataset *ds, int n, int features, int classes, uint64_t seed);

/* Frees x and y and zeroes *ds; safe on a zeroed or already freed dataset. */
void ht_dataset_free(ht_dataset *ds);

/* Holds out the LAST round(val_fraction*n) samples as validation (MNIST t10k with
 * 0.2: 8,000 / 2,000); both parts are copies with all's feature and class counts.
 * val_fraction must be in [0, 1) and leave at least one training sample
 * (HT_EINPUT otherwise); val may get n == 0 (x, y NULL). train and val must not be
 * `all`. On error both outputs are left empty. */
int ht_dataset_split(const ht_dataset *all, double val_fraction, ht_dataset *train,
                     ht_dataset *val);

/* Copies the samples idx[0..count) into x_out (count*features) and y_out (count);
 * either output may be NULL. */
void ht_dataset_gather(const ht_dataset *ds, const int *idx, int count, float *x_out,
                       int32_t *y_out);

/* ------------------------------------------------------ text (byte-level LM) */

/* Bytes of a text file, each a token in [0, 256). A loaded text owns its bytes; the
 * parts ht_text_split makes are views into it (they must not outlive it). */
typedef struct ht_text {
    uint8_t *bytes;
    size_t n;
    int owned;
} ht_text;

/* Largest text accepted (window starts are drawn below 2^32). */
#define HT_TEXT_MAX_BYTES ((size_t)1 << 30)

/* Reads the whole file. HT_EINPUT naming the path for a missing or unreadable file, a
 * directory, an empty file, or one past HT_TEXT_MAX_BYTES. On error *t is left empty. */
int ht_text_load(ht_text *t, const char *path);
/* Frees an owned text and zeroes *t; safe on a zeroed text and on views (no-op free). */
void ht_text_free(ht_text *t);

/* The split of a stream of n bytes or tokens BY POSITION: *nval = round(val_fraction * n) at
 * the end, *ntrain the rest; each part must hold a window of T+1 (val may be empty). HT_EINPUT
 * "<kind> '<path>' is too short: ..." in <unit> otherwise. Text and token files share it. */
int ht_stream_split(size_t n, double val_fraction, int T, const char *kind, const char *path,
                    const char *unit, size_t *ntrain, size_t *nval);
/* Splits BY POSITION: val is the last round(val_fraction * n) bytes, train the rest (views
 * into all). Each part is sampled in windows of T+1 bytes, so train must hold at least
 * T+1 bytes, and val too unless it is empty (val_fraction 0): HT_EINPUT otherwise, naming
 * `path`, the sizes and the context. */
int ht_text_split(const ht_text *all, double val_fraction, int T, const char *path, ht_text *train,
                  ht_text *val);

/* Start of window b of batch `step` over a stream of n tokens: uniform in [0, n - T), a pure
 * function of (seed, step, b). Needs n >= T + 1. Shared by text and token files. */
size_t ht_window_start(size_t n, int T, uint64_t seed, int64_t step, int b);
/* Start of window b of batch `step`: uniform in [0, n - T), a pure function of (seed, step,
 * b) (counter b of stream ht_rng_stream(seed, step)), so any step can be redrawn on resume.
 * Needs n >= T + 1. */
size_t ht_text_window(const ht_text *t, int T, uint64_t seed, int64_t step, int b);
/* Batch `step`: for b < B, tokens[b*T + j] = bytes[s + j] and targets[b*T + j] =
 * bytes[s + j + 1], s = ht_text_window(t, T, seed, step, b). targets may be NULL. */
void ht_text_batch(const ht_text *t, uint64_t seed, int64_t step, int B, int T, int32_t *tokens,
                   int32_t *targets);

/* ------------------------------------------- token files (BPE language models) */

/* One mapped token file: nanoGPT's raw little-endian uint16 ids, or an llm.c shard (a header
 * of 256 int32: magic 20240520, version 1, token count; then the uint16 ids). */
typedef struct ht_tokfile {
    char path[4096];
    void *map;
    size_t maplen;
    const uint16_t *tok; /* into map */
    size_t n;
    size_t first_byte; /* byte offset of tok[0] in the file (1024 for a shard, else 0) */
} ht_tokfile;

/* A set of token files read as one stream, in name order (shards of one dataset). */
typedef struct ht_tokens {
    int nfiles;
    ht_tokfile *f;
    size_t *start; /* start[i]: stream index of f[i].tok[0]; start[nfiles] = n */
    size_t n;
} ht_tokens;

/* A range [lo, lo + n) of a stream: the training or validation part. */
typedef struct ht_tokview {
    const ht_tokens *all;
    size_t lo, n;
} ht_tokview;

/* Maps the file `pattern` names, or every file its glob matches (name order), without
 * reading them into memory, and checks every token against vocab (1..65536). HT_EINPUT
 * prefixed by `what` (the key: "key 'data.path'") naming the file and byte offset for: no
 * file, an empty file, an odd size, a shard whose header disagrees with its size, a token
 * >= vocab. On error *t is left empty. */
int ht_tokens_open(ht_tokens *t, const char *pattern, int vocab, const char *what);
void ht_tokens_free(ht_tokens *t);
/* By position, as ht_text_split: val the last round(val_fraction * n) tokens. Each part
 * must hold a window of T+1 tokens (val may be empty): HT_EINPUT naming `path` otherwise. */
int ht_tokens_split(const ht_tokens *all, double val_fraction, int T, const char *path,
                    ht_tokview *train, ht_tokview *val);
/* The whole stream as one part (a separate validation set); HT_EINPUT if shorter than T+1. */
int ht_tokens_whole(const ht_tokens *all, int T, const char *path, ht_tokview *v);
/* Batch `step` of B windows of T tokens, as ht_text_batch (windows may cross shards). */
void ht_tokens_batch(const ht_tokview *v, uint64_t seed, int64_t step, int B, int T,
                     int32_t *tokens, int32_t *targets);

/* ------------------------------------------------------------- sample order */

/* An infinite stream of epochs over [0, n): epoch e is a permutation that is a
 * pure function of (seed, e) (Fisher-Yates with ht_rng_below over
 * ht_rng_stream(seed, e)), or the identity when shuffle == 0. Global batch `step`
 * is stream positions [step*batch, step*batch + batch), crossing epoch boundaries
 * when n is not a multiple of batch. The permutations of two consecutive epochs
 * are cached, so sequential use costs O(batch) per call amortised and any step
 * can be asked for in any order with the same answer. */
typedef struct ht_sampler {
    int n;
    int shuffle;
    uint64_t seed;
    /* Slot k caches the permutation of epoch epoch[k] (-1: none); epoch e always
     * goes to slot e&1. perm[k] has n entries, allocated on first use. */
    int64_t epoch[2];
    int *perm[2];
    int64_t shuffles; /* permutations computed so far: how tests see the cache work */
} ht_sampler;

/* n >= 1 (an empty training set is rejected before this; n < 1 is an internal error). */
void ht_sampler_init(ht_sampler *s, int n, uint64_t seed, int shuffle);
void ht_sampler_free(ht_sampler *s);
/* Writes the batch sample indices of global step `step` (>= 0) to idx_out[0..batch). */
void ht_sampler_batch(ht_sampler *s, int64_t step, int batch, int *idx_out);
/* Epoch number that stream position `pos` (>= 0) falls in. */
int64_t ht_sampler_epoch(const ht_sampler *s, int64_t pos);
/* Sample index at stream position `pos` (>= 0). */
int ht_sampler_at(ht_sampler *s, int64_t pos);

/* Data-parallel sharding of one global batch: shares[0..world) are each rank's
 * sample counts (sum = batch); rank r takes batch positions [lo, hi). */
void ht_shard_range(const int *shares, int world, int rank, int *lo, int *hi);

#endif
