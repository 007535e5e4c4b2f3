/*
 * A small SSH client on libssh2 for the launcher: connect with a deadline
 * (retrying while a node boots), check the host key through a pinning
 * callback, log in with the cluster's key, and run commands with a timeout,
 * optional stdin, streamed output and the exit status. One session per
 * thread; sessions are not shared.
 */
#ifndef ISC_LAUNCHER_SSH_H
#define ISC_LAUNCHER_SSH_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct isc_ssh;

/*
 * Decides whether a host key is acceptable for target (an instance id or
 * "host:port"): 0 to accept, or an error (ISC_EAUTH for a changed key).
 * Called after the key exchange and before anything is sent to the node (no
 * login, no command), from whatever thread runs the session. The launcher
 * never runs two checks at once (one process-wide lock around every call), so
 * a callback may keep a small private state without locks of its own; it must
 * not share a SQLite handle with a thread that keeps using it meanwhile (the
 * broker opens a short connection per check, see docs/launcher.md).
 */
typedef int (*isc_ssh_hostkey_fn)(void *ctx, const char *target, const char *key_type,
                                  const char *sha256_hex, struct isc_err *err);

struct isc_ssh_target {
	const char *host; /* address to connect to */
	int port;
	const char *user;
	const char *key_path;   /* the private key file (the on-prem pool's); unused with key_pem */
	const char *pin_target; /* what the host key is pinned under; NULL: "host:port" */
	volatile int *cancel;   /* optional: stop retrying once it becomes non-zero */
	/*
	 * Optional: a descriptor that becomes readable when *cancel is set (the read end of
	 * a pipe the canceller writes to). With it, a command waiting for output sleeps
	 * until data, the cancel or its deadline, instead of waking every 100 ms to look
	 * at *cancel: thousands of idle log streams then cost nothing.
	 */
	const int *wake_fd;
	/*
	 * The private key itself (PEM, key_pem_len bytes), opened from the store (a burst's
	 * cluster key, launcher/keys.h): the login reads it from memory, and it is never
	 * written to disk. NULL: key_path.
	 */
	const char *key_pem;
	size_t key_pem_len;
};

/*
 * Connects and logs in. deadline_ms is on isc_monotonic_ms()'s clock: refused,
 * reset or silent connections (a node still booting) are retried with a short
 * backoff (100 ms doubling to 1 s) until then, and so is a login the node did
 * not answer in time; ISC_ETRANSIENT when the node never answered, ISC_EAUTH
 * for a refused host key or login (not retried).
 */
int isc_ssh_connect(const struct isc_ssh_target *t, int64_t deadline_ms, isc_ssh_hostkey_fn check,
                    void *check_ctx, struct isc_ssh **out, struct isc_err *err);
void isc_ssh_free(struct isc_ssh *s);

/* The host key the session saw: "ssh-ed25519" etc. and lowercase SHA-256 hex. Borrowed. */
const char *isc_ssh_hostkey_type(const struct isc_ssh *s);
const char *isc_ssh_hostkey_sha256(const struct isc_ssh *s);

/* isc_monotonic_ms() when the login began: the handshake and host-key check were done. */
int64_t isc_ssh_login_started_ms(const struct isc_ssh *s);

/* Receives output as it arrives (stderr = 1 for the error stream). */
typedef void (*isc_ssh_output_fn)(void *ctx, const char *data, size_t len, int stderr_stream);

/*
 * Runs cmd in the remote shell. stdin_data (may be NULL) is sent and then EOF.
 * Stops with ISC_ETRANSIENT after timeout_ms (0: none) or when *cancel becomes
 * non-zero. *exit_status gets the command's exit code (-1 if unknown).
 */
int isc_ssh_exec(struct isc_ssh *s, const char *cmd, const char *stdin_data, size_t stdin_len,
                 long timeout_ms, isc_ssh_output_fn out, void *out_ctx, volatile int *cancel,
                 int *exit_status, struct isc_err *err);

/*
 * A command as a pair of streams, for data too large to hold in memory (artifact
 * archives): the caller reads the command's output and writes its input in
 * pieces. timeout_ms bounds the whole command (0: none); idle_ms ends it when
 * no byte moved for that long (0: no limit); *cancel (may be NULL) stops it.
 * Those end a call with ISC_ETRANSIENT. One stream per session at a time.
 */
struct isc_ssh_stream;
int isc_ssh_stream_open(struct isc_ssh *s, const char *cmd, long timeout_ms, long idle_ms,
                        volatile int *cancel, struct isc_ssh_stream **out, struct isc_err *err);
/*
 * The same on a pseudo-terminal when the node grants one (*got_tty = 1): for a
 * program that reports its progress only to a terminal (docker pull prints no
 * progress to a pipe, only each layer's changes of state, so a large layer is
 * minutes of silence). Output and errors then come as one stream (stdout), with
 * the terminal's line ends and escapes; the command gets SIGHUP when the channel
 * closes. A node that refuses the terminal runs the command without one.
 */
int isc_ssh_stream_open_tty(struct isc_ssh *s, const char *cmd, long timeout_ms, long idle_ms,
                            volatile int *cancel, int *got_tty, struct isc_ssh_stream **out,
                            struct isc_err *err);
/*
 * Judges the stream's pace from now on (launcher/pace.h): a total deadline and a
 * minimum throughput of the standard output read plus the input written (the
 * error stream does not count). A stream that breaks them ends the next read or
 * write with ISC_EIO, "user@host:port: transfer stopped: <which limit>".
 */
struct isc_pace_limits;
void isc_ssh_stream_pace(struct isc_ssh_stream *st, const struct isc_pace_limits *lim);
/* Output of either stream (*stream_id 0: stdout, 1: stderr): bytes, 0 at the end, or an error. */
ssize_t isc_ssh_stream_read_any(struct isc_ssh_stream *st, char *buf, size_t cap, int *stream_id,
                                struct isc_err *err);
/* Standard output only; the error stream is drained meanwhile and its tail kept. */
ssize_t isc_ssh_stream_read(struct isc_ssh_stream *st, char *buf, size_t cap, struct isc_err *err);
/* The last KiB of the error stream seen by isc_ssh_stream_read (borrowed, "" if none). */
const char *isc_ssh_stream_stderr(const struct isc_ssh_stream *st);
int isc_ssh_stream_write(struct isc_ssh_stream *st, const char *data, size_t len,
                         struct isc_err *err);
int isc_ssh_stream_send_eof(struct isc_ssh_stream *st, struct isc_err *err);
/*
 * Frees the stream. When the output was read to its end, waits for the command
 * and gives its exit code; otherwise (stopped early) closes the channel at once
 * and *exit_status is -1.
 */
void isc_ssh_stream_close(struct isc_ssh_stream *st, int *exit_status);

#endif
