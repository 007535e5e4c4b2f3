/*
 * Reading GPU shape catalogs. Three input formats, one result: a list of
 * struct isc_shape, one per (provider, region, instance type, market), with
 * the zones that offer it. Malformed rows are reported ("FILE:LINE: why") and
 * skipped; rows that are well-formed but not GPU machines (CPU VMs, TPUs,
 * Inferentia/Trainium, ...) are counted as filtered. See docs/shapes.md for
 * the rules each format follows.
 */
#ifndef ISC_SHAPES_CATALOG_IMPORT_H
#define ISC_SHAPES_CATALOG_IMPORT_H

#include "common/err.h"
#include "shapes/shape.h"

#include <stdio.h>

struct isc_store;

enum isc_catalog_format {
	ISC_CATALOG_ISC,      /* this project's normalized CSV (the shipped shapes/PROVIDER.csv) */
	ISC_CATALOG_SKYPILOT, /* SkyPilot vms.csv (GCP, OCI; also SkyPilot's AWS schema) */
	ISC_CATALOG_EC2INSTANCES, /* aws-gpu.csv derived from ec2instances.info */
};

/* "isc", "skypilot", "ec2instances" -> format; ISC_EINVALID otherwise. */
int isc_catalog_format_parse(const char *name, enum isc_catalog_format *out);

/* Files bigger than this are refused before they are read. */
#define ISC_CATALOG_FILE_MAX (64u << 20)

struct isc_catalog_parse {
	struct isc_shape *shapes; /* sorted by id */
	size_t n;
	char **skipped; /* "FILE:LINE: reason", one per malformed row */
	size_t n_skipped;
	size_t rows;     /* data rows read (not counting the header) */
	size_t filtered; /* rows left out on purpose: not a GPU machine, unpaired, ... */
};

void isc_catalog_parse_cleanup(struct isc_catalog_parse *p);

/*
 * Parses `len` bytes of catalog text. `name` is used in messages. `provider`
 * is the provider the rows belong to (required; for the isc format every
 * row's provider must equal it). `price_date` (YYYY-MM-DD) stamps shapes of
 * formats that carry no date; NULL means today (UTC). The isc format carries
 * its own date per row.
 *
 * Returns 0 when at least one shape was read; ISC_EINVALID when the header
 * lacks a column or no row is valid (out->skipped still says why).
 * The caller cleans `out` up in every case.
 */
int isc_catalog_parse_mem(const char *name, const char *data, size_t len,
                          enum isc_catalog_format fmt, const char *provider, const char *price_date,
                          struct isc_catalog_parse *out, struct isc_err *err);
/* Same on a file (ISC_EIO when it cannot be read, ISC_EINVALID when too big). */
int isc_catalog_parse_file(const char *path, enum isc_catalog_format fmt, const char *provider,
                           const char *price_date, struct isc_catalog_parse *out,
                           struct isc_err *err);

/* Writes shapes in the normalized isc format (header first). 0 or ISC_EIO. */
int isc_catalog_write_csv(FILE *f, const struct isc_shape *shapes, size_t n, struct isc_err *err);

/*
 * The folder of the shipped catalog: $ISC_SHAPES_DIR when set, else the first
 * `shapes` folder holding a .csv found next to the running program or in a
 * folder above it (realpath of /proc/self/exe, walking up), else
 * share/isc/shapes beside a bin/ folder, else the installed DATADIR/shapes
 * (common/datadir.h). Caller frees; NULL with
 * ISC_ENOTFOUND when there is none.
 */
char *isc_catalog_default_dir(struct isc_err *err);

/*
 * Loads every PROVIDER.csv (isc format) of shapes_dir (NULL: the default
 * dir) into the store when the store holds no shapes yet; does nothing when
 * it has some. All files go in one transaction. Malformed rows in a shipped
 * file are an error here: the shipped catalog is generated and must be clean.
 * *loaded (may be NULL) gets the number of shapes written.
 */
int isc_catalog_load_default(struct isc_store *s, const char *shapes_dir, size_t *loaded,
                             struct isc_err *err);

#endif
