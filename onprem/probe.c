/*
 * Probing a pool node: does it answer an SSH login with the pool key, and if
 * not, why (see onprem.h). `isc nodes add` probes a node before it joins the
 * pool (api/routes_nodes.c); iscd probes every node on a period (onprem.c).
 *
 * The TCP connection is made here first, on its own, so the reason is exact
 * (no name, connection refused, timed out, no route) rather than read back
 * from a message; the login itself is the launcher's (launcher/ssh.c), with a
 * host-key check that tells a changed host key from a refused login.
 */
#include "onprem/onprem_int.h"

#include "common/clock.h"
#include "launcher/keys.h"
#include "launcher/ssh.h"
#include "store/store_hostkeys.h"
#include "store/store_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What the host-key callback saw, so a refusal can be told apart from a refused login. */
struct key_seen {
	const char *home; /* NULL: only read the key (the node has no pin yet) */
	char type[32], sha256[65];
	int refused; /* the key differs from the one pinned for the node */
};

static int key_check(void *ctx, const char *target, const char *key_type, const char *sha256_hex,
                     struct isc_err *err)
{
	struct key_seen *k = ctx;
	int rc = 0;

	snprintf(k->type, sizeof(k->type), "%s", key_type);
	snprintf(k->sha256, sizeof(k->sha256), "%s", sha256_hex);
	if (k->home)
		rc = isc_store_hostkey_check_home((void *)k->home, target, key_type, sha256_hex,
		                                  err);
	if (rc == ISC_EAUTH)
		k->refused = 1;
	return rc;
}

/*
 * One TCP connection to host:port within timeout_ms, closed at once: 0, or an
 * errno-like code (ETIMEDOUT when nothing answered in time), or -1 with *gai
 * set when the name does not resolve.
 */
static int tcp_reach(const char *host, int port, long timeout_ms, int *gai)
{
	struct addrinfo hints = {0}, *res = NULL;
	char service[16];
	int fd, rc = 0;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%d", port);
	*gai = getaddrinfo(host, service, &hints, &res);
	if (*gai != 0 || !res) {
		if (!*gai)
			*gai = EAI_NONAME;
		if (res)
			freeaddrinfo(res);
		return -1;
	}
	/* The address the launcher will use: its first. */
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = errno;
	} else if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
		struct pollfd p = {fd, POLLOUT, 0};
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (errno != EINPROGRESS)
			rc = errno;
		else if (poll(&p, 1, (int)timeout_ms) != 1)
			rc = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
			rc = errno;
		else
			rc = soerr;
	}
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return rc;
}

/*
 * What a job needs of a pool node, tried without changing anything there: root or
 * passwordless sudo (a boot cleans /mnt's artifact folders through it, which containers
 * running as root leave root's), the artifact folders under /mnt made and writable, and
 * docker answering this user. Every lack is printed, in the node's own words.
 */
static const char needs_script[] =
    "exec 2>&1; f=0; S=; "
    "if [ \"$(id -u)\" != 0 ]; then "
    "if sudo -n true; then S='sudo -n'; else "
    "echo \"user $(id -un) is not root and has no passwordless sudo\"; f=1; fi; fi; "
    "$S mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy && "
    "$S touch /mnt/checkpoints/.isc-check && $S rm -f /mnt/checkpoints/.isc-check || f=1; "
    "docker version >/dev/null || { echo \"docker does not run for $(id -un)\"; f=1; }; "
    "exit $f";

void onprem_words_add(void *ctx, const char *data, size_t len, int stderr_stream)
{
	struct onprem_words *w = ctx;
	(void)stderr_stream;
	for (size_t i = 0; i < len && w->len + 3 < sizeof(w->buf); i++) {
		if (data[i] == '\n') {
			w->line_ended = w->len > 0;
		} else if ((unsigned char)data[i] >= 0x20) {
			if (w->line_ended) {
				w->buf[w->len++] = ';';
				w->buf[w->len++] = ' ';
				w->line_ended = 0;
			}
			w->buf[w->len++] = data[i];
		}
	}
	w->buf[w->len] = '\0';
}

/* needs_script on a logged-in node: 0, or ISC_EINVALID with the words in p->reason. */
static int check_needs(struct isc_onprem_probe *p, struct isc_ssh *ssh)
{
	struct onprem_words w = {{0}, 0, 0};
	struct isc_err err;
	int status = -1;
	int rc = isc_ssh_exec(ssh, needs_script, NULL, 0, p->timeout_ms > 0 ? p->timeout_ms : 10000,
	                      onprem_words_add, &w, NULL, &status, &err);

	if (rc) {
		snprintf(p->reason, sizeof(p->reason), "checking what a job needs: %.400s",
		         err.msg);
		return rc;
	}
	if (status == 0)
		return 0;
	p->cannot_run = 1;
	snprintf(p->reason, sizeof(p->reason), "%s@%s:%d cannot run a job: %s", p->user, p->host,
	         p->port, w.len ? w.buf : "the check exited non-zero");
	return ISC_EINVALID;
}

int isc_onprem_probe(struct isc_onprem_probe *p)
{
	struct key_seen seen = {0};
	struct isc_ssh *ssh = NULL;
	struct isc_err err;
	char pin[40];
	char *key_path;
	int gai = 0, rc;
	int64_t start = isc_monotonic_ms();
	long timeout = p->timeout_ms > 0 ? p->timeout_ms : ISC_ONPREM_PROBE_MS;

	p->reason[0] = p->key_type[0] = p->key_sha256[0] = '\0';
	p->cannot_run = 0;
	rc = tcp_reach(p->host, p->port, timeout, &gai);
	if (rc == -1) {
		snprintf(p->reason, sizeof(p->reason), "cannot resolve %s: %s", p->host,
		         gai_strerror(gai));
		return ISC_ETRANSIENT;
	}
	if (rc == ECONNREFUSED) {
		snprintf(p->reason, sizeof(p->reason),
		         "connection refused: nothing listens on %s port %d", p->host, p->port);
		return ISC_ETRANSIENT;
	}
	if (rc == ETIMEDOUT) {
		snprintf(p->reason, sizeof(p->reason),
		         "timed out: %s port %d did not answer within %ld ms", p->host, p->port,
		         timeout);
		return ISC_ETRANSIENT;
	}
	if (rc) {
		snprintf(p->reason, sizeof(p->reason), "cannot connect to %s port %d: %s", p->host,
		         p->port, strerror(rc));
		return ISC_ETRANSIENT;
	}

	key_path = isc_cluster_key_path(p->home, ONPREM_POOL_KEY_ID);
	if (!key_path) {
		snprintf(p->reason, sizeof(p->reason), "out of memory");
		return ISC_ENOMEM;
	}
	snprintf(pin, sizeof(pin), ISC_POOL_PIN_FMT, (long long)p->node_id);
	seen.home = p->node_id > 0 ? p->home : NULL;
	{
		struct isc_ssh_target t = {p->host, p->port, p->user, key_path, pin, NULL};
		int64_t left = timeout - (isc_monotonic_ms() - start);
		rc = isc_ssh_connect(&t, isc_monotonic_ms() + (left > 500 ? left : 500), key_check,
		                     &seen, &ssh, &err);
	}
	if (rc == 0 && p->check_needs)
		rc = check_needs(p, ssh);
	isc_ssh_free(ssh);
	free(key_path);
	snprintf(p->key_type, sizeof(p->key_type), "%s", seen.type);
	snprintf(p->key_sha256, sizeof(p->key_sha256), "%s", seen.sha256);
	if (rc == 0 || p->reason[0])
		return rc;
	if (seen.refused)
		snprintf(p->reason, sizeof(p->reason), "host key mismatch: %.480s", err.msg);
	else if (rc == ISC_EAUTH && seen.type[0])
		snprintf(p->reason, sizeof(p->reason),
		         "authentication failed: %s@%s:%d refused the pool key (is the line of "
		         "`isc nodes pubkey` in its authorized_keys?)",
		         p->user, p->host, p->port);
	else if (!seen.type[0])
		snprintf(p->reason, sizeof(p->reason),
		         "no SSH server: %s port %d accepts connections but no SSH handshake "
		         "completed within %ld ms",
		         p->host, p->port, timeout);
	else
		snprintf(p->reason, sizeof(p->reason), "%s", err.msg);
	return rc;
}
