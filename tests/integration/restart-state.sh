#!/usr/bin/env bash
# A restart of iscd changes no decision (issue 30, item 5). What the broker notes between
# steps is kept in the store (broker/memo.c), so each decision below is the same whether or
# not iscd restarted in between:
#   1. a burst held behind an older one of its credits line stays held, at the same place
#      (the older one's reason for waiting heads the line across the restart);
#   2. a shape excluded after a partial gang is not tried again by the restarted iscd;
#   3. a cluster's periodic checkpoint sync falls due on the clock it had, not a new one
#      started at the restart;
#   4. OCI nodes the broker terminated itself are not taken for preempted ones by the
#      restarted iscd (OCI's describe cannot tell the two apart; the store can: a cluster
#      is marked terminating before its nodes are terminated).
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
launch=$repo/tests/integration/launch
dir=$(mktemp -d /tmp/isc-restart-state.XXXXXX)
cleanup() {
	[ -s "$dir/iscd.pid" ] && kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
db=$ISC_HOME/isc.db
sql() { sqlite3 -cmd ".timeout 5000" "$db" "$1"; }
now_ms() { date +%s%3N; }

# A checkpoint period long enough that a clock restarted by the restart is seconds late.
sync_ms=8000
sed -i "s/^checkpoint_sync_ms = .*/checkpoint_sync_ms = $sync_ms/; s/^lossy_sync_ms = .*/lossy_sync_ms = $sync_ms/" "$ISC_HOME/config.toml"

start_iscd() {
	"$ISC_BIN/iscd" "$@" 2>>"$dir/iscd.log" &
	echo $! >"$dir/iscd.pid"
	iscd_wait_socket "$ISC_HOME/run/api.sock"
}
# SIGTERM: iscd finishes the steps its workers run, then exits.
stop_iscd() {
	kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null
	wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	rm -f "$dir/iscd.pid"
}
field() { status_of "$1" "$2"; }
# until CMD succeeds, at most SECONDS
wait_until() {
	local secs=$1
	shift
	for _ in $(seq 1 $((secs * 10))); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

start_iscd

# 1. A credits line across a restart. An organisation whose 50 cents cannot cover its
#    first burst: that burst waits for the credits, and a newer one of the organisation is
#    held behind it. Restarted, iscd still knows why the first one waits, so the newer one
#    stays held and makes no try (a try records a cluster row, even one refused credits).
isc org add broke >/dev/null
isc project add --org broke broke >/dev/null
isc credits grant --org broke 0.50 >/dev/null
cat >"$dir/big.isc" <<'ISC'
isc_project_id = "broke"
experiment_name = "big"
gpus = 8
burst_shape_priority_list = ["aws-us-east-1-p5.48xlarge-ondemand"]
command = 'sleep 60'
ISC
cat >"$dir/small.isc" <<'ISC'
isc_project_id = "broke"
experiment_name = "small"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'sleep 60'
ISC
big=$(submit "$dir/big.isc")
check "credits line: the first burst waits for credits" wait_status "$big" waiting 30
small=$(submit "$dir/small.isc")
line="waiting: credits: #2 in line for the credits of organisation broke, behind $big"
held() { isc status "$small" | grep -q "Status:   $line"; }
check "credits line: the newer burst is held behind it" wait_until 30 held
check "credits line: the first burst heads the credits line (noted in the store)" \
	test "$(sql "SELECT why FROM burst_waits WHERE experiment_id = '$big'")" = 1
tries_small=$(sql "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$small'")
events_small=$(sql "SELECT COUNT(*) FROM events WHERE experiment_id = '$small'")
stop_iscd
next_try=$(sql "SELECT next_attempt_ms FROM experiments WHERE id = '$big'")
start_iscd
# The restarted iscd has taken its decisions (the newer burst's in its first tick) once the
# first burst tried again: a try writes its next try time.
retried() { [ "$(field "$big" next_attempt_ms)" -gt "$next_try" ]; }
check "credits line: the first burst tries again after the restart" wait_until 30 retried
check "credits line: after the restart the newer burst is still held, at the same place" held
check "credits line: the newer burst made no try" \
	test "$(sql "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$small'")" = "$tries_small"
check "credits line: its timeline did not change" \
	test "$(sql "SELECT COUNT(*) FROM events WHERE experiment_id = '$small'")" = "$events_small"
isc cancel "$big" >/dev/null
isc cancel "$small" >/dev/null
check "credits line: both cancelled" wait_status "$small" cancelled 30

# 2. A shape excluded after a partial gang, across a restart. Ticks 5 s apart leave room
#    to stop iscd between the rollback and the next placement; the partial fault is used up
#    by then, so only the exclusion keeps the restarted iscd off the first shape.
stop_iscd
start_iscd --interval-ms 5000
fault '{"kind":"partial","instance_type":"g4dn.xlarge","count":1,"fail_nodes":1}'
id=$(submit "$launch/long.isc")
rolled_back() { isc status "$id" | grep -q "partial gang on aws-us-east-1-g4dn.xlarge-spot rolled back"; }
check "exclusion: the partial gang is rolled back" wait_until 60 rolled_back
stop_iscd
mock faults -X DELETE >/dev/null
# The restart came between the rollback and the next placement (else this tests nothing).
check "exclusion: iscd stopped before it placed the burst again" \
	test "$(sql "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$id'")" = 1
check "exclusion: the excluded shape is noted in the store" \
	test "$(sql "SELECT COUNT(*) FROM shape_exclusions WHERE experiment_id = '$id' AND shape_id = 'aws-us-east-1-g4dn.xlarge-spot'")" = 1
start_iscd
check "exclusion: after the restart the burst runs" wait_status "$id" running 60
shape=$(field "$id" shape)
check "exclusion: ... on the next shape, not the excluded one" \
	test "$shape" = "aws-us-east-1-g5.xlarge-ondemand"
[ "$shape" = "aws-us-east-1-g5.xlarge-ondemand" ] || { isc status "$id"; grep "$id" "$dir/iscd.log" | tail -30; } >&2
check "exclusion: one cluster on the excluded shape, the rolled-back one" \
	test "$(sql "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$id' AND shape_id = 'aws-us-east-1-g4dn.xlarge-spot'")" = 1

# 3. The periodic checkpoint sync across a restart. The cluster's clock started when it
#    began running (c0); iscd is stopped a moment later and down for a few seconds. The
#    sync falls due at c0 + checkpoint_sync_ms, not checkpoint_sync_ms after the restart.
cluster=$(sql "SELECT id FROM clusters WHERE experiment_id = '$id' AND state = 'running'")
clock_started() { [ -n "$(sql "SELECT checkpoints_at_ms FROM sync_clocks WHERE cluster_id = '$cluster'")" ]; }
check "sync clock: the running cluster's clock is in the store" wait_until 30 clock_started
c0=$(sql "SELECT checkpoints_at_ms FROM sync_clocks WHERE cluster_id = '$cluster'")
stop_iscd
# Down until half the period has gone: a clock restarted now would fall due at about
# c0 + 1.5 periods.
while [ "$(now_ms)" -lt $((c0 + sync_ms / 2)) ]; do sleep 0.1; done
start_iscd
synced() { [ "$(sql "SELECT checkpoints_at_ms FROM sync_clocks WHERE cluster_id = '$cluster'")" -gt "$c0" ]; }
check "sync clock: the restarted iscd syncs the checkpoints" wait_until 30 synced
c1=$(sql "SELECT checkpoints_at_ms FROM sync_clocks WHERE cluster_id = '$cluster'")
echo "sync clock: started at $c0, first checkpoint sync $((c1 - c0)) ms later (period $sync_ms ms)"
# Two ticks (2 s each here) of slack, and no earlier than the period.
check "sync clock: the sync fell due on the clock it had (period + at most two ticks)" \
	test $((c1 - c0)) -ge $sync_ms -a $((c1 - c0)) -le $((sync_ms + 4500))
isc cancel "$id" >/dev/null
check "sync clock: the burst is cancelled" wait_status "$id" cancelled 60
check "nothing is left running" wait_no_live
no_stale_clock() { [ "$(sql "SELECT COUNT(*) FROM sync_clocks s JOIN clusters c ON c.id = s.cluster_id WHERE c.state = 'closed'")" = 0 ]; }
check "the clocks of closed clusters are forgotten" wait_until 30 no_stale_clock

# 4. OCI: own terminations across a restart. A preemptible OCI burst completes; the broker
#    terminates its nodes. The restarted iscd's first describe (its reconciliation) lists
#    them terminated; its driver has no memory of terminating them, but no interruption
#    notice may be recorded for them.
oci=$(submit "$launch/oci-three.isc")
check "oci: the preemptible burst completes" wait_status "$oci" completed 90
closed() { [ "$(sql "SELECT state FROM clusters WHERE experiment_id = '$oci'")" = closed ]; }
check "oci: its cluster closes once the cloud confirms the terminations" wait_until 60 closed
notices() { sql "SELECT COUNT(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$oci' AND n.notice_at_ms IS NOT NULL"; }
check "oci: no notice before the restart" test "$(notices)" = 0
stop_iscd
start_iscd
# The first tick reconciles (describes every configured region) before it steps any burst:
# once a new burst has moved, the restarted iscd has described OCI.
after=$(submit "$launch/sleeper.isc")
moved() { [ "$(field "$after" status)" != enqueued ]; }
check "oci: the restarted iscd has ticked" wait_until 30 moved
check "oci: the cloud still lists the terminated instances" \
	test "$(mock instances | /usr/bin/python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "terminated"))' "$oci")" = 3
check "oci: after the restart its own terminations are no preemptions" test "$(notices)" = 0
check "oci: the next burst completes" wait_status "$after" completed 60
stop_iscd
check "no sanitizer report in iscd's log" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
check "no holds-check violation in iscd's log" bash -c "! grep -q 'holds check:' '$dir/iscd.log'"
finish restart-state
