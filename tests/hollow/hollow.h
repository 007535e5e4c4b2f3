/*
 * A hollow node's runtime (tests/hollow/README.md): what one node address
 * holds in memory (its files under /mnt, /data and /tmp, its pulled images,
 * its containers) and the commands the broker's launcher sends over SSH,
 * answered from that state instead of by a shell and docker. The SSH side
 * (hollow_node.c) feeds a command's stdin in, steps it when something happened
 * or its wake time came, and sends what it wrote plus its exit status.
 */
#ifndef ISC_TESTS_HOLLOW_H
#define ISC_TESTS_HOLLOW_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer. */
struct hn_buf {
	char *data;
	size_t len, cap;
};
void hn_buf_add(struct hn_buf *b, const void *data, size_t len);
void hn_buf_printf(struct hn_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hn_buf_free(struct hn_buf *b);

struct hn_file; /* one file or folder of a node */
struct hn_container;

struct hn_node {
	pthread_mutex_t lock;
	char ip[16];
	int down_seen; /* its keys file was missing: a later instance starts afresh */
	struct hn_file *files;
	size_t n_files, cap_files;
	char **images;
	size_t n_images;
	struct hn_container *containers; /* newest last */
	size_t n_containers, cap_containers;
	unsigned serial; /* container ids */
};

/* Node settings from the environment (NODE_PULL_DELAY_MS, NODE_START_DELAY_MS). */
extern long hn_pull_delay_ms, hn_start_delay_ms;

/* Forgets everything of a node (a terminated instance); lock held. */
void hn_node_reset(struct hn_node *n);

/* What the stats count a command as. */
enum hn_kind {
	HN_FABRIC,       /* the launcher's fabric check */
	HN_BOOT,         /* the boot script: env file, pull, run */
	HN_STOP,         /* docker stop; docker rm -f; rm env file */
	HN_LOGS,         /* the follower's docker inspect || exit; exec docker logs -f */
	HN_ART_PULL,     /* tar -C /mnt -cf - (artifacts home) */
	HN_ART_PUSH,     /* tar -C /mnt -xf - (artifacts onto a node) */
	HN_DS_CHECK,     /* a shipped dataset copy's stamp */
	HN_DS_PUSH,      /* a dataset copy unpacked on the node */
	HN_CLEAN,        /* on-prem: rm -rf /mnt/...; mkdir -p */
	HN_DOCKER_WAIT,  /* docker wait (the follower) */
	HN_DOCKER_OTHER, /* any other docker command */
	HN_SHELL,        /* other simple commands (true, echo, cat, mkdir, rm, ls) */
	HN_UNKNOWN,      /* answered with 127 */
	HN_KINDS
};
extern const char *const hn_kind_names[HN_KINDS];

struct hn_cmd;

/* A command for node n; never NULL (an unknown one answers 127). */
struct hn_cmd *hn_cmd_new(struct hn_node *n, const char *command);
enum hn_kind hn_cmd_kind(const struct hn_cmd *c);
/* The command reads its stdin to the end before it does anything. */
int hn_cmd_wants_stdin(const struct hn_cmd *c);
void hn_cmd_stdin(struct hn_cmd *c, const void *data, size_t len);
void hn_cmd_eof(struct hn_cmd *c);
/*
 * Advances the command at now_ms (monotonic): appends to out and err. Returns 1
 * when it finished (*exit_code set), else 0 with *wake_ms the time to step it
 * again (-1: only when stdin moves).
 */
int hn_cmd_step(struct hn_cmd *c, int64_t now_ms, struct hn_buf *out, struct hn_buf *err,
                int *exit_code, int64_t *wake_ms);
void hn_cmd_free(struct hn_cmd *c);

int64_t hn_now_ms(void);

#endif
