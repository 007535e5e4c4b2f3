/*
 * credits-race: many processes racing for the last credits of one org.
 *
 *   credits-race --home DIR --org ORG --project P [--procs N] [--amount DOLLARS]
 *
 * Creates N + 1 experiments in the project, forks N processes that each open their
 * own connection to the store, waits until all are ready, and lets them
 * reserve AMOUNT again and again until the org's credits refuse; at the same
 * time every process charges the same node (of the extra experiment, which
 * holds exactly its cost) for the same ten one-minute periods.
 * Then checks, from a fresh connection: the holds never exceed the balance,
 * exactly floor(available / AMOUNT) reservations succeeded, and the node was
 * charged exactly once per period. Prints one line per check ("ok: ..." or
 * "FAIL: ...") and exits 1 if any failed. Used by tests/integration/credits-race.sh.
 */
#include "credits/credits.h"
#include "store/store_experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PROCS         64
#define NODE_PRICE_MICROS INT64_C(32770000) /* $32.77 per node-hour */
#define PERIODS           10

static int checks_failed;

static void check(int ok, const char *fmt, long long a, long long b)
{
	printf("%s: ", ok ? "ok" : "FAIL");
	printf(fmt, a, b);
	putchar('\n');
	if (!ok)
		checks_failed++;
}

/* One racer: returns its number of successful reservations, or -1. */
static int racer(const char *home, const char *exp_id, const char *exp0, int64_t amount,
                 int ready_fd)
{
	struct isc_store *s;
	struct isc_err err;
	char c, node[48];
	int won = 0, rc;

	snprintf(node, sizeof(node), "i-%s", exp0);

	if (read(ready_fd, &c, 1) < 0) /* returns 0 when the parent closes the pipe: go */
		return -1;
	if (isc_store_open(home, 0, &s, &err)) {
		fprintf(stderr, "credits-race: %s\n", err.msg);
		return -1;
	}
	for (int k = 0, refused = 0; k < PERIODS || !refused; k++) {
		if (k < PERIODS) {
			struct isc_charge ch = {0};
			ch.experiment_id = exp0;
			ch.node_instance_id = node;
			ch.price_micros = NODE_PRICE_MICROS;
			ch.provider = "aws";
			ch.shape_id = "aws:us-east-1:p4d.24xlarge";
			ch.period_start_ms = INT64_C(1717200000000) + k * 60000;
			ch.period_end_ms = ch.period_start_ms + 60000;
			if (isc_credits_charge_node(s, &ch, &err)) {
				fprintf(stderr, "credits-race: charge: %s\n", err.msg);
				won = -1;
				break;
			}
		}
		if (refused)
			continue;
		rc = isc_credits_reserve(s, exp_id, NULL, amount, &err);
		if (rc == ISC_ECREDITS) {
			refused = 1;
			continue;
		}
		if (rc) {
			fprintf(stderr, "credits-race: reserve: %s\n", err.msg);
			won = -1;
			break;
		}
		won++;
	}
	isc_store_free(s);
	return won;
}

int main(int argc, char **argv)
{
	const char *home = NULL, *org = NULL, *project = NULL, *amount_text = "0.75";
	struct isc_credit_balance before, after;
	struct isc_project *list = NULL;
	char ids[MAX_PROCS + 1][32]; /* ids[procs] is the experiment whose node is charged */
	pid_t pids[MAX_PROCS];
	struct isc_store *s;
	struct isc_err err;
	int64_t amount, cost;
	size_t nproj = 0;
	int procs = 8, fds[2], total = 0, broken = 0;
	const char *project_id = NULL;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--home") == 0)
			home = argv[i + 1];
		else if (strcmp(argv[i], "--org") == 0)
			org = argv[i + 1];
		else if (strcmp(argv[i], "--project") == 0)
			project = argv[i + 1];
		else if (strcmp(argv[i], "--procs") == 0)
			procs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--amount") == 0)
			amount_text = argv[i + 1];
		else
			break;
	}
	if (!home || !org || !project || procs < 2 || procs > MAX_PROCS) {
		fprintf(stderr,
		        "usage: credits-race --home DIR --org ORG --project P [--procs 2..%d] "
		        "[--amount DOLLARS]\n",
		        MAX_PROCS);
		return 2;
	}
	if (isc_money_parse(amount_text, &amount, &err) || amount == 0) {
		fprintf(stderr, "credits-race: bad --amount\n");
		return 2;
	}
	if (isc_store_open(home, 0, &s, &err) || isc_credits_balance(s, org, &before, &err) ||
	    isc_store_project_list(s, org, &list, &nproj, &err))
		goto fail;
	for (size_t i = 0; i < nproj; i++)
		if (strcmp(list[i].name, project) == 0 || strcmp(list[i].id, project) == 0)
			project_id = list[i].id;
	if (!project_id) {
		isc_err_set(&err, ISC_ENOTFOUND, "no project %s in %s", project, org);
		goto fail;
	}
	for (int i = 0; i <= procs; i++) {
		struct isc_experiment e = {0};
		char *rnd = isc_store_new_id("exp_");
		if (!rnd)
			goto fail;
		snprintf(ids[i], sizeof(ids[i]), "%s", rnd);
		free(rnd);
		e.id = ids[i];
		e.project_id = (char *)project_id;
		e.org_id = list[0].org_id;
		e.name = ids[i];
		e.compute_mode = "burst";
		e.gpus = 8;
		e.spec_json = "{}";
		e.status = "running";
		if (isc_store_experiment_add(s, &e, &err))
			goto fail;
	}
	/* The charged experiment holds exactly what its node will cost, as the broker would. */
	if (isc_credits_reserve(s, ids[procs], NULL,
	                        PERIODS * isc_credits_cost_micros(NODE_PRICE_MICROS, 60000), &err))
		goto fail;
	isc_store_free(s);
	s = NULL;

	if (pipe(fds) != 0) {
		perror("credits-race: pipe");
		return 1;
	}
	fflush(NULL);
	for (int i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("credits-race: fork");
			return 1;
		}
		if (pids[i] == 0) {
			int won;
			close(fds[1]);
			won = racer(home, ids[i], ids[procs], amount, fds[0]);
			isc_project_list_free(list, nproj);
			_exit(won < 0 || won > 200 ? 255 : won);
		}
	}
	close(fds[0]);
	close(fds[1]); /* all racers start now */
	for (int i = 0; i < procs; i++) {
		int status;
		if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) == 255)
			broken++;
		else
			total += WEXITSTATUS(status);
	}
	isc_project_list_free(list, nproj);
	list = NULL;
	nproj = 0;

	check(broken == 0, "%lld of %lld racers finished cleanly", procs - broken, procs);
	if (isc_store_open(home, 0, &s, &err) || isc_credits_balance(s, org, &after, &err) ||
	    isc_credits_experiment_cost(s, ids[procs], &cost, &err))
		goto fail;
	isc_store_free(s);
	check(after.reserved_micros <= after.balance_micros, "reserved %lld <= balance %lld micros",
	      after.reserved_micros, after.balance_micros);
	check(after.reserved_micros - before.reserved_micros == (int64_t)total * amount,
	      "new holds %lld micros = successful reservations x amount (%lld; the charges used "
	      "up their own hold)",
	      after.reserved_micros - before.reserved_micros, (long long)total * amount);
	/* Each one-minute charge rounds up on its own: 10 x ceil(546166.67) micros. */
	check(cost == PERIODS * isc_credits_cost_micros(NODE_PRICE_MICROS, 60000),
	      "node charged %lld micros = each of ten minutes once (%lld)", cost,
	      PERIODS * isc_credits_cost_micros(NODE_PRICE_MICROS, 60000));
	check(after.balance_micros == before.balance_micros - cost,
	      "balance %lld = balance before minus the charges (%lld)", after.balance_micros,
	      before.balance_micros - cost);
	/* Every racer retried until refused, so the credits left are less than one more hold. */
	check(after.available_micros >= 0 && after.available_micros < amount,
	      "available %lld micros is under one reservation (%lld)", after.available_micros,
	      amount);
	printf("credits-race: %d reservations by %d processes, %d checks failed\n", total, procs,
	       checks_failed);
	return checks_failed ? 1 : 0;
fail:
	fprintf(stderr, "credits-race: %s\n", err.msg);
	isc_project_list_free(list, nproj);
	if (s)
		isc_store_free(s);
	return 1;
}
