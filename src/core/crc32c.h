/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TensorFlow's checkpoints
 * and iSCSI use: CRC32C("123456789") = 0xE3069283. The checkpoint writer stores one per tensor
 * and one of the header, and every load verifies them (io/safetensors.h). */
#ifndef HT_CORE_CRC32C_H
#define HT_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC of p[0..n) continued from crc (0 to start): ht_crc32c(ht_crc32c(0, a, n), b, m) is
 * the CRC of a followed by b. Uses the CPU's crc32 instruction where there is one (x86 SSE4.2),
 * else ht_crc32c_sw. */
uint32_t ht_crc32c(uint32_t crc, const void *p, size_t n);
/* The same by tables, slicing 8 bytes at a time (any CPU; also the tests' second path). */
uint32_t ht_crc32c_sw(uint32_t crc, const void *p, size_t n);
/* 1 when ht_crc32c uses the CPU instruction. */
int ht_crc32c_hw(void);

#endif
