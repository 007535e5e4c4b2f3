/*
 * The on-prem node pool (table pool_nodes, migration 7): machines the operator
 * registers for cycle and interruptible work, reached over SSH by the launcher
 * with the platform's pool key pair. A node is 'up', 'draining' (keeps its run,
 * gets no new one) or 'unreachable' (its last SSH probe failed, for the reason
 * recorded; gets nothing). iscd's probes (onprem/probe.c) move a node between
 * 'up' and 'unreachable'; the operator drains and undrains. The queue (queue/)
 * decides what runs where; this is only what the store remembers.
 */
#ifndef ISC_STORE_STORE_POOL_H
#define ISC_STORE_STORE_POOL_H

#include "common/model.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

struct isc_pool_node {
	int64_t id;
	char *host;
	int port;
	char *user;
	int gpus;
	char *state;  /* "up", "draining", "unreachable" */
	char *reason; /* why its last probe failed ("" when it answered) */
	int64_t added_ms;
};

/* The fields a node is registered with: 0, or ISC_EINVALID naming the bad one (as add). */
int isc_store_pool_check(const char *host, int port, const char *user, int gpus,
                         struct isc_err *err);

/*
 * Registers a node. Host: a name or address of letters, digits, '.', '-', ':'
 * (at most 253); port 1..65535; user: [a-z_][a-z0-9_-]* (at most 32); gpus
 * 1..ISC_POOL_MAX_GPUS. unreachable: NULL or "" for a node that answered its
 * probe ('up'), else why it did not (the node is 'unreachable'). ISC_EINVALID
 * naming the bad field; ISC_ECONFLICT when host:port is already in the pool.
 * *id_out (may be NULL) is its id; ids are never reused.
 */
int isc_store_pool_add(struct isc_store *s, const char *host, int port, const char *user, int gpus,
                       const char *unreachable, int64_t *id_out, struct isc_err *err);

/* Every node, by id. *out (caller frees with isc_pool_nodes_free) may be NULL when n is 0. */
int isc_store_pool_list(struct isc_store *s, struct isc_pool_node **out, size_t *n,
                        struct isc_err *err);
void isc_pool_nodes_free(struct isc_pool_node *nodes, size_t n);

/*
 * Finds one node by id ("3") or host ("gpu-7", "gpu-7:2222"). ISC_ENOTFOUND, or
 * ISC_EINVALID when a bare host names several nodes (the message lists them).
 */
int isc_store_pool_find(struct isc_store *s, const char *what, struct isc_pool_node *out,
                        struct isc_err *err);
void isc_pool_node_cleanup(struct isc_pool_node *n);

/*
 * The operator's drain ("draining") and undrain ("up"). An undrained node whose
 * last probe failed is 'unreachable' rather than 'up', so no run is placed on
 * it before it answers. ISC_ENOTFOUND; ISC_EINVALID for another word.
 */
int isc_store_pool_set_state(struct isc_store *s, int64_t id, const char *state,
                             struct isc_err *err);

/*
 * What iscd's probe found: from state `from` to `to` ("up", "draining",
 * "unreachable") with reason ("" when it answered), compare-and-set, so an
 * operator's drain or undrain that came in meanwhile is never overwritten:
 * ISC_ECONFLICT then (the next probe decides again). ISC_ENOTFOUND.
 */
int isc_store_pool_mark(struct isc_store *s, int64_t id, const char *from, const char *to,
                        const char *reason, struct isc_err *err);

/*
 * Removes a node from the pool, and the host key pinned for it. ISC_ENOTFOUND;
 * ISC_ECONFLICT naming the experiment while an on-prem run holds the node
 * (queue_state, written by iscd).
 */
int isc_store_pool_remove(struct isc_store *s, int64_t id, struct isc_err *err);

/* What a node's host key is pinned under (store_hostkeys.h): "onprem-node-<id>". */
#define ISC_POOL_PIN_FMT "onprem-node-%lld"

#endif
