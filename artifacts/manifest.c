/*
 * Manifests: their rules (artifacts/manifest.h), their JSON, and nothing else: no I/O.
 */
#include "artifacts/manifest.h"

#include "launcher/transfer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *const tops[] = {"checkpoints", "crud", "lossy"};

const char *isc_manifest_path_why(const char *path)
{
	size_t len, n_comp = 0;
	int top_ok = 0;

	if (!path || !path[0])
		return "an empty path";
	len = strlen(path);
	if (len > ISC_MANIFEST_PATH_MAX)
		return "a path longer than 1024 bytes";
	if (path[0] == '/')
		return "an absolute path";
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			return "a control character or backslash";
	for (const char *p = path;;) {
		size_t n = strcspn(p, "/");
		if (n == 0)
			return "an empty component (\"//\" or a trailing '/')";
		if (n == 1 && p[0] == '.')
			return "a \".\" component";
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "a \"..\" component";
		if (n_comp++ == 0)
			for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++)
				if (strlen(tops[i]) == n && !memcmp(tops[i], p, n))
					top_ok = 1;
		if (!p[n])
			break;
		p += n + 1;
	}
	return top_ok ? NULL : "outside the artifact folders (checkpoints, crud, lossy)";
}

static int by_path(const void *a, const void *b)
{
	const struct isc_manifest_entry *x = *(const struct isc_manifest_entry *const *)a;
	const struct isc_manifest_entry *y = *(const struct isc_manifest_entry *const *)b;
	return strcmp(x->path, y->path);
}

static void printable(const char *s, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = s ? s : "?"; *p && o + 1 < cap; p++)
		out[o++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	out[o] = '\0';
}

static int etag_ok(const char *e)
{
	size_t hex = 0;
	const char *p = e;
	while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
		p++, hex++;
	if (hex != 32)
		return 0;
	if (!*p)
		return 1;
	if (*p++ != '-' || !*p)
		return 0;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return strlen(e) <= 38;
}

int isc_manifest_check(const struct isc_manifest *m, const struct isc_manifest_limits *l,
                       struct isc_err *err)
{
	const struct isc_manifest_entry **sorted;
	uint64_t total = 0;
	char shown[128];
	int rc = 0;

	if (l->max_entries && m->n > l->max_entries)
		return isc_err_set(err, ISC_EINVALID,
		                   "manifest: %zu entries, more than artifact_max_entries (%llu)",
		                   m->n, (unsigned long long)l->max_entries);
	for (size_t i = 0; i < m->n; i++) {
		const struct isc_manifest_entry *e = &m->entries[i];
		const char *why = isc_manifest_path_why(e->path);
		printable(e->path, shown, sizeof(shown));
		if (!why && !e->is_dir && !strchr(e->path, '/'))
			why = "a file in place of an artifact folder";
		if (!why && !e->is_dir) {
			size_t pl = l->key_prefix ? strlen(l->key_prefix) : 0;
			const char *v = e->key ? e->key + pl : NULL;
			/* PREFIX/@ORG/EXPERIMENT/ then "vN/" (the version that uploaded it: a
			 * folder not synced this time keeps its earlier objects) then the path. */
			if (v && !strncmp(e->key, l->key_prefix ? l->key_prefix : "", pl) &&
			    *v == 'v') {
				const char *d = ++v;
				while (*v >= '0' && *v <= '9')
					v++;
				if (v == d || v - d > 18 || *v != '/' || d[0] == '0')
					v = NULL;
				else
					v++;
			} else {
				v = NULL;
			}
			if (!v || strcmp(v, e->path))
				why = "an object key that is not this experiment's (prefix, vN/, "
				      "path)";
			else if (!etag_ok(e->etag))
				why = "an ETag that is not S3's MD5 form (32 hex, or -N)";
			else if (strchr(e->etag, '-') &&
			         (e->part_size < ISC_TRANSFER_PART_MIN ||
			          e->part_size > ISC_TRANSFER_PART_MAX ||
			          (e->part_size & 0xfffff) ||
			          isc_transfer_part_count(e->size, e->part_size) !=
			              (unsigned)strtoul(strchr(e->etag, '-') + 1, NULL, 10)))
				why = "a part size that does not match its ETag's part count";
			else if (e->size > ISC_TRANSFER_MAX_FILE)
				why = "a file larger than one upload holds";
		}
		if (why)
			return isc_err_set(err, ISC_EINVALID, "manifest: entry %zu (%s): %s", i + 1,
			                   shown, why);
		if (!e->is_dir) {
			total += e->size;
			if (l->max_bytes && total > l->max_bytes)
				return isc_err_set(
				    err, ISC_EINVALID,
				    "manifest: the files come to more than %llu bytes "
				    "(artifact_max_bytes) at entry %zu (%s)",
				    (unsigned long long)l->max_bytes, i + 1, shown);
		}
	}
	if (total != m->total_bytes)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "manifest: total_bytes %llu is not the files' sizes together (%llu)",
		    (unsigned long long)m->total_bytes, (unsigned long long)total);
	/* Sorted, a duplicate is next to its twin and whatever is below a path follows it. */
	sorted = calloc(m->n ? m->n : 1, sizeof(*sorted));
	if (!sorted)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < m->n; i++)
		sorted[i] = &m->entries[i];
	qsort(sorted, m->n, sizeof(*sorted), by_path);
	for (size_t i = 0; i + 1 < m->n && !rc; i++) {
		const char *a = sorted[i]->path, *b = sorted[i + 1]->path;
		size_t al = strlen(a);
		printable(b, shown, sizeof(shown));
		if (!strcmp(a, b))
			rc = isc_err_set(err, ISC_EINVALID, "manifest: %s is listed twice", shown);
		/* '/' sorts after '-', '.', so "a/x" may not follow "a" directly: look ahead. */
		for (size_t k = i + 1; k < m->n && !rc && !sorted[i]->is_dir; k++) {
			const char *c = sorted[k]->path;
			if (strncmp(c, a, al))
				break;
			if (c[al] == '/') {
				printable(c, shown, sizeof(shown));
				rc = isc_err_set(err, ISC_EINVALID,
				                 "manifest: %s is below a file, not a folder",
				                 shown);
			}
		}
	}
	free(sorted);
	return rc;
}

int isc_manifest_add(struct isc_manifest *m, const char *path, int is_dir, uint64_t size,
                     const char *key, const char *etag, uint64_t part_size)
{
	struct isc_manifest_entry *grown = realloc(m->entries, (m->n + 1) * sizeof(*grown));
	struct isc_manifest_entry *e;
	if (!grown)
		return ISC_ENOMEM;
	m->entries = grown;
	e = &grown[m->n];
	memset(e, 0, sizeof(*e));
	e->path = strdup(path);
	e->key = key ? strdup(key) : NULL;
	if (!e->path || (key && !e->key)) {
		free(e->path);
		free(e->key);
		return ISC_ENOMEM;
	}
	e->is_dir = is_dir;
	e->size = is_dir ? 0 : size;
	snprintf(e->etag, sizeof(e->etag), "%s", etag ? etag : "");
	e->part_size = part_size;
	if (!is_dir)
		m->total_bytes += size;
	m->n++;
	return 0;
}

void isc_manifest_cleanup(struct isc_manifest *m)
{
	for (size_t i = 0; m && i < m->n; i++) {
		free(m->entries[i].path);
		free(m->entries[i].key);
	}
	if (m) {
		free(m->entries);
		memset(m, 0, sizeof(*m));
	}
}

char *isc_manifest_to_json(const struct isc_manifest *m)
{
	json_t *root = json_object(), *arr = json_array();
	char *out = NULL;
	if (!root || !arr)
		goto out;
	json_object_set_new(root, "version", json_integer(m->version));
	json_object_set_new(root, "total_bytes", json_integer((json_int_t)m->total_bytes));
	for (size_t i = 0; i < m->n; i++) {
		const struct isc_manifest_entry *e = &m->entries[i];
		json_t *o = json_object();
		if (!o)
			goto out;
		json_object_set_new(o, "path", json_string(e->path));
		json_object_set_new(o, "type", json_string(e->is_dir ? "dir" : "file"));
		if (!e->is_dir) {
			json_object_set_new(o, "size", json_integer((json_int_t)e->size));
			json_object_set_new(o, "key", json_string(e->key ? e->key : ""));
			json_object_set_new(o, "etag", json_string(e->etag));
			json_object_set_new(o, "part_size", json_integer((json_int_t)e->part_size));
			if (e->has_mtime)
				json_object_set_new(o, "mtime_ns",
				                    json_integer((json_int_t)e->mtime_ns));
		}
		json_array_append_new(arr, o);
	}
	json_object_set(root, "entries", arr);
	out = json_dumps(root, JSON_COMPACT);
out:
	json_decref(arr);
	json_decref(root);
	return out;
}

int isc_manifest_from_json(const char *json, struct isc_manifest *out, struct isc_err *err)
{
	json_error_t je;
	json_t *root = json_loads(json ? json : "", 0, &je), *arr = NULL;
	size_t i;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!root || !json_is_object(root))
		rc = isc_err_set(err, ISC_EINVALID, "manifest: not a JSON object");
	else if (!json_is_integer(json_object_get(root, "version")) ||
	         !json_is_array(arr = json_object_get(root, "entries")))
		rc = isc_err_set(err, ISC_EINVALID, "manifest: needs version and entries");
	if (!rc) {
		json_t *tb = json_object_get(root, "total_bytes");
		out->version = json_integer_value(json_object_get(root, "version"));
		for (i = 0; i < json_array_size(arr) && !rc; i++) {
			json_t *o = json_array_get(arr, i);
			const char *path = json_string_value(json_object_get(o, "path"));
			const char *type = json_string_value(json_object_get(o, "type"));
			json_int_t size = json_integer_value(json_object_get(o, "size"));
			json_int_t ps = json_integer_value(json_object_get(o, "part_size"));
			const char *key = json_string_value(json_object_get(o, "key"));
			const char *etag = json_string_value(json_object_get(o, "etag"));
			json_t *mt = json_object_get(o, "mtime_ns");
			int is_dir = type && !strcmp(type, "dir");
			if (!path || !type || (!is_dir && strcmp(type, "file")))
				rc = isc_err_set(
				    err, ISC_EINVALID,
				    "manifest: entry %zu: needs a path and a type (file or "
				    "dir; links, devices and the rest are never listed)",
				    i + 1);
			else if (!is_dir &&
			         (size < 0 || ps < 0 || !key || !etag || strlen(etag) > 79))
				rc = isc_err_set(
				    err, ISC_EINVALID,
				    "manifest: entry %zu: a file needs size, key, etag", i + 1);
			/* Absent in manifests from before the quick check: read fine, no mtime. */
			else if (!is_dir && mt &&
			         (!json_is_integer(mt) || json_integer_value(mt) < 0))
				rc = isc_err_set(err, ISC_EINVALID,
				                 "manifest: entry %zu: mtime_ns is not a count of "
				                 "nanoseconds since the epoch",
				                 i + 1);
			else if (isc_manifest_add(out, path, is_dir, (uint64_t)size,
			                          is_dir ? NULL : key, is_dir ? NULL : etag,
			                          (uint64_t)ps))
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			else if (!is_dir && mt) {
				out->entries[out->n - 1].has_mtime = 1;
				out->entries[out->n - 1].mtime_ns = (int64_t)json_integer_value(mt);
			}
		}
		/* total_bytes as written must agree with the entries (isc_manifest_check). */
		if (!rc && json_is_integer(tb))
			out->total_bytes = (uint64_t)json_integer_value(tb);
	}
	json_decref(root);
	if (rc)
		isc_manifest_cleanup(out);
	return rc;
}
