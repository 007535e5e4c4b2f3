#!/usr/bin/env bash
# Tenants on the platform's account cannot reach each other's nodes (issue 42;
# docs/security.md, "Tenants on the platform's account"). Two organisations burst on the
# platform's account of each cloud of the sandbox (AWS, GCP, OCI): org A a gang of two nodes whose rank 0
# listens on MASTER_ADDR:MASTER_PORT (the rendezvous port, as PyTorch's TCPStore does),
# org B one node. Then:
#  - org A's rank 1 reaches the port (its own gang; what torchrun needs);
#  - a process on org B's node cannot connect to it (ETIMEDOUT: the cloud dropped it), and
#    the node's denial log names the connection;
#  - a process on org A's second node can, and so can the test itself (outside the cloud:
#    the listener is up, so the refusal is the rule's);
#  - each organisation's nodes are in a group of their own (AWS security group, GCP network
#    tag, OCI network security group), with the rule "all traffic from the group itself"
#    (GCP: sourceTags = targetTags; OCI: source type NETWORK_SECURITY_GROUP = itself);
#  - once the bursts are over the groups (rules) are swept.
# The mock cloud enforces the rules on its nodes (tests/mocks/mockcloud_lib/netpolicy.py,
# tests/mocks/node/netpolicy.c); "a process on a node" is one started in the node's mount
# namespace (nsenter), where every program loads the filter, as ssh sessions and
# containers do.
. "$(dirname "$0")/lib.sh"
sandbox_dir tenant-net
[ "$(id -u)" -eq 0 ] || {
	echo "# not root: mock nodes need root"
	finish tenant-net
}
SANDBOX_TICK_MS=200 "$repo/tests/mocks/sandbox" start "$dir" >/dev/null || exit 1
. "$dir/env"
py() { /usr/bin/python3 "$@"; }

isc org add orgb >/dev/null && isc project add --org orgb vision >/dev/null &&
	isc credits grant --org orgb 100 >/dev/null
check "org B is set up" test $? -eq 0

# Rank 0 listens on the rendezvous address; rank 1 connects to it and says how it went.
cat >"$dir/rdzv.py" <<'PY'
import os, socket, sys, time
out = sys.argv[1]
addr, port, rank = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), os.environ["RANK"]
if rank == "0":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    open(out + ".listening", "w").write("%s %d\n" % (addr, port))
    while True:
        c, peer = s.accept()
        c.sendall(b"store\n")
        c.close()
else:
    res = "never"
    for _ in range(200):
        try:
            c = socket.create_connection((addr, port), 2)
            res = "ok " + c.recv(16).decode().strip()
            break
        except OSError as e:
            res = "error %s" % e
            time.sleep(0.1)
    open(out + ".rank1", "w").write(res + "\n")
    time.sleep(600)
PY
# probe.py HOST PORT: connects once; prints "ok store" or "error ERRNO-NAME".
cat >"$dir/probe.py" <<'PY'
import errno, socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)
    print("ok " + c.recv(16).decode().strip())
except OSError as e:
    print("error " + errno.errorcode.get(e.errno, str(e.errno)))
PY

# on_node INSTANCE CMD...: CMD as a process of that mock node (its mount namespace).
on_node() {
	local nd pid
	nd=$(mock instances | py -c 'import json,sys
for r in json.load(sys.stdin):
    if r["id"] == sys.argv[1]: print(r["node_dir"])' "$1")
	pid=$(cat "$nd/sshd.pid")
	shift
	nsenter -t "$pid" -m "$@"
}
# ids EXP: the experiment's live instances, launch order, "id ip" per line.
ids() {
	mock instances | py -c "$_rows_of_py"'
for r in rows_of(sys.argv[1]):
    if r["state"] != "terminated": print(r["id"], r["ip"])' "$1"
}

# run_cloud NAME SHAPE: the whole check on one cloud's shape.
run_cloud() {
	local cloud=$1 shape=$2 a b a0 a0ip a1 b0 port out
	out=$dir/$cloud
	cat >"$dir/a-$cloud.isc" <<ISC
isc_project_id = "demo"
experiment_name = "tenant-a-$cloud"
gpus = 2
compute_mode = "burst"
burst_shape_priority_list = ["$shape"]
command = 'python3 $dir/rdzv.py $out'
ISC
	cat >"$dir/b-$cloud.isc" <<ISC
isc_project_id = "vision"
experiment_name = "tenant-b-$cloud"
gpus = 1
compute_mode = "burst"
burst_shape_priority_list = ["$shape"]
command = 'sleep 600'
ISC
	a=$(submit "$dir/a-$cloud.isc")
	b=$(submit "$dir/b-$cloud.isc")
	check "$cloud: both bursts submitted" test -n "$a" -a -n "$b"
	check "$cloud: org A's gang runs" wait_status "$a" running 120
	check "$cloud: org B's node runs" wait_status "$b" running 120
	for _ in $(seq 150); do [ -s "$out.rank1" ] && break; sleep 0.2; done
	check "$cloud: org A's rank 1 reached the rendezvous port" grep -q "^ok store" "$out.rank1"
	read -r a0ip port <"$out.listening"
	a0=$(ids "$a" | awk -v ip="$a0ip" '$2 == ip {print $1}')
	a1=$(ids "$a" | awk -v ip="$a0ip" '$2 != ip {print $1}' | head -1)
	b0=$(ids "$b" | awk '{print $1}' | head -1)
	check "$cloud: the nodes are known ($a0 $a1 $b0)" test -n "$a0" -a -n "$a1" -a -n "$b0"
	res=$(py "$dir/probe.py" "$a0ip" "$port")
	check "$cloud: the test itself (outside the cloud) reaches org A's port ($res)" test "$res" = "ok store"
	res=$(on_node "$a1" /usr/bin/python3 "$dir/probe.py" "$a0ip" "$port")
	check "$cloud: a process on org A's second node connects ($res)" test "$res" = "ok store"
	res=$(on_node "$b0" /usr/bin/python3 "$dir/probe.py" "$a0ip" "$port")
	check "$cloud: a process on org B's node cannot connect to org A's port ($res)" test "$res" = "error ETIMEDOUT"
	nd=$(mock instances | py -c 'import json,sys
for r in json.load(sys.stdin):
    if r["id"] == sys.argv[1]: print(r["node_dir"])' "$b0")
	check "$cloud: org B's node logged the denied connection" grep -q "tcp .* -> $a0ip:$port denied" "$nd/net/denied"
	res=$(on_node "$b0" bash -c "exec 3<>/dev/tcp/$a0ip/$port && echo ok || echo refused" 2>&1)
	check "$cloud: bash's /dev/tcp on org B's node is refused too ($res)" bash -c "! echo '$res' | grep -q '^ok'"
	echo "$a $b" >"$out.exps"
}

# ---- AWS ----
run_cloud aws aws-us-east-1-g4dn.xlarge-spot
read -r a b <"$dir/aws.exps"
mock security_groups >"$dir/sgs.json"
groups_of() { # EXP: the security groups of its live instances
	mock instances | py -c "$_rows_of_py"'
print(" ".join(sorted({g for r in rows_of(sys.argv[1]) if r["state"] != "terminated" for g in r["security_groups"]})))' "$1"
}
ga=$(groups_of "$a")
gb=$(groups_of "$b")
check "aws: each organisation's nodes are in one group ($ga / $gb)" test -n "$ga" -a -n "$gb" -a "$ga" != "$gb" -a "${ga// /}" = "$ga" -a "${gb// /}" = "$gb"
check "aws: org A's group admits all traffic from itself, and SSH from the broker only" py -c '
import json, sys
g = {x["id"]: x for x in json.load(open(sys.argv[1]))}[sys.argv[2]]
rules = sorted((r["proto"], r["groups"], r["cidrs"], r["from"]) for r in g["ingress"])
assert rules == [("-1", [sys.argv[2]], [], None), ("tcp", [], ["127.0.0.1/32"], "2222")], rules
assert g["name"].startswith("isc-tenant-") and g["tags"]["isc:tenant"], g
' "$dir/sgs.json" "$ga"
isc cancel "$a" >/dev/null
isc cancel "$b" >/dev/null
check "aws: the bursts end" wait_no_live
swept() { [ "$(mock security_groups | py -c 'import json,sys; print(len([g for g in json.load(sys.stdin) if g["name"].startswith("isc-tenant-")]))')" = 0 ]; }
for _ in $(seq 150); do swept && break; sleep 0.2; done
check "aws: the tenant groups are swept once no live instance uses them" swept

# ---- GCP ----
run_cloud gcp gcp-us-central1-g2-standard-4-spot
read -r a b <"$dir/gcp.exps"
tags_of() { # EXP: the network tags of its live instances
	mock instances | py -c "$_rows_of_py"'
print(" ".join(sorted({g for r in rows_of(sys.argv[1]) if r["state"] != "terminated" for g in r.get("network_tags") or []})))' "$1"
}
ta=$(tags_of "$a")
tb=$(tags_of "$b")
check "gcp: each organisation's nodes carry one tag of their own ($ta / $tb)" test -n "$ta" -a -n "$tb" -a "$ta" != "$tb" -a "${ta// /}" = "$ta" -a "${tb// /}" = "$tb"
mock gcp/firewalls >"$dir/fw.json"
check "gcp: org A's rule admits its own tag only, all protocols, ingress" py -c '
import json, sys
r = {x["name"]: x for x in json.load(open(sys.argv[1]))}[sys.argv[2]]
assert r["sourceTags"] == [sys.argv[2]] and r["targetTags"] == [sys.argv[2]], r
assert "sourceRanges" not in r and r["direction"] == "INGRESS", r
assert r["allowed"] == [{"IPProtocol": "all"}], r
' "$dir/fw.json" "$ta"
isc cancel "$a" >/dev/null
isc cancel "$b" >/dev/null
check "gcp: the bursts end" wait_no_live
fw_swept() { [ "$(mock gcp/firewalls | py -c 'import json,sys; print(len([r for r in json.load(sys.stdin) if r["name"].startswith("isc-t-")]))')" = 0 ]; }
for _ in $(seq 150); do fw_swept && break; sleep 0.2; done
check "gcp: the tenant rules are swept once no live instance carries their tag" fw_swept

# ---- OCI ----
run_cloud oci oci-us-ashburn-1-VM.GPU3.1-spot
read -r a b <"$dir/oci.exps"
nsgs_of() { # EXP: the NSG ids of its live instances (the mock's record of each VNIC)
	py - "$MOCKCLOUD_URL" "$1" "$dir/mock/state.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[3]))
print(" ".join(sorted({g for i in st["instances"] if i.get("provider") == "oci" and i["state"] != "terminated"
                       and (i.get("tags") or {}).get("isc:experiment") == sys.argv[2] for g in i.get("nsg_ids") or []})))
PY
}
na=$(nsgs_of "$a")
nb=$(nsgs_of "$b")
check "oci: each organisation's nodes are in one NSG of their own ($na / $nb)" test -n "$na" -a -n "$nb" -a "$na" != "$nb" -a "${na// /}" = "$na" -a "${nb// /}" = "$nb"
check "oci: org A's NSG admits all from itself, and SSH from the broker only" py - "$dir/mock/state.json" "$na" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["extra"]["oci_nsgs"][sys.argv[2]]
rules = sorted((r["protocol"], r["sourceType"], r["source"]) for r in g["rules"])
assert rules == [("6", "CIDR_BLOCK", "127.0.0.1/32"), ("all", "NETWORK_SECURITY_GROUP", sys.argv[2])], rules
assert g["tags"]["isc:tenant"] and g["display_name"].startswith("isc-tenant-"), g
PY
isc cancel "$a" >/dev/null
isc cancel "$b" >/dev/null
check "oci: the bursts end" wait_no_live
nsg_swept() { [ "$(py -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["extra"].get("oci_nsgs", {})))' "$dir/mock/state.json")" = 0 ]; }
for _ in $(seq 150); do nsg_swept && break; sleep 0.2; done
check "oci: the tenant NSGs are swept once no VNIC is in them" nsg_swept

finish tenant-net
