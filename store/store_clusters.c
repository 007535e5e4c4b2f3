/* Clusters, nodes and launch intents. */
#include "store/store_clusters.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

void isc_cluster_cleanup(struct isc_cluster *c)
{
	free(c->id);
	free(c->experiment_id);
	free(c->shape_id);
	free(c->provider);
	free(c->account);
	free(c->region);
	free(c->zone);
	free(c->state);
	free(c->replaces);
	free(c->placement_token);
	free(c->fill_ranks);
	memset(c, 0, sizeof(*c));
}

void isc_cluster_list_free(struct isc_cluster *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		isc_cluster_cleanup(&list[i]);
	free(list);
}

void isc_intent_cleanup(struct isc_intent *i)
{
	free(i->token);
	free(i->cluster_id);
	free(i->shape_id);
	free(i->zone);
	free(i->state);
	free(i->error);
	free(i->attempt_zone);
	memset(i, 0, sizeof(*i));
}

static void cluster_clean(void *rec)
{
	isc_cluster_cleanup(rec);
}

static void intent_clean(void *rec)
{
	isc_intent_cleanup(rec);
}

static void node_clean(void *rec)
{
	struct isc_node *nd = rec;
	free(nd->cluster_id);
	free(nd->instance_id);
	free(nd->state);
	free(nd->private_ip);
	free(nd->public_ip);
	free(nd->zone);
}

void isc_node_list_free(struct isc_node *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		node_clean(&list[i]);
	free(list);
}

static int step_done(struct isc_store *s, struct isc_db_stmt *st, const char *what,
                     struct isc_err *err)
{
	int rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc == ISC_DB_DONE)
		return 0;
	return isc_store_db_err(s, rc, what, err);
}

/*
 * The cluster's row, launching (replaces/placement_token/fill_ranks NULL for a gang's own
 * launch, whose zone is set once the cloud answered), then its pending launch intent for `count`
 * nodes in `zones`; inside the caller's transaction.
 */
static int insert_cluster_and_intent(struct isc_store *s, const struct isc_cluster *c,
                                     const char *token, const char *zones, int count, int64_t now,
                                     struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT INTO clusters (id, experiment_id, shape_id, provider, account, region, "
	    "zone, nnodes, nproc, cycle, price_micros, state, created_at_ms, replaces, "
	    "placement_token, fill_ranks) "
	    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'launching', ?, ?, ?, ?)",
	    &st, err);
	if (!rc) {
		isc_db_bind_text(st, 1, c->id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 2, c->experiment_id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 3, c->shape_id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 4, c->provider, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 5, c->account, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 6, c->region, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 7, c->replaces ? c->zone : "", -1, ISC_DB_STATIC);
		isc_db_bind_int(st, 8, c->nnodes);
		isc_db_bind_int(st, 9, c->nproc);
		isc_db_bind_int(st, 10, c->cycle);
		isc_db_bind_int64(st, 11, c->price_micros);
		isc_db_bind_int64(st, 12, now);
		isc_db_bind_text(st, 13, c->replaces ? c->replaces : "", -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 14, c->placement_token ? c->placement_token : "", -1,
		                 ISC_DB_STATIC);
		isc_db_bind_text(st, 15, c->fill_ranks ? c->fill_ranks : "", -1, ISC_DB_STATIC);
		rc = step_done(s, st, "creating a cluster", err);
	}
	if (!rc)
		rc = isc_store_prepare(
		    s,
		    "INSERT INTO intents (token, cluster_id, shape_id, zone, count, state, "
		    "created_at_ms) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
		    &st, err);
	if (!rc) {
		isc_db_bind_text(st, 1, token, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 2, c->id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 3, c->shape_id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 4, zones, -1, ISC_DB_STATIC);
		isc_db_bind_int(st, 5, count);
		isc_db_bind_int64(st, 6, now);
		rc = step_done(s, st, "recording a launch intent", err);
	}
	return rc;
}

/*
 * An organisation's key (account other than "default") still registered and active,
 * read under the same write lock as the insert: keys remove counts a key's clusters
 * and deletes it in one transaction (isc_store_key_delete_unused), so between the
 * broker's choice of the key and this insert the key may have gone or started
 * 'removing'; a cluster on it then would run where nothing watches it.
 */
static int key_takes_launches(struct isc_store *s, const char *account, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, step;

	if (!account || strcmp(account, "default") == 0)
		return 0;
	if ((rc = isc_store_prepare(s, "SELECT state FROM cloud_keys WHERE id = ?", &st, err)))
		return rc;
	isc_db_bind_text(st, 1, account, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	if (step == ISC_DB_DONE)
		rc = isc_err_set(err, ISC_ECONFLICT, "cloud key %s is no longer registered",
		                 account);
	else if (step != ISC_DB_ROW)
		rc = isc_store_db_err(s, step, "reading a cloud key's state", err);
	else if (strcmp((const char *)isc_db_column_text(st, 0), "active") != 0)
		rc = isc_err_set(err, ISC_ECONFLICT, "cloud key %s is %s: no new launches on it",
		                 account, (const char *)isc_db_column_text(st, 0));
	isc_db_finalize(st);
	return rc;
}

int isc_store_cluster_create(struct isc_store *s, const struct isc_cluster *c, const char *token,
                             const char *zones, struct isc_err *err)
{
	struct isc_cluster row = *c;
	int rc;

	/* A gang's own launch: its zone is known once the cloud answered. */
	row.replaces = row.placement_token = row.fill_ranks = NULL;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = key_takes_launches(s, c->account, err);
	if (!rc)
		rc = insert_cluster_and_intent(s, &row, token, zones, c->nnodes, isc_store_now_ms(),
		                               err);
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

/* How many ranks a fill list ("1,3") names. */
static int fill_count(const char *fill)
{
	int n = fill && fill[0] ? 1 : 0;
	for (const char *p = fill; p && *p; p++)
		n += *p == ',';
	return n;
}

int isc_store_cluster_replace(struct isc_store *s, const struct isc_cluster *r, const char *token,
                              const char *const *kept_ids, const int *kept_ranks, size_t n_kept,
                              struct isc_err *err)
{
	struct isc_db_stmt *st;
	int64_t now = isc_store_now_ms();
	int rc;

	if (!r->replaces || !r->replaces[0] || fill_count(r->fill_ranks) < 1)
		return isc_err_set(err, ISC_EINVALID,
		                   "a replacement needs the cluster it replaces "
		                   "and the ranks it fills");
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = insert_cluster_and_intent(s, r, token, r->zone, fill_count(r->fill_ranks), now, err);
	if (!rc)
		rc = isc_store_prepare(s,
		                       "UPDATE clusters SET state = 'draining' WHERE id = ? AND "
		                       "state IN ('launching', 'booting', 'running')",
		                       &st, err);
	if (!rc) {
		isc_db_bind_text(st, 1, r->replaces, -1, ISC_DB_STATIC);
		rc = step_done(s, st, "marking a cluster draining", err);
		if (!rc && isc_db_changes(isc_store_db(s)) != 1)
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "cluster %s is no longer live (draining or ending)",
			                 r->replaces);
	}
	if (!rc)
		rc = isc_store_prepare(s, "UPDATE nodes SET next_rank = -1 WHERE cluster_id = ?",
		                       &st, err);
	if (!rc) {
		isc_db_bind_text(st, 1, r->replaces, -1, ISC_DB_STATIC);
		rc = step_done(s, st, "updating nodes", err);
	}
	for (size_t i = 0; i < n_kept && !rc; i++) {
		rc = isc_store_prepare(
		    s, "UPDATE nodes SET next_rank = ? WHERE cluster_id = ? AND instance_id = ?",
		    &st, err);
		if (rc)
			break;
		isc_db_bind_int(st, 1, kept_ranks[i]);
		isc_db_bind_text(st, 2, r->replaces, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 3, kept_ids[i], -1, ISC_DB_STATIC);
		rc = step_done(s, st, "recording a kept node", err);
	}
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

int isc_store_cluster_take_kept(struct isc_store *s, const char *old_id, const char *new_id,
                                size_t *moved, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "UPDATE nodes SET cluster_id = ?, rank = next_rank, "
	                           "next_rank = -1 WHERE cluster_id = ? AND next_rank >= 0",
	                           &st, err);

	*moved = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, new_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, old_id, -1, ISC_DB_STATIC);
	rc = step_done(s, st, "moving kept nodes", err);
	if (!rc)
		*moved = (size_t)isc_db_changes(isc_store_db(s));
	return rc;
}

int isc_store_cluster_kept_count(struct isc_store *s, const char *cluster_id, size_t *n,
                                 struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT COUNT(*) FROM nodes WHERE cluster_id = ? AND next_rank >= 0", &st, err);

	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*n = (size_t)isc_db_column_int64(st, 0);
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "counting kept nodes", err);
	}
	isc_db_finalize(st);
	return rc;
}

#define CLUSTER_COLS                                                                               \
	"SELECT id, experiment_id, shape_id, provider, account, region, zone, nnodes, nproc, "     \
	"cycle, price_micros, state, created_at_ms, COALESCE(closed_at_ms, 0), replaces, "         \
	"placement_token, fill_ranks FROM clusters "

static int cluster_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_cluster *c = rec;
	int oom = 0;
	c->id = isc_store_col_text(st, 0, &oom);
	c->experiment_id = isc_store_col_text(st, 1, &oom);
	c->shape_id = isc_store_col_text(st, 2, &oom);
	c->provider = isc_store_col_text(st, 3, &oom);
	c->account = isc_store_col_text(st, 4, &oom);
	c->region = isc_store_col_text(st, 5, &oom);
	c->zone = isc_store_col_text(st, 6, &oom);
	c->nnodes = isc_db_column_int(st, 7);
	c->nproc = isc_db_column_int(st, 8);
	c->cycle = isc_db_column_int(st, 9);
	c->price_micros = isc_db_column_int64(st, 10);
	c->state = isc_store_col_text(st, 11, &oom);
	c->created_at_ms = isc_db_column_int64(st, 12);
	c->closed_at_ms = isc_db_column_int64(st, 13);
	c->replaces = isc_store_col_text(st, 14, &oom);
	c->placement_token = isc_store_col_text(st, 15, &oom);
	c->fill_ranks = isc_store_col_text(st, 16, &oom);
	return oom ? ISC_ENOMEM : 0;
}

static int cluster_query(struct isc_store *s, struct isc_db_stmt *st, struct isc_cluster **out,
                         size_t *n, struct isc_err *err)
{
	void *list;
	int rc = isc_store_read_rows(s, st, sizeof(**out), cluster_from_row, cluster_clean,
	                             "reading clusters", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_cluster_get(struct isc_store *s, const char *id, struct isc_cluster *out,
                          struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, CLUSTER_COLS "WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, cluster_from_row, cluster_clean, out, sizeof(*out),
	                        "reading a cluster", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no cluster with id '%s'", id) : rc;
}

int isc_store_cluster_list_open(struct isc_store *s, struct isc_cluster **out, size_t *n,
                                struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, CLUSTER_COLS "WHERE state != 'closed' ORDER BY created_at_ms, id", &st, err);
	return rc ? rc : cluster_query(s, st, out, n, err);
}

int isc_store_cluster_list_for_experiment(struct isc_store *s, const char *experiment_id,
                                          int open_only, struct isc_cluster **out, size_t *n,
                                          struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           CLUSTER_COLS
	                           "WHERE experiment_id = ? AND (? = 0 OR state != 'closed') "
	                           "ORDER BY created_at_ms, id",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, open_only);
	return cluster_query(s, st, out, n, err);
}

int isc_store_cluster_set_state(struct isc_store *s, const char *id, const char *state,
                                struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "UPDATE clusters SET state = ?1, closed_at_ms = CASE WHEN ?1 = 'closed' "
	    "THEN ?2 ELSE closed_at_ms END WHERE id = ?3",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, state, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, isc_store_now_ms());
	isc_db_bind_text(st, 3, id, -1, ISC_DB_STATIC);
	return step_done(s, st, "updating a cluster", err);
}

int isc_store_cluster_set_zone(struct isc_store *s, const char *id, const char *zone,
                               struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "UPDATE clusters SET zone = ? WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, zone, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, id, -1, ISC_DB_STATIC);
	return step_done(s, st, "updating a cluster", err);
}

static int intent_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_intent *in = rec;
	int oom = 0;
	in->token = isc_store_col_text(st, 0, &oom);
	in->cluster_id = isc_store_col_text(st, 1, &oom);
	in->shape_id = isc_store_col_text(st, 2, &oom);
	in->zone = isc_store_col_text(st, 3, &oom);
	in->count = isc_db_column_int(st, 4);
	in->state = isc_store_col_text(st, 5, &oom);
	in->error = isc_store_col_text(st, 6, &oom);
	in->created_at_ms = isc_db_column_int64(st, 7);
	in->attempt_zone = isc_store_col_text(st, 8, &oom);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_intent_for_cluster(struct isc_store *s, const char *cluster_id,
                                 struct isc_intent *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "SELECT token, cluster_id, shape_id, zone, count, state, error, created_at_ms, "
	    "attempt_zone FROM intents WHERE cluster_id = ? ORDER BY created_at_ms DESC LIMIT 1",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, intent_from_row, intent_clean, out, sizeof(*out),
	                        "reading an intent", err);
	return rc == ISC_ENOTFOUND
	           ? isc_err_set(err, rc, "cluster %s has no launch intent", cluster_id)
	           : rc;
}

int isc_store_intent_resolve(struct isc_store *s, const char *token, const char *state,
                             const char *error, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "UPDATE intents SET state = ?, error = ?, resolved_at_ms = ? WHERE token = ?", &st,
	    err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, state, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, error ? error : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, isc_store_now_ms());
	isc_db_bind_text(st, 4, token, -1, ISC_DB_STATIC);
	return step_done(s, st, "resolving an intent", err);
}

int isc_store_intent_set_attempt_zone(struct isc_store *s, const char *token, const char *zone,
                                      struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare(s, "UPDATE intents SET attempt_zone = ? WHERE token = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, zone ? zone : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, token, -1, ISC_DB_STATIC);
	return step_done(s, st, "recording a launch attempt", err);
}

int isc_store_node_add(struct isc_store *s, const struct isc_node *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT INTO nodes (cluster_id, rank, instance_id, state, private_ip, "
	    "public_ip, zone, price_micros, launched_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
	    "ON CONFLICT DO NOTHING",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, n->cluster_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, n->rank);
	isc_db_bind_text(st, 3, n->instance_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, n->state ? n->state : "pending", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 5, n->private_ip ? n->private_ip : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 6, n->public_ip ? n->public_ip : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 7, n->zone ? n->zone : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 8, n->price_micros);
	if (n->launched_at_ms > 0)
		isc_db_bind_int64(st, 9, n->launched_at_ms);
	return step_done(s, st, "recording a node", err);
}

int isc_store_node_observe(struct isc_store *s, const char *instance_id, const char *state,
                           const char *private_ip, const char *public_ip, int64_t launched_at_ms,
                           int64_t notice_at_ms, int64_t observed_at_ms, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "UPDATE nodes SET state = ?1, "
	    "private_ip = CASE WHEN ?2 != '' THEN ?2 ELSE private_ip END, "
	    "public_ip = CASE WHEN ?3 != '' THEN ?3 ELSE public_ip END, "
	    "launched_at_ms = COALESCE(launched_at_ms, NULLIF(?4, 0)), "
	    /* A node of a cluster the broker is tearing down (or tore down) was terminated by
	     * the broker itself: the cluster goes terminating before the terminate call. A
	     * cloud that cannot tell our terminations from preemptions (OCI) reports it
	     * after a restart as one; the store knows better, so no notice is recorded. */
	    "notice_at_ms = CASE WHEN (SELECT c.state FROM clusters c WHERE c.id = "
	    "nodes.cluster_id) IN ('terminating', 'closed') THEN notice_at_ms "
	    "ELSE COALESCE(notice_at_ms, NULLIF(?5, 0)) END, "
	    /* A node counted gone by absence (terminated, absent_since_ms kept) that a
	     * listing shows again was never gone: its recorded termination is dropped, so it
	     * is charged through to the termination the cloud confirms (a listing that shows
	     * it terminated: this one, or a later one). */
	    "terminated_at_ms = CASE WHEN absent_since_ms IS NOT NULL AND state = 'terminated' "
	    "THEN CASE WHEN ?1 = 'terminated' THEN ?6 ELSE NULL END "
	    "WHEN ?1 = 'terminated' THEN COALESCE(terminated_at_ms, ?6) "
	    "ELSE terminated_at_ms END, absent_since_ms = NULL WHERE instance_id = ?7",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, state, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, private_ip ? private_ip : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, public_ip ? public_ip : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, launched_at_ms);
	isc_db_bind_int64(st, 5, notice_at_ms);
	isc_db_bind_int64(st, 6, observed_at_ms);
	isc_db_bind_text(st, 7, instance_id, -1, ISC_DB_STATIC);
	return step_done(s, st, "updating a node", err);
}

int isc_store_node_missed(struct isc_store *s, const char *instance_id, int64_t now_ms,
                          int64_t confirm_ms, int *gone, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc;

	*gone = 0;
	rc = isc_store_prepare(
	    s,
	    /* Counted gone, a node keeps absent_since_ms (isc_node_gone_by_absence): its
	     * termination is an observation that a later listing may prove false. One the
	     * cloud was seen ending (shutting-down, stopping) that then leaves the listings
	     * is gone for sure: no mark. */
	    "UPDATE nodes SET absent_since_ms = CASE WHEN ?1 - COALESCE(absent_since_ms, ?1) >= ?2 "
	    "AND state IN ('shutting-down', 'stopping') THEN NULL "
	    "ELSE COALESCE(absent_since_ms, ?1) END, "
	    "state = CASE WHEN ?1 - COALESCE(absent_since_ms, ?1) >= ?2 THEN 'terminated' "
	    "ELSE state END, "
	    "terminated_at_ms = CASE WHEN ?1 - COALESCE(absent_since_ms, ?1) >= ?2 "
	    "THEN COALESCE(terminated_at_ms, absent_since_ms, ?1) ELSE terminated_at_ms END "
	    "WHERE instance_id = ?3 AND state != 'terminated' RETURNING state",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, now_ms);
	isc_db_bind_int64(st, 2, confirm_ms);
	isc_db_bind_text(st, 3, instance_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*gone = strcmp((const char *)isc_db_column_text(st, 0), "terminated") == 0;
		rc = isc_db_step(st);
	}
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "updating a node", err);
}

int isc_store_node_gone_confirmed(struct isc_store *s, const char *instance_id, int64_t now_ms,
                                  int *gone, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "UPDATE nodes SET state = 'terminated', terminated_at_ms = "
	                           "COALESCE(terminated_at_ms, absent_since_ms, ?1), "
	                           "absent_since_ms = NULL WHERE instance_id = ?2 AND state != "
	                           "'terminated'",
	                           &st, err);

	*gone = 0;
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, now_ms);
	isc_db_bind_text(st, 2, instance_id, -1, ISC_DB_STATIC);
	if ((rc = step_done(s, st, "updating a node", err)))
		return rc;
	*gone = isc_db_changes(isc_store_db(s)) > 0;
	return 0;
}

int isc_store_node_set_charged(struct isc_store *s, const char *instance_id, int64_t until_ms,
                               struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "UPDATE nodes SET charged_until_ms = ? WHERE instance_id = ?",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, until_ms);
	isc_db_bind_text(st, 2, instance_id, -1, ISC_DB_STATIC);
	return step_done(s, st, "updating a node", err);
}

static int node_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_node *nd = rec;
	int oom = 0;
	nd->id = isc_db_column_int64(st, 0);
	nd->cluster_id = isc_store_col_text(st, 1, &oom);
	nd->rank = isc_db_column_int(st, 2);
	nd->instance_id = isc_store_col_text(st, 3, &oom);
	nd->state = isc_store_col_text(st, 4, &oom);
	nd->private_ip = isc_store_col_text(st, 5, &oom);
	nd->public_ip = isc_store_col_text(st, 6, &oom);
	nd->zone = isc_store_col_text(st, 7, &oom);
	nd->price_micros = isc_db_column_int64(st, 8);
	nd->launched_at_ms = isc_db_column_int64(st, 9);
	nd->terminated_at_ms = isc_db_column_int64(st, 10);
	nd->charged_until_ms = isc_db_column_int64(st, 11);
	nd->notice_at_ms = isc_db_column_int64(st, 12);
	nd->absent_since_ms = isc_db_column_int64(st, 13);
	return oom ? ISC_ENOMEM : 0;
}

/*
 * The columns node_from_row reads, in its order, of the nodes table named `t` (a
 * string literal: "" alone, "n." where a join makes the names ambiguous).
 */
#define NODE_COLUMNS_OF(t)                                                                         \
	t "id, " t "cluster_id, " t "rank, " t "instance_id, " t "state, " t "private_ip, " t      \
	  "public_ip, " t "zone, " t "price_micros, COALESCE(" t "launched_at_ms, 0), "            \
	  "COALESCE(" t "terminated_at_ms, 0), COALESCE(" t "charged_until_ms, 0), "               \
	  "COALESCE(" t "notice_at_ms, 0), COALESCE(" t "absent_since_ms, 0)"
#define NODE_COLUMNS        NODE_COLUMNS_OF("")
#define NODE_COLUMNS_JOINED NODE_COLUMNS_OF("n.") /* nodes n in a join */

/* The nodes `sql` (selecting NODE_COLUMNS, one text parameter `key`) finds. */
static int nodes_where(struct isc_store *s, const char *sql, const char *key, struct isc_node **out,
                       size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(s, sql, &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, key, -1, ISC_DB_STATIC);
	rc = isc_store_read_rows(s, st, sizeof(**out), node_from_row, node_clean, "reading nodes",
	                         &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_node_find(struct isc_store *s, const char *instance_id, struct isc_node **out,
                        size_t *n, struct isc_err *err)
{
	return nodes_where(s, "SELECT " NODE_COLUMNS " FROM nodes WHERE instance_id = ?",
	                   instance_id, out, n, err);
}

int isc_store_node_list(struct isc_store *s, const char *cluster_id, struct isc_node **out,
                        size_t *n, struct isc_err *err)
{
	return nodes_where(s,
	                   "SELECT " NODE_COLUMNS " FROM nodes WHERE cluster_id = ? ORDER BY rank",
	                   cluster_id, out, n, err);
}

int isc_store_node_list_in(struct isc_store *s, const char *provider, const char *account,
                           const char *region, int absent_closed, struct isc_node **out, size_t *n,
                           struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(
	    s,
	    "SELECT " NODE_COLUMNS_JOINED " FROM nodes n JOIN clusters c ON c.id = n.cluster_id "
	    "WHERE c.provider = ?1 AND c.account = ?2 AND c.region = ?3 AND (c.state != 'closed' "
	    /* a closed cluster's node counted gone by absence, which a listing may show again
	     * (this reads the nodes of every closed cluster there: asked for now and then) */
	    "OR (?4 != 0 AND n.state = 'terminated' AND n.absent_since_ms IS NOT NULL)) "
	    "ORDER BY n.instance_id",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, provider, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, account, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, region, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 4, absent_closed ? 1 : 0);
	rc = isc_store_read_rows(s, st, sizeof(**out), node_from_row, node_clean, "reading nodes",
	                         &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

static int text_differs(const char *stored, const char *seen)
{
	return seen && seen[0] && (!stored || strcmp(stored, seen) != 0);
}

int isc_node_gone_by_absence(const struct isc_node *nd)
{
	return nd->state && strcmp(nd->state, "terminated") == 0 && nd->absent_since_ms != 0;
}

int isc_node_observe_changes(const struct isc_node *nd, const char *state, const char *private_ip,
                             const char *public_ip, int64_t launched_at_ms, int64_t notice_at_ms)
{
	/* Each clause mirrors one SET of isc_store_node_observe. */
	return !nd->state || strcmp(nd->state, state) != 0 ||
	       text_differs(nd->private_ip, private_ip) || text_differs(nd->public_ip, public_ip) ||
	       (nd->launched_at_ms == 0 && launched_at_ms != 0) ||
	       (nd->notice_at_ms == 0 && notice_at_ms != 0) ||
	       (strcmp(state, "terminated") == 0 && nd->terminated_at_ms == 0) ||
	       nd->absent_since_ms != 0;
}

int isc_store_node_known(struct isc_store *s, const char *instance_id, int *known,
                         struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT 1 FROM nodes WHERE instance_id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, instance_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	*known = rc == ISC_DB_ROW;
	isc_db_finalize(st);
	return (rc == ISC_DB_ROW || rc == ISC_DB_DONE)
	           ? 0
	           : isc_store_db_err(s, rc, "reading nodes", err);
}

static void charge_clean(void *rec)
{
	struct isc_node_charge *c = rec;
	free(c->instance_id);
	free(c->cluster_id);
	free(c->experiment_id);
	free(c->provider);
	free(c->shape_id);
	free(c->account);
}

void isc_node_charge_list_free(struct isc_node_charge *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		charge_clean(&list[i]);
	free(list);
}

static int charge_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_node_charge *c = rec;
	int oom = 0;
	c->instance_id = isc_store_col_text(st, 0, &oom);
	c->cluster_id = isc_store_col_text(st, 1, &oom);
	c->experiment_id = isc_store_col_text(st, 2, &oom);
	c->provider = isc_store_col_text(st, 3, &oom);
	c->shape_id = isc_store_col_text(st, 4, &oom);
	c->account = isc_store_col_text(st, 5, &oom);
	c->price_micros = isc_db_column_int64(st, 6);
	c->from_ms = isc_db_column_int64(st, 7);
	c->to_ms = isc_db_column_int64(st, 8);
	c->launched_ms = isc_db_column_int64(st, 9);
	c->closed = isc_db_column_int64(st, 10) != 0;
	return oom ? ISC_ENOMEM : 0;
}

static int nodes_to_charge(struct isc_store *s, const char *experiment_id, int64_t now_ms,
                           int64_t due_before_ms, struct isc_node_charge **out, size_t *n,
                           struct isc_err *err);

int isc_store_nodes_to_charge(struct isc_store *s, int64_t now_ms, int64_t due_before_ms,
                              struct isc_node_charge **out, size_t *n, struct isc_err *err)
{
	return nodes_to_charge(s, NULL, now_ms, due_before_ms, out, n, err);
}

int isc_store_nodes_to_charge_experiment(struct isc_store *s, const char *experiment_id,
                                         int64_t now_ms, int64_t due_before_ms,
                                         struct isc_node_charge **out, size_t *n,
                                         struct isc_err *err)
{
	return nodes_to_charge(s, experiment_id, now_ms, due_before_ms, out, n, err);
}

static int nodes_to_charge(struct isc_store *s, const char *experiment_id, int64_t now_ms,
                           int64_t due_before_ms, struct isc_node_charge **out, size_t *n,
                           struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(
	    s,
	    "SELECT n.instance_id, n.cluster_id, c.experiment_id, c.provider, c.shape_id, "
	    "c.account, "
	    "n.price_micros, COALESCE(n.charged_until_ms, n.launched_at_ms), "
	    "COALESCE(" ISC_STORE_BILLED_TERMINATION_SQL ", n.absent_since_ms, 0), "
	    "n.launched_at_ms, "
	    "CASE WHEN n.terminated_at_ms IS NULL OR n.absent_since_ms IS NOT NULL THEN 0 ELSE 1 "
	    "END "
	    "FROM nodes n JOIN clusters c ON c.id = n.cluster_id "
	    "WHERE n.launched_at_ms IS NOT NULL "
	    /* A node the listings stopped showing is charged up to when it was first missed,
	     * no further: counted gone, that is its termination; listed again, the rest is
	     * charged then (isc_store_node_observe clears the miss). */
	    "AND COALESCE(n.charged_until_ms, n.launched_at_ms) < " ISC_STORE_BILLED_END_SQL(
	        "?1") " "
	              /* Metering by intervals (issue 49): a running node is charged once per charge
	               * interval, an interval that closes (or a first miss) at once. */
	              "AND (n.terminated_at_ms IS NOT NULL OR n.absent_since_ms IS NOT NULL "
	              "OR COALESCE(n.charged_until_ms, n.launched_at_ms) <= ?2) "
	              "AND (CAST(?3 AS TEXT) IS NULL OR c.experiment_id = ?3) "
	              "ORDER BY n.id",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, now_ms);
	isc_db_bind_int64(st, 2, due_before_ms);
	if (experiment_id)
		isc_db_bind_text(st, 3, experiment_id, -1, ISC_DB_STATIC);
	else
		isc_db_bind_null(st, 3);
	rc = isc_store_read_rows(s, st, sizeof(**out), charge_from_row, charge_clean,
	                         "reading nodes to charge", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}
