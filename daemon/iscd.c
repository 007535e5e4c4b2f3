/*
 * iscd: the broker daemon. It owns every cloud side effect: each tick it
 * watches the clouds, advances every burst experiment's state machine,
 * meters credits and reconciles. One daemon per home (an flock on
 * $ISC_HOME/iscd.lock); with SQLite that is one per store. With PostgreSQL
 * several iscd (each with its own home, on one host or several) are replicas of
 * one store: each registers in the database and steps the bursts it holds leases
 * on (broker.c, docs/ha.md). SIGTERM/SIGINT finish the current tick, remove the
 * replica's row (its leases are free at once), close the store and exit 0.
 *
 * iscd also serves the platform's JSON API (api/api.h, docs/api.md) from its
 * own threads, each with its own store connection; the tick loop below never
 * runs API work.
 */
#include "api/api.h"
#include "api/web.h"
#include "keys/keys.h"
#include "broker/broker.h"
#include "common/clock.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "common/version.h"
#include "datasets/datasets.h"
#include "onprem/onprem.h"
#include "config/config.h"
#include "daemon/notify.h"
#include "store/store.h"
#include "store/store_access.h"
#include "store/store_experiments.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: iscd [--home DIR] [--once | --api-only] [--interval-ms MS] [--verbose]\n\n"
	        "The isc burst broker daemon. Runs a tick loop over the store in --home\n"
	        "(else $ISC_HOME, else ~/.isc) until SIGTERM or SIGINT, and serves the\n"
	        "platform's API on $ISC_HOME/run/api.sock (docs/api.md).\n"
	        "  --once            run one tick and exit (without serving the API)\n"
	        "  --api-only        serve the API only: no ticks, no dataset caching\n"
	        "                    (maintenance, scripted setup)\n"
	        "  --interval-ms MS  time between ticks (default: config.toml's "
	        "tick_interval_ms, else 2000)\n"
	        "  --verbose         debug logging\n"
	        "  --version         the version and the commit it was built from\n");
}

/* Holds an exclusive flock for the life of the process; the kernel drops it if we die. */
static int take_lock(const char *home)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/iscd.lock", home);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		isc_log(ISC_LOG_ERROR, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		isc_log(ISC_LOG_ERROR, "another iscd is already running on %s", home);
		close(fd);
		return -1;
	}
	if (ftruncate(fd, 0) == 0)
		dprintf(fd, "%ld\n", (long)getpid());
	return fd;
}

/* SOCKET.tcp, written while the TCP listener runs; removed when iscd stops. */
static char *tcp_info_path;

/* SOCKET.metrics: the metrics_listen URL (a port 0 made real), for tests and scrapers' setup. */
static char *metrics_info_path;

static void metrics_listening(const char *sock, const char *listen, unsigned port)
{
	char host[64] = "127.0.0.1";
	const char *colon = strrchr(listen, ':');
	char *info = NULL;
	FILE *f;

	if (colon && (size_t)(colon - listen) < sizeof(host)) {
		memcpy(host, listen, (size_t)(colon - listen));
		host[colon - listen] = 0;
	}
	isc_log(ISC_LOG_INFO, "metrics: listening on http://%s:%u/metrics", host, port);
	if (asprintf(&info, "%s.metrics", sock) < 0)
		return;
	if ((f = fopen(info, "w"))) {
		fprintf(f, "http://%s:%u/metrics\n", host, port);
		fclose(f);
		chmod(info, 0644);
		metrics_info_path = info;
		return;
	}
	free(info);
}

/*
 * Starts the API: the socket from config (default $ISC_HOME/run/api.sock; the
 * home is then made 0711 so other users can reach run/ by name but list
 * nothing, while every file in it stays owner-only), TCP when api_listen is set.
 */
static int start_api(const char *home, struct isc_api **out, char **sock_out, struct isc_err *err)
{
	struct isc_config *cfg = NULL;
	struct isc_api_options o = {0};
	char *sock = NULL, *info = NULL, *web_root = NULL;
	int rc;

	if ((rc = isc_config_load(home, &cfg, err)))
		return rc;
	if (cfg->api_socket[0])
		sock = strdup(cfg->api_socket);
	else if (asprintf(&sock, "%s/run/api.sock", home) < 0)
		sock = NULL;
	if (!sock) {
		isc_config_free(cfg);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (!cfg->api_socket[0])
		chmod(home, 0711);
	o.home = home;
	o.socket_path = sock;
	o.listen = cfg->api_listen;
	o.max_connections = (unsigned)cfg->api_max_connections;
	o.timeout_s = (unsigned)cfg->api_timeout_s;
	o.header_timeout_s = (unsigned)cfg->api_header_timeout_s;
	o.per_ip = (unsigned)cfg->api_max_connections_per_ip;
	o.threads = (unsigned)cfg->api_threads;
	o.slow_threads = (unsigned)cfg->api_slow_threads;
	o.slow_queue = (unsigned)cfg->api_slow_queue;
	web_root = isc_web_default_root();
	o.web_root = web_root;
	o.metrics_listen = cfg->metrics_listen;
	rc = isc_api_start(&o, out, err);
	if (!rc) {
		isc_log(ISC_LOG_INFO, "api: listening on %s", sock);
		if (cfg->api_listen[0]) {
			/* Beside the socket: where tests and scripts find an ephemeral port. */
			char host[64] = "127.0.0.1";
			const char *colon = strrchr(cfg->api_listen, ':');
			if (colon && (size_t)(colon - cfg->api_listen) < sizeof(host)) {
				memcpy(host, cfg->api_listen, (size_t)(colon - cfg->api_listen));
				host[colon - cfg->api_listen] = 0;
			}
			isc_log(ISC_LOG_INFO, "api: listening on http://%s:%u", host,
			        isc_api_tcp_port(*out));
			if (isc_api_pages_served(*out))
				isc_log(ISC_LOG_INFO,
				        "web: the Control Plane pages at http://%s:%u/ from %s",
				        host, isc_api_tcp_port(*out), web_root);
			else
				isc_log(
				    ISC_LOG_WARN,
				    "web: no pages folder at %s; the Control Plane pages are not "
				    "served (docs/control-plane.md)",
				    web_root ? web_root : "BIN/../share/isc/web");
			if (asprintf(&info, "%s.tcp", sock) >= 0) {
				FILE *f = fopen(info, "w");
				if (f) {
					fprintf(f, "http://%s:%u\n", host, isc_api_tcp_port(*out));
					fclose(f);
					chmod(info, 0644);
					tcp_info_path = info;
					info = NULL;
				}
			}
		}
	}
	if (!rc && cfg->metrics_listen[0])
		metrics_listening(sock, cfg->metrics_listen, isc_api_metrics_port(*out));
	free(info);
	if (!rc)
		*sock_out = sock;
	else
		free(sock);
	free(web_root);
	isc_config_free(cfg);
	return rc;
}

static void sleep_interruptible(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	/* A signal interrupts the sleep, so shutdown is prompt. */
	nanosleep(&ts, NULL);
}

/*
 * True once the API answers on its socket: GET /v1/whoami (anyone may ask; it
 * reads the store) returns 200. What READY=1 promises the service manager, so
 * units ordered After=iscd.service find an API that answers, not one that is
 * still starting. One try takes at most 5 s.
 */
static int api_answers(const char *sock)
{
	static const char req[] = "GET /v1/whoami HTTP/1.0\r\nHost: localhost\r\n\r\n";
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {5, 0};
	char reply[64];
	size_t got = 0;
	int fd, ok = 0;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return 0;
	strcpy(sa.sun_path, sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
		while (got < sizeof(reply) - 1) {
			ssize_t n = read(fd, reply + got, sizeof(reply) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		reply[got] = 0;
		/* "HTTP/1.x 200 ..." */
		ok = got >= 12 && strncmp(reply, "HTTP/1.", 7) == 0 &&
		     strncmp(reply + 8, " 200", 4) == 0;
	}
	close(fd);
	return ok;
}

/*
 * The watchdog (WatchdogSec= in iscd.service): WATCHDOG=1 is sent only from the
 * tick loop's own thread, after a tick ended and while it waits for the next
 * one, at half the interval systemd asked for. A tick that hangs sends nothing,
 * so systemd kills and restarts iscd; the API's threads never ping for it.
 */
static int64_t watchdog_ms, watchdog_last_ms;

static void watchdog_ping(void)
{
	int64_t now;
	if (!watchdog_ms)
		return;
	now = isc_monotonic_ms();
	if (now - watchdog_last_ms < watchdog_ms / 2)
		return;
	watchdog_last_ms = now;
	isc_notify("WATCHDOG=1");
}

/* Sleeps ms, waking to ping the watchdog: waiting for the next tick is not hanging. */
static void sleep_watched(long ms)
{
	int64_t until = isc_monotonic_ms() + ms;
	for (;;) {
		int64_t left = until - isc_monotonic_ms();
		if (left <= 0 || stop_requested)
			break;
		if (watchdog_ms && left > watchdog_ms / 4)
			left = watchdog_ms / 4 ? watchdog_ms / 4 : 1;
		sleep_interruptible((long)left);
		watchdog_ping();
	}
}

/*
 * Cancels asked for while no iscd ran (isc cancel leaves $home/run/cancel/ID;
 * docs/broker.md): carried out before the API and the first tick, each audited.
 * Only a regular file of this process's own user counts (the operator may cancel
 * anything; nobody else can write there); each file is removed once read.
 */
static void queued_cancels(const char *home, struct isc_store *store)
{
	char dir[4096], file[4096 + 256 + 2];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/run/cancel", home);
	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		struct isc_audit a = {0};
		struct isc_err err;
		struct stat st;
		char address[48];
		int ok;

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", dir, de->d_name);
		ok = lstat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		     strncmp(de->d_name, "exp_", 4) == 0 && strlen(de->d_name) == 20;
		unlink(file);
		if (!ok) {
			isc_log(ISC_LOG_WARN, "ignored %s: not a queued cancel of this user", file);
			continue;
		}
		isc_err_clear(&err);
		if (isc_store_experiment_request_cancel_by(
		        store, de->d_name, "the operator (isc cancel while iscd was stopped)",
		        &err))
			isc_log(ISC_LOG_WARN, "the cancel of %s asked while iscd was stopped: %s",
			        de->d_name, err.msg);
		else
			isc_log(ISC_LOG_INFO,
			        "the cancel of %s asked while iscd was stopped is carried out",
			        de->d_name);
		snprintf(address, sizeof(address), "file:uid=%ld", (long)st.st_uid);
		a.actor = "operator";
		a.address = address;
		a.action = "POST /v1/experiments/{id}/cancel (left while iscd was stopped)";
		a.target = de->d_name;
		a.status = !err.code ? 200 : err.code == ISC_ENOTFOUND ? 404 : 409;
		isc_err_clear(&err);
		if (isc_store_audit_add(store, &a, &err))
			isc_log(ISC_LOG_ERROR, "the audit row of a queued cancel: %s", err.msg);
	}
	closedir(d);
}

/*
 * iscd holds the master key and, in its heap, the cloud keys it decrypts with it
 * and the API's bodies: a core file would write them to disk, readable by whoever
 * reads the crash folder, and a same-user ptrace or /proc/PID/mem could read them
 * live (issue 42). No core file (RLIMIT_CORE 0, hard limit too, so nothing this
 * process runs can raise it) and not dumpable (PR_SET_DUMPABLE 0: no core, and
 * /proc/PID/{mem,environ,maps} and ptrace are only root's with CAP_SYS_PTRACE).
 * Both: a core_pattern that pipes to a handler (systemd-coredump) is not bound by
 * RLIMIT_CORE, but the kernel dumps no undumpable process. A program iscd runs
 * (ssh) is dumpable again after its exec, as the kernel does; its core limit stays 0.
 */
static void refuse_core_dumps(void)
{
	const struct rlimit none = {0, 0};

	if (setrlimit(RLIMIT_CORE, &none) != 0)
		isc_log(ISC_LOG_WARN, "cannot turn core files off (setrlimit RLIMIT_CORE): %s",
		        strerror(errno));
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		isc_log(ISC_LOG_WARN, "cannot make iscd undumpable (prctl PR_SET_DUMPABLE): %s",
		        strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"home", required_argument, NULL, 'H'}, {"once", no_argument, NULL, 'o'},
	    {"api-only", no_argument, NULL, 'A'},   {"interval-ms", required_argument, NULL, 'i'},
	    {"verbose", no_argument, NULL, 'v'},    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},    {NULL, 0, NULL, 0}};
	const char *home_flag = NULL;
	struct isc_store *store = NULL;
	struct isc_broker *broker = NULL;
	struct isc_onprem *onprem = NULL;
	struct isc_dataset_cacher *cacher = NULL;
	struct isc_api *api = NULL;
	struct isc_err err;
	struct sigaction sa;
	char *home = NULL, *api_sock = NULL;
	long interval_ms = -1, ticks = 0, late_over_tick = 0;
	int64_t planned_ms = 0, late_max_ms = 0, late_sum_ms = 0;
	int c, once = 0, api_only = 0, lock_fd = -1, rc = 1;

	isc_log_set_program("iscd");
	refuse_core_dumps(); /* first: before any key is read */
	umask(077);          /* every file and folder the broker makes is owner-only */
	/* API bodies may carry an organisation's cloud key: jansson's buffers are wiped. */
	isc_keys_json_wipe_on_free();
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			home_flag = optarg;
			break;
		case 'A':
			api_only = 1;
			break;
		case 'o':
			once = 1;
			break;
		case 'i': {
			char *end;
			interval_ms = strtol(optarg, &end, 10);
			if (*end || interval_ms < 10 || interval_ms > 3600000) {
				fprintf(stderr,
				        "iscd: --interval-ms: '%s' is not a number of ms in "
				        "10..3600000\n",
				        optarg);
				return 2;
			}
			break;
		}
		case 'v':
			isc_log_set_level(ISC_LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("iscd %s (commit %s)\n", isc_version(), isc_build_commit());
			return 0;
		default:
			fprintf(stderr, "iscd: unknown or incomplete option '%s'\n",
			        argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "iscd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	isc_err_clear(&err);
	home = isc_home_resolve(home_flag, &err);
	if (!home) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		return 1;
	}
	/* Migrations run here (store/migrations.c): the status says why READY is not yet sent. */
	isc_notify("STATUS=opening the store of %s (migrations run here)", home);
	if (isc_store_open(home, 0, &store, &err)) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		goto out;
	}
	if ((lock_fd = take_lock(home)) < 0)
		goto out;
	if (isc_broker_new(store, &broker, &err)) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		goto out;
	}
	if (isc_onprem_new(store, &onprem, &err)) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		goto out;
	}
	/*
	 * A ticking iscd is a replica of the store: with PostgreSQL several share it, each
	 * stepping the bursts it holds leases on (docs/ha.md); with SQLite the pid lock
	 * above keeps it the only one. An API-only iscd steps nothing and is no replica.
	 */
	if (!api_only && isc_broker_replica_start(broker, &err)) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		goto out;
	}
	if (interval_ms < 0) {
		interval_ms = isc_broker_tick_interval_ms(broker);
	} else if (isc_broker_set_tick_interval_ms(broker, interval_ms, &err)) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		goto out;
	}

	queued_cancels(home, store);
	if (!once && start_api(home, &api, &api_sock, &err)) {
		isc_log(ISC_LOG_ERROR, "api: %s", err.msg);
		goto out;
	}
	if (api) {
		int tries = 0;
		/* The listener is up when isc_api_start returns; a few tries cover a slow store. */
		while (!api_answers(api_sock) && ++tries < 50)
			sleep_interruptible(100);
		if (tries >= 50) {
			isc_log(ISC_LOG_ERROR, "api: %s does not answer GET /v1/whoami", api_sock);
			goto out;
		}
		watchdog_ms = isc_notify_watchdog_ms();
		watchdog_last_ms = isc_monotonic_ms();
		isc_notify("READY=1\nSTATUS=%s on %s; API on %s", api_only ? "API only" : "ticking",
		           home, api_sock);
		if (watchdog_ms)
			isc_log(ISC_LOG_INFO, "watchdog: a ping every %lld ms from the tick loop",
			        (long long)(watchdog_ms / 2));
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	isc_log(ISC_LOG_INFO, "started on %s (pid %ld, tick %ld ms)", home, (long)getpid(),
	        interval_ms);
	if (!once && !api_only) {
		/*
		 * Datasets cache on a thread of their own, so a 100 GB download never
		 * holds up a tick. It blocks SIGTERM/SIGINT: they stay the main loop's.
		 */
		sigset_t block, old;
		sigemptyset(&block);
		sigaddset(&block, SIGTERM);
		sigaddset(&block, SIGINT);
		pthread_sigmask(SIG_BLOCK, &block, &old);
		if (isc_dataset_cacher_start(home, &cacher, &err))
			isc_log(ISC_LOG_ERROR, "%s", err.msg);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	rc = 0;
	/* The API alone: its threads answer; this thread only waits for the signal to stop. */
	while (api_only && !stop_requested)
		sleep_watched(interval_ms);
	do {
		if (api_only)
			break;
		/*
		 * Ticks are due one interval after the previous one started (a fixed rate: a
		 * long tick is followed at once by the next, never by a further full
		 * interval). Lateness is how long after that this tick started, so a tick
		 * that ran long counts against the one after it; what a slow cloud, API load
		 * or a slow store shows first.
		 */
		int64_t start = isc_monotonic_ms();
		if (ticks > 0) {
			int64_t late = start - planned_ms;
			late_max_ms = late > late_max_ms ? late : late_max_ms;
			late_sum_ms += late > 0 ? late : 0;
			if (late > interval_ms)
				late_over_tick++;
		}
		/* A test build can hold the tick here (ISC_PAUSE_AT=tick.started): a stuck tick. */
		isc_crash_point("tick.started");
		isc_err_clear(&err);
		if (isc_broker_tick(broker, &err))
			isc_log(ISC_LOG_ERROR, "tick: %s", err.msg);
		isc_err_clear(&err);
		if (isc_onprem_tick(onprem, &err))
			isc_log(ISC_LOG_ERROR, "on-prem tick: %s", err.msg);
		ticks++;
		planned_ms = start + interval_ms;
		watchdog_ping();
		if (once || stop_requested)
			break;
		{
			int64_t left = planned_ms - isc_monotonic_ms();
			if (left > 0)
				sleep_watched((long)left);
		}
	} while (!stop_requested);
	if (ticks > 1) {
		char phases[512];
		isc_log(ISC_LOG_INFO,
		        "tick stats: %ld ticks every %ld ms; lateness mean %.1f ms, max %lld ms; "
		        "%ld late by more than one tick",
		        ticks, interval_ms, (double)late_sum_ms / (double)(ticks - 1),
		        (long long)late_max_ms, late_over_tick);
		isc_broker_tick_phases(broker, phases, sizeof(phases));
		isc_log(ISC_LOG_INFO, "tick phases: %s", phases);
	}
	isc_notify("STOPPING=1\nSTATUS=stopping after %ld ticks", ticks);
	isc_log(ISC_LOG_INFO, "stopping");
	isc_dataset_cacher_stop(cacher);
out:
	isc_api_free(api);
	/* The address is no one's once the listener is gone: a stale one would be dialled. */
	if (tcp_info_path)
		unlink(tcp_info_path);
	free(tcp_info_path);
	free(api_sock);
	if (metrics_info_path)
		unlink(metrics_info_path);
	free(metrics_info_path);
	isc_onprem_free(onprem);
	isc_broker_free(broker);
	isc_store_free(store);
	if (lock_fd >= 0)
		close(lock_fd);
	free(home);
	return rc;
}
