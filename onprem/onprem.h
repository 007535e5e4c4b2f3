/*
 * On-prem execution: iscd runs cycle and interruptible experiments (and, with
 * burst_validation on, a burst's validation cycle) on the operator's node pool.
 * The queue module (queue/) decides what starts and stops; this module carries
 * the decisions out over SSH with the launcher (pool key pair, pinned host
 * keys), follows output into rank_N.txt, keeps artifacts between runs and
 * records statuses in the store. See docs/queue.md.
 *
 * The tick never blocks on the network: boots, stops and node probes run in
 * worker threads; the tick starts them and applies what they found.
 */
#ifndef ISC_ONPREM_ONPREM_H
#define ISC_ONPREM_ONPREM_H

#include "common/err.h"
#include "store/store.h"

struct isc_onprem;

/*
 * Borrows the store (the main thread's connection) for the executor's life;
 * reads config.toml from the store's home and loads the pool and the queued
 * experiments. Runs a previous iscd left behind are stopped and requeued.
 */
int isc_onprem_new(struct isc_store *store, struct isc_onprem **out, struct isc_err *err);
/* Waits for the workers (a stop in progress finishes) and frees. */
void isc_onprem_free(struct isc_onprem *o);

/* One pass: apply what workers found, read the pool and new work, decide, act. */
int isc_onprem_tick(struct isc_onprem *o, struct isc_err *err);

/*
 * The pool's public key (an authorized_keys line), its key pair made under
 * home's keys on first use: what iscd logs in to pool nodes with and what
 * `isc nodes pubkey` prints. Safe against a concurrent first use. Caller frees.
 */
int isc_onprem_pool_pubkey(const char *home, char **pub, struct isc_err *err);

/* How long a probe waits for a node: a pool node answers at once or not at all. */
#define ISC_ONPREM_PROBE_MS 5000

/* One probe of a pool node (isc_onprem_probe). */
struct isc_onprem_probe {
	const char *home; /* iscd's home: the pool key, and the store's pinned host keys */
	const char *host;
	int port;
	const char *user;
	/*
	 * > 0: the node's id; its host key must match the one pinned for it (pinned now
	 * when there is none). 0: a node not in the pool yet; its host key is only read
	 * (key_type, key_sha256), for the caller to pin once the node has an id.
	 */
	int64_t node_id;
	long timeout_ms; /* 0: ISC_ONPREM_PROBE_MS */
	/*
	 * 1: once logged in, also check what a job needs of the node (docs/queue.md, "What
	 * a pool node needs": root or passwordless sudo, the artifact folders under /mnt,
	 * docker); a node that lacks any of it is refused with ISC_EINVALID, cannot_run
	 * set and the node's own words in reason. `isc nodes add` asks for it.
	 */
	int check_needs;
	int cannot_run;
	/* results */
	char key_type[32], key_sha256[65]; /* the host key seen ("" when no handshake) */
	char reason[ISC_ERR_MSG_MAX];      /* why it does not answer ("" when it does) */
};

/*
 * Logs in to the node once, as its user with the pool key, within timeout_ms
 * (blocking: workers and API threads only, never the tick). 0 when it answered;
 * otherwise ISC_ETRANSIENT (the name does not resolve, connection refused,
 * timed out, no SSH server) or ISC_EAUTH (authentication failed, host key
 * mismatch), with the reason in words naming the node.
 */
int isc_onprem_probe(struct isc_onprem_probe *p);

/*
 * The shell words that make /mnt's artifact folders fresh on a pool node, as root or
 * through passwordless sudo (`sudo -n`) for another user, who then owns them (a user
 * without it runs them as itself, and gets the node's own "Permission denied"): what a
 * boot runs first.
 */
#define ISC_ONPREM_CLEAN_MNT                                                                       \
	"S=; [ \"$(id -u)\" = 0 ] || ! sudo -n true 2>/dev/null || S='sudo -n'; "                  \
	"$S rm -rf /mnt/checkpoints /mnt/crud /mnt/lossy && "                                      \
	"$S mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy && "                                    \
	"{ [ -z \"$S\" ] || $S chown \"$(id -u):$(id -g)\" /mnt/checkpoints /mnt/crud "            \
	"/mnt/lossy; }"

#endif
