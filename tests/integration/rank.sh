#!/usr/bin/env bash
# Ranking modes against the mock cloud (issue 43): `isc shapes --refresh-risk` has iscd
# read the Spot Advisor's data and GetSpotPlacementScores through the AWS driver and
# store them with their time; `isc shapes --rank expected` shows each shape's band, score
# and throughput with their sources; a burst with burst_rank = "expected" is placed on
# the shape `isc shapes --rank expected --placeable` ranks first, before and after the
# risk data moves. Runs on SQLite, or on PostgreSQL with ISC_STORE_URL.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-rank.XXXXXX)
cleanup() {
	iscd_api_stop
	[ -f "$dir/iscd.pid" ] && kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_PROVIDERS="aws oci" "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
isc() { "$ISC_BIN/isc" "$@"; }
mock() { curl -s "$MOCKCLOUD_URL/_mock/$1" "${@:2}"; }
py() { /usr/bin/python3 "$@"; }
# top: the id of the shape `isc shapes --rank expected --placeable` ranks first for 2 GPUs.
top() { isc shapes --gpus 2 --rank expected --placeable --limit 1 --json | py -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])'; }
shape_of() { store_sql -r "SELECT shape_id FROM clusters WHERE experiment_id = '$1' ORDER BY created_at_ms LIMIT 1"; }
cat >"$dir/job.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "ranked"
gpus = 2
burst_rank = "expected"
command = 'sleep 1'
ISC
# burst_and_shape: submits the job, waits for its first cluster, prints its shape, cancels.
burst_and_shape() {
	local id s=
	id=$(isc burst "$dir/job.isc" | grep -Eo 'exp_[0-9a-f]{16}') || return 1
	for _ in $(seq 1 300); do
		s=$(shape_of "$id")
		[ -n "$s" ] && break
		sleep 0.2
	done
	isc cancel "$id" >/dev/null 2>&1
	echo "$s"
}

iscd_api "$ISC_HOME" "$dir/iscd-api.log" || exit 1
expect_stderr "burst_rank: must be one of \"price\", \"work\", \"expected\", got \"cheap\"" \
	bash -c "sed 's/\"expected\"/\"cheap\"/' '$dir/job.isc' >'$dir/bad.isc'; '$ISC_BIN/isc' validate '$dir/bad.isc'"
expect_stderr "--rank: 'cheap' is not price, work or expected" "$ISC_BIN/isc" shapes --rank cheap

# Before any risk data: a spot shape's band counts as the worst, and the table says unknown.
check "without risk data the table says unknown" bash -c "'$ISC_BIN/isc' shapes --gpus 2 --rank expected --market spot --gpu-type a10g --limit 3 | grep -q 'unknown'"
check "H100 throughput shows with its source" bash -c "'$ISC_BIN/isc' shapes --gpus 8 --gpu-type h100 --rank work --limit 1 | grep -q '1.72 lambda'"

# OCI's capacity report: one AD of us-ashburn-1 has no BM.GPU.H100.8 host left.
mock capacity -X POST -d '{"instance_type":"BM.GPU.H100.8","zone":"US-ASHBURN-AD-1","available":0}' >/dev/null
# The Spot Advisor's bands for the A10G and V100 spot types, and a refresh.
for it in g5.xlarge g5.2xlarge p3.2xlarge g5.12xlarge; do
	mock spot_advisor -X POST -d "{\"region\":\"us-east-1\",\"instance_type\":\"$it\",\"r\":4,\"s\":70}" >/dev/null
	mock spot_advisor -X POST -d "{\"region\":\"us-west-2\",\"instance_type\":\"$it\",\"r\":0,\"s\":70}" >/dev/null
done
out=$(isc shapes --refresh-risk --gpus 2 --json)
check "the refresh asked both regions and stored facts" py -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r['calls'] >= 2 and r['facts'] > 0 and r['failed'] == 0 else 1)" "$out"
check "bands are stored with their time" test "$(store_sql -r "SELECT count(*) FROM risk_facts WHERE source = 'spot-advisor' AND fetched_ms > 0")" -ge 8
check "placement scores are stored per region and zone" test "$(store_sql -r "SELECT count(DISTINCT zone) FROM risk_facts WHERE source = 'placement-score' AND region = 'us-east-1' AND target = 1")" -ge 2
check "OCI capacity reports are stored per AD" test "$(store_sql -r "SELECT count(DISTINCT zone) FROM risk_facts WHERE source = 'oci-capacity' AND instance_type = 'BM.GPU.H100.8'")" -ge 2
check "the AD without hosts says OUT_OF_HOST_CAPACITY" test "$(store_sql -r "SELECT detail || ' ' || value FROM risk_facts WHERE source = 'oci-capacity' AND instance_type = 'BM.GPU.H100.8' AND zone = 'US-ASHBURN-AD-1'")" = "OUT_OF_HOST_CAPACITY 0"
check "isc shapes shows the best AD's report with its source" bash -c "'$ISC_BIN/isc' shapes --priority oci-us-ashburn-1-BM.GPU.H100.8-ondemand --gpus 16 | grep -q 'AVAILABLE 64 oci'"
mock capacity -X POST -d '{"instance_type":"BM.GPU.H100.8","zone":"US-ASHBURN-AD-1","available":null}' >/dev/null
check "isc shapes shows a band with its source" bash -c "'$ISC_BIN/isc' shapes --gpus 2 --rank expected --region us-east-1 --market spot --gpu-type a10g --limit 5 | grep -q 'band >20% advisor'"
check "isc shapes shows a placement score" bash -c "'$ISC_BIN/isc' shapes --gpus 2 --rank expected --region us-west-2 --market spot --gpu-type a10g --limit 5 | grep -q 'score [0-9]*/10'"
j=$(isc shapes --gpus 2 --rank expected --region us-west-2 --market spot --gpu-type a10g --limit 1 --json)
check "--json has the band, its source and age, and the model's factor" py -c "import json,sys; e=json.loads(sys.argv[1])[0]; b=e['risk']['band']; sys.exit(0 if b['label']=='<5%' and b['source']=='spot-advisor' and b['age_s']>=0 and e['risk']['factor']>1 and e['throughput']==0.31 else 1)" "$j"

# The same machine in a >20% band costs more per unit of work than in a <5% one (the
# order itself is checked on equal prices in test_rank_modes: here prices differ).
f=$(isc shapes --gpus 1 --market spot --gpu-type a10g --rank expected --json | py -c 'import json,sys; d={e["region"]: e["risk"]["factor"] for e in json.load(sys.stdin) if e["instance_type"]=="g5.xlarge"}; print(d["us-east-1"] > d["us-west-2"] > 1)')
check "the >20% band's factor is above the <5% one's" test "$f" = True

iscd_api_stop
"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
iscd_wait_socket "$ISC_HOME/run/api.sock"
# iscd prices the candidates of new work from the mock first (prices.sh): the order to
# compare with is the one after the burst is placed.
s1=$(burst_and_shape)
t1=$(top)
check "iscd asks about a burst's candidates on its own (hourly)" bash -c "for i in \$(seq 1 100); do grep -q 'risk refresh: [1-9][0-9]* question' '$dir/iscd.log' && exit 0; sleep 0.2; done; exit 1"
check "the burst is placed on the shape isc shapes --rank expected ranks first ($t1)" test "${s1,,}" = "${t1,,}"

# The risk moves: the first shape's region has no spot capacity left for any of the
# types asked about (a placement score is for the whole request, not one type), and its
# band is the worst; the ranking and the next burst follow.
reg=$(isc shapes --priority "$t1" --json | py -c 'import json,sys; print(json.load(sys.stdin)[0]["region"])')
it=$(isc shapes --priority "$t1" --json | py -c 'import json,sys; print(json.load(sys.stdin)[0]["instance_type"])')
types=$(store_sql -r "SELECT DISTINCT instance_type FROM risk_facts WHERE source = 'placement-score' AND region = '$reg'")
mock spot_advisor -X POST -d "{\"region\":\"$reg\",\"instance_type\":\"$it\",\"r\":4,\"s\":70}" >/dev/null
for t in $types; do
	for z in a b c; do
		mock capacity -X POST -d "{\"instance_type\":\"$t\",\"zone\":\"$reg$z\",\"available\":0}" >/dev/null
	done
done
check "a second refresh" bash -c "'$ISC_BIN/isc' shapes --refresh-risk --gpus 2 | grep -q 'fact(s) stored'"
t2=$(top)
check "the first shape moved ($t1 -> $t2)" test "$t2" != "$t1"
check "its region's score is 1 now" bash -c "'$ISC_BIN/isc' shapes --priority '$t1' --gpus 2 | grep -q 'score 1/10'"
for t in $types; do
	for z in a b c; do
		mock capacity -X POST -d "{\"instance_type\":\"$t\",\"zone\":\"$reg$z\",\"available\":null}" >/dev/null
	done
done
s2=$(burst_and_shape)
t2=$(top)
check "the next burst follows isc shapes again ($t2)" test "${s2,,}" = "${t2,,}"

# The advisor down: the refresh says so, and the last bands stay with their age.
mock spot_advisor -X POST -d '{"down":true}' >/dev/null
n_before=$(store_sql -r "SELECT count(*) FROM risk_facts WHERE source = 'spot-advisor'")
isc shapes --refresh-risk --gpus 2 >/dev/null 2>&1
check "the last bands stay when the advisor is down" test "$(store_sql -r "SELECT count(*) FROM risk_facts WHERE source = 'spot-advisor'")" = "$n_before"
check "every risk refresh is in the audit" test "$(isc audit --json | grep -c '"action": "POST /v1/shapes/risk')" -ge 3
# The compact answer is written one shape at a time (issue 43's cost); ?pretty=1 builds the
# whole tree: both say the same, warnings, unplaceable shapes' why and risk parts included
# (ages aside: the two answers may be a second apart).
api_get() { curl -s --unix-socket "$ISC_HOME/run/api.sock" "http://isc/v1/shapes?$1"; }
for q in "gpus=2&rank=expected" "gpus=16&rank=price" "gpus=2&rank=work&priority=no-such-shape,$t1"; do
	api_get "$q" >"$dir/compact.json"
	api_get "$q&pretty=1" >"$dir/pretty.json"
	check "GET /v1/shapes?$q: the streamed answer is the whole tree's" py -c '
import json, re, sys
def load(p):
    return json.loads(re.sub(r"\"(age_s|price_age_s|ok_age_s)\": ?[0-9-]+", "\"age\":0", open(p).read()))
raw = open(sys.argv[1]).read()
a, b = load(sys.argv[1]), load(sys.argv[2])
ok = a == b and raw.startswith("{\"shapes\":[{") and raw.endswith("}\n") and "\n" not in raw[:-1]
ok = ok and list(a) == ["shapes", "warnings", "catalog_size", "price_sources", "rank"]
ok = ok and len(a["shapes"]) > 0 and (any("why" in e for e in a["shapes"]) or a["warnings"])
sys.exit(0 if ok else 1)' "$dir/compact.json" "$dir/pretty.json"
done
check "the priority list's unknown id is a warning in the streamed answer" grep -q 'no-such-shape' "$dir/compact.json"
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
rm -f "$dir/iscd.pid"
check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log' '$dir/iscd-api.log'"
finish rank
