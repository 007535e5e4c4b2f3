/*
 * Writing JSON text straight into a buffer, for the replies that are large and
 * frequent (the experiment listing): building a jansson tree of a hundred rows
 * and dumping it was half of an uncached listing's CPU. Compact output, the
 * same text jansson writes (JSON_COMPACT), for values the caller knows.
 */
#ifndef ISC_API_JSON_OUT_H
#define ISC_API_JSON_OUT_H

#include "common/buf.h"

#include <stdint.h>

/*
 * A string value, quoted and escaped (RFC 8259): '"', '\\' and control
 * characters escaped as jansson does; bytes that are not UTF-8 become U+FFFD,
 * so the reply is always valid JSON. NULL is written as "". Returns 0 or
 * ISC_ENOMEM.
 */
int isc_json_out_string(struct isc_buf *b, const char *s);
/* "key": with the comma before it unless *first (then clears *first). */
int isc_json_out_key(struct isc_buf *b, const char *key, int *first);
/* "key":"value" and "key":N, with the comma as isc_json_out_key. */
int isc_json_out_str_member(struct isc_buf *b, const char *key, const char *value, int *first);
int isc_json_out_int_member(struct isc_buf *b, const char *key, int64_t value, int *first);

#endif
