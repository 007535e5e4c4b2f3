#!/usr/bin/env bash
# Node transfers and workers (issue 42, docs/security.md): hostile nodes against the
# sandbox (real iscd, mock cloud, real sshd nodes) with broker_workers = 2.
#  1. Organisation demo's two bursts make their nodes' `tar` trickle one byte a second
#     (tests/mocks/node/hostile-bin/tar), so both periodic syncs hold a worker. Another
#     organisation's new burst still gets a worker within a tick (the fair share), and the
#     pre-empted sync says why, its previous copy whole.
#  2. `isc cancel` of a burst whose sync trickles ends that sync within a few seconds.
#  3. With transfer_window_ms = 3000 a trickling pull stops on the throughput floor, and
#     a steady one over transfer_deadline_ms on the deadline; each error names the rank,
#     the node and the limit, and the copy at home stays whole.
#  4. With org_artifact_quota_bytes = 4 MiB, demo's 6 MiB checkpoint is not brought home
#     (its timeline says so, the previous copy stays), while the other organisation's
#     burst runs and its checkpoint comes home.
. "$(dirname "$0")/lib.sh"
sandbox_dir transfers
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=1000 SANDBOX_PROVIDERS=aws SANDBOX_NODE_IP_BASE=127.$((200 + $$ % 50)) \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
tick_ms=1000
# Top-level keys go before the first [table] of config.toml. Only keys main knows, so this
# phase runs (and fails) on the code before the fix too. The sandbox syncs every 1-2 s.
base_config=$(cat "$ISC_HOME/config.toml")
set_config() { { printf '%s\n' "$@"; echo "$base_config"; } >"$ISC_HOME/config.toml"; }
set_config "broker_workers = 2"
start_iscd || exit 1

isc org add other >/dev/null && pb=$(isc project add --org other vision 2>/dev/null) &&
	isc credits grant --org other 1000 >/dev/null
check "a second organisation with credits" test -n "${pb:-}"

# launchfile NAME PROJECT COMMAND: a 1-node burst in us-east-1 (lib.sh's burst_isc).
launchfile() { burst_isc "$1" "$2" aws-us-east-1-g4dn.xlarge-spot "$3"; }
# The hostile node owner: a first checkpoint comes home, then every archive trickles.
launchfile trickle demo 'echo first > /mnt/checkpoints/step; sleep 8; echo "1 1000" > /mnt/.tar-trickle; sleep 900'
launchfile plain "$pb" 'head -c 1048576 /dev/urandom > /mnt/checkpoints/b.ckpt; sleep 25'

node_of() { # node_of EXP: the mock node folder of EXP's rank 0 ("" before it has one)
	local iid
	iid=$(running_instance "$1")
	[ -n "$iid" ] && echo "$dir/mock/nodes/$iid"
}
# trickling EXP: a trickle runs on EXP's node now (its log's last line is a start).
trickling() {
	local n
	n=$(node_of "$1") && [ -f "$n/tar-trickle.log" ] && tail -n1 "$n/tar-trickle.log" | grep -q '^start'
}
ms_now() { date +%s%3N; }
first_copy() { [ "$(cat "$ISC_HOME/experiments/$1/checkpoints/step" 2>/dev/null)" = first ]; }

a1=$(submit "$dir/trickle.isc")
a2=$(submit "$dir/trickle.isc")
check "demo's bursts run" wait_status "$a1" running 90
check "demo's second burst runs" wait_status "$a2" running 90
both_first() { first_copy "$a1" && first_copy "$a2"; }
both_trickle() { trickling "$a1" && trickling "$a2"; }
check "their first checkpoints came home" within 30 both_first
check "both syncs trickle: both workers are held" within 30 both_trickle
sleep 2 # a tick in which both workers stay busy

# ---- 1. the other organisation's burst gets a worker within a tick ----
t0=$(ms_now)
b1=$(submit "$dir/plain.isc")
left_enqueued() { [ "$(status_of "$b1")" != enqueued ]; }
within 120 left_enqueued >/dev/null 2>&1
waited=$(($(ms_now) - t0))
echo "# the other organisation's burst left 'enqueued' after $waited ms (tick $tick_ms ms)" >&2
check "the other organisation's burst got a worker within a tick ($waited ms)" test "$waited" -le $((tick_ms + 2500))
yielded() { status_says "$a1" "another organisation's burst" || status_says "$a2" "another organisation's burst"; }
check "the pre-empted sync says why on demo's timeline" within 10 yielded
check "demo's copies at home stayed whole" both_first
check "the other organisation's burst runs" wait_status "$b1" running 90

# ---- 2. a cancel ends a trickling sync promptly ----
check "a sync of $a1 trickles again" within 30 trickling "$a1"
t0=$(ms_now)
isc cancel "$a1" >/dev/null
cut() { isc status "$a1" | grep -q "cut short: the experiment was cancelled"; }
within 30 cut >/dev/null 2>&1
took=$(($(ms_now) - t0))
echo "# the cancel cut the trickling sync after $took ms" >&2
check "the cancel cut the trickling sync short ($took ms)" test "$took" -le 5000
n1=$(node_of "$a1")
check "the trickle on the node ended" within 10 bash -c "tail -n1 '$n1/tar-trickle.log' | grep -q '^end'"
check "the cancelled burst's copy at home is whole" first_copy "$a1"
# Its teardown's pull trickles now, and is never cut short (the last copy of the cycle):
# iscd is killed, and the next one finishes the teardown (it redoes it whole).
kill_iscd

# ---- 3. the throughput floor and the deadline ----
set_config "broker_workers = 2" "transfer_window_ms = 3000"
start_iscd || exit 1
check "the cancelled burst ends: its teardown's trickling pull is stopped too" wait_status "$a1" cancelled 60
slow() { isc status "$a2" | grep -E "rank 0 \(i-[0-9a-f]+, 127\.[0-9.]+\): artifact pull: .*transfer stopped: moved [0-9]+ bytes in 3000 ms, under transfer_min_bytes_per_s \(65536\)"; }
check "a trickling pull stops on the floor, naming rank, node and limit" within 30 slow
check "its copy at home stayed whole" first_copy "$a2"
stop_iscd
n2=$(node_of "$a2")
head -c $((8 << 20)) /dev/urandom >"$n2/mnt/checkpoints/big.ckpt"
echo "65536 100" >"$n2/mnt/.tar-trickle" # about 640 KiB/s: over the floor, 13 s for 8 MiB
set_config "broker_workers = 2" "transfer_deadline_ms = 3000"
start_iscd || exit 1
late() { isc status "$a2" | grep -E "rank 0 \(i-[0-9a-f]+, 127\.[0-9.]+\): artifact pull: .*transfer stopped: ran for 3 s \([0-9]+ bytes moved\), over transfer_deadline_ms \(3000\)"; }
check "a steady pull stops at the deadline, naming rank, node and limit" within 40 late
check "the checkpoint that did not come home in time is not there" test ! -e "$ISC_HOME/experiments/$a2/checkpoints/big.ckpt"
check "and the earlier copy stayed whole" first_copy "$a2"
rm -f "$n2/mnt/.tar-trickle"
check "without the trickle the same checkpoint comes home" within 40 cmp -s "$n2/mnt/checkpoints/big.ckpt" "$ISC_HOME/experiments/$a2/checkpoints/big.ckpt"
isc cancel "$a2" >/dev/null
check "demo's second burst ends" wait_status "$a2" cancelled 60
stop_iscd

# ---- 4. an organisation at its artifact quota does not stop another ----
set_config "broker_workers = 2" "org_artifact_quota_bytes = 16777216"
start_iscd || exit 1
# demo keeps 8 MiB ($a2's big.ckpt) and a little: a first 2 MiB copy fits, 10 MiB more does not.
launchfile hoard demo 'head -c 2097152 /dev/urandom > /mnt/checkpoints/first.ckpt; echo first > /mnt/checkpoints/step; sleep 4; head -c 10485760 /dev/urandom > /mnt/checkpoints/more.ckpt; sleep 900'
a3=$(submit "$dir/hoard.isc")
check "demo's hoarding burst runs" wait_status "$a3" running 90
check "its first copy came home" within 30 first_copy "$a3"
quota() { isc status "$a3" | grep -q "org_artifact_quota_bytes (16 MiB)"; }
check "the pull over demo's quota is refused, on its timeline" within 30 quota
kept() { first_copy "$a3" && [ -f "$ISC_HOME/experiments/$a3/checkpoints/first.ckpt" ] && [ ! -e "$ISC_HOME/experiments/$a3/checkpoints/more.ckpt" ]; }
check "the copy at home stayed whole, without the file over the quota" kept
b2=$(submit "$dir/plain.isc")
check "with demo at its quota, the other organisation's burst runs" wait_status "$b2" running 90
check "and its checkpoint comes home" within 30 test -s "$ISC_HOME/experiments/$b2/checkpoints/b.ckpt"
check "the other organisation's bursts complete" wait_status "$b2" completed 90
check "the first one too" wait_status "$b1" completed 90
isc cancel "$a3" >/dev/null
check "demo's hoarding burst ends" wait_status "$a3" cancelled 60
check "nothing left running" wait_no_live
stop_iscd
# Bad values are refused by name.
set_config "transfer_window_ms = 10"
expect_stderr "transfer_window_ms" "$ISC_BIN/iscd" --once
check "iscd logged no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish transfers
