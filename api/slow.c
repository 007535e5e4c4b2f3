/*
 * The pool of slow calls (api/slow.h): a few threads and a bounded first-in
 * first-out queue under one mutex. What a job does is the caller's (the API
 * server runs a route on the thread's own store connection, api/server.c);
 * the pool only decides which thread runs it and when it is handed back.
 */
#include "api/slow.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

struct isc_api_slow {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* a job was queued, or the pool stops */
	struct isc_api_slow_job *head, *tail;
	size_t queued, running, queue_max;
	int stopping;
	pthread_t *threads;
	unsigned n_threads; /* started */
	unsigned n_wanted;
};

static void *worker(void *arg)
{
	struct isc_api_slow *p = arg;

	for (;;) {
		struct isc_api_slow_job *job;
		int abandoned;

		pthread_mutex_lock(&p->lock);
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->wake, &p->lock);
		if (!p->head) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		job = p->head;
		p->head = job->next;
		if (!p->head)
			p->tail = NULL;
		job->next = NULL;
		job->running = 1;
		p->queued--;
		p->running++;
		pthread_mutex_unlock(&p->lock);

		job->run(job);

		/* Decided under the lock, so an owner that abandons it meanwhile knows who frees
		 * it. */
		pthread_mutex_lock(&p->lock);
		abandoned = job->abandoned;
		job->in_pool = 0;
		job->running = 0;
		p->running--;
		pthread_mutex_unlock(&p->lock);
		if (abandoned)
			job->free(job);
		else
			job->finish(job,
			            1); /* the job is its owner's again: not touched after this */
	}
}

int isc_api_slow_new(unsigned threads, unsigned queue_max, struct isc_api_slow **out,
                     struct isc_err *err)
{
	struct isc_api_slow *p;
	sigset_t block, old;

	*out = NULL;
	if (threads < 1 || queue_max < 1)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "the slow-call pool needs at least one thread and one queue slot");
	if (!(p = calloc(1, sizeof(*p))) || !(p->threads = calloc(threads, sizeof(*p->threads)))) {
		free(p);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	p->queue_max = queue_max;
	p->n_wanted = threads;
	/* SIGTERM and SIGINT stay the main thread's (iscd stops on them), as the tick's. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (; p->n_threads < threads; p->n_threads++)
		if (pthread_create(&p->threads[p->n_threads], NULL, worker, p) != 0)
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->n_threads < threads) {
		isc_api_slow_free(p);
		return isc_err_set(err, ISC_ENOMEM,
		                   "cannot start the API's threads for slow calls");
	}
	*out = p;
	return 0;
}

int isc_api_slow_submit(struct isc_api_slow *p, struct isc_api_slow_job *job, struct isc_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	if (p->stopping) {
		rc = isc_err_set(err, ISC_ETRANSIENT, "iscd is shutting down");
	} else if (p->queued >= p->queue_max) {
		rc = isc_err_set(err, ISC_ETHROTTLED,
		                 "iscd is busy: %zu slow calls (cloud, S3 or SSH) wait for its %u "
		                 "threads for them, the most it queues (api_slow_queue, "
		                 "api_slow_threads); try again shortly",
		                 p->queued, p->n_wanted);
	} else {
		job->next = NULL;
		job->in_pool = 1;
		job->running = 0;
		job->abandoned = 0;
		if (p->tail)
			p->tail->next = job;
		else
			p->head = job;
		p->tail = job;
		p->queued++;
		pthread_cond_signal(&p->wake);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Takes job out of the queue; 1 when it was there. Under the lock. */
static int unqueue(struct isc_api_slow *p, struct isc_api_slow_job *job)
{
	struct isc_api_slow_job *prev = NULL;

	for (struct isc_api_slow_job *j = p->head; j; prev = j, j = j->next) {
		if (j != job)
			continue;
		if (prev)
			prev->next = j->next;
		else
			p->head = j->next;
		if (p->tail == j)
			p->tail = prev;
		j->next = NULL;
		p->queued--;
		return 1;
	}
	return 0;
}

int isc_api_slow_abandon(struct isc_api_slow *p, struct isc_api_slow_job *job)
{
	int queued;

	pthread_mutex_lock(&p->lock);
	if (!job->in_pool) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	queued = !job->running && unqueue(p, job);
	if (queued)
		job->in_pool = 0;
	else
		job->abandoned = 1; /* the thread running it frees it */
	pthread_mutex_unlock(&p->lock);
	if (queued)
		job->free(job);
	return 1;
}

void isc_api_slow_counts(struct isc_api_slow *p, size_t *queued, size_t *running)
{
	pthread_mutex_lock(&p->lock);
	*queued = p->queued;
	*running = p->running;
	pthread_mutex_unlock(&p->lock);
}

void isc_api_slow_stop(struct isc_api_slow *p)
{
	struct isc_api_slow_job *left;
	unsigned n_threads;

	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	left = p->head;
	p->head = p->tail = NULL;
	p->queued = 0;
	for (struct isc_api_slow_job *j = left; j; j = j->next)
		j->in_pool = 0;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	/* Handed back unrun: their owners answer them (the server: 503, shutting down). */
	while (left) {
		struct isc_api_slow_job *j = left;
		left = j->next;
		j->next = NULL;
		j->finish(j, 0);
	}
	/* Running calls end on their own (every outbound call has a timeout). */
	pthread_mutex_lock(&p->lock);
	n_threads = p->n_threads;
	p->n_threads = 0; /* joined once, by the first stop */
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n_threads; i++)
		pthread_join(p->threads[i], NULL);
}

void isc_api_slow_free(struct isc_api_slow *p)
{
	if (!p)
		return;
	isc_api_slow_stop(p);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}
