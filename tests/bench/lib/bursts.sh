# shellcheck shell=bash
# Shared by the burst benches (tests/bench/replicas.sh, tests/bench/scale.sh): iscd replicas
# on a sandbox, the store read directly, bursts submitted and timed, CPU read from /proc.
# Sourced, not run, first thing (it sets repo and the shared settings below). The caller
# sets N, CONFIGS and RUN_LIMIT_S, calls bench_top (top, pg, results) and defines run_config,
# which run_configs calls for each configuration with cfg set (its name, for messages);
# fresh_store sets sandbox (the configuration's folder), start_replicas the homes/pids
# arrays; optionally ISCD_PREFIX (an array: a command iscd runs under, e.g. (taskset -c 0))
# and BED_PREFIX (the same for wrk).

# The checkout (repo), found from this file; the settings both benches share: where isc
# and iscd are, the node boot delay, iscd's tick, how many `isc burst` at once, wrk's
# seconds and connections.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
: "${ISC_BIN:=$repo/bin}"
export ISC_BIN
B=${BENCH_BOOT_DELAY_MS:-1000}
TICK=${BENCH_TICK_MS:-500}
PAR=${BENCH_SUBMIT_PARALLEL:-8}
WRK_S=${BENCH_API_SECONDS:-10}
CONNS=200

[ -n "${ISCD_PREFIX+x}" ] || ISCD_PREFIX=()
[ -n "${BED_PREFIX+x}" ] || BED_PREFIX=()
now_ms() { date +%s%3N; }
say() { echo "$cfg: $*"; }
record() { echo "$cfg $1 $2" >>"$results"; }

# ---- replicas ----
pids=()
homes=()
# cpu_s PID: CPU seconds (user + system) the process has used, its reaped children included.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15 + $16 + $17) / hz}' "/proc/$1/stat" 2>/dev/null || echo "?"; }
started=()
# busy_cpu_s: CPU seconds the whole machine has been busy since boot (all but idle and iowait).
busy_cpu_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit}' /proc/stat; }
# iscd_cpu_s: CPU seconds of every running iscd of this configuration.
iscd_cpu_s() {
	local sum=0 p
	for p in "${pids[@]}"; do sum=$(awk -v a="$sum" -v b="$(cpu_s "$p")" 'BEGIN {printf "%.2f", a + (b == "?" ? 0 : b)}'); done
	echo "$sum"
}
# start_replica I: iscd on homes[I], its log in $sandbox/iscd.I.log; waits for its TCP port.
start_replica() {
	local i=$1 h=${homes[$1]}
	{ : >"$h/run/api.sock.tcp"; } 2>/dev/null
	"${ISCD_PREFIX[@]}" "$ISC_BIN/iscd" --home "$h" 2>>"$sandbox/iscd.$i.log" &
	pids[$i]=$!
	started[$i]=$(now_ms)
	for _ in $(seq 300); do
		[ -s "$h/run/api.sock.tcp" ] && return 0
		kill -0 "${pids[$i]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "replicas bench: iscd $i did not start; its log:" >&2
	tail -n 20 "$sandbox/iscd.$i.log" >&2
	return 1
}
# stop_replicas: SIGTERM to every iscd, each waited for (its tick stats are logged at stop),
# up to BENCH_STOP_LIMIT_S (default 120 s) in all; one still running then is said so and
# killed (with 175 running bursts on SQLite, iscd's followers took more than 4 minutes to
# close their SSH channels).
stop_replicas() {
	local p end=$(($(date +%s) + ${BENCH_STOP_LIMIT_S:-120})) t0
	t0=$(date +%s)
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 0.5; done
		if kill -0 "$p" 2>/dev/null; then
			echo "${cfg:-replicas bench}: iscd (pid $p) still running $(($(date +%s) - t0)) s after SIGTERM; killed" >&2
			kill -KILL "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null
	done
	pids=()
}

# ---- the store, read directly (cheaper than the API, and not measured) ----
q() {
	if [ -n "${ISC_STORE_URL:-}" ]; then
		psql "$ISC_STORE_URL" -qAtX -F ' ' -c "$1"
	else
		sqlite3 -cmd ".timeout 10000" -separator ' ' "${homes[0]}/isc.db" "$1"
	fi
}
# first_running NAME: each experiment named NAME's first "running" event: "ID AT_MS" lines.
first_running() {
	q "SELECT e.id, min(v.at_ms) FROM experiments e JOIN events v ON v.experiment_id = e.id
	   WHERE e.name = '$1' AND v.kind = 'running' GROUP BY e.id"
}
# statuses NAME: "STATUS COUNT" of the experiments named NAME.
statuses() { q "SELECT status, count(*) FROM experiments WHERE name = '$1' GROUP BY status ORDER BY status" | tr '\n' ',' | sed 's/,$//'; }
live_instances() {
	curl -s "$MOCKCLOUD_URL/_mock/instances" |
		/usr/bin/python3 -c 'import json, sys; print(sum(1 for r in json.load(sys.stdin) if r["state"] != "terminated"))'
}
# wait_no_live SECS: until the mock cloud has no live instance; 1 when some are left.
wait_no_live() {
	local end=$(($(now_ms) + $1 * 1000))
	while [ "$(live_instances)" != 0 ]; do
		[ "$(now_ms)" -gt "$end" ] && return 1
		sleep 1
	done
	return 0
}

# burst_file NAME: the 2-node burst named NAME, $sandbox/NAME.isc.
burst_file() {
	cat >"$sandbox/$1.isc" <<ISC
isc_project_id = "demo"
experiment_name = "$1"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-ondemand"]
command = "sleep 3600"
ISC
}
# submit NAME I: one `isc burst` of $sandbox/NAME.isc through replica I % replicas;
# prints the experiment's id.
submit() {
	ISC_HOME=${homes[$(($2 % ${#homes[@]}))]} "$ISC_BIN/isc" burst "$sandbox/$1.isc" | grep -Eo 'exp_[0-9a-f]{16}'
}

# one_alone: the critical path, one burst alone, submission -> its first running event (ms).
one_alone() {
	local id t0 at
	burst_file one
	t0=$(now_ms)
	id=$(submit one 0) || return 1
	for _ in $(seq 1200); do
		at=$(q "SELECT min(at_ms) FROM events WHERE experiment_id = '$id' AND kind = 'running'")
		[ -n "$at" ] && break
		sleep 0.05
	done
	ISC_HOME=${homes[0]} "$ISC_BIN/isc" cancel "$id" >/dev/null
	[ -n "$at" ] || { echo "replicas bench: burst $id never ran" >&2; return 1; }
	wait_no_live 120 || echo "replicas bench: burst $id left instances" >&2
	echo $((at - t0))
}

# critical_path: one burst alone after a warm-up, three times; the median in crit_ms, said
# and recorded as crit.
critical_path() {
	local runs=() c
	one_alone >/dev/null || return 1 # warm-up
	for _ in 1 2 3; do
		c=$(one_alone) || return 1
		runs+=("$c")
	done
	crit_ms=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p)
	say "critical path (one burst alone, submission -> running): ${runs[*]} ms, median $crit_ms ms"
	record crit "$crit_ms"
}

# api_wrk KEY PATH WHAT WHEN: wrk, $CONNS connections for $WRK_S s, on replica 1's TCP
# listener with the token $tok, GET PATH; records its p99 as KEY.
api_wrk() {
	local url rps p50 p99 non2xx
	url=$(cat "${homes[0]}/run/api.sock.tcp")
	"${BED_PREFIX[@]}" wrk -t2 -c"$CONNS" -d"${WRK_S}s" --latency --timeout 10s -H "Authorization: Bearer $tok" \
		"$url$2" >"$sandbox/$1.wrk" 2>&1
	rps=$(awk '/^Requests\/sec/ {print $2}' "$sandbox/$1.wrk")
	p50=$(awk '$1 == "50%" {print $2}' "$sandbox/$1.wrk")
	p99=$(awk '$1 == "99%" {print $2}' "$sandbox/$1.wrk")
	non2xx=$(awk '/Non-2xx/ {print $5}' "$sandbox/$1.wrk")
	say "API $3 on replica 1, $CONNS connections, $WRK_S s, $4: $rps req/s, p50 $p50, p99 $p99${non2xx:+, non-2xx: $non2xx}"
	record "$1" "$p99"
}

# api_status KEY WHEN: api_wrk on the status of the first bulk burst.
api_status() {
	api_wrk "$1" "/v1/experiments/$(head -n 1 "$sandbox/ids")" "status (GET /v1/experiments/ID)" "$2"
}

# api_token: a day's API token of replica 1's owner, in $tok.
api_token() {
	tok=$(curl -s --unix-socket "${homes[0]}/run/api.sock" -X POST -d '{"expires_in_s":86400}' http://localhost/v1/tokens |
		/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
}

# replica_homes NREP: homes[0] is the sandbox's ISC_HOME; homes 2.. (docs/ha.md, "A second
# host") join its store with its config and master key, a shared artifact_root and keys
# folder; every home gets a TCP API listener.
replica_homes() {
	local nrep=$1 i h
	homes=("$ISC_HOME")
	for ((i = 1; i < nrep; i++)); do
		h=$sandbox/home$((i + 1))
		"$ISC_BIN/isc" --home "$h" init >/dev/null || return 1
		cp "$ISC_HOME/config.toml" "$h/config.toml"
		# The keys' master key: every replica shares it with the store, and the clusters' SSH
		# keys are sealed under it from the first burst on (docs/ha.md, issue 45).
		export ISC_MASTER_KEY_FILE="$sandbox/master.key"
		homes+=("$h")
	done
	mkdir -p "$sandbox/shared/artifacts" "$sandbox/shared/keys"
	chmod 700 "$sandbox/shared/keys"
	for h in "${homes[@]}"; do
		# Top-level keys, before the first [table].
		{
			echo "api_listen = \"127.0.0.1:0\""
			[ "$nrep" -gt 1 ] && echo "artifact_root = \"$sandbox/shared/artifacts\""
			cat "$h/config.toml"
		} >"$h/config.toml.new" && mv "$h/config.toml.new" "$h/config.toml"
		if [ "$nrep" -gt 1 ]; then
			rm -rf "$h/keys"
			ln -s "$sandbox/shared/keys" "$h/keys"
		fi
	done
}

# tick_report NREP: after stop_replicas, each iscd's "tick stats" line (logged at its stop);
# records the worst lateness as "late" and the longest mean period (life / ticks) as
# "period". iscd counts a tick late from the end of the one before plus the interval, so a
# tick that itself runs long is not late by that count: the mean period shows those. The
# caller set life[I] (ms each iscd ran) before stopping them.
tick_report() {
	local nrep=$1 worst=-1 period=0 line m t p i phases
	for ((i = 0; i < nrep; i++)); do
		line=$(grep -o 'tick stats: .*' "$sandbox/iscd.$i.log" | tail -n 1)
		t=$(sed -n 's/^tick stats: \([0-9]*\) ticks.*/\1/p' <<<"$line")
		p=$([ -n "$t" ] && [ "$t" -gt 0 ] && echo $((life[i] / t)) || echo 0)
		say "iscd $((i + 1)): ${line:-no tick stats logged}; mean period $p ms over its $((life[i] / 1000)) s"
		phases=$(grep -o 'tick phases: .*' "$sandbox/iscd.$i.log" | tail -n 1)
		[ -n "$phases" ] && say "iscd $((i + 1)): $phases"
		m=$(sed -n 's/.*max \([0-9-]*\) ms.*/\1/p' <<<"$line")
		[ -n "$m" ] && [ "$m" -gt "$worst" ] && worst=$m
		[ "$p" -gt "$period" ] && period=$p
	done
	[ "$worst" -ge 0 ] && record late "$worst" || record late "none"
	record period "$period"
}

# ---- a configuration's steps, in the order run_config takes them ----
# fresh_store: the configuration $cfg's folder, $top/$cfg, in sandbox; for a PostgreSQL
# configuration (pg*) a new database of the bench's server ($pg) exported as ISC_STORE_URL,
# else none (SQLite in the home).
fresh_store() {
	sandbox=$top/$cfg
	mkdir -p "$sandbox"
	unset ISC_STORE_URL
	if [ "${cfg%%[0-9]*}" = pg ]; then
		ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" "bench_$cfg") || return 1
		export ISC_STORE_URL
	fi
}

# start_replicas NREP: after the sandbox started (--no-iscd), its env read, NREP homes
# (replica_homes) and an iscd on each, started one after the other.
start_replicas() {
	local i
	. "$sandbox/env"
	replica_homes "$1" || return 1
	for ((i = 0; i < $1; i++)); do start_replica "$i" || return 1; done
}

# store_name: the store said in a configuration's first line: "PostgreSQL (max_connections
# $PG_MAX_CONN)" or "SQLite".
store_name() {
	[ -n "${ISC_STORE_URL:-}" ] && echo "PostgreSQL (max_connections $PG_MAX_CONN)" || echo SQLite
}

# submit_bulk NB: NB bursts of $sandbox/bulk.isc, PAR `isc burst` at a time spread over the
# replicas; their ids in $sandbox/ids, errors in $sandbox/submit.err. Sets t1 (when the last
# returned) and n_sub (how many were taken) and says both, timed from the caller's t0.
submit_bulk() {
	export -f submit
	export top sandbox ISC_BIN
	export HOMES_LIST="${homes[*]}"
	seq 1 "$1" | xargs -P "$PAR" -I{} bash -c 'homes=($HOMES_LIST); submit bulk {}' >"$sandbox/ids" 2>"$sandbox/submit.err"
	t1=$(now_ms)
	n_sub=$(wc -l <"$sandbox/ids")
	say "$n_sub of $1 submitted in $((t1 - t0)) ms ($PAR at a time$([ -s "$sandbox/submit.err" ] && echo "; errors: $(sort "$sandbox/submit.err" | uniq -c | sort -rn | head -3 | tr '\n' ' ')"))"
}

# wait_running [live]: polls the store each second until every one of the n_sub bulk bursts
# runs, or one ended (it never will), or RUN_LIMIT_S after t0; sets n_run and n_end. Every
# 30 s says the statuses so far (with "live", the mock cloud's live instances too).
wait_running() {
	local end=$((t0 + RUN_LIMIT_S * 1000)) next_say=$((t0 + 30000))
	while :; do
		read -r n_run n_end <<<"$(q "SELECT count(*) FILTER (WHERE status = 'running'),
			count(*) FILTER (WHERE status IN ('completed', 'failed', 'cancelled', 'stopped'))
			FROM experiments WHERE name = 'bulk'")"
		[ "$n_run" -ge "$n_sub" ] || [ "$n_end" -gt 0 ] && break
		[ "$(now_ms)" -gt "$end" ] && break
		if [ "$(now_ms)" -gt "$next_say" ]; then
			say "  after $((($(now_ms) - t0) / 1000)) s: $(statuses bulk)${1:+; $(live_instances) live instances}"
			next_say=$((next_say + 30000))
		fi
		sleep 1
	done
}

# all_running NB: after wait_running (t2 when it ended): whether all NB bulk bursts ran, and
# when the last one first did after t0, against the critical path c; said and recorded as
# "all" ("none:RUNNING/NB running after ..." when not all). Sets st, the bulk's statuses.
all_running() {
	local last n_ever last_at all
	st=$(statuses bulk)
	last=$(first_running bulk | awk 'BEGIN {m = 0; n = 0} {n++; if ($2 > m) m = $2} END {print n, m}')
	n_ever=${last% *} last_at=${last#* }
	if [ "$n_run" -ge "$1" ]; then
		all=$((last_at - t0))
		say "all $1 bursts running $all ms after the first submission (seen by polling at $((t2 - t0)) ms); ratio to the critical path $(awk -v a="$all" -v c="$c" 'BEGIN {printf "%.2f", a / c}')"
		record all "$all"
	else
		say "NOT all $1 running (within $RUN_LIMIT_S s; $n_sub submitted, $n_end ended): $n_run running now, $n_ever ever ran; statuses: $st"
		record all "none:$n_run/$1 running after ${RUN_LIMIT_S}s"
	fi
}

# api_running PAGEKEY: with the n_run bursts running, wrk on the status of one (recorded as
# p99) and on a page of the experiments listing (recorded as PAGEKEY).
api_running() {
	api_token
	api_status p99 "with $n_run bursts running"
	api_wrk "$1" "/v1/experiments?limit=50" "a page of experiments (GET /v1/experiments?limit=50)" "with $n_run bursts running"
}

# cancel_bulk: every burst of $sandbox/ids cancelled (PAR at a time, through replica 1);
# then up to 600 s for the mock cloud to have no live instance. Sets cancel_s (seconds
# from the first cancel to then); 1 when instances are left.
cancel_bulk() {
	local tc rc=0
	tc=$(now_ms)
	xargs -P "$PAR" -I{} bash -c 'homes=($HOMES_LIST); ISC_HOME=${homes[0]} "$ISC_BIN/isc" cancel {} >/dev/null' <"$sandbox/ids"
	wait_no_live 600 || rc=1
	cancel_s=$((($(now_ms) - tc) / 1000))
	return $rc
}

# iscd_cpus NREP: " iscd 1 S s, iscd 2 S s," the CPU seconds each iscd used so far.
iscd_cpus() {
	local i cpus=""
	for ((i = 0; i < $1; i++)); do cpus="$cpus iscd $((i + 1)) $(cpu_s "${pids[$i]}") s,"; done
	echo "$cpus"
}

# stop_config NREP: the configuration's end: each iscd's life so far, every iscd stopped
# (stop_replicas), their tick stats reported (tick_report), the sandbox stopped.
stop_config() {
	local i life=()
	for ((i = 0; i < $1; i++)); do life[$i]=$(($(now_ms) - started[i])); done
	stop_replicas
	tick_report "$1"
	"$repo/tests/mocks/sandbox" stop "$sandbox" >/dev/null 2>&1
	sandbox=
}

# ---- the bench's frame ----
# bench_top NAME: the bench's temporary folder /tmp/isc-bench-NAME.XXXXXX in top, with its
# PostgreSQL server's folder (pg) and the results file (results, emptied); no sandbox yet.
bench_top() {
	top=$(mktemp -d "/tmp/isc-bench-$1.XXXXXX")
	chmod 755 "$top" # as root, the PostgreSQL server runs as postgres and must reach its folder
	pg=$top/pg
	results=$top/results
	: >"$results"
	sandbox=
}

# pg_server_up MAXB: PG_MAX_CONN for configurations of at most MAXB bursts: each iscd holds
# a few connections plus one per API thread, and each burst step in flight opens its own
# (docs/ha.md, "Connection budget"), so MAXB + 300, at least 400, unless
# BENCH_PG_MAX_CONNECTIONS says. When CONFIGS has a PostgreSQL configuration, the bench's
# server in $pg, restarted with max_connections = PG_MAX_CONN; exits the bench when it cannot.
pg_server_up() {
	PG_MAX_CONN=${BENCH_PG_MAX_CONNECTIONS:-$(($1 + 300 < 400 ? 400 : $1 + 300))}
	[[ " $CONFIGS " == *" pg"* ]] || return 0
	"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
	psql "$("$repo/tests/pg/pg-server" uri "$pg")" -qAtX -c "ALTER SYSTEM SET max_connections = $PG_MAX_CONN" >/dev/null &&
		"$repo/tests/pg/pg-server" stop "$pg" && "$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
}

# run_configs BENCH [AFTER]: run_config for each configuration of CONFIGS (sqlite1 pg1 pg3;
# another is said and skipped, BENCH naming the bench), a failed one said and recorded;
# after each, whatever it left running stopped (its iscd, its sandbox, then the command
# AFTER if given).
run_configs() {
	for cfg in $CONFIGS; do
		case "$cfg" in sqlite1 | pg1 | pg3) ;; *) echo "$1: unknown configuration $cfg (sqlite1 pg1 pg3)" >&2; continue ;; esac
		run_config || { echo "$cfg: the run failed (see above)"; record failed 1; }
		stop_replicas
		[ -n "$sandbox" ] && "$repo/tests/mocks/sandbox" stop "$sandbox" >/dev/null 2>&1
		sandbox=
		[ -z "${2:-}" ] || "$2"
	done
}

# closing_table ARG...: the bench's closing table, Python read from stdin after a shared
# start: names (each configuration's name in the table), r (the results file, $results,
# as r[CFG][KEY] = VALUE) and ms (a wrk latency such as "1.2ms" in milliseconds, None when
# it is not one); the Python's sys.argv is "-" then ARG...
closing_table() {
	{
		cat <<'PY'
import sys
names = {"sqlite1": "SQLite, 1 replica", "pg1": "PostgreSQL, 1 replica", "pg3": "PostgreSQL, 3 replicas"}
r = {}
for line in open(sys.argv[1]):
    c, k, v = line.rstrip("\n").split(" ", 2)
    r.setdefault(c, {})[k] = v
def ms(v):
    v = (v or "").strip()
    for suf, f in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if v.endswith(suf):
            try:
                return float(v[: -len(suf)]) * f
            except ValueError:
                return None
    return None
PY
		cat
	} | /usr/bin/python3 - "$results" "$@"
}
