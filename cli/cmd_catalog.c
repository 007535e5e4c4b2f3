/*
 * isc catalog: import a provider's shape catalog from a third-party file,
 * export the normalized form, and summarise what the store holds, through
 * iscd's API (GET /v1/catalog, /v1/catalog/export; the operator's POST
 * /v1/catalog/import and /v1/catalog/refresh).
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "shapes/catalog_import.h"
#include "shapes/shape.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
	printf("usage: isc catalog import FILE --format skypilot|ec2instances|isc\n"
	       "                          --provider aws|gcp|oci [--replace] [--price-date "
	       "YYYY-MM-DD]\n"
	       "       isc catalog show [--json]\n"
	       "       isc catalog export [--provider P]\n"
	       "       isc catalog refresh [--provider P] [--json]\n\n"
	       "import reads one provider's catalog in one transaction: shapes of FILE are added\n"
	       "or updated; with --replace the provider's shapes not in FILE are removed too\n"
	       "(other providers are never touched). Malformed rows are listed as FILE:LINE and\n"
	       "skipped; a file with no valid row changes nothing. --price-date stamps formats\n"
	       "without a date (default: today).\n"
	       "show prints, per provider, the number of shapes and regions and the price date.\n"
	       "export prints the store's shapes in the normalized CSV of shapes/*.csv.\n"
	       "refresh has iscd read live spot prices from each configured cloud's price API,\n"
	       "with its own credentials, for every spot shape in its configured regions (one\n"
	       "call per provider and region); iscd does the same for its candidates every\n"
	       "price_refresh_ms (docs/shapes.md). import and refresh are the operator's.\n");
}

/* The normalized CSV of shapes, in memory (what import sends to iscd). */
static int csv_of(const struct isc_catalog_parse *p, char **text, size_t *len, struct isc_err *err)
{
	FILE *f = open_memstream(text, len);
	int rc;
	if (!f)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_catalog_write_csv(f, p->shapes, p->n, err);
	if (fclose(f) != 0 && !rc)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (rc) {
		free(*text);
		*text = NULL;
	}
	return rc;
}

/*
 * The file is read and parsed here, as the caller (iscd runs as another user and
 * never opens a path the caller names): malformed rows are reported against FILE
 * here, and only the GPU shapes travel, in the normalized form, so a large
 * third-party catalog stays well under the API's body cap. iscd parses that
 * again with the same parser and writes it in one transaction.
 */
static int do_import(struct isc_cli *cli, int argc, char **argv)
{
	const char *file = NULL, *fmt_name = NULL, *provider = NULL, *date = NULL;
	enum isc_catalog_format fmt;
	struct isc_catalog_parse p;
	struct isc_reply r;
	struct isc_err err;
	char *csv = NULL, *path = NULL;
	const char *base;
	size_t csv_len = 0;
	json_t *o = NULL;
	int replace = 0, rc;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--replace")) {
			replace = 1;
		} else if (!strcmp(a, "--format") || !strcmp(a, "--provider") ||
		           !strcmp(a, "--price-date")) {
			if (i + 1 >= argc)
				return isc_cli_usage_error("catalog", "%s needs a value", a);
			const char *v = argv[++i];
			if (!strcmp(a, "--format"))
				fmt_name = v;
			else if (!strcmp(a, "--provider"))
				provider = v;
			else
				date = v;
		} else if (a[0] == '-' && a[1]) {
			return isc_cli_usage_error("catalog", "unknown option '%s'", a);
		} else if (file) {
			return isc_cli_usage_error("catalog", "unexpected argument '%s'", a);
		} else {
			file = a;
		}
	}
	if (!file)
		return isc_cli_usage_error("catalog", "import needs a FILE");
	if (!fmt_name || isc_catalog_format_parse(fmt_name, &fmt))
		return isc_cli_usage_error("catalog",
		                           "--format: '%s' is not skypilot, ec2instances or isc",
		                           fmt_name ? fmt_name : "");
	if (!isc_provider_valid(provider))
		return isc_cli_usage_error("catalog", "--provider: '%s' is not aws, gcp or oci",
		                           provider ? provider : "");
	isc_err_clear(&err);
	rc = isc_catalog_parse_file(file, fmt, provider, date, &p, &err);
	for (size_t i = 0; i < p.n_skipped; i++)
		fprintf(stderr, "isc catalog: skipped %s\n", p.skipped[i]);
	if (rc) {
		isc_catalog_parse_cleanup(&p);
		if (rc == ISC_EINVALID && date && strstr(err.msg, "price date"))
			return isc_cli_usage_error("catalog", "--price-date: %s", err.msg);
		return isc_cli_fail(&err);
	}
	if (csv_of(&p, &csv, &csv_len, &err)) {
		isc_catalog_parse_cleanup(&p);
		return isc_cli_fail(&err);
	}
	base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	rc = ISC_EXIT_FAIL;
	if (!(path = strdup("/v1/catalog/import")) ||
	    isc_client_query_add(&path, "provider", provider) ||
	    isc_client_query_add(&path, "format", "isc") ||
	    isc_client_query_add(&path, "replace", replace ? "1" : NULL) ||
	    isc_client_query_add(&path, "file", base)) {
		isc_cli_errorf("out of memory");
		goto out;
	}
	if ((rc = isc_client_request(cli, "POST", path, csv, csv_len, &r)))
		goto out;
	if (r.status != 200) {
		rc = isc_client_fail(&r);
	} else if (!(o = json_loadb(r.body, r.len, 0, NULL))) {
		isc_cli_errorf("iscd sent a reply that is not JSON");
		rc = ISC_EXIT_FAIL;
	} else {
		/* Rows, filtering and skipping are of FILE (read here); the writes are iscd's. */
		printf("%s: %zu %s shapes from %zu rows: %lld added, %lld updated, %lld unchanged, "
		       "%lld removed; %zu rows filtered (not GPU machines), %zu malformed rows "
		       "skipped\n",
		       file, p.n, provider, p.rows,
		       (long long)json_integer_value(json_object_get(o, "added")),
		       (long long)json_integer_value(json_object_get(o, "updated")),
		       (long long)json_integer_value(json_object_get(o, "unchanged")),
		       (long long)json_integer_value(json_object_get(o, "removed")), p.filtered,
		       p.n_skipped);
		rc = ISC_EXIT_OK;
	}
	json_decref(o);
	isc_reply_cleanup(&r);
out:
	free(path);
	free(csv);
	isc_catalog_parse_cleanup(&p);
	return rc;
}

static void summary_row(json_t *e, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	const char *lo = isc_json_str(e, "price_date_min"), *hi = isc_json_str(e, "price_date_max");
	cells[0] = isc_json_str(e, "provider");
	cells[1] = buf[1];
	snprintf(buf[1], ISC_TABLE_CELL, "%lld",
	         (long long)json_integer_value(json_object_get(e, "shapes")));
	cells[2] = buf[2];
	snprintf(buf[2], ISC_TABLE_CELL, "%lld",
	         (long long)json_integer_value(json_object_get(e, "regions")));
	cells[3] = buf[3];
	if (strcmp(lo, hi))
		snprintf(buf[3], ISC_TABLE_CELL, "%s .. %s", lo, hi);
	else
		snprintf(buf[3], ISC_TABLE_CELL, "%s", lo);
}

static int do_show(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"PROVIDER", "SHAPES", "REGIONS", "PRICES OF"};
	static const struct isc_table_spec summary = {
	    4, headers, "-rr-", summary_row,
	    "isc catalog: no shapes (isc catalog import, or isc init to load the shipped catalog)"};
	json_t *list = NULL;
	int json = 0, rc;

	for (int k = 2; k < argc; k++) {
		if (!strcmp(argv[k], "--json"))
			json = 1;
		else
			return isc_cli_usage_error("catalog", "unexpected argument '%s'", argv[k]);
	}
	if ((rc = isc_client_json(cli, "GET", "/v1/catalog", NULL, &list)))
		return rc;
	return isc_cli_print_listing(list, json, &summary);
}

static int do_export(struct isc_cli *cli, int argc, char **argv)
{
	const char *provider = NULL;
	struct isc_reply r;
	char *path = NULL;
	int rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--provider") && i + 1 < argc)
			provider = argv[++i];
		else
			return isc_cli_usage_error("catalog", "unexpected argument '%s'", argv[i]);
	}
	if (provider && !isc_provider_valid(provider))
		return isc_cli_usage_error("catalog", "--provider: '%s' is not aws, gcp or oci",
		                           provider);
	if (!(path = strdup("/v1/catalog/export")) ||
	    isc_client_query_add(&path, "provider", provider)) {
		free(path);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_request(cli, "GET", path, NULL, 0, &r);
	free(path);
	if (rc)
		return rc;
	if (r.status != 200)
		rc = isc_client_fail(&r);
	else if (fwrite(r.body, 1, r.len, stdout) != r.len || fflush(stdout) != 0)
		rc = ISC_EXIT_FAIL;
	isc_reply_cleanup(&r);
	return rc;
}

static int do_refresh(struct isc_cli *cli, int argc, char **argv)
{
	const char *provider = NULL;
	char *path = NULL;
	json_t *o = NULL;
	long long failed, calls;
	int json = 0, rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--provider") && i + 1 < argc) {
			provider = argv[++i];
			if (!isc_provider_valid(provider))
				return isc_cli_usage_error(
				    "catalog", "--provider: '%s' is not aws, gcp or oci", provider);
		} else {
			return isc_cli_usage_error("catalog", "refresh: unexpected argument '%s'",
			                           argv[i]);
		}
	}
	/* iscd prices with its own config and credentials: the ones the broker launches with. */
	if (!(path = strdup("/v1/catalog/refresh")) ||
	    isc_client_query_add(&path, "provider", provider)) {
		free(path);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json(cli, "POST", path, NULL, &o);
	free(path);
	if (rc)
		return rc;
	failed = (long long)json_integer_value(json_object_get(o, "failed"));
	calls = (long long)json_integer_value(json_object_get(o, "calls"));
	if (json) {
		isc_json_print(o, stdout);
	} else {
		printf("%lld spot shape(s) priced live (%lld moved) from %lld call(s) for %lld "
		       "instance type(s)\n",
		       (long long)json_integer_value(json_object_get(o, "updated")),
		       (long long)json_integer_value(json_object_get(o, "changed")), calls,
		       (long long)json_integer_value(json_object_get(o, "instance_types")));
		if (json_integer_value(json_object_get(o, "list_only")))
			printf("%lld provider region(s) have no spot price call (their prices come "
			       "from the price lists)\n",
			       (long long)json_integer_value(json_object_get(o, "list_only")));
		for (size_t i = 0; i < json_array_size(json_object_get(o, "lists")); i++) {
			json_t *l = json_array_get(json_object_get(o, "lists"), i);
			const char *src = json_string_value(json_object_get(l, "source"));
			if (json_is_true(json_object_get(l, "failed")))
				printf("%s: not read (the last prices are kept)\n", src);
			else
				printf(
				    "%s: %lld shape(s) priced (%lld moved), %lld not in the list\n",
				    src,
				    (long long)json_integer_value(json_object_get(l, "updated")),
				    (long long)json_integer_value(json_object_get(l, "changed")),
				    (long long)json_integer_value(json_object_get(l, "unpriced")));
		}
	}
	if (failed) {
		isc_cli_errorf("%lld of %lld price call(s) failed; last: %s", failed, calls,
		               json_string_value(json_object_get(o, "last_error")));
		rc = ISC_EXIT_FAIL;
	}
	json_decref(o);
	return rc;
}

int cmd_catalog(struct isc_cli *cli, int argc, char **argv)
{
	if (isc_cli_wants_help(argc, argv)) {
		usage();
		return ISC_EXIT_OK;
	}
	if (argc < 2)
		return isc_cli_usage_error("catalog", "needs a subcommand: import, show or export");
	if (!strcmp(argv[1], "import"))
		return do_import(cli, argc, argv);
	if (!strcmp(argv[1], "show"))
		return do_show(cli, argc, argv);
	if (!strcmp(argv[1], "export"))
		return do_export(cli, argc, argv);
	if (!strcmp(argv[1], "refresh"))
		return do_refresh(cli, argc, argv);
	return isc_cli_usage_error("catalog", "unknown subcommand '%s'", argv[1]);
}
