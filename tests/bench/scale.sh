#!/usr/bin/env bash
# A platform's scale on the hollow test bed (issue 49, docs/benchmarks.md "Scale"). For
# each configuration (BENCH_SCALE_CONFIGS, default "sqlite1 pg1 pg3": SQLite with one
# iscd, PostgreSQL with one, PostgreSQL with three replicas on one store):
#   the mock cloud in hollow mode (docs/mock-cloud.md, "Hollow nodes": no sshd per
#   instance) and ONE hollow-node process serving SSH for every node address;
#   iscd pinned to core BENCH_ISCD_CORE (0) with taskset, the test bed (mock cloud,
#   hollow node, PostgreSQL, the isc clients, wrk, this script) to BENCH_BED_CORE (1).
# Then, against issue 49's "Done means":
#  1. the critical path: one 2-node burst alone, submission -> its first "running" event,
#     the median of 3 after a warm-up;
#  2. BENCH_SCALE_BURSTS (default 1000) 2-node bursts per replica (3,000 for 3), submitted
#     BENCH_SUBMIT_PARALLEL (8) at a time spread over the replicas: from the first
#     submission to the last one's first "running", against the critical path (goal
#     <= 2x); iscd's CPU-seconds per burst over that span;
#  3. a window of BENCH_SCALE_WINDOW_S (60 s) while all run and nothing else is asked of
#     iscd, with iscd's own metering and sync defaults (an hour's hold, a charge a minute,
#     checkpoints every 10 min, lossy every 30 s; the sandbox's are shorter): ledger rows written per running node-hour (goal <= 61), the store's growth per
#     1,000 burst-hours (SQLite: pages in use; PostgreSQL: every relation's size with its
#     indexes and TOAST), iscd's CPU-seconds per burst per running hour;
#  4. wrk, 200 connections, BENCH_API_SECONDS (10 s) each, on replica 1: the status of one
#     burst and a page of the experiments listing (GET /v1/experiments?limit=50); goal p99
#     < 50 ms;
#  5. every burst cancelled; every iscd stopped with SIGTERM: its "tick stats" give the
#     worst tick's lateness (goal: never more than one tick interval).
# The test bed's CPU: its core's busy time, and the mock cloud's and the hollow node's own.
# Other users of the machine show as busy time of iscd's core beyond iscd's own: printed.
# A closing table: measured against the goal, met / not met.
#
# The hollow node: HOLLOW_NODE (a path), else $ISC_TESTS/hollow-node, else
# build/*/tests/hollow-node (release first). Its interface: hollow-node --dir DIR --first
# 127.A.B.C --count N --port PORT; DIR/ready once it listens; the node at IP exists while
# DIR/nodes/IP.keys does (the mock cloud writes and removes those).
set -uo pipefail
# The helpers (replicas, the store, bursts, wrk), the checkout (repo) and the settings B,
# TICK, PAR, WRK_S, CONNS, ISC_BIN: shared with replicas.sh.
# shellcheck source-path=SCRIPTDIR source=lib/bursts.sh
. "$(dirname "$0")/lib/bursts.sh"
N=${BENCH_SCALE_BURSTS:-1000}
CONFIGS=${BENCH_SCALE_CONFIGS:-sqlite1 pg1 pg3}
RUN_LIMIT_S=${BENCH_RUN_LIMIT_S:-900}
WINDOW_S=${BENCH_SCALE_WINDOW_S:-60}
ISCD_CORE=${BENCH_ISCD_CORE:-0}
BED_CORE=${BENCH_BED_CORE:-1}
SSH_PORT=2222 # on addresses of our own range: no one else's node listens there

for t in wrk psql sqlite3 curl taskset; do
	command -v "$t" >/dev/null || { echo "scale bench: $t is not installed (make deps)"; exit 1; }
done
hollow_bin=${HOLLOW_NODE:-}
if [ -z "$hollow_bin" ]; then
	for c in "${ISC_TESTS:+$ISC_TESTS/hollow-node}" "$repo/build/release/tests/hollow-node" "$repo"/build/*/tests/hollow-node; do
		[ -n "$c" ] && [ -x "$c" ] && { hollow_bin=$c; break; }
	done
fi
[ -x "$hollow_bin" ] || { echo "scale bench: no hollow-node (build tests/hollow, or set HOLLOW_NODE)"; exit 1; }

# The test bed on its core: this shell, so everything it starts (the sandbox, the mock
# cloud, the hollow node, PostgreSQL, isc, wrk); iscd on its own (ISCD_PREFIX, lib/bursts.sh).
ISCD_PREFIX=()
BED_PREFIX=()
cores=$(nproc)
if [ "$cores" -ge 2 ]; then
	taskset -cp "$BED_CORE" $$ >/dev/null || exit 1
	ISCD_PREFIX=(taskset -c "$ISCD_CORE")
	pinned="iscd on core $ISCD_CORE, the test bed on core $BED_CORE"
else
	pinned="not pinned (1 core)"
fi

bench_top scale
hollow_pid=
stop_hollow() {
	[ -n "$hollow_pid" ] || return 0
	kill -TERM "$hollow_pid" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$hollow_pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$hollow_pid" 2>/dev/null
	wait "$hollow_pid" 2>/dev/null
	hollow_pid=
}
cleanup() {
	stop_replicas
	[ -n "$sandbox" ] && "$repo/tests/mocks/sandbox" stop "$sandbox" >/dev/null 2>&1
	stop_hollow
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$top"
}
trap cleanup EXIT
trap 'exit 143' TERM INT # so a stopped bench still stops what it started

hz=$(getconf CLK_TCK)
# core_busy_s K: CPU seconds core K has been busy since boot.
core_busy_s() { awk -v hz="$hz" -v c="cpu$1" '$1 == c {printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit}' /proc/stat; }
# own_cpu_s PID: the process's own CPU seconds (user + system), children not included.
own_cpu_s() { awk -v hz="$hz" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
iscd_own_s() {
	local sum=0 p
	for p in "${pids[@]}"; do sum=$(awk -v a="$sum" -v b="$(own_cpu_s "$p")" 'BEGIN {printf "%.2f", a + b}'); done
	echo "$sum"
}
# bed_s: CPU seconds of the mock cloud and the hollow node (and their reaped children).
bed_s() { awk -v a="$(cpu_s "$(cat "$sandbox/mock.pid")")" -v b="$(cpu_s "$hollow_pid")" 'BEGIN {printf "%.2f", a + b}'; }
# store_bytes: the store's size in use (SQLite: pages in use; PostgreSQL: every table's
# size with its indexes and TOAST).
store_bytes() {
	if [ -n "${ISC_STORE_URL:-}" ]; then
		q "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		   WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
	else
		sqlite3 -cmd ".timeout 10000" "${homes[0]}/isc.db" "PRAGMA page_count; PRAGMA freelist_count; PRAGMA page_size" |
			tr '\n' ' ' | awk '{print ($1 - $2) * $3}'
	fi
}
# BENCH_SCALE_PERF=1: perf samples iscd (replica 1) during the submission and during the
# window; its top symbols are printed (where the CPU goes, docs/benchmarks.md "Scale").
perf_pid=
perf_start() {
	[ "${BENCH_SCALE_PERF:-0}" = 1 ] && command -v perf >/dev/null || return 0
	perf record -q -F 499 -p "${pids[0]}" -o "$sandbox/perf.$1.data" >/dev/null 2>&1 &
	perf_pid=$!
}
perf_stop() {
	[ -n "$perf_pid" ] || return 0
	kill -INT "$perf_pid" 2>/dev/null
	wait "$perf_pid" 2>/dev/null
	perf_pid=
	say "perf, iscd during $2: self time by object, then the top symbols"
	perf report -q -i "$sandbox/perf.$1.data" --no-children --sort dso 2>/dev/null |
		grep -v '^$' | head -n 8 | sed "s/^/$cfg:   /"
	perf report -q -i "$sandbox/perf.$1.data" --no-children --sort dso,symbol 2>/dev/null |
		grep -v '^$' | head -n "${BENCH_SCALE_PERF_TOP:-25}" | sed "s/^/$cfg:   /"
}
calc() { awk "BEGIN {printf \"$1\", $2}"; }

run_config() {
	local nrep=${cfg##*[a-z]} nb hdir base first count
	nb=$((N * nrep))
	fresh_store || return 1
	# The hollow node: the range's addresses, every node ever launched here (the bulk, the
	# critical path's 4 bursts) with room to spare; a /16 of 127.200-249 of our own.
	hdir=$sandbox/hollow
	base=127.$((200 + RANDOM % 50))
	first=$base.0.1
	count=$((2 * nb + 200))
	mkdir -p "$hdir"
	"$hollow_bin" --dir "$hdir" --first "$first" --count "$count" --port "$SSH_PORT" >"$sandbox/hollow.log" 2>&1 &
	hollow_pid=$!
	for _ in $(seq 600); do
		[ -e "$hdir/ready" ] && break
		kill -0 "$hollow_pid" 2>/dev/null || break
		sleep 0.1
	done
	[ -e "$hdir/ready" ] || { echo "scale bench: the hollow node did not start; its log:" >&2; tail -n 20 "$sandbox/hollow.log" >&2; return 1; }
	SANDBOX_HOLLOW_NODES=$hdir SANDBOX_HOLLOW_FIRST=$first SANDBOX_HOLLOW_COUNT=$count SANDBOX_NODE_IP_BASE=$base \
		SANDBOX_SSH_PORT=$SSH_PORT SANDBOX_PROVIDERS=aws SANDBOX_TICK_MS=$TICK SANDBOX_BOOT_DELAY_MS=$B \
		SANDBOX_RESERVATION_WINDOW_MS=3600000 SANDBOX_CHARGE_INTERVAL_MS=60000 \
		SANDBOX_CREDITS=100000000 "$repo/tests/mocks/sandbox" start --no-iscd --no-s3 "$sandbox" >/dev/null || return 1
	# The platform's sync schedule (checkpoints and crud every 10 min, lossy every 30 s),
	# not the sandbox's every 1-2 s for its tests: a running burst costs what it costs.
	sed -i '/^checkpoint_sync_ms = /d; /^lossy_sync_ms = /d' "$sandbox/home/config.toml"
	start_replicas "$nrep" || return 1
	say "$nrep iscd on $(store_name), tick $TICK ms, node boot delay $B ms, $nb bursts of 2 nodes; hollow nodes $first + $count; $pinned"

	# 1. The critical path.
	local c
	critical_path || return 1
	c=$crit_ms

	# 2. nb bursts at once.
	local t0 t1 t2 n_run n_end n_sub i0 i1 b0 b1 k0 k1 m0 m1
	burst_file bulk
	i0=$(iscd_own_s) b0=$(bed_s) k0=$(core_busy_s "$BED_CORE") m0=$(core_busy_s "$ISCD_CORE")
	t0=$(now_ms)
	perf_start submit
	submit_bulk "$nb"
	wait_running
	t2=$(now_ms)
	i1=$(iscd_own_s) b1=$(bed_s) k1=$(core_busy_s "$BED_CORE") m1=$(core_busy_s "$ISCD_CORE")
	perf_stop submit "the submission, to all running"
	local st
	all_running "$nb"
	local span_s
	span_s=$(calc %.1f "($t2 - $t0) / 1000")
	say "submission -> running, $span_s s: iscd $(calc %.1f "$i1 - $i0") CPU-s ($(calc %.4f "($i1 - $i0) / $nb") per burst); iscd's core busy $(calc %.1f "$m1 - $m0") s (others on it: $(calc %.1f "$m1 - $m0 - ($i1 - $i0)") s); the test bed's core busy $(calc %.1f "$k1 - $k0") s (mock cloud + hollow node $(calc %.1f "$b1 - $b0") s)"
	record sub_cpu "$(calc %.4f "($i1 - $i0) / $nb")"
	record sub_bed "$(calc %.1f "$k1 - $k0")"
	record sub_other "$(calc %.1f "$m1 - $m0 - ($i1 - $i0)")"

	# 3. The quiet window: what running costs.
	local r0 r1 s0 s1 w0 w1 hours
	r0=$(q "SELECT count(*) FROM ledger") s0=$(store_bytes) i0=$(iscd_own_s) b0=$(bed_s)
	k0=$(core_busy_s "$BED_CORE") m0=$(core_busy_s "$ISCD_CORE") w0=$(now_ms)
	perf_start window
	sleep "$WINDOW_S"
	r1=$(q "SELECT count(*) FROM ledger") s1=$(store_bytes) i1=$(iscd_own_s) b1=$(bed_s)
	k1=$(core_busy_s "$BED_CORE") m1=$(core_busy_s "$ISCD_CORE") w1=$(now_ms)
	perf_stop window "the window, all running"
	n_run=$(q "SELECT count(*) FROM experiments WHERE name = 'bulk' AND status = 'running'")
	hours=$(calc %.6f "($w1 - $w0) / 3600000")
	say "window of $(calc %.1f "($w1 - $w0) / 1000") s with $n_run bursts running: $((r1 - r0)) ledger rows ($(calc %.1f "($r1 - $r0) / (2 * $n_run * $hours)") per node-hour); store $s0 -> $s1 bytes ($(calc %.1f "($s1 - $s0) / ($n_run * $hours) * 1000 / 1048576") MiB per 1,000 burst-hours); iscd $(calc %.2f "$i1 - $i0") CPU-s ($(calc %.2f "($i1 - $i0) / ($n_run * $hours)") per burst-hour, $(calc %.0f "100 * ($i1 - $i0) / (($w1 - $w0) / 1000)")% of a core); the test bed's core busy $(calc %.1f "$k1 - $k0") s (mock cloud + hollow node $(calc %.1f "$b1 - $b0") s); others on iscd's core $(calc %.1f "$m1 - $m0 - ($i1 - $i0)") s"
	if [ "$n_run" -gt 0 ]; then
		record rows "$(calc %.1f "($r1 - $r0) / (2 * $n_run * $hours)")"
		record size "$(calc %.1f "($s1 - $s0) / ($n_run * $hours) * 1000 / 1048576")"
		record run_cpu "$(calc %.3f "($i1 - $i0) / ($n_run * $hours)")"
		record run_core "$(calc %.0f "100 * ($i1 - $i0) / (($w1 - $w0) / 1000)")"
	fi

	# 4. The API while they run.
	api_running p99list

	# 5. Cancel all; stop; tick stats.
	if cancel_bulk; then
		say "all cancelled; 0 live instances $cancel_s s after the first cancel"
	else
		say "$(live_instances) instances still live 600 s after the cancels; statuses: $(statuses bulk)"
	fi
	say "CPU over the whole run:$(iscd_cpus "$nrep") mock cloud $(cpu_s "$(cat "$sandbox/mock.pid")") s, hollow node $(cpu_s "$hollow_pid") s"
	stop_config "$nrep"
	stop_hollow
}

# PostgreSQL's connections (pg_server_up): for the most bursts of a configuration, 3 x N with pg3.
max_nb=$N
[[ " $CONFIGS " == *" pg3 "* ]] && max_nb=$((3 * N))
pg_server_up "$max_nb"
echo "scale bench: $N bursts of 2 nodes per replica (BENCH_SCALE_BURSTS), node boot delay $B ms, tick $TICK ms, $cores cores, $pinned; hollow node $hollow_bin; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
run_configs "scale bench" stop_hollow
echo "scale bench: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"

# The closing table.
closing_table "$N" "$TICK" "$CONFIGS" <<'PY'
n, tick, configs = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
reps = {"sqlite1": 1, "pg1": 1, "pg3": 3}
def row(name, what, got, goal):
    print("%-24s %-48s %-30s %s" % (name, what, got, goal))
print()
row("configuration", "measure", "measured", "goal: met?")
for c in configs:
    name = names.get(c, c)
    d = r.get(c, {})
    if "crit" not in d:
        row(name, "(all)", "not measured: " + ("the run failed" if d.get("failed") else "not run"), "-")
        continue
    nb = n * reps.get(c, 1)
    crit = float(d["crit"])
    a = d.get("all", "none")
    if a.startswith("none"):
        row(name, "%d bursts: all running / critical path" % nb, a[5:], "<= 2.0x: not met")
    else:
        ratio = float(a) / crit
        row(name, "%d bursts: all running / critical path" % nb,
            "%.1f s / %.1f s = %.2fx" % (float(a) / 1000, crit / 1000, ratio), "<= 2.0x: " + ("met" if ratio <= 2 else "not met"))
    late = d.get("late", "none")
    row("", "worst tick lateness (tick %d ms)" % tick, "not measured" if late == "none" else "%s ms" % late,
        "-" if late == "none" else "<= %d ms: %s" % (tick, "met" if int(late) <= tick else "not met"))
    row("", "mean tick period (life / ticks)", "%s ms" % d.get("period", "?"), "(shown)")
    for key, label in (("p99", "API status p99, 200 conn., while running"),
                       ("p99list", "a page of experiments p99, 200 conn.")):
        p = ms(d.get(key))
        row("", label, d.get(key, "?"), "< 50 ms: " + ("?" if p is None else "met" if p < 50 else "not met"))
    row("", "iscd CPU-s per burst, submission -> running", d.get("sub_cpu", "?"), "(shown)")
    row("", "iscd CPU-s per burst per running hour", "%s (%s%% of a core)" % (d.get("run_cpu", "?"), d.get("run_core", "?")), "(shown)")
    row("", "test bed core busy, submission -> running", "%s s" % d.get("sub_bed", "?"), "(shown)")
    rows = d.get("rows")
    row("", "ledger rows per running node-hour", rows or "?",
        "<= 61: " + ("?" if rows is None else "met" if float(rows) <= 61 else "not met"))
    row("", "store growth per 1,000 burst-hours", "%s MiB" % d.get("size", "?"), "(shown)")
PY
