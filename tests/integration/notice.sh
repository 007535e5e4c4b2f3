#!/usr/bin/env bash
# Short notices (issue 46; docs/broker.md, "Notice lengths"): GCP gives 30 s of notice and
# its launch call waits for the new node's boot, so a drain after the launch reached a
# preempted rank 0 only when the boot was shorter than the notice. The broker knows each
# cloud's notice and drains first when rank 0 is about to go on such a cloud: a 2-node GCP
# gang whose rank 0 is preempted with a 3 s notice while new nodes take 8 s to boot still
# brings rank 0's final checkpoint home (written on SIGTERM, in the stop's grace), and
# cycle 2 resumes from it. The periodic sync is set far away, so only the drain can bring
# the checkpoint. Before: cycle 2 found no final checkpoint (the node was gone).
. "$(dirname "$0")/lib.sh"
sandbox_dir notice
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_BOOT_DELAY_MS=300 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
sed -i -e 's/^checkpoint_sync_ms = .*/checkpoint_sync_ms = 600000/' "$ISC_HOME/config.toml"
grep -q '^checkpoint_sync_ms = 600000' "$ISC_HOME/config.toml" || { echo "notice: no checkpoint_sync_ms in the sandbox's config" >&2; exit 1; }
db() { store_sql -r "$1"; }
cat >"$dir/gang.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "notice-gcp"
gpus = 2
burst_shape_priority_list = ["gcp-us-central1-g2-standard-4-spot"]
command = '''
echo "RANK=$RANK CYCLE=$STRONG_CYCLE_COUNT FROM=$(cat /mnt/checkpoints/step 2>/dev/null || echo none)"
if [ "$STRONG_CYCLE_COUNT" = 1 ]; then
	echo early > /mnt/checkpoints/step
	trap 'echo final > /mnt/checkpoints/step; exit 0' TERM
	sleep 600 & wait
fi
'''
ISC
start_iscd || exit 1
id=$(submit "$dir/gang.isc")
check "the gang runs cycle 1" wait_status "$id" running 120
out=$(status_of "$id" output_path)
for _ in $(seq 150); do
	grep -q CYCLE=1 "$out/rank_0.txt" 2>/dev/null && grep -q CYCLE=1 "$out/rank_1.txt" 2>/dev/null && break
	sleep 0.2
done
sleep 1 # the trap is set
rank0=$(db "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id
	WHERE c.experiment_id = '$id' AND n.rank = 0 ORDER BY c.created_at_ms DESC LIMIT 1")
check "rank 0's instance is known" test -n "$rank0"
mock boot_delay -X POST -d '{"ms":8000}' >/dev/null
fault "{\"kind\":\"preempt\",\"instance_id\":\"$rank0\",\"notice_s\":3}"
for _ in $(seq 300); do
	[ "$(status_of "$id" cycle_count)" = 2 ] && grep -q CYCLE=2 "$out/rank_0.txt" 2>/dev/null && break
	sleep 0.2
done
check "cycle 2 runs" grep -q CYCLE=2 "$out/rank_0.txt"
for _ in $(seq 100); do grep -q CYCLE=2 "$out/rank_1.txt" 2>/dev/null && break; sleep 0.2; done
check "rank 0's final checkpoint came home before its node went" \
	test "$(cat "$ISC_HOME/experiments/$id/checkpoints/step" 2>/dev/null)" = final
# The new node (rank 1: the kept node became rank 0) has only what came home.
check "the new node's rank resumes from the final checkpoint" grep -q "CYCLE=2 FROM=final" "$out/rank_1.txt"
check "isc status says the drain came first" bash -c "'$ISC_BIN/isc' status '$id' | grep -q 'comes home before the replacement.s launch'"
isc cancel "$id" >/dev/null 2>&1
stop_iscd
finish notice
