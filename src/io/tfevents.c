/* TensorBoard event files (io/tfevents.h): TFRecord framing and the few protobuf fields of an
 * Event, encoded by hand (varints, fixed64 / fixed32, length-delimited fields). */
#include "io/tfevents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/err.h"

struct ht_tfevents {
    FILE *fp;
    char *path;
};

/* TFRecord's masked CRC: rotated right by 15 bits plus a constant, so that a CRC stored in
 * the data does not confuse a CRC over it. */
static uint32_t masked_crc(const void *p, size_t n) {
    uint32_t c = ht_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static void le(uint8_t *out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

/* ---------------------------------------------------------------- protobuf encoding */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} pb;

static void pb_byte(pb *b, uint8_t c) {
    if (b->len == b->cap) b->p = ht_xrealloc(b->p, b->cap = b->cap ? 2 * b->cap : 256);
    b->p[b->len++] = c;
}
static void pb_bytes(pb *b, const void *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        pb_byte(b, ((const uint8_t *)s)[i]);
}
static void pb_varint(pb *b, uint64_t v) {
    do {
        pb_byte(b, (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}
/* wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
static void pb_key(pb *b, int field, int wire) { pb_varint(b, (uint64_t)(field << 3 | wire)); }
static void pb_fixed(pb *b, int field, uint64_t bits, int bytes) {
    uint8_t x[8];
    pb_key(b, field, bytes == 8 ? 1 : 5);
    le(x, bits, bytes);
    pb_bytes(b, x, (size_t)bytes);
}
static void pb_string(pb *b, int field, const void *s, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    pb_bytes(b, s, n);
}

/* Event { wall_time = 1 (double); step = 2 (int64) } and the caller's field after it. */
static void event_head(pb *b, double wall, int64_t step) {
    uint64_t bits;
    memcpy(&bits, &wall, sizeof bits);
    pb_fixed(b, 1, bits, 8);
    if (step) { /* proto3: 0 is the default and left out */
        pb_key(b, 2, 0);
        pb_varint(b, (uint64_t)step); /* int64: two's complement in 10 bytes when negative */
    }
}

/* ---------------------------------------------------------------- records */

static int write_record(ht_tfevents *t, const uint8_t *data, size_t n) {
    uint8_t head[12], tail[4];
    le(head, n, 8);
    le(head + 8, masked_crc(head, 8), 4);
    le(tail, masked_crc(data, n), 4);
    errno = 0;
    if (fwrite(head, 1, 12, t->fp) != 12 || fwrite(data, 1, n, t->fp) != n ||
        fwrite(tail, 1, 4, t->fp) != 4 || fflush(t->fp) != 0) {
        int e = errno;
        clearerr(t->fp);
        return ht_error(HT_ERUNTIME, "writing TensorBoard events '%s': %s", t->path,
                        e ? strerror(e) : "write failed");
    }
    return HT_OK;
}

static double now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mkdir -p */
static int make_dirs(const char *dir) {
    char *p = ht_xstrdup(dir);
    int rc = HT_OK;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (stat(p, &st) != 0 && mkdir(p, 0777) != 0 && errno != EEXIST) {
            rc = ht_error(HT_ERUNTIME, "cannot create TensorBoard folder '%s': %s", p, strerror(errno));
            break;
        }
        *s = c;
        if (!c) break;
    }
    free(p);
    return rc;
}

int ht_tfevents_open(ht_tfevents **out, const char *dir) {
    *out = NULL;
    int rc = make_dirs(dir);
    if (rc != HT_OK) return rc;
    char host[128] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    size_t n = strlen(dir) + strlen(host) + 96;
    char *path = ht_xmalloc(n);
    snprintf(path, n, "%s/events.out.tfevents.%lld.%s.%ld", dir, (long long)time(NULL), host,
             (long)getpid());
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        rc = ht_error(HT_ERUNTIME, "cannot create TensorBoard event file '%s': %s", path,
                      strerror(errno));
        free(path);
        return rc;
    }
    ht_tfevents *t = ht_xcalloc(1, sizeof *t);
    t->fp = fp;
    t->path = path;
    pb b = {0};
    event_head(&b, now_wall(), 0);
    pb_string(&b, 3, "brain.Event:2", 13);
    rc = write_record(t, b.p, b.len);
    free(b.p);
    if (rc != HT_OK) {
        ht_tfevents_close(t);
        return rc;
    }
    *out = t;
    return HT_OK;
}

int ht_tfevents_scalars(ht_tfevents *t, int64_t step, double wall, int n, const char *const *tags,
                        const double *values) {
    pb ev = {0}, sum = {0}, val = {0};
    event_head(&ev, wall < 0 ? now_wall() : wall, step);
    for (int i = 0; i < n; i++) {
        float f = (float)values[i];
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        val.len = 0;
        pb_string(&val, 1, tags[i], strlen(tags[i]));
        pb_fixed(&val, 2, bits, 4);
        pb_string(&sum, 1, val.p, val.len);
    }
    pb_string(&ev, 5, sum.p, sum.len);
    int rc = write_record(t, ev.p, ev.len);
    free(ev.p), free(sum.p), free(val.p);
    return rc;
}

const char *ht_tfevents_path(const ht_tfevents *t) { return t->path; }

int ht_tfevents_close(ht_tfevents *t) {
    if (!t) return HT_OK;
    int rc = HT_OK;
    if (fclose(t->fp) != 0)
        rc = ht_error(HT_ERUNTIME, "closing TensorBoard event file '%s': %s", t->path, strerror(errno));
    free(t->path);
    free(t);
    return rc;
}
