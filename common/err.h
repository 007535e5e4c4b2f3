/*
 * The one error model of the code base.
 *
 * Functions that can fail return 0 on success or a negative isc_code, and
 * fill a caller-provided struct isc_err with the same code and a message.
 * Callers decide on the code (the broker fails over on capacity/quota,
 * retries throttled/transient, stops on auth); the message is for people.
 * An err pointer may be NULL when the caller does not want the message.
 */
#ifndef ISC_COMMON_ERR_H
#define ISC_COMMON_ERR_H

#include <stddef.h>

enum isc_code {
	ISC_OK = 0,
	ISC_EINVALID = -1,   /* bad input: file, flag, value, cloud reply shape */
	ISC_ENOTFOUND = -2,  /* the named thing does not exist */
	ISC_ECONFLICT = -3,  /* exists already, or state forbids the change */
	ISC_EAUTH = -4,      /* credentials or signature refused; never retried */
	ISC_EQUOTA = -5,     /* account limit; try another shape */
	ISC_ECAPACITY = -6,  /* cloud has no capacity; try another zone/shape */
	ISC_ETHROTTLED = -7, /* rate limited; retry with backoff */
	ISC_ETRANSIENT = -8, /* 5xx, connection reset, timeout; retry */
	ISC_ECREDITS = -9,   /* not enough credits or budget */
	ISC_EIO = -10,       /* local I/O, database, process failure */
	ISC_ENOMEM = -11,    /* allocation failed */
	/*
	 * The store is briefly out of reach or refused a transaction it may accept again:
	 * a lost PostgreSQL connection, a server restarting, a serialization failure or
	 * deadlock, SQLITE_BUSY past the busy timeout (store/db.h, isc_db_transient). Never
	 * a reason to fail an experiment: the step is tried again (docs/ha.md, issue 48).
	 */
	ISC_ESTORE = -12,
	/*
	 * This replica no longer holds the burst's lease (expired, or taken over): not a
	 * failure of the operation. The step ends at once, with no error-path write and
	 * no cloud call; whoever holds the lease now decides (docs/ha.md, issue 48).
	 */
	ISC_ELEASE = -13,
};

#define ISC_ERR_MSG_MAX 512

struct isc_err {
	int code;
	char msg[ISC_ERR_MSG_MAX];
};

/*
 * Drops a UTF-8 sequence left incomplete at the end of s: a message cut to
 * its buffer (ISC_ERR_MSG_MAX) may end inside a character, and JSON, which
 * carries messages to isc and the pages, takes only whole ones. isc_err_set
 * and isc_err_wrap do this to every message.
 */
void isc_utf8_trim_partial(char *s);

/* Sets err (if not NULL) and returns code, so callers can `return isc_err_set(...)`. */
int isc_err_set(struct isc_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with context ("loading shapes: ..."); returns err->code. */
int isc_err_wrap(struct isc_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void isc_err_clear(struct isc_err *err);

/* "invalid", "not_found", ... ; "ok" for 0, "unknown" otherwise. */
const char *isc_code_name(int code);

/* True for the codes a caller may retry after a backoff (throttled, transient, store). */
int isc_code_is_retryable(int code);

#endif
