#!/usr/bin/env bash
# The Control Plane pages in a real headless browser (docs/control-plane.md):
# Debian's chromium driven through Debian's chromedriver (W3C WebDriver over
# loopback HTTP, tests/browser/webdriver.py). A sandbox (mock cloud, real sshd
# nodes) runs the experiments; tests/browser/control-plane.py owns iscd and the
# scenarios: sign-in, Burst (rank, copy a shape id), Experiments (enqueued to
# completed, events, rank 0's log, cancel with confirmation, a markup-named
# experiment shown as text), Projects, Members, Datasets (added from the page against a
# mock S3 and followed to Available), Spend (chart totals = API),
# a member's and another organisation's view. Screenshots of each page at
# 1440x900 go to $CONTROL_PLANE_SHOTS (default: a fresh /tmp folder, printed).
#
# Skipped (and says so) only when chromium or chromedriver is missing. The users
# of the scenarios are OS users (a token is made by its user, over the socket),
# created with useradd like api-isolation.sh, so the suite runs as root.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
	echo "control-plane: skipped: /usr/bin/chromium or /usr/bin/chromedriver is missing (apt-get install chromium chromium-driver)"
	finish control-plane
	exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
	echo "FAIL: control-plane needs root, useradd and runuser to make its users' OS accounts" >&2
	failed=1
	finish control-plane
	exit 1
fi

dir=$(mktemp -d /tmp/isc-cp.XXXXXX)
chmod 0711 "$dir" # the scenario's OS users reach $dir/home/run/api.sock by name
s3_pid=
cleanup() {
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd --no-s3 "$dir" >/dev/null || exit 1
. "$dir/env"
# A mock S3 for the Datasets page that knows only a dataset owner's keys (not the
# broker's): a dataset added from the page is cached with the keys typed into it.
export CP_S3_KEY_ID=AKIDCONTROLPLANE0001
export CP_S3_SECRET=cp-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$dir/s3"
MOCKS3_AWS_ACCESS_KEY_ID=$CP_S3_KEY_ID MOCKS3_AWS_SECRET_ACCESS_KEY=$CP_S3_SECRET \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3/port" --state-dir "$dir/s3" 2>"$dir/s3.log" &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3/port" ] && break; sleep 0.1; done
export CP_S3_URL="http://127.0.0.1:$(cat "$dir/s3/port")"
export AWS_ENDPOINT_URL_S3=$CP_S3_URL

SANDBOX_DIR=$dir /usr/bin/python3 "$repo/tests/browser/control-plane.py" 2>&1 | tee "$dir/browser.log"
line=$(grep -E '^control-plane: [0-9]+ passed, [0-9]+ failed' "$dir/browser.log" | tail -n 1)
if [ -n "$line" ]; then
	passed=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")
	failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
else
	echo "FAIL: the browser scenarios did not finish" >&2
	failed=1
fi
finish control-plane
