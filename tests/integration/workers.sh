#!/usr/bin/env bash
# broker_workers (docs/config.md): with more bursts due than workers, the broker steps
# broker_workers of them at a time and the rest in later ticks, in turn, so every burst
# still runs to its end. Here 2 workers carry 5 two-node bursts at once.
. "$(dirname "$0")/lib.sh"
sandbox_dir workers
launch=$repo/tests/integration/launch
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 SANDBOX_PROVIDERS=aws "$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
# A top-level key goes before the first [table] of config.toml.
printf 'broker_workers = 2\n%s\n' "$(cat "$ISC_HOME/config.toml")" >"$ISC_HOME/config.toml"
start_iscd

ids=()
for _ in 1 2 3 4 5; do ids+=("$(submit "$launch/two-node.isc")"); done
check "five bursts submitted" test "${#ids[@]}" = 5
for id in "${ids[@]}"; do
	check "$id completes with 2 workers" wait_status "$id" completed 120
	out=$(status_of "$id" output_path)
	check "$id: both ranks ran" bash -c "grep -q 'RANK=0 NNODES=2' '$out/rank_0.txt' && grep -q 'RANK=1 NNODES=2' '$out/rank_1.txt'"
done
check "nothing left running" wait_no_live
stop_iscd
# A value outside 1..1024 is refused by name, at load.
printf 'broker_workers = 0\n%s\n' "$(cat "$ISC_HOME/config.toml")" >"$dir/bad.toml"
cp "$dir/bad.toml" "$ISC_HOME/config.toml"
expect_stderr "broker_workers" "$ISC_BIN/iscd" --once
check "iscd logged no sanitizer report" no_sanitizer_report "$dir/iscd.log"
finish workers
