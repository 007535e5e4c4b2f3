/*
 * A burst node's dataset fetch (launcher/boot.c, the boot script's ranged
 * GETs): one local sshd node (tests/mocks/node) booted with a dataset to fetch
 * through a presigned URL of the mock S3, and booted without it; the fetch's
 * time is the difference, the best of ROUNDS (each round fetches afresh). The
 * object comes from tests/bench/datasets.sh, which compares the time with one
 * curl stream of the same URL: NODEFETCH_URL, NODEFETCH_ETAG, NODEFETCH_SHA256.
 * Prints "node fetch: SECONDS s". Needs root; run from the repo root.
 */
#include "common/clock.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 3

static int64_t boot_ms(const struct isc_boot_spec *spec, const struct isc_node_target *t,
                       const struct isc_launcher_opts *o)
{
	struct isc_boot_result res[1];
	struct isc_err err;
	int64_t t0 = isc_monotonic_ms(), ms;
	if (isc_launcher_boot_nodes(spec, t, 1, o, res, &err)) {
		fprintf(stderr, "bench_nodefetch: boot: %s\n", err.msg);
		exit(1);
	}
	ms = isc_monotonic_ms() - t0;
	isc_launcher_stop(spec, t, 1, o, 0);
	return ms;
}

int main(void)
{
	char root[] = "/tmp/isc-bench-nodefetch-XXXXXX", cmd[1400], pub_path[300], key_path[300];
	char ip[32];
	const char *url = getenv("NODEFETCH_URL"), *etag = getenv("NODEFETCH_ETAG");
	const char *sha = getenv("NODEFETCH_SHA256");
	struct isc_err err;
	char *pub;
	FILE *f;
	int64_t best = -1;

	if (getuid() != 0) {
		printf("bench_nodefetch: skipped (needs root to start an sshd node)\n");
		return 0;
	}
	if (!url || !etag || !sha) {
		fprintf(stderr,
		        "bench_nodefetch: NODEFETCH_URL, NODEFETCH_ETAG, NODEFETCH_SHA256\n");
		return 2;
	}
	if (!mkdtemp(root) || isc_cluster_key_create(root, "bench", &pub, &err))
		return 1;
	snprintf(pub_path, sizeof(pub_path), "%s/pub", root);
	snprintf(key_path, sizeof(key_path), "%s/keys/bench", root);
	f = fopen(pub_path, "w");
	fprintf(f, "%s\n", pub);
	fclose(f);
	free(pub);
	setenv("NODE_DOCKER", "c", 1);
	snprintf(ip, sizeof(ip), "127.88.%d.1", 20 + (int)(getpid() % 200));
	snprintf(cmd, sizeof(cmd), "tests/mocks/node/node-up %s/n0 %s 2222 %s >/dev/null", root, ip,
	         pub_path);
	if (system(cmd) != 0)
		return 1;
	{
		struct isc_node_target t[1] = {{0, ip, 2222, ip, "i-nodefetch"}};
		const char *ids[1] = {"bench"};
		struct isc_boot_dataset_file file = {url, etag, sha, "big.bin", 0};
		struct isc_boot_dataset ds = {"@1/bench-1", &file, 1, 0};
		struct isc_boot_spec spec = {
		    "exp_bench", "bench", "burst", 1, 0,     "sleep 30", "pytorch/pytorch:latest",
		    NULL,        0,       1,       1, 29500, "1g"};
		struct isc_launcher_opts o = {"root", key_path, 10000, 600000, NULL, NULL};
		for (int r = 0; r < ROUNDS; r++) {
			int64_t with, without;
			snprintf(cmd, sizeof(cmd), "rm -rf %s/n0/data/.isc", root);
			if (system(cmd) != 0)
				return 1;
			spec.dataset_ids = ids;
			spec.n_datasets = 1;
			spec.dataset_fetch = &ds;
			with = boot_ms(&spec, t, &o);
			spec.dataset_ids = NULL;
			spec.n_datasets = 0;
			spec.dataset_fetch = NULL;
			without = boot_ms(&spec, t, &o);
			if (best < 0 || with - without < best)
				best = with - without;
		}
	}
	printf("node fetch: %.2f s\n", (double)best / 1000.0);
	snprintf(cmd, sizeof(cmd), "tests/mocks/node/node-down %s/n0", root);
	if (system(cmd) != 0)
		fprintf(stderr, "node-down failed\n");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : 1;
}
