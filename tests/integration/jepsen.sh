#!/usr/bin/env bash
# A fault campaign in the manner of Jepsen (issue 48, ../shared/docs/faults-facts.md): two
# iscd replicas on one PostgreSQL store, bursts submitted through both, and a random
# schedule of faults while they run:
#   pause     SIGSTOP of a replica past its lease, then SIGCONT
#   kill      kill -9 of a replica, restarted a moment later
#   pgrestart the PostgreSQL server stopped (fast) and started again
#   lag       the cloud's listings leave out every instance for longer than
#             node_absence_confirm_ms (the mock's describe_lag)
#   notice    a spot interruption with 10 s of notice
#   nonotice  a spot interruption without notice
#   skew      a replica restarted with its wall clock skewed by 20-40 s (Debian's faketime;
#             the monotonic clock left alone, as a real skew does), or back to the true time
# The schedule comes from a seed, printed at the start: JEPSEN_SEED=N replays it (the faults
# and their order; the timing of the processes under them is the machine's).
#
# Afterwards the history is checked against the mock cloud's own record of its instances
# (which the broker cannot write) and the store:
#   - every experiment completed;
#   - no instance is left live;
#   - no instance ran more than one tick unbilled, and none was charged twice;
#   - no experiment ran two gangs at once (a replacement's new nodes beside the kept ones
#     are one gang: at no moment more live nodes than the experiment asked for, a node
#     counting from its launch until its termination was asked for or its interruption
#     announced);
#   - no crash report (sanitizers) in either replica's log, and no replica died on its own.
#
# Environment: JEPSEN_SECONDS (the fault window, default 240), JEPSEN_SEED, JEPSEN_EVERY_S
# (a burst submitted this often during the window, default 20), KEEP=1 keeps the folder.
. "$(dirname "$0")/lib.sh"
sandbox_dir jepsen
chmod 755 "$dir" # as root, the server runs as postgres and must reach its folder in dir
pg=$dir/pg
seed=${JEPSEN_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
window_s=${JEPSEN_SECONDS:-240}
every_s=${JEPSEN_EVERY_S:-20}
tick_ms=500
lease_ms=8000
absence_ms=3000
RANDOM=$seed
libfaketime=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n 1)
[ -n "$libfaketime" ] || {
	echo "jepsen: libfaketime is missing (Debian package faketime; make test-deps installs it)" >&2
	exit 1
}
echo "jepsen: seed $seed (JEPSEN_SEED=$seed replays this schedule), fault window ${window_s} s"

jepsen_cleanup() {
	local i
	for i in 1 2; do
		[ -f "$dir/r$i.pid" ] || continue
		kill -CONT "$(cat "$dir/r$i.pid")" 2>/dev/null
		kill -KILL "$(cat "$dir/r$i.pid")" 2>/dev/null
	done
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	"$repo/tests/pg/pg-server" stop "$pg" >/dev/null 2>&1
	if [ "${KEEP:-0}" = 1 ] || [ "$failed" -gt 0 ]; then
		echo "jepsen: logs kept in $dir (seed $seed)"
	else
		rm -rf "$dir"
	fi
}
trap jepsen_cleanup EXIT

"$repo/tests/pg/pg-server" start "$pg" >/dev/null || exit 1
ISC_STORE_URL=$("$repo/tests/pg/pg-server" createdb "$pg" isc_jepsen) || exit 1
export ISC_STORE_URL
sql() { psql "$ISC_STORE_URL" -qAtX -c "$1" 2>/dev/null; }

ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=$tick_ms SANDBOX_PROVIDERS=aws \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
home[1]=$ISC_HOME
home[2]=$dir/home2
shared=$dir/shared
mkdir -p "$shared/artifacts" "$shared/keys"
chmod 700 "$shared/keys"
isc --home "${home[2]}" init >/dev/null || exit 1
cp "${home[1]}/config.toml" "${home[2]}/config.toml"
# The keys' master key: every replica shares it with the store, and the clusters' SSH
# keys are sealed under it from the first burst on (docs/ha.md, issue 45).
export ISC_MASTER_KEY_FILE="$dir/master.key"
for i in 1 2; do
	# Top-level keys go before the first [table].
	{
		echo "artifact_root = \"$shared/artifacts\""
		echo "lease_ms = $lease_ms"
		echo "node_absence_confirm_ms = $absence_ms"
		cat "${home[$i]}/config.toml"
	} >"${home[$i]}/config.toml.new" && mv "${home[$i]}/config.toml.new" "${home[$i]}/config.toml"
	rm -rf "${home[$i]}/keys"
	ln -s "$shared/keys" "${home[$i]}/keys"
done

cat >"$dir/job.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "jepsen"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot", "aws-us-east-1-g5.xlarge-ondemand"]
command = 'n=0; [ -f /mnt/checkpoints/step ] && n=$(cat /mnt/checkpoints/step); echo "start rank $RANK at $n"; while [ $n -lt 100 ]; do n=$((n + 1)); echo $n > /mnt/checkpoints/step; sleep 0.3; done; echo "done rank $RANK"'
ISC

t0=$(date +%s%3N)
elapsed_s() { echo $((($(date +%s%3N) - t0) / 1000)); }
record() { echo "$(($(date +%s%3N) - t0)) $*" >>"$dir/history"; }

# ---- the replicas: replica i has home[i], log dir/rI.log, pid dir/rI.pid, and a clock
# skew skew[i] seconds (0: the true time).
skew[1]=0
skew[2]=0
rep_pid() { cat "$dir/r$1.pid" 2>/dev/null; }
rep_start() {
	local i=$1 pid
	echo "---- replica $i start (skew ${skew[$i]} s) ----" >>"$dir/r$i.log"
	if [ "${skew[$i]}" = 0 ]; then
		"$ISC_BIN/iscd" --home "${home[$i]}" 2>>"$dir/r$i.log" &
	else
		# As tests/integration/clock-skew.sh: libfaketime preloaded into iscd itself (its pid
		# is iscd's), before ASan's runtime (which must not refuse that), the monotonic clock
		# left alone as a real skew leaves it, and libfaketime's monotonic fix off (with it,
		# a timed wait on a monotonic condition returns at once and the heartbeat spins).
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" LD_PRELOAD=$libfaketime \
			FAKETIME="$(printf '%+d' "${skew[$i]}")" FAKETIME_DONT_FAKE_MONOTONIC=1 \
			FAKETIME_FORCE_MONOTONIC_FIX=0 "$ISC_BIN/iscd" --home "${home[$i]}" 2>>"$dir/r$i.log" &
	fi
	pid=$!
	echo "$pid" >"$dir/r$i.pid"
	for _ in $(seq 300); do
		ISC_HOME=${home[$i]} "$ISC_BIN/isc" experiments --json >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
rep_kill() {
	local pid
	pid=$(rep_pid "$1")
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

check "replica 1 starts" rep_start 1
check "replica 2 starts" rep_start 2
check "both replicas registered" test "$(sql 'SELECT count(*) FROM replicas')" = 2

# ---- the workload
ids=()
submit_one() {
	local i=$((RANDOM % 2 + 1)) id
	id=$(ISC_HOME=${home[$i]} "$ISC_BIN/isc" burst "$dir/job.isc" 2>>"$dir/submit.err" | grep -Eo 'exp_[0-9a-f]{16}')
	if [ -n "$id" ]; then
		ids+=("$id")
		record "submit $id via replica $i"
	else
		record "submit via replica $i failed"
	fi
}

# ---- the nemesis: one fault at a time, applied then healed.
interrupts=$dir/interrupts # INSTANCE MS: when an interruption was announced
: >"$interrupts"
: >"$dir/history"
running_spot() {
	mock instances | /usr/bin/python3 -c '
import json, sys
rows = sorted(r["id"] for r in json.load(sys.stdin) if r["state"] == "running" and r["spot"])
print(rows[int(sys.argv[1]) % len(rows)] if rows else "")' "$1"
}
do_fault() {
	local kind=$1 i=$((RANDOM % 2 + 1)) pick=$RANDOM victim notice
	case $kind in
	pause)
		record "pause replica $i for $((lease_ms + 3000)) ms"
		kill -STOP "$(rep_pid $i)"
		sleep $((lease_ms / 1000 + 3))
		kill -CONT "$(rep_pid $i)"
		;;
	kill)
		record "kill -9 replica $i"
		rep_kill $i
		sleep $((RANDOM % 3 + 1))
		rep_start $i || record "replica $i did not come back"
		;;
	pgrestart)
		record "PostgreSQL restart"
		"$repo/tests/pg/pg-server" stop "$pg" >>"$dir/pg.log" 2>&1
		sleep 1
		"$repo/tests/pg/pg-server" start "$pg" >>"$dir/pg.log" 2>&1 || record "PostgreSQL did not start"
		;;
	lag)
		record "listing lag for $((absence_ms + 3000)) ms"
		fault '{"kind":"describe_lag","ms":1000000000,"count":1000000,"region":"us-east-1"}'
		sleep $((absence_ms / 1000 + 3))
		mock faults -X DELETE >/dev/null
		;;
	notice | nonotice)
		victim=$(running_spot "$pick")
		[ -n "$victim" ] || { record "$kind: no running spot instance"; return 0; }
		notice=10
		[ "$kind" = nonotice ] && notice=0
		echo "$victim $(date +%s%3N)" >>"$interrupts"
		record "interrupt $victim with ${notice} s of notice"
		fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":$notice}"
		;;
	skew)
		if [ "${skew[$i]}" = 0 ]; then
			skew[$i]=$(((RANDOM % 21 + 20) * (RANDOM % 2 * 2 - 1)))
		else
			skew[$i]=0
		fi
		record "replica $i restarted with a clock skew of ${skew[$i]} s"
		rep_kill $i
		rep_start $i || record "replica $i did not come back"
		;;
	esac
}
kinds=(pause kill pgrestart lag notice nonotice skew)

last_submit=-1000
nfaults=0
declare -A fault_count
while [ "$(elapsed_s)" -lt "$window_s" ]; do
	if [ $(($(elapsed_s) - last_submit)) -ge "$every_s" ]; then
		submit_one
		last_submit=$(elapsed_s)
	fi
	sleep $((RANDOM % 3 + 1))
	k=${kinds[$((RANDOM % ${#kinds[@]}))]}
	do_fault "$k"
	nfaults=$((nfaults + 1))
	fault_count[$k]=$((${fault_count[$k]:-0} + 1))
done
summary=""
for k in "${kinds[@]}"; do summary="$summary $k=${fault_count[$k]:-0}"; done
echo "jepsen: $nfaults faults in $(elapsed_s) s:$summary; ${#ids[@]} bursts"
record "window over"

# ---- heal everything, then let every experiment finish.
mock faults -X DELETE >/dev/null
for i in 1 2; do
	kill -CONT "$(rep_pid $i)" 2>/dev/null
	kill -0 "$(rep_pid $i)" 2>/dev/null || rep_start $i
done
check "a burst went in through the campaign" test "${#ids[@]}" -gt 0
all_final() {
	local id s
	for id in "${ids[@]}"; do
		s=$(ISC_HOME=${home[1]} status_of "$id" 2>/dev/null)
		case $s in completed | failed | cancelled | stopped) ;; *) return 1 ;; esac
	done
}
within 300 all_final
for id in "${ids[@]}"; do
	s=$(ISC_HOME=${home[1]} status_of "$id")
	check "$id completed" test "$s" = completed
	[ "$s" = completed ] || ISC_HOME=${home[1]} isc status "$id" >&2
done
no_live() { [ "$(live_instances)" = 0 ]; }
check "no instance left live on the cloud" within 60 no_live

# ---- the history against the cloud's record and the ledger
mock instances >"$dir/instances.json"
sql "SELECT node_instance_id, period_start_ms, period_end_ms FROM ledger
     WHERE kind = 'charge' AND node_instance_id IS NOT NULL" >"$dir/charges"
verdict() {
	/usr/bin/python3 - "$dir" "$1" "$tick_ms" <<'PY'
import json, sys
d, what, tick = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = json.load(open(d + "/instances.json"))
charges = {}
for line in open(d + "/charges"):
    if line.strip():
        iid, a, b = line.strip().split("|")
        charges.setdefault(iid, []).append((int(a), int(b)))
announced = {}
for line in open(d + "/interrupts"):
    if line.strip():
        iid, ms = line.split()
        announced[iid] = min(int(ms), announced.get(iid, 1 << 62))
bad = []
if what == "unbilled":
    worst = (0, "")
    for r in rows:
        start, end = r["launched_at"], r.get("terminated_at")
        if end is None:
            bad.append("%s: still live" % r["id"])
            continue
        iv = sorted(charges.get(r["id"], []))
        covered, cur = 0, start
        for a, b in iv:
            a, b = max(a, cur), min(b, end)
            if b > a:
                covered += b - a
                cur = b
        unbilled = (end - start) - covered
        worst = max(worst, (unbilled, r["id"]))
        if unbilled > tick:
            bad.append("%s: ran %d ms (%d..%d), %d ms of it unbilled" % (r["id"], end - start, start, end, unbilled))
    print("jepsen: the most unbilled of %d instances: %d ms (%s)" % (len(rows), worst[0], worst[1]), file=sys.stderr)
elif what == "twice":
    for iid, iv in charges.items():
        iv.sort()
        for (a0, b0), (a1, b1) in zip(iv, iv[1:]):
            if a1 < b0:
                bad.append("%s: charged %d..%d and %d..%d" % (iid, a0, b0, a1, b1))
elif what == "gangs":
    by = {}
    for r in rows:
        exp = (r.get("tags") or {}).get("isc:experiment")
        if not exp:
            continue
        end = min(x for x in (r.get("terminate_requested_at"), r.get("terminated_at"),
                              announced.get(r["id"]), 1 << 62) if x is not None)
        by.setdefault(exp, []).append((r["launched_at"], end, r["id"]))
    for exp, iv in by.items():
        for t, _, iid in iv:
            live = [x for a, b, x in iv if a <= t < b]
            if len(live) > 2:
                bad.append("%s: %d nodes live at %d (launch of %s): %s" % (exp, len(live), t, iid, " ".join(live)))
                break
for x in bad[:20]:
    print(x, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
check "no instance ran more than one tick ($tick_ms ms) unbilled" verdict unbilled
verdict unbilled 2>&1 >/dev/null | grep -m1 'most unbilled'
check "no instance charged twice" verdict twice
check "no experiment ran two gangs at once" verdict gangs
for i in 1 2; do
	check "replica $i is alive (never died but by kill -9)" kill -0 "$(rep_pid $i)"
	check "no sanitizer report (replica $i)" no_sanitizer_report "$dir/r$i.log"
done
[ "$failed" -gt 0 ] && { echo "---- history ----"; cat "$dir/history"; } >&2
finish jepsen
