/* Platform users, memberships, API tokens, experiment owners and the audit. */
#include "store/store_access.h"
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

int isc_role_parse(const char *text, enum isc_role *out, struct isc_err *err)
{
	if (strcmp(text, "member") == 0)
		*out = ISC_ROLE_MEMBER;
	else if (strcmp(text, "admin") == 0)
		*out = ISC_ROLE_ADMIN;
	else if (strcmp(text, "finance") == 0)
		*out = ISC_ROLE_FINANCE;
	else
		return isc_err_set(err, ISC_EINVALID,
		                   "unknown role '%s': use member, admin or finance", text);
	return 0;
}

const char *isc_role_name(enum isc_role role)
{
	switch (role) {
	case ISC_ROLE_MEMBER:
		return "member";
	case ISC_ROLE_ADMIN:
		return "admin";
	case ISC_ROLE_FINANCE:
		return "finance";
	default:
		return "none";
	}
}

static enum isc_role role_from_text(const unsigned char *t)
{
	enum isc_role r = ISC_ROLE_NONE;
	if (t)
		isc_role_parse((const char *)t, &r, NULL);
	return r;
}

/* ---- users ---- */

void isc_user_cleanup(struct isc_user *u)
{
	free(u->name);
	memset(u, 0, sizeof(*u));
}

static void user_clean(void *rec)
{
	isc_user_cleanup(rec);
}

void isc_user_list_free(struct isc_user *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), user_clean);
}

int isc_store_user_add(struct isc_store *s, const char *name, int64_t *id_out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "INSERT INTO users (name, created_at_ms) VALUES (?, ?) RETURNING id", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, name, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, isc_store_now_ms());
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW && id_out)
		*id_out = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	if (rc == ISC_DB_CONSTRAINT)
		return isc_err_set(err, ISC_ECONFLICT, "user '%s' exists already", name);
	if (rc != ISC_DB_ROW)
		return isc_store_db_err(s, rc, "adding a user", err);
	return 0;
}

static int user_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_user *u = rec;
	int oom = 0;
	u->id = isc_db_column_int64(st, 0);
	u->name = isc_store_col_text(st, 1, &oom);
	u->created_at_ms = isc_db_column_int64(st, 2);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_user_find(struct isc_store *s, const char *name, struct isc_user *out,
                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(
	    s, "SELECT id, name, created_at_ms FROM users WHERE name = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, name, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, user_from_row, user_clean, out, sizeof(*out),
	                        "finding a user", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no platform user named '%s'", name) : rc;
}

int isc_store_user_list(struct isc_store *s, struct isc_user **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(s, "SELECT id, name, created_at_ms FROM users ORDER BY name",
	                           &st, err);
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(**out), user_from_row, user_clean, "reading users",
	                         &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_user_page(struct isc_store *s, const char *after_name, size_t limit,
                        struct isc_user **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	/* users.name is UNIQUE: its index is walked from the cursor. */
	int rc = isc_store_prepare_cached(
	    s, "SELECT id, name, created_at_ms FROM users WHERE name > ?1 ORDER BY name LIMIT ?2",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, after_name ? after_name : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, isc_store_page_limit(limit));
	rc = isc_store_read_rows(s, st, sizeof(**out), user_from_row, user_clean, "reading users",
	                         &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

/* ---- memberships ---- */

static void membership_clean(void *rec)
{
	struct isc_membership *m = rec;
	free(m->user_name);
	free(m->org_name);
}

void isc_membership_list_free(struct isc_membership *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), membership_clean);
}

static int membership_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_membership *m = rec;
	int oom = 0;
	m->user_id = isc_db_column_int64(st, 0);
	m->user_name = isc_store_col_text(st, 1, &oom);
	m->org_id = isc_db_column_int64(st, 2);
	m->org_name = isc_store_col_text(st, 3, &oom);
	m->role = role_from_text(isc_db_column_text(st, 4));
	m->created_at_ms = isc_db_column_int64(st, 5);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_member_set(struct isc_store *s, int64_t org_id, int64_t user_id, enum isc_role role,
                         struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT INTO memberships (user_id, org_id, role, created_at_ms) VALUES (?, ?, ?, ?) "
	    "ON CONFLICT (user_id, org_id) DO UPDATE SET role = excluded.role",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, user_id);
	isc_db_bind_int64(st, 2, org_id);
	isc_db_bind_text(st, 3, isc_role_name(role), -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, isc_store_now_ms());
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "setting a membership", err);
}

int isc_store_member_remove(struct isc_store *s, int64_t org_id, int64_t user_id,
                            struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "DELETE FROM memberships WHERE user_id = ? AND org_id = ?",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, user_id);
	isc_db_bind_int64(st, 2, org_id);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc != ISC_DB_DONE)
		return isc_store_db_err(s, rc, "removing a membership", err);
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND,
		                   "the user is not a member of the organisation");
	return 0;
}

int isc_store_member_role(struct isc_store *s, int64_t user_id, int64_t org_id, enum isc_role *out,
                          struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(
	    s, "SELECT role FROM memberships WHERE user_id = ? AND org_id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, user_id);
	isc_db_bind_int64(st, 2, org_id);
	rc = isc_db_step(st);
	*out = rc == ISC_DB_ROW ? role_from_text(isc_db_column_text(st, 0)) : ISC_ROLE_NONE;
	isc_store_finalize(s, st);
	if (rc != ISC_DB_ROW && rc != ISC_DB_DONE)
		return isc_store_db_err(s, rc, "reading a membership", err);
	return 0;
}

int isc_store_member_list(struct isc_store *s, int64_t org_id, int64_t user_id,
                          struct isc_membership **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(
	    s,
	    "SELECT m.user_id, u.name, m.org_id, o.name, m.role, m.created_at_ms "
	    "FROM memberships m JOIN users u ON u.id = m.user_id JOIN orgs o ON o.id = m.org_id "
	    "WHERE (?1 = 0 OR m.org_id = ?1) AND (?2 = 0 OR m.user_id = ?2) ORDER BY o.name, "
	    "u.name",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	isc_db_bind_int64(st, 2, user_id);
	rc = isc_store_read_rows(s, st, sizeof(**out), membership_from_row, membership_clean,
	                         "reading memberships", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_member_page(struct isc_store *s, int64_t org_id, const char *after_name, size_t limit,
                          struct isc_membership **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare_cached(
	    s,
	    "SELECT m.user_id, u.name, m.org_id, o.name, m.role, m.created_at_ms "
	    "FROM memberships m JOIN users u ON u.id = m.user_id JOIN orgs o ON o.id = m.org_id "
	    "WHERE m.org_id = ?1 AND u.name > ?2 ORDER BY u.name LIMIT ?3",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	isc_db_bind_text(st, 2, after_name ? after_name : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, isc_store_page_limit(limit));
	rc = isc_store_read_rows(s, st, sizeof(**out), membership_from_row, membership_clean,
	                         "reading memberships", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

/* ---- tokens ---- */

void isc_token_cleanup(struct isc_token *t)
{
	free(t->id);
	free(t->user_name);
	free(t->hash_hex);
	free(t->parent_id);
	memset(t, 0, sizeof(*t));
}

static void token_clean(void *rec)
{
	isc_token_cleanup(rec);
}

void isc_token_list_free(struct isc_token *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), token_clean);
}

int isc_store_token_add(struct isc_store *s, const struct isc_token *t, struct isc_err *err)
{
	const char *parent = t->parent_id && t->parent_id[0] ? t->parent_id : NULL;
	struct isc_db_stmt *st;
	int rc;

	if (parent && !t->expires_at_ms)
		return isc_err_set(err, ISC_EINVALID, "a token made with a token must expire");
	/*
	 * The parent's check and the insert are one statement, and that statement runs
	 * under the store's write lock, as the revoke does (issue 42). The statement
	 * alone was not enough on PostgreSQL: under READ COMMITTED it reads the parent
	 * as of its start, so a revoke committing meanwhile found no child to cascade
	 * to, and the child, inserted a moment later, stayed valid. Under the lock the
	 * statement starts after any revoke has committed (it sees the parent revoked)
	 * or the revoke waits for the insert (and its cascade sees the child).
	 */
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(
	    s,
	    "INSERT INTO api_tokens (id, user_id, hash, created_at_ms, "
	    "expires_at_ms, parent_id) SELECT CAST(?1 AS TEXT), CAST(?2 AS BIGINT), "
	    "CAST(?3 AS TEXT), CAST(?4 AS BIGINT), CAST(?5 AS BIGINT), CAST(?6 AS "
	    "TEXT) WHERE CAST(?6 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM api_tokens p WHERE p.id "
	    "= ?6 AND "
	    "p.revoked_at_ms = 0 AND (p.expires_at_ms = 0 OR (p.expires_at_ms > "
	    "?4 AND ?5 <= p.expires_at_ms)))",
	    &st, err);
	if (rc)
		goto out;
	isc_db_bind_text(st, 1, t->id, -1, ISC_DB_STATIC);
	if (t->user_id)
		isc_db_bind_int64(st, 2, t->user_id);
	else
		isc_db_bind_null(st, 2);
	isc_db_bind_text(st, 3, t->hash_hex, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, isc_store_now_ms());
	isc_db_bind_int64(st, 5, t->expires_at_ms);
	if (parent)
		isc_db_bind_text(st, 6, parent, -1, ISC_DB_STATIC);
	else
		isc_db_bind_null(st, 6);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc != ISC_DB_DONE)
		rc = isc_store_db_err(s, rc, "adding a token", err);
	else if (isc_db_changes(isc_store_db(s)) == 0)
		rc = isc_err_set(err, ISC_EAUTH,
		                 "token %s was revoked or expired, or outlives it: no token "
		                 "made with it",
		                 parent);
	else
		rc = isc_store_commit(s, err);
out:
	if (rc)
		isc_store_rollback(s);
	return rc;
}

#define TOKEN_COLS                                                                                 \
	"SELECT t.id, COALESCE(t.user_id, 0), COALESCE(u.name, ''), t.hash, t.created_at_ms, "     \
	"t.expires_at_ms, t.revoked_at_ms, COALESCE(t.parent_id, '') FROM api_tokens t LEFT JOIN " \
	"users u ON u.id = t.user_id "

static int token_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_token *t = rec;
	int oom = 0;
	t->id = isc_store_col_text(st, 0, &oom);
	t->user_id = isc_db_column_int64(st, 1);
	t->user_name = isc_store_col_text(st, 2, &oom);
	t->hash_hex = isc_store_col_text(st, 3, &oom);
	t->created_at_ms = isc_db_column_int64(st, 4);
	t->expires_at_ms = isc_db_column_int64(st, 5);
	t->revoked_at_ms = isc_db_column_int64(st, 6);
	t->parent_id = isc_store_col_text(st, 7, &oom);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_token_get(struct isc_store *s, const char *id, struct isc_token *out,
                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(s, TOKEN_COLS "WHERE t.id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, token_from_row, token_clean, out, sizeof(*out),
	                        "reading a token", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no token '%s'", id) : rc;
}

int isc_store_token_list(struct isc_store *s, int all, int64_t user_id, struct isc_token **out,
                         size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(
	    s,
	    TOKEN_COLS
	    "WHERE ?1 != 0 OR COALESCE(t.user_id, 0) = ?2 ORDER BY t.created_at_ms, t.id",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int(st, 1, all != 0);
	isc_db_bind_int64(st, 2, user_id);
	rc = isc_store_read_rows(s, st, sizeof(**out), token_from_row, token_clean,
	                         "reading tokens", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_token_page(struct isc_store *s, int all, int64_t user_id, int64_t after_ms,
                         const char *after_id, size_t limit, struct isc_token **out, size_t *n,
                         struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	/* The first page's cursor (-1, '') comes before every token. */
	int rc = isc_store_prepare_cached(
	    s,
	    TOKEN_COLS
	    "WHERE (?1 != 0 OR COALESCE(t.user_id, 0) = ?2) AND (t.created_at_ms, t.id) > "
	    "(?3, ?4) ORDER BY t.created_at_ms, t.id LIMIT ?5",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int(st, 1, all != 0);
	isc_db_bind_int64(st, 2, user_id);
	isc_db_bind_int64(st, 3, after_id ? after_ms : -1);
	isc_db_bind_text(st, 4, after_id ? after_id : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 5, isc_store_page_limit(limit));
	rc = isc_store_read_rows(s, st, sizeof(**out), token_from_row, token_clean,
	                         "reading tokens", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_token_revoke(struct isc_store *s, const char *id, size_t *cascaded,
                           struct isc_err *err)
{
	struct isc_db_stmt *st;
	int64_t now = isc_store_now_ms();
	int changed, known;
	size_t n_cascaded;
	int rc = isc_store_prepare(
	    s, "UPDATE api_tokens SET revoked_at_ms = ? WHERE id = ? AND revoked_at_ms = 0", &st,
	    err);

	if (cascaded)
		*cascaded = 0;
	if (rc)
		return rc;
	if ((rc = isc_store_begin(s, err))) {
		isc_db_finalize(st);
		return rc;
	}
	isc_db_bind_int64(st, 1, now);
	isc_db_bind_text(st, 2, id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	changed = isc_db_changes(isc_store_db(s));
	if (rc != ISC_DB_DONE) {
		rc = isc_store_db_err(s, rc, "revoking a token", err);
		goto out;
	}
	if (changed == 0) {
		/* Unknown, or revoked already: the cascade below still runs for the latter. */
		if ((rc = isc_store_prepare(s, "SELECT count(*) FROM api_tokens WHERE id = ?", &st,
		                            err)))
			goto out;
		isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
		rc = isc_db_step(st);
		known = rc == ISC_DB_ROW && isc_db_column_int64(st, 0) > 0;
		isc_db_finalize(st);
		if (rc != ISC_DB_ROW) {
			rc = isc_store_db_err(s, rc, "reading a token", err);
			goto out;
		}
		if (!known) {
			rc = isc_err_set(err, ISC_ENOTFOUND, "no live token '%s'", id);
			goto out;
		}
	}
	/*
	 * Every token made with it, and with those, ... (a tree: parents are older rows).
	 * Also when it was revoked already: a child a race left alive (issue 42: an isc
	 * before it minted outside the write lock) goes at the next revoke of its parent.
	 */
	rc = isc_store_prepare(s,
	                       "WITH RECURSIVE sub(id) AS (SELECT id FROM api_tokens WHERE "
	                       "parent_id = ?2 UNION SELECT t.id FROM api_tokens t JOIN sub ON "
	                       "t.parent_id = sub.id) UPDATE api_tokens SET revoked_at_ms = ?1 "
	                       "WHERE revoked_at_ms = 0 AND id IN (SELECT id FROM sub)",
	                       &st, err);
	if (rc)
		goto out;
	isc_db_bind_int64(st, 1, now);
	isc_db_bind_text(st, 2, id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc != ISC_DB_DONE) {
		rc = isc_store_db_err(s, rc, "revoking the tokens made with a token", err);
		goto out;
	}
	n_cascaded = (size_t)isc_db_changes(isc_store_db(s));
	if (changed == 0 && n_cascaded == 0) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "no live token '%s' (revoked already)", id);
		goto out;
	}
	if (cascaded)
		*cascaded = n_cascaded;
	rc = isc_store_commit(s, err);
out:
	if (rc)
		isc_store_rollback(s);
	return rc;
}

/* ---- experiment owners ---- */

int isc_store_experiment_set_owner(struct isc_store *s, const char *id, const char *owner,
                                   struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "UPDATE experiments SET owner = ? WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, owner, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "setting an owner", err);
}

int isc_store_experiment_owner(struct isc_store *s, const char *id, char **owner,
                               struct isc_err *err)
{
	struct isc_db_stmt *st;
	int oom = 0;
	int rc =
	    isc_store_prepare_cached(s, "SELECT owner FROM experiments WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*owner = isc_store_col_text(st, 0, &oom);
		rc = oom || !*owner ? isc_err_set(err, ISC_ENOMEM, "out of memory") : 0;
	} else if (rc == ISC_DB_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "no experiment with id '%s'", id);
	} else {
		rc = isc_store_db_err(s, rc, "reading an owner", err);
	}
	isc_store_finalize(s, st);
	return rc;
}

/* ---- audit ---- */

int isc_store_audit_add(struct isc_store *s, const struct isc_audit *a, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare_cached(s,
	                             "INSERT INTO audit (at_ms, actor, address, org_id, action, "
	                             "target, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
	                             &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, a->at_ms ? a->at_ms : isc_store_now_ms());
	isc_db_bind_text(st, 2, a->actor, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, a->address, -1, ISC_DB_STATIC);
	if (a->org_id)
		isc_db_bind_int64(st, 4, a->org_id);
	else
		isc_db_bind_null(st, 4);
	isc_db_bind_text(st, 5, a->action, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 6, a->target ? a->target : "", -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 7, a->status);
	rc = isc_db_step(st);
	isc_store_finalize(s, st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "writing the audit", err);
}

static void audit_clean(void *rec)
{
	struct isc_audit *a = rec;
	free(a->actor);
	free(a->address);
	free(a->org_name);
	free(a->action);
	free(a->target);
}

void isc_audit_list_free(struct isc_audit *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), audit_clean);
}

static int audit_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_audit *a = rec;
	int oom = 0;
	a->id = isc_db_column_int64(st, 0);
	a->at_ms = isc_db_column_int64(st, 1);
	a->actor = isc_store_col_text(st, 2, &oom);
	a->address = isc_store_col_text(st, 3, &oom);
	a->org_id = isc_db_column_int64(st, 4);
	a->org_name = isc_store_col_text(st, 5, &oom);
	a->action = isc_store_col_text(st, 6, &oom);
	a->target = isc_store_col_text(st, 7, &oom);
	a->status = isc_db_column_int(st, 8);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_audit_list(struct isc_store *s, int64_t org_id, int64_t before_id, size_t limit,
                         struct isc_audit **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc =
	    isc_store_prepare(s,
	                      "SELECT a.id, a.at_ms, a.actor, a.address, COALESCE(a.org_id, 0), "
	                      "COALESCE(o.name, ''), a.action, a.target, a.status FROM audit a "
	                      "LEFT JOIN orgs o ON o.id = a.org_id "
	                      "WHERE (?1 = 0 OR a.org_id = ?1) AND (?3 = 0 OR a.id < ?3) "
	                      "ORDER BY a.id DESC LIMIT ?2",
	                      &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	isc_db_bind_int64(st, 2, (int64_t)limit);
	isc_db_bind_int64(st, 3, before_id);
	rc = isc_store_read_rows(s, st, sizeof(**out), audit_from_row, audit_clean,
	                         "reading the audit", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}
