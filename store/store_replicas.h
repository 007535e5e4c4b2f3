/*
 * Replicas of iscd sharing one store, and the leases that say which of them
 * steps which burst (issue 33, docs/ha.md).
 *
 * A replica is one iscd process: it registers a row at start, refreshes its
 * heartbeat while it runs and removes the row at a clean stop. A replica is
 * live while its heartbeat is younger than the lease time.
 *
 * A lease gives one replica the steps of one experiment until expires_ms. It is
 * a row, not a lock: claiming is one conditional upsert that takes the row when
 * it is free, expired or already ours, and nothing stays locked between
 * statements (ha-facts pitfalls 1 and 2). Every time is the database's clock on
 * PostgreSQL (replicas' clocks differ, pitfall 5) and this process's clock on
 * SQLite (one host). A lease taken from another replica gets a new random
 * token; one renewed or claimed again by its holder keeps its token.
 */
#ifndef ISC_STORE_STORE_REPLICAS_H
#define ISC_STORE_STORE_REPLICAS_H

#include "store/store.h"

struct isc_replica {
	char *id; /* "rep_" + hex: random, never derived from the host or pid */
	char *host;
	int64_t pid;
	char *boot_id;   /* the host's boot (/proc/sys/kernel/random/boot_id); "" unknown */
	char *broker_id; /* the config's broker_id the replica runs with; "" unknown */
	int64_t started_ms;
	int64_t heartbeat_ms;
};

struct isc_lease {
	char *experiment_id;
	char *replica_id;
	char *token;
	int64_t expires_ms;
	int live; /* 1 while expires_ms has not passed (by the database's clock) */
};

/*
 * 1 when replicas on several hosts may share the store (PostgreSQL); 0 for SQLite,
 * which one iscd uses at a time (its pid lock).
 */
int isc_store_replicas_shared(struct isc_store *s);

/* Inserts (or refreshes) the replica's row, its start and heartbeat now. */
int isc_store_replica_register(struct isc_store *s, const char *id, const char *host, int64_t pid,
                               struct isc_err *err);
/* The same, with the host's boot id and the replica's broker_id (NULL: ""). */
int isc_store_replica_register_as(struct isc_store *s, const char *id, const char *host,
                                  int64_t pid, const char *boot_id, const char *broker_id,
                                  struct isc_err *err);
/*
 * This host's boot id (the kernel's random id of this boot), in out; "" when unknown.
 * Beside the host name and pid it tells this host's replicas from another host's of the
 * same name, and from this host's before a reboot (whose pids mean nothing now).
 */
void isc_replica_boot_id(char *out, size_t cap);
/*
 * 1 when replica r is this host's (its host name and boot id are ours, the boot id
 * known) and its pid is gone here: dead for sure, without waiting for its heartbeat.
 */
int isc_replica_dead_here(const struct isc_replica *r, const char *host, const char *boot_id);
/*
 * The broker_id the store is used with (issue 48, docs/ha.md): the first replica to
 * start records its own; a later one with another is refused (ISC_ECONFLICT, naming
 * both and docs/ha.md) when `enforce` (a store replicas share: PostgreSQL) and anything
 * of the recorded id is left (another replica's row, a cluster not closed), for it would
 * not find the instances the others tagged, and a takeover would leak them; with nothing
 * left the new one is recorded. Without
 * `enforce` (SQLite: one iscd, the operator changed its config) the new one is recorded.
 * *recorded (may be NULL) gets the store's broker_id before the call ("" when none).
 */
int isc_store_broker_id_check(struct isc_store *s, const char *broker_id, const char *replica_id,
                              int enforce, char **recorded, struct isc_err *err);
/* The heartbeat now. ISC_ENOTFOUND when the row is gone (another replica pruned it). */
int isc_store_replica_heartbeat(struct isc_store *s, const char *id, struct isc_err *err);
/* Removes the replica's row and gives up every lease it holds (a clean stop). */
int isc_store_replica_remove(struct isc_store *s, const char *id, struct isc_err *err);
/*
 * Removes every replica but `id` and their leases: for a store only one iscd can
 * use (SQLite, behind the pid lock), where whoever else is registered is dead.
 */
int isc_store_replica_forget_others(struct isc_store *s, const char *id, struct isc_err *err);
/* Removes replicas whose heartbeat is older than older_than_ms (their leases expired long ago). */
int isc_store_replica_prune(struct isc_store *s, int64_t older_than_ms, struct isc_err *err);
/* Replicas whose heartbeat is within lease_ms, by id. */
int isc_store_replica_list_live(struct isc_store *s, int64_t lease_ms, struct isc_replica **out,
                                size_t *n, struct isc_err *err);
void isc_replica_list_free(struct isc_replica *list, size_t n);

/*
 * Claims the experiment's lease for replica_id for lease_ms: *held is 1 when the
 * replica holds it now (it was free, expired or its own), with *token (caller
 * frees). *taken_from (caller frees; may be NULL to not ask) names the other replica
 * whose lease was taken over, else NULL. Not held: *token and *taken_from NULL.
 */
int isc_store_lease_claim(struct isc_store *s, const char *experiment_id, const char *replica_id,
                          int64_t lease_ms, int *held, char **token, char **taken_from,
                          struct isc_err *err);
/*
 * Extends every unexpired lease of replica_id by lease_ms in one UPDATE; *out gets
 * the leases it still holds (an expired one is not renewed: it must be claimed
 * again). Free with isc_lease_list_free.
 */
int isc_store_lease_renew(struct isc_store *s, const char *replica_id, int64_t lease_ms,
                          struct isc_lease **out, size_t *n, struct isc_err *err);
/* Gives the lease up when replica_id holds it (with token, when not NULL); otherwise nothing. */
int isc_store_lease_release(struct isc_store *s, const char *experiment_id, const char *replica_id,
                            const char *token, struct isc_err *err);
/* The experiment's lease row; ISC_ENOTFOUND when there is none. */
int isc_store_lease_get(struct isc_store *s, const char *experiment_id, struct isc_lease *out,
                        struct isc_err *err);
/* Every lease row, with live set by the database's clock. */
int isc_store_lease_list(struct isc_store *s, struct isc_lease **out, size_t *n,
                         struct isc_err *err);
void isc_lease_cleanup(struct isc_lease *l);
void isc_lease_list_free(struct isc_lease *list, size_t n);

#endif
