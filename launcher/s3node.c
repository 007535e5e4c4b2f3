/*
 * Artifacts in object storage, the node's side (launcher/s3node.h): listing rank 0's
 * folders, its multipart part PUTs and every node's restore, each one SSH command
 * whose bytes go between the node and the bucket. Every URL travels on the channel's
 * stdin, never in a command line.
 */
#include "launcher/s3node.h"

#include "common/clock.h"
#include "launcher/shellquote.h"
#include "launcher/transfer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S3NODE_FAILED 94 /* a transfer failed (the engine's exit code) */
/* The most a listing may send: artifact_max_entries names of at most 1 KiB, or this. */
#define LISTING_MAX (64u << 20)

static const char *const tops[3] = {"checkpoints", "crud", "lossy"};

static long transfer_timeout(const struct isc_launcher_opts *opts)
{
	return opts->transfer.deadline_ms > 0 ? (long)opts->transfer.deadline_ms : 7200000L;
}

/* Collects a command's standard output up to cap (then drops the rest, noting it) and the
 * tail of its error stream. */
struct collect {
	struct isc_buf out;
	size_t cap;
	int over;
	char err_tail[512];
};

static void collect_fn(void *ctx, const char *data, size_t len, int stderr_stream)
{
	struct collect *c = ctx;
	if (stderr_stream) {
		size_t have = strlen(c->err_tail), keep = sizeof(c->err_tail) - 1;
		if (len >= keep) {
			memcpy(c->err_tail, data + len - keep, keep);
			c->err_tail[keep] = '\0';
		} else {
			if (have + len > keep) {
				memmove(c->err_tail, c->err_tail + (have + len - keep), keep - len);
				have = keep - len;
			}
			memcpy(c->err_tail + have, data, len);
			c->err_tail[have + len] = '\0';
		}
		return;
	}
	if (c->out.len + len > c->cap) {
		c->over = 1;
		return;
	}
	isc_buf_append(&c->out, data, len);
}

/* The last line of the error stream, for a message. */
static const char *last_line(char *tail)
{
	char *end = tail + strlen(tail), *p;
	while (end > tail && (end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	p = strrchr(tail, '\n');
	return p ? p + 1 : tail;
}

void isc_node_listing_cleanup(struct isc_node_listing *l)
{
	for (size_t i = 0; l && i < l->n; i++)
		free(l->entries[i].path);
	if (l) {
		free(l->entries);
		memset(l, 0, sizeof(*l));
	}
}

/*
 * find's %T@: seconds since the epoch, '.', then the fraction (GNU find prints 10
 * digits, the nanoseconds and a 0). *end after the field; 0 when it is not that form
 * (a time before the epoch included: such a file never matches, it is uploaded).
 */
static int mtime_parse(const char *p, int64_t *ns, const char **end)
{
	int64_t sec = 0, frac = 0;
	int digits = 0, nd = 0;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (sec > (INT64_MAX / 1000000000 - 10) / 10)
			return 0;
		sec = sec * 10 + (*p - '0');
	}
	if (!digits)
		return 0;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (nd < 9) {
				frac = frac * 10 + (*p - '0');
				nd++;
			}
	for (; nd < 9; nd++)
		frac *= 10;
	*ns = sec * 1000000000 + frac;
	*end = p;
	return 1;
}

static void refuse(struct isc_node_listing *l, const char *path, const char *why)
{
	if (!l->refused++) {
		size_t o = 0;
		for (const char *p = path; *p && o + 1 < 100; p++)
			l->first_refused[o++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
		snprintf(l->first_refused + o, sizeof(l->first_refused) - o, ": %s", why);
	}
}

int isc_launcher_list_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, int which,
                                struct isc_node_listing *out, struct isc_err *err)
{
	struct isc_buf cmd;
	struct collect c;
	struct isc_ssh *ssh = NULL;
	int status = -1, rc;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	isc_buf_init(&c.out, 0);
	isc_buf_init(&cmd, 0);
	c.cap = LISTING_MAX;
	/* find -P (the default) never follows a link, the starting point's included: a
	 * linked /mnt/checkpoints is listed as the link it is, and refused. */
	isc_buf_puts(&cmd, "cd /mnt 2>/dev/null || exit 0; for t in");
	for (int i = 0; i < 3; i++)
		if (which & (1 << i))
			isc_buf_printf(&cmd, " %s", tops[i]);
	isc_buf_puts(&cmd, "; do if [ -e \"$t\" ] || [ -L \"$t\" ]; then find \"$t\" -printf "
	                   "'%y %s %T@ %p\\0'; fi; done");
	rc = isc_launcher_connect(node, opts, &ssh, err);
	if (!rc)
		rc = isc_ssh_exec(ssh, isc_buf_cstr(&cmd), NULL, 0, 600000, collect_fn, &c,
		                  opts->cancel, &status, err);
	isc_ssh_free(ssh);
	isc_buf_cleanup(&cmd);
	if (!rc && (status != 0 || c.over))
		rc = isc_err_set(err, ISC_EIO, "listing rank 0's artifact folders: %s",
		                 c.over ? "more than 64 MiB of names" : last_line(c.err_tail));
	for (size_t off = 0; !rc && off < c.out.len;) {
		const char *rec = c.out.data + off, *end = memchr(rec, '\0', c.out.len - off);
		char type;
		unsigned long long size;
		int used = 0, has_mtime;
		int64_t mtime_ns = 0;
		const char *path, *why, *t;
		if (!end)
			break; /* a record cut short: the node's output ended mid-name */
		off = (size_t)(end - c.out.data) + 1;
		if (sscanf(rec, "%c %llu %n", &type, &size, &used) < 2 || !used)
			continue;
		/* "TYPE SIZE MTIME PATH": a time that is not SEC.FRAC is read to its space. */
		has_mtime = mtime_parse(rec + used, &mtime_ns, &t) && *t == ' ';
		if (!has_mtime)
			t = rec + used + strcspn(rec + used, " ");
		if (*t != ' ')
			continue;
		path = t + 1;
		if (type != 'f' && type != 'd') {
			refuse(out, path,
			       type == 'l' ? "a symbolic link" : "not a regular file or folder");
			continue;
		}
		if ((why = isc_manifest_path_why(path))) {
			refuse(out, path, why);
			continue;
		}
		if (opts->artifact_max_entries && out->n + 1 > opts->artifact_max_entries) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "rank 0's artifact folders hold more than %llu entries "
			                 "(artifact_max_entries)",
			                 (unsigned long long)opts->artifact_max_entries);
			break;
		}
		if (type == 'f' && opts->artifact_max_bytes &&
		    out->total + size > opts->artifact_max_bytes) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "rank 0's artifact folders hold more than %llu bytes of files "
			    "(the cap)",
			    (unsigned long long)opts->artifact_max_bytes);
			break;
		}
		{
			struct isc_node_entry *g =
			    realloc(out->entries, (out->n + 1) * sizeof(*out->entries));
			if (!g || !(g[out->n].path = strdup(path))) {
				if (g)
					out->entries = g;
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				break;
			}
			out->entries = g;
			g[out->n].is_dir = type == 'd';
			g[out->n].size = type == 'f' ? size : 0;
			g[out->n].has_mtime = type == 'f' && has_mtime;
			g[out->n].mtime_ns = type == 'f' && has_mtime ? mtime_ns : 0;
			out->total += g[out->n].size;
			out->n++;
		}
	}
	isc_buf_cleanup(&c.out);
	if (rc)
		isc_node_listing_cleanup(out);
	return rc;
}

int isc_launcher_upload_artifacts(const struct isc_node_target *node,
                                  const struct isc_launcher_opts *opts,
                                  struct isc_node_upload *files, size_t n, struct isc_err *err)
{
	struct isc_buf cmd, in;
	struct collect c;
	struct isc_ssh *ssh = NULL;
	struct isc_transfer_put put = {"\"$d\"", 0, S3NODE_FAILED};
	size_t n_parts = 0;
	int status = -1, rc = 0;

	memset(&c, 0, sizeof(c));
	isc_buf_init(&c.out, 0);
	isc_buf_init(&cmd, 0);
	isc_buf_init(&in, 0);
	c.cap = 1u << 20;
	/* stdin: the files' absolute paths, one a line, then "K PART FIRST LEN URL" lines. */
	for (size_t k = 0; k < n; k++) {
		if (strchr(files[k].path, '\n') || isc_manifest_path_why(files[k].path))
			rc = isc_err_set(err, ISC_EINVALID, "upload: a path against the rules");
		isc_buf_printf(&in, "/mnt/%s\n", files[k].path);
	}
	for (size_t k = 0; k < n && !rc; k++)
		for (unsigned p = 0; p < files[k].n_parts; p++) {
			uint64_t first = (uint64_t)p * files[k].part_size;
			uint64_t len = files[k].size - first < files[k].part_size
			                   ? files[k].size - first
			                   : files[k].part_size;
			if (!isc_transfer_url_ok(files[k].part_urls[p])) {
				rc = isc_err_set(
				    err, ISC_EINVALID,
				    "upload: a part URL a node's curl config cannot hold");
				break;
			}
			isc_buf_printf(&in, "%zu %u %llu %llu %s\n", k + 1, p + 1,
			               (unsigned long long)first, (unsigned long long)len,
			               files[k].part_urls[p]);
			files[k].etags[p][0] = '\0';
			n_parts++;
		}
	isc_buf_puts(&cmd,
	             "set -e; d=$(mktemp -d /tmp/.isc-up.XXXXXX); trap 'rm -rf \"$d\"' EXIT; ");
	isc_transfer_read_lines("\"$d/files\"", n, &cmd);
	isc_transfer_read_lines("\"$d/parts\"", n_parts, &cmd);
	if (isc_transfer_put_script(&put, &cmd) || !in.data)
		rc = rc ? rc : isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!rc && !(rc = isc_launcher_connect(node, opts, &ssh, err)))
		rc = isc_ssh_exec(ssh, isc_buf_cstr(&cmd), in.data, in.len, transfer_timeout(opts),
		                  collect_fn, &c, opts->cancel, &status, err);
	isc_ssh_free(ssh);
	if (in.data)
		memset(in.data, 0, in.cap); /* the URLs */
	isc_buf_cleanup(&in);
	isc_buf_cleanup(&cmd);
	if (!rc && status != 0)
		rc = isc_err_set(err, ISC_EIO, "the node's upload failed (exit %d): %s", status,
		                 last_line(c.err_tail));
	/* "K PART ETAG" lines, in any order. */
	for (char *line = c.out.data, *nl; !rc && line && *line; line = nl ? nl + 1 : NULL) {
		unsigned long k, p;
		char etag[80];
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (sscanf(line, "%lu %lu %79s", &k, &p, etag) != 3 || k < 1 || k > n || p < 1 ||
		    p > files[k - 1].n_parts)
			continue;
		snprintf(files[k - 1].etags[p - 1], 80, "%s", etag);
	}
	for (size_t k = 0; k < n && !rc; k++)
		for (unsigned p = 0; p < files[k].n_parts && !rc; p++)
			if (!files[k].etags[p][0])
				rc = isc_err_set(err, ISC_EIO,
				                 "the node reported no ETag for part %u of %s",
				                 p + 1, files[k].path);
	isc_buf_cleanup(&c.out);
	return rc;
}

int isc_launcher_restore_script(const struct isc_manifest *m, const char *root, uint64_t max_bytes,
                                struct isc_buf *b)
{
	struct isc_buf dest, msg;
	size_t n_files = 0, k = 0;
	uint64_t total = 0;
	int rc = 0;

	isc_buf_init(&dest, 0);
	isc_buf_init(&msg, 0);
	for (size_t i = 0; i < m->n; i++)
		if (!m->entries[i].is_dir) {
			n_files++;
			total += m->entries[i].size;
		}
	rc |= isc_buf_puts(b, "set -e; umask 022; r=");
	rc |= isc_shell_quote(b, root);
	/*
	 * Every path checked before anything is written (the broker checked them too): the
	 * three folders only, no absolute path, no "." or ".." component, no empty one.
	 */
	rc |= isc_buf_printf(
	    b,
	    "; ok() { case \"$1\" in ''|/*|.|..|./*|../*|*/.|*/..|*/./*|*/../*|*//*|*/) return 1;; "
	    "esac; case \"$1\" in checkpoints|checkpoints/*|crud|crud/*|lossy|lossy/*) return 0;; "
	    "esac; return 1; }; bad() { echo \"manifest refused: $1\" >&2; exit %d; }; ",
	    ISC_RESTORE_REFUSED);
	for (size_t i = 0; i < m->n; i++) {
		rc |= isc_buf_puts(b, "ok ");
		rc |= isc_shell_quote(b, m->entries[i].path);
		rc |= isc_buf_printf(
		    b, " || bad 'entry %zu: a path outside the artifact folders'; ", i + 1);
	}
	rc |= isc_buf_printf(
	    b, "[ %llu -le %llu ] || bad 'the files come to more than the cap'; ",
	    (unsigned long long)total,
	    (unsigned long long)(max_bytes && max_bytes < INT64_MAX ? max_bytes : INT64_MAX));
	/* A private staging folder, fresh: nothing in it was made by anyone else. */
	rc |= isc_buf_puts(
	    b, "rm -rf \"$r\"/.isc-restore.*; st=$(mktemp -d \"$r/.isc-restore.XXXXXX\"); "
	       "trap 'rm -rf \"$st\"' EXIT; ");
	rc |= isc_transfer_read_lines("\"$st/.u\"", n_files, b);
	rc |= isc_buf_puts(b, "mkdir \"$st/checkpoints\" \"$st/crud\" \"$st/lossy\"; ");
	for (size_t i = 0; i < m->n && !rc; i++) {
		const struct isc_manifest_entry *e = &m->entries[i];
		struct isc_transfer_get g = {0};
		if (e->is_dir) {
			rc |= isc_buf_puts(b, "mkdir -p \"$st\"/");
			rc |= isc_shell_quote(b, e->path);
			rc |= isc_buf_puts(b, "; ");
			continue;
		}
		k++;
		isc_buf_reset(&dest);
		isc_buf_reset(&msg);
		rc |= isc_buf_puts(&dest, "\"$st\"/");
		rc |= isc_shell_quote(&dest, e->path);
		rc |= isc_buf_puts(b, "mkdir -p \"$(dirname ");
		rc |= isc_buf_puts(b, isc_buf_cstr(&dest));
		rc |= isc_buf_printf(b, ")\"; u=$(sed -n '%zup' \"$st/.u\"); ", k);
		rc |= isc_buf_printf(&msg,
		                     "restore: object %zu (%s) cannot be fetched or is not the "
		                     "recorded bytes",
		                     k, e->path);
		g.url_var = "u";
		g.dest = isc_buf_cstr(&dest);
		g.conf = "\"$st/.k\"";
		g.size = e->size;
		g.fail_msg = isc_buf_cstr(&msg);
		g.check_msg = isc_buf_cstr(&msg);
		g.fail_code = S3NODE_FAILED;
		g.etag_md5 = e->etag;
		g.part_size = e->part_size;
		if (!rc)
			rc |= isc_transfer_get_script(&g, b);
		/* The mtime rank 0 listed: the first sync after this restore finds the file
		 * unchanged (its quick check) and uploads nothing. mv keeps it. */
		if (e->has_mtime && e->mtime_ns >= 0)
			rc |= isc_buf_printf(b, "touch -m -d @%lld.%09lld %s; ",
			                     (long long)(e->mtime_ns / 1000000000),
			                     (long long)(e->mtime_ns % 1000000000), g.dest);
	}
	/* Only regular files and folders (the engine wrote nothing else), then swapped in. */
	rc |= isc_buf_printf(
	    b,
	    "rm -f \"$st/.u\" \"$st/.k\"; [ -z \"$(find \"$st\" -mindepth 1 ! -type f ! -type d "
	    "-print -quit)\" ] || bad 'staging holds something other than files and folders'; "
	    "for t in checkpoints crud lossy; do rm -rf \"$r/$t\"; mv \"$st/$t\" \"$r/$t\"; done");
	isc_buf_cleanup(&dest);
	isc_buf_cleanup(&msg);
	return rc ? ISC_ENOMEM : 0;
}

struct restore_job {
	const struct isc_node_target *node;
	const struct isc_launcher_opts *opts;
	const char *script;
	const struct isc_buf *in;
	int rc;
	struct isc_err err;
	pthread_t thread;
	int has_thread;
};

static void *restore_node(void *arg)
{
	struct restore_job *j = arg;
	for (int attempt = 1; attempt <= 3; attempt++) {
		struct isc_ssh *ssh = NULL;
		struct collect c;
		int status = -1;
		memset(&c, 0, sizeof(c));
		isc_buf_init(&c.out, 0);
		c.cap = 65536;
		if (attempt > 1)
			sleep(2);
		j->rc = isc_launcher_connect(j->node, j->opts, &ssh, &j->err);
		if (!j->rc)
			j->rc = isc_ssh_exec(ssh, j->script, j->in->data, j->in->len,
			                     transfer_timeout(j->opts), collect_fn, &c,
			                     j->opts->cancel, &status, &j->err);
		isc_ssh_free(ssh);
		if (!j->rc && status != 0)
			j->rc = isc_err_set(&j->err,
			                    status == ISC_RESTORE_REFUSED ? ISC_EINVALID : ISC_EIO,
			                    "restore from the bucket failed (exit %d): %s", status,
			                    last_line(c.err_tail));
		isc_buf_cleanup(&c.out);
		if (j->rc != ISC_ETRANSIENT || (j->opts->cancel && *j->opts->cancel))
			break;
	}
	return NULL;
}

int isc_launcher_restore_artifacts_all(const struct isc_node_target *nodes, size_t n,
                                       const struct isc_launcher_opts *opts,
                                       const struct isc_manifest *m, char *const *urls, int *rcs,
                                       struct isc_err *err)
{
	struct restore_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	struct isc_buf script, in;
	size_t failed = 0, first = 0, k = 0;
	int rc = 0;

	isc_buf_init(&script, 0);
	isc_buf_init(&in, 0);
	if (!jobs)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < m->n && !rc; i++)
		if (!m->entries[i].is_dir) {
			if (!isc_transfer_url_ok(urls[k]))
				rc = isc_err_set(err, ISC_EINVALID,
				                 "restore: a URL a node's curl config cannot hold");
			else if (isc_buf_puts(&in, urls[k]) || isc_buf_putc(&in, '\n'))
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			k++;
		}
	if (!rc && isc_launcher_restore_script(m, "/mnt", opts->artifact_max_bytes, &script))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!in.data && !rc && isc_buf_puts(&in, ""))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		jobs[i] = (struct restore_job){
		    .node = &nodes[i], .opts = opts, .script = isc_buf_cstr(&script), .in = &in};
		if (n == 1 || pthread_create(&jobs[i].thread, NULL, restore_node, &jobs[i]) != 0)
			restore_node(&jobs[i]);
		else
			jobs[i].has_thread = 1;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		if (jobs[i].has_thread)
			pthread_join(jobs[i].thread, NULL);
		if (rcs)
			rcs[i] = jobs[i].rc;
		if (jobs[i].rc && failed++ == 0)
			first = i;
	}
	if (!rc && failed) {
		char more[80] = "";
		if (failed > 1)
			snprintf(more, sizeof(more), "; %zu of %zu nodes did not restore", failed,
			         n);
		rc = jobs[first].rc;
		isc_err_set(err, rc, "rank %d (%s): %s%s", nodes[first].rank, nodes[first].host,
		            jobs[first].err.msg, more);
	}
	if (in.data)
		memset(in.data, 0, in.cap);
	isc_buf_cleanup(&in);
	isc_buf_cleanup(&script);
	free(jobs);
	return rc;
}
