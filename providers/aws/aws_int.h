/*
 * Internals of the AWS driver that unit tests check directly: the SigV4
 * intermediate steps, the per-zone idempotency token and the user data.
 */
#ifndef ISC_PROVIDERS_AWS_AWS_INT_H
#define ISC_PROVIDERS_AWS_AWS_INT_H

#include "common/buf.h"
#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

/* ---- SigV4 steps (sigv4.c) ---- */

/* Lower-case hex of bin[0..n) into out (2n+1 bytes). */
void isc_sigv4_hex(const unsigned char *bin, size_t n, char *out);
void isc_sigv4_sha256_hex(const void *data, size_t len, char out[65]);
/* The canonical URI of a raw path; normalize removes dot segments and repeated slashes. */
int isc_sigv4_canonical_uri(struct isc_buf *out, const char *path, size_t len, int normalize);
/* The canonical query string of a raw query (without '?'). */
int isc_sigv4_canonical_query(struct isc_buf *out, const char *query);
/* kSigning = HMAC chain over "AWS4"+secret, date, region, service, "aws4_request". */
void isc_sigv4_signing_key(const char *secret, const char *date8, const char *region,
                           const char *service, unsigned char key[32]);
/* ISO 8601 basic "YYYYMMDDTHHMMSSZ". */
int isc_sigv4_format_date(int64_t time_ms, char out[17]);

/* ---- the driver (aws.c) ---- */

/* The largest raw user data EC2 accepts (before base64). */
#define ISC_AWS_USER_DATA_MAX 16384

/*
 * The ClientToken for one zone, derived from the broker's token: a different
 * zone is a different request, and EC2 refuses a token reused with other
 * parameters. "<token>-<zone>" when it fits in 64 characters, else a prefix of
 * the token, a hash of token and zone, and the zone's last letter.
 */
int isc_aws_zone_token(const char *token, const char *zone, char out[65], struct isc_err *err);

/*
 * The base64 UserData: a cloud-config that authorises ssh_key, followed by the
 * caller's extra cloud-config body. Fails with ISC_EINVALID over 16 KB raw or
 * for a key that is not one OpenSSH line. *out is owned by the caller.
 */
int isc_aws_user_data(const char *ssh_key, const char *extra, char **out, struct isc_err *err);

/* A placement group name: "isc-" + the zone token, at most 68 characters (EC2: 255). */
#define ISC_AWS_GROUP_NAME_MAX 80

/*
 * The cluster placement group of one gang in one zone, named after its zone token, so a
 * replay of the launch finds the same group and another gang or zone never shares it.
 */
int isc_aws_group_name(const char *zone_token, char out[ISC_AWS_GROUP_NAME_MAX]);

/* A tenant's security group name: "isc-tenant-BROKER-TENANT" (EC2: 255). */
#define ISC_AWS_TENANT_GROUP_MAX 256

/*
 * The security group of one tenant of this broker on the platform's account (issue 42),
 * found again by this name; ISC_EINVALID for a tenant that is not 1..32 of [a-z0-9-].
 */
int isc_aws_tenant_group_name(const char *broker_id, const char *tenant,
                              char out[ISC_AWS_TENANT_GROUP_MAX], struct isc_err *err);

#endif
