#!/usr/bin/env bash
# make demo, run by the test suite so it cannot silently break (it once called an
# API command before its iscd was up): the demo script itself, with the build under
# test, must exit 0, complete its three bursts on three clouds, charge all three and
# leave no instance running.
. "$(dirname "$0")/lib.sh"

out=$(mktemp /tmp/isc-demo-test.XXXXXX)
trap 'rm -f "$out"' EXIT
root=$(cd "$(dirname "$0")/../.." && pwd)

ISC_BIN=$ISC_BIN timeout 300 "$root/tests/demo" >"$out" 2>&1
rc=$?
check "make demo's script exits 0" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -n 30 "$out" >&2
check "the three clouds' credentials are checked through iscd" bash -c "[ \$(grep -Ec '^(aws|gcp|oci): credentials accepted' '$out') -eq 3 ]"
check "the failover burst completes on GCP" grep -q 'completed  *gcp-us-central1' "$out"
check "the AWS and OCI bursts complete" bash -c "[ \$(grep -Ec '^exp_[0-9a-f]{16}: completed' '$out') -ge 3 ]"
check "spend has all three providers" bash -c "grep -q '^aws ' '$out' && grep -q '^gcp ' '$out' && grep -q '^oci ' '$out'"
check "the GCP gang is shown in its compact placement policy" grep -q 'compact placement policy: isc-compact-' "$out"
check "the AWS gang is shown in its cluster placement group" grep -q 'placement group: isc-' "$out"
check "each node's fabric check is shown" grep -q 'fabric' "$out"
check "no instance is left running" grep -q ', 0 still live' "$out"
check "no ANSI codes in the file (bold headings are for a terminal)" bash -c "! grep -q \$'\\e' '$out'"
check "no AddressSanitizer report" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$out'"

finish demo
