/*
 * The shipped throughput table. Each figure is the median of the three models
 * of Lambda's single-GPU PyTorch FP16 training benchmark
 * (github.com/lambdal/deeplearning-benchmark, pytorch/pytorch-train-throughput-fp16.csv:
 * BERT-large, ResNet-50, TransformerXL-large), divided by the A100 80GB SXM's.
 * The median, not the mean, so one model that suits a GPU unusually well does not
 * carry it. Models absent from that file and from MLPerf Training are left out:
 * isc_throughput_of() says "unknown" for them (T4, L4, L40S, H200, B200, MI300X, ...).
 */
#include "shapes/throughput.h"

#include <strings.h>

#define LAMBDA "Lambda PyTorch FP16 train benchmark (lambdal/deeplearning-benchmark)"

static const struct isc_throughput table[] = {
    /* the reference */
    {"A100-80GB", 1000, LAMBDA ": A100 80GB SXM, the reference"},
    /* 0.77 / 0.88 / 0.89: measured on the 40GB PCIe card; the catalog's A100 (p4d, a2)
     * are 40GB SXM4 cards, at least as fast, so this figure never overstates them. */
    {"A100", 880, LAMBDA ": A100 40GB PCIe, median of 0.77/0.88/0.89"},
    /* 1.98-2.05 / 1.65-1.76 / 1.72; MLPerf Training v3.0 (Dell pairs) agrees: 1.4-2.0x. */
    {"H100", 1720, LAMBDA ": H100 SXM, median of 2.0/1.7/1.72; MLPerf v3.0 1.4-2.0x"},
    /* a3-megagpu-8g: the same H100 SXM GPU with more network; per GPU the same work. */
    {"H100-MEGA", 1720, LAMBDA ": H100 SXM (a3-mega: same GPU), median of 2.0/1.7/1.72"},
    /* 0.28 / 0.40 / 0.31. */
    {"A10", 310, LAMBDA ": A10, median of 0.28/0.40/0.31"},
    /* AWS's A10G is the A10's cloud variant (same GA102, 24 GB); Lambda measured the A10. */
    {"A10G", 310, LAMBDA ": A10 (AWS A10G is its variant), median of 0.28/0.40/0.31"},
    /* 0.38 / 0.53 / 0.34, the 16GB card; AWS p3 and GCP n1 V100s are 16GB. */
    {"V100", 380, LAMBDA ": V100 16GB, median of 0.38/0.53/0.34"},
};

const struct isc_throughput *isc_throughput_of(const char *gpu_type)
{
	if (!gpu_type)
		return 0;
	for (unsigned i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcasecmp(table[i].gpu_type, gpu_type))
			return &table[i];
	return 0;
}

const struct isc_throughput *isc_throughput_table(unsigned *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}
