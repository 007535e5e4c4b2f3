#!/usr/bin/env bash
# OCI bursts end to end on the mock cloud: iscd places an OCI shape, launches one
# signed LaunchInstance per node, boots the containers over SSH on real sshd nodes,
# sees a preemption and resumes, rolls back a gang an AD could not hold, survives a
# lost LaunchInstance reply, refuses a subnet whose security list lets every tenant in
# (issue 42), and leaves nothing running.
. "$(dirname "$0")/lib.sh"
sandbox_dir oci-burst
launch=$repo/tests/integration/launch
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_PROVIDERS="gcp oci" "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
start_iscd

# 0. isc check oci with the sandbox's config (the mock's API key and config file).
check "isc check oci" bash -c "'$ISC_BIN/isc' check oci | grep -q '^account: ocid1.tenancy'"

# 1. A 3-node preemptible burst: the right environment on every rank, then a preemption:
# the lost node is replaced, the other two go on (docs/broker.md, "Lost nodes"). Long
# enough to be cancelled while it runs after that.
STEPS=300
sed "s/\${STEPS:-15}/$STEPS/" "$launch/oci-three.isc" >"$dir/long.isc"
id=$(submit "$dir/long.isc")
check "3-node OCI burst runs" wait_status "$id" running 60
check "three OCI instances, preemptible, in one AD" test "$(instances_of "$id" "r['provider'] == 'oci' and r['spot'] and r['state'] == 'running' and r['zone'] == 'Mock:US-ASHBURN-AD-1'")" = 3
out=$(status_of "$id" output_path)
for r in 0 1 2; do
	check "rank $r has RANK=$r NNODES=3 N_PROC=1" within 10 grep -q "RANK=$r NNODES=3 N_PROC=1" "$out/rank_$r.txt"
done
master=$(sed -nE 's/.*MASTER_ADDR=([0-9.]+).*/\1/p' "$out/rank_2.txt")
check "MASTER_ADDR is rank 0's private IP (from GetVnic)" grep -q "\"$master\": *0" <<<"$(sed -nE 's/.*MAP=(.*)$/\1/p' "$out/rank_0.txt")"
check "the map has three ranks" test "$(sed -nE 's/.*MAP=(.*)$/\1/p' "$out/rank_0.txt" | grep -oE '"127\.[0-9]+\.[0-9]+\.[0-9]+"' | wc -l)" = 3
sleep 2 # a few checkpoints, synced home on the sandbox's schedule
interrupt_resumes "$id" interrupt 0 60 newest
check "the preempted node was terminated" within 30 instances_at_least "$id" 1 "r['id'] == '$victim' and r['state'] == 'terminated'"
check "the other two were kept, one node replaced: three run" test "$(instances_of "$id" "r['state'] == 'running'")" = 3
check "only the preempted node was terminated" test "$(instances_of "$id" "r['state'] != 'running'")" = 1
isc cancel "$id" >/dev/null
check "preempted burst cancels" wait_status "$id" cancelled 30
check "nothing left after the preemption" wait_no_live

# 2. An AD with room for 2 of 3 nodes: the two are rolled back and AD-2 takes the gang.
mock capacity -X POST -d '{"instance_type":"VM.GPU3.1","zone":"US-ASHBURN-AD-1","available":2}' >/dev/null
id=$(submit "$launch/oci-three.isc")
check "burst completes after an AD rollback" wait_status "$id" completed 90
check "two nodes were rolled back in AD-1" test "$(instances_of "$id" "r['zone'].endswith('AD-1') and r['state'] == 'terminated'")" = 2
check "the gang ran in AD-2" test "$(instances_of "$id" "r['zone'].endswith('AD-2')")" = 3
out=$(status_of "$id" output_path)
check "rank 2 finished in AD-2" grep -q "end rank 2" "$out/rank_2.txt"
mock capacity -X POST -d '{"instance_type":"VM.GPU3.1","zone":"US-ASHBURN-AD-1","available":null}' >/dev/null
check "nothing left after the AD rollback" wait_no_live

# 3. A lost LaunchInstance reply (and throttling): the retry token gives the same node back.
fault '{"kind":"lose_response","action":"LaunchInstance","provider":"oci","count":1}'
fault '{"kind":"throttle","action":"ListInstances","provider":"oci","count":2}'
id=$(submit "$launch/oci-three.isc")
check "burst completes through a lost reply" wait_status "$id" completed 90
check "exactly three instances were created for it" test "$(instances_of "$id" "True")" = 3
check "nothing left after the lost reply" wait_no_live

# 4. A subnet whose security list lets all TCP in from the subnet would let the
# organisations on the platform's tenancy reach each other's nodes (issue 42): refused,
# naming the list (the sandbox's subnet has no such rule: the bursts above ran in their
# organisation's network security group).
stop_iscd
sed -i 's/aaaaaaaamocknorule/aaaaaaaamocktraining/' "$ISC_HOME/config.toml"
start_iscd
id=$(submit "$launch/oci-three.isc")
check "the burst names the rule that lets every tenant in" within 20 status_says "$id" 'lets all TCP in from'
check "nothing was launched into that subnet" test "$(instances_of "$id" "True")" = 0
isc cancel "$id" >/dev/null
check "the refused burst cancels" wait_status "$id" cancelled 30
check "iscd logged no OCI auth failure" bash -c "! grep -q NotAuthenticated '$dir/iscd.log'"
finish oci-burst
