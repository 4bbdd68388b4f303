/* Atomic safetensors writer for F32 tensors: the whole file goes to <path>.tmp.<pid>, is
 * fsynced and renamed over path, so a crash or a full disk never leaves a torn checkpoint;
 * CRC32C checksums in the header let every later load prove the bytes unchanged. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/err.h"
#include "core/path.h"
#include "io/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code writes floats unswapped"
#endif

/* ---- writer ----------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A name that occurs twice in names[0..n), or NULL (sorted copy: n may be large). */
static const char *find_dup(const char *const *names, int n) {
    if (n < 2) return NULL;
    const char **s = ht_xmalloc((size_t)n * sizeof *s);
    const char *dup = NULL;
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_str);
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(s[i], s[i - 1])) dup = s[i];
    free(s);
    return dup;
}

static int write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int check_args(const ht_st_tensor *t, int nt, const char *const *mk, const char *const *mv,
                      int nmeta, int64_t *nbytes) {
    if (nt < 0 || nmeta < 0 || (nt && !t) || (nmeta && (!mk || !mv)))
        return ht_error(HT_EINPUT, "safetensors write: bad tensor or metadata count");
    for (int i = 0; i < nmeta; i++)
        if (!mk[i] || !mv[i] || !ht_utf8_valid(mk[i], strlen(mk[i])) ||
            !ht_utf8_valid(mv[i], strlen(mv[i])))
            return ht_error(HT_EINPUT, "safetensors write: metadata pair %d is NULL or not UTF-8",
                            i);
    for (int i = 0; i < nmeta; i++)
        if (!strncmp(mk[i], "crc32c", 6))
            return ht_error(HT_EINPUT,
                            "safetensors write: metadata key '%s' is reserved for checksums",
                            mk[i]);
    const char *dup = find_dup(mk, nmeta);
    if (dup) return ht_error(HT_EINPUT, "safetensors write: duplicate metadata key '%s'", dup);
    const char **names = ht_xmalloc((size_t)(nt ? nt : 1) * sizeof *names);
    int64_t total = 0;
    for (int i = 0; i < nt; i++) {
        const char *nm = t[i].name;
        names[i] = nm ? nm : "";
        if (!nm || !*nm || !strcmp(nm, "__metadata__") || !ht_utf8_valid(nm, strlen(nm))) {
            free(names);
            return ht_error(HT_EINPUT,
                            "safetensors write: tensor %d has an empty, reserved or non-UTF-8 name",
                            i);
        }
        if (t[i].ndim < 0 || t[i].ndim > HT_ST_MAX_DIM) {
            free(names);
            return ht_error(HT_EINPUT,
                            "safetensors write: tensor '%s' has ndim %d (expected 0..%d)", nm,
                            t[i].ndim, HT_ST_MAX_DIM);
        }
        int64_t n = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            int64_t s = t[i].shape[d];
            if (s < 0 || (s && n > INT64_MAX / 4 / s)) {
                free(names);
                return ht_error(HT_EINPUT,
                                "safetensors write: tensor '%s' has a negative or huge shape", nm);
            }
            n *= s;
        }
        if (n && !t[i].data) {
            free(names);
            return ht_error(HT_EINPUT, "safetensors write: tensor '%s' has no data", nm);
        }
        nbytes[i] = 4 * n;
        if (total > INT64_MAX - nbytes[i]) {
            free(names);
            return ht_error(HT_EINPUT, "safetensors write: total size overflows");
        }
        total += nbytes[i];
    }
    dup = find_dup(names, nt);
    free(names);
    if (dup) return ht_error(HT_EINPUT, "safetensors write: duplicate tensor name '%s'", dup);
    return HT_OK;
}

/* The JSON header into h: "__metadata__" with crc32c_header (as "00000000"; returns the
 * offset of its digits in h), crc32c.<name> per tensor and the caller's pairs; the tensors in
 * order, data back to back; spaces to a multiple of 8 bytes. */
static size_t put_header(ht_jbuf *h, const ht_st_tensor *t, int nt, const char *const *mk,
                         const char *const *mv, int nmeta, const int64_t *nbytes,
                         const uint32_t *crc) {
    ht_jbuf_puts(h, "{\"__metadata__\":{\"" HT_ST_CRC_HEADER "\":\"");
    size_t at = h->len;
    ht_jbuf_puts(h, "00000000\"");
    for (int i = 0; i < nt; i++) {
        ht_jbuf key = {0};
        ht_jbuf_puts(&key, HT_ST_CRC_PREFIX);
        ht_jbuf_puts(&key, t[i].name);
        ht_jbuf_putc(h, ',');
        ht_jbuf_put_str(h, key.s);
        ht_jbuf_printf(h, ":\"%08x\"", crc[i]);
        ht_jbuf_free(&key);
    }
    for (int i = 0; i < nmeta; i++) {
        ht_jbuf_putc(h, ',');
        ht_jbuf_put_str(h, mk[i]);
        ht_jbuf_putc(h, ':');
        ht_jbuf_put_str(h, mv[i]);
    }
    ht_jbuf_putc(h, '}');
    int64_t off = 0;
    for (int i = 0; i < nt; i++) {
        ht_jbuf_putc(h, ',');
        ht_jbuf_put_str(h, t[i].name);
        ht_jbuf_puts(h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++)
            ht_jbuf_printf(h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        ht_jbuf_printf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
                       (long long)(off + nbytes[i]));
        off += nbytes[i];
    }
    ht_jbuf_putc(h, '}');
    while (h->len % 8)
        ht_jbuf_putc(h, ' '); /* data starts 8-aligned, as the reference writer does */
    return at;
}

/* Fault injection for the tests that kill writers mid-save (tests/README.md):
 * HT_FAILPOINT=save-pause:MS sleeps MS ms once the temp file is written and synced, before
 * the rename commits it, so that a kill lands inside the save however loaded the machine is.
 * Unset: 0, no pause. */
static long save_pause_ms(void) {
    static long ms = -1; /* -1: not read yet */
    if (ms < 0) {
        const char *e = getenv("HT_FAILPOINT");
        ms = 0;
        if (e && *e) {
            const char *pre = "save-pause:";
            char *end = NULL;
            long v = -1;
            if (!strncmp(e, pre, strlen(pre)) && e[strlen(pre)] >= '0' && e[strlen(pre)] <= '9') {
                errno = 0;
                v = strtol(e + strlen(pre), &end, 10);
                if (errno || *end) v = -1;
            }
            if (v < 1 || v > 600000)
                ht_die(HT_EINPUT, "HT_FAILPOINT='%s': expected save-pause:MS, MS from 1 to 600000 "
                                  "(a fault-injection knob for tests)", e);
            ms = v;
        }
    }
    return ms;
}

static void failpoint_save_pause(void) {
    long ms = save_pause_ms();
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int ht_st_write(const char *path, const ht_st_tensor *t, int nt, const char *const *meta_keys,
                const char *const *meta_vals, int nmeta) {
    /* never rename over a device, FIFO, socket or directory (checkpoint.path = "/dev/full"
     * once turned the system's device into a regular file) */
    if (ht_check_replaceable(path, "checkpoint") != HT_OK) return HT_EINPUT;
    ht_remove_stale_tmp(path); /* leftovers of a killed writer */
    save_pause_ms();           /* a bad HT_FAILPOINT ends the run before any temp file */
    int64_t *nbytes = ht_xmalloc((size_t)(nt > 0 ? nt : 1) * sizeof *nbytes);
    int rc = check_args(t, nt, meta_keys, meta_vals, nmeta, nbytes);
    if (rc) {
        free(nbytes);
        return rc;
    }
    /* the checksums first: they go into the header, which comes first in the file */
    uint32_t *crc = ht_xmalloc((size_t)(nt > 0 ? nt : 1) * sizeof *crc);
    for (int i = 0; i < nt; i++)
        crc[i] = nbytes[i] ? ht_crc32c(0, t[i].data, (size_t)nbytes[i]) : 0;
    ht_jbuf h = {0};
    size_t hcrc_at = put_header(&h, t, nt, meta_keys, meta_vals, nmeta, nbytes, crc);
    free(crc);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    /* the header's own checksum: of the length field and the header with its digits as '0' */
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", ht_crc32c(ht_crc32c(0, lenb, 8), h.s, h.len));
    memcpy(h.s + hcrc_at, hex, 8);

    size_t plen = strlen(path) + 32;
    char *tmp = ht_xmalloc(plen);
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    const char *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) goto fail;
    what = "write";
    if (write_full(fd, lenb, 8) || write_full(fd, h.s, h.len)) goto fail;
    for (int i = 0; i < nt; i++)
        if (nbytes[i] && write_full(fd, t[i].data, (size_t)nbytes[i])) goto fail;
    what = "fsync";
    if (fsync(fd) != 0) goto fail;
    what = "close";
    int cr = close(fd);
    fd = -1;
    if (cr != 0) goto fail;
    failpoint_save_pause();
    what = "rename";
    if (rename(tmp, path) != 0) goto fail;
    /* Make the rename itself durable; a failure here loses nothing already on disk. */
    char *dir = ht_xstrdup(path), *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir ? 1 : 0] = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    free(tmp);
    free(nbytes);
    ht_jbuf_free(&h);
    return HT_OK;
fail:
    rc = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    ht_error(HT_ERUNTIME, "checkpoint '%s': cannot %s temp file '%s': %s", path, what, tmp,
             strerror(rc));
    free(tmp);
    free(nbytes);
    ht_jbuf_free(&h);
    return HT_ERUNTIME;
}
