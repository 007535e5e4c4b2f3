/*
 * The GCP driver's firewall rooms (providers/gcp/gcp_session.h): the check that a
 * gang's network lets its nodes talk TCP to one another, and tenants' own rules on
 * the platform's account (made at launch, swept at describe).
 */
#include "common/log.h"
#include "providers/gcp/gcp_session.h"

#include <jansson.h>
#include <openssl/evp.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A gang's ranks talk TCP to one another: the rendezvous port (MASTER_PORT) and then the
 * ephemeral ports gloo's and NCCL's socket transports listen on, so every TCP port must
 * be open between the nodes. VPC firewall rules deny ingress unless a rule allows it
 * (implied deny, priority 65535); the default network's default-allow-internal does,
 * from 10.128.0.0/9 (https://cloud.google.com/firewall/docs/firewalls). Rules are read
 * with firewalls.list (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/list).
 */
static int cidr4(const char *s, uint32_t *addr, int *len)
{
	unsigned a, b, c, d;
	int n, used = 0;
	if (!s || sscanf(s, "%u.%u.%u.%u/%d%n", &a, &b, &c, &d, &n, &used) != 5 || s[used] ||
	    a > 255 || b > 255 || c > 255 || d > 255 || n < 0 || n > 32)
		return -1;
	*addr = (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | (uint32_t)d;
	*len = n;
	return 0;
}

static uint32_t prefix_mask(int len)
{
	return len == 0 ? 0 : 0xffffffffu << (32 - len);
}

int isc_gcp_fw_scan_init(struct isc_gcp_fw_scan *sc, const char *network, const char *cidr,
                         struct isc_err *err)
{
	memset(sc, 0, sizeof(*sc));
	sc->allow_prio = -1;
	sc->deny_prio = -1;
	snprintf(sc->network, sizeof(sc->network), "%s", network);
	if (cidr4(cidr, &sc->net, &sc->len))
		return isc_err_set(err, ISC_EINVALID, "subnet range '%.40s' is not an IPv4 CIDR",
		                   cidr ? cidr : "");
	sc->net &= prefix_mask(sc->len);
	return 0;
}

/* The name after ".../networks/" of a network URL or path. */
static const char *network_name(const char *v)
{
	const char *p = v ? strstr(v, "networks/") : NULL;
	return p ? p + strlen("networks/") : v ? v : "";
}

/* Whether one of a rule's sourceRanges covers (cover=1) or overlaps (cover=0) the subnet. */
static int ranges_match(const struct isc_gcp_fw_scan *sc, json_t *ranges, int cover)
{
	size_t i;
	json_t *r;
	json_array_foreach(ranges, i, r)
	{
		uint32_t a;
		int l;
		if (cidr4(json_string_value(r), &a, &l))
			continue; /* IPv6 ranges do not reach IPv4 nodes */
		if (cover ? l <= sc->len && (sc->net & prefix_mask(l)) == (a & prefix_mask(l))
		          : (sc->net & prefix_mask(l < sc->len ? l : sc->len)) ==
		                (a & prefix_mask(l < sc->len ? l : sc->len)))
			return 1;
	}
	return 0;
}

/* Marks (or, with mark NULL, just tests) the TCP ports of allowed[]/denied[]; 1 if any. */
static int tcp_ports(json_t *list, unsigned char *mark)
{
	size_t i, j;
	json_t *e, *p;
	int any = 0;
	json_array_foreach(list, i, e)
	{
		const char *proto = json_string_value(json_object_get(e, "IPProtocol"));
		json_t *ports = json_object_get(e, "ports");
		if (!proto || (strcmp(proto, "tcp") != 0 && strcmp(proto, "all") != 0 &&
		               strcmp(proto, "6") != 0))
			continue;
		if (json_array_size(ports) == 0) { /* no ports: every port */
			any = 1;
			if (mark)
				memset(mark, 0xff, 65536 / 8);
			continue;
		}
		json_array_foreach(ports, j, p)
		{
			unsigned lo, hi;
			int used = 0;
			const char *v = json_string_value(p);
			if (!v)
				continue;
			if (sscanf(v, "%u-%u%n", &lo, &hi, &used) != 2 || v[used]) {
				used = 0;
				if (sscanf(v, "%u%n", &lo, &used) != 1 || v[used])
					continue;
				hi = lo;
			}
			if (lo > hi || hi > 65535)
				continue;
			any = 1;
			for (unsigned q = lo; mark && q <= hi; q++)
				mark[q / 8] |= (unsigned char)(1u << (q % 8));
		}
	}
	return any;
}

int isc_gcp_fw_scan_page(struct isc_gcp_fw_scan *sc, const char *body, size_t len, char **next_page,
                         size_t *added, struct isc_err *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *items, *rule;
	const char *nt;
	size_t i;

	*added = 0;
	if (next_page)
		*next_page = NULL;
	items = root ? json_object_get(root, "items") : NULL;
	if (!json_is_object(root) || (items && !json_is_array(items))) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "firewalls.list: unreadable reply");
	}
	json_array_foreach(items, i, rule)
	{
		const char *name = json_string_value(json_object_get(rule, "name"));
		const char *dir = json_string_value(json_object_get(rule, "direction"));
		json_t *prio_j = json_object_get(rule, "priority");
		long prio = json_is_integer(prio_j) ? (long)json_integer_value(prio_j) : 1000;
		json_t *ranges = json_object_get(rule, "sourceRanges");
		(*added)++;
		if (json_is_true(json_object_get(rule, "disabled")) ||
		    (dir && strcmp(dir, "INGRESS")) ||
		    strcmp(network_name(json_string_value(json_object_get(rule, "network"))),
		           sc->network) != 0)
			continue;
		/* A rule for tagged targets or service accounts is not for every node. */
		if (json_array_size(json_object_get(rule, "targetTags")) ||
		    json_array_size(json_object_get(rule, "targetServiceAccounts")))
			continue;
		if (json_object_get(rule, "denied")) {
			/* A deny wins over an allow of the same priority. */
			if (ranges_match(sc, ranges, 0) &&
			    tcp_ports(json_object_get(rule, "denied"), NULL) &&
			    (sc->deny_prio < 0 || prio < sc->deny_prio)) {
				sc->deny_prio = prio;
				snprintf(sc->deny_name, sizeof(sc->deny_name), "%s",
				         name ? name : "");
			}
			continue;
		}
		if (!ranges_match(sc, ranges, 1) ||
		    !tcp_ports(json_object_get(rule, "allowed"), NULL))
			continue;
		if (!sc->wide_name[0]) {
			/* One rule that opens every TCP port from the subnet to every instance:
			 * tenants' nodes on the network reach one another through it. */
			unsigned char own[65536 / 8] = {0};
			size_t k = 0;
			tcp_ports(json_object_get(rule, "allowed"), own);
			while (k < sizeof(own) && own[k] == 0xff)
				k++;
			if (k == sizeof(own))
				snprintf(sc->wide_name, sizeof(sc->wide_name), "%s",
				         name ? name : "");
		}
		tcp_ports(json_object_get(rule, "allowed"), sc->ports);
		if (prio > sc->allow_prio) {
			sc->allow_prio = prio;
			snprintf(sc->allow_name, sizeof(sc->allow_name), "%s", name ? name : "");
		}
	}
	nt = json_string_value(json_object_get(root, "nextPageToken"));
	if (next_page && nt && nt[0] && !(*next_page = strdup(nt))) {
		json_decref(root);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	json_decref(root);
	return 0;
}

int isc_gcp_fw_scan_ok(const struct isc_gcp_fw_scan *sc)
{
	for (size_t i = 0; i < sizeof(sc->ports); i++)
		if (sc->ports[i] != 0xff)
			return 0;
	return sc->deny_prio < 0 || sc->deny_prio > sc->allow_prio;
}

static int collect_firewalls(void *ctx, const struct isc_http_response *r, char **next,
                             size_t *added, struct isc_err *err)
{
	return isc_gcp_fw_scan_page(ctx, r->body.data, r->body.len, next, added, err);
}

/* The gang's subnet range: subnetworks.get of `subnetwork`, or of the auto mode network's
 * subnet in the region (named after the network). */
static int subnet_range(struct gcp_session *s, const char *region, char cidr[64],
                        struct isc_err *err)
{
	const char *sub = s->subnetwork ? strstr(s->subnetwork, "regions/") : NULL;
	const char *net = network_name(s->network);
	struct isc_http_response resp;
	json_t *root;
	char *url;
	int rc;

	if (s->subnetwork && !sub)
		url = gcp_api_url(s, "regions/%s/subnetworks/%s", region, s->subnetwork);
	else if (sub)
		url = gcp_api_url(s, "%s", sub);
	else
		url = gcp_api_url(s, "regions/%s/subnetworks/%s", region, net);
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = gcp_call(s, "GET", "subnetworks.get", url, NULL, &resp, err);
	free(url);
	root = rc ? NULL : json_loadb(resp.body.data, resp.body.len, 0, NULL);
	if (!rc && !json_string_value(json_object_get(root, "ipCidrRange")))
		rc = isc_err_set(err, ISC_EINVALID, "subnetworks.get: no ipCidrRange in the reply");
	if (!rc)
		snprintf(cidr, 64, "%s", json_string_value(json_object_get(root, "ipCidrRange")));
	json_decref(root);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * Before a gang of several nodes launches: an INGRESS rule of its network must allow all
 * TCP from a range covering its subnet to every node, else the launch is refused naming
 * the rule (as the AWS driver names the EFA security-group rule).
 */
int gcp_check_firewall(struct gcp_session *s, const char *zone, const char *ttag,
                       struct isc_err *err)
{
	struct isc_gcp_fw_scan *sc;
	char region[64], cidr[64], *url;
	int rc;

	gcp_region_of(zone, region);
	if ((rc = subnet_range(s, region, cidr, err)))
		return rc;
	if (!(sc = malloc(sizeof(*sc))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_gcp_fw_scan_init(sc, network_name(s->network), cidr, err);
	url = rc ? NULL : gcp_api_url(s, "global/firewalls?");
	if (!rc && !url)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!rc)
		rc = gcp_list_pages(s, "firewalls.list", url, collect_firewalls, sc, err);
	if (!rc && ttag) {
		/*
		 * A tenant's nodes get their own rule (sourceTags = targetTags = the tag). Rules
		 * only allow, so a rule that lets all TCP from the subnet reach every instance
		 * (default-allow-internal) would let every tenant's nodes reach every other's:
		 * refused, naming it.
		 */
		if (sc->wide_name[0])
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "network %s: firewall rule %s lets all TCP from %s (the subnet) reach "
			    "every instance, so the organisations on this project would reach each "
			    "other's nodes; remove it (each organisation's nodes get a rule of "
			    "their "
			    "own, %s) or set [providers.gcp] tenant_isolation = \"never\" "
			    "(docs/security.md, \"Tenants on the platform's account\")",
			    sc->network, sc->wide_name, cidr, ttag);
	} else if (!rc && !isc_gcp_fw_scan_ok(sc)) {
		if (sc->deny_prio >= 0 && sc->allow_prio >= 0 && sc->deny_prio <= sc->allow_prio)
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "network %s: firewall rule %s (priority %ld) denies the TCP the gang's "
			    "nodes need among themselves (VPC firewall rules, "
			    "https://cloud.google.com/firewall/docs/firewalls)",
			    sc->network, sc->deny_name, sc->deny_prio);
		else
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "network %s lacks the firewall rule a gang needs: ingress: allow all "
			    "TCP "
			    "from %s (the subnet) to all instances%s (VPC firewall rules, "
			    "https://cloud.google.com/firewall/docs/firewalls)",
			    sc->network, cidr,
			    strcmp(sc->network, "default") == 0 ? ", as default-allow-internal does"
			                                        : "");
	} else if (!rc)
		isc_log(ISC_LOG_DEBUG, "gcp: firewall rule %s allows TCP within %s", sc->allow_name,
		        cidr);
	free(url);
	free(sc);
	return rc;
}

/* ---- tenants on the platform's account (docs/security.md, issue 42) ---- */

/* Tenant rules a launch of this process is about to use (the sweep leaves them). */
struct isc_busy_names gcp_busy_firewalls = ISC_BUSY_NAMES_INIT;

/*
 * The tenant's firewall rule, named like its tag, made on demand (firewalls.get, else
 * firewalls.insert with a requestId from the name; alreadyExists is a concurrent launch's):
 * INGRESS, sourceTags = targetTags = [tag], allowed all protocols (VPC firewall rules: "a
 * source tag ... the rule applies to traffic from instances that have one of the tags",
 * "target tags ... the rule applies only to instances with a matching network tag";
 * https://cloud.google.com/firewall/docs/firewalls). Ingress is denied unless a rule
 * allows it (implied deny), so only the tenant's own nodes reach its nodes, besides what
 * the network's other rules let in (SSH: default-allow-ssh, or the operator's).
 */
int gcp_ensure_tenant_firewall(struct gcp_session *s, const struct isc_launch_spec *spec,
                               const char *tag, struct isc_err *err)
{
	const char *broker = gcp_tag_value(spec, ISC_TAG_BROKER);
	struct isc_http_response resp;
	char rid[37], reason[64], *url = gcp_api_url(s, "global/firewalls/%s", tag), *desc = NULL;
	json_t *root;
	int rc;

	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "GET", "firewalls.get", url, NULL, &resp, reason, err);
	free(url);
	isc_http_response_cleanup(&resp);
	if (!rc)
		return 0; /* there already: the tenant's, made by an earlier launch */
	if (rc != ISC_ENOTFOUND && strcmp(reason, "notFound") != 0)
		return rc;
	isc_gcp_request_id(tag, "tenant-firewall", rid);
	if (asprintf(&desc, "isc:broker=%s isc:tenant=%s", broker ? broker : "", spec->tenant) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	root = json_pack("{s:s, s:s, s:s, s:s, s:i, s:[s], s:[s], s:[{s:s}]}", "name", tag,
	                 "description", desc, "network", s->network, "direction", "INGRESS",
	                 "priority", 1000, "sourceTags", tag, "targetTags", tag, "allowed",
	                 "IPProtocol", "all");
	free(desc);
	/* alreadyExists: a concurrent launch's */
	rc = gcp_insert(s, NULL, "firewalls.insert", root,
	                gcp_api_url(s, "global/firewalls?requestId=%s", rid), err);
	if (rc && err)
		isc_err_wrap(err, "tenant firewall rule %s", tag);
	return rc;
}

/*
 * Teardown of tenants' firewall rules (issue 42), as compact policies go: a rule of this
 * broker (named isc-t-TENANT-HASH, HASH from its id) whose tag no listed instance that is
 * not TERMINATED carries, and that no launch of this process is about to use, is deleted
 * (firewalls.delete, at most 10 a sweep). Deleted GCE instances leave the listing, so a
 * sweep is due, besides providers/sweep.h's first time and period, when a tag this process
 * saw live last time is gone from the listing. Best effort: logged, the listing stands.
 */
#define FIREWALL_DELETES_PER_SWEEP 10

static pthread_mutex_t tenant_seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char scope[600];
	char *tags; /* the live tags of the scope's last listing, "\n"-separated */
} tenant_seen[16];

int gcp_tenant_sweep_due(const struct gcp_session *s, const char *broker_id,
                         const struct node_list *l)
{
	char scope[600];
	struct isc_sweep_use *uses = calloc(l->n_tags ? l->n_tags : 1, sizeof(*uses));
	struct isc_buf now;
	int due = 0, slot = -1;

	snprintf(scope, sizeof(scope), "gcp-fw %s%s %s", s->compute, s->project, broker_id);
	isc_buf_init(&now, 0);
	for (size_t i = 0; i < l->n_tags; i++) {
		if (uses)
			uses[i] = (struct isc_sweep_use){l->tags[i], 1};
		isc_buf_printf(&now, "%s\n", l->tags[i]);
	}
	due = !uses || isc_sweep_due(scope, uses, l->n_tags, gcp_now_ms(s));
	free(uses);
	pthread_mutex_lock(&tenant_seen_lock);
	for (int k = 0; k < 16 && slot < 0; k++)
		if (strcmp(tenant_seen[k].scope, scope) == 0)
			slot = k;
	if (slot >= 0 && tenant_seen[slot].tags) {
		/* a tag live last time and not now: its nodes are gone */
		for (char *p = tenant_seen[slot].tags; *p && !due;) {
			char *nl = strchr(p, '\n');
			size_t len = nl ? (size_t)(nl - p) : strlen(p);
			int found = 0;
			for (size_t i = 0; i < l->n_tags && !found; i++)
				found =
				    strlen(l->tags[i]) == len && strncmp(l->tags[i], p, len) == 0;
			due = !found;
			p += len + (nl ? 1 : 0);
		}
	}
	if (slot < 0)
		for (int k = 0; k < 16 && slot < 0; k++)
			if (!tenant_seen[k].scope[0])
				slot = k;
	if (slot < 0)
		slot = 0; /* more scopes than slots: one is forgotten (it sweeps again) */
	snprintf(tenant_seen[slot].scope, sizeof(tenant_seen[slot].scope), "%s", scope);
	free(tenant_seen[slot].tags);
	tenant_seen[slot].tags = isc_buf_detach(&now);
	pthread_mutex_unlock(&tenant_seen_lock);
	isc_buf_cleanup(&now);
	return due;
}

void gcp_reconcile_tenant_firewalls(struct gcp_session *s, const char *broker_id,
                                    const struct node_list *l)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	char suffix[16], scope[600];
	struct isc_buf b, f;
	struct isc_http_response resp;
	struct isc_err err;
	json_t *root = NULL, *it;
	size_t i, deletes = 0;
	int rc;

	if (!EVP_Digest(broker_id, strlen(broker_id), d, &dl, EVP_sha256(), NULL) || dl < 4)
		return;
	snprintf(suffix, sizeof(suffix), "-%02x%02x%02x%02x", d[0], d[1], d[2], d[3]);
	snprintf(scope, sizeof(scope), "gcp-fw %s%s %s", s->compute, s->project, broker_id);
	isc_buf_init(&b, 0);
	isc_buf_init(&f, 0);
	{
		char *base = gcp_api_url(s, "global/firewalls");
		rc = base ? 0 : ISC_ENOMEM;
		rc = rc ? rc : isc_buf_printf(&f, "name eq \"isc-t-.*%s\"", suffix);
		rc = rc ? rc : isc_buf_printf(&b, "%s?maxResults=%d&filter=", base, PAGE_SIZE);
		rc = rc ? rc : gcp_pct(&b, f.data);
		free(base);
	}
	isc_http_response_init(&resp);
	if (rc)
		rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
	else
		rc = gcp_call(s, "GET", "firewalls.list", b.data, NULL, &resp, &err);
	if (!rc &&
	    !(root = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, NULL)))
		rc = isc_err_set(&err, ISC_EINVALID, "firewalls.list: not JSON");
	json_array_foreach(rc ? NULL : json_object_get(root, "items"), i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		size_t nl = name ? strlen(name) : 0, sl = strlen(suffix);
		int used = 0;
		char *url;
		struct isc_http_response dr;
		char reason[64];
		/* the filter is the server's: the name is checked here again */
		if (!name || strncmp(name, "isc-t-", 6) != 0 || nl <= sl ||
		    strcmp(name + nl - sl, suffix) != 0)
			continue;
		for (size_t k = 0; k < l->n_tags && !used; k++)
			used = strcmp(l->tags[k], name) == 0;
		if (used || isc_busy_names_has(&gcp_busy_firewalls, name) ||
		    deletes == FIREWALL_DELETES_PER_SWEEP)
			continue;
		deletes++;
		if (!(url = gcp_api_url(s, "global/firewalls/%s", name))) {
			rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
			break;
		}
		isc_http_response_init(&dr);
		rc = gcp_call_reason(s, "DELETE", "firewalls.delete", url, NULL, &dr, reason, &err);
		if (!rc)
			rc = gcp_op_done(s, NULL, &dr, "firewalls.delete", &err);
		if (!rc)
			isc_log(ISC_LOG_INFO,
			        "gcp: tenant firewall rule %s deleted (no live instance)", name);
		else if (rc == ISC_ENOTFOUND || strcmp(reason, "notFound") == 0)
			rc = 0;
		isc_http_response_cleanup(&dr);
		free(url);
		if (rc)
			break;
	}
	json_decref(root);
	isc_http_response_cleanup(&resp);
	isc_buf_cleanup(&b);
	isc_buf_cleanup(&f);
	if (rc)
		isc_log(ISC_LOG_WARN, "gcp: tenant firewall reconcile: %s (next describe retries)",
		        err.msg);
	else
		isc_sweep_done(scope, NULL, 0, gcp_now_ms(s));
}
