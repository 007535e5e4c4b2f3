/*
 * What the route files share: the call context every handler receives (who is
 * calling, the request, the reply being built), the reply helpers, and the
 * role checks. One route file per domain (api/routes_*.c) exports a table of
 * routes; api/routes.c lists the tables. docs/api.md, "Adding a route", says
 * how to add one.
 */
#ifndef ISC_API_API_INT_H
#define ISC_API_API_INT_H

#include "common/err.h"
#include "store/store.h"
#include "store/store_access.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define ISC_API_MAX_PARAMS 4

struct isc_config;
struct thread_state; /* the serving thread's connection and caches (api/server.c) */

struct isc_api_query_arg {
	char *key;
	char *value; /* NULL for "?key" without '=' */
};

struct isc_api_call {
	/* The request. */
	const char *method;                     /* "GET", "POST", "DELETE" */
	const char *path;                       /* "/v1/experiments/exp_0123" */
	const char *params[ISC_API_MAX_PARAMS]; /* the {} segments of the route's pattern */
	const char *body;                       /* NUL-terminated; "" when none */
	size_t body_len;
	void *conn; /* the server's connection (for isc_api_query); NULL off the server's threads */
	/* The query's arguments, copied for a slow call (conn is not read off its thread). */
	const struct isc_api_query_arg *query;
	size_t n_query;

	/* Who is calling. */
	int is_operator;      /* the OS user iscd runs as, or an operator token */
	int64_t user_id;      /* platform user (0 for the operator) */
	const char *user;     /* platform user name, or "operator" */
	const char *address;  /* "unix:uid=1001", "tcp:127.0.0.1:53122" */
	const char *token_id; /* the token used over TCP, NULL on the socket */

	/* Borrowed: this thread's store connection and the home folder. */
	struct isc_store *store;
	const char *home;
	struct thread_state *thread;

	/* The reply, filled by the reply helpers below. */
	int status;
	char *reply; /* owned */
	size_t reply_len;
	const char *content_type;
	struct {
		const char *name, *value;
	} headers[8];
	int n_headers;

	/* For the audit row written after every change (a non-GET call). */
	int64_t audit_org_id;
	char audit_target[160];

	/* The X-Isc-Next header of a listing with more pages (isc_api_page_next). */
	char next_cursor[320];
};

typedef void (*isc_api_handler)(struct isc_api_call *c);

/*
 * How long a route may take. A slow one may wait on the network (a cloud, S3, a
 * token endpoint, an SSH login) or on a long local operation: it runs on the
 * API's pool for slow calls (api/slow.h), never on a server thread, so the server
 * threads answer everyone else meanwhile (docs/api.md, "Slow calls").
 */
enum isc_api_pace { ISC_API_FAST = 0, ISC_API_SLOW = 1 };

struct isc_api_route {
	const char *method;
	const char *pattern; /* "/v1/experiments/{}/logs": {} matches one path segment */
	isc_api_handler handler;
	enum isc_api_pace pace; /* ISC_API_FAST when left out */
};

/* The route tables, one per domain; each ends with {NULL, NULL, NULL}. */
extern const struct isc_api_route isc_api_routes_access[];
extern const struct isc_api_route isc_api_routes_orgs[];
extern const struct isc_api_route isc_api_routes_experiments[];
extern const struct isc_api_route isc_api_routes_finance[];
extern const struct isc_api_route isc_api_routes_shapes[];
extern const struct isc_api_route isc_api_routes_keys[];
extern const struct isc_api_route isc_api_routes_catalog[];
extern const struct isc_api_route isc_api_routes_nodes[];
extern const struct isc_api_route isc_api_routes_check[];
extern const struct isc_api_route isc_api_routes_datasets[];
extern const struct isc_api_route isc_api_routes_metrics[];
/* Every table, NULL-terminated (api/routes.c). */
extern const struct isc_api_route *const isc_api_route_tables[];

/* A query-string argument, or NULL. */
const char *isc_api_query(struct isc_api_call *c, const char *key);

/* Replies: each sets status and body (and takes ownership where it says so). */
void isc_api_reply_json(struct isc_api_call *c, int status, json_t *steal);
void isc_api_reply_text(struct isc_api_call *c, int status, const char *content_type, char *steal,
                        size_t len);
void isc_api_reply_error(struct isc_api_call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The HTTP status for an isc_code: not_found 404, invalid 400, conflict 409, ... */
int isc_api_status_for(int code);
void isc_api_reply_err(struct isc_api_call *c, const struct isc_err *err);
/*
 * Adds a reply header. Name and value must outlive the call: literals or call-owned,
 * never a thread's own buffer in a slow route (its reply is sent by a server thread
 * after the slow-call thread has moved on).
 */
void isc_api_header(struct isc_api_call *c, const char *name, const char *value);

/* The body as a JSON object; on failure replies 400 and returns NULL. Caller decrefs. */
json_t *isc_api_body_object(struct isc_api_call *c);

/*
 * The caller's role in the org: the operator is treated as admin of every org.
 * Returns ISC_ROLE_NONE for a non-member (and on a store error, replied 500: check
 * c->status).
 */
enum isc_role isc_api_role(struct isc_api_call *c, int64_t org_id);
/*
 * The role check every route uses. `allowed` is a mask of roles (ISC_ROLE_ADMIN |
 * ISC_ROLE_FINANCE); the operator always passes. A caller who is not a member of
 * the org gets 404 with not_found_msg (the resource's existence is not revealed);
 * a member whose role is not allowed gets 403. Returns 1 when the call may go on.
 */
int isc_api_require_org_role(struct isc_api_call *c, int64_t org_id, unsigned allowed,
                             const char *not_found_msg);
/* Only the operator: others get 403. Returns 1 when the call may go on. */
int isc_api_require_operator(struct isc_api_call *c);
/*
 * Finds an org by name the way routes must: an org the caller cannot see is
 * answered 404 exactly like one that does not exist. Returns 1 when found
 * (out filled, caller cleans up), 0 when a reply was sent.
 */
int isc_api_find_org(struct isc_api_call *c, const char *name, struct isc_org *out);

/*
 * Pages of a listing (docs/api.md, "Pages"): ?limit=N (1..max, default def)
 * and ?after=CURSOR, the X-Isc-Next of the page before. A route reads at most
 * limit + 1 rows after the cursor in a stable order; if the extra row exists it
 * drops it and calls isc_api_page_next with the cursor of the page's last row.
 */
#define ISC_API_PAGE_DEFAULT 100
#define ISC_API_PAGE_MAX     1000
struct isc_api_page {
	size_t limit;      /* rows in this page */
	const char *after; /* the cursor as sent (the route parses it), NULL on the first page */
};
/* Reads ?limit= and ?after=; a bad limit is answered 400. Returns 1 to go on, 0 when replied. */
int isc_api_page_parse(struct isc_api_call *c, size_t def, size_t max, struct isc_api_page *out);
/* Says the listing goes on: the header X-Isc-Next: cursor (copied into the call). */
void isc_api_page_next(struct isc_api_call *c, const char *cursor);
/*
 * A cursor of names, "A/B/C": split into n parts at its first n - 1 slashes
 * (names before the last cannot hold one; the last may), the parts pointing
 * into buf (size bytes). Returns 1 when it has n parts, none empty; else
 * replies 400 and returns 0.
 */
int isc_api_page_cursor(struct isc_api_call *c, const char *after, size_t n, const char **parts,
                        char *buf, size_t size);
/* A cursor "MS.ID" (a time, then an id): 1 when it is one, else replies 400 and returns 0. */
int isc_api_page_cursor_ms_id(struct isc_api_call *c, const char *after, int64_t *ms,
                              const char **id);

/*
 * A thread's cache of listing replies: the reply (body and X-Isc-Next) of a
 * listing route for a key that names everything the reply depends on (the
 * route, the caller, the arguments), dropped as soon as the store changes
 * (api/server.c, thread_caches_check). Routes use isc_api_listing_cached and
 * isc_api_listing_keep (api/page.c).
 */
#define ISC_API_LISTINGS          4
#define ISC_API_LISTING_MAX_BYTES (1024 * 1024)
struct isc_api_listing_cache {
	struct {
		char *key;
		char *body;
		size_t len;
		char next[320];
	} e[ISC_API_LISTINGS];
	size_t next;
};
void isc_api_listing_cache_clear(struct isc_api_listing_cache *lc);
#define isc_api_listing_cache_cleanup isc_api_listing_cache_clear
/* This thread's listing cache, or NULL when nothing may be cached now. */
struct isc_api_listing_cache *isc_api_listings(struct isc_api_call *c);
/* Replies 200 with the kept reply for key and returns 1; 0 when there is none. */
int isc_api_listing_cached(struct isc_api_call *c, const char *key);
/* After the route replied: keeps a 200 reply (and its X-Isc-Next) under key. */
void isc_api_listing_keep(struct isc_api_call *c, const char *key);

/*
 * config.toml as this thread last parsed it, parsed again when the file
 * changes (borrowed for the call); NULL with err set when it cannot be read.
 */
const struct isc_config *isc_api_config(struct isc_api_call *c, struct isc_err *err);

/*
 * 1 when a secret may travel in this call's body: the Unix socket, or TCP from
 * 127.0.0.0/8 or ::1 (the TCP listener is plain HTTP; elsewhere it would be clear text).
 */
int isc_api_secret_transport_ok(const struct isc_api_call *c);

/*
 * This replica's metrics as Prometheus text (api/routes_metrics.c), or OpenMetrics
 * when openmetrics is 1: the store's counts (read with store, at most once a second),
 * the process's, and the rest. *out is the caller's (free()). 0 or ISC_ENOMEM.
 */
#define ISC_METRICS_CONTENT_TYPE     "text/plain; version=0.0.4; charset=utf-8"
#define ISC_OPENMETRICS_CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
int isc_api_metrics_text(struct isc_store *store, int openmetrics, char **out, size_t *len);

/* Sets what the audit row of this call names. */
void isc_api_audit_target(struct isc_api_call *c, int64_t org_id, const char *target);

#endif
