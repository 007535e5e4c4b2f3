/*
 * The model both sides of the API share: the words and limits that the API's
 * requests and replies carry, and that the store keeps. The CLI speaks only
 * the API, so it takes these from here, never from store/ (whose headers
 * include this one, so the store and the CLI cannot disagree).
 */
#ifndef ISC_COMMON_MODEL_H
#define ISC_COMMON_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* The GPUs one on-prem pool node may register (isc nodes add --gpus, POST /v1/nodes). */
#define ISC_POOL_MAX_GPUS 64

/* The spend report's grouping (GET /v1/spend?by=): one key per row. */
enum isc_spend_by {
	ISC_SPEND_BY_PROJECT,
	ISC_SPEND_BY_EXPERIMENT,
	ISC_SPEND_BY_PROVIDER,
	ISC_SPEND_BY_SHAPE,
	ISC_SPEND_BY_DAY,
};

/* 1 when an experiment's status is one it never leaves: completed, failed, cancelled, stopped. */
int isc_status_is_final(const char *status);

/*
 * One row of the shapes table: a node type for one provider, region,
 * instance type and market, as the store keeps it, catalog files hold it
 * (isc catalog reads and writes them) and GET /v1/shapes carries it. The
 * shapes module (shapes/shape.h) owns the rules about it (ids, layouts,
 * prices); the store only keeps it, and defines the three functions below
 * (store/store_shapes.c). Ownership: the strings are owned by the record and
 * released by isc_shape_cleanup.
 */
struct isc_shape {
	char *id;         /* store key: display_id in lower case */
	char *display_id; /* "<provider>-<region>-<instance type>-<spot|ondemand>", provider's
	                     spelling */
	char *provider;   /* "aws" | "gcp" | "oci" */
	char *region;
	char *instance_type;
	int spot;       /* 1: spot/preemptible market, 0: on-demand */
	char *gpu_type; /* normalized GPU model, e.g. "H100", "A100-80GB" */
	int gpus_per_node;
	int64_t gpu_mem_mib; /* all GPUs of one node together; 0 when unknown */
	int vcpus;
	int64_t mem_mib;
	int64_t price_micros; /* USD micro-dollars per node-hour */
	char *zones;          /* comma-separated, tried in this order; "" = the driver picks */
	char *price_date;     /* YYYY-MM-DD of the price data */
	/* "catalog" (the imported file) or the API it was read from: "aws-spot-history",
	 * "aws-price-list", "gcp-billing-catalog", "oci-price-list" (prices/lists.h) */
	char *price_source;
	int64_t price_checked_ms; /* live: when the price was read from the cloud; catalog: 0 */
};

void isc_shape_cleanup(struct isc_shape *sh);
void isc_shape_list_free(struct isc_shape *list, size_t n);
/* Deep copy; 0 or ISC_ENOMEM. */
int isc_shape_copy(struct isc_shape *dst, const struct isc_shape *src);

#endif
