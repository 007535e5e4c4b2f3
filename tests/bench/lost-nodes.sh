#!/usr/bin/env bash
# Lost-node recovery (issue 32): a 16-node spot burst on the sandbox loses one node to an
# interruption notice. Measured twice on the same sandbox with the same node boot delay:
# replacing the one node (the default) and replacing the whole gang (replace_deadline_ms =
# 0, today's failover before issue 32). Figures:
#  - notice -> all 16 ranks running again in the next cycle (isc status: running, cycle 2);
#  - the cloud time bought for the recovery: node-seconds of the instances launched for it,
#    each from its launch (the mock cloud's record) to when all ranks run again; and, for
#    the whole picture, the node-seconds of every instance of the experiment in that window.
# R = replace-one / whole-gang; goal R <= 0.6 for both.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${ISC_BIN:=$repo/bin}"
B=${BENCH_BOOT_DELAY_MS:-1000}
N=${BENCH_LOST_NODES_N:-16}
TICK=200
dir=$(mktemp -d /tmp/isc-bench-lost.XXXXXX)
trap '"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1; [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"' EXIT
SANDBOX_TICK_MS=$TICK SANDBOX_BOOT_DELAY_MS=$B "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null
. "$dir/env"
. "$repo/tests/bench/lib/recovery.sh"
now_ms() { date +%s%3N; }
status_of() {
	"$ISC_BIN/isc" status "$1" --json | /usr/bin/python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["status"], e["cycle_count"])'
}
cat >"$dir/gang.isc" <<ISC
isc_project_id = "demo"
experiment_name = "lost-node-bench"
gpus = $N
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "rank \$RANK cycle \$STRONG_CYCLE_COUNT"; sleep 600'
ISC
cp "$ISC_HOME/config.toml" "$dir/config.base"
# wait_for SECONDS WHAT CMD...: until CMD succeeds; gives up (with iscd's log) after SECONDS.
wait_for() {
	local secs=$1 what=$2 t
	shift 2
	t=$(($(now_ms) + secs * 1000))
	until "$@"; do
		if [ "$(now_ms)" -gt "$t" ]; then
			echo "lost-node bench: $what not within $secs s" >&2
			tail -n 30 "$dir/iscd.log" >&2
			exit 1
		fi
		sleep 0.05
	done
}
is_status() { [ "$(status_of "$1" 2>/dev/null)" = "$2" ]; }

# one_run WHOLE: prints "ms bought_node_s window_node_s launched" for one recovery.
one_run() {
	local whole=$1 id victim t0 t1
	cp "$dir/config.base" "$ISC_HOME/config.toml"
	# A top-level key: before the first table.
	[ "$whole" = 1 ] && { echo "replace_deadline_ms = 0"; cat "$dir/config.base"; } >"$ISC_HOME/config.toml"
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	echo $! >"$dir/iscd.pid"
	wait_for 30 "iscd's socket" test -S "$ISC_HOME/run/api.sock"
	id=$("$ISC_BIN/isc" burst "$dir/gang.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	wait_for 300 "$N nodes running cycle 1" is_status "$id" "running 1"
	sleep 2 # every container started and a checkpoint sync done
	victim=$(recovery_victim "$id")
	t0=$(now_ms)
	curl -s -X POST "$MOCKCLOUD_URL/_mock/faults" -d "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":120}" >/dev/null
	wait_for 600 "all ranks running cycle 2" is_status "$id" "running 2"
	t1=$(now_ms)
	recovery_cost "$id" "$t0" "$t1"
	"$ISC_BIN/isc" cancel "$id" >/dev/null
	wait_for 120 "the cancel" is_status "$id" "cancelled 2"
	kill -TERM "$(cat "$dir/iscd.pid")"
	wait "$(cat "$dir/iscd.pid")" 2>/dev/null || true
	rm -f "$ISC_HOME/run/api.sock"
}
read -r one_ms one_bought one_window one_new <<<"$(one_run 0)"
read -r all_ms all_bought all_window all_new <<<"$(one_run 1)"
cp "$dir/config.base" "$ISC_HOME/config.toml"
[ -n "${one_ms:-}" ] && [ -n "${all_ms:-}" ] || { echo "lost-node bench: a run failed" >&2; exit 1; }
/usr/bin/python3 - "$N" "$B" "$TICK" "$one_ms" "$one_bought" "$one_window" "$one_new" \
	"$all_ms" "$all_bought" "$all_window" "$all_new" <<'PY'
import sys
n, b, tick = sys.argv[1:4]
one_ms, one_bought, one_window, one_new = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
all_ms, all_bought, all_window, all_new = int(sys.argv[8]), float(sys.argv[9]), float(sys.argv[10]), sys.argv[11]
r = one_ms / all_ms
rb = one_bought / all_bought if all_bought else float("nan")
rw = one_window / all_window if all_window else float("nan")
print("lost-node recovery 1 of %s: %.2f (notice -> all ranks running in the next cycle: replace one %d ms "
      "vs whole gang %d ms; node boot delay %s ms, tick %s ms; goal <= 0.6)" % (n, r, one_ms, all_ms, b, tick))
print("lost-node recovery 1 of %s, cloud time bought: %.2f (node-seconds of the instances launched for "
      "the recovery up to all ranks running: replace one %.1f (%s instance) vs whole gang %.1f (%s "
      "instances); goal <= 0.6)" % (n, rb, one_bought, one_new, all_bought, all_new))
print("lost-node recovery 1 of %s, every node of the experiment in that window: %.2f (%.1f vs %.1f "
      "node-seconds: the kept nodes idle through the recovery, the old gang's drained early)" % (n, rw, one_window, all_window))
PY
