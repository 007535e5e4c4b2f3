#!/usr/bin/env bash
# GCP bursts end to end on the sandbox: iscd places on GCP shapes, provisions through the
# mock's Compute Engine (OAuth2 JWT tokens, bulkInsert gangs), boots containers over SSH on
# real sshd nodes, follows them and deletes every node; AWS capacity fails over to GCP in
# the same burst; a GCP zone stockout moves to the next zone; a preemption checkpoints,
# reprovisions and resumes; lost replies, 5xx and rate limits create no second gang.
. "$(dirname "$0")/lib.sh"
sandbox_dir gcp-burst
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
start_iscd

# gcp_rows EXPERIMENT [PY-CONDITION]: how many GCE instances of the experiment match.
gcp_rows() { instances_of "$1" "r[\"provider\"] == \"gcp\" and (${2:-True})"; }
launch_file() { # NAME GPUS PRIORITY COMMAND
	cat >"$dir/$1.isc" <<ISC
isc_project_id = "demo"
experiment_name = "$1"
gpus = $2
compute_mode = "burst"
burst_shape_priority_list = [$3]
command = '$4'
ISC
}
env_cmd='echo "RANK=$RANK NNODES=$NNODES N_PROC=$N_PROC MASTER_ADDR=$MASTER_ADDR CYCLE=$STRONG_CYCLE_COUNT ID=$STRONG_EXPERIMENT_ID MAP=$IP_TO_RANK_MAPPING"; sleep 1'

check "isc check gcp against the sandbox" bash -c "'$ISC_BIN/isc' check gcp | grep -q 'account: isc-mock-project'"
check "isc shapes offers GCP shapes" bash -c "'$ISC_BIN/isc' shapes --gpus 4 --provider gcp --limit 3 | grep -q '^1 *gcp-'"

# 1. A four-node GCP burst: every rank gets the environment torchrun needs.
launch_file gcp4 4 '"gcp-us-central1-g2-standard-4-spot"' "$env_cmd"
id=$(submit "$dir/gcp4.isc")
check "four-node GCP burst completes" wait_status "$id" completed 90
out=$(status_of "$id" output_path)
for r in 0 1 2 3; do
	check "rank $r has RANK=$r NNODES=4 N_PROC=1" grep -q "RANK=$r NNODES=4 N_PROC=1" "$out/rank_$r.txt"
done
master=$(sed -nE 's/.*MASTER_ADDR=([0-9.]+) .*/\1/p' "$out/rank_3.txt")
check "MASTER_ADDR is rank 0's address" grep -q "\"$master\": *0" <<<"$(sed -nE 's/.*MAP=(.*)$/\1/p' "$out/rank_0.txt")"
check "the shape was GCP's" status_says "$id" gcp-us-central1-g2-standard-4-spot
check "one gang of 4 Spot VMs, labelled for the experiment" test "$(gcp_rows "$id" 'r["spot"]')" = 4
# Compute Engine drops a deleted instance from its listings at once (no TERMINATED entry
# lingers): the watch asks instances.get of each deleted node (404 notFound: gone) instead
# of waiting node_absence_confirm_ms (30 s by default, as here) of absence. The cluster
# closes and the cost is final within seconds of the completion, not 30 s.
t_done=$(date +%s%N)
settled() {
	[ "$(status_of "$1" cost_settling)" = False ] &&
		[ "$(store_sql -r "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$1' AND state <> 'closed'")" = 0 ]
}
check "cluster closed and cost final within 5 s of completion (absence window 30 s)" within 5 settled "$id"
settle_ms=$((($(date +%s%N) - t_done) / 1000000))
check "its nodes were confirmed gone by instances.get, not by absence" \
	grep -q "deleted, and the cloud says it no longer exists" "$dir/iscd.log"
check "every GCE node deleted after completion" bash -c "for i in \$(seq 1 100); do test \"\$(curl -s '$MOCKCLOUD_URL/_mock/instances?provider=gcp' | /usr/bin/python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if not r[\"deleted\"]))')\" = 0 && exit 0; sleep 0.2; done; exit 1"
check "nothing left running" wait_no_live

# 2. The AWS shape has no capacity: the same burst goes on on the GCP shape.
fault '{"kind":"capacity","instance_type":"g4dn.xlarge","count":20}'
launch_file failover 2 '"aws-us-east-1-g4dn.xlarge-spot", "gcp-us-central1-g2-standard-4-spot"' "$env_cmd"
id=$(submit "$dir/failover.isc")
check "AWS out of capacity: completed on GCP" wait_status "$id" completed 90
check "events name AWS's capacity error" status_says "$id" InsufficientInstanceCapacity
check "events name the GCP shape" status_says "$id" 'trying gcp-us-central1-g2-standard-4-spot'
check "the gang ran on GCE" test "$(gcp_rows "$id")" = 2
mock faults -X DELETE >/dev/null
check "nothing left after the failover" wait_no_live

# 3. A zone out of capacity: the next zone of the shape.
fault '{"kind":"capacity","provider":"gcp","instance_type":"g2-standard-4","zone":"us-central1-a","count":5}'
launch_file zones 2 '"gcp-us-central1-g2-standard-4-spot"' "$env_cmd"
id=$(submit "$dir/zones.isc")
check "stockout in us-central1-a: completed" wait_status "$id" completed 90
check "no node in us-central1-a" test "$(gcp_rows "$id" 'r["zone"] == "us-central1-a"')" = 0
check "the gang came up in us-central1-b" test "$(gcp_rows "$id" 'r["zone"] == "us-central1-b"')" -ge 2
[ "$(gcp_rows "$id" 'r["zone"] == "us-central1-b"')" = 2 ] || { isc status "$id" >&2; mock "instances?provider=gcp" >&2; }
check "us-central1-a answered with a stockout Operation first" test "$(mock gcp/operations | /usr/bin/python3 -c '
import json, sys
print(sum(1 for o in json.load(sys.stdin) if o["zone"].endswith("/us-central1-a") and
          o.get("error", {}).get("errors", [{}])[0].get("code") == "ZONE_RESOURCE_POOL_EXHAUSTED"))')" -ge 1
mock faults -X DELETE >/dev/null
check "nothing left after the zone failover" wait_no_live

# 4. Preemption: checkpoint, delete, reprovision with the cycle count raised, resume.
launch_file long 2 '"gcp-us-central1-g2-standard-4-spot"' \
	'echo "start cycle $STRONG_CYCLE_COUNT rank $RANK"; if [ -f /mnt/checkpoints/step ]; then echo "resumed from step $(cat /mnt/checkpoints/step)"; fi; for i in $(seq 1 600); do echo $i > /mnt/checkpoints/step; sleep 0.2; done'
id=$(submit "$dir/long.isc")
check "GCP burst runs" wait_status "$id" running 90
check "checkpoints synced home" within 15 test -s "$ISC_HOME/experiments/$id/checkpoints/step"
# Running nodes the listings leave out (describe_lag: every GCE listing) are not counted
# gone before the absence window (30 s), and instances.get is asked only of deleted nodes.
fault '{"kind":"describe_lag","provider":"gcp","ms":100000000,"count":100000}'
missing_nodes() {
	store_sql -r "SELECT COUNT(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	    WHERE c.experiment_id = '$1' AND c.state = 'running' AND n.absent_since_ms IS NOT NULL"
}
hidden() { [ "$(missing_nodes "$1")" = 2 ]; }
listed_again() { [ "$(missing_nodes "$1")" = 0 ]; }
check "describe_lag hides the running GCE nodes from the listings" within 15 hidden "$id"
sleep 4
check "hidden running nodes are not counted gone within the absence window" test \
	"$(store_sql -r "SELECT COUNT(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	    WHERE c.experiment_id = '$id' AND (n.state = 'terminated' OR c.state <> 'running')")" = 0
check "the burst still runs on its first cluster" test "$(status_of "$id") $(status_of "$id" cycle_count)" = "running 1"
mock faults -X DELETE >/dev/null
check "listed again, the nodes are no longer missing" within 15 listed_again "$id"
interrupt_resumes "$id" preempt 10 90 oldest
check "the preempted node is deleted" test "$(instances_of "$id" "r[\"id\"] == \"$victim\" and r[\"deleted\"]")" = 1
isc cancel "$id" >/dev/null
check "preempted burst cancels" wait_status "$id" cancelled 45
check "nothing left after the preemption" wait_no_live

# 5. A lost bulkInsert reply, 5xx and rate limits: one gang, none forgotten.
fault '{"kind":"lose_response","provider":"gcp","action":"instances.bulkInsert","count":1}'
fault '{"kind":"error5xx","provider":"gcp","action":"instances.aggregatedList","count":2}'
fault '{"kind":"throttle","provider":"gcp","count":3}'
launch_file lossy 2 '"gcp-us-central1-g2-standard-4-spot"' "$env_cmd"
id=$(submit "$dir/lossy.isc")
check "burst completes through lost replies" wait_status "$id" completed 90
check "exactly one gang was created for it" test "$(gcp_rows "$id")" = 2
mock faults -X DELETE >/dev/null
check "nothing left after lost replies" wait_no_live

# 6. Quota on GCP: the broker moves on to the next shape.
fault '{"kind":"quota","provider":"gcp","count":5}'
launch_file quota 2 '"gcp-us-central1-g2-standard-4-spot", "aws-us-east-1-g4dn.xlarge-spot"' "$env_cmd"
id=$(submit "$dir/quota.isc")
check "GCP quota: completed on the next shape" wait_status "$id" completed 90
check "events name quotaExceeded" status_says "$id" quotaExceeded
check "no GCE node for it" test "$(gcp_rows "$id")" = 0
mock faults -X DELETE >/dev/null
check "nothing left at the end" wait_no_live
check "iscd logged no sanitizer report" no_sanitizer_report "$dir/iscd.log"
echo "gcp-burst: completion to cluster closed and cost final: ${settle_ms} ms"
finish gcp-burst
