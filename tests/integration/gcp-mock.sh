#!/usr/bin/env bash
# The GCP driver against the mock cloud's Compute Engine and OAuth2 token endpoint
# (tests/mocks/mockcloud_lib/gce.py, which verifies every JWT with python3-cryptography):
# starts the mock on loopback and runs the mock-only cases of test_gcp_driver (4-node
# spot gang up and described, one node preempted and seen as interrupted, a lost
# bulkInsert reply replayed with the same requestId, zone failover on stockout, quota,
# a wrong key refused after one token call, a revoked token refreshed once; every
# multi-node G2 gang with its compact placement policy, deleted after its nodes), then
# `isc check gcp` with the mock's key file, a wrong key and an unreachable endpoint.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
: "${ISC_TESTS:=$PWD/build/asan/tests}"

dir=$(mktemp -d /tmp/isc-gcp-mock.XXXXXX)
check "mockcloud started" start_mockcloud "$dir"
export MOCKCLOUD_GCP_KEY="$dir/state/gcp-service-account.json"
check "the mock wrote a service-account key file" test -s "$MOCKCLOUD_GCP_KEY"

out=$("$ISC_TESTS/test_gcp_driver" 2>&1)
rc=$?
check "test_gcp_driver against mockcloud (exit $rc)" test "$rc" -eq 0
check "no mockcloud case was skipped" test -z "$(grep -F 'SKIPPED' <<<"$out")"
[ "$rc" -ne 0 ] && echo "$out" | tail -n 40 >&2

# isc check gcp: the key file named by the variable gcloud and the client libraries use,
# the compute endpoint by gcloud's override variable.
if [ -x "${ISC_BIN:-}/isc" ]; then
	home="$dir/home"
	"$ISC_BIN/isc" --home "$home" init >/dev/null
	with_iscd_log=$dir/iscd.log
	export CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE="$MOCKCLOUD_URL/compute/v1/"
	# The credentials proved are iscd's (GET /v1/check/gcp): each case starts its own iscd.
	out=$(GOOGLE_APPLICATION_CREDENTIALS=$MOCKCLOUD_GCP_KEY with_iscd "$home" "$ISC_BIN/isc" --home "$home" check gcp 2>&1)
	check "isc check gcp accepted" grep -q "gcp: credentials accepted" <<<"$out"
	check "isc check gcp prints the project" grep -q "account: isc-mock-project" <<<"$out"
	check "isc check gcp prints the service account" \
		grep -q "principal: isc-broker@isc-mock-project.iam.gserviceaccount.com" <<<"$out"
	# The same email and token_uri with another private key: refused by the signature check.
	/usr/bin/python3 - "$MOCKCLOUD_GCP_KEY" tests/vectors/gcp/service-account/google-auth-tests-privatekey.pem \
		"$dir/wrong-key.json" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))
k["private_key"] = open(sys.argv[2]).read()
k.pop("private_key_id")
json.dump(k, open(sys.argv[3], "w"))
PY
	GOOGLE_APPLICATION_CREDENTIALS=$dir/wrong-key.json \
		with_iscd "$home" expect_stderr "gcp rejected the credentials: token exchange: invalid_grant (HTTP 400)" \
		"$ISC_BIN/isc" --home "$home" check gcp
	check "the refused key's PEM is in no message" \
		test -z "$(GOOGLE_APPLICATION_CREDENTIALS=$dir/wrong-key.json with_iscd "$home" "$ISC_BIN/isc" --home "$home" check gcp 2>&1 | grep -F 'PRIVATE KEY')"
	GOOGLE_APPLICATION_CREDENTIALS=$dir/nope.json \
		with_iscd "$home" expect_stderr "cannot read the GCP key file $dir/nope.json" "$ISC_BIN/isc" --home "$home" check gcp
	GOOGLE_APPLICATION_CREDENTIALS=$MOCKCLOUD_GCP_KEY CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=http://127.0.0.1:1/compute/v1/ \
		with_iscd "$home" expect_stderr "cannot reach http://127.0.0.1:1/compute/v1/projects/isc-mock-project" \
		"$ISC_BIN/isc" --home "$home" check gcp
	check "the refused key's PEM is not in iscd's log" bash -c "! grep -qF 'PRIVATE KEY' '$dir/iscd.log'"
	check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
fi
finish gcp-mock
