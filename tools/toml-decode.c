/*
 * The toml-test decoder: TOML on stdin, toml-test's tagged JSON on stdout.
 *
 * Exit 0 with the JSON for valid TOML; for invalid TOML a "LINE:COL: message" on
 * stderr and exit 1. tests/toml-test/run drives it over the vendored cases.
 */
#include "common/buf.h"
#include "common/err.h"
#include "toml/toml.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static json_t *tagged(const char *type, const char *value)
{
	return json_pack("{s:s, s:s}", "type", type, "value", value);
}

static json_t *to_json(const struct isc_toml_value *v)
{
	char buf[64];
	enum isc_toml_type t = isc_toml_type(v);
	json_t *j;

	switch (t) {
	case ISC_TOML_STRING: {
		const char *s;
		size_t len;
		isc_toml_get_string(v, &s, &len);
		return json_pack("{s:s, s:s%}", "type", "string", "value", s, len);
	}
	case ISC_TOML_INTEGER: {
		int64_t i;
		isc_toml_get_int(v, &i);
		snprintf(buf, sizeof(buf), "%lld", (long long)i);
		return tagged("integer", buf);
	}
	case ISC_TOML_FLOAT: {
		double d;
		isc_toml_get_double(v, &d);
		if (isnan(d))
			snprintf(buf, sizeof(buf), "nan");
		else if (isinf(d))
			snprintf(buf, sizeof(buf), "%sinf", d < 0 ? "-" : "");
		else
			snprintf(buf, sizeof(buf), "%.17g", d);
		return tagged("float", buf);
	}
	case ISC_TOML_BOOL: {
		int b;
		isc_toml_get_bool(v, &b);
		return tagged("bool", b ? "true" : "false");
	}
	case ISC_TOML_DATETIME:
	case ISC_TOML_DATETIME_LOCAL:
	case ISC_TOML_DATE_LOCAL:
	case ISC_TOML_TIME_LOCAL:
		if (isc_toml_format_datetime(v, buf, sizeof(buf)) < 0)
			return NULL;
		return tagged(isc_toml_type_name(t), buf);
	case ISC_TOML_ARRAY:
		j = json_array();
		for (size_t i = 0; j && i < isc_toml_array_len(v); i++) {
			if (json_array_append_new(j, to_json(isc_toml_array_at(v, i)))) {
				json_decref(j);
				return NULL;
			}
		}
		return j;
	case ISC_TOML_TABLE:
		j = json_object();
		for (size_t i = 0; j && i < isc_toml_table_len(v); i++) {
			const char *key;
			size_t klen;
			const struct isc_toml_value *c = isc_toml_table_at(v, i, &key, &klen);
			if (json_object_setn_new(j, key, klen, to_json(c))) {
				json_decref(j);
				return NULL;
			}
		}
		return j;
	}
	return NULL;
}

int main(void)
{
	struct isc_buf in;
	struct isc_toml_doc *doc = NULL;
	struct isc_err err;
	char chunk[65536];
	size_t n;
	json_t *j;
	int rc = 1;

	isc_buf_init(&in, ISC_TOML_MAX_INPUT + 1);
	while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0) {
		if (isc_buf_append(&in, chunk, n)) {
			fprintf(stderr, "toml-decode: input larger than %zu bytes\n",
			        (size_t)ISC_TOML_MAX_INPUT);
			goto out;
		}
	}
	if (ferror(stdin)) {
		fprintf(stderr, "toml-decode: reading stdin failed\n");
		goto out;
	}
	if (isc_toml_parse(isc_buf_cstr(&in), in.len, &doc, &err)) {
		fprintf(stderr, "toml-decode: %s\n", err.msg);
		goto out;
	}
	j = to_json(isc_toml_doc_root(doc));
	if (!j) {
		fprintf(stderr, "toml-decode: out of memory\n");
		goto out;
	}
	if (json_dumpf(j, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII) == 0 && putchar('\n') != EOF)
		rc = 0;
	json_decref(j);
out:
	isc_toml_doc_free(doc);
	isc_buf_cleanup(&in);
	return rc;
}
