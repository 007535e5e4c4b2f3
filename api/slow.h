/*
 * The API's pool for slow calls: routes that wait on a cloud, S3, an SSH login
 * or a long local operation (a route says so with `slow` in its table, api/api_int.h)
 * run on these threads instead of the server's, so a server thread is never
 * tied up by one caller's slow call and the server can have one thread per core
 * (docs/api.md, "Slow calls").
 *
 * The pool knows nothing of HTTP: it runs jobs. A job is owned by its submitter
 * until isc_api_slow_submit accepts it, then by the pool until the pool calls
 * its finish (the job is handed back: the pool never touches it again), or its
 * free when its owner abandoned it meanwhile. The queue of jobs waiting for a
 * thread is bounded: a full queue refuses the job, so a flood of slow calls is
 * answered at once instead of piling up connections.
 */
#ifndef ISC_API_SLOW_H
#define ISC_API_SLOW_H

#include "common/err.h"

#include <stddef.h>

struct isc_api_slow;

struct isc_api_slow_job {
	/* Runs the call, on a pool thread. */
	void (*run)(struct isc_api_slow_job *job);
	/*
	 * Hands the job back to its owner: after run (ran = 1), or without running
	 * it when the pool stops with the job still queued (ran = 0). Called on a
	 * pool thread, or on the thread of isc_api_slow_free.
	 */
	void (*finish)(struct isc_api_slow_job *job, int ran);
	/* Frees a job its owner abandoned (isc_api_slow_abandon) before it was handed back. */
	void (*free)(struct isc_api_slow_job *job);

	/* The pool's own, under its lock. */
	struct isc_api_slow_job *next;
	int in_pool;   /* accepted and not yet handed back */
	int running;   /* taken by a thread */
	int abandoned; /* its owner let go while it ran: freed, not finished */
};

/* threads (>= 1) run the jobs; at most queue_max (>= 1) wait for one. */
int isc_api_slow_new(unsigned threads, unsigned queue_max, struct isc_api_slow **out,
                     struct isc_err *err);
/*
 * Queues the job. 0: accepted, the pool owns it. ISC_ETHROTTLED: the queue is full;
 * ISC_ETRANSIENT: the pool is stopping. On refusal the caller still owns the job and
 * err says why in words for the caller of the API.
 */
int isc_api_slow_submit(struct isc_api_slow *p, struct isc_api_slow_job *job, struct isc_err *err);
/*
 * The owner lets go of an accepted job it no longer wants answered. Returns 1 when
 * the pool still had it (it frees it with job->free once run, or at once if still
 * queued), 0 when it had already been handed back (the owner frees it).
 */
int isc_api_slow_abandon(struct isc_api_slow *p, struct isc_api_slow_job *job);
/* Jobs waiting for a thread, and jobs running now (for tests and logs). */
void isc_api_slow_counts(struct isc_api_slow *p, size_t *queued, size_t *running);
/*
 * Stops the pool: new jobs are refused from the start of the call, queued ones are
 * handed back unrun (finish with ran = 0), running ones finish their call (every
 * outbound call has its timeout), and the threads end. The pool stays valid (it
 * refuses) until isc_api_slow_free, so those who submit need not stop first.
 */
void isc_api_slow_stop(struct isc_api_slow *p);
/* Stops the pool if it was not stopped, and frees it. NULL is fine. */
void isc_api_slow_free(struct isc_api_slow *p);

#endif
