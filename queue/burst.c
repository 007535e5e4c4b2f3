/*
 * The burst side of the queue (burst.h has the rules). Like queue.c, plain
 * arithmetic on what the caller passes in: no clock, no store, no network.
 */
#include "queue/burst.h"

#include <stdlib.h>
#include <string.h>

#define N_STATES (ISC_BURST_STOPPED + 1)

static const char *const state_names[N_STATES] = {
    [ISC_BURST_ENQUEUED] = "enqueued",         [ISC_BURST_VALIDATING] = "validating",
    [ISC_BURST_PLACING] = "placing",           [ISC_BURST_WAITING] = "waiting",
    [ISC_BURST_PROVISIONING] = "provisioning", [ISC_BURST_BOOTING] = "booting",
    [ISC_BURST_RUNNING] = "running",           [ISC_BURST_STOPPING] = "stopping",
    [ISC_BURST_COMPLETED] = "completed",       [ISC_BURST_FAILED] = "failed",
    [ISC_BURST_CANCELLED] = "cancelled",       [ISC_BURST_STOPPED] = "stopped",
};

#define B(s) (1u << (s))

/*
 * The transitions (docs/broker.md has the diagram). Every state that has not
 * ended may go to stopping (a cancel, or the meter stopping it for credits),
 * except validating, which on-prem execution ends itself. A burst that never
 * got a cluster may fail at once (a dataset gone, no shape to place on).
 */
static const unsigned allowed[N_STATES] = {
    [ISC_BURST_ENQUEUED] = B(ISC_BURST_VALIDATING) | B(ISC_BURST_PLACING) | B(ISC_BURST_WAITING) |
                           B(ISC_BURST_PROVISIONING) | B(ISC_BURST_FAILED) | B(ISC_BURST_STOPPING) |
                           B(ISC_BURST_CANCELLED),
    /* passed or skipped (placing, the cloud next), failed, exited 0 within its cycle,
     * cancelled; validating again with a new reason (what the pool makes it wait for) */
    [ISC_BURST_VALIDATING] = B(ISC_BURST_VALIDATING) | B(ISC_BURST_PLACING) | B(ISC_BURST_FAILED) |
                             B(ISC_BURST_COMPLETED) | B(ISC_BURST_CANCELLED),
    [ISC_BURST_PLACING] = B(ISC_BURST_PLACING) | B(ISC_BURST_WAITING) | B(ISC_BURST_PROVISIONING) |
                          B(ISC_BURST_FAILED) | B(ISC_BURST_STOPPING),
    [ISC_BURST_WAITING] = B(ISC_BURST_WAITING) | B(ISC_BURST_PLACING) | B(ISC_BURST_PROVISIONING) |
                          B(ISC_BURST_FAILED) | B(ISC_BURST_STOPPING),
    /* the next candidate shape after one that failed; a replayed launch that finds no
     * credits any more waits; a shape whose nodes never came up places again */
    [ISC_BURST_PROVISIONING] = B(ISC_BURST_PROVISIONING) | B(ISC_BURST_BOOTING) |
                               B(ISC_BURST_PLACING) | B(ISC_BURST_WAITING) | B(ISC_BURST_STOPPING),
    [ISC_BURST_BOOTING] = B(ISC_BURST_RUNNING) | B(ISC_BURST_PLACING) | B(ISC_BURST_STOPPING),
    /* interrupted: placing again for the next cycle */
    [ISC_BURST_RUNNING] = B(ISC_BURST_PLACING) | B(ISC_BURST_STOPPING),
    [ISC_BURST_STOPPING] = B(ISC_BURST_COMPLETED) | B(ISC_BURST_FAILED) | B(ISC_BURST_CANCELLED) |
                           B(ISC_BURST_STOPPED),
};

const char *isc_burst_state_name(enum isc_burst_state st)
{
	return (unsigned)st < N_STATES ? state_names[st] : "unknown";
}

int isc_burst_state_parse(const char *s, enum isc_burst_state *out)
{
	for (int i = 0; s && i < N_STATES; i++) {
		if (strcmp(s, state_names[i]) == 0) {
			*out = (enum isc_burst_state)i;
			return 0;
		}
	}
	return ISC_EINVALID;
}

int isc_burst_is_final(enum isc_burst_state st)
{
	return st == ISC_BURST_COMPLETED || st == ISC_BURST_FAILED || st == ISC_BURST_CANCELLED ||
	       st == ISC_BURST_STOPPED;
}

int isc_burst_transition_check(const char *from, const char *to, struct isc_err *err)
{
	enum isc_burst_state f, t;
	if (isc_burst_state_parse(from, &f))
		return isc_err_set(err, ISC_EINVALID, "'%s' is not a burst state",
		                   from ? from : "");
	if (isc_burst_state_parse(to, &t))
		return isc_err_set(err, ISC_EINVALID, "'%s' is not a burst state", to ? to : "");
	if (!(allowed[f] & B(t)))
		return isc_err_set(err, ISC_EINVALID, "a burst does not go from %s to %s", from,
		                   to);
	return 0;
}

enum isc_burst_owner isc_burst_owner(enum isc_burst_state st, int cycle_count, int cancel_requested,
                                     int validation_policy)
{
	if (isc_burst_is_final(st))
		return ISC_BURST_OWNER_NONE;
	if (st == ISC_BURST_VALIDATING)
		return ISC_BURST_OWNER_ONPREM;
	if (validation_policy && st == ISC_BURST_ENQUEUED && cycle_count == 0 && !cancel_requested)
		return ISC_BURST_OWNER_ONPREM;
	return ISC_BURST_OWNER_BROKER;
}

enum isc_burst_step isc_burst_step_for(enum isc_burst_state st, int cancel_requested,
                                       int64_t next_attempt_ms, int64_t now_ms)
{
	if (isc_burst_is_final(st) || st == ISC_BURST_VALIDATING)
		return ISC_BURST_STEP_NONE;
	if (st == ISC_BURST_STOPPING || cancel_requested)
		return ISC_BURST_STEP_STOP;
	switch (st) {
	case ISC_BURST_ENQUEUED:
	case ISC_BURST_PLACING:
		return ISC_BURST_STEP_PLACE;
	case ISC_BURST_WAITING:
		return now_ms >= next_attempt_ms ? ISC_BURST_STEP_PLACE : ISC_BURST_STEP_NONE;
	case ISC_BURST_PROVISIONING:
		return ISC_BURST_STEP_PROVISION;
	case ISC_BURST_BOOTING:
		return ISC_BURST_STEP_BOOT;
	case ISC_BURST_RUNNING:
		return ISC_BURST_STEP_RUN;
	default:
		return ISC_BURST_STEP_NONE;
	}
}

/* Without a cluster, so in the waiting order. */
static int lines_up(const struct isc_burst_entry *e)
{
	return !e->cancel_requested &&
	       (e->state == ISC_BURST_ENQUEUED || e->state == ISC_BURST_PLACING ||
	        e->state == ISC_BURST_WAITING);
}

/* A burst's place in the order: interrupted ones (reprovisioning) first, then arrival. */
struct turn_key {
	int interrupted;
	int64_t created_ms;
	int i; /* the caller's order among equals */
};

static int by_turn(const void *pa, const void *pb)
{
	const struct turn_key *x = pa, *y = pb;
	if (x->interrupted != y->interrupted)
		return y->interrupted - x->interrupted;
	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int same_project(const char *a, const char *b)
{
	return a && b && a[0] && strcmp(a, b) == 0;
}

/* Whether head's credits line draws on the same money as e. */
static int shares_line(const struct isc_burst_entry *head, const struct isc_burst_entry *e)
{
	if (head->wait == ISC_BURST_WAIT_CREDITS_ORG)
		return head->org_id == e->org_id;
	if (head->wait == ISC_BURST_WAIT_CREDITS_PROJECT)
		return head->org_id == e->org_id && same_project(head->project_id, e->project_id);
	return 0;
}

int isc_burst_order(const struct isc_burst_entry *v, size_t n, int64_t now_ms,
                    struct isc_burst_turn *out, struct isc_err *err)
{
	struct turn_key *idx = NULL;
	int *heads = NULL, *members = NULL;
	size_t k = 0, n_heads = 0;
	int capacity = 0;

	if (n == 0)
		return 0;
	idx = malloc(n * sizeof(*idx));
	heads = malloc(n * sizeof(*heads));
	members = calloc(n, sizeof(*members)); /* per head: how many stand in its line */
	if (!idx || !heads || !members) {
		free(idx);
		free(heads);
		free(members);
		return isc_err_set(err, ISC_ENOMEM, "burst order: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const struct isc_burst_entry *e = &v[i];
		out[i] = (struct isc_burst_turn){.behind = -1, .line = ISC_BURST_WAIT_NONE};
		if (lines_up(e))
			idx[k++] = (struct turn_key){e->cycle_count > 0, e->created_ms, (int)i};
		else
			/* a cluster, or a cancel: its step never waits on another burst */
			out[i].go =
			    !isc_burst_is_final(e->state) && e->state != ISC_BURST_VALIDATING;
	}
	qsort(idx, k, sizeof(*idx), by_turn);

	for (size_t j = 0; j < k; j++) {
		int i = idx[j].i;
		const struct isc_burst_entry *e = &v[i];
		struct isc_burst_turn *t = &out[i];
		size_t h;

		/* One that ran before (a reprovision, a validated burst on its way to the cloud)
		 * is never held: it may still have a cluster draining, which its step tears down.
		 */
		for (h = 0; e->cycle_count == 0 && h < n_heads && !shares_line(&v[heads[h]], e);
		     h++)
			;
		if (e->cycle_count > 0)
			h = n_heads;
		if (h < n_heads) {
			/* held: an older burst waits for the same money */
			t->go = 0;
			t->behind = heads[h];
			t->line = v[heads[h]].wait;
			t->position = ++members[h] + 1;
			continue;
		}
		t->go = e->state != ISC_BURST_WAITING || now_ms >= e->next_attempt_ms;
		if (e->state == ISC_BURST_WAITING && (e->wait == ISC_BURST_WAIT_CREDITS_ORG ||
		                                      e->wait == ISC_BURST_WAIT_CREDITS_PROJECT)) {
			heads[n_heads++] = i;
			t->line = e->wait;
			t->position = 1;
		} else if (e->state == ISC_BURST_WAITING && e->wait == ISC_BURST_WAIT_CAPACITY) {
			t->line = ISC_BURST_WAIT_CAPACITY;
			t->position = ++capacity;
		}
	}
	free(idx);
	free(heads);
	free(members);
	return 0;
}
