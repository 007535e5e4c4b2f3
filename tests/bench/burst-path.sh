#!/usr/bin/env bash
# From `isc burst` to all containers running, for a 6-node cluster on the mock cloud with
# an injected per-call latency L and node boot delay B, against the critical path:
# one launch call (L) + B + one SSH boot (measured here on a 1-node burst of the same shape,
# minus its own L and B). Prints each figure and the ratio (goal <= 1.2x).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${ISC_BIN:=$repo/bin}"
L=${BENCH_LATENCY_MS:-100}
B=${BENCH_BOOT_DELAY_MS:-2000}
dir=$(mktemp -d /tmp/isc-bench-burst.XXXXXX)
trap '"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
SANDBOX_TICK_MS=100 SANDBOX_BOOT_DELAY_MS=$B "$repo/tests/mocks/sandbox" start "$dir" >/dev/null
. "$dir/env"
curl -s -X POST "$MOCKCLOUD_URL/_mock/faults" -d "{\"kind\":\"latency\",\"ms\":$L}" >/dev/null
"$ISC_BIN/iscd" 2>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"

# ms from the experiment's creation to its "running" event.
to_running() {
	local file=$1 id
	id=$("$ISC_BIN/isc" burst "$file" | grep -Eo 'exp_[0-9a-f]{16}')
	for _ in $(seq 1 600); do
		"$ISC_BIN/isc" status "$id" --json | /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)
ev = {x["kind"]: x["at_ms"] for x in e["events"]}
if "running" in ev:
    print(ev["running"] - ev["enqueued"]); sys.exit(0)
sys.exit(1)' && { "$ISC_BIN/isc" cancel "$id" >/dev/null; return 0; }
		sleep 0.1
	done
	return 1
}
mk() {
	cat >"$dir/$1.isc" <<ISC
isc_project_id = "demo"
experiment_name = "bench-$1"
gpus = $2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-ondemand"]
command = "sleep 60"
ISC
}
mk one 1
mk six 6
one=$(to_running "$dir/one.isc")
six=$(to_running "$dir/six.isc")
ssh_boot=$((one - L - B))
[ "$ssh_boot" -lt 0 ] && ssh_boot=0
critical=$((L + B + ssh_boot))
echo "latency L = $L ms per cloud call, node boot delay B = $B ms, iscd tick 100 ms"
echo "1-node burst to running: $one ms (one SSH boot ~ $ssh_boot ms beyond L + B)"
echo "6-node burst to running: $six ms"
echo "critical path (L + B + one SSH boot): $critical ms"
/usr/bin/python3 -c "print('burst ratio 6-node / critical path: %.2fx (goal <= 1.2x)' % ($six / $critical))"
