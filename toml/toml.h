/*
 * A TOML 1.0.0 parser: text in, an immutable tree of values out.
 *
 * It exists because launch files (.isc) are TOML and Debian packages no C TOML
 * library. It is exact rather than forgiving: it passes every TOML 1.0 case of
 * toml-test (tests/toml-test/run). Every node remembers where it (and its key)
 * starts so that callers can point users at FILE:LINE:COL. Lines and columns are
 * 1-based; a column counts characters (UTF-8 code points), a tab counts as one.
 *
 * Untrusted input is bounded: at most ISC_TOML_MAX_INPUT bytes, and containers
 * (tables and arrays, by any route: headers, dotted keys, inline values) nest at
 * most ISC_TOML_MAX_DEPTH deep, so neither parsing nor freeing can blow the stack.
 *
 * Ownership: isc_toml_parse hands a document to the caller (isc_toml_doc_free).
 * Every value pointer and string returned by an accessor is borrowed from the
 * document and lives until it is freed.
 */
#ifndef ISC_TOML_TOML_H
#define ISC_TOML_TOML_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_TOML_MAX_INPUT ((size_t)16 * 1024 * 1024)
#define ISC_TOML_MAX_DEPTH 128

enum isc_toml_type {
	ISC_TOML_STRING,
	ISC_TOML_INTEGER,
	ISC_TOML_FLOAT,
	ISC_TOML_BOOL,
	ISC_TOML_DATETIME,       /* offset date-time: 1979-05-27T07:32:00Z */
	ISC_TOML_DATETIME_LOCAL, /* 1979-05-27T07:32:00 */
	ISC_TOML_DATE_LOCAL,     /* 1979-05-27 */
	ISC_TOML_TIME_LOCAL,     /* 07:32:00 */
	ISC_TOML_ARRAY,
	ISC_TOML_TABLE,
};

/* The parts of any of the four date/time kinds; parts a kind lacks are 0. */
struct isc_toml_datetime {
	int year, month, day;
	int hour, minute, second;
	int nanosecond;     /* fraction of the second, truncated to nanoseconds */
	int frac_digits;    /* digits written in the source (0 = no fraction), at most 9 */
	int offset_minutes; /* offset date-time only: east of UTC */
	int offset_z;       /* offset date-time only: written as Z rather than +00:00 */
};

/* Where a parse failed (1-based) and the message without the position prefix. */
struct isc_toml_error {
	int line;
	int col;
	char msg[ISC_ERR_MSG_MAX];
};

struct isc_toml_doc;
struct isc_toml_value;

/*
 * Parses len bytes of text (need not be NUL-terminated; may contain a UTF-8 BOM).
 * Returns 0 and *out, or ISC_EINVALID (bad TOML, too large, too deep) with
 * err->msg "LINE:COL: message", or ISC_ENOMEM.
 */
int isc_toml_parse(const char *text, size_t len, struct isc_toml_doc **out, struct isc_err *err);
/* The same, and on failure fills *where (may be NULL) with the position and bare message. */
int isc_toml_parse_ex(const char *text, size_t len, struct isc_toml_doc **out,
                      struct isc_toml_error *where, struct isc_err *err);
void isc_toml_doc_free(struct isc_toml_doc *doc);

/* The root table (never NULL for a parsed document). */
const struct isc_toml_value *isc_toml_doc_root(const struct isc_toml_doc *doc);

enum isc_toml_type isc_toml_type(const struct isc_toml_value *v);
/* "string", "integer", "float", "bool", "datetime", "datetime-local", "date-local",
 * "time-local", "array", "table" (the toml-test names). */
const char *isc_toml_type_name(enum isc_toml_type t);
/* Where the value starts; for a table made by a [header], where the header starts;
 * for a table made implicitly by a dotted key or a header path, where that key part is. */
int isc_toml_line(const struct isc_toml_value *v);
int isc_toml_col(const struct isc_toml_value *v);
/* Where the key that names the value starts (for `a.b = 1`, value 1's key is `b`);
 * 0 for array elements and the root. */
int isc_toml_key_line(const struct isc_toml_value *v);
int isc_toml_key_col(const struct isc_toml_value *v);

/* Tables keep their keys in document order. */
size_t isc_toml_table_len(const struct isc_toml_value *t);
/* The i-th entry, or NULL. Fills *key (NUL-terminated; it may also hold NULs, so see
 * *key_len) and *key_len unless those pointers are NULL. */
const struct isc_toml_value *isc_toml_table_at(const struct isc_toml_value *t, size_t i,
                                               const char **key, size_t *key_len);
/* NULL when t is not a table or has no such key. */
const struct isc_toml_value *isc_toml_table_get(const struct isc_toml_value *t, const char *key);
const struct isc_toml_value *isc_toml_table_getn(const struct isc_toml_value *t, const char *key,
                                                 size_t key_len);

size_t isc_toml_array_len(const struct isc_toml_value *a);
const struct isc_toml_value *isc_toml_array_at(const struct isc_toml_value *a, size_t i);

/* Getters return 0, or ISC_EINVALID when v is not of that type (out untouched). */
/* The string is NUL-terminated; len counts bytes (a \u0000 escape may put NULs inside). */
int isc_toml_get_string(const struct isc_toml_value *v, const char **s, size_t *len);
int isc_toml_get_int(const struct isc_toml_value *v, int64_t *out);
int isc_toml_get_double(const struct isc_toml_value *v, double *out);
int isc_toml_get_bool(const struct isc_toml_value *v, int *out);
/* Any of the four date/time kinds. */
int isc_toml_get_datetime(const struct isc_toml_value *v, struct isc_toml_datetime *out);

/* Writes a date/time value as RFC 3339 (the local kinds without the missing parts) into
 * buf; returns the length, or ISC_EINVALID when v is not a date/time or buf is too small
 * (40 bytes is always enough). */
int isc_toml_format_datetime(const struct isc_toml_value *v, char *buf, size_t cap);

#endif
