/*
 * isc_onprem_probe without sshd: the reasons it gives for a node that does not
 * answer. A loopback port where nothing listens is "connection refused" at once;
 * a port that accepts connections but never speaks SSH is "no SSH server" once
 * the timeout has passed, and not much later. (Names that do not resolve, logins,
 * refused keys and host keys: tests/integration/pool.sh, whose name lookups happen
 * in a network namespace of their own, so no test asks a DNS server.)
 */
#include "common/clock.h"
#include "common/err.h"
#include "onprem/onprem.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A loopback TCP socket listening on a port of the kernel's choice; its port in *port. */
static int listener(int *port)
{
	struct sockaddr_in a = {0};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void test_connection_refused(void **state)
{
	struct isc_onprem_probe p = {.home = "/nonexistent", .host = "127.0.0.1", .user = "root"};
	int64_t t0;
	(void)state;

	/* A port that was listening a moment ago and is closed now: nothing listens there. */
	close(listener(&p.port));
	t0 = isc_monotonic_ms();
	assert_int_equal(isc_onprem_probe(&p), ISC_ETRANSIENT);
	assert_true(isc_monotonic_ms() - t0 < 1000);
	char want[128];
	snprintf(want, sizeof(want), "connection refused: nothing listens on 127.0.0.1 port %d",
	         p.port);
	assert_string_equal(p.reason, want);
	assert_string_equal(p.key_type, "");
}

static void test_not_ssh(void **state)
{
	struct isc_onprem_probe p = {
	    .home = "/nonexistent", .host = "127.0.0.1", .user = "root", .timeout_ms = 800};
	int fd = listener(&p.port); /* accepts (the backlog does) but never sends a banner */
	int64_t t0 = isc_monotonic_ms(), took;
	(void)state;

	assert_int_equal(isc_onprem_probe(&p), ISC_ETRANSIENT);
	took = isc_monotonic_ms() - t0;
	assert_true(took >= 700);
	assert_true(took < 3000);
	char want[160];
	snprintf(want, sizeof(want),
	         "no SSH server: 127.0.0.1 port %d accepts connections but no SSH handshake "
	         "completed within 800 ms",
	         p.port);
	assert_string_equal(p.reason, want);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connection_refused),
	    cmocka_unit_test(test_not_ssh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
