/*
 * The EC2 (and STS) Query API on the wire: form-encoded request bodies and
 * the XML replies, parsed with libxml2 by local element name so any API
 * namespace version reads the same. No network here; aws.c sends.
 */
#ifndef ISC_PROVIDERS_AWS_EC2_H
#define ISC_PROVIDERS_AWS_EC2_H

#include "common/buf.h"
#include "common/err.h"
#include "providers/provider.h"

#include <stdarg.h>
#include <stdint.h>

#define ISC_EC2_VERSION "2016-11-15"
#define ISC_STS_VERSION "2011-06-15"
/* Bigger replies than this are refused before parsing (a DescribeInstances page is far smaller). */
#define ISC_EC2_MAX_XML (8u * 1024 * 1024)

/* ---- requests ---- */

/* Starts a body "Action=A&Version=V". */
int isc_ec2_form_init(struct isc_buf *b, const char *action, const char *version);
/* Appends "&key=value", both RFC 3986 encoded. */
int isc_ec2_form_add(struct isc_buf *b, const char *key, const char *value);
/* Same with a printf-formatted key ("TagSpecification.%d.Tag.%zu.Key"). */
int isc_ec2_form_addf(struct isc_buf *b, const char *value, const char *key_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- replies ---- */

struct isc_ec2_error {
	char code[128];
	char message[400];
	char request_id[128];
};

/* 0 when the body is an EC2 or STS error document (first <Error>), else ISC_ENOTFOUND. */
int isc_ec2_parse_error(const char *xml, size_t len, struct isc_ec2_error *out);

/*
 * The same, with every secret (NULL entries and ones shorter than 4 skipped)
 * taken out of the code, message and request id before they are cut to size:
 * a whole occurrence becomes "***", and so does any run of 12 or more
 * characters of a secret that is left (an endpoint that echoes a token in part).
 */
int isc_ec2_parse_error_scrubbed(const char *xml, size_t len, const char *const *secrets,
                                 size_t n_secrets, struct isc_ec2_error *out);

/*
 * What an error code means to the broker (see docs/providers.md): capacity,
 * quota, throttled, transient, auth, conflict, not_found, else invalid. An
 * unknown code on an HTTP 5xx is transient.
 */
int isc_ec2_classify_code(const char *code, long http_status);

/*
 * RunInstancesResponse (instancesSet) or DescribeInstancesResponse
 * (reservationSet/item/instancesSet). *next_token (may be NULL) gets the
 * paging token or NULL; owned by the caller.
 */
int isc_ec2_parse_instances(const char *xml, size_t len, struct isc_node_info **out, size_t *n,
                            char **next_token, struct isc_err *err);

struct isc_ec2_state_change {
	char instance_id[64];
	enum isc_node_state current;
	enum isc_node_state previous;
};

/* TerminateInstancesResponse (also Start/StopInstances). */
int isc_ec2_parse_state_changes(const char *xml, size_t len, struct isc_ec2_state_change **out,
                                size_t *n, struct isc_err *err);

struct isc_ec2_spot_request {
	char id[64];
	char instance_id[64];
	char state[32];           /* open, active, closed, cancelled, failed */
	char status_code[64];     /* fulfilled, marked-for-termination, ... */
	int64_t status_update_ms; /* 0 if absent or unreadable */
	char zone[64];            /* launchedAvailabilityZone */
};

int isc_ec2_parse_spot_requests(const char *xml, size_t len, struct isc_ec2_spot_request **out,
                                size_t *n, char **next_token, struct isc_err *err);

struct isc_ec2_spot_price {
	char instance_type[64];
	char product[64];
	char zone[64];
	int64_t price_micros; /* per hour */
	int64_t at_ms;
};

int isc_ec2_parse_spot_prices(const char *xml, size_t len, struct isc_ec2_spot_price **out,
                              size_t *n, char **next_token, struct isc_err *err);

/*
 * One item of GetSpotPlacementScoresResponse (spotPlacementScoreSet): a Region's score,
 * or with SingleAvailabilityZone=true a zone's (its AZ id, "use1-az1", and its Region).
 */
struct isc_ec2_placement_score {
	char region[64];
	char zone_id[64]; /* "" for a Region score */
	int score;        /* 1..10 */
};

int isc_ec2_parse_placement_scores(const char *xml, size_t len,
                                   struct isc_ec2_placement_score **out, size_t *n,
                                   char **next_token, struct isc_err *err);

/* One placement group of DescribePlacementGroupsResponse (placementGroupSet). */
struct isc_ec2_placement_group {
	char name[256];
	char state[32];    /* pending, available, deleting, deleted */
	char strategy[32]; /* cluster, spread, partition */
};

int isc_ec2_parse_placement_groups(const char *xml, size_t len,
                                   struct isc_ec2_placement_group **out, size_t *n,
                                   struct isc_err *err);

/* Per instance of a RunInstances/DescribeInstances reply: its placement and fabric. */
struct isc_ec2_instance_placement {
	char id[64];
	enum isc_node_state state;
	char group[256]; /* placement/groupName, "" when none */
	int n_efa;       /* networkInterfaceSet items of interfaceType efa or efa-only */
	/* groupSet: the security groups of its primary interface (EC2 allows 5 per
	 * interface; more are ignored here) */
	char sg[5][32];
	int n_sg;
};

/* One security group of DescribeSecurityGroupsResponse (securityGroupInfo). */
struct isc_ec2_security_group {
	char id[32];
	char name[256];
};

int isc_ec2_parse_security_groups(const char *xml, size_t len, struct isc_ec2_security_group **out,
                                  size_t *n, struct isc_err *err);

/*
 * The text of the element at `p` ("a/b/c", the first match at each step) under the
 * reply's root: CreateSecurityGroup's groupId, DescribeSubnets' subnetSet/item/vpcId.
 * ISC_EINVALID when absent, empty or longer than cap - 1.
 */
int isc_ec2_parse_text(const char *xml, size_t len, const char *p, char *out, size_t cap,
                       struct isc_err *err);

int isc_ec2_parse_instance_placements(const char *xml, size_t len,
                                      struct isc_ec2_instance_placement **out, size_t *n,
                                      struct isc_err *err);

/* What DescribeInstanceTypes says of one type's network (networkInfo). */
struct isc_ec2_efa_info {
	int supported; /* efaSupported */
	int max_efa;   /* efaInfo/maximumEfaInterfaces; 0 without EFA */
	int max_cards; /* maximumNetworkCards (>= 1) */
};

/* The entry of instance_type in a DescribeInstanceTypesResponse; ISC_EINVALID when absent. */
int isc_ec2_parse_efa_info(const char *xml, size_t len, const char *instance_type,
                           struct isc_ec2_efa_info *out, struct isc_err *err);

/*
 * Whether security group sg (in a DescribeSecurityGroupsResponse) allows what EFA needs:
 * *in_ok = an inbound rule for all traffic (protocol -1) from sg itself; *out_ok = an
 * outbound rule for all traffic to sg itself or to 0.0.0.0/0.
 */
int isc_ec2_parse_sg_self_rules(const char *xml, size_t len, const char *sg, int *in_ok,
                                int *out_ok, struct isc_err *err);

/*
 * Whether security group sg allows the TCP a gang without EFA needs among its nodes:
 * *in_ok = an inbound rule for all TCP (tcp 0-65535, or -1) from sg itself or from a CIDR
 * covering subnet_cidr (NULL: unknown, so only 0.0.0.0/0 covers it); *out_ok the same
 * outbound.
 */
int isc_ec2_parse_sg_tcp_rules(const char *xml, size_t len, const char *sg, const char *subnet_cidr,
                               int *in_ok, int *out_ok, struct isc_err *err);

/* The availabilityZone and cidrBlock of subnet_id in a DescribeSubnetsResponse (subnetSet). */
int isc_ec2_parse_subnet(const char *xml, size_t len, const char *subnet_id, char zone[64],
                         char cidr[64], struct isc_err *err);

/* The rootDeviceName of image_id in a DescribeImagesResponse (imagesSet). */
int isc_ec2_parse_root_device(const char *xml, size_t len, const char *image_id, char out[64],
                              struct isc_err *err);

/* GetCallerIdentityResponse. */
int isc_sts_parse_identity(const char *xml, size_t len, struct isc_identity *out,
                           struct isc_err *err);

/* "0.106000" USD -> 106000 micros, exactly; digits past the sixth round up. */
int isc_aws_price_micros(const char *decimal, int64_t *out);
/* "2015-12-22T10:44:05.000Z" -> ms since the epoch. */
int isc_aws_parse_time_ms(const char *iso, int64_t *out);

#endif
