/*
 * Launch-file (.isc) validation: TOML document -> struct isc_launch, or a list of
 * every problem with its position and field.
 *
 * One pass over the top-level keys in document order checks each known field on its
 * own (type, emptiness, length, characters, range) and flags unknown keys with the
 * nearest known name; a second step checks what depends on several fields
 * (compute_mode against gpus, max_rapid_cycles and burst_shape_priority_list) and
 * the required fields. Problems are then sorted by position so the output reads
 * top to bottom.
 */
#include "launchfile/launchfile.h"
#include "common/suggest.h"
#include "shapes/catalog.h"

#include "toml/toml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Past this many problems a file is hopeless; stop so output (and work) stays bounded. */
#define MAX_PROBLEMS 100

enum kind {
	K_ID,      /* a bounded id: letters, digits, '.', '_', '-' */
	K_SHAPE,   /* a shape id: as K_ID, and '+' (GCP's N1 shapes name their GPU: n1-...+T4x1) */
	K_NAME,    /* free text without control characters */
	K_COMMAND, /* free text; newlines and tabs allowed */
	K_IMAGE,   /* a container image reference */
	K_GPUS,
	K_MODE,
	K_RAPID,
	K_IDLIST,
	K_RANK,
};

static const struct field {
	const char *name;
	enum kind kind;
	int required;
} fields[] = {
    {"isc_project_id", K_ID, 1},
    {"experiment_name", K_NAME, 1},
    {"gpus", K_GPUS, 1},
    {"command", K_COMMAND, 1},
    {"compute_mode", K_MODE, 0},
    {"max_rapid_cycles", K_RAPID, 0},
    {"dataset_id_list", K_IDLIST, 0},
    {"burst_shape_priority_list", K_IDLIST, 0},
    {"input_artifact_id_list", K_IDLIST, 0},
    {"image", K_IMAGE, 0},
    {"burst_rank", K_RANK, 0},
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

struct checker {
	struct isc_launch_problems *probs;
	struct isc_launch *l;
	const struct isc_toml_value *seen[NFIELDS];
	size_t before; /* problems->len when this file's check began */
	size_t limit;  /* how many problems this file may add */
	int nomem;
	int truncated;
};

/* ---- problems ---- */

void isc_launch_problems_init(struct isc_launch_problems *p)
{
	memset(p, 0, sizeof(*p));
}

void isc_launch_problems_cleanup(struct isc_launch_problems *p)
{
	free(p->items);
	memset(p, 0, sizeof(*p));
}

static void add(struct checker *c, int line, int col, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Appends one problem; -1 when out of memory. */
static int problem_append(struct isc_launch_problems *p, int warning, int line, int col,
                          const char *field, const char *fmt, va_list ap)
{
	struct isc_launch_problem *pr;

	if (p->len == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 8;
		struct isc_launch_problem *n = realloc(p->items, ncap * sizeof(*n));
		if (!n)
			return -1;
		p->items = n;
		p->cap = ncap;
	}
	pr = &p->items[p->len++];
	pr->line = line;
	pr->col = col;
	pr->warning = warning;
	snprintf(pr->field, sizeof(pr->field), "%s", field);
	vsnprintf(pr->msg, sizeof(pr->msg), fmt, ap);
	return 0;
}

static void add(struct checker *c, int line, int col, const char *field, const char *fmt, ...)
{
	va_list ap;

	if (c->probs->len - c->before >= c->limit) {
		c->truncated = 1;
		return;
	}
	va_start(ap, fmt);
	if (problem_append(c->probs, 0, line, col, field, fmt, ap))
		c->nomem = 1;
	va_end(ap);
}

int isc_launch_problems_add(struct isc_launch_problems *p, int warning, int line, int col,
                            const char *field, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = problem_append(p, warning, line, col, field, fmt, ap);
	va_end(ap);
	return rc ? ISC_ENOMEM : 0;
}

int isc_launch_problems_write(const struct isc_launch_problems *p, const char *path,
                              struct isc_buf *out)
{
	for (size_t i = 0; i < p->len; i++) {
		const struct isc_launch_problem *pr = &p->items[i];
		int rc = isc_buf_printf(out, "%s:%d:%d: %s: %s: %s\n", path, pr->line, pr->col,
		                        pr->warning ? "warning" : "error", pr->field, pr->msg);
		if (rc)
			return rc;
	}
	return 0;
}

void isc_launch_problems_print(const struct isc_launch_problems *p, const char *path, FILE *f)
{
	for (size_t i = 0; i < p->len; i++) {
		const struct isc_launch_problem *pr = &p->items[i];
		fprintf(f, "%s:%d:%d: %s: %s: %s\n", path, pr->line, pr->col,
		        pr->warning ? "warning" : "error", pr->field, pr->msg);
	}
}

void isc_launch_problems_sort(struct isc_launch_problems *p)
{
	for (size_t i = 1; i < p->len; i++) {
		struct isc_launch_problem tmp = p->items[i];
		size_t j = i;
		while (j > 0 &&
		       (p->items[j - 1].line > tmp.line ||
		        (p->items[j - 1].line == tmp.line && p->items[j - 1].col > tmp.col))) {
			p->items[j] = p->items[j - 1];
			j--;
		}
		p->items[j] = tmp;
	}
}

/* ---- helpers ---- */

/* Shows untrusted text in a message: bounded, control characters escaped. */
static const char *show(const char *s, size_t len, char *buf, size_t cap)
{
	size_t o = 0, limit = cap > 12 ? cap - 12 : 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (o >= limit) {
			memcpy(buf + o, "...", 4);
			return buf;
		}
		if (ch < 0x20 || ch == 0x7f)
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", ch);
		else
			buf[o++] = (char)ch;
	}
	buf[o] = '\0';
	return buf;
}

static const char *a_type(enum isc_toml_type t)
{
	switch (t) {
	case ISC_TOML_STRING:
		return "a string";
	case ISC_TOML_INTEGER:
		return "an integer";
	case ISC_TOML_FLOAT:
		return "a float";
	case ISC_TOML_BOOL:
		return "a boolean";
	case ISC_TOML_DATETIME:
		return "an offset date-time";
	case ISC_TOML_DATETIME_LOCAL:
		return "a local date-time";
	case ISC_TOML_DATE_LOCAL:
		return "a local date";
	case ISC_TOML_TIME_LOCAL:
		return "a local time";
	case ISC_TOML_ARRAY:
		return "an array";
	case ISC_TOML_TABLE:
		return "a table";
	}
	return "a value";
}

static int vline(const struct isc_toml_value *v)
{
	return isc_toml_line(v);
}

static int vcol(const struct isc_toml_value *v)
{
	return isc_toml_col(v);
}

/* The first control character in s (C0, DEL or C1), or -1. Newline and tab pass when
 * allow_nl_tab is set. s is valid UTF-8 (the TOML parser checked it). */
static int find_control(const char *s, size_t len, int allow_nl_tab)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch == 0x7f) {
			if (allow_nl_tab && (ch == '\n' || ch == '\t'))
				continue;
			return ch;
		}
		if (ch == 0xC2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 &&
		    (unsigned char)s[i + 1] <= 0x9F)
			return (unsigned char)s[i + 1];
	}
	return -1;
}

static int is_alnum(int ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

static int id_ok(const char *s, size_t len, const char *extra)
{
	if (len == 0 || !is_alnum((unsigned char)s[0]))
		return 0;
	for (size_t i = 1; i < len; i++) {
		int ch = (unsigned char)s[i];
		if (!is_alnum(ch) && ch != '.' && ch != '_' && ch != '-' &&
		    !(ch && strchr(extra, ch)))
			return 0;
	}
	return 1;
}

static int image_ok(const char *s, size_t len)
{
	if (len == 0 || !is_alnum((unsigned char)s[0]))
		return 0;
	for (size_t i = 1; i < len; i++) {
		int ch = (unsigned char)s[i];
		if (!is_alnum(ch) && !strchr("._-/:@", ch))
			return 0;
	}
	return 1;
}

static char *dup_n(struct checker *c, const char *s, size_t len)
{
	char *d = malloc(len + 1);

	if (!d) {
		c->nomem = 1;
		return NULL;
	}
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

/*
 * Checks a string value of the given kind; on success returns 0 and, when dst is not
 * NULL, a copy in *dst. Problems are reported under field.
 */
static int check_text(struct checker *c, const struct isc_toml_value *v, const char *field,
                      enum kind kind, char **dst)
{
	char vb[80];
	const char *s;
	size_t len, max;
	int ctl;

	if (isc_toml_get_string(v, &s, &len)) {
		add(c, vline(v), vcol(v), field, "expected a string, found %s",
		    a_type(isc_toml_type(v)));
		return -1;
	}
	max = kind == K_NAME      ? ISC_LAUNCH_MAX_NAME
	      : kind == K_COMMAND ? ISC_LAUNCH_MAX_COMMAND
	      : kind == K_IMAGE   ? ISC_LAUNCH_MAX_IMAGE
	                          : ISC_LAUNCH_MAX_ID;
	if (len == 0) {
		add(c, vline(v), vcol(v), field, "must not be empty");
		return -1;
	}
	if (len > max) {
		add(c, vline(v), vcol(v), field, "is %zu bytes long, at most %zu allowed", len,
		    max);
		return -1;
	}
	ctl = find_control(s, len, kind == K_COMMAND);
	if (ctl >= 0) {
		add(c, vline(v), vcol(v), field, "contains a control character (U+%04X)%s", ctl,
		    kind == K_COMMAND ? "; only newlines and tabs are allowed" : "");
		return -1;
	}
	if ((kind == K_ID || kind == K_SHAPE) && !id_ok(s, len, kind == K_SHAPE ? "+" : "")) {
		add(c, vline(v), vcol(v), field,
		    "`%s` is not a valid id (use letters, digits, '.', '_'%s and '-', starting "
		    "with "
		    "a letter or digit)",
		    show(s, len, vb, sizeof(vb)), kind == K_SHAPE ? ", '+'" : "");
		return -1;
	}
	if (kind == K_IMAGE && !image_ok(s, len)) {
		add(c, vline(v), vcol(v), field,
		    "`%s` is not a valid image reference (use letters, digits and ._-/:@, starting "
		    "with a letter or digit)",
		    show(s, len, vb, sizeof(vb)));
		return -1;
	}
	if (dst)
		*dst = dup_n(c, s, len);
	return 0;
}

static int check_int(struct checker *c, const struct isc_toml_value *v, const char *field,
                     int64_t lo, int64_t hi, int *dst)
{
	int64_t i;

	if (isc_toml_get_int(v, &i)) {
		add(c, vline(v), vcol(v), field, "expected an integer, found %s",
		    a_type(isc_toml_type(v)));
		return -1;
	}
	if (i < lo || i > hi) {
		add(c, vline(v), vcol(v), field, "must be between %lld and %lld, got %lld",
		    (long long)lo, (long long)hi, (long long)i);
		return -1;
	}
	*dst = (int)i;
	return 0;
}

static void check_list(struct checker *c, const struct isc_toml_value *v, const char *field,
                       size_t max_items, enum kind kind, struct isc_strlist *dst)
{
	size_t n = isc_toml_array_len(v);
	char fb[80], vb[80];

	if (isc_toml_type(v) != ISC_TOML_ARRAY) {
		add(c, vline(v), vcol(v), field, "expected an array of strings, found %s",
		    a_type(isc_toml_type(v)));
		return;
	}
	if (n > max_items) {
		add(c, vline(v), vcol(v), field, "has %zu items, at most %zu allowed", n,
		    max_items);
		return;
	}
	dst->items = calloc(n ? n : 1, sizeof(*dst->items));
	dst->pos = calloc(n ? n : 1, sizeof(*dst->pos));
	if (!dst->items || !dst->pos) {
		c->nomem = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct isc_toml_value *item = isc_toml_array_at(v, i);
		const char *s;
		size_t len;
		char *copy = NULL;

		snprintf(fb, sizeof(fb), "%s[%zu]", field, i);
		if (check_text(c, item, fb, kind, &copy))
			continue;
		isc_toml_get_string(item, &s, &len);
		for (size_t j = 0; j < dst->len; j++) {
			if (strcmp(dst->items[j], s) == 0) {
				add(c, vline(item), vcol(item), fb, "`%s` is listed twice",
				    show(s, len, vb, sizeof(vb)));
				free(copy);
				copy = NULL;
				break;
			}
		}
		if (copy) {
			dst->pos[dst->len] = (struct isc_launch_pos){
			    .line = vline(item), .col = vcol(item), .index = i};
			dst->items[dst->len++] = copy;
		}
	}
}

/* ---- unknown keys ---- */

/* The known field nearest to key, or NULL when none is near enough to be a typo. */
static const char *suggest(const char *key, size_t len)
{
	struct isc_suggest s;

	if (len == 0 || len > 64)
		return NULL;
	isc_suggest_init(&s, key, len);
	for (size_t i = 0; i < NFIELDS; i++)
		isc_suggest_consider(&s, fields[i].name);
	return s.best;
}

/* ---- the launch ---- */

void isc_launch_free(struct isc_launch *l)
{
	struct isc_strlist *lists[3];

	if (!l)
		return;
	lists[0] = &l->dataset_ids;
	lists[1] = &l->burst_shapes;
	lists[2] = &l->input_artifact_ids;
	for (size_t k = 0; k < 3; k++) {
		for (size_t i = 0; i < lists[k]->len; i++)
			free(lists[k]->items[i]);
		free(lists[k]->items);
		free(lists[k]->pos);
	}
	free(l->project_id);
	free(l->experiment_name);
	free(l->command);
	free(l->image);
	free(l);
}

const char *isc_compute_mode_name(enum isc_compute_mode m)
{
	switch (m) {
	case ISC_MODE_CYCLE:
		return "cycle";
	case ISC_MODE_INTERRUPTIBLE:
		return "interruptible";
	case ISC_MODE_BURST:
		return "burst";
	}
	return "unknown";
}

int isc_compute_mode_parse(const char *s, enum isc_compute_mode *out)
{
	static const enum isc_compute_mode all[] = {ISC_MODE_CYCLE, ISC_MODE_INTERRUPTIBLE,
	                                            ISC_MODE_BURST};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(s, isc_compute_mode_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return ISC_EINVALID;
}

/* Checks one known field; returns 0 when it is good on its own. */
static int check_field(struct checker *c, const struct field *f, const struct isc_toml_value *v)
{
	struct isc_launch *l = c->l;
	char vb[80];

	switch (f->kind) {
	case K_ID:
		l->project_pos.line = vline(v);
		l->project_pos.col = vcol(v);
		return check_text(c, v, f->name, K_ID, &l->project_id);
	case K_SHAPE: /* the kind of a list's items (burst_shape_priority_list), no field's */
		return 0;
	case K_NAME:
		return check_text(c, v, f->name, K_NAME, &l->experiment_name);
	case K_COMMAND:
		return check_text(c, v, f->name, K_COMMAND, &l->command);
	case K_IMAGE:
		return check_text(c, v, f->name, K_IMAGE, &l->image);
	case K_GPUS:
		return check_int(c, v, f->name, 1, ISC_LAUNCH_MAX_GPUS, &l->gpus);
	case K_RAPID:
		return check_int(c, v, f->name, 1, ISC_LAUNCH_MAX_RAPID, &l->max_rapid_cycles);
	case K_MODE: {
		const char *s;
		size_t len;
		if (isc_toml_get_string(v, &s, &len)) {
			add(c, vline(v), vcol(v), f->name, "expected a string, found %s",
			    a_type(isc_toml_type(v)));
			return -1;
		}
		if (strlen(s) != len || isc_compute_mode_parse(s, &l->compute_mode)) {
			add(c, vline(v), vcol(v), f->name,
			    "must be one of \"cycle\", \"interruptible\", \"burst\", got \"%s\"",
			    show(s, len, vb, sizeof(vb)));
			return -1;
		}
		return 0;
	}
	case K_RANK: {
		const char *s;
		size_t len;
		enum isc_rank_mode m;
		if (isc_toml_get_string(v, &s, &len)) {
			add(c, vline(v), vcol(v), f->name, "expected a string, found %s",
			    a_type(isc_toml_type(v)));
			return -1;
		}
		if (strlen(s) != len || isc_rank_mode_parse(s, &m)) {
			add(c, vline(v), vcol(v), f->name,
			    "must be one of \"price\", \"work\", \"expected\", got \"%s\"",
			    show(s, len, vb, sizeof(vb)));
			return -1;
		}
		l->burst_rank = (int)m;
		l->burst_rank_set = 1;
		return 0;
	}
	case K_IDLIST:
		if (strcmp(f->name, "dataset_id_list") == 0)
			check_list(c, v, f->name, ISC_LAUNCH_MAX_LIST, K_ID, &l->dataset_ids);
		else if (strcmp(f->name, "burst_shape_priority_list") == 0)
			check_list(c, v, f->name, ISC_LAUNCH_MAX_LIST, K_SHAPE, &l->burst_shapes);
		else
			check_list(c, v, f->name, ISC_LAUNCH_MAX_ARTIFACTS, K_ID,
			           &l->input_artifact_ids);
		return 0;
	}
	return 0;
}

static const struct isc_toml_value *seen(const struct checker *c, const char *name)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strcmp(fields[i].name, name) == 0)
			return c->seen[i];
	return NULL;
}

int isc_launch_parse(const char *path, const char *text, size_t len, struct isc_launch **out,
                     struct isc_launch_problems *problems, struct isc_err *err)
{
	struct checker c = {problems, NULL, {NULL}, problems->len, MAX_PROBLEMS, 0, 0};
	struct isc_toml_doc *doc = NULL;
	struct isc_toml_error where;
	const struct isc_toml_value *root, *v;
	size_t before = problems->len;
	int mode_ok = 1, rc;

	*out = NULL;
	rc = isc_toml_parse_ex(text, len, &doc, &where, err);
	if (rc == ISC_ENOMEM)
		return rc;
	if (rc) {
		add(&c, where.line, where.col, "toml", "%s", where.msg);
		goto done;
	}
	c.l = calloc(1, sizeof(*c.l));
	if (!c.l) {
		isc_toml_doc_free(doc);
		return isc_err_set(err, ISC_ENOMEM, "%s: out of memory", path);
	}
	root = isc_toml_doc_root(doc);
	for (size_t i = 0; i < isc_toml_table_len(root); i++) {
		const char *key;
		size_t klen;
		const struct field *f = NULL;
		char kb[64];

		v = isc_toml_table_at(root, i, &key, &klen);
		for (size_t k = 0; k < NFIELDS; k++) {
			if (strlen(fields[k].name) == klen &&
			    memcmp(fields[k].name, key, klen) == 0) {
				f = &fields[k];
				c.seen[k] = v;
			}
		}
		if (!f) {
			const char *near = suggest(key, klen);
			show(key, klen, kb, sizeof(kb));
			if (near)
				add(&c, isc_toml_key_line(v), isc_toml_key_col(v),
				    klen ? kb : "\"\"", "unknown field; did you mean `%s`?", near);
			else
				add(&c, isc_toml_key_line(v), isc_toml_key_col(v),
				    klen ? kb : "\"\"", "unknown field");
			continue;
		}
		if (check_field(&c, f, v) && f->kind == K_MODE)
			mode_ok = 0;
	}

	for (size_t k = 0; k < NFIELDS; k++)
		if (fields[k].required && !c.seen[k])
			add(&c, 1, 1, fields[k].name, "required field is missing");

	/* Rules that tie fields to compute_mode; skipped when the mode itself is bad. */
	if (mode_ok) {
		const char *mode = isc_compute_mode_name(c.l->compute_mode);
		if ((v = seen(&c, "gpus")) && c.l->compute_mode == ISC_MODE_BURST &&
		    c.l->gpus > ISC_LAUNCH_MAX_BURST_GPUS)
			add(&c, vline(v), vcol(v), "gpus",
			    "burst experiments may use at most %d GPUs, got %d",
			    ISC_LAUNCH_MAX_BURST_GPUS, c.l->gpus);
		if ((v = seen(&c, "max_rapid_cycles")) && c.l->compute_mode != ISC_MODE_CYCLE)
			add(&c, isc_toml_key_line(v), isc_toml_key_col(v), "max_rapid_cycles",
			    "only allowed when compute_mode is \"cycle\" (it is \"%s\")", mode);
		if ((v = seen(&c, "burst_shape_priority_list")) &&
		    c.l->compute_mode != ISC_MODE_BURST)
			add(&c, isc_toml_key_line(v), isc_toml_key_col(v),
			    "burst_shape_priority_list",
			    "only allowed when compute_mode is \"burst\" (it is \"%s\")", mode);
		if ((v = seen(&c, "burst_rank")) && c.l->compute_mode != ISC_MODE_BURST)
			add(&c, isc_toml_key_line(v), isc_toml_key_col(v), "burst_rank",
			    "only allowed when compute_mode is \"burst\" (it is \"%s\")", mode);
	}

done:
	isc_toml_doc_free(doc);
	if (c.nomem) {
		isc_launch_free(c.l);
		return isc_err_set(err, ISC_ENOMEM, "%s: out of memory", path);
	}
	if (problems->len > before) {
		size_t n = problems->len - before;
		/* Sort only what this call added. */
		struct isc_launch_problems mine = {problems->items + before, n, n};
		isc_launch_problems_sort(&mine);
		if (c.truncated) {
			const struct isc_launch_problem *last = &problems->items[problems->len - 1];
			c.limit++;
			add(&c, last->line, last->col, "file",
			    "too many problems; stopped after %d", MAX_PROBLEMS);
			n = problems->len - before;
		}
		isc_launch_free(c.l);
		return isc_err_set(err, ISC_EINVALID, "%s: %zu problem%s in launch file", path, n,
		                   n == 1 ? "" : "s");
	}
	*out = c.l;
	isc_err_clear(err);
	return 0;
}

/* ---- files ---- */

int isc_launch_read_file(const char *path, size_t max_bytes, char **text, size_t *len,
                         struct isc_err *err)
{
	struct isc_buf b;
	struct stat st;
	char chunk[16384];
	int fd, rc = 0;

	*text = NULL;
	*len = 0;
	if (max_bytes == 0)
		max_bytes = ISC_LAUNCH_MAX_FILE_BYTES;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return isc_err_set(err, ISC_EIO, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = isc_err_set(err, ISC_EIO, "%s: cannot stat: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return isc_err_set(err, ISC_EINVALID, "%s: not a regular file", path);
	}
	if ((uintmax_t)st.st_size > max_bytes) {
		close(fd);
		return isc_err_set(err, ISC_EINVALID,
		                   "%s: file is %jd bytes, larger than the limit of %zu bytes",
		                   path, (intmax_t)st.st_size, max_bytes);
	}
	/* The cap is enforced while reading too: the file may grow after fstat. */
	isc_buf_init(&b, max_bytes);
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc =
			    isc_err_set(err, ISC_EIO, "%s: read failed: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		rc = isc_buf_append(&b, chunk, (size_t)n);
		if (rc == ISC_EINVALID)
			rc = isc_err_set(err, ISC_EINVALID,
			                 "%s: file is larger than the limit of %zu bytes", path,
			                 max_bytes);
		else if (rc)
			rc = isc_err_set(err, rc, "%s: out of memory", path);
		if (rc)
			break;
	}
	close(fd);
	if (rc) {
		isc_buf_cleanup(&b);
		return rc;
	}
	*len = b.len;
	*text = b.data ? isc_buf_detach(&b) : calloc(1, 1);
	if (!*text)
		return isc_err_set(err, ISC_ENOMEM, "%s: out of memory", path);
	return 0;
}

int isc_launch_load(const char *path, struct isc_launch **out, struct isc_launch_problems *problems,
                    struct isc_err *err)
{
	char *text;
	size_t len;
	int rc;

	*out = NULL;
	rc = isc_launch_read_file(path, 0, &text, &len, err);
	if (rc)
		return rc;
	rc = isc_launch_parse(path, text, len, out, problems, err);
	free(text);
	return rc;
}

/* ---- JSON ---- */

static json_t *list_json(const struct isc_strlist *l)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->len; i++) {
		if (json_array_append_new(a, json_string(l->items[i]))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

json_t *isc_launch_to_json(const struct isc_launch *l)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_object_set_new(o, "isc_project_id", json_string(l->project_id)) ||
	    json_object_set_new(o, "experiment_name", json_string(l->experiment_name)) ||
	    json_object_set_new(o, "gpus", json_integer(l->gpus)) ||
	    json_object_set_new(o, "command", json_string(l->command)) ||
	    json_object_set_new(o, "compute_mode",
	                        json_string(isc_compute_mode_name(l->compute_mode))) ||
	    json_object_set_new(o, "max_rapid_cycles",
	                        l->max_rapid_cycles ? json_integer(l->max_rapid_cycles)
	                                            : json_null()) ||
	    json_object_set_new(o, "dataset_id_list", list_json(&l->dataset_ids)) ||
	    json_object_set_new(o, "burst_shape_priority_list", list_json(&l->burst_shapes)) ||
	    json_object_set_new(o, "input_artifact_id_list", list_json(&l->input_artifact_ids)) ||
	    json_object_set_new(o, "image", l->image ? json_string(l->image) : json_null()) ||
	    (l->burst_rank_set && json_object_set_new(o, "burst_rank",
	                                              json_string(isc_rank_mode_name(
	                                                  (enum isc_rank_mode)l->burst_rank))))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int isc_launch_default_burst(char **text, size_t *len, struct isc_err *err)
{
	static const char line[] = "\ncompute_mode = \"burst\"\n";
	struct isc_toml_doc *doc = NULL;
	struct isc_err perr;
	int sets_mode = 1; /* unparsable: yes, so the file's own errors show */
	char *grown;

	if (isc_toml_parse(*text, *len, &doc, &perr) == 0)
		sets_mode = isc_toml_table_get(isc_toml_doc_root(doc), "compute_mode") != NULL;
	isc_toml_doc_free(doc);
	if (sets_mode)
		return 0;
	if (!(grown = realloc(*text, *len + sizeof(line))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	memcpy(grown + *len, line, sizeof(line));
	*text = grown;
	*len += sizeof(line) - 1;
	return 0;
}
