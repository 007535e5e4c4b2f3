/*
 * The accelerator table. Matching is by model prefix, longest first, so
 * "A100-80GB" and "H100-MEGA" take their base model's row. A model missing
 * here is "unknown" and not CUDA: a new accelerator is never a default burst
 * candidate until someone says what it is.
 */
#include "shapes/accelerator.h"

#include <string.h>
#include <strings.h>

struct row {
	const char *prefix;
	struct isc_accelerator acc;
};

static const struct row rows[] = {
    /* NVIDIA, by architecture */
    {"B200", {"nvidia", "Blackwell", 1}},
    {"B300", {"nvidia", "Blackwell", 1}},
    {"GB200", {"nvidia", "Blackwell", 1}},
    {"RTXPRO6000", {"nvidia", "Blackwell", 1}},
    {"H100", {"nvidia", "Hopper", 1}},
    {"H200", {"nvidia", "Hopper", 1}},
    {"GH200", {"nvidia", "Hopper", 1}},
    {"L40S", {"nvidia", "Ada Lovelace", 1}},
    {"L40", {"nvidia", "Ada Lovelace", 1}},
    {"L4", {"nvidia", "Ada Lovelace", 1}},
    {"A100", {"nvidia", "Ampere", 1}},
    {"A10G", {"nvidia", "Ampere", 1}},
    {"A10", {"nvidia", "Ampere", 1}},
    {"A40", {"nvidia", "Ampere", 1}},
    {"T4", {"nvidia", "Turing", 1}},
    {"V100", {"nvidia", "Volta", 1}},
    {"P100", {"nvidia", "Pascal", 1}},
    {"P4", {"nvidia", "Pascal", 1}},
    {"M60", {"nvidia", "Maxwell", 1}},
    {"K80", {"nvidia", "Kepler", 1}},
    {"K520", {"nvidia", "Kepler", 1}},
    /* AMD: ROCm, not CUDA */
    {"MI300X", {"amd", "Instinct", 0}},
    {"MI325X", {"amd", "Instinct", 0}},
    {"MI355X", {"amd", "Instinct", 0}},
    {"MI250", {"amd", "Instinct", 0}},
    {"V520", {"amd", "Radeon Pro", 0}},
    /* Other accelerators: their own SDKs */
    {"INFERENTIA", {"aws", "Inferentia", 0}},
    {"TRAINIUM", {"aws", "Trainium", 0}},
    {"GAUDI", {"intel", "Gaudi", 0}},
    {"TPU", {"google", "TPU", 0}},
};

static const struct isc_accelerator unknown = {"unknown", "", 0};

const struct isc_accelerator *isc_accelerator_of(const char *gpu_type)
{
	const struct row *best = NULL;
	size_t best_len = 0;

	if (!gpu_type)
		return &unknown;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t len = strlen(rows[i].prefix);
		if (len > best_len && strncasecmp(gpu_type, rows[i].prefix, len) == 0) {
			best = &rows[i];
			best_len = len;
		}
	}
	return best ? &best->acc : &unknown;
}
