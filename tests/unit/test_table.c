/*
 * isc's table renderer (cli/lib/table.h): every column is as wide as its widest
 * cell, so a 200-character output path widens only its own column and the
 * columns after it stay aligned with each other; money always has two
 * decimals, rounded half away from zero in integers; --json arrays print "[]".
 */
#include "cli/lib/table.h"
#include "credits/money.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Renders t into a NUL-terminated string (caller frees). */
static char *render(const struct isc_table *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	isc_table_print(t, f);
	fclose(f);
	return buf;
}

/* The byte column at which the n-th (0-based) occurrence of needle starts on line `line`.
 * Not inlined: gcc 12 at -O2 then takes open_memstream's buffer for a dangling one. */
__attribute__((noinline)) static long column_of(const char *text, int line, const char *needle)
{
	const char *p = text, *end, *hit;
	for (int i = 0; i < line; i++) {
		p = strchr(p, '\n');
		assert_non_null(p);
		p++;
	}
	end = strchr(p, '\n');
	hit = strstr(p, needle);
	assert_non_null(hit);
	assert_true(hit < end);
	return hit - p;
}

static void test_columns_sized_to_content(void **state)
{
	static const char *const headers[] = {"ID", "Output Path", "Status", "Cost"};
	char long_path[201];
	struct isc_table *t = isc_table_new(4, headers);
	char *out;
	(void)state;

	memset(long_path, 'p', 200);
	long_path[200] = 0;
	isc_table_align_right(t, 3);
	assert_int_equal(
	    isc_table_add(t, (const char *const[]){"exp_1", "/short", "running", "$1.00"}), 0);
	assert_int_equal(
	    isc_table_add(t, (const char *const[]){"exp_2", long_path, "completed", "$123.45"}), 0);
	assert_int_equal(isc_table_add(t, (const char *const[]){"exp_3", NULL, "failed", "$0.10"}),
	                 0);
	out = render(t);
	/* Status starts at the same column on every line, two spaces after the widest path. */
	assert_int_equal(column_of(out, 0, "Status"), column_of(out, 1, "running"));
	assert_int_equal(column_of(out, 1, "running"), column_of(out, 2, "completed"));
	assert_int_equal(column_of(out, 2, "completed"), column_of(out, 3, "failed"));
	assert_int_equal(column_of(out, 1, "running"), 5 + 2 + 200 + 2);
	/* Money is right-aligned: every amount ends at the end of its line. */
	assert_non_null(strstr(out, "  $1.00\n"));
	assert_non_null(strstr(out, "$123.45\n"));
	assert_int_equal(column_of(out, 1, "$1.00") + 5, column_of(out, 2, "$123.45") + 7);
	/* A missing cell prints as "-"; the last column is not padded. */
	assert_non_null(strstr(out, "exp_3  - "));
	assert_null(strstr(out, " \n"));
	free(out);
	isc_table_free(t);
}

/* Money as people read it: exact, at least two decimals, never rounded (issue 34). */
static void test_money_exact(void **state)
{
	char b[ISC_MONEY_TEXT_MAX];
	(void)state;
	assert_string_equal(isc_money_dollars(0, b, sizeof(b)), "$0.00");
	assert_string_equal(isc_money_dollars(1, b, sizeof(b)), "$0.000001");
	assert_string_equal(isc_money_dollars(5000, b, sizeof(b)), "$0.005");
	assert_string_equal(isc_money_dollars(12340000, b, sizeof(b)), "$12.34");
	assert_string_equal(isc_money_dollars(1500000000, b, sizeof(b)), "$1500.00");
	assert_string_equal(isc_money_dollars(1499965784, b, sizeof(b)), "$1499.965784");
	assert_string_equal(isc_money_dollars(-250000, b, sizeof(b)), "-$0.25");
	assert_string_equal(isc_money_dollars(-1, b, sizeof(b)), "-$0.000001");
	assert_string_equal(isc_money_dollars(INT64_MIN, b, sizeof(b)), "-$9223372036854.775808");
	assert_string_equal(isc_money_dollars(INT64_MAX, b, sizeof(b)), "$9223372036854.775807");
	assert_string_equal(isc_money_decimal(1499965784, b, sizeof(b)), "1499.965784");
	assert_string_equal(isc_money_decimal(500000, b, sizeof(b)), "0.500000");
	assert_string_equal(isc_money_decimal(-5000000, b, sizeof(b)), "-5.000000");
}

/* A reply's NAME_micros as the CLI prints it: exact dollars; missing reads as $0.00. */
static void test_json_dollars(void **state)
{
	char b[ISC_MONEY_TEXT_MAX];
	json_t *o = json_pack("{s:I,s:I}", "spent_micros", (json_int_t)1499965784, "held_micros",
	                      (json_int_t)-250000);
	(void)state;
	assert_string_equal(isc_json_dollars(o, "spent_micros", b, sizeof(b)), "$1499.965784");
	assert_string_equal(isc_json_dollars(o, "held_micros", b, sizeof(b)), "-$0.25");
	assert_string_equal(isc_json_dollars(o, "absent_micros", b, sizeof(b)), "$0.00");
	json_decref(o);
}

/* Cells pad by display width: wide characters take two columns, combining marks none. */
static void test_display_width(void **state)
{
	static const char *const headers[] = {"NAME", "N"};
	const char *r1[] = {"日本語", "1"}, *r2[] = {"abcdef", "2"},
	           *r3[] = {"e\xcc\x81t\xc3\xa9", "3"};
	struct isc_table *t = isc_table_new(2, headers);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	(void)state;
	assert_int_equal(isc_text_width("日本語"), 6);
	assert_int_equal(isc_text_width("e\xcc\x81t\xc3\xa9"), 3);
	assert_int_equal(isc_text_width("\xff\xfe"), 2);
	assert_int_equal(isc_table_add(t, r1), 0);
	assert_int_equal(isc_table_add(t, r2), 0);
	assert_int_equal(isc_table_add(t, r3), 0);
	isc_table_print(t, f);
	fclose(f);
	assert_string_equal(buf, "NAME    N\n日本語  1\nabcdef  2\ne\xcc\x81t\xc3\xa9     3\n");
	free(buf);
	isc_table_free(t);
}

/* --json money: every NAME_micros gets NAME as a 6-place decimal string. */
static void test_json_money(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_t *o =
	    json_pack("{s:I,s:s,s:I,s:[{s:I}],s:n}", "balance_micros", (json_int_t)1499965784,
	              "cost", "1499.97", "cost_micros", (json_int_t)1499965784, "rows",
	              "amount_micros", (json_int_t)1, "budget_micros");
	(void)state;
	isc_json_print(o, f);
	fclose(f);
	assert_non_null(strstr(buf, "\"balance\": \"1499.965784\""));
	assert_non_null(strstr(buf, "\"amount\": \"0.000001\""));
	assert_null(strstr(buf, "1499.97\""));
	assert_null(strstr(buf, "\"budget\""));
	free(buf);
	json_decref(o);
}

static void test_json_print(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_t *empty = json_array(), *one = json_pack("[{s:i}]", "a", 1);
	(void)state;
	isc_json_print(empty, f);
	isc_json_print(one, f);
	fclose(f);
	assert_string_equal(buf, "[]\n[\n  {\n    \"a\": 1\n  }\n]\n");
	free(buf);
	json_decref(empty);
	json_decref(one);
}

static void price_row(json_t *r, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	cells[0] = isc_json_str(r, "name");
	cells[1] = isc_money_dollars(json_integer_value(json_object_get(r, "micros")), buf[1],
	                             ISC_TABLE_CELL);
	cells[2] = isc_json_when(json_object_get(r, "at_ms"), buf[2], ISC_TABLE_CELL);
}

/* A JSON listing as a table: one row per element, formatted cells, right alignment. */
static void test_rows_from_json(void **state)
{
	static const char *const headers[] = {"NAME", "PRICE", "WHEN (UTC)"};
	static const struct isc_table_spec spec = {3, headers, "lr", price_row, "no rows"};
	json_t *rows = json_loads("[{\"name\":\"a\",\"micros\":1500000,\"at_ms\":0},"
	                          "{\"name\":\"longer\",\"micros\":123456789}]",
	                          0, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	(void)state;
	assert_non_null(rows);
	assert_non_null(f);
	assert_int_equal(isc_table_print_rows(&spec, rows, f), 0);
	fclose(f);
	assert_string_equal(buf, "NAME          PRICE  WHEN (UTC)\n"
	                         "a             $1.50  1970-01-01 00:00:00\n"
	                         "longer  $123.456789  -\n");
	free(buf);
	json_decref(rows);
	/* A missing key reads as "", a missing time as "-". */
	assert_string_equal(isc_json_str(NULL, "x"), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_columns_sized_to_content),
	    cmocka_unit_test(test_money_exact),
	    cmocka_unit_test(test_json_dollars),
	    cmocka_unit_test(test_display_width),
	    cmocka_unit_test(test_json_money),
	    cmocka_unit_test(test_json_print),
	    cmocka_unit_test(test_rows_from_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
