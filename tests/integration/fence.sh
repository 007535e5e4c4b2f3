#!/usr/bin/env bash
# A stale step cannot act (issue 48, docs/ha.md "What holds under a pause"). Two iscd
# replicas on one PostgreSQL store, on the mock cloud with real sshd nodes, as in ha.sh.
# Replica A is held at a crash point in the middle of a burst's step (ISC_PAUSE_AT with a
# pause file: only that worker waits), then frozen whole (SIGSTOP: a paused VM) past its
# lease; replica B takes the burst over and carries it on; A is resumed (SIGCONT) and
# finishes the step it was in. The mock cloud's own record of instances is the witness.
#   1. Held at place.cluster_recorded (the cluster and its launch intent recorded, no
#      credit hold yet): B resumes that cluster and runs it. Resumed, A neither closes
#      B's cluster nor deletes its key nor marks its intent failed; B never launches a
#      second gang; after isc cancel nothing runs on the cloud.
#   2. Held at lostnodes.replacement_recorded (a 3-node gang lost one node with notice;
#      the replacement recorded, the old cluster draining): B launches the replacement,
#      moves the two kept nodes into it and runs cycle 2. Resumed, A's failed credit hold
#      no longer falls back to a whole new gang: B's two kept nodes and its new node are
#      never terminated, nothing more is launched; after isc cancel nothing runs.
#   3. (one replica) A crash inside the whole-gang fallback of a replacement, before its
#      teardown: the next iscd finishes the failover at once (the kept nodes were left
#      idle and charged until replace_deadline_ms).
#   4. (one replica) The move of the kept nodes into their replacement fails: they are
#      not terminated with the old cluster, and move once the store takes the write.
# Needs the sanitizer build (crash and pause points).
. "$(dirname "$0")/lib.sh"
sandbox_dir fence
chmod 755 "$dir" # as root, the server runs as postgres and must reach its folder in dir
pg=$dir/pg
fence_cleanup() {
	[ -f "$dir/iscd.pid" ] && kill -CONT "$(cat "$dir/iscd.pid")" 2>/dev/null
	[ -f "$dir/iscd2.pid" ] && kill -KILL "$(cat "$dir/iscd2.pid")" 2>/dev/null
	[ -f "$dir/iscd.pid" ] && kill_iscd
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap fence_cleanup EXIT

"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" isc_fence) || exit 1
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
isc --home "$home2" init >/dev/null || exit 1
cp "$home1/config.toml" "$home2/config.toml"
# The keys' master key: every replica shares it with the store, and the clusters' SSH
# keys are sealed under it from the first burst on (docs/ha.md, issue 45).
export ISC_MASTER_KEY_FILE="$dir/master.key"
# Both replicas: the shared folders, and a short lease (the shortest allowed is 3000 ms)
# so that a takeover comes within seconds.
for h in "$home1" "$home2"; do
	{
		echo "artifact_root = \"$shared/artifacts\""
		echo "lease_ms = 4000"
		cat "$h/config.toml"
	} >"$h/config.toml.new" && mv "$h/config.toml.new" "$h/config.toml"
	rm -rf "$h/keys"
	ln -s "$shared/keys" "$h/keys"
done

# A gang that runs until stopped, checkpointing as it goes.
burst_file() {
	cat >"$dir/$1.isc" <<ISC
isc_project_id = "demo"
experiment_name = "fence-$1"
gpus = $2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "start rank \$RANK cycle \$STRONG_CYCLE_COUNT"; for i in \$(seq 1 1500); do echo \$i > /mnt/checkpoints/step; sleep 0.2; done'
ISC
}
burst_file two 2
burst_file three 3

# Replica A is the sandbox's home (lib.sh's start_iscd, dir/iscd.pid, dir/iscd.log);
# replica B has its own home, log and pid file.
start_b() {
	echo "---- replica B start ----" >>"$dir/iscd2.log"
	"$ISC_BIN/iscd" --home "$home2" 2>>"$dir/iscd2.log" &
	echo $! >"$dir/iscd2.pid"
	within 30 env ISC_HOME="$home2" "$ISC_BIN/isc" experiments --json
}
stop_b() {
	local pid
	pid=$(cat "$dir/iscd2.pid")
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	wait "$pid" 2>/dev/null
	rm -f "$dir/iscd2.pid"
}
replica_of_pid() { sql "SELECT id FROM replicas WHERE pid = $1"; }
held_by() { [ "$(sql "SELECT replica_id FROM leases WHERE experiment_id = '$1'")" = "$2" ]; }
paused_at() { grep -q "pause point $1 reached" "$dir/iscd.log"; }
cluster_state() { sql "SELECT state FROM clusters WHERE id = '$1'"; }
clusters_of() { sql "SELECT count(*) FROM clusters WHERE experiment_id = '$1'"; }
intent_state() { sql "SELECT state FROM intents WHERE cluster_id = '$1'"; }
# gone_of EXP: how many of the experiment's instances the cloud shows terminated (or going).
gone_of() { instances_of "$1" 'r["state"] in ("terminated", "shutting-down")'; }
# frozen_past_lease NAME: A is held at NAME; it is frozen whole and the pause let go (A's
# worker goes on once A is resumed). B then takes the burst over after the lease expired.
freeze_a() {
	kill -STOP "$(cat "$dir/iscd.pid")"
	rm -f "$dir/pause"
}
# resume_a: A runs again and finishes the step it was held in. Its renewal finds the lease
# gone (the log says so); its worker ran on from the pause point at once, with no cloud or
# SSH call left that could take long, so a few seconds more see all it does.
resume_a() {
	kill -CONT "$(cat "$dir/iscd.pid")"
	within 15 grep -q "no longer this replica's" "$dir/iscd.log"
	sleep 4
}

# ---- 1. held at place.cluster_recorded ----
touch "$dir/pause"
ISC_PAUSE_AT=place.cluster_recorded ISC_PAUSE_FILE=$dir/pause start_iscd || exit 1
a_pid=$(cat "$dir/iscd.pid")
id=$(submit "$dir/two.isc")
check "1: A holds at place.cluster_recorded" within 30 paused_at place.cluster_recorded
a=$(replica_of_pid "$a_pid")
cl=$(sql "SELECT id FROM clusters WHERE experiment_id = '$id'")
check "1: A recorded one cluster, with its pending intent" test "$(intent_state "$cl")" = pending
freeze_a
export ISC_HOME=$home2
check "1: replica B starts" start_b
b=$(replica_of_pid "$(cat "$dir/iscd2.pid")")
check "1: B takes the burst over" within 20 held_by "$id" "$b"
check "1: B runs A's cluster" wait_status "$id" running 90
check "1: one gang of 2 on the cloud" test "$(instances_of "$id")" = 2
resume_a
check "1: A's cluster, run by B, is not closed" test "$(cluster_state "$cl")" = running
check "1: its key is still there (sealed in the store)" test "$(sql "SELECT count(*) FROM cluster_ssh_keys WHERE cluster_id = '$cl'")" = 1
check "1: its intent is not marked failed" test "$(intent_state "$cl")" = launched
# isc_store_experiment_set_placement, a single UPDATE, wrote a next try on A's error path.
check "1: A set no next try on the burst" test "$(sql "SELECT next_attempt_ms FROM experiments WHERE id = '$id'")" = 0
check "1: the burst still runs" test "$(status_of "$id")" = running
check "1: A said it lost the lease mid-step" grep -q "$id: the lease was lost during this step" "$dir/iscd.log"
sleep 3 # B's ticks after A's resumption: it must not launch again
check "1: still one cluster" test "$(clusters_of "$id")" = 1
check "1: never a second gang" test "$(instances_of "$id")" = 2
check "1: nothing of the gang terminated" test "$(gone_of "$id")" = 0
check "1: the cancel is taken" isc cancel "$id"
check "1: cancelled" wait_status "$id" cancelled 60
check "1: after the cancel nothing runs on the cloud" wait_no_live "$id"
check "1: A still runs" kill -0 "$a_pid"

# ---- 2. held at lostnodes.replacement_recorded ----
# Both stop; A starts again, held at the new point, and takes the next burst.
stop_b
stop_iscd
export ISC_HOME=$home1
touch "$dir/pause"
echo "---- case 2 ----" >>"$dir/iscd.log"
ISC_PAUSE_AT=lostnodes.replacement_recorded ISC_PAUSE_FILE=$dir/pause start_iscd || exit 1
a_pid=$(cat "$dir/iscd.pid")
a=$(replica_of_pid "$a_pid")
id=$(submit "$dir/three.isc")
check "2: 3-node burst running under A" wait_status "$id" running 90
check "2: A holds its lease" held_by "$id" "$a"
first_rank1=$(sql "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND n.rank = 1")
check "2: replica B starts (and leaves the burst to A)" start_b
b=$(replica_of_pid "$(cat "$dir/iscd2.pid")")
# Rank 1 gets 30 s of notice: ranks 0 and 2 are kept.
kept=$(sql "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND n.rank <> 1 ORDER BY n.rank")
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$first_rank1\",\"notice_s\":30}"
check "2: A holds at lostnodes.replacement_recorded" within 30 paused_at lostnodes.replacement_recorded
r=$(sql "SELECT id FROM clusters WHERE experiment_id = '$id' AND replaces <> ''")
check "2: A recorded the replacement" test -n "$r"
freeze_a
export ISC_HOME=$home2
check "2: B takes the burst over" within 20 held_by "$id" "$b"
check "2: B runs cycle 2 on the replacement" wait_cycle "$id" 2 90
new=$(sql "SELECT instance_id FROM nodes WHERE cluster_id = '$r' AND instance_id NOT IN ('$(echo $kept | sed "s/ /','/g")')")
check "2: the replacement holds the 2 kept nodes and 1 new one" \
	test "$(sql "SELECT count(*) FROM nodes WHERE cluster_id = '$r'")" = 3 -a -n "$new"
resume_a
still_running() {
	local i
	for i in $kept $new; do
		[ "$(mock instances | /usr/bin/python3 -c 'import json,sys; print([r["state"] for r in json.load(sys.stdin) if r["id"] == sys.argv[1]][0])' "$i")" = running ] || {
			echo "$i is not running" >&2
			return 1
		}
	done
}
check "2: B's kept nodes and its new node still run" still_running
check "2: the replacement is not torn down" test "$(cluster_state "$r")" = running
check "2: its intent is not marked failed" test "$(intent_state "$r")" = launched
check "2: the burst still runs cycle 2" test "$(status_of "$id") $(status_of "$id" cycle_count)" = "running 2"
check "2: A said it lost the lease mid-step" grep -q "$id: the lease was lost during this step" "$dir/iscd.log"
sleep 3
check "2: 4 instances ever: 3, and 1 replacement" test "$(instances_of "$id")" = 4
check "2: still the kept nodes and the new one run" still_running
check "2: the cancel is taken" isc cancel "$id"
check "2: cancelled" wait_status "$id" cancelled 60
check "2: after the cancel nothing runs on the cloud" wait_no_live "$id"
check "2: A still runs" kill -0 "$a_pid"

# ---- 3. a crash inside the fallback of a replacement, before its teardown ----
# The replacement's launch finds no capacity in the gang's zone: the whole-gang failover.
# iscd aborts right before that fallback's teardown (lostnodes.fallback_started); the
# next iscd finishes the failover at once, rather than leave the kept nodes idle (their
# containers stopped) and charged until replace_deadline_ms (180 s) has passed.
stop_b
stop_iscd
export ISC_HOME=$home1
echo "---- case 3 ----" >>"$dir/iscd.log"
ISC_CRASH_AT=lostnodes.fallback_started start_iscd || exit 1
a_pid=$(cat "$dir/iscd.pid")
id=$(submit "$dir/three.isc")
check "3: 3-node burst running" wait_status "$id" running 90
zone=$(sql "SELECT zone FROM clusters WHERE experiment_id = '$id'")
lost=$(sql "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND n.rank = 1")
kept=$(sql "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND n.rank <> 1")
fault "{\"kind\":\"capacity\",\"instance_type\":\"g4dn.xlarge\",\"zone\":\"$zone\",\"count\":1}"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$lost\",\"notice_s\":30}"
for _ in $(seq 1 300); do kill -0 "$a_pid" 2>/dev/null || break; sleep 0.1; done
wait "$a_pid" 2>/dev/null
check "3: iscd aborted inside the fallback" test $? = 134
check "3: the log names the point" grep -q "crash point lostnodes.fallback_started reached" "$dir/iscd.log"
start_iscd || exit 1
kept_gone() {
	local i
	for i in $kept; do
		mock instances | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if [r for r in json.load(sys.stdin) if r["id"] == sys.argv[1] and r["state"] in ("terminated", "shutting-down")] else 1)' "$i" || return 1
	done
}
check "3: the failover is finished at once: the kept nodes terminated within 30 s" within 30 kept_gone
check "3: isc status says the whole-gang failover" status_says "$id" "whole-gang failover"
check "3: a new gang runs cycle 2" wait_cycle "$id" 2 90
check "3: the cancel is taken" isc cancel "$id"
check "3: cancelled" wait_status "$id" cancelled 60
check "3: after the cancel nothing runs on the cloud" wait_no_live "$id"

# ---- 4. the move of the kept nodes into their replacement fails ----
# A trigger of the test's own refuses to move a node row to another cluster (a store
# that fails that one write, as a full disk or a lost connection would). The drain must
# then leave the kept nodes be (they were terminated with the old cluster), and move
# them once the store takes the write again.
sql "CREATE FUNCTION fence_refuse_move() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
	IF NEW.cluster_id <> OLD.cluster_id THEN RAISE EXCEPTION 'fence.sh: moving nodes refused'; END IF;
	RETURN NEW; END \$\$;
	CREATE TRIGGER fence_refuse_move BEFORE UPDATE ON nodes FOR EACH ROW EXECUTE FUNCTION fence_refuse_move()"
id=$(submit "$dir/three.isc")
check "4: 3-node burst running" wait_status "$id" running 90
lost=$(sql "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND n.rank = 1")
kept=$(sql "SELECT n.instance_id FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.experiment_id = '$id' AND n.rank <> 1")
new="" # still_running: the kept nodes alone
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$lost\",\"notice_s\":30}"
check "4: the move is refused (the events say so)" within 60 status_says "$id" "moving the kept nodes of"
sleep 3 # several steps, each trying the drain again
check "4: the kept nodes were not terminated" still_running
sql "DROP TRIGGER fence_refuse_move ON nodes; DROP FUNCTION fence_refuse_move()"
check "4: once the store takes it, the kept nodes move and cycle 2 runs" wait_cycle "$id" 2 120
check "4: 4 instances ever: 3, and 1 replacement" test "$(instances_of "$id")" = 4
check "4: the kept nodes still run" still_running
check "4: the cancel is taken" isc cancel "$id"
check "4: cancelled" wait_status "$id" cancelled 60
check "4: after the cancel nothing runs on the cloud" wait_no_live "$id"

stop_iscd
rm -f "$dir/iscd.pid"
check "no sanitizer report (A)" no_sanitizer_report "$dir/iscd.log"
check "no sanitizer report (B)" no_sanitizer_report "$dir/iscd2.log"
finish fence
