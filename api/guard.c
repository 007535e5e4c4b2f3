/*
 * The guard of one API listener (api/guard.h): a list of its connections in
 * the order they opened, under one mutex, and a thread that cuts the waiting
 * ones past their deadline. The list holds at most a few thousand entries, so
 * counting an address's connections or finding the oldest waiting one is a
 * walk of the list: no index to keep right.
 */
#include "api/guard.h"
#include "common/clock.h"
#include "common/log.h"

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A summary of what was cut is logged at most this often (a flood would fill the log). */
#define REPORT_EVERY_MS 10000

struct isc_api_guard_conn {
	struct isc_api_guard_conn *prev, *next;
	int fd;
	int family;             /* AF_INET, AF_INET6, or 0: no address */
	unsigned char addr[16]; /* the IP address, without the port */
	int waiting;            /* no identified request yet (or since the last one ended) */
	int64_t since_ms;       /* when it started waiting */
	int cut;                /* shut down by the guard; closing */
};

struct isc_api_guard {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* the guard stops */
	char name[16];
	struct isc_api_guard_limits lim;
	struct isc_api_guard_conn *head, *tail; /* oldest first */
	struct isc_api_guard_counts n;
	struct isc_api_guard_counts reported; /* as last logged */
	int64_t reported_ms;
	int stopping;
	int has_thread;
	pthread_t thread;
};

/* Under the lock. shutdown, not close: the socket stays its owner's to close. */
static void cut(struct isc_api_guard *g, struct isc_api_guard_conn *c)
{
	if (c->cut)
		return;
	c->cut = 1;
	g->n.held--;
	if (c->waiting)
		g->n.waiting--;
	shutdown(c->fd, SHUT_RDWR);
}

static void set_waiting(struct isc_api_guard *g, struct isc_api_guard_conn *c, int waiting)
{
	if (c->cut || c->waiting == waiting)
		return;
	c->waiting = waiting;
	if (waiting)
		g->n.waiting++;
	else
		g->n.waiting--;
}

/* Under the lock: logs what was cut since the last report, once per REPORT_EVERY_MS. */
static void report(struct isc_api_guard *g, int64_t now_ms)
{
	struct isc_api_guard_counts *n = &g->n, *r = &g->reported;
	if (now_ms - g->reported_ms < REPORT_EVERY_MS)
		return;
	if (n->refused_ip == r->refused_ip && n->refused_full == r->refused_full &&
	    n->evicted == r->evicted && n->timed_out == r->timed_out)
		return;
	isc_log(ISC_LOG_WARN,
	        "api: %s listener: %llu connection(s) past the %lld ms deadline for their "
	        "headers, %llu cut to make room, %llu over the %u per address, %llu refused "
	        "while full of identified callers (since the last report); %zu held now, %zu "
	        "of them waiting (docs/api.md, \"Limits\")",
	        g->name, (unsigned long long)(n->timed_out - r->timed_out),
	        (long long)g->lim.header_timeout_ms, (unsigned long long)(n->evicted - r->evicted),
	        (unsigned long long)(n->refused_ip - r->refused_ip), g->lim.per_ip,
	        (unsigned long long)(n->refused_full - r->refused_full), n->held, n->waiting);
	*r = *n;
	g->reported_ms = now_ms;
}

static void *sweeper(void *arg)
{
	struct isc_api_guard *g = arg;

	pthread_mutex_lock(&g->lock);
	while (!g->stopping) {
		struct timespec until = isc_monotonic_deadline(g->lim.sweep_ms);
		pthread_cond_timedwait(&g->wake, &g->lock, &until);
		if (g->stopping)
			break;
		pthread_mutex_unlock(&g->lock);
		isc_api_guard_sweep(g, isc_monotonic_ms());
		pthread_mutex_lock(&g->lock);
		report(g, isc_monotonic_ms());
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int isc_api_guard_new(const char *name, const struct isc_api_guard_limits *limits,
                      struct isc_api_guard **out, struct isc_err *err)
{
	struct isc_api_guard *g;
	pthread_condattr_t ca;

	*out = NULL;
	if (limits->max_conns < 1 || limits->header_timeout_ms < 1)
		return isc_err_set(err, ISC_EINVALID,
		                   "the %s listener's guard needs a connection limit and a "
		                   "deadline for headers of at least 1",
		                   name);
	if (!(g = calloc(1, sizeof(*g))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	pthread_mutex_init(&g->lock, NULL);
	/* The deadline's waits are on the monotonic clock (isc_monotonic_deadline). */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->wake, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->lim = *limits;
	g->reported_ms = isc_monotonic_ms();
	if (limits->sweep_ms > 0) {
		sigset_t block, old;
		int rc;
		/* SIGTERM and SIGINT stay the main thread's (iscd stops on them). */
		sigemptyset(&block);
		sigaddset(&block, SIGTERM);
		sigaddset(&block, SIGINT);
		pthread_sigmask(SIG_BLOCK, &block, &old);
		rc = pthread_create(&g->thread, NULL, sweeper, g);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			isc_api_guard_free(g);
			return isc_err_set(err, ISC_ENOMEM,
			                   "cannot start the %s listener's deadline thread", name);
		}
		g->has_thread = 1;
	}
	*out = g;
	return 0;
}

void isc_api_guard_free(struct isc_api_guard *g)
{
	if (!g)
		return;
	if (g->has_thread) {
		pthread_mutex_lock(&g->lock);
		g->stopping = 1;
		pthread_cond_broadcast(&g->wake);
		pthread_mutex_unlock(&g->lock);
		pthread_join(g->thread, NULL);
	}
	/* Connections a stopped server did not report closed (none should be left). */
	while (g->head) {
		struct isc_api_guard_conn *c = g->head;
		g->head = c->next;
		free(c);
	}
	pthread_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

static int same_address(const struct isc_api_guard_conn *a, const struct isc_api_guard_conn *b)
{
	size_t len = a->family == AF_INET ? 4 : 16;
	return a->family && a->family == b->family && memcmp(a->addr, b->addr, len) == 0;
}

struct isc_api_guard_conn *isc_api_guard_open(struct isc_api_guard *g, int fd,
                                              const struct sockaddr *addr, socklen_t addr_len,
                                              int64_t now_ms)
{
	struct isc_api_guard_conn *c = calloc(1, sizeof(*c));
	unsigned same = 0;

	if (!c) {
		shutdown(fd, SHUT_RDWR);
		return NULL;
	}
	c->fd = fd;
	c->waiting = 1;
	c->since_ms = now_ms;
	if (addr && addr->sa_family == AF_INET &&
	    addr_len >= (socklen_t)sizeof(struct sockaddr_in)) {
		c->family = AF_INET;
		memcpy(c->addr, &((const struct sockaddr_in *)addr)->sin_addr, 4);
	} else if (addr && addr->sa_family == AF_INET6 &&
	           addr_len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		c->family = AF_INET6;
		memcpy(c->addr, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
	}

	pthread_mutex_lock(&g->lock);
	if (g->lim.per_ip && c->family)
		for (struct isc_api_guard_conn *o = g->head; o; o = o->next)
			if (!o->cut && same_address(o, c))
				same++;
	c->prev = g->tail;
	if (g->tail)
		g->tail->next = c;
	else
		g->head = c;
	g->tail = c;
	g->n.held++;
	g->n.waiting++;
	if (g->lim.per_ip && same >= g->lim.per_ip) {
		g->n.refused_ip++;
		cut(g, c);
	} else if (g->n.held > g->lim.max_conns) {
		/* Room is made by cutting the oldest waiting one: never the new one while any
		 * other waits, so a caller who sends a whole request at once is served. */
		struct isc_api_guard_conn *o = g->head;
		while (o && (o->cut || !o->waiting || o == c))
			o = o->next;
		if (o) {
			g->n.evicted++;
			cut(g, o);
		} else {
			g->n.refused_full++;
			cut(g, c);
		}
	}
	pthread_mutex_unlock(&g->lock);
	return c;
}

void isc_api_guard_identified(struct isc_api_guard *g, struct isc_api_guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	set_waiting(g, c, 0);
	pthread_mutex_unlock(&g->lock);
}

void isc_api_guard_request_done(struct isc_api_guard *g, struct isc_api_guard_conn *c,
                                int64_t now_ms)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	set_waiting(g, c, 1);
	c->since_ms = now_ms;
	pthread_mutex_unlock(&g->lock);
}

void isc_api_guard_close(struct isc_api_guard *g, struct isc_api_guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	if (!c->cut) {
		g->n.held--;
		if (c->waiting)
			g->n.waiting--;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		g->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		g->tail = c->prev;
	pthread_mutex_unlock(&g->lock);
	free(c);
}

size_t isc_api_guard_sweep(struct isc_api_guard *g, int64_t now_ms)
{
	size_t n = 0;

	pthread_mutex_lock(&g->lock);
	for (struct isc_api_guard_conn *c = g->head; c; c = c->next)
		if (!c->cut && c->waiting && now_ms - c->since_ms >= g->lim.header_timeout_ms) {
			cut(g, c);
			g->n.timed_out++;
			n++;
		}
	pthread_mutex_unlock(&g->lock);
	return n;
}

int isc_api_guard_was_cut(struct isc_api_guard *g, const struct isc_api_guard_conn *c)
{
	int was;
	pthread_mutex_lock(&g->lock);
	was = c && c->cut;
	pthread_mutex_unlock(&g->lock);
	return was;
}

void isc_api_guard_counts(struct isc_api_guard *g, struct isc_api_guard_counts *out)
{
	pthread_mutex_lock(&g->lock);
	*out = g->n;
	pthread_mutex_unlock(&g->lock);
}
