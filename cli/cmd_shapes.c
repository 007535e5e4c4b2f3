/*
 * isc shapes: the ranked shape list for a request, as the broker would rank
 * it (priority list first, price second), with the node layout and the
 * cluster price. Unknown ids of --priority are warnings on stderr.
 */
#include "cli/commands.h"
#include "shapes/accelerator.h"
#include "shapes/catalog.h"
#include "common/clock.h"
#include "config/config.h"
#include "providers/placeable.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
	printf("usage: isc shapes [--gpus G] [--priority ID,ID,...] [--provider aws|gcp|oci]\n"
	       "                  [--market spot|ondemand|any] [--gpu-type T[,T...]] [--region R]\n"
	       "                  [--min-gpu-memory SIZE] [--limit K] [--placeable] [--json]\n\n"
	       "Ranks the catalog's shapes for a burst of G GPUs (1..48): the shapes of\n"
	       "--priority in that order when any of them exists, else every shape that passes\n"
	       "the filters by cluster price (NNODES x node price), then fewer nodes, then id.\n"
	       "NNODES is the smallest divisor of G that is >= ceil(G / GPUs per node).\n"
	       "Without --gpus each shape is listed as one node. Prices are USD per hour.\n"
	       "Only accelerators that run CUDA images (NVIDIA) are ranked unless --gpu-type\n"
	       "names others (e.g. --gpu-type mi300x); see docs/shapes.md. --min-gpu-memory\n"
	       "keeps shapes with at least SIZE per GPU (40G, 80Gi, ...).\n"
	       "Shapes this broker cannot place (no driver or credentials for the provider,\n"
	       "no [providers.NAME] in config.toml, a region it does not list) come after the\n"
	       "others, each with why; --placeable shows only the ones it can place.\n"
	       "--json prints an array of objects, best first (prices in integer micro-dollars;\n"
	       "\"placeable\" and, when false, \"why\").\n");
}

/* "42s", "5m", "3h", "12d": the age of a price, for a table. */
static void age_format(int64_t age_ms, char out[16])
{
	int64_t s = age_ms > 0 ? age_ms / 1000 : 0;
	if (s < 60)
		snprintf(out, 16, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(out, 16, "%lldm", (long long)(s / 60));
	else if (s < 86400 * 2)
		snprintf(out, 16, "%lldh", (long long)(s / 3600));
	else
		snprintf(out, 16, "%lldd", (long long)(s / 86400));
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* Splits "a,b,,c" into ids (empty items dropped); *ids points into buf. */
static int split_ids(char *buf, char ***ids, size_t *n)
{
	size_t cap = 1;
	for (char *p = buf; *p; p++)
		cap += *p == ',';
	if (!(*ids = calloc(cap, sizeof(**ids))))
		return -1;
	*n = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		if (*t)
			(*ids)[(*n)++] = t;
	}
	return 0;
}

/*
 * Moves the shapes this broker can place before the others (a stable
 * partition: each group keeps its ranking), drops the others when
 * only_placeable, then keeps at most limit (0: all). (*why)[i] is NULL for a
 * placeable entry, else why not (owned).
 */
static int placeable_first(struct isc_placeable *pl, struct isc_ranking *r, int only_placeable,
                           size_t limit, char ***why, struct isc_err *err)
{
	struct isc_rank_entry *sorted = calloc(r->n ? r->n : 1, sizeof(*sorted));
	char **reasons = calloc(r->n ? r->n : 1, sizeof(*reasons)), **ordered;
	size_t at = 0;

	ordered = calloc(r->n ? r->n : 1, sizeof(*ordered));
	if (!sorted || !reasons || !ordered)
		goto oom;
	for (size_t i = 0; i < r->n; i++) {
		char buf[ISC_ERR_MSG_MAX];
		if (!isc_placeable_check(pl, r->entries[i].shape->provider,
		                         r->entries[i].shape->region, buf, sizeof(buf)) &&
		    !(reasons[i] = strdup(buf)))
			goto oom;
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < r->n; i++)
			if ((reasons[i] == NULL) == (pass == 0) && (pass == 0 || !only_placeable)) {
				sorted[at] = r->entries[i];
				ordered[at++] = reasons[i];
				reasons[i] = NULL;
			}
	for (size_t i = 0; i < r->n; i++)
		free(reasons[i]); /* the unplaceable ones --placeable dropped */
	free(reasons);
	if (limit && at > limit) {
		for (size_t i = limit; i < at; i++)
			free(ordered[i]);
		at = limit;
	}
	free(r->entries);
	r->entries = sorted;
	r->n = at;
	*why = ordered;
	return 0;
oom:
	for (size_t i = 0; reasons && i < r->n; i++)
		free(reasons[i]);
	free(reasons);
	free(ordered);
	free(sorted);
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}

int cmd_shapes(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_rank_request req = {0};
	struct isc_ranking r = {0};
	struct isc_catalog *cat = NULL;
	struct isc_store *s;
	struct isc_err err;
	char *prio_buf = NULL, **prio = NULL;
	size_t n_prio = 0;
	int json = 0, only_placeable = 0, rc;
	size_t limit = 0;
	char **why = NULL; /* per entry: NULL when placeable, else why not */
	struct isc_placeable *pl = NULL;
	long v;
	struct isc_config *cfg = NULL;
	int64_t stale_ms = 3600000, now;

	if (isc_cli_wants_help(argc, argv)) {
		usage();
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(a, "--placeable")) {
			only_placeable = 1;
			continue;
		}
		if (strncmp(a, "--", 2) || !strcmp(a, "--")) {
			rc = isc_cli_usage_error("shapes", "unexpected argument '%s'", a);
			goto out;
		}
		if (!val) {
			rc = isc_cli_usage_error("shapes", "%s needs a value", a);
			goto out;
		}
		i++;
		if (!strcmp(a, "--gpus")) {
			if (parse_int(val, 1, INT_MAX, &v)) {
				rc = isc_cli_usage_error("shapes",
				                         "--gpus: '%s' is not a GPU count (1..%d)",
				                         val, ISC_BURST_GPUS_MAX);
				goto out;
			}
			if (v > ISC_BURST_GPUS_MAX) {
				rc = isc_cli_usage_error(
				    "shapes", "--gpus: burst requests are limited to %d GPUs",
				    ISC_BURST_GPUS_MAX);
				goto out;
			}
			req.gpus = (int)v;
		} else if (!strcmp(a, "--priority")) {
			free(prio_buf);
			free(prio);
			prio = NULL;
			if (!(prio_buf = strdup(val)) || split_ids(prio_buf, &prio, &n_prio)) {
				isc_cli_errorf("out of memory");
				rc = ISC_EXIT_FAIL;
				goto out;
			}
		} else if (!strcmp(a, "--provider")) {
			if (!isc_provider_valid(val)) {
				rc = isc_cli_usage_error(
				    "shapes", "--provider: '%s' is not aws, gcp or oci", val);
				goto out;
			}
			req.provider = val;
		} else if (!strcmp(a, "--market")) {
			if (isc_market_parse(val, &req.market)) {
				rc = isc_cli_usage_error(
				    "shapes", "--market: '%s' is not spot, ondemand or any", val);
				goto out;
			}
		} else if (!strcmp(a, "--gpu-type")) {
			req.gpu_type = val;
		} else if (!strcmp(a, "--min-gpu-memory")) {
			int64_t bytes;
			if (isc_size_parse(val, &bytes)) {
				rc =
				    isc_cli_usage_error("shapes",
				                        "--min-gpu-memory: '%s' is not a size such "
				                        "as 40G or 80Gi",
				                        val);
				goto out;
			}
			req.min_gpu_mem_mib = (bytes + 1048575) / 1048576;
		} else if (!strcmp(a, "--region")) {
			req.region = val;
		} else if (!strcmp(a, "--limit")) {
			if (parse_int(val, 0, 1000000000, &v)) {
				rc = isc_cli_usage_error("shapes", "--limit: '%s' is not a count",
				                         val);
				goto out;
			}
			limit = (size_t)v;
		} else {
			rc = isc_cli_usage_error("shapes", "unknown option '%s'", a);
			goto out;
		}
	}
	req.priority = (const char *const *)prio;
	req.n_priority = n_prio;

	if ((rc = isc_cli_store_open(cli, 0, &s)))
		goto out;
	isc_err_clear(&err);
	/* Prices older than the refresh interval are marked; defaults when there is no config. */
	if (isc_config_load(cli->home, &cfg, &err) == 0)
		stale_ms = cfg->price_refresh_ms;
	else
		fprintf(stderr, "isc shapes: warning: %s\n", err.msg);
	now = isc_clock_system()->now_ms(isc_clock_system()->ctx);
	rc = isc_catalog_load(s, &cat, &err);
	isc_store_free(s);
	/* The limit applies after the placeable shapes are moved first. */
	if (rc || (rc = isc_catalog_rank(cat, &req, &r, &err)) ||
	    (rc = isc_placeable_new(cfg, &pl, &err)) ||
	    (rc = placeable_first(pl, &r, only_placeable, limit, &why, &err))) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	for (size_t i = 0; i < r.n_warnings; i++)
		fprintf(stderr, "isc shapes: warning: %s\n", r.warnings[i]);
	if (isc_catalog_size(cat) == 0)
		fprintf(stderr,
		        "isc shapes: the catalog is empty (isc init, or isc catalog import)\n");
	else if (r.n == 0)
		fprintf(stderr, "isc shapes: no shape matches these filters\n");

	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < r.n; i++) {
			const struct isc_rank_entry *e = &r.entries[i];
			const struct isc_shape *sh = e->shape;
			const struct isc_accelerator *acc = isc_accelerator_of(sh->gpu_type);
			json_t *o = json_pack(
			    "{s:i,s:s,s:s,s:s,s:s,s:s,s:i,s:I,s:b,s:i,s:i,s:I,s:I,s:s,s:s}", "rank",
			    (int)(i + 1), "id", sh->display_id, "provider", sh->provider, "region",
			    sh->region, "instance_type", sh->instance_type, "gpu_type",
			    sh->gpu_type, "gpus_per_node", sh->gpus_per_node, "gpu_mem_mib",
			    (json_int_t)sh->gpu_mem_mib, "spot", sh->spot, "nnodes", e->nnodes,
			    "nproc", e->nproc, "node_price_micros", (json_int_t)sh->price_micros,
			    "cluster_price_micros", (json_int_t)e->cluster_price_micros, "zones",
			    sh->zones, "price_date", sh->price_date);
			json_object_set_new(o, "accelerator_vendor", json_string(acc->vendor));
			json_object_set_new(o, "accelerator_family", json_string(acc->family));
			json_object_set_new(o, "cuda", json_boolean(acc->cuda));
			json_object_set_new(
			    o, "price_source",
			    json_string(sh->price_source ? sh->price_source : "catalog"));
			json_object_set_new(o, "price_as_of_ms",
			                    json_integer(isc_shape_price_as_of_ms(sh)));
			json_object_set_new(
			    o, "price_age_s",
			    json_integer((now - isc_shape_price_as_of_ms(sh)) / 1000));
			json_object_set_new(
			    o, "price_stale",
			    json_boolean(stale_ms > 0 &&
			                 now - isc_shape_price_as_of_ms(sh) > stale_ms));
			json_object_set_new(o, "placeable", json_boolean(why[i] == NULL));
			if (why[i])
				json_object_set_new(o, "why", json_string(why[i]));
			json_array_append_new(arr, o);
		}
		json_dumpf(arr, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(arr);
	} else {
		int w = 2;
		char np[ISC_MICROS_STR_MAX], cp[ISC_MICROS_STR_MAX], layout[32];
		for (size_t i = 0; i < r.n; i++) {
			int l = (int)strlen(r.entries[i].shape->display_id);
			w = l > w ? l : w;
		}
		int any_stale = 0;
		printf("%-5s %-*s %-10s %-9s %-9s %12s %13s  %s\n", "RANK", w, "ID", "GPU",
		       "GPUS/NODE", "LAYOUT", "NODE $/H", "CLUSTER $/H", "PRICE AGE");
		for (size_t i = 0; i < r.n; i++) {
			const struct isc_rank_entry *e = &r.entries[i];
			int64_t age = now - isc_shape_price_as_of_ms(e->shape);
			int stale = stale_ms > 0 && age > stale_ms;
			char agebuf[16];
			any_stale |= stale;
			age_format(age, agebuf);
			snprintf(layout, sizeof(layout), "%dx%d", e->nnodes, e->nproc);
			printf("%-5zu %-*s %-10s %-9d %-9s %12s %13s  %s%s %s%s%s\n", i + 1, w,
			       e->shape->display_id, e->shape->gpu_type, e->shape->gpus_per_node,
			       layout, isc_micros_format(e->shape->price_micros, np),
			       isc_micros_format(e->cluster_price_micros, cp), agebuf,
			       stale ? "*" : "",
			       e->shape->price_source && !strcmp(e->shape->price_source, "live")
			           ? "live"
			           : "catalog",
			       why[i] ? "  cannot place: " : "", why[i] ? why[i] : "");
		}
		if (any_stale)
			fprintf(stderr,
			        "isc shapes: * price older than price_refresh_ms; 'isc catalog "
			        "refresh' reads live spot prices\n");
	}
	rc = ISC_EXIT_OK;
out:
	for (size_t i = 0; why && i < r.n; i++)
		free(why[i]);
	free(why);
	isc_placeable_free(pl);
	isc_config_free(cfg);
	isc_ranking_cleanup(&r);
	isc_catalog_free(cat);
	free(prio);
	free(prio_buf);
	return rc;
}
