#!/usr/bin/env bash
# OCI bursts end to end on the mock cloud: iscd places an OCI shape, launches one
# signed LaunchInstance per node, boots the containers over SSH on real sshd nodes,
# sees a preemption and resumes, rolls back a gang an AD could not hold, survives a
# lost LaunchInstance reply, refuses a subnet without the training rule, and leaves
# nothing running.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
launch=$repo/tests/integration/launch
dir=$(mktemp -d /tmp/isc-oci-burst.XXXXXX)
cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_PROVIDERS="gcp oci" "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
start_iscd() {
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	echo $! >"$dir/iscd.pid"
}
start_iscd

# rows EXPR: mock instances of the experiment (sys.argv[1]) for which EXPR holds, counted.
count() {
	mock instances | /usr/bin/python3 -c "
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r['tags'].get('isc:experiment') == sys.argv[1] and ($2)))" "$1"
}

# 0. isc check oci with the sandbox's config (the mock's API key and config file).
check "isc check oci" bash -c "'$ISC_BIN/isc' check oci | grep -q '^account: ocid1.tenancy'"

# 1. A 3-node preemptible burst: the right environment on every rank, then a preemption.
STEPS=60
sed "s/\${STEPS:-15}/$STEPS/" "$launch/oci-three.isc" >"$dir/long.isc"
id=$(submit "$dir/long.isc")
check "3-node OCI burst runs" wait_status "$id" running 60
check "three OCI instances, preemptible, in one AD" test "$(count "$id" "r['provider'] == 'oci' and r['spot'] and r['state'] == 'running' and r['zone'] == 'Mock:US-ASHBURN-AD-1'")" = 3
out=$(status_of "$id" output_path)
for r in 0 1 2; do
	check "rank $r has RANK=$r NNODES=3 N_PROC=1" bash -c "for i in \$(seq 1 50); do grep -q 'RANK=$r NNODES=3 N_PROC=1' '$out/rank_$r.txt' 2>/dev/null && exit 0; sleep 0.2; done; exit 1"
done
master=$(sed -nE 's/.*MASTER_ADDR=([0-9.]+).*/\1/p' "$out/rank_2.txt")
check "MASTER_ADDR is rank 0's private IP (from GetVnic)" grep -q "\"$master\": *0" <<<"$(sed -nE 's/.*MAP=(.*)$/\1/p' "$out/rank_0.txt")"
check "the map has three ranks" test "$(sed -nE 's/.*MAP=(.*)$/\1/p' "$out/rank_0.txt" | grep -oE '"127\.[0-9]+\.[0-9]+\.[0-9]+"' | wc -l)" = 3
sleep 2 # a few checkpoints, synced home on the sandbox's schedule
victim=$(mock instances | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "running"]
print(sorted(rows, key=lambda r: r["launched_at"])[-1]["id"] if rows else "")' "$id")
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":0}"
check "the preemption is seen as an interruption" bash -c "for i in \$(seq 1 100); do '$ISC_BIN/isc' status '$id' | grep -q interrupted && exit 0; sleep 0.2; done; exit 1"
running_cycle2() {
	for _ in $(seq 1 300); do
		[ "$(status_of "$1" status)" = running ] && [ "$(status_of "$1" cycle_count)" = 2 ] && return 0
		sleep 0.2
	done
	isc status "$1" >&2
	return 1
}
check "reprovisioned and running again in cycle 2" running_cycle2 "$id"
check "rank 0 resumed from its checkpoint" bash -c "for i in \$(seq 1 50); do grep -q 'resumed from step' '$out/rank_0.txt' 2>/dev/null && exit 0; sleep 0.2; done; exit 1"
check "the preempted cluster was terminated" test "$(count "$id" "r['state'] == 'terminated'")" -ge 3
isc cancel "$id" >/dev/null
check "preempted burst cancels" wait_status "$id" cancelled 30
check "nothing left after the preemption" wait_no_live

# 2. An AD with room for 2 of 3 nodes: the two are rolled back and AD-2 takes the gang.
mock capacity -X POST -d '{"instance_type":"VM.GPU3.1","zone":"US-ASHBURN-AD-1","available":2}' >/dev/null
id=$(submit "$launch/oci-three.isc")
check "burst completes after an AD rollback" wait_status "$id" completed 90
check "two nodes were rolled back in AD-1" test "$(count "$id" "r['zone'].endswith('AD-1') and r['state'] == 'terminated'")" = 2
check "the gang ran in AD-2" test "$(count "$id" "r['zone'].endswith('AD-2')")" = 3
out=$(status_of "$id" output_path)
check "rank 2 finished in AD-2" grep -q "end rank 2" "$out/rank_2.txt"
mock capacity -X POST -d '{"instance_type":"VM.GPU3.1","zone":"US-ASHBURN-AD-1","available":null}' >/dev/null
check "nothing left after the AD rollback" wait_no_live

# 3. A lost LaunchInstance reply (and throttling): the retry token gives the same node back.
fault '{"kind":"lose_response","action":"LaunchInstance","provider":"oci","count":1}'
fault '{"kind":"throttle","action":"ListInstances","provider":"oci","count":2}'
id=$(submit "$launch/oci-three.isc")
check "burst completes through a lost reply" wait_status "$id" completed 90
check "exactly three instances were created for it" test "$(count "$id" "True")" = 3
check "nothing left after the lost reply" wait_no_live

# 4. A subnet whose security lists lack the training rule: refused, with the rule to add.
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
sed -i 's/aaaaaaaamocktraining/aaaaaaaamocknorule/' "$ISC_HOME/config.toml"
start_iscd
id=$(submit "$launch/oci-three.isc")
check "the burst names the missing rule" bash -c "for i in \$(seq 1 100); do '$ISC_BIN/isc' status '$id' | grep -q 'add a stateful ingress rule' && exit 0; sleep 0.2; done; exit 1"
check "nothing was launched into that subnet" test "$(count "$id" "True")" = 0
isc cancel "$id" >/dev/null
check "the refused burst cancels" wait_status "$id" cancelled 30
check "iscd logged no OCI auth failure" bash -c "! grep -q NotAuthenticated '$dir/iscd.log'"
finish oci-burst
