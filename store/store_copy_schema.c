/*
 * isc store copy's schemas (store_copy_int.h): read from the catalogs (SQLite's
 * sqlite_master and pragmas, PostgreSQL's pg_class, pg_attribute and
 * pg_constraint), matched, and put in an order the rows can be inserted in.
 */
#include "store/store_copy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Tables a trigger fills from another table's inserts: copying their rows
 * would count each amount twice. The destination's trigger rebuilds them while
 * the ledger is copied, and the copy then compares them with the source's.
 */
static const char *const rebuilt_tables[] = {"ledger_totals"};

static void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

int copy_strv_has(const struct strv *s, const char *x)
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

void copy_schema_free(struct schema *sc)
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

struct table *copy_schema_find(const struct schema *sc, const char *name)
{
	for (size_t i = 0; i < sc->n; i++)
		if (!strcmp(sc->t[i].name, name))
			return &sc->t[i];
	return NULL;
}

int copy_is_pg(struct isc_db *db)
{
	return isc_db_kind(db) == ISC_DB_POSTGRES;
}

int copy_oom(struct isc_err *err)
{
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}

/* err from the connection's last error: "<side>: <what>: <message>". */
int copy_db_fail(struct isc_db *db, const char *side, const char *what, struct isc_err *err)
{
	return isc_err_set(err, ISC_EIO, "%s: %s: %s", side, what, isc_db_errmsg(db));
}

int copy_prepare(struct isc_db *db, const char *side, const char *sql, const char *what,
                 struct isc_db_stmt **st, struct isc_err *err)
{
	if (isc_db_prepare(db, sql, 0, st) != ISC_DB_OK) {
		*st = NULL;
		return copy_db_fail(db, side, what, err);
	}
	return 0;
}

/* "name" with any " doubled: every table and column name goes into SQL text so. */
char *copy_quote_ident(const char *name)
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

	if ((rc = copy_prepare(db, side, sql, what, &st, err)))
		return rc;
	if (arg)
		isc_db_bind_text(st, 1, arg, -1, ISC_DB_TRANSIENT);
	while ((step = isc_db_step(st)) == ISC_DB_ROW) {
		if (strv_push(out, (const char *)isc_db_column_text(st, 0))) {
			isc_db_finalize(st);
			return copy_oom(err);
		}
	}
	rc = step == ISC_DB_DONE ? 0 : copy_db_fail(db, side, what, err);
	isc_db_finalize(st);
	return rc;
}

/* Runs a query of one integer (bound ?1..?2 as texts when not NULL) into *out (0 when NULL). */
int copy_read_int(struct isc_db *db, const char *side, const char *sql, const char *a1,
                  const char *a2, const char *what, int64_t *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, step;

	*out = 0;
	if ((rc = copy_prepare(db, side, sql, what, &st, err)))
		return rc;
	if (a1)
		isc_db_bind_text(st, 1, a1, -1, ISC_DB_TRANSIENT);
	if (a2)
		isc_db_bind_text(st, 2, a2, -1, ISC_DB_TRANSIENT);
	step = isc_db_step(st);
	if (step == ISC_DB_ROW)
		*out = isc_db_column_int64(st, 0);
	rc = step == ISC_DB_ROW || step == ISC_DB_DONE ? 0 : copy_db_fail(db, side, what, err);
	isc_db_finalize(st);
	return rc;
}

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
	if ((rc = copy_prepare(db, side, copy_is_pg(db) ? PG_COLUMNS : SQ_COLUMNS, what, &st, err)))
		return rc;
	isc_db_bind_text(st, 1, copy_is_pg(db) ? t->quoted : t->name, -1, ISC_DB_TRANSIENT);
	while (!rc && (step = isc_db_step(st)) == ISC_DB_ROW) {
		const char *name = (const char *)isc_db_column_text(st, 0);
		int pk = isc_db_column_int(st, 1);
		if (strv_push(&t->cols, name)) {
			rc = copy_oom(err);
			break;
		}
		if (isc_db_column_int(st, 2) && !t->identity && !(t->identity = strdup(name)))
			rc = copy_oom(err);
		if (pk > 0) {
			void *grown = realloc(pks, (npks + 1) * sizeof(*pks));
			if (!grown) {
				rc = copy_oom(err);
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
		rc = copy_db_fail(db, side, what, err);
	isc_db_finalize(st);
	/* The key's columns in key order (pk is 1-based in both catalogs). */
	for (int k = 1; !rc && k <= max_pk; k++)
		for (size_t i = 0; i < npks; i++)
			if (pks[i].pk == k && strv_push(&t->pk, pks[i].name))
				rc = copy_oom(err);
	free(pks);
	if (!rc && !t->cols.n)
		rc = isc_err_set(err, ISC_EINVALID, "%s: table %s has no columns", side, t->name);
	if (!rc && !copy_is_pg(db) && t->pk.n == 1) {
		int64_t autoinc;
		rc = copy_read_int(db, side, SQ_AUTOINCREMENT, t->name, NULL, what, &autoinc, err);
		if (!rc && autoinc && !(t->identity = strdup(t->pk.v[0])))
			rc = copy_oom(err);
	}
	return rc;
}

static int read_fks(struct isc_db *db, const char *side, struct table *t, struct isc_err *err)
{
	struct isc_db_stmt *st;
	char what[128];
	int rc, step;

	snprintf(what, sizeof(what), "reading the foreign keys of %s", t->name);
	if ((rc = copy_prepare(db, side, copy_is_pg(db) ? PG_FKS : SQ_FKS, what, &st, err)))
		return rc;
	isc_db_bind_text(st, 1, copy_is_pg(db) ? t->quoted : t->name, -1, ISC_DB_TRANSIENT);
	while (!rc && (step = isc_db_step(st)) == ISC_DB_ROW) {
		const char *ref = (const char *)isc_db_column_text(st, 0);
		const char *col = (const char *)isc_db_column_text(st, 1);
		if (!ref || !col)
			continue;
		if (!strcmp(ref, t->name)) {
			if (!copy_strv_has(&t->self_fks, col) && strv_push(&t->self_fks, col))
				rc = copy_oom(err);
		} else if (!copy_strv_has(&t->refs, ref) && strv_push(&t->refs, ref)) {
			rc = copy_oom(err);
		}
	}
	if (!rc && step != ISC_DB_DONE)
		rc = copy_db_fail(db, side, what, err);
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
 * version never matches it by chance; docs/security.md, "The API's caches"), nor
 * risk_version (likewise: a new random version at the destination's next risk write,
 * store/store_risk.h; its facts are copied).
 */
int copy_read_schema(struct isc_db *db, const char *side, struct schema *sc, struct isc_err *err)
{
	struct strv names = {0};
	int rc = read_names(db, side, copy_is_pg(db) ? PG_TABLES : SQ_TABLES, NULL,
	                    "listing the tables", &names, err);

	memset(sc, 0, sizeof(*sc));
	if (!rc && !(sc->t = calloc(names.n ? names.n : 1, sizeof(*sc->t))))
		rc = copy_oom(err);
	for (size_t i = 0; !rc && i < names.n; i++) {
		struct table *t;
		if (!strcmp(names.v[i], "schema_version") || !strcmp(names.v[i], "auth_version") ||
		    !strcmp(names.v[i], "risk_version"))
			continue;
		t = &sc->t[sc->n++];
		if (!(t->name = strdup(names.v[i])) || !(t->quoted = copy_quote_ident(t->name))) {
			rc = copy_oom(err);
			break;
		}
		t->rebuilt = is_rebuilt(t->name);
		if (!(rc = read_columns(db, side, t, err)))
			rc = read_fks(db, side, t, err);
	}
	strv_free(&names);
	if (rc)
		copy_schema_free(sc);
	return rc;
}

/* Both stores must name the same tables and columns (the order of columns may differ). */
int copy_schemas_match(const struct schema *src, const struct schema *dst, struct isc_err *err)
{
	for (size_t i = 0; i < dst->n; i++) {
		const struct table *d = &dst->t[i], *s = copy_schema_find(src, d->name);
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
			if (!copy_strv_has(&s->cols, d->cols.v[c]))
				return isc_err_set(
				    err, ISC_EINVALID,
				    "the schemas differ: the source's table %s has no "
				    "column %s",
				    d->name, d->cols.v[c]);
	}
	for (size_t i = 0; i < src->n; i++)
		if (!copy_schema_find(dst, src->t[i].name))
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
int copy_order(struct schema *sc, struct table ***out, struct isc_err *err)
{
	struct table **order = calloc(sc->n ? sc->n : 1, sizeof(*order));
	size_t n = 0;

	if (!order)
		return copy_oom(err);
	for (size_t i = 0; i < sc->n; i++)
		sc->t[i].copied = 0;
	while (n < sc->n) {
		struct table *next = NULL;
		for (size_t i = 0; i < sc->n; i++) {
			struct table *t = &sc->t[i];
			int ready = !t->copied;
			for (size_t r = 0; ready && r < t->refs.n; r++) {
				const struct table *ref = copy_schema_find(sc, t->refs.v[r]);
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
