/*
 * The model both sides of the API share: the words and limits that the API's
 * requests and replies carry, and that the store keeps. The CLI speaks only
 * the API, so it takes these from here, never from store/ (whose headers
 * include this one, so the store and the CLI cannot disagree).
 */
#ifndef ISC_COMMON_MODEL_H
#define ISC_COMMON_MODEL_H

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

#endif
