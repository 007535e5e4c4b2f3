/*
 * The on-prem node pool (table pool_nodes, migration 7): machines the operator
 * registers for cycle and interruptible work, reached over SSH by the launcher
 * with the platform's pool key pair. A node is 'up', 'draining' (keeps its run,
 * gets no new one) or 'down' (stopped answering). The queue (queue/) decides
 * what runs where; this is only what the store remembers.
 */
#ifndef ISC_STORE_STORE_POOL_H
#define ISC_STORE_STORE_POOL_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_POOL_MAX_GPUS 64 /* GPUs of one node */

struct isc_pool_node {
	int64_t id;
	char *host;
	int port;
	char *user;
	int gpus;
	char *state; /* "up", "draining", "down" */
	int64_t added_ms;
};

/*
 * Registers a node. Host: a name or address of letters, digits, '.', '-', ':'
 * (at most 253); port 1..65535; user: [a-z_][a-z0-9_-]* (at most 32); gpus
 * 1..ISC_POOL_MAX_GPUS. ISC_EINVALID naming the bad field; ISC_ECONFLICT when
 * host:port is already in the pool. *id_out (may be NULL) is its id.
 */
int isc_store_pool_add(struct isc_store *s, const char *host, int port, const char *user, int gpus,
                       int64_t *id_out, struct isc_err *err);

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

/* Sets the state ("up", "draining", "down"). ISC_ENOTFOUND, ISC_EINVALID for another word. */
int isc_store_pool_set_state(struct isc_store *s, int64_t id, const char *state,
                             struct isc_err *err);

/*
 * Removes a node from the pool. ISC_ENOTFOUND; ISC_ECONFLICT naming the
 * experiment while an on-prem run holds the node (queue_state, written by iscd).
 */
int isc_store_pool_remove(struct isc_store *s, int64_t id, struct isc_err *err);

#endif
