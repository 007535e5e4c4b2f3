/*
 * The guard of an API listener (api/guard.h), one rule a test, on socket pairs
 * (a cut connection's peer reads end of file) and a clock the test sets (the
 * deadline is checked with isc_api_guard_sweep; no thread, no sleeping):
 * an address past its limit is cut at once, others are not; a full table makes
 * room by cutting its oldest waiting connection, never an identified one, and
 * cuts the newcomer only when nobody else waits; the deadline cuts the waiting
 * ones past it whether or not they sent anything, and runs again from a
 * request's end.
 */
#include "api/guard.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct pair {
	int ours, peer;
	struct isc_api_guard_conn *c;
};

static void pair_open(struct isc_api_guard *g, struct pair *p, const char *ip, int64_t now)
{
	int fds[2];
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(40000)};

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	p->ours = fds[0];
	p->peer = fds[1];
	fcntl(p->peer, F_SETFL, O_NONBLOCK);
	if (ip)
		assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	p->c = isc_api_guard_open(g, p->ours, ip ? (struct sockaddr *)&sa : NULL, sizeof(sa), now);
	assert_non_null(p->c);
}

/* Whether the peer sees the connection ended (the guard shut it down). */
static int peer_sees_end(const struct pair *p)
{
	char ch;
	return read(p->peer, &ch, 1) == 0;
}

static void pair_close(struct isc_api_guard *g, struct pair *p)
{
	isc_api_guard_close(g, p->c);
	close(p->ours);
	close(p->peer);
}

static struct isc_api_guard *guard(unsigned max, unsigned per_ip, int64_t deadline_ms)
{
	struct isc_api_guard_limits lim = {max, per_ip, deadline_ms, 0};
	struct isc_api_guard *g = NULL;
	struct isc_err err;
	isc_err_clear(&err);
	assert_int_equal(isc_api_guard_new("test", &lim, &g, &err), 0);
	return g;
}

static void test_per_address(void **state)
{
	struct isc_api_guard *g = guard(100, 2, 10000);
	struct pair a[3], other, local;
	struct isc_api_guard_counts n;
	(void)state;

	for (int i = 0; i < 3; i++)
		pair_open(g, &a[i], "10.0.0.1", 0);
	pair_open(g, &other, "10.0.0.2", 0);
	pair_open(g, &local, NULL, 0); /* no address: no such limit */
	assert_false(peer_sees_end(&a[0]));
	assert_false(peer_sees_end(&a[1]));
	assert_true(peer_sees_end(&a[2]));
	assert_true(isc_api_guard_was_cut(g, a[2].c));
	assert_false(peer_sees_end(&other));
	assert_false(peer_sees_end(&local));
	isc_api_guard_counts(g, &n);
	assert_int_equal(n.refused_ip, 1);
	assert_int_equal(n.held, 4);
	/* One of the address's connections closes: the next from it is held. */
	pair_close(g, &a[0]);
	pair_close(g, &a[2]);
	pair_open(g, &a[0], "10.0.0.1", 0);
	assert_false(peer_sees_end(&a[0]));
	pair_close(g, &a[0]);
	pair_close(g, &a[1]);
	pair_close(g, &other);
	pair_close(g, &local);
	isc_api_guard_free(g);
}

static void test_full_cuts_oldest_waiting(void **state)
{
	struct isc_api_guard *g = guard(3, 0, 10000);
	struct pair p[5];
	struct isc_api_guard_counts n;
	(void)state;

	pair_open(g, &p[0], "10.0.0.1", 0);
	pair_open(g, &p[1], "10.0.0.2", 1);
	pair_open(g, &p[2], "10.0.0.3", 2);
	isc_api_guard_identified(g, p[0].c); /* the oldest is identified: spared */
	pair_open(g, &p[3], "10.0.0.4", 3);
	assert_false(peer_sees_end(&p[0]));
	assert_true(peer_sees_end(&p[1])); /* the oldest waiting one */
	assert_false(peer_sees_end(&p[2]));
	assert_false(peer_sees_end(&p[3]));
	isc_api_guard_counts(g, &n);
	assert_int_equal(n.evicted, 1);
	assert_int_equal(n.held, 3);
	assert_int_equal(n.waiting, 2);
	/* Everybody identified: the newcomer is the one cut. */
	isc_api_guard_identified(g, p[2].c);
	isc_api_guard_identified(g, p[3].c);
	pair_open(g, &p[4], "10.0.0.5", 4);
	assert_true(peer_sees_end(&p[4]));
	assert_false(peer_sees_end(&p[0]));
	assert_false(peer_sees_end(&p[2]));
	assert_false(peer_sees_end(&p[3]));
	isc_api_guard_counts(g, &n);
	assert_int_equal(n.refused_full, 1);
	assert_int_equal(n.held, 3);
	for (int i = 0; i < 5; i++)
		pair_close(g, &p[i]);
	isc_api_guard_counts(g, &n);
	assert_int_equal(n.held, 0);
	assert_int_equal(n.waiting, 0);
	isc_api_guard_free(g);
}

static void test_deadline(void **state)
{
	struct isc_api_guard *g = guard(100, 0, 4000);
	struct pair waiting, known, again;
	struct isc_api_guard_counts n;
	(void)state;

	pair_open(g, &waiting, "10.0.0.1", 1000);
	pair_open(g, &known, "10.0.0.2", 1000);
	pair_open(g, &again, "10.0.0.3", 1000);
	isc_api_guard_identified(g, known.c);
	isc_api_guard_identified(g, again.c);
	/* A request of `again` ends at 3000: it waits for the next one's headers from then. */
	isc_api_guard_request_done(g, again.c, 3000);
	/* The peer trickles: what it sends changes nothing. */
	assert_int_equal(write(waiting.peer, "X-A: b\r\n", 8), 8);
	assert_int_equal(isc_api_guard_sweep(g, 4999), 0);
	assert_false(peer_sees_end(&waiting));
	assert_int_equal(isc_api_guard_sweep(g, 5000), 1);
	assert_true(peer_sees_end(&waiting));
	assert_false(peer_sees_end(&known));
	assert_false(peer_sees_end(&again));
	assert_int_equal(isc_api_guard_sweep(g, 6999), 0);
	assert_int_equal(isc_api_guard_sweep(g, 7000), 1);
	assert_true(peer_sees_end(&again));
	/* An identified connection has no deadline, however long its request takes. */
	assert_int_equal(isc_api_guard_sweep(g, 1000000), 0);
	assert_false(peer_sees_end(&known));
	isc_api_guard_counts(g, &n);
	assert_int_equal(n.timed_out, 2);
	assert_int_equal(n.held, 1);
	assert_int_equal(n.waiting, 0);
	pair_close(g, &waiting);
	pair_close(g, &known);
	pair_close(g, &again);
	isc_api_guard_free(g);
}

static void test_bad_limits(void **state)
{
	struct isc_api_guard_limits lim = {0, 0, 1000, 0};
	struct isc_api_guard *g = NULL;
	struct isc_err err;
	(void)state;
	isc_err_clear(&err);
	assert_int_equal(isc_api_guard_new("tcp", &lim, &g, &err), ISC_EINVALID);
	assert_null(g);
	assert_non_null(strstr(err.msg, "tcp listener"));
}

/* With its thread: a waiting connection is cut without anyone calling sweep. */
static void test_thread_sweeps(void **state)
{
	struct isc_api_guard_limits lim = {10, 0, 100, 20};
	struct isc_api_guard *g = NULL;
	struct isc_err err;
	struct pair p;
	(void)state;
	isc_err_clear(&err);
	assert_int_equal(isc_api_guard_new("tcp", &lim, &g, &err), 0);
	pair_open(g, &p, "10.0.0.1", 0); /* opened "at 0": long past its deadline */
	for (int i = 0; i < 500 && !isc_api_guard_was_cut(g, p.c); i++)
		usleep(10000);
	assert_true(peer_sees_end(&p));
	pair_close(g, &p);
	isc_api_guard_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_per_address),   cmocka_unit_test(test_full_cuts_oldest_waiting),
	    cmocka_unit_test(test_deadline),      cmocka_unit_test(test_bad_limits),
	    cmocka_unit_test(test_thread_sweeps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
