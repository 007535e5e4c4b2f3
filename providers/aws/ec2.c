/*
 * EC2/STS Query API encoding and XML reply parsing. Replies are untrusted:
 * the size is capped, the parser never touches the network or expands
 * external entities (XML_PARSE_NONET, no XML_PARSE_NOENT), elements are found
 * by local name whatever the namespace version, and every copied field is
 * bounds-checked (an oversized field is an invalid reply, not a truncation).
 */
#include "providers/aws/ec2.h"
#include "providers/aws/sigv4.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <ctype.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- form bodies ---- */

int isc_ec2_form_init(struct isc_buf *b, const char *action, const char *version)
{
	isc_buf_reset(b);
	return isc_buf_printf(b, "Action=%s&Version=%s", action, version);
}

int isc_ec2_form_add(struct isc_buf *b, const char *key, const char *value)
{
	int rc = isc_buf_putc(b, '&');
	if (!rc)
		rc = isc_sigv4_uri_encode(b, key, strlen(key), 0);
	if (!rc)
		rc = isc_buf_putc(b, '=');
	if (!rc)
		rc = isc_sigv4_uri_encode(b, value, strlen(value), 0);
	return rc;
}

int isc_ec2_form_addf(struct isc_buf *b, const char *value, const char *key_fmt, ...)
{
	char key[256];
	va_list ap;
	int n;
	va_start(ap, key_fmt);
	n = vsnprintf(key, sizeof(key), key_fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(key))
		return ISC_EINVALID;
	return isc_ec2_form_add(b, key, value);
}

/* ---- error classification ---- */

static const struct {
	const char *code;
	int isc;
} code_map[] = {
    {"RequestLimitExceeded", ISC_ETHROTTLED},
    {"Throttling", ISC_ETHROTTLED},
    {"ThrottlingException", ISC_ETHROTTLED},
    {"RequestThrottled", ISC_ETHROTTLED},
    {"InternalError", ISC_ETRANSIENT},
    {"InternalFailure", ISC_ETRANSIENT},
    {"Unavailable", ISC_ETRANSIENT},
    {"ServiceUnavailable", ISC_ETRANSIENT},
    {"InsufficientInstanceCapacity", ISC_ECAPACITY},
    {"InsufficientCapacity", ISC_ECAPACITY},
    {"InsufficientHostCapacity", ISC_ECAPACITY},
    {"Unsupported", ISC_ECAPACITY},
    {"UnfulfillableCapacity", ISC_ECAPACITY},
    /* We never set MaxPrice, so this means the market is above the on-demand cap: go elsewhere. */
    {"SpotMaxPriceTooLow", ISC_ECAPACITY},
    {"InstanceLimitExceeded", ISC_EQUOTA},
    {"VcpuLimitExceeded", ISC_EQUOTA},
    {"MaxSpotInstanceCountExceeded", ISC_EQUOTA},
    {"AuthFailure", ISC_EAUTH},
    {"UnauthorizedOperation", ISC_EAUTH},
    {"SignatureDoesNotMatch", ISC_EAUTH},
    {"InvalidClientTokenId", ISC_EAUTH},
    {"ExpiredToken", ISC_EAUTH},
    {"IncompleteSignature", ISC_EAUTH},
    {"MissingAuthenticationToken", ISC_EAUTH},
    {"AccessDenied", ISC_EAUTH},
    {"RequestExpired", ISC_EAUTH}, /* clock skew: retrying the same signature cannot help */
    /*
     * A cluster placement group lives in one zone: a launch into it elsewhere, or one it
     * cannot hold, is a capacity answer for that zone, so the next zone is tried.
     */
    {"InvalidPlacementGroup.InUse", ISC_ECAPACITY},
    {"IdempotentParameterMismatch", ISC_ECONFLICT},
    {"InvalidInstanceID.NotFound", ISC_ENOTFOUND},
};

int isc_ec2_classify_code(const char *code, long http_status)
{
	for (size_t i = 0; code && i < sizeof(code_map) / sizeof(code_map[0]); i++)
		if (strcmp(code, code_map[i].code) == 0)
			return code_map[i].isc;
	if (http_status >= 500)
		return ISC_ETRANSIENT;
	if (http_status == 429)
		return ISC_ETHROTTLED;
	return ISC_EINVALID;
}

/* ---- XML helpers ---- */

static xmlDoc *parse_doc(const char *xml, size_t len, struct isc_err *err)
{
	xmlDoc *d;
	if (len > ISC_EC2_MAX_XML || len > INT_MAX) {
		isc_err_set(err, ISC_EINVALID, "AWS reply too large (%zu bytes)", len);
		return NULL;
	}
	xmlInitParser();
	d = xmlReadMemory(xml, (int)len, "aws-reply.xml", NULL,
	                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!d || !xmlDocGetRootElement(d)) {
		if (d)
			xmlFreeDoc(d);
		isc_err_set(err, ISC_EINVALID, "AWS reply is not well-formed XML");
		return NULL;
	}
	return d;
}

static int is_el(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static xmlNode *child(const xmlNode *parent, const char *name)
{
	if (!parent)
		return NULL;
	for (xmlNode *c = parent->children; c; c = c->next)
		if (is_el(c, name))
			return c;
	return NULL;
}

/* child(child(...)) along a "a/b/c" path. */
static xmlNode *path(const xmlNode *n, const char *p)
{
	char seg[64];
	while (n && *p) {
		size_t l = strcspn(p, "/");
		if (l >= sizeof(seg))
			return NULL;
		memcpy(seg, p, l);
		seg[l] = '\0';
		n = child(n, seg);
		p += l;
		if (*p == '/')
			p++;
	}
	return (xmlNode *)n;
}

/*
 * Copies the text of the element at `p` under n into dst ("" when absent).
 * Returns ISC_EINVALID when it does not fit.
 */
static int text_at(const xmlNode *n, const char *p, char *dst, size_t cap)
{
	xmlNode *e = path(n, p);
	xmlChar *t;
	size_t l;
	dst[0] = '\0';
	if (!e)
		return 0;
	t = xmlNodeGetContent(e);
	if (!t)
		return 0;
	l = strlen((const char *)t);
	if (l >= cap) {
		xmlFree(t);
		return ISC_EINVALID;
	}
	memcpy(dst, t, l + 1);
	xmlFree(t);
	return 0;
}

static char *text_dup(const xmlNode *n, const char *p)
{
	xmlNode *e = path(n, p);
	xmlChar *t;
	char *s;
	if (!e)
		return NULL;
	t = xmlNodeGetContent(e);
	if (!t)
		return NULL;
	s = t[0] ? strdup((const char *)t) : NULL;
	xmlFree(t);
	return s;
}

/* Grows *arr (of elem bytes) to hold n+1; returns a zeroed slot or NULL. */
static void *grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		void *p;
		if (ncap > SIZE_MAX / elem)
			return NULL;
		p = realloc(*arr, ncap * elem);
		if (!p)
			return NULL;
		*arr = p;
		*cap = ncap;
	}
	memset((char *)*arr + n * elem, 0, elem);
	return (char *)*arr + n * elem;
}

struct scrub_list {
	const char *const *secrets;
	size_t n;
};

/* Replaces every whole occurrence of each secret in text with "***". */
static void scrub_whole(char *text, const struct scrub_list *sl)
{
	for (size_t i = 0; i < sl->n; i++) {
		const char *sec = sl->secrets[i];
		size_t l;
		char *p;
		if (!sec || (l = strlen(sec)) < 4)
			continue;
		while ((p = strstr(text, sec)) != NULL) {
			memmove(p + 3, p + l, strlen(p + l) + 1);
			memcpy(p, "***", 3);
		}
	}
}

#define SCRUB_RUN 12 /* shorter runs of a secret's characters occur by chance in words */

/* Replaces runs of SCRUB_RUN or more characters that also appear in a secret (short text only). */
static void scrub_parts(char *text, const struct scrub_list *sl)
{
	for (size_t i = 0; i < sl->n; i++) {
		const char *sec = sl->secrets[i];
		size_t sl_len;
		if (!sec || (sl_len = strlen(sec)) < SCRUB_RUN)
			continue;
		for (char *p = text; *p;) {
			size_t best = 0;
			for (const char *q = sec; *q; q++) {
				size_t k = 0;
				while (p[k] && q[k] && p[k] == q[k])
					k++;
				if (k > best)
					best = k;
			}
			if (best >= SCRUB_RUN) {
				memmove(p + 3, p + best, strlen(p + best) + 1);
				memcpy(p, "***", 3);
				p += 3;
			} else {
				p++;
			}
		}
	}
}

/*
 * An element's text, scrubbed, then cut to cap: the cut comes last, so no part
 * of a secret that crosses it survives. Only the first 64 KiB are looked at
 * (the result is far shorter; a whole secret that starts within it is seen).
 */
static void text_cut_scrubbed(const xmlNode *e, char *dst, size_t cap, const struct scrub_list *sl)
{
	xmlChar *t = e ? xmlNodeGetContent(e) : NULL;
	size_t len = t ? strlen((const char *)t) : 0;
	char *work;

	if (len > 65536)
		len = 65536;
	work = malloc(len + 1);
	if (!work) {
		snprintf(dst, cap, "%s", "");
	} else {
		memcpy(work, t ? (const char *)t : "", len);
		work[len] = '\0';
		scrub_whole(work, sl);
		snprintf(dst, cap, "%s", work);
		scrub_parts(dst, sl);
		OPENSSL_cleanse(work, len);
		free(work);
	}
	if (t)
		OPENSSL_cleanse(t, strlen((const char *)t));
	xmlFree(t);
}

int isc_ec2_parse_error_scrubbed(const char *xml, size_t len, const char *const *secrets,
                                 size_t n_secrets, struct isc_ec2_error *out)
{
	struct scrub_list sl = {secrets, n_secrets};
	xmlDoc *d;
	xmlNode *root, *e = NULL;
	int rc = ISC_ENOTFOUND;

	memset(out, 0, sizeof(*out));
	if (!xml || len == 0 || !(d = parse_doc(xml, len, NULL)))
		return ISC_ENOTFOUND;
	root = xmlDocGetRootElement(d);
	/* EC2: Response/Errors/Error; STS: ErrorResponse/Error. */
	e = path(root, "Errors/Error");
	if (!e)
		e = child(root, "Error");
	if (e) {
		/* Over-long text is cut here on purpose: it only feeds a message. */
		text_cut_scrubbed(path(e, "Code"), out->code, sizeof(out->code), &sl);
		text_cut_scrubbed(path(e, "Message"), out->message, sizeof(out->message), &sl);
		text_cut_scrubbed(child(root, "RequestID"), out->request_id,
		                  sizeof(out->request_id), &sl);
		if (!out->request_id[0])
			text_cut_scrubbed(child(root, "RequestId"), out->request_id,
			                  sizeof(out->request_id), &sl);
		rc = out->code[0] ? 0 : ISC_ENOTFOUND;
	}
	xmlFreeDoc(d);
	return rc;
}

int isc_ec2_parse_error(const char *xml, size_t len, struct isc_ec2_error *out)
{
	return isc_ec2_parse_error_scrubbed(xml, len, NULL, 0, out);
}

/* ---- values ---- */

int isc_aws_price_micros(const char *s, int64_t *out)
{
	int64_t whole = 0, frac = 0;
	int digits = 0, round_up = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return ISC_EINVALID;
	for (; isdigit((unsigned char)*p); p++) {
		if (whole > (INT64_MAX / 1000000 - 9) / 10)
			return ISC_EINVALID;
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (digits < 6) {
				frac = frac * 10 + (*p - '0');
				digits++;
			} else if (*p != '0') {
				round_up = 1; /* never understate a price */
			}
		}
	}
	if (*p != '\0')
		return ISC_EINVALID;
	for (; digits < 6; digits++)
		frac *= 10;
	*out = whole * 1000000 + frac + round_up;
	return 0;
}

int isc_aws_parse_time_ms(const char *iso, int64_t *out)
{
	struct tm tm = {0};
	int ms = 0;
	const char *p;
	if (!iso)
		return ISC_EINVALID;
	p = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return ISC_EINVALID;
	if (*p == '.') {
		int scale = 100;
		for (p++; isdigit((unsigned char)*p); p++) {
			ms += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p != 'Z' && *p != '\0')
		return ISC_EINVALID;
	*out = (int64_t)timegm(&tm) * 1000 + ms;
	return 0;
}

static int state_from(const xmlNode *st, enum isc_node_state *out)
{
	char code[16], name[32];
	if (text_at(st, "code", code, sizeof(code)) || text_at(st, "name", name, sizeof(name)))
		return ISC_EINVALID;
	if (code[0]) {
		/* Only the low byte is the state; the high byte is internal to EC2. */
		switch (atoi(code) & 0xFF) {
		case 0:
			*out = ISC_NODE_PENDING;
			return 0;
		case 16:
			*out = ISC_NODE_RUNNING;
			return 0;
		case 32:
			*out = ISC_NODE_SHUTTING_DOWN;
			return 0;
		case 48:
			*out = ISC_NODE_TERMINATED;
			return 0;
		case 64:
			*out = ISC_NODE_STOPPING;
			return 0;
		case 80:
			*out = ISC_NODE_STOPPED;
			return 0;
		}
	}
	static const char *names[] = {"pending",    "running",  "shutting-down",
	                              "terminated", "stopping", "stopped"};
	for (int i = 0; i < 6; i++)
		if (strcmp(name, names[i]) == 0) {
			*out = (enum isc_node_state)i;
			return 0;
		}
	return ISC_EINVALID;
}

/* Reads one <item> into a zeroed record; 0 or ISC_EINVALID. */
typedef int (*item_fn)(const xmlNode *item, void *rec);

/*
 * Every <item> child of set, in order, appended to *arr (*n records of elem
 * bytes, room for *cap): the one loop of all the EC2 list parsers.
 * 0, ISC_ENOMEM, or ISC_EINVALID for the first item read_item rejects.
 */
static int parse_items(const xmlNode *set, size_t elem, item_fn read_item, void **arr, size_t *n,
                       size_t *cap)
{
	for (xmlNode *it = set ? set->children : NULL; it; it = it->next) {
		void *rec;
		if (!is_el(it, "item"))
			continue;
		if (!(rec = grow(arr, cap, *n, elem)))
			return ISC_ENOMEM;
		if (read_item(it, rec))
			return ISC_EINVALID;
		(*n)++;
	}
	return 0;
}

/*
 * A reply whose list is the root's <set_name>: its items into *out (*n),
 * and the root's nextToken into *next_token when asked. On failure nothing
 * is returned and err says "unexpected <what> in AWS reply".
 */
static int parse_item_list(const char *xml, size_t len, const char *set_name, size_t elem,
                           item_fn read_item, const char *what, void **out, size_t *n,
                           char **next_token, struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *root, *set;
	void *arr = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (next_token)
		*next_token = NULL;
	if (!d)
		return ISC_EINVALID;
	root = xmlDocGetRootElement(d);
	set = child(root, set_name);
	rc = set ? parse_items(set, elem, read_item, &arr, &cnt, &cap) : ISC_EINVALID;
	if (rc) {
		free(arr);
		xmlFreeDoc(d);
		return isc_err_set(
		    err, rc, rc == ISC_ENOMEM ? "out of memory" : "unexpected %s in AWS reply",
		    what);
	}
	if (next_token)
		*next_token = text_dup(root, "nextToken");
	xmlFreeDoc(d);
	*out = arr;
	*n = cnt;
	return 0;
}

static int parse_instance(const xmlNode *it, void *rec)
{
	struct isc_node_info *ni = rec;
	char buf[64], when[64];
	int rc = 0;
	rc |= text_at(it, "instanceId", ni->id, sizeof(ni->id));
	rc |= text_at(it, "privateIpAddress", ni->private_ip, sizeof(ni->private_ip));
	rc |= text_at(it, "ipAddress", ni->public_ip, sizeof(ni->public_ip));
	rc |= text_at(it, "placement/availabilityZone", ni->zone, sizeof(ni->zone));
	rc |= text_at(it, "instanceType", ni->instance_type, sizeof(ni->instance_type));
	rc |= text_at(it, "clientToken", ni->client_token, sizeof(ni->client_token));
	rc |= text_at(it, "instanceLifecycle", buf, sizeof(buf));
	ni->spot = strcmp(buf, "spot") == 0;
	rc |= text_at(it, "launchTime", when, sizeof(when));
	if (rc || !ni->id[0])
		return ISC_EINVALID;
	if (when[0] && isc_aws_parse_time_ms(when, &ni->launched_at_ms))
		return ISC_EINVALID;
	if (state_from(path(it, "instanceState"), &ni->state))
		return ISC_EINVALID;
	for (xmlNode *t = child(path(it, "tagSet"), "item"); t; t = t->next) {
		char key[128];
		char *dst = NULL;
		if (!is_el(t, "item"))
			continue;
		if (text_at(t, "key", key, sizeof(key)))
			continue; /* a foreign over-long key is not ours */
		if (strcmp(key, ISC_TAG_BROKER) == 0)
			dst = ni->broker_id;
		else if (strcmp(key, ISC_TAG_CLUSTER) == 0)
			dst = ni->cluster_id;
		else if (strcmp(key, ISC_TAG_EXPERIMENT) == 0)
			dst = ni->experiment_id;
		if (dst && text_at(t, "value", dst, sizeof(ni->broker_id)))
			return ISC_EINVALID;
	}
	return 0;
}

int isc_ec2_parse_instances(const char *xml, size_t len, struct isc_node_info **out, size_t *n,
                            char **next_token, struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *root, *rs;
	void *arr = NULL;
	size_t cnt = 0, cap = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (next_token)
		*next_token = NULL;
	if (!d)
		return ISC_EINVALID;
	root = xmlDocGetRootElement(d);
	rs = child(root, "reservationSet");
	if (rs) {
		for (xmlNode *r = rs->children; r && !rc; r = r->next)
			if (is_el(r, "item"))
				rc = parse_items(child(r, "instancesSet"), sizeof(**out),
				                 parse_instance, &arr, &cnt, &cap);
	} else if (child(root, "instancesSet")) {
		rc = parse_items(child(root, "instancesSet"), sizeof(**out), parse_instance, &arr,
		                 &cnt, &cap);
	} else {
		rc = ISC_EINVALID;
	}
	if (rc) {
		free(arr);
		xmlFreeDoc(d);
		return isc_err_set(err, rc,
		                   rc == ISC_ENOMEM ? "out of memory"
		                                    : "unexpected instance list in AWS reply");
	}
	if (next_token)
		*next_token = text_dup(root, "nextToken");
	*out = arr;
	*n = cnt;
	xmlFreeDoc(d);
	return 0;
}

static int state_change_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_state_change *sc = rec;
	if (text_at(it, "instanceId", sc->instance_id, sizeof(sc->instance_id)) ||
	    state_from(path(it, "currentState"), &sc->current) ||
	    state_from(path(it, "previousState"), &sc->previous))
		return ISC_EINVALID;
	return 0;
}

int isc_ec2_parse_state_changes(const char *xml, size_t len, struct isc_ec2_state_change **out,
                                size_t *n, struct isc_err *err)
{
	void *arr;
	int rc = parse_item_list(xml, len, "instancesSet", sizeof(**out), state_change_item,
	                         "state-change list", &arr, n, NULL, err);
	*out = arr;
	return rc;
}

static int spot_request_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_spot_request *sr = rec;
	char when[64];
	if (text_at(it, "spotInstanceRequestId", sr->id, sizeof(sr->id)) ||
	    text_at(it, "instanceId", sr->instance_id, sizeof(sr->instance_id)) ||
	    text_at(it, "state", sr->state, sizeof(sr->state)) ||
	    text_at(it, "status/code", sr->status_code, sizeof(sr->status_code)) ||
	    text_at(it, "launchedAvailabilityZone", sr->zone, sizeof(sr->zone)) ||
	    text_at(it, "status/updateTime", when, sizeof(when)))
		return ISC_EINVALID;
	/* An unreadable time is not fatal: the notice itself is what matters. */
	if (isc_aws_parse_time_ms(when, &sr->status_update_ms))
		sr->status_update_ms = 0;
	return 0;
}

int isc_ec2_parse_spot_requests(const char *xml, size_t len, struct isc_ec2_spot_request **out,
                                size_t *n, char **next_token, struct isc_err *err)
{
	void *arr;
	int rc = parse_item_list(xml, len, "spotInstanceRequestSet", sizeof(**out),
	                         spot_request_item, "spot request list", &arr, n, next_token, err);
	*out = arr;
	return rc;
}

static int spot_price_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_spot_price *sp = rec;
	char price[40], when[64];
	if (text_at(it, "instanceType", sp->instance_type, sizeof(sp->instance_type)) ||
	    text_at(it, "productDescription", sp->product, sizeof(sp->product)) ||
	    text_at(it, "availabilityZone", sp->zone, sizeof(sp->zone)) ||
	    text_at(it, "spotPrice", price, sizeof(price)) ||
	    text_at(it, "timestamp", when, sizeof(when)) ||
	    isc_aws_price_micros(price, &sp->price_micros) ||
	    isc_aws_parse_time_ms(when, &sp->at_ms))
		return ISC_EINVALID;
	return 0;
}

int isc_ec2_parse_spot_prices(const char *xml, size_t len, struct isc_ec2_spot_price **out,
                              size_t *n, char **next_token, struct isc_err *err)
{
	void *arr;
	int rc = parse_item_list(xml, len, "spotPriceHistorySet", sizeof(**out), spot_price_item,
	                         "spot price list", &arr, n, next_token, err);
	*out = arr;
	return rc;
}

/* One item of spotPlacementScoreSet: region, or availabilityZoneId with SingleAvailabilityZone. */
static int placement_score_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_placement_score *ps = rec;
	char score[16], *end;
	long v;
	if (text_at(it, "region", ps->region, sizeof(ps->region)) ||
	    text_at(it, "availabilityZoneId", ps->zone_id, sizeof(ps->zone_id)) ||
	    text_at(it, "score", score, sizeof(score)))
		return ISC_EINVALID;
	v = strtol(score, &end, 10);
	/* API_SpotPlacementScore: "on a scale from 1 to 10" */
	if (end == score || *end || v < 1 || v > 10 || (!ps->region[0] && !ps->zone_id[0]))
		return ISC_EINVALID;
	ps->score = (int)v;
	return 0;
}

int isc_ec2_parse_placement_scores(const char *xml, size_t len,
                                   struct isc_ec2_placement_score **out, size_t *n,
                                   char **next_token, struct isc_err *err)
{
	void *arr;
	int rc =
	    parse_item_list(xml, len, "spotPlacementScoreSet", sizeof(**out), placement_score_item,
	                    "spot placement score list", &arr, n, next_token, err);
	*out = arr;
	return rc;
}

int isc_sts_parse_identity(const char *xml, size_t len, struct isc_identity *out,
                           struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *r;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!d)
		return ISC_EINVALID;
	r = child(xmlDocGetRootElement(d), "GetCallerIdentityResult");
	if (!r || text_at(r, "Account", out->account, sizeof(out->account)) ||
	    text_at(r, "Arn", out->principal, sizeof(out->principal)) ||
	    text_at(r, "UserId", out->user_id, sizeof(out->user_id)) || !out->account[0])
		rc = isc_err_set(err, ISC_EINVALID, "unexpected GetCallerIdentity reply");
	xmlFreeDoc(d);
	return rc;
}

/* ---- placement groups, instance types, security groups ---- */

static int placement_group_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_placement_group *g = rec;
	if (text_at(it, "groupName", g->name, sizeof(g->name)) ||
	    text_at(it, "state", g->state, sizeof(g->state)) ||
	    text_at(it, "strategy", g->strategy, sizeof(g->strategy)) || !g->name[0])
		return ISC_EINVALID;
	return 0;
}

int isc_ec2_parse_placement_groups(const char *xml, size_t len,
                                   struct isc_ec2_placement_group **out, size_t *n,
                                   struct isc_err *err)
{
	void *arr;
	int rc = parse_item_list(xml, len, "placementGroupSet", sizeof(**out), placement_group_item,
	                         "placement group list", &arr, n, NULL, err);
	*out = arr;
	return rc;
}

static int instance_placement_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_instance_placement *ip = rec;
	if (text_at(it, "instanceId", ip->id, sizeof(ip->id)) ||
	    text_at(it, "placement/groupName", ip->group, sizeof(ip->group)) ||
	    state_from(path(it, "instanceState"), &ip->state))
		return ISC_EINVALID;
	for (xmlNode *ni = child(path(it, "networkInterfaceSet"), "item"); ni; ni = ni->next) {
		char type[32];
		if (!is_el(ni, "item"))
			continue;
		if (text_at(ni, "interfaceType", type, sizeof(type)))
			return ISC_EINVALID;
		if (strcmp(type, "efa") == 0 || strcmp(type, "efa-only") == 0)
			ip->n_efa++;
	}
	for (xmlNode *g = child(path(it, "groupSet"), "item"); g; g = g->next) {
		if (!is_el(g, "item") || ip->n_sg == 5)
			continue;
		if (text_at(g, "groupId", ip->sg[ip->n_sg], sizeof(ip->sg[0])))
			return ISC_EINVALID;
		if (ip->sg[ip->n_sg][0])
			ip->n_sg++;
	}
	return 0;
}

static int security_group_item(const xmlNode *it, void *rec)
{
	struct isc_ec2_security_group *g = rec;
	if (text_at(it, "groupId", g->id, sizeof(g->id)) ||
	    text_at(it, "groupName", g->name, sizeof(g->name)) || !g->id[0])
		return ISC_EINVALID;
	return 0;
}

int isc_ec2_parse_security_groups(const char *xml, size_t len, struct isc_ec2_security_group **out,
                                  size_t *n, struct isc_err *err)
{
	void *arr;
	int rc = parse_item_list(xml, len, "securityGroupInfo", sizeof(**out), security_group_item,
	                         "security group list", &arr, n, NULL, err);
	*out = arr;
	return rc;
}

int isc_ec2_parse_text(const char *xml, size_t len, const char *p, char *out, size_t cap,
                       struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	int rc;

	out[0] = '\0';
	if (!d)
		return ISC_EINVALID;
	rc = text_at(xmlDocGetRootElement(d), p, out, cap);
	xmlFreeDoc(d);
	if (rc || !out[0])
		return isc_err_set(err, ISC_EINVALID, "no %s in the AWS reply", p);
	return 0;
}

int isc_ec2_parse_instance_placements(const char *xml, size_t len,
                                      struct isc_ec2_instance_placement **out, size_t *n,
                                      struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *root, *rs;
	void *arr = NULL;
	size_t cnt = 0, cap = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return ISC_EINVALID;
	root = xmlDocGetRootElement(d);
	rs = child(root, "reservationSet");
	if (rs) {
		for (xmlNode *r = rs->children; r && !rc; r = r->next)
			if (is_el(r, "item"))
				rc = parse_items(child(r, "instancesSet"), sizeof(**out),
				                 instance_placement_item, &arr, &cnt, &cap);
	} else {
		rc = parse_items(child(root, "instancesSet"), sizeof(**out),
		                 instance_placement_item, &arr, &cnt, &cap);
	}
	xmlFreeDoc(d);
	if (rc) {
		free(arr);
		return isc_err_set(err, rc,
		                   rc == ISC_ENOMEM ? "out of memory"
		                                    : "unexpected instance list in AWS reply");
	}
	*out = arr;
	*n = cnt;
	return 0;
}

int isc_ec2_parse_efa_info(const char *xml, size_t len, const char *instance_type,
                           struct isc_ec2_efa_info *out, struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *set;
	int rc = ISC_ENOTFOUND;

	memset(out, 0, sizeof(*out));
	if (!d)
		return ISC_EINVALID;
	set = child(xmlDocGetRootElement(d), "instanceTypeSet");
	for (xmlNode *it = set ? set->children : NULL; it && rc == ISC_ENOTFOUND; it = it->next) {
		char name[64], sup[16], max_efa[16], cards[16];
		if (!is_el(it, "item"))
			continue;
		if (text_at(it, "instanceType", name, sizeof(name)) ||
		    text_at(it, "networkInfo/efaSupported", sup, sizeof(sup)) ||
		    text_at(it, "networkInfo/efaInfo/maximumEfaInterfaces", max_efa,
		            sizeof(max_efa)) ||
		    text_at(it, "networkInfo/maximumNetworkCards", cards, sizeof(cards))) {
			rc = ISC_EINVALID;
			break;
		}
		if (strcmp(name, instance_type) != 0)
			continue;
		out->supported = strcmp(sup, "true") == 0;
		out->max_efa = out->supported ? atoi(max_efa) : 0;
		out->max_cards = cards[0] ? atoi(cards) : 1;
		if (out->max_efa < 0 || out->max_efa > 64 || out->max_cards < 1 ||
		    out->max_cards > 64) {
			rc = ISC_EINVALID;
			break;
		}
		rc = 0;
	}
	xmlFreeDoc(d);
	if (rc == ISC_ENOTFOUND)
		return isc_err_set(err, ISC_EINVALID,
		                   "DescribeInstanceTypes: %s is not in the reply (not offered "
		                   "in this region?)",
		                   instance_type);
	if (rc)
		return isc_err_set(err, rc, "unexpected instance type list in AWS reply");
	return 0;
}

/* Whether IPv4 CIDR `outer` holds all of `inner` ("0.0.0.0/0" holds every subnet). */
static int cidr_covers(const char *outer, const char *inner)
{
	unsigned a[4], b[4];
	int lo, li, n1 = 0, n2 = 0;
	uint32_t o, i, m;
	if (sscanf(outer, "%u.%u.%u.%u/%d%n", &a[0], &a[1], &a[2], &a[3], &lo, &n1) != 5 ||
	    outer[n1] || lo < 0 || lo > 32)
		return 0;
	if (strcmp(outer, "0.0.0.0/0") == 0)
		return 1;
	if (!inner ||
	    sscanf(inner, "%u.%u.%u.%u/%d%n", &b[0], &b[1], &b[2], &b[3], &li, &n2) != 5 ||
	    inner[n2] || li < lo || li > 32)
		return 0;
	o = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | (uint32_t)a[3];
	i = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
	m = lo == 0 ? 0 : 0xffffffffu << (32 - lo);
	return (o & m) == (i & m);
}

/* What a gang needs one permission of a security group to allow. */
enum sg_need {
	SG_ALL_TRAFFIC, /* protocol -1 (EFA) */
	SG_ALL_TCP,     /* tcp 0-65535, or -1 (a gang without EFA) */
};

static int permission_covers(const xmlNode *p, enum sg_need need)
{
	char proto[16], from[16] = "", to[16] = "";
	if (text_at(p, "ipProtocol", proto, sizeof(proto)))
		return 0;
	if (strcmp(proto, "-1") == 0)
		return 1;
	return need == SG_ALL_TCP && strcmp(proto, "tcp") == 0 &&
	       !text_at(p, "fromPort", from, sizeof(from)) &&
	       !text_at(p, "toPort", to, sizeof(to)) && strcmp(from, "0") == 0 &&
	       strcmp(to, "65535") == 0;
}

/*
 * True when one permission of `perms` allows `need` with sg itself, or, when ranges_count,
 * with a range holding `cidr` (NULL: not known, so only 0.0.0.0/0 holds it).
 */
static int permits(const xmlNode *perms, const char *sg, enum sg_need need, int ranges_count,
                   const char *cidr)
{
	for (xmlNode *p = perms ? perms->children : NULL; p; p = p->next) {
		if (!is_el(p, "item") || !permission_covers(p, need))
			continue;
		for (xmlNode *g = child(path(p, "groups"), "item"); g; g = g->next) {
			char id[64];
			if (is_el(g, "item") && !text_at(g, "groupId", id, sizeof(id)) &&
			    strcmp(id, sg) == 0)
				return 1;
		}
		for (xmlNode *r = child(path(p, "ipRanges"), "item"); ranges_count && r;
		     r = r->next) {
			char range[64];
			if (is_el(r, "item") && !text_at(r, "cidrIp", range, sizeof(range)) &&
			    cidr_covers(range, cidr))
				return 1;
		}
	}
	return 0;
}

int isc_ec2_parse_sg_tcp_rules(const char *xml, size_t len, const char *sg, const char *subnet_cidr,
                               int *in_ok, int *out_ok, struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *set;
	int found = 0;

	*in_ok = *out_ok = 0;
	if (!d)
		return ISC_EINVALID;
	set = child(xmlDocGetRootElement(d), "securityGroupInfo");
	for (xmlNode *it = set ? set->children : NULL; it && !found; it = it->next) {
		char id[64];
		if (!is_el(it, "item") || text_at(it, "groupId", id, sizeof(id)) ||
		    strcmp(id, sg) != 0)
			continue;
		found = 1;
		*in_ok = permits(path(it, "ipPermissions"), sg, SG_ALL_TCP, 1, subnet_cidr);
		*out_ok = permits(path(it, "ipPermissionsEgress"), sg, SG_ALL_TCP, 1, subnet_cidr);
	}
	xmlFreeDoc(d);
	if (!found)
		return isc_err_set(err, ISC_EINVALID,
		                   "DescribeSecurityGroups: %s is not in the reply", sg);
	return 0;
}

int isc_ec2_parse_sg_self_rules(const char *xml, size_t len, const char *sg, int *in_ok,
                                int *out_ok, struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *set;
	int found = 0;

	*in_ok = *out_ok = 0;
	if (!d)
		return ISC_EINVALID;
	set = child(xmlDocGetRootElement(d), "securityGroupInfo");
	for (xmlNode *it = set ? set->children : NULL; it && !found; it = it->next) {
		char id[64];
		if (!is_el(it, "item") || text_at(it, "groupId", id, sizeof(id)) ||
		    strcmp(id, sg) != 0)
			continue;
		found = 1;
		/* Inbound must name the group itself; outbound to anywhere covers the group too. */
		*in_ok = permits(path(it, "ipPermissions"), sg, SG_ALL_TRAFFIC, 0, NULL);
		*out_ok = permits(path(it, "ipPermissionsEgress"), sg, SG_ALL_TRAFFIC, 1, NULL);
	}
	xmlFreeDoc(d);
	if (!found)
		return isc_err_set(err, ISC_EINVALID,
		                   "DescribeSecurityGroups: %s is not in the reply", sg);
	return 0;
}

int isc_ec2_parse_subnet(const char *xml, size_t len, const char *subnet_id, char zone[64],
                         char cidr[64], struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *set;
	int rc = ISC_ENOTFOUND;

	zone[0] = cidr[0] = '\0';
	if (!d)
		return ISC_EINVALID;
	set = child(xmlDocGetRootElement(d), "subnetSet");
	for (xmlNode *it = set ? set->children : NULL; it && rc == ISC_ENOTFOUND; it = it->next) {
		char id[64];
		if (!is_el(it, "item") || text_at(it, "subnetId", id, sizeof(id)) ||
		    strcmp(id, subnet_id) != 0)
			continue;
		rc = text_at(it, "availabilityZone", zone, 64) ||
		             text_at(it, "cidrBlock", cidr, 64) || !zone[0] || !cidr[0]
		         ? ISC_EINVALID
		         : 0;
	}
	xmlFreeDoc(d);
	if (rc == ISC_ENOTFOUND)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "DescribeSubnets: subnet %s is not in the reply (check subnet_id)", subnet_id);
	if (rc)
		return isc_err_set(
		    err, rc, "DescribeSubnets: no availabilityZone or cidrBlock for %s", subnet_id);
	return 0;
}

int isc_ec2_parse_root_device(const char *xml, size_t len, const char *image_id, char out[64],
                              struct isc_err *err)
{
	xmlDoc *d = parse_doc(xml, len, err);
	xmlNode *set;
	int rc = ISC_ENOTFOUND;

	out[0] = '\0';
	if (!d)
		return ISC_EINVALID;
	set = child(xmlDocGetRootElement(d), "imagesSet");
	for (xmlNode *it = set ? set->children : NULL; it && rc == ISC_ENOTFOUND; it = it->next) {
		char id[64];
		if (!is_el(it, "item") || text_at(it, "imageId", id, sizeof(id)) ||
		    strcmp(id, image_id) != 0)
			continue;
		rc = text_at(it, "rootDeviceName", out, 64) || !out[0] ? ISC_EINVALID : 0;
	}
	xmlFreeDoc(d);
	if (rc == ISC_ENOTFOUND)
		return isc_err_set(err, ISC_EINVALID,
		                   "DescribeImages: image %s is not in the reply (set image_id)",
		                   image_id);
	if (rc)
		return isc_err_set(err, rc, "DescribeImages: no rootDeviceName for %s", image_id);
	return 0;
}
