#!/usr/bin/env bash
# GET /metrics (issue 44, docs/metrics.md): iscd's exposition passes `promtool check
# metrics`; a real Prometheus server (Debian prometheus) scrapes the sandbox iscd's
# metrics_listen every second, and after a burst with a spot interruption its query API
# returns the burst, launch, interruption and recovery series; on the API's listeners only
# the operator gets /metrics (a member's, an admin's or a finance token 403); the example
# alert rules pass `promtool check rules`; a bad metrics_listen is refused naming the key.
. "$(dirname "$0")/lib.sh"
sandbox_dir metrics
launch=$repo/tests/integration/launch
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
py() { /usr/bin/python3 "$@"; }
# A top-level key goes above the first table (TOML puts a key after a table into it).
add_top() { sed -i "0,/^\[/s//$1\n&/" "$ISC_HOME/config.toml"; }

# 0. A metrics_listen that is no HOST:PORT is refused, naming the key and its line.
cp "$ISC_HOME/config.toml" "$dir/config.good"
add_top 'metrics_listen = "localhost:9464"'
out=$("$ISC_BIN/iscd" --once 2>&1)
check "a bad metrics_listen stops iscd" test $? -ne 0
check "the error names metrics_listen and its line" grep -Eq 'config.toml:[0-9]+:[0-9]+: metrics_listen: not an IPv4 address and a port' <<<"$out"
cp "$dir/config.good" "$ISC_HOME/config.toml"

add_top 'metrics_listen = "127.0.0.1:0"'
add_top 'api_listen = "127.0.0.1:0"'
start_iscd || exit 1
sock=$ISC_HOME/run/api.sock
for _ in $(seq 50); do [ -s "$sock.metrics" ] && [ -s "$sock.tcp" ] && break; sleep 0.1; done
murl=$(cat "$sock.metrics")
url=$(cat "$sock.tcp")
check "iscd wrote its metrics address" grep -Eq '^http://127\.0\.0\.1:[0-9]+/metrics$' <<<"$murl"

# 1. The exposition: promtool's checks (format and Prometheus' naming lint) pass.
curl -sf -D "$dir/m.head" "$murl" >"$dir/m0.txt"
check "metrics_listen answers GET /metrics" test -s "$dir/m0.txt"
check "in the text format, version 0.0.4" grep -qi '^content-type: text/plain; version=0.0.4' "$dir/m.head"
check "promtool check metrics passes (idle)" bash -c "promtool check metrics <'$dir/m0.txt'"
check "every burst state has its series from the first scrape" test "$(grep -c '^isc_bursts{state=' "$dir/m0.txt")" -ge 12
check "so has every configured provider's interruptions, at 0" bash -c "grep -q '^isc_interruptions_total{provider=\"aws\"} 0\$' '$dir/m0.txt' && grep -q '^isc_interruptions_total{provider=\"gcp\"} 0\$' '$dir/m0.txt'"
check "process_* metrics as Prometheus' client libraries name them" \
	bash -c "grep -q '^process_cpu_seconds_total ' '$dir/m0.txt' && grep -q '^process_resident_memory_bytes ' '$dir/m0.txt' && grep -q '^process_open_fds ' '$dir/m0.txt' && grep -q '^process_start_time_seconds ' '$dir/m0.txt'"
curl -sf -D "$dir/om.head" -H 'Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' "$murl" >"$dir/om.txt"
check "OpenMetrics to a scraper that asks for it" grep -qi '^content-type: application/openmetrics-text; version=1.0.0' "$dir/om.head"
check "its counter families named without _total, # EOF last" \
	bash -c "grep -q '^# TYPE isc_launches counter' '$dir/om.txt' && test \"\$(tail -n 1 '$dir/om.txt')\" = '# EOF'"
check "nothing but /metrics on metrics_listen" test "$(curl -s -o /dev/null -w '%{http_code}' "${murl%/metrics}/v1/whoami")" = 404
check "and nothing but GET there" test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d x "$murl")" = 405

# 2. A real Prometheus scrapes this replica every second.
pport=$(py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# prom_config: a scrape every second of the replica's metrics_listen (murl).
prom_config() {
	local target=${murl#http://}
	cat >"$dir/prom/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: iscd
    static_configs:
      - targets: ["${target%/metrics}"]
YML
}
mkdir -p "$dir/prom"
prom_config
setpriv --pdeathsig TERM /usr/bin/prometheus --config.file="$dir/prom/prometheus.yml" \
	--storage.tsdb.path="$dir/prom/data" --web.listen-address="127.0.0.1:$pport" \
	>"$dir/prom/log" 2>&1 &
prom_pid=$!
trap 'kill $prom_pid 2>/dev/null; wait $prom_pid 2>/dev/null; sandbox_cleanup' EXIT
prom="http://127.0.0.1:$pport"
# promq QUERY PY-EXPR: the query API's vector result (rows: [{metric, value}]) satisfies PY-EXPR.
promq() {
	curl -sf --get "$prom/api/v1/query" --data-urlencode "query=$1" | py -c '
import json, sys
d = json.load(sys.stdin)
rows = d["data"]["result"] if d.get("status") == "success" else []
vals = [float(r["value"][1]) for r in rows]
sys.exit(0 if eval(sys.argv[1]) else 1)' "$2"
}
check "Prometheus scrapes the replica (up == 1)" within 30 promq 'up{job="iscd"}' 'vals == [1.0]'

# 3. A burst with a spot interruption, recovered by replacing the lost node; then one
# refused capacity on its first shape; then one recovered by its whole gang.
id=$(submit "$launch/long.isc")
check "the burst runs" wait_status "$id" running 60
check "Prometheus sees one running burst" within 15 promq 'isc_bursts{state="running"}' 'vals == [1.0]'
check "and its launch on aws us-east-1" within 10 promq 'isc_launches_total{provider="aws",region="us-east-1"}' 'vals and vals[0] >= 1'
check "and its submit-to-running time" within 10 promq 'isc_submit_to_running_seconds_count{provider="aws"}' 'vals == [1.0]'
check "and its provisioning time" within 10 promq 'isc_provisioning_seconds_count{provider="aws"}' 'vals and vals[0] >= 1'
check "and its live instances" within 10 promq 'isc_instances_live{provider="aws"}' 'vals == [2.0]'
check "this replica holds the burst's lease" within 10 promq 'isc_leases_held' 'vals == [1.0]'
sleep 2 # a checkpoint to resume from
interrupt_resumes "$id" interrupt 2 60 oldest
check "Prometheus sees the interruption" within 15 promq 'isc_interruptions_total{provider="aws"}' 'vals and vals[0] >= 1'
check "and the recovery by replacing the lost node" within 15 promq 'isc_recoveries_total{path="replace"}' 'vals == [1.0]'
check "and its duration" within 15 promq 'isc_recovery_seconds_count{path="replace"}' 'vals == [1.0]'
check "and the replacement's launch" within 10 promq 'isc_launches_total{provider="aws",region="us-east-1"}' 'vals and vals[0] >= 2'
check "spend per provider in micro-dollars grows" within 30 promq 'isc_spend_microdollars_total{provider="aws"}' 'vals and vals[0] > 0'
check "the tick's duration and lateness are scraped" promq 'isc_tick_duration_seconds_count' 'vals and vals[0] > 10'
check "describes are timed per provider" promq 'isc_describe_duration_seconds_count{provider="aws"}' 'vals and vals[0] > 0'
check "API requests by route pattern, never the raw path" \
	promq 'isc_api_request_duration_seconds_count{route="/v1/experiments/{}"}' 'vals and sum(vals) > 0'
check "no series names an experiment id" bash -c "! curl -s --get '$prom/api/v1/series' --data-urlencode 'match[]={job=\"iscd\"}' | grep -q '$id'"
check "store transactions are timed" promq 'isc_store_transaction_duration_seconds_count{outcome="commit"}' 'vals and vals[0] > 0'
isc cancel "$id" >/dev/null
check "the burst cancels" wait_status "$id" cancelled 30
check "Prometheus sees it cancelled, none running" within 15 promq 'isc_bursts{state="cancelled"} == 1 and on() isc_bursts{state="running"} == 0' 'vals == [1.0]'
check "and the lease given up" within 15 promq 'isc_leases_held' 'vals == [0.0]'
# A capacity refusal on the first shape: the burst fails over to the second.
fault '{"kind":"capacity","instance_type":"g4dn.xlarge","count":10}'
id2=$(submit "$launch/two-node.isc")
check "a burst refused capacity on its first shape completes on the second" wait_status "$id2" completed 60
mock faults -X DELETE >/dev/null
check "Prometheus sees the capacity refusal" within 15 promq 'isc_capacity_refusals_total{provider="aws",region="us-east-1"}' 'vals == [1.0]'
check "and the failover" within 15 promq 'isc_failovers_total{provider="aws"}' 'vals == [1.0]'
check "and the completed burst" within 15 promq 'isc_bursts{state="completed"}' 'vals == [1.0]'
# With the lost-nodes path off, an interruption is recovered by the whole gang. iscd
# restarts for it: its counters start again at 0.
stop_iscd
add_top 'replace_deadline_ms = 0'
start_iscd || exit 1
for _ in $(seq 50); do [ -s "$sock.metrics" ] && break; sleep 0.1; done
murl=$(cat "$sock.metrics")
check "the restarted iscd wrote its metrics address" grep -q '^http://127.0.0.1:' "$sock.metrics"
url=$(cat "$sock.tcp")
prom_config
kill -HUP $prom_pid # Prometheus reads its configuration again
id3=$(submit "$launch/long.isc")
check "a burst runs under the restarted iscd" wait_status "$id3" running 60
sleep 2
interrupt_resumes "$id3" interrupt 2 60 oldest
check "Prometheus sees the recovery by the whole gang" within 20 promq 'isc_recoveries_total{path="gang"}' 'vals == [1.0]'
check "and its duration" within 15 promq 'isc_recovery_seconds_count{path="gang"}' 'vals == [1.0]'
# The restarted iscd's metrics address is new, so Prometheus keeps each process's counter
# as a series of its own: the sum of their highest values counts both interruptions.
# (increase() over them extrapolated each series' few samples and once summed to under
# 1.5 on a loaded machine.)
check "the interruptions over both processes: 2" within 15 promq 'sum(max_over_time(isc_interruptions_total{provider="aws"}[10m]))' 'vals and vals[0] >= 2'
isc cancel "$id3" >/dev/null
check "the gang-recovered burst cancels" wait_status "$id3" cancelled 30
curl -sf "$murl" >"$dir/m1.txt"
check "promtool check metrics passes (after the burst)" bash -c "promtool check metrics <'$dir/m1.txt'"
check "this process counted its own launches (2: the gang, its replacement)" test "$(sed -n 's/^isc_launches_total{provider="aws",region="us-east-1"} //p' "$dir/m1.txt")" -ge 2

# 4. On the API's listeners the metrics are the operator's only.
for who in mem adm fin; do isc user add $who >/dev/null 2>&1; done
isc org add acme >/dev/null
isc member add --org acme mem --role member >/dev/null
isc member add --org acme adm --role admin >/dev/null
isc member add --org acme fin --role finance >/dev/null
n=1
for who in mem adm fin; do
	secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	# Stored as iscd stores a token (these users are no OS users here); again while the
	# ticking iscd holds SQLite's write lock (the sqlite3 shell does not wait for it).
	within 10 store_sql "INSERT INTO api_tokens (id, user_id, hash, created_at_ms)
		SELECT 'tok_00000000000000a$n', id, '$(printf '%s' "$secret" | sha256sum | cut -d' ' -f1)', 0 FROM users WHERE name = '$who'" >/dev/null 2>&1
	eval "tok_$who=tok_00000000000000a$n.$secret"
	n=$((n + 1))
done
code() { curl -s -o "$dir/body" -w '%{http_code}' ${1:+-H "Authorization: Bearer $1"} "$url/metrics"; }
check "a member's token works elsewhere" test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok_mem" "$url/v1/whoami")" = 200
check "a member's token gets 403 at /metrics" test "$(code "$tok_mem")" = 403
check "an admin's token gets 403 at /metrics" test "$(code "$tok_adm")" = 403
check "a finance token gets 403 at /metrics" test "$(code "$tok_fin")" = 403
check "no token gets 401 at /metrics" test "$(code "")" = 401
otok=$(isc token create --expires 1h 2>/dev/null)
check "the operator's token gets 200 at /metrics" test "$(code "$otok")" = 200
check "with the exposition" grep -q '^# TYPE isc_bursts gauge' "$dir/body"
check "the operator on the socket gets 200" test "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" http://x/metrics)" = 200
check "the 403s are counted by route and code" bash -c "curl -s '$murl' | grep -q '^isc_api_request_duration_seconds_count{method=\"GET\",route=\"/metrics\",code=\"403\"} 3'"

# 5. The example alert rules of docs/metrics.md.
check "promtool check rules passes on docs/metrics-rules.yml" promtool check rules "$repo/docs/metrics-rules.yml"

stop_iscd
check "no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish metrics
