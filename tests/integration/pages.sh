#!/usr/bin/env bash
# Every paged listing of iscd's API (docs/api.md, "Pages"): experiments, users,
# orgs, projects, keys, tokens and members. A store with more than a page (100)
# of each is written straight into SQLite as a fixture (as tests/bench/api.sh
# does), with bearer tokens for the operator, alice (admin of org01 and org02,
# member of org03, finance in org04) and bob (admin of org05). pages.py walks
# each listing as each caller in pages of 7 while rows are added between page
# fetches, and checks every row of before the walk comes exactly once, in the
# listing's order, and nothing the caller may not see (computed from the store
# with SQL of its own) ever does. Then the CLI (isc user list, org list, project
# list, member list, token list, keys list) prints every row, past the first page.
. "$(dirname "$0")/lib.sh"

dir=$(mktemp -d /tmp/isc-pages.XXXXXX)
home=$dir/home
trap 'iscd_api_stop; rm -rf "$dir"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

isc init >/dev/null || exit 1
echo 'api_listen = "127.0.0.1:0"' >>"$home/config.toml"
"$ISC_BIN/iscd" --home "$home" --once 2>/dev/null # migrates the store

# token NAME USER_ID|NULL: a bearer token stored as iscd stores one (its SHA-256).
declare -A secret
for who in operator alice bob; do
	secret[$who]=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
done
hash() { printf '%s' "${secret[$1]}" | sha256sum | cut -d' ' -f1; }

# 110 orgs, 130 users (alice 9001, bob 9002), org01 with every user as a member, 5 projects
# an org (30 more in org01), 40 experiments in each of org01..org05 (three to a millisecond,
# half alice's), 4 keys in each of the first 30 orgs, 110 more tokens.
sqlite3 "$home/isc.db" <<SQL
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 110)
INSERT INTO orgs (id, name, created_at_ms) SELECT i, printf('org%02d', i), 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 128)
INSERT INTO users (id, name, created_at_ms) SELECT i, printf('u%03d', i), 0 FROM n;
INSERT INTO users (id, name, created_at_ms) VALUES (9001, 'alice', 0), (9002, 'bob', 0);
INSERT INTO memberships (user_id, org_id, role, created_at_ms) SELECT id, 1, 'member', 0 FROM users WHERE id < 9000;
INSERT INTO memberships (user_id, org_id, role, created_at_ms) VALUES
  (9001, 1, 'admin', 0), (9001, 2, 'admin', 0), (9001, 3, 'member', 0), (9001, 4, 'finance', 0),
  (9002, 5, 'admin', 0);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5)
INSERT INTO projects (id, org_id, name, created_at_ms) SELECT printf('prj_%d_%d', o.id, n.i), o.id, 'p' || n.i, 0 FROM orgs o, n;
WITH RECURSIVE n(i) AS (SELECT 6 UNION ALL SELECT i + 1 FROM n WHERE i < 35)
INSERT INTO projects (id, org_id, name, created_at_ms) SELECT printf('prj_1_%d', i), 1, 'p' || i, 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199)
INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, spec_json, status,
  created_at_ms, updated_at_ms, output_path, owner)
SELECT printf('exp_%016x', i * 7919 % 200), printf('prj_%d_1', i % 5 + 1), i % 5 + 1, 'run-' || i, 'burst', 8,
  '{}', 'completed', 1700000000000 + i / 3, 1700000000000, '/tmp/exp', CASE WHEN i % 2 THEN 'alice' ELSE 'u001' END
FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 119)
INSERT INTO cloud_keys (id, org_id, provider, name, nonce, ciphertext, created_at_ms)
SELECT printf('key_%04d', i), i / 4 + 1, CASE i % 2 WHEN 0 THEN 'aws' ELSE 'gcp' END, 'k' || (i % 4), x'00', x'00', 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 109)
INSERT INTO api_tokens (id, user_id, hash, created_at_ms)
SELECT printf('tok_%016x', i), CASE WHEN i % 3 THEN 9001 ELSE NULL END, 'unused', 1700000000000 + i / 4 FROM n;
INSERT INTO api_tokens (id, user_id, hash, created_at_ms) VALUES
  ('tok_00000000000000a0', NULL, '$(hash operator)', 0),
  ('tok_00000000000000a1', 9001, '$(hash alice)', 0),
  ('tok_00000000000000a2', 9002, '$(hash bob)', 0);
COMMIT;
SQL
check "the fixture is written" test "$(sqlite3 "$home/isc.db" 'SELECT count(*) FROM experiments')" = 200

iscd_api "$home" "$dir/iscd.log" || exit 1
for _ in $(seq 100); do [ -s "$home/run/api.sock.tcp" ] && break; sleep 0.1; done
url=$(cat "$home/run/api.sock.tcp")
check "iscd listens on TCP" grep -Eq '^http://127\.0\.0\.1:[0-9]+$' <<<"$url"

while read -r status what; do
	check "$what" test "$status" = ok
done < <(PAGES_DB="$home/isc.db" PAGES_URL="$url" \
	PAGES_TOKEN_OPERATOR="tok_00000000000000a0.${secret[operator]}" \
	PAGES_TOKEN_ALICE="tok_00000000000000a1.${secret[alice]}" \
	PAGES_TOKEN_BOB="tok_00000000000000a2.${secret[bob]}" \
	/usr/bin/python3 "$(dirname "$0")/pages.py" 2>&1 | sed 's/^FAIL /fail /')

# The CLI follows every page: each command prints every row, past the first page of 100.
count() { /usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'; }
db() { sqlite3 "$home/isc.db" "$1"; }
check "isc user list --json: every user ($(db 'SELECT count(*) FROM users'))" \
	test "$(isc user list --json | count)" = "$(db 'SELECT count(*) FROM users')"
check "isc org list --json: every org ($(db 'SELECT count(*) FROM orgs'))" \
	test "$(isc org list --json | count)" = "$(db 'SELECT count(*) FROM orgs')"
check "isc project list --json: every project ($(db 'SELECT count(*) FROM projects'))" \
	test "$(isc project list --json | count)" = "$(db 'SELECT count(*) FROM projects')"
check "isc member list --org org01 --json: every member" \
	test "$(isc member list --org org01 --json | count)" = "$(db 'SELECT count(*) FROM memberships WHERE org_id = 1')"
check "isc token list --json: every token" \
	test "$(isc token list --json | count)" = "$(db 'SELECT count(*) FROM api_tokens')"
check "isc keys list --json: every key" \
	test "$(isc keys list --json | count)" = "$(db 'SELECT count(*) FROM cloud_keys')"
check "isc experiments --json: every experiment" \
	test "$(isc experiments --json | count)" = "$(db 'SELECT count(*) FROM experiments')"
isc user list >"$dir/users.txt"
check "isc user list (the table) shows the last user too" grep -q '^u128 ' "$dir/users.txt"

finish pages
