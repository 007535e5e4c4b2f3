/*
 * store/db.h over PostgreSQL with libpq (see db_pg.h for how db.c dispatches
 * here).
 *
 * A statement runs when it is first stepped after prepare or reset: one
 * PQexecParams (or, for ISC_DB_PREPARE_PERSISTENT, a server-side prepared
 * statement made once with PQprepare and run with PQexecPrepared, which saves
 * the server's parse and plan on hot paths). Its whole result comes back at
 * once, in text format, and each step hands out the next row, as SQLite's
 * step does. Parameters are sent as db.h says: integers as int8 text, text
 * untyped (the server types it from its place), blobs as bytea in binary.
 *
 * Where PostgreSQL and SQLite differ, the store sees SQLite's behaviour or an
 * error, never a silent change: text that is not UTF-8 is repaired (PostgreSQL
 * refuses it), a COMMIT that PostgreSQL turned into a ROLLBACK (a statement
 * of the transaction failed) is an error, and a lost connection fails the
 * call that finds it and is made again for the next one.
 *
 * The server is expected to sort text bytewise (lc_collate C or POSIX), as
 * SQLite does: the store's listings and cursors compare ids and names, and
 * tests/pg/pg-server initialises its servers with --locale=C. A server with
 * another collation still works, only its orders of text may differ from
 * SQLite's.
 */
#include "store/db_pg.h"

#include <libpq-fe.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Type OIDs of PostgreSQL's catalogue (pg_type.dat); libpq does not export them. */
#define OID_BOOL    16
#define OID_BYTEA   17
#define OID_INT8    20
#define OID_INT2    21
#define OID_INT4    23
#define OID_OID     26
#define OID_NUMERIC 1700

/* SQLite's largest parameter number (SQLITE_MAX_VARIABLE_NUMBER's default). */
#define MAX_PARAMS 32766

#define ERRMSG_MAX 512

struct isc_db_pg {
	enum isc_db_kind kind; /* first member: ISC_DB_POSTGRES (db_pg.h) */
	PGconn *conn;
	int64_t changes;
	int64_t total_changes;
	unsigned long next_name; /* numbers the server-side prepared statements */
	unsigned long session;   /* counts reconnections: prepared statements die with a session */
	int disowned;            /* a forked child's copy of its parent's session (isc_db_disown) */
	struct isc_db_write_guard guard; /* around writes outside a transaction (before: set) */
	char errmsg[ERRMSG_MAX];
	struct named *named; /* the session's statements prepared by text (find_named) */
	size_t n_named;
	unsigned long named_session; /* the session they were prepared in */
	int transient;               /* the last failure is one to retry (isc_db_pg_transient) */
	/*
	 * The connection was lost inside a transaction: the store still believes it is
	 * in one, but the server ended it. Every command fails (transient) until the
	 * store's ROLLBACK, which clears this: a reconnected session must never run the
	 * rest of a transaction's statements one by one, outside any transaction.
	 */
	int lost_txn;
	int reconnect_failed; /* the last reconnection failed: the next tries once, no backoff */
};

/*
 * A statement the server has parsed and planned once for this session, found by
 * its text and parameter types: most of the store's statements are prepared for
 * one call and finalized, and sending each with PQexecParams had the server parse
 * and plan it on every call (half of its CPU for an API status call).
 */
struct named {
	char *sql;
	Oid *types;
	int n;
	char name[32];
};

#define NAMED_MAX 512

struct param {
	char *value; /* owned; NULL binds NULL */
	int length;  /* bytes of a blob (binary format) */
	int format;  /* 0 text, 1 binary */
	Oid type;    /* 0: untyped, the server infers it */
};

struct isc_db_stmt_pg {
	enum isc_db_kind kind; /* first member: ISC_DB_POSTGRES (db_pg.h) */
	struct isc_db_pg *db;
	char *sql;    /* as the store wrote it (isc_db_sql) */
	char *pg_sql; /* with $N placeholders */
	int nparams;
	struct param *params;      /* nparams of them */
	unsigned char *referenced; /* per parameter: 1 when the SQL names it */

	int persistent;
	char name[32];         /* the server-side statement, when prepared */
	Oid *prepared_types;   /* the types it was prepared with */
	int prepared;          /* 1 once PQprepare succeeded */
	unsigned long session; /* the connection's session it was prepared in */
	PGresult *res;         /* the running execution's result, or NULL */
	int row;               /* the row the last ISC_DB_ROW handed out */
	unsigned char **blobs; /* per column of the current row: decoded bytea */
	size_t *blob_lens;     /* their lengths */
	int ncols;             /* columns of res (size of blobs) */
	int finished;          /* the execution handed out ISC_DB_DONE or an error */
	int writes;            /* INSERT, UPDATE, DELETE, MERGE (or a WITH holding one) */
};

static struct isc_db_pg *db_of(struct isc_db *db)
{
	return (struct isc_db_pg *)db;
}

static struct isc_db_stmt_pg *stmt_of(struct isc_db_stmt *st)
{
	return (struct isc_db_stmt_pg *)st;
}

static const struct isc_db_stmt_pg *cstmt_of(const struct isc_db_stmt *st)
{
	return (const struct isc_db_stmt_pg *)st;
}

static void set_errmsg(struct isc_db_pg *db, const char *msg)
{
	size_t n;

	snprintf(db->errmsg, sizeof(db->errmsg), "%s", msg && *msg ? msg : "unknown error");
	/* libpq's messages end in a newline and may have several lines; the store's are one. */
	n = strlen(db->errmsg);
	while (n > 0 && (db->errmsg[n - 1] == '\n' || db->errmsg[n - 1] == '\r'))
		db->errmsg[--n] = '\0';
	for (char *p = db->errmsg; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
}

int isc_db_pg_sqlstate_transient(const char *state)
{
	static const char *const codes[] = {
	    "40001", /* serialization_failure: retry the whole transaction */
	    "40P01", /* deadlock_detected: retry the whole transaction */
	    "55P03", /* lock_not_available: retry later */
	    "57P01", /* admin_shutdown: reconnect, retry */
	    "57P02", /* crash_shutdown: reconnect with backoff */
	    "57P03", /* cannot_connect_now (the server is starting) */
	    "57P05", /* idle_session_timeout (PostgreSQL 14+) */
	    "53300", /* too_many_connections: backoff, retry */
	    "25P03", /* idle_in_transaction_session_timeout ended the session */
	};

	if (!state)
		return 0;
	if (strncmp(state, "08", 2) == 0) /* connection_exception and its subclasses */
		return 1;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(state, codes[i]) == 0)
			return 1;
	return 0;
}

int isc_db_pg_failure_transient(const char *state, int connection_bad)
{
	/*
	 * libpq's own errors (a connection lost on the client side) carry no SQLSTATE:
	 * the connection's status says it (faults-facts.md).
	 */
	return isc_db_pg_sqlstate_transient(state) || connection_bad;
}

/*
 * The result code of a failed command, and its message: the server's primary
 * message (never the statement's parameters, nor the connection string).
 * SQLSTATE class 23 (integrity constraint violation, which the ledger's and
 * audit's triggers raise as restrict_violation) is ISC_DB_CONSTRAINT, as
 * SQLite's constraint and RAISE(ABORT) failures are.
 */
static int fail_result(struct isc_db_pg *db, const PGresult *res)
{
	const char *state, *primary;

	if (!res) {
		/* No result at all: libpq could not allocate one, or the connection broke. */
		if (PQstatus(db->conn) != CONNECTION_OK) {
			set_errmsg(db, PQerrorMessage(db->conn));
			db->transient = 1;
			return ISC_DB_ERROR;
		}
		set_errmsg(db, "out of memory");
		return ISC_DB_NOMEM;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	set_errmsg(db, primary ? primary : PQresultErrorMessage(res));
	db->transient = isc_db_pg_failure_transient(state, PQstatus(db->conn) == CONNECTION_BAD);
	if (state && strncmp(state, "23", 2) == 0)
		return ISC_DB_CONSTRAINT;
	if (state && strcmp(state, "53200") == 0) /* out_of_memory */
		return ISC_DB_NOMEM;
	return ISC_DB_ERROR;
}

/* The changes of a finished command: only INSERT, UPDATE, DELETE and MERGE count, as in SQLite. */
static void count_changes(struct isc_db_pg *db, PGresult *res)
{
	const char *status = PQcmdStatus(res);
	const char *tuples = PQcmdTuples(res);

	if (!status || !tuples || !*tuples)
		return;
	if (strncmp(status, "INSERT ", 7) != 0 && strncmp(status, "UPDATE ", 7) != 0 &&
	    strncmp(status, "DELETE ", 7) != 0 && strncmp(status, "MERGE ", 6) != 0)
		return;
	db->changes = strtoll(tuples, NULL, 10);
	db->total_changes += db->changes;
}

/*
 * Redacts, in a libpq message about conninfo, every quoted part: libpq quotes
 * the piece of the connection string it could not parse, which may be (or
 * hold) the password.
 */
static void redact_quoted(char *msg)
{
	char *p = msg, *end;

	while ((p = strchr(p, '"')) != NULL) {
		end = strchr(p + 1, '"');
		if (!end)
			break;
		memmove(p + 2, end + 1, strlen(end + 1) + 1);
		p[1] = '"';
		p += 2;
	}
}

/* Replaces each occurrence of secret in msg with "***". */
static void redact_secret(char *msg, size_t size, const char *secret)
{
	size_t n;
	char *p;

	if (!secret || !*secret)
		return;
	n = strlen(secret);
	for (p = strstr(msg, secret); p; p = strstr(p, secret)) {
		if (strlen(msg) - n + 3 >= size) {
			/* No room for the marker: cut the message before the secret. */
			*p = '\0';
			break;
		}
		memmove(p + 3, p + n, strlen(p + n) + 1);
		memcpy(p, "***", 3);
		p += 3;
	}
}

/*
 * No statement or idle transaction holds its locks for long: a replica that
 * hangs or forgets a transaction frees the rows others wait for. Every write
 * transaction holds the store's one write lock (store.c), and no transaction of
 * the store waits on anything but the database, so one idle for 5 s is a frozen
 * replica (a stopped process, a stalled host): the server ends it, and the other
 * replicas write again well within the 10 s a takeover may take (docs/ha.md).
 */
static int setup_session(struct isc_db_pg *db)
{
	PGresult *res = PQexec(db->conn, "SET statement_timeout = '60s';"
	                                 "SET idle_in_transaction_session_timeout = '5s';"
	                                 "SET client_min_messages = warning");
	int rc = ISC_DB_OK;

	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		rc = fail_result(db, res);
	PQclear(res);
	return rc;
}

/*
 * A connection the server closed while it sat idle (a restart, pg_terminate_backend,
 * idle_session_timeout) still reads CONNECTION_OK until libpq next reads from it:
 * without looking, the next command is sent into a dead socket and fails. Reads what
 * the server sent meanwhile, without waiting (libpq's socket is non-blocking), which
 * turns a closed connection into CONNECTION_BAD. Notices are consumed; a pending
 * result is never there between the store's commands.
 */
static void look_at_socket(struct isc_db_pg *db)
{
	struct pollfd p = {.fd = PQsocket(db->conn), .events = POLLIN};

	if (PQstatus(db->conn) != CONNECTION_OK)
		return;
	if (p.fd < 0 || db->disowned)
		return;
	/*
	 * A server ending the session sends its FATAL message, then closes: one read takes
	 * the message, the next finds the end (CONNECTION_BAD). A few reads at most, never
	 * a wait.
	 */
	for (int i = 0; i < 4 && PQstatus(db->conn) == CONNECTION_OK; i++) {
		p.revents = 0;
		if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			break;
		if (!PQconsumeInput(db->conn))
			break;
	}
}

/*
 * Connects again when the connection is gone: a few tries with a growing wait (a
 * restarting server refuses connections, or answers 57P03, for a moment), so one
 * restart costs the call a pause rather than its failure. After an outage outlasted
 * them, each later call tries once, without waiting: a long outage must not stall
 * every caller for the whole backoff. Returns 1 when connected.
 */
static int reconnect(struct isc_db_pg *db)
{
	static const int waits_ms[] = {0, 100, 300, 600, 1000};
	int tries = db->reconnect_failed ? 1 : (int)(sizeof(waits_ms) / sizeof(waits_ms[0]));
	char msg[ERRMSG_MAX];

	for (int i = 0; i < tries; i++) {
		if (waits_ms[i])
			usleep((useconds_t)waits_ms[i] * 1000);
		PQreset(db->conn);
		if (PQstatus(db->conn) != CONNECTION_OK)
			continue;
		db->session++;
		/* Keep the failed call's message, not the set-up's. */
		memcpy(msg, db->errmsg, sizeof(msg));
		if (setup_session(db) != ISC_DB_OK) {
			memcpy(db->errmsg, msg, sizeof(msg));
			continue;
		}
		memcpy(db->errmsg, msg, sizeof(msg));
		db->reconnect_failed = 0;
		return 1;
	}
	db->session++; /* whatever was prepared went with the old session */
	db->reconnect_failed = 1;
	return 0;
}

/*
 * Before each command, and after a failed one: when the connection itself is gone
 * (the server restarted, or ended the session after
 * idle_in_transaction_session_timeout), connects again, so this or the next call
 * works. A failed call is not repeated here: the server may have run it before the
 * connection broke. A transaction open at the loss is gone with the old session,
 * as are its prepared statements (each is prepared again when next run); the store
 * learns of the transaction through lost_txn. Returns 1 when the connection is up.
 */
static int ensure_connected(struct isc_db_pg *db)
{
	PGTransactionStatusType was = PQtransactionStatus(db->conn);

	if (db->disowned)
		return 0;
	look_at_socket(db);
	if (PQstatus(db->conn) == CONNECTION_OK)
		return 1;
	/* UNKNOWN: libpq already saw the loss; the command that saw it set lost_txn. */
	if (was == PQTRANS_INTRANS || was == PQTRANS_INERROR || was == PQTRANS_ACTIVE)
		db->lost_txn = 1;
	return reconnect(db);
}

/* Sets the failure of a command refused because the connection was lost inside its transaction. */
static int fail_lost_txn(struct isc_db_pg *db)
{
	set_errmsg(db, "the connection to the server was lost inside a transaction; it was rolled "
	               "back");
	db->transient = 1;
	return ISC_DB_ERROR;
}

/* Marks the transaction lost when the command that just failed lost the connection in one. */
static void note_lost(struct isc_db_pg *db, PGTransactionStatusType before, const char *sql)
{
	int begins = sql && strncasecmp(sql + strspn(sql, " \t\n"), "BEGIN", 5) == 0;

	if (PQstatus(db->conn) != CONNECTION_BAD)
		return;
	if (before == PQTRANS_INTRANS || before == PQTRANS_INERROR || begins)
		db->lost_txn = 1;
}

int isc_db_pg_check(struct isc_db *dbp)
{
	struct isc_db_pg *db = db_of(dbp);

	if (db->lost_txn)
		return ISC_DB_ERROR;
	return ensure_connected(db) ? ISC_DB_OK : ISC_DB_ERROR;
}

int isc_db_pg_transient(struct isc_db *dbp)
{
	return db_of(dbp)->transient;
}

/*
 * A failed connect carries no SQLSTATE (libpq has none for it): a server that is down,
 * restarting ("the database system is starting up", 57P03, or shutting down) or full
 * (53300) passes; one that refused who we are or what we asked for does not, and is
 * reported as the configuration error it is.
 */
static int connect_failure_passes(const char *msg)
{
	static const char *const lasting[] = {"authentication",    "does not exist",
	                                      "permission denied", "no password supplied",
	                                      "invalid",           "SSL"};

	for (size_t i = 0; i < sizeof(lasting) / sizeof(lasting[0]); i++)
		if (strstr(msg, lasting[i]))
			return 0;
	return 1;
}

/* Frees a copy of the password, wiped first. */
static void forget(char *secret)
{
	if (secret)
		explicit_bzero(secret, strlen(secret));
	free(secret);
}

int isc_db_open_pg(const char *conninfo, struct isc_db **out, struct isc_err *err)
{
	/*
	 * Defaults the conninfo's own settings override (libpq takes the last value
	 * of a keyword, and the expanded conninfo comes last): a server that does not
	 * answer fails the connect (and each reconnect) in 10 s rather than after
	 * the system's TCP timeout, and pg_stat_activity names the client.
	 */
	const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
	const char *values[] = {"10", "isc", NULL, NULL};
	char msg[ERRMSG_MAX], *parse_err = NULL, *password = NULL;
	PQconninfoOption *opts, *o;
	struct isc_db_pg *db;

	*out = NULL;
	/* Parse first: its errors must not echo the string, and the password is redacted below. */
	opts = PQconninfoParse(conninfo ? conninfo : "", &parse_err);
	if (!opts) {
		if (!parse_err)
			return isc_err_set(err, ISC_ENOMEM, "store: out of memory");
		snprintf(msg, sizeof(msg), "%s", parse_err);
		PQfreemem(parse_err);
		redact_quoted(msg);
		msg[strcspn(msg, "\n")] = '\0';
		return isc_err_set(err, ISC_EINVALID, "store: PostgreSQL connection string: %s",
		                   msg);
	}
	for (o = opts; o->keyword; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
			password = strdup(o->val);
	PQconninfoFree(opts);

	db = calloc(1, sizeof(*db));
	if (!db) {
		forget(password);
		return isc_err_set(err, ISC_ENOMEM, "store: out of memory");
	}
	db->kind = ISC_DB_POSTGRES;
	values[2] = conninfo;
	db->conn = PQconnectdbParams(keys, values, 1);
	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
		snprintf(msg, sizeof(msg), "%s",
		         db->conn ? PQerrorMessage(db->conn) : "out of memory");
		redact_secret(msg, sizeof(msg), password);
		forget(password);
		for (char *p = msg; *p; p++)
			if (*p == '\n')
				*p = ' ';
		while (*msg && msg[strlen(msg) - 1] == ' ')
			msg[strlen(msg) - 1] = '\0';
		PQfinish(db->conn);
		free(db);
		return isc_err_set(err, connect_failure_passes(msg) ? ISC_ESTORE : ISC_EIO,
		                   "store: connecting to PostgreSQL: %s", msg);
	}
	forget(password);
	if (setup_session(db) != ISC_DB_OK) {
		isc_err_set(err, ISC_EIO, "store: setting up the PostgreSQL session: %s",
		            db->errmsg);
		PQfinish(db->conn);
		free(db);
		return ISC_EIO;
	}
	*out = (struct isc_db *)db;
	return 0;
}

static void named_clear(struct isc_db_pg *db)
{
	for (size_t i = 0; i < db->n_named; i++) {
		free(db->named[i].sql);
		free(db->named[i].types);
	}
	free(db->named);
	db->named = NULL;
	db->n_named = 0;
}

void isc_db_pg_close(struct isc_db *dbp)
{
	struct isc_db_pg *db = db_of(dbp);

	if (!db)
		return;
	named_clear(db);
	if (db->disowned < 0) {
		/* Its socket could not be taken from the session: never spoken on, not freed. */
		free(db);
		return;
	}
	PQfinish(db->conn);
	free(db);
}

/*
 * After fork, the child's copy of a connection shares the parent's socket: a
 * statement sent from the child mixes the two processes' messages on one session
 * (each then reads answers meant for the other, or waits for ever), and PQfinish's
 * goodbye would end the parent's session. So the child's descriptor is pointed at
 * /dev/null: nothing is deallocated on it, and the close frees libpq's memory and
 * says its goodbye to nobody. Without /dev/null the connection is left as it is
 * (its memory is then the child's small leak rather than the parent's session).
 */
void isc_db_pg_disown(struct isc_db *dbp)
{
	struct isc_db_pg *db = db_of(dbp);
	int fd, null;

	if (!db || db->disowned)
		return;
	fd = PQsocket(db->conn);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		db->disowned = 1; /* no socket: PQfinish sends nothing */
	} else if (null >= 0 && dup2(null, fd) == fd) {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		db->disowned = 1;
	} else {
		db->disowned = -1;
	}
	if (null >= 0)
		close(null);
}

enum isc_db_kind isc_db_pg_kind(const struct isc_db *db)
{
	(void)db;
	return ISC_DB_POSTGRES;
}

/* 1 when sql is a COMMIT (or END) alone. */
static int is_commit(const char *sql)
{
	size_t n;

	sql += strspn(sql, " \t\n");
	n = strncasecmp(sql, "COMMIT", 6) == 0 ? 6 : strncasecmp(sql, "END", 3) == 0 ? 3 : 0;
	if (!n)
		return 0;
	sql += n;
	sql += strspn(sql, " \t\n;");
	return *sql == '\0';
}

/* 1 when sql is a ROLLBACK (or ABORT) of the whole transaction, alone. */
static int is_rollback(const char *sql)
{
	size_t n;

	sql += strspn(sql, " \t\n");
	n = strncasecmp(sql, "ROLLBACK", 8) == 0 ? 8 : strncasecmp(sql, "ABORT", 5) == 0 ? 5 : 0;
	if (!n)
		return 0;
	sql += n;
	sql += strspn(sql, " \t\n;");
	return *sql == '\0';
}

int isc_db_pg_exec(struct isc_db *dbp, const char *sql)
{
	struct isc_db_pg *db = db_of(dbp);
	PGTransactionStatusType before;
	ExecStatusType status;
	PGresult *res;
	int rc = ISC_DB_OK;

	db->transient = 0;
	ensure_connected(db); /* first: it finds a transaction lost while idle */
	if (db->lost_txn) {
		/*
		 * The server rolled the transaction back with the session: the store's ROLLBACK
		 * is done already, its COMMIT fails (nothing was committed), and any other
		 * statement fails as the transaction did. A new BEGIN starts afresh.
		 */
		if (is_rollback(sql) || is_commit(sql)) {
			db->lost_txn = 0;
			return is_commit(sql) ? fail_lost_txn(db) : ISC_DB_OK;
		}
		if (strncasecmp(sql + strspn(sql, " \t\n"), "BEGIN", 5) != 0)
			return fail_lost_txn(db);
		db->lost_txn = 0;
	}
	before = PQtransactionStatus(db->conn);
	res = PQexec(db->conn, sql);
	status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
	    status != PGRES_EMPTY_QUERY) {
		rc = fail_result(db, res);
		note_lost(db, before, sql);
		if (is_rollback(sql))
			db->lost_txn = 0; /* a lost ROLLBACK: the server's rollback is the same */
		ensure_connected(db);
	} else if (status == PGRES_COMMAND_OK && strcmp(PQcmdStatus(res), "ROLLBACK") == 0 &&
	           is_commit(sql)) {
		/*
		 * PostgreSQL answers COMMIT of a transaction in which a statement failed
		 * by rolling it all back, without an error. SQLite would have committed
		 * the statements that succeeded: never let the store believe either.
		 */
		set_errmsg(db, "the transaction was rolled back, as a statement in it had failed");
		rc = ISC_DB_ERROR;
	} else {
		count_changes(db, res);
	}
	PQclear(res);
	return rc;
}

/*
 * Numbers the placeholders the way SQLite does: `?N` is parameter N, a plain
 * `?` the one after the largest so far. String literals, quoted identifiers
 * and comments are copied as they are. Returns the new text (or NULL without
 * memory) and the largest number in *nparams; *bad is set for a `?N` out of
 * SQLite's range.
 */
static char *translate(const char *sql, int *nparams, unsigned char **referenced, int *bad)
{
	size_t len = strlen(sql);
	/* A 1-character `?` becomes at most `$32766`. */
	char *out = malloc(len * 6 + 1), *o = out;
	unsigned char *ref = calloc(MAX_PARAMS + 1, 1);
	const char *p = sql;
	int max = 0;

	*bad = 0;
	if (!out || !ref) {
		free(out);
		free(ref);
		return NULL;
	}
	while (*p) {
		if (*p == '\'' || *p == '"') {
			char q = *p;
			*o++ = *p++;
			/* A doubled quote inside is an escaped one: leaving and re-entering is the
			 * same. */
			while (*p && *p != q)
				*o++ = *p++;
			if (*p)
				*o++ = *p++;
		} else if (p[0] == '-' && p[1] == '-') {
			while (*p && *p != '\n')
				*o++ = *p++;
		} else if (p[0] == '/' && p[1] == '*') {
			const char *end = strstr(p + 2, "*/");
			size_t n = end ? (size_t)(end + 2 - p) : strlen(p);
			memcpy(o, p, n);
			o += n;
			p += n;
		} else if (*p == '?') {
			long n;
			p++;
			if (*p >= '0' && *p <= '9') {
				char *end;
				errno = 0;
				n = strtol(p, &end, 10);
				if (errno || n < 1 || n > MAX_PARAMS)
					*bad = 1;
				p = end;
			} else {
				n = max + 1;
				if (n > MAX_PARAMS)
					*bad = 1;
			}
			if (*bad)
				break;
			if (n > max)
				max = (int)n;
			ref[n] = 1;
			o += sprintf(o, "$%ld", n);
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	*nparams = max;
	*referenced = ref;
	return out;
}

static void stmt_clear_result(struct isc_db_stmt_pg *st)
{
	for (int c = 0; c < st->ncols; c++) {
		PQfreemem(st->blobs[c]);
		st->blobs[c] = NULL;
	}
	free(st->blobs);
	free(st->blob_lens);
	st->blobs = NULL;
	st->blob_lens = NULL;
	st->ncols = 0;
	PQclear(st->res);
	st->res = NULL;
	st->row = -1;
	st->finished = 0;
}

/*
 * 1 when the statement writes: it starts with INSERT, UPDATE, DELETE or MERGE, or is a
 * WITH whose text holds one of them (a data-modifying CTE). The store writes no other
 * kind (no function with side effects in a SELECT).
 */
static int sql_writes(const char *sql)
{
	static const char *const verbs[] = {"INSERT", "UPDATE", "DELETE", "MERGE"};

	sql += strspn(sql, " \t\n(");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strncasecmp(sql, verbs[i], strlen(verbs[i])) == 0)
			return 1;
	if (strncasecmp(sql, "WITH", 4) != 0)
		return 0;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcasestr(sql, verbs[i]))
			return 1;
	return 0;
}

void isc_db_pg_set_write_guard(struct isc_db *dbp, const struct isc_db_write_guard *g)
{
	struct isc_db_pg *db = db_of(dbp);

	if (g)
		db->guard = *g;
	else
		memset(&db->guard, 0, sizeof(db->guard));
}

int isc_db_pg_prepare(struct isc_db *dbp, const char *sql, int flags, struct isc_db_stmt **out)
{
	struct isc_db_pg *db = db_of(dbp);
	struct isc_db_stmt_pg *st;
	int bad;

	*out = NULL;
	st = calloc(1, sizeof(*st));
	if (!st) {
		set_errmsg(db, "out of memory");
		return ISC_DB_NOMEM;
	}
	st->kind = ISC_DB_POSTGRES;
	st->db = db;
	st->row = -1;
	st->persistent = (flags & ISC_DB_PREPARE_PERSISTENT) != 0;
	st->writes = sql_writes(sql);
	st->sql = strdup(sql);
	st->pg_sql = st->sql ? translate(sql, &st->nparams, &st->referenced, &bad) : NULL;
	if (st->pg_sql) {
		/* Keep only the numbers the statement has (translate sized it for any). */
		unsigned char *ref = realloc(st->referenced, (size_t)st->nparams + 1);
		if (ref)
			st->referenced = ref;
	}
	if (!st->pg_sql) {
		free(st->sql);
		free(st);
		set_errmsg(db, "out of memory");
		return ISC_DB_NOMEM;
	}
	if (bad) {
		free(st->pg_sql);
		free(st->referenced);
		free(st->sql);
		free(st);
		set_errmsg(db, "a ?N parameter is out of range (1 to 32766)");
		return ISC_DB_ERROR;
	}
	if (st->nparams > 0) {
		st->params = calloc((size_t)st->nparams, sizeof(*st->params));
		st->prepared_types = calloc((size_t)st->nparams, sizeof(*st->prepared_types));
		if (!st->params || !st->prepared_types) {
			free(st->params);
			free(st->prepared_types);
			free(st->pg_sql);
			free(st->referenced);
			free(st->sql);
			free(st);
			set_errmsg(db, "out of memory");
			return ISC_DB_NOMEM;
		}
	}
	*out = (struct isc_db_stmt *)st;
	return ISC_DB_OK;
}

const char *isc_db_pg_sql(const struct isc_db_stmt *st)
{
	return cstmt_of(st)->sql;
}

const char *isc_db_pg_translated_sql(const struct isc_db_stmt *st)
{
	return cstmt_of(st)->pg_sql;
}

struct isc_db *isc_db_pg_handle(struct isc_db_stmt *st)
{
	return (struct isc_db *)stmt_of(st)->db;
}

int isc_db_pg_bind_parameter_count(const struct isc_db_stmt *st)
{
	return cstmt_of(st)->nparams;
}

/* Stores a copy of n bytes of value (NULL: SQL NULL) as parameter i (1-based). */
static int bind(struct isc_db_stmt_pg *st, int i, const void *value, size_t n, int format, Oid type)
{
	struct param *p;
	char *copy = NULL;

	if (i < 1 || i > st->nparams) {
		set_errmsg(st->db, "parameter index out of range");
		return ISC_DB_ERROR;
	}
	if (value) {
		/* Text is sent NUL-terminated; a blob's length is passed beside it. */
		copy = malloc(n + 1);
		if (!copy) {
			set_errmsg(st->db, "out of memory");
			return ISC_DB_NOMEM;
		}
		memcpy(copy, value, n);
		copy[n] = '\0';
	}
	p = &st->params[i - 1];
	free(p->value);
	p->value = copy;
	p->length = (int)n;
	p->format = format;
	p->type = value ? type : 0;
	return ISC_DB_OK;
}

int isc_db_pg_bind_int64(struct isc_db_stmt *st, int i, int64_t v)
{
	char text[24];
	int n = snprintf(text, sizeof(text), "%" PRId64, v);
	return bind(stmt_of(st), i, text, (size_t)n, 0, OID_INT8);
}

int isc_db_pg_bind_int(struct isc_db_stmt *st, int i, int v)
{
	return isc_db_pg_bind_int64(st, i, v);
}

/* The length of the valid UTF-8 character at s (at most n bytes), or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	size_t len, k;
	uint32_t c;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[k] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates and what lies past U+10FFFF are not characters. */
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) || c > 0x10ffff ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return len;
}

/*
 * PostgreSQL refuses text that is not UTF-8 (the database's encoding), where
 * SQLite stores any bytes: a cloud's error cut in the middle of a character
 * would fail the write of the event that quotes it. Each byte that starts no
 * valid character becomes U+FFFD, and the text ends at a NUL byte (a text
 * parameter is a C string). Returns a new string, or NULL without memory.
 */
static char *utf8_repair(const char *text, size_t n)
{
	const unsigned char *s = (const unsigned char *)text;
	char *out = malloc(n * 3 + 1), *o = out;
	size_t k = 0, len;

	if (!out)
		return NULL;
	while (k < n && s[k]) {
		len = utf8_char(s + k, n - k);
		if (len) {
			memcpy(o, s + k, len);
			o += len;
			k += len;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			k++;
		}
	}
	*o = '\0';
	return out;
}

int isc_db_pg_bind_text(struct isc_db_stmt *st, int i, const char *text, int n, int copy)
{
	size_t len, k;
	char *fixed;
	int rc;

	(void)copy; /* always copied */
	if (!text)
		return bind(stmt_of(st), i, NULL, 0, 0, 0);
	len = n < 0 ? strlen(text) : (size_t)n;
	for (k = 0; k < len && text[k] && (unsigned char)text[k] < 0x80; k++)
		;
	if (k == len) /* ASCII, the common case */
		return bind(stmt_of(st), i, text, len, 0, 0);
	fixed = utf8_repair(text, len);
	if (!fixed) {
		set_errmsg(stmt_of(st)->db, "out of memory");
		return ISC_DB_NOMEM;
	}
	rc = bind(stmt_of(st), i, fixed, strlen(fixed), 0, 0);
	free(fixed);
	return rc;
}

int isc_db_pg_bind_blob(struct isc_db_stmt *st, int i, const void *b, int n, int copy)
{
	(void)copy; /* always copied */
	/* SQLite binds NULL for a NULL pointer; a zero-length blob stays a value. */
	if (!b && n > 0)
		return bind(stmt_of(st), i, NULL, 0, 0, 0);
	return bind(stmt_of(st), i, b ? b : "", n < 0 ? 0 : (size_t)n, 1, OID_BYTEA);
}

int isc_db_pg_bind_null(struct isc_db_stmt *st, int i)
{
	return bind(stmt_of(st), i, NULL, 0, 0, 0);
}

int isc_db_pg_clear_bindings(struct isc_db_stmt *stp)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);

	for (int i = 0; i < st->nparams; i++) {
		free(st->params[i].value);
		memset(&st->params[i], 0, sizeof(st->params[i]));
	}
	return ISC_DB_OK;
}

/*
 * The type each parameter is sent with. A parameter the SQL never names (SQLite
 * lets `?3` stand without `?1` and `?2`, and the store binds one layout for
 * several statements) gets int8, as the server cannot infer a type for it and
 * would refuse the statement; its value is sent as NULL (run), as the server
 * parses every value it is sent, used or not.
 */
static Oid param_type(const struct isc_db_stmt_pg *st, int i)
{
	if (!st->referenced[i + 1])
		return OID_INT8;
	return st->params[i].type;
}

/*
 * A persistent statement is prepared on the server with the types of its
 * first run's parameters. A later run whose non-NULL values have other types
 * (text where it had an integer) gets a statement of its own types, as
 * PQexecParams would have.
 */
static int prepared_types_match(const struct isc_db_stmt_pg *st)
{
	for (int i = 0; i < st->nparams; i++)
		if (st->referenced[i + 1] && st->params[i].value &&
		    param_type(st, i) != st->prepared_types[i])
			return 0;
	return 1;
}

static void deallocate(struct isc_db_stmt_pg *st)
{
	char sql[64];
	PGresult *res;

	if (!st->prepared)
		return;
	st->prepared = 0;
	if (st->db->disowned || st->session != st->db->session ||
	    PQstatus(st->db->conn) != CONNECTION_OK)
		return; /* gone with its session, or the session is another process's */
	/* Fails (and the statement stays until the connection closes) inside a failed transaction.
	 */
	snprintf(sql, sizeof(sql), "DEALLOCATE %s", st->name);
	res = PQexec(st->db->conn, sql);
	PQclear(res);
}

/*
 * The name of sql prepared with these types in this session, prepared now if it
 * was not; NULL (the caller sends the text) when it cannot be: the cache is full,
 * memory ran out, or the server refused (then the text's run reports why).
 */
static const char *find_named(struct isc_db_pg *db, const char *sql, const Oid *types, int n)
{
	struct named *grown, *x;
	PGresult *prep;

	if (db->named_session != db->session) {
		named_clear(db); /* the server forgot them with the session */
		db->named_session = db->session;
	}
	for (size_t i = 0; i < db->n_named; i++) {
		x = &db->named[i];
		if (x->n == n && strcmp(x->sql, sql) == 0 &&
		    (n == 0 || memcmp(x->types, types, (size_t)n * sizeof(*types)) == 0))
			return x->name;
	}
	if (db->n_named == NAMED_MAX || PQtransactionStatus(db->conn) == PQTRANS_INERROR)
		return NULL;
	grown = realloc(db->named, (db->n_named + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	db->named = grown;
	x = &grown[db->n_named];
	x->n = n;
	x->sql = strdup(sql);
	x->types = malloc(n > 0 ? (size_t)n * sizeof(*types) : 1);
	if (!x->sql || !x->types) {
		free(x->sql);
		free(x->types);
		return NULL;
	}
	if (n > 0)
		memcpy(x->types, types, (size_t)n * sizeof(*types));
	snprintf(x->name, sizeof(x->name), "isc_t%lu", db->next_name++);
	prep = PQprepare(db->conn, x->name, sql, n, types);
	if (!prep || PQresultStatus(prep) != PGRES_COMMAND_OK) {
		PQclear(prep);
		free(x->sql);
		free(x->types);
		return NULL;
	}
	PQclear(prep);
	db->n_named++;
	return x->name;
}

static PGresult *run(struct isc_db_stmt_pg *st)
{
	int n = st->nparams;
	const char **values = NULL;
	int *lengths = NULL, *formats = NULL;
	Oid *types = NULL;
	PGresult *res = NULL;

	if (n > 0) {
		values = calloc((size_t)n, sizeof(*values));
		lengths = calloc((size_t)n, sizeof(*lengths));
		formats = calloc((size_t)n, sizeof(*formats));
		types = calloc((size_t)n, sizeof(*types));
		if (!values || !lengths || !formats || !types)
			goto out;
	}
	for (int i = 0; i < n; i++) {
		int used = st->referenced[i + 1];
		values[i] = used ? st->params[i].value : NULL;
		lengths[i] = used ? st->params[i].length : 0;
		formats[i] = used ? st->params[i].format : 0;
		types[i] = param_type(st, i);
	}
	if (!st->persistent) {
		const char *name = find_named(st->db, st->pg_sql, types, n);
		res = name ? PQexecPrepared(st->db->conn, name, n, values, lengths, formats, 0)
		           : PQexecParams(st->db->conn, st->pg_sql, n, types, values, lengths,
		                          formats, 0);
		goto out;
	}
	if (st->prepared && st->session != st->db->session)
		st->prepared = 0; /* its session ended: the server forgot it */
	if (st->prepared && !prepared_types_match(st))
		deallocate(st);
	if (!st->prepared) {
		PGresult *prep;
		snprintf(st->name, sizeof(st->name), "isc_%lu", st->db->next_name++);
		prep = PQprepare(st->db->conn, st->name, st->pg_sql, n, types);
		if (!prep || PQresultStatus(prep) != PGRES_COMMAND_OK) {
			res = prep;
			goto out;
		}
		PQclear(prep);
		st->prepared = 1;
		st->session = st->db->session;
		if (n > 0)
			memcpy(st->prepared_types, types, (size_t)n * sizeof(*types));
	}
	res = PQexecPrepared(st->db->conn, st->name, n, values, lengths, formats, 0);
out:
	free(values);
	free(lengths);
	free(formats);
	free(types);
	return res;
}

static void free_row_blobs(struct isc_db_stmt_pg *st)
{
	for (int c = 0; c < st->ncols; c++) {
		PQfreemem(st->blobs[c]);
		st->blobs[c] = NULL;
		st->blob_lens[c] = 0;
	}
}

int isc_db_pg_step(struct isc_db_stmt *stp)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);
	ExecStatusType status;
	int rc;

	/* Stepping a finished statement runs it again, as SQLite's step resets it itself. */
	if (st->finished)
		stmt_clear_result(st);
	if (!st->res) {
		PGTransactionStatusType before;
		struct isc_db_write_guard g = st->db->guard;
		int guarded;

		st->db->transient = 0;
		ensure_connected(st->db); /* first: it finds a transaction lost while idle */
		if (st->db->lost_txn) {
			st->finished = 1;
			return fail_lost_txn(st->db);
		}
		/* A write outside a transaction runs inside the guard's (the lease fence). */
		guarded =
		    st->writes && g.before && !isc_db_pg_in_transaction((struct isc_db *)st->db);
		if (guarded && (rc = g.before(g.ctx)) != ISC_DB_OK) {
			st->finished = 1;
			return rc;
		}
		/* After the guard's BEGIN: a connection lost from here loses its transaction. */
		before = PQtransactionStatus(st->db->conn);
		st->res = run(st);
		status = st->res ? PQresultStatus(st->res) : PGRES_FATAL_ERROR;
		if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK &&
		    status != PGRES_EMPTY_QUERY) {
			rc = fail_result(st->db, st->res);
			note_lost(st->db, before, NULL);
			ensure_connected(st->db);
			PQclear(st->res);
			st->res = NULL;
			st->finished = 1;
			if (guarded)
				g.after(g.ctx, 0);
			return rc;
		}
		count_changes(st->db, st->res);
		if (guarded && (rc = g.after(g.ctx, 1)) != ISC_DB_OK) {
			PQclear(st->res);
			st->res = NULL;
			st->finished = 1;
			return rc;
		}
		st->ncols = PQnfields(st->res);
		if (st->ncols > 0) {
			st->blobs = calloc((size_t)st->ncols, sizeof(*st->blobs));
			st->blob_lens = calloc((size_t)st->ncols, sizeof(*st->blob_lens));
			if (!st->blobs || !st->blob_lens) {
				st->ncols = 0; /* what stmt_clear_result walks: none decoded */
				stmt_clear_result(st);
				set_errmsg(st->db, "out of memory");
				return ISC_DB_NOMEM;
			}
		}
		st->row = -1;
	}
	free_row_blobs(st);
	if (st->row + 1 < PQntuples(st->res)) {
		st->row++;
		return ISC_DB_ROW;
	}
	st->finished = 1;
	return ISC_DB_DONE;
}

int isc_db_pg_reset(struct isc_db_stmt *stp)
{
	stmt_clear_result(stmt_of(stp));
	return ISC_DB_OK;
}

int isc_db_pg_finalize(struct isc_db_stmt *stp)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);

	if (!st)
		return ISC_DB_OK;
	stmt_clear_result(st);
	deallocate(st);
	isc_db_pg_clear_bindings(stp);
	free(st->params);
	free(st->prepared_types);
	free(st->referenced);
	free(st->pg_sql);
	free(st->sql);
	free(st);
	return ISC_DB_OK;
}

/* 1 when col names a column of the row the last step handed out. */
static int has_value(const struct isc_db_stmt_pg *st, int col)
{
	return st->res && st->row >= 0 && st->row < PQntuples(st->res) && col >= 0 &&
	       col < st->ncols;
}

int isc_db_pg_column_type(struct isc_db_stmt *stp, int col)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);

	if (!has_value(st, col) || PQgetisnull(st->res, st->row, col))
		return ISC_DB_NULL;
	switch (PQftype(st->res, col)) {
	case OID_BOOL:
	case OID_INT2:
	case OID_INT4:
	case OID_INT8:
	case OID_OID:
	/* SUM() of int8 is numeric: SQLite's SUM of integers is an integer. */
	case OID_NUMERIC:
		return ISC_DB_INTEGER;
	case OID_BYTEA:
		return ISC_DB_BLOB;
	default:
		return ISC_DB_TEXT;
	}
}

int64_t isc_db_pg_column_int64(struct isc_db_stmt *stp, int col)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);
	const char *v;

	if (!has_value(st, col) || PQgetisnull(st->res, st->row, col))
		return 0;
	v = PQgetvalue(st->res, st->row, col);
	if (PQftype(st->res, col) == OID_BOOL)
		return v[0] == 't';
	/* Like SQLite, the leading integer of the text (0 when there is none). */
	return strtoll(v, NULL, 10);
}

int isc_db_pg_column_int(struct isc_db_stmt *st, int col)
{
	return (int)isc_db_pg_column_int64(st, col);
}

const unsigned char *isc_db_pg_column_text(struct isc_db_stmt *stp, int col)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);

	if (!has_value(st, col) || PQgetisnull(st->res, st->row, col))
		return NULL;
	return (const unsigned char *)PQgetvalue(st->res, st->row, col);
}

/* Decodes the current row's bytea value of col once; 0 or ISC_DB_NOMEM. */
static int decode_blob(struct isc_db_stmt_pg *st, int col)
{
	size_t n;
	unsigned char *b;

	if (st->blobs[col])
		return 0;
	b = PQunescapeBytea((const unsigned char *)PQgetvalue(st->res, st->row, col), &n);
	if (!b) {
		set_errmsg(st->db, "out of memory");
		return ISC_DB_NOMEM;
	}
	st->blobs[col] = b;
	st->blob_lens[col] = n;
	return 0;
}

const void *isc_db_pg_column_blob(struct isc_db_stmt *stp, int col)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);

	if (!has_value(st, col) || PQgetisnull(st->res, st->row, col))
		return NULL;
	if (PQftype(st->res, col) != OID_BYTEA) {
		/* SQLite gives a text value's bytes; NULL when empty, as for an empty blob. */
		return PQgetlength(st->res, st->row, col) > 0 ? PQgetvalue(st->res, st->row, col)
		                                              : NULL;
	}
	if (decode_blob(st, col))
		return NULL;
	/* SQLite returns NULL for a zero-length blob; the store's callers expect as much. */
	return st->blob_lens[col] > 0 ? st->blobs[col] : NULL;
}

int isc_db_pg_column_bytes(struct isc_db_stmt *stp, int col)
{
	struct isc_db_stmt_pg *st = stmt_of(stp);

	if (!has_value(st, col) || PQgetisnull(st->res, st->row, col))
		return 0;
	if (PQftype(st->res, col) != OID_BYTEA)
		return PQgetlength(st->res, st->row, col);
	if (decode_blob(st, col))
		return 0;
	return (int)st->blob_lens[col];
}

int64_t isc_db_pg_changes(struct isc_db *db)
{
	return db_of(db)->changes;
}

int64_t isc_db_pg_total_changes(struct isc_db *db)
{
	return db_of(db)->total_changes;
}

const char *isc_db_pg_errmsg(struct isc_db *db)
{
	return db_of(db)->errmsg[0] ? db_of(db)->errmsg : "not an error";
}

int isc_db_pg_in_transaction(struct isc_db *db)
{
	PGTransactionStatusType t = PQtransactionStatus(db_of(db)->conn);

	/* Lost with its connection: still the store's until its ROLLBACK. */
	if (db_of(db)->lost_txn)
		return 1;
	/* UNKNOWN: no connection, and so no transaction (it ended with the session). */
	return t != PQTRANS_IDLE && t != PQTRANS_UNKNOWN;
}
