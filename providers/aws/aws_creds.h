/*
 * AWS credentials, region and endpoints, resolved the way the AWS SDKs and CLI
 * do, so an operator's existing setup works unchanged:
 *   credentials: explicit (bring-your-own) > settings `profile` in the shared
 *     file > AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN] >
 *     AWS_PROFILE (else "default") in the shared file, which is settings
 *     `credentials_file` > AWS_SHARED_CREDENTIALS_FILE > ~/.aws/credentials
 *   region: the argument > AWS_REGION > AWS_DEFAULT_REGION
 *   endpoint: settings endpoint_<svc> > AWS_ENDPOINT_URL_<SVC> > AWS_ENDPOINT_URL
 *     > settings `endpoint` > https://<svc>.<region>.amazonaws.com
 */
#ifndef ISC_PROVIDERS_AWS_CREDS_H
#define ISC_PROVIDERS_AWS_CREDS_H

#include "common/err.h"
#include "providers/provider.h"

struct isc_aws_creds {
	char *access_key_id;     /* owned */
	char *secret_access_key; /* owned, wiped on cleanup */
	char *session_token;     /* owned, wiped on cleanup; NULL for long-term keys */
	char source[128]; /* where they came from, for messages: "environment", "profile default in
	                     F" */
};

/*
 * An organisation's own AWS key (or a dataset's), offline: access_key_id (letters,
 * digits and '_', at most 128, as IAM's AccessKey type) and secret_access_key
 * present, session_token optional; every value printable ASCII without spaces,
 * since the key id and the token become HTTP headers (Authorization,
 * X-Amz-Security-Token) and a CR or LF there would add headers of the caller's
 * choosing (libcurl sends a header line as given). ISC_EINVALID naming the field.
 */
int isc_aws_credentials_valid(const struct isc_kv *kv, size_t n, struct isc_err *err);

/* The fields of an AWS key, NULL-terminated. */
extern const char *const isc_aws_credential_keys[];

int isc_aws_creds_resolve(const struct isc_provider_settings *settings, struct isc_aws_creds *out,
                          struct isc_err *err);
void isc_aws_creds_cleanup(struct isc_aws_creds *c);

/* The region to use, into out; ISC_EINVALID when none is configured. */
int isc_aws_region_resolve(const char *arg, char *out, size_t cap, struct isc_err *err);

/* The endpoint URL for service "ec2" or "sts" (no trailing slash); owned by the caller. */
char *isc_aws_endpoint_resolve(const struct isc_provider_settings *settings, const char *service,
                               const char *region);

#endif
