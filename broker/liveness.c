/* Is an iscd running for this store; is a cloud node still there (liveness.h). */
#include "broker/liveness.h"

#include "common/err.h"
#include "common/log.h"
#include "store/store_clusters.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

int isc_daemon_running(const char *home, long *pid_out)
{
	char path[4096], comm[64];
	long pid = 0;
	FILE *f;
	int alive;

	if (snprintf(path, sizeof(path), "%s/iscd.lock", home) >= (int)sizeof(path) ||
	    !(f = fopen(path, "r")))
		return 0; /* no daemon ever ran here */
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 0)
		return 0;
	/* A pid left by an iscd that was killed may now be another program's. */
	alive = kill((pid_t)pid, 0) == 0 || errno == EPERM;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if (!alive || !(f = fopen(path, "r")))
		return 0;
	alive = fgets(comm, sizeof(comm), f) && strncmp(comm, "iscd", 4) == 0 &&
	        (comm[4] == '\n' || comm[4] == '\0');
	fclose(f);
	if (alive && pid_out)
		*pid_out = pid;
	return alive;
}

int isc_daemon_wait_running(const char *home, long wait_ms, long *pid)
{
	struct timespec step = {0, 100 * 1000000L};
	for (long waited = 0;; waited += 100) {
		if (isc_daemon_running(home, pid))
			return 1;
		if (waited >= wait_ms)
			return 0;
		nanosleep(&step, NULL);
	}
}

/* ---- nodes ---- */

int broker_node_gone(const struct isc_node *n)
{
	return strcmp(n->state, "shutting-down") == 0 || strcmp(n->state, "terminated") == 0 ||
	       strcmp(n->state, "stopping") == 0 || strcmp(n->state, "stopped") == 0;
}

int broker_node_up(const struct isc_node *n)
{
	return strcmp(n->state, "running") == 0 && (n->private_ip[0] || n->public_ip[0]);
}

size_t broker_lost_ranks(const struct isc_node *nodes, size_t n, int ran, int *lost, int *remap)
{
	size_t k = 0;
	int booting = -1;

	*remap = -1;
	for (size_t i = 0; i < n; i++) {
		lost[i] =
		    nodes[i].notice_at_ms || (strcmp(nodes[i].state, "running") != 0 &&
		                              (ran || strcmp(nodes[i].state, "pending") != 0));
		k += (size_t)lost[i];
	}
	if (n == 0 || !lost[0] || k == n)
		return k;
	/* A kept node that runs becomes rank 0; a booting one only when none runs yet (then
	 * every node of the gang still boots, and no rank starts before they all run). */
	for (size_t i = 1; i < n && *remap < 0; i++) {
		if (lost[i])
			continue;
		if (broker_node_up(&nodes[i]))
			*remap = (int)i;
		else if (booting < 0)
			booting = (int)i;
	}
	if (*remap < 0)
		*remap = booting;
	return k;
}

const char *broker_boot_family(const char *provider, const char *t)
{
	const char *dot;
	if (!t)
		return "vm";
	if (provider && !strcmp(provider, "oci"))
		return !strncmp(t, "BM.", 3) ? "metal" : !strncmp(t, "VM.GPU", 6) ? "gpu" : "vm";
	if (provider && !strcmp(provider, "gcp"))
		return (!strncmp(t, "a2-", 3) || !strncmp(t, "a3-", 3) || !strncmp(t, "a4-", 3) ||
		        !strncmp(t, "g2-", 3))
		           ? "gpu"
		           : "vm";
	/* EC2: FAMILY.SIZE; metal sizes are "metal" or "metal-48xl" and the like. */
	dot = strchr(t, '.');
	if (dot && !strncmp(dot + 1, "metal", 5))
		return "metal";
	if (t[0] == 'p' || t[0] == 'g' || !strncmp(t, "trn", 3) || !strncmp(t, "inf", 3) ||
	    !strncmp(t, "dl", 2))
		return "gpu";
	return "vm";
}

size_t broker_stragglers(const struct isc_node *nodes, size_t n, int64_t created_at_ms,
                         int64_t now_ms, long deadline_ms, int *straggling)
{
	size_t up = 0, late = 0;
	for (size_t i = 0; i < n; i++) {
		straggling[i] = strcmp(nodes[i].state, "pending") == 0 && !nodes[i].notice_at_ms;
		up += (size_t)broker_node_up(&nodes[i]);
		late += (size_t)straggling[i];
	}
	if (up == 0 || late == 0 || up + late != n || now_ms - created_at_ms <= deadline_ms) {
		memset(straggling, 0, n * sizeof(*straggling));
		return 0;
	}
	return late;
}

int broker_node_in_pull_stage(const char *stage, int64_t now_ms)
{
	char what[16];
	long long start = 0, expected = 0;
	int got;
	if (!stage)
		return 0;
	if (!strncmp(stage, "pull ", 5))
		got = sscanf(stage, "%15s %*s %lld %lld", what, &start, &expected) == 3;
	else if (!strncmp(stage, "fetch ", 6))
		got = sscanf(stage, "%15s %lld %lld", what, &start, &expected) == 3;
	else
		return 0;
	if (!got || start <= 0 || expected < 0 || now_ms < start - 60000)
		return 0;
	/* Under way, and not overdue by more than twice what it was expected to take (a
	 * registry that stalls is a failure the command's own timeout reports). */
	return now_ms - start <= 2 * expected + 10000;
}

long broker_notice_ms(const char *provider)
{
	if (provider && !strcmp(provider, "aws"))
		return 120000;
	if (provider && !strcmp(provider, "gcp"))
		return 30000;
	return 0;
}

int broker_node_reachable_in_notice(const struct isc_node *n, const char *provider, int64_t now_ms)
{
	if (!strcmp(n->state, "running"))
		return 1;
	return !strcmp(n->state, "stopping") && n->notice_at_ms &&
	       now_ms - n->notice_at_ms < broker_notice_ms(provider);
}

int broker_drain_first(const char *provider, long launch_ms)
{
	/* The GCP driver's launch returns once the bulkInsert operation is done: a boot. */
	if (provider && !strcmp(provider, "gcp"))
		return 1;
	return broker_notice_ms(provider) < launch_ms;
}

struct broker_node_watch {
	pthread_t thread;
	char *home, *cluster_id;
	char **ids;
	size_t n;
	volatile int *gone;
	atomic_int stop;
};

/* 1 when one of the watched nodes is gone in the store's view (the watch's last describe). */
static int any_gone(struct isc_store *s, const struct broker_node_watch *w)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0;
	int gone = 0;

	if (isc_store_node_list(s, w->cluster_id, &nodes, &n, &err))
		return 0;
	for (size_t i = 0; i < n && !gone; i++)
		for (size_t k = 0; k < w->n && !gone; k++)
			gone = strcmp(nodes[i].instance_id, w->ids[k]) == 0 &&
			       broker_node_gone(&nodes[i]);
	isc_node_list_free(nodes, n);
	return gone;
}

static void *watch_main(void *arg)
{
	struct broker_node_watch *w = arg;
	struct timespec step = {0, 100 * 1000000L};
	struct isc_store *s = NULL;
	struct isc_err err;

	if (isc_store_open(w->home, 0, &s, &err)) {
		isc_log(ISC_LOG_WARN, "cluster %s: watching its nodes: %s", w->cluster_id, err.msg);
		return NULL;
	}
	while (!atomic_load(&w->stop)) {
		if (any_gone(s, w)) {
			*w->gone = 1;
			break;
		}
		nanosleep(&step, NULL);
	}
	isc_store_free(s);
	return NULL;
}

static void watch_free(struct broker_node_watch *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->ids[i]);
	free(w->ids);
	free(w->home);
	free(w->cluster_id);
	free(w);
}

int broker_node_watch_start(const char *home, const char *cluster_id,
                            const char *const *instance_ids, size_t n, volatile int *gone,
                            struct broker_node_watch **out, struct isc_err *err)
{
	struct broker_node_watch *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || !(w->home = strdup(home)) || !(w->cluster_id = strdup(cluster_id)) ||
	    !(w->ids = calloc(n ? n : 1, sizeof(*w->ids)))) {
		if (w)
			watch_free(w);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (; w->n < n; w->n++)
		if (!(w->ids[w->n] = strdup(instance_ids[w->n]))) {
			watch_free(w);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	w->gone = gone;
	atomic_init(&w->stop, 0);
	if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
		watch_free(w);
		return isc_err_set(err, ISC_EIO, "cannot start a thread");
	}
	*out = w;
	return 0;
}

void broker_node_watch_stop(struct broker_node_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->thread, NULL);
	watch_free(w);
}
