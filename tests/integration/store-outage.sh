#!/usr/bin/env bash
# A store that goes away for a moment never fails an experiment (issue 48, docs/ha.md,
# "Store outages, replica identity and clocks"). iscd on a throwaway PostgreSQL
# (tests/pg/pg-server), the mock cloud with real sshd nodes; iscd holds a step at a
# pause point (ISC_PAUSE_AT) while the server is restarted (pg_ctl restart -m fast: every
# session ends, the idle connections iscd keeps included), then goes on:
#   1. at the restore of cycle 2 (boot.restore_started, after an interruption): the
#      restore's host-key check and the step's writes find the store back, and the
#      experiment resumes from its checkpoint and completes (before: "failed: restoring
#      artifacts ... no connection to the server");
#   2. at a cancel's teardown, the containers stopped and the checkpoint not yet home
#      (teardown.containers_stopped): the checkpoint still comes home before the node is
#      terminated (before: "could not bring artifacts home", then terminated);
#   3. the server stopped for longer than the restore's host-key check waits: the step is
#      left for a later tick (ISC_ESTORE), not failed, and completes once it is back;
#   4. no sanitizer report.
# Needs the sanitizer build (ISC_TEST_HOOKS): only it has pause points.
. "$(dirname "$0")/lib.sh"
sandbox_dir outage
chmod 755 "$dir" # as root, the server runs as postgres and must reach its folder in dir
pg=$dir/pg
outage_cleanup() {
	[ -f "$dir/iscd.pid" ] && kill_iscd
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap outage_cleanup EXIT

"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" isc_outage) || exit 1
export ISC_STORE_URL
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=250 SANDBOX_PROVIDERS=aws \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"

# One node (an interrupted gang of one is provisioned again whole, so its next cycle
# restores), about 16 s of steps, each written to the checkpoint; a rank that starts
# from a checkpoint says so.
cat >"$dir/one.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "outage"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'start=0; if [ -f /mnt/checkpoints/step ]; then start=$(cat /mnt/checkpoints/step); echo "resumed from step $start"; fi; for i in $(seq $((start + 1)) 80); do echo $i > /mnt/checkpoints/step; sleep 0.2; done; echo done'
ISC

# wait_pause POINT: iscd's log (since the last start) says it holds at POINT.
wait_pause() {
	for _ in $(seq 1 900); do
		tail -n +"$log_mark" "$dir/iscd.log" | grep -q "pause point $1 reached" && return 0
		sleep 0.1
	done
	echo "iscd did not reach pause point $1" >&2
	return 1
}
restart_pg() { "$repo/tests/pg/pg-server" restart "$pg" fast; }
# no_failure EXP: nothing in its timeline failed it or gave its shape up.
# The timeline is kept in dir/timeline.EXP and printed when the check fails (check itself
# discards what its command prints).
no_failure() {
	isc status "$1" >"$dir/timeline.$1" 2>&1
	! grep -qE 'failed|trying the next shape' "$dir/timeline.$1"
}
show_failure() {
	no_failure "$1" && return 0
	echo "---- $1's timeline ----" >&2
	cat "$dir/timeline.$1" >&2
}
events_of() { isc status "$1" --json; }

# 1. A restart while cycle 2's restore is held.
touch "$dir/pause"
log_mark=1
ISC_PAUSE_AT=boot.restore_started ISC_PAUSE_FILE=$dir/pause start_iscd
id=$(submit "$dir/one.isc")
check "restore: running" wait_status "$id" running 90
sleep 2 # some steps checkpointed
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$(running_instance "$id")\",\"notice_s\":5}"
check "restore: iscd holds at cycle 2's restore" wait_pause boot.restore_started
check "restore: PostgreSQL restarted (pg_ctl restart -m fast)" restart_pg
rm -f "$dir/pause"
check "restore: the experiment completes" wait_status "$id" completed 150
check "restore: it ran cycle 2" test "$(status_of "$id" cycle_count)" = 2
check "restore: never failed, never another shape" no_failure "$id"
show_failure "$id"
out=$(status_of "$id" output_path)
check "restore: rank 0 resumed from its checkpoint" grep -q 'resumed from step' "$out/rank_0.txt"
check "restore: no instance left running" wait_no_live "$id"
stop_iscd

# 2. A restart while a cancel's teardown holds its checkpoint on the node.
touch "$dir/pause"
log_mark=$(($(wc -l <"$dir/iscd.log") + 1))
ISC_PAUSE_AT=teardown.containers_stopped ISC_PAUSE_FILE=$dir/pause start_iscd
id=$(submit "$dir/one.isc")
check "teardown: running" wait_status "$id" running 90
sleep 3
isc cancel "$id" >/dev/null
check "teardown: iscd holds after the containers stopped" wait_pause teardown.containers_stopped
check "teardown: PostgreSQL restarted (pg_ctl restart -m fast)" restart_pg
rm -f "$dir/pause"
check "teardown: cancelled" wait_status "$id" cancelled 120
check "teardown: the checkpoint came home from rank 0" status_says "$id" "brought home from rank 0"
check "teardown: never 'could not bring artifacts home'" bash -c "! '$ISC_BIN/isc' status '$id' | grep -q 'could not bring artifacts home'"
check "teardown: the checkpoint at home is there" test -s "$ISC_HOME/experiments/$id/checkpoints/step"
check "teardown: no instance left running" wait_no_live "$id"
check "iscd alive after both restarts" iscd_alive
stop_iscd

# 3. The server down for longer than the host-key check waits (about 4 s): the restore
# fails with the store unavailable (ISC_ESTORE), and the step is left for a later tick
# instead of failing the experiment; once the server is back, the burst resumes.
touch "$dir/pause"
log_mark=$(($(wc -l <"$dir/iscd.log") + 1))
ISC_PAUSE_AT=boot.restore_started ISC_PAUSE_FILE=$dir/pause start_iscd
id=$(submit "$dir/one.isc")
check "outage: running" wait_status "$id" running 90
sleep 2
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$(running_instance "$id")\",\"notice_s\":5}"
check "outage: iscd holds at cycle 2's restore" wait_pause boot.restore_started
check "outage: PostgreSQL stopped" "$repo/tests/pg/pg-server" stop "$pg"
rm -f "$dir/pause"
left_for_next_tick() { tail -n +"$log_mark" "$dir/iscd.log" | grep -q "restoring the checkpoint: .*tried again next tick"; }
check "outage: the restore is left for a later tick" within 30 left_for_next_tick
check "outage: PostgreSQL started again" "$repo/tests/pg/pg-server" start "$pg"
check "outage: the experiment completes" wait_status "$id" completed 150
check "outage: it ran cycle 2" test "$(status_of "$id" cycle_count)" = 2
check "outage: never failed, never another shape" no_failure "$id"
show_failure "$id"
out=$(status_of "$id" output_path)
check "outage: rank 0 resumed from its checkpoint" grep -q 'resumed from step' "$out/rank_0.txt"
check "outage: no instance left running" wait_no_live "$id"
check "iscd alive after the outage" iscd_alive
stop_iscd
check "no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish store-outage
