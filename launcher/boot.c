/*
 * Booting and stopping containers on every node, one thread per node.
 *
 * The environment travels as a docker --env-file written from the SSH
 * channel's stdin (never in argv, so it is not in the node's process list),
 * after the datasets' presigned URLs, which the script reads from there too
 * (dataset_urls);
 * the command travels single-quoted (shellquote.c), so nothing in it is
 * interpreted by the node's shell.
 */
#include "launcher/launcher.h"

#include "common/buf.h"
#include "common/clock.h"
#include "launcher/shellquote.h"
#include "launcher/transfer.h"

#include "artifacts/unpack.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATASET_FAILED 95 /* the boot script's exit code when a dataset cannot be fetched */
/* The image's pull, when the caller gives no bounds (config.toml's defaults). */
#define PULL_STALL_MS 120000L
#define PULL_MAX_MS   3600000L
/* A burst node's dataset fetch: the transfer engine's ranges, 16 connections at once. */
#define NODE_PARALLEL ISC_TRANSFER_PARALLEL

const char *isc_fabric_name(int fabric)
{
	return fabric == ISC_FABRIC_EFA ? "efa" : fabric == ISC_FABRIC_RDMA ? "rdma" : "none";
}

/* What the fabric check found on one node (fabric_check). */
#define FABRIC_MAX_DEVICES 64
struct node_fabric {
	char devices[FABRIC_MAX_DEVICES][64]; /* /dev/infiniband/NAME, character devices */
	int n_devices, n_uverbs;
	int efa_domains;   /* fi_info -p efa -t FI_EP_RDM; -1: no fi_info on the node */
	char ifname[16];   /* the interface holding the node's private address; "" unknown */
	long long mem_kib; /* MemTotal; 0 unknown */
	long long shm_kib; /* the node's own /dev/shm (not the container's: --ipc private) */
	char shm_size[32]; /* --shm-size given to docker */
};

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

/*
 * One variable: a KEY=VALUE line of the env file, or, when the value holds a line
 * break (which an env file cannot carry, and which would smuggle in extra
 * variables), a quoted -e argument. Only the experiment's own strings can.
 */
static int add_env(struct isc_buf *file, struct isc_buf *args, const char *key, const char *value)
{
	struct isc_buf kv;
	int rc;

	if (!strpbrk(value, "\r\n"))
		return isc_buf_printf(file, "%s=%s\n", key, value);
	isc_buf_init(&kv, 0);
	rc = isc_buf_printf(&kv, "%s=%s", key, value);
	rc = rc ? rc : isc_buf_puts(args, " -e ");
	rc = rc ? rc : isc_shell_quote(args, isc_buf_cstr(&kv));
	isc_buf_cleanup(&kv);
	return rc;
}

static int add_env_long(struct isc_buf *file, struct isc_buf *args, const char *key, long value)
{
	char text[32];
	snprintf(text, sizeof(text), "%ld", value);
	return add_env(file, args, key, text);
}

/* The container's environment (docs/launcher.md has the table). */
static int env_file(const struct isc_boot_spec *spec, const struct isc_node_target *nodes, size_t n,
                    int rank, struct isc_buf *b, struct isc_buf *args)
{
	json_t *map = json_object();
	char *map_text = NULL;
	const char *master = "";
	int rc = 0;

	if (!map)
		return ISC_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (json_object_set_new(map, nodes[i].private_ip, json_integer(nodes[i].rank)))
			rc = ISC_ENOMEM;
		if (nodes[i].rank == 0)
			master = nodes[i].private_ip;
	}
	map_text = rc ? NULL : json_dumps(map, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(map);
	if (!map_text)
		return ISC_ENOMEM;
	rc |= add_env_long(b, args, "RANK", rank);
	rc |= add_env_long(b, args, "NNODES", spec->nnodes);
	rc |= add_env_long(b, args, "N_PROC", spec->nproc);
	rc |= add_env(b, args, "MASTER_ADDR", master);
	rc |= add_env_long(b, args, "MASTER_PORT", spec->master_port ? spec->master_port : 29500);
	rc |= add_env(b, args, "IP_TO_RANK_MAPPING", map_text);
	rc |= add_env(b, args, "STRONG_EXPERIMENT_ID", spec->experiment_id);
	rc |= add_env(b, args, "STRONG_EXPERIMENT_NAME", spec->experiment_name);
	rc |= add_env(b, args, "STRONG_COMPUTE_MODE", spec->compute_mode);
	rc |= add_env_long(b, args, "STRONG_CYCLE_COUNT", spec->cycle_count);
	rc |= add_env_long(b, args, "STRONG_CYCLE_TIME_MS", spec->cycle_time_ms);
	rc |= add_env(b, args, "OUTPUT_PATH", "/mnt/checkpoints");
	rc |= add_env(b, args, "CHECKPOINT_ARTIFACT_PATH", "/mnt/checkpoints");
	rc |= add_env(b, args, "CRUD_ARTIFACT_PATH", "/mnt/crud");
	rc |= add_env(b, args, "LOSSY_ARTIFACT_PATH", "/mnt/lossy");
	free(map_text);
	return rc ? ISC_ENOMEM : 0;
}

/* An aws-ofi-nccl version "MAJOR.MINOR[...]" as MAJOR * 1000 + MINOR; -1 if unreadable. */
static int plugin_version(const char *v)
{
	char *end;
	long major, minor;
	if (!v || !*v)
		return -1;
	major = strtol(v, &end, 10);
	if (end == v || *end != '.' || major < 0 || major > 1000)
		return -1;
	v = end + 1;
	minor = strtol(v, &end, 10);
	if (end == v || minor < 0 || minor > 999)
		return -1;
	return (int)(major * 1000 + minor);
}

/*
 * The fabric's variables, from what the node's check found: the interface for
 * NCCL's and gloo's sockets (the one holding the node's private address), and on
 * a node with EFA devices what the image's aws-ofi-nccl needs (aws-ofi-nccl
 * doc/efa-env-var.md): FI_PROVIDER=efa and NCCL_PROTO=simple up to 1.5,
 * FI_EFA_USE_DEVICE_RDMA=1 for 1.6.x, nothing from 1.7 on (the default).
 */
static int fabric_env(const struct isc_boot_spec *spec, const struct node_fabric *f,
                      struct isc_buf *b, struct isc_buf *args)
{
	int rc = 0, v = plugin_version(spec->efa_plugin_version);
	if (f->ifname[0]) {
		rc |= add_env(b, args, "NCCL_SOCKET_IFNAME", f->ifname);
		rc |= add_env(b, args, "GLOO_SOCKET_IFNAME", f->ifname);
	}
	if (spec->fabric == ISC_FABRIC_EFA && f->n_uverbs > 0 && v >= 0) {
		if (v <= 1005) {
			rc |= add_env(b, args, "FI_PROVIDER", "efa");
			rc |= add_env(b, args, "NCCL_PROTO", "simple");
		} else if (v < 1007) {
			rc |= add_env(b, args, "FI_EFA_USE_DEVICE_RDMA", "1");
		}
	}
	return rc ? ISC_ENOMEM : 0;
}

/*
 * A dataset copy's name on a node: "@ORGID/LEAF" (docs/datasets.md): each
 * organisation's copies in a folder of their own under /data/.isc (issue 29), no
 * other '/', no ':' (docker -v), the leaf not starting with '.'.
 */
static int copy_name_ok(const char *c)
{
	const char *slash = c && c[0] == '@' ? strchr(c, '/') : NULL;
	if (!slash || slash == c + 1 || !slash[1] || slash[1] == '.' || strchr(slash + 1, '/') ||
	    strchr(c, ':'))
		return 0;
	for (const char *p = c + 1; p < slash; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

/*
 * The presigned URLs of every object the nodes fetch, one a line, in the order
 * boot_script reads them into the shell variables isc_u<dataset>_<object>: they
 * go ahead of the env file on the channel's stdin. The exec request's command
 * becomes the argv of the node's shell (sshd runs $SHELL -c COMMAND), which ps
 * shows to every user of the node for the whole boot, and a presigned URL is a
 * bearer credential (issue 42). The script's read and printf are builtins, so
 * no process ever has the URL in its argv. A URL must fit in a line of curl's
 * config (a quoted string): no control character, no " and no backslash.
 */
static int dataset_urls(const struct isc_boot_spec *spec, struct isc_buf *b, struct isc_err *err)
{
	for (size_t i = 0; spec->dataset_fetch && i < spec->n_datasets; i++) {
		const struct isc_boot_dataset *d = &spec->dataset_fetch[i];
		for (size_t k = 0; !d->on_node && k < d->n_files; k++) {
			const char *url = d->files[k].url;
			if (!isc_transfer_url_ok(url))
				return isc_err_set(err, ISC_EINVALID,
				                   "dataset %s: object %zu's URL has a "
				                   "character a node's curl config cannot "
				                   "hold (a control character, \" or \\)",
				                   spec->dataset_ids[i], k + 1);
			if (isc_buf_puts(b, url) || isc_buf_putc(b, '\n'))
				return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	return 0;
}

/*
 * The node-side fetch of one dataset (the index-th), on the node's transfer engine
 * (launcher/transfer.h): each object through its presigned URL (read from stdin into
 * $isc_u<index>_<object> by boot_script; never in argv), If-Match its ETag, in ranges
 * on parallel connections, sized by a 1-byte probe, then checked against its SHA-256.
 * Archives are expanded with the node's tar/unzip (iscd's unpacker vetted these exact
 * bytes), made read-only and moved into place as one rename, so a boot cut short
 * leaves no half copy that looks whole.
 */
static int fetch_script(const char *name, size_t index, const struct isc_boot_dataset *d,
                        struct isc_buf *b)
{
	struct isc_buf hdr, fmsg, cmsg;
	char var[64];
	int rc = 0;
	isc_buf_init(&hdr, 0);
	isc_buf_init(&fmsg, 0);
	isc_buf_init(&cmsg, 0);
	rc |= isc_buf_puts(b, "c=/data/.isc/");
	rc |= isc_shell_quote(b, d->copy_name);
	rc |= isc_buf_puts(b,
	                   "; if [ ! -d \"$c\" ]; then rm -rf \"$c.part\"; mkdir -p \"$c.part\"; ");
	for (size_t i = 0; i < d->n_files && !rc; i++) {
		const struct isc_boot_dataset_file *f = &d->files[i];
		struct isc_transfer_get g = {0};
		isc_buf_reset(&hdr);
		isc_buf_reset(&fmsg);
		isc_buf_reset(&cmsg);
		rc |= isc_buf_printf(&hdr, "If-Match: \"%s\"", f->etag);
		rc |= isc_buf_printf(&fmsg,
		                     "dataset %s: cannot fetch object %zu from S3 (a 412 means it "
		                     "changed since it was cached)",
		                     name, i + 1);
		rc |= isc_buf_printf(&cmsg,
		                     "dataset %s: object %zu does not match the cached copy's "
		                     "SHA-256 (it changed in S3)",
		                     name, i + 1);
		snprintf(var, sizeof(var), "isc_u%zu_%zu", index, i);
		g.url_var = var;
		g.header = isc_buf_cstr(&hdr);
		g.dest = "\"$c.part/.fetch\"";
		g.conf = "\"$c.part/.k\"";
		g.size = ISC_TRANSFER_SIZE_PROBE;
		g.parallel = NODE_PARALLEL;
		g.fail_msg = isc_buf_cstr(&fmsg);
		g.check_msg = isc_buf_cstr(&cmsg);
		g.fail_code = DATASET_FAILED;
		g.sha256 = f->sha256;
		if (!rc)
			rc |= isc_transfer_get_script(&g, b);
		if (f->archive == 1)
			rc |= isc_buf_puts(
			    b, "tar -xf \"$c.part/.fetch\" -C \"$c.part\" --no-same-owner "
			       "--no-same-permissions");
		else if (f->archive == 2)
			rc |= isc_buf_puts(
			    b, "unzip -qo \"$c.part/.fetch\" -d \"$c.part\" >/dev/null");
		if (f->archive) {
			rc |= isc_buf_printf(b,
			                     " || { echo 'dataset: cannot expand' >&2; exit %d; }; "
			                     "rm -f \"$c.part/.fetch\"; ",
			                     DATASET_FAILED);
		} else {
			rc |= isc_buf_puts(b, "f=\"$c.part\"/");
			rc |= isc_shell_quote(b, f->path);
			rc |= isc_buf_puts(
			    b, "; mkdir -p \"$(dirname \"$f\")\"; mv \"$c.part/.fetch\" \"$f\"; ");
		}
	}
	rc |= isc_buf_puts(b, "chmod -R a-w \"$c.part\"; mv \"$c.part\" \"$c\"; fi; ");
	isc_buf_cleanup(&hdr);
	isc_buf_cleanup(&fmsg);
	isc_buf_cleanup(&cmsg);
	return rc ? ISC_ENOMEM : 0;
}

/* The boot script of one rank; everything variable in it is quoted. */
static int boot_script(const struct isc_boot_spec *spec, const char *name, const char *env_args,
                       const struct node_fabric *f, struct isc_buf *b)
{
	int rc = 0;
	rc |= isc_buf_puts(b, "set -e; ");
	/* The presigned URLs, first on stdin (dataset_urls): in variables, never in argv. */
	for (size_t i = 0; spec->dataset_fetch && i < spec->n_datasets; i++)
		for (size_t k = 0;
		     !spec->dataset_fetch[i].on_node && k < spec->dataset_fetch[i].n_files; k++)
			rc |= isc_buf_printf(b, "IFS= read -r isc_u%zu_%zu; ", i, k);
	rc |= isc_buf_puts(b, "mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy; ");
	for (size_t i = 0; i < spec->n_datasets; i++) {
		rc |= isc_buf_puts(b, "mkdir -p /data/");
		rc |= isc_shell_quote(b, spec->dataset_ids[i]);
		rc |= isc_buf_puts(b, "; ");
		if (spec->dataset_fetch && spec->dataset_fetch[i].on_node && !rc) {
			/* Shipped by iscd before the boot (isc_launcher_push_dataset). */
			struct isc_buf t;
			isc_buf_init(&t, 0);
			rc |= isc_buf_puts(b, "[ -d /data/.isc/");
			rc |= isc_shell_quote(b, spec->dataset_fetch[i].copy_name);
			rc |= isc_buf_puts(b, " ] || { echo ");
			rc |= isc_buf_printf(&t, "dataset %s: its cached copy is not on this node",
			                     spec->dataset_ids[i]);
			rc |= isc_shell_quote(b, isc_buf_cstr(&t));
			rc |= isc_buf_printf(b, " >&2; exit %d; }; ", DATASET_FAILED);
			isc_buf_cleanup(&t);
		} else if (spec->dataset_fetch && !rc) {
			rc |= fetch_script(spec->dataset_ids[i], i, &spec->dataset_fetch[i], b);
		}
	}
	/* The env file is written from the channel's stdin, private to root. */
	rc |= isc_buf_puts(b, "umask 077; env_file=/tmp/");
	rc |= isc_shell_quote(b, name);
	/* The image is pulled already (pull_image): docker run finds it on the node. */
	rc |= isc_buf_puts(b, ".env; cat > \"$env_file\"; start() { docker run -d --name ");
	rc |= isc_shell_quote(b, name);
	/*
	 * The fabric's devices that exist on this node, each by name; memlock unlimited
	 * and IPC_LOCK, since RDMA pins its buffers (docs/launcher.md, "The node"). An
	 * IPC namespace and /dev/shm of the container's own (--ipc private): the ranks'
	 * processes in it share them, as NCCL needs, and nothing of them outlives the
	 * container or is seen by the node's next run (issue 42).
	 */
	rc |= isc_buf_puts(b, " --gpus all --network host --ipc private --ulimit memlock=-1:-1"
	                      " --cap-add IPC_LOCK --shm-size ");
	rc |= isc_shell_quote(b, f->shm_size);
	for (int i = 0; i < f->n_devices; i++) {
		rc |= isc_buf_puts(b, " --device ");
		rc |= isc_shell_quote(b, f->devices[i]);
	}
	rc |= isc_buf_puts(b, " -v /mnt/checkpoints:/mnt/checkpoints -v /mnt/crud:/mnt/crud"
	                      " -v /mnt/lossy:/mnt/lossy");
	for (size_t i = 0; i < spec->n_datasets; i++) {
		struct isc_buf vol;
		isc_buf_init(&vol, 0);
		if (spec->dataset_fetch)
			rc |=
			    isc_buf_printf(&vol, "/data/.isc/%s:/data/%s:ro",
			                   spec->dataset_fetch[i].copy_name, spec->dataset_ids[i]);
		else
			rc |= isc_buf_printf(&vol, "/data/%s:/data/%s:ro", spec->dataset_ids[i],
			                     spec->dataset_ids[i]);
		rc |= isc_buf_puts(b, " -v ");
		rc |= isc_shell_quote(b, isc_buf_cstr(&vol));
		isc_buf_cleanup(&vol);
	}
	rc |= isc_buf_puts(b, env_args);
	rc |= isc_buf_puts(b, " --env-file \"$env_file\" ");
	rc |= isc_shell_quote(b, spec->image);
	rc |= isc_buf_puts(b, " bash -lc ");
	rc |= isc_shell_quote(b, spec->command);
	/*
	 * A container of the same name is left only by a boot repeated after a crash:
	 * remove it and try again only then, which spares every first boot a docker call.
	 */
	rc |= isc_buf_puts(b, " >/dev/null; }; start 2>/dev/null || { docker rm -f ");
	rc |= isc_shell_quote(b, name);
	rc |= isc_buf_puts(b, " >/dev/null 2>&1 || true; start; }");
	return rc ? ISC_ENOMEM : 0;
}

/* The last 2 KiB or so of what a command printed, for messages. */
static void keep_tail(struct isc_buf *b, const char *data, size_t len)
{
	if (b->len + len > 2048)
		isc_buf_reset(b);
	if (len > 2048) {
		data += len - 2048;
		len = 2048;
	}
	isc_buf_append(b, data, len);
}

/* isc_ssh_exec's output callback: the tail of the error stream, for messages. */
static void keep_stderr(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (stderr_stream)
		keep_tail(ctx, data, len);
}

struct node_job {
	const struct isc_boot_spec *spec;
	const struct isc_node_target *nodes;
	size_t n;
	size_t index;
	const struct isc_launcher_opts *opts;
	int grace_s;
	int64_t deadline_ms;     /* connect deadline, isc_monotonic_ms() clock */
	volatile int *abort_all; /* set by the first failing node of a boot */
	int rc;
	int touched; /* the boot script started here, so a rollback must clean up */
	int started; /* the container was started on this node */
	int64_t handshake_ms, connect_ms, total_ms;
	int64_t pull_ms; /* the image's pull (pull_image); -1 if it never finished */
	char key_type[32], key_sha256[65];
	char fabric[384]; /* the fabric check's finding (struct isc_boot_result.fabric) */
	struct isc_err err;
	pthread_t thread;
	int has_thread;
};

static int open_node(struct node_job *j, struct isc_ssh **ssh)
{
	const struct isc_node_target *node = &j->nodes[j->index];
	struct isc_ssh_target t = {
	    node->host,        node->port,       node->user ? node->user : j->opts->user,
	    j->opts->key_path, node->pin_target, j->abort_all};
	int rc;

	t.key_pem = j->opts->key_pem;
	t.key_pem_len = j->opts->key_pem_len;
	rc = isc_ssh_connect(&t, j->deadline_ms, j->opts->check, j->opts->check_ctx, ssh, &j->err);
	if (!rc) {
		snprintf(j->key_type, sizeof(j->key_type), "%s", isc_ssh_hostkey_type(*ssh));
		snprintf(j->key_sha256, sizeof(j->key_sha256), "%s", isc_ssh_hostkey_sha256(*ssh));
	}
	return rc;
}

/* Keeps a node's standard output up to a cap (a node is not trusted to print little). */
static void keep_stdout_capped(void *ctx, const char *data, size_t len, int stderr_stream)
{
	struct isc_buf *b = ctx;
	if (stderr_stream || b->len + len > 16384)
		return;
	isc_buf_append(b, data, len);
}

/* Letters, digits and the characters of extra only, shorter than max. */
static int word_ok(const char *s, size_t max, const char *extra)
{
	size_t n = strlen(s);
	if (n == 0 || n >= max)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(extra, *p)))
			return 0;
	return 1;
}

/* Reads the check's KEY=VALUE lines; anything unexpected from the node is dropped. */
static void fabric_parse(char *out, struct node_fabric *f)
{
	char *save = NULL;
	memset(f, 0, sizeof(*f));
	f->efa_domains = -1;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, '=');
		if (!v)
			continue;
		*v++ = '\0';
		if (!strcmp(line, "device") && f->n_devices < FABRIC_MAX_DEVICES &&
		    !strncmp(v, "/dev/infiniband/", 16) && word_ok(v + 16, 40, "_.-")) {
			snprintf(f->devices[f->n_devices++], sizeof(f->devices[0]), "%s", v);
			if (!strncmp(v + 16, "uverbs", 6))
				f->n_uverbs++;
		} else if (!strcmp(line, "if") && word_ok(v, sizeof(f->ifname), "_.:-")) {
			snprintf(f->ifname, sizeof(f->ifname), "%s", v);
		} else if (!strcmp(line, "efa_domains") && word_ok(v, 6, "")) {
			f->efa_domains = atoi(v);
		} else if (!strcmp(line, "mem_kib") && word_ok(v, 16, "")) {
			f->mem_kib = atoll(v);
		} else if (!strcmp(line, "shm_kib") && word_ok(v, 16, "")) {
			f->shm_kib = atoll(v);
		}
	}
}

/*
 * The fabric check, before anything is pulled (docs/launcher.md, "The node"):
 * the character devices in /dev/infiniband (passed to the container each by
 * name), libfabric's EFA domains when fi_info is installed, the interface that
 * holds the node's private address (NCCL's and gloo's sockets), its RAM and
 * /dev/shm. A shape that promises a fabric to a gang, on a node without its
 * uverbs devices: ISC_ECAPACITY, as if the cloud had not had the capacity, so
 * the broker tries the next shape.
 */
static int fabric_check(struct node_job *j, struct isc_ssh *ssh, struct node_fabric *f)
{
	const struct isc_node_target *node = &j->nodes[j->index];
	const struct isc_boot_spec *spec = j->spec;
	struct isc_buf cmd, out;
	char domains[48], shm_note[96] = "";
	int rc, status = -1;

	isc_buf_init(&cmd, 0);
	isc_buf_init(&out, 0);
	isc_buf_puts(&cmd, "for d in /dev/infiniband/*; do [ -c \"$d\" ] && echo \"device=$d\"; "
	                   "done; if command -v fi_info >/dev/null 2>&1; then echo "
	                   "\"efa_domains=$(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c "
	                   "'domain:')\"; fi; a=");
	isc_shell_quote(&cmd, node->private_ip);
	isc_buf_puts(&cmd, "; i=$(ip -o -4 addr show 2>/dev/null | awk -v a=\"$a\" '{split($4, p, "
	                   "\"/\"); if (p[1] == a) {print $2; exit}}'); [ -n \"$i\" ] || "
	                   "i=$(ip -o route get \"$a\" 2>/dev/null | sed -n 's/.* dev "
	                   "\\([^ ]*\\).*/\\1/p'); echo \"if=${i%%@*}\"; echo \"mem_kib=$(awk "
	                   "'/^MemTotal:/ {print $2}' /proc/meminfo)\"; echo \"shm_kib=$(df -Pk "
	                   "/dev/shm 2>/dev/null | awk 'NR == 2 {print $2}')\"; true");
	rc = isc_ssh_exec(ssh, isc_buf_cstr(&cmd), NULL, 0, 60000, keep_stdout_capped, &out, NULL,
	                  &status, &j->err);
	if (!rc && status != 0)
		rc = isc_err_set(&j->err, ISC_ETRANSIENT, "the fabric check failed (exit %d)",
		                 status);
	if (!rc)
		fabric_parse(out.data ? out.data : (char[]){""}, f);
	isc_buf_cleanup(&cmd);
	isc_buf_cleanup(&out);
	if (rc)
		return rc;
	/* Half the RAM unless configured: what a node's own /dev/shm is by default. */
	if (spec->shm_size && spec->shm_size[0])
		snprintf(f->shm_size, sizeof(f->shm_size), "%s", spec->shm_size);
	else if (f->mem_kib > 0)
		snprintf(f->shm_size, sizeof(f->shm_size), "%lldk", f->mem_kib / 2);
	else
		snprintf(f->shm_size, sizeof(f->shm_size), "16g");
	if (f->shm_kib > 0)
		snprintf(shm_note, sizeof(shm_note), "; the node's /dev/shm %.1f GiB",
		         (double)f->shm_kib / (1024.0 * 1024.0));
	if (f->efa_domains < 0)
		snprintf(domains, sizeof(domains), "no fi_info");
	else
		snprintf(domains, sizeof(domains), "fi_info: %d efa domain(s)", f->efa_domains);
	snprintf(j->fabric, sizeof(j->fabric),
	         "%s promised%s: %d uverbs device(s) in /dev/infiniband (%d passed with --device), "
	         "%s; socket interface %s; --shm-size %s%s%s",
	         isc_fabric_name(spec->fabric), spec->fabric_required ? " to the gang" : "",
	         f->n_uverbs, f->n_devices, domains, f->ifname[0] ? f->ifname : "unknown",
	         f->shm_size, spec->shm_size && spec->shm_size[0] ? "" : " (half the RAM)",
	         shm_note);
	if (spec->fabric != ISC_FABRIC_NONE && spec->fabric_required && f->n_uverbs == 0)
		return isc_err_set(&j->err, ISC_ECAPACITY,
		                   "the shape promises %s between its nodes, but this node has no "
		                   "/dev/infiniband/uverbs* device (%s)",
		                   isc_fabric_name(spec->fabric), domains);
	return 0;
}

/*
 * The last line of a terminal's output that says something: carriage returns,
 * escape sequences (docker's cursor moves and colours) and control bytes dropped.
 * Copied into copy (at least strlen(text) + 1 bytes); points into it.
 */
static const char *last_line(const char *text, char *copy)
{
	char *w = copy, *line = copy, *last = copy;
	for (const char *r = text; *r; r++) {
		if (*r == '\033') { /* ESC [ params final, or ESC and one byte */
			if (r[1] == '[') {
				r += 2;
				while (*r && !(*r >= '@' && *r <= '~'))
					r++;
			} else if (r[1]) {
				r++;
			}
			if (!*r)
				break;
			continue;
		}
		if (*r == '\n') {
			*w = '\0';
			if (w > line)
				last = line;
			line = ++w;
			continue;
		}
		if ((unsigned char)*r < ' ')
			continue;
		*w++ = *r;
	}
	*w = '\0';
	return w > line ? line : last;
}

/*
 * docker pull IMAGE on its own, judged by progress (issue 46: a node in its pull
 * stage is not dead). A 10 GB image takes 4-5 minutes and a larger one or a slow
 * registry longer, so no fixed total fits: the pull is alive while output keeps
 * coming, and stops when none came for image_pull_stall_ms or after
 * image_pull_max_ms in all. On a terminal (isc_ssh_stream_open_tty), since docker
 * shows the layers' download progress only there; a node that refuses one still
 * prints each layer's changes of state. A boot failed elsewhere cancels it.
 */
static int pull_image(struct node_job *j, struct isc_ssh *ssh)
{
	const char *image = j->spec->image;
	long stall =
	    j->opts->image_pull_stall_ms > 0 ? j->opts->image_pull_stall_ms : PULL_STALL_MS;
	long max = j->opts->image_pull_max_ms > 0 ? j->opts->image_pull_max_ms : PULL_MAX_MS;
	struct isc_ssh_stream *st = NULL;
	struct isc_buf cmd, out, errout;
	struct isc_err e;
	char buf[4096];
	int64_t t0 = isc_monotonic_ms(), last = t0;
	int rc, tty = 0, status = -1, id = 0, opened;

	isc_buf_init(&cmd, 0);
	isc_buf_init(&out, 0);
	isc_buf_init(&errout, 0);
	rc = isc_buf_puts(&cmd, "docker pull ") || isc_shell_quote(&cmd, image) ? ISC_ENOMEM : 0;
	if (rc) {
		rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	rc = isc_ssh_stream_open_tty(ssh, isc_buf_cstr(&cmd), max, stall, j->abort_all, &tty, &st,
	                             &e);
	opened = !rc;
	/* No input: on a terminal an EOF is not needed (and not a half-close to a pty). */
	if (!rc && !tty)
		rc = isc_ssh_stream_send_eof(st, &e);
	while (!rc) {
		ssize_t n = isc_ssh_stream_read_any(st, buf, sizeof(buf), &id, &e);
		if (n < 0)
			rc = (int)n;
		else if (n == 0)
			break;
		else {
			last = isc_monotonic_ms();
			keep_tail(id ? &errout : &out, buf, (size_t)n);
		}
	}
	isc_ssh_stream_close(st, rc ? NULL : &status);
	if (rc) {
		int64_t now = isc_monotonic_ms();
		if (j->abort_all && *j->abort_all)
			rc = isc_err_set(&j->err, ISC_ETRANSIENT, "docker pull %s: cancelled",
			                 image);
		else if (opened && now - last >= stall)
			rc = isc_err_set(
			    &j->err, ISC_ETRANSIENT,
			    "docker pull %s: no progress for %ld s (image_pull_stall_ms)", image,
			    stall / 1000);
		else if (opened && now - t0 >= max)
			rc = isc_err_set(&j->err, ISC_ETRANSIENT,
			                 "docker pull %s: not done after %ld s (image_pull_max_ms)",
			                 image, max / 1000);
		else
			rc = isc_err_set(&j->err, e.code, "docker pull %s: %s", image, e.msg);
		goto out;
	}
	if (status != 0) {
		/* On a terminal the error came with the output: its last line. */
		char copy[2049];
		const char *why = last_line(isc_buf_cstr(errout.len ? &errout : &out), copy);
		rc = isc_err_set(&j->err, ISC_EINVALID, "docker pull %s failed: %s", image,
		                 why[0] ? why : "(no message)");
		goto out;
	}
	j->pull_ms = isc_monotonic_ms() - t0;
out:
	isc_buf_cleanup(&cmd);
	isc_buf_cleanup(&out);
	isc_buf_cleanup(&errout);
	return rc;
}

static void *boot_node(void *arg)
{
	struct node_job *j = arg;
	const struct isc_node_target *node = &j->nodes[j->index];
	struct isc_ssh *ssh = NULL;
	struct isc_buf env, env_args, script, errout;
	struct node_fabric fabric;
	char *name = isc_launcher_container_name(j->spec->experiment_id, node->rank);
	int64_t t0 = isc_monotonic_ms();
	int status = -1;

	isc_buf_init(&env, 0);
	isc_buf_init(&env_args, 0);
	isc_buf_init(&script, 0);
	isc_buf_init(&errout, 0);
	j->handshake_ms = j->connect_ms = -1;
	if (!name) {
		j->rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if ((j->rc = open_node(j, &ssh)))
		goto out;
	j->connect_ms = isc_monotonic_ms() - t0;
	j->handshake_ms = isc_ssh_login_started_ms(ssh) - t0;
	if ((j->rc = fabric_check(j, ssh, &fabric)))
		goto out;
	/* stdin: the presigned URLs (the script reads them first), then the env file. */
	if ((j->rc = dataset_urls(j->spec, &env, &j->err)))
		goto out;
	if (env_file(j->spec, j->nodes, j->n, node->rank, &env, &env_args) ||
	    fabric_env(j->spec, &fabric, &env, &env_args) ||
	    boot_script(j->spec, name, isc_buf_cstr(&env_args), &fabric, &script)) {
		j->rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/* From here the node may get a container even if we stop listening: roll it back. */
	j->touched = 1;
	/* A new container of this name: what follows had of the old one's log is void. */
	isc_launch_follow_forget(name);
	/* The image first, with bounds of its own; then the script, which finds it there. */
	if ((j->rc = pull_image(j, ssh)))
		goto out;
	j->rc =
	    isc_ssh_exec(ssh, isc_buf_cstr(&script), env.data, env.len, j->opts->command_timeout_ms,
	                 keep_stderr, &errout, NULL, &status, &j->err);
	if (j->rc)
		goto out;
	while (errout.len &&
	       (errout.data[errout.len - 1] == '\n' || errout.data[errout.len - 1] == '\r'))
		errout.data[--errout.len] = '\0';
	if (status == DATASET_FAILED)
		j->rc = isc_err_set(&j->err, ISC_EINVALID, "%s", isc_buf_cstr(&errout));
	else if (status != 0)
		j->rc = isc_err_set(&j->err, ISC_EINVALID,
		                    "starting the container failed (exit %d): %s", status,
		                    isc_buf_cstr(&errout));
	else
		j->started = 1;
out:
	if (j->rc && j->abort_all)
		*j->abort_all = 1;
	j->total_ms = isc_monotonic_ms() - t0;
	isc_ssh_free(ssh);
	if (env.data) /* it held the presigned URLs */
		explicit_bzero(env.data, env.len);
	isc_buf_cleanup(&env);
	isc_buf_cleanup(&env_args);
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
	j->deadline_ms = isc_monotonic_ms() + 10000;
	if (name && open_node(j, &ssh) == 0) {
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

/* Runs fn for every node (or those with only[i] set) in its own thread and waits for all. */
static struct node_job *run_all(const struct isc_boot_spec *spec,
                                const struct isc_node_target *nodes, size_t n,
                                const struct isc_launcher_opts *opts, int grace_s,
                                void *(*fn)(void *), const int *only, volatile int *abort_all)
{
	struct node_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	int64_t deadline = isc_monotonic_ms() + opts->connect_deadline_ms;

	if (!jobs)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		jobs[i] = (struct node_job){.spec = spec,
		                            .nodes = nodes,
		                            .n = n,
		                            .index = i,
		                            .opts = opts,
		                            .grace_s = grace_s,
		                            .deadline_ms = deadline,
		                            .abort_all = abort_all,
		                            .handshake_ms = -1,
		                            .connect_ms = -1,
		                            .pull_ms = -1};
		if (only && !only[i])
			continue;
		if (pthread_create(&jobs[i].thread, NULL, fn, &jobs[i]) != 0) {
			jobs[i].rc = isc_err_set(&jobs[i].err, ISC_EIO, "cannot start a thread");
			if (abort_all)
				*abort_all = 1;
		} else {
			jobs[i].has_thread = 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (jobs[i].has_thread)
			pthread_join(jobs[i].thread, NULL);
	return jobs;
}

/* What a boot needs before any node is touched: ranks unique, one rank 0, every field set. */
static int check_boot(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                      size_t n, const struct isc_launcher_opts *opts, struct isc_err *err)
{
	int masters = 0;

	if (!spec->experiment_id || !spec->experiment_name || !spec->compute_mode ||
	    !spec->command || !spec->image || (spec->n_datasets && !spec->dataset_ids) ||
	    (!opts->key_path && !opts->key_pem))
		return isc_err_set(err, ISC_EINVALID, "boot spec incomplete");
	if (n == 0)
		return isc_err_set(err, ISC_EINVALID, "no nodes to boot");
	for (size_t i = 0; i < spec->n_datasets; i++)
		if (!spec->dataset_ids[i] || !spec->dataset_ids[i][0] ||
		    strchr(spec->dataset_ids[i], '/') || strchr(spec->dataset_ids[i], ':'))
			return isc_err_set(err, ISC_EINVALID, "bad dataset id");
	for (size_t i = 0; spec->dataset_fetch && i < spec->n_datasets; i++) {
		const char *c = spec->dataset_fetch[i].copy_name;
		if (!copy_name_ok(c) ||
		    !spec->dataset_fetch[i].n_files != !!spec->dataset_fetch[i].on_node)
			return isc_err_set(err, ISC_EINVALID, "bad dataset copy for %s",
			                   spec->dataset_ids[i]);
	}
	for (size_t i = 0; i < n; i++) {
		if (!nodes[i].host || !nodes[i].private_ip)
			return isc_err_set(err, ISC_EINVALID, "rank %d has no address",
			                   nodes[i].rank);
		masters += nodes[i].rank == 0;
		for (size_t k = 0; k < i; k++)
			if (nodes[k].rank == nodes[i].rank)
				return isc_err_set(err, ISC_EINVALID, "rank %d appears twice",
				                   nodes[i].rank);
	}
	if (masters != 1)
		return isc_err_set(err, ISC_EINVALID, "no rank 0 among the nodes");
	return 0;
}

static struct isc_launcher_opts with_defaults(const struct isc_launcher_opts *opts)
{
	struct isc_launcher_opts o = *opts;
	if (!o.user)
		o.user = "root";
	if (o.connect_deadline_ms <= 0)
		o.connect_deadline_ms = 300000;
	return o;
}

int isc_launcher_boot_nodes(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                            size_t n, const struct isc_launcher_opts *opts,
                            struct isc_boot_result *results, struct isc_err *err)
{
	struct isc_launcher_opts o = with_defaults(opts);
	struct node_job *jobs, *undo = NULL;
	volatile int cancel_all = 0;
	int rc = 0, *touched;

	if ((rc = check_boot(spec, nodes, n, &o, err)))
		return rc;
	/* The caller's cancel (a node it knows is gone) stops the nodes still connecting too. */
	jobs = run_all(spec, nodes, n, &o, 0, boot_node, o.only, o.cancel ? o.cancel : &cancel_all);
	if (!jobs)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	/* Report the first node that failed on its own, not one cancelled because of it. */
	for (int pass = 0; pass < 2 && !rc; pass++) {
		for (size_t i = 0; i < n && !rc; i++) {
			if (!jobs[i].rc || (pass == 0 && strstr(jobs[i].err.msg, "cancelled")))
				continue;
			rc = jobs[i].rc;
			isc_err_set(err, rc, "rank %d (%s): %s", nodes[i].rank, nodes[i].host,
			            jobs[i].err.msg);
		}
	}
	if (rc) {
		/* All or nothing: remove what may have started, so no rank runs alone. */
		touched = calloc(n, sizeof(*touched));
		if (touched) {
			for (size_t i = 0; i < n; i++)
				touched[i] = jobs[i].touched;
			undo = run_all(spec, nodes, n, &o, 0, stop_node, touched, NULL);
			free(touched);
		}
	}
	for (size_t i = 0; results && i < n; i++) {
		struct isc_boot_result *r = &results[i];
		memset(r, 0, sizeof(*r));
		r->rank = nodes[i].rank;
		r->rc = jobs[i].rc;
		r->started = jobs[i].started;
		r->rolled_back = undo && jobs[i].touched && !undo[i].rc;
		r->handshake_ms = (long)jobs[i].handshake_ms;
		r->connect_ms = (long)jobs[i].connect_ms;
		r->total_ms = (long)jobs[i].total_ms;
		r->pull_ms = (long)jobs[i].pull_ms;
		memcpy(r->key_type, jobs[i].key_type, sizeof(r->key_type));
		memcpy(r->key_sha256, jobs[i].key_sha256, sizeof(r->key_sha256));
		memcpy(r->fabric, jobs[i].fabric, sizeof(r->fabric));
		r->err = jobs[i].err;
	}
	free(undo);
	free(jobs);
	return rc;
}

int isc_launcher_boot(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                      size_t n, const struct isc_launcher_opts *opts, struct isc_err *err)
{
	return isc_launcher_boot_nodes(spec, nodes, n, opts, NULL, err);
}

void isc_launcher_stop(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                       size_t n, const struct isc_launcher_opts *opts, int grace_s)
{
	struct isc_launcher_opts o = with_defaults(opts);
	free(run_all(spec, nodes, n, &o, grace_s < 0 ? 0 : grace_s, stop_node, NULL, NULL));
}

/* ---- artifacts: a tar stream over the channel, in pieces ---- */

static const char *const artifact_names[3] = {"checkpoints", "crud", "lossy"};

/*
 * "rank N (instance, host)" or "rank N (host)", for transfer errors: which node broke
 * a limit (issue 42). Per thread, overwritten by the next call.
 */
static const char *node_label(const struct isc_node_target *node)
{
	static _Thread_local char label[320];
	if (node->pin_target && strcmp(node->pin_target, node->host) != 0)
		snprintf(label, sizeof(label), "rank %d (%s, %s)", node->rank, node->pin_target,
		         node->host);
	else
		snprintf(label, sizeof(label), "rank %d (%s)", node->rank, node->host);
	return label;
}

int isc_launcher_connect(const struct isc_node_target *node, const struct isc_launcher_opts *opts,
                         struct isc_ssh **ssh, struct isc_err *err)
{
	struct isc_ssh_target t = {node->host,
	                           node->port,
	                           node->user ? node->user : opts->user ? opts->user : "root",
	                           opts->key_path,
	                           node->pin_target,
	                           opts->cancel};
	t.key_pem = opts->key_pem;
	t.key_pem_len = opts->key_pem_len;
	return isc_ssh_connect(&t, isc_monotonic_ms() + 15000, opts->check, opts->check_ctx, ssh,
	                       err);
}

/* What the unpacker reads: the remote tar's standard output, 64 KiB at a time. */
struct pull_source {
	struct isc_ssh_stream *st;
	char buf[65536];
};

static ssize_t pull_read(void *ctx, const void **buf, struct isc_err *err)
{
	struct pull_source *p = ctx;
	*buf = p->buf;
	return isc_ssh_stream_read(p->st, p->buf, sizeof(p->buf), err);
}

/* The last line of a remote error stream, for a message. */
static const char *last_words(const char *tail)
{
	const char *end = tail + strlen(tail), *p;
	while (end > tail && (end[-1] == '\n' || end[-1] == '\r'))
		end--;
	for (p = end; p > tail && p[-1] != '\n';)
		p--;
	return p;
}

/* Reads what follows the archive's end (tar's padding), at most 1 MiB; 1 at the end. */
static int drain(struct pull_source *p, struct isc_err *err)
{
	for (size_t total = 0; total < (1u << 20);) {
		const void *ignored;
		ssize_t n = pull_read(p, &ignored, err);
		if (n <= 0)
			return n == 0;
		total += (size_t)n;
	}
	return 0;
}

int isc_launcher_pull_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                int which, struct isc_unpack_report *report, struct isc_err *err)
{
	struct isc_ssh *ssh = NULL;
	struct pull_source *src = NULL;
	struct isc_unpack_report own;
	struct isc_unpack_limits lim = {opts->artifact_max_bytes, opts->artifact_max_entries,
	                                opts->min_free_bytes, NULL, 0};
	const char *tops[3];
	struct isc_buf remote;
	char *fresh = NULL, words[256] = "";
	int rc, status = -1, ended = 0;

	if (!report)
		report = &own;
	memset(report, 0, sizeof(*report));
	isc_buf_init(&remote, 0);
	isc_buf_puts(&remote, "mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy && tar -C /mnt "
	                      "--sparse -cf -");
	for (int i = 0; i < 3; i++)
		if (which & (1 << i)) {
			tops[lim.n_tops++] = artifact_names[i];
			isc_buf_printf(&remote, " %s", artifact_names[i]);
		}
	lim.tops = tops;
	src = calloc(1, sizeof(*src));
	rc = src ? 0 : isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!rc)
		rc = isc_launcher_connect(node, opts, &ssh, err);
	/* A fresh empty folder per sync: nothing of an earlier sync can be reached through. The
	 * broker runs one step per experiment at a time, so an older one is a crash's leftover. */
	if (!rc) {
		isc_unpack_remove_leftovers(local_dir);
		rc = isc_unpack_fresh_dir(local_dir, &fresh, err);
	}
	if (!rc)
		rc = isc_ssh_stream_open(ssh, isc_buf_cstr(&remote), 0, opts->command_timeout_ms,
		                         opts->cancel, &src->st, err);
	if (!rc) {
		isc_ssh_stream_pace(src->st, &opts->transfer);
		rc = isc_unpack_stream(pull_read, src, fresh, &lim, report, err);
	}
	if (!rc)
		ended = drain(src, err);
	if (src && src->st) {
		snprintf(words, sizeof(words), "%s", last_words(isc_ssh_stream_stderr(src->st)));
		isc_ssh_stream_close(src->st, ended ? &status : NULL);
	}
	/* GNU tar's exit 1 means a file changed while it was read: the archive is whole. */
	if (!rc && status != 0 && status != 1)
		rc = isc_err_set(err, ISC_EIO, "packing artifacts on %s failed (exit %d): %s",
		                 node->host, status, words);
	if (!rc)
		rc = isc_unpack_swap_into(fresh, local_dir, tops, lim.n_tops, report->tops_seen,
		                          err);
	else if (fresh)
		isc_unpack_remove_tree(fresh, NULL);
	if (rc)
		isc_err_wrap(err, "%s: artifact pull", node_label(node));
	free(fresh);
	free(src);
	isc_buf_cleanup(&remote);
	isc_ssh_free(ssh);
	return rc;
}

/* Sends the local tar stream (read from `tar`) into the remote command, then waits for it. */
static int push_stream_to(struct isc_ssh *ssh, FILE *tar, const char *remote, const char *what,
                          const struct isc_launcher_opts *opts, const char *host,
                          struct isc_err *err)
{
	struct isc_ssh_stream *st = NULL;
	char *chunk = malloc(65536), words[256] = "", ignored[4096];
	size_t got;
	int rc, status = -1;
	ssize_t n = 0;

	rc = chunk ? 0 : isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!rc)
		rc = isc_ssh_stream_open(ssh, remote, 0, opts->command_timeout_ms, opts->cancel,
		                         &st, err);
	if (!rc)
		isc_ssh_stream_pace(st, &opts->transfer);
	while (!rc && (got = fread(chunk, 1, 65536, tar)) > 0)
		rc = isc_ssh_stream_write(st, chunk, got, err);
	if (!rc)
		rc = isc_ssh_stream_send_eof(st, err);
	while (!rc && (n = isc_ssh_stream_read(st, ignored, sizeof(ignored), err)) > 0)
		;
	if (!rc && n < 0)
		rc = (int)n;
	if (st) {
		snprintf(words, sizeof(words), "%s", last_words(isc_ssh_stream_stderr(st)));
		isc_ssh_stream_close(st, rc ? NULL : &status);
	}
	if (!rc && status != 0)
		rc = isc_err_set(err, ISC_EIO, "unpacking %s on %s failed (exit %d): %s", what,
		                 host, status, words);
	free(chunk);
	return rc;
}

static int push_stream(struct isc_ssh *ssh, FILE *tar, const struct isc_launcher_opts *opts,
                       const char *host, struct isc_err *err)
{
	return push_stream_to(ssh, tar, "mkdir -p /mnt && tar -C /mnt -xf -", "artifacts", opts,
	                      host, err);
}

int isc_launcher_push_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                struct isc_err *err)
{
	struct isc_buf cmd;
	int rc = 0, any = 0;

	/* Only the artifact folders: never a half-finished sync's .incoming-* folder. */
	isc_buf_init(&cmd, 0);
	isc_buf_puts(&cmd, "exec tar -C ");
	isc_shell_quote(&cmd, local_dir);
	isc_buf_puts(&cmd, " --sparse -cf -");
	for (int i = 0; i < 3; i++) {
		struct stat st;
		char *path = NULL;
		if (asprintf(&path, "%s/%s", local_dir, artifact_names[i]) >= 0 &&
		    lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			isc_buf_printf(&cmd, " %s", artifact_names[i]);
			any = 1;
		}
		free(path);
	}
	if (!any) {
		isc_buf_cleanup(&cmd);
		return 0; /* nothing was brought home yet */
	}
	/* A new node that is slow to answer, or a lost connection, is tried again. */
	for (int attempt = 1; attempt <= 3; attempt++) {
		struct isc_ssh *ssh = NULL;
		FILE *tar;
		int tar_status;

		/* A node the caller knows is gone is not tried again. */
		if (attempt > 1 && opts->cancel && *opts->cancel)
			break;
		if (attempt > 1)
			sleep(2);
		rc = isc_launcher_connect(node, opts, &ssh, err);
		if (rc) {
			if (rc == ISC_ETRANSIENT)
				continue;
			break;
		}
		/* Local side: our own quoted path and fixed names, never anything from a node. */
		tar = popen(isc_buf_cstr(&cmd), "r");
		if (!tar) {
			isc_ssh_free(ssh);
			rc = isc_err_set(err, ISC_EIO, "cannot run tar");
			break;
		}
		rc = push_stream(ssh, tar, opts, node->host, err);
		tar_status = pclose(tar);
		if (!rc && tar_status != 0)
			rc = isc_err_set(err, ISC_EIO, "packing artifacts from %s failed",
			                 local_dir);
		isc_ssh_free(ssh);
		if (rc != ISC_ETRANSIENT)
			break;
	}
	if (rc)
		isc_err_wrap(err, "restoring artifacts onto %s", node->host);
	isc_buf_cleanup(&cmd);
	return rc;
}

/* One node's share of isc_launcher_push_artifacts_all. */
struct push_job {
	const struct isc_node_target *node;
	const struct isc_launcher_opts *opts;
	const char *local_dir;
	int rc;
	struct isc_err err;
	pthread_t thread;
	int has_thread;
};

static void *push_node(void *arg)
{
	struct push_job *p = arg;
	p->rc = isc_launcher_push_artifacts(p->node, p->opts, p->local_dir, &p->err);
	return NULL;
}

int isc_launcher_push_artifacts_all(const struct isc_node_target *nodes, size_t n,
                                    const struct isc_launcher_opts *opts, const char *local_dir,
                                    int *rcs, struct isc_err *err)
{
	struct push_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	size_t failed = 0, first = 0;
	int rc = 0;

	if (!jobs)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	/*
	 * Each node gets its own stream from its own local tar, so a slow or lost node
	 * never holds up the others and is retried alone; the local reads are the
	 * same files, mostly from the page cache after the first.
	 */
	for (size_t i = 0; i < n; i++) {
		jobs[i] =
		    (struct push_job){.node = &nodes[i], .opts = opts, .local_dir = local_dir};
		if (n == 1 || pthread_create(&jobs[i].thread, NULL, push_node, &jobs[i]) != 0)
			push_node(&jobs[i]);
		else
			jobs[i].has_thread = 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (jobs[i].has_thread)
			pthread_join(jobs[i].thread, NULL);
		if (rcs)
			rcs[i] = jobs[i].rc;
		if (jobs[i].rc && failed++ == 0)
			first = i;
	}
	if (failed) {
		char more[80] = "";
		if (failed > 1)
			snprintf(more, sizeof(more), "; %zu of %zu nodes did not get the artifacts",
			         failed, n);
		rc = jobs[first].rc;
		isc_err_set(err, rc, "rank %d (%s): %s%s", nodes[first].rank, nodes[first].host,
		            jobs[first].err.msg, more);
	}
	free(jobs);
	return rc;
}

/* ---- datasets: iscd's cached copy onto a pool node ---- */

/* The listing both sides compute: every file's path and size, sorted bytewise, hashed. */
#define LISTING_CMD "find . -type f -printf '%P %s\\n' | LC_ALL=C sort | sha256sum | cut -d' ' -f1"

/* The local copy's listing digest (64 hex), by the same command the node runs. */
static int local_listing(const char *dir, char out[65], struct isc_err *err)
{
	struct isc_buf cmd;
	FILE *p;
	char line[128] = "";
	int status;

	isc_buf_init(&cmd, 0);
	isc_buf_puts(&cmd, "cd ");
	isc_shell_quote(&cmd, dir);
	isc_buf_puts(&cmd, " && " LISTING_CMD);
	p = popen(isc_buf_cstr(&cmd), "r");
	isc_buf_cleanup(&cmd);
	if (!p)
		return isc_err_set(err, ISC_EIO, "cannot list %s", dir);
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	status = pclose(p);
	line[strcspn(line, "\r\n")] = '\0';
	if (status != 0 || strlen(line) != 64)
		return isc_err_set(err, ISC_EIO, "cannot list the cached copy %s", dir);
	memcpy(out, line, 65);
	return 0;
}

int isc_launcher_push_dataset(const struct isc_node_target *node,
                              const struct isc_launcher_opts *opts, const char *local_copy,
                              const char *copy_name, int *shipped, struct isc_err *err)
{
	struct isc_buf check, unpack, tarcmd;
	char digest[65];
	int rc;

	*shipped = 0;
	if (!copy_name_ok(copy_name))
		return isc_err_set(err, ISC_EINVALID, "bad dataset copy name");
	if ((rc = local_listing(local_copy, digest, err)))
		return rc;
	isc_buf_init(&check, 0);
	isc_buf_init(&unpack, 0);
	isc_buf_init(&tarcmd, 0);
	/* On the node: intact when the stamp and a fresh listing both say this digest. */
	isc_buf_puts(&check, "c=/data/.isc/");
	isc_shell_quote(&check, copy_name);
	isc_buf_printf(
	    &check, "; [ -d \"$c\" ] && [ \"$(cat \"$c.stamp\" 2>/dev/null)\" = %s ] && ", digest);
	isc_buf_puts(&check, "[ \"$(cd \"$c\" && " LISTING_CMD ")\" = ");
	isc_buf_printf(&check, "%s ]", digest);
	/*
	 * Into a private .part folder (another boot may ship the same copy at once),
	 * read-only, then swapped in whole; the stamp last. A copy that was there but
	 * not intact is replaced.
	 */
	isc_buf_puts(&unpack, "set -e; c=/data/.isc/");
	isc_shell_quote(&unpack, copy_name);
	isc_buf_printf(&unpack,
	               "; p=\"$c.part.$$\"; mkdir -p \"${c%%/*}\"; rm -rf \"$p\"; mkdir \"$p\"; "
	               "tar -C \"$p\" -xf - --no-same-owner --no-same-permissions; "
	               "chmod -R a-w \"$p\"; rm -f \"$c.stamp\"; "
	               "if [ -e \"$c\" ]; then chmod -R u+w \"$c\"; rm -rf \"$c\"; fi; "
	               "mv -T \"$p\" \"$c\"; printf %%s %s > \"$c.stamp\"",
	               digest);
	/* Local side: our own quoted path, never anything from a node. */
	isc_buf_puts(&tarcmd, "exec tar -C ");
	isc_shell_quote(&tarcmd, local_copy);
	isc_buf_puts(&tarcmd, " -cf - .");
	for (int attempt = 1; attempt <= 3; attempt++) {
		struct isc_ssh *ssh = NULL;
		FILE *tar;
		int status = -1, tar_status;

		if (attempt > 1)
			sleep(2);
		rc = isc_launcher_connect(node, opts, &ssh, err);
		if (rc) {
			if (rc == ISC_ETRANSIENT)
				continue;
			break;
		}
		rc = isc_ssh_exec(ssh, isc_buf_cstr(&check), NULL, 0, 60000, NULL, NULL, NULL,
		                  &status, err);
		if (!rc && status == 0) {
			isc_ssh_free(ssh);
			break; /* the node has it, intact */
		}
		tar = rc ? NULL : popen(isc_buf_cstr(&tarcmd), "r");
		if (!rc && !tar)
			rc = isc_err_set(err, ISC_EIO, "cannot run tar");
		if (!rc) {
			rc = push_stream_to(ssh, tar, isc_buf_cstr(&unpack), "the dataset copy",
			                    opts, node->host, err);
			tar_status = pclose(tar);
			if (!rc && tar_status != 0)
				rc = isc_err_set(err, ISC_EIO, "packing %s failed", local_copy);
			if (!rc)
				*shipped = 1;
		}
		isc_ssh_free(ssh);
		if (rc != ISC_ETRANSIENT)
			break;
	}
	if (rc)
		isc_err_wrap(err, "shipping dataset copy %s to %s", copy_name, node->host);
	isc_buf_cleanup(&check);
	isc_buf_cleanup(&unpack);
	isc_buf_cleanup(&tarcmd);
	return rc;
}
