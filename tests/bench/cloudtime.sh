#!/usr/bin/env bash
# Lost-node recovery on the clouds' time (issue 46): the sandbox with the mock's timing model
# (docs/mock-cloud.md, "Timing model": GPU launch-to-SSH lognormal, median 90 s, sigma 0.35;
# a 10 GB image pulled at 27.5 s/GB on a fresh node, nothing on a kept one; AWS's 2-minute
# notice; the RunInstances bucket), a fixed seed, time_scale BENCH_TIME_SCALE (1: real
# seconds, about half an hour; 0.1 in about 6 minutes). A 16-node spot gang on g4dn.xlarge:
#  1. loses one node (rank N/2) to a notice: replaced alone (the default), then the same with
#     the whole gang replaced (replace_deadline_ms = 0). R = notice -> all ranks running again,
#     one vs whole; the cloud time bought for the recovery, one vs whole;
#  2. loses 4 nodes of its zone and type within 2 minutes (correlated_interrupt, window 120 s):
#     the launches it took (RunInstances calls and instances), and notice -> all running.
# Every duration printed is in model seconds (real / time_scale) next to the real ms.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${ISC_BIN:=$repo/bin}"
SCALE=${BENCH_TIME_SCALE:-1}
SEED=${BENCH_TIME_SEED:-4646}
N=${BENCH_LOST_NODES_N:-16}
TICK=200
dir=$(mktemp -d /tmp/isc-bench-cloudtime.XXXXXX)
trap '"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1; [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"' EXIT
echo "cloud time bench: timing model on, seed $SEED, time_scale $SCALE, $N x g4dn.xlarge spot (GPU family)"
MOCKCLOUD_TIME_MODEL=on MOCKCLOUD_TIME_SCALE=$SCALE MOCKCLOUD_TIME_SEED=$SEED \
	SANDBOX_TICK_MS=$TICK "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null
. "$dir/env"
. "$repo/tests/bench/lib/recovery.sh"
now_ms() { date +%s%3N; }
# model seconds -> real ms, and a real wait in whole seconds with room for the broker's own time
ms_of() { /usr/bin/python3 -c "print(int($1 * $SCALE * 1000))"; }
secs_of() { /usr/bin/python3 -c "print(int($1 * $SCALE) + 120)"; }
status_of() {
	"$ISC_BIN/isc" status "$1" --json | /usr/bin/python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["status"], e["cycle_count"])'
}
cat >"$dir/gang.isc" <<ISC
isc_project_id = "demo"
experiment_name = "cloudtime-bench"
gpus = $N
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "rank \$RANK cycle \$STRONG_CYCLE_COUNT"; sleep 100000'
ISC
# The boot deadlines fit the model: a GPU boot's 99th percentile is about 200 s; the
# replacement's nodes up within the same (model seconds, scaled).
deadline=$(ms_of 600)
sed -e "s/^boot_deadline_ms = .*/boot_deadline_ms = $deadline/" "$ISC_HOME/config.toml" >"$dir/config.base"
wait_for() {
	local secs=$1 what=$2 t
	shift 2
	t=$(($(now_ms) + secs * 1000))
	until "$@"; do
		if [ "$(now_ms)" -gt "$t" ]; then
			echo "cloud time bench: $what not within $secs s" >&2
			tail -n 30 "$dir/iscd.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}
is_status() { [ "$(status_of "$1" 2>/dev/null)" = "$2" ]; }
past() { [ "$(now_ms)" -gt "$1" ]; }
# all N of the experiment's live instances running, none pending, status running
all_running() {
	[ "$(status_of "$1" 2>/dev/null | cut -d' ' -f1)" = running ] || return 1
	curl -s "$MOCKCLOUD_URL/_mock/instances" | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1]]
live = [r for r in rows if r["state"] in ("pending", "running")]
sys.exit(0 if len(live) == int(sys.argv[2]) and all(r["state"] == "running" for r in live) else 1)' "$1" "$N"
}
run_instances_calls() {
	curl -s "$MOCKCLOUD_URL/_mock/calls" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["by_action"].get("RunInstances", 0))'
}
start_iscd() {
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	echo $! >"$dir/iscd.pid"
	wait_for 30 "iscd's socket" test -S "$ISC_HOME/run/api.sock"
}
stop_iscd() {
	kill -TERM "$(cat "$dir/iscd.pid")"
	wait "$(cat "$dir/iscd.pid")" 2>/dev/null || true
	rm -f "$ISC_HOME/run/api.sock"
}
# A gang running cycle 1 with every rank's container up (the pulls done): prints its id.
gang_up() {
	local id
	id=$("$ISC_BIN/isc" burst "$dir/gang.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	wait_for "$(secs_of 900)" "$N nodes running cycle 1" is_status "$id" "running 1"
	sleep 2
	echo "$id"
}
spread() { # the boot draws of the experiment's first gang, model seconds
	curl -s "$MOCKCLOUD_URL/_mock/instances" | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["boot_ms"]]
d = sorted(r["boot_ms"] / 1000.0 / float(sys.argv[2]) for r in rows[:int(sys.argv[3])])
print("boot draws of the first gang (model s): min %.0f, median %.0f, max %.0f: %s" % (
    d[0], d[len(d) // 2], d[-1], " ".join("%.0f" % x for x in d)))' "$1" "$SCALE" "$N"
}

# one_run WHOLE: prints "ms bought_node_s window_node_s launched" for one recovery.
one_run() {
	local whole=$1 id victim t0 t1
	if [ "$whole" = 1 ]; then
		{ echo "replace_deadline_ms = 0"; cat "$dir/config.base"; } >"$ISC_HOME/config.toml"
	else
		{ echo "replace_deadline_ms = $deadline"; cat "$dir/config.base"; } >"$ISC_HOME/config.toml"
	fi
	start_iscd
	id=$(gang_up)
	[ "$whole" = 1 ] || spread "$id" >&2
	victim=$(recovery_victim "$id")
	t0=$(now_ms)
	curl -s -X POST "$MOCKCLOUD_URL/_mock/faults" -d "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\"}" >/dev/null
	wait_for "$(secs_of 1500)" "all ranks running cycle 2" is_status "$id" "running 2"
	t1=$(now_ms)
	recovery_cost "$id" "$t0" "$t1"
	"$ISC_BIN/isc" cancel "$id" >/dev/null
	wait_for 300 "the cancel" is_status "$id" "cancelled 2"
	stop_iscd
}

# correlated: 4 of N within 120 model seconds; prints "ms launches instances plan"
correlated() {
	local id t0 t1 calls0 calls1 plan last
	{ echo "replace_deadline_ms = $deadline"; cat "$dir/config.base"; } >"$ISC_HOME/config.toml"
	start_iscd
	id=$(gang_up)
	calls0=$(run_instances_calls)
	t0=$(now_ms)
	plan=$(curl -s -X POST "$MOCKCLOUD_URL/_mock/faults" -d '{"kind":"correlated_interrupt","provider":"aws","zone":"us-east-1a","instance_type":"g4dn.xlarge","count":4,"window_s":120}')
	last=$(echo "$plan" | /usr/bin/python3 -c 'import json,sys; p=json.load(sys.stdin); print(int(1000 * (max(x["offset_s"] for x in p["plan"]) + p["notice_s"])))')
	# every notice has run out and all N run again
	wait_for "$(secs_of 1800)" "the last notice" past "$((t0 + last))"
	wait_for "$(secs_of 1800)" "all $N running after the correlated loss" all_running "$id"
	t1=$(now_ms)
	calls1=$(run_instances_calls)
	n_new=$(curl -s "$MOCKCLOUD_URL/_mock/instances" | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["launched_at"] >= int(sys.argv[2])]
print(len(rows))' "$id" "$t0")
	offs=$(echo "$plan" | /usr/bin/python3 -c "import json,sys; p=json.load(sys.stdin); print(','.join('%.0f' % (x['offset_s'] / $SCALE) for x in p['plan']))")
	echo "$((t1 - t0)) $((calls1 - calls0)) $n_new $offs"
	"$ISC_BIN/isc" cancel "$id" >/dev/null
	wait_for 300 "the cancel" is_status "$id" "cancelled $(status_of "$id" | cut -d" " -f2)"
	stop_iscd
}

read -r one_ms one_bought one_window one_new <<<"$(one_run 0)"
echo "replace one: $one_ms ms, bought $one_bought node-s (real), $one_new instance(s)" >&2
read -r all_ms all_bought all_window all_new <<<"$(one_run 1)"
echo "whole gang: $all_ms ms, bought $all_bought node-s (real), $all_new instance(s)" >&2
read -r cor_ms cor_calls cor_new cor_offs <<<"$(correlated)"
[ -n "${one_ms:-}" ] && [ -n "${all_ms:-}" ] && [ -n "${cor_ms:-}" ] || { echo "cloud time bench: a run failed" >&2; exit 1; }
cp "$dir/config.base" "$ISC_HOME/config.toml"
/usr/bin/python3 - "$N" "$SCALE" "$SEED" "$one_ms" "$one_bought" "$one_window" "$one_new" \
	"$all_ms" "$all_bought" "$all_window" "$all_new" "$cor_ms" "$cor_calls" "$cor_new" "$cor_offs" <<'PY'
import sys
n, scale, seed = sys.argv[1], float(sys.argv[2]), sys.argv[3]
one_ms, one_bought, one_window, one_new = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
all_ms, all_bought, all_window, all_new = int(sys.argv[8]), float(sys.argv[9]), float(sys.argv[10]), sys.argv[11]
cor_ms, cor_calls, cor_new, cor_offs = int(sys.argv[12]), sys.argv[13], sys.argv[14], sys.argv[15]
m = lambda ms: ms / 1000.0 / scale
print("lost-node recovery 1 of %s: %.2f (notice -> all ranks running again: replace one %.0f s vs whole gang "
      "%.0f s, model seconds (real %d / %d ms at time_scale %g, seed %s); goal <= 0.5)"
      % (n, one_ms / all_ms, m(one_ms), m(all_ms), one_ms, all_ms, scale, seed))
print("lost-node recovery 1 of %s, cloud time bought: %.3f (node-seconds launched for the recovery up to all "
      "ranks running: %.0f (%s instance) vs %.0f (%s instances), model seconds; goal <= 0.1)"
      % (n, one_bought / all_bought, one_bought / scale, one_new, all_bought / scale, all_new))
print("lost-node recovery 1 of %s, every node of the experiment in that window: %.2f (%.0f vs %.0f node-seconds)"
      % (n, one_window / all_window, one_window / scale, all_window / scale))
print("correlated loss 4 of %s within 120 s (interruptions at +%s s, 2-min notices): %s RunInstances call(s), "
      "%s instance(s) launched; notice -> all %s running again %.0f s (model seconds)"
      % (n, cor_offs.replace(",", ", +"), cor_calls, cor_new, n, m(cor_ms)))
PY
