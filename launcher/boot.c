/*
 * Booting and stopping containers on every node, one thread per node.
 *
 * The environment travels as a docker --env-file written from the SSH
 * channel's stdin (never in argv, so it is not in the node's process list);
 * the command travels single-quoted (shellquote.c), so nothing in it is
 * interpreted by the node's shell.
 */
#include "launcher/launcher.h"

#include "common/buf.h"
#include "common/clock.h"
#include "launcher/shellquote.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PULL_FAILED 97 /* the boot script's exit code when docker pull fails */

char *isc_launcher_container_name(const char *experiment_id, int rank)
{
	char *name;
	if (asprintf(&name, "isc-%s-r%d", experiment_id, rank) < 0)
		return NULL;
	/* Docker names allow [a-zA-Z0-9][a-zA-Z0-9_.-]; ids are already of that alphabet. */
	for (char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			*p = '_';
	return name;
}

/* KEY=VALUE lines for --env-file; values never contain newlines (validated upstream). */
static int env_file(const struct isc_boot_spec *spec, const struct isc_node_target *nodes, size_t n,
                    int rank, struct isc_buf *b)
{
	json_t *map = json_object();
	char *map_text;
	const char *master = "";
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		json_object_set_new(map, nodes[i].private_ip, json_integer(nodes[i].rank));
		if (nodes[i].rank == 0)
			master = nodes[i].private_ip;
	}
	map_text = json_dumps(map, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(map);
	if (!map_text)
		return ISC_ENOMEM;
	rc |= isc_buf_printf(b, "RANK=%d\nNNODES=%d\nN_PROC=%d\nMASTER_ADDR=%s\nMASTER_PORT=%d\n",
	                     rank, spec->nnodes, spec->nproc, master, spec->master_port);
	rc |= isc_buf_printf(b, "IP_TO_RANK_MAPPING=%s\n", map_text);
	rc |= isc_buf_printf(b, "STRONG_EXPERIMENT_ID=%s\nSTRONG_EXPERIMENT_NAME=%s\n",
	                     spec->experiment_id, spec->experiment_name);
	rc |= isc_buf_printf(
	    b, "STRONG_COMPUTE_MODE=%s\nSTRONG_CYCLE_COUNT=%d\nSTRONG_CYCLE_TIME_MS=%ld\n",
	    spec->compute_mode, spec->cycle_count, spec->cycle_time_ms);
	rc |= isc_buf_puts(
	    b, "OUTPUT_PATH=/mnt/checkpoints\nCHECKPOINT_ARTIFACT_PATH=/mnt/checkpoints\n"
	       "CRUD_ARTIFACT_PATH=/mnt/crud\nLOSSY_ARTIFACT_PATH=/mnt/lossy\n");
	free(map_text);
	return rc ? ISC_ENOMEM : 0;
}

/* The boot script of one rank; everything variable in it is quoted. */
static int boot_script(const struct isc_boot_spec *spec, const char *name, struct isc_buf *b)
{
	int rc = 0;
	rc |= isc_buf_puts(b, "set -e; mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy; ");
	for (size_t i = 0; i < spec->n_datasets; i++) {
		rc |= isc_buf_puts(b, "mkdir -p /data/");
		rc |= isc_shell_quote(b, spec->dataset_ids[i]);
		rc |= isc_buf_puts(b, "; ");
	}
	rc |= isc_buf_puts(b, "umask 077; env_file=/tmp/");
	rc |= isc_shell_quote(b, name);
	rc |= isc_buf_puts(b, ".env; cat > \"$env_file\"; docker rm -f ");
	rc |= isc_shell_quote(b, name);
	rc |= isc_buf_puts(b, " >/dev/null 2>&1 || true; docker pull ");
	rc |= isc_shell_quote(b, spec->image);
	rc |= isc_buf_printf(b, " >/dev/null || exit %d; docker run -d --name ", PULL_FAILED);
	rc |= isc_shell_quote(b, name);
	rc |= isc_buf_puts(b, " --gpus all --network host --ipc host --shm-size ");
	rc |= isc_shell_quote(b, spec->shm_size);
	rc |= isc_buf_puts(b, " -v /mnt/checkpoints:/mnt/checkpoints -v /mnt/crud:/mnt/crud"
	                      " -v /mnt/lossy:/mnt/lossy");
	for (size_t i = 0; i < spec->n_datasets; i++) {
		struct isc_buf vol;
		isc_buf_init(&vol, 0);
		rc |= isc_buf_printf(&vol, "/data/%s:/data/%s:ro", spec->dataset_ids[i],
		                     spec->dataset_ids[i]);
		rc |= isc_buf_puts(b, " -v ");
		rc |= isc_shell_quote(b, isc_buf_cstr(&vol));
		isc_buf_cleanup(&vol);
	}
	rc |= isc_buf_puts(b, " --env-file \"$env_file\" ");
	rc |= isc_shell_quote(b, spec->image);
	rc |= isc_buf_puts(b, " bash -lc ");
	rc |= isc_shell_quote(b, spec->command);
	rc |= isc_buf_puts(b, " >/dev/null");
	return rc ? ISC_ENOMEM : 0;
}

/* Keeps the tail of the error stream for messages. */
static void keep_stderr(void *ctx, const char *data, size_t len, int stderr_stream)
{
	struct isc_buf *b = ctx;
	if (!stderr_stream)
		return;
	if (b->len + len > 2048)
		isc_buf_reset(b);
	isc_buf_append(b, data, len);
}

struct node_job {
	const struct isc_boot_spec *spec;
	const struct isc_node_target *nodes;
	size_t n;
	size_t index;
	const struct isc_launcher_opts *opts;
	int grace_s;
	int rc;
	int started; /* the container was started on this node */
	struct isc_err err;
	pthread_t thread;
};

static int open_node(const struct node_job *j, long deadline_ms, struct isc_ssh **ssh)
{
	const struct isc_node_target *node = &j->nodes[j->index];
	struct isc_ssh_target t = {node->host, node->port, j->opts->user, j->opts->key_path,
	                           node->pin_target};
	return isc_ssh_connect(&t, isc_monotonic_ms() + deadline_ms, j->opts->check,
	                       j->opts->check_ctx, ssh, (struct isc_err *)&j->err);
}

static void *boot_node(void *arg)
{
	struct node_job *j = arg;
	const struct isc_node_target *node = &j->nodes[j->index];
	struct isc_ssh *ssh = NULL;
	struct isc_buf env, script, errout;
	char *name = isc_launcher_container_name(j->spec->experiment_id, node->rank);
	int status = -1;

	isc_buf_init(&env, 0);
	isc_buf_init(&script, 0);
	isc_buf_init(&errout, 0);
	if (!name || env_file(j->spec, j->nodes, j->n, node->rank, &env) ||
	    boot_script(j->spec, name, &script)) {
		j->rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if ((j->rc = open_node(j, j->opts->connect_deadline_ms, &ssh)))
		goto out;
	j->rc =
	    isc_ssh_exec(ssh, isc_buf_cstr(&script), env.data, env.len, j->opts->command_timeout_ms,
	                 keep_stderr, &errout, NULL, &status, &j->err);
	if (j->rc)
		goto out;
	while (errout.len &&
	       (errout.data[errout.len - 1] == '\n' || errout.data[errout.len - 1] == '\r'))
		errout.data[--errout.len] = '\0';
	if (status == PULL_FAILED)
		j->rc = isc_err_set(&j->err, ISC_EINVALID, "docker pull %s failed: %s",
		                    j->spec->image, isc_buf_cstr(&errout));
	else if (status != 0)
		j->rc = isc_err_set(&j->err, ISC_EINVALID,
		                    "starting the container failed (exit %d): %s", status,
		                    isc_buf_cstr(&errout));
	else
		j->started = 1;
out:
	isc_ssh_free(ssh);
	isc_buf_cleanup(&env);
	isc_buf_cleanup(&script);
	isc_buf_cleanup(&errout);
	free(name);
	return NULL;
}

static void *stop_node(void *arg)
{
	struct node_job *j = arg;
	const struct isc_node_target *node = &j->nodes[j->index];
	struct isc_ssh *ssh = NULL;
	struct isc_buf cmd;
	char *name = isc_launcher_container_name(j->spec->experiment_id, node->rank);
	int status;

	isc_buf_init(&cmd, 0);
	if (name && open_node(j, 10000, &ssh) == 0) {
		isc_buf_printf(&cmd, "docker stop -t %d ", j->grace_s);
		isc_shell_quote(&cmd, name);
		isc_buf_puts(&cmd, " >/dev/null 2>&1; docker rm -f ");
		isc_shell_quote(&cmd, name);
		isc_buf_puts(&cmd, " >/dev/null 2>&1; rm -f /tmp/");
		isc_shell_quote(&cmd, name);
		isc_buf_puts(&cmd, ".env; true");
		j->rc =
		    isc_ssh_exec(ssh, isc_buf_cstr(&cmd), NULL, 0, (long)j->grace_s * 1000 + 30000,
		                 NULL, NULL, NULL, &status, &j->err);
	}
	isc_ssh_free(ssh);
	isc_buf_cleanup(&cmd);
	free(name);
	return NULL;
}

/* Runs fn for every node in its own thread and waits for all. */
static struct node_job *run_all(const struct isc_boot_spec *spec,
                                const struct isc_node_target *nodes, size_t n,
                                const struct isc_launcher_opts *opts, int grace_s,
                                void *(*fn)(void *), const int *only)
{
	struct node_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	if (!jobs)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		jobs[i] = (struct node_job){spec, nodes, n, i, opts, grace_s, 0, 0, {0}, 0};
		if (only && !only[i])
			continue;
		if (pthread_create(&jobs[i].thread, NULL, fn, &jobs[i]) != 0) {
			jobs[i].rc = isc_err_set(&jobs[i].err, ISC_EIO, "cannot start a thread");
			jobs[i].thread = 0;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (jobs[i].thread)
			pthread_join(jobs[i].thread, NULL);
	return jobs;
}

int isc_launcher_boot(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                      size_t n, const struct isc_launcher_opts *opts, struct isc_err *err)
{
	struct node_job *jobs = run_all(spec, nodes, n, opts, 0, boot_node, NULL);
	int rc = 0, *started;

	if (!jobs)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		if (jobs[i].rc) {
			rc = jobs[i].rc;
			isc_err_set(err, rc, "rank %d (%s): %s", nodes[i].rank, nodes[i].host,
			            jobs[i].err.msg);
		}
	}
	if (rc) {
		/* All or nothing: remove what did start, so no rank runs alone. */
		started = calloc(n, sizeof(*started));
		if (started) {
			for (size_t i = 0; i < n; i++)
				started[i] = jobs[i].started;
			free(run_all(spec, nodes, n, opts, 0, stop_node, started));
			free(started);
		}
	}
	free(jobs);
	return rc;
}

void isc_launcher_stop(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                       size_t n, const struct isc_launcher_opts *opts, int grace_s)
{
	free(run_all(spec, nodes, n, opts, grace_s, stop_node, NULL));
}

/* ---- artifacts: a tar stream over the channel ---- */

static void to_file(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (!stderr_stream)
		fwrite(data, 1, len, (FILE *)ctx);
}

static int connect_one(const struct isc_node_target *node, const struct isc_launcher_opts *opts,
                       struct isc_ssh **ssh, struct isc_err *err)
{
	struct isc_ssh_target t = {node->host, node->port, opts->user, opts->key_path,
	                           node->pin_target};
	return isc_ssh_connect(&t, isc_monotonic_ms() + 15000, opts->check, opts->check_ctx, ssh,
	                       err);
}

int isc_launcher_pull_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                int which, struct isc_err *err)
{
	struct isc_ssh *ssh = NULL;
	struct isc_buf cmd, remote;
	FILE *tar;
	int rc, status = -1;

	if ((rc = connect_one(node, opts, &ssh, err)))
		return rc;
	isc_buf_init(&cmd, 0);
	isc_buf_puts(&cmd, "mkdir -p ");
	isc_shell_quote(&cmd, local_dir);
	isc_buf_puts(&cmd, " && tar -C ");
	isc_shell_quote(&cmd, local_dir);
	isc_buf_puts(&cmd, " -xf -");
	/* Local side: our own quoted path, never anything from the node. */
	tar = popen(isc_buf_cstr(&cmd), "w");
	if (!tar) {
		rc = isc_err_set(err, ISC_EIO, "cannot run tar");
	} else {
		isc_buf_init(&remote, 0);
		isc_buf_puts(&remote,
		             "mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy && tar -C /mnt -cf -");
		if (which & ISC_ARTIFACT_CHECKPOINTS)
			isc_buf_puts(&remote, " checkpoints");
		if (which & ISC_ARTIFACT_CRUD)
			isc_buf_puts(&remote, " crud");
		if (which & ISC_ARTIFACT_LOSSY)
			isc_buf_puts(&remote, " lossy");
		rc = isc_ssh_exec(ssh, isc_buf_cstr(&remote), NULL, 0, opts->command_timeout_ms,
		                  to_file, tar, NULL, &status, err);
		isc_buf_cleanup(&remote);
		if (pclose(tar) != 0 && !rc)
			rc = isc_err_set(err, ISC_EIO, "unpacking artifacts into %s failed",
			                 local_dir);
		if (!rc && status != 0)
			rc = isc_err_set(err, ISC_EIO, "packing artifacts on %s failed (exit %d)",
			                 node->host, status);
	}
	isc_buf_cleanup(&cmd);
	isc_ssh_free(ssh);
	return rc;
}

int isc_launcher_push_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                struct isc_err *err)
{
	struct isc_ssh *ssh = NULL;
	struct isc_buf cmd, data;
	char chunk[65536];
	size_t got;
	FILE *tar;
	int rc, status = -1;

	isc_buf_init(&cmd, 0);
	isc_buf_init(&data, 1024L * 1024 * 1024);
	isc_buf_puts(&cmd, "tar -C ");
	isc_shell_quote(&cmd, local_dir);
	isc_buf_puts(&cmd, " -cf - .");
	tar = popen(isc_buf_cstr(&cmd), "r");
	if (!tar) {
		isc_buf_cleanup(&cmd);
		return isc_err_set(err, ISC_EIO, "cannot run tar");
	}
	rc = 0;
	while (!rc && (got = fread(chunk, 1, sizeof(chunk), tar)) > 0)
		rc = isc_buf_append(&data, chunk, got);
	if (pclose(tar) != 0 || rc)
		rc = isc_err_set(err, ISC_EIO, "packing artifacts from %s failed", local_dir);
	if (!rc)
		rc = connect_one(node, opts, &ssh, err);
	if (!rc)
		rc = isc_ssh_exec(ssh, "mkdir -p /mnt && tar -C /mnt -xf -", data.data, data.len,
		                  opts->command_timeout_ms, NULL, NULL, NULL, &status, err);
	if (!rc && status != 0)
		rc = isc_err_set(err, ISC_EIO, "unpacking artifacts on %s failed (exit %d)",
		                 node->host, status);
	isc_ssh_free(ssh);
	isc_buf_cleanup(&cmd);
	isc_buf_cleanup(&data);
	return rc;
}
