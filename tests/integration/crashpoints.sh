#!/usr/bin/env bash
# Crash points: iscd is killed at every named point where the broker's durable
# state and the cloud's state can diverge (docs/broker.md), then started again.
# For each point the experiment must reach the final state it would have reached
# without the crash, the restarted daemon must never die, no instance may be left
# running, no cluster may own more than one gang, the credit holds are released,
# and the bill stays within its bound of the mock cloud's own launch and
# termination times, and no cluster keeps its key file once closed. Then the
# reproductions of known crash bugs: a replay after
# kill -9 during a slow launch, more lost RunInstances replies than the HTTP
# layer retries, a launch reply that cannot be read, a describe that lags the
# launch, a lost reply in a second zone, a config whose reservation window is
# shorter than the tick, a cancel while the next cycle boots (the checkpoint at home
# stays), and a store migrated by many processes at once.
# Needs the sanitizer build (ISC_BIN from `make check`): only it has crash points.
. "$(dirname "$0")/lib.sh"
sandbox_dir crash
tick_ms=200
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=$tick_ms "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
py() { /usr/bin/python3 "$@"; }

# Every daemon of this run appends to one log; start_iscd (lib.sh) marks each start in it.
# wait_crash POINT SECONDS: iscd aborted at POINT (its exit is SIGABRT, its log says where).
wait_crash() {
	local point=$1 secs=$2 pid rc
	pid=$(cat "$dir/iscd.pid")
	for _ in $(seq 1 $((secs * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "iscd did not reach crash point $point in ${secs}s" >&2
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid" 2>/dev/null
	rc=$?
	[ "$rc" -eq 134 ] || { echo "iscd exited $rc, not by abort at $point" >&2; return 1; }
	grep -q "crash point $point reached" "$dir/iscd.log"
}
# one_gang_per_cluster EXP NNODES: every cluster tag owns exactly one gang of NNODES.
one_gang_per_cluster() {
	mock instances | py -c '
import collections, json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1]]
per = collections.Counter(r["tags"].get("isc:cluster") for r in rows)
tokens = collections.Counter(r["client_token"] for r in rows)
bad = {c: n for c, n in per.items() if n != int(sys.argv[2])}
bad.update({t: n for t, n in tokens.items() if n != int(sys.argv[2])})
if bad or not rows:
    print("clusters/tokens with other than %s nodes: %s" % (sys.argv[2], bad), file=sys.stderr)
sys.exit(1 if bad or not rows else 0)' "$1" "$2"
}
# no_failover EXP: the timeline never gave up a shape (printed when it did).
no_failover() {
	if isc status "$1" | grep -qE 'trying the next shape|has no key'; then
		isc status "$1" >&2
		return 1
	fi
}
holds_released() {
	isc credits show --org "${org:-demo}" --json | py -c '
import json, sys
o = json.load(sys.stdin)["orgs"][0]
if o["reserved_micros"] != 0:
    print("still reserved:", o["reserved_micros"], file=sys.stderr)
sys.exit(0 if o["reserved_micros"] == 0 else 1)'
}
# bill_within EXP DOWN_MS: the experiment's charges against the mock cloud's own record.
# Bound (docs/credits.md): per node, two ticks of observation plus the time no iscd was
# running (a termination is observed by the next describe), and a micro-dollar per charge.
bill_within() {
	# The node-hour price the broker snapshotted at launch, per instance (a read-only look
	# at the store, SQLite or PostgreSQL): "INSTANCE|PRICE" lines.
	local prices
	prices=$(store_sql -r "SELECT instance_id, price_micros FROM nodes WHERE instance_id != ''") || return 1
	py - "$MOCKCLOUD_URL" "$ISC_BIN/isc" "$1" "$2" "$tick_ms" "$prices" "${org:-demo}" <<'PY'
import json, subprocess, sys, urllib.request
url, isc, exp, down_ms, tick, prices, project = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
price_of = dict((i, int(p)) for i, p in (l.split("|") for l in prices.splitlines() if l))
rows = [r for r in json.load(urllib.request.urlopen(url + "/_mock/instances"))
        if r["tags"].get("isc:experiment") == exp]
spend = json.loads(subprocess.check_output([isc, "spend", "--project", project, "--by", "experiment", "--format", "json"]))
charged = sum(r["amount_micros"] for r in spend["rows"] if exp in json.dumps(r))
expected, slack = 0, 0
for r in rows:
    if r["id"] not in price_of:
        print("instance %s was never recorded: unmetered" % r["id"], file=sys.stderr)
        sys.exit(1)
    price, end = price_of[r["id"]], r["terminated_at"]
    if end is None:
        print("instance %s still runs" % r["id"], file=sys.stderr)
        sys.exit(1)
    # EC2 reports launchTime to the second, and billing starts there; Linux instances
    # are billed per second with a 60 s minimum per start (../shared/docs/metering-facts.md).
    expected += -(-max(end - r["launched_at"] // 1000 * 1000, 60000) * price // 3600000)
    slack += price * (2 * tick + down_ms) // 3600000 + 200
ok = abs(charged - expected) <= slack
print("bill of %s: charged %d, cloud record %d, slack %d" % (exp, charged, expected, slack), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# no_key_files EXP: every cluster of the experiment is closed and has no key left, neither
# a file nor its sealed row in the store (issue 45) (a crash between closing a cluster and
# deleting its key must not leave it behind).
no_key_files() {
	local c left=""
	for c in $(store_sql -r "SELECT id FROM clusters WHERE experiment_id = '$1'"); do
		[ -e "$ISC_HOME/keys/$c" ] && left="$left $c"
		[ "$(store_sql -r "SELECT count(*) FROM cluster_ssh_keys WHERE cluster_id = '$c'")" = 0 ] || left="$left $c(sealed)"
	done
	[ -z "$left" ] && [ "$(store_sql -r "SELECT count(*) FROM clusters WHERE experiment_id = '$1' AND state != 'closed'")" = 0 ] && return 0
	echo "clusters of $1 not closed or with a key file:$left" >&2
	return 1
}
wait_no_key_files() {
	for _ in $(seq 1 50); do no_key_files "$1" 2>/dev/null && return 0; sleep 0.2; done
	no_key_files "$1"
}
# pause_then EXP ACTION: iscd holds at its pause point (ISC_PAUSE_AT); ACTION runs on the
# experiment's current nodes, then iscd goes on.
pause_then() {
	for _ in $(seq 1 600); do tail -n +"$log_mark" "$dir/iscd.log" | grep -q "pause point .* reached" && break; sleep 0.1; done
	"$2" "$1"
	rm -f "$dir/pause"
}
# no_login EXP: the nodes of the experiment's newest cluster refuse the cluster's key
# (their authorized_keys emptied): the boot fails on its own, not by an interruption.
no_login() {
	local c
	c=$(store_sql -r "SELECT id FROM clusters WHERE experiment_id = '$1' ORDER BY created_at_ms DESC LIMIT 1")
	mock instances | py -c '
import json, sys
for r in json.load(sys.stdin):
    if r["tags"].get("isc:cluster") == sys.argv[1] and r["node_dir"]:
        print(r["node_dir"])' "$c" | while read -r d; do : >"$d/authorized_keys"; done
}
# An organisation whose credits run out a few seconds into its run: a p5 node costs $55.04
# an hour, so the sandbox's one-minute reservation window holds $0.92 of the $1.00 granted
# and the meter's renewal fails after a few seconds of charges (a stop for credits).
cat >"$dir/poor.isc" <<'ISC'
isc_project_id = "poor"
experiment_name = "crash-poor"
gpus = 8
burst_shape_priority_list = ["aws-us-east-1-p5.48xlarge-ondemand"]
command = 'for i in $(seq 1 600); do echo $i > /mnt/checkpoints/step; sleep 0.2; done'
ISC

cat >"$dir/short.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "crash-short"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'for i in $(seq 1 15); do echo $i > /mnt/checkpoints/step; sleep 0.2; done; echo done cycle $STRONG_CYCLE_COUNT'
ISC
cat >"$dir/long.isc" <<'ISC'
isc_project_id = "demo"
experiment_name = "crash-long"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'for i in $(seq 1 60); do echo $i > /mnt/checkpoints/step; sleep 0.2; done; echo done cycle $STRONG_CYCLE_COUNT'
ISC
# One node: a gang of more keeps the nodes it did not lose (docs/broker.md, "Lost nodes";
# lost-nodes.sh crashes that path), so the whole-gang reprovisioning the interruption
# points stand on is a one-node gang's.
sed 's/^gpus = 2$/gpus = 1/; s/crash-long/crash-long1/' "$dir/long.isc" >"$dir/long1.isc"

# The scenario that reaches each point, and the status the experiment ends in.
points=(
	"place.cluster_recorded short completed"
	"launch.zone_noted short completed"
	"place.before_launch short completed"
	"launch.before_record short completed"
	"launch.before_resolve short completed"
	"provision.cluster_booting short completed"
	"boot.containers_started short completed"
	"meter.charge_written short completed"
	"teardown.containers_stopped short completed"
	"teardown.before_terminate short completed"
	"teardown.terminate_requested short completed"
	"stop.before_final short completed"
	"teardown.containers_stopped cancel cancelled"
	"replay.before_launch lost completed"
	"reprovision.draining_marked interrupt completed"
	"reprovision.replacement_launched interrupt completed"
	"boot.restore_started interrupt completed"
	"interrupt.torn_down vanish completed"
	"place.cleanup_cluster_closed capacity completed"
	"rollback.partial_torn_down partial completed"
	"rollback.boot_failed nologin completed"
	"settle.cluster_closed short completed"
	"stop.for_credits poor stopped"
)
covered=0
for entry in "${points[@]}"; do
	read -r point scenario final <<<"$entry"
	# CRASH_ONLY=REGEX runs only the points it matches (and none of the reproductions);
	# CRASH_SKIP=REGEX leaves out the points it matches (tests/run-all, on PostgreSQL).
	[ -n "${CRASH_ONLY:-}" ] && ! [[ $point =~ $CRASH_ONLY ]] && continue
	if [ -n "${CRASH_SKIP:-}" ] && [[ $point =~ $CRASH_SKIP ]]; then
		echo "crash point $point: left out (CRASH_SKIP=$CRASH_SKIP)"
		continue
	fi
	what="$point ($scenario)"
	mock faults -X DELETE >/dev/null
	org=demo nnodes=2 pause_at=
	# nologin: iscd holds before the boot while the nodes are made to refuse the key.
	[ "$scenario" = nologin ] && pause_at=provision.cluster_booting && touch "$dir/pause"
	log_mark=$(($(cat "$dir/iscd.log" 2>/dev/null | wc -l) + 1))
	ISC_CRASH_AT=$point ISC_PAUSE_AT=$pause_at ISC_PAUSE_FILE=$dir/pause start_iscd
	file=$dir/short.isc
	case $scenario in
	short | lost | capacity | partial | nologin) ;;
	poor)
		file=$dir/poor.isc org=poor nnodes=1
		isc org add poor >/dev/null && isc project add --org poor poor >/dev/null
		isc credits grant --org poor 1.00 >/dev/null
		;;
	interrupt | vanish) file=$dir/long1.isc nnodes=1 ;;
	*) file=$dir/long.isc ;;
	esac
	# The one launch fails (capacity), or one of its two nodes never runs (partial).
	[ "$scenario" = capacity ] && fault '{"kind":"capacity","instance_type":"g4dn.xlarge","count":1}'
	[ "$scenario" = partial ] && fault '{"kind":"partial","instance_type":"g4dn.xlarge","count":1,"fail_nodes":1}'
	if [ "$scenario" = lost ]; then
		# Replies lost, and describes that do not list the new nodes yet: only a replay
		# with the same token can find the gang.
		fault '{"kind":"lose_response","action":"RunInstances","count":8}'
		fault '{"kind":"describe_lag","ms":60000,"count":20}'
	fi
	id=$(submit "$file")
	[ -n "$pause_at" ] && pause_then "$id" no_login
	if [ "$scenario" = cancel ] || [ "$scenario" = interrupt ] || [ "$scenario" = vanish ]; then
		# The crash is armed for the teardown or the reprovisioning, not before.
		for _ in $(seq 1 300); do [ "$(status_of "$id")" = running ] && break; sleep 0.2; done
		if [ "$scenario" = cancel ]; then
			isc cancel "$id" >/dev/null
		else
			victim=$(running_instance "$id" oldest)
			# vanish: no notice at all (the instance just goes); interrupt: 5 s of notice.
			notice=5
			[ "$scenario" = vanish ] && notice=0
			fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":$notice}"
		fi
	fi
	t0=$(date +%s%3N)
	check "$what: iscd aborts at the point" wait_crash "$point" 90
	t1=$(date +%s%3N)
	start_iscd
	check "$what: the experiment ends $final" wait_status "$id" "$final" 120
	check "$what: no instance left running" wait_no_live "$id"
	check "$what: one gang per cluster and token" one_gang_per_cluster "$id" $nnodes
	check "$what: its clusters closed, no key file left" wait_no_key_files "$id"
	case $point in
	place.* | launch.* | replay.*)
		# A crash around a launch must resume that launch, never give up its shape.
		if no_failover "$id" 2>"$dir/why"; then
			check "$what: the crash caused no failover" true
		else
			check "$what: the crash caused no failover" false
			cat "$dir/why" >&2
		fi
		;;
	esac
	sleep $(((tick_ms * 3 + 999) / 1000)) # a charge up to the confirmed termination
	check "$what: credit holds released" holds_released
	check "$what: bill within its bound" bill_within "$id" $((t1 - t0 + 500))
	if [ "$scenario" = interrupt ] || [ "$scenario" = vanish ]; then
		check "$what: resumed in a later cycle" bash -c "'$ISC_BIN/isc' status '$id' --json | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"cycle_count\"] >= 2 else 1)'"
	fi
	check "$what: the restarted iscd is alive" iscd_alive
	stop_iscd
	covered=$((covered + 1))
done

# ---- reproductions ----
if [ -n "${CRASH_ONLY:-}" ]; then
	echo "crash points covered: $covered (CRASH_ONLY=$CRASH_ONLY)"
	finish crashpoints
	exit
fi
start_iscd
# A slow cloud, kill -9 while provisioning, the latency cleared, iscd started again:
# the replay of the pending intent must complete the launch (it used to free a stack object).
fault '{"kind":"latency","ms":1500}'
id=$(submit "$dir/short.isc")
for _ in $(seq 1 100); do [ "$(status_of "$id")" = provisioning ] && break; sleep 0.1; done
sleep 0.5
kill_iscd
mock faults -X DELETE >/dev/null
start_iscd
check "kill -9 while provisioning: the experiment completes" wait_status "$id" completed 120
check "kill -9 while provisioning: one gang" one_gang_per_cluster "$id" 2
check "kill -9 while provisioning: iscd alive" iscd_alive

# More lost replies than the HTTP layer retries: no kill needed to reach the replay.
mock faults -X DELETE >/dev/null
fault '{"kind":"lose_response","action":"RunInstances","count":8}'
id=$(submit "$dir/short.isc")
check "8 lost RunInstances replies: the experiment completes" wait_status "$id" completed 120
check "8 lost RunInstances replies: one gang" one_gang_per_cluster "$id" 2
check "8 lost RunInstances replies: the replay was announced" status_says "$id" 'repeated with the same token'
check "8 lost RunInstances replies: iscd alive" iscd_alive

# A 200 reply that cannot be read: the nodes exist, so the intent stays pending and they are adopted.
mock faults -X DELETE >/dev/null
fault '{"kind":"garbled_reply","action":"RunInstances","count":1}'
id=$(submit "$dir/short.isc")
check "unreadable launch reply: the experiment completes" wait_status "$id" completed 120
check "unreadable launch reply: one gang, none unmetered" one_gang_per_cluster "$id" 2
check "unreadable launch reply: nodes found by tag or by token" status_says "$id" 'found all 2 node|launch confirmed'
check "unreadable launch reply: its nodes were charged" within 15 bash -c "'$ISC_BIN/isc' spend --project demo --by experiment --format csv | grep -q '$id'"

# A describe that does not yet list nodes launched a moment ago is not their termination.
mock faults -X DELETE >/dev/null
fault '{"kind":"describe_lag","ms":60000,"count":6}'
id=$(submit "$dir/short.isc")
check "lagging describe: the experiment completes" wait_status "$id" completed 120
check "lagging describe: no partial-gang rollback" bash -c "! '$ISC_BIN/isc' status '$id' | grep -q 'partial'"
check "lagging describe: one gang" one_gang_per_cluster "$id" 2

# A lost reply in the second zone, then a replay: zone A (capacity before) must not get a
# second gang while zone B's may exist. The shape gets two zones for this case.
cat >"$dir/zones.csv" <<'CSV'
id,provider,region,instance_type,market,gpu_type,gpus_per_node,gpu_mem_mib,vcpus,mem_mib,price,zones,price_date
aws-us-east-1-g4dn.xlarge-spot,aws,us-east-1,g4dn.xlarge,spot,T4,1,16384,4,16384,0.1766,us-east-1a;us-east-1b,2025-11-30
CSV
isc catalog import "$dir/zones.csv" --format isc --provider aws >/dev/null
mock faults -X DELETE >/dev/null
fault '{"kind":"capacity","instance_type":"g4dn.xlarge","zone":"us-east-1a","count":1}'
fault '{"kind":"lose_response","action":"RunInstances","count":8}'
id=$(submit "$dir/short.isc")
check "lost reply in zone B: the experiment completes" wait_status "$id" completed 120
check "lost reply in zone B: one gang for its cluster" one_gang_per_cluster "$id" 2
# The bug this reproduces put a second gang under the same cluster in zone A; a later,
# separate cluster there (a failover under load) is legitimate, so the check is per cluster.
check "lost reply in zone B: no cluster owns nodes in two zones" bash -c "curl -s '$MOCKCLOUD_URL/_mock/instances' | /usr/bin/python3 -c '
import collections, json, sys
zones = collections.defaultdict(set)
for r in json.load(sys.stdin):
    if r[\"tags\"].get(\"isc:experiment\") == \"$id\":
        zones[r[\"tags\"].get(\"isc:cluster\")].add(r[\"zone\"])
sys.exit(1 if not zones or any(len(z) > 1 for z in zones.values()) else 0)'"
check "iscd alive after the reproductions" iscd_alive
stop_iscd

# A cancel that lands while the next cycle's gang boots, before its restore: the new
# node's folders are empty, so the stop must not bring them home over the checkpoint the
# last cycle left there (it did: the cancelled experiment's checkpoint was lost).
mock faults -X DELETE >/dev/null
ISC_CRASH_AT=boot.restore_started start_iscd
id=$(submit "$dir/long1.isc")
for _ in $(seq 1 300); do [ "$(status_of "$id")" = running ] && break; sleep 0.2; done
sleep 1.5 # a few steps written
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$(running_instance "$id")\",\"notice_s\":5}"
check "cancel while booting: iscd stops where cycle 2's restore starts" wait_crash boot.restore_started 90
ckpt=$ISC_HOME/experiments/$id/checkpoints/step
home_step=$(cat "$ckpt" 2>/dev/null)
check "cancel while booting: cycle 1's checkpoint is home" test -n "$home_step"
# The cancel is recorded by an API-only iscd (no ticks), then a whole iscd stops the burst.
"$ISC_BIN/iscd" --api-only 2>>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
for _ in $(seq 1 100); do api_answers && break; sleep 0.1; done
isc cancel "$id" >/dev/null
stop_iscd
start_iscd
check "cancel while booting: cancelled" wait_status "$id" cancelled 120
check "cancel while booting: no instance left running" wait_no_live "$id"
check "cancel while booting: the checkpoint at home is still cycle 1's" \
	test "$(cat "$ckpt" 2>/dev/null)" = "$home_step"
stop_iscd
check "no sanitizer report in any iscd log" no_sanitizer_report "$dir/iscd.log"

# A reservation window shorter than the tick breaks the overspend bound: refused.
cp "$ISC_HOME/config.toml" "$dir/config.saved"
{
	echo 'reservation_window_ms = 60000'
	grep -vE '^(tick_interval_ms|reservation_window_ms)' "$dir/config.saved"
} >"$ISC_HOME/config.toml"
expect_exit 1 "iscd refuses --interval-ms above the window" "$ISC_BIN/iscd" --once --interval-ms 120000
expect_stderr "reservation_window_ms (60000) is shorter than the tick" "$ISC_BIN/iscd" --once --interval-ms 120000
sed -i '1i tick_interval_ms = 120000' "$ISC_HOME/config.toml"
expect_exit 1 "a config with tick > window is refused" "$ISC_BIN/iscd" --once
cp "$dir/config.saved" "$ISC_HOME/config.toml"

# Many processes opening a new store at once: each migration runs once, every one succeeds.
# The new store: a new home's SQLite file, or on PostgreSQL a new, empty database of the
# same server (the home then only names it).
fresh=$dir/fresh
mkdir -m 700 "$fresh"
fresh_url=${ISC_STORE_URL:-}
fresh_env=()
if store_is_pg; then
	fresh_db=fresh_$$_$RANDOM
	store_sql "CREATE DATABASE $fresh_db"
	fresh_url=$(sed -E "s#^(postgres(ql)?://[^/?]*/)[^?]*#\1$fresh_db#" <<<"$ISC_STORE_URL")
	fresh_env=(ISC_STORE_URL="$fresh_url")
fi
for i in $(seq 1 8); do env "${fresh_env[@]}" "$ISC_BIN/isc" --home "$fresh" init >"$dir/init.$i" 2>&1 & done
ok=1
for job in $(jobs -p); do wait "$job" || ok=0; done
check "8 concurrent isc init on one new store all succeed" test $ok = 1
[ $ok = 1 ] || tail -n 5 "$dir"/init.* >&2
check "of 8 concurrent inits exactly one loads the catalog" \
	test "$(cat "$dir"/init.* | grep -c '^loaded [0-9]* shapes')" = 1
check "the store has the latest schema" test "$(ISC_HOME=$fresh ISC_STORE_URL=$fresh_url store_sql -r 'SELECT version FROM schema_version')" = \
	"$(store_sql -r 'SELECT version FROM schema_version')"
check "the new store has its schema once" test "$(ISC_HOME=$fresh ISC_STORE_URL=$fresh_url store_sql -r 'SELECT count(*) FROM schema_version')" = 1

echo "crash points covered: $covered (${#points[@]} cases)"
finish crashpoints
