/*
 * The AWS driver: the isc_provider table for EC2 (plus STS for the credential
 * check). Every call is a form-encoded POST signed with SigV4 and sent through
 * the shared HTTP layer, whose retry loop asks aws_classify() what a reply
 * means; that is where EC2 error codes become isc codes. A gang is one
 * RunInstances with MinCount = MaxCount per zone, each zone with its own
 * ClientToken derived from the broker's token, so a retry or a crash replay
 * never creates a second gang.
 */
#include "common/log.h"
#include "providers/busy.h"
#include "providers/sweep.h"
#include "providers/aws/aws_creds.h"
#include "providers/aws/aws_int.h"
#include "providers/aws/ec2.h"
#include "providers/aws/pricing.h"
#include "providers/aws/spot_advisor.h"
#include "providers/aws/sigv4.h"
#include "providers/provider.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TERMINATE_BATCH 1000
#define DESCRIBE_PAGE   "1000"
#define MAX_PAGES       100 /* describe_max_pages: 100 pages of 1000 = 100,000 instances */
/* A placeholder that is well-formed (ami- + 8 hex) but names no real image: set image_id. */
#define DEFAULT_IMAGE "ami-00000000"

/* SVC_PRICING: the Price List Query API (JSON 1.1), in us-east-1 whatever the session's region. */
enum aws_service { SVC_EC2, SVC_STS, SVC_PRICING };
#define N_SVC          3
#define PRICING_URL    "https://api.pricing.us-east-1.amazonaws.com"
#define PRICING_REGION "us-east-1"

struct aws_session {
	char region[64];
	struct isc_aws_creds creds;
	char *url[N_SVC];  /* per enum aws_service, no trailing slash */
	char *host[N_SVC]; /* authority of url[], for the signed Host header */
	char *image_id;
	char *subnet_id;
	char subnet_zone[64]; /* subnet_id's zone and range once DescribeSubnets said ("": not */
	char subnet_cidr[64]; /* asked yet) */
	char subnet_vpc[32];  /* subnet_id's VPC, with subnet_zone */
	char *security_group_id;
	char *product_description;
	int tenant_isolation;  /* tenant_isolation=auto: a security group per tenant */
	char *tenant_ssh_cidr; /* who may reach a tenant's nodes on SSH (the broker) */
	char tenant_ssh_port[8];
	int cluster_placement;  /* cluster_placement=auto: a cluster group per multi-node gang */
	int efa;                /* efa=auto: EFA interfaces for multi-node gangs of EFA types */
	long disk_size_gb;      /* the root volume's size (gp3); EC2 allows 1..16384 GiB */
	char *root_device_name; /* the AMI's root device, or NULL: DescribeImages asks */
	int public_ip_iface;    /* associate_public_ip=true: use NetworkInterface.1.* */
	int max_pages;          /* describe_max_pages: more is an error, never a shorter list */
	char *spot_advisor_url; /* spot_advisor_url: the Spot Advisor's public JSON */
	const struct isc_clock *clock;
	struct isc_http_client http;
};

/* What aws_classify learns from a reply, for the caller's decisions. */
struct call_ctx {
	const char *action;
	const struct aws_session *s;
	char code[128];
	char message[400];
};

static struct aws_session *impl(struct isc_provider_session *s)
{
	return s->impl;
}

static int aws_classify(void *vctx, const struct isc_http_response *resp, struct isc_err *err)
{
	struct call_ctx *cc = vctx;
	struct isc_ec2_error e;
	int code;

	cc->code[0] = cc->message[0] = '\0';
	if (resp->status >= 200 && resp->status < 300)
		return 0;
	const char *secrets[2] = {cc->s->creds.secret_access_key, cc->s->creds.session_token};
	/* Scrubbed before anything is cut to size: AWS echoes canonical requests. */
	if (isc_ec2_parse_error_scrubbed(resp->body.data, resp->body.len, secrets, 2, &e) == 0) {
		snprintf(cc->code, sizeof(cc->code), "%s", e.code);
		snprintf(cc->message, sizeof(cc->message), "%s", e.message);
		code = isc_ec2_classify_code(e.code, resp->status);
		/* Both services answer every credential problem with 401/403, whatever the code. */
		if ((resp->status == 401 || resp->status == 403) && code == ISC_EINVALID)
			code = ISC_EAUTH;
		return isc_err_set(err, code, "%s: %s: %s (HTTP %ld)", cc->action, e.code,
		                   e.message, resp->status);
	}
	code = isc_ec2_classify_code(NULL, resp->status);
	if (resp->status == 401 || resp->status == 403)
		code = ISC_EAUTH;
	return isc_err_set(err, code, "%s: HTTP %ld without an AWS error document", cc->action,
	                   resp->status);
}

/* Sends one signed Query API call; resp holds the reply body on success. */
static int aws_call(struct aws_session *s, enum aws_service svc, const char *action,
                    const struct isc_buf *form, struct call_ctx *cc, struct isc_http_response *resp,
                    struct isc_err *err)
{
	static const char *svc_name[2] = {"ec2", "sts"};
	struct isc_http_header base[2] = {
	    {"Host", s->host[svc]},
	    {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
	};
	struct isc_http_header hdrs[2 + 4];
	struct isc_sigv4_key key = {s->creds.access_key_id, s->creds.secret_access_key,
	                            s->creds.session_token};
	struct isc_sigv4_params p = {
	    .region = s->region,
	    .service = svc_name[svc],
	    .time_ms = s->clock->now_ms(s->clock->ctx),
	    .normalize_path = 1,
	};
	struct isc_sigv4_request sreq = {"POST", "/", base, 2, form->data, form->len};
	struct isc_sigv4_signed sig;
	struct isc_http_request req;
	char url[1024];
	int rc;

	memset(cc, 0, sizeof(*cc));
	cc->action = action;
	cc->s = s;
	if (snprintf(url, sizeof(url), "%s/", s->url[svc]) >= (int)sizeof(url))
		return isc_err_set(err, ISC_EINVALID, "AWS endpoint URL too long");
	rc = isc_sigv4_sign(&key, &p, &sreq, &sig, err);
	if (rc) {
		isc_sigv4_signed_cleanup(&sig);
		return rc;
	}
	memcpy(hdrs, base, sizeof(base));
	for (size_t i = 0; i < sig.n_add; i++)
		hdrs[2 + i] = sig.add[i];
	req = (struct isc_http_request){"POST", url, hdrs, 2 + sig.n_add, form->data, form->len};
	rc = isc_http_do(&s->http, &req, aws_classify, cc, resp, err);
	isc_sigv4_signed_cleanup(&sig);
	return rc;
}

/* ---- session ---- */

/* "https://host:port/x" -> "host:port" (what curl sends as Host, so what we sign). */
static char *authority(const char *url)
{
	const char *p = strstr(url, "://");
	size_t n;
	p = p ? p + 3 : url;
	n = strcspn(p, "/?#");
	const char *at = memchr(p, '@', n);
	if (at) {
		n -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	return strndup(p, n);
}

static void aws_session_free(struct isc_provider_session *ps)
{
	struct aws_session *s;
	if (!ps)
		return;
	s = ps->impl;
	if (s) {
		isc_aws_creds_cleanup(&s->creds);
		for (int i = 0; i < N_SVC; i++) {
			free(s->url[i]);
			free(s->host[i]);
		}
		free(s->image_id);
		free(s->subnet_id);
		free(s->security_group_id);
		free(s->tenant_ssh_cidr);
		free(s->root_device_name);
		free(s->product_description);
		free(s->spot_advisor_url);
		free(s);
	}
	free(ps);
}

extern const struct isc_provider isc_provider_aws;

/* A setting that is "auto" (the default: *on = 1) or "never" (*on = 0). */
static int auto_never(const struct isc_provider_settings *settings, const char *key, int *on,
                      struct isc_err *err)
{
	const char *v = isc_provider_setting(settings, key);
	*on = 1;
	if (!v || !v[0] || strcmp(v, "auto") == 0)
		return 0;
	if (strcmp(v, "never") == 0) {
		*on = 0;
		return 0;
	}
	return isc_err_set(err, ISC_EINVALID,
	                   "providers.aws.%s: '%.40s' is neither \"auto\" nor \"never\"", key, v);
}

static int aws_session_new(const struct isc_provider_settings *settings, const char *region,
                           const struct isc_http_transport *t, const struct isc_clock *clock,
                           struct isc_provider_session **out, struct isc_err *err)
{
	struct isc_provider_session *ps = calloc(1, sizeof(*ps));
	struct aws_session *s = calloc(1, sizeof(*s));
	const char *pub, *insecure;
	int rc, allow_insecure;

	*out = NULL;
	if (!ps || !s) {
		free(ps);
		free(s);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	ps->provider = &isc_provider_aws;
	ps->impl = s;
	rc = isc_aws_region_resolve(region, s->region, sizeof(s->region), err);
	if (rc)
		goto fail;
	snprintf(ps->region, sizeof(ps->region), "%s", s->region);
	rc = isc_aws_creds_resolve(settings, &s->creds, err);
	if (rc)
		goto fail;
	s->url[SVC_EC2] = isc_aws_endpoint_resolve(settings, "ec2", s->region);
	s->url[SVC_STS] = isc_aws_endpoint_resolve(settings, "sts", s->region);
	/* endpoint_pricing, AWS_ENDPOINT_URL_PRICING, AWS_ENDPOINT_URL, endpoint; else AWS's. */
	s->url[SVC_PRICING] = isc_aws_endpoint_resolve(settings, "pricing", PRICING_REGION);
	if (s->url[SVC_PRICING] &&
	    !strcmp(s->url[SVC_PRICING], "https://pricing." PRICING_REGION ".amazonaws.com")) {
		free(s->url[SVC_PRICING]);
		s->url[SVC_PRICING] = strdup(PRICING_URL);
	}
	s->image_id = isc_provider_setting_dup(settings, "image_id", DEFAULT_IMAGE);
	s->product_description =
	    isc_provider_setting_dup(settings, "product_description", "Linux/UNIX");
	s->subnet_id = isc_provider_setting_dup(settings, "subnet_id", NULL);
	s->security_group_id = isc_provider_setting_dup(settings, "security_group_id", NULL);
	if (isc_provider_setting(settings, "placement_group") &&
	    isc_provider_setting(settings, "placement_group")[0]) {
		/* One group for every gang in every zone cannot work: a cluster group is
		 * zone-bound. */
		rc =
		    isc_err_set(err, ISC_EINVALID,
		                "providers.aws.placement_group is no longer read: the driver makes "
		                "a cluster placement group per gang and zone (cluster_placement = "
		                "\"auto\" or \"never\")");
		goto fail;
	}
	if ((rc = auto_never(settings, "cluster_placement", &s->cluster_placement, err)) ||
	    (rc = auto_never(settings, "efa", &s->efa, err)) ||
	    (rc = auto_never(settings, "tenant_isolation", &s->tenant_isolation, err)))
		goto fail;
	{
		/* The tenant group's one rule from outside: SSH from the broker (its range), on
		 * the port the broker's SSH uses (config/ keeps ssh_port to itself). */
		const char *port = isc_provider_setting(settings, "tenant_ssh_port");
		char *end = NULL;
		long v = port && port[0] ? strtol(port, &end, 10) : 22;
		if (port && port[0] && (*end || v < 1 || v > 65535)) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "providers.aws.tenant_ssh_port: '%.40s' is not a port",
			                 port);
			goto fail;
		}
		snprintf(s->tenant_ssh_port, sizeof(s->tenant_ssh_port), "%ld", v);
		s->tenant_ssh_cidr =
		    isc_provider_setting_dup(settings, "tenant_ssh_cidr", "0.0.0.0/0");
		if (!s->tenant_ssh_cidr) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
	}
	{
		/* gp3 volumes hold 1..16384 GiB (EC2 User Guide, "Amazon EBS volume types"). */
		const char *v = isc_provider_setting(settings, "disk_size_gb");
		char *end = NULL;
		long gb = v && v[0] ? strtol(v, &end, 10) : 200;
		if (v && v[0] && (*end || gb < 1 || gb > 16384)) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "providers.aws.disk_size_gb: '%.40s' is not a size from 1 to "
			    "16384 (GiB)",
			    v);
			goto fail;
		}
		s->disk_size_gb = gb;
	}
	s->root_device_name = isc_provider_setting_dup(settings, "root_device_name", NULL);
	{
		const char *mp = isc_provider_setting(settings, "describe_max_pages");
		char *end = NULL;
		long v = mp ? strtol(mp, &end, 10) : MAX_PAGES;
		if (mp && (!*mp || *end || v < 1 || v > 100000)) {
			rc =
			    isc_err_set(err, ISC_EINVALID,
			                "providers.aws.describe_max_pages: '%.40s' is not a number "
			                "from 1 to 100000",
			                mp);
			goto fail;
		}
		s->max_pages = (int)v;
	}
	pub = isc_provider_setting(settings, "associate_public_ip");
	s->public_ip_iface = pub && (strcmp(pub, "true") == 0 || strcmp(pub, "1") == 0);
	if (!s->url[0] || !s->url[1] || !s->url[2] || !s->image_id || !s->product_description) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto fail;
	}
	insecure = isc_provider_setting(settings, "allow_insecure_endpoint");
	allow_insecure = insecure && strcmp(insecure, "true") == 0;
	/*
	 * The Spot Advisor's JSON is AWS's public file; an account pointed at another
	 * endpoint (a mock, a test) reads it from that endpoint instead, so a session
	 * configured away from AWS never reaches AWS for it.
	 */
	if (isc_provider_setting(settings, "spot_advisor_url")) {
		s->spot_advisor_url = isc_provider_setting_dup(settings, "spot_advisor_url", NULL);
	} else if (isc_provider_setting(settings, "endpoint") &&
	           isc_provider_setting(settings, "endpoint")[0]) {
		const char *ep = isc_provider_setting(settings, "endpoint");
		size_t l = strlen(ep);
		if (asprintf(&s->spot_advisor_url, "%.*s/spot-advisor-data.json",
		             (int)(l && ep[l - 1] == '/' ? l - 1 : l), ep) < 0)
			s->spot_advisor_url = NULL;
	} else {
		s->spot_advisor_url = strdup(ISC_SPOT_ADVISOR_URL);
	}
	if (!s->spot_advisor_url) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = isc_http_endpoint_check(s->spot_advisor_url, allow_insecure, err))) {
		isc_err_wrap(err, "providers.aws.spot_advisor_url");
		goto fail;
	}
	for (int i = 0; i < N_SVC; i++) {
		/* The session token and signed requests never go out in clear text by accident. */
		if ((rc = isc_http_endpoint_check(s->url[i], allow_insecure, err))) {
			isc_err_wrap(err, "AWS %s",
			             i == SVC_EC2   ? "EC2"
			             : i == SVC_STS ? "STS"
			                            : "Price List");
			goto fail;
		}
		if (!(s->host[i] = authority(s->url[i]))) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
	}
	s->clock = clock ? clock : isc_clock_system();
	isc_http_client_init(&s->http, t, s->clock);
	s->http.policy.allow_insecure = allow_insecure;
	*out = ps;
	return 0;
fail:
	aws_session_free(ps);
	return rc;
}

/* ---- check_credentials ---- */

static int aws_check_credentials(struct isc_provider_session *ps, struct isc_identity *out,
                                 struct isc_err *err)
{
	struct aws_session *s = impl(ps);
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc;

	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	rc = isc_ec2_form_init(&form, "GetCallerIdentity", ISC_STS_VERSION);
	if (rc)
		rc = isc_err_set(err, rc, "out of memory");
	if (!rc)
		rc = aws_call(s, SVC_STS, "GetCallerIdentity", &form, &cc, &resp, err);
	if (!rc)
		rc = isc_sts_parse_identity(resp.body.data, resp.body.len, out, err);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* ---- ondemand_prices: the Price List Query API ---- */

static int pages_done(const struct aws_session *s, const char *action, int rc, const char *next,
                      struct isc_err *err);

/* Its errors are JSON: {"__type": "...#InvalidParameterException", "Message": "..."}. */
static int pricing_classify(void *vctx, const struct isc_http_response *resp, struct isc_err *err)
{
	struct call_ctx *cc = vctx;
	json_t *root;
	const char *type, *msg, *hash;
	int code;

	if (resp->status >= 200 && resp->status < 300)
		return 0;
	code = isc_http_classify_status(NULL, resp, err);
	if (resp->status == 400)
		code = ISC_EINVALID;
	root = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
	type = json_string_value(json_object_get(root, "__type"));
	msg = json_string_value(json_object_get(root, "Message"));
	if (!msg)
		msg = json_string_value(json_object_get(root, "message"));
	hash = type ? strrchr(type, '#') : NULL;
	type = hash ? hash + 1 : type;
	if (type && (strstr(type, "Signature") || strstr(type, "AccessDenied") ||
	             strstr(type, "UnrecognizedClient") || strstr(type, "InvalidClientTokenId")))
		code = ISC_EAUTH;
	if (type && strstr(type, "Throttling"))
		code = ISC_ETHROTTLED;
	isc_err_set(err, code, "%s: %.100s: %.300s (HTTP %ld)", cc->action, type ? type : "error",
	            msg ? msg : "(no message)", resp->status);
	json_decref(root);
	return code;
}

/* One signed JSON 1.1 call to the Price List Query API (service "pricing", us-east-1). */
static int pricing_call(struct aws_session *s, const struct isc_buf *body, struct call_ctx *cc,
                        struct isc_http_response *resp, struct isc_err *err)
{
	struct isc_http_header base[3] = {
	    {"Host", s->host[SVC_PRICING]},
	    {"Content-Type", "application/x-amz-json-1.1"},
	    {"X-Amz-Target", ISC_AWS_PRICING_TARGET},
	};
	struct isc_http_header hdrs[3 + 4];
	struct isc_sigv4_key key = {s->creds.access_key_id, s->creds.secret_access_key,
	                            s->creds.session_token};
	struct isc_sigv4_params p = {
	    .region = PRICING_REGION,
	    .service = "pricing",
	    .time_ms = s->clock->now_ms(s->clock->ctx),
	    .normalize_path = 1,
	};
	struct isc_sigv4_request sreq = {"POST", "/", base, 3, body->data, body->len};
	struct isc_sigv4_signed sig;
	struct isc_http_request req;
	char url[1024];
	int rc;

	memset(cc, 0, sizeof(*cc));
	cc->action = "GetProducts";
	cc->s = s;
	if (snprintf(url, sizeof(url), "%s/", s->url[SVC_PRICING]) >= (int)sizeof(url))
		return isc_err_set(err, ISC_EINVALID, "AWS Price List endpoint URL too long");
	if ((rc = isc_sigv4_sign(&key, &p, &sreq, &sig, err))) {
		isc_sigv4_signed_cleanup(&sig);
		return rc;
	}
	memcpy(hdrs, base, sizeof(base));
	for (size_t i = 0; i < sig.n_add; i++)
		hdrs[3 + i] = sig.add[i];
	req = (struct isc_http_request){"POST", url, hdrs, 3 + sig.n_add, body->data, body->len};
	rc = isc_http_do(&s->http, &req, pricing_classify, cc, resp, err);
	isc_sigv4_signed_cleanup(&sig);
	return rc;
}

/* One GetProducts (and its pages) per instance type: the filters name one type each. */
static int aws_ondemand_prices(struct isc_provider_session *ps, const char *const *types, size_t n,
                               struct isc_price_point **out, size_t *n_out, struct isc_err *err)
{
	struct aws_session *s = impl(ps);
	struct isc_price_point *pts = NULL;
	struct isc_buf body;
	size_t npts = 0, cap = 0;
	int64_t now = s->clock->now_ms(s->clock->ctx);
	int rc = 0;

	*out = NULL;
	*n_out = 0;
	isc_buf_init(&body, 0);
	for (size_t i = 0; i < n && !rc; i++) {
		char *next = NULL;
		int pages = 0;
		do {
			struct isc_http_response resp;
			struct call_ctx cc;
			char *tok = next;
			next = NULL;
			if (isc_aws_pricing_request(&body, types[i], s->region, tok) ||
			    isc_buf_putc(&body, '\0')) {
				free(tok);
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				break;
			}
			free(tok);
			body.len--; /* the NUL is not sent */
			isc_http_response_init(&resp);
			rc = pricing_call(s, &body, &cc, &resp, err);
			if (!rc)
				rc = isc_aws_pricing_parse(resp.body.data, resp.body.len, pages + 1,
				                           &pts, &npts, &cap, &next, err);
			isc_http_response_cleanup(&resp);
		} while (!rc && next && ++pages < s->max_pages);
		rc = pages_done(s, "GetProducts", rc, next, err);
		free(next);
	}
	isc_buf_cleanup(&body);
	if (rc) {
		free(pts);
		return rc;
	}
	for (size_t i = 0; i < npts; i++)
		pts[i].at_ms = now;
	*out = pts;
	*n_out = npts;
	return 0;
}

/* ---- refresh_prices ---- */

static int iso_now(const struct aws_session *s, char out[32])
{
	time_t t = (time_t)(s->clock->now_ms(s->clock->ctx) / 1000);
	struct tm tm;
	if (!gmtime_r(&t, &tm))
		return ISC_EINVALID;
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return 0;
}

/*
 * After a paged call: a page token left over means the listing was cut short,
 * which is an error. A shorter list would read as instances that are gone.
 */
static int pages_done(const struct aws_session *s, const char *action, int rc, const char *next,
                      struct isc_err *err)
{
	if (rc || !next)
		return rc;
	return isc_err_set(err, ISC_EINVALID,
	                   "%s: more than %d pages (describe_max_pages); the listing is incomplete",
	                   action, s->max_pages);
}

static int aws_refresh_prices(struct isc_provider_session *ps, const char *const *types, size_t n,
                              struct isc_price_point **out, size_t *n_out, struct isc_err *err)
{
	struct aws_session *s = impl(ps);
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	struct isc_price_point *pts = NULL;
	size_t npts = 0, cap = 0;
	char *next = NULL, now[32];
	int rc = 0, pages = 0;

	*out = NULL;
	*n_out = 0;
	if (n == 0)
		return 0;
	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	iso_now(s, now);
	do {
		struct isc_ec2_spot_price *sp = NULL;
		size_t nsp = 0;
		/*
		 * StartTime=now makes EC2 return, per (type, zone), the price in
		 * effect now: the last change before StartTime.
		 */
		rc = isc_ec2_form_init(&form, "DescribeSpotPriceHistory", ISC_EC2_VERSION);
		for (size_t i = 0; i < n && !rc; i++)
			rc = isc_ec2_form_addf(&form, types[i], "InstanceType.%zu", i + 1);
		if (!rc)
			rc =
			    isc_ec2_form_add(&form, "ProductDescription.1", s->product_description);
		if (!rc)
			rc = isc_ec2_form_add(&form, "StartTime", now);
		if (!rc)
			rc = isc_ec2_form_add(&form, "MaxResults", DESCRIBE_PAGE);
		if (!rc && next)
			rc = isc_ec2_form_add(&form, "NextToken", next);
		free(next);
		next = NULL;
		if (rc) {
			rc = isc_err_set(err, rc, "DescribeSpotPriceHistory: request too large");
			break;
		}
		rc = aws_call(s, SVC_EC2, "DescribeSpotPriceHistory", &form, &cc, &resp, err);
		if (!rc)
			rc = isc_ec2_parse_spot_prices(resp.body.data, resp.body.len, &sp, &nsp,
			                               &next, err);
		for (size_t i = 0; i < nsp && !rc; i++) {
			size_t j;
			for (j = 0; j < npts; j++)
				if (strcmp(pts[j].instance_type, sp[i].instance_type) == 0 &&
				    strcmp(pts[j].zone, sp[i].zone) == 0)
					break;
			if (j == npts) {
				if (npts == cap) {
					size_t ncap = cap ? cap * 2 : 16;
					struct isc_price_point *np =
					    realloc(pts, ncap * sizeof(*np));
					if (!np) {
						rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
						break;
					}
					pts = np;
					cap = ncap;
				}
				memset(&pts[npts], 0, sizeof(pts[npts]));
				npts++;
			} else if (pts[j].at_ms >= sp[i].at_ms) {
				continue; /* keep the newest */
			}
			snprintf(pts[j].instance_type, sizeof(pts[j].instance_type), "%s",
			         sp[i].instance_type);
			snprintf(pts[j].zone, sizeof(pts[j].zone), "%s", sp[i].zone);
			pts[j].price_micros_per_hour = sp[i].price_micros;
			pts[j].at_ms = sp[i].at_ms;
		}
		free(sp);
	} while (!rc && next && ++pages < s->max_pages);
	rc = pages_done(s, "DescribeSpotPriceHistory", rc, next, err);
	free(next);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	if (rc) {
		free(pts);
		return rc;
	}
	*out = pts;
	*n_out = npts;
	return 0;
}

/* ---- launch_gang ---- */

int isc_aws_zone_token(const char *token, const char *zone, char out[65], struct isc_err *err)
{
	size_t tl = token ? strlen(token) : 0, zl = zone ? strlen(zone) : 0;
	if (tl == 0 || tl > 64)
		return isc_err_set(err, ISC_EINVALID, "idempotency token must be 1..64 characters");
	for (size_t i = 0; i < tl; i++)
		if (token[i] < 0x21 || token[i] > 0x7e)
			return isc_err_set(err, ISC_EINVALID,
			                   "idempotency token must be printable ASCII");
	if (zl == 0) {
		/* No zone named: EC2 picks one, and the token is the intent's own. */
		memcpy(out, token, tl + 1); /* tl <= 64 was checked above */
		return 0;
	}
	if (tl + 1 + zl <= 64) {
		memcpy(out, token, tl);
		out[tl] = '-';
		memcpy(out + tl + 1, zone, zl + 1);
		return 0;
	}
	/* Too long to append: a prefix keeps it readable, the hash keeps it unique. */
	char hash[65], *joined = NULL;
	if (asprintf(&joined, "%s\n%s", token, zone) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_sigv4_sha256_hex(joined, strlen(joined), hash);
	free(joined);
	snprintf(out, 65, "%.40s-%.16s-z%c", token, hash, zone[zl - 1]);
	return 0;
}

static int valid_ssh_key(const char *k)
{
	if (!k || !k[0] || strpbrk(k, "\r\n"))
		return 0;
	return strncmp(k, "ssh-", 4) == 0 || strncmp(k, "ecdsa-", 6) == 0 ||
	       strncmp(k, "sk-", 3) == 0;
}

int isc_aws_user_data(const char *ssh_key, const char *extra, char **out, struct isc_err *err)
{
	struct isc_buf raw;
	char *b64;
	int rc;

	*out = NULL;
	if (!valid_ssh_key(ssh_key))
		return isc_err_set(err, ISC_EINVALID,
		                   "the SSH public key must be one OpenSSH line");
	isc_buf_init(&raw, ISC_AWS_USER_DATA_MAX);
	rc = isc_buf_printf(&raw, "#cloud-config\nssh_authorized_keys:\n  - %s\n", ssh_key);
	if (!rc && extra && extra[0]) {
		/* The extra body continues our cloud-config document; drop a repeated header. */
		if (strncmp(extra, "#cloud-config\n", 14) == 0)
			extra += 14;
		rc = isc_buf_puts(&raw, extra);
		if (!rc && extra[strlen(extra) - 1] != '\n')
			rc = isc_buf_putc(&raw, '\n');
	}
	if (rc) {
		isc_buf_cleanup(&raw);
		return isc_err_set(err, ISC_EINVALID, "user data larger than EC2's %d bytes",
		                   ISC_AWS_USER_DATA_MAX);
	}
	b64 = malloc(4 * ((raw.len + 2) / 3) + 1);
	if (!b64) {
		isc_buf_cleanup(&raw);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)raw.data, (int)raw.len);
	isc_buf_cleanup(&raw);
	*out = b64;
	return 0;
}

/*
 * The network interfaces of an EFA gang (EC2 User Guide "EFA",
 * "Maximize network bandwidth on EC2 instances with multiple network cards"): network card 0 /
 * device 0 is an `efa` interface (it has the IP address), every further card an `efa-only` one at
 * device index 0, all in the one subnet and security group (EFA traffic does not cross subnets).
 * EC2 refuses a public IP with more than one interface, so associate_public_ip=true gets the
 * primary EFA interface only.
 */
static int efa_interfaces_form(const struct aws_session *s, int n_efa, const char *sg,
                               struct isc_buf *f)
{
	int rc = 0;
	if (s->public_ip_iface)
		n_efa = 1;
	for (int k = 0; k < n_efa && !rc; k++) {
		char card[16];
		int i = k + 1;
		snprintf(card, sizeof(card), "%d", k);
		rc = isc_ec2_form_addf(f, "0", "NetworkInterface.%d.DeviceIndex", i);
		if (n_efa > 1)
			rc = rc ? rc
			        : isc_ec2_form_addf(f, card, "NetworkInterface.%d.NetworkCardIndex",
			                            i);
		rc = rc ? rc
		        : isc_ec2_form_addf(f, k == 0 ? "efa" : "efa-only",
		                            "NetworkInterface.%d.InterfaceType", i);
		rc =
		    rc ? rc
		       : isc_ec2_form_addf(f, "true", "NetworkInterface.%d.DeleteOnTermination", i);
		if (s->public_ip_iface)
			rc = rc ? rc
			        : isc_ec2_form_addf(
			              f, "true", "NetworkInterface.%d.AssociatePublicIpAddress", i);
		if (s->subnet_id)
			rc = rc ? rc
			        : isc_ec2_form_addf(f, s->subnet_id, "NetworkInterface.%d.SubnetId",
			                            i);
		if (sg)
			rc = rc ? rc
			        : isc_ec2_form_addf(f, sg, "NetworkInterface.%d.SecurityGroupId.1",
			                            i);
	}
	return rc;
}

/*
 * group: the gang's cluster placement group or NULL; n_efa: EFA interfaces per node (0:
 * none); root: the AMI's root device name, whose volume gets disk_size_gb; sg: the
 * security group (the tenant's, or security_group_id) or NULL.
 */
static int run_instances_form(const struct aws_session *s, const struct isc_launch_spec *spec,
                              const char *zone, const char *token, const char *user_data,
                              const char *group, int n_efa, const char *root, const char *sg,
                              struct isc_buf *f)
{
	char count[16];
	int rc;
	snprintf(count, sizeof(count), "%u", spec->count);
	rc = isc_ec2_form_init(f, "RunInstances", ISC_EC2_VERSION);
	rc = rc ? rc : isc_ec2_form_add(f, "ImageId", s->image_id);
	rc = rc ? rc : isc_ec2_form_add(f, "InstanceType", spec->instance_type);
	rc = rc ? rc : isc_ec2_form_add(f, "MinCount", count); /* all or nothing */
	rc = rc ? rc : isc_ec2_form_add(f, "MaxCount", count);
	rc = rc ? rc : isc_ec2_form_add(f, "ClientToken", token);
	if (zone[0])
		rc = rc ? rc : isc_ec2_form_add(f, "Placement.AvailabilityZone", zone);
	if (group)
		rc = rc ? rc : isc_ec2_form_add(f, "Placement.GroupName", group);
	rc = rc ? rc : isc_ec2_form_add(f, "UserData", user_data);
	if (root && root[0]) {
		/* The root device's own name resizes the root volume (any other adds a disk). */
		char gb[24];
		snprintf(gb, sizeof(gb), "%ld", s->disk_size_gb);
		rc = rc ? rc : isc_ec2_form_add(f, "BlockDeviceMapping.1.DeviceName", root);
		rc = rc ? rc : isc_ec2_form_add(f, "BlockDeviceMapping.1.Ebs.VolumeSize", gb);
		rc = rc ? rc : isc_ec2_form_add(f, "BlockDeviceMapping.1.Ebs.VolumeType", "gp3");
		rc = rc ? rc
		        : isc_ec2_form_add(f, "BlockDeviceMapping.1.Ebs.DeleteOnTermination",
		                           "true");
	}
	if (spec->spot) {
		rc = rc ? rc : isc_ec2_form_add(f, "InstanceMarketOptions.MarketType", "spot");
		rc = rc ? rc
		        : isc_ec2_form_add(f, "InstanceMarketOptions.SpotOptions.SpotInstanceType",
		                           "one-time");
		/* terminate: the only behaviour allowed with one-time requests in a placement group
		 */
		rc = rc ? rc
		        : isc_ec2_form_add(
		              f, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
		              "terminate");
	}
	if (n_efa > 0) {
		rc = rc ? rc : efa_interfaces_form(s, n_efa, sg, f);
	} else if (s->public_ip_iface) {
		/* With an interface, subnet and groups must live inside it, never at the top level.
		 */
		rc = rc ? rc : isc_ec2_form_add(f, "NetworkInterface.1.DeviceIndex", "0");
		rc =
		    rc ? rc
		       : isc_ec2_form_add(f, "NetworkInterface.1.AssociatePublicIpAddress", "true");
		if (s->subnet_id)
			rc = rc ? rc
			        : isc_ec2_form_add(f, "NetworkInterface.1.SubnetId", s->subnet_id);
		if (sg)
			rc = rc ? rc
			        : isc_ec2_form_add(f, "NetworkInterface.1.SecurityGroupId.1", sg);
	} else {
		if (s->subnet_id)
			rc = rc ? rc : isc_ec2_form_add(f, "SubnetId", s->subnet_id);
		if (sg)
			rc = rc ? rc : isc_ec2_form_add(f, "SecurityGroupId.1", sg);
	}
	for (int ts = 1; ts <= (spec->spot ? 2 : 1); ts++) {
		rc = rc ? rc
		        : isc_ec2_form_addf(f, ts == 1 ? "instance" : "spot-instances-request",
		                            "TagSpecification.%d.ResourceType", ts);
		for (size_t i = 0; i < spec->n_tags; i++) {
			rc = rc ? rc
			        : isc_ec2_form_addf(f, spec->tags[i].key,
			                            "TagSpecification.%d.Tag.%zu.Key", ts, i + 1);
			rc = rc ? rc
			        : isc_ec2_form_addf(f, spec->tags[i].value,
			                            "TagSpecification.%d.Tag.%zu.Value", ts, i + 1);
		}
	}
	return rc;
}

static int terminate_ids(struct aws_session *s, const char *const *ids, size_t n,
                         struct isc_err *err);

/*
 * An EC2 action with one parameter (GroupName, InstanceType.1, GroupId.1, ...): the reply
 * in *resp (the caller cleans it up) and the error code EC2 answered in cc->code.
 */
static int ec2_call1(struct aws_session *s, const char *action, const char *name, const char *value,
                     struct call_ctx *cc, struct isc_http_response *resp, struct isc_err *err)
{
	struct isc_buf form;
	int rc;

	isc_buf_init(&form, 0);
	rc = isc_ec2_form_init(&form, action, ISC_EC2_VERSION);
	rc = rc ? rc : isc_ec2_form_add(&form, name, value);
	if (rc) {
		cc->code[0] = '\0';
		rc = isc_err_set(err, ISC_EINVALID, "%s: request too large", action);
	} else {
		rc = aws_call(s, SVC_EC2, action, &form, cc, resp, err);
	}
	isc_buf_cleanup(&form);
	return rc;
}

/* Placement groups a launch of this process is filling (the reconcile skips them). */
static struct isc_busy_names busy_groups = ISC_BUSY_NAMES_INIT;

int isc_aws_group_name(const char *zone_token, char out[ISC_AWS_GROUP_NAME_MAX])
{
	/* The zone token is <= 64 printable ASCII; a placement group name may hold 255. */
	int n = snprintf(out, ISC_AWS_GROUP_NAME_MAX, "isc-%s", zone_token);
	return n > 0 && n < ISC_AWS_GROUP_NAME_MAX ? 0 : ISC_EINVALID;
}

/*
 * CreatePlacementGroup Strategy=cluster, tagged like the instances so the reconcile finds
 * it without the store. A group of that name already there is the one a replay of the
 * same launch made (the name comes from the launch's token): it is used again.
 */
static int create_group(struct aws_session *s, const char *name, const struct isc_launch_spec *spec,
                        struct isc_err *err)
{
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc;

	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	rc = isc_ec2_form_init(&form, "CreatePlacementGroup", ISC_EC2_VERSION);
	rc = rc ? rc : isc_ec2_form_add(&form, "GroupName", name);
	rc = rc ? rc : isc_ec2_form_add(&form, "Strategy", "cluster");
	rc =
	    rc ? rc : isc_ec2_form_add(&form, "TagSpecification.1.ResourceType", "placement-group");
	for (size_t i = 0; i < spec->n_tags && !rc; i++) {
		rc = isc_ec2_form_addf(&form, spec->tags[i].key, "TagSpecification.1.Tag.%zu.Key",
		                       i + 1);
		rc = rc ? rc
		        : isc_ec2_form_addf(&form, spec->tags[i].value,
		                            "TagSpecification.1.Tag.%zu.Value", i + 1);
	}
	if (rc)
		rc = isc_err_set(err, ISC_EINVALID, "CreatePlacementGroup: request too large");
	else
		rc = aws_call(s, SVC_EC2, "CreatePlacementGroup", &form, &cc, &resp, err);
	if (rc && strcmp(cc.code, "InvalidPlacementGroup.Duplicate") == 0)
		rc = 0;
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * DeletePlacementGroup. EC2 refuses while an instance (shutting-down included) is in the
 * group (InvalidPlacementGroup.InUse): *deleted stays 0 and a later reconcile asks again.
 * A group already gone counts as deleted.
 */
static int delete_group(struct aws_session *s, const char *name, int *deleted, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc;

	*deleted = 0;
	isc_http_response_init(&resp);
	rc = ec2_call1(s, "DeletePlacementGroup", "GroupName", name, &cc, &resp, err);
	if (!rc || strcmp(cc.code, "InvalidPlacementGroup.Unknown") == 0) {
		*deleted = 1;
		rc = 0;
	} else if (strcmp(cc.code, "InvalidPlacementGroup.InUse") == 0) {
		rc = 0;
	}
	isc_http_response_cleanup(&resp);
	return rc;
}

/* How many EFA interfaces a node of `type` takes: DescribeInstanceTypes MaximumEfaInterfaces. */
static int efa_interfaces_of(struct aws_session *s, const char *type, int *n_efa,
                             struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	struct isc_ec2_efa_info info;
	int rc;

	*n_efa = 0;
	isc_http_response_init(&resp);
	rc = ec2_call1(s, "DescribeInstanceTypes", "InstanceType.1", type, &cc, &resp, err);
	if (!rc)
		rc = isc_ec2_parse_efa_info(resp.body.data, resp.body.len, type, &info, err);
	if (!rc && info.supported)
		/* One EFA per network card at most: that is how they are laid out. */
		*n_efa = info.max_efa < info.max_cards ? info.max_efa : info.max_cards;
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * subnet_id's zone and range (DescribeSubnets), asked once per session. A subnet lives in
 * one zone and an instance launched into it lands there (EC2 User Guide, "Subnets for your
 * VPC"; RunInstances refuses a Placement.AvailabilityZone other than the subnet's), and the
 * range tells which security group rules hold the gang's traffic.
 */
static int subnet_info(struct aws_session *s, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc;

	if (s->subnet_zone[0])
		return 0;
	isc_http_response_init(&resp);
	rc = ec2_call1(s, "DescribeSubnets", "SubnetId.1", s->subnet_id, &cc, &resp, err);
	if (!rc)
		rc = isc_ec2_parse_subnet(resp.body.data, resp.body.len, s->subnet_id,
		                          s->subnet_zone, s->subnet_cidr, err);
	/* A tenant's security group is made in the subnet's VPC (a group is per VPC). */
	if (!rc && isc_ec2_parse_text(resp.body.data, resp.body.len, "subnetSet/item/vpcId",
	                              s->subnet_vpc, sizeof(s->subnet_vpc), NULL))
		s->subnet_vpc[0] = '\0';
	if (rc)
		s->subnet_zone[0] = s->subnet_cidr[0] = s->subnet_vpc[0] = '\0';
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * EFA needs its security group to allow all traffic to and from the group itself (EC2
 * User Guide, "Prepare an EFA-enabled security group"); without it NCCL over EFA hangs.
 * A gang without EFA still needs TCP among its nodes: the rendezvous port (MASTER_PORT)
 * and the ephemeral ports gloo's and NCCL's socket transports listen on, so all TCP from
 * the group itself or from a range holding the subnet (EC2 User Guide, "Security group
 * rules for different use cases": "Allow instances associated with the same security
 * group to communicate"). The rule is named when it is missing, so the operator can add
 * it.
 */
static int check_security_group(struct aws_session *s, int efa, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc, in_ok = 0, out_ok = 0;
	const char *sg = s->security_group_id;
	/* Without subnet_id EC2 picks the zone's default subnet: its range is not known here. */
	const char *cidr = s->subnet_cidr[0] ? s->subnet_cidr : NULL;
	char range[96] = "";

	if (cidr)
		snprintf(range, sizeof(range), " or a range holding %s", cidr);

	isc_http_response_init(&resp);
	rc = ec2_call1(s, "DescribeSecurityGroups", "GroupId.1", sg, &cc, &resp, err);
	if (!rc && efa)
		rc = isc_ec2_parse_sg_self_rules(resp.body.data, resp.body.len, sg, &in_ok, &out_ok,
		                                 err);
	else if (!rc)
		rc = isc_ec2_parse_sg_tcp_rules(resp.body.data, resp.body.len, sg, cidr, &in_ok,
		                                &out_ok, err);
	if (!rc && efa && (!in_ok || !out_ok))
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "security group %s lacks the rule EFA needs: %s%s%s (EC2 User Guide, "
		    "\"Prepare an EFA-enabled security group\")",
		    sg, in_ok ? "" : "inbound: all traffic from the group itself",
		    !in_ok && !out_ok ? "; " : "",
		    out_ok ? "" : "outbound: all traffic to the group itself");
	else if (!rc && (!in_ok || !out_ok))
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "security group %s lacks the rule a gang needs: %s%s%s%s%s (EC2 User Guide, "
		    "\"Security group rules for different use cases\")",
		    sg, in_ok ? "" : "inbound: all TCP from the group itself", in_ok ? "" : range,
		    !in_ok && !out_ok ? "; " : "",
		    out_ok ? "" : "outbound: all TCP to the group itself", out_ok ? "" : range);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* ---- tenants on the platform's account (docs/security.md, issue 42) ---- */

/* Tenant groups a launch of this process is about to use (the sweep skips them). */
static struct isc_busy_names busy_sgs = ISC_BUSY_NAMES_INIT;

int isc_aws_tenant_group_name(const char *broker_id, const char *tenant,
                              char out[ISC_AWS_TENANT_GROUP_MAX], struct isc_err *err)
{
	int n;
	if (!isc_tenant_name_ok(tenant))
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: tenant '%.40s' is not 1 to 32 of a-z, 0-9 and '-'",
		                   tenant ? tenant : "");
	/* GroupName: up to 255 characters, not starting with sg- (EC2 CreateSecurityGroup). */
	n = snprintf(out, ISC_AWS_TENANT_GROUP_MAX, "isc-tenant-%s-%s", broker_id, tenant);
	if (n <= 0 || n >= ISC_AWS_TENANT_GROUP_MAX)
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: broker id too long for a group name");
	return 0;
}

/* The id of the group called `name` in the session's VPC, "" when there is none; *in_ok: it
 * already admits all traffic from itself. */
static int find_tenant_group(struct aws_session *s, const char *name, char gid[32], int *in_ok,
                             struct isc_err *err)
{
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	struct isc_ec2_security_group *gs = NULL;
	size_t ng = 0;
	int rc, out_ok;

	gid[0] = '\0';
	*in_ok = 0;
	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	rc = isc_ec2_form_init(&form, "DescribeSecurityGroups", ISC_EC2_VERSION);
	rc = rc ? rc : isc_ec2_form_add(&form, "Filter.1.Name", "group-name");
	rc = rc ? rc : isc_ec2_form_add(&form, "Filter.1.Value.1", name);
	if (s->subnet_vpc[0]) {
		rc = rc ? rc : isc_ec2_form_add(&form, "Filter.2.Name", "vpc-id");
		rc = rc ? rc : isc_ec2_form_add(&form, "Filter.2.Value.1", s->subnet_vpc);
	}
	rc = rc ? isc_err_set(err, ISC_EINVALID, "DescribeSecurityGroups: request too large")
	        : aws_call(s, SVC_EC2, "DescribeSecurityGroups", &form, &cc, &resp, err);
	if (!rc)
		rc = isc_ec2_parse_security_groups(resp.body.data, resp.body.len, &gs, &ng, err);
	for (size_t i = 0; !rc && i < ng; i++)
		if (strcmp(gs[i].name, name) == 0) {
			snprintf(gid, 32, "%s", gs[i].id);
			rc = isc_ec2_parse_sg_self_rules(resp.body.data, resp.body.len, gid, in_ok,
			                                 &out_ok, err);
			break;
		}
	free(gs);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * The tenant's security group, made on demand and found again by name (idempotent: a
 * replay, a concurrent launch or a crash between the calls finds what is there). Its
 * inbound rules: all traffic from the group itself (EC2 User Guide, "Security group rules
 * for different use cases": "Allow instances associated with the same security group to
 * communicate"; also EFA's rule, "Prepare an EFA-enabled security group") and SSH from
 * tenant_ssh_cidr; a new group allows all outbound (EC2 User Guide, "Security group
 * rules", default rules). Nothing else reaches the nodes: security groups allow, never
 * deny, so another tenant's nodes, in their own group, have no rule that admits them.
 */
static int ensure_tenant_group(struct aws_session *s, const struct isc_launch_spec *spec,
                               const char *broker_id, const char *name, char gid[32],
                               struct isc_err *err)
{
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc, in_ok = 0;

	if ((rc = find_tenant_group(s, name, gid, &in_ok, err)))
		return rc;
	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	if (!gid[0]) {
		rc = isc_ec2_form_init(&form, "CreateSecurityGroup", ISC_EC2_VERSION);
		rc = rc ? rc : isc_ec2_form_add(&form, "GroupName", name);
		rc = rc ? rc
		        : isc_ec2_form_add(&form, "GroupDescription",
		                           "isc-broker: one tenant's nodes reach one another");
		if (s->subnet_vpc[0])
			rc = rc ? rc : isc_ec2_form_add(&form, "VpcId", s->subnet_vpc);
		rc = rc ? rc
		        : isc_ec2_form_add(&form, "TagSpecification.1.ResourceType",
		                           "security-group");
		rc = rc ? rc
		        : isc_ec2_form_add(&form, "TagSpecification.1.Tag.1.Key", ISC_TAG_BROKER);
		rc = rc ? rc : isc_ec2_form_add(&form, "TagSpecification.1.Tag.1.Value", broker_id);
		rc =
		    rc ? rc : isc_ec2_form_add(&form, "TagSpecification.1.Tag.2.Key", "isc:tenant");
		rc = rc ? rc
		        : isc_ec2_form_add(&form, "TagSpecification.1.Tag.2.Value", spec->tenant);
		rc = rc ? isc_err_set(err, ISC_EINVALID, "CreateSecurityGroup: request too large")
		        : aws_call(s, SVC_EC2, "CreateSecurityGroup", &form, &cc, &resp, err);
		if (!rc)
			rc = isc_ec2_parse_text(resp.body.data, resp.body.len, "groupId", gid, 32,
			                        err);
		else if (strcmp(cc.code, "InvalidGroup.Duplicate") == 0)
			/* Another launch made it between our look and our create. */
			rc = find_tenant_group(s, name, gid, &in_ok, err);
		if (!rc && !gid[0])
			rc = isc_err_set(err, ISC_ETRANSIENT,
			                 "security group %s: made but not listed yet", name);
	}
	if (!rc && !in_ok) {
		isc_buf_cleanup(&form);
		isc_http_response_cleanup(&resp);
		isc_buf_init(&form, 0);
		isc_http_response_init(&resp);
		rc = isc_ec2_form_init(&form, "AuthorizeSecurityGroupIngress", ISC_EC2_VERSION);
		rc = rc ? rc : isc_ec2_form_add(&form, "GroupId", gid);
		rc = rc ? rc : isc_ec2_form_add(&form, "IpPermissions.1.IpProtocol", "-1");
		rc = rc ? rc : isc_ec2_form_add(&form, "IpPermissions.1.Groups.1.GroupId", gid);
		rc = rc ? rc : isc_ec2_form_add(&form, "IpPermissions.2.IpProtocol", "tcp");
		rc = rc ? rc
		        : isc_ec2_form_add(&form, "IpPermissions.2.FromPort", s->tenant_ssh_port);
		rc =
		    rc ? rc : isc_ec2_form_add(&form, "IpPermissions.2.ToPort", s->tenant_ssh_port);
		rc = rc ? rc
		        : isc_ec2_form_add(&form, "IpPermissions.2.IpRanges.1.CidrIp",
		                           s->tenant_ssh_cidr);
		rc = rc ? isc_err_set(err, ISC_EINVALID,
		                      "AuthorizeSecurityGroupIngress: request too large")
		        : aws_call(s, SVC_EC2, "AuthorizeSecurityGroupIngress", &form, &cc, &resp,
		                   err);
		/* A concurrent launch added the same rules first. */
		if (rc && strcmp(cc.code, "InvalidPermission.Duplicate") == 0)
			rc = 0;
	}
	if (rc && err)
		isc_err_wrap(err, "tenant security group %s", name);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* The image's root device name (DescribeImages rootDeviceName), unless root_device_name says. */
static int root_device_of(struct aws_session *s, char out[64], struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	int rc;

	if (s->root_device_name) {
		snprintf(out, 64, "%s", s->root_device_name);
		return 0;
	}
	isc_http_response_init(&resp);
	rc = ec2_call1(s, "DescribeImages", "ImageId.1", s->image_id, &cc, &resp, err);
	if (!rc)
		rc =
		    isc_ec2_parse_root_device(resp.body.data, resp.body.len, s->image_id, out, err);
	isc_http_response_cleanup(&resp);
	return rc;
}

static int aws_launch_gang(struct isc_provider_session *ps, const struct isc_launch_spec *spec,
                           struct isc_launch_result *out, struct isc_err *err)
{
	struct aws_session *s = impl(ps);
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	char *user_data = NULL, token[65], last[ISC_ERR_MSG_MAX] = "";
	char group[ISC_AWS_GROUP_NAME_MAX], root[64];
	char tgroup[ISC_AWS_TENANT_GROUP_MAX] = "", tgid[32] = "";
	const char *broker_id = NULL;
	int rc = 0, n_efa = 0;
	/* Close together and on the fabric: only a gang of several nodes has anything to gain
	 * (nodes replacing lost members of a gang join its group, even one at a time). */
	int gang = spec->count >= 2 || spec->placement_token;
	int grouped = s->cluster_placement && gang;

	/* A shape without zones (the catalog has no per-zone data) lets EC2 pick the zone. */
	static const char *const any_zone[1] = {""};
	const char *const *zones = spec->n_zones ? spec->zones : any_zone;
	size_t n_zones = spec->n_zones ? spec->n_zones : 1;

	memset(out, 0, sizeof(*out));
	if (!spec->instance_type || !spec->instance_type[0] || spec->count == 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: an instance type and a count are required");
	if (spec->count > 10000)
		return isc_err_set(err, ISC_EINVALID, "launch: %u nodes is too many", spec->count);
	for (size_t z = 0; z < n_zones; z++)
		if ((rc = isc_aws_zone_token(spec->idempotency_token, zones[z], token, err)))
			return rc;
	/* A tenant on the platform's account gets its own security group instead of the
	 * operator's (whose all-TCP rule admits every node of the account). */
	if (spec->tenant && s->tenant_isolation) {
		for (size_t i = 0; i < spec->n_tags; i++)
			if (strcmp(spec->tags[i].key, ISC_TAG_BROKER) == 0)
				broker_id = spec->tags[i].value;
		if (!broker_id || !broker_id[0])
			return isc_err_set(err, ISC_EINVALID, "launch: no %s tag", ISC_TAG_BROKER);
		if ((rc = isc_aws_tenant_group_name(broker_id, spec->tenant, tgroup, err)))
			return rc;
	}
	if ((rc = isc_aws_user_data(spec->ssh_public_key, spec->user_data, &user_data, err)))
		return rc;
	if ((rc = root_device_of(s, root, err)) || (s->subnet_id && (rc = subnet_info(s, err)))) {
		free(user_data);
		return rc;
	}
	if (gang) {
		/* A gang's nodes talk to one another: EFA's rule with EFA, all TCP without. */
		if (s->efa)
			rc = efa_interfaces_of(s, spec->instance_type, &n_efa, err);
		/* A tenant group is made with the rule EFA and a gang need. */
		if (!rc && s->security_group_id && !tgroup[0])
			rc = check_security_group(s, n_efa > 0, err);
		if (rc) {
			free(user_data);
			return rc;
		}
	}
	if (tgroup[0]) {
		/* Busy until RunInstances answered: this process's sweep leaves it alone. */
		isc_busy_names_add(&busy_sgs, tgroup, +1);
		if ((rc = ensure_tenant_group(s, spec, broker_id, tgroup, tgid, err))) {
			isc_busy_names_add(&busy_sgs, tgroup, -1);
			free(user_data);
			return rc;
		}
	}
	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	for (size_t z = 0; z < n_zones; z++) {
		const char *zone = zones[z];
		struct isc_node_info *nodes = NULL;
		size_t nn = 0;

		if (zone[0] && s->subnet_zone[0] && strcmp(zone, s->subnet_zone) != 0) {
			/* EC2 would refuse the pair: the nodes can only go where the subnet is. */
			snprintf(last, sizeof(last), "subnet %s is in %s, not %s", s->subnet_id,
			         s->subnet_zone, zone);
			rc = ISC_ECAPACITY;
			continue;
		}
		isc_aws_zone_token(spec->idempotency_token, zone, token, NULL);
		if (spec->before_zone)
			spec->before_zone(spec->before_zone_ctx, zone);
		if (grouped) {
			/* One group per gang and zone: a cluster group is bound to its first zone.
			 * A replacement's group is its gang's (named from the gang's token). */
			char gtoken[65];
			if (spec->placement_token)
				isc_aws_zone_token(spec->placement_token,
				                   spec->placement_zone ? spec->placement_zone
				                                        : zone,
				                   gtoken, NULL);
			else
				snprintf(gtoken, sizeof(gtoken), "%s", token);
			if (isc_aws_group_name(gtoken, group)) {
				rc =
				    isc_err_set(err, ISC_EINVALID, "placement group name too long");
				break;
			}
			isc_busy_names_add(&busy_groups, group, +1);
			if ((rc = create_group(s, group, spec, err))) {
				isc_busy_names_add(&busy_groups, group, -1);
				if (err)
					isc_err_wrap(err, "zone %s", zone);
				break;
			}
		}
		if (run_instances_form(s, spec, zone, token, user_data, grouped ? group : NULL,
		                       n_efa, root, tgid[0] ? tgid : s->security_group_id, &form)) {
			if (grouped)
				isc_busy_names_add(&busy_groups, group, -1);
			rc = isc_err_set(err, ISC_EINVALID, "RunInstances: request too large");
			break;
		}
		rc = aws_call(s, SVC_EC2, "RunInstances", &form, &cc, &resp, err);
		if (grouped)
			isc_busy_names_add(&busy_groups, group, -1);
		if (rc == ISC_ECAPACITY) {
			snprintf(last, sizeof(last), "%s", err ? err->msg : "");
			if (grouped && !spec->placement_token) {
				/* Nothing launched into it (all or nothing): give it back now (a
				 * replacement's group holds its gang's live members). */
				int deleted;
				struct isc_err derr;
				delete_group(s, group, &deleted, &derr);
			}
			continue; /* the next zone may have room */
		}
		if (rc) {
			if (err)
				isc_err_wrap(err, "zone %s", zone);
			break;
		}
		rc = isc_ec2_parse_instances(resp.body.data, resp.body.len, &nodes, &nn, NULL, err);
		if (rc) {
			/* EC2 accepted the launch: the nodes may exist even though we cannot read
			 * them. */
			if (err)
				isc_err_wrap(err,
				             "RunInstances in %s was accepted but its reply "
				             "cannot be read; the nodes may exist",
				             zone[0] ? zone : "any zone");
			rc = ISC_ETRANSIENT;
			if (err)
				err->code = rc;
			break;
		}
		if (nn != spec->count) {
			/* Never keep part of a gang: give back what came up, then try elsewhere. */
			const char **ids = calloc(nn ? nn : 1, sizeof(*ids));
			struct isc_err terr;
			int trc = ids ? 0 : ISC_ENOMEM;
			for (size_t i = 0; ids && i < nn; i++)
				ids[i] = nodes[i].id;
			if (!trc && nn)
				trc = terminate_ids(s, ids, nn, &terr);
			free(ids);
			free(nodes);
			if (trc) {
				rc = isc_err_set(
				    err, trc,
				    "RunInstances in %s gave %zu of %u nodes and terminating "
				    "them failed: %s",
				    zone, nn, spec->count,
				    trc == ISC_ENOMEM ? "out of memory" : terr.msg);
				break;
			}
			snprintf(last, sizeof(last), "RunInstances: %s gave only %zu of %u nodes",
			         zone, nn, spec->count);
			rc = ISC_ECAPACITY;
			continue;
		}
		for (size_t i = 0; i < nn; i++)
			isc_node_info_from_spec(&nodes[i], spec, token);
		snprintf(out->zone, sizeof(out->zone), "%s", zone[0] ? zone : nodes[0].zone);
		snprintf(out->token, sizeof(out->token), "%s", token);
		out->nodes = nodes;
		out->n_nodes = nn;
		rc = 0;
		break;
	}
	if (rc == ISC_ECAPACITY)
		isc_err_set(err, ISC_ECAPACITY, "no capacity for %u x %s in %zu zone(s); last: %s",
		            spec->count, spec->instance_type, n_zones, last);
	if (tgroup[0])
		isc_busy_names_add(&busy_sgs, tgroup, -1);
	free(user_data);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* ---- describe ---- */

/* The spot request status codes that mean the cloud took, or is taking, the node back. */
static int spot_interrupted(const char *code)
{
	if (strcmp(code, "marked-for-termination") == 0 || strcmp(code, "marked-for-stop") == 0)
		return 1;
	/* instance-terminated-by-service/-by-price/-no-capacity/...; -by-user is our own doing */
	return strncmp(code, "instance-terminated-", 20) == 0 &&
	       strcmp(code, "instance-terminated-by-user") != 0;
}

/* One page of a Describe* call filtered on this broker's tag (next: the page token or NULL). */
static int broker_tag_page_form(struct isc_buf *form, const char *action, const char *broker_id,
                                const char *next)
{
	int rc = isc_ec2_form_init(form, action, ISC_EC2_VERSION);
	rc = rc ? rc : isc_ec2_form_add(form, "Filter.1.Name", "tag:" ISC_TAG_BROKER);
	rc = rc ? rc : isc_ec2_form_add(form, "Filter.1.Value.1", broker_id);
	rc = rc ? rc : isc_ec2_form_add(form, "MaxResults", DESCRIBE_PAGE);
	if (next)
		rc = rc ? rc : isc_ec2_form_add(form, "NextToken", next);
	return rc;
}

static int describe_spot(struct aws_session *s, const char *broker_id, struct isc_node_info *nodes,
                         size_t n, struct isc_err *err)
{
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	char *next = NULL;
	int rc = 0, pages = 0;

	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	do {
		struct isc_ec2_spot_request *sr = NULL;
		size_t nsr = 0;
		/* The requests carry the same tags (TagSpecification.2): one filtered call. */
		rc = broker_tag_page_form(&form, "DescribeSpotInstanceRequests", broker_id, next);
		free(next);
		next = NULL;
		if (rc) {
			rc =
			    isc_err_set(err, rc, "DescribeSpotInstanceRequests: request too large");
			break;
		}
		rc = aws_call(s, SVC_EC2, "DescribeSpotInstanceRequests", &form, &cc, &resp, err);
		if (!rc)
			rc = isc_ec2_parse_spot_requests(resp.body.data, resp.body.len, &sr, &nsr,
			                                 &next, err);
		for (size_t i = 0; i < nsr && !rc; i++) {
			if (!spot_interrupted(sr[i].status_code))
				continue;
			for (size_t j = 0; j < n; j++)
				if (strcmp(nodes[j].id, sr[i].instance_id) == 0) {
					nodes[j].interruption_noticed = 1;
					nodes[j].interruption_at_ms = sr[i].status_update_ms;
				}
		}
		free(sr);
	} while (!rc && next && ++pages < s->max_pages);
	rc = pages_done(s, "DescribeSpotInstanceRequests", rc, next, err);
	free(next);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * Teardown and crash recovery of placement groups, by tag: every cluster group tagged
 * isc:broker=broker_id that no instance of this listing still uses (terminated ones aside)
 * and no launch of this process is filling is deleted. A gang's group can go once its
 * instances are terminated (EC2 refuses before: InvalidPlacementGroup.InUse), and a group
 * left by a crash between CreatePlacementGroup and RunInstances goes at the first sweep
 * after the restart. providers/sweep.h says when a describe sweeps (not every describe:
 * DescribePlacementGroups is one more call per region and tick). At most
 * GROUP_DELETES_PER_SWEEP deletes per sweep, one call each: after a mass teardown the
 * rest go at the next describes instead of holding this one for hundreds of calls.
 * Best effort: the listing is what describe promises, so a failure here is logged and
 * the next describe sweeps again.
 */
#define GROUP_DELETES_PER_SWEEP 10

/*
 * Fills sw from the listing (a use per listed instance: its group, live unless
 * terminated); 1 when this describe sweeps (providers/sweep.h).
 */
static int groups_sweep_due(const struct aws_session *s, const char *broker_id,
                            const struct isc_ec2_instance_placement *ip, size_t n_ip,
                            struct isc_sweep *sw)
{
	isc_sweep_begin(sw, n_ip, "aws %s %s %s", s->url[SVC_EC2], s->region, broker_id);
	for (size_t i = 0; i < n_ip; i++)
		isc_sweep_add(sw, ip[i].group[0] ? ip[i].group : NULL,
		              ip[i].state != ISC_NODE_TERMINATED);
	return isc_sweep_ready(sw, s->clock->now_ms(s->clock->ctx));
}

/*
 * 1 when a live instance of the listing is in `name`: its placement group (sg 0), or one
 * of its security groups (sg 1: name is a group id).
 */
static int live_in(const struct isc_ec2_instance_placement *ip, size_t n_ip, const char *name,
                   int sg)
{
	for (size_t i = 0; i < n_ip; i++) {
		if (ip[i].state == ISC_NODE_TERMINATED)
			continue;
		if (!sg && strcmp(ip[i].group, name) == 0)
			return 1;
		for (int k = 0; sg && k < ip[i].n_sg; k++)
			if (strcmp(ip[i].sg[k], name) == 0)
				return 1;
	}
	return 0;
}

/*
 * A Describe* of the resources tagged isc:broker = broker_id (and carrying the tag key
 * tag_key, when not NULL), the listing a sweep walks; the answer in resp.
 */
static int describe_ours(struct aws_session *s, const char *action, const char *broker_id,
                         const char *tag_key, struct call_ctx *cc, struct isc_http_response *resp,
                         struct isc_err *err)
{
	struct isc_buf form;
	int rc;

	isc_buf_init(&form, 0);
	rc = isc_ec2_form_init(&form, action, ISC_EC2_VERSION);
	rc = rc ? rc : isc_ec2_form_add(&form, "Filter.1.Name", "tag:" ISC_TAG_BROKER);
	rc = rc ? rc : isc_ec2_form_add(&form, "Filter.1.Value.1", broker_id);
	if (tag_key) {
		rc = rc ? rc : isc_ec2_form_add(&form, "Filter.2.Name", "tag-key");
		rc = rc ? rc : isc_ec2_form_add(&form, "Filter.2.Value.1", tag_key);
	}
	rc = rc ? isc_err_set(err, ISC_EINVALID, "%s: request too large", action)
	        : aws_call(s, SVC_EC2, action, &form, cc, resp, err);
	isc_buf_cleanup(&form);
	return rc;
}

static void reconcile_groups(struct aws_session *s, const char *broker_id,
                             const struct isc_ec2_instance_placement *ip, size_t n_ip,
                             struct isc_sweep *sw)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	struct isc_ec2_placement_group *gs = NULL;
	size_t ng = 0, deletes = 0, left = 0;
	struct isc_err err;
	int rc;

	isc_http_response_init(&resp);
	rc = describe_ours(s, "DescribePlacementGroups", broker_id, NULL, &cc, &resp, &err);
	if (!rc)
		rc = isc_ec2_parse_placement_groups(resp.body.data, resp.body.len, &gs, &ng, &err);
	for (size_t g = 0; !rc && g < ng; g++) {
		int deleted = 0;
		if (strcmp(gs[g].state, "available") != 0)
			continue; /* going already: gone when idle */
		if (strcmp(gs[g].strategy, "cluster") == 0 &&
		    !isc_busy_names_has(&busy_groups, gs[g].name) &&
		    !live_in(ip, n_ip, gs[g].name, 0)) {
			if (deletes == GROUP_DELETES_PER_SWEEP) {
				left++;
			} else {
				deletes++;
				rc = delete_group(s, gs[g].name, &deleted, &err);
				if (!rc && deleted)
					isc_log(
					    ISC_LOG_INFO,
					    "aws %s: placement group %s deleted (no live instance)",
					    s->region, gs[g].name);
			}
		}
		if (!deleted) /* listed available: not gone */
			isc_sweep_keep(sw, gs[g].name);
	}
	if (!rc && left)
		isc_log(ISC_LOG_INFO,
		        "aws %s: %zu more unused placement group(s) go at the next describes",
		        s->region, left);
	if (rc) {
		isc_log(ISC_LOG_WARN,
		        "aws %s: placement group reconcile: %s (next describe retries)", s->region,
		        err.msg);
	} else {
		/* The listing's idle groups EC2 no longer lists as available, or deleted now. */
		isc_sweep_finish(sw, 1, s->clock->now_ms(s->clock->ctx));
	}
	free(gs);
	isc_http_response_cleanup(&resp);
}

/*
 * Teardown of tenants' security groups (issue 42), the way placement groups go: every
 * group tagged isc:broker=broker_id and isc:tenant that no listed live instance is in
 * and no launch of this process is about to use is deleted (DeleteSecurityGroup, at most
 * GROUP_DELETES_PER_SWEEP a sweep). EC2 refuses to delete a group an instance still has
 * (DependencyViolation, shutting-down ones included): that waits for a later sweep, and
 * it is also what keeps a group a launch of another process has just used. Best effort:
 * logged, never fails the listing. Its own sweep scope ("aws-sg ..."), by group id.
 */
static int tenant_sweep_due(const struct aws_session *s, const char *broker_id,
                            const struct isc_ec2_instance_placement *ip, size_t n_ip,
                            struct isc_sweep *sw)
{
	size_t n_use = 0;
	for (size_t i = 0; i < n_ip; i++)
		n_use += (size_t)ip[i].n_sg;
	isc_sweep_begin(sw, n_use, "aws-sg %s %s %s", s->url[SVC_EC2], s->region, broker_id);
	for (size_t i = 0; i < n_ip; i++)
		for (int k = 0; k < ip[i].n_sg; k++)
			isc_sweep_add(sw, ip[i].sg[k], ip[i].state != ISC_NODE_TERMINATED);
	return isc_sweep_ready(sw, s->clock->now_ms(s->clock->ctx));
}

static void reconcile_tenant_groups(struct aws_session *s, const char *broker_id,
                                    const struct isc_ec2_instance_placement *ip, size_t n_ip,
                                    struct isc_sweep *sw)
{
	struct isc_http_response resp;
	struct call_ctx cc;
	struct isc_ec2_security_group *gs = NULL;
	size_t ng = 0, deletes = 0;
	struct isc_err err;
	int rc;

	isc_http_response_init(&resp);
	rc = describe_ours(s, "DescribeSecurityGroups", broker_id, "isc:tenant", &cc, &resp, &err);
	if (!rc)
		rc = isc_ec2_parse_security_groups(resp.body.data, resp.body.len, &gs, &ng, &err);
	for (size_t g = 0; !rc && g < ng; g++) {
		int deleted = 0;
		if (!isc_busy_names_has(&busy_sgs, gs[g].name) && !live_in(ip, n_ip, gs[g].id, 1) &&
		    deletes < GROUP_DELETES_PER_SWEEP) {
			struct isc_http_response dresp;
			deletes++;
			isc_http_response_init(&dresp);
			rc = ec2_call1(s, "DeleteSecurityGroup", "GroupId", gs[g].id, &cc, &dresp,
			               &err);
			if (!rc || strcmp(cc.code, "InvalidGroup.NotFound") == 0) {
				deleted = 1;
				rc = 0;
				isc_log(ISC_LOG_INFO,
				        "aws %s: tenant security group %s (%s) deleted (no live "
				        "instance)",
				        s->region, gs[g].name, gs[g].id);
			} else if (strcmp(cc.code, "DependencyViolation") == 0) {
				rc = 0; /* its instances are still shutting down */
			}
			isc_http_response_cleanup(&dresp);
		}
		if (!deleted)
			isc_sweep_keep(sw, gs[g].id);
	}
	if (rc) {
		isc_log(ISC_LOG_WARN,
		        "aws %s: tenant security group reconcile: %s (next describe retries)",
		        s->region, err.msg);
	} else {
		/* Idle groups of the listing that are not ours to sweep (the operator's) or are
		 * gone now: the sweep is not due again for them. */
		isc_sweep_finish(sw, 1, s->clock->now_ms(s->clock->ctx));
	}
	free(gs);
	isc_http_response_cleanup(&resp);
}

static int aws_describe(struct isc_provider_session *ps, const char *broker_id,
                        struct isc_node_info **out, size_t *n_out, struct isc_err *err)
{
	struct aws_session *s = impl(ps);
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	struct isc_node_info *all = NULL;
	struct isc_ec2_instance_placement *placed = NULL;
	size_t n = 0, n_placed = 0;
	char *next = NULL;
	int rc = 0, pages = 0, any_spot = 0;

	*out = NULL;
	*n_out = 0;
	if (!broker_id || !broker_id[0])
		return isc_err_set(err, ISC_EINVALID, "describe: empty broker id");
	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	do {
		struct isc_node_info *page = NULL;
		size_t np = 0;
		/* Terminated instances are included on purpose: they confirm terminations. */
		rc = broker_tag_page_form(&form, "DescribeInstances", broker_id, next);
		free(next);
		next = NULL;
		if (rc) {
			rc = isc_err_set(err, rc, "DescribeInstances: request too large");
			break;
		}
		rc = aws_call(s, SVC_EC2, "DescribeInstances", &form, &cc, &resp, err);
		if (!rc)
			rc = isc_ec2_parse_instances(resp.body.data, resp.body.len, &page, &np,
			                             &next, err);
		/* A page larger than asked for is not EC2 talking: refuse it, memory stays bounded.
		 */
		if (!rc && np > (size_t)atoi(DESCRIBE_PAGE))
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "DescribeInstances: a page of %zu instances (at most %s asked)", np,
			    DESCRIBE_PAGE);
		if (!rc && np) {
			struct isc_node_info *grown = realloc(all, (n + np) * sizeof(*all));
			if (!grown) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			} else {
				all = grown;
				memcpy(all + n, page, np * sizeof(*page));
				n += np;
			}
		}
		if (!rc && np && (s->cluster_placement || s->tenant_isolation)) {
			/* Which groups each instance is in, for the group reconciles below. */
			struct isc_ec2_instance_placement *pp = NULL, *grown;
			size_t npp = 0;
			rc = isc_ec2_parse_instance_placements(resp.body.data, resp.body.len, &pp,
			                                       &npp, err);
			if (!rc && !(grown = realloc(placed, (n_placed + npp + 1) * sizeof(*pp))))
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			if (!rc) {
				placed = grown;
				memcpy(placed + n_placed, pp, npp * sizeof(*pp));
				n_placed += npp;
			}
			free(pp);
		}
		free(page);
	} while (!rc && next && ++pages < s->max_pages);
	rc = pages_done(s, "DescribeInstances", rc, next, err);
	free(next);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	/* Terminated spot nodes too: the notice tells an interruption from our own terminate. */
	for (size_t i = 0; !rc && i < n; i++)
		if (all[i].spot)
			any_spot = 1;
	if (!rc && any_spot)
		rc = describe_spot(s, broker_id, all, n, err);
	if (!rc && s->cluster_placement) {
		struct isc_sweep sw;
		if (groups_sweep_due(s, broker_id, placed, n_placed, &sw))
			reconcile_groups(s, broker_id, placed, n_placed, &sw);
		isc_sweep_cleanup(&sw);
	}
	if (!rc && s->tenant_isolation) {
		struct isc_sweep sw;
		if (tenant_sweep_due(s, broker_id, placed, n_placed, &sw))
			reconcile_tenant_groups(s, broker_id, placed, n_placed, &sw);
		isc_sweep_cleanup(&sw);
	}
	free(placed);
	if (rc) {
		free(all);
		return rc;
	}
	*out = all;
	*n_out = n;
	return 0;
}

/* ---- terminate ---- */

/* True when `id` appears in msg as a whole word (AWS lists unknown ids in the message). */
static int id_in_message(const char *msg, const char *id)
{
	size_t l = strlen(id);
	for (const char *p = strstr(msg, id); p; p = strstr(p + 1, id)) {
		char before = p == msg ? ' ' : p[-1], after = p[l];
		if (!isalnum((unsigned char)before) && before != '-' &&
		    !isalnum((unsigned char)after) && after != '-')
			return 1;
	}
	return 0;
}

static int terminate_batch(struct aws_session *s, const char *const *ids, size_t n,
                           struct isc_err *err)
{
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	const char **rest = NULL;
	size_t nrest = 0;
	int rc;

	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	rc = isc_ec2_form_init(&form, "TerminateInstances", ISC_EC2_VERSION);
	for (size_t i = 0; i < n && !rc; i++)
		rc = isc_ec2_form_addf(&form, ids[i], "InstanceId.%zu", i + 1);
	if (rc) {
		rc = isc_err_set(err, rc, "TerminateInstances: request too large");
		goto out;
	}
	rc = aws_call(s, SVC_EC2, "TerminateInstances", &form, &cc, &resp, err);
	if (rc != ISC_ENOTFOUND)
		goto out;
	/*
	 * One unknown id fails the whole call and terminates nothing. Drop the
	 * ids the message names and try the rest; if the message names none we
	 * know, go one by one so that no id can block another.
	 */
	rest = calloc(n, sizeof(*rest));
	if (!rest) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (!id_in_message(cc.message, ids[i]))
			rest[nrest++] = ids[i];
	if (nrest == 0) {
		rc = 0;
	} else if (nrest < n) {
		rc = terminate_batch(s, rest, nrest, err);
	} else if (n == 1) {
		rc = 0; /* the cloud does not know it: nothing left to terminate */
	} else {
		rc = 0;
		for (size_t i = 0; i < n && !rc; i++)
			rc = terminate_batch(s, &ids[i], 1, err);
	}
out:
	free(rest);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

static int terminate_ids(struct aws_session *s, const char *const *ids, size_t n,
                         struct isc_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i += TERMINATE_BATCH)
		rc = terminate_batch(s, ids + i, n - i < TERMINATE_BATCH ? n - i : TERMINATE_BATCH,
		                     err);
	return rc;
}

static int aws_terminate(struct isc_provider_session *ps, const char *const *ids, size_t n,
                         struct isc_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (!ids[i] || !ids[i][0] || strlen(ids[i]) > 64)
			return isc_err_set(err, ISC_EINVALID, "terminate: bad instance id");
	return terminate_ids(impl(ps), ids, n, err);
}

/* ---- capacity (issue 43): Spot Advisor bands, GetSpotPlacementScores ---- */

static int fact_add(struct isc_capacity_fact **v, size_t *n, size_t *cap,
                    const struct isc_capacity_fact *f)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct isc_capacity_fact *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return ISC_ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = *f;
	return 0;
}

/* The bands of q's types in the session's region, from the anonymous public JSON. */
static int spot_bands(struct aws_session *s, const struct isc_capacity_query *q,
                      struct isc_capacity_fact **v, size_t *n, size_t *cap, struct isc_err *err)
{
	struct isc_http_request req = {"GET", s->spot_advisor_url, NULL, 0, NULL, 0};
	struct isc_http_response resp;
	struct isc_spot_band *b = NULL;
	size_t nb = 0;
	int rc;

	isc_http_response_init(&resp);
	rc = isc_http_do(&s->http, &req, isc_http_classify_status, NULL, &resp, err);
	if (!rc)
		/* The advisor's "Linux" column: the platform's images are Linux. */
		rc = isc_spot_advisor_parse(resp.body.data, resp.body.len, s->region, "Linux",
		                            q->instance_types, q->n, &b, &nb, err);
	isc_http_response_cleanup(&resp);
	for (size_t i = 0; i < nb && !rc; i++) {
		struct isc_capacity_fact f = {
		    .target = 0, .value = b[i].max_pct, .value2 = b[i].band};
		snprintf(f.source, sizeof(f.source), "spot-advisor");
		snprintf(f.instance_type, sizeof(f.instance_type), "%s", b[i].instance_type);
		snprintf(f.market, sizeof(f.market), "spot");
		snprintf(f.detail, sizeof(f.detail), "%s", b[i].label);
		if (fact_add(v, n, cap, &f))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	free(b);
	return rc;
}

/*
 * GetSpotPlacementScores for q->target instances of q's types in this region: one call
 * for the Region's score and one with SingleAvailabilityZone=true for its zones'. The
 * score is for the set of types (AWS scores a request, not a type; with fewer than three
 * types it "will always be low"), so each type of the set gets the set's score.
 */
static int placement_scores(struct aws_session *s, const struct isc_capacity_query *q,
                            int single_az, struct isc_capacity_fact **v, size_t *n, size_t *cap,
                            struct isc_err *err)
{
	struct isc_buf form;
	struct isc_http_response resp;
	struct call_ctx cc;
	char *next = NULL, num[24];
	int rc = 0, pages = 0;

	isc_buf_init(&form, 0);
	isc_http_response_init(&resp);
	snprintf(num, sizeof(num), "%d", q->target);
	do {
		struct isc_ec2_placement_score *ps = NULL;
		size_t nps = 0;
		rc = isc_ec2_form_init(&form, "GetSpotPlacementScores", ISC_EC2_VERSION);
		/* InstanceTypes: at most 1000 (botocore's ec2 model) */
		for (size_t i = 0; i < q->n && i < 1000 && !rc; i++)
			rc = isc_ec2_form_addf(&form, q->instance_types[i], "InstanceType.%zu",
			                       i + 1);
		if (!rc)
			rc = isc_ec2_form_add(&form, "TargetCapacity", num);
		if (!rc)
			rc = isc_ec2_form_add(&form, "TargetCapacityUnitType", "units");
		if (!rc)
			rc = isc_ec2_form_add(&form, "RegionName.1", s->region);
		if (!rc && single_az)
			rc = isc_ec2_form_add(&form, "SingleAvailabilityZone", "true");
		if (!rc && next)
			rc = isc_ec2_form_add(&form, "NextToken", next);
		free(next);
		next = NULL;
		if (rc) {
			rc = isc_err_set(err, rc, "GetSpotPlacementScores: request too large");
			break;
		}
		rc = aws_call(s, SVC_EC2, "GetSpotPlacementScores", &form, &cc, &resp, err);
		if (!rc)
			rc = isc_ec2_parse_placement_scores(resp.body.data, resp.body.len, &ps,
			                                    &nps, &next, err);
		for (size_t i = 0; i < nps && !rc; i++) {
			if (strcmp(ps[i].region, s->region) != 0)
				continue;
			for (size_t t = 0; t < q->n && !rc; t++) {
				struct isc_capacity_fact f = {.target = q->target,
				                              .value = ps[i].score};
				snprintf(f.source, sizeof(f.source), "placement-score");
				snprintf(f.instance_type, sizeof(f.instance_type), "%s",
				         q->instance_types[t]);
				snprintf(f.zone, sizeof(f.zone), "%s",
				         single_az ? ps[i].zone_id : "");
				snprintf(f.market, sizeof(f.market), "spot");
				snprintf(f.detail, sizeof(f.detail), "%zu type(s)", q->n);
				if (fact_add(v, n, cap, &f))
					rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			}
		}
		free(ps);
	} while (!rc && next && ++pages < s->max_pages);
	rc = pages_done(s, "GetSpotPlacementScores", rc, next, err);
	free(next);
	isc_buf_cleanup(&form);
	isc_http_response_cleanup(&resp);
	return rc;
}

static int aws_capacity(struct isc_provider_session *ps, const struct isc_capacity_query *q,
                        struct isc_capacity_fact **out, size_t *n_out, struct isc_err *err)
{
	struct aws_session *s = impl(ps);
	struct isc_capacity_fact *v = NULL;
	struct isc_err e1, e2;
	size_t n = 0, cap = 0;
	int rc1, rc2 = 0, rc3 = 0;

	*out = NULL;
	*n_out = 0;
	if (q->n == 0)
		return 0;
	isc_err_clear(&e1);
	isc_err_clear(&e2);
	/* One source down leaves the others: the ranking keeps the last answer of each. */
	rc1 = spot_bands(s, q, &v, &n, &cap, &e1);
	if (q->target > 0) {
		rc2 = placement_scores(s, q, 0, &v, &n, &cap, &e2);
		if (!rc2)
			rc3 = placement_scores(s, q, 1, &v, &n, &cap, &e2);
	}
	if (rc1 == ISC_ENOMEM || rc2 == ISC_ENOMEM || rc3 == ISC_ENOMEM) {
		free(v);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (rc1 && (rc2 || rc3 || q->target <= 0)) {
		free(v);
		*err = rc2 || rc3 ? e2 : e1;
		return rc2 ? rc2 : rc3 ? rc3 : rc1;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* The [providers.aws] keys (docs/config.md); endpoint_s3, s3_region and s3_addressing are
 * read by datasets/ through this section. */
static const char *const aws_setting_keys[] = {
    "endpoint",
    "endpoint_ec2",
    "endpoint_sts",
    "endpoint_pricing", /* the Price List Query API (ondemand_prices) */
    "live_prices",      /* prices/lists.c: read on-demand prices from it (opt-in) */
    "image_id",
    "subnet_id",
    "security_group_id",
    "placement_group",
    "cluster_placement",
    "efa",
    "disk_size_gb",
    "root_device_name",
    "associate_public_ip",
    "profile",
    "credentials_file",
    "product_description",
    "describe_max_pages",
    "allow_insecure_endpoint",
    "tenant_isolation",
    "tenant_ssh_cidr",
    "tenant_ssh_port",
    "endpoint_s3",
    "s3_region",
    "s3_addressing",
    "s3_parallelism",
    "spot_advisor_url",
    NULL,
};

const struct isc_provider isc_provider_aws = {
    .name = "aws",
    .setting_keys = aws_setting_keys,
    .session_new = aws_session_new,
    .session_free = aws_session_free,
    .check_credentials = aws_check_credentials,
    .credential_keys = isc_aws_credential_keys,
    .credentials_valid = isc_aws_credentials_valid,
    .refresh_prices = aws_refresh_prices,
    .ondemand_prices = aws_ondemand_prices,
    .launch_gang = aws_launch_gang,
    .describe = aws_describe,
    .terminate = aws_terminate,
    .capacity = aws_capacity,
};
