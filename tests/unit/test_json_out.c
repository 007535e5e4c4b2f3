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
#include <stdio.h>
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

/*
 * Reals, booleans, null and money written into a buffer are what jansson writes of the
 * same object (the shapes answer's bytes did not change when it stopped going through
 * jansson): 17 digits, a '.' or an exponent always, exponents without '+' or zeros.
 */
static void test_reals_and_the_rest_as_jansson(void **state)
{
	static const double reals[] = {0.0,
	                               1.0,
	                               -1.0,
	                               0.1,
	                               0.7,
	                               1.2559523809523809,
	                               0.010416666666666666,
	                               1e20,
	                               1e-5,
	                               -2.5e-300,
	                               1e300,
	                               123456789012345678.0,
	                               3.0e-7,
	                               1.72,
	                               100.0,
	                               1e16,
	                               5e-324,
	                               -0.0,
	                               4.0e100};
	json_t *o = json_object();
	struct isc_buf b;
	char key[16], *want;
	int first = 1;
	(void)state;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_buf_putc(&b, '{'), 0);
	for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
		snprintf(key, sizeof(key), "r%zu", i);
		json_object_set_new(o, key, json_real(reals[i]));
		assert_int_equal(isc_json_out_real_member(&b, key, reals[i], &first), 0);
	}
	json_object_set_new(o, "yes", json_true());
	json_object_set_new(o, "no", json_false());
	json_object_set_new(o, "none", json_null());
	isc_json_money(o, "price", 76780);
	isc_json_money_or_null(o, "cost", 0, 0);
	assert_int_equal(isc_json_out_bool_member(&b, "yes", 1, &first), 0);
	assert_int_equal(isc_json_out_bool_member(&b, "no", 0, &first), 0);
	assert_int_equal(isc_json_out_null_member(&b, "none", &first), 0);
	assert_int_equal(isc_json_out_money_member(&b, "price", 1, 76780, &first), 0);
	assert_int_equal(isc_json_out_money_member(&b, "cost", 0, 0, &first), 0);
	assert_int_equal(isc_buf_putc(&b, '}'), 0);
	want = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(isc_buf_cstr(&b), want);
	free(want);
	json_decref(o);
	isc_buf_cleanup(&b);
}

/* A value jansson has no real for (NaN, infinity) is null, so the answer still parses. */
static void test_real_not_finite_is_null(void **state)
{
	struct isc_buf b;
	int first = 1;
	(void)state;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_json_out_real_member(&b, "x", 0.0 / 0.0, &first), 0);
	assert_int_equal(isc_json_out_real_member(&b, "y", 1.0 / 0.0, &first), 0);
	assert_string_equal(isc_buf_cstr(&b), "\"x\":null,\"y\":null");
	isc_buf_cleanup(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_text_as_jansson),
	    cmocka_unit_test(test_not_utf8_becomes_replacement),
	    cmocka_unit_test(test_members),
	    cmocka_unit_test(test_integers_and_keys),
	    cmocka_unit_test(test_money),
	    cmocka_unit_test(test_reals_and_the_rest_as_jansson),
	    cmocka_unit_test(test_real_not_finite_is_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
