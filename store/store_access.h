/*
 * Who may use the platform: platform users (named like the OS users who call
 * iscd's socket), their memberships in organisations with a role, the bearer
 * tokens for TCP callers (kept only as a SHA-256 of their secret), the owner
 * of each experiment, and the append-only audit of every change made through
 * the API. The operator (the OS user iscd runs as) is not a row: it is
 * recognised by its uid, or by a token whose user is NULL.
 */
#ifndef ISC_STORE_STORE_ACCESS_H
#define ISC_STORE_STORE_ACCESS_H

#include "store/store.h"

enum isc_role {
	ISC_ROLE_NONE = 0,
	ISC_ROLE_MEMBER = 1 << 0,
	ISC_ROLE_ADMIN = 1 << 1,
	ISC_ROLE_FINANCE = 1 << 2,
};

/* "member", "admin", "finance"; 0 or ISC_EINVALID naming the word. */
int isc_role_parse(const char *text, enum isc_role *out, struct isc_err *err);
const char *isc_role_name(enum isc_role role);

struct isc_user {
	int64_t id;
	char *name;
	int64_t created_at_ms;
};
int isc_store_user_add(struct isc_store *s, const char *name, int64_t *id_out, struct isc_err *err);
/* ISC_ENOTFOUND when no platform user has the name. */
int isc_store_user_find(struct isc_store *s, const char *name, struct isc_user *out,
                        struct isc_err *err);
int isc_store_user_list(struct isc_store *s, struct isc_user **out, size_t *n, struct isc_err *err);
/*
 * The listings' pages (docs/api.md, "Pages"): at most limit rows (0: every row)
 * that come after the cursor in the listing's order; a NULL cursor is the
 * first page. Users by name, after the user named after_name.
 */
int isc_store_user_page(struct isc_store *s, const char *after_name, size_t limit,
                        struct isc_user **out, size_t *n, struct isc_err *err);
void isc_user_cleanup(struct isc_user *u);
void isc_user_list_free(struct isc_user *list, size_t n);

struct isc_membership {
	int64_t user_id;
	char *user_name;
	int64_t org_id;
	char *org_name;
	enum isc_role role;
	int64_t created_at_ms;
};
/* Adds or changes the user's role in the org (one role per user and org). */
int isc_store_member_set(struct isc_store *s, int64_t org_id, int64_t user_id, enum isc_role role,
                         struct isc_err *err);
/* ISC_ENOTFOUND when the user is not a member. */
int isc_store_member_remove(struct isc_store *s, int64_t org_id, int64_t user_id,
                            struct isc_err *err);
/* The user's role in the org, ISC_ROLE_NONE when not a member. */
int isc_store_member_role(struct isc_store *s, int64_t user_id, int64_t org_id, enum isc_role *out,
                          struct isc_err *err);
/* org_id 0: every org; user_id 0: every user. */
int isc_store_member_list(struct isc_store *s, int64_t org_id, int64_t user_id,
                          struct isc_membership **out, size_t *n, struct isc_err *err);
/* A page of the org's members by user name, after the member named after_name. */
int isc_store_member_page(struct isc_store *s, int64_t org_id, const char *after_name, size_t limit,
                          struct isc_membership **out, size_t *n, struct isc_err *err);
void isc_membership_list_free(struct isc_membership *list, size_t n);

struct isc_token {
	char *id;        /* public part, "tok_<16 hex>" */
	int64_t user_id; /* 0: the operator */
	char *user_name; /* "" for the operator */
	char *hash_hex;  /* SHA-256 of the secret, hex */
	int64_t created_at_ms;
	int64_t expires_at_ms; /* 0: never */
	int64_t revoked_at_ms; /* 0: not revoked */
	char *parent_id;       /* the token it was made with; "" when made over the Unix socket */
};
/*
 * Adds t. With a parent_id (a token made over TCP with that token) the parent must
 * be live and t must expire (expires_at_ms != 0) no later than the parent: checked
 * in the same statement as the insert, so a parent revoked meanwhile gives
 * ISC_EAUTH and no row (issue 29). That statement runs under the write lock
 * (isc_store_begin), as isc_store_token_revoke does: on PostgreSQL a child minted
 * while its parent is revoked is either refused or revoked with it (issue 42).
 */
int isc_store_token_add(struct isc_store *s, const struct isc_token *t, struct isc_err *err);
int isc_store_token_get(struct isc_store *s, const char *id, struct isc_token *out,
                        struct isc_err *err);
/* all: every user's; else only user_id's (0 = the operator's). */
int isc_store_token_list(struct isc_store *s, int all, int64_t user_id, struct isc_token **out,
                         size_t *n, struct isc_err *err);
/*
 * Marks it revoked (a revoked token stays listed), and with it every live token made
 * with it, their children, and so on, in one statement. A token revoked already
 * still revokes any live descendant (one a race of an older isc left, issue 42);
 * ISC_ENOTFOUND when it is unknown, or revoked with no live descendant.
 * *cascaded (may be NULL): how many descendants went.
 */
int isc_store_token_revoke(struct isc_store *s, const char *id, size_t *cascaded,
                           struct isc_err *err);
void isc_token_cleanup(struct isc_token *t);
/*
 * A page of tokens (all, or user_id's) by creation time then id, after the token
 * created at after_ms with id after_id (after_id NULL: the first page).
 */
int isc_store_token_page(struct isc_store *s, int all, int64_t user_id, int64_t after_ms,
                         const char *after_id, size_t limit, struct isc_token **out, size_t *n,
                         struct isc_err *err);
void isc_token_list_free(struct isc_token *list, size_t n);

/* The platform user an experiment was launched by ("" for the operator). */
int isc_store_experiment_set_owner(struct isc_store *s, const char *id, const char *owner,
                                   struct isc_err *err);
int isc_store_experiment_owner(struct isc_store *s, const char *id, char **owner,
                               struct isc_err *err);

struct isc_audit {
	int64_t id;
	int64_t at_ms;
	char *actor;    /* platform user name, or "operator" */
	char *address;  /* "unix:uid=1001" or "tcp:127.0.0.1:53122" */
	int64_t org_id; /* 0: not tied to one organisation */
	char *org_name; /* "" when org_id is 0 */
	char *action;   /* "POST /v1/experiments" */
	char *target;   /* what was acted on (an id or name) */
	int status;     /* the HTTP status answered */
};
/* Appends one row; rows are never updated or deleted (triggers refuse it). */
int isc_store_audit_add(struct isc_store *s, const struct isc_audit *a, struct isc_err *err);
/* org_id 0: every row; newest first, at most limit rows, only rows older than before_id
 * (0: from the newest). */
int isc_store_audit_list(struct isc_store *s, int64_t org_id, int64_t before_id, size_t limit,
                         struct isc_audit **out, size_t *n, struct isc_err *err);
void isc_audit_list_free(struct isc_audit *list, size_t n);

#endif
