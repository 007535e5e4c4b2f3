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

# ==== end of items 1-7 ====

# ==== items 8-14 (each block sets up what it needs under $tmp/N) ====

# ==== end of items 8-14 ====

finish thirdhour
