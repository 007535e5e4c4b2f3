#!/usr/bin/env bash
# isc nodes: the on-prem pool is registered, listed, drained, removed; bad
# fields are refused with the field named and nothing written; the pool's
# public key is stable and its private half stays owner-only in $ISC_HOME.
# Through iscd's API (/v1/nodes): every change leaves an audit row.
. "$(dirname "$0")/lib.sh"

home=$(mktemp -d /tmp/isc-pool.XXXXXX)/home
trap 'iscd_api_stop; rm -rf "$(dirname "$home")"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

expect_exit 0 "init" isc init
iscd_api "$home" "$(dirname "$home")/iscd.log" || exit 1
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

expect_exit 0 "add gpu-1" isc nodes add gpu-1 --gpus 8
expect_exit 0 "add gpu-1:2222" isc nodes add gpu-1 --port 2222 --user train --gpus 4
expect_exit 0 "add 127.0.0.1:40022" isc nodes add 127.0.0.1 --port 40022 --user root --gpus 8
expect_exit 1 "the same host:port twice" isc nodes add gpu-1 --gpus 8
expect_stderr "already in the pool" isc nodes add gpu-1 --gpus 8
check "list shows 3 nodes" test "$(isc nodes list | tail -n +2 | wc -l)" -eq 3
check "list --json has the fields" bash -c "'$ISC_BIN/isc' --home '$home' nodes list --json |
	/usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); n=v[1];
assert (n[\"host\"],n[\"port\"],n[\"user\"],n[\"gpus\"],n[\"state\"])==(\"gpu-1\",2222,\"train\",4,\"up\"), n'"
expect_exit 1 "drain an ambiguous host" isc nodes drain gpu-1
expect_stderr "ambiguous" isc nodes drain gpu-1
expect_exit 0 "drain gpu-1:2222" isc nodes drain gpu-1:2222
check "it is draining" bash -c "'$ISC_BIN/isc' --home '$home' nodes list | grep 'gpu-1 .* 2222 ' | grep -q draining"
expect_exit 0 "undrain by id" isc nodes undrain 2
check "it is up" bash -c "'$ISC_BIN/isc' --home '$home' nodes list | grep 'gpu-1 .* 2222 ' | grep -q ' up'"
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
check "DELETE an unknown node: 404" test "$(api -X DELETE http://localhost/v1/nodes/gpu-404)" = 404
check "drain by HOST:PORT in the path" test "$(api -X POST http://localhost/v1/nodes/gpu-1%3A2222/drain)" = 200
check "still 2 nodes (refusals wrote nothing)" test "$(isc nodes list --json | grep -c '"id"')" -eq 2
audit=$(isc audit --json)
for what in "POST /v1/nodes" "POST /v1/nodes/2/undrain" "DELETE /v1/nodes/3" "POST /v1/nodes/gpu-1:2222/drain"; do
	check "the audit has: $what" grep -qF "\"action\": \"$what\"" <<<"$audit"
done
check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$(dirname "$home")/iscd.log'"

finish pool
