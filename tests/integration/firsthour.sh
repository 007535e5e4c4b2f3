#!/usr/bin/env bash
# A new user's first hour (issue 24), each reproduction as a check: a typo in the
# priority list is named where it is written and never buys another cluster; a
# mistyped command or option gets a did-you-mean; --version names the commit;
# empty results say so; `isc check` says where it looked for credentials.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d /tmp/isc-firsthour.XXXXXX)
home=$tmp/home
trap 'rm -rf "$tmp"' EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }

# ---- small things ----
out=$(isc --version)
check "--version prints version and commit" grep -Eq '^isc [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)$' <<<"$out"
if git rev-parse HEAD >/dev/null 2>&1; then
	check "--version's commit is this tree's" grep -q "$(git rev-parse --short=12 HEAD)" <<<"$out"
fi
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
expect_stderr "no experiments yet" isc experiments
expect_exit 0 "empty experiments is not a failure" isc experiments
expect_stderr "no charges match" isc spend --by experiment
expect_exit 0 "empty spend is not a failure" isc spend --by experiment
check "spend by experiment has ID and name columns" bash -c "'$ISC_BIN/isc' --home '$home' spend --by experiment 2>/dev/null | head -1 | grep -Eq '^ID +EXPERIMENT +AMOUNT'"
expect_stderr "no shape matches" isc shapes --gpu-type nosuchgpu

# isc check without credentials names every place it looked.
noenv() { env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_PROFILE -u AWS_SHARED_CREDENTIALS_FILE \
	-u GOOGLE_APPLICATION_CREDENTIALS -u OCI_CLI_CONFIG_FILE -u OCI_CLI_USER HOME="$tmp/nohome" "$@"; }
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
expect_exit 0 "validate: a typo is a warning, the file is valid" isc validate "$tmp/typo.isc"
expect_stderr "$tmp/typo.isc:5:30: warning: burst_shape_priority_list[0]: no shape \"aws-us-east-1-p4d.24xlarg-spot\"; did you mean \"aws-us-east-1-p4d.24xlarge-spot\"?" \
	isc validate "$tmp/typo.isc"
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
write_launch "$tmp/region.isc" '"aws-eu-west-1-p4d.24xlarge-spot"'
expect_stderr "cannot be placed by this broker: region 'eu-west-1' is not in [providers.aws] regions" \
	env AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x "$ISC_BIN/isc" --home "$home" burst "$tmp/region.isc"
expect_stderr "cannot be placed by this broker: no AWS credentials: looked in" noenv "$ISC_BIN/isc" --home "$home" burst "$tmp/typo.isc"
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

finish firsthour
