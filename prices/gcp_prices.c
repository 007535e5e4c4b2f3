/* A GCP shape's price from its Compute SKUs (see gcp_prices.h). */
#include "prices/gcp_prices.h"

#include "common/err.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * The SKU description's family word per machine series, as Google's SKUs
 * spell them: "N1 Predefined Instance Core running in Americas", "A2 Instance
 * Ram running in Americas", "Spot Preemptible G2 Instance Core running in
 * Americas". N1's are the "Predefined" ones (custom machine types have their
 * own SKUs). A3 Mega and A3 Ultra are written as their own series here; those
 * two names are not confirmed by a published SKU list (docs/shapes.md): when
 * the catalog has no such SKU the shape keeps its price and is counted as
 * unpriced, never priced from another series.
 */
static const struct family {
	const char *prefix; /* machine type prefix */
	const char *core;   /* description before " running in" */
	const char *ram;
	int gpu_slice; /* priced by per-GPU slice SKUs only (A4) */
} families[] = {
    {"n1-", "N1 Predefined Instance Core", "N1 Predefined Instance Ram", 0},
    {"a2-", "A2 Instance Core", "A2 Instance Ram", 0},
    {"a3-megagpu-", "A3 Mega Instance Core", "A3 Mega Instance Ram", 0},
    {"a3-ultragpu-", "A3 Ultra Instance Core", "A3 Ultra Instance Ram", 0},
    {"a3-", "A3 Instance Core", "A3 Instance Ram", 0},
    {"g2-", "G2 Instance Core", "G2 Instance Ram", 0},
    {"a4-", "A4 Nvidia B200 (1 gpu slice)", NULL, 1},
};

/* The catalog's GPU model (shapes/README.md spelling) -> the GPU SKU's description. */
static const struct gpu {
	const char *model;
	const char *sku;
} gpus[] = {
    {"T4", "Nvidia Tesla T4 GPU"},     {"V100", "Nvidia Tesla V100 GPU"},
    {"P100", "Nvidia Tesla P100 GPU"}, {"P4", "Nvidia Tesla P4 GPU"},
    {"A100", "Nvidia Tesla A100 GPU"}, {"A100-80GB", "Nvidia Tesla A100 80GB GPU"},
    {"H100", "Nvidia H100 80GB GPU"},  {"H100-MEGA", "Nvidia H100 80GB Mega GPU"},
    {"H200", "Nvidia H200 141GB GPU"}, {"L4", "Nvidia L4 GPU"},
};

/* Is `region` one of the comma-separated `regions`? */
static int region_in(const char *regions, const char *region)
{
	size_t rl = strlen(region);
	for (const char *r = regions; r && *r;) {
		const char *end = strchr(r, ',');
		size_t len = end ? (size_t)(end - r) : strlen(r);
		if (len == rl && strncmp(r, region, rl) == 0)
			return 1;
		r += len + (end ? 1 : 0);
	}
	return 0;
}

/*
 * The description without its market prefix: Spot SKUs read "Spot Preemptible
 * X", older preemptible ones "Preemptible X"; the usageType is what decides.
 */
static const char *sku_base(const char *d)
{
	if (strncmp(d, "Spot Preemptible ", 17) == 0)
		return d + 17;
	if (strncmp(d, "Preemptible ", 12) == 0)
		return d + 12;
	return d;
}

/*
 * The dearest SKU priced for `region` and the market whose description (less
 * the market prefix) is `name` followed by " running in " (a geography). 0 and
 * *nanos, or ISC_ENOTFOUND; ISC_EINVALID when its unit is not `unit`.
 */
static int find_part(const struct isc_gcp_sku *skus, size_t n, const char *name, int spot,
                     const char *region, const char *unit, int64_t *nanos, char *why,
                     size_t why_len)
{
	size_t nl = strlen(name);
	int found = 0;

	for (size_t i = 0; i < n; i++) {
		const char *b = sku_base(skus[i].description);
		if (skus[i].preemptible != spot || strncmp(b, name, nl) != 0 ||
		    strncmp(b + nl, " running in ", 12) != 0 || !region_in(skus[i].regions, region))
			continue;
		if (strcmp(skus[i].usage_unit, unit) != 0) {
			snprintf(why, why_len, "SKU %s (%s) is priced per '%s', not per '%s'",
			         skus[i].sku_id, skus[i].description, skus[i].usage_unit, unit);
			return ISC_EINVALID;
		}
		if (!found || skus[i].nanos > *nanos)
			*nanos = skus[i].nanos;
		found = 1;
	}
	if (!found) {
		snprintf(why, why_len, "no %s\"%s\" SKU for %s", spot ? "Spot Preemptible " : "",
		         name, region);
		return ISC_ENOTFOUND;
	}
	return 0;
}

/* a * b + *acc, or -1 on overflow. */
static int mul_add(int64_t a, int64_t b, int64_t *acc)
{
	int64_t p;
	if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(*acc, p, acc))
		return -1;
	return 0;
}

int isc_gcp_shape_price(const struct isc_shape *sh, const struct isc_gcp_sku *skus, size_t n,
                        int64_t *micros, char *why, size_t why_len)
{
	const struct family *f = NULL;
	const char *gsku = NULL;
	int64_t core = 0, ram = 0, gpu = 0, total = 0; /* total: nano-dollars x 1024 */
	int rc;

	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && !f; i++)
		if (strncmp(sh->instance_type, families[i].prefix, strlen(families[i].prefix)) == 0)
			f = &families[i];
	if (!f) {
		snprintf(why, why_len, "no SKU family for machine type '%s'", sh->instance_type);
		return ISC_ENOTFOUND;
	}
	if (f->gpu_slice) {
		/* A4: every GPU is one slice SKU; the slice includes its share of the host. */
		if ((rc = find_part(skus, n, f->core, sh->spot, sh->region, "h", &gpu, why,
		                    why_len)))
			return rc;
		if (mul_add(gpu, (int64_t)sh->gpus_per_node * 1024, &total))
			goto overflow;
	} else {
		if ((rc = find_part(skus, n, f->core, sh->spot, sh->region, "h", &core, why,
		                    why_len)) ||
		    (rc = find_part(skus, n, f->ram, sh->spot, sh->region, "GiBy.h", &ram, why,
		                    why_len)))
			return rc;
		if (sh->gpus_per_node > 0) {
			for (size_t i = 0; i < sizeof(gpus) / sizeof(gpus[0]) && !gsku; i++)
				if (strcasecmp(sh->gpu_type, gpus[i].model) == 0)
					gsku = gpus[i].sku;
			if (!gsku) {
				snprintf(why, why_len, "no GPU SKU known for GPU model '%s'",
				         sh->gpu_type);
				return ISC_ENOTFOUND;
			}
			if ((rc = find_part(skus, n, gsku, sh->spot, sh->region, "h", &gpu, why,
			                    why_len)))
				return rc;
		}
		/* mem_mib x (nanos per GiB) / 1024 stays exact by counting in 1/1024 nanos. */
		if (mul_add(core, (int64_t)sh->vcpus * 1024, &total) ||
		    mul_add(ram, sh->mem_mib, &total) ||
		    mul_add(gpu, (int64_t)sh->gpus_per_node * 1024, &total))
			goto overflow;
	}
	/* 1024 x 1000 of these units are one micro-dollar; round half up. */
	*micros = (total + 512000) / 1024000;
	return 0;
overflow:
	snprintf(why, why_len, "price of '%s' overflows", sh->id);
	return ISC_EINVALID;
}
