/* MNIST-style IDX loader (plain or gzip, both through zlib's gzread).
 * The files are user input: every header field is checked before it sizes an
 * allocation, buffers grow only as bytes actually arrive, and every failure says
 * which file, at which byte offset, what was found and what was expected. */
#include "data/data.h"

#include "core/err.h"
#include "core/path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_CHUNK (1u << 20)

typedef unsigned long long ull;

/* One open IDX file; `off` counts decompressed bytes consumed so far, which is
 * the byte offset every message reports (equal to the file offset for plain files). */
typedef struct idx_file {
    const char *path;
    const char *kind; /* "images" or "labels", for messages */
    const char *unit; /* "pixel data" or "labels", for messages */
    gzFile gz;
    long long size; /* on-disk size, -1 when not a regular file */
    int direct;     /* 1: plain file, so `size` bounds what can arrive */
    int gz_short;   /* the gzip stream ended before its end marker */
    ull off;
    int ndims;
    uint32_t dims[3]; /* n, rows, cols (images) or n (labels) */
    ull values;       /* bytes of data after the header */
} idx_file;

/* ------------------------------------------------------------------ reading */

static void idx_close(idx_file *f) {
    if (f->gz) gzclose(f->gz);
    f->gz = NULL;
}

/* Reads up to len bytes, stopping early only at the end of the (decompressed)
 * stream. Returns the count, or -1 after recording an error for a read failure
 * or a corrupt gzip stream. */
static long long idx_read(idx_file *f, unsigned char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        size_t want = len - got < IDX_CHUNK ? len - got : IDX_CHUNK;
        int r = gzread(f->gz, buf + got, (unsigned)want);
        if (r < 0) {
            int errnum = 0;
            const char *msg = gzerror(f->gz, &errnum);
            /* gzerror prefixes the path, which our message already starts with */
            size_t plen = strlen(f->path);
            if (!strncmp(msg, f->path, plen) && !strncmp(msg + plen, ": ", 2)) msg += plen + 2;
            if (errnum == Z_ERRNO) /* zlib put strerror() in msg */
                ht_error(HT_EINPUT, "%s: read error at byte offset %llu: %s", f->path, f->off, msg);
            else
                ht_error(HT_EINPUT,
                         "%s: corrupt gzip stream at decompressed byte offset %llu: %s "
                         "(expected a valid gzip or plain IDX file)",
                         f->path, f->off, msg);
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
        f->off += (ull)r;
    }
    if (got < len) {
        int errnum = 0;
        gzerror(f->gz, &errnum);
        /* zlib reports a stream cut short as Z_BUF_ERROR ("unexpected end of file"). */
        if (errnum == Z_BUF_ERROR) f->gz_short = 1;
    }
    return (long long)got;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* A hint for a wrong magic number: the usual mistakes are swapped paths and
 * files that are not IDX at all. */
static const char *magic_hint(uint32_t found, uint32_t expected) {
    if (found == IDX_MAGIC_LABELS && expected == IDX_MAGIC_IMAGES)
        return "; this is an IDX1 labels file: are the images and labels paths swapped?";
    if (found == IDX_MAGIC_IMAGES && expected == IDX_MAGIC_LABELS)
        return "; this is an IDX3 images file: are the images and labels paths swapped?";
    if (found >> 16) return "; not an IDX file (IDX files start with two zero bytes)";
    if ((found >> 8 & 0xff) != 0x08)
        return "; an IDX file of another element type (only unsigned bytes are read)";
    return "; an IDX file of unsigned bytes with another number of dimensions";
}

/* Opens the file and reads and checks its header: magic, dimensions, the size cap
 * and, for plain files, the size on disk. */
static int idx_open(idx_file *f, const char *path, int images) {
    memset(f, 0, sizeof *f);
    f->path = path;
    f->kind = images ? "images" : "labels";
    f->unit = images ? "pixel data" : "labels";
    f->ndims = images ? 3 : 1;
    uint32_t magic = images ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS;
    const char *magic_desc = images ? "IDX3 unsigned byte images" : "IDX1 unsigned byte labels";

    /* opened without blocking (a FIFO would hang), refused unless a regular file */
    char what[64];
    snprintf(what, sizeof what, "cannot open IDX %s file", f->kind);
    int fd;
    if (ht_open_input_fd(path, what, &fd, &f->size) != HT_OK) return HT_EINPUT;
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return ht_error(HT_EINPUT, "%s: cannot open IDX %s file: %s", path, f->kind,
                        errno ? strerror(errno) : "out of memory");
    }
    gzbuffer(f->gz, 1u << 17);

    unsigned char h[16];
    size_t hlen = 4 + 4 * (size_t)f->ndims;
    long long got = idx_read(f, h, hlen);
    if (got < 0) return HT_EINPUT;
    f->direct = gzdirect(f->gz);
    if (got >= 4 && be32(h) != magic)
        return ht_error(HT_EINPUT, "%s: byte offset 0: found magic 0x%08x, expected 0x%08x (%s)%s",
                        path, be32(h), magic, magic_desc, magic_hint(be32(h), magic));
    if (got < (long long)hlen)
        return ht_error(
            HT_EINPUT,
            "%s: truncated at byte offset %lld: expected the %zu-byte %s header, found %lld byte%s",
            path, got, hlen, magic_desc, got, got == 1 ? "" : "s");
    for (int d = 0; d < f->ndims; d++)
        f->dims[d] = be32(h + 4 + 4 * d);

    uint32_t n = f->dims[0];
    if (images) {
        uint32_t rows = f->dims[1], cols = f->dims[2];
        if (n == 0 || rows == 0 || cols == 0)
            return ht_error(HT_EINPUT,
                            "%s: byte offset 4: found dimensions %u images x %u rows x %u cols, "
                            "expected each at least 1",
                            path, n, rows, cols);
        ull per = (ull)rows * cols; /* < 2^64: both factors < 2^32 */
        if (n > INT_MAX || per > HT_IDX_MAX_VALUES || (ull)n * per > HT_IDX_MAX_VALUES)
            return ht_error(HT_EINPUT,
                            "%s: byte offset 4: found %u images of %u x %u pixels (%.4g values), "
                            "expected at most %llu values (2^28, 1 GiB as float)",
                            path, n, rows, cols, (double)n * (double)per, (ull)HT_IDX_MAX_VALUES);
        f->values = (ull)n * per;
    } else {
        if (n == 0)
            return ht_error(HT_EINPUT, "%s: byte offset 4: found 0 labels, expected at least 1",
                            path);
        if (n > INT_MAX || n > HT_IDX_MAX_VALUES)
            return ht_error(HT_EINPUT, "%s: byte offset 4: found %u labels, expected at most %llu",
                            path, n, (ull)HT_IDX_MAX_VALUES);
        f->values = n;
    }

    /* A plain file can be checked against its real size before anything is allocated. */
    if (f->direct && f->size >= 0) {
        ull want = hlen + f->values;
        if ((ull)f->size < want)
            return ht_error(
                HT_EINPUT,
                "%s: truncated at byte offset %lld: expected %llu bytes of %s, found %llu", path,
                f->size, f->values, f->unit, (ull)f->size - hlen);
        if ((ull)f->size > want)
            return ht_error(HT_EINPUT,
                            "%s: trailing data at byte offset %llu: expected end of file after "
                            "%llu bytes of %s, found %llu more byte%s",
                            path, want, f->values, f->unit, (ull)f->size - want,
                            (ull)f->size - want == 1 ? "" : "s");
    }
    return HT_OK;
}

/* zlib's gzread ignores whatever follows the last gzip member, while plain trailing data
 * is refused: so that both are treated alike, inflate the file once more (member after
 * member, as gzread reads them) and refuse any byte after the last one. */
static int gz_trailing(const idx_file *f) {
    int fd;
    if (ht_open_input_fd(f->path, "cannot open IDX file", &fd, NULL) != HT_OK) return HT_EINPUT;
    z_stream z;
    memset(&z, 0, sizeof z);
    unsigned char *in = ht_xmalloc(IDX_CHUNK), *out = ht_xmalloc(IDX_CHUNK);
    int rc = HT_OK, ended = 0;
    ull nread = 0; /* compressed bytes read; the next one to inflate is nread - avail_in */
    inflateInit2(&z, 15 + 16);
    for (;;) {
        if (z.avail_in < 2) { /* keep two bytes to recognise a member's magic */
            memmove(in, z.next_in ? z.next_in : in, z.avail_in);
            ssize_t r = read(fd, in + z.avail_in, IDX_CHUNK - z.avail_in);
            if (r > 0) nread += (ull)r;
            z.next_in = in, z.avail_in += r > 0 ? (unsigned)r : 0;
            if (z.avail_in == 0) break;
        }
        if (ended) { /* after a member: another member, or trailing data */
            if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) {
                rc = ht_error(HT_EINPUT,
                              "%s: trailing data at byte offset %llu of the .gz file: expected "
                              "end of file after the gzip stream, found %llu more byte%s",
                              f->path, nread - z.avail_in, (ull)f->size - (nread - z.avail_in),
                              (ull)f->size - (nread - z.avail_in) == 1 ? "" : "s");
                break;
            }
            inflateReset(&z);
            ended = 0;
        }
        z.next_out = out, z.avail_out = IDX_CHUNK;
        int zr = inflate(&z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) ended = 1;
        else if (zr != Z_OK) break; /* corrupt or cut short: gzread has said so already */
    }
    inflateEnd(&z);
    close(fd);
    free(in);
    free(out);
    return rc;
}

/* Reads the f->values data bytes into *out (malloc'd). The buffer grows
 * geometrically as data arrives, so a header that overstates a gzip stream's
 * content costs no more memory than the stream holds. Then checks that the
 * stream ends right there. */
static int idx_read_data(idx_file *f, unsigned char **out) {
    *out = NULL;
    /* Exact size only when idx_open already matched it against the file on disk. */
    int checked = f->direct && f->size >= 0;
    ull cap = checked ? f->values : (f->values < IDX_CHUNK ? f->values : IDX_CHUNK);
    unsigned char *buf = ht_xmalloc((size_t)cap);
    ull have = 0;
    ull start = f->off;
    while (have < f->values) {
        if (have == cap) {
            cap = cap * 2 < f->values ? cap * 2 : f->values;
            buf = ht_xrealloc(buf, (size_t)cap);
        }
        ull want = cap - have;
        long long r = idx_read(f, buf + have, (size_t)want);
        if (r < 0) {
            free(buf);
            return HT_EINPUT;
        }
        have += (ull)r;
        if ((ull)r < want) break;
    }
    if (have < f->values) {
        free(buf);
        return ht_error(
            HT_EINPUT, "%s: truncated at byte offset %llu: expected %llu bytes of %s, found %llu%s",
            f->path, f->off, f->values, f->unit, f->off - start,
            f->gz_short ? " (the gzip stream ends early)" : "");
    }

    unsigned char extra[4096];
    long long r = idx_read(f, extra, sizeof extra);
    if (r < 0) {
        free(buf);
        return HT_EINPUT;
    }
    if (r > 0) {
        free(buf);
        return ht_error(
            HT_EINPUT,
            "%s: trailing data at byte offset %llu: expected end of file after %llu bytes of %s, "
            "found %s%lld more byte%s",
            f->path, f->off - (ull)r, f->values, f->unit,
            r == (long long)sizeof extra ? "at least " : "", r, r == 1 ? "" : "s");
    }
    if (!f->direct && !f->gz_short && gz_trailing(f) != HT_OK) {
        free(buf);
        return HT_EINPUT;
    }
    if (f->gz_short) {
        /* All data arrived but the gzip trailer (CRC and length) did not. */
        free(buf);
        return ht_error(
            HT_EINPUT,
            "%s: truncated gzip stream after byte offset %llu: found the data but not the gzip "
            "trailer, expected a complete .gz file",
            f->path, f->off);
    }
    *out = buf;
    return HT_OK;
}

/* -------------------------------------------------------------------- load */

/* Labels are classes [0, K): K configured, or found as 1 + the largest label, and then
 * every class below it must occur (a stray byte of 200 among MNIST's digits would make a
 * 201-class model); at least 2 classes either way. Errors give the first bad label's
 * offset. */
static int check_labels(const char *path, const unsigned char *lab, int n, int classes,
                        int *maxlab) {
    int count[256] = {0}, first[256], max = 0;
    for (int i = 0; i < n; i++) {
        if (classes > 0 && lab[i] >= classes)
            return ht_error(HT_EINPUT,
                            "%s: byte offset %d: found label %d, expected a class in [0, %d)",
                            path, 8 + i, lab[i], classes);
        if (!count[lab[i]]++) first[lab[i]] = i;
        if (lab[i] > max) max = lab[i];
    }
    int k = classes > 0 ? classes : max + 1, distinct = 0;
    for (int c = 0; c <= max; c++)
        distinct += count[c] > 0;
    if (k < 2 || distinct < 2)
        return ht_error(HT_EINPUT,
                        "%s: byte offset 8: found only label %d in all %d labels, expected at "
                        "least 2 classes",
                        path, lab[0], n);
    for (int c = 0; classes == 0 && c < max; c++)
        if (!count[c]) {
            int bad = -1; /* the first label above the gap */
            for (int i = 0; i < n && bad < 0; i++)
                if (lab[i] > c) bad = i;
            return ht_error(HT_EINPUT,
                            "%s: byte offset %d: found label %d, but no label %d occurs: "
                            "expected the classes 0..K-1 each present (K is found from the "
                            "largest label)",
                            path, 8 + bad, lab[bad], c);
        }
    (void)first;
    *maxlab = max;
    return HT_OK;
}

int ht_idx_load_classes(ht_dataset *ds, const char *images_path, const char *labels_path,
                        int classes) {
    memset(ds, 0, sizeof *ds);
    if (classes < 0 || classes > 256)
        return ht_error(HT_EINPUT,
                        "IDX labels: class count %d, expected 0 (from the labels) or 1..256",
                        classes);

    idx_file fi, fl;
    unsigned char *pix = NULL, *lab = NULL;
    int rc = idx_open(&fi, images_path, 1);
    if (rc == HT_OK)
        rc = idx_open(&fl, labels_path, 0);
    else
        memset(&fl, 0, sizeof fl);
    /* Compare counts before reading any data: a mismatch is a pairing mistake. */
    if (rc == HT_OK && fi.dims[0] != fl.dims[0])
        rc = ht_error(HT_EINPUT,
                      "%s: byte offset 4: found %u labels, expected %u to match the images in %s "
                      "(label/image count mismatch)",
                      labels_path, fl.dims[0], fi.dims[0], images_path);
    if (rc == HT_OK) rc = idx_read_data(&fi, &pix);
    if (rc == HT_OK) rc = idx_read_data(&fl, &lab);
    idx_close(&fi);
    idx_close(&fl);

    int n = (int)fi.dims[0];
    int maxlab = 0;
    if (rc == HT_OK) rc = check_labels(labels_path, lab, n, classes, &maxlab);
    if (rc != HT_OK) {
        free(pix);
        free(lab);
        return rc;
    }

    /* One table lookup per pixel; computed in double so every value is the
     * correctly rounded float of the documented formula. */
    float lut[256];
    for (int p = 0; p < 256; p++)
        lut[p] = (float)((p / 255.0 - HT_MNIST_MEAN) / HT_MNIST_STD);
    size_t values = (size_t)fi.values;
    ds->x = ht_xmalloc(values * sizeof *ds->x);
    for (size_t i = 0; i < values; i++)
        ds->x[i] = lut[pix[i]];
    ds->y = ht_xmalloc((size_t)n * sizeof *ds->y);
    for (int i = 0; i < n; i++)
        ds->y[i] = lab[i];
    ds->n = n;
    ds->features = (int)(fi.dims[1] * fi.dims[2]);
    ds->classes = classes > 0 ? classes : maxlab + 1;
    free(pix);
    free(lab);
    return HT_OK;
}

int ht_idx_load(ht_dataset *ds, const char *images_path, const char *labels_path) {
    return ht_idx_load_classes(ds, images_path, labels_path, 0);
}
