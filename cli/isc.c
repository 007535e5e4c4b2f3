/*
 * isc: the command line of the burst broker. Parses the global options
 * (--home), then hands argv to the subcommand, which owns the rest.
 * Exit codes: 0 ok, 1 failure, 2 usage.
 */
#include "cli/commands.h"
#include "common/home.h"
#include "common/suggest.h"
#include "common/version.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct command {
	const char *name;
	int (*run)(struct isc_cli *cli, int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
    {"init", cmd_init, "create the store (and load the default shape catalog)"},
    {"org", cmd_org, "add and list organisations"},
    {"project", cmd_project, "add and list projects, set budgets"},
    {"validate", cmd_validate, "check a launch file (.isc)"},
    {"train", cmd_train, "record an experiment from a launch file"},
    {"burst", cmd_burst, "record a burst experiment; --wait follows it"},
    {"experiments", cmd_experiments, "list experiments"},
    {"check", cmd_check, "prove a cloud accepts the credentials"},
    {"shapes", cmd_shapes, "rank GPU shapes for a request"},
    {"catalog", cmd_catalog, "import and summarise the shape catalog"},
    {"status", cmd_status, "an experiment's state and timeline of events"},
    {"logs", cmd_logs, "a rank's output"},
    {"cancel", cmd_cancel, "cancel an experiment"},
    {"credits", cmd_credits, "grant credits, show balances"},
    {"spend", cmd_spend, "spend per project, experiment, provider, shape or day"},
    {"nodes", cmd_nodes, "the on-prem node pool: add, list, drain, remove, pubkey"},
    {"keys", cmd_keys, "organisations' own cloud keys: add, list, verify, remove, rotate-master"},
    {"datasets", cmd_datasets, "S3 datasets of an organisation: add, list, show, remove"},
    {"user", cmd_user, "platform users (operator): add, list"},
    {"member", cmd_member, "an organisation's members and roles: add, list, remove"},
    {"token", cmd_token, "bearer tokens for the TCP API: create, list, revoke"},
    {"audit", cmd_audit, "every change made through the API"},
    {"store", cmd_store, "copy the whole store (SQLite, PostgreSQL) while iscd is stopped"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: isc [--home DIR] COMMAND [ARGS...]\n       isc --version\n\n"
	             "The command line of the isc burst broker. The store lives in --home,\n"
	             "else $ISC_HOME, else ~/.isc. After `isc init`, commands talk to iscd's API\n"
	             "on $ISC_SOCKET, else HOME/run/api.sock; with ISC_API_URL and ISC_TOKEN set,\n"
	             "to a remote iscd over TCP (docs/api.md).\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nRun 'isc COMMAND --help' (or 'isc help COMMAND') for a command's "
	             "options.\n");
}

/* The global options, for did-you-mean. */
static const char *const global_options[] = {"--home", "--help", "--version"};

static const char *command_names[sizeof(commands) / sizeof(commands[0])];

/*
 * The command's own --help text, run in a child so its printf()s can be read
 * back: the options and subcommands it documents are what a typo is compared
 * with, so the suggestions follow each command's help without a second list
 * to keep in step. Caller frees; NULL when it cannot be had.
 */
static char *help_text_of(struct isc_cli *cli, const struct command *c)
{
	char *argv_help[] = {(char *)c->name, "--help", NULL}, *text = NULL;
	size_t len = 0, cap = 0;
	int fds[2], status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (pipe(fds))
		return NULL;
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		return NULL;
	}
	if (pid == 0) {
		close(fds[0]);
		if (dup2(fds[1], STDOUT_FILENO) < 0)
			_exit(1);
		close(fds[1]);
		c->run(cli, 2, argv_help);
		fflush(stdout);
		_exit(0);
	}
	close(fds[1]);
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *grown = realloc(text, cap = cap ? cap * 2 : 8192);
			if (!grown)
				break;
			text = grown;
		}
		ssize_t got = read(fds[0], text + len, cap - len - 1);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (text)
		text[len] = '\0';
	return text;
}

#define HELP_WORDS_MAX 64

/* The "--option" words of a help text, each once; returns how many (at most max). */
static size_t help_options(const char *help, char out[][48], size_t max)
{
	size_t n = 0;
	for (const char *p = strstr(help, "--"); p && n < max; p = strstr(p + 2, "--")) {
		size_t len = 2, k;
		while (isalnum((unsigned char)p[len]) || p[len] == '-')
			len++;
		if (len <= 2 || len >= sizeof(out[0]))
			continue;
		for (k = 0; k < n && (strlen(out[k]) != len || strncmp(out[k], p, len)); k++)
			;
		if (k < n)
			continue;
		memcpy(out[n], p, len);
		out[n++][len] = '\0';
	}
	return n;
}

/* The subcommands of a help text: the words that follow "isc NAME " in its usage lines. */
static size_t help_subcommands(const char *help, const char *name, char out[][48], size_t max)
{
	char prefix[64];
	size_t n = 0;
	snprintf(prefix, sizeof(prefix), "isc %s ", name);
	for (const char *p = strstr(help, prefix); p && n < max; p = strstr(p + 1, prefix)) {
		const char *w = p + strlen(prefix);
		size_t len = 0;
		/* rotate-master: a hyphen between lowercase letters belongs to the word */
		while (islower((unsigned char)w[len]) ||
		       (len > 0 && w[len] == '-' && islower((unsigned char)w[len + 1])))
			len++;
		if (len == 0 || len >= sizeof(out[0]))
			continue;
		memcpy(out[n], w, len);
		out[n++][len] = '\0';
	}
	return n;
}

static int among(char words[][48], size_t n, const char *w, size_t wlen)
{
	for (size_t k = 0; k < n; k++)
		if (strlen(words[k]) == wlen && strncmp(words[k], w, wlen) == 0)
			return 1;
	return 0;
}

static const char *nearest(char words[][48], size_t n, const char *w, size_t wlen)
{
	struct isc_suggest sg;
	isc_suggest_init(&sg, w, wlen);
	for (size_t k = 0; k < n; k++)
		isc_suggest_consider(&sg, words[k]);
	return sg.best;
}

/*
 * After a command refused its arguments (exit 2): for each option the command's
 * help does not know, and for an unknown subcommand, the nearest known word.
 */
static void suggest_for_command(struct isc_cli *cli, const struct command *c, int argc, char **argv)
{
	char *help = help_text_of(cli, c);
	char opts[HELP_WORDS_MAX][48], subs[HELP_WORDS_MAX][48];
	size_t n_opts, n_subs;
	const char *near;

	if (!help)
		return;
	n_opts = help_options(help, opts, HELP_WORDS_MAX);
	n_subs = help_subcommands(help, c->name, subs, HELP_WORDS_MAX);
	free(help);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq;
		size_t wlen;

		if (strcmp(a, "--") == 0)
			break;
		if (strncmp(a, "--", 2) != 0 || !a[2])
			continue;
		eq = strchr(a, '=');
		wlen = eq ? (size_t)(eq - a) : strlen(a);
		if (!among(opts, n_opts, a, wlen) && (near = nearest(opts, n_opts, a, wlen)))
			fprintf(stderr, "isc %s: '%.*s': did you mean '%s'?\n", c->name, (int)wlen,
			        a, near);
	}
	if (argc > 1 && argv[1][0] != '-' && n_subs > 0 &&
	    !among(subs, n_subs, argv[1], strlen(argv[1])) &&
	    (near = nearest(subs, n_subs, argv[1], strlen(argv[1]))))
		fprintf(stderr, "isc %s: '%s': did you mean '%s'?\n", c->name, argv[1], near);
}

/*
 * Before a command runs: an option its help does not know but one it does is near
 * (--wiat) is named with its fix alone, and nothing runs, so the user does not first
 * read "unexpected argument" from the command. Options that are far from every
 * known one are left to the command, which knows its own. Returns 1 when it refused.
 */
static int mistyped_option(struct isc_cli *cli, const struct command *c, int argc, char **argv)
{
	char opts[HELP_WORDS_MAX][48];
	const char *near;
	size_t n_opts;
	char *help;
	int any = 0, refused = 0;

	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strncmp(argv[i], "--", 2) == 0 && argv[i][2] && strcmp(argv[i], "--help") != 0)
			any = 1;
	if (!any || !(help = help_text_of(cli, c)))
		return 0;
	n_opts = help_options(help, opts, HELP_WORDS_MAX);
	free(help);
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		size_t wlen = eq ? (size_t)(eq - a) : strlen(a);
		if (strncmp(a, "--", 2) != 0 || !a[2] || among(opts, n_opts, a, wlen) ||
		    !(near = nearest(opts, n_opts, a, wlen)))
			continue;
		fprintf(stderr, "isc %s: '%.*s': did you mean '%s'?\n", c->name, (int)wlen, a,
		        near);
		refused = 1;
	}
	if (refused)
		fprintf(stderr, "try 'isc %s --help'\n", c->name);
	return refused;
}

/*
 * `isc __complete [COMMAND]`, for the bash completion (dist/bash-completion/isc): the
 * commands of the table above (and help), one a line; with COMMAND, the subcommands
 * and options its --help names, and "@ID" when its usage takes an experiment id
 * ("isc COMMAND ID"), which the completion asks the API for. From the table and the
 * help texts themselves, so the completion never lists what isc does not have.
 */
static int complete_words(struct isc_cli *cli, int argc, char **argv)
{
	char words[HELP_WORDS_MAX][48];
	size_t n;
	char *help, prefix[64];

	if (argc < 1) {
		for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
			printf("%s\n", commands[c].name);
		printf("help\n");
		return ISC_EXIT_OK;
	}
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
		if (strcmp(commands[c].name, argv[0]) != 0)
			continue;
		if (!(help = help_text_of(cli, &commands[c])))
			return ISC_EXIT_FAIL;
		n = help_subcommands(help, commands[c].name, words, HELP_WORDS_MAX);
		for (size_t k = 0; k < n; k++)
			if (!among(words, k, words[k], strlen(words[k])))
				printf("%s\n", words[k]);
		n = help_options(help, words, HELP_WORDS_MAX);
		for (size_t k = 0; k < n; k++)
			printf("%s\n", words[k]);
		snprintf(prefix, sizeof(prefix), "isc %s ID", commands[c].name);
		if (strstr(help, prefix))
			printf("@ID\n");
		free(help);
		return ISC_EXIT_OK;
	}
	return ISC_EXIT_USAGE;
}

/* "isc: unknown command 'X'; did you mean 'Y'?" and where the list is. */
static int unknown_command(const char *what, const char *word, const char *const *known, size_t n)
{
	const char *near = isc_suggest(word, known, n);
	if (near)
		fprintf(stderr, "isc: unknown %s '%s'; did you mean '%s'?\n", what, word, near);
	else
		fprintf(stderr, "isc: unknown %s '%s'\n", what, word);
	fprintf(stderr, "run 'isc --help' for the commands and global options\n");
	return ISC_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct isc_cli cli = {0};
	const char *home_flag = NULL;
	struct isc_err err;
	int i = 1, rc;

	umask(077); /* every file and folder isc makes is owner-only */
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--home") == 0 && i + 1 < argc) {
			home_flag = argv[i + 1];
			i += 2;
		} else if (strncmp(argv[i], "--home=", 7) == 0) {
			home_flag = argv[i] + 7;
			i++;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return ISC_EXIT_OK;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("isc %s (commit %s)\n", isc_version(), isc_build_commit());
			return ISC_EXIT_OK;
		} else {
			return unknown_command("option", argv[i], global_options,
			                       sizeof(global_options) / sizeof(global_options[0]));
		}
	}
	if (i >= argc) {
		usage(stderr);
		return ISC_EXIT_USAGE;
	}
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
		command_names[c] = commands[c].name;
	if (strcmp(argv[i], "__complete") == 0) {
		isc_err_clear(&err);
		cli.home = isc_home_resolve(home_flag, &err);
		if (!cli.home)
			return isc_cli_fail(&err);
		rc = complete_words(&cli, argc - i - 1, argv + i + 1);
		free(cli.home);
		return rc;
	}
	/* isc help [COMMAND]: the command's --help, as git and go have it. */
	if (strcmp(argv[i], "help") == 0) {
		if (i + 1 >= argc) {
			usage(stdout);
			return ISC_EXIT_OK;
		}
		for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
			char *argv_help[] = {(char *)commands[c].name, "--help", NULL};
			if (strcmp(commands[c].name, argv[i + 1]) != 0)
				continue;
			isc_err_clear(&err);
			cli.home = isc_home_resolve(home_flag, &err);
			if (!cli.home)
				return isc_cli_fail(&err);
			rc = commands[c].run(&cli, 2, argv_help);
			free(cli.home);
			return rc;
		}
		return unknown_command("command", argv[i + 1], command_names,
		                       sizeof(commands) / sizeof(commands[0]));
	}
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
		if (strcmp(commands[c].name, argv[i]) != 0)
			continue;
		isc_err_clear(&err);
		cli.home = isc_home_resolve(home_flag, &err);
		if (!cli.home)
			return isc_cli_fail(&err);
		if (mistyped_option(&cli, &commands[c], argc - i, argv + i)) {
			free(cli.home);
			return ISC_EXIT_USAGE;
		}
		rc = commands[c].run(&cli, argc - i, argv + i);
		if (rc == ISC_EXIT_USAGE)
			suggest_for_command(&cli, &commands[c], argc - i, argv + i);
		free(cli.home);
		return rc;
	}
	return unknown_command("command", argv[i], command_names,
	                       sizeof(commands) / sizeof(commands[0]));
}
