#!/usr/bin/env bash
# Datasets end to end against the mock S3 (tests/mocks/mocks3, SigV4 checked with
# botocore) and the sandbox's mock cloud: registration rules, caching by iscd
# (zip, tar.gz from a multipart upload, a paged folder), pins, caps, a crash
# mid-cache and its resume, and 2-node bursts whose ranks read /data/<name>
# read-only, fetched by the nodes with presigned URLs.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-datasets.XXXXXX)
s3_pid=
s3b_pid=
iscd_pid=
cleanup() {
	[ -n "$iscd_pid" ] && kill -KILL "$iscd_pid" 2>/dev/null
	[ -n "$s3b_pid" ] && kill -TERM "$s3b_pid" 2>/dev/null && wait "$s3b_pid" 2>/dev/null
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir/sb" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd --no-s3 "$dir/sb" >/dev/null || exit 1
. "$dir/sb/env"
MOCKS3_AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID MOCKS3_AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3.port" --state-dir "$dir/s3" \
	2>"$dir/s3.log" &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3.port" ] && break; sleep 0.1; done
S3="http://127.0.0.1:$(cat "$dir/s3.port")"
export AWS_ENDPOINT_URL_S3=$S3
isc() { "$ISC_BIN/isc" "$@"; }
s3ctl() { curl -sf -X POST "$S3/_mock/$1" -H 'Content-Type: application/json' -d "$2"; }
json_get() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
state_of() { isc datasets show "$1" --org demo --json | json_get state; }
# copy_of NAME: the dataset's copy on iscd's disk (in its organisation's folder).
copy_of() { echo "$ISC_HOME/datasets/$(isc datasets show "$1" --org demo --json | json_get copy)"; }
wait_state() {
	local name=$1 want=$2 secs=$3 s=
	for _ in $(seq 1 $((secs * 5))); do
		s=$(state_of "$name")
		[ "$s" = "$want" ] && return 0
		sleep 0.2
	done
	echo "dataset $name is $s, wanted $want" >&2
	isc datasets show "$name" --org demo >&2
	return 1
}
start_iscd() {
	"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
	iscd_pid=$!
}

# 0. The mock speaks S3 as botocore's own client expects.
check "mock S3 passes botocore's S3 client" /usr/bin/python3 "$repo/tests/mocks/test-mocks3" "$S3"

# The objects.
src=$dir/src
mkdir -p "$src/mn/sub"
echo hello >"$src/mn/a.txt"
echo world >"$src/mn/sub/b.txt"
(cd "$src" && zip -qr mn.zip mn && tar czf mn.tar.gz mn)
head -c 3000000 /dev/urandom >"$src/big.bin"
s3ctl bucket '{"bucket":"isc-data","versioned":true}' >/dev/null
s3ctl bucket '{"bucket":"plain-bucket"}' >/dev/null
zip_v=$(s3ctl object "{\"bucket\":\"isc-data\",\"key\":\"mnist.zip\",\"file\":\"$src/mn.zip\"}" | json_get version_id)
s3ctl object "{\"bucket\":\"isc-data\",\"key\":\"sets/imgs.tar.gz\",\"file\":\"$src/mn.tar.gz\",\"part_size\":64}" >/dev/null
s3ctl object '{"bucket":"isc-data","key":"huge.bin","text":"x","reported_size":100000000001}' >/dev/null
s3ctl object "{\"bucket\":\"plain-bucket\",\"key\":\"big.bin\",\"file\":\"$src/big.bin\"}" >/dev/null
/usr/bin/python3 - "$S3" <<'EOF'
import json, sys, urllib.request
# A folder of 1003 objects: ListObjectsV2 needs two pages of 1000.
for i in range(1003):
    body = json.dumps({"bucket": "isc-data", "key": "corpus/part-%04d.txt" % i, "text": "line %d\n" % i}).encode()
    urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/_mock/object", data=body, method="POST",
                                                  headers={"Content-Type": "application/json"}))
EOF

# isc is iscd's API client: iscd checks a new dataset with S3 itself. First an iscd that
# serves only the API (no caching yet, no ticks).
"$ISC_BIN/iscd" --api-only 2>>"$dir/iscd.log" &
api_pid=$!
iscd_wait_socket "$ISC_HOME/run/api.sock"

# 1. Registration: names, pins, caps.
check "add a zip (name from the key: mnist)" isc datasets add s3://isc-data/mnist.zip --org demo --version-id "$zip_v"
check "the name is mnist" bash -c "'$ISC_BIN/isc' datasets show mnist --org demo | grep -q 'name: *mnist'"
check "add a tar.gz from a multipart upload" isc datasets add s3://isc-data/sets/imgs.tar.gz --org demo --volume-size 10G
check "add a folder of 1003 objects" isc datasets add s3://isc-data/corpus/ --org demo
check "a whole bucket is named after the bucket" isc datasets add s3://plain-bucket --org demo --volume-size 1Gi
check "the bucket dataset is plain-bucket" isc datasets show plain-bucket --org demo
expect_stderr "ETag mismatch" isc datasets add s3://isc-data/mnist.zip --org demo --name bad1 --etag 0123456789abcdef0123456789abcdef
expect_stderr "VersionId mismatch" isc datasets add s3://isc-data/mnist.zip --org demo --name bad2 --version-id nosuchversion
expect_stderr "over the 100 GB" isc datasets add s3://isc-data/huge.bin --org demo --volume-size 200G
expect_stderr "more than its volume" isc datasets add s3://plain-bucket/big.bin --org demo --name small --volume-size 1Mi
expect_stderr "is not a size" isc datasets add s3://plain-bucket/big.bin --org demo --name badsize --volume-size 5Xi
expect_stderr "already has a dataset named 'mnist'" isc datasets add s3://isc-data/mnist.zip --org demo
expect_stderr "no dataset 'nope'" isc datasets show nope --org demo
expect_exit 1 "a missing object fails" isc datasets add s3://isc-data/missing.zip --org demo
# An error quoting a long UTF-8 key is cut to the message size, maybe inside a character:
# the answer still carries the message (one of these two cuts lands mid-character).
long_key=$(printf 'é%.0s' $(seq 450))
expect_stderr "s3://isc-data/éé" isc datasets add "s3://isc-data/$long_key" --org demo --name long1
expect_stderr "s3://isc-data/xéé" isc datasets add "s3://isc-data/x$long_key" --org demo --name long2
check "nothing half-written: four datasets" bash -c "[ \$('$ISC_BIN/isc' datasets list --org demo --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') = 4 ]"
check "the copy is named after the dataset, in its organisation's folder" bash -c "'$ISC_BIN/isc' datasets show mnist --org demo | grep -Eq 'copy: *@[0-9]+/mnist-ds_[0-9a-f]{16} '"

# 2. A train referencing a dataset that is not Available yet is refused, naming it.
cat >"$dir/uses-mnist.isc" <<EOF
isc_project_id = "demo"
experiment_name = "uses-mnist"
gpus = 2
compute_mode = "burst"
dataset_id_list = ["mnist"]
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'cat /data/mnist/mn/a.txt /data/mnist/mn/sub/b.txt; if touch /data/mnist/x 2>/dev/null; then echo WRITABLE; else echo READONLY; fi; echo RANK=\$RANK'
EOF
expect_stderr "is Created" isc burst "$dir/uses-mnist.isc"
sed 's/"mnist"\]/"nosuch"]/' "$dir/uses-mnist.isc" >"$dir/uses-nosuch.isc"
expect_stderr "organisation 'demo' has no dataset 'nosuch'" isc burst "$dir/uses-nosuch.isc"
kill -TERM "$api_pid" && wait "$api_pid" 2>/dev/null

# 3. iscd caches them all, off its tick loop.
start_iscd
check "the zip becomes Available" wait_state mnist Available 60
check "the tar.gz becomes Available" wait_state imgs Available 60
check "the folder becomes Available" wait_state corpus Available 90
check "the bucket becomes Available" wait_state plain-bucket Available 60
copy=$(copy_of mnist)
check "the zip is expanded at the root" grep -qx hello "$copy/mn/a.txt"
check "the tar.gz is expanded at the root" grep -qx world "$(copy_of imgs)/mn/sub/b.txt"
check "the folder has all 1003 objects" bash -c "[ \$(find '$(copy_of corpus)' -type f | wc -l) = 1003 ]"
check "a folder object keeps its path" grep -qx "line 1002" "$(copy_of corpus)/part-1002.txt"
check "the bucket copy is byte-identical" cmp -s "$src/big.bin" "$(copy_of plain-bucket)/big.bin"
check "iscd's requests were signed with headers (none presigned)" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c '
import json,sys; r=json.load(sys.stdin); r=[x for x in r if x[\"bucket\"] in (\"isc-data\", \"plain-bucket\")]
sys.exit(0 if r and not any(x[\"presigned\"] for x in r) else 1)'"

# 4. A crash mid-cache, then resume from the ranges already done: 80 MB in 8 MiB parts
# and ranges, fetched 8 at a time; iscd killed once the marker records a finished range.
head -c 80000000 /dev/urandom >"$src/slow.bin"
s3ctl object "{\"bucket\":\"plain-bucket\",\"key\":\"slow.bin\",\"file\":\"$src/slow.bin\",\"part_size\":8388608}" >/dev/null
s3ctl delay '{"ms":150}' >/dev/null
check "add an 80 MB object" isc datasets add s3://plain-bucket/slow.bin --org demo --name slow --volume-size 1G
range_done() {
	local c
	for _ in $(seq 1 300); do
		c=$(isc datasets show slow --org demo --json | json_get copy)
		grep -qE '^ranges 8388608 80000000 [01]*1' "$ISC_HOME/datasets/${c%%/*}/.partial/${c#*/}/object-0.sync" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
check "caching is under way, a range done" range_done
kill -KILL "$iscd_pid"
wait "$iscd_pid" 2>/dev/null
check "after kill -9 it is still Caching (in the store)" test "$(sqlite3 "$ISC_HOME/isc.db" "SELECT state FROM datasets WHERE name = 'slow'")" = caching
kept=$(cat "$ISC_HOME"/datasets/@*/.partial/slow-*/object-0.sync)
before=$(curl -s "$S3/_mock/requests" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
s3ctl delay '{"ms":0}' >/dev/null
start_iscd
check "the resumed cache becomes Available" wait_state slow Available 90
check "the resumed copy is byte-identical (multipart ETag verified)" cmp -s "$src/slow.bin" "$(copy_of slow)/slow.bin"
# The GETs the kill cut short are logged as 499 (when the mock next writes): not counted.
check "the resume asked only for the ranges not done" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c '
import json,sys
_, r, size, bits = sys.argv[1].split()
gets=[x for x in json.load(sys.stdin)[int(sys.argv[2]):] if x[\"key\"]==\"slow.bin\" and x[\"op\"]==\"GET\" and x[\"status\"]!=499]
firsts=sorted(int(x[\"range\"].split(\"=\")[1].split(\"-\")[0]) for x in gets)
sys.exit(0 if \"1\" in bits and firsts==[i*int(r) for i,b in enumerate(bits) if b==\"0\"] else 1)' '$kept' $before"

# 5. A 2-node burst: both ranks read /data/mnist and cannot write to it.
id=$(isc burst "$dir/uses-mnist.isc" | grep -Eo 'exp_[0-9a-f]{16}')
wait_exp() {
	for _ in $(seq 1 $(($2 * 5))); do
		s=$(isc status "$1" --json | json_get status)
		[ "$s" = "$3" ] && return 0
		sleep 0.2
	done
	isc status "$1" >&2
	return 1
}
check "the dataset burst completes" wait_exp "$id" 90 completed
out=$(isc status "$id" --json | json_get output_path)
for r in 0 1; do
	check "rank $r reads the dataset" grep -qx hello "$out/rank_$r.txt"
	check "rank $r reads nested files" grep -qx world "$out/rank_$r.txt"
	check "rank $r cannot write to it" grep -qx READONLY "$out/rank_$r.txt"
done
# Each node: a 1-byte ranged GET for the size, then the object in 16 MiB ranges (here one).
check "the nodes fetched with presigned URLs, in ranges" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c '
import json,sys
r=[x for x in json.load(sys.stdin) if x[\"presigned\"] and x[\"key\"]==\"mnist.zip\"]
probes=[x for x in r if x[\"range\"]==\"bytes=0-0\"]
sys.exit(0 if len(r)==4 and len(probes)==2 and all(x[\"status\"]==206 and x[\"version_id\"] for x in r) else 1)'"

# 6. A second experiment shares the one cached copy (iscd downloads nothing again).
before=$(curl -s "$S3/_mock/requests" | /usr/bin/python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["key"]=="mnist.zip" and not r["presigned"]))')
id2=$(isc burst "$dir/uses-mnist.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "a second experiment on the same dataset completes" wait_exp "$id2" 90 completed
after=$(curl -s "$S3/_mock/requests" | /usr/bin/python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["key"]=="mnist.zip" and not r["presigned"]))')
check "iscd did not fetch the shared copy again" test "$before" = "$after"
check "one copy on disk" bash -c "[ \$(ls '$(dirname "$copy")' | grep -c '^mnist') = 1 ]"

# 7. The bytes change in S3 after caching (an unversioned key): the experiment fails, saying so.
cat >"$dir/uses-bucket.isc" <<EOF
isc_project_id = "demo"
experiment_name = "uses-bucket"
gpus = 1
compute_mode = "burst"
dataset_id_list = ["plain-bucket"]
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'ls /data/plain-bucket'
EOF
s3ctl object '{"bucket":"plain-bucket","key":"big.bin","text":"replaced"}' >/dev/null
id3=$(isc burst "$dir/uses-bucket.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "changed bytes fail the experiment" wait_exp "$id3" 90 failed
check "the reason names the dataset" bash -c "'$ISC_BIN/isc' status '$id3' | grep -q 'dataset plain-bucket'"

# 8. Virtual-hosted addressing (Host: BUCKET.localhost:PORT), set in config.toml (iscd
# reads it for each request: the check is iscd's, not isc's, so iscd gets the endpoint).
printf 's3_addressing = "virtual"\n' >>"$dir/vh.toml"
cp "$ISC_HOME/config.toml" "$dir/config.toml.orig"
sed -i '/^\[providers.aws\]/r '"$dir/vh.toml" "$ISC_HOME/config.toml"
kill -TERM "$iscd_pid" && wait "$iscd_pid" 2>/dev/null
AWS_ENDPOINT_URL_S3="http://localhost:${S3##*:}" start_iscd
iscd_wait_socket "$ISC_HOME/run/api.sock"
check "add with virtual-hosted addressing" isc datasets add s3://isc-data/mnist.zip --org demo --name mnist-vh
check "the mock saw BUCKET.localhost" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c '
import json,sys; sys.exit(0 if any(r[\"virtual\"] and r[\"bucket\"]==\"isc-data\" and r[\"status\"]==200 for r in json.load(sys.stdin)) else 1)'"
expect_stderr "is not auto, path or virtual" \
	bash -c "sed -i 's/^s3_addressing = \"virtual\"/s3_addressing = \"sideways\"/' '$ISC_HOME/config.toml' && '$ISC_BIN/isc' datasets add s3://isc-data/mnist.zip --org demo --name mnist-x"
cp "$dir/config.toml.orig" "$ISC_HOME/config.toml"

# 9. Removal.
corpus_copy=$(copy_of corpus)
check "remove a dataset" isc datasets remove corpus --org demo
check "its copy is gone" test ! -e "$corpus_copy"
expect_stderr "no dataset 'corpus'" isc datasets show corpus --org demo
check "no secret in the store" bash -c "! grep -aq '$AWS_SECRET_ACCESS_KEY' '$ISC_HOME/isc.db'"
check "no presigned URL in iscd's log" bash -c "! grep -q 'X-Amz-Signature' '$dir/iscd.log'"

# 10. A dataset's own keys, sealed. A second S3 that knows only the dataset owner's keys:
# the broker's own credentials are refused there, so every request that succeeds (the
# check at add, the caching, the presigned URLs the nodes fetch with) was signed with the
# dataset's sealed keys. iscd is restarted to use it (the cacher reads its endpoint once).
own_id=AKIDDATASETOWNER0001
own_secret=dsown-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
MOCKS3_AWS_ACCESS_KEY_ID=$own_id MOCKS3_AWS_SECRET_ACCESS_KEY=$own_secret \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3b.port" --state-dir "$dir/s3b" \
	2>"$dir/s3b.log" &
s3b_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3b.port" ] && break; sleep 0.1; done
S3B="http://127.0.0.1:$(cat "$dir/s3b.port")"
curl -sf -X POST "$S3B/_mock/bucket" -d '{"bucket":"owned","versioned":true}' >/dev/null
curl -sf -X POST "$S3B/_mock/object" -d "{\"bucket\":\"owned\",\"key\":\"own.zip\",\"file\":\"$src/mn.zip\"}" >/dev/null
kill -TERM "$iscd_pid" && wait "$iscd_pid" 2>/dev/null
AWS_ENDPOINT_URL_S3=$S3B start_iscd
iscd_wait_socket "$ISC_HOME/run/api.sock"
expect_exit 1 "the broker's own keys are refused by the owner's S3" isc datasets add s3://owned/own.zip --org demo --name own-broker
expect_stderr "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set" env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
	"$ISC_BIN/isc" datasets add s3://owned/own.zip --org demo --name own-none --credentials-from-env
expect_exit 1 "a wrong secret is refused" env AWS_ACCESS_KEY_ID=$own_id AWS_SECRET_ACCESS_KEY=wrong-$own_secret \
	"$ISC_BIN/isc" datasets add s3://owned/own.zip --org demo --name own-wrong --credentials-from-env
check "add with its own keys from the environment" env AWS_ACCESS_KEY_ID=$own_id AWS_SECRET_ACCESS_KEY=$own_secret \
	AWS_SESSION_TOKEN= "$ISC_BIN/isc" datasets add s3://owned/own.zip --org demo --name own --credentials-from-env
printf '[dsown]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$own_id" "$own_secret" >"$dir/own-credentials"
chmod 600 "$dir/own-credentials"
check "add with its own keys from a credentials file's profile" isc datasets add s3://owned/own.zip --org demo \
	--name own2 --credentials-profile dsown --credentials-file "$dir/own-credentials"
check "nothing was recorded for the refused adds" bash -c "! '$ISC_BIN/isc' datasets list --org demo | grep -Eq 'own-(broker|none|wrong)'"
check "show says the keys are its own and sealed" bash -c "'$ISC_BIN/isc' datasets show own --org demo | grep -q 'credentials: its own keys (sealed, sha256:'"
check "the cacher used the sealed keys: Available" wait_state own Available 60
check "the second one too" wait_state own2 Available 60
check "the copy holds the zip's files" grep -qx hello "$(copy_of own)/mn/a.txt"
sed 's/"mnist"\]/"own"]/; s#/data/mnist#/data/own#g; s/^gpus = 2/gpus = 1/; s/uses-mnist/uses-own/' \
	"$dir/uses-mnist.isc" >"$dir/uses-own.isc"
id4=$(isc burst "$dir/uses-own.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "a burst on it completes (presigned with its own keys)" wait_exp "$id4" 90 completed
check "its node read the dataset" grep -qx hello "$(isc status "$id4" --json | json_get output_path)/rank_0.txt"
check "the nodes' presigned URLs are signed by the owner's key" bash -c "curl -s '$S3B/_mock/requests' | /usr/bin/python3 -c '
import json,sys
r=[x for x in json.load(sys.stdin) if x[\"presigned\"] and x[\"key\"]==\"own.zip\" and x[\"status\"]==206]
sys.exit(0 if r else 1)'"
sqlite3 "$ISC_HOME/isc.db" .dump >"$dir/store.dump"
check "the secret is not in the store's dump" bash -c "! grep -q '$own_secret' '$dir/store.dump'"
check "the secret is not in the store's files (db, WAL)" bash -c "! cat '$ISC_HOME'/isc.db* | grep -aq '$own_secret'"
check "the store holds the keys sealed" test "$(sqlite3 "$ISC_HOME/isc.db" "SELECT COUNT(*) FROM datasets WHERE credentials_ciphertext IS NOT NULL AND credentials LIKE 'sealed:sha256:%'")" = 2
check "the secret is not in iscd's log" bash -c "! grep -q '$own_secret' '$dir/iscd.log'"
check "the secret is not in the audit" bash -c "! '$ISC_BIN/isc' audit --json | grep -q '$own_secret'"
check "the adds are in the audit" bash -c "'$ISC_BIN/isc' audit --json | grep -q 'POST /v1/datasets'"
check "the secret is not in list or show" bash -c "! { '$ISC_BIN/isc' datasets list --json; '$ISC_BIN/isc' datasets show own --org demo --json; } | grep -q '$own_secret'"
# every sealed record is counted: the 2 datasets' keys and the SSH keys of clusters still
# open (sealed in the store since issue 45)
n_cluster_keys=$(sqlite3 "$ISC_HOME/isc.db" "SELECT COUNT(*) FROM cluster_ssh_keys")
check "rotate-master re-seals the dataset's keys" bash -c "'$ISC_BIN/isc' keys rotate-master | grep -q 're-encrypted $((2 + n_cluster_keys)) key'"
check "remove the second one" isc datasets remove own2 --org demo
id5=$(isc burst "$dir/uses-own.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "after rotation a burst on it completes (unsealed under the new key)" wait_exp "$id5" 90 completed
finish datasets
