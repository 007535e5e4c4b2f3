/*
 * OCI's wire, without any I/O: error bodies and their classification, the
 * LaunchInstance body, Instance objects, paging headers, retry tokens and the
 * security-list rule check. Everything OCI sends is checked for type and
 * size before it is used.
 */
#include "providers/oci/oci_int.h"

#include "common/buf.h"

#include <openssl/evp.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int isc_oci_parse_error(const char *body, size_t len, struct isc_oci_error *out)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *code, *msg;

	memset(out, 0, sizeof(*out));
	if (!j)
		return ISC_EINVALID;
	code = json_string_value(json_object_get(j, "code"));
	msg = json_string_value(json_object_get(j, "message"));
	if (!code) {
		json_decref(j);
		return ISC_EINVALID;
	}
	snprintf(out->code, sizeof(out->code), "%s", code);
	snprintf(out->message, sizeof(out->message), "%s", msg ? msg : "");
	/* A cloud message is shown to people: keep it on one line. */
	for (char *p = out->message; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	json_decref(j);
	return 0;
}

int isc_oci_classify(long status, const char *code, const char *message)
{
	if (status >= 200 && status < 300)
		return 0;
	if (!code)
		code = "";
	if (!message)
		message = "";
	/* Capacity comes as a 500 InternalError: classified by message, never retried. */
	if (strcasestr(message, "out of host capacity") || strcasestr(message, "out of capacity"))
		return ISC_ECAPACITY;
	if (!strcmp(code, "LimitExceeded") || !strcmp(code, "QuotaExceeded"))
		return ISC_EQUOTA;
	if (status == 429 || !strcmp(code, "TooManyRequests"))
		return ISC_ETHROTTLED;
	if (status == 409 && !strcmp(code, "IncorrectState"))
		return ISC_ETRANSIENT;
	if (status == 501)
		return ISC_EINVALID; /* not implemented: retrying cannot help */
	if (status >= 500)
		return ISC_ETRANSIENT;
	if (status == 401 || !strcmp(code, "NotAuthenticated"))
		return ISC_EAUTH;
	if (status == 404)
		return ISC_ENOTFOUND;
	if (status == 409)
		return ISC_ECONFLICT;
	return ISC_EINVALID;
}

int isc_oci_retry_token(const char *token, const char *ad, unsigned index, char out[65],
                        struct isc_err *err)
{
	const char *suffix;
	size_t tl;

	if (!token || !token[0] || strlen(token) > 64)
		return isc_err_set(err, ISC_EINVALID, "launch: the token must be 1-64 characters");
	for (const char *p = token; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return isc_err_set(err, ISC_EINVALID,
			                   "launch: the token must be printable ASCII");
	suffix = strrchr(ad, ':');
	suffix = suffix ? suffix + 1 : ad;
	tl = strlen(token);
	if (tl + strlen(suffix) + 2 + 10 <= 64 &&
	    strspn(suffix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") ==
	        strlen(suffix)) {
		int n = snprintf(out, 65, "%s-%s-%u", token, suffix, index);
		for (int i = (int)tl; i < n; i++)
			out[i] = (char)tolower((unsigned char)out[i]);
		return 0;
	} else {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned int dl = 0;
		char seed[64 + 1 + 256 + 1 + 16];
		int sl = snprintf(seed, sizeof(seed), "%s%c%.256s%c%u", token, 0, ad, 0, index);
		if (sl < 0 || (size_t)sl >= sizeof(seed) ||
		    !EVP_Digest(seed, (size_t)sl, d, &dl, EVP_sha256(), NULL))
			return isc_err_set(err, ISC_EINVALID,
			                   "launch: cannot derive a retry token");
		snprintf(out, 65, "%.40s-%02x%02x%02x%02x%02x%02x%02x%02x-%u", token, d[0], d[1],
		         d[2], d[3], d[4], d[5], d[6], d[7], index);
	}
	return 0;
}

int isc_oci_header(const char *raw, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *p = raw;
	int found = -1;

	if (!raw || cap == 0)
		return -1;
	/* Raw lines of every response read (a redirect or 100 would come first): last wins. */
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			size_t vl = len - nl - 1;
			while (vl && (*v == ' ' || *v == '\t'))
				v++, vl--;
			while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (vl < cap) {
				memcpy(out, v, vl);
				out[vl] = '\0';
				found = 0;
			}
		}
		p = eol ? eol + 1 : NULL;
	}
	return found;
}

enum isc_node_state isc_oci_node_state(const char *s)
{
	if (!s)
		return ISC_NODE_PENDING;
	if (!strcmp(s, "RUNNING"))
		return ISC_NODE_RUNNING;
	if (!strcmp(s, "TERMINATING"))
		return ISC_NODE_SHUTTING_DOWN;
	if (!strcmp(s, "TERMINATED"))
		return ISC_NODE_TERMINATED;
	if (!strcmp(s, "STOPPING"))
		return ISC_NODE_STOPPING;
	if (!strcmp(s, "STOPPED"))
		return ISC_NODE_STOPPED;
	return ISC_NODE_PENDING; /* PROVISIONING, STARTING, MOVING, CREATING_IMAGE */
}

int64_t isc_oci_parse_time(const char *s)
{
	struct tm tm = {0};
	const char *p;
	int64_t ms = 0;

	if (!s || !(p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		return 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; isdigit((unsigned char)*p); p++)
			if (digits++ < 3)
				ms = ms * 10 + (*p - '0');
		while (digits++ < 3)
			ms *= 10;
	}
	return (int64_t)timegm(&tm) * 1000 + ms;
}

static void copy_str(char *dst, size_t cap, const json_t *v)
{
	const char *s = json_string_value(v);
	snprintf(dst, cap, "%s", s ? s : "");
}

int isc_oci_parse_instance(const json_t *inst, struct isc_node_info *ni)
{
	const json_t *tags;
	const char *id = json_string_value(json_object_get(inst, "id"));

	memset(ni, 0, sizeof(*ni));
	if (!json_is_object(inst) || !id || !id[0] || strlen(id) >= sizeof(ni->id))
		return ISC_EINVALID;
	snprintf(ni->id, sizeof(ni->id), "%s", id);
	ni->state = isc_oci_node_state(json_string_value(json_object_get(inst, "lifecycleState")));
	copy_str(ni->zone, sizeof(ni->zone), json_object_get(inst, "availabilityDomain"));
	copy_str(ni->instance_type, sizeof(ni->instance_type), json_object_get(inst, "shape"));
	ni->spot = json_is_object(json_object_get(inst, "preemptibleInstanceConfig"));
	ni->launched_at_ms =
	    isc_oci_parse_time(json_string_value(json_object_get(inst, "timeCreated")));
	tags = json_object_get(inst, "freeformTags");
	if (json_is_object(tags)) {
		copy_str(ni->broker_id, sizeof(ni->broker_id),
		         json_object_get(tags, ISC_TAG_BROKER));
		copy_str(ni->cluster_id, sizeof(ni->cluster_id),
		         json_object_get(tags, ISC_TAG_CLUSTER));
		copy_str(ni->experiment_id, sizeof(ni->experiment_id),
		         json_object_get(tags, ISC_TAG_EXPERIMENT));
		copy_str(ni->client_token, sizeof(ni->client_token),
		         json_object_get(tags, "isc:token"));
	}
	return 0;
}

static char *cloud_config_b64(const char *extra)
{
	struct isc_buf raw;
	char *b64;
	int rc;

	isc_buf_init(&raw, 32 * 1024);
	rc = isc_buf_puts(&raw, "#cloud-config\n");
	/* The extra body continues our cloud-config document; drop a repeated header. */
	if (strncmp(extra, "#cloud-config\n", 14) == 0)
		extra += 14;
	if (!rc)
		rc = isc_buf_puts(&raw, extra);
	if (rc) {
		isc_buf_cleanup(&raw);
		return NULL;
	}
	b64 = malloc(4 * ((raw.len + 2) / 3) + 1);
	if (b64)
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)raw.data,
		                (int)raw.len);
	isc_buf_cleanup(&raw);
	return b64;
}

int isc_oci_launch_body(const struct isc_oci_launch *l, char **out, struct isc_err *err)
{
	json_t *b = json_object(), *tags = json_object(), *md = json_object();
	char *ud = NULL;
	int bad = !b || !tags || !md;

	*out = NULL;
	/* "TYPE BASE64 [comment]" on one line: ssh_authorized_keys is newline-separated. */
	if (!l->ssh_public_key || strpbrk(l->ssh_public_key, "\r\n") ||
	    !strchr(l->ssh_public_key, ' ') || l->ssh_public_key[0] == ' ') {
		json_decref(b);
		json_decref(tags);
		json_decref(md);
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: the SSH key must be one OpenSSH public key line");
	}
	for (size_t i = 0; !bad && i < l->n_tags; i++)
		bad |= json_object_set_new(tags, l->tags[i].key, json_string(l->tags[i].value));
	if (!bad && l->retry_token)
		bad |= json_object_set_new(tags, "isc:token", json_string(l->retry_token));
	bad |= json_object_set_new(md, "ssh_authorized_keys", json_string(l->ssh_public_key));
	if (l->user_data && l->user_data[0]) {
		ud = cloud_config_b64(l->user_data);
		bad |= !ud || json_object_set_new(md, "user_data", json_string(ud));
	}
	bad |= json_object_set_new(b, "availabilityDomain", json_string(l->ad));
	bad |= json_object_set_new(b, "compartmentId", json_string(l->compartment_id));
	bad |= json_object_set_new(b, "shape", json_string(l->shape));
	bad |= json_object_set_new(b, "displayName", json_string(l->display_name));
	bad |= json_object_set_new(
	    b, "sourceDetails",
	    l->boot_volume_gb
	        ? json_pack("{s:s, s:s, s:I}", "sourceType", "image", "imageId", l->image_id,
	                    "bootVolumeSizeInGBs", (json_int_t)l->boot_volume_gb)
	        : json_pack("{s:s, s:s}", "sourceType", "image", "imageId", l->image_id));
	bad |= json_object_set_new(b, "createVnicDetails",
	                           l->nsg_id ? json_pack("{s:s, s:b, s:[s]}", "subnetId",
	                                                 l->subnet_id, "assignPublicIp",
	                                                 l->assign_public_ip, "nsgIds", l->nsg_id)
	                                     : json_pack("{s:s, s:b}", "subnetId", l->subnet_id,
	                                                 "assignPublicIp", l->assign_public_ip));
	bad |= json_object_set(b, "metadata", md);
	bad |= json_object_set(b, "freeformTags", tags);
	if (l->compute_cluster_id)
		bad |=
		    json_object_set_new(b, "computeClusterId", json_string(l->compute_cluster_id));
	if (l->preemptible)
		bad |= json_object_set_new(b, "preemptibleInstanceConfig",
		                           json_pack("{s:{s:s, s:b}}", "preemptionAction", "type",
		                                     "TERMINATE", "preserveBootVolume", 0));
	if (!bad)
		*out = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(b);
	json_decref(tags);
	json_decref(md);
	free(ud);
	if (!*out)
		return isc_err_set(err, ISC_EINVALID,
		                   "LaunchInstance: cannot build the request (bad text in a tag, "
		                   "shape or id?)");
	return 0;
}

int isc_oci_parse_cidr(const char *s, uint32_t *net, int *bits)
{
	unsigned a, b, c, d;
	int n, used = 0;

	if (!s || sscanf(s, "%3u.%3u.%3u.%3u/%2d%n", &a, &b, &c, &d, &n, &used) != 5 ||
	    s[used] != '\0' || a > 255 || b > 255 || c > 255 || d > 255 || n < 0 || n > 32)
		return -1;
	*net = (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | (uint32_t)d;
	*bits = n;
	if (n < 32)
		*net &= n ? ~((1u << (32 - n)) - 1) : 0;
	return 0;
}

/* True when source (a CIDR) contains the whole of cidr. */
static int cidr_contains(const char *source, const char *cidr)
{
	uint32_t sn, cn;
	int sb, cb;
	if (isc_oci_parse_cidr(source, &sn, &sb) || isc_oci_parse_cidr(cidr, &cn, &cb))
		return 0;
	if (sb > cb)
		return 0;
	return sb == 0 || ((cn ^ sn) >> (32 - sb)) == 0;
}

int isc_oci_rules_allow_training(const json_t *rules, const char *cidr)
{
	size_t i;
	const json_t *r;

	if (!json_is_array(rules))
		return -1;
	json_array_foreach(rules, i, r)
	{
		const char *proto = json_string_value(json_object_get(r, "protocol"));
		const char *src = json_string_value(json_object_get(r, "source"));
		const char *stype = json_string_value(json_object_get(r, "sourceType"));
		const json_t *tcp = json_object_get(r, "tcpOptions"), *range;
		if (!proto || !src || (stype && strcmp(stype, "CIDR_BLOCK") != 0))
			continue;
		if (strcmp(proto, "all") != 0 && strcmp(proto, "6") != 0)
			continue;
		if (!cidr_contains(src, cidr))
			continue;
		range = json_is_object(tcp) ? json_object_get(tcp, "destinationPortRange") : NULL;
		if (strcmp(proto, "6") == 0 && json_is_object(range)) {
			json_int_t lo = json_integer_value(json_object_get(range, "min"));
			json_int_t hi = json_integer_value(json_object_get(range, "max"));
			if (lo > 1 || hi < 65535)
				continue;
		}
		return 1;
	}
	return 0;
}
