/*
 * Following a running cluster: one thread per rank runs `docker logs -f` on
 * its node, appending to <output dir>/rank_N.txt on the broker's side, then
 * `docker wait` for the exit code. A lost connection is retried; the log file
 * is rewritten from the start each time, since docker logs replays it all.
 * A container that no longer exists (docker wait fails three times in a row on a
 * node that answers) is reported as exited with code -1, so the broker is never
 * left waiting for a rank nobody can see.
 */
#include "launcher/launcher.h"

#include "common/buf.h"
#include "common/clock.h"
#include "launcher/shellquote.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct follow_rank {
	struct isc_launch_follow *f;
	int rank;
	char *host, *pin_target, *name, *log_path;
	int port;
	pthread_t thread;
	int started;
	int exited; /* guarded by f->lock */
	int code;
};

struct isc_launch_follow {
	pthread_mutex_t lock;
	volatile int cancel;
	char *user, *key_path;
	struct isc_launcher_opts opts; /* strings point at the copies above */
	struct follow_rank *ranks;
	size_t n;
};

static void append(void *ctx, const char *data, size_t len, int stderr_stream)
{
	(void)stderr_stream; /* the container's stdout and stderr both belong in the rank's log */
	fwrite(data, 1, len, (FILE *)ctx);
	fflush((FILE *)ctx);
}

static void keep(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (!stderr_stream)
		isc_buf_append(ctx, data, len);
}

static void *follow_main(void *arg)
{
	struct follow_rank *r = arg;
	struct isc_launch_follow *f = r->f;
	struct isc_buf logs_cmd, wait_cmd, out;

	isc_buf_init(&logs_cmd, 0);
	isc_buf_init(&wait_cmd, 0);
	isc_buf_init(&out, 64);
	isc_buf_puts(&logs_cmd, "docker logs -f ");
	isc_shell_quote(&logs_cmd, r->name);
	isc_buf_puts(&wait_cmd, "docker wait ");
	isc_shell_quote(&wait_cmd, r->name);
	int missing = 0; /* docker wait failures in a row on a reachable node */

	while (!f->cancel) {
		struct isc_ssh_target t = {r->host,     r->port,       f->user,
		                           f->key_path, r->pin_target, &f->cancel};
		struct isc_ssh *ssh = NULL;
		struct isc_err err;
		FILE *log;
		int status = -1, rc;

		/* Short attempts, so a stop request is noticed soon even when the node is gone. */
		if (isc_ssh_connect(&t, isc_monotonic_ms() + 2000, f->opts.check, f->opts.check_ctx,
		                    &ssh, &err)) {
			for (int i = 0; i < 20 && !f->cancel; i++)
				usleep(100 * 1000);
			continue;
		}
		log = fopen(r->log_path, "w");
		rc = log ? isc_ssh_exec(ssh, isc_buf_cstr(&logs_cmd), NULL, 0, 0, append, log,
		                        &f->cancel, &status, &err)
		         : ISC_EIO;
		if (log)
			fclose(log);
		if (!rc && !f->cancel) {
			isc_buf_reset(&out);
			rc = isc_ssh_exec(ssh, isc_buf_cstr(&wait_cmd), NULL, 0, 30000, keep, &out,
			                  &f->cancel, &status, &err);
			if (!rc && (status == 0 || ++missing >= 3)) {
				pthread_mutex_lock(&f->lock);
				r->exited = 1;
				r->code = status == 0 ? atoi(isc_buf_cstr(&out)) : -1;
				pthread_mutex_unlock(&f->lock);
				isc_ssh_free(ssh);
				break;
			}
			if (rc)
				missing = 0;
		}
		isc_ssh_free(ssh);
		for (int i = 0; i < 10 && !f->cancel; i++)
			usleep(100 * 1000);
	}
	isc_buf_cleanup(&logs_cmd);
	isc_buf_cleanup(&wait_cmd);
	isc_buf_cleanup(&out);
	return NULL;
}

void isc_launch_follow_free(struct isc_launch_follow *f)
{
	if (!f)
		return;
	f->cancel = 1;
	for (size_t i = 0; i < f->n; i++) {
		struct follow_rank *r = &f->ranks[i];
		if (r->started)
			pthread_join(r->thread, NULL);
		free(r->host);
		free(r->pin_target);
		free(r->name);
		free(r->log_path);
	}
	free(f->ranks);
	free(f->user);
	free(f->key_path);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

int isc_launch_follow_start(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                            size_t n, const struct isc_launcher_opts *opts, const char *output_dir,
                            struct isc_launch_follow **out, struct isc_err *err)
{
	struct isc_launch_follow *f = calloc(1, sizeof(*f));

	*out = NULL;
	if (!f)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	pthread_mutex_init(&f->lock, NULL);
	f->opts = *opts;
	f->user = strdup(opts->user ? opts->user : "root");
	f->key_path = strdup(opts->key_path);
	f->ranks = calloc(n ? n : 1, sizeof(*f->ranks));
	f->n = n;
	if (!f->user || !f->key_path || !f->ranks) {
		f->n = 0;
		isc_launch_follow_free(f);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (mkdir(output_dir, 0700) != 0 && errno != EEXIST) {
		f->n = 0;
		isc_launch_follow_free(f);
		return isc_err_set(err, ISC_EIO, "cannot create %s: %s", output_dir,
		                   strerror(errno));
	}
	for (size_t i = 0; i < n; i++) {
		struct follow_rank *r = &f->ranks[i];
		r->f = f;
		r->rank = nodes[i].rank;
		r->port = nodes[i].port;
		r->host = strdup(nodes[i].host);
		/* No instance id: pinned under host:port, which ssh.c derives itself. */
		r->pin_target = nodes[i].pin_target ? strdup(nodes[i].pin_target) : NULL;
		r->name = isc_launcher_container_name(spec->experiment_id, nodes[i].rank);
		if (asprintf(&r->log_path, "%s/rank_%d.txt", output_dir, nodes[i].rank) < 0)
			r->log_path = NULL;
		if (!r->host || (nodes[i].pin_target && !r->pin_target) || !r->name ||
		    !r->log_path) {
			isc_launch_follow_free(f);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		r->started = pthread_create(&r->thread, NULL, follow_main, r) == 0;
	}
	*out = f;
	return 0;
}

int isc_launch_follow_rank_exit(struct isc_launch_follow *f, int rank, int *code)
{
	int exited = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n; i++) {
		if (f->ranks[i].rank == rank && f->ranks[i].exited) {
			exited = 1;
			*code = f->ranks[i].code;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return exited;
}

size_t isc_launch_follow_poll(struct isc_launch_follow *f, struct isc_rank_exit *out, size_t cap)
{
	size_t k = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n; i++) {
		if (!f->ranks[i].exited)
			continue;
		if (k < cap)
			out[k] = (struct isc_rank_exit){f->ranks[i].rank, f->ranks[i].code};
		k++;
	}
	pthread_mutex_unlock(&f->lock);
	return k;
}
