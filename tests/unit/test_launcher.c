/*
 * The launcher against real sshd processes (tests/mocks/node) on loopback
 * addresses, each with its own host key and the docker stand-in: a 6-node
 * boot with the exact environment per rank, logs into rank_N.txt, host-key
 * pinning, an unreachable node, a failing pull rolled back on every node,
 * and hostile strings that stay inert; cluster keys on disk, host keys pinned
 * in a real store, per-node boot reports, followers and stop with grace.
 * Needs root (sshd in mount namespaces); skipped otherwise.
 */
#include "common/buf.h"
#include "common/clock.h"
#include "artifacts/unpack.h"
#include "keys/vault.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"
#include "launcher/shellquote.h"
#include "store/store.h"
#include "store/store_hostkeys.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_BY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_BY_ASAN 1
#endif
#endif
#ifdef HEAP_BY_ASAN
/* libasan's own count of live heap bytes (sanitizer/allocator_interface.h, not always
 * installed); under ASan, mallinfo2 does not see its allocator. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define NODES 6
/*
 * The nodes' sshd port: per process, so a second run on the same machine (or
 * the sshds of a run that was killed before its teardown) cannot hold it.
 */
static int node_port;

static char root[64];
static char key_path[256];
static char pub_path[256];
static char ips[NODES][32];
static char instance_ids[NODES][32];
static struct isc_node_target targets[NODES];

/* Host keys are pinned in a real store under root, one connection per check (as the broker). */
static int pin(void *ctx, const char *target, const char *type, const char *sha,
               struct isc_err *err)
{
	(void)ctx;
	return isc_store_hostkey_check_home(root, target, type, sha, err);
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
	return sh("tests/mocks/node/node-up %s/n%d %s %d %s >/dev/null 2>&1", root, i, ips[i],
	          node_port, pub_path);
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
	{
		struct isc_store *st;
		if (isc_store_open(root, 1, &st, &err))
			return -1;
		isc_store_free(st);
	}
	if (isc_cluster_key_create(root, "cl_test", &pub, &err))
		return -1;
	snprintf(key_path, sizeof(key_path), "%s/keys/cl_test", root);
	snprintf(pub_path, sizeof(pub_path), "%s/pub", root);
	f = fopen(pub_path, "w");
	fprintf(f, "%s\n", pub);
	fclose(f);
	free(pub);
	node_port = 20000 + (int)(getpid() % 20000);
	for (int i = 0; i < NODES; i++) {
		snprintf(ips[i], sizeof(ips[i]), "127.0.88.%d", i + 1);
		snprintf(instance_ids[i], sizeof(instance_ids[i]), "i-test%d", i);
		targets[i] =
		    (struct isc_node_target){i, ips[i], node_port, ips[i], instance_ids[i]};
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

/* ---- presigned URLs never in a node's argv (issue 42) ---- */

/*
 * A stand-in for S3 on 127.0.0.1 that holds its first request until the test has
 * looked at every process's argv, then answers each request 403 (so the node's
 * curl -f fails and the boot ends with the dataset's error).
 */
struct held_s3 {
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int connected, scanned, stop;
	char request[512];
};

static void *held_s3_serve(void *arg)
{
	struct held_s3 *h = arg;
	static const char reply[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
	                            "Connection: close\r\n\r\n";
	for (;;) {
		struct pollfd p = {h->fd, POLLIN, 0};
		ssize_t n;
		int c;
		pthread_mutex_lock(&h->lock);
		if (h->stop) {
			pthread_mutex_unlock(&h->lock);
			return NULL;
		}
		pthread_mutex_unlock(&h->lock);
		if (poll(&p, 1, 100) <= 0 || (c = accept(h->fd, NULL, NULL)) < 0)
			continue;
		n = read(c, h->request, sizeof(h->request) - 1);
		pthread_mutex_lock(&h->lock);
		if (!h->connected) {
			h->request[n > 0 ? n : 0] = 0;
			h->connected = 1;
			pthread_cond_broadcast(&h->cond);
			while (!h->scanned)
				pthread_cond_wait(&h->cond, &h->lock);
		}
		pthread_mutex_unlock(&h->lock);
		if (write(c, reply, sizeof(reply) - 1) < 0)
			fprintf(stderr, "held_s3: write failed\n");
		close(c);
	}
}

struct boot_job {
	struct isc_boot_spec spec;
	struct isc_launcher_opts o;
	struct isc_err err;
	int rc;
};

static void *boot_in_thread(void *arg)
{
	struct boot_job *b = arg;
	b->rc = isc_launcher_boot(&b->spec, targets, 1, &b->o, &b->err);
	return NULL;
}

/* How many processes' argv hold needle (as one of its arguments or across two). */
static int argv_holding(const char *needle)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], buf[65536];
		size_t len;
		FILE *f;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < len; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[len] = 0;
		n += strstr(buf, needle) != NULL;
	}
	closedir(d);
	return n;
}

/*
 * A burst node's dataset fetch, caught mid-request: no process on the machine (the
 * node's shell that runs the boot script, curl, xargs) has the presigned URL's
 * signature in its argv, where ps shows it to every user of the node. The boot
 * script still is in the shell's argv: the scan saw the right moment.
 */
static void test_presigned_urls_stay_out_of_argv(void **state)
{
	static const char *const ids[] = {"sig-ds"};
	struct held_s3 h = {.fd = -1};
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct boot_job b = {0};
	pthread_t server, boot;
	char url[256];
	int in_argv, scripts;
	(void)state;
	if (getuid() != 0)
		skip();
	pthread_mutex_init(&h.lock, NULL);
	pthread_cond_init(&h.cond, NULL);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	h.fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(h.fd >= 0);
	assert_int_equal(bind(h.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(h.fd, 8), 0);
	assert_int_equal(getsockname(h.fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(url, sizeof(url),
	         "http://127.0.0.1:%d/bucket/obj.bin?X-Amz-Credential=AKIDPRESIGNTEST&"
	         "X-Amz-Signature=5ec7e75160b4a1c0de42",
	         ntohs(a.sin_port));
	{
		struct isc_boot_dataset_file file = {
		    url, "\"e1\"",
		    "0000000000000000000000000000000000000000000000"
		    "000000000000000000",
		    "obj.bin", 0};
		struct isc_boot_dataset ds = {"@7/sig-ds-1", &file, 1, 0};
		b.spec = spec("exp_presign", "presign", "true", "img");
		b.spec.nnodes = 1;
		b.spec.dataset_ids = ids;
		b.spec.n_datasets = 1;
		b.spec.dataset_fetch = &ds;
		b.o = opts();
		sh("rm -rf %s/n0/data/.isc", root);
		assert_int_equal(pthread_create(&server, NULL, held_s3_serve, &h), 0);
		assert_int_equal(pthread_create(&boot, NULL, boot_in_thread, &b), 0);
		/* Up to 30 s for the node's curl to connect (the boot's connect and fabric check).
		 */
		for (int t = 0, up = 0; t < 300 && !up; t++) {
			pthread_mutex_lock(&h.lock);
			up = h.connected;
			pthread_mutex_unlock(&h.lock);
			if (!up)
				usleep(100 * 1000);
		}
		/* The node's curl is connected and waiting: every process, as ps sees it. */
		in_argv = argv_holding("5ec7e75160b4a1c0de42");
		scripts = argv_holding("/data/.isc/");
		pthread_mutex_lock(&h.lock);
		h.scanned = 1;
		pthread_cond_broadcast(&h.cond);
		pthread_mutex_unlock(&h.lock);
		assert_int_equal(pthread_join(boot, NULL), 0);
		pthread_mutex_lock(&h.lock);
		h.stop = 1;
		pthread_mutex_unlock(&h.lock);
		assert_int_equal(pthread_join(server, NULL), 0);
		isc_launcher_stop(&b.spec, targets, 1, &b.o, 0);
	}
	close(h.fd);
	printf("# mid-fetch: %d process(es) with the URL's signature in argv, %d with the boot "
	       "script\n",
	       in_argv, scripts);
	assert_true(h.connected);
	/* the request did carry it: over the socket, not in argv */
	assert_non_null(strstr(h.request, "X-Amz-Signature=5ec7e75160b4a1c0de42"));
	assert_true(scripts >= 1);
	assert_int_equal(in_argv, 0);
	assert_int_not_equal(b.rc, 0);
	assert_non_null(strstr(b.err.msg, "cannot fetch object 1"));
}

static void collect(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (!stderr_stream)
		isc_buf_append(ctx, data, len);
}

/* Containers of an experiment on node i, running or not (pin NULL: no host-key check). */
static size_t count_containers_as(int i, const char *experiment_id, isc_ssh_hostkey_fn check)
{
	struct isc_ssh_target t = {ips[i], node_port, "root", key_path, instance_ids[i], NULL};
	struct isc_ssh *ssh;
	struct isc_err err;
	struct isc_buf b, cmd;
	size_t n = 0;
	int status;

	isc_buf_init(&b, 0);
	isc_buf_init(&cmd, 0);
	assert_int_equal(isc_ssh_connect(&t, isc_monotonic_ms() + 5000, check, NULL, &ssh, &err),
	                 0);
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

static size_t count_containers(int i, const char *experiment_id)
{
	return count_containers_as(i, experiment_id, pin);
}

/* The sshd sessions of node i: the listener's children (one per connection). */
static size_t sshd_sessions(int i, pid_t *out, size_t cap)
{
	char path[300];
	FILE *f;
	long listener = 0;
	size_t n = 0;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/n%d/sshd.pid", root, i);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%ld", &listener) != 1)
		listener = 0;
	fclose(f);
	if (listener <= 0 || !(d = opendir("/proc")))
		return 0;
	while ((e = readdir(d)) != NULL && n < cap) {
		char stat[600], *close_paren;
		long ppid = 0;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fgets(stat, sizeof(stat), f) && (close_paren = strrchr(stat, ')')) &&
		    sscanf(close_paren + 1, " %*c %ld", &ppid) == 1 && ppid == listener)
			out[n++] = (pid_t)atol(e->d_name);
		fclose(f);
	}
	closedir(d);
	return n;
}

struct frozen {
	int node;
	pid_t pids[16];
	size_t n;
};

/* A host-key check that accepts, then freezes the node's sshd session: the login that
 * follows gets no answer (a node too loaded to answer in time). */
static int accept_then_freeze(void *ctx, const char *target, const char *type, const char *sha,
                              struct isc_err *err)
{
	struct frozen *fz = ctx;
	(void)target, (void)type, (void)sha, (void)err;
	fz->n = sshd_sessions(fz->node, fz->pids, 16);
	for (size_t k = 0; k < fz->n; k++)
		kill(fz->pids[k], SIGSTOP);
	return 0;
}

/*
 * A login the node does not answer in time is no refused key: ISC_ETRANSIENT (retried
 * until the deadline), never ISC_EAUTH (which sent a burst back to waiting).
 */
static void test_silent_login_is_not_a_refused_key(void **state)
{
	struct isc_ssh_target t = {ips[4], node_port, "root", key_path, NULL, NULL};
	struct frozen fz = {.node = 4};
	struct isc_ssh *ssh = NULL;
	struct isc_err err;
	int rc;
	(void)state;
	if (getuid() != 0)
		skip();
	isc_err_clear(&err);
	rc = isc_ssh_connect(&t, isc_monotonic_ms() + 2000, accept_then_freeze, &fz, &ssh, &err);
	for (size_t k = 0; k < fz.n; k++) {
		kill(fz.pids[k], SIGCONT);
		kill(fz.pids[k], SIGTERM);
	}
	assert_true(fz.n > 0);
	assert_int_equal(rc, ISC_ETRANSIENT);
	assert_non_null(strstr(err.msg, "no answer to the login"));
	assert_null(strstr(err.msg, "refused"));
	/* The node itself is fine: the next login goes through. */
	assert_int_equal(isc_ssh_connect(&t, isc_monotonic_ms() + 5000, NULL, NULL, &ssh, &err), 0);
	isc_ssh_free(ssh);
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
	                               {1, "127.0.88.99", node_port, "127.0.88.99", "i-gone"}};
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

static struct isc_store *store(void)
{
	struct isc_store *st;
	struct isc_err err;
	assert_int_equal(isc_store_open(root, 0, &st, &err), 0);
	return st;
}

static void test_changed_host_key_is_refused(void **state)
{
	/* Node 5 as a one-node cluster (its own rank 0). */
	struct isc_node_target one = {0, ips[5], node_port, ips[5], instance_ids[5]};
	struct isc_boot_spec s = spec("exp_key", "key", "true", "img");
	struct isc_launcher_opts o = opts();
	struct isc_boot_result res;
	struct isc_hostkey old;
	struct isc_store *st;
	struct isc_err err;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	assert_int_equal(isc_launcher_boot_nodes(&s, &one, 1, &o, &res, &err), 0);
	assert_int_equal(strlen(res.key_sha256), 64);
	assert_string_equal(res.key_type, "ssh-ed25519");
	isc_launcher_stop(&s, &one, 1, &o, 0);
	st = store();
	assert_int_equal(isc_store_hostkey_get(st, instance_ids[5], &old, &err), 0);
	assert_string_equal(old.sha256, res.key_sha256);

	/* The node comes back with a new host key: refused, naming host and both keys. */
	sh("tests/mocks/node/node-down %s/n5 && rm -f %s/n5/hostkey %s/n5/hostkey.pub", root, root,
	   root);
	assert_int_equal(node_up(5), 0);
	assert_int_equal(isc_launcher_boot_nodes(&s, &one, 1, &o, &res, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "changed"));
	assert_non_null(strstr(err.msg, instance_ids[5]));
	assert_non_null(strstr(err.msg, ips[5]));
	assert_non_null(strstr(err.msg, old.sha256));
	assert_non_null(strstr(err.msg, res.key_sha256));
	assert_string_not_equal(res.key_sha256, old.sha256);
	assert_int_equal(res.started, 0);
	assert_int_equal(count_containers_as(5, "exp_key", NULL), 0);

	/* Once the operator forgets the pin, the new key is pinned on the next boot. */
	assert_int_equal(isc_store_hostkey_forget(st, instance_ids[5], &err), 0);
	assert_int_equal(isc_launcher_boot_nodes(&s, &one, 1, &o, &res, &err), 0);
	isc_launcher_stop(&s, &one, 1, &o, 0);
	isc_hostkey_cleanup(&old);
	assert_int_equal(isc_store_hostkey_get(st, instance_ids[5], &old, &err), 0);
	assert_string_equal(old.sha256, res.key_sha256);
	isc_hostkey_cleanup(&old);
	isc_store_free(st);
}

/* Without an instance id the key is pinned under host:port. */
static void test_pin_without_instance_id(void **state)
{
	struct isc_node_target one = {0, ips[4], node_port, ips[4], NULL};
	struct isc_boot_spec s = spec("exp_hp", "hp", "true", "img");
	struct isc_launcher_opts o = opts();
	struct isc_hostkey k;
	struct isc_store *st;
	struct isc_err err;
	char target[64];
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	assert_int_equal(isc_launcher_boot(&s, &one, 1, &o, &err), 0);
	isc_launcher_stop(&s, &one, 1, &o, 0);
	st = store();
	snprintf(target, sizeof(target), "%s:%d", ips[4], node_port);
	assert_int_equal(isc_store_hostkey_get(st, target, &k, &err), 0);
	assert_string_equal(k.key_type, "ssh-ed25519");
	isc_hostkey_cleanup(&k);
	isc_store_free(st);
}

/* A line break in a value cannot smuggle a variable into the env file. */
static void test_newline_in_name_stays_one_value(void **state)
{
	struct isc_node_target one = targets[0];
	const char *name = "two\nRANK=99\nlines";
	struct isc_boot_spec s =
	    spec("exp_nl", name, "printf '[%s]|%s|' \"$STRONG_EXPERIMENT_NAME\" \"$RANK\"", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_err err;
	char out[256], path[300], *log, want[128];
	int code = -1;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	assert_int_equal(isc_launcher_boot(&s, &one, 1, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-nl", root);
	assert_int_equal(isc_launch_follow_start(&s, &one, 1, &o, out, &f, &err), 0);
	for (int t = 0; t < 200 && !isc_launch_follow_rank_exit(f, 0, &code); t++)
		usleep(50 * 1000);
	isc_launch_follow_free(f);
	assert_int_equal(code, 0);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	log = slurp(path);
	snprintf(want, sizeof(want), "[%s]|0|", name);
	assert_string_equal(log, want);
	free(log);
	isc_launcher_stop(&s, &one, 1, &o, 0);
}

/* Output reaches rank_N.txt while the rank runs; exits are polled; stop honours the grace. */
static void test_follow_streams_polls_and_stops(void **state)
{
	struct isc_boot_spec s =
	    spec("exp_follow", "follow",
	         "trap 'echo got-term; exit 7' TERM; echo started-$RANK; "
	         "if [ \"$RANK\" = 1 ]; then exit 3; fi; while true; do sleep 0.1; done",
	         "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_rank_exit exits[4];
	struct isc_err err;
	char out[256], path[300], *log = NULL;
	size_t n = 0;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 2;
	assert_int_equal(isc_launcher_boot(&s, targets, 2, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-follow", root);
	assert_int_equal(isc_launch_follow_start(&s, targets, 2, &o, out, &f, &err), 0);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	/* Rank 0 still runs, and its first line is home already. */
	for (int t = 0; t < 100; t++) {
		free(log);
		log = slurp(path);
		n = isc_launch_follow_poll(f, exits, 4);
		if (log && strstr(log, "started-0\n") && n == 1)
			break;
		usleep(50 * 1000);
	}
	assert_non_null(log);
	assert_string_equal(log, "started-0\n");
	free(log);
	assert_int_equal(n, 1);
	assert_int_equal(exits[0].rank, 1);
	assert_int_equal(exits[0].code, 3);
	/* Stopping with a grace lets the trap run; the follower sees its last words. */
	isc_launcher_stop(&s, targets, 1, &o, 5);
	for (int t = 0; t < 100; t++) {
		log = slurp(path);
		if (log && strstr(log, "got-term"))
			break;
		free(log);
		log = NULL;
		usleep(50 * 1000);
	}
	assert_non_null(log);
	/* (bash may report its killed `sleep` in between: the stand-in signals the group) */
	assert_int_equal(strncmp(log, "started-0\n", 10), 0);
	assert_non_null(strstr(log, "got-term\n"));
	free(log);
	isc_launch_follow_free(f);
	assert_int_equal(count_containers(0, "exp_follow"), 0);
	isc_launcher_stop(&s, targets, 2, &o, 0);
}

/* A container nobody can see any more is reported once, with code -1. */
static void test_follow_reports_a_vanished_container(void **state)
{
	struct isc_boot_spec s = spec("exp_never_booted", "none", "true", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_rank_exit ex;
	struct isc_err err;
	char out[256];
	size_t n = 0;
	(void)state;
	if (getuid() != 0)
		skip();
	snprintf(out, sizeof(out), "%s/out-none", root);
	assert_int_equal(isc_launch_follow_start(&s, targets, 1, &o, out, &f, &err), 0);
	for (int t = 0; t < 200 && !(n = isc_launch_follow_poll(f, &ex, 1)); t++)
		usleep(50 * 1000);
	assert_int_equal(n, 1);
	assert_int_equal(ex.code, -1);
	isc_launch_follow_free(f);
}

/* One node fails fast (pull); a node that never answers gives up at once, not at its deadline. */
static void test_failure_cancels_nodes_still_connecting(void **state)
{
	struct isc_node_target t[3] = {
	    targets[0], targets[1], {2, "127.0.88.98", node_port, "127.0.88.98", "i-late"}};
	struct isc_boot_spec s = spec("exp_cancel", "c", "sleep 60", "img-does-not-exist:1");
	struct isc_launcher_opts o = opts();
	struct isc_boot_result res[3];
	struct isc_err err;
	int64_t t0 = isc_monotonic_ms();
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 3;
	o.connect_deadline_ms = 20000;
	assert_int_equal(isc_launcher_boot_nodes(&s, t, 3, &o, res, &err), ISC_EINVALID);
	assert_true(isc_monotonic_ms() - t0 < 10000);
	assert_non_null(strstr(err.msg, "docker pull"));
	assert_null(strstr(err.msg, "rank 2"));
	assert_int_equal(res[2].rc, ISC_ETRANSIENT);
	assert_non_null(strstr(res[2].err.msg, "cancelled"));
	assert_int_equal(res[2].connect_ms, -1);
	/*
	 * Each of the two nodes failed its pull on its own, or had it cancelled by the
	 * other's failure (a pull may last an hour: nobody waits for it); at least one
	 * failed on its own, and both were rolled back.
	 */
	int own = 0;
	for (int i = 0; i < 2; i++) {
		if (res[i].rc == ISC_EINVALID)
			own++;
		else if (res[i].rc != ISC_ETRANSIENT || !strstr(res[i].err.msg, "cancelled"))
			fail_msg("rank %d: %d %s", i, res[i].rc, res[i].err.msg);
		assert_int_equal(res[i].rolled_back, 1);
		assert_int_equal(count_containers(i, "exp_cancel"), 0);
	}
	assert_true(own >= 1);
}

/* A boot repeated on a node (after a crash) replaces the container left from the first. */
static void test_repeated_boot_replaces_the_container(void **state)
{
	struct isc_boot_spec s = spec("exp_again", "again", "sleep 60", "img");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	assert_int_equal(count_containers(0, "exp_again"), 1);
	isc_launcher_stop(&s, targets, 1, &o, 0);
	assert_int_equal(count_containers(0, "exp_again"), 0);
}

/*
 * A boot of some nodes of a gang (a replacement's kept nodes while its new node boots):
 * only those start, and their environment still names every rank of the gang.
 */
static void test_boot_of_some_nodes_names_the_whole_gang(void **state)
{
	struct isc_boot_spec s = spec("exp_some", "some", "env | sort; sleep 60", "img");
	struct isc_launcher_opts o = opts();
	struct isc_boot_result res[3];
	struct isc_err err;
	const int only[3] = {0, 1, 1}; /* rank 0 (the new node) is not up yet */
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 3;
	o.only = only;
	assert_int_equal(isc_launcher_boot_nodes(&s, targets, 3, &o, res, &err), 0);
	assert_int_equal(res[0].started, 0);
	assert_int_equal(res[0].connect_ms, -1); /* never logged in */
	assert_int_equal(res[1].started, 1);
	assert_int_equal(res[2].started, 1);
	assert_int_equal(count_containers(0, "exp_some"), 0);
	assert_int_equal(count_containers(1, "exp_some"), 1);
	assert_int_equal(count_containers(2, "exp_some"), 1);
	{
		char out[256], path[300], *log;
		struct isc_launch_follow *f;
		snprintf(out, sizeof(out), "%s/out-some", root);
		/* Follow ranks 1 and 2 only: their logs hold the gang's environment. */
		assert_int_equal(isc_launch_follow_start(&s, targets + 1, 2, &o, out, &f, &err), 0);
		snprintf(path, sizeof(path), "%s/rank_2.txt", out);
		for (int t = 0; t < 100; t++) {
			log = slurp(path);
			if (log && strstr(log, "STRONG_EXPERIMENT_ID"))
				break;
			free(log);
			log = NULL;
			usleep(100 * 1000);
		}
		isc_launch_follow_free(f);
		assert_non_null(log);
		assert_non_null(strstr(log, "\nRANK=2\n"));
		assert_non_null(strstr(log, "\nNNODES=3\n"));
		assert_non_null(strstr(log, "\nMASTER_ADDR=127.0.88.1\n"));
		assert_non_null(strstr(
		    log,
		    "IP_TO_RANK_MAPPING={\"127.0.88.1\":0,\"127.0.88.2\":1,\"127.0.88.3\":2}\n"));
		free(log);
	}
	/* Then the last node: a boot of it alone leaves the others' containers running. */
	{
		const int rest[3] = {1, 0, 0};
		o.only = rest;
		assert_int_equal(isc_launcher_boot_nodes(&s, targets, 3, &o, res, &err), 0);
		assert_int_equal(res[0].started, 1);
		for (int i = 0; i < 3; i++)
			assert_int_equal(count_containers(i, "exp_some"), 1);
	}
	o.only = NULL;
	isc_launcher_stop(&s, targets, 3, &o, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(count_containers(i, "exp_some"), 0);
}

static void test_boot_refuses_bad_node_lists(void **state)
{
	struct isc_node_target t[2] = {targets[1], targets[2]}; /* ranks 1 and 2: no rank 0 */
	struct isc_boot_spec s = spec("exp_bad", "bad", "true", "img");
	struct isc_launcher_opts o = opts();
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_launcher_boot(&s, t, 2, &o, &err), ISC_EINVALID);
	t[0] = targets[0];
	t[1] = targets[0];
	assert_int_equal(isc_launcher_boot(&s, t, 2, &o, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "twice"));
	assert_int_equal(isc_launcher_boot(&s, t, 0, &o, &err), ISC_EINVALID);
}

static void test_cluster_key_files(void **state)
{
	char dir[300], *pub = NULL, *pub2 = NULL, *path;
	struct isc_err err;
	struct stat sb;
	(void)state;
	if (getuid() != 0)
		skip(); /* root was not created */
	assert_int_equal(isc_cluster_key_create(root, "cl_files", &pub, &err), 0);
	assert_int_equal(strncmp(pub, "ecdsa-sha2-nistp256 AAAA", 24), 0);
	assert_non_null(strstr(pub, " isc-cl_files"));
	assert_null(strchr(pub, '\n'));
	path = isc_cluster_key_path(root, "cl_files");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	snprintf(dir, sizeof(dir), "%s/keys", root);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(isc_cluster_key_public(root, "cl_files", &pub2, &err), 0);
	assert_string_equal(pub, pub2);
	free(pub2);
	/* Never replaced, never a path outside keys/. */
	assert_int_equal(isc_cluster_key_create(root, "cl_files", &pub2, &err), ISC_ECONFLICT);
	assert_int_equal(isc_cluster_key_create(root, "../escape", &pub2, &err), ISC_EINVALID);
	assert_null(isc_cluster_key_path(root, "a/b"));
	isc_cluster_key_delete(root, "cl_files");
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(isc_cluster_key_public(root, "cl_files", &pub2, &err), ISC_ENOTFOUND);
	free(path);
	free(pub);
}

/* The pid of the `docker logs -f` run for a container on a node, or 0 (our own process). */
static long logs_pid(const char *container)
{
	char cmd[256], line[64] = "";
	FILE *p;
	snprintf(cmd, sizeof(cmd), "pgrep -f 'docker logs -f %s$' | head -n 1", container);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	pclose(p);
	return atol(line);
}

/* Waits until the log holds want (or 10 s); returns the log (caller frees). */
static char *wait_log(const char *path, const char *want)
{
	char *log = NULL;
	for (int t = 0; t < 200; t++) {
		free(log);
		log = slurp(path);
		if (log && strstr(log, want))
			break;
		usleep(50 * 1000);
	}
	return log;
}

/* A dropped `docker logs -f` replays from the start; the file goes on where it ended. */
static void test_log_resumes_after_a_reconnect(void **state)
{
	struct isc_boot_spec s =
	    spec("exp_reconn", "reconn",
	         "echo one; echo two >&2; while [ ! -e /mnt/crud/go ]; do sleep 0.1; done; "
	         "echo three",
	         "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_err err;
	char out[256], path[300], go[300], *log;
	long first;
	int code = -1;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	snprintf(go, sizeof(go), "%s/n0/mnt/crud/go", root);
	unlink(go);
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-reconn", root);
	assert_int_equal(isc_launch_follow_start(&s, targets, 1, &o, out, &f, &err), 0);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	log = wait_log(path, "two\n");
	assert_non_null(strstr(log, "one\n"));
	free(log);
	/* Cut the stream under the follower, and let the container finish meanwhile: the
	 * follower fetches the logs again, docker replays them all, and only what the file
	 * lacks is added. */
	first = logs_pid("isc-exp_reconn-r0");
	assert_true(first > 0);
	assert_int_equal(kill((pid_t)first, SIGKILL), 0);
	close(open(go, O_WRONLY | O_CREAT, 0600));
	for (int t = 0; t < 200 && !isc_launch_follow_rank_exit(f, 0, &code); t++)
		usleep(50 * 1000);
	isc_launch_follow_free(f);
	assert_int_equal(code, 0);
	log = slurp(path);
	/* Each line once: nothing lost, nothing repeated (stdout and stderr each resumed). */
	assert_non_null(log);
	assert_int_equal(strlen(log), strlen("one\ntwo\nthree\n"));
	assert_non_null(strstr(log, "one\n"));
	assert_non_null(strstr(log, "two\n"));
	assert_non_null(strstr(log, "three\n"));
	free(log);
	isc_launcher_stop(&s, targets, 1, &o, 0);
}

/* A reconnect after the container was removed keeps every line it printed. */
static void test_log_survives_the_container(void **state)
{
	struct isc_boot_spec s =
	    spec("exp_gone", "gone", "for i in 1 2 3; do echo line-$i; done; sleep 60", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_rank_exit ex;
	struct isc_err err;
	char out[256], path[300], *log;
	size_t n = 0;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-gone", root);
	assert_int_equal(isc_launch_follow_start(&s, targets, 1, &o, out, &f, &err), 0);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	free(wait_log(path, "line-3\n"));
	isc_launcher_stop(&s, targets, 1, &o, 0); /* docker rm: the follower reconnects */
	for (int t = 0; t < 400 && !(n = isc_launch_follow_poll(f, &ex, 1)); t++)
		usleep(50 * 1000);
	isc_launch_follow_free(f);
	assert_int_equal(n, 1);
	log = slurp(path);
	assert_non_null(log);
	assert_int_equal(strncmp(log, "line-1\nline-2\nline-3\n", 21), 0);
	assert_null(strstr(log, "No such container"));
	free(log);
}

/* Over rank_log_max_bytes the log keeps its head and says what happened. */
static void test_log_is_capped_with_a_marker(void **state)
{
	struct isc_boot_spec s = spec(
	    "exp_cap", "cap", "head -c 300000 /dev/zero | tr '\\0' x; echo; echo the-end", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_err err;
	char out[256], path[300], *log;
	struct stat st;
	int code = -1;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	o.log_max_bytes = 65536;
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-cap", root);
	assert_int_equal(isc_launch_follow_start(&s, targets, 1, &o, out, &f, &err), 0);
	for (int t = 0; t < 200 && !isc_launch_follow_rank_exit(f, 0, &code); t++)
		usleep(50 * 1000);
	isc_launch_follow_free(f);
	assert_int_equal(code, 0);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 65536 && st.st_size < 65536 + 512);
	assert_int_equal(st.st_mode & 0777, 0600);
	log = slurp(path);
	assert_int_equal(strspn(log, "x"), 65536);
	assert_non_null(strstr(log, "reached rank_log_max_bytes (65536 bytes)"));
	assert_non_null(strstr(log, "234473 bytes of output over the cap were not kept"));
	assert_null(strstr(log, "the-end"));
	free(log);
	isc_launcher_stop(&s, targets, 1, &o, 0);
}

/* A follow that starts on a log with output (iscd restarted) appends, after a marker. */
static void test_log_of_a_restarted_follow_is_appended(void **state)
{
	struct isc_boot_spec s = spec("exp_again_log", "again", "echo replayed", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_err err;
	char out[256], path[300], *log;
	int code = -1;
	FILE *fp;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	snprintf(out, sizeof(out), "%s/out-again", root);
	mkdir(out, 0700);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	fp = fopen(path, "w");
	fputs("earlier output without a newline", fp);
	fclose(fp);
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	assert_int_equal(isc_launch_follow_start(&s, targets, 1, &o, out, &f, &err), 0);
	for (int t = 0; t < 200 && !isc_launch_follow_rank_exit(f, 0, &code); t++)
		usleep(50 * 1000);
	isc_launch_follow_free(f);
	log = slurp(path);
	assert_int_equal(strncmp(log,
	                         "earlier output without a newline\n---- isc: following rank 0 "
	                         "again",
	                         59),
	                 0);
	assert_non_null(strstr(log, "----\nreplayed\n"));
	free(log);
	isc_launcher_stop(&s, targets, 1, &o, 0);
}

/* Bytes the process's heap holds right now (live allocations, not freed ones). */
static size_t heap_in_use(void)
{
#ifdef HEAP_BY_ASAN
	return __sanitizer_get_current_allocated_bytes();
#else
	return mallinfo2().uordblks;
#endif
}

/*
 * A hostile node prints 100 MiB for `docker wait` (the wait-flood-bytes fault of the
 * mock node, through a real SSH channel): the follower keeps only the tail, so the
 * heap does not grow with it, and the exit code on the last line still counts.
 */
static void test_wait_flood_is_kept_to_its_tail(void **state)
{
	struct isc_boot_spec s = spec("exp_flood", "flood", "echo flooded; exit 3", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_err err;
	char out[256], fault[300], path[300], *log;
	size_t base, peak = 0;
	int code = -1, exited = 0;
	FILE *fp;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 1;
	snprintf(fault, sizeof(fault), "%s/n0/wait-flood-bytes", root);
	fp = fopen(fault, "w");
	assert_non_null(fp);
	fprintf(fp, "%d\n", 100 * 1024 * 1024);
	fclose(fp);
	assert_int_equal(isc_launcher_boot(&s, targets, 1, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-flood", root);
	base = heap_in_use();
	assert_int_equal(isc_launch_follow_start(&s, targets, 1, &o, out, &f, &err), 0);
	for (int t = 0; t < 6000 && !exited; t++) {
		size_t now = heap_in_use();
		if (now > peak)
			peak = now;
		exited = isc_launch_follow_rank_exit(f, 0, &code);
		usleep(10 * 1000);
	}
	isc_launch_follow_free(f);
	unlink(fault);
	assert_true(exited);
	assert_int_equal(code, 3);
	/* A reader that kept it all would hold 100 MiB (128 with a doubling buffer). */
	print_message("heap: %zu bytes before, peak %zu while 100 MiB streamed (+%zd)\n", base,
	              peak, (ssize_t)(peak - base));
	assert_true(peak < base + 8 * 1024 * 1024);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	log = slurp(path);
	assert_string_equal(log, "flooded\n");
	free(log);
	isc_launcher_stop(&s, targets, 1, &o, 0);
}

/*
 * Issue 34: the broker stops a rank's follower once it saw an exit and may start
 * another for the same cluster. The second follow goes on where the first one
 * stopped: no replay marker, nothing twice; and once the container is gone, a
 * follow adds nothing at all (it used to leave the marker as the log's last line).
 */
static void test_follow_again_goes_on_where_it_stopped(void **state)
{
	struct isc_boot_spec s =
	    spec("exp_refollow", "refollow", "echo a-$RANK; echo b-$RANK >&2; exit 1", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct isc_rank_exit ex[2];
	struct isc_err err;
	char out[256], path[300], want[64], *log;
	size_t n = 0;
	(void)state;
	if (getuid() != 0)
		skip();
	s.nnodes = 2;
	assert_int_equal(isc_launcher_boot(&s, targets, 2, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/out-refollow", root);
	for (int round = 0; round < 3; round++) {
		if (round == 2) /* the containers are removed (teardown) before the last follow */
			isc_launcher_stop(&s, targets, 2, &o, 0);
		assert_int_equal(isc_launch_follow_start(&s, targets, 2, &o, out, &f, &err), 0);
		for (int t = 0; t < 400 && (n = isc_launch_follow_poll(f, ex, 2)) < 2; t++)
			usleep(50 * 1000);
		isc_launch_follow_free(f);
		assert_int_equal(n, 2);
		for (int r = 0; r < 2; r++) {
			assert_int_equal(ex[r].code, round == 2 ? -1 : 1);
			snprintf(path, sizeof(path), "%s/rank_%d.txt", out, r);
			log = slurp(path);
			assert_non_null(log);
			assert_null(strstr(log, "---- isc"));
			/* each line once (stdout and stderr may interleave either way) */
			snprintf(want, sizeof(want), "a-%d\n", r);
			assert_non_null(strstr(log, want));
			assert_null(strstr(strstr(log, want) + 1, want));
			snprintf(want, sizeof(want), "b-%d\n", r);
			assert_non_null(strstr(log, want));
			assert_int_equal(strlen(log), 8);
			free(log);
		}
	}
	/* A new boot of the same container name starts over: its output is appended. */
	assert_int_equal(isc_launcher_boot(&s, targets, 2, &o, &err), 0);
	assert_int_equal(isc_launch_follow_start(&s, targets, 2, &o, out, &f, &err), 0);
	for (int t = 0; t < 400 && (n = isc_launch_follow_poll(f, ex, 2)) < 2; t++)
		usleep(50 * 1000);
	isc_launch_follow_free(f);
	snprintf(path, sizeof(path), "%s/rank_0.txt", out);
	log = slurp(path);
	assert_non_null(log);
	assert_non_null(strstr(log, "following rank 0 again"));
	assert_int_equal(strlen(log) > 16, 1);
	free(log);
	isc_launcher_stop(&s, targets, 2, &o, 0);
}

/* Artifacts home from a node whose folders hold links out, then back onto another node. */

/* A sink standing in for the store (broker/logship.h): what each rank's follow gave it. */
struct mem_sink_log {
	int rank;
	struct isc_buf buf;
};
struct mem_sink {
	pthread_mutex_t lock;
	uint64_t held; /* what the "store" had of each log before (another replica's) */
	struct mem_sink_log logs[4];
};

static void *mem_open(void *ctx, const char *experiment_id, int rank, uint64_t *bytes, char *last)
{
	struct mem_sink *m = ctx;
	(void)experiment_id;
	if (rank < 0 || rank >= 4)
		return NULL;
	*bytes = m->held;
	*last = 'x'; /* mid-line: the replay marker starts a line of its own */
	m->logs[rank].rank = rank;
	return &m->logs[rank];
}

static struct mem_sink *the_sink;

static void mem_append(void *handle, const char *data, size_t len)
{
	struct mem_sink_log *l = handle;
	pthread_mutex_lock(&the_sink->lock);
	isc_buf_append(&l->buf, data, len);
	pthread_mutex_unlock(&the_sink->lock);
}

static void mem_close(void *handle)
{
	(void)handle;
}

/*
 * Issue 45: a cluster key moved from its file into a store (sealed), opened into
 * memory and used for the logins (libssh2's from-memory API: no key file); a follow
 * whose Output Path cannot be made (another replica's host) still follows into the
 * sink, and marks the replay, since the sink already held output of the rank.
 */
static void test_sealed_key_and_log_sink(void **state)
{
	struct isc_boot_spec s =
	    spec("exp_sealed", "sealed", "echo hello-from-$RANK; echo second-line", "img");
	struct isc_launcher_opts o = opts();
	struct isc_launch_follow *f;
	struct mem_sink m;
	struct isc_log_sink sink = {mem_open, mem_append, mem_close, &m};
	struct isc_store *st;
	struct isc_err err;
	char home2[300], out[320], *pem = NULL, *text;
	size_t len = 0, moved = 0;
	int done = 0;
	(void)state;
	if (getuid() != 0)
		skip();
	memset(&m, 0, sizeof(m));
	pthread_mutex_init(&m.lock, NULL);
	for (int i = 0; i < 4; i++)
		isc_buf_init(&m.logs[i].buf, 0);
	the_sink = &m;
	m.held = 5;
	unsetenv("ISC_MASTER_KEY_FILE");
	snprintf(home2, sizeof(home2), "%s/h2", root);
	assert_int_equal(isc_store_open(home2, 1, &st, &err), 0);
	assert_int_equal(
	    sh("mkdir -m 700 %s/keys && cp -p %s %s/keys/cl_test", home2, key_path, home2), 0);
	assert_int_equal(isc_cluster_key_import_files(st, home2, &moved, &err), 0);
	assert_int_equal(moved, 1);
	assert_int_equal(isc_cluster_key_load_sealed(st, home2, "cl_test", &pem, &len, &err), 0);
	isc_store_free(st);
	o.key_path = NULL;
	o.key_pem = pem;
	o.key_pem_len = len;
	o.log_sink = &sink;
	s.nnodes = 2;
	assert_int_equal(isc_launcher_boot(&s, targets, 2, &o, &err), 0);
	snprintf(out, sizeof(out), "%s/gone-host/out", root); /* its parent does not exist */
	assert_int_equal(isc_launch_follow_start(&s, targets, 2, &o, out, &f, &err), 0);
	for (int t = 0; t < 200 && done < 2; t++) {
		int c;
		done =
		    isc_launch_follow_rank_exit(f, 0, &c) + isc_launch_follow_rank_exit(f, 1, &c);
		usleep(50 * 1000);
	}
	assert_int_equal(done, 2);
	isc_launch_follow_free(f);
	/* Followed again in this process (the broker restarts a follower): nothing is
	 * replayed into the sink, though there is still no file. */
	{
		size_t had0 = m.logs[0].buf.len, had1 = m.logs[1].buf.len;
		done = 0;
		assert_int_equal(isc_launch_follow_start(&s, targets, 2, &o, out, &f, &err), 0);
		for (int t = 0; t < 200 && done < 2; t++) {
			int c;
			done = isc_launch_follow_rank_exit(f, 0, &c) +
			       isc_launch_follow_rank_exit(f, 1, &c);
			usleep(50 * 1000);
		}
		assert_int_equal(done, 2);
		isc_launch_follow_free(f);
		assert_int_equal(m.logs[0].buf.len, had0);
		assert_int_equal(m.logs[1].buf.len, had1);
	}
	for (int r = 0; r < 2; r++) {
		char want[64];
		text = isc_buf_detach(&m.logs[r].buf);
		assert_non_null(text);
		snprintf(want, sizeof(want), "hello-from-%d\nsecond-line\n", r);
		assert_non_null(strstr(text, want));
		/* on a line of its own after the sink's "mid-line" copy, before the replay */
		assert_int_equal(text[0], '\n');
		assert_non_null(strstr(text, "---- isc: following rank"));
		assert_true(strstr(text, "---- isc: following rank") < strstr(text, want));
		free(text);
	}
	assert_int_not_equal(access(out, F_OK), 0);
	pthread_mutex_destroy(&m.lock);
	isc_launcher_stop(&s, targets, 2, &o, 0);
	isc_vault_wipe_free(pem, len + 1);
}

static void test_artifacts_pull_refuses_links_and_push_restores(void **state)
{
	struct isc_launcher_opts o = opts();
	struct isc_unpack_report rep;
	struct isc_err err;
	char dir[128], local[128], cmd[4096];
	(void)state;
	if (getuid() != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/n2/mnt", root);
	snprintf(local, sizeof(local), "%s/art-home", root);
	snprintf(
	    cmd, sizeof(cmd),
	    "mkdir -p %s/checkpoints/sub %s/crud %s/outside && echo weights > "
	    "%s/checkpoints/sub/model.pt && ln -sfn %s/outside %s/checkpoints/escape && "
	    "ln -sfn /etc/passwd %s/crud/passwd && truncate -s 20M %s/checkpoints/sparse.bin && "
	    "printf tail >> %s/checkpoints/sparse.bin && chmod 4755 %s/checkpoints/sub/model.pt",
	    dir, dir, root, dir, root, dir, dir, dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(
	    isc_launcher_pull_artifacts(&targets[2], &o, local, ISC_ARTIFACT_ALL, &rep, &err), 0);
	assert_int_equal(rep.refused, 2);
	assert_int_equal(rep.stripped, 1);
	snprintf(
	    cmd, sizeof(cmd),
	    "test -f %s/checkpoints/sub/model.pt && test ! -e %s/checkpoints/escape && "
	    "test ! -e %s/crud/passwd && test -d %s/lossy && test $(stat -c %%s "
	    "%s/checkpoints/sparse.bin) = 20971524 && test $(stat -c %%a %s/checkpoints/sub) = "
	    "700 && test $(stat -c %%a %s/checkpoints/sub/model.pt) = 700 && test -z \"$(ls -A "
	    "%s/outside)\" && test -z \"$(ls -A %s | grep incoming)\"",
	    local, local, local, local, local, local, local, root, local);
	assert_int_equal(system(cmd), 0);
	/* A cap stops the pull and the previous copy stays whole. */
	o.artifact_max_bytes = 1 << 20;
	assert_int_equal(
	    isc_launcher_pull_artifacts(&targets[2], &o, local, ISC_ARTIFACT_ALL, &rep, &err),
	    ISC_EINVALID);
	assert_non_null(strstr(err.msg, "the cap"));
	snprintf(cmd, sizeof(cmd),
	         "test $(stat -c %%s %s/checkpoints/sparse.bin) = 20971524 && test -z \"$(ls -A %s "
	         "| grep incoming)\"",
	         local, local);
	assert_int_equal(system(cmd), 0);
	/* Back onto another node, whole. */
	o.artifact_max_bytes = 0;
	assert_int_equal(isc_launcher_push_artifacts(&targets[3], &o, local, &err), 0);
	snprintf(cmd, sizeof(cmd),
	         "cmp %s/checkpoints/sparse.bin %s/n3/mnt/checkpoints/sparse.bin && cmp "
	         "%s/checkpoints/sub/model.pt %s/n3/mnt/checkpoints/sub/model.pt",
	         local, root, local, root);
	assert_int_equal(system(cmd), 0);
	/* A node that never answers: the push tries again, then says so. */
	{
		struct isc_node_target gone = {9, "127.0.88.99", node_port, "127.0.88.99",
		                               "i-gone"};
		assert_int_equal(isc_launcher_push_artifacts(&gone, &o, local, &err),
		                 ISC_ETRANSIENT);
		assert_non_null(strstr(err.msg, "restoring artifacts onto 127.0.88.99"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cluster_key_files),
	    cmocka_unit_test(test_boot_refuses_bad_node_lists),
	    cmocka_unit_test(test_six_node_boot_environment),
	    cmocka_unit_test(test_hostile_strings_stay_inert),
	    cmocka_unit_test(test_presigned_urls_stay_out_of_argv),
	    cmocka_unit_test(test_newline_in_name_stays_one_value),
	    cmocka_unit_test(test_follow_streams_polls_and_stops),
	    cmocka_unit_test(test_follow_reports_a_vanished_container),
	    cmocka_unit_test(test_repeated_boot_replaces_the_container),
	    cmocka_unit_test(test_boot_of_some_nodes_names_the_whole_gang),
	    cmocka_unit_test(test_failed_pull_rolls_back_every_node),
	    cmocka_unit_test(test_failure_cancels_nodes_still_connecting),
	    cmocka_unit_test(test_unreachable_node_fails_after_deadline),
	    cmocka_unit_test(test_pin_without_instance_id),
	    cmocka_unit_test(test_changed_host_key_is_refused),
	    cmocka_unit_test(test_silent_login_is_not_a_refused_key),
	    cmocka_unit_test(test_log_resumes_after_a_reconnect),
	    cmocka_unit_test(test_log_survives_the_container),
	    cmocka_unit_test(test_log_is_capped_with_a_marker),
	    cmocka_unit_test(test_log_of_a_restarted_follow_is_appended),
	    cmocka_unit_test(test_wait_flood_is_kept_to_its_tail),
	    cmocka_unit_test(test_follow_again_goes_on_where_it_stopped),
	    cmocka_unit_test(test_artifacts_pull_refuses_links_and_push_restores),
	    cmocka_unit_test(test_sealed_key_and_log_sink),
	};
	return cmocka_run_group_tests_name("launcher", tests, group_setup, group_teardown);
}
