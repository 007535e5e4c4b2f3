#!/usr/bin/env bash
# The mock node's own self-test (sshd in its own mount namespace, the docker stand-in),
# once with each docker stand-in: the C one the suites and benchmarks use, and the Python
# one (the full contract of tests/mocks/node/README.md).
here=$(dirname "$0")
out=$(mktemp /tmp/isc-node-test.XXXXXX)
trap 'rm -f "$out"' EXIT
passed=0 failed=0
for d in c python; do
	NODE_DOCKER=$d "$here/../mocks/node/test-node" | sed "s/^node: /node ($d stand-in): /" | tee "$out"
	line=$(tail -n 1 "$out")
	if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
	else
		failed=$((failed + 1))
		echo "FAIL: test-node with the $d stand-in ended without its counts"
	fi
done
echo "node: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
