# Shared by the lost-node benches (lost-nodes.sh, cloudtime.sh): sourced, needs MOCKCLOUD_URL.

# The victim of a recovery run: the middle one of experiment $1's running instances (by id),
# so neither rank 0 nor the last rank.
recovery_victim()
{
	curl -s "$MOCKCLOUD_URL/_mock/instances" | /usr/bin/python3 -c '
import json, sys
rows = sorted((r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == sys.argv[1] and r["state"] == "running"), key=lambda r: r["id"])
print(rows[len(rows) // 2]["id"])' "$1"
}

# What a recovery of experiment $1 from notice $2 to all ranks running at $3 (ms) cost:
# prints "MS BOUGHT WINDOW NEW": its time, the node-seconds of the instances launched for it,
# the node-seconds of all the experiment's instances in the window, and how many it launched.
recovery_cost()
{
	curl -s "$MOCKCLOUD_URL/_mock/instances" | /usr/bin/python3 -c '
import json, sys
exp, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [r for r in json.load(sys.stdin) if r["tags"].get("isc:experiment") == exp]
def span(r, lo):
    a = max(r["launched_at"], lo)
    b = min(r["terminated_at"] or t1, t1)
    return max(0, b - a)
new = [r for r in rows if r["launched_at"] >= t0]
bought = sum(span(r, t0) for r in new) / 1000.0
window = sum(span(r, t0) for r in rows) / 1000.0
print(t1 - t0, "%.1f" % bought, "%.1f" % window, len(new))' "$1" "$2" "$3"
}
