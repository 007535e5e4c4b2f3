/*
 * Boot benchmark: the launcher boots 1 node, then 16 nodes, of local sshd
 * nodes (tests/mocks/node) whose registry takes 2 s per pull, and prints the
 * ratio of the two wall times (goal: at most 1.3) and the launcher's own CPU
 * per node, each the median of ROUNDS boots. Needs root; run from the repo root.
 *
 * The nodes run the C docker stand-in (tests/mocks/node/docker.c): a pull or
 * a container start waits without using the CPU and a docker call costs about
 * a millisecond, so 16 nodes on this machine's 2 cores are 16 sshds and
 * nothing else, and the ratio measures the launcher, not the test bed. When
 * the goal is missed, it prints where each node's time went: connect (TCP,
 * SSH handshake, host-key check), auth (login), pull and start (as the node's
 * docker recorded them), and the rest (the session, the boot script).
 */
#include "common/clock.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#define NODES   16
#define ROUNDS  7
#define PULL_MS 2000
#define GOAL    1.3

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t median(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(v[0]), cmp_i64);
	return v[n / 2];
}

/* CPU time of this process (every launcher thread), ms. */
static int64_t cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* Where one node's boot went, ms. */
struct split {
	int64_t connect, auth, pull, start, rest, total;
};

/* The node's docker calls of what (pull|run) that began at or after since: the last one's length.
 */
static int64_t node_timing(const char *root, int node, const char *what, int64_t since)
{
	char path[400], w[16];
	long long a, b;
	int64_t got = -1;
	FILE *f;
	snprintf(path, sizeof(path), "%s/n%d/timings", root, node);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fscanf(f, "%15s %lld %lld", w, &a, &b) == 3)
		if (!strcmp(w, what) && a >= since)
			got = b - a;
	fclose(f);
	return got;
}

/*
 * ROUNDS boots of n nodes: the median wall time; the launcher's CPU per boot
 * (median); the per-node split of the median round into splits (n entries).
 */
static int64_t boots(const char *root, const struct isc_boot_spec *spec,
                     const struct isc_node_target *t, size_t n, const struct isc_launcher_opts *o,
                     int64_t *cpu, struct split *splits)
{
	int64_t times[ROUNDS], sorted[ROUNDS], cpus[ROUNDS], med;
	static struct split all[ROUNDS][NODES];
	struct isc_boot_result res[NODES];
	struct isc_err err;
	for (int r = 0; r < ROUNDS; r++) {
		int64_t since = isc_wall_ms(), t0 = isc_monotonic_ms(), c0 = cpu_ms();
		if (isc_launcher_boot_nodes(spec, t, n, o, res, &err)) {
			fprintf(stderr, "boot: %s\n", err.msg);
			exit(1);
		}
		times[r] = isc_monotonic_ms() - t0;
		cpus[r] = cpu_ms() - c0;
		for (size_t i = 0; i < n; i++) {
			struct split *s = &all[r][i];
			s->total = res[i].total_ms;
			s->connect = res[i].handshake_ms;
			s->auth = res[i].connect_ms - res[i].handshake_ms;
			s->pull = node_timing(root, (int)i, "pull", since);
			s->start = node_timing(root, (int)i, "run", since);
			s->rest = s->total - s->connect - s->auth - (s->pull > 0 ? s->pull : 0) -
			          (s->start > 0 ? s->start : 0);
		}
		isc_launcher_stop(spec, t, n, o, 0);
	}
	memcpy(sorted, times, sizeof(times));
	med = median(sorted, ROUNDS);
	for (int r = 0; r < ROUNDS; r++)
		if (times[r] == med) {
			memcpy(splits, all[r], n * sizeof(*splits));
			break;
		}
	*cpu = median(cpus, ROUNDS);
	return med;
}

static void print_splits(const char *what, const struct split *s, size_t n)
{
	printf("where the time went, %s (ms): node connect auth pull start rest total\n", what);
	for (size_t i = 0; i < n; i++)
		printf("  n%-2zu %5lld %5lld %5lld %5lld %5lld %5lld\n", i, (long long)s[i].connect,
		       (long long)s[i].auth, (long long)s[i].pull, (long long)s[i].start,
		       (long long)s[i].rest, (long long)s[i].total);
}

int main(void)
{
	char root[] = "/tmp/isc-bench-boot-XXXXXX", cmd[1400], pub_path[300], key_path[300];
	static char ips[NODES][32], ids[NODES][32];
	struct isc_node_target t[NODES];
	struct split one_split[1], all_split[NODES];
	struct isc_err err;
	char *pub;
	FILE *f;
	int base = 20 + (int)(getpid() % 200); /* 127.89.B.x: rarely shared by two runs */

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
	/* Cheap nodes: the C docker stand-in, a registry that takes PULL_MS per pull. */
	setenv("NODE_DOCKER", "c", 1);
	snprintf(cmd, sizeof(cmd), "%d", PULL_MS);
	setenv("NODE_PULL_DELAY_MS", cmd, 1);
	for (int i = 0; i < NODES; i++) {
		snprintf(ips[i], sizeof(ips[i]), "127.89.%d.%d", base, i + 1);
		snprintf(ids[i], sizeof(ids[i]), "i-bench%d", i);
		t[i] = (struct isc_node_target){i, ips[i], 2222, ips[i], ids[i]};
		snprintf(
		    cmd, sizeof(cmd),
		    "tests/mocks/node/node-up %s/n%d %s 2222 %s >/dev/null && : >%s/n%d/timings",
		    root, i, ips[i], pub_path, root, i);
		if (system(cmd) != 0)
			return 1;
	}
	{
		struct isc_boot_spec spec = {
		    "exp_bench", "bench", "burst", 1, 0,     "sleep 30", "pytorch/pytorch:latest",
		    NULL,        0,       1,       8, 29500, "16g"};
		struct isc_launcher_opts o = {"root", key_path, 10000, 60000, NULL, NULL};
		int64_t one, all, cpu_one, cpu_all;
		double ratio;
		spec.nnodes = 1;
		one = boots(root, &spec, t, 1, &o, &cpu_one, one_split);
		spec.nnodes = NODES;
		all = boots(root, &spec, t, NODES, &o, &cpu_all, all_split);
		ratio = one ? (double)all / (double)one : 0.0;
		printf("boot 1 node: %lld ms, %d nodes: %lld ms (medians of %d, %d ms pull, "
		       "%ld cores)\n",
		       (long long)one, NODES, (long long)all, ROUNDS, PULL_MS,
		       sysconf(_SC_NPROCESSORS_ONLN));
		printf("boot ratio %d/1 (%d s pull): %.2f\n", NODES, PULL_MS / 1000, ratio);
		printf("boot launcher cpu per node: %.1f ms\n", (double)cpu_all / NODES);
		if (ratio > GOAL || getenv("BENCH_BREAKDOWN")) {
			if (ratio > GOAL)
				printf("boot ratio above the goal of %.1f:\n", GOAL);
			print_splits("1 node", one_split, 1);
			print_splits("16 nodes, the median boot", all_split, NODES);
		}
	}
	for (int i = 0; i < NODES; i++) {
		snprintf(cmd, sizeof(cmd), "tests/mocks/node/node-down %s/n%d", root, i);
		if (system(cmd) != 0)
			fprintf(stderr, "node-down failed\n");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : 1;
}
