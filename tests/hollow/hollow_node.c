/*
 * hollow-node: kubemark-style hollow nodes for the scale bench (issue 49,
 * tests/hollow/README.md). One process serves SSH on PORT for COUNT
 * consecutive loopback addresses; each address is a node whose runtime
 * (files, images, containers) lives in memory (hollow_runtime.c). A node
 * exists while DIR/nodes/IP.keys does: without it a connection is closed
 * before the banner, as a node that is not up drops it (the launcher retries);
 * with it, public-key login against that file, read at every login.
 *
 *   hollow-node --dir DIR --first 127.A.B.C --count N --port PORT [--threads T]
 *
 * Threads: one acceptor (epoll over every listening socket) hands each
 * connection to one of T workers; a worker runs its sessions in one libssh
 * event loop (ssh_event, non-blocking sessions), so a session that says
 * nothing costs a file descriptor and no thread.
 */
#include "tests/hollow/hollow.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A login must be done within this long of the connection. */
#define LOGIN_GRACE_MS 30000

static const char *dir;
static uint32_t first_ip; /* host order */
static int count, port, n_threads = 2;
static struct hn_node *nodes;
static ssh_bind sshbind;
static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t stopping, want_stats;

/* ---- stats ---- */

static atomic_long st_connections, st_dropped_down, st_logins, st_refused, st_channels,
    st_commands[HN_KINDS];
static atomic_llong st_cmd_cpu_ns, st_worker_cpu_ns;

static long long thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void print_stats(const char *when)
{
	struct rusage ru;
	double cpu, cmd_s = (double)atomic_load(&st_cmd_cpu_ns) / 1e9;
	long conns = atomic_load(&st_connections), cmds = 0;
	getrusage(RUSAGE_SELF, &ru);
	cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	for (int k = 0; k < HN_KINDS; k++)
		cmds += atomic_load(&st_commands[k]);
	fprintf(stderr,
	        "hollow-node stats (%s): connections %ld (dropped, node down %ld), logins %ld, "
	        "refused %ld, channels %ld, commands %ld\n",
	        when, conns, atomic_load(&st_dropped_down), atomic_load(&st_logins),
	        atomic_load(&st_refused), atomic_load(&st_channels), cmds);
	fprintf(stderr, "hollow-node stats (%s): commands by kind:", when);
	for (int k = 0; k < HN_KINDS; k++)
		fprintf(stderr, " %s=%ld", hn_kind_names[k], atomic_load(&st_commands[k]));
	fprintf(stderr, "\n");
	double ssh_s = (double)atomic_load(&st_worker_cpu_ns) / 1e9 - cmd_s;
	fprintf(stderr,
	        "hollow-node stats (%s): cpu %.3f s (user %.3f, sys %.3f); in commands %.3f s "
	        "(%.1f us a command); ssh (key exchange, login, channels) %.3f s (%.2f ms a "
	        "connection)\n",
	        when, cpu, (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
	        (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, cmd_s,
	        cmds ? cmd_s * 1e6 / (double)cmds : 0.0, ssh_s > 0 ? ssh_s : 0.0,
	        conns ? (ssh_s > 0 ? ssh_s : 0.0) * 1e3 / (double)conns : 0.0);
}

/* ---- sessions and channels ---- */

struct worker;

struct chan {
	struct chan *next;
	struct sess *s;
	ssh_channel ch;
	struct ssh_channel_callbacks_struct cb;
	struct hn_cmd *cmd;
	int64_t wake; /* -1: none */
	int ready;    /* step it at the next pass */
	int finished, exit_code, closed, eof_sent;
	struct hn_buf out, err;
	size_t out_at, err_at;
	long long kind_counted;
};

struct sess {
	struct worker *w;
	ssh_session session;
	struct ssh_server_callbacks_struct cb;
	struct hn_node *node;
	int64_t since;
	int authed, gone;
	struct chan *chans;
	struct sess *next;
};

struct worker {
	pthread_t thread;
	int pipe[2]; /* accepted fds and their node index, from the acceptor */
	ssh_event event;
	struct sess *sessions;
	int any_ready;
	int64_t next_wake;
	atomic_long load;
};
static struct worker *workers;

static int key_allowed(const char *ip, ssh_key pubkey)
{
	char path[4096], line[16384];
	FILE *f;
	int ok = 0;
	snprintf(path, sizeof(path), "%s/nodes/%s.keys", dir, ip);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (!ok && fgets(line, sizeof(line), f)) {
		char *type, *b64, *save = NULL;
		ssh_key k = NULL;
		enum ssh_keytypes_e t;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '#' || !(type = strtok_r(line, " \t", &save)))
			continue;
		t = ssh_key_type_from_name(type);
		if (t == SSH_KEYTYPE_UNKNOWN)
			continue; /* options before the key are not used by the clouds */
		if (!(b64 = strtok_r(NULL, " \t", &save)))
			continue;
		if (ssh_pki_import_pubkey_base64(b64, t, &k) == SSH_OK) {
			ok = ssh_key_cmp(k, pubkey, SSH_KEY_CMP_PUBLIC) == 0;
			ssh_key_free(k);
		}
	}
	fclose(f);
	return ok;
}

static int on_auth_pubkey(ssh_session session, const char *user, struct ssh_key_struct *pubkey,
                          char signature_state, void *userdata)
{
	struct sess *s = userdata;
	int ok;
	(void)session;
	(void)user;
	if (signature_state != SSH_PUBLICKEY_STATE_NONE &&
	    signature_state != SSH_PUBLICKEY_STATE_VALID) {
		atomic_fetch_add(&st_refused, 1);
		return SSH_AUTH_DENIED;
	}
	ok = key_allowed(s->node->ip, pubkey);
	pthread_mutex_lock(&s->node->lock);
	if (ok < 0) {
		s->node->down_seen = 1; /* terminated: the next instance here starts afresh */
	} else if (ok && s->node->down_seen && signature_state == SSH_PUBLICKEY_STATE_VALID) {
		hn_node_reset(s->node);
		s->node->down_seen = 0;
	}
	pthread_mutex_unlock(&s->node->lock);
	if (ok <= 0) {
		if (signature_state == SSH_PUBLICKEY_STATE_VALID || ok < 0)
			atomic_fetch_add(&st_refused, 1);
		return SSH_AUTH_DENIED;
	}
	if (signature_state == SSH_PUBLICKEY_STATE_VALID) {
		s->authed = 1;
		atomic_fetch_add(&st_logins, 1);
	}
	return SSH_AUTH_SUCCESS;
}

static int on_data(ssh_session session, ssh_channel channel, void *data, uint32_t len,
                   int is_stderr, void *userdata)
{
	struct chan *c = userdata;
	(void)session;
	(void)channel;
	if (!is_stderr && c->cmd) {
		hn_cmd_stdin(c->cmd, data, len);
		c->ready = 1;
		c->s->w->any_ready = 1;
	}
	return (int)len;
}

static void on_eof(ssh_session session, ssh_channel channel, void *userdata)
{
	struct chan *c = userdata;
	(void)session;
	(void)channel;
	if (c->cmd) {
		hn_cmd_eof(c->cmd);
		c->ready = 1;
		c->s->w->any_ready = 1;
	}
}

static int on_wontblock(ssh_session session, ssh_channel channel, uint32_t bytes, void *userdata)
{
	struct chan *c = userdata;
	(void)session;
	(void)channel;
	(void)bytes;
	c->s->w->any_ready = 1;
	return 0;
}

static void on_close(ssh_session session, ssh_channel channel, void *userdata)
{
	struct chan *c = userdata;
	(void)session;
	(void)channel;
	c->closed = 1;
	c->s->w->any_ready = 1;
}

static int on_exec(ssh_session session, ssh_channel channel, const char *command, void *userdata)
{
	struct chan *c = userdata;
	(void)session;
	(void)channel;
	if (c->cmd)
		return -1; /* one command per channel */
	c->cmd = hn_cmd_new(c->s->node, command);
	c->ready = 1;
	c->s->w->any_ready = 1;
	return 0;
}

/* Like Debian's sshd: LANG and LC_* are accepted (and ignored here), nothing else. */
static int on_env(ssh_session session, ssh_channel channel, const char *name, const char *value,
                  void *userdata)
{
	(void)session;
	(void)channel;
	(void)value;
	(void)userdata;
	return strcmp(name, "LANG") == 0 || strncmp(name, "LC_", 3) == 0 ? 0 : -1;
}

static int on_refuse(ssh_session session, ssh_channel channel, void *userdata)
{
	(void)session;
	(void)channel;
	(void)userdata;
	return -1; /* no shell: the launcher only runs commands */
}

static int on_refuse_pty(ssh_session session, ssh_channel channel, const char *term, int width,
                         int height, int pxwidth, int pwheight, void *userdata)
{
	(void)session, (void)channel, (void)term, (void)width, (void)height, (void)pxwidth;
	(void)pwheight, (void)userdata;
	return -1;
}

static int on_refuse_subsystem(ssh_session session, ssh_channel channel, const char *subsystem,
                               void *userdata)
{
	(void)session, (void)channel, (void)userdata;
	fprintf(stderr, "hollow-node: subsystem %s refused (the launcher does not use it)\n",
	        subsystem);
	atomic_fetch_add(&st_commands[HN_UNKNOWN], 1);
	return -1;
}

static ssh_channel on_channel_open(ssh_session session, void *userdata)
{
	struct sess *s = userdata;
	struct chan *c;
	if (!s->authed)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ch = ssh_channel_new(session);
	if (!c->ch) {
		free(c);
		return NULL;
	}
	c->s = s;
	c->wake = -1;
	c->cb.userdata = c;
	c->cb.channel_data_function = on_data;
	c->cb.channel_eof_function = on_eof;
	c->cb.channel_close_function = on_close;
	c->cb.channel_write_wontblock_function = on_wontblock;
	c->cb.channel_exec_request_function = on_exec;
	c->cb.channel_env_request_function = on_env;
	c->cb.channel_shell_request_function = on_refuse;
	c->cb.channel_pty_request_function = on_refuse_pty;
	c->cb.channel_subsystem_request_function = on_refuse_subsystem;
	ssh_callbacks_init(&c->cb);
	ssh_set_channel_callbacks(c->ch, &c->cb);
	c->next = s->chans;
	s->chans = c;
	atomic_fetch_add(&st_channels, 1);
	return c->ch;
}

static void chan_release(struct chan *c, int session_gone)
{
	if (c->ch) {
		ssh_remove_channel_callbacks(c->ch, &c->cb);
		if (!session_gone)
			ssh_channel_free(c->ch);
	}
	hn_cmd_free(c->cmd);
	hn_buf_free(&c->out);
	hn_buf_free(&c->err);
	free(c);
}

/* Sends what is pending; 1 when all of it went. */
static int flush(struct chan *c)
{
	while (c->out_at < c->out.len) {
		int w = ssh_channel_write(c->ch, c->out.data + c->out_at,
		                          (uint32_t)(c->out.len - c->out_at));
		if (w <= 0)
			return w < 0 ? (c->closed = 1, 0) : 0;
		c->out_at += (size_t)w;
	}
	while (c->err_at < c->err.len) {
		int w = ssh_channel_write_stderr(c->ch, c->err.data + c->err_at,
		                                 (uint32_t)(c->err.len - c->err_at));
		if (w <= 0)
			return w < 0 ? (c->closed = 1, 0) : 0;
		c->err_at += (size_t)w;
	}
	c->out.len = c->out_at = 0;
	c->err.len = c->err_at = 0;
	return 1;
}

/* Steps one channel's command; returns 1 when the channel is done and can go. */
static int chan_pass(struct chan *c, int64_t now, int64_t *next_wake)
{
	if (c->closed)
		return 1;
	if (c->cmd && !c->finished && (c->ready || (c->wake >= 0 && now >= c->wake))) {
		long long t0 = thread_cpu_ns();
		c->ready = 0;
		c->finished = hn_cmd_step(c->cmd, now, &c->out, &c->err, &c->exit_code, &c->wake);
		atomic_fetch_add(&st_cmd_cpu_ns, thread_cpu_ns() - t0);
		if (c->finished) {
			atomic_fetch_add(&st_commands[hn_cmd_kind(c->cmd)], 1);
			if (hn_cmd_kind(c->cmd) == HN_UNKNOWN)
				fprintf(stderr, "hollow-node: %s: %.*s", c->s->node->ip,
				        (int)(c->err.len - c->err_at), c->err.data + c->err_at);
		}
	}
	if (!flush(c)) {
		/* The peer's window is full: its adjust wakes us (on_wontblock), else retry soon.
		 */
		if (*next_wake < 0 || now + 20 < *next_wake)
			*next_wake = now + 20;
		return c->closed;
	}
	if (c->finished && !c->eof_sent) {
		ssh_channel_request_send_exit_status(c->ch, c->exit_code);
		ssh_channel_send_eof(c->ch);
		ssh_channel_close(c->ch);
		c->eof_sent = 1;
		return 1;
	}
	if (c->wake >= 0 && !c->finished && (*next_wake < 0 || c->wake < *next_wake))
		*next_wake = c->wake;
	return 0;
}

static void sess_free(struct sess *s)
{
	while (s->chans) {
		struct chan *c = s->chans;
		s->chans = c->next;
		chan_release(c, 1);
	}
	ssh_event_remove_session(s->w->event, s->session);
	ssh_disconnect(s->session);
	ssh_free(s->session);
	atomic_fetch_sub(&s->w->load, 1);
	free(s);
}

/* The acceptor's hand-over: an fd and its node's index. */
struct handover {
	int fd, node;
};

static int on_pipe(socket_t fd, int revents, void *userdata)
{
	struct worker *w = userdata;
	struct handover h;
	(void)revents;
	while (read(fd, &h, sizeof(h)) == (ssize_t)sizeof(h)) {
		struct sess *s = calloc(1, sizeof(*s));
		int rc;
		if (!s) {
			close(h.fd);
			continue;
		}
		s->w = w;
		s->node = &nodes[h.node];
		s->since = hn_now_ms();
		s->session = ssh_new();
		pthread_mutex_lock(&bind_lock);
		rc = ssh_bind_accept_fd(sshbind, s->session, h.fd);
		pthread_mutex_unlock(&bind_lock);
		if (rc != SSH_OK) {
			ssh_free(s->session);
			close(h.fd);
			free(s);
			continue;
		}
		s->cb.userdata = s;
		s->cb.auth_pubkey_function = on_auth_pubkey;
		s->cb.channel_open_request_session_function = on_channel_open;
		ssh_callbacks_init(&s->cb);
		ssh_set_server_callbacks(s->session, &s->cb);
		ssh_set_auth_methods(s->session, SSH_AUTH_METHOD_PUBLICKEY);
		ssh_set_blocking(s->session, 0);
		/* starts the key exchange; the event loop carries it on */
		rc = ssh_handle_key_exchange(s->session);
		if (rc == SSH_ERROR || ssh_event_add_session(w->event, s->session) != SSH_OK) {
			ssh_disconnect(s->session);
			ssh_free(s->session);
			free(s);
			continue;
		}
		s->next = w->sessions;
		w->sessions = s;
		atomic_fetch_add(&w->load, 1);
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int64_t last_sweep = 0;
	long long cpu0 = thread_cpu_ns();
	w->next_wake = -1;
	while (!stopping) {
		int64_t now = hn_now_ms();
		int timeout = 200;
		if (w->any_ready)
			timeout = 0;
		else if (w->next_wake >= 0)
			timeout = w->next_wake <= now ? 0 : (int)(w->next_wake - now);
		if (timeout > 200)
			timeout = 200;
		ssh_event_dopoll(w->event, timeout);
		now = hn_now_ms();
		int sweep = now - last_sweep >= 200;
		if (!w->any_ready && !sweep && (w->next_wake < 0 || now < w->next_wake))
			continue;
		w->any_ready = 0;
		w->next_wake = -1;
		if (sweep)
			last_sweep = now;
		for (struct sess **ps = &w->sessions; *ps;) {
			struct sess *s = *ps;
			int status = ssh_get_status(s->session);
			if ((status & (SSH_CLOSED | SSH_CLOSED_ERROR)) ||
			    (!s->authed && now - s->since > LOGIN_GRACE_MS)) {
				*ps = s->next;
				sess_free(s);
				continue;
			}
			for (struct chan **pc = &s->chans; *pc;) {
				struct chan *c = *pc;
				if (chan_pass(c, now, &w->next_wake)) {
					*pc = c->next;
					chan_release(c, 0);
				} else {
					pc = &c->next;
				}
			}
			ps = &s->next;
		}
		long long cpu1 = thread_cpu_ns();
		atomic_fetch_add(&st_worker_cpu_ns, cpu1 - cpu0);
		cpu0 = cpu1;
	}
	while (w->sessions) {
		struct sess *s = w->sessions;
		w->sessions = s->next;
		sess_free(s);
	}
	return NULL;
}

/* ---- listening ---- */

static void ip_text(uint32_t ip, char *buf, size_t cap)
{
	struct in_addr a = {htonl(ip)};
	inet_ntop(AF_INET, &a, buf, (socklen_t)cap);
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		want_stats = 1;
	else
		stopping = 1;
}

static int load_hostkey(void)
{
	char path[4096], pub[4200];
	ssh_key key = NULL;
	struct stat st;
	snprintf(path, sizeof(path), "%s/hostkey", dir);
	snprintf(pub, sizeof(pub), "%s/hostkey.pub", dir);
	if (stat(path, &st) != 0) {
		char *b64 = NULL;
		FILE *f;
		if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK ||
		    ssh_pki_export_privkey_file(key, NULL, NULL, NULL, path) != SSH_OK) {
			fprintf(stderr, "hollow-node: cannot write %s\n", path);
			return -1;
		}
		chmod(path, 0600);
		if (ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK || !(f = fopen(pub, "w"))) {
			fprintf(stderr, "hollow-node: cannot write %s\n", pub);
			return -1;
		}
		fprintf(f, "ssh-ed25519 %s hollow-node\n", b64);
		fclose(f);
		ssh_string_free_char(b64);
		ssh_key_free(key);
	}
	if (ssh_bind_options_set(sshbind, SSH_BIND_OPTIONS_HOSTKEY, path) != SSH_OK) {
		fprintf(stderr, "hollow-node: cannot use host key %s: %s\n", path,
		        ssh_get_error(sshbind));
		return -1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: hollow-node --dir DIR --first 127.A.B.C --count N --port PORT "
	                "[--threads T]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *first = NULL;
	struct in_addr a;
	struct rlimit rl;
	int ep, *lfd;
	char path[4096];

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (strcmp(argv[i], "--dir") == 0)
			dir = v;
		else if (strcmp(argv[i], "--first") == 0)
			first = v;
		else if (strcmp(argv[i], "--count") == 0)
			count = atoi(v);
		else if (strcmp(argv[i], "--port") == 0)
			port = atoi(v);
		else if (strcmp(argv[i], "--threads") == 0)
			n_threads = atoi(v);
		else
			usage();
		i++;
	}
	if (!dir || !first || count <= 0 || port <= 0 || port > 65535 || n_threads <= 0 ||
	    n_threads > 256)
		usage();
	if (inet_pton(AF_INET, first, &a) != 1 || (ntohl(a.s_addr) >> 24) != 127) {
		fprintf(stderr, "hollow-node: --first %s: not a loopback address (127.x.y.z)\n",
		        first);
		return 2;
	}
	first_ip = ntohl(a.s_addr);
	if (((first_ip & 0xffffff) + (uint32_t)count - 1) > 0xfffffe) {
		fprintf(stderr, "hollow-node: --count %d runs past 127.255.255.254\n", count);
		return 2;
	}
	{
		const char *e;
		if ((e = getenv("NODE_PULL_DELAY_MS")))
			hn_pull_delay_ms = atol(e);
		if ((e = getenv("NODE_START_DELAY_MS")))
			hn_start_delay_ms = atol(e);
	}
	/* every address's socket, the sessions, some slack */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t need = (rlim_t)count * 4 + 1024;
		if (rl.rlim_cur < need) {
			rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < (rlim_t)count + 64)
				fprintf(stderr,
				        "hollow-node: warning: RLIMIT_NOFILE %llu may be too "
				        "low for %d addresses\n",
				        (unsigned long long)rl.rlim_cur, count);
		}
	}
	snprintf(path, sizeof(path), "%s/nodes", dir);
	mkdir(dir, 0755);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/ready", dir);
	unlink(path);

	ssh_init();
	sshbind = ssh_bind_new();
	if (!sshbind || load_hostkey())
		return 1;

	nodes = calloc((size_t)count, sizeof(*nodes));
	lfd = calloc((size_t)count, sizeof(*lfd));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!nodes || !lfd || ep < 0)
		return 1;
	for (int i = 0; i < count; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		int one = 1;
		pthread_mutex_init(&nodes[i].lock, NULL);
		ip_text(first_ip + (uint32_t)i, nodes[i].ip, sizeof(nodes[i].ip));
		sa.sin_addr.s_addr = htonl(first_ip + (uint32_t)i);
		lfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (lfd[i] < 0 || setsockopt(lfd[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(lfd[i], (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd[i], 128) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, lfd[i], &ev)) {
			fprintf(stderr, "hollow-node: cannot listen on %s:%d: %s\n", nodes[i].ip,
			        port, strerror(errno));
			return 1;
		}
	}

	signal(SIGPIPE, SIG_IGN);
	{
		struct sigaction sa = {.sa_handler = on_signal};
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGUSR1, &sa, NULL);
	}
	workers = calloc((size_t)n_threads, sizeof(*workers));
	if (!workers)
		return 1;
	for (int t = 0; t < n_threads; t++) {
		struct worker *w = &workers[t];
		if (pipe2(w->pipe, O_NONBLOCK | O_CLOEXEC) || !(w->event = ssh_event_new()) ||
		    ssh_event_add_fd(w->event, w->pipe[0], POLLIN, on_pipe, w) != SSH_OK ||
		    pthread_create(&w->thread, NULL, worker_main, w)) {
			fprintf(stderr, "hollow-node: cannot start worker %d\n", t);
			return 1;
		}
	}
	{
		FILE *f;
		snprintf(path, sizeof(path), "%s/ready", dir);
		f = fopen(path, "w");
		if (!f) {
			fprintf(stderr, "hollow-node: cannot write %s\n", path);
			return 1;
		}
		fprintf(f, "%d %s %d %d\n", (int)getpid(), first, count, port);
		fclose(f);
	}

	while (!stopping) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, 500);
		if (want_stats) {
			want_stats = 0;
			print_stats("SIGUSR1");
		}
		for (int e = 0; e < k; e++) {
			int i = (int)evs[e].data.u32;
			for (;;) {
				int fd = accept4(lfd[i], NULL, NULL, SOCK_CLOEXEC);
				char keys[4200];
				struct handover h = {fd, i};
				struct worker *best = &workers[0];
				if (fd < 0)
					break;
				atomic_fetch_add(&st_connections, 1);
				/* no keys file: no node here (not booted, or terminated) */
				snprintf(keys, sizeof(keys), "%s/nodes/%s.keys", dir, nodes[i].ip);
				if (access(keys, F_OK) != 0) {
					atomic_fetch_add(&st_dropped_down, 1);
					pthread_mutex_lock(&nodes[i].lock);
					nodes[i].down_seen = 1;
					pthread_mutex_unlock(&nodes[i].lock);
					close(fd);
					continue;
				}
				for (int t = 1; t < n_threads; t++)
					if (atomic_load(&workers[t].load) <
					    atomic_load(&best->load))
						best = &workers[t];
				atomic_fetch_add(&best->load, 1); /* counted again by the worker */
				if (write(best->pipe[1], &h, sizeof(h)) != (ssize_t)sizeof(h))
					close(fd);
				atomic_fetch_sub(&best->load, 1);
			}
		}
	}
	/* the workers see stopping within a poll (200 ms) */
	for (int t = 0; t < n_threads; t++)
		pthread_join(workers[t].thread, NULL);
	print_stats("exit");
	for (int i = 0; i < count; i++) {
		close(lfd[i]);
		pthread_mutex_lock(&nodes[i].lock);
		hn_node_reset(&nodes[i]);
		pthread_mutex_unlock(&nodes[i].lock);
	}
	for (int t = 0; t < n_threads; t++) {
		ssh_event_remove_fd(workers[t].event, workers[t].pipe[0]);
		ssh_event_free(workers[t].event);
		close(workers[t].pipe[0]);
		close(workers[t].pipe[1]);
	}
	free(workers);
	free(nodes);
	free(lfd);
	ssh_bind_free(sshbind);
	ssh_finalize();
	snprintf(path, sizeof(path), "%s/ready", dir);
	unlink(path);
	return 0;
}
