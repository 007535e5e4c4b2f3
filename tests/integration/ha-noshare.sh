#!/usr/bin/env bash
# Two iscd replicas whose homes share nothing but the PostgreSQL store and the keys'
# master key (issue 45, docs/ha.md): each has its own ISC_HOME, and both the same
# artifact_root on the mock S3 (no shared folder, no shared keys folder), on the mock
# cloud with real sshd nodes: PostgreSQL, the bucket and the master key are all they share.
#   1. A burst goes in through replica 1; its cluster's SSH key is sealed in the store,
#      with no key file in either home; its rank logs become rows of the store, a few a
#      second per rank, not a row per line.
#   2. `isc logs --follow` through replica 2 (which does not hold the burst) is live: it
#      prints lines while the burst still runs under replica 1.
#   3. Replica 1 is killed -9 and its artifact_root taken away (its host is gone); replica
#      2 takes the burst over, reaches its nodes with the sealed key, and the burst
#      completes; `isc logs` through replica 2 shows the lines written while replica 1
#      held it and the end written under replica 2; the live follow ends with the end.
#   3b. A second burst, submitted through replica 1, wrote a checkpoint that replica 1
#      synced to the bucket; after the takeover its node is interrupted, and the new node
#      restores from the bucket (presigned GETs of the manifest's objects, made by the node)
#      and the rank resumes from the synced step; neither home holds the checkpoint's bytes.
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
# Both replicas the same artifact_root on the mock S3 (the bucket's credentials are in
# their environment, from the sandbox's env): no folder shared. Top-level keys go above
# the first table.
for i in 1 2; do
	h=home$i
	printf 'artifact_root = "s3://sandbox-data/noshare"\nartifact_endpoint_s3 = "%s"\n%s\n' \
		"$MOCKS3_URL" "$(cat "${!h}/config.toml")" >"${!h}/config.toml"
done
s3ctl() { curl -sf "$MOCKS3_URL/_mock/$1" "${@:2}"; }

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
# A one-node burst whose first cycle writes a checkpoint (a step number and a blob with a
# marker, to look for its bytes on disk) and waits; its second cycle prints what it found.
cat >"$dir/ckpt.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "noshare-ckpt"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "CYCLE=$STRONG_CYCLE_COUNT FROM=$(cat /mnt/checkpoints/step 2>/dev/null || echo none) BLOB=$(wc -c </mnt/checkpoints/blob 2>/dev/null || echo none)"; if [ "$STRONG_CYCLE_COUNT" = 1 ]; then printf "noshare-ckpt-%s\n" $(seq 1 2000) >/mnt/checkpoints/blob; echo 5 >/mnt/checkpoints/step; sleep 600; fi'
ISC
blob_bytes=$(printf 'noshare-ckpt-%s\n' $(seq 1 2000) | wc -c)
ckpt_version() { sql "SELECT COALESCE(MAX(version), 0) FROM artifact_manifests WHERE experiment_id = '$1'"; }
has_ckpt() { [ "$(ckpt_version "$1")" -gt 0 ]; }

# 1. Replica 1 runs the burst.
check "replica 1 starts" start_iscd
first_pid=$(cat "$dir/iscd.pid")
first=$(replica_of_pid "$first_pid")
id=$(submit "$dir/noshare.isc")
check "the burst was accepted" test -n "$id"
ckid=$(submit "$dir/ckpt.isc")
check "the checkpointing burst was accepted" test -n "$ckid"
check "the burst runs under replica 1" wait_status "$id" running 90
check "the checkpointing burst runs under replica 1" wait_status "$ckid" running 90
check "replica 1 holds the checkpointing burst" held_by "$first" "$ckid"
check "replica 1 synced its checkpoint to the bucket (a manifest in the store)" within 60 has_ckpt "$ckid"
check "... the event names the version in the bucket" status_says "$ckid" 'checkpoint version [0-9]+ in the bucket'
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

# 3. Replica 1's host is gone: killed -9.
kill_iscd
rm -f "$dir/iscd.pid"
check "replica 2 takes the burst over within 20 s" within 20 held_by "$other" "$id"
check "... and the checkpointing burst" within 20 held_by "$other" "$ckid"
export ISC_HOME=$home2

check "the burst completes under replica 2 (its nodes reached with the sealed key)" wait_status "$id" completed 120
check "the events say takeover" status_says "$id" takeover
check "one cluster, never a second gang" test "$(sql "SELECT count(*) FROM clusters WHERE experiment_id = '$id'")" = 1
# Read as soon as the completion is recorded: the teardown wrote the ranks' last bytes
# (their end) into the store before it (the shipper's once-a-second batches otherwise
# left them 0.4 s after, and a follow that stops at the end missed them).
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
rows=$(log_rows "$id")
bytes=$(sql "SELECT sum(len) FROM rank_logs WHERE experiment_id = '$id'")
echo "the store holds $rows rows, $bytes bytes of the burst's 2 rank logs"
check "no key file in either home after the takeover" test "$(key_files)" = 0

# 3b. The checkpointing burst's node is interrupted: the new node restores from the bucket.
ckv=$(ckpt_version "$ckid")
s3ctl requests >"$dir/req0.json"
victim=$(running_instance "$ckid" oldest)
check "the checkpointing burst has a running node" test -n "$victim"
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":0}"
check "the interruption is seen by replica 2" within 30 status_says "$ckid" interrupted
check "the checkpointing burst ends after its restored cycle 2" wait_status "$ckid" completed 120
isc logs "$ckid" --rank 0 >"$dir/ckpt0.txt" 2>"$dir/ckpt0.err"
check "rank 0 resumed from the synced step 5 with the whole blob ($blob_bytes B)" \
	grep -q "CYCLE=2 FROM=5 BLOB=$blob_bytes" "$dir/ckpt0.txt"
s3ctl requests >"$dir/req1.json"
# The version restored is the one whose objects were fetched by presigned GET (what the
# nodes use; iscd signs its own requests) after the interruption: every file of that
# version, as the nodes uploaded it (presigned parts, completed), was fetched. Syncs go on
# every checkpoint_sync_ms and older versions are pruned, so the keys name the version.
/usr/bin/python3 - "$dir/req0.json" "$dir/req1.json" "$ckid" >"$dir/restore.txt" <<'PY'
import json, re, sys
before, log, exp = len(json.load(open(sys.argv[1]))), json.load(open(sys.argv[2])), sys.argv[3]
ver = lambda k: (re.search("/" + exp + r"/v([0-9]+)/", k) or [None, None])[1]
gets = {x["key"] for x in log[before:] if x["op"] == "GET" and x["presigned"] and x["status"] in (200, 206) and ver(x["key"])}
vs = {ver(k) for k in gets}
v = vs.pop() if len(vs) == 1 else None
made = {x["key"] for x in log if x.get("action") == "CompleteMultipartUpload" and x["status"] == 200 and ver(x["key"]) == v}
by_node = {x["key"] for x in log if x.get("action") == "UploadPart" and x["presigned"] and ver(x["key"]) == v}
ok = v is not None and gets == made == by_node and any(k.endswith("/checkpoints/step") for k in gets)
print(v or "none", len(made), len(gets), "yes" if ok else "no")
PY
read -r rv n_made n_got restored_ok <"$dir/restore.txt"
echo "restore: $n_got of the $n_made objects under v$rv/ fetched by presigned GET (the current manifest before the interruption: version $ckv)"
check "the new node fetched every object under v$rv/ by presigned GET ($n_got of $n_made), as the nodes uploaded them" \
	test "$restored_ok" = yes
check "no copy of the checkpoint's bytes in either home" bash -c "! grep -rqs 'noshare-ckpt-2000' '$home1' '$home2'"

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
