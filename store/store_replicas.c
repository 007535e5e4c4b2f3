/* Replicas of iscd and their leases on bursts (issue 33, docs/ha.md). */
#include "store/store_replicas.h"

#include "store/store_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/*
 * "Now" in ms, where every replica agrees on it: PostgreSQL's clock (replicas on
 * several hosts, ha-facts pitfall 5), or on SQLite this process's (one host),
 * bound as ?1. Each statement is written once as a macro of NOW and its
 * parameters' markers, and expanded per dialect: on PostgreSQL the parameters are
 * ?1, ?2, ...; on SQLite ?2, ?3, ... after the clock. arg() maps a parameter's
 * number to its marker's for binding. The texts are literals, as the statement
 * cache keeps them by address.
 */
#define PG_NOW      "(extract(epoch from clock_timestamp())*1000)::bigint"
#define SQ_NOW      "CAST(?1 AS BIGINT)"
#define DIALECTS(M) M(PG_NOW, "?1", "?2", "?3", "?4"), M(SQ_NOW, "?2", "?3", "?4", "?5")
/* The same with six parameters, for the replica's registration. */
#define DIALECTS6(M)                                                                               \
	M(PG_NOW, "?1", "?2", "?3", "?4", "?5"), M(SQ_NOW, "?2", "?3", "?4", "?5", "?6")

static int is_pg(struct isc_store *s)
{
	return isc_db_kind(isc_store_db(s)) == ISC_DB_POSTGRES;
}

static int arg(struct isc_store *s, int i)
{
	return is_pg(s) ? i : i + 1;
}

int isc_store_replicas_shared(struct isc_store *s)
{
	return is_pg(s);
}

/* Prepares the dialect's text (texts[0] PostgreSQL, texts[1] SQLite); on SQLite binds the clock. */
static int prepare_now(struct isc_store *s, const char *const texts[2], struct isc_db_stmt **st,
                       struct isc_err *err)
{
	int pg = is_pg(s);
	int rc = isc_store_prepare_cached(s, texts[pg ? 0 : 1], st, err);
	if (!rc && !pg)
		isc_db_bind_int64(*st, 1, isc_store_now_ms());
	return rc;
}

static int step_done(struct isc_store *s, struct isc_db_stmt *st, const char *what,
                     struct isc_err *err)
{
	int rc = isc_db_step(st);
	isc_store_finalize(s, st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, what, err);
}

/* ---- replicas ---- */

#define REGISTER_SQL(NOW, A, B, C, D, E)                                                           \
	"INSERT INTO replicas (id, host, pid, started_ms, heartbeat_ms, boot_id, broker_id) "      \
	"VALUES (" A ", " B ", " C ", " NOW ", " NOW ", " D ", " E ") ON CONFLICT (id) DO UPDATE " \
	"SET host = excluded.host, pid = excluded.pid, heartbeat_ms = excluded.heartbeat_ms, "     \
	"boot_id = excluded.boot_id, broker_id = excluded.broker_id"

int isc_store_replica_register_as(struct isc_store *s, const char *id, const char *host,
                                  int64_t pid, const char *boot_id, const char *broker_id,
                                  struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS6(REGISTER_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, arg(s, 1), id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, arg(s, 2), host, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, arg(s, 3), pid);
	isc_db_bind_text(st, arg(s, 4), boot_id ? boot_id : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, arg(s, 5), broker_id ? broker_id : "", -1, ISC_DB_STATIC);
	return step_done(s, st, "registering the replica", err);
}

int isc_store_replica_register(struct isc_store *s, const char *id, const char *host, int64_t pid,
                               struct isc_err *err)
{
	return isc_store_replica_register_as(s, id, host, pid, NULL, NULL, err);
}

void isc_replica_boot_id(char *out, size_t cap)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (!cap)
		return;
	out[0] = '\0';
	if (!f)
		return;
	if (!fgets(out, (int)cap, f))
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

int isc_replica_dead_here(const struct isc_replica *r, const char *host, const char *boot_id)
{
	/*
	 * Another host may have the same name (containers, clones), and a pid of this host
	 * before a reboot means nothing now: both must match, and the boot id be known.
	 */
	if (!r->host || strcmp(r->host, host) != 0 || !boot_id || !boot_id[0] || !r->boot_id ||
	    strcmp(r->boot_id, boot_id) != 0)
		return 0;
	if (r->pid <= 0 || r->pid == (int64_t)getpid())
		return 0;
	return kill((pid_t)r->pid, 0) != 0 && errno == ESRCH;
}

#define IDENTITY_SQL(NOW, A, B, C, D_)                                                             \
	"INSERT INTO store_identity (id, broker_id, set_by, set_ms) VALUES (1, " A ", " B ", " NOW \
	") ON CONFLICT (id) DO NOTHING"
#define IDENTITY_SET_SQL(NOW, A, B, C, D_)                                                         \
	"UPDATE store_identity SET broker_id = " A ", set_by = " B ", set_ms = " NOW " WHERE id "  \
	"= 1"

int isc_store_broker_id_check(struct isc_store *s, const char *broker_id, const char *replica_id,
                              int enforce, char **recorded, struct isc_err *err)
{
	static const char *const insert_sql[2] = {DIALECTS(IDENTITY_SQL)};
	static const char *const set_sql[2] = {DIALECTS(IDENTITY_SET_SQL)};
	struct isc_db_stmt *st;
	char *had = NULL, *by = NULL;
	int rc, oom = 0;

	if (recorded)
		*recorded = NULL;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(s, "SELECT broker_id, set_by FROM store_identity WHERE id = 1", &st,
	                       err);
	if (rc)
		goto out;
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		had = isc_store_col_text(st, 0, &oom);
		by = isc_store_col_text(st, 1, &oom);
		rc = 0;
	} else if (rc == ISC_DB_DONE) {
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "reading the store's broker_id", err);
	}
	isc_store_finalize(s, st);
	if (!rc && oom)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (rc)
		goto out;
	if (had && strcmp(had, broker_id) == 0)
		goto out;
	/*
	 * Another broker_id is refused while anything of the recorded one is left: a
	 * replica registered (live, or dead and not yet pruned) or a cluster not closed, whose
	 * instances carry the recorded id. A store with neither (its replicas all stopped
	 * cleanly, every cluster closed) has nothing another id could lose: the new one is
	 * recorded instead.
	 */
	if (had && enforce) {
		int64_t left = 0;
		rc = isc_store_prepare(s,
		                       "SELECT (SELECT count(*) FROM replicas WHERE id <> ?) + "
		                       "(SELECT count(*) FROM clusters WHERE state <> 'closed')",
		                       &st, err);
		if (rc)
			goto out;
		isc_db_bind_text(st, 1, replica_id, -1, ISC_DB_STATIC);
		rc = isc_db_step(st);
		if (rc == ISC_DB_ROW) {
			left = isc_db_column_int64(st, 0);
			rc = 0;
		} else {
			rc = isc_store_db_err(s, rc, "reading what the store's broker_id holds",
			                      err);
		}
		isc_store_finalize(s, st);
		if (rc)
			goto out;
		if (left == 0)
			enforce = 0;
	}
	if (had && enforce) {
		rc =
		    isc_err_set(err, ISC_ECONFLICT,
		                "this store's replicas run with broker_id \"%s\" (recorded by %s), "
		                "this iscd's config.toml has \"%s\": every replica must use the "
		                "same one, or it cannot find the instances the others launched and "
		                "a takeover leaks them; copy the first replica's config.toml "
		                "(docs/ha.md, \"A second host\")",
		                had, by ? by : "?", broker_id);
		goto out;
	}
	if ((rc = prepare_now(s, had ? set_sql : insert_sql, &st, err)))
		goto out;
	isc_db_bind_text(st, arg(s, 1), broker_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, arg(s, 2), replica_id, -1, ISC_DB_STATIC);
	rc = step_done(s, st, "recording the store's broker_id", err);
out:
	if (rc) {
		isc_store_rollback(s);
		free(had);
		free(by);
		return rc;
	}
	free(by);
	rc = isc_store_commit(s, err);
	if (!rc && recorded && !(*recorded = strdup(had ? had : "")))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	free(had);
	return rc;
}

#define HEARTBEAT_SQL(NOW, A, B, C, D_) "UPDATE replicas SET heartbeat_ms = " NOW " WHERE id = " A

int isc_store_replica_heartbeat(struct isc_store *s, const char *id, struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(HEARTBEAT_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, arg(s, 1), id, -1, ISC_DB_STATIC);
	if ((rc = step_done(s, st, "the replica's heartbeat", err)))
		return rc;
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND, "replica %s is not registered", id);
	return 0;
}

/* Runs one DELETE with id bound as ?1. */
static int delete_by(struct isc_store *s, const char *sql, const char *id, const char *what,
                     struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(s, sql, &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	return step_done(s, st, what, err);
}

/* A replica's leases and its row go together, in one transaction. */
static int delete_pair(struct isc_store *s, const char *leases_sql, const char *replicas_sql,
                       const char *id, const char *what, struct isc_err *err)
{
	int rc = isc_store_begin(s, err);
	if (rc)
		return rc;
	rc = delete_by(s, leases_sql, id, what, err);
	if (!rc)
		rc = delete_by(s, replicas_sql, id, what, err);
	if (!rc)
		return isc_store_commit(s, err);
	isc_store_rollback(s);
	return rc;
}

int isc_store_replica_remove(struct isc_store *s, const char *id, struct isc_err *err)
{
	return delete_pair(s, "DELETE FROM leases WHERE replica_id = ?1",
	                   "DELETE FROM replicas WHERE id = ?1", id, "removing the replica", err);
}

int isc_store_replica_forget_others(struct isc_store *s, const char *id, struct isc_err *err)
{
	return delete_pair(s, "DELETE FROM leases WHERE replica_id != ?1",
	                   "DELETE FROM replicas WHERE id != ?1", id,
	                   "forgetting replicas that are not running", err);
}

#define PRUNE_SQL(NOW, A, B, C, D_) "DELETE FROM replicas WHERE heartbeat_ms < " NOW " - " A

int isc_store_replica_prune(struct isc_store *s, int64_t older_than_ms, struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(PRUNE_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, arg(s, 1), older_than_ms);
	return step_done(s, st, "pruning replicas", err);
}

static void replica_clean(void *rec)
{
	struct isc_replica *r = rec;
	free(r->id);
	free(r->host);
	free(r->boot_id);
	free(r->broker_id);
}

void isc_replica_list_free(struct isc_replica *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), replica_clean);
}

static int replica_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_replica *r = rec;
	int oom = 0;
	r->id = isc_store_col_text(st, 0, &oom);
	r->host = isc_store_col_text(st, 1, &oom);
	r->pid = isc_db_column_int64(st, 2);
	r->started_ms = isc_db_column_int64(st, 3);
	r->heartbeat_ms = isc_db_column_int64(st, 4);
	r->boot_id = isc_store_col_text(st, 5, &oom);
	r->broker_id = isc_store_col_text(st, 6, &oom);
	return oom ? ISC_ENOMEM : 0;
}

#define LIVE_SQL(NOW, A, B, C, D_)                                                                 \
	"SELECT id, host, pid, started_ms, heartbeat_ms, boot_id, broker_id FROM replicas WHERE "  \
	"heartbeat_ms >= " NOW " - " A " ORDER BY id"

int isc_store_replica_list_live(struct isc_store *s, int64_t lease_ms, struct isc_replica **out,
                                size_t *n, struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(LIVE_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_int64(st, arg(s, 1), lease_ms);
	return isc_store_read_rows(s, st, sizeof(**out), replica_row, replica_clean,
	                           "reading replicas", (void **)out, n, err);
}

/* ---- leases ---- */

void isc_lease_cleanup(struct isc_lease *l)
{
	free(l->experiment_id);
	free(l->replica_id);
	free(l->token);
	memset(l, 0, sizeof(*l));
}

static void lease_clean(void *rec)
{
	isc_lease_cleanup(rec);
}

void isc_lease_list_free(struct isc_lease *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), lease_clean);
}

/* experiment_id, replica_id, token, expires_ms, live */
static int lease_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_lease *l = rec;
	int oom = 0;
	l->experiment_id = isc_store_col_text(st, 0, &oom);
	l->replica_id = isc_store_col_text(st, 1, &oom);
	l->token = isc_store_col_text(st, 2, &oom);
	l->expires_ms = isc_db_column_int64(st, 3);
	l->live = isc_db_column_int(st, 4) != 0;
	return oom ? ISC_ENOMEM : 0;
}

#define LEASE_COLS(NOW)                                                                            \
	"SELECT experiment_id, replica_id, token, expires_ms, CASE WHEN expires_ms >= " NOW        \
	" THEN 1 ELSE 0 END FROM leases "
#define LEASE_GET_SQL(NOW, A, B, C, D_)  LEASE_COLS(NOW) "WHERE experiment_id = " A
#define LEASE_LIST_SQL(NOW, A, B, C, D_) LEASE_COLS(NOW) "ORDER BY experiment_id"

int isc_store_lease_get(struct isc_store *s, const char *experiment_id, struct isc_lease *out,
                        struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(LEASE_GET_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, arg(s, 1), experiment_id, -1, ISC_DB_STATIC);
	return isc_store_read_one(s, st, lease_row, lease_clean, out, sizeof(*out),
	                          "reading a lease", err);
}

int isc_store_lease_list(struct isc_store *s, struct isc_lease **out, size_t *n,
                         struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(LEASE_LIST_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	return isc_store_read_rows(s, st, sizeof(**out), lease_row, lease_clean, "reading leases",
	                           (void **)out, n, err);
}

/*
 * One statement: a new row, or the row when it is ours (token kept) or expired (the
 * new token). Held iff a row comes back.
 */
#define CLAIM_SQL(NOW, A, B, C, D)                                                                 \
	"INSERT INTO leases (experiment_id, replica_id, token, expires_ms) VALUES (" A ", " B      \
	", " C ", " NOW " + " D ") ON CONFLICT (experiment_id) DO UPDATE SET "                     \
	"token = CASE WHEN leases.replica_id = excluded.replica_id THEN leases.token "             \
	"ELSE excluded.token END, replica_id = excluded.replica_id, "                              \
	"expires_ms = excluded.expires_ms "                                                        \
	"WHERE leases.replica_id = excluded.replica_id OR leases.expires_ms < " NOW                \
	" RETURNING token"

int isc_store_lease_claim(struct isc_store *s, const char *experiment_id, const char *replica_id,
                          int64_t lease_ms, int *held, char **token, char **taken_from,
                          struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(CLAIM_SQL)};
	struct isc_lease before = {0};
	struct isc_db_stmt *st;
	char *fresh = NULL;
	int rc, had, oom = 0;

	*held = 0;
	*token = NULL;
	if (taken_from)
		*taken_from = NULL;
	/*
	 * Whose it was: only to tell a takeover from a first claim (a takeover is
	 * reconciled first). The upsert decides on its own; a claim racing in between
	 * makes it not held, never wrongly held.
	 */
	rc = isc_store_lease_get(s, experiment_id, &before, err);
	if (rc && rc != ISC_ENOTFOUND)
		return rc;
	had = rc == 0;
	if (!(fresh = isc_store_new_id("lease_"))) {
		isc_lease_cleanup(&before);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if ((rc = prepare_now(s, sql, &st, err)))
		goto out;
	isc_db_bind_text(st, arg(s, 1), experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, arg(s, 2), replica_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, arg(s, 3), fresh, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, arg(s, 4), lease_ms);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*token = isc_store_col_text(st, 0, &oom);
		rc = isc_db_step(st); /* DONE: the statement has finished its work */
	}
	isc_store_finalize(s, st);
	if (rc != ISC_DB_DONE) {
		free(*token);
		*token = NULL;
		rc = isc_store_db_err(s, rc, "claiming a lease", err);
		goto out;
	}
	rc = 0;
	if (oom) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	*held = *token != NULL;
	if (*held && taken_from && had && strcmp(before.replica_id, replica_id) != 0 &&
	    !(*taken_from = strdup(before.replica_id))) {
		free(*token);
		*token = NULL;
		*held = 0;
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
out:
	free(fresh);
	isc_lease_cleanup(&before);
	return rc;
}

#define RENEW_SQL(NOW, A, B, C, D_)                                                                \
	"UPDATE leases SET expires_ms = " NOW " + " B " WHERE replica_id = " A                     \
	" AND expires_ms >= " NOW " RETURNING experiment_id, replica_id, token, expires_ms, 1"

int isc_store_lease_renew(struct isc_store *s, const char *replica_id, int64_t lease_ms,
                          struct isc_lease **out, size_t *n, struct isc_err *err)
{
	static const char *const sql[2] = {DIALECTS(RENEW_SQL)};
	struct isc_db_stmt *st;
	int rc = prepare_now(s, sql, &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, arg(s, 1), replica_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, arg(s, 2), lease_ms);
	return isc_store_read_rows(s, st, sizeof(**out), lease_row, lease_clean, "renewing leases",
	                           (void **)out, n, err);
}

int isc_store_lease_release(struct isc_store *s, const char *experiment_id, const char *replica_id,
                            const char *token, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(s,
	                                  "DELETE FROM leases WHERE experiment_id = ?1 AND "
	                                  "replica_id = ?2 AND (CAST(?3 AS TEXT) IS NULL OR "
	                                  "token = ?3)",
	                                  &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, replica_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, token, -1, ISC_DB_STATIC);
	return step_done(s, st, "releasing a lease", err);
}
