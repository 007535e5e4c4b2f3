#!/usr/bin/env bash
# Live list prices against the mock's price APIs (issue 43; docs/shapes.md, "Live list
# prices"): GCP's Cloud Billing Catalog (API key, pages, units/nanos), OCI's public
# price list (per GPU-hour, preemptible at half) and AWS's Price List GetProducts
# (on-demand; checked with botocore's own pricing client too), read by
# `isc catalog refresh` and by iscd's own schedule; a price change on the mock moves
# `isc shapes` within one refresh; an API that is down leaves the last prices with their
# age shown and says so; a running cluster keeps the price it launched at.
. "$(dirname "$0")/lib.sh"
sandbox_dir prices-live
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_PRICE_APIS=1 SANDBOX_PROVIDERS="aws gcp oci" \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
py() { /usr/bin/python3 "$@"; }
# gcp_price PART USAGE PRICE: the mock's list price of one SKU part (every geography).
gcp_price() { mock prices/gcp -X POST -d "{\"description\":\"$1\",\"usage\":\"$2\",\"price\":\"$3\"}" >/dev/null; }
price_api() { mock prices/api -X POST -d "$1" >/dev/null; }
# shape_row ID: "price_micros source age_s stale" of one shape, as isc shapes --json says it.
shape_row() {
	isc shapes --priority "$1" --json |
		py -c 'import json,sys; s=json.load(sys.stdin)[0]; print(s["node_price_micros"], s["price_source"], s["price_age_s"], s["price_stale"])'
}
t4=gcp-us-central1-n1-standard-8+T4x1-ondemand
t4spot=gcp-us-central1-n1-standard-8+T4x1-spot
l4=gcp-us-central1-g2-standard-4-ondemand

iscd_api "$ISC_HOME" "$dir/iscd-api.log" || exit 1
# (iscd read the list once at start, as it does for a source never read: put the
# catalog's prices back first)
isc catalog import "$repo/shapes/gcp.csv" --format isc --provider gcp >/dev/null
read -r price src _ _ <<<"$(shape_row $t4)"
check "after an import the GCP price is the catalog's" test "$price $src" = "730000 catalog"

# 1. isc catalog refresh reads the billing catalog and prices every GCP shape of the
# configured regions from its SKUs.
out=$(isc catalog refresh --provider gcp 2>&1)
check "the refresh reads the billing catalog" grep -qE '^gcp-billing-catalog: [0-9]+ shape\(s\) priced' <<<"$out"
read -r price src age stale <<<"$(shape_row $t4)"
# 8 vCPUs x 0.031611 + 30 GiB x 0.004237 + 1 T4 x 0.35 (the mock's list)
check "n1-standard-8+T4x1 = 8 cores + 30 GiB + 1 T4 (0.729998)" test "$price" = 729998
check "its source is the billing catalog, fresh" test "$src $stale" = "gcp-billing-catalog False"
check "its age is under a minute" test "$age" -lt 60
read -r price src _ _ <<<"$(shape_row $t4spot)"
# the Spot Preemptible SKUs: 8 x 0.006655 + 30 x 0.000892 + 0.14
check "the Spot shape is priced from the Preemptible SKUs (0.22)" test "$price $src" = "220000 gcp-billing-catalog"
read -r price _ _ _ <<<"$(shape_row $l4)"
# 4 x 0.024988 + 16 x 0.002927 + 0.560631
check "g2-standard-4 = 4 G2 cores + 16 GiB + 1 L4 (0.707415)" test "$price" = 707415
check "isc shapes shows the source and age" bash -c "'$ISC_BIN/isc' shapes --priority '$t4' | grep -qE ' [0-9]+s gcp-billing-catalog'"
check "a region not configured is not priced" test "$(isc shapes --priority gcp-asia-east1-a3-highgpu-1g-ondemand --json | py -c 'import json,sys; print(json.load(sys.stdin)[0]["price_source"])')" = catalog
check "the key is not in iscd's log" bash -c "! grep -q mock-billing-api-key '$dir/iscd-api.log'"

# 2. Pages: the mock cuts its answer into pages of 7 SKUs; every page is read.
calls0=$(mock prices/calls | py -c 'import json,sys; print(json.load(sys.stdin).get("gcp-billing", 0))')
price_api '{"api":"gcp-billing","page_cap":7}'
gcp_price "Nvidia Tesla T4 GPU" OnDemand 0.45
check "a refresh over pages of 7 SKUs" bash -c "'$ISC_BIN/isc' catalog refresh --provider gcp | grep -q '^gcp-billing-catalog: .* (1 moved)\|^gcp-billing-catalog: .*moved'"
calls1=$(mock prices/calls | py -c 'import json,sys; print(json.load(sys.stdin).get("gcp-billing", 0))')
check "it took many pages (nextPageToken followed)" test $((calls1 - calls0)) -gt 10
read -r price _ _ _ <<<"$(shape_row $t4)"
check "the T4 price change moved the shape (0.829998)" test "$price" = 829998

# 3. The API is down: the refresh fails, the prices stay with their age, and isc shapes says so.
price_api '{"api":"gcp-billing","down":true}'
expect_exit 1 "a refresh of a down API exits 1" "$ISC_BIN/isc" catalog refresh --provider gcp
check "it says the list was not read and the last prices are kept" bash -c "'$ISC_BIN/isc' catalog refresh --provider gcp 2>&1 | grep -q 'gcp-billing-catalog: not read (the last prices are kept)'"
read -r price src age _ <<<"$(shape_row $t4)"
check "the last price stays, with its source" test "$price $src" = "829998 gcp-billing-catalog"
check "isc shapes says the refresh failed and how old the prices are" bash -c "'$ISC_BIN/isc' shapes --priority '$t4' 2>&1 >/dev/null | grep -qE 'gcp-billing-catalog: the last refresh failed \(.*503.*\); its prices were read [0-9]+s ago'"
# A reply cut short: named, and nothing moves.
price_api '{"api":"gcp-billing","down":false,"garbled":true}'
check "a garbled reply is named (page 1: not a JSON object)" bash -c "'$ISC_BIN/isc' catalog refresh --provider gcp 2>&1 | grep -q 'Cloud Billing Catalog skus page 1: not a JSON object'"
check "and the price did not move" test "$(shape_row $t4 | cut -d' ' -f1)" = 829998
price_api '{"api":"gcp-billing","garbled":false}'
# A key the API refuses: the same, with Google's message.
printf 'wrong-key\n' >"$dir/gcp-billing.key"
price_api '{"api":"gcp-billing","down":false}'
check "a refused key: API key not valid, no price moved" bash -c "'$ISC_BIN/isc' catalog refresh --provider gcp 2>&1 | grep -q 'API key not valid'"
check "the wrong key is not in the message" bash -c "! '$ISC_BIN/isc' catalog refresh --provider gcp 2>&1 | grep -q wrong-key"
printf 'mock-billing-api-key\n' >"$dir/gcp-billing.key"

# 4. OCI's public price list: per GPU-hour x GPUs; preemptible VMs at half.
h100=oci-us-ashburn-1-BM.GPU.H100.8-ondemand
v100s=oci-us-ashburn-1-VM.GPU3.1-spot
oci_price() { mock prices/oci -X POST -d "{\"part_number\":\"$1\",\"price\":\"$2\"}" >/dev/null; }
oci_price B98415 10.50
out=$(isc catalog refresh --provider oci 2>&1)
check "the refresh reads the OCI price list" grep -qE '^oci-price-list: [0-9]+ shape\(s\) priced' <<<"$out"
read -r price src _ stale <<<"$(shape_row $h100)"
check "BM.GPU.H100.8 = 8 GPUs x 10.50" test "$price $src $stale" = "84000000 oci-price-list False"
read -r price src _ _ <<<"$(shape_row $v100s)"
check "VM.GPU3.1 preemptible = half of 2.95" test "$price $src" = "1475000 oci-price-list"
calls0=$(mock prices/calls | py -c 'import json,sys; print(json.load(sys.stdin).get("oci-price-list", 0))')
price_api '{"api":"oci-price-list","page_cap":4}'
oci_price B98415 11.25
isc catalog refresh --provider oci >/dev/null 2>&1
calls1=$(mock prices/calls | py -c 'import json,sys; print(json.load(sys.stdin).get("oci-price-list", 0))')
check "a list in replies of 4 items is read whole (offset paging)" test $((calls1 - calls0)) -ge 4
check "the H100 price change moved the shape (8 x 11.25)" test "$(shape_row $h100 | cut -d' ' -f1)" = 90000000
price_api '{"api":"oci-price-list","down":true}'
expect_exit 1 "a refresh of the down price list exits 1" "$ISC_BIN/isc" catalog refresh --provider oci
read -r price src _ _ <<<"$(shape_row $h100)"
check "the last OCI price stays, with its source" test "$price $src" = "90000000 oci-price-list"
check "isc shapes says the OCI refresh failed and how old its prices are" bash -c "'$ISC_BIN/isc' shapes --priority '$h100' 2>&1 >/dev/null | grep -qE 'oci-price-list: the last refresh failed \(.*503.*\); its prices were read [0-9]+s ago'"
price_api '{"api":"oci-price-list","down":false,"page_cap":1000}'

# 5. AWS on-demand: GetProducts per instance type and region (SigV4 "pricing").
g5=aws-us-east-1-g5.xlarge-ondemand
g5spot=aws-us-east-1-g5.xlarge-spot
aws_price() { mock prices/aws -X POST -d "{\"instance_type\":\"$1\",\"region\":\"$2\",\"price\":\"$3\"}" >/dev/null; }
aws_price g5.xlarge us-east-1 1.1
out=$(isc catalog refresh --provider aws 2>&1)
check "the refresh reads the AWS price list" grep -qE '^aws-price-list: [0-9]+ shape\(s\) priced' <<<"$out"
read -r price src _ stale <<<"$(shape_row $g5)"
check "g5.xlarge on-demand = the price list's 1.1" test "$price $src $stale" = "1100000 aws-price-list False"
check "its spot shape is not the price list's" test "$(shape_row $g5spot | cut -d' ' -f2)" != aws-price-list
price_api '{"api":"aws-pricing","page_cap":1}'
aws_price g5.xlarge us-east-1 1.2
isc catalog refresh --provider aws >/dev/null 2>&1
check "a price change moves it (NextToken pages of one product)" test "$(shape_row $g5 | cut -d' ' -f1)" = 1200000
price_api '{"api":"aws-pricing","page_cap":100,"down":true}'
expect_exit 1 "a refresh of the down price list exits 1" "$ISC_BIN/isc" catalog refresh --provider aws
check "the last AWS price stays, with its source" test "$(shape_row $g5 | cut -d' ' -f1,2)" = "1200000 aws-price-list"
price_api '{"api":"aws-pricing","down":false}'
# botocore's own pricing client against the mock: the same API, paged with NextToken.
check "botocore's pricing client reads the mock (get_products, NextToken)" py - <<'PY'
import json, os, botocore.session
c = botocore.session.get_session().create_client(
    "pricing", region_name="us-east-1", endpoint_url=os.environ["MOCKCLOUD_URL"],
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
    aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
f = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in (
    ("instanceType", "g5.xlarge"), ("regionCode", "us-east-1"), ("operatingSystem", "Linux"),
    ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used"))]
r = c.get_products(ServiceCode="AmazonEC2", Filters=f, FormatVersion="aws_v1", MaxResults=1)
p = json.loads(r["PriceList"][0])
usd = [d["pricePerUnit"]["USD"] for t in p["terms"]["OnDemand"].values() for d in t["priceDimensions"].values()]
assert p["product"]["attributes"]["instanceType"] == "g5.xlarge" and usd == ["1.2000000000"], (p, usd)
# without the OS filter: three variants, one a page
n, tok = 0, None
while True:
    kw = {"NextToken": tok} if tok else {}
    r = c.get_products(ServiceCode="AmazonEC2", Filters=f[:2], FormatVersion="aws_v1", MaxResults=1, **kw)
    n += len(r["PriceList"])
    tok = r.get("NextToken")
    if not tok:
        break
assert n == 3, n
PY
iscd_api_stop
check "the API's iscd logged no sanitizer report" no_sanitizer_report "$dir/iscd-api.log"

# 6. iscd's schedule: price_refresh_gcp_ms, price_refresh_oci_ms (top-level keys, before
# the first table).
sed -i '0,/^\[/s//price_refresh_gcp_ms = 1500\nprice_refresh_oci_ms = 1500\n[/' "$ISC_HOME/config.toml"
start_iscd || exit 1
gcp_price "Nvidia Tesla T4 GPU" OnDemand 0.55
oci_price B98415 9.75
moved() { test "$(shape_row $t4 | cut -d' ' -f1)" = 929998; }
check "a GCP price change on the mock moves isc shapes within one refresh" within 10 moved
oci_moved() { test "$(shape_row $h100 | cut -d' ' -f1)" = 78000000; }
check "an OCI price change on the mock moves isc shapes within one refresh" within 10 oci_moved

# 7. A running cluster keeps the price it launched at (nodes, hold and charges use the
# price recorded on the cluster at launch).
gcp_price "Nvidia L4 GPU" OnDemand 0.60
# 4 x 0.024988 + 16 x 0.002927 + 0.60
l4moved() { test "$(shape_row $l4 | cut -d' ' -f1)" = 746784; }
check "the L4 price moves (0.746784)" within 10 l4moved
burst_isc snap demo "$l4" 'sleep 30'
id=$(submit "$dir/snap.isc")
running() { status_says "$id" 'running'; }
check "a GCP burst runs" within 60 running
node_prices() { store_sql -r "SELECT DISTINCT n.price_micros FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id'"; }
# the first hold (a renewal later is made from the nodes' price too)
hold() { store_sql -r "SELECT amount_micros FROM ledger WHERE experiment_id = '$id' AND kind = 'reserve' ORDER BY id LIMIT 1"; }
other_prices() { store_sql -r "SELECT count(*) FROM ledger WHERE experiment_id = '$id' AND price_micros NOT IN (0, 746784)"; }
check "its nodes carry the price at launch" test "$(node_prices)" = 746784
hold0=$(hold)
gcp_price "Nvidia L4 GPU" OnDemand 1.60
l4moved2() { test "$(shape_row $l4 | cut -d' ' -f1)" = 1746784; }
check "the list price moves again (1.746784)" within 10 l4moved2
check "the running cluster's nodes keep their price" test "$(node_prices)" = 746784
check "its hold is unchanged" test "$(hold)" = "$hold0"
check "no ledger row of it has another price" test "$(other_prices)" = 0
isc cancel "$id" >/dev/null
stop_iscd
check "iscd logged no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish prices-live
