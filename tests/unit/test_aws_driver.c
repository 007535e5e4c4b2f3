/*
 * The AWS driver through its provider table, against a scripted transport
 * (no network) and a fixed clock: what it sends for each broker operation,
 * how it reads replies, and how it reacts to capacity, partial gangs, auth
 * errors, throttling, paging, batching and unknown ids.
 *
 * test_mockcloud_* run only when MOCKCLOUD_URL points at tests/mocks/mockcloud
 * (tests/integration/aws-mock.sh starts it); otherwise they are skipped.
 */
#include "providers/aws/aws_int.h"
#include "providers/aws/ec2.h"
#include "providers/provider.h"
#include "providers/sweep.h"
#include "tests/unit/driver_script.h"
#include "tests/unit/mock_control.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECRET "test-secret-never-printed"

/* ---- scripted transport ---- */

struct script {
	char *sent[4096]; /* request bodies, owned */
	char *host[4096]; /* Host header of each request */
	size_t calls;
};

static struct script S;

static void script_reset(void)
{
	driver_script_reset();
	for (size_t i = 0; i < S.calls; i++) {
		free(S.sent[i]);
		free(S.host[i]);
	}
	memset(&S, 0, sizeof(S));
}

static int scripted_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                         long connect_timeout_ms, size_t max, struct isc_http_response *resp,
                         struct isc_err *err)
{
	(void)ctx, (void)timeout_ms, (void)connect_timeout_ms, (void)max;
	assert_true(S.calls < 4096);
	S.sent[S.calls] = strndup(req->body ? req->body : "", req->body_len);
	for (size_t i = 0; i < req->n_headers; i++) {
		/* Secrets never travel in clear: only in the signature. */
		assert_null(strstr(req->headers[i].value, SECRET));
		if (strcmp(req->headers[i].name, "Host") == 0)
			S.host[S.calls] = strdup(req->headers[i].value);
	}
	S.calls++;
	return driver_script_answer(req, S.calls, "refused", resp, err);
}

static const struct isc_http_transport scripted = {scripted_send, NULL};

/* ---- fixed clock ---- */

static int64_t slept_ms;
static int64_t clock_moved_ms; /* what a test moved the clock on by */
static int64_t fixed_now(void *c)
{
	(void)c;
	return 1700000000000LL + clock_moved_ms;
}
static void fake_sleep(void *c, int64_t ms)
{
	(void)c;
	slept_ms += ms;
}
static uint64_t fake_rand(void *c)
{
	(void)c;
	return 7;
}
static const struct isc_clock fake_clock = {fixed_now, fake_sleep, fake_rand, NULL};

/* ---- helpers ---- */

static const struct isc_kv creds[] = {
    {"access_key_id", "AKIDTEST"},
    {"secret_access_key", SECRET},
};
static const struct isc_kv items[] = {
    {"endpoint", "http://127.0.0.1:9"},
    {"image_id", "ami-12345678"},
    /* named here, so launches make no DescribeImages call (test_root_volume does) */
    {"root_device_name", "/dev/sda1"},
    /* describe makes no tenant security group sweep (test_tenant_groups_* do) */
    {"tenant_isolation", "never"},
};

static struct isc_provider_session *session(void)
{
	const struct isc_provider *p = isc_provider_find("aws");
	struct isc_provider_settings st = {items, 4, creds, 2};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	assert_non_null(p);
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err), 0);
	return s;
}

static const char *instance_xml(const char *id, const char *zone, int spot, int code)
{
	static char buf[8][1024];
	static int k;
	char *b = buf[k++ % 8];
	snprintf(b, 1024,
	         "<item><instanceId>%s</instanceId><instanceState><code>%d</code><name>x</name>"
	         "</instanceState><instanceType>g5.xlarge</"
	         "instanceType><launchTime>2026-11-22T10:00:00.000Z"
	         "</launchTime><placement><availabilityZone>%s</availabilityZone></placement>"
	         "<privateIpAddress>10.0.0.%d</privateIpAddress>%s<clientToken>tok</clientToken>"
	         "<tagSet><item><key>isc:broker</key><value>b1</value></"
	         "item><item><key>isc:cluster</key>"
	         "<value>c7</value></item></tagSet></item>",
	         id, code, zone, (int)strlen(id),
	         spot ? "<instanceLifecycle>spot</instanceLifecycle>" : "");
	return b;
}

static const char *ec2_error(const char *code, const char *msg)
{
	static char b[1024];
	snprintf(
	    b, sizeof(b),
	    "<?xml version=\"1.0\"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message>"
	    "</Error></Errors><RequestID>r-1</RequestID></Response>",
	    code, msg);
	return b;
}

static int sent_has(size_t call, const char *needle)
{
	return call < S.calls && strstr(S.sent[call], needle) != NULL;
}

static const struct isc_kv tags[] = {
    {"isc:broker", "b1"}, {"isc:cluster", "c7"}, {"isc:experiment", "e42"}};
static const char *zones_ab[] = {"us-east-1a", "us-east-1b"};

static struct isc_launch_spec spec2(unsigned count)
{
	struct isc_launch_spec sp = {
	    .instance_type = "g5.xlarge",
	    .spot = 1,
	    .zones = zones_ab,
	    .n_zones = 2,
	    .count = count,
	    .idempotency_token = "tok",
	    .tags = tags,
	    .n_tags = 3,
	    .ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample isc@cluster",
	};
	return sp;
}

static int setup(void **state)
{
	(void)state;
	script_reset();
	driver_script.repeat_last = 0;
	slept_ms = 0;
	clock_moved_ms = 0;
	isc_sweep_forget_all(); /* each test is a process that has not swept yet */
	return 0;
}

static const char *pg_created =
    "<CreatePlacementGroupResponse><placementGroup><groupName>g</groupName>"
    "<state>available</state><strategy>cluster</strategy></placementGroup><return>true</return>"
    "</CreatePlacementGroupResponse>";

/* A DescribeInstanceTypes reply for one type with max_efa EFA interfaces over `cards` cards. */
static const char *itype_xml(const char *type, int max_efa, int cards)
{
	static char b[1024];
	char efa[128] = "";
	if (max_efa)
		snprintf(efa, sizeof(efa),
		         "<efaInfo><maximumEfaInterfaces>%d</maximumEfaInterfaces></efaInfo>",
		         max_efa);
	snprintf(b, sizeof(b),
	         "<DescribeInstanceTypesResponse><instanceTypeSet><item><instanceType>%s"
	         "</instanceType><networkInfo><maximumNetworkCards>%d</maximumNetworkCards>"
	         "<efaSupported>%s</efaSupported>%s</networkInfo></item></instanceTypeSet>"
	         "</DescribeInstanceTypesResponse>",
	         type, cards, max_efa ? "true" : "false", efa);
	return b;
}

/* A DescribeSecurityGroups reply: sg with or without the self rules EFA needs. */
static const char *sg_xml(const char *sg, int self_in, int self_out)
{
	static char b[2048];
	char in[512] = "", out[512] = "";
	if (self_in)
		snprintf(
		    in, sizeof(in),
		    "<item><ipProtocol>-1</ipProtocol><groups><item><groupId>%s</groupId></item>"
		    "</groups><ipRanges/></item>",
		    sg);
	else
		snprintf(
		    in, sizeof(in),
		    "<item><ipProtocol>tcp</ipProtocol><fromPort>22</fromPort><toPort>22</toPort>"
		    "<groups/><ipRanges><item><cidrIp>0.0.0.0/0</cidrIp></item></ipRanges></item>");
	if (self_out)
		snprintf(
		    out, sizeof(out),
		    "<item><ipProtocol>-1</ipProtocol><groups/><ipRanges><item><cidrIp>0.0.0.0/0"
		    "</cidrIp></item></ipRanges></item>");
	snprintf(b, sizeof(b),
	         "<DescribeSecurityGroupsResponse><securityGroupInfo><item><groupId>%s</groupId>"
	         "<ipPermissions>%s</ipPermissions><ipPermissionsEgress>%s</ipPermissionsEgress>"
	         "</item></securityGroupInfo></DescribeSecurityGroupsResponse>",
	         sg, in, out);
	return b;
}

static struct isc_provider_session *session_with(const struct isc_kv *it, size_t n)
{
	const struct isc_provider *p = isc_provider_find("aws");
	struct isc_provider_settings st = {it, n, creds, 2};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err), 0);
	return s;
}

/* ---- tests ---- */

static void test_launch_request(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, "%s", itype_xml("g5.xlarge", 0, 1));
	reply(200, "%s", pg_created);
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-a1", "us-east-1a", 1, 0), instance_xml("i-a2", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_string_equal(S.host[0], "127.0.0.1:9");
	/* A gang of two: its type's network first, then its own cluster placement group. */
	assert_true(sent_has(0, "Action=DescribeInstanceTypes&Version=2016-11-15&InstanceType.1="
	                        "g5.xlarge"));
	assert_true(sent_has(1, "Action=CreatePlacementGroup&Version=2016-11-15&GroupName=isc-tok-"
	                        "us-east-1a&Strategy=cluster&TagSpecification.1.ResourceType="
	                        "placement-group&TagSpecification.1.Tag.1.Key=isc%3Abroker&"
	                        "TagSpecification.1.Tag.1.Value=b1"));
	assert_true(sent_has(1, "TagSpecification.1.Tag.2.Key=isc%3Acluster&TagSpecification.1.Tag."
	                        "2.Value=c7"));
	/* g5.xlarge has no EFA: no interface is asked for. */
	assert_false(sent_has(2, "NetworkInterface"));
	assert_true(sent_has(2, "&Placement.GroupName=isc-tok-us-east-1a"));
	assert_true(sent_has(2, "Action=RunInstances&Version=2016-11-15"));
	assert_true(sent_has(2, "&MinCount=2&MaxCount=2&"));
	assert_true(sent_has(2, "&ClientToken=tok-us-east-1a&"));
	assert_true(sent_has(2, "&Placement.AvailabilityZone=us-east-1a"));
	assert_true(sent_has(2, "&ImageId=ami-12345678"));
	/* the root volume: the image's root device, disk_size_gb (default 200) of gp3 */
	assert_true(sent_has(2,
	                     "&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fsda1&BlockDeviceMapping.1."
	                     "Ebs.VolumeSize=200&BlockDeviceMapping.1.Ebs.VolumeType=gp3&"
	                     "BlockDeviceMapping.1.Ebs.DeleteOnTermination=true"));
	assert_true(sent_has(2, "&InstanceMarketOptions.MarketType=spot"));
	assert_true(sent_has(2, "&InstanceMarketOptions.SpotOptions.SpotInstanceType=one-time"));
	assert_true(sent_has(
	    2, "&InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior=terminate"));
	assert_true(sent_has(2, "&TagSpecification.1.ResourceType=instance"));
	assert_true(sent_has(
	    2,
	    "&TagSpecification.1.Tag.3.Key=isc%3Aexperiment&TagSpecification.1.Tag.3.Value=e42"));
	assert_true(sent_has(2, "&TagSpecification.2.ResourceType=spot-instances-request"));
	{
		/* The user data is the cloud-config that authorises the cluster key. */
		const char *u = strstr(S.sent[2], "UserData=");
		char b64[1024], raw[1024];
		size_t l;
		assert_non_null(u);
		u += 9;
		l = strcspn(u, "&");
		memcpy(b64, u, l);
		b64[l] = '\0';
		/* '=' padding is percent-encoded in the form */
		for (char *p = strstr(b64, "%3D"); p; p = strstr(b64, "%3D"))
			memmove(p + 1, p + 3, strlen(p + 3) + 1), *p = '=';
		int n =
		    EVP_DecodeBlock((unsigned char *)raw, (unsigned char *)b64, (int)strlen(b64));
		assert_true(n > 0);
		raw[n] = '\0';
		assert_non_null(
		    strstr(raw, "#cloud-config\nssh_authorized_keys:\n  - ssh-ed25519 AAAAC3"));
	}
	assert_string_equal(r.zone, "us-east-1a");
	assert_string_equal(r.token, "tok-us-east-1a");
	assert_int_equal(r.n_nodes, 2);
	assert_string_equal(r.nodes[1].id, "i-a2");
	assert_int_equal(r.nodes[0].state, ISC_NODE_PENDING);
	assert_string_equal(r.nodes[0].experiment_id, "e42");
	assert_int_equal(r.nodes[0].spot, 1);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_capacity_then_next_zone(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = spec2(1);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(500, "%s", ec2_error("InsufficientInstanceCapacity", "no g5.xlarge in us-east-1a"));
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-b1", "us-east-1b", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2); /* capacity is not retried in the same zone */
	assert_true(sent_has(0, "Placement.AvailabilityZone=us-east-1a"));
	assert_true(sent_has(1, "Placement.AvailabilityZone=us-east-1b"));
	assert_true(sent_has(1, "ClientToken=tok-us-east-1b"));
	assert_string_equal(r.zone, "us-east-1b");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_capacity_everywhere(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = spec2(1);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(400, "%s", ec2_error("InsufficientInstanceCapacity", "none in a"));
	reply(400, "%s", ec2_error("Unsupported", "not in b"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_int_equal(err.code, ISC_ECAPACITY);
	assert_non_null(strstr(err.msg, "Unsupported"));
	assert_int_equal(S.calls, 2);
	s->provider->session_free(s);
}

static void test_partial_gang(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = spec2(3);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	sp.n_zones = 1;
	reply(200, "%s", itype_xml("g5.xlarge", 0, 1));
	reply(200, "%s", pg_created);
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-p1", "us-east-1a", 1, 0), instance_xml("i-p2", "us-east-1a", 1, 0));
	reply(200, "<TerminateInstancesResponse><instancesSet/></TerminateInstancesResponse>");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	/* The group still holds the shutting-down nodes: describe's reconcile deletes it later. */
	assert_int_equal(S.calls, 4);
	assert_true(sent_has(3, "Action=TerminateInstances"));
	assert_true(sent_has(3, "InstanceId.1=i-p1&InstanceId.2=i-p2"));
	assert_null(r.nodes);
	s->provider->session_free(s);
}

/*
 * A p4d gang: EFA on every network card (DescribeInstanceTypes), the security group's self
 * rule checked, a cluster placement group per zone. Zone a's group is refused
 * (InvalidPlacementGroup.InUse, a capacity answer): its group is deleted and zone b gets
 * a group of its own.
 */
static void test_efa_gang_group_per_zone(void **state)
{
	const struct isc_kv it[] = {{"endpoint", "http://127.0.0.1:9"},
	                            {"image_id", "ami-12345678"},
	                            {"security_group_id", "sg-1"},
	                            {"root_device_name", "/dev/sda1"}};
	struct isc_provider_session *s = session_with(it, 4);
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	sp.instance_type = "p4d.24xlarge";
	reply(200, "%s", itype_xml("p4d.24xlarge", 4, 4));
	reply(200, "%s", sg_xml("sg-1", 1, 1));
	reply(200, "%s", pg_created);
	reply(400, "%s",
	      ec2_error("InvalidPlacementGroup.InUse",
	                "The placement group 'isc-tok-us-east-1a' is in use in another zone"));
	reply(200, "<DeletePlacementGroupResponse><return>true</return>"
	           "</DeletePlacementGroupResponse>");
	reply(200, "%s", pg_created);
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-e1", "us-east-1b", 1, 0), instance_xml("i-e2", "us-east-1b", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 7);
	assert_true(sent_has(1, "Action=DescribeSecurityGroups&Version=2016-11-15&GroupId.1=sg-1"));
	assert_true(sent_has(2, "Action=CreatePlacementGroup") &&
	            sent_has(2, "GroupName=isc-tok-us-east-1a&Strategy=cluster"));
	assert_true(sent_has(3, "&Placement.GroupName=isc-tok-us-east-1a"));
	assert_true(sent_has(4, "Action=DeletePlacementGroup&Version=2016-11-15&GroupName=isc-tok-"
	                        "us-east-1a"));
	assert_true(sent_has(5, "GroupName=isc-tok-us-east-1b&Strategy=cluster"));
	assert_true(sent_has(6,
	                     "&Placement.AvailabilityZone=us-east-1b&Placement.GroupName=isc-tok-"
	                     "us-east-1b"));
	/* card 0: efa with the IP; cards 1..3: efa-only; the group inside each */
	assert_true(sent_has(6, "&NetworkInterface.1.DeviceIndex=0&NetworkInterface.1."
	                        "NetworkCardIndex=0&NetworkInterface.1.InterfaceType=efa&"
	                        "NetworkInterface.1.DeleteOnTermination=true&NetworkInterface.1."
	                        "SecurityGroupId.1=sg-1"));
	assert_true(sent_has(6, "&NetworkInterface.4.DeviceIndex=0&NetworkInterface.4."
	                        "NetworkCardIndex=3&NetworkInterface.4.InterfaceType=efa-only"));
	assert_false(sent_has(6, "NetworkInterface.5."));
	assert_false(sent_has(6, "&SubnetId="));
	assert_false(sent_has(6, "&SecurityGroupId.1="));
	assert_false(sent_has(6, "AssociatePublicIpAddress"));
	assert_string_equal(r.zone, "us-east-1b");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/* Without the self rule EFA needs, nothing is launched and the missing rule is named. */
static void test_efa_security_group_rule_missing(void **state)
{
	const struct isc_kv it[] = {{"endpoint", "http://127.0.0.1:9"},
	                            {"security_group_id", "sg-2"},
	                            {"associate_public_ip", "true"},
	                            {"root_device_name", "/dev/sda1"}};
	struct isc_provider_session *s = session_with(it, 4);
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	sp.instance_type = "p5.48xlarge";
	reply(200, "%s", itype_xml("p5.48xlarge", 32, 32));
	reply(200, "%s", sg_xml("sg-2", 0, 1));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 2);
	assert_non_null(strstr(err.msg,
	                       "security group sg-2 lacks the rule EFA needs: inbound: all "
	                       "traffic from the group itself"));
	assert_null(strstr(err.msg, "outbound"));
	/* with the rule: a public IP allows one interface only, so card 0's EFA alone */
	script_reset();
	reply(200, "%s", itype_xml("p5.48xlarge", 32, 32));
	reply(200, "%s", sg_xml("sg-2", 1, 1));
	reply(200, "%s", pg_created);
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-f1", "us-east-1a", 1, 0), instance_xml("i-f2", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_true(sent_has(3, "&NetworkInterface.1.InterfaceType=efa&"));
	assert_true(sent_has(3, "&NetworkInterface.1.AssociatePublicIpAddress=true"));
	assert_false(sent_has(3, "NetworkInterface.2."));
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/* A DescribeSecurityGroups reply for sg with inbound permission `in` and egress all. */
static const char *sg_in_xml(const char *sg, const char *in)
{
	static char b[2048];
	snprintf(b, sizeof(b),
	         "<DescribeSecurityGroupsResponse><securityGroupInfo><item><groupId>%s</groupId>"
	         "<ipPermissions>%s</ipPermissions><ipPermissionsEgress><item><ipProtocol>-1"
	         "</ipProtocol><groups/><ipRanges><item><cidrIp>0.0.0.0/0</cidrIp></item>"
	         "</ipRanges></item></ipPermissionsEgress></item></securityGroupInfo>"
	         "</DescribeSecurityGroupsResponse>",
	         sg, in);
	return b;
}

#define TCP_PERM(from, to, src)                                                                    \
	"<item><ipProtocol>tcp</ipProtocol><fromPort>" from "</fromPort><toPort>" to               \
	"</toPort>" src "</item>"
#define FROM_GROUP(g) "<groups><item><groupId>" g "</groupId></item></groups><ipRanges/>"
#define FROM_CIDR(c)  "<groups/><ipRanges><item><cidrIp>" c "</cidrIp></item></ipRanges>"

/* Which inbound rules give a gang without EFA all TCP among its nodes. */
static void test_tcp_rules_parse(void **state)
{
	struct isc_err err;
	int in, out;
	const char *x;
	(void)state;
	x = sg_in_xml("sg-3", TCP_PERM("0", "65535", FROM_GROUP("sg-3")));
	assert_int_equal(isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-3", NULL, &in, &out, &err),
	                 0);
	assert_true(in && out);
	x = sg_in_xml("sg-3", "<item><ipProtocol>-1</ipProtocol>" FROM_GROUP("sg-3") "</item>");
	assert_int_equal(isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-3", NULL, &in, &out, &err),
	                 0);
	assert_true(in);
	/* the rendezvous port alone, another group, SSH from anywhere: not enough */
	x = sg_in_xml("sg-3", TCP_PERM("29500", "29500", FROM_GROUP("sg-3"))
	                          TCP_PERM("0", "65535", FROM_GROUP("sg-9"))
	                              TCP_PERM("22", "22", FROM_CIDR("0.0.0.0/0")));
	assert_int_equal(isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-3", NULL, &in, &out, &err),
	                 0);
	assert_false(in);
	assert_true(out);
	/* a CIDR holding the subnet counts when the subnet's range is known */
	x = sg_in_xml("sg-3", TCP_PERM("0", "65535", FROM_CIDR("10.0.0.0/16")));
	assert_int_equal(
	    isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-3", "10.0.4.0/24", &in, &out, &err), 0);
	assert_true(in);
	assert_int_equal(
	    isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-3", "10.1.4.0/24", &in, &out, &err), 0);
	assert_false(in);
	assert_int_equal(isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-3", NULL, &in, &out, &err),
	                 0);
	assert_false(in);
	assert_int_equal(isc_ec2_parse_sg_tcp_rules(x, strlen(x), "sg-4", NULL, &in, &out, &err),
	                 ISC_EINVALID);
}

/* A g5 gang (no EFA) with a security group lacking all TCP from itself: refused, named. */
static void test_tcp_security_group_rule_missing(void **state)
{
	const struct isc_kv it[] = {{"endpoint", "http://127.0.0.1:9"},
	                            {"security_group_id", "sg-3"},
	                            {"efa", "never"},
	                            {"root_device_name", "/dev/sda1"}};
	struct isc_provider_session *s = session_with(it, 4);
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, "%s", sg_in_xml("sg-3", TCP_PERM("22", "22", FROM_CIDR("0.0.0.0/0"))));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 1); /* nothing launched */
	assert_true(sent_has(0, "Action=DescribeSecurityGroups&Version=2016-11-15&GroupId.1=sg-3"));
	assert_non_null(strstr(err.msg, "security group sg-3 lacks the rule a gang needs: inbound: "
	                                "all TCP from the group itself (EC2 User Guide"));
	/* with the self rule: the group, then the launch */
	script_reset();
	reply(200, "%s", sg_in_xml("sg-3", TCP_PERM("0", "65535", FROM_GROUP("sg-3"))));
	reply(200, "%s", pg_created);
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-t1", "us-east-1a", 1, 0), instance_xml("i-t2", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_false(sent_has(2, "NetworkInterface"));
	isc_launch_result_cleanup(&r);
	/* one node: nothing to check */
	script_reset();
	sp = spec2(1);
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-t3", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 1);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * With subnet_id the nodes can only go to the subnet's zone (RunInstances refuses another
 * Placement.AvailabilityZone), and a rule from a range holding the subnet is enough.
 */
static void test_subnet_pins_zone_and_range(void **state)
{
	const struct isc_kv it[] = {
	    {"endpoint", "http://127.0.0.1:9"}, {"subnet_id", "subnet-1"},
	    {"security_group_id", "sg-3"},      {"efa", "never"},
	    {"cluster_placement", "never"},     {"root_device_name", "/dev/sda1"}};
	const char *subnet =
	    "<DescribeSubnetsResponse><subnetSet><item><subnetId>subnet-1</subnetId>"
	    "<availabilityZone>us-east-1b</availabilityZone><cidrBlock>10.0.4.0/"
	    "24</cidrBlock></item></subnetSet></DescribeSubnetsResponse>";
	static const char *const only_a[] = {"us-east-1a"};
	struct isc_provider_session *s = session_with(it, 6);
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, "%s", subnet);
	reply(200, "%s", sg_in_xml("sg-3", TCP_PERM("0", "65535", FROM_CIDR("10.0.0.0/16"))));
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-s1", "us-east-1b", 1, 0), instance_xml("i-s2", "us-east-1b", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_true(sent_has(0, "Action=DescribeSubnets&Version=2016-11-15&SubnetId.1=subnet-1"));
	assert_true(sent_has(2, "&Placement.AvailabilityZone=us-east-1b"));
	assert_true(sent_has(2, "&SubnetId=subnet-1"));
	assert_string_equal(r.zone, "us-east-1b");
	isc_launch_result_cleanup(&r);
	/* asked once per session; a range that does not hold the subnet is named */
	script_reset();
	reply(200, "%s", sg_in_xml("sg-3", TCP_PERM("0", "65535", FROM_CIDR("10.1.0.0/16"))));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 1);
	assert_non_null(strstr(err.msg, "inbound: all TCP from the group itself or a range holding "
	                                "10.0.4.0/24"));
	/* a shape offered only in another zone: nothing sent, a capacity answer naming why */
	script_reset();
	sp.zones = only_a;
	sp.n_zones = 1;
	reply(200, "%s", sg_in_xml("sg-3", TCP_PERM("0", "65535", FROM_GROUP("sg-3"))));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_int_equal(S.calls, 1);
	assert_non_null(strstr(err.msg, "subnet subnet-1 is in us-east-1b, not us-east-1a"));
	s->provider->session_free(s);
}

/* ---- tenants on the platform's account (issue 42) ---- */

static const struct isc_kv tenant_items[] = {
    {"endpoint", "http://127.0.0.1:9"}, {"image_id", "ami-12345678"},
    {"root_device_name", "/dev/sda1"},  {"security_group_id", "sg-op"},
    {"cluster_placement", "never"},     {"tenant_ssh_cidr", "192.0.2.0/24"},
    {"tenant_ssh_port", "2222"},
};

/*
 * A tenant's launch makes its security group (found by name, else created, tagged, with
 * all traffic from itself and SSH from tenant_ssh_cidr) and puts the nodes in it instead
 * of the operator's group; the next launch finds it ready. Without a tenant (an
 * organisation's own account) the operator's group stands and no group call is made.
 */
static void test_tenant_group_made_and_attached(void **state)
{
	struct isc_provider_session *s = session_with(tenant_items, 7);
	struct isc_launch_spec sp = spec2(1);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	sp.tenant = "17";
	reply(200, "<DescribeSecurityGroupsResponse><securityGroupInfo/>"
	           "</DescribeSecurityGroupsResponse>");
	reply(200, "<CreateSecurityGroupResponse><return>true</return><groupId>sg-t17</groupId>"
	           "</CreateSecurityGroupResponse>");
	reply(200, "<AuthorizeSecurityGroupIngressResponse><return>true</return>"
	           "</AuthorizeSecurityGroupIngressResponse>");
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-t1", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_true(sent_has(0, "Action=DescribeSecurityGroups&Version=2016-11-15&Filter.1.Name="
	                        "group-name&Filter.1.Value.1=isc-tenant-b1-17"));
	assert_true(sent_has(1, "Action=CreateSecurityGroup&Version=2016-11-15&GroupName="
	                        "isc-tenant-b1-17&GroupDescription="));
	assert_true(sent_has(1, "TagSpecification.1.ResourceType=security-group&TagSpecification."
	                        "1.Tag.1.Key=isc%3Abroker&TagSpecification.1.Tag.1.Value=b1&"
	                        "TagSpecification.1.Tag.2.Key=isc%3Atenant&TagSpecification.1."
	                        "Tag.2.Value=17"));
	assert_true(sent_has(2, "Action=AuthorizeSecurityGroupIngress&Version=2016-11-15&GroupId="
	                        "sg-t17&IpPermissions.1.IpProtocol=-1&IpPermissions.1.Groups.1."
	                        "GroupId=sg-t17&IpPermissions.2.IpProtocol=tcp&IpPermissions.2."
	                        "FromPort=2222&IpPermissions.2.ToPort=2222&IpPermissions.2."
	                        "IpRanges.1.CidrIp=192.0.2.0%2F24"));
	assert_true(sent_has(3, "Action=RunInstances"));
	assert_true(sent_has(3, "&SecurityGroupId.1=sg-t17"));
	assert_false(sent_has(3, "sg-op"));
	isc_launch_result_cleanup(&r);

	/* The group is there with its rule: found, nothing made, straight to RunInstances. */
	script_reset();
	reply(200,
	      "<DescribeSecurityGroupsResponse><securityGroupInfo><item><groupId>sg-t17</groupId>"
	      "<groupName>isc-tenant-b1-17</groupName><ipPermissions><item><ipProtocol>-1"
	      "</ipProtocol><groups><item><groupId>sg-t17</groupId></item></groups><ipRanges/>"
	      "</item></ipPermissions><ipPermissionsEgress/></item></securityGroupInfo>"
	      "</DescribeSecurityGroupsResponse>");
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-t1", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_true(sent_has(1, "&SecurityGroupId.1=sg-t17"));
	isc_launch_result_cleanup(&r);

	/* Made by a concurrent launch between our look and our create: found again, and its
	 * rules, added by that launch meanwhile, count as there. */
	script_reset();
	reply(200, "<DescribeSecurityGroupsResponse><securityGroupInfo/>"
	           "</DescribeSecurityGroupsResponse>");
	reply(400, "%s", ec2_error("InvalidGroup.Duplicate", "already exists"));
	reply(200, "<DescribeSecurityGroupsResponse><securityGroupInfo><item><groupId>sg-t17"
	           "</groupId><groupName>isc-tenant-b1-17</groupName><ipPermissions/>"
	           "<ipPermissionsEgress/></item></securityGroupInfo>"
	           "</DescribeSecurityGroupsResponse>");
	reply(400, "%s", ec2_error("InvalidPermission.Duplicate", "rule already exists"));
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-t1", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 5);
	assert_true(sent_has(4, "&SecurityGroupId.1=sg-t17"));
	isc_launch_result_cleanup(&r);

	/* An organisation's own account: the operator's group, no tenant group. */
	script_reset();
	sp.tenant = NULL;
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-t1", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 1);
	assert_true(sent_has(0, "&SecurityGroupId.1=sg-op"));
	isc_launch_result_cleanup(&r);

	/* A tenant name that cannot name a group: refused before any call. */
	script_reset();
	sp.tenant = "Org A";
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 0);
	assert_non_null(strstr(err.msg, "tenant 'Org A'"));
	s->provider->session_free(s);
}

/* with_sg: instance_xml with a security group in its groupSet. */
static const char *with_sg(const char *id, int code, const char *sg)
{
	static char buf[16][1200];
	static int k;
	char *b = buf[k++ % 16], tail[1200], *p;
	snprintf(b, 1200, "%s", instance_xml(id, "us-east-1a", 0, code));
	p = strstr(b, "<clientToken>");
	snprintf(tail, sizeof(tail), "%s", p);
	snprintf(
	    p, 1200 - (size_t)(p - b),
	    "<groupSet><item><groupId>%s</groupId><groupName>n</groupName></item></groupSet>%s", sg,
	    tail);
	return b;
}

/*
 * describe sweeps the tenant groups (tagged isc:broker and isc:tenant) no live instance
 * is in: deleted; one whose instances still shut down (DependencyViolation) waits; one in
 * use stays. Then not again until something changes.
 */
static void test_tenant_groups_swept(void **state)
{
	struct isc_provider_session *s = session_with(tenant_items, 7);
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	(void)state;
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s%s"
	      "</instancesSet></item></reservationSet></DescribeInstancesResponse>",
	      with_sg("i-a1", 16, "sg-ta"), with_sg("i-b1", 48, "sg-tb"),
	      with_sg("i-o1", 48, "sg-op"));
	reply(200, "<DescribeSecurityGroupsResponse><securityGroupInfo>"
	           "<item><groupId>sg-ta</groupId><groupName>isc-tenant-b1-a</groupName></item>"
	           "<item><groupId>sg-tb</groupId><groupName>isc-tenant-b1-b</groupName></item>"
	           "<item><groupId>sg-tc</groupId><groupName>isc-tenant-b1-c</groupName></item>"
	           "</securityGroupInfo></DescribeSecurityGroupsResponse>");
	reply(200, "<DeleteSecurityGroupResponse><return>true</return>"
	           "</DeleteSecurityGroupResponse>");
	reply(400, "%s", ec2_error("DependencyViolation", "resource sg-tc has a dependent object"));
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	isc_node_infos_free(ni, n);
	assert_int_equal(S.calls, 4);
	assert_true(sent_has(1, "Action=DescribeSecurityGroups&Version=2016-11-15&Filter.1.Name="
	                        "tag%3Aisc%3Abroker&Filter.1.Value.1=b1&Filter.2.Name=tag-key&"
	                        "Filter.2.Value.1=isc%3Atenant"));
	assert_true(sent_has(2, "Action=DeleteSecurityGroup&Version=2016-11-15&GroupId=sg-tb"));
	assert_true(sent_has(3, "GroupId=sg-tc"));
	/* The same listing: sg-tb known gone, sg-op not ours (not listed): no sweep. */
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s%s"
	      "</instancesSet></item></reservationSet></DescribeInstancesResponse>",
	      with_sg("i-a1", 16, "sg-ta"), with_sg("i-b1", 48, "sg-tb"),
	      with_sg("i-o1", 48, "sg-op"));
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	isc_node_infos_free(ni, n);
	assert_int_equal(S.calls, 5);
	/* tenant_isolation = never: no group call, whatever the listing. */
	s->provider->session_free(s);
	script_reset();
	isc_sweep_forget_all();
	{
		static const struct isc_kv off[] = {{"endpoint", "http://127.0.0.1:9"},
		                                    {"cluster_placement", "never"},
		                                    {"tenant_isolation", "never"}};
		s = session_with(off, 3);
	}
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s"
	      "</instancesSet></item></reservationSet></DescribeInstancesResponse>",
	      with_sg("i-b1", 48, "sg-tb"));
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	isc_node_infos_free(ni, n);
	assert_int_equal(S.calls, 1);
	s->provider->session_free(s);
}

/* describe deletes the tagged cluster groups no live instance uses, and only those. */
static void test_describe_reconciles_groups(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	char live[1200], dead[1200];
	(void)state;
	/* instance_xml has no group: splice one into its placement */
	snprintf(live, sizeof(live), "%s", instance_xml("i-l1", "us-east-1a", 0, 16));
	snprintf(dead, sizeof(dead), "%s", instance_xml("i-t1", "us-east-1b", 0, 48));
	{
		char *p = strstr(live, "</placement>"), tail[1200];
		snprintf(tail, sizeof(tail), "%s", p);
		snprintf(p, sizeof(live) - (size_t)(p - live), "<groupName>isc-A</groupName>%s",
		         tail);
		p = strstr(dead, "</placement>");
		snprintf(tail, sizeof(tail), "%s", p);
		snprintf(p, sizeof(dead) - (size_t)(p - dead), "<groupName>isc-B</groupName>%s",
		         tail);
	}
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      live, dead);
	reply(200, "<DescribePlacementGroupsResponse><placementGroupSet>"
	           "<item><groupName>isc-A</groupName><state>available</state><strategy>cluster"
	           "</strategy></item><item><groupName>isc-B</groupName><state>available</state>"
	           "<strategy>cluster</strategy></item><item><groupName>isc-C</groupName><state>"
	           "available</state><strategy>cluster</strategy></item><item><groupName>isc-D"
	           "</groupName><state>deleting</state><strategy>cluster</strategy></item>"
	           "</placementGroupSet></DescribePlacementGroupsResponse>");
	reply(200, "<DeletePlacementGroupResponse><return>true</return>"
	           "</DeletePlacementGroupResponse>");
	reply(400, "%s", ec2_error("InvalidPlacementGroup.InUse", "still shutting down"));
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(S.calls, 4);
	assert_true(sent_has(2, "Action=DeletePlacementGroup&Version=2016-11-15&GroupName=isc-B"));
	assert_true(sent_has(3, "GroupName=isc-C"));
	isc_node_infos_free(ni, n);
	s->provider->session_free(s);
}

/* in_group: instance_xml with a placement group spliced into its placement. */
static const char *in_group(const char *id, int code, const char *group)
{
	static char buf[16][1200];
	static int k;
	char *b = buf[k++ % 16], tail[1200], *p;
	snprintf(b, 1200, "%s", instance_xml(id, "us-east-1a", 0, code));
	p = strstr(b, "</placement>");
	snprintf(tail, sizeof(tail), "%s", p);
	snprintf(p, 1200 - (size_t)(p - b), "<groupName>%s</groupName>%s", group, tail);
	return b;
}

static const char *group_item(const char *name)
{
	static char buf[16][512];
	static int k;
	char *b = buf[k++ % 16];
	snprintf(b, sizeof(buf[0]),
	         "<item><groupName>%s</groupName><state>available</state><strategy>cluster"
	         "</strategy></item>",
	         name);
	return b;
}

static size_t groups_calls(void)
{
	size_t n = 0;
	for (size_t i = 0; i < S.calls; i++)
		n += strstr(S.sent[i], "Action=DescribePlacementGroups") != NULL;
	return n;
}

/* A describe that sweeps: the listing, the groups, then `deletes` deletes that succeed. */
static void reply_sweep(const char *listing, const char *groups, int deletes)
{
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      listing);
	reply(200,
	      "<DescribePlacementGroupsResponse><placementGroupSet>%s</placementGroupSet>"
	      "</DescribePlacementGroupsResponse>",
	      groups);
	for (int i = 0; i < deletes; i++)
		reply(200, "<DeletePlacementGroupResponse><return>true</return>"
		           "</DeletePlacementGroupResponse>");
}

/*
 * When describe sweeps the groups (providers/sweep.h): the first time, then only once a
 * group's instances are all terminated and no sweep saw it go, or every 5 minutes; and
 * at most 10 deletes a sweep, the rest at the next describe.
 */
static void test_describe_sweeps_groups_when_due(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	char names[12][32], listing[16384] = "", groups[4096] = "";
	(void)state;
#define DESCRIBE()                                                                                 \
	do {                                                                                       \
		assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);                \
		isc_node_infos_free(ni, n);                                                        \
	} while (0)
	/* 1. The first describe sweeps; both groups are in use. */
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      in_group("i-a1", 16, "isc-A"), in_group("i-b1", 16, "isc-B"));
	reply(200,
	      "<DescribePlacementGroupsResponse><placementGroupSet>%s%s</placementGroupSet>"
	      "</DescribePlacementGroupsResponse>",
	      group_item("isc-A"), group_item("isc-B"));
	DESCRIBE();
	assert_int_equal(groups_calls(), 1);
	/* 2. Nothing changed: no sweep. */
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      in_group("i-a1", 16, "isc-A"), in_group("i-b1", 16, "isc-B"));
	DESCRIBE();
	assert_int_equal(S.calls, 3);
	assert_int_equal(groups_calls(), 1);
	/* 3. B's instance is terminated: a sweep deletes B. */
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      in_group("i-a1", 16, "isc-A"), in_group("i-b1", 48, "isc-B"));
	reply(200,
	      "<DescribePlacementGroupsResponse><placementGroupSet>%s%s</placementGroupSet>"
	      "</DescribePlacementGroupsResponse>",
	      group_item("isc-A"), group_item("isc-B"));
	reply(200, "<DeletePlacementGroupResponse><return>true</return>"
	           "</DeletePlacementGroupResponse>");
	DESCRIBE();
	assert_int_equal(groups_calls(), 2);
	assert_true(sent_has(S.calls - 1, "Action=DeletePlacementGroup&Version=2016-11-15&"
	                                  "GroupName=isc-B"));
	/* 4. The same listing again (EC2 lists terminated instances for a while): B is known
	 * gone, no sweep. */
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      in_group("i-a1", 16, "isc-A"), in_group("i-b1", 48, "isc-B"));
	DESCRIBE();
	assert_int_equal(groups_calls(), 2);
	/* 5. Five minutes on: swept again (a leftover with no instance, isc-L, goes). */
	clock_moved_ms = 5 * 60 * 1000;
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      in_group("i-a1", 16, "isc-A"));
	reply(200,
	      "<DescribePlacementGroupsResponse><placementGroupSet>%s%s</placementGroupSet>"
	      "</DescribePlacementGroupsResponse>",
	      group_item("isc-A"), group_item("isc-L"));
	reply(200, "<DeletePlacementGroupResponse><return>true</return>"
	           "</DeletePlacementGroupResponse>");
	DESCRIBE();
	assert_int_equal(groups_calls(), 3);
	assert_true(sent_has(S.calls - 1, "GroupName=isc-L"));
	s->provider->session_free(s);

	/* 6. Twelve gangs torn down at once: 10 deletes, then the other 2 at the next one. */
	setup(NULL);
	s = session();
	for (int i = 0; i < 12; i++) {
		snprintf(names[i], sizeof(names[i]), "isc-G%02d", i);
		snprintf(listing + strlen(listing), sizeof(listing) - strlen(listing), "%s",
		         in_group(names[i] + 4, 48, names[i]));
		snprintf(groups + strlen(groups), sizeof(groups) - strlen(groups), "%s",
		         group_item(names[i]));
	}
	reply_sweep(listing, groups, 10);
	DESCRIBE();
	assert_int_equal(S.calls, 12);
	assert_true(sent_has(11, "GroupName=isc-G09"));
	groups[0] = 0;
	for (int i = 10; i < 12; i++)
		snprintf(groups + strlen(groups), sizeof(groups) - strlen(groups), "%s",
		         group_item(names[i]));
	reply_sweep(listing, groups, 2);
	DESCRIBE();
	assert_int_equal(S.calls, 16);
	assert_true(sent_has(15, "GroupName=isc-G11"));
	/* All twelve known gone: the next describe does not sweep. */
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      listing);
	DESCRIBE();
	assert_int_equal(S.calls, 17);
#undef DESCRIBE
	s->provider->session_free(s);
}

/* The settings: placement_group is refused with what replaced it; never turns both off. */
static void test_placement_settings(void **state)
{
	const struct isc_provider *p = isc_provider_find("aws");
	const struct isc_kv old[] = {{"endpoint", "http://127.0.0.1:9"},
	                             {"placement_group", "pg-1"}};
	const struct isc_kv bad[] = {{"endpoint", "http://127.0.0.1:9"}, {"efa", "yes"}};
	const struct isc_kv off[] = {{"endpoint", "http://127.0.0.1:9"},
	                             {"cluster_placement", "never"},
	                             {"efa", "never"},
	                             {"root_device_name", "/dev/sda1"}};
	struct isc_provider_settings st = {old, 2, creds, 2};
	struct isc_provider_session *s = NULL;
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "cluster_placement"));
	st.items = bad;
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "providers.aws.efa"));
	s = session_with(off, 4);
	sp.instance_type = "p4d.24xlarge";
	reply(200, "<RunInstancesResponse><instancesSet>%s%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-n1", "us-east-1a", 1, 0), instance_xml("i-n2", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 1);
	assert_false(sent_has(0, "Placement.GroupName"));
	assert_false(sent_has(0, "InterfaceType"));
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/* Without root_device_name, DescribeImages names the image's root device; disk_size_gb sizes it. */
static void test_root_volume(void **state)
{
	const struct isc_kv it[] = {{"endpoint", "http://127.0.0.1:9"},
	                            {"image_id", "ami-12345678"},
	                            {"disk_size_gb", "500"}};
	const struct isc_kv bad[] = {{"endpoint", "http://127.0.0.1:9"}, {"disk_size_gb", "0"}};
	const struct isc_provider *p = isc_provider_find("aws");
	struct isc_provider_settings st = {bad, 2, creds, 2};
	struct isc_provider_session *s = session_with(it, 3), *none = NULL;
	struct isc_launch_spec sp = spec2(1);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, "<DescribeImagesResponse><imagesSet><item><imageId>ami-12345678</imageId>"
	           "<rootDeviceName>/dev/xvda</rootDeviceName></item></imagesSet>"
	           "</DescribeImagesResponse>");
	reply(200, "<RunInstancesResponse><instancesSet>%s</instancesSet></RunInstancesResponse>",
	      instance_xml("i-r1", "us-east-1a", 1, 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_true(sent_has(0, "Action=DescribeImages&Version=2016-11-15&ImageId.1=ami-12345678"));
	assert_true(sent_has(1,
	                     "&BlockDeviceMapping.1.DeviceName=%2Fdev%2Fxvda&BlockDeviceMapping.1."
	                     "Ebs.VolumeSize=500&"));
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &none, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "disk_size_gb"));
}

static void test_auth_error_single_call(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = spec2(1);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(401, "%s",
	      ec2_error("AuthFailure",
	                "AWS was not able to validate the provided access credentials"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 1);
	assert_non_null(strstr(err.msg, "RunInstances: AuthFailure"));
	assert_null(strstr(err.msg, SECRET));
	s->provider->session_free(s);
}

static void test_secret_scrubbed_from_cloud_message(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	reply(403, "%s", ec2_error("SignatureDoesNotMatch", "canonical string ... " SECRET " ..."));
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_null(strstr(err.msg, SECRET));
	s->provider->session_free(s);
}

static void test_throttling_retried(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	reply(503, "%s", ec2_error("RequestLimitExceeded", "Request limit exceeded."));
	reply(503, "%s", ec2_error("RequestLimitExceeded", "Request limit exceeded."));
	reply(200,
	      "<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>arn:aws:iam::1:user/u</Arn>"
	      "<UserId>U</UserId><Account>111122223333</Account></GetCallerIdentityResult>"
	      "</GetCallerIdentityResponse>");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_true(slept_ms > 0);
	assert_true(sent_has(0, "Action=GetCallerIdentity&Version=2011-06-15"));
	assert_string_equal(id.account, "111122223333");
	assert_string_equal(id.principal, "arn:aws:iam::1:user/u");
	s->provider->session_free(s);
}

static void test_unreachable(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	for (int i = 0; i < 5; i++)
		reply(0, "x");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_ETRANSIENT);
	assert_int_equal(S.calls, 5);
	assert_non_null(strstr(err.msg, "cannot reach http://127.0.0.1:9/"));
	s->provider->session_free(s);
}

static void test_describe_paging_and_notice(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	(void)state;
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s%s</instancesSet>"
	      "</item></reservationSet><nextToken>PAGE2</nextToken></DescribeInstancesResponse>",
	      instance_xml("i-d1", "us-east-1a", 1, 16), instance_xml("i-d2", "us-east-1a", 1, 16));
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      instance_xml("i-d3", "us-east-1b", 0, 48));
	reply(200,
	      "<DescribeSpotInstanceRequestsResponse><spotInstanceRequestSet><item>"
	      "<spotInstanceRequestId>sir-1</spotInstanceRequestId><instanceId>i-d2</instanceId>"
	      "<state>active</state><status><code>marked-for-termination</code>"
	      "<updateTime>2026-11-22T10:05:00.000Z</updateTime></status></item><item>"
	      "<spotInstanceRequestId>sir-0</spotInstanceRequestId><instanceId>i-d1</instanceId>"
	      "<state>active</state><status><code>fulfilled</code></status></item>"
	      "</spotInstanceRequestSet></DescribeSpotInstanceRequestsResponse>");
	reply(200, "<DescribePlacementGroupsResponse><placementGroupSet/>"
	           "</DescribePlacementGroupsResponse>");
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_true(sent_has(3, "Action=DescribePlacementGroups&Version=2016-11-15&Filter.1.Name="
	                        "tag%3Aisc%3Abroker&Filter.1.Value.1=b1"));
	assert_true(sent_has(0, "Action=DescribeInstances"));
	assert_true(sent_has(0, "Filter.1.Name=tag%3Aisc%3Abroker&Filter.1.Value.1=b1"));
	assert_true(sent_has(0, "MaxResults=1000"));
	assert_false(sent_has(0, "NextToken"));
	assert_true(sent_has(1, "NextToken=PAGE2"));
	assert_true(sent_has(2, "Action=DescribeSpotInstanceRequests"));
	assert_int_equal(n, 3);
	assert_string_equal(ni[0].id, "i-d1");
	assert_int_equal(ni[0].interruption_noticed, 0);
	assert_int_equal(ni[1].interruption_noticed, 1);
	assert_int_equal(ni[1].interruption_at_ms, 1763805900000LL + 365LL * 86400000);
	assert_int_equal(ni[1].state, ISC_NODE_RUNNING);
	assert_int_equal(ni[2].state, ISC_NODE_TERMINATED);
	assert_string_equal(ni[2].zone, "us-east-1b");
	assert_string_equal(ni[2].cluster_id, "c7");
	assert_string_equal(ni[2].broker_id, "b1");
	assert_int_equal(ni[2].spot, 0);
	isc_node_infos_free(ni, n);
	s->provider->session_free(s);
}

static void test_terminate_batches(void **state)
{
	struct isc_provider_session *s = session();
	static char idbuf[2500][16];
	const char *ids[2500];
	struct isc_err err;
	(void)state;
	for (int i = 0; i < 2500; i++) {
		snprintf(idbuf[i], sizeof(idbuf[i]), "i-%05d", i);
		ids[i] = idbuf[i];
	}
	reply(200, "<TerminateInstancesResponse><instancesSet/></TerminateInstancesResponse>");
	driver_script.repeat_last = 1;
	assert_int_equal(s->provider->terminate(s, ids, 2500, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_true(sent_has(0, "InstanceId.1000=i-00999"));
	assert_false(sent_has(0, "InstanceId.1001="));
	assert_true(sent_has(1, "InstanceId.1=i-01000&"));
	assert_true(sent_has(2, "InstanceId.500=i-02499"));
	assert_false(sent_has(2, "InstanceId.501="));
	s->provider->session_free(s);
}

static void test_terminate_not_found(void **state)
{
	struct isc_provider_session *s = session();
	const char *ids[] = {"i-0aa", "i-0bb", "i-0cc"};
	struct isc_err err;
	(void)state;
	reply(400, "%s",
	      ec2_error("InvalidInstanceID.NotFound", "The instance ID 'i-0bb' does not exist"));
	reply(200, "<TerminateInstancesResponse><instancesSet/></TerminateInstancesResponse>");
	assert_int_equal(s->provider->terminate(s, ids, 3, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_true(sent_has(1, "InstanceId.1=i-0aa&InstanceId.2=i-0cc"));
	assert_false(sent_has(1, "i-0bb"));
	s->provider->session_free(s);
}

static void test_terminate_not_found_unnamed(void **state)
{
	struct isc_provider_session *s = session();
	const char *ids[] = {"i-0aa", "i-0bb"};
	struct isc_err err;
	(void)state;
	/* The message names no id we sent: one by one, and the unknown one is skipped. */
	reply(400, "%s", ec2_error("InvalidInstanceID.NotFound", "Some instances do not exist"));
	reply(200, "<TerminateInstancesResponse><instancesSet/></TerminateInstancesResponse>");
	reply(400, "%s", ec2_error("InvalidInstanceID.NotFound", "gone"));
	assert_int_equal(s->provider->terminate(s, ids, 2, &err), 0);
	assert_int_equal(S.calls, 3);
	s->provider->session_free(s);
}

static void test_prices_newest_per_zone(void **state)
{
	struct isc_provider_session *s = session();
	const char *types[] = {"g5.xlarge"};
	struct isc_price_point *pp;
	size_t n;
	struct isc_err err;
	(void)state;
#define SP(z, p, t)                                                                                \
	"<item><instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX"               \
	"</productDescription><spotPrice>" p "</spotPrice><timestamp>" t "</timestamp>"            \
	"<availabilityZone>" z "</availabilityZone></item>"
	reply(200,
	      "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>" SP(
	          "us-east-1a", "0.400000", "2026-11-22T09:00:00.000Z")
	          SP("us-east-1a", "0.450000",
	             "2026-11-22T10:00:00.000Z") "</spotPriceHistorySet><nextToken>N2</nextToken></"
	                                         "DescribeSpotPriceHistoryResponse>");
	reply(200, "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>" SP(
	               "us-east-1b", "0.3", "2026-11-22T08:00:00.000Z")
	               SP("us-east-1a", "0.5",
	                  "2026-11-22T07:00:00.000Z") "</spotPriceHistorySet></"
	                                              "DescribeSpotPriceHistoryResponse>");
#undef SP
	assert_int_equal(s->provider->refresh_prices(s, types, 1, &pp, &n, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_true(
	    sent_has(0, "InstanceType.1=g5.xlarge&ProductDescription.1=Linux%2FUNIX&StartTime="));
	assert_true(sent_has(1, "NextToken=N2"));
	assert_int_equal(n, 2);
	assert_string_equal(pp[0].zone, "us-east-1a");
	assert_int_equal(pp[0].price_micros_per_hour, 450000);
	assert_string_equal(pp[1].zone, "us-east-1b");
	assert_int_equal(pp[1].price_micros_per_hour, 300000);
	isc_price_points_free(pp, n);
	s->provider->session_free(s);
}

static void test_tokens_and_user_data(void **state)
{
	char tok[65], long_tok[65], *ud = NULL, *big;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_aws_zone_token("intent-17", "us-east-1a", tok, &err), 0);
	assert_string_equal(tok, "intent-17-us-east-1a");
	memset(long_tok, 'x', 64);
	long_tok[64] = '\0';
	assert_int_equal(isc_aws_zone_token(long_tok, "us-east-1a", tok, &err), 0);
	assert_true(strlen(tok) <= 64);
	{
		char tok_b[65];
		assert_int_equal(isc_aws_zone_token(long_tok, "us-east-1b", tok_b, &err), 0);
		assert_string_not_equal(tok, tok_b);
	}
	assert_int_equal(isc_aws_zone_token("bad token", "us-east-1a", tok, &err), ISC_EINVALID);
	assert_int_equal(isc_aws_user_data("ssh-ed25519 AAAA x\nsecond", NULL, &ud, &err),
	                 ISC_EINVALID);
	big = malloc(ISC_AWS_USER_DATA_MAX + 1);
	memset(big, 'a', ISC_AWS_USER_DATA_MAX);
	big[ISC_AWS_USER_DATA_MAX] = '\0';
	assert_int_equal(isc_aws_user_data("ssh-ed25519 AAAA x", big, &ud, &err), ISC_EINVALID);
	free(big);
	assert_int_equal(isc_aws_user_data("ssh-ed25519 AAAA x", "runcmd: [true]\n", &ud, &err), 0);
	free(ud);
}

static void test_registry(void **state)
{
	const struct isc_provider *const *all = isc_provider_list();
	(void)state;
	assert_non_null(isc_provider_find("aws"));
	assert_string_equal(isc_provider_find("gcp")->name, "gcp");
	assert_string_equal(isc_provider_find("oci")->name, "oci");
	assert_string_equal(all[0]->name, "aws");
	assert_string_equal(all[1]->name, "gcp");
	assert_string_equal(all[2]->name, "oci");
}

/* ---- against the mock cloud (tests/integration/aws-mock.sh) ---- */

static const struct isc_clock *real_clock(void)
{
	return isc_clock_system();
}

static struct isc_provider_session *mock_session(const char *secret)
{
	const struct isc_provider *p = isc_provider_find("aws");
	const struct isc_kv c[] = {{"access_key_id", "AKIDMOCKCLOUD000001"},
	                           {"secret_access_key", secret}};
	const struct isc_kv it[] = {{"endpoint", getenv("MOCKCLOUD_URL")}};
	struct isc_provider_settings st = {it, 1, c, 2};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	assert_int_equal(p->session_new(&st, "us-east-1", NULL, real_clock(), &s, &err), 0);
	return s;
}

static int mock_skip(void)
{
	const char *u = getenv("MOCKCLOUD_URL");
	return !u || !u[0];
}

static size_t count_token(const char *token)
{
	json_t *all = mock_api("GET", "instances", NULL), *v;
	size_t i, n = 0;
	json_array_foreach(all, i, v)
	{
		const char *t = json_string_value(json_object_get(v, "client_token"));
		if (t && strcmp(t, token) == 0)
			n++;
	}
	json_decref(all);
	return n;
}

static const char *mock_secret(void)
{
	const char *s = getenv("MOCKCLOUD_AWS_SECRET_ACCESS_KEY");
	return s ? s : "mock-secret-key-do-not-use-in-prod";
}

static void test_mockcloud_gang_lifecycle(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec2(4);
	const struct isc_kv mtags[] = {
	    {"isc:broker", "mock-b"}, {"isc:cluster", "c1"}, {"isc:experiment", "e1"}};
	struct isc_launch_result r;
	struct isc_node_info *ni;
	struct isc_identity id;
	size_t n;
	struct isc_err err;
	char body[512];
	const char *ids[4];
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(mock_secret());
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_string_equal(id.account, "123456789012");
	sp.tags = mtags;
	sp.idempotency_token = "mock-gang-1";
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 4);
	assert_int_equal(s->provider->describe(s, "mock-b", &ni, &n, &err), 0);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(ni[i].cluster_id, "c1");
		assert_int_equal(ni[i].spot, 1);
		assert_int_equal(ni[i].interruption_noticed, 0);
	}
	isc_node_infos_free(ni, n);
	/* interrupt node 0: first the notice, then the termination by the service */
	snprintf(body, sizeof(body),
	         "{\"kind\":\"interrupt\",\"instance_id\":\"%s\",\"notice_s\":1}", r.nodes[0].id);
	json_decref(mock_api("POST", "faults", body));
	assert_int_equal(s->provider->describe(s, "mock-b", &ni, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ni[i].interruption_noticed, strcmp(ni[i].id, r.nodes[0].id) == 0);
	isc_node_infos_free(ni, n);
	for (int tries = 0;; tries++) {
		int gone = 0;
		assert_true(tries < 50);
		usleep(200 * 1000);
		assert_int_equal(s->provider->describe(s, "mock-b", &ni, &n, &err), 0);
		for (size_t i = 0; i < n; i++)
			if (strcmp(ni[i].id, r.nodes[0].id) == 0 &&
			    ni[i].state == ISC_NODE_TERMINATED && ni[i].interruption_noticed)
				gone = 1;
		isc_node_infos_free(ni, n);
		if (gone)
			break;
	}
	for (int i = 0; i < 4; i++)
		ids[i] = r.nodes[i].id;
	/* terminate all four: one is already gone, which must not matter */
	assert_int_equal(s->provider->terminate(s, ids, 4, &err), 0);
	assert_int_equal(s->provider->terminate(s, ids, 4, &err), 0); /* idempotent */
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * Against the mock: a 2-node p4d gang whose zone a has no capacity. Zone a's group is
 * deleted, zone b's holds the gang with 4 EFA interfaces per node; once the nodes are
 * terminated, describe deletes zone b's group too.
 */
static void test_mockcloud_placement_failover(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec2(2);
	const struct isc_kv mtags[] = {
	    {"isc:broker", "mock-pg"}, {"isc:cluster", "c-pg"}, {"isc:experiment", "e-pg"}};
	struct isc_launch_result r;
	struct isc_node_info *ni;
	size_t n, i;
	struct isc_err err;
	json_t *all, *v;
	int found = 0;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(mock_secret());
	sp.tags = mtags;
	sp.instance_type = "p4d.24xlarge";
	sp.idempotency_token = "mock-pg-1";
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"capacity\",\"instance_type\":\"p4d.24xlarge\","
	                     "\"zone\":\"us-east-1a\",\"count\":1}"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "us-east-1b");
	all = mock_api("GET", "placement_groups", NULL);
	json_array_foreach(all, i, v)
	{
		const char *name = json_string_value(json_object_get(v, "name"));
		assert_string_not_equal(name, "isc-mock-pg-1-us-east-1a");
		if (strcmp(name, "isc-mock-pg-1-us-east-1b") == 0) {
			found = 1;
			assert_string_equal(json_string_value(json_object_get(v, "zone")),
			                    "us-east-1b");
			assert_int_equal(json_array_size(json_object_get(v, "members")), 2);
		}
	}
	json_decref(all);
	assert_true(found);
	all = mock_api("GET", "instances", NULL);
	json_array_foreach(all, i, v)
	{
		json_t *ifs = json_object_get(v, "interface_types");
		const char *tok = json_string_value(json_object_get(v, "client_token"));
		if (!tok || strcmp(tok, "mock-pg-1-us-east-1b") != 0)
			continue;
		assert_int_equal(json_array_size(ifs), 4);
		assert_string_equal(json_string_value(json_array_get(ifs, 0)), "efa");
		assert_string_equal(json_string_value(json_array_get(ifs, 3)), "efa-only");
	}
	json_decref(all);
	{
		const char *ids[] = {r.nodes[0].id, r.nodes[1].id};
		assert_int_equal(s->provider->terminate(s, ids, 2, &err), 0);
	}
	for (int tries = 0;; tries++) {
		assert_true(tries < 100);
		assert_int_equal(s->provider->describe(s, "mock-pg", &ni, &n, &err), 0);
		isc_node_infos_free(ni, n);
		found = 0;
		all = mock_api("GET", "placement_groups", NULL);
		json_array_foreach(all, i, v) found |=
		    strcmp(json_string_value(json_object_get(v, "name")),
		           "isc-mock-pg-1-us-east-1b") == 0;
		json_decref(all);
		if (!found)
			break;
		usleep(100 * 1000);
	}
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_mockcloud_lost_reply_no_duplicate(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec2(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(mock_secret());
	sp.idempotency_token = "mock-lost-1";
	json_decref(
	    mock_api("POST", "faults",
	             "{\"kind\":\"lose_response\",\"action\":\"RunInstances\",\"count\":1}"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 2);
	assert_int_equal(count_token("mock-lost-1-us-east-1a"), 2);
	{
		const char *ids[] = {r.nodes[0].id, r.nodes[1].id};
		assert_int_equal(s->provider->terminate(s, ids, 2, &err), 0);
	}
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_mockcloud_throttle_capacity_auth(void **state)
{
	struct isc_provider_session *s, *bad;
	struct isc_launch_spec sp = spec2(1);
	struct isc_launch_result r;
	struct isc_identity id;
	struct isc_err err;
	json_t *calls;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(mock_secret());
	/* throttling is ridden out */
	json_decref(mock_api("POST", "faults", "{\"kind\":\"throttle\",\"count\":2}"));
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	/* capacity in both zones -> ISC_ECAPACITY */
	sp.instance_type = "p4d.24xlarge";
	sp.idempotency_token = "mock-cap-1";
	json_decref(
	    mock_api("POST", "faults",
	             "{\"kind\":\"capacity\",\"instance_type\":\"p4d.24xlarge\",\"count\":2}"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	/* a bad secret: ISC_EAUTH after exactly one call */
	bad = mock_session("wrong-secret");
	json_decref(mock_api("DELETE", "calls", NULL));
	assert_int_equal(bad->provider->check_credentials(bad, &id, &err), ISC_EAUTH);
	calls = mock_api("GET", "calls", NULL);
	assert_int_equal(json_integer_value(json_object_get(calls, "total")), 1);
	json_decref(calls);
	bad->provider->session_free(bad);
	s->provider->session_free(s);
}

/* A listing cut short by the page cap is an error, never a shorter list. */
static void test_truncated_listing_is_an_error(void **state)
{
	const struct isc_provider *p = isc_provider_find("aws");
	const struct isc_kv capped[] = {{"endpoint", "http://127.0.0.1:9"},
	                                {"describe_max_pages", "2"}};
	struct isc_provider_settings st = {capped, 2, creds, 2};
	struct isc_provider_session *s = NULL;
	struct isc_node_info *ni = NULL;
	size_t n = 99;
	struct isc_err err;
	(void)state;
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err), 0);
	for (int i = 0; i < 3; i++)
		reply(200,
		      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s"
		      "</instancesSet></item></reservationSet><nextToken>MORE%d</nextToken>"
		      "</DescribeInstancesResponse>",
		      instance_xml("i-p", "us-east-1a", 0, 16), i);
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 2);
	assert_null(ni);
	assert_int_equal(n, 0);
	assert_non_null(
	    strstr(err.msg, "DescribeInstances: more than 2 pages (describe_max_pages)"));
	s->provider->session_free(s);
	/* A bad cap is named where it is set. */
	{
		const struct isc_kv bad[] = {{"endpoint", "http://127.0.0.1:9"},
		                             {"describe_max_pages", "lots"}};
		struct isc_provider_settings sb = {bad, 2, creds, 2};
		assert_int_equal(p->session_new(&sb, "us-east-1", &scripted, &fake_clock, &s, &err),
		                 ISC_EINVALID);
		assert_non_null(strstr(err.msg, "providers.aws.describe_max_pages"));
	}
}

/* A page with more instances than asked for is refused. */
static void test_oversized_page_is_refused(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *ni = NULL;
	struct isc_buf many;
	size_t n;
	struct isc_err err;
	(void)state;
	isc_buf_init(&many, 0);
	for (int i = 0; i < 1001; i++)
		isc_buf_puts(&many, instance_xml("i-many", "us-east-1a", 0, 16));
	reply(200,
	      "<DescribeInstancesResponse><reservationSet><item><instancesSet>%s</instancesSet>"
	      "</item></reservationSet></DescribeInstancesResponse>",
	      isc_buf_cstr(&many));
	isc_buf_cleanup(&many);
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "a page of 1001 instances"));
	s->provider->session_free(s);
}

/* Plain http to a host that is not loopback is refused before anything is sent. */
static void test_insecure_endpoint_refused(void **state)
{
	const struct isc_provider *p = isc_provider_find("aws");
	const struct isc_kv plain[] = {{"endpoint", "http://10.20.30.40:8080"}};
	const struct isc_kv allowed[] = {{"endpoint", "http://10.20.30.40:8080"},
	                                 {"allow_insecure_endpoint", "true"}};
	const struct isc_kv local[] = {{"endpoint", "http://[::1]:9"}};
	struct isc_provider_settings st = {plain, 1, creds, 2};
	struct isc_provider_session *s = NULL;
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "plain http"));
	assert_non_null(strstr(err.msg, "http://10.20.30.40:8080"));
	assert_non_null(strstr(err.msg, "allow_insecure_endpoint"));
	assert_int_equal(S.calls, 0);
	st = (struct isc_provider_settings){local, 1, creds, 2};
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err), 0);
	p->session_free(s);
	st = (struct isc_provider_settings){allowed, 2, creds, 2};
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err), 0);
	reply(200, "<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>a</Arn><UserId>U"
	           "</UserId><Account>1</Account></GetCallerIdentityResult>"
	           "</GetCallerIdentityResponse>");
	assert_int_equal(p->check_credentials(s, &id, &err), 0);
	p->session_free(s);
}

/*
 * Issue 42: an organisation's key is used alone. One with a CR or LF (or another control
 * character) in what becomes a header (key id, session token) is refused when the
 * session is made, before any request (libcurl would send the line as given: an
 * injected header); one that lacks a field never takes the platform's from the
 * environment or a credentials-file profile.
 */
static void test_byo_key_alone_and_header_safe(void **state)
{
	const struct isc_provider *p = isc_provider_find("aws");
	const struct isc_kv prof[] = {{"endpoint", "http://127.0.0.1:9"}, {"profile", "platform"}};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	struct {
		struct isc_kv kv[3];
		size_t n;
		const char *named;
	} cases[] = {
	    {{{"access_key_id", "AKIDORG0000000000001"},
	      {"secret_access_key", SECRET},
	      {"session_token", "tok\r\nX-Injected: 1"}},
	     3,
	     "session_token holds a control character"},
	    {{{"access_key_id", "AKIDORG0000000000001\r\nX-Injected: 1"},
	      {"secret_access_key", SECRET}},
	     2,
	     "access_key_id is not an access key id"},
	    {{{"access_key_id", "AKIDORG0000000000001"}, {"secret_access_key", "a\nb"}},
	     2,
	     "secret_access_key holds a control character"},
	    {{{"secret_access_key", SECRET}}, 1, "access_key_id is missing"},
	    {{{"x", "y"}}, 1, "access_key_id is missing"},
	};
	(void)state;

	script_reset();
	setenv("AWS_ACCESS_KEY_ID", "AKIDPLATFORM00000001", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "platform-secret", 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct isc_provider_settings st = {prof, 2, cases[i].kv, cases[i].n};
		isc_err_clear(&err);
		assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err),
		                 ISC_EAUTH);
		assert_null(s);
		assert_non_null(strstr(err.msg, cases[i].named));
		assert_null(strstr(err.msg, "X-Injected"));
		assert_int_equal(p->credentials_valid(cases[i].kv, cases[i].n, &err), ISC_EINVALID);
	}
	/* An organisation's key with no field at all: not the platform's environment either. */
	{
		struct isc_provider_settings st = {prof, 1, NULL, 0, 1};
		assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err),
		                 ISC_EAUTH);
		assert_non_null(strstr(err.msg, "access_key_id is missing"));
		st.byo = 0; /* the platform's own session: its environment, as before */
		assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err),
		                 0);
		p->session_free(s);
	}
	assert_int_equal(S.calls, 0);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
}

/* A token echoed across the point where the message is cut leaves no part of itself. */
static void test_token_scrubbed_before_the_cut(void **state)
{
	const struct isc_provider *p = isc_provider_find("aws");
	static char token[1001];
	const struct isc_kv session_creds[] = {
	    {"access_key_id", "ASIATEST"}, {"secret_access_key", SECRET}, {"session_token", token}};
	struct isc_provider_settings st = {items, 2, session_creds, 3};
	struct isc_provider_session *s = NULL;
	struct isc_identity id;
	struct isc_err err;
	char pad[381], *half;
	(void)state;
	for (int i = 0; i < 1000; i++)
		token[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		    [(i * 7 + i / 64) % 64];
	memset(pad, '.', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	assert_int_equal(p->session_new(&st, "us-east-1", &scripted, &fake_clock, &s, &err), 0);
	/* The token starts 380 characters in: the old 399-character cut split it. */
	reply(403,
	      "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>"
	      "%s%s and again %.200s</Message></Error><RequestId>r-2</RequestId></ErrorResponse>",
	      pad, token, token);
	assert_int_equal(p->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "***"));
	/* No run of 12 characters of the token is left anywhere in the message. */
	half = strndup(token, 12);
	for (int i = 0; i + 12 <= 1000; i++) {
		memcpy(half, token + i, 12);
		assert_null(strstr(err.msg, half));
	}
	free(half);
	p->session_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_launch_request, setup),
	    cmocka_unit_test_setup(test_capacity_then_next_zone, setup),
	    cmocka_unit_test_setup(test_capacity_everywhere, setup),
	    cmocka_unit_test_setup(test_partial_gang, setup),
	    cmocka_unit_test_setup(test_efa_gang_group_per_zone, setup),
	    cmocka_unit_test_setup(test_efa_security_group_rule_missing, setup),
	    cmocka_unit_test_setup(test_tcp_rules_parse, setup),
	    cmocka_unit_test_setup(test_tcp_security_group_rule_missing, setup),
	    cmocka_unit_test_setup(test_subnet_pins_zone_and_range, setup),
	    cmocka_unit_test_setup(test_describe_reconciles_groups, setup),
	    cmocka_unit_test_setup(test_describe_sweeps_groups_when_due, setup),
	    cmocka_unit_test_setup(test_placement_settings, setup),
	    cmocka_unit_test_setup(test_root_volume, setup),
	    cmocka_unit_test_setup(test_auth_error_single_call, setup),
	    cmocka_unit_test_setup(test_secret_scrubbed_from_cloud_message, setup),
	    cmocka_unit_test_setup(test_throttling_retried, setup),
	    cmocka_unit_test_setup(test_unreachable, setup),
	    cmocka_unit_test_setup(test_describe_paging_and_notice, setup),
	    cmocka_unit_test_setup(test_truncated_listing_is_an_error, setup),
	    cmocka_unit_test_setup(test_oversized_page_is_refused, setup),
	    cmocka_unit_test_setup(test_insecure_endpoint_refused, setup),
	    cmocka_unit_test_setup(test_token_scrubbed_before_the_cut, setup),
	    cmocka_unit_test_setup(test_terminate_batches, setup),
	    cmocka_unit_test_setup(test_terminate_not_found, setup),
	    cmocka_unit_test_setup(test_terminate_not_found_unnamed, setup),
	    cmocka_unit_test_setup(test_prices_newest_per_zone, setup),
	    cmocka_unit_test_setup(test_tenant_group_made_and_attached, setup),
	    cmocka_unit_test_setup(test_tenant_groups_swept, setup),
	    cmocka_unit_test(test_tokens_and_user_data),
	    cmocka_unit_test(test_registry),
	    cmocka_unit_test(test_mockcloud_gang_lifecycle),
	    cmocka_unit_test(test_byo_key_alone_and_header_safe),
	    cmocka_unit_test(test_mockcloud_lost_reply_no_duplicate),
	    cmocka_unit_test(test_mockcloud_placement_failover),
	    cmocka_unit_test(test_mockcloud_throttle_capacity_auth),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	script_reset();
	return rc;
}
