#!/usr/bin/env bash
# Lost nodes (issue 32): a 4-node spot burst that loses k of its nodes keeps the others.
# For each case the mock cloud's own record is the witness: the kept instances are never
# terminated (still running, no terminate time), exactly k instances are launched for
# the recovery, in the gang's zone and placement group, and all four ranks run cycle 2
# with the right environment (RANK, NNODES, MASTER_ADDR = rank 0's address, which is never
# a replacement, IP_TO_RANK_MAPPING written anew), resume from the checkpoint and complete.
# Cases: one node lost with a notice; rank 0 lost without one (a kept node becomes rank
# 0); two nodes lost at once; no capacity for the replacement in the gang's zone (the
# whole-gang failover, and isc status says why); one node lost on GCP (a preemption) and
# on OCI (a preemptible instance reclaimed); a kept node lost while its replacement boots
# (the replacement grows by it); a cancel while a replacement boots with rank 0 lost and
# the kept ranks started early (the checkpoint at home stays the last cycle's); a node of
# a new gang lost before its first containers start (the others kept). While the replacements boot, the kept nodes'
# containers start and wait for them (isc status says so). Then a crash at each new step
# (lostnodes.* crash points: recorded, before the launch, replacement launched, containers
# stopped, kept nodes moved, kept nodes' containers started early, restore under way) resumes to the same outcome with no second
# launch. Needs the sanitizer build (ISC_BIN from `make check`): only it has crash points.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-lost.XXXXXX)
ln_cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap ln_cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_BOOT_DELAY_MS=300 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
isc() { "$ISC_BIN/isc" "$@"; }
py() { /usr/bin/python3 "$@"; }
db() { sqlite3 "file:$ISC_HOME/isc.db?mode=ro" "$1"; }
ln_start_iscd() {
	echo "---- iscd start ${ISC_CRASH_AT:-}" >>"$dir/iscd.log"
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	echo $! >"$dir/iscd.pid"
}
# ln_wait_cycle ID CYCLE SECONDS: running in that cycle.
ln_wait_cycle() {
	for _ in $(seq 1 $(($3 * 5))); do
		[ "$(status_of "$1") $(status_of "$1" cycle_count)" = "running $2" ] && return 0
		sleep 0.2
	done
	echo "experiment $1 never ran cycle $2" >&2
	isc status "$1" >&2
	return 1
}
# ln_rank_instance ID RANK: the instance holding RANK in the experiment's newest cluster.
ln_rank_instance() {
	db "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	    WHERE c.experiment_id = '$1' AND n.rank = $2 ORDER BY c.created_at_ms DESC, c.id DESC LIMIT 1"
}
# ln_cycle1_running ID: every rank of cycle 1 printed its line (the containers run).
ln_cycle1_running() {
	local out r
	out=$(status_of "$1" output_path)
	for r in $(seq 0 $((${2:-4} - 1))); do grep -q "CYCLE=1 " "$out/rank_$r.txt" 2>/dev/null || return 1; done
}
ln_within() {
	local secs=$1
	shift
	for _ in $(seq 1 $((secs * 5))); do
		"$@" 2>/dev/null && return 0
		sleep 0.2
	done
	"$@"
}

# ln_file NAME GPUS SHAPE: a launch file whose ranks print their environment and, in cycle
# 1, write a checkpoint and run until stopped; in cycle 2 they end after a second.
ln_file() {
	cat >"$dir/$1.isc" <<ISC
isc_project_id = "demo"
experiment_name = "lost-nodes-$1"
gpus = $2
burst_shape_priority_list = ["$3"]
command = 'echo "RANK=\$RANK NNODES=\$NNODES MASTER_ADDR=\$MASTER_ADDR CYCLE=\$STRONG_CYCLE_COUNT FROM=\$(cat /mnt/checkpoints/step 2>/dev/null || echo none) MAP=\$IP_TO_RANK_MAPPING"; if [ "\$STRONG_CYCLE_COUNT" = 1 ]; then echo 7 > /mnt/checkpoints/step; sleep 600; else sleep 1; fi'
ISC
}
ln_file four 4 aws-us-east-1-g4dn.xlarge-spot
ln_file cap 4 aws-us-east-1-g5.xlarge-spot
ln_file gcp 4 gcp-us-central1-g2-standard-4-spot
ln_file oci 3 oci-us-ashburn-1-VM.GPU3.1-spot

# ln_verify ID KEPT_IDS LOST_IDS NEW_COUNT FALLBACK: the mock's record and the ranks' output.
# KEPT_IDS: the instances that must never have been terminated (space-separated; with
# FALLBACK=1 they are the ones the whole-gang failover terminates instead).
# AGAIN=1 (7th): a rank's cycle 2 may have started more than once (kept ranks started
# early in a replacement that then grew); its last start is the one checked.
ln_verify() {
	local id=$1 kept=$2 lost=$3 want_new=$4 fallback=$5 nn=${6:-4} again=${7:-0}
	mock instances >"$dir/inst.json"
	db "SELECT c.id, c.zone, c.cycle, c.replaces, n.rank, n.instance_id FROM clusters c
	    JOIN nodes n ON n.cluster_id = c.id WHERE c.experiment_id = '$id'
	    ORDER BY c.created_at_ms, c.id, n.rank" >"$dir/nodes.txt"
	py - "$id" "$kept" "$lost" "$want_new" "$fallback" "$dir/inst.json" "$(status_of "$id" output_path)" \
		"$(status_of "$id")" "$dir/nodes.txt" "$nn" "$again" 2>>"$dir/verify.log" <<'PY'
import json, re, sys
exp, kept, lost, want_new, fallback, inst_path, out, status, nodes_path, nn, again = sys.argv[1:]
kept, lost, want_new, fallback, nn = kept.split(), lost.split(), int(want_new), fallback == "1", int(nn)
again = again == "1"
# The experiment's tag (EC2, OCI) or label (GCE).
rows = [r for r in json.load(open(inst_path))
        if exp in (r["tags"].get("isc:experiment"), r["tags"].get("isc-experiment"))]
by_id = {r["id"]: r for r in rows}
bad = []
if status != "completed":
    bad.append("status %s, not completed" % status)
first = sorted(rows, key=lambda r: (r["launched_at"], r["id"]))[:nn]
orig = {r["id"] for r in first}
new = [r for r in rows if r["id"] not in orig]
if len(new) != want_new:
    bad.append("%d instance(s) launched for the recovery, wanted %d" % (len(new), want_new))
zone = first[0]["zone"] if first else "?"
# Where the gang sits: its EC2 cluster placement group or GCE compact placement policy
# (OCI: a compute cluster only for RDMA shapes, none for a VM).
def placement(r):
    return r.get("placement_group") or ",".join(r.get("resource_policies") or []) or None
group = placement(first[0]) if first else None
if first and first[0].get("provider", "aws") in ("aws", "gcp") and not group:
    bad.append("the %s gang has no placement group or policy" % first[0].get("provider", "aws"))
for r in new if not fallback else []:
    if r["zone"] != zone:
        bad.append("replacement %s in %s, the gang is in %s" % (r["id"], r["zone"], zone))
    if placement(r) != group:
        bad.append("replacement %s placed %s, the gang %s" % (r["id"], placement(r), group))
# The kept instances ran through the recovery: terminated only by the experiment's end,
# after every replacement was running (never by the recovery).
ends = [r["running_at"] or 0 for r in new]
for k in kept:
    r = by_id.get(k)
    if r is None:
        bad.append("kept %s unknown" % k)
    elif fallback:
        if r["state"] not in ("terminated", "shutting-down"):
            bad.append("fallback: old node %s is %s" % (k, r["state"]))
    elif r["terminated_at"] and ends and r["terminated_at"] < max(ends):
        bad.append("kept %s terminated at %s, before the replacement ran" % (k, r["terminated_at"]))
# Cycle 2: all four ranks, with the environment of the new layout.
lines = {}
for rank in range(nn):
    try:
        text = open("%s/rank_%d.txt" % (out, rank)).read()
    except OSError:
        bad.append("no output of rank %d" % rank)
        continue
    m = [l for l in text.splitlines() if "CYCLE=2 " in l]
    if len(m) != 1 and not (again and m):
        bad.append("rank %d printed %d cycle-2 line(s)" % (rank, len(m)))
        continue
    lines[rank] = dict(kv.split("=", 1) for kv in re.findall(r"\S+=\S+", m[-1]))
last = {}
for line in open(nodes_path).read().splitlines():
    cid, czone, cycle, replaces, rank, iid = line.split("|")
    if cycle == "2":
        last[int(rank)] = iid
if sorted(last) != list(range(nn)):
    bad.append("cycle 2's ranks: %s" % sorted(last))
ip = {r["id"]: r["ip"] for r in rows}
master = ip.get(last.get(0))
mapping = {ip.get(i): rk for rk, i in last.items()}
for rank, env in lines.items():
    if env.get("RANK") != str(rank) or env.get("NNODES") != str(nn):
        bad.append("rank %d's environment: RANK=%s NNODES=%s" % (rank, env.get("RANK"), env.get("NNODES")))
    if env.get("MASTER_ADDR") != master:
        bad.append("rank %d's MASTER_ADDR %s, rank 0 is %s" % (rank, env.get("MASTER_ADDR"), master))
    if json.loads(env.get("MAP", "{}")) != mapping:
        bad.append("rank %d's IP_TO_RANK_MAPPING %s, wanted %s" % (rank, env.get("MAP"), mapping))
    if env.get("FROM") != "7":
        bad.append("rank %d resumed from %s, not the checkpoint" % (rank, env.get("FROM")))
if not fallback:
    if master in {ip.get(r["id"]) for r in new}:
        bad.append("MASTER_ADDR %s is a replacement" % master)
    for k in kept:
        if k not in last.values():
            bad.append("kept %s holds no rank in cycle 2" % k)
for l in lost:
    if l in last.values():
        bad.append("lost %s holds a rank in cycle 2" % l)
for b in bad:
    print("%s: %s" % (exp, b), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
# ln_status_says ID TEXT: isc status (its timeline and events) mentions TEXT.
ln_status_says() { isc status "$1" | grep -qF -- "$2"; }

ln_start_iscd

# ---- 1-6. side by side: one node lost with a notice; rank 0 without one; two at once; no
# capacity for the replacement (another shape, so no other case meets the capacity fault);
# one node of a GCP gang preempted; one of an OCI gang reclaimed ----
one=$(submit "$dir/four.isc")
zero=$(submit "$dir/four.isc")
two=$(submit "$dir/four.isc")
cap=$(submit "$dir/cap.isc")
gcp=$(submit "$dir/gcp.isc")
oci=$(submit "$dir/oci.isc")
declare -A nn=([$one]=4 [$zero]=4 [$two]=4 [$cap]=4 [$gcp]=4 [$oci]=3) all_ids=()
for x in "$one" "$zero" "$two" "$cap" "$gcp" "$oci"; do
	check "$x runs cycle 1 on ${nn[$x]} nodes" ln_wait_cycle "$x" 1 120
done
for x in "$one" "$zero" "$two" "$cap" "$gcp" "$oci"; do
	check "$x: every rank of cycle 1 started" ln_within 30 ln_cycle1_running "$x" "${nn[$x]}"
	# The periodic sync (checkpoint_sync_ms) has brought the checkpoint home: rank 0 may
	# go without notice, and nothing can be brought from it then.
	check "$x: the checkpoint came home" ln_within 15 test -s "$ISC_HOME/experiments/$x/checkpoints/step"
	all_ids[$x]=$(for r in $(seq 0 $((${nn[$x]} - 1))); do ln_rank_instance "$x" "$r"; done | tr '\n' ' ')
done
one_lost=$(ln_rank_instance "$one" 2)
zero_lost=$(ln_rank_instance "$zero" 0)
two_lost="$(ln_rank_instance "$two" 1) $(ln_rank_instance "$two" 3)"
cap_lost=$(ln_rank_instance "$cap" 3)
cap_zone=$(db "SELECT zone FROM clusters WHERE experiment_id = '$cap'")
gcp_lost=$(ln_rank_instance "$gcp" 1)
oci_lost=$(ln_rank_instance "$oci" 2)
# From here nodes boot for 4 s: long enough, even on a loaded machine, that a
# replacement's kept nodes are restored and their containers started while the new node
# still boots (the early start).
mock boot_delay -X POST -d '{"ms":4000}' >/dev/null
fault "{\"kind\":\"capacity\",\"instance_type\":\"g5.xlarge\",\"zone\":\"$cap_zone\",\"count\":1}"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$one_lost\",\"notice_s\":20}"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$zero_lost\",\"notice_s\":0}"
# Both in one step: two faults one after the other can be seen apart by a describe in
# between, and a kept node lost during a replacement is the whole-gang fallback.
read -r two_a two_b <<<"$two_lost"
fault "{\"kind\":\"interrupt\",\"instance_ids\":[\"$two_a\",\"$two_b\"],\"notice_s\":20}"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$cap_lost\",\"notice_s\":20}"
fault "{\"kind\":\"preempt\",\"instance_id\":\"$gcp_lost\",\"notice_s\":10}"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$oci_lost\",\"notice_s\":0}"
kept_of() {
	local out=""
	for i in $1; do case " $2 " in *" $i "*) ;; *) out="$out $i" ;; esac; done
	echo "$out"
}
for x in "$one" "$zero" "$two" "$cap" "$gcp" "$oci"; do
	check "$x completes after the loss" wait_status "$x" completed 150
done
check "one lost: 3 kept running through, 1 launched, cycle 2 right" \
	ln_verify "$one" "$(kept_of "${all_ids[$one]}" "$one_lost")" "$one_lost" 1 0
check "rank 0 lost: 3 kept, 1 launched, a kept node is rank 0" \
	ln_verify "$zero" "$(kept_of "${all_ids[$zero]}" "$zero_lost")" "$zero_lost" 1 0
check "two lost at once: 2 kept, 2 launched, cycle 2 right" \
	ln_verify "$two" "$(kept_of "${all_ids[$two]}" "$two_lost")" "$two_lost" 2 0
check "rank 0 lost: the old rank 1 became rank 0" \
	test "$(db "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$zero' AND c.cycle = 2 AND n.rank = 0")" = "$(echo "${all_ids[$zero]}" | cut -d' ' -f2)"
check "isc status says the lost node was replaced alone" ln_status_says "$one" "replacing 1 of 4 node(s)"
check "isc status says two were replaced" ln_status_says "$two" "replacing 2 of 4 node(s)"
check "isc status says a kept node became rank 0" ln_status_says "$zero" "a kept node becomes rank 0"
for x in "$one" "$zero" "$two"; do
	check "$x: the kept nodes' containers started while the new node booted" \
		ln_status_says "$x" "kept node(s)' containers; they wait for the new one(s)"
done
check "kept nodes are charged on their own rows (5 node rows for 5 instances)" \
	test "$(db "SELECT COUNT(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$one'")" = 5
# ln_charges_continue ID KEPT_IDS: the ledger's charges of each instance never overlap and
# leave no gap (nothing charged twice, nothing skipped), and a kept instance's charges go
# on under the replacement cluster (one interval; charged at most once a minute, issue 49,
# its time under the old cluster may be in a charge made after it moved).
ln_charges_continue() {
	db "SELECT node_instance_id, cluster_id, period_start_ms, period_end_ms FROM ledger
	    WHERE kind = 'charge' AND experiment_id = '$1' ORDER BY node_instance_id, period_start_ms" |
		py -c '
import sys
kept = sys.argv[1].split()
rows = [l.split("|") for l in sys.stdin.read().splitlines() if l]
by = {}
for iid, cid, a, b in rows:
    by.setdefault(iid, []).append((int(a), int(b), cid))
bad = []
for iid, iv in by.items():
    for (a0, b0, _), (a1, b1, _) in zip(iv, iv[1:]):
        if a1 != b0:
            bad.append("%s: charged %d..%d then %d..%d" % (iid, a0, b0, a1, b1))
for k in kept:
    if not by.get(k) or by[k][-1][2] != sys.argv[2]:
        bad.append("%s: its last charge is not under the replacement %s: %s" % (k, sys.argv[2], by.get(k)))
for x in bad:
    print(x, file=sys.stderr)
sys.exit(1 if bad or not by else 0)' "$2" "$(db "SELECT id FROM clusters WHERE experiment_id = '$1' AND replaces <> ''")"
}
check "one lost: each node charged once, the kept ones on through the replacement" \
	ln_charges_continue "$one" "$(kept_of "${all_ids[$one]}" "$one_lost")"
check "no capacity: the whole gang failed over (4 launched, the old ones terminated)" \
	ln_verify "$cap" "$(kept_of "${all_ids[$cap]}" "$cap_lost")" "$cap_lost" 4 1
check "isc status says the replacement fell back, and why" ln_status_says "$cap" "whole-gang failover"
check "isc status names the capacity error" ln_status_says "$cap" "capacity"
check "GCP: 3 kept, 1 launched into the gang's zone, cycle 2 right" \
	ln_verify "$gcp" "$(kept_of "${all_ids[$gcp]}" "$gcp_lost")" "$gcp_lost" 1 0
check "OCI: 2 kept, 1 launched into the gang's AD, cycle 2 right" \
	ln_verify "$oci" "$(kept_of "${all_ids[$oci]}" "$oci_lost")" "$oci_lost" 1 0 3
check "nothing left of the six" wait_no_live

# ---- 7. a kept node lost while its replacement still boots: the replacement grows by it
# (one more node launched for the same cycle), never the whole gang ----
# replacement_booting ID: the replacement holds all 4 nodes (the kept ones moved in) and
# its new node still boots.
replacement_booting() {
	[ "$(db "SELECT COUNT(*), SUM(n.state = 'pending') FROM nodes n JOIN clusters c
	         ON c.id = n.cluster_id WHERE c.experiment_id = '$1' AND c.replaces <> ''
	         AND c.state = 'launching'")" = "4|1" ]
}
grow=$(submit "$dir/four.isc")
check "grow: runs cycle 1" ln_wait_cycle "$grow" 1 120
check "grow: every rank of cycle 1 started" ln_within 30 ln_cycle1_running "$grow" 4
check "grow: the checkpoint came home" ln_within 15 test -s "$ISC_HOME/experiments/$grow/checkpoints/step"
grow_ids=$(for r in 0 1 2 3; do ln_rank_instance "$grow" "$r"; done | tr '\n' ' ')
grow_first=$(ln_rank_instance "$grow" 2)
grow_second=$(ln_rank_instance "$grow" 3)
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$grow_first\",\"notice_s\":20}"
check "grow: the replacement holds the kept nodes while its new node boots" \
	ln_within 30 replacement_booting "$grow"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$grow_second\",\"notice_s\":0}"
check "grow: completes" wait_status "$grow" completed 150
check "grow: 2 kept, 2 launched (one per loss), all ranks in cycle 2" \
	ln_verify "$grow" "$(kept_of "$grow_ids" "$grow_first $grow_second")" "$grow_first $grow_second" 2 0 4 1
check "grow: isc status says the replacement lost a node before its ranks ran" \
	ln_status_says "$grow" "before its ranks ran"
check "grow: no whole-gang failover" bash -c "! '$ISC_BIN/isc' status '$grow' | grep -q 'whole-gang failover'"
check "grow: nothing left" wait_no_live

# ---- 7b. a cancel while a replacement boots, rank 0 lost and the kept ranks' containers
# started early: everything ends (the kept nodes with it), and the checkpoint at home is
# the one the drain brought (nothing is brought home from the replacement) ----
canc=$(submit "$dir/four.isc")
check "cancel: runs cycle 1" ln_wait_cycle "$canc" 1 120
check "cancel: every rank of cycle 1 started" ln_within 30 ln_cycle1_running "$canc" 4
check "cancel: the checkpoint came home" ln_within 15 test -s "$ISC_HOME/experiments/$canc/checkpoints/step"
mock boot_delay -X POST -d '{"ms":6000}' >/dev/null
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$(ln_rank_instance "$canc" 0)\",\"notice_s\":20}"
check "cancel: the kept ranks' containers started while the new node boots" \
	ln_within 30 ln_status_says "$canc" "kept node(s)' containers; they wait"
check "cancel: rank 0 was lost, a kept node took it" ln_status_says "$canc" "a kept node becomes rank 0"
isc cancel "$canc" >/dev/null
check "cancel: cancelled" wait_status "$canc" cancelled 60
mock boot_delay -X POST -d '{"ms":4000}' >/dev/null
check "cancel: nothing left running" wait_no_live "$canc"
check "cancel: the checkpoint at home is the last cycle's" \
	test "$(cat "$ISC_HOME/experiments/$canc/checkpoints/step" 2>/dev/null)" = 7

# ---- 8. a node of a new gang lost just before its first containers start: the others are
# kept and one node is launched for the same (first) cycle, never the whole gang ----
cat >"$dir/first.isc" <<ISC
isc_project_id = "demo"
experiment_name = "lost-nodes-first"
gpus = 4
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "RANK=\$RANK CYCLE=\$STRONG_CYCLE_COUNT MAP=\$IP_TO_RANK_MAPPING"; sleep 1'
ISC
# first_verify ID KEPT_IDS LOST_ID: 5 instances (4 and 1 launched for the loss), the kept
# ones running until the replacement ran, and every rank's one cycle-1 line names the
# gang as it booted (the new node in, the lost one out).
first_verify() {
	mock instances >"$dir/inst.json"
	py - "$1" "$2" "$3" "$dir/inst.json" "$(status_of "$1" output_path)" "$(status_of "$1")" \
		2>>"$dir/verify.log" <<'PY'
import json, re, sys
exp, kept, lost, inst_path, out, status = sys.argv[1:]
rows = [r for r in json.load(open(inst_path)) if r["tags"].get("isc:experiment") == exp]
by_id = {r["id"]: r for r in rows}
first = {r["id"] for r in sorted(rows, key=lambda r: (r["launched_at"], r["id"]))[:4]}
new = [r for r in rows if r["id"] not in first]
bad = [] if status == "completed" else ["status %s" % status]
if len(new) != 1:
    bad.append("%d launched for the loss, wanted 1" % len(new))
for k in kept.split():
    t = by_id[k]["terminated_at"]
    if t and new and t < (new[0]["running_at"] or 0):
        bad.append("kept %s terminated before the replacement ran" % k)
gang = {by_id[k]["ip"] for k in kept.split()} | {r["ip"] for r in new}
for rank in range(4):
    try:
        m = [l for l in open("%s/rank_%d.txt" % (out, rank)).read().splitlines() if "CYCLE=" in l]
    except OSError:
        m = []
    if len(m) != 1 or "CYCLE=1 " not in m[0] or "RANK=%d " % rank not in m[0]:
        bad.append("rank %d printed %s" % (rank, m))
        continue
    ips = set(json.loads(re.search(r"MAP=(\S+)", m[0]).group(1)))
    if ips != gang:
        bad.append("rank %d's IP_TO_RANK_MAPPING %s, the gang %s" % (rank, sorted(ips), sorted(gang)))
for b in bad:
    print("%s: %s" % (exp, b), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
node_gone() { [ -n "$(db "SELECT 1 FROM nodes WHERE instance_id = '$1' AND state NOT IN ('pending', 'running')")" ]; }
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
touch "$dir/pause"
ISC_PAUSE_AT=provision.cluster_booting ISC_PAUSE_FILE=$dir/pause ln_start_iscd
ln_within 30 api_answers
first=$(submit "$dir/first.isc")
check "first: held with the gang up, before its containers start" \
	ln_within 60 grep -q "pause point provision.cluster_booting" "$dir/iscd.log"
first_ids=$(for r in 0 1 2 3; do ln_rank_instance "$first" "$r"; done | tr '\n' ' ')
first_lost=$(ln_rank_instance "$first" 1)
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$first_lost\",\"notice_s\":0}"
check "first: the watch has seen the node go" ln_within 30 node_gone "$first_lost"
rm -f "$dir/pause"
check "first: completes" wait_status "$first" completed 150
check "first: 3 kept, 1 launched, every rank in cycle 1 with the gang as it booted" \
	first_verify "$first" "$(kept_of "$first_ids" "$first_lost")" "$first_lost"
check "first: isc status says the gang lost a node before its ranks ran" \
	ln_status_says "$first" "before its ranks ran"
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
ln_start_iscd
ln_within 30 api_answers

# ---- 9. a crash at each new step resumes to the same outcome, with no second launch ----
# Six bursts run cycle 1 side by side; then, point by point, iscd is armed for the point,
# one burst loses a node, iscd aborts there and is started again. The next point is armed
# only once that burst has completed (past every point), so each point is reached by its own.
points=(lostnodes.replacement_recorded lostnodes.before_launch lostnodes.replacement_launched
	lostnodes.containers_stopped lostnodes.kept_moved lostnodes.kept_started
	lostnodes.restore_started)
declare -A crash_exp=() crash_ids=() crash_lost=()
for p in "${points[@]}"; do crash_exp[$p]=$(submit "$dir/four.isc"); done
for p in "${points[@]}"; do
	x=${crash_exp[$p]}
	check "$p: runs cycle 1" ln_wait_cycle "$x" 1 120
	check "$p: every rank of cycle 1 started" ln_within 30 ln_cycle1_running "$x"
	check "$p: the checkpoint came home" ln_within 15 test -s "$ISC_HOME/experiments/$x/checkpoints/step"
	crash_ids[$p]=$(for r in 0 1 2 3; do ln_rank_instance "$x" "$r"; done | tr '\n' ' ')
	crash_lost[$p]=$(ln_rank_instance "$x" 1)
done
for p in "${points[@]}"; do
	x=${crash_exp[$p]}
	kill -TERM "$(cat "$dir/iscd.pid")"
	wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	ISC_CRASH_AT=$p ln_start_iscd
	fault "{\"kind\":\"interrupt\",\"instance_id\":\"${crash_lost[$p]}\",\"notice_s\":30}"
	pid=$(cat "$dir/iscd.pid")
	for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	wait "$pid" 2>/dev/null
	rc=$?
	check "$p: iscd aborted there" test "$rc" = 134
	check "$p: the log names the point" grep -q "crash point $p reached" "$dir/iscd.log"
	ln_start_iscd
	# Completed before iscd restarts again: a restart re-follows a running cluster's
	# output from its start (each line again in rank_N.txt).
	check "$p: runs cycle 2 after the restart and completes" wait_status "$x" completed 150
done
for p in "${points[@]}"; do
	x=${crash_exp[$p]}
	check "$p: 3 kept, exactly 1 launched, cycle 2 right" \
		ln_verify "$x" "$(kept_of "${crash_ids[$p]}" "${crash_lost[$p]}")" "${crash_lost[$p]}" 1 0
done
check "nothing left after the crashes" wait_no_live
check "no iscd died on its own" bash -c "! grep -q 'AddressSanitizer\|runtime error' '$dir/iscd.log'"
[ -s "$dir/verify.log" ] && cat "$dir/verify.log" >&2
finish lost-nodes
