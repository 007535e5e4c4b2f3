/* The log shipper: rank logs into the store (see logship.h). */
#include "broker/logship.h"

#include "common/clock.h"
#include "common/log.h"
#include "store/store.h"
#include "store/store_ranklogs.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ship_exp {
	char *id;
	uint64_t total; /* bytes in the store and buffered */
	int refs;       /* ship_logs on it */
	struct ship_exp *next;
};

struct ship_log {
	struct isc_logship *ls;
	struct ship_exp *exp;
	int rank;
	uint64_t end; /* the next byte's offset */
	char last;    /* the last byte given an offset */
	char *buf;    /* bytes from buf_off not yet written */
	size_t len, cap;
	uint64_t buf_off;
	int open;         /* follows appending to it */
	int inflight;     /* a batch of it is being written */
	int capped;       /* the experiment's cap cut it: its marker is in */
	uint64_t dropped; /* cut for the backlog, not yet said */
	struct ship_log *next;
};

struct isc_logship {
	pthread_mutex_t lock; /* guards everything below but s */
	pthread_cond_t cond, done;
	pthread_t thread;
	int started, stop, urgent;
	uint64_t flush_asked, flush_done; /* isc_logship_flush's turns */
	int flush_rc;
	struct isc_err flush_err;
	uint64_t exp_cap;
	long interval_ms;
	struct ship_log *logs;
	struct ship_exp *exps;
	uint64_t rows, bytes;
	/* The shipper's own connection: its thread's, and open's under db_lock. */
	pthread_mutex_t db_lock;
	struct isc_store *s;
	struct isc_log_sink sink;
};

/* Appends to the log's buffer and gives the bytes offsets; ls->lock held. */
static int buffer_put(struct ship_log *l, const char *data, size_t len)
{
	if (l->len + len > l->cap) {
		size_t cap = l->cap ? l->cap : 4096;
		char *grown;
		while (cap < l->len + len)
			cap *= 2;
		if (!(grown = realloc(l->buf, cap)))
			return -1;
		l->buf = grown;
		l->cap = cap;
	}
	if (l->len == 0)
		l->buf_off = l->end;
	memcpy(l->buf + l->len, data, len);
	l->len += len;
	l->end += len;
	l->exp->total += len;
	l->last = data[len - 1];
	return 0;
}

/* A line of the broker's own, on a line of its own; ls->lock held. */
static void buffer_marker(struct ship_log *l, const char *line)
{
	if (l->last != '\n')
		buffer_put(l, "\n", 1);
	buffer_put(l, line, strlen(line));
}

static void *sink_open(void *ctx, const char *experiment_id, int rank, uint64_t *bytes, char *last)
{
	struct isc_logship *ls = ctx;
	struct ship_log *l;
	struct ship_exp *x;
	uint64_t end = 0, total = 0;
	char tail = '\n';
	int known_exp = 0;
	struct isc_err err;

	*bytes = 0;
	*last = '\n';
	pthread_mutex_lock(&ls->lock);
	for (l = ls->logs; l; l = l->next)
		if (l->rank == rank && strcmp(l->exp->id, experiment_id) == 0)
			break;
	if (l) {
		/* Still known (buffered, or a follow of it stopped a moment ago): go on. */
		l->open++;
		*bytes = l->end;
		*last = l->last;
		pthread_mutex_unlock(&ls->lock);
		return l;
	}
	for (x = ls->exps; x; x = x->next)
		if (strcmp(x->id, experiment_id) == 0)
			known_exp = 1;
	pthread_mutex_unlock(&ls->lock);

	/* Where the store's copy ends (another replica's follow, an earlier iscd). */
	pthread_mutex_lock(&ls->db_lock);
	if (isc_store_ranklog_end(ls->s, experiment_id, rank, &end, &tail, &err) ||
	    (!known_exp && isc_store_ranklog_total(ls->s, experiment_id, &total, &err))) {
		pthread_mutex_unlock(&ls->db_lock);
		isc_log(ISC_LOG_WARN, "%s: rank %d's log is not sent to the store: %s",
		        experiment_id, rank, err.msg);
		return NULL;
	}
	pthread_mutex_unlock(&ls->db_lock);

	pthread_mutex_lock(&ls->lock);
	for (x = ls->exps; x; x = x->next)
		if (strcmp(x->id, experiment_id) == 0)
			break;
	if (!x) {
		/* (Known a moment ago and retired since: its total is read again next time.) */
		x = calloc(1, sizeof(*x));
		if (x && !(x->id = strdup(experiment_id))) {
			free(x);
			x = NULL;
		}
		if (!x) {
			pthread_mutex_unlock(&ls->lock);
			return NULL;
		}
		x->total = total;
		x->next = ls->exps;
		ls->exps = x;
	}
	if (!(l = calloc(1, sizeof(*l)))) {
		pthread_mutex_unlock(&ls->lock);
		return NULL; /* x, unused, goes at the next retire */
	}
	x->refs++;
	l->ls = ls;
	l->exp = x;
	l->rank = rank;
	l->end = end;
	l->last = tail;
	l->open = 1;
	l->next = ls->logs;
	ls->logs = l;
	*bytes = end;
	*last = tail;
	pthread_mutex_unlock(&ls->lock);
	return l;
}

static void sink_append(void *handle, const char *data, size_t len)
{
	struct ship_log *l = handle;
	struct isc_logship *ls = l->ls;
	uint64_t cap = ls->exp_cap;

	pthread_mutex_lock(&ls->lock);
	if (l->capped || len == 0)
		goto out;
	if (l->len + len > ISC_LOGSHIP_BACKLOG) {
		l->dropped += len; /* the store is not keeping up: said once it does */
		goto out;
	}
	if (l->dropped) {
		char line[200];
		snprintf(line, sizeof(line),
		         "---- isc: %llu bytes of output were not kept: the store did not keep up "
		         "----\n",
		         (unsigned long long)l->dropped);
		l->dropped = 0;
		buffer_marker(l, line);
	}
	if (cap && l->exp->total + len > cap) {
		char line[200];
		size_t room = l->exp->total < cap ? (size_t)(cap - l->exp->total) : 0;
		if (room)
			buffer_put(l, data, room);
		snprintf(line, sizeof(line),
		         "---- isc: this experiment's logs reached experiment_log_max_bytes (%llu "
		         "bytes) in the store; later output of this rank is not kept there ----\n",
		         (unsigned long long)cap);
		buffer_marker(l, line);
		l->capped = 1;
		goto out;
	}
	buffer_put(l, data, len);
	if (l->len >= ISC_LOGSHIP_BATCH && !ls->urgent) {
		ls->urgent = 1;
		pthread_cond_signal(&ls->cond);
	}
out:
	pthread_mutex_unlock(&ls->lock);
}

static void sink_close(void *handle)
{
	struct ship_log *l = handle;
	pthread_mutex_lock(&l->ls->lock);
	l->open--;
	pthread_mutex_unlock(&l->ls->lock);
}

/* Frees logs nobody appends to whose bytes are all written, and their unused exps. */
static void retire_locked(struct isc_logship *ls)
{
	for (struct ship_log **p = &ls->logs; *p;) {
		struct ship_log *l = *p;
		if (l->open || l->inflight || l->len) {
			p = &l->next;
			continue;
		}
		*p = l->next;
		l->exp->refs--;
		free(l->buf);
		free(l);
	}
	for (struct ship_exp **p = &ls->exps; *p;) {
		struct ship_exp *x = *p;
		if (x->refs) {
			p = &x->next;
			continue;
		}
		*p = x->next;
		free(x->id);
		free(x);
	}
}

struct batch {
	struct ship_log *log;
	char *buf;
	size_t len;
	uint64_t off;
};

/* Takes every buffer out, writes them in one transaction, puts them back on failure. */
static int ship_once(struct isc_logship *ls, struct isc_err *err)
{
	struct batch *b = NULL;
	struct isc_ranklog_chunk *c = NULL;
	size_t nb = 0, nc = 0, cap_b = 0;
	int rc = 0;

	pthread_mutex_lock(&ls->lock);
	for (struct ship_log *l = ls->logs; l; l = l->next) {
		if (!l->len)
			continue;
		if (nb == cap_b) {
			struct batch *grown =
			    realloc(b, (cap_b = cap_b ? cap_b * 2 : 16) * sizeof(*b));
			if (!grown)
				break;
			b = grown;
		}
		b[nb] = (struct batch){l, l->buf, l->len, l->buf_off};
		l->buf = NULL;
		l->len = l->cap = 0;
		l->inflight++;
		nb++;
	}
	ls->urgent = 0;
	pthread_mutex_unlock(&ls->lock);
	if (!nb) {
		free(b);
		return 0;
	}
	for (size_t i = 0; i < nb; i++)
		nc += (b[i].len + ISC_RANKLOG_ROW_MAX - 1) / ISC_RANKLOG_ROW_MAX;
	c = calloc(nc, sizeof(*c));
	if (!c) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else {
		size_t k = 0;
		for (size_t i = 0; i < nb; i++)
			for (size_t at = 0; at < b[i].len; at += ISC_RANKLOG_ROW_MAX) {
				size_t len = b[i].len - at;
				if (len > ISC_RANKLOG_ROW_MAX)
					len = ISC_RANKLOG_ROW_MAX;
				c[k++] = (struct isc_ranklog_chunk){
				    b[i].log->exp->id, NULL,          b[i].log->rank,
				    b[i].off + at,     b[i].buf + at, len};
			}
		pthread_mutex_lock(&ls->db_lock);
		rc = isc_store_ranklog_append(ls->s, c, nc, err);
		pthread_mutex_unlock(&ls->db_lock);
	}
	pthread_mutex_lock(&ls->lock);
	if (!rc) {
		ls->rows += nc;
		for (size_t i = 0; i < nb; i++)
			ls->bytes += b[i].len;
	}
	for (size_t i = 0; i < nb; i++) {
		struct ship_log *l = b[i].log;
		l->inflight--;
		if (rc && b[i].len + l->len <= 2 * ISC_LOGSHIP_BACKLOG) {
			/* Back in front of what came meanwhile, to be written next time. */
			char *joined = malloc(b[i].len + l->len + 1);
			if (joined) {
				memcpy(joined, b[i].buf, b[i].len);
				if (l->len)
					memcpy(joined + b[i].len, l->buf, l->len);
				free(l->buf);
				l->buf = joined;
				l->len += b[i].len;
				l->cap = l->len + 1;
				l->buf_off = b[i].off;
				continue; /* b[i].buf freed below */
			}
		}
		if (rc)
			l->dropped += b[i].len; /* lost: said in the log once the store answers */
	}
	for (size_t i = 0; i < nb; i++)
		free(b[i].buf);
	retire_locked(ls);
	pthread_mutex_unlock(&ls->lock);
	free(b);
	free(c);
	return rc;
}

static void *ship_main(void *arg)
{
	struct isc_logship *ls = arg;
	int64_t last_warn = 0;

	pthread_mutex_lock(&ls->lock);
	for (;;) {
		uint64_t asked;
		int stop, rc;
		struct isc_err err;

		if (!ls->stop && !ls->urgent && ls->flush_asked == ls->flush_done) {
			/* the monotonic clock (common/clock.h): a stepped wall clock moves nothing
			 */
			struct timespec until = isc_monotonic_deadline(ls->interval_ms);
			pthread_cond_timedwait(&ls->cond, &ls->lock, &until);
		}
		stop = ls->stop;
		asked = ls->flush_asked;
		pthread_mutex_unlock(&ls->lock);
		isc_err_clear(&err);
		rc = ship_once(ls, &err);
		if (rc && isc_monotonic_ms() - last_warn > 60000) {
			last_warn = isc_monotonic_ms();
			isc_log(ISC_LOG_WARN,
			        "rank logs into the store: %s (kept in memory, retried)", err.msg);
		}
		pthread_mutex_lock(&ls->lock);
		if (asked != ls->flush_done) {
			ls->flush_done = asked;
			ls->flush_rc = rc;
			ls->flush_err = err;
			pthread_cond_broadcast(&ls->done);
		}
		if (stop)
			break;
	}
	pthread_mutex_unlock(&ls->lock);
	return NULL;
}

int isc_logship_new(const char *home, uint64_t exp_cap, long interval_ms, struct isc_logship **out,
                    struct isc_err *err)
{
	struct isc_logship *ls = calloc(1, sizeof(*ls));
	int rc;

	*out = NULL;
	if (!ls)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if ((rc = isc_store_open(home, 0, &ls->s, err))) {
		free(ls);
		return isc_err_wrap(err, "the rank logs' store connection");
	}
	pthread_mutex_init(&ls->lock, NULL);
	pthread_mutex_init(&ls->db_lock, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ls->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	pthread_cond_init(&ls->done, NULL);
	ls->exp_cap = exp_cap;
	ls->interval_ms = interval_ms > 0 ? interval_ms : 1000;
	ls->sink = (struct isc_log_sink){sink_open, sink_append, sink_close, ls};
	if (pthread_create(&ls->thread, NULL, ship_main, ls) != 0) {
		isc_logship_free(ls);
		return isc_err_set(err, ISC_ENOMEM, "cannot start the rank logs' thread");
	}
	ls->started = 1;
	*out = ls;
	return 0;
}

void isc_logship_free(struct isc_logship *ls)
{
	struct isc_err err;

	if (!ls)
		return;
	if (ls->started) {
		pthread_mutex_lock(&ls->lock);
		ls->stop = 1;
		pthread_cond_signal(&ls->cond);
		pthread_mutex_unlock(&ls->lock);
		pthread_join(ls->thread, NULL);
	} else if (ls->s) {
		ship_once(ls, &err);
	}
	while (ls->logs) {
		struct ship_log *l = ls->logs;
		ls->logs = l->next;
		free(l->buf);
		free(l);
	}
	while (ls->exps) {
		struct ship_exp *x = ls->exps;
		ls->exps = x->next;
		free(x->id);
		free(x);
	}
	isc_store_free(ls->s);
	pthread_cond_destroy(&ls->cond);
	pthread_cond_destroy(&ls->done);
	pthread_mutex_destroy(&ls->lock);
	pthread_mutex_destroy(&ls->db_lock);
	free(ls);
}

const struct isc_log_sink *isc_logship_sink(struct isc_logship *ls)
{
	return &ls->sink;
}

int isc_logship_flush(struct isc_logship *ls, struct isc_err *err)
{
	uint64_t turn;
	int rc;

	pthread_mutex_lock(&ls->lock);
	turn = ++ls->flush_asked;
	pthread_cond_signal(&ls->cond);
	while (ls->flush_done < turn)
		pthread_cond_wait(&ls->done, &ls->lock);
	rc = ls->flush_rc;
	if (rc && err)
		*err = ls->flush_err;
	pthread_mutex_unlock(&ls->lock);
	return rc;
}

void isc_logship_stats(struct isc_logship *ls, uint64_t *rows, uint64_t *bytes)
{
	pthread_mutex_lock(&ls->lock);
	*rows = ls->rows;
	*bytes = ls->bytes;
	pthread_mutex_unlock(&ls->lock);
}
