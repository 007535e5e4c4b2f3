#!/usr/bin/env bash
# isc nodes: the on-prem pool is registered, listed, drained, removed; bad
# fields are refused with the field named and nothing written; the pool's
# public key is stable and its private half stays owner-only in $ISC_HOME.
# Through iscd's API (/v1/nodes): every change leaves an audit row.
# Reachability (issue 34 item 8), on real sshd nodes (tests/mocks/node): `isc nodes add`
# logs in with the pool key first and refuses a node that does not answer, naming it and
# why (no such name, connection refused, authentication failed), within seconds; --force
# adds it unreachable. iscd probes every node each node_probe_ms: a node whose sshd is
# killed is unreachable with the reason within a period and up again once it answers; a
# changed host key is a mismatch; no run is placed on an unreachable node.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
node=$repo/tests/mocks/node

dir=$(mktemp -d /tmp/isc-pool.XXXXXX)
home=$dir/home
# Addresses of this suite only (the sandboxes use 127.100-127.149, onprem.sh 127.153).
base=127.154.$((RANDOM % 200 + 1))
cleanup() {
	iscd_api_stop
	[ -f "$dir/iscd.pid" ] && kill -TERM "$(cat "$dir/iscd.pid")" 2>/dev/null && wait "$(cat "$dir/iscd.pid")" 2>/dev/null
	for i in 1 2 3; do "$node/node-down" "$dir/n$i" >/dev/null 2>&1; done
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 -c "$@"; }
# state_of ID: "STATE REASON" of the node, as isc nodes list --json has it.
state_of() {
	isc nodes list --json | py "import json,sys
print(*[n['state'] + ' ' + n['reason'] for n in json.load(sys.stdin) if n['id'] == $1])"
}
# id_of HOST: the node's id.
id_of() { isc nodes list --json | py "import json,sys; print(*[n['id'] for n in json.load(sys.stdin) if n['host'] == '$1'])"; }
# wait_state ID STATE WORDS SECONDS: until the node is STATE with WORDS in its reason.
wait_state() {
	local end=$(($(date +%s) + $4)) now
	while :; do
		now=$(state_of "$1")
		case "$now" in "$2 "*"$3"*) return 0 ;; esac
		[ "$(date +%s)" -ge "$end" ] && break
		sleep 0.1
	done
	echo "node $1 is '$now', not $2 ($3)" >&2
	return 1
}

expect_exit 0 "init" isc init
# Until the real nodes below, iscd runs in a network namespace of its own (as root, as
# this suite is for its sshd nodes): its probes of gpu-1 and gpu-9 ask no DNS server.
if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
	setpriv --pdeathsig TERM unshare -n sh -c 'ip link set lo up && exec "$0" "$@"' \
		"$ISC_BIN/iscd" --home "$home" --interval-ms 60000 2>>"$dir/iscd.log" &
else
	echo "pool: no network namespace: the name lookups below may ask a DNS server" >&2
	setpriv --pdeathsig TERM "$ISC_BIN/iscd" --home "$home" --interval-ms 60000 2>>"$dir/iscd.log" &
fi
iscd_api_pid=$!
iscd_wait_socket "$home/run/api.sock" || exit 1
expect_exit 2 "nodes needs a subcommand" isc nodes
expect_exit 0 "nodes --help" isc nodes --help
expect_exit 2 "add needs --gpus" isc nodes add gpu-1
expect_exit 2 "add --gpus 0" isc nodes add gpu-1 --gpus 0
expect_exit 2 "add --port 70000" isc nodes add gpu-1 --port 70000 --gpus 8
expect_exit 2 "add unknown flag" isc nodes add gpu-1 --gpus 8 --bogus
expect_exit 2 "a host that looks like an option is refused" isc nodes add -oProxyCommand=x --gpus 8
expect_exit 1 "add a host with a space" isc nodes add "a b" --gpus 8
expect_stderr "host:" isc nodes add "a b" --gpus 8
expect_exit 1 "add a bad user" isc nodes add gpu-1 --user 'root;id' --gpus 8
expect_stderr "user:" isc nodes add gpu-1 --user 'root;id' --gpus 8
check "nothing written by refusals" test "$(isc nodes list --json)" = "[]"

# No such host: refused, naming the node and why; --force adds it, unreachable.
expect_exit 1 "add a host nothing resolves" isc nodes add gpu-1 --gpus 8
expect_stderr "node isc@gpu-1:22 does not answer: cannot resolve gpu-1" isc nodes add gpu-1 --gpus 8
check "nothing written by a refused probe" test "$(isc nodes list --json)" = "[]"
expect_exit 0 "add gpu-1 --force" isc nodes add gpu-1 --gpus 8 --force
expect_exit 0 "add gpu-1:2222 --force" isc nodes add gpu-1 --port 2222 --user train --gpus 4 --force
expect_exit 0 "add $base.99:40022 --force" isc nodes add "$base.99" --port 40022 --user root --gpus 8 --force
expect_exit 1 "the same host:port twice" isc nodes add gpu-1 --gpus 8 --force
expect_stderr "already in the pool" isc nodes add gpu-1 --gpus 8
check "list shows 3 nodes" test "$(isc nodes list | tail -n +2 | wc -l)" -eq 3
check "list --json has the fields" bash -c "'$ISC_BIN/isc' --home '$home' nodes list --json |
	/usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); n=v[1];
assert (n[\"host\"],n[\"port\"],n[\"user\"],n[\"gpus\"],n[\"state\"])==(\"gpu-1\",2222,\"train\",4,\"unreachable\"), n
assert n[\"reason\"].startswith(\"cannot resolve gpu-1\"), n'"
check "list shows the state and the reason" bash -c "'$ISC_BIN/isc' --home '$home' nodes list | grep -qE '^ *3 .*unreachable +connection refused: nothing listens on $base.99 port 40022'"
expect_exit 1 "drain an ambiguous host" isc nodes drain gpu-1
expect_stderr "ambiguous" isc nodes drain gpu-1
expect_exit 0 "drain gpu-1:2222" isc nodes drain gpu-1:2222
check "it is draining" bash -c "'$ISC_BIN/isc' --home '$home' nodes list | grep 'gpu-1 .* 2222 ' | grep -q draining"
expect_exit 0 "undrain by id" isc nodes undrain 2
check "undrained, it is unreachable (not up: its last probe failed)" bash -c "'$ISC_BIN/isc' --home '$home' nodes list | grep 'gpu-1 .* 2222 ' | grep -q ' unreachable '"
expect_stdout_undrain=$(isc nodes drain 2 >/dev/null; isc nodes undrain 2)
check "undrain says it stays unreachable" grep -q "undrained, unreachable" <<<"$expect_stdout_undrain"
expect_exit 0 "remove by id" isc nodes remove 3
expect_exit 1 "remove it again" isc nodes remove 3
expect_stderr "not in the pool" isc nodes remove 3
check "2 nodes left" test "$(isc nodes list --json | grep -c '"id"')" -eq 2

pub1=$(isc nodes pubkey)
pub2=$(isc nodes pubkey)
check "pubkey is an OpenSSH line" grep -Eq '^ecdsa-sha2-nistp256 AAAA[A-Za-z0-9+/=]+ ' <<<"$pub1"
check "pubkey is stable" test "$pub1" = "$pub2"
check "the private key is owner-only" test "$(stat -c %a "$home/keys/onprem-pool")" = 600
check "the private key is never printed" bash -c "! grep -q PRIVATE <<<'$pub1'"

# The routes themselves: a body without gpus, a bad port, an unknown node.
api() { curl -s -o /dev/null -w '%{http_code}' --unix-socket "$home/run/api.sock" "$@"; }
check "POST /v1/nodes without gpus: 400" test "$(api -X POST -d '{"host":"gpu-9"}' http://localhost/v1/nodes)" = 400
check "POST /v1/nodes with port 0: 400" test "$(api -X POST -d '{"host":"gpu-9","port":0,"gpus":8}' http://localhost/v1/nodes)" = 400
check "POST /v1/nodes with a string for gpus: 400" test "$(api -X POST -d '{"host":"gpu-9","gpus":"8"}' http://localhost/v1/nodes)" = 400
check "POST /v1/nodes with a string for force: 400" test "$(api -X POST -d '{"host":"gpu-9","gpus":8,"force":"yes"}' http://localhost/v1/nodes)" = 400
check "POST /v1/nodes of a node that does not answer: 409" test "$(api -X POST -d '{"host":"gpu-9","gpus":8}' http://localhost/v1/nodes)" = 409
check "DELETE an unknown node: 404" test "$(api -X DELETE http://localhost/v1/nodes/gpu-404)" = 404
check "drain by HOST:PORT in the path" test "$(api -X POST http://localhost/v1/nodes/gpu-1%3A2222/drain)" = 200
check "still 2 nodes (refusals wrote nothing)" test "$(isc nodes list --json | grep -c '"id"')" -eq 2
audit=$(isc audit --json)
for what in "POST /v1/nodes" "POST /v1/nodes/2/undrain" "DELETE /v1/nodes/3" "POST /v1/nodes/gpu-1:2222/drain"; do
	check "the audit has: $what" grep -qF "\"action\": \"$what\"" <<<"$audit"
done
expect_exit 0 "remove gpu-1" isc nodes remove gpu-1:22
expect_exit 0 "remove gpu-1:2222" isc nodes remove gpu-1:2222

# ---- reachability, on real sshd nodes ----
# (iscd now in this machine's network, for the loopback addresses of the nodes)
iscd_api_stop
iscd_api "$home" "$dir/iscd.log" || exit 1
isc nodes pubkey >"$dir/authorized_keys"
: >"$dir/no_keys"
"$node/node-up" "$dir/n1" "$base.1" 2222 "$dir/authorized_keys" >/dev/null || echo "node 1 did not come up" >&2
"$node/node-up" "$dir/n2" "$base.2" 2222 "$dir/no_keys" >/dev/null || echo "node 2 did not come up" >&2

# Nothing listens at $base.3:2222: refused within seconds, naming the node and why.
t0=$(date +%s%3N)
expect_exit 1 "add a node with nothing listening" isc nodes add "$base.3" --port 2222 --user root --gpus 1
refused_ms=$(($(date +%s%3N) - t0))
echo "pool: a node with nothing listening was refused in ${refused_ms} ms"
check "refused within 5 s" test "$refused_ms" -lt 5000
expect_stderr "node root@$base.3:2222 does not answer: connection refused: nothing listens on $base.3 port 2222; not added" \
	isc nodes add "$base.3" --port 2222 --user root --gpus 1
# sshd answers, but the pool key is not in its authorized_keys.
expect_exit 1 "add a node that refuses the pool key" isc nodes add "$base.2" --port 2222 --user root --gpus 1
expect_stderr "does not answer: authentication failed: root@$base.2:2222 refused the pool key" \
	isc nodes add "$base.2" --port 2222 --user root --gpus 1
check "refusals added nothing" test "$(isc nodes list --json)" = "[]"
expect_exit 0 "add a node that answers" isc nodes add "$base.1" --port 2222 --user root --gpus 1
n1=$(id_of "$base.1")
check "it is up, with no reason" test "$(state_of "$n1")" = "up "
check "its host key is pinned as the add saw it" test "$(sqlite3 "$home/isc.db" "SELECT key_type FROM host_keys WHERE target = 'onprem-node-$n1'")" = ssh-ed25519
expect_exit 0 "add $base.3 --force" isc nodes add "$base.3" --port 2222 --user root --gpus 1 --force
n3=$(id_of "$base.3")
check "the forced node is unreachable, with the reason" wait_state "$n3" unreachable "connection refused" 0
check "ids are not reused (a removed node's id names no other)" test "$n1" -gt 3

# iscd probes every node each node_probe_ms (a second here).
iscd_api_stop
cat >>"$home/config.toml" <<CONF

# Written by tests/integration/pool.sh: probes a second apart.
tick_interval_ms = 200
node_probe_ms = 1000
node_down_after_ms = 1500
cycle_ms = 60000
CONF
"$ISC_BIN/iscd" --home "$home" 2>>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"
iscd_wait_socket "$home/run/api.sock"
"$node/node-up" "$dir/n3" "$base.3" 2222 "$dir/authorized_keys" >/dev/null || echo "node 3 did not come up" >&2
check "the forced node is up once it answers" wait_state "$n3" up "" 10
t0=$(date +%s%3N)
"$node/node-down" "$dir/n1" >/dev/null
check "a node whose sshd is killed is unreachable within a period" wait_state "$n1" unreachable "connection refused: nothing listens on $base.1 port 2222" 10
echo "pool: a killed sshd was seen unreachable after $(($(date +%s%3N) - t0)) ms (node_probe_ms 1000)"
check "isc nodes shows it" bash -c "'$ISC_BIN/isc' --home '$home' nodes list | grep -qE '^ *$n1 .*unreachable +connection refused'"
"$node/node-up" "$dir/n1" "$base.1" 2222 "$dir/authorized_keys" >/dev/null
check "it is up again once it answers" wait_state "$n1" up "" 10
# A new host key at the same address: a mismatch, and no login.
"$node/node-down" "$dir/n3" >/dev/null
rm -f "$dir/n3/hostkey" "$dir/n3/hostkey.pub"
"$node/node-up" "$dir/n3" "$base.3" 2222 "$dir/authorized_keys" >/dev/null
check "a changed host key: unreachable, host key mismatch" wait_state "$n3" unreachable "host key mismatch" 10

# No run on an unreachable node: an experiment of 2 nodes waits, saying so, while the
# pool has 1 node up and 1 unreachable; once the operator re-adds the node (a new host
# key is theirs to accept) it runs on both.
isc org add demo >/dev/null
isc project add --org demo demo >/dev/null
cat >"$dir/two.isc" <<'LAUNCH'
isc_project_id = "demo"
experiment_name = "two"
gpus = 2
compute_mode = "cycle"
command = "echo rank $RANK; sleep 1"
LAUNCH
exp=$(isc train "$dir/two.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "it waits: 1 node up, the other unreachable" bash -c "for _ in \$(seq 100); do '$ISC_BIN/isc' --home '$home' status '$exp' | grep -q 'waits for 2 node(s) of 1 GPU(s); the on-prem pool has 2 node(s) of 1 GPU(s) (1 up, 1 free): the others are unreachable or draining' && exit 0; sleep 0.1; done; exit 1"
sleep 2 # several ticks and probes: it must not have started meanwhile
check "it never started" test "$(status_of "$exp")" = enqueued
expect_exit 0 "remove the node with the new host key" isc nodes remove "$n3"
expect_exit 0 "add it again" isc nodes add "$base.3" --port 2222 --user root --gpus 1
check "then it runs on both nodes and completes" wait_status "$exp" completed 60
check "both ranks ran" bash -c "grep -q 'rank 0' '$home/experiments/$exp/rank_0.txt' && grep -q 'rank 1' '$home/experiments/$exp/rank_1.txt'"

check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"

finish pool
