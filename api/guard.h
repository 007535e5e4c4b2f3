/*
 * The guard of one API listener (docs/api.md, "Limits"): which connections it
 * holds, and which of them have not yet shown a request from a known caller.
 * libmicrohttpd's own limits cannot stop a slowloris: its connection timeout
 * is an idle timeout (one header line every few seconds resets it), and a full
 * table refuses the next caller, however legitimate, while the trickling ones
 * stay. So the guard keeps, per listener:
 *
 * - a limit on connections from one IP address (TCP only: a Unix socket's
 *   peers have no address);
 * - a deadline for the connections still waiting: a connection that has not,
 *   within header_timeout_ms of its opening (or of the end of its previous
 *   request), delivered a request's headers from a caller it could identify is
 *   cut, however steadily it trickles;
 * - the connection limit, kept by cutting the oldest waiting connection to make
 *   room for a new one: a table full of waiting connections never locks out a
 *   caller who sends a whole request at once. Only when every connection is
 *   identified is the new one cut instead.
 *
 * The guard knows nothing of HTTP: it sees sockets. "Cutting" one is
 * shutdown(2) on it; its owner (libmicrohttpd) sees end of file, closes the
 * connection and calls isc_api_guard_close, which must come before the socket
 * is closed (libmicrohttpd's NOTIFY_CONNECTION CLOSED does), so the guard never
 * touches a socket number already reused. All under one mutex; a thread of its
 * own enforces the deadline.
 */
#ifndef ISC_API_GUARD_H
#define ISC_API_GUARD_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct isc_api_guard;
struct isc_api_guard_conn;

struct isc_api_guard_limits {
	unsigned max_conns;        /* connections held at once (>= 1) */
	unsigned per_ip;           /* from one IP address; 0: no such limit */
	int64_t header_timeout_ms; /* for a request from a known caller (>= 1) */
	int64_t sweep_ms;          /* how often the deadline is checked; 0: no thread (tests) */
};

/* What the guard did, for logs and tests. */
struct isc_api_guard_counts {
	size_t held;           /* connections held now, cut ones not counted */
	size_t waiting;        /* of those, not identified */
	uint64_t refused_ip;   /* cut at once: their address had per_ip already */
	uint64_t refused_full; /* cut at once: full, and nothing waiting to cut instead */
	uint64_t evicted;      /* waiting ones cut to make room for a new one */
	uint64_t timed_out;    /* cut at their deadline */
};

/* name ("tcp", "unix") names the listener in logs. */
int isc_api_guard_new(const char *name, const struct isc_api_guard_limits *limits,
                      struct isc_api_guard **out, struct isc_err *err);
/* Stops the deadline's thread and frees. Every connection must be closed. NULL is fine. */
void isc_api_guard_free(struct isc_api_guard *g);

/*
 * A new connection on socket fd from addr (NULL or AF_UNIX: no address), waiting
 * from now_ms (isc_monotonic_ms). Returns its handle, NULL when out of memory (the
 * socket is then cut). It may be cut at once (its address's limit, or the table is
 * full of identified ones); it is still held until isc_api_guard_close.
 */
struct isc_api_guard_conn *isc_api_guard_open(struct isc_api_guard *g, int fd,
                                              const struct sockaddr *addr, socklen_t addr_len,
                                              int64_t now_ms);
/* Its request's caller is known: no deadline until the request ends. */
void isc_api_guard_identified(struct isc_api_guard *g, struct isc_api_guard_conn *c);
/* Its request ended: it waits for the next request's headers, from now_ms. */
void isc_api_guard_request_done(struct isc_api_guard *g, struct isc_api_guard_conn *c,
                                int64_t now_ms);
/* The connection is closing (its socket still open): forgotten and freed. NULL is fine. */
void isc_api_guard_close(struct isc_api_guard *g, struct isc_api_guard_conn *c);
/* Cuts the waiting connections past their deadline at now_ms; returns how many. */
size_t isc_api_guard_sweep(struct isc_api_guard *g, int64_t now_ms);
/* Whether c was cut (for tests). */
int isc_api_guard_was_cut(struct isc_api_guard *g, const struct isc_api_guard_conn *c);
void isc_api_guard_counts(struct isc_api_guard *g, struct isc_api_guard_counts *out);

#endif
