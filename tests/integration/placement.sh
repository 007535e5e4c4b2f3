#!/usr/bin/env bash
# Gangs close together on the mock EC2 (tests/mocks/mockcloud_lib/ec2_fabric.py holds the
# rules): a two-node burst gets a cluster placement group of its own in the zone it lands
# in; when the first zone has no capacity, that zone's group is deleted and the next zone
# gets one; the group goes once the nodes are terminated; a group left behind by a crash
# (tagged with this broker, no instance in it) is deleted by the next describe. On the
# mock GCE: a gang whose network lacks an all-TCP ingress rule for its subnet is refused
# before any VM is made, the rule named (tests/mocks/mockcloud_lib/gce_firewall.py).
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
launch=$repo/tests/integration/launch
dir=$(mktemp -d /tmp/isc-placement.XXXXXX)
cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"

# The catalog lists no zones for AWS shapes (the cloud picks); give the spot shape two, so
# the driver tries us-east-1a, then us-east-1b.
sqlite3 "$ISC_HOME/isc.db" "UPDATE shapes SET zones = 'us-east-1a,us-east-1b' WHERE id = 'aws-us-east-1-g4dn.xlarge-spot'"
cat >"$dir/gang.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "gang"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'for i in $(seq 1 600); do sleep 0.2; done'
ISC

setpriv --pdeathsig TERM "$ISC_BIN/iscd" 2>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"

# groups [PYTHON-EXPR]: the mock's placement groups as "name zone members" lines.
groups() {
	mock placement_groups | /usr/bin/python3 -c '
import json, sys
for g in json.load(sys.stdin):
    print(g["name"], g["zone"] or "-", len(g["members"]), g["tags"].get("isc:experiment", "-"))'
}
calls_of() {
	mock calls | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["by_action"].get(sys.argv[1], 0))' "$1"
}
# wait_groups N [EXP]: until the mock holds N placement groups (of experiment EXP), 30 s.
wait_groups() {
	for _ in $(seq 1 150); do
		[ "$(groups | awk -v e="${2:-}" 'e == "" || $4 == e' | wc -l)" = "$1" ] && return 0
		sleep 0.2
	done
	groups >&2
	return 1
}

# 1. us-east-1a has no g4dn.xlarge: its group is deleted, us-east-1b's holds the gang.
fault '{"kind":"capacity","instance_type":"g4dn.xlarge","zone":"us-east-1a","count":1}'
id=$(submit "$dir/gang.isc")
check "the burst runs after a zone failover" wait_status "$id" running 60
check "one CreatePlacementGroup per zone tried (2)" test "$(calls_of CreatePlacementGroup)" = 2
check "the refused zone's group was deleted" test "$(calls_of DeletePlacementGroup)" = 1
check "one group is left, for this experiment" wait_groups 1 "$id"
read -r name zone members _ <<<"$(groups | awk -v e="$id" '$4 == e')"
check "it lives in us-east-1b" test "$zone" = us-east-1b
check "it holds both nodes" test "$members" = 2
check "it is named after its zone ($name)" bash -c "[[ '$name' == isc-*-us-east-1b ]]"
check "the nodes are in it, in us-east-1b" test "$(mock instances | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] != "terminated"]
print(sum(1 for r in rows if r["placement_group"] == sys.argv[2] and r["zone"] == "us-east-1b"))' "$id" "$name")" = 2

# 2. Teardown: the nodes are terminated, then the group is deleted.
isc cancel "$id" >/dev/null
check "cancelled" wait_status "$id" cancelled 30
check "nothing left running" wait_no_live
check "the gang's group is deleted after its nodes" wait_groups 0

# 3. A group left by a crash (made, never launched into): the next describe deletes it.
broker=$(mock instances | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["tags"]["isc:broker"])')
/usr/bin/python3 - "$MOCKCLOUD_URL" "$broker" <<'PY'
import os, sys, botocore.session
s = botocore.session.get_session()
ec2 = s.create_client("ec2", region_name="us-east-1", endpoint_url=sys.argv[1],
                      aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
ec2.create_placement_group(GroupName="isc-leftover-us-east-1a", Strategy="cluster",
                           TagSpecifications=[{"ResourceType": "placement-group",
                                               "Tags": [{"Key": "isc:broker", "Value": sys.argv[2]}]}])
ec2.create_placement_group(GroupName="not-ours", Strategy="cluster")
PY
check "a leftover group was made" test "$(groups | grep -c isc-leftover)" = 1
# The broker describes a region only while it has work there: a short burst brings it back.
id=$(submit "$launch/two-node.isc")
check "a second burst completes" wait_status "$id" completed 60
check "the leftover tagged group is deleted" bash -c "for i in \$(seq 1 150); do [ \"\$(curl -s '$MOCKCLOUD_URL/_mock/placement_groups' | grep -c isc-leftover)\" = 0 ] && exit 0; sleep 0.2; done; exit 1"
check "a group without this broker's tag is left alone" test "$(groups | grep -c '^not-ours ')" = 1
check "nothing of the bursts is left" wait_groups 1
# 4. GCP: a network rule that lets every instance's TCP in from the subnet would let the
# organisations on the platform's project reach each other's nodes (docs/security.md,
# "Tenants on the platform's account"): with default-allow-internal back on the mock's
# default network (the sandbox removes it), a gang is refused before any VM is made,
# naming the rule; without it the gang runs inside its organisation's own rule.
mock gcp/firewalls -X POST -H 'Content-Type: application/json' -d '{"name":"default-allow-internal","sourceRanges":["10.128.0.0/9"],"priority":65534,"allowed":[{"IPProtocol":"tcp","ports":["0-65535"]},{"IPProtocol":"udp","ports":["0-65535"]},{"IPProtocol":"icmp"}]}' >/dev/null
sed -e 's/"aws-us-east-1-g4dn.xlarge-spot"/"gcp-us-central1-g2-standard-4-spot"/' -e 's/"gang"/"gcp-fw"/' \
	-e "s/^command = .*/command = 'true'/" "$dir/gang.isc" >"$dir/gcp-fw.isc"
inserts=$(calls_of instances.bulkInsert)
id=$(submit "$dir/gcp-fw.isc")
check "the GCP gang names the rule that lets every tenant in" bash -c "for i in \$(seq 1 300); do '$ISC_BIN/isc' status '$id' | grep -q 'firewall rule default-allow-internal lets all TCP from 10.128.0.0/20 (the subnet) reach every instance' && exit 0; sleep 0.2; done; '$ISC_BIN/isc' status '$id' >&2; exit 1"
check "no GCE instance was asked for" test "$(calls_of instances.bulkInsert)" = "$inserts"
isc cancel "$id" >/dev/null 2>&1
wait_status "$id" cancelled 30 >/dev/null 2>&1 || wait_status "$id" failed 1 >/dev/null 2>&1
mock gcp/firewalls/default-allow-internal -X DELETE >/dev/null
id=$(submit "$dir/gcp-fw.isc")
check "without default-allow-internal the GCP gang completes" wait_status "$id" completed 90
check "nothing of the GCP gang is left" wait_no_live
check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
finish placement
