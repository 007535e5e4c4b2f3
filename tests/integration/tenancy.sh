#!/usr/bin/env bash
# Tenants cannot reach past their own (issue 29; docs/security.md "Tenants"):
#  1. an organisation's GCP key whose token_uri is a loopback listener of the caller's is
#     refused before any request (the listener counts zero connections), naming token_uri;
#     the same listener as the operator's own endpoint is asked (the count works), and its
#     error_description never reaches the caller, only the OAuth error code;
#  2. tokens made with tokens: expiry cut to the parent's, revoked with the parent (child
#     and grandchild), no token without expiry over TCP (the Unix socket may), `isc token
#     list` shows the parent;
#  3. the CLI refuses to send a secret (a cloud key, a dataset's keys, a new token) to a
#     non-loopback http:// API before it sends anything: inside `unshare -n` (no route),
#     traced with strace (no socket is even opened);
#  4. a node that floods `docker wait` (the mock node's wait-flood-bytes fault) costs iscd
#     no memory: its peak RSS stays within a few MiB while 96 MiB stream in.
# The dataset part of the issue is tests/integration/tenancy-datasets.sh.
. "$(dirname "$0")/lib.sh"
# A runner's lock (flock FILE tenancy.sh keeps it open as fd 3): no daemon of ours keeps it.
exec 3>&-
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-tenancy.XXXXXX)
home=$dir/home
listener_pid=
cleanup() {
	iscd_api_stop
	[ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null
	[ -s "$dir/flood-iscd.pid" ] && kill "$(cat "$dir/flood-iscd.pid")" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir/sb" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 "$@"; }
# A random loopback address 127.A.B.C (never 127.0.0.1), so parallel suites do not meet.
rand_lo() { echo "127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"; }

# ---- 1. GCP token_uri ----
isc init >/dev/null || exit 1
cat >>"$home/config.toml" <<CONF
api_listen = "127.0.0.1:0"
CONF
# The listener: counts connections (a file, rewritten per connection) and answers every
# request as a token endpoint refusing the grant, with a description that must not leak.
lo=$(rand_lo)
# Started directly (not through a function), so $! is python itself and cleanup stops it;
# fd 3 closed, so a lock the suite's runner holds is not kept by the listener.
/usr/bin/python3 - "$lo" "$dir/port" "$dir/count" <<'PY' 3>&- &
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen(16)
open(sys.argv[2], "w").write(str(s.getsockname()[1]))
n = 0
open(sys.argv[3], "w").write("0")
body = b'{"error":"invalid_grant","error_description":"LEAKED-DESCRIPTION from the listener"}'
while True:
    c, _ = s.accept()
    n += 1
    open(sys.argv[3], "w").write(str(n))
    c.settimeout(5)
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    c.close()
PY
listener_pid=$!
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
check "the counting listener is up" test -n "$port"
count() { cat "$dir/count"; }

# The operator's GCP: an endpoint that is not the listener (nothing answers there).
cat >>"$home/config.toml" <<CONF

[providers.gcp]
regions = ["us-central1"]
endpoint_compute = "http://127.0.0.1:1/compute/v1/"
CONF
# A key of the organisation's: the published FAKE key, its token_uri the caller's listener.
keyjson() { # TOKEN_URI OUT
	py - "$repo/tests/vectors/gcp/service-account/service_account.modern-layout.FAKE.json" "$1" "$2" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))
k["token_uri"] = sys.argv[2]
json.dump(k, open(sys.argv[3], "w"))
PY
}
keyjson "http://$lo:$port/token" "$dir/key-listener.json"
keyjson "http://$lo:$port/" "$dir/key-listener-root.json"
keyjson "https://oauth2.googleapis.com.$lo.nip.io/token" "$dir/key-lookalike.json"
iscd_api "$home" "$dir/iscd.log" || exit 1
isc org add acme >/dev/null
expect_exit 1 "a GCP key whose token_uri is a loopback listener is refused" \
	isc keys add --org acme gcp --file "$dir/key-listener.json"
expect_stderr '"token_uri"' isc keys add --org acme gcp --file "$dir/key-listener.json"
expect_stderr "a key cannot choose where iscd sends requests" isc keys add --org acme gcp --file "$dir/key-listener-root.json"
expect_stderr '"token_uri"' isc keys add --org acme gcp --file "$dir/key-lookalike.json"
check "the listener was never asked (zero connections)" test "$(count)" = 0
check "no key was stored" test "$(isc keys list --json)" = "[]"
# Control: the same listener as the operator's own GCP endpoint is the token endpoint, so
# iscd asks it; what the caller reads is the OAuth error code alone.
iscd_api_stop
sed -i "s|^endpoint_compute = .*|endpoint_compute = \"http://$lo:$port/compute/v1/\"|" "$home/config.toml"
iscd_api "$home" "$dir/iscd.log" || exit 1
isc keys add --org acme gcp --file "$dir/key-listener.json" >/dev/null 2>"$dir/control.err"
check "the operator's endpoint is asked (the listener counts it)" test "$(count)" -ge 1
check "the refusal quotes the OAuth error code" grep -q "token exchange: invalid_grant (HTTP 400)" "$dir/control.err"
check "the answer's description never reaches the caller" bash -c "! grep -q LEAKED '$dir/control.err'"
check "nor iscd's log" bash -c "! grep -q LEAKED '$dir/iscd.log'"
iscd_api_stop

# ---- 2. tokens made with tokens ----
iscd_api "$home" "$dir/iscd.log" || exit 1
for _ in $(seq 50); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
url=$(cat "$home/run/api.sock.tcp")
# api TOKEN METHOD PATH [BODY]: the HTTP status over TCP; the body in $dir/body.
api() {
	curl -s -o "$dir/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
		${4:+-H 'Content-Type: application/json' --data "$4"} "$url$3"
}
field() { py -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("null" if v is None else v)' "$dir/body" "$1"; }
parent=$(isc token create --expires 60s 2>/dev/null)
pid_=${parent%%.*}
pexp=$(isc token list --json | py -c 'import json,sys; print([t for t in json.load(sys.stdin) if t["id"]==sys.argv[1]][0]["expires_at_ms"])' "$pid_")
check "a token without expiry over TCP is refused (400)" test "$(api "$parent" POST /v1/tokens '{}')" = 400
check "... saying the Unix socket may" grep -q "only over iscd's Unix socket" "$dir/body"
check "the CLI over TCP says so too" bash -c "ISC_API_URL='$url' ISC_TOKEN='$parent' '$ISC_BIN/isc' token create 2>&1 >/dev/null | grep -q -- '--expires is required'"
check "a child asking for an hour is made (201)" test "$(api "$parent" POST /v1/tokens '{"expires_in_s":3600}')" = 201
child=$(field token)
check "its expiry is cut to the parent's" test "$(field expires_at_ms)" = "$pexp"
check "the reply says it was cut" test "$(field expiry_cut_to_parent)" = True
check "the reply names the parent" test "$(field parent)" = "$pid_"
check "a grandchild of 30 s is made (201)" test "$(api "$child" POST /v1/tokens '{"expires_in_s":30}')" = 201
grand=$(field token)
check "the grandchild's parent is the child" test "$(field parent)" = "${child%%.*}"
check "the grandchild keeps its own, shorter expiry" test "$(field expires_at_ms)" -lt "$pexp"
check "the grandchild works" test "$(api "$grand" GET /v1/whoami)" = 200
isc token list >"$dir/list.txt"
check "isc token list has a PARENT column" grep -q "PARENT" "$dir/list.txt"
check "isc token list shows the child's parent" grep -Eq "^${child%%.*} .* $pid_ *\$" "$dir/list.txt"
check "isc token list shows the grandchild's parent" grep -Eq "^${grand%%.*} .* ${child%%.*} *\$" "$dir/list.txt"
check "list --json carries parent" bash -c "'$ISC_BIN/isc' --home '$home' token list --json | grep -q '\"parent\": \"$pid_\"'"
isc token revoke "$pid_" >"$dir/revoke.txt"
check "revoking the parent says 2 went with it" grep -q "and 2 token(s) made with it" "$dir/revoke.txt"
check "the child is revoked with it (401)" test "$(api "$child" GET /v1/whoami)" = 401
check "the grandchild too (401)" test "$(api "$grand" GET /v1/whoami)" = 401
check "the list shows all three revoked" test "$(isc token list --json | py -c 'import json,sys; print(sum(1 for t in json.load(sys.stdin) if t["revoked_at_ms"]))')" = 3
# The Unix socket (SO_PEERCRED) may make a token without expiry; it has no parent.
forever=$(isc token create 2>"$dir/forever.err")
check "over the socket a token without expiry is made" grep -q "expires never" "$dir/forever.err"
check "and it works over TCP" test "$(api "$forever" GET /v1/whoami)" = 200
check "a socket-made token has no parent" grep -Eq "^${forever%%.*} .* - *\$" <<<"$(isc token list)"
check "a token made with it must still expire" test "$(api "$forever" POST /v1/tokens '{}')" = 400
check "... and may live long under a parent without expiry" test "$(api "$forever" POST /v1/tokens '{"expires_in_s":86400}')" = 201
check "... uncut" test "$(field expiry_cut_to_parent)" = null

# ---- 3. the CLI sends no secret to a non-loopback http:// API ----
if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
	# refused NAME CMD...: inside a namespace without routes, the command is refused with
	# the rule named, and strace saw no socket opened at all (nothing was sent).
	refused() {
		local what=$1
		shift
		# (LeakSanitizer cannot run under ptrace: leaks are checked by the other runs.)
		unshare -n env ISC_API_URL=http://iscd.example.com:8480 ISC_TOKEN=tok_0000000000000000.00 \
			AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \
			ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
			strace -f -qq -e trace=socket,connect,sendto,sendmsg -o "$dir/strace.$what" \
			"$ISC_BIN/isc" --home "$home" "$@" >/dev/null 2>"$dir/err.$what"
		local rc=$?
		check "$what: refused (exit 1)" test "$rc" = 1
		check "$what: the rule is named" grep -q "plain http:// to a host that is not loopback carries it in clear, so nothing was sent" "$dir/err.$what"
		check "$what: no socket was opened (strace)" bash -c "! grep -Eq 'socket\\(AF_INET|connect\\(' '$dir/strace.$what'"
	}
	# The tracer sees a socket when one is opened: the same command towards loopback.
	unshare -n env ISC_API_URL=http://127.0.0.1:1 ISC_TOKEN=tok_0000000000000000.00 \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -qq -e trace=socket,connect -o "$dir/strace.control" \
		"$ISC_BIN/isc" --home "$home" token create --expires 1h >/dev/null 2>&1
	check "strace sees the connect of an allowed call (control)" grep -q "connect(" "$dir/strace.control"
	refused keys-add keys add --org acme gcp --file "$dir/key-listener.json"
	refused datasets-add datasets add s3://isc-bucket/x --org acme --credentials-from-env
	refused token-create token create --expires 1h
	check "the refusal of a dataset's keys names them" grep -q "refusing to send a dataset's own AWS keys to iscd.example.com (ISC_API_URL)" "$dir/err.datasets-add"
	check "token create: the reply would carry a token" grep -q "a request for a new token (the reply carries it)" "$dir/err.token-create"
	# Control: the same commands may use https://, or http:// to a loopback address (they
	# then get as far as iscd: here a port where nothing listens).
	# tried URL CMD...: the command's stderr towards URL, in $dir/tried.
	tried() {
		local u=$1
		shift
		unshare -n env ISC_API_URL="$u" ISC_TOKEN=tok_0000000000000000.00 \
			"$ISC_BIN/isc" --home "$home" "$@" >/dev/null 2>"$dir/tried"
	}
	not_refused() { ! grep -q "refusing to send" "$dir/tried"; }
	tried http://127.0.0.1:1 token create --expires 1h
	check "http:// to loopback is not refused by the rule" not_refused
	tried "http://[::1]:1" token create --expires 1h
	check "http://[::1] is not refused by the rule" not_refused
	tried https://iscd.example.com token create --expires 1h
	check "https:// is not refused by the rule" not_refused
	tried http://iscd.example.com:8480 datasets add s3://isc-bucket/x --org acme
	check "a dataset without its own keys is not refused by the rule" not_refused
	tried http://alice:hunter2@iscd.example.com token create --expires 1h
	check "the refusal names the host" grep -q "to iscd.example.com (ISC_API_URL)" "$dir/tried"
	check "a password in ISC_API_URL stays out of the refusal" bash -c "! grep -q hunter2 '$dir/tried'"
	for u in http://127.0.0.1.example.com http://localhost.example.com http://user@127.0.0.1@example.com http://[::2]:80 iscd.example.com:8480 http://127.1; do
		tried "$u" token create --expires 1h
		check "$u counts as not loopback" grep -q "refusing to send" "$dir/tried"
	done
else
	echo "# not root or no unshare -n: the CLI refusal checks are skipped"
fi
iscd_api_stop

# ---- 4. a node flooding docker wait ----
flood=$((96 * 1024 * 1024))
if [ "$(id -u)" -eq 0 ]; then
	# Every node's docker wait reads how much to flood from this file: a burst without the
	# flood first (its memory is a burst's, not the flood's), then the same with it.
	echo 0 >"$dir/flood-bytes"
	NODE_WAIT_FLOOD_BYTES=@$dir/flood-bytes ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 \
		"$repo/tests/mocks/sandbox" start --no-iscd "$dir/sb" >/dev/null || exit 1
	(
		. "$dir/sb/env"
		isc() { "$ISC_BIN/isc" "$@"; }
		# ASan keeps freed blocks in a quarantine (256 MiB by default) that counts in the
		# RSS whatever iscd keeps (libssh2 frees every packet it read): without it the RSS
		# is iscd's own memory (a run with 16 MiB of quarantine grew 29 MiB).
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0 \
			setpriv --pdeathsig TERM "$ISC_BIN/iscd" 2>"$dir/flood-iscd.log" &
		echo $! >"$dir/flood-iscd.pid"
		iscd_wait_socket "$ISC_HOME/run/api.sock" || exit 1
		ipid=$(cat "$dir/flood-iscd.pid")
		hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$ipid/status"; }
		cat >"$dir/flood.isc" <<ISC
isc_project_id = "demo"
experiment_name = "flood"
gpus = 1
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo before-the-flood; exit 3'
ISC
		id=$(submit "$dir/flood.isc")
		check "a burst without the flood ends as failed (exit 3)" wait_status "$id" failed 120
		check "... and leaves no node" wait_no_live
		before=$(hwm)
		echo "$flood" >"$dir/flood-bytes"
		id=$(submit "$dir/flood.isc")
		check "the flooded burst ends as failed (exit code 3, read from the tail)" wait_status "$id" failed 120
		check "... and leaves no node" wait_no_live
		after=$(hwm)
		echo "# iscd VmHWM: ${before} KiB after a burst, ${after} KiB after the same burst with $((flood / 1048576)) MiB of docker wait" >&2
		echo "$before $after" >"$dir/flood.hwm"
		check "iscd's peak RSS grew by less than 24 MiB while 96 MiB streamed" test $((after - before)) -lt $((24 * 1024))
		out=$(isc status "$id" --json | py -c 'import json,sys; print(json.load(sys.stdin)["output_path"])')
		check "the rank log holds the container's output only" test "$(cat "$out/rank_0.txt")" = before-the-flood
		check "the exit code was read from the flood's last line" bash -c "'$ISC_BIN/isc' status '$id' | grep -q 'exited with code 3'"
		echo "passed=$passed failed=$failed" >"$dir/flood.result"
	)
	eval "$(cat "$dir/flood.result" 2>/dev/null || echo "failed=$((failed + 1))")"
	kill "$(cat "$dir/flood-iscd.pid")" 2>/dev/null
else
	echo "# not root: the docker wait flood is skipped (mock nodes need root)"
fi

finish tenancy
