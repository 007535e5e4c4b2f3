/*
 * hollow-drive: the broker's own launcher (launcher/, libssh2) against
 * hollow nodes, for tests/hollow/test-hollow-node and for measuring what a
 * node boot costs the hollow-node process.
 *
 *   hollow-drive --key KEY --port PORT --nodes IP[,IP...] STEP...
 *
 * Steps, in the order given, each printing "ok STEP" or "FAIL STEP: why":
 *   boot          a cluster of the nodes (rank = position), image pytorch/pytorch,
 *                 command $HOLLOW_DRIVE_COMMAND (default "echo hi; sleep 1")
 *   follow        follows every rank until it exits (logs into $HOLLOW_DRIVE_OUT), at
 *                 most $HOLLOW_DRIVE_FOLLOW_S seconds (default 20)
 *   push=DIR      DIR's checkpoints/crud/lossy onto every node
 *   pull=DIR      rank 0's artifacts into DIR
 *   dataset=DIR   DIR as dataset copy @1/hollow on rank 0 (twice: the second finds it)
 *   stop          docker stop + rm on every node
 *   boots=N       N boots and stops of the cluster, one after another (the measurement)
 */
#include "launcher/launcher.h"

#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int accept_any(void *ctx, const char *target, const char *key_type, const char *sha256_hex,
                      struct isc_err *err)
{
	(void)ctx, (void)target, (void)key_type, (void)sha256_hex, (void)err;
	return 0;
}

int main(int argc, char **argv)
{
	const char *key = NULL, *list = NULL;
	int port = 0, failed = 0, i;
	char *ips[64];
	size_t n = 0;
	struct isc_node_target nodes[64];
	struct isc_launcher_opts opts = {0};
	struct isc_boot_spec spec = {0};
	const char *cmd = getenv("HOLLOW_DRIVE_COMMAND");
	const char *outdir = getenv("HOLLOW_DRIVE_OUT");

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--key") == 0)
			key = argv[i + 1];
		else if (strcmp(argv[i], "--port") == 0)
			port = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--nodes") == 0)
			list = argv[i + 1];
		else
			break;
	}
	if (!key || !list || port <= 0) {
		fprintf(stderr, "usage: hollow-drive --key KEY --port PORT --nodes IP[,IP...] "
		                "STEP...\n");
		return 2;
	}
	char *ip_list = strdup(list), *save = NULL;
	for (char *t = strtok_r(ip_list, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save))
		ips[n++] = t;
	for (size_t k = 0; k < n; k++)
		nodes[k] = (struct isc_node_target){(int)k, ips[k], port, ips[k], NULL, NULL};
	opts.key_path = key;
	opts.connect_deadline_ms = 20000;
	opts.command_timeout_ms = 60000;
	opts.check = accept_any;
	spec.experiment_id = "hollowdrive";
	spec.experiment_name = "hollow drive";
	spec.compute_mode = "burst";
	spec.command = cmd ? cmd : "echo hi; sleep 1";
	spec.image = "pytorch/pytorch:latest";
	spec.nnodes = (int)n;
	spec.nproc = 1;

	for (; i < argc; i++) {
		const char *step = argv[i];
		struct isc_err err = {0};
		int rc = 0;
		if (strcmp(step, "boot") == 0) {
			struct isc_boot_result res[64];
			rc = isc_launcher_boot_nodes(&spec, nodes, n, &opts, res, &err);
			for (size_t k = 0; !rc && k < n; k++)
				if (!res[k].started)
					rc = isc_err_set(&err, ISC_EIO, "rank %zu not started", k);
		} else if (strcmp(step, "follow") == 0) {
			struct isc_launch_follow *f = NULL;
			rc = isc_launch_follow_start(&spec, nodes, n, &opts,
			                             outdir ? outdir : "/tmp", &f, &err);
			const char *fs = getenv("HOLLOW_DRIVE_FOLLOW_S");
			for (int64_t end = isc_monotonic_ms() + (fs ? atol(fs) : 20) * 1000; !rc;) {
				int done = 0, code = 0;
				for (size_t k = 0; k < n; k++)
					if (isc_launch_follow_rank_exit(f, (int)k, &code)) {
						done++;
						if (code != 0)
							rc = isc_err_set(&err, ISC_EIO,
							                 "rank %zu exited %d", k,
							                 code);
					}
				if (done == (int)n)
					break;
				if (isc_monotonic_ms() > end)
					rc = isc_err_set(&err, ISC_ETRANSIENT,
					                 "ranks still running");
				usleep(100000);
			}
			isc_launch_follow_free(f);
		} else if (strncmp(step, "push=", 5) == 0) {
			rc = isc_launcher_push_artifacts_all(nodes, n, &opts, step + 5, NULL, &err);
		} else if (strncmp(step, "pull=", 5) == 0) {
			rc = isc_launcher_pull_artifacts(&nodes[0], &opts, step + 5,
			                                 ISC_ARTIFACT_ALL, NULL, &err);
		} else if (strncmp(step, "dataset=", 8) == 0) {
			int shipped = 0, again = 1;
			rc = isc_launcher_push_dataset(&nodes[0], &opts, step + 8, "@1/hollow",
			                               &shipped, &err);
			if (!rc)
				rc = isc_launcher_push_dataset(&nodes[0], &opts, step + 8,
				                               "@1/hollow", &again, &err);
			if (!rc && (!shipped || again))
				rc =
				    isc_err_set(&err, ISC_EIO, "shipped %d then %d (want 1 then 0)",
				                shipped, again);
		} else if (strcmp(step, "stop") == 0) {
			isc_launcher_stop(&spec, nodes, n, &opts, 5);
		} else if (strncmp(step, "boots=", 6) == 0) {
			int k = atoi(step + 6);
			int64_t t0 = isc_monotonic_ms();
			for (int r = 0; r < k && !rc; r++) {
				rc = isc_launcher_boot(&spec, nodes, n, &opts, &err);
				isc_launcher_stop(&spec, nodes, n, &opts, 0);
			}
			if (!rc)
				printf("boots: %d boots of %zu nodes in %lld ms\n", k, n,
				       (long long)(isc_monotonic_ms() - t0));
		} else {
			rc = isc_err_set(&err, ISC_EINVALID, "unknown step");
		}
		if (rc) {
			printf("FAIL %s: %s\n", step, err.msg);
			failed++;
		} else {
			printf("ok %s\n", step);
		}
		fflush(stdout);
	}
	free(ip_list);
	return failed ? 1 : 0;
}
