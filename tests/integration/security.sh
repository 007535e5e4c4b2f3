#!/usr/bin/env bash
# Endpoints, secrets and permissions, with the real isc binary:
# - a plain http:// endpoint that is not loopback is refused with a clear
#   message before any connection is tried (run inside `unshare -n`, a network
#   namespace with no route, so nothing could leave the machine even if the
#   check regressed); allow_insecure_endpoint = true lets it through with a
#   warning from `isc check`. The credentials and endpoint `isc check` proves
#   are iscd's (GET /v1/check/aws), so each case runs its own iscd in that
#   namespace, with the case's variables; isc reaches it on its Unix socket;
# - `isc check aws` against an STS that echoes the session token in a long
#   error (tests/mocks/echo-sts) shows no part of the token;
# - $ISC_HOME is narrowed to 0700 and everything in it is owner-only, whatever
#   the caller's umask.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

isc=$ISC_BIN/isc
dir=$(mktemp -d /tmp/isc-security.XXXXXX)
sts_pid=
cleanup() {
	iscd_api_stop
	[ -n "$sts_pid" ] && kill "$sts_pid" 2>/dev/null && wait "$sts_pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
home=$dir/home
export AWS_ACCESS_KEY_ID=AKIDSECURITYTEST0001 AWS_SECRET_ACCESS_KEY=security-test-secret-key
export AWS_REGION=us-east-1
unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_STS AWS_PROFILE AWS_SESSION_TOKEN

# config FILE ENDPOINT [EXTRA LINE]: a whole config.toml with one AWS section.
config() {
	cat >"$home/config.toml" <<EOC
broker_id = "isc-securitytest"

[providers.aws]
regions = ["us-east-1"]
endpoint = "$1"
${2:-}
EOC
}

# iscd_in NETNS CMD...: CMD while an API iscd serves $home with this shell's environment,
# inside a network namespace with no route when NETNS is "netns" (unshare -n: nothing it
# tries can leave the machine). iscd's stderr goes to $dir/iscd.log. CMD's exit code.
iscd_in() {
	local ns=() rc
	[ "$1" = netns ] && ns=(unshare -n)
	shift
	setpriv --pdeathsig TERM "${ns[@]}" "$ISC_BIN/iscd" --home "$home" --interval-ms 60000 2>>"$dir/iscd.log" &
	iscd_api_pid=$!
	iscd_wait_socket "$home/run/api.sock" || return 1
	"$@"
	rc=$?
	iscd_api_stop
	return $rc
}

( umask 022; "$isc" --home "$home" init >/dev/null 2>&1 )
check "isc init" test -f "$home/isc.db"

# ---- permissions ----
chmod 0755 "$home"
# iscd is what opens the store after init (isc talks to its API); --once serves no socket.
"$(dirname "$isc")/iscd" --home "$home" --once >/dev/null 2>&1
check "an existing \$ISC_HOME is narrowed to 0700" test "$(stat -c %a "$home")" = 700
check "nothing under \$ISC_HOME is open to group or others (umask 022 caller)" \
	test -z "$(find "$home" -perm /077 -print -quit)"

# ---- plain http to a host that is not loopback: refused, in a namespace with no route ----
if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
	config "http://10.9.8.7:8080"
	start=$(date +%s%N)
	out=$(iscd_in netns "$isc" --home "$home" check aws 2>&1)
	rc=$?
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	check "non-loopback http endpoint: exit 1 (got $rc)" test "$rc" -eq 1
	check "the refusal names the endpoint" grep -qF "http://10.9.8.7:8080" <<<"$out"
	check "the refusal says plain http and how to allow it" \
		grep -qF "plain http to a host that is not loopback" <<<"$out"
	check "the refusal names allow_insecure_endpoint" grep -qF "allow_insecure_endpoint" <<<"$out"
	check "refused before any connection (no 'cannot reach')" \
		test -z "$(grep -F 'cannot reach' <<<"$out")"
	echo "# refusal took ${ms} ms: $out"
	# The endpoint from the environment is held to the same rule.
	config "https://sts.invalid"
	out=$(AWS_ENDPOINT_URL=http://192.0.2.10 iscd_in netns "$isc" --home "$home" check aws 2>&1)
	check "AWS_ENDPOINT_URL=http://192.0.2.10 refused too" \
		grep -qF "plain http to a host that is not loopback" <<<"$out"
	# Allowed explicitly: isc check warns, then the connection is tried (and finds no route).
	config "http://10.9.8.7:8080" "allow_insecure_endpoint = true"
	out=$(iscd_in netns "$isc" --home "$home" check aws 2>&1)
	check "allow_insecure_endpoint = true: isc check warns" \
		grep -qF "warning: $home/config.toml: providers.aws.allow_insecure_endpoint = true" <<<"$out"
	check "allow_insecure_endpoint = true: the request is tried" \
		grep -qF "cannot reach http://10.9.8.7:8080" <<<"$out"
	# Loopback stays allowed without the setting (nothing listens on port 1).
	config "http://127.0.0.1:1"
	out=$(iscd_in netns "$isc" --home "$home" check aws 2>&1)
	check "loopback http is allowed" grep -qF "cannot reach http://127.0.0.1:1" <<<"$out"
	config "http://[::1]:1"
	out=$(iscd_in netns "$isc" --home "$home" check aws 2>&1)
	check "loopback http ([::1]) is allowed" grep -qF "cannot reach http://[::1]:1" <<<"$out"
else
	echo "# not root or no unshare -n: endpoint checks skipped"
fi

# ---- an STS that echoes the session token in a long error ----
/usr/bin/python3 tests/mocks/echo-sts --port-file "$dir/sts.port" &
sts_pid=$!
for _ in $(seq 100); do
	[ -s "$dir/sts.port" ] && break
	sleep 0.1
done
check "echo-sts started" test -s "$dir/sts.port"
token=$(head -c 600 /dev/urandom | base64 -w0 | tr -d '=')
config "http://127.0.0.1:$(cat "$dir/sts.port")"
out=$(AWS_SESSION_TOKEN=$token iscd_in host "$isc" --home "$home" check aws 2>&1)
rc=$?
check "echoed token: isc check aws fails (exit $rc)" test "$rc" -eq 1
check "echoed token: the message is the cloud's" grep -qF "InvalidClientTokenId" <<<"$out"
check "echoed token: the echo was scrubbed" grep -qF "***" <<<"$out"
leak=0
for ((i = 0; i + 12 <= ${#token}; i++)); do
	if grep -qF -- "${token:i:12}" <<<"$out"; then
		leak=1
		echo "leaked at $i: ${token:i:12}" >&2
		break
	fi
done
check "echoed token: no 12 characters of the token in the output" test "$leak" -eq 0
json=$(AWS_SESSION_TOKEN=$token iscd_in host "$isc" --home "$home" check aws --json 2>&1)
check "echoed token: --json output holds no part of it either" \
	test -z "$(grep -F -- "${token:200:12}" <<<"$json")"
check "echoed token: iscd's log holds no part of it" test -z "$(grep -F -- "${token:200:12}" "$dir/iscd.log")"
check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"

# ---- iscd refuses core dumps (issue 42) ----
# It holds the master key and decrypted cloud keys: no core file (RLIMIT_CORE 0, soft
# and hard, as /proc/PID/limits shows) and not dumpable (prctl PR_SET_DUMPABLE 0). The second
# shows from outside as /proc/PID/status owned by root whatever user runs it, and its
# environment closed to its own user: so this iscd runs as nobody, on a SQLite store
# of its own (a PostgreSQL of the run is not nobody's to reach).
if [ "$(id -u)" -eq 0 ] && nb_uid=$(id -u nobody 2>/dev/null) && nb_gid=$(id -g nobody); then
	nb=$dir/nobody
	mkdir -p "$nb" && chown "$nb_uid:$nb_gid" "$nb" && chmod 0711 "$dir"
	as_nobody() {
		setpriv --reuid="$nb_uid" --regid="$nb_gid" --clear-groups \
			env -u ISC_STORE_URL HOME="$nb" LSAN_OPTIONS="$LSAN_OPTIONS" "$@"
	}
	as_nobody "$isc" --home "$nb/home" init >/dev/null 2>>"$dir/iscd-nobody.log"
	# Not through as_nobody: a function in the background is a subshell, and $! its pid.
	setpriv --reuid="$nb_uid" --regid="$nb_gid" --clear-groups --pdeathsig TERM \
		env -u ISC_STORE_URL HOME="$nb" LSAN_OPTIONS="$LSAN_OPTIONS" \
		"$ISC_BIN/iscd" --home "$nb/home" --interval-ms 60000 2>>"$dir/iscd-nobody.log" &
	iscd_api_pid=$!
	if iscd_wait_socket "$nb/home/run/api.sock"; then
		check "the pid is iscd's" test "$(cat "/proc/$iscd_api_pid/comm")" = iscd
		# /proc/PID/limits, as prlimit --pid reads it (prlimit needs CAP_SYS_RESOURCE for
		# another user's process, which a container's root may lack).
		core=$(awk '/^Max core file size/ {print $5, $6}' "/proc/$iscd_api_pid/limits")
		check "iscd: RLIMIT_CORE is 0, soft and hard (/proc/PID/limits: '$core')" \
			test "$core" = "0 0"
		check "iscd is not dumpable: /proc/PID/status is root's though iscd runs as nobody" \
			test "$(stat -c %u "/proc/$iscd_api_pid/status")" = 0
		check "iscd's environment is closed to its own user (/proc/PID/environ)" \
			bash -c "! \$1 \"\$@\"" _ setpriv --reuid="$nb_uid" --regid="$nb_gid" \
			--clear-groups cat "/proc/$iscd_api_pid/environ"
		check "iscd still answers (GET /v1/whoami as nobody)" \
			as_nobody curl -sf --unix-socket "$nb/home/run/api.sock" http://localhost/v1/whoami
	else
		check "iscd as nobody started (log: $(tail -n 3 "$dir/iscd-nobody.log"))" false
	fi
	iscd_api_stop
	check "iscd as nobody logged no sanitizer report" \
		bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd-nobody.log'"
else
	echo "# not root or no user nobody: the core dump checks skipped"
fi

finish security
