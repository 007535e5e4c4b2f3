#!/usr/bin/env bash
# Live prices against the mock cloud: its spot prices change when told
# (POST /_mock/spot_prices); `isc catalog refresh` reads them through EC2
# DescribeSpotPriceHistory, the ranking moves, `isc shapes` shows each price's age
# and source, and a burst placed after the change is held and charged at the new
# price. Then iscd's own schedule prices the candidates of queued work.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-prices.XXXXXX)
cleanup() {
	iscd_api_stop
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_PROVIDERS="aws gcp" "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
isc() { "$ISC_BIN/isc" "$@"; }
mock() { curl -s "$MOCKCLOUD_URL/_mock/$1" "${@:2}"; }
py() { /usr/bin/python3 "$@"; }
# set_price TYPE PRICE [ZONES...]: the mock's spot price of TYPE in every us-east-1 zone.
set_price() {
	local it=$1 price=$2 z
	for z in us-east-1a us-east-1b us-east-1c; do
		mock spot_prices -X POST -d "{\"instance_type\":\"$it\",\"zone\":\"$z\",\"price\":\"$price\"}" >/dev/null
	done
}
# first_shape: the cheapest spot shape for 2 GPUs among g4dn.xlarge and g5.xlarge in us-east-1.
ranked() {
	isc shapes --gpus 2 --region us-east-1 --market spot --gpu-type t4,a10g --json |
		py -c 'import json,sys; r=[s for s in json.load(sys.stdin) if s["instance_type"] in ("g4dn.xlarge","g5.xlarge")]; print(r[0]["instance_type"], r[0]["node_price_micros"], r[0]["price_source"], r[0]["price_age_s"], r[0]["price_stale"])'
}

# isc shapes asks iscd; an iscd for the API until the burst part starts the ticking one.
iscd_api "$ISC_HOME" "$dir/iscd.log" || exit 1
check "before any refresh the prices are the catalog's, and marked stale" bash -c "'$ISC_BIN/isc' shapes --gpus 2 --region us-east-1 --limit 3 2>&1 | grep -q 'catalog' && '$ISC_BIN/isc' shapes --gpus 2 --region us-east-1 --limit 3 2>&1 >/dev/null | grep -q 'older than price_refresh_ms'"

set_price g4dn.xlarge 0.05
set_price g5.xlarge 0.90
# One zone dearer: a shape's price is the highest of its zones (the cloud may pick any).
mock spot_prices -X POST -d '{"instance_type":"g4dn.xlarge","zone":"us-east-1c","price":"0.07"}' >/dev/null
check "isc catalog refresh reads live prices" bash -c "'$ISC_BIN/isc' catalog refresh --provider aws | grep -q 'priced live'"
read -r it price src age stale <<<"$(ranked)"
check "g4dn.xlarge ranks first at its highest zone price (0.07)" test "$it $price" = "g4dn.xlarge 70000"
check "its price is live, fresh and not stale" test "$src $stale" = "aws-spot-history False"
check "its age is under a minute" test "$age" -lt 60
check "the table shows the age and the source" bash -c "'$ISC_BIN/isc' shapes --gpus 2 --region us-east-1 --market spot --limit 5 | grep g4dn.xlarge-spot | grep -qE ' [0-9]+s aws-spot-history'"

# The price moves: the ranking follows.
set_price g4dn.xlarge 2.00
check "a second refresh moves a price" bash -c "'$ISC_BIN/isc' catalog refresh --json | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"changed\"] >= 1 else 1)'"
read -r it price src age stale <<<"$(ranked)"
check "g5.xlarge now ranks first at 0.90" test "$it $price" = "g5.xlarge 900000"

# A burst placed now is held and charged at the new price.
cat >"$dir/job.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "priced"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot", "aws-us-east-1-g5.xlarge-spot"]
command = 'sleep 2'
ISC
# g4dn.xlarge (first in the list) has no capacity now, so the list's second shape is used.
mock capacity -X POST -d '{"instance_type":"g4dn.xlarge","available":0}' >/dev/null
iscd_api_stop
"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
id=$(isc burst "$dir/job.isc" | grep -Eo 'exp_[0-9a-f]{16}')
for _ in $(seq 1 300); do
	s=$(isc status "$id" --json | py -c 'import json,sys; print(json.load(sys.stdin)["status"])')
	case $s in completed | failed | cancelled | stopped) break ;; esac
	sleep 0.2
done
check "the burst completes" test "$s" = completed
db=$ISC_HOME/isc.db
check "its nodes carry the new price" test "$(sqlite3 "$db" "SELECT DISTINCT n.price_micros FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND c.shape_id LIKE '%g5.xlarge%'")" = 900000
# The hold: 2 nodes x 0.90/h for the sandbox's 60 s window = 0.03 = 30000 micros.
check "the hold was made at the new price" test "$(sqlite3 "$db" "SELECT l.amount_micros FROM ledger l JOIN clusters c ON c.id = l.cluster_id WHERE l.experiment_id = '$id' AND l.kind = 'reserve' AND l.note = '' AND c.shape_id LIKE '%g5.xlarge%'")" = 30000
# A node is charged when its interval closes (or every charge_interval_ms while it runs):
# the termination the describe confirms may come a tick or two after the burst ends.
charged() { test "$(sqlite3 "$db" "SELECT count(*) FROM ledger WHERE experiment_id = '$id' AND kind = 'charge'")" -gt 0; }
check "it was charged" within 15 charged
check "every charge is at the new price" test "$(sqlite3 "$db" "SELECT count(*) FROM ledger WHERE experiment_id = '$id' AND kind = 'charge' AND price_micros != 900000")" = 0

# iscd's schedule: a queued burst's candidates with stale prices are priced from the cloud.
isc catalog import "$repo/shapes/aws.csv" --format isc --provider aws >/dev/null # back to catalog prices
set_price g5.xlarge 0.55
id=$(isc burst "$dir/job.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "iscd prices the candidates of new work" bash -c "for i in \$(seq 1 150); do grep -q 'price refresh: .* priced' '$dir/iscd.log' && exit 0; sleep 0.2; done; exit 1"
check "the g5.xlarge price is live again" bash -c "for i in \$(seq 1 100); do '$ISC_BIN/isc' shapes --priority aws-us-east-1-g5.xlarge-spot --gpus 2 --json | grep -q '\"node_price_micros\": 550000' && exit 0; sleep 0.2; done; exit 1"
isc cancel "$id" >/dev/null
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
check "iscd log has no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"

# GCP has no spot price call (its prices are billing catalog SKUs, read only with an API
# key: tests/integration/prices-live.sh): counted, never an error.
# (isc catalog refresh asks iscd, which prices with its own config and credentials.)
iscd_api "$ISC_HOME" "$dir/iscd-api.log" || exit 1
check "GCP regions have no spot price call" bash -c "'$ISC_BIN/isc' catalog refresh --provider gcp | grep -q 'no spot price call'"
# A provider that is not configured: refused with the file and section named.
expect_stderr "has no [providers.oci] section" "$ISC_BIN/isc" catalog refresh --provider oci
check "every refresh is in the audit" test "$(isc audit --json | grep -c '"action": "POST /v1/catalog/refresh')" -ge 4
iscd_api_stop
check "the API's iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd-api.log'"
finish prices
