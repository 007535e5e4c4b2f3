/*
 * Boot benchmark: the launcher boots 1 node, then 16 nodes, of local sshd
 * nodes (tests/mocks/node) and prints both wall times and their ratio.
 * Goal: 16 nodes take at most 1.3x the time of one. Each figure is the
 * median of 5 boots, one figure per line. Needs root; run from the repo root.
 *
 * All 16 "nodes" share this machine's cores, so their own work (sshd key
 * exchanges, the Python docker stand-in) queues up; the benchmark also prints
 * how much of the 16-node time is the launcher's (wall time beyond the
 * slowest node's own boot) and repeats both boots with a registry that takes
 * a second per pull (pull-delay-ms), where node time is waiting, as on a cloud.
 */
#include "common/clock.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NODES  16
#define ROUNDS 5

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* Median wall time of ROUNDS boots; *overhead_ms: median of (wall - slowest node's own time). */
static int64_t median_boot(const struct isc_boot_spec *spec, const struct isc_node_target *t,
                           size_t n, const struct isc_launcher_opts *o, int64_t *overhead_ms)
{
	int64_t times[ROUNDS], over[ROUNDS];
	struct isc_boot_result res[NODES];
	struct isc_err err;
	for (int r = 0; r < ROUNDS; r++) {
		int64_t t0 = isc_monotonic_ms(), slowest = 0;
		if (isc_launcher_boot_nodes(spec, t, n, o, res, &err)) {
			fprintf(stderr, "boot: %s\n", err.msg);
			exit(1);
		}
		times[r] = isc_monotonic_ms() - t0;
		for (size_t i = 0; i < n; i++)
			if (res[i].total_ms > slowest)
				slowest = res[i].total_ms;
		over[r] = times[r] - slowest;
		isc_launcher_stop(spec, t, n, o, 0);
	}
	qsort(times, ROUNDS, sizeof(times[0]), cmp_i64);
	qsort(over, ROUNDS, sizeof(over[0]), cmp_i64);
	if (overhead_ms)
		*overhead_ms = over[ROUNDS / 2];
	return times[ROUNDS / 2];
}

/* Every node's registry takes delay_ms per pull (0: none). */
static void registry_delay(const char *root, int delay_ms)
{
	char path[400];
	for (int i = 0; i < NODES; i++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/n%d/pull-delay-ms", root, i);
		if (!delay_ms) {
			unlink(path);
			continue;
		}
		f = fopen(path, "w");
		if (f) {
			fprintf(f, "%d\n", delay_ms);
			fclose(f);
		}
	}
}

int main(void)
{
	char root[] = "/tmp/isc-bench-boot-XXXXXX", cmd[512], pub_path[300], key_path[300];
	static char ips[NODES][32], ids[NODES][32];
	struct isc_node_target t[NODES];
	struct isc_err err;
	char *pub;
	FILE *f;

	if (getuid() != 0) {
		printf("bench_boot: skipped (needs root to start sshd nodes)\n");
		return 0;
	}
	if (!mkdtemp(root) || isc_cluster_key_create(root, "bench", &pub, &err))
		return 1;
	snprintf(pub_path, sizeof(pub_path), "%s/pub", root);
	snprintf(key_path, sizeof(key_path), "%s/keys/bench", root);
	f = fopen(pub_path, "w");
	fprintf(f, "%s\n", pub);
	fclose(f);
	free(pub);
	for (int i = 0; i < NODES; i++) {
		snprintf(ips[i], sizeof(ips[i]), "127.0.89.%d", i + 1);
		snprintf(ids[i], sizeof(ids[i]), "i-bench%d", i);
		t[i] = (struct isc_node_target){i, ips[i], 2222, ips[i], ids[i]};
		snprintf(cmd, sizeof(cmd), "tests/mocks/node/node-up %s/n%d %s 2222 %s >/dev/null",
		         root, i, ips[i], pub_path);
		if (system(cmd) != 0)
			return 1;
	}
	{
		struct isc_boot_spec spec = {
		    "exp_bench", "bench", "burst", 1, 0,     "sleep 30", "pytorch/pytorch:latest",
		    NULL,        0,       1,       8, 29500, "16g"};
		struct isc_launcher_opts o = {"root", key_path, 10000, 60000, NULL, NULL};
		int64_t one, all, cpu0, cpu, over, one_d, all_d;
		spec.nnodes = 1;
		one = median_boot(&spec, t, 1, &o, NULL);
		spec.nnodes = NODES;
		cpu0 = cpu_ms();
		all = median_boot(&spec, t, NODES, &o, &over);
		cpu = (cpu_ms() - cpu0) / ROUNDS;
		registry_delay(root, 1000);
		spec.nnodes = 1;
		one_d = median_boot(&spec, t, 1, &o, NULL);
		spec.nnodes = NODES;
		all_d = median_boot(&spec, t, NODES, &o, NULL);
		registry_delay(root, 0);
		printf("boot 1 node: %lld ms (median of %d)\n", (long long)one, ROUNDS);
		printf("boot %d nodes: %lld ms (median of %d)\n", NODES, (long long)all, ROUNDS);
		printf("boot ratio %d/1: %.2fx (goal <= 1.3x)\n", NODES,
		       one ? (double)all / (double)one : 0.0);
		printf("boot %d nodes, wall time beyond the slowest node's own boot: %lld ms\n",
		       NODES, (long long)over);
		printf(
		    "launcher CPU per %d-node boot: %lld ms (the nodes share the same %ld cores)\n",
		    NODES, (long long)cpu, sysconf(_SC_NPROCESSORS_ONLN));
		printf("boot 1 node, 1 s registry: %lld ms\n", (long long)one_d);
		printf("boot %d nodes, 1 s registry: %lld ms\n", NODES, (long long)all_d);
		printf("boot ratio %d/1, 1 s registry: %.2fx (goal <= 1.3x)\n", NODES,
		       one_d ? (double)all_d / (double)one_d : 0.0);
	}
	for (int i = 0; i < NODES; i++) {
		snprintf(cmd, sizeof(cmd), "tests/mocks/node/node-down %s/n%d", root, i);
		if (system(cmd) != 0)
			fprintf(stderr, "node-down failed\n");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : 1;
}
