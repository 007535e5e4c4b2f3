/*
 * Experiments: launching (an org's members and admins, into its projects),
 * listing (a member sees their own, an admin the org's, the operator all),
 * one experiment's status and timeline, its rank logs (read from an offset,
 * so `isc logs --follow` polls), and cancelling (the launcher or an admin).
 * Finance sees spend, not experiments: 403.
 */
#include "api/api_int.h"
#include "api/json_out.h"
#include "broker/s3ckpt.h"
#include "common/buf.h"
#include "common/suggest.h"
#include "credits/credits.h"
#include "config/config.h"
#include "datasets/datasets.h"
#include "launchfile/launchfile.h"
#include "providers/placeable.h"
#include "shapes/priority.h"
#include "store/store_experiments.h"
#include "store/store_ranklogs.h"
#include "store/store_ledger.h"
#include "store/store_queue.h"
#include "store/store_ranks.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A logs reply carries at most this much; the client asks again from the new offset. */
#define LOG_CHUNK_BYTES (1024 * 1024)
/* ?tail=N: at most this many lines, found within the log's last LOG_TAIL_BYTES. */
#define LOG_TAIL_LINES_MAX 1000
#define LOG_TAIL_BYTES     (256 * 1024)

/* One row of the listing (the `isc experiments --json` object), appended to b. */
static int experiment_row_write(struct isc_buf *b, const struct isc_experiment_view *e)
{
	char dollars[32];
	int first = 1, rc;

	isc_money_decimal(e->cost_micros, dollars, sizeof(dollars));
	rc = isc_buf_putc(b, '{');
	rc = rc ? rc : isc_json_out_str_member(b, "id", e->id, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "name", e->name, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "project_id", e->project_id, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "project", e->project_name, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "org", e->org_name, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "launched_by", e->owner, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "compute_mode", e->compute_mode, &first);
	rc = rc ? rc : isc_json_out_int_member(b, "gpus", e->gpus, &first);
	rc = rc ? rc : isc_json_out_int_member(b, "nnodes", e->nnodes, &first);
	rc = rc ? rc : isc_json_out_int_member(b, "nproc", e->nproc, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "output_path", e->output_path, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "status", e->status, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "status_reason", e->status_reason, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "shape", e->shape_id, &first);
	rc = rc ? rc : isc_json_out_int_member(b, "cycle_count", e->cycle_count, &first);
	rc = rc ? rc : isc_json_out_int_member(b, "created_at_ms", e->created_at_ms, &first);
	rc = rc ? rc : isc_json_out_int_member(b, "cost_micros", e->cost_micros, &first);
	rc = rc ? rc : isc_json_out_str_member(b, "cost", dollars, &first);
	rc = rc ? rc : isc_json_out_key(b, "cost_settling", &first);
	rc = rc ? rc : isc_buf_puts(b, e->cost_settling ? "true" : "false");
	return rc ? rc : isc_buf_putc(b, '}');
}

/* A page being written: the rows so far, and the next page's cursor once one exists. */
struct listing_page {
	struct isc_buf out;
	size_t limit, rows;
	char cursor[160];
	int more;
};

/* Takes a row of the page (the store reads limit + 1: the extra says a next page exists). */
static int listing_row(const struct isc_experiment_view *v, void *ctx)
{
	struct listing_page *p = ctx;

	if (p->rows == p->limit) {
		p->more = 1;
		return 0;
	}
	if (++p->rows == p->limit)
		snprintf(p->cursor, sizeof(p->cursor), "%lld.%s", (long long)v->created_at_ms,
		         v->id);
	return (p->rows > 1 ? isc_buf_putc(&p->out, ',') : 0) || experiment_row_write(&p->out, v);
}

/*
 * GET /v1/experiments[?limit=N&after=CURSOR]: what the caller may see, newest
 * first (the `isc experiments --json`), one page at a time: X-Isc-Next names the
 * next page's cursor while rows remain.
 */
static void experiments_list(struct isc_api_call *c)
{
	const char *pretty = isc_api_query(c, "pretty");
	struct isc_experiment_cursor after;
	struct listing_page p = {0};
	struct isc_api_page page;
	char key[512];
	struct isc_err err;
	int rc;

	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page))
		return;
	/* The cursor: "CREATED_AT_MS.ID" of the last experiment of a page. */
	if (page.after &&
	    !isc_api_page_cursor_ms_id(c, page.after, &after.created_at_ms, &after.id))
		return;
	/* What the reply depends on besides the store: the caller and the arguments. */
	snprintf(key, sizeof(key), "experiments|%d|%lld|%s|%zu|%s|%s", c->is_operator,
	         (long long)c->user_id, c->user ? c->user : "", page.limit,
	         page.after ? page.after : "", pretty ? pretty : "");
	if (isc_api_listing_cached(c, key))
		return;
	isc_err_clear(&err);
	/* Written as text (api/json_out.h) straight from the store's rows, no copy between;
	 * ?pretty=1 reads it back to indent it. */
	p.limit = page.limit;
	isc_buf_init(&p.out, 0);
	if (isc_buf_putc(&p.out, '[')) {
		isc_buf_cleanup(&p.out);
		isc_api_reply_error(c, 500, "out of memory");
		return;
	}
	if (isc_store_experiment_page(c->store, c->is_operator, c->user_id, c->user,
	                              page.after ? &after : NULL, page.limit + 1, listing_row, &p,
	                              &err)) {
		isc_buf_cleanup(&p.out);
		isc_api_reply_err(c, &err);
		return;
	}
	if (p.more)
		isc_api_page_next(c, p.cursor);
	rc = isc_buf_puts(&p.out, "]\n");
	if (rc) {
		isc_buf_cleanup(&p.out);
		isc_api_reply_error(c, 500, "out of memory");
		return;
	}
	if (pretty && strcmp(pretty, "0") != 0) {
		isc_api_reply_json(c, 200, json_loadb(p.out.data, p.out.len, 0, NULL));
		isc_buf_cleanup(&p.out);
	} else {
		size_t len = p.out.len;
		isc_api_reply_text(c, 200, "application/json", isc_buf_detach(&p.out), len);
	}
	isc_api_listing_keep(c, key);
}

/*
 * Loads the experiment named by the path and checks the caller may act on it:
 * another org's (or a missing) experiment is 404; in the caller's org, an admin
 * may, a member only on their own (else 403), finance never (403).
 */
static int visible_experiment(struct isc_api_call *c, struct isc_experiment *e)
{
	struct isc_err err;
	enum isc_role r;

	isc_err_clear(&err);
	if (isc_store_experiment_get(c->store, c->params[0], e, &err)) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	isc_api_audit_target(c, e->org_id, e->id);
	if (c->is_operator)
		return 1;
	r = isc_api_role(c, e->org_id);
	if (c->status)
		goto refuse;
	if (r == ISC_ROLE_NONE) {
		isc_api_reply_error(c, 404, "no experiment with id '%s'", c->params[0]);
		goto refuse;
	}
	if (r == ISC_ROLE_ADMIN)
		return 1;
	if (r == ISC_ROLE_MEMBER) {
		if (e->owner && c->user && strcmp(e->owner, c->user) == 0)
			return 1;
		isc_api_reply_error(c, 403, "experiment %s was launched by another member", e->id);
		goto refuse;
	}
	isc_api_reply_error(c, 403, "your role in this organisation (%s) does not show experiments",
	                    isc_role_name(r));
refuse:
	isc_experiment_cleanup(e);
	return 0;
}

static json_t *events_json(const struct isc_event *ev, size_t n, int with_id)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:I,s:s,s:s}", "at_ms", (json_int_t)ev[i].at_ms, "kind",
		                      ev[i].kind, "message", ev[i].message);
		if (with_id)
			json_object_set_new(o, "id", json_integer(ev[i].id));
		json_array_append_new(arr, o);
	}
	return arr;
}

/* GET /v1/experiments/{id}: status and timeline (the `isc status --json`). */
static void experiment_get(struct isc_api_call *c)
{
	struct isc_rank_outcome *ranks = NULL;
	size_t n_ranks = 0;
	struct isc_queue_row q = {0};
	struct isc_experiment e;
	struct isc_event *ev;
	struct isc_err err;
	size_t n;
	json_t *o;

	if (!visible_experiment(c, &e))
		return;
	isc_err_clear(&err);
	if (isc_store_event_list(c->store, e.id, 0, &ev, &n, &err)) {
		isc_experiment_cleanup(&e);
		isc_api_reply_err(c, &err);
		return;
	}
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:i,s:s}", "id", e.id, "name", e.name,
	              "project_id", e.project_id, "status", e.status, "status_reason",
	              e.status_reason, "gpus", e.gpus, "nnodes", e.nnodes, "nproc", e.nproc,
	              "shape", e.shape_id, "cycle_count", e.cycle_count, "output_path",
	              e.output_path);
	{
		/* Where rank 0's folders come home: the Output Path unless artifact_root moves
		 * them (docs/config.md). */
		const struct isc_config *cfg = isc_api_config(c, &err);
		char *dir = cfg ? isc_config_artifact_dir(cfg, c->home, e.id) : NULL;
		json_object_set_new(o, "next_attempt_ms", json_integer(e.next_attempt_ms));
		json_object_set_new(o, "artifacts_path", json_string(dir ? dir : e.output_path));
		free(dir);
	}
	json_object_set_new(o, "events", events_json(ev, n, 0));
	{
		/* The charges so far, and whether they are final yet: a final experiment's last
		 * node periods are charged on a tick after it ended (cost_settling until then). */
		int64_t cost = 0;
		int settling = 0;
		char dollars[32];
		if (isc_store_ledger_experiment_cost(c->store, e.id, &cost, &err) ||
		    isc_store_experiment_settling(c->store, e.id, &settling, &err)) {
			json_decref(o);
			isc_event_list_free(ev, n);
			isc_experiment_cleanup(&e);
			isc_api_reply_err(c, &err);
			return;
		}
		isc_money_decimal(cost, dollars, sizeof(dollars));
		json_object_set_new(o, "cost_micros", json_integer(cost));
		json_object_set_new(o, "cost", json_string(dollars));
		json_object_set_new(o, "cost_settling", json_boolean(settling));
	}
	/* The on-prem queue's view (iscd writes it); bursts that never queued have none. */
	if (isc_store_queue_get(c->store, e.id, &q, &err) == 0)
		json_object_set_new(o, "queue",
		                    json_pack("{s:i,s:I,s:s,s:i,s:s}", "position", q.position,
		                              "next_start_ms", (json_int_t)q.next_start_ms,
		                              "run_nodes", q.run_nodes, "cycles_done",
		                              q.cycles_done, "compute_mode", e.compute_mode));
	isc_queue_row_cleanup(&q);
	/* Each rank's exit as the broker saw it first. */
	if (isc_store_rank_exit_list(c->store, e.id, &ranks, &n_ranks, &err) == 0) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n_ranks; i++)
			json_array_append_new(
			    arr, json_pack("{s:i,s:s,s:i,s:i,s:I}", "cycle", ranks[i].cycle,
			                   "cluster_id", ranks[i].cluster_id, "rank", ranks[i].rank,
			                   "exit_code", ranks[i].code, "at_ms",
			                   (json_int_t)ranks[i].at_ms));
		json_object_set_new(o, "ranks", arr);
		isc_rank_outcome_list_free(ranks, n_ranks);
	}
	isc_event_list_free(ev, n);
	isc_experiment_cleanup(&e);
	isc_api_reply_json(c, 200, o);
}

/* GET /v1/experiments/{id}/events?after=N: events with a larger id, and the status now. */
static void experiment_events(struct isc_api_call *c)
{
	const char *after_text = isc_api_query(c, "after");
	struct isc_experiment e;
	struct isc_event *ev;
	struct isc_err err;
	long long after = 0;
	size_t n;
	json_t *o;

	if (after_text) {
		char *end;
		errno = 0;
		after = strtoll(after_text, &end, 10);
		if (*end || errno || after < 0) {
			isc_api_reply_error(c, 400, "after: an event id");
			return;
		}
	}
	if (!visible_experiment(c, &e))
		return;
	isc_err_clear(&err);
	if (isc_store_event_list(c->store, e.id, after, &ev, &n, &err)) {
		isc_experiment_cleanup(&e);
		isc_api_reply_err(c, &err);
		return;
	}
	o = json_pack("{s:s,s:s,s:s,s:b}", "id", e.id, "status", e.status, "status_reason",
	              e.status_reason, "final", isc_status_is_final(e.status));
	json_object_set_new(o, "events", events_json(ev, n, 1));
	isc_event_list_free(ev, n);
	isc_experiment_cleanup(&e);
	isc_api_reply_json(c, 200, o);
}

/*
 * The last `lines` lines of f within its last LOG_TAIL_BYTES bytes (a longer
 * line is cut at that window): copies them to buf (LOG_CHUNK_BYTES) and sets
 * *start to their file offset, so the reader goes on from *start + length.
 */
static size_t tail_read(FILE *f, long lines, char *buf, long long *start)
{
	off_t end, from;
	size_t got, cut = 0;
	long seen = 0;

	if (fseeko(f, 0, SEEK_END) != 0 || (end = ftello(f)) < 0)
		return 0;
	from = end > LOG_TAIL_BYTES ? end - LOG_TAIL_BYTES : 0;
	if (fseeko(f, from, SEEK_SET) != 0)
		return 0;
	got = fread(buf, 1, (size_t)(end - from), f);
	/* Walk back over `lines` line ends; a final newline ends the last line, not a new one. */
	for (size_t i = got; i > 0; i--) {
		if (buf[i - 1] != '\n' || i == got)
			continue;
		if (++seen == lines) {
			cut = i;
			break;
		}
	}
	/* The window began mid-line: drop that partial line when a whole one follows. */
	if (!cut && from > 0) {
		char *nl = memchr(buf, '\n', got);
		if (nl && (size_t)(nl - buf) + 1 < got)
			cut = (size_t)(nl - buf) + 1;
	}
	memmove(buf, buf + cut, got - cut);
	*start = (long long)from + (long long)cut;
	return got - cut;
}

/*
 * The rank's log from the store (issue 45: every replica reads what the one
 * following the burst wrote): from *offset, or its last `lines` lines (then *offset
 * is set to where they start). *found 0 when the store has nothing of the rank.
 */
static int store_log_read(struct isc_api_call *c, const char *experiment_id, long rank, long tail,
                          long long *offset, char *buf, size_t *got, int *found,
                          struct isc_err *err)
{
	uint64_t next = 0;
	int rc;

	if (tail) {
		uint64_t end = 0, from;
		size_t cut = 0, n;
		long seen = 0;
		if ((rc = isc_store_ranklog_end(c->store, experiment_id, (int)rank, &end, NULL,
		                                err)))
			return rc;
		*found = end > 0;
		*got = 0;
		if (!end)
			return 0;
		from = end > LOG_TAIL_BYTES ? end - LOG_TAIL_BYTES : 0;
		if ((rc = isc_store_ranklog_read(c->store, experiment_id, (int)rank, from, buf,
		                                 LOG_TAIL_BYTES, &n, &next, found, err)))
			return rc;
		from = next - n;
		/* As tail_read: back over `lines` line ends; a window begun mid-line drops
		 * that partial line when a whole one follows. */
		for (size_t i = n; i > 0; i--) {
			if (buf[i - 1] != '\n' || i == n)
				continue;
			if (++seen == tail) {
				cut = i;
				break;
			}
		}
		if (!cut && from > 0) {
			char *nl = memchr(buf, '\n', n);
			if (nl && (size_t)(nl - buf) + 1 < n)
				cut = (size_t)(nl - buf) + 1;
		}
		memmove(buf, buf + cut, n - cut);
		*got = n - cut;
		*offset = (long long)(from + cut);
		return 0;
	}
	rc = isc_store_ranklog_read(c->store, experiment_id, (int)rank, (uint64_t)*offset, buf,
	                            LOG_CHUNK_BYTES, got, &next, found, err);
	if (!rc)
		*offset = (long long)(next - *got);
	return rc;
}

/*
 * GET /v1/experiments/{id}/logs?rank=N&offset=K: up to 1 MiB of rank N's
 * output from byte K; with &tail=L instead of offset, its last L lines (the
 * Experiments page). Headers: X-Isc-Offset (where the next read starts),
 * X-Isc-Status (the experiment's status), X-Isc-Final (1 once it ended),
 * X-Isc-Missing (1 while the rank has no output yet).
 */
static void experiment_logs(struct isc_api_call *c)
{
	const char *rank_text = isc_api_query(c, "rank"), *off_text = isc_api_query(c, "offset");
	const char *tail_text = isc_api_query(c, "tail");
	static __thread char offset_hdr[32], status_hdr[32], reason_hdr[512];
	struct isc_experiment e;
	long rank = 0, tail = 0;
	long long offset = 0;
	char *path = NULL, *buf = NULL;
	size_t got = 0;
	int missing = 0;
	FILE *f;

	if (rank_text || off_text) {
		char *end;
		errno = 0;
		if (rank_text && ((rank = strtol(rank_text, &end, 10)),
		                  *end || errno || rank < 0 || rank > 4096)) {
			isc_api_reply_error(c, 400, "rank: '%s' is not a rank number", rank_text);
			return;
		}
		if (off_text &&
		    ((offset = strtoll(off_text, &end, 10)), *end || errno || offset < 0)) {
			isc_api_reply_error(c, 400, "offset: a byte offset");
			return;
		}
	}
	if (tail_text) {
		char *end;
		errno = 0;
		if (off_text) {
			isc_api_reply_error(c, 400, "tail and offset cannot be used together");
			return;
		}
		tail = strtol(tail_text, &end, 10);
		if (*end || errno || tail < 1 || tail > LOG_TAIL_LINES_MAX) {
			isc_api_reply_error(c, 400, "tail: '%s' is not a line count (1..%d)",
			                    tail_text, LOG_TAIL_LINES_MAX);
			return;
		}
	}
	if (!visible_experiment(c, &e))
		return;
	/* Before placement the layout is unknown: any rank a GPU count allows. */
	if (rank >= (e.nnodes > 0 ? e.nnodes : e.gpus > 0 ? e.gpus : 1)) {
		isc_api_reply_error(c, 400, "experiment %s has %d node(s): no rank %ld", e.id,
		                    e.nnodes, rank);
		goto out;
	}
	if (asprintf(&path, "%s/rank_%ld.txt", e.output_path, rank) < 0 ||
	    !(buf = malloc(LOG_CHUNK_BYTES > LOG_TAIL_BYTES ? LOG_CHUNK_BYTES : LOG_TAIL_BYTES))) {
		isc_api_reply_error(c, 500, "out of memory");
		goto out;
	}
	{
		struct isc_err err;
		int in_store = 0;
		isc_err_clear(&err);
		if (store_log_read(c, e.id, rank, tail, &offset, buf, &got, &in_store, &err)) {
			isc_api_reply_err(c, &err);
			goto out;
		}
		/* The store has the rank's log: rank_N.txt (this host's copy) is not read. A
		 * log of before issue 45, or an on-prem run's, is in the file only. */
		f = in_store ? NULL : fopen(path, "r");
		if (in_store)
			goto reply;
	}
	if (!f) {
		missing = 1;
	} else if (tail) {
		got = tail_read(f, tail, buf, &offset);
		fclose(f);
	} else {
		if (fseeko(f, (off_t)offset, SEEK_SET) == 0)
			got = fread(buf, 1, LOG_CHUNK_BYTES, f);
		fclose(f);
	}
reply:
	snprintf(offset_hdr, sizeof(offset_hdr), "%lld", offset + (long long)got);
	snprintf(status_hdr, sizeof(status_hdr), "%s", e.status);
	isc_api_header(c, "X-Isc-Offset", offset_hdr);
	isc_api_header(c, "X-Isc-Status", status_hdr);
	/* The reason, for "no output yet: the experiment is waiting: ..." (one header line). */
	snprintf(reason_hdr, sizeof(reason_hdr), "%s", e.status_reason);
	for (char *p = reason_hdr; *p; p++)
		if (*p == '\r' || *p == '\n')
			*p = ' ';
	isc_api_header(c, "X-Isc-Reason", reason_hdr);
	isc_api_header(c, "X-Isc-Final", isc_status_is_final(e.status) ? "1" : "0");
	isc_api_header(c, "X-Isc-Missing", missing ? "1" : "0");
	isc_api_reply_text(c, 200, "application/octet-stream", buf, got);
	buf = NULL;
out:
	free(buf);
	free(path);
	isc_experiment_cleanup(&e);
}

/* POST /v1/experiments/{id}/cancel: the member who launched it, or an admin. */
static void experiment_cancel(struct isc_api_call *c)
{
	struct isc_experiment e;
	struct isc_err err;

	if (!visible_experiment(c, &e))
		return;
	isc_err_clear(&err);
	/* Who asked goes into the timeline and the final reason (issue 47). */
	if (isc_store_experiment_request_cancel_by(
	        c->store, e.id, c->is_operator || !c->user ? "the operator" : c->user, &err))
		isc_api_reply_err(c, &err);
	else
		isc_api_reply_json(c, 200,
		                   json_pack("{s:s,s:b}", "id", e.id, "cancel_requested", 1));
	isc_experiment_cleanup(&e);
}

/*
 * A problem with the launch file: "FILE: error: FIELD: message" in "problems",
 * which isc prints as it printed it before the API (no "isc: error:" prefix).
 */
static void reply_problem(struct isc_api_call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply_problem(struct isc_api_call *c, int status, const char *fmt, ...)
{
	char msg[ISC_ERR_MSG_MAX], line[ISC_ERR_MSG_MAX + 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s\n", msg);
	isc_api_reply_json(c, status,
	                   json_pack("{s:s,s:s,s:s}", "error", msg, "code",
	                             status == 404 ? "not_found" : "invalid", "problems", line));
}

/*
 * The project the launch file names, among those of orgs where the caller may launch.
 * Returns 1 with *out; LAUNCH_PROJECT_UNKNOWN when the file names none of them, or
 * LAUNCH_PROJECT_AMBIGUOUS when its name is several, the problem at isc_project_id's line
 * and column in *found, with the nearest name the caller may use; 0 when it replied (the
 * store failed, or the caller may not launch there).
 */
enum { LAUNCH_PROJECT_UNKNOWN = -1, LAUNCH_PROJECT_AMBIGUOUS = -2 };

static int launch_project(struct isc_api_call *c, const struct isc_launch *l,
                          struct isc_launch_problems *found, struct isc_project *out)
{
	const char *id_or_name = l->project_id;
	struct isc_project *list = NULL;
	struct isc_suggest near;
	struct isc_err err;
	size_t n = 0, matches = 0, by_name = 0;
	char near_name[ISC_ERR_MSG_MAX / 4] = "";
	int rc;

	isc_err_clear(&err);
	if (isc_store_project_list(c->store, NULL, &list, &n, &err)) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	for (size_t i = 0; i < n && !matches; i++)
		if (strcmp(list[i].id, id_or_name) == 0 && isc_api_role(c, list[i].org_id)) {
			*out = list[i];
			memset(&list[i], 0, sizeof(list[i]));
			matches = 1;
		}
	isc_suggest_init(&near, id_or_name, strlen(id_or_name));
	for (size_t i = 0; i < n && !matches; i++)
		if (isc_api_role(c, list[i].org_id)) {
			isc_suggest_consider(&near, list[i].name);
			if (strcmp(list[i].name, id_or_name) == 0 && by_name++ == 0) {
				*out = list[i];
				memset(&list[i], 0, sizeof(list[i]));
			}
		}
	/* near.best points into list, which is freed next. */
	if (near.best)
		snprintf(near_name, sizeof(near_name), "%s", near.best);
	isc_project_list_free(list, n);
	if (c->status)
		return 0;
	if (by_name > 1) {
		isc_project_cleanup(out);
		if (isc_launch_problems_add(found, 0, l->project_pos.line, l->project_pos.col,
		                            "isc_project_id",
		                            "%zu projects are named '%s' (in different "
		                            "organisations): use the project id",
		                            by_name, id_or_name))
			goto nomem;
		return LAUNCH_PROJECT_AMBIGUOUS;
	}
	if (!matches && !by_name) {
		if (isc_launch_problems_add(
		        found, 0, l->project_pos.line, l->project_pos.col, "isc_project_id",
		        "no project with id or name '%s'%s%s%s", id_or_name,
		        *near_name ? "; did you mean '" : "", near_name, *near_name ? "'?" : ""))
			goto nomem;
		return LAUNCH_PROJECT_UNKNOWN;
	}
	rc = isc_api_require_org_role(c, out->org_id, ISC_ROLE_MEMBER | ISC_ROLE_ADMIN,
	                              "no such project");
	if (!rc)
		isc_project_cleanup(out);
	return rc;
nomem:
	isc_api_reply_error(c, 500, "out of memory");
	return 0;
}

/*
 * Every entry of dataset_id_list in the project's organisation and Available: each one
 * that is not is a problem at its line and column in *found. Returns 1, or 0 when it
 * replied (the store failed).
 */
static int check_datasets(struct isc_api_call *c, const struct isc_launch *l,
                          const struct isc_project *p, struct isc_launch_problems *found)
{
	for (size_t i = 0; i < l->dataset_ids.len; i++) {
		const struct isc_launch_pos *at = &l->dataset_ids.pos[i];
		struct isc_dataset ds = {0};
		struct isc_err err;
		char field[40];
		int rc;

		isc_err_clear(&err);
		rc = isc_dataset_resolve_one(c->store, p->org_name, l->dataset_ids.items[i], &ds,
		                             &err);
		isc_dataset_cleanup(&ds);
		if (rc && rc != ISC_ENOTFOUND && rc != ISC_ECONFLICT) {
			isc_api_reply_err(c, &err);
			return 0;
		}
		snprintf(field, sizeof(field), "dataset_id_list[%zu]", at->index);
		if (rc &&
		    isc_launch_problems_add(found, 0, at->line, at->col, field, "%s", err.msg)) {
			isc_api_reply_error(c, 500, "out of memory");
			return 0;
		}
	}
	return 1;
}

/* Drops the ids of the priority list that name no shape, keeping the user's order. */
static void keep_existing(struct isc_strlist *list, const struct isc_priority_verdict *v)
{
	size_t at = 0;
	for (size_t i = 0; i < list->len; i++) {
		if (!v->exists[i]) {
			free(list->items[i]);
			continue;
		}
		list->items[at] = list->items[i];
		list->pos[at++] = list->pos[i];
	}
	list->len = at;
}

/*
 * A burst's priority list against the catalog and what this broker can place
 * (docs/shapes.md): a list none of whose ids names a shape, or none of whose
 * shapes can be placed, is refused: its lines become errors in *found and the
 * verdict's unpositioned line goes to *tail, so they are answered with every other
 * problem of the file. Otherwise the unknown ids are dropped from l, their lines are
 * warnings in *found, *warnings gets them as FILE:LINE:COL lines for the caller and
 * *skipped the timeline's note (both owned, may stay NULL). Returns 1 to go on, 0
 * when it replied (the catalog or config.toml could not be read).
 */
static int check_priority(struct isc_api_call *c, const char *file, struct isc_launch *l,
                          struct isc_launch_problems *found, struct isc_buf *tail, char **warnings,
                          char **skipped)
{
	struct isc_launch_problems probs;
	struct isc_priority_verdict v = {0};
	struct isc_catalog *cat = NULL;
	struct isc_config *cfg = NULL;
	struct isc_placeable *pl = NULL;
	struct isc_buf out;
	struct isc_err err;
	int ok = 1;

	if (l->burst_shapes.len == 0)
		return 1;
	isc_launch_problems_init(&probs);
	isc_buf_init(&out, 0);
	isc_err_clear(&err);
	if (isc_catalog_load(c->store, &cat, &err) || isc_config_load(c->home, &cfg, &err) ||
	    isc_placeable_new(cfg, &pl, &err) ||
	    isc_priority_check(cat, pl, &l->burst_shapes, &probs, &v, &err)) {
		isc_api_reply_err(c, &err);
		ok = 0;
		goto out;
	}
	/* A list the user wrote is a constraint: no fallback to other shapes. */
	for (size_t i = 0; i < probs.len; i++) {
		struct isc_launch_problem *pr = &probs.items[i];
		if (v.n_exist == 0 || v.n_placeable == 0)
			pr->warning = 0;
		if (isc_launch_problems_add(found, pr->warning, pr->line, pr->col, pr->field, "%s",
		                            pr->msg)) {
			isc_api_reply_error(c, 500, "out of memory");
			ok = 0;
			goto out;
		}
	}
	if (v.n_exist == 0 || v.n_placeable == 0) {
		if (v.n_exist == 0)
			isc_buf_printf(
			    tail,
			    "%s: error: burst_shape_priority_list: none of its %zu id(s) names "
			    "a shape of the catalog (isc shapes lists them); nothing was "
			    "created\n",
			    file, v.n_ids);
		else
			isc_buf_printf(
			    tail,
			    "%s: error: burst_shape_priority_list: none of its shapes can be "
			    "placed by this broker; nothing was created\n",
			    file);
		goto out;
	}
	if (probs.len > 0) {
		isc_launch_problems_write(&probs, file, &out);
		*warnings = strdup(isc_buf_cstr(&out));
	}
	if (v.n_exist < v.n_ids) {
		struct isc_buf msg;
		isc_buf_init(&msg, 0);
		const char *sep = "";
		isc_buf_printf(&msg, "skipped %zu of the %zu id(s) of burst_shape_priority_list:",
		               v.n_ids - v.n_exist, v.n_ids);
		for (size_t i = 0; i < probs.len; i++) {
			const char *index = strchr(probs.items[i].field, '[');
			if (strncmp(probs.items[i].msg, "no shape", 8) != 0)
				continue;
			isc_buf_printf(&msg, "%s %s %s", sep, index ? index : "",
			               probs.items[i].msg);
			sep = ";";
		}
		*skipped = strdup(isc_buf_cstr(&msg));
		isc_buf_cleanup(&msg);
		keep_existing(&l->burst_shapes, &v);
	}
out:
	isc_buf_cleanup(&out);
	isc_priority_verdict_cleanup(&v);
	isc_placeable_free(pl);
	isc_config_free(cfg);
	isc_catalog_free(cat);
	isc_launch_problems_cleanup(&probs);
	return ok;
}

static int any_error(const struct isc_launch_problems *p)
{
	for (size_t i = 0; i < p->len; i++)
		if (!p->items[i].warning)
			return 1;
	return 0;
}

/*
 * POST /v1/experiments?file=NAME[&default_mode=burst][&dry_run=1]: the body is the
 * launch file (at most 1 MiB). Problems are answered 400 with every
 * "FILE:LINE:COL: error: FIELD: message" line in "problems". dry_run=1 (isc validate)
 * runs every check and answers 200 without recording anything: one set of checks, so
 * validate can never pass a file burst refuses.
 */
static void experiments_create(struct isc_api_call *c)
{
	const char *file = isc_api_query(c, "file"), *dm = isc_api_query(c, "default_mode");
	const char *dry = isc_api_query(c, "dry_run");
	int burst = dm && strcmp(dm, "burst") == 0, dry_run = dry && strcmp(dry, "1") == 0;
	struct isc_launch_problems problems;
	struct isc_launch *l = NULL;
	struct isc_project p = {0};
	struct isc_experiment e = {0};
	struct isc_err err;
	char *text = NULL, *spec = NULL, *id = NULL, *output = NULL;
	char *warnings = NULL, *skipped = NULL;
	struct isc_launch_problems found; /* what the checks after parsing found */
	struct isc_buf tail;              /* their lines without a position */
	size_t len = c->body_len;
	json_t *o = NULL, *o2;
	int known = 0, status;

	if (!file || !*file)
		file = "launch.isc";
	isc_launch_problems_init(&problems);
	isc_launch_problems_init(&found);
	isc_buf_init(&tail, 0);
	isc_err_clear(&err);
	if (len > ISC_LAUNCH_MAX_FILE_BYTES) {
		isc_api_reply_error(c, 413, "%s: larger than %zu bytes", file,
		                    (size_t)ISC_LAUNCH_MAX_FILE_BYTES);
		goto out;
	}
	if (!(text = malloc(len + 1))) {
		isc_api_reply_error(c, 500, "out of memory");
		goto out;
	}
	memcpy(text, c->body, len);
	text[len] = 0;
	if (burst && isc_launch_default_burst(&text, &len, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	if (isc_launch_parse(file, text, len, &l, &problems, &err)) {
		if (problems.len > 0) {
			struct isc_buf out;
			isc_buf_init(&out, 0);
			isc_launch_problems_write(&problems, file, &out);
			isc_api_reply_json(c, 400,
			                   json_pack("{s:s,s:s,s:s}", "error", err.msg, "code",
			                             "invalid", "problems", isc_buf_cstr(&out)));
			isc_buf_cleanup(&out);
		} else {
			isc_api_reply_err(c, &err);
		}
		goto out;
	}
	if (burst && l->compute_mode != ISC_MODE_BURST) {
		reply_problem(c, 400,
		              "%s: error: compute_mode: isc burst needs compute_mode = \"burst\" "
		              "(or none), not \"%s\"",
		              file, isc_compute_mode_name(l->compute_mode));
		goto out;
	}
	if (burst && l->gpus > ISC_LAUNCH_MAX_BURST_GPUS) {
		reply_problem(c, 400,
		              "%s: error: gpus: burst requests are limited to 48 GPUs, not %d",
		              file, l->gpus);
		goto out;
	}
	/* Every check runs and every problem is answered at once, each at its position: the
	 * project, the priority list, then (in the project's organisation) each dataset, which
	 * must be Available before anything is queued. */
	if (!(known = launch_project(c, l, &found, &p)))
		goto out;
	if (known > 0)
		isc_api_audit_target(c, p.org_id, NULL);
	if (l->compute_mode == ISC_MODE_BURST &&
	    !check_priority(c, file, l, &found, &tail, &warnings, &skipped))
		goto out;
	if (known > 0 && !check_datasets(c, l, &p, &found))
		goto out;
	if (any_error(&found) || tail.len) {
		struct isc_buf out;
		isc_buf_init(&out, 0);
		isc_launch_problems_sort(&found);
		isc_launch_problems_write(&found, file, &out);
		if (known < 0 && l->dataset_ids.len)
			isc_buf_printf(
			    &out,
			    "%s: note: dataset_id_list: not checked, as the project (and "
			    "so its organisation) is not known\n",
			    file);
		isc_buf_printf(&out, "%s", isc_buf_cstr(&tail));
		/* A project the caller cannot see is not found (404), whether it does not exist
		 * or is another organisation's (docs/api.md): the same answer either way, with
		 * every other problem of the file beside it. */
		status = known == LAUNCH_PROJECT_UNKNOWN ? 404 : 400;
		isc_api_reply_json(c, status,
		                   json_pack("{s:s,s:s,s:s}", "error", "launch file", "code",
		                             status == 404 ? "not_found" : "invalid", "problems",
		                             isc_buf_cstr(&out)));
		isc_buf_cleanup(&out);
		goto out;
	}
	if (dry_run) {
		o2 = json_pack("{s:b,s:s,s:s}", "valid", 1, "name", l->experiment_name,
		               "project_id", p.id);
		if (warnings)
			json_object_set_new(o2, "warnings", json_string(warnings));
		isc_api_reply_json(c, 200, o2);
		goto out;
	}
	o = isc_launch_to_json(l);
	spec = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	id = isc_store_new_id("exp_");
	/*
	 * The Output Path (rank logs, and rank 0's folders by default): artifact_root/ID when
	 * set, a folder every replica reaches (docs/ha.md), else this home's experiments/ID.
	 */
	if (spec && id) {
		const struct isc_config *cfg = isc_api_config(c, &err);
		output = cfg ? isc_config_artifact_dir(cfg, c->home, id) : NULL;
		if (!output && !cfg) {
			isc_api_reply_err(c, &err);
			goto out;
		}
	}
	if (!spec || !id || !output) {
		isc_api_reply_error(c, 500, "out of memory");
		goto out;
	}
	e.id = id;
	e.project_id = p.id;
	e.org_id = p.org_id;
	e.name = l->experiment_name;
	e.compute_mode = (char *)isc_compute_mode_name(l->compute_mode);
	e.gpus = l->gpus;
	e.spec_json = spec;
	e.status = "enqueued";
	e.output_path = output;
	isc_api_audit_target(c, p.org_id, id);
	/* The row, its owner and the note of what its list skipped in one transaction: no
	 * moment where a member cannot see it. */
	if (isc_store_begin(c->store, &err) || isc_store_experiment_add(c->store, &e, &err) ||
	    isc_store_experiment_set_owner(c->store, id, c->is_operator ? "" : c->user, &err) ||
	    (skipped && isc_store_event_add(c->store, id, "priority", skipped, &err)) ||
	    isc_store_commit(c->store, &err)) {
		isc_store_rollback(c->store);
		isc_api_reply_err(c, &err);
		goto out;
	}
	o2 = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "name", l->experiment_name, "project_id",
	               p.id, "status", "enqueued");
	if (warnings)
		json_object_set_new(o2, "warnings", json_string(warnings));
	isc_api_reply_json(c, 201, o2);
out:
	free(warnings);
	free(skipped);
	json_decref(o);
	free(text);
	free(spec);
	free(id);
	free(output);
	isc_project_cleanup(&p);
	isc_launch_free(l);
	isc_launch_problems_cleanup(&problems);
	isc_launch_problems_cleanup(&found);
	isc_buf_cleanup(&tail);
}

/*
 * DELETE /v1/experiments/ID/artifacts (issue 45): the experiment's checkpoint versions
 * in the bucket, objects and manifests. An admin of its organisation or the operator
 * (a member, even its owner, gets 403); the call is audited, refused ones too. A
 * running experiment's are kept (409): its next sync would make a version again.
 */
static void experiment_artifacts_delete(struct isc_api_call *c)
{
	struct isc_experiment e;
	struct isc_err err;
	const struct isc_config *cfg;
	size_t objects = 0;

	isc_err_clear(&err);
	if (isc_store_experiment_get(c->store, c->params[0], &e, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	isc_api_audit_target(c, e.org_id, e.id);
	if (!isc_api_require_org_role(c, e.org_id, ISC_ROLE_ADMIN, "no such experiment")) {
		isc_experiment_cleanup(&e);
		return;
	}
	if (strcmp(e.status, "completed") && strcmp(e.status, "failed") &&
	    strcmp(e.status, "cancelled") && strcmp(e.status, "stopped")) {
		isc_api_reply_error(
		    c, 409,
		    "experiment %s is %s: its artifacts are deleted once it has ended "
		    "(cancel it first)",
		    e.id, e.status);
	} else if (!(cfg = isc_api_config(c, &err)) ||
	           isc_artifacts_s3_delete(cfg, c->store, e.id, e.org_id, &objects, &err)) {
		isc_api_reply_err(c, &err);
	} else {
		isc_api_reply_json(
		    c, 200,
		    json_pack("{s:s,s:I}", "id", e.id, "objects_deleted", (json_int_t)objects));
	}
	isc_experiment_cleanup(&e);
}

const struct isc_api_route isc_api_routes_experiments[] = {
    {"GET", "/v1/experiments", experiments_list},
    {"POST", "/v1/experiments", experiments_create},
    {"GET", "/v1/experiments/{}", experiment_get},
    {"GET", "/v1/experiments/{}/events", experiment_events},
    {"GET", "/v1/experiments/{}/logs", experiment_logs},
    {"POST", "/v1/experiments/{}/cancel", experiment_cancel},
    {"DELETE", "/v1/experiments/{}/artifacts", experiment_artifacts_delete, ISC_API_SLOW},
    {NULL, NULL, NULL},
};
