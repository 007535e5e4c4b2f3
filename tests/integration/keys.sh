#!/usr/bin/env bash
# Bring-your-own cloud keys against the mock cloud with two more AWS accounts:
# isc keys add (environment, credentials-file profile, GCP key file, OCI config with
# an encrypted API key), refused keys leave nothing behind, list/verify, organisation
# A's bursts run in A's account while B's run in the platform's, billing byo, a key
# the cloud disables stops new launches, remove refused while a cluster lives and
# --force drains it, a wrong master key refused at iscd's start, a row moved to
# another organisation does not decrypt, rotate-master, and no secret in the store,
# its WAL, logs, outputs or any process's argv.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/isc-keys.XXXXXX)
iscd_pid=
cleanup() {
	[ -n "$iscd_pid" ] && kill "$iscd_pid" 2>/dev/null && wait "$iscd_pid" 2>/dev/null
	"$repo/tests/mocks/sandbox" stop "$dir/sb" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

# Two organisations' own AWS accounts in the mock; the secrets travel in the environment.
secret_a="orgA-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)"
secret_c="orgC-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)"
akid_a=AKIDORGAKEY00000001
akid_c=AKIDORGCKEY00000001
# What must never appear in the store, logs, outputs or argv, as grep patterns in a 0600
# file (so the test itself never puts a secret on a command line).
pat=$dir/secrets.pat
(umask 077; printf '%s\n%s\n' "$secret_a" "$secret_c" >"$pat")
export MOCKCLOUD_AWS_EXTRA_ACCOUNTS="111122223333:$akid_a:$secret_a:acme-admin,444455556666:$akid_c:$secret_c:initech-ops"
ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir/sb" >/dev/null || exit 1
unset MOCKCLOUD_AWS_EXTRA_ACCOUNTS
. "$dir/sb/env"
export ISC_MASTER_KEY_FILE="$dir/master.key"
isc() { "$ISC_BIN/isc" "$@"; }
mock() { curl -s "$MOCKCLOUD_URL/_mock/$1" "${@:2}"; }
db=$ISC_HOME/isc.db
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# Every command is a client of iscd's API: iscd runs (and ticks) from here on.
start_iscd() {
	setpriv --pdeathsig TERM "$ISC_BIN/iscd" "$@" 2>>"$dir/iscd.log" &
	iscd_pid=$!
	iscd_wait_socket "$ISC_HOME/run/api.sock"
}
start_iscd
isc org add acme >/dev/null && isc project add --org acme vision >/dev/null
isc org add initech >/dev/null && isc project add --org initech tps >/dev/null

# 1. A key the cloud refuses: the cloud's reason, exit 1, nothing written, no master key made.
out=$(AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=wrong-secret-0123456789 \
	isc keys add --org acme aws --from-env 2>&1)
rc=$?
check "refused key exits 1" test "$rc" -eq 1
check "refused key names the cloud's reason" grep -q "SignatureDoesNotMatch" <<<"$out"
check "refused key: nothing stored" test "$(isc keys list --json | json_field '.__len__()')" = 0
check "refused key: no master key made" test ! -e "$ISC_MASTER_KEY_FILE"
out=$(AWS_ACCESS_KEY_ID=AKIDUNKNOWN000000001 AWS_SECRET_ACCESS_KEY=$secret_a \
	isc keys add --org acme aws --from-env 2>&1)
check "unknown key id refused (InvalidClientTokenId)" grep -q "InvalidClientTokenId" <<<"$out"
no_secret() { ! grep -aqF -f "$pat" "$@"; }
check "refusal does not echo the secret" no_secret <<<"$out"
out=$(AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=$secret_a \
	isc keys add --org acme --name 'two words' aws --from-env 2>&1)
rc=$?
check "a key name with a space is refused before the cloud is asked (exit 1, names --name)" \
	test "$rc" -eq 1 -a -n "$(grep -- '--name: not a valid key name' <<<"$out")"
check "refused name: nothing stored" test "$(isc keys list --json | json_field '.__len__()')" = 0

# 2. Usage: no secret options exist; wrong combinations are refused.
expect_exit 2 "add without --org" isc keys add aws --from-env
expect_stderr "--from-env or --profile" isc keys add --org acme aws
expect_stderr "--file F" isc keys add --org acme gcp --from-env
expect_stderr "--config F --profile P" isc keys add --org acme oci --profile DEFAULT
expect_exit 2 "a secret option does not exist" isc keys add --org acme aws --secret-access-key x
AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=$secret_a expect_stderr "no organisation" isc keys add --org nobody aws --from-env

# 3. Organisation A's key from the environment; C's from a credentials-file profile.
out=$(AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=$secret_a isc keys add --org acme \
	--regions us-east-1,us-west-2 aws --from-env)
check "add prints the proved account" grep -q "aws account 111122223333, principal arn:aws:iam::111122223333:user/acme-admin" <<<"$out"
key_a=$(grep -Eo 'key_[0-9a-f]{16}' <<<"$out")
check "master key made 0600 outside the store" test "$(stat -c %a "$ISC_MASTER_KEY_FILE")" = 600
cat >"$dir/credentials" <<CRED
[default]
aws_access_key_id = AKIDNOTTHISONE000001
aws_secret_access_key = not-this-one

[initech]
aws_access_key_id = $akid_c
aws_secret_access_key = $secret_c
CRED
chmod 600 "$dir/credentials"
out=$(isc keys add --org initech --name initech-main aws --profile initech --file "$dir/credentials")
check "profile key proves its own account" grep -q "aws account 444455556666" <<<"$out"
key_c=$(grep -Eo 'key_[0-9a-f]{16}' <<<"$out")
expect_stderr "profile 'missing' not found" isc keys add --org initech aws --profile missing --file "$dir/credentials"
expect_stderr "already has a aws key named 'initech-main'" \
	isc keys add --org initech --name initech-main aws --profile initech --file "$dir/credentials"

# 4. GCP from the mock's service-account file, OCI from a config whose key is encrypted.
out=$(isc keys add --org initech gcp --file "$dir/sb/mock/gcp-service-account.json" 2>&1)
check "gcp key: project and service account" grep -q "gcp account isc-mock-project, principal isc-broker@isc-mock-project.iam.gserviceaccount.com" <<<"$out"
key_gcp=$(grep -Eo 'key_[0-9a-f]{16}' <<<"$out")
/usr/bin/python3 - "$dir/sb/mock/oci/oci_api_key.pem" "$dir/oci_enc.pem" <<'PY'
import sys
from cryptography.hazmat.primitives import serialization
key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
open(sys.argv[2], "wb").write(key.private_bytes(serialization.Encoding.PEM,
    serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"oci-pass-phrase-7")))
PY
chmod 600 "$dir/oci_enc.pem"
sed -e "s|^key_file=.*|key_file=$dir/oci_enc.pem|" "$dir/sb/mock/oci/config" >"$dir/oci_config"
printf '\n[INITECH]\npass_phrase=oci-pass-phrase-7\n' >>"$dir/oci_config"
sed -i "s|^\[DEFAULT\]|[DEFAULT]|" "$dir/oci_config"
out=$(isc keys add --org initech oci --config "$dir/oci_config" --profile INITECH 2>&1)
check "oci key (encrypted API key, pass_phrase): tenancy" grep -q "oci account ocid1.tenancy.oc1..aaaaaaaamocktenancy" <<<"$out"
key_oci=$(grep -Eo 'key_[0-9a-f]{16}' <<<"$out")
sed -i 's/^pass_phrase=.*/pass_phrase=wrong-phrase/' "$dir/oci_config"
expect_exit 1 "oci key with a wrong pass phrase" isc keys add --org acme oci --config "$dir/oci_config" --profile INITECH

# 5. list: who, what, where, never a secret.
list=$(isc keys list)
check "list names A's key, account and principal" grep -qE "^$key_a +acme +aws +111122223333 +arn:aws:iam::111122223333:user/acme-admin +us-east-1,us-west-2 +active +operator " <<<"$list"
check "list shows a short fingerprint" grep -qE "$key_a .* sha256:[0-9a-f]{12}$" <<<"$list"
check "list --org shows only that org" test "$(isc keys list --org acme --json | json_field '.__len__()')" = 1
check "list --json has verified_at_ms" test "$(isc keys list --org acme --json | json_field '[0]["verified_at_ms"] > 0')" = True
out=$(isc keys verify "$key_oci")
check "verify re-checks the oci key" grep -q "verified: account ocid1.tenancy" <<<"$out"
expect_exit 1 "verify an unknown key" isc keys verify key_0000000000000000

# 5b. Roles (through the API, as OS users known to iscd by their peer credentials): an
# org's admin adds, lists, verifies and removes its keys; a member or finance gets 403;
# another org's admin gets 404 for the key, as if it did not exist; the master key is
# the operator's.
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null && command -v runuser >/dev/null; then
	tag=k$(($$ % 100000))
	declare -A os=([aa]=$tag-aa [am]=$tag-am [af]=$tag-af [ca]=$tag-ca)
	created=()
	for r in aa am af ca; do
		useradd -M -N -d /nonexistent -s /usr/sbin/nologin "${os[$r]}" && created+=("${os[$r]}")
		isc user add "${os[$r]}" >/dev/null
	done
	trap 'for u in "${created[@]}"; do userdel "$u" 2>/dev/null; done; cleanup' EXIT
	isc member add --org acme "${os[aa]}" --role admin >/dev/null
	isc member add --org acme "${os[am]}" --role member >/dev/null
	isc member add --org acme "${os[af]}" --role finance >/dev/null
	isc member add --org initech "${os[ca]}" --role admin >/dev/null
	chmod 0711 "$dir" "$dir/sb"
	as() {
		local who=${os[$1]}
		shift
		runuser -u "$who" -- env ISC_HOME="$ISC_HOME" LSAN_OPTIONS="$LSAN_OPTIONS" \
			ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$@"
	}
	# code ROLE METHOD PATH: the HTTP status iscd answers that caller.
	code() {
		as "$1" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$ISC_HOME/run/api.sock" \
			-X "$2" "http://localhost$3"
	}
	for r in am af ca; do
		out=$(as "$r" "$ISC_BIN/isc" keys list --json)
		check "$r: GET /v1/keys answers a list without acme's key" bash -c 'json=$1 key=$2; /usr/bin/python3 -c "import json,sys; sys.exit(any(k[\"id\"] == sys.argv[2] for k in json.loads(sys.argv[1])))" "$json" "$key"' _ "$out" "$key_a"
	done
	check "acme's admin lists acme's key" test "$(as aa "$ISC_BIN/isc" keys list --json | json_field '[0]["id"]')" = "$key_a"
	check "acme's admin verifies it" as aa "$ISC_BIN/isc" keys verify "$key_a"
	check "member: GET key 403" test "$(code am GET "/v1/keys/$key_a")" = 403
	check "finance: verify 403" test "$(code af POST "/v1/keys/$key_a/verify")" = 403
	check "initech's admin: GET acme's key 404" test "$(code ca GET "/v1/keys/$key_a")" = 404
	check "initech's admin: verify acme's key 404" test "$(code ca POST "/v1/keys/$key_a/verify")" = 404
	check "initech's admin: remove acme's key 404" test "$(code ca DELETE "/v1/keys/$key_a?force=1")" = 404
	check "a missing key is the same 404" test "$(code ca GET /v1/keys/key_00000000000000ff)" = 404
	check "admin: rotate-master is the operator's (403)" test "$(code aa POST /v1/keys/rotate-master)" = 403
	out=$(AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=$secret_a as am "$ISC_BIN/isc" keys add --org acme --name by-member aws --from-env 2>&1)
	check "a member cannot add a key (403)" grep -q "does not allow this" <<<"$out"
	out=$(AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=$secret_a as ca "$ISC_BIN/isc" keys add --org acme --name by-other aws --from-env 2>&1)
	check "another org's admin cannot add to acme (404)" grep -q "no organisation named 'acme'" <<<"$out"
	check "nothing was added by them" test "$(isc keys list --org acme --json | json_field '.__len__()')" = 1
	check "the audit names the refused attempts" bash -c "'$ISC_BIN/isc' audit --org acme --json | grep -q '/v1/keys'"
else
	echo "keys: role checks skipped: needs root, useradd and runuser to create OS users"
fi

# 6. Bursts: A (no credits at all) on its own key, demo on the platform's account.
cat >"$dir/a.isc" <<'ISC'
isc_project_id = "vision"
experiment_name = "acme-two"
gpus = 2
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = 'echo "RANK=$RANK"; sleep 1'
ISC
sed -e 's/acme-two/acme-long/' -e 's/sleep 1/sleep 120/' "$dir/a.isc" >"$dir/a-long.isc"
wait_status() {
	local id=$1 want=$2 secs=$3 s
	for _ in $(seq 1 $((secs * 5))); do
		s=$(isc status "$id" --json | json_field '["status"]')
		[ "$s" = "$want" ] && return 0
		sleep 0.2
	done
	echo "experiment $id is '$s', wanted '$want'" >&2
	isc status "$id" >&2
	return 1
}
submit() { isc burst "$1" | grep -Eo 'exp_[0-9a-f]{16}'; }
accounts_of() {
	mock instances | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted({r.get("account", r.get("provider")) for r in json.load(sys.stdin) if (r.get("tags") or {}).get("isc:experiment") == sys.argv[1]})))' "$1"
}
ida=$(submit "$dir/a.isc")
idb=$(submit "$repo/tests/integration/launch/two-node.isc")
check "A's burst completes without credits" wait_status "$ida" completed 60
check "demo's burst completes" wait_status "$idb" completed 60
check "A's nodes ran in A's account only" test "$(accounts_of "$ida")" = 111122223333
check "demo's nodes ran in the platform account only" test "$(accounts_of "$idb")" = 123456789012
check "A's timeline names its key and account" bash -c "'$ISC_BIN/isc' status '$ida' | grep -q \"on the organisation's key $key_a (account 111122223333)\""
check "the cluster record names the key" test "$(sqlite3 "$db" "SELECT account FROM clusters WHERE experiment_id = '$ida'")" = "$key_a"
check "initech's account was never called" test "$(mock calls | json_field '["by_account"].get("444455556666", {}).get("RunInstances", 0)')" = 0
byo=$(isc spend --billing byo --by project --format csv)
check "spend --billing byo: acme's project only" bash -c "grep -q '^vision,' <<<'$byo' && ! grep -q '^demo,' <<<'$byo'"
all=$(isc spend --billing all --by project --format csv)
check "spend --billing all: both" bash -c "grep -q '^vision,' <<<'$all' && grep -q '^demo,' <<<'$all'"
check "acme was never charged credits" test "$(isc credits show --org acme --json | json_field '["orgs"][0]["balance_micros"]')" = 0

# GCP: initech (no credits either) bursts on its own service account.
cat >"$dir/c.isc" <<'ISC'
isc_project_id = "tps"
experiment_name = "initech-gcp"
gpus = 1
compute_mode = "burst"
burst_shape_priority_list = ["gcp-us-central1-g2-standard-4-spot"]
command = 'echo "RANK=$RANK"'
ISC
idc=$(submit "$dir/c.isc")
check "initech's GCP burst completes without credits" wait_status "$idc" completed 90
check "its cluster ran on initech's GCP key" test "$(sqlite3 "$db" "SELECT account FROM clusters WHERE experiment_id = '$idc'")" = "$key_gcp"

# 7. The cloud disables A's key: no new launch on it, with an event saying so.
mock faults -X POST -H 'Content-Type: application/json' -d '{"kind":"key_disabled","account":"111122223333","action":"RunInstances","count":1}' >/dev/null
idf=$(submit "$dir/a.isc")
for _ in $(seq 1 100); do
	isc status "$idf" | grep -q key_failing && break
	sleep 0.2
done
check "a refused launch marks the key failing (event)" bash -c "'$ISC_BIN/isc' status '$idf' | grep -q 'cloud key $key_a (account 111122223333) refused'"
check "the key is listed as failing" test "$(isc keys list --org acme --json | json_field '[0]["state"]')" = failing
check "no node of the refused launch ran anywhere" test -z "$(accounts_of "$idf")"
isc cancel "$idf" >/dev/null
check "verify makes it active again" isc keys verify "$key_a"
check "active again in the list" test "$(isc keys list --org acme --json | json_field '[0]["state"]')" = active

# 7b. Reconciliation covers A's account too: an instance with this broker's tag that no
#     cluster owns, made with A's key behind the broker's back, is terminated.
broker_id=$(sed -nE 's/^broker_id = "(.*)"/\1/p' "$ISC_HOME/config.toml")
stray=$(AWS_ACCESS_KEY_ID=$akid_a AWS_SECRET_ACCESS_KEY=$secret_a /usr/bin/python3 - "$broker_id" <<'PY'
import os, sys, botocore.session
s = botocore.session.get_session()
ec2 = s.create_client("ec2", region_name="us-west-2", endpoint_url=os.environ["MOCKCLOUD_URL"],
                      aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
r = ec2.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1,
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [
                          {"Key": "isc:broker", "Value": sys.argv[1]},
                          {"Key": "isc:cluster", "Value": "cl_nobody"}]}])
print(r["Instances"][0]["InstanceId"])
PY
)
stray_gone() {
	mock instances | /usr/bin/python3 -c '
import json, sys
sys.exit(0 if any(r["id"] == sys.argv[1] and r.get("account") == "111122223333" and
                  r["state"] in ("shutting-down", "terminated") for r in json.load(sys.stdin)) else 1)' "$1"
}
wait_stray_gone() {
	for _ in $(seq 1 150); do
		stray_gone "$1" && return 0
		sleep 0.2
	done
	return 1
}
check "a stray was made in A's account" test -n "$stray"
check "reconciliation terminates the stray in A's account" wait_stray_gone "$stray"

# 8. Remove: refused while a cluster runs on the key; --force drains and terminates first.
idl=$(submit "$dir/a-long.isc")
check "A's long burst runs" wait_status "$idl" running 60
expect_stderr "has 1 live cluster(s)" isc keys remove "$key_a"
check "the refused remove left the key" test "$(isc keys list --org acme --json | json_field '.__len__()')" = 1
out=$(isc keys remove "$key_a" --force --timeout 90 2>&1)
check "remove --force removes the key" grep -q "removed $key_a" <<<"$out"
check "the experiment was cancelled" wait_status "$idl" cancelled 30
live=$(mock instances | /usr/bin/python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r.get("account") == "111122223333" and r["state"] not in ("terminated", "shutting-down")))')
check "no live instance left in A's account" test "$live" = 0
check "the key is gone" test "$(isc keys list --org acme --json | json_field '.__len__()')" = 0

# 9. No secret anywhere it should not be: store, WAL, logs, outputs, argv.
isc keys list --json >"$dir/list.json"
isc keys list >"$dir/list.txt"
printf '%s' "$secret_a" | base64 -w0 >>"$pat" && echo >>"$pat"
printf '%s' "$secret_c" | base64 -w0 >>"$pat" && echo >>"$pat"
echo oci-pass-phrase-7 >>"$pat"
sed -n 2p "$dir/sb/mock/oci/oci_api_key.pem" >>"$pat" # a line of the OCI API key
for f in "$db" "$db-wal" "$dir/iscd.log" "$dir/list.json" "$dir/list.txt" "$dir/sb/mock.log"; do
	[ -e "$f" ] || continue
	check "no secret in $(basename "$f")" no_secret "$f"
done
check "the store never held a private key" bash -c "! grep -aq 'PRIVATE KEY' '$db' '$db-wal' 2>/dev/null"
for p in /proc/[0-9]*/cmdline; do cat "$p" 2>/dev/null | tr '\0' ' '; echo; done >"$dir/argv.txt"
check "no secret in any process's argv" no_secret "$dir/argv.txt"

# 10. A record moved to another organisation does not decrypt, with a clear error.
sqlite3 "$db" "UPDATE cloud_keys SET org_id = (SELECT id FROM orgs WHERE name = 'acme') WHERE id = '$key_c'"
expect_stderr "does not decrypt" isc keys verify "$key_c"
sqlite3 "$db" "UPDATE cloud_keys SET org_id = (SELECT id FROM orgs WHERE name = 'initech') WHERE id = '$key_c'"
check "moved back, it decrypts again" isc keys verify "$key_c"

# 11. Master key: rotation re-encrypts every key; the old key is refused at iscd's start.
cp -p "$ISC_MASTER_KEY_FILE" "$dir/old.key"
# the count is every sealed record: the 3 cloud keys and the SSH keys of clusters still open
# (sealed in the store since issue 45)
n_cluster_keys=$(sqlite3 "$db" "SELECT COUNT(*) FROM cluster_ssh_keys")
out=$(isc keys rotate-master)
check "rotate-master re-encrypts the 3 keys (and $n_cluster_keys cluster key(s))" \
	grep -q "re-encrypted $((3 + n_cluster_keys)) key(s)" <<<"$out"
check "the master key changed" bash -c "! cmp -s '$ISC_MASTER_KEY_FILE' '$dir/old.key'"
check "keys verify under the new master key" isc keys verify "$key_c"
kill "$iscd_pid" && wait "$iscd_pid" 2>/dev/null
iscd_pid=
out=$(ISC_MASTER_KEY_FILE=$dir/old.key timeout 20 "$ISC_BIN/iscd" 2>&1)
rc=$?
check "iscd refuses a wrong master key at start (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "iscd says why" grep -q "does not open this store's cloud keys" <<<"$out"
chmod 644 "$dir/old.key"
expect_stderr "chmod 600" env ISC_MASTER_KEY_FILE="$dir/old.key" "$ISC_BIN/iscd" --once
expect_stderr "inside the store's folder" env ISC_MASTER_KEY_FILE="$ISC_HOME/master.key" "$ISC_BIN/iscd" --once

finish keys
