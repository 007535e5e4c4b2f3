/*
 * An OCI shape's hourly price from the public price list
 * (providers/oci/oci_pricelist.h). GPU shapes are priced per GPU-hour
 * (metricName "GPU Per Hour"), one global price for every commercial region:
 * a node costs its GPUs x the product's price. Preemptible capacity costs 50%
 * of on-demand; there is no preemptible bare metal. Bare metal is billed with
 * a one-hour minimum (VMs one minute): the hourly price does not change, and
 * the credit hold covers at least an hour (reservation_window_ms).
 * (https://www.oracle.com/cloud/compute/gpu/pricing/,
 * https://docs.oracle.com/iaas/Content/Compute/Concepts/preemptible.htm)
 */
#ifndef ISC_PRICES_OCI_PRICES_H
#define ISC_PRICES_OCI_PRICES_H

#include "common/model.h"
#include "providers/oci/oci_pricelist.h"

#include <stddef.h>
#include <stdint.h>

/*
 * The node-hour price of `sh` in micro-dollars, and the product's part number
 * in part (24 bytes). ISC_ENOTFOUND (why says which product) when the list
 * has no product for the shape's GPU; ISC_EINVALID when it has one but not
 * per GPU-hour, or for preemptible bare metal.
 */
int isc_oci_shape_price(const struct isc_shape *sh, const struct isc_oci_product *v, size_t n,
                        int64_t *micros, char part[24], char *why, size_t why_len);

#endif
