/* The reader's in-memory form of a safetensors file, shared by the single-file reader
 * (safetensors_read.c) and the sharded-set reader (safetensors_set.c), which builds one such
 * file out of a set's shards. Private to src/io. */
#ifndef HT_IO_ST_INTERNAL_H
#define HT_IO_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "io/json.h"
#include "io/safetensors.h"

typedef struct st_dtype {
    const char *name;
    int bits;
} st_dtype;

/* A header-only file's (ht_st_open_header) way to a tensor's bytes: bytes [lo, lo + n) of the
 * tensor are at file offset `at` of source `src`; a set's flat tensor has one per piece. */
typedef struct st_ext {
    int src;
    uint64_t at, lo, n;
    uint64_t key_off; /* where the source's header names the tensor (piece), for messages */
    uint32_t crc;     /* its checksum, when has_crc; verified once it is read (verified) */
    int has_crc, verified;
} st_ext;

typedef struct st_entry {
    const char *name; /* into the string pool, set once parsing is done */
    size_t name_at;   /* offset in the pool while parsing */
    uint64_t key_off; /* file offset of the name, for messages */
    const st_dtype *dtype;
    int ndim;
    int64_t shape[HT_ST_MAX_DIM]; /* the first HT_ST_MAX_DIM dimensions */
    uint64_t begin, end;
    uint64_t off;      /* file offset of the entry's data_offsets, for messages */
    const float *data; /* F32 only: 4-byte aligned view or copy */
    float *copy;
    st_ext *x; /* header-only files: where the bytes are (nx pieces, by lo) */
    int nx;
} st_entry;

typedef struct st_meta {
    const char *key, *val;
    size_t key_at, val_at;
    uint64_t key_off, val_off; /* file offsets of the key and of the value's first byte */
} st_meta;

struct ht_st_file {
    char *path;
    ht_jbuf pool; /* all decoded names, keys and values, NUL-separated */
    st_entry *t;  /* in header order */
    int nt;
    st_entry **by_name; /* sorted by name: lookup and duplicate detection */
    st_meta *meta;      /* sorted by key after parsing */
    int nmeta;
    unsigned char *data;
    int checksummed; /* had "crc32c" metadata, verified */
    /* header-only (lazy): data is NULL, the tensors' bytes are read on request from these
     * sources (the file, or a set's shards), kept open */
    int lazy, nsrc;
    char **src;
    int *fd;
};

/* ht_st_open_file, or with lazy set only its header read and checked (the header's checksum
 * included); each tensor's checksum is kept to verify its bytes when they are read. */
int ht_st_open_file_mode(ht_st_file **out, const char *path, int lazy);
/* ht_st_open_set, the shards opened by ht_st_open_file_mode(lazy). */
int ht_st_open_set_mode(ht_st_file **out, const char *index, int lazy);

/* fsync of the directory holding path (a rename in it made durable). */
void ht_st_sync_dir(const char *path);
/* The dtype named s, or NULL. */
const st_dtype *ht_st_dtype_find(const char *s);

#endif
