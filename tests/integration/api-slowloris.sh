#!/usr/bin/env bash
# Slow clients cannot shut iscd's TCP listener (docs/api.md, "Limits"; issue 42):
# 600 slowloris connections from 60 loopback source addresses (127.77.x.y, 10 each,
# one header line a second, reconnecting when cut) against a listener of 512, and
# meanwhile every authenticated request from 127.0.0.1 is answered 200 within 1 s,
# before and after the header deadline has cut the first wave; the socket answers
# too. A trickling connection lives no longer than the deadline (4 s here, plus the
# guard's sweep), although it trickles far faster than the idle timeout (30 s).
# One address gets 32 connections, the 33rd and on are closed at once. An identified
# caller may send a body slowly past the deadline; an unidentified one is cut.
# api-slowloris.py is the client.
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh
repo=$PWD
dir=$(mktemp -d /tmp/isc-slowloris.XXXXXX)
home=$dir/home
flood_pid=
cleanup() {
	[ -n "$flood_pid" ] && kill "$flood_pid" 2>/dev/null
	iscd_api_stop
	wait 2>/dev/null
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 "$repo/tests/integration/api-slowloris.py" "$@"; }
field() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))'"$2"')' "$1"; }

isc init >/dev/null || exit 1
cat >>"$home/config.toml" <<CONF
api_listen = "127.0.0.1:0"
api_header_timeout_s = 4
CONF
log=$dir/iscd.log
iscd_api "$home" "$log" --api-only --verbose || exit 1
check "iscd started" test -n "${iscd_api_pid:-}"
for _ in $(seq 50); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
port=$(sed 's/.*://' "$home/run/api.sock.tcp")
check "iscd wrote its TCP address" grep -Eq '^[0-9]+$' <<<"$port"
tok=$(isc token create --expires 1h 2>/dev/null)
check "an operator token" grep -Eq '^tok_[0-9a-f]{16}\.[0-9a-f]{64}$' <<<"$tok"

# 1. The flood: 600 connections, more than the listener's 512.
/usr/bin/python3 "$repo/tests/integration/api-slowloris.py" flood --port "$port" --addrs 60 \
	--per-addr 10 --trickle 1 --duration 120 --reconnect --report "$dir/flood.json" &
flood_pid=$!
opened_at_least() { [ -s "$dir/flood.json" ] && [ "$(field "$dir/flood.json" '["opened"]')" -ge "$1" ]; }
check "the flood opened its 600 connections" within 60 opened_at_least 600
# Every probe: a new connection, an authenticated GET /v1/whoami, the whole reply.
py probe --port "$port" --token "$tok" --count 10 --interval 1 --out "$dir/probe.json"
probes_ok() {
	/usr/bin/python3 - "$dir/probe.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [p for p in r if p["status"] != 200 or p["seconds"] > 1.0]
for p in bad:
    print("probe: %s" % p, file=sys.stderr)
sys.exit(len(r) != 10 or bool(bad))
PY
}
check "10 authenticated requests during the flood: each 200 within 1 s" probes_ok
cat "$dir/probe.json" >&2
echo >&2
check "the Unix socket answers during the flood" isc token list
cut_some() { [ "$(field "$dir/flood.json" '["closed_by_server"]')" -ge 600 ]; }
check "the flood's connections were cut (at least 600 closings)" within 30 cut_some
life_ok() { /usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["max_life_s"] > 6.0)' "$dir/flood.json"; }
check "no trickling connection lived past the deadline (4 s, +2 s of slack)" life_ok
cat "$dir/flood.json" >&2
echo >&2
check "iscd logged what it cut" within 15 grep -q 'tcp listener: .* cut to make room' "$log"
kill "$flood_pid" 2>/dev/null
wait "$flood_pid" 2>/dev/null
flood_pid=

# 2. The deadline alone (fewer connections than the limit, so nothing is cut to make
# room): 100 trickling connections from 10 addresses are all cut, each at the deadline.
py flood --port "$port" --addrs 10 --first-addr 1000 --per-addr 10 --trickle 1 --duration 7 \
	--report "$dir/deadline.json"
check "the deadline: all 100 trickling connections closed by iscd" \
	test "$(field "$dir/deadline.json" '["closed_by_server"]')" = 100
check "... none before 3.5 s (the deadline is 4 s)" \
	/usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["min_life_s"] < 3.5)' "$dir/deadline.json"
check "... none after 6 s" \
	/usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["max_life_s"] > 6.0)' "$dir/deadline.json"
check "iscd logged the deadline's cuts" within 15 grep -q 'tcp listener: [1-9][0-9]* connection(s) past the 4000 ms deadline' "$log"

# 3. One address: 32 connections held, the 33rd and on closed at once.
py flood --port "$port" --addrs 1 --first-addr 2000 --per-addr 40 --trickle 1 --duration 2.5 \
	--report "$dir/one.json"
check "one address: 32 held" test "$(field "$dir/one.json" '["held"]')" = 32
check "... 8 closed within 1 s of opening" \
	test "$(field "$dir/one.json" '["refused_within_1s"]')" = 8

# 4. A slow body: from an identified caller it is received and answered, past the
# deadline; from a caller without a token the connection is cut at the deadline.
py slowbody --port "$port" --token "$tok" --org slowco --trickle 0.5 --total 6 --out "$dir/body1.json"
check "an identified caller's 6 s body is answered (201)" test "$(field "$dir/body1.json" '["status"]')" = 201
check "... and the org exists" bash -c "'$ISC_BIN/isc' --home '$home' org list | grep -q slowco"
py slowbody --port "$port" --org nobody --trickle 0.5 --total 6 --out "$dir/body2.json"
check "an unidentified caller's slow body is cut without a reply" \
	test "$(field "$dir/body2.json" '["status"]')" = None
check "... within the deadline and its sweep" \
	/usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["seconds"] > 6.0)' "$dir/body2.json"

kill -TERM "$iscd_api_pid"
wait "$iscd_api_pid"
rc=$?
iscd_api_pid=
check "iscd exited cleanly (exit $rc)" test "$rc" = 0
check "iscd's log has no sanitizer report" no_sanitizer_report "$log"
finish api-slowloris
