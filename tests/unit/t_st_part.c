/* Reading parts of a checkpoint (ht_st_open_header, ht_st_read_f32, ht_st_expect_f32): a file
 * built here by hand (header text, data bytes at known offsets, a hole, a misaligned tensor,
 * an F16 one) read in ranges against the values put there; dtype, shape and range errors
 * name the byte where the header names the tensor; a checksummed file's damaged tensor is
 * refused when any part of it is read (with its bytes), the other tensors still read; a
 * sharded set's flat tensor read across its pieces, a damaged piece refused (naming the shard
 * and the piece) only when a range touches it; a torn set refused naming the shard. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "tap.h"
#include "tfile.h"

/* A file of header text hdr and data bytes (the length field = strlen(hdr)). */
static void make_st(const char *path, const char *hdr, const void *data, size_t ndata) {
    size_t n = strlen(hdr);
    unsigned char *b = malloc(8 + n + ndata);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, hdr, n);
    memcpy(b + 8 + n, data, ndata);
    put_file(path, b, 8 + n + ndata);
    free(b);
}

/* "<file>: byte <8 + where key appears in hdr>:" is in the last error. */
static int names_byte(const char *path, const char *hdr, const char *key) {
    char want[4200];
    snprintf(want, sizeof want, "%s: byte %zu:", path, 8 + (size_t)(strstr(hdr, key) - hdr));
    return strstr(ht_errmsg(), want) != NULL;
}

static void hand_built(void) {
    /* data: "w" 2x3 floats at 0..24, 4 bytes of hole, "h" F16 [2] at 28..32, "m" [3] floats at
     * 33..45 (misaligned), nothing after */
    static const char hdr[] =
        "{\"__metadata__\":{\"step\":\"7\"},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[28,32]},"
        "\"m\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[33,45]}}";
    unsigned char data[45] = {0};
    const float w[6] = {1.5f, -2.25f, 3, 4e-3f, -5e6f, 6};
    const float mv[3] = {-7, 8.125f, 9e-9f};
    memcpy(data, w, sizeof w);
    memset(data + 24, 0xAB, 4);
    memcpy(data + 33, mv, sizeof mv);
    const char *p = tpath("hand.safetensors");
    make_st(p, hdr, data, sizeof data);
    ht_st_file *f = NULL;
    int rc = ht_st_open_header(&f, p);
    tap_ok(rc == HT_OK && f, "a hand-built file opens header only: %s", rc ? ht_errmsg() : "");
    if (!f) return;
    tap_ok(ht_st_meta(f, "step") && !strcmp(ht_st_meta(f, "step"), "7") && ht_st_count(f) == 3,
           "its metadata and 3 tensors are there at once");
    float got[6] = {0};
    rc = ht_st_read_f32(f, "w", 2, 3, got);
    tap_ok(rc == HT_OK && !memcmp(got, w + 2, 3 * sizeof(float)),
           "floats [2, 5) of w are the bytes put at 8 + N + 8 .. 20");
    float gm[3] = {0};
    rc = ht_st_read_f32(f, "m", 0, 3, gm);
    tap_ok(rc == HT_OK && !memcmp(gm, mv, sizeof mv),
           "a tensor at a misaligned offset (33) reads back bit for bit");
    rc = ht_st_read_f32(f, "m", 1, 1, gm);
    tap_ok(rc == HT_OK && gm[0] == mv[1], "its float 1 alone");
    rc = ht_st_read_f32(f, "w", 4, 3, got);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "floats [4, 7) of tensor 'w' asked for, but it "
                                                  "holds 6") && names_byte(p, hdr, "\"w\":"),
           "a range past the end: %s", ht_errmsg());
    rc = ht_st_read_f32(f, "h", 0, 1, got);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "tensor 'h' has dtype F16, expected F32") &&
               names_byte(p, hdr, "\"h\":"),
           "an F16 tensor read as F32: %s", ht_errmsg());
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
    tap_ok(ht_st_expect_f32(f, "w", 2, s23) == HT_OK, "w is F32 [2,3]");
    rc = ht_st_expect_f32(f, "w", 2, s32);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "tensor 'w' has shape [2,3], expected [3,2]") &&
               names_byte(p, hdr, "\"w\":"),
           "expected [3,2]: %s", ht_errmsg());
    rc = ht_st_expect_f32(f, "w", 1, s6);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "has shape [2,3], expected [6]"),
           "expected [6] (same size, other rank): %s", ht_errmsg());
    rc = ht_st_expect_f32(f, "h", 1, (int64_t[1]){2});
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "has dtype F16") && names_byte(p, hdr, "\"h\":"),
           "expected F32 of an F16 tensor: %s", ht_errmsg());
    rc = ht_st_read_f32(f, "nope", 0, 1, got);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "tensor 'nope' is missing"), "a missing tensor");
    tap_ok(ht_st_get(f, "w", NULL, NULL) == NULL, "ht_st_get refuses a header-only file");
    ht_st_close(f);

    /* a header error is still found at open, with its byte */
    static const char bad[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,28]}}";
    make_st(p, bad, data, 24);
    rc = ht_st_open_header(&f, p);
    tap_ok(rc == HT_EINPUT && names_byte(p, bad, "[0,28]") && strstr(ht_errmsg(), "span 28 bytes"),
           "data_offsets not matching the shape: refused at open: %s", ht_errmsg());
}

static void checksummed(void) {
    const char *p = tpath("ck.safetensors");
    float a[1000], b[300];
    for (int i = 0; i < 1000; i++)
        a[i] = (float)i * 0.5f - 3;
    for (int i = 0; i < 300; i++)
        b[i] = (float)(i * i) + 0.25f;
    ht_st_tensor t[2] = {{.name = "a", .ndim = 1, .shape = {1000}, .data = a},
                         {.name = "b", .ndim = 2, .shape = {20, 15}, .data = b}};
    tap_ok(ht_st_write(p, t, 2, NULL, NULL, 0) == HT_OK, "ht_st_write: 2 tensors, checksummed");
    size_t n = 0;
    unsigned char *bytes = get_file(p, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | bytes[i];
    /* the writer lays tensors out in order: a at [0, 4000), b at [4000, 5200) */
    bytes[8 + hl + 4000 + 1199] ^= 0x10; /* the last byte of b */
    put_file(p, bytes, n);
    free(bytes);
    ht_st_file *f = NULL;
    int rc = ht_st_open_header(&f, p);
    tap_ok(rc == HT_OK && ht_st_checksummed(f), "the damaged file opens header only (the header "
                                                "is intact)");
    if (!f) return;
    float got[300];
    rc = ht_st_read_f32(f, "a", 10, 20, got);
    tap_ok(rc == HT_OK && !memcmp(got, a + 10, 20 * sizeof(float)), "an intact tensor's part reads");
    rc = ht_st_read_f32(f, "b", 0, 2, got);
    char want[256];
    snprintf(want, sizeof want, "byte %llu: tensor 'b' (bytes %llu to %llu) has CRC32C",
             (unsigned long long)(8 + hl + 4000), (unsigned long long)(8 + hl + 4000),
             (unsigned long long)(8 + hl + 5200));
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), want),
           "floats [0, 2) of b, whose last byte was flipped: the whole tensor's checksum fails: %s",
           ht_errmsg());
    ht_st_close(f);
}

static void set(void) {
    /* 2 shards of one save: w whole in shard 1, the flat s (7 floats) as pieces s#0 (3) and
     * s#3 (4) */
    const char *base = tpath("s.safetensors");
    float w[4] = {1, 2, 3, 4}, s[7] = {10, 11, 12, 13, 14, 15, 16};
    ht_st_tensor t1[2] = {{.name = "w", .ndim = 1, .shape = {4}, .data = w},
                          {.name = "s#0", .ndim = 1, .shape = {3}, .data = s}};
    ht_st_tensor t2[1] = {{.name = "s#3", .ndim = 1, .shape = {4}, .data = s + 3}};
    const char *k[] = {"set.flat.s"}, *v[] = {"7"};
    int rc = ht_st_set_write_shard(base, 1, 2, 5, t1, 2, k, v, 1);
    if (rc == HT_OK) rc = ht_st_set_write_shard(base, 2, 2, 5, t2, 1, k, v, 1);
    if (rc == HT_OK) rc = ht_st_set_commit(base, 2, 5);
    tap_ok(rc == HT_OK, "a set of 2 shards written: %s", rc ? ht_errmsg() : "");
    ht_st_file *f = NULL;
    rc = ht_st_open_header(&f, base);
    float got[7] = {0};
    int nd = 0;
    int64_t sh[HT_ST_MAX_DIM];
    tap_ok(rc == HT_OK && ht_st_shape(f, "s", &nd, sh) && nd == 1 && sh[0] == 7,
           "the set opens header only; s is [7] (its pieces joined)");
    if (f) rc = ht_st_read_f32(f, "s", 2, 4, got);
    tap_ok(f && rc == HT_OK && !memcmp(got, s + 2, 4 * sizeof(float)),
           "floats [2, 6) of s, across its two pieces in two shards");
    if (f) rc = ht_st_read_f32(f, "w", 1, 2, got);
    tap_ok(f && rc == HT_OK && got[0] == 2 && got[1] == 3, "floats [1, 3) of w");
    ht_st_close(f);

    /* a bit flipped in piece s#3 (shard 2, its data's last byte): a range of s inside the
     * first piece still reads; one touching s#3 is refused naming the shard and the piece */
    char p2[4200];
    ht_st_set_shard_path(base, 2, 2, p2, sizeof p2);
    size_t n = 0;
    unsigned char *b = get_file(p2, &n);
    if (b) b[n - 1] ^= 0x01, put_file(p2, b, n);
    f = NULL;
    rc = ht_st_open_header(&f, base);
    if (rc == HT_OK) rc = ht_st_read_f32(f, "s", 0, 3, got);
    tap_ok(rc == HT_OK && !memcmp(got, s, 3 * sizeof(float)),
           "with s#3 damaged, floats [0, 3) of s (piece s#0) still read: %s", rc ? ht_errmsg() : "");
    if (f) rc = ht_st_read_f32(f, "s", 2, 2, got);
    char want[4400];
    snprintf(want, sizeof want, "%s: byte %zu: tensor 's#3' (bytes %zu to %zu) has CRC32C", p2,
             n - 16, n - 16, n);
    tap_ok(f && rc == HT_EINPUT && strstr(ht_errmsg(), want),
           "floats [2, 4) touch s#3: refused naming the shard, the piece and its bytes: %s",
           ht_errmsg());
    ht_st_close(f);
    if (b) b[n - 1] ^= 0x01, put_file(p2, b, n);
    free(b);

    /* shard 2 replaced by a shard of another save (step 6): torn, named */
    const char *k6[] = {"set.flat.s"};
    rc = ht_st_set_write_shard(tpath("o.safetensors"), 2, 2, 6, t2, 1, k6, v, 1);
    char o2[4200], o2n[4300];
    ht_st_set_shard_path(tpath("o.safetensors"), 2, 2, o2, sizeof o2);
    snprintf(o2n, sizeof o2n, "%s.next", o2);
    b = get_file(o2n, &n);
    if (b) put_file(p2, b, n);
    free(b);
    f = NULL;
    rc = ht_st_open_header(&f, base);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), p2) && strstr(ht_errmsg(), "torn set"),
           "a shard of another save: refused naming it: %s", ht_errmsg());
    ht_st_close(f);
}

int main(void) {
    ht_log_set_level(HT_LOG_QUIET);
    tfile_init("t_st_part");
    hand_built();
    checksummed();
    set();
    tfile_done();
    return tap_done();
}
