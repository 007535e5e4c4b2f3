#!/usr/bin/env bash
# Two iscd replicas on one PostgreSQL store (issue 33, docs/ha.md), on the mock cloud
# with real sshd nodes. A throwaway PostgreSQL (tests/pg/pg-server) holds the store;
# each replica has its own ISC_HOME (config copied, the same broker_id), and both share
# artifact_root and the cluster keys' folder.
#   1. A second replica without artifact_root is refused, naming artifact_root and docs/ha.md;
#      lease_ms outside 3000..60000 is refused.
#   2. Bursts go in through replica 1 and run under its leases; replica 2 starts and leaves
#      them alone; replica 1 is killed -9 while they run; replica 2 takes every one over
#      within lease_ms + a tick (measured), completes every one, each with one gang and
#      nothing left running on the cloud.
#   3. The same the other way: bursts through replica 2, replica 1 restarted, replica 2
#      killed -9, replica 1 completes them.
#   4. A replica stalled (SIGSTOP) longer than the lease loses its bursts to the other and,
#      resumed, knows it (its renewal comes back without them) and leaves them alone.
#   5. A clean stop removes the replica's row; no sanitizer report.
. "$(dirname "$0")/lib.sh"
sandbox_dir ha
chmod 755 "$dir" # as root, the server runs as postgres and must reach its folder in dir
pg=$dir/pg
ha_cleanup() {
	[ -f "$dir/iscd2.pid" ] && kill -KILL "$(cat "$dir/iscd2.pid")" 2>/dev/null
	[ -f "$dir/iscd.pid" ] && kill_iscd
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap ha_cleanup EXIT

"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" isc_ha) || exit 1
export ISC_STORE_URL
sql() { psql "$ISC_STORE_URL" -qAtX -c "$1"; }

ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=250 SANDBOX_PROVIDERS=aws \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
home1=$ISC_HOME
home2=$dir/home2
shared=$dir/shared
mkdir -p "$shared/artifacts" "$shared/keys"
chmod 700 "$shared/keys"

check "the sandbox's setup is in PostgreSQL" test "$(sql "SELECT count(*) FROM orgs WHERE name = 'demo'")" = 1
check "isc init on a second home joins the schema" isc --home "$home2" init
# The second host's home (docs/ha.md): the first one's config (same broker_id, providers).
cp "$home1/config.toml" "$home2/config.toml"
# The keys' master key: every replica shares it with the store, and the clusters' SSH
# keys are sealed under it from the first burst on (docs/ha.md, issue 45).
export ISC_MASTER_KEY_FILE="$dir/master.key"

# Top-level keys go before the first [table] of config.toml.
set_top_key() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import sys
path, line = sys.argv[1:3]
text = open(path).read()
open(path, "w").write(line + "\n" + text)
PY
}

# 1. Replica 1 runs; a second replica without artifact_root is refused.
start_iscd
check "replica 1 registered" test "$(sql 'SELECT count(*) FROM replicas')" = 1
"$ISC_BIN/iscd" --home "$home2" >"$dir/refused.out" 2>&1
check "a second replica without artifact_root is refused" test $? -ne 0
check "the refusal names artifact_root and docs/ha.md" grep -q 'artifact_root.*docs/ha.md' "$dir/refused.out"
check "the refused replica left no row" test "$(sql 'SELECT count(*) FROM replicas')" = 1
# lease_ms outside 3000..60000 is refused before iscd registers.
mkdir -m 700 "$dir/home3"
for bad in 2999 60001; do
	{ echo "lease_ms = $bad"; cat "$home1/config.toml"; } >"$dir/home3/config.toml"
	"$ISC_BIN/iscd" --home "$dir/home3" >"$dir/lease.out" 2>&1
	check "lease_ms = $bad is refused" test $? -ne 0
	check "the refusal of lease_ms = $bad says why" grep -q 'lease_ms.*must be from 3000 to 60000 ms' "$dir/lease.out"
done
check "no replica registered by the refused ones" test "$(sql 'SELECT count(*) FROM replicas')" = 1
# A replica whose config.toml has another broker_id (isc init writes a fresh one; issue 48:
# it was accepted, and after a failover the instances the first one tagged leaked) is
# refused, naming both and docs/ha.md, even with artifact_root set.
isc --home "$dir/home4" init >/dev/null
set_top_key "$dir/home4/config.toml" "artifact_root = \"$dir/home4-artifacts\""
other_broker=$(sed -nE 's/^broker_id = "(.*)"/\1/p' "$dir/home4/config.toml")
first_broker=$(sed -nE 's/^broker_id = "(.*)"/\1/p' "$home1/config.toml")
check "isc init wrote another broker_id" test -n "$other_broker" -a "$other_broker" != "$first_broker"
timeout -s KILL 20 "$ISC_BIN/iscd" --home "$dir/home4" >"$dir/broker.out" 2>&1
check "a replica with another broker_id is refused" test $? -eq 1
check "the refusal names both broker_ids and docs/ha.md" \
	bash -c "grep -q '$first_broker' '$dir/broker.out' && grep -q '$other_broker' '$dir/broker.out' && grep -q 'docs/ha.md' '$dir/broker.out'"
check "the store keeps the first broker_id" test "$(sql 'SELECT broker_id FROM store_identity')" = "$first_broker"
check "each replica's row records its broker_id and boot id" \
	test "$(sql "SELECT count(*) FROM replicas WHERE broker_id = '$first_broker' AND boot_id = '$(cat /proc/sys/kernel/random/boot_id)'")" = 1
check "no replica registered by the refused one" test "$(sql 'SELECT count(*) FROM replicas')" = 1
stop_iscd

for h in "$home1" "$home2"; do
	set_top_key "$h/config.toml" "artifact_root = \"$shared/artifacts\""
	rm -rf "$h/keys"
	ln -s "$shared/keys" "$h/keys"
done

# A two-node burst that runs about 25 s, checkpointing as it goes.
cat >"$dir/ha.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "ha"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot", "aws-us-east-1-g5.xlarge-ondemand"]
command = 'echo "start rank $RANK"; for i in $(seq 1 125); do echo $i > /mnt/checkpoints/step; sleep 0.2; done; echo "done rank $RANK"'
ISC

# Replica 2's iscd: its own home, log and pid file.
start_replica2() {
	echo "---- replica 2 start ----" >>"$dir/iscd2.log"
	"$ISC_BIN/iscd" --home "$home2" 2>>"$dir/iscd2.log" &
	echo $! >"$dir/iscd2.pid"
	within 30 env ISC_HOME="$home2" "$ISC_BIN/isc" experiments --json
}
kill_replica2() {
	kill -KILL "$(cat "$dir/iscd2.pid")" 2>/dev/null
	wait "$(cat "$dir/iscd2.pid")" 2>/dev/null
	rm -f "$dir/iscd2.pid"
}
replica_of_pid() { sql "SELECT id FROM replicas WHERE pid = $1"; }
held_by() { sql "SELECT count(*) FROM leases WHERE replica_id = '$1' AND experiment_id IN ($2)"; }
# all_held_by REPLICA IN [N]: N (3) of the experiments IN are under REPLICA's lease.
all_held_by() { [ "$(held_by "$1" "$2")" = "${3:-3}" ]; }
# every_status IDS STATUS SECS: until each of the experiments is STATUS.
every_status() {
	local id
	for id in $1; do wait_status "$id" "$2" "$3" || return 1; done
}
# one_gang_each IDS: each experiment has one cluster and the cloud launched 2 instances for it.
one_gang_each() {
	local id
	for id in $1; do
		[ "$(sql "SELECT count(*) FROM clusters WHERE experiment_id = '$id'")" = 1 ] || {
			echo "$id has $(sql "SELECT count(*) FROM clusters WHERE experiment_id = '$id'") clusters" >&2
			return 1
		}
		[ "$(instances_of "$id")" = 2 ] || {
			echo "$id: the cloud launched $(instances_of "$id") instances" >&2
			return 1
		}
	done
}
took_over_each() {
	local id
	for id in $1; do status_says "$id" takeover || return 1; done
}

live_replicas() {
	sql "SELECT count(*) FROM replicas WHERE heartbeat_ms >= (extract(epoch from clock_timestamp())*1000)::bigint - 8000"
}

# run_takeover NAME FIRST_HOME OTHER_HOME START_OTHER KILL_FIRST: bursts through the first
# replica (pid first_pid, home FIRST_HOME); the other replica started by START_OTHER (which
# sets other_pid); the first killed -9 by KILL_FIRST; the other (home OTHER_HOME) completes
# them. isc asks whichever replica is alive.
run_takeover() {
	local name=$1 first_home=$2 other_home=$3 start_other=$4 kill_first=$5
	local ids="" in="" id t0 t1 first other
	export ISC_HOME=$first_home
	for _ in 1 2 3; do
		id=$(submit "$dir/ha.isc")
		ids="$ids $id"
		in="$in${in:+,}'$id'"
	done
	check "$name: 3 bursts running" every_status "$ids" running 90
	first=$(replica_of_pid "$first_pid")
	check "$name: every burst under the first replica's lease" test "$(held_by "$first" "$in")" = 3
	check "$name: the other replica starts" $start_other
	other=$(replica_of_pid "$other_pid")
	check "$name: both replicas live" test "$(live_replicas)" = 2
	sleep 2 # several of the other's ticks: it must leave the bursts alone
	check "$name: the other replica holds none of them" test "$(held_by "$other" "$in")" = 0
	check "$name: still one gang each" one_gang_each "$ids"
	$kill_first
	t0=$(date +%s%3N)
	export ISC_HOME=$other_home
	check "$name: the other replica takes all 3 over within 15 s" within 15 all_held_by "$other" "$in"
	t1=$(date +%s%3N)
	echo "$name: all 3 bursts taken over $((t1 - t0)) ms after kill -9 (lease_ms 8000, tick 250 ms)"
	# docs/metrics.md: the replica's own counter, read by the operator on its socket.
	check "$name: the other replica's metrics count the 3 takeovers" bash -c \
		"curl -s --unix-socket '$other_home/run/api.sock' http://x/metrics | grep -qx 'isc_lease_takeovers_total 3'"
	check "$name: every burst completes" every_status "$ids" completed 120
	check "$name: the events say takeover" took_over_each "$ids"
	check "$name: one gang each, never a second" one_gang_each "$ids"
	check "$name: no instance left on the cloud" wait_no_live
	# The rank logs are in the shared artifact_root (the Output Path), whole: started
	# under the first replica, finished under the other; isc logs reads them there.
	for id in $ids; do
		check "$name: $id's Output Path is in artifact_root" \
			test "$(status_of "$id" output_path)" = "$shared/artifacts/$id"
		check "$name: $id's rank 0 log has its start and its end" \
			bash -c "grep -q 'start rank 0' '$shared/artifacts/$id/rank_0.txt' && grep -q 'done rank 0' '$shared/artifacts/$id/rank_0.txt'"
		check "$name: isc logs through the other replica prints rank 1's end" \
			bash -c "'$ISC_BIN/isc' logs '$id' --rank 1 | grep -q 'done rank 1'"
	done
	check "$name: every lease given up" test "$(sql "SELECT count(*) FROM leases WHERE experiment_id IN ($in)")" = 0
}

# 2. Replica 1 takes the bursts; replica 2 starts; replica 1 dies.
start_iscd
first_pid=$(cat "$dir/iscd.pid")
start_other() {
	start_replica2 || return 1
	other_pid=$(cat "$dir/iscd2.pid")
}
run_takeover "replica 1 killed" "$home1" "$home2" start_other kill_iscd
rm -f "$dir/iscd.pid"

# 3. The other way: bursts through replica 2, replica 1 restarted, replica 2 dies.
first_pid=$(cat "$dir/iscd2.pid")
start_first() {
	ISC_HOME=$home1 start_iscd || return 1
	other_pid=$(cat "$dir/iscd.pid")
}
run_takeover "replica 2 killed" "$home2" "$home1" start_first kill_replica2

# 4. A replica stalled longer than the lease (SIGSTOP: a host that froze, a long GC pause)
# loses its bursts to the other; resumed, it knows and leaves them alone (no second gang).
export ISC_HOME=$home1
ids=""
in=""
for _ in 1 2; do
	id=$(submit "$dir/ha.isc")
	ids="$ids $id"
	in="$in${in:+,}'$id'"
done
check "stall: 2 bursts running" every_status "$ids" running 90
check "stall: replica 2 starts again" start_replica2
first=$(replica_of_pid "$(cat "$dir/iscd.pid")")
other=$(replica_of_pid "$(cat "$dir/iscd2.pid")")
check "stall: both bursts under replica 1's lease" all_held_by "$first" "$in" 2
# Stopped for longer than the lease: replica 2 takes both over while replica 1 is frozen.
# Had it frozen inside a write transaction, it would hold the store's write lock (on
# PostgreSQL an advisory lock) until the server ends that transaction after 5 s
# (idle_in_transaction_session_timeout, store/db_pg.c), still within the lease's 8 s.
# Resumed, replica 1 finds its leases expired (its renewal does not return them) and stops
# stepping them; there is never a second gang.
kill -STOP "$(cat "$dir/iscd.pid")"
t0=$(date +%s%3N)
check "stall: replica 2 takes both over while replica 1 is frozen" within 14 all_held_by "$other" "$in" 2
echo "stall: both bursts under replica 2's lease $(($(date +%s%3N) - t0)) ms after replica 1 froze"
kill -CONT "$(cat "$dir/iscd.pid")"
check "stall: resumed, replica 1 knows its leases expired" within 10 grep -q "no longer this replica's" "$dir/iscd.log"
live_leases() {
	sql "SELECT count(*) FROM leases WHERE experiment_id IN ($in) AND expires_ms >= (extract(epoch from clock_timestamp())*1000)::bigint"
}
both_live() { [ "$(live_leases)" = 2 ]; }
check "stall: both bursts under a live lease again" within 15 both_live
echo "stall: after replica 1 resumed, replica 2 holds $(held_by "$other" "$in") and replica 1 holds $(held_by "$first" "$in") of the 2 bursts"
export ISC_HOME=$home2
check "stall: both complete" every_status "$ids" completed 120
check "stall: one gang each, never a second" one_gang_each "$ids"
check "stall: no instance left on the cloud" wait_no_live
check "stall: replica 1 still runs" kill -0 "$(cat "$dir/iscd.pid")"

# 5. A clean stop removes the replica's row (both replicas); no sanitizer report.
pid1=$(cat "$dir/iscd.pid")
pid2=$(cat "$dir/iscd2.pid")
stop_iscd
kill -TERM "$pid2"
for _ in $(seq 1 100); do kill -0 "$pid2" 2>/dev/null || break; sleep 0.1; done
wait "$pid2" 2>/dev/null
check "iscd stopped (both)" bash -c "! kill -0 $pid1 2>/dev/null && ! kill -0 $pid2 2>/dev/null"
rm -f "$dir/iscd.pid" "$dir/iscd2.pid"
check "a clean stop removes the replica's row" test "$(sql "SELECT count(*) FROM replicas WHERE pid IN ($pid1, $pid2)")" = 0
check "no sanitizer report (replica 1)" no_sanitizer_report "$dir/iscd.log"
check "no sanitizer report (replica 2)" no_sanitizer_report "$dir/iscd2.log"
finish ha
