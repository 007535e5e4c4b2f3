/*
 * Internals of the GCP driver that unit tests check directly: the service
 * account key, the RS256 JWT, the token exchange, the names and labels the
 * driver derives, and the Compute Engine JSON it reads.
 */
#ifndef ISC_PROVIDERS_GCP_GCP_INT_H
#define ISC_PROVIDERS_GCP_GCP_INT_H

#include "common/err.h"
#include "net/http.h"
#include "providers/provider.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_GCP_SCOPE        "https://www.googleapis.com/auth/cloud-platform"
#define ISC_GCP_COMPUTE_URL  "https://compute.googleapis.com/compute/v1/"
#define ISC_GCP_TOKEN_LIFE_S 3600
/* A token is renewed this long before Google says it expires. */
#define ISC_GCP_TOKEN_MARGIN_MS (5 * 60 * 1000)

/* ---- the service-account key (gcp_auth.c) ---- */

struct isc_gcp_key {
	char *client_email;
	char *private_key_pem; /* wiped on cleanup */
	char *private_key_id;  /* may be empty */
	char *token_uri;
	char *project_id; /* may be empty */
};

/* Parses a key file's JSON ("type": "service_account"). `what` names it in errors. */
int isc_gcp_key_parse(const char *json, size_t len, const char *what, struct isc_gcp_key *out,
                      struct isc_err *err);
void isc_gcp_key_cleanup(struct isc_gcp_key *k);
/* The key's private_key parses as an unencrypted RSA PEM key; ISC_EINVALID naming the field. */
int isc_gcp_key_private_valid(const struct isc_gcp_key *k, const char *what, struct isc_err *err);

/*
 * Where an organisation's own key (bring-your-own, not the operator's key file) may
 * have its assertion exchanged: Google's token endpoint as Google's key files spell
 * it, or, when the operator pointed [providers.gcp] endpoint_compute (or
 * CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE) somewhere else (a proxy, the sandbox's
 * mock), "/token" at that same scheme://host:port. Anything else is ISC_EINVALID
 * naming the key's "token_uri" field, before any request: a caller never names a
 * host iscd talks to (issue 29). compute_url is the session's compute base URL.
 */
int isc_gcp_token_uri_check(const char *token_uri, const char *compute_url, const char *what,
                            struct isc_err *err);

/*
 * The signed assertion "header.claims.signature" (base64url, RS256) for the
 * jwt-bearer grant: iss = client_email, scope, aud = token_uri, iat, exp =
 * iat + 3600; kid = private_key_id when there is one. *out is owned (free).
 */
int isc_gcp_jwt(const struct isc_gcp_key *k, const char *scope, int64_t iat_s, char **out,
                struct isc_err *err);

/* base64url without padding of in[0..n) into out (4*((n+2)/3)+1 bytes). Returns the length. */
size_t isc_gcp_b64url(const unsigned char *in, size_t n, char *out);

struct isc_gcp_token {
	char *access_token;    /* wiped on cleanup */
	int64_t expires_at_ms; /* as announced by the token endpoint */
};

void isc_gcp_token_cleanup(struct isc_gcp_token *t);

/*
 * The jwt-bearer exchange at k->token_uri: one POST (the HTTP layer retries
 * 5xx and 429). A refused assertion (invalid_grant, 400/401/403) is ISC_EAUTH.
 */
int isc_gcp_token_fetch(struct isc_http_client *http, const struct isc_gcp_key *k,
                        struct isc_gcp_token *out, struct isc_err *err);

/*
 * The process's token cache: the broker opens a session per cloud call, and a
 * bearer token is good for an hour, so sessions of the same key share it
 * instead of exchanging a JWT for every call. Keyed by a SHA-256 of the key
 * (token_uri, client_email, private_key_id and the PEM itself), so another key
 * never sees it; thread-safe; tokens are wiped when replaced or forgotten.
 */
/* Copies a cached token still good at now_ms (outside the renewal margin) into out: 1, else 0. */
int isc_gcp_token_cached(const struct isc_gcp_key *k, int64_t now_ms, struct isc_gcp_token *out);
void isc_gcp_token_remember(const struct isc_gcp_key *k, const struct isc_gcp_token *t);
/* Drops the cached token of k if it is `token` (Compute refused it with a 401). */
void isc_gcp_token_forget(const struct isc_gcp_key *k, const char *token);
/* Empties the cache (tests). */
void isc_gcp_token_cache_clear(void);

/* ---- names the driver derives (gcp.c) ---- */

/*
 * The bulkInsert requestId for one zone: SHA-256 of token, NUL, zone, laid
 * out as an RFC 4122 version 4 UUID (so any validator takes it), never all
 * zeros. The same token and zone always give the same id.
 */
void isc_gcp_request_id(const char *token, const char *zone, char out[37]);

/* "isc:broker" -> "isc-broker": lower case, [a-z0-9_-] only, starts with a letter, <= 63. */
int isc_gcp_label_key(const char *tag, char out[64], struct isc_err *err);
/* 1 when v is a valid label value: [a-z0-9_-]{0,63}. */
int isc_gcp_label_value_ok(const char *v);

/* The instance name prefix for a cluster: "isc-" + its id made name-safe, <= 40 characters. */
void isc_gcp_name_prefix(const char *cluster_id, char out[41]);

/*
 * A catalog instance type as Compute Engine wants it: "a3-highgpu-8g" is the
 * machine type itself; "n1-standard-16+T4x2" is machine type n1-standard-16
 * with 2 x nvidia-tesla-t4 attached. accel is "" when none.
 */
int isc_gcp_machine(const char *instance_type, char machine[64], char accel[64], int *accel_count,
                    struct isc_err *err);

/* ---- Compute Engine JSON (gce.c) ---- */

/* The error envelope of a refused call: {"error": {code, message, errors[{reason}], status}}. */
struct isc_gce_error {
	long code;
	char reason[64]; /* errors[0].reason, e.g. quotaExceeded */
	char status[64]; /* e.g. PERMISSION_DENIED */
	char message[400];
};

/* 0 when body is an error envelope (fields filled), ISC_EINVALID otherwise. */
int isc_gce_parse_error(const char *body, size_t len, struct isc_gce_error *out);

/* The isc code of a refused call, by reason first (capacity on 503 is capacity, not 5xx). */
int isc_gce_classify(long http_status, const char *reason);

/* The isc code of an Operation's error code (ZONE_RESOURCE_POOL_EXHAUSTED -> capacity, ...). */
int isc_gce_classify_op(const char *code);

struct isc_gce_operation {
	char name[128];
	char status[16];         /* PENDING, RUNNING, DONE */
	char type[64];           /* operationType, e.g. bulkInsert, compute.instances.preempted */
	char zone[64];           /* last segment of zone */
	char target[128];        /* last segment of targetLink */
	char error_code[96];     /* error.errors[0].code, "" when none */
	char error_message[400]; /* error.errors[0].message */
	long http_error;         /* httpErrorStatusCode, 0 when none */
	int64_t insert_ms;       /* insertTime */
};

int isc_gce_parse_operation(const char *body, size_t len, struct isc_gce_operation *out,
                            struct isc_err *err);

/*
 * Operations of an operation list (zoneOperations.list: items[]) or an
 * aggregated list (items{"zones/Z": {operations[]}}), appended to *out
 * (realloc'd, owned by the caller: free; *n grows).
 */
int isc_gce_parse_operations(const char *body, size_t len, struct isc_gce_operation **out,
                             size_t *n, char **next_page, struct isc_err *err);

/*
 * Instances of a list (items[]) or an aggregated list (items{"zones/Z":
 * {instances[]}}), appended to *nodes (realloc'd; *n grows). The labels
 * isc-broker, isc-cluster, isc-experiment, isc-request fill the tag fields.
 * *next_page is the nextPageToken (owned) or NULL.
 */
int isc_gce_parse_instances(const char *body, size_t len, struct isc_node_info **nodes, size_t *n,
                            char **next_page, struct isc_err *err);

/* An instance as terminate needs it: where it is and which incarnation. */
struct isc_gce_ref {
	char name[64];
	char zone[64];
	char id[32]; /* the numeric instance id: a re-created name gets a new one */
};

/* The instances of a (plain or aggregated) list as refs, appended to *out as above. */
int isc_gce_parse_refs(const char *body, size_t len, struct isc_gce_ref **out, size_t *n,
                       char **next_page, struct isc_err *err);

/*
 * What an instances.get reply says of the instance (confirm_gone): 1 gone, 0 not (or
 * not known). Gone: HTTP 404 with Google's error document, reason notFound (a deleted
 * instance no longer exists: https://cloud.google.com/compute/docs/reference/rest/v1/instances/get
 * answers 404 for it, and instances.delete removes it:
 * https://cloud.google.com/compute/docs/reference/rest/v1/instances/delete), or HTTP 200
 * with status TERMINATED (it runs no more; describe maps it to terminated too). Any other
 * reply, a 404 without Google's document (a proxy, a wrong URL) included, is not proof.
 */
int isc_gce_get_gone(long http_status, const char *body, size_t len);

/* RFC 3339 ("2013-06-26T10:05:19.340-07:00", "...Z") to epoch ms; -1 when unreadable. */
int64_t isc_gce_time_ms(const char *s);

/* Token endpoint reply: access_token + expires_in, or an OAuth2 error. */
int isc_gcp_parse_token(const char *body, size_t len, int64_t now_ms, struct isc_gcp_token *out,
                        struct isc_err *err);

/* Whether a machine type's series takes a compact placement policy (A4X, A4, A3, A2, G4, G2). */
int isc_gcp_compact_machine(const char *machine);

/* The compact placement policy of a launch intent: "isc-compact-" + 16 hex of SHA-256(token). */
void isc_gcp_policy_name(const char *token, char out[64]);

/*
 * Forgets the clusters describe saw in each scope's listings (which tell a torn-down gang
 * whose nodes left the listing): tests, like isc_sweep_forget_all.
 */
void isc_gcp_seen_clusters_forget(void);

/*
 * The firewall scan of a gang's network (firewalls.list pages): which TCP ports the enabled
 * INGRESS allow rules of `network` (its name) open from a source range covering the
 * subnet [net/len] to every instance (no targetTags / targetServiceAccounts: the nodes
 * carry none), and the strongest enabled INGRESS deny of TCP from a range overlapping it.
 */
struct isc_gcp_fw_scan {
	char network[64];
	uint32_t net;
	int len;
	unsigned char ports[65536 / 8]; /* bit p: TCP port p is allowed */
	long allow_prio;                /* the weakest (highest) priority among those allows */
	char allow_name[64];            /* one allow rule that counts (for the log) */
	long deny_prio;                 /* -1: no deny of TCP from the subnet */
	char deny_name[64];
	char wide_name[64]; /* an allow that alone opens all TCP from the subnet to every node */
};

/*
 * The network tag (and firewall rule name) of one tenant of this broker on the platform's
 * account (issue 42): "isc-t-TENANT-XXXXXXXX", XXXXXXXX from SHA-256(broker_id); at most
 * 47 characters. ISC_EINVALID for a tenant that is not 1..32 of [a-z0-9-].
 */
int isc_gcp_tenant_tag(const char *broker_id, const char *tenant, char out[64],
                       struct isc_err *err);

/* Starts a scan of network NAME for subnet CIDR ("10.128.0.0/20"); ISC_EINVALID if unreadable. */
int isc_gcp_fw_scan_init(struct isc_gcp_fw_scan *sc, const char *network, const char *cidr,
                         struct isc_err *err);

/* Reads one firewalls.list page into the scan (*added: its items, *next_page: owned). */
int isc_gcp_fw_scan_page(struct isc_gcp_fw_scan *sc, const char *body, size_t len, char **next_page,
                         size_t *added, struct isc_err *err);

/* 1 when every TCP port is allowed and no deny of equal or stronger priority stands. */
int isc_gcp_fw_scan_ok(const struct isc_gcp_fw_scan *sc);

#endif
