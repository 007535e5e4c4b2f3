/* Internals shared by the store_*.c files and the store's tests. */
#ifndef ISC_STORE_STORE_INT_H
#define ISC_STORE_STORE_INT_H

#include "store/store.h"

#include <sqlite3.h>
#include <stddef.h>

size_t isc_store_migration_count(void);
const char *isc_store_migration_sql(size_t index);

/* Prepares sql or sets err (ISC_EIO with sqlite's message). */
int isc_store_prepare(struct isc_store *s, const char *sql, sqlite3_stmt **out,
                      struct isc_err *err);
/* Sets err from the connection's last error; returns ISC_EIO (ISC_ECONFLICT for constraint). */
int isc_store_sqlite_err(struct isc_store *s, int rc, const char *what, struct isc_err *err);
/* Copies column text (NULL -> NULL); returns 0 or ISC_ENOMEM via *oom. */
char *isc_store_col_text(sqlite3_stmt *st, int col, int *oom);
/* Opens with a given migration limit (tests migrate step by step). */
int isc_store_open_at(const char *home, int create, size_t migrate_to, struct isc_store **out,
                      struct isc_err *err);
int64_t isc_store_now_ms(void);

#endif
