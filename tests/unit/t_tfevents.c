/* TensorBoard event files (src/io/tfevents.c) read back by an independent decoder written
 * here from the format's description: TFRecord framing (uint64 length, masked CRC32C of it,
 * data, masked CRC32C of the data) checked with a bit-by-bit CRC32C (verified against the
 * published check value), and the Event / Summary / Value protobuf fields decoded by wire
 * type. The writer's own CRC32C is checked against the same check value. Also the metrics
 * hook: records become "type/key" scalars at their step. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "io/metrics.h"
#include "io/tfevents.h"
#include "tap.h"

/* CRC32C bit by bit from the reflected polynomial (no table, unlike the writer's). */
static uint32_t crc_bits(const uint8_t *p, size_t n) {
    uint32_t c = ~0u;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}
static uint32_t mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xA282EAD8u; }
static uint64_t rd(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

typedef struct {
    double wall;
    long long step;
    char version[32];
    int nval;
    char tag[8][256];
    float val[8];
} event;

/* A varint at *p (< end); -1 when it runs past end or past 10 bytes. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 70; s += 7) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7F) << s;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* One protobuf field: number, wire type and payload (varint value, fixed bytes or a slice). */
typedef struct {
    int num, wire;
    uint64_t v;
    const uint8_t *s;
    size_t n;
} field;
static int next_field(const uint8_t **p, const uint8_t *end, field *f) {
    uint64_t key;
    if (varint(p, end, &key)) return -1;
    f->num = (int)(key >> 3), f->wire = (int)(key & 7);
    switch (f->wire) {
    case 0: return varint(p, end, &f->v);
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(end - *p) < n) return -1;
        f->v = rd(*p, (int)n), f->s = *p, f->n = n, *p += n;
        return 0;
    }
    case 2:
        if (varint(p, end, &f->v) || f->v > (uint64_t)(end - *p)) return -1;
        f->s = *p, f->n = (size_t)f->v, *p += f->n;
        return 0;
    default: return -1;
    }
}

/* Decodes an Event; 0, or -1 for a field of an unexpected number or wire type. */
static int decode_event(const uint8_t *p, size_t n, event *e) {
    memset(e, 0, sizeof *e);
    const uint8_t *end = p + n;
    field f;
    while (p < end) {
        if (next_field(&p, end, &f)) return -1;
        if (f.num == 1 && f.wire == 1) {
            memcpy(&e->wall, &f.v, 8);
        } else if (f.num == 2 && f.wire == 0) {
            e->step = (long long)f.v;
        } else if (f.num == 3 && f.wire == 2 && f.n < sizeof e->version) {
            memcpy(e->version, f.s, f.n);
        } else if (f.num == 5 && f.wire == 2) { /* Summary { repeated Value value = 1 } */
            const uint8_t *q = f.s, *qe = f.s + f.n;
            field g;
            while (q < qe) {
                if (next_field(&q, qe, &g) || g.num != 1 || g.wire != 2 || e->nval == 8) return -1;
                const uint8_t *r = g.s, *re = g.s + g.n; /* Value { tag = 1; simple_value = 2 } */
                field h;
                int have = 0;
                while (r < re) {
                    if (next_field(&r, re, &h)) return -1;
                    if (h.num == 1 && h.wire == 2 && h.n < 256)
                        memcpy(e->tag[e->nval], h.s, h.n), e->tag[e->nval][h.n] = 0, have |= 1;
                    else if (h.num == 2 && h.wire == 5) {
                        uint32_t bits = (uint32_t)h.v;
                        memcpy(&e->val[e->nval], &bits, 4), have |= 2;
                    } else
                        return -1;
                }
                if (have != 3) return -1;
                e->nval++;
            }
        } else
            return -1;
    }
    return 0;
}

/* Reads every record of the file; returns the count, or -1 (with a diagnostic) for a bad
 * length, CRC or protobuf. */
static int read_events(const char *path, event *ev, int max) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    size_t at = 0;
    int k = 0;
    while (at < n && k < max) {
        if (n - at < 12) break;
        uint64_t len = rd(buf + at, 8);
        if ((uint32_t)rd(buf + at + 8, 4) != mask(crc_bits(buf + at, 8)) || len > n - at - 16) {
            tap_diag("record %d: bad length or its CRC at byte %zu", k, at);
            k = -1;
            break;
        }
        const uint8_t *data = buf + at + 12;
        if ((uint32_t)rd(data + len, 4) != mask(crc_bits(data, len))) {
            tap_diag("record %d: the data's CRC does not match", k);
            k = -1;
            break;
        }
        if (decode_event(data, len, &ev[k])) {
            tap_diag("record %d: not an Event as expected", k);
            k = -1;
            break;
        }
        k++, at += 16 + len;
    }
    if (k >= 0 && at != n) k = -1; /* trailing bytes */
    free(buf);
    return k;
}

/* The one event file in dir. */
static int find_file(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20))
            snprintf(out, n, "%s/%s", dir, e->d_name), found++;
    if (d) closedir(d);
    return found;
}

int main(void) {
    const uint8_t check[] = "123456789";
    tap_ok(crc_bits(check, 9) == 0xE3069283u, "the test's CRC32C(\"123456789\") = 0xE3069283");
    tap_ok(ht_crc32c(0, check, 9) == 0xE3069283u, "the writer's CRC32C(\"123456789\") = 0x%08X",
           ht_crc32c(0, check, 9));
    uint8_t rnd[1000];
    for (int i = 0; i < 1000; i++)
        rnd[i] = (uint8_t)(i * 7919u >> 3);
    tap_ok(ht_crc32c(0, rnd, 1000) == crc_bits(rnd, 1000) && ht_crc32c(0, rnd, 0) == 0,
           "the writer's CRC32C agrees on 1000 bytes, 0 for none");

    char root[] = "/tmp/t_tfevents.XXXXXX", dir[128], path[512];
    if (!mkdtemp(root)) return printf("Bail out! mkdtemp\n"), 1;
    snprintf(dir, sizeof dir, "%s/a/b", root); /* created with its parent */
    ht_tfevents *t;
    int rc = ht_tfevents_open(&t, dir);
    tap_ok(rc == HT_OK && find_file(dir, path, sizeof path) == 1, "opens an event file in a new folder");
    char longtag[201];
    memset(longtag, 'x', 200), longtag[200] = 0; /* a length past one varint byte */
    const char *tags[] = {"train/loss", "train/lr", longtag};
    const double vals[] = {2.5, 1e-3, -7.25};
    rc |= ht_tfevents_scalars(t, 5, 1234.5, 2, tags, vals);
    rc |= ht_tfevents_scalars(t, 1LL << 40, 99.0, 3, tags, vals);
    rc |= ht_tfevents_close(t);
    event ev[8];
    int k = read_events(path, ev, 8);
    tap_ok(rc == HT_OK && k == 3, "3 records, lengths and CRCs check (%d)", k);
    tap_ok(k == 3 && !strcmp(ev[0].version, "brain.Event:2") && ev[0].nval == 0 && ev[0].wall > 1.7e9,
           "first: file_version \"brain.Event:2\" at the wall time now");
    tap_ok(k == 3 && ev[1].wall == 1234.5 && ev[1].step == 5 && ev[1].nval == 2 &&
               !strcmp(ev[1].tag[0], "train/loss") && ev[1].val[0] == 2.5f &&
               !strcmp(ev[1].tag[1], "train/lr") && ev[1].val[1] == 1e-3f,
           "second: step 5, wall 1234.5, train/loss 2.5, train/lr 0.001");
    tap_ok(k == 3 && ev[2].step == 1LL << 40 && ev[2].nval == 3 && !strcmp(ev[2].tag[2], longtag) &&
               ev[2].val[2] == -7.25f,
           "third: step 2^40, a 200-character tag, -7.25");
    /* the decoder is not blind: one flipped bit fails the data's CRC */
    FILE *f = fopen(path, "r+b");
    fseek(f, -6, SEEK_END);
    int c = fgetc(f);
    fseek(f, -6, SEEK_END);
    fputc(c ^ 1, f);
    fclose(f);
    tap_ok(read_events(path, ev, 8) == -1, "a flipped bit is caught by the CRC");
    unlink(path);

    /* the metrics hook: no JSON file, events only */
    ht_metrics *m;
    rc = ht_metrics_open(&m, NULL, 0);
    rc |= ht_metrics_tensorboard(m, root);
    rc |= ht_metrics_train(m, 10, 1.5, 0.01, 300.0);
    rc |= ht_metrics_write(m, "type=%s step=%lld rank=%d host=%s compute_s=%g", "rank", 10LL, 1, "h", 0.25);
    rc |= ht_metrics_write(m, "type=%s rank=%d step_s=%g", "pipe", 0, 0.125); /* no step */
    rc |= ht_metrics_close(m);
    k = find_file(root, path, sizeof path) == 1 ? read_events(path, ev, 8) : -1;
    tap_ok(rc == HT_OK && k == 4 && ev[1].step == 10 && ev[1].nval == 3 &&
               !strcmp(ev[1].tag[0], "train/loss") && ev[1].val[0] == 1.5f &&
               !strcmp(ev[1].tag[2], "train/samples_per_s") && ev[1].val[2] == 300.0f,
           "metrics: a train record is train/loss, train/lr, train/samples_per_s at its step");
    tap_ok(k == 4 && ev[2].step == 10 && ev[2].nval == 1 && !strcmp(ev[2].tag[0], "rank/compute_s/rank1") &&
               ev[2].val[0] == 0.25f && ev[3].step == 10 && !strcmp(ev[3].tag[0], "pipe/step_s/rank0"),
           "metrics: per-rank times tagged by rank; a record without a step at the last one");
    unlink(path);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/a", root);
    rmdir(dir);
    rmdir(root);
    return tap_done();
}
