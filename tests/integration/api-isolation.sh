#!/usr/bin/env bash
# Isolation through iscd's API (docs/api.md): two organisations, a user of each
# role (member, admin, finance) in each, a platform user in none, and an OS user
# who is no platform user. Every route is tried by every caller over the Unix
# socket, as that OS user (kernel peer credentials), and each answer is checked
# exactly: 200/201, 403 (a known resource, too small a role) or 404 (another
# organisation's resource, as if it did not exist). The operator's routes (the
# catalog's changes, the on-prem pool, the broker's credentials check) answer
# 403 to every other caller. No listing (orgs, projects,
# experiments, events, logs, members, credits, spend, tokens, audit, datasets) shows
# another organisation's rows; same-named projects of two orgs are never summed.
# The experiment listing's pages cover it exactly once for every caller, and a
# cursor never shows rows of another organisation.
#
# Needs several OS users: this suite creates them with useradd (CI runs as root)
# with names unique to the run, and removes them at the end. Not root: skipped.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)

if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
	echo "api-isolation: skipped: needs root, useradd and runuser to create OS users"
	finish api-isolation
	exit 0
fi

dir=$(mktemp -d /tmp/isc-iso.XXXXXX)
chmod 0711 "$dir" # other users reach $dir/home/run/api.sock by name
home=$dir/home
tag=i$(($$ % 100000))
roles=(am aa af bm ba bf none stranger)
declare -A os
for r in "${roles[@]}"; do os[$r]=$tag-$r; done
created=()
s3_pid=
cleanup() {
	iscd_api_stop
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	for u in "${created[@]}"; do userdel "$u" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
for r in "${roles[@]}"; do
	useradd -M -N -d /nonexistent -s /usr/sbin/nologin "${os[$r]}" || { echo "useradd ${os[$r]} failed" >&2; exit 1; }
	created+=("${os[$r]}")
done

isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
# store [-r] [SQL]: store_sql (lib.sh) on this suite's home's store.
store() { ISC_HOME=$home store_sql "$@"; }
# as ROLE CMD...: runs CMD as that OS user, with the environment isc needs.
as() {
	local who=${os[$1]}
	shift
	runuser -u "$who" -- env ISC_HOME="$home" LSAN_OPTIONS="$LSAN_OPTIONS" \
		ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$@"
}
# http ROLE METHOD PATH [BODY]: the status code the API answers that caller.
http() {
	local args=(-s -o "$dir/out/$1.body" -w '%{http_code}' --unix-socket "$home/run/api.sock" -X "$2")
	[ $# -ge 4 ] && args+=(--data-binary "$4")
	if [ "$1" = operator ]; then
		curl "${args[@]}" "http://localhost$3"
	else
		as "$1" curl "${args[@]}" "http://localhost$3"
	fi
}
# expect ROLE CODE METHOD PATH [BODY]
expect() {
	local role=$1 want=$2 got
	shift 2
	got=$(http "$role" "$@")
	if [ "$got" = "$want" ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $role $1 $2: HTTP $got, wanted $want: $(head -c 300 "$dir/out/$role.body")" >&2
	fi
}
# expect_all METHOD PATH BODY CODE_am CODE_aa CODE_af CODE_bm CODE_ba CODE_bf CODE_none
expect_all() {
	local m=$1 p=$2 b=$3 i=0
	shift 3
	for r in am aa af bm ba bf none; do
		if [ -n "$b" ]; then expect "$r" "$1" "$m" "$p" "$b"; else expect "$r" "$1" "$m" "$p"; fi
		shift
	done
}
# A mock S3 for the datasets: it knows one key pair, the datasets' own keys (iscd has no
# AWS credentials of its own here).
ds_kid=AKIDISOLATION0000001
ds_secret=iso-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$dir/s3"
MOCKS3_AWS_ACCESS_KEY_ID=$ds_kid MOCKS3_AWS_SECRET_ACCESS_KEY=$ds_secret \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3/port" --state-dir "$dir/s3" 2>"$dir/s3.log" &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3/port" ] && break; sleep 0.1; done
S3="http://127.0.0.1:$(cat "$dir/s3/port")"
curl -sf -X POST "$S3/_mock/bucket" -d '{"bucket":"iso-data"}' >/dev/null
curl -sf -X POST "$S3/_mock/object" -d '{"bucket":"iso-data","key":"set.txt","text":"rows\n"}' >/dev/null
export AWS_ENDPOINT_URL_S3=$S3

# ---- the platform: operator (root, the store's owner) sets it up through the API ----
isc init >/dev/null || exit 1
iscd_api "$home" "$dir/iscd.log" --verbose || exit 1
chmod 0755 "$dir" && mkdir -m 0755 "$dir/files" && mkdir -m 1777 "$dir/out"
isc org add orga >/dev/null && isc org add orgb >/dev/null
pa=$(isc project add --org orga vision) && pb=$(isc project add --org orgb vision)
isc project add --org orga other >/dev/null
for r in am aa af bm ba bf none; do isc user add "${os[$r]}" >/dev/null; done
for o in a b; do
	isc member add --org org$o "${os[${o}m]}" --role member >/dev/null
	isc member add --org org$o "${os[${o}a]}" --role admin >/dev/null
	isc member add --org org$o "${os[${o}f]}" --role finance >/dev/null
	isc credits grant --org org$o 100 >/dev/null
done
check "the operator set up two orgs with a user of each role" test "$(isc member list --org orga --json | grep -c '"role"')" = 3

launchfile() { # launchfile NAME PROJECT-ID
	cat >"$dir/files/$1.isc" <<ISC
isc_project_id = "$2"
experiment_name = "$1"
gpus = 8
command = "python train.py"
ISC
	chmod 0644 "$dir/files/$1.isc"
}
# Each org: one experiment by its member, one by its admin (via isc, as those OS users).
for o in a b; do
	p=$([ $o = a ] && echo "$pa" || echo "$pb")
	launchfile "$o-by-member" "$p"
	launchfile "$o-by-admin" "$p"
	launchfile "$o-cancel-m" "$p"
	launchfile "$o-cancel-a" "$p"
	for f in by-member cancel-m; do
		id=$(as ${o}m "$ISC_BIN/isc" train "$dir/files/$o-$f.isc" | grep -Eo 'exp_[0-9a-f]{16}')
		eval "e_${o}_${f//-/_}=$id"
	done
	for f in by-admin cancel-a; do
		id=$(as ${o}a "$ISC_BIN/isc" train "$dir/files/$o-$f.isc" | grep -Eo 'exp_[0-9a-f]{16}')
		eval "e_${o}_${f//-/_}=$id"
	done
done
check "experiments launched as the OS users" test -n "$e_a_by_member" -a -n "$e_a_by_admin" -a -n "$e_b_by_member" -a -n "$e_b_cancel_a"
# Spend to find: one charge per org on its project 'vision' (same name in both orgs).
for o in a b; do
	p=$([ $o = a ] && echo "$pa" || echo "$pb")
	e=$(eval echo "\$e_${o}_by_member")
	amount=$([ $o = a ] && echo 1250000 || echo 7000000)
	store "INSERT INTO ledger (at_ms, org_id, project_id, experiment_id, kind, amount_micros, provider, shape_id, period_start_ms, period_end_ms, billing)
		SELECT 1717200000000, id, '$p', '$e', 'charge', $amount, 'aws', 'aws-us-east-1-g5.xlarge-spot', 1717200000000, 1717203600000, 'credits' FROM orgs WHERE name = 'org$o'" ||
		echo "could not write the spend fixture" >&2
done

# ---- who is calling ----
expect stranger 401 GET /v1/whoami
check "a stranger is told to ask the operator" grep -q "isc user add ${os[stranger]}" "$dir/out/stranger.body"
expect_all GET /v1/whoami "" 200 200 200 200 200 200 200
http am GET /v1/whoami >/dev/null
check "the socket knows the OS user: whoami names ${os[am]}, member of orga" /usr/bin/python3 -c "
import json, sys
o = json.load(open(sys.argv[1]))
sys.exit(0 if o['user'] == sys.argv[2] and not o['operator'] and o['orgs'] == [{'org': 'orga', 'role': 'member'}] else 1)" "$dir/out/am.body" "${os[am]}"

# ---- operator-only routes ----
expect_all GET /v1/users "" 403 403 403 403 403 403 403
expect_all POST /v1/users '{"name":"mallory"}' 403 403 403 403 403 403 403
expect_all POST /v1/orgs '{"name":"orgc"}' 403 403 403 403 403 403 403
expect_all POST /v1/credits/grants '{"org":"orga","amount_micros":1000000}' 403 403 403 403 403 403 403

# ---- organisations and projects ----
expect_all GET /v1/orgs "" 200 200 200 200 200 200 200
expect_all GET "/v1/projects?org=orga" "" 200 200 200 404 404 404 404
expect_all GET "/v1/projects?org=orgb" "" 404 404 404 200 200 200 404
expect_all GET "/v1/projects?org=nope" "" 404 404 404 404 404 404 404
n=0
for r in am aa af bm ba bf none; do
	n=$((n + 1))
	case $r in aa) want=201 ;; am | af) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" POST /v1/projects "{\"org\":\"orga\",\"name\":\"p$n\"}"
done
expect_all POST /v1/budgets '{"org":"orga","project":"vision","budget_micros":50000000}' 403 200 403 404 404 404 404
expect_all POST /v1/budgets '{"org":"orgb","project":"vision","budget_micros":null}' 404 404 404 403 200 403 404

# ---- members ----
expect_all GET "/v1/members?org=orga" "" 403 200 403 404 404 404 404
expect_all GET "/v1/members?org=orgb" "" 404 404 404 403 200 403 404
expect_all POST /v1/members "{\"org\":\"orga\",\"user\":\"${os[am]}\",\"role\":\"member\"}" 403 200 403 404 404 404 404
expect_all POST /v1/members "{\"org\":\"orgb\",\"user\":\"${os[bm]}\",\"role\":\"member\"}" 404 404 404 403 200 403 404
# Removal: 'none' joins orga (by the operator); only orga's admin may remove them.
isc member add --org orga "${os[none]}" --role member >/dev/null
for r in am af bm ba bf; do
	case $r in am | af) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" DELETE "/v1/members?org=orga&user=${os[none]}"
done
expect aa 200 DELETE "/v1/members?org=orga&user=${os[none]}"
expect none 404 DELETE "/v1/members?org=orga&user=${os[am]}"

# ---- experiments ----
expect_all POST "/v1/experiments?file=a.isc" "$(cat "$dir/files/a-by-member.isc")" 201 201 403 404 404 404 404
expect_all POST "/v1/experiments?file=b.isc" "$(cat "$dir/files/b-by-member.isc")" 404 404 404 201 201 403 404
for sub in "" /events "/logs?rank=0" "/logs?rank=0&tail=100"; do
	expect_all GET "/v1/experiments/$e_a_by_member$sub" "" 200 200 403 404 404 404 404
	expect_all GET "/v1/experiments/$e_a_by_admin$sub" "" 403 200 403 404 404 404 404
	expect_all GET "/v1/experiments/$e_b_by_member$sub" "" 404 404 404 200 200 403 404
	expect_all GET "/v1/experiments/$e_b_by_admin$sub" "" 404 404 404 403 200 403 404
	expect_all GET "/v1/experiments/exp_0000000000000000$sub" "" 404 404 404 404 404 404 404
done
# Cancels: refused callers first, then the one allowed.
for r in af bm ba bf none aa; do
	case $r in aa) want=200 ;; af) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" POST "/v1/experiments/$e_a_cancel_a/cancel"
done
expect am 403 POST "/v1/experiments/$e_a_cancel_a/cancel"
for r in af ba bm bf none am; do
	case $r in am) want=200 ;; af) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" POST "/v1/experiments/$e_a_cancel_m/cancel"
done
expect bm 200 POST "/v1/experiments/$e_b_cancel_m/cancel"
expect ba 200 POST "/v1/experiments/$e_b_cancel_a/cancel"

# ---- the shape catalog: public to every platform user ----
expect_all GET "/v1/shapes?gpus=8&limit=3" "" 200 200 200 200 200 200 200
expect stranger 401 GET "/v1/shapes?gpus=8&limit=3"
expect_exit 0 "isc shapes as a member" as am "$ISC_BIN/isc" shapes --gpus 8 --limit 3

# ---- the catalog: read by every platform user, changed by the operator only ----
csv='id,provider,region,instance_type,market,gpu_type,gpus_per_node,gpu_mem_mib,vcpus,mem_mib,price,zones,price_date
aws-us-east-1-g4dn.xlarge-spot,aws,us-east-1,g4dn.xlarge,spot,T4,1,16384,4,16384,0.1766,us-east-1a,2025-11-30'
expect_all GET /v1/catalog "" 200 200 200 200 200 200 200
expect_all GET "/v1/catalog/export?provider=aws" "" 200 200 200 200 200 200 200
expect stranger 401 GET /v1/catalog
expect_all POST "/v1/catalog/import?provider=aws&format=isc" "$csv" 403 403 403 403 403 403 403
expect_all POST /v1/catalog/refresh "" 403 403 403 403 403 403 403
expect operator 200 POST "/v1/catalog/import?provider=aws&format=isc&file=one.csv" "$csv"
check "the operator's import is in the audit" bash -c "'$ISC_BIN/isc' --home '$home' audit --json | grep -q '\"target\": \"catalog:aws\"'"
expect_exit 0 "isc catalog show as a member" as am "$ISC_BIN/isc" catalog show
check "isc catalog export as finance: the normalized CSV" bash -c "runuser -u '${os[bf]}' -- env ISC_HOME='$home' LSAN_OPTIONS='$LSAN_OPTIONS' '$ISC_BIN/isc' catalog export --provider aws | grep -q '^aws-us-east-1-g4dn.xlarge-spot,aws,'"
printf '%s\n' "$csv" >"$dir/files/one.csv" && chmod 0644 "$dir/files/one.csv"
cat >"$dir/files/typo.isc" <<'ISC'
isc_project_id = "vision"
experiment_name = "typo"
gpus = 8
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarg-spot"]
command = "true"
ISC
chmod 0644 "$dir/files/typo.isc"
expect_stderr 'no shape "aws-us-east-1-g4dn.xlarg-spot"; did you mean' as am "$ISC_BIN/isc" validate "$dir/files/typo.isc"
expect_exit 1 "isc catalog import as an admin: exit 1" as aa "$ISC_BIN/isc" catalog import "$dir/files/one.csv" --format isc --provider aws
expect_stderr "only the platform operator" as aa "$ISC_BIN/isc" catalog import "$dir/files/one.csv" --format isc --provider aws

# ---- the on-prem pool and the broker's own credentials: the operator's alone ----
expect operator 201 POST /v1/nodes '{"host":"gpu-iso","port":2222,"user":"isc","gpus":8,"force":true}'
node=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$dir/out/operator.body")
expect_all GET /v1/nodes "" 403 403 403 403 403 403 403
expect_all POST /v1/nodes '{"host":"gpu-x","gpus":8}' 403 403 403 403 403 403 403
expect_all GET /v1/nodes/pubkey "" 403 403 403 403 403 403 403
for verb in drain undrain; do
	expect_all POST "/v1/nodes/$node/$verb" "" 403 403 403 403 403 403 403
	expect operator 200 POST "/v1/nodes/$node/$verb"
done
expect_all DELETE "/v1/nodes/$node" "" 403 403 403 403 403 403 403
expect_all DELETE /v1/nodes/gpu-nosuch "" 403 403 403 403 403 403 403
expect stranger 401 GET /v1/nodes
expect operator 200 GET /v1/nodes
expect operator 200 GET /v1/nodes/pubkey
expect operator 200 DELETE "/v1/nodes/$node"
expect operator 404 DELETE "/v1/nodes/$node"
# (The operator's check of a real provider would call the cloud: only the refusals here.)
expect_all GET /v1/check/aws "" 403 403 403 403 403 403 403
expect_all GET /v1/check/nosuch "" 403 403 403 403 403 403 403
expect operator 404 GET /v1/check/nosuch
expect_exit 1 "isc nodes list as an admin: exit 1" as aa "$ISC_BIN/isc" nodes list
expect_stderr "only the platform operator" as aa "$ISC_BIN/isc" nodes list
expect_exit 1 "isc check aws as an admin: exit 1" as ba "$ISC_BIN/isc" check aws
expect_stderr "only the platform operator" as ba "$ISC_BIN/isc" check aws
check "the pool's changes are in the audit" test "$(isc audit --json | grep -c '"action": "\(POST\|DELETE\) /v1/nodes')" -ge 6

# ---- money ----
expect_all GET "/v1/credits?org=orga" "" 403 200 200 404 404 404 404
expect_all GET "/v1/credits?org=orgb" "" 404 404 404 403 200 200 404
expect_all GET /v1/credits "" 200 200 200 200 200 200 200
expect_all GET "/v1/spend?org=orga" "" 403 200 200 404 404 404 404
expect_all GET "/v1/spend?org=orgb&format=csv" "" 404 404 404 403 200 200 404
expect_all GET "/v1/spend?project=vision&by=day&format=csv" "" 403 200 200 403 200 200 404
expect_all GET "/v1/spend?project=$pb&format=json" "" 404 404 404 403 200 200 404

# ---- datasets: every user of the org sees them, its admins add and remove them ----
# ds_body ORG NAME: an add with the dataset's own keys in the body.
ds_body() { printf '{"org":"%s","uri":"s3://iso-data/set.txt","name":"%s","credentials":{"access_key_id":"%s","secret_access_key":"%s"}}' "$1" "$2" "$ds_kid" "$ds_secret"; }
expect operator 201 POST /v1/datasets "$(ds_body orga dsa)"
ds_a=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$dir/out/operator.body")
expect operator 201 POST /v1/datasets "$(ds_body orgb dsb)"
ds_b=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$dir/out/operator.body")
expect_all GET "/v1/datasets?org=orga" "" 200 200 200 404 404 404 404
expect_all GET "/v1/datasets?org=orgb" "" 404 404 404 200 200 200 404
expect_all GET "/v1/datasets?org=nope" "" 404 404 404 404 404 404 404
expect_all GET /v1/datasets "" 200 200 200 200 200 200 200
expect_all GET "/v1/datasets/dsa?org=orga" "" 200 200 200 404 404 404 404
expect_all GET "/v1/datasets/$ds_a" "" 200 200 200 404 404 404 404
expect_all GET "/v1/datasets/$ds_b" "" 404 404 404 200 200 200 404
expect_all GET "/v1/datasets/dsb?org=orgb" "" 404 404 404 200 200 200 404
expect_all GET "/v1/datasets/dsb?org=orga" "" 404 404 404 404 404 404 404
expect_all GET /v1/datasets/ds_0000000000000000 "" 404 404 404 404 404 404 404
check "another org's dataset is answered as one that does not exist" bash -c "
	runuser -u '${os[am]}' -- curl -s --unix-socket '$home/run/api.sock' 'http://localhost/v1/datasets/$ds_b' >'$dir/out/x1'
	runuser -u '${os[am]}' -- curl -s --unix-socket '$home/run/api.sock' 'http://localhost/v1/datasets/ds_0000000000000000' >'$dir/out/x2'
	sed 's/$ds_b/ID/' '$dir/out/x1' | cmp -s - <(sed 's/ds_0000000000000000/ID/' '$dir/out/x2')"
n=0
for r in am aa af bm ba bf none; do
	n=$((n + 1))
	case $r in aa) want=201 ;; am | af) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" POST /v1/datasets "$(ds_body orga "ds$n")"
done
expect_all POST /v1/datasets "$(ds_body orgb dsx)" 404 404 404 403 201 403 404
expect aa 403 POST /v1/datasets '{"org":"orga","uri":"s3://iso-data/set.txt","name":"on-broker"}'
check "an admin may not lend herself the broker's credentials" grep -q "only the platform operator" "$dir/out/aa.body"
expect aa 400 POST /v1/datasets "{\"org\":\"orga\",\"uri\":\"s3://iso-data/set.txt\",\"name\":\"badkey\",\"credentials\":{\"access_key_id\":\"$ds_kid\",\"secret_access_key\":\"wrong\"}}"
# Removal waits until the cacher is done with them (a Caching dataset is refused: 409).
ds_wait() { # ds_wait ID-OR-NAME[?org=O]: Available within 60 s
	for _ in $(seq 300); do
		curl -s --unix-socket "$home/run/api.sock" "http://localhost/v1/datasets/$1" | grep -q '"state":"Available"' && return 0
		sleep 0.2
	done
	return 1
}
check "orga's admin's dataset becomes Available" ds_wait "ds2?org=orga"
check "orgb's dataset becomes Available" ds_wait "$ds_b"
for r in am af bm ba bf none; do
	case $r in am | af) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" DELETE "/v1/datasets/ds2?org=orga"
done
expect aa 200 DELETE "/v1/datasets/ds2?org=orga"
for r in am aa af none bm bf; do
	case $r in bm | bf) want=403 ;; *) want=404 ;; esac
	expect "$r" "$want" DELETE "/v1/datasets/$ds_b"
done
check "orgb's dataset is still there" ds_wait "$ds_b"
expect_exit 0 "isc datasets list as a member" as am "$ISC_BIN/isc" datasets list --org orga
check "isc datasets list as orga's member: dsa, not dsb" bash -c "out=\$(runuser -u '${os[am]}' -- env ISC_HOME='$home' LSAN_OPTIONS='$LSAN_OPTIONS' '$ISC_BIN/isc' datasets list) && grep -q ' dsa ' <<<\"\$out\" && ! grep -q ' dsb ' <<<\"\$out\""
expect_exit 0 "isc datasets show as finance" as af "$ISC_BIN/isc" datasets show dsa --org orga
expect_exit 1 "isc datasets show of another org's dataset: exit 1" as bm "$ISC_BIN/isc" datasets show dsa --org orga
expect_exit 0 "isc datasets add as an admin, with the dataset's keys from the environment" \
	as aa env AWS_ACCESS_KEY_ID="$ds_kid" AWS_SECRET_ACCESS_KEY="$ds_secret" "$ISC_BIN/isc" datasets add s3://iso-data/set.txt --org orga --name by-cli --credentials-from-env
expect_stderr "does not allow this" as am env AWS_ACCESS_KEY_ID="$ds_kid" AWS_SECRET_ACCESS_KEY="$ds_secret" "$ISC_BIN/isc" datasets add s3://iso-data/set.txt --org orga --name by-member --credentials-from-env
expect_exit 1 "isc datasets remove as a member: exit 1" as am "$ISC_BIN/isc" datasets remove dsa --org orga
check "the refused dataset changes are in the audit" bash -c "'$ISC_BIN/isc' --home '$home' audit --org orga --json | /usr/bin/python3 -c '
import json,sys; rows=json.load(sys.stdin)
sys.exit(0 if any(r[\"action\"]==\"POST /v1/datasets\" and r[\"status\"]==403 for r in rows) and any(r[\"action\"].startswith(\"DELETE /v1/datasets/\") and r[\"status\"]==403 for r in rows) else 1)'"
# The store: on SQLite the home's files byte for byte (WAL and freed pages too), on
# PostgreSQL a pg_dump of the database (its files are the server's).
store_bytes() { if store_is_pg; then ISC_HOME=$home store_dump; else cat "$home"/isc.db*; fi; }
secret_nowhere() {
	{ isc audit --json && cat "$dir/iscd.log" && store_bytes; } >"$dir/out/all" && [ -s "$dir/out/all" ] || return 1
	! grep -aqF -- "$1" "$dir/out/all"
}
check "the datasets' secret is in no audit row, log or store" secret_nowhere "$ds_secret"

# ---- tokens (each their own) and the audit (admins of the org) ----
for r in am aa af bm ba bf none; do
	expect "$r" 201 POST /v1/tokens '{"expires_in_s":3600}'
	eval "tok_$r=\$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"id\"])' '$dir/out/$r.body')"
done
expect_all GET /v1/tokens "" 200 200 200 200 200 200 200
for r in aa af bm ba bf none; do expect "$r" 404 DELETE "/v1/tokens/$tok_am"; done
expect am 200 DELETE "/v1/tokens/$tok_am"
expect_all GET "/v1/audit?org=orga" "" 403 200 403 404 404 404 404
expect_all GET "/v1/audit?org=orgb" "" 404 404 404 403 200 403 404
expect_all GET "/v1/audit" "" 403 403 403 403 403 403 403

# ---- listings never show another organisation's rows ----
# rows ROLE PATH: the listing's JSON, fetched as that user.
rows() { as "$1" curl -s --unix-socket "$home/run/api.sock" "http://localhost$2"; }
py_check() { # py_check WHAT JSON PYTHON-EXPR(rows): the expression is true of the parsed JSON
	check "$1" /usr/bin/python3 -c "import json,sys; rows=json.loads(sys.argv[1]); sys.exit(0 if ($3) else 1)" "$2"
}
for o in a b; do
	other=$([ $o = a ] && echo b || echo a)
	py_check "org$o member lists orgs: only org$o" "$(rows ${o}m /v1/orgs)" "[r['name'] for r in rows] == ['org$o']"
	py_check "org$o finance lists projects: only org$o's" "$(rows ${o}f /v1/projects)" "rows and all(r['org'] == 'org$o' for r in rows)"
	py_check "org$o member lists experiments: only their own" "$(rows ${o}m /v1/experiments)" \
		"rows and all(r['org'] == 'org$o' and r['name'] in ('$o-by-member', '$o-cancel-m') for r in rows)"
	py_check "org$o admin lists experiments: all of org$o, none of org$other" "$(rows ${o}a /v1/experiments)" \
		"len(rows) >= 4 and all(r['org'] == 'org$o' for r in rows)"
	py_check "org$o finance lists no experiments" "$(rows ${o}f /v1/experiments)" "rows == []"
	py_check "org$o finance credits: only org$o" "$(rows ${o}f /v1/credits)" "[r['org'] for r in rows['orgs']] == ['org$o']"
	py_check "org$o member credits: none" "$(rows ${o}m /v1/credits)" "rows['orgs'] == []"
	py_check "org$o admin members: only org$o" "$(rows ${o}a "/v1/members?org=org$o")" "rows and all(r['org'] == 'org$o' for r in rows)"
	py_check "org$o admin audit: only org$o rows" "$(rows ${o}a "/v1/audit?org=org$o")" "rows and all(r['org'] == 'org$o' for r in rows)"
	py_check "org$o finance lists datasets: only org$o's" "$(rows ${o}f /v1/datasets)" "rows and all(r['org'] == 'org$o' for r in rows)"
	py_check "org$o member lists datasets: only org$o's" "$(rows ${o}m /v1/datasets)" "rows and all(r['org'] == 'org$o' for r in rows)"
	py_check "org$o finance tokens: only their own" "$(rows ${o}f /v1/tokens)" "len(rows) == 1 and rows[0]['user'] == '${os[${o}f]}'"
	py_check "org$o events: only the experiment's" "$(rows ${o}m "/v1/experiments/$(eval echo "\$e_${o}_by_member")/events")" \
		"rows['id'] == '$(eval echo "\$e_${o}_by_member")' and rows['events']"
done
py_check "the user in no org sees no orgs, projects, experiments, credits or datasets" \
	"[$(rows none /v1/orgs), $(rows none /v1/projects), $(rows none /v1/experiments), $(rows none /v1/credits), $(rows none /v1/datasets)]" \
	"rows[:3] == [[], [], []] and rows[3]['orgs'] == [] and rows[4] == []"
# Same-named projects: each finance user's 'vision' spend is their org's alone.
py_check "orga finance: spend of 'vision' is orga's 1.25 only" "$(rows af "/v1/spend?project=vision&format=json")" "rows['total_micros'] == 1250000"
py_check "orgb finance: spend of 'vision' is orgb's 7.00 only" "$(rows bf "/v1/spend?project=vision&format=json")" "rows['total_micros'] == 7000000"
check "finance over HTTP: spend by day as CSV" bash -c "runuser -u '${os[af]}' -- curl -s --unix-socket '$home/run/api.sock' 'http://localhost/v1/spend?project=vision&by=day&format=csv' | grep -q '^2024-06-01,1.250000,1250000'"
check "the operator's spend of 'vision' by org" bash -c "'$ISC_BIN/isc' --home '$home' spend --org orga --project vision --format csv | grep -q '1250000'"

# ---- pages of the experiment listing (docs/api.md, "Pages") ----
# Seven more experiments of orga created in one millisecond (a tie the order must break
# the same way on every page): three by its member, four by its admin.
# (Ids made here, in bash: the SQL runs on SQLite and PostgreSQL alike.)
for i in $(seq 0 6); do
	printf "INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, spec_json, status,
	  created_at_ms, updated_at_ms, status_reason, output_path, owner)
	SELECT 'exp_%016x', '%s', o.id, 'tie-%d', 'cycle', 8, '{}', 'completed',
	  1700000000000, 1700000000000, '', '/nonexistent', '%s' FROM orgs o WHERE o.name = 'orga';\n" \
		$((4096 + i)) "$pa" "$i" "$([ "$i" -lt 3 ] && echo "${os[am]}" || echo "${os[aa]}")"
done | store || echo "could not write the tie fixture" >&2
# walk ROLE PATH LIMIT: every page of PATH with limit=LIMIT, following X-Isc-Next; prints
# the ids in the order the pages gave them, one a line.
walk() {
	local role=$1 path=$2 limit=$3 after="" pages=0 q sep
	sep=$([[ $path == *\?* ]] && echo '&' || echo '?')
	while :; do
		q="$path${sep}limit=$limit${after:+&after=$after}"
		if [ "$role" = operator ]; then
			curl -s -D "$dir/out/walk.hdr" -o "$dir/out/walk.json" --unix-socket "$home/run/api.sock" "http://localhost$q"
		else
			as "$role" curl -s -D "$dir/out/$role.hdr" -o "$dir/out/$role.json" --unix-socket "$home/run/api.sock" "http://localhost$q"
			cp "$dir/out/$role.hdr" "$dir/out/walk.hdr" && cp "$dir/out/$role.json" "$dir/out/walk.json"
		fi
		/usr/bin/python3 -c "import json,sys; rows=json.load(open(sys.argv[1])); assert len(rows) <= int(sys.argv[2]); print('\n'.join(str(r['id']) for r in rows))" \
			"$dir/out/walk.json" "$limit" | grep . || true
		after=$(sed -n 's/^X-Isc-Next: *//Ip' "$dir/out/walk.hdr" | tr -d '\r')
		[ -n "$after" ] || break
		pages=$((pages + 1))
		[ "$pages" -lt 200 ] || { echo "walk: no end after 200 pages" >&2; break; }
	done
}
# ids ROLE PATH BIG: the ids of the whole listing in one page of BIG rows.
ids() {
	local sep
	sep=$([[ $2 == *\?* ]] && echo '&' || echo '?')
	if [ "$1" = operator ]; then
		curl -s --unix-socket "$home/run/api.sock" "http://localhost$2${sep}limit=$3"
	else
		rows "$1" "$2${sep}limit=$3"
	fi | /usr/bin/python3 -c "import json,sys; print('\n'.join(str(r['id']) for r in json.load(sys.stdin)))" | grep . || true
}
check "the tie fixture: orga's admin sees 7 more experiments" test "$(ids aa /v1/experiments 1000 | wc -l)" -ge 11
for r in am aa af bm ba bf none operator; do
	whole=$(ids "$r" /v1/experiments 1000)
	for limit in 1 3; do
		paged=$(walk "$r" /v1/experiments "$limit")
		check "$r: pages of $limit cover the listing exactly once, in its order" test "$paged" = "$whole"
		check "$r: pages of $limit repeat no row" test -z "$(sort <<<"$paged" | uniq -d)"
	done
done
# The audit pages the same way (its cursor: the last row's id).
for who in "aa /v1/audit?org=orga" "ba /v1/audit?org=orgb" "operator /v1/audit"; do
	read -r who_role who_path <<<"$who"
	whole=$(ids "$who_role" "$who_path" 100000)
	paged=$(walk "$who_role" "$who_path" 7)
	check "$who_role: audit pages of 7 cover $who_path exactly once, in its order" test -n "$whole" -a "$paged" = "$whole"
done
expect aa 400 GET "/v1/audit?org=orga&after=x"
# A cursor is only a position: orga's admin's cursor in orgb's hands shows orgb's rows only.
as aa curl -s -D "$dir/out/aa.hdr" -o /dev/null --unix-socket "$home/run/api.sock" "http://localhost/v1/experiments?limit=2"
cursor=$(sed -n 's/^X-Isc-Next: *//Ip' "$dir/out/aa.hdr" | tr -d '\r')
check "orga's admin's first page of 2 names a next page" test -n "$cursor"
for r in bm ba bf none; do
	py_check "$r with orga's cursor: no orga row" "$(rows "$r" "/v1/experiments?limit=1000&after=$cursor")" \
		"all(r['org'] == 'orgb' for r in rows)"
done
check "orga's last page names no next page" test -z "$(as aa curl -s -D - -o /dev/null --unix-socket "$home/run/api.sock" "http://localhost/v1/experiments?limit=1000" | grep -i '^X-Isc-Next')"
for q in limit=0 limit=1001 limit=x "limit=" "after=" "after=garbage" "after=12.exp%27" "limit=5&after=-1.exp_0"; do
	expect aa 400 GET "/v1/experiments?$q"
done
check "isc experiments --json follows every page" test "$(as aa "$ISC_BIN/isc" experiments --json |
	/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = "$(ids aa /v1/experiments 1000 | wc -l)"

# ---- pages of the dataset listing: by organisation, then name; cursor ORG/NAME ----
# More datasets of both orgs (Failed, so the cacher leaves them alone), names that
# interleave across the two orgs.
for i in $(seq 0 9); do
	printf "INSERT INTO datasets (id, org_id, name, uri, bucket, key, is_folder, etag, version_id, credentials,
	  size_bytes, volume_bytes, cached_bytes, state, reason, copy_name, created_at_ms, updated_at_ms)
	SELECT 'ds_%016x', o.id, 'page-%d', 's3://iso-data/set.txt', 'iso-data', 'set.txt', 0, '', '',
	  '', 5, 5368709120, 0, 'failed', 'fixture', 'page-%d', 1700000000000, 1700000000000
	FROM orgs o WHERE o.name = '%s';\n" $((8192 + i)) "$i" "$i" "$([ $((i % 3)) = 0 ] && echo orgb || echo orga)"
done | store || echo "could not write the dataset page fixture" >&2
# ds_ids ROLE: the ids of the whole dataset listing in one page.
ds_ids() {
	if [ "$1" = operator ]; then
		curl -s --unix-socket "$home/run/api.sock" "http://localhost/v1/datasets?limit=1000"
	else
		rows "$1" "/v1/datasets?limit=1000"
	fi | /usr/bin/python3 -c "import json,sys; print('\n'.join(r['id'] for r in json.load(sys.stdin)))" | grep . || true
}
check "the dataset page fixture: orga's finance sees 6 more datasets" test "$(ds_ids af | wc -l)" -ge 8
for r in am aa af bm ba bf none operator; do
	whole=$(ds_ids "$r")
	for limit in 1 3; do
		paged=$(walk "$r" /v1/datasets "$limit")
		check "$r: dataset pages of $limit cover the listing exactly once, in its order" test "$paged" = "$whole"
		check "$r: dataset pages of $limit repeat no row" test -z "$(sort <<<"$paged" | uniq -d)"
	done
done
as af curl -s -D "$dir/out/af.hdr" -o /dev/null --unix-socket "$home/run/api.sock" "http://localhost/v1/datasets?limit=2"
cursor=$(sed -n 's/^X-Isc-Next: *//Ip' "$dir/out/af.hdr" | tr -d '\r')
check "orga's finance's first dataset page of 2 names a next page" test -n "$cursor"
for r in bm ba bf none; do
	py_check "$r with orga's dataset cursor: no orga row" "$(rows "$r" "/v1/datasets?limit=1000&after=$cursor")" \
		"all(r['org'] == 'orgb' for r in rows)"
done
for q in limit=0 limit=1001 limit=x "after=" "after=garbage" "after=a/b/c" "after=/x"; do
	expect aa 400 GET "/v1/datasets?$q"
done
check "isc datasets list --json follows every page" test "$(as af "$ISC_BIN/isc" datasets list --json |
	/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = "$(ds_ids af | wc -l)"

# ---- the CLI as those users: same commands, same exit codes ----
expect_exit 0 "isc experiments as a member" as am "$ISC_BIN/isc" experiments
expect_exit 1 "isc status of another org's experiment: exit 1" as am "$ISC_BIN/isc" status "$e_b_by_member"
expect_stderr "no experiment with id" as am "$ISC_BIN/isc" status "$e_b_by_member"
expect_exit 1 "isc credits grant as an admin: exit 1" as aa "$ISC_BIN/isc" credits grant --org orga 5
expect_stderr "only the platform operator" as aa "$ISC_BIN/isc" credits grant --org orga 5
expect_exit 0 "isc member list as an admin" as aa "$ISC_BIN/isc" member list --org orga
expect_exit 1 "isc member add as a member" as am "$ISC_BIN/isc" member add --org orga "${os[none]}" --role admin
expect_exit 1 "isc as a stranger: exit 1" as stranger "$ISC_BIN/isc" experiments
expect_stderr "is not a platform user" as stranger "$ISC_BIN/isc" experiments
expect_exit 0 "isc audit as an admin" as aa "$ISC_BIN/isc" audit --org orga
check "the audit records who, from where, what" bash -c "'$ISC_BIN/isc' --home '$home' audit --json | grep -q 'unix:uid=$(id -u "${os[am]}")'"
audit_delete_refused() { ! store 'DELETE FROM audit' 2>/dev/null; }
check "the audit refuses changes" audit_delete_refused
check "the audit kept its rows" test "$(store -r 'SELECT count(*) FROM audit')" -gt 0
check "the home stays owner-only" test -z "$(find "$home" -path "$home/run" -prune -o -perm /066 -print -quit)"
if store_is_pg; then
	# On PostgreSQL who may open the store is the server's authentication's business
	# (pg_hba.conf, the database's roles), not the home's: the home must then hold no
	# database file another user could open, and no password to the server.
	check "the home holds no database file" test -z "$(find "$home" -name 'isc.db*' -print -quit)"
	no_password() { ! grep -rqsE -e 'password=' -e '://[^/@?]*:[^/@?]*@' "$home"; }
	check "the home holds no password to the store" no_password
else
	expect_exit 1 "another user cannot open the store" as am sqlite3 "$home/isc.db" "SELECT 1"
fi

check "iscd logged no sanitizer report" bash -c "! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' '$dir/iscd.log'"
finish api-isolation
