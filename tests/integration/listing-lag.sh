#!/usr/bin/env bash
# Listing lag and absence (issue 48), on the sandbox's mock cloud, SQLite or (with
# ISC_STORE_URL) PostgreSQL. The mock cloud's own record of each instance (launch and
# termination times, which the broker cannot write) is the witness.
#
# 1-2. A running 2-node gang left out of every listing (the mock's describe_lag, in
#    us-west-2 only) for longer than node_absence_confirm_ms (2 s here): its nodes are
#    counted terminated, the gang fails over, new gangs launch (the lag hides them too).
#    Then the listings come back and the burst is cancelled. Nothing of it may be left
#    running on the cloud, and no instance-second of it unbilled beyond one tick (each
#    instance's charges, read from the ledger, cover its life on the cloud's record; none
#    overlap). Case 1: TerminateInstances fails (500) while the lag lasts, so the nodes
#    counted gone still run when they are listed again: the watch terminates them then.
#    Case 2: the teardown's terminate of the nodes counted gone by absence goes through.
#    Before the fix those nodes were never terminated and ran on, unbilled.
# 3. A kept node gets an interruption notice while its replacement still provisions (the
#    new node boots for 20 s): the replacement grows by it before that new node runs (the
#    store's time of the growth against the mock's of the node's start), not only once the
#    new node is up (item 5).
# 4. Rank 0 terminated while a replacement provisions, whose new node (rank 1) still
#    boots: rank 0 (MASTER_ADDR) goes to a kept node that runs, never to the booting one
#    (item 6).
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-lag.XXXXXX)
lag_cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap lag_cleanup EXIT
tick_ms=200
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=$tick_ms SANDBOX_BOOT_DELAY_MS=300 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
isc() { "$ISC_BIN/isc" "$@"; }
py() { /usr/bin/python3 "$@"; }
db() { store_sql -r "$1"; }
# A top-level key: before the first [table] of config.toml.
sed -i '1i node_absence_confirm_ms = 2000' "$ISC_HOME/config.toml"
"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
for _ in $(seq 1 100); do api_answers && break; sleep 0.1; done

within() {
	local secs=$1
	shift
	for _ in $(seq 1 $((secs * 5))); do
		"$@" 2>/dev/null && return 0
		sleep 0.2
	done
	"$@"
}
wait_cycle() {
	for _ in $(seq 1 $(($3 * 5))); do
		[ "$(status_of "$1") $(status_of "$1" cycle_count)" = "running $2" ] && return 0
		sleep 0.2
	done
	echo "experiment $1 never ran cycle $2" >&2
	return 1
}
rank_instance() {
	db "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	    WHERE c.experiment_id = '$1' AND n.rank = $2 ORDER BY c.created_at_ms DESC, c.id DESC LIMIT 1"
}
both_counted_gone() {
	[ "$(db "SELECT COUNT(*) FROM nodes WHERE instance_id IN ('$2', '$3') AND state = 'terminated'")" = 2 ] &&
		[ "$(db "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$1'")" -ge 2 ]
}
all_closed() { [ "$(db "SELECT COUNT(*) FROM clusters WHERE experiment_id = '$1' AND state != 'closed'")" = 0 ]; }
# rank0_is EXP INSTANCE: the newest open cluster of EXP has INSTANCE at rank 0.
rank0_is() {
	[ "$(db "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	         WHERE c.experiment_id = '$1' AND c.state <> 'closed' AND n.rank = 0
	         ORDER BY c.created_at_ms DESC, c.id DESC LIMIT 1")" = "$2" ]
}
status_says() { isc status "$1" | grep -qF -- "$2"; }

# bill_covers EXP: every instance of EXP on the mock's record is charged in the ledger
# from its launch (as EC2 reports it: to the second) to its termination, less at most
# one tick; its charges neither overlap nor leave a gap. Prints what it measured.
bill_covers() {
	mock instances >"$dir/inst.json"
	db "SELECT node_instance_id, period_start_ms, period_end_ms FROM ledger
	    WHERE kind = 'charge' AND experiment_id = '$1' ORDER BY node_instance_id, period_start_ms" \
		>"$dir/charges.txt"
	py - "$1" "$dir/inst.json" "$dir/charges.txt" "$tick_ms" "$dir/measured.txt" <<'PY'
import json, sys
exp, inst, charges, tick = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [r for r in json.load(open(inst)) if r["tags"].get("isc:experiment") == exp]
by = {}
for line in open(charges).read().splitlines():
    iid, a, b = line.split("|")
    by.setdefault(iid, []).append((int(a), int(b)))
bad, worst_unbilled, worst_over = [], 0, 0
for r in rows:
    iv = by.get(r["id"])
    if r["terminated_at"] is None:
        bad.append("%s still runs" % r["id"])
        continue
    if not iv:
        bad.append("%s (launched %d, terminated %d) never charged" % (r["id"], r["launched_at"], r["terminated_at"]))
        continue
    for (a0, b0), (a1, b1) in zip(iv, iv[1:]):
        if a1 != b0:
            bad.append("%s: charged %d..%d then %d..%d" % (r["id"], a0, b0, a1, b1))
    start, end = iv[0][0], iv[-1][1]
    launched = r["launched_at"] // 1000 * 1000
    unbilled = max(0, start - launched) + max(0, r["terminated_at"] - end)
    over = max(0, launched - start) + max(0, end - r["terminated_at"])
    worst_unbilled, worst_over = max(worst_unbilled, unbilled), max(worst_over, over)
    if unbilled > tick:
        bad.append("%s: %d ms of its life unbilled (cloud %d..%d, charged %d..%d)" % (
            r["id"], unbilled, launched, r["terminated_at"], start, end))
print("%s: %d instance(s); worst unbilled %d ms, worst charged past the cloud's record %d ms" % (
    exp, len(rows), worst_unbilled, worst_over), file=sys.stderr)
with open(sys.argv[5], "a") as m:
    print("measured %s: %d instance(s), worst unbilled %d ms, worst charged past the cloud's record %d ms%s" % (
        exp, len(rows), worst_unbilled, worst_over, " (FAILED)" if bad else ""), file=m)
for b in bad:
    print("%s: %s" % (exp, b), file=sys.stderr)
sys.exit(1 if bad or not rows else 0)
PY
}

cat >"$dir/west.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "listing-lag"
gpus = 2
burst_shape_priority_list = ["aws-us-west-2-g4dn.xlarge-spot"]
command = 'sleep 600'
ISC

# lag_case NAME FAIL_TERMINATE: cases 1 and 2.
lag_case() {
	local name=$1 fail_terminate=$2 id a b
	id=$(submit "$dir/west.isc")
	check "$name: runs cycle 1" wait_cycle "$id" 1 90
	a=$(rank_instance "$id" 0)
	b=$(rank_instance "$id" 1)
	[ "$fail_terminate" = 1 ] &&
		fault '{"kind":"error5xx","action":"TerminateInstances","count":100000000,"region":"us-west-2"}'
	fault '{"kind":"describe_lag","ms":3600000,"count":100000000,"region":"us-west-2"}'
	check "$name: both nodes counted terminated by absence, the gang failed over" \
		within 30 both_counted_gone "$id" "$a" "$b"
	sleep 1
	mock faults -X DELETE >/dev/null
	check "$name: the nodes counted gone are listed again, and said so" \
		within 20 status_says "$id" "the absence was a lagging listing"
	isc cancel "$id" >/dev/null
	check "$name: cancelled" wait_status "$id" cancelled 60
	check "$name: nothing of it left running on the cloud" wait_no_live "$id"
	check "$name: the first gang's nodes were terminated" \
		test "$(mock instances | py -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["id"] in sys.argv[1:] and r["state"] == "terminated"))' "$a" "$b")" = 2
	check "$name: every instance-second charged, within one tick" within 15 bill_covers "$id"
	check "$name: every cluster closed" within 15 all_closed "$id"
}
lag_case "lag, terminate refused meanwhile" 1
lag_case "lag" 0

# ---- 3-4. losses while a replacement provisions ----
cat >"$dir/three.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "listing-lag-replace"
gpus = 3
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "RANK=$RANK MASTER_ADDR=$MASTER_ADDR CYCLE=$STRONG_CYCLE_COUNT"; if [ "$STRONG_CYCLE_COUNT" = 1 ]; then echo 7 > /mnt/checkpoints/step; sleep 600; else sleep 1; fi'
ISC
# provisioning_with_pending ID: the replacement holds all 3 nodes (the kept ones moved in)
# and its new node still boots.
provisioning_with_pending() {
	[ "$(db "SELECT COUNT(*), SUM(CASE WHEN n.state = 'pending' THEN 1 ELSE 0 END) FROM nodes n
	         JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$1'
	         AND c.replaces <> '' AND c.state = 'launching'")" = "3|1" ]
}
grew=$(submit "$dir/three.isc")
zero=$(submit "$dir/three.isc")
for x in "$grew" "$zero"; do
	check "$x: runs cycle 1" wait_cycle "$x" 1 90
	check "$x: the checkpoint came home" within 20 test -s "$ISC_HOME/experiments/$x/checkpoints/step"
done
grew_ids=$(for r in 0 1 2; do rank_instance "$grew" "$r"; done | tr '\n' ' ')
zero_ids=$(for r in 0 1 2; do rank_instance "$zero" "$r"; done | tr '\n' ' ')
read -r g0 g1 g2 <<<"$grew_ids"
read -r z0 z1 z2 <<<"$zero_ids"
# The replacements' new nodes boot for 20 s.
mock boot_delay -X POST -d '{"ms":20000}' >/dev/null
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$g2\",\"notice_s\":30}"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$z1\",\"notice_s\":30}"
for x in "$grew" "$zero"; do
	check "$x: the replacement provisions, its new node booting" within 15 provisioning_with_pending "$x"
done
first_grew=$(db "SELECT id FROM clusters WHERE experiment_id = '$grew' AND replaces <> '' ORDER BY created_at_ms DESC LIMIT 1")
# 3: a notice on kept rank 1, 60 s before its termination.
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$g1\",\"notice_s\":60}"
# 4: rank 0 terminated (no notice); the kept rank 1 is the replacement's booting node.
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$z0\",\"notice_s\":0}"
# grew_before_up: the replacement of first_grew was recorded before first_grew's own new
# node ran (the mock's record of that node's start against the store's of the growth).
grew_before_up() {
	local at new_id
	at=$(db "SELECT created_at_ms FROM clusters WHERE replaces = '$first_grew'")
	new_id=$(db "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	             WHERE c.experiment_id = '$grew' AND n.instance_id NOT IN ('$g0', '$g1', '$g2')
	             ORDER BY n.id LIMIT 1")
	[ -n "$at" ] && [ -n "$new_id" ] || return 1
	mock instances | py -c '
import json, sys
r = [r for r in json.load(sys.stdin) if r["id"] == sys.argv[1]][0]
sys.exit(0 if r["running_at"] is None or int(sys.argv[2]) < r["running_at"] else 1)' "$new_id" "$at"
}
check "notice on a kept node: the replacement grows while its new node still boots" \
	within 15 grew_before_up
mock boot_delay -X POST -d '{"ms":300}' >/dev/null
check "rank 0 lost: a kept node that runs became rank 0, not the booting one" \
	within 10 rank0_is "$zero" "$z2"
for x in "$grew" "$zero"; do
	check "$x: completes" wait_status "$x" completed 150
	check "$x: nothing left running" wait_no_live "$x"
	check "$x: every instance-second charged, within one tick" within 15 bill_covers "$x"
done
# Every rank of the last cycle names the same MASTER_ADDR, rank 0's (the kept node's).
master_is() {
	local out ip
	out=$(status_of "$1" output_path)
	ip=$(mock instances | py -c 'import json,sys; print([r["ip"] for r in json.load(sys.stdin) if r["id"] == sys.argv[1]][0])' "$2")
	for r in 0 1 2; do
		[ "$(grep "CYCLE=2" "$out/rank_$r.txt" | tail -n 1 | grep -o 'MASTER_ADDR=[^ ]*')" = "MASTER_ADDR=$ip" ] || return 1
	done
}
check "rank 0 lost: every rank's MASTER_ADDR is the kept node's" master_is "$zero" "$z2"
check "no sanitizer report, no abort in iscd's log" \
	bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error|holds check' '$dir/iscd.log'"
check "iscd still runs" kill -0 "$(cat "$dir/iscd.pid")"
# What the bill checks measured (the last pass of each).
[ -s "$dir/measured.txt" ] && tac "$dir/measured.txt" | awk '!seen[$2]++' | tac
finish listing-lag
