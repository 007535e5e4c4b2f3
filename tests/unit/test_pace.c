/*
 * launcher/pace.h: the total deadline and minimum throughput of a node transfer
 * (issue 42), on a clock the test moves. A trickle (one byte every 5 s) is stopped
 * at the end of its first window; a steady transfer at the floor is not, even when
 * it is looked at late; a fast transfer still ends at the deadline; zeros take the
 * defaults, and the message names the limit.
 */
#include "launcher/pace.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

static const struct isc_pace_limits lim = {10000, 1000, 2000}; /* 10 s; 1000 B/s per 2 s */

static void trickle_stopped_after_one_window(void **state)
{
	struct isc_pace p;
	int64_t t = 1000000, stopped = -1;
	(void)state;
	isc_pace_start(&p, &lim, t);
	/* One byte every 500 ms (the trickle, faster): 4 bytes per 2 s window. */
	for (int i = 1; i <= 40 && stopped < 0; i++) {
		isc_pace_add(&p, 1);
		if (isc_pace_check(&p, t + i * 500) == ISC_PACE_SLOW)
			stopped = i * 500;
	}
	assert_int_equal(stopped, 2000);
	assert_int_equal(p.last_window_bytes, 4);
}

static void steady_at_the_floor_runs_until_the_deadline(void **state)
{
	struct isc_pace p;
	int64_t t = 0;
	(void)state;
	isc_pace_start(&p, &lim, t);
	/* Exactly the floor: 100 bytes every 100 ms. */
	for (int i = 1; i <= 100; i++) {
		isc_pace_add(&p, 100);
		assert_int_equal(isc_pace_check(&p, i * 100), ISC_PACE_OK);
	}
	/* 10 s passed: one more moment and the deadline stops it, fast or not. */
	isc_pace_add(&p, 1 << 20);
	assert_int_equal(isc_pace_check(&p, 10001), ISC_PACE_DEADLINE);
}

static void a_late_look_judges_each_window(void **state)
{
	struct isc_pace p;
	(void)state;
	/* 5000 bytes arrived, then nothing for 5 s: window 1 passes, window 2 was silent. */
	isc_pace_start(&p, &lim, 0);
	isc_pace_add(&p, 5000);
	assert_int_equal(isc_pace_check(&p, 5000), ISC_PACE_SLOW);
	assert_int_equal(p.last_window_bytes, 0);
	/* Enough for both windows, looked at late: kept. */
	isc_pace_start(&p, &lim, 0);
	isc_pace_add(&p, 2000);
	assert_int_equal(isc_pace_check(&p, 1999), ISC_PACE_OK);
	isc_pace_add(&p, 2000);
	assert_int_equal(isc_pace_check(&p, 3999), ISC_PACE_OK);
}

static void silence_fails_the_first_window(void **state)
{
	struct isc_pace p;
	(void)state;
	isc_pace_start(&p, &lim, 0);
	assert_int_equal(isc_pace_check(&p, 1999), ISC_PACE_OK);
	assert_int_equal(isc_pace_check(&p, 2000), ISC_PACE_SLOW);
}

static void zeros_take_the_defaults(void **state)
{
	struct isc_pace_limits z = {0, 0, 0}, d = isc_pace_limits_or_default(&z);
	struct isc_pace p;
	(void)state;
	assert_int_equal(d.deadline_ms, ISC_PACE_DEFAULT_DEADLINE_MS);
	assert_int_equal(d.min_bytes_per_s, ISC_PACE_DEFAULT_MIN_BPS);
	assert_int_equal(d.window_ms, ISC_PACE_DEFAULT_WINDOW_MS);
	d = isc_pace_limits_or_default(NULL);
	assert_int_equal(d.window_ms, ISC_PACE_DEFAULT_WINDOW_MS);
	/* The defaults: 64 KiB/s over a minute. 3 MiB in the first minute is under it. */
	isc_pace_start(&p, NULL, 0);
	isc_pace_add(&p, 3u << 20);
	assert_int_equal(isc_pace_check(&p, 59999), ISC_PACE_OK);
	assert_int_equal(isc_pace_check(&p, 60000), ISC_PACE_SLOW);
	/* A huge floor does not overflow into a small one. */
	struct isc_pace_limits big = {10000, UINT64_MAX / 2, 3600000};
	isc_pace_start(&p, &big, 0);
	isc_pace_add(&p, UINT64_MAX / 4);
	assert_int_equal(isc_pace_check(&p, 3600000), ISC_PACE_DEADLINE);
	big.deadline_ms = 7200000;
	isc_pace_start(&p, &big, 0);
	isc_pace_add(&p, UINT64_MAX / 4);
	assert_int_equal(isc_pace_check(&p, 3600000), ISC_PACE_SLOW);
}

static void messages_name_the_limit(void **state)
{
	struct isc_pace p;
	char msg[256];
	(void)state;
	isc_pace_start(&p, &lim, 0);
	isc_pace_add(&p, 12);
	assert_int_equal(isc_pace_check(&p, 2000), ISC_PACE_SLOW);
	isc_pace_explain(&p, ISC_PACE_SLOW, 2000, msg, sizeof(msg));
	assert_string_equal(msg, "moved 12 bytes in 2000 ms, under transfer_min_bytes_per_s (1000) "
	                         "over transfer_window_ms (2000)");
	isc_pace_start(&p, &lim, 0);
	isc_pace_add(&p, 100000);
	assert_int_equal(isc_pace_check(&p, 10001), ISC_PACE_DEADLINE);
	isc_pace_explain(&p, ISC_PACE_DEADLINE, 12000, msg, sizeof(msg));
	assert_string_equal(msg,
	                    "ran for 12 s (100000 bytes moved), over transfer_deadline_ms (10000)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(trickle_stopped_after_one_window),
	    cmocka_unit_test(steady_at_the_floor_runs_until_the_deadline),
	    cmocka_unit_test(a_late_look_judges_each_window),
	    cmocka_unit_test(silence_fails_the_first_window),
	    cmocka_unit_test(zeros_take_the_defaults),
	    cmocka_unit_test(messages_name_the_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
