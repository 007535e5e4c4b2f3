#!/usr/bin/env bash
# On-prem execution end to end: iscd runs cycle and interruptible experiments on 4 real
# sshd nodes (the mock cloud's node stand-ins, registered with `isc nodes add`) with
# 2-second cycles and a 20-second period. Every run records, from inside its container,
# its STRONG_CYCLE_COUNT, STRONG_CYCLE_TIME_MS and start time into /mnt/checkpoints,
# which iscd carries from run to run (and node to node), so the file that comes home
# lists every run. Then: pre-emption timing, a failing run, cancels in every state, a
# node that stops answering, runs that share no IPC with the node's next run (8), and
# (against the mock cloud) validation-then-burst.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
node=$repo/tests/mocks/node
dir=$(mktemp -d /tmp/isc-onprem.XXXXXX)
home=$dir/home
# Addresses of this suite only: the sandboxes use 127.100-127.149.
base=127.153.$((RANDOM % 200 + 1))
TICK_MS=200
GRACE_S=1

cleanup() {
	[ -f "$dir/iscd.pid" ] && kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null && wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	[ -d "$dir/sandbox" ] && "$repo/tests/mocks/sandbox" stop "$dir/sandbox" >/dev/null 2>&1
	for i in 1 2 3 4; do "$node/node-down" "$dir/n$i" >/dev/null 2>&1; done
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
# lib.sh's helpers (wait_status, status_of, mock) call isc: this one names the home.
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 -c "$@"; }
field() { isc status "$1" --json | py "import json,sys; print(json.load(sys.stdin)$2)"; }
now_ms() { date +%s%3N; }

train() { isc train "$1" | grep -Eo 'exp_[0-9a-f]{16}'; }
# runs ID: the runs recorded inside the containers and brought home ("NAME COUNT TIME_MS START_MS").
runs() { cat "$home/experiments/$1/checkpoints/runs.txt" 2>/dev/null; }

isc init >/dev/null
# isc talks to iscd's API: an iscd for the API (its tick a minute apart) until the experiments
# are queued, then the ticking one.
iscd_api "$home" "$dir/iscd-api.log" || exit 1
isc org add demo >/dev/null
isc project add --org demo demo >/dev/null
cat >>"$home/config.toml" <<CONF

# Written by tests/integration/onprem.sh: seconds instead of minutes.
tick_interval_ms = $TICK_MS
cycle_ms = 2000
period_ms = 20000
stop_grace_s = $GRACE_S
node_down_after_ms = 1500
boot_deadline_ms = 20000
checkpoint_sync_ms = 1000
lossy_sync_ms = 1000
CONF

isc nodes pubkey >"$dir/authorized_keys"
for i in 1 2 3 4; do
	"$node/node-up" "$dir/n$i" "$base.$i" 2222 "$dir/authorized_keys" >/dev/null || {
		echo "node $i did not come up" >&2
		finish onprem
		exit 1
	}
	isc nodes add "$base.$i" --port 2222 --user root --gpus 1 >/dev/null
done

# The command of every experiment: record this run inside the container, then behave as
# MODE says. A TERM (docker stop) is a pause: the script "checkpoints" and exits 0.
launch() { # NAME MODE GPUS [MAX_CYCLES] -> a launch file on stdout
	local name=$1 mode=$2 gpus=$3 cycles=${4:-}
	local compute=cycle
	[ "$mode" = interruptible ] || [ "$mode" = resumed ] && compute=interruptible
	cat <<EOF
isc_project_id = "demo"
experiment_name = "$name"
gpus = $gpus
compute_mode = "$compute"
$([ -n "$cycles" ] && echo "max_rapid_cycles = $cycles")
command = '''
echo "rank \$RANK found \$(cat /mnt/checkpoints/runs.txt 2>/dev/null | wc -l) earlier runs"
[ "\$RANK" = 0 ] && echo "$name \$STRONG_CYCLE_COUNT \$STRONG_CYCLE_TIME_MS \$(date +%s%3N)" >>/mnt/checkpoints/runs.txt
echo "run \$STRONG_CYCLE_COUNT of $name: rank \$RANK of \$NNODES, \$STRONG_CYCLE_TIME_MS ms, mode \$STRONG_COMPUTE_MODE"
trap '[ "\$RANK" = 0 ] && date +%s%3N >>/mnt/checkpoints/term_at; exit 0' TERM
case $mode in
cycle) sleep 60 & wait ;;
fail) exit 3 ;;
interruptible) [ "\$(wc -l </mnt/checkpoints/runs.txt)" -ge 2 ] && { sleep 3; exit 0; }; sleep 60 & wait ;;
resumed) [ "\$STRONG_CYCLE_COUNT" -ge 2 ] && { sleep 1; exit 0; }; sleep 60 & wait ;;
esac
'''
EOF
}
for n in c1 c2 c3; do launch "$n" cycle 1 2 >"$dir/$n.isc"; done
launch i1 interruptible 2 >"$dir/i1.isc"
launch i2 interruptible 2 >"$dir/i2.isc"
launch bad fail 1 >"$dir/bad.isc"
launch big cycle 8 >"$dir/big.isc"
launch solo cycle 1 2 >"$dir/solo.isc"
launch lost resumed 1 >"$dir/lost.isc"

# 1. Two interruptible experiments fill the pool (2 nodes each) in one round of the period
# (both queued before iscd starts, so its first period has both).
i1=$(train "$dir/i1.isc")
i2=$(train "$dir/i2.isc")
iscd_api_stop
"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
check "i1 runs" wait_status "$i1" running 30
check "i2 runs" wait_status "$i2" running 30
check "i1 has 2 nodes" test "$(field "$i1" '["nnodes"]')" = 2
sleep 1

# 2. Three cycle experiments arrive: they pre-empt the interruptible runs.
t0=$(now_ms)
c1=$(train "$dir/c1.isc")
c2=$(train "$dir/c2.isc")
c3=$(train "$dir/c3.isc")
check "i1 is paused by the cycle experiments" wait_status "$i1" paused 20
check "i2 is paused by the cycle experiments" wait_status "$i2" paused 20
t1=$(($(cat "$home/experiments/$i1/checkpoints/term_at" 2>/dev/null || echo 0)))
t2=$(($(cat "$home/experiments/$i2/checkpoints/term_at" 2>/dev/null || echo 0)))
first_term=$((t1 < t2 ? t1 : t2))
[ "$first_term" -eq 0 ] && first_term=$((t1 > t2 ? t1 : t2))
preempt_ms=$((first_term - t0))
echo "pre-emption: the first interruptible container got TERM ${preempt_ms} ms after the cycle experiments were submitted (tick ${TICK_MS} ms, grace ${GRACE_S} s)"
# One tick to see them, one to decide, then the stop: within a tick plus the grace, with
# a second of slack for a loaded machine (ASan, SSH logins).
check "pre-empted within one tick plus the grace" test "$first_term" -gt 0 -a "$preempt_ms" -le $((2 * TICK_MS + GRACE_S * 1000 + 1000))
check "the pause reason names the pre-emption" bash -c "'$ISC_BIN/isc' --home '$home' status '$i1' | grep -q 'pre-empted by a cycle experiment'"
check "a paused interruptible shows its queue position" test "$(field "$i1" '["queue"]["position"]')" -ge 1
check "isc status prints the queue line" bash -c "'$ISC_BIN/isc' --home '$home' status '$i1' | grep -q 'Queue:.*waiting'"
check "isc experiments shows paused" bash -c "'$ISC_BIN/isc' --home '$home' experiments | grep '$i1' | grep -q paused"

for c in "$c1" "$c2" "$c3"; do check "cycle $c completes" wait_status "$c" completed 60; done
check "i1 completes" wait_status "$i1" completed 60
check "i2 completes" wait_status "$i2" completed 60

# Every run, as its container saw it.
for c in "$c1" "$c2" "$c3"; do
	check "$c ran two cycles with counts 1,2 and 2000 ms each" \
		test "$(runs "$c" | awk '{print $2":"$3}' | tr '\n' ' ')" = "1:2000 2:2000 "
done
for i in "$i1" "$i2"; do
	r=$(runs "$i")
	check "$i ran twice (start, resume)" test "$(awk '{print $2}' <<<"$r" | tr '\n' ' ')" = "1 2 "
	check "$i's first run had the whole 20 s block" test "$(awk 'NR==1{print $3}' <<<"$r")" = 20000
	check "$i's resume had what was left of its block" \
		py "import sys; t=int('$(awk 'NR==2{print $3}' <<<"$r")'); sys.exit(0 if 0 < t < 20000 else 1)"
done
# Order: the cycle queue is first in, first out; no interruptible resumes while a cycle waits.
# (the decisions' order: containers boot in parallel, so their own clocks may differ by a few ms)
first_run() { isc status "$1" --json | py 'import json,sys; print([e["at_ms"] for e in json.load(sys.stdin)["events"] if e["kind"]=="running"][0])'; }
s1=$(first_run "$c1") s2=$(first_run "$c2") s3=$(first_run "$c3")
check "cycle experiments started in arrival order" test "$s1" -le "$s2" -a "$s2" -le "$s3"
last_cycle=$(cat <(runs "$c1") <(runs "$c2") <(runs "$c3") | awk '{print $4}' | sort -n | tail -1)
first_resume=$(cat <(runs "$i1") <(runs "$i2") | awk '$2==2{print $4}' | sort -n | head -1)
check "interruptible runs resume only after the last cycle run started" test "$first_resume" -gt "$last_cycle"
check "rank_0.txt of a cycle experiment has both runs" bash -c "grep -c 'run [12] of c1: rank 0 of 1, 2000 ms, mode cycle' '$home/experiments/$c1/rank_0.txt' | grep -qx 2"
check "rank_1.txt of an interruptible one exists" grep -q "rank 1 of 2" "$home/experiments/$i1/rank_1.txt"
# What came home from rank 0 is restored onto every node: rank 1's second run starts from
# the same checkpoint folder as rank 0's (a rank left at step 0 hangs a real DDP job).
check "rank 1 of a resumed run found rank 0's checkpoint" grep -q "rank 1 found 1 earlier runs" "$home/experiments/$i1/rank_1.txt"
# The container's recorded environment: the C docker stand-in's env file, or the Python
# one's config.json (NODE_DOCKER=python).
check "the second run's container had STRONG_CYCLE_COUNT 2 and STRONG_CYCLE_TIME_MS 2000" bash -c "
for d in '$dir'/n*/containers*/isc-$c1-r0*; do
	{ grep -qx STRONG_CYCLE_COUNT=2 \"\$d/env\" && grep -qx STRONG_CYCLE_TIME_MS=2000 \"\$d/env\"; } 2>/dev/null && exit 0
	grep -q '\"STRONG_CYCLE_COUNT\": \"2\", \"STRONG_CYCLE_TIME_MS\": \"2000\"' \"\$d/config.json\" 2>/dev/null && exit 0
done
exit 1"

# 3. A failing run ends failed and leaves the queue.
bad=$(train "$dir/bad.isc")
check "the failing experiment ends failed" wait_status "$bad" failed 30
check "its reason names the exit code" bash -c "'$ISC_BIN/isc' --home '$home' status '$bad' | grep -q 'exited with code 3'"
check "it left the queue" test "$(field "$bad" '["queue"]["position"]')" = 0

# 4. Cancel: a waiting experiment ends at once, a running one is stopped with grace.
big=$(train "$dir/big.isc") # 8 GPUs: this pool can never hold it, so it waits
sleep 0.5
expect_exit 0 "cancel a waiting experiment" isc cancel "$big"
check "the waiting experiment is cancelled at once" wait_status "$big" cancelled 2
solo=$(train "$dir/solo.isc")
check "solo runs" wait_status "$solo" running 20
expect_exit 0 "cancel a running experiment" isc cancel "$solo"
check "the running experiment ends cancelled" wait_status "$solo" cancelled 20
check "its container got TERM (stopped with grace)" test -s "$home/experiments/$solo/checkpoints/term_at"

# 5. A node that stops answering is marked unreachable; its run is an interruption, resumed elsewhere.
solo2=$(train "$dir/lost.isc") # interruptible: its run lasts until the node goes
check "solo2 runs" wait_status "$solo2" running 20
# At least one periodic sync: the run's checkpoint (runs.txt, written as it starts) is home.
# Waited for, not slept: on a loaded machine the first sync can take longer than a second.
check "a periodic sync brought solo2's checkpoint home" bash -c "for _ in \$(seq 100); do grep -q . '$home/experiments/$solo2/checkpoints/runs.txt' 2>/dev/null && exit 0; sleep 0.2; done; exit 1"
held=$(isc status "$solo2" --json | py 'import json,sys; print(json.load(sys.stdin)["queue"]["run_nodes"])')
victim=$(isc nodes list --json | py "import json,sys; print([n['host'] for n in json.load(sys.stdin) if n['id']==int('${held%%,*}' or 0)][0])")
expect_exit 1 "a node that holds a run is not removed" isc nodes remove "${held%%,*}"
expect_stderr "runs experiment $solo2" isc nodes remove "${held%%,*}"
"$node/node-down" "$dir/n${victim##*.}" >/dev/null
check "the node is marked unreachable" bash -c "for _ in \$(seq 50); do '$ISC_BIN/isc' --home '$home' nodes list | grep -E '^ *${held%%,*} ' | grep -q unreachable && exit 0; sleep 0.2; done; exit 1"
check "the interrupted experiment still completes" wait_status "$solo2" completed 60
# Its first run's checkpoint came home by the periodic sync before the node went.
check "its next run counted one more start and resumed from the synced checkpoint" test "$(runs "$solo2" | awk '{print $2}' | tr '\n' ' ')" = "1 2 "
"$node/node-up" "$dir/n${victim##*.}" "$victim" 2222 "$dir/authorized_keys" >/dev/null
check "the node answers again and is up" bash -c "for _ in \$(seq 50); do '$ISC_BIN/isc' --home '$home' nodes list | grep -E '^ *${held%%,*} ' | grep -q ' up' && exit 0; sleep 0.2; done; exit 1"

kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")"
check "iscd exits 0" test $? -eq 0
rm -f "$dir/iscd.pid"
check "no AddressSanitizer report" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$dir/iscd.log'"

# 6. iscd killed during a run: the next iscd stops what is left (with grace, artifacts home)
# before the experiment resumes, with one more start.
"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd-a.log" &
echo $! >"$dir/iscd.pid"
crash=$(train "$dir/lost.isc")
check "crash runs" wait_status "$crash" running 20
sleep 1
kill -KILL "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")" 2>/dev/null
"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd-b.log" &
echo $! >"$dir/iscd.pid"
check "after the restart it completes" wait_status "$crash" completed 40
check "the left-over container was stopped with grace" test -s "$home/experiments/$crash/checkpoints/term_at"
check "its runs were counted 1 then 2" test "$(runs "$crash" | awk '{print $2}' | tr '\n' ' ')" = "1 2 "
check "the restart is in its timeline" bash -c "'$ISC_BIN/isc' --home '$home' status '$crash' | grep -q 'iscd restarted during a run'"
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")"
rm -f "$dir/iscd.pid"
check "no AddressSanitizer report (restarted iscd)" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$dir/iscd-b.log'"

# 8. Runs share no IPC (issue 42): a run's /dev/shm files and System V segments stay in
# its container (docker --ipc private), so the next run on the same nodes sees none of
# them, while the processes of one container still share both (what NCCL needs). Both
# runs take the whole pool (4 nodes), so the second runs where the first did.
tag=isc-leak-$$-$RANDOM
shm_bytes=$((40000 + RANDOM))
cat >"$dir/ipc1.isc" <<EOF
isc_project_id = "demo"
experiment_name = "ipc1"
gpus = 4
compute_mode = "cycle"
max_rapid_cycles = 1
command = 'echo secret >/dev/shm/$tag-\$RANK && ipcmk -M $shm_bytes >/dev/null && sh -c "cat /dev/shm/$tag-\$RANK; ipcs -m" | sed "s/^/same container: /"'
EOF
cat >"$dir/ipc2.isc" <<EOF
isc_project_id = "demo"
experiment_name = "ipc2"
gpus = 4
compute_mode = "cycle"
max_rapid_cycles = 1
command = 'ls -A /dev/shm | sed "s/^/shm: /"; ipcs -m | sed "s/^/ipc: /"'
EOF
"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd-ipc.log" &
echo $! >"$dir/iscd.pid"
ipc1=$(train "$dir/ipc1.isc")
check "ipc: the first run completes" wait_status "$ipc1" completed 40
check "ipc: its processes shared its /dev/shm file" grep -qx "same container: secret" "$home/experiments/$ipc1/rank_0.txt"
check "ipc: ... and its System V segment" bash -c "grep '^same container: ' '$home/experiments/$ipc1/rank_0.txt' | awk '\$7 == $shm_bytes' | grep -q ."
ipc2=$(train "$dir/ipc2.isc")
check "ipc: the second run completes" wait_status "$ipc2" completed 40
check "ipc: the second run listed its /dev/shm and segments" grep -q '^ipc: ' "$home/experiments/$ipc2/rank_0.txt"
check "ipc: the second run sees no /dev/shm file of the first" bash -c "! grep -q '$tag' '$home/experiments/$ipc2/rank_0.txt'"
check "ipc: ... and no System V segment of the first" bash -c "! grep '^ipc: ' '$home/experiments/$ipc2/rank_0.txt' | awk '\$6 == $shm_bytes' | grep -q ."
kill -TERM "$(cat "$dir/iscd.pid")"
wait "$(cat "$dir/iscd.pid")"
rm -f "$dir/iscd.pid"
check "no AddressSanitizer report (ipc)" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$dir/iscd-ipc.log'"
# What runs on the node's own IPC namespace (the code before) left on this machine.
rm -f /dev/shm/"$tag"-*
ipcs -m | awk -v b="$shm_bytes" '$5 == b {print $2}' | xargs -r -n1 ipcrm -m 2>/dev/null

# 7. Validation then burst (burst_validation on), against the mock cloud: one cycle on-prem,
# then the cloud with the checkpoint and STRONG_CYCLE_COUNT going on; a burst whose
# validation cycle fails never calls the cloud.
if ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=$TICK_MS "$repo/tests/mocks/sandbox" start --no-iscd "$dir/sandbox" >/dev/null 2>&1; then
	. "$dir/sandbox/env"
	home=$ISC_HOME
	{
		printf 'cycle_ms = 2000\nburst_validation = true\nnode_down_after_ms = 1500\n'
		cat "$home/config.toml"
	} >"$home/config.toml.new" && mv "$home/config.toml.new" "$home/config.toml"
	# isc nodes asks this platform's iscd (which makes its pool key).
	"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd2.log" &
	echo $! >"$dir/iscd.pid"
	iscd_wait_socket "$home/run/api.sock"
	# The same four machines serve this second platform: its pool key joins the first.
	isc nodes pubkey >>"$dir/authorized_keys"
	for i in 1 2 3 4; do
		install -m 600 "$dir/authorized_keys" "$dir/n$i/authorized_keys"
		isc nodes add "$base.$i" --port 2222 --user root --gpus 1 >/dev/null
	done
	cat >"$dir/vb.isc" <<'EOF'
isc_project_id = "demo"
experiment_name = "vb"
gpus = 1
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = '''
echo "vb $STRONG_CYCLE_COUNT $STRONG_CYCLE_TIME_MS $STRONG_COMPUTE_MODE" >>/mnt/checkpoints/runs.txt
echo "run $STRONG_CYCLE_COUNT of vb"
if [ "$STRONG_CYCLE_COUNT" = 1 ]; then trap 'exit 0' TERM; sleep 60 & wait; exit 0; fi
grep -q "^vb 1 2000 burst" /mnt/checkpoints/runs.txt && echo "checkpoint carried" || exit 4
sleep 1
'''
EOF
	sed 's/^experiment_name = "vb"/experiment_name = "vbad"/; s/^echo "vb .*/exit 3/' "$dir/vb.isc" >"$dir/vbad.isc"
	launched() { mock instances | py 'import json,sys; print(len(json.load(sys.stdin)))'; }
	vbad=$(isc burst "$dir/vbad.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	check "a burst whose validation cycle fails ends failed" wait_status "$vbad" failed 30
	check "its reason says the validation cycle failed" bash -c "'$ISC_BIN/isc' --home '$home' status '$vbad' | grep -q 'validation cycle: rank 0 exited with code 3'"
	check "it never called the cloud" test "$(launched)" = 0
	vb=$(isc burst "$dir/vb.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	check "the burst validates on-prem first" wait_status "$vb" validating 10
	check "then bursts and completes" wait_status "$vb" completed 90
	check "the events say the validation passed" bash -c "'$ISC_BIN/isc' --home '$home' status '$vb' | grep -q 'validation cycle on-prem passed'"
	check "the cloud launched its cluster" test "$(launched)" -ge 1
	check "the cloud run found the on-prem checkpoint" grep -q "checkpoint carried" "$home/experiments/$vb/rank_0.txt"
	check "STRONG_CYCLE_COUNT went on: 1 on-prem (2000 ms), 2 in the cloud" \
		test "$(cut -d' ' -f2,3 "$home/experiments/$vb/checkpoints/runs.txt" | tr '\n' ' ')" = "1 2000 2 0 "
	kill -TERM "$(cat "$dir/iscd.pid")"
	wait "$(cat "$dir/iscd.pid")"
	rm -f "$dir/iscd.pid"
	check "no AddressSanitizer report (second iscd)" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$dir/iscd2.log'"
	# 8. Nothing waits in silence under burst_validation. Cycles of 8 s now, so the pool
	# stays busy long enough to look at a validation that waits for it.
	sed -i 's/^cycle_ms = 2000$/cycle_ms = 8000/' "$home/config.toml"
	"$ISC_BIN/iscd" --home "$home" 2>"$dir/iscd3.log" &
	echo $! >"$dir/iscd.pid"
	# A burst the pool can never hold (8 GPUs, four 1-GPU nodes) is said so at once and
	# bursts without validation: its first cloud run is cycle 1.
	cat >"$dir/vbig.isc" <<'EOF'
isc_project_id = "demo"
experiment_name = "vbig"
gpus = 8
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-p4d.24xlarge-spot"]
command = 'echo "vbig cycle $STRONG_CYCLE_COUNT"; sleep 1'
EOF
	vbig=$(isc burst "$dir/vbig.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	check "a burst the pool can never hold leaves validating at once" bash -c "for _ in \$(seq 25); do '$ISC_BIN/isc' --home '$home' status '$vbig' --json | grep -q '\"kind\": \"validation_skipped\"' && exit 0; sleep 0.2; done; exit 1"
	check "... and bursts without validation" wait_status "$vbig" completed 60
	check "its timeline says why" bash -c "'$ISC_BIN/isc' --home '$home' status '$vbig' | grep -q 'validation cycle needs 8 node(s) of 1 GPU(s) and the on-prem pool has 4 node(s) of 1 GPU(s) (4 up, 4 free), so it can never run here; bursting without it'"
	check "its status said it bursts without a validation cycle" bash -c "'$ISC_BIN/isc' --home '$home' status '$vbig' | grep -q 'placing .*validation skipped: the on-prem pool can never hold it'"
	check "its cloud run was cycle 1, its only run" test "$(cat "$home/experiments/$vbig/rank_0.txt")" = "vbig cycle 1"
	# A cycle experiment the pool can never hold waits (an operator may add nodes) and says why.
	sed -e 's/experiment_name = "vbig"/experiment_name = "tbig"/' -e 's/compute_mode = "burst"/compute_mode = "cycle"/' \
		-e '/burst_shape_priority_list/d' "$dir/vbig.isc" >"$dir/tbig.isc"
	tbig=$(train "$dir/tbig.isc")
	check "a cycle experiment the pool can never hold says so in its status" bash -c "for _ in \$(seq 25); do '$ISC_BIN/isc' --home '$home' status '$tbig' | grep -q 'Status:   enqueued: waits: the on-prem pool can never hold it: it needs 8 node(s) of 1 GPU(s) and the on-prem pool has 4 node(s) of 1 GPU(s) (4 up, 4 free); an operator can add nodes (isc nodes add)' && exit 0; sleep 0.2; done; exit 1"
	expect_exit 0 "cancel it" isc cancel "$tbig"
	check "it ends cancelled" wait_status "$tbig" cancelled 20
	# One that fits the pool while the pool is busy says what it waits for and where it stands.
	cat >"$dir/hog.isc" <<'EOF'
isc_project_id = "demo"
experiment_name = "hog"
gpus = 4
compute_mode = "cycle"
max_rapid_cycles = 1
command = 'trap "exit 0" TERM; sleep 60 & wait'
EOF
	hog=$(isc train "$dir/hog.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	check "a cycle experiment holds the whole pool" wait_status "$hog" running 20
	vb2=$(isc burst "$dir/vb.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	check "a burst that fits the busy pool says what its validation waits for" bash -c "for _ in \$(seq 25); do '$ISC_BIN/isc' --home '$home' status '$vb2' | grep -q 'Status:   validating: burst_validation: its validation cycle waits for 1 free node(s) of 1 GPU(s); the on-prem pool has 4 node(s) of 1 GPU(s) (4 up, 0 free), the rest run other experiments' && exit 0; sleep 0.2; done; exit 1"
	check "... and its place in the queue, with the expected start" bash -c "'$ISC_BIN/isc' --home '$home' status '$vb2' | grep -q 'Queue:    waiting, #1 among cycle experiments (its validation cycle); next start expected'"
	check "--json has the queue position" test "$(field "$vb2" '["queue"]["position"]')" = 1
	check "the pool free, its validation cycle runs (and says so)" bash -c "for _ in \$(seq 75); do '$ISC_BIN/isc' --home '$home' status '$vb2' | grep -q 'Status:   validating: validation cycle (STRONG_CYCLE_COUNT 1, 8000 ms)' && exit 0; sleep 0.2; done; exit 1"
	check "the cycle experiment ran its one cycle first" wait_status "$hog" completed 20
	expect_exit 0 "cancel the validating burst" isc cancel "$vb2"
	check "it ends cancelled" wait_status "$vb2" cancelled 20
	kill -TERM "$(cat "$dir/iscd.pid")"
	wait "$(cat "$dir/iscd.pid")"
	rm -f "$dir/iscd.pid"
	check "no AddressSanitizer report (third iscd)" bash -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$dir/iscd3.log'"
else
	check "the sandbox (mock cloud) starts" false
fi

finish onprem
