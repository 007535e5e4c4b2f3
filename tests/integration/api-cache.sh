#!/usr/bin/env bash
# The API's token and role caches (issue 49; docs/security.md, "The API's caches"): they
# are kept through commits that change no token, membership, user or organisation (the
# commits of running bursts), and dropped by every one that does, so a revoked token is
# refused, and a changed or removed membership applies, on the next request even when the
# server thread serving it had the old answer cached; on PostgreSQL also by another iscd
# of the same store. Each case keeps one connection open (api-cache-client.py), which
# iscd's thread pool serves on one thread, so its requests meet that thread's caches; the
# store reads are counted from iscd's debug log ("read from the store").
. "$(dirname "$0")/lib.sh"

dir=$(mktemp -d /tmp/isc-apicache.XXXXXX)
home=$dir/home
home2=$dir/home2
iscd2_pid=
cleanup() {
	[ -n "$iscd2_pid" ] && kill "$iscd2_pid" 2>/dev/null && wait "$iscd2_pid" 2>/dev/null
	iscd_api_stop
	rm -rf "$dir"
}
trap cleanup EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
export ISC_HOME=$home
# The client's RUN steps run in a bash of their own: these go with them.
export -f isc store_sql store_is_pg
export ISC_BIN home
client() { /usr/bin/python3 "$(dirname "$0")/api-cache-client.py" "$@"; }

isc init >/dev/null || exit 1
cat >>"$home/config.toml" <<CONF
api_listen = "127.0.0.1:0"
CONF
if store_is_pg; then
	# A second replica of the store (docs/ha.md): shared artifacts and keys.
	mkdir -p "$dir/shared/artifacts" "$dir/shared/keys" && chmod 700 "$dir/shared/keys"
	isc --home "$home2" init >/dev/null || exit 1
	cp "$home/config.toml" "$home2/config.toml"
	# The keys' master key: every replica shares it with the store, and the clusters' SSH
	# keys are sealed under it from the first burst on (docs/ha.md, issue 45).
	export ISC_MASTER_KEY_FILE="$dir/master.key"
	for h in "$home" "$home2"; do
		printf 'artifact_root = "%s"\n%s\n' "$dir/shared/artifacts" "$(cat "$h/config.toml")" \
			>"$h/config.toml"
		rm -rf "$h/keys" && ln -s "$dir/shared/keys" "$h/keys"
	done
fi
iscd_api "$home" "$dir/iscd.log" --verbose || exit 1
for _ in $(seq 50); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
url=$(cat "$home/run/api.sock.tcp")

isc org add acme >/dev/null && isc project add --org acme vision >/dev/null
isc user add fin >/dev/null && isc member add --org acme fin --role admin >/dev/null
# A token for fin, stored as iscd stores one (fin is no OS user here).
fsecret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
store_sql "INSERT INTO api_tokens (id, user_id, hash, created_at_ms)
	SELECT 'tok_00000000000000f1', id, '$(printf '%s' "$fsecret" | sha256sum | cut -d' ' -f1)', 0 FROM users WHERE name = 'fin'"
export TOKEN="tok_00000000000000f1.$fsecret"

# reads LOG: how many token and role reads of fin's iscd logged so far.
reads() { grep -cE "api: (token tok_00000000000000f1|role of user [0-9]+ in org [0-9]+) read from the store" "$1"; }
# What running bursts commit meanwhile, none of it about who may do what: a project over
# the API (another server thread), rows of another table written by another process.
unrelated() {
	echo "n=\$(date +%s%N) && isc project add --org acme p\$n >/dev/null && store_sql \"INSERT INTO burst_waits (experiment_id, why, at_ms) VALUES ('exp_u\$n', 1, 1)\" >/dev/null"
}

# 1. Warm, then unrelated commits between requests: no store read of the token or role.
mark=$dir/mark
client "$url" "GET:/v1/audit?org=acme" "GET:/v1/audit?org=acme" "RUN:grep -c . '$dir/iscd.log' >'$mark.0'; true" \
	"RUN:$(unrelated)" "GET:/v1/audit?org=acme" "RUN:$(unrelated)" "GET:/v1/audit?org=acme" \
	"RUN:$(unrelated)" "GET:/v1/credits?org=acme" >"$dir/out1"
check "warm, then 3 unrelated commits: 5 answers, all 200" test "$(sort -u "$dir/out1")" = 200
check "the unrelated commits committed" test "$(store_sql "SELECT count(*) FROM burst_waits WHERE experiment_id LIKE 'exp_u%'")" = 3
tail -n +"$(($(cat "$mark.0") + 1))" "$dir/iscd.log" >"$dir/after1"
check "after the unrelated commits: no store read of fin's token or role (read $(reads "$dir/after1"))" \
	test "$(reads "$dir/after1")" = 0
check "the warm-up itself read them (the log counts what it should)" test "$(reads "$dir/iscd.log")" -ge 2

# 2. A role changed, then the membership removed: each applies to the next request.
client "$url" "GET:/v1/audit?org=acme" "RUN:$(unrelated)" "GET:/v1/audit?org=acme" \
	"RUN:isc member add --org acme fin --role member >/dev/null" "GET:/v1/audit?org=acme" \
	"RUN:isc member add --org acme fin --role admin >/dev/null" "GET:/v1/audit?org=acme" \
	"RUN:isc member remove --org acme fin >/dev/null" "GET:/v1/audit?org=acme" >"$dir/out2"
check "admin, warm: 200, 200" test "$(sed -n 1,2p "$dir/out2" | tr '\n' ' ')" = "200 200 "
check "demoted to member: 403 on the next request" test "$(sed -n 3p "$dir/out2")" = 403
check "admin again: 200 on the next request" test "$(sed -n 4p "$dir/out2")" = 200
check "removed from acme: 404 on the next request" test "$(sed -n 5p "$dir/out2")" = 404
isc member add --org acme fin --role admin >/dev/null

# 3. Revoked, while warm: refused on the next request of the same thread.
client "$url" "GET:/v1/whoami" "RUN:$(unrelated)" "GET:/v1/whoami" \
	"RUN:isc token revoke tok_00000000000000f1 >/dev/null" "GET:/v1/whoami" "GET:/v1/whoami" >"$dir/out3"
check "revoked while warm: 200 200, then 401 401" test "$(tr '\n' ' ' <"$dir/out3")" = "200 200 401 401 "

if store_is_pg; then
	# 4. Another iscd on the same store: what replica 1 changes, replica 2 applies at once.
	setpriv --pdeathsig TERM "$ISC_BIN/iscd" --home "$home2" --interval-ms 60000 --verbose \
		2>>"$dir/iscd2.log" &
	iscd2_pid=$!
	iscd_wait_socket "$home2/run/api.sock"
	for _ in $(seq 50); do [ -s "$home2/run/api.sock.tcp" ] && break; sleep 0.1; done
	url2=$(cat "$home2/run/api.sock.tcp")
	check "replica 2 serves TCP at another address" test -n "$url2" -a "$url2" != "$url"
	gsecret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	store_sql "INSERT INTO api_tokens (id, user_id, hash, created_at_ms)
		SELECT 'tok_00000000000000f2', id, '$(printf '%s' "$gsecret" | sha256sum | cut -d' ' -f1)', 0 FROM users WHERE name = 'fin'"
	export TOKEN="tok_00000000000000f2.$gsecret"
	client "$url2" "GET:/v1/audit?org=acme" "GET:/v1/audit?org=acme" \
		"RUN:grep -c . '$dir/iscd2.log' >'$mark.2'; true" \
		"RUN:$(unrelated)" "GET:/v1/audit?org=acme" \
		"RUN:isc member add --org acme fin --role finance >/dev/null" "GET:/v1/audit?org=acme" \
		"RUN:isc member add --org acme fin --role admin >/dev/null" "GET:/v1/audit?org=acme" \
		"RUN:isc token revoke tok_00000000000000f2 >/dev/null" "GET:/v1/audit?org=acme" >"$dir/out4"
	check "replica 2, warm: 200 200 200" test "$(sed -n 1,3p "$dir/out4" | tr '\n' ' ')" = "200 200 200 "
	tail -n +"$(($(cat "$mark.2") + 1))" "$dir/iscd2.log" | sed -n '/GET \/v1\/audit/q;p' >"$dir/after4"
	check "replica 2 kept its caches through replica 1's unrelated commit" \
		test "$(grep -cE "api: (token tok_00000000000000f2|role of user [0-9]+ in org [0-9]+) read from the store" "$dir/after4")" = 0
	check "replica 1 made fin finance: replica 2 answers 403 on the next request" test "$(sed -n 4p "$dir/out4")" = 403
	check "admin again on replica 1: replica 2 answers 200" test "$(sed -n 5p "$dir/out4")" = 200
	check "revoked on replica 1: replica 2 refuses it on the next request" test "$(sed -n 6p "$dir/out4")" = 401
fi

[ -n "$iscd2_pid" ] && kill "$iscd2_pid" 2>/dev/null && wait "$iscd2_pid" 2>/dev/null
iscd2_pid=
iscd_api_stop
check "no sanitizer report in iscd's log" no_sanitizer_report "$dir/iscd.log"
[ -f "$dir/iscd2.log" ] && check "none in replica 2's" no_sanitizer_report "$dir/iscd2.log"
finish api-cache
