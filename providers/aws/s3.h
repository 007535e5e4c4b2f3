/*
 * A small S3 client on the project's SigV4 signer, for reading datasets:
 * HeadObject, ranged GetObject, ListObjectsV2 (one page at a time) and
 * presigned GET URLs. It knows nothing of the broker: a bucket, a key, an
 * optional version id, bytes.
 *
 * Addressing: virtual-hosted ("https://BUCKET.s3.REGION.amazonaws.com/KEY")
 * or path-style ("https://ENDPOINT/BUCKET/KEY"). Auto picks virtual-hosted on
 * AWS endpoints for DNS-compatible bucket names without dots, path-style
 * everywhere else (MinIO, the S3 APIs of OCI and GCS, the mock), as the SDKs'
 * "force_path_style" users expect. Every signed request carries
 * x-amz-content-sha256: the empty-payload hash for GET/HEAD (S3 requires the
 * header); presigned URLs sign UNSIGNED-PAYLOAD, as S3 specifies.
 */
#ifndef ISC_PROVIDERS_AWS_S3_H
#define ISC_PROVIDERS_AWS_S3_H

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "net/http.h"

#include <stddef.h>
#include <stdint.h>

enum isc_s3_addressing {
	ISC_S3_ADDRESSING_AUTO = 0,
	ISC_S3_ADDRESSING_PATH,
	ISC_S3_ADDRESSING_VIRTUAL,
};

struct isc_s3_config {
	const char
	    *endpoint; /* "https://host[:port]" (no path); NULL: https://s3.REGION.amazonaws.com */
	const char *region; /* signing region */
	enum isc_s3_addressing addressing;
	int allow_insecure; /* plain http to a host that is not loopback */
	const char *access_key_id;
	const char *secret_access_key; /* copied and wiped on free */
	const char *session_token;     /* NULL for long-term keys */
};

struct isc_s3_client;

/*
 * The endpoint for S3: configured > AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL >
 * https://s3.<region>.amazonaws.com; no trailing slash. Caller frees.
 */
char *isc_s3_endpoint_resolve(const char *configured, const char *region);

/*
 * Copies what it needs from cfg; transport and clock are borrowed for the
 * client's life. t NULL: the client keeps its own libcurl session, so its
 * requests reuse one kept-alive connection (not thread-safe, like the client).
 */
int isc_s3_client_new(const struct isc_s3_config *cfg, const struct isc_http_transport *t,
                      const struct isc_clock *clock, struct isc_s3_client **out,
                      struct isc_err *err);
void isc_s3_client_free(struct isc_s3_client *c);
/*
 * A second client with c's endpoint, keys and policy, for another thread: its
 * own kept-alive session when c has one (so one connection each), else c's
 * transport, which must then be thread-safe. Caller frees.
 */
int isc_s3_client_dup(const struct isc_s3_client *c, struct isc_s3_client **out,
                      struct isc_err *err);

/* The object as HeadObject/ListObjectsV2 describe it. */
struct isc_s3_object {
	char *key;             /* owned */
	uint64_t size;         /* bytes */
	char etag[80];         /* without quotes: "hex" or "hex-N" for multipart uploads */
	char version_id[1025]; /* "" when the bucket is not versioned (or "null") */
	unsigned parts_count;  /* x-amz-mp-parts-count of a partNumber HEAD; 0 otherwise */
	/*
	 * HeadObject only (asked with x-amz-checksum-mode: ENABLED): the object's
	 * additional checksum, if it has one we can check: algo "SHA256", "CRC32C"
	 * or "CRC32" ("" for none), the base64 value as S3 sends it ("...-N" for a
	 * composite checksum of N parts), and whether it is composite.
	 */
	char checksum_algo[8];
	char checksum[96];
	int checksum_composite;
	/* x-amz-server-side-encryption ("AES256", "aws:kms", "aws:kms:dsse"), or "SSE-C". */
	char sse[32];
};

/*
 * Whether the ETag is the MD5 of the bytes (or, "HEX-N", of the part MD5s):
 * not for SSE-KMS, DSSE-KMS and SSE-C objects, whose ETags are opaque.
 */
int isc_s3_etag_is_md5(const struct isc_s3_object *o);
void isc_s3_object_cleanup(struct isc_s3_object *o);

/*
 * HeadObject. version_id NULL/"" for the current version; part_number > 0
 * asks for one part of a multipart object (size is then that part's, and
 * parts_count is set). ISC_ENOTFOUND for a missing bucket, key or version.
 */
int isc_s3_head(struct isc_s3_client *c, const char *bucket, const char *key,
                const char *version_id, unsigned part_number, struct isc_s3_object *out,
                struct isc_err *err);

/*
 * GetObject of bytes [first, first + len) into out (appended; len <= 64 MiB).
 * if_match: the ETag the bytes must have (without quotes), or NULL; a changed
 * object then fails with ISC_ECONFLICT ("412 PreconditionFailed") instead of
 * mixing two versions' bytes. A short reply is ISC_ETRANSIENT.
 */
int isc_s3_get_range(struct isc_s3_client *c, const char *bucket, const char *key,
                     const char *version_id, const char *if_match, uint64_t first, uint64_t len,
                     struct isc_buf *out, struct isc_err *err);

/*
 * The same GET with the body streamed into sink as it arrives (no copy of the
 * range in memory): the sink sees only a 206 with exactly the range asked for,
 * and its begin() runs before every attempt, so a retried range can rewind.
 */
int isc_s3_get_range_to(struct isc_s3_client *c, const char *bucket, const char *key,
                        const char *version_id, const char *if_match, uint64_t first, uint64_t len,
                        const struct isc_http_sink *sink, struct isc_err *err);

/* One page of ListObjectsV2. */
struct isc_s3_listing {
	struct isc_s3_object *objects; /* owned */
	size_t n;
	char *next_token; /* owned; NULL on the last page */
};
void isc_s3_listing_cleanup(struct isc_s3_listing *l);

/* ListObjectsV2 of prefix (may be ""), from token (NULL: the first page); max_keys 1..1000. */
int isc_s3_list_page(struct isc_s3_client *c, const char *bucket, const char *prefix,
                     const char *token, int max_keys, struct isc_s3_listing *out,
                     struct isc_err *err);

/*
 * A presigned GET URL of the object (its version when version_id is given),
 * valid for expires_s seconds. if_match non-NULL signs an If-Match header:
 * whoever uses the URL must send it, so the URL only ever serves those bytes.
 * The URL is a bearer credential for one object: never log it. Caller frees.
 */
int isc_s3_presign_get(struct isc_s3_client *c, const char *bucket, const char *key,
                       const char *version_id, const char *if_match, long expires_s, char **url_out,
                       struct isc_err *err);

/*
 * Multipart uploads (issue 45: checkpoints go from the nodes straight to the bucket).
 * The broker creates the upload, hands a node presigned UploadPart URLs (one upload's
 * parts, short-lived), and completes or aborts it with its own keys.
 */
struct isc_s3_part {
	unsigned number; /* 1..10000, ascending in a completion */
	char etag[80];   /* as UploadPart returned it, without quotes */
};
/* CreateMultipartUpload; *upload_id owned by the caller. */
int isc_s3_multipart_create(struct isc_s3_client *c, const char *bucket, const char *key,
                            char **upload_id, struct isc_err *err);
/*
 * A presigned UploadPart URL (PUT ...?partNumber=N&uploadId=ID), valid for expires_s:
 * it can only write part N of that one upload. A bearer credential: never log it.
 */
int isc_s3_presign_upload_part(struct isc_s3_client *c, const char *bucket, const char *key,
                               const char *upload_id, unsigned part_number, long expires_s,
                               char **url_out, struct isc_err *err);
/*
 * CompleteMultipartUpload of parts (n, ascending); the object's ETag into etag_out
 * (without quotes). An error S3 puts in a 200's body is an error here too.
 */
int isc_s3_multipart_complete(struct isc_s3_client *c, const char *bucket, const char *key,
                              const char *upload_id, const struct isc_s3_part *parts, size_t n,
                              char etag_out[80], struct isc_err *err);
/* AbortMultipartUpload: its parts are freed. */
int isc_s3_multipart_abort(struct isc_s3_client *c, const char *bucket, const char *key,
                           const char *upload_id, struct isc_err *err);
/* DeleteObject (S3 answers 204 whether or not the key exists). */
int isc_s3_delete(struct isc_s3_client *c, const char *bucket, const char *key,
                  struct isc_err *err);

/* "s3://bucket/key..." -> bucket and key (key may be "" for a whole bucket). Caller frees both. */
int isc_s3_uri_parse(const char *uri, char **bucket, char **key, struct isc_err *err);

#endif
