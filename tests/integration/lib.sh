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
