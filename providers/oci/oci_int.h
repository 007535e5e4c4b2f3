/*
 * Internals of the OCI driver that unit tests check directly: the wire
 * (request bodies, reply parsing, error classification, paging headers), the
 * per-node retry token and the training-network rule check.
 */
#ifndef ISC_PROVIDERS_OCI_OCI_INT_H
#define ISC_PROVIDERS_OCI_OCI_INT_H

#include "common/err.h"
#include "providers/provider.h"

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

/* The torchrun rendezvous port the training network must allow between nodes. */
#define ISC_OCI_RDZV_PORT 29400

/* What OCI said in an error body ({"code": ..., "message": ...}). */
struct isc_oci_error {
	char code[128];
	char message[400];
};

/* Reads an OCI error body; ISC_EINVALID when it is not one. */
int isc_oci_parse_error(const char *body, size_t len, struct isc_oci_error *out);

/*
 * The isc code of an OCI reply: "Out of host capacity" (500 InternalError, by
 * message) -> capacity; LimitExceeded/QuotaExceeded -> quota; 429 ->
 * throttled; 409 IncorrectState and other 5xx -> transient; 401 -> auth;
 * 404 -> not_found; 409 InvalidatedRetryToken / other 409 -> conflict; else
 * invalid. code and message may be NULL.
 */
int isc_oci_classify(long status, const char *code, const char *message);

/*
 * The opc-retry-token of node `index` in availability domain `ad`, derived
 * from the broker's token: "<token>-<ad suffix>-<index>" when it fits in 64
 * characters (ad suffix = the part after ':' lower-cased), else a 40
 * character prefix of the token, 16 hex of SHA-256(token, ad, index) and
 * the index.
 */
int isc_oci_retry_token(const char *token, const char *ad, unsigned index, char out[65],
                        struct isc_err *err);

/* The value of header `name` (case-insensitive) in raw header lines, into out; 0 if found. */
int isc_oci_header(const char *raw, const char *name, char *out, size_t cap);

/* OCI lifecycleState -> node state (PROVISIONING -> pending, TERMINATING -> shutting-down...). */
enum isc_node_state isc_oci_node_state(const char *lifecycle);

/* RFC 3339 "2016-08-25T21:10:29.600Z" -> ms since the epoch; 0 if unreadable. */
int64_t isc_oci_parse_time(const char *s);

/*
 * Fills ni from one Instance object (id, state, zone = availabilityDomain,
 * shape, spot = preemptibleInstanceConfig present, launch time, freeform tags
 * isc:broker/isc:cluster/isc:experiment/isc:token). IPs are left alone.
 */
int isc_oci_parse_instance(const json_t *inst, struct isc_node_info *ni);

struct isc_oci_launch {
	const char *ad;
	const char *compartment_id;
	const char *shape;
	const char *image_id;
	const char *subnet_id;
	const char *display_name;
	const char *ssh_public_key;
	const char *user_data;          /* extra cloud-config body or NULL */
	const char *compute_cluster_id; /* the gang's compute cluster (RDMA shapes) or NULL */
	const char *nsg_id;             /* the tenant's network security group or NULL */
	const char *retry_token;        /* also tagged isc:token */
	long boot_volume_gb;            /* sourceDetails.bootVolumeSizeInGBs; 0: the image's */
	int preemptible;
	int assign_public_ip;
	const struct isc_kv *tags;
	size_t n_tags;
};

/* The LaunchInstanceDetails JSON; *out is owned by the caller. */
int isc_oci_launch_body(const struct isc_oci_launch *l, char **out, struct isc_err *err);

/*
 * Whether the ingress rules of a security list let every node of subnet
 * `cidr` reach every other on all TCP ports (covers 29400 and NCCL's ports):
 * a rule with protocol "all" or "6", a CIDR source containing `cidr`, and no
 * TCP destination port range or one covering 1-65535. 1 yes, 0 no, <0 on a
 * reply we cannot read.
 */
int isc_oci_rules_allow_training(const json_t *ingress_rules, const char *cidr);

/* IPv4 "a.b.c.d/n" -> network and prefix length; 0 on success. */
int isc_oci_parse_cidr(const char *s, uint32_t *net, int *bits);

/*
 * The network security group of one tenant of this broker on the platform's account
 * (issue 42): "isc-tenant-BROKER-TENANT", its display name. ISC_EINVALID for a tenant
 * that is not 1..32 of [a-z0-9-].
 */
int isc_oci_tenant_nsg_name(const char *broker_id, const char *tenant, char out[256],
                            struct isc_err *err);

/* Whether `shape` can join a compute cluster (the RDMA bare-metal shapes OCI lists). */
int isc_oci_rdma_shape(const char *shape);

#endif
