/*
 * The shapes table. Imports write a whole provider's catalog in one
 * transaction, so a reader (the ranking, iscd) never sees half of a new
 * catalog; the price refresh touches one row.
 */
#include "store/store_shapes.h"

#include "store/store_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SHAPE_COLS                                                                                 \
	"id, display_id, provider, region, instance_type, spot, gpu_type, gpus_per_node, "         \
	"gpu_mem_mib, vcpus, mem_mib, price_micros, zones, price_date"
/* What readers get: the imported columns, then where the price came from. */
#define SHAPE_READ_COLS SHAPE_COLS ", price_source, price_checked_ms"

void isc_shape_cleanup(struct isc_shape *sh)
{
	if (!sh)
		return;
	free(sh->id);
	free(sh->display_id);
	free(sh->provider);
	free(sh->region);
	free(sh->instance_type);
	free(sh->gpu_type);
	free(sh->zones);
	free(sh->price_date);
	free(sh->price_source);
	memset(sh, 0, sizeof(*sh));
}

static void shape_clean(void *rec)
{
	isc_shape_cleanup(rec);
}

void isc_shape_list_free(struct isc_shape *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), shape_clean);
}

static int dup_field(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : ISC_ENOMEM;
}

int isc_shape_copy(struct isc_shape *dst, const struct isc_shape *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->spot = src->spot;
	dst->gpus_per_node = src->gpus_per_node;
	dst->gpu_mem_mib = src->gpu_mem_mib;
	dst->vcpus = src->vcpus;
	dst->mem_mib = src->mem_mib;
	dst->price_micros = src->price_micros;
	dst->price_checked_ms = src->price_checked_ms;
	if (dup_field(&dst->id, src->id) || dup_field(&dst->display_id, src->display_id) ||
	    dup_field(&dst->provider, src->provider) || dup_field(&dst->region, src->region) ||
	    dup_field(&dst->instance_type, src->instance_type) ||
	    dup_field(&dst->gpu_type, src->gpu_type) || dup_field(&dst->zones, src->zones) ||
	    dup_field(&dst->price_date, src->price_date) ||
	    dup_field(&dst->price_source, src->price_source)) {
		isc_shape_cleanup(dst);
		return ISC_ENOMEM;
	}
	return 0;
}

/* The table's key: the id in lower case (ids are ASCII). NULL when out of memory. */
static char *shape_key(const char *id)
{
	char *k = strdup(id);
	if (k)
		for (char *p = k; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	return k;
}

static int shape_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_shape *sh = rec;
	int oom = 0;
	sh->id = isc_store_col_text(st, 0, &oom);
	sh->display_id = isc_store_col_text(st, 1, &oom);
	sh->provider = isc_store_col_text(st, 2, &oom);
	sh->region = isc_store_col_text(st, 3, &oom);
	sh->instance_type = isc_store_col_text(st, 4, &oom);
	sh->spot = isc_db_column_int(st, 5);
	sh->gpu_type = isc_store_col_text(st, 6, &oom);
	sh->gpus_per_node = isc_db_column_int(st, 7);
	sh->gpu_mem_mib = isc_db_column_int64(st, 8);
	sh->vcpus = isc_db_column_int(st, 9);
	sh->mem_mib = isc_db_column_int64(st, 10);
	sh->price_micros = isc_db_column_int64(st, 11);
	sh->zones = isc_store_col_text(st, 12, &oom);
	sh->price_date = isc_store_col_text(st, 13, &oom);
	sh->price_source = isc_store_col_text(st, 14, &oom);
	sh->price_checked_ms = isc_db_column_int64(st, 15);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_shape_count(struct isc_store *s, const char *provider, int64_t *out,
                          struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT count(*) FROM shapes WHERE CAST(?1 AS TEXT) IS NULL OR provider = ?1", &st,
	    err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, provider, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*out = isc_db_column_int64(st, 0);
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "counting shapes", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_shape_list(struct isc_store *s, const char *provider, struct isc_shape **out,
                         size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(s,
	                           "SELECT " SHAPE_READ_COLS
	                           " FROM shapes WHERE CAST(?1 AS TEXT) IS NULL OR provider = ?1"
	                           " ORDER BY id",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, provider, -1, ISC_DB_STATIC);
	rc = isc_store_read_rows(s, st, sizeof(**out), shape_from_row, shape_clean,
	                         "listing shapes", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_shape_get(struct isc_store *s, const char *id, struct isc_shape *out,
                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	char *key = shape_key(id);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!key)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if ((rc = isc_store_prepare(s, "SELECT " SHAPE_READ_COLS " FROM shapes WHERE id = ?", &st,
	                            err))) {
		free(key);
		return rc;
	}
	isc_db_bind_text(st, 1, key, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, shape_from_row, shape_clean, out, sizeof(*out),
	                        "reading a shape", err);
	free(key);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no shape '%s'", id) : rc;
}

/* 1 when the stored row equals sh in every column an import sets. */
static int row_equals(struct isc_db_stmt *st, const struct isc_shape *sh)
{
	const char *t[] = {sh->display_id, sh->provider, sh->region,    sh->instance_type,
	                   sh->gpu_type,   sh->zones,    sh->price_date};
	const int tc[] = {1, 2, 3, 4, 6, 12, 13};
	for (size_t i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		const unsigned char *v = isc_db_column_text(st, tc[i]);
		if (!v || strcmp((const char *)v, t[i]))
			return 0;
	}
	return isc_db_column_int(st, 5) == sh->spot &&
	       isc_db_column_int(st, 7) == sh->gpus_per_node &&
	       isc_db_column_int64(st, 8) == sh->gpu_mem_mib &&
	       isc_db_column_int(st, 9) == sh->vcpus &&
	       isc_db_column_int64(st, 10) == sh->mem_mib &&
	       isc_db_column_int64(st, 11) == sh->price_micros;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int isc_store_shapes_apply(struct isc_store *s, const char *provider,
                           const struct isc_shape *shapes, size_t n, int replace,
                           struct isc_shapes_apply_result *res, struct isc_err *err)
{
	struct isc_db_stmt *get = NULL, *ins = NULL, *upd = NULL, *ids = NULL, *del = NULL;
	char **seen = NULL;
	int64_t now = isc_store_now_ms();
	int rc;

	memset(res, 0, sizeof(*res));
	if (replace && !provider)
		return isc_err_set(err, ISC_EINVALID, "replacing shapes needs a provider");
	for (size_t i = 0; i < n; i++)
		if (provider && strcmp(shapes[i].provider, provider))
			return isc_err_set(err, ISC_EINVALID, "shape '%s' is not a %s shape",
			                   shapes[i].display_id, provider);
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_prepare(s, "SELECT " SHAPE_READ_COLS " FROM shapes WHERE id = ?", &get,
	                            err)) ||
	    (rc = isc_store_prepare(
	         s,
	         "INSERT INTO shapes (" SHAPE_COLS ", updated_at_ms) VALUES "
	         "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
	         &ins, err)) ||
	    (rc = isc_store_prepare(
	         s,
	         "UPDATE shapes SET display_id = ?2, provider = ?3, region = ?4, "
	         "instance_type = ?5, spot = ?6, gpu_type = ?7, gpus_per_node = ?8, "
	         "gpu_mem_mib = ?9, vcpus = ?10, mem_mib = ?11, price_micros = ?12, "
	         "zones = ?13, price_date = ?14, updated_at_ms = ?15, price_source = 'catalog', "
	         "price_checked_ms = 0 WHERE id = ?1",
	         &upd, err)))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const struct isc_shape *sh = &shapes[i];
		struct isc_db_stmt *w;
		isc_db_reset(get);
		isc_db_bind_text(get, 1, sh->id, -1, ISC_DB_STATIC);
		rc = isc_db_step(get);
		if (rc == ISC_DB_ROW && row_equals(get, sh)) {
			res->unchanged++;
			continue;
		}
		if (rc != ISC_DB_ROW && rc != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "reading a shape", err);
			goto fail;
		}
		w = rc == ISC_DB_ROW ? upd : ins;
		if (rc == ISC_DB_ROW)
			res->updated++;
		else
			res->added++;
		isc_db_reset(w);
		isc_db_bind_text(w, 1, sh->id, -1, ISC_DB_STATIC);
		isc_db_bind_text(w, 2, sh->display_id, -1, ISC_DB_STATIC);
		isc_db_bind_text(w, 3, sh->provider, -1, ISC_DB_STATIC);
		isc_db_bind_text(w, 4, sh->region, -1, ISC_DB_STATIC);
		isc_db_bind_text(w, 5, sh->instance_type, -1, ISC_DB_STATIC);
		isc_db_bind_int(w, 6, sh->spot);
		isc_db_bind_text(w, 7, sh->gpu_type, -1, ISC_DB_STATIC);
		isc_db_bind_int(w, 8, sh->gpus_per_node);
		isc_db_bind_int64(w, 9, sh->gpu_mem_mib);
		isc_db_bind_int(w, 10, sh->vcpus);
		isc_db_bind_int64(w, 11, sh->mem_mib);
		isc_db_bind_int64(w, 12, sh->price_micros);
		isc_db_bind_text(w, 13, sh->zones, -1, ISC_DB_STATIC);
		isc_db_bind_text(w, 14, sh->price_date, -1, ISC_DB_STATIC);
		isc_db_bind_int64(w, 15, now);
		if ((rc = isc_db_step(w)) != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "writing a shape", err);
			goto fail;
		}
	}
	if (replace) {
		/* The provider's ids not in the list go: sorted list + bsearch, no temp table. */
		if (n && !(seen = malloc(n * sizeof(*seen)))) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
		for (size_t i = 0; i < n; i++)
			seen[i] = shapes[i].id;
		qsort(seen, n, sizeof(*seen), cmp_str);
		if ((rc = isc_store_prepare(s, "SELECT id FROM shapes WHERE provider = ?", &ids,
		                            err)) ||
		    (rc = isc_store_prepare(s, "DELETE FROM shapes WHERE id = ?", &del, err)))
			goto fail;
		isc_db_bind_text(ids, 1, provider, -1, ISC_DB_STATIC);
		while ((rc = isc_db_step(ids)) == ISC_DB_ROW) {
			const char *id = (const char *)isc_db_column_text(ids, 0);
			if (id && n && bsearch(&id, seen, n, sizeof(*seen), cmp_str))
				continue;
			isc_db_reset(del);
			isc_db_bind_text(del, 1, id, -1, ISC_DB_TRANSIENT);
			if ((rc = isc_db_step(del)) != ISC_DB_DONE) {
				rc = isc_store_db_err(s, rc, "removing a shape", err);
				goto fail;
			}
			res->removed++;
		}
		if (rc != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "listing shapes", err);
			goto fail;
		}
	}
	isc_db_finalize(get);
	isc_db_finalize(ins);
	isc_db_finalize(upd);
	isc_db_finalize(ids);
	isc_db_finalize(del);
	free(seen);
	if ((rc = isc_store_commit(s, err))) {
		isc_store_rollback(s);
		memset(res, 0, sizeof(*res));
	}
	return rc;
fail:
	isc_db_finalize(get);
	isc_db_finalize(ins);
	isc_db_finalize(upd);
	isc_db_finalize(ids);
	isc_db_finalize(del);
	free(seen);
	isc_store_rollback(s);
	memset(res, 0, sizeof(*res));
	return rc;
}

int isc_store_shapes_seed(struct isc_store *s, const struct isc_shape *shapes, size_t n,
                          size_t *added, struct isc_err *err)
{
	struct isc_shapes_apply_result res;
	int64_t have = 0;
	int rc;

	*added = 0;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_shape_count(s, NULL, &have, err)))
		goto fail;
	if (have == 0) {
		if ((rc = isc_store_shapes_apply(s, NULL, shapes, n, 0, &res, err)))
			goto fail;
		*added = res.added;
	}
	if ((rc = isc_store_commit(s, err)))
		goto fail;
	return 0;
fail:
	isc_store_rollback(s);
	*added = 0;
	return rc;
}

/* zones with `zone` first (removed from where it was). Caller frees. */
static char *zones_with_first(const char *zones, const char *zone)
{
	size_t zl = strlen(zone);
	char *out = malloc(strlen(zones) + zl + 2), *p;
	if (!out)
		return NULL;
	p = out + (size_t)sprintf(out, "%s", zone);
	for (const char *z = zones; *z;) {
		const char *end = strchr(z, ',');
		size_t len = end ? (size_t)(end - z) : strlen(z);
		if (len && !(len == zl && !strncmp(z, zone, zl)))
			p += sprintf(p, ",%.*s", (int)len, z);
		z += len + (end ? 1 : 0);
	}
	return out;
}

int isc_store_shape_set_price(struct isc_store *s, const char *shape_id, const char *zone,
                              int64_t price_micros, const char *price_date, int64_t checked_ms,
                              struct isc_err *err)
{
	struct isc_shape cur;
	struct isc_db_stmt *st = NULL;
	char today[16], *zones = NULL;
	int rc;

	if (price_micros < 0)
		return isc_err_set(err, ISC_EINVALID, "negative price for shape '%s'", shape_id);
	if (zone && (strchr(zone, ',') || strlen(zone) > 128))
		return isc_err_set(err, ISC_EINVALID, "bad zone name '%s'", zone);
	if (!price_date) {
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(today, sizeof(today), "%Y-%m-%d", &tm);
		price_date = today;
	}
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_shape_get(s, shape_id, &cur, err)))
		goto out;
	if (zone && *zone && !(zones = zones_with_first(cur.zones, zone))) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = isc_store_prepare(
	         s,
	         "UPDATE shapes SET price_micros = ?2, zones = ?3, price_date = ?4, "
	         "updated_at_ms = ?5, price_source = 'aws-spot-history', price_checked_ms = ?6 "
	         "WHERE id = ?1",
	         &st, err)))
		goto out;
	isc_db_bind_text(st, 1, cur.id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, price_micros);
	isc_db_bind_text(st, 3, zones ? zones : cur.zones, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, price_date, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 5, isc_store_now_ms());
	isc_db_bind_int64(st, 6, checked_ms > 0 ? checked_ms : isc_store_now_ms());
	if ((rc = isc_db_step(st)) != ISC_DB_DONE)
		rc = isc_store_db_err(s, rc, "updating a shape price", err);
	else
		rc = isc_store_commit(s, err);
out:
	isc_db_finalize(st);
	if (rc)
		isc_store_rollback(s);
	isc_shape_cleanup(&cur);
	free(zones);
	return rc;
}

/* Upserts the source's row of price_refreshes (inside the caller's transaction or not). */
static int note_refresh(struct isc_store *s, const char *source, int64_t tried_ms, int ok,
                        int64_t shapes, const char *error, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc;

	/* A failure keeps the last success's time and count: the age of the prices. */
	if ((rc = isc_store_prepare(
	         s,
	         "INSERT INTO price_refreshes (source, tried_at_ms, ok_at_ms, shapes, error) "
	         "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (source) DO UPDATE SET "
	         "tried_at_ms = ?2, ok_at_ms = CASE WHEN ?6 = 1 THEN ?3 ELSE "
	         "price_refreshes.ok_at_ms END, shapes = CASE WHEN ?6 = 1 THEN ?4 ELSE "
	         "price_refreshes.shapes END, error = ?5",
	         &st, err)))
		return rc;
	isc_db_bind_text(st, 1, source, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, tried_ms);
	isc_db_bind_int64(st, 3, ok ? tried_ms : 0);
	isc_db_bind_int64(st, 4, ok ? shapes : 0);
	isc_db_bind_text(st, 5, ok ? "" : (error ? error : "failed"), -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 6, ok ? 1 : 0);
	if ((rc = isc_db_step(st)) != ISC_DB_DONE)
		rc = isc_store_db_err(s, rc, "noting a price refresh", err);
	else
		rc = 0;
	isc_db_finalize(st);
	return rc;
}

int isc_store_shape_prices_set(struct isc_store *s, const char *source,
                               const struct isc_shape_price_update *u, size_t n, int64_t checked_ms,
                               size_t *changed, struct isc_err *err)
{
	struct isc_db_stmt *st = NULL;
	char today[16];
	time_t t = (time_t)(checked_ms / 1000);
	struct tm tm;
	int rc;

	*changed = 0;
	for (size_t i = 0; i < n; i++)
		if (u[i].price_micros < 0)
			return isc_err_set(err, ISC_EINVALID, "negative price for shape '%s'",
			                   u[i].shape_id);
	gmtime_r(&t, &tm);
	strftime(today, sizeof(today), "%Y-%m-%d", &tm);
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_prepare(s,
	                            "UPDATE shapes SET price_micros = ?2, price_date = ?3, "
	                            "updated_at_ms = ?4, price_source = ?5, price_checked_ms = ?4 "
	                            "WHERE id = ?1",
	                            &st, err)))
		goto out;
	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_shape cur;
		if ((rc = isc_store_shape_get(s, u[i].shape_id, &cur, err)))
			break;
		*changed += cur.price_micros != u[i].price_micros;
		isc_db_reset(st);
		isc_db_bind_text(st, 1, cur.id, -1, ISC_DB_TRANSIENT);
		isc_db_bind_int64(st, 2, u[i].price_micros);
		isc_db_bind_text(st, 3, today, -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 4, checked_ms);
		isc_db_bind_text(st, 5, source, -1, ISC_DB_STATIC);
		if ((rc = isc_db_step(st)) != ISC_DB_DONE)
			rc = isc_store_db_err(s, rc, "updating a shape price", err);
		else
			rc = 0;
		isc_shape_cleanup(&cur);
	}
	if (!rc)
		rc = note_refresh(s, source, checked_ms, 1, (int64_t)n, NULL, err);
	if (!rc)
		rc = isc_store_commit(s, err);
out:
	isc_db_finalize(st);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

int isc_store_price_refresh_failed(struct isc_store *s, const char *source, int64_t tried_ms,
                                   const char *error, struct isc_err *err)
{
	return note_refresh(s, source, tried_ms, 0, 0, error, err);
}

static void refresh_clean(void *rec)
{
	struct isc_price_refresh_row *r = rec;
	free(r->source);
	free(r->error);
}

static int refresh_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_price_refresh_row *r = rec;
	int oom = 0;
	r->source = isc_store_col_text(st, 0, &oom);
	r->tried_at_ms = isc_db_column_int64(st, 1);
	r->ok_at_ms = isc_db_column_int64(st, 2);
	r->shapes = isc_db_column_int64(st, 3);
	r->error = isc_store_col_text(st, 4, &oom);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_price_refresh_list(struct isc_store *s, struct isc_price_refresh_row **out, size_t *n,
                                 struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(s,
	                           "SELECT source, tried_at_ms, ok_at_ms, shapes, error FROM "
	                           "price_refreshes ORDER BY source",
	                           &st, err);
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(**out), refresh_from_row, refresh_clean,
	                         "listing price refreshes", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

void isc_price_refresh_rows_free(struct isc_price_refresh_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++)
		refresh_clean(&rows[i]);
	free(rows);
}

static void summary_clean(void *rec)
{
	struct isc_shapes_summary *e = rec;
	free(e->provider);
	free(e->price_date_min);
	free(e->price_date_max);
}

static int summary_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_shapes_summary *e = rec;
	int oom = 0;
	e->provider = isc_store_col_text(st, 0, &oom);
	e->shapes = isc_db_column_int64(st, 1);
	e->regions = isc_db_column_int64(st, 2);
	e->price_date_min = isc_store_col_text(st, 3, &oom);
	e->price_date_max = isc_store_col_text(st, 4, &oom);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_shapes_summary(struct isc_store *s, struct isc_shapes_summary **out, size_t *n,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc =
	    isc_store_prepare(s,
	                      "SELECT provider, count(*), count(DISTINCT region), min(price_date), "
	                      "max(price_date) FROM shapes GROUP BY provider ORDER BY provider",
	                      &st, err);
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(**out), summary_from_row, summary_clean,
	                         "summarising shapes", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

void isc_shapes_summary_free(struct isc_shapes_summary *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), summary_clean);
}
