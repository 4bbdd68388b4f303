/* CRC32C by slice-by-8 tables, and by the SSE4.2 crc32 instruction where the CPU has it (about
 * 3x faster: a checkpoint's checksums must not show in its save time). */
#include "core/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u /* Castagnoli, bit-reflected */

static uint32_t g_tab[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* g_tab[0]: the CRC of one byte; g_tab[t]: of that byte followed by t zero bytes. */
static void init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        g_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_tab[t][i] = (g_tab[t - 1][i] >> 8) ^ g_tab[0][g_tab[t - 1][i] & 0xFF];
}

uint32_t ht_crc32c_sw(uint32_t crc, const void *p, size_t n) {
    pthread_once(&g_once, init_tables);
    const unsigned char *b = p;
    uint32_t c = ~crc;
    for (; n && ((uintptr_t)b & 7); n--)
        c = (c >> 8) ^ g_tab[0][(c ^ *b++) & 0xFF];
    for (; n >= 8; n -= 8, b += 8) {
        uint32_t lo, hi; /* little-endian words: the safetensors code requires that host */
        memcpy(&lo, b, 4);
        memcpy(&hi, b + 4, 4);
        lo ^= c;
        c = g_tab[7][lo & 0xFF] ^ g_tab[6][(lo >> 8) & 0xFF] ^ g_tab[5][(lo >> 16) & 0xFF] ^
            g_tab[4][lo >> 24] ^ g_tab[3][hi & 0xFF] ^ g_tab[2][(hi >> 8) & 0xFF] ^
            g_tab[1][(hi >> 16) & 0xFF] ^ g_tab[0][hi >> 24];
    }
    for (; n; n--)
        c = (c >> 8) ^ g_tab[0][(c ^ *b++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t c = ~crc;
    for (; n && ((uintptr_t)b & 7); n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *b++);
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    for (; n; n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *b++);
    return ~(uint32_t)c;
}
#else
#define HAVE_HW 0
#endif

int ht_crc32c_hw(void) {
#if HAVE_HW
    static int hw = -1;
    if (hw < 0) hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return hw;
#else
    return 0;
#endif
}

uint32_t ht_crc32c(uint32_t crc, const void *p, size_t n) {
#if HAVE_HW
    if (ht_crc32c_hw()) return crc_hw(crc, p, n);
#endif
    return ht_crc32c_sw(crc, p, n);
}
