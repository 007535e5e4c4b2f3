#!/usr/bin/env bash
# Two iscd replicas whose homes share nothing but the PostgreSQL store and the keys'
# master key (issue 45, docs/ha.md): each has its own ISC_HOME and its own artifact_root
# (no shared folder, no shared keys folder), on the mock cloud with real sshd nodes.
#   1. A burst goes in through replica 1; its cluster's SSH key is sealed in the store,
#      with no key file in either home; its rank logs become rows of the store, a few a
#      second per rank, not a row per line.
#   2. `isc logs --follow` through replica 2 (which does not hold the burst) is live: it
#      prints lines while the burst still runs under replica 1.
#   3. Replica 1 is killed -9 and its artifact_root taken away (its host is gone); replica
#      2 takes the burst over, reaches its nodes with the sealed key, and the burst
#      completes; `isc logs` through replica 2 shows the lines written while replica 1
#      held it and the end written under replica 2; the live follow ends with the end.
#   4. Closing the cluster deletes its key's row; no sanitizer report.
. "$(dirname "$0")/lib.sh"
sandbox_dir ha-noshare
chmod 755 "$dir" # as root, the server runs as postgres and must reach its folder in dir
pg=$dir/pg
noshare_cleanup() {
	[ -n "${follow_pid:-}" ] && kill "$follow_pid" 2>/dev/null
	[ -f "$dir/iscd2.pid" ] && kill -KILL "$(cat "$dir/iscd2.pid")" 2>/dev/null
	[ -f "$dir/iscd.pid" ] && kill_iscd
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap noshare_cleanup EXIT

"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" isc_noshare) || exit 1
export ISC_STORE_URL
sql() { psql "$ISC_STORE_URL" -qAtX -c "$1"; }

ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=250 SANDBOX_PROVIDERS=aws \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
# The one secret both replicas have besides the store's URL.
export ISC_MASTER_KEY_FILE=$dir/master.key
home1=$ISC_HOME
home2=$dir/home2
isc --home "$home2" init >/dev/null || exit 1
cp "$home1/config.toml" "$home2/config.toml"
# Each replica its own artifact_root: nothing shared.
for i in 1 2; do
	h=home$i
	mkdir -p "$dir/artifacts$i"
	printf 'artifact_root = "%s"\n%s\n' "$dir/artifacts$i" "$(cat "${!h}/config.toml")" >"${!h}/config.toml"
done

start_replica2() {
	echo "---- replica 2 start ----" >>"$dir/iscd2.log"
	ISC_HOME=$home2 "$ISC_BIN/iscd" 2>>"$dir/iscd2.log" &
	echo $! >"$dir/iscd2.pid"
	within 30 env ISC_HOME="$home2" "$ISC_BIN/isc" experiments --json
}
replica_of_pid() { sql "SELECT id FROM replicas WHERE pid = $1"; }
held_by() { [ "$(sql "SELECT count(*) FROM leases WHERE replica_id = '$1' AND experiment_id = '$2'")" = 1 ]; }
key_files() { find "$home1" "$home2" -path '*/keys/cl_*' 2>/dev/null | wc -l; }
log_rows() { sql "SELECT count(*) FROM rank_logs WHERE experiment_id = '$1'"; }
has_rows() { [ "$(log_rows "$1")" -gt 0 ]; }
follow_has() { grep -q "$1" "$dir/follow.out"; }

# A two-node burst printing 4 lines a second per rank for about 30 s.
cat >"$dir/noshare.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "noshare"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot", "aws-us-east-1-g5.xlarge-ondemand"]
command = 'echo "start rank $RANK"; for i in $(seq 1 120); do echo "line $i of rank $RANK"; sleep 0.25; done; echo "done rank $RANK"'
ISC

# 1. Replica 1 runs the burst.
check "replica 1 starts" start_iscd
first_pid=$(cat "$dir/iscd.pid")
first=$(replica_of_pid "$first_pid")
id=$(submit "$dir/noshare.isc")
check "the burst was accepted" test -n "$id"
check "the burst runs under replica 1" wait_status "$id" running 90
check "replica 1 holds its lease" held_by "$first" "$id"
cl=$(sql "SELECT id FROM clusters WHERE experiment_id = '$id' ORDER BY created_at_ms DESC LIMIT 1")
check "its cluster's key is sealed in the store" test "$(sql "SELECT count(*) FROM cluster_ssh_keys WHERE cluster_id = '$cl'")" = 1
check "no key file in either home" test "$(key_files)" = 0
check "the sealed row holds no PEM" test "$(sql "SELECT count(*) FROM cluster_ssh_keys WHERE cluster_id = '$cl' AND position(convert_to('PRIVATE', 'UTF8') in ciphertext) > 0")" = 0
check "rank logs reach the store" within 20 has_rows "$id"

# 2. Replica 2 starts; a live follow through it while replica 1 holds the burst.
check "replica 2 starts" start_replica2
other=$(replica_of_pid "$(cat "$dir/iscd2.pid")")
ISC_HOME=$home2 timeout 180 "$ISC_BIN/isc" logs "$id" --rank 0 --follow >"$dir/follow.out" 2>"$dir/follow.err" &
follow_pid=$!
check "isc logs --follow through replica 2 prints the start" within 20 follow_has "start rank 0"
n_before=$(grep -c '^line ' "$dir/follow.out")
sleep 3
n_after=$(grep -c '^line ' "$dir/follow.out")
check "... and stays live: more lines 3 s later ($n_before, then $n_after)" test "$n_after" -gt "$n_before"
check "replica 1 still holds the burst (replica 2 only serves)" held_by "$first" "$id"
check "the burst has not ended yet" bash -c "! grep -q 'done rank 0' '$dir/follow.out'"
lines_so_far=$(ISC_HOME=$home2 "$ISC_BIN/isc" logs "$id" --rank 0 | grep -c '^line ')
rows_so_far=$(sql "SELECT count(*) FROM rank_logs WHERE experiment_id = '$id' AND rank = 0")
echo "rank 0: $lines_so_far lines in $rows_so_far rows so far"
check "rows are batches, not one per line ($rows_so_far rows for $lines_so_far lines)" test "$rows_so_far" -lt "$lines_so_far"

# 3. Replica 1's host is gone: killed -9, its artifact_root taken away.
kill_iscd
rm -f "$dir/iscd.pid"
mv "$dir/artifacts1" "$dir/artifacts1.gone"
check "replica 2 takes the burst over within 20 s" within 20 held_by "$other" "$id"
export ISC_HOME=$home2
check "the burst completes under replica 2 (its nodes reached with the sealed key)" wait_status "$id" completed 120
check "the events say takeover" status_says "$id" takeover
check "one cluster, never a second gang" test "$(sql "SELECT count(*) FROM clusters WHERE experiment_id = '$id'")" = 1
isc logs "$id" --rank 0 >"$dir/rank0.txt" 2>"$dir/rank0.err"
check "isc logs through replica 2: the start, written while replica 1 held it" grep -q "start rank 0" "$dir/rank0.txt"
check "... and the end, written under replica 2" grep -q "done rank 0" "$dir/rank0.txt"
check "... with the takeover's replay marked" grep -q -- "---- isc: following rank 0 again" "$dir/rank0.txt"
check "isc logs --rank 1 through replica 2 has rank 1's end" bash -c "isc() { '$ISC_BIN/isc' \"\$@\"; }; isc logs '$id' --rank 1 | grep -q 'done rank 1'"
check "the follow through replica 2 saw the end" within 20 follow_has "done rank 0"
wait "$follow_pid"
rc=$?
follow_pid=
check "... and ended by itself with the burst (exit $rc)" test "$rc" = 0
check "replica 1's artifact_root was never made again" test ! -e "$dir/artifacts1"
rows=$(log_rows "$id")
bytes=$(sql "SELECT sum(len) FROM rank_logs WHERE experiment_id = '$id'")
echo "the store holds $rows rows, $bytes bytes of the burst's 2 rank logs"
check "no key file in either home after the takeover" test "$(key_files)" = 0

# 4. The cluster is closed once its nodes are gone: its key's row goes with it.
check "no instance left on the cloud" wait_no_live
key_gone() { [ "$(sql "SELECT count(*) FROM cluster_ssh_keys WHERE cluster_id = '$cl'")" = 0 ]; }
check "the closed cluster's key row is deleted" within 60 key_gone
pid2=$(cat "$dir/iscd2.pid")
kill -TERM "$pid2"
for _ in $(seq 1 100); do kill -0 "$pid2" 2>/dev/null || break; sleep 0.1; done
wait "$pid2" 2>/dev/null
rm -f "$dir/iscd2.pid"
check "no sanitizer report (replica 1)" no_sanitizer_report "$dir/iscd.log"
check "no sanitizer report (replica 2)" no_sanitizer_report "$dir/iscd2.log"
finish ha-noshare
