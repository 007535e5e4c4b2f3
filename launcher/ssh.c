/* SSH sessions for the launcher (see ssh.h). */
#include "launcher/ssh.h"

#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct isc_ssh {
	int fd;
	LIBSSH2_SESSION *session;
	char where[128];     /* "user@host:port", for messages */
	char key_type[32];   /* host key seen by the last handshake */
	char key_sha256[65]; /* its SHA-256, lowercase hex */
};

/* libssh2_init is not thread-safe: it runs once, whichever thread connects first. */
static pthread_once_t ssh_once = PTHREAD_ONCE_INIT;
/* Host-key checks run one at a time, so a caller's check need not lock (see ssh.h). */
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

static void ssh_init_once(void)
{
	libssh2_init(0);
}

/* A TCP connection within timeout_ms, or -1 with errno. */
static int tcp_connect(const char *host, int port, long timeout_ms)
{
	struct addrinfo hints = {0}, *res = NULL;
	char service[16];
	int fd = -1;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%d", port);
	if (getaddrinfo(host, service, &hints, &res) != 0 || !res) {
		errno = EHOSTUNREACH;
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
		struct pollfd p = {fd, POLLOUT, 0};
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (errno != EINPROGRESS || poll(&p, 1, (int)timeout_ms) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
			int saved = soerr ? soerr : (errno == EINPROGRESS ? ETIMEDOUT : errno);
			close(fd);
			fd = -1;
			errno = saved;
		}
	}
	freeaddrinfo(res);
	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

static void session_close(struct isc_ssh *s)
{
	if (s->session) {
		libssh2_session_set_blocking(s->session, 1);
		libssh2_session_set_timeout(s->session, 2000);
		libssh2_session_disconnect(s->session, "bye");
		libssh2_session_free(s->session);
		s->session = NULL;
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

void isc_ssh_free(struct isc_ssh *s)
{
	if (!s)
		return;
	session_close(s);
	free(s);
}

static const char *hostkey_type_name(int type)
{
	switch (type) {
	case LIBSSH2_HOSTKEY_TYPE_RSA:
		return "ssh-rsa";
	case LIBSSH2_HOSTKEY_TYPE_DSS:
		return "ssh-dss";
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
		return "ecdsa-sha2-nistp256";
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
		return "ecdsa-sha2-nistp384";
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
		return "ecdsa-sha2-nistp521";
	case LIBSSH2_HOSTKEY_TYPE_ED25519:
		return "ssh-ed25519";
	default:
		return "unknown";
	}
}

/* One attempt: TCP, handshake, host key, login. Returns 0, or an error (retryable = transient). */
static int attempt(struct isc_ssh *s, const struct isc_ssh_target *t, long timeout_ms,
                   isc_ssh_hostkey_fn check, void *check_ctx, struct isc_err *err)
{
	const char *hash;
	size_t key_len;
	int key_type, rc;
	char hex[65];

	s->fd = tcp_connect(t->host, t->port, timeout_ms);
	if (s->fd < 0)
		return isc_err_set(err, ISC_ETRANSIENT, "%s: %s", s->where, strerror(errno));
	s->session = libssh2_session_init();
	if (!s->session)
		return isc_err_set(err, ISC_ENOMEM, "%s: cannot create an SSH session", s->where);
	libssh2_session_set_blocking(s->session, 1);
	libssh2_session_set_timeout(s->session, timeout_ms);
	if (libssh2_session_handshake(s->session, s->fd) != 0)
		return isc_err_set(err, ISC_ETRANSIENT, "%s: SSH handshake failed", s->where);
	hash = libssh2_hostkey_hash(s->session, LIBSSH2_HOSTKEY_HASH_SHA256);
	if (!hash || !libssh2_session_hostkey(s->session, &key_len, &key_type))
		return isc_err_set(err, ISC_EAUTH, "%s: no host key", s->where);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)hash[i]);
	snprintf(s->key_type, sizeof(s->key_type), "%s", hostkey_type_name(key_type));
	snprintf(s->key_sha256, sizeof(s->key_sha256), "%s", hex);
	if (check) {
		char fallback[300];
		const char *target = t->pin_target;
		if (!target) {
			snprintf(fallback, sizeof(fallback), "%s:%d", t->host, t->port);
			target = fallback;
		}
		pthread_mutex_lock(&check_lock);
		rc = check(check_ctx, target, s->key_type, hex, err);
		pthread_mutex_unlock(&check_lock);
		if (rc) {
			if (rc == ISC_EAUTH)
				isc_err_wrap(err, "%s", s->where);
			return rc; /* only a transient failure of the check itself is retried */
		}
	}
	if (libssh2_userauth_publickey_fromfile(s->session, t->user, NULL, t->key_path, NULL) !=
	    0) {
		char *msg = NULL;
		libssh2_session_last_error(s->session, &msg, NULL, 0);
		return isc_err_set(err, ISC_EAUTH, "%s: login with the cluster key refused (%s)",
		                   s->where, msg ? msg : "?");
	}
	return 0;
}

int isc_ssh_connect(const struct isc_ssh_target *t, int64_t deadline_ms, isc_ssh_hostkey_fn check,
                    void *check_ctx, struct isc_ssh **out, struct isc_err *err)
{
	struct isc_ssh *s;
	int rc;

	pthread_once(&ssh_once, ssh_init_once);
	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	s->fd = -1;
	snprintf(s->where, sizeof(s->where), "%s@%s:%d", t->user, t->host, t->port);
	for (long backoff = 100;; backoff = backoff < 1000 ? backoff * 2 : 1000) {
		int64_t left = deadline_ms - isc_monotonic_ms();

		rc = attempt(s, t, left < 10000 ? (left > 200 ? left : 200) : 10000, check,
		             check_ctx, err);
		if (rc == 0) {
			*out = s;
			return 0;
		}
		session_close(s);
		/* A node that is still booting refuses or drops connections: retry until the
		 * deadline. */
		left = deadline_ms - isc_monotonic_ms();
		if (rc != ISC_ETRANSIENT || left <= 0 || (t->cancel && *t->cancel))
			break;
		/* Sleep in slices, so a cancel is noticed quickly. */
		for (long slept = 0; slept < backoff && slept < left && !(t->cancel && *t->cancel);
		     slept += 50)
			usleep(50 * 1000);
	}
	if (rc == ISC_ETRANSIENT)
		isc_err_wrap(err, "%s",
		             t->cancel && *t->cancel ? "connecting cancelled"
		                                     : "node unreachable before its deadline");
	free(s);
	return rc;
}

const char *isc_ssh_hostkey_type(const struct isc_ssh *s)
{
	return s->key_type;
}

const char *isc_ssh_hostkey_sha256(const struct isc_ssh *s)
{
	return s->key_sha256;
}

/* Waits for the socket in the directions libssh2 is blocked on, up to ms. */
static void wait_socket(struct isc_ssh *s, int ms)
{
	struct pollfd p = {s->fd, 0, 0};
	int dir = libssh2_session_block_directions(s->session);
	if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
		p.events |= POLLIN;
	if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
		p.events |= POLLOUT;
	if (!p.events)
		p.events = POLLIN;
	poll(&p, 1, ms);
}

int isc_ssh_exec(struct isc_ssh *s, const char *cmd, const char *stdin_data, size_t stdin_len,
                 long timeout_ms, isc_ssh_output_fn out, void *out_ctx, volatile int *cancel,
                 int *exit_status, struct isc_err *err)
{
	LIBSSH2_CHANNEL *ch;
	int64_t deadline = timeout_ms > 0 ? isc_monotonic_ms() + timeout_ms : INT64_MAX;
	char buf[16384];
	int rc = 0, eof = 0;

	*exit_status = -1;
	libssh2_session_set_blocking(s->session, 1);
	libssh2_session_set_timeout(s->session,
	                            timeout_ms > 0 && timeout_ms < 30000 ? timeout_ms : 30000);
	ch = libssh2_channel_open_session(s->session);
	if (!ch)
		return isc_err_set(err, ISC_ETRANSIENT, "%s: cannot open a channel", s->where);
	if (libssh2_channel_exec(ch, cmd) != 0) {
		libssh2_channel_free(ch);
		return isc_err_set(err, ISC_ETRANSIENT, "%s: cannot start a command", s->where);
	}
	for (size_t off = 0; stdin_data && off < stdin_len;) {
		ssize_t w = libssh2_channel_write(ch, stdin_data + off, stdin_len - off);
		if (w < 0) {
			libssh2_channel_free(ch);
			return isc_err_set(err, ISC_ETRANSIENT, "%s: sending input failed",
			                   s->where);
		}
		off += (size_t)w;
	}
	libssh2_channel_send_eof(ch);
	libssh2_session_set_blocking(s->session, 0);
	while (!eof) {
		int idle = 1;
		for (int stream = 0; stream < 2; stream++) {
			ssize_t n = libssh2_channel_read_ex(ch, stream, buf, sizeof(buf));
			if (n > 0) {
				idle = 0;
				if (out)
					out(out_ctx, buf, (size_t)n, stream);
				stream--; /* drain this stream before looking at the next */
			} else if (n < 0 && n != LIBSSH2_ERROR_EAGAIN) {
				rc = isc_err_set(err, ISC_ETRANSIENT, "%s: connection lost",
				                 s->where);
				eof = 1;
				break;
			}
		}
		/* EOF counts only once both streams are drained. */
		if (!eof && idle && libssh2_channel_eof(ch))
			eof = 1;
		if (!eof && ((cancel && *cancel) || isc_monotonic_ms() > deadline)) {
			rc = isc_err_set(err, ISC_ETRANSIENT, "%s: command %s", s->where,
			                 cancel && *cancel ? "cancelled" : "timed out");
			break;
		}
		if (!eof && idle)
			wait_socket(s, 100);
	}
	libssh2_session_set_blocking(s->session, 1);
	/* After a timeout or a cancel the peer may be gone: do not wait long to say goodbye. */
	libssh2_session_set_timeout(s->session, rc ? 2000 : 30000);
	if (!rc) {
		libssh2_channel_close(ch);
		libssh2_channel_wait_closed(ch);
		*exit_status = libssh2_channel_get_exit_status(ch);
	}
	libssh2_channel_free(ch);
	return rc;
}
