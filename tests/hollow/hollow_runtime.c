/*
 * A hollow node's runtime: files, images and containers in memory, and the
 * commands the launcher sends (catalogued in tests/hollow/README.md) answered
 * from them. The launcher's compound scripts (fabric check, boot, artifact and
 * dataset transfers) are recognised by their fixed shape (launcher/boot.c makes
 * them) and their variable parts read out of them; anything else must be a
 * list of simple commands (docker, true, echo, cat, mkdir, rm, ls, exit) joined
 * by ';', '&&' or '||' with plain redirections, or it is answered with 127 and
 * a line naming it. No process is ever started.
 */
#include "tests/hollow/hollow.h"

#include "common/clock.h"

#include <ctype.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long hn_pull_delay_ms, hn_start_delay_ms;

const char *const hn_kind_names[HN_KINDS] = {
    "fabric_check",   "boot",          "stop",         "logs_follow", "artifacts_pull",
    "artifacts_push", "dataset_check", "dataset_push", "clean_mnt",   "docker_wait",
    "docker_other",   "shell",         "unknown"};

/* The project's one clock (common/clock.c, linked in alone: it needs nothing else). */
int64_t hn_now_ms(void)
{
	return isc_monotonic_ms();
}

static int64_t wall_ms(void)
{
	return isc_wall_ms();
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q) {
		fprintf(stderr, "hollow-node: out of memory\n");
		abort();
	}
	return q;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xrealloc(NULL, n), s, n);
}

/* ---- buffers ---- */

void hn_buf_add(struct hn_buf *b, const void *data, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		b->cap = (b->len + len + 1) * 2;
		b->data = xrealloc(b->data, b->cap);
	}
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void hn_buf_printf(struct hn_buf *b, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	hn_buf_add(b, s, (size_t)n);
	free(s);
}

void hn_buf_free(struct hn_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* ---- files ---- */

struct hn_file {
	char *path; /* absolute, normalised, no trailing '/' */
	int dir;
	unsigned mode;
	struct hn_buf data;
};

/* "/a//b/./c/" -> "/a/b/c"; relative paths are taken from /; ".." is refused (NULL). */
static char *norm_path(const char *p)
{
	char *out = xrealloc(NULL, strlen(p) + 2);
	size_t o = 0;
	while (*p) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			free(out);
			return NULL;
		}
		if (!(n == 1 && p[0] == '.')) {
			out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return out;
}

static struct hn_file *fs_find(struct hn_node *n, const char *path)
{
	for (size_t i = 0; i < n->n_files; i++)
		if (strcmp(n->files[i].path, path) == 0)
			return &n->files[i];
	return NULL;
}

static int fs_is_dir(struct hn_node *n, const char *path)
{
	struct hn_file *f;
	if (strcmp(path, "/") == 0 || strcmp(path, "/mnt") == 0 || strcmp(path, "/data") == 0 ||
	    strcmp(path, "/tmp") == 0)
		return 1;
	f = fs_find(n, path);
	return f && f->dir;
}

static struct hn_file *fs_add(struct hn_node *n, const char *path, int dir)
{
	if (n->n_files == n->cap_files) {
		n->cap_files = n->cap_files ? n->cap_files * 2 : 16;
		n->files = xrealloc(n->files, n->cap_files * sizeof(*n->files));
	}
	n->files[n->n_files] = (struct hn_file){xstrdup(path), dir, dir ? 0755 : 0644, {0}};
	return &n->files[n->n_files++];
}

/* mkdir -p of a normalised path; 0, or -1 when a file is in the way. */
static int fs_mkdir_p(struct hn_node *n, const char *path)
{
	char *p = xstrdup(path);
	int rc = 0;
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (!fs_is_dir(n, p)) {
				if (fs_find(n, p))
					rc = -1;
				else
					fs_add(n, p, 1);
			}
			*s = c;
			if (c == '\0' || rc)
				break;
		}
	}
	free(p);
	return rc;
}

static void parent_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash && slash != path ? (size_t)(slash - path) : 1;
	snprintf(out, cap, "%.*s", (int)n, path);
}

/* Writes a file (its folder must exist); -1 when it cannot. */
static int fs_write(struct hn_node *n, const char *path, const void *data, size_t len, int append)
{
	char parent[4096];
	struct hn_file *f = fs_find(n, path);
	parent_of(path, parent, sizeof(parent));
	if (!fs_is_dir(n, parent) || (f && f->dir))
		return -1;
	if (!f)
		f = fs_add(n, path, 0);
	if (!append)
		f->data.len = 0;
	hn_buf_add(&f->data, data, len);
	return 0;
}

static int under(const char *path, const char *top)
{
	size_t t = strlen(top);
	if (strcmp(top, "/") == 0)
		return 1;
	return strncmp(path, top, t) == 0 && (path[t] == '\0' || path[t] == '/');
}

/* rm -rf; returns how many entries went. */
static size_t fs_rm_rf(struct hn_node *n, const char *path)
{
	size_t k = 0, gone = 0;
	for (size_t i = 0; i < n->n_files; i++) {
		if (under(n->files[i].path, path)) {
			free(n->files[i].path);
			hn_buf_free(&n->files[i].data);
			gone++;
		} else {
			n->files[k++] = n->files[i];
		}
	}
	n->n_files = k;
	return gone;
}

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct hn_file *)a)->path, ((const struct hn_file *)b)->path);
}

/* ---- containers ---- */

struct hn_container {
	char *name, *image, *cmd, *env;
	char id[65];
	int64_t created_wall, start_mono, start_wall;
	int64_t end_mono; /* when it exits by itself; -1: runs until stopped */
	int exit_code;    /* when it exits by itself */
	int exited;       /* stopped or killed: final_code holds */
	int final_code;
	int64_t finished_wall;
	int removed;
};

static void container_free(struct hn_container *c)
{
	free(c->name);
	free(c->image);
	free(c->cmd);
	free(c->env);
}

void hn_node_reset(struct hn_node *n)
{
	fs_rm_rf(n, "/");
	free(n->files);
	n->files = NULL;
	n->n_files = n->cap_files = 0;
	for (size_t i = 0; i < n->n_images; i++)
		free(n->images[i]);
	free(n->images);
	n->images = NULL;
	n->n_images = 0;
	for (size_t i = 0; i < n->n_containers; i++)
		container_free(&n->containers[i]);
	free(n->containers);
	n->containers = NULL;
	n->n_containers = n->cap_containers = 0;
}

/* Brings a container's state up to now: one whose time ran out has exited. */
static int running(struct hn_container *c, int64_t now)
{
	if (c->exited)
		return 0;
	if (c->end_mono >= 0 && now >= c->end_mono) {
		c->exited = 1;
		c->final_code = c->exit_code;
		c->finished_wall = c->start_wall + (c->end_mono - c->start_mono);
		return 0;
	}
	return 1;
}

static void stop_container(struct hn_container *c, int64_t now, int code)
{
	if (running(c, now)) {
		c->exited = 1;
		c->final_code = code;
		c->finished_wall = wall_ms();
	}
}

static struct hn_container *find_container(struct hn_node *n, const char *name_or_id)
{
	size_t len = strlen(name_or_id);
	if (name_or_id[0] == '/')
		name_or_id++, len--;
	for (size_t i = n->n_containers; i-- > 0;) {
		struct hn_container *c = &n->containers[i];
		if (c->removed)
			continue;
		if (strcmp(c->name, name_or_id) == 0 ||
		    (len >= 4 && strncmp(c->id, name_or_id, len) == 0))
			return c;
	}
	return NULL;
}

/*
 * How long a container runs, from its command (the documented rule, README.md):
 * HOLLOW_RUN_MS=N in its environment wins; else the sum of every `sleep N`
 * (seconds, with an optional s/m/h/d suffix) in its command; a command with
 * no sleep but an `exit N` ends at once; one with neither runs until stopped. Its exit code is
 * HOLLOW_EXIT_CODE=N, else the last `exit N` of the command, else 0.
 */
static void runtime_rule(struct hn_container *c)
{
	const char *p, *e;
	double total = 0;
	int any = 0;

	c->end_mono = -1;
	c->exit_code = 0;
	for (p = c->cmd; (p = strstr(p, "sleep ")) != NULL; p += 6) {
		char *end;
		double v = strtod(p + 6, &end);
		if (end == p + 6)
			continue;
		if (*end == 'm')
			v *= 60;
		else if (*end == 'h')
			v *= 3600;
		else if (*end == 'd')
			v *= 86400;
		total += v;
		any = 1;
	}
	for (p = c->cmd; (p = strstr(p, "exit ")) != NULL; p += 5)
		if (isdigit((unsigned char)p[5])) {
			c->exit_code = atoi(p + 5);
			any = 1; /* a command that exits ends, after its sleeps if any */
		}
	if (any)
		c->end_mono = c->start_mono + (int64_t)(total * 1000);
	for (p = c->env; p && *p; p = e + (*e != '\0')) {
		e = p + strcspn(p, "\n");
		if (strncmp(p, "HOLLOW_RUN_MS=", 14) == 0)
			c->end_mono = c->start_mono + atoll(p + 14);
		else if (strncmp(p, "HOLLOW_EXIT_CODE=", 17) == 0)
			c->exit_code = atoi(p + 17);
	}
}

/* The fixed log of a container: what it would have printed. */
static void container_log(struct hn_container *c, int64_t now, struct hn_buf *out)
{
	hn_buf_printf(out, "hollow-node: container %s started (image %s)\n", c->name, c->image);
	hn_buf_printf(out, "hollow-node: command: %.200s\n", c->cmd);
	if (!running(c, now))
		hn_buf_printf(out, "hollow-node: exited with code %d\n", c->final_code);
}

static void iso_time(int64_t ms, char *buf, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static int has_image(struct hn_node *n, const char *image)
{
	for (size_t i = 0; i < n->n_images; i++)
		if (strcmp(n->images[i], image) == 0)
			return 1;
	return 0;
}

static void denied(const char *image, struct hn_buf *err)
{
	hn_buf_printf(err,
	              "Error response from daemon: pull access denied for %.*s, repository does "
	              "not exist or may require 'docker login': denied: requested access to the "
	              "resource is denied\n",
	              (int)strcspn(image, ":@"), image);
}

/* ---- the shell words of a command ---- */

enum tok_type { T_WORD, T_OP, T_REDIR };
struct tok {
	enum tok_type type;
	char *text;  /* a word without its quotes; an operator; a redirection "2>&1", ">FILE" */
	int expands; /* the word had an unquoted or double-quoted '$' or a backquote */
};
struct toks {
	struct tok *v;
	size_t n, cap;
};

static void toks_push(struct toks *t, enum tok_type type, char *text, int expands)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 32;
		t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
	}
	t->v[t->n++] = (struct tok){type, text, expands};
}

static void toks_free(struct toks *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].text);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* Reads one word at *pp (quotes removed); NULL at an operator or the end. */
static char *read_word(const char **pp, int *expands)
{
	const char *p = *pp;
	struct hn_buf w = {0};
	int any = 0;
	while (*p && !isspace((unsigned char)*p) && !strchr(";&|<>(){}", *p)) {
		any = 1;
		if (*p == '\'') {
			const char *e = strchr(p + 1, '\'');
			if (!e)
				goto bad;
			hn_buf_add(&w, p + 1, (size_t)(e - p - 1));
			p = e + 1;
		} else if (*p == '"') {
			p++;
			while (*p && *p != '"') {
				if (*p == '\\' && p[1] && strchr("$`\"\\", p[1]))
					p++;
				else if (*p == '$' || *p == '`')
					*expands = 1;
				hn_buf_add(&w, p++, 1);
			}
			if (*p != '"')
				goto bad;
			p++;
		} else if (*p == '\\' && p[1]) {
			hn_buf_add(&w, p + 1, 1);
			p += 2;
		} else {
			if (*p == '$' || *p == '`' || *p == '*' || *p == '?' || *p == '[' ||
			    *p == '~')
				*expands = 1;
			hn_buf_add(&w, p++, 1);
		}
	}
	*pp = p;
	if (!any)
		return NULL;
	if (!w.data)
		hn_buf_add(&w, "", 0);
	return w.data;
bad:
	hn_buf_free(&w);
	*expands = -1;
	return NULL;
}

/* Splits a command into words, operators and redirections; -1 on an unclosed quote. */
static int tokenize(const char *s, struct toks *t)
{
	const char *p = s;
	while (*p) {
		int ex = 0;
		char *w;
		if (isspace((unsigned char)*p)) {
			p++;
			continue;
		}
		/* N>..., >..., <...: a redirection with its target */
		if ((isdigit((unsigned char)*p) && (p[1] == '>' || p[1] == '<')) || *p == '>' ||
		    *p == '<') {
			struct hn_buf r = {0};
			while (isdigit((unsigned char)*p))
				hn_buf_add(&r, p++, 1);
			hn_buf_add(&r, p++, 1);
			if (*p == '>' || *p == '&')
				hn_buf_add(&r, p++, 1);
			while (isspace((unsigned char)*p))
				p++;
			w = read_word(&p, &ex);
			if (!w || ex < 0) {
				free(w);
				hn_buf_free(&r);
				return -1;
			}
			hn_buf_add(&r, w, strlen(w));
			free(w);
			toks_push(t, T_REDIR, r.data, ex);
			continue;
		}
		if (strchr(";&|(){}", *p)) {
			char op[3] = {*p, 0, 0};
			if ((p[0] == '&' || p[0] == '|') && p[1] == p[0])
				op[1] = p[1];
			p += strlen(op);
			toks_push(t, T_OP, xstrdup(op), 0);
			continue;
		}
		w = read_word(&p, &ex);
		if (ex < 0)
			return -1;
		if (!w)
			return -1;
		/* A word only starts with '{' or '}' as an operator in our use: "{" alone. */
		toks_push(t, T_WORD, w, ex);
	}
	return 0;
}

/* ---- tar (ustar, GNU long names read and written) ---- */

/* v in octal, zero-padded to size - 1 digits and NUL-ended (the low digits if it is too big). */
static void tar_octal(char *field, size_t size, unsigned long long v)
{
	field[size - 1] = '\0';
	for (size_t i = size - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

static void tar_header(struct hn_buf *out, const char *name, int dir, size_t size, unsigned mode)
{
	char h[512];
	unsigned sum = 0;
	size_t nlen = strlen(name);
	if (nlen > 99) {
		/* GNU: a ././@LongLink member holding the name */
		tar_header(out, "././@LongLink", 0, nlen + 1, 0644);
		out->data[out->len - 512 + 156] = 'L';
		/* fix the checksum of that header after changing its type */
		{
			char *lh = out->data + out->len - 512;
			unsigned s = 0;
			memset(lh + 148, ' ', 8);
			for (int i = 0; i < 512; i++)
				s += (unsigned char)lh[i];
			snprintf(lh + 148, 8, "%06o", s);
			lh[155] = ' ';
		}
		hn_buf_add(out, name, nlen + 1);
		char pad[512] = {0};
		hn_buf_add(out, pad, (512 - (nlen + 1) % 512) % 512);
	}
	memset(h, 0, sizeof(h));
	memcpy(h, name, nlen > 99 ? 99 : nlen);
	tar_octal(h + 100, 8, mode);
	tar_octal(h + 108, 8, 0);
	tar_octal(h + 116, 8, 0);
	tar_octal(h + 124, 12, size);
	tar_octal(h + 136, 12, (unsigned long long)(wall_ms() / 1000));
	h[156] = dir ? '5' : '0';
	memcpy(h + 257, "ustar  ", 8); /* GNU magic and version */
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	h[155] = ' ';
	hn_buf_add(out, h, 512);
}

/* The archive of base/top for each top (relative names "top/..."), as tar -C base -cf -. */
static int tar_create(struct hn_node *n, const char *base, char *const *tops, size_t n_tops,
                      struct hn_buf *out, struct hn_buf *err)
{
	char pad[1024] = {0};
	qsort(n->files, n->n_files, sizeof(*n->files), cmp_files);
	for (size_t t = 0; t < n_tops; t++) {
		char *top = NULL;
		int found = 0;
		if (asprintf(&top, "%s/%s", strcmp(base, "/") ? base : "", tops[t]) < 0)
			abort();
		char *ntop = norm_path(top);
		free(top);
		if (!ntop) {
			hn_buf_printf(err, "tar: %s: Cannot stat: No such file or directory\n",
			              tops[t]);
			return 2;
		}
		for (size_t i = 0; i < n->n_files; i++) {
			struct hn_file *f = &n->files[i];
			if (!under(f->path, ntop))
				continue;
			found = 1;
			const char *rel = f->path + strlen(base) + (strcmp(base, "/") ? 1 : 0);
			if (*rel == '/')
				rel++;
			char *name = NULL;
			if (asprintf(&name, "%s%s", rel, f->dir ? "/" : "") < 0)
				abort();
			tar_header(out, name, f->dir, f->dir ? 0 : f->data.len, f->mode);
			free(name);
			if (!f->dir) {
				hn_buf_add(out, f->data.data, f->data.len);
				hn_buf_add(out, pad, (512 - f->data.len % 512) % 512);
			}
		}
		if (!found && !fs_is_dir(n, ntop)) {
			hn_buf_printf(err, "tar: %s: Cannot stat: No such file or directory\n",
			              tops[t]);
			free(ntop);
			return 2;
		}
		free(ntop);
	}
	hn_buf_add(out, pad, 1024);
	return 0;
}

static unsigned long long tar_num(const char *f, size_t size)
{
	unsigned long long v = 0;
	for (size_t i = 0; i < size && f[i]; i++)
		if (f[i] >= '0' && f[i] <= '7')
			v = v * 8 + (unsigned)(f[i] - '0');
	return v;
}

/* Expands a tar stream under base (tar -C base -xf -); 0, or tar's exit code 2. */
static int tar_extract(struct hn_node *n, const char *base, const char *data, size_t len,
                       struct hn_buf *err)
{
	size_t off = 0;
	char *long_name = NULL;
	int rc = 0;
	while (off + 512 <= len) {
		const char *h = data + off;
		int zero = 1;
		for (int i = 0; i < 512 && zero; i++)
			zero = h[i] == 0;
		if (zero)
			break;
		unsigned long long size = tar_num(h + 124, 12);
		char type = h[156];
		const char *body = h + 512;
		size_t padded = (size_t)((size + 511) / 512 * 512);
		if (off + 512 + padded > len) {
			hn_buf_printf(err, "tar: Unexpected EOF in archive\n");
			rc = 2;
			break;
		}
		char name[512];
		if (long_name) {
			snprintf(name, sizeof(name), "%s", long_name);
			free(long_name);
			long_name = NULL;
		} else if (h[345] && memcmp(h + 257, "ustar\0", 6) == 0) {
			snprintf(name, sizeof(name), "%.155s/%.100s", h + 345, h);
		} else {
			snprintf(name, sizeof(name), "%.100s", h);
		}
		if (type == 'L') {
			long_name = xrealloc(NULL, size + 1);
			memcpy(long_name, body, size);
			long_name[size] = '\0';
		} else if (type == 'x') {
			/* pax: only path= matters here */
			const char *p = body, *end = body + size;
			while (p < end) {
				long rl = strtol(p, NULL, 10);
				const char *kv = memchr(p, ' ', (size_t)(end - p));
				if (rl <= 0 || !kv || p + rl > end)
					break;
				if (strncmp(kv + 1, "path=", 5) == 0) {
					free(long_name);
					long_name = strndup(kv + 6, (size_t)(p + rl - kv - 7));
				}
				p += rl;
			}
		} else if (type == '0' || type == '\0' || type == '5') {
			char *full = NULL, *np;
			if (asprintf(&full, "%s/%s", base, name) < 0)
				abort();
			np = norm_path(full);
			free(full);
			if (!np) {
				hn_buf_printf(err, "tar: %s: Member name contains '..'\n", name);
				rc = 2;
			} else if (type == '5') {
				if (fs_mkdir_p(n, np))
					rc = 2;
			} else {
				char parent[4096];
				parent_of(np, parent, sizeof(parent));
				if (fs_mkdir_p(n, parent) || fs_write(n, np, body, size, 0)) {
					hn_buf_printf(
					    err, "tar: %s: Cannot open: Not a directory\n", name);
					rc = 2;
				} else {
					fs_find(n, np)->mode = (unsigned)tar_num(h + 100, 8) & 0777;
				}
			}
			free(np);
		} else if (type != 'g') {
			/* links, devices, GNU sparse files: not kept by a hollow node */
			hn_buf_printf(err, "hollow-node: tar: %s: member type '%c' not supported\n",
			              name, type);
			rc = 2;
		}
		off += 512 + padded;
	}
	free(long_name);
	return rc;
}

/* ---- commands ---- */

/* One simple command of a list: argv, what joins it to the one before, where output goes. */
struct simple {
	char **argv;
	int argc;
	char join;  /* ';', '&' (&&), '|' (||); first: ';' */
	int out_to; /* 0: stdout, 1: /dev/null, 2: stderr, 3: out_file */
	int err_to; /* 0: stderr, 1: /dev/null, 2: stdout */
	char *out_file;
	int append;
};

struct hn_cmd {
	struct hn_node *node;
	enum hn_kind kind;
	char *text;
	int wants_stdin, eof;
	struct hn_buf in;
	/* the generic list */
	struct simple *list;
	size_t n_list, at;
	int last_status, skipping;
	/* a step under way (pull, run, logs -f, wait, the boot) */
	int phase;
	int64_t until;
	size_t log_sent;
	size_t arg_at;
	struct hn_buf pending_out;
	/* the boot script's parts */
	char *env_path;
	char **mkdirs;
	size_t n_mkdirs;
	char **ds_need;
	char **ds_need_msg;
	size_t n_ds_need;
	char **ds_fake;
	size_t n_ds_fake;
	size_t n_urls;
	char *image;
	char **run_argv;
	int run_argc;
	char *name;
	/* artifacts */
	char **tops;
	size_t n_tops;
	/* datasets */
	char *copy, *digest;
};

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static char **argv_dup(struct tok *v, size_t n)
{
	char **a = xrealloc(NULL, (n + 1) * sizeof(*a));
	for (size_t i = 0; i < n; i++)
		a[i] = xstrdup(v[i].text);
	a[n] = NULL;
	return a;
}

static void argv_free(char **a)
{
	for (size_t i = 0; a && a[i]; i++)
		free(a[i]);
	free(a);
}

static void strs_push(char ***v, size_t *n, const char *s)
{
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = xstrdup(s);
}

static void strs_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The list of simple commands, or -1 when the command is more than that. */
static int parse_list(struct toks *t, struct hn_cmd *c)
{
	size_t i = 0;
	char join = ';';
	while (i < t->n) {
		struct simple s = {0};
		s.join = join;
		size_t nw = 0;
		struct tok *words = xrealloc(NULL, (t->n - i + 1) * sizeof(*words));
		for (; i < t->n && t->v[i].type != T_OP; i++) {
			struct tok *k = &t->v[i];
			if (k->type == T_WORD) {
				if (k->expands) {
					free(words);
					return -1;
				}
				words[nw++] = *k;
				continue;
			}
			/* redirections */
			const char *r = k->text;
			if (k->expands) {
				free(words);
				free(s.out_file);
				return -1;
			}
			int fd = isdigit((unsigned char)r[0]) ? r[0] - '0' : (r[0] == '<' ? 0 : 1);
			if (isdigit((unsigned char)r[0]))
				r++;
			if (r[0] == '<') {
				free(words);
				free(s.out_file);
				return -1;
			}
			int app = r[1] == '>';
			const char *target = r + 1 + app;
			if (*target == '&') {
				target++;
				if (fd == 2 && strcmp(target, "1") == 0)
					s.err_to = s.out_to == 1 ? 1 : 2;
				else if (fd == 1 && strcmp(target, "2") == 0)
					s.out_to = 2;
				else {
					free(words);
					free(s.out_file);
					return -1;
				}
			} else if (strcmp(target, "/dev/null") == 0) {
				if (fd == 1)
					s.out_to = 1;
				else if (fd == 2)
					s.err_to = 1;
			} else if (fd == 1) {
				s.out_to = 3;
				free(s.out_file);
				s.out_file = xstrdup(target);
				s.append = app;
			} else {
				free(words);
				free(s.out_file);
				return -1;
			}
		}
		if (nw && strcmp(words[0].text, "exec") == 0) {
			memmove(words, words + 1, (nw - 1) * sizeof(*words));
			nw--;
		}
		if (nw == 0) {
			free(words);
			free(s.out_file);
			return -1;
		}
		s.argv = argv_dup(words, nw);
		s.argc = (int)nw;
		free(words);
		c->list = xrealloc(c->list, (c->n_list + 1) * sizeof(*c->list));
		c->list[c->n_list++] = s;
		if (i < t->n) {
			const char *op = t->v[i].text;
			if (strcmp(op, ";") == 0)
				join = ';';
			else if (strcmp(op, "&&") == 0)
				join = '&';
			else if (strcmp(op, "||") == 0)
				join = '|';
			else
				return -1; /* '|', '&', groups: more than a list */
			i++;
		}
	}
	return c->n_list ? 0 : -1;
}

/* The word after "c=/data/.isc/": the copy name, quoted as the launcher quotes it. */
static char *copy_after(const char *text, const char *marker)
{
	const char *p = strstr(text, marker);
	int ex = 0;
	if (!p)
		return NULL;
	p += strlen(marker);
	return read_word(&p, &ex);
}

/*
 * The boot script (launcher/boot.c boot_script): read its fixed parts out of
 * the words. -1 when it does not have the shape.
 */
static int parse_boot(struct toks *t, struct hn_cmd *c)
{
	for (size_t i = 0; i < t->n; i++) {
		struct tok *k = &t->v[i];
		if (k->type != T_WORD)
			continue;
		if (strcmp(k->text, "read") == 0) {
			c->n_urls++;
		} else if (strcmp(k->text, "mkdir") == 0 && i + 1 < t->n &&
		           strcmp(t->v[i + 1].text, "-p") == 0) {
			size_t j = i + 2;
			for (; j < t->n && t->v[j].type == T_WORD; j++)
				if (!t->v[j].expands)
					strs_push(&c->mkdirs, &c->n_mkdirs, t->v[j].text);
			i = j - 1;
		} else if (strcmp(k->text, "[") == 0 && i + 3 < t->n &&
		           strcmp(t->v[i + 1].text, "-d") == 0 &&
		           starts(t->v[i + 2].text, "/data/.isc/") && !t->v[i + 2].expands) {
			/* [ -d /data/.isc/COPY ] || { echo MSG >&2; exit 95; } */
			const char *msg = "dataset: its cached copy is not on this node";
			for (size_t j = i + 3; j + 1 < t->n && j < i + 10; j++)
				if (strcmp(t->v[j].text, "echo") == 0) {
					msg = t->v[j + 1].text;
					break;
				}
			strs_push(&c->ds_need, &c->n_ds_need, t->v[i + 2].text);
			c->ds_need_msg = xrealloc(c->ds_need_msg, c->n_ds_need * sizeof(char *));
			c->ds_need_msg[c->n_ds_need - 1] = xstrdup(msg);
		} else if (starts(k->text, "c=/data/.isc/") && !k->expands) {
			strs_push(&c->ds_fake, &c->n_ds_fake, k->text + 2);
		} else if (starts(k->text, "env_file=/tmp/")) {
			free(c->env_path);
			c->env_path = xstrdup(k->text + 9);
		} else if (strcmp(k->text, "docker") == 0 && i + 2 < t->n &&
		           strcmp(t->v[i + 1].text, "pull") == 0 && !c->image) {
			c->image = xstrdup(t->v[i + 2].text);
		} else if (strcmp(k->text, "docker") == 0 && i + 1 < t->n &&
		           strcmp(t->v[i + 1].text, "run") == 0 && !c->run_argv) {
			size_t j = i + 2;
			while (j < t->n && t->v[j].type == T_WORD)
				j++;
			c->run_argv = argv_dup(&t->v[i + 2], j - i - 2);
			c->run_argc = (int)(j - i - 2);
			for (int a = 0; a + 1 < c->run_argc; a++)
				if (strcmp(c->run_argv[a], "--name") == 0)
					c->name = xstrdup(c->run_argv[a + 1]);
		}
	}
	/* the fetched datasets' mkdir -p of "$c.part" expand: they were skipped */
	/* The launcher pulls the image before the script (its own command): no pull here. */
	return c->env_path && c->run_argv && c->name ? 0 : -1;
}

static void classify(struct hn_cmd *c)
{
	const char *s = c->text;
	struct toks t = {0};
	int ok = tokenize(s, &t) == 0;

	if (starts(s, "for d in /dev/infiniband/*; do [ -c \"$d\" ]")) {
		c->kind = HN_FABRIC;
	} else if (ok && starts(s, "set -e; ") && strstr(s, "start() { docker run -d --name ")) {
		c->kind = parse_boot(&t, c) == 0 ? HN_BOOT : HN_UNKNOWN;
		c->wants_stdin = 1;
	} else if (starts(s, "mkdir -p /mnt/checkpoints /mnt/crud /mnt/lossy && tar -C /mnt "
	                     "--sparse -cf -") &&
	           ok) {
		c->kind = HN_ART_PULL;
		for (size_t i = 0; i < t.n; i++)
			if (strcmp(t.v[i].text, "-") == 0)
				for (size_t j = i + 1; j < t.n; j++)
					strs_push(&c->tops, &c->n_tops, t.v[j].text);
	} else if (strcmp(s, "mkdir -p /mnt && tar -C /mnt -xf -") == 0) {
		c->kind = HN_ART_PUSH;
		c->wants_stdin = 1;
	} else if (starts(s, "c=/data/.isc/") && strstr(s, ".stamp\" 2>/dev/null)\" = ")) {
		c->kind = HN_DS_CHECK;
		c->copy = copy_after(s, "c=/data/.isc/");
		const char *m = ".stamp\" 2>/dev/null)\" = ";
		c->digest = strndup(strstr(s, m) + strlen(m), 64);
		if (!c->copy)
			c->kind = HN_UNKNOWN;
	} else if (starts(s, "set -e; c=/data/.isc/") && strstr(s, "-xf - --no-same-owner") &&
	           strstr(s, "printf %s ")) {
		c->kind = HN_DS_PUSH;
		c->wants_stdin = 1;
		c->copy = copy_after(s, "set -e; c=/data/.isc/");
		c->digest = strndup(strstr(s, "printf %s ") + 10, 64);
		if (!c->copy)
			c->kind = HN_UNKNOWN;
	} else if (strcmp(s, "rm -rf /mnt/checkpoints /mnt/crud /mnt/lossy && mkdir -p "
	                     "/mnt/checkpoints /mnt/crud /mnt/lossy") == 0) {
		c->kind = HN_CLEAN;
	} else if (ok && parse_list(&t, c) == 0) {
		const char *a0 = c->list[0].argv[0];
		const char *a1 = c->list[0].argc > 1 ? c->list[0].argv[1] : "";
		if (starts(s, "docker stop -t ") && strstr(s, "; docker rm -f "))
			c->kind = HN_STOP;
		else if (starts(s, "docker inspect ") && strstr(s, "exec docker logs -f "))
			c->kind = HN_LOGS;
		else if (strcmp(a0, "docker") == 0 && strcmp(a1, "wait") == 0 && c->n_list == 1)
			c->kind = HN_DOCKER_WAIT;
		else if (strcmp(a0, "docker") == 0)
			c->kind = HN_DOCKER_OTHER;
		else
			c->kind = HN_SHELL;
	} else {
		c->kind = HN_UNKNOWN;
	}
	toks_free(&t);
}

struct hn_cmd *hn_cmd_new(struct hn_node *n, const char *command)
{
	struct hn_cmd *c = xrealloc(NULL, sizeof(*c));
	memset(c, 0, sizeof(*c));
	c->node = n;
	c->text = xstrdup(command);
	classify(c);
	return c;
}

enum hn_kind hn_cmd_kind(const struct hn_cmd *c)
{
	return c->kind;
}

int hn_cmd_wants_stdin(const struct hn_cmd *c)
{
	return c->wants_stdin;
}

void hn_cmd_stdin(struct hn_cmd *c, const void *data, size_t len)
{
	if (c->wants_stdin)
		hn_buf_add(&c->in, data, len);
}

void hn_cmd_eof(struct hn_cmd *c)
{
	c->eof = 1;
}

void hn_cmd_free(struct hn_cmd *c)
{
	if (!c)
		return;
	free(c->text);
	hn_buf_free(&c->in);
	for (size_t i = 0; i < c->n_list; i++) {
		argv_free(c->list[i].argv);
		free(c->list[i].out_file);
	}
	free(c->list);
	hn_buf_free(&c->pending_out);
	free(c->env_path);
	strs_free(c->mkdirs, c->n_mkdirs);
	strs_free(c->ds_need, c->n_ds_need);
	strs_free(c->ds_need_msg, c->n_ds_need);
	strs_free(c->ds_fake, c->n_ds_fake);
	free(c->image);
	argv_free(c->run_argv);
	free(c->name);
	strs_free(c->tops, c->n_tops);
	free(c->copy);
	free(c->digest);
	free(c);
}

/* ---- docker ---- */

#define AGAIN (-1000)

/* docker pull IMAGE: AGAIN while the registry delay runs. */
static int do_pull(struct hn_cmd *c, const char *image, int quiet, int64_t now, struct hn_buf *out,
                   struct hn_buf *err, int64_t *wake)
{
	struct hn_node *n = c->node;
	if (strstr(image, "does-not-exist")) {
		denied(image, err);
		return 1;
	}
	if (!has_image(n, image)) {
		if (c->until == 0 && hn_pull_delay_ms > 0) {
			c->until = now + hn_pull_delay_ms;
			*wake = c->until;
			return AGAIN;
		}
		if (c->until && now < c->until) {
			*wake = c->until;
			return AGAIN;
		}
		strs_push(&n->images, &n->n_images, image);
	}
	c->until = 0;
	if (!quiet)
		hn_buf_printf(out, "latest: Pulling from %s\nStatus: Image is up to date for %s\n",
		              image, image);
	hn_buf_printf(out, "%s\n", image);
	return 0;
}

static const char *const run_value_opts[] = {
    "--name",   "--gpus",     "--network", "--net",      "--ipc",     "--shm-size",   "-v",
    "--volume", "-e",         "--env",     "--env-file", "-w",        "--workdir",    "--label",
    "-l",       "--device",   "--ulimit",  "--cap-add",  "--restart", "--entrypoint", "-u",
    "--user",   "--hostname", "-h",        NULL};

static int value_opt(const char *a)
{
	for (int i = 0; run_value_opts[i]; i++)
		if (strcmp(a, run_value_opts[i]) == 0)
			return 1;
	return 0;
}

/* The env file's K=V lines into env (comments, blanks skipped; K alone: not set here). */
static void env_file_lines(const char *text, size_t len, struct hn_buf *env)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *e = memchr(p, '\n', (size_t)(end - p));
		size_t l = e ? (size_t)(e - p) : (size_t)(end - p);
		if (l && p[0] != '#' && memchr(p, '=', l)) {
			hn_buf_add(env, p, l);
			hn_buf_add(env, "\n", 1);
		}
		p += l + 1;
	}
}

/*
 * docker run: parses the options as docker does (a wrong one: 125), pulls the
 * image if needed, waits the start delay, and records the container. env_text
 * (may be NULL) stands for the content of an --env-file "$env_file".
 */
static int do_run(struct hn_cmd *c, char **argv, int argc, int64_t now, struct hn_buf *out,
                  struct hn_buf *err, int64_t *wake)
{
	struct hn_node *n = c->node;
	const char *name = NULL, *image = NULL;
	int detach = 0, rm = 0, i;
	struct hn_buf env = {0}, cmd = {0};

	for (i = 0; i < argc; i++) {
		char *a = argv[i], *val = NULL, key[64];
		if (a[0] != '-' || !a[1])
			break;
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(a, "="), a);
		if (strcmp(a, "-d") == 0 || strcmp(a, "--detach") == 0) {
			detach = 1;
			continue;
		}
		if (strcmp(a, "--rm") == 0) {
			rm = 1;
			continue;
		}
		if (strcmp(a, "-i") == 0 || strcmp(a, "-t") == 0 || strcmp(a, "-it") == 0 ||
		    strcmp(a, "--init") == 0 || strcmp(a, "--privileged") == 0)
			continue;
		if (!value_opt(key)) {
			hn_buf_printf(err, "unknown flag: %s\nSee 'docker run --help'.\n", key);
			goto fail;
		}
		if (strchr(a, '='))
			val = strchr(a, '=') + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			hn_buf_printf(err, "flag needs an argument: %s\n", key);
			goto fail;
		}
		if (strcmp(key, "--name") == 0) {
			name = val;
		} else if (strcmp(key, "-e") == 0 || strcmp(key, "--env") == 0) {
			if (strchr(val, '='))
				hn_buf_printf(&env, "%s\n", val);
		} else if (strcmp(key, "--env-file") == 0) {
			if (strcmp(val, "$env_file") == 0 && c->env_path)
				val = c->env_path;
			struct hn_file *f = fs_find(n, val);
			if (!f || f->dir) {
				hn_buf_printf(err, "docker: open %s: no such file or directory.\n",
				              val);
				goto fail;
			}
			env_file_lines(f->data.data ? f->data.data : "", f->data.len, &env);
		} else if (strcmp(key, "-v") == 0 || strcmp(key, "--volume") == 0) {
			char src[4096];
			snprintf(src, sizeof(src), "%.*s", (int)strcspn(val, ":"), val);
			if (src[0] != '/') {
				hn_buf_printf(err,
				              "docker: Error response from daemon: invalid "
				              "volume specification: '%s'.\n",
				              val);
				goto fail;
			}
			char *np = norm_path(src);
			int exists = np && (fs_is_dir(n, np) || fs_find(n, np));
			free(np);
			if (!exists) {
				hn_buf_printf(err,
				              "docker: Error response from daemon: invalid mount "
				              "config for type \"bind\": bind source path does not "
				              "exist: %s.\n",
				              src);
				goto fail;
			}
		}
	}
	if (i >= argc) {
		hn_buf_printf(err, "\"docker run\" requires at least 1 argument.\n");
		goto fail;
	}
	image = argv[i++];
	if (i >= argc) {
		hn_buf_printf(err, "docker: Error response from daemon: no command specified.\n");
		goto fail;
	}
	for (int k = i; k < argc; k++)
		hn_buf_printf(&cmd, "%s%s", k > i ? " " : "", argv[k]);
	if (c->phase == 0) {
		if (name && find_container(n, name)) {
			hn_buf_printf(
			    err,
			    "docker: Error response from daemon: Conflict. The container "
			    "name \"/%s\" is already in use by container \"%s\". You have "
			    "to remove (or rename) that container to be able to reuse "
			    "that name.\n",
			    name, find_container(n, name)->id);
			goto fail;
		}
		c->phase = 1;
	}
	if (c->phase == 1) {
		struct hn_buf ignored = {0};
		int rc = do_pull(c, image, 1, now, &ignored, err, wake);
		hn_buf_free(&ignored);
		if (rc == AGAIN)
			goto again;
		if (rc) {
			c->phase = 0;
			goto fail;
		}
		c->phase = 2;
		if (hn_start_delay_ms > 0) {
			c->until = now + hn_start_delay_ms;
			*wake = c->until;
			goto again;
		}
	}
	if (c->phase == 2) {
		if (c->until && now < c->until) {
			*wake = c->until;
			goto again;
		}
		c->until = 0;
		/* the name may have been taken meanwhile */
		if (name && find_container(n, name)) {
			hn_buf_printf(err,
			              "docker: Error response from daemon: Conflict. The container "
			              "name \"/%s\" is already in use.\n",
			              name);
			c->phase = 0;
			goto fail;
		}
		if (n->n_containers == n->cap_containers) {
			n->cap_containers = n->cap_containers ? n->cap_containers * 2 : 4;
			n->containers =
			    xrealloc(n->containers, n->cap_containers * sizeof(*n->containers));
		}
		struct hn_container *k = &n->containers[n->n_containers++];
		memset(k, 0, sizeof(*k));
		n->serial++;
		snprintf(k->id, sizeof(k->id), "%08x%08x%048x", (unsigned)wall_ms(), n->serial, 0u);
		for (char *p = k->id; *p; p++) /* a little less regular: mix the ip in */
			if (*p == '0' && (p - k->id) % 7 == 3)
				*p = "0123456789abcdef"[(n->serial + (unsigned)(p - k->id)) % 16];
		if (name)
			k->name = xstrdup(name);
		else if (asprintf(&k->name, "hollow_%u", n->serial) < 0)
			abort();
		k->image = xstrdup(image);
		k->cmd = xstrdup(cmd.data);
		k->env = xstrdup(env.data ? env.data : "");
		k->created_wall = k->start_wall = wall_ms();
		k->start_mono = now;
		runtime_rule(k);
		(void)rm;
		c->phase = detach ? 0 : 3;
		if (detach) {
			hn_buf_printf(out, "%s\n", k->id);
			hn_buf_free(&env);
			hn_buf_free(&cmd);
			return 0;
		}
		free(c->name);
		c->name = xstrdup(k->name);
	}
	/* phase 3: attached: wait for the end, then its log and exit code */
	{
		struct hn_container *k = find_container(n, c->name);
		if (k && running(k, now)) {
			*wake = k->end_mono >= 0 ? k->end_mono : now + 1000;
			goto again;
		}
		c->phase = 0;
		hn_buf_free(&env);
		hn_buf_free(&cmd);
		if (!k)
			return 137;
		container_log(k, now, out);
		if (rm)
			k->removed = 1;
		return k->final_code;
	}
again:
	hn_buf_free(&env);
	hn_buf_free(&cmd);
	return AGAIN;
fail:
	hn_buf_free(&env);
	hn_buf_free(&cmd);
	return 125;
}

static const char *status_text(struct hn_container *k, int64_t now, char *buf, size_t cap)
{
	if (running(k, now))
		snprintf(buf, cap, "Up %lld seconds", (long long)((now - k->start_mono) / 1000));
	else
		snprintf(buf, cap, "Exited (%d)", k->final_code);
	return buf;
}

/* One {{...}} field of a template for container k. */
static void field(struct hn_container *k, const char *f, int64_t now, struct hn_buf *out)
{
	char t[64];
	int run = running(k, now);
	while (*f == ' ')
		f++;
	if (starts(f, "json ")) {
		f += 5;
		while (*f == ' ')
			f++;
		if (starts(f, ".Config.Env")) {
			const char *p = k->env, *e;
			hn_buf_add(out, "[", 1);
			for (int first = 1; *p; p = e + 1, first = 0) {
				e = p + strcspn(p, "\n");
				hn_buf_printf(out, "%s\"%.*s\"", first ? "" : ",", (int)(e - p), p);
				if (!*e)
					break;
			}
			hn_buf_add(out, "]", 1);
			return;
		}
	}
	if (starts(f, ".Id") || starts(f, ".ID"))
		hn_buf_printf(out, "%s", k->id);
	else if (starts(f, ".Name"))
		hn_buf_printf(out, "%s%s", starts(f, ".Names") ? "" : "/", k->name);
	else if (starts(f, ".State.Status") || strcmp(f, ".State") == 0 ||
	         strcmp(f, ".State ") == 0)
		hn_buf_printf(out, "%s", run ? "running" : "exited");
	else if (starts(f, ".State.Running"))
		hn_buf_printf(out, "%s", run ? "true" : "false");
	else if (starts(f, ".State.ExitCode"))
		hn_buf_printf(out, "%d", run ? 0 : k->final_code);
	else if (starts(f, ".State.Pid"))
		hn_buf_printf(out, "%d", run ? 1000 + (int)(k - k) : 0);
	else if (starts(f, ".State.StartedAt"))
		iso_time(k->start_wall, t, sizeof(t)), hn_buf_printf(out, "%s", t);
	else if (starts(f, ".State.FinishedAt")) {
		if (run)
			hn_buf_printf(out, "0001-01-01T00:00:00Z");
		else
			iso_time(k->finished_wall, t, sizeof(t)), hn_buf_printf(out, "%s", t);
	} else if (starts(f, ".Config.Image") || starts(f, ".Image"))
		hn_buf_printf(out, "%s", k->image);
	else if (starts(f, ".Status"))
		hn_buf_printf(out, "%s", status_text(k, now, t, sizeof(t)));
	else if (starts(f, ".Command"))
		hn_buf_printf(out, "\"%.20s\"", k->cmd);
	else if (starts(f, ".CreatedAt"))
		iso_time(k->created_wall, t, sizeof(t)), hn_buf_printf(out, "%s", t);
}

/* A docker template ("{{.State.Status}} {{.State.ExitCode}}") for container k. */
static void render(struct hn_container *k, const char *tmpl, int64_t now, struct hn_buf *out)
{
	const char *p = tmpl;
	while (*p) {
		const char *o = strstr(p, "{{");
		const char *e = o ? strstr(o, "}}") : NULL;
		if (!o || !e) {
			hn_buf_add(out, p, strlen(p));
			break;
		}
		hn_buf_add(out, p, (size_t)(o - p));
		char *f = strndup(o + 2, (size_t)(e - o - 2));
		field(k, f, now, out);
		free(f);
		p = e + 2;
	}
	/* docker's \t in a --format */
	for (char *q = out->data; q && (q = strstr(q, "\\t")) != NULL;) {
		*q = '\t';
		memmove(q + 1, q + 2, strlen(q + 2) + 1);
		out->len--;
	}
	hn_buf_add(out, "\n", 1);
}

static int do_docker(struct hn_cmd *c, char **argv, int argc, int64_t now, struct hn_buf *out,
                     struct hn_buf *err, int64_t *wake)
{
	struct hn_node *n = c->node;
	const char *sub;
	if (argc < 2) {
		hn_buf_printf(err, "Usage:  docker [OPTIONS] COMMAND\n");
		return 0;
	}
	int used = 2; /* "docker" and the subcommand */
	argv++, argc--;
	if ((strcmp(argv[0], "container") == 0 || strcmp(argv[0], "image") == 0) && argc > 1)
		argv++, argc--, used++;
	sub = argv[0];
	argv++, argc--;
	if (strcmp(sub, "version") == 0) {
		hn_buf_printf(out, "Client: hollow-node\n Version: 24.0.0-hollow\nServer: "
		                   "hollow-node\n Version: 24.0.0-hollow\n");
		return 0;
	}
	if (strcmp(sub, "pull") == 0) {
		int quiet = 0;
		const char *image = NULL;
		for (int i = 0; i < argc; i++) {
			if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
				quiet = 1;
			else if (argv[i][0] == '-') {
				hn_buf_printf(err, "unknown flag: %s\nSee 'docker pull --help'.\n",
				              argv[i]);
				return 125;
			} else
				image = argv[i];
		}
		if (!image) {
			hn_buf_printf(err, "\"docker pull\" requires exactly 1 argument.\n");
			return 1;
		}
		return do_pull(c, image, quiet, now, out, err, wake);
	}
	if (strcmp(sub, "run") == 0)
		return do_run(c, argv, argc, now, out, err, wake);
	if (strcmp(sub, "ps") == 0) {
		int all = 0, quiet = 0;
		const char *fmt = NULL, *fname = NULL, *fstatus = NULL;
		regex_t re;
		for (int i = 0; i < argc; i++) {
			if (strcmp(argv[i], "-a") == 0 || strcmp(argv[i], "--all") == 0)
				all = 1;
			else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
				quiet = 1;
			else if (strcmp(argv[i], "-aq") == 0 || strcmp(argv[i], "-qa") == 0)
				all = quiet = 1;
			else if ((strcmp(argv[i], "--format") == 0 || strcmp(argv[i], "-f") == 0 ||
			          strcmp(argv[i], "--filter") == 0) &&
			         i + 1 < argc) {
				const char *v = argv[++i];
				if (strcmp(argv[i - 1], "--format") == 0)
					fmt = v;
				else if (starts(v, "name="))
					fname = v + 5;
				else if (starts(v, "status="))
					fstatus = v + 7;
			} else {
				hn_buf_printf(err, "unknown flag: %s\nSee 'docker ps --help'.\n",
				              argv[i]);
				return 125;
			}
		}
		if (fname && regcomp(&re, fname, REG_EXTENDED | REG_NOSUB)) {
			hn_buf_printf(err, "Error response from daemon: invalid filter\n");
			return 1;
		}
		if (!quiet && !fmt)
			hn_buf_printf(out, "CONTAINER ID   IMAGE   COMMAND   CREATED   STATUS   "
			                   "PORTS   NAMES\n");
		for (size_t i = 0; i < n->n_containers; i++) {
			struct hn_container *k = &n->containers[i];
			char st[64];
			int run = running(k, now);
			if (k->removed || (!all && !run && !fstatus))
				continue;
			if (fname && regexec(&re, k->name, 0, NULL, 0) != 0)
				continue;
			if (fstatus && strcmp(fstatus, run ? "running" : "exited") != 0)
				continue;
			if (quiet)
				hn_buf_printf(out, "%.12s\n", k->id);
			else if (fmt)
				render(k, fmt, now, out);
			else
				hn_buf_printf(out, "%.12s   %s   \"%.20s\"   -   %s      %s\n",
				              k->id, k->image, k->cmd,
				              status_text(k, now, st, sizeof(st)), k->name);
		}
		if (fname)
			regfree(&re);
		return 0;
	}
	if (strcmp(sub, "inspect") == 0) {
		const char *fmt = NULL;
		int rc = 0, first = 1;
		struct hn_buf json = {0};
		for (int i = 0; i < argc; i++) {
			if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--format") == 0) &&
			    i + 1 < argc) {
				fmt = argv[++i];
				continue;
			}
			struct hn_container *k = find_container(n, argv[i]);
			if (!k) {
				hn_buf_printf(err, "Error: No such object: %s\n", argv[i]);
				rc = 1;
				continue;
			}
			if (fmt) {
				render(k, fmt, now, out);
				continue;
			}
			int run = running(k, now);
			char t1[64], t2[64] = "0001-01-01T00:00:00Z";
			iso_time(k->start_wall, t1, sizeof(t1));
			if (!run)
				iso_time(k->finished_wall, t2, sizeof(t2));
			hn_buf_printf(
			    &json,
			    "%s{\"Id\":\"%s\",\"Name\":\"/%s\",\"State\":{\"Status\":\"%s\","
			    "\"Running\":%s,\"ExitCode\":%d,\"Pid\":%d,\"StartedAt\":\"%s\","
			    "\"FinishedAt\":\"%s\"},\"Config\":{\"Image\":\"%s\",\"Env\":",
			    first ? "" : ",", k->id, k->name, run ? "running" : "exited",
			    run ? "true" : "false", run ? 0 : k->final_code, run ? 4242 : 0, t1, t2,
			    k->image);
			struct hn_buf envj = {0};
			field(k, "json .Config.Env", now, &envj);
			hn_buf_add(&json, envj.data, envj.len);
			hn_buf_free(&envj);
			hn_buf_add(&json, "}}", 2);
			first = 0;
		}
		if (!fmt)
			hn_buf_printf(out, "[%s]\n", json.data ? json.data : "");
		hn_buf_free(&json);
		return rc;
	}
	if (strcmp(sub, "logs") == 0) {
		int follow = 0;
		const char *name = NULL;
		for (int i = 0; i < argc; i++) {
			if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0)
				follow = 1;
			else if (strcmp(argv[i], "--tail") == 0 && i + 1 < argc)
				i++;
			else if (argv[i][0] == '-') {
				hn_buf_printf(err, "unknown flag: %s\nSee 'docker logs --help'.\n",
				              argv[i]);
				return 125;
			} else
				name = argv[i];
		}
		struct hn_container *k = name ? find_container(n, name) : NULL;
		if (!k) {
			if (c->phase) {
				c->phase = 0;
				return 0; /* removed while followed: docker logs -f ends */
			}
			hn_buf_printf(err, "Error response from daemon: No such container: %s\n",
			              name ? name : "");
			return 1;
		}
		struct hn_buf log = {0};
		container_log(k, now, &log);
		if (log.len > c->log_sent)
			hn_buf_add(out, log.data + c->log_sent, log.len - c->log_sent);
		c->log_sent = log.len;
		hn_buf_free(&log);
		if (follow && running(k, now)) {
			c->phase = 1;
			/* stop/rm come from other sessions: look again every 250 ms */
			*wake = now + 250;
			if (k->end_mono >= 0 && k->end_mono < *wake)
				*wake = k->end_mono;
			return AGAIN;
		}
		c->phase = 0;
		c->log_sent = 0;
		return 0;
	}
	if (strcmp(sub, "wait") == 0) {
		/* prints each code in turn; arg_at remembers where it is */
		for (; c->arg_at < (size_t)argc; c->arg_at++) {
			struct hn_container *k = find_container(n, argv[c->arg_at]);
			if (!k) {
				hn_buf_printf(err,
				              "Error response from daemon: No such container: %s\n",
				              argv[c->arg_at]);
				c->arg_at = 0;
				return 1;
			}
			if (running(k, now)) {
				*wake = now + 250;
				if (k->end_mono >= 0 && k->end_mono < *wake)
					*wake = k->end_mono;
				return AGAIN;
			}
			hn_buf_printf(out, "%d\n", k->final_code);
		}
		c->arg_at = 0;
		return 0;
	}
	if (strcmp(sub, "stop") == 0 || strcmp(sub, "kill") == 0 || strcmp(sub, "rm") == 0) {
		int force = 0, rc = 0, stop = strcmp(sub, "stop") == 0, kill = sub[0] == 'k';
		for (int i = 0; i < argc; i++) {
			if (argv[i][0] == '-') {
				if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--force") == 0)
					force = 1;
				else if ((strcmp(argv[i], "-t") == 0 ||
				          strcmp(argv[i], "-s") == 0 ||
				          strcmp(argv[i], "--time") == 0 ||
				          strcmp(argv[i], "--signal") == 0) &&
				         i + 1 < argc)
					i++;
				else {
					hn_buf_printf(err,
					              "unknown flag: %s\nSee 'docker %s --help'.\n",
					              argv[i], sub);
					return 125;
				}
				continue;
			}
			struct hn_container *k = find_container(n, argv[i]);
			if (!k) {
				hn_buf_printf(err,
				              "Error response from daemon: No such container: %s\n",
				              argv[i]);
				rc = 1;
				continue;
			}
			if (stop) {
				/* the command gets SIGTERM and ends at once: 143 */
				stop_container(k, now, 143);
			} else if (kill) {
				if (!running(k, now)) {
					hn_buf_printf(
					    err,
					    "Error response from daemon: Cannot kill "
					    "container: %s: container %s is not running\n",
					    argv[i], k->id);
					rc = 1;
					continue;
				}
				stop_container(k, now, 137);
			} else {
				if (running(k, now) && !force) {
					hn_buf_printf(
					    err,
					    "Error response from daemon: You cannot remove a "
					    "running container %s. Stop the container before "
					    "attempting removal or force remove\n",
					    k->id);
					rc = 1;
					continue;
				}
				stop_container(k, now, 137);
				k->removed = 1;
			}
			hn_buf_printf(out, "%s\n", argv[i]);
		}
		return rc;
	}
	if (strcmp(sub, "exec") == 0) {
		int i = 0;
		while (i < argc && argv[i][0] == '-')
			i += (strcmp(argv[i], "-e") == 0 || strcmp(argv[i], "-w") == 0 ||
			      strcmp(argv[i], "-u") == 0)
			         ? 2
			         : 1;
		if (i >= argc) {
			hn_buf_printf(err, "\"docker exec\" requires at least 2 arguments.\n");
			return 1;
		}
		struct hn_container *k = find_container(n, argv[i]);
		if (!k) {
			hn_buf_printf(err, "Error response from daemon: No such container: %s\n",
			              argv[i]);
			return 1;
		}
		if (!running(k, now)) {
			hn_buf_printf(err,
			              "Error response from daemon: Container %s is not running\n",
			              k->id);
			return 1;
		}
		if (i + 1 >= argc) {
			hn_buf_printf(err, "\"docker exec\" requires at least 2 arguments.\n");
			return 1;
		}
		/* the container sees the node's files: run the hollow builtin there */
		return -2000 - (used + i + 1); /* the caller runs CMD... as a simple command */
	}
	hn_buf_printf(err, "docker: '%s' is not a docker command.\n", sub);
	return 1;
}

/* ---- the simple commands ---- */

static int builtin(struct hn_cmd *c, char **argv, int argc, int64_t now, struct hn_buf *out,
                   struct hn_buf *err, int64_t *wake)
{
	struct hn_node *n = c->node;
	const char *a0 = argv[0];
	if (strcmp(a0, "docker") == 0) {
		int rc = do_docker(c, argv, argc, now, out, err, wake);
		if (rc <= -2000) {
			int skip = -(rc + 2000); /* where CMD starts */
			return builtin(c, argv + skip, argc - skip, now, out, err, wake);
		}
		return rc;
	}
	if (strcmp(a0, "true") == 0 || strcmp(a0, ":") == 0)
		return 0;
	if (strcmp(a0, "false") == 0)
		return 1;
	if (strcmp(a0, "exit") == 0)
		return -3000 - (argc > 1 ? atoi(argv[1]) & 255 : c->last_status);
	if (strcmp(a0, "echo") == 0) {
		for (int i = 1; i < argc; i++)
			hn_buf_printf(out, "%s%s", i > 1 ? " " : "", argv[i]);
		hn_buf_add(out, "\n", 1);
		return 0;
	}
	if (strcmp(a0, "cat") == 0 || strcmp(a0, "ls") == 0 || strcmp(a0, "mkdir") == 0 ||
	    strcmp(a0, "rm") == 0) {
		int rc = 0, parents = 0, force = 0;
		for (int i = 1; i < argc; i++) {
			if (argv[i][0] == '-' && argv[i][1]) {
				parents |= strchr(argv[i], 'p') != NULL;
				force |=
				    strchr(argv[i], 'f') != NULL || strchr(argv[i], 'r') != NULL;
				continue;
			}
			char *p = norm_path(argv[i]);
			struct hn_file *f = p ? fs_find(n, p) : NULL;
			if (!p) {
				hn_buf_printf(err, "%s: %s: not supported by a hollow node\n", a0,
				              argv[i]);
				rc = 1;
			} else if (a0[0] == 'c') {
				if (f && !f->dir)
					hn_buf_add(out, f->data.data, f->data.len);
				else {
					hn_buf_printf(err, "cat: %s: %s\n", argv[i],
					              f || fs_is_dir(n, p)
					                  ? "Is a directory"
					                  : "No such file or directory");
					rc = 1;
				}
			} else if (a0[0] == 'l') {
				if (f && !f->dir) {
					hn_buf_printf(out, "%s\n", argv[i]);
				} else if (fs_is_dir(n, p)) {
					qsort(n->files, n->n_files, sizeof(*n->files), cmp_files);
					for (size_t k = 0; k < n->n_files; k++) {
						const char *q = n->files[k].path;
						size_t pl = strcmp(p, "/") ? strlen(p) : 0;
						if (under(q, p) && q[pl] == '/' &&
						    !strchr(q + pl + 1, '/'))
							hn_buf_printf(out, "%s\n", q + pl + 1);
					}
				} else {
					hn_buf_printf(
					    err,
					    "ls: cannot access '%s': No such file or directory\n",
					    argv[i]);
					rc = 2;
				}
			} else if (a0[0] == 'm') {
				char parent[4096];
				parent_of(p, parent, sizeof(parent));
				if (fs_is_dir(n, p) && parents)
					;
				else if ((!parents && !fs_is_dir(n, parent)) || (f && !parents) ||
				         fs_mkdir_p(n, p)) {
					hn_buf_printf(err, "mkdir: cannot create directory '%s'\n",
					              argv[i]);
					rc = 1;
				}
			} else {
				if (!fs_rm_rf(n, p) && !force) {
					hn_buf_printf(
					    err,
					    "rm: cannot remove '%s': No such file or directory\n",
					    argv[i]);
					rc = 1;
				}
			}
			free(p);
		}
		return rc;
	}
	hn_buf_printf(err, "hollow-node: unknown command: %s\n", a0);
	return -127;
}

/* Runs the generic list from c->at on. 1 when done (*status), 0 when waiting. */
static int run_list(struct hn_cmd *c, int64_t now, struct hn_buf *out, struct hn_buf *err,
                    int *status, int64_t *wake)
{
	for (; c->at < c->n_list; c->at++) {
		struct simple *s = &c->list[c->at];
		struct hn_buf o = {0}, e = {0};
		if (!c->phase && !c->arg_at && c->at > 0) {
			if ((s->join == '&' && c->last_status != 0) ||
			    (s->join == '|' && c->last_status == 0))
				continue;
		}
		int rc = builtin(c, s->argv, s->argc, now, &o, &e, wake);
		if (rc == AGAIN) {
			/* what a waiting command already printed goes out now (logs -f) */
			if (s->out_to == 0)
				hn_buf_add(out, o.data, o.len);
			else if (s->out_to == 2)
				hn_buf_add(err, o.data, o.len);
			hn_buf_free(&o);
			hn_buf_free(&e);
			return 0;
		}
		int exit_now = rc <= -3000;
		if (exit_now)
			rc = -(rc + 3000);
		if (rc == -127) {
			c->kind = HN_UNKNOWN;
			rc = 127;
		}
		struct hn_buf *o_to = s->out_to == 0 ? out : s->out_to == 2 ? err : NULL;
		struct hn_buf *e_to = s->err_to == 0 ? err : s->err_to == 2 ? o_to : NULL;
		if (s->out_to == 3) {
			char *p = norm_path(s->out_file);
			if (!p || fs_write(c->node, p, o.data ? o.data : "", o.len, s->append)) {
				hn_buf_printf(err, "hollow-node: %s: cannot write\n", s->out_file);
				rc = 1;
			}
			free(p);
			if (s->err_to == 2)
				e_to = NULL;
		}
		if (o_to)
			hn_buf_add(o_to, o.data, o.len);
		if (e_to)
			hn_buf_add(e_to, e.data, e.len);
		hn_buf_free(&o);
		hn_buf_free(&e);
		c->last_status = rc;
		if (exit_now || c->kind == HN_UNKNOWN) {
			*status = rc;
			return 1;
		}
	}
	*status = c->last_status;
	return 1;
}

static void fabric_answer(struct hn_buf *out)
{
	/* no /dev/infiniband devices, no fi_info; the loopback interface; a 64 GiB node */
	hn_buf_printf(out, "if=lo\nmem_kib=65536000\nshm_kib=32768000\n");
}

/* The boot script. */
static int run_boot(struct hn_cmd *c, int64_t now, struct hn_buf *out, struct hn_buf *err,
                    int *status, int64_t *wake)
{
	struct hn_node *n = c->node;
	(void)out;
	if (c->phase == 0 && c->arg_at == 0) {
		/* the presigned URL lines, then the env file */
		const char *p = c->in.data ? c->in.data : "", *end = p + c->in.len;
		for (size_t i = 0; i < c->n_urls && p < end; i++) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			p = nl ? nl + 1 : end;
		}
		for (size_t i = 0; i < c->n_mkdirs; i++) {
			char *np = norm_path(c->n_mkdirs ? c->mkdirs[i] : "");
			if (!np || fs_mkdir_p(n, np)) {
				hn_buf_printf(err, "mkdir: cannot create directory '%s'\n",
				              c->mkdirs[i]);
				free(np);
				*status = 1;
				return 1;
			}
			free(np);
		}
		for (size_t i = 0; i < c->n_ds_need; i++)
			if (!fs_is_dir(n, c->ds_need[i])) {
				hn_buf_printf(err, "%s\n", c->ds_need_msg[i]);
				*status = 95;
				return 1;
			}
		/* a fetched dataset: the copy appears (nothing is downloaded) */
		for (size_t i = 0; i < c->n_ds_fake; i++) {
			char *np = norm_path(c->ds_fake[i]);
			if (np)
				fs_mkdir_p(n, np);
			free(np);
		}
		if (fs_write(n, c->env_path, p, (size_t)(end - p), 0)) {
			hn_buf_printf(err, "bash: %s: No such file or directory\n", c->env_path);
			*status = 1;
			return 1;
		}
		c->arg_at = 1; /* the pull */
	}
	if (c->arg_at == 1) {
		if (c->image) { /* a script of before: docker pull IMAGE || exit 97 */
			struct hn_buf ignored = {0};
			int rc = do_pull(c, c->image, 0, now, &ignored, err, wake);
			hn_buf_free(&ignored);
			if (rc == AGAIN)
				return 0;
			if (rc) {
				*status = 97;
				return 1;
			}
		}
		c->arg_at = 2;
		/* start: a container of that name is left only by a repeated boot */
		struct hn_container *k = find_container(n, c->name);
		if (k) {
			stop_container(k, now, 137);
			k->removed = 1;
		}
	}
	struct hn_buf o = {0}, e = {0};
	int rc = do_run(c, c->run_argv, c->run_argc, now, &o, &e, wake);
	hn_buf_free(&o);
	if (rc == AGAIN) {
		hn_buf_free(&e);
		return 0;
	}
	hn_buf_add(err, e.data, e.len);
	hn_buf_free(&e);
	*status = rc;
	return 1;
}

int hn_cmd_step(struct hn_cmd *c, int64_t now, struct hn_buf *out, struct hn_buf *err,
                int *exit_code, int64_t *wake_ms)
{
	struct hn_node *n = c->node;
	int done = 1, status = 0;
	*wake_ms = -1;
	if (c->wants_stdin && !c->eof)
		return 0;
	pthread_mutex_lock(&n->lock);
	switch (c->kind) {
	case HN_FABRIC:
		fabric_answer(out);
		break;
	case HN_BOOT:
		done = run_boot(c, now, out, err, &status, wake_ms);
		break;
	case HN_ART_PULL: {
		char *mnt[] = {"/mnt/checkpoints", "/mnt/crud", "/mnt/lossy"};
		for (int i = 0; i < 3; i++)
			fs_mkdir_p(n, mnt[i]);
		status = tar_create(n, "/mnt", c->tops, c->n_tops, out, err);
		break;
	}
	case HN_ART_PUSH:
		status = tar_extract(n, "/mnt", c->in.data, c->in.len, err);
		break;
	case HN_DS_CHECK: {
		char path[4200];
		snprintf(path, sizeof(path), "/data/.isc/%s.stamp", c->copy);
		struct hn_file *f = fs_find(n, path);
		snprintf(path, sizeof(path), "/data/.isc/%s", c->copy);
		status = f && fs_is_dir(n, path) && f->data.len == 64 &&
		                 memcmp(f->data.data, c->digest, 64) == 0
		             ? 0
		             : 1;
		break;
	}
	case HN_DS_PUSH: {
		char path[4200];
		snprintf(path, sizeof(path), "/data/.isc/%s", c->copy);
		fs_rm_rf(n, path);
		fs_mkdir_p(n, path);
		status = tar_extract(n, path, c->in.data, c->in.len, err);
		if (!status) {
			snprintf(path, sizeof(path), "/data/.isc/%s.stamp", c->copy);
			fs_write(n, path, c->digest, strlen(c->digest), 0);
		}
		break;
	}
	case HN_CLEAN: {
		char *mnt[] = {"/mnt/checkpoints", "/mnt/crud", "/mnt/lossy"};
		for (int i = 0; i < 3; i++) {
			fs_rm_rf(n, mnt[i]);
			fs_mkdir_p(n, mnt[i]);
		}
		break;
	}
	case HN_UNKNOWN:
		hn_buf_printf(err, "hollow-node: unknown command: %.300s%s\n", c->text,
		              strlen(c->text) > 300 ? "..." : "");
		status = 127;
		break;
	default:
		done = run_list(c, now, out, err, &status, wake_ms);
		break;
	}
	pthread_mutex_unlock(&n->lock);
	if (done)
		*exit_code = status;
	return done;
}
