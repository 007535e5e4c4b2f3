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

# On PostgreSQL (ISC_STORE_URL, tests/run-all's second run) each block gets a database of
# its own, as it gets a home of its own: two sandboxes would both add organisation demo.
store0=${ISC_STORE_URL:-}
own_store() {
	store_is_pg || return 0
	local db="thirdhour_$1_$$"
	psql "$store0" -qAtX -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null || return 1
	ISC_STORE_URL=$(sed -E "s|^(postgres(ql)?://[^/]*/)[^?]*|\1$db|" <<<"$store0")
	export ISC_STORE_URL
}
# the store of home $1 is there: its SQLite file, or (PostgreSQL) its config.toml.
store_made() { if store_is_pg; then test -f "$1/config.toml"; else test -f "$1/isc.db"; fi; }

# ---- 1. A pool node whose SSH user cannot write /mnt: refused at add, a job fails with its words ----
own_store 1 || exit 1
mkdir -p "$tmp/1"
h1=$tmp/1/home
i1() { "$ISC_BIN/isc" --home "$h1" "$@"; }
# A non-root user, as the README's --user isc suggests: an OS user on this machine (the
# mock node's sshd serves its users), neither root nor allowed sudo; /mnt is root's.
pool_user=isc3hpool
made_user=0
id "$pool_user" >/dev/null 2>&1 || { useradd -m -p '*' -s /bin/sh "$pool_user" 2>/dev/null && made_user=1; }
ip1=127.154.$((RANDOM % 200 + 1)).$((RANDOM % 200 + 1))
i1 init >/dev/null || exit 1
cat >>"$h1/config.toml" <<CONF

tick_interval_ms = 200
node_probe_ms = 1000
retry_wait_ms = 500
CONF
iscd_api "$h1" "$tmp/1/iscd-api.log" || exit 1
i1 org add demo >/dev/null && i1 project add --org demo demo >/dev/null 2>&1
i1 nodes pubkey >"$tmp/1/authorized_keys"
if tests/mocks/node/node-up "$tmp/1/n1" "$ip1" 2222 "$tmp/1/authorized_keys" >/dev/null 2>&1; then
	# sshd reads authorized_keys as the user logging in: let that user reach and read it.
	chmod 755 "$tmp" "$tmp/1" "$tmp/1/n1" && chmod 644 "$tmp/1/n1/authorized_keys"
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	echo "FAIL: item 1: the mock node did not come up" >&2
fi
add1() { i1 nodes add "$ip1" --port 2222 --user "$pool_user" --gpus 2 "$@"; }
expect_exit 1 "nodes add refuses a node whose user cannot run a job" add1
expect_stderr "cannot run a job" add1
expect_stderr "mkdir: cannot create directory" add1
expect_stderr "/mnt/checkpoints" add1
expect_stderr "Permission denied" add1
expect_stderr "user $pool_user is not root and has no passwordless sudo" add1
check "the refused node is not in the pool" test "$(i1 nodes list --json)" = "[]"
expect_exit 0 "nodes add --force adds it anyway" add1 --force
check "added with --force: marked, with the node's words" bash -c "'$ISC_BIN/isc' --home '$h1' nodes list --json | grep -q 'Permission denied'"
iscd_api_stop
# iscd with short ticks: its probe (a login) brings the node up; a job there then fails.
setpriv --pdeathsig TERM "$ISC_BIN/iscd" --home "$h1" 2>"$tmp/1/iscd.log" &
iscd1=$!
iscd_wait_socket "$h1/run/api.sock"
cat >"$tmp/1/train.isc" <<LAUNCH
isc_project_id = "demo"
experiment_name = "pool-user"
gpus = 2
compute_mode = "cycle"
command = "echo hello"
LAUNCH
export ISC_HOME=$h1 # for lib.sh's isc, status_of, wait_status
id1=$(isc train "$tmp/1/train.isc" 2>/dev/null | grep -Eo 'exp_[0-9a-f]{16}')
check "the job on a node that cannot run it fails" wait_status "$id1" failed 30
check "its reason is the node's own words" status_says "$id1" 'Permission denied'
n_boots=$(isc status "$id1" | grep -c 'boot_failed')
check "it was not retried ($n_boots boot failures)" test "$n_boots" = 1
cyc=$(status_of "$id1" cycle_count)
check "its Cycle count is not inflated ($cyc)" test "$cyc" -le 1
unset ISC_HOME
check "docs/queue.md says what a pool node needs" grep -q '^## What a pool node needs' docs/queue.md
kill -TERM "$iscd1" 2>/dev/null; wait "$iscd1" 2>/dev/null
tests/mocks/node/node-down "$tmp/1/n1" >/dev/null 2>&1
[ "$made_user" = 1 ] && userdel -r "$pool_user" 2>/dev/null

# ---- 2. isc shapes names a broken config.toml, as isc burst, validate and check do ----
own_store 2 || exit 1
mkdir -p "$tmp/2"
h2=$tmp/2/home
"$ISC_BIN/isc" --home "$h2" init >/dev/null || exit 1
cat >>"$h2/config.toml" <<CONF

[providers.aws]
regions = ["us-east-1"]
endpoint = "http://127.0.0.1:9"
CONF
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x iscd_api "$h2" "$tmp/2/iscd.log" || exit 1
expect_exit 0 "isc shapes with a good config.toml" "$ISC_BIN/isc" --home "$h2" shapes --gpus 8
# The config is broken under the running iscd: a top-level key after the last table.
echo 'api_listen = "127.0.0.1:0"' >>"$h2/config.toml"
line=$(wc -l <"$h2/config.toml")
want="config.toml:$line:1: providers.aws.api_listen: a top-level key inside [providers.aws]"
expect_exit 1 "isc shapes exits non-zero on a broken config.toml" "$ISC_BIN/isc" --home "$h2" shapes --gpus 8
expect_stderr "$want" "$ISC_BIN/isc" --home "$h2" shapes --gpus 8
expect_stderr "$want" "$ISC_BIN/isc" --home "$h2" shapes --gpus 8 --json
out=$("$ISC_BIN/isc" --home "$h2" shapes --gpus 8 2>&1 | grep -c "is not in config.toml")
check "isc shapes does not blame the providers for a broken file ($out rows did)" test "$out" = 0
iscd_api_stop

# ---- 3. The Burst page says whether each shape can be placed, as isc shapes does ----
own_store 3 || exit 1
mkdir -p "$tmp/3"
h3=$tmp/3/home
"$ISC_BIN/isc" --home "$h3" init >/dev/null || exit 1
# api_listen above the first table (the pages are served on TCP only); AWS in one region.
sed -i '1i api_listen = "127.0.0.1:0"' "$h3/config.toml"
printf '\n[providers.aws]\nregions = ["us-east-1"]\nendpoint = "http://127.0.0.1:9"\n' >>"$h3/config.toml"
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x iscd_api "$h3" "$tmp/3/iscd.log" || exit 1
"$ISC_BIN/isc" --home "$h3" shapes --gpus 16 --provider aws --json >"$tmp/3/api.json"
# The API the page reads: both kinds of rows, the unplaceable ones with the CLI's reason.
check "GET /v1/shapes: placeable and unplaceable rows, each unplaceable one with a why" /usr/bin/python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
yes = [r for r in rows if r["placeable"]]
no = [r for r in rows if not r["placeable"]]
sys.exit(0 if yes and no and all("is not in [providers.aws] regions" in r["why"] for r in no) else 1)' "$tmp/3/api.json"
check "isc shapes prints the same reason" bash -c "'$ISC_BIN/isc' --home '$h3' shapes --gpus 16 --provider aws | grep -q \"no: region 'us-west-2' is not in \\[providers.aws\\] regions\""
# The page, in Debian's chromium (tests/browser/webdriver.py), signed in with a token.
url3=$(cat "$h3/run/api.sock.tcp" 2>/dev/null)
tok3=$("$ISC_BIN/isc" --home "$h3" token create --expires 1d 2>/dev/null | grep -Eo 'tok_[0-9a-f]{16}\.[0-9a-f]+' | head -1)
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
	mkdir -p "$tmp/3/browser"
	/usr/bin/python3 - "$url3" "$tok3" "$tmp/3/browser" >"$tmp/3/page.json" 2>"$tmp/3/browser.log" <<'PY'
import json, sys
sys.path.insert(0, "tests/browser")
from webdriver import Driver
url, token, work = sys.argv[1:4]
d = Driver("/usr/bin/chromium", "/usr/bin/chromedriver", work)
try:
    d.get(url + "/index.html")
    d.wait_css("#token").type(token)
    d.find("#signin-button").click()
    d.wait(lambda: d.url().endswith("/burst.html") and d.find("body[data-ready]"), 30)
    d.find("#gpus").clear()
    d.find("#gpus").type("16")
    d.find("#provider").select("aws")
    d.find("#filters button[type=submit]").click()
    d.wait(lambda: "for 16 GPUs" in d.find("#status").text(), 30)
    rows = d.js("""return [...document.querySelectorAll('#shapes tbody tr')].map((tr) => ({
        id: tr.getAttribute('data-shape'), placeable: tr.getAttribute('data-placeable'),
        marked: tr.classList.contains('unplaceable'), copy: !!tr.querySelector('button.copy'),
        last: tr.lastElementChild.textContent,
        header: document.querySelector('#shapes thead tr').lastElementChild.textContent}));""")
    print(json.dumps(rows))
finally:
    d.quit()
PY
	page3() { /usr/bin/python3 -c '
import json, sys
api = {r["id"]: r for r in json.load(open(sys.argv[1]))}
page = json.load(open(sys.argv[2]))
ok = bool(page) and all(eval(sys.argv[3]) for p in page for r in [api[p["id"]]])
sys.exit(0 if ok else 1)' "$tmp/3/api.json" "$tmp/3/page.json" "$1"; }
	check "the page lists the API's shapes ($(tail -1 "$tmp/3/browser.log"))" test -s "$tmp/3/page.json"
	check "the page has a Placeable column" page3 'p["header"] == "Placeable"'
	check "the page says, per row, whether the shape can be placed" page3 '(p["placeable"] == "yes") == r["placeable"]'
	check "an unplaceable row says why, as the CLI does" page3 'r["placeable"] or p["last"] == "no: " + r["why"]'
	check "unplaceable rows are marked" page3 'p["marked"] == (not r["placeable"])'
	check "only placeable rows have a Copy button" page3 'p["copy"] == r["placeable"]'
	check "the page shows both kinds for 16 GPUs on AWS" page3 'True and any(x["placeable"] == "no" for x in page) and any(x["placeable"] == "yes" for x in page)'
else
	echo "thirdhour: item 3's browser checks skipped: /usr/bin/chromium or /usr/bin/chromedriver is missing"
	check "burst.js marks unplaceable rows" grep -q "unplaceable" web/burst.js
fi
iscd_api_stop

# ---- 4. An experiment's Cost is final, or says it is still settling ----
own_store 4 || exit 1
# The mock confirms a termination 6 s after it was asked: the experiment is completed
# while its nodes are still shutting down, so their last periods are not charged yet.
mkdir -p "$tmp/4"
sb4=$tmp/4/sb
if ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_SHUTDOWN_DELAY_MS=6000 SANDBOX_PROVIDERS=aws \
	tests/mocks/sandbox start --no-iscd --no-s3 "$sb4" >"$tmp/4/start.out" 2>&1; then
	(
		passed=0 failed=0
		dir=$sb4
		# shellcheck disable=SC1091
		. "$sb4/env"
		start_iscd || { echo "FAIL: item 4: iscd did not start" >&2; exit 1; }
		cost_of() { status_of "$1" cost_micros; }
		spent_on() { # the ledger's charges of experiment $1, as isc spend shows them
			isc spend --by experiment --json | /usr/bin/python3 -c '
import json, sys
print(sum(r["amount_micros"] for r in json.load(sys.stdin)["rows"] if sys.argv[1] in (r.get("key"), r.get("id"), r.get("experiment_id"))))' "$1"
		}
		id=$(submit examples/demo-burst.isc)
		check "item 4: the burst completes" wait_status "$id" completed 120
		# Completed, its nodes still shutting down: not the final cost, and said so.
		check "isc status says the cost is still settling" status_says "$id" '^  Cost: +\$[0-9.]+ \(settling'
		check "isc experiments marks the cost (settling)" bash -c "'$ISC_BIN/isc' experiments | grep '$id' | grep -q '(settling)'"
		check "the API says cost_settling" test "$(status_of "$id" cost_settling)" = True
		# Settled once every node's termination is confirmed and charged.
		check "isc status then says the cost is final" within 30 status_says "$id" '^  Cost: +\$[0-9.]+ \(final\)'
		final=$(cost_of "$id")
		check "the final cost is what the ledger charged ($final)" test "$final" = "$(spent_on "$id")"
		sleep 1.5 # several meter ticks
		check "the final cost does not grow ($final, then $(cost_of "$id"))" test "$(cost_of "$id")" = "$final"
		check "isc experiments no longer says settling" bash -c "! '$ISC_BIN/isc' experiments | grep '$id' | grep -q settling"
		# isc burst --wait: its last line is the final cost, which stays.
		isc burst examples/demo-burst.isc --wait >"$tmp/4/wait.out" 2>&1
		id2=$(grep -Eo 'exp_[0-9a-f]{16}' "$tmp/4/wait.out" | head -1)
		check "burst --wait said completed" grep -q "^$id2: completed" "$tmp/4/wait.out"
		said=$(sed -n "s/^$id2: cost \\\$\([0-9.]*\) (final)\$/\1/p" "$tmp/4/wait.out")
		check "burst --wait ends with the final cost ($said)" test -n "$said"
		sleep 1.5
		now=$(status_of "$id2" cost)
		check "the cost burst --wait printed is the cost after ($said, then $now)" /usr/bin/python3 -c '
import sys
from decimal import Decimal
sys.exit(0 if Decimal(sys.argv[1]) == Decimal(sys.argv[2]) else 1)' "$said" "$now"
		echo "$passed $failed" >"$tmp/4/counts"
	)
	read -r p4 f4 <"$tmp/4/counts" 2>/dev/null || { p4=0; f4=1; }
	passed=$((passed + p4 + 1))
	failed=$((failed + f4))
else
	failed=$((failed + 1))
	echo "FAIL: item 4: the sandbox did not start: $(tail -3 "$tmp/4/start.out")" >&2
fi
tests/mocks/sandbox stop "$sb4" >/dev/null 2>&1
# make demo prints the experiments' costs once final, beside isc spend.
check "make demo waits for each cost to be final before printing it" grep -q 'cost_settling' tests/demo

# ---- 5. iscd's checks name every problem at once, each at its line and column ----
own_store 5 || exit 1
mkdir -p "$tmp/5"
h5=$tmp/5/home
i5() { "$ISC_BIN/isc" --home "$h5" "$@"; }
i5 init >/dev/null || exit 1
printf '\n[providers.aws]\nregions = ["us-east-1"]\nendpoint = "http://127.0.0.1:9"\n' >>"$h5/config.toml"
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x iscd_api "$h5" "$tmp/5/iscd.log" || exit 1
i5 org add acme >/dev/null && i5 project add --org acme vision >/dev/null 2>&1
write5() { # FILE PROJECT
	cat >"$1" <<LAUNCH
isc_project_id = "$2"
experiment_name = "resnet"
gpus = 8
compute_mode = "burst"
dataset_id_list = ["imagenet-missing", "coco-missing"]
burst_shape_priority_list = ["aws-us-east-1-p4d.24xlarg-spot"]
command = "true"
LAUNCH
}
write5 "$tmp/5/three.isc" vision
f=$tmp/5/three.isc
expect_exit 1 "validate refuses a file with three problems" i5 validate "$f"
expect_stderr "$f:5:20: error: dataset_id_list[0]: organisation 'acme' has no dataset 'imagenet-missing'" i5 validate "$f"
expect_stderr "$f:5:40: error: dataset_id_list[1]: organisation 'acme' has no dataset 'coco-missing'" i5 validate "$f"
expect_stderr "$f:6:30: error: burst_shape_priority_list[0]: no shape \"aws-us-east-1-p4d.24xlarg-spot\"; did you mean \"aws-us-east-1-p4d.24xlarge-spot\"?" i5 validate "$f"
expect_stderr "$f:5:40: error: dataset_id_list[1]" i5 burst "$f"
n=$(i5 validate "$f" 2>&1 | grep -c ': error: ')
check "validate names all three problems, and the list's verdict ($n error lines)" test "$n" = 4
write5 "$tmp/5/project.isc" visoin
f=$tmp/5/project.isc
expect_stderr "$f:1:18: error: isc_project_id: no project with id or name 'visoin'; did you mean 'vision'?" i5 validate "$f"
expect_stderr "$f:6:30: error: burst_shape_priority_list[0]" i5 validate "$f"
check "nothing was created" test "$(i5 experiments --json)" = "[]"
iscd_api_stop

# ---- 6. isc init --home DIR, as the README writes it (and isc --home DIR init) ----
own_store 6 || exit 1
mkdir -p "$tmp/6"
expect_exit 0 "isc init --home DIR" "$ISC_BIN/isc" init --home "$tmp/6/after"
check "isc init --home DIR made the store there" store_made "$tmp/6/after"
check "isc init --home DIR wrote config.toml there" test -f "$tmp/6/after/config.toml"
expect_exit 0 "isc init --home=DIR" "$ISC_BIN/isc" init --home="$tmp/6/eq"
check "isc init --home=DIR made the store there" store_made "$tmp/6/eq"
expect_exit 0 "isc --home DIR init still works" "$ISC_BIN/isc" --home "$tmp/6/before" init
check "isc --home DIR init made the store there" store_made "$tmp/6/before"
expect_stderr "--home needs a folder" "$ISC_BIN/isc" init --home

# ---- 7. The Control Plane on the sandbox: sandbox start --web, and restart after an edit ----
own_store 7 || exit 1
mkdir -p "$tmp/7"
sb7=$tmp/7/sb
sandbox7_stop() { tests/mocks/sandbox stop "$sb7" >/dev/null 2>&1; }
if ISC_BIN=$ISC_BIN tests/mocks/sandbox start --web --no-s3 "$sb7" >"$tmp/7/start.out" 2>&1; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	echo "FAIL: sandbox start --web: $(tail -3 "$tmp/7/start.out")" >&2
fi
conf7=$sb7/home/config.toml
# api_listen is a top-level key: above the first table, or it would land inside it.
check "sandbox --web writes api_listen above the first table" /usr/bin/python3 -c '
import re, sys
lines = open(sys.argv[1]).read().splitlines()
key = [i for i, l in enumerate(lines) if re.match(r"api_listen = \"127\.0\.0\.1:0\"", l)]
table = [i for i, l in enumerate(lines) if re.match(r"\[", l)]
sys.exit(0 if key and table and key[0] < table[0] else 1)' "$conf7"
url7=$(cat "$sb7/home/run/api.sock.tcp" 2>/dev/null)
check "sandbox start --web prints the Control Plane's URL ($url7)" grep -qF "the Control Plane at $url7/" "$tmp/7/start.out"
check "the Control Plane's sign-in page answers at $url7/" bash -c "curl -sf --max-time 5 '$url7/' | grep -qi '<html'"
check "the API over TCP wants a token" bash -c "test \"\$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 '$url7/v1/whoami')\" = 401"
pid7=$(cat "$sb7/iscd.pid" 2>/dev/null)
# An edit of config.toml needs iscd restarted: sandbox restart does it and records its pid.
sed -i '/^api_listen = /d' "$conf7"
expect_exit 0 "sandbox restart" env ISC_BIN="$ISC_BIN" tests/mocks/sandbox restart "$sb7"
check "restart: a new iscd, recorded in DIR/iscd.pid" bash -c "p=\$(cat '$sb7/iscd.pid'); [ -n \"\$p\" ] && [ \"\$p\" != '$pid7' ] && kill -0 \"\$p\""
echo "$pid7" >"$tmp/7/old.pid"
check "restart: the old iscd is gone" bash -c ". tests/mocks/lib/procs.sh; ! procs_alive '$tmp/7/old.pid'"
check "restart: iscd read config.toml anew (no TCP listener now)" test ! -e "$sb7/home/run/api.sock.tcp"
check "restart: the API answers on the socket" bash -c "ISC_HOME='$sb7/home' '$ISC_BIN/isc' experiments --json >/dev/null"
sandbox7_stop
check "sandbox stop leaves no process of it (the restarted iscd included)" bash -c ". tests/mocks/lib/procs.sh; procs_none_left '$sb7'"
# The docs say it: api_listen above the first table, read only at start, the sandbox's way.
check "docs/control-plane.md: the sandbox's --web and restart" grep -q 'sandbox start --web' docs/control-plane.md
check "docs/config.md: api_listen is read when iscd starts" grep -q 'api_listen.*restart' docs/config.md

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
	bash -c "grep -Eq '[0-9]+ MB from the npm registry' README.md && grep -q 'make deps. installs only what building' README.md"

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
