#!/usr/bin/env bash
# isc store copy (docs/ha.md, "Backup and move"): a SQLite store made through the CLI
# (organisations, projects with a budget, credits, users, members, a bearer token) is
# copied into a throwaway PostgreSQL (tests/pg/pg-server) and straight back into a new
# SQLite file, which holds the same rows as the original. Homes pointed at the copies
# (ISC_STORE_URL, or the file as their isc.db) show the same organisations and balances,
# and the token made on the original works on them over TCP. Refused: while iscd runs on
# the home, while a live replica uses a PostgreSQL source, into a store with rows. A
# password in a URL is never printed, and never taken from argv (issue 42): it comes
# from $ISC_STORE_COPY_TO or --to-file.
. "$(dirname "$0")/lib.sh"

unset ISC_STORE_URL
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-storecopy.XXXXXX)
# The server's own folder: pg-server runs it as the postgres user, who cannot enter $dir.
pgdir=$(mktemp -d /tmp/isc-storecopy-pg.XXXXXX)
trap 'iscd_api_stop; "$repo/tests/pg/pg-server" stop "$pgdir" >/dev/null 2>&1; [ "${KEEP:-0}" = 1 ] || rm -rf "$dir" "$pgdir"' EXIT
home=$dir/home
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

# api_url HOME: the TCP address its iscd wrote (api_listen = 127.0.0.1:0).
api_url() {
	for _ in $(seq 50); do [ -s "$1/run/api.sock.tcp" ] && break; sleep 0.1; done
	cat "$1/run/api.sock.tcp"
}
# sorted_dump DB: every row of every table as INSERT lines, sorted (the copy inserts in
# key order, so rowids of tables keyed by text may differ; their rows may not).
sorted_dump() { sqlite3 "$1" .dump | grep '^INSERT INTO' | sort; }

# ---- the original: a SQLite store, filled through iscd's API
isc init >/dev/null || exit 1
echo 'api_listen = "127.0.0.1:0"' >>"$home/config.toml"
iscd_api "$home" "$dir/iscd.log" || exit 1
url=$(api_url "$home")
isc org add acme >/dev/null && isc org add globex >/dev/null
isc project add --org acme vision >/dev/null && isc project add --org globex speech >/dev/null
isc project budget --org acme --project vision 300 >/dev/null
isc credits grant --org acme 1250.50 --note "first" >/dev/null
isc credits grant --org acme 100 >/dev/null
isc credits grant --org globex 0.000001 >/dev/null
isc user add alice >/dev/null && isc member add --org acme alice --role admin >/dev/null
tok=$(isc token create --expires 1h 2>/dev/null)
check "a token was made" grep -Eq '^tok_[0-9a-f]{16}\.' <<<"$tok"
check "the token works on the original" env ISC_API_URL="$url" ISC_TOKEN="$tok" "$ISC_BIN/isc" org list
orgs=$(isc org list --json)
credits=$(isc credits show --json)
projects=$(isc project list --json)
members=$(isc member list --org acme --json)
tokens=$(isc token list --json)
check "the original has two organisations" grep -q globex <<<"$orgs"

# ---- refused while iscd runs on the home
to_url=$("$repo/tests/pg/pg-server" start "$pgdir" 2>"$dir/pg.log") || {
	echo "no PostgreSQL server: $(tail -n 5 "$dir/pg.log")" >&2
	exit 1
}
pg1=$("$repo/tests/pg/pg-server" createdb "$pgdir" copy1)
expect_stderr "iscd is running on $home" isc store copy --to "$pg1"
expect_exit 1 "a copy while iscd runs exits 1" isc store copy --to "$pg1"
iscd_api_stop

# ---- SQLite -> PostgreSQL
isc store copy --to "$pg1" >"$dir/copy1.out" 2>&1
check "the copy to PostgreSQL succeeded" grep -q '^copied [0-9]* tables' "$dir/copy1.out"
check "it prints the organisations' rows" grep -qx 'orgs: 2 rows' "$dir/copy1.out"
check "it prints the projects' rows" grep -qx 'projects: 2 rows' "$dir/copy1.out"
check "it prints the ledger's check" grep -qx 'ledger check: grant credits: 3 rows, 1350500001 micros, equal' "$dir/copy1.out"
check "the totals were rebuilt and found equal" grep -qx 'ledger check: 2 ledger_totals rows equal' "$dir/copy1.out"
check "every table is listed" test "$(grep -c ': [0-9]* rows' "$dir/copy1.out")" -ge 26

# refused: a destination with rows (the copy just made)
expect_stderr "the destination is not empty" isc store copy --to "$pg1"
check "nothing merged: the ledger has 3 rows" test "$(psql -At "$pg1" -c 'SELECT COUNT(*) FROM ledger' 2>/dev/null)" = 3
# the sequences continue after the copied ids
check "the ledger's identity continues after its ids" test "$(psql -At "$pg1" -c "SELECT nextval(pg_get_serial_sequence('ledger', 'id'))" 2>/dev/null)" = 4

# ---- PostgreSQL -> a new SQLite file, straight back: the same rows as the original
home2=$dir/home2
mkdir -m 700 "$home2" && cp "$home/config.toml" "$home2/"
ISC_STORE_URL=$pg1 "$ISC_BIN/isc" --home "$home2" store copy --to "sqlite:$dir/back.db" >"$dir/copy2.out" 2>&1
check "the copy back to SQLite succeeded" grep -q '^copied [0-9]* tables' "$dir/copy2.out"
check "the copy back counts the same rows" test "$(grep ': [0-9]* rows' "$dir/copy1.out" | sort)" = "$(grep ': [0-9]* rows' "$dir/copy2.out" | sort)"
sorted_dump "$home/isc.db" >"$dir/orig.rows"
sorted_dump "$dir/back.db" >"$dir/back.rows"
check "the round trip holds every row of the original" cmp -s "$dir/orig.rows" "$dir/back.rows"
check "the dump has the rows (a non-empty comparison)" test "$(grep -c 'INSERT INTO orgs' "$dir/orig.rows")" = 2
check "the copy is owner-only (0600)" test "$(stat -c %a "$dir/back.db")" = 600

# ---- a home on the PostgreSQL copy sees the same store, and the token works there
ISC_STORE_URL=$pg1 "$ISC_BIN/isc" --home "$home2" init >/dev/null
ISC_STORE_URL=$pg1 iscd_api "$home2" "$dir/iscd2.log" || exit 1
url2=$(api_url "$home2")
isc2() { ISC_STORE_URL=$pg1 "$ISC_BIN/isc" --home "$home2" "$@"; }
check "PostgreSQL copy: the same organisations" test "$(isc2 org list --json)" = "$orgs"
check "PostgreSQL copy: the same balances" test "$(isc2 credits show --json)" = "$credits"
check "PostgreSQL copy: the same projects and budgets" test "$(isc2 project list --json)" = "$projects"
check "PostgreSQL copy: the same members" test "$(isc2 member list --org acme --json)" = "$members"
check "PostgreSQL copy: the same tokens" test "$(isc2 token list --json)" = "$tokens"
check "PostgreSQL copy: the original's token works over TCP" env ISC_API_URL="$url2" ISC_TOKEN="$tok" "$ISC_BIN/isc" org list
check "PostgreSQL copy: a new grant gets a new ledger id" isc2 credits grant --org globex 1
check "PostgreSQL copy: the ledger's trigger is on again (globex: 1.000001)" test "$(psql -At "$pg1" -c "SELECT t.balance_micros FROM ledger_totals t JOIN orgs o ON t.key = CAST(o.id AS TEXT) WHERE t.scope = 'org' AND o.name = 'globex'" 2>/dev/null)" = 1000001

# refused: a PostgreSQL source with a live replica (home2's iscd), from a home whose own
# iscd is stopped
expect_stderr "live iscd replica" isc store copy --from "$pg1" --to "sqlite:$dir/never.db"
check "the refused copy made no file" test ! -e "$dir/never.db"
iscd_api_stop

# ---- a home on the SQLite copy
home3=$dir/home3
mkdir -m 700 "$home3" && cp "$home/config.toml" "$home3/" && cp "$dir/back.db" "$home3/isc.db"
iscd_api "$home3" "$dir/iscd3.log" || exit 1
url3=$(api_url "$home3")
isc3() { "$ISC_BIN/isc" --home "$home3" "$@"; }
check "SQLite copy: the same organisations" test "$(isc3 org list --json)" = "$orgs"
check "SQLite copy: the same balances" test "$(isc3 credits show --json)" = "$credits"
check "SQLite copy: the original's token works over TCP" env ISC_API_URL="$url3" ISC_TOKEN="$tok" "$ISC_BIN/isc" org list
iscd_api_stop

# ---- usage, and a password is never printed
expect_exit 2 "copy without --to is a usage error" isc store copy
expect_exit 2 "an unknown subcommand is a usage error" isc store move --to "$pg1"
check "--help names the command" sh -c "'$ISC_BIN/isc' store --help | grep -q 'isc store copy --to URL'"
# A password in argv is refused (ps and the shell's history would show it, issue 42); the
# URL comes from $ISC_STORE_COPY_TO or --to-file FILE (- : stdin) instead.
pw='postgresql://isc:s3cret-pw@127.0.0.1:1/none'
expect_exit 2 "a password in --to is refused" isc store copy --to "$pw"
isc store copy --to "$pw" >"$dir/pw-argv.out" 2>&1
check "the refusal says where the URL goes instead" \
	grep -q 'ISC_STORE_COPY_TO or with --to-file' "$dir/pw-argv.out"
check "the refusal shows the URL masked" grep -q 'postgresql://isc:\*\*\*@127.0.0.1:1/none' "$dir/pw-argv.out"
check "the refusal never prints the password" sh -c "! grep -q s3cret-pw '$dir/pw-argv.out'"
expect_exit 2 "a password= in --from is refused" \
	isc store copy --from 'postgresql:///none?host=/tmp&password=s3cret-pw' --to "sqlite:$dir/never2.db"
expect_stderr 'password=***' \
	isc store copy --from 'postgresql:///none?host=/tmp&password=s3cret-pw' --to "sqlite:$dir/never2.db"
expect_exit 2 "--to and --to-file together are a usage error" isc store copy --to "$pg1" --to-file -
ISC_STORE_COPY_TO=$pw isc store copy >"$dir/pw.out" 2>&1
check "a copy to an unreachable server (\$ISC_STORE_COPY_TO) fails" test $? -ne 0
check "the password is masked" grep -q 'postgresql://isc:\*\*\*@127.0.0.1:1/none' "$dir/pw.out"
check "the password is never printed" sh -c "! grep -q s3cret-pw '$dir/pw.out'"
# Real copies with a password in the URL (the test server trusts its socket, so libpq
# never sends it): from a 0600 file, from stdin and from the environment.
for how in file stdin env; do
	db=$("$repo/tests/pg/pg-server" createdb "$pgdir" "copy_$how")
	case $how in
	file)
		(umask 077 && printf '%s\n' "$db&password=s3cret-pw" >"$dir/to.url")
		isc store copy --to-file "$dir/to.url" >"$dir/copy-$how.out" 2>&1 ;;
	stdin) printf '%s\n' "$db&password=s3cret-pw" | isc store copy --to-file - >"$dir/copy-$how.out" 2>&1 ;;
	env) ISC_STORE_COPY_TO="$db&password=s3cret-pw" isc store copy >"$dir/copy-$how.out" 2>&1 ;;
	esac
	check "a copy whose URL has a password, from $how (exit $?)" grep -q '^copied .* equal$' "$dir/copy-$how.out"
	check "  the password is masked (from $how)" grep -q 'password=\*\*\*' "$dir/copy-$how.out"
	check "  and never printed (from $how)" sh -c "! grep -q s3cret-pw '$dir/copy-$how.out'"
done
chmod 0644 "$dir/to.url"
check "a URL file others can read gets a warning" \
	sh -c "'$ISC_BIN/isc' --home '$home' store copy --to-file '$dir/to.url' 2>&1 | grep -q 'chmod 0600'"
expect_stderr "sqlite:/absolute/path" isc store copy --to sqlite:relative.db

finish store-copy
