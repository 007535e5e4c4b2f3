/*
 * TOML parser units: where errors and values are reported (line and column), the
 * table-definition rules that toml-test checks only by accept/reject, and the
 * bounds on untrusted input. toml-test itself runs from tests/toml-test/run.
 */
#include "toml/toml.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct isc_toml_doc *parse_ok(const char *text)
{
	struct isc_toml_doc *doc = NULL;
	struct isc_err err;

	if (isc_toml_parse(text, strlen(text), &doc, &err) != 0)
		fail_msg("unexpected parse error: %s\n--\n%s", err.msg, text);
	return doc;
}

/* Parses text that must fail; checks position and that the message contains want. */
static void parse_bad(const char *text, int line, int col, const char *want)
{
	struct isc_toml_doc *doc = NULL;
	struct isc_toml_error where;
	struct isc_err err;
	char prefix[32];

	assert_int_equal(isc_toml_parse_ex(text, strlen(text), &doc, &where, &err), ISC_EINVALID);
	assert_null(doc);
	if (where.line != line || where.col != col || !strstr(where.msg, want))
		fail_msg("for %s: got %d:%d %s, want %d:%d ...%s...", text, where.line, where.col,
		         where.msg, line, col, want);
	snprintf(prefix, sizeof(prefix), "%d:%d: ", line, col);
	assert_int_equal(strncmp(err.msg, prefix, strlen(prefix)), 0);
	assert_int_equal(err.code, ISC_EINVALID);
}

static void test_error_positions(void **state)
{
	(void)state;
	parse_bad("a = 1\nb = @\n", 2, 5, "expected a value");
	parse_bad("a = 1\na = 2\n", 2, 1, "duplicate key `a`");
	parse_bad("x = \"é\" y\n", 1, 9, "expected newline");
	parse_bad("s = \"abc\n", 1, 5, "unterminated string");
	parse_bad("[a]\n[a]\n", 2, 2, "already defined");
	parse_bad("n = 0x\n", 1, 5, "expected digits");
	parse_bad("n = 9223372036854775808\n", 1, 5, "out of range");
	parse_bad("d = 2023-02-29\n", 1, 5, "out of range");
	parse_bad("t = 24:00:00\n", 1, 5, "out of range");
	parse_bad("s = \"\\uD800\"\n", 1, 6, "not a Unicode scalar value");
	parse_bad("s = \"\\U00110000\"\n", 1, 6, "not a Unicode scalar value");
	parse_bad("ok = 1\n\xC3\x28 = 2\n", 2, 1, "UTF-8");
	parse_bad("a = 1 # bell \x07\n", 1, 14, "control character U+0007 in comment");
	parse_bad("a = 1\rb = 2\n", 1, 6, "carriage return");
	parse_bad("t = {a = 1,}\n", 1, 12, "trailing comma");
	parse_bad("t = {a = 1,\n b = 2}\n", 1, 12, "expected a key");
	parse_bad("\xEF\xBB\xBF"
	          "a = !\n",
	          1, 5, "expected a value");
}

static void test_value_positions(void **state)
{
	struct isc_toml_doc *doc =
	    parse_ok("# header\n[tab]\n  x.y = \"s\"\n  arr = [\n    1,\n    {z = true},\n  ]\n");
	const struct isc_toml_value *root = isc_toml_doc_root(doc), *t, *x, *y, *arr, *e;
	(void)state;

	t = isc_toml_table_get(root, "tab");
	assert_non_null(t);
	assert_int_equal(isc_toml_line(t), 2);
	assert_int_equal(isc_toml_col(t), 1);
	assert_int_equal(isc_toml_key_line(t), 2);
	assert_int_equal(isc_toml_key_col(t), 2);
	x = isc_toml_table_get(t, "x");
	assert_int_equal(isc_toml_key_line(x), 3);
	assert_int_equal(isc_toml_key_col(x), 3);
	y = isc_toml_table_get(x, "y");
	assert_int_equal(isc_toml_key_col(y), 5);
	assert_int_equal(isc_toml_line(y), 3);
	assert_int_equal(isc_toml_col(y), 9);
	arr = isc_toml_table_get(t, "arr");
	assert_int_equal(isc_toml_line(arr), 4);
	assert_int_equal(isc_toml_col(arr), 9);
	assert_int_equal(isc_toml_array_len(arr), 2);
	e = isc_toml_array_at(arr, 1);
	assert_int_equal(isc_toml_type(e), ISC_TOML_TABLE);
	assert_int_equal(isc_toml_line(e), 6);
	assert_int_equal(isc_toml_col(e), 5);
	assert_int_equal(isc_toml_key_line(e), 0);
	isc_toml_doc_free(doc);
}

static void test_table_rules(void **state)
{
	struct isc_toml_doc *doc;
	(void)state;

	/* A table made implicitly by a deeper header may be defined later, once. */
	doc = parse_ok("[a.b]\nx = 1\n[a]\ny = 2\n");
	isc_toml_doc_free(doc);
	parse_bad("[a.b]\n[a]\n[a]\n", 3, 2, "already defined");
	/* Dotted keys define tables: no header may define them again ... */
	parse_bad("[fruit]\napple.color = \"red\"\n[fruit.apple]\n", 3, 8, "already defined");
	/* ... but a header may add a sub-table below them. */
	doc = parse_ok("[fruit]\napple.color = \"red\"\n[fruit.apple.texture]\nsmooth = true\n");
	isc_toml_doc_free(doc);
	/* Dotted keys may not reach into a table a header made. */
	parse_bad("[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", 4, 1, "already defined");
	/* Inline tables and static arrays are closed. */
	parse_bad("a = {x = 1}\n[a.y]\n", 2, 2, "inline table");
	parse_bad("a = {x = 1}\na.y = 2\n", 2, 1, "already defined");
	parse_bad("a = []\n[[a]]\n", 2, 3, "cannot be an array of tables");
	parse_bad("t = {a = {}, a.b = 1}\n", 1, 14, "already defined");
	/* Arrays of tables: headers go into the last element. */
	doc = parse_ok("[[p]]\nn = 1\n[[p]]\nn = 2\n[p.q]\nm = 3\n");
	{
		const struct isc_toml_value *p = isc_toml_table_get(isc_toml_doc_root(doc), "p");
		int64_t n;
		assert_int_equal(isc_toml_array_len(p), 2);
		assert_int_equal(
		    isc_toml_get_int(isc_toml_table_get(isc_toml_array_at(p, 1), "n"), &n), 0);
		assert_int_equal(n, 2);
		assert_non_null(isc_toml_table_get(isc_toml_array_at(p, 1), "q"));
		assert_null(isc_toml_table_get(isc_toml_array_at(p, 0), "q"));
	}
	isc_toml_doc_free(doc);
}

static void test_scalars(void **state)
{
	struct isc_toml_doc *doc = parse_ok(
	    "i1 = -9223372036854775808\ni2 = 0x7FFF_FFFF_FFFF_FFFF\ni3 = 0o755\ni4 = 0b1010\n"
	    "f1 = 6.626e-34\nf2 = -inf\nf3 = nan\nf4 = 1_000.5\nb = false\n"
	    "s1 = \"a\\u0000b\"\ns2 = '''\nraw \\n'''\ns3 = \"\"\"\r\nx\\\r\n   y\"\"\"\"\"\n"
	    "d1 = 2024-02-29\nd2 = 1979-05-27 07:32:00.999999999-07:30\nd3 = 07:32:00.5\n");
	const struct isc_toml_value *r = isc_toml_doc_root(doc);
	struct isc_toml_datetime dt;
	char buf[64];
	const char *s;
	size_t len;
	int64_t i;
	double f;
	int b;
	(void)state;

	assert_int_equal(isc_toml_get_int(isc_toml_table_get(r, "i1"), &i), 0);
	assert_true(i == INT64_MIN);
	isc_toml_get_int(isc_toml_table_get(r, "i2"), &i);
	assert_true(i == INT64_MAX);
	isc_toml_get_int(isc_toml_table_get(r, "i3"), &i);
	assert_int_equal(i, 0755);
	isc_toml_get_int(isc_toml_table_get(r, "i4"), &i);
	assert_int_equal(i, 10);
	isc_toml_get_double(isc_toml_table_get(r, "f1"), &f);
	assert_true(f == 6.626e-34);
	isc_toml_get_double(isc_toml_table_get(r, "f2"), &f);
	assert_true(isinf(f) && f < 0);
	isc_toml_get_double(isc_toml_table_get(r, "f3"), &f);
	assert_true(isnan(f));
	isc_toml_get_double(isc_toml_table_get(r, "f4"), &f);
	assert_true(f == 1000.5);
	assert_int_equal(isc_toml_get_bool(isc_toml_table_get(r, "b"), &b), 0);
	assert_int_equal(b, 0);
	assert_int_equal(isc_toml_get_int(isc_toml_table_get(r, "b"), &i), ISC_EINVALID);
	isc_toml_get_string(isc_toml_table_get(r, "s1"), &s, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(s, "a\0b", 3);
	isc_toml_get_string(isc_toml_table_get(r, "s2"), &s, &len);
	assert_string_equal(s, "raw \\n");
	/* CRLF normalized, line-ending backslash trims, two quotes before the end kept. */
	isc_toml_get_string(isc_toml_table_get(r, "s3"), &s, &len);
	assert_string_equal(s, "xy\"\"");
	assert_int_equal(isc_toml_type(isc_toml_table_get(r, "d1")), ISC_TOML_DATE_LOCAL);
	assert_int_equal(isc_toml_get_datetime(isc_toml_table_get(r, "d2"), &dt), 0);
	assert_int_equal(dt.offset_minutes, -450);
	assert_int_equal(dt.nanosecond, 999999999);
	assert_int_equal(isc_toml_format_datetime(isc_toml_table_get(r, "d2"), buf, sizeof(buf)),
	                 35);
	assert_string_equal(buf, "1979-05-27T07:32:00.999999999-07:30");
	isc_toml_format_datetime(isc_toml_table_get(r, "d3"), buf, sizeof(buf));
	assert_string_equal(buf, "07:32:00.5");
	assert_string_equal(isc_toml_type_name(isc_toml_type(isc_toml_table_get(r, "d3"))),
	                    "time-local");
	isc_toml_doc_free(doc);

	parse_bad("n = 1__0\n", 1, 5, "underscores");
	parse_bad("n = 01\n", 1, 5, "leading zeros");
	parse_bad("n = +0x1\n", 1, 5, "cannot have a sign");
	parse_bad("f = 1.\n", 1, 5, "decimal point");
	parse_bad("f = 1e\n", 1, 5, "exponent");
	parse_bad("s = \"\\e\"\n", 1, 6, "invalid escape \\e");
}

static void test_key_order_and_big_tables(void **state)
{
	char *text = malloc(20000 * 16);
	size_t o = 0;
	struct isc_toml_doc *doc;
	const struct isc_toml_value *r;
	const char *key;
	(void)state;

	/* Keys in reverse alphabetical order must come back as written. */
	for (int i = 19999; i >= 0; i--)
		o += (size_t)sprintf(text + o, "k%05d = %d\n", i, i);
	doc = parse_ok(text);
	r = isc_toml_doc_root(doc);
	assert_int_equal(isc_toml_table_len(r), 20000);
	isc_toml_table_at(r, 0, &key, NULL);
	assert_string_equal(key, "k19999");
	isc_toml_table_at(r, 19999, &key, NULL);
	assert_string_equal(key, "k00000");
	for (int i = 0; i < 20000; i += 997) {
		char k[16];
		int64_t v;
		snprintf(k, sizeof(k), "k%05d", i);
		assert_int_equal(isc_toml_get_int(isc_toml_table_get(r, k), &v), 0);
		assert_int_equal(v, i);
	}
	assert_null(isc_toml_table_get(r, "nope"));
	isc_toml_doc_free(doc);
	free(text);
}

static void test_bounds(void **state)
{
	size_t n = 100000;
	char *deep = malloc(2 * n + 8);
	struct isc_toml_doc *doc = NULL;
	struct isc_toml_error where;
	struct isc_err err;
	(void)state;

	/* Deeply nested arrays are refused, not recursed into until the stack runs out. */
	memcpy(deep, "a = ", 4);
	memset(deep + 4, '[', n);
	memset(deep + 4 + n, ']', n);
	assert_int_equal(isc_toml_parse_ex(deep, 4 + 2 * n, &doc, &where, &err), ISC_EINVALID);
	assert_non_null(strstr(where.msg, "nesting deeper"));
	assert_int_equal(where.line, 1);
	/* So are deep dotted keys and headers. */
	memset(deep, 0, 2 * n + 8);
	for (size_t i = 0; i < 200; i++)
		memcpy(deep + 2 * i, "a.", 2);
	memcpy(deep + 400, "b = 1\n", 6);
	assert_int_equal(isc_toml_parse(deep, strlen(deep), &doc, &err), ISC_EINVALID);
	free(deep);
	/* And oversized input, before any work. */
	assert_int_equal(isc_toml_parse_ex("", ISC_TOML_MAX_INPUT + 1, &doc, &where, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(where.msg, "limit"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_error_positions),
	    cmocka_unit_test(test_value_positions),
	    cmocka_unit_test(test_table_rules),
	    cmocka_unit_test(test_scalars),
	    cmocka_unit_test(test_key_order_and_big_tables),
	    cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
