/* Internals shared by the store_*.c files and the store's tests. */
#ifndef ISC_STORE_STORE_INT_H
#define ISC_STORE_STORE_INT_H

#include "store/store.h"

#include "store/db.h"

#include <stddef.h>

/* The connection, for the store's own files and tests only; other modules never touch SQL. */
struct isc_db *isc_store_db(struct isc_store *s);

/*
 * The ledger's totals (balance, reserved, spent, charged) summed from its rows, as
 * migration 8 kept them: its backfill (a shipped migration never changes, and the
 * column consumed_micros only came with migration 23).
 */
#define ISC_STORE_LEDGER_TOTALS_SUMS_V8                                                            \
	"COALESCE(SUM(CASE WHEN billing = 'credits' THEN (CASE kind WHEN 'grant' THEN "            \
	"amount_micros WHEN 'refund' THEN amount_micros WHEN 'adjustment' THEN amount_micros "     \
	"WHEN 'charge' THEN -amount_micros ELSE 0 END) ELSE 0 END), 0), "                          \
	"COALESCE(SUM(CASE WHEN billing = 'credits' THEN (CASE kind WHEN 'reserve' THEN "          \
	"amount_micros WHEN 'release' THEN -amount_micros ELSE 0 END) ELSE 0 END), 0), "           \
	"COALESCE(SUM(CASE WHEN billing = 'credits' AND kind = 'charge' THEN amount_micros "       \
	"ELSE 0 END), 0), "                                                                        \
	"COALESCE(SUM(CASE WHEN kind = 'charge' THEN amount_micros ELSE 0 END), 0)"

/*
 * The same sums since migration 23: a charge consumes consumed_micros of its
 * experiment's hold in its own row (no release row beside it), so reserved is
 * reserves - releases - what charges consumed. isc store copy's one-pass rebuild
 * on PostgreSQL (store_copy.c) and the migration test read them.
 */
#define ISC_STORE_LEDGER_TOTALS_SUMS                                                               \
	"COALESCE(SUM(CASE WHEN billing = 'credits' THEN (CASE kind WHEN 'grant' THEN "            \
	"amount_micros WHEN 'refund' THEN amount_micros WHEN 'adjustment' THEN amount_micros "     \
	"WHEN 'charge' THEN -amount_micros ELSE 0 END) ELSE 0 END), 0), "                          \
	"COALESCE(SUM(CASE WHEN billing = 'credits' THEN (CASE kind WHEN 'reserve' THEN "          \
	"amount_micros WHEN 'release' THEN -amount_micros WHEN 'charge' THEN -consumed_micros "    \
	"ELSE 0 END) ELSE 0 END), 0), "                                                            \
	"COALESCE(SUM(CASE WHEN billing = 'credits' AND kind = 'charge' THEN amount_micros "       \
	"ELSE 0 END), 0), "                                                                        \
	"COALESCE(SUM(CASE WHEN kind = 'charge' THEN amount_micros ELSE 0 END), 0)"

/*
 * The cloud's minimum billed time per instance start, in ms, for a node of cluster
 * alias c (../shared/docs/metering-facts.md): one hour for OCI bare metal, one
 * minute for every other shape of AWS, GCP and OCI. credits/credits.c's
 * isc_credits_minimum_ms says the same in C.
 */
#define ISC_STORE_MINIMUM_MS_SQL                                                                   \
	"(CASE WHEN c.provider = 'oci' AND c.shape_id LIKE '%BM.%' THEN 3600000 ELSE 60000 END)"
/*
 * Where node alias n's billed time ends once the cloud confirmed its termination (NULL
 * before): the termination, raised to the launch + the minimum (not for a termination
 * by absence, the first miss, never charged past: docs/credits.md, "Listing lag"). The interval's
 * closing charge runs to it, so a node that ran less than its minimum is billed the minimum even
 * when an earlier charge went to its termination or past it (a teardown's charge to "now" before
 * its termination was observed).
 */
#define ISC_STORE_BILLED_TERMINATION_SQL                                                           \
	"(CASE WHEN n.terminated_at_ms IS NULL THEN NULL WHEN n.absent_since_ms IS NOT NULL "      \
	"THEN n.terminated_at_ms WHEN n.terminated_at_ms < "                                       \
	"n.launched_at_ms + " ISC_STORE_MINIMUM_MS_SQL                                             \
	" THEN n.launched_at_ms + " ISC_STORE_MINIMUM_MS_SQL " ELSE n.terminated_at_ms END)"
/* Where node alias n's billed time ends when the meter next charges it at NOW: its billed
 * termination; else its first miss; else NOW. */
#define ISC_STORE_BILLED_END_SQL(NOW)                                                              \
	"COALESCE(" ISC_STORE_BILLED_TERMINATION_SQL ", n.absent_since_ms, " NOW ")"
/*
 * The accrued cost of experiment EXP's open intervals at NOW (a scalar subquery): per
 * node launched and not charged to its end, cost(launch..end) - cost(launch..charged),
 * each cost rounded up to the micro-dollar as isc_credits_cost_micros rounds, so that
 * with the charges it adds up to what the node will be charged in all.
 */
#define ISC_STORE_ACCRUED_SQL(EXP, NOW)                                                            \
	"(SELECT COALESCE(SUM((n.price_micros * (" ISC_STORE_BILLED_END_SQL(                       \
	    NOW) " - "                                                                             \
	         "n.launched_at_ms) + 3599999) / 3600000 - (n.price_micros * "                     \
	         "(COALESCE(n.charged_until_ms, "                                                  \
	         "n.launched_at_ms) - n.launched_at_ms) + 3599999) / 3600000), 0) FROM nodes n "   \
	         "JOIN "                                                                           \
	         "clusters c ON c.id = n.cluster_id WHERE c.experiment_id = " EXP " AND "          \
	         "n.launched_at_ms IS NOT NULL AND COALESCE(n.charged_until_ms, "                  \
	         "n.launched_at_ms) < " ISC_STORE_BILLED_END_SQL(NOW) ")"

size_t isc_store_migration_count(void);
const char *isc_store_migration_sql(size_t index);

/* Prepares sql or sets err (ISC_EIO with the database's message). */
int isc_store_prepare(struct isc_store *s, const char *sql, struct isc_db_stmt **out,
                      struct isc_err *err);
/*
 * Like isc_store_prepare, but the statement stays prepared on the connection
 * for the next call with the same sql (a string literal: it is kept by address).
 * Give it back with isc_store_finalize, never isc_db_finalize.
 */
int isc_store_prepare_cached(struct isc_store *s, const char *sql, struct isc_db_stmt **out,
                             struct isc_err *err);
/* Ends a statement from either prepare: a cached one is reset for reuse, others finalized. */
void isc_store_finalize(struct isc_store *s, struct isc_db_stmt *st);
/*
 * Sets err from the connection's last error; returns ISC_EIO (ISC_ECONFLICT for a
 * constraint, ISC_ESTORE for a failure that passes: isc_db_transient).
 */
int isc_store_db_err(struct isc_store *s, int rc, const char *what, struct isc_err *err);
/* Copies column text (NULL -> NULL); returns 0 or ISC_ENOMEM via *oom. */
char *isc_store_col_text(struct isc_db_stmt *st, int col, int *oom);
/*
 * Row readers: from_row fills one zeroed record from the current row and
 * returns 0 or ISC_ENOMEM (what it filled so far stays for cleanup, which
 * frees one record's fields). Every table's list and get functions read
 * through these, so stepping, growth, out-of-memory and database errors are
 * handled in one place.
 */
typedef int (*isc_store_row_fn)(struct isc_db_stmt *st, void *rec);
typedef void (*isc_store_rec_cleanup_fn)(void *rec);
/*
 * Steps st (already bound) to the end and finalizes it; *out gets an array of
 * *n records of `size` bytes (NULL when there are none; free each with
 * cleanup, then the array). On failure nothing is returned and err names
 * `what` ("reading clusters").
 */
int isc_store_read_rows(struct isc_store *s, struct isc_db_stmt *st, size_t size,
                        isc_store_row_fn from_row, isc_store_rec_cleanup_fn cleanup,
                        const char *what, void **out, size_t *n, struct isc_err *err);
/*
 * Frees a list of n records of `size` bytes: cleanup on each (it frees one
 * record's fields), then the array. Every row type's *_list_free is this with
 * its cleanup; isc_store_read_rows uses it when it fails part way.
 */
void isc_store_rows_free(void *list, size_t n, size_t size, isc_store_rec_cleanup_fn cleanup);
/*
 * The first row of st into *rec (zeroed first), then finalizes st.
 * ISC_ENOTFOUND without touching err when there is no row: the caller names
 * what is missing.
 */
int isc_store_read_one(struct isc_store *s, struct isc_db_stmt *st, isc_store_row_fn from_row,
                       isc_store_rec_cleanup_fn cleanup, void *rec, size_t size, const char *what,
                       struct isc_err *err);
/* Opens with a given migration limit (tests migrate step by step). */
int isc_store_open_at(const char *home, int create, size_t migrate_to, struct isc_store **out,
                      struct isc_err *err);
/* isc_store_open_url with a migration limit (0: none run; isc store copy's source). */
int isc_store_open_url_at(const char *home, const char *url, int create, size_t migrate_to,
                          struct isc_store **out, struct isc_err *err);
/*
 * The LIMIT of a page: limit rows, or (0) every row after the cursor. Not -1, SQLite's
 * "no limit": PostgreSQL refuses a negative LIMIT.
 */
int64_t isc_store_page_limit(size_t limit);

#endif
