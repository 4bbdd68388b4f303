/* CRC32C against published check values (the CRC catalogue's "123456789", RFC 3720's iSCSI
 * vectors) and against a bit-at-a-time reference written from the polynomial, for the table
 * path and the CPU-instruction path, at every alignment and length up to 300 bytes, and
 * continued across pieces. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "tap.h"

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

int main(void) {
    check_vectors("tables", ht_crc32c_sw);
    check_random("tables", ht_crc32c_sw);
    check_vectors(ht_crc32c_hw() ? "CPU instruction" : "default (tables)", ht_crc32c);
    check_random(ht_crc32c_hw() ? "CPU instruction" : "default (tables)", ht_crc32c);
    tap_diag("ht_crc32c uses %s", ht_crc32c_hw() ? "the SSE4.2 crc32 instruction" : "tables");
    return tap_done();
}
