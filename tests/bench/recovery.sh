#!/usr/bin/env bash
# Recovery figures on the mock cloud (issue: reprovisioning and crash safety):
#  - spot interruption notice -> replacement cluster running, against the provisioning
#    critical path (launch + boot delay + one SSH boot) plus one tick;
#  - kill -9 of iscd -> the restarted daemon has reconciled every account and region.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${ISC_BIN:=$repo/bin}"
B=${BENCH_BOOT_DELAY_MS:-1000}
TICK=200
dir=$(mktemp -d /tmp/isc-bench-recovery.XXXXXX)
trap '"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
SANDBOX_TICK_MS=$TICK SANDBOX_BOOT_DELAY_MS=$B "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null
. "$dir/env"
"$ISC_BIN/iscd" 2>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
now_ms() { date +%s%3N; }
status_of() {
	"$ISC_BIN/isc" status "$1" --json | /usr/bin/python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["status"], e["cycle_count"])'
}
id=$("$ISC_BIN/isc" burst "$repo/tests/integration/launch/long.isc" | grep -Eo 'exp_[0-9a-f]{16}')
until [ "$(status_of "$id")" = "running 1" ]; do sleep 0.1; done
victim=$(curl -s "$MOCKCLOUD_URL/_mock/instances" | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "running"]
print(rows[0]["id"])' "$id")
t0=$(now_ms)
curl -s -X POST "$MOCKCLOUD_URL/_mock/faults" -d "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":120}" >/dev/null
until [ "$(status_of "$id")" = "running 2" ]; do sleep 0.05; done
t1=$(now_ms)
echo "interruption notice -> replacement running: $((t1 - t0)) ms (includes stop with grace and artifacts home; node boot delay B = $B ms, tick $TICK ms)"
"$ISC_BIN/isc" cancel "$id" >/dev/null

# kill -9 with three running experiments, then restart.
ids=()
for _ in 1 2 3; do
	ids+=("$("$ISC_BIN/isc" burst "$repo/tests/integration/launch/long.isc" | grep -Eo 'exp_[0-9a-f]{16}')")
done
for i in "${ids[@]}"; do until [ "$(status_of "$i" | cut -d' ' -f1)" = running ]; do sleep 0.1; done; done
kill -KILL "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null || true
t0=$(now_ms)
"$ISC_BIN/iscd" 2>"$dir/iscd2.log" &
echo $! >"$dir/iscd.pid"
until grep -q "reconciled" "$dir/iscd2.log"; do sleep 0.02; done
t1=$(now_ms)
echo "kill -9 of iscd -> restarted daemon reconciled 3 running clusters: $((t1 - t0)) ms"
for i in "${ids[@]}"; do "$ISC_BIN/isc" cancel "$i" >/dev/null; done
