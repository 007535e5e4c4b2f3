/*
 * Static pages (api/web.h). The files are small and few, so each is read whole
 * per request; the folder's descriptor is kept open and every name is opened
 * relative to it with O_NOFOLLOW, after the name itself passed a whitelist
 * (no '/', no '..', one dot, a known extension).
 */
#include "api/web.h"
#include "common/datadir.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A page, script or style sheet larger than this is not one of ours. */
#define WEB_FILE_MAX (1024 * 1024)

struct isc_web {
	int dir_fd;
};

const char *const isc_web_page_headers[] = {
    "Content-Security-Policy",
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options",
    "nosniff",
    "X-Frame-Options",
    "DENY",
    "Referrer-Policy",
    "no-referrer",
    "Cache-Control",
    "no-cache",
    NULL,
};

const char *const isc_web_api_headers[] = {
    "Content-Security-Policy",
    "default-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options",
    "nosniff",
    "Cache-Control",
    "no-store",
    NULL,
};

/* BIN/../share/isc/web (the build tree, a relocated install), else DATADIR/web. */
char *isc_web_default_root(void)
{
	char exe[PATH_MAX], *dir, *out = NULL;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;

	if (n > 0) {
		exe[n] = 0;
		dir = dirname(exe);
		if (asprintf(&out, "%s/../share/isc/web", dir) < 0)
			return NULL;
		if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
			return out;
	}
	{
		char *installed = NULL;
		if (asprintf(&installed, "%s/web", isc_data_dir()) < 0)
			return out;
		if (stat(installed, &st) == 0 && S_ISDIR(st.st_mode)) {
			free(out);
			return installed;
		}
		free(installed);
	}
	return out; /* named in the warning that no pages are served */
}

struct isc_web *isc_web_new(const char *root)
{
	struct isc_web *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->dir_fd = root ? open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	return w;
}

void isc_web_free(struct isc_web *w)
{
	if (!w)
		return;
	if (w->dir_fd >= 0)
		close(w->dir_fd);
	free(w);
}

int isc_web_available(const struct isc_web *w)
{
	return w && w->dir_fd >= 0;
}

/* The content type for a served name, NULL for a name that is never served. */
static const char *type_of(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {".html", "text/html; charset=utf-8"},
	    {".css", "text/css; charset=utf-8"},
	    {".js", "text/javascript; charset=utf-8"},
	    {".svg", "image/svg+xml"},
	};
	const char *dot = NULL;
	size_t n = strlen(name);

	if (n == 0 || n > 64)
		return NULL;
	for (const char *p = name; *p; p++) {
		if (*p == '.') {
			if (dot)
				return NULL; /* one dot only: no "..", no hidden names */
			dot = p;
		} else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
			return NULL;
		}
	}
	if (!dot || dot == name)
		return NULL;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return NULL;
}

static void reply_text(struct isc_web_reply *out, int status, const char *text)
{
	out->status = status;
	out->content_type = "text/plain; charset=utf-8";
	out->body = strdup(text);
	out->len = out->body ? strlen(out->body) : 0;
}

void isc_web_get(const struct isc_web *w, const char *path, struct isc_web_reply *out)
{
	const char *name, *type;
	struct stat st;
	int fd;
	size_t got = 0;

	memset(out, 0, sizeof(*out));
	if (!isc_web_available(w)) {
		reply_text(out, 404,
		           "the Control Plane pages are not installed beside iscd "
		           "(BIN/../share/isc/web; docs/control-plane.md)\n");
		return;
	}
	if (!path || path[0] != '/') {
		reply_text(out, 404, "not found\n");
		return;
	}
	name = path[1] ? path + 1 : "index.html";
	if (!(type = type_of(name))) {
		reply_text(out, 404, "not found\n");
		return;
	}
	fd = openat(w->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		reply_text(out, 404, "not found\n");
		return;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > WEB_FILE_MAX) {
		close(fd);
		reply_text(out, 404, "not found\n");
		return;
	}
	out->body = malloc((size_t)st.st_size + 1);
	if (!out->body) {
		close(fd);
		reply_text(out, 500, "out of memory\n");
		return;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, out->body + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	out->status = 200;
	out->content_type = type;
	out->len = got;
}
