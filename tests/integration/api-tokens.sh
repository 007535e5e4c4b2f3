#!/usr/bin/env bash
# Bearer tokens and the API's limits, over TCP on loopback (docs/api.md): a
# token works until it is revoked or expires; an altered, revoked, expired or
# missing token is refused (401); isc reaches a remote iscd with ISC_API_URL +
# ISC_TOKEN and prints what it prints locally; a token's secret never appears
# in iscd's log (at debug level), the audit, or `isc token list`. The server
# threads' caches never outlive a change: a revoked token, a removed member and a
# new experiment are seen at once by every thread. Limits: a body over 1 MiB is
# refused (413), a slow client is dropped, connections are capped (an idle one makes room).
. "$(dirname "$0")/lib.sh"

dir=$(mktemp -d /tmp/isc-tokens.XXXXXX)
home=$dir/home
trap 'iscd_api_stop; rm -rf "$dir"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 "$@"; }

isc init >/dev/null || exit 1
cat >>"$home/config.toml" <<CONF
api_listen = "127.0.0.1:0"
api_timeout_s = 2
api_max_connections = 8
CONF
iscd_api "$home" "$dir/iscd.log" --verbose || exit 1
for _ in $(seq 50); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
url=$(cat "$home/run/api.sock.tcp")
check "iscd wrote its TCP address" grep -Eq '^http://127\.0\.0\.1:[0-9]+$' <<<"$url"

isc org add acme >/dev/null && isc project add --org acme vision >/dev/null
isc user add fin >/dev/null && isc member add --org acme fin --role finance >/dev/null
isc credits grant --org acme 25 >/dev/null

# code TOKEN PATH [CURL-ARGS...]: the status over TCP with that bearer token ("" for none).
code() {
	local tok=$1 path=$2
	shift 2
	if [ -n "$tok" ]; then
		curl -s -o "$dir/body" -w '%{http_code}' -H "Authorization: Bearer $tok" "$@" "$url$path"
	else
		curl -s -o "$dir/body" -w '%{http_code}' "$@" "$url$path"
	fi
}
expect_code() {
	local want=$1 what=$2 got
	shift 2
	got=$(code "$@")
	if [ "$got" = "$want" ]; then passed=$((passed + 1)); else
		failed=$((failed + 1))
		echo "FAIL: $what: HTTP $got, wanted $want: $(head -c 200 "$dir/body")" >&2
	fi
}

# The operator's token (created over the socket; printed once, on stdout).
tok=$(isc token create --expires 1h 2>"$dir/create.err")
check "token create prints tok_ID.SECRET" grep -Eq '^tok_[0-9a-f]{16}\.[0-9a-f]{64}$' <<<"$tok"
check "token create says it is shown once" grep -q "shown once" "$dir/create.err"
tid=${tok%%.*}
secret=${tok#*.}
expect_code 200 "the token works" "$tok" /v1/whoami
check "a TCP caller's address is recorded as tcp:127.0.0.1" grep -q '"tcp:127.0.0.1:' "$dir/body"
expect_code 401 "no token" "" /v1/whoami
expect_code 401 "not a bearer header" "" /v1/whoami -H "Authorization: Basic $tok"
# Altered: the last hex digit changed; a digit of the id changed; the secret cut short.
last=${tok: -1}
alt=${tok%?}$([ "$last" = 0 ] && echo 1 || echo 0)
expect_code 401 "an altered secret" "$alt" /v1/whoami
check "the altered token is answered 'invalid token'" grep -q '"invalid token"' "$dir/body"
expect_code 401 "an altered id" "tok_0000000000000000.$secret" /v1/whoami
expect_code 401 "a truncated token" "${tok%????}" /v1/whoami
expect_code 401 "the secret alone" "$secret" /v1/whoami

# isc as a remote client: same table, same --json, same exit codes.
check "isc org list over TCP equals the local one" test "$(ISC_API_URL=$url ISC_TOKEN=$tok "$ISC_BIN/isc" org list --json)" = "$(isc org list --json)"
expect_exit 1 "remote status of a missing experiment: exit 1" env ISC_API_URL="$url" ISC_TOKEN="$tok" "$ISC_BIN/isc" status exp_0000000000000000
expect_exit 1 "ISC_API_URL without ISC_TOKEN" env ISC_API_URL="$url" "$ISC_BIN/isc" experiments
expect_stderr "ISC_TOKEN" env ISC_API_URL="$url" "$ISC_BIN/isc" experiments
expect_exit 1 "a refused token: exit 1" env ISC_API_URL="$url" ISC_TOKEN="$alt" "$ISC_BIN/isc" experiments
expect_exit 1 "no iscd at ISC_API_URL: exit 1" env ISC_API_URL="http://127.0.0.1:1" ISC_TOKEN="$tok" "$ISC_BIN/isc" experiments
expect_stderr "iscd is not running" env ISC_API_URL="http://127.0.0.1:1" ISC_TOKEN="$tok" "$ISC_BIN/isc" experiments

# Finance over HTTP: the spend report as CSV with a token (roles: api-isolation.sh).
expect_code 200 "spend as CSV with a token" "$tok" "/v1/spend?project=vision&by=day&format=csv"
check "the CSV has its header" grep -q '^day,amount,amount_micros' "$dir/body"

# Revoked: refused at once; it stays listed as revoked.
expect_exit 0 "token revoke" isc token revoke "$tid"
expect_code 401 "a revoked token" "$tok" /v1/whoami
check "the refusal says revoked" grep -q "revoked" "$dir/body"
check "token list shows the revocation" bash -c "'$ISC_BIN/isc' --home '$home' token list --json | grep -q '\"revoked_at_ms\": [0-9]'"
expect_exit 1 "revoking it again" isc token revoke "$tid"
expect_exit 2 "revoke refuses a whole token (it would land in argv history)" isc token revoke "$tok"
# Expired: a 1-second token, refused after it lapsed.
etok=$(isc token create --expires 1s 2>/dev/null)
expect_code 200 "a fresh short token works" "$etok" /v1/whoami
sleep 1.3
expect_code 401 "an expired token" "$etok" /v1/whoami
check "the refusal says expired" grep -q "expired" "$dir/body"
expect_exit 2 "--expires must be a duration" isc token create --expires soon

# Caches never outlive a change. Each server thread keeps the tokens and roles it read until
# the store's auth version moves, and the listings until anything is committed (docs/api.md,
# "Threads and the store"; api-cache.sh checks what survives), so every check
# below first has many threads serve the caller (40 requests, each on its own connection),
# then changes the store, then asks 40 times again: every answer must be the new one.
# each TOKEN PATH: the HTTP status of 40 requests, each on a new connection, one a line.
each() {
	local i
	for i in $(seq 40); do
		curl -s -o "$dir/each.$i" -w '%{http_code}\n' -H "Authorization: Bearer $1" "$url$2"
	done
}
# A finance token for fin, stored as iscd stores one (fin is no OS user here).
fsecret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
ISC_HOME=$home store_sql "INSERT INTO api_tokens (id, user_id, hash, created_at_ms)
	SELECT 'tok_00000000000000f1', id, '$(printf '%s' "$fsecret" | sha256sum | cut -d' ' -f1)', 0 FROM users WHERE name = 'fin'"
ftok="tok_00000000000000f1.$fsecret"
check "fin's credits, 40 times: 200" test "$(each "$ftok" "/v1/credits?org=acme" | sort -u)" = 200
isc member remove --org acme fin >/dev/null
check "fin removed from acme: 404 at once, 40 times" test "$(each "$ftok" "/v1/credits?org=acme" | sort -u)" = 404
ctok=$(isc token create 2>/dev/null)
check "the operator's listing, 40 times: 200" test "$(each "$ctok" /v1/experiments | sort -u)" = 200
cat >"$dir/cache.isc" <<ISC
isc_project_id = "vision"
experiment_name = "cache-check"
gpus = 8
command = "python train.py"
ISC
new_id=$(isc train "$dir/cache.isc" | grep -Eo 'exp_[0-9a-f]{16}')
each "$ctok" /v1/experiments >/dev/null
check "a new experiment is in all 40 listings at once" test "$(grep -l "\"$new_id\"" "$dir"/each.* | wc -l)" = 40
check "whoami with a token, 40 times: 200" test "$(each "$ctok" /v1/whoami | sort -u)" = 200
expect_code 200 "a token revokes itself over TCP" "$ctok" "/v1/tokens/${ctok%%.*}" -X DELETE
check "revoked over TCP: 401 at once, 40 times" test "$(each "$ctok" /v1/whoami | sort -u)" = 401
rtok=$(isc token create 2>/dev/null)
check "another token, 40 times: 200" test "$(each "$rtok" /v1/whoami | sort -u)" = 200
isc token revoke "${rtok%%.*}" >/dev/null
check "revoked over the socket: 401 at once, 40 times" test "$(each "$rtok" /v1/whoami | sort -u)" = 401

# Limits: a body over the cap is refused; a slow client is dropped; connections capped.
ltok=$(isc token create 2>/dev/null)
head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$dir/big"
expect_code 413 "a 2 MiB body" "$ltok" "/v1/experiments?file=big.isc" -X POST --data-binary @"$dir/big"
check "a slow client is dropped after api_timeout_s" py - "$url" <<'PY'
import socket, sys, time
host, port = sys.argv[1][len("http://"):].split(":")
s = socket.create_connection((host, int(port)))
s.sendall(b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\n")  # headers never finished
s.settimeout(10)
t = time.time()
try:
    data = s.recv(100)
except OSError:
    data = b""
sys.exit(0 if time.time() - t < 6 else 1)
PY
# A full listener makes room by cutting its oldest connection that has not yet shown an
# identified request (docs/api.md, "Limits"): 8 idle connections cannot lock a caller out.
check "over api_max_connections, an idle connection makes room for a new caller" py - "$url" <<'PY'
import socket, sys, time
host, port = sys.argv[1][len("http://"):].split(":")
held = [socket.create_connection((host, int(port))) for _ in range(8)]
time.sleep(0.3)
extra = socket.create_connection((host, int(port)))
extra.settimeout(1.5)
extra.sendall(b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n")
try:
    answer = extra.recv(100)
except OSError:
    answer = b""
# Answered by the handler (401: no token), and exactly one idle connection was cut (looked
# at well before api_timeout_s, 2 s, would close the others).
time.sleep(0.2)
cut = 0
for h in held:
    try:
        cut += h.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        pass
sys.exit(0 if answer.startswith(b"HTTP/1.1 401") and cut == 1 else 1)
PY
# Held by identified callers (8 POSTs with a token whose bodies are still on their way),
# the cap refuses the next connection: closed without an answer.
check "connections over api_max_connections are refused while identified callers hold the cap" py - "$url" "$ltok" <<'PY'
import socket, sys, time
host, port = sys.argv[1][len("http://"):].split(":")
held = []
for _ in range(8):
    h = socket.create_connection((host, int(port)))
    h.sendall(b"POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + sys.argv[2].encode()
              + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    held.append(h)
time.sleep(0.3)
extra = socket.create_connection((host, int(port)))
extra.settimeout(1.5)
extra.sendall(b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n")
try:
    answer = extra.recv(100)
except OSError:
    answer = b""
# Refused: closed without an answer (or an error status), never a 401/200 from a handler.
sys.exit(0 if not answer.startswith(b"HTTP/1.1 401") and not answer.startswith(b"HTTP/1.1 200") else 1)
PY
sleep 2.5 # the held connections time out
expect_code 200 "served again once they are gone" "$ltok" /v1/whoami

# The secrets appear nowhere: not in iscd's debug log, the audit, or the token listing; nor
# in the store (the SQLite file's .dump, or a pg_dump of the PostgreSQL database).
not_stored() {
	local dump
	dump=$(ISC_HOME=$home store_dump) && [ -n "$dump" ] || return 1
	! grep -qF -- "$1" <<<"$dump"
}
for t in "$tok" "$etok" "$ltok"; do
	s=${t#*.}
	check "secret ${t%%.*} not in iscd's log" bash -c "! grep -qF '$s' '$dir/iscd.log'"
	check "secret ${t%%.*} not in the audit" bash -c "! '$ISC_BIN/isc' --home '$home' audit --json | grep -qF '$s'"
	check "secret ${t%%.*} not in the store" not_stored "$s"
	check "secret ${t%%.*} not in token list" bash -c "! '$ISC_BIN/isc' --home '$home' token list --json | grep -qF '$s'"
done
check "iscd's log has the TCP requests (so the check above looked at something)" grep -q 'api: GET /v1/whoami -> 200' "$dir/iscd.log"
check "the audit has the token calls by id" bash -c "'$ISC_BIN/isc' --home '$home' audit --json | grep -q '$tid'"
check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
finish api-tokens
