#!/usr/bin/env bash
# Fault suite: many bursts on the mock cloud while interruptions, capacity errors,
# throttling, 5xx, lost replies and kill -9 of iscd are injected at random points.
# At the end: every experiment is final or still correctly running, no instance is
# left running that no live cluster owns, no intent (client token) created instances
# twice, and every interrupted experiment resumed with its cycle count raised.
# FAULT_SECONDS (default 45) bounds the injection phase; FAULT_SEED makes it repeatable;
# FAULT_KILL_EVERY=S also kills iscd with -9 every S seconds (a soak: many crashes).
# Before the random phase, two set cases (tests/integration/faults-cases.bash): a cancel
# while RunInstances' replies are lost and the listing lags, and the replacement's rank 0
# interrupted while the checkpoint is restored onto it.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-faults.XXXXXX)
cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
isc() { "$ISC_BIN/isc" "$@"; }
mock() { curl -s "$MOCKCLOUD_URL/_mock/$1" "${@:2}"; }
fault() { mock faults -X POST -H 'Content-Type: application/json' -d "$1" >/dev/null; }
start_iscd() {
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	echo $! >"$dir/iscd.pid"
}
start_iscd
RANDOM=${FAULT_SEED:-$$}
secs=${FAULT_SECONDS:-45}
declare -A injected=()
ids=()

cat >"$dir/job.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "fault-job"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot", "aws-us-east-1-g5.xlarge-spot", "aws-us-west-2-g4dn.xlarge-spot"]
command = 'echo "start cycle $STRONG_CYCLE_COUNT"; for i in $(seq 1 40); do echo $i > /mnt/checkpoints/step; sleep 0.1; done'
ISC

# ---- Two set cases first, side by side (faults-cases.bash; FAULT_LAG_MS, default 60000) ----
. "$(dirname "$0")/faults-cases.bash"

end=$((SECONDS + secs))
kill_every=${FAULT_KILL_EVERY:-0}
next_kill=$((SECONDS + kill_every))
died=0 refused=0
kill9() {
	# A daemon found dead before our kill died on its own: that is a failure.
	kill -0 "$(cat "$dir/iscd.pid")" 2>/dev/null || died=$((died + 1))
	kill -KILL "$(cat "$dir/iscd.pid")" 2>/dev/null
	wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	sleep 0.$((RANDOM % 10))
	start_iscd
	injected[kill9]=$((${injected[kill9]:-0} + 1))
}
while [ $SECONDS -lt $end ]; do
	if [ "$kill_every" -gt 0 ] && [ $SECONDS -ge $next_kill ]; then
		kill9
		next_kill=$((SECONDS + kill_every))
	fi
	case $((RANDOM % 9)) in
	0 | 1)
		id=$(isc burst "$dir/job.isc" | grep -Eo 'exp_[0-9a-f]{16}')
		if [ -n "$id" ]; then ids+=("$id"); else refused=$((refused + 1)); fi
		injected[burst]=$((${injected[burst]:-0} + 1))
		;;
	2) fault '{"kind":"capacity","instance_type":"g4dn.xlarge","count":2}'; injected[capacity]=$((${injected[capacity]:-0} + 1)) ;;
	3) fault '{"kind":"throttle","count":2}'; injected[throttle]=$((${injected[throttle]:-0} + 1)) ;;
	4) fault '{"kind":"error5xx","count":2}'; injected[error5xx]=$((${injected[error5xx]:-0} + 1)) ;;
	5)
		actions=(RunInstances TerminateInstances DescribeInstances)
		fault "{\"kind\":\"lose_response\",\"action\":\"${actions[$((RANDOM % 3))]}\",\"count\":1}"
		injected[lose_response]=$((${injected[lose_response]:-0} + 1))
		;;
	6)
		victim=$(mock instances | /usr/bin/python3 -c '
import json, random, sys
rows = [r for r in json.load(sys.stdin) if r["state"] == "running" and r["spot"]]
print(random.choice(rows)["id"] if rows else "")')
		if [ -n "$victim" ]; then
			fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":5}"
			injected[interrupt]=$((${injected[interrupt]:-0} + 1))
		fi
		;;
	7) kill9 ;;
	8) sleep 1 ;;
	esac
	sleep 0.$((RANDOM % 8 + 2))
done
mock faults -X DELETE >/dev/null

# Let everything settle: every experiment final (these jobs end by themselves).
settled() {
	for id in "${ids[@]}"; do
		s=$(isc status "$id" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
		case $s in completed | failed | cancelled | stopped) ;; *) return 1 ;; esac
	done
	return 0
}
for _ in $(seq 1 300); do settled && break; sleep 1; done
check "every experiment reached a final state" settled
lost_launch_closed # faults-cases.bash: the lost launch's cluster closed meanwhile
for _ in $(seq 1 60); do
	[ "$(mock instances | /usr/bin/python3 -c 'import json,sys; print(sum(r["state"] != "terminated" for r in json.load(sys.stdin)))')" = 0 ] && break
	sleep 0.5
done
check "no instance is left running" test "$(mock instances | /usr/bin/python3 -c 'import json,sys; print(sum(r["state"] != "terminated" for r in json.load(sys.stdin)))')" = 0
check "the mock cloud gives its record of every instance" mock instances -o "$dir/instances.json"
# Every gang is 2 nodes, or the k lost nodes a replacement launched (its intent's count,
# issue 32): a token or a cluster tag with other than that many instances is a duplicate.
sqlite3 "file:$ISC_HOME/isc.db?mode=ro" "SELECT cluster_id, count FROM intents" >"$dir/counts"
/usr/bin/python3 -c '
import collections, json, sys
rows = json.load(open(sys.argv[1]))
want = {c: int(n) for c, n in (l.split("|") for l in open(sys.argv[3]).read().split())}
by_token = collections.Counter(r["client_token"] for r in rows)
by_cluster = collections.Counter(r["tags"].get("isc:cluster") for r in rows)
cluster_of = {r["client_token"]: r["tags"].get("isc:cluster") for r in rows}
dup = sum(1 for t, c in by_token.items() if c != want.get(cluster_of[t], 2))
dup += sum(1 for k, c in by_cluster.items() if c != want.get(k, 2))
leaked = sum(1 for r in rows if r["state"] != "terminated")
print("instances %d, gangs %d, duplicate gangs %d, instances leaked %d" % (len(rows), len(by_cluster), dup, leaked))
open(sys.argv[2], "w").write("%d %d\n" % (dup, leaked))' "$dir/instances.json" "$dir/gangs" "$dir/counts"
read -r dup leaked <"$dir/gangs"
check "each client token and each cluster has exactly one gang" test "$dup" = 0
check "no instance leaked" test "$leaked" = 0
resumed_ok=1
for id in "${ids[@]}"; do
	isc status "$id" --json >"$dir/s.json"
	/usr/bin/python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
import re
kinds = [x["kind"] for x in e["events"]]
if "interrupted" in kinds:
    first = kinds.index("interrupted")
    after = kinds[first:]
    # Resumed means it ran again in the cycle the interruption named (a later one for a
    # running cluster; the same one for a node lost while its cluster booted, as nothing
    # ran), or was ended while trying to.
    m = re.search(r"for cycle (\d+)", e["events"][first]["message"])
    if "running" in after and e["cycle_count"] < (int(m.group(1)) if m else 2):
        sys.exit(1)
sys.exit(0)' "$dir/s.json" || resumed_ok=0
done
check "interrupted experiments resumed with the cycle count raised" test $resumed_ok = 1
summary=""
for k in burst capacity throttle error5xx lose_response interrupt kill9; do summary+="$k=${injected[$k]:-0} "; done
echo "faults injected: $summary"
echo "bursts: ${#ids[@]}, iscd crashes (kill -9): ${injected[kill9]:-0}"
check "iscd never died on its own" test "$died" = 0
check "every submission was accepted" test "$refused" = 0
check "iscd is alive at the end" kill -0 "$(cat "$dir/iscd.pid")"
kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null
check "no sanitizer report in iscd's log" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
grep -E -A30 'AddressSanitizer|LeakSanitizer|runtime error' "$dir/iscd.log" | head -40 >&2

# A renewal racing a release (issue 30): ISC_TEST_RENEW_RACE=1 holds the meter's first
# renewal of a stopping experiment's cluster until the experiment has ended, so it lands
# after the teardown released the hold. The rule reads the cluster and the experiment in
# the renewal's transaction and adds nothing; the holds check (on in every test build)
# would abort iscd if the ended experiment held anything.
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
ISC_TEST_RENEW_RACE=1 "$ISC_BIN/iscd" 2>>"$dir/iscd-race.log" &
race_pid=$!
cat >"$dir/race.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "renew-race"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot", "aws-us-east-1-g5.xlarge-spot"]
command = 'trap "sleep 1.5; exit 0" TERM; while :; do sleep 0.1; done'
ISC
race_id=$(submit "$dir/race.isc")
check "renewal race: the burst runs" wait_status "$race_id" running 60
isc cancel "$race_id" >/dev/null
check "renewal race: the cancel ends it" wait_status "$race_id" cancelled 60
check "renewal race: the hook held the renewal until the experiment ended" \
	grep -q "test hook: renewing cluster .* now that $race_id is cancelled" "$dir/iscd-race.log"
held_after() {
	# A charge consumes the hold in its own row (consumed_micros, migration 24).
	sqlite3 "$ISC_HOME/isc.db" "SELECT COALESCE(SUM(CASE kind WHEN 'reserve' THEN amount_micros WHEN 'release' THEN -amount_micros ELSE -consumed_micros END), 0) FROM ledger WHERE experiment_id = '$race_id' AND kind IN ('reserve', 'release', 'charge') AND billing = 'credits'"
}
check "renewal race: the cancelled experiment holds nothing" test "$(held_after)" = 0
# No reserve row after the release at the teardown: the late renewal wrote nothing.
check "renewal race: no hold was taken after the release" test "$(sqlite3 "$ISC_HOME/isc.db" "SELECT COUNT(*) FROM ledger WHERE experiment_id = '$race_id' AND kind = 'reserve' AND id > (SELECT MIN(id) FROM ledger WHERE experiment_id = '$race_id' AND kind = 'release' AND note = 'released')")" = 0
# The holds check runs every tick (200 ms): a few ticks after the racing renewal.
sleep 1
check "renewal race: iscd (holds check on) is alive" kill -0 "$race_pid"
kill -TERM "$race_pid" 2>/dev/null
wait "$race_pid" 2>/dev/null
check "renewal race: no holds-check violation in iscd's log" bash -c "! grep -q 'holds check:' '$dir/iscd-race.log'"
finish faults
