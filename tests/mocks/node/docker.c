/*
 * The cheap `docker` stand-in of a mock node (tests/mocks/node): the same
 * records and behaviour as the Python stand-in (bin/docker, see README.md) for
 * everything the launcher and the suites use, at about a millisecond of CPU
 * per call instead of a Python interpreter's 30 to 60. Sixteen nodes booting
 * at once then cost the machine almost nothing, so a benchmark measures the
 * launcher, not the test bed. Waiting (a slow registry, a slow container
 * start, `logs -f`, `wait`) sleeps: wall time, no CPU.
 *
 * Built by node-up (into cbin/docker, next to this file) on first use.
 * State: $MOCK_NODE_DIR/containers/NAME/ with id, image, env (the container's
 * environment, one K=V a line), cmd, created, log, supervisor and pid
 * ("PID STARTTIME"), started_at, finished_at, exit_code (written to a
 * temporary file and renamed: present means exited). Removed containers move
 * to containers-removed/NAME-ID. Pulled images are listed in images.
 * Node settings (files in $MOCK_NODE_DIR): pull-fail (images that fail to pull),
 * pull-delay-ms (every pull takes that long, silent: a stalled registry),
 * pull-progress-ms (every docker pull takes that long printing a layer's progress
 * line every second: a slow registry that keeps going; an image whose name holds
 * pull-progress-MS or pull-stall-MS pulls so, for MS, silent for the latter),
 * start-delay-ms (every container
 * start takes that long), timings (when present, every pull and run appends
 * "pull|run START_MS END_MS" in wall-clock ms to it: where a boot's time went),
 * wait-flood-bytes (a hostile node: `docker wait` prints that many bytes of
 * junk lines before each exit code, so a reader that keeps all it is sent
 * grows without bound).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STD_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define MAX_LIST 256

static const char *node; /* $MOCK_NODE_DIR */

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (ms > 0 && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Whole small file (at most cap-1 bytes) at dirfd/name into buf; -1 if absent. */
static int read_at(int dirfd, const char *name, char *buf, size_t cap)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n, got = 0;
	if (fd < 0)
		return -1;
	while ((size_t)got < cap - 1 && (n = read(fd, buf + got, cap - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	return (int)got;
}

/* Writes text to dirfd/name atomically (temporary file, then rename). */
static void write_at(int dirfd, const char *name, const char *text)
{
	char tmp[128];
	int fd;
	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int)getpid());
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0) {
		/* a full disk: the record stays absent, which readers handle */
	}
	close(fd);
	renameat(dirfd, tmp, dirfd, name);
}

static long long wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Appends "what START END" to $MOCK_NODE_DIR/timings if that file exists. */
static void timing(const char *what, long long start)
{
	char path[4096];
	int fd;
	snprintf(path, sizeof(path), "%s/timings", node);
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
		return;
	dprintf(fd, "%s %lld %lld\n", what, start, wall_ms());
	close(fd);
}

static long node_ms_setting(const char *name)
{
	char path[4096], buf[32];
	int fd;
	snprintf(path, sizeof(path), "%s/%s", node, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return isdigit((unsigned char)buf[0]) ? strtol(buf, NULL, 10) : 0;
}

/*
 * The mock cloud's timing model (docs/mock-cloud.md, "Timing model"): a stage of a node's
 * boot that takes wall time. DIR/stage names it while it lasts ("pull REF START_MS
 * EXPECTED_MS", "fetch START_MS EXPECTED_MS"), so whoever asks the node sees it busy,
 * not dead; DIR/timings gets "pull|fetch START END" as for the other stages.
 */
static void model_stage(const char *what, const char *ref, long ms)
{
	char path[4096], tmp[4200];
	long long t0 = wall_ms();
	int fd;
	snprintf(path, sizeof(path), "%s/stage", node);
	snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid());
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) >= 0) {
		dprintf(fd, "%s%s%s %lld %ld\n", what, ref ? " " : "", ref ? ref : "", t0, ms);
		close(fd);
		rename(tmp, path);
	}
	sleep_ms(ms);
	unlink(path);
	timing(what, t0);
}

/* The size in GB the model gives ref (DIR/model-image-gb: "REF GB" lines, "default GB"). */
static double model_image_gb(const char *image, const char *ref)
{
	char path[4096], line[1200], name[1024];
	double gb, dflt = 0, hit = -1;
	FILE *f;
	snprintf(path, sizeof(path), "%s/model-image-gb", node);
	if (!(f = fopen(path, "re")))
		return 0;
	while (hit < 0 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%1023s %lf", name, &gb) != 2)
			continue;
		if (!strcmp(name, "default"))
			dflt = gb;
		else if (!strcmp(name, image) || !strcmp(name, ref))
			hit = gb;
	}
	fclose(f);
	return hit >= 0 ? hit : dflt;
}

/* Field 22 of /proc/PID/stat (start time in ticks) into out; 0 if gone or a zombie. */
static int proc_start(pid_t pid, char *out, size_t cap)
{
	char path[64], buf[1024], *p;
	int fd, i;
	ssize_t n;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return 0;
	p += 2;
	if (*p == 'Z')
		return 0;
	for (i = 0; i < 19 && p; i++) /* state is field 3; start time is field 22 */
		if ((p = strchr(p, ' ')))
			p++;
	if (!p)
		return 0;
	snprintf(out, cap, "%.*s", (int)strcspn(p, " "), p);
	return 1;
}

/* The recorded "PID START" in dirfd/name is a live process. */
static pid_t recorded_alive(int dirfd, const char *name)
{
	char buf[64], start[32], now[32];
	long pid;
	if (read_at(dirfd, name, buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%ld %31s", &pid, start) != 2 || pid <= 0)
		return 0;
	return proc_start((pid_t)pid, now, sizeof(now)) && !strcmp(now, start) ? (pid_t)pid : 0;
}

static void record_pid(int dirfd, const char *name, pid_t pid)
{
	char start[32] = "0", text[64];
	proc_start(pid, start, sizeof(start));
	snprintf(text, sizeof(text), "%d %s\n", (int)pid, start);
	write_at(dirfd, name, text);
}

static void now_iso(char *out, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec);
}

/* ---- container records ---- */

struct ctr {
	char name[256];
	int fd; /* the container's folder: follows a removal (rename) */
};

static int name_ok(const char *n)
{
	if (!isalnum((unsigned char)n[0]))
		return 0;
	for (const char *p = n; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
			return 0;
	return strlen(n) < 200;
}

static int ctr_open(const char *name, struct ctr *c)
{
	char path[4096], buf[8];
	if (!name_ok(name))
		return -1;
	snprintf(path, sizeof(path), "%s/containers/%s", node, name);
	if ((c->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	snprintf(c->name, sizeof(c->name), "%s", name);
	/* being created: its id appears last of the records written by run */
	for (int i = 0; i < 100 && read_at(c->fd, "id", buf, sizeof(buf)) < 0; i++)
		sleep_ms(20);
	return 0;
}

static void ctr_open_or_die(const char *name, struct ctr *c, const char *what)
{
	if (ctr_open(name, c))
		die(1, "Error response from daemon: No such %s: %s", what, name);
}

/* "running", "exited" or "created"; *code the exit code of an exited one. */
static const char *ctr_status(const struct ctr *c, int *code)
{
	char buf[32];
	*code = 0;
	if (read_at(c->fd, "exit_code", buf, sizeof(buf)) > 0) {
		*code = atoi(buf);
		return "exited";
	}
	if (read_at(c->fd, "pid", buf, sizeof(buf)) <= 0)
		return "created";
	if (recorded_alive(c->fd, "pid") || recorded_alive(c->fd, "supervisor"))
		return "running";
	if (read_at(c->fd, "exit_code", buf, sizeof(buf)) > 0) { /* written just now */
		*code = atoi(buf);
		return "exited";
	}
	*code = 137; /* the supervisor died without a word: the node was taken down */
	return "exited";
}

static int ctr_running(const struct ctr *c)
{
	int code;
	return !strcmp(ctr_status(c, &code), "running");
}

/* Waits for the exit (timeout_ms < 0: forever); the code, or -1 on timeout. */
static int ctr_wait(const struct ctr *c, long timeout_ms)
{
	long waited = 0, step = 10;
	int code;
	while (strcmp(ctr_status(c, &code), "exited")) {
		if (timeout_ms >= 0 && waited >= timeout_ms)
			return -1;
		sleep_ms(step);
		waited += step;
		step = step < 100 ? step * 2 : 100;
	}
	return code;
}

static int ctr_signal(const struct ctr *c, int sig)
{
	pid_t pid = recorded_alive(c->fd, "pid");
	if (!pid)
		return 0;
	if (kill(-pid, sig) && kill(pid, sig))
		return 0;
	return 1;
}

static void ctr_remove(const struct ctr *c)
{
	char from[4096], to[4096], id[80] = "x";
	read_at(c->fd, "id", id, sizeof(id));
	id[strcspn(id, "\n")] = '\0';
	snprintf(from, sizeof(from), "%s/containers-removed", node);
	mkdir(from, 0755);
	snprintf(from, sizeof(from), "%s/containers/%s", node, c->name);
	snprintf(to, sizeof(to), "%s/containers-removed/%s-%s", node, c->name, id);
	rename(from, to);
}

/* ---- pull ---- */

/* image with ":latest" when it names no tag or digest. */
static void normalize(const char *image, char *out, size_t cap)
{
	const char *last = strrchr(image, '/');
	last = last ? last + 1 : image;
	snprintf(out, cap, "%s%s", image, strchr(image, '@') || strchr(last, ':') ? "" : ":latest");
}

static int listed(const char *file, const char *a, const char *b)
{
	char path[4096], line[1024];
	FILE *f;
	int hit = 0;
	snprintf(path, sizeof(path), "%s/%s", node, file);
	if (!(f = fopen(path, "re")))
		return 0;
	while (!hit && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		hit = line[0] && line[0] != '#' && (!strcmp(line, a) || (b && !strcmp(line, b)));
	}
	fclose(f);
	return hit;
}

static int pull_fails(const char *image)
{
	char ref[1024];
	normalize(image, ref, sizeof(ref));
	return strstr(image, "does-not-exist") || listed("pull-fail", image, ref);
}

static int pulled(const char *image)
{
	char ref[1024];
	normalize(image, ref, sizeof(ref));
	return listed("images", ref, NULL);
}

static void record_pull(const char *image)
{
	char ref[1024], path[4096];
	FILE *f;
	if (pulled(image))
		return;
	normalize(image, ref, sizeof(ref));
	snprintf(path, sizeof(path), "%s/images", node);
	if ((f = fopen(path, "ae"))) {
		fprintf(f, "%s\n", ref);
		fclose(f);
	}
}

static const char *denied(const char *image, char *buf, size_t cap)
{
	char repo[1024], *last, *colon;
	snprintf(repo, sizeof(repo), "%.*s", (int)strcspn(image, "@"), image);
	last = strrchr(repo, '/');
	if ((colon = strrchr(last ? last : repo, ':')))
		*colon = '\0';
	snprintf(
	    buf, cap,
	    "Error response from daemon: pull access denied for %s, repository does not exist "
	    "or may require 'docker login': denied: requested access to the resource is denied",
	    repo);
	return buf;
}

/* A cold pull under the model: size x rate; nothing for an image the node has. */
static void model_pull(const char *image)
{
	char ref[1024];
	long per_gb = node_ms_setting("model-pull-ms-per-gb");
	if (per_gb <= 0 || pulled(image))
		return;
	normalize(image, ref, sizeof(ref));
	model_stage("pull", ref, (long)(model_image_gb(image, ref) * (double)per_gb + 0.5));
}

/* A fresh node fetches the dataset before its first container (model-fetch-ms, once). */
static void model_fetch(void)
{
	char path[4096];
	long ms = node_ms_setting("model-fetch-ms");
	int fd;
	snprintf(path, sizeof(path), "%s/fetched", node);
	if (ms <= 0 || access(path, F_OK) == 0)
		return;
	model_stage("fetch", NULL, ms);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0)
		close(fd);
}

/*
 * A pull that takes ms and keeps going: a progress line a second, as docker prints a
 * layer's download on a terminal (the launcher judges a pull by its output).
 */
static void pull_progress(long ms)
{
	for (long done = 0; done < ms; done += 1000) {
		long step = ms - done < 1000 ? ms - done : 1000;
		printf("4f4fb700ef54: Downloading [%3ld%%] %ld ms of %ld ms\n", done * 100 / ms,
		       done, ms);
		fflush(stdout);
		sleep_ms(step);
	}
}

/* DIR/pull-stdout: "terminal" or "pipe", what the last docker pull printed to (docker
 * shows a layer's download progress only on a terminal). */
static void note_pull_stdout(void)
{
	char path[4096];
	FILE *f;
	snprintf(path, sizeof(path), "%s/pull-stdout", node);
	if ((f = fopen(path, "we"))) {
		fprintf(f, "%s\n", isatty(1) ? "terminal" : "pipe");
		fclose(f);
	}
}

static int cmd_pull(int argc, char **argv)
{
	const char *image = NULL;
	char ref[1024], msg[1400];
	int quiet = 0;
	long long t0 = wall_ms();
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
			quiet = 1;
		else if (argv[i][0] == '-' && argv[i][1])
			die(125, "unknown flag: %s\nSee 'docker pull --help'.", argv[i]);
		else if (image)
			die(1, "\"docker pull\" requires exactly 1 argument.");
		else
			image = argv[i];
	}
	if (!image)
		die(1, "\"docker pull\" requires exactly 1 argument.");
	note_pull_stdout();
	sleep_ms(node_ms_setting("pull-delay-ms")); /* the registry: wall time, no CPU */
	pull_progress(node_ms_setting("pull-progress-ms"));
	/* Per image, as does-not-exist: a name holding pull-progress-MS or pull-stall-MS. */
	if (strstr(image, "pull-progress-"))
		pull_progress(atol(strstr(image, "pull-progress-") + 14));
	if (strstr(image, "pull-stall-"))
		sleep_ms(atol(strstr(image, "pull-stall-") + 11));
	if (pull_fails(image))
		die(1, "%s", denied(image, msg, sizeof(msg)));
	model_pull(image);
	normalize(image, ref, sizeof(ref));
	if (!quiet)
		printf("Status: %s for %s\n",
		       pulled(image) ? "Image is up to date" : "Downloaded newer image", ref);
	printf("%s%s\n", strchr(ref, '/') ? "" : "docker.io/library/", ref);
	record_pull(image);
	timing("pull", t0);
	return 0;
}

/* ---- run ---- */

struct run_opts {
	int detach, rm;
	const char *name, *workdir, *gpus;
	const char *vols[MAX_LIST], *envs[MAX_LIST], *envfiles[MAX_LIST];
	int nvols, nenvs, nenvfiles;
};

struct vol {
	char src[1024], dst[1024];
	int ro;
};

static const char *const value_flags[] = {"--name",     "--gpus",   "--network", "--net",   "--ipc",
                                          "--shm-size", "-v",       "--volume",  "-e",      "--env",
                                          "--env-file", "-w",       "--workdir", "--label", "-l",
                                          "--device",   "--ulimit", "--cap-add", NULL};

/* ---- host config: --device, --ulimit, --cap-add, --shm-size, --ipc ---- */

/*
 * What run's host options ask for, checked as dockerd checks them and applied
 * in the container child (a global: run is one process, and the child is a
 * fork of it).
 */
#define MAX_DEV 64
static struct hostcfg {
	const char *ipc, *shm;
	long long shm_bytes; /* 0: docker's default, 64 MiB */
	char dev_src[MAX_DEV][256], dev_dst[MAX_DEV][256];
	dev_t dev_rdev[MAX_DEV];
	mode_t dev_mode[MAX_DEV];
	int ndev;
	struct {
		int resource;
		long long soft, hard; /* -1: unlimited */
		char text[64];
	} ul[16];
	int nul;
	char caps[MAX_LIST][48];
	int ncaps;
} hc;

/* docker's RAMInBytes (go-units): a number, an optional unit k/m/g/t/p (binary), optional i, b. */
static long long ram_in_bytes(const char *s)
{
	regex_t re;
	regmatch_t m[4];
	double v;
	long long mul = 1;
	int ok;
	if (regcomp(&re, "^([0-9]+(\\.[0-9]+)*) ?([kKmMgGtTpP])?[iI]?[bB]?$", REG_EXTENDED))
		return -1;
	ok = !regexec(&re, s, 4, m, 0);
	regfree(&re);
	if (!ok)
		return -1;
	v = strtod(s, NULL);
	if (m[3].rm_so >= 0)
		switch (tolower((unsigned char)s[m[3].rm_so])) {
		case 'p':
			mul <<= 10; /* fall through */
		case 't':
			mul <<= 10; /* fall through */
		case 'g':
			mul <<= 10; /* fall through */
		case 'm':
			mul <<= 10; /* fall through */
		case 'k':
			mul <<= 10;
		}
	return (long long)(v * (double)mul);
}

static const struct {
	const char *name;
	int resource;
} ulimit_names[] = {
    {"core", RLIMIT_CORE},         {"cpu", RLIMIT_CPU},
    {"data", RLIMIT_DATA},         {"fsize", RLIMIT_FSIZE},
    {"locks", RLIMIT_LOCKS},       {"memlock", RLIMIT_MEMLOCK},
    {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE},
    {"nofile", RLIMIT_NOFILE},     {"nproc", RLIMIT_NPROC},
    {"rss", RLIMIT_RSS},           {"rtprio", RLIMIT_RTPRIO},
    {"rttime", RLIMIT_RTTIME},     {"sigpending", RLIMIT_SIGPENDING},
    {"stack", RLIMIT_STACK},
};

static long long ulimit_value(const char *v, const char *arg, const char *which)
{
	char *end;
	long long n;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (!*v || *end || errno)
		die(125,
		    "invalid argument \"%s\" for \"--ulimit\" flag: invalid ulimit %s value %s: "
		    "strconv.ParseInt: parsing \"%s\": invalid syntax\nSee 'docker run --help'.",
		    arg, which, v, v);
	return n;
}

/* go-units ParseUlimit: NAME=SOFT[:HARD], HARD defaults to SOFT, -1 is unlimited. */
static void add_ulimit(const char *arg)
{
	char name[64], soft[64], *hard;
	const char *eq = strchr(arg, '=');
	int r = -1;
	if (!eq || (size_t)(eq - arg) >= sizeof(name))
		die(125,
		    "invalid argument \"%s\" for \"--ulimit\" flag: invalid ulimit argument: "
		    "%s\nSee 'docker run --help'.",
		    arg, arg);
	snprintf(name, sizeof(name), "%.*s", (int)(eq - arg), arg);
	for (size_t i = 0; i < sizeof(ulimit_names) / sizeof(ulimit_names[0]); i++)
		if (!strcmp(ulimit_names[i].name, name))
			r = ulimit_names[i].resource;
	if (r < 0)
		die(125,
		    "invalid argument \"%s\" for \"--ulimit\" flag: invalid ulimit type: %s\nSee "
		    "'docker run --help'.",
		    arg, name);
	snprintf(soft, sizeof(soft), "%s", eq + 1);
	if ((hard = strchr(soft, ':')))
		*hard++ = '\0';
	if (hc.nul >= 16)
		die(125, "docker: too many ulimits (mock limit 16)");
	hc.ul[hc.nul].resource = r;
	hc.ul[hc.nul].soft = ulimit_value(soft, arg, "soft");
	hc.ul[hc.nul].hard = hard ? ulimit_value(hard, arg, "hard") : hc.ul[hc.nul].soft;
	if (hc.ul[hc.nul].hard != -1 && hc.ul[hc.nul].soft > hc.ul[hc.nul].hard)
		die(125,
		    "invalid argument \"%s\" for \"--ulimit\" flag: ulimit soft limit must be less "
		    "than or equal to hard limit: %lld > %lld\nSee 'docker run --help'.",
		    arg, hc.ul[hc.nul].soft, hc.ul[hc.nul].hard);
	snprintf(hc.ul[hc.nul].text, sizeof(hc.ul[0].text), "%s", arg);
	hc.nul++;
}

/* The capabilities --cap-add accepts (capability(7)), without their CAP_ prefix. */
static const char *const cap_names[] = {"CHOWN",
                                        "DAC_OVERRIDE",
                                        "DAC_READ_SEARCH",
                                        "FOWNER",
                                        "FSETID",
                                        "KILL",
                                        "SETGID",
                                        "SETUID",
                                        "SETPCAP",
                                        "LINUX_IMMUTABLE",
                                        "NET_BIND_SERVICE",
                                        "NET_BROADCAST",
                                        "NET_ADMIN",
                                        "NET_RAW",
                                        "IPC_LOCK",
                                        "IPC_OWNER",
                                        "SYS_MODULE",
                                        "SYS_RAWIO",
                                        "SYS_CHROOT",
                                        "SYS_PTRACE",
                                        "SYS_PACCT",
                                        "SYS_ADMIN",
                                        "SYS_BOOT",
                                        "SYS_NICE",
                                        "SYS_RESOURCE",
                                        "SYS_TIME",
                                        "SYS_TTY_CONFIG",
                                        "MKNOD",
                                        "LEASE",
                                        "AUDIT_WRITE",
                                        "AUDIT_CONTROL",
                                        "SETFCAP",
                                        "MAC_OVERRIDE",
                                        "MAC_ADMIN",
                                        "SYSLOG",
                                        "WAKE_ALARM",
                                        "BLOCK_SUSPEND",
                                        "AUDIT_READ",
                                        "PERFMON",
                                        "BPF",
                                        "CHECKPOINT_RESTORE",
                                        NULL};

/* dockerd's NormalizeLegacyCapabilities: case-insensitive, CAP_ optional, ALL allowed. */
static void add_cap(const char *arg)
{
	char up[48];
	const char *bare;
	size_t i;
	for (i = 0; arg[i] && i < sizeof(up) - 1; i++)
		up[i] = (char)toupper((unsigned char)arg[i]);
	up[i] = '\0';
	bare = strncmp(up, "CAP_", 4) ? up : up + 4;
	for (i = 0; cap_names[i]; i++)
		if (!strcmp(cap_names[i], bare))
			break;
	if (!cap_names[i] && strcmp(up, "ALL"))
		die(125,
		    "docker: Error response from daemon: invalid CapAdd: unknown capability: "
		    "\"CAP_%s\".\nSee 'docker run --help'.",
		    bare);
	if (hc.ncaps < MAX_LIST)
		snprintf(hc.caps[hc.ncaps++], sizeof(hc.caps[0]), "%s%s",
		         strcmp(up, "ALL") ? "CAP_" : "", bare);
}

static void add_device_node(const char *src, const char *dst, const struct stat *st,
                            const char *arg)
{
	if (hc.ndev >= MAX_DEV)
		die(125, "docker: too many devices (mock limit %d)", MAX_DEV);
	if (strlen(src) >= sizeof(hc.dev_src[0]) || strlen(dst) >= sizeof(hc.dev_dst[0]))
		die(125, "docker: device path too long: %s", arg);
	hc.dev_rdev[hc.ndev] = st->st_rdev;
	hc.dev_mode[hc.ndev] = st->st_mode;
	snprintf(hc.dev_src[hc.ndev], sizeof(hc.dev_src[0]), "%s", src);
	snprintf(hc.dev_dst[hc.ndev++], sizeof(hc.dev_dst[0]), "%s", dst);
}

/*
 * --device HOST[:CONTAINER[:PERMISSIONS]] as the CLI parses it and dockerd then
 * gathers it: CONTAINER must be absolute, PERMISSIONS of r, w and m; HOST must be
 * a character or block device, or a folder whose device nodes are all added.
 */
static void add_device(const char *arg)
{
	char buf[1024], *src = buf, *dst, *perm = NULL;
	struct stat st;
	snprintf(buf, sizeof(buf), "%s", arg);
	if ((dst = strchr(src, ':'))) {
		*dst++ = '\0';
		if ((perm = strchr(dst, ':')))
			*perm++ = '\0';
		else if (strspn(dst, "rwm") == strlen(dst) && *dst) {
			perm = dst; /* HOST:PERMISSIONS */
			dst = src;
		}
	} else {
		dst = src;
	}
	if (perm && (!*perm || strspn(perm, "rwm") != strlen(perm)))
		die(125,
		    "invalid argument \"%s\" for \"--device\" flag: bad mode specified: %s\nSee "
		    "'docker run --help'.",
		    arg, perm);
	if (dst[0] != '/')
		die(125,
		    "invalid argument \"%s\" for \"--device\" flag: bad format for path: %s\nSee "
		    "'docker run --help'.",
		    arg, dst);
	if (stat(src, &st))
		die(125,
		    "docker: Error response from daemon: error gathering device information while "
		    "adding custom device \"%s\": %s.",
		    src, errno == ENOENT ? "no such file or directory" : strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(src);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char s2[1024], d2[1024];
			struct stat st2;
			snprintf(s2, sizeof(s2), "%s/%s", src, e->d_name);
			snprintf(d2, sizeof(d2), "%s/%s", dst, e->d_name);
			if (!stat(s2, &st2) && (S_ISCHR(st2.st_mode) || S_ISBLK(st2.st_mode)))
				add_device_node(s2, d2, &st2, arg);
		}
		if (d)
			closedir(d);
	} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		add_device_node(src, dst, &st, arg);
	} else {
		die(125,
		    "docker: Error response from daemon: error gathering device information while "
		    "adding custom device \"%s\": not a device node.",
		    src);
	}
}

static void check_shm(const char *v)
{
	long long n = ram_in_bytes(v);
	if (n < 0)
		die(125,
		    "invalid argument \"%s\" for \"--shm-size\" flag: invalid size: '%s'\nSee "
		    "'docker run --help'.",
		    v, v);
	hc.shm = v;
	hc.shm_bytes = n;
}

/* The host config as plain lines in the container's records (tests read them). */
static void record_hostcfg(int dfd)
{
	char text[16384];
	size_t len = 0;
	text[0] = '\0';
#define ADD(...)                                                                                   \
	len +=                                                                                     \
	    (size_t)snprintf(text + len, len < sizeof(text) ? sizeof(text) - len : 0, __VA_ARGS__)
	ADD("ipc=%s\n", hc.ipc ? hc.ipc : "private");
	ADD("shm_size=%lld\n", hc.shm_bytes ? hc.shm_bytes : 64LL << 20);
	for (int i = 0; i < hc.ndev; i++)
		ADD("device=%s:%s\n", hc.dev_src[i], hc.dev_dst[i]);
	for (int i = 0; i < hc.nul; i++)
		ADD("ulimit=%s\n", hc.ul[i].text);
	for (int i = 0; i < hc.ncaps; i++)
		ADD("cap_add=%s\n", hc.caps[i]);
#undef ADD
	write_at(dfd, "hostconfig", text);
}

/*
 * In the container child, after its binds: the ulimits; a /dev/infiniband that
 * holds only the devices given with --device (docker's /dev is the container's
 * own); without --ipc host, an IPC namespace (System V shared memory, semaphores,
 * message queues) and a /dev/shm of --shm-size (docker's default 64 MiB) of the
 * container's own, as docker's "private" and "shareable" modes give
 * (https://docs.docker.com/engine/containers/run/#ipc-settings---ipc); with it
 * the node's.
 */
static int apply_hostcfg(char *why, size_t cap)
{
	struct stat st;
	int ib = !stat("/dev/infiniband", &st) && S_ISDIR(st.st_mode);
	int own_shm = !hc.ipc || strcmp(hc.ipc, "host");
	for (int i = 0; i < hc.nul; i++) {
		struct rlimit rl = {hc.ul[i].soft < 0 ? RLIM_INFINITY : (rlim_t)hc.ul[i].soft,
		                    hc.ul[i].hard < 0 ? RLIM_INFINITY : (rlim_t)hc.ul[i].hard};
		struct rlimit now;
		/*
		 * Raising a hard limit needs CAP_SYS_RESOURCE, which dockerd has and a test
		 * sandbox may not: there the limit stops at the node's hard limit (README.md).
		 */
		if (setrlimit(hc.ul[i].resource, &rl) && errno == EPERM &&
		    !getrlimit(hc.ul[i].resource, &now)) {
			rl.rlim_max = rl.rlim_max > now.rlim_max ? now.rlim_max : rl.rlim_max;
			rl.rlim_cur = rl.rlim_cur > rl.rlim_max ? rl.rlim_max : rl.rlim_cur;
			if (setrlimit(hc.ul[i].resource, &rl)) {
				snprintf(why, cap, "setrlimit %s: %s", hc.ul[i].text,
				         strerror(errno));
				return -1;
			}
		}
	}
	if (!ib && !own_shm)
		return 0;
	if (unshare(CLONE_NEWNS | (own_shm ? CLONE_NEWIPC : 0)) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		snprintf(why, cap, "unshare: %s", strerror(errno));
		return -1;
	}
	if (own_shm) {
		char opt[64];
		snprintf(opt, sizeof(opt), "size=%lld", hc.shm_bytes ? hc.shm_bytes : 64LL << 20);
		if (mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opt)) {
			snprintf(why, cap, "mount /dev/shm: %s", strerror(errno));
			return -1;
		}
	}
	if (ib) {
		if (mount("devices", "/dev/infiniband", "tmpfs", MS_NOSUID, "mode=755,size=64k")) {
			snprintf(why, cap, "mount /dev/infiniband: %s", strerror(errno));
			return -1;
		}
		/* As dockerd does: a node of the same numbers in the container's own /dev. */
		for (int i = 0; i < hc.ndev; i++) {
			if (strncmp(hc.dev_dst[i], "/dev/infiniband/", 16))
				continue;
			if (mknod(hc.dev_dst[i], hc.dev_mode[i], hc.dev_rdev[i])) {
				snprintf(why, cap, "mknod %s: %s", hc.dev_dst[i], strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}

static void push(const char **list, int *n, const char *v)
{
	if (*n >= MAX_LIST)
		die(125, "docker: too many options (mock limit %d)", MAX_LIST);
	list[(*n)++] = v;
}

static void run_flag(struct run_opts *o, const char *key, const char *val)
{
	if (!strcmp(key, "--name"))
		o->name = val;
	else if (!strcmp(key, "--gpus"))
		o->gpus = val;
	else if (!strcmp(key, "-v") || !strcmp(key, "--volume"))
		push(o->vols, &o->nvols, val);
	else if (!strcmp(key, "-e") || !strcmp(key, "--env"))
		push(o->envs, &o->nenvs, val);
	else if (!strcmp(key, "--env-file"))
		push(o->envfiles, &o->nenvfiles, val);
	else if (!strcmp(key, "-w") || !strcmp(key, "--workdir"))
		o->workdir = val;
	else if ((!strcmp(key, "--label") || !strcmp(key, "-l")) && (!*val || *val == '='))
		die(125, "docker: invalid label '%s'.\nSee 'docker run --help'.", val);
	else if (!strcmp(key, "--device"))
		add_device(val);
	else if (!strcmp(key, "--ulimit"))
		add_ulimit(val);
	else if (!strcmp(key, "--cap-add"))
		add_cap(val);
	else if (!strcmp(key, "--shm-size"))
		check_shm(val);
	else if (!strcmp(key, "--ipc"))
		hc.ipc = val;
	/* --network: accepted, changes nothing (the network is the host's) */
}

static int is_value_flag(const char *k)
{
	for (int i = 0; value_flags[i]; i++)
		if (!strcmp(k, value_flags[i]))
			return 1;
	return 0;
}

/* Parses run's options; returns the index of IMAGE. */
static int parse_run(int argc, char **argv, struct run_opts *o)
{
	int i = 0;
	while (i < argc) {
		char key[64];
		const char *a = argv[i], *val = NULL, *eq;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || !a[1])
			break;
		snprintf(key, sizeof(key), "%s", a);
		if (a[1] == '-' && (eq = strchr(a, '='))) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - a), a);
			val = eq + 1;
		} else if (a[1] != '-' && a[2]) { /* -eK=V, -vSRC:DST */
			snprintf(key, sizeof(key), "%.2s", a);
			if (!is_value_flag(key))
				die(125,
				    "unknown shorthand flag: '%c' in %s\nSee 'docker run --help'.",
				    a[1], a);
			val = a + 2;
		}
		if (!strcmp(key, "-d") || !strcmp(key, "--detach") || !strcmp(key, "--rm")) {
			int on = !val || strcmp(val, "false");
			if (val && strcmp(val, "true") && strcmp(val, "false"))
				die(125, "invalid argument '%s' for '%s' flag", val, key);
			if (!strcmp(key, "--rm"))
				o->rm = on;
			else
				o->detach = on;
			i++;
			continue;
		}
		if (!is_value_flag(key))
			die(125, "unknown flag: %s\nSee 'docker run --help'.", key);
		if (!val) {
			if (i + 1 >= argc)
				die(125, "flag needs an argument: %s\nSee 'docker run --help'.",
				    key);
			val = argv[++i];
		}
		run_flag(o, key, val);
		i++;
	}
	if (i >= argc)
		die(125, "\"docker run\" requires at least 1 argument.\nSee 'docker run --help'.");
	return i;
}

/* The container's environment: PATH and HOME, then the env files, then -e (last wins). */
struct env {
	char *v[MAX_LIST * 2];
	int n;
};

static void env_put(struct env *e, const char *item, const char *where)
{
	const char *eq = strchr(item, '=');
	char *kv;
	size_t klen;
	if (!eq) {
		const char *v = getenv(item);
		if (!v)
			return;
		if (asprintf(&kv, "%s=%s", item, v) < 0)
			die(125, "docker: out of memory");
	} else if (!(kv = strdup(item))) {
		die(125, "docker: out of memory");
	}
	klen = strcspn(kv, "=");
	if (!klen)
		die(125, "docker: invalid environment variable: %s (%s).\nSee 'docker run --help'.",
		    item, where);
	for (int i = 0; i < e->n; i++)
		if (!strncmp(e->v[i], kv, klen + 1)) {
			free(e->v[i]);
			e->v[i] = kv;
			return;
		}
	if (e->n >= (int)(sizeof(e->v) / sizeof(e->v[0])) - 1)
		die(125, "docker: too many environment variables (mock limit)");
	e->v[e->n++] = kv;
	e->v[e->n] = NULL;
}

static void build_env(const struct run_opts *o, struct env *e)
{
	char line[65536];
	e->n = 0;
	env_put(e, "PATH=" STD_PATH, "default");
	env_put(e, "HOME=/root", "default");
	for (int i = 0; i < o->nenvfiles; i++) {
		FILE *f = fopen(o->envfiles[i], "re");
		if (!f)
			die(125, "docker: open %s: %s.\nSee 'docker run --help'.", o->envfiles[i],
			    strerror(errno));
		while (fgets(line, sizeof(line), f)) {
			char *s = line;
			s[strcspn(s, "\r\n")] = '\0';
			while (*s == ' ' || *s == '\t')
				s++;
			if (*s && *s != '#')
				env_put(e, s, o->envfiles[i]);
		}
		fclose(f);
	}
	for (int i = 0; i < o->nenvs; i++)
		env_put(e, o->envs[i], "-e");
}

static int parse_vols(const struct run_opts *o, struct vol *v)
{
	for (int i = 0; i < o->nvols; i++) {
		char spec[2100], *p2, *p3 = NULL;
		struct stat st;
		snprintf(spec, sizeof(spec), "%s", o->vols[i]);
		if (!(p2 = strchr(spec, ':')))
			die(125,
			    "docker: Error response from daemon: invalid volume specification: "
			    "'%s'",
			    o->vols[i]);
		*p2++ = '\0';
		if ((p3 = strchr(p2, ':'))) {
			*p3++ = '\0';
			if (strchr(p3, ':'))
				die(125,
				    "docker: Error response from daemon: invalid spec: %s: too "
				    "many colons.",
				    o->vols[i]);
			if (strcmp(p3, "ro") && strcmp(p3, "rw") && *p3)
				die(125, "docker: Error response from daemon: invalid mode: %s.",
				    p3);
		}
		if (spec[0] != '/' || p2[0] != '/')
			die(125,
			    "docker: Error response from daemon: invalid mount path in '%s': this "
			    "mock "
			    "supports only absolute paths",
			    o->vols[i]);
		if (stat(spec, &st))
			die(125,
			    "docker: Error response from daemon: invalid mount config for type "
			    "\"bind\": "
			    "bind source path does not exist: %s.",
			    spec);
		snprintf(v[i].src, sizeof(v[i].src), "%s", spec);
		snprintf(v[i].dst, sizeof(v[i].dst), "%s", p2);
		v[i].ro = p3 && !strcmp(p3, "ro");
	}
	return o->nvols;
}

/*
 * An image's own programs (tests/mocks/node/images/NAME, NAME the repository's last
 * path component without tag or digest): bin/ is the container's /usr/local/bin and
 * workspace/ its /workspace, read-only, as if the image had installed them, and
 * /workspace is the working folder unless -w says otherwise (README.md, "Images with
 * programs"). Returns the new number of binds.
 */
static int image_vols(const char *image, struct vol *v, int n, struct run_opts *o)
{
	char self[1024], repo[256], dir[1400];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const char *base, *end;
	struct stat st;

	if (len <= 0)
		return n;
	self[len] = '\0';
	for (int k = 0; k < 2; k++) { /* .../tests/mocks/node/cbin/docker -> .../node */
		char *slash = strrchr(self, '/');
		if (!slash)
			return n;
		*slash = '\0';
	}
	base = strrchr(image, '/');
	base = base ? base + 1 : image;
	end = base + strcspn(base, ":@");
	snprintf(repo, sizeof(repo), "%.*s", (int)(end - base), base);
	if (!repo[0])
		return n;
	snprintf(dir, sizeof(dir), "%s/images/%s/bin", self, repo);
	if (n < MAX_LIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(v[n].src, sizeof(v[n].src), "%s", dir);
		snprintf(v[n].dst, sizeof(v[n].dst), "/usr/local/bin");
		v[n++].ro = 1;
	}
	snprintf(dir, sizeof(dir), "%s/images/%s/workspace", self, repo);
	if (n < MAX_LIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(v[n].src, sizeof(v[n].src), "%s", dir);
		snprintf(v[n].dst, sizeof(v[n].dst), "/workspace");
		v[n++].ro = 1;
		if (!o->workdir)
			o->workdir = "/workspace";
	}
	return n;
}

static void mkdirs(const char *path)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755);
			*p = '/';
		}
	mkdir(buf, 0755);
}

/* In the container child: a private mount namespace with the non-identity and read-only binds. */
static int setup_mounts(const struct vol *v, int n, char *why, size_t cap)
{
	int need = 0;
	for (int i = 0; i < n; i++) {
		char a[4096], b[4096];
		if (v[i].ro || !realpath(v[i].src, a) || !realpath(v[i].dst, b) || strcmp(a, b))
			need = 1;
	}
	if (!need)
		return 0;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		snprintf(why, cap, "unshare: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (!stat(v[i].src, &st) && S_ISDIR(st.st_mode)) {
			mkdirs(v[i].dst);
		} else if (access(v[i].dst, F_OK)) {
			int fd = open(v[i].dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (fd >= 0)
				close(fd);
		}
		if (mount(v[i].src, v[i].dst, NULL, MS_BIND | MS_REC, NULL) ||
		    (v[i].ro &&
		     mount(NULL, v[i].dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL))) {
			snprintf(why, cap, "mount %s on %s: %s", v[i].src, v[i].dst,
			         strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * The supervisor (a detached grandchild of run): starts the container process
 * in its own session, reports "ok" or "err CODE MESSAGE" on report_fd, waits,
 * records the exit code (128+signal when killed).
 */
static void supervise(int dfd, int report_fd, char **cmd, char **envp, const struct vol *vols,
                      int nvols, const char *workdir, int autoremove, const char *name)
{
	int errp[2], st = 0, code;
	char msg[1200] = "", when[64];
	ssize_t n;
	pid_t child;

	setsid();
	if (fork())
		_exit(0);
	int devnull = open("/dev/null", O_RDWR);
	dup2(devnull, 0);
	dup2(devnull, 1);
	dup2(devnull, 2);
	if (devnull > 2)
		close(devnull);
	signal(SIGHUP, SIG_IGN);
	record_pid(dfd, "supervisor", getpid());
	if (pipe2(errp, O_CLOEXEC))
		_exit(1);
	if (!(child = fork())) {
		char why[1100];
		int logfd;
		close(errp[0]);
		close(report_fd);
		setsid();
		signal(SIGHUP, SIG_DFL);
		if (setup_mounts(vols, nvols, why, sizeof(why)) ||
		    apply_hostcfg(why, sizeof(why))) {
			dprintf(errp[1], "err 126 %s: unknown", why);
			_exit(126);
		}
		logfd = openat(dfd, "log", O_WRONLY | O_APPEND | O_CLOEXEC);
		dup2(logfd, 1);
		dup2(logfd, 2);
		mkdirs(workdir);
		if (chdir(workdir)) {
			dprintf(errp[1], "err 126 chdir %s: %s: unknown", workdir, strerror(errno));
			_exit(126);
		}
		for (char **e = envp; *e; e++) /* execvpe searches the container's PATH */
			if (!strncmp(*e, "PATH=", 5))
				setenv("PATH", *e + 5, 1);
		execvpe(cmd[0], cmd, envp);
		if (errno == ENOENT)
			dprintf(errp[1],
			        "err 127 exec: \"%s\": executable file not found in $PATH: unknown",
			        cmd[0]);
		else
			dprintf(errp[1], "err 126 exec %s: %s: unknown", cmd[0], strerror(errno));
		_exit(127);
	}
	close(errp[1]);
	record_pid(dfd, "pid", child);
	n = read(errp[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	close(errp[0]);
	if (!msg[0]) {
		now_iso(when, sizeof(when));
		strcat(when, "\n");
		write_at(dfd, "started_at", when);
		dprintf(report_fd, "ok\n");
	} else {
		dprintf(report_fd, "%s", msg);
	}
	close(report_fd);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
	if (msg[0])
		code = atoi(msg + 4);
	now_iso(when, sizeof(when));
	strcat(when, "\n");
	write_at(dfd, "finished_at", when);
	snprintf(when, sizeof(when), "%d\n", code);
	write_at(dfd, "exit_code", when);
	if (autoremove) {
		struct ctr c = {.fd = dfd};
		snprintf(c.name, sizeof(c.name), "%s", name);
		ctr_remove(&c);
	}
	_exit(0);
}

static void follow_log(const struct ctr *c, int follow, long tail);

static int cmd_run(int argc, char **argv)
{
	struct run_opts o = {0};
	struct vol vols[MAX_LIST];
	struct env env;
	char id[65], name[256], path[4096], msg[1400], when[64];
	unsigned char rnd[32];
	long long t0 = wall_ms();
	int img_i = parse_run(argc, argv, &o), nvols, dfd, rp[2], fd;
	const char *image = argv[img_i];
	char **cmd = argv + img_i + 1;
	pid_t pid;

	if (o.name && !name_ok(o.name))
		die(125,
		    "docker: Error response from daemon: Invalid container name (%s), only "
		    "[a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.",
		    o.name);
	if (o.gpus && !*o.gpus)
		die(125, "docker: invalid argument \"\" for \"--gpus\" flag.");
	build_env(&o, &env);
	nvols = parse_vols(&o, vols);
	nvols = image_vols(image, vols, nvols, &o);
	if (!pulled(image)) {
		if (pull_fails(image))
			die(125, "docker: %s.\nSee 'docker run --help'.",
			    denied(image, msg, sizeof(msg)));
		sleep_ms(node_ms_setting("pull-delay-ms"));
		model_pull(image);
		record_pull(image);
	}
	model_fetch();
	if (!*cmd)
		die(125, "docker: Error response from daemon: No command specified.");
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd))
		die(125, "docker: no randomness for a container id");
	close(fd);
	for (int i = 0; i < 32; i++)
		sprintf(id + 2 * i, "%02x", rnd[i]);
	snprintf(name, sizeof(name), "%s", o.name ? o.name : "");
	if (!o.name)
		snprintf(name, sizeof(name), "mock_%.12s", id);
	snprintf(path, sizeof(path), "%s/containers", node);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/containers/%s", node, name);
	if (mkdir(path, 0755)) /* atomic: the name is taken by exactly one caller */
		die(125,
		    "docker: Error response from daemon: Conflict. The container name \"/%s\" is "
		    "already in use by a container. You have to remove (or rename) that container "
		    "to "
		    "be able to reuse that name.\nSee 'docker run --help'.",
		    name);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	{
		size_t len = 0;
		char *text;
		for (int i = 0; i < env.n; i++)
			len += strlen(env.v[i]) + 1;
		text = calloc(1, len + 1);
		for (int i = 0; text && i < env.n; i++)
			strcat(strcat(text, env.v[i]), "\n");
		write_at(dfd, "env", text ? text : "");
		free(text);
		len = 0;
		for (char **a = cmd; *a; a++)
			len += strlen(*a) + 1;
		text = calloc(1, len + 1);
		for (char **a = cmd; text && *a; a++)
			strcat(strcat(text, *a), a[1] ? " " : "");
		write_at(dfd, "cmd", text ? text : "");
		free(text);
	}
	write_at(dfd, "image", image);
	record_hostcfg(dfd);
	now_iso(when, sizeof(when));
	write_at(dfd, "created", when);
	close(openat(dfd, "log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
	write_at(dfd, "id", id);                     /* last: ctr_open waits for it */
	sleep_ms(node_ms_setting("start-delay-ms")); /* a slow container start: no CPU */

	if (pipe2(rp, O_CLOEXEC))
		die(125, "docker: pipe: %s", strerror(errno));
	fflush(NULL);
	if (!(pid = fork())) {
		close(rp[0]);
		supervise(dfd, rp[1], cmd, env.v, vols, nvols, o.workdir ? o.workdir : "/", o.rm,
		          name);
	}
	close(rp[1]);
	{
		ssize_t n, got = 0;
		while ((n = read(rp[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
			got += n;
		msg[got > 0 ? got : 0] = '\0';
	}
	close(rp[0]);
	waitpid(pid, NULL, 0); /* the first fork exits at once */
	if (strncmp(msg, "ok", 2)) {
		int code = !strncmp(msg, "err ", 4) ? atoi(msg + 4) : 127;
		char *text = !strncmp(msg, "err ", 4) ? strchr(msg + 4, ' ') : NULL;
		die(code ? code : 127,
		    "docker: Error response from daemon: failed to create task for container: %s",
		    text ? text + 1 : msg);
	}
	timing("run", t0);
	if (o.detach) {
		printf("%s\n", id);
		return 0;
	}
	{
		struct ctr c = {.fd = dfd};
		int code;
		snprintf(c.name, sizeof(c.name), "%s", name);
		follow_log(&c, 1, -1);
		code = ctr_wait(&c, -1);
		if (o.rm)
			ctr_remove(&c);
		return code;
	}
}

/* ---- logs, wait, inspect, stop, kill, rm, ps ---- */

static void copy_out(int fd)
{
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			exit(0); /* the reader went away */
	fflush(stdout);
}

/* Prints the log (its last `tail` lines when tail >= 0); with follow, until the container exits. */
static void follow_log(const struct ctr *c, int follow, long tail)
{
	int fd = openat(c->fd, "log", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (tail >= 0) {
		off_t size = lseek(fd, 0, SEEK_END), pos = size;
		long lines = 0;
		char ch;
		while (pos > 0 && lines <= tail) {
			if (pread(fd, &ch, 1, pos - 1) != 1)
				break;
			if (ch == '\n' && pos != size)
				lines++;
			if (lines > tail)
				break;
			pos--;
		}
		lseek(fd, pos, SEEK_SET);
	}
	for (;;) {
		copy_out(fd);
		if (!follow)
			break;
		if (!ctr_running(c)) {
			copy_out(fd); /* what was written before the exit */
			break;
		}
		sleep_ms(50);
	}
	close(fd);
}

static int cmd_logs(int argc, char **argv)
{
	const char *name = NULL;
	int follow = 0;
	long tail = -1;
	struct ctr c;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-f") || !strcmp(a, "--follow"))
			follow = 1;
		else if (!strcmp(a, "-n") || !strcmp(a, "--tail") || !strncmp(a, "--tail=", 7)) {
			const char *v =
			    a[1] == '-' && a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v)
				die(125, "flag needs an argument: --tail");
			tail = strcmp(v, "all") ? atol(v) : -1;
		} else if (a[0] == '-')
			die(125, "unknown flag: %s\nSee 'docker logs --help'.", a);
		else if (name)
			die(1, "\"docker logs\" requires exactly 1 argument.");
		else
			name = a;
	}
	if (!name)
		die(1, "\"docker logs\" requires exactly 1 argument.");
	ctr_open_or_die(name, &c, "container");
	follow_log(&c, follow, tail);
	return 0;
}

/* The wait-flood-bytes fault: n bytes of 63-character lines of junk on stdout. */
static void flood(long n)
{
	char line[64 * 1024];
	for (size_t i = 0; i < sizeof(line); i++)
		line[i] = i % 64 == 63 ? '\n' : 'x';
	while (n > 0) {
		size_t k = n < (long)sizeof(line) ? (size_t)n : sizeof(line);
		if (fwrite(line, 1, k, stdout) != k)
			return; /* the reader went away */
		n -= (long)k;
	}
}

static int cmd_wait(int argc, char **argv)
{
	struct ctr c[MAX_LIST];
	if (!argc || argc > MAX_LIST)
		die(1, "\"docker wait\" requires at least 1 argument.");
	for (int i = 0; i < argc; i++)
		ctr_open_or_die(argv[i], &c[i], "container");
	for (int i = 0; i < argc; i++) {
		int code = ctr_wait(&c[i], -1);
		flood(node_ms_setting("wait-flood-bytes"));
		printf("%d\n", code);
		fflush(stdout);
	}
	return 0;
}

static void rec(const struct ctr *c, const char *file, char *out, size_t cap)
{
	if (read_at(c->fd, file, out, cap) < 0)
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* The env record as a JSON array. */
static void json_env(const struct ctr *c, FILE *f)
{
	char buf[65536], *line, *save = NULL;
	int first = 1;
	if (read_at(c->fd, "env", buf, sizeof(buf)) < 0)
		buf[0] = '\0';
	fputc('[', f);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!first)
			fputc(',', f);
		json_str(f, line);
		first = 0;
	}
	fputc(']', f);
}

/*
 * One field of inspect (ps 0) or of ps's --format (ps 1, which names them
 * differently); 0, or -1 when this mock does not have the field.
 */
static int field(const struct ctr *c, const char *f, int as_json, FILE *out, int ps)
{
	char buf[1024];
	int code;
	const char *st = ctr_status(c, &code);
	pid_t pid = strcmp(st, "running") ? 0 : recorded_alive(c->fd, "pid");
	if (ps && !strcmp(f, "Names"))
		snprintf(buf, sizeof(buf), "%s", c->name);
	else if (ps && !strcmp(f, "ID")) {
		rec(c, "id", buf, sizeof(buf));
		buf[12] = '\0';
	} else if (ps && !strcmp(f, "Image"))
		rec(c, "image", buf, sizeof(buf));
	else if (ps && !strcmp(f, "State"))
		snprintf(buf, sizeof(buf), "%s", st);
	else if (ps && !strcmp(f, "Status")) {
		if (!strcmp(st, "exited"))
			snprintf(buf, sizeof(buf), "Exited (%d)", code);
		else
			snprintf(buf, sizeof(buf), "%s", !strcmp(st, "running") ? "Up" : "Created");
	} else if (ps && !strcmp(f, "Command"))
		rec(c, "cmd", buf, sizeof(buf));
	else if (ps && !strcmp(f, "CreatedAt"))
		rec(c, "created", buf, sizeof(buf));
	else if (ps)
		return -1;
	else if (!strcmp(f, "Id"))
		rec(c, "id", buf, sizeof(buf));
	else if (!strcmp(f, "Name"))
		snprintf(buf, sizeof(buf), "/%s", c->name);
	else if (!strcmp(f, "State.Status"))
		snprintf(buf, sizeof(buf), "%s", st);
	else if (!strcmp(f, "State.Running"))
		snprintf(buf, sizeof(buf), "%s", pid || !strcmp(st, "running") ? "true" : "false");
	else if (!strcmp(f, "State.ExitCode"))
		snprintf(buf, sizeof(buf), "%d", code);
	else if (!strcmp(f, "State.Pid"))
		snprintf(buf, sizeof(buf), "%d", (int)pid);
	else if (!strcmp(f, "State.StartedAt"))
		rec(c, "started_at", buf, sizeof(buf));
	else if (!strcmp(f, "State.FinishedAt"))
		rec(c, "finished_at", buf, sizeof(buf));
	else if (!strcmp(f, "Config.Image"))
		rec(c, "image", buf, sizeof(buf));
	else if (!strcmp(f, "Config.Env")) {
		json_env(c, out);
		return 0;
	} else
		return -1;
	if (as_json && strcmp(f, "State.ExitCode") && strcmp(f, "State.Pid") &&
	    strcmp(f, "State.Running"))
		json_str(out, buf);
	else
		fputs(buf, out);
	return 0;
}

/* Substitutes {{.Field}} and {{json .Field}}; -1 on an unknown field. */
static int render(const struct ctr *c, const char *tpl, FILE *out, int ps)
{
	while (*tpl) {
		const char *open = strstr(tpl, "{{"), *close, *p;
		char name[128];
		int as_json = 0;
		if (!open || !(close = strstr(open, "}}"))) {
			fputs(tpl, out);
			break;
		}
		fwrite(tpl, 1, (size_t)(open - tpl), out);
		p = open + 2;
		while (*p == ' ')
			p++;
		if (!strncmp(p, "json ", 5)) {
			as_json = 1;
			p += 5;
			while (*p == ' ')
				p++;
		}
		if (*p != '.')
			return -1;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(p + 1, " }"), p + 1);
		if (field(c, name, as_json, out, ps))
			return -1;
		tpl = close + 2;
	}
	return 0;
}

static int cmd_inspect(int argc, char **argv)
{
	const char *fmt = NULL;
	int missing = 0, shown = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		struct ctr c;
		if (!strcmp(a, "-f") || !strcmp(a, "--format")) {
			if (i + 1 >= argc)
				die(125, "flag needs an argument: %s", a);
			fmt = argv[++i];
			continue;
		}
		if (!strncmp(a, "--format=", 9)) {
			fmt = a + 9;
			continue;
		}
		if (ctr_open(a, &c)) {
			fprintf(stderr, "Error: No such object: %s\n", a);
			missing = 1;
			continue;
		}
		if (fmt) {
			if (render(&c, fmt, stdout, 0))
				die(1, "template parsing error: this mock knows no field in '%s'",
				    fmt);
			putchar('\n');
		} else {
			printf("%s{\"Id\": ", shown++ ? ",\n" : "[");
			field(&c, "Id", 1, stdout, 0);
			printf(", \"Name\": ");
			field(&c, "Name", 1, stdout, 0);
			printf(", \"State\": {\"Status\": ");
			field(&c, "State.Status", 1, stdout, 0);
			printf(", \"Running\": ");
			field(&c, "State.Running", 1, stdout, 0);
			printf(", \"ExitCode\": ");
			field(&c, "State.ExitCode", 1, stdout, 0);
			printf(", \"Pid\": ");
			field(&c, "State.Pid", 1, stdout, 0);
			printf("}, \"Config\": {\"Image\": ");
			field(&c, "Config.Image", 1, stdout, 0);
			printf(", \"Env\": ");
			field(&c, "Config.Env", 1, stdout, 0);
			printf("}}");
		}
		close(c.fd);
	}
	if (!fmt)
		printf("%s\n", shown ? "]" : "[]");
	return missing;
}

static int cmd_stop(int argc, char **argv)
{
	long t = 10;
	int rc = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		struct ctr c;
		if (!strcmp(a, "-t") || !strcmp(a, "--time") || !strcmp(a, "--timeout")) {
			if (i + 1 >= argc)
				die(125, "flag needs an argument: %s", a);
			t = atol(argv[++i]);
			continue;
		}
		if (!strncmp(a, "-t", 2) || !strncmp(a, "--time=", 7) ||
		    !strncmp(a, "--timeout=", 10)) {
			t = atol(strchr(a, '=') ? strchr(a, '=') + 1 : a + 2);
			continue;
		}
		if (a[0] == '-')
			die(125, "unknown flag: %s\nSee 'docker stop --help'.", a);
		if (ctr_open(a, &c)) {
			fprintf(stderr, "Error response from daemon: No such container: %s\n", a);
			rc = 1;
			continue;
		}
		if (ctr_running(&c)) {
			ctr_signal(&c, SIGTERM);
			if (ctr_wait(&c, t > 0 ? t * 1000 : 0) < 0) {
				ctr_signal(&c, SIGKILL);
				ctr_wait(&c, 10000);
			}
		}
		printf("%s\n", a);
		fflush(stdout);
		close(c.fd);
	}
	return rc;
}

static int signal_number(const char *v)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
	            {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
	            {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}};
	if (isdigit((unsigned char)*v))
		return atoi(v);
	if (!strncasecmp(v, "SIG", 3))
		v += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcasecmp(v, sigs[i].name))
			return sigs[i].sig;
	die(1, "Error response from daemon: Invalid signal: %s", v);
}

static int cmd_kill(int argc, char **argv)
{
	int sig = SIGKILL, rc = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		struct ctr c;
		if (!strcmp(a, "-s") || !strcmp(a, "--signal")) {
			if (i + 1 >= argc)
				die(125, "flag needs an argument: %s", a);
			sig = signal_number(argv[++i]);
			continue;
		}
		if (!strncmp(a, "--signal=", 9)) {
			sig = signal_number(a + 9);
			continue;
		}
		if (a[0] == '-')
			die(125, "unknown flag: %s\nSee 'docker kill --help'.", a);
		if (ctr_open(a, &c)) {
			fprintf(stderr, "Error response from daemon: No such container: %s\n", a);
			rc = 1;
			continue;
		}
		if (!ctr_running(&c) || !ctr_signal(&c, sig)) {
			fprintf(stderr,
			        "Error response from daemon: Cannot kill container: %s: container "
			        "is not "
			        "running\n",
			        a);
			rc = 1;
		} else {
			if (sig == SIGKILL)
				ctr_wait(&c, 10000);
			printf("%s\n", a);
			fflush(stdout);
		}
		close(c.fd);
	}
	return rc;
}

static int cmd_rm(int argc, char **argv)
{
	int force = 0, rc = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		struct ctr c;
		if (!strcmp(a, "-f") || !strcmp(a, "--force")) {
			force = 1;
			continue;
		}
		if (!strcmp(a, "-v") || !strcmp(a, "--volumes"))
			continue;
		if (a[0] == '-')
			die(125, "unknown flag: %s\nSee 'docker rm --help'.", a);
		if (ctr_open(a, &c)) {
			fprintf(stderr, "Error response from daemon: No such container: %s\n", a);
			rc = 1;
			continue;
		}
		if (ctr_running(&c)) {
			if (!force) {
				fprintf(stderr,
				        "Error response from daemon: You cannot remove a running "
				        "container "
				        "%s. Stop the container before attempting removal or force "
				        "remove\n",
				        a);
				rc = 1;
				close(c.fd);
				continue;
			}
			ctr_signal(&c, SIGKILL);
			ctr_wait(&c, 10000);
		}
		ctr_remove(&c);
		printf("%s\n", a);
		fflush(stdout);
		close(c.fd);
	}
	return rc;
}

static int cmp_created(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmd_ps(int argc, char **argv)
{
	int all = 0, quiet = 0, n = 0;
	const char *fmt = NULL, *name_re = NULL, *status = NULL;
	regex_t re;
	char path[4096], *rows[4096];
	DIR *d;
	struct dirent *de;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v;
		if (!strcmp(a, "-a") || !strcmp(a, "--all"))
			all = 1;
		else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
			quiet = 1;
		else if (!strcmp(a, "-aq") || !strcmp(a, "-qa"))
			all = quiet = 1;
		else if (!strcmp(a, "--no-trunc"))
			;
		else if (!strcmp(a, "--format") || !strncmp(a, "--format=", 9)) {
			if (!(fmt = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL)))
				die(125, "flag needs an argument: --format");
		} else if (!strcmp(a, "--filter") || !strcmp(a, "-f") ||
		           !strncmp(a, "--filter=", 9)) {
			if (!(v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL)))
				die(125, "flag needs an argument: --filter");
			if (!strncmp(v, "name=", 5))
				name_re = v + 5;
			else if (!strncmp(v, "status=", 7))
				status = v + 7;
			else
				die(1,
				    "Error response from daemon: invalid filter '%s' (this mock: "
				    "name, "
				    "status)",
				    v);
		} else
			die(125, "unknown flag: %s\nSee 'docker ps --help'.", a);
	}
	if (name_re && regcomp(&re, name_re, REG_EXTENDED | REG_NOSUB))
		die(1, "Error response from daemon: bad name filter '%s'", name_re);
	snprintf(path, sizeof(path), "%s/containers", node);
	if (!quiet && !fmt)
		printf("%-14s %-24s %-14s %s\n", "CONTAINER ID", "IMAGE", "STATUS", "NAMES");
	if (!(d = opendir(path)))
		return 0;
	while ((de = readdir(d)) && n < 4096) {
		struct ctr c;
		char created[80], *row = NULL;
		size_t len = 0;
		FILE *f;
		int code;
		const char *st;
		if (de->d_name[0] == '.' || ctr_open(de->d_name, &c))
			continue;
		st = ctr_status(&c, &code);
		if ((!all && strcmp(st, "running")) || (status && strcmp(st, status)) ||
		    (name_re && regexec(&re, c.name, 0, NULL, 0))) {
			close(c.fd);
			continue;
		}
		rec(&c, "created", created, sizeof(created));
		f = open_memstream(&row, &len);
		fprintf(f, "%s\t", created); /* sort key, cut before printing */
		if (quiet) {
			char id[80];
			rec(&c, "id", id, sizeof(id));
			fprintf(f, "%.12s", id);
		} else if (fmt) {
			if (render(&c, fmt, f, 1))
				die(1, "template parsing error: this mock knows no field in '%s'",
				    fmt);
		} else {
			char id[80], image[300];
			rec(&c, "id", id, sizeof(id));
			rec(&c, "image", image, sizeof(image));
			fprintf(f, "%-14.12s %-24s %-14s %s", id, image,
			        !strcmp(st, "running") ? "Up" : "Exited", c.name);
		}
		fclose(f);
		rows[n++] = row;
		close(c.fd);
	}
	closedir(d);
	qsort(rows, (size_t)n, sizeof(rows[0]), cmp_created);
	for (int i = 0; i < n; i++) {
		printf("%s\n", strchr(rows[i], '\t') + 1);
		free(rows[i]);
	}
	return 0;
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("Client: mock docker (isc-broker tests/mocks/node, C)\n Version: 24.0.0-mock\n");
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {{"pull", cmd_pull},      {"run", cmd_run},         {"logs", cmd_logs},
                {"wait", cmd_wait},      {"inspect", cmd_inspect}, {"stop", cmd_stop},
                {"kill", cmd_kill},      {"rm", cmd_rm},           {"ps", cmd_ps},
                {"version", cmd_version}};

int main(int argc, char **argv)
{
	const char *sub;
	signal(SIGPIPE, SIG_DFL);
	if (!(node = getenv("MOCK_NODE_DIR")) || !*node)
		die(1, "docker (mock): MOCK_NODE_DIR is not set (run me on a mock node)");
	if (argc < 2)
		die(1,
		    "Usage:  docker [OPTIONS] COMMAND\n(mock: pull run logs wait inspect stop kill "
		    "rm ps version)");
	sub = argv[1];
	argv += 2;
	argc -= 2;
	if ((!strcmp(sub, "container") || !strcmp(sub, "image")) && argc > 0) {
		sub = argv[0];
		argv++;
		argc--;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(sub, commands[i].name))
			return commands[i].fn(argc, argv);
	die(1, "docker: '%s' is not a docker command.", sub);
}
