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

# ---- 2. isc shapes names a broken config.toml, as isc burst, validate and check do ----
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

# ---- 6. isc init --home DIR, as the README writes it (and isc --home DIR init) ----
mkdir -p "$tmp/6"
expect_exit 0 "isc init --home DIR" "$ISC_BIN/isc" init --home "$tmp/6/after"
check "isc init --home DIR made the store there" test -f "$tmp/6/after/isc.db"
check "isc init --home DIR wrote config.toml there" test -f "$tmp/6/after/config.toml"
expect_exit 0 "isc init --home=DIR" "$ISC_BIN/isc" init --home="$tmp/6/eq"
check "isc init --home=DIR made the store there" test -f "$tmp/6/eq/isc.db"
expect_exit 0 "isc --home DIR init still works" "$ISC_BIN/isc" --home "$tmp/6/before" init
check "isc --home DIR init made the store there" test -f "$tmp/6/before/isc.db"
expect_stderr "--home needs a folder" "$ISC_BIN/isc" init --home

# ==== end of items 1-7 ====

# ==== items 8-14 (each block sets up what it needs under $tmp/N) ====

# ==== end of items 8-14 ====

finish thirdhour
