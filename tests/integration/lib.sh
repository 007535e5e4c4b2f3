# Helpers for the integration scripts: each check counts as one test; the
# script ends with `finish NAME`, which prints "NAME: N passed, M failed".
set -u
: "${ISC_BIN:?ISC_BIN must point at the programs under test}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"
passed=0
failed=0

check() {
	local what=$1; shift
	if "$@" >/dev/null 2>&1; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $what" >&2
	fi
}

expect_exit() {
	local want=$1 what=$2; shift 2
	"$@" >/dev/null 2>&1
	local got=$?
	if [ "$got" -eq "$want" ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $what: exit $got, wanted $want" >&2
	fi
}

expect_stderr() {
	local want=$1; shift
	local out
	out=$("$@" 2>&1 >/dev/null)
	if grep -qF -- "$want" <<<"$out"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: stderr of '$*' lacks '$want': $out" >&2
	fi
}

finish() {
	echo "$1: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# start_mockcloud DIR [FLAG...]: tests/mocks/mockcloud on loopback without sshd nodes,
# state in DIR/state, log DIR/mock.log, 100 ms boot and shutdown delays (FLAGs are added).
# Sets mock_pid and MOCKCLOUD_URL (exported); on exit the mock is stopped and DIR removed
# (kept with KEEP=1). Returns non-zero when the mock did not come up within 30 s.
start_mockcloud() {
	local d=$1
	shift
	/usr/bin/python3 tests/mocks/mockcloud --port-file "$d/port" --state-dir "$d/state" \
		--boot-delay-ms 100 --shutdown-delay-ms 100 --no-nodes "$@" 2>"$d/mock.log" &
	mock_pid=$!
	_mock_dir=$d
	trap 'kill -TERM "$mock_pid" 2>/dev/null; wait "$mock_pid" 2>/dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$_mock_dir"' EXIT
	for _ in $(seq 300); do
		[ -s "$d/port" ] && break
		sleep 0.1
	done
	[ -s "$d/port" ] || return 1
	export MOCKCLOUD_URL="http://127.0.0.1:$(cat "$d/port")"
}

# ---- Bursts on the sandbox (tests/mocks/sandbox): after `. "$dir/env"` these talk to
# its iscd, isc home and mock cloud (MOCKCLOUD_URL).
isc() { "$ISC_BIN/isc" "$@"; }
mock() { curl -s "$MOCKCLOUD_URL/_mock/$1" "${@:2}"; }
fault() { mock faults -X POST -H 'Content-Type: application/json' -d "$1" >/dev/null; }

# status_of ID [FIELD]: one field of `isc status ID --json` (default: status).
status_of() {
	isc status "$1" --json |
		/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "${2:-status}"
}
# wait_status ID STATUS SECONDS: until the experiment reaches STATUS; gives up early when
# it reached another final status (it never leaves one).
wait_status() {
	local id=$1 want=$2 secs=$3 s=""
	for _ in $(seq 1 $((secs * 5))); do
		s=$(status_of "$id")
		[ "$s" = "$want" ] && return 0
		case $s in completed | failed | cancelled | stopped) break ;; esac
		sleep 0.2
	done
	echo "experiment $id is '$s', wanted '$want'" >&2
	isc status "$id" >&2
	return 1
}
# submit FILE: `isc burst FILE`, prints the experiment id.
submit() { isc burst "$1" | grep -Eo 'exp_[0-9a-f]{16}'; }
# burst_isc NAME PROJECT SHAPE COMMAND: writes $dir/NAME.isc, a 1-GPU burst named NAME of
# PROJECT on SHAPE that runs COMMAND (a multi-line literal string, so COMMAND may hold any
# quote but three single quotes in a row).
burst_isc() {
	cat >"$dir/$1.isc" <<ISC
isc_project_id = "$2"
experiment_name = "$1"
gpus = 1
burst_shape_priority_list = ["$3"]
command = '''
$4
'''
ISC
}
# For the helpers that read the mock's instances: rows_of(EXP), the rows (from stdin) of
# experiment EXP (its isc:experiment tag, or isc-experiment label on GCE; "" for all).
_rows_of_py='
import json, sys
def rows_of(exp):
    def tag(r, k):
        return (r.get("tags") or {}).get(k)
    return [r for r in json.load(sys.stdin)
            if not exp or exp in (tag(r, "isc:experiment"), tag(r, "isc-experiment"))]
'
# live_instances [EXP]: instances the mock cloud still runs (of experiment EXP).
live_instances() {
	mock instances | /usr/bin/python3 -c "$_rows_of_py"'
print(sum(1 for r in rows_of(sys.argv[1]) if r["state"] != "terminated"))' "${1:-}"
}
# wait_no_live [EXP]: until live_instances [EXP] is 0 (at most 30 s).
wait_no_live() {
	for _ in $(seq 1 150); do
		[ "$(live_instances "${1:-}")" = 0 ] && return 0
		sleep 0.2
	done
	echo "${1:-the cloud} still has $(live_instances "${1:-}") live instance(s)" >&2
	return 1
}

# ---- iscd's API (docs/api.md): isc talks to iscd, so a suite without its own running iscd
# starts one for the API.
# iscd_api HOME [LOG] [ARGS...]: starts iscd on HOME with a minute-long tick (the shortest
# any reservation window allows, so the broker stays out of the way; suites that need ticks
# start their own iscd) and waits for its socket. Sets iscd_api_pid. iscd gets SIGTERM when
# this script's shell exits (setpriv --pdeathsig), so no daemon outlives a suite;
# iscd_api_stop stops it earlier.
iscd_api() {
	local home=$1 log=${2:-/dev/null}
	shift 2 2>/dev/null || shift $#
	setpriv --pdeathsig TERM "$ISC_BIN/iscd" --home "$home" --interval-ms 60000 "$@" 2>>"$log" &
	iscd_api_pid=$!
	iscd_wait_socket "$home/run/api.sock"
}
# with_iscd HOME CMD...: runs CMD while an API iscd (iscd_api) serves HOME, started with
# this shell's environment and stopped after: `isc check` proves iscd's credentials, so a
# case's variables (VAR=value with_iscd ...) must be iscd's. iscd's stderr is appended to
# $with_iscd_log (default /dev/null). Returns CMD's exit code (1 when iscd did not start).
with_iscd() {
	local home=$1 rc
	shift
	iscd_api "$home" "${with_iscd_log:-/dev/null}" || return 1
	"$@"
	rc=$?
	iscd_api_stop
	return $rc
}
# iscd_wait_socket PATH: until the API socket exists (30 s at most).
iscd_wait_socket() {
	for _ in $(seq 300); do
		[ -S "$1" ] && return 0
		sleep 0.1
	done
	echo "iscd did not open $1 within 30 s" >&2
	return 1
}
iscd_api_stop() {
	[ -n "${iscd_api_pid:-}" ] || return 0
	kill -TERM "$iscd_api_pid" 2>/dev/null
	wait "$iscd_api_pid" 2>/dev/null
	iscd_api_pid=
}

# ---- The store that suites' fixtures write and checks read: the PostgreSQL database that
# ISC_STORE_URL names (tests/run-all's second run, docs/ha.md), else the SQLite file of
# $ISC_HOME (a caller with another home: ISC_HOME=$home store_sql ...). The SQL must run on
# both (store/db.h's rules: no printf(), no SQLite-only functions, 0/1 against booleans).
store_is_pg() {
	case ${ISC_STORE_URL:-} in postgres://* | postgresql://*) return 0 ;; esac
	return 1
}
# store_sql [-r] [SQL]: runs SQL (an argument, else stdin) and prints its rows one a line,
# columns separated by '|' (both clients' unaligned output); fails on the first error.
# -r: read-only (a read-only transaction on PostgreSQL, the file opened read-only on SQLite).
store_sql() {
	local ro=0
	[ "${1:-}" = -r ] && ro=1 && shift
	if store_is_pg; then
		local opts=${PGOPTIONS:-}
		[ $ro = 1 ] && opts="$opts -c default_transaction_read_only=on"
		if [ $# -gt 0 ]; then
			PGOPTIONS=$opts psql "$ISC_STORE_URL" -qAtX -v ON_ERROR_STOP=1 -c "$1"
		else
			PGOPTIONS=$opts psql "$ISC_STORE_URL" -qAtX -v ON_ERROR_STOP=1
		fi
	else
		: "${ISC_HOME:?store_sql: ISC_HOME must name the home of the store}"
		local flags=(-bail)
		[ $ro = 1 ] && flags+=(-readonly)
		if [ $# -gt 0 ]; then
			sqlite3 "${flags[@]}" "$ISC_HOME/isc.db" "$1"
		else
			sqlite3 "${flags[@]}" "$ISC_HOME/isc.db"
		fi
	fi
}
# store_dump: the store's whole content as SQL text (pg_dump of the database, or the SQLite
# file's .dump), for checks that a secret is stored nowhere.
store_dump() {
	if store_is_pg; then
		pg_dump "$ISC_STORE_URL"
	else
		sqlite3 -readonly "${ISC_HOME:?}/isc.db" .dump
	fi
}

# table_aligned FILE: the table isc printed to FILE is aligned: (header columns - 1) gutters,
# runs of two or more blanks at the same positions in every line (docs: cli/lib/table.h).
table_aligned() {
	/usr/bin/python3 - "$1" <<'PY'
import re, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
if len(lines) < 2:
    sys.exit("fewer than two lines")
ncols = len(re.split(r" {2,}", lines[0].strip()))
width = max(len(l) for l in lines)
rows = [l.ljust(width) for l in lines]
blank = [all(r[i] == " " for r in rows) for i in range(width)]
# Gutters: runs of >= 2 positions blank in every row, with content after them.
gutters, i = 0, 0
while i < width:
    if blank[i]:
        j = i
        while j < width and blank[j]:
            j += 1
        if j - i >= 2 and j < width:
            gutters += 1
        i = j
    else:
        i += 1
if gutters != ncols - 1:
    sys.exit(f"{ncols} columns but {gutters} common gutters")
PY
}

# ---- Suites that burst on a sandbox with an iscd of their own (burst.sh, gcp-burst.sh,
# oci-burst.sh, crashpoints.sh). Each starts the sandbox on its own line (how it is started
# is the suite's business), then `. "$dir/env"`, then start_iscd.
# sandbox_dir NAME: sets repo (this checkout) and dir (a new /tmp/isc-NAME.XXXXXX); on exit
# the sandbox in dir is stopped, the suite's iscd with it (dir/iscd.pid), and dir removed
# (kept with KEEP=1).
sandbox_dir() {
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	dir=$(mktemp -d "/tmp/isc-$1.XXXXXX")
	trap sandbox_cleanup EXIT
}
sandbox_cleanup() {
	# The suite is over, checks and all: its iscd (perhaps wedged at a crash or pause
	# point) need not stop gently, and the sandbox then stops the rest.
	[ -f "$dir/iscd.pid" ] && kill_iscd
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
# start_iscd: iscd on the sandbox's home with the caller's environment (ISC_CRASH_AT=...
# start_iscd), stderr appended to dir/iscd.log after a line marking the start, pid in
# dir/iscd.pid; returns once its API answers (30 s at most), or at once if it died. Refused
# when an iscd already answers there (the sandbox's own: start it with --no-iscd), since
# this one would exit and the suite would go on talking to the other.
start_iscd() {
	local pid
	if api_answers; then
		echo "start_iscd: an iscd already answers for $ISC_HOME (sandbox start without --no-iscd?)" >&2
		return 1
	fi
	echo "---- iscd start ${ISC_CRASH_AT:-} ----" >>"$dir/iscd.log"
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	pid=$!
	echo "$pid" >"$dir/iscd.pid"
	for _ in $(seq 300); do
		# A socket left by a killed iscd refuses connections until the new one binds it.
		api_answers && kill -0 "$pid" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	echo "iscd did not answer within 30 s" >&2
	return 1
}
# api_answers: an iscd answers on the socket isc would use (asked without the crash or
# pause point a caller meant for iscd).
api_answers() { env -u ISC_CRASH_AT -u ISC_PAUSE_AT "$ISC_BIN/isc" experiments --json >/dev/null 2>&1; }
iscd_alive() { kill -0 "$(cat "$dir/iscd.pid")" 2>/dev/null; }
# stop_iscd: SIGTERM, then until it is gone (10 s at most; it is not killed harder, so a
# check of iscd_alive after this says whether it stopped).
stop_iscd() {
	local pid
	pid=$(cat "$dir/iscd.pid")
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null || wait "$pid" 2>/dev/null
	return 0
}
# kill_iscd: kill -9 (a crash), and reaped.
kill_iscd() {
	kill -KILL "$(cat "$dir/iscd.pid")" 2>/dev/null
	wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	return 0
}
# no_sanitizer_report LOG: no AddressSanitizer/LeakSanitizer/UBSan report in LOG (the
# reports are printed on stderr when there are).
no_sanitizer_report() {
	grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$1" || return 0
	grep -E -A30 'AddressSanitizer|LeakSanitizer|runtime error' "$1" | head -60 >&2
	return 1
}

# within SECONDS CMD...: CMD until it succeeds (every 0.2 s), at most SECONDS.
within() {
	local secs=$1
	shift
	for _ in $(seq 1 $((secs * 5))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	"$@"
}
# status_says ID REGEX: `isc status ID` (the human form) has a line matching REGEX.
status_says() { isc status "$1" | grep -qE -- "$2"; }
# wait_cycle ID CYCLE SECONDS: until the experiment is running in cycle CYCLE (the status
# is printed when it does not get there).
wait_cycle() {
	local id=$1 cycle=$2 secs=$3
	for _ in $(seq 1 $((secs * 5))); do
		[ "$(status_of "$id")" = running ] && [ "$(status_of "$id" cycle_count)" = "$cycle" ] && return 0
		sleep 0.2
	done
	isc status "$id" >&2
	return 1
}
# interrupt_resumes ID KIND NOTICE_S SECONDS [oldest|newest]: the cloud takes one running
# node of ID (fault KIND: interrupt, or preempt on GCE) with NOTICE_S seconds of notice; then
# checks that the interruption is seen, that ID runs again in cycle 2 within SECONDS, and
# that rank 0 resumed from its checkpoint. Sets victim (the node taken).
interrupt_resumes() {
	local id=$1 kind=$2 notice=$3 secs=$4 out
	victim=$(running_instance "$id" "${5:-oldest}")
	fault "{\"kind\":\"$kind\",\"instance_id\":\"$victim\",\"notice_s\":$notice}"
	check "$kind: the interruption is seen" within 20 status_says "$id" interrupted
	check "$kind: reprovisioned and running again in cycle 2" wait_cycle "$id" 2 "$secs"
	out=$(status_of "$id" output_path)
	check "$kind: rank 0 resumed from its checkpoint" within 15 grep -q 'resumed from step' "$out/rank_0.txt"
}
# instances_of EXP [PY-CONDITION]: how many of the mock cloud's instances (every provider)
# belong to experiment EXP (its isc:experiment tag, isc-experiment label on GCE) and match
# the condition on r, the mock's row (default: all of them).
instances_of() {
	mock instances | /usr/bin/python3 -c "$_rows_of_py"'
print(sum(1 for r in rows_of(sys.argv[1]) if eval(sys.argv[2])))' "$1" "${2:-True}"
}
# instances_at_least EXP N [PY-CONDITION]: instances_of EXP [PY-CONDITION] is N or more
# (for `within`: a terminated state follows the cloud's shutdown delay).
instances_at_least() { [ "$(instances_of "$1" "${3:-True}")" -ge "$2" ]; }
# running_instance EXP [oldest|newest]: the id of one of EXP's running instances, by launch
# time ("" when none).
running_instance() {
	mock instances | /usr/bin/python3 -c "$_rows_of_py"'
rows = sorted((r for r in rows_of(sys.argv[1]) if r["state"] == "running"),
              key=lambda r: (r["launched_at"], r["id"]))
print(rows[-1 if sys.argv[2] == "newest" else 0]["id"] if rows else "")' "$1" "${2:-oldest}"
}
