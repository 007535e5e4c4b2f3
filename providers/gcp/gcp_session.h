/*
 * The GCP driver's own header: the session and the helpers its three rooms share.
 * gcp.c holds the session, the calls and the provider table (launch, describe,
 * terminate); gcp_placement.c the compact placement policies and their sweep;
 * gcp_firewall.c the firewall checks, the tenants' rules and their sweep. Not for
 * other modules or tests (those use gcp_int.h).
 */
#ifndef ISC_PROVIDERS_GCP_GCP_SESSION_H
#define ISC_PROVIDERS_GCP_GCP_SESSION_H

#include "common/buf.h"
#include "net/http.h"
#include "providers/busy.h"
#include "providers/gcp/gcp_int.h"
#include "providers/sweep.h"

#include <jansson.h>

#define PAGE_SIZE 500 /* items asked for per list page */

struct gcp_session {
	struct isc_gcp_key key;
	char project[128];
	char region[64];
	char *compute; /* base URL ending in '/' */
	char *source_image;
	char *network;
	char *subnetwork;
	char *ssh_user;
	long disk_gb;
	int external_ip;
	int compact_placement; /* compact_placement=auto: a compact policy per multi-node gang */
	int firewall_check;    /* firewall_check=auto: a gang's network must allow its TCP */
	int tenant_isolation;  /* tenant_isolation=auto: a network tag + rule per tenant */
	long op_timeout_ms;
	long max_pages; /* describe_max_pages: more is an error, never a shorter list */
	struct isc_gcp_token token;
	int token_refused; /* the token endpoint said no: never ask again in this session */
	const struct isc_clock *clock;
	struct isc_http_client http;
};

/* What a listing collects (gcp.c's collect_nodes). */
struct node_list {
	struct isc_node_info *v;
	size_t n;
	int want_tags;    /* describe: also collect the tenant tags of live instances */
	char (*tags)[64]; /* "isc-t-..." network tags of instances not TERMINATED, each once */
	size_t n_tags;
};

/* ---- gcp.c: calls ---- */

int64_t gcp_now_ms(const struct gcp_session *s);
/* Percent-encodes everything but RFC 3986 unreserved characters. */
int gcp_pct(struct isc_buf *b, const char *s);
/*
 * One authorised Compute call. A 401 means the token died early (revoked,
 * clock skew): exchange once more and repeat; a second 401 is an auth error.
 */
int gcp_call(struct gcp_session *s, const char *method, const char *what, const char *url,
             const char *body, struct isc_http_response *resp, struct isc_err *err);
/* gcp_call, with Google's error reason of a refused call in *reason (64 bytes) when asked. */
int gcp_call_reason(struct gcp_session *s, const char *method, const char *what, const char *url,
                    const char *body, struct isc_http_response *resp, char *reason,
                    struct isc_err *err);
/* "{compute}projects/{project}/" + printf(fmt, ...) */
char *gcp_api_url(const struct gcp_session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Every page of a list URL (with '?' already in it); fn reads each body. */
int gcp_list_pages(struct gcp_session *s, const char *what, const char *base_url,
                   int (*fn)(void *ctx, const struct isc_http_response *r, char **next,
                             size_t *added, struct isc_err *err),
                   void *ctx, struct isc_err *err);
/* The launch spec's tag key, or NULL. */
const char *gcp_tag_value(const struct isc_launch_spec *spec, const char *key);

/* ---- gcp_placement.c: compact placement policies ---- */

/* Compact policies a launch of this process is filling (the reconcile skips them). */
extern struct isc_busy_names gcp_busy_policies;

/* "us-central1-a" -> "us-central1". */
void gcp_region_of(const char *zone, char out[64]);
/* An Operation polled until DONE, in `region` or global (region NULL); its error as rc. */
int gcp_op_done(struct gcp_session *s, const char *region, struct isc_http_response *r,
                const char *what, struct isc_err *err);
/*
 * POSTs root (taken: freed) to url (taken: freed; NULL is out of memory) as `what`, and
 * waits for its Operation (in region, or global when NULL). alreadyExists is success:
 * inserts carry a requestId or a name of their own, so the one there is this one's.
 */
int gcp_insert(struct gcp_session *s, const char *region, const char *what, json_t *root, char *url,
               struct isc_err *err);
int gcp_create_policy(struct gcp_session *s, const struct isc_launch_spec *spec, const char *region,
                      const char *name, struct isc_err *err);
int gcp_delete_policy(struct gcp_session *s, const char *region, const char *name, int *deleted,
                      struct isc_err *err);

/*
 * What a describe hands the sweep (providers/sweep.h): the uses of its compact nodes and
 * of the vanished clusters (pointers into the listing and into vanished).
 */
struct policy_sweep {
	struct isc_sweep sweep;
	char **vanished;
	size_t n_vanished;
};

void gcp_policy_sweep_cleanup(struct policy_sweep *sw);
/* Fills sw from the listing; 1 when this describe sweeps (providers/sweep.h). */
int gcp_policies_sweep_due(const struct gcp_session *s, const char *broker_id,
                           const struct isc_node_info *nodes, size_t n, struct policy_sweep *sw);
void gcp_reconcile_policies(struct gcp_session *s, const char *broker_id,
                            const struct isc_node_info *nodes, size_t n, struct policy_sweep *sw);

/* ---- gcp_firewall.c: the gang's TCP, tenants' rules ---- */

/* Tenant rules a launch of this process is about to use (the sweep leaves them). */
extern struct isc_busy_names gcp_busy_firewalls;

/*
 * Before a gang of several nodes launches: an INGRESS rule of its network must allow all
 * TCP from a range covering its subnet to every node, else the launch is refused naming
 * the rule.
 */
int gcp_check_firewall(struct gcp_session *s, const char *zone, const char *ttag,
                       struct isc_err *err);
/* The tenant's firewall rule, named like its tag, made on demand. */
int gcp_ensure_tenant_firewall(struct gcp_session *s, const struct isc_launch_spec *spec,
                               const char *tag, struct isc_err *err);
/* 1 when this describe sweeps the tenants' rules (l: the listing with its live tags). */
int gcp_tenant_sweep_due(const struct gcp_session *s, const char *broker_id,
                         const struct node_list *l);
void gcp_reconcile_tenant_firewalls(struct gcp_session *s, const char *broker_id,
                                    const struct node_list *l);

#endif
