#!/usr/bin/env bash
# The store and its replicas under load (issue 33, docs/ha.md). For each configuration
# (BENCH_REPLICA_CONFIGS, default "sqlite1 pg1 pg3": SQLite with one iscd, PostgreSQL with
# one iscd, PostgreSQL with three iscd replicas on one store), on a fresh sandbox (mock
# cloud, real sshd nodes; node boot delay B):
#  1. the critical path: one 2-node burst alone, submission -> running (its first
#     "running" event), the median of 3 after one warm-up;
#  2. N concurrent 2-node bursts (BENCH_BURSTS, default 200), submitted as fast as the
#     API takes them (BENCH_SUBMIT_PARALLEL isc processes at once, spread over the
#     replicas): time from the first submission to the last burst's first "running"
#     event, against the critical path (goal <= 2x);
#  3. while they run: wrk, 200 connections, the status of one of them
#     (GET /v1/experiments/ID over TCP with a token; for 3 replicas on replica 1);
#     goal p99 < 50 ms;
#  4. every burst cancelled; then until the mock cloud has 0 live instances (leaks said);
#  5. every iscd stopped with SIGTERM; its "tick stats" line (the worst replica's) gives
#     the worst tick's lateness; goal: never late by more than one tick.
# A closing table: measured against the goal, met / not met. A configuration whose bursts
# are not all running within BENCH_RUN_LIMIT_S (default 600 s) says how many were.
#
# Every node of the mock cloud is a real sshd (tests/mocks/node), launched by the Python
# mock cloud: on a 2-core machine they are most of what the run costs. There, N = 200 takes
# 5.5-7 minutes a configuration (the mock and its node-up/down children 157-219 s of CPU,
# iscd 35-39 s; cancelling to an empty cloud alone 2-4 minutes), so N = 1000 would take
# about half an hour each. The default is therefore 200, what docs/ha.md ("Measured")
# reports; issue 33 asks for BENCH_BURSTS=1000 on a machine that can take it. The first
# line printed says which N was used.
set -uo pipefail
# The helpers (replicas, the store, bursts, wrk), the checkout (repo) and the settings B,
# TICK, PAR, WRK_S, CONNS, ISC_BIN: shared with scale.sh.
# shellcheck source-path=SCRIPTDIR source=lib/bursts.sh
. "$(dirname "$0")/lib/bursts.sh"
N=${BENCH_BURSTS:-200}
CONFIGS=${BENCH_REPLICA_CONFIGS:-sqlite1 pg1 pg3}
RUN_LIMIT_S=${BENCH_RUN_LIMIT_S:-600}

for t in wrk psql sqlite3 curl; do
	command -v "$t" >/dev/null || { echo "replicas bench: $t is not installed (make test-deps)"; exit 1; }
done
bench_top rep
cleanup() {
	stop_replicas
	[ -n "$sandbox" ] && "$repo/tests/mocks/sandbox" stop "$sandbox" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$top"
}
trap cleanup EXIT

# run_config CFG: one configuration, from a fresh sandbox to its stop.
run_config() {
	local nrep=${cfg##*[a-z]}
	fresh_store || return 1
	NODE_DOCKER=c SANDBOX_PROVIDERS=aws SANDBOX_TICK_MS=$TICK SANDBOX_BOOT_DELAY_MS=$B \
		SANDBOX_CREDITS=100000000 "$repo/tests/mocks/sandbox" start --no-iscd "$sandbox" >/dev/null || return 1
	start_replicas "$nrep" || return 1
	say "$nrep iscd on $(store_name), tick $TICK ms, node boot delay $B ms, $N bursts of 2 nodes"

	# 1. The critical path.
	local c
	critical_path || return 1
	c=$crit_ms

	# 2. N bursts at once.
	local t0 t1 t2 n_run n_sub n_end st cpu0 iscd0
	burst_file bulk
	cpu0=$(busy_cpu_s)
	iscd0=$(iscd_cpu_s)
	t0=$(now_ms)
	submit_bulk "$N"
	wait_running live
	t2=$(now_ms)
	# What the machine did meanwhile: iscd's CPU against everything else's (the mock
	# cloud, its sshd nodes and their containers, the submitting isc processes). The
	# latter alone, spread perfectly over every core, is a floor no broker can beat here.
	local cpu1 iscd1
	cpu1=$(busy_cpu_s)
	iscd1=$(iscd_cpu_s)
	awk -v cfg="$cfg" -v a="$cpu0" -v b="$cpu1" -v i0="$iscd0" -v i1="$iscd1" -v ms=$((t2 - t0)) \
		-v cores="$(nproc)" -v crit="$c" 'BEGIN {
		busy = b - a; iscd = i1 - i0; rest = busy - iscd; floor = rest / cores
		printf "%s: meanwhile the %d cores were %.0f%% busy: iscd %.1f s of CPU, everything else %.1f s, which alone needs >= %.1f s on %d cores (%.1fx the critical path)\n",
			cfg, cores, 100 * busy / (cores * ms / 1000), iscd, rest, floor, cores, floor * 1000 / crit }'
	echo "$cfg floor $(awk -v a="$cpu0" -v b="$cpu1" -v i0="$iscd0" -v i1="$iscd1" -v cores="$(nproc)" 'BEGIN {printf "%d", 1000 * ((b - a) - (i1 - i0)) / cores}')" >>"$results"
	all_running "$N"
	say "statuses: $st"
	grep -h -c 'opening the store' "$sandbox"/iscd.*.log | awk '{s += $1} END {if (s) print "'"$cfg"': " s " burst steps could not open the store (iscd logs: opening the store)"}'

	# 3. The API while they run: the status of one of them, 200 connections.
	api_running page99

	# 4. Cancel all; the cloud empties.
	if cancel_bulk; then
		say "all cancelled; 0 live instances $cancel_s s after the first cancel; statuses: $(statuses bulk)"
		record leaked 0
	else
		local left
		left=$(live_instances)
		say "NOT EMPTY: $left instances still live 600 s after the cancels (the cancels had not all gone through; not by itself a leak); statuses: $(statuses bulk)"
		record leaked "$left"
	fi
	api_status p99idle "after the cancels ($(statuses bulk); $(q "SELECT count(*) FROM experiments") experiments in the store)"

	# 5. Tick lateness, logged by each iscd at its stop (tick_report, lib/bursts.sh).
	say "CPU used over the whole run:$(iscd_cpus "$nrep") mock cloud (Python, its node-up/down children) $(cpu_s "$(cat "$sandbox/mock.pid")") s"
	stop_config "$nrep"
	rm -rf "$top/$cfg/mock/nodes" # 2 x N node folders; the logs stay with KEEP=1
}

pg_server_up "$N" # PG_MAX_CONN for N bursts
echo "replicas bench: N = $N bursts of 2 nodes (BENCH_BURSTS), node boot delay $B ms, tick $TICK ms, $(nproc) cores"
run_configs "replicas bench"

# The closing table.
closing_table "$N" "$TICK" "$CONFIGS" <<'PY'
n, tick, configs = sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
print()
print("%-24s %-44s %-28s %s" % ("configuration", "measure", "measured", "goal: met?"))
for c in configs:
    name = names.get(c, c)
    d = r.get(c, {})
    if not d or "crit" not in d:
        why = "the run failed" if d.get("failed") else "not run"
        print("%-24s %-44s %-28s %s" % (name, "(all)", "not measured: " + why, "-"))
        continue
    crit = float(d["crit"])
    a = d.get("all", "none")
    if a.startswith("none:"):
        print("%-24s %-44s %-28s %s" % (name, "%s bursts: all running / critical path" % n, a[5:], "<= 2.0x: not met"))
    else:
        ratio = float(a) / crit
        print("%-24s %-44s %-28s %s" % (name, "%s bursts: all running / critical path" % n,
              "%.1f s / %.1f s = %.2fx" % (float(a) / 1000, crit / 1000, ratio),
              "<= 2.0x: " + ("met" if ratio <= 2.0 else "not met")))
    if "floor" in d:
        fl = float(d["floor"])
        print("%-24s %-44s %-28s %s" % ("", "the machine's floor: others' CPU / cores",
              "%.1f s = %.2fx the critical path" % (fl / 1000, fl / crit), "(not a goal; see above)"))
    late = d.get("late", "none")
    if late == "none":
        print("%-24s %-44s %-28s %s" % ("", "worst tick lateness", "not measured: no tick stats", "-"))
    else:
        print("%-24s %-44s %-28s %s" % ("", "worst tick lateness, iscd's count (tick %d)" % tick, "%s ms" % late,
              "<= %d ms: %s" % (tick, "met" if int(late) <= tick else "not met")))
    per = int(d.get("period", "0"))
    print("%-24s %-44s %-28s %s" % ("", "mean tick period (life / ticks)", "%d ms" % per,
          "<= %d ms: %s" % (2 * tick, "met" if 0 < per <= 2 * tick else "not met")))
    for key, label in (("p99", "API status p99, 200 conn., bursts running"),
                       ("page99", "API page of 50 p99, 200 conn., bursts running"),
                       ("p99idle", "API status p99, 200 conn., after the cancels")):
        p = ms(d.get(key, ""))
        print("%-24s %-44s %-28s %s" % ("", label, d.get(key, "?"),
              "< 50 ms: " + ("?" if p is None else "met" if p < 50 else "not met")))
    print("%-24s %-44s %-28s %s" % ("", "instances live 600 s after cancelling all", d.get("leaked", "?"),
          "0: " + ("met" if d.get("leaked") == "0" else "not met")))
PY
