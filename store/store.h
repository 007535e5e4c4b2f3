/*
 * The store: every read and write of the database goes through this module
 * (store.c opens and migrates; store_*.c hold one table family each; db.h is
 * the SQL interface with SQLite and PostgreSQL behind it). All SQL with bound
 * parameters. SQLite: WAL mode, foreign keys on, a busy timeout.
 *
 * Ownership: strings in returned structs are owned by the struct and released
 * by its _free/_cleanup function.
 */
#ifndef ISC_STORE_STORE_H
#define ISC_STORE_STORE_H

#include "common/err.h"
#include "common/home.h"

#include <stddef.h>
#include <stdint.h>

struct isc_store;

/*
 * The store URL: ISC_STORE_URL, else store_url of $home/config.toml, else
 * "sqlite:" ($home/isc.db). A PostgreSQL URI is a libpq one. Caller frees.
 */
char *isc_store_url_resolve(const char *home, struct isc_err *err);
/* "sqlite:" or postgresql://... / postgres://...; else ISC_EINVALID saying so. */
int isc_store_url_check(const char *url, struct isc_err *err);

/*
 * Opens (creating if `create`) the store of home's URL: SQLite's $home/isc.db
 * (folder 0700, file 0600) or a PostgreSQL database; migrations run. Without
 * `create`, a missing store is ISC_ENOTFOUND ("run isc init").
 */
int isc_store_open(const char *home, int create, struct isc_store **out, struct isc_err *err);
/*
 * The same for the store at url rather than home's: "sqlite:" ($home/isc.db),
 * "sqlite:/path/to/file.db" (isc store copy's form for a file; never a store_url)
 * or a PostgreSQL URI. A missing SQLite file is created (0600) when `create`.
 */
int isc_store_open_url(const char *home, const char *url, int create, struct isc_store **out,
                       struct isc_err *err);
/*
 * Opens an existing store for the use of one thread at a time only (the API's
 * server threads each have one): SQLite then takes no mutex on its calls.
 */
int isc_store_open_unshared(const char *home, struct isc_store **out, struct isc_err *err);
void isc_store_free(struct isc_store *s);

/*
 * Now, in ms since the epoch, by the store's clock: every time the store records
 * (created_at_ms, a deadline's start, a node's last sighting, a charge's period) is
 * this, and every comparison of "now" with such a time must use it too, never this
 * host's wall clock: replicas' clocks differ (issue 48, docs/ha.md). On PostgreSQL it
 * is the server's clock_timestamp(), read once (isc_store_clock_sync) and carried
 * forward by this process's monotonic clock, so neither a skewed nor a stepped wall
 * clock of this host moves it. Until a first sync, and on SQLite (one host), it is
 * this host's wall clock.
 */
int64_t isc_store_now_ms(void);
#ifdef ISC_TEST_HOOKS
/* Test builds: holds isc_store_now_ms at ms (0: follows the clock again), so a unit test
 * drives the meter through an hour in a second (tests/unit/test_meter.c). */
void isc_store_clock_pin(int64_t ms);
#endif
/*
 * Reads the PostgreSQL server's clock on s and makes isc_store_now_ms follow it (the
 * round trip's midpoint is taken for the moment it was read). No-op on SQLite. iscd's
 * heartbeat calls it every lease_ms/4; store.c once per process at the first open.
 */
int isc_store_clock_sync(struct isc_store *s, struct isc_err *err);
/* The offset in use (the store's clock minus this host's wall clock), for logs and tests. */
int64_t isc_store_clock_skew_ms(void);

/*
 * What the database holds, as a version: it changes whenever anything was
 * committed since the last call, by this connection or any other (SQLite's
 * data_version for others, the connection's change count for its own). A cache
 * filled after reading a version stays true while the version is the same;
 * read the version before the data, so a commit in between makes the cache
 * older than its version, never newer.
 */
struct isc_store_version {
	int64_t others, own;
	/*
	 * The auth version: the auth_version row, which triggers bump in the same
	 * transaction as any write to api_tokens, memberships, users or an org's id or
	 * name (migration 23). A cache of tokens or roles keyed by it alone survives
	 * the commits of running bursts and still never outlives a revoke, on any
	 * replica of the store: it is read from the store on every call.
	 */
	int64_t auth;
};
int isc_store_version(struct isc_store *s, struct isc_store_version *out, struct isc_err *err);

/*
 * Fences every write of the connection with a burst's lease (PostgreSQL; a no-op on
 * SQLite, which one iscd uses): each outermost isc_store_commit first checks, under
 * the store's write lock, that the lease on experiment_id still has this token and has
 * not expired by the database's clock, and fails with ISC_ELEASE when it has not; a
 * single statement that writes outside isc_store_begin/commit runs in a transaction of
 * its own with the same check (store/db.h's write guard). Once refused, the connection
 * refuses every later write (and isc_store_begin) with ISC_ELEASE without asking: a
 * lease lost is never the step's again (docs/ha.md, issue 48). NULL token: none (and
 * the lost mark is cleared).
 */
int isc_store_fence(struct isc_store *s, const char *experiment_id, const char *token,
                    struct isc_err *err);
/* 1 once a write of the fenced connection was refused for its lease (ISC_ELEASE). */
int isc_store_lease_lost(const struct isc_store *s);
/*
 * Marks the fenced connection's lease lost, as a refused write would (the replica
 * learned it another way: its renewal did not return the lease). No-op without a fence.
 */
void isc_store_fence_lose(struct isc_store *s);
/* The experiment whose lease fences the connection, or NULL (no fence). */
const char *isc_store_fence_experiment(const struct isc_store *s);
/*
 * Whether the fence's lease still holds now, by the database's clock: 0 when it does
 * (or there is no fence), ISC_ELEASE when it does not (the connection is then marked
 * lost), another code when the store could not say. For the calls the store cannot
 * fence: a destructive cloud call re-checks just before it is sent.
 */
int isc_store_fence_check(struct isc_store *s, struct isc_err *err);
/* 1 when this open made the schema (an empty database), 0 when it was there (joined). */
int isc_store_was_created(const struct isc_store *s);
/* 1 when the store is PostgreSQL (shared by replicas), 0 for SQLite (one host). */
int isc_store_is_postgres(const struct isc_store *s);
const char *isc_store_home(const struct isc_store *s);

int isc_store_schema_version(struct isc_store *s, int *out, struct isc_err *err);
/* The newest migration this program knows. */
int isc_store_latest_version(void);

/*
 * BEGIN IMMEDIATE / COMMIT / ROLLBACK: a write transaction taken up front, so racing writers
 * serialize. They nest: inside a transaction, begin/commit/rollback are a savepoint's, so a
 * batch of writes takes the lock once and a failed step undoes only itself.
 */
int isc_store_begin(struct isc_store *s, struct isc_err *err);
int isc_store_commit(struct isc_store *s, struct isc_err *err);
void isc_store_rollback(struct isc_store *s);

/* Random lowercase hex id with a prefix, e.g. "exp_" + 16 hex chars. Caller frees. */
char *isc_store_new_id(const char *prefix);

/* ---- orgs and projects ---- */
struct isc_org {
	int64_t id;
	char *name;
	int64_t created_at_ms;
};
int isc_store_org_add(struct isc_store *s, const char *name, int64_t *id_out, struct isc_err *err);
int isc_store_org_find(struct isc_store *s, const char *name, struct isc_org *out,
                       struct isc_err *err);
int isc_store_org_list(struct isc_store *s, struct isc_org **out, size_t *n, struct isc_err *err);
/*
 * A page of the orgs user_id belongs to (all: every org) by name, after the org
 * named after_name (NULL: the first page); at most limit rows (0: all). The
 * listings' pages: docs/api.md, "Pages".
 */
int isc_store_org_page(struct isc_store *s, int all, int64_t user_id, const char *after_name,
                       size_t limit, struct isc_org **out, size_t *n, struct isc_err *err);
void isc_org_cleanup(struct isc_org *o);
void isc_org_list_free(struct isc_org *list, size_t n);

struct isc_project {
	char *id; /* "prj_..." */
	int64_t org_id;
	char *org_name;
	char *name;
	int has_budget; /* 0: no spending cap */
	int64_t budget_micros;
	int64_t created_at_ms;
};
int isc_store_project_add(struct isc_store *s, const char *org_name, const char *name,
                          char **id_out, struct isc_err *err);
/* By id, or by name when exactly one project has it. */
int isc_store_project_resolve(struct isc_store *s, const char *id_or_name, struct isc_project *out,
                              struct isc_err *err);
/* org_name NULL: every org. */
int isc_store_project_list(struct isc_store *s, const char *org_name, struct isc_project **out,
                           size_t *n, struct isc_err *err);
/*
 * A page of the projects of the orgs user_id belongs to (all: every org), only
 * org_name's when not NULL, by org name then project name, after the project
 * after_name of the org after_org (NULL: the first page).
 */
int isc_store_project_page(struct isc_store *s, int all, int64_t user_id, const char *org_name,
                           const char *after_org, const char *after_name, size_t limit,
                           struct isc_project **out, size_t *n, struct isc_err *err);
void isc_project_cleanup(struct isc_project *p);
void isc_project_list_free(struct isc_project *list, size_t n);

#endif
