#!/usr/bin/env bash
# Datasets on on-prem pool nodes: iscd caches a zip from the mock S3, then runs experiments
# on 2 real sshd nodes (tests/mocks/node): the cached copy is shipped to each node as a tar
# stream over SSH into /data/.isc/<copy> (skipped when the node has it intact, shipped
# again when it does not), and both ranks read it at /data/<name> and cannot write to it.
# A dataset removed before the run starts, or another organisation's, fails it with a
# clear message before anything boots.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
node=$repo/tests/mocks/node
dir=$(mktemp -d /tmp/isc-datasets-onprem.XXXXXX)
home=$dir/home
# Addresses of this suite only (onprem.sh: 127.153, the sandboxes: 127.100-149).
base=127.156.$((RANDOM % 200 + 1))
s3_pid=
cleanup() {
	[ -f "$dir/iscd.pid" ] && kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null && wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	iscd_api_stop
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	for i in 1 2; do "$node/node-down" "$dir/n$i" >/dev/null 2>&1; done
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 -c "$@"; }
s3ctl() { curl -sf -X POST "$S3/_mock/$1" -H 'Content-Type: application/json' -d "$2"; }
train() { isc train "$1" | grep -Eo 'exp_[0-9a-f]{16}'; }
ds_state() { isc datasets show "$1" --org "$2" --json | py 'import json,sys; print(json.load(sys.stdin)["state"])'; }
wait_available() {
	for _ in $(seq 1 300); do
		[ "$(ds_state "$1" "$2")" = Available ] && return 0
		sleep 0.2
	done
	return 1
}
out_of() { isc status "$1" --json | py 'import json,sys; print(json.load(sys.stdin)["output_path"])'; }

export AWS_ACCESS_KEY_ID=AKIDMOCKONPREM000001 AWS_SECRET_ACCESS_KEY=mock-onprem-secret AWS_REGION=us-east-1
MOCKS3_AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID MOCKS3_AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3.port" --state-dir "$dir/s3" \
	2>"$dir/s3.log" &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3.port" ] && break; sleep 0.1; done
S3="http://127.0.0.1:$(cat "$dir/s3.port")"
export AWS_ENDPOINT_URL_S3=$S3

src=$dir/src
mkdir -p "$src/mn/sub"
echo hello >"$src/mn/a.txt"
echo world >"$src/mn/sub/b.txt"
(cd "$src" && zip -qr mn.zip mn)
s3ctl bucket '{"bucket":"onprem-data"}' >/dev/null
for k in mnist.zip scratch.zip theirs.zip; do
	s3ctl object "{\"bucket\":\"onprem-data\",\"key\":\"$k\",\"file\":\"$src/mn.zip\"}" >/dev/null
done

isc init >/dev/null
cat >>"$home/config.toml" <<CONF

# Written by tests/integration/datasets-onprem.sh: seconds instead of minutes.
tick_interval_ms = 200
cycle_ms = 5000
period_ms = 20000
stop_grace_s = 1
node_down_after_ms = 3000
boot_deadline_ms = 20000
CONF
# An iscd for the API and the cacher (its tick a minute apart) until the experiments are queued.
iscd_api "$home" "$dir/iscd-api.log" || exit 1
isc org add demo >/dev/null
isc project add --org demo demo >/dev/null
isc org add other >/dev/null
check "add mnist (demo)" isc datasets add s3://onprem-data/mnist.zip --org demo
check "add scratch (demo), to be removed before its run" isc datasets add s3://onprem-data/scratch.zip --org demo
check "add theirs (another organisation)" isc datasets add s3://onprem-data/theirs.zip --org other
for d in mnist:demo scratch:demo theirs:other; do
	check "${d%%:*} becomes Available" wait_available "${d%%:*}" "${d##*:}"
done

isc nodes pubkey >"$dir/authorized_keys"
for i in 1 2; do
	"$node/node-up" "$dir/n$i" "$base.$i" 2222 "$dir/authorized_keys" >/dev/null || {
		echo "node $i did not come up" >&2
		finish datasets-onprem
		exit 1
	}
	isc nodes add "$base.$i" --port 2222 --user root --gpus 1 >/dev/null
done

launch() { # NAME DATASET
	cat <<EOF
isc_project_id = "demo"
experiment_name = "$1"
gpus = 2
compute_mode = "cycle"
dataset_id_list = ["$2"]
command = 'cat /data/$2/mn/a.txt /data/$2/mn/sub/b.txt; if touch /data/$2/x 2>/dev/null; then echo WRITABLE; else echo READONLY; fi; echo RANK=\$RANK'
EOF
}
launch reads mnist >"$dir/reads.isc"
launch again mnist >"$dir/again.isc"
launch third mnist >"$dir/third.isc"
launch gone scratch >"$dir/gone.isc"
launch theirs theirs >"$dir/theirs.isc"

# Another organisation's dataset: refused at submission, by name.
expect_stderr "organisation 'demo' has no dataset 'theirs'" isc train "$dir/theirs.isc"
# Queued while the dataset exists; removed before iscd starts the run.
e1=$(train "$dir/reads.isc")
gone=$(train "$dir/gone.isc")
check "remove scratch while its experiment waits" isc datasets remove scratch --org demo
iscd_api_stop
"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"

check "the run whose dataset was removed fails" wait_status "$gone" failed 60
check "its reason names the dataset" bash -c "'$ISC_BIN/isc' --home '$home' status '$gone' | grep -q \"organisation 'demo' has no dataset 'scratch'\""
check "nothing of it booted" bash -c "! grep -q '$gone: dataset' '$dir/iscd.log' && ! ls '$dir'/n*/containers 2>/dev/null | grep -q '$gone'"

check "the dataset run completes" wait_status "$e1" completed 90
out=$(out_of "$e1")
for r in 0 1; do
	check "rank $r reads the dataset" grep -qx hello "$out/rank_$r.txt"
	check "rank $r reads nested files" grep -qx world "$out/rank_$r.txt"
	check "rank $r cannot write to it" grep -qx READONLY "$out/rank_$r.txt"
done
copy=$(isc datasets show mnist --org demo --json | py 'import json,sys; print(json.load(sys.stdin)["copy"])')
for i in 1 2; do
	check "node $i holds the copy under /data/.isc" test -f "$dir/n$i/data/.isc/$copy/mn/sub/b.txt"
	check "node $i's copy is read-only" bash -c "[ -z \"\$(find '$dir/n$i/data/.isc/$copy' -perm /222)\" ]"
	check "node $i's copy is stamped" test -s "$dir/n$i/data/.isc/$copy.stamp"
done
check "both nodes got the copy shipped" test "$(grep -c "$e1: dataset mnist shipped to" "$dir/iscd.log")" = 2

# A second run: both nodes have it intact, nothing is shipped.
e2=$(train "$dir/again.isc")
check "the second run completes" wait_status "$e2" completed 90
check "neither node got it again" test "$(grep -c "$e2: dataset mnist already intact on" "$dir/iscd.log")" = 2
check "the second run read it" grep -qx hello "$(out_of "$e2")/rank_1.txt"

# A copy damaged on node 1 (a file gone): shipped again there only.
chmod u+w "$dir/n1/data/.isc/$copy/mn/sub"
rm -f "$dir/n1/data/.isc/$copy/mn/sub/b.txt"
e3=$(train "$dir/third.isc")
check "the third run completes" wait_status "$e3" completed 90
check "the damaged node got the copy again" grep -q "$e3: dataset mnist shipped to $base.1:2222" "$dir/iscd.log"
check "the intact node did not" grep -q "$e3: dataset mnist already intact on $base.2:2222" "$dir/iscd.log"
for r in 0 1; do
	check "rank $r of the third run reads the nested file" grep -qx world "$(out_of "$e3")/rank_$r.txt"
done
check "no S3 credential in the nodes' logs or iscd's log" bash -c "! grep -rqs '$AWS_SECRET_ACCESS_KEY' '$dir/iscd.log' '$dir'/n1/data '$dir'/n2/data"

finish datasets-onprem
