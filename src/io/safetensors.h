/* Checkpoints in the safetensors format (https://github.com/huggingface/safetensors): u64 LE
 * header length N, N bytes of JSON header, then the data buffer. We write F32 tensors atomically
 * and read any file defensively: a hostile file yields HT_EINPUT with the byte offset, never a
 * crash and never an allocation sized by a length the file merely claims. */
#ifndef HT_IO_SAFETENSORS_H
#define HT_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* Headers longer than this are refused as absurd (real ones are kilobytes). */
#define HT_ST_MAX_HEADER 100000000u
#define HT_ST_MAX_DIM 4

/* A tensor to write: F32, ndim 0..4 (0 = scalar, one element), data contiguous row-major. */
typedef struct ht_st_tensor {
    const char *name;
    int ndim;
    int64_t shape[HT_ST_MAX_DIM];
    const float *data;
} ht_st_tensor;

/* Checksums (CRC32C, core/crc32c.h) in "__metadata__", as 8 lowercase hex digits:
 * "crc32c.<tensor name>" of each tensor's data bytes, and "crc32c_header" of the file's first
 * 8 + N bytes (length field and JSON header) with that value's own digits read as "00000000".
 * The header holds the tensors' checksums, so together they cover every byte of the file: a
 * tensor replaced by one of another checkpoint fails its own checksum, a changed step or name
 * the header's. */
#define HT_ST_CRC_HEADER "crc32c_header"
#define HT_ST_CRC_PREFIX "crc32c."

/* Writes t[0..nt) (data in that order, contiguous) and nmeta string pairs as "__metadata__",
 * with the checksums above (keys starting "crc32c" are reserved).
 * Atomic: writes <path>.tmp.<pid> in the same directory, fsyncs it, renames it over path and
 * fsyncs the directory; on any failure path is untouched and the temp file removed.
 * HT_EINPUT: invalid arguments (bad name/shape, duplicate name, invalid UTF-8);
 * HT_ERUNTIME: I/O failure (message has the path and strerror). */
int ht_st_write(const char *path, const ht_st_tensor *t, int nt, const char *const *meta_keys,
                const char *const *meta_vals, int nmeta);

typedef struct ht_st_file ht_st_file;

/* Reads and validates a whole file (header and data into memory). Accepted: every dtype the
 * format defines (F64, F32, F16, BF16, F8_*, I8..I64, U8..U64, BOOL, ...), any ndim, holes
 * between tensors. Rejected with HT_EINPUT and "<path>: byte <offset>: <problem>": short file,
 * absurd or too-large header length, invalid JSON or UTF-8, unknown dtype, negative or
 * overflowing shape, data_offsets out of range / not matching shape x element size /
 * overlapping, duplicate tensor or metadata names, non-string metadata values; also a missing
 * or non-regular file. HT_ERUNTIME: a read that fails mid-file. Memory: the file's data plus
 * a small multiple of the header's actual size.
 * A file with checksums (any "crc32c" metadata key) must have all of them, matching, and no
 * bytes after its last tensor; else HT_EINPUT "<path>: byte <offset>: ..." naming the header or
 * the tensor whose checksum fails. A file without (another tool's) is read unverified. */
int ht_st_open(ht_st_file **out, const char *path);
/* ht_st_open of one file only (no sharded-set lookup). */
int ht_st_open_file(ht_st_file **out, const char *path);

/* ---- sharded sets (Hugging Face's layout) ----------------------------------------------
 * A checkpoint path P ("dir/model.safetensors", or "dir/w.ckpt") names either one file or a
 * set: STEM-00001-of-0000K.safetensors ... plus STEM.safetensors.index.json ({"metadata":
 * {...}, "weight_map": {tensor: file}}), STEM being P without ".safetensors". Every shard
 * holds in its metadata "set.step" (the save's id), "set.shard" (1..K), "set.shards" (K) and
 * the writer's metadata (the same in every shard). A flat tensor cut into ranges is stored as
 * pieces "NAME#OFFSET" (1-D) with "set.flat.NAME" = its total length in every shard holding
 * one; the set reader joins them into "NAME".
 * Commit protocol (a kill at any moment leaves one complete set loadable): each writer puts its
 * shard at SHARD.next (itself atomic: ht_st_write); once all are there, ht_st_set_commit
 * renames the index in (the commit point: it names the new step), then each SHARD.next over
 * SHARD. A reader takes SHARD, or SHARD.next when only that one is of the index's step. */
#define HT_ST_PATH 4200
#define HT_ST_SET_PIECE '#'
/* The files of the set P names: shard i of k (1-based) and the index. */
void ht_st_set_shard_path(const char *p, int i, int k, char *out, size_t n);
void ht_st_set_index_path(const char *p, char *out, size_t n);
/* 1 with the index's path in idx when path names a set: it ends ".index.json", or path is
 * absent and its index exists. */
int ht_st_set_index(const char *path, char *idx, size_t n);
/* 1 when path is a file or names a set (a checkpoint may be either). */
int ht_st_exists(const char *path);
/* Before a save's first shard: finishes a commit that a kill interrupted after the index's
 * rename (each SHARD.next of the index's step renamed over SHARD), so that the new save's
 * .next files never replace the only copy of a committed shard. No set: nothing to do. */
int ht_st_set_recover(const char *p);
/* Writes shard i of k of the save `step` (to SHARD.next); the metadata set.* is added. */
int ht_st_set_write_shard(const char *p, int i, int k, int64_t step, const ht_st_tensor *t, int nt,
                          const char *const *keys, const char *const *vals, int nmeta);
/* After every shard of `step` is written: checks them (each of that step, no tensor twice),
 * writes the index atomically, moves the shards in place and removes a single file P (the
 * previous save's, when it was not sharded). */
int ht_st_set_commit(const char *p, int k, int64_t step);
/* Reads a whole set as one file: every shard verified (ht_st_open), all of the index's step
 * (else HT_EINPUT naming the shard: a torn set), pieces joined; the metadata are the shards'
 * without the set.* keys. */
int ht_st_open_set(ht_st_file **out, const char *index);
/* 1 when the file carried checksums (and they matched: ht_st_open succeeded), 0 when it had
 * none. */
int ht_st_checksummed(const ht_st_file *f);
void ht_st_close(ht_st_file *f);

/* ---- reading a part (safetensors_part.c) -----------------------------------------------
 * A rank that owns a part of a checkpoint reads only that part: ht_st_open_header opens a file
 * or a set (as ht_st_open) reading only its headers, with every check that needs no tensor
 * data (format and layout errors with byte offsets, the header's checksum, trailing bytes, a
 * torn set naming its shard, pieces covering their tensor); metadata, names, dtypes and
 * shapes are there at once. ht_st_read_f32 then reads floats [lo, lo + n) of an F32 tensor
 * (a set's flat tensor across its pieces) into dst by pread. A checksummed tensor (or piece)
 * that the range touches is read whole the first time, in 1 MiB chunks, and verified (HT_EINPUT
 * "<file>: byte <offset>: tensor '<name>' (bytes A to B) has CRC32C ..." as ht_st_open);
 * memory stays dst plus one chunk. HT_EINPUT "<file>: byte <offset>: ..." for a missing tensor,
 * another dtype, or a range beyond the tensor; HT_ERUNTIME for a failed read. ht_st_get of
 * such a file fails (HT_ERUNTIME): its data are not in memory. */
int ht_st_open_header(ht_st_file **out, const char *path);
int ht_st_read_f32(ht_st_file *f, const char *name, uint64_t lo, uint64_t n, float *dst);
/* HT_OK when tensor name is F32 of exactly this shape; else HT_EINPUT naming the tensor, what
 * it is and what was expected ("<file>: byte <offset>: tensor 'x' has shape [2,3], expected
 * [3,2]"; the byte is where the file's header names it). Any file (lazy or not). */
int ht_st_expect_f32(const ht_st_file *f, const char *name, int ndim, const int64_t *shape);
/* 1 with the tensor's ndim and shape (1 past ndim) when it is there, else 0. Any file. */
int ht_st_shape(const ht_st_file *f, const char *name, int *ndim, int64_t shape[HT_ST_MAX_DIM]);

/* Looks up a tensor; NULL if absent (no error recorded). F32 only with ndim <= 4: for
 * another dtype or more dimensions it returns NULL after ht_error(HT_EINPUT, ...) naming the
 * tensor and its dtype. ndim/shape may be NULL. The data lives until ht_st_close. */
const float *ht_st_get(const ht_st_file *f, const char *name, int *ndim,
                       int64_t shape[HT_ST_MAX_DIM]);
/* The tensor's dtype string ("F32", "BF16", ...), NULL if absent. */
const char *ht_st_dtype(const ht_st_file *f, const char *name);
/* Metadata value for key, NULL if absent. */
const char *ht_st_meta(const ht_st_file *f, const char *key);
/* Metadata in key order: count, and pair i. */
int ht_st_meta_count(const ht_st_file *f);
void ht_st_meta_at(const ht_st_file *f, int i, const char **key, const char **val);
/* Tensors in the order the header lists them. */
int ht_st_count(const ht_st_file *f);
const char *ht_st_name(const ht_st_file *f, int i);

#endif
