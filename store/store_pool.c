/* The on-prem node pool: the SQL of the pool_nodes table (see store_pool.h). */
#include "store/store_pool.h"

#include "store/store_hostkeys.h"
#include "store/store_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int host_ok(const char *h)
{
	size_t n = h ? strlen(h) : 0;
	if (n == 0 || n > 253 || h[0] == '-' || h[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && !strchr(".-:", h[i]))
			return 0;
	return 1;
}

static int user_ok(const char *u)
{
	size_t n = u ? strlen(u) : 0;
	if (n == 0 || n > 32 || !(islower((unsigned char)u[0]) || u[0] == '_'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!islower((unsigned char)u[i]) && !isdigit((unsigned char)u[i]) &&
		    !strchr("_-", u[i]))
			return 0;
	return 1;
}

static int state_ok(const char *st)
{
	return st && (!strcmp(st, "up") || !strcmp(st, "draining") || !strcmp(st, "unreachable"));
}

int isc_store_pool_check(const char *host, int port, const char *user, int gpus,
                         struct isc_err *err)
{
	if (!host_ok(host))
		return isc_err_set(err, ISC_EINVALID,
		                   "host: '%.64s' is not a host name or address (letters, digits, "
		                   "'.', '-', ':')",
		                   host ? host : "");
	if (port < 1 || port > 65535)
		return isc_err_set(err, ISC_EINVALID, "port: %d is not 1..65535", port);
	if (!user_ok(user))
		return isc_err_set(err, ISC_EINVALID,
		                   "user: '%.40s' is not a user name ([a-z_][a-z0-9_-]*)",
		                   user ? user : "");
	if (gpus < 1 || gpus > ISC_POOL_MAX_GPUS)
		return isc_err_set(err, ISC_EINVALID, "gpus: %d is not 1..%d", gpus,
		                   ISC_POOL_MAX_GPUS);
	return 0;
}

int isc_store_pool_add(struct isc_store *s, const char *host, int port, const char *user, int gpus,
                       const char *unreachable, int64_t *id_out, struct isc_err *err)
{
	int rc = isc_store_pool_check(host, port, user, gpus, err);
	if (rc)
		return rc;
	if (!unreachable)
		unreachable = "";
	struct isc_db_stmt *st;
	rc = isc_store_prepare(s,
	                       "INSERT INTO pool_nodes (host, port, \"user\", gpus, state, reason, "
	                       "added_ms) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
	                       &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, host, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, port);
	isc_db_bind_text(st, 3, user, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 4, gpus);
	isc_db_bind_text(st, 5, unreachable[0] ? "unreachable" : "up", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 6, unreachable, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 7, isc_store_now_ms());
	int step = isc_db_step(st);
	if (step == ISC_DB_ROW && id_out)
		*id_out = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	if (step == ISC_DB_CONSTRAINT)
		return isc_err_set(err, ISC_ECONFLICT, "node %s:%d is already in the pool", host,
		                   port);
	if (step != ISC_DB_ROW)
		return isc_store_db_err(s, step, "adding a pool node", err);
	return 0;
}

void isc_pool_node_cleanup(struct isc_pool_node *n)
{
	free(n->host);
	free(n->user);
	free(n->state);
	free(n->reason);
	memset(n, 0, sizeof(*n));
}

static void pool_node_clean(void *rec)
{
	isc_pool_node_cleanup(rec);
}

void isc_pool_nodes_free(struct isc_pool_node *nodes, size_t n)
{
	isc_store_rows_free(nodes, n, sizeof(*nodes), pool_node_clean);
}

static int pool_node_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_pool_node *out = rec;
	int oom = 0;
	out->id = isc_db_column_int64(st, 0);
	out->host = isc_store_col_text(st, 1, &oom);
	out->port = isc_db_column_int(st, 2);
	out->user = isc_store_col_text(st, 3, &oom);
	out->gpus = isc_db_column_int(st, 4);
	out->state = isc_store_col_text(st, 5, &oom);
	out->added_ms = isc_db_column_int64(st, 6);
	out->reason = isc_store_col_text(st, 7, &oom);
	return oom ? ISC_ENOMEM : 0;
}

#define POOL_COLS "id, host, port, \"user\", gpus, state, added_ms, reason"

int isc_store_pool_list(struct isc_store *s, struct isc_pool_node **out, size_t *n,
                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *v;
	int rc = isc_store_prepare(s, "SELECT " POOL_COLS " FROM pool_nodes ORDER BY id", &st, err);
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(**out), pool_node_from_row, pool_node_clean,
	                         "listing pool nodes", &v, n, err);
	if (!rc)
		*out = v;
	return rc;
}

int isc_store_pool_find(struct isc_store *s, const char *what, struct isc_pool_node *out,
                        struct isc_err *err)
{
	struct isc_pool_node *v;
	size_t n, hits = 0, hit = 0;
	char *end;
	memset(out, 0, sizeof(*out));
	if (!what || !*what)
		return isc_err_set(err, ISC_EINVALID, "node: give its id or host");
	long long id = strtoll(what, &end, 10);
	int by_id = *end == '\0';
	int rc = isc_store_pool_list(s, &v, &n, err);
	if (rc)
		return rc;
	char hp[2][300]; /* the first two matches, for the message */
	for (size_t i = 0; i < n; i++) {
		char this_hp[300];
		snprintf(this_hp, sizeof(this_hp), "%s:%d", v[i].host, v[i].port);
		int match =
		    by_id ? v[i].id == id : (!strcmp(what, v[i].host) || !strcmp(what, this_hp));
		if (!match)
			continue;
		if (hits == 0)
			hit = i;
		if (hits < 2)
			memcpy(hp[hits], this_hp, sizeof(this_hp));
		hits++;
	}
	if (hits == 0)
		rc = isc_err_set(err, ISC_ENOTFOUND, "node %s is not in the pool", what);
	else if (hits > 1)
		rc = isc_err_set(err, ISC_EINVALID,
		                 "node %s is ambiguous (%s, %s%s): give HOST:PORT or the id", what,
		                 hp[0], hp[1], hits > 2 ? ", ..." : "");
	else {
		*out = v[hit];
		memset(&v[hit], 0, sizeof(v[hit]));
	}
	isc_pool_nodes_free(v, n);
	return rc;
}

static int exec_on_id(struct isc_store *s, const char *sql, const char *text, int64_t id,
                      const char *what, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, sql, &st, err);
	if (rc)
		return rc;
	int k = 1;
	if (text)
		isc_db_bind_text(st, k++, text, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, k, id);
	int step = isc_db_step(st);
	isc_db_finalize(st);
	if (step != ISC_DB_DONE)
		return isc_store_db_err(s, step, what, err);
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND, "node %lld is not in the pool",
		                   (long long)id);
	return 0;
}

int isc_store_pool_set_state(struct isc_store *s, int64_t id, const char *state,
                             struct isc_err *err)
{
	if (!state || (strcmp(state, "up") != 0 && strcmp(state, "draining") != 0))
		return isc_err_set(err, ISC_EINVALID, "state: '%.20s' is not up or draining",
		                   state ? state : "");
	return exec_on_id(s,
	                  "UPDATE pool_nodes SET state = CASE WHEN ?1 = 'up' AND reason != '' "
	                  "THEN 'unreachable' ELSE ?1 END WHERE id = ?2",
	                  state, id, "setting a pool node's state", err);
}

int isc_store_pool_mark(struct isc_store *s, int64_t id, const char *from, const char *to,
                        const char *reason, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc;

	if (!state_ok(from) || !state_ok(to))
		return isc_err_set(err, ISC_EINVALID, "state: not up, draining or unreachable");
	rc = isc_store_prepare(
	    s, "UPDATE pool_nodes SET state = ?, reason = ? WHERE id = ? AND state = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, to, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, reason ? reason : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, id);
	isc_db_bind_text(st, 4, from, -1, ISC_DB_STATIC);
	int step = isc_db_step(st);
	isc_db_finalize(st);
	if (step != ISC_DB_DONE)
		return isc_store_db_err(s, step, "marking a pool node", err);
	if (isc_db_changes(isc_store_db(s)) == 0) {
		struct isc_pool_node nd;
		char key[24];
		snprintf(key, sizeof(key), "%lld", (long long)id);
		rc = isc_store_pool_find(s, key, &nd, err);
		if (rc)
			return rc;
		rc = isc_err_set(err, ISC_ECONFLICT, "pool node %lld is %s now, not %s",
		                 (long long)id, nd.state, from);
		isc_pool_node_cleanup(&nd);
		return rc;
	}
	return 0;
}

/*
 * The experiment whose on-prem run holds node id (iscd records the run's nodes
 * in queue_state), copied into holder; "" when none.
 */
static int node_holder(struct isc_store *s, int64_t id, char *holder, size_t cap,
                       struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT experiment_id, run_nodes FROM queue_state WHERE run_nodes != ''", &st, err);
	holder[0] = '\0';
	if (rc)
		return rc;
	while ((rc = isc_db_step(st)) == ISC_DB_ROW && !holder[0]) {
		const char *nodes = (const char *)isc_db_column_text(st, 1);
		for (const char *p = nodes; p && *p;) {
			char *end;
			long long n = strtoll(p, &end, 10);
			if (end == p)
				break;
			if (n == id) {
				snprintf(holder, cap, "%s",
				         (const char *)isc_db_column_text(st, 0));
				break;
			}
			p = *end == ',' ? end + 1 : end;
		}
	}
	rc = rc == ISC_DB_ROW || rc == ISC_DB_DONE
	         ? 0
	         : isc_store_db_err(s, rc, "reading the queue state", err);
	isc_db_finalize(st);
	return rc;
}

int isc_store_pool_remove(struct isc_store *s, int64_t id, struct isc_err *err)
{
	char holder[64], pin[40];
	int rc = node_holder(s, id, holder, sizeof(holder), err);
	if (rc)
		return rc;
	if (holder[0])
		return isc_err_set(err, ISC_ECONFLICT,
		                   "pool node %lld runs experiment %s: drain it, and remove it "
		                   "once that run has ended",
		                   (long long)id, holder);
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = exec_on_id(s, "DELETE FROM pool_nodes WHERE id = ?", NULL, id, "removing a pool node",
	                err);
	/* The machine may come back under another id, or another machine at this address. */
	snprintf(pin, sizeof(pin), ISC_POOL_PIN_FMT, (long long)id);
	if (!rc)
		rc = isc_store_hostkey_forget(s, pin, err);
	if (!rc)
		return isc_store_commit(s, err);
	isc_store_rollback(s);
	return rc;
}
