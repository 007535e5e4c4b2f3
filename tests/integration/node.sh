#!/usr/bin/env bash
# The mock node's own self-test (sshd in its own mount namespace, the docker stand-in).
exec "$(dirname "$0")/../mocks/node/test-node"
