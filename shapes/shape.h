/*
 * One GPU shape: a node type a burst cluster can be made of, for one
 * provider, region, instance type and market (spot or on-demand), with its
 * price per node-hour in integer micro-dollars. Also the money and layout
 * arithmetic every user of shapes needs: exact decimal prices, the NNODES x
 * N_PROC rule, and shape ids.
 *
 * The record itself (struct isc_shape, isc_shape_cleanup, isc_shape_copy) is
 * the shapes table's row (common/model.h, kept by store/store_shapes.h); this
 * module adds the rules.
 */
#ifndef ISC_SHAPES_SHAPE_H
#define ISC_SHAPES_SHAPE_H

#include "common/err.h"
#include "common/model.h" /* struct isc_shape: the shapes table's record */

#include <stddef.h>
#include <stdint.h>

/* A burst cluster has at most this many GPUs (the platform's rule). */
#define ISC_BURST_GPUS_MAX 48

/* True for "aws", "gcp", "oci" (lower case only: the canonical spelling). */
int isc_provider_valid(const char *provider);

/*
 * Sets sh->display_id and sh->id from provider, region, instance_type and spot.
 * 0 or ISC_ENOMEM.
 */
int isc_shape_make_id(struct isc_shape *sh);
/* Lower-cases a shape id for lookups (the store key); caller frees; NULL on ENOMEM. */
char *isc_shape_id_key(const char *id);

/*
 * Parses a non-negative decimal string ("55.04", "0.0185", "8", ".5") into
 * micro-units exactly, without floating point: digits beyond the sixth
 * decimal round half up. No sign, exponent or spaces. 0 or ISC_EINVALID
 * (also on overflow of int64).
 */
int isc_decimal_to_micros(const char *s, int64_t *out);
/* Same, for a value scaled by `unit` afterwards (GiB -> MiB: unit 1024), rounded half up. */
int isc_decimal_scaled(const char *s, int64_t unit, int64_t *out);

/*
 * Formats micro-dollars as a decimal with at least 2 and at most 6 decimals,
 * exactly ("55.04", "21.957642", "-0.50"). Returns buf.
 */
#define ISC_MICROS_STR_MAX 32
char *isc_micros_format(int64_t micros, char buf[ISC_MICROS_STR_MAX]);

/*
 * The node layout for `gpus` GPUs on nodes of `gpus_per_node`: NNODES is the
 * smallest divisor of gpus that is >= ceil(gpus / gpus_per_node), N_PROC =
 * gpus / NNODES, so NNODES * N_PROC == gpus exactly. ISC_EINVALID when either
 * count is < 1.
 */
int isc_shape_layout(int gpus, int gpus_per_node, int *nnodes, int *nproc);

/*
 * Parses a size such as "40G", "80Gi", "512M" or "1T" into bytes: K, M, G, T
 * are powers of 1000, Ki, Mi, Gi, Ti powers of 1024; a bare number is bytes.
 * An optional trailing "B" is accepted ("40GB"). 0 or ISC_EINVALID (also on
 * overflow).
 */
int isc_size_parse(const char *s, int64_t *bytes);

/*
 * When the shape's price was last known to be in force (ms since the epoch):
 * its live read, else midnight UTC of its catalog price_date; 0 if unknown.
 */
int64_t isc_shape_price_as_of_ms(const struct isc_shape *sh);

/* nnodes x node price, ISC_EINVALID on overflow or negative input. */
int isc_cluster_price(int64_t node_price_micros, int nnodes, int64_t *out);

#endif
