#!/usr/bin/env bash
# A hostile node against the sandbox (real iscd, mock cloud, real sshd nodes).
# The container plants symbolic links in its artifact folders (to a folder of
# the broker host, to /etc, to /), swaps a synced link for a folder holding a
# file, prints a log far over rank_log_max_bytes, and leaves a sparse checkpoint
# larger than the old 1 GiB cap. Then its node is interrupted.
# Checked: nothing is written outside the experiment's folder, no link comes
# home, the log is capped with a marker, the checkpoint is restored whole onto
# the replacement's rank 0 (cycle 2 exits 0 only if it is), the run ends
# completed, and iscd's peak RSS stays flat (printed). Then, with the disk below
# disk_reserve_bytes, a new burst waits and says why.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-hostile.XXXXXX)
cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
# Nodes on addresses of their own, so this suite never meets another sandbox's nodes.
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_NODE_IP_BASE=127.$((150 + $$ % 50)) \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
isc() { "$ISC_BIN/isc" "$@"; }
mock() { curl -s "$MOCKCLOUD_URL/_mock/$1" "${@:2}"; }

log_cap=1048576
ckpt_bytes=$((1100 * 1024 * 1024 + 17)) # 1100 MiB of hole, then "END-OF-CHECKPOINT"
# Top-level keys go before the first table.
{ echo "rank_log_max_bytes = $log_cap"; cat "$ISC_HOME/config.toml"; } >"$dir/config.new"
mv "$dir/config.new" "$ISC_HOME/config.toml"
victim=$dir/victim # a folder of the broker host the node aims its links at
mkdir -p "$victim"

cat >"$dir/hostile.isc" <<ISC
isc_project_id = "demo"
experiment_name = "hostile"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = '''
if [ "\$STRONG_CYCLE_COUNT" = 1 ]; then
  ln -s $victim /mnt/checkpoints/to-victim
  ln -s /etc /mnt/crud/etc
  ln -s / /mnt/lossy/root
  ln -s $victim /mnt/crud/swap
  truncate -s 1100M /mnt/checkpoints/big.ckpt
  printf END-OF-CHECKPOINT >> /mnt/checkpoints/big.ckpt
  echo 1 > /mnt/checkpoints/step
  sleep 6
  rm /mnt/crud/swap; mkdir /mnt/crud/swap; echo pwned > /mnt/crud/swap/planted
  echo swapped > /mnt/checkpoints/phase
  head -c 20000000 /dev/zero | tr '\\0' L
  echo
  echo after-the-flood
  sleep 600
else
  size=\$(stat -c %s /mnt/checkpoints/big.ckpt)
  tail=\$(tail -c 17 /mnt/checkpoints/big.ckpt)
  echo "cycle \$STRONG_CYCLE_COUNT: big.ckpt \$size bytes, ends with \$tail" > /mnt/crud/verdict
  [ "\$size" = $ckpt_bytes ] && [ "\$tail" = END-OF-CHECKPOINT ] || exit 3
fi
'''
ISC

"$ISC_BIN/iscd" 2>"$dir/iscd.log" &
iscd_pid=$!
echo $iscd_pid >"$dir/iscd.pid"
peak=0
sample_rss() {
	local kb
	kb=$(sed -nE 's/^VmHWM:\s+([0-9]+) kB/\1/p' "/proc/$iscd_pid/status" 2>/dev/null)
	[ -n "$kb" ] && [ "$kb" -gt "$peak" ] && peak=$kb
	return 0
}

status_of() { isc status "$1" --json | /usr/bin/python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["status"], e["cycle_count"])'; }
# wait_for SECONDS CMD...: polls CMD every 0.5 s.
wait_for() {
	local secs=$1
	shift
	for _ in $(seq 1 $((secs * 2))); do
		"$@" >/dev/null 2>&1 && return 0
		sample_rss
		sleep 0.5
	done
	return 1
}

id=$(isc burst "$dir/hostile.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "hostile burst submitted" test -n "$id"
art=$ISC_HOME/experiments/$id
is_running() { [ "$(status_of "$id")" = "running 1" ]; }
check "hostile burst runs" wait_for 90 is_running
synced() {
	[ "$(stat -c %s "$art/checkpoints/big.ckpt" 2>/dev/null)" = "$ckpt_bytes" ] &&
		[ -f "$art/checkpoints/phase" ] && [ -f "$art/crud/swap/planted" ]
}
check "the sparse checkpoint and the swapped folder came home" wait_for 120 synced

out=$(isc status "$id" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["output_path"])')
log=$out/rank_0.txt
flooded() { grep -q "reached rank_log_max_bytes" "$log"; }
check "the flood hit the log cap" wait_for 60 flooded
check "the log is capped ($(stat -c %s "$log") bytes)" test "$(stat -c %s "$log")" -le $((log_cap + 1024))
check "the log keeps its head and says it was capped" grep -q "this log reached rank_log_max_bytes ($log_cap bytes)" "$log"
check "nothing after the cap was kept" test -z "$(grep -F after-the-flood "$log")"
check "nothing was written into the victim folder" test -z "$(ls -A "$victim")"
check "no symbolic link came home" test -z "$(find "$ISC_HOME" -type l -print -quit)"
check "the swapped folder is a plain folder under the experiment" test -d "$art/crud/swap" -a ! -L "$art/crud/swap"
check "the refused links are on the timeline" bash -c "'$ISC_BIN/isc' status '$id' | grep -q 'refused (first: '"
check "artifacts are owner-only" test -z "$(find "$art" -perm /077 -print -quit)"
check "the checkpoint stayed sparse at home ($(du -k "$art/checkpoints/big.ckpt" | cut -f1) KiB on disk)" \
	test "$(du -k "$art/checkpoints/big.ckpt" | cut -f1)" -lt 65536
ls -la "$art" "$art"/* >"$dir/artifacts.txt" 2>&1

# The interruption: the replacement boots with the checkpoint restored, or fails visibly.
victim_node=$(mock instances | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "running"]
print(rows[0]["id"] if rows else "")' "$id")
mock faults -X POST -H 'Content-Type: application/json' \
	-d "{\"kind\":\"interrupt\",\"instance_id\":\"$victim_node\",\"notice_s\":5}" >/dev/null
is_completed() { [ "$(status_of "$id" | cut -d' ' -f1)" = completed ]; }
check "after the interruption the run completes (cycle 2 found the checkpoint whole)" wait_for 180 is_completed
status_of "$id" >&2
check "the verdict of cycle 2 came home" grep -q "cycle 2: big.ckpt $ckpt_bytes bytes, ends with END-OF-CHECKPOINT" "$art/crud/verdict"
check "still nothing in the victim folder" test -z "$(ls -A "$victim")"
check "still no symbolic link under ISC_HOME" test -z "$(find "$ISC_HOME" -type l -print -quit)"
check "the log is still capped" test "$(stat -c %s "$log")" -le $((log_cap + 4096))
sample_rss
echo "# iscd peak RSS (VmHWM): $((peak / 1024)) MiB with a $((ckpt_bytes >> 20)) MiB checkpoint and a 20 MB log ($ISC_BIN)"
check "iscd's memory stays flat (peak $((peak / 1024)) MiB < 400 MiB)" test "$peak" -lt $((400 * 1024))

stop_iscd() {
	kill -TERM "$iscd_pid"
	for _ in $(seq 1 100); do kill -0 "$iscd_pid" 2>/dev/null || break; sleep 0.1; done
}
stop_iscd

# A disk below disk_reserve_bytes: no new cluster starts, and the experiment says why.
{ echo "disk_reserve_bytes = 1125899906842624"; cat "$ISC_HOME/config.toml"; } >"$dir/config.new"
mv "$dir/config.new" "$ISC_HOME/config.toml"
"$ISC_BIN/iscd" 2>>"$dir/iscd.log" &
iscd_pid=$!
echo $iscd_pid >"$dir/iscd.pid"
id2=$(isc burst "$dir/hostile.isc" | grep -Eo 'exp_[0-9a-f]{16}')
is_waiting() { [ "$(status_of "$id2" | cut -d' ' -f1)" = waiting ]; }
check "with the disk below the reserve, a new burst waits" wait_for 30 is_waiting
check "waiting says the disk is nearly full" bash -c "'$ISC_BIN/isc' status '$id2' | grep -q 'is nearly full'"
check "nothing was launched for it" test "$(mock instances | grep -c "$id2")" = 0
isc cancel "$id2" >/dev/null
stop_iscd
check "iscd log has no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
grep -E -A30 'AddressSanitizer|LeakSanitizer|runtime error' "$dir/iscd.log" | head -60 >&2
finish hostile
