/*
 * isc store copy (see store_copy.h): the schema of both stores is read from
 * their catalogs (SQLite's sqlite_master and pragmas, PostgreSQL's pg_class,
 * pg_attribute and pg_constraint), so a table or column a later migration adds
 * is copied without a change here; the two schemas must name the same tables
 * and columns, which migrations.c and migrations_pg.c keep true.
 */
#include "store/store_copy.h"

#include "store/store_int.h"
#include "store/store_replicas.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Tables a trigger fills from another table's inserts: copying their rows
 * would count each amount twice. The destination's trigger rebuilds them while
 * the ledger is copied, and the copy then compares them with the source's.
 */
static const char *const rebuilt_tables[] = {"ledger_totals"};

/*
 * PostgreSQL only: the ledger's trigger is switched off while the ledger is
 * copied, and ledger_totals is then built in one pass with the sums of
 * migration 8's backfill (the trigger's arithmetic, summed). In the copy's one
 * transaction every trigger UPDATE of an organisation's totals row leaves a
 * row version no one may prune before the commit, and the next UPDATE walks
 * them all: a ledger of 200,000 rows over 100 organisations ran for more than
 * 15 minutes. SQLite updates in place and keeps its trigger. Either way the
 * totals are then compared with the source's, row by row.
 */
static const char PG_TRIGGER_OFF[] = "ALTER TABLE ledger DISABLE TRIGGER ledger_totals_add";
static const char PG_TOTALS_BUILD[] =
    "INSERT INTO ledger_totals (scope, key, balance_micros, reserved_micros, spent_micros, "
    "charged_micros) SELECT 'org', CAST(org_id AS TEXT), " ISC_STORE_LEDGER_TOTALS_SUMS
    " FROM ledger "
    "GROUP BY org_id;"
    "INSERT INTO ledger_totals (scope, key, balance_micros, reserved_micros, spent_micros, "
    "charged_micros) SELECT 'project', project_id, " ISC_STORE_LEDGER_TOTALS_SUMS " FROM ledger "
    "WHERE project_id IS NOT NULL GROUP BY project_id;"
    "INSERT INTO ledger_totals (scope, key, balance_micros, reserved_micros, spent_micros, "
    "charged_micros) SELECT 'experiment', experiment_id, " ISC_STORE_LEDGER_TOTALS_SUMS
    " FROM ledger "
    "WHERE experiment_id IS NOT NULL GROUP BY experiment_id;"
    "ALTER TABLE ledger ENABLE TRIGGER ledger_totals_add";

#define ISC_STR_(x) #x
#define ISC_STR(x)  ISC_STR_(x)

struct strv {
	char **v;
	size_t n;
};

struct table {
	char *name;
	char *quoted; /* "name", for SQL text and for PostgreSQL's regclass casts */
	struct strv cols;
	struct strv pk;       /* primary key columns, in key order */
	struct strv refs;     /* other tables its foreign keys reference */
	struct strv self_fks; /* its columns referencing itself: set after its rows */
	char *identity;       /* the column a sequence numbers (identity, AUTOINCREMENT) */
	int rebuilt;
	int copied;
	int64_t rows;
};

struct schema {
	struct table *t;
	size_t n;
};

static void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int strv_has(const struct strv *s, const char *x)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], x))
			return 1;
	return 0;
}

/* Appends a copy of x (NULL: ""); ISC_ENOMEM or 0. */
static int strv_push(struct strv *s, const char *x)
{
	char **v = realloc(s->v, (s->n + 1) * sizeof(*v));
	if (!v)
		return ISC_ENOMEM;
	s->v = v;
	if (!(s->v[s->n] = strdup(x ? x : "")))
		return ISC_ENOMEM;
	s->n++;
	return 0;
}

static void schema_free(struct schema *sc)
{
	for (size_t i = 0; i < sc->n; i++) {
		struct table *t = &sc->t[i];
		free(t->name);
		free(t->quoted);
		strv_free(&t->cols);
		strv_free(&t->pk);
		strv_free(&t->refs);
		strv_free(&t->self_fks);
		free(t->identity);
	}
	free(sc->t);
	sc->t = NULL;
	sc->n = 0;
}

static struct table *schema_find(const struct schema *sc, const char *name)
{
	for (size_t i = 0; i < sc->n; i++)
		if (!strcmp(sc->t[i].name, name))
			return &sc->t[i];
	return NULL;
}

static int is_pg(struct isc_db *db)
{
	return isc_db_kind(db) == ISC_DB_POSTGRES;
}

static int oom(struct isc_err *err)
{
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}

/* err from the connection's last error: "<side>: <what>: <message>". */
static int db_fail(struct isc_db *db, const char *side, const char *what, struct isc_err *err)
{
	return isc_err_set(err, ISC_EIO, "%s: %s: %s", side, what, isc_db_errmsg(db));
}

static int prepare(struct isc_db *db, const char *side, const char *sql, const char *what,
                   struct isc_db_stmt **st, struct isc_err *err)
{
	if (isc_db_prepare(db, sql, 0, st) != ISC_DB_OK) {
		*st = NULL;
		return db_fail(db, side, what, err);
	}
	return 0;
}

/* "name" with any " doubled: every table and column name goes into SQL text so. */
static char *quote_ident(const char *name)
{
	size_t n = strlen(name), k = 0;
	char *q = malloc(2 * n + 3);
	if (!q)
		return NULL;
	q[k++] = '"';
	for (const char *c = name; *c; c++) {
		if (*c == '"')
			q[k++] = '"';
		q[k++] = *c;
	}
	q[k++] = '"';
	q[k] = 0;
	return q;
}

/* Runs a query of one text column (bound ?1 = arg when not NULL) into out. */
static int read_names(struct isc_db *db, const char *side, const char *sql, const char *arg,
                      const char *what, struct strv *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, step;

	if ((rc = prepare(db, side, sql, what, &st, err)))
		return rc;
	if (arg)
		isc_db_bind_text(st, 1, arg, -1, ISC_DB_TRANSIENT);
	while ((step = isc_db_step(st)) == ISC_DB_ROW) {
		if (strv_push(out, (const char *)isc_db_column_text(st, 0))) {
			isc_db_finalize(st);
			return oom(err);
		}
	}
	rc = step == ISC_DB_DONE ? 0 : db_fail(db, side, what, err);
	isc_db_finalize(st);
	return rc;
}

/* Runs a query of one integer (bound ?1..?2 as texts when not NULL) into *out (0 when NULL). */
static int read_int(struct isc_db *db, const char *side, const char *sql, const char *a1,
                    const char *a2, const char *what, int64_t *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, step;

	*out = 0;
	if ((rc = prepare(db, side, sql, what, &st, err)))
		return rc;
	if (a1)
		isc_db_bind_text(st, 1, a1, -1, ISC_DB_TRANSIENT);
	if (a2)
		isc_db_bind_text(st, 2, a2, -1, ISC_DB_TRANSIENT);
	step = isc_db_step(st);
	if (step == ISC_DB_ROW)
		*out = isc_db_column_int64(st, 0);
	rc = step == ISC_DB_ROW || step == ISC_DB_DONE ? 0 : db_fail(db, side, what, err);
	isc_db_finalize(st);
	return rc;
}

/* ---- reading a schema from the catalog ---- */

static const char SQ_TABLES[] = "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                "name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name";
static const char PG_TABLES[] =
    "SELECT CAST(c.relname AS TEXT) FROM pg_class c JOIN pg_namespace n ON n.oid = "
    "c.relnamespace WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
    "ORDER BY 1";

/* name, position in the primary key (0: none), numbered by a sequence (1/0) */
static const char SQ_COLUMNS[] = "SELECT name, pk, 0 FROM pragma_table_info(?1) ORDER BY cid";
static const char PG_COLUMNS[] =
    "SELECT CAST(a.attname AS TEXT), COALESCE((SELECT k.n FROM pg_index i, "
    "unnest(CAST(i.indkey AS int2[])) WITH ORDINALITY AS k(att, n) WHERE i.indrelid = "
    "a.attrelid AND i.indisprimary AND k.att = a.attnum), 0), "
    "CASE WHEN pg_get_serial_sequence(CAST(?1 AS TEXT), CAST(a.attname AS TEXT)) IS NULL "
    "THEN 0 ELSE 1 END FROM pg_attribute a WHERE a.attrelid = CAST(CAST(?1 AS TEXT) AS "
    "regclass) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

/* referenced table, referencing column */
static const char SQ_FKS[] = "SELECT \"table\", \"from\" FROM pragma_foreign_key_list(?1)";
static const char PG_FKS[] =
    "SELECT CAST(cf.relname AS TEXT), CAST(a.attname AS TEXT) FROM pg_constraint k "
    "JOIN pg_class cf ON cf.oid = k.confrelid JOIN pg_attribute a ON a.attrelid = k.conrelid "
    "AND a.attnum = ANY(k.conkey) WHERE k.contype = 'f' AND k.conrelid = "
    "CAST(CAST(?1 AS TEXT) AS regclass)";

/* SQLite numbers a rowid with a sequence only for INTEGER PRIMARY KEY AUTOINCREMENT. */
static const char SQ_AUTOINCREMENT[] =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1 AND "
    "upper(sql) LIKE '%AUTOINCREMENT%'";

static int read_columns(struct isc_db *db, const char *side, struct table *t, struct isc_err *err)
{
	struct isc_db_stmt *st;
	char what[128];
	int rc, step, max_pk = 0;
	struct {
		char *name;
		int pk;
	} *pks = NULL;
	size_t npks = 0;

	snprintf(what, sizeof(what), "reading the columns of %s", t->name);
	if ((rc = prepare(db, side, is_pg(db) ? PG_COLUMNS : SQ_COLUMNS, what, &st, err)))
		return rc;
	isc_db_bind_text(st, 1, is_pg(db) ? t->quoted : t->name, -1, ISC_DB_TRANSIENT);
	while (!rc && (step = isc_db_step(st)) == ISC_DB_ROW) {
		const char *name = (const char *)isc_db_column_text(st, 0);
		int pk = isc_db_column_int(st, 1);
		if (strv_push(&t->cols, name)) {
			rc = oom(err);
			break;
		}
		if (isc_db_column_int(st, 2) && !t->identity && !(t->identity = strdup(name)))
			rc = oom(err);
		if (pk > 0) {
			void *grown = realloc(pks, (npks + 1) * sizeof(*pks));
			if (!grown) {
				rc = oom(err);
				break;
			}
			pks = grown;
			pks[npks].name = t->cols.v[t->cols.n - 1];
			pks[npks++].pk = pk;
			if (pk > max_pk)
				max_pk = pk;
		}
	}
	if (!rc && step != ISC_DB_DONE)
		rc = db_fail(db, side, what, err);
	isc_db_finalize(st);
	/* The key's columns in key order (pk is 1-based in both catalogs). */
	for (int k = 1; !rc && k <= max_pk; k++)
		for (size_t i = 0; i < npks; i++)
			if (pks[i].pk == k && strv_push(&t->pk, pks[i].name))
				rc = oom(err);
	free(pks);
	if (!rc && !t->cols.n)
		rc = isc_err_set(err, ISC_EINVALID, "%s: table %s has no columns", side, t->name);
	if (!rc && !is_pg(db) && t->pk.n == 1) {
		int64_t autoinc;
		rc = read_int(db, side, SQ_AUTOINCREMENT, t->name, NULL, what, &autoinc, err);
		if (!rc && autoinc && !(t->identity = strdup(t->pk.v[0])))
			rc = oom(err);
	}
	return rc;
}

static int read_fks(struct isc_db *db, const char *side, struct table *t, struct isc_err *err)
{
	struct isc_db_stmt *st;
	char what[128];
	int rc, step;

	snprintf(what, sizeof(what), "reading the foreign keys of %s", t->name);
	if ((rc = prepare(db, side, is_pg(db) ? PG_FKS : SQ_FKS, what, &st, err)))
		return rc;
	isc_db_bind_text(st, 1, is_pg(db) ? t->quoted : t->name, -1, ISC_DB_TRANSIENT);
	while (!rc && (step = isc_db_step(st)) == ISC_DB_ROW) {
		const char *ref = (const char *)isc_db_column_text(st, 0);
		const char *col = (const char *)isc_db_column_text(st, 1);
		if (!ref || !col)
			continue;
		if (!strcmp(ref, t->name)) {
			if (!strv_has(&t->self_fks, col) && strv_push(&t->self_fks, col))
				rc = oom(err);
		} else if (!strv_has(&t->refs, ref) && strv_push(&t->refs, ref)) {
			rc = oom(err);
		}
	}
	if (!rc && step != ISC_DB_DONE)
		rc = db_fail(db, side, what, err);
	isc_db_finalize(st);
	return rc;
}

static int is_rebuilt(const char *name)
{
	for (size_t i = 0; i < sizeof(rebuilt_tables) / sizeof(rebuilt_tables[0]); i++)
		if (!strcmp(rebuilt_tables[i], name))
			return 1;
	return 0;
}

/*
 * Every table of the store but schema_version (each migration sets its own) and
 * auth_version (the destination's own: its triggers bump it as the tokens, users,
 * organisations and memberships are copied in, so a cache of another store's
 * version never matches it by chance; docs/security.md, "The API's caches").
 */
static int read_schema(struct isc_db *db, const char *side, struct schema *sc, struct isc_err *err)
{
	struct strv names = {0};
	int rc = read_names(db, side, is_pg(db) ? PG_TABLES : SQ_TABLES, NULL, "listing the tables",
	                    &names, err);

	memset(sc, 0, sizeof(*sc));
	if (!rc && !(sc->t = calloc(names.n ? names.n : 1, sizeof(*sc->t))))
		rc = oom(err);
	for (size_t i = 0; !rc && i < names.n; i++) {
		struct table *t;
		if (!strcmp(names.v[i], "schema_version") || !strcmp(names.v[i], "auth_version"))
			continue;
		t = &sc->t[sc->n++];
		if (!(t->name = strdup(names.v[i])) || !(t->quoted = quote_ident(t->name))) {
			rc = oom(err);
			break;
		}
		t->rebuilt = is_rebuilt(t->name);
		if (!(rc = read_columns(db, side, t, err)))
			rc = read_fks(db, side, t, err);
	}
	strv_free(&names);
	if (rc)
		schema_free(sc);
	return rc;
}

/* Both stores must name the same tables and columns (the order of columns may differ). */
static int schemas_match(const struct schema *src, const struct schema *dst, struct isc_err *err)
{
	for (size_t i = 0; i < dst->n; i++) {
		const struct table *d = &dst->t[i], *s = schema_find(src, d->name);
		if (!s)
			return isc_err_set(err, ISC_EINVALID,
			                   "the schemas differ: the destination has table %s, the "
			                   "source has not",
			                   d->name);
		if (s->cols.n != d->cols.n)
			return isc_err_set(
			    err, ISC_EINVALID,
			    "the schemas differ: table %s has %zu columns in the source, "
			    "%zu in the destination",
			    d->name, s->cols.n, d->cols.n);
		for (size_t c = 0; c < d->cols.n; c++)
			if (!strv_has(&s->cols, d->cols.v[c]))
				return isc_err_set(
				    err, ISC_EINVALID,
				    "the schemas differ: the source's table %s has no "
				    "column %s",
				    d->name, d->cols.v[c]);
	}
	for (size_t i = 0; i < src->n; i++)
		if (!schema_find(dst, src->t[i].name))
			return isc_err_set(err, ISC_EINVALID,
			                   "the schemas differ: the source has table %s, the "
			                   "destination has not",
			                   src->t[i].name);
	return 0;
}

/*
 * The tables in an order where each comes after every table it references (by
 * name among equals, so the order is the same every time). A cycle between
 * tables cannot be inserted row by row and is refused.
 */
static int copy_order(struct schema *sc, struct table ***out, struct isc_err *err)
{
	struct table **order = calloc(sc->n ? sc->n : 1, sizeof(*order));
	size_t n = 0;

	if (!order)
		return oom(err);
	for (size_t i = 0; i < sc->n; i++)
		sc->t[i].copied = 0;
	while (n < sc->n) {
		struct table *next = NULL;
		for (size_t i = 0; i < sc->n; i++) {
			struct table *t = &sc->t[i];
			int ready = !t->copied;
			for (size_t r = 0; ready && r < t->refs.n; r++) {
				const struct table *ref = schema_find(sc, t->refs.v[r]);
				ready = !ref || ref->copied;
			}
			if (ready && (!next || strcmp(t->name, next->name) < 0))
				next = t;
		}
		if (!next) {
			free(order);
			return isc_err_set(
			    err, ISC_EINVALID,
			    "the tables' foreign keys form a cycle: no order to copy "
			    "them in");
		}
		next->copied = 1;
		order[n++] = next;
	}
	*out = order;
	return 0;
}

/* ---- the checks before a copy ---- */

/*
 * Holds home's iscd.lock (daemon/iscd.c takes the same flock for its life), so
 * iscd is not running now and cannot start until the copy is done. *fd -1 when
 * the home does not exist: nothing runs there.
 */
static int lock_home(const char *home, int *fd, struct isc_err *err)
{
	char *path;
	int rc = 0;

	*fd = -1;
	if (!home || access(home, F_OK) != 0)
		return 0;
	if (asprintf(&path, "%s/iscd.lock", home) < 0)
		return oom(err);
	*fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (*fd < 0)
		rc = isc_err_set(err, ISC_EIO, "cannot open %s: %s", path, strerror(errno));
	else if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK
		         ? isc_err_set(err, ISC_ECONFLICT,
		                       "iscd is running on %s (it holds %s): stop it first; a "
		                       "store is copied while iscd is stopped",
		                       home, path)
		         : isc_err_set(err, ISC_EIO, "cannot lock %s: %s", path, strerror(errno));
		close(*fd);
		*fd = -1;
	}
	free(path);
	return rc;
}

/*
 * The folder of a "sqlite:/path" URL's file when that folder is a home other
 * than `home` (it has an iscd.lock), else NULL: its iscd must be stopped too.
 * Caller frees.
 */
static char *other_home_of(const char *url, const char *home)
{
	char *dir, *slash, *real_dir, *real_home, *lock = NULL;
	int other = 0;

	if (strncmp(url, "sqlite:/", 8) != 0 || !(dir = strdup(url + 7)))
		return NULL;
	slash = strrchr(dir, '/');
	slash[slash == dir] = 0; /* "/isc.db" is in "/" */
	real_dir = realpath(dir, NULL);
	real_home = realpath(home, NULL);
	free(dir);
	if (real_dir && (!real_home || strcmp(real_dir, real_home) != 0) &&
	    asprintf(&lock, "%s/iscd.lock", real_dir) >= 0)
		other = access(lock, F_OK) == 0;
	free(lock);
	free(real_home);
	if (!other) {
		free(real_dir);
		return NULL;
	}
	return real_dir;
}

/* A PostgreSQL store is shared by replicas: none may be live while it is copied. */
static int no_live_replica(struct isc_store *src, int64_t live_ms, struct isc_err *err)
{
	struct isc_replica *live = NULL;
	size_t n = 0;
	int rc;

	if (!isc_store_is_postgres(src))
		return 0;
	if ((rc = isc_store_replica_list_live(src, live_ms, &live, &n, err)))
		return isc_err_wrap(err, "source");
	if (n > 0)
		rc = isc_err_set(
		    err, ISC_ECONFLICT,
		    "the source store has %zu live iscd replica%s (%s on %s, pid %lld): "
		    "stop every replica first; a store is copied while iscd is stopped",
		    n, n == 1 ? "" : "s", live[0].id, live[0].host, (long long)live[0].pid);
	isc_replica_list_free(live, n);
	return rc;
}

/* Refuses a destination with any row: a copy never merges into a store in use. */
static int destination_empty(struct isc_db *db, const struct schema *sc, struct isc_err *err)
{
	for (size_t i = 0; i < sc->n; i++) {
		char *sql;
		int64_t any;
		int rc;
		if (asprintf(&sql, "SELECT COUNT(*) FROM (SELECT 1 FROM %s LIMIT 1) AS one",
		             sc->t[i].quoted) < 0)
			return oom(err);
		rc = read_int(db, "destination", sql, NULL, NULL, "checking that it is empty", &any,
		              err);
		free(sql);
		if (rc)
			return rc;
		if (any)
			return isc_err_set(
			    err, ISC_ECONFLICT,
			    "the destination is not empty (table %s has rows): a store "
			    "is copied only into a new, empty one",
			    sc->t[i].name);
	}
	return 0;
}

/* ---- copying ---- */

/* Binds column col of src's current row as parameter i of dst, by the value's own type. */
static int bind_value(struct isc_db_stmt *dst, int i, struct isc_db_stmt *src, int col,
                      const char *table, const char *column, struct isc_err *err)
{
	int type = isc_db_column_type(src, col), rc;

	switch (type) {
	case ISC_DB_NULL:
		rc = isc_db_bind_null(dst, i);
		break;
	case ISC_DB_INTEGER:
		rc = isc_db_bind_int64(dst, i, isc_db_column_int64(src, col));
		break;
	case ISC_DB_TEXT: {
		const unsigned char *text = isc_db_column_text(src, col);
		rc = isc_db_bind_text(dst, i, text ? (const char *)text : "",
		                      isc_db_column_bytes(src, col), ISC_DB_TRANSIENT);
		break;
	}
	case ISC_DB_BLOB: {
		/* An empty blob reads as a NULL pointer, which would bind NULL: bind "" of length
		 * 0. */
		const void *b = isc_db_column_blob(src, col);
		int n = isc_db_column_bytes(src, col);
		rc = isc_db_bind_blob(dst, i, b ? b : "", b ? n : 0, ISC_DB_TRANSIENT);
		break;
	}
	default:
		return isc_err_set(err, ISC_EINVALID,
		                   "table %s, column %s: a value of a type the store does not use "
		                   "(%d, floating point?)",
		                   table, column, type);
	}
	if (rc != ISC_DB_OK)
		return isc_err_set(err, ISC_EIO, "table %s, column %s: cannot bind a value: %s",
		                   table, column, isc_db_errmsg(isc_db_handle(dst)));
	return 0;
}

/* ", "-separated quoted names of cols, each with prefix/suffix; NULL when out of memory. */
static char *column_list(const struct strv *cols, const char *suffix, const char *sep)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	for (size_t i = 0; i < cols->n; i++) {
		char *q = quote_ident(cols->v[i]);
		if (!q) {
			fclose(f);
			free(text);
			return NULL;
		}
		fprintf(f, "%s%s%s", i ? sep : "", q, suffix);
		free(q);
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/*
 * Inserts every row sel gives (stepped to its end) with ins; *got counts them.
 * Columns referencing t itself go in as NULL (copy_self_reference sets them).
 */
static int insert_rows(struct isc_db *src, struct isc_db *dst, struct table *t,
                       struct isc_db_stmt *sel, struct isc_db_stmt *ins, const char *what,
                       int64_t *got, struct isc_err *err)
{
	int rc = 0, step;

	*got = 0;
	while ((step = isc_db_step(sel)) == ISC_DB_ROW) {
		for (size_t c = 0; !rc && c < t->cols.n; c++) {
			if (strv_has(&t->self_fks, t->cols.v[c]))
				rc = isc_db_bind_null(ins, (int)c + 1) == ISC_DB_OK
				         ? 0
				         : db_fail(dst, "destination", what, err);
			else
				rc = bind_value(ins, (int)c + 1, sel, (int)c, t->name, t->cols.v[c],
				                err);
		}
		if (rc)
			return rc;
		if (isc_db_step(ins) != ISC_DB_DONE || isc_db_reset(ins) != ISC_DB_OK)
			return db_fail(dst, "destination", what, err);
		(*got)++;
	}
	return step == ISC_DB_DONE ? 0 : db_fail(src, "source", what, err);
}

/*
 * PostgreSQL hands a statement's result over whole: a source table is read
 * through a cursor, this many rows at a time, so a ledger of millions of rows
 * is never held in memory at once.
 */
#define PG_FETCH_ROWS 10000

/*
 * The rows of t (by primary key), every column; columns referencing t itself
 * go in as NULL and are set once every row is in (a token's parent may come
 * after it in key order).
 */
static int copy_rows(struct isc_db *src, struct isc_db *dst, struct table *t, struct isc_err *err)
{
	struct isc_db_stmt *sel = NULL, *ins = NULL;
	char *cols = column_list(&t->cols, "", ", "), *marks = NULL, *order = NULL;
	char *sel_sql = NULL, *ins_sql = NULL, *cursor_sql = NULL, what[128];
	int rc = 0, cursor = 0;
	int64_t got;

	snprintf(what, sizeof(what), "copying %s", t->name);
	order = t->pk.n ? column_list(&t->pk, "", ", ") : strdup("1");
	if (cols && order && (marks = malloc(3 * t->cols.n + 1))) {
		marks[0] = 0;
		for (size_t i = 0; i < t->cols.n; i++)
			strcat(marks, i ? ", ?" : "?");
	}
	if (!cols || !order || !marks ||
	    asprintf(&sel_sql, "SELECT %s FROM %s ORDER BY %s", cols, t->quoted, order) < 0 ||
	    asprintf(&ins_sql, "INSERT INTO %s (%s) VALUES (%s)", t->quoted, cols, marks) < 0 ||
	    asprintf(&cursor_sql, "DECLARE isc_copy NO SCROLL CURSOR FOR %s", sel_sql) < 0) {
		sel_sql = ins_sql = cursor_sql = NULL;
		rc = oom(err);
	}
	if (!rc && is_pg(src)) {
		if (isc_db_exec(src, cursor_sql) != ISC_DB_OK)
			rc = db_fail(src, "source", what, err);
		cursor = !rc;
	}
	if (!rc)
		rc = prepare(src, "source",
		             cursor ? "FETCH FORWARD " ISC_STR(PG_FETCH_ROWS) " FROM isc_copy"
		                    : sel_sql,
		             what, &sel, err);
	if (!rc)
		rc = prepare(dst, "destination", ins_sql, what, &ins, err);
	t->rows = 0;
	/* Without a cursor one pass reads every row; with one, batches until one is empty. */
	while (!rc && !(rc = insert_rows(src, dst, t, sel, ins, what, &got, err))) {
		t->rows += got;
		if (!cursor || got == 0)
			break;
		if (isc_db_reset(sel) != ISC_DB_OK)
			rc = db_fail(src, "source", what, err);
	}
	isc_db_finalize(sel);
	isc_db_finalize(ins);
	if (cursor && isc_db_exec(src, "CLOSE isc_copy") != ISC_DB_OK && !rc)
		rc = db_fail(src, "source", what, err);
	free(cols);
	free(marks);
	free(order);
	free(sel_sql);
	free(ins_sql);
	free(cursor_sql);
	return rc;
}

/* Sets column col (one referencing t itself) of the copied rows, by primary key. */
static int copy_self_reference(struct isc_db *src, struct isc_db *dst, struct table *t,
                               const char *col, struct isc_err *err)
{
	struct isc_db_stmt *sel = NULL, *upd = NULL;
	char *qcol = quote_ident(col), *keys = column_list(&t->pk, "", ", ");
	char *where = column_list(&t->pk, " = ?", " AND "), *sel_sql = NULL, *upd_sql = NULL;
	char what[160];
	int rc = 0, step;

	snprintf(what, sizeof(what), "setting %s.%s", t->name, col);
	if (!t->pk.n)
		rc = isc_err_set(err, ISC_EINVALID,
		                 "table %s references itself but has no primary key to set it by",
		                 t->name);
	else if (!qcol || !keys || !where ||
	         asprintf(&sel_sql, "SELECT %s, %s FROM %s WHERE %s IS NOT NULL", qcol, keys,
	                  t->quoted, qcol) < 0 ||
	         asprintf(&upd_sql, "UPDATE %s SET %s = ? WHERE %s", t->quoted, qcol, where) < 0) {
		sel_sql = upd_sql = NULL;
		rc = oom(err);
	}
	if (!rc)
		rc = prepare(src, "source", sel_sql, what, &sel, err);
	if (!rc)
		rc = prepare(dst, "destination", upd_sql, what, &upd, err);
	while (!rc && (step = isc_db_step(sel)) == ISC_DB_ROW) {
		for (size_t c = 0; !rc && c <= t->pk.n; c++)
			rc = bind_value(upd, (int)c + 1, sel, (int)c, t->name,
			                c ? t->pk.v[c - 1] : col, err);
		if (!rc && isc_db_step(upd) != ISC_DB_DONE)
			rc = db_fail(dst, "destination", what, err);
		if (!rc && isc_db_changes(dst) != 1)
			rc = isc_err_set(err, ISC_EIO,
			                 "destination: %s: a row of the source is missing", what);
		if (!rc && isc_db_reset(upd) != ISC_DB_OK)
			rc = db_fail(dst, "destination", what, err);
	}
	if (!rc && step != ISC_DB_DONE)
		rc = db_fail(src, "source", what, err);
	isc_db_finalize(sel);
	isc_db_finalize(upd);
	free(qcol);
	free(keys);
	free(where);
	free(sel_sql);
	free(upd_sql);
	return rc;
}

/* ---- sequences ---- */

static const char SQ_HAS_SEQUENCES[] =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'";
static const char SQ_SEQUENCE[] = "SELECT seq FROM sqlite_sequence WHERE name = ?1";
static const char PG_SEQUENCE[] = "SELECT pg_sequence_last_value(CAST(pg_get_serial_sequence("
                                  "CAST(?1 AS TEXT), CAST(?2 AS TEXT)) AS regclass))";
static const char SQ_SET_SEQUENCE[] =
    "UPDATE sqlite_sequence SET seq = ?1 WHERE name = ?2 AND seq < ?1;"
    "INSERT INTO sqlite_sequence (name, seq) SELECT ?2, ?1 WHERE NOT EXISTS "
    "(SELECT 1 FROM sqlite_sequence WHERE name = ?2)";
static const char PG_SET_SEQUENCE[] = "SELECT setval(pg_get_serial_sequence(CAST(?2 AS TEXT), "
                                      "CAST(?3 AS TEXT)), CAST(?1 AS BIGINT))";

/* The last value the source's sequence of table.col gave (0: none, or never used). */
static int source_sequence(struct isc_db *src, const struct table *t, const char *col, int64_t *out,
                           struct isc_err *err)
{
	int64_t has;
	int rc;

	*out = 0;
	if (is_pg(src))
		return read_int(src, "source", PG_SEQUENCE, t->quoted, col, "reading a sequence",
		                out, err);
	if ((rc = read_int(src, "source", SQ_HAS_SEQUENCES, NULL, NULL, "reading the sequences",
	                   &has, err)) ||
	    !has)
		return rc;
	return read_int(src, "source", SQ_SEQUENCE, t->name, NULL, "reading a sequence", out, err);
}

/*
 * Each of the destination's sequences past both the largest copied id and the
 * source's own last value (an id of a removed row is never given again, as
 * AUTOINCREMENT promises): PostgreSQL's setval, SQLite's sqlite_sequence.
 */
static int set_sequence(struct isc_db *src, struct isc_db *dst, const struct table *t,
                        struct isc_store_copy_report *r, struct isc_err *err)
{
	struct isc_store_copy_sequence *grown;
	struct isc_db_stmt *st;
	char *sql, *qcol = quote_ident(t->identity);
	int64_t max_id = 0, last = 0;
	int rc;

	if (!qcol || asprintf(&sql, "SELECT COALESCE(MAX(%s), 0) FROM %s", qcol, t->quoted) < 0) {
		free(qcol);
		return oom(err);
	}
	free(qcol);
	rc = read_int(dst, "destination", sql, NULL, NULL, "reading the largest id", &max_id, err);
	free(sql);
	if (!rc)
		rc = source_sequence(src, t, t->identity, &last, err);
	if (rc)
		return rc;
	if (max_id > last)
		last = max_id;
	if (last <= 0)
		return 0;
	if (is_pg(dst)) {
		if ((rc = prepare(dst, "destination", PG_SET_SEQUENCE, "setting a sequence", &st,
		                  err)))
			return rc;
		isc_db_bind_int64(st, 1, last);
		isc_db_bind_text(st, 2, t->quoted, -1, ISC_DB_TRANSIENT);
		isc_db_bind_text(st, 3, t->identity, -1, ISC_DB_TRANSIENT);
		rc = isc_db_step(st);
		rc = rc == ISC_DB_ROW || rc == ISC_DB_DONE
		         ? 0
		         : db_fail(dst, "destination", "setting a sequence", err);
		isc_db_finalize(st);
	} else {
		/* Two statements: isc_db_prepare takes one at a time. */
		const char *second = strchr(SQ_SET_SEQUENCE, ';') + 1;
		char *first = strndup(SQ_SET_SEQUENCE, (size_t)(second - 1 - SQ_SET_SEQUENCE));
		const char *texts[2] = {first, second};
		if (!first)
			return oom(err);
		for (int k = 0; !rc && k < 2; k++) {
			if ((rc = prepare(dst, "destination", texts[k], "setting a sequence", &st,
			                  err)))
				break;
			isc_db_bind_int64(st, 1, last);
			isc_db_bind_text(st, 2, t->name, -1, ISC_DB_TRANSIENT);
			if (isc_db_step(st) != ISC_DB_DONE)
				rc = db_fail(dst, "destination", "setting a sequence", err);
			isc_db_finalize(st);
		}
		free(first);
	}
	if (rc)
		return rc;
	grown = realloc(r->sequences, (r->n_sequences + 1) * sizeof(*grown));
	if (!grown)
		return oom(err);
	r->sequences = grown;
	grown = &r->sequences[r->n_sequences];
	memset(grown, 0, sizeof(*grown));
	grown->last = last;
	r->n_sequences++;
	if (!(grown->table = strdup(t->name)) || !(grown->column = strdup(t->identity)))
		return oom(err);
	return 0;
}

/* ---- verifying ---- */

static int count_rows(struct isc_db *db, const char *side, const struct table *t, int64_t *out,
                      struct isc_err *err)
{
	char *sql;
	int rc;

	if (asprintf(&sql, "SELECT COUNT(*) FROM %s", t->quoted) < 0)
		return oom(err);
	rc = read_int(db, side, sql, NULL, NULL, "counting rows", out, err);
	free(sql);
	return rc;
}

/* Text sorted the same way on both (PostgreSQL's default collation is the locale's). */
#define PG_C(col) col " COLLATE \"C\""

static const char SQ_TOTALS[] =
    "SELECT scope, key, balance_micros, reserved_micros, spent_micros, charged_micros "
    "FROM ledger_totals ORDER BY scope, key";
static const char PG_TOTALS[] =
    "SELECT scope, key, balance_micros, reserved_micros, spent_micros, charged_micros "
    "FROM ledger_totals ORDER BY " PG_C("scope") ", " PG_C("key");
static const char SQ_LEDGER_SUMS[] =
    "SELECT kind, billing, COUNT(*), COALESCE(SUM(amount_micros), 0) FROM ledger "
    "GROUP BY kind, billing ORDER BY kind, billing";
static const char PG_LEDGER_SUMS[] =
    "SELECT kind, billing, COUNT(*), COALESCE(SUM(amount_micros), 0) FROM ledger "
    "GROUP BY kind, billing ORDER BY " PG_C("kind") ", " PG_C("billing");

/*
 * Steps the same query on both stores row by row: every row must be equal,
 * column by column (text and integers; the queries above read no blob). Each
 * equal row is handed to on_row (may be NULL) with the source's statement.
 */
static int compare_rows(struct isc_db *src, struct isc_db *dst, const char *sq_sql,
                        const char *pg_sql, const char *what, int ncols,
                        int (*on_row)(struct isc_db_stmt *st, void *arg, struct isc_err *err),
                        void *arg, int64_t *rows, struct isc_err *err)
{
	struct isc_db_stmt *a = NULL, *b = NULL;
	int rc, sa, sb;

	*rows = 0;
	if ((rc = prepare(src, "source", is_pg(src) ? pg_sql : sq_sql, what, &a, err)))
		return rc;
	if ((rc = prepare(dst, "destination", is_pg(dst) ? pg_sql : sq_sql, what, &b, err))) {
		isc_db_finalize(a);
		return rc;
	}
	for (;;) {
		sa = isc_db_step(a);
		sb = isc_db_step(b);
		if (sa != ISC_DB_ROW && sa != ISC_DB_DONE) {
			rc = db_fail(src, "source", what, err);
			break;
		}
		if (sb != ISC_DB_ROW && sb != ISC_DB_DONE) {
			rc = db_fail(dst, "destination", what, err);
			break;
		}
		if (sa != sb) {
			rc = isc_err_set(
			    err, ISC_EIO, "%s: the %s has more rows than the %s (after %lld equal)",
			    what, sa == ISC_DB_ROW ? "source" : "destination",
			    sa == ISC_DB_ROW ? "destination" : "source", (long long)*rows);
			break;
		}
		if (sa == ISC_DB_DONE)
			break;
		for (int c = 0; c < ncols && !rc; c++) {
			const char *ta = (const char *)isc_db_column_text(a, c);
			const char *tb = (const char *)isc_db_column_text(b, c);
			int differ = isc_db_column_type(a, c) == ISC_DB_INTEGER
			                 ? isc_db_column_int64(a, c) != isc_db_column_int64(b, c)
			                 : strcmp(ta ? ta : "", tb ? tb : "") != 0;
			if (differ)
				rc = isc_err_set(err, ISC_EIO,
				                 "%s differ: row %lld, column %d: source %s, "
				                 "destination %s",
				                 what, (long long)*rows + 1, c + 1,
				                 ta ? ta : "NULL", tb ? tb : "NULL");
		}
		if (!rc && on_row)
			rc = on_row(a, arg, err);
		if (rc)
			break;
		(*rows)++;
	}
	isc_db_finalize(a);
	isc_db_finalize(b);
	return rc;
}

static int add_ledger_line(struct isc_db_stmt *st, void *arg, struct isc_err *err)
{
	struct isc_store_copy_report *r = arg;
	struct isc_store_copy_ledger *l = realloc(r->ledger, (r->n_ledger + 1) * sizeof(*l));
	const char *kind = (const char *)isc_db_column_text(st, 0);
	const char *billing = (const char *)isc_db_column_text(st, 1);

	if (!l)
		return oom(err);
	r->ledger = l;
	l = &r->ledger[r->n_ledger++];
	memset(l, 0, sizeof(*l));
	l->rows = isc_db_column_int64(st, 2);
	l->sum_micros = isc_db_column_int64(st, 3);
	if (!(l->kind = strdup(kind ? kind : "")) || !(l->billing = strdup(billing ? billing : "")))
		return oom(err);
	return 0;
}

static int has_table(struct table **order, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(order[i]->name, name))
			return 1;
	return 0;
}

/* Row counts of every table, then the ledger's sums and its totals, equal on both sides. */
static int verify(struct isc_db *src, struct isc_db *dst, struct table **order, size_t n,
                  struct isc_store_copy_report *r, struct isc_err *err)
{
	int64_t rows;
	int rc;

	for (size_t i = 0; i < n; i++) {
		int64_t in_src, in_dst;
		if ((rc = count_rows(src, "source", order[i], &in_src, err)) ||
		    (rc = count_rows(dst, "destination", order[i], &in_dst, err)))
			return rc;
		if (in_src != in_dst)
			return isc_err_set(
			    err, ISC_EIO,
			    "table %s: %lld rows in the source, %lld in the destination",
			    order[i]->name, (long long)in_src, (long long)in_dst);
		order[i]->rows = in_dst;
	}
	if (!has_table(order, n, "ledger"))
		return 0;
	if ((rc = compare_rows(src, dst, SQ_LEDGER_SUMS, PG_LEDGER_SUMS,
	                       "the ledger's sums per kind and billing", 4, add_ledger_line, r,
	                       &rows, err)))
		return rc;
	if (!has_table(order, n, "ledger_totals"))
		return 0;
	return compare_rows(src, dst, SQ_TOTALS, PG_TOTALS, "the ledger's totals (ledger_totals)",
	                    6, NULL, NULL, &r->ledger_totals_rows, err);
}

/* ---- the copy ---- */

/* The SQLite file url names ("sqlite:": home's isc.db), else NULL (PostgreSQL). */
static char *sqlite_file(const char *home, const char *url)
{
	char *path = NULL;

	if (strncmp(url, "sqlite:", 7) != 0)
		return NULL;
	if (url[7])
		return strdup(url + 7);
	return asprintf(&path, "%s/isc.db", home) < 0 ? NULL : path;
}

/* Removes a SQLite file the failed copy created, with its journal files. */
static void remove_created(const char *path)
{
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		char *p;
		if (asprintf(&p, "%s%s", path, suffixes[i]) >= 0) {
			unlink(p);
			free(p);
		}
	}
}

/*
 * A read transaction on the source (every table seen as of one moment) and
 * the write transaction on the destination. PostgreSQL's session timeouts
 * (db_pg.c) are lifted for these transactions only: a large table takes longer
 * than a broker's statement.
 */
static int begin_read(struct isc_db *src, struct isc_err *err)
{
	const char *sql = is_pg(src) ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"
	                               "SET LOCAL statement_timeout = 0;"
	                               "SET LOCAL idle_in_transaction_session_timeout = 0"
	                             : "BEGIN";
	if (isc_db_exec(src, sql) != ISC_DB_OK) {
		int rc = db_fail(src, "source", "beginning a read transaction", err);
		isc_db_exec(src, "ROLLBACK");
		return rc;
	}
	return 0;
}

static int begin_write(struct isc_store *dst, struct isc_err *err)
{
	int rc = isc_store_begin(dst, err);
	if (rc)
		return isc_err_wrap(err, "destination");
	if (is_pg(isc_store_db(dst)) &&
	    isc_db_exec(isc_store_db(dst),
	                "SET LOCAL statement_timeout = 0;"
	                "SET LOCAL idle_in_transaction_session_timeout = 0") != ISC_DB_OK) {
		rc = db_fail(isc_store_db(dst), "destination", "lifting the timeouts", err);
		isc_store_rollback(dst);
	}
	return rc;
}

/* Everything between the two transactions' begin and the commit. */
static int copy_all(struct isc_db *src, struct isc_db *dst, struct schema *dst_schema,
                    struct isc_store_copy_report *r, struct isc_err *err)
{
	struct table **order = NULL;
	int rc;

	if ((rc = destination_empty(dst, dst_schema, err)) ||
	    (rc = copy_order(dst_schema, &order, err)))
		return rc;
	if (is_pg(dst) && schema_find(dst_schema, "ledger_totals") &&
	    isc_db_exec(dst, PG_TRIGGER_OFF) != ISC_DB_OK)
		rc = db_fail(dst, "destination", "switching the ledger's totals trigger off", err);
	for (size_t i = 0; !rc && i < dst_schema->n; i++) {
		struct table *t = order[i];
		if (t->rebuilt)
			continue;
		rc = copy_rows(src, dst, t, err);
		for (size_t k = 0; !rc && k < t->self_fks.n; k++)
			rc = copy_self_reference(src, dst, t, t->self_fks.v[k], err);
	}
	if (!rc && is_pg(dst) && schema_find(dst_schema, "ledger_totals") &&
	    isc_db_exec(dst, PG_TOTALS_BUILD) != ISC_DB_OK)
		rc = db_fail(dst, "destination", "building the ledger's totals", err);
	for (size_t i = 0; !rc && i < dst_schema->n; i++)
		if (order[i]->identity)
			rc = set_sequence(src, dst, order[i], r, err);
	if (!rc)
		rc = verify(src, dst, order, dst_schema->n, r, err);
	if (!rc && !(r->tables = calloc(dst_schema->n ? dst_schema->n : 1, sizeof(*r->tables))))
		rc = oom(err);
	for (size_t i = 0; !rc && i < dst_schema->n; i++) {
		struct isc_store_copy_table *ct = &r->tables[r->n_tables++];
		ct->rows = order[i]->rows;
		ct->rebuilt = order[i]->rebuilt;
		if (!(ct->name = strdup(order[i]->name)))
			rc = oom(err);
	}
	free(order);
	return rc;
}

/* Opens both stores, checks them and copies; *created: the SQLite file the copy made. */
static int copy_stores(const struct isc_store_copy_options *o, const char *from,
                       struct isc_store_copy_report *r, char **created, struct isc_err *err)
{
	struct isc_store *src = NULL, *dst = NULL;
	struct schema src_schema = {0}, dst_schema = {0};
	char *dst_file = NULL;
	int rc, version = 0, reading = 0;

	/* The source as it is: no migration runs on a store being copied. */
	if ((rc = isc_store_open_url_at(o->home, from, 0, 0, &src, err))) {
		isc_err_wrap(err, "source");
		goto out;
	}
	if ((rc = isc_store_schema_version(src, &version, err))) {
		isc_err_wrap(err, "source");
		goto out;
	}
	if (version != isc_store_latest_version()) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "the source store's schema is version %d, this isc's is %d: copy "
		                 "with the isc of the same version (or upgrade the source by "
		                 "starting this iscd on it once)",
		                 version, isc_store_latest_version());
		goto out;
	}
	r->schema_version = version;
	if ((rc = no_live_replica(src, o->replica_live_ms, err)))
		goto out;
	dst_file = sqlite_file(o->home, o->to_url);
	if (strncmp(o->to_url, "sqlite:", 7) == 0 && !dst_file) {
		rc = oom(err);
		goto out;
	}
	if (dst_file && access(dst_file, F_OK) != 0)
		*created = strdup(dst_file);
	/* The destination's schema is made by the same migrations, at the same version. */
	if ((rc = isc_store_open_url(o->home, o->to_url, 1, &dst, err))) {
		isc_err_wrap(err, "destination");
		goto out;
	}
	if ((rc = read_schema(isc_store_db(src), "source", &src_schema, err)) ||
	    (rc = read_schema(isc_store_db(dst), "destination", &dst_schema, err)) ||
	    (rc = schemas_match(&src_schema, &dst_schema, err)))
		goto out;
	if ((rc = begin_read(isc_store_db(src), err)))
		goto out;
	reading = 1;
	if ((rc = begin_write(dst, err)))
		goto out;
	rc = copy_all(isc_store_db(src), isc_store_db(dst), &dst_schema, r, err);
	if (!rc && (rc = isc_store_commit(dst, err)))
		isc_err_wrap(err, "destination");
	if (rc)
		isc_store_rollback(dst);
out:
	if (reading)
		isc_db_exec(isc_store_db(src), "ROLLBACK");
	schema_free(&src_schema);
	schema_free(&dst_schema);
	isc_store_free(src);
	isc_store_free(dst);
	free(dst_file);
	return rc;
}

int isc_store_copy(const struct isc_store_copy_options *o, struct isc_store_copy_report *out,
                   struct isc_err *err)
{
	struct isc_store_copy_report r = {0};
	char *from = NULL, *created = NULL, *other_from, *other_to;
	int rc, lock_fd = -1, from_fd = -1, to_fd = -1;

	memset(out, 0, sizeof(*out));
	if (!o->home || !o->to_url || !*o->to_url)
		return isc_err_set(err, ISC_EINVALID, "a copy needs a home and a destination URL");
	if (strncmp(o->to_url, "sqlite:", 7) == 0 && o->to_url[7] && o->to_url[7] != '/')
		return isc_err_set(err, ISC_EINVALID,
		                   "--to: a SQLite file is sqlite:/absolute/path/to/file.db");
	if (o->from_url)
		from = strdup(o->from_url);
	else if (!(from = isc_store_url_resolve(o->home, err)))
		return err->code ? err->code : ISC_EINVALID;
	if (!from)
		return oom(err);
	if (!strcmp(from, o->to_url)) {
		free(from);
		return isc_err_set(err, ISC_EINVALID,
		                   "the source and the destination are the same "
		                   "store");
	}
	/* This home's iscd, and that of a home whose isc.db is named as a file. */
	other_from = other_home_of(from, o->home);
	other_to = other_home_of(o->to_url, o->home);
	if (other_to && other_from && !strcmp(other_from, other_to)) {
		free(other_to);
		other_to = NULL;
	}
	if (!(rc = lock_home(o->home, &lock_fd, err)) &&
	    !(rc = lock_home(other_from, &from_fd, err)) &&
	    !(rc = lock_home(other_to, &to_fd, err)))
		rc = copy_stores(o, from, &r, &created, err);
	if (rc && created)
		remove_created(created);
	if (lock_fd >= 0)
		close(lock_fd);
	if (from_fd >= 0)
		close(from_fd);
	if (to_fd >= 0)
		close(to_fd);
	free(other_from);
	free(other_to);
	free(created);
	free(from);
	if (rc) {
		isc_store_copy_report_cleanup(&r);
		return rc;
	}
	*out = r;
	return 0;
}

void isc_store_copy_report_cleanup(struct isc_store_copy_report *r)
{
	for (size_t i = 0; i < r->n_tables; i++)
		free(r->tables[i].name);
	free(r->tables);
	for (size_t i = 0; i < r->n_ledger; i++) {
		free(r->ledger[i].kind);
		free(r->ledger[i].billing);
	}
	free(r->ledger);
	for (size_t i = 0; i < r->n_sequences; i++) {
		free(r->sequences[i].table);
		free(r->sequences[i].column);
	}
	free(r->sequences);
	memset(r, 0, sizeof(*r));
}

/* ---- printing a URL ---- */

/* Password-free for printing: user:PASSWORD@ of the authority, and every password=VALUE word. */
char *isc_store_url_masked(const char *url)
{
	const char *scheme = strstr(url, "://"), *at = NULL, *colon = NULL;
	char *text = NULL;
	size_t len = 0, n = strlen(url);
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	/* scheme://user:password@host: the authority ends at the first / or ?. */
	if (scheme) {
		const char *auth = scheme + 3, *end = auth + strcspn(auth, "/?");
		for (const char *c = auth; c < end; c++)
			if (*c == '@')
				at = c;
		if (at)
			colon = memchr(auth, ':', (size_t)(at - auth));
	}
	for (size_t i = 0; i < n;) {
		const char *c = url + i;
		if (colon && c == colon + 1) {
			fputs("***", f);
			i = (size_t)(at - url);
		} else if ((i == 0 || strchr("?& ", url[i - 1])) &&
		           strncasecmp(c, "password=", 9) == 0) {
			/* a URI parameter or a key=value conninfo word */
			fprintf(f, "%.9s***", c);
			i += 9 + strcspn(c + 9, "& ");
		} else {
			fputc(*c, f);
			i++;
		}
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
