#!/usr/bin/env bash
# The operator's tools (issue 44; docs/operations.md): iscd's notify messages to systemd
# (READY=1 once the API answers, WATCHDOG=1 from the tick loop and none while a tick is
# stuck, STOPPING=1), journald priorities on its log lines, the systemd unit
# (systemd-analyze verify), `make install` (an installed iscd finds its catalog and pages
# with no build tree), the man pages (made from the docs, held to the programs' --help),
# the bash completion (COMPREPLY), and the Debian package (`make deb`, lintian, its files
# where the FHS puts them, its programs run from a scratch root).
# ISC_BIN is the test build (a pause point holds a tick); the install and the package are
# release builds made here. PACKAGE_PARTS="notify journal unit install completion deb"
# runs only those parts (all by default).
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
parts=" ${PACKAGE_PARTS:-notify journal unit install man completion deb} "
want() { [[ $parts == *" $1 "* ]]; }

dir=$(mktemp -d /tmp/isc-package.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

# count_in FILE PATTERN: lines of FILE matching the extended regex (0 when none).
count_in() { grep -cE -- "$2" "$1" 2>/dev/null || true; }
# wait_for SECONDS CMD...: until CMD succeeds.
wait_for() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
	return 1
}

# ---- notify: READY=1 when the API answers, WATCHDOG=1 while ticking, none while stuck.
if want notify; then
	home=$dir/notify-home
	"$ISC_BIN/isc" --home "$home" init >/dev/null || exit 1
	nlog=$dir/notify.log
	/usr/bin/python3 "$repo/tests/integration/notify-listen.py" "$dir/notify.sock" "$nlog" \
		"$home/run/api.sock" &
	pids+=($!)
	wait_for 10 grep -qs listening "$nlog"
	: >"$dir/pause"
	# A 1 s watchdog: a ping every 500 ms. The 15th tick is held at the pause point.
	NOTIFY_SOCKET=$dir/notify.sock WATCHDOG_USEC=1000000 ISC_PAUSE_AT=tick.started:15 \
		ISC_PAUSE_FILE=$dir/pause "$ISC_BIN/iscd" --home "$home" --interval-ms 100 \
		2>"$dir/iscd-notify.log" &
	ipid=$!
	pids+=($ipid)
	check "iscd sends READY=1 (within 30 s)" wait_for 30 grep -q 'READY=1' "$nlog"
	check "the API answers at the moment READY=1 arrives" grep -qx 'api-at-ready 200' "$nlog"
	check "READY=1 comes with a STATUS= line" grep -qE 'READY=1\|STATUS=ticking on ' "$nlog"
	check "a STATUS= line before READY=1 (the store is opened: migrations)" \
		grep -q 'STATUS=opening the store' "$nlog"
	check "the tick reaches the pause point (the 15th tick)" \
		wait_for 30 grep -q 'pause point tick.started reached' "$dir/iscd-notify.log"
	# Ticks 1..14 took 1.4 s at least: two pings came (at 500 and 1000 ms). The last one may
	# be in flight: read after a moment, before the 1 s the next would need.
	sleep 0.3
	before=$(count_in "$nlog" 'WATCHDOG=1')
	check "WATCHDOG=1 while ticking ($before so far)" test "$before" -ge 2
	sleep 2.5
	during=$(count_in "$nlog" 'WATCHDOG=1')
	check "no WATCHDOG=1 while a tick is stuck (2.5 s: $before then $during)" \
		test "$during" -eq "$before"
	rm -f "$dir/pause"
	sleep 2.5
	after=$(count_in "$nlog" 'WATCHDOG=1')
	check "WATCHDOG=1 again once the tick goes on ($during then $after in 2.5 s)" \
		test "$after" -ge $((during + 3))
	kill -TERM "$ipid"
	wait "$ipid"
	check "iscd exits 0 on SIGTERM" test $? -eq 0
	check "STOPPING=1 on SIGTERM" wait_for 5 grep -q 'STOPPING=1' "$nlog"
	check "no sanitizer report from iscd" bash -c "! grep -q 'Sanitizer' '$dir/iscd-notify.log'"

	# A watchdog meant for another process (WATCHDOG_PID) is not iscd's: no pings.
	: >"$nlog"
	NOTIFY_SOCKET=$dir/notify.sock WATCHDOG_USEC=200000 WATCHDOG_PID=1 \
		"$ISC_BIN/iscd" --home "$home" --interval-ms 100 2>>"$dir/iscd-notify.log" &
	ipid=$!
	pids+=($ipid)
	check "READY=1 with another process's watchdog" wait_for 30 grep -q 'READY=1' "$nlog"
	sleep 1
	check "no WATCHDOG=1 when WATCHDOG_PID names another process" \
		test "$(count_in "$nlog" 'WATCHDOG=1')" -eq 0
	kill -TERM "$ipid"
	wait "$ipid"
fi

# ---- journal: "<N>" priorities on stderr lines when stderr is the journal's stream.
if want journal; then
	home=$dir/journal-home
	"$ISC_BIN/isc" --home "$home" init >/dev/null || exit 1
	out=$dir/journal.err
	: >"$out"
	stream=$(stat -c '%d:%i' "$out")
	JOURNAL_STREAM=$stream "$ISC_BIN/iscd" --home "$home" --once 2>"$out"
	check "under journald: info lines start with <6>" grep -qE '^<6>[0-9T:.-]+Z iscd info: started on ' "$out"
	check "under journald: every line has a priority" bash -c "! grep -qvE '^<[3467]>' '$out'"
	# A warning: a queued cancel file that is not one (iscd.c, queued_cancels).
	mkdir -p "$home/run/cancel" && : >"$home/run/cancel/not-a-cancel"
	JOURNAL_STREAM=$stream "$ISC_BIN/iscd" --home "$home" --once 2>"$out"
	check "under journald: a warning starts with <4>" grep -qE '^<4>.* iscd warn: ignored ' "$out"
	"$ISC_BIN/iscd" --home "$home" --once 2>"$out"
	check "without JOURNAL_STREAM: no prefix" grep -qE '^[0-9]{4}-[0-9T:.-]+Z iscd info: started' "$out"
	check "without JOURNAL_STREAM: no line has one" bash -c "! grep -q '^<' '$out'"
	# The variable inherited by a program whose stderr is elsewhere (a file, not the stream).
	JOURNAL_STREAM=$stream "$ISC_BIN/iscd" --home "$home" --once 2>"$out.other"
	check "JOURNAL_STREAM naming another file: no prefix" bash -c "! grep -q '^<' '$out.other'"
fi

# ---- completion: dist/bash-completion/isc sourced in bash; COMPREPLY for a few lines.
if want completion; then
	home=$dir/compl-home
	"$ISC_BIN/isc" --home "$home" init >/dev/null || exit 1
	iscd_api "$home" "$dir/iscd-compl.log" || exit 1
	ci() { "$ISC_BIN/isc" --home "$home" "$@"; }
	ci org add acme >/dev/null && ci project add --org acme vision >/dev/null 2>&1
	printf '%s\n' 'isc_project_id = "vision"' 'experiment_name = "e1"' 'gpus = 8' \
		'command = "python train.py"' 'compute_mode = "cycle"' >"$dir/e1.isc"
	ci train "$dir/e1.isc" >/dev/null && ci train "$dir/e1.isc" >/dev/null
	ids=$(ci experiments | grep -oE 'exp_[0-9a-f]{16}' | sort -u | tr '\n' ' ')
	check "two experiments recorded for the completion" test "$(wc -w <<<"$ids")" -eq 2
	# complete_line 'isc WORDS... CUR': COMPREPLY, sorted, one line, for the cursor at the end.
	complete_line() {
		PATH=$ISC_BIN:$PATH bash --norc --noprofile -c '
			. "$1"
			read -ra COMP_WORDS <<<"$2"
			[[ $2 == *" " ]] && COMP_WORDS+=("")
			COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
			_isc
			[ ${#COMPREPLY[@]} -gt 0 ] && printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$repo/dist/bash-completion/isc" "$1"
	}
	expect_reply() {
		local got
		got=$(complete_line "$1")
		if [ "$got" = "$2" ]; then passed=$((passed + 1)); else
			failed=$((failed + 1)); echo "FAIL: completion of '$1': '$got', wanted '$2'" >&2; fi
	}
	expect_reply "isc exp" "experiments "
	expect_reply "isc st" "status store "
	expect_reply "isc --ver" "--version "
	expect_reply "isc --home $home sto" "store "
	expect_reply "isc store " "copy "
	expect_reply "isc store copy --to" "--to --to-file "
	expect_reply "isc keys rot" "rotate-master "
	expect_reply "isc burst --wa" "--wait --wait-for-daemon "
	expect_reply "isc help ca" "cancel catalog "
	# Experiment ids from the API for the commands whose usage takes an ID.
	expect_reply "isc --home $home status " "$ids"
	expect_reply "isc --home $home cancel exp_" "$ids"
	first=${ids%% *}
	expect_reply "isc --home $home logs ${first:0:12}" "$(tr ' ' '\n' <<<"$ids" | grep "^${first:0:12}" | tr '\n' ' ')"
	# Every command of isc --help is offered after "isc ", nothing else but help.
	all=$( { "$ISC_BIN/isc" --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 { print $1 }'; echo help; } | sort | tr '\n' ' ')
	expect_reply "isc " "$all"
	iscd_api_stop
	# No iscd: the ids are quietly none, at once.
	start=$(date +%s%N)
	expect_reply "isc --home $home status " ""
	check "no iscd: the completion answers within 2 s" test $((($(date +%s%N) - start) / 1000000)) -lt 2000
fi

# ---- man: the pages name every command and option of the programs (scripts/man-check).
if want man; then
	check "man-check: isc.1 and iscd.8 name every command and option" "$repo/scripts/man-check" "$ISC_BIN"
	# A command missing from isc.1 is drift: the check fails on it.
	mkdir -p "$dir/mc" && cp -r "$repo/scripts" "$repo/docs" "$dir/mc/"
	sed -i '/^\*\*audit\*\*$/,+2d' "$dir/mc/docs/man/isc.1.md"
	expect_exit 1 "man-check fails when isc.1 lacks a command" "$dir/mc/scripts/man-check" "$ISC_BIN"
fi

finish package
