/* Reading parts of a checkpoint (safetensors.h, ht_st_open_header): only the headers are read
 * at open (every check that needs no tensor data: layout, the header's checksum, a set's step
 * in every shard, pieces covering their tensor), then a caller reads the float ranges it owns.
 * A tensor with a checksum is read whole once, in chunks, through CRC32C (the part asked for
 * kept), so host memory stays the parts plus one chunk however large the file is. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/err.h"
#include "io/safetensors.h"
#include "io/st_internal.h"

#define CHUNK (1u << 20)

int ht_st_open_header(ht_st_file **out, const char *path) {
    char idx[HT_ST_PATH];
    if (ht_st_set_index(path, idx, sizeof idx)) return ht_st_open_set_mode(out, idx, 1);
    return ht_st_open_file_mode(out, path, 1);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(st_entry *const *)a)->name, (*(st_entry *const *)b)->name);
}

static st_entry *lookup(const ht_st_file *f, const char *name) {
    st_entry key = {.name = name}, *kp = &key;
    st_entry **hit =
        f->nt ? bsearch(&kp, f->by_name, (size_t)f->nt, sizeof *f->by_name, cmp_name) : NULL;
    return hit ? *hit : NULL;
}

/* "path: byte OFF: " of where e's (first) header entry is, into buf. */
static const char *where(const ht_st_file *f, const st_entry *e, char *buf, size_t n) {
    if (e->nx)
        snprintf(buf, n, "%s: byte %llu", f->src[e->x[0].src],
                 (unsigned long long)e->x[0].key_off);
    else
        snprintf(buf, n, "%s", f->path);
    return buf;
}

static void shape_text(int ndim, const int64_t *shape, char *out, size_t n) {
    out[0] = 0;
    for (int i = 0; i < ndim && i < HT_ST_MAX_DIM; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%lld", i ? "," : "", (long long)shape[i]);
    if (ndim > HT_ST_MAX_DIM) snprintf(out + strlen(out), n - strlen(out), ",...");
}

int ht_st_expect_f32(const ht_st_file *f, const char *name, int ndim, const int64_t *shape) {
    const st_entry *e = lookup(f, name);
    char at[HT_ST_PATH + 32], a[96], b[96];
    shape_text(ndim, shape, a, sizeof a);
    if (!e)
        return ht_error(HT_EINPUT, "%s: tensor '%s' is missing, expected F32 of shape [%s]",
                        f->path, name, a);
    if (strcmp(e->dtype->name, "F32"))
        return ht_error(HT_EINPUT, "%s: tensor '%s' has dtype %s, expected F32",
                        where(f, e, at, sizeof at), name, e->dtype->name);
    int same = e->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = e->shape[i] == shape[i];
    shape_text(e->ndim, e->shape, b, sizeof b);
    if (!same)
        return ht_error(HT_EINPUT, "%s: tensor '%s' has shape [%s], expected [%s]",
                        where(f, e, at, sizeof at), name, b, a);
    return HT_OK;
}

/* n bytes at file offset `at` of source s into buf. */
static int pread_all(const ht_st_file *f, int s, uint64_t at, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(f->fd[s], (char *)buf + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return ht_error(HT_ERUNTIME, "%s: byte %llu: read of %zu bytes failed: %s", f->src[s],
                            (unsigned long long)(at + got), n - got,
                            r < 0 ? strerror(errno) : "file shrank while reading");
        got += (size_t)r;
    }
    return HT_OK;
}

/* Extent x of tensor e read whole in chunks through its checksum, its bytes [a, b) (relative
 * to the tensor) copied to dst (which holds the tensor's bytes from a). */
static int read_verified(const ht_st_file *f, const st_entry *e, st_ext *x, uint64_t a,
                         uint64_t b, unsigned char *dst) {
    unsigned char *buf = ht_xmalloc(x->n < CHUNK ? (x->n ? x->n : 1) : CHUNK);
    uint32_t crc = 0;
    int rc = HT_OK;
    for (uint64_t o = 0; rc == HT_OK && o < x->n; o += CHUNK) {
        size_t k = x->n - o < CHUNK ? (size_t)(x->n - o) : CHUNK;
        if ((rc = pread_all(f, x->src, x->at + o, buf, k)) != HT_OK) break;
        crc = ht_crc32c(crc, buf, k);
        uint64_t lo = x->lo + o, hi = lo + k; /* these bytes of the tensor */
        uint64_t c0 = lo > a ? lo : a, c1 = hi < b ? hi : b;
        if (c0 < c1) memcpy(dst + (c0 - a), buf + (c0 - lo), (size_t)(c1 - c0));
    }
    free(buf);
    if (rc != HT_OK) return rc;
    if (crc != x->crc) {
        char nm[160];
        if (x->lo || e->nx > 1)
            snprintf(nm, sizeof nm, "%s%c%llu", e->name, HT_ST_SET_PIECE,
                     (unsigned long long)(x->lo / 4));
        else
            snprintf(nm, sizeof nm, "%s", e->name);
        return ht_error(HT_EINPUT,
                        "%s: byte %llu: tensor '%s' (bytes %llu to %llu) has CRC32C %08x, but "
                        "its metadata 'crc32c.%s' says %08x: its data changed after it was "
                        "written (a flipped bit, a damaged copy, or a tensor from another "
                        "checkpoint)",
                        f->src[x->src], (unsigned long long)x->at, nm, (unsigned long long)x->at,
                        (unsigned long long)(x->at + x->n), crc, nm, x->crc);
    }
    x->verified = 1;
    return HT_OK;
}

int ht_st_read_f32(ht_st_file *f, const char *name, uint64_t lo, uint64_t n, float *dst) {
    st_entry *e = lookup(f, name);
    char at[HT_ST_PATH + 32];
    if (!f->lazy)
        return ht_error(HT_ERUNTIME, "%s: ht_st_read_f32 needs a file from ht_st_open_header",
                        f->path);
    if (!e) return ht_error(HT_EINPUT, "%s: tensor '%s' is missing", f->path, name);
    if (strcmp(e->dtype->name, "F32"))
        return ht_error(HT_EINPUT, "%s: tensor '%s' has dtype %s, expected F32",
                        where(f, e, at, sizeof at), name, e->dtype->name);
    const uint64_t total = (e->end - e->begin) / 4;
    if (lo > total || n > total - lo)
        return ht_error(HT_EINPUT, "%s: floats [%llu, %llu) of tensor '%s' asked for, but it "
                                   "holds %llu", where(f, e, at, sizeof at),
                        (unsigned long long)lo, (unsigned long long)(lo + n), name,
                        (unsigned long long)total);
    const uint64_t a = lo * 4, b = (lo + n) * 4;
    int rc = HT_OK;
    for (int i = 0; rc == HT_OK && i < e->nx; i++) {
        st_ext *x = &e->x[i];
        uint64_t c0 = x->lo > a ? x->lo : a, c1 = x->lo + x->n < b ? x->lo + x->n : b;
        if (c0 >= c1) continue; /* not a part asked for */
        if (x->has_crc && !x->verified)
            rc = read_verified(f, e, x, a, b, (unsigned char *)dst);
        else
            rc = pread_all(f, x->src, x->at + (c0 - x->lo), (unsigned char *)dst + (c0 - a),
                           (size_t)(c1 - c0));
    }
    return rc;
}

int ht_st_shape(const ht_st_file *f, const char *name, int *ndim, int64_t shape[HT_ST_MAX_DIM]) {
    const st_entry *e = lookup(f, name);
    if (!e) return 0;
    if (ndim) *ndim = e->ndim;
    for (int i = 0; shape && i < HT_ST_MAX_DIM; i++)
        shape[i] = i < e->ndim ? e->shape[i] : 1;
    return 1;
}
