#!/usr/bin/env bash
# Checkpoints straight to object storage (issue 45, docs/artifacts.md), on the sandbox
# with artifact_root on the mock S3:
#   1. a 4-node burst whose rank 0 writes a 1 GiB checkpoint (sparse: fast to make, read
#      as 1 GiB) is interrupted; every rank resumes from the same step with the whole
#      file, and the bytes through iscd (its /proc/PID/io rchar + wchar, and the mock's
#      log of the requests iscd signed itself, the nodes using presigned URLs only) stay
#      below 1% of the checkpoint;
#   2. an upload cut off mid-part (the mock's cut_part fault) leaves the previous version
#      current, its multipart uploads aborted; the next sync after the fault records one;
#   3. a crafted manifest (a path out of /mnt) put in the store is refused before any node
#      is touched: nothing is written outside /mnt;
#   5. DELETE /v1/experiments/ID/artifacts: refused (409, audited) while the experiment
#      runs; once it ended, a member of its organisation is refused (403, audited),
#      another organisation's admin told it does not exist (404), and its admin's call
#      deletes its objects and manifests, audited;
#   6. a sync uploads only the files changed since the current version (path, size and
#      mtime as rsync's quick check): syncs of unchanged files PUT nothing and record no
#      version; one file replaced is the only one uploaded, the other keeps its older
#      object; after a restore on a fresh node (mtimes restored) a sync uploads nothing;
#   4. an artifact_root that is neither an absolute folder nor an s3:// URL stops iscd at
#      start, naming the key.
# Runs on SQLite, or on PostgreSQL with ISC_STORE_URL (tests/run-all's ISC_PG_SUITES).
. "$(dirname "$0")/lib.sh"
sandbox_dir s3ckpt
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_BOOT_DELAY_MS=300 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
s3ctl() { curl -sf "$MOCKS3_URL/_mock/$1" "${@:2}"; }
cfg=$ISC_HOME/config.toml
cp "$cfg" "$dir/config.orig"
# Top-level keys go above the first table.
{
	echo 'artifact_root = "s3://sandbox-data/ckpt"'
	echo "artifact_endpoint_s3 = \"$MOCKS3_URL\""
	echo 'artifact_url_ttl_s = 300'
	echo 'checkpoint_sync_ms = 4000'
	echo 'lossy_sync_ms = 600000'
	cat "$dir/config.orig"
} | grep -vE '^(checkpoint_sync_ms|lossy_sync_ms) = (2000|1000)$' >"$cfg"
start_iscd || { echo "iscd did not start" >&2; tail -5 "$dir/iscd.log" >&2; exit 1; }
iscd_pid=$(cat "$dir/iscd.pid")
# rchar + wchar: every byte iscd's process read or wrote (sockets, the store, logs); the
# checks use read_bytes + write_bytes, what it made its disk read and write (a checkpoint
# through iscd would be written to its disk once and read for every node).
io() { awk '/^rchar|^wchar/ {s += $2} END {printf "%d\n", s}' "/proc/$iscd_pid/io"; }
disk_io() { awk '/^read_bytes|^write_bytes/ {s += $2} END {printf "%d\n", s}' "/proc/$iscd_pid/io"; }
version_of() { store_sql -r "SELECT COALESCE(MAX(version), 0) FROM artifact_manifests WHERE experiment_id = '$1'"; }
bytes_of() { store_sql -r "SELECT COALESCE(MAX(total_bytes), 0) FROM artifact_manifests WHERE experiment_id = '$1' AND version = (SELECT MAX(version) FROM artifact_manifests WHERE experiment_id = '$1')"; }
GiB=1073741824

# 1. A 4-node burst with a 1 GiB checkpoint, interrupted.
cat >"$dir/four.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "s3ckpt-four"
gpus = 4
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "RANK=$RANK CYCLE=$STRONG_CYCLE_COUNT FROM=$(cat /mnt/checkpoints/step 2>/dev/null || echo none) BIG=$(stat -c %s /mnt/checkpoints/big 2>/dev/null || echo none)"; if [ "$STRONG_CYCLE_COUNT" = 1 ]; then if [ "$RANK" = 0 ]; then truncate -s 1G /mnt/checkpoints/big; echo 7 > /mnt/checkpoints/step; fi; sleep 600; else sleep 600; fi'
ISC
io0=$(io)
dio0=$(disk_io)
s3ctl requests >"$dir/req0.json"
id=$(submit "$dir/four.isc")
check "1: the 4-node burst runs" wait_status "$id" running 90
big_recorded() { [ "$(bytes_of "$id")" -ge $GiB ] 2>/dev/null; }
check "1: a checkpoint version of 1 GiB is recorded in the store" within 120 big_recorded
check "1: the event names the version sent straight to the bucket" status_says "$id" 'checkpoint version [0-9]+ in the bucket'
v1=$(version_of "$id")
check "1: the object is in the bucket with a multipart ETag" \
	bash -c "curl -sf '$MOCKS3_URL/_mock/requests' | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if any(x.get(\"action\")==\"CompleteMultipartUpload\" and x[\"status\"]==200 for x in r) else 1)'"
victim=$(running_instance "$id" oldest)
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":5}"
check "1: the interruption is seen" within 30 status_says "$id" interrupted
check "1: running again in cycle 2" wait_cycle "$id" 2 150
out=$(status_of "$id" output_path)
for r in 0 1 2 3; do
	check "1: rank $r resumed from step 7 with the whole 1 GiB checkpoint" \
		within 60 grep -q "RANK=$r CYCLE=2 FROM=7 BIG=$GiB" "$out/rank_$r.txt"
done
io1=$(io)
dio1=$(disk_io)
s3ctl requests >"$dir/req1.json"
/usr/bin/python3 - "$dir/req0.json" "$dir/req1.json" "$GiB" >"$dir/bytes.txt" <<'PY'
import json, sys
before, after, gib = len(json.load(open(sys.argv[1]))), json.load(open(sys.argv[2])), int(sys.argv[3])
new = after[before:]
own = sum(x.get("bytes_in", 0) + x.get("bytes_out", 0) for x in new if not x["presigned"])
nodes_in = sum(x.get("bytes_in", 0) for x in new if x["presigned"])
nodes_out = sum(x.get("bytes_out", 0) for x in new if x["presigned"])
print(own, nodes_in, nodes_out)
PY
read -r own nodes_in nodes_out <"$dir/bytes.txt"
io_delta=$((io1 - io0))
dio_delta=$((dio1 - dio0))
echo "measured: iscd rchar+wchar ${io_delta} B (sockets, store, logs), read_bytes+write_bytes ${dio_delta} B; iscd's own S3 requests ${own} B; nodes sent ${nodes_in} B and fetched ${nodes_out} B by presigned URL (checkpoint ${GiB} B)"
check "1: the nodes uploaded the checkpoint themselves (presigned part PUTs)" test "$nodes_in" -ge "$GiB"
check "1: the nodes fetched it themselves, once each of 4 (presigned GETs)" test "$nodes_out" -ge $((4 * GiB))
check "1: iscd's own S3 requests moved under 1% of the checkpoint ($own B)" test "$own" -lt $((GiB / 100))
check "1: iscd's process read and wrote under 1% of the checkpoint on its disk ($dio_delta B)" test "$dio_delta" -lt $((GiB / 100))
# Through iscd, the checkpoint alone would be 1 GiB in and 4 GiB out of its process.
check "1: everything iscd's process read and wrote is under 5% of what a restore through it moves ($io_delta B)" test "$io_delta" -lt $((5 * GiB / 20))
isc cancel "$id" >/dev/null
check "1: cancelled" wait_status "$id" cancelled 60

# 2. An upload cut off mid-part leaves the previous version current.
cat >"$dir/one.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "s3ckpt-one"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "CYCLE=$STRONG_CYCLE_COUNT FROM=$(cat /mnt/checkpoints/step 2>/dev/null || echo none)"; head -c 9000000 /dev/urandom > /mnt/checkpoints/w; for i in $(seq 1 600); do echo $i > /mnt/checkpoints/step; sleep 1; done'
ISC
id2=$(submit "$dir/one.isc")
check "2: the 1-node burst runs" wait_status "$id2" running 90
version_above() { [ "$(version_of "$1")" -gt "$2" ] 2>/dev/null; }
check "2: a first version is recorded" within 60 version_above "$id2" 0
api_delete() { curl -s -o "$dir/del.json" -w '%{http_code}' --unix-socket "$ISC_HOME/run/api.sock" -X DELETE "http://isc/v1/experiments/$1/artifacts"; }
check "5: DELETE of a running experiment's artifacts is refused (409)" test "$(api_delete "$id2")" = 409
check "5: ... and the refusal is audited" test "$(store_sql -r "SELECT COUNT(*) FROM audit WHERE target = '$id2' AND status = 409")" -ge 1
s3ctl fault -X POST -d '{"kind":"cut_part","count":100000}' >/dev/null
vcut=$(version_of "$id2")
check "2: the sync with parts cut off fails, saying the previous version stays" \
	within 60 status_says "$id2" 'the previous version stays current'
check "2: the previous version is still current" test "$(version_of "$id2")" = "$vcut"
no_uploads() { [ "$(s3ctl uploads | tr -d ' \n')" = "[]" ]; }
check "2: the torn uploads were aborted (none left in progress)" within 20 no_uploads
s3ctl fault -X DELETE >/dev/null
check "2: after the fault, the next sync records a new version" within 60 version_above "$id2" "$vcut"

# 3. A crafted manifest in the store changes nothing on the node.
v=$(version_of "$id2")
org=$(store_sql -r "SELECT org_id FROM experiments WHERE id = '$id2'")
crafted='{"version":1000,"entries":[{"path":"checkpoints","type":"dir"},{"path":"checkpoints/../../root/pwned","type":"file","size":5,"key":"ckpt/@'$org'/'$id2'/v1000/checkpoints/../../root/pwned","etag":"0123456789abcdef0123456789abcdef","part_size":8388608}]}'
store_sql "INSERT INTO artifact_manifests (experiment_id, version, org_id, total_bytes, manifest_json, created_at_ms) VALUES ('$id2', 1000, $org, 5, '$crafted', 0)"
# Syncs stop making versions above the crafted one: it is refused as the current one.
victim=$(running_instance "$id2" oldest)
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":2}"
check "3: the crafted manifest is refused, naming the rule" \
	within 90 bash -c "grep -q 'manifest is refused.*\"\\.\\.\"' '$dir/iscd.log' || '$ISC_BIN/isc' status '$id2' | grep -q 'manifest is refused'"
check "3: nothing was written outside /mnt on any node" test -z "$(find "$dir" -name pwned 2>/dev/null)"
# Its restore refused (the manifest is the store's, not something a retry fixes), the
# experiment ends: failed, naming the refusal, or cancelled by the cancel below.
isc cancel "$id2" >/dev/null 2>&1
ended() { case $(status_of "$id2") in failed | cancelled) return 0 ;; esac; return 1; }
check "3: the experiment ended rather than run on a refused restore" within 60 ended

# 6. Only what changed is uploaded (rsync's quick check: path, size, mtime_ns).
# A sync is known to have run once the cluster's sync clock moved twice: the clock moves
# when a sync is due and the sync runs in that same step of the experiment.
clock_of() { store_sql -r "SELECT COALESCE(MAX(s.checkpoints_at_ms), 0) FROM sync_clocks s JOIN clusters c ON c.id = s.cluster_id WHERE c.experiment_id = '$1'"; }
clock_above() { [ "$(clock_of "$1")" -gt "$2" ] 2>/dev/null; }
two_syncs() {
	local c
	c=$(clock_of "$1")
	within 60 clock_above "$1" "$c" || return 1
	c=$(clock_of "$1")
	within 60 clock_above "$1" "$c"
}
# req_mark: how many requests the mock logged so far; put_bytes EXP MARK: the part PUTs
# (presigned) of EXP's objects since MARK, "COUNT BYTES".
req_mark() { s3ctl requests | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
put_bytes() {
	s3ctl requests | /usr/bin/python3 -c '
import json, sys
new = json.load(sys.stdin)[int(sys.argv[2]):]
puts = [x for x in new if x["op"] == "PUT" and x["presigned"] and "/" + sys.argv[1] + "/" in x["key"]]
print(len(puts), sum(x.get("bytes_in", 0) for x in puts))' "$1" "$2"
}
# key_of EXP PATH: the current manifest's key of PATH.
key_of() {
	store_sql -r "SELECT manifest_json FROM artifact_manifests WHERE experiment_id = '$1' AND version = (SELECT MAX(version) FROM artifact_manifests WHERE experiment_id = '$1')" |
		/usr/bin/python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(e["key"] for e in m["entries"] if e["path"] == sys.argv[1]))' "$2"
}
# Written next to the folder and renamed in: a sync never lists half a file.
cat >"$dir/incr.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "s3ckpt-incr"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "CYCLE=$STRONG_CYCLE_COUNT A=$(md5sum </mnt/checkpoints/a 2>/dev/null | cut -c1-32) B=$(md5sum </mnt/checkpoints/b 2>/dev/null | cut -c1-32)"; if [ "$STRONG_CYCLE_COUNT" = 1 ]; then head -c 9000000 /dev/urandom >/mnt/.a && mv /mnt/.a /mnt/checkpoints/a; head -c 3000000 /dev/urandom >/mnt/.b && mv /mnt/.b /mnt/checkpoints/b; fi; sleep 600'
ISC
id6=$(submit "$dir/incr.isc")
check "6: the 1-node burst runs" wait_status "$id6" running 90
full() { [ "$(bytes_of "$1")" = "$2" ]; }
check "6: a version with both files (12000000 bytes) is recorded" within 90 full "$id6" 12000000
v6=$(version_of "$id6")
key_a=$(key_of "$id6" checkpoints/a)
mark=$(req_mark)
check "6: two more syncs ran" two_syncs "$id6"
read -r n_put put_b <<<"$(put_bytes "$id6" "$mark")"
echo "measured: syncs of unchanged files PUT $n_put part(s), $put_b B (checkpoint 12000000 B)"
check "6: syncs of unchanged files PUT no part ($n_put PUTs, $put_b B)" test "$n_put" = 0
check "6: ... and record no new version (still $v6)" test "$(version_of "$id6")" = "$v6"
check "6: ... the version before it is not pruned" test "$(store_sql -r "SELECT COUNT(*) FROM artifact_manifests WHERE experiment_id = '$id6'")" -ge "$((v6 > 1 ? 2 : 1))"
# One file replaced on the node (its folder is DIR/mock/nodes/ID/mnt on this host).
iid=$(running_instance "$id6")
mnt=$dir/mock/nodes/$iid/mnt
check "6: the node's folder is on this host" test -f "$mnt/checkpoints/b"
head -c 2000000 /dev/urandom >"$mnt/.b" && mv "$mnt/.b" "$mnt/checkpoints/b"
mark=$(req_mark)
check "6: the change makes a new version" within 60 full "$id6" 11000000
v6b=$(version_of "$id6")
read -r n_put put_b <<<"$(put_bytes "$id6" "$mark")"
echo "measured: the sync of one changed file PUT $n_put part(s), $put_b B"
check "6: only the changed file was uploaded ($put_b B)" test "$put_b" = 2000000
check "6: ... under the new version's prefix" bash -c "[[ '$(key_of "$id6" checkpoints/b)' == */v$v6b/checkpoints/b ]]"
check "6: ... the unchanged file keeps its older object ($key_a)" test "$(key_of "$id6" checkpoints/a)" = "$key_a"
# A restore on a fresh node (it fetches a's older object: prune kept it), then syncs: the
# restored files keep rank 0's mtimes.
sum_a=$(md5sum <"$mnt/checkpoints/a" | cut -c1-32)
sum_b=$(md5sum <"$mnt/checkpoints/b" | cut -c1-32)
mtimes() { (cd "$1/checkpoints" && find a b -printf '%p %T@\n'); }
mt_old=$(mtimes "$mnt")
# The sync within the notice lists lossy too: a version with that folder may come, with
# nothing uploaded (counted from here).
mark=$(req_mark)
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$iid\",\"notice_s\":2}"
check "6: running again in cycle 2" wait_cycle "$id6" 2 150
v6c=$(version_of "$id6") # the restore came before running; the first sync 4 s after
out6=$(status_of "$id6" output_path)
check "6: the fresh node restored both files" within 60 grep -q "CYCLE=2 A=$sum_a B=$sum_b" "$out6/rank_0.txt"
iid2=$(running_instance "$id6" newest)
check "6: ... on a fresh node, with rank 0's mtimes to the nanosecond" \
	test "$iid2" != "$iid" -a "$(mtimes "$dir/mock/nodes/$iid2/mnt")" = "$mt_old"
check "6: two syncs ran after the restore" two_syncs "$id6"
read -r n_put put_b <<<"$(put_bytes "$id6" "$mark")"
echo "measured: the syncs around the restore PUT $n_put part(s), $put_b B"
check "6: the syncs after the restore PUT no part ($n_put PUTs, $put_b B)" test "$n_put" = 0
check "6: ... and record no new version (still $v6c)" test "$(version_of "$id6")" = "$v6c"
isc cancel "$id6" >/dev/null
check "6: cancelled" wait_status "$id6" cancelled 60

# 5. DELETE /v1/experiments/ID/artifacts: the objects and manifests of an ended experiment.
# every object the experiment's completed uploads made was deleted (the mock's log)
objects_deleted() {
	/usr/bin/python3 - "$MOCKS3_URL" "$1" <<'PY'
import json, sys, urllib.request
log = json.load(urllib.request.urlopen(sys.argv[1] + "/_mock/requests"))
ours = lambda x: "/" + sys.argv[2] + "/" in x["key"]
deleted = {x["key"] for x in log if ours(x) and x["op"] == "DELETE" and x["status"] == 204}
made = {x["key"] for x in log if ours(x) and x.get("action") == "CompleteMultipartUpload" and x["status"] == 200}
sys.exit(0 if made and made <= deleted else 1)
PY
}
# Who may: an admin of the experiment's organisation; a member is refused (403), another
# organisation's admin told nothing exists (404). As OS users over the socket (peer
# credentials), as api-isolation.sh: needs root, useradd and runuser.
# as_delete USER ID: the status; the body into del.json (which the user cannot write).
as_delete() {
	local out
	out=$(runuser -u "$1" -- curl -s -w '\n%{http_code}' --unix-socket "$ISC_HOME/run/api.sock" -X DELETE "http://isc/v1/experiments/$2/artifacts")
	printf '%s\n' "${out%$'\n'*}" >"$dir/del.json"
	echo "${out##*$'\n'}"
}
if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null && command -v runuser >/dev/null; then
	tag=s3c$(($$ % 100000))
	users=()
	for r in adm mem oth; do
		useradd -M -N -d /nonexistent -s /usr/sbin/nologin "$tag-$r" && users+=("$tag-$r")
	done
	old_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
	trap "for u in ${users[*]}; do userdel \"\$u\" 2>/dev/null; done; $old_trap" EXIT
	chmod 0711 "$dir" # the users reach $ISC_HOME/run/api.sock by name
	isc org add s3c-other >/dev/null
	for r in adm mem oth; do isc user add "$tag-$r" >/dev/null 2>&1; done
	isc member add --org demo "$tag-adm" --role admin >/dev/null
	isc member add --org demo "$tag-mem" --role member >/dev/null
	isc member add --org s3c-other "$tag-oth" --role admin >/dev/null
	check "5: a member of the organisation may not delete its artifacts (403)" test "$(as_delete "$tag-mem" "$id")" = 403
	check "5: ... audited" test "$(store_sql -r "SELECT COUNT(*) FROM audit WHERE target = '$id' AND status = 403 AND actor LIKE '%$tag-mem%'")" -ge 1
	check "5: another organisation's admin is told it does not exist (404)" test "$(as_delete "$tag-oth" "$id")" = 404
	check "5: ... and the manifests are still there" test "$(version_of "$id")" -gt 0
	check "5: DELETE by an admin of the organisation answers 200" test "$(as_delete "$tag-adm" "$id")" = 200
	check "5: ... audited with the admin as actor" test "$(store_sql -r "SELECT COUNT(*) FROM audit WHERE target = '$id' AND status = 200 AND actor LIKE '%$tag-adm%'")" -ge 1
else
	echo "s3ckpt: the role checks of DELETE are skipped: they need root, useradd and runuser"
	check "5: DELETE of the ended experiment's artifacts answers 200" test "$(api_delete "$id")" = 200
fi
check "5: ... naming the objects deleted" grep -q '"objects_deleted": *[1-9]' "$dir/del.json"
check "5: ... its manifests are gone from the store" test "$(version_of "$id")" = 0
check "5: ... its objects are gone from the bucket" objects_deleted "$id"
check "5: ... and the call is audited" test "$(store_sql -r "SELECT COUNT(*) FROM audit WHERE target = '$id' AND status = 200")" -ge 1

# 4. A bad artifact_root stops iscd at start, naming the key.
stop_iscd
for bad in 'sandbox-data/x' 'gs://sandbox-data/x' 's3://Bad_Bucket/x'; do
	sed -i "s|^artifact_root = .*|artifact_root = \"$bad\"|" "$cfg"
	"$ISC_BIN/iscd" >"$dir/bad.out" 2>&1
	rc=$?
	check "4: artifact_root = \"$bad\" stops iscd (exit $rc)" test "$rc" -ne 0
	check "4: ... naming artifact_root" grep -q 'artifact_root' "$dir/bad.out"
done
rm -f "$dir/iscd.pid"
finish s3ckpt
