/*
 * Opening the store: resolve and create $ISC_HOME with safe modes, find the
 * database from the store URL (SQLite in $ISC_HOME, or PostgreSQL), open it
 * (SQLite: WAL mode, foreign keys and a busy timeout), and bring its schema up
 * to date by running the migrations it has not seen, in order.
 */
#include "store/store_int.h"

#include "common/clock.h"
#include "common/metrics.h"
#include "store/migrations_pg.h"
#include "store/db_sqlite.h"
#include "toml/toml.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Statements the API's hot paths prepare on every request (the token, the
 * experiment, its events, the listing) are kept prepared per connection:
 * parsing and planning the SQL was half of a status request's CPU. Keyed by the
 * SQL text's address (a literal) and checked against the text itself.
 */
#define STMT_CACHE_SIZE 48

struct cached_stmt {
	char *sql; /* a copy of the text, to check the address's match */
	const char *key;
	struct isc_db_stmt *st;
	int busy; /* handed out and not yet given back by isc_store_finalize */
};

struct isc_store {
	struct isc_db *db;
	char *home;
	int depth; /* open isc_store_begin calls: 1 is the transaction, more are savepoints */
	int64_t tx_start_us; /* monotonic: the outermost isc_store_begin (the metrics) */
	struct cached_stmt cache[STMT_CACHE_SIZE];
	size_t n_cached;
	char *url;   /* PostgreSQL's (the idle connections' key); NULL for SQLite */
	int broken;  /* a failed open or migration: never kept for reuse */
	int created; /* this open made the schema (it found none) */
	/* isc_store_fence: the lease each outermost commit checks (PostgreSQL); NULL: none. */
	char *fence_experiment, *fence_token;
	int fence_lost; /* a fenced write was refused: every later one is, without asking */
};

#define BUSY_TIMEOUT_MS 10000

/*
 * PostgreSQL: the key of the transaction-scoped advisory lock every write
 * transaction takes first. SQLite's BEGIN IMMEDIATE lets one writer in at a
 * time, and every rule of the store (credits never overspent, one gang per
 * cycle, a charge written once) was written under that; taking the same single
 * lock on PostgreSQL keeps each of them true with several replicas, and the
 * lock goes with the transaction, so a pooled connection never keeps it
 * (docs/ha.md). The value is "iscd" in ASCII.
 */
#define PG_WRITE_LOCK_KEY 0x69736364

/*
 * The store's clock minus this process's monotonic clock, once synced (isc_store_clock_sync);
 * CLOCK_UNSET before. One value, so a reader never sees half an update.
 */
#define CLOCK_UNSET INT64_MIN
static _Atomic int64_t clock_offset = CLOCK_UNSET;

#ifdef ISC_TEST_HOOKS
/* isc_store_clock_pin: the store's clock held at one moment (0: not held). */
static _Atomic int64_t clock_pinned = 0;

void isc_store_clock_pin(int64_t ms)
{
	atomic_store_explicit(&clock_pinned, ms, memory_order_relaxed);
}
#endif

int64_t isc_store_now_ms(void)
{
#ifdef ISC_TEST_HOOKS
	int64_t pinned = atomic_load_explicit(&clock_pinned, memory_order_relaxed);
	if (pinned)
		return pinned;
#endif
	int64_t off = atomic_load_explicit(&clock_offset, memory_order_relaxed);
	return off == CLOCK_UNSET ? isc_wall_ms() : isc_monotonic_ms() + off;
}

int64_t isc_store_clock_skew_ms(void)
{
	return isc_store_now_ms() - isc_wall_ms();
}

int isc_store_clock_sync(struct isc_store *s, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int64_t before, after, db_ms;
	int rc;

	if (isc_db_kind(s->db) != ISC_DB_POSTGRES)
		return 0;
	rc = isc_store_prepare_cached(
	    s, "SELECT CAST(extract(epoch from clock_timestamp()) * 1000 AS BIGINT)", &st, err);
	if (rc)
		return rc;
	before = isc_monotonic_ms();
	rc = isc_db_step(st);
	after = isc_monotonic_ms();
	db_ms = rc == ISC_DB_ROW ? isc_db_column_int64(st, 0) : 0;
	isc_store_finalize(s, st);
	if (rc != ISC_DB_ROW)
		return isc_store_db_err(s, rc, "reading the server's clock", err);
	/* A slow answer (over a second) says little about when the clock was read: kept. */
	if (after - before > 1000 &&
	    atomic_load_explicit(&clock_offset, memory_order_relaxed) != CLOCK_UNSET)
		return 0;
	atomic_store_explicit(&clock_offset, db_ms - (before + (after - before) / 2),
	                      memory_order_relaxed);
	return 0;
}

int64_t isc_store_page_limit(size_t limit)
{
	return limit ? (int64_t)limit : INT64_MAX;
}

int isc_store_prepare(struct isc_store *s, const char *sql, struct isc_db_stmt **out,
                      struct isc_err *err)
{
	int rc = isc_db_prepare(s->db, sql, 0, out);
	if (rc != ISC_DB_OK)
		return isc_store_db_err(s, rc, "preparing a statement", err);
	return 0;
}

int isc_store_prepare_cached(struct isc_store *s, const char *sql, struct isc_db_stmt **out,
                             struct isc_err *err)
{
	struct cached_stmt *c;
	int rc;

	for (size_t i = 0; i < s->n_cached; i++) {
		c = &s->cache[i];
		if (c->key != sql || strcmp(c->sql, sql) != 0)
			continue;
		if (c->busy) /* in use further up the stack: this use gets its own */
			return isc_store_prepare(s, sql, out, err);
		c->busy = 1;
		*out = c->st;
		return 0;
	}
	if (s->n_cached == STMT_CACHE_SIZE)
		return isc_store_prepare(s, sql, out, err);
	c = &s->cache[s->n_cached];
	if (!(c->sql = strdup(sql)))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_db_prepare(s->db, sql, ISC_DB_PREPARE_PERSISTENT, &c->st);
	if (rc != ISC_DB_OK) {
		free(c->sql);
		c->sql = NULL;
		c->st = NULL;
		return isc_store_db_err(s, rc, "preparing a statement", err);
	}
	c->key = sql;
	c->busy = 1;
	s->n_cached++;
	*out = c->st;
	return 0;
}

void isc_store_finalize(struct isc_store *s, struct isc_db_stmt *st)
{
	for (size_t i = 0; i < s->n_cached; i++) {
		if (s->cache[i].st != st)
			continue;
		/* Reset ends the statement's read, so no snapshot outlives the call. */
		isc_db_reset(st);
		isc_db_clear_bindings(st);
		s->cache[i].busy = 0;
		return;
	}
	isc_db_finalize(st);
}

static int lease_lost_err(struct isc_store *s, const char *what, struct isc_err *err)
{
	return isc_err_set(err, ISC_ELEASE,
	                   "store: %s: %s: this replica's lease was lost (expired or taken over): "
	                   "its writes are not made",
	                   what, s->fence_experiment ? s->fence_experiment : "?");
}

int isc_store_db_err(struct isc_store *s, int rc, const char *what, struct isc_err *err)
{
	/*
	 * A lost connection, a conflict or a busy database passes: ISC_ESTORE, retried. On
	 * SQLite the code itself says so (SQLITE_BUSY): its connection's last error code is
	 * undefined after a call that succeeded, and this may come after some. A write the
	 * fence refused is not a store error: the lease is gone (ISC_ELEASE).
	 */
	int pg = isc_db_kind(s->db) == ISC_DB_POSTGRES;
	int code;

	if (rc == ISC_DB_FENCED)
		return lease_lost_err(s, what, err);
	code = rc == ISC_DB_CONSTRAINT                                ? ISC_ECONFLICT
	       : rc == ISC_DB_NOMEM                                   ? ISC_ENOMEM
	       : rc == ISC_DB_BUSY || (pg && isc_db_transient(s->db)) ? ISC_ESTORE
	                                                              : ISC_EIO;
	if (code == ISC_ESTORE)
		isc_metric_add(ISC_M_STORE_TRANSIENT_ERRORS, NULL, 1);
	return isc_err_set(err, code, "store: %s: %s", what, isc_db_errmsg(s->db));
}

char *isc_store_col_text(struct isc_db_stmt *st, int col, int *oom)
{
	const unsigned char *t = isc_db_column_text(st, col);
	char *copy;
	if (!t)
		return NULL;
	copy = strdup((const char *)t);
	if (!copy && oom)
		*oom = 1;
	return copy;
}

void isc_store_rows_free(void *list, size_t n, size_t size, isc_store_rec_cleanup_fn cleanup)
{
	for (size_t i = 0; list && i < n; i++)
		cleanup((char *)list + i * size);
	free(list);
}

int isc_store_read_rows(struct isc_store *s, struct isc_db_stmt *st, size_t size,
                        isc_store_row_fn from_row, isc_store_rec_cleanup_fn cleanup,
                        const char *what, void **out, size_t *n, struct isc_err *err)
{
	char *list = NULL;
	size_t count = 0, cap = 0;
	int rc;

	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char *grown = realloc(list, ncap * size);
			if (!grown) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				goto fail;
			}
			list = grown;
			cap = ncap;
		}
		memset(list + count * size, 0, size);
		/* Counted before the check: a half-filled record is cleaned up with the rest. */
		if (from_row(st, list + count++ * size)) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
	}
	if (rc != ISC_DB_DONE) {
		rc = isc_store_db_err(s, rc, what, err);
		goto fail;
	}
	isc_store_finalize(s, st);
	*out = list;
	*n = count;
	return 0;
fail:
	isc_store_finalize(s, st);
	isc_store_rows_free(list, count, size, cleanup);
	return rc;
}

int isc_store_read_one(struct isc_store *s, struct isc_db_stmt *st, isc_store_row_fn from_row,
                       isc_store_rec_cleanup_fn cleanup, void *rec, size_t size, const char *what,
                       struct isc_err *err)
{
	int rc = isc_db_step(st);

	memset(rec, 0, size);
	if (rc == ISC_DB_ROW) {
		rc = 0;
		if (from_row(st, rec)) {
			cleanup(rec);
			memset(rec, 0, size);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	} else if (rc == ISC_DB_DONE) {
		rc = ISC_ENOTFOUND;
	} else {
		rc = isc_store_db_err(s, rc, what, err);
	}
	isc_store_finalize(s, st);
	return rc;
}

static int exec_sql(struct isc_store *s, const char *sql, const char *what, struct isc_err *err)
{
	int rc = isc_db_exec(s->db, sql);
	if (rc != ISC_DB_OK)
		return isc_store_db_err(s, rc, what, err);
	return 0;
}

/*
 * Transactions nest: the outermost isc_store_begin takes the write lock
 * (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN and the advisory lock of
 * PG_WRITE_LOCK_KEY), inner ones are savepoints. A caller that batches many
 * small writes (the meter's charges of a tick, a describe's node updates)
 * holds the lock once for all of them, and a step inside the batch that fails
 * rolls back to its own savepoint without undoing the others.
 */
int isc_store_begin(struct isc_store *s, struct isc_err *err)
{
	char sql[64];
	int rc;

	if (s->fence_lost)
		return lease_lost_err(s, "beginning a transaction", err);
	/* SQLite ends a transaction on its own after some errors (a full disk): start afresh. */
	if (s->depth > 0 && !isc_db_in_transaction(s->db))
		s->depth = 0;
	if (s->depth == 0 && isc_db_kind(s->db) == ISC_DB_POSTGRES) {
		snprintf(sql, sizeof(sql), "BEGIN; SELECT pg_advisory_xact_lock(%d)",
		         PG_WRITE_LOCK_KEY);
		rc = exec_sql(s, sql, "beginning a transaction", err);
		if (rc)
			isc_db_exec(s->db, "ROLLBACK");
	} else if (s->depth == 0) {
		rc = exec_sql(s, "BEGIN IMMEDIATE", "beginning a transaction", err);
	} else {
		snprintf(sql, sizeof(sql), "SAVEPOINT sp%d", s->depth);
		rc = exec_sql(s, sql, "beginning a savepoint", err);
	}
	if (!rc && s->depth++ == 0)
		s->tx_start_us = isc_monotonic_us();
	return rc;
}

/* The transaction's time from BEGIN (waiting for the write lock included) to its end. */
static void tx_observe(struct isc_store *s, const char *outcome)
{
	isc_metric_observe(ISC_M_STORE_TX_DURATION, ISC_LABELS(outcome),
	                   (double)(isc_monotonic_us() - s->tx_start_us) / 1e6);
}

/* On failure the transaction stays open: the caller rolls it back. */
/*
 * The fence's check, inside the transaction about to commit: the lease row is
 * still this token's and unexpired by the database's clock. Taking a lease over
 * is itself a write transaction under the same write lock, so no takeover can
 * come between this check and the COMMIT.
 */
static int fence_holds(struct isc_store *s, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(
	    s,
	    "SELECT count(*) FROM leases WHERE experiment_id = ? AND token = ? AND expires_ms > "
	    "CAST(extract(epoch from clock_timestamp()) * 1000 AS BIGINT)",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, s->fence_experiment, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, s->fence_token, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc != ISC_DB_ROW)
		rc = isc_store_db_err(s, rc, "checking the lease", err);
	else if (isc_db_column_int64(st, 0) == 0) {
		s->fence_lost = 1; /* for good: a lease lost is never this step's again */
		rc = lease_lost_err(s, "committing", err);
	} else {
		rc = 0;
	}
	isc_store_finalize(s, st);
	return rc;
}

/*
 * The write guard (store/db.h) of a fenced connection: a statement that writes outside
 * any transaction runs in one of its own, under the write lock, and commits only if the
 * lease still holds (isc_store_commit's check), as a step's transactions do. So every
 * write of a step carries the lease token: a stale replica's single-statement write is
 * rolled back, as dstack's `WHERE id = :id AND lock_token = :token` matches no row.
 */
static int guard_before(void *ctx)
{
	struct isc_store *s = ctx;
	struct isc_err err;
	int rc = isc_store_begin(s, &err);

	if (rc == ISC_ELEASE)
		return ISC_DB_FENCED;
	return rc ? ISC_DB_ERROR : ISC_DB_OK;
}

static int guard_after(void *ctx, int ok)
{
	struct isc_store *s = ctx;
	struct isc_err err;
	int rc;

	if (!ok) {
		isc_store_rollback(s);
		return ISC_DB_OK; /* the statement's own error stands */
	}
	if (!(rc = isc_store_commit(s, &err)))
		return ISC_DB_OK;
	isc_store_rollback(s);
	return rc == ISC_ELEASE ? ISC_DB_FENCED : ISC_DB_ERROR;
}

int isc_store_fence(struct isc_store *s, const char *experiment_id, const char *token,
                    struct isc_err *err)
{
	struct isc_db_write_guard guard = {guard_before, guard_after, s};

	free(s->fence_experiment);
	free(s->fence_token);
	s->fence_experiment = s->fence_token = NULL;
	s->fence_lost = 0;
	isc_db_set_write_guard(s->db, NULL);
	if (!token || isc_db_kind(s->db) != ISC_DB_POSTGRES)
		return 0;
	if (!(s->fence_experiment = strdup(experiment_id)) || !(s->fence_token = strdup(token))) {
		free(s->fence_experiment);
		s->fence_experiment = NULL;
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_db_set_write_guard(s->db, &guard);
	return 0;
}

int isc_store_lease_lost(const struct isc_store *s)
{
	return s->fence_lost;
}

void isc_store_fence_lose(struct isc_store *s)
{
	if (s->fence_token)
		s->fence_lost = 1;
}

const char *isc_store_fence_experiment(const struct isc_store *s)
{
	return s->fence_experiment;
}

int isc_store_fence_check(struct isc_store *s, struct isc_err *err)
{
	if (s->fence_lost)
		return lease_lost_err(s, "checking the lease", err);
	if (!s->fence_token)
		return 0;
	/* Outside any transaction: a read, by the database's clock. Inside one, the commit
	 * checks anyway; this answers what holds now. */
	return fence_holds(s, err);
}

int isc_store_commit(struct isc_store *s, struct isc_err *err)
{
	char sql[32];
	int rc;

	if (s->depth <= 1 && s->fence_token && (rc = fence_holds(s, err)))
		return rc; /* the caller rolls back, as after any failed commit */
	if (s->depth <= 1) {
		rc = exec_sql(s, "COMMIT", "committing", err);
		if (!rc && s->depth == 1)
			tx_observe(s, "commit");
	} else {
		snprintf(sql, sizeof(sql), "RELEASE sp%d", s->depth - 1);
		rc = exec_sql(s, sql, "releasing a savepoint", err);
	}
	if (!rc && s->depth > 0)
		s->depth--;
	return rc;
}

void isc_store_rollback(struct isc_store *s)
{
	char sql[64];

	if (s->depth <= 1) {
		isc_db_exec(s->db, "ROLLBACK");
		if (s->depth == 1)
			tx_observe(s, "rollback");
		s->depth = 0;
		return;
	}
	snprintf(sql, sizeof(sql), "ROLLBACK TO sp%d; RELEASE sp%d", s->depth - 1, s->depth - 1);
	isc_db_exec(s->db, sql);
	s->depth--;
}

int isc_store_latest_version(void)
{
	return (int)isc_store_migration_count();
}

int isc_store_schema_version(struct isc_store *s, int *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT version FROM schema_version", &st, err);
	if (rc)
		return rc;
	rc = isc_db_step(st);
	*out = rc == ISC_DB_ROW ? isc_db_column_int(st, 0) : 0;
	isc_db_finalize(st);
	return rc == ISC_DB_ROW || rc == ISC_DB_DONE
	           ? 0
	           : isc_store_db_err(s, rc, "reading the schema version", err);
}

/*
 * The schema version without taking the write lock: -1 when the store has no
 * schema_version table yet (a new store).
 */
static int version_unlocked(struct isc_store *s)
{
	struct isc_db_stmt *st;
	int version = -1;
	/* PostgreSQL logs a query of a missing table as an error: ask whether it is there. */
	if (isc_db_kind(s->db) == ISC_DB_POSTGRES) {
		int present = 0;
		if (isc_db_prepare(s->db, "SELECT to_regclass('schema_version') IS NOT NULL", 0,
		                   &st) != ISC_DB_OK)
			return -1;
		if (isc_db_step(st) == ISC_DB_ROW)
			present = isc_db_column_int(st, 0);
		isc_db_finalize(st);
		if (!present)
			return -1;
	}
	if (isc_db_prepare(s->db, "SELECT version FROM schema_version", 0, &st) != ISC_DB_OK)
		return -1;
	if (isc_db_step(st) == ISC_DB_ROW)
		version = isc_db_column_int(st, 0);
	isc_db_finalize(st);
	return version;
}

/*
 * The step from schema version `version`, and the version it leads to.
 * PostgreSQL has no stores older than its baseline (the schema as SQLite's
 * migrations leave it at that version), so a new one is made in one step and
 * the later migrations follow, as on SQLite.
 */
static const char *next_migration(const struct isc_store *s, int version, int *next)
{
	if (isc_db_kind(s->db) == ISC_DB_POSTGRES) {
		if (version < isc_store_pg_baseline_version()) {
			*next = isc_store_pg_baseline_version();
			return isc_store_pg_baseline_sql();
		}
		*next = version + 1;
		return isc_store_pg_migration_sql((size_t)version);
	}
	*next = version + 1;
	return isc_store_migration_sql((size_t)version);
}

/*
 * Runs the migrations a store has not seen, one transaction each. A store
 * that is current (every open but the first) is recognised with a plain read:
 * the daemon's workers open the store for every step, and none of them may
 * queue for the write lock just to learn that nothing is to be done. Otherwise
 * the version is read again inside each write transaction (BEGIN IMMEDIATE),
 * so two processes opening a new store at once never run the same migration
 * twice: the second one waits for the first one's transaction and then sees
 * its version.
 */
static int migrate(struct isc_store *s, size_t migrate_to, struct isc_err *err)
{
	int rc, current = version_unlocked(s);

	if (current >= 0 && (size_t)current >= migrate_to) {
		if (current > isc_store_latest_version())
			return isc_err_set(err, ISC_EINVALID,
			                   "store: schema version %d is newer than this program "
			                   "knows (%d); upgrade isc",
			                   current, isc_store_latest_version());
		return 0;
	}
	for (;;) {
		char what[64];
		struct isc_db_stmt *st;
		const char *sql = NULL;
		int version, next = 0;

		/* Inside the write lock, so two first opens (two replicas' isc init) make it once.
		 */
		if ((rc = isc_store_begin(s, err)))
			return rc;
		rc = exec_sql(s,
		              "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);"
		              "INSERT INTO schema_version SELECT 0 WHERE NOT EXISTS "
		              "(SELECT 1 FROM schema_version);",
		              "creating schema_version", err);
		if (!rc)
			rc = isc_store_schema_version(s, &version, err);
		if (!rc && version > isc_store_latest_version())
			rc =
			    isc_err_set(err, ISC_EINVALID,
			                "store: schema version %d is newer than this program knows "
			                "(%d); upgrade isc",
			                version, isc_store_latest_version());
		if (!rc && (size_t)version >= migrate_to) {
			if ((rc = isc_store_commit(s, err)))
				isc_store_rollback(s);
			return rc;
		}
		if (!rc) {
			if (version == 0)
				s->created = 1;
			sql = next_migration(s, version, &next);
			snprintf(what, sizeof(what), "migration %d", next);
			rc = sql ? exec_sql(s, sql, what, err)
			         : isc_err_set(err, ISC_EINVALID, "store: %s is missing", what);
		}
		if (!rc)
			rc =
			    isc_store_prepare(s, "UPDATE schema_version SET version = ?", &st, err);
		if (!rc) {
			int step;
			isc_db_bind_int(st, 1, next);
			if ((step = isc_db_step(st)) != ISC_DB_DONE)
				rc = isc_store_db_err(s, step, what, err);
			isc_db_finalize(st);
		}
		if (!rc)
			rc = isc_store_commit(s, err);
		if (rc) {
			isc_store_rollback(s);
			return rc;
		}
	}
}

static int ensure_home(const char *home, int create, struct isc_err *err)
{
	struct stat st;
	if (stat(home, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return isc_err_set(err, ISC_EINVALID, "%s is not a folder", home);
		/* Keys, logs, artifacts and the ledger live here: owner-only, even if made wider.
		 * Search-only for others (0711) stays: iscd sets it so local users reach the API
		 * socket in run/ by name, while they can list and read nothing (docs/api.md). */
		if ((st.st_mode & 066) && chmod(home, 0700) != 0)
			return isc_err_set(err, ISC_EIO, "cannot make %s owner-only: %s", home,
			                   strerror(errno));
		return 0;
	}
	if (!create)
		return isc_err_set(err, ISC_ENOTFOUND, "no store at %s: run 'isc init' first",
		                   home);
	if (mkdir(home, 0700) != 0 && errno != EEXIST)
		return isc_err_set(err, ISC_EIO, "cannot create %s: %s", home, strerror(errno));
	return 0;
}

int isc_store_url_check(const char *url, struct isc_err *err)
{
	if (!strcmp(url, "sqlite:") || !strncmp(url, "postgresql://", 13) ||
	    !strncmp(url, "postgres://", 11))
		return 0;
	return isc_err_set(err, ISC_EINVALID,
	                   "must be \"sqlite:\" or a PostgreSQL URI (postgresql://...)");
}

/*
 * store_url of $home/config.toml ("sqlite:" when the file or the key is absent).
 * Read here, under the config module, because every program opens the store
 * before anything else; config.c checks the same key with the same rule.
 */
static int config_store_url(const char *home, char **out, struct isc_err *err)
{
	struct isc_toml_doc *doc = NULL;
	const struct isc_toml_value *v;
	char *path = NULL, *text = NULL;
	const char *url = "sqlite:";
	size_t len = 0;
	FILE *f;
	int rc = 0;

	*out = NULL;
	if (asprintf(&path, "%s/config.toml", home) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	f = fopen(path, "re");
	if (f) {
		FILE *mem = open_memstream(&text, &len);
		char buf[8192];
		size_t got;
		while (mem && (got = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, got, mem);
		if (mem)
			fclose(mem);
		fclose(f);
		if (!text)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else if (isc_toml_parse(text, len, &doc, err))
			rc = isc_err_wrap(err, "%s", path);
		else if ((v = isc_toml_table_get(isc_toml_doc_root(doc), "store_url"))) {
			size_t n;
			if (isc_toml_get_string(v, &url, &n) || isc_store_url_check(url, err))
				rc = isc_err_set(err, ISC_EINVALID,
				                 "%s:%d:%d: store_url: must be \"sqlite:\" "
				                 "or a PostgreSQL URI (postgresql://...)",
				                 path, isc_toml_key_line(v), isc_toml_key_col(v));
		}
	}
	if (!rc && !(*out = strdup(url)))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_toml_doc_free(doc);
	free(text);
	free(path);
	return rc;
}

/*
 * config.toml's store_url of the home this process last opened, read once: the
 * broker opens the store for every step of every burst and every describe, and
 * each open read and parsed the whole file for this one key. A process serves
 * one store for its life (iscd reads its config at start), so it never changes
 * under it.
 */
static char *config_url_cached(const char *home, struct isc_err *err)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char *cached_home, *cached_url;
	char *url = NULL;

	pthread_mutex_lock(&lock);
	if (cached_home && strcmp(cached_home, home) == 0) {
		if (!(url = strdup(cached_url)))
			isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else if (config_store_url(home, &url, err) == 0) {
		char *h = strdup(home), *u = strdup(url);
		if (h && u) {
			free(cached_home);
			free(cached_url);
			cached_home = h;
			cached_url = u;
		} else {
			free(h);
			free(u);
		}
	}
	pthread_mutex_unlock(&lock);
	return url;
}

char *isc_store_url_resolve(const char *home, struct isc_err *err)
{
	const char *env = getenv("ISC_STORE_URL");
	char *url;

	if (env && *env) {
		if (isc_store_url_check(env, err)) {
			isc_err_wrap(err, "ISC_STORE_URL");
			return NULL;
		}
		if (!(url = strdup(env)))
			isc_err_set(err, ISC_ENOMEM, "out of memory");
		return url;
	}
	return config_url_cached(home, err);
}

/* file: the database file ("sqlite:/path", isc store copy's form), else NULL: $home/isc.db. */
static int open_sqlite(struct isc_store *s, const char *file, int create, int one_thread,
                       struct isc_err *err)
{
	char *path = NULL;
	int rc, fd;

	if (file ? !(path = strdup(file)) : asprintf(&path, "%s/isc.db", s->home) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (access(path, F_OK) != 0) {
		if (!create) {
			rc = isc_err_set(err, ISC_ENOTFOUND, "no store at %s: run 'isc init' first",
			                 path);
			free(path);
			return rc;
		}
		/* Create the file ourselves so it is 0600 from its first moment. */
		fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = isc_err_set(err, ISC_EIO, "cannot create %s: %s", path,
			                 strerror(errno));
			free(path);
			return rc;
		}
		close(fd);
	}
	rc = isc_db_open_sqlite(path, one_thread, &s->db, err);
	free(path);
	if (rc)
		return rc;
	isc_db_sqlite_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	return exec_sql(
	    s, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;",
	    "configuring the database", err);
}

/*
 * PostgreSQL: the URL is the connection. Without `create`, a database with no
 * schema yet is "run isc init", as a missing SQLite file is.
 */
static int open_pg(struct isc_store *s, const char *url, int create, struct isc_err *err)
{
	struct isc_err ignored;
	int rc = isc_db_open_pg(url, &s->db, err);
	if (rc)
		return rc;
	/* The process's first PostgreSQL store sets its clock (iscd's heartbeat keeps it so). */
	if (atomic_load_explicit(&clock_offset, memory_order_relaxed) == CLOCK_UNSET)
		isc_store_clock_sync(s, &ignored);
	if (!create && version_unlocked(s) < 0)
		return isc_err_set(err, ISC_ENOTFOUND,
		                   "the PostgreSQL store has no schema yet: run 'isc init' first");
	return 0;
}

/*
 * PostgreSQL connections kept for the next open: the broker opens a store for every
 * step of every burst and every worker, and a new PostgreSQL connection is a new
 * server process (milliseconds, and one of max_connections). A store given back by
 * isc_store_free outside any transaction waits here, its prepared statements with
 * it, for an open of the same home and URL. SQLite's opens are cheap and stay as
 * they were.
 */
#define PG_IDLE_MAX 16

static pthread_mutex_t pg_idle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct isc_store *pg_idle[PG_IDLE_MAX];
static size_t pg_idle_n;
static pid_t pg_idle_pid; /* the process whose connections pg_idle holds */

static void store_close(struct isc_store *s);

/*
 * With pg_idle_lock held. A forked child (tools/credits-race forks racers after its
 * parent gave its store back) inherits the parent's idle connections, sockets and
 * all: used by the child they would be one server session spoken on by two
 * processes. The child forgets them without a word to the server (isc_db_disown)
 * and opens its own.
 */
static void pg_idle_forget_inherited(void)
{
	if (pg_idle_pid == getpid())
		return;
	while (pg_idle_n > 0) {
		struct isc_store *s = pg_idle[--pg_idle_n];
		isc_db_disown(s->db);
		store_close(s);
	}
	pg_idle_pid = getpid();
}

static void pg_idle_drain(void)
{
	pthread_mutex_lock(&pg_idle_lock);
	pg_idle_forget_inherited();
	while (pg_idle_n > 0)
		store_close(pg_idle[--pg_idle_n]);
	pthread_mutex_unlock(&pg_idle_lock);
}

static struct isc_store *pg_idle_take(const char *home, const char *url)
{
	struct isc_store *found = NULL;

	pthread_mutex_lock(&pg_idle_lock);
	pg_idle_forget_inherited();
	for (size_t i = pg_idle_n; i-- > 0;) {
		if (strcmp(pg_idle[i]->home, home) != 0 || strcmp(pg_idle[i]->url, url) != 0)
			continue;
		found = pg_idle[i];
		pg_idle[i] = pg_idle[--pg_idle_n];
		break;
	}
	pthread_mutex_unlock(&pg_idle_lock);
	/*
	 * Checked before reuse: a kept connection the server closed meanwhile (a restart)
	 * is connected again, or, when that fails, closed and a new one tried.
	 */
	if (found && isc_db_check(found->db) != ISC_DB_OK) {
		store_close(found);
		found = NULL;
	}
	return found;
}

/* The kept connections are closed when the program exits (and leak checkers see none). */
static void pg_idle_at_exit(void)
{
	atexit(pg_idle_drain);
}

/* 1 when s was kept for a later open. */
static int pg_idle_put(struct isc_store *s)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int kept = 0;

	if (!s->url || !s->db || s->broken || s->depth > 0 || isc_db_in_transaction(s->db))
		return 0;
	pthread_once(&once, pg_idle_at_exit);
	pthread_mutex_lock(&pg_idle_lock);
	pg_idle_forget_inherited();
	if (pg_idle_n < PG_IDLE_MAX) {
		pg_idle[pg_idle_n++] = s;
		kept = 1;
	}
	pthread_mutex_unlock(&pg_idle_lock);
	return kept;
}

/*
 * one_thread: the connection is used by one thread only (SQLite then takes no mutex).
 * given_url: the store at this URL (isc_store_open_url) rather than home's; it may
 * also be "sqlite:/path", a file.
 */
static int store_open(const char *home, const char *given_url, int create, size_t migrate_to,
                      int one_thread, struct isc_store **out, struct isc_err *err)
{
	struct isc_store *s;
	char *url;
	int rc;

	*out = NULL;
	if (given_url && strncmp(given_url, "sqlite:/", 8) != 0 &&
	    isc_store_url_check(given_url, err))
		return err->code;
	if ((!given_url || !strcmp(given_url, "sqlite:")) && (rc = ensure_home(home, create, err)))
		return rc;
	if (given_url)
		url = strdup(given_url);
	else if (!(url = isc_store_url_resolve(home, err)))
		return err->code ? err->code : ISC_EINVALID;
	s = calloc(1, sizeof(*s));
	if (!url || !s || !(s->home = strdup(home))) {
		free(s);
		free(url);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (strncmp(url, "sqlite:", 7) == 0) {
		rc = open_sqlite(s, url[7] ? url + 7 : NULL, create, one_thread, err);
		free(url);
	} else {
		struct isc_store *idle = pg_idle_take(home, url);
		if (idle) {
			free(s->home);
			free(s);
			free(url);
			*out = idle;
			return 0;
		}
		s->url = url;
		rc = open_pg(s, url, create, err);
	}
	if (!rc)
		rc = migrate(s, migrate_to, err);
	if (rc) {
		s->broken = 1;
		isc_store_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int isc_store_open_at(const char *home, int create, size_t migrate_to, struct isc_store **out,
                      struct isc_err *err)
{
	return store_open(home, NULL, create, migrate_to, 0, out, err);
}

int isc_store_open_url_at(const char *home, const char *url, int create, size_t migrate_to,
                          struct isc_store **out, struct isc_err *err)
{
	return store_open(home, url, create, migrate_to, 0, out, err);
}

int isc_store_open_url(const char *home, const char *url, int create, struct isc_store **out,
                       struct isc_err *err)
{
	return store_open(home, url, create, isc_store_migration_count(), 0, out, err);
}

int isc_store_open_unshared(const char *home, struct isc_store **out, struct isc_err *err)
{
	return store_open(home, NULL, 0, isc_store_migration_count(), 1, out, err);
}

int isc_store_open(const char *home, int create, struct isc_store **out, struct isc_err *err)
{
	return isc_store_open_at(home, create, isc_store_migration_count(), out, err);
}

static void store_close(struct isc_store *s)
{
	for (size_t i = 0; i < s->n_cached; i++) {
		isc_db_finalize(s->cache[i].st);
		free(s->cache[i].sql);
	}
	isc_db_close(s->db);
	free(s->url);
	free(s->home);
	free(s);
}

void isc_store_free(struct isc_store *s)
{
	struct isc_err ignored;

	if (!s)
		return;
	isc_store_fence(s, NULL, NULL, &ignored); /* a fence is one user's, never the next's */
	if (!pg_idle_put(s))
		store_close(s);
}

/*
 * SQLite: data_version counts other connections' commits, total changes this
 * one's. PostgreSQL: the text of the current snapshot (the oldest running
 * transaction, the next id, the ones in progress) changes whenever a transaction
 * anywhere on the server ends or begins writing; a commit since the last call
 * always changes it (its transaction left the in-progress list), so a cache
 * keyed by it is never stale, only now and then refilled without need.
 */
int isc_store_version(struct isc_store *s, struct isc_store_version *out, struct isc_err *err)
{
	int pg = isc_db_kind(s->db) == ISC_DB_POSTGRES;
	struct isc_db_stmt *st;
	int rc;

	/* PostgreSQL: one round trip for both versions. SQLite: two statements, no trip. */
	rc = isc_store_prepare_cached(
	    s,
	    pg ? "SELECT CAST(pg_current_snapshot() AS TEXT), (SELECT version FROM auth_version "
	         "WHERE id = 1)"
	       : "PRAGMA data_version",
	    &st, err);
	if (rc)
		return rc;
	rc = isc_db_step(st);
	out->others = out->auth = 0;
	if (rc == ISC_DB_ROW && pg) {
		out->auth = isc_db_column_int64(st, 1);
		/* FNV-1a of the snapshot's text. */
		const unsigned char *t = isc_db_column_text(st, 0);
		uint64_t h = 1469598103934665603ULL;
		for (; t && *t; t++)
			h = (h ^ *t) * 1099511628211ULL;
		out->others = (int64_t)(h >> 1);
	} else if (rc == ISC_DB_ROW) {
		out->others = isc_db_column_int64(st, 0);
	}
	isc_store_finalize(s, st);
	if (rc != ISC_DB_ROW)
		return isc_store_db_err(s, rc, "reading the data version", err);
	/*
	 * After data_version: a commit in between makes the auth version newer than
	 * data_version says, and the next call sees data_version changed, never the reverse.
	 */
	if (!pg) {
		rc = isc_store_prepare_cached(s, "SELECT version FROM auth_version WHERE id = 1",
		                              &st, err);
		if (rc)
			return rc;
		rc = isc_db_step(st);
		if (rc == ISC_DB_ROW)
			out->auth = isc_db_column_int64(st, 0);
		isc_store_finalize(s, st);
		if (rc != ISC_DB_ROW)
			return isc_store_db_err(s, rc, "reading the auth version", err);
	}
	out->own = isc_db_total_changes(s->db);
	return 0;
}

int isc_store_was_created(const struct isc_store *s)
{
	return s->created;
}

int isc_store_is_postgres(const struct isc_store *s)
{
	return isc_db_kind(s->db) == ISC_DB_POSTGRES;
}

struct isc_db *isc_store_db(struct isc_store *s)
{
	return s->db;
}

const char *isc_store_home(const struct isc_store *s)
{
	return s->home;
}

char *isc_store_new_id(const char *prefix)
{
	unsigned char raw[8];
	char *out;
	size_t plen = strlen(prefix), i;

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return NULL;
	out = malloc(plen + 2 * sizeof(raw) + 1);
	if (!out)
		return NULL;
	memcpy(out, prefix, plen);
	for (i = 0; i < sizeof(raw); i++)
		snprintf(out + plen + 2 * i, 3, "%02x", raw[i]);
	return out;
}
