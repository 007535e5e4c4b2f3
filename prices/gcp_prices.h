/*
 * A GCP shape's hourly price from the Cloud Billing Catalog's Compute SKUs
 * (providers/gcp/gcp_billing.h). Google bills a VM by its parts: vCPUs x the
 * family's core SKU + GiB x its RAM SKU (+ GPUs x the GPU SKU). That holds for
 * the accelerator-optimized families too (A2, A3, G2: the GPUs come with the
 * machine type but are billed through their own GPU SKUs), and for N1 with
 * attached GPUs. A4 (B200) is priced by per-GPU "A4 Nvidia B200 (1 gpu
 * slice)" SKUs instead. Spot is the same parts under usageType Preemptible.
 * (https://cloud.google.com/compute/all-pricing, .../vm-instance-pricing,
 * .../gpus-pricing; docs/shapes.md "Live prices".)
 */
#ifndef ISC_PRICES_GCP_PRICES_H
#define ISC_PRICES_GCP_PRICES_H

#include "common/model.h"
#include "providers/gcp/gcp_billing.h"

#include <stddef.h>
#include <stdint.h>

/*
 * The node-hour price of `sh` (its region, market, vCPUs, memory, GPU model
 * and count) in micro-dollars, rounded half up from the exact nano-dollar
 * sum. Where several SKUs match one part (they should not), the dearest is
 * used, so a hold never under-reserves. ISC_ENOTFOUND with the missing part
 * in `why` when a SKU is missing (the shape keeps its price); ISC_EINVALID
 * for a SKU in an unexpected unit.
 */
int isc_gcp_shape_price(const struct isc_shape *sh, const struct isc_gcp_sku *skus, size_t n,
                        int64_t *micros, char *why, size_t why_len);

#endif
