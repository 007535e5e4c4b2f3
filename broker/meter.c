/*
 * Credits for bursts, metered by intervals (issue 49). Before a launch the
 * cluster's price for the reservation window is reserved (credits.c checks org
 * credits and the project budget in one transaction). A node's usage is an
 * interval from the launch the cloud reported to the termination it confirmed
 * (a node the listings leave out: to its first miss, and no further until a
 * listing shows it again; docs/credits.md, "Listing lag"), priced at the price
 * snapshotted at launch: while it is open the node is charged at most once per
 * charge_interval_ms, and once more when it closes (with the cloud's minimum per
 * start), each charge one ledger row that also consumes the hold. A cluster's
 * hold is re-authorised, topped up to one window, only once what is left of it
 * falls below hold_renew_below of the window. An experiment whose org cannot
 * cover that is stopped gracefully ("stopped: out of credits").
 */
#include "broker/broker_int.h"

#include "common/metrics.h"
#include "common/clock.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "common/buf.h"
#include "credits/credits.h"
#include "store/store_ledger.h"

#include <stdatomic.h>
#include <stdlib.h>
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
	/*
	 * A top-up to one window, as the meter's renewal: a renewal that lands between the
	 * cluster's row and this hold leaves nothing to add, so the hold is never doubled.
	 */
	return isc_credits_renew_limit(s, e->id, cluster_id, amount, limit, err);
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

/* Charges the listed nodes on s; mine_only: skip other replicas' bursts. */
static void charge_list(struct isc_broker *b, struct isc_store *s,
                        const struct isc_node_charge *list, size_t n, int64_t now, int mine_only)
{
	struct isc_err err;

	for (size_t i = 0; i < n; i++) {
		struct isc_charge c = {0};
		int64_t charged = 0;

		if (mine_only && !broker_meters(b, list[i].experiment_id))
			continue; /* another replica's burst (docs/ha.md) */
		c.experiment_id = list[i].experiment_id;
		c.cluster_id = list[i].cluster_id;
		c.node_instance_id = list[i].instance_id;
		c.price_micros = list[i].price_micros;
		c.provider = list[i].provider;
		c.shape_id = list[i].shape_id;
		c.period_start_ms = list[i].from_ms;
		/* The recorded termination, or the first miss of a node the listings leave
		 * out: never past either (the store's query says which). */
		c.period_end_ms = list[i].to_ms ? list[i].to_ms : now;
		c.billing = billing_of(list[i].account);
		c.launched_ms = list[i].launched_ms;
		/* The cloud's minimum per start counts once the interval closes. */
		c.minimum_ms =
		    list[i].closed ? isc_credits_minimum_ms(list[i].provider, list[i].shape_id) : 0;
		if (isc_credits_charge_node_report(s, &c, &charged, &err)) {
			isc_log(ISC_LOG_WARN, "meter: node %s: %s", c.node_instance_id, err.msg);
			continue;
		}
		if (charged > 0)
			isc_metric_add(ISC_M_SPEND, ISC_LABELS(c.provider), (double)charged);
		/* A crash here loses the tick's uncommitted charges; when charges are not
		 * batched, it leaves this charge written and the node's mark behind. Either
		 * way the next meter charges each period once: the ledger knows up to when
		 * a node is charged, and its charge-once index refuses a second row. */
		isc_crash_point("meter.charge_written");
		if (isc_store_node_set_charged(s, c.node_instance_id, c.period_end_ms, &err))
			isc_log(ISC_LOG_WARN, "meter: node %s: %s", c.node_instance_id, err.msg);
	}
}

void broker_credits_release(struct isc_broker *b, struct isc_store *s, const char *experiment_id)
{
	struct isc_node_charge *list;
	struct isc_err err;
	int64_t now = isc_store_now_ms();
	size_t n;

	/*
	 * Before the hold goes, every node of the experiment is charged up to now (not only
	 * those a charge interval behind): with charges a minute apart, up to a minute per
	 * node is unbilled at any moment, and the hold must consume it while it is there.
	 * What the nodes run after this, until the cloud confirms their termination, is
	 * charged beyond the hold, as before (docs/credits.md, "Overspend bound").
	 */
	if (isc_store_nodes_to_charge_experiment(s, experiment_id, now, now, &list, &n, &err) ==
	    0) {
		charge_list(b, s, list, n, now, 0);
		isc_node_charge_list_free(list, n);
	} else {
		isc_log(ISC_LOG_WARN, "%s: charging before the release: %s", experiment_id,
		        err.msg);
	}
	if (isc_credits_release(s, experiment_id, &err))
		isc_log(ISC_LOG_WARN, "%s: releasing credits: %s", experiment_id, err.msg);
}

static void charge_nodes(struct isc_broker *b, int64_t now)
{
	struct isc_node_charge *list;
	struct isc_err err;
	size_t n;
	int batch;

	if (isc_store_nodes_to_charge(b->store, now, now - b->config->charge_interval_ms, &list, &n,
	                              &err)) {
		isc_log(ISC_LOG_WARN, "meter: %s", err.msg);
		return;
	}
	/*
	 * One write transaction for the tick's charges (each a savepoint inside it): the
	 * meter takes the store's write lock once per tick, not once per node, so the
	 * CLI and the workers are not kept waiting behind it.
	 */
	batch = n > 0 && isc_store_begin(b->store, &err) == 0;
	charge_list(b, b->store, list, n, now, 1);
	if (batch && isc_store_commit(b->store, &err)) {
		isc_log(ISC_LOG_WARN, "meter: committing the tick's charges: %s", err.msg);
		isc_store_rollback(b->store);
	}
	isc_node_charge_list_free(list, n);
}

#ifdef ISC_TEST_HOOKS
/* An experiment whose step runs in a worker now: its holds may be mid-change. */
static int step_in_flight(const char *experiment_id, void *ctx)
{
	struct isc_broker *b = ctx;
	if (!broker_meters(b, experiment_id))
		return 1; /* another replica's: its steps may be mid-change */
	for (struct broker_job *j = b->jobs; j; j = j->next)
		if (strcmp(j->experiment_id, experiment_id) == 0 &&
		    !atomic_load_explicit((_Atomic int *)&j->done, memory_order_acquire))
			return 1;
	return 0;
}

/*
 * ISC_TEST_RENEW_RACE=1 (test builds): the first renewal of a cluster whose
 * experiment is stopping, its teardown in flight in a worker, waits until that
 * experiment has ended, so the renewal lands after the teardown released the hold: the
 * interleaving of "renewal racing a release", forced. The rule must make it a
 * no-op (tests/integration/faults.sh).
 */
static void renew_race_hook(struct isc_broker *b, const struct isc_cluster *c)
{
	static int done;
	struct isc_experiment e;
	struct isc_err err;
	const char *v = getenv("ISC_TEST_RENEW_RACE");
	int64_t until;

	if (done || !v || strcmp(v, "1") != 0 ||
	    isc_store_experiment_get(b->store, c->experiment_id, &e, &err))
		return;
	if (strcmp(e.status, "stopping") != 0 || !step_in_flight(e.id, b)) {
		isc_experiment_cleanup(&e);
		return;
	}
	done = 1;
	isc_log(ISC_LOG_INFO, "test hook: the renewal of cluster %s waits for %s to end", c->id,
	        e.id);
	until = isc_wall_ms() + 60000;
	while (!isc_status_is_final(e.status) && isc_wall_ms() < until) {
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
		isc_experiment_cleanup(&e);
		if (isc_store_experiment_get(b->store, c->experiment_id, &e, &err))
			return;
	}
	isc_log(ISC_LOG_INFO, "test hook: renewing cluster %s now that %s is %s", c->id, e.id,
	        e.status);
	isc_experiment_cleanup(&e);
}
#endif

static void renew_reservations(struct isc_broker *b)
{
	struct isc_ledger_hold *holds = NULL;
	struct isc_cluster *list;
	struct isc_err err;
	size_t n, n_holds = 0;
	int have_holds;

	/* The list is only a hint: the rule reads the cluster's state and the experiment's
	 * status again in the transaction that renews, so a cluster torn down or an
	 * experiment ended since is left alone. */
	if (isc_store_cluster_list_open(b->store, &list, &n, &err))
		return;
	/* Every hold in one read (issue 49): a read per cluster was most of the meter's tick
	 * on PostgreSQL with a thousand bursts running. */
	have_holds = isc_store_ledger_holds(b->store, &holds, &n_holds, &err) == 0;
	for (size_t i = 0; i < n; i++) {
		struct isc_cluster *c = &list[i];
		int64_t window, below, held = 0;
		int rc;

		if (strcmp(c->state, "terminating") == 0 ||
		    billing_of(c->account) != ISC_BILLING_CREDITS ||
		    !broker_meters(b, c->experiment_id))
			continue;
#ifdef ISC_TEST_HOOKS
		renew_race_hook(b, c);
#endif
		window = isc_credits_cost_micros(c->price_micros * c->nnodes,
		                                 b->config->reservation_window_ms);
		below = isc_credits_cost_micros(c->price_micros * c->nnodes,
		                                isc_config_hold_renew_below_ms(b->config));
		if (below <= 0 || below > window)
			below = window;
		/* A read, no write lock: a hold above its threshold is left as it is, so a
		 * running burst writes one reserve row per half window, not one per tick. The
		 * renewal reads the hold again in its transaction. */
		if (have_holds)
			held = isc_ledger_holds_find(holds, n_holds, c->experiment_id);
		if (window > 0 && have_holds && held >= below)
			continue;
		rc =
		    isc_credits_renew_below(b->store, c->experiment_id, c->id, window, below, &err);
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
	isc_ledger_holds_free(holds, n_holds);
	isc_cluster_list_free(list, n);
}

/*
 * The release side of the rule: a hold whose experiment ended, or that has no open
 * cluster left, is released. Normally the teardown released it already; this finds
 * what a crash between a cluster's termination and its release left behind.
 */
/*
 * Which holds need no settling now, from one read of the open clusters and one of the
 * holds (issue 49: a settling transaction for every holding experiment every tick was
 * most of the meter's tick with a thousand bursts running). quiet[k] is 1 when holds[k]'s
 * experiment has an open cluster not being torn down and holds at most one window of its
 * largest open cluster: isc_credits_settle would release nothing. Only a hint, and one
 * that errs towards settling: a cluster it does not see, or a price it cannot read,
 * leaves the experiment to isc_credits_settle, which reads everything again.
 */
static void quiet_holds(const struct isc_cluster *open, size_t n_open,
                        const struct isc_ledger_hold *holds, size_t n_holds, int64_t window_ms,
                        int *quiet)
{
	int64_t *window = calloc(n_holds ? n_holds : 1, sizeof(*window));
	int *live = calloc(n_holds ? n_holds : 1, sizeof(*live));
	int *bad = calloc(n_holds ? n_holds : 1, sizeof(*bad));

	for (size_t k = 0; k < n_holds; k++)
		quiet[k] = 0;
	if (!window || !live || !bad)
		goto out;
	for (size_t i = 0; i < n_open; i++) {
		const struct isc_cluster *c = &open[i];
		ptrdiff_t k = isc_ledger_holds_index(holds, n_holds, c->experiment_id);
		int64_t w;

		if (k < 0)
			continue;
		w = c->nnodes > 0 && c->price_micros >= 0 && c->price_micros <= ISC_MONEY_MAX_MICROS
		        ? isc_credits_cost_micros(c->price_micros * c->nnodes, window_ms)
		        : -1;
		if (w < 0)
			bad[k] = 1;
		else if (w > window[k])
			window[k] = w;
		if (strcmp(c->state, "terminating") != 0)
			live[k] = 1;
	}
	for (size_t k = 0; k < n_holds; k++)
		quiet[k] = live[k] && !bad[k] && holds[k].held_micros <= window[k];
out:
	free(window);
	free(live);
	free(bad);
}

static void settle_holds(struct isc_broker *b)
{
	struct isc_ledger_hold *holds = NULL;
	struct isc_cluster *open = NULL;
	struct isc_err err;
	size_t n, n_holds = 0, n_open = 0;
	int *quiet = NULL;
	char **ids;

	if (isc_store_ledger_holders(b->store, &ids, &n, &err)) {
		isc_log(ISC_LOG_WARN, "meter: %s", err.msg);
		return;
	}
	if (isc_store_cluster_list_open(b->store, &open, &n_open, &err) == 0 &&
	    isc_store_ledger_holds(b->store, &holds, &n_holds, &err) == 0 &&
	    (quiet = calloc(n_holds ? n_holds : 1, sizeof(*quiet))))
		quiet_holds(open, n_open, holds, n_holds, b->config->reservation_window_ms, quiet);
	for (size_t i = 0; i < n; i++) {
		int64_t released = 0;
		int ended = 0;
		if (!broker_meters(b, ids[i])) {
			free(ids[i]); /* another replica's burst (docs/ha.md) */
			continue;
		}
		if (quiet) {
			ptrdiff_t k = isc_ledger_holds_index(holds, n_holds, ids[i]);
			if (k >= 0 && quiet[k]) {
				free(ids[i]); /* a running burst's hold: nothing to settle */
				continue;
			}
		}
		if (isc_credits_settle(b->store, ids[i], b->config->reservation_window_ms,
		                       &released, &ended, &err))
			isc_log(ISC_LOG_WARN, "meter: settling the hold of %s: %s", ids[i],
			        err.msg);
		else if (released > 0)
			isc_log(ended ? ISC_LOG_WARN : ISC_LOG_INFO,
			        "%s: released %lld micros it held %s", ids[i], (long long)released,
			        ended ? "after it ended" : "beyond what its open clusters need");
		free(ids[i]);
	}
	free(ids);
	free(quiet);
	isc_ledger_holds_free(holds, n_holds);
	isc_cluster_list_free(open, n_open);
}

#ifdef ISC_TEST_HOOKS
/*
 * The invariants of holds (docs/credits.md), checked in test builds on every
 * tick unless ISC_HOLDS_CHECK=0: a violation is logged line by line and iscd
 * aborts, so the integration suite that caused it fails loudly. Experiments
 * whose step is in flight are skipped (the tick runs beside the workers); the
 * others are between steps, where the invariants must hold.
 */
static void holds_check(struct isc_broker *b, enum isc_holds_check what)
{
	const char *v = getenv("ISC_HOLDS_CHECK");
	struct isc_buf report;
	struct isc_err err;
	size_t violations = 0;

	if (v && strcmp(v, "0") == 0)
		return;
	isc_buf_init(&report, 64 * 1024);
	if (isc_credits_holds_check_below(b->store, what, b->config->reservation_window_ms,
	                                  isc_config_hold_renew_below_ms(b->config), step_in_flight,
	                                  b, &report, &violations, &err)) {
		isc_log(ISC_LOG_WARN, "holds check: %s", err.msg);
	} else if (violations > 0) {
		isc_log(
		    ISC_LOG_ERROR, "holds check: %zu invariant(s) of credit holds violated %s:\n%s",
		    violations, what == ISC_HOLDS_CHECK_ALL ? "after the meter" : "after the tick",
		    isc_buf_cstr(&report));
		abort();
	}
	isc_buf_cleanup(&report);
}
#endif

int broker_meter(struct isc_broker *b, struct isc_err *err)
{
	(void)err;
#ifdef ISC_TEST_HOOKS
	/* What the last tick's steps left: an ended experiment holds nothing (before the
	 * settling below could hide a missed release or a renewal that raced it). */
	holds_check(b, ISC_HOLDS_CHECK_ENDED);
#endif
	settle_holds(b);
	charge_nodes(b, isc_store_now_ms());
	renew_reservations(b);
#ifdef ISC_TEST_HOOKS
	holds_check(b, ISC_HOLDS_CHECK_ALL);
#endif
	return 0;
}
