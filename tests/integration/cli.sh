#!/usr/bin/env bash
# The isc and iscd command lines: usage errors exit 2, failures exit 1, the
# store is created once with safe modes, isc says when iscd is not running and
# how to start it, and iscd refuses a second instance.
. "$(dirname "$0")/lib.sh"

home=$(mktemp -d /tmp/isc-cli.XXXXXX)/home
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$(dirname "$home")"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

expect_exit 2 "no command is usage" isc
expect_exit 2 "unknown command" isc frobnicate
expect_exit 0 "global --help" isc --help
for c in init org project experiments; do
	expect_exit 0 "$c --help" isc "$c" --help
done
expect_exit 1 "experiments before init names the fix" isc experiments
expect_stderr "run 'isc init'" isc experiments
expect_exit 0 "init" isc init
expect_exit 0 "init again changes nothing" isc init
check "home is 0700" test "$(stat -c %a "$home")" = 700
check "database is 0600" test "$(stat -c %a "$home/isc.db")" = 600
# After init every command goes through iscd's API: without iscd, say so (exit 1, within 2 s).
start=$(date +%s%N)
expect_exit 1 "experiments without iscd" isc experiments
check "said within 2 s" test $((($(date +%s%N) - start) / 1000000)) -lt 2000
expect_stderr "iscd is not running" isc experiments
expect_stderr "start it with: iscd --home $home" isc org list
iscd_api "$home" "$home/../iscd-api.log"
check "the socket is reachable by every user (0666)" test "$(stat -c %a "$home/run/api.sock")" = 666
check "the run folder is 0755" test "$(stat -c %a "$home/run")" = 755
check "the home can be traversed, not listed, by others (0711)" test "$(stat -c %a "$home")" = 711
check "the database stays 0600 under iscd" test "$(stat -c %a "$home/isc.db")" = 600
expect_exit 0 "a request through the API" isc org list
check "the home stays 0711 after requests open the store" test "$(stat -c %a "$home")" = 711
expect_exit 2 "init takes no arguments" isc init extra
expect_exit 2 "org needs a subcommand" isc org
expect_exit 2 "org add needs a name" isc org add
expect_exit 2 "org name with a space" isc org add "a b"
expect_exit 0 "org add" isc org add acme
expect_exit 1 "duplicate org" isc org add acme
expect_stderr "exists already" isc org add acme
expect_exit 2 "project add needs --org" isc project add vision
expect_exit 2 "project add unknown flag" isc project add --org acme --bogus vision
expect_exit 1 "project add unknown org" isc project add --org nope vision
expect_stderr "no organisation named 'nope'" isc project add --org nope vision
id=$(isc project add --org acme vision)
check "project add prints an id" grep -Eq '^prj_[0-9a-f]{16}$' <<<"$id"
check "project add --json" bash -c "'$ISC_BIN/isc' --home '$home' project add --org acme nlp --json | grep -q '\"name\": \"nlp\"'"
check "project list shows it" bash -c "'$ISC_BIN/isc' --home '$home' project list --org acme | grep -q '$id'"
expect_exit 1 "project list unknown org" isc project list --org nope
check "experiments --json is [] when empty" test "$(isc experiments --json)" = "[]"
check "experiments table header" bash -c "'$ISC_BIN/isc' --home '$home' experiments | head -1 | grep -q 'ID.*Name.*NNodes.*Output Path.*Status'"

iscd_api_stop
check "iscd removed its socket on exit" test ! -e "$home/run/api.sock"

# iscd: --once, bad flags, and one daemon per store.
expect_exit 0 "iscd --once" "$ISC_BIN/iscd" --home "$home" --once
expect_exit 2 "iscd bad interval" "$ISC_BIN/iscd" --home "$home" --interval-ms abc
expect_exit 2 "iscd unknown flag" "$ISC_BIN/iscd" --home "$home" --bogus
"$ISC_BIN/iscd" --home "$home" --interval-ms 100 2>"$home/../iscd.log" &
pid=$!
sleep 0.5
expect_exit 1 "second iscd refused" "$ISC_BIN/iscd" --home "$home" --once
expect_stderr "already running" "$ISC_BIN/iscd" --home "$home" --once
kill -TERM $pid
wait $pid
check "iscd exits 0 on SIGTERM" test $? -eq 0
check "iscd logged its stop" grep -q "stopping" "$home/../iscd.log"

# The CLI speaks only the API (issue 47): no cli/ file reaches a store/ header, even
# through another module's header, except isc init (cmd_admin.c) and isc store copy
# (cmd_store.c), which open a store themselves. Names each file and header at fault.
cli_store_deps() {
	local repo pkgs f m
	repo=$(cd "$(dirname "$0")/../.." && pwd)
	pkgs=$(sed -n 's/^PKGS *:= *//p' "$repo/Makefile")
	for f in "$repo"/cli/*.c "$repo"/cli/lib/*.c; do
		f=${f#"$repo"/}
		case $f in cli/cmd_admin.c | cli/cmd_store.c) continue ;; esac
		m=$(cd "$repo" && ${CC:-cc} -MM -I. -D_GNU_SOURCE $(pkg-config --cflags $pkgs) "$f") ||
			{ echo "$f: cc -MM failed"; continue; }
		tr ' \\' '\n\n' <<<"$m" | grep '^store/' | sed "s|^|$f: |"
	done
}
deps=$(cli_store_deps)
[ -z "$deps" ] || echo "cli/ reaches store/: $deps" >&2
check "cli/ reaches store/ headers only from cmd_admin.c and cmd_store.c" test -z "$deps"

finish cli
