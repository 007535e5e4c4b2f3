/*
 * JSON text written straight into a buffer (api/json_out.h): for every valid
 * string it is the text jansson writes (the listing's bytes did not change when
 * it stopped going through jansson), and bytes that are not UTF-8 become
 * U+FFFD, so the reply always parses.
 */
#include "api/json_out.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The text jansson writes for the string s (compact, order kept). */
static char *jansson_text(const char *s)
{
	json_t *v = json_string(s);
	char *text;
	assert_non_null(v);
	text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
	json_decref(v);
	assert_non_null(text);
	return text;
}

static void test_same_text_as_jansson(void **state)
{
	static const char *const cases[] = {
	    "",
	    "plain",
	    "quote \" and backslash \\ and slash /",
	    "line\nfeed\rcarriage\ttab\bback\fform",
	    "\x01\x02\x1f control",
	    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80 (2, 3 and 4 bytes)",
	    "/home/alice/experiments/exp_0123456789abcdef",
	    "\x7f delete stays",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct isc_buf b;
		char *want = jansson_text(cases[i]);
		isc_buf_init(&b, 0);
		assert_int_equal(isc_json_out_string(&b, cases[i]), 0);
		assert_string_equal(isc_buf_cstr(&b), want);
		isc_buf_cleanup(&b);
		free(want);
	}
}

static void test_not_utf8_becomes_replacement(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"a\xff"
	     "b",
	     "\"a\\ufffdb\""},
	    {"\xc3", "\"\\ufffd\""},                                  /* cut short */
	    {"\xc0\xaf", "\"\\ufffd\\ufffd\""},                       /* overlong '/' */
	    {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},            /* a surrogate */
	    {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* past U+10FFFF */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct isc_buf b;
		json_t *back;
		isc_buf_init(&b, 0);
		assert_int_equal(isc_json_out_string(&b, cases[i].in), 0);
		assert_string_equal(isc_buf_cstr(&b), cases[i].out);
		back = json_loads(isc_buf_cstr(&b), JSON_DECODE_ANY, NULL);
		assert_non_null(back);
		json_decref(back);
		isc_buf_cleanup(&b);
	}
}

static void test_members(void **state)
{
	struct isc_buf b;
	int first = 1;
	(void)state;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_buf_putc(&b, '{'), 0);
	assert_int_equal(isc_json_out_str_member(&b, "id", "exp_1", &first), 0);
	assert_int_equal(isc_json_out_int_member(&b, "cost_micros", -1250000, &first), 0);
	assert_int_equal(isc_json_out_str_member(&b, "shape", NULL, &first), 0);
	assert_int_equal(isc_json_out_int_member(&b, "big", INT64_MAX, &first), 0);
	assert_int_equal(isc_buf_putc(&b, '}'), 0);
	assert_string_equal(isc_buf_cstr(&b), "{\"id\":\"exp_1\",\"cost_micros\":-1250000,"
	                                      "\"shape\":\"\",\"big\":9223372036854775807}");
	isc_buf_cleanup(&b);
}

/* Integers are written without snprintf: the ends of int64 and zero, and a key that needs
 * escaping takes the slow path to the same text jansson writes. */
static void test_integers_and_keys(void **state)
{
	struct isc_buf b;
	int first = 1;
	(void)state;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_json_out_int_member(&b, "min", INT64_MIN, &first), 0);
	assert_int_equal(isc_json_out_int_member(&b, "zero", 0, &first), 0);
	assert_int_equal(isc_json_out_int_member(&b, "nine", 9, &first), 0);
	assert_int_equal(isc_json_out_int_member(&b, "ten", -10, &first), 0);
	assert_int_equal(isc_json_out_str_member(&b, "a \"quoted\" key", "v", &first), 0);
	assert_string_equal(isc_buf_cstr(&b),
	                    "\"min\":-9223372036854775808,\"zero\":0,\"nine\":9,\"ten\":-10,"
	                    "\"a \\\"quoted\\\" key\":\"v\"");
	isc_buf_cleanup(&b);
}

/* Money's one form in replies: NAME_micros and the 6-place NAME; null for no amount. */
static void test_money(void **state)
{
	json_t *o = json_object();
	char *text;
	(void)state;
	isc_json_money(o, "balance", 1499965784);
	isc_json_money(o, "granted", 1);
	isc_json_money(o, "refund", -5000000);
	isc_json_money_or_null(o, "budget", 0, 123);
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(text, "{\"balance_micros\":1499965784,\"balance\":\"1499.965784\","
	                          "\"granted_micros\":1,\"granted\":\"0.000001\","
	                          "\"refund_micros\":-5000000,\"refund\":\"-5.000000\","
	                          "\"budget_micros\":null,\"budget\":null}");
	free(text);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_text_as_jansson),
	    cmocka_unit_test(test_not_utf8_becomes_replacement),
	    cmocka_unit_test(test_members),
	    cmocka_unit_test(test_integers_and_keys),
	    cmocka_unit_test(test_money),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
