/*
 * Writing JSON text straight into a buffer, for the replies that are large and
 * frequent (the experiment listing): building a jansson tree of a hundred rows
 * and dumping it was half of an uncached listing's CPU. Compact output, the
 * same text jansson writes (JSON_COMPACT), for values the caller knows.
 */
#ifndef ISC_API_JSON_OUT_H
#define ISC_API_JSON_OUT_H

#include "common/buf.h"

#include <jansson.h>
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
/* "key":true|false, "key":null. */
int isc_json_out_bool_member(struct isc_buf *b, const char *key, int value, int *first);
int isc_json_out_null_member(struct isc_buf *b, const char *key, int *first);
/*
 * "key":N.N as jansson writes a real (17 significant digits, always a '.' or an
 * exponent, the exponent without '+' or leading zeros); null when value is not
 * finite (jansson has no such value).
 */
int isc_json_out_real_member(struct isc_buf *b, const char *key, double value, int *first);

/*
 * Money in every reply has one form (docs/api.md, "Money"): NAME_micros, the
 * integer amount, and beside it NAME, the decimal string with exactly 6 places of
 * isc_money_decimal ("1499.965784", "0.500000"), so a client never divides or
 * rounds. isc_json_money sets both members on the jansson object o;
 * isc_json_money_or_null sets both to null when there is no amount (a project
 * without a budget). Return o.
 */
json_t *isc_json_money(json_t *o, const char *name, int64_t micros);
json_t *isc_json_money_or_null(json_t *o, const char *name, int has, int64_t micros);
/* The same two members written into b: "NAME_micros":N,"NAME":"D.DDDDDD", or both null. */
int isc_json_out_money_member(struct isc_buf *b, const char *name, int has, int64_t micros,
                              int *first);

#endif
