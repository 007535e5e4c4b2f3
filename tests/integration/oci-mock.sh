#!/usr/bin/env bash
# The OCI driver against the mock cloud (tests/mocks/mockcloud, which checks every
# signature with python3-cryptography against the API key it generated): starts the
# mock on loopback and runs the mock-only cases of test_oci (identity; a skewed clock
# and a tampered body refused as auth; a subnet without the training rule refused
# with the rule to add; an AD with room for 2 of 3 nodes rolled back and the next AD
# used, then replayed without new nodes; a lost LaunchInstance reply without a
# duplicate; a 3-node preemptible gang described, one node preempted and reported; an
# RDMA gang with a compute cluster per AD, AD-1's deleted after its rollback, AD-2's after
# the teardown),
# then `isc check oci`.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
: "${ISC_TESTS:=$PWD/build/asan/tests}"

dir=$(mktemp -d /tmp/isc-oci-mock.XXXXXX)
start_mockcloud "$dir"
check "mockcloud started" test -n "${MOCKCLOUD_URL:-}"
export OCI_CLI_CONFIG_FILE="$dir/state/oci/config"
check "the mock wrote an OCI config file (mode 600)" test "$(stat -c %a "$OCI_CLI_CONFIG_FILE")" = 600

out=$("$ISC_TESTS/test_oci" 2>&1)
rc=$?
check "test_oci against mockcloud (exit $rc)" test "$rc" -eq 0
check "no mockcloud case was skipped" test -z "$(grep -F 'SKIPPED' <<<"$out")"
[ "$rc" -ne 0 ] && echo "$out" | tail -n 40 >&2

# isc check oci: tenancy and user; then a wrong key; then an unreachable endpoint.
if [ -x "${ISC_BIN:-}/isc" ]; then
	home="$dir/home"
	mkdir -p "$home"
	cat >"$home/config.toml" <<CONF
broker_id = "isc-oci-mock"
[providers.oci]
regions = ["us-ashburn-1"]
endpoint = "$MOCKCLOUD_URL/oci/{region}"
CONF
	"$ISC_BIN/isc" --home "$home" init >/dev/null # keeps that config.toml
	with_iscd_log=$dir/iscd.log
	# The credentials proved are iscd's (GET /v1/check/oci): each case starts its own iscd.
	out=$(with_iscd "$home" "$ISC_BIN/isc" --home "$home" check oci 2>&1)
	check "isc check oci prints the tenancy (account)" grep -q '^account: ocid1.tenancy.oc1..' <<<"$out"
	check "isc check oci prints the user (principal)" grep -q '^principal: ocid1.user.oc1..' <<<"$out"
	/usr/bin/python3 -c '
import sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
open(sys.argv[1], "wb").write(k.private_bytes(serialization.Encoding.PEM,
    serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))' "$dir/other.pem"
	sed "s|^key_file=.*|key_file=$dir/other.pem|" "$OCI_CLI_CONFIG_FILE" >"$dir/other.config"
	OCI_CLI_CONFIG_FILE="$dir/other.config" \
		with_iscd "$home" expect_stderr "oci rejected the credentials" "$ISC_BIN/isc" --home "$home" check oci
	OCI_CLI_PROFILE=missing with_iscd "$home" expect_stderr "no profile [missing]" "$ISC_BIN/isc" --home "$home" check oci
	sed -i "s|$MOCKCLOUD_URL|http://127.0.0.1:1|" "$home/config.toml"
	with_iscd "$home" expect_stderr "cannot reach http://127.0.0.1:1" "$ISC_BIN/isc" --home "$home" check oci
	check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
fi
finish oci-mock
