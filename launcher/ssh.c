/* SSH sessions for the launcher (see ssh.h). */
#include "launcher/ssh.h"

#include "common/clock.h"
#include "launcher/pace.h"

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
	int64_t
	    login_at_ms; /* isc_monotonic_ms() when the login began (handshake, key check done) */
	int wake_fd;     /* readable once the caller's cancel is set; -1: none (ssh.h) */
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
	s->login_at_ms = isc_monotonic_ms();
	if (t->key_pem)
		/* No public key given: libssh2 derives it from the private one. */
		rc = libssh2_userauth_publickey_frommemory(s->session, t->user, strlen(t->user),
		                                           NULL, 0, t->key_pem, t->key_pem_len,
		                                           NULL);
	else
		rc = libssh2_userauth_publickey_fromfile(s->session, t->user, NULL, t->key_path,
		                                         NULL);
	if (rc != 0) {
		char *msg = NULL;
		libssh2_session_last_error(s->session, &msg, NULL, 0);
		/*
		 * Only the server's answer refuses a key. A node too loaded to answer in time,
		 * or a connection that dropped, says nothing about the key: retried as any
		 * silent node is (taken for a refusal, it sent bursts back to waiting).
		 */
		if (rc == LIBSSH2_ERROR_TIMEOUT || rc == LIBSSH2_ERROR_SOCKET_SEND ||
		    rc == LIBSSH2_ERROR_SOCKET_RECV || rc == LIBSSH2_ERROR_SOCKET_DISCONNECT ||
		    rc == LIBSSH2_ERROR_SOCKET_TIMEOUT)
			return isc_err_set(err, ISC_ETRANSIENT, "%s: no answer to the login (%s)",
			                   s->where, msg ? msg : "?");
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
	s->wake_fd = t->wake_fd ? *t->wake_fd : -1;
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

int64_t isc_ssh_login_started_ms(const struct isc_ssh *s)
{
	return s->login_at_ms;
}

const char *isc_ssh_hostkey_type(const struct isc_ssh *s)
{
	return s->key_type;
}

const char *isc_ssh_hostkey_sha256(const struct isc_ssh *s)
{
	return s->key_sha256;
}

struct isc_ssh_stream {
	struct isc_ssh *s;
	LIBSSH2_CHANNEL *ch;
	int64_t deadline_ms; /* whole command; INT64_MAX: none */
	long idle_ms;        /* no progress for this long ends it; 0: no limit */
	int64_t last_progress_ms;
	volatile int *cancel;
	int eof;             /* both output streams ended */
	int next_stream;     /* the stream read_any looks at first */
	char err_tail[1024]; /* the last bytes of the error stream (read_stdout) */
	size_t err_len;
	int paced;            /* isc_ssh_stream_pace was called: pace is judged */
	struct isc_pace pace; /* standard output read and input written (not stderr) */
};

/* ISC_ETRANSIENT when the command ran out of time or was cancelled, else 0. */
static int stream_expired(struct isc_ssh_stream *st, struct isc_err *err)
{
	int64_t now = isc_monotonic_ms();
	if (st->cancel && *st->cancel)
		return isc_err_set(err, ISC_ETRANSIENT, "%s: command cancelled", st->s->where);
	if (now > st->deadline_ms)
		return isc_err_set(err, ISC_ETRANSIENT, "%s: command timed out", st->s->where);
	if (st->idle_ms > 0 && now - st->last_progress_ms > st->idle_ms)
		return isc_err_set(err, ISC_ETRANSIENT, "%s: no progress for %ld ms", st->s->where,
		                   st->idle_ms);
	if (st->paced) {
		enum isc_pace_verdict v = isc_pace_check(&st->pace, now);
		if (v != ISC_PACE_OK) {
			char why[256];
			isc_pace_explain(&st->pace, v, now, why, sizeof(why));
			/* Not transient: a node this slow is not tried again (a push retries
			 * those). */
			return isc_err_set(err, ISC_EIO, "%s: transfer stopped: %s", st->s->where,
			                   why);
		}
	}
	return 0;
}

/* A wait that must notice a cancel on its own: the longest sleep between looks at it. */
#define POLL_LOOK_MS 100
/* With a wake descriptor: the longest sleep, so a clock step cannot strand a wait. */
#define POLL_WAKE_MAX_MS 5000

/*
 * Waits for the socket in the directions libssh2 is blocked on. Without a wake
 * descriptor (ssh.h) it looks again after POLL_LOOK_MS, to notice a cancel; with one,
 * it sleeps until the socket, the cancel or the stream's next deadline, whichever is
 * first. A paced stream looks every POLL_LOOK_MS: its pace is judged as time passes.
 */
static void stream_wait(struct isc_ssh_stream *st)
{
	struct pollfd p[2] = {{st->s->fd, 0, 0}, {st->s->wake_fd, POLLIN, 0}};
	int dir = libssh2_session_block_directions(st->s->session);
	int64_t ms = POLL_LOOK_MS;

	if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
		p[0].events |= POLLIN;
	if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
		p[0].events |= POLLOUT;
	if (!p[0].events)
		p[0].events = POLLIN;
	if (st->s->wake_fd >= 0 && !st->paced) {
		int64_t now = isc_monotonic_ms();
		ms = POLL_WAKE_MAX_MS;
		if (st->deadline_ms != INT64_MAX && st->deadline_ms - now + 1 < ms)
			ms = st->deadline_ms - now + 1;
		if (st->idle_ms > 0 && st->last_progress_ms + st->idle_ms - now + 1 < ms)
			ms = st->last_progress_ms + st->idle_ms - now + 1;
		if (ms < 1)
			ms = 1;
	}
	poll(p, st->s->wake_fd >= 0 ? 2 : 1, (int)ms);
}

void isc_ssh_stream_pace(struct isc_ssh_stream *st, const struct isc_pace_limits *lim)
{
	isc_pace_start(&st->pace, lim, isc_monotonic_ms());
	st->paced = 1;
}

static int stream_open(struct isc_ssh *s, const char *cmd, long timeout_ms, long idle_ms,
                       volatile int *cancel, int want_tty, int *got_tty,
                       struct isc_ssh_stream **out, struct isc_err *err)
{
	struct isc_ssh_stream *st = calloc(1, sizeof(*st));

	*out = NULL;
	if (!st)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	st->s = s;
	st->deadline_ms = timeout_ms > 0 ? isc_monotonic_ms() + timeout_ms : INT64_MAX;
	st->idle_ms = idle_ms;
	st->last_progress_ms = isc_monotonic_ms();
	st->cancel = cancel;
	libssh2_session_set_blocking(s->session, 1);
	libssh2_session_set_timeout(s->session,
	                            timeout_ms > 0 && timeout_ms < 30000 ? timeout_ms : 30000);
	st->ch = libssh2_channel_open_session(s->session);
	if (!st->ch) {
		free(st);
		return isc_err_set(err, ISC_ETRANSIENT, "%s: cannot open a channel", s->where);
	}
	/*
	 * A terminal of 160 columns, no echo. A refusal is not an error: the channel is
	 * still usable (RFC 4254 6.2, 5.4: a failed request leaves the channel open).
	 */
	if (want_tty) {
		static const char modes[] = {53 /* ECHO */, 0, 0, 0, 0, 0 /* TTY_OP_END */};
		*got_tty = libssh2_channel_request_pty_ex(st->ch, "vt100", 5, modes, sizeof(modes),
		                                          160, 40, 0, 0) == 0;
	}
	if (libssh2_channel_exec(st->ch, cmd) != 0) {
		libssh2_channel_free(st->ch);
		free(st);
		return isc_err_set(err, ISC_ETRANSIENT, "%s: cannot start a command", s->where);
	}
	/* From here every call polls, so deadlines, idle limits and cancels are noticed. */
	libssh2_session_set_blocking(s->session, 0);
	*out = st;
	return 0;
}

int isc_ssh_stream_open(struct isc_ssh *s, const char *cmd, long timeout_ms, long idle_ms,
                        volatile int *cancel, struct isc_ssh_stream **out, struct isc_err *err)
{
	return stream_open(s, cmd, timeout_ms, idle_ms, cancel, 0, NULL, out, err);
}

int isc_ssh_stream_open_tty(struct isc_ssh *s, const char *cmd, long timeout_ms, long idle_ms,
                            volatile int *cancel, int *got_tty, struct isc_ssh_stream **out,
                            struct isc_err *err)
{
	*got_tty = 0;
	return stream_open(s, cmd, timeout_ms, idle_ms, cancel, 1, got_tty, out, err);
}

ssize_t isc_ssh_stream_read_any(struct isc_ssh_stream *st, char *buf, size_t cap, int *stream_id,
                                struct isc_err *err)
{
	for (;;) {
		int rc = stream_expired(st, err);
		if (rc)
			return rc;
		for (int i = 0; i < 2; i++) {
			int id = (st->next_stream + i) % 2;
			ssize_t n = libssh2_channel_read_ex(st->ch, id, buf, cap);
			if (n > 0) {
				/* Drain a stream before looking at the other, as output arrives. */
				st->next_stream = id;
				st->last_progress_ms = isc_monotonic_ms();
				/* Only the data counts: a node cannot keep pace with its error
				 * stream. */
				if (id == 0)
					isc_pace_add(&st->pace, (uint64_t)n);
				*stream_id = id;
				return n;
			}
			if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
				return isc_err_set(err, ISC_ETRANSIENT, "%s: connection lost",
				                   st->s->where);
		}
		/* EOF counts only once both streams are drained. */
		if (libssh2_channel_eof(st->ch)) {
			st->eof = 1;
			return 0;
		}
		stream_wait(st);
	}
}

ssize_t isc_ssh_stream_read(struct isc_ssh_stream *st, char *buf, size_t cap, struct isc_err *err)
{
	for (;;) {
		int id = 0;
		ssize_t n = isc_ssh_stream_read_any(st, buf, cap, &id, err);
		if (n <= 0 || id == 0)
			return n;
		/* The error stream: only its tail is kept, for messages. */
		if ((size_t)n >= sizeof(st->err_tail)) {
			memcpy(st->err_tail, buf + n - (sizeof(st->err_tail) - 1),
			       sizeof(st->err_tail) - 1);
			st->err_len = sizeof(st->err_tail) - 1;
		} else {
			if (st->err_len + (size_t)n >= sizeof(st->err_tail)) {
				size_t drop = st->err_len + (size_t)n - (sizeof(st->err_tail) - 1);
				memmove(st->err_tail, st->err_tail + drop, st->err_len - drop);
				st->err_len -= drop;
			}
			memcpy(st->err_tail + st->err_len, buf, (size_t)n);
			st->err_len += (size_t)n;
		}
		st->err_tail[st->err_len] = '\0';
	}
}

const char *isc_ssh_stream_stderr(const struct isc_ssh_stream *st)
{
	return st->err_tail;
}

int isc_ssh_stream_write(struct isc_ssh_stream *st, const char *data, size_t len,
                         struct isc_err *err)
{
	for (size_t off = 0; off < len;) {
		ssize_t w = libssh2_channel_write(st->ch, data + off, len - off);
		int rc;
		if (w > 0) {
			off += (size_t)w;
			st->last_progress_ms = isc_monotonic_ms();
			isc_pace_add(&st->pace, (uint64_t)w);
			/* A node that takes every byte slowly never blocks for long: judged here
			 * too. */
			if ((rc = stream_expired(st, err)))
				return rc;
			continue;
		}
		if (w < 0 && w != LIBSSH2_ERROR_EAGAIN)
			return isc_err_set(err, ISC_ETRANSIENT, "%s: sending input failed",
			                   st->s->where);
		if ((rc = stream_expired(st, err)))
			return rc;
		stream_wait(st);
	}
	return 0;
}

int isc_ssh_stream_send_eof(struct isc_ssh_stream *st, struct isc_err *err)
{
	for (;;) {
		int r = libssh2_channel_send_eof(st->ch), rc;
		if (r == 0)
			return 0;
		if (r != LIBSSH2_ERROR_EAGAIN)
			return isc_err_set(err, ISC_ETRANSIENT, "%s: sending input failed",
			                   st->s->where);
		if ((rc = stream_expired(st, err)))
			return rc;
		stream_wait(st);
	}
}

/* The command's exit code; 128 + N when signal N ended it (libssh2 then reports 0). */
static int exit_code(LIBSSH2_SESSION *session, LIBSSH2_CHANNEL *ch)
{
	static const struct {
		const char *name;
		int number;
	} signals[] = {{"HUP", 1},   {"INT", 2},   {"QUIT", 3},  {"ABRT", 6}, {"KILL", 9},
	               {"SEGV", 11}, {"PIPE", 13}, {"ALRM", 14}, {"TERM", 15}};
	char *name = NULL;
	size_t len = 0;
	int code = 128;

	if (libssh2_channel_get_exit_signal(ch, &name, &len, NULL, NULL, NULL, NULL) != 0 || !name)
		return libssh2_channel_get_exit_status(ch);
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcmp(name, signals[i].name) == 0)
			code = 128 + signals[i].number;
	libssh2_free(session, name);
	return code;
}

void isc_ssh_stream_close(struct isc_ssh_stream *st, int *exit_status)
{
	if (exit_status)
		*exit_status = -1;
	if (!st)
		return;
	libssh2_session_set_blocking(st->s->session, 1);
	/* After a timeout, a cancel or an early stop the peer may be gone: no long goodbye. */
	libssh2_session_set_timeout(st->s->session, st->eof ? 30000 : 2000);
	if (st->eof) {
		libssh2_channel_close(st->ch);
		libssh2_channel_wait_closed(st->ch);
		if (exit_status)
			*exit_status = exit_code(st->s->session, st->ch);
	}
	libssh2_channel_free(st->ch);
	free(st);
}

int isc_ssh_exec(struct isc_ssh *s, const char *cmd, const char *stdin_data, size_t stdin_len,
                 long timeout_ms, isc_ssh_output_fn out, void *out_ctx, volatile int *cancel,
                 int *exit_status, struct isc_err *err)
{
	struct isc_ssh_stream *st;
	char buf[16384];
	int rc, id = 0;

	*exit_status = -1;
	if ((rc = isc_ssh_stream_open(s, cmd, timeout_ms, 0, cancel, &st, err)))
		return rc;
	if (stdin_data && stdin_len)
		rc = isc_ssh_stream_write(st, stdin_data, stdin_len, err);
	if (!rc)
		rc = isc_ssh_stream_send_eof(st, err);
	while (!rc) {
		ssize_t n = isc_ssh_stream_read_any(st, buf, sizeof(buf), &id, err);
		if (n < 0)
			rc = (int)n;
		else if (n == 0)
			break;
		else if (out)
			out(out_ctx, buf, (size_t)n, id);
	}
	isc_ssh_stream_close(st, rc ? NULL : exit_status);
	return rc;
}
