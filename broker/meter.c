/*
 * Credits for bursts. Before a launch the cluster's price for the reservation
 * window is reserved (credits.c checks org credits and the project budget in
 * one transaction). Each tick every node is charged for the time since its
 * last charge, from the launch the cloud reported to the termination it
 * confirmed, at the price snapshotted at launch; then each running cluster's
 * reservation is renewed. An experiment whose org cannot cover the next window
 * is stopped gracefully ("stopped: out of credits").
 */
#include "broker/broker_int.h"

#include "common/clock.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "credits/credits.h"

#include <string.h>
#include <time.h>

static enum isc_billing billing_of(const char *account)
{
	/* Clusters on an organisation's own cloud key are billed by that cloud. */
	return strcmp(account, "default") == 0 ? ISC_BILLING_CREDITS : ISC_BILLING_BYO;
}

int broker_credits_reserve(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const char *cluster_id,
                           int64_t cluster_price_micros, enum isc_credits_limit *limit,
                           struct isc_err *err)
{
	int64_t amount =
	    isc_credits_cost_micros(cluster_price_micros, b->config->reservation_window_ms);
	return isc_credits_reserve_limit(s, e->id, cluster_id, amount, limit, err);
}

int broker_credits_ensure(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct isc_cluster *c, struct isc_err *err)
{
	int64_t window;

	if (billing_of(c->account) != ISC_BILLING_CREDITS)
		return 0;
	window =
	    isc_credits_cost_micros(c->price_micros * c->nnodes, b->config->reservation_window_ms);
	/* A renewal tops the hold up to one window: a no-op when the hold is there. */
	return isc_credits_renew(s, e->id, c->id, window, err);
}

void broker_credits_release(struct isc_broker *b, struct isc_store *s, const char *experiment_id)
{
	struct isc_err err;
	(void)b;
	if (isc_credits_release(s, experiment_id, &err))
		isc_log(ISC_LOG_WARN, "%s: releasing credits: %s", experiment_id, err.msg);
}

static void charge_nodes(struct isc_broker *b, int64_t now)
{
	struct isc_node_charge *list;
	struct isc_err err;
	size_t n;
	int batch;

	if (isc_store_nodes_to_charge(b->store, now, &list, &n, &err)) {
		isc_log(ISC_LOG_WARN, "meter: %s", err.msg);
		return;
	}
	/*
	 * One write transaction for the tick's charges (each a savepoint inside it): the
	 * meter takes the store's write lock once per tick, not once per node, so the
	 * CLI and the workers are not kept waiting behind it.
	 */
	batch = n > 0 && isc_store_begin(b->store, &err) == 0;
	for (size_t i = 0; i < n; i++) {
		struct isc_charge c = {0};
		int64_t charged = 0;

		c.experiment_id = list[i].experiment_id;
		c.cluster_id = list[i].cluster_id;
		c.node_instance_id = list[i].instance_id;
		c.price_micros = list[i].price_micros;
		c.provider = list[i].provider;
		c.shape_id = list[i].shape_id;
		c.period_start_ms = list[i].from_ms;
		c.period_end_ms = list[i].to_ms ? list[i].to_ms : now;
		c.billing = billing_of(list[i].account);
		if (isc_credits_charge_node_report(b->store, &c, &charged, &err)) {
			isc_log(ISC_LOG_WARN, "meter: node %s: %s", c.node_instance_id, err.msg);
			continue;
		}
		/* A crash here loses the tick's uncommitted charges; when charges are not
		 * batched, it leaves this charge written and the node's mark behind. Either
		 * way the next meter charges each period once: the ledger knows up to when
		 * a node is charged, and its charge-once index refuses a second row. */
		isc_crash_point("meter.charge_written");
		if (isc_store_node_set_charged(b->store, c.node_instance_id, c.period_end_ms, &err))
			isc_log(ISC_LOG_WARN, "meter: node %s: %s", c.node_instance_id, err.msg);
	}
	if (batch && isc_store_commit(b->store, &err)) {
		isc_log(ISC_LOG_WARN, "meter: committing the tick's charges: %s", err.msg);
		isc_store_rollback(b->store);
	}
	isc_node_charge_list_free(list, n);
}

static void renew_reservations(struct isc_broker *b)
{
	struct isc_cluster *list;
	struct isc_err err;
	size_t n;

	if (isc_store_cluster_list_open(b->store, &list, &n, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		struct isc_cluster *c = &list[i];
		int64_t window;
		int rc;

		if (strcmp(c->state, "terminating") == 0 ||
		    billing_of(c->account) != ISC_BILLING_CREDITS)
			continue;
		window = isc_credits_cost_micros(c->price_micros * c->nnodes,
		                                 b->config->reservation_window_ms);
		rc = isc_credits_renew(b->store, c->experiment_id, c->id, window, &err);
		if (rc == ISC_ECREDITS) {
			struct isc_experiment e;
			if (isc_store_experiment_get(b->store, c->experiment_id, &e, &err) == 0) {
				/* A compare-and-set from the status read here: a worker that
				 * finished the experiment meanwhile wins. */
				if (isc_burst_transition_check(e.status, "stopping", NULL) == 0 &&
				    isc_store_experiment_begin_stop(
				        b->store, e.id, e.status, "stopped",
				        "out of credits: the next window cannot be covered",
				        &err) == 0)
					isc_log(ISC_LOG_WARN, "%s: out of credits; stopping", e.id);
				isc_experiment_cleanup(&e);
			}
		} else if (rc) {
			isc_log(ISC_LOG_WARN, "meter: renewing %s: %s", c->id, err.msg);
		}
	}
	isc_cluster_list_free(list, n);
}

int broker_meter(struct isc_broker *b, struct isc_err *err)
{
	(void)err;
	charge_nodes(b, isc_wall_ms());
	renew_reservations(b);
	return 0;
}
