/*
 * iscd: the broker daemon. It owns every cloud side effect: each tick it
 * watches the clouds, advances every burst experiment's state machine,
 * meters credits and reconciles. One daemon per store (an flock on
 * $ISC_HOME/iscd.lock). SIGTERM/SIGINT finish the current tick, close the
 * store and exit 0.
 */
#include "broker/broker.h"
#include "common/log.h"
#include "common/version.h"
#include "datasets/datasets.h"
#include "onprem/onprem.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
	fprintf(out, "usage: iscd [--home DIR] [--once] [--interval-ms MS] [--verbose]\n\n"
	             "The isc burst broker daemon. Runs a tick loop over the store in --home\n"
	             "(else $ISC_HOME, else ~/.isc) until SIGTERM or SIGINT.\n"
	             "  --once            run one tick and exit\n"
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

static void sleep_interruptible(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	/* A signal interrupts the sleep, so shutdown is prompt. */
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"home", required_argument, NULL, 'H'},
	                                     {"once", no_argument, NULL, 'o'},
	                                     {"interval-ms", required_argument, NULL, 'i'},
	                                     {"verbose", no_argument, NULL, 'v'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {"version", no_argument, NULL, 'V'},
	                                     {NULL, 0, NULL, 0}};
	const char *home_flag = NULL;
	struct isc_store *store = NULL;
	struct isc_broker *broker = NULL;
	struct isc_onprem *onprem = NULL;
	struct isc_dataset_cacher *cacher = NULL;
	struct isc_err err;
	struct sigaction sa;
	char *home = NULL;
	long interval_ms = -1;
	int c, once = 0, lock_fd = -1, rc = 1;

	isc_log_set_program("iscd");
	umask(077); /* every file and folder the broker makes is owner-only */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			home_flag = optarg;
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
	if (interval_ms < 0) {
		interval_ms = isc_broker_tick_interval_ms(broker);
	} else if (isc_broker_set_tick_interval_ms(broker, interval_ms, &err)) {
		isc_log(ISC_LOG_ERROR, "%s", err.msg);
		goto out;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	isc_log(ISC_LOG_INFO, "started on %s (pid %ld, tick %ld ms)", home, (long)getpid(),
	        interval_ms);
	if (!once) {
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
	do {
		isc_err_clear(&err);
		if (isc_broker_tick(broker, &err))
			isc_log(ISC_LOG_ERROR, "tick: %s", err.msg);
		isc_err_clear(&err);
		if (isc_onprem_tick(onprem, &err))
			isc_log(ISC_LOG_ERROR, "on-prem tick: %s", err.msg);
		if (once || stop_requested)
			break;
		sleep_interruptible(interval_ms);
	} while (!stop_requested);
	isc_log(ISC_LOG_INFO, "stopping");
	isc_dataset_cacher_stop(cacher);
out:
	isc_onprem_free(onprem);
	isc_broker_free(broker);
	isc_store_free(store);
	if (lock_fd >= 0)
		close(lock_fd);
	free(home);
	return rc;
}
