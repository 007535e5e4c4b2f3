#!/usr/bin/env bash
# Slow API calls run off the server's threads (docs/api.md, "Slow calls"): iscd with ONE
# server thread per listener, one thread for slow calls and a queue of one, and `isc check
# aws` (GET /v1/check/aws, a slow route) held on its way to the mock cloud by a gate
# (api-slow-gate.py) until the test opens it. While it hangs: status, pages and a change
# are answered (asserted before the slow call is let through, so no duration is guessed);
# a second slow call queues and a third is 503 naming the full queue, with Retry-After;
# once the gate opens both slow calls answer the cloud's identity. A client that hangs up
# during its slow call leaves no connection behind and iscd goes on; a slow call with a
# body (POST /v1/keys) answers and is audited; iscd stopped with one slow call running and
# one queued answers the queued one 503 (shutting down) and exits cleanly, with no
# sanitizer report (leaks included) in its log.
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh
repo=$PWD
dir=$(mktemp -d /tmp/isc-api-slow.XXXXXX)
export MOCKCLOUD_AWS_SECRET_ACCESS_KEY=mock-secret-key-do-not-use-in-prod
check "mockcloud started" start_mockcloud "$dir"
gate_pid=
cleanup() {
	[ -n "$gate_pid" ] && kill "$gate_pid" 2>/dev/null
	iscd_api_stop
	kill -TERM "$mock_pid" 2>/dev/null
	wait 2>/dev/null
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

gate=$dir/gate
mkdir -p "$gate"
/usr/bin/python3 "$repo/tests/integration/api-slow-gate.py" --port-file "$dir/gate.port" \
	--upstream "$MOCKCLOUD_URL" --state "$gate" 2>"$dir/gate.log" &
gate_pid=$!
check "gate started" within 30 test -s "$dir/gate.port"
gate_close() { : >"$gate/closed"; }
gate_open() { rm -f "$gate/closed"; }
held() { cat "$gate/held" 2>/dev/null || echo 0; }
held_at_least() { [ "$(held)" -ge "$1" ]; }

home=$dir/home
"$ISC_BIN/isc" --home "$home" init >/dev/null
cat >>"$home/config.toml" <<CONF
api_threads = 1
api_slow_threads = 1
api_slow_queue = 1
CONF
log=$dir/iscd.log
export AWS_ACCESS_KEY_ID=AKIDMOCKCLOUD000001 AWS_REGION=us-east-1
export ISC_MASTER_KEY_FILE=$dir/master.key
AWS_SECRET_ACCESS_KEY=$MOCKCLOUD_AWS_SECRET_ACCESS_KEY \
	AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$dir/gate.port")" \
	iscd_api "$home" "$log" --api-only --verbose
check "iscd started" test -n "${iscd_api_pid:-}"
sock=$home/run/api.sock
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

# api OUT PATH [CURL ARGS...]: the call over the socket (as the operator); the body in OUT,
# the headers in OUT.h, the status printed.
api() {
	local out=$1 path=$2
	shift 2
	curl -s --max-time 120 --unix-socket "$sock" -o "$out" -D "$out.h" -w '%{http_code}' \
		"http://iscd$path" "$@"
}
# slow_bg NAME: GET /v1/check/aws in the background; NAME.code holds the status once done.
slow_bg() {
	(code=$(api "$dir/$1" /v1/check/aws) && echo "$code" >"$dir/$1.code.tmp" &&
		mv "$dir/$1.code.tmp" "$dir/$1.code") &
}
done_yet() { test -s "$dir/$1.code"; }
queued_lines() { grep -c 'GET /v1/check/aws queued for a slow-call thread' "$log"; }
queued_at_least() { [ "$(queued_lines)" -ge "$1" ]; }
field() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))'"$2"')' "$1"; }
is_identity() {
	[ "$(cat "$dir/$1.code")" = 200 ] && [ "$(field "$dir/$1" '["provider"]')" = aws ] &&
		grep -qE '^[0-9]{12}$' <<<"$(field "$dir/$1" '["account"]')"
}
isc org add acme >/dev/null 2>&1 && isc project add --org acme vision >/dev/null 2>&1

# 1. A slow call hangs at the cloud; the one server thread answers everyone else.
gate_close
slow_bg slow1
check "the slow call reached the (held) cloud" within 60 held_at_least 1
check "whoami answered meanwhile" test "$(api "$dir/who" /v1/whoami)" = 200
check "a page of experiments answered meanwhile" \
	test "$(api "$dir/page" '/v1/experiments?limit=5')" = 200 -a "$(field "$dir/page" '.__len__()')" = 0
check "an experiment's status answered meanwhile (404 for one that is not there)" \
	test "$(api "$dir/status" /v1/experiments/exp_0123456789abcdef)" = 404
check "a change answered meanwhile (isc org add)" isc org add initech
check "the orgs' page answered meanwhile" \
	test "$(api "$dir/orgs" '/v1/orgs?limit=10')" = 200 -a "$(field "$dir/orgs" '.__len__()')" = 2
check "... all before the slow call was answered" test ! -e "$dir/slow1.code"

# 2. The one slow-call thread is busy: a second slow call waits in the queue of one; a
# third is refused at once, 503 with Retry-After, naming the full queue.
queued_before=$(queued_lines)
slow_bg slow2
check "a second slow call is queued" within 60 queued_at_least $((queued_before + 1))
code=$(api "$dir/slow3" /v1/check/aws)
check "a third slow call: 503 at once" test "$code" = 503
check "... code busy" test "$(field "$dir/slow3" '["code"]')" = busy
check "... the error names the full queue and its keys" \
	grep -q 'iscd is busy: 1 slow calls .*wait.*api_slow_queue' "$dir/slow3"
check "... with Retry-After" grep -qi '^Retry-After: [0-9]' "$dir/slow3.h"
check "... and the first is still unanswered" test ! -e "$dir/slow1.code"

# 3. The cloud answers: both slow calls get the cloud's identity, as without the pool.
gate_open
check "the first slow call answered" within 60 done_yet slow1
check "... with the cloud's identity" is_identity slow1
check "the queued slow call answered" within 60 done_yet slow2
check "... with the cloud's identity" is_identity slow2
check "the first slow call's reply is the same as a direct one's" \
	test "$(field "$dir/slow1" '["account"]')" = "$(field "$dir/slow2" '["account"]')"

# 4. A client hangs up while its slow call hangs: iscd runs the call to its end, drops the
# reply, and keeps no connection for it; then it answers quick and slow calls as before.
conns() { ss -xn state established 2>/dev/null | grep -cF " $sock "; }
no_conns() { [ "$(conns)" = 0 ]; }
finished_lines() { grep -c 'GET /v1/check/aws -> 200 (operator, .*; slow)' "$log"; }
gate_close
held_before=$(held)
finished_before=$(finished_lines)
curl -s --max-time 120 --unix-socket "$sock" -o /dev/null http://iscd/v1/check/aws &
hangup_pid=$!
check "the hung-up client's slow call reached the cloud" within 60 held_at_least $((held_before + 1))
kill "$hangup_pid" 2>/dev/null
wait "$hangup_pid" 2>/dev/null
check "iscd answers while the abandoned call hangs" test "$(api "$dir/who2" /v1/whoami)" = 200
gate_open
finished_more_than() { [ "$(finished_lines)" -gt "$1" ]; }
check "the abandoned call ran to its end" within 60 finished_more_than "$finished_before"
check "no connection is left for it" within 30 no_conns
check "a slow call after it answers" test "$(api "$dir/slow4" /v1/check/aws)" = 200

# 5. A slow call with a body (POST /v1/keys, a key the cloud refuses): the body went with
# the call to its thread; the reply is the cloud's refusal and the audit row is written.
code=$(AWS_ACCESS_KEY_ID=AKIDMOCKCLOUD000001 AWS_SECRET_ACCESS_KEY=wrong-secret-0123456789 \
	isc keys add --org acme aws --from-env 2>"$dir/keyadd.err")
check "a refused key through the slow pool: the cloud's reason" grep -q 'SignatureDoesNotMatch' "$dir/keyadd.err"
audited() {
	[ "$(api "$dir/audit" '/v1/audit?limit=1000')" = 200 ] && /usr/bin/python3 -c '
import json, sys
sys.exit(not any(a["action"] == "POST /v1/keys" and a["status"] == 400 for a in json.load(open(sys.argv[1]))))' "$dir/audit"
}
check "... audited (POST /v1/keys, 400)" audited

# 6. Stopped with a slow call running and one queued: the queued one is answered 503
# (shutting down), the running one ends when the cloud answers, iscd exits cleanly.
gate_close
held_before=$(held)
queued_before=$(queued_lines)
slow_bg slow5
check "a slow call runs (held) at the stop" within 60 held_at_least $((held_before + 1))
slow_bg slow6
check "another is queued at the stop" within 60 queued_at_least $((queued_before + 2))
kill -TERM "$iscd_api_pid"
check "the queued call is answered at the stop" within 60 done_yet slow6
check "... 503, iscd shutting down" \
	test "$(cat "$dir/slow6.code")" = 503 -a "$(field "$dir/slow6" '["code"]')" = unavailable
check "... saying so" grep -q 'shutting down' "$dir/slow6"
gate_open
wait "$iscd_api_pid"
rc=$?
iscd_api_pid=
check "iscd exited cleanly (exit $rc)" test "$rc" = 0
check "iscd's log has no sanitizer report" no_sanitizer_report "$log"
finish api-slow
