/*
 * isc shapes: the ranked shape list for a request, as the broker would rank
 * it (priority list first, price second), with the node layout and the
 * cluster price. Unknown ids of --priority are warnings on stderr. iscd ranks
 * (GET /v1/shapes); this renders.
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "shapes/accelerator.h"
#include "shapes/catalog.h"

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
	       "                  [--min-gpu-memory SIZE] [--limit K] [--placeable]\n"
	       "                  [--rank price|work|expected] [--json]\n"
	       "       isc shapes --refresh-risk [--gpus G]   (the operator's)\n\n"
	       "Ranks the catalog's shapes for a burst of G GPUs (1..48): the shapes of\n"
	       "--priority in that order when any of them exists, else every shape that passes\n"
	       "the filters by cluster price (NNODES x node price), then fewer nodes, then id.\n"
	       "NNODES is the smallest divisor of G that is >= ceil(G / GPUs per node).\n"
	       "Without --gpus each shape is listed as one node. Prices are USD per hour.\n"
	       "Only accelerators that run CUDA images (NVIDIA) are ranked unless --gpu-type\n"
	       "names others (e.g. --gpu-type mi300x); see docs/shapes.md. --min-gpu-memory\n"
	       "keeps shapes with at least SIZE per GPU (40G, 80Gi, ...).\n"
	       "Shapes this broker cannot place (no driver or credentials for the provider,\n"
	       "no [providers.NAME] in iscd's config.toml, a region it does not list) come\n"
	       "after the others, each with why; --placeable shows only the ones it can place.\n"
	       "--rank orders what the priority list does not, as burst_rank does for a burst:\n"
	       "price (default), work (cost per A100-80GB-hour of training work), expected\n"
	       "(that cost with the risk of losing the nodes); see docs/shapes.md. Each row\n"
	       "shows the GPU's relative throughput and what is known of the risk, with\n"
	       "its source. --refresh-risk has iscd ask the clouds now (AWS Spot Advisor and\n"
	       "placement scores for G GPUs' gangs, OCI capacity reports) and recount its own\n"
	       "interruptions.\n"
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

/* "1.72 lambda", "unknown": the relative throughput and where it comes from. */
static void tput_cell(json_t *e, char *out, size_t cap)
{
	json_t *t = json_object_get(e, "throughput");
	const char *src = json_string_value(json_object_get(e, "throughput_source"));
	if (!json_is_number(t))
		snprintf(out, cap, "unknown");
	else
		snprintf(out, cap, "%.2f %s", json_number_value(t),
		         src && !strncmp(src, "Lambda", 6) ? "lambda" : "table");
}

/*
 * What is known of the risk, each part with its source: "band <5% advisor, score 7/10
 * (2 nodes), capacity AVAILABLE 4 oci, 1 int/30d history"; "on-demand" or "unknown".
 */
static void risk_cell(json_t *r, char *out, size_t cap)
{
	json_t *band = json_object_get(r, "band"), *score = json_object_get(r, "score");
	json_t *capy = json_object_get(r, "capacity"), *hist = json_object_get(r, "history");
	size_t at = 0;
	out[0] = '\0';
#define PART(...)                                                                                  \
	do {                                                                                       \
		int k = snprintf(out + at, cap - at, "%s", at ? ", " : "");                        \
		if (k > 0 && (size_t)k < cap - at)                                                 \
			at += (size_t)k;                                                           \
		k = snprintf(out + at, cap - at, __VA_ARGS__);                                     \
		if (k > 0 && (size_t)k < cap - at)                                                 \
			at += (size_t)k;                                                           \
	} while (0)
	if (json_is_object(band))
		PART("band %s advisor", isc_json_str(band, "label"));
	if (json_is_object(score))
		PART("score %lld/10 (%lld nodes%s%s)",
		     (long long)json_integer_value(json_object_get(score, "score")),
		     (long long)json_integer_value(json_object_get(score, "target_capacity")),
		     *isc_json_str(score, "zone") ? " in " : "", isc_json_str(score, "zone"));
	if (json_is_object(capy))
		PART("%s %lld oci", isc_json_str(capy, "status"),
		     (long long)json_integer_value(json_object_get(capy, "available")));
	if (json_is_number(json_object_get(r, "obtainability")))
		PART("obtainable %.2f gcp", json_number_value(json_object_get(r, "obtainability")));
	if (json_is_object(hist))
		PART("%lld int/%lldh history",
		     (long long)json_integer_value(json_object_get(hist, "interruptions_30d")),
		     (long long)json_integer_value(json_object_get(hist, "node_hours_30d")));
#undef PART
	if (!at)
		snprintf(out, cap, "%s",
		         !strcmp(isc_json_str(r, "rate_source"), "on-demand") ? "on-demand"
		                                                              : "unknown");
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

int cmd_shapes(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_rank_request req = {0};
	const char *prio_text = NULL, *market = NULL, *rank_mode = NULL;
	char *path = NULL, num[32];
	json_t *reply = NULL, *shapes, *e;
	size_t k;
	int json = 0, only_placeable = 0, refresh_risk = 0, rc;
	long v;

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
		if (!strcmp(a, "--refresh-risk")) {
			refresh_risk = 1;
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
			/* iscd splits and checks the ids (GET /v1/shapes?priority=). */
			prio_text = val;
		} else if (!strcmp(a, "--provider")) {
			if (!isc_provider_valid(val)) {
				rc = isc_cli_usage_error(
				    "shapes", "--provider: '%s' is not aws, gcp or oci", val);
				goto out;
			}
			req.provider = val;
		} else if (!strcmp(a, "--market")) {
			market = val;
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
		} else if (!strcmp(a, "--rank")) {
			if (isc_rank_mode_parse(val, &req.mode)) {
				rc = isc_cli_usage_error(
				    "shapes", "--rank: '%s' is not price, work or expected", val);
				goto out;
			}
			rank_mode = val;
		} else if (!strcmp(a, "--region")) {
			req.region = val;
		} else if (!strcmp(a, "--limit")) {
			if (parse_int(val, 0, 1000000000, &v)) {
				rc = isc_cli_usage_error("shapes", "--limit: '%s' is not a count",
				                         val);
				goto out;
			}
			req.limit = (size_t)v;
		} else {
			rc = isc_cli_usage_error("shapes", "unknown option '%s'", a);
			goto out;
		}
	}

	if (refresh_risk) {
		if (!(path = strdup("/v1/shapes/risk")) ||
		    (req.gpus && (snprintf(num, sizeof(num), "%d", req.gpus) < 0 ||
		                  isc_client_query_add(&path, "gpus", num)))) {
			rc = ISC_EXIT_FAIL;
			goto out;
		}
		if ((rc = isc_client_json(cli, "POST", path, NULL, &reply)))
			goto out;
		if (json)
			isc_json_print(reply, stdout);
		else
			printf("%lld question(s), %lld fact(s) stored, %lld without a source, %lld "
			       "failed%s%s; history: %lld shape-zone(s)\n",
			       (long long)json_integer_value(json_object_get(reply, "calls")),
			       (long long)json_integer_value(json_object_get(reply, "facts")),
			       (long long)json_integer_value(json_object_get(reply, "none")),
			       (long long)json_integer_value(json_object_get(reply, "failed")),
			       *isc_json_str(reply, "last_error") ? ": " : "",
			       isc_json_str(reply, "last_error"),
			       (long long)json_integer_value(json_object_get(reply, "history")));
		rc = json_integer_value(json_object_get(reply, "failed")) ? ISC_EXIT_FAIL
		                                                          : ISC_EXIT_OK;
		goto out;
	}
	if (!(path = strdup("/v1/shapes")) ||
	    (req.gpus && (snprintf(num, sizeof(num), "%d", req.gpus) < 0 ||
	                  isc_client_query_add(&path, "gpus", num))) ||
	    isc_client_query_add(&path, "priority", prio_text) ||
	    isc_client_query_add(&path, "provider", req.provider) ||
	    isc_client_query_add(&path, "market", market) ||
	    isc_client_query_add(&path, "gpu_type", req.gpu_type) ||
	    isc_client_query_add(&path, "region", req.region) ||
	    isc_client_query_add(&path, "rank", rank_mode) ||
	    (req.min_gpu_mem_mib &&
	     (snprintf(num, sizeof(num), "%lld", (long long)req.min_gpu_mem_mib) < 0 ||
	      isc_client_query_add(&path, "min_gpu_mem_mib", num))) ||
	    (req.limit && (snprintf(num, sizeof(num), "%zu", req.limit) < 0 ||
	                   isc_client_query_add(&path, "limit", num))) ||
	    isc_client_query_add(&path, "placeable", only_placeable ? "1" : NULL)) {
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if ((rc = isc_client_json(cli, "GET", path, NULL, &reply)))
		goto out;
	shapes = json_object_get(reply, "shapes");
	json_array_foreach(json_object_get(reply, "warnings"), k, e)
	    fprintf(stderr, "isc shapes: warning: %s\n", json_string_value(e));
	if (json_integer_value(json_object_get(reply, "catalog_size")) == 0)
		fprintf(stderr,
		        "isc shapes: the catalog is empty (isc init, or isc catalog import)\n");
	else if (json_array_size(shapes) == 0)
		fprintf(stderr, "isc shapes: no shape matches these filters\n");

	if (json) {
		isc_json_print(shapes, stdout);
	} else {
		static const char *const headers[] = {
		    "RANK",        "ID",        "GPU",  "GPUS/NODE", "LAYOUT",   "NODE $/H",
		    "CLUSTER $/H", "PRICE AGE", "TPUT", "RISK",      "$/A100-H", "PLACEABLE"};
		struct isc_table *t = isc_table_new(12, headers);
		const char *rank_cost_key =
		    req.mode == ISC_RANK_EXPECTED ? "expected_cost" : "work_cost";
		int any_stale = 0;
		if (!t) {
			rc = ISC_EXIT_FAIL;
			goto out;
		}
		isc_table_align_right(t, 5);
		isc_table_align_right(t, 6);
		isc_table_align_right(t, 10);
		json_array_foreach(shapes, k, e)
		{
			char rank[24], gpn[24], layout[48], age[48], agebuf[16], place[600];
			const char *src = json_string_value(json_object_get(e, "price_source"));
			int stale = json_is_true(json_object_get(e, "price_stale"));
			const char *cells[12];
			char tput[48], risk[160];
			any_stale |= stale;
			snprintf(rank, sizeof(rank), "%zu", k + 1);
			snprintf(
			    gpn, sizeof(gpn), "%lld",
			    (long long)json_integer_value(json_object_get(e, "gpus_per_node")));
			snprintf(layout, sizeof(layout), "%lldx%lld",
			         (long long)json_integer_value(json_object_get(e, "nnodes")),
			         (long long)json_integer_value(json_object_get(e, "nproc")));
			age_format(json_integer_value(json_object_get(e, "price_age_s")) * 1000,
			           agebuf);
			snprintf(age, sizeof(age), "%s%s %s", agebuf, stale ? "*" : "",
			         src ? src : "catalog");
			cells[0] = rank;
			cells[1] = json_string_value(json_object_get(e, "id"));
			cells[2] = json_string_value(json_object_get(e, "gpu_type"));
			cells[3] = gpn;
			cells[4] = layout;
			/* Prices per hour as iscd's 6-place decimals, so the column lines up and
			 * is exact. */
			cells[5] = isc_json_str(e, "node_price");
			cells[6] = isc_json_str(e, "cluster_price");
			cells[7] = age;
			tput_cell(e, tput, sizeof(tput));
			risk_cell(json_object_get(e, "risk"), risk, sizeof(risk));
			cells[8] = tput;
			cells[9] = risk;
			/* the mode's cost per unit of work (the plain one in modes price and work)
			 */
			cells[10] = json_is_string(json_object_get(e, rank_cost_key))
			                ? isc_json_str(e, rank_cost_key)
			                : "-";
			/* A shape iscd cannot place says why, so nobody picks it by its price. */
			if (json_is_false(json_object_get(e, "placeable")))
				snprintf(place, sizeof(place), "no: %s",
				         json_string_value(json_object_get(e, "why")));
			else
				snprintf(place, sizeof(place), "yes");
			cells[11] = place;
			isc_table_add(t, cells);
		}
		isc_table_print(t, stdout);
		isc_table_free(t);
		if (any_stale)
			fprintf(stderr,
			        "isc shapes: * price older than price_refresh_ms; 'isc catalog "
			        "refresh' reads live spot prices\n");
		/* A source whose last read failed: its prices are the last ones read, this old. */
		json_array_foreach(json_object_get(reply, "price_sources"), k, e)
		{
			const char *why = json_string_value(json_object_get(e, "error"));
			char agebuf[16];
			json_int_t ok_age = json_integer_value(json_object_get(e, "ok_age_s"));
			if (!why || !*why)
				continue;
			if (ok_age >= 0) {
				age_format(ok_age * 1000, agebuf);
				fprintf(stderr,
				        "isc shapes: %s: the last refresh failed (%s); its prices "
				        "were read %s ago\n",
				        json_string_value(json_object_get(e, "source")), why,
				        agebuf);
			} else {
				fprintf(stderr,
				        "isc shapes: %s: the last refresh failed (%s); never read, "
				        "so its shapes keep their catalog prices\n",
				        json_string_value(json_object_get(e, "source")), why);
			}
		}
	}
	rc = ISC_EXIT_OK;
out:
	json_decref(reply);
	free(path);
	return rc;
}
