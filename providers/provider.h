/*
 * The provider interface: one const table of function pointers per cloud
 * (providers/aws, providers/gcp, providers/oci), found by name through the
 * registry, the way curl's vtls backends are. The broker only ever calls
 * through a table; nothing outside providers/<cloud>/ knows which cloud it is
 * talking to.
 *
 * Every slot returns 0 or a negative isc_code and fills err. The codes are the
 * broker's decision points, and each driver maps its cloud's errors into them:
 *   ISC_ECAPACITY  no capacity for the shape (launch_gang already tried every zone)
 *   ISC_EQUOTA     an account limit; try another shape or cloud
 *   ISC_ETHROTTLED / ISC_ETRANSIENT  the HTTP layer's retries ran out; retry later
 *   ISC_EAUTH      credentials or signature refused; never retried
 *   ISC_ECONFLICT  an idempotency token reused with different parameters
 *   ISC_EINVALID   anything else the cloud refused, or a reply we cannot read
 * One exception to the last line: when a call that creates nodes was accepted
 * (2xx) but its reply cannot be read, the nodes may exist, so the answer is
 * ISC_ETRANSIENT (outcome unknown: the caller keeps its intent and asks again
 * with the same token), never ISC_EINVALID.
 * Messages name the cloud's action, its error code and its message; they never
 * contain a secret.
 *
 * Returned arrays are owned by the caller and freed with the isc_*_free
 * functions below (the structs hold fixed-size fields so one free is enough).
 */
#ifndef ISC_PROVIDERS_PROVIDER_H
#define ISC_PROVIDERS_PROVIDER_H

#include "common/clock.h"
#include "common/err.h"
#include "net/http.h"

#include <stddef.h>
#include <stdint.h>

/* A borrowed key/value pair: settings, tags, credential fields. */
struct isc_kv {
	const char *key;
	const char *value;
};

/*
 * What a session is made from. `items` are the [providers.NAME] keys of
 * config.toml (and the equivalents the CLI collects), e.g. for AWS: endpoint,
 * endpoint_ec2, endpoint_sts, image_id, subnet_id, security_group_id,
 * placement_group, associate_public_ip, profile, credentials_file.
 *
 * `credentials` are an organisation's own keys (bring-your-own), in memory;
 * when n_credentials is 0 the driver uses its ecosystem's usual chain
 * (environment, shared files). Field names per cloud:
 *   aws: access_key_id, secret_access_key, session_token (optional)
 *   gcp: service_account_json (the whole key file)
 *   oci: tenancy, user, fingerprint, private_key_pem, pass_phrase (optional)
 * The driver copies what it needs, wipes its copies on session_free, and never
 * puts a secret into a message. All pointers are borrowed for the call only.
 */
struct isc_provider_settings {
	const struct isc_kv *items;
	size_t n_items;
	const struct isc_kv *credentials;
	size_t n_credentials;
	/*
	 * 1: `credentials` are an organisation's own key (bring-your-own), even when
	 * empty or incomplete. The driver then uses them and nothing else: never a
	 * setting (credentials_file, profile, config_file), variable or file of its
	 * ecosystem's chain, which hold the platform's own account (issue 42). A key
	 * that lacks a field fails with ISC_EAUTH naming it. n_credentials > 0 implies
	 * it whatever this says.
	 */
	int byo;
};

/* True when settings carry an organisation's own key (see byo above). */
int isc_provider_settings_byo(const struct isc_provider_settings *settings);

/* The value of `key` in settings->items, or NULL. Borrowed. */
const char *isc_provider_setting(const struct isc_provider_settings *settings, const char *key);

/* A copy of setting `key`, or of dflt when it is unset or empty; NULL if both are absent. */
char *isc_provider_setting_dup(const struct isc_provider_settings *settings, const char *key,
                               const char *dflt);

/*
 * One account in one region, with its HTTP client and clock. Made by
 * session_new, freed by session_free of the same table. `impl` is the
 * driver's own state.
 */
struct isc_provider_session {
	const struct isc_provider *provider; /* the table that made it */
	char region[64]; /* resolved region (AWS/OCI) or default zone group (GCP) */
	void *impl;      /* driver private */
};

/* Who the credentials belong to. */
struct isc_identity {
	char account[128];   /* AWS account id, GCP project id, OCI tenancy OCID (~90 chars) */
	char principal[512]; /* AWS ARN, GCP service-account email, OCI user OCID */
	char user_id[256];   /* AWS UserId; empty where the cloud has none */
};

/* The current spot price of one instance type in one zone. */
struct isc_price_point {
	char instance_type[64];
	char zone[64];
	int64_t price_micros_per_hour; /* USD micro-dollars per node-hour, exact */
	int64_t at_ms;                 /* when the cloud set this price */
};

enum isc_node_state {
	ISC_NODE_PENDING,
	ISC_NODE_RUNNING,
	ISC_NODE_SHUTTING_DOWN,
	ISC_NODE_TERMINATED,
	ISC_NODE_STOPPING,
	ISC_NODE_STOPPED,
};

/* "pending", "running", "shutting-down", "terminated", "stopping", "stopped". */
const char *isc_node_state_name(enum isc_node_state s);

/* Tag keys every node carries, so reconciliation finds it without the store. */
#define ISC_TAG_BROKER     "isc:broker"
#define ISC_TAG_CLUSTER    "isc:cluster"
#define ISC_TAG_EXPERIMENT "isc:experiment"

/* One cloud instance as the cloud reports it. Empty strings for absent fields. */
struct isc_node_info {
	char id[256]; /* EC2 i-..., GCE instance name, OCI instance OCID */
	enum isc_node_state state;
	char private_ip[46];
	char public_ip[46];
	char zone[64]; /* AZ / zone / availability domain */
	char instance_type[64];
	int spot;                   /* 1 for spot/preemptible capacity */
	int64_t launched_at_ms;     /* the cloud's launch time; 0 if unknown */
	char broker_id[256];        /* tag isc:broker */
	char cluster_id[256];       /* tag isc:cluster */
	char experiment_id[256];    /* tag isc:experiment */
	char client_token[80];      /* the idempotency token the node was created with */
	int interruption_noticed;   /* the cloud announced it will reclaim this spot node */
	int64_t interruption_at_ms; /* when the notice was issued (AWS: ~2 min before reclaim) */
};

/*
 * A gang launch: `count` nodes of one shape in one zone, all or nothing.
 * Everything is borrowed for the duration of the call.
 */
struct isc_launch_spec {
	const char *instance_type;
	int spot;
	const char *const *zones; /* ordered; tried in turn on capacity errors */
	size_t n_zones;
	unsigned count; /* N >= 1 */
	/*
	 * From the broker's stored intent, <= 64 printable ASCII. The same token
	 * after a crash must not create a second gang: drivers derive per-zone
	 * (and per-node) tokens from it deterministically.
	 */
	const char *idempotency_token;
	const struct isc_kv *tags; /* isc:broker, isc:cluster, isc:experiment (+ any) */
	size_t n_tags;
	const char *ssh_public_key; /* OpenSSH one-line public key for the cluster */
	const char *user_data;      /* extra cloud-config body (YAML, no header), or NULL */
	/*
	 * Called (when set) just before the first call that may create nodes in a
	 * zone, with that zone ("" when the cloud picks). The caller records it
	 * durably: after a crash or a lost reply, the outcome of that zone's call
	 * is the unknown one, and a replay must ask there first, with the same
	 * token, before any other zone can be tried.
	 */
	void (*before_zone)(void *ctx, const char *zone);
	void *before_zone_ctx;
	/*
	 * NULL for a new gang. Otherwise these nodes replace lost members of a gang
	 * launched earlier with this token (its idempotency_token): they join that gang's
	 * placement in the zone (the cluster placement group, compact placement policy or
	 * compute cluster the driver made for it, which its live members keep), and a
	 * count of 1 is placed as a member of a gang, not as a lone node. Where the cloud
	 * lets nothing join (a GCP compact policy made with vmCount), they go to the zone.
	 */
	const char *placement_token;
	/* With placement_token: the zone that gang's launch asked for ("" when the cloud
	 * picked), which names its placement as the token does. */
	const char *placement_zone;
	/*
	 * The tenant the nodes belong to, when several share this account (the platform's
	 * account), as a plain name of 1..32 characters [a-z0-9-] (the broker passes its
	 * organisation id); NULL on an account of the tenant's own (BYO keys), where the
	 * operator's network setup stands. With a tenant the driver puts the nodes in that
	 * tenant's own network group (AWS security group, GCP network tag + firewall rule,
	 * OCI network security group) that admits traffic only from its own members (and
	 * SSH), made on demand and swept when no live instance uses it: tenants on one
	 * account cannot reach each other's nodes (docs/security.md, issue 42).
	 */
	const char *tenant;
};

struct isc_launch_result {
	char zone[64];               /* the zone the gang came up in */
	char token[80];              /* the per-zone token the cloud saw */
	struct isc_node_info *nodes; /* owned; exactly spec->count of them */
	size_t n_nodes;
};

/*
 * Fills what a launched node's reply may leave empty from its spec: the
 * isc:broker/cluster/experiment tags, the token the cloud saw, the spot flag.
 */
void isc_node_info_from_spec(struct isc_node_info *ni, const struct isc_launch_spec *spec,
                             const char *token);

void isc_launch_result_cleanup(struct isc_launch_result *r);

/* 1 for a tenant name a launch may carry: 1..32 of [a-z0-9-] (isc_launch_spec.tenant). */
int isc_tenant_name_ok(const char *tenant);
void isc_node_infos_free(struct isc_node_info *nodes, size_t n);
void isc_price_points_free(struct isc_price_point *prices, size_t n);

/* A capacity question (isc_provider.capacity). */
struct isc_capacity_query {
	const char *const *instance_types;
	size_t n;
	int target;               /* the gang's nodes */
	const char *const *zones; /* OCI: the ADs to ask about (as the catalog spells them) */
	size_t n_zones;
};

/* One answer; sources and values as store/store_risk.h describes them. */
struct isc_capacity_fact {
	char source[32];
	char instance_type[64];
	char zone[96];   /* "" for the region */
	char market[12]; /* "spot", "ondemand", "" for both */
	int target;
	int64_t value, value2;
	char detail[48];
};

struct isc_provider {
	/* "aws", "gcp", "oci": the name used in config.toml, shapes and the store. */
	const char *name;

	/*
	 * Every key of [providers.NAME] this driver (or a caller reading its settings,
	 * such as datasets/ for aws) reads, NULL-terminated, besides the keys config/
	 * reads itself (regions, ssh_user, ssh_port). config.toml refuses any other key
	 * of the section, with a did-you-mean from this list.
	 */
	const char *const *setting_keys;

	/*
	 * Resolves credentials, region and endpoints (settings first, then the
	 * ecosystem's variables and files) without any network call. `region` may
	 * be NULL (then the ecosystem's default). `t` and `clock` are borrowed and
	 * must outlive the session; NULL means the real ones.
	 * Fails with ISC_EAUTH when no credentials can be found, ISC_EINVALID on
	 * bad settings.
	 */
	int (*session_new)(const struct isc_provider_settings *settings, const char *region,
	                   const struct isc_http_transport *t, const struct isc_clock *clock,
	                   struct isc_provider_session **out, struct isc_err *err);

	/* Frees the session and wipes any secret it held. NULL is a no-op. */
	void (*session_free)(struct isc_provider_session *s);

	/*
	 * One signed, side-effect-free call proving the credentials work
	 * (AWS sts:GetCallerIdentity; GCP token exchange + projects.get; OCI
	 * GetUser). ISC_EAUTH when the cloud refuses them.
	 */
	int (*check_credentials)(struct isc_provider_session *s, struct isc_identity *out,
	                         struct isc_err *err);

	/*
	 * The fields an organisation's own key may have (the names above
	 * isc_provider_settings), NULL-terminated: keys/ refuses any other at
	 * registration.
	 */
	const char *const *credential_keys;

	/*
	 * An organisation's own key checked offline, field by field: every field the
	 * driver needs is present and well formed (a private key parses; no control
	 * character in a value that becomes part of an HTTP header). ISC_EINVALID
	 * naming the field, never its value. keys/ calls it before a key is verified
	 * with the cloud; session_new applies the same rules to every BYO key it is
	 * given (then as ISC_EAUTH), so a key stored before the rules is refused at use.
	 */
	int (*credentials_valid)(const struct isc_kv *kv, size_t n, struct isc_err *err);

	/*
	 * The current spot price of each of `instance_types` in every zone of the
	 * region where it is offered: one point per (type, zone), the newest.
	 * *out is owned by the caller (isc_price_points_free). NULL for a cloud
	 * without a spot market (OCI): its prices are fixed list prices.
	 */
	int (*refresh_prices)(struct isc_provider_session *s, const char *const *instance_types,
	                      size_t n, struct isc_price_point **out, size_t *n_out,
	                      struct isc_err *err);

	/*
	 * The on-demand list price of each of `instance_types` in the session's
	 * region: one point per type the cloud prices (zone ""; at_ms when read).
	 * A type the price list does not know is left out. *out is owned by the
	 * caller. NULL for a cloud whose list prices come another way (prices/lists.h
	 * reads GCP's and OCI's price lists whole).
	 */
	int (*ondemand_prices)(struct isc_provider_session *s, const char *const *instance_types,
	                       size_t n, struct isc_price_point **out, size_t *n_out,
	                       struct isc_err *err);

	/*
	 * Launches spec->count nodes in the first zone of spec->zones that has
	 * capacity, all or nothing, tagged with spec->tags, reachable with
	 * spec->ssh_public_key. Repeating the call with the same spec and token
	 * returns the same nodes instead of creating more. If the cloud delivers
	 * fewer than count nodes in a zone, the driver terminates them and goes on
	 * to the next zone. Returns ISC_ECAPACITY when no zone could take the
	 * gang, ISC_EQUOTA on account limits. On success out->nodes has exactly
	 * count entries (states usually pending).
	 */
	int (*launch_gang)(struct isc_provider_session *s, const struct isc_launch_spec *spec,
	                   struct isc_launch_result *out, struct isc_err *err);

	/*
	 * Every instance tagged isc:broker=broker_id in this account and region,
	 * terminated ones included while the cloud still lists them, in as few
	 * calls as the cloud allows (never one per node). Fills spot interruption
	 * notices. *out is owned by the caller (isc_node_infos_free); *n may be 0.
	 */
	int (*describe)(struct isc_provider_session *s, const char *broker_id,
	                struct isc_node_info **out, size_t *n, struct isc_err *err);

	/*
	 * Terminates the instances `ids` (batched as the cloud requires).
	 * Idempotent: already terminated or unknown ids are not errors and never
	 * keep the others from being terminated.
	 */
	int (*terminate)(struct isc_provider_session *s, const char *const *ids, size_t n,
	                 struct isc_err *err);

	/*
	 * Whether the cloud still has each instance ids[i] (in zones[i]), asked of the
	 * instance itself, not of a listing: a direct read is strongly consistent where a
	 * listing may lag (docs/broker.md, "Listing lag"). gone[i] = 1 only when the cloud
	 * says the instance no longer exists or has ended; 0 when it exists, and for every id
	 * not answered (an error stops the calls: err says why, and the caller goes on with
	 * the absence rule). NULL for a cloud whose listings keep terminated instances for a
	 * while (EC2, OCI): there a node of ours missing from a listing is rare.
	 */
	int (*confirm_gone)(struct isc_provider_session *s, const char *const *ids,
	                    const char *const *zones, size_t n, int *gone, struct isc_err *err);

	/*
	 * What the cloud says about getting and keeping q->target nodes of q's instance
	 * types in this session's region (issue 43): AWS the Spot Advisor's bands and
	 * GetSpotPlacementScores (region, and per zone); OCI CreateComputeCapacityReport per
	 * AD of q->zones. A source that fails is left out and named in err only when every
	 * source failed. *out is owned by the caller (free). NULL: the cloud offers none.
	 */
	int (*capacity)(struct isc_provider_session *s, const struct isc_capacity_query *q,
	                struct isc_capacity_fact **out, size_t *n, struct isc_err *err);
};

/* The driver called `name`, or NULL when there is none (yet). Borrowed, static. */
const struct isc_provider *isc_provider_find(const char *name);

/* The drivers compiled in, NULL-terminated. Borrowed, static. */
const struct isc_provider *const *isc_provider_list(void);

#endif
