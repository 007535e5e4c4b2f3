#!/usr/bin/env bash
# Datasets of two organisations never meet (issue 29, docs/datasets.md "Copies belong to
# one organisation"). Two organisations register datasets of the same name from their own
# private buckets with their own keys (the mock S3 knows three accounts; a bucket with an
# owner answers only its owner), in both orders: each gets its own bytes, the mock S3's
# request log shows both objects read, each with its owner's key, and the copies live in
# different folders ($ISC_HOME/datasets/@ORGID/...). Even one public object both register
# is read twice, once per organisation. Inside one organisation a second dataset of the
# same object shares the first one's copy only after a HeadObject with its own keys
# confirmed the ETag and VersionId (the log shows that HEAD and no GET); an object
# replaced in S3 is not shared. On an on-prem pool node each organisation's run reads its
# own bytes from /data/.isc/@ORGID/..., and a run of one organisation naming the other's
# dataset is refused. Last, a store of the layout before issue 29 (one folder for every
# organisation, a copy two organisations used) is built by hand and migrated: the copy
# stays with the organisation that made it, the other's dataset is cached again from its
# own bucket.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
node=$repo/tests/mocks/node
dir=$(mktemp -d /tmp/isc-tenancy-datasets.XXXXXX)
home=$dir/home
# Addresses of this suite only (onprem.sh 127.153, datasets-onprem.sh 127.156, sandboxes 127.100-149).
base=127.158.$((RANDOM % 200 + 1))
s3_pid=
iscd_pid=
cleanup() {
	[ -n "$iscd_pid" ] && kill -TERM "$iscd_pid" 2>/dev/null && wait "$iscd_pid" 2>/dev/null
	[ -n "$s3_pid" ] && kill -TERM "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	"$node/node-down" "$dir/n1" >/dev/null 2>&1
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
isc() { "$ISC_BIN/isc" --home "$home" "$@"; }
py() { /usr/bin/python3 -c "$@"; }
s3ctl() { curl -sf -X POST "$S3/_mock/$1" -H 'Content-Type: application/json' -d "$2"; }
start_iscd() {
	setpriv --pdeathsig TERM "$ISC_BIN/iscd" --home "$home" 2>>"$dir/iscd.log" &
	iscd_pid=$!
	iscd_wait_socket "$home/run/api.sock"
}
stop_iscd() {
	kill -TERM "$iscd_pid" 2>/dev/null
	wait "$iscd_pid" 2>/dev/null
	iscd_pid=
}

# The broker's account (iscd's environment) and one account per organisation.
export AWS_ACCESS_KEY_ID=AKIDTENANCYBROKER001 AWS_SECRET_ACCESS_KEY=tenancy-broker-secret AWS_REGION=us-east-1
acme_id=AKIDTENANCYACME00001 acme_secret=tenancy-acme-secret
globex_id=AKIDTENANCYGLOBEX001 globex_secret=tenancy-globex-secret
MOCKS3_AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID MOCKS3_AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	MOCKS3_EXTRA_ACCOUNTS="$acme_id:$acme_secret,$globex_id:$globex_secret" \
	/usr/bin/python3 "$repo/tests/mocks/mocks3" --port-file "$dir/s3.port" --state-dir "$dir/s3" \
	2>"$dir/s3.log" &
s3_pid=$!
for _ in $(seq 300); do [ -s "$dir/s3.port" ] && break; sleep 0.1; done
S3="http://127.0.0.1:$(cat "$dir/s3.port")"
export AWS_ENDPOINT_URL_S3=$S3

# zip_of NAME TEXT: a zip holding mn/who.txt = TEXT, at $dir/src/NAME.zip.
zip_of() {
	mkdir -p "$dir/src/$1/mn"
	printf '%s\n' "$2" >"$dir/src/$1/mn/who.txt"
	(cd "$dir/src/$1" && zip -qr "../$1.zip" mn)
}
zip_of acme "acme's private bytes"
zip_of acme2 "acme's second version"
zip_of globex "globex's private bytes"
zip_of public "public bytes"
s3ctl bucket "{\"bucket\":\"acme-data\",\"versioned\":true,\"owner\":\"$acme_id\"}" >/dev/null
s3ctl bucket "{\"bucket\":\"globex-data\",\"versioned\":true,\"owner\":\"$globex_id\"}" >/dev/null
s3ctl bucket '{"bucket":"public-data","versioned":true}' >/dev/null
for k in mnist cifar; do
	s3ctl object "{\"bucket\":\"acme-data\",\"key\":\"$k.zip\",\"file\":\"$dir/src/acme.zip\"}" >/dev/null
	s3ctl object "{\"bucket\":\"globex-data\",\"key\":\"$k.zip\",\"file\":\"$dir/src/globex.zip\"}" >/dev/null
done
s3ctl object "{\"bucket\":\"public-data\",\"key\":\"pub.zip\",\"file\":\"$dir/src/public.zip\"}" >/dev/null

# add_as ORG URI [ARGS...]: isc datasets add with the organisation's own keys.
add_as() {
	local org=$1 uri=$2 id secret
	shift 2
	if [ "$org" = acme ]; then id=$acme_id secret=$acme_secret; else id=$globex_id secret=$globex_secret; fi
	AWS_ACCESS_KEY_ID=$id AWS_SECRET_ACCESS_KEY=$secret AWS_SESSION_TOKEN= \
		"$ISC_BIN/isc" --home "$home" datasets add "$uri" --org "$org" --credentials-from-env "$@"
}
# field NAME ORG FIELD: one field of `isc datasets show --json`.
field() { isc datasets show "$1" --org "$2" --json | py 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"; }
wait_available() {
	for _ in $(seq 1 300); do
		[ "$(field "$1" "$2" state)" = Available ] && return 0
		sleep 0.2
	done
	echo "dataset $1 of $2: $(field "$1" "$2" state) $(field "$1" "$2" reason)" >&2
	return 1
}
# bytes NAME ORG: what the copy of the dataset holds (mn/who.txt), on iscd's disk.
bytes() { cat "$home/datasets/$(field "$1" "$2" copy)/mn/who.txt"; }
# n_req OP BUCKET KEY ACCESS_KEY_ID: answered (2xx) signed requests of that account.
n_req() {
	curl -sf "$S3/_mock/requests" | py '
import json, sys
op, b, k, a = sys.argv[1:5]
print(sum(1 for r in json.load(sys.stdin) if r["op"] == op and r["bucket"] == b and r["key"] == k
          and r.get("access_key_id") == a and not r["presigned"] and 200 <= r["status"] < 300))' "$@"
}
# n_any BUCKET ACCESS_KEY_ID: every request (any answer) of that account on that bucket.
n_any() {
	curl -sf "$S3/_mock/requests" | py '
import json, sys
b, a = sys.argv[1:3]
print(sum(1 for r in json.load(sys.stdin) if r["bucket"] == b and r.get("access_key_id") == a))' "$@"
}

isc init >/dev/null
cat >>"$home/config.toml" <<CONF

# Written by tests/integration/tenancy-datasets.sh: seconds instead of minutes.
tick_interval_ms = 200
cycle_ms = 5000
period_ms = 20000
stop_grace_s = 1
node_down_after_ms = 3000
boot_deadline_ms = 20000
CONF
start_iscd || exit 1
for o in acme globex; do
	isc org add $o >/dev/null
	isc project add --org $o $o >/dev/null
done

# ---- both orders: acme first (mnist), globex first (cifar) ----
check "acme adds mnist from its bucket" add_as acme s3://acme-data/mnist.zip
check "acme's mnist becomes Available" wait_available mnist acme
check "globex adds mnist from its bucket" add_as globex s3://globex-data/mnist.zip
check "globex's mnist becomes Available" wait_available mnist globex
check "globex adds cifar first" add_as globex s3://globex-data/cifar.zip
check "globex's cifar becomes Available" wait_available cifar globex
check "acme adds cifar second" add_as acme s3://acme-data/cifar.zip
check "acme's cifar becomes Available" wait_available cifar acme
for ds in mnist cifar; do
	check "$ds: acme's copy holds acme's bytes" test "$(bytes $ds acme)" = "acme's private bytes"
	check "$ds: globex's copy holds globex's bytes" test "$(bytes $ds globex)" = "globex's private bytes"
	check "$ds: the two copies are different folders" test "$(field $ds acme copy)" != "$(field $ds globex copy)"
	check "$ds: acme's object was read with acme's key" test "$(n_req GET acme-data $ds.zip $acme_id)" -ge 1
	check "$ds: globex's object was read with globex's key" test "$(n_req GET globex-data $ds.zip $globex_id)" -ge 1
done
acme_dir=$(field mnist acme copy | cut -d/ -f1)
globex_dir=$(field mnist globex copy | cut -d/ -f1)
check "each organisation has one folder of copies" test "$(field cifar acme copy | cut -d/ -f1)" = "$acme_dir" -a \
	"$(field cifar globex copy | cut -d/ -f1)" = "$globex_dir" -a "$acme_dir" != "$globex_dir"
check "an organisation's folder is iscd's alone (0700)" test "$(stat -c %a "$home/datasets/$acme_dir")" = 700
check "its manifests are in it" test -s "$home/datasets/$acme_dir/.manifests/$(field mnist acme copy | cut -d/ -f2).json"
check "no key of one organisation ever reached the other's bucket" \
	test "$(n_any acme-data $globex_id)" = 0 -a "$(n_any globex-data $acme_id)" = 0

# ---- one public object, both organisations: still two copies, read twice ----
check "acme adds pub" add_as acme s3://public-data/pub.zip
check "globex adds pub" add_as globex s3://public-data/pub.zip
check "acme's pub becomes Available" wait_available pub acme
check "globex's pub becomes Available" wait_available pub globex
check "pub: two copies" test "$(field pub acme copy)" != "$(field pub globex copy)"
check "pub: read with acme's key" test "$(n_req GET public-data pub.zip $acme_id)" = 1
check "pub: and read again with globex's key" test "$(n_req GET public-data pub.zip $globex_id)" = 1

# ---- another organisation's bucket: refused, nothing recorded ----
expect_stderr "S3 HeadObject s3://acme-data/mnist.zip: Forbidden (HTTP 403)" add_as globex s3://acme-data/mnist.zip --name stolen
check "nothing recorded" bash -c "! '$ISC_BIN/isc' --home '$home' datasets show stolen --org globex"

# ---- sharing inside one organisation, only after S3 confirmed ETag and VersionId ----
heads=$(n_req HEAD acme-data mnist.zip $acme_id)
gets=$(n_req GET acme-data mnist.zip $acme_id)
check "acme adds mnist-again (the same object)" add_as acme s3://acme-data/mnist.zip --name mnist-again
check "mnist-again becomes Available" wait_available mnist-again acme
check "mnist-again shares mnist's copy" test "$(field mnist-again acme copy)" = "$(field mnist acme copy)"
# One HEAD at registration, one as the cacher confirms the ETag and VersionId; no GET.
check "the log shows the registration's and the confirming HEAD, with acme's key" \
	test "$(n_req HEAD acme-data mnist.zip $acme_id)" = $((heads + 2))
check "and no download" test "$(n_req GET acme-data mnist.zip $acme_id)" = "$gets"
check "iscd says what S3 confirmed" grep -q "(mnist-again): shares the copy of dataset .* (mnist) of its organisation: S3 confirmed ETag" "$dir/iscd.log"
# The object replaced in S3 (a new version): the next dataset of it gets its own copy.
s3ctl object "{\"bucket\":\"acme-data\",\"key\":\"mnist.zip\",\"file\":\"$dir/src/acme2.zip\"}" >/dev/null
check "acme adds mnist-v2 after the object changed" add_as acme s3://acme-data/mnist.zip --name mnist-v2
check "mnist-v2 becomes Available" wait_available mnist-v2 acme
check "mnist-v2 has a copy of its own" test "$(field mnist-v2 acme copy)" != "$(field mnist acme copy)"
check "downloaded again" test "$(n_req GET acme-data mnist.zip $acme_id)" = $((gets + 1))
check "with the new bytes" test "$(bytes mnist-v2 acme)" = "acme's second version"
check "mnist's copy is untouched" test "$(bytes mnist acme)" = "acme's private bytes"
shared=$home/datasets/$(field mnist acme copy)
check "removing mnist keeps the copy mnist-again uses" isc datasets remove mnist --org acme
check "the copy is still there" test -d "$shared"
check "removing mnist-again too" isc datasets remove mnist-again --org acme
check "removes the copy" test ! -e "$shared"

# ---- on-prem: each organisation's run reads its own bytes; the other's dataset is refused ----
isc nodes pubkey >"$dir/authorized_keys"
if "$node/node-up" "$dir/n1" "$base.1" 2222 "$dir/authorized_keys" >/dev/null; then
	isc nodes add "$base.1" --port 2222 --user root --gpus 1 >/dev/null
	launch() { # ORG NAME DATASET
		cat <<EOF
isc_project_id = "$1"
experiment_name = "$2"
gpus = 1
compute_mode = "cycle"
dataset_id_list = ["$3"]
command = 'cat /data/$3/mn/who.txt'
EOF
	}
	launch acme reads cifar >"$dir/acme.isc"
	launch globex reads cifar >"$dir/globex.isc"
	acme_cifar=$(field cifar acme id)
	launch globex steals "$acme_cifar" >"$dir/steal.isc"
	expect_stderr "organisation 'globex' has no dataset '$acme_cifar'" isc train "$dir/steal.isc"
	ea=$(isc train "$dir/acme.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	eg=$(isc train "$dir/globex.isc" | grep -Eo 'exp_[0-9a-f]{16}')
	check "acme's run completes" wait_status "$ea" completed 90
	check "globex's run completes" wait_status "$eg" completed 90
	out_of() { isc status "$1" --json | py 'import json,sys; print(json.load(sys.stdin)["output_path"])'; }
	check "acme's run read acme's bytes" grep -qx "acme's private bytes" "$(out_of "$ea")/rank_0.txt"
	check "globex's run read globex's bytes" grep -qx "globex's private bytes" "$(out_of "$eg")/rank_0.txt"
	ca=$(field cifar acme copy)
	cg=$(field cifar globex copy)
	check "the node holds acme's copy under acme's folder" grep -qx "acme's private bytes" "$dir/n1/data/.isc/$ca/mn/who.txt"
	check "and globex's under globex's" grep -qx "globex's private bytes" "$dir/n1/data/.isc/$cg/mn/who.txt"
	check "nothing of the old flat layout on the node" test -z "$(ls "$dir/n1/data/.isc" | grep -v '^@')"
	check "each run mounted only its own organisation's copy" bash -c \
		"grep -q '$ea: dataset cifar shipped to' '$dir/iscd.log' && grep -q '$eg: dataset cifar shipped to' '$dir/iscd.log'"
else
	failed=$((failed + 1))
	echo "FAIL: the pool node did not come up" >&2
fi

# ---- an old-layout store migrated ----
# Built by hand as the code before issue 29 left it: the schema of migration 14 (its SQL
# read from store/migrations.c, macros expanded by the C preprocessor), every row of the
# store above, copies named NAME in one folder for all organisations, and for each name
# the copy of the dataset cached first, which the later datasets of that name shared with
# its manifest (whatever their organisation). Then globex removes its cifar, the copy
# acme's cifar shared: the first dataset left on it is not the one that made it.
v2_bytes=$(bytes mnist-v2 acme)
stop_iscd
n0() { # the counts before the migration, to compare after
	echo "$(n_req GET acme-data cifar.zip $acme_id) $(n_req GET public-data pub.zip $acme_id)" \
		"$(n_req GET public-data pub.zip $globex_id) $(n_req GET globex-data mnist.zip $globex_id)" \
		"$(n_req GET acme-data mnist.zip $acme_id) $(n_req HEAD acme-data cifar.zip $acme_id)"
}
read -r ga_cifar ga_pub gg_pub gg_mnist ga_mnist ha_cifar <<<"$(n0)"
"${CC:-cc}" -E -P -I"$repo" "$repo/store/migrations.c" >"$dir/migrations.i"
check "the old-layout store is built" /usr/bin/python3 - "$dir/migrations.i" "$home" <<'PY'
import os, re, shutil, sqlite3, sys
src, home = sys.argv[1], sys.argv[2]
text = open(src).read()
body = text[text.index("migrations[] = {"):]
body = body[: body.index("};")]
# Each migration is a run of adjacent string literals ended by a comma.
sqls, cur = [], []
for tok in re.finditer(r'"((?:[^"\\]|\\.)*)"|(,)', body):
    if tok.group(2):
        sqls.append("".join(cur)); cur = []
    else:
        cur.append(tok.group(1).encode().decode("unicode_escape"))
old = os.path.join(home, "old.db")
if os.path.exists(old):
    os.remove(old)
db = sqlite3.connect(old)
for sql in sqls[:14]:
    db.executescript(sql)
db.executescript("CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (14);")
db.execute("ATTACH ? AS cur", (os.path.join(home, "isc.db"),))
db.execute("PRAGMA foreign_keys = OFF")
for (t,) in db.execute("SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                       "AND name != 'schema_version'").fetchall():
    cols = ",".join('"%s"' % r[1] for r in db.execute('PRAGMA main.table_info("%s")' % t))
    db.execute('INSERT INTO main."%s" (%s) SELECT %s FROM cur."%s"' % (t, cols, cols, t))
db.commit()
root = os.path.join(home, "datasets")
rows = db.execute("SELECT d.id, d.name, d.copy_name, d.manifest_json, o.name FROM main.datasets d "
                  "JOIN main.orgs o ON o.id = d.org_id WHERE d.state = 'available' "
                  "ORDER BY d.created_at_ms, d.id").fetchall()
os.makedirs(os.path.join(root, ".manifests"), exist_ok=True)
made = {}
for ds_id, name, copy, manifest, org in rows:
    org_dir, leaf = copy.split("/")
    if name not in made:  # the first: its copy becomes the one old folder of that name
        made[name] = manifest
        os.rename(os.path.join(root, copy), os.path.join(root, name))
        os.rename(os.path.join(root, org_dir, ".manifests", leaf + ".json"),
                  os.path.join(root, ".manifests", name + ".json"))
    db.execute("UPDATE main.datasets SET copy_name = ?, manifest_json = ? WHERE id = ?", (name, made[name], ds_id))
    if name == "cifar" and org == "globex":  # the maker, removed later
        db.execute("DELETE FROM main.datasets WHERE id = ?", (ds_id,))
db.commit()
db.close()
for e in os.listdir(root):
    if e.startswith("@"):
        shutil.rmtree(os.path.join(root, e))
for f in ("isc.db", "isc.db-wal", "isc.db-shm"):
    if os.path.exists(os.path.join(home, f)):
        os.remove(os.path.join(home, f))
os.rename(old, os.path.join(home, "isc.db"))
PY
old_rows() { sqlite3 "$home/isc.db" "SELECT o.name || ':' || d.name || ':' || d.copy_name FROM datasets d JOIN orgs o ON o.id = d.org_id ORDER BY 1" | tr '\n' ' '; }
check "the old store: one flat copy per name, shared across organisations" \
	test "$(old_rows)" = "acme:cifar:cifar acme:mnist-v2:mnist-v2 acme:pub:pub globex:mnist:mnist globex:pub:pub "
check "the old store: acme's cifar is on globex's bytes" test "$(cat "$home/datasets/cifar/mn/who.txt")" = "globex's private bytes"
check "the old store is at schema 14" test "$(sqlite3 "$home/isc.db" 'SELECT version FROM schema_version')" = 14
start_iscd || exit 1
check "the store is at the latest schema" test "$(sqlite3 "$home/isc.db" 'SELECT version FROM schema_version')" -gt 14
check "every copy names its organisation" test "$(sqlite3 "$home/isc.db" "SELECT COUNT(*) FROM datasets WHERE copy_name NOT LIKE '@' || org_id || '/%'")" = 0
# pub: two organisations used acme's copy; acme keeps it, globex reads its own.
check "globex's pub is cached again" wait_available pub globex
check "pub stays with acme, who made it, in acme's folder" test "$(field pub acme copy)" = "$acme_dir/pub"
check "with the same bytes" test "$(bytes pub acme)" = "public bytes"
check "pub was not read again for acme" test "$(n_req GET public-data pub.zip $acme_id)" = "$ga_pub"
check "globex's pub has its own copy in globex's folder" test "$(field pub globex copy)" = "$globex_dir/pub"
check "read again with globex's key" test "$(n_req GET public-data pub.zip $globex_id)" = $((gg_pub + 1))
# cifar: its maker removed; S3 asked with acme's keys does not confirm the copy is acme's.
check "acme's cifar is cached again" wait_available cifar acme
check "S3 was asked with acme's key first (a HeadObject)" test "$(n_req HEAD acme-data cifar.zip $acme_id)" -gt "$ha_cifar"
check "iscd says S3 did not confirm the old copy" grep -q "(cifar): S3 did not confirm that the copy of the old layout holds its object" "$dir/iscd.log"
check "acme's cifar now has its own copy in acme's folder" test "$(field cifar acme copy)" = "$acme_dir/cifar"
check "with acme's bytes, not globex's" test "$(bytes cifar acme)" = "acme's private bytes"
check "read again from acme's bucket with acme's key" test "$(n_req GET acme-data cifar.zip $acme_id)" = $((ga_cifar + 1))
# A copy one organisation alone used, confirmed by S3: moved, not read again.
check "globex's mnist moved into globex's folder" test "$(field mnist globex copy)" = "$globex_dir/mnist" -a \
	"$(bytes mnist globex)" = "globex's private bytes"
check "acme's mnist-v2 moved into acme's folder" test "$(field mnist-v2 acme copy)" = "$acme_dir/mnist-v2" -a \
	"$(bytes mnist-v2 acme)" = "$v2_bytes"
check "neither was downloaded again" test "$(n_req GET globex-data mnist.zip $globex_id)" = "$gg_mnist" -a \
	"$(n_req GET acme-data mnist.zip $acme_id)" = "$ga_mnist"
check "iscd logged the moves" test "$(grep -c "copy moved into its organisation's folder" "$dir/iscd.log")" = 3
check "nothing is left in the old places" test -z "$(ls -A "$home/datasets" | grep -v '^@')"
# A second start changes nothing.
stop_iscd
start_iscd || exit 1
check "every dataset still Available on its copy" test "$(sqlite3 "$home/isc.db" "SELECT COUNT(*) FROM datasets WHERE state = 'available'")" = 5
check "no more moves" test "$(grep -c "copy moved into its organisation's folder" "$dir/iscd.log")" = 3

finish tenancy-datasets
