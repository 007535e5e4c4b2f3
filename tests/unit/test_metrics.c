/*
 * The metrics registry (common/metrics.h): the exposition text it renders (HELP,
 * TYPE, label values escaped, histogram buckets cumulative and ending in +Inf with
 * _sum and _count), counters that never go down, a family that refuses a series
 * past its cap, updates from several threads at once that lose nothing, and iscd's
 * own families, which must follow Prometheus' naming rules.
 */
#include "common/metrics.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double buckets[] = {0.1, 1, 10};

enum { T_COUNTER, T_GAUGE, T_HIST, T_PLAIN, T_N };
static const struct isc_metric_def defs[T_N] = {
    [T_COUNTER] = {"t_things_total",
                   ISC_METRIC_COUNTER,
                   "Things, with a \\ and a\nnewline.",
                   {"kind", "where"}},
    [T_GAUGE] = {"t_level", ISC_METRIC_GAUGE, "A level.", {"state"}},
    [T_HIST] = {"t_wait_seconds", ISC_METRIC_HISTOGRAM, "Waits.", {"path"}, buckets, 3},
    [T_PLAIN] = {"t_plain_total", ISC_METRIC_COUNTER, "No labels.", {NULL}},
};

static char *render(struct isc_metrics *m)
{
	struct isc_buf b;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_metrics_render(m, &b), 0);
	return isc_buf_detach(&b);
}

static void has_line(const char *text, const char *line)
{
	const char *p = text;
	size_t len = strlen(line);
	while ((p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && (p[len] == '\n' || p[len] == 0))
			return;
		p++;
	}
	fail_msg("no line '%s' in:\n%s", line, text);
}

static void test_help_type_and_escaping(void **state)
{
	struct isc_metrics *m = isc_metrics_new(defs, T_N);
	char *text;
	(void)state;

	assert_non_null(m);
	isc_metrics_add(m, T_COUNTER, ISC_LABELS("a\"quote", "back\\slash\nnewline"), 2);
	isc_metrics_add(m, T_PLAIN, NULL, 1);
	text = render(m);
	has_line(text, "# HELP t_things_total Things, with a \\\\ and a\\nnewline.");
	has_line(text, "# TYPE t_things_total counter");
	has_line(text, "t_things_total{kind=\"a\\\"quote\",where=\"back\\\\slash\\nnewline\"} 2");
	has_line(text, "# TYPE t_level gauge");
	has_line(text, "# TYPE t_wait_seconds histogram");
	has_line(text, "t_plain_total 1");
	free(text);

	/* The escaping on its own. */
	struct isc_buf b;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_metrics_escape(&b, "x\\y\"z\nw"), 0);
	assert_string_equal(isc_buf_cstr(&b), "x\\\\y\\\"z\\nw");
	isc_buf_cleanup(&b);
	isc_metrics_free(m);
}

static void test_openmetrics(void **state)
{
	struct isc_metrics *m = isc_metrics_new(defs, T_N);
	struct isc_buf b;
	const char *text;
	(void)state;

	isc_metrics_add(m, T_COUNTER, ISC_LABELS("a", "b"), 2);
	isc_metrics_observe(m, T_HIST, ISC_LABELS("gang"), 3);
	isc_buf_init(&b, 0);
	assert_int_equal(isc_metrics_render_openmetrics(m, &b), 0);
	text = isc_buf_cstr(&b);
	/* The counter's family without _total, its samples with it. */
	has_line(text, "# TYPE t_things counter");
	has_line(text, "# HELP t_things Things, with a \\\\ and a\\nnewline.");
	has_line(text, "t_things_total{kind=\"a\",where=\"b\"} 2");
	has_line(text, "# TYPE t_wait_seconds histogram");
	has_line(text, "t_wait_seconds_bucket{path=\"gang\",le=\"+Inf\"} 1");
	/* # EOF ends it, once. */
	assert_int_equal(strcmp(text + strlen(text) - 6, "# EOF\n"), 0);
	assert_ptr_equal(strstr(text, "# EOF"), text + strlen(text) - 6);
	isc_buf_cleanup(&b);
	isc_metrics_free(m);
}

static void test_histogram_cumulative(void **state)
{
	struct isc_metrics *m = isc_metrics_new(defs, T_N);
	const double obs[] = {0.05, 0.1, 0.5, 1, 5, 50, 500};
	char *text;
	(void)state;

	for (size_t i = 0; i < sizeof(obs) / sizeof(obs[0]); i++)
		isc_metrics_observe(m, T_HIST, ISC_LABELS("replace"), obs[i]);
	text = render(m);
	/* A value on a bound counts in that bound's bucket (le: less or equal). */
	has_line(text, "t_wait_seconds_bucket{path=\"replace\",le=\"0.10000000000000001\"} 2");
	has_line(text, "t_wait_seconds_bucket{path=\"replace\",le=\"1\"} 4");
	has_line(text, "t_wait_seconds_bucket{path=\"replace\",le=\"10\"} 5");
	has_line(text, "t_wait_seconds_bucket{path=\"replace\",le=\"+Inf\"} 7");
	has_line(text, "t_wait_seconds_sum{path=\"replace\"} 556.64999999999998");
	has_line(text, "t_wait_seconds_count{path=\"replace\"} 7");
	assert_true(isc_metrics_value(m, T_HIST, ISC_LABELS("replace")) == 7);
	free(text);
	isc_metrics_free(m);
}

static void test_counter_never_goes_down(void **state)
{
	struct isc_metrics *m = isc_metrics_new(defs, T_N);
	(void)state;

	isc_metrics_add(m, T_COUNTER, ISC_LABELS("a", "b"), 3);
	isc_metrics_add(m, T_COUNTER, ISC_LABELS("a", "b"), -2);
	isc_metrics_add(m, T_COUNTER, ISC_LABELS("a", "b"), 0.0 / 0.0);
	assert_true(isc_metrics_value(m, T_COUNTER, ISC_LABELS("a", "b")) == 3);
	/* A gauge goes both ways, and zero sets every series of it to 0. */
	isc_metrics_set(m, T_GAUGE, ISC_LABELS("running"), 5);
	isc_metrics_add(m, T_GAUGE, ISC_LABELS("running"), -2);
	assert_true(isc_metrics_value(m, T_GAUGE, ISC_LABELS("running")) == 3);
	isc_metrics_zero(m, T_GAUGE);
	assert_true(isc_metrics_value(m, T_GAUGE, ISC_LABELS("running")) == 0);
	/* The wrong kind of update is ignored. */
	isc_metrics_observe(m, T_COUNTER, ISC_LABELS("a", "b"), 1);
	isc_metrics_add(m, T_HIST, ISC_LABELS("x"), 1);
	assert_true(isc_metrics_value(m, T_COUNTER, ISC_LABELS("a", "b")) == 3);
	assert_true(isc_metrics_value(m, T_HIST, ISC_LABELS("x")) == 0);
	isc_metrics_free(m);
}

static void test_series_cap(void **state)
{
	struct isc_metrics *m = isc_metrics_new(defs, T_N);
	char name[32];
	(void)state;

	for (int i = 0; i < ISC_METRICS_MAX_SERIES + 10; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		isc_metrics_set(m, T_GAUGE, ISC_LABELS(name), 1);
	}
	assert_int_equal(isc_metrics_dropped(m), 10);
	snprintf(name, sizeof(name), "s%d", ISC_METRICS_MAX_SERIES - 1);
	assert_true(isc_metrics_value(m, T_GAUGE, ISC_LABELS(name)) == 1);
	snprintf(name, sizeof(name), "s%d", ISC_METRICS_MAX_SERIES);
	assert_true(isc_metrics_value(m, T_GAUGE, ISC_LABELS(name)) == 0);
	isc_metrics_free(m);
}

#define THREADS 4
#define ROUNDS  20000
static struct isc_metrics *shared;

static void *hammer(void *arg)
{
	const char *kinds[] = {"a", "b", "c"};
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		isc_metrics_add(shared, T_COUNTER, ISC_LABELS(kinds[i % 3], "w"), 1);
		isc_metrics_observe(shared, T_HIST, ISC_LABELS(kinds[i % 3]), 0.5);
	}
	return NULL;
}

static void test_threads_lose_nothing(void **state)
{
	pthread_t t[THREADS];
	double total = 0, count = 0;
	char *text;
	(void)state;

	shared = isc_metrics_new(defs, T_N);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
	/* A scrape while they run: the text is whole. */
	text = render(shared);
	assert_non_null(strstr(text, "# TYPE t_wait_seconds histogram"));
	free(text);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	total += isc_metrics_value(shared, T_COUNTER, ISC_LABELS("a", "w"));
	total += isc_metrics_value(shared, T_COUNTER, ISC_LABELS("b", "w"));
	total += isc_metrics_value(shared, T_COUNTER, ISC_LABELS("c", "w"));
	count += isc_metrics_value(shared, T_HIST, ISC_LABELS("a"));
	count += isc_metrics_value(shared, T_HIST, ISC_LABELS("b"));
	count += isc_metrics_value(shared, T_HIST, ISC_LABELS("c"));
	assert_true(total == THREADS * ROUNDS);
	assert_true(count == THREADS * ROUNDS);
	/* Each label set made once, however many threads raced to make it. */
	text = render(shared);
	{
		int n = 0;
		for (const char *p = text; (p = strstr(p, "\nt_things_total{")); p++)
			n++;
		assert_int_equal(n, 3);
	}
	free(text);
	isc_metrics_free(shared);
}

/* iscd's families follow Prometheus' naming: counters _total, times _seconds, base units. */
static void test_iscd_families_named_by_the_rules(void **state)
{
	(void)state;
	for (size_t i = 0; i < ISC_M_COUNT; i++) {
		const struct isc_metric_def *d = &isc_metric_defs[i];
		size_t len;
		assert_non_null(d->name);
		assert_non_null(d->help);
		len = strlen(d->name);
		if (d->type == ISC_METRIC_COUNTER)
			assert_true(len > 6 && strcmp(d->name + len - 6, "_total") == 0);
		else
			assert_false(len > 6 && strcmp(d->name + len - 6, "_total") == 0);
		if (d->type == ISC_METRIC_HISTOGRAM) {
			assert_true(d->n_buckets > 0 && d->n_buckets <= ISC_METRICS_MAX_BUCKETS);
			assert_non_null(strstr(d->name, "_seconds"));
			for (size_t b = 1; b < d->n_buckets; b++)
				assert_true(d->buckets[b] > d->buckets[b - 1]);
		}
		assert_null(strstr(d->name, "_ms"));
		assert_null(strstr(d->name, "millis"));
		for (size_t l = 0; l < ISC_METRICS_MAX_LABELS && d->labels[l]; l++) {
			/* never an id as a label ("provider" is fine, "experiment_id" is not) */
			size_t ll = strlen(d->labels[l]);
			assert_false(ll >= 2 && strcmp(d->labels[l] + ll - 2, "id") == 0);
			assert_string_not_equal(d->labels[l], "experiment");
			assert_string_not_equal(d->labels[l], "user");
		}
	}
	/* The global registry renders every family, build info set. */
	{
		struct isc_buf b;
		isc_buf_init(&b, 0);
		assert_int_equal(isc_metrics_render(isc_metrics_global(), &b), 0);
		for (size_t i = 0; i < ISC_M_COUNT; i++) {
			char line[128];
			snprintf(line, sizeof(line), "# TYPE %s ", isc_metric_defs[i].name);
			assert_non_null(strstr(isc_buf_cstr(&b), line));
		}
		assert_non_null(strstr(isc_buf_cstr(&b), "isc_build_info{version=\""));
		isc_buf_cleanup(&b);
	}
}

static void test_process_metrics(void **state)
{
	struct isc_metrics *m = isc_metrics_new(isc_metric_defs, ISC_M_COUNT);
	(void)state;
	isc_metrics_process_update(m);
	assert_true(isc_metrics_value(m, ISC_M_PROCESS_RSS, NULL) > 1024 * 1024);
	assert_true(isc_metrics_value(m, ISC_M_PROCESS_OPEN_FDS, NULL) >= 3);
	assert_true(isc_metrics_value(m, ISC_M_PROCESS_MAX_FDS, NULL) >= 3);
	/* Started after 2020 and not in the future. */
	assert_true(isc_metrics_value(m, ISC_M_PROCESS_START_TIME, NULL) > 1577836800.0);
	assert_true(isc_metrics_value(m, ISC_M_PROCESS_START_TIME, NULL) < 4102444800.0);
	isc_metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_help_type_and_escaping),
	    cmocka_unit_test(test_histogram_cumulative),
	    cmocka_unit_test(test_openmetrics),
	    cmocka_unit_test(test_counter_never_goes_down),
	    cmocka_unit_test(test_series_cap),
	    cmocka_unit_test(test_threads_lose_nothing),
	    cmocka_unit_test(test_iscd_families_named_by_the_rules),
	    cmocka_unit_test(test_process_metrics),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
