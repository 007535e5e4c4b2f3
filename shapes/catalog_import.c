/*
 * Catalog importers: SkyPilot vms.csv (GCP, OCI), ec2instances.info-derived
 * aws-gpu.csv, and this project's own normalized CSV. Each row becomes zero
 * or more "zone offers" (one machine in one zone and market); offers are then
 * folded into shapes, one per (provider, region, instance type, market), with
 * the region's zones in order and the highest zone price (see docs/shapes.md
 * for why the maximum).
 */
#include "shapes/catalog_import.h"
#include "common/datadir.h"

#include "shapes/csv.h"
#include "store/store_shapes.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int isc_catalog_format_parse(const char *name, enum isc_catalog_format *out)
{
	if (!strcmp(name, "isc"))
		*out = ISC_CATALOG_ISC;
	else if (!strcmp(name, "skypilot"))
		*out = ISC_CATALOG_SKYPILOT;
	else if (!strcmp(name, "ec2instances"))
		*out = ISC_CATALOG_EC2INSTANCES;
	else
		return ISC_EINVALID;
	return 0;
}

void isc_catalog_parse_cleanup(struct isc_catalog_parse *p)
{
	if (!p)
		return;
	isc_shape_list_free(p->shapes, p->n);
	for (size_t i = 0; i < p->n_skipped; i++)
		free(p->skipped[i]);
	free(p->skipped);
	memset(p, 0, sizeof(*p));
}

/* ---- parse state ---- */

/* One GCP accelerator row: the price of `count` GPUs in one zone. */
struct gpu_row {
	char *zone, *name;
	int count;
	int64_t price, spot; /* spot -1: none */
	int64_t mem_per_gpu;
};

/* One VM row that can host GPUs (bundled family or n1 + attachable GPU). */
struct host_row {
	struct isc_shape sh; /* everything but the GPU part and price */
	int64_t price, spot; /* spot -1: none */
	char *gpu_name;      /* the accelerator row it pairs with */
	int count;
	int attached; /* n1: the instance type gets "+GPUxN" */
};

/* One machine in one zone and market; zones holds that one zone (isc format: the list). */
struct offer {
	struct isc_shape sh;
	size_t line;
};

struct parse {
	const char *name;
	int unique; /* isc format: one row per shape, duplicates are errors */
	const char *provider;
	const char *price_date;
	struct isc_catalog_parse *out;
	struct offer *offers;
	size_t n_offers, cap_offers;
	struct gpu_row *gpus;
	size_t n_gpus, cap_gpus;
	struct host_row *hosts;
	size_t n_hosts, cap_hosts;
	size_t *host_lines;
};

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 256;
	while (ncap < need)
		ncap *= 2;
	if (ncap > SIZE_MAX / elem)
		return ISC_ENOMEM;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return ISC_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

static int skip_row(struct parse *ps, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int skip_row(struct parse *ps, size_t line, const char *fmt, ...)
{
	struct isc_catalog_parse *o = ps->out;
	char *why, *msg;
	va_list ap;
	size_t cap = o->n_skipped;

	va_start(ap, fmt);
	int n = vasprintf(&why, fmt, ap);
	va_end(ap);
	if (n < 0)
		return ISC_ENOMEM;
	if (asprintf(&msg, "%s:%zu: %s", ps->name, line, why) < 0) {
		free(why);
		return ISC_ENOMEM;
	}
	free(why);
	/* Grow by powers of two: cap tracks n_skipped rounded up. */
	if ((cap & (cap - 1)) == 0) {
		char **ns = realloc(o->skipped, (cap ? cap * 2 : 1) * sizeof(*ns));
		if (!ns) {
			free(msg);
			return ISC_ENOMEM;
		}
		o->skipped = ns;
	}
	o->skipped[o->n_skipped++] = msg;
	return 0;
}

/* Characters allowed in regions, zones and instance types: they end up in ids and API calls. */
static int safe_token(const char *s)
{
	if (!*s || strlen(s) > 128)
		return 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (!isalnum(*p) && !strchr("._+-", *p))
			return 0;
	return 1;
}

static int valid_date(const char *d)
{
	if (strlen(d) != 10)
		return 0;
	for (int i = 0; i < 10; i++)
		if (i == 4 || i == 7 ? d[i] != '-' : !isdigit((unsigned char)d[i]))
			return 0;
	int m = (d[5] - '0') * 10 + d[6] - '0', day = (d[8] - '0') * 10 + d[9] - '0';
	return m >= 1 && m <= 12 && day >= 1 && day <= 31;
}

/* A whole number ("12", "12.0", "12.00"). */
static int parse_count(const char *s, int max, int *out)
{
	int64_t m;
	if (isc_decimal_to_micros(s, &m) || m % 1000000 != 0 || m / 1000000 > max)
		return ISC_EINVALID;
	*out = (int)(m / 1000000);
	return 0;
}

/* Finds "'key': N" in a python-dict-like GpuInfo text. */
static int gpuinfo_int(const char *info, const char *key, int64_t *out)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "'%s':", key);
	const char *p = strstr(info, pat);
	if (!p)
		return ISC_ENOTFOUND;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	char num[24];
	size_t n = 0;
	while (isdigit((unsigned char)p[n]) && n < sizeof(num) - 1) {
		num[n] = p[n];
		n++;
	}
	num[n] = '\0';
	if (n == 0 || n > 15)
		return ISC_EINVALID;
	*out = strtoll(num, NULL, 10);
	return 0;
}

/* ---- offers ---- */

static int add_offer(struct parse *ps, size_t line, const char *region, const char *zone,
                     const char *itype, int spot, const char *gpu_type, int gpus, int64_t gpu_mem,
                     int vcpus, int64_t mem, int64_t price)
{
	struct isc_shape *sh;
	int rc;

	if ((rc = grow((void **)&ps->offers, &ps->cap_offers, ps->n_offers + 1,
	               sizeof(*ps->offers))))
		return rc;
	sh = &ps->offers[ps->n_offers].sh;
	memset(sh, 0, sizeof(*sh));
	sh->spot = spot;
	sh->gpus_per_node = gpus;
	sh->gpu_mem_mib = gpu_mem;
	sh->vcpus = vcpus;
	sh->mem_mib = mem;
	sh->price_micros = price;
	if (!(sh->provider = strdup(ps->provider)) || !(sh->region = strdup(region)) ||
	    !(sh->zones = strdup(zone)) || !(sh->instance_type = strdup(itype)) ||
	    !(sh->gpu_type = strdup(gpu_type)) || !(sh->price_date = strdup(ps->price_date)) ||
	    isc_shape_make_id(sh)) {
		isc_shape_cleanup(sh);
		return ISC_ENOMEM;
	}
	ps->offers[ps->n_offers++].line = line;
	return 0;
}

static int cmp_offer(const void *a, const void *b)
{
	const struct offer *x = a, *y = b;
	int c = strcmp(x->sh.id, y->sh.id);
	if (!c)
		c = strcmp(x->sh.zones, y->sh.zones);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/*
 * Folds zone offers into shapes: zones in sorted order, the highest zone
 * price. In the isc format a shape has one row; a second one is reported.
 */
static int fold_offers(struct parse *ps)
{
	struct isc_catalog_parse *o = ps->out;
	size_t i = 0;
	int rc = 0;

	if (ps->n_offers)
		qsort(ps->offers, ps->n_offers, sizeof(*ps->offers), cmp_offer);
	o->shapes = calloc(ps->n_offers ? ps->n_offers : 1, sizeof(*o->shapes));
	if (!o->shapes)
		return ISC_ENOMEM;
	while (i < ps->n_offers) {
		struct offer *first = &ps->offers[i];
		struct isc_buf zones;
		size_t j = i;
		int64_t price = 0;

		isc_buf_init(&zones, 0);
		for (; !rc && j < ps->n_offers && !strcmp(ps->offers[j].sh.id, first->sh.id); j++) {
			const char *z = ps->offers[j].sh.zones;
			if (ps->unique && j > i) {
				rc = skip_row(ps, ps->offers[j].line,
				              "duplicate shape '%s' (first at line %zu)",
				              first->sh.display_id, first->line);
				continue;
			}
			if (ps->offers[j].sh.price_micros > price)
				price = ps->offers[j].sh.price_micros;
			if (!*z || (j > i && !strcmp(z, ps->offers[j - 1].sh.zones)))
				continue; /* no zone, or the same zone twice */
			if (zones.len)
				rc = isc_buf_putc(&zones, ',');
			if (!rc)
				rc = isc_buf_puts(&zones, z);
		}
		struct isc_shape *dst = &o->shapes[o->n++];
		*dst = first->sh; /* take ownership of the first offer's strings */
		memset(&first->sh, 0, sizeof(first->sh));
		free(dst->zones);
		dst->zones = rc ? NULL : isc_buf_detach(&zones);
		isc_buf_cleanup(&zones);
		if (!rc && !dst->zones)
			dst->zones = strdup("");
		if (rc || !dst->zones)
			return ISC_ENOMEM;
		dst->price_micros = price;
		i = j;
	}
	return 0;
}

/* ---- header ---- */

struct columns {
	const char *names[16];
	int idx[16];
	size_t n;
};

static int map_header(struct parse *ps, struct isc_csv *csv, struct columns *cols,
                      struct isc_err *err)
{
	for (size_t k = 0; k < cols->n; k++) {
		cols->idx[k] = -1;
		for (size_t f = 0; f < csv->n; f++)
			if (!strcmp(csv->fields[f], cols->names[k]))
				cols->idx[k] = (int)f;
		if (cols->idx[k] < 0)
			return isc_err_set(err, ISC_EINVALID, "%s:%zu: header has no column '%s'",
			                   ps->name, csv->rec_line, cols->names[k]);
	}
	return 0;
}

#define COL(k) (csv->fields[cols.idx[k]])

/* ---- SkyPilot ---- */

/* GCP machine families that come with their GPUs: VM row + accelerator row = machine. */
static int bundled_gpus(const char *itype, const char **gpu, int *count)
{
	static const struct {
		const char *prefix, *gpu;
	} fam[] = {
	    {"a2-highgpu-", "A100"},  {"a2-megagpu-", "A100"}, {"a2-ultragpu-", "A100-80GB"},
	    {"a3-highgpu-", "H100"},  {"a3-edgegpu-", "H100"}, {"a3-megagpu-", "H100-MEGA"},
	    {"a3-ultragpu-", "H200"}, {"a4-highgpu-", "B200"},
	};
	/* g2: the L4 count is not in the name; Google's table for g2-standard-N. */
	static const struct {
		const char *itype;
		int count;
	} g2[] = {
	    {"g2-standard-4", 1},  {"g2-standard-8", 1},  {"g2-standard-12", 1},
	    {"g2-standard-16", 1}, {"g2-standard-32", 1}, {"g2-standard-24", 2},
	    {"g2-standard-48", 4}, {"g2-standard-96", 8},
	};
	for (size_t i = 0; i < sizeof(g2) / sizeof(g2[0]); i++)
		if (!strcmp(itype, g2[i].itype)) {
			*gpu = "L4";
			*count = g2[i].count;
			return 1;
		}
	for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		size_t pl = strlen(fam[i].prefix);
		if (strncmp(itype, fam[i].prefix, pl))
			continue;
		/* "a3-edgegpu-8g-nolssd": the count is the "<N>g" token. */
		char *end;
		long n = strtol(itype + pl, &end, 10);
		if (n < 1 || n > 64 || *end != 'g' || (end[1] && end[1] != '-'))
			return 0;
		*gpu = fam[i].gpu;
		*count = (int)n;
		return 1;
	}
	return 0;
}

static int add_host(struct parse *ps, size_t line, const char *region, const char *zone,
                    const char *itype, int vcpus, int64_t mem, int64_t price, int64_t spot,
                    const char *gpu, int count, int attached)
{
	int rc;
	if ((rc = grow((void **)&ps->hosts, &ps->cap_hosts, ps->n_hosts + 1, sizeof(*ps->hosts))))
		return rc;
	size_t *nl = realloc(ps->host_lines, ps->cap_hosts * sizeof(*nl));
	if (!nl)
		return ISC_ENOMEM;
	ps->host_lines = nl;
	struct host_row *h = &ps->hosts[ps->n_hosts];
	memset(h, 0, sizeof(*h));
	h->sh.vcpus = vcpus;
	h->sh.mem_mib = mem;
	h->price = price;
	h->spot = spot;
	h->count = count;
	h->attached = attached;
	if (!(h->sh.region = strdup(region)) || !(h->sh.zones = strdup(zone)) ||
	    !(h->sh.instance_type = strdup(itype)) || !(h->gpu_name = strdup(gpu))) {
		isc_shape_cleanup(&h->sh);
		free(h->gpu_name);
		return ISC_ENOMEM;
	}
	ps->host_lines[ps->n_hosts++] = line;
	return 0;
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct gpu_row *x = a, *y = b;
	int c = strcmp(x->zone, y->zone);
	if (!c)
		c = strcmp(x->name, y->name);
	return c ? c : (x->count > y->count) - (x->count < y->count);
}

/* Pairs each host VM with the accelerator row of its zone and count. */
static int pair_hosts(struct parse *ps)
{
	if (ps->n_gpus) /* qsort must not see NULL, even for zero items */
		qsort(ps->gpus, ps->n_gpus, sizeof(*ps->gpus), cmp_gpu);
	for (size_t i = 0; i < ps->n_hosts; i++) {
		struct host_row *h = &ps->hosts[i];
		struct gpu_row key = {.zone = h->sh.zones, .name = h->gpu_name, .count = h->count};
		struct gpu_row *g =
		    ps->n_gpus ? bsearch(&key, ps->gpus, ps->n_gpus, sizeof(key), cmp_gpu) : NULL;
		char itype[160];
		int rc;

		if (!g) {
			/* The zone has the VM but not this GPU: not offered there. */
			ps->out->filtered++;
			continue;
		}
		if (h->attached)
			snprintf(itype, sizeof(itype), "%s+%sx%d", h->sh.instance_type, h->gpu_name,
			         h->count);
		else
			snprintf(itype, sizeof(itype), "%s", h->sh.instance_type);
		int64_t mem = g->mem_per_gpu * h->count;
		if (h->price > INT64_MAX - g->price)
			continue;
		rc = add_offer(ps, ps->host_lines[i], h->sh.region, h->sh.zones, itype, 0, g->name,
		               h->count, mem, h->sh.vcpus, h->sh.mem_mib, h->price + g->price);
		if (!rc && h->spot >= 0 && g->spot >= 0 && h->spot <= INT64_MAX - g->spot)
			rc = add_offer(ps, ps->host_lines[i], h->sh.region, h->sh.zones, itype, 1,
			               g->name, h->count, mem, h->sh.vcpus, h->sh.mem_mib,
			               h->spot + g->spot);
		if (rc)
			return rc;
	}
	return 0;
}

/* An optional price: "" -> -1. */
static int opt_price(const char *s, int64_t *out)
{
	if (!*s) {
		*out = -1;
		return 0;
	}
	return isc_decimal_to_micros(s, out);
}

enum {
	SK_ITYPE,
	SK_ACC,
	SK_COUNT,
	SK_VCPU,
	SK_MEM,
	SK_INFO,
	SK_PRICE,
	SK_SPOT,
	SK_REGION,
	SK_ZONE
};

static int skypilot_row(struct parse *ps, struct isc_csv *csv, const struct columns *cols_p)
{
	const struct columns cols = *cols_p;
	const char *itype = COL(SK_ITYPE), *acc = COL(SK_ACC), *region = COL(SK_REGION),
	           *zone = COL(SK_ZONE), *info = COL(SK_INFO);
	size_t line = csv->rec_line;
	int64_t price, spot, mem = 0, gmem = 0;
	int count = 0, vcpus = 0;

	if (!strncasecmp(acc, "tpu", 3)) {
		ps->out->filtered++; /* TPUs are not GPUs */
		return 0;
	}
	if (!strncmp(acc, "GB", 2)) {
		ps->out
		    ->filtered++; /* Grace-Blackwell superchips: arm64 hosts, images are x86_64 */
		return 0;
	}
	if (!*itype && !*acc)
		return skip_row(ps, line, "neither InstanceType nor AcceleratorName is set");
	if (!safe_token(region) || !safe_token(zone))
		return skip_row(ps, line, "bad Region '%s' or AvailabilityZone '%s'", region, zone);
	if (!*COL(SK_PRICE))
		return skip_row(ps, line, "no Price");
	if (isc_decimal_to_micros(COL(SK_PRICE), &price))
		return skip_row(ps, line, "bad Price '%s'", COL(SK_PRICE));
	if (opt_price(COL(SK_SPOT), &spot))
		return skip_row(ps, line, "bad SpotPrice '%s'", COL(SK_SPOT));
	if (*acc && (parse_count(COL(SK_COUNT), 64, &count) || count < 1))
		return skip_row(ps, line, "bad AcceleratorCount '%s'", COL(SK_COUNT));
	if (*itype) {
		if (!safe_token(itype)) {
			if (!*acc) {
				ps->out->filtered++; /* e.g. OCI "VM.Standard.E4.Flex$_2_8" CPU
				                        shapes */
				return 0;
			}
			return skip_row(ps, line, "bad InstanceType '%s'", itype);
		}
		if (parse_count(COL(SK_VCPU), 100000, &vcpus))
			return skip_row(ps, line, "bad vCPUs '%s'", COL(SK_VCPU));
		if (isc_decimal_scaled(COL(SK_MEM), 1024, &mem))
			return skip_row(ps, line, "bad MemoryGiB '%s'", COL(SK_MEM));
	}
	if (*acc) {
		if (!safe_token(acc))
			return skip_row(ps, line, "bad AcceleratorName '%s'", acc);
		if (*info) {
			int64_t each;
			int r = gpuinfo_int(info, "TotalGpuMemoryInMiB", &gmem);
			if (r == ISC_ENOTFOUND && !(r = gpuinfo_int(info, "SizeInMiB", &each)))
				gmem = each * count;
			if (r)
				return skip_row(ps, line, "GpuInfo has no GPU memory size");
		}
	}
	if (*itype && *acc) /* a whole machine (OCI, SkyPilot AWS) */
		return add_offer(ps, line, region, zone, itype, 0, acc, count, gmem, vcpus, mem,
		                 price) ||
		               (spot >= 0 && add_offer(ps, line, region, zone, itype, 1, acc, count,
		                                       gmem, vcpus, mem, spot))
		           ? ISC_ENOMEM
		           : 0;
	if (*acc) { /* a GCP accelerator row: priced per zone and count */
		int rc = grow((void **)&ps->gpus, &ps->cap_gpus, ps->n_gpus + 1, sizeof(*ps->gpus));
		if (rc)
			return rc;
		struct gpu_row *g = &ps->gpus[ps->n_gpus];
		g->zone = strdup(zone);
		g->name = strdup(acc);
		if (!g->zone || !g->name) {
			free(g->zone);
			free(g->name);
			return ISC_ENOMEM;
		}
		g->count = count;
		g->price = price;
		g->spot = spot;
		g->mem_per_gpu = gmem / count;
		ps->n_gpus++;
		return 0;
	}
	/* A VM row: a GPU host when its family bundles GPUs or it is an n1 host for attachable
	 * GPUs. */
	const char *gpu;
	if (bundled_gpus(itype, &gpu, &count))
		return add_host(ps, line, region, zone, itype, vcpus, mem, price, spot, gpu, count,
		                0);
	if (!strncmp(itype, "n1-standard-", 12) && vcpus % 8 == 0 &&
	    (vcpus == 8 || vcpus == 16 || vcpus == 32 || vcpus == 64)) {
		/* One host per attachable GPU count: 8 vCPUs and 30 GB per GPU. */
		static const char *const attachable[] = {"T4", "V100", "P100", "P4"};
		for (size_t k = 0; k < sizeof(attachable) / sizeof(attachable[0]); k++) {
			int rc = add_host(ps, line, region, zone, itype, vcpus, mem, price, spot,
			                  attachable[k], vcpus / 8, 1);
			if (rc)
				return rc;
		}
		return 0;
	}
	ps->out->filtered++; /* a CPU-only VM */
	return 0;
}

/* ---- ec2instances (aws-gpu.csv) ---- */

enum {
	EC_ITYPE,
	EC_ACC,
	EC_COUNT,
	EC_GMEM,
	EC_VCPU,
	EC_MEM,
	EC_ARCH,
	EC_REGION,
	EC_PRICE,
	EC_SPOTMIN,
	EC_SPOTAVG,
	EC_SPOTMAX
};

/* A standard AWS region ("us-east-1", "us-gov-west-1"), not a Local or Wavelength Zone. */
static int aws_standard_region(const char *r)
{
	int dashes = 0;
	for (const char *p = r; *p; p++)
		dashes += *p == '-';
	size_t n = strlen(r);
	if (n < 4 || !isdigit((unsigned char)r[n - 1]))
		return 0;
	return dashes == 2 || (dashes == 3 && strstr(r, "-gov-"));
}

/* "NVIDIA T4 Tensor Core" -> "T4", "NVIDIA Tesla V100" -> "V100", "AMD Radeon Pro V520" -> "V520".
 */
static void aws_gpu_name(const char *in, int64_t mem_per_gpu_mib, char *out, size_t outlen)
{
	static const char *const drop[] = {"NVIDIA ", "AMD ", "Tesla ", "GRID ", "Radeon Pro "};
	const char *p = in;
	size_t n;
	for (int again = 1; again;) {
		again = 0;
		for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
			if (!strncmp(p, drop[i], strlen(drop[i]))) {
				p += strlen(drop[i]);
				again = 1;
			}
	}
	snprintf(out, outlen, "%s", p);
	char *tc = strstr(out, " Tensor Core");
	if (tc)
		*tc = '\0';
	for (n = 0; out[n]; n++)
		if (out[n] == ' ')
			out[n] = '-';
	/* p4de carries 80 GB A100s; call them what GCP and OCI call them. */
	if (!strcmp(out, "A100") && mem_per_gpu_mib >= 80 * 1024)
		snprintf(out, outlen, "A100-80GB");
}

static int ec2_row(struct parse *ps, struct isc_csv *csv, const struct columns *cols_p)
{
	const struct columns cols = *cols_p;
	const char *itype = COL(EC_ITYPE), *acc = COL(EC_ACC), *region = COL(EC_REGION);
	size_t line = csv->rec_line;
	int64_t price, spot = -1, gmem, mem;
	int count, vcpus;
	char gpu[64];

	/* Accelerators that are not CUDA GPUs: Inferentia, Trainium (labelled Inferentia),
	 * Qualcomm. */
	if (strstr(acc, "Inferentia") || strstr(acc, "Trainium") || strstr(acc, "Qualcomm") ||
	    !strncmp(itype, "inf", 3) || !strncmp(itype, "trn", 3) || !strncmp(itype, "dl", 2)) {
		ps->out->filtered++;
		return 0;
	}
	if (strcmp(COL(EC_ARCH), "x86_64")) {
		ps->out->filtered++; /* arm64 hosts (g5g): the platform's images are x86_64 */
		return 0;
	}
	if (!safe_token(itype))
		return skip_row(ps, line, "bad InstanceType '%s'", itype);
	if (!safe_token(region))
		return skip_row(ps, line, "bad Region '%s'", region);
	if (!aws_standard_region(region)) {
		ps->out->filtered++; /* Local/Wavelength Zones need per-account opt-in */
		return 0;
	}
	if (!*acc)
		return skip_row(ps, line, "no AcceleratorName");
	int64_t frac;
	if (!isc_decimal_to_micros(COL(EC_COUNT), &frac) && frac > 0 && frac < 1000000) {
		ps->out->filtered++; /* g6f/gr6f: a fraction of a GPU, not a training node */
		return 0;
	}
	if (parse_count(COL(EC_COUNT), 64, &count) || count < 1)
		return skip_row(ps, line, "bad AcceleratorCount '%s'", COL(EC_COUNT));
	if (isc_decimal_scaled(COL(EC_GMEM), 1024, &gmem))
		return skip_row(ps, line, "bad GpuMemoryGiBTotal '%s'", COL(EC_GMEM));
	if (parse_count(COL(EC_VCPU), 100000, &vcpus))
		return skip_row(ps, line, "bad vCPUs '%s'", COL(EC_VCPU));
	if (isc_decimal_scaled(COL(EC_MEM), 1024, &mem))
		return skip_row(ps, line, "bad MemoryGiB '%s'", COL(EC_MEM));
	if (!*COL(EC_PRICE) || isc_decimal_to_micros(COL(EC_PRICE), &price))
		return skip_row(ps, line, "bad Price '%s'", COL(EC_PRICE));
	/* Spot: the regional average; the maximum when only that is published. */
	if (opt_price(COL(EC_SPOTAVG), &spot) || (spot < 0 && opt_price(COL(EC_SPOTMAX), &spot)))
		return skip_row(ps, line, "bad SpotPriceAvg/SpotPriceMax");
	int64_t check;
	if (opt_price(COL(EC_SPOTMIN), &check))
		return skip_row(ps, line, "bad SpotPriceMin '%s'", COL(EC_SPOTMIN));
	aws_gpu_name(acc, gmem / count, gpu, sizeof(gpu));
	if (!safe_token(gpu))
		return skip_row(ps, line, "bad AcceleratorName '%s'", acc);
	/* No per-AZ data: zones stay empty and the driver picks the region's AZs. */
	if (add_offer(ps, line, region, "", itype, 0, gpu, count, gmem, vcpus, mem, price) ||
	    (spot >= 0 &&
	     add_offer(ps, line, region, "", itype, 1, gpu, count, gmem, vcpus, mem, spot)))
		return ISC_ENOMEM;
	return 0;
}

/* ---- isc (normalized) ---- */

enum {
	IS_ID,
	IS_PROVIDER,
	IS_REGION,
	IS_ITYPE,
	IS_MARKET,
	IS_GPU,
	IS_GPUS,
	IS_GMEM,
	IS_VCPU,
	IS_MEM,
	IS_PRICE,
	IS_ZONES,
	IS_DATE
};

static const char *const isc_columns[] = {
    "id",          "provider", "region",  "instance_type", "market", "gpu_type",  "gpus_per_node",
    "gpu_mem_mib", "vcpus",    "mem_mib", "price",         "zones",  "price_date"};

static int isc_row(struct parse *ps, struct isc_csv *csv, const struct columns *cols_p)
{
	const struct columns cols = *cols_p;
	size_t line = csv->rec_line;
	int64_t price, gmem, mem;
	int gpus, vcpus, spot;
	char *zones;
	struct isc_shape *sh;

	if (strcmp(COL(IS_PROVIDER), ps->provider))
		return skip_row(ps, line, "provider '%s', expected '%s'", COL(IS_PROVIDER),
		                ps->provider);
	if (!safe_token(COL(IS_REGION)) || !safe_token(COL(IS_ITYPE)) || !safe_token(COL(IS_GPU)))
		return skip_row(ps, line, "bad region, instance_type or gpu_type");
	if (!strcmp(COL(IS_MARKET), "spot"))
		spot = 1;
	else if (!strcmp(COL(IS_MARKET), "ondemand"))
		spot = 0;
	else
		return skip_row(ps, line, "market '%s' is neither spot nor ondemand",
		                COL(IS_MARKET));
	if (parse_count(COL(IS_GPUS), 64, &gpus) || gpus < 1)
		return skip_row(ps, line, "bad gpus_per_node '%s'", COL(IS_GPUS));
	if (isc_decimal_to_micros(COL(IS_GMEM), &gmem) || gmem % 1000000 ||
	    isc_decimal_to_micros(COL(IS_MEM), &mem) || mem % 1000000)
		return skip_row(ps, line, "bad gpu_mem_mib or mem_mib");
	if (parse_count(COL(IS_VCPU), 100000, &vcpus))
		return skip_row(ps, line, "bad vcpus '%s'", COL(IS_VCPU));
	if (isc_decimal_to_micros(COL(IS_PRICE), &price))
		return skip_row(ps, line, "bad price '%s'", COL(IS_PRICE));
	if (!valid_date(COL(IS_DATE)))
		return skip_row(ps, line, "bad price_date '%s'", COL(IS_DATE));
	/* zones: ';'-separated in the file, ','-separated in the store. */
	if (!(zones = strdup(COL(IS_ZONES))))
		return ISC_ENOMEM;
	for (char *z = zones, *end; *z; z = end + 1) {
		end = strchr(z, ';');
		if (end)
			*end = '\0';
		int ok = safe_token(z);
		if (end)
			*end = ',';
		if (!ok) {
			free(zones);
			return skip_row(ps, line, "bad zones '%s'", COL(IS_ZONES));
		}
		if (!end)
			break;
	}
	int rc = add_offer(ps, line, COL(IS_REGION), "", COL(IS_ITYPE), spot, COL(IS_GPU), gpus,
	                   gmem / 1000000, vcpus, mem / 1000000, price);
	if (rc) {
		free(zones);
		return rc;
	}
	sh = &ps->offers[ps->n_offers - 1].sh;
	free(sh->zones);
	sh->zones = zones;
	free(sh->price_date);
	if (!(sh->price_date = strdup(COL(IS_DATE))))
		return ISC_ENOMEM;
	if (strcasecmp(COL(IS_ID), sh->id)) {
		char *why;
		if (asprintf(&why, "id '%s' does not match its columns ('%s')", COL(IS_ID),
		             sh->display_id) < 0)
			why = NULL;
		isc_shape_cleanup(sh);
		ps->n_offers--;
		rc = why ? skip_row(ps, line, "%s", why) : ISC_ENOMEM;
		free(why);
		return rc;
	}
	return 0;
}

/* ---- driver ---- */

static int parse_rows(struct parse *ps, struct isc_csv *csv, enum isc_catalog_format fmt,
                      struct isc_err *err)
{
	struct columns cols = {0};
	int rc;

	switch (fmt) {
	case ISC_CATALOG_SKYPILOT: {
		static const char *const n[] = {
		    "InstanceType",    "AcceleratorName", "AcceleratorCount",
		    "vCPUs",           "MemoryGiB",       "GpuInfo",
		    "Price",           "SpotPrice",       "Region",
		    "AvailabilityZone"};
		cols.n = sizeof(n) / sizeof(n[0]);
		memcpy(cols.names, n, sizeof(n));
		break;
	}
	case ISC_CATALOG_EC2INSTANCES: {
		static const char *const n[] = {"InstanceType",
		                                "AcceleratorName",
		                                "AcceleratorCount",
		                                "GpuMemoryGiBTotal",
		                                "vCPUs",
		                                "MemoryGiB",
		                                "Arch",
		                                "Region",
		                                "Price",
		                                "SpotPriceMin",
		                                "SpotPriceAvg",
		                                "SpotPriceMax"};
		cols.n = sizeof(n) / sizeof(n[0]);
		memcpy(cols.names, n, sizeof(n));
		break;
	}
	case ISC_CATALOG_ISC:
		cols.n = sizeof(isc_columns) / sizeof(isc_columns[0]);
		memcpy(cols.names, isc_columns, sizeof(isc_columns));
		break;
	default:
		return isc_err_set(err, ISC_EINVALID, "unknown catalog format");
	}
	rc = isc_csv_next(csv);
	if (rc < 0)
		return rc == ISC_ENOMEM
		           ? isc_err_set(err, rc, "out of memory")
		           : isc_err_set(err, rc, "%s:1: unterminated quote", ps->name);
	if (rc == 0)
		return isc_err_set(err, ISC_EINVALID, "%s: empty file", ps->name);
	if ((rc = map_header(ps, csv, &cols, err)))
		return rc;
	size_t width = csv->n;
	while ((rc = isc_csv_next(csv)) == 1) {
		if (isc_csv_blank(csv))
			continue;
		ps->out->rows++;
		if (csv->n != width) {
			rc = skip_row(ps, csv->rec_line, "%zu fields, the header has %zu", csv->n,
			              width);
		} else if (fmt == ISC_CATALOG_SKYPILOT) {
			rc = skypilot_row(ps, csv, &cols);
		} else if (fmt == ISC_CATALOG_EC2INSTANCES) {
			rc = ec2_row(ps, csv, &cols);
		} else {
			rc = isc_row(ps, csv, &cols);
		}
		if (rc)
			return isc_err_set(err, rc, "out of memory");
	}
	if (rc == ISC_EINVALID) {
		ps->out->rows++;
		rc = skip_row(ps, csv->rec_line, "unterminated quote runs to the end of the file");
	}
	if (rc)
		return isc_err_set(err, rc, "out of memory");
	if ((rc = pair_hosts(ps)))
		return isc_err_set(err, rc, "out of memory");
	return 0;
}

static void parse_state_free(struct parse *ps)
{
	for (size_t i = 0; i < ps->n_offers; i++)
		isc_shape_cleanup(&ps->offers[i].sh);
	free(ps->offers);
	for (size_t i = 0; i < ps->n_gpus; i++) {
		free(ps->gpus[i].zone);
		free(ps->gpus[i].name);
	}
	free(ps->gpus);
	for (size_t i = 0; i < ps->n_hosts; i++) {
		isc_shape_cleanup(&ps->hosts[i].sh);
		free(ps->hosts[i].gpu_name);
	}
	free(ps->hosts);
	free(ps->host_lines);
}

int isc_catalog_parse_mem(const char *name, const char *data, size_t len,
                          enum isc_catalog_format fmt, const char *provider, const char *price_date,
                          struct isc_catalog_parse *out, struct isc_err *err)
{
	struct parse ps = {.name = name, .provider = provider, .out = out};
	struct isc_csv csv;
	char today[16];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!isc_provider_valid(provider))
		return isc_err_set(err, ISC_EINVALID, "unknown provider '%s' (aws, gcp or oci)",
		                   provider ? provider : "");
	if (!price_date) {
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(today, sizeof(today), "%Y-%m-%d", &tm);
		price_date = today;
	}
	if (!valid_date(price_date))
		return isc_err_set(err, ISC_EINVALID, "price date '%s' is not YYYY-MM-DD",
		                   price_date);
	ps.price_date = price_date;
	ps.unique = fmt == ISC_CATALOG_ISC;
	isc_csv_init(&csv, data, len);
	rc = parse_rows(&ps, &csv, fmt, err);
	isc_csv_cleanup(&csv);
	if (!rc && (rc = fold_offers(&ps)))
		isc_err_set(err, rc, "out of memory");
	parse_state_free(&ps);
	if (!rc && out->n == 0)
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s: no valid GPU shape for %s (%zu rows, %zu malformed)", name,
		                 provider, out->rows, out->n_skipped);
	return rc;
}

int isc_catalog_parse_file(const char *path, enum isc_catalog_format fmt, const char *provider,
                           const char *price_date, struct isc_catalog_parse *out,
                           struct isc_err *err)
{
	FILE *f;
	struct stat st;
	char *data;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!(f = fopen(path, "rb")))
		return isc_err_set(err, ISC_EIO, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		fclose(f);
		return isc_err_set(err, ISC_EIO, "%s is not a regular file", path);
	}
	if ((uint64_t)st.st_size > ISC_CATALOG_FILE_MAX) {
		fclose(f);
		return isc_err_set(err, ISC_EINVALID, "%s is larger than %u MiB", path,
		                   ISC_CATALOG_FILE_MAX >> 20);
	}
	if (!(data = malloc((size_t)st.st_size + 1))) {
		fclose(f);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	size_t got = fread(data, 1, (size_t)st.st_size, f);
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(data);
		return isc_err_set(err, ISC_EIO, "reading %s failed", path);
	}
	rc = isc_catalog_parse_mem(path, data, got, fmt, provider, price_date, out, err);
	free(data);
	return rc;
}

static void put_field(FILE *f, const char *s)
{
	if (strpbrk(s, ",\"\r\n")) {
		fputc('"', f);
		for (; *s; s++) {
			if (*s == '"')
				fputc('"', f);
			fputc(*s, f);
		}
		fputc('"', f);
	} else {
		fputs(s, f);
	}
}

int isc_catalog_write_csv(FILE *f, const struct isc_shape *shapes, size_t n, struct isc_err *err)
{
	char price[ISC_MICROS_STR_MAX];

	for (size_t i = 0; i < sizeof(isc_columns) / sizeof(isc_columns[0]); i++)
		fprintf(f, "%s%s", i ? "," : "", isc_columns[i]);
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		const struct isc_shape *sh = &shapes[i];
		put_field(f, sh->display_id);
		fprintf(f, ",%s,", sh->provider);
		put_field(f, sh->region);
		fputc(',', f);
		put_field(f, sh->instance_type);
		fprintf(f, ",%s,", sh->spot ? "spot" : "ondemand");
		put_field(f, sh->gpu_type);
		fprintf(f, ",%d,%lld,%d,%lld,%s,", sh->gpus_per_node, (long long)sh->gpu_mem_mib,
		        sh->vcpus, (long long)sh->mem_mib,
		        isc_micros_format(sh->price_micros, price));
		for (const char *z = sh->zones; *z; z++)
			fputc(*z == ',' ? ';' : *z, f);
		fprintf(f, ",%s\n", sh->price_date);
	}
	if (fflush(f) || ferror(f))
		return isc_err_set(err, ISC_EIO, "writing the catalog failed: %s", strerror(errno));
	return 0;
}

/* True when dir holds at least one *.csv. */
static int has_csv(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = n > 4 && !strcmp(e->d_name + n - 4, ".csv");
	}
	closedir(d);
	return found;
}

char *isc_catalog_default_dir(struct isc_err *err)
{
	const char *env = getenv("ISC_SHAPES_DIR");
	char *exe, *dir, *cand;

	if (env && *env) {
		if (!(dir = strdup(env)))
			isc_err_set(err, ISC_ENOMEM, "out of memory");
		return dir;
	}
	if (!(exe = realpath("/proc/self/exe", NULL)) && !(exe = strdup(""))) {
		isc_err_set(err, ISC_ENOMEM, "out of memory");
		return NULL;
	}
	/* Walk up from the program's folder: <d>/shapes, then <d>/share/isc/shapes. */
	for (char *slash = strrchr(exe, '/'); slash; slash = strrchr(exe, '/')) {
		*slash = '\0';
		const char *base = *exe ? exe : "";
		for (int k = 0; k < 2; k++) {
			if (asprintf(&cand, "%s/%s", base, k ? "share/isc/shapes" : "shapes") < 0) {
				free(exe);
				isc_err_set(err, ISC_ENOMEM, "out of memory");
				return NULL;
			}
			if (has_csv(cand)) {
				free(exe);
				return cand;
			}
			free(cand);
		}
	}
	free(exe);
	/* Then where `make install` put it (PREFIX/share/isc/shapes, common/datadir.h). */
	if (asprintf(&cand, "%s/shapes", isc_data_dir()) < 0) {
		isc_err_set(err, ISC_ENOMEM, "out of memory");
		return NULL;
	}
	if (has_csv(cand))
		return cand;
	isc_err_set(err, ISC_ENOTFOUND,
	            "no shipped shape catalog (shapes/*.csv) near the program nor in %s; set "
	            "ISC_SHAPES_DIR",
	            cand);
	free(cand);
	return NULL;
}

int isc_catalog_load_default(struct isc_store *s, const char *shapes_dir, size_t *loaded,
                             struct isc_err *err)
{
	static const char *const providers[] = {"aws", "gcp", "oci"};
	struct isc_catalog_parse parts[3];
	struct isc_shape *all = NULL;
	size_t added;
	char *dir = NULL, *path;
	size_t total = 0, at = 0;
	int64_t have;
	int rc;

	memset(parts, 0, sizeof(parts));
	if (loaded)
		*loaded = 0;
	if ((rc = isc_store_shape_count(s, NULL, &have, err)) || have > 0)
		return rc;
	if (!shapes_dir && !(shapes_dir = dir = isc_catalog_default_dir(err)))
		return err ? err->code : ISC_ENOTFOUND;
	for (size_t i = 0; i < 3; i++) {
		if (asprintf(&path, "%s/%s.csv", shapes_dir, providers[i]) < 0) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		if (access(path, F_OK) != 0) {
			free(path);
			continue; /* a trimmed install may ship fewer providers */
		}
		rc = isc_catalog_parse_file(path, ISC_CATALOG_ISC, providers[i], NULL, &parts[i],
		                            err);
		if (!rc && parts[i].n_skipped)
			rc = isc_err_set(err, ISC_EINVALID, "%s (shipped catalog is damaged)",
			                 parts[i].skipped[0]);
		free(path);
		if (rc)
			goto out;
		total += parts[i].n;
	}
	if (total == 0) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "no aws.csv, gcp.csv or oci.csv in %s",
		                 shapes_dir);
		goto out;
	}
	/* One list, one transaction: a store never holds half of the shipped catalog. */
	if (!(all = malloc(total * sizeof(*all)))) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < 3; i++)
		for (size_t k = 0; k < parts[i].n; k++)
			all[at++] = parts[i].shapes[k]; /* borrowed; parts keep ownership */
	rc = isc_store_shapes_seed(s, all, total, loaded ? loaded : &added, err);
	if (rc)
		isc_err_wrap(err, "loading the shipped catalog from %s", shapes_dir);
out:
	free(all);
	for (size_t i = 0; i < 3; i++)
		isc_catalog_parse_cleanup(&parts[i]);
	free(dir);
	return rc;
}
