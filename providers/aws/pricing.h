/*
 * The AWS Price List Query API's GetProducts, for EC2 on-demand prices
 * (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html):
 * JSON 1.1 (X-Amz-Target: AWSPriceListService.GetProducts), signed with SigV4
 * for service "pricing" in us-east-1. A reply is {"FormatVersion": "aws_v1",
 * "PriceList": [strings, each a JSON document of one product], "NextToken"};
 * a product's price sits in terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD
 * (a decimal string) with unit "Hrs".
 */
#ifndef ISC_PROVIDERS_AWS_PRICING_H
#define ISC_PROVIDERS_AWS_PRICING_H

#include "common/buf.h"
#include "common/err.h"
#include "providers/provider.h"

#include <stddef.h>

#define ISC_AWS_PRICING_TARGET "AWSPriceListService.GetProducts"

/*
 * The request body: ServiceCode AmazonEC2, FormatVersion aws_v1, MaxResults
 * 100, and TERM_MATCH filters on instanceType, regionCode, operatingSystem
 * Linux, tenancy Shared, preInstalledSw NA, capacitystatus Used (one product:
 * the plain Linux on-demand price); NextToken when given.
 */
int isc_aws_pricing_request(struct isc_buf *b, const char *instance_type, const char *region,
                            const char *next);

/*
 * One reply: per product of the PriceList, its instanceType and hourly USD
 * on-demand price, appended to *v as a point (zone ""; the dearest when a
 * product has several hourly dimensions, or several products one type).
 * *next: NextToken (owned) or NULL. ISC_EINVALID naming the reply and the
 * product's sku for anything not in the API's shape (a PriceList entry that
 * is not a string of JSON, no OnDemand term, a price that is not a decimal).
 */
int isc_aws_pricing_parse(const char *json, size_t len, int page, struct isc_price_point **v,
                          size_t *n, size_t *cap, char **next, struct isc_err *err);

/* "3.0600000000" -> 3060000 micro-dollars, exact, rounded half up past 6 decimals. */
int isc_aws_pricing_decimal(const char *s, int64_t *micros);

#endif
