/*
 * Foundation units: the error model, store creation and migrations, and the
 * HTTP retry policy driven by a scripted transport and a fake clock.
 */
#include "common/buf.h"
#include "common/err.h"
#include "common/suggest.h"
#include "net/http.h"
#include "store/store_experiments.h"
#include "store/store_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- error model ---- */

static void test_err_set_and_wrap(void **state)
{
	struct isc_err err;
	(void)state;
	isc_err_clear(&err);
	assert_int_equal(isc_err_set(&err, ISC_ECAPACITY, "no %s in %s", "p4d", "us-east-1a"),
	                 ISC_ECAPACITY);
	assert_string_equal(err.msg, "no p4d in us-east-1a");
	assert_int_equal(isc_err_wrap(&err, "launching %d nodes", 4), ISC_ECAPACITY);
	assert_string_equal(err.msg, "launching 4 nodes: no p4d in us-east-1a");
	assert_int_equal(isc_err_set(NULL, ISC_EIO, "ignored"), ISC_EIO);
}

/* A message cut to ISC_ERR_MSG_MAX never ends inside a UTF-8 character (JSON carries it). */
static void test_err_cut_on_character(void **state)
{
	char name[1200] = "";
	struct isc_err err;
	(void)state;
	for (int odd = 0; odd < 2; odd++) {
		strcpy(name, odd ? "x" : "");
		for (int i = 0; i < 400; i++)
			strcat(name, "\xc3\xa9"); /* é: two bytes */
		isc_err_set(&err, ISC_EINVALID, "name %s", name);
		size_t n = strlen(err.msg);
		assert_true(n >= sizeof(err.msg) - 3);
		assert_true(((unsigned char)err.msg[n - 1] & 0xc0) == 0x80); /* ends on a whole é */
		assert_int_equal(((unsigned char)err.msg[n - 2]), 0xc3);
	}
	/* An ASCII message is untouched; a bare lead byte at the end goes. */
	char s1[] = "plain", s2[] = "cut \xe2\x82";
	isc_utf8_trim_partial(s1);
	isc_utf8_trim_partial(s2);
	assert_string_equal(s1, "plain");
	assert_string_equal(s2, "cut ");
}

static void test_err_codes(void **state)
{
	static const struct {
		int code;
		const char *name;
		int retry;
	} cases[] = {
	    {ISC_OK, "ok", 0},
	    {ISC_EINVALID, "invalid", 0},
	    {ISC_ENOTFOUND, "not_found", 0},
	    {ISC_ECONFLICT, "conflict", 0},
	    {ISC_EAUTH, "auth", 0},
	    {ISC_EQUOTA, "quota", 0},
	    {ISC_ECAPACITY, "capacity", 0},
	    {ISC_ETHROTTLED, "throttled", 1},
	    {ISC_ETRANSIENT, "transient", 1},
	    {ISC_ECREDITS, "credits", 0},
	    {ISC_EIO, "io", 0},
	    {ISC_ENOMEM, "nomem", 0},
	    {ISC_ELEASE, "lease_lost", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_string_equal(isc_code_name(cases[i].code), cases[i].name);
		assert_int_equal(isc_code_is_retryable(cases[i].code), cases[i].retry);
	}
	assert_string_equal(isc_code_name(-99), "unknown");
}

static void test_suggest(void **state)
{
	static const char *const commands[] = {"init", "experiments", "status", "spend", "shapes"};
	(void)state;

	/* Levenshtein plus adjacent transpositions, case and '-'/'_'/' ' folded. */
	assert_int_equal(isc_edit_distance("kitten", 6, "sitting", 7), 3);
	assert_int_equal(isc_edit_distance("wiat", 4, "wait", 4), 1);
	assert_int_equal(isc_edit_distance("Wait-For", 8, "wait_for", 8), 0);
	assert_int_equal(isc_edit_distance("", 0, "abc", 3), 3);
	assert_string_equal(isc_suggest("experimnts", commands, 5), "experiments");
	assert_string_equal(isc_suggest("shpaes", commands, 5), "shapes");
	/* Too far from everything: no guess. */
	assert_null(isc_suggest("frobnicate", commands, 5));
	assert_null(isc_suggest("", commands, 5));
	/* The nearest wins; on a tie, the first. */
	assert_string_equal(isc_suggest("spent", commands, 5), "spend");
	/* A long shape id one letter short. */
	{
		const char *ids[] = {"aws-us-east-1-p4d.24xlarge-ondemand",
		                     "aws-us-east-1-p4d.24xlarge-spot",
		                     "aws-us-east-1-p5.48xlarge-spot"};
		assert_string_equal(isc_suggest("aws-us-east-1-p4d.24xlarg-spot", ids, 3),
		                    "aws-us-east-1-p4d.24xlarge-spot");
	}
}

static void test_buf_cap(void **state)
{
	struct isc_buf b;
	(void)state;
	isc_buf_init(&b, 8);
	assert_int_equal(isc_buf_puts(&b, "12345678"), 0);
	assert_int_equal(isc_buf_putc(&b, '9'), ISC_EINVALID);
	assert_string_equal(isc_buf_cstr(&b), "12345678");
	isc_buf_reset(&b);
	assert_int_equal(isc_buf_printf(&b, "%d-%s", 42, "x"), 0);
	assert_string_equal(isc_buf_cstr(&b), "42-x");
	isc_buf_cleanup(&b);
}

/* ---- store ---- */

static char *temp_home(void)
{
	char tmpl[] = "/tmp/isc-test-XXXXXX";
	char *dir = mkdtemp(tmpl);
	char *home;
	assert_non_null(dir);
	assert_int_not_equal(asprintf(&home, "%s/home", dir), -1);
	return home;
}

static void remove_home(char *home)
{
	char *cmd, *slash = strrchr(home, '/');
	*slash = '\0'; /* the temp folder above the home */
	assert_int_not_equal(asprintf(&cmd, "rm -rf '%s'", home), -1);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(home);
}

static void test_store_create_modes(void **state)
{
	char *home = temp_home(), *db;
	struct isc_store *s;
	struct isc_err err;
	struct stat st;
	int version;
	(void)state;

	assert_int_equal(isc_store_open(home, 0, &s, &err), ISC_ENOTFOUND);
	assert_non_null(strstr(err.msg, "isc init"));
	assert_int_equal(isc_store_open(home, 1, &s, &err), 0);
	assert_int_equal(stat(home, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_not_equal(asprintf(&db, "%s/isc.db", home), -1);
	assert_int_equal(stat(db, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(isc_store_schema_version(s, &version, &err), 0);
	assert_int_equal(version, isc_store_latest_version());
	isc_store_free(s);
	/* Opening again changes nothing. */
	assert_int_equal(isc_store_open(home, 1, &s, &err), 0);
	assert_int_equal(isc_store_schema_version(s, &version, &err), 0);
	assert_int_equal(version, isc_store_latest_version());
	isc_store_free(s);
	free(db);
	remove_home(home);
}

static void test_store_migrates_old_schema_in_place(void **state)
{
	char *home = temp_home();
	struct isc_store *s;
	struct isc_err err;
	struct isc_project p;
	struct isc_experiment e;
	int version;
	(void)state;

	/* A store from the first release: schema version 1, with data. */
	assert_int_equal(isc_store_open_at(home, 1, 1, &s, &err), 0);
	assert_int_equal(isc_store_schema_version(s, &version, &err), 0);
	assert_int_equal(version, 1);
	assert_int_equal(
	    isc_db_exec(isc_store_db(s),
	                "INSERT INTO orgs VALUES (1, 'acme', 1);"
	                "INSERT INTO projects VALUES ('prj_1', 1, 'vision', 2);"
	                "INSERT INTO experiments VALUES ('exp_1', 'prj_1', 1, 'resnet', 'cycle', 8,"
	                " '{}', 'enqueued', 3, 3);"),
	    ISC_DB_OK);
	isc_store_free(s);

	/* The current program migrates it and keeps the rows. */
	assert_int_equal(isc_store_open(home, 0, &s, &err), 0);
	assert_int_equal(isc_store_schema_version(s, &version, &err), 0);
	assert_int_equal(version, isc_store_latest_version());
	assert_int_equal(isc_store_project_resolve(s, "vision", &p, &err), 0);
	assert_string_equal(p.id, "prj_1");
	assert_string_equal(p.org_name, "acme");
	assert_int_equal(p.has_budget, 0);
	isc_project_cleanup(&p);
	assert_int_equal(isc_store_experiment_get(s, "exp_1", &e, &err), 0);
	assert_string_equal(e.name, "resnet");
	assert_string_equal(e.status_reason, "");
	assert_int_equal(e.cycle_count, 0);
	isc_experiment_cleanup(&e);
	isc_store_free(s);
	remove_home(home);
}

/*
 * A PostgreSQL store that cannot be reached: a clear error, no password in it,
 * nothing kept, and the home's SQLite store untouched (a loopback port nothing
 * listens on; the URL names a password to prove it never shows).
 */
static void test_store_url_unreachable(void **state)
{
	char *home = temp_home();
	const char *before = getenv("ISC_STORE_URL");
	char *saved = before ? strdup(before) : NULL;
	struct isc_store *s = NULL;
	struct isc_err err;
	(void)state;

	assert_int_equal(setenv("ISC_STORE_URL",
	                        "postgresql://bob:hunter2@127.0.0.1:1/isc?connect_timeout=2", 1),
	                 0);
	/* A server out of reach may come back: ISC_ESTORE, the store error that passes. */
	assert_int_equal(isc_store_open(home, 1, &s, &err), ISC_ESTORE);
	assert_null(s);
	assert_non_null(strstr(err.msg, "PostgreSQL"));
	assert_null(strstr(err.msg, "hunter2"));
	/* A URL of no known kind is refused by name, before anything is opened. */
	assert_int_equal(setenv("ISC_STORE_URL", "mysql://db/isc", 1), 0);
	assert_int_not_equal(isc_store_open(home, 1, &s, &err), 0);
	assert_non_null(strstr(err.msg, "ISC_STORE_URL"));
	if (saved)
		setenv("ISC_STORE_URL", saved, 1);
	else
		unsetenv("ISC_STORE_URL");
	free(saved);
	remove_home(home);
}

static void test_store_refuses_newer_schema(void **state)
{
	char *home = temp_home();
	struct isc_store *s;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_store_open(home, 1, &s, &err), 0);
	assert_int_equal(isc_db_exec(isc_store_db(s), "UPDATE schema_version SET version = 999"),
	                 ISC_DB_OK);
	isc_store_free(s);
	assert_int_equal(isc_store_open(home, 0, &s, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "newer"));
	remove_home(home);
}

/* Transactions nest as savepoints: an inner rollback undoes only its own writes. */
static void test_store_nested_transactions(void **state)
{
	char *home = temp_home();
	struct isc_store *s;
	struct isc_err err;
	struct isc_org *orgs;
	size_t n;
	(void)state;
	assert_int_equal(isc_store_open(home, 1, &s, &err), 0);
	assert_int_equal(isc_store_begin(s, &err), 0);
	assert_int_equal(isc_store_org_add(s, "kept-a", NULL, &err), 0);
	assert_int_equal(isc_store_begin(s, &err), 0);
	assert_int_equal(isc_store_org_add(s, "undone-b", NULL, &err), 0);
	isc_store_rollback(s);
	assert_int_equal(isc_store_begin(s, &err), 0);
	assert_int_equal(isc_store_org_add(s, "kept-c", NULL, &err), 0);
	assert_int_equal(isc_store_commit(s, &err), 0);
	assert_int_equal(isc_store_commit(s, &err), 0);
	/* back in autocommit: a new transaction starts afresh */
	assert_int_equal(isc_store_begin(s, &err), 0);
	assert_int_equal(isc_store_org_add(s, "undone-d", NULL, &err), 0);
	isc_store_rollback(s);
	assert_int_equal(isc_store_org_list(s, &orgs, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(orgs[0].name, "kept-a");
	assert_string_equal(orgs[1].name, "kept-c");
	isc_org_list_free(orgs, n);
	isc_store_free(s);
	remove_home(home);
}

static void test_store_orgs_projects_experiments(void **state)
{
	char *home = temp_home(), *pid = NULL;
	struct isc_store *s;
	struct isc_err err;
	struct isc_project p;
	struct isc_experiment e = {0}, *list;
	struct isc_event *events;
	size_t n;
	(void)state;

	assert_int_equal(isc_store_open(home, 1, &s, &err), 0);
	assert_int_equal(isc_store_org_add(s, "acme", NULL, &err), 0);
	assert_int_equal(isc_store_org_add(s, "acme", NULL, &err), ISC_ECONFLICT);
	assert_int_equal(isc_store_project_add(s, "nope", "x", &pid, &err), ISC_ENOTFOUND);
	assert_int_equal(isc_store_project_add(s, "acme", "vision", &pid, &err), 0);
	assert_int_equal(strncmp(pid, "prj_", 4), 0);
	assert_int_equal(isc_store_project_resolve(s, pid, &p, &err), 0);
	e.id = "exp_a";
	e.project_id = p.id;
	e.org_id = p.org_id;
	e.name = "resnet";
	e.compute_mode = "burst";
	e.gpus = 8;
	e.spec_json = "{}";
	e.status = "enqueued";
	assert_int_equal(isc_store_experiment_add(s, &e, &err), 0);
	assert_int_equal(isc_store_experiment_add(s, &e, &err), ISC_ECONFLICT);
	assert_int_equal(isc_store_experiment_transition(s, "exp_a", "enqueued", "placing",
	                                                 "ranking 3 shapes", &err),
	                 0);
	assert_int_equal(
	    isc_store_experiment_transition(s, "exp_zz", "enqueued", "placing", "", &err),
	    ISC_ENOTFOUND);
	/* A writer that did not see the last transition loses, and nothing is written. */
	assert_int_equal(
	    isc_store_experiment_transition(s, "exp_a", "running", "stopping", "late meter", &err),
	    ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "is placing, not running"));
	assert_int_equal(isc_store_experiment_list(s, NULL, &list, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].status, "placing");
	assert_string_equal(list[0].status_reason, "ranking 3 shapes");
	isc_experiment_list_free(list, n);
	assert_int_equal(isc_store_event_list(s, "exp_a", 0, &events, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(events[0].kind, "enqueued");
	assert_string_equal(events[1].message, "ranking 3 shapes");
	isc_event_list_free(events, n);
	assert_int_equal(isc_store_experiment_request_cancel(s, "exp_a", &err), 0);
	isc_project_cleanup(&p);
	free(pid);
	isc_store_free(s);
	remove_home(home);
}

/* ---- HTTP retry policy ---- */

struct script {
	const long *statuses; /* 0 = connection failure */
	size_t n, next;
};

static int scripted_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                         long connect_timeout_ms, size_t max_bytes, struct isc_http_response *resp,
                         struct isc_err *err)
{
	struct script *sc = ctx;
	long status;
	(void)req;
	(void)timeout_ms;
	(void)connect_timeout_ms;
	(void)max_bytes;
	assert_true(sc->next < sc->n);
	status = sc->statuses[sc->next++];
	if (status == 0)
		return isc_err_set(err, ISC_ETRANSIENT, "connection refused");
	resp->status = status;
	return isc_buf_puts(&resp->body, "reply");
}

struct fake_clock {
	int64_t now_ms;
	int64_t slept[16];
	size_t n_slept;
};

static int64_t fake_now(void *ctx)
{
	return ((struct fake_clock *)ctx)->now_ms;
}

static void fake_sleep(void *ctx, int64_t ms)
{
	struct fake_clock *c = ctx;
	c->now_ms += ms;
	if (c->n_slept < 16)
		c->slept[c->n_slept++] = ms;
}

static uint64_t fake_random_max(void *ctx)
{
	(void)ctx;
	return UINT64_MAX; /* the top of the jitter range, so delays are predictable */
}

static int run_script(const long *statuses, size_t n, struct fake_clock *fc, int *attempts)
{
	struct script sc = {statuses, n, 0};
	struct isc_http_transport t = {scripted_send, &sc};
	struct isc_clock clock = {fake_now, fake_sleep, fake_random_max, fc};
	struct isc_http_client c;
	struct isc_http_request req = {.method = "GET", .url = "http://127.0.0.1:1/"};
	struct isc_http_response resp;
	struct isc_err err;
	int rc;

	isc_http_client_init(&c, &t, &clock);
	c.policy.max_attempts = 4;
	c.policy.base_delay_ms = 100;
	c.policy.max_delay_ms = 250;
	isc_http_response_init(&resp);
	rc = isc_http_do(&c, &req, NULL, NULL, &resp, &err);
	*attempts = c.attempts_made;
	assert_int_equal((size_t)*attempts, sc.next);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* Issue 42: a header line with a CR or LF inside is never handed to the transport. */
static void test_http_refuses_header_injection(void **state)
{
	static const long statuses[] = {200};
	struct script sc = {statuses, 1, 0};
	struct isc_http_transport t = {scripted_send, &sc};
	struct fake_clock fc = {0};
	struct isc_clock clock = {fake_now, fake_sleep, fake_random_max, &fc};
	struct isc_http_client c;
	struct isc_http_header h[2] = {{"Accept", "*/*"},
	                               {"X-Amz-Security-Token", "tok\r\nX-Injected: 1"}};
	struct isc_http_request req = {
	    .method = "GET", .url = "http://127.0.0.1:1/", .headers = h, .n_headers = 2};
	struct isc_http_response resp;
	struct isc_err err;
	(void)state;

	isc_http_client_init(&c, &t, &clock);
	isc_http_response_init(&resp);
	assert_int_equal(isc_http_do(&c, &req, NULL, NULL, &resp, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "X-Amz-Security-Token"));
	assert_null(strstr(err.msg, "X-Injected"));
	h[1].value = "tok\nX-Injected: 1";
	assert_int_equal(isc_http_do(&c, &req, NULL, NULL, &resp, &err), ISC_EINVALID);
	h[1] = (struct isc_http_header){"X-A: 1\r\nX-B", "v"};
	assert_int_equal(isc_http_do(&c, &req, NULL, NULL, &resp, &err), ISC_EINVALID);
	assert_int_equal(sc.next, 0); /* the transport was never called */
	h[1] = (struct isc_http_header){"X-Amz-Security-Token", "tok"};
	assert_int_equal(isc_http_do(&c, &req, NULL, NULL, &resp, &err), 0);
	assert_int_equal(sc.next, 1);
	isc_http_response_cleanup(&resp);
}

static void test_http_retries_transient_then_succeeds(void **state)
{
	static const long statuses[] = {503, 0, 200};
	struct fake_clock fc = {0};
	int attempts;
	(void)state;
	assert_int_equal(run_script(statuses, 3, &fc, &attempts), 0);
	assert_int_equal(attempts, 3);
	assert_int_equal(fc.n_slept, 2);
	/* ceilings 100, 200 (full jitter at its top with the fake random source, modulo ceiling+1)
	 */
	assert_true(fc.slept[0] <= 100);
	assert_true(fc.slept[1] <= 200);
}

static void test_http_does_not_retry_auth_or_client_errors(void **state)
{
	static const long auth[] = {403}, bad[] = {400}, missing[] = {404};
	struct fake_clock fc = {0};
	int attempts;
	(void)state;
	assert_int_equal(run_script(auth, 1, &fc, &attempts), ISC_EAUTH);
	assert_int_equal(attempts, 1);
	assert_int_equal(run_script(bad, 1, &fc, &attempts), ISC_EINVALID);
	assert_int_equal(run_script(missing, 1, &fc, &attempts), ISC_ENOTFOUND);
	assert_int_equal(fc.n_slept, 0);
}

static void test_http_gives_up_after_limit(void **state)
{
	static const long statuses[] = {429, 429, 429, 429};
	struct fake_clock fc = {0};
	int attempts;
	(void)state;
	assert_int_equal(run_script(statuses, 4, &fc, &attempts), ISC_ETHROTTLED);
	assert_int_equal(attempts, 4);
	assert_int_equal(fc.n_slept, 3); /* no sleep after the last attempt */
	/* The ceiling is capped at max_delay_ms. */
	for (size_t i = 0; i < fc.n_slept; i++)
		assert_true(fc.slept[i] <= 250);
	assert_int_equal(fc.now_ms, fc.slept[0] + fc.slept[1] + fc.slept[2]);
}

static uint64_t seq_random(void *ctx)
{
	return (*(uint64_t *)ctx)++;
}

static void test_http_backoff_is_full_jitter(void **state)
{
	struct isc_http_policy p = isc_http_policy_default();
	uint64_t r = 0;
	struct isc_clock clock = {fake_now, fake_sleep, seq_random, &r};
	int64_t seen_zero = 0, seen_top = 0;
	(void)state;
	p.base_delay_ms = 10;
	p.max_delay_ms = 40;
	/* attempt 3: ceiling 40; draws cover 0..40 uniformly from a sequential source */
	for (int i = 0; i < 82; i++) {
		long d = isc_http_backoff_ms(&p, &clock, 3);
		assert_true(d >= 0 && d <= 40);
		seen_zero += d == 0;
		seen_top += d == 40;
	}
	assert_int_equal(seen_zero, 2);
	assert_int_equal(seen_top, 2);
	r = 0;
	assert_true(isc_http_backoff_ms(&p, &clock, 10) <= 40); /* capped, no overflow */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_err_set_and_wrap),
	    cmocka_unit_test(test_err_codes),
	    cmocka_unit_test(test_err_cut_on_character),
	    cmocka_unit_test(test_buf_cap),
	    cmocka_unit_test(test_suggest),
	    cmocka_unit_test(test_store_create_modes),
	    cmocka_unit_test(test_store_migrates_old_schema_in_place),
	    cmocka_unit_test(test_store_url_unreachable),
	    cmocka_unit_test(test_store_refuses_newer_schema),
	    cmocka_unit_test(test_store_nested_transactions),
	    cmocka_unit_test(test_store_orgs_projects_experiments),
	    cmocka_unit_test(test_http_refuses_header_injection),
	    cmocka_unit_test(test_http_retries_transient_then_succeeds),
	    cmocka_unit_test(test_http_does_not_retry_auth_or_client_errors),
	    cmocka_unit_test(test_http_gives_up_after_limit),
	    cmocka_unit_test(test_http_backoff_is_full_jitter),
	};
	return cmocka_run_group_tests_name("foundation", tests, NULL, NULL);
}
