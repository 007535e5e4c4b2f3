/*
 * Opening the store: resolve and create $ISC_HOME with safe modes, open the
 * database in WAL mode with foreign keys and a busy timeout, and bring its
 * schema up to date by running the migrations it has not seen, in order.
 */
#include "store/store_int.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <pwd.h>
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
	const char *sql;
	sqlite3_stmt *st;
	int busy; /* handed out and not yet given back by isc_store_finalize */
};

struct isc_store {
	sqlite3 *db;
	char *home;
	int depth; /* open isc_store_begin calls: 1 is the transaction, more are savepoints */
	struct cached_stmt cache[STMT_CACHE_SIZE];
	size_t n_cached;
};

#define BUSY_TIMEOUT_MS 10000

int64_t isc_store_now_ms(void)
{
	return isc_wall_ms();
}

char *isc_home_resolve(const char *explicit_home, struct isc_err *err)
{
	const char *env = getenv("ISC_HOME");
	const char *home;
	char *out;

	if (explicit_home && *explicit_home)
		return strdup(explicit_home);
	if (env && *env)
		return strdup(env);
	home = getenv("HOME");
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home) {
		isc_err_set(err, ISC_EINVALID,
		            "cannot find a home folder: set ISC_HOME or pass --home");
		return NULL;
	}
	if (asprintf(&out, "%s/.isc", home) < 0) {
		isc_err_set(err, ISC_ENOMEM, "out of memory");
		return NULL;
	}
	return out;
}

int isc_store_prepare(struct isc_store *s, const char *sql, sqlite3_stmt **out, struct isc_err *err)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, out, NULL);
	if (rc != SQLITE_OK)
		return isc_store_sqlite_err(s, rc, "preparing a statement", err);
	return 0;
}

int isc_store_prepare_cached(struct isc_store *s, const char *sql, sqlite3_stmt **out,
                             struct isc_err *err)
{
	struct cached_stmt *c;
	int rc;

	for (size_t i = 0; i < s->n_cached; i++) {
		c = &s->cache[i];
		if (c->sql != sql || strcmp(sqlite3_sql(c->st), sql) != 0)
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
	rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &c->st, NULL);
	if (rc != SQLITE_OK) {
		c->st = NULL;
		return isc_store_sqlite_err(s, rc, "preparing a statement", err);
	}
	c->sql = sql;
	c->busy = 1;
	s->n_cached++;
	*out = c->st;
	return 0;
}

void isc_store_finalize(struct isc_store *s, sqlite3_stmt *st)
{
	for (size_t i = 0; i < s->n_cached; i++) {
		if (s->cache[i].st != st)
			continue;
		/* Reset ends the statement's read, so no snapshot outlives the call. */
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		s->cache[i].busy = 0;
		return;
	}
	sqlite3_finalize(st);
}

int isc_store_sqlite_err(struct isc_store *s, int rc, const char *what, struct isc_err *err)
{
	int primary = rc & 0xff;
	int code = primary == SQLITE_CONSTRAINT ? ISC_ECONFLICT
	           : primary == SQLITE_NOMEM    ? ISC_ENOMEM
	                                        : ISC_EIO;
	return isc_err_set(err, code, "store: %s: %s", what, sqlite3_errmsg(s->db));
}

char *isc_store_col_text(sqlite3_stmt *st, int col, int *oom)
{
	const unsigned char *t = sqlite3_column_text(st, col);
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

int isc_store_read_rows(struct isc_store *s, sqlite3_stmt *st, size_t size,
                        isc_store_row_fn from_row, isc_store_rec_cleanup_fn cleanup,
                        const char *what, void **out, size_t *n, struct isc_err *err)
{
	char *list = NULL;
	size_t count = 0, cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
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
	if (rc != SQLITE_DONE) {
		rc = isc_store_sqlite_err(s, rc, what, err);
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

int isc_store_read_one(struct isc_store *s, sqlite3_stmt *st, isc_store_row_fn from_row,
                       isc_store_rec_cleanup_fn cleanup, void *rec, size_t size, const char *what,
                       struct isc_err *err)
{
	int rc = sqlite3_step(st);

	memset(rec, 0, size);
	if (rc == SQLITE_ROW) {
		rc = 0;
		if (from_row(st, rec)) {
			cleanup(rec);
			memset(rec, 0, size);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	} else if (rc == SQLITE_DONE) {
		rc = ISC_ENOTFOUND;
	} else {
		rc = isc_store_sqlite_err(s, rc, what, err);
	}
	isc_store_finalize(s, st);
	return rc;
}

static int exec_sql(struct isc_store *s, const char *sql, const char *what, struct isc_err *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		isc_err_set(err, ISC_EIO, "store: %s: %s", what, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return ISC_EIO;
	}
	return 0;
}

/*
 * Transactions nest: the outermost isc_store_begin takes the write lock
 * (BEGIN IMMEDIATE), inner ones are savepoints. A caller that batches many
 * small writes (the meter's charges of a tick, a describe's node updates)
 * holds the lock once for all of them, and a step inside the batch that fails
 * rolls back to its own savepoint without undoing the others.
 */
int isc_store_begin(struct isc_store *s, struct isc_err *err)
{
	char sql[32];
	int rc;

	/* SQLite ends a transaction on its own after some errors (a full disk): start afresh. */
	if (s->depth > 0 && sqlite3_get_autocommit(s->db))
		s->depth = 0;
	if (s->depth == 0)
		rc = exec_sql(s, "BEGIN IMMEDIATE", "beginning a transaction", err);
	else {
		snprintf(sql, sizeof(sql), "SAVEPOINT sp%d", s->depth);
		rc = exec_sql(s, sql, "beginning a savepoint", err);
	}
	if (!rc)
		s->depth++;
	return rc;
}

/* On failure the transaction stays open: the caller rolls it back. */
int isc_store_commit(struct isc_store *s, struct isc_err *err)
{
	char sql[32];
	int rc;

	if (s->depth <= 1) {
		rc = exec_sql(s, "COMMIT", "committing", err);
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
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		s->depth = 0;
		return;
	}
	snprintf(sql, sizeof(sql), "ROLLBACK TO sp%d; RELEASE sp%d", s->depth - 1, s->depth - 1);
	sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	s->depth--;
}

int isc_store_latest_version(void)
{
	return (int)isc_store_migration_count();
}

int isc_store_schema_version(struct isc_store *s, int *out, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc = isc_store_prepare(s, "SELECT version FROM schema_version", &st, err);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	*out = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
	sqlite3_finalize(st);
	return 0;
}

/*
 * The schema version without taking the write lock: -1 when the store has no
 * schema_version table yet (a new store).
 */
static int version_unlocked(struct isc_store *s)
{
	sqlite3_stmt *st;
	int version = -1;
	if (sqlite3_prepare_v2(s->db, "SELECT version FROM schema_version", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return version;
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
	rc = exec_sql(
	    s,
	    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);"
	    "INSERT INTO schema_version SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version);",
	    "creating schema_version", err);
	if (rc)
		return rc;
	for (;;) {
		char what[64];
		sqlite3_stmt *st;
		int version;

		if ((rc = isc_store_begin(s, err)))
			return rc;
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
			snprintf(what, sizeof(what), "migration %d", version + 1);
			rc = exec_sql(s, isc_store_migration_sql((size_t)version), what, err);
		}
		if (!rc)
			rc =
			    isc_store_prepare(s, "UPDATE schema_version SET version = ?", &st, err);
		if (!rc) {
			sqlite3_bind_int(st, 1, version + 1);
			if (sqlite3_step(st) != SQLITE_DONE)
				rc = isc_store_sqlite_err(s, SQLITE_ERROR, what, err);
			sqlite3_finalize(st);
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

/*
 * SQLite counts every allocation in global statistics under one process-wide
 * mutex; with several API threads each on its own connection, that mutex was
 * the most contended lock in iscd. Nothing reads the statistics. Must run
 * before SQLite initialises (a later call is refused, harmlessly).
 */
static void sqlite_setup(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* open_flags: SQLITE_OPEN_FULLMUTEX, or SQLITE_OPEN_NOMUTEX for one thread's connection. */
static int store_open(const char *home, int create, size_t migrate_to, int open_flags,
                      struct isc_store **out, struct isc_err *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct isc_store *s;
	char *path = NULL;
	int rc, fd;

	*out = NULL;
	pthread_once(&once, sqlite_setup);
	if ((rc = ensure_home(home, create, err)))
		return rc;
	if (asprintf(&path, "%s/isc.db", home) < 0)
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
	s = calloc(1, sizeof(*s));
	if (!s || !(s->home = strdup(home))) {
		free(s);
		free(path);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | open_flags, NULL);
	free(path);
	if (rc != SQLITE_OK) {
		rc = isc_err_set(err, ISC_EIO, "store: cannot open database: %s",
		                 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		isc_store_free(s);
		return rc;
	}
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	rc = exec_sql(s,
	              "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;",
	              "configuring the database", err);
	if (!rc)
		rc = migrate(s, migrate_to, err);
	if (rc) {
		isc_store_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int isc_store_open_at(const char *home, int create, size_t migrate_to, struct isc_store **out,
                      struct isc_err *err)
{
	return store_open(home, create, migrate_to, SQLITE_OPEN_FULLMUTEX, out, err);
}

int isc_store_open_unshared(const char *home, struct isc_store **out, struct isc_err *err)
{
	/*
	 * SQLite's serialized mode takes the connection's mutex on every call (each step,
	 * each column read): 6% of an API page's CPU. A connection one thread alone uses
	 * needs none.
	 */
	return store_open(home, 0, isc_store_migration_count(), SQLITE_OPEN_NOMUTEX, out, err);
}

int isc_store_open(const char *home, int create, struct isc_store **out, struct isc_err *err)
{
	return isc_store_open_at(home, create, isc_store_migration_count(), out, err);
}

void isc_store_free(struct isc_store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_cached; i++)
		sqlite3_finalize(s->cache[i].st);
	sqlite3_close(s->db);
	free(s->home);
	free(s);
}

int isc_store_version(struct isc_store *s, struct isc_store_version *out, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc = isc_store_prepare_cached(s, "PRAGMA data_version", &st, err);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	out->others = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	isc_store_finalize(s, st);
	if (rc != SQLITE_ROW)
		return isc_store_sqlite_err(s, rc, "reading the data version", err);
	out->own = sqlite3_total_changes64(s->db);
	return 0;
}

struct sqlite3 *isc_store_db(struct isc_store *s)
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
