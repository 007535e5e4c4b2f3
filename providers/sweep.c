#include "providers/sweep.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct scope {
	char *name;
	int64_t swept_at_ms;
	char **gone; /* resources seen deleted or absent, still named by the last listing */
	size_t n_gone, cap_gone;
	struct scope *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct scope *scopes;

static struct scope *scope_find(const char *name)
{
	for (struct scope *s = scopes; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

static int is_gone(const struct scope *s, const char *resource)
{
	for (size_t i = 0; i < s->n_gone; i++)
		if (strcmp(s->gone[i], resource) == 0)
			return 1;
	return 0;
}

static int named(const struct isc_sweep_use *uses, size_t n, const char *resource)
{
	for (size_t i = 0; i < n; i++)
		if (uses[i].resource && strcmp(uses[i].resource, resource) == 0)
			return 1;
	return 0;
}

/* 1 when no instance of the listing uses resource any more. */
static int unused(const struct isc_sweep_use *uses, size_t n, const char *resource)
{
	for (size_t i = 0; i < n; i++)
		if (uses[i].live && uses[i].resource && strcmp(uses[i].resource, resource) == 0)
			return 0;
	return 1;
}

int isc_sweep_due(const char *scope, const struct isc_sweep_use *uses, size_t n, int64_t now_ms)
{
	struct scope *s;
	int due = 0;

	pthread_mutex_lock(&lock);
	s = scope_find(scope);
	if (!s || now_ms - s->swept_at_ms >= ISC_SWEEP_EVERY_MS || now_ms < s->swept_at_ms) {
		due = 1;
	} else {
		size_t kept = 0;
		for (size_t i = 0; i < s->n_gone; i++) {
			if (named(uses, n, s->gone[i]))
				s->gone[kept++] = s->gone[i];
			else
				free(s->gone[i]);
		}
		s->n_gone = kept;
		for (size_t i = 0; i < n && !due; i++)
			due = uses[i].resource && !uses[i].live && !is_gone(s, uses[i].resource) &&
			      unused(uses, n, uses[i].resource);
	}
	pthread_mutex_unlock(&lock);
	return due;
}

void isc_sweep_done(const char *scope, const char *const *gone, size_t n_gone, int64_t now_ms)
{
	struct scope *s;

	pthread_mutex_lock(&lock);
	s = scope_find(scope);
	if (!s && (s = calloc(1, sizeof(*s))) != NULL) {
		if (!(s->name = strdup(scope))) {
			free(s);
			s = NULL;
		} else {
			s->next = scopes;
			scopes = s;
		}
	}
	if (!s) { /* out of memory: no record, so the next describe sweeps again */
		pthread_mutex_unlock(&lock);
		return;
	}
	s->swept_at_ms = now_ms;
	for (size_t i = 0; i < n_gone; i++) {
		char *copy;
		if (!gone[i] || is_gone(s, gone[i]))
			continue;
		if (s->n_gone == s->cap_gone) {
			size_t cap = s->cap_gone ? 2 * s->cap_gone : 16;
			char **grown = realloc(s->gone, cap * sizeof(*grown));
			if (!grown)
				break; /* not remembered: at worst one more sweep */
			s->gone = grown;
			s->cap_gone = cap;
		}
		if (!(copy = strdup(gone[i])))
			break;
		s->gone[s->n_gone++] = copy;
	}
	pthread_mutex_unlock(&lock);
}

size_t isc_sweep_idle(const struct isc_sweep_use *uses, size_t n, const char **idle)
{
	size_t n_idle = 0;

	for (size_t i = 0; i < n; i++) {
		int named = 0;
		if (!uses[i].resource)
			continue;
		for (size_t k = 0; k < n_idle && !named; k++)
			named = strcmp(idle[k], uses[i].resource) == 0;
		if (!named && unused(uses, n, uses[i].resource))
			idle[n_idle++] = uses[i].resource;
	}
	return n_idle;
}

void isc_sweep_forget_all(void)
{
	pthread_mutex_lock(&lock);
	while (scopes) {
		struct scope *s = scopes;
		scopes = s->next;
		for (size_t i = 0; i < s->n_gone; i++)
			free(s->gone[i]);
		free(s->gone);
		free(s->name);
		free(s);
	}
	pthread_mutex_unlock(&lock);
}

void isc_sweep_begin(struct isc_sweep *sw, size_t cap, const char *scope_fmt, ...)
{
	va_list ap;

	memset(sw, 0, sizeof(*sw));
	va_start(ap, scope_fmt);
	vsnprintf(sw->scope, sizeof(sw->scope), scope_fmt, ap);
	va_end(ap);
	if (!cap)
		cap = 1;
	sw->uses = calloc(cap, sizeof(*sw->uses));
	sw->idle = calloc(cap, sizeof(*sw->idle));
	sw->kept = calloc(cap, sizeof(*sw->kept));
	sw->gone = calloc(cap, sizeof(*sw->gone));
	if (sw->uses && sw->idle && sw->kept && sw->gone) {
		sw->cap = cap;
		return;
	}
	/* No lists, but the scope stays: the sweep still records that it went through. */
	isc_sweep_cleanup(sw);
	memset(&sw->uses, 0, sizeof(*sw) - offsetof(struct isc_sweep, uses));
}

void isc_sweep_add(struct isc_sweep *sw, const char *resource, int live)
{
	if (sw->n_uses < sw->cap)
		sw->uses[sw->n_uses++] = (struct isc_sweep_use){resource, live};
}

int isc_sweep_ready(struct isc_sweep *sw, int64_t now_ms)
{
	if (!sw->cap)
		return 1; /* no lists: the sweep deletes what it may and records nothing gone */
	sw->n_idle = isc_sweep_idle(sw->uses, sw->n_uses, sw->idle);
	return isc_sweep_due(sw->scope, sw->uses, sw->n_uses, now_ms);
}

void isc_sweep_keep(struct isc_sweep *sw, const char *resource)
{
	for (size_t k = 0; k < sw->n_idle; k++)
		if (strcmp(sw->idle[k], resource) == 0) {
			sw->kept[k] = 1;
			return;
		}
}

void isc_sweep_finish(struct isc_sweep *sw, int complete, int64_t now_ms)
{
	sw->n_gone = 0;
	for (size_t k = 0; complete && k < sw->n_idle; k++)
		if (!sw->kept[k])
			sw->gone[sw->n_gone++] = sw->idle[k];
	isc_sweep_done(sw->scope, sw->gone, sw->n_gone, now_ms);
}

void isc_sweep_cleanup(struct isc_sweep *sw)
{
	free(sw->uses);
	free(sw->idle);
	free(sw->kept);
	free(sw->gone);
}
