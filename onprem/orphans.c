/*
 * Runs a previous iscd left behind: stopped (with their artifacts brought home)
 * on the nodes queue_state recorded before their experiments resume; those
 * nodes get no new run meanwhile.
 */
#include "onprem/onprem_int.h"

#include "store/store_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void onprem_orphan_stop(struct isc_onprem *o, const struct isc_experiment *row, const char *nodes)
{
	struct onprem_orphan *orph = calloc(1, sizeof(*orph));
	struct onprem_job *j;
	struct isc_err err;
	size_t n = 1, k = 0;

	for (const char *p = nodes; *p; p++)
		n += *p == ',';
	j = onprem_job_new(ONPREM_JOB_STOP, &o->env, n);
	if (!orph || !j || onprem_fill_spec(o, j, row) == ISC_ENOMEM) {
		free(orph);
		onprem_job_free(j);
		return;
	}
	{
		char *copy = strdup(nodes), *save = NULL;
		int rank = 0; /* the list is in rank order: container names follow it */
		for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && k < n;
		     tok = strtok_r(NULL, ",", &save), rank++) {
			struct onprem_node *nd = onprem_node_by_id(o, strtoll(tok, NULL, 10));
			struct onprem_target *t = &j->t[k];
			if (!nd || strcmp(nd->state, "unreachable") == 0)
				continue;
			t->node_id = nd->id;
			t->rank = rank;
			t->port = nd->port;
			t->host = strdup(nd->host);
			t->user = strdup(nd->user);
			snprintf(t->pin, sizeof(t->pin), ISC_POOL_PIN_FMT, (long long)nd->id);
			nd->orphan = 1;
			k++;
		}
		free(copy);
	}
	j->n = k;
	/* Rank 0 was the first node of the run: its artifacts are the newest. */
	j->pull = 1;
	orph->job = j;
	orph->exp_id = strdup(row->id);
	orph->next = o->orphans;
	o->orphans = orph;
	onprem_note(o, row->id, "restart",
	            "iscd restarted during a run: stopping what is left on %zu node(s) before it "
	            "resumes",
	            k);
	onprem_job_start(j, &err);
}

int onprem_orphan_pending(struct isc_onprem *o, const char *exp_id)
{
	for (struct onprem_orphan *x = o->orphans; x; x = x->next)
		if (strcmp(x->exp_id, exp_id) == 0)
			return 1;
	return 0;
}

void onprem_reap_orphans(struct isc_onprem *o)
{
	for (struct onprem_orphan **p = &o->orphans; *p;) {
		struct onprem_orphan *x = *p;
		if (!onprem_job_done(x->job)) {
			p = &x->next;
			continue;
		}
		for (size_t i = 0; i < x->job->n; i++) {
			struct onprem_node *nd = onprem_node_by_id(o, x->job->t[i].node_id);
			if (nd)
				nd->orphan = 0;
		}
		*p = x->next;
		onprem_job_free(x->job);
		free(x->exp_id);
		free(x);
	}
}
