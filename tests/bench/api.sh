#!/usr/bin/env bash
# The API under load (docs/benchmarks.md): a store of 10,000 experiments in 50
# organisations (200 each, written straight into the store as a fixture), iscd
# serving it with its normal tick, and wrk driving 200 concurrent connections
# over TCP with an org admin's bearer token: first the experiment listing
# (its first page, then that org's 200 experiments in one page, then pages
# starting at random experiments: cursors no cache has seen), then the status
# of random experiments of it.
# Printed: requests/s, p50/p99 latency (goal p99 < 50 ms), and iscd's own tick
# lateness over the run (goal: never late by more than one tick).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${ISC_BIN:=$repo/bin}"
: "${BENCH_API_SECONDS:=10}"
: "${BENCH_API_CONNECTIONS:=200}"
: "${BENCH_API_THREADS:=}" # empty: iscd's default, one server thread per online CPU (at least 2)
TICK=500
command -v wrk >/dev/null || { echo "api bench: wrk is not installed (make test-deps)"; exit 1; }
dir=$(mktemp -d /tmp/isc-bench-api.XXXXXX)
home=$dir/home
trap '[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
"$ISC_BIN/isc" --home "$home" init >/dev/null
# wrk's connections all come from 127.0.0.1: above the per-address limit (32).
cat >>"$home/config.toml" <<CONF
api_listen = "127.0.0.1:0"
api_max_connections_per_ip = 512
tick_interval_ms = $TICK
CONF
[ -z "$BENCH_API_THREADS" ] || echo "api_threads = $BENCH_API_THREADS" >>"$home/config.toml"
cores=$(nproc)
default_threads=$((cores < 2 ? 2 : cores))
threads=${BENCH_API_THREADS:-$default_threads}
if [ -n "$BENCH_API_THREADS" ]; then
	echo "iscd: api_threads = $threads (BENCH_API_THREADS) on $cores cores"
else
	echo "iscd: api_threads = $threads (the default: one per online CPU, at least 2) on $cores cores"
fi

# The fixture: 50 orgs, a project each, an admin each, 10,000 experiments with an event each,
# and a token for org 7's admin (its SHA-256 stored as iscd would; the secret kept here).
"$ISC_BIN/iscd" --home "$home" --once 2>/dev/null # migrates the store
secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
hash=$(printf '%s' "$secret" | sha256sum | cut -d' ' -f1)
sqlite3 "$home/isc.db" <<SQL
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
INSERT INTO orgs (id, name, created_at_ms) SELECT i, 'org' || i, 0 FROM n;
INSERT INTO projects (id, org_id, name, created_at_ms) SELECT printf('prj_%016x', id), id, 'vision', 0 FROM orgs;
INSERT INTO users (id, name, created_at_ms) SELECT id, 'admin' || id, 0 FROM orgs;
INSERT INTO memberships (user_id, org_id, role, created_at_ms) SELECT id, id, 'admin', 0 FROM orgs;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, spec_json, status,
  created_at_ms, updated_at_ms, status_reason, nnodes, nproc, shape_id, cycle_count, output_path, owner)
SELECT printf('exp_%016x', i), printf('prj_%016x', i % 50 + 1), i % 50 + 1, 'run-' || i, 'burst', 8,
  '{}', 'completed', 1700000000000 + i, 1700000000000 + i, '', 1, 8,
  'aws-us-east-1-p3.16xlarge-spot', 1, '$home/experiments/' || printf('exp_%016x', i), 'admin' || (i % 50 + 1)
FROM n;
INSERT INTO events (experiment_id, at_ms, kind, message) SELECT id, created_at_ms, 'completed', 'fixture' FROM experiments;
INSERT INTO api_tokens (id, user_id, hash, created_at_ms) VALUES ('tok_00000000000000b7', 7, '$hash', 0);
COMMIT;
SQL
token="tok_00000000000000b7.$secret"

"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd.log" &
pid=$!
for _ in $(seq 100); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
url=$(cat "$home/run/api.sock.tcp")
n=$(curl -s -H "Authorization: Bearer $token" "$url/v1/experiments?limit=1000" |
	/usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
echo "store: 10,000 experiments in 50 organisations; org7's admin lists $n"
[ "$n" = 200 ] || { echo "api bench: the listing is not org7's 200 experiments" >&2; exit 1; }
ids=$(curl -s -H "Authorization: Bearer $token" "$url/v1/experiments?limit=1000" | /usr/bin/python3 -c '
import json, sys
print(",".join("\"%s\"" % e["id"] for e in json.load(sys.stdin)))')
# Every experiment's cursor (its page's "after"), for pages that start anywhere: a listing
# cache keeps a thread's last few replies, so these are mostly answered from the store.
cursors=$(curl -s -H "Authorization: Bearer $token" "$url/v1/experiments?limit=1000" | /usr/bin/python3 -c '
import json, sys
print(",".join("\"%d.%s\"" % (e["created_at_ms"], e["id"]) for e in json.load(sys.stdin)))')
cat >"$dir/pages.lua" <<LUA
local cursors = { $cursors }
request = function()
  return wrk.format("GET", "/v1/experiments?after=" .. cursors[math.random(#cursors)])
end
LUA
cat >"$dir/status.lua" <<LUA
local ids = { $ids }
request = function()
  return wrk.format("GET", "/v1/experiments/" .. ids[math.random(#ids)])
end
LUA

# run NAME LABEL ARGS...: one wrk run; prints requests/s and latency percentiles.
run() {
	local name=$1 label=$2
	shift 2
	wrk -t2 -c"$BENCH_API_CONNECTIONS" -d"${BENCH_API_SECONDS}s" --latency --timeout 10s \
		-H "Authorization: Bearer $token" "$@" >"$dir/$name.wrk" 2>&1
	local rps p50 p99 non2xx per
	rps=$(awk '/^Requests\/sec/ {print $2}' "$dir/$name.wrk")
	p50=$(awk '$1 == "50%" {print $2}' "$dir/$name.wrk")
	p99=$(awk '$1 == "99%" {print $2}' "$dir/$name.wrk")
	non2xx=$(awk '/Non-2xx/ {print $5}' "$dir/$name.wrk")
	# Bytes per reply from wrk's totals ("N requests in Ts, X.YMB read"): the replies were whole.
	per=$(awk '/requests in/ {n = $1; v = $5; u = substr(v, length(v) - 1); v = v + 0;
		m = u == "GB" ? 2^30 : u == "MB" ? 2^20 : u == "KB" ? 2^10 : 1; printf "%.1f", v * m / n / 1024}' "$dir/$name.wrk")
	echo "$label: ${BENCH_API_CONNECTIONS} connections, ${BENCH_API_SECONDS} s: ${rps} req/s, p50 ${p50}, p99 ${p99} (goal < 50 ms), ${per} KiB a reply${non2xx:+, non-2xx: $non2xx}"
}
# The listing as clients read it (its first page, 100 rows, X-Isc-Next to the rest), then the
# whole org's 200 rows in one page: the reply the listing was before it had pages.
run listing "listing (GET /v1/experiments, first page: 100 rows)" "$url/v1/experiments"
run listing200 "listing (GET /v1/experiments?limit=200, all 200 rows)" "$url/v1/experiments?limit=200"
run pages "listing (GET /v1/experiments?after=CURSOR, a random page: up to 100 rows)" -s "$dir/pages.lua" "$url"
run status "status (GET /v1/experiments/ID, random of 200)" -s "$dir/status.lua" "$url"
kill -TERM "$pid"
wait "$pid" || true
pid=
grep -o 'tick stats: .*' "$dir/iscd.log" | sed 's/^/iscd under that load: /'

# The random pages again with the other thread count: one per core when the run above had
# another, else the old default of 8 (docs/benchmarks.md: with every core busy, p99 is mostly
# how long a thread waits for a core, and fewer threads wait less).
other=$default_threads
[ "$threads" = "$default_threads" ] && other=8
if [ "$other" != "$threads" ]; then
	sed -i '/^api_threads = /d' "$home/config.toml"
	echo "api_threads = $other" >>"$home/config.toml"
	: >"$home/run/api.sock.tcp"
	"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd.log" &
	pid=$!
	for _ in $(seq 100); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
	run pages-other "listing (?after=CURSOR, a random page), api_threads = $other" \
		-s "$dir/pages.lua" "$(cat "$home/run/api.sock.tcp")"
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
fi
