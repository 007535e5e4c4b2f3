#ifndef ISC_PROVIDERS_SWEEP_H
#define ISC_PROVIDERS_SWEEP_H
/*
 * When a describe should also sweep the cloud's tagged placement resources (EC2
 * cluster placement groups, GCE compact placement policies, OCI compute clusters):
 * deleting those no live instance uses. Listing them is one more cloud call, and a
 * broker describes every region with open work each tick; most ticks nothing
 * could be deleted. A sweep is due when
 *   - this process has not swept the scope yet (a crash may have left a resource
 *     made before its instances were asked for),
 *   - the listing shows a resource whose instances are all gone that no sweep has
 *     seen deleted or absent yet (a gang was torn down), or
 *   - ISC_SWEEP_EVERY_MS passed since the last sweep (anything else left behind).
 * A scope is what one describe covers: the driver's endpoint, region and broker id.
 * The bookkeeping is this process's memory, kept per scope; thread-safe.
 */
#include <stddef.h>
#include <stdint.h>

#define ISC_SWEEP_EVERY_MS (5 * 60 * 1000)

/* One instance of the listing that sits in a placement resource. */
struct isc_sweep_use {
	const char *resource; /* the driver's name for it: group name, cluster id */
	int live;             /* the instance is not terminated */
};

/*
 * 1 when the describe of scope should sweep now. Resources the scope remembers as
 * gone but the listing no longer names are forgotten (the memory stays the size of
 * the listing).
 */
int isc_sweep_due(const char *scope, const struct isc_sweep_use *uses, size_t n, int64_t now_ms);

/*
 * A sweep of scope went through at now_ms (listed; deletions may have been cut
 * short by the driver's per-sweep limit). gone: resources of the listing now
 * known deleted or absent from the cloud's list; those left out stay due.
 */
void isc_sweep_done(const char *scope, const char *const *gone, size_t n_gone, int64_t now_ms);

/*
 * The resources of uses none of whose instances is live, each once, into idle
 * (room for n); returns how many. What a sweep may delete, and then report gone.
 */
size_t isc_sweep_idle(const struct isc_sweep_use *uses, size_t n, const char **idle);

/*
 * One describe's sweep, the bookkeeping every driver's placement sweep shares: the
 * scope, a use per instance of the listing, `idle` (the resources of those with no live
 * instance; pointers into what the uses name) and, while the sweep walks the cloud's
 * list, which idle resources stay. Made by isc_sweep_begin, filled by isc_sweep_add,
 * judged by isc_sweep_ready, closed by isc_sweep_finish, released by isc_sweep_cleanup.
 * Out of memory at begin: no lists, so the sweep is due, deletes what it may and
 * records nothing gone.
 */
struct isc_sweep {
	char scope[700]; /* the driver's endpoint, region and broker id */
	struct isc_sweep_use *uses;
	size_t n_uses, cap;
	const char **idle;
	size_t n_idle;
	unsigned char *kept; /* kept[k]: idle[k] is still listed and this sweep left it */
	const char **gone;   /* after isc_sweep_finish: the idle resources now gone */
	size_t n_gone;
};

/* Zeroes sw, names its scope (printf-style) and makes room for cap uses. */
void isc_sweep_begin(struct isc_sweep *sw, size_t cap, const char *scope_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One instance of the listing in resource (NULL: in none), live unless terminated. */
void isc_sweep_add(struct isc_sweep *sw, const char *resource, int live);
/* The idle resources worked out from the uses; 1 when this describe sweeps now. */
int isc_sweep_ready(struct isc_sweep *sw, int64_t now_ms);
/* The cloud still lists resource and this sweep leaves it: not gone, when it is idle. */
void isc_sweep_keep(struct isc_sweep *sw, const char *resource);
/*
 * The sweep went through: the idle resources not kept are gone (none when the walk was
 * not complete: a list cut short may hide one), recorded with isc_sweep_done. sw->gone
 * (n_gone) names them until isc_sweep_cleanup.
 */
void isc_sweep_finish(struct isc_sweep *sw, int complete, int64_t now_ms);
void isc_sweep_cleanup(struct isc_sweep *sw);

/* Forgets every scope (tests; a process that starts over). */
void isc_sweep_forget_all(void);

#endif
