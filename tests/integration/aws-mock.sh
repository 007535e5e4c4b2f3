#!/usr/bin/env bash
# The AWS driver against the mock cloud (tests/mocks/mockcloud, which checks
# every signature with botocore): starts the mock on loopback, points
# MOCKCLOUD_URL at it and runs the mock-only cases of test_aws_driver
# (4-node spot gang, describe, interruption notice then termination,
# terminate; lost RunInstances reply without duplicates; throttling;
# capacity; bad secret -> auth after exactly one call; a 2-node p4d gang whose
# us-east-1a has no capacity: that zone's placement group deleted, us-east-1b's holding
# both nodes with 4 EFA interfaces each, and deleted by describe after the teardown).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
: "${ISC_TESTS:=$PWD/build/asan/tests}"

dir=$(mktemp -d /tmp/isc-aws-mock.XXXXXX)
export MOCKCLOUD_AWS_SECRET_ACCESS_KEY=mock-secret-key-do-not-use-in-prod
check "mockcloud started" start_mockcloud "$dir"

# The driver cases themselves (cmocka; skipped there without MOCKCLOUD_URL).
out=$("$ISC_TESTS/test_aws_driver" 2>&1)
rc=$?
check "test_aws_driver against mockcloud (exit $rc)" test "$rc" -eq 0
check "no mockcloud case was skipped" test -z "$(grep -F 'SKIPPED' <<<"$out")"
[ "$rc" -ne 0 ] && echo "$out" | tail -n 40 >&2

# isc check aws: identity, then a bad secret, then an unreachable endpoint. The credentials
# proved are iscd's (GET /v1/check/aws): each case's variables go to the iscd it starts.
if [ -x "${ISC_BIN:-}/isc" ]; then
	home="$dir/home"
	"$ISC_BIN/isc" --home "$home" init >/dev/null
	with_iscd_log=$dir/iscd.log
	export AWS_ACCESS_KEY_ID=AKIDMOCKCLOUD000001 AWS_REGION=us-east-1
	AWS_SECRET_ACCESS_KEY=$MOCKCLOUD_AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL=$MOCKCLOUD_URL \
		with_iscd "$home" expect_exit 0 "isc check aws" "$ISC_BIN/isc" --home "$home" check aws
	AWS_SECRET_ACCESS_KEY=wrong AWS_ENDPOINT_URL=$MOCKCLOUD_URL \
		with_iscd "$home" expect_stderr "AWS rejected the credentials" "$ISC_BIN/isc" --home "$home" check aws
	AWS_SECRET_ACCESS_KEY=wrong AWS_ENDPOINT_URL=http://127.0.0.1:1 \
		with_iscd "$home" expect_stderr "cannot reach http://127.0.0.1:1" "$ISC_BIN/isc" --home "$home" check aws
	check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
fi
finish aws-mock
