/*
 * The CRCs S3 offers as additional checksums: CRC32 (the zlib/Ethernet
 * polynomial, reflected 0xEDB88320) and CRC32C (Castagnoli, reflected
 * 0x82F63B78), both with the usual ~0 initial value and final xor. Slicing by
 * 8 in software: about 1-2 GB/s, well above what a download delivers.
 */
#ifndef ISC_DATASETS_CHECKSUM_H
#define ISC_DATASETS_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

enum isc_crc_kind {
	ISC_CRC32 = 0,
	ISC_CRC32C = 1,
};

/* crc of the bytes so far (start with 0), updated with n more: like zlib's crc32(). */
uint32_t isc_crc_update(enum isc_crc_kind kind, uint32_t crc, const void *data, size_t n);

#endif
