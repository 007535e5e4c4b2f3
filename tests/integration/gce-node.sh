#!/usr/bin/env bash
# Mock fidelity: Google's official Node client (@googleapis/compute, installed from npm into
# tests/gce-node with its package-lock.json) drives the mock cloud's Compute Engine and
# token endpoint (tests/gce-node/fidelity.mjs), and the cloudbilling v1 module of Google's
# `googleapis` bundle drives its Cloud Billing Catalog API (tests/gce-node/billing.mjs:
# services.skus.list paging, Money, error shapes). When Node or the npm registry is out of
# reach the mock goes unchecked, so the suite fails and says why (`make test-deps` installs the
# client); ISC_ALLOW_SKIP=1 makes it say it skipped and pass instead.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
here=tests/gce-node

skip() {
	if [ "${ISC_ALLOW_SKIP:-0}" = 1 ]; then
		echo "gce-node: skipped (ISC_ALLOW_SKIP=1): $*"
		echo "gce-node: 0 passed, 0 failed"
		exit 0
	fi
	echo "FAIL: @googleapis/compute cannot run, so the mock is unchecked: $* (make test-deps" \
		"installs it; ISC_ALLOW_SKIP=1 skips)" >&2
	echo "gce-node: 0 passed, 1 failed"
	exit 1
}

command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
if ! (cd "$here" && node -e 'Promise.all([import("@googleapis/compute"), import("googleapis")])' >/dev/null 2>&1); then
	if ! timeout 30 npm ping >/dev/null 2>&1; then
		skip "the npm registry cannot be reached (npm ping failed), so @googleapis/compute cannot be installed"
	fi
	out=$(cd "$here" && timeout 300 npm ci --no-audit --no-fund 2>&1)
	rc=$?
	if [ "$rc" -ne 0 ]; then
		if grep -qE 'ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|network' <<<"$out"; then
			skip "npm ci could not reach the registry: $(tail -n 1 <<<"$out")"
		fi
		echo "$out" | tail -n 20 >&2
	fi
	check "npm ci installs @googleapis/compute and googleapis from package-lock.json" test "$rc" -eq 0
	[ "$rc" -eq 0 ] || { finish gce-node; exit 1; }
fi

dir=$(mktemp -d /tmp/isc-gce-node.XXXXXX)
check "mockcloud started" start_mockcloud "$dir"

out=$(cd "$here" && MOCK="$MOCKCLOUD_URL" KEY="$dir/state/gcp-service-account.json" \
	timeout 300 node fidelity.mjs 2>&1)
rc=$?
echo "$out" | grep -v '^gce-node: ' >&2
line=$(grep -E '^gce-node: [0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
p=$(sed -E 's/^gce-node: ([0-9]+) passed.*/\1/' <<<"${line:-gce-node: 0 passed, 1 failed}")
f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"${line:-gce-node: 0 passed, 1 failed}")
passed=$((passed + p))
failed=$((failed + f))
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1))

out=$(cd "$here" && MOCK="$MOCKCLOUD_URL" BILLING_KEY="${MOCKCLOUD_GCP_BILLING_KEY:-mock-billing-api-key}" \
	timeout 300 node billing.mjs 2>&1)
rc=$?
echo "$out" | grep -v '^gce-billing: ' >&2
line=$(grep -E '^gce-billing: [0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
p=$(sed -E 's/^gce-billing: ([0-9]+) passed.*/\1/' <<<"${line:-gce-billing: 0 passed, 1 failed}")
f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"${line:-gce-billing: 0 passed, 1 failed}")
passed=$((passed + p))
failed=$((failed + f))
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1))
finish gce-node
