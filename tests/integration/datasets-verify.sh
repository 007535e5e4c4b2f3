#!/usr/bin/env bash
# How iscd checks cached bytes against S3 (tests/mocks/mocks3, botocore-checked): MD5
# ETags, S3's additional checksums (SHA256, CRC32C, CRC32; full-object and composite),
# SSE-KMS objects whose ETag is no MD5 (pinned by If-Match, said so in the manifest and
# `isc datasets show`), bytes corrupted on the way (refused), a reset mid-range (retried,
# rehashed), and the resume after a simulated power cut (only what was fdatasynced kept).
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-datasets-verify.XXXXXX)
s3_pid=
iscd_pid=
cleanup() {
	[ -n "$iscd_pid" ] && kill -KILL "$iscd_pid" 2>/dev/null
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
export AWS_ACCESS_KEY_ID=AKIDMOCKVERIFY000001 AWS_SECRET_ACCESS_KEY=mock-verify-secret AWS_REGION=us-east-1
MOCKS3_AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID MOCKS3_AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3.port" --state-dir "$dir/s3" \
	2>"$dir/s3.log" &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3.port" ] && break; sleep 0.1; done
S3="http://127.0.0.1:$(cat "$dir/s3.port")"
export AWS_ENDPOINT_URL_S3=$S3 ISC_HOME=$dir/home
isc() { "$ISC_BIN/isc" "$@"; }
s3ctl() { curl -sf -X POST "$S3/_mock/$1" -H 'Content-Type: application/json' -d "$2"; }
json_get() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
# A dataset's copy is @ORGID/LEAF under $ISC_HOME/datasets (its organisation's folder,
# docs/datasets.md); its manifest and download folder are in that folder too.
copy_name() { isc datasets show "$1" --org vfy --json | json_get copy; }
copy_of() { echo "$ISC_HOME/datasets/$(copy_name "$1")"; }
manifest_of() { local c; c=$(copy_name "$1"); echo "$ISC_HOME/datasets/${c%%/*}/.manifests/${c#*/}.json"; }
partial_of() { local c; c=$(copy_name "$1"); echo "$ISC_HOME/datasets/${c%%/*}/.partial/${c#*/}"; }
start_iscd() {
	"$ISC_BIN/iscd" --interval-ms 1000 2>>"$dir/iscd.log" &
	iscd_pid=$!
	for _ in $(seq 200); do [ -S "$ISC_HOME/run/api.sock" ] && break; sleep 0.1; done
}
wait_state() {
	local name=$1 want=$2 secs=$3 s=
	for _ in $(seq 1 $((secs * 5))); do
		s=$(isc datasets show "$name" --org vfy --json | json_get state)
		[ "$s" = "$want" ] && return 0
		sleep 0.2
	done
	echo "dataset $name is $s, wanted $want" >&2
	return 1
}
verified_by() { isc datasets show "$1" --org vfy --json | json_get verified_by; }

isc init >/dev/null
start_iscd
isc org add vfy >/dev/null

src=$dir/src
mkdir -p "$src"
head -c 3000000 /dev/urandom >"$src/a.bin"
head -c 2500000 /dev/urandom >"$src/b.bin"
s3ctl bucket '{"bucket":"vfy-data"}' >/dev/null
put() { s3ctl object "{\"bucket\":\"vfy-data\",\"key\":\"$1\",\"file\":\"$2\"${3:-}}" >/dev/null; }
put sha.bin "$src/a.bin" ',"checksum_algorithm":"SHA256"'
put mp-sha.bin "$src/a.bin" ',"part_size":1048576,"checksum_algorithm":"SHA256","checksum_type":"COMPOSITE"'
put kms-crc32c.bin "$src/b.bin" ',"part_size":1048576,"sse":"aws:kms","checksum_algorithm":"CRC32C","checksum_type":"COMPOSITE"'
put kms-crc32.bin "$src/b.bin" ',"part_size":1048576,"sse":"aws:kms","checksum_algorithm":"CRC32","checksum_type":"FULL_OBJECT"'
put kms-plain.bin "$src/b.bin" ',"sse":"aws:kms"'
put dir/one.bin "$src/a.bin"
put dir/two.bin "$src/b.bin" ',"sse":"aws:kms"'

for n in sha mp-sha kms-crc32c kms-crc32 kms-plain; do
	check "add $n" isc datasets add "s3://vfy-data/$n.bin" --org vfy --name "$n" --volume-size 100M
done
check "add a folder of an MD5 object and an SSE-KMS one" isc datasets add s3://vfy-data/dir/ --org vfy --name mixed
for n in sha mp-sha kms-crc32c kms-crc32 kms-plain mixed; do
	check "$n becomes Available" wait_state "$n" Available 60
done
check "a full-object ChecksumSHA256 is checked next to the MD5 ETag" \
	test "$(verified_by sha)" = "ETag (MD5) and ChecksumSHA256"
check "a multipart object: the part MD5s and the composite ChecksumSHA256" \
	test "$(verified_by mp-sha)" = "ETag (MD5 of 3 parts) and ChecksumSHA256 (composite, 3 parts)"
check "SSE-KMS: the composite ChecksumCRC32C, not the ETag" \
	test "$(verified_by kms-crc32c)" = "ChecksumCRC32C (composite, 3 parts)"
check "SSE-KMS: a full-object ChecksumCRC32 of a multipart object" \
	test "$(verified_by kms-crc32)" = "ChecksumCRC32"
check "SSE-KMS without a checksum: pinned by If-Match, and said so" \
	test "$(verified_by kms-plain)" = "If-Match on every range (the ETag is not an MD5: aws:kms; no checksum in S3)"
check "isc datasets show prints how the bytes were pinned" \
	bash -c "'$ISC_BIN/isc' datasets show kms-plain --org vfy | grep -q '^verified: *If-Match on every range'"
check "a folder counts each way" bash -c "[ \"\$('$ISC_BIN/isc' datasets show mixed --org vfy --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[\"verified_by\"])')\" = 'ETag (MD5): 1 object; If-Match on every range (the ETag is not an MD5: aws:kms; no checksum in S3): 1 object' ]"
check "the manifest records each object's check and checksum" /usr/bin/python3 -c "
import json,sys
m = json.load(open('$(manifest_of kms-crc32c)'))
o = m['objects'][0]
sys.exit(0 if o['verified_by'].startswith('ChecksumCRC32C') and o['checksum'].endswith('-3') else 1)"
for n in sha kms-crc32c kms-plain; do
	f=$src/a.bin
	[ "$n" = sha ] || f=$src/b.bin
	check "$n: the cached bytes are the object's" cmp -s "$f" "$(copy_of $n)/$n.bin"
done

# Bytes flipped on the way: the check refuses them, whichever digest it is.
put corrupt-md5.bin "$src/a.bin"
put corrupt-kms.bin "$src/b.bin" ',"sse":"aws:kms","checksum_algorithm":"CRC32C"'
s3ctl fault '{"kind":"corrupt","count":1}' >/dev/null
check "add an object the link will corrupt" isc datasets add s3://vfy-data/corrupt-md5.bin --org vfy --name corrupt-md5 --volume-size 100M
check "corrupted bytes fail the MD5 check" wait_state corrupt-md5 Failed 60
check "the reason names the ETag" bash -c "'$ISC_BIN/isc' datasets show corrupt-md5 --org vfy | grep -q 'do not match the ETag'"
s3ctl fault '{"kind":"corrupt","count":1}' >/dev/null
check "add an SSE-KMS object the link will corrupt" isc datasets add s3://vfy-data/corrupt-kms.bin --org vfy --name corrupt-kms --volume-size 100M
check "corrupted bytes fail the CRC32C check" wait_state corrupt-kms Failed 60
check "the reason names the checksum" bash -c "'$ISC_BIN/isc' datasets show corrupt-kms --org vfy | grep -q \"do not match S3's ChecksumCRC32C\""
check "no copy of refused bytes" bash -c "! ls '$ISC_HOME'/datasets/@* | grep -q corrupt"

# A connection reset mid-range: retried on the kept-alive connection's successor, the
# file and the digests rewound, the bytes right.
put reset.bin "$src/a.bin" ',"checksum_algorithm":"CRC32"'
s3ctl fault '{"kind":"reset","count":1}' >/dev/null
check "add an object whose first GET is reset" isc datasets add s3://vfy-data/reset.bin --org vfy --name reset --volume-size 100M
check "the reset range is retried and the object verified" wait_state reset Available 60
check "the retried copy is byte-identical" cmp -s "$src/a.bin" "$(copy_of reset)/reset.bin"
check "the range was asked twice" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin) if x[\"key\"]==\"reset.bin\" and x[\"op\"]==\"GET\"]; sys.exit(0 if len(r)==2 and r[0][\"range\"]==r[1][\"range\"] else 1)'"

# A power cut mid-cache (simulated: iscd killed, then every byte of the ranges the
# marker does not record as done overwritten, as a lost page cache could leave them):
# the resume keeps exactly the ranges marked done (each fdatasync'd before it was
# marked), fetches only the others, and the copy is right. 120 MB in 8 MiB ranges on
# 8 connections: ranges finish while others are in flight.
head -c 120000000 /dev/urandom >"$src/big.bin"
put big.bin "$src/big.bin"
s3ctl delay '{"ms":40}' >/dev/null
check "add a 120 MB object" isc datasets add s3://vfy-data/big.bin --org vfy --name big --volume-size 1G
big_partial=$(partial_of big)
some_range_done() {
	for _ in $(seq 1 600); do
		grep -qE '^ranges [0-9]+ 120000000 [01]*1' "$big_partial/object-0.sync" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
check "the marker records a finished range" some_range_done
kill -KILL "$iscd_pid"
wait "$iscd_pid" 2>/dev/null
iscd_pid=
marker="$big_partial/object-0.sync"
check "the marker names 8 MiB ranges, some not done" bash -c "awk '{exit !(\$2 == 8388608 && \$4 ~ /0/)}' '$marker'"
# The power cut: whatever the ranges not marked done held is gone.
/usr/bin/python3 - "$marker" "$big_partial/object-0" <<'PY'
import sys
_, r, size, bits = open(sys.argv[1]).read().split()
r, size = int(r), int(size)
with open(sys.argv[2], "r+b") as f:
    for i, b in enumerate(bits):
        if b == "0":
            f.seek(i * r)
            f.write(b"\xee" * min(r, size - i * r))
PY
kept=$(cat "$marker")
before=$(curl -s "$S3/_mock/requests" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
s3ctl delay '{"ms":0}' >/dev/null
start_iscd
check "after the 'reboot' the cache completes" wait_state big Available 120
check "the copy is byte-identical" cmp -s "$src/big.bin" "$(copy_of big)/big.bin"
check "the resume asked for exactly the ranges not marked done, once each" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c '
import json, sys
_, r, size, bits = sys.argv[1].split()
# (the GETs the kill cut short are logged as 499 when the mock next writes)
gets = [x for x in json.load(sys.stdin)[int(sys.argv[2]):] if x[\"key\"] == \"big.bin\" and x[\"op\"] == \"GET\" and x[\"status\"] != 499]
firsts = sorted(int(x[\"range\"].split(\"=\")[1].split(\"-\")[0]) for x in gets)
want = [i * int(r) for i, b in enumerate(bits) if b == \"0\"]
sys.exit(0 if firsts == want and all(x[\"status\"] == 206 for x in gets) else 1)' '$kept' $before"
check "iscd logged the resume" grep -q "big): resuming the cache" "$dir/iscd.log"

# One GET fetches a run of 8 MiB blocks (docs/datasets.md, "Caching"): on one
# connection, 56 MiB is 7 blocks, fetched as runs of 3, 2, 1 and 1 (as many as
# todo / (2 x connections)). A connection cut half-way through the first run (12 MiB
# in, inside its second block, which the hashing lanes may have begun): the run
# alone is asked again, the block already written stays, the lanes start over, and
# the MD5 ETag still matches.
kill -TERM "$iscd_pid"
wait "$iscd_pid" 2>/dev/null
printf '\n[providers.aws]\nregions = ["us-east-1"]\nendpoint = "http://127.0.0.1:9"\nendpoint_s3 = "%s"\ns3_parallelism = 1\n' \
	"$S3" >>"$ISC_HOME/config.toml"
start_iscd
head -c $((56 << 20)) /dev/urandom >"$src/runs.bin"
put runs.bin "$src/runs.bin"
before=$(curl -s "$S3/_mock/requests" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
s3ctl fault '{"kind":"reset","count":1}' >/dev/null
check "add a 56 MiB object whose first GET is cut half-way" isc datasets add s3://vfy-data/runs.bin --org vfy --name runs --volume-size 1G
check "the cut run is retried and the object verified" wait_state runs Available 120
check "the copy is byte-identical" cmp -s "$src/runs.bin" "$(copy_of runs)/runs.bin"
check "checked against the MD5 ETag" test "$(verified_by runs)" = "ETag (MD5)"
check "runs of 3, 2, 1, 1 blocks; the cut one asked again, alone" bash -c "curl -s '$S3/_mock/requests' | /usr/bin/python3 -c '
import json, sys
gets = [x[\"range\"] for x in json.load(sys.stdin)[int(sys.argv[1]):] if x[\"key\"] == \"runs.bin\" and x[\"op\"] == \"GET\"]
M = 1 << 20
want = [\"bytes=%d-%d\" % (a * M, b * M - 1) for a, b in ((0, 24), (0, 24), (24, 40), (40, 48), (48, 56))]
print(gets, file=sys.stderr) if gets != want else None
sys.exit(0 if gets == want else 1)' $before"

# isc datasets add kicks the cacher: it starts at once, not at its next look (here made
# 10 minutes long; it was once a second, half a second of a 2-second cache on average).
kill -TERM "$iscd_pid"
wait "$iscd_pid" 2>/dev/null
ISC_DATASET_CACHER_IDLE_MS=600000 start_iscd
sleep 1 # the cacher's first look, at start, is over: the next is 10 minutes away
put kick.bin "$src/b.bin"
check "add an object while the cacher idles" isc datasets add s3://vfy-data/kick.bin --org vfy --name kick --volume-size 100M
check "the add's kick starts it: Available long before the next look" wait_state kick Available 60
check "the kicked copy is byte-identical" cmp -s "$src/b.bin" "$(copy_of kick)/kick.bin"

finish datasets-verify
