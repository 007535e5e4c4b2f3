/*
 * isc's side of the API (docs/api.md): one HTTP request at a time to iscd,
 * over the Unix socket ($ISC_SOCKET, else $ISC_HOME/run/api.sock) or, when
 * ISC_API_URL is set, over TCP with the bearer token in ISC_TOKEN. The token
 * goes only into the Authorization header: never argv, never a message.
 */
#ifndef ISC_CLI_CLIENT_H
#define ISC_CLI_CLIENT_H

#include "cli/cli.h"

#include <jansson.h>
#include <stddef.h>

struct isc_reply {
	long status; /* HTTP status */
	char *body;  /* NUL-terminated, owned */
	size_t len;
	char offset[32];     /* X-Isc-Offset */
	char exp_status[32]; /* X-Isc-Status */
	char reason[512];    /* X-Isc-Reason */
	int final, missing;  /* X-Isc-Final, X-Isc-Missing */
	long rows;           /* X-Isc-Rows (the spend report), -1 when absent */
	char next[320];      /* X-Isc-Next: a listing's next page ("" on its last) */
};
void isc_reply_cleanup(struct isc_reply *r);

/*
 * Sends one request; path includes the query ("/v1/spend?by=day"). On any
 * HTTP answer returns ISC_EXIT_OK with *out filled (whatever its status).
 * When iscd does not answer it prints that iscd is not running and how to
 * start it, and returns ISC_EXIT_FAIL.
 */
int isc_client_request(struct isc_cli *cli, const char *method, const char *path, const char *body,
                       size_t len, struct isc_reply *out);

/* 1 when iscd answers (a quiet GET /v1/whoami), else 0; prints nothing. */
int isc_client_ping(struct isc_cli *cli);

/*
 * A JSON call: body may be NULL (consumed otherwise). A 2xx reply's JSON goes
 * to *out (caller decrefs); an error reply prints "isc: error: MESSAGE" and
 * returns ISC_EXIT_FAIL.
 */
int isc_client_json(struct isc_cli *cli, const char *method, const char *path, json_t *body,
                    json_t **out);

/*
 * A listing, every page of it (docs/api.md, "Pages"): GETs path with the
 * largest page size, then again with after=X-Isc-Next until no next page is
 * named, and gives the rows of all pages as one array (caller decrefs). Errors
 * as isc_client_json.
 */
int isc_client_json_all_pages(struct isc_cli *cli, const char *path, json_t **out);

/*
 * A call that carries a secret: a cloud key or a dataset's keys in the body
 * (consumed; its text and jansson's copies are wiped), or a new token in the
 * reply. Refused before anything is sent, with the rule named, when
 * ISC_API_URL is plain http:// (or has no scheme) to a host that is not
 * loopback (127.0.0.0/8, ::1, localhost): the secret would cross the network in
 * clear (issue 29). `what` names the secret ("a cloud key"). A reply of status
 * want is parsed into *out (caller decrefs); any other prints iscd's error.
 */
int isc_client_secret_json(struct isc_cli *cli, const char *what, const char *method,
                           const char *path, json_t *body, long want, json_t **out);

/*
 * 0 when ISC_API_URL may carry a secret (unset: the Unix socket; https://; http://
 * to a loopback address), else ISC_EXIT_FAIL after saying why. Exposed for the
 * commands that check before they even read a secret.
 */
int isc_client_secret_transport_ok(const char *what);

/* Prints the error of a non-2xx reply as "isc: error: MESSAGE"; returns ISC_EXIT_FAIL. */
int isc_client_fail(const struct isc_reply *r);
/*
 * The same in a command's own words (issue 47): iscd's messages name the API's fields
 * ("expires_in_s", "\"force\": true", "(org=)"), which a user of isc never typed.
 * words is NULL or pairs {"API's words", "the command's words", ..., NULL}: each
 * occurrence in the message is rewritten, pair by pair, before it is printed. The
 * calls above (isc_client_json, _all_pages, _secret_json) use cli->words, which a
 * command sets before them.
 */
int isc_client_fail_in(const struct isc_reply *r, const char *const *words);

/*
 * Appends "&key=value" (or "?key=value" for the first) to a path being built,
 * URL-escaped; value NULL appends nothing. Returns 0 or -1 out of memory.
 */
int isc_client_query_add(char **path, const char *key, const char *value);

/* value URL-escaped as one path segment (caller frees); NULL out of memory. */
char *isc_client_escape(const char *value);

#endif
