#!/usr/bin/env bash
# Real PyTorch on the sandbox (issue 31): Debian's python3-torch (1.13, gloo on CPU), one
# process per node, rendezvous from the broker's environment (init_method="env://").
# The container's command runs on the mock node through the docker stand-in: a process
# on this machine in the node's mount namespace (/mnt is the node's own), with the
# broker's environment and the image's PATH, so the scripts are started as
# /usr/bin/python3 from the repository (which the node sees).
#
# 1. The fabric check and failover: the nodes have 4 EFA devices (NODE_FABRIC=efa:4),
#    except the first one to come up (NODE_FABRIC_SKIP_FILE): a 2-node p4d gang on it
#    fails over like a capacity error, the p4de gang after it boots with the devices.
# 2. An all_reduce across 2 nodes.
# 3. A DDP job with checkpoint/resume, its spot node interrupted mid-run: it completes,
#    every rank resumed from the same step in cycle 2, and the weights are equal on all
#    ranks at the end.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
scripts=$repo/tests/integration/torch
dir=$(mktemp -d /tmp/isc-torch.XXXXXX)
cleanup() {
	"$repo/tests/mocks/sandbox" stop "$dir" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	echo "torch.sh: /usr/bin/python3 has no torch (make test-deps installs python3-torch)" >&2
	if [ "${ISC_ALLOW_SKIP:-0}" = 1 ]; then
		echo "torch: SKIPPED (ISC_ALLOW_SKIP=1)"
		exit 0
	fi
	finish torch
	exit 1
fi

echo 1 >"$dir/fabric-skip"
NODE_FABRIC=efa:4 NODE_FABRIC_SKIP_FILE=$dir/fabric-skip ISC_BIN=$ISC_BIN SANDBOX_TICK_MS=200 \
	"$repo/tests/mocks/sandbox" start --no-iscd "$dir" >/dev/null || exit 1
. "$dir/env"
# The rendezvous port: free on this machine (every node's network is the host's), so
# two suites never meet on 29500.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "1i master_port = $port" "$ISC_HOME/config.toml"

"$ISC_BIN/iscd" 2>"$dir/iscd.log" &
echo $! >"$dir/iscd.pid"

out_of() { isc status "$1" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["output_path"])'; }
node_dir() { mock instances | /usr/bin/python3 -c '
import json, sys
print([r for r in json.load(sys.stdin) if r["id"] == sys.argv[1]][0]["node_dir"])' "$1"; }

# 1. The fabric check: p4d promises EFA to a 2-node gang; one of its nodes lacks it.
cat >"$dir/fabric.isc" <<ISC
isc_project_id = "demo"
experiment_name = "fabric"
gpus = 16
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-p4d.24xlarge-spot", "aws-us-east-1-p4de.24xlarge-spot"]
command = 'ulimit -l; ls /dev/infiniband; env | grep -E "^(NCCL|GLOO)_SOCKET_IFNAME=" | sort'
ISC
id=$(submit "$dir/fabric.isc")
check "fabric: the burst completes" wait_status "$id" completed 90
isc status "$id" >"$dir/fabric.status" 2>&1
check "fabric: a node without EFA devices fails the p4d gang over" grep -q "promises efa between its nodes, but this node has no /dev/infiniband/uverbs\* device" "$dir/fabric.status"
check "fabric: ... like a capacity error: the next shape is tried" grep -q "boot on aws-us-east-1-p4d.24xlarge-spot failed; trying the next shape" "$dir/fabric.status"
check "fabric: each node's check is in the timeline" test "$(grep -c 'efa promised to the gang: 4 uverbs device(s)' "$dir/fabric.status")" -ge 2
check "fabric: the lacking node's finding is recorded too" grep -q "efa promised to the gang: 0 uverbs device(s)" "$dir/fabric.status"
check "fabric: libfabric's view is recorded (fi_info: one efa domain per device)" grep -q "(4 passed with --device), fi_info: 4 efa domain(s); socket interface lo" "$dir/fabric.status"
out=$(out_of "$id")
check "fabric: the container sees the 4 devices it was given" bash -c "grep -c '^uverbs[0-3]$' '$out/rank_1.txt' | grep -qx 4"
check "fabric: NCCL and gloo sockets on the node's interface (lo on the sandbox)" bash -c "grep -qx 'NCCL_SOCKET_IFNAME=lo' '$out/rank_0.txt' && grep -qx 'GLOO_SOCKET_IFNAME=lo' '$out/rank_0.txt'"
# docker's records on the p4de node: the flags it was given, checked by the stand-in.
victim=$(mock instances | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["instance_type"] == "p4de.24xlarge"]
print(rows[0]["id"] if rows else "")' "$id")
hc=$(cat "$(node_dir "$victim")"/containers*/isc-*/hostconfig 2>/dev/null)
check "fabric: docker got --device for each uverbs device" test "$(grep -c '^device=/dev/infiniband/uverbs' <<<"$hc")" = 4
check "fabric: docker got --ulimit memlock=-1:-1 and IPC_LOCK" bash -c "grep -qx 'ulimit=memlock=-1:-1' <<<'$hc' && grep -qx 'cap_add=CAP_IPC_LOCK' <<<'$hc'"
mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
check "fabric: --shm-size is half the node's RAM by default" grep -qx "shm_size=$((mem_kib / 2 * 1024))" <<<"$hc"
check "fabric: nothing left" wait_no_live

# 2. all_reduce across 2 nodes.
cat >"$dir/allreduce.isc" <<ISC
isc_project_id = "demo"
experiment_name = "allreduce"
gpus = 2
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = '/usr/bin/python3 $scripts/allreduce.py'
ISC
id=$(submit "$dir/allreduce.isc")
check "allreduce: completes" wait_status "$id" completed 90
out=$(out_of "$id")
check "allreduce: rank 0 has the sum of both ranks" grep -q "allreduce rank=0 world=2 sum=3,30 torch=1.13" "$out/rank_0.txt"
check "allreduce: rank 1 has the same sum" grep -q "allreduce rank=1 world=2 sum=3,30" "$out/rank_1.txt"
check "allreduce: nothing left" wait_no_live

# 3. DDP with checkpoint/resume, interrupted mid-run.
cat >"$dir/ddp.isc" <<ISC
isc_project_id = "demo"
experiment_name = "ddp"
gpus = 2
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = '/usr/bin/python3 $scripts/ddp.py 60 0.2'
ISC
id=$(submit "$dir/ddp.isc")
check "ddp: runs" wait_status "$id" running 60
out=$(out_of "$id")
# Mid-run, with a checkpoint home: rank 0 saved at step 10 and the broker synced it.
check "ddp: a checkpoint came home mid-run" bash -c "for i in \$(seq 1 300); do grep -q 'step rank=0 step=12 ' '$out/rank_0.txt' 2>/dev/null && test -s '$ISC_HOME/experiments/$id/checkpoints/ddp.pt' && exit 0; sleep 0.1; done; exit 1"
victim=$(mock instances | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "running"]
print(sorted(rows, key=lambda r: r["launched_at"])[-1]["id"] if rows else "")' "$id")
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":3}"
check "ddp: the interruption is seen" bash -c "for i in \$(seq 1 100); do '$ISC_BIN/isc' status '$id' | grep -q interrupted && exit 0; sleep 0.2; done; exit 1"
check "ddp: completes after the interruption (no rank hangs)" wait_status "$id" completed 150
check "ddp: it ran a second cycle" test "$(status_of "$id" cycle_count)" = 2
/usr/bin/python3 - "$out" >"$dir/ddp.verdict" 2>&1 <<'PY'
import re, sys
out = sys.argv[1]
resume, done = {}, {}
for r in (0, 1):
    text = open("%s/rank_%d.txt" % (out, r)).read()
    for m in re.finditer(r"resume rank=(\d) step=(\d+) cycle=(\d+)", text):
        resume[(int(m.group(1)), int(m.group(3)))] = int(m.group(2))
    for m in re.finditer(r"done rank=(\d) step=(\d+) weights=([0-9a-f]{64})", text):
        done[int(m.group(1))] = (int(m.group(2)), m.group(3))
print("resume", resume, "done", done)
ok = (resume.get((0, 1)) == 0 and resume.get((1, 1)) == 0
      and resume.get((0, 2), 0) > 0 and resume.get((0, 2)) == resume.get((1, 2))
      and set(done) == {0, 1} and done[0] == done[1] and done[0][0] == 60)
sys.exit(0 if ok else 1)
PY
check "ddp: every rank resumed from the same step in cycle 2, weights equal on all ranks" test $? = 0
cat "$dir/ddp.verdict" >&2
check "ddp: the restore reached every node (rank 1 read the checkpoint)" grep -Eq "resume rank=1 step=[1-9][0-9]* cycle=2" "$out/rank_1.txt"
check "ddp: nothing left" wait_no_live

# 4. The early start (issue 46): a 2-node DDP job loses a node; the replacement boots for
#    8 s, and the kept rank's container starts at once and waits in the real PyTorch
#    rendezvous (init_process_group, env://) until the new rank joins; then both train to
#    the end with equal weights. The witness is the ranks' own clock: the kept rank entered
#    the rendezvous seconds before the new one, and both left it together.
cat >"$dir/early.isc" <<ISC
isc_project_id = "demo"
experiment_name = "early"
gpus = 2
compute_mode = "burst"
burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]
command = '/usr/bin/python3 $scripts/ddp.py 40 0.2'
ISC
mock boot_delay -X POST -d '{"ms":300}' >/dev/null
id=$(submit "$dir/early.isc")
check "early: runs" wait_status "$id" running 60
out=$(out_of "$id")
check "early: a checkpoint came home" bash -c "for i in \$(seq 1 300); do test -s '$ISC_HOME/experiments/$id/checkpoints/ddp.pt' && grep -q 'step rank=0 step=7 ' '$out/rank_0.txt' 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
victim=$(mock instances | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "running"]
print(sorted(rows, key=lambda r: r["launched_at"])[-1]["id"] if rows else "")' "$id")
mock boot_delay -X POST -d '{"ms":8000}' >/dev/null
fault "{\"kind\":\"interrupt\",\"instance_id\":\"$victim\",\"notice_s\":3}"
check "early: completes after the loss" wait_status "$id" completed 150
mock boot_delay -X POST -d '{"ms":300}' >/dev/null
check "early: the kept rank's container started while the new node booted" bash -c "'$ISC_BIN/isc' status '$id' | grep -q 'wait for the new one(s) in the rendezvous'"
/usr/bin/python3 - "$out" >"$dir/early.verdict" 2>&1 <<'PY'
import re, sys
out = sys.argv[1]
ent, joined, done = {}, {}, {}
for r in (0, 1):
    text = open("%s/rank_%d.txt" % (out, r)).read()
    for m in re.finditer(r"rendezvous rank=(\d) cycle=2 t=(\d+)", text):
        ent.setdefault(int(m.group(1)), []).append(int(m.group(2)))
    for m in re.finditer(r"joined rank=(\d) cycle=2 t=(\d+)", text):
        joined[int(m.group(1))] = int(m.group(2))
    for m in re.finditer(r"done rank=(\d) step=(\d+) weights=([0-9a-f]{64})", text):
        done[int(m.group(1))] = (int(m.group(2)), m.group(3))
print("entered", ent, "joined", joined, "done", done)
first = {r: min(t) for r, t in ent.items()}
last = {r: max(t) for r, t in ent.items()}
ok = (set(first) == {0, 1} and set(joined) == {0, 1}
      # one rank (the kept one) entered the rendezvous at least 4 s before the other
      and abs(first[0] - first[1]) >= 4000
      # and waited there: it left only once the late one had come
      and min(joined.values()) >= max(last.values()) - 500
      and abs(joined[0] - joined[1]) < 3000
      and set(done) == {0, 1} and done[0] == done[1] and done[0][0] == 40)
sys.exit(0 if ok else 1)
PY
check "early: the kept rank waited in the rendezvous for the new one, then both trained to equal weights" test $? = 0
cat "$dir/early.verdict" >&2
check "early: nothing left" wait_no_live

finish torch
