#!/usr/bin/env bash
# The tables of isc keep their columns aligned whatever the length of what they
# show: experiments with the longest names a launch file allows (128 bytes), a
# project name of the longest allowed (64), output paths under a deep home, and
# the shapes table. A table is aligned when its columns are separated, in every
# row, by the same gutters (runs of at least two spaces at the same positions):
# one gutter between each pair of the header's columns.
. "$(dirname "$0")/lib.sh"

root=$(mktemp -d /tmp/isc-tables.XXXXXX)
# As deep as the API socket's path allows (a Unix socket path is at most 107 bytes).
home=$root/$(printf 'h%.0s' $(seq 1 48))/home
mkdir -p "$(dirname "$home")"
trap 'iscd_api_stop; rm -rf "$root"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

expect_exit 0 "init in a deep home" isc init
iscd_api "$home" "$root/iscd.log"
long_project=$(printf 'p%.0s' $(seq 1 64))
expect_exit 0 "org add" isc org add acme
expect_exit 0 "a project with a 64-character name" isc project add --org acme "$long_project"
long_name=$(printf 'n%.0s' $(seq 1 128))
for name in "$long_name" short "mid-length-name"; do
	cat >"$root/$name.isc" <<ISC
isc_project_id = "$long_project"
experiment_name = "$name"
gpus = 8
command = "python train.py"
compute_mode = "cycle"
ISC
	expect_exit 0 "train $name" isc train "$root/$name.isc"
done

isc experiments >"$root/experiments.txt" 2>&1
check "experiments lists the 128-character name whole" grep -q "$long_name" "$root/experiments.txt"
check "experiments: an output path of over 100 characters is shown" \
	grep -Eq "$home/[^ ]{10,}" "$root/experiments.txt"
check "experiments table aligned with long names and paths" table_aligned "$root/experiments.txt"

isc shapes --gpus 16 --limit 12 >"$root/shapes.txt" 2>/dev/null
check "shapes table aligned" table_aligned "$root/shapes.txt"
check "shapes: node and cluster prices all with six decimals" bash -c \
	"tail -n +2 '$root/shapes.txt' | awk '{print \$6; print \$7}' | grep -Evx '[0-9]+\\.[0-9]{6}' | wc -l | grep -qx 0"

isc credits grant --org acme 1234.5 >/dev/null 2>&1
isc credits show >"$root/credits.txt" 2>&1
check "credits: money with two decimals" grep -q '1234\.50' "$root/credits.txt"

finish tables
