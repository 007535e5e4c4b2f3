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

/* Forgets every scope (tests; a process that starts over). */
void isc_sweep_forget_all(void);

#endif
