/*
 * The Control Plane pages (docs/control-plane.md): static files iscd serves on
 * its TCP listener beside the API. The folder is found relative to iscd's own
 * binary (BIN/../share/isc/web, where `make` and an install put it). Only flat
 * names of known types are served ([a-z0-9-]+ plus .html/.css/.js/.svg), opened
 * under the folder without following links, so no request reaches another file.
 * Every reply carries a strict Content-Security-Policy (scripts and styles from
 * the same origin only, nothing inline).
 */
#ifndef ISC_API_WEB_H
#define ISC_API_WEB_H

#include <stddef.h>

struct isc_web;

/*
 * The pages folder: BIN/../share/isc/web beside the running binary when it is a
 * folder, else the installed DATADIR/web (common/datadir.h) when that is; else
 * the first, to be named in a warning. Caller frees. NULL if unknown.
 */
char *isc_web_default_root(void);

/* Opens the folder; a missing folder is not an error (pages answer 404 saying so). */
struct isc_web *isc_web_new(const char *root);
void isc_web_free(struct isc_web *w);
/* Whether the folder could be opened (for iscd's log). */
int isc_web_available(const struct isc_web *w);

/* A static reply: the body (owned, free()), its type, the status. */
struct isc_web_reply {
	int status;
	const char *content_type;
	char *body;
	size_t len;
};
/* The file for a URL path ("/" is index.html); 404 for any name it will not serve. */
void isc_web_get(const struct isc_web *w, const char *path, struct isc_web_reply *out);

/* The headers every page reply carries (name, value pairs, NULL-terminated). */
extern const char *const isc_web_page_headers[];
/* The headers every TCP API reply carries (no caching, no sniffing, no framing). */
extern const char *const isc_web_api_headers[];

#endif
