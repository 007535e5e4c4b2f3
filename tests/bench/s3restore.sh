#!/usr/bin/env bash
# Restore of a checkpoint onto a new gang (issue 45): from the bucket (artifact_root on
# the sandbox's mock S3: every node fetches the objects itself with presigned ranged GETs)
# against through the broker (artifact_root "": the checkpoint comes home to iscd's host
# and is pushed to every node over SSH). For each: a gang of S3BENCH_NODES nodes whose rank
# 0 writes a checkpoint of S3BENCH_BYTES random bytes (not sparse: tar --sparse would send
# a sparse file's holes as nothing); once it is home (the bucket's manifest, or
# the folder), the whole gang is interrupted without notice and the time from the
# interruption to every rank running again with the whole file is measured, with the bytes
# iscd's process read and wrote (/proc/PID/io rchar + wchar) in that window.
# Defaults: 16 nodes, 4 GiB (the issue's figure); smaller on a small machine, e.g.
#   S3BENCH_NODES=4 S3BENCH_BYTES=268435456 tests/bench/s3restore.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tests/integration/lib.sh"
: "${S3BENCH_NODES:=16}" "${S3BENCH_BYTES:=4294967296}"
results=()
one() { # one MODE: s3 | broker
	local mode=$1 id t0 t1 io0 io1 out
	sandbox_dir "s3bench-$mode"
	ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_BOOT_DELAY_MS=300 \
		"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || return 1
	. "$dir/env"
	cp "$ISC_HOME/config.toml" "$dir/config.orig"
	{
		if [ "$mode" = s3 ]; then
			echo 'artifact_root = "s3://sandbox-data/bench"'
			echo "artifact_endpoint_s3 = \"$MOCKS3_URL\""
		fi
		echo 'checkpoint_sync_ms = 3000'
		echo 'lossy_sync_ms = 600000'
		echo 'artifact_max_bytes = 68719476736'
		cat "$dir/config.orig"
	} | grep -vE '^(checkpoint_sync_ms|lossy_sync_ms) = (2000|1000)$' >"$ISC_HOME/config.toml"
	start_iscd || return 1
	cat >"$dir/b.isc" <<ISC
isc_project_id = "demo"
experiment_name = "s3bench-$mode"
gpus = $S3BENCH_NODES
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "RANK=\$RANK CYCLE=\$STRONG_CYCLE_COUNT BIG=\$(stat -c %s /mnt/checkpoints/big 2>/dev/null || echo none)"; if [ "\$STRONG_CYCLE_COUNT" = 1 ] && [ "\$RANK" = 0 ]; then head -c $S3BENCH_BYTES /dev/urandom >/mnt/checkpoints/big; fi; sleep 3600'
ISC
	id=$(submit "$dir/b.isc")
	wait_status "$id" running 300 || return 1
	home_has() {
		if [ "$mode" = s3 ]; then
			[ "$(store_sql -r "SELECT COALESCE(MAX(total_bytes),0) FROM artifact_manifests WHERE experiment_id = '$id'")" -ge "$S3BENCH_BYTES" ]
		else
			[ "$(stat -c %s "$ISC_HOME/experiments/$id/checkpoints/big" 2>/dev/null || echo 0)" -ge "$S3BENCH_BYTES" ]
		fi
	}
	within 1800 home_has || { echo "$mode: the checkpoint never came home" >&2; return 1; }
	# No more syncs while the restore is timed: the gang is gone at once.
	io0=$(awk '/^rchar|^wchar/ {s += $2} END {printf "%d\n", s}' "/proc/$(cat "$dir/iscd.pid")/io")
	t0=$(date +%s%N)
	for v in $(mock instances | /usr/bin/python3 -c "$_rows_of_py"'
print(" ".join(r["id"] for r in rows_of(sys.argv[1]) if r["state"] == "running"))' "$id"); do
		fault "{\"kind\":\"interrupt\",\"instance_id\":\"$v\",\"notice_s\":0}"
	done
	out=$(status_of "$id" output_path)
	all_back() {
		local r
		for r in $(seq 0 $((S3BENCH_NODES - 1))); do
			grep -q "RANK=$r CYCLE=2 BIG=$S3BENCH_BYTES" "$out/rank_$r.txt" 2>/dev/null || return 1
		done
	}
	within 3600 all_back || { echo "$mode: not every rank came back with the checkpoint" >&2; return 1; }
	t1=$(date +%s%N)
	io1=$(awk '/^rchar|^wchar/ {s += $2} END {printf "%d\n", s}' "/proc/$(cat "$dir/iscd.pid")/io")
	results+=("$(printf '%-26s %10.1f s %16d B through iscd' "$mode:" "$(echo "($t1 - $t0) / 1000000000" | bc -l)" $((io1 - io0)))")
	isc cancel "$id" >/dev/null
	kill_iscd
	rm -f "$dir/iscd.pid"
	sandbox_cleanup
	trap - EXIT
}
echo "== restore of $S3BENCH_BYTES bytes onto $S3BENCH_NODES nodes: from the bucket, and through the broker"
one s3 || echo "s3: failed"
one broker || echo "broker: failed"
for r in "${results[@]}"; do echo "  $r"; done
