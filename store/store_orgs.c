/* Organisations and projects. */
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

void isc_org_cleanup(struct isc_org *o)
{
	free(o->name);
	memset(o, 0, sizeof(*o));
}

static void org_clean(void *rec)
{
	isc_org_cleanup(rec);
}

void isc_org_list_free(struct isc_org *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), org_clean);
}

void isc_project_cleanup(struct isc_project *p)
{
	free(p->id);
	free(p->org_name);
	free(p->name);
	memset(p, 0, sizeof(*p));
}

static void project_clean(void *rec)
{
	isc_project_cleanup(rec);
}

void isc_project_list_free(struct isc_project *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), project_clean);
}

int isc_store_org_add(struct isc_store *s, const char *name, int64_t *id_out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "INSERT INTO orgs (name, created_at_ms) VALUES (?, ?) RETURNING id", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, name, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, isc_store_now_ms());
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW && id_out)
		*id_out = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	if (rc == ISC_DB_CONSTRAINT)
		return isc_err_set(err, ISC_ECONFLICT, "organisation '%s' exists already", name);
	if (rc != ISC_DB_ROW)
		return isc_store_db_err(s, rc, "adding an organisation", err);
	return 0;
}

static int org_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_org *o = rec;
	int oom = 0;
	o->id = isc_db_column_int64(st, 0);
	o->name = isc_store_col_text(st, 1, &oom);
	o->created_at_ms = isc_db_column_int64(st, 2);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_org_find(struct isc_store *s, const char *name, struct isc_org *out,
                       struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(
	    s, "SELECT id, name, created_at_ms FROM orgs WHERE name = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, name, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, org_from_row, org_clean, out, sizeof(*out),
	                        "finding an organisation", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no organisation named '%s'", name) : rc;
}

int isc_store_org_list(struct isc_store *s, struct isc_org **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(s, "SELECT id, name, created_at_ms FROM orgs ORDER BY name", &st,
	                           err);
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(**out), org_from_row, org_clean,
	                         "listing organisations", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_org_page(struct isc_store *s, int all, int64_t user_id, const char *after_name,
                       size_t limit, struct isc_org **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	/* orgs.name is UNIQUE: its index is walked from the cursor. */
	int rc = isc_store_prepare_cached(
	    s,
	    "SELECT id, name, created_at_ms FROM orgs WHERE (?1 != 0 OR id IN (SELECT org_id FROM "
	    "memberships WHERE user_id = ?2)) AND name > ?3 ORDER BY name LIMIT ?4",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int(st, 1, all != 0);
	isc_db_bind_int64(st, 2, user_id);
	isc_db_bind_text(st, 3, after_name ? after_name : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, isc_store_page_limit(limit));
	rc = isc_store_read_rows(s, st, sizeof(**out), org_from_row, org_clean,
	                         "listing organisations", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_project_add(struct isc_store *s, const char *org_name, const char *name,
                          char **id_out, struct isc_err *err)
{
	struct isc_org org;
	struct isc_db_stmt *st;
	char *id;
	int rc;

	if ((rc = isc_store_org_find(s, org_name, &org, err)))
		return rc;
	id = isc_store_new_id("prj_");
	if (!id) {
		isc_org_cleanup(&org);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = isc_store_prepare(
	    s, "INSERT INTO projects (id, org_id, name, created_at_ms) VALUES (?, ?, ?, ?)", &st,
	    err);
	if (!rc) {
		isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 2, org.id);
		isc_db_bind_text(st, 3, name, -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 4, isc_store_now_ms());
		rc = isc_db_step(st);
		isc_db_finalize(st);
		if (rc == ISC_DB_CONSTRAINT)
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "project '%s' exists already in organisation '%s'", name,
			                 org_name);
		else if (rc != ISC_DB_DONE)
			rc = isc_store_db_err(s, rc, "adding a project", err);
		else
			rc = 0;
	}
	isc_org_cleanup(&org);
	if (rc || !id_out)
		free(id);
	else
		*id_out = id;
	return rc;
}

#define PROJECT_COLS                                                                               \
	"SELECT p.id, p.org_id, o.name, p.name, p.budget_micros, p.created_at_ms "                 \
	"FROM projects p JOIN orgs o ON o.id = p.org_id "

static int project_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_project *p = rec;
	int oom = 0;
	p->id = isc_store_col_text(st, 0, &oom);
	p->org_id = isc_db_column_int64(st, 1);
	p->org_name = isc_store_col_text(st, 2, &oom);
	p->name = isc_store_col_text(st, 3, &oom);
	p->has_budget = isc_db_column_type(st, 4) != ISC_DB_NULL;
	p->budget_micros = isc_db_column_int64(st, 4);
	p->created_at_ms = isc_db_column_int64(st, 5);
	return oom ? ISC_ENOMEM : 0;
}

static int project_query(struct isc_store *s, struct isc_db_stmt *st, struct isc_project **out,
                         size_t *n, struct isc_err *err)
{
	void *list;
	int rc = isc_store_read_rows(s, st, sizeof(**out), project_from_row, project_clean,
	                             "reading projects", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_project_resolve(struct isc_store *s, const char *id_or_name, struct isc_project *out,
                              struct isc_err *err)
{
	struct isc_db_stmt *st;
	struct isc_project *list = NULL;
	size_t n = 0;
	int rc;

	rc = isc_store_prepare(
	    s, PROJECT_COLS "WHERE p.id = ?1 OR p.name = ?1 ORDER BY p.id = ?1 DESC", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id_or_name, -1, ISC_DB_STATIC);
	if ((rc = project_query(s, st, &list, &n, err)))
		return rc;
	if (n == 0)
		rc = isc_err_set(err, ISC_ENOTFOUND, "no project with id or name '%s'", id_or_name);
	else if (n > 1 && strcmp(list[0].id, id_or_name) != 0)
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "%zu projects are named '%s' (in different organisations): use the project id",
		    n, id_or_name);
	if (!rc) {
		*out = list[0];
		memset(&list[0], 0, sizeof(list[0]));
	}
	isc_project_list_free(list, n);
	return rc;
}

int isc_store_project_list(struct isc_store *s, const char *org_name, struct isc_project **out,
                           size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, PROJECT_COLS "WHERE CAST(?1 AS TEXT) IS NULL OR o.name = ?1 ORDER BY o.name, p.name",
	    &st, err);
	if (rc)
		return rc;
	if (org_name)
		isc_db_bind_text(st, 1, org_name, -1, ISC_DB_STATIC);
	return project_query(s, st, out, n, err);
}

int isc_store_project_page(struct isc_store *s, int all, int64_t user_id, const char *org_name,
                           const char *after_org, const char *after_name, size_t limit,
                           struct isc_project **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	/* The first page's cursor ('', '') comes before every project (names are not empty). */
	int rc = isc_store_prepare_cached(
	    s,
	    PROJECT_COLS
	    "WHERE (?1 != 0 OR p.org_id IN (SELECT org_id FROM memberships WHERE user_id "
	    "= ?2)) AND (CAST(?3 AS TEXT) IS NULL OR o.name = ?3) AND (o.name, p.name) > (?4, ?5) "
	    "ORDER BY o.name, p.name LIMIT ?6",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int(st, 1, all != 0);
	isc_db_bind_int64(st, 2, user_id);
	if (org_name)
		isc_db_bind_text(st, 3, org_name, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, after_org ? after_org : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 5, after_name ? after_name : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 6, isc_store_page_limit(limit));
	return project_query(s, st, out, n, err);
}
