/* safetensors reader. It trusts nothing in the file: every length is checked against the real
 * file size before use, products are overflow-checked, memory stays a small multiple of the
 * header's actual size, and errors name the byte offset in the file where the problem starts.
 * A file with checksums (ours) must match them: a bit changed on disk or in a copy is found. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/err.h"
#include "core/path.h"
#include "io/json.h"
#include "io/st_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code passes floats through unswapped"
#endif

/* ---- dtypes ----------------------------------------------------------------------------- */

/* Every dtype the format defines; sizes are needed to validate data_offsets of any tensor. */
static const st_dtype k_dtypes[] = {
    {"F32", 32},    {"F64", 64},    {"F16", 16},    {"BF16", 16},   {"I64", 64},
    {"I32", 32},    {"I16", 16},    {"I8", 8},      {"U64", 64},    {"U32", 32},
    {"U16", 16},    {"U8", 8},      {"BOOL", 8},    {"F8_E4M3", 8}, {"F8_E5M2", 8},
    {"F8_E8M0", 8}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F4", 4},
};

const st_dtype *ht_st_dtype_find(const char *s) {
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(k_dtypes[i].name, s) == 0) return &k_dtypes[i];
    return NULL;
}

/* ---- reader ----------------------------------------------------------------------------- */

/* A hostile name may hold anything: quote it printable and short for messages. */
static const char *safe_name(const char *s, char *buf, size_t size) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < size; p++) {
        if (o + 8 >= size) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (*p < 0x20 || *p == 0x7F)
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", *p);
        else
            buf[o++] = (char)*p;
    }
    buf[o] = 0;
    return buf;
}

static int st_fail(const char *path, uint64_t off, const char *fmt, ...) HT_PRINTF(3, 4);
static int st_fail(const char *path, uint64_t off, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ht_error(HT_EINPUT, "%s: byte %llu: %s", path, (unsigned long long)off, msg);
}

typedef struct st_ctx {
    ht_json j;
    ht_st_file *f;
    int cap;
} st_ctx;

#define HDR 8u /* file offset of the JSON text */

/* Reads "[int, ...]" into the entry's shape; computes the element count overflow-safely. */
static int parse_shape(st_ctx *c, st_entry *e, int64_t *numel, const char *nm) {
    ht_json *j = &c->j;
    int count = 0, r, zero = 0, over = 0;
    int64_t n = 1;
    if (ht_json_expect(j, '[', "to start the shape array")) return -1;
    while ((r = ht_json_more(j, ']', &count)) == 1) {
        int64_t d;
        size_t at = (ht_json_peek(j), j->i);
        if (ht_json_int64(j, &d)) return -1;
        if (d < 0)
            return ht_json_fail(j, at, "negative dimension %lld in shape of tensor '%s'",
                                (long long)d, nm);
        if (count <= HT_ST_MAX_DIM) e->shape[count - 1] = d;
        if (d == 0)
            zero = 1;
        else if (n > INT64_MAX / d)
            over = 1;
        else
            n *= d;
    }
    if (r < 0) return -1;
    /* A zero dimension makes the tensor empty however large the others are. */
    if (over && !zero)
        return ht_json_fail(j, j->i - 1, "shape of tensor '%s' overflows 64 bits", nm);
    e->ndim = count;
    *numel = zero ? 0 : n;
    return 0;
}

static int parse_offsets(st_ctx *c, st_entry *e, const char *nm) {
    ht_json *j = &c->j;
    int64_t v[2];
    int count = 0, r;
    ht_json_peek(j);
    size_t at = j->i;
    e->off = HDR + at;
    if (ht_json_expect(j, '[', "to start data_offsets")) return -1;
    while ((r = ht_json_more(j, ']', &count)) == 1) {
        if (count > 2)
            return ht_json_fail(j, at, "data_offsets of tensor '%s' must be [begin, end]", nm);
        size_t vat = (ht_json_peek(j), j->i);
        if (ht_json_int64(j, &v[count - 1])) return -1;
        if (v[count - 1] < 0)
            return ht_json_fail(j, vat, "negative data offset in tensor '%s'", nm);
    }
    if (r < 0) return -1;
    if (count != 2)
        return ht_json_fail(j, at, "data_offsets of tensor '%s' must be [begin, end]", nm);
    e->begin = (uint64_t)v[0];
    e->end = (uint64_t)v[1];
    return 0;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}; unknown fields are skipped. */
static int parse_tensor(st_ctx *c, st_entry *e, size_t key_at) {
    ht_json *j = &c->j;
    char nb[80];
    const char *nm = safe_name(c->f->pool.s + e->name_at, nb, sizeof nb);
    int count = 0, r, have_dt = 0, have_sh = 0, have_of = 0;
    int64_t numel = 0;
    if (ht_json_expect(j, '{', "to start the tensor entry")) return -1;
    while ((r = ht_json_more(j, '}', &count)) == 1) {
        char *k;
        size_t kat = (ht_json_peek(j), j->i);
        if (ht_json_string(j, &k)) return -1;
        int *seen = !strcmp(k, "dtype")          ? &have_dt
                    : !strcmp(k, "shape")        ? &have_sh
                    : !strcmp(k, "data_offsets") ? &have_of
                                                 : NULL;
        int is_dt = seen == &have_dt, is_sh = seen == &have_sh;
        free(k);
        if (seen && *seen) return ht_json_fail(j, kat, "duplicate field in tensor '%s'", nm);
        if (ht_json_expect(j, ':', "after object key")) return -1;
        if (!seen) {
            if (ht_json_skip(j)) return -1;
            continue;
        }
        *seen = 1;
        if (is_dt) {
            char *dt, db[40];
            size_t vat = (ht_json_peek(j), j->i);
            if (ht_json_string(j, &dt)) return -1;
            e->dtype = ht_st_dtype_find(dt);
            if (!e->dtype) {
                ht_json_fail(j, vat,
                             "unknown dtype \"%s\" for tensor '%s' (expected F32, F16, BF16, "
                             "F64, I8..I64, U8..U64, BOOL, F8_*)",
                             safe_name(dt, db, sizeof db), nm);
                free(dt);
                return -1;
            }
            free(dt);
        } else if (is_sh) {
            if (parse_shape(c, e, &numel, nm)) return -1;
        } else if (parse_offsets(c, e, nm)) {
            return -1;
        }
    }
    if (r < 0) return -1;
    if (!have_dt || !have_sh || !have_of)
        return ht_json_fail(j, key_at, "tensor '%s' lacks \"%s\"", nm,
                            !have_dt   ? "dtype"
                            : !have_sh ? "shape"
                                       : "data_offsets");
    /* numel * bits overflows nothing: numel < 2^63 / 64 is checked first. */
    int bits = e->dtype->bits;
    if (numel > INT64_MAX / 64)
        return ht_json_fail(j, e->off - HDR,
                            "tensor '%s' has %lld elements, more than any file holds", nm,
                            (long long)numel);
    if (((uint64_t)numel * (uint64_t)bits) % 8)
        return ht_json_fail(j, e->off - HDR,
                            "tensor '%s': %lld elements of %s do not fill whole bytes", nm,
                            (long long)numel, e->dtype->name);
    uint64_t bytes = (uint64_t)numel * (uint64_t)bits / 8;
    if (e->end < e->begin || e->end - e->begin != bytes)
        return ht_json_fail(j, e->off - HDR,
                            "data_offsets [%llu, %llu] of tensor '%s' span %lld bytes, "
                            "expected %llu (shape x %s size)",
                            (unsigned long long)e->begin, (unsigned long long)e->end, nm,
                            (long long)e->end - (long long)e->begin, (unsigned long long)bytes,
                            e->dtype->name);
    return 0;
}

static int parse_meta(st_ctx *c) {
    ht_json *j = &c->j;
    ht_st_file *f = c->f;
    int count = 0, r, cap = 0;
    if (ht_json_expect(j, '{', "to start __metadata__")) return -1;
    while ((r = ht_json_more(j, '}', &count)) == 1) {
        char nb[80];
        if (f->nmeta == cap) {
            cap = cap ? 2 * cap : 8;
            f->meta = ht_xrealloc(f->meta, (size_t)cap * sizeof *f->meta);
        }
        st_meta *m = &f->meta[f->nmeta++];
        memset(m, 0, sizeof *m);
        m->key_off = HDR + (ht_json_peek(j), j->i);
        m->key_at = f->pool.len;
        if (ht_json_string_append(j, &f->pool)) return -1;
        if (ht_json_expect(j, ':', "after object key")) return -1;
        if (ht_json_peek(j) != '"')
            return ht_json_fail(j, j->i, "metadata value for '%s' must be a string",
                                safe_name(f->pool.s + m->key_at, nb, sizeof nb));
        m->val_at = f->pool.len;
        m->val_off = HDR + j->i + 1;
        if (ht_json_string_append(j, &f->pool)) return -1;
    }
    return r;
}

static int parse_header(st_ctx *c) {
    ht_json *j = &c->j;
    ht_st_file *f = c->f;
    int count = 0, r, seen_meta = 0;
    if (ht_json_expect(j, '{', "at the start of the header")) return -1;
    while ((r = ht_json_more(j, '}', &count)) == 1) {
        size_t kat = (ht_json_peek(j), j->i), at = f->pool.len;
        if (ht_json_string_append(j, &f->pool)) return -1;
        if (ht_json_expect(j, ':', "after object key")) return -1;
        if (!strcmp(f->pool.s + at, "__metadata__")) {
            f->pool.len = at; /* the key itself is not kept */
            if (seen_meta++) return ht_json_fail(j, kat, "duplicate __metadata__");
            if (parse_meta(c)) return -1;
            continue;
        }
        if (f->nt == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 16;
            f->t = ht_xrealloc(f->t, (size_t)c->cap * sizeof *f->t);
        }
        st_entry *e = &f->t[f->nt++];
        memset(e, 0, sizeof *e);
        e->name_at = at;
        e->key_off = HDR + kat;
        if (parse_tensor(c, e, kat)) return -1;
    }
    if (r < 0) return -1;
    if (ht_json_peek(j) != -1)
        return ht_json_fail(j, j->i, "unexpected data after the header's JSON object");
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(st_entry *const *)a)->name, (*(st_entry *const *)b)->name);
}

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

/* Points names into the (now final) pool; sorts metadata and refuses duplicate keys. */
static int finish_strings(ht_st_file *f) {
    char nb[80];
    for (int i = 0; i < f->nt; i++)
        f->t[i].name = f->pool.s + f->t[i].name_at;
    for (int i = 0; i < f->nmeta; i++) {
        f->meta[i].key = f->pool.s + f->meta[i].key_at;
        f->meta[i].val = f->pool.s + f->meta[i].val_at;
    }
    if (f->nmeta) qsort(f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta);
    for (int i = 1; i < f->nmeta; i++)
        if (!strcmp(f->meta[i].key, f->meta[i - 1].key)) {
            uint64_t a = f->meta[i].key_off, b = f->meta[i - 1].key_off;
            return st_fail(f->path, a > b ? a : b, "duplicate metadata key '%s'",
                           safe_name(f->meta[i].key, nb, sizeof nb));
        }
    return 0;
}

/* Checks ranges against the data buffer and each other; builds the name index. */
static int check_layout(ht_st_file *f, uint64_t data_len) {
    char na[80], nb[80];
    int nt = f->nt;
    f->by_name = ht_xmalloc((size_t)(nt ? nt : 1) * sizeof *f->by_name);
    for (int i = 0; i < nt; i++) {
        st_entry *e = &f->t[i];
        if (e->end > data_len)
            return st_fail(f->path, e->off,
                           "data_offsets [%llu, %llu] of tensor '%s' run past the data "
                           "buffer (%llu bytes)",
                           (unsigned long long)e->begin, (unsigned long long)e->end,
                           safe_name(e->name, na, sizeof na), (unsigned long long)data_len);
        f->by_name[i] = e;
    }
    qsort(f->by_name, (size_t)nt, sizeof *f->by_name, cmp_begin);
    const st_entry *prev = NULL;
    for (int i = 0; i < nt; i++) {
        const st_entry *e = f->by_name[i];
        if (e->begin == e->end) continue; /* empty tensors occupy nothing */
        if (prev && e->begin < prev->end)
            return st_fail(f->path, e->off,
                           "data_offsets [%llu, %llu] of tensor '%s' overlap tensor '%s' "
                           "[%llu, %llu]",
                           (unsigned long long)e->begin, (unsigned long long)e->end,
                           safe_name(e->name, na, sizeof na), safe_name(prev->name, nb, sizeof nb),
                           (unsigned long long)prev->begin, (unsigned long long)prev->end);
        prev = e;
    }
    qsort(f->by_name, (size_t)nt, sizeof *f->by_name, cmp_name);
    for (int i = 1; i < nt; i++)
        if (!strcmp(f->by_name[i]->name, f->by_name[i - 1]->name)) {
            const st_entry *a = f->by_name[i - 1], *b = f->by_name[i];
            return st_fail(f->path, a->key_off > b->key_off ? a->key_off : b->key_off,
                           "duplicate tensor name '%s'", safe_name(a->name, na, sizeof na));
        }
    return 0;
}

static int read_all(FILE *fp, void *buf, size_t n, const char *path, uint64_t off) {
    if (n && fread(buf, 1, n, fp) != n)
        return ht_error(HT_ERUNTIME, "%s: byte %llu: read of %zu bytes failed: %s", path,
                        (unsigned long long)off, n,
                        ferror(fp) ? strerror(errno) : "file shrank while reading");
    return 0;
}

static const st_entry *find(const ht_st_file *f, const char *name);

/* ---- checksums ---------------------------------------------------------------------------- */

static const st_meta *meta_find(const ht_st_file *f, const char *key) {
    st_meta k = {.key = key};
    return f->nmeta ? bsearch(&k, f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta) : NULL;
}

/* The 8 hex digits of checksum metadata m into *out; HT_EINPUT at the value otherwise. */
static int crc_value(const ht_st_file *f, const st_meta *m, uint32_t *out) {
    char nb[80], vb[40];
    const char *v = m->val;
    uint32_t x = 0;
    int ok = strlen(v) == 8;
    for (int i = 0; ok && i < 8; i++) {
        char c = v[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        ok = d >= 0;
        x = x << 4 | (uint32_t)(ok ? d : 0);
    }
    if (!ok)
        return st_fail(f->path, m->val_off, "metadata '%s' is \"%s\", expected a CRC32C as 8 "
                                            "lowercase hex digits",
                       safe_name(m->key, nb, sizeof nb), safe_name(v, vb, sizeof vb));
    *out = x;
    return HT_OK;
}

/* The header's checksum: of lenb and hdr[0..n) with the value's digits read as '0'. */
static int verify_header(const ht_st_file *f, const unsigned char *lenb, const char *hdr,
                         uint64_t n) {
    const st_meta *m = meta_find(f, HT_ST_CRC_HEADER);
    uint32_t want, got;
    if (!m) { /* the tensors' checksums are there (the caller looked): a key was changed */
        for (int i = 0; i < f->nmeta; i++)
            if (!strncmp(f->meta[i].key, HT_ST_CRC_PREFIX, strlen(HT_ST_CRC_PREFIX)))
                return st_fail(f->path, f->meta[i].key_off,
                               "the file has tensor checksums (metadata 'crc32c.*') but no "
                               "metadata '" HT_ST_CRC_HEADER "': the header changed after it "
                               "was written");
    }
    if (!m || crc_value(f, m, &want)) return HT_EINPUT;
    uint64_t at = m->val_off - HDR; /* the digits' place in hdr (8 of them: crc_value) */
    got = ht_crc32c(ht_crc32c(0, lenb, 8), hdr, (size_t)at);
    got = ht_crc32c(got, "00000000", 8);
    got = ht_crc32c(got, hdr + at + 8, (size_t)(n - at - 8));
    if (got != want)
        return st_fail(f->path, 0,
                       "the header (bytes 0 to %llu) has CRC32C %08x, but its metadata '"
                       HT_ST_CRC_HEADER "' says %08x: the header (metadata such as the step, "
                       "tensor names, shapes or offsets) changed after it was written",
                       (unsigned long long)(HDR + n), got, want);
    return HT_OK;
}

/* Each tensor's data against metadata crc32c.<name> (a header-only file keeps the value for
 * its reads); every such key names a tensor; nothing after the last tensor. */
static int verify_tensors(ht_st_file *f, uint64_t n, uint64_t data_len) {
    char nb[80];
    ht_jbuf key = {0};
    uint64_t last = 0;
    int rc = HT_OK;
    for (int i = 0; rc == HT_OK && i < f->nt; i++) {
        st_entry *e = &f->t[i];
        key.len = 0;
        ht_jbuf_puts(&key, HT_ST_CRC_PREFIX);
        ht_jbuf_puts(&key, e->name);
        const st_meta *m = meta_find(f, key.s);
        uint32_t want = 0, got;
        if (!m)
            rc = st_fail(f->path, e->key_off,
                         "tensor '%s' has no checksum (metadata 'crc32c.%s'), though the file "
                         "has checksums",
                         safe_name(e->name, nb, sizeof nb), safe_name(e->name, nb, sizeof nb));
        else if ((rc = crc_value(f, m, &want)) == HT_OK && f->lazy) /* checked when read */
            e->x[0].crc = want, e->x[0].has_crc = 1;
        else if (rc == HT_OK &&
                 (got = ht_crc32c(0, f->data + e->begin, (size_t)(e->end - e->begin))) != want)
            rc = st_fail(f->path, HDR + n + e->begin,
                         "tensor '%s' (bytes %llu to %llu) has CRC32C %08x, but its metadata "
                         "'crc32c.%s' says %08x: its data changed after it was written (a "
                         "flipped bit, a damaged copy, or a tensor from another checkpoint)",
                         safe_name(e->name, nb, sizeof nb),
                         (unsigned long long)(HDR + n + e->begin),
                         (unsigned long long)(HDR + n + e->end), got, nb, want);
        if (e->end > last) last = e->end;
    }
    ht_jbuf_free(&key);
    size_t np = strlen(HT_ST_CRC_PREFIX);
    for (int i = 0; rc == HT_OK && i < f->nmeta; i++) {
        const char *k = f->meta[i].key;
        if (!strncmp(k, HT_ST_CRC_PREFIX, np) && !find(f, k + np))
            rc = st_fail(f->path, f->meta[i].key_off,
                         "metadata '%s' is the checksum of a tensor the file does not hold",
                         safe_name(k, nb, sizeof nb));
    }
    if (rc == HT_OK && data_len > last)
        rc = st_fail(f->path, HDR + n + last,
                     "%llu byte(s) after the last tensor's data, which no checksum covers",
                     (unsigned long long)(data_len - last));
    return rc;
}

/* Verifies a file that has checksums (f->checksummed then); one without passes. */
static int verify(ht_st_file *f, const unsigned char *lenb, const char *hdr, uint64_t n,
                  uint64_t data_len) {
    size_t np = strlen(HT_ST_CRC_PREFIX);
    for (int i = 0; i < f->nmeta && !f->checksummed; i++)
        f->checksummed = !strcmp(f->meta[i].key, HT_ST_CRC_HEADER) ||
                         !strncmp(f->meta[i].key, HT_ST_CRC_PREFIX, np);
    if (!f->checksummed) return HT_OK;
    /* the header first: when it is intact, a tensor's mismatch means its data changed */
    int rc = verify_header(f, lenb, hdr, n);
    return rc == HT_OK ? verify_tensors(f, n, data_len) : rc;
}

int ht_st_checksummed(const ht_st_file *f) { return f->checksummed; }

int ht_st_open(ht_st_file **out, const char *path) {
    char idx[HT_ST_PATH];
    if (ht_st_set_index(path, idx, sizeof idx)) return ht_st_open_set(out, idx);
    return ht_st_open_file(out, path);
}

int ht_st_open_file(ht_st_file **out, const char *path) {
    return ht_st_open_file_mode(out, path, 0);
}

/* A header-only file: one source (a descriptor of its own), one extent per tensor. */
static void lazy_sources(ht_st_file *f, FILE *fp, uint64_t n) {
    f->lazy = 1;
    f->nsrc = 1;
    f->src = ht_xmalloc(sizeof *f->src);
    f->fd = ht_xmalloc(sizeof *f->fd);
    f->src[0] = ht_xstrdup(f->path);
    f->fd[0] = dup(fileno(fp));
    for (int i = 0; i < f->nt; i++) {
        st_entry *e = &f->t[i];
        e->nx = 1;
        e->x = ht_xcalloc(1, sizeof *e->x);
        e->x[0].at = HDR + n + e->begin;
        e->x[0].n = e->end - e->begin;
        e->x[0].key_off = e->key_off;
    }
}

int ht_st_open_file_mode(ht_st_file **out, const char *path, int lazy) {
    *out = NULL;
    int fd;
    long long fsize;
    /* without blocking: a FIFO named as a checkpoint must not hang the run */
    if (ht_open_input_fd(path, "cannot open checkpoint", &fd, &fsize) != HT_OK) return HT_EINPUT;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        return ht_error(HT_EINPUT, "cannot open checkpoint '%s': %s", path, strerror(errno));
    }
    uint64_t size = (uint64_t)fsize;
    ht_st_file *f = ht_xcalloc(1, sizeof *f);
    f->path = ht_xstrdup(path);
    char *hdr = NULL;
    int rc;
    unsigned char lenb[8];
    uint64_t n = 0;
    if (size < 8) {
        rc = st_fail(path, 0, "file is %llu bytes, too short for the 8-byte header length",
                     (unsigned long long)size);
        goto fail;
    }
    if ((rc = read_all(fp, lenb, 8, path, 0))) goto fail;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | lenb[i];
    if (n > HT_ST_MAX_HEADER) {
        rc = st_fail(path, 0, "header length %llu is absurd (limit %u bytes)",
                     (unsigned long long)n, HT_ST_MAX_HEADER);
        goto fail;
    }
    if (n > size - 8) {
        rc = st_fail(path, 0, "header length %llu exceeds the %llu bytes after the length field",
                     (unsigned long long)n, (unsigned long long)(size - 8));
        goto fail;
    }
    hdr = ht_xmalloc((size_t)n + 1);
    if ((rc = read_all(fp, hdr, (size_t)n, path, 8))) goto fail;
    hdr[n] = 0;
    st_ctx c = {0};
    ht_json_init(&c.j, hdr, (size_t)n);
    c.f = f;
    if (parse_header(&c)) {
        rc = st_fail(path, HDR + c.j.err_off, "%s", c.j.err);
        goto fail;
    }
    uint64_t data_len = size - 8 - n;
    if ((rc = finish_strings(f)) || (rc = check_layout(f, data_len))) goto fail;
    if (lazy) {
        lazy_sources(f, fp, n);
        if (f->fd[0] < 0) {
            rc = ht_error(HT_ERUNTIME, "%s: dup: %s", path, strerror(errno));
            goto fail;
        }
        if ((rc = verify(f, lenb, hdr, n, data_len))) goto fail;
        goto done;
    }
    f->data = ht_xmalloc((size_t)(data_len ? data_len : 1));
    if ((rc = read_all(fp, f->data, (size_t)data_len, path, 8 + n))) goto fail;
    if ((rc = verify(f, lenb, hdr, n, data_len))) goto fail;
    for (int i = 0; i < f->nt; i++) {
        st_entry *e = &f->t[i];
        if (strcmp(e->dtype->name, "F32") != 0) continue;
        if (e->begin % sizeof(float) == 0) {
            e->data = (const float *)(f->data + e->begin); /* malloc memory is aligned */
        } else {
            /* Another writer may misalign a tensor; hand out an aligned copy. */
            e->copy = ht_xmalloc((size_t)(e->end - e->begin));
            memcpy(e->copy, f->data + e->begin, (size_t)(e->end - e->begin));
            e->data = e->copy;
        }
    }
done:
    free(hdr);
    fclose(fp);
    *out = f;
    return HT_OK;
fail:
    free(hdr);
    fclose(fp);
    ht_st_close(f);
    return rc;
}

void ht_st_close(ht_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->nt; i++)
        free(f->t[i].copy), free(f->t[i].x);
    for (int i = 0; i < f->nsrc; i++) {
        if (f->fd[i] >= 0) close(f->fd[i]);
        free(f->src[i]);
    }
    free(f->src);
    free(f->fd);
    ht_jbuf_free(&f->pool);
    free(f->t);
    free(f->by_name);
    free(f->meta);
    free(f->data);
    free(f->path);
    free(f);
}

static const st_entry *find(const ht_st_file *f, const char *name) {
    st_entry key = {.name = name}, *kp = &key;
    st_entry **hit =
        f->nt ? bsearch(&kp, f->by_name, (size_t)f->nt, sizeof *f->by_name, cmp_name) : NULL;
    return hit ? *hit : NULL;
}

const float *ht_st_get(const ht_st_file *f, const char *name, int *ndim,
                       int64_t shape[HT_ST_MAX_DIM]) {
    const st_entry *e = find(f, name);
    char nb[80];
    if (!e) return NULL;
    if (f->lazy) {
        ht_error(HT_ERUNTIME, "%s: tensor '%s': the file was opened header only (read it with "
                              "ht_st_read_f32)", f->path, safe_name(name, nb, sizeof nb));
        return NULL;
    }
    if (!e->data) {
        ht_error(HT_EINPUT, "%s: tensor '%s' has dtype %s; only F32 tensors can be loaded", f->path,
                 safe_name(name, nb, sizeof nb), e->dtype->name);
        return NULL;
    }
    if (e->ndim > HT_ST_MAX_DIM) {
        ht_error(HT_EINPUT, "%s: tensor '%s' has %d dimensions; at most %d are supported", f->path,
                 safe_name(name, nb, sizeof nb), e->ndim, HT_ST_MAX_DIM);
        return NULL;
    }
    if (ndim) *ndim = e->ndim;
    if (shape)
        for (int i = 0; i < HT_ST_MAX_DIM; i++)
            shape[i] = i < e->ndim ? e->shape[i] : 1;
    return e->data;
}

const char *ht_st_dtype(const ht_st_file *f, const char *name) {
    const st_entry *e = find(f, name);
    return e ? e->dtype->name : NULL;
}

const char *ht_st_meta(const ht_st_file *f, const char *key) {
    st_meta k = {.key = key};
    const st_meta *m =
        f->nmeta ? bsearch(&k, f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta) : NULL;
    return m ? m->val : NULL;
}

int ht_st_count(const ht_st_file *f) { return f->nt; }
int ht_st_meta_count(const ht_st_file *f) { return f->nmeta; }
void ht_st_meta_at(const ht_st_file *f, int i, const char **key, const char **val) {
    *key = f->meta[i].key;
    *val = f->meta[i].val;
}
const char *ht_st_name(const ht_st_file *f, int i) {
    return i >= 0 && i < f->nt ? f->t[i].name : NULL;
}
