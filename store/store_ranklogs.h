/*
 * Rank logs in the store (table rank_logs, migration 27, issue 45): a rank's output
 * as rows of batches, each at the byte offset where it starts in that rank's log.
 * The replica that follows a burst appends (broker/logship.c, from a thread and a
 * connection of its own); the API of any replica reads from an offset, so
 * `isc logs --follow` and the Experiments page need no shared folder. Rows may
 * overlap (a replica that lost its lease still finishing a batch): a read goes on
 * from the offset it has, whichever row holds it.
 */
#ifndef ISC_STORE_STORE_RANKLOGS_H
#define ISC_STORE_STORE_RANKLOGS_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

/* The largest row: a batch is split into rows of at most this many bytes. */
#define ISC_RANKLOG_ROW_MAX 262144

struct isc_ranklog_chunk {
	const char *experiment_id;
	const char *cluster_id; /* NULL: "" */
	int rank;
	uint64_t offset;
	const void *data;
	size_t len; /* 1..ISC_RANKLOG_ROW_MAX */
};

/*
 * Appends n chunks in one transaction. A chunk at an offset already held is
 * skipped (the first writer's bytes stay). ISC_EINVALID for an empty or too
 * large chunk, naming it.
 */
int isc_store_ranklog_append(struct isc_store *s, const struct isc_ranklog_chunk *c, size_t n,
                             struct isc_err *err);
/*
 * Where the rank's log ends (0 when it has none) and its last byte ('\n' when
 * none), so a follow goes on after it.
 */
int isc_store_ranklog_end(struct isc_store *s, const char *experiment_id, int rank, uint64_t *end,
                          char *last, struct isc_err *err);
/* Bytes of every rank's log of the experiment (its cap is counted against this). */
int isc_store_ranklog_total(struct isc_store *s, const char *experiment_id, uint64_t *bytes,
                            struct isc_err *err);
/*
 * Up to cap bytes of the rank's log from offset into buf; *got how many (0 at
 * the end), *next where the next read starts (offset + *got, or past a gap: bytes
 * the writer lost are skipped, never waited for). *found 1 when the rank has any
 * row at all.
 */
int isc_store_ranklog_read(struct isc_store *s, const char *experiment_id, int rank,
                           uint64_t offset, char *buf, size_t cap, size_t *got, uint64_t *next,
                           int *found, struct isc_err *err);
/* Removes every row of the experiment's logs. */
int isc_store_ranklog_delete(struct isc_store *s, const char *experiment_id, struct isc_err *err);

#endif
