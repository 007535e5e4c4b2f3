#!/usr/bin/env bash
# A scrape's time with a store of BENCH_METRICS_BURSTS (1000) running 2-node bursts and
# ten times as many ended ones, their clusters and nodes (docs/metrics.md, "Cost"): iscd
# --api-only (no tick touches the rows) on metrics_listen; 10 scrapes that read the store
# (1.1 s apart: the counts are cached for a second) and 10 that do not, median of each.
# The store: SQLite in a new home, or the PostgreSQL database ISC_STORE_URL names (empty).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${ISC_BIN:=$repo/build/release/bin}"
N=${BENCH_METRICS_BURSTS:-1000}
dir=$(mktemp -d /tmp/isc-metrics-bench.XXXXXX)
home=$dir/home
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
"$ISC_BIN/isc" --home "$home" init >/dev/null || exit 1
top() { sed -i "1i $1" "$home/config.toml"; }
top 'metrics_listen = "127.0.0.1:0"'
[ -z "${ISC_STORE_URL:-}" ] || top "store_url = \"$ISC_STORE_URL\""
sql() {
	if [ -n "${ISC_STORE_URL:-}" ]; then psql "$ISC_STORE_URL" -qAtX -v ON_ERROR_STOP=1 -c "$1"
	else sqlite3 -bail "$home/isc.db" "$1"; fi
}
# The schema: iscd's first start makes it.
"$ISC_BIN/iscd" --home "$home" --once 2>/dev/null
seq_cte="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $((N * 11)))"
sql "INSERT INTO orgs (id, name, created_at_ms) VALUES (1, 'bench', 0);
INSERT INTO projects (id, org_id, name, created_at_ms) VALUES ('prj_bench', 1, 'bench', 0);
$seq_cte INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, spec_json, status, created_at_ms, updated_at_ms)
  SELECT 'exp_' || i, 'prj_bench', 1, 'b' || i, 'burst', 2, '{}', CASE WHEN i <= $N THEN 'running' ELSE 'completed' END, i, i FROM n;
$seq_cte INSERT INTO clusters (id, experiment_id, shape_id, provider, account, region, nnodes, nproc, cycle, price_micros, state, created_at_ms, closed_at_ms)
  SELECT 'cl_' || i, 'exp_' || i, 'aws-us-east-1-g5.xlarge-ondemand', 'aws', 'default', 'us-east-1', 2, 1, 1, 1000000, CASE WHEN i <= $N THEN 'running' ELSE 'closed' END, i, CASE WHEN i <= $N THEN NULL ELSE i END FROM n;
$seq_cte INSERT INTO nodes (cluster_id, rank, instance_id, state, price_micros, launched_at_ms, terminated_at_ms)
  SELECT 'cl_' || i, r.k, 'i-' || i || '-' || r.k, CASE WHEN i <= $N THEN 'running' ELSE 'terminated' END, 1000000, i, CASE WHEN i <= $N THEN NULL ELSE i END
  FROM n CROSS JOIN (SELECT 0 AS k UNION ALL SELECT 1) r;" || exit 1
"$ISC_BIN/iscd" --home "$home" --api-only 2>"$dir/iscd.log" &
pid=$!
for _ in $(seq 100); do [ -s "$home/run/api.sock.metrics" ] && break; sleep 0.1; done
url=$(cat "$home/run/api.sock.metrics")
curl -sf "$url" >"$dir/m.txt" || { cat "$dir/iscd.log"; exit 1; }
grep -q "^isc_bursts{state=\"running\"} $N\$" "$dir/m.txt" || { echo "no $N running bursts in the scrape" >&2; exit 1; }
grep -q "^isc_instances_live{provider=\"aws\"} $((2 * N))\$" "$dir/m.txt" || { echo "no $((2 * N)) live instances" >&2; exit 1; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
cold=$(for _ in $(seq 10); do sleep 1.1; curl -s -o /dev/null -w '%{time_total}\n' "$url"; done | median)
warm=$(for _ in $(seq 10); do curl -s -o /dev/null -w '%{time_total}\n' "$url"; done | median)
echo "metrics scrape, $N running + $((10 * N)) ended bursts ($([ -n "${ISC_STORE_URL:-}" ] && echo PostgreSQL || echo SQLite)), $(wc -c <"$dir/m.txt") bytes: reading the store $(awk "BEGIN {printf \"%.1f\", $cold * 1000}") ms, cached $(awk "BEGIN {printf \"%.1f\", $warm * 1000}") ms (medians of 10)"
