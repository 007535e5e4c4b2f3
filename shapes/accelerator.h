/*
 * What kind of accelerator a shape's gpu_type is: its vendor, its family, and
 * whether a CUDA container (`docker run --gpus all` with the NVIDIA runtime,
 * the platform's images) can use it. The catalog's gpu_type names the model
 * ("H100", "A10G", "V520"); this table is the one place that maps a model to
 * its vendor, so ranking, `isc shapes` and the docs agree.
 */
#ifndef ISC_SHAPES_ACCELERATOR_H
#define ISC_SHAPES_ACCELERATOR_H

struct isc_accelerator {
	const char *vendor; /* "nvidia", "amd", "aws", "intel", "google", "unknown" */
	const char *family; /* "Hopper", "Ampere", "Instinct", ...; "" when unknown */
	int cuda;           /* 1: runs CUDA images */
};

/* The accelerator of a catalog gpu_type (any case). Never NULL; unknown models are not CUDA. */
const struct isc_accelerator *isc_accelerator_of(const char *gpu_type);

#endif
