/*
 * isc catalog: import a provider's shape catalog from a third-party file,
 * export the normalized form, and summarise what the store holds.
 */
#include "cli/commands.h"
#include "config/config.h"
#include "prices/refresh.h"
#include "shapes/catalog_import.h"
#include "store/store_shapes.h"

#include <jansson.h>
#include <stdio.h>
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
	       "refresh reads live spot prices from each configured cloud's price API for every\n"
	       "spot shape in its configured regions (one call per provider and region); iscd\n"
	       "does the same for its candidates every price_refresh_ms (docs/shapes.md).\n");
}

static int do_import(struct isc_cli *cli, int argc, char **argv)
{
	const char *file = NULL, *fmt_name = NULL, *provider = NULL, *date = NULL;
	enum isc_catalog_format fmt;
	struct isc_catalog_parse p;
	struct isc_shapes_apply_result res;
	struct isc_store *s;
	struct isc_err err;
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
	if ((rc = isc_cli_store_open(cli, 0, &s))) {
		isc_catalog_parse_cleanup(&p);
		return rc;
	}
	rc = isc_store_shapes_apply(s, provider, p.shapes, p.n, replace, &res, &err);
	isc_store_free(s);
	if (rc) {
		isc_catalog_parse_cleanup(&p);
		return isc_cli_fail(&err);
	}
	printf(
	    "%s: %zu %s shapes from %zu rows: %zu added, %zu updated, %zu unchanged, %zu removed; "
	    "%zu rows filtered (not GPU machines), %zu malformed rows skipped\n",
	    file, p.n, provider, p.rows, res.added, res.updated, res.unchanged, res.removed,
	    p.filtered, p.n_skipped);
	isc_catalog_parse_cleanup(&p);
	return ISC_EXIT_OK;
}

static int do_show(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_shapes_summary *list;
	struct isc_store *s;
	struct isc_err err;
	size_t n;
	int json = 0, rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else
			return isc_cli_usage_error("catalog", "unexpected argument '%s'", argv[i]);
	}
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	rc = isc_store_shapes_summary(s, &list, &n, &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(
			    arr, json_pack("{s:s,s:I,s:I,s:s,s:s}", "provider", list[i].provider,
			                   "shapes", (json_int_t)list[i].shapes, "regions",
			                   (json_int_t)list[i].regions, "price_date_min",
			                   list[i].price_date_min, "price_date_max",
			                   list[i].price_date_max));
		json_dumpf(arr, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(arr);
	} else {
		printf("%-9s %7s %8s  %s\n", "PROVIDER", "SHAPES", "REGIONS", "PRICES OF");
		for (size_t i = 0; i < n; i++) {
			const struct isc_shapes_summary *e = &list[i];
			if (strcmp(e->price_date_min, e->price_date_max))
				printf("%-9s %7lld %8lld  %s .. %s\n", e->provider,
				       (long long)e->shapes, (long long)e->regions,
				       e->price_date_min, e->price_date_max);
			else
				printf("%-9s %7lld %8lld  %s\n", e->provider, (long long)e->shapes,
				       (long long)e->regions, e->price_date_min);
		}
		if (n == 0)
			printf("(no shapes: isc catalog import, or isc init to load the shipped "
			       "catalog)\n");
	}
	isc_shapes_summary_free(list, n);
	return ISC_EXIT_OK;
}

static int do_export(struct isc_cli *cli, int argc, char **argv)
{
	const char *provider = NULL;
	struct isc_shape *list;
	struct isc_store *s;
	struct isc_err err;
	size_t n;
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
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	rc = isc_store_shape_list(s, provider, &list, &n, &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	rc = isc_catalog_write_csv(stdout, list, n, &err);
	isc_shape_list_free(list, n);
	return rc ? isc_cli_fail(&err) : ISC_EXIT_OK;
}

static int do_refresh(struct isc_cli *cli, int argc, char **argv)
{
	const char *provider = NULL;
	struct isc_price_target *targets = NULL;
	struct isc_price_refresh_result res;
	struct isc_config *cfg = NULL;
	struct isc_store *s = NULL;
	struct isc_err err;
	size_t nt = 0;
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
	isc_err_clear(&err);
	if ((rc = isc_config_load(cli->home, &cfg, &err)))
		return isc_cli_fail(&err);
	if (provider && !isc_config_provider(cfg, provider)) {
		isc_cli_errorf("%s/config.toml has no [providers.%s] section: nothing to refresh",
		               cli->home, provider);
		isc_config_free(cfg);
		return ISC_EXIT_FAIL;
	}
	if ((rc = isc_cli_store_open(cli, 0, &s))) {
		isc_config_free(cfg);
		return rc;
	}
	rc = isc_price_targets_configured(s, cfg, provider, &targets, &nt, &err);
	if (!rc)
		rc = isc_prices_refresh(s, cfg, targets, nt, &res, &err);
	isc_price_targets_free(targets, nt);
	isc_store_free(s);
	isc_config_free(cfg);
	if (rc)
		return isc_cli_fail(&err);
	if (json) {
		json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:s}", "instance_types",
		                      (json_int_t)nt, "calls", (json_int_t)res.calls, "updated",
		                      (json_int_t)res.updated, "changed", (json_int_t)res.changed,
		                      "list_only", (json_int_t)res.list_only, "failed",
		                      (json_int_t)res.failed, "last_error", res.last_error);
		json_dumpf(o, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(o);
	} else {
		printf(
		    "%zu spot shape(s) priced live (%zu moved) from %zu call(s) for %zu instance "
		    "type(s)\n",
		    res.updated, res.changed, res.calls, nt);
		if (res.list_only)
			printf("%zu provider region(s) have fixed list prices only\n",
			       res.list_only);
	}
	if (res.failed) {
		isc_cli_errorf("%zu of %zu price call(s) failed; last: %s", res.failed, res.calls,
		               res.last_error);
		return ISC_EXIT_FAIL;
	}
	return ISC_EXIT_OK;
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
