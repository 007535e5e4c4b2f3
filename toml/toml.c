/*
 * TOML 1.0.0 parser: a single pass of recursive descent over the bytes.
 *
 * The whole input is checked as UTF-8 first, so the parser proper may treat any
 * byte >= 0x80 as part of a valid character. Positions (line, column in code
 * points) are tracked as the cursor moves and stamped onto every node.
 *
 * Table rules (the subtle part of TOML) are enforced with flags on table nodes:
 *   T_DEFINED  made by a [header] (or [[header]] element): a second header is an error;
 *   T_IMPLICIT made as an intermediate part of a header path: a later header may define it;
 *   T_DOTTED   made by a dotted key: only dotted keys may add to it, headers may pass
 *              through it but never define it;
 *   T_INLINE   an inline table: frozen once written.
 * Arrays made by [[header]] carry A_TABLES; only those may be appended to by headers.
 */
#include "toml/toml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	T_DEFINED = 1 << 0,
	T_IMPLICIT = 1 << 1,
	T_DOTTED = 1 << 2,
	T_INLINE = 1 << 3,
	A_TABLES = 1 << 4,
};

struct isc_toml_entry {
	char *key; /* owned, NUL-terminated */
	size_t key_len;
	struct isc_toml_value *val; /* owned */
};

struct isc_toml_value {
	enum isc_toml_type type;
	unsigned flags;
	int line, col;
	int key_line, key_col;
	int depth; /* containers: nesting level, root = 0 */
	union {
		struct {
			char *ptr; /* owned, NUL-terminated */
			size_t len;
		} str;
		int64_t i;
		double f;
		int b;
		struct isc_toml_datetime dt;
		struct {
			struct isc_toml_value **items;
			size_t len, cap;
		} arr;
		struct {
			struct isc_toml_entry *ents;
			size_t len, cap;
			/* Open-addressing index of ents (entry number + 1, 0 = empty), built
			 * once a table grows past a few keys so big tables stay linear. */
			uint32_t *index;
			size_t index_cap;
		} tab;
	} u;
};

struct isc_toml_doc {
	struct isc_toml_value *root;
};

struct parser {
	const char *p, *end;
	int line, col;
	struct isc_toml_error *where;
	struct isc_err *err;
};

/* A key part as parsed: its text (owned until moved into a table) and position. */
struct key_part {
	char *s;
	size_t len;
	int line, col;
};

/* Bounds the key-part array on the stack of each (possibly nested) key-value. */
#define MAX_KEY_PARTS 64

/* ---- errors and cursor ---- */

static int fail_at(struct parser *ps, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(struct parser *ps, int line, int col, const char *fmt, ...)
{
	char msg[ISC_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ps->where) {
		ps->where->line = line;
		ps->where->col = col;
		snprintf(ps->where->msg, sizeof(ps->where->msg), "%s", msg);
	}
	return isc_err_set(ps->err, ISC_EINVALID, "%d:%d: %s", line, col, msg);
}

#define FAIL(ps, ...) fail_at((ps), (ps)->line, (ps)->col, __VA_ARGS__)

static int nomem(struct parser *ps)
{
	if (ps->where) {
		ps->where->line = ps->line;
		ps->where->col = ps->col;
		snprintf(ps->where->msg, sizeof(ps->where->msg), "out of memory");
	}
	return isc_err_set(ps->err, ISC_ENOMEM, "%d:%d: out of memory", ps->line, ps->col);
}

static int at_end(const struct parser *ps)
{
	return ps->p >= ps->end;
}

static int peek(const struct parser *ps)
{
	return ps->p < ps->end ? (unsigned char)*ps->p : -1;
}

static int peek_at(const struct parser *ps, size_t off)
{
	return (size_t)(ps->end - ps->p) > off ? (unsigned char)ps->p[off] : -1;
}

static void advance(struct parser *ps)
{
	unsigned char c = (unsigned char)*ps->p++;

	if (c == '\n') {
		ps->line++;
		ps->col = 1;
	} else if ((c & 0xC0) != 0x80) {
		ps->col++;
	}
}

static void advance_n(struct parser *ps, size_t n)
{
	while (n--)
		advance(ps);
}

/* Describes the byte at the cursor for messages. */
static const char *describe(const struct parser *ps, char *buf, size_t cap)
{
	int c = peek(ps);

	if (c < 0)
		snprintf(buf, cap, "end of file");
	else if (c == '\n')
		snprintf(buf, cap, "newline");
	else if (c == '\r')
		snprintf(buf, cap, "carriage return");
	else if (c < 0x20 || c == 0x7f)
		snprintf(buf, cap, "control character U+%04X", c);
	else if (c >= 0x80)
		snprintf(buf, cap, "non-ASCII character");
	else
		snprintf(buf, cap, "'%c'", c);
	return buf;
}

static int unexpected(struct parser *ps, const char *wanted)
{
	char d[48];
	return FAIL(ps, "expected %s, found %s", wanted, describe(ps, d, sizeof(d)));
}

/* ---- UTF-8 ---- */

/* Checks that all of text is well-formed UTF-8 (no overlongs, surrogates or values
 * past U+10FFFF); on failure reports the position of the bad sequence. */
static int check_utf8(struct parser *ps)
{
	const unsigned char *s = (const unsigned char *)ps->p, *e = (const unsigned char *)ps->end;
	int line = 1, col = 1;

	while (s < e) {
		unsigned c = *s;
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			if (c == '\n') {
				line++;
				col = 0;
			}
			s++;
			col++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF) {
			n = 1;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			n = 2;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return fail_at(ps, line, col, "invalid UTF-8 byte 0x%02X", c);
		}
		if ((size_t)(e - s) <= n)
			return fail_at(ps, line, col, "truncated UTF-8 sequence");
		for (size_t i = 1; i <= n; i++) {
			if ((s[i] & 0xC0) != 0x80)
				return fail_at(ps, line, col, "invalid UTF-8 sequence");
			cp = (cp << 6) | (s[i] & 0x3F);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000))
			return fail_at(ps, line, col, "overlong UTF-8 sequence");
		if (cp >= 0xD800 && cp <= 0xDFFF)
			return fail_at(ps, line, col, "UTF-8 encoded surrogate U+%04X", cp);
		if (cp > 0x10FFFF)
			return fail_at(ps, line, col, "UTF-8 value past U+10FFFF");
		s += n + 1;
		col++;
	}
	return 0;
}

static int put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* ---- nodes ---- */

static struct isc_toml_value *node_new(enum isc_toml_type type, int line, int col)
{
	struct isc_toml_value *v = calloc(1, sizeof(*v));

	if (v) {
		v->type = type;
		v->line = line;
		v->col = col;
	}
	return v;
}

static void node_free(struct isc_toml_value *v)
{
	if (!v)
		return;
	switch (v->type) {
	case ISC_TOML_STRING:
		free(v->u.str.ptr);
		break;
	case ISC_TOML_ARRAY:
		for (size_t i = 0; i < v->u.arr.len; i++)
			node_free(v->u.arr.items[i]);
		free(v->u.arr.items);
		break;
	case ISC_TOML_TABLE:
		for (size_t i = 0; i < v->u.tab.len; i++) {
			free(v->u.tab.ents[i].key);
			node_free(v->u.tab.ents[i].val);
		}
		free(v->u.tab.ents);
		free(v->u.tab.index);
		break;
	default:
		break;
	}
	free(v);
}

static uint32_t key_hash(const char *k, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)k[i];
		h *= 16777619u;
	}
	return h;
}

static void index_put(struct isc_toml_value *t, size_t ent)
{
	size_t mask = t->u.tab.index_cap - 1;
	const struct isc_toml_entry *e = &t->u.tab.ents[ent];
	size_t i = key_hash(e->key, e->key_len) & mask;

	while (t->u.tab.index[i])
		i = (i + 1) & mask;
	t->u.tab.index[i] = (uint32_t)(ent + 1);
}

/* Keeps the index at most half full; returns 0 or -1 on allocation failure. */
static int index_grow(struct isc_toml_value *t)
{
	size_t want = t->u.tab.index_cap ? t->u.tab.index_cap * 2 : 32;
	uint32_t *idx = calloc(want, sizeof(*idx));

	if (!idx)
		return -1;
	free(t->u.tab.index);
	t->u.tab.index = idx;
	t->u.tab.index_cap = want;
	for (size_t i = 0; i < t->u.tab.len; i++)
		index_put(t, i);
	return 0;
}

static struct isc_toml_value *table_find(const struct isc_toml_value *t, const char *key,
                                         size_t len)
{
	if (t->u.tab.index) {
		size_t mask = t->u.tab.index_cap - 1;
		size_t i = key_hash(key, len) & mask;

		while (t->u.tab.index[i]) {
			const struct isc_toml_entry *e = &t->u.tab.ents[t->u.tab.index[i] - 1];
			if (e->key_len == len && memcmp(e->key, key, len) == 0)
				return e->val;
			i = (i + 1) & mask;
		}
		return NULL;
	}
	for (size_t i = 0; i < t->u.tab.len; i++) {
		const struct isc_toml_entry *e = &t->u.tab.ents[i];
		if (e->key_len == len && memcmp(e->key, key, len) == 0)
			return e->val;
	}
	return NULL;
}

/* Adds key -> v to t; takes ownership of kp->s and v on success only. */
static int table_add(struct isc_toml_value *t, struct key_part *kp, struct isc_toml_value *v)
{
	if (t->u.tab.len == t->u.tab.cap) {
		size_t ncap = t->u.tab.cap ? t->u.tab.cap * 2 : 4;
		struct isc_toml_entry *n;

		if (ncap > UINT32_MAX / 2)
			return -1;
		n = realloc(t->u.tab.ents, ncap * sizeof(*n));
		if (!n)
			return -1;
		t->u.tab.ents = n;
		t->u.tab.cap = ncap;
	}
	t->u.tab.ents[t->u.tab.len].key = kp->s;
	t->u.tab.ents[t->u.tab.len].key_len = kp->len;
	t->u.tab.ents[t->u.tab.len].val = v;
	t->u.tab.len++;
	v->key_line = kp->line;
	v->key_col = kp->col;
	kp->s = NULL;
	if (t->u.tab.index || t->u.tab.len > 8) {
		if (t->u.tab.len * 2 > t->u.tab.index_cap) {
			if (index_grow(t) < 0) {
				/* Undo so the caller still owns both. */
				t->u.tab.len--;
				kp->s = t->u.tab.ents[t->u.tab.len].key;
				return -1;
			}
		} else {
			index_put(t, t->u.tab.len - 1);
		}
	}
	return 0;
}

static int array_push(struct isc_toml_value *a, struct isc_toml_value *v)
{
	if (a->u.arr.len == a->u.arr.cap) {
		size_t ncap = a->u.arr.cap ? a->u.arr.cap * 2 : 4;
		struct isc_toml_value **n = realloc(a->u.arr.items, ncap * sizeof(*n));

		if (!n)
			return -1;
		a->u.arr.items = n;
		a->u.arr.cap = ncap;
	}
	a->u.arr.items[a->u.arr.len++] = v;
	return 0;
}

/* Makes an empty container one level below parent_depth, enforcing the depth bound. */
static int container_new(struct parser *ps, enum isc_toml_type type, int parent_depth, int line,
                         int col, struct isc_toml_value **out)
{
	struct isc_toml_value *v;

	if (parent_depth + 1 > ISC_TOML_MAX_DEPTH)
		return fail_at(ps, line, col, "nesting deeper than %d levels", ISC_TOML_MAX_DEPTH);
	v = node_new(type, line, col);
	if (!v)
		return nomem(ps);
	v->depth = parent_depth + 1;
	*out = v;
	return 0;
}

/* ---- whitespace, comments, newlines ---- */

static void skip_ws(struct parser *ps)
{
	while (!at_end(ps) && (*ps->p == ' ' || *ps->p == '\t'))
		advance(ps);
}

/* At '#': consumes the comment up to (not including) the newline. */
static int skip_comment(struct parser *ps)
{
	advance(ps);
	while (!at_end(ps)) {
		unsigned char c = (unsigned char)*ps->p;
		if (c == '\n' || (c == '\r' && peek_at(ps, 1) == '\n'))
			break;
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			char d[48];
			return FAIL(ps, "%s in comment", describe(ps, d, sizeof(d)));
		}
		advance(ps);
	}
	return 0;
}

/* Consumes LF or CRLF; returns 1 if one was there. */
static int eat_newline(struct parser *ps)
{
	if (peek(ps) == '\n') {
		advance(ps);
		return 1;
	}
	if (peek(ps) == '\r' && peek_at(ps, 1) == '\n') {
		advance_n(ps, 2);
		return 1;
	}
	return 0;
}

/* Inside arrays: whitespace, newlines and comments in any mix. */
static int skip_ws_nl_comments(struct parser *ps)
{
	for (;;) {
		skip_ws(ps);
		if (peek(ps) == '#') {
			int rc = skip_comment(ps);
			if (rc)
				return rc;
		}
		if (!eat_newline(ps))
			return 0;
	}
}

/* After an expression: optional whitespace and comment, then a newline or the end. */
static int end_of_line(struct parser *ps)
{
	skip_ws(ps);
	if (peek(ps) == '#') {
		int rc = skip_comment(ps);
		if (rc)
			return rc;
	}
	if (at_end(ps) || eat_newline(ps))
		return 0;
	return unexpected(ps, "newline or end of file");
}

/* ---- strings ---- */

struct sbuf {
	char *d;
	size_t len, cap;
};

static int sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap : 32;
		char *nd;

		while (ncap < b->len + n + 1)
			ncap *= 2;
		nd = realloc(b->d, ncap);
		if (!nd)
			return -1;
		b->d = nd;
		b->cap = ncap;
	}
	memcpy(b->d + b->len, s, n);
	b->len += n;
	b->d[b->len] = '\0';
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* At a backslash in a basic string: appends the escaped character. */
static int parse_escape(struct parser *ps, struct sbuf *b)
{
	int line = ps->line, col = ps->col;
	int c = peek_at(ps, 1);
	char ch, u8[4];
	int n, digits;
	uint32_t cp = 0;

	switch (c) {
	case 'b':
		ch = '\b';
		break;
	case 't':
		ch = '\t';
		break;
	case 'n':
		ch = '\n';
		break;
	case 'f':
		ch = '\f';
		break;
	case 'r':
		ch = '\r';
		break;
	case '"':
		ch = '"';
		break;
	case '\\':
		ch = '\\';
		break;
	case 'u':
	case 'U':
		digits = c == 'u' ? 4 : 8;
		for (int i = 0; i < digits; i++) {
			int h = hexval(peek_at(ps, 2 + (size_t)i));
			if (h < 0)
				return fail_at(ps, line, col, "\\%c escape needs %d hex digits", c,
				               digits);
			cp = (cp << 4) | (uint32_t)h;
		}
		if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
			return fail_at(ps, line, col, "\\%c%0*X is not a Unicode scalar value", c,
			               digits, cp);
		advance_n(ps, 2 + (size_t)digits);
		n = put_utf8(u8, cp);
		return sb_put(b, u8, (size_t)n) ? nomem(ps) : 0;
	default:
		if (c < 0)
			return fail_at(ps, line, col, "unfinished escape at end of file");
		if (c >= 0x20 && c < 0x7f)
			return fail_at(ps, line, col, "invalid escape \\%c", c);
		return fail_at(ps, line, col, "invalid escape");
	}
	advance_n(ps, 2);
	return sb_put(b, &ch, 1) ? nomem(ps) : 0;
}

/* A character that may not appear raw in any string (tab is fine). */
static int is_bad_control(unsigned char c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* Appends one raw UTF-8 character at the cursor (the input is known valid). */
static int put_raw_char(struct parser *ps, struct sbuf *b)
{
	unsigned char c = (unsigned char)*ps->p;
	size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;

	if (sb_put(b, ps->p, n))
		return nomem(ps);
	advance_n(ps, n);
	return 0;
}

/* Parses any of the four string forms at the cursor (a quote). multiline_ok is false
 * for keys. The result is NUL-terminated and owned by the caller. */
static int parse_string(struct parser *ps, int multiline_ok, char **out, size_t *out_len)
{
	int line = ps->line, col = ps->col;
	char q = *ps->p;
	int multi = peek_at(ps, 1) == q && peek_at(ps, 2) == q;
	struct sbuf b = {0};
	int rc = 0;

	if (multi && !multiline_ok)
		return FAIL(ps, "multi-line strings cannot be keys");
	if (sb_put(&b, "", 0))
		return nomem(ps);
	if (!multi) {
		advance(ps);
		for (;;) {
			int c = peek(ps);
			if (c < 0 || c == '\n' || (c == '\r' && peek_at(ps, 1) == '\n')) {
				rc = fail_at(ps, line, col, "unterminated string");
				goto out;
			}
			if (c == q) {
				advance(ps);
				break;
			}
			if (is_bad_control((unsigned char)c)) {
				char d[48];
				rc = FAIL(ps, "%s in string", describe(ps, d, sizeof(d)));
				goto out;
			}
			if (c == '\\' && q == '"')
				rc = parse_escape(ps, &b);
			else
				rc = put_raw_char(ps, &b);
			if (rc)
				goto out;
		}
		goto out;
	}

	advance_n(ps, 3);
	/* A newline right after the opening delimiter is trimmed. */
	eat_newline(ps);
	for (;;) {
		int c = peek(ps);
		if (c < 0) {
			rc = fail_at(ps, line, col, "unterminated multi-line string");
			goto out;
		}
		if (c == q) {
			size_t run = 0;
			while (peek_at(ps, run) == q)
				run++;
			if (run < 3) {
				if (sb_put(&b, ps->p, run)) {
					rc = nomem(ps);
					goto out;
				}
				advance_n(ps, run);
				continue;
			}
			if (run > 5) {
				advance_n(ps, 5);
				rc = FAIL(ps, "too many quotes at the end of a multi-line string");
				goto out;
			}
			/* Up to two quotes right before the delimiter belong to the content. */
			if (sb_put(&b, ps->p, run - 3)) {
				rc = nomem(ps);
				goto out;
			}
			advance_n(ps, run);
			break;
		}
		if (c == '\n' || (c == '\r' && peek_at(ps, 1) == '\n')) {
			/* CRLF becomes LF (the spec lets parsers normalize newlines), so a
			 * file edited on Windows means the same as one edited elsewhere. */
			if (sb_put(&b, "\n", 1)) {
				rc = nomem(ps);
				goto out;
			}
			eat_newline(ps);
			continue;
		}
		if (c == '\\' && q == '"') {
			/* Line-ending backslash: trims whitespace and newlines up to the next
			 * visible character. Whitespace after it must lead to a newline. */
			size_t k = 1;
			while (peek_at(ps, k) == ' ' || peek_at(ps, k) == '\t')
				k++;
			if (peek_at(ps, k) == '\n' ||
			    (peek_at(ps, k) == '\r' && peek_at(ps, k + 1) == '\n')) {
				advance_n(ps, k);
				for (;;) {
					skip_ws(ps);
					if (!eat_newline(ps))
						break;
				}
				continue;
			}
			rc = parse_escape(ps, &b);
			if (rc)
				goto out;
			continue;
		}
		if (is_bad_control((unsigned char)c)) {
			char d[48];
			rc = FAIL(ps, "%s in string", describe(ps, d, sizeof(d)));
			goto out;
		}
		rc = put_raw_char(ps, &b);
		if (rc)
			goto out;
	}
out:
	if (rc) {
		free(b.d);
		return rc;
	}
	*out = b.d;
	*out_len = b.len;
	return 0;
}

/* ---- keys ---- */

static int is_bare_key_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

static void parts_free(struct key_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(parts[i].s);
}

/* Parses a (possibly dotted) key into parts; stops before the whitespace after it. */
static int parse_key(struct parser *ps, struct key_part *parts, size_t *nparts)
{
	size_t n = 0;
	int rc;

	for (;;) {
		struct key_part *kp;
		int c = peek(ps);

		if (n == MAX_KEY_PARTS) {
			rc = FAIL(ps, "key has more than %d parts", MAX_KEY_PARTS);
			goto fail;
		}
		kp = &parts[n];
		kp->line = ps->line;
		kp->col = ps->col;
		kp->s = NULL;
		if (c == '"' || c == '\'') {
			rc = parse_string(ps, 0, &kp->s, &kp->len);
			if (rc)
				goto fail;
		} else if (c >= 0 && is_bare_key_char(c)) {
			const char *start = ps->p;
			while (!at_end(ps) && is_bare_key_char((unsigned char)*ps->p))
				advance(ps);
			kp->len = (size_t)(ps->p - start);
			kp->s = malloc(kp->len + 1);
			if (!kp->s) {
				rc = nomem(ps);
				goto fail;
			}
			memcpy(kp->s, start, kp->len);
			kp->s[kp->len] = '\0';
		} else {
			rc = unexpected(ps, "a key");
			goto fail;
		}
		n++;
		/* Whitespace around dots is allowed. */
		{
			const char *save_p = ps->p;
			int save_line = ps->line, save_col = ps->col;
			skip_ws(ps);
			if (peek(ps) != '.') {
				ps->p = save_p;
				ps->line = save_line;
				ps->col = save_col;
				break;
			}
			advance(ps);
			skip_ws(ps);
		}
	}
	*nparts = n;
	return 0;
fail:
	parts_free(parts, n);
	return rc;
}

/* Quotes a key for messages (bounded; control characters escaped). */
static const char *key_show(const struct key_part *kp, char *buf, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < kp->len && o + 8 < cap; i++) {
		unsigned char c = (unsigned char)kp->s[i];
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", c);
		else
			buf[o++] = (char)c;
	}
	if (o + 8 >= cap && o >= 3) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

/* ---- numbers and dates ---- */

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int digits_n(const char *s, size_t n, int *out)
{
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int days_in_month(int y, int m)
{
	static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : d[m - 1];
}

static size_t avail(const struct parser *ps)
{
	return (size_t)(ps->end - ps->p);
}

/* Parses HH:MM:SS[.frac] at the cursor into dt. */
static int parse_time(struct parser *ps, struct isc_toml_datetime *dt)
{
	int line = ps->line, col = ps->col;
	const char *s = ps->p;

	if (avail(ps) < 8 || digits_n(s, 2, &dt->hour) || s[2] != ':' ||
	    digits_n(s + 3, 2, &dt->minute) || s[5] != ':' || digits_n(s + 6, 2, &dt->second))
		return FAIL(ps, "invalid time (expected HH:MM:SS)");
	if (dt->hour > 23 || dt->minute > 59 || dt->second > 59)
		return fail_at(ps, line, col, "time %.8s out of range", s);
	advance_n(ps, 8);
	if (peek(ps) == '.') {
		int nd = 0, ns = 0;
		advance(ps);
		if (!is_digit(peek(ps)))
			return FAIL(ps, "expected digits after the decimal point of a time");
		while (is_digit(peek(ps))) {
			if (nd < 9) {
				ns = ns * 10 + (*ps->p - '0');
				nd++;
			}
			advance(ps);
		}
		dt->frac_digits = nd;
		for (int i = nd; i < 9; i++)
			ns *= 10;
		dt->nanosecond = ns;
	}
	return 0;
}

/* At a value starting with YYYY-: a date, local date-time or offset date-time. */
static int parse_date_value(struct parser *ps, struct isc_toml_value *v)
{
	struct isc_toml_datetime *dt = &v->u.dt;
	const char *s = ps->p;
	int c;

	if (avail(ps) < 10 || digits_n(s, 4, &dt->year) || s[4] != '-' ||
	    digits_n(s + 5, 2, &dt->month) || s[7] != '-' || digits_n(s + 8, 2, &dt->day))
		return FAIL(ps, "invalid date (expected YYYY-MM-DD)");
	if (dt->month < 1 || dt->month > 12 || dt->day < 1 ||
	    dt->day > days_in_month(dt->year, dt->month))
		return FAIL(ps, "date %.10s out of range", s);
	advance_n(ps, 10);
	v->type = ISC_TOML_DATE_LOCAL;
	c = peek(ps);
	/* A space separates date and time only when a time follows. */
	if (!(c == 'T' || c == 't' || (c == ' ' && is_digit(peek_at(ps, 1)))))
		return 0;
	advance(ps);
	if (parse_time(ps, dt))
		return ISC_EINVALID;
	v->type = ISC_TOML_DATETIME_LOCAL;
	c = peek(ps);
	if (c == 'Z' || c == 'z') {
		advance(ps);
		v->type = ISC_TOML_DATETIME;
		dt->offset_z = 1;
	} else if (c == '+' || c == '-') {
		int oh, om;
		s = ps->p + 1;
		if (avail(ps) < 6 || digits_n(s, 2, &oh) || s[2] != ':' || digits_n(s + 3, 2, &om))
			return FAIL(ps, "invalid time offset (expected +HH:MM)");
		if (oh > 23 || om > 59)
			return FAIL(ps, "time offset out of range");
		dt->offset_minutes = (c == '-' ? -1 : 1) * (oh * 60 + om);
		advance_n(ps, 6);
		v->type = ISC_TOML_DATETIME;
	}
	return 0;
}

/* Copies the digits of tok (underscores removed) into out, checking that each
 * underscore sits between two digits of the given base. */
static int strip_underscores(struct parser *ps, const char *tok, size_t n, int hex, char *out,
                             size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)tok[i];
		if (c == '_') {
			int before = i > 0 && (hex ? hexval((unsigned char)tok[i - 1]) >= 0
			                           : is_digit((unsigned char)tok[i - 1]));
			int after = i + 1 < n && (hex ? hexval((unsigned char)tok[i + 1]) >= 0
			                              : is_digit((unsigned char)tok[i + 1]));
			if (!before || !after)
				return FAIL(ps, "underscores in numbers must sit between digits");
			continue;
		}
		if (o + 1 >= cap)
			return FAIL(ps, "number too long");
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

static int is_num_char(int c)
{
	return is_bare_key_char(c) || c == '.' || c == '+';
}

/* Parses an integer or float at the cursor (sign, digit, 'i' or 'n'). */
static int parse_number(struct parser *ps, struct isc_toml_value *v)
{
	const char *tok = ps->p;
	size_t n = 0, i = 0;
	char buf[128];
	int neg = 0, has_sign = 0;

	while (n < avail(ps) && is_num_char((unsigned char)tok[n])) {
		/* A sign is part of the number only at the start or after an exponent mark. */
		if ((tok[n] == '+' || tok[n] == '-') && n > 0 && tok[n - 1] != 'e' &&
		    tok[n - 1] != 'E')
			break;
		n++;
	}
	if (n == 0)
		return unexpected(ps, "a value");
	if (tok[0] == '+' || tok[0] == '-') {
		has_sign = 1;
		neg = tok[0] == '-';
		i = 1;
	}
	/* inf and nan */
	if (n - i == 3 && (memcmp(tok + i, "inf", 3) == 0 || memcmp(tok + i, "nan", 3) == 0)) {
		v->type = ISC_TOML_FLOAT;
		if (tok[i] == 'i')
			v->u.f = neg ? -INFINITY : INFINITY;
		else
			v->u.f = neg ? -NAN : NAN;
		advance_n(ps, n);
		return 0;
	}
	if (i >= n || !is_digit((unsigned char)tok[i]))
		return FAIL(ps, "invalid value");
	/* Prefixed integers: 0x, 0o, 0b; no sign allowed. */
	if (tok[i] == '0' && i + 1 < n &&
	    (tok[i + 1] == 'x' || tok[i + 1] == 'o' || tok[i + 1] == 'b')) {
		int base = tok[i + 1] == 'x' ? 16 : tok[i + 1] == 'o' ? 8 : 2;
		uint64_t acc = 0;
		size_t j;

		if (has_sign)
			return FAIL(ps,
			            "hexadecimal, octal and binary integers cannot have a sign");
		if (i + 2 >= n || tok[i + 2] == '_')
			return FAIL(ps, "expected digits after 0%c", tok[i + 1]);
		if (strip_underscores(ps, tok + i + 2, n - i - 2, base == 16, buf, sizeof(buf)))
			return ISC_EINVALID;
		for (j = 0; buf[j]; j++) {
			int d = hexval((unsigned char)buf[j]);
			if (d < 0 || d >= base)
				return FAIL(ps, "invalid digit '%c' in base-%d integer", buf[j],
				            base);
			if (acc > ((uint64_t)INT64_MAX - (uint64_t)d) / (uint64_t)base)
				return FAIL(ps, "integer out of range (64-bit signed)");
			acc = acc * (uint64_t)base + (uint64_t)d;
		}
		v->type = ISC_TOML_INTEGER;
		v->u.i = (int64_t)acc;
		advance_n(ps, n);
		return 0;
	}
	{
		/* Decimal integer or float: int-part [. digits] [e [sign] digits]. */
		size_t j = i, int_end, frac_start = 0, frac_end = 0, exp_start = 0;
		int is_float = 0;

		while (j < n && (is_digit((unsigned char)tok[j]) || tok[j] == '_'))
			j++;
		int_end = j;
		if (j < n && tok[j] == '.') {
			is_float = 1;
			frac_start = ++j;
			while (j < n && (is_digit((unsigned char)tok[j]) || tok[j] == '_'))
				j++;
			frac_end = j;
			if (frac_end == frac_start)
				return FAIL(ps, "expected digits after the decimal point");
		}
		if (j < n && (tok[j] == 'e' || tok[j] == 'E')) {
			is_float = 1;
			exp_start = ++j;
			if (j < n && (tok[j] == '+' || tok[j] == '-'))
				j++;
			if (j >= n || !is_digit((unsigned char)tok[j]))
				return FAIL(ps, "expected digits in the exponent");
			while (j < n && (is_digit((unsigned char)tok[j]) || tok[j] == '_'))
				j++;
		}
		if (j != n)
			return FAIL(ps, "invalid number");
		/* Underscore checks, part by part (an underscore may not touch '.', 'e'). */
		if (strip_underscores(ps, tok + i, int_end - i, 0, buf, sizeof(buf)))
			return ISC_EINVALID;
		if (buf[0] == '0' && buf[1] != '\0')
			return FAIL(ps, "leading zeros are not allowed");
		if (is_float) {
			char num[160];
			size_t o = 0;
			double d;
			char *endp;

			if (frac_start &&
			    strip_underscores(ps, tok + frac_start, frac_end - frac_start, 0, buf,
			                      sizeof(buf)))
				return ISC_EINVALID;
			if (exp_start) {
				size_t es =
				    exp_start + (tok[exp_start] == '+' || tok[exp_start] == '-');
				if (strip_underscores(ps, tok + es, n - es, 0, buf, sizeof(buf)))
					return ISC_EINVALID;
			}
			for (size_t k = 0; k < n && o + 1 < sizeof(num); k++)
				if (tok[k] != '_')
					num[o++] = tok[k];
			if (o + 1 >= sizeof(num))
				return FAIL(ps, "number too long");
			num[o] = '\0';
			errno = 0;
			d = strtod(num, &endp);
			if (*endp != '\0')
				return FAIL(ps, "invalid float");
			v->type = ISC_TOML_FLOAT;
			v->u.f = d;
		} else {
			uint64_t acc = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
			for (size_t k = 0; buf[k]; k++) {
				uint64_t d = (uint64_t)(buf[k] - '0');
				if (acc > (lim - d) / 10)
					return FAIL(ps, "integer out of range (64-bit signed)");
				acc = acc * 10 + d;
			}
			v->type = ISC_TOML_INTEGER;
			v->u.i = neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc)
			             : (int64_t)acc;
		}
		advance_n(ps, n);
		return 0;
	}
}

/* ---- values ---- */

static int parse_value(struct parser *ps, int parent_depth, struct isc_toml_value **out);
static int parse_inline_table(struct parser *ps, int parent_depth, struct isc_toml_value **out);

static int parse_array(struct parser *ps, int parent_depth, struct isc_toml_value **out)
{
	struct isc_toml_value *a;
	int rc = container_new(ps, ISC_TOML_ARRAY, parent_depth, ps->line, ps->col, &a);

	if (rc)
		return rc;
	advance(ps);
	for (;;) {
		struct isc_toml_value *item;

		if ((rc = skip_ws_nl_comments(ps)))
			goto fail;
		if (peek(ps) == ']')
			break;
		if ((rc = parse_value(ps, a->depth, &item)))
			goto fail;
		if (array_push(a, item)) {
			node_free(item);
			rc = nomem(ps);
			goto fail;
		}
		if ((rc = skip_ws_nl_comments(ps)))
			goto fail;
		if (peek(ps) == ',') {
			advance(ps);
			continue;
		}
		if (peek(ps) == ']')
			break;
		rc = unexpected(ps, "',' or ']' in array");
		goto fail;
	}
	advance(ps);
	*out = a;
	return 0;
fail:
	node_free(a);
	return rc;
}

static int parse_value(struct parser *ps, int parent_depth, struct isc_toml_value **out)
{
	struct isc_toml_value *v;
	int c = peek(ps), rc;

	if (c == '[')
		return parse_array(ps, parent_depth, out);
	if (c == '{')
		return parse_inline_table(ps, parent_depth, out);
	v = node_new(ISC_TOML_BOOL, ps->line, ps->col);
	if (!v)
		return nomem(ps);
	if (c == '"' || c == '\'') {
		v->type = ISC_TOML_STRING;
		rc = parse_string(ps, 1, &v->u.str.ptr, &v->u.str.len);
	} else if (avail(ps) >= 4 && memcmp(ps->p, "true", 4) == 0 &&
	           !is_bare_key_char(peek_at(ps, 4))) {
		v->u.b = 1;
		advance_n(ps, 4);
		rc = 0;
	} else if (avail(ps) >= 5 && memcmp(ps->p, "false", 5) == 0 &&
	           !is_bare_key_char(peek_at(ps, 5))) {
		v->u.b = 0;
		advance_n(ps, 5);
		rc = 0;
	} else if (avail(ps) >= 5 && is_digit(c) && is_digit(peek_at(ps, 1)) &&
	           is_digit(peek_at(ps, 2)) && is_digit(peek_at(ps, 3)) && peek_at(ps, 4) == '-') {
		rc = parse_date_value(ps, v);
	} else if (avail(ps) >= 3 && is_digit(c) && is_digit(peek_at(ps, 1)) &&
	           peek_at(ps, 2) == ':') {
		v->type = ISC_TOML_TIME_LOCAL;
		rc = parse_time(ps, &v->u.dt);
	} else if (c >= 0 && (is_digit(c) || c == '+' || c == '-' || c == 'i' || c == 'n')) {
		rc = parse_number(ps, v);
	} else {
		rc = unexpected(ps, "a value");
	}
	if (rc) {
		v->type = ISC_TOML_BOOL; /* nothing owned was attached on failure */
		node_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

/*
 * Walks the dotted part of a key-value key (all parts but the last) from t, making
 * T_DOTTED tables as needed. Only tables made by dotted keys in this same scope may
 * be entered; tables made by headers, inline tables and arrays may not.
 */
static int walk_dotted(struct parser *ps, struct isc_toml_value *t, struct key_part *parts,
                       size_t nparts, struct isc_toml_value **out)
{
	char kb[96];

	for (size_t i = 0; i + 1 < nparts; i++) {
		struct isc_toml_value *next = table_find(t, parts[i].s, parts[i].len);
		if (!next) {
			int rc = container_new(ps, ISC_TOML_TABLE, t->depth, parts[i].line,
			                       parts[i].col, &next);
			if (rc)
				return rc;
			next->flags = T_DOTTED;
			if (table_add(t, &parts[i], next)) {
				node_free(next);
				return nomem(ps);
			}
		} else if (next->type != ISC_TOML_TABLE || !(next->flags & T_DOTTED)) {
			return fail_at(ps, parts[i].line, parts[i].col,
			               "key `%s` is already defined%s",
			               key_show(&parts[i], kb, sizeof(kb)),
			               next->type == ISC_TOML_TABLE ? " as a table" : "");
		}
		t = next;
	}
	*out = t;
	return 0;
}

/* Parses `key = value` at the cursor into table t. */
static int parse_keyval(struct parser *ps, struct isc_toml_value *t)
{
	struct key_part parts[MAX_KEY_PARTS];
	size_t nparts = 0;
	struct isc_toml_value *target = NULL, *v = NULL;
	struct key_part *last;
	char kb[96];
	int rc;

	if ((rc = parse_key(ps, parts, &nparts)))
		return rc;
	skip_ws(ps);
	if (peek(ps) != '=') {
		rc = unexpected(ps, "'=' after a key");
		goto out;
	}
	advance(ps);
	skip_ws(ps);
	if ((rc = walk_dotted(ps, t, parts, nparts, &target)))
		goto out;
	last = &parts[nparts - 1];
	if (table_find(target, last->s, last->len)) {
		rc = fail_at(ps, last->line, last->col, "duplicate key `%s`",
		             key_show(last, kb, sizeof(kb)));
		goto out;
	}
	if ((rc = parse_value(ps, target->depth, &v)))
		goto out;
	if (table_add(target, last, v)) {
		node_free(v);
		rc = nomem(ps);
	}
out:
	parts_free(parts, nparts);
	return rc;
}

static int parse_inline_table(struct parser *ps, int parent_depth, struct isc_toml_value **out)
{
	struct isc_toml_value *t;
	int rc = container_new(ps, ISC_TOML_TABLE, parent_depth, ps->line, ps->col, &t);

	if (rc)
		return rc;
	advance(ps);
	skip_ws(ps);
	if (peek(ps) == '}') {
		advance(ps);
		goto done;
	}
	for (;;) {
		skip_ws(ps);
		if ((rc = parse_keyval(ps, t)))
			goto fail;
		skip_ws(ps);
		if (peek(ps) == ',') {
			advance(ps);
			skip_ws(ps);
			if (peek(ps) == '}') {
				rc = FAIL(ps, "trailing comma in inline table");
				goto fail;
			}
			continue;
		}
		if (peek(ps) == '}') {
			advance(ps);
			break;
		}
		rc = unexpected(ps, "',' or '}' in inline table (inline tables are one line)");
		goto fail;
	}
done:
	t->flags |= T_INLINE;
	*out = t;
	return 0;
fail:
	node_free(t);
	return rc;
}

/* ---- table headers ---- */

/* Parses [a.b.c] or [[a.b.c]] at the cursor and returns the table that follows it. */
static int parse_header(struct parser *ps, struct isc_toml_value *root, struct isc_toml_value **cur)
{
	struct key_part parts[MAX_KEY_PARTS];
	size_t nparts = 0;
	int line = ps->line, col = ps->col;
	int aot = peek_at(ps, 1) == '[';
	struct isc_toml_value *t = root, *next;
	char kb[96];
	int rc;

	advance_n(ps, aot ? 2 : 1);
	skip_ws(ps);
	if ((rc = parse_key(ps, parts, &nparts)))
		return rc;
	skip_ws(ps);
	if (peek(ps) != ']' || (aot && peek_at(ps, 1) != ']')) {
		rc = unexpected(ps, aot ? "']]' to close the array of tables header"
		                        : "']' to close the table header");
		goto out;
	}
	advance_n(ps, aot ? 2 : 1);

	for (size_t i = 0; i + 1 < nparts; i++) {
		next = table_find(t, parts[i].s, parts[i].len);
		if (!next) {
			if ((rc = container_new(ps, ISC_TOML_TABLE, t->depth, parts[i].line,
			                        parts[i].col, &next)))
				goto out;
			next->flags = T_IMPLICIT;
			if (table_add(t, &parts[i], next)) {
				node_free(next);
				rc = nomem(ps);
				goto out;
			}
		} else if (next->type == ISC_TOML_ARRAY && (next->flags & A_TABLES)) {
			next = next->u.arr.items[next->u.arr.len - 1];
		} else if (next->type != ISC_TOML_TABLE || (next->flags & T_INLINE)) {
			rc = fail_at(ps, parts[i].line, parts[i].col,
			             "key `%s` is already defined as a %s",
			             key_show(&parts[i], kb, sizeof(kb)),
			             next->type == ISC_TOML_TABLE ? "inline table"
			                                          : isc_toml_type_name(next->type));
			goto out;
		}
		t = next;
	}

	{
		struct key_part *last = &parts[nparts - 1];
		next = table_find(t, last->s, last->len);
		if (aot) {
			struct isc_toml_value *arr = next, *elem;
			if (!arr) {
				if ((rc = container_new(ps, ISC_TOML_ARRAY, t->depth, last->line,
				                        last->col, &arr)))
					goto out;
				arr->flags = A_TABLES;
				if (table_add(t, last, arr)) {
					node_free(arr);
					rc = nomem(ps);
					goto out;
				}
			} else if (arr->type != ISC_TOML_ARRAY || !(arr->flags & A_TABLES)) {
				rc = fail_at(ps, last->line, last->col,
				             "key `%s` is already defined as a %s and cannot be an "
				             "array of tables",
				             key_show(last, kb, sizeof(kb)),
				             isc_toml_type_name(arr->type));
				goto out;
			}
			if ((rc = container_new(ps, ISC_TOML_TABLE, arr->depth, line, col, &elem)))
				goto out;
			elem->flags = T_DEFINED;
			if (array_push(arr, elem)) {
				node_free(elem);
				rc = nomem(ps);
				goto out;
			}
			*cur = elem;
		} else if (!next) {
			if ((rc = container_new(ps, ISC_TOML_TABLE, t->depth, line, col, &next)))
				goto out;
			next->flags = T_DEFINED;
			if (table_add(t, last, next)) {
				node_free(next);
				rc = nomem(ps);
				goto out;
			}
			*cur = next;
		} else if (next->type == ISC_TOML_TABLE && next->flags == T_IMPLICIT) {
			/* Made on the way to a deeper header; this defines it now. */
			next->flags = T_DEFINED;
			next->line = line;
			next->col = col;
			*cur = next;
		} else {
			rc = fail_at(ps, last->line, last->col, "%s `%s` is already defined",
			             next->type == ISC_TOML_TABLE ? "table" : "key",
			             key_show(last, kb, sizeof(kb)));
			goto out;
		}
	}
out:
	parts_free(parts, nparts);
	return rc;
}

/* ---- document ---- */

int isc_toml_parse_ex(const char *text, size_t len, struct isc_toml_doc **out,
                      struct isc_toml_error *where, struct isc_err *err)
{
	struct parser ps = {text, text + len, 1, 1, where, err};
	struct isc_toml_doc *doc = NULL;
	struct isc_toml_value *cur;
	int rc;

	*out = NULL;
	if (len > ISC_TOML_MAX_INPUT)
		return fail_at(&ps, 1, 1, "input is %zu bytes, more than the limit of %zu", len,
		               ISC_TOML_MAX_INPUT);
	if ((rc = check_utf8(&ps)))
		return rc;
	doc = calloc(1, sizeof(*doc));
	if (!doc || !(doc->root = node_new(ISC_TOML_TABLE, 1, 1))) {
		free(doc);
		return nomem(&ps);
	}
	doc->root->flags = T_DEFINED;
	cur = doc->root;
	/* A byte order mark is allowed at the very start. */
	if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
		ps.p += 3;

	while (!at_end(&ps)) {
		int c;
		skip_ws(&ps);
		c = peek(&ps);
		if (c == '#' || c < 0 || c == '\n' || c == '\r') {
			/* empty line: end_of_line does the rest */
		} else if (c == '[') {
			if ((rc = parse_header(&ps, doc->root, &cur)))
				goto fail;
		} else {
			if ((rc = parse_keyval(&ps, cur)))
				goto fail;
		}
		if ((rc = end_of_line(&ps)))
			goto fail;
	}
	*out = doc;
	return 0;
fail:
	isc_toml_doc_free(doc);
	return rc;
}

int isc_toml_parse(const char *text, size_t len, struct isc_toml_doc **out, struct isc_err *err)
{
	return isc_toml_parse_ex(text, len, out, NULL, err);
}

void isc_toml_doc_free(struct isc_toml_doc *doc)
{
	if (!doc)
		return;
	node_free(doc->root);
	free(doc);
}

/* ---- accessors ---- */

const struct isc_toml_value *isc_toml_doc_root(const struct isc_toml_doc *doc)
{
	return doc ? doc->root : NULL;
}

enum isc_toml_type isc_toml_type(const struct isc_toml_value *v)
{
	return v->type;
}

const char *isc_toml_type_name(enum isc_toml_type t)
{
	switch (t) {
	case ISC_TOML_STRING:
		return "string";
	case ISC_TOML_INTEGER:
		return "integer";
	case ISC_TOML_FLOAT:
		return "float";
	case ISC_TOML_BOOL:
		return "bool";
	case ISC_TOML_DATETIME:
		return "datetime";
	case ISC_TOML_DATETIME_LOCAL:
		return "datetime-local";
	case ISC_TOML_DATE_LOCAL:
		return "date-local";
	case ISC_TOML_TIME_LOCAL:
		return "time-local";
	case ISC_TOML_ARRAY:
		return "array";
	case ISC_TOML_TABLE:
		return "table";
	}
	return "unknown";
}

int isc_toml_line(const struct isc_toml_value *v)
{
	return v->line;
}

int isc_toml_col(const struct isc_toml_value *v)
{
	return v->col;
}

int isc_toml_key_line(const struct isc_toml_value *v)
{
	return v->key_line;
}

int isc_toml_key_col(const struct isc_toml_value *v)
{
	return v->key_col;
}

size_t isc_toml_table_len(const struct isc_toml_value *t)
{
	return t && t->type == ISC_TOML_TABLE ? t->u.tab.len : 0;
}

const struct isc_toml_value *isc_toml_table_at(const struct isc_toml_value *t, size_t i,
                                               const char **key, size_t *key_len)
{
	if (!t || t->type != ISC_TOML_TABLE || i >= t->u.tab.len)
		return NULL;
	if (key)
		*key = t->u.tab.ents[i].key;
	if (key_len)
		*key_len = t->u.tab.ents[i].key_len;
	return t->u.tab.ents[i].val;
}

const struct isc_toml_value *isc_toml_table_getn(const struct isc_toml_value *t, const char *key,
                                                 size_t key_len)
{
	if (!t || t->type != ISC_TOML_TABLE)
		return NULL;
	return table_find(t, key, key_len);
}

const struct isc_toml_value *isc_toml_table_get(const struct isc_toml_value *t, const char *key)
{
	return isc_toml_table_getn(t, key, strlen(key));
}

size_t isc_toml_array_len(const struct isc_toml_value *a)
{
	return a && a->type == ISC_TOML_ARRAY ? a->u.arr.len : 0;
}

const struct isc_toml_value *isc_toml_array_at(const struct isc_toml_value *a, size_t i)
{
	if (!a || a->type != ISC_TOML_ARRAY || i >= a->u.arr.len)
		return NULL;
	return a->u.arr.items[i];
}

int isc_toml_get_string(const struct isc_toml_value *v, const char **s, size_t *len)
{
	if (!v || v->type != ISC_TOML_STRING)
		return ISC_EINVALID;
	if (s)
		*s = v->u.str.ptr;
	if (len)
		*len = v->u.str.len;
	return 0;
}

int isc_toml_get_int(const struct isc_toml_value *v, int64_t *out)
{
	if (!v || v->type != ISC_TOML_INTEGER)
		return ISC_EINVALID;
	*out = v->u.i;
	return 0;
}

int isc_toml_get_double(const struct isc_toml_value *v, double *out)
{
	if (!v || v->type != ISC_TOML_FLOAT)
		return ISC_EINVALID;
	*out = v->u.f;
	return 0;
}

int isc_toml_get_bool(const struct isc_toml_value *v, int *out)
{
	if (!v || v->type != ISC_TOML_BOOL)
		return ISC_EINVALID;
	*out = v->u.b;
	return 0;
}

static int is_datetime_type(enum isc_toml_type t)
{
	return t == ISC_TOML_DATETIME || t == ISC_TOML_DATETIME_LOCAL || t == ISC_TOML_DATE_LOCAL ||
	       t == ISC_TOML_TIME_LOCAL;
}

int isc_toml_get_datetime(const struct isc_toml_value *v, struct isc_toml_datetime *out)
{
	if (!v || !is_datetime_type(v->type))
		return ISC_EINVALID;
	*out = v->u.dt;
	return 0;
}

int isc_toml_format_datetime(const struct isc_toml_value *v, char *buf, size_t cap)
{
	const struct isc_toml_datetime *d;
	char tmp[64];
	size_t o = 0;

	if (!v || !is_datetime_type(v->type))
		return ISC_EINVALID;
	d = &v->u.dt;
	if (v->type != ISC_TOML_TIME_LOCAL)
		o += (size_t)snprintf(tmp + o, sizeof(tmp) - o, "%04d-%02d-%02d", d->year, d->month,
		                      d->day);
	if (v->type != ISC_TOML_DATE_LOCAL) {
		if (o)
			tmp[o++] = 'T';
		o += (size_t)snprintf(tmp + o, sizeof(tmp) - o, "%02d:%02d:%02d", d->hour,
		                      d->minute, d->second);
		if (d->frac_digits) {
			int ns = d->nanosecond;
			for (int i = d->frac_digits; i < 9; i++)
				ns /= 10;
			o +=
			    (size_t)snprintf(tmp + o, sizeof(tmp) - o, ".%0*d", d->frac_digits, ns);
		}
	}
	if (v->type == ISC_TOML_DATETIME) {
		if (d->offset_z) {
			tmp[o++] = 'Z';
		} else {
			int m = d->offset_minutes < 0 ? -d->offset_minutes : d->offset_minutes;
			o += (size_t)snprintf(tmp + o, sizeof(tmp) - o, "%c%02d:%02d",
			                      d->offset_minutes < 0 ? '-' : '+', m / 60, m % 60);
		}
	}
	tmp[o] = '\0';
	if (o + 1 > cap)
		return ISC_EINVALID;
	memcpy(buf, tmp, o + 1);
	return (int)o;
}
