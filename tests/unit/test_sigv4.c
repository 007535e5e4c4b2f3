/*
 * SigV4 against the published suites in tests/vectors/sigv4 (see its
 * SOURCES.md): every botocore case folder (.req/.creq/.sts/.authz/.sreq) and
 * every aws-c-auth v4 case (context.json + header-* files). Each case checks
 * the canonical request, the string to sign, the signature and the
 * Authorization header. The aws-c-auth query-* files are the presigned-URL
 * form (isc_sigv4_presign, which S3 datasets use for burst nodes).
 */
#include "providers/aws/aws_int.h"
#include "providers/aws/sigv4.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_AKID   "AKIDEXAMPLE"

static int n_pass, n_fail;

static const char *vectors_dir(void)
{
	const char *d = getenv("ISC_SIGV4_VECTORS");
	return d ? d : "tests/vectors/sigv4";
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		if (len)
			*len = (size_t)n;
	}
	return buf;
}

/* Expected files sometimes end in a newline the value does not have. */
static void chomp(char *s)
{
	size_t n = s ? strlen(s) : 0;
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
}

struct raw_req {
	char method[16];
	char *path;
	struct isc_http_header h[32];
	char *hname[32], *hval[32];
	size_t nh;
	char *body;
	size_t body_len;
};

static void raw_req_free(struct raw_req *r)
{
	free(r->path);
	for (size_t i = 0; i < r->nh; i++) {
		free(r->hname[i]);
		free(r->hval[i]);
	}
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/*
 * Parses a suite request: "METHOD PATH HTTP/1.1", header lines "Name:value"
 * (a line starting with whitespace continues the previous value: obs-fold),
 * a blank line, then the body. The path may hold raw spaces (get-space).
 */
static int raw_req_parse(const char *text, struct raw_req *r)
{
	const char *eol = strchr(text, '\n'), *sp, *proto, *p;
	memset(r, 0, sizeof(*r));
	if (!eol)
		eol = text + strlen(text);
	sp = memchr(text, ' ', (size_t)(eol - text));
	proto = NULL;
	for (const char *q = text; q && q < eol; q = strstr(q + 1, " HTTP/"))
		if (q > text && q < eol && strncmp(q, " HTTP/", 6) == 0)
			proto = q;
	if (!sp || !proto || proto <= sp || (size_t)(sp - text) >= sizeof(r->method))
		return -1;
	memcpy(r->method, text, (size_t)(sp - text));
	r->path = strndup(sp + 1, (size_t)(proto - sp - 1));
	p = *eol ? eol + 1 : eol;
	while (*p && *p != '\n') {
		const char *le = strchr(p, '\n');
		size_t ll = le ? (size_t)(le - p) : strlen(p);
		if ((*p == ' ' || *p == '\t') && r->nh > 0) {
			char *prev = r->hval[r->nh - 1], *joined = NULL;
			if (asprintf(&joined, "%s\n%.*s", prev, (int)ll, p) < 0)
				return -1;
			free(prev);
			r->hval[r->nh - 1] = joined;
		} else {
			const char *colon = memchr(p, ':', ll);
			if (!colon || r->nh >= 32)
				return -1;
			r->hname[r->nh] = strndup(p, (size_t)(colon - p));
			r->hval[r->nh] = strndup(colon + 1, ll - (size_t)(colon - p) - 1);
			r->nh++;
		}
		p += ll;
		if (*p == '\n')
			p++;
	}
	if (*p == '\n')
		p++;
	r->body_len = strlen(p);
	r->body = strdup(p);
	for (size_t i = 0; i < r->nh; i++)
		r->h[i] = (struct isc_http_header){r->hname[i], r->hval[i]};
	return 0;
}

/* Removes header `name` (case-insensitive); returns its value (owned) or NULL. */
static char *raw_req_take(struct raw_req *r, const char *name)
{
	for (size_t i = 0; i < r->nh; i++) {
		if (strcasecmp(r->hname[i], name) != 0)
			continue;
		char *v = r->hval[i];
		free(r->hname[i]);
		memmove(&r->hname[i], &r->hname[i + 1], (r->nh - i - 1) * sizeof(char *));
		memmove(&r->hval[i], &r->hval[i + 1], (r->nh - i - 1) * sizeof(char *));
		r->nh--;
		for (size_t j = 0; j < r->nh; j++)
			r->h[j] = (struct isc_http_header){r->hname[j], r->hval[j]};
		return v;
	}
	return NULL;
}

static int64_t ms_from_basic(const char *amz)
{
	struct tm tm = {0};
	if (!amz || !strptime(amz, "%Y%m%dT%H%M%SZ", &tm))
		return -1;
	return (int64_t)timegm(&tm) * 1000;
}

static int64_t ms_from_iso(const char *iso)
{
	struct tm tm = {0};
	if (!iso || !strptime(iso, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -1;
	return (int64_t)timegm(&tm) * 1000;
}

/* Compares one intermediate; prints the first mismatch. */
static int same(const char *name, const char *what, const char *want, const char *got)
{
	if (want && got && strcmp(want, got) == 0)
		return 1;
	printf("FAIL %s: %s differs\n--- want\n%s\n--- got\n%s\n", name, what,
	       want ? want : "(none)", got ? got : "(none)");
	return 0;
}

static void record(const char *name, int ok)
{
	if (ok) {
		n_pass++;
		printf("PASS %s\n", name);
	} else {
		n_fail++;
	}
}

/* A botocore case folder DIR/NAME with NAME.{req,creq,sts,authz,sreq}. */
static void run_classic(const char *dir, const char *name, const char *label)
{
	char path[4096], *req_txt, *creq, *sts, *authz, *sreq, *token = NULL, *amz;
	struct raw_req r, signed_r;
	struct isc_sigv4_key key = {SUITE_AKID, SUITE_SECRET, NULL};
	struct isc_sigv4_params p = {"us-east-1", "service", 0, 1, 0, 0};
	struct isc_sigv4_signed out;
	struct isc_err err;
	int ok = 1;

#define LOAD(var, ext)                                                                             \
	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);                                  \
	var = slurp(path, NULL);                                                                   \
	chomp(var)
	LOAD(req_txt, "req");
	LOAD(creq, "creq");
	LOAD(sts, "sts");
	LOAD(authz, "authz");
	LOAD(sreq, "sreq");
#undef LOAD
	if (!req_txt || !creq || !sts || !authz || !sreq || raw_req_parse(req_txt, &r) ||
	    raw_req_parse(sreq, &signed_r)) {
		printf("FAIL %s: cannot read the case files\n", label);
		n_fail++;
		goto done;
	}
	/* The date and a session token are the signer's to add; take them from the files. */
	amz = raw_req_take(&r, "X-Amz-Date");
	p.time_ms = ms_from_basic(amz);
	free(amz);
	free(raw_req_take(&r, "X-Amz-Security-Token"));
	token = raw_req_take(&signed_r, "X-Amz-Security-Token");
	key.session_token = token;
	/* Signed or added afterwards (post-sts-header-after): the expected header says which. */
	p.unsigned_session_token = token && !strstr(authz, "x-amz-security-token");
	if (isc_sigv4_sign(
	        &key, &p,
	        &(struct isc_sigv4_request){r.method, r.path, r.h, r.nh, r.body, r.body_len}, &out,
	        &err)) {
		printf("FAIL %s: %s\n", label, err.msg);
		ok = 0;
	} else {
		char *want_sig = strstr(authz, "Signature=");
		ok = same(label, "canonical request", creq, out.canonical_request) &&
		     same(label, "string to sign", sts, out.string_to_sign) &&
		     same(label, "signature", want_sig ? want_sig + 10 : NULL, out.signature) &&
		     same(label, "Authorization", authz, out.authorization);
	}
	isc_sigv4_signed_cleanup(&out);
	record(label, ok);
	raw_req_free(&signed_r);
	raw_req_free(&r);
done:
	free(token);
	free(req_txt);
	free(creq);
	free(sts);
	free(authz);
	free(sreq);
}

static int param_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The '&'-separated items of q, sorted and joined with '\n' (order-free comparison). */
static char *params_sorted(const char *q)
{
	char *copy = strdup(q ? q : ""), *items[128], *save = NULL, *out;
	size_t n = 0, len = 1;
	for (char *t = strtok_r(copy, "&", &save); t && n < 128; t = strtok_r(NULL, "&", &save))
		items[n++] = t;
	qsort(items, n, sizeof(items[0]), param_cmp);
	for (size_t i = 0; i < n; i++)
		len += strlen(items[i]) + 1;
	out = calloc(1, len);
	for (size_t i = 0; i < n; i++) {
		strcat(out, items[i]);
		strcat(out, "\n");
	}
	free(copy);
	return out;
}

/*
 * The query-* files of an aws-c-auth case: the presigned-URL form, with
 * X-Amz-Expires from context.json. Checks the canonical request, the string to
 * sign, the signature and that the URL carries exactly the expected parameters.
 */
static void run_crt_query(const char *dir, const char *base_label, json_t *ctx,
                          const struct raw_req *r)
{
	char path[4096], label[600], *creq, *sts, *sig, *sreq;
	struct isc_sigv4_presigned out;
	struct isc_err err;
	int ok = 1;
	snprintf(label, sizeof(label), "%s (query)", base_label);
#define LOAD(var, file)                                                                            \
	snprintf(path, sizeof(path), "%s/%s", dir, file);                                          \
	var = slurp(path, NULL);                                                                   \
	chomp(var)
	LOAD(creq, "query-canonical-request.txt");
	LOAD(sts, "query-string-to-sign.txt");
	LOAD(sig, "query-signature.txt");
	LOAD(sreq, "query-signed-request.txt");
#undef LOAD
	if (!creq || !sts || !sig || !sreq) {
		printf("FAIL %s: cannot read the case files\n", label);
		n_fail++;
		goto done;
	}
	{
		json_t *c = json_object_get(ctx, "credentials");
		struct isc_sigv4_key key = {
		    json_string_value(json_object_get(c, "access_key_id")),
		    json_string_value(json_object_get(c, "secret_access_key")),
		    json_string_value(json_object_get(c, "token")),
		};
		struct isc_sigv4_params p = {
		    .region = json_string_value(json_object_get(ctx, "region")),
		    .service = json_string_value(json_object_get(ctx, "service")),
		    .time_ms = ms_from_iso(json_string_value(json_object_get(ctx, "timestamp"))),
		    .normalize_path = json_is_true(json_object_get(ctx, "normalize")),
		    .unsigned_session_token =
		        json_is_true(json_object_get(ctx, "omit_session_token")),
		};
		long expires =
		    (long)json_integer_value(json_object_get(ctx, "expiration_in_seconds"));
		if (isc_sigv4_presign(&key, &p,
		                      &(struct isc_sigv4_request){r->method, r->path, r->h, r->nh,
		                                                  r->body, r->body_len},
		                      expires, &out, &err)) {
			printf("FAIL %s: %s\n", label, err.msg);
			ok = 0;
		} else {
			/* The request line: "METHOD /path?query HTTP/1.1". */
			char *q = strchr(sreq, '?'), *want, *got;
			size_t qlen = q ? strcspn(q + 1, " ") : 0;
			char *want_q = q ? strndup(q + 1, qlen) : NULL;
			want = params_sorted(want_q);
			got = params_sorted(out.query);
			ok = same(label, "canonical request", creq, out.canonical_request) &&
			     same(label, "string to sign", sts, out.string_to_sign) &&
			     same(label, "signature", sig, out.signature) &&
			     same(label, "query parameters", want, got);
			free(want);
			free(got);
			free(want_q);
		}
		isc_sigv4_presigned_cleanup(&out);
	}
	record(label, ok);
done:
	free(creq);
	free(sts);
	free(sig);
	free(sreq);
}

/* An aws-c-auth case folder with context.json, request.txt and header-*.txt. */
static void run_crt(const char *dir, const char *label)
{
	char path[4096], *req_txt, *creq, *sts, *sig, *sreq;
	json_t *ctx;
	json_error_t jerr;
	struct raw_req r;
	struct isc_sigv4_signed out;
	struct isc_err err;
	int ok = 1;

#define LOAD(var, file)                                                                            \
	snprintf(path, sizeof(path), "%s/%s", dir, file);                                          \
	var = slurp(path, NULL);                                                                   \
	chomp(var)
	LOAD(req_txt, "request.txt");
	LOAD(creq, "header-canonical-request.txt");
	LOAD(sts, "header-string-to-sign.txt");
	LOAD(sig, "header-signature.txt");
	LOAD(sreq, "header-signed-request.txt");
#undef LOAD
	snprintf(path, sizeof(path), "%s/context.json", dir);
	ctx = json_load_file(path, 0, &jerr);
	memset(&r, 0, sizeof(r));
	if (!req_txt || !creq || !sts || !sig || !sreq || !ctx || raw_req_parse(req_txt, &r)) {
		printf("FAIL %s: cannot read the case files\n", label);
		n_fail++;
		goto done;
	}
	{
		json_t *c = json_object_get(ctx, "credentials");
		struct isc_sigv4_key key = {
		    json_string_value(json_object_get(c, "access_key_id")),
		    json_string_value(json_object_get(c, "secret_access_key")),
		    json_string_value(json_object_get(c, "token")),
		};
		struct isc_sigv4_params p = {
		    .region = json_string_value(json_object_get(ctx, "region")),
		    .service = json_string_value(json_object_get(ctx, "service")),
		    .time_ms = ms_from_iso(json_string_value(json_object_get(ctx, "timestamp"))),
		    .normalize_path = json_is_true(json_object_get(ctx, "normalize")),
		    .sign_body = json_is_true(json_object_get(ctx, "sign_body")),
		    .unsigned_session_token =
		        json_is_true(json_object_get(ctx, "omit_session_token")),
		};
		const char *want_authz = strstr(sreq, "Authorization:");
		char *authz_line =
		    want_authz ? strndup(want_authz + 14, strcspn(want_authz + 14, "\n")) : NULL;
		if (isc_sigv4_sign(&key, &p,
		                   &(struct isc_sigv4_request){r.method, r.path, r.h, r.nh, r.body,
		                                               r.body_len},
		                   &out, &err)) {
			printf("FAIL %s: %s\n", label, err.msg);
			ok = 0;
		} else {
			ok = same(label, "canonical request", creq, out.canonical_request) &&
			     same(label, "string to sign", sts, out.string_to_sign) &&
			     same(label, "signature", sig, out.signature) &&
			     same(label, "Authorization", authz_line, out.authorization);
		}
		free(authz_line);
		isc_sigv4_signed_cleanup(&out);
	}
	record(label, ok);
	snprintf(path, sizeof(path), "%s/query-signature.txt", dir);
	if (access(path, F_OK) == 0)
		run_crt_query(dir, label, ctx, &r);
done:
	raw_req_free(&r);
	json_decref(ctx);
	free(req_txt);
	free(creq);
	free(sts);
	free(sig);
	free(sreq);
}

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Walks every case folder under dir, in name order. */
static void walk(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		char sub[1024], probe[2200], label[512];
		snprintf(sub, sizeof(sub), "%s/%s", dir, names[i]);
		snprintf(label, sizeof(label), "%s%s", prefix, names[i]);
		if (!is_dir(sub))
			goto next;
		snprintf(probe, sizeof(probe), "%s/%s.req", sub, names[i]);
		if (access(probe, F_OK) == 0) {
			run_classic(sub, names[i], label);
			goto next;
		}
		snprintf(probe, sizeof(probe), "%s/context.json", sub);
		if (access(probe, F_OK) == 0) {
			run_crt(sub, label);
			goto next;
		}
		{
			char pre[600];
			snprintf(pre, sizeof(pre), "%s/", label);
			walk(sub, pre);
		}
	next:
		free(names[i]);
	}
	free(names);
}

static void test_suite(void **state)
{
	(void)state;
	n_pass = n_fail = 0;
	walk(vectors_dir(), "");
	printf("sigv4 vectors: %d passed, %d failed\n", n_pass, n_fail);
	assert_int_equal(n_fail, 0);
	/* every case folder of both suites ran, and each aws-c-auth case in query form */
	assert_int_equal(n_pass, 34 + 38 + 38);
}

static void test_intermediates(void **state)
{
	struct isc_buf b;
	unsigned char k[32];
	char hex[65];
	(void)state;
	isc_buf_init(&b, 0);
	assert_int_equal(isc_sigv4_canonical_uri(&b, "/a/./b/../c//d/", 15, 1), 0);
	assert_string_equal(isc_buf_cstr(&b), "/a/c/d/");
	isc_buf_reset(&b);
	assert_int_equal(isc_sigv4_canonical_query(&b, "b=2&a=x y&a=%41&c"), 0);
	assert_string_equal(isc_buf_cstr(&b), "a=A&a=x%20y&b=2&c=");
	isc_buf_cleanup(&b);
	/* AWS's documented derivation example (IAM SigV4 docs: 20120215/us-east-1/iam). */
	isc_sigv4_signing_key(SUITE_SECRET, "20120215", "us-east-1", "iam", k);
	isc_sigv4_hex(k, 32, hex);
	assert_string_equal(hex,
	                    "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

static void test_no_secret_in_output(void **state)
{
	struct isc_http_header h[] = {{"Host", "ec2.us-east-1.amazonaws.com"}};
	struct isc_sigv4_key key = {SUITE_AKID, SUITE_SECRET, "TOKENVALUE"};
	struct isc_sigv4_params p = {"us-east-1", "ec2", 1440938160000, 1, 0, 0};
	struct isc_sigv4_signed out;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_sigv4_sign(&key, &p,
	                                &(struct isc_sigv4_request){"POST", "/", h, 1, "x", 1},
	                                &out, &err),
	                 0);
	assert_null(strstr(out.authorization, SUITE_SECRET));
	assert_null(strstr(out.canonical_request, SUITE_SECRET));
	assert_int_equal(out.n_add, 3); /* date, token, authorization */
	assert_string_equal(out.add[1].name, "X-Amz-Security-Token");
	isc_sigv4_signed_cleanup(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_intermediates),
	    cmocka_unit_test(test_no_secret_in_output),
	    cmocka_unit_test(test_suite),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
