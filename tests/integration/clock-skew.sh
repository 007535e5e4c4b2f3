#!/usr/bin/env bash
# Two iscd replicas on one PostgreSQL store whose hosts' clocks disagree (issue 48,
# docs/ha.md "Store outages, replica identity and clocks"): replica 2 runs under Debian's
# faketime 40 s ahead (FAKETIME_DONT_FAKE_MONOTONIC=1: a real skew leaves the monotonic
# clock alone), replica 1 on the true clock. Every deadline, absence window and meter
# period is measured by the store's clock (isc_store_now_ms), so:
#   1. replica 2 reports the skew it corrects (its store clock about 40 s behind its own);
#   2. while replica 1 lives, replica 2 takes none of its leases (none stolen early);
#   3. the cloud's listing omits the running nodes once for replica 1, which records them
#      missing, then once for replica 2 (each held still by SIGSTOP for that moment): a
#      node missing for a second is not counted absent (node_absence_confirm_ms 30 s);
#      before, replica 2 compared its own clock with the absent_since_ms replica 1 wrote,
#      found 40 s > 30 s and took the nodes for terminated;
#   4. every burst completes with one gang, never interrupted; nothing left on the cloud;
#   5. replica 1 killed -9: replica 2 takes the bursts over no sooner than the lease.
. "$(dirname "$0")/lib.sh"
sandbox_dir skew
chmod 755 "$dir"
pg=$dir/pg
skew_cleanup() {
	[ -f "$dir/iscd2.pid" ] && kill -KILL "$(cat "$dir/iscd2.pid")" 2>/dev/null
	[ -f "$dir/iscd.pid" ] && kill_iscd
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap skew_cleanup EXIT
libfaketime=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n 1)
command -v faketime >/dev/null && [ -n "$libfaketime" ] || {
	echo "clock-skew: faketime is missing (Debian package faketime)" >&2
	exit 1
}

"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" isc_skew) || exit 1
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
isc --home "$home2" init >/dev/null
cp "$home1/config.toml" "$home2/config.toml"
# The keys' master key: every replica shares it with the store, and the clusters' SSH
# keys are sealed under it from the first burst on (docs/ha.md, issue 45).
export ISC_MASTER_KEY_FILE="$dir/master.key"
for h in "$home1" "$home2"; do
	/usr/bin/python3 - "$h/config.toml" "artifact_root = \"$shared/artifacts\"" <<'PY'
import sys
path, line = sys.argv[1:3]
text = open(path).read()
open(path, "w").write(line + "\n" + text)
PY
	rm -rf "$h/keys"
	ln -s "$shared/keys" "$h/keys"
done

cat >"$dir/skew.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "skew"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "start rank $RANK"; for i in $(seq 1 150); do echo $i > /mnt/checkpoints/step; sleep 0.2; done; echo "done rank $RANK"'
ISC

start_skewed() {
	echo "---- replica 2 start (faketime +40) ----" >>"$dir/iscd2.log"
	# The sanitizer's runtime must come first among the libraries; faketime's preload
	# comes before it, which is harmless here.
	# faketime -f '+40' iscd, without the faketime process between: its pid is iscd's.
	# FAKETIME_FORCE_MONOTONIC_FIX=0: with FAKETIME_DONT_FAKE_MONOTONIC=1, libfaketime's
	# own pthread_cond_timedwait on a CLOCK_MONOTONIC condition returns at once (measured:
	# a 1 s wait took 0 ms), and the heartbeat thread then spun.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		LD_PRELOAD=$libfaketime FAKETIME=+40 FAKETIME_DONT_FAKE_MONOTONIC=1 \
		FAKETIME_FORCE_MONOTONIC_FIX=0 \
		"$ISC_BIN/iscd" --home "$home2" 2>>"$dir/iscd2.log" &
	echo $! >"$dir/iscd2.pid"
	within 30 env ISC_HOME="$home2" "$ISC_BIN/isc" experiments --json
}
replica_of_pid() { sql "SELECT id FROM replicas WHERE pid = $1"; }
held_by() { sql "SELECT count(*) FROM leases WHERE replica_id = '$1'"; }
every_status() {
	local id
	for id in $1; do wait_status "$id" "$2" "$3" || return 1; done
}
one_gang_each() {
	local id
	for id in $1; do
		[ "$(sql "SELECT count(*) FROM clusters WHERE experiment_id = '$id'")" = 1 ] || return 1
		[ "$(instances_of "$id")" = 2 ] || return 1
	done
}
never_interrupted() {
	local id
	for id in $1; do
		if isc status "$id" | grep -qE 'interrupted|reprovision|gone|lost'; then
			isc status "$id" >&2
			return 1
		fi
	done
}

start_iscd
ids=""
in=""
for _ in 1 2; do
	id=$(submit "$dir/skew.isc")
	ids="$ids $id"
	in="$in${in:+,}'$id'"
done
check "2 bursts running under replica 1" every_status "$ids" running 90
first=$(replica_of_pid "$(cat "$dir/iscd.pid")")
check "replica 2 starts 40 s ahead" start_skewed
second=$(replica_of_pid "$(cat "$dir/iscd2.pid")")
check "replica 2 registered (its pid is iscd's)" test -n "$second" -a "$second" != "$first"
check "faketime puts a process 40 s ahead" test $(($(LD_PRELOAD=$libfaketime FAKETIME=+40 date +%s) - $(date +%s))) -ge 39
check "replica 2 reports the skew it corrects" \
	grep -qE "store's clock is -(39|40|41)[0-9]{3} ms from this host's" "$dir/iscd2.log"

# 2 and 3: listings that omit the running nodes are read by replica 1 (replica 2 held
# still meanwhile), which records when they went missing; the last such listing is read
# by replica 2 (replica 1 held still for that moment, well within its lease). By the
# store's clock the nodes have been missing for a second or two, not for the window.
pending_lags() {
	mock faults | /usr/bin/python3 -c 'import json, sys; print(sum(1 for f in json.load(sys.stdin)["pending"] if f["kind"] == "describe_lag"))'
}
no_lag_pending() { [ "$(pending_lags)" = 0 ]; }
absent_recorded() { [ "$(sql "SELECT count(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE n.absent_since_ms IS NOT NULL AND c.experiment_id IN ($in)")" -gt 0 ]; }
lag() { fault '{"kind":"describe_lag","ms":1000000000,"region":"us-east-1"}'; }
stolen=0
watch_leases() {
	for _ in $(seq 1 "$1"); do
		[ "$(held_by "$second")" = 0 ] || stolen=1
		sleep 0.25
	done
}
kill -STOP "$(cat "$dir/iscd2.pid")"
for _ in 1 2 3 4; do lag; done
# Replica 1 reads three of them (the first records the nodes missing; the next keep them
# so, never a listing with them between); then it is held and replica 2 reads the last.
until_one_left() {
	for _ in $(seq 1 400); do
		[ "$(pending_lags)" -le 1 ] && return 0
		sleep 0.02
	done
	return 1
}
check "replica 1 reads the listings that omit the nodes" until_one_left
kill -STOP "$(cat "$dir/iscd.pid")"
check "replica 1 recorded them missing" absent_recorded
kill -CONT "$(cat "$dir/iscd2.pid")"
check "replica 2 reads the last such listing" within 5 no_lag_pending
sleep 0.5 # its describe's writes
kill -CONT "$(cat "$dir/iscd.pid")"
watch_leases 40
[ -n "${SKEW_DEBUG:-}" ] && sql "SELECT instance_id, state, absent_since_ms, (extract(epoch from clock_timestamp())*1000)::bigint FROM nodes" >&2
check "no lease of replica 1 taken by replica 2 while it lives" test "$stolen" = 0
check "every burst still under replica 1" test "$(held_by "$first")" = 2
check "no node counted absent by either replica" \
	bash -c "! grep -h 'counted as terminated' '$dir/iscd.log' '$dir/iscd2.log' >&2"
check "no node terminated in the store" \
	test "$(sql "SELECT count(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE n.state = 'terminated' AND c.experiment_id IN ($in)")" = 0
check "never interrupted" never_interrupted "$ids"

# 5. Replica 1 dies; replica 2 (skewed) waits out the lease by the store's clock.
t0=$(date +%s%3N)
kill_iscd
rm -f "$dir/iscd.pid"
export ISC_HOME=$home2
# Taken over: a takeover event of each burst names replica 2 (the bursts may complete and
# give their leases up soon after).
all_held() {
	local id
	for id in $ids; do isc status "$id" | grep -q "takeover" || return 1; done
}
check "replica 2 takes both over" within 20 all_held
took=$(($(date +%s%3N) - t0))
echo "clock-skew: both bursts taken over $took ms after kill -9 (lease_ms 8000)"
check "not before the lease could expire (>= 4 s after the kill)" test "$took" -ge 4000
check "both complete" every_status "$ids" completed 150
check "one gang each" one_gang_each "$ids"
check "never interrupted, start to end" never_interrupted "$ids"
check "no instance left on the cloud" wait_no_live
pid2=$(cat "$dir/iscd2.pid")
kill -TERM "$pid2"
for _ in $(seq 1 100); do kill -0 "$pid2" 2>/dev/null || break; sleep 0.1; done
check "replica 2 stopped on SIGTERM" bash -c "! kill -0 $pid2 2>/dev/null"
kill -KILL "$pid2" 2>/dev/null
wait "$pid2" 2>/dev/null
rm -f "$dir/iscd2.pid"
check "no sanitizer report (replica 1)" no_sanitizer_report "$dir/iscd.log"
check "no sanitizer report (replica 2)" no_sanitizer_report "$dir/iscd2.log"
finish clock-skew
