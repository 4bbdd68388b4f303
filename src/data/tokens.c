/* Token files for a GPT with a BPE vocabulary: nanoGPT's raw little-endian uint16 files and
 * llm.c's shards (a header of 256 int32: magic 20240520, version 1, the token count; then
 * that many uint16). One file or a glob of shards, read through mmap (a dataset of billions
 * of tokens is never copied into memory), the shards taken in name order as one stream.
 * Every token is checked against the vocabulary once, at open, so a bad token is an input
 * error naming its file and byte offset instead of an out-of-range embedding row later.
 * The files are little-endian, as every machine hettrain builds on (checked below). */
#include "data/data.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/err.h"
#include "core/path.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token files are little-endian uint16: a big-endian host needs a byte swap in copy_run"
#endif

enum { LLMC_HEADER_INTS = 256, LLMC_MAGIC = 20240520, LLMC_VERSION = 1 };

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The token array of one mapped file: its format from the first word, its size checked
 * against what the header (or the raw format) says. */
static int tokens_of(ht_tokfile *f, const char *what) {
    const unsigned char *b = f->map;
    size_t len = f->maplen, hdr = LLMC_HEADER_INTS * 4;
    if (len >= 4 && le32(b) == LLMC_MAGIC) {
        if (len < hdr)
            return ht_error(HT_EINPUT,
                            "%s '%s': an llm.c shard (magic %d) of %zu bytes, shorter than its "
                            "%zu-byte header",
                            what, f->path, LLMC_MAGIC, len, hdr);
        uint32_t version = le32(b + 4), count = le32(b + 8);
        if (version != LLMC_VERSION)
            return ht_error(HT_EINPUT,
                            "%s '%s': byte offset 4: llm.c shard version %u, expected %d "
                            "(uint16 tokens)",
                            what, f->path, version, LLMC_VERSION);
        if (len != hdr + 2 * (size_t)count)
            return ht_error(HT_EINPUT,
                            "%s '%s': byte offset 8: the header says %u tokens (%zu bytes), the "
                            "file has %zu bytes (a truncated or padded shard)",
                            what, f->path, count, hdr + 2 * (size_t)count, len);
        f->tok = (const uint16_t *)(b + hdr);
        f->n = count;
        f->first_byte = hdr;
        return HT_OK;
    }
    if (len % 2)
        return ht_error(HT_EINPUT,
                        "%s '%s': %zu bytes, an odd count: expected raw uint16 tokens (nanoGPT's "
                        "format) or an llm.c shard (magic %d)",
                        what, f->path, len, LLMC_MAGIC);
    f->tok = (const uint16_t *)b;
    f->n = len / 2;
    f->first_byte = 0;
    return HT_OK;
}

/* The first token >= vocab, as an input error naming the byte offset; HT_OK if none. */
static int check_vocab(const ht_tokfile *f, int vocab, const char *what) {
    for (size_t i = 0; i < f->n; i++)
        if (f->tok[i] >= vocab)
            return ht_error(HT_EINPUT,
                            "%s '%s': byte offset %zu (token %zu): token id %u, expected below "
                            "model.vocab = %d",
                            what, f->path, f->first_byte + 2 * i, i, f->tok[i], vocab);
    return HT_OK;
}

static int map_file(ht_tokfile *f, const char *path, int vocab, const char *what) {
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd;
    long long size;
    if (ht_open_input_fd(path, what, &fd, &size) != HT_OK) return HT_EINPUT;
    if (size <= 0) {
        close(fd);
        return ht_error(HT_EINPUT, "%s '%s' is empty: expected token ids", what, path);
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int errnum = errno;
    close(fd);
    if (p == MAP_FAILED)
        return ht_error(HT_EINPUT, "%s '%s': cannot map %lld bytes: %s", what, path, size,
                        strerror(errnum));
    f->map = p;
    f->maplen = (size_t)size;
    int rc = tokens_of(f, what);
    return rc != HT_OK ? rc : check_vocab(f, vocab, what);
}

int ht_tokens_open(ht_tokens *t, const char *pattern, int vocab, const char *what) {
    memset(t, 0, sizeof *t);
    if (!pattern || !*pattern)
        return ht_error(HT_EINPUT, "%s is empty: expected a token file or a glob of shards", what);
    if (vocab < 1 || vocab > 65536)
        return ht_error(HT_EINPUT, "model.vocab %d: uint16 token files need 1..65536", vocab);
    glob_t g;
    int grc = glob(pattern, GLOB_ERR, NULL, &g); /* sorted by name: shard order */
    if (grc == GLOB_NOMATCH) { /* not a glob, or one matching nothing: say it as a file */
        globfree(&g);
        if (!strpbrk(pattern, "*?[")) return ht_check_input(pattern, what);
        return ht_error(HT_EINPUT, "%s '%s' matches no file", what, pattern);
    }
    if (grc != 0) {
        globfree(&g);
        return ht_error(HT_EINPUT, "%s '%s': cannot list the files it names", what, pattern);
    }
    t->nfiles = (int)g.gl_pathc;
    t->f = ht_xcalloc(g.gl_pathc, sizeof *t->f);
    t->start = ht_xcalloc(g.gl_pathc + 1, sizeof *t->start);
    int rc = HT_OK;
    for (size_t i = 0; rc == HT_OK && i < g.gl_pathc; i++) {
        rc = map_file(&t->f[i], g.gl_pathv[i], vocab, what);
        t->start[i + 1] = t->start[i] + t->f[i].n;
    }
    globfree(&g);
    t->n = t->start[t->nfiles];
    if (rc != HT_OK) ht_tokens_free(t);
    return rc;
}

void ht_tokens_free(ht_tokens *t) {
    for (int i = 0; t->f && i < t->nfiles; i++)
        if (t->f[i].map) munmap(t->f[i].map, t->f[i].maplen);
    free(t->f);
    free(t->start);
    memset(t, 0, sizeof *t);
}

/* Copies tokens [at, at + count) of the stream into out; a run may cross shards. */
static void copy_run(const ht_tokens *t, size_t at, size_t count, int32_t *out) {
    int lo = 0, hi = t->nfiles - 1; /* the file holding `at`: start[lo] <= at < start[lo+1] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->start[mid] <= at) lo = mid;
        else hi = mid - 1;
    }
    for (int i = lo; count > 0; i++) {
        size_t off = at - t->start[i], take = t->f[i].n - off;
        if (take > count) take = count;
        for (size_t k = 0; k < take; k++)
            out[k] = t->f[i].tok[off + k];
        out += take, at += take, count -= take;
    }
}

int ht_tokens_split(const ht_tokens *all, double val_fraction, int T, const char *path,
                    ht_tokview *train, ht_tokview *val) {
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    size_t ntrain, nval;
    int rc = ht_stream_split(all->n, val_fraction, T, "tokens", path, "tokens", &ntrain, &nval);
    if (rc != HT_OK) return rc;
    *train = (ht_tokview){all, 0, ntrain};
    *val = (ht_tokview){all, ntrain, nval};
    return HT_OK;
}

int ht_tokens_whole(const ht_tokens *all, int T, const char *path, ht_tokview *v) {
    memset(v, 0, sizeof *v);
    if (all->n < (size_t)T + 1)
        return ht_error(HT_EINPUT,
                        "tokens '%s': %zu tokens, fewer than one window of model.context + 1 = "
                        "%d",
                        path, all->n, T + 1);
    *v = (ht_tokview){all, 0, all->n};
    return HT_OK;
}

void ht_tokens_batch(const ht_tokview *v, uint64_t seed, int64_t step, int B, int T,
                     int32_t *tokens, int32_t *targets) {
    int32_t *w = ht_xmalloc(((size_t)T + 1) * sizeof *w);
    for (int b = 0; b < B; b++) {
        size_t s = ht_window_start(v->n, T, seed, step, b);
        copy_run(v->all, v->lo + s, (size_t)T + 1, w);
        memcpy(tokens + (size_t)b * T, w, (size_t)T * sizeof *w);
        if (targets) memcpy(targets + (size_t)b * T, w + 1, (size_t)T * sizeof *w);
    }
    free(w);
}
