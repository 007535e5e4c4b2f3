/*
 * libFuzzer target for the TOML parser: any bytes must either parse or fail with
 * a positioned message, never crash, leak or run away. A parsed document is walked
 * completely so every accessor and the date formatter see fuzzed trees too.
 */
#include "toml/toml.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void walk(const struct isc_toml_value *v, int depth)
{
	char buf[64];
	const char *s;
	size_t len;
	int64_t i;
	double d;
	int b;

	if (depth > ISC_TOML_MAX_DEPTH + 1)
		__builtin_trap(); /* the depth bound did not hold */
	if (isc_toml_line(v) < 1 || isc_toml_col(v) < 1)
		__builtin_trap();
	switch (isc_toml_type(v)) {
	case ISC_TOML_TABLE:
		for (size_t k = 0; k < isc_toml_table_len(v); k++) {
			const struct isc_toml_value *c = isc_toml_table_at(v, k, &s, &len);
			if (isc_toml_table_getn(v, s, len) != c)
				__builtin_trap(); /* lookup must find what iteration finds */
			walk(c, depth + 1);
		}
		break;
	case ISC_TOML_ARRAY:
		for (size_t k = 0; k < isc_toml_array_len(v); k++)
			walk(isc_toml_array_at(v, k), depth + 1);
		break;
	case ISC_TOML_STRING:
		isc_toml_get_string(v, &s, &len);
		if (s[len] != '\0')
			__builtin_trap();
		break;
	case ISC_TOML_INTEGER:
		isc_toml_get_int(v, &i);
		break;
	case ISC_TOML_FLOAT:
		isc_toml_get_double(v, &d);
		break;
	case ISC_TOML_BOOL:
		isc_toml_get_bool(v, &b);
		break;
	default:
		if (isc_toml_format_datetime(v, buf, sizeof(buf)) < 0)
			__builtin_trap();
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct isc_toml_doc *doc = NULL;
	struct isc_toml_error where;
	struct isc_err err;

	if (isc_toml_parse_ex((const char *)data, size, &doc, &where, &err) == 0) {
		walk(isc_toml_doc_root(doc), 0);
		isc_toml_doc_free(doc);
	} else if (where.line < 1 || where.col < 1 || strchr(err.msg, ':') == NULL) {
		__builtin_trap(); /* every error carries a position */
	}
	return 0;
}
