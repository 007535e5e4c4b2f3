#!/usr/bin/env bash
# Dataset cache throughput and memory: iscd caching one object from the mock S3 over
# loopback, against curl fetching the same object (a presigned URL made by botocore)
# to disk, and iscd's resident memory sampled while it caches (goal: flat, whatever
# the object's size). DATASET_BENCH_BYTES sets the size (default 2 GiB).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${ISC_BIN:=$PWD/bin}"
bytes=${DATASET_BENCH_BYTES:-$((2 << 30))}
dir=$(mktemp -d /tmp/isc-bench-datasets.XXXXXX)
s3_pid= iscd_pid=
cleanup() {
	[ -n "$iscd_pid" ] && kill -TERM "$iscd_pid" 2>/dev/null && wait "$iscd_pid" 2>/dev/null
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
free_kib=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
if [ "$free_kib" -lt $((bytes / 1024 * 4)) ]; then
	echo "datasets: skipped: $((bytes * 4 >> 20)) MiB of free disk needed in /tmp"
	exit 0
fi
akid=AKIDMOCKCLOUD000001
secret=mock-secret-key-do-not-use-in-prod
MOCKS3_AWS_ACCESS_KEY_ID=$akid MOCKS3_AWS_SECRET_ACCESS_KEY=$secret \
	/usr/bin/python3 tests/mocks/mocks3 --port-file "$dir/port" --state-dir "$dir/s3" 2>/dev/null &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/port" ] && break; sleep 0.1; done
S3=http://127.0.0.1:$(cat "$dir/port")
head -c "$bytes" /dev/urandom >"$dir/object.bin"
curl -sf -X POST "$S3/_mock/bucket" -d '{"bucket":"bench-data"}' >/dev/null
curl -sf -X POST "$S3/_mock/object" \
	-d "{\"bucket\":\"bench-data\",\"key\":\"big.bin\",\"file\":\"$dir/object.bin\"}" >/dev/null
rm -f "$dir/object.bin"

# A presigned URL made by botocore: curl fetches exactly what iscd fetches, from the same server.
url=$(/usr/bin/python3 - "$S3" "$akid" "$secret" <<'EOF'
import sys, botocore.session
from botocore.config import Config
c = botocore.session.get_session().create_client(
    "s3", region_name="us-east-1", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2],
    aws_secret_access_key=sys.argv[3], config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
print(c.generate_presigned_url("get_object", Params={"Bucket": "bench-data", "Key": "big.bin"}, ExpiresIn=3600))
EOF
)

export ISC_HOME=$dir/home AWS_ACCESS_KEY_ID=$akid AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL_S3=$S3
"$ISC_BIN/isc" init >/dev/null
"$ISC_BIN/iscd" --interval-ms 2000 2>"$dir/iscd.log" &
iscd_pid=$!
# isc org add goes through iscd's API: wait for its socket.
for _ in $(seq 100); do [ -S "$ISC_HOME/run/api.sock" ] && break; sleep 0.1; done
"$ISC_BIN/isc" org add bench >/dev/null || exit 1
sleep 1
rss_idle=$(awk '/VmRSS/ {print $2}' "/proc/$iscd_pid/status")

# Three rounds, each curl to disk then iscd caching the object as a new dataset (its own
# copy), so both see the same machine load; the best of each. On a shared 2-core machine
# the neighbours make single runs vary by 2x and more.
ms() { date -d "$(sed -nE "s/^([0-9T:.-]+)Z iscd info: dataset .*\($1\): $2.*/\1/p" "$dir/iscd.log" | head -1)Z" +%s%3N; }
best_curl= best_cache= peak=0
for round in 1 2 3; do
	t=$(curl -sf -o "$dir/curl.out" -w '%{time_total}' "$url")
	rm -f "$dir/curl.out"
	if [ -z "$best_curl" ] || awk "BEGIN {exit !($t < $best_curl)}"; then best_curl=$t; fi
	"$ISC_BIN/isc" datasets add s3://bench-data/big.bin --org bench --name "big$round" \
		--volume-size 4Gi >/dev/null || exit 1
	for _ in $(seq 1 6000); do
		r=$(awk '/VmRSS/ {print $2}' "/proc/$iscd_pid/status" 2>/dev/null || echo 0)
		[ "$r" -gt "$peak" ] && peak=$r
		grep -q "(big$round): available" "$dir/iscd.log" && break
		sleep 0.1
	done
	c=$(awk "BEGIN {printf \"%.2f\", ($(ms "big$round" available) - $(ms "big$round" caching)) / 1000}")
	if [ -z "$best_cache" ] || awk "BEGIN {exit !($c < $best_cache)}"; then best_cache=$c; fi
	rm -rf "$ISC_HOME/datasets/big$round"
done
mib=$((bytes >> 20))
echo "dataset cache of $mib MiB from the mock S3: ${best_cache} s ($(awk "BEGIN {printf \"%.0f\", $mib / $best_cache}") MiB/s), best of 3, checked against the ETag (MD5) and hashed (SHA-256) as it arrives"
echo "curl of the same object (presigned, to disk): ${best_curl} s ($(awk "BEGIN {printf \"%.0f\", $mib / $best_curl}") MiB/s), best of 3"
echo "ratio: $(awk "BEGIN {printf \"%.2f\", $best_cache / $best_curl}")x curl (goal <= 1.10)"
# The floor of any cacher that checks an MD5 ETag: MD5 is serial, one core's speed.
md5=$(openssl speed -seconds 1 -bytes 1048576 -evp md5 2>/dev/null | awk '/^md5/ {print $NF}' | tr -d k)
[ -n "$md5" ] && echo "MD5 alone of $mib MiB on one core here: $(awk "BEGIN {printf \"%.2f\", $bytes / ($md5 * 1000)}") s (openssl speed: $(awk "BEGIN {printf \"%.0f\", $md5 * 1000 / 1048576}") MiB/s)"
echo "iscd resident memory: $((rss_idle / 1024)) MiB idle, peak $((peak / 1024)) MiB while caching $mib MiB three times (goal: flat)"
