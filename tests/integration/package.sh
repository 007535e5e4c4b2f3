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
	# still be on its way to the listener: read after a moment.
	sleep 1
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
		test "$after" -ge $((during + 2))
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

# ---- install: `make install` of the build under test; its programs find the catalog and
# the pages with no build tree: once beside the programs (DESTDIR, PREFIX=/usr), once only
# by the compiled-in DATADIR (the programs copied elsewhere). From a cwd outside the tree.
build=${ISC_BIN%/bin}
build=${build#"$repo"/}
san=0
ldd "$ISC_BIN/iscd" | grep -q libasan && san=1
# installed_serves HOME ISCD ISC: init loads the shipped catalog, iscd serves the pages.
# Each home on its own SQLite store even in the PostgreSQL run: what is checked is where
# the files are found, and a second home joining one database loads no catalog again.
installed_serves() {
	local home=$1 iscd=$2 isc=$3 port
	(cd / && env -u ISC_STORE_URL "$isc" --home "$home" init >"$home.init" 2>&1) || return 1
	grep -qE '^loaded [0-9]+ shapes' "$home.init" || return 1
	echo 'api_listen = "127.0.0.1:0"' >>"$home/config.toml"
	(cd / && exec env -u ISC_STORE_URL "$iscd" --home "$home" --api-only --interval-ms 100 2>"$home.log") &
	local p=$!
	pids+=($p)
	wait_for 30 test -s "$home/run/api.sock.tcp" || return 1
	port=$(sed -E 's#.*:([0-9]+)$#\1#' "$home/run/api.sock.tcp")
	curl -sf "http://127.0.0.1:$port/" -o "$home.index" && grep -qi '<html' "$home.index"
	local rc=$?
	kill -TERM "$p" && wait "$p"
	return $rc
}
if want install || want unit; then
	make -s -C "$repo" SAN=$san BUILD="$build" install DESTDIR="$dir/root" PREFIX=/usr \
		>"$dir/install.log" 2>&1
	check "make install DESTDIR=... PREFIX=/usr" test $? -eq 0
	make -s -C "$repo" SAN=$san BUILD="$build" install PREFIX="$dir/prefix" >>"$dir/install.log" 2>&1
	check "make install PREFIX=$dir/prefix" test $? -eq 0
fi
if want install; then
	r=$dir/root
	for f in usr/bin/isc usr/bin/iscd usr/share/isc/shapes/aws.csv usr/share/isc/shapes/gcp.csv \
		usr/share/isc/shapes/oci.csv usr/share/isc/web/index.html usr/share/man/man1/isc.1 \
		usr/share/man/man8/iscd.8 usr/share/man/man5/isc-config.5 usr/share/man/man5/isc-launch.5 \
		usr/share/bash-completion/completions/isc usr/share/doc/isc-broker/README.md \
		usr/share/doc/isc-broker/docs/config.md usr/lib/systemd/system/iscd.service \
		usr/lib/sysusers.d/isc-broker.conf; do
		check "installed: /$f" test -s "$r/$f"
	done
	check "the installed unit runs /usr/bin/iscd" grep -qx 'ExecStart=/usr/bin/iscd --home /var/lib/isc' \
		"$r/usr/lib/systemd/system/iscd.service"
	check "the installed programs have DATADIR /usr/share/isc compiled in" \
		grep -q /usr/share/isc "$r/usr/bin/iscd"
	check "installed under DESTDIR: the catalog is loaded, the pages are served" \
		installed_serves "$dir/h-destdir" "$r/usr/bin/iscd" "$r/usr/bin/isc"
	# Only the compiled-in DATADIR can find them: nothing beside the copied programs.
	mkdir -p "$dir/elsewhere/bin" && cp "$dir/prefix/bin/isc" "$dir/prefix/bin/iscd" "$dir/elsewhere/bin/"
	check "programs moved away: the catalog and the pages from the compiled-in DATADIR" \
		installed_serves "$dir/h-datadir" "$dir/elsewhere/bin/iscd" "$dir/elsewhere/bin/isc"
	check "iscd logged where the pages are ($dir/prefix/share/isc/web)" \
		grep -q "from $dir/prefix/share/isc/web" "$dir/h-datadir.log"
	check "the man pages render (man -l)" bash -c "for p in '$r'/usr/share/man/man*/*; do man -l -P cat \"\$p\" >/dev/null 2>&1 || exit 1; done"
	check "isc-config(5) carries docs/config.md's keys" bash -c \
		"man -l -P cat '$r/usr/share/man/man5/isc-config.5' 2>/dev/null | grep -q tick_interval_ms"
fi

# The build under test gets its default DATADIR back (the installs above relinked it).
if want install || want unit; then
	make -s -C "$repo" SAN=$san BUILD="$build" programs >>"$dir/install.log" 2>&1
fi

# ---- unit: systemd-analyze verify on the unit installed with the programs at its paths.
if want unit; then
	unit=$dir/prefix/lib/systemd/system/iscd.service
	check "the unit's ExecStart is the installed iscd" grep -qx "ExecStart=$dir/prefix/bin/iscd --home /var/lib/isc" "$unit"
	# verify runs `man` for Documentation=man:...: the installed pages answer.
	MANPATH=$dir/prefix/share/man systemd-analyze verify "$unit" >"$dir/verify.log" 2>&1
	check "systemd-analyze verify iscd.service" test $? -eq 0
	[ -s "$dir/verify.log" ] && cat "$dir/verify.log" >&2
	check "Type=notify with a watchdog" bash -c "grep -qx Type=notify '$unit' && grep -q '^WatchdogSec=' '$unit'"
	check "hardened: empty CapabilityBoundingSet, ProtectSystem=strict, NoNewPrivileges, PrivateTmp" \
		bash -c "grep -qx CapabilityBoundingSet= '$unit' && grep -qx ProtectSystem=strict '$unit' &&
		grep -qx NoNewPrivileges=yes '$unit' && grep -qx PrivateTmp=yes '$unit' && grep -qx User=isc '$unit'"
	# A unit that names a program that is not there fails verify: the check can fail.
	mkdir -p "$dir/broken"
	sed "s#$dir/prefix/bin/iscd#$dir/prefix/bin/no-such-iscd#" "$unit" >"$dir/broken/iscd.service"
	MANPATH=$dir/prefix/share/man systemd-analyze verify "$dir/broken/iscd.service" >/dev/null 2>&1
	check "verify refuses a unit whose iscd is missing" test $? -ne 0
fi

# ---- deb: `make deb` (a release build of the committed tree, -j2), lintian, the package's
# files where the FHS puts them, its programs run from a scratch root (dpkg-deb -x).
if want deb; then
	start=$(date +%s)
	make -s -C "$repo" deb >"$dir/deb.log" 2>&1
	rc=$?
	echo "package: make deb took $(($(date +%s) - start)) s" >&2
	check "make deb builds the package" test $rc -eq 0
	[ $rc -eq 0 ] || tail -n 20 "$dir/deb.log" >&2
	deb=$(ls "$repo"/build/release/deb/isc-broker_*_amd64.deb 2>/dev/null | head -1)
	check "the .deb is in build/release/deb/" test -s "$deb"
	lintian --tag-display-limit 0 "$repo"/build/release/deb/isc-broker_*_amd64.changes >"$dir/lintian.log" 2>&1
	check "lintian reports no error" bash -c "! grep -q '^E: ' '$dir/lintian.log'"
	grep '^E: ' "$dir/lintian.log" >&2
	echo "package: lintian: $(grep -c '^E: ' "$dir/lintian.log") errors, $(grep -c '^W: ' "$dir/lintian.log") warnings (overridden, each explained: debian/isc-broker.lintian-overrides)" >&2
	sr=$dir/scratch
	mkdir -p "$sr" && dpkg-deb -x "$deb" "$sr"
	check "the packaged iscd --version runs" bash -c "'$sr/usr/bin/iscd' --version | grep -q '^iscd [0-9]'"
	check "the packaged isc --help runs" bash -c "'$sr/usr/bin/isc' --help | grep -q '^usage: isc'"
	for f in usr/bin/isc usr/bin/iscd lib/systemd/system/iscd.service usr/lib/sysusers.d/isc-broker.conf \
		usr/share/man/man1/isc.1.gz usr/share/man/man8/iscd.8.gz usr/share/man/man5/isc-config.5.gz \
		usr/share/man/man5/isc-launch.5.gz usr/share/bash-completion/completions/isc \
		usr/share/doc/isc-broker/copyright usr/share/doc/isc-broker/README.Debian \
		usr/share/isc/shapes/aws.csv usr/share/isc/web/index.html; do
		check "packaged: /$f" test -s "$sr/$f"
	done
	check "packaged: nothing in /usr/local, /etc, /var, /opt or /home" \
		bash -c "! dpkg-deb -c '$deb' | awk '{print \$6}' | grep -qE '^\./(usr/local|etc|var|opt|home)/'"
	check "packaged: every file under /usr or /lib (the unit)" \
		bash -c "! dpkg-deb -c '$deb' | awk '{print \$6}' | grep -vE '^\./(\$|usr/|lib/)'"
	check "the package makes the user isc (sysusers) and starts the service (postinst)" \
		bash -c "dpkg-deb -I '$deb' postinst | grep -q 'systemd-sysusers.*isc-broker.conf' &&
		dpkg-deb -I '$deb' postinst | grep -q \"deb-systemd-invoke .* 'iscd.service'\""
	check "the packaged isc finds its catalog in the scratch root" bash -c \
		"cd / && env -u ISC_STORE_URL '$sr/usr/bin/isc' --home '$dir/h-deb' init | grep -qE '^loaded [0-9]+ shapes'"
	check "the packaged man pages render" bash -c "for p in '$sr'/usr/share/man/man*/*; do man -l -P cat \"\$p\" >/dev/null 2>&1 || exit 1; done"
	# The packaged unit, its programs' paths pointed into the scratch root.
	mkdir -p "$dir/debunit"
	sed "s#/usr/bin/#$sr/usr/bin/#g" "$sr/lib/systemd/system/iscd.service" >"$dir/debunit/iscd.service"
	MANPATH=$sr/usr/share/man systemd-analyze verify "$dir/debunit/iscd.service" >"$dir/verify-deb.log" 2>&1
	check "systemd-analyze verify on the packaged unit" test $? -eq 0
	[ -s "$dir/verify-deb.log" ] && cat "$dir/verify-deb.log" >&2
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
	# isc's own wait for a missing iscd is bounded by the completion's 2 s timeout; 1 s more
	# for bash and isc to start on a loaded machine.
	check "no iscd: the completion answers within 3 s" test $((($(date +%s%N) - start) / 1000000)) -lt 3000
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
