#!/usr/bin/env bash
# The README runs as written: the indented block of its "Using it" section, command by
# command, against the sandbox (tests/mocks/sandbox), with the section's launch file as
# train.isc and iscd started as the README starts it. `ID` in a command is the
# experiment id the last command printed. Each command must exit 0. As root the run
# happens in a network namespace of its own with only loopback (unshare -n), so no
# command of the README can reach anything else (it names gpu-7.lab).
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)

if [ "${README_NETNS:-0}" != 1 ] && [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
	exec unshare -n env README_NETNS=1 bash -c 'ip link set lo up && exec "$0"' "$0"
fi

dir=$(mktemp -d /tmp/isc-readme.XXXXXX)
iscd_pid=
cleanup() {
	[ -n "$iscd_pid" ] && kill -TERM "$iscd_pid" 2>/dev/null && wait "$iscd_pid" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir/sb" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start --no-iscd "$dir/sb" >/dev/null || exit 1
. "$dir/sb/env"
export PATH="$ISC_BIN:$PATH"
mkdir -p "$dir/work" && cd "$dir/work" || exit 1

# The section's indented block (commands) and its toml block (the launch file).
/usr/bin/python3 - "$repo/README.md" "$dir/commands" "$dir/work/train.isc" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
sec = text.split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]
lines, block, started = [], [], False
for line in sec.split("\n"):
    if line.startswith("    "):
        started = True
        block.append(line[4:])
    elif started and line.strip():
        break
for line in block:
    if line.lstrip().startswith("#") or not line.strip():
        continue
    lines.append(re.split(r"\s{2,}#\s|\s+#\s(?=[a-z(])", line, maxsplit=1)[0].rstrip())
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
toml = re.search(r"```toml\n(.*?)```", sec, re.S)
open(sys.argv[3], "w").write(toml.group(1))
PY
check "README has a command block" test -s "$dir/commands"
check "README has a launch file" grep -q '^isc_project_id' "$dir/work/train.isc"

id=
n=0
while IFS= read -r cmd; do
	n=$((n + 1))
	line=${cmd//ID/$id}
	if [[ $line == *"&" ]]; then
		# A background daemon, as the README starts it.
		bash -c "exec ${line%&}" >"$dir/bg.$n.log" 2>&1 &
		iscd_pid=$!
		check "README: $cmd (still running)" bash -c "sleep 1; kill -0 $iscd_pid"
		continue
	fi
	out=$(timeout 300 bash -c "$line" 2>"$dir/err.$n")
	rc=$?
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: README: $line: exit $rc" >&2
		sed 's/^/  stdout: /' <<<"$out" | tail -20 >&2
		sed 's/^/  stderr: /' "$dir/err.$n" | tail -20 >&2
	fi
	echo "$out" >"$dir/out.$n"
	new=$(grep -Eo 'exp_[0-9a-f]{16}' <<<"$out" | tail -n 1)
	[ -n "$new" ] && id=$new
done <"$dir/commands"

# What the commands above promise, read back.
check "README: the burst --wait saw it complete" bash -c "grep -qE '^exp_[0-9a-f]{16}: completed: all 2 ranks exited with code 0' $dir/out.*"
check "README: the status shows each rank's exit" bash -c "grep -qE '^ +rank 1 +exit 0' $dir/out.*"
check "README: iscd is still alive" kill -0 "$iscd_pid"
check "README: the cancelled burst ends cancelled" bash -c "for i in \$(seq 1 150); do isc status $id --json | grep -q '\"status\": \"cancelled\"' && exit 0; sleep 0.2; done; exit 1"
check "README: iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' $dir/bg.*.log"
finish readme
