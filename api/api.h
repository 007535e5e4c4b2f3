/*
 * iscd's JSON API (docs/api.md): an HTTP/1.1 server (libmicrohttpd) on a Unix
 * socket every local user can reach, and optionally on a TCP address. The
 * caller is the OS user of the connecting process on the socket (SO_PEERCRED)
 * or the owner of a bearer token over TCP; nobody is anonymous.
 *
 * Threads and the store: the server runs its own small pool of threads, and
 * each of them opens its own SQLite connection to the store on first use
 * (closed when the thread ends). The tick loop keeps its connection to itself,
 * so API work never runs on the tick's thread; SQLite's WAL lets API reads run
 * beside the tick's writes, and an API write holds the write lock only for its
 * own short transaction.
 *
 * Slow calls: a route that waits on a cloud, S3, an SSH login or a long local
 * operation runs on a separate small pool (api/slow.h), each of its threads with
 * its own store connection too, while its connection waits suspended; the server
 * threads only answer quick calls, so they can be one per core.
 */
#ifndef ISC_API_API_H
#define ISC_API_API_H

#include "common/err.h"

struct isc_api;

struct isc_api_options {
	const char *home;         /* the store's home */
	const char *socket_path;  /* Unix socket; its folder is made 0755, the socket 0666 */
	const char *listen;       /* "HOST:PORT" for TCP with bearer tokens, NULL or "": none */
	unsigned max_connections; /* concurrent connections, each listener its own; 0: 512 */
	unsigned timeout_s;       /* an idle or slow connection is closed after this */
	/* A connection that has not delivered a request's headers from a caller the
	 * server can identify within this, of its opening or of its previous
	 * request's end, is closed however steadily it trickles; 0: 10. */
	unsigned header_timeout_s;
	unsigned per_ip;  /* TCP connections from one IP address at once; 0: 32 */
	unsigned threads; /* server threads per listener; 0: isc_config_default_api_threads() */
	unsigned slow_threads; /* threads for slow calls, both listeners together; 0: 4 */
	unsigned slow_queue;   /* slow calls that may wait for one of them; 0: 64 */
	const char *web_root;  /* the Control Plane pages' folder (api/web.h); NULL: none */
	/* "HOST:PORT" serving GET /metrics without a token (docs/metrics.md); NULL or "": none */
	const char *metrics_listen;
};

/* Starts listening; the API answers from its own threads until isc_api_free. */
int isc_api_start(const struct isc_api_options *o, struct isc_api **out, struct isc_err *err);
/* Whether the TCP listener serves the Control Plane pages (their folder opened). */
int isc_api_pages_served(const struct isc_api *api);
/* The TCP port actually bound (useful with port 0), 0 without TCP. */
unsigned isc_api_tcp_port(const struct isc_api *api);
/* The metrics_listen port actually bound, 0 without one. */
unsigned isc_api_metrics_port(const struct isc_api *api);
/* Stops the listeners, waits for the threads, removes the socket. NULL is fine. */
void isc_api_free(struct isc_api *api);

#endif
