/*
 * The HTTP side of the API: listeners, who is calling, request bodies within
 * their caps, dispatch to the route tables, the audit row of every change, and
 * each server thread's own store connection (api/api.h says why).
 */
#include "api/api.h"
#include "api/api_int.h"
#include "api/guard.h"
#include "api/slow.h"
#include "api/web.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "config/config.h"
#include "store/store_access.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Launch files are at most 1 MiB; JSON bodies of the other routes are far smaller. */
#define BODY_MAX_BYTES (1024 * 1024 + 4096)

/* The pool for slow routes when the options leave it out (api/api.h). */
#define SLOW_THREADS_DEFAULT 4
#define SLOW_QUEUE_DEFAULT   64
/* What a refused slow call is told to wait before it asks again, in seconds. */
#define SLOW_RETRY_AFTER_S "5"

struct isc_api {
	char *home;
	char *socket_path;
	struct MHD_Daemon *unix_d;
	struct MHD_Daemon *tcp_d;
	struct MHD_Daemon *metrics_d; /* metrics_listen: GET /metrics only, no token */
	int unix_fd;
	uid_t operator_uid;
	char *operator_name;
	pthread_key_t store_key;
	int key_made;
	struct isc_web *web;       /* the Control Plane pages, served on TCP only */
	struct isc_api_slow *slow; /* runs the slow routes (api/slow.h) */
	struct isc_api_guard *unix_guard, *tcp_guard; /* api/guard.h */
};

/* One listener's flavour, the cls of its daemon. */
struct listener {
	struct isc_api *api;
	int is_unix;
	struct isc_api_guard *guard; /* its connections and their deadline (api/guard.h) */
};

static struct listener unix_listener, tcp_listener;

struct slow_call;

/*
 * Per request: the body as it arrives; a slow route's call while it is away; who
 * is calling, found as soon as the headers are in (on_request), so that a caller
 * the server can identify is free of the listener's deadline (api/guard.h) while
 * its body arrives, and one it cannot identify is not.
 */
struct request {
	char *body;
	size_t len, cap;
	int too_big;
	struct slow_call *slow; /* owned; see slow_call_new */
	int64_t start_us;       /* its headers came in (isc_api_request_duration_seconds) */
	int identified;         /* the fields below are the caller's */
	/* The thread whose caches were checked against the store then (identify_early). */
	struct thread_state *checked_by;
	int is_operator;
	int64_t user_id;
	const char *user, *token_id; /* NULL, "operator", or these buffers */
	char user_buf[128], addr_buf[96], tok_buf[64];
};

/*
 * Each server thread's own state: its store connection, and what it keeps
 * between requests to save the store and the disk work of every request. The
 * caches hold answers read from the store and are thrown away as soon as the
 * version they depend on differs from the one read, at the start of the
 * request, before they were filled: the tokens and roles on the store's auth
 * version (bumped, by triggers, only in the transactions that write tokens,
 * memberships, users or organisations), the listings on the store's version
 * (anything committed by anyone). So a revoked token, a removed member or a new
 * experiment is seen by the next request that starts after the change committed,
 * on this replica or another of the store, and the commits of running bursts no
 * longer cost every call its token and role (issue 49; docs/security.md, "The
 * API's caches"). No cache is shared between threads: no locks.
 */
#define TOKEN_CACHE 16
#define ROLE_CACHE  64

struct cached_token {
	char id[40];
	char hash_hex[2 * SHA256_DIGEST_LENGTH + 1];
	int64_t user_id; /* 0: the operator */
	char user[128];
	int64_t expires_at_ms;
	int64_t revoked_at_ms;
};

struct cached_role {
	int64_t user_id, org_id;
	enum isc_role role;
};

struct thread_state {
	struct isc_store *store;
	/* What the caches below were read at; valid says they may be used. */
	struct isc_store_version version;
	int valid;
	struct cached_token tokens[TOKEN_CACHE];
	size_t n_tokens, next_token;
	struct cached_role roles[ROLE_CACHE];
	size_t n_roles, next_role;
	/* config.toml as last parsed, and the file's identity then (reparsed when it changes). */
	struct isc_config *cfg;
	struct stat cfg_st;
	int cfg_exists;
	struct isc_api_listing_cache listings;
};

static void thread_release(void *p)
{
	struct thread_state *t = p;
	isc_api_listing_cache_cleanup(&t->listings);
	isc_config_free(t->cfg);
	isc_store_free(t->store);
	free(t);
}

/* This thread's state and store connection, made on first use. */
static struct thread_state *thread_state(struct isc_api *api, struct isc_err *err)
{
	struct thread_state *t = pthread_getspecific(api->store_key);
	if (t)
		return t;
	if (!(t = calloc(1, sizeof(*t)))) {
		isc_err_set(err, ISC_ENOMEM, "out of memory");
		return NULL;
	}
	/* Only this thread uses it: no mutex on each SQLite call. */
	if (isc_store_open_unshared(api->home, &t->store, err)) {
		free(t);
		return NULL;
	}
	pthread_setspecific(api->store_key, t);
	return t;
}

/*
 * Called at the start of every request: drops the caches when the store
 * changed since they were filled. A failure to read the version drops them too.
 */
static void thread_caches_check(struct thread_state *t)
{
	struct isc_store_version v = {0};
	struct isc_err err;
	int known;

	isc_err_clear(&err);
	known = isc_store_version(t->store, &v, &err) == 0;
	if (!known || !t->valid || v.auth != t->version.auth) {
		t->n_tokens = t->next_token = 0;
		t->n_roles = t->next_role = 0;
	}
	if (!known || !t->valid || v.others != t->version.others || v.own != t->version.own)
		isc_api_listing_cache_clear(&t->listings);
	t->version = v;
	t->valid = known;
}

/* 1 when this thread's caches may be read and filled now (the store's version is known). */
static int caches_usable(const struct isc_api_call *c)
{
	return c->thread && c->thread->valid;
}

const struct isc_config *isc_api_config(struct isc_api_call *c, struct isc_err *err)
{
	struct thread_state *t = c->thread;
	struct stat st;
	char path[4096];
	int exists;

	snprintf(path, sizeof(path), "%s/config.toml", c->home);
	exists = stat(path, &st) == 0;
	if (t->cfg && exists == t->cfg_exists &&
	    (!exists || (st.st_ino == t->cfg_st.st_ino && st.st_size == t->cfg_st.st_size &&
	                 st.st_mtim.tv_sec == t->cfg_st.st_mtim.tv_sec &&
	                 st.st_mtim.tv_nsec == t->cfg_st.st_mtim.tv_nsec)))
		return t->cfg;
	isc_config_free(t->cfg);
	t->cfg = NULL;
	if (isc_config_load(c->home, &t->cfg, err))
		return NULL;
	t->cfg_exists = exists;
	if (exists)
		t->cfg_st = st;
	return t->cfg;
}

struct isc_api_listing_cache *isc_api_listings(struct isc_api_call *c)
{
	return caches_usable(c) ? &c->thread->listings : NULL;
}

/* ---- reply helpers (api/api_int.h) ---- */

const char *isc_api_query(struct isc_api_call *c, const char *key)
{
	/* A slow call reads its own copy: the connection belongs to the server's threads. */
	if (c->query || !c->conn) {
		for (size_t i = 0; i < c->n_query; i++)
			if (strcmp(c->query[i].key, key) == 0)
				return c->query[i].value;
		return NULL;
	}
	return MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, key);
}

void isc_api_reply_text(struct isc_api_call *c, int status, const char *content_type, char *steal,
                        size_t len)
{
	free(c->reply);
	c->status = status;
	c->reply = steal;
	c->reply_len = len;
	c->content_type = content_type;
}

void isc_api_reply_json(struct isc_api_call *c, int status, json_t *steal)
{
	/* Compact: a listing is read by programs (isc prints its own layout); ?pretty=1 for
	 * people with curl. */
	const char *pretty = c->conn || c->query ? isc_api_query(c, "pretty") : NULL;
	size_t flags = pretty && strcmp(pretty, "0") != 0 ? JSON_INDENT(2) : JSON_COMPACT;
	char *text = steal ? json_dumps(steal, flags | JSON_PRESERVE_ORDER) : NULL;
	char *line = NULL;
	json_decref(steal);
	/* A final newline, so `curl` output ends its line. */
	if (!text || asprintf(&line, "%s\n", text) < 0) {
		free(text);
		isc_api_reply_text(c, 500, "application/json", NULL, 0);
		return;
	}
	free(text);
	isc_api_reply_text(c, status, "application/json", line, strlen(line));
}

static const char *status_code_name(int status)
{
	switch (status) {
	case 400:
		return "invalid";
	case 401:
		return "unauthenticated";
	case 402:
		return "credits";
	case 403:
		return "forbidden";
	case 404:
		return "not_found";
	case 405:
		return "method_not_allowed";
	case 409:
		return "conflict";
	case 413:
		return "too_large";
	default:
		return status >= 500 ? "internal" : "error";
	}
}

void isc_api_reply_error(struct isc_api_call *c, int status, const char *fmt, ...)
{
	char msg[ISC_ERR_MSG_MAX];
	va_list ap;
	json_t *text;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* JSON strings must be UTF-8. A message cut to its size may end inside a character:
	 * that partial character goes. One quoting bytes that are no UTF-8 at all gets '?' for
	 * them, rather than losing the whole message. */
	isc_utf8_trim_partial(msg);
	if (!(text = json_string(msg))) {
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		text = json_string(msg);
	}
	isc_api_reply_json(c, status,
	                   json_pack("{s:o,s:s}", "error", text, "code", status_code_name(status)));
	c->status = status;
}

int isc_api_status_for(int code)
{
	switch (code) {
	case ISC_EINVALID:
		return 400;
	case ISC_ENOTFOUND:
		return 404;
	case ISC_ECONFLICT:
		return 409;
	case ISC_ECREDITS:
		return 402;
	case ISC_EAUTH:
		return 403;
	case ISC_ETHROTTLED:
		return 429;
	case ISC_ETRANSIENT:
	case ISC_ESTORE:
		return 503;
	default:
		return 500;
	}
}

void isc_api_reply_err(struct isc_api_call *c, const struct isc_err *err)
{
	isc_api_reply_error(c, isc_api_status_for(err->code), "%s",
	                    err->msg[0] ? err->msg : isc_code_name(err->code));
}

void isc_api_header(struct isc_api_call *c, const char *name, const char *value)
{
	if (c->n_headers < (int)(sizeof(c->headers) / sizeof(c->headers[0]))) {
		c->headers[c->n_headers].name = name;
		c->headers[c->n_headers].value = value;
		c->n_headers++;
	}
}

json_t *isc_api_body_object(struct isc_api_call *c)
{
	json_error_t jerr;
	json_t *o = json_loadb(c->body, c->body_len, 0, &jerr);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		isc_api_reply_error(c, 400, "the request body is not a JSON object%s%s",
		                    o ? "" : ": ", o ? "" : jerr.text);
		return NULL;
	}
	return o;
}

void isc_api_audit_target(struct isc_api_call *c, int64_t org_id, const char *target)
{
	if (org_id)
		c->audit_org_id = org_id;
	if (target)
		snprintf(c->audit_target, sizeof(c->audit_target), "%s", target);
}

int isc_api_secret_transport_ok(const struct isc_api_call *c)
{
	return !c->token_id || strncmp(c->address, "tcp:127.", 8) == 0 ||
	       strncmp(c->address, "tcp:[::1]:", 10) == 0;
}

/* ---- roles ---- */

enum isc_role isc_api_role(struct isc_api_call *c, int64_t org_id)
{
	enum isc_role r = ISC_ROLE_NONE;
	struct isc_err err;
	struct thread_state *t = c->thread;
	if (c->is_operator)
		return ISC_ROLE_ADMIN;
	if (caches_usable(c))
		for (size_t i = 0; i < t->n_roles; i++)
			if (t->roles[i].user_id == c->user_id && t->roles[i].org_id == org_id)
				return t->roles[i].role;
	isc_err_clear(&err);
	isc_log(ISC_LOG_DEBUG, "api: role of user %lld in org %lld read from the store",
	        (long long)c->user_id, (long long)org_id);
	if (isc_store_member_role(c->store, c->user_id, org_id, &r, &err)) {
		isc_api_reply_err(c, &err);
		return ISC_ROLE_NONE;
	}
	if (caches_usable(c)) {
		struct cached_role *e = &t->roles[t->next_role];
		e->user_id = c->user_id;
		e->org_id = org_id;
		e->role = r;
		t->next_role = (t->next_role + 1) % ROLE_CACHE;
		if (t->n_roles < ROLE_CACHE)
			t->n_roles++;
	}
	return r;
}

int isc_api_require_org_role(struct isc_api_call *c, int64_t org_id, unsigned allowed,
                             const char *not_found_msg)
{
	enum isc_role r;
	if (c->is_operator)
		return 1;
	r = isc_api_role(c, org_id);
	if (c->status >= 500)
		return 0;
	if (r == ISC_ROLE_NONE) {
		isc_api_reply_error(c, 404, "%s", not_found_msg);
		return 0;
	}
	if (!(r & allowed)) {
		isc_api_reply_error(c, 403,
		                    "your role in this organisation (%s) does not allow this",
		                    isc_role_name(r));
		return 0;
	}
	return 1;
}

int isc_api_require_operator(struct isc_api_call *c)
{
	if (c->is_operator)
		return 1;
	isc_api_reply_error(c, 403, "only the platform operator may do this");
	return 0;
}

int isc_api_find_org(struct isc_api_call *c, const char *name, struct isc_org *out)
{
	struct isc_err err;
	isc_err_clear(&err);
	if (isc_store_org_find(c->store, name, out, &err)) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	if (!c->is_operator && isc_api_role(c, out->id) == ISC_ROLE_NONE) {
		isc_org_cleanup(out);
		if (c->status < 500)
			isc_api_reply_error(c, 404, "no organisation named '%s'", name);
		return 0;
	}
	return 1;
}

/* ---- identity ---- */

/* The caller on the Unix socket: the peer's uid, the operator or a platform user. */
static int identify_unix(struct isc_api *api, struct MHD_Connection *conn, struct isc_api_call *c,
                         char *user_buf, size_t user_cap, char *addr_buf, size_t addr_cap)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct passwd pw, *found = NULL;
	char pwbuf[4096];
	struct isc_user u;
	struct isc_err err;

	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		isc_api_reply_error(c, 401, "cannot tell who is calling (no peer credentials)");
		return 0;
	}
	snprintf(addr_buf, addr_cap, "unix:uid=%ld", (long)cred.uid);
	c->address = addr_buf;
	if (cred.uid == api->operator_uid) {
		c->is_operator = 1;
		c->user = "operator";
		return 1;
	}
	if (getpwuid_r(cred.uid, &pw, pwbuf, sizeof(pwbuf), &found) != 0 || !found) {
		isc_api_reply_error(c, 401, "uid %ld has no OS user name, so no platform user",
		                    (long)cred.uid);
		return 0;
	}
	isc_err_clear(&err);
	if (isc_store_user_find(c->store, found->pw_name, &u, &err)) {
		if (err.code == ISC_ENOTFOUND)
			isc_api_reply_error(
			    c, 401,
			    "the OS user '%s' is not a platform user; ask the operator "
			    "to run: isc user add %s",
			    found->pw_name, found->pw_name);
		else
			isc_api_reply_err(c, &err);
		return 0;
	}
	snprintf(user_buf, user_cap, "%s", u.name);
	c->user = user_buf;
	c->user_id = u.id;
	isc_user_cleanup(&u);
	return 1;
}

/*
 * The token row of id: from this thread's cache while the store is unchanged,
 * else from the store (and then cached). ISC_ENOTFOUND for an unknown id (not
 * cached: a token created meanwhile changes the store anyway).
 */
static int token_lookup(struct isc_api_call *c, const char *id, struct cached_token *out,
                        struct isc_err *err)
{
	struct thread_state *t = c->thread;
	struct isc_token row = {0};
	int rc;

	if (caches_usable(c))
		for (size_t i = 0; i < t->n_tokens; i++)
			if (strcmp(t->tokens[i].id, id) == 0) {
				*out = t->tokens[i];
				return 0;
			}
	/* At debug level, so tests/integration/api-cache.sh can count the store's reads. */
	isc_log(ISC_LOG_DEBUG, "api: token %s read from the store", id);
	if ((rc = isc_store_token_get(c->store, id, &row, err)))
		return rc;
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", row.id);
	snprintf(out->hash_hex, sizeof(out->hash_hex), "%s", row.hash_hex ? row.hash_hex : "");
	snprintf(out->user, sizeof(out->user), "%s", row.user_name ? row.user_name : "");
	out->user_id = row.user_id;
	out->expires_at_ms = row.expires_at_ms;
	out->revoked_at_ms = row.revoked_at_ms;
	/* A row that does not fit the cache's fields (never made by iscd) is not kept. */
	if (caches_usable(c) && strcmp(out->id, row.id) == 0 &&
	    strlen(row.hash_hex ? row.hash_hex : "") < sizeof(out->hash_hex)) {
		t->tokens[t->next_token] = *out;
		t->next_token = (t->next_token + 1) % TOKEN_CACHE;
		if (t->n_tokens < TOKEN_CACHE)
			t->n_tokens++;
	}
	isc_token_cleanup(&row);
	return 0;
}

/*
 * The caller over TCP: "Authorization: Bearer tok_<16 hex>.<64 hex>". The id
 * finds the row; the secret's SHA-256 is compared in constant time. Every
 * refusal before the hash matched says the same thing.
 */
static int identify_token(struct MHD_Connection *conn, struct isc_api_call *c, char *user_buf,
                          size_t user_cap, char *addr_buf, size_t addr_cap, char *tok_buf,
                          size_t tok_cap)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	const char *dot;
	unsigned char digest[SHA256_DIGEST_LENGTH];
	char hex[2 * SHA256_DIGEST_LENGTH + 1], id[64];
	struct cached_token t;
	struct isc_err err;
	int64_t now = isc_wall_ms();
	int ok;

	addr_buf[0] = 0;
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ci->client_addr;
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(addr_buf, addr_cap, "tcp:%s:%u", ip, ntohs(in->sin_port));
	} else if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in = (const struct sockaddr_in6 *)ci->client_addr;
		char ip[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, &in->sin6_addr, ip, sizeof(ip));
		snprintf(addr_buf, addr_cap, "tcp:[%s]:%u", ip, ntohs(in->sin6_port));
	} else {
		snprintf(addr_buf, addr_cap, "tcp:?");
	}
	c->address = addr_buf;
	if (!auth || strncmp(auth, "Bearer ", 7) != 0) {
		isc_api_reply_error(c, 401, "a bearer token is required (isc token create)");
		return 0;
	}
	auth += 7;
	dot = strchr(auth, '.');
	if (!dot || (size_t)(dot - auth) >= sizeof(id) || strlen(dot + 1) != 64) {
		isc_api_reply_error(c, 401, "invalid token");
		return 0;
	}
	memcpy(id, auth, (size_t)(dot - auth));
	id[dot - auth] = 0;
	SHA256((const unsigned char *)dot + 1, 64, digest);
	/* By hand: 32 snprintf calls were a tenth of a cached request's CPU. */
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		hex[2 * i] = "0123456789abcdef"[digest[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[digest[i] & 15];
	}
	hex[2 * SHA256_DIGEST_LENGTH] = 0;
	isc_err_clear(&err);
	if (token_lookup(c, id, &t, &err)) {
		if (err.code != ISC_ENOTFOUND) {
			isc_api_reply_err(c, &err);
			return 0;
		}
		/* Compare anyway, so an unknown id costs what a wrong secret does. */
		CRYPTO_memcmp(
		    hex, "0000000000000000000000000000000000000000000000000000000000000000", 64);
		isc_api_reply_error(c, 401, "invalid token");
		return 0;
	}
	ok = strlen(t.hash_hex) == 64 && CRYPTO_memcmp(hex, t.hash_hex, 64) == 0;
	if (!ok)
		isc_api_reply_error(c, 401, "invalid token");
	else if (t.revoked_at_ms)
		isc_api_reply_error(c, 401, "token %s was revoked", t.id);
	else if (t.expires_at_ms && t.expires_at_ms <= now)
		isc_api_reply_error(c, 401, "token %s has expired", t.id);
	ok = ok && !t.revoked_at_ms && !(t.expires_at_ms && t.expires_at_ms <= now);
	if (ok) {
		snprintf(tok_buf, tok_cap, "%s", t.id);
		c->token_id = tok_buf;
		if (t.user_id == 0) {
			c->is_operator = 1;
			c->user = "operator";
		} else {
			snprintf(user_buf, user_cap, "%s", t.user);
			c->user = user_buf;
			c->user_id = t.user_id;
		}
	}
	OPENSSL_cleanse(&t, sizeof(t));
	return ok;
}

/* ---- dispatch ---- */

/* Matches path against pattern; fills params with copies into seg_buf. */
static int route_match(const char *pattern, const char *path, const char **params, char *seg_buf,
                       size_t seg_cap)
{
	size_t used = 0;
	int np = 0;

	while (*pattern && *path) {
		if (pattern[0] == '{' && pattern[1] == '}') {
			size_t len = strcspn(path, "/");
			if (len == 0 || np >= ISC_API_MAX_PARAMS || used + len + 1 > seg_cap)
				return 0;
			memcpy(seg_buf + used, path, len);
			seg_buf[used + len] = 0;
			params[np++] = seg_buf + used;
			used += len + 1;
			path += len;
			pattern += 2;
			continue;
		}
		if (*pattern != *path)
			return 0;
		pattern++;
		path++;
	}
	return *pattern == 0 && *path == 0;
}

/*
 * The route of the call's method and path, its {} segments copied into segs
 * and pointed to by c->params; NULL when none (404 or 405 replied).
 */
static const struct isc_api_route *route_find(struct isc_api_call *c, char *segs, size_t seg_cap)
{
	int path_known = 0;

	for (const struct isc_api_route *const *t = isc_api_route_tables; *t; t++) {
		for (const struct isc_api_route *r = *t; r->method; r++) {
			const char *params[ISC_API_MAX_PARAMS] = {0};
			if (!route_match(r->pattern, c->path, params, segs, seg_cap))
				continue;
			path_known = 1;
			if (strcmp(r->method, c->method) != 0)
				continue;
			memcpy(c->params, params, sizeof(params));
			return r;
		}
	}
	if (path_known)
		isc_api_reply_error(c, 405, "%s is not allowed on %s", c->method, c->path);
	else
		isc_api_reply_error(c, 404, "no route %s", c->path);
	return NULL;
}

static void route_run(struct isc_api_call *c, const struct isc_api_route *r)
{
	r->handler(c);
	if (!c->status)
		isc_api_reply_error(c, 500, "the route gave no answer");
}

/* Whether the method changes something: such calls are audited, refused or not. */
static int is_change(const char *method)
{
	return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

static void write_audit(struct isc_api_call *c)
{
	struct isc_audit a = {0};
	struct isc_err err;
	char action[200];

	snprintf(action, sizeof(action), "%s %s", c->method, c->path);
	a.actor = (char *)(c->user ? c->user : "-");
	a.address = (char *)(c->address ? c->address : "-");
	a.org_id = c->audit_org_id;
	a.action = action;
	a.target = c->audit_target;
	a.status = c->status;
	isc_err_clear(&err);
	if (isc_store_audit_add(c->store, &a, &err))
		isc_log(ISC_LOG_ERROR, "api: the audit row of %s could not be written: %s", action,
		        err.msg);
}

static void add_headers(struct MHD_Response *resp, const char *const *pairs)
{
	for (; pairs[0]; pairs += 2)
		MHD_add_response_header(resp, pairs[0], pairs[1]);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct isc_api_call *c, int is_tcp)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(c->reply_len, c->reply, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(c->reply);
		c->reply = NULL;
		return MHD_NO;
	}
	c->reply = NULL;
	MHD_add_response_header(resp, "Content-Type",
	                        c->content_type ? c->content_type : "application/json");
	for (int i = 0; i < c->n_headers; i++)
		MHD_add_response_header(resp, c->headers[i].name, c->headers[i].value);
	/* A browser may reach the TCP listener: its replies are data, never a page. */
	if (is_tcp)
		add_headers(resp, isc_web_api_headers);
	ret = MHD_queue_response(conn, (unsigned)c->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ---- slow calls (api/slow.h) ---- */

/*
 * A slow route's call. The server thread's frame is gone while the route runs
 * on a pool thread, so the call owns everything the route reads: method, path,
 * body, the {} segments, the query's arguments, who is calling. Made by
 * slow_call_new on a server thread, which suspends the connection; the pool
 * runs it and hands it back (slow_finish resumes the connection); the server
 * thread that takes the connection up again sends the reply and frees it
 * (slow_call_free), or on_completed does when the client went away.
 */
struct slow_call {
	struct isc_api_slow_job job; /* first: the pool's handle on it */
	struct isc_api_call c;
	struct isc_api *api;
	const struct isc_api_route *route;
	struct MHD_Connection *conn;
	int is_tcp;
	int answered; /* c holds the reply: send it at the connection's next turn */
	char *method, *path, *body;
	struct isc_api_query_arg *query;
	size_t n_query, cap_query;
	int query_failed;
	char segs[512];
	char user[128], address[96], token_id[64];
};

static void slow_call_free(struct slow_call *sc)
{
	if (!sc)
		return;
	for (size_t i = 0; i < sc->n_query; i++) {
		free(sc->query[i].key);
		free(sc->query[i].value);
	}
	free(sc->query);
	/* The body may have held a secret the route did not wipe (a refused call). */
	if (sc->body)
		OPENSSL_cleanse(sc->body, sc->c.body_len);
	free(sc->body);
	free(sc->method);
	free(sc->path);
	free(sc->c.reply);
	free(sc);
}

static enum MHD_Result copy_query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
	struct slow_call *sc = cls;
	struct isc_api_query_arg *a;
	(void)kind;
	if (sc->n_query == sc->cap_query) {
		size_t cap = sc->cap_query ? 2 * sc->cap_query : 8;
		struct isc_api_query_arg *grown = realloc(sc->query, cap * sizeof(*grown));
		if (!grown) {
			sc->query_failed = 1;
			return MHD_NO;
		}
		sc->query = grown;
		sc->cap_query = cap;
	}
	a = &sc->query[sc->n_query];
	a->key = strdup(key ? key : "");
	a->value = value ? strdup(value) : NULL;
	if (!a->key || (value && !a->value)) {
		free(a->key);
		free(a->value);
		sc->query_failed = 1;
		return MHD_NO;
	}
	sc->n_query++;
	return MHD_YES;
}

static void slow_run(struct isc_api_slow_job *job);
static void slow_finish(struct isc_api_slow_job *job, int ran);
static void slow_job_free(struct isc_api_slow_job *job);

/*
 * The call c (identified, its route r found) as a slow call that owns all it
 * reads; the request's body moves into it. NULL when out of memory.
 */
static struct slow_call *slow_call_new(struct isc_api *api, struct MHD_Connection *conn,
                                       struct request *req, const struct isc_api_call *c,
                                       const struct isc_api_route *r, int is_tcp)
{
	struct slow_call *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return NULL;
	sc->job.run = slow_run;
	sc->job.finish = slow_finish;
	sc->job.free = slow_job_free;
	sc->api = api;
	sc->route = r;
	sc->conn = conn;
	sc->is_tcp = is_tcp;
	sc->method = strdup(c->method);
	sc->path = strdup(c->path);
	if (req->body) {
		sc->body = req->body; /* NUL-terminated by the caller */
		req->body = NULL;
		req->len = req->cap = 0;
	} else {
		sc->body = strdup("");
	}
	sc->c.body_len = c->body_len;
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, copy_query_arg, sc);
	if (!sc->method || !sc->path || !sc->body || sc->query_failed) {
		slow_call_free(sc);
		return NULL;
	}
	sc->c.method = sc->method;
	sc->c.path = sc->path;
	sc->c.body = sc->body;
	sc->c.query = sc->query;
	sc->c.n_query = sc->n_query;
	/* The same route as found by the server thread: its {} segments, now in the call. */
	route_match(r->pattern, sc->path, sc->c.params, sc->segs, sizeof(sc->segs));
	sc->c.home = api->home;
	sc->c.is_operator = c->is_operator;
	sc->c.user_id = c->user_id;
	if (c->user) {
		snprintf(sc->user, sizeof(sc->user), "%s", c->user);
		sc->c.user = sc->user;
	}
	if (c->address) {
		snprintf(sc->address, sizeof(sc->address), "%s", c->address);
		sc->c.address = sc->address;
	}
	if (c->token_id) {
		snprintf(sc->token_id, sizeof(sc->token_id), "%s", c->token_id);
		sc->c.token_id = sc->token_id;
	}
	return sc;
}

static struct slow_call *slow_of(struct isc_api_slow_job *job)
{
	return (struct slow_call *)((char *)job - offsetof(struct slow_call, job));
}

/* On a pool thread: the route, on the thread's own store connection, and its audit row. */
static void slow_run(struct isc_api_slow_job *job)
{
	struct slow_call *sc = slow_of(job);
	struct isc_api_call *c = &sc->c;
	struct isc_err err;

	isc_err_clear(&err);
	c->thread = thread_state(sc->api, &err);
	if (c->thread) {
		c->store = c->thread->store;
		thread_caches_check(c->thread);
	}
	if (!c->store) {
		isc_log(ISC_LOG_ERROR, "api: %s", err.msg);
		isc_api_reply_error(c, 503, "the store cannot be opened");
	} else {
		route_run(c, sc->route);
		if (is_change(c->method))
			write_audit(c);
	}
	isc_log(ISC_LOG_DEBUG, "api: %s %s -> %d (%s, %s; slow)", c->method, c->path, c->status,
	        c->user ? c->user : "-", c->address ? c->address : "-");
	/* Borrowed from this thread: not for the server thread that sends the reply. */
	c->thread = NULL;
	c->store = NULL;
}

/* A slow call that did not run: 503 with why and when to ask again. */
static void slow_refused(struct slow_call *sc, const struct isc_err *why)
{
	struct isc_api_call *c = &sc->c;
	isc_api_reply_json(c, 503,
	                   json_pack("{s:s,s:s}", "error", why->msg, "code",
	                             why->code == ISC_ETHROTTLED ? "busy" : "unavailable"));
	isc_api_header(c, "Retry-After", SLOW_RETRY_AFTER_S);
}

/* The pool hands the call back: the server takes the connection up again. */
static void slow_finish(struct isc_api_slow_job *job, int ran)
{
	struct slow_call *sc = slow_of(job);
	struct MHD_Connection *conn = sc->conn;

	if (!ran) {
		struct isc_err err;
		isc_err_set(&err, ISC_ETRANSIENT, "iscd is shutting down: %s %s was not run",
		            sc->c.method, sc->c.path);
		slow_refused(sc, &err);
	}
	sc->answered = 1;
	/* The last touch: once resumed, a server thread owns the call. */
	MHD_resume_connection(conn);
}

static void slow_job_free(struct isc_api_slow_job *job)
{
	slow_call_free(slow_of(job));
}

/*
 * Sends the identified call c of the slow route r to the pool and suspends its
 * connection; the reply is sent when the connection is resumed (on_request).
 */
static enum MHD_Result slow_start(struct isc_api *api, struct MHD_Connection *conn,
                                  struct request *req, struct isc_api_call *c,
                                  const struct isc_api_route *r, int is_tcp)
{
	struct slow_call *sc = slow_call_new(api, conn, req, c, r, is_tcp);
	struct isc_err err;

	if (!sc) {
		isc_api_reply_error(c, 500, "out of memory");
		return send_reply(conn, c, is_tcp);
	}
	req->slow = sc;
	/* Suspended before it is queued: a pool thread may resume it at once. */
	MHD_suspend_connection(conn);
	isc_err_clear(&err);
	if (isc_api_slow_submit(api->slow, &sc->job, &err)) {
		isc_log(ISC_LOG_WARN, "api: %s %s refused: %s", sc->c.method, sc->c.path, err.msg);
		slow_refused(sc, &err);
		/* A refused change is audited like any other (this thread's store). */
		if (is_change(sc->c.method)) {
			sc->c.store = c->store;
			write_audit(&sc->c);
			sc->c.store = NULL;
		}
		sc->answered = 1;
		MHD_resume_connection(conn);
	} else {
		isc_log(ISC_LOG_DEBUG, "api: %s %s queued for a slow-call thread", sc->c.method,
		        sc->c.path);
	}
	return MHD_YES;
}

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/*
 * Percent-decoding of the path and query arguments, in place, as libmicrohttpd's
 * own except that "%00" stays as it is: a decoded NUL would cut a C string
 * short, so "/app.js%00.html" would be read as "/app.js" and a query value would
 * lose its tail without anyone noticing.
 */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	char *w = s;
	(void)cls;
	(void)conn;
	for (const char *r = s; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = hex_value(r[1])) >= 0 && (lo = hex_value(r[2])) >= 0 &&
		    (hi | lo) != 0) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return (size_t)(w - s);
}

static enum MHD_Result send_page(struct MHD_Connection *conn, const struct isc_web *web,
                                 const char *url)
{
	struct isc_web_reply r;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	isc_web_get(web, url, &r);
	resp = MHD_create_response_from_buffer(r.len, r.body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(r.body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", r.content_type);
	add_headers(resp, isc_web_page_headers);
	ret = MHD_queue_response(conn, (unsigned)r.status, resp);
	MHD_destroy_response(resp);
	isc_log(ISC_LOG_DEBUG, "web: GET %s -> %d", url, r.status);
	return ret;
}

/* The guard's handle on conn (on_connection), NULL if it has none. */
static struct isc_api_guard_conn *guard_conn(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* Whether the TCP listener serves url as a page: no identification (send_page). */
static int is_page(const struct listener *l, const char *url, const char *method)
{
	return !l->is_unix && strncmp(url, "/v1/", 4) != 0 && strcmp(url, "/v1") != 0 &&
	       strcmp(url, "/metrics") != 0 &&
	       (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0);
}

/*
 * Identifies the caller as soon as the request's headers are in, before its body:
 * an identified caller's connection is free of the listener's deadline until the
 * request ends (api/guard.h). A caller who cannot be identified is answered once
 * the whole request is in, as before, by identifying again; until then its
 * connection stays under the deadline, so nobody unknown can hold one open by
 * trickling a body.
 */
static void identify_early(struct listener *l, struct MHD_Connection *conn, struct request *req)
{
	struct isc_api_call c;
	struct isc_err err;
	int ok;

	memset(&c, 0, sizeof(c));
	c.conn = conn;
	c.home = l->api->home;
	isc_err_clear(&err);
	c.thread = thread_state(l->api, &err);
	if (!c.thread)
		return; /* the request's end answers 503 */
	c.store = c.thread->store;
	thread_caches_check(c.thread);
	req->checked_by = c.thread;
	ok = l->is_unix
	         ? identify_unix(l->api, conn, &c, req->user_buf, sizeof(req->user_buf),
	                         req->addr_buf, sizeof(req->addr_buf))
	         : identify_token(conn, &c, req->user_buf, sizeof(req->user_buf), req->addr_buf,
	                          sizeof(req->addr_buf), req->tok_buf, sizeof(req->tok_buf));
	free(c.reply);
	if (!ok)
		return;
	req->identified = 1;
	req->is_operator = c.is_operator;
	req->user_id = c.user_id;
	req->user = c.user;
	req->token_id = c.token_id;
	isc_api_guard_identified(l->guard, guard_conn(conn));
}

/*
 * The request's time in isc_api_request_duration_seconds, by the route's pattern
 * (never the path: it holds ids) and its method; a request that matched no route
 * (or was answered before: unidentified, store down) is "unmatched", so an unknown
 * method or path adds no series.
 */
static void observe_request(const struct request *req, const struct isc_api_route *r, int status)
{
	char code[16];

	snprintf(code, sizeof(code), "%d", status);
	isc_metric_observe(ISC_M_API_REQUEST_DURATION,
	                   ISC_LABELS(r ? r->method : "other", r ? r->pattern : "unmatched", code),
	                   (double)(isc_monotonic_us() - req->start_us) / 1e6);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	struct listener *l = cls;
	struct isc_api *api = l->api;
	struct request *req = *con_cls;
	const struct isc_api_route *r = NULL;
	struct isc_api_call c;
	struct isc_err err;
	char user_buf[128], addr_buf[96], tok_buf[64];
	int identified;
	enum MHD_Result ret;
	(void)version;

	if (!req) {
		const char *cl =
		    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		*con_cls = req;
		req->start_us = isc_monotonic_us();
		if (cl && strtoull(cl, NULL, 10) > BODY_MAX_BYTES)
			req->too_big = 1;
		if (!is_page(l, url, method))
			identify_early(l, conn, req);
		return MHD_YES;
	}
	if (req->slow) {
		/* Resumed: the slow call's reply is ready (slow_finish, slow_start). */
		struct slow_call *sc = req->slow;
		if (!sc->answered)
			return MHD_YES; /* not ours to answer yet */
		req->slow = NULL;
		observe_request(req, sc->route, sc->c.status);
		ret = send_reply(conn, &sc->c, sc->is_tcp);
		slow_call_free(sc);
		return ret;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (req->too_big || req->len + n > BODY_MAX_BYTES) {
			req->too_big = 1;
			return MHD_YES;
		}
		if (req->len + n + 1 > req->cap) {
			size_t cap = req->cap ? req->cap : 4096;
			char *grown;
			while (cap < req->len + n + 1)
				cap *= 2;
			if (!(grown = realloc(req->body, cap)))
				return MHD_NO;
			req->body = grown;
			req->cap = cap;
		}
		memcpy(req->body + req->len, upload_data, n);
		req->len += n;
		return MHD_YES;
	}

	/*
	 * The pages are public files (they hold no data; every datum comes from the
	 * API with the token), so they are served before and without identification.
	 */
	if (is_page(l, url, method))
		return send_page(conn, api->web, url);

	memset(&c, 0, sizeof(c));
	c.method = method;
	c.path = url;
	c.body = req->body ? req->body : "";
	if (req->body)
		req->body[req->len] = 0;
	c.body_len = req->len;
	c.conn = conn;
	c.home = api->home;
	isc_err_clear(&err);
	c.thread = thread_state(api, &err);
	if (c.thread) {
		c.store = c.thread->store;
		/* Checked when the headers came in, on this thread: the request started then. */
		if (c.thread != req->checked_by)
			thread_caches_check(c.thread);
	}
	if (!c.store) {
		isc_log(ISC_LOG_ERROR, "api: %s", err.msg);
		isc_api_reply_error(&c, 503, "the store cannot be opened");
		observe_request(req, NULL, c.status);
		return send_reply(conn, &c, !l->is_unix);
	}
	if (req->identified) {
		identified = 1;
		c.is_operator = req->is_operator;
		c.user_id = req->user_id;
		c.user = req->user;
		c.token_id = req->token_id;
		c.address = req->addr_buf;
	} else {
		identified = l->is_unix
		                 ? identify_unix(api, conn, &c, user_buf, sizeof(user_buf),
		                                 addr_buf, sizeof(addr_buf))
		                 : identify_token(conn, &c, user_buf, sizeof(user_buf), addr_buf,
		                                  sizeof(addr_buf), tok_buf, sizeof(tok_buf));
	}
	if (identified) {
		char segs[512];
		if (req->too_big)
			isc_api_reply_error(&c, 413, "the request body is larger than %d bytes",
			                    BODY_MAX_BYTES);
		else if ((r = route_find(&c, segs, sizeof(segs))) && r->pace == ISC_API_SLOW &&
		         api->slow)
			return slow_start(api, conn, req, &c, r, !l->is_unix);
		else if (r)
			route_run(&c, r);
		if (is_change(method))
			write_audit(&c);
	}
	isc_log(ISC_LOG_DEBUG, "api: %s %s -> %d (%s, %s)", method, url, c.status,
	        c.user ? c.user : "-", c.address ? c.address : "-");
	observe_request(req, r, c.status);
	ret = send_reply(conn, &c, !l->is_unix);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct listener *l = cls;
	struct request *req = *con_cls;
	(void)toe;
	/* The connection waits for its next request's headers: the deadline runs again. */
	isc_api_guard_request_done(l->guard, guard_conn(conn), isc_monotonic_ms());
	if (req) {
		/*
		 * The client went away with a slow call unanswered (it hung up, or the
		 * reply could not be sent after the call was resumed). A call the pool
		 * still holds is freed by the pool once run; one handed back is ours.
		 */
		if (req->slow && !isc_api_slow_abandon(l->api->slow, &req->slow->job))
			slow_call_free(req->slow);
		req->slow = NULL;
		free(req->body);
		free(req);
		*con_cls = NULL;
	}
}

/*
 * Every connection of a listener is its guard's (api/guard.h) from its opening to
 * its close. libmicrohttpd calls CLOSED before it closes the socket, so the guard
 * never shuts down a socket number already given to another connection.
 */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
	struct listener *l = cls;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd =
		    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ad =
		    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		const struct sockaddr *sa = ad ? ad->client_addr : NULL;
		socklen_t len = !sa                         ? 0
		                : sa->sa_family == AF_INET  ? (socklen_t)sizeof(struct sockaddr_in)
		                : sa->sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
		                                            : 0;
		*socket_context =
		    isc_api_guard_open(l->guard, fd ? fd->connect_fd : -1, l->is_unix ? NULL : sa,
		                       len, isc_monotonic_ms());
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		isc_api_guard_close(l->guard, *socket_context);
		*socket_context = NULL;
	}
}

/*
 * libmicrohttpd's own limit of a listener, above the guard's: the guard keeps the
 * count (it makes room by cutting a waiting connection), and the connections it
 * cut are still libmicrohttpd's until their close, a moment later. libmicrohttpd
 * also splits its limit between its threads, which need not fill evenly.
 */
static unsigned mhd_limit(unsigned limit)
{
	return limit + limit / 2 + 16;
}

/*
 * Raises the soft limit of open files to what the listeners may hold, within the
 * hard limit: a soft limit of 1024 (common for services) is below two listeners'
 * worth, and a refused accept() would stall a listener rather than cut anyone.
 */
static void files_enough(unsigned per_listener)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)2 * mhd_limit(per_listener) + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
		isc_log(ISC_LOG_WARN,
		        "api: iscd may open %llu files, fewer than its listeners may need "
		        "(%llu for api_max_connections = %u); raise its limit (ulimit -n)",
		        (unsigned long long)rl.rlim_cur, (unsigned long long)want, per_listener);
}

/* Makes the folder of the socket (0755, so every local user can reach the socket). */
static int socket_folder(const char *path, struct isc_err *err)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return isc_err_set(err, ISC_EIO, "cannot make %s: %s", dir, strerror(errno));
	if (stat(dir, &st) == 0 && st.st_uid == geteuid())
		chmod(dir, 0755);
	return 0;
}

static int listen_unix(struct isc_api *api, const char *path, struct isc_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return isc_err_set(err, ISC_EINVALID,
		                   "api socket path '%s' is longer than %zu bytes", path,
		                   sizeof(sa.sun_path) - 1);
	if ((rc = socket_folder(path, err)))
		return rc;
	strcpy(sa.sun_path, path);
	/* A socket left by a daemon that died: iscd.lock says no other iscd owns it. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return isc_err_set(err, ISC_EIO, "socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0666) != 0 ||
	    listen(fd, 512) != 0) {
		rc = isc_err_set(err, ISC_EIO, "cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	api->unix_fd = fd;
	return 0;
}

static int parse_listen(const char *key, const char *text, struct sockaddr_in *out,
                        struct isc_err *err)
{
	char host[64];
	const char *colon = strrchr(text, ':');
	char *end;
	long port;

	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (!colon || (size_t)(colon - text) >= sizeof(host))
		return isc_err_set(err, ISC_EINVALID, "%s '%s' is not HOST:PORT", key, text);
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = 0;
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return isc_err_set(err, ISC_EINVALID, "%s '%s' is not an IPv4 address and a port",
		                   key, text);
	out->sin_port = htons((uint16_t)port);
	return 0;
}

/* ---- metrics_listen ---- */

/*
 * The metrics listener: GET /metrics and nothing else, without a token (Prometheus
 * scrapes so), on an address the operator keeps to the scraper. One thread: a
 * scrape every few seconds from one or two scrapers. Its store connection is its
 * thread's, as the API threads' are.
 */
static enum MHD_Result on_metrics_request(void *cls, struct MHD_Connection *conn, const char *url,
                                          const char *method, const char *version,
                                          const char *upload_data, size_t *upload_data_size,
                                          void **con_cls)
{
	struct isc_api *api = cls;
	struct MHD_Response *resp;
	struct isc_err err;
	struct thread_state *ts;
	enum MHD_Result ret;
	const char *type = "text/plain; charset=utf-8";
	char *text = NULL;
	size_t len = 0;
	unsigned status = 200;
	(void)version;
	(void)upload_data;

	if (!*con_cls) {
		*con_cls = (void *)1; /* the headers are in: wait for the (ignored) body */
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (strcmp(url, "/metrics") != 0) {
		status = 404;
		text = strdup("only /metrics is served here\n");
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		status = 405;
		text = strdup("only GET /metrics is served here\n");
	} else {
		isc_err_clear(&err);
		ts = thread_state(api, &err);
		if (!ts || !ts->store)
			isc_log(ISC_LOG_WARN, "metrics: the store: %s", err.msg);
		/* Prometheus asks for OpenMetrics first (its Accept header): it gets it. */
		const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
		int om = accept && strstr(accept, "application/openmetrics-text") != NULL;
		if (isc_api_metrics_text(ts ? ts->store : NULL, om, &text, &len) == 0)
			type = om ? ISC_OPENMETRICS_CONTENT_TYPE : ISC_METRICS_CONTENT_TYPE;
		else
			status = 500, text = strdup("out of memory\n");
	}
	if (!text)
		return MHD_NO;
	if (status != 200)
		len = strlen(text);
	resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", type);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void on_metrics_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                                 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	*con_cls = NULL;
}

static int metrics_start(struct isc_api *api, const char *listen, struct isc_err *err)
{
	struct sockaddr_in sa;
	int rc;

	if ((rc = parse_listen("metrics_listen", listen, &sa, err)))
		return rc;
	api->metrics_d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	    on_metrics_request, api, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT, 32U,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, 8U, MHD_OPTION_CONNECTION_TIMEOUT, 10U,
	    MHD_OPTION_NOTIFY_COMPLETED, on_metrics_completed, NULL, MHD_OPTION_END);
	if (!api->metrics_d)
		return isc_err_set(err, ISC_EIO, "the metrics listener could not listen on %s",
		                   listen);
	return 0;
}

unsigned isc_api_metrics_port(const struct isc_api *api)
{
	const union MHD_DaemonInfo *di;
	if (!api || !api->metrics_d)
		return 0;
	di = MHD_get_daemon_info(api->metrics_d, MHD_DAEMON_INFO_BIND_PORT);
	return di ? di->port : 0;
}

int isc_api_start(const struct isc_api_options *o, struct isc_api **out, struct isc_err *err)
{
	struct isc_api *api = calloc(1, sizeof(*api));
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
	                 MHD_ALLOW_SUSPEND_RESUME;
	unsigned threads = o->threads ? o->threads : (unsigned)isc_config_default_api_threads();
	unsigned slow_threads = o->slow_threads ? o->slow_threads : SLOW_THREADS_DEFAULT;
	unsigned slow_queue = o->slow_queue ? o->slow_queue : SLOW_QUEUE_DEFAULT;
	unsigned limit = o->max_connections ? o->max_connections : 512;
	unsigned timeout = o->timeout_s ? o->timeout_s : 30;
	struct isc_api_guard_limits glim = {
	    .max_conns = limit,
	    .per_ip = 0, /* the Unix socket's peers have no address */
	    .header_timeout_ms = 1000LL * (o->header_timeout_s ? o->header_timeout_s : 10),
	    .sweep_ms = 250,
	};
	struct passwd *pw;
	int rc = 0;

	if (!api)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	api->unix_fd = -1;
	api->operator_uid = geteuid();
	pw = getpwuid(api->operator_uid);
	api->home = strdup(o->home);
	api->socket_path = strdup(o->socket_path);
	api->operator_name = strdup(pw ? pw->pw_name : "operator");
	if (!api->home || !api->socket_path || !api->operator_name) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto fail;
	}
	if (pthread_key_create(&api->store_key, thread_release) != 0) {
		rc = isc_err_set(err, ISC_ENOMEM, "pthread_key_create failed");
		goto fail;
	}
	api->key_made = 1;
	if ((rc = isc_api_slow_new(slow_threads, slow_queue, &api->slow, err)))
		goto fail;
	files_enough(limit);
	if ((rc = isc_api_guard_new("unix", &glim, &api->unix_guard, err)))
		goto fail;
	glim.per_ip = o->per_ip ? o->per_ip : 32;
	if (o->listen && o->listen[0] &&
	    (rc = isc_api_guard_new("tcp", &glim, &api->tcp_guard, err)))
		goto fail;
	if ((rc = listen_unix(api, o->socket_path, err)))
		goto fail;
	unix_listener.api = api;
	unix_listener.is_unix = 1;
	unix_listener.guard = api->unix_guard;
	api->unix_d = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, &unix_listener, MHD_OPTION_LISTEN_SOCKET,
	    api->unix_fd, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT,
	    mhd_limit(limit), MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, &unix_listener, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
	    &unix_listener, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
	if (!api->unix_d) {
		rc = isc_err_set(err, ISC_EIO, "the API server could not start on %s",
		                 o->socket_path);
		goto fail;
	}
	api->unix_fd = -1; /* MHD owns and closes it */
	if (o->listen && o->listen[0]) {
		struct sockaddr_in sa;
		api->web = isc_web_new(o->web_root);
		if (!api->web) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
		if ((rc = parse_listen("api_listen", o->listen, &sa, err)))
			goto fail;
		tcp_listener.api = api;
		tcp_listener.is_unix = 0;
		tcp_listener.guard = api->tcp_guard;
		api->tcp_d = MHD_start_daemon(
		    flags, 0, NULL, NULL, on_request, &tcp_listener, MHD_OPTION_SOCK_ADDR, &sa,
		    MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT,
		    mhd_limit(limit), MHD_OPTION_CONNECTION_TIMEOUT, timeout,
		    MHD_OPTION_NOTIFY_COMPLETED, on_completed, &tcp_listener,
		    MHD_OPTION_NOTIFY_CONNECTION, on_connection, &tcp_listener,
		    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
		if (!api->tcp_d) {
			rc = isc_err_set(err, ISC_EIO, "the API server could not listen on %s",
			                 o->listen);
			goto fail;
		}
	}
	if (o->metrics_listen && o->metrics_listen[0] &&
	    (rc = metrics_start(api, o->metrics_listen, err)))
		goto fail;
	*out = api;
	return 0;
fail:
	isc_api_free(api);
	return rc;
}

int isc_api_pages_served(const struct isc_api *api)
{
	return api && isc_web_available(api->web);
}

unsigned isc_api_tcp_port(const struct isc_api *api)
{
	const union MHD_DaemonInfo *di;
	if (!api || !api->tcp_d)
		return 0;
	di = MHD_get_daemon_info(api->tcp_d, MHD_DAEMON_INFO_BIND_PORT);
	return di ? di->port : 0;
}

void isc_api_free(struct isc_api *api)
{
	if (!api)
		return;
	/*
	 * The slow calls first: queued ones are answered 503 and running ones end, so
	 * every suspended connection is resumed before its daemon stops (libmicrohttpd
	 * may not stop with one suspended). Until the pool is freed it refuses new ones.
	 */
	if (api->slow)
		isc_api_slow_stop(api->slow);
	if (api->metrics_d)
		MHD_stop_daemon(api->metrics_d);
	if (api->tcp_d)
		MHD_stop_daemon(api->tcp_d);
	if (api->unix_d) {
		MHD_stop_daemon(api->unix_d);
		unlink(api->socket_path);
	}
	if (api->unix_fd >= 0) {
		close(api->unix_fd);
		unlink(api->socket_path);
	}
	/* After the pool's threads ended: their store connections went with them. */
	isc_api_slow_free(api->slow);
	/* After the daemons: every connection was closed. */
	isc_api_guard_free(api->tcp_guard);
	isc_api_guard_free(api->unix_guard);
	if (api->key_made)
		pthread_key_delete(api->store_key);
	isc_web_free(api->web);
	free(api->home);
	free(api->socket_path);
	free(api->operator_name);
	free(api);
}
