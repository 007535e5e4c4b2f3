#!/usr/bin/env bash
# Bursts end to end on the mock cloud: iscd places, provisions (signed EC2 calls),
# boots containers over SSH on real sshd nodes, follows them, and tears down.
. "$(dirname "$0")/lib.sh"
sandbox_dir burst
launch=$repo/tests/integration/launch
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
start_iscd

# 1. A two-node burst runs to completed with the right environment on both ranks.
id=$(submit "$launch/two-node.isc")
check "two-node burst completes" wait_status "$id" completed 60
out=$(status_of "$id" output_path)
check "rank 0 log has RANK=0 NNODES=2" grep -q "RANK=0 NNODES=2 N_PROC=1" "$out/rank_0.txt"
check "rank 1 log has RANK=1 NNODES=2" grep -q "RANK=1 NNODES=2 N_PROC=1" "$out/rank_1.txt"
master=$(sed -nE 's/.*MASTER_ADDR=([0-9.]+).*/\1/p' "$out/rank_1.txt")
check "MASTER_ADDR is rank 0's private IP" grep -q "\"$master\": *0" <<<"$(sed -nE 's/.*MAP=(.*)$/\1/p' "$out/rank_0.txt")"
check "STRONG_EXPERIMENT_ID is the id" grep -q "ID=$id" "$out/rank_0.txt"
check "first cycle is 1" grep -q "CYCLE=1" "$out/rank_0.txt"
check "isc logs prints rank 1" bash -c "'$ISC_BIN/isc' logs '$id' --rank 1 | grep -q RANK=1"
check "nodes terminated after completion" wait_no_live

# 2. A failing command gives failed.
id=$(submit "$launch/fails.isc")
check "failing command gives failed" wait_status "$id" failed 60
check "reason names the exit code" status_says "$id" 'exited with code 3'
check "nodes terminated after failure" wait_no_live

# 3. Capacity on the first shape moves the experiment to the second, and the events say so.
fault '{"kind":"capacity","instance_type":"g4dn.xlarge","count":10}'
id=$(submit "$launch/two-node.isc")
check "burst completes on the second shape" wait_status "$id" completed 60
check "events name the capacity error" status_says "$id" capacity
check "events name the second shape" status_says "$id" 'trying aws-us-east-1-g5.xlarge-ondemand'
mock faults -X DELETE >/dev/null
check "nothing left after failover" wait_no_live

# 4. A partial gang is rolled back before the next try.
fault '{"kind":"partial","instance_type":"g4dn.xlarge","count":1,"fail_nodes":1}'
id=$(submit "$launch/two-node.isc")
check "burst completes after a partial gang" wait_status "$id" completed 60
check "events say the gang was rolled back" status_says "$id" 'rolling back'
check "nothing left after partial gang" wait_no_live

# 5. Cancel mid-run: containers stopped, nodes terminated, cancelled.
id=$(submit "$launch/long.isc")
check "long burst runs" wait_status "$id" running 60
isc cancel "$id" >/dev/null
check "cancel mid-run gives cancelled" wait_status "$id" cancelled 30
check "nothing left after cancel mid-run" wait_no_live

# 6. Cancel mid-boot (nodes slow to boot).
mock boot_delay -X POST -d '{"ms":3000}' >/dev/null
id=$(submit "$launch/long.isc")
check "long burst provisions" wait_status "$id" provisioning 30
isc cancel "$id" >/dev/null
check "cancel mid-boot gives cancelled" wait_status "$id" cancelled 30
mock boot_delay -X POST -d '{"ms":300}' >/dev/null
check "nothing left after cancel mid-boot" wait_no_live

# 7. A spot interruption: checkpoint, terminate, reprovision with the cycle count raised, resume.
id=$(submit "$launch/long.isc")
check "interruptible burst runs" wait_status "$id" running 60
sleep 3 # let it write a few checkpoints, and the broker sync them on its schedule
check "checkpoints synced home on schedule" within 10 test -s "$ISC_HOME/experiments/$id/checkpoints/step"
interrupt_resumes "$id" interrupt 10 60 oldest
out=$(status_of "$id" output_path)
check "rank 0 runs cycle 2" grep -q "start cycle 2" "$out/rank_0.txt"
isc cancel "$id" >/dev/null
check "interrupted burst cancels" wait_status "$id" cancelled 30
check "nothing left after the interruption" wait_no_live

# 8. kill -9 of iscd mid-run: a new iscd picks the experiment up, sees it finish, and leaks nothing.
id=$(submit "$launch/sleeper.isc")
check "burst runs before the crash" wait_status "$id" running 60
kill_iscd
start_iscd
check "completed under the restarted iscd" wait_status "$id" completed 60
out=$(status_of "$id" output_path)
check "the whole log of rank 0 arrived" grep -q "end rank 0" "$out/rank_0.txt"
check "nothing left after the crash" wait_no_live

# 10. Lost replies, 5xx and throttling on the cloud calls: no duplicate instance, none forgotten.
fault '{"kind":"lose_response","action":"RunInstances","count":1}'
fault '{"kind":"error5xx","action":"DescribeInstances","count":2}'
fault '{"kind":"throttle","count":3}'
id=$(submit "$launch/two-node.isc")
check "burst completes through lost replies" wait_status "$id" completed 60
check "exactly one gang was created for it" test "$(instances_of "$id")" = 2
check "nothing left after lost replies" wait_no_live
if [ "$(instances_of "$id")" != 2 ]; then isc status "$id" >&2; mock instances | /usr/bin/python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r["tags"].get("isc:experiment") == sys.argv[1]:
        print(r["id"], r["state"], r["zone"], r["client_token"], r["tags"].get("isc:cluster"), file=sys.stderr)' "$id"; fi
mock faults -X DELETE >/dev/null

# 11. A stray: an instance with this broker's tag that no cluster record owns (created behind
#     the broker's back, as a crash before any record could) is terminated by reconciliation.
broker_id=$(sed -nE 's/^broker_id = "(.*)"/\1/p' "$ISC_HOME/config.toml")
stray=$(/usr/bin/python3 - "$broker_id" <<'PY'
import os, sys, botocore.session
s = botocore.session.get_session()
ec2 = s.create_client("ec2", region_name="us-east-1", endpoint_url=os.environ["MOCKCLOUD_URL"],
                      aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
r = ec2.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1,
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [
                          {"Key": "isc:broker", "Value": sys.argv[1]},
                          {"Key": "isc:cluster", "Value": "cl_nobody"}]}])
print(r["Instances"][0]["InstanceId"])
PY
)
check "a stray instance was created" test -n "$stray"
check "reconciliation terminates the stray" bash -c "for i in \$(seq 1 100); do curl -s '$MOCKCLOUD_URL/_mock/instances' | /usr/bin/python3 -c '
import json, sys
sys.exit(0 if any(r[\"id\"] == \"$stray\" and r[\"state\"] in (\"shutting-down\", \"terminated\") for r in json.load(sys.stdin)) else 1)' && exit 0; sleep 0.2; done; exit 1"

# 9. Credits: an experiment its organisation cannot cover waits; one whose credits run out
#    mid-run is stopped, and the bill matches the mock cloud's own record of the nodes.
isc org add poor >/dev/null
isc project add --org poor poor >/dev/null
isc org add broke >/dev/null
isc project add --org broke broke >/dev/null
isc credits grant --org poor 1.00 >/dev/null
isc credits grant --org broke 0.50 >/dev/null
for p in poor broke; do
	cat >"$dir/$p.isc" <<ISC
isc_project_id = "$p"
experiment_name = "expensive-$p"
gpus = 8
burst_shape_priority_list = ["aws-us-east-1-p5.48xlarge-ondemand"]
command = 'for i in \$(seq 1 600); do echo \$i > /mnt/checkpoints/step; sleep 0.2; done'
ISC
done
id=$(submit "$dir/broke.isc")
check "uncovered experiment waits" wait_status "$id" waiting 30
check "waiting says why" status_says "$id" 'credits: organisation broke has'
check "nothing launched for it" test "$(instances_of "$id")" = 0
# The waiting order (queue/burst.h): a newer burst of the same organisation does not draw
# on its credits ahead of the one waiting for them; it waits behind it, saying so.
cat >"$dir/broke-small.isc" <<'ISC'
isc_project_id = "broke"
experiment_name = "small-broke"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'sleep 30'
ISC
small=$(submit "$dir/broke-small.isc")
check "a newer burst of the same organisation waits behind it" wait_status "$small" waiting 30
check "... saying where it stands and behind whom" status_says "$small" "Status:   waiting: credits: #2 in line for the credits of organisation broke, behind $id"
check "nothing launched for the newer one" test "$(instances_of "$small")" = 0
isc cancel "$id" >/dev/null
isc credits grant --org broke 5.00 >/dev/null
check "once the one ahead is gone, the newer one runs" wait_status "$small" running 60
isc cancel "$small" >/dev/null
check "... and is cancelled" wait_status "$small" cancelled 30
id=$(submit "$dir/poor.isc")
check "covered experiment runs" wait_status "$id" running 60
check "credits running out stop it" wait_status "$id" stopped 60
check "stopped says out of credits" status_says "$id" 'out of credits'
check "its node is terminated" wait_no_live
sleep 1 # one more tick charges up to the confirmed termination
/usr/bin/python3 - "$MOCKCLOUD_URL" "$ISC_BIN/isc" "$id" <<'PY'
import json, subprocess, sys, urllib.request
url, isc, exp = sys.argv[1:4]
rows = [r for r in json.load(urllib.request.urlopen(url + "/_mock/instances"))
        if r["tags"].get("isc:experiment") == exp]
price = 55040000  # aws-us-east-1-p5.48xlarge-ondemand, micro-dollars per node-hour
# EC2 reports launchTime to the second, and billing starts there; per second with a 60 s
# minimum per start (../shared/docs/metering-facts.md).
expected = sum(-(-max(r["terminated_at"] - r["launched_at"] // 1000 * 1000, 60000) * price // 3600000) for r in rows)
spend = json.loads(subprocess.check_output([isc, "spend", "--project", "poor", "--format", "json"]))
balance = json.loads(subprocess.check_output([isc, "credits", "show", "--org", "poor", "--json"]))["orgs"][0]["balance_micros"]
# The broker sees a termination at its next describe: at most two ticks (200 ms each) late per node,
# plus one micro-dollar of rounding per charge.
slack = len(rows) * (price * 400 // 3600000 + 200)
print("expected", expected, "charged", spend["total_micros"], "slack", slack, "balance", balance, file=sys.stderr)
sys.exit(0 if rows and abs(spend["total_micros"] - expected) <= slack and balance >= 0 else 1)
PY
bill_ok=$?
check "bill equals the mock cloud's record, balance never negative" test "$bill_ok" = 0
isc spend --by experiment >"$dir/spend.txt" 2>&1
check "spend by experiment names it by id and name" grep -q "$id" "$dir/spend.txt"
check "spend table aligned" table_aligned "$dir/spend.txt"
check "spend: every amount to the micro-dollar (six decimals)" bash -c \
	"tail -n +2 '$dir/spend.txt' | awk '{print \$NF}' | grep -Evx -e '-?[0-9]+\\.[0-9]{6}' | wc -l | grep -qx 0"

check "iscd is still alive" iscd_alive
stop_iscd
check "iscd stopped on SIGTERM" bash -c "! kill -0 $(cat "$dir/iscd.pid") 2>/dev/null"
check "iscd log has no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish burst
