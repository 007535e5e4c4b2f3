/*
 * The risk_facts table (migration 30, issue 43): what each risk source said,
 * with when, so iscd ranks from the last answer while the next is fetched and a
 * source that is down leaves its last answer with its age.
 */
#include "store/store_risk.h"

#include "store/store.h"
#include "store/store_int.h"

#include <openssl/rand.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RISK_COLS                                                                                  \
	"provider, region, zone, instance_type, market, source, target, value, value2, detail, "   \
	"fetched_ms"

void isc_risk_fact_cleanup(struct isc_risk_fact *f)
{
	if (!f)
		return;
	free(f->provider);
	free(f->region);
	free(f->zone);
	free(f->instance_type);
	free(f->market);
	free(f->source);
	free(f->detail);
	memset(f, 0, sizeof(*f));
}

static void fact_clean(void *rec)
{
	isc_risk_fact_cleanup(rec);
}

void isc_risk_fact_list_free(struct isc_risk_fact *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), fact_clean);
}

static int fact_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_risk_fact *f = rec;
	int oom = 0;
	f->provider = isc_store_col_text(st, 0, &oom);
	f->region = isc_store_col_text(st, 1, &oom);
	f->zone = isc_store_col_text(st, 2, &oom);
	f->instance_type = isc_store_col_text(st, 3, &oom);
	f->market = isc_store_col_text(st, 4, &oom);
	f->source = isc_store_col_text(st, 5, &oom);
	f->target = isc_db_column_int(st, 6);
	f->value = isc_db_column_int64(st, 7);
	f->value2 = isc_db_column_int64(st, 8);
	f->detail = isc_store_col_text(st, 9, &oom);
	f->fetched_ms = isc_db_column_int64(st, 10);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_risk_put(struct isc_store *s, const char *replace_source,
                       const struct isc_risk_fact *facts, size_t n, struct isc_err *err)
{
	struct isc_db_stmt *st = NULL;
	int rc;

	if (n == 0 && !replace_source)
		return 0;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if (replace_source) {
		if ((rc =
		         isc_store_prepare(s, "DELETE FROM risk_facts WHERE source = ?", &st, err)))
			goto fail;
		isc_db_bind_text(st, 1, replace_source, -1, ISC_DB_STATIC);
		if ((rc = isc_db_step(st)) != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "clearing risk facts", err);
			goto fail;
		}
		isc_db_finalize(st);
		st = NULL;
	}
	/* ON CONFLICT ... DO UPDATE is the same statement on SQLite (3.24+) and PostgreSQL. */
	if ((rc = isc_store_prepare(
	         s,
	         "INSERT INTO risk_facts (" RISK_COLS ") VALUES "
	         "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
	         "ON CONFLICT (provider, region, zone, instance_type, market, source, target) "
	         "DO UPDATE SET value = excluded.value, value2 = excluded.value2, "
	         "detail = excluded.detail, fetched_ms = excluded.fetched_ms",
	         &st, err)))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const struct isc_risk_fact *f = &facts[i];
		isc_db_reset(st);
		isc_db_bind_text(st, 1, f->provider, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 2, f->region, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 3, f->zone ? f->zone : "", -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 4, f->instance_type, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 5, f->market ? f->market : "", -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 6, f->source, -1, ISC_DB_STATIC);
		isc_db_bind_int(st, 7, f->target);
		isc_db_bind_int64(st, 8, f->value);
		isc_db_bind_int64(st, 9, f->value2);
		isc_db_bind_text(st, 10, f->detail ? f->detail : "", -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 11, f->fetched_ms);
		if ((rc = isc_db_step(st)) != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "writing a risk fact", err);
			goto fail;
		}
	}
	isc_db_finalize(st);
	st = NULL;
	/* A new version for readers that keep the facts (shapes/catalog.c). */
	{
		int64_t v = 0;
		while (v <= 0) {
			if (RAND_bytes((unsigned char *)&v, sizeof(v)) != 1) {
				rc = isc_err_set(err, ISC_EIO,
				                 "no random bytes for the risk version");
				goto fail;
			}
			v &= INT64_MAX;
		}
		if ((rc = isc_store_prepare(s, "UPDATE risk_version SET version = ?", &st, err)))
			goto fail;
		isc_db_bind_int64(st, 1, v);
		if ((rc = isc_db_step(st)) != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "writing the risk version", err);
			goto fail;
		}
		isc_db_finalize(st);
	}
	return isc_store_commit(s, err);
fail:
	if (st)
		isc_db_finalize(st);
	isc_store_rollback(s);
	return rc;
}

int isc_store_risk_version(struct isc_store *s, int64_t *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT version FROM risk_version", &st, err);
	*out = 0;
	if (rc)
		return rc;
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*out = isc_db_column_int64(st, 0);
		rc = 0;
	} else if (rc == ISC_DB_DONE) {
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "reading the risk version", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_risk_list(struct isc_store *s, struct isc_risk_fact **out, size_t *n,
                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list = NULL;
	int rc =
	    isc_store_prepare(s,
	                      "SELECT " RISK_COLS " FROM risk_facts"
	                      " ORDER BY provider, region, instance_type, source, zone, target",
	                      &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(**out), fact_from_row, fact_clean,
	                         "reading risk facts", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

static int history_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_risk_fact *f = rec;
	int oom = 0;
	f->provider = isc_store_col_text(st, 0, &oom);
	f->region = isc_store_col_text(st, 1, &oom);
	f->zone = isc_store_col_text(st, 2, &oom);
	f->instance_type = isc_store_col_text(st, 3, &oom);
	f->market = isc_store_col_text(st, 4, &oom);
	f->value = isc_db_column_int64(st, 5);
	f->value2 = isc_db_column_int64(st, 6);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_risk_history(struct isc_store *s, int64_t since_ms, int64_t now_ms,
                           struct isc_risk_fact **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	struct isc_risk_fact *list = NULL;
	size_t rows = 0, w = 0;
	int rc;

	*out = NULL;
	*n = 0;
	/*
	 * One row per cluster open in the window: its interruptions (the broker's
	 * "interrupted" events of its experiment while it was open, in the window) and its
	 * node-seconds in the window. Folded per (shape, zone) below, in C, so the SQL
	 * stays the same on both stores.
	 */
	rc = isc_store_prepare(
	    s,
	    "SELECT sh.provider, sh.region, c.zone, sh.instance_type,"
	    " CASE WHEN sh.spot <> 0 THEN 'spot' ELSE 'ondemand' END,"
	    " (SELECT count(*) FROM events ev WHERE ev.experiment_id = c.experiment_id"
	    "   AND ev.kind = 'interrupted' AND ev.at_ms >= ?1 AND ev.at_ms >= c.created_at_ms"
	    "   AND (c.closed_at_ms IS NULL OR ev.at_ms <= c.closed_at_ms)),"
	    " c.nnodes * ((CASE WHEN c.closed_at_ms IS NULL OR c.closed_at_ms > ?2 THEN ?2"
	    "   ELSE c.closed_at_ms END)"
	    "  - (CASE WHEN c.created_at_ms > ?1 THEN c.created_at_ms ELSE ?1 END)) / 1000"
	    " FROM clusters c JOIN shapes sh ON sh.id = lower(c.shape_id)"
	    " WHERE (c.closed_at_ms IS NULL OR c.closed_at_ms >= ?1) AND c.created_at_ms <= ?2"
	    " ORDER BY sh.provider, sh.region, sh.instance_type, 5, c.zone",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, since_ms);
	isc_db_bind_int64(st, 2, now_ms);
	if ((rc = isc_store_read_rows(s, st, sizeof(*list), history_from_row, fact_clean,
	                              "reading the interruption history", (void **)&list, &rows,
	                              err)))
		return rc;
	for (size_t i = 0; i < rows; i++) {
		struct isc_risk_fact *f = &list[i], *p = w ? &list[w - 1] : NULL;
		if (f->value2 < 0)
			f->value2 = 0;
		if (p && !strcmp(p->provider, f->provider) && !strcmp(p->region, f->region) &&
		    !strcmp(p->zone, f->zone) && !strcmp(p->instance_type, f->instance_type) &&
		    !strcmp(p->market, f->market)) {
			p->value += f->value;
			p->value2 += f->value2;
			isc_risk_fact_cleanup(f);
			continue;
		}
		if (w != i) {
			list[w] = *f;
			memset(f, 0, sizeof(*f));
		}
		w++;
	}
	for (size_t i = 0; i < w; i++) {
		list[i].fetched_ms = now_ms;
		if (!(list[i].source = strdup(ISC_RISK_HISTORY)) ||
		    !(list[i].detail = strdup(""))) {
			isc_risk_fact_list_free(list, rows);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	*out = list;
	*n = w;
	if (w == 0) {
		free(list);
		*out = NULL;
	}
	return 0;
}
