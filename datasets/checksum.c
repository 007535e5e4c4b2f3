/*
 * CRC32 and CRC32C (checksum.h), slicing by 8: eight 256-entry tables per
 * polynomial, built once, so each 8 bytes cost eight lookups instead of 64
 * shifts.
 */
#include "datasets/checksum.h"

#include <pthread.h>
#include <string.h>

static uint32_t tables[2][8][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_build(void)
{
	static const uint32_t poly[2] = {0xEDB88320u, 0x82F63B78u};
	for (int k = 0; k < 2; k++) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int j = 0; j < 8; j++)
				c = c & 1 ? (c >> 1) ^ poly[k] : c >> 1;
			tables[k][0][i] = c;
		}
		for (uint32_t i = 0; i < 256; i++)
			for (int t = 1; t < 8; t++)
				tables[k][t][i] = (tables[k][t - 1][i] >> 8) ^
				                  tables[k][0][tables[k][t - 1][i] & 0xff];
	}
}

uint32_t isc_crc_update(enum isc_crc_kind kind, uint32_t crc, const void *data, size_t n)
{
	const unsigned char *p = data;
	const uint32_t(*t)[256];

	pthread_once(&tables_once, tables_build);
	t = tables[kind == ISC_CRC32C ? 1 : 0];
	crc = ~crc;
	while (n >= 8) {
		uint32_t lo, hi;
		/* Little-endian loads, byte by byte: no alignment or endianness assumption. */
		lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
		hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
		     (uint32_t)p[7] << 24;
		lo ^= crc;
		crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
		      t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
		      t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
	return ~crc;
}
