/*
 * Boot benchmark: the launcher boots 1 node, then 16 nodes, of local sshd
 * nodes (tests/mocks/node) and prints both wall times and their ratio.
 * Goal: 16 nodes take at most 1.3x the time of one. Each figure is the
 * median of 5 boots. Needs root; run from the repo root.
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

static int64_t median_boot(const struct isc_boot_spec *spec, const struct isc_node_target *t,
                           size_t n, const struct isc_launcher_opts *o)
{
	int64_t times[ROUNDS];
	struct isc_err err;
	for (int r = 0; r < ROUNDS; r++) {
		int64_t t0 = isc_monotonic_ms();
		if (isc_launcher_boot(spec, t, n, o, &err)) {
			fprintf(stderr, "boot: %s\n", err.msg);
			exit(1);
		}
		times[r] = isc_monotonic_ms() - t0;
		isc_launcher_stop(spec, t, n, o, 0);
	}
	qsort(times, ROUNDS, sizeof(times[0]), cmp_i64);
	return times[ROUNDS / 2];
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
		int64_t one = median_boot(&spec, t, 1, &o), all, cpu0;
		spec.nnodes = NODES;
		cpu0 = cpu_ms();
		all = median_boot(&spec, t, NODES, &o);
		printf("launcher CPU per %d-node boot: %lld ms (this process; the nodes' sshd and "
		       "docker "
		       "stand-ins share the same %ld cores)\n",
		       NODES, (long long)((cpu_ms() - cpu0) / ROUNDS),
		       sysconf(_SC_NPROCESSORS_ONLN));
		printf("boot 1 node: %lld ms (median of %d)\n", (long long)one, ROUNDS);
		printf("boot %d nodes: %lld ms (median of %d)\n", NODES, (long long)all, ROUNDS);
		printf("boot ratio %d/1: %.2fx (goal <= 1.3x)\n", NODES,
		       one ? (double)all / (double)one : 0.0);
	}
	for (int i = 0; i < NODES; i++) {
		snprintf(cmd, sizeof(cmd), "tests/mocks/node/node-down %s/n%d", root, i);
		if (system(cmd) != 0)
			fprintf(stderr, "node-down failed\n");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : 1;
}
