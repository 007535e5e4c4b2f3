#!/usr/bin/env bash
# A new user's first hour (issue 24), each reproduction as a check: a typo in the
# priority list is named where it is written and never buys another cluster; a
# mistyped command or option gets a did-you-mean; --version names the commit;
# empty results say so; `isc check` says where it looked for credentials.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d /tmp/isc-firsthour.XXXXXX)
home=$tmp/home
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
# iscd serves isc's requests and checks a burst's priority list with its own environment
# (the broker is what needs the cloud credentials): api_start [VAR=VALUE | -u VAR]...
api_pid=
api_start() {
	env "$@" "$ISC_BIN/iscd" --home "$home" --interval-ms 60000 2>>"$tmp/iscd.log" &
	api_pid=$!
	iscd_wait_socket "$home/run/api.sock"
}
api_stop() {
	[ -n "$api_pid" ] && kill -TERM "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null
	api_pid=
}
trap 'api_stop; rm -rf "$tmp"' EXIT

# ---- small things ----
out=$(isc --version)
check "--version prints version and commit" grep -Eq '^isc [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)$' <<<"$out"
if git rev-parse HEAD >/dev/null 2>&1; then
	check "--version's commit is this tree's" grep -q "$(git rev-parse --short=12 HEAD)" <<<"$out"
fi
check "iscd --version prints the same" test "$("$ISC_BIN/iscd" --version | sed 's/^iscd/isc/')" = "$out"
# A tree without git (a tarball): the commit comes from COMMIT, which git archive fills in.
mkdir -p "$tmp/tree/scripts" && cp scripts/build-commit "$tmp/tree/scripts/"
echo 0123456789ab >"$tmp/tree/COMMIT"
check "build-commit without git reads COMMIT" test "$(GIT_CEILING_DIRECTORIES=$tmp "$tmp/tree/scripts/build-commit")" = 0123456789ab
echo '$Format:%h$' >"$tmp/tree/COMMIT"
check "build-commit with an unfilled COMMIT says unknown" test "$(GIT_CEILING_DIRECTORIES=$tmp "$tmp/tree/scripts/build-commit")" = unknown
if git rev-parse HEAD >/dev/null 2>&1 && git cat-file -e HEAD:COMMIT 2>/dev/null; then
	check "git archive fills COMMIT in" bash -c "git archive HEAD COMMIT | tar -xO | grep -q \"^\$(git rev-parse --short HEAD | cut -c1-7)\""
fi
expect_exit 2 "mistyped command is usage" isc experimnts
expect_stderr "unknown command 'experimnts'; did you mean 'experiments'?" isc experimnts
expect_exit 2 "mistyped global option is usage" isc --hom x
expect_stderr "did you mean '--home'?" isc --hom x
expect_exit 2 "mistyped option is usage" isc shapes --gpu 8
expect_stderr "'--gpu': did you mean '--gpus'?" isc shapes --gpu 8
expect_stderr "'--wiat': did you mean '--wait'?" isc burst x.isc --wiat
expect_stderr "'grnt': did you mean 'grant'?" isc credits grnt --org a 1
expect_exit 0 "init" isc init
# (noenv is defined below; the same variables unset: iscd has no cloud credentials.)
api_start -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_PROFILE -u AWS_SHARED_CREDENTIALS_FILE \
	-u GOOGLE_APPLICATION_CREDENTIALS -u OCI_CLI_CONFIG_FILE -u OCI_CLI_USER HOME="$tmp/nohome" || exit 1
expect_stderr "no experiments yet" isc experiments
expect_exit 0 "empty experiments is not a failure" isc experiments
expect_stderr "no charges match" isc spend --by experiment
expect_exit 0 "empty spend is not a failure" isc spend --by experiment
check "spend by experiment has ID and name columns" bash -c "'$ISC_BIN/isc' --home '$home' spend --by experiment 2>/dev/null | head -1 | grep -Eq '^ID +EXPERIMENT +AMOUNT'"
expect_stderr "no shape matches" isc shapes --gpu-type nosuchgpu

# isc check without credentials names every place it looked.
noenv() { env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_PROFILE -u AWS_SHARED_CREDENTIALS_FILE \
	-u GOOGLE_APPLICATION_CREDENTIALS -u OCI_CLI_CONFIG_FILE -u OCI_CLI_USER HOME="$tmp/nohome" "$@"; }
# isc init's config.toml documents every key docs/config.md does, section by section.
/usr/bin/python3 - "$home/config.toml" docs/config.md >"$tmp/keys.diff" 2>&1 <<'PY'
import re, sys
tpl, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
def template_keys():
    out, sec = {}, "top"
    for line in tpl.split("\n"):
        m = re.match(r"#? ?\[providers\.([a-z]+)\]", line)
        if m:
            sec = m.group(1)
            continue
        m = re.match(r"#? ?([a-z_]+) = ", line)
        if m:
            out.setdefault(sec, set()).add(m.group(1))
    return out
def doc_keys():
    out = {}
    for title, body in re.findall(r"\n##+ (.*?)\n(.*?)(?=\n##|\Z)", doc, re.S):
        sec = "top" if title.strip() == "Top-level keys" else (re.match(r"`\[providers\.([a-z]+)\]`", title.strip()) or [None, None])[1]
        if not sec:
            continue
        for row in re.findall(r"^\| (`[^|]*) \|", body, re.M):
            out.setdefault(sec, set()).update(re.findall(r"`([a-z_]+)`", row))
    return out
t, d = template_keys(), doc_keys()
bad = 0
for sec in sorted(set(t) | set(d)):
    if t.get(sec, set()) != d.get(sec, set()):
        bad = 1
        print("%s: only in isc init's template: %s; only in docs/config.md: %s" % (
            sec, sorted(t.get(sec, set()) - d.get(sec, set())), sorted(d.get(sec, set()) - t.get(sec, set()))))
print("sections:", sorted(t))
sys.exit(bad)
PY
kd=$?
check "isc init's template and docs/config.md list the same keys" test "$kd" = 0
[ "$kd" = 0 ] || cat "$tmp/keys.diff" >&2
check "the template covers top-level and three provider sections" grep -q "sections: \['aws', 'gcp', 'oci', 'top'\]" "$tmp/keys.diff"
# (iscd reads config.toml anew for every isc check: a config error is its first answer.)
expect_exit 1 "isc init's template parses as config (only the credentials are missing)" noenv "$ISC_BIN/isc" --home "$home" check aws --region us-east-1
expect_stderr "no AWS credentials" noenv "$ISC_BIN/isc" --home "$home" check aws --region us-east-1
echo 'tick_intervl_ms = 5' >>"$home/config.toml"
expect_stderr "$home/config.toml:" noenv "$ISC_BIN/isc" --home "$home" check aws --region us-east-1
expect_stderr "tick_intervl_ms: unknown top-level key; did you mean 'tick_interval_ms'?" noenv "$ISC_BIN/isc" --home "$home" check aws --region us-east-1
sed -i '$d' "$home/config.toml"

expect_exit 1 "check aws without credentials" noenv "$ISC_BIN/isc" --home "$home" check aws --region us-east-1
expect_stderr "looked in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY unset) and in profile 'default' of $tmp/nohome/.aws/credentials (no such file)" \
	noenv "$ISC_BIN/isc" --home "$home" check aws --region us-east-1
expect_stderr "GOOGLE_APPLICATION_CREDENTIALS (unset) and $tmp/nohome/.config/gcloud/application_default_credentials.json (no such file)" \
	noenv "$ISC_BIN/isc" --home "$home" check gcp
expect_stderr "cannot read OCI config $tmp/nohome/.oci/config" noenv "$ISC_BIN/isc" --home "$home" check oci
expect_stderr "OCI_CLI_USER, OCI_CLI_TENANCY" noenv "$ISC_BIN/isc" --home "$home" check oci

# ---- the priority list, checked where it is written ----
isc org add acme >/dev/null && isc project add --org acme vision >/dev/null
write_launch() { # FILE LIST
	cat >"$1" <<LAUNCH
isc_project_id = "vision"
experiment_name = "resnet"
gpus = 16
compute_mode = "burst"
burst_shape_priority_list = [$2]
command = "true"
LAUNCH
}
write_launch "$tmp/typo.isc" '"aws-us-east-1-p4d.24xlarg-spot", "aws-us-east-1-p4d.24xlarge-ondemand"'
write_launch "$tmp/alltypo.isc" '"aws-us-east-1-p4d.24xlarg-spot"'
expect_exit 1 "burst: no valid id is refused" isc burst "$tmp/alltypo.isc"
expect_stderr "none of its 1 id(s) names a shape of the catalog" isc burst "$tmp/alltypo.isc"
check "burst: nothing was created" test "$(isc experiments --json)" = "[]"
# Every id exists, but isc init's config has no [providers.aws]: refused, saying why for each.
expect_exit 1 "burst: no placeable shape is refused" isc burst "$tmp/typo.isc"
expect_stderr "burst_shape_priority_list[1]: shape \"aws-us-east-1-p4d.24xlarge-ondemand\" cannot be placed by this broker: [providers.aws] is not in $home/config.toml" \
	isc burst "$tmp/typo.isc"
check "burst: still nothing created" test "$(isc experiments --json)" = "[]"
cat >>"$home/config.toml" <<CONF

[providers.aws]
regions = ["us-east-1"]
endpoint = "http://127.0.0.1:9"
CONF
expect_stderr "cannot be placed by this broker: no AWS credentials: looked in" noenv "$ISC_BIN/isc" --home "$home" burst "$tmp/typo.isc"
# iscd again, now with credentials in its environment.
api_stop
api_start AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x || exit 1
# validate runs burst's checks (issue 34): with a placeable id a typo is a warning.
expect_exit 0 "validate: a typo is a warning, the file is valid" isc validate "$tmp/typo.isc"
expect_stderr "$tmp/typo.isc:5:30: warning: burst_shape_priority_list[0]: no shape \"aws-us-east-1-p4d.24xlarg-spot\"; did you mean \"aws-us-east-1-p4d.24xlarge-spot\"?" \
	isc validate "$tmp/typo.isc"
# isc shapes: placeable shapes first, the others marked with why; --placeable only those.
# (Placeable is iscd's answer: its config, drivers and the credentials it runs with.)
isc shapes --gpus 8 --json >"$tmp/shapes.json"
check "shapes --json: placeable first, each unplaceable one says why" /usr/bin/python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
flags = [x["placeable"] for x in a]
ok = any(flags) and not all(flags) and flags == sorted(flags, reverse=True)
ok = ok and all(x["provider"] == "aws" and x["region"] == "us-east-1" for x in a if x["placeable"])
ok = ok and all("why" in x for x in a if not x["placeable"])
ok = ok and any("[providers.gcp] is not in" in x["why"] for x in a if not x["placeable"])
ok = ok and any("region \x27us-west-2\x27 is not in [providers.aws] regions" in x["why"] for x in a if not x["placeable"])
sys.exit(0 if ok else 1)' "$tmp/shapes.json"
check "shapes --placeable lists only placeable shapes" bash -c "'$ISC_BIN/isc' --home '$home' shapes --gpus 8 --placeable --json | /usr/bin/python3 -c 'import json,sys; a=json.load(sys.stdin); sys.exit(0 if a and all(x[\"placeable\"] for x in a) else 1)'"
check "shapes table marks an unplaceable shape" bash -c "'$ISC_BIN/isc' --home '$home' shapes --gpus 8 2>/dev/null | grep -q 'no: \[providers.gcp\] is not in'"
check "shapes --limit applies after placeable-first" bash -c "'$ISC_BIN/isc' --home '$home' shapes --gpus 8 --limit 3 2>/dev/null | grep -c ' yes\$' | grep -qx 3"
write_launch "$tmp/region.isc" '"aws-eu-west-1-p4d.24xlarge-spot"'
expect_stderr "cannot be placed by this broker: region 'eu-west-1' is not in [providers.aws] regions" \
	"$ISC_BIN/isc" --home "$home" burst "$tmp/region.isc"
check "burst: refusals created nothing" test "$(isc experiments --json)" = "[]"
# With credentials the valid id goes ahead, the typo is skipped, and the timeline says so.
out=$(env AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x "$ISC_BIN/isc" --home "$home" burst "$tmp/typo.isc" 2>"$tmp/err")
rc=$?
check "burst with one valid id goes ahead" test "$rc" -eq 0
check "burst prints the warning" grep -qF 'warning: burst_shape_priority_list[0]: no shape "aws-us-east-1-p4d.24xlarg-spot"' "$tmp/err"
id=$(tail -n 1 <<<"$out")
check "the spec keeps only the valid id" bash -c "'$ISC_BIN/isc' --home '$home' experiments --json | grep -q '\"id\": \"$id\"'"
check "the timeline names the skipped id" bash -c "'$ISC_BIN/isc' --home '$home' status $id | grep -F 'priority' | grep -qF 'aws-us-east-1-p4d.24xlarg-spot'"
check "no fallback: the list holds just the valid id" bash -c "sqlite3 '$home/isc.db' \"SELECT spec_json FROM experiments WHERE id = '$id'\" | grep -qF '\"burst_shape_priority_list\":[\"aws-us-east-1-p4d.24xlarge-ondemand\"]'"

# ---- on the sandbox: nothing waits in silence, every rank's outcome counts ----
sb=$tmp/sb
# The sandbox's stop also stops the iscd whose pid is in $sb/iscd.pid.
api_stop # the API-only iscd of the store above; the sandbox has its own
trap 'tests/mocks/sandbox stop "$sb" >/dev/null 2>&1; [ "${KEEP:-0}" = 1 ] || rm -rf "$tmp"' EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 tests/mocks/sandbox start --no-iscd "$sb" >/dev/null || { echo "sandbox did not start" >&2; finish firsthour; exit 1; }
(
	. "$sb/env"
	sisc() { "$ISC_BIN/isc" "$@"; }
	cat >"$tmp/quick.isc" <<'LAUNCH'
isc_project_id = "demo"
experiment_name = "quick"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "rank $RANK"; sleep 1'
LAUNCH

	# No iscd: --wait and --follow say so within 2 s, how to start it, exit 1 (isc is iscd's
	# client: it finds nobody on the API socket).
	start=$(date +%s%N)
	sisc burst "$tmp/quick.isc" --wait >"$tmp/out" 2>"$tmp/err"
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	check "burst --wait without iscd exits 1" test "$rc" = 1
	check "burst --wait without iscd answers within 2 s (took ${ms} ms; a loaded sanitizer build starts slowly)" test "$ms" -lt 3000
	check "burst --wait says iscd is not running" grep -qF "iscd is not running" "$tmp/err"
	check "... and how to start it" grep -qF "start it with: iscd --home $ISC_HOME &" "$tmp/err"
	start=$(date +%s%N)
	sisc logs exp_0123456789abcdef --follow >/dev/null 2>"$tmp/err"
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	check "logs --follow without iscd exits 1" test "$rc" = 1
	check "logs --follow without iscd answers within 2 s (took ${ms} ms)" test "$ms" -lt 3000
	check "logs --follow says how to start iscd" grep -qF "start it with: iscd --home $ISC_HOME &" "$tmp/err"
	# --wait-for-daemon keeps waiting, says so, and goes on once iscd is there.
	sisc burst "$tmp/quick.isc" --wait-for-daemon >"$tmp/wfd.out" 2>"$tmp/wfd.err" &
	waiter=$!
	sleep 3
	check "--wait-for-daemon is still waiting" kill -0 "$waiter"
	check "--wait-for-daemon says it waits" grep -qF "waiting for it (--wait-for-daemon); start it with: iscd --home $ISC_HOME &" "$tmp/wfd.err"
	"$ISC_BIN/iscd" 2>"$sb/iscd.log" &
	echo $! >"$sb/iscd.pid"
	wait "$waiter"
	check "--wait-for-daemon ends 0 once iscd ran it" test $? = 0
	check "--wait-for-daemon saw it complete" grep -q ': completed' "$tmp/wfd.out"
	check "the refused --wait recorded nothing (one experiment)" test "$(sisc experiments --json | grep -c '"id": "exp_')" = 1

	# Rank 1 exits 3, rank 0 exits 0: the experiment failed, naming rank 1 and its code.
	cat >"$tmp/rank1.isc" <<'LAUNCH'
isc_project_id = "demo"
experiment_name = "rank1-fails"
gpus = 2
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "rank $RANK"; mkdir -p /mnt/checkpoints; echo $RANK > /mnt/checkpoints/who; if [ "$RANK" = 1 ]; then exit 3; fi; sleep 2; exit 0'
LAUNCH
	sisc burst "$tmp/rank1.isc" --wait >"$tmp/out" 2>&1
	check "a failed rank 1 fails the burst (exit 1)" test $? = 1
	id=$(grep -Eo 'exp_[0-9a-f]{16}' "$tmp/out" | head -1)
	check "--wait ends with the failed rank" grep -q "$id: failed: rank 1 exited with code 3" "$tmp/out"
	sisc status "$id" >"$tmp/status"
	check "status: failed, reason names rank 1 and code 3" grep -q "Status:   failed: rank 1 exited with code 3" "$tmp/status"
	check "status lists rank 1's exit code" grep -Eq "rank 1 +exit 3 +<- first to fail" "$tmp/status"
	check "status lists rank 0" grep -Eq "rank 0 " "$tmp/status"
	check "status --json carries the ranks" bash -c "'$ISC_BIN/isc' status $id --json | /usr/bin/python3 -c '
import json, sys
o = json.load(sys.stdin)
r = {x[\"rank\"]: x[\"exit_code\"] for x in o[\"ranks\"]}
sys.exit(0 if o[\"status\"] == \"failed\" and r.get(1) == 3 and \"rank 1 exited with code 3\" in o[\"status_reason\"] else 1)'"
	check "the others were stopped and artifacts brought home" grep -q "artifacts .*brought home from rank 0" "$tmp/status"
	check "artifacts came home under the Output Path" test -s "$ISC_HOME/experiments/$id/checkpoints/who"
	check "status says the Output Path holds them" grep -qF "Output:   $ISC_HOME/experiments/$id (rank_N.txt; checkpoints, crud, lossy from rank 0)" "$tmp/status"
	check "status --json has artifacts_path" bash -c "'$ISC_BIN/isc' status $id --json | grep -qF '\"artifacts_path\": \"$ISC_HOME/experiments/$id\"'"

	# A blocked experiment: its reason once per change, what unblocks it, shown at the top.
	# A project of its own: no earlier charge arrives meanwhile to change the reason.
	sisc org add lab >/dev/null && sisc project add --org lab blocked >/dev/null
	sisc credits grant --org lab 100 >/dev/null
	sisc project budget --org lab --project blocked 0 >/dev/null
	sed 's/^isc_project_id = .*/isc_project_id = "blocked"/' "$tmp/quick.isc" >"$tmp/blocked.isc"
	id=$(sisc burst "$tmp/blocked.isc" | tail -n 1)
	for _ in $(seq 1 50); do sisc status "$id" --json | grep -q '"status": "waiting"' && break; sleep 0.2; done
	sisc status "$id" >"$tmp/s1"
	check "blocked: status line says why and what unblocks it" grep -q "Status:   waiting: credits: project blocked has \$0.00 of its \$0.00 budget left; the cluster needs .* a budget of \$[0-9.]* or more unblocks it (isc project budget --org lab --project blocked [0-9.]*)" "$tmp/s1"
	timeout 3 "$ISC_BIN/isc" logs "$id" --follow >/dev/null 2>"$tmp/err"
	check "--follow of a blocked experiment says what it waits for" grep -q "rank 0 of $id has no output yet: the experiment is waiting: credits: project blocked" "$tmp/err"
	n1=$(sisc status "$id" --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["events"]))')
	sleep 5 # retry_wait_ms is 2000: two retries or more
	n2=$(sisc status "$id" --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["events"]))')
	check "blocked: retries add no events ($n1 then $n2)" test "$n1" = "$n2"
	check "blocked: one waiting event" test "$(sisc status "$id" | grep -c ' waiting ')" = 1
	sisc project budget --org lab --project blocked none >/dev/null
	for _ in $(seq 1 100); do sisc status "$id" --json | grep -q '"status": "completed"' && break; sleep 0.2; done
	check "unblocked, it runs to the end" bash -c "'$ISC_BIN/isc' status $id --json | grep -q '\"status\": \"completed\"'"

	# iscd going away during a --wait is said within about 2 s.
	cat >"$tmp/long.isc" <<'LAUNCH'
isc_project_id = "demo"
experiment_name = "long"
gpus = 1
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'sleep 60'
LAUNCH
	sisc burst "$tmp/long.isc" --wait >"$tmp/out" 2>"$tmp/err" &
	waiter=$!
	for _ in $(seq 1 100); do grep -q ' running ' "$tmp/out" && break; sleep 0.2; done
	kill -TERM "$(cat "$sb/iscd.pid")"
	for _ in $(seq 1 300); do kill -0 "$(cat "$sb/iscd.pid")" 2>/dev/null || break; sleep 0.05; done
	start=$(date +%s%N) # from the moment iscd is gone
	wait "$waiter"
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	check "--wait exits 1 when iscd stops" test "$rc" = 1
	check "... within about 2 s of iscd's exit (took ${ms} ms)" test "$ms" -lt 3500
	check "... saying so" grep -qF "iscd is not running" "$tmp/err"
	"$ISC_BIN/iscd" 2>>"$sb/iscd.log" &
	echo $! >"$sb/iscd.pid"
	id=$(grep -Eo 'exp_[0-9a-f]{16}' "$tmp/out" | head -1)
	sisc cancel "$id" >/dev/null
	for _ in $(seq 1 150); do sisc status "$id" --json | grep -q '"status": "cancelled"' && break; sleep 0.2; done
	check "the new iscd cancels it" bash -c "'$ISC_BIN/isc' status $id --json | grep -q '\"status\": \"cancelled\"'"
	kill -TERM "$(cat "$sb/iscd.pid")"
	for _ in $(seq 1 100); do kill -0 "$(cat "$sb/iscd.pid")" 2>/dev/null || break; sleep 0.1; done
	check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$sb/iscd.log'"
	echo "passed=$passed failed=$failed" >"$tmp/sub.counts"
)
. "$tmp/sub.counts" 2>/dev/null || failed=$((failed + 1))

finish firsthour
