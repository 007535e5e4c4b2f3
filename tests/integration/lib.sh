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
