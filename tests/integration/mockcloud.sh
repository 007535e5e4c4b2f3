#!/usr/bin/env bash
# The mock cloud's own self-test (EC2/STS wire protocol, SigV4 checked by botocore, SSH nodes).
exec /usr/bin/python3 "$(dirname "$0")/../mocks/test-mockcloud"
