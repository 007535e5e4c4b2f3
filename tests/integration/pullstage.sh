#!/usr/bin/env bash
# A node in its pull stage is not dead (issue 46; docs/broker.md, "A node in its pull stage
# is not dead"; docs/launcher.md, "Boot sequence of one rank"). The launcher pulls the image
# as a command of its own, judged by its output: alive while output keeps coming
# (image_pull_stall_ms), capped in all (image_pull_max_ms); command_timeout_ms bounds only
# the rest of the boot. Real sshd nodes of the mock cloud, whose docker stand-in pulls an
# image named ...pull-progress-MS for MS printing a progress line a second, and one named
# ...pull-stall-MS for MS printing nothing (tests/mocks/node/README.md).
#   1. command_timeout_ms 5 s, a pull that progresses for 8 s: the experiment runs and
#      completes, the event "pull" says how long the pull took (before: the boot timed out
#      at 5 s and the experiment never ran).
#   2. image_pull_stall_ms 3 s, a pull silent for 8 s: the boot fails within the stall
#      bound, "docker pull IMAGE: no progress for 3 s" (before: "timed out" at 5 s).
#   3. an image that cannot be pulled still fails the experiment with
#      "docker pull IMAGE failed: ... pull access denied".
. "$(dirname "$0")/lib.sh"
sandbox_dir pullstage
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_BOOT_DELAY_MS=300 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
cp "$ISC_HOME/config.toml" "$dir/config.base"
{
	echo "command_timeout_ms = 5000"
	echo "image_pull_stall_ms = 3000"
	echo "image_pull_max_ms = 60000"
	cat "$dir/config.base"
} >"$ISC_HOME/config.toml"
# one NAME IMAGE: a 1-GPU burst on one shape that prints a line and ends.
one() {
	cat >"$dir/$1.isc" <<ISC
isc_project_id = "demo"
experiment_name = "pullstage-$1"
gpus = 1
image = "$2"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "rank \$RANK ran"'
ISC
}
start_iscd || exit 1

# ---- 1. a slow pull that progresses outlives command_timeout_ms and runs
one slow "registry.example/big:pull-progress-8000"
t0=$(date +%s)
id=$(submit "$dir/slow.isc")
check "a pull progressing for 8 s (command_timeout_ms 5 s): the experiment completes" \
	wait_status "$id" completed 60
t1=$(date +%s)
check "it took the pull's 8 s or more: $((t1 - t0)) s" test $((t1 - t0)) -ge 8
out=$(status_of "$id" output_path)
check "rank 0 ran" grep -q "rank 0 ran" "$out/rank_0.txt"
ev=$(isc status "$id" | grep -E 'pulled registry.example/big:pull-progress-8000 in [0-9.]+ s')
check "the event says how long the pull took: $ev" test -n "$ev"
# docker shows a layer's download progress only on a terminal: the launcher asks for one.
ttys=$(find "$dir/mock" -name pull-stdout -exec cat {} + 2>/dev/null | sort -u)
check "the pull ran on a terminal (the nodes' docker saw: ${ttys:-nothing})" test "$ttys" = terminal
secs=$(grep -Eo 'in [0-9.]+ s' <<<"$ev" | grep -Eo '[0-9]+' | head -1)
check "about the 8 s the node pulled: ${secs:-?} s" test "${secs:-0}" -ge 8 -a "${secs:-99}" -lt 30

# ---- 2. a pull that prints nothing stops at image_pull_stall_ms
one stall "registry.example/big:pull-stall-8000"
id2=$(submit "$dir/stall.isc")
check "the stalled pull's boot fails with the stall's message" \
	within 60 status_says "$id2" 'docker pull registry.example/big:pull-stall-8000: no progress for 3 s'
check "the stall is not the command's timeout" bash -c "! '$ISC_BIN/isc' status '$id2' | grep -q 'timed out'"

# ---- 3. a failed pull still says docker pull ... failed
one fails "registry.example/does-not-exist:1"
id3=$(submit "$dir/fails.isc")
check "an image that cannot be pulled fails the experiment" wait_status "$id3" failed 60
check "with docker pull's message" \
	status_says "$id3" 'docker pull registry.example/does-not-exist:1 failed: .*pull access denied'
stop_iscd
check "no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish pullstage
