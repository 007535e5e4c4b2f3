#!/usr/bin/env bash
# A newcomer's third hour (issue 47), each reproduction as a check block that fails on the
# code before its fix: pool nodes that cannot run a job, isc shapes and a broken config,
# placeability on the Burst page, final costs, every problem at once, isc init --home, the
# Control Plane on the sandbox (items 1-7); then the docs, the CLI's words and the web's
# money (items 8-14).
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d /tmp/isc-thirdhour.XXXXXX)
trap 'iscd_api_stop; rm -rf "$tmp"' EXIT

# ==== items 1-7 (each block sets up what it needs under $tmp/N) ====

# ==== end of items 1-7 ====

# ==== items 8-14 (each block sets up what it needs under $tmp/N) ====

# A home for one block under $tmp/N (th_setup N): isc init, iscd's TCP address above the
# first table, the store migrated (iscd --once), organisations acme and beta with a
# project vision each, users alice (member of acme) and fin (finance of acme), and bearer
# tokens stored as iscd stores them (their SHA-256): th_tok[operator|alice|fin]. th_isc
# runs isc on that home (as the operator, on the socket); th_as WHO runs a command with
# WHO's token over TCP (th_api must be running). On PostgreSQL (ISC_STORE_URL, the suite's
# own database) each block starts from an empty database, as on SQLite from a new file.
declare -A th_tok
th_setup() {
	th_home=$tmp/$1/home
	mkdir -p "$tmp/$1"
	if store_is_pg; then
		store_sql "SET client_min_messages = warning; DROP SCHEMA public CASCADE; CREATE SCHEMA public;" >/dev/null || return 1
	fi
	"$ISC_BIN/isc" --home "$th_home" init >/dev/null || return 1
	{ echo 'api_listen = "127.0.0.1:0"'; cat "$th_home/config.toml"; } >"$th_home/config.new"
	mv "$th_home/config.new" "$th_home/config.toml"
	"$ISC_BIN/iscd" --home "$th_home" --once 2>/dev/null
	local sql="BEGIN;
INSERT INTO orgs (id, name, created_at_ms) VALUES (1, 'acme', 0), (2, 'beta', 0);
INSERT INTO projects (id, org_id, name, created_at_ms) VALUES
  ('prj_00000000000000a1', 1, 'vision', 0), ('prj_00000000000000b1', 2, 'vision', 0);
INSERT INTO users (id, name, created_at_ms) VALUES (9001, 'alice', 0), (9002, 'fin', 0);
INSERT INTO memberships (user_id, org_id, role, created_at_ms) VALUES
  (9001, 1, 'member', 0), (9002, 1, 'finance', 0);"
	local who uid n=0
	for who in operator alice fin; do
		n=$((n + 1))
		case $who in operator) uid=NULL ;; alice) uid=9001 ;; fin) uid=9002 ;; esac
		local secret
		secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
		th_tok[$who]="tok_00000000000000e$n.$secret"
		sql="$sql
INSERT INTO api_tokens (id, user_id, hash, created_at_ms) VALUES
  ('tok_00000000000000e$n', $uid, '$(printf '%s' "$secret" | sha256sum | cut -d' ' -f1)', 0);"
	done
	ISC_HOME=$th_home store_sql "$sql
COMMIT;"
}
th_isc() { "$ISC_BIN/isc" --home "$th_home" "$@"; }
th_api() { AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x iscd_api "$th_home" "$tmp/iscd-th.log"; }
th_as() {
	local who=$1
	shift
	ISC_API_URL=$(cat "$th_home/run/api.sock.tcp") ISC_TOKEN=${th_tok[$who]} "$@"
}
# th_browser N SCRIPT: runs SCRIPT (Python, on stdin) with tests/browser/webdriver.py's
# Driver as d, URL (iscd's pages) and TOK (the tokens); each line it prints as
# "CHECK 0|1 WHAT" is one check here. Skipped, saying so, without chromium.
th_browser() {
	if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
		echo "thirdhour: item $1's browser checks skipped: no /usr/bin/chromium or chromedriver" >&2
		return 0
	fi
	local out line rc
	out=$(TH_URL="http://$(cat "$th_home/run/api.sock.tcp" | sed 's,^http://,,')" \
		TH_TOK="$(for w in "${!th_tok[@]}"; do echo "$w=${th_tok[$w]}"; done)" \
		TH_WORK="$tmp/$1" /usr/bin/python3 -c '
import os, sys
sys.path.insert(0, "tests/browser")
from webdriver import Driver
URL = os.environ["TH_URL"]
TOK = dict(l.split("=", 1) for l in os.environ["TH_TOK"].split())
def CHECK(what, ok, detail=""):
    print("CHECK %d %s%s" % (1 if ok else 0, what, (": %r" % (detail,)) if not ok and detail != "" else ""), flush=True)
def sign_in(d, token, page):
    d.get(URL + "/index.html")
    d.js("sessionStorage.clear()")
    d.js("sessionStorage.setItem(\"isc.token\", arguments[0])", token)
    d.get(URL + "/" + page)
    return d.wait_css("body[data-ready]", 20)
d = Driver("/usr/bin/chromium", "/usr/bin/chromedriver", os.environ["TH_WORK"])
try:
    exec(sys.stdin.read())
finally:
    d.quit()
' 2>&1)
	rc=$?
	while IFS= read -r line; do
		case $line in
		"CHECK 1 "*) passed=$((passed + 1)) ;;
		"CHECK 0 "*) failed=$((failed + 1)); echo "FAIL: ${line#CHECK 0 }" >&2 ;;
		esac
	done <<<"$out"
	# A script that stopped half-way (an element not there) is a failure, whatever it said.
	if [ $rc -ne 0 ] || ! grep -q '^CHECK ' <<<"$out"; then
		failed=$((failed + 1))
		echo "FAIL: item $1's browser checks did not all run: $(grep -v '^CHECK ' <<<"$out" | tail -n 5)" >&2
	fi
}

# ---- 8. make deps installs what building and running need; the tests' npm clients
# come with make test-deps (make check), and README says what comes from where ----
# scripts/install-deps on a machine where nothing is installed: dpkg-query, apt-get and
# npm stand-ins on PATH record what would be installed, in a copy of the script beside
# the two npm folders (package-lock.json only, no node_modules), as on a fresh clone.
t8=$tmp/8
mkdir -p "$t8/bin" "$t8/repo/scripts" "$t8/repo/tests/mocks/oci-sdk" "$t8/repo/tests/gce-node"
cp scripts/install-deps "$t8/repo/scripts/"
touch "$t8/repo/tests/mocks/oci-sdk/package-lock.json" "$t8/repo/tests/gce-node/package-lock.json"
printf '#!/bin/sh\nexit 1\n' >"$t8/bin/dpkg-query"
printf '#!/bin/sh\necho "$*" >>"%s"\n' "$t8/apt.log" >"$t8/bin/apt-get"
printf '#!/bin/sh\necho "$PWD $*" >>"%s"\n' "$t8/npm.log" >"$t8/bin/npm"
printf '#!/bin/sh\nexec "$@"\n' >"$t8/bin/sudo"
chmod +x "$t8/bin"/*
PATH=$t8/bin:$PATH "$t8/repo/scripts/install-deps" >/dev/null 2>&1
check "8: make deps' install-deps runs no npm" test ! -e "$t8/npm.log"
check "8: ...and installs the build's libraries" grep -qw 'libcurl4-openssl-dev' "$t8/apt.log"
check "8: ...and no test package (chromium, torch, nodejs, postgresql)" \
	bash -c "! grep -qwE 'chromium|python3-torch|nodejs|postgresql' '$t8/apt.log'"
rm -f "$t8/apt.log" "$t8/npm.log"
PATH=$t8/bin:$PATH "$t8/repo/scripts/install-deps" --tests --npm >/dev/null 2>&1
check "8: install-deps --tests --npm installs the test packages" grep -qw 'chromium-driver' "$t8/apt.log"
check "8: ...and npm ci in both client folders" \
	bash -c "grep -q '/tests/mocks/oci-sdk ci' '$t8/npm.log' && grep -q '/tests/gce-node ci' '$t8/npm.log'"
check "8: make deps is the build's tier" bash -c "make -n deps | grep -qx 'scripts/install-deps'"
check "8: make check installs the tests' tier, npm clients and all" \
	bash -c "make -n test-deps | grep -qx 'scripts/install-deps --tests --npm' && grep -q '^check: test-deps' Makefile"
check "8: README says make check fetches the npm clients and make deps does not" \
	bash -c "grep -q '137 MB from the npm registry' README.md && grep -q 'make deps. installs only what building' README.md"

# ---- 9. isc and iscd on PATH: make install, and the sandbox's DIR/env ----
t9=$tmp/9
mkdir -p "$t9"
bdir9=${ISC_BIN%/bin}
bdir9=${bdir9#"$PWD/"}
if [ -d "$bdir9/obj" ]; then
	make -s SAN=1 BUILD="$bdir9" PREFIX="$t9/prefix" install >"$t9/install.log" 2>&1
	check "9: make install puts isc and iscd under PREFIX/bin" test -x "$t9/prefix/bin/isc" -a -x "$t9/prefix/bin/iscd"
	check "9: ...and the pages where iscd looks for them" test -s "$t9/prefix/share/isc/web/spend.html"
	check "9: isc runs bare with PREFIX/bin on PATH" env PATH="$t9/prefix/bin:$PATH" isc --version
fi
sb9=$t9/sb
if ISC_BIN=$ISC_BIN SANDBOX_PROVIDERS=aws tests/mocks/sandbox start --no-iscd --no-s3 "$sb9" >"$t9/sb.out" 2>&1; then
	check "9: after . DIR/env, isc is the sandbox's ISC_BIN/isc" \
		bash -c "cd / && . '$sb9/env' && test \"\$(command -v isc)\" = '$ISC_BIN/isc'"
	check "9: ...and iscd too" bash -c "cd / && . '$sb9/env' && test \"\$(command -v iscd)\" = '$ISC_BIN/iscd'"
	check "9: ...and isc answers bare" bash -c "cd / && . '$sb9/env' && isc --version"
else
	failed=$((failed + 1))
	echo "FAIL: 9: sandbox start: $(cat "$t9/sb.out")" >&2
fi
tests/mocks/sandbox stop "$sb9" >/dev/null 2>&1
check "9: README says how isc gets on PATH" grep -qF 'export PATH="$PWD/bin:$PATH"' README.md

# ---- 10. the CLI's messages name its flags, not the API's fields ----
th_setup 10
th_api || exit 1
th_as operator "$ISC_BIN/isc" token create >/dev/null 2>"$tmp/10/token.err"
check "10: token create over TCP without --expires names --expires" grep -qF -- '--expires is required' "$tmp/10/token.err"
check "10: ...and not expires_in_s: $(cat "$tmp/10/token.err")" bash -c "! grep -q expires_in_s '$tmp/10/token.err'"
th_isc nodes add 127.0.0.$((RANDOM % 200 + 20)) --port 2 --user root --gpus 1 >/dev/null 2>"$tmp/10/nodes.err"
check "10: nodes add of a silent node names --force" grep -qF '(with --force it is added unreachable' "$tmp/10/nodes.err"
check "10: ...and not the JSON's \"force\": true: $(cat "$tmp/10/nodes.err")" bash -c "! grep -qF '\"force\"' '$tmp/10/nodes.err'"
th_as alice "$ISC_BIN/isc" audit >/dev/null 2>"$tmp/10/audit.err"
check "10: audit without --org names --org" grep -qF 'name one (--org ORG)' "$tmp/10/audit.err"
check "10: ...and not org=: $(cat "$tmp/10/audit.err")" bash -c "! grep -qF 'org=' '$tmp/10/audit.err'"
th_isc audit --limit 0 >/dev/null 2>"$tmp/10/limit.err"
check "10: audit --limit 0 names --limit: $(cat "$tmp/10/limit.err")" grep -qF -- "--limit: '0' is not a page size" "$tmp/10/limit.err"
th_isc user add 'a b' >/dev/null 2>"$tmp/10/user.err"
check "10: user add of a bad name names its NAME: $(cat "$tmp/10/user.err")" grep -qF "isc: error: NAME: 1 to 64 characters" "$tmp/10/user.err"
iscd_api_stop

# ---- 11. a project's budget, spend and remaining: isc project show and list ----
th_setup 11
# $1.25 charged to acme's vision (a charge row as metering writes one), then a budget.
ISC_HOME=$th_home store_sql "INSERT INTO ledger (at_ms, org_id, project_id, experiment_id, kind, amount_micros, billing,
	provider, shape_id, period_start_ms, period_end_ms) VALUES (1700000000000, 1, 'prj_00000000000000a1',
	'exp_00000000000000a1', 'charge', 1250000, 'credits', 'aws', 's', 1700000000000, 1700000000000)"
th_api || exit 1
th_isc project budget --org acme --project vision 12.5 >/dev/null
th_isc project show --org acme vision >"$tmp/11/show.out" 2>&1
check "11: project show: the budget" grep -qE '^budget: +\$12\.50$' "$tmp/11/show.out"
check "11: ...what it spent" grep -qE '^spent: +\$1\.25$' "$tmp/11/show.out"
check "11: ...and what remains: $(cat "$tmp/11/show.out")" grep -qE '^remaining: +\$11\.25$' "$tmp/11/show.out"
check "11: project show --json has the API's money" bash -c "'$ISC_BIN/isc' --home '$th_home' project show --org acme vision --json | grep -qE '\"remaining\": \"11.250000\"'"
th_isc project list >"$tmp/11/list.out" 2>&1
check "11: project list has the money columns" grep -qE '^ID +ORG +NAME +BUDGET +SPENT +HELD +REMAINING$' "$tmp/11/list.out"
check "11: ...with acme's vision's: $(cat "$tmp/11/list.out")" grep -qE '^prj_00000000000000a1 +acme +vision +\$12\.50 +\$1\.25 +\$0\.00 +\$11\.25$' "$tmp/11/list.out"
check "11: ...and beta's, no budget" grep -qE '^prj_00000000000000b1 +beta +vision +none +\$0\.00 +\$0\.00 +none$' "$tmp/11/list.out"
check "11: the table is aligned" table_aligned "$tmp/11/list.out"
th_as fin "$ISC_BIN/isc" project show vision >"$tmp/11/fin.out" 2>&1
check "11: finance of acme reads it: $(cat "$tmp/11/fin.out")" grep -qE '^remaining: +\$11\.25$' "$tmp/11/fin.out"
th_as alice "$ISC_BIN/isc" project show vision >"$tmp/11/member.out" 2>&1
check "11: a member sees the project, not its money: $(cat "$tmp/11/member.out")" \
	bash -c "grep -qE '^budget: +\\\$12\\.50\$' '$tmp/11/member.out' && grep -q '^spent: *- ' '$tmp/11/member.out' && ! grep -q '1\\.25' '$tmp/11/member.out'"
iscd_api_stop

# ---- 12. whose experiment is whose: the project's name and who launched it, an Org
# column for several organisations, and who cancelled ----
th_setup 12
# Three experiments as the API records them: alice's in acme (a cycle one, enqueued, and a
# completed burst) and the operator's in beta.
ISC_HOME=$th_home store_sql "INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus,
	spec_json, status, created_at_ms, updated_at_ms, output_path, owner) VALUES
	('exp_00000000000000a1', 'prj_00000000000000a1', 1, 'alice-run', 'cycle', 1, '{}', 'enqueued', 1700000000003, 0, '/tmp/a1', 'alice'),
	('exp_00000000000000a2', 'prj_00000000000000a1', 1, 'alice-burst', 'burst', 8, '{}', 'completed', 1700000000002, 0, '/tmp/a2', 'alice'),
	('exp_00000000000000b1', 'prj_00000000000000b1', 2, 'ops-run', 'burst', 8, '{}', 'completed', 1700000000001, 0, '/tmp/b1', '')"
th_api || exit 1
th_isc experiments >"$tmp/12/exps.out" 2>&1
check "12: the operator's isc experiments has an Org column" grep -qE '^ID +Org +Name +NNodes +Output Path +Status +Shape +Cost$' "$tmp/12/exps.out"
check "12: ...naming each row's organisation: $(cat "$tmp/12/exps.out")" \
	bash -c "grep -qE '^exp_00000000000000a1 +acme +alice-run ' '$tmp/12/exps.out' && grep -qE '^exp_00000000000000b1 +beta +ops-run ' '$tmp/12/exps.out'"
check "12: ...aligned" table_aligned "$tmp/12/exps.out"
th_as alice "$ISC_BIN/isc" experiments >"$tmp/12/alice.out" 2>&1
check "12: one organisation's rows need no Org column" grep -qE '^ID +Name +NNodes +Output Path +Status +Shape +Cost$' "$tmp/12/alice.out"
curl -s --unix-socket "$th_home/run/api.sock" http://localhost/v1/experiments >"$tmp/12/api.json"
check "12: the listing names the project and who launched it" /usr/bin/python3 -c '
import json, sys
rows = {r["id"]: r for r in json.load(open(sys.argv[1]))}
a, b = rows["exp_00000000000000a1"], rows["exp_00000000000000b1"]
sys.exit(0 if (a["project"], a["launched_by"], b["project"], b["launched_by"]) == ("vision", "alice", "vision", "") else 1)' "$tmp/12/api.json"
th_as alice "$ISC_BIN/isc" cancel exp_00000000000000a1 >/dev/null 2>&1
th_isc status exp_00000000000000a1 >"$tmp/12/status.out" 2>&1
check "12: the timeline names who asked for the cancel: $(cat "$tmp/12/status.out")" grep -qF 'cancel requested by alice' "$tmp/12/status.out"
check "12: ...and the final reason: cancelled by alice" bash -c "'$ISC_BIN/isc' --home '$th_home' status exp_00000000000000a1 --json | grep -qF '\"status_reason\": \"cancelled by alice\"'"
th_browser 12 <<'PY'
sign_in(d, TOK["operator"], "experiments.html")
d.find("#org").select("acme")
# The list is drawn again every 2 s: each cell is read inside a wait, which tries again
# when the row it found was replaced meanwhile.
row = '#experiments tbody tr[data-id="exp_00000000000000a2"] '
CHECK("12: the Experiments page lists acme's experiment", d.wait(lambda: d.find(row), 15))
proj = d.wait(lambda: d.find(row + "td.project").text(), 10)
CHECK("12: ...with its project's name, not its id", proj == "vision", proj)
who = d.wait(lambda: d.find(row + "td.launched-by").text(), 10)
CHECK("12: ...and who launched it", who == "alice", who)
heads = [h.text() for h in d.find_all("#experiments thead th")]
CHECK("12: ...under a Launched by heading", "Launched by" in heads, heads)
PY
iscd_api_stop

# ---- 13. money on the web: plurals, round ticks, $ in the table, one precision, and a
# member's Spend page is its refusal only ----
th_setup 13
# acme's vision spent $0.120227 on one day and $0.007440 the next (charges as metering
# writes them); an experiment whose cost is $0.007440.
th_day2=$(date +%s%3N)
th_day1=$((th_day2 - 86400000))
ISC_HOME=$th_home store_sql "INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus,
	spec_json, status, created_at_ms, updated_at_ms, output_path, owner) VALUES
	('exp_00000000000000c1', 'prj_00000000000000a1', 1, 'cheap', 'burst', 8, '{}', 'completed', $(date +%s%3N), 0, '/tmp/c1', 'alice');
	INSERT INTO ledger (at_ms, org_id, project_id, experiment_id, kind, amount_micros, billing,
	provider, shape_id, period_start_ms, period_end_ms) VALUES
	($th_day1, 1, 'prj_00000000000000a1', 'exp_00000000000000a9', 'charge', 120227, 'credits', 'aws', 's', $th_day1, $th_day1),
	($th_day2, 1, 'prj_00000000000000a1', 'exp_00000000000000c1', 'charge', 7440, 'credits', 'aws', 's', $th_day2, $th_day2)"
th_api || exit 1
th_browser 13 <<'PY'
import re
sign_in(d, TOK["operator"], "spend.html")
d.find("#org").select("acme")
d.wait(lambda: d.find("#spend tfoot tr.grand-total"), 20)
status = d.find("#status").text()
CHECK("13: the status line: 1 project, 2 days", status.startswith("1 project, 2 days, "), status)
ticks = [(t.text(), int(t.attr("data-micros"))) for t in d.find_all("#chart text.tick")]
CHECK("13: the chart has y-axis ticks", len(ticks) >= 3, ticks)
CHECK("13: ...at round amounts ($0.05 steps here), not the data's $0.120227",
      [t for t, _ in ticks] == ["$0.00", "$0.05", "$0.10", "$0.15"], ticks)
cells = [td.text() for td in d.find_all("#spend td.num")]
CHECK("13: every amount in the table is $ and six places", cells and all(re.fullmatch(r"\$\d+\.\d{6}", c) for c in cells), cells)
CHECK("13: ...the day rows exact", "$0.120227" in cells and "$0.007440" in cells, cells)
CHECK("13: the status line's total too", status.endswith(", $0.127667 in all"), status)
d.get(URL + "/experiments.html")
d.wait_css("body[data-ready]", 20)
d.find("#org").select("acme")
cost = d.wait(lambda: d.find('#experiments tbody tr[data-id="exp_00000000000000c1"] td.num[data-micros]').text(), 15)
CHECK("13: an experiment's Cost has the same six places", cost == "$0.007440", cost)
sign_in(d, TOK["alice"], "spend.html")
err = d.wait(lambda: d.find("#error:not([hidden])"), 10)
CHECK("13: a member's Spend page says it is refused", err and "finance" in err.text(), err and err.text())
rep = d.find("#report")
CHECK("13: ...and shows no filters and no table under it", rep is not None and rep.prop("hidden") is True
      and not d.find("#from").prop("offsetParent") and not d.find("#spend").prop("offsetParent"))
PY
iscd_api_stop

# ---- 14. isc datasets show explains its copy ----
th_setup 14
ISC_HOME=$th_home store_sql "INSERT INTO datasets (id, org_id, name, uri, bucket, key, is_folder, etag,
	version_id, credentials, size_bytes, volume_bytes, cached_bytes, state, reason, copy_name,
	created_at_ms, updated_at_ms) VALUES ('ds_00000000000000d1', 1, 'mnist', 's3://sandbox-data/mnist.zip', 'sandbox-data',
	'mnist.zip', 0, '\"e\"', '', 'broker', 10, 5368709120, 0, 'created', '', '@1/mnist-ds_00000000000000d1', 0, 0)"
th_api || exit 1
th_isc datasets show mnist --org acme >"$tmp/14/show.out" 2>&1
check "14: datasets show prints the copy: $(cat "$tmp/14/show.out")" grep -qE '^copy: +@1/mnist-ds_00000000000000d1 ' "$tmp/14/show.out"
check "14: ...saying what it is and where it lives" bash -c "grep -qF 'the bytes iscd caches' '$tmp/14/show.out' && grep -qF 'ISC_HOME/datasets/@1/mnist-ds_00000000000000d1' '$tmp/14/show.out' && grep -qF '/data/.isc/@1/mnist-ds_00000000000000d1 on nodes' '$tmp/14/show.out'"
check "14: docs/datasets.md explains the copy: line" grep -qF '`isc datasets show` prints, among the fields, `copy: @ORGID/NAME-ID`' docs/datasets.md
iscd_api_stop

# ==== end of items 8-14 ====

finish thirdhour
