/*
 * isc store copy --to URL|--to-file FILE [--from URL]: copies a whole store into a new, empty
 * one (SQLite to PostgreSQL and back) while iscd is stopped, and prints what
 * it verified: each table's rows and the ledger's sums (store/store_copy.h,
 * docs/ha.md "Backup and move"). Runs on the store directly, never via iscd.
 */
#include "cli/commands.h"
#include "config/config.h"
#include "store/store.h"
#include "store/store_copy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A replica is live while its heartbeat is this recent, when config.toml cannot say. */
#define DEFAULT_LEASE_MS 8000

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: isc store copy --to URL | --to-file FILE [--from URL]\n\n"
	        "Copies a whole store into a new, empty one while iscd is stopped: SQLite to\n"
	        "PostgreSQL, PostgreSQL to SQLite, or the same kind. Every table is copied in\n"
	        "one transaction (all or nothing), rows keep their ids, and before the commit\n"
	        "the copy checks that every table has as many rows as the source and that\n"
	        "the ledger's sums and totals are equal; it prints them.\n\n"
	        "  --to URL    the destination: a PostgreSQL URI (postgresql://user@host/db),\n"
	        "              sqlite:/absolute/path/isc.db (a file, made if absent) or\n"
	        "              sqlite: (this home's isc.db)\n"
	        "  --to-file FILE\n"
	        "              the destination's URL read from the first line of FILE (- is\n"
	        "              stdin); without --to and --to-file: $ISC_STORE_COPY_TO\n"
	        "  --from URL  the source (default: this home's store: ISC_STORE_URL, else\n"
	        "              store_url in config.toml, else sqlite:)\n\n"
	        "A URL with a password is refused on the command line, where ps and the\n"
	        "shell's history would show it: leave the password out (libpq reads\n"
	        "~/.pgpass, PGPASSFILE or PGPASSWORD), or give the URL in $ISC_STORE_COPY_TO\n"
	        "or --to-file (the source's in $ISC_STORE_URL). Passwords are printed as ***.\n\n"
	        "Refused while iscd runs on this home, while a PostgreSQL source lists a live\n"
	        "replica, when the destination has any row, and when the source's schema is\n"
	        "not this isc's version. See docs/ha.md, \"Backup and move\".\n");
}

static int64_t lease_ms_of(const char *home)
{
	struct isc_config *cfg = NULL;
	struct isc_err err;
	int64_t ms = DEFAULT_LEASE_MS;

	if (isc_config_load(home, &cfg, &err) == 0 && cfg->lease_ms > 0)
		ms = cfg->lease_ms;
	isc_config_free(cfg);
	return ms;
}

static void print_report(const struct isc_store_copy_report *r)
{
	int64_t total = 0;

	printf("schema version: %d\n", r->schema_version);
	for (size_t i = 0; i < r->n_tables; i++) {
		const struct isc_store_copy_table *t = &r->tables[i];
		if (t->rebuilt)
			printf("%s: %lld rows (rebuilt from the ledger, equal to the source's)\n",
			       t->name, (long long)t->rows);
		else
			printf("%s: %lld rows\n", t->name, (long long)t->rows);
		total += t->rows;
	}
	for (size_t i = 0; i < r->n_ledger; i++) {
		const struct isc_store_copy_ledger *l = &r->ledger[i];
		printf("ledger check: %s %s: %lld rows, %lld micros, equal\n", l->kind, l->billing,
		       (long long)l->rows, (long long)l->sum_micros);
	}
	printf("ledger check: %lld ledger_totals rows equal\n", (long long)r->ledger_totals_rows);
	for (size_t i = 0; i < r->n_sequences; i++)
		printf("sequence: %s.%s continues after %lld\n", r->sequences[i].table,
		       r->sequences[i].column, (long long)r->sequences[i].last);
	printf("copied %zu tables, %lld rows: row counts and the ledger's totals equal\n",
	       r->n_tables, (long long)total);
}

/* True when url carries a password (user:PASSWORD@ or password=): masking changes it. */
static int has_password(const char *url, int *oom)
{
	char *shown = isc_store_url_masked(url);
	int yes;

	if (!shown) {
		*oom = 1;
		return 0;
	}
	yes = strcmp(shown, url) != 0;
	free(shown);
	return yes;
}

/*
 * The first line of path (- : stdin), without its line end, into *out (the caller
 * wipes and frees it). A file others can read gets a warning, as libpq gives for a
 * ~/.pgpass open to group or others (it ignores that one; this one is read).
 */
static int read_url_file(const char *path, char **out)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	struct stat st;
	size_t cap = 0;
	ssize_t n;

	*out = NULL;
	if (!f) {
		isc_cli_errorf("--to-file %s: %s", path, strerror(errno));
		return ISC_EXIT_FAIL;
	}
	if (f != stdin && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077))
		fprintf(stderr,
		        "isc: warning: --to-file %s can be read by group or others (mode %03o): "
		        "chmod 0600 it\n",
		        path, (unsigned)(st.st_mode & 0777));
	n = getline(out, &cap, f);
	if (f != stdin)
		fclose(f);
	while (n > 0 && ((*out)[n - 1] == '\n' || (*out)[n - 1] == '\r'))
		(*out)[--n] = 0;
	if (n <= 0) {
		/* At EOF getline leaves the buffer unterminated: nothing secret in it. */
		free(*out);
		*out = NULL;
		isc_cli_errorf(
		    "--to-file %s: no URL in it (the first line is the destination's URL)", path);
		return ISC_EXIT_FAIL;
	}
	return ISC_EXIT_OK;
}

static void wipe_free(char *text)
{
	if (text) {
		explicit_bzero(text, strlen(text));
		free(text);
	}
}

static int store_copy(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_store_copy_options o = {.home = cli->home};
	struct isc_store_copy_report r;
	struct isc_err err;
	char *from_url = NULL, *from_shown = NULL, *to_shown = NULL, *to_read = NULL;
	const char *to_file = NULL, *env;
	int rc, oom = 0;

	for (int k = 2; k < argc; k++) {
		if (strcmp(argv[k], "--to") == 0 && k + 1 < argc)
			o.to_url = argv[++k];
		else if (strncmp(argv[k], "--to=", 5) == 0)
			o.to_url = argv[k] + 5;
		else if (strcmp(argv[k], "--to-file") == 0 && k + 1 < argc)
			to_file = argv[++k];
		else if (strncmp(argv[k], "--to-file=", 10) == 0)
			to_file = argv[k] + 10;
		else if (strcmp(argv[k], "--from") == 0 && k + 1 < argc)
			o.from_url = argv[++k];
		else if (strncmp(argv[k], "--from=", 7) == 0)
			o.from_url = argv[k] + 7;
		else
			return isc_cli_usage_error("store", "unexpected argument '%s'", argv[k]);
	}
	if (o.to_url && to_file)
		return isc_cli_usage_error("store", "--to and --to-file: give one of them");
	/*
	 * A password in argv is in ps for everyone on the host and in the shell's history
	 * (issue 42). Refused before anything is opened, the URL shown masked; the ways
	 * that keep it out are libpq's own (~/.pgpass, PGPASSWORD) and ours.
	 */
	for (int i = 0; i < 2; i++) {
		const char *url = i ? o.from_url : o.to_url;
		if (url && has_password(url, &oom) && !oom) {
			char *shown = isc_store_url_masked(url);
			rc = isc_cli_usage_error(
			    "store",
			    "%s %s: a password on the command line is visible in ps and the "
			    "shell's "
			    "history: leave it out of the URL (libpq reads ~/.pgpass, PGPASSFILE "
			    "or "
			    "PGPASSWORD), or give the URL in %s",
			    i ? "--from" : "--to", shown ? shown : "(the URL)",
			    i ? "$ISC_STORE_URL"
			      : "$ISC_STORE_COPY_TO or with --to-file FILE (- reads stdin)");
			free(shown);
			return rc;
		}
		if (oom) {
			isc_cli_errorf("out of memory");
			return ISC_EXIT_FAIL;
		}
	}
	if (to_file) {
		if ((rc = read_url_file(to_file, &to_read)))
			goto out;
		o.to_url = to_read;
	} else if (!o.to_url && (env = getenv("ISC_STORE_COPY_TO")) && *env) {
		o.to_url = env;
	}
	if (!o.to_url || !*o.to_url)
		return isc_cli_usage_error("store", "copy needs --to URL, --to-file FILE or "
		                                    "$ISC_STORE_COPY_TO (where to copy the store)");
	if (!o.from_url && !(o.from_url = from_url = isc_store_url_resolve(cli->home, &err))) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	o.replica_live_ms = lease_ms_of(cli->home);
	if (!(from_shown = isc_store_url_masked(o.from_url)) ||
	    !(to_shown = isc_store_url_masked(o.to_url))) {
		isc_cli_errorf("out of memory");
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	printf("from: %s%s%s\nto: %s\n", from_shown, strcmp(o.from_url, "sqlite:") ? "" : " in ",
	       strcmp(o.from_url, "sqlite:") ? "" : cli->home, to_shown);
	fflush(stdout);
	if (isc_store_copy(&o, &r, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	print_report(&r);
	isc_store_copy_report_cleanup(&r);
	rc = ISC_EXIT_OK;
out:
	wipe_free(from_url);
	free(from_shown);
	free(to_shown);
	wipe_free(to_read);
	return rc;
}

int cmd_store(struct isc_cli *cli, int argc, char **argv)
{
	if (isc_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ISC_EXIT_OK;
	}
	if (argc < 2)
		return isc_cli_usage_error("store", "which subcommand? (isc store copy --to URL)");
	if (strcmp(argv[1], "copy") == 0)
		return store_copy(cli, argc, argv);
	return isc_cli_usage_error("store", "unknown subcommand '%s' (isc store copy --to URL)",
	                           argv[1]);
}
