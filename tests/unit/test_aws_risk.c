/*
 * The AWS driver's risk sources (issue 43): the Spot Advisor's JSON and the
 * GetSpotPlacementScores reply, read as the documents are shaped
 * (../shared/docs/pricing-facts.md; EC2 API Reference, API_SpotPlacementScore).
 */
#include "providers/aws/ec2.h"
#include "providers/aws/spot_advisor.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

static const char advisor[] =
    "{\"global_rate\":\"<5%\",\"ranges\":["
    "{\"index\":0,\"label\":\"<5%\",\"dots\":0,\"max\":5},"
    "{\"index\":1,\"label\":\"5-10%\",\"dots\":1,\"max\":11},"
    "{\"index\":4,\"label\":\">20%\",\"dots\":4,\"max\":100}],"
    "\"instance_types\":{\"p5.48xlarge\":{\"cores\":192}},"
    "\"spot_advisor\":{\"us-east-1\":{\"Linux\":{\"p5.48xlarge\":{\"s\":62,\"r\":4},"
    "\"g5.xlarge\":{\"s\":70,\"r\":1}},\"Windows\":{\"g5.xlarge\":{\"s\":40,\"r\":0}}}}}";

static void test_spot_advisor(void **state)
{
	const char *types[] = {"p5.48xlarge", "g5.xlarge", "p4d.24xlarge"};
	struct isc_spot_band *b;
	struct isc_err err;
	size_t n;
	(void)state;

	assert_int_equal(isc_spot_advisor_parse(advisor, strlen(advisor), "us-east-1", "Linux",
	                                        types, 3, &b, &n, &err),
	                 0);
	assert_int_equal(n, 2); /* p4d.24xlarge: not in the data, unknown */
	assert_string_equal(b[0].instance_type, "p5.48xlarge");
	assert_int_equal(b[0].band, 4);
	assert_int_equal(b[0].max_pct, 100); /* the band's "max", read from the file */
	assert_string_equal(b[0].label, ">20%");
	assert_int_equal(b[0].savings_pct, 62);
	assert_int_equal(b[1].band, 1);
	assert_int_equal(b[1].max_pct, 11);
	free(b);

	/* a region the data lacks: nothing known, not an error */
	assert_int_equal(isc_spot_advisor_parse(advisor, strlen(advisor), "eu-west-1", "Linux",
	                                        types, 3, &b, &n, &err),
	                 0);
	assert_int_equal(n, 0);
	free(b);

	/* a band index outside ranges, and a document without ranges: refused */
	static const char bad_r[] = "{\"ranges\":[{\"index\":0,\"label\":\"<5%\",\"max\":5}],"
	                            "\"spot_advisor\":{\"us-east-1\":{\"Linux\":"
	                            "{\"g5.xlarge\":{\"s\":1,\"r\":3}}}}}";
	assert_int_equal(isc_spot_advisor_parse(bad_r, strlen(bad_r), "us-east-1", "Linux", types,
	                                        3, &b, &n, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "g5.xlarge"));
	static const char no_ranges[] = "{\"spot_advisor\":{}}";
	assert_int_equal(isc_spot_advisor_parse(no_ranges, strlen(no_ranges), "us-east-1", "Linux",
	                                        types, 3, &b, &n, &err),
	                 ISC_EINVALID);
	assert_int_equal(
	    isc_spot_advisor_parse("<html>", 6, "us-east-1", "Linux", types, 3, &b, &n, &err),
	    ISC_EINVALID);
}

static void test_placement_scores(void **state)
{
	static const char ok[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<GetSpotPlacementScoresResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	    "<requestId>r-1</requestId><spotPlacementScoreSet>"
	    "<item><region>us-east-1</region><availabilityZoneId>use1-az1</availabilityZoneId>"
	    "<score>9</score></item>"
	    "<item><region>us-east-1</region><availabilityZoneId>use1-az2</availabilityZoneId>"
	    "<score>2</score></item>"
	    "</spotPlacementScoreSet><nextToken>abc</nextToken></GetSpotPlacementScoresResponse>";
	static const char region[] =
	    "<GetSpotPlacementScoresResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	    "<spotPlacementScoreSet><item><region>us-west-2</region><score>10</score></item>"
	    "</spotPlacementScoreSet></GetSpotPlacementScoresResponse>";
	static const char out_of_scale[] =
	    "<GetSpotPlacementScoresResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	    "<spotPlacementScoreSet><item><region>us-west-2</region><score>11</score></item>"
	    "</spotPlacementScoreSet></GetSpotPlacementScoresResponse>";
	struct isc_ec2_placement_score *ps;
	struct isc_err err;
	char *next = NULL;
	size_t n;
	(void)state;

	assert_int_equal(isc_ec2_parse_placement_scores(ok, strlen(ok), &ps, &n, &next, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(ps[0].zone_id, "use1-az1");
	assert_int_equal(ps[0].score, 9);
	assert_int_equal(ps[1].score, 2);
	assert_string_equal(next, "abc");
	free(ps);
	free(next);
	next = NULL;
	assert_int_equal(
	    isc_ec2_parse_placement_scores(region, strlen(region), &ps, &n, &next, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].region, "us-west-2");
	assert_string_equal(ps[0].zone_id, "");
	assert_null(next);
	free(ps);
	/* "on a scale from 1 to 10": anything else is not a score */
	assert_int_equal(isc_ec2_parse_placement_scores(out_of_scale, strlen(out_of_scale), &ps, &n,
	                                                &next, &err),
	                 ISC_EINVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spot_advisor),
	    cmocka_unit_test(test_placement_scores),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
