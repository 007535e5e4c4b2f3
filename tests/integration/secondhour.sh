#!/usr/bin/env bash
# A newcomer's second hour (issue 34), each reproduction as a check: config.toml refuses
# a key no driver reads; isc validate refuses what isc burst refuses; money is exact
# everywhere; isc cancel without iscd is carried out when iscd starts; finance users are
# told where their view is; tables pad by display width; and the small things.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d /tmp/isc-secondhour.XXXXXX)
home=$tmp/home
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
trap 'iscd_api_stop; rm -rf "$tmp"' EXIT
# iscd for the API, with fake AWS credentials (nothing here talks to a cloud: shapes are
# placeable when their provider, region and credentials are there).
api() { AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x iscd_api "$home" "$tmp/iscd.log"; }

isc init >/dev/null || exit 1
cp "$home/config.toml" "$tmp/config.init"

# ---- 1. config.toml: every key of [providers.*] is one its driver declares ----
# What the sandbox writes (a file that ends with a table), then a top-level key appended.
cat >>"$home/config.toml" <<CONF

[providers.aws]
regions = ["us-east-1"]
endpoint = "http://127.0.0.1:9"

[providers.gcp]
regions = ["us-central1"]
CONF
cp "$home/config.toml" "$tmp/config.good"
echo 'api_listen = "127.0.0.1:0"' >>"$home/config.toml"
line=$(wc -l <"$home/config.toml")
expect_exit 1 "iscd refuses a top-level key inside a table" "$ISC_BIN/iscd" --home "$home" --once
expect_stderr "$home/config.toml:$line:1: providers.gcp.api_listen: a top-level key inside [providers.gcp]: api_listen belongs before the first table" \
	"$ISC_BIN/iscd" --home "$home" --once
cp "$tmp/config.good" "$home/config.toml"
echo 'totally_bogus = 3' >>"$home/config.toml"
expect_stderr "providers.gcp.totally_bogus: unknown key in [providers.gcp]" "$ISC_BIN/iscd" --home "$home" --once
cp "$tmp/config.good" "$home/config.toml"
sed -i 's/^endpoint = /endpiont = /' "$home/config.toml"
expect_stderr "providers.aws.endpiont: unknown key in [providers.aws]; did you mean 'endpoint'?" "$ISC_BIN/iscd" --home "$home" --once
# Every key isc init's template documents for a section is one its driver declares: the
# template with every provider key uncommented loads.
/usr/bin/python3 - "$tmp/config.init" >"$tmp/config.all" <<'PY'
import re, sys
sec = None
for line in open(sys.argv[1]):
    m = re.match(r"# \[providers\.([a-z]+)\]", line)
    if m:
        sec = m.group(1)
        print("[providers.%s]" % sec)
        continue
    m = re.match(r"# (([a-z_0-9]+) = .*?)\s*(# .*)?$", line)
    if sec and m and m.group(2).startswith("endpoint"):
        print('%s = "http://127.0.0.1:9"' % m.group(2))  # never a real cloud
    elif sec and m:
        print(m.group(1))
    elif not sec:
        print(line, end="")
PY
check "the template's provider keys, all uncommented, are every one known" grep -q '^s3_addressing = ' "$tmp/config.all"
cp "$tmp/config.all" "$home/config.toml"
check "no real endpoint in the test's config" test "$(grep -c '^endpoint' "$tmp/config.all")" -ge 6
# iscd opens its API socket only after config.toml loaded.
check "a config with every documented provider key loads" api
iscd_api_stop
cp "$tmp/config.good" "$home/config.toml"

# ---- 2. isc validate refuses what isc burst refuses ----
write_launch() { # FILE PROJECT LIST
	cat >"$1" <<LAUNCH
isc_project_id = "$2"
experiment_name = "resnet"
gpus = 16
compute_mode = "burst"
burst_shape_priority_list = [$3]
command = "true"
LAUNCH
}
write_launch "$tmp/typo.isc" vision '"aws-us-east-1-p4d.24xlarg-spot"'
write_launch "$tmp/oci.isc" vision '"oci-af-casablanca-1-BM.GPU.A100-v2.8-ondemand"'
write_launch "$tmp/noproject.isc" visoin '"aws-us-east-1-p4d.24xlarge-spot"'
write_launch "$tmp/good.isc" vision '"aws-us-east-1-p4d.24xlarge-spot"'
# Without iscd: the file alone, and a note naming what was not checked.
expect_exit 0 "validate without iscd: the file is valid" isc validate "$tmp/noproject.isc"
expect_stderr "note: iscd is not running, so these were not checked: the project exists" isc validate "$tmp/noproject.isc"
api || exit 1
isc org add acme >/dev/null && isc project add --org acme vision >/dev/null 2>&1
for f in typo oci noproject; do
	expect_exit 1 "burst refuses $f.isc" isc burst "$tmp/$f.isc"
	expect_exit 1 "validate refuses $f.isc as burst does" isc validate "$tmp/$f.isc"
done
expect_stderr "none of its 1 id(s) names a shape of the catalog" isc validate "$tmp/typo.isc"
expect_stderr "none of its shapes can be placed by this broker" isc validate "$tmp/oci.isc"
expect_stderr "no project with id or name 'visoin'" isc validate "$tmp/noproject.isc"
expect_exit 0 "validate passes a file burst takes" isc validate "$tmp/good.isc"
check "validate created nothing" test "$(isc experiments --json)" = "[]"

# ---- 3. money is exact wherever it is shown ----
out=$(isc credits grant --org acme 0.000001)
check "grant of a micro-dollar says so: $out" grep -q '^granted \$0.000001 to acme; balance \$0.000001' <<<"$out"
isc credits grant --org acme 1499.965783 >/dev/null
check "credits show: the exact balance" bash -c "'$ISC_BIN/isc' --home '$home' credits show | grep -q '^acme  *\$1499.965784  *\$0.00  *\$1499.965784\$'"
isc credits show --json >"$tmp/credits.json"
check "credits --json: 6-place string beside the micros" /usr/bin/python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))["orgs"][0]
sys.exit(0 if o["balance"] == "1499.965784" and o["balance_micros"] == 1499965784 and o["reserved"] == "0.000000" else 1)' "$tmp/credits.json"
out=$(isc project budget --org acme --project vision 0.000005)
check "a budget is exact: $out" grep -q 'budget \$0.000005; spent \$0.00, held \$0.00, remaining \$0.000005' <<<"$out"
check "project list --json: the route's budget_micros gets its 6-place string" bash -c "'$ISC_BIN/isc' --home '$home' project list --org acme --json | grep -q '\"budget\": \"0.000005\"'"
# The pages' money() is the same rule (when node is there to run it).
if command -v node >/dev/null; then
	check "web/app.js money() is exact" node -e '
const s = require("fs").readFileSync("web/app.js", "utf8");
eval(s.match(/function money\(micros, decimals\) \{[\s\S]*?\n  \}/)[0]);
const want = {1: "$0.000001", 1499965784: "$1499.965784", 250000000: "$250.000000", "-5000000": "-$5.000000"};
for (const k in want) if (money(Number(k)) !== want[k]) process.exit(1);'
fi

# ---- 5. isc cancel without iscd: recorded, carried out when iscd starts ----
id=$(isc burst "$tmp/good.isc" | grep -Eo 'exp_[0-9a-f]{16}')
check "a burst to cancel was created" test -n "$id"
iscd_api_stop
out=$(isc cancel "$id")
check "cancel without iscd says it is recorded: $out" grep -q "iscd is not running: the cancel of $id is recorded in $home/run/cancel/$id and carried out when iscd starts" <<<"$out"
check "the request is a file under run/cancel" test -f "$home/run/cancel/$id"
# (The next iscd also listens on TCP: item 10's run/api.sock.tcp.)
sed -i '1i api_listen = "127.0.0.1:0"' "$home/config.toml"
api || exit 1
check "iscd took the request" test ! -e "$home/run/cancel/$id"
for _ in $(seq 100); do [ "$(status_of "$id")" = cancelled ] && break; sleep 0.1; done
check "the experiment ends cancelled" test "$(status_of "$id")" = cancelled
check "the cancel is audited" bash -c "'$ISC_BIN/isc' --home '$home' audit --json | grep -q 'left while iscd was stopped'"

# ---- 6. the sandbox starts what README uses, and its stop leaves nothing ----
# tests/mocks/sandbox start: the three mock clouds, the mock S3 as endpoint_s3 and an iscd
# of its own on the sandbox's ISC_HOME; docs/mock-cloud.md's dataset commands as written;
# stop leaves no process of it (ps). sbx runs a command with the sandbox's DIR/env.
sb=$tmp/sb
eval "set -- $(trap -p EXIT)"
sb_prev_trap=${3:-}
trap "tests/mocks/sandbox stop '$sb' >/dev/null 2>&1; $sb_prev_trap" EXIT
sbx() { (. "$sb/env" && "$@"); }
if ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 tests/mocks/sandbox start "$sb" >"$tmp/sb.out" 2>&1; then
	passed=$((passed + 1))
	sb_pids="$(cat "$sb/mock.pid" "$sb/s3.pid" "$sb/iscd.pid")"
	check "sandbox: the mock cloud, the mock S3 and iscd run" bash -c ". tests/mocks/lib/procs.sh && procs_alive '$sb/mock.pid' && procs_alive '$sb/s3.pid' && procs_alive '$sb/iscd.pid'"
	check "sandbox: its iscd runs on its ISC_HOME, logging in DIR" grep -qF "started on $sb/home (pid $(cat "$sb/iscd.pid")," "$sb/iscd.log"
	check "sandbox: its iscd answers on the socket" sbx "$ISC_BIN/isc" project list --org demo
	for p in aws gcp oci; do
		check "sandbox: [providers.$p] is written" grep -qx "\[providers.$p\]" "$sb/home/config.toml"
		check "sandbox: isc check $p through its iscd" sbx "$ISC_BIN/isc" check $p
	done
	check "sandbox: endpoint_s3 is the mock S3" grep -qx "endpoint_s3 = \"http://127.0.0.1:$(cat "$sb/s3.port")\"" "$sb/home/config.toml"
	# docs/mock-cloud.md, "Datasets on the sandbox", as written (bin/ is ISC_BIN here).
	check "sandbox: datasets add s3://sandbox-data/mnist.zip --credentials-from-env" \
		sbx "$ISC_BIN/isc" datasets add s3://sandbox-data/mnist.zip --org demo --credentials-from-env
	check "sandbox: the dataset becomes Available" bash -c ". '$sb/env'; for i in \$(seq 1 150); do '$ISC_BIN/isc' datasets show mnist --org demo | grep -qE '^state: +Available' && exit 0; sleep 0.2; done; exit 1"
	sbx "$ISC_BIN/isc" burst examples/demo-dataset.isc --wait >"$tmp/sb-burst.out" 2>&1
	check "sandbox: examples/demo-dataset.isc completes" grep -qE '^exp_[0-9a-f]{16}: completed' "$tmp/sb-burst.out"
	sb_id=$(grep -Eo 'exp_[0-9a-f]{16}' "$tmp/sb-burst.out" | tail -n 1)
	check "sandbox: its ranks read /data/mnist" bash -c ". '$sb/env'; '$ISC_BIN/isc' logs '$sb_id' --rank 1 | grep -qx '61 /data/mnist/train.csv'"
	sb_pids="$sb_pids $(cat "$sb"/mock/nodes/*/node.pid 2>/dev/null)"
	check "sandbox: stop" tests/mocks/sandbox stop "$sb"
	# What ps lists afterwards: no live process (zombies wait for their reaper) that was
	# one of the sandbox's or names its folder.
	sb_ps=$(ps -eo pid=,stat=,args=)
	sb_left=$(awk -v d="$sb" -v pids=" $(echo $sb_pids) " '$2 !~ /^Z/ && (index($0, d) || index(pids, " " $1 " "))' <<<"$sb_ps")
	check "sandbox: stop leaves no process (ps)" test -z "$sb_left"
	[ -z "$sb_left" ] || echo "left after sandbox stop: $sb_left" >&2
	check "sandbox: stop removed the pid files" bash -c "! ls '$sb'/*.pid 2>/dev/null | grep -q ."
else
	failed=$((failed + 1))
	echo "FAIL: sandbox start:" >&2
	cat "$tmp/sb.out" >&2
fi
tests/mocks/sandbox stop "$sb" >/dev/null 2>&1
trap -- "$sb_prev_trap" EXIT

# ---- 7. a finance user is told what the role sees and where to look ----
isc user add fin >/dev/null && isc member add --org acme fin --role finance >/dev/null
# A finance token for fin, stored as iscd stores one (fin is no OS user here; api-tokens.sh).
fsecret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
sqlite3 "$home/isc.db" "INSERT INTO api_tokens (id, user_id, hash, created_at_ms)
	SELECT 'tok_00000000000000f1', id, '$(printf '%s' "$fsecret" | sha256sum | cut -d' ' -f1)', 0 FROM users WHERE name = 'fin'"
as_fin() { ISC_API_URL=$(cat "$home/run/api.sock.tcp") ISC_TOKEN="tok_00000000000000f1.$fsecret" "$@"; }
expect_stderr "isc experiments: you are finance in acme: finance sees its money, not its experiments; what each experiment spent: isc spend --org acme --by experiment" \
	as_fin isc experiments
check "fin sees no experiment rows" test "$(as_fin isc experiments --json 2>/dev/null)" = "[]"
expect_exit 0 "the place it names answers fin" as_fin isc spend --org acme --by experiment

# ---- 10. small things ----
check "iscd wrote run/api.sock.tcp" test -s "$home/run/api.sock.tcp"
iscd_api_stop
check "run/api.sock.tcp is removed when iscd stops" test ! -e "$home/run/api.sock.tcp"
api || exit 1
isc spend --org acme --json >"$tmp/spend.json"
check "spend --json is the JSON report" /usr/bin/python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); sys.exit(0 if "rows" in o and "total_micros" in o else 1)' "$tmp/spend.json"
check "spend --json and --format json agree" bash -c "'$ISC_BIN/isc' --home '$home' spend --org acme --format json | cmp -s - '$tmp/spend.json'"
check "spend's table comes from the table module" bash -c "'$ISC_BIN/isc' --home '$home' spend --org acme 2>/dev/null | head -1 | grep -q '^ID  *PROJECT  *AMOUNT (USD)\$'"
check "isc help burst is burst's help" bash -c "'$ISC_BIN/isc' help burst | grep -q '^usage: isc burst FILE.isc'"
expect_exit 2 "isc help of no command" isc help bogus
out=$(isc burst "$tmp/good.isc" --wiat 2>&1)
check "--wiat: the did-you-mean alone, nothing recorded: $out" bash -c "grep -q \"'--wiat': did you mean '--wait'?\" <<<\"\$1\" && ! grep -q 'unexpected argument\|exp_' <<<\"\$1\"" _ "$out"
isc project add --org acme audio >"$tmp/padd.out" 2>"$tmp/padd.err"
check "project add: the id on stdout" grep -Eq '^prj_[0-9a-f]+$' "$tmp/padd.out"
check "project add: what it is and how it is used, on stderr" grep -q "created project 'audio' (prj_[0-9a-f]*) in acme: launch files name it with isc_project_id = \"audio\"" "$tmp/padd.err"

# ---- 9. tables pad by display width ----
sed 's/^experiment_name = .*/experiment_name = "日本語"/' "$tmp/good.isc" >"$tmp/wide.isc"
isc burst "$tmp/wide.isc" >/dev/null
isc experiments >"$tmp/experiments.txt"
check "experiments: a 日本語 name does not shift its row" /usr/bin/python3 - "$tmp/experiments.txt" <<'PY'
import re, sys, unicodedata
def cells(line):  # one entry per terminal column
    out = []
    for ch in line:
        if unicodedata.combining(ch):
            continue
        out.append(ch)
        if unicodedata.east_asian_width(ch) in "WF":
            out.append("")
    return out
lines = [cells(l.rstrip("\n")) for l in open(sys.argv[1]) if l.strip()]
assert any("日" in l for l in lines) and len(lines) >= 3
width = max(len(l) for l in lines)
rows = [l + [" "] * (width - len(l)) for l in lines]
blank = [all(r[i] == " " for r in rows) for i in range(width)]
gutters, i = 0, 0
while i < width:
    if blank[i]:
        j = i
        while j < width and blank[j]:
            j += 1
        gutters += j - i >= 2 and j < width
        i = j
    else:
        i += 1
sys.exit(0 if gutters == 6 else 1)
PY
iscd_api_stop
# make demo's headings are bold on a terminal only (demo.sh also checks the whole output).
check "tests/demo writes no ANSI codes when not on a terminal" bash -c "eval \"\$(sed -n '/^# Bold headings/,/^fi\$/p' tests/demo)\" && type step >/dev/null && ! step heading | grep -q \$'\\e'"
# A second make remakes nothing (toml-decode and credits-race were rebuilt every time).
bdir=${ISC_BIN%/bin}
bdir=${bdir#"$PWD/"}
if [ -f Makefile ] && [ -d "$bdir/obj" ]; then
	check "a second make of the programs remakes nothing" make -q SAN=1 BUILD="$bdir" "$bdir/bin/isc" "$bdir/bin/iscd" "$bdir/bin/toml-decode" "$bdir/bin/credits-race"
fi

# ---- The house (issue 34): credentials read once, API money, isc user add's next step,
# one clock, the burst suites' helpers in lib.sh ----
api || exit 1
sock() { curl -s --unix-socket "$home/run/api.sock" "$@"; }
# One reading of a body's credentials: keys and datasets refuse alike, naming the field
# and never its value.
for route in keys datasets; do
	body='{"org":"acme","provider":"aws","uri":"s3://b/x.zip","credentials":{"access_key_id":"AKIDNOTSHOWN","secret_access_key":7}}'
	out=$(sock -X POST -d "$body" "http://localhost/v1/$route")
	check "POST /v1/$route: a non-string credential names its field: $out" \
		bash -c 'grep -q "\"credentials.secret_access_key: not a string\"" <<<"$1" && ! grep -q AKIDNOTSHOWN <<<"$1"' _ "$out"
	out=$(sock -X POST -d '{"org":"acme","provider":"aws","uri":"s3://b/x.zip","credentials":"x"}' "http://localhost/v1/$route")
	check "POST /v1/$route: credentials not an object is named: $out" grep -q '"credentials: an object ' <<<"$out"
done
check "one credentials reader in api/" test "$(grep -l 'json_object_foreach(creds' api/*.c)" = api/credentials.c

# Money in API replies: every integer NAME_micros has NAME beside it, the 6-place decimal
# string of the same amount (or both null); the routes asked directly, not through isc.
sock -X POST -d '{"org":"acme","amount_micros":1}' http://localhost/v1/credits/grants >"$tmp/m.grant"
sock -X POST -d '{"org":"acme","project":"vision","budget_micros":2500001}' http://localhost/v1/budgets >"$tmp/m.budget"
sock -X POST -d '{"org":"acme","project":"audio","budget_micros":null}' http://localhost/v1/budgets >"$tmp/m.nobudget"
sock http://localhost/v1/credits >"$tmp/m.credits"
sock 'http://localhost/v1/projects?org=acme' >"$tmp/m.projects"
sock 'http://localhost/v1/shapes?gpus=8&limit=3' >"$tmp/m.shapes"
sock http://localhost/v1/experiments >"$tmp/m.experiments"
sock 'http://localhost/v1/spend?org=acme&format=json&by=experiment' >"$tmp/m.spend"
check "API money: NAME_micros and its 6-place NAME in every reply" /usr/bin/python3 - "$tmp"/m.* <<'PY'
import json, re, sys
pairs, bad = 0, []
def walk(v, where):
    global pairs
    if isinstance(v, list):
        for x in v:
            walk(x, where)
    elif isinstance(v, dict):
        for k, x in v.items():
            if k.endswith("_micros"):
                name = k[:-7]
                s = v.get(name, "missing")
                if x is None:
                    ok = s is None
                else:
                    m = isinstance(s, str) and re.fullmatch(r"(-?)(\d+)\.(\d{6})", s)
                    ok = bool(m) and (-1 if m.group(1) else 1) * (int(m.group(2)) * 1000000 + int(m.group(3))) == x
                pairs += 1
                if not ok:
                    bad.append("%s: %s=%r %s=%r" % (where, k, x, name, s))
            else:
                walk(x, where)
seen = set()
for f in sys.argv[1:]:
    doc = json.load(open(f))
    walk(doc, f)
    seen.add(f.rsplit(".", 1)[1])
print(pairs, "money pairs;", bad, file=sys.stderr)
sys.exit(0 if not bad and pairs >= 12 and len(seen) == 8 else 1)
PY
check "the grant reply: granted \$0.000001" grep -qE '"granted": ?"0.000001"' "$tmp/m.grant"
check "a project without a budget: budget null" grep -qE '"budget": ?null' "$tmp/m.nobudget"
check "shapes: node_price as 6 places" grep -qE '"node_price": ?"[0-9]+\.[0-9]{6}"' "$tmp/m.shapes"

# isc user add says what the new user does next: the role, the socket as that login, a
# token for TCP (this iscd listens on TCP since item 5), and when the login is missing here.
who=nc$RANDOM$RANDOM
isc user add "$who" >"$tmp/uadd.out" 2>"$tmp/uadd.err"
check "user add: stdout is the one line" test "$(cat "$tmp/uadd.out")" = "user $who added"
check "user add: the role to give" grep -qF "isc member add --org ORG $who --role member|admin|finance" "$tmp/uadd.err"
check "user add: the socket to use as that login" grep -qF "as the OS user $who on this machine: ISC_SOCKET=$home/run/api.sock isc experiments" "$tmp/uadd.err"
check "user add: a token of their own for TCP" grep -qF "isc token create --expires 30d, then ISC_API_URL=$(cat "$home/run/api.sock.tcp") ISC_TOKEN=" "$tmp/uadd.err"
check "user add: no such login here is said" grep -qF "there is no OS user '$who' on this machine" "$tmp/uadd.err"
iscd_api_stop

# One clock: outside common/clock.c nothing reads the system clock for milliseconds of its
# own (onprem/ is folded separately; log.c stamps lines, download.c's condition wait needs a
# timespec, tests/mocks/node/docker.c is built alone, without the library).
clocks=$(find . -name '*.c' -not -path './build/*' -not -path './onprem/*' -not -path '*/node_modules/*' |
	xargs grep -lE 'clock_gettime\(CLOCK_(REALTIME|MONOTONIC)|gettimeofday\(' |
	grep -vxE './common/clock.c|./common/log.c|./datasets/download.c|./tests/mocks/node/docker.c')
check "no private wall/monotonic clock helpers: ${clocks:-none}" test -z "$clocks"

# The burst suites share lib.sh's sandbox helpers instead of copies of their own.
check "burst suites define none of lib.sh's sandbox helpers" test -z "$(grep -nE '^(cleanup|start_iscd|stop_iscd|running_cycle2|count)\(\)' \
	tests/integration/burst.sh tests/integration/crashpoints.sh tests/integration/gcp-burst.sh tests/integration/oci-burst.sh)"
for f in burst crashpoints gcp-burst oci-burst; do
	check "$f.sh uses sandbox_dir and start_iscd" bash -c "grep -q '^sandbox_dir ' tests/integration/$f.sh && grep -q 'start_iscd' tests/integration/$f.sh"
done

# ---- 8. a pool node that does not answer is never shown up ----
# isc nodes add logs in first and refuses a node that does not answer, naming it and why;
# --force adds it unreachable with the reason; iscd probes every node each node_probe_ms,
# so a node whose sshd is killed is unreachable within a period (tests/integration/pool.sh
# has the rest: authentication, host keys, coming back, no run on such a node).
p8=$tmp/pool8
mkdir -p "$p8"
p8ip=127.154.$((RANDOM % 200 + 1)).200
p8isc() { "$ISC_BIN/isc" --home "$p8/home" "$@"; }
p8isc init >/dev/null
printf '\ntick_interval_ms = 200\nnode_probe_ms = 1000\n' >>"$p8/home/config.toml"
setpriv --pdeathsig TERM "$ISC_BIN/iscd" --home "$p8/home" 2>"$p8/iscd.log" &
p8pid=$!
iscd_wait_socket "$p8/home/run/api.sock"
t0=$(date +%s%3N)
p8isc nodes add "$p8ip" --port 2222 --user root --gpus 1 >/dev/null 2>"$p8/add.err"
check "8: nodes add of an address where nothing listens fails" test $? -eq 1
check "8: ...within 5 s" test $(($(date +%s%3N) - t0)) -lt 5000
check "8: ...naming the node and why" grep -qF "node root@$p8ip:2222 does not answer: connection refused: nothing listens on $p8ip port 2222; not added" "$p8/add.err"
check "8: --force adds it unreachable, with the reason" bash -c "'$ISC_BIN/isc' --home '$p8/home' nodes add '$p8ip' --port 2222 --user root --gpus 1 --force | grep -q 'added, unreachable: connection refused'"
p8isc nodes pubkey >"$p8/keys"
tests/mocks/node/node-up "$p8/n" "$p8ip" 2222 "$p8/keys" >/dev/null
check "8: it is up once its sshd answers" bash -c "for _ in \$(seq 100); do '$ISC_BIN/isc' --home '$p8/home' nodes list | grep -qE '^ *1 .* up *\$' && exit 0; sleep 0.1; done; exit 1"
tests/mocks/node/node-down "$p8/n" >/dev/null
check "8: its sshd killed, isc nodes shows it unreachable within a period, with why" bash -c "for _ in \$(seq 100); do '$ISC_BIN/isc' --home '$p8/home' nodes list | grep -qE '^ *1 .* unreachable +connection refused' && exit 0; sleep 0.1; done; exit 1"
kill -TERM "$p8pid" 2>/dev/null && wait "$p8pid" 2>/dev/null

finish secondhour
