/*
 * The launcher against real sshd processes (tests/mocks/node) on loopback
 * addresses, each with its own host key and the docker stand-in: a 6-node
 * boot with the exact environment per rank, logs into rank_N.txt, host-key
 * pinning, an unreachable node, a failing pull rolled back on every node,
 * and hostile strings that stay inert. Needs root (sshd in mount namespaces);
 * skipped otherwise.
 */
#include "common/buf.h"
#include "common/clock.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"
#include "launcher/shellquote.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NODES 6
#define PORT  2222

static char root[64];
static char key_path[256];
static char pub_path[256];
static char ips[NODES][32];
static char instance_ids[NODES][32];
static struct isc_node_target targets[NODES];

/* In-memory pins, as the store would keep them. */
static struct {
	char target[64];
	char sha[65];
} pins[32];
static size_t n_pins;
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;

static int pin(void *ctx, const char *target, const char *type, const char *sha,
               struct isc_err *err)
{
	int rc = 0;
	(void)ctx;
	(void)type;
	pthread_mutex_lock(&pins_lock);
	for (size_t i = 0; i < n_pins; i++) {
		if (strcmp(pins[i].target, target) == 0) {
			if (strcmp(pins[i].sha, sha) != 0)
				rc = isc_err_set(err, ISC_EAUTH, "host key of %s changed", target);
			pthread_mutex_unlock(&pins_lock);
			return rc;
		}
	}
	snprintf(pins[n_pins].target, sizeof(pins[0].target), "%s", target);
	snprintf(pins[n_pins].sha, sizeof(pins[0].sha), "%s", sha);
	n_pins++;
	pthread_mutex_unlock(&pins_lock);
	return 0;
}

static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static int node_up(int i)
{
	return sh("tests/mocks/node/node-up %s/n%d %s %d %s >/dev/null 2>&1", root, i, ips[i], PORT,
	          pub_path);
}

static int group_setup(void **state)
{
	char *pub = NULL;
	struct isc_err err;
	FILE *f;
	(void)state;

	if (getuid() != 0)
		return 0; /* tests skip themselves */
	snprintf(root, sizeof(root), "/tmp/isc-launcher-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	if (isc_cluster_key_create(root, "cl_test", &pub, &err))
		return -1;
	snprintf(key_path, sizeof(key_path), "%s/keys/cl_test", root);
	snprintf(pub_path, sizeof(pub_path), "%s/pub", root);
	f = fopen(pub_path, "w");
	fprintf(f, "%s\n", pub);
	fclose(f);
	free(pub);
	for (int i = 0; i < NODES; i++) {
		snprintf(ips[i], sizeof(ips[i]), "127.0.88.%d", i + 1);
		snprintf(instance_ids[i], sizeof(instance_ids[i]), "i-test%d", i);
		targets[i] = (struct isc_node_target){i, ips[i], PORT, ips[i], instance_ids[i]};
		if (node_up(i))
			return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (getuid() != 0)
		return 0;
	for (int i = 0; i < NODES; i++)
		sh("tests/mocks/node/node-down %s/n%d >/dev/null 2>&1", root, i);
	sh("rm -rf %s", root);
	return 0;
}

static struct isc_launcher_opts opts(void)
{
	struct isc_launcher_opts o = {"root", key_path, 5000, 30000, pin, NULL};
	return o;
}

static struct isc_boot_spec spec(const char *id, const char *name, const char *command,
                                 const char *image)
{
	static const char *const datasets[] = {"imagenet-1k"};
	struct isc_boot_spec s = {id,       name, "burst", 3, 0,     command, image,
	                          datasets, 1,    NODES,   8, 29500, "1g"};
	return s;
}

static char *slurp(const char *path)
{
	struct isc_buf b;
	char chunk[4096];
	size_t got;
	FILE *f = fopen(path, "r");
	isc_buf_init(&b, 0);
	if (!f)
		return NULL;
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		isc_buf_append(&b, chunk, got);
	fclose(f);
	return isc_buf_detach(&b);
}

/* Follows until every rank exited; returns rank 0's code. */
static int follow_all(const struct isc_boot_spec *s, const char *out_dir)
{
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_err err;
	int code = -1, done = 0;

	assert_int_equal(isc_launch_follow_start(s, targets, NODES, &o, out_dir, &f, &err), 0);
	for (int t = 0; t < 300 && done < NODES; t++) {
		done = 0;
		for (int r = 0; r < NODES; r++) {
			int c;
			if (isc_launch_follow_rank_exit(f, r, &c)) {
				done++;
				if (r == 0)
					code = c;
			}
		}
		usleep(100 * 1000);
	}
	assert_int_equal(done, NODES);
	isc_launch_follow_free(f);
	return code;
}

static void test_six_node_boot_environment(void **state)
{
	struct isc_boot_spec s =
	    spec("exp_env", "resnet", "env | sort; echo done", "pytorch/pytorch:latest");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	char out[256], path[300];
	int64_t t0;
	(void)state;
	if (getuid() != 0)
		skip();
	t0 = isc_monotonic_ms();
	assert_int_equal(isc_launcher_boot(&s, targets, NODES, &o, &err), 0);
	printf("# 6-node boot took %lld ms\n", (long long)(isc_monotonic_ms() - t0));
	snprintf(out, sizeof(out), "%s/out-env", root);
	assert_int_equal(follow_all(&s, out), 0);
	for (int r = 0; r < NODES; r++) {
		char want[128], *log;
		snprintf(path, sizeof(path), "%s/rank_%d.txt", out, r);
		log = slurp(path);
		assert_non_null(log);
		/* A leading newline, so every variable can be matched as a whole line. */
		{
			char *padded;
			assert_int_not_equal(asprintf(&padded, "\n%s", log), -1);
			free(log);
			log = padded;
		}
		snprintf(want, sizeof(want), "\nRANK=%d\n", r);
		assert_non_null(strstr(log, want));
		assert_non_null(strstr(log, "\nNNODES=6\n"));
		assert_non_null(strstr(log, "\nN_PROC=8\n"));
		assert_non_null(strstr(log, "\nMASTER_ADDR=127.0.88.1\n"));
		assert_non_null(strstr(log, "\nMASTER_PORT=29500\n"));
		assert_non_null(strstr(
		    log, "IP_TO_RANK_MAPPING={\"127.0.88.1\":0,\"127.0.88.2\":1,\"127.0.88.3\":2,"
		         "\"127.0.88.4\":3,\"127.0.88.5\":4,\"127.0.88.6\":5}\n"));
		assert_non_null(strstr(log, "\nSTRONG_EXPERIMENT_ID=exp_env\n"));
		assert_non_null(strstr(log, "\nSTRONG_EXPERIMENT_NAME=resnet\n"));
		assert_non_null(strstr(log, "\nSTRONG_COMPUTE_MODE=burst\n"));
		assert_non_null(strstr(log, "\nSTRONG_CYCLE_COUNT=3\n"));
		assert_non_null(strstr(log, "\nSTRONG_CYCLE_TIME_MS=0\n"));
		assert_non_null(strstr(log, "\nOUTPUT_PATH=/mnt/checkpoints\n"));
		assert_non_null(strstr(log, "\nCHECKPOINT_ARTIFACT_PATH=/mnt/checkpoints\n"));
		assert_non_null(strstr(log, "\nCRUD_ARTIFACT_PATH=/mnt/crud\n"));
		assert_non_null(strstr(log, "\nLOSSY_ARTIFACT_PATH=/mnt/lossy\n"));
		assert_non_null(strstr(log, "done\n"));
		free(log);
	}
	isc_launcher_stop(&s, targets, NODES, &o, 1);
}

static void test_hostile_strings_stay_inert(void **state)
{
	const char *name = "x'; touch /tmp/isc-pwned-name; echo '$(touch /tmp/isc-pwned-sub)`touch "
	                   "/tmp/isc-pwned-bt`";
	const char *cmd = "printf '%s\\n' \"$STRONG_EXPERIMENT_NAME\"; echo \"q'uote\"; echo "
	                  "$(echo sub); echo `echo bt`;"
	                  " echo a; echo b";
	struct isc_boot_spec s = spec("exp_hostile", name, cmd, "img");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	char out[256], path[300], *log;
	(void)state;
	if (getuid() != 0)
		skip();
	unlink("/tmp/isc-pwned-name");
	unlink("/tmp/isc-pwned-sub");
	unlink("/tmp/isc-pwned-bt");
	assert_int_equal(isc_launcher_boot(&s, targets, 2, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-hostile", root);
	s.nnodes = 2;
	{
		struct isc_launch_follow *f;
		int code = -1;
		assert_int_equal(isc_launch_follow_start(&s, targets, 2, &o, out, &f, &err), 0);
		for (int t = 0; t < 200 && !isc_launch_follow_rank_exit(f, 0, &code); t++)
			usleep(100 * 1000);
		isc_launch_follow_free(f);
		assert_int_equal(code, 0);
	}
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	log = slurp(path);
	assert_non_null(log);
	/* The name arrives byte for byte; the command runs as written, in the container's bash. */
	assert_non_null(strstr(log, name));
	assert_non_null(strstr(log, "q'uote\nsub\nbt\na\nb\n"));
	free(log);
	assert_int_not_equal(access("/tmp/isc-pwned-name", F_OK), 0);
	assert_int_not_equal(access("/tmp/isc-pwned-sub", F_OK), 0);
	assert_int_not_equal(access("/tmp/isc-pwned-bt", F_OK), 0);
	isc_launcher_stop(&s, targets, 2, &o, 1);
}

static void collect(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (!stderr_stream)
		isc_buf_append(ctx, data, len);
}

static size_t count_containers(int i, const char *experiment_id)
{
	struct isc_ssh_target t = {ips[i], PORT, "root", key_path, instance_ids[i]};
	struct isc_ssh *ssh;
	struct isc_err err;
	struct isc_buf b, cmd;
	size_t n = 0;
	int status;

	isc_buf_init(&b, 0);
	isc_buf_init(&cmd, 0);
	assert_int_equal(isc_ssh_connect(&t, isc_monotonic_ms() + 5000, pin, NULL, &ssh, &err), 0);
	isc_buf_printf(&cmd, "docker ps -a --filter name=isc-%s- --format '{{.Names}}'",
	               experiment_id);
	assert_int_equal(
	    isc_ssh_exec(ssh, isc_buf_cstr(&cmd), NULL, 0, 10000, collect, &b, NULL, &status, &err),
	    0);
	isc_buf_cleanup(&cmd);
	isc_ssh_free(ssh);
	for (size_t k = 0; k < b.len; k++)
		n += b.data[k] == '\n';
	isc_buf_cleanup(&b);
	return n;
}

static void test_failed_pull_rolls_back_every_node(void **state)
{
	struct isc_boot_spec s = spec("exp_pull", "pull", "sleep 60", "registry.example/img:1");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	char path[300];
	FILE *f;
	(void)state;
	if (getuid() != 0)
		skip();
	/* Only rank 3's node cannot pull the image. */
	snprintf(path, sizeof(path), "%s/n3/pull-fail", root);
	f = fopen(path, "w");
	fprintf(f, "registry.example/img:1\n");
	fclose(f);
	assert_int_equal(isc_launcher_boot(&s, targets, NODES, &o, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "rank 3"));
	assert_non_null(strstr(err.msg, "docker pull"));
	unlink(path);
	for (int i = 0; i < NODES; i++)
		assert_int_equal(count_containers(i, "exp_pull"), 0);
}

static void test_unreachable_node_fails_after_deadline(void **state)
{
	struct isc_node_target t[2] = {targets[0],
	                               {1, "127.0.88.99", PORT, "127.0.88.99", "i-gone"}};
	struct isc_boot_spec s = spec("exp_gone", "gone", "sleep 60", "img");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	int64_t t0 = isc_monotonic_ms(), took;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 2;
	o.connect_deadline_ms = 1500;
	assert_int_equal(isc_launcher_boot(&s, t, 2, &o, &err), ISC_ETRANSIENT);
	took = isc_monotonic_ms() - t0;
	assert_non_null(strstr(err.msg, "rank 1"));
	assert_non_null(strstr(err.msg, "unreachable"));
	assert_true(took >= 1400);
	/* The reachable node is left without a container. */
	assert_int_equal(count_containers(0, "exp_gone"), 0);
}

static void test_changed_host_key_is_refused(void **state)
{
	struct isc_boot_spec s = spec("exp_key", "key", "true", "img");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	assert_int_equal(isc_launcher_boot(&s, &targets[5], 1, &o, &err), 0); /* pinned by now */
	isc_launcher_stop(&s, &targets[5], 1, &o, 0);
	sh("tests/mocks/node/node-down %s/n5 && rm -f %s/n5/hostkey %s/n5/hostkey.pub", root, root,
	   root);
	assert_int_equal(node_up(5), 0);
	assert_int_equal(isc_launcher_boot(&s, &targets[5], 1, &o, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "changed"));
}

static void test_shell_quote(void **state)
{
	static const char *const hostile[] = {"plain", "it's",        "$(id)", "`id`",
	                                      "a\nb",  "a; rm -rf /", "\"\\'", ""};
	(void)state;
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		struct isc_buf cmd, q;
		char out[256] = "";
		FILE *p;
		size_t got;
		isc_buf_init(&cmd, 0);
		isc_buf_init(&q, 0);
		isc_shell_quote(&q, hostile[i]);
		isc_buf_printf(&cmd, "printf %%s %s", isc_buf_cstr(&q));
		p = popen(isc_buf_cstr(&cmd), "r");
		got = fread(out, 1, sizeof(out) - 1, p);
		out[got] = '\0';
		pclose(p);
		assert_string_equal(out, hostile[i]);
		isc_buf_cleanup(&cmd);
		isc_buf_cleanup(&q);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shell_quote),
	    cmocka_unit_test(test_six_node_boot_environment),
	    cmocka_unit_test(test_hostile_strings_stay_inert),
	    cmocka_unit_test(test_failed_pull_rolls_back_every_node),
	    cmocka_unit_test(test_unreachable_node_fails_after_deadline),
	    cmocka_unit_test(test_changed_host_key_is_refused),
	};
	return cmocka_run_group_tests_name("launcher", tests, group_setup, group_teardown);
}
