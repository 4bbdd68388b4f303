/* CRC32C against published check values (the CRC catalogue's "123456789", RFC 3720's iSCSI
 * vectors) and against a bit-at-a-time reference written from the polynomial, for the table
 * path and the CPU-instruction path, at every alignment and length up to 300 bytes, and
 * continued across pieces. Then the checksums of safetensors files: checked by an independent
 * reader (Python), and every flipped bit, truncation, appended byte or spliced tensor of a
 * written file refused naming the file and the tensor, while a file without checksums loads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/err.h"
#include "io/safetensors.h"
#include "tap.h"
#include "tfile.h"

/* One bit at a time, straight from the definition (reflected 0x1EDC6F41 = 0x82F63B78). */
static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_vectors(const char *what, crc_fn f) {
    unsigned char b[48];
    tap_ok(f(0, "123456789", 9) == 0xE3069283u, "%s: CRC32C(\"123456789\") = 0xE3069283 (got 0x%08X)",
           what, f(0, "123456789", 9));
    tap_ok(f(0, "", 0) == 0, "%s: the empty string gives 0", what);
    /* RFC 3720 B.4 */
    memset(b, 0, 32);
    uint32_t z = f(0, b, 32);
    memset(b, 0xFF, 32);
    uint32_t o = f(0, b, 32);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    uint32_t inc = f(0, b, 32);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)(31 - i);
    uint32_t dec = f(0, b, 32);
    tap_ok(z == 0x8A9136AAu && o == 0x62A8AB43u && inc == 0x46DD794Eu && dec == 0x113FDB5Cu,
           "%s: RFC 3720 vectors: 32 zeros 0x%08X, 32 x 0xFF 0x%08X, 0..31 0x%08X, 31..0 0x%08X",
           what, z, o, inc, dec);
    /* an iSCSI SCSI Read (10) command PDU, RFC 3720 B.4 */
    static const unsigned char pdu[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    tap_ok(f(0, pdu, 48) == 0xD9963A56u, "%s: RFC 3720 read PDU 0xD9963A56 (got 0x%08X)", what,
           f(0, pdu, 48));
}

/* Every offset 0..7 and length 0..300 of random bytes against the bitwise reference; and the
 * CRC of a buffer continued across two pieces at every split. */
static void check_random(const char *what, crc_fn f) {
    unsigned char *buf = malloc(320);
    uint32_t s = 12345;
    for (int i = 0; i < 320; i++) {
        s = s * 1103515245u + 12345u;
        buf[i] = (unsigned char)(s >> 16);
    }
    int bad = 0, first_off = -1, first_n = -1;
    for (int off = 0; off < 8; off++)
        for (int n = 0; n <= 300; n++)
            if (f(0, buf + off, (size_t)n) != crc_bitwise(0, buf + off, (size_t)n)) {
                if (!bad++) first_off = off, first_n = n;
            }
    tap_ok(bad == 0, "%s: random bytes at offsets 0..7, lengths 0..300 equal the bitwise "
                     "reference (%d differ; first at offset %d length %d)",
           what, bad, first_off, first_n);
    uint32_t whole = crc_bitwise(0, buf, 300);
    bad = 0;
    for (int k = 0; k <= 300; k++)
        bad += f(f(0, buf, (size_t)k), buf + k, (size_t)(300 - k)) != whole;
    tap_ok(bad == 0, "%s: continued across two pieces at every split of 300 bytes (%d differ)",
           what, bad);
    /* a flipped bit anywhere changes it (CRCs catch every single-bit error) */
    bad = 0;
    for (int i = 0; i < 300 * 8; i++) {
        buf[i / 8] ^= (unsigned char)(1u << (i % 8));
        bad += f(0, buf, 300) == whole;
        buf[i / 8] ^= (unsigned char)(1u << (i % 8));
    }
    tap_ok(bad == 0, "%s: each of the 2400 single-bit flips of 300 bytes changes it", what);
    free(buf);
}

/* ---- checksummed files ------------------------------------------------------------------ */

#define NT 4
static const char *k_names[NT] = {"w1", "b1", "empty", "s"};
static float g_w[15], g_b[5], g_s;

/* A small checkpoint-like file: w1 [3,5], b1 [5], empty [0,4], scalar s; metadata step. The
 * values depend on step, as a real run's do. */
static int write_file(const char *path, int step) {
    for (int i = 0; i < 15; i++)
        g_w[i] = 0.1f * (float)(i + step);
    for (int i = 0; i < 5; i++)
        g_b[i] = -0.5f * (float)(i * step + 1);
    g_s = (float)step;
    ht_st_tensor t[NT] = {{k_names[0], 2, {3, 5}, g_w},
                          {k_names[1], 1, {5}, g_b},
                          {k_names[2], 2, {0, 4}, NULL},
                          {k_names[3], 0, {0}, &g_s}};
    char sv[16];
    snprintf(sv, sizeof sv, "%d", step);
    const char *keys[] = {"step"}, *vals[] = {sv};
    return ht_st_write(path, t, NT, keys, vals, 1);
}

/* Opening path fails with HT_EINPUT naming path and containing want (may be NULL). */
static int refused(const char *path, const char *want) {
    ht_st_file *f = NULL;
    ht_error_clear();
    int rc = ht_st_open(&f, path);
    ht_st_close(f);
    return rc == HT_EINPUT && strstr(ht_errmsg(), path) && (!want || strstr(ht_errmsg(), want));
}

/* Python as an independent reader: a bitwise CRC32C of each tensor's bytes and of the header
 * (its own digits as zeros) equal the stored values. */
static void check_python(const char *path) {
    if (system("/usr/bin/python3 -c 'import json' >/dev/null 2>&1") != 0) {
        tap_skip("/usr/bin/python3 not available: no independent check of the stored checksums");
        return;
    }
    const char *script =
        "import json, struct, sys\n"
        "def crc(b, c=0):\n"
        "    c ^= 0xFFFFFFFF\n"
        "    for x in b:\n"
        "        c ^= x\n"
        "        for _ in range(8): c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)\n"
        "    return c ^ 0xFFFFFFFF\n"
        "b = open(sys.argv[1], 'rb').read()\n(n,) = struct.unpack('<Q', b[:8])\n"
        "h = json.loads(b[8:8 + n]); m = h.pop('__metadata__'); d = b[8 + n:]\n"
        "assert m['step'] == '7' and len(h) == 4, m\n"
        "for k, v in h.items():\n"
        "    s, e = v['data_offsets']\n"
        "    assert m['crc32c.' + k] == '%08x' % crc(d[s:e]), k\n"
        "at = b.index(b'\"crc32c_header\":\"') + 17\n"
        "z = b[:at] + b'00000000' + b[at + 8:8 + n]\n"
        "assert m['crc32c_header'] == '%08x' % crc(z), (m['crc32c_header'], '%08x' % crc(z))\n";
    put_file(tpath("check.py"), script, strlen(script));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", tpath("check.py"), path);
    tap_ok(system(cmd) == 0, "a bitwise CRC32C in Python agrees with each tensor's checksum and "
                             "the header's");
}

/* Every single-bit flip of the file: refused, naming the file, and for a flip in a tensor's
 * data that tensor; every truncation; one appended byte. */
static void check_damage(const char *path) {
    size_t n;
    unsigned char *b = get_file(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    const char *bad = tpath("bad.safetensors");
    /* data offsets by hand: w1 60 bytes, b1 20, empty 0, s 4 */
    static const size_t end[NT] = {60, 80, 80, 84};
    int hdr_bad = 0, dat_bad = 0, nh = 0, nd = 0;
    long first_h = -1, first_d = -1;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++) {
            b[i] ^= (unsigned char)(1u << k);
            put_file(bad, b, n);
            b[i] ^= (unsigned char)(1u << k);
            const char *want = NULL;
            if (i >= 8 + hl)
                for (int t = 0; t < NT && !want; t++)
                    if (i - 8 - hl < end[t]) want = k_names[t];
            char w[32];
            if (want) snprintf(w, sizeof w, "tensor '%s'", want);
            int ok = refused(bad, want ? w : NULL);
            if (want ? (nd++, !ok && !dat_bad++) : (nh++, !ok && !hdr_bad++))
                *(want ? &first_d : &first_h) = (long)i;
            if (!ok && (hdr_bad + dat_bad) == 1) tap_diag("byte %zu bit %d: %s", i, k, ht_errmsg());
        }
    tap_ok(hdr_bad == 0 && nh == 8 * (int)(8 + hl),
           "each of the %d single-bit flips in the length field and JSON header is refused "
           "naming the file (%d not; first at byte %ld)",
           nh, hdr_bad, first_h);
    tap_ok(dat_bad == 0 && nd == 8 * 84,
           "each of the %d single-bit flips in the tensors' data is refused naming the file and "
           "that tensor (%d not; first at byte %ld)",
           nd, dat_bad, first_d);
    b[8 + hl + 62] ^= 0x10;
    put_file(bad, b, n);
    b[8 + hl + 62] ^= 0x10;
    refused(bad, NULL);
    tap_diag("a flipped bit in b1: %s", ht_errmsg());
    int trunc_bad = 0;
    for (size_t len = 0; len < n; len++) {
        put_file(bad, b, len);
        trunc_bad += !refused(bad, NULL);
    }
    tap_ok(trunc_bad == 0, "each of the %zu truncations is refused naming the file (%d not)", n,
           trunc_bad);
    unsigned char *more = malloc(n + 1);
    memcpy(more, b, n);
    more[n] = 0;
    put_file(bad, more, n + 1);
    tap_ok(refused(bad, "1 byte(s) after the last tensor"), "a byte appended is refused: %s",
           ht_errmsg());
    free(more);
    free(b);
}

/* The same layout at two steps: b1's bytes (alone, or with its checksum) from the other. */
static void check_splice(void) {
    const char *a = tpath("a.safetensors"), *c = tpath("c.safetensors"), *bad = tpath("sp.st");
    write_file(a, 10);
    write_file(c, 20);
    size_t na, nc;
    unsigned char *x = get_file(a, &na), *y = get_file(c, &nc);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | x[i];
    tap_ok(na == nc && memcmp(x, y, 8) == 0 && memcmp(x + 8 + hl + 60, y + 8 + hl + 60, 20),
           "two steps' files: the same layout, b1's data differ");
    unsigned char *z = malloc(na);
    memcpy(z, x, na);
    memcpy(z + 8 + hl + 60, y + 8 + hl + 60, 20);
    put_file(bad, z, na);
    tap_ok(refused(bad, "tensor 'b1'"), "b1's data from step 20 in step 10's file: %s",
           ht_errmsg());
    /* and its checksum too: the header's checksum fails */
    char *h = (char *)z + 8, *k = strstr(h, "\"crc32c.b1\":\"");
    char *kc = strstr((char *)y + 8, "\"crc32c.b1\":\"");
    if (k && kc) memcpy(k + 13, kc + 13, 8);
    put_file(bad, z, na);
    tap_ok(k && kc && refused(bad, "the header"), "and b1's checksum from step 20 too: %s",
           ht_errmsg());
    free(x);
    free(y);
    free(z);
}

/* Files without checksums (another tool's) load; ones with some but not all do not. */
static void check_foreign(void) {
    const char *p = tpath("plain.safetensors");
    static const char hdr[] = "{\"__metadata__\":{\"format\":\"pt\"},"
                              "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    float d[2] = {1.5f, -2.0f};
    size_t hl = strlen(hdr);
    unsigned char *b = malloc(8 + hl + 8);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    memcpy(b + 8 + hl, d, 8);
    put_file(p, b, 8 + hl + 8);
    ht_st_file *f = NULL;
    ht_error_clear();
    int rc = ht_st_open(&f, p);
    const float *x = f ? ht_st_get(f, "x", NULL, NULL) : NULL;
    tap_ok(rc == HT_OK && x && x[1] == -2.0f && !ht_st_checksummed(f),
           "a file without checksums loads, marked as unverified (%s)", ht_errmsg());
    ht_st_close(f);
    f = NULL;
    rc = write_file(p, 3) == HT_OK ? ht_st_open(&f, p) : -1;
    tap_ok(rc == HT_OK && f && ht_st_checksummed(f), "one written here is marked verified");
    ht_st_close(f);
    /* a checksum key renamed (a tensor's checksum then missing) */
    size_t n;
    unsigned char *w = get_file(p, &n);
    char *k = strstr((char *)w + 8, "\"crc32c.w1\"");
    if (k) k[8] = 'x';
    put_file(p, w, n);
    tap_ok(k && refused(p, NULL), "a tensor checksum's key changed: %s", ht_errmsg());
    const char *keys[] = {"crc32c.mine"}, *vals[] = {"0"};
    ht_st_tensor t = {"x", 1, {2}, d};
    tap_ok(ht_st_write(p, &t, 1, keys, vals, 1) == HT_EINPUT,
           "the writer refuses metadata keys starting 'crc32c': %s", ht_errmsg());
    free(w);
    free(b);
}

int main(void) {
    tfile_init("ht_crc");
    check_vectors("tables", ht_crc32c_sw);
    check_random("tables", ht_crc32c_sw);
    check_vectors(ht_crc32c_hw() ? "CPU instruction" : "default (tables)", ht_crc32c);
    check_random(ht_crc32c_hw() ? "CPU instruction" : "default (tables)", ht_crc32c);
    tap_diag("ht_crc32c uses %s", ht_crc32c_hw() ? "the SSE4.2 crc32 instruction" : "tables");
    const char *p = tpath("ok.safetensors");
    tap_ok(write_file(p, 7) == HT_OK, "a small file written (%s)", ht_errmsg());
    check_python(p);
    check_damage(p);
    check_splice();
    check_foreign();
    tfile_done();
    return tap_done();
}
