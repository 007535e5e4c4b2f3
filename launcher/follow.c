/*
 * Following a running cluster: one thread per rank runs `docker logs -f` on
 * its node, appending to <output dir>/rank_N.txt on the broker's side, then
 * `docker wait` for the exit code. A lost connection is retried.
 *
 * Rank logs only grow. The file is opened for appending, once per follow;
 * docker logs replays a container's output from its first byte on every
 * connection, so a reconnect skips, per stream, the bytes this follow already
 * has and the file goes on where it ended. A follow that starts on a file
 * that already holds output (iscd restarted) appends a marker line before
 * the first replayed byte, since the replay then repeats what is above it; a
 * container that is gone adds nothing, not even the marker (docker logs is
 * not run for it). A follow that starts again in the same process (the
 * broker stops a rank's follower and may start another while the cluster is
 * still listed as running) goes on where the last one stopped: what each
 * follow had of a log is remembered per log file until a boot replaces the
 * container (isc_launch_follow_forget), so it neither replays nor marks
 * anything (issue 34). With a log sink (the broker's: the store, issue 45) every
 * byte the file gets goes there too, at the sink's own offsets: a follow that
 * starts where the sink already holds output of the rank (another replica
 * followed it before this one took the burst over) marks the replay as above,
 * though this host's file may be empty. Past rank_log_max_bytes, or
 * while the broker's disk is nearly full, output is dropped and a marker line
 * says so.
 *
 * A container that no longer exists (docker wait fails three times in a row on a
 * node that answers) is reported as exited with code -1, so the broker is never
 * left waiting for a rank nobody can see. What `docker wait` prints is read
 * into a fixed 4 KiB tail (launcher/tail.h): a node that prints without end
 * costs the broker no memory (issue 29).
 */
#include "launcher/launcher.h"

#include "artifacts/unpack.h"
#include "common/buf.h"
#include "common/clock.h"
#include "keys/vault.h"
#include "launcher/shellquote.h"
#include "launcher/tail.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The exit code of the logs command when the container does not exist (nothing was printed). */
#define NO_CONTAINER 125

struct follow_rank {
	struct isc_launch_follow *f;
	int rank;
	char *host, *pin_target, *name, *log_path, *user;
	int port;
	pthread_t thread;
	int started;
	int exited; /* guarded by f->lock */
	int code;
	/* Owned by the rank's thread: */
	int fd;               /* rank_N.txt, O_APPEND */
	uint64_t seen[2];     /* bytes of stdout/stderr this follow has had (kept or dropped) */
	uint64_t at[2];       /* of the current connection */
	uint64_t size;        /* of the file */
	uint64_t dropped;     /* bytes not kept (cap, full disk) */
	int capped, disk_low; /* a marker for each was written */
	int replay_marker;    /* the file held output of an earlier follow: mark the replay */
	char last;            /* the file's last byte ('\n' when empty) */
	void *sink;           /* the log sink's handle (NULL: none) */
	char sink_last;       /* the sink's copy's last byte */
	int continued;        /* open_log went on where a follow of this process stopped */
};

/*
 * What the follows of this process had of each rank log when they stopped, so
 * a follow of the same container started again goes on where the last one
 * stopped. An entry is used only while the file is the same one (device,
 * inode) and nothing else wrote to it (its size), and it is dropped when a
 * boot replaces the container (isc_launch_follow_forget). A few dozen bytes
 * per rank; the oldest go past HAD_MAX.
 */
#define HAD_MAX 4096

struct follow_had {
	char *log_path, *name; /* rank_N.txt and the container */
	dev_t dev;
	ino_t ino;
	uint64_t size, seen[2], dropped;
	int capped;
	int no_file; /* the follow had no file (a sink only): what it had of the stream */
	char last;
	struct follow_had *next; /* newest first */
};

static struct follow_had *had_list;
static size_t had_n;
static pthread_mutex_t had_lock = PTHREAD_MUTEX_INITIALIZER;

static void had_free(struct follow_had *h)
{
	free(h->log_path);
	free(h->name);
	free(h);
}

/* Unlinks and returns the entry of log_path (NULL when none); had_lock held. */
static struct follow_had *had_take_locked(const char *log_path)
{
	for (struct follow_had **p = &had_list; *p; p = &(*p)->next) {
		if (strcmp((*p)->log_path, log_path) == 0) {
			struct follow_had *h = *p;
			*p = h->next;
			had_n--;
			return h;
		}
	}
	return NULL;
}

struct isc_launch_follow {
	pthread_mutex_t lock;
	volatile int cancel;
	/* A pipe written once at the cancel: its read end wakes every rank's wait (ssh.h). */
	int wake[2];
	char *user, *key_path, *experiment_id;
	char *key_pem; /* a copy of opts->key_pem, wiped at the free */
	size_t key_pem_len;
	struct isc_launcher_opts opts; /* strings point at the copies above */
	struct follow_rank *ranks;
	size_t n;
};

static void sink_write(struct follow_rank *r, const char *data, size_t len)
{
	if (r->sink && len > 0) {
		r->f->opts.log_sink->append(r->sink, data, len);
		r->sink_last = data[len - 1];
	}
}

static void write_all(struct follow_rank *r, const char *data, size_t len)
{
	sink_write(r, data, len);
	while (len > 0) {
		ssize_t w = write(r->fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r->dropped += len; /* a failing disk: nothing better to do than count */
			return;
		}
		r->size += (uint64_t)w;
		r->last = data[w - 1];
		data += w;
		len -= (size_t)w;
	}
}

/* A line of the broker's own, on a line of its own. */
static void marker(struct follow_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void marker(struct follow_rank *r, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (r->sink && r->sink_last != '\n')
		sink_write(r, "\n", 1);
	if (r->last != '\n') {
		/* the file's own newline: the sink's copy had its own above */
		void *sink = r->sink;
		r->sink = NULL;
		write_all(r, "\n", 1);
		r->sink = sink;
	}
	write_all(r, line, (size_t)n);
}

/* New output of the container: kept up to the cap, while the disk has room. */
static void keep_output(struct follow_rank *r, const char *data, size_t len)
{
	const struct isc_launcher_opts *o = &r->f->opts;
	int64_t free_bytes;

	if (r->capped) {
		r->dropped += len;
		return;
	}
	free_bytes = o->min_free_bytes ? isc_unpack_free_bytes(r->log_path) : -1;
	if (free_bytes >= 0 && (uint64_t)free_bytes < o->min_free_bytes + len) {
		if (!r->disk_low)
			marker(
			    r,
			    "---- isc: the broker's disk is nearly full; output is dropped until "
			    "it has room ----");
		r->disk_low = 1;
		r->dropped += len;
		return;
	}
	if (r->disk_low) {
		marker(r,
		       "---- isc: %llu bytes of output were dropped while the disk was full ----",
		       (unsigned long long)r->dropped);
		r->disk_low = 0;
	}
	if (o->log_max_bytes && r->size + len > o->log_max_bytes) {
		size_t room = r->size < o->log_max_bytes ? (size_t)(o->log_max_bytes - r->size) : 0;
		write_all(r, data, room);
		r->dropped += len - room;
		marker(r,
		       "---- isc: this log reached rank_log_max_bytes (%llu bytes); later output "
		       "is not kept ----",
		       (unsigned long long)o->log_max_bytes);
		r->capped = 1;
		return;
	}
	write_all(r, data, len);
}

/* Output of `docker logs -f`: what this follow has not had yet goes to the file. */
static void on_output(void *ctx, const char *data, size_t len, int stream)
{
	struct follow_rank *r = ctx;
	uint64_t start = r->at[stream], end = start + len;

	r->at[stream] = end;
	if (end <= r->seen[stream])
		return; /* replayed after a reconnect: already in the file */
	if (start < r->seen[stream]) {
		data += r->seen[stream] - start;
		len -= (size_t)(r->seen[stream] - start);
	}
	r->seen[stream] = end;
	if (r->replay_marker) {
		/* Only now: a container that is gone replays nothing, and gets no marker. */
		r->replay_marker = 0;
		marker(r,
		       "---- isc: following rank %d again; the container's output is replayed "
		       "from its start below ----",
		       r->rank);
	}
	keep_output(r, data, len);
}

/*
 * Opens rank_N.txt for appending (never truncating), owner-only, and goes on
 * where an earlier follow of this process stopped when it knows the file.
 */
static int open_log(struct follow_rank *r)
{
	struct follow_had *h;
	struct stat st;

	r->fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (r->fd < 0 || fstat(r->fd, &st) != 0)
		return -1;
	r->size = (uint64_t)st.st_size;
	r->last = '\n';
	pthread_mutex_lock(&had_lock);
	h = had_take_locked(r->log_path);
	pthread_mutex_unlock(&had_lock);
	if (h && !h->no_file && h->dev == st.st_dev && h->ino == st.st_ino &&
	    h->size == (uint64_t)st.st_size && strcmp(h->name, r->name) == 0) {
		memcpy(r->seen, h->seen, sizeof(r->seen));
		r->dropped = h->dropped;
		r->capped = h->capped;
		r->last = h->last;
		r->continued = 1;
		had_free(h);
		return 0;
	}
	if (h)
		had_free(h);
	if (st.st_size > 0) {
		char c = '\n';
		int rd = open(r->log_path, O_RDONLY | O_CLOEXEC);
		if (rd >= 0 && pread(rd, &c, 1, st.st_size - 1) == 1)
			r->last = c;
		if (rd >= 0)
			close(rd);
		r->replay_marker = 1;
	}
	return 0;
}

/* Remembers what this follow had of its log, for a follow started again (open_log). */
static void remember_log(struct follow_rank *r, int logged)
{
	struct follow_had *h = calloc(1, sizeof(*h)), *old;
	struct stat st;

	if (!h || (logged && (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode))) ||
	    !(h->log_path = strdup(r->log_path)) || !(h->name = strdup(r->name))) {
		if (h)
			had_free(h);
		return;
	}
	if (logged) {
		h->dev = st.st_dev;
		h->ino = st.st_ino;
		h->size = (uint64_t)st.st_size;
	} else {
		h->no_file = 1; /* only the sink had it: the stream's position is what counts */
	}
	memcpy(h->seen, r->seen, sizeof(h->seen));
	h->dropped = r->dropped;
	h->capped = r->capped;
	h->last = r->last;
	pthread_mutex_lock(&had_lock);
	old = had_take_locked(r->log_path);
	h->next = had_list;
	had_list = h;
	had_n++;
	if (had_n > HAD_MAX) {
		struct follow_had **p = &had_list;
		while ((*p)->next)
			p = &(*p)->next;
		had_free(*p);
		*p = NULL;
		had_n--;
	}
	pthread_mutex_unlock(&had_lock);
	if (old)
		had_free(old);
}

void isc_launch_follow_forget(const char *container_name)
{
	struct follow_had *gone = NULL;

	pthread_mutex_lock(&had_lock);
	for (struct follow_had **p = &had_list; *p;) {
		if (strcmp((*p)->name, container_name) == 0) {
			struct follow_had *h = *p;
			*p = h->next;
			had_n--;
			h->next = gone;
			gone = h;
		} else {
			p = &(*p)->next;
		}
	}
	pthread_mutex_unlock(&had_lock);
	while (gone) {
		struct follow_had *next = gone->next;
		had_free(gone);
		gone = next;
	}
}

static void *follow_main(void *arg)
{
	struct follow_rank *r = arg;
	struct isc_launch_follow *f = r->f;
	struct isc_buf logs_cmd, wait_cmd;
	struct isc_tail out; /* docker wait's last 4 KiB, however much the node prints */
	int missing = 0;     /* docker wait failures in a row on a reachable node */
	int logged;

	isc_buf_init(&logs_cmd, 0);
	isc_buf_init(&wait_cmd, 0);
	/* Only a container that exists is asked for its logs: docker's own complaint about a
	 * missing one never lands in the rank's log. */
	isc_buf_puts(&logs_cmd, "docker inspect ");
	isc_shell_quote(&logs_cmd, r->name);
	isc_buf_printf(&logs_cmd, " >/dev/null 2>&1 || exit %d; exec docker logs -f ",
	               NO_CONTAINER);
	isc_shell_quote(&logs_cmd, r->name);
	isc_buf_puts(&wait_cmd, "docker wait ");
	isc_shell_quote(&wait_cmd, r->name);
	r->sink_last = '\n';
	if (f->opts.log_sink) {
		uint64_t held = 0;
		r->sink = f->opts.log_sink->open(f->opts.log_sink->ctx, f->experiment_id, r->rank,
		                                 &held, &r->sink_last);
		if (held > 0)
			r->replay_marker = 1; /* unless open_log finds this process's follow */
	}
	logged = open_log(r) == 0;
	if (!logged && r->sink) {
		/* No file (the Output Path of another host): a follow of this process that
		 * fed the sink before goes on where it stopped in the stream, as with a file. */
		struct follow_had *h;
		pthread_mutex_lock(&had_lock);
		h = had_take_locked(r->log_path);
		pthread_mutex_unlock(&had_lock);
		if (h && h->no_file && strcmp(h->name, r->name) == 0) {
			memcpy(r->seen, h->seen, sizeof(r->seen));
			r->continued = 1;
		}
		if (h)
			had_free(h);
	}
	if (r->continued)
		r->replay_marker = 0;
	if (!logged) {
		/* Without its log the rank is still followed for its exit code. */
		if (r->fd >= 0)
			close(r->fd);
		r->fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	}

	while (!f->cancel) {
		struct isc_ssh_target t = {
		    r->host,       r->port,    r->user ? r->user : f->user,          f->key_path,
		    r->pin_target, &f->cancel, f->wake[0] >= 0 ? &f->wake[0] : NULL, f->key_pem,
		    f->key_pem_len};
		struct isc_ssh *ssh = NULL;
		struct isc_err err;
		int status = -1, rc, whole;

		/* Short attempts, so a stop request is noticed soon even when the node is gone. */
		if (isc_ssh_connect(&t, isc_monotonic_ms() + 2000, f->opts.check, f->opts.check_ctx,
		                    &ssh, &err)) {
			for (int i = 0; i < 20 && !f->cancel; i++)
				usleep(100 * 1000);
			continue;
		}
		r->at[0] = r->at[1] = 0;
		rc = isc_ssh_exec(ssh, isc_buf_cstr(&logs_cmd), NULL, 0, 0, on_output, r,
		                  &f->cancel, &status, &err);
		/* docker logs -f ends with 0 once the container has exited and all was sent. */
		whole = !rc && status == 0;
		if (!rc && !f->cancel) {
			isc_tail_init(&out);
			rc = isc_ssh_exec(ssh, isc_buf_cstr(&wait_cmd), NULL, 0, 30000,
			                  isc_tail_keep_stdout, &out, &f->cancel, &status, &err);
			if (!rc && status == 0 && !whole) {
				/* The stream broke before the end: fetch what it missed (the replay
				 * adds only what the file lacks). */
				int ignored;
				r->at[0] = r->at[1] = 0;
				isc_ssh_exec(ssh, isc_buf_cstr(&logs_cmd), NULL, 0, 60000,
				             on_output, r, &f->cancel, &ignored, &err);
			}
			if (!rc && (status == 0 || ++missing >= 3)) {
				if (r->dropped && r->capped)
					marker(r,
					       "---- isc: %llu bytes of output over the cap were "
					       "not kept "
					       "----",
					       (unsigned long long)r->dropped);
				pthread_mutex_lock(&f->lock);
				r->exited = 1;
				r->code = status == 0 ? isc_tail_last_int(&out) : -1;
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
	if (logged || r->sink)
		remember_log(r, logged);
	if (r->sink) {
		f->opts.log_sink->close(r->sink);
		r->sink = NULL;
	}
	isc_buf_cleanup(&logs_cmd);
	isc_buf_cleanup(&wait_cmd);
	return NULL;
}

/* Sets the cancel and wakes every rank's wait: a byte nobody reads keeps the pipe readable. */
static void follow_cancel(struct isc_launch_follow *f)
{
	f->cancel = 1;
	if (f->wake[1] >= 0 && write(f->wake[1], "x", 1) < 0) {
		/* Full (a second cancel) or closed: the waits wake anyway. */
	}
}

void isc_launch_follow_cancel(struct isc_launch_follow *f)
{
	if (f)
		follow_cancel(f);
}

void isc_launch_follow_free(struct isc_launch_follow *f)
{
	if (!f)
		return;
	follow_cancel(f);
	for (size_t i = 0; i < f->n; i++) {
		struct follow_rank *r = &f->ranks[i];
		if (r->started)
			pthread_join(r->thread, NULL);
		free(r->host);
		free(r->pin_target);
		free(r->user);
		free(r->name);
		free(r->log_path);
		if (r->started && r->fd >= 0)
			close(r->fd);
	}
	free(f->ranks);
	free(f->user);
	free(f->key_path);
	free(f->experiment_id);
	if (f->key_pem)
		isc_vault_wipe_free(f->key_pem, f->key_pem_len + 1);
	for (int i = 0; i < 2; i++)
		if (f->wake[i] >= 0)
			close(f->wake[i]);
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
	/* Without the pipe the ranks' waits look at the cancel every 100 ms, as before. */
	if (pipe2(f->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		f->wake[0] = f->wake[1] = -1;
	f->opts = *opts;
	f->user = strdup(opts->user ? opts->user : "root");
	f->key_path = opts->key_path ? strdup(opts->key_path) : NULL;
	f->experiment_id = strdup(spec->experiment_id);
	if (opts->key_pem && (f->key_pem = malloc(opts->key_pem_len + 1))) {
		memcpy(f->key_pem, opts->key_pem, opts->key_pem_len);
		f->key_pem[opts->key_pem_len] = '\0';
		f->key_pem_len = opts->key_pem_len;
	}
	f->opts.key_path = f->key_path;
	f->opts.key_pem = f->key_pem;
	f->ranks = calloc(n ? n : 1, sizeof(*f->ranks));
	f->n = n;
	if (!f->user || (opts->key_path && !f->key_path) || (opts->key_pem && !f->key_pem) ||
	    (!opts->key_path && !opts->key_pem) || !f->experiment_id || !f->ranks) {
		f->n = 0;
		isc_launch_follow_free(f);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	/* With a sink (the store) the file is this host's copy only: a replica that took
	 * the burst over from a host whose Output Path it cannot create follows on into
	 * the sink alone (each rank's open_log fails and writes to /dev/null). */
	if (mkdir(output_dir, 0700) != 0 && errno != EEXIST && !opts->log_sink) {
		f->n = 0;
		isc_launch_follow_free(f);
		return isc_err_set(err, ISC_EIO, "cannot create %s: %s", output_dir,
		                   strerror(errno));
	}
	for (size_t i = 0; i < n; i++) {
		struct follow_rank *r = &f->ranks[i];
		r->f = f;
		r->fd = -1;
		r->rank = nodes[i].rank;
		r->port = nodes[i].port;
		r->host = strdup(nodes[i].host);
		/* No instance id: pinned under host:port, which ssh.c derives itself. */
		r->pin_target = nodes[i].pin_target ? strdup(nodes[i].pin_target) : NULL;
		r->user = nodes[i].user ? strdup(nodes[i].user) : NULL;
		r->name = isc_launcher_container_name(spec->experiment_id, nodes[i].rank);
		if (asprintf(&r->log_path, "%s/rank_%d.txt", output_dir, nodes[i].rank) < 0)
			r->log_path = NULL;
		if (!r->host || (nodes[i].pin_target && !r->pin_target) ||
		    (nodes[i].user && !r->user) || !r->name || !r->log_path) {
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
