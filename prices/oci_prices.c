/* An OCI shape's price from the public price list (see oci_prices.h). */
#include "prices/oci_prices.h"

#include "common/err.h"

#include <stdio.h>
#include <string.h>

/*
 * The GPU model word of a shape's product, per shape family: the product's
 * displayName ends with it ("Compute - GPU - H100"; public fetchers have seen
 * both "Compute - GPU - A100" and "... - Compute - GPU H100" spellings, so the
 * word is matched at the end after a space or a dash). The generation-named
 * families (GPU2, GPU3, GPU4) by their GPU. Names not confirmed against
 * Oracle's live list fail closed: no product, the shape keeps its price and
 * is counted unpriced (docs/shapes.md).
 */
static const struct family {
	const char *prefix; /* instance type up to the GPU count */
	const char *model;
} families[] = {
    {"BM.GPU.A10.", "A10"},       {"VM.GPU.A10.", "A10"},       {"BM.GPU.A100-v2.", "A100-v2"},
    {"BM.GPU.B200.", "B200"},     {"BM.GPU.B300.", "B300"},     {"BM.GPU.H100.", "H100"},
    {"BM.GPU.H200.", "H200"},     {"BM.GPU.L40S.", "L40S"},     {"BM.GPU.MI300X.", "MI300X"},
    {"BM.GPU.MI355X.", "MI355X"}, {"BM.GPU.RTXPRO.", "RTXPRO"}, {"BM.GPU2.", "P100"},
    {"VM.GPU2.", "P100"},         {"BM.GPU3.", "V100"},         {"VM.GPU3.", "V100"},
    {"BM.GPU4.", "A100"},
};

/* Does name end with word, after a space or a dash? */
static int ends_with_word(const char *name, const char *word)
{
	size_t nl = strlen(name), wl = strlen(word);
	return nl > wl && strcmp(name + nl - wl, word) == 0 &&
	       (name[nl - wl - 1] == ' ' || name[nl - wl - 1] == '-');
}

/* A GPU rental product: not a software licence billed per GPU-hour on top, nor on-premises. */
static int rental(const struct isc_oci_product *p)
{
	return strncmp(p->service_category, "Compute - GPU", 13) == 0 &&
	       !strstr(p->display_name, "AI Enterprise") &&
	       !strstr(p->display_name, "Cloud@Customer");
}

int isc_oci_shape_price(const struct isc_shape *sh, const struct isc_oci_product *v, size_t n,
                        int64_t *micros, char part[24], char *why, size_t why_len)
{
	const struct family *f = NULL;
	const struct isc_oci_product *p = NULL;
	int64_t price;

	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && !f; i++)
		if (strncmp(sh->instance_type, families[i].prefix, strlen(families[i].prefix)) == 0)
			f = &families[i];
	if (!f) {
		snprintf(why, why_len, "no price list product known for shape '%s'",
		         sh->instance_type);
		return ISC_ENOTFOUND;
	}
	if (sh->spot && strncmp(sh->instance_type, "BM.", 3) == 0) {
		snprintf(why, why_len, "'%s': bare metal has no preemptible capacity",
		         sh->instance_type);
		return ISC_EINVALID;
	}
	for (size_t i = 0; i < n; i++) {
		if (!rental(&v[i]) || !ends_with_word(v[i].display_name, f->model))
			continue;
		/* Several products for one model: the dearest, so a hold never under-reserves. */
		if (!p || v[i].price_micros > p->price_micros)
			p = &v[i];
	}
	if (!p) {
		snprintf(why, why_len, "no 'Compute - GPU' product named '... %s'", f->model);
		return ISC_ENOTFOUND;
	}
	if (strcmp(p->metric_name, "GPU Per Hour") != 0) {
		snprintf(why, why_len, "part %s (%s) is priced per '%s', not per GPU hour",
		         p->part_number, p->display_name, p->metric_name);
		return ISC_EINVALID;
	}
	if (__builtin_mul_overflow(p->price_micros, (int64_t)sh->gpus_per_node, &price)) {
		snprintf(why, why_len, "price of '%s' overflows", sh->instance_type);
		return ISC_EINVALID;
	}
	/* Preemptible: half the on-demand price, rounded up to the micro-dollar. */
	*micros = sh->spot ? (price + 1) / 2 : price;
	snprintf(part, 24, "%s", p->part_number);
	return 0;
}
