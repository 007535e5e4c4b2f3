"""What the mock cloud's network lets through: each cloud's ingress rules, compiled into
one file the nodes enforce (STATE_DIR/net-policy, read by tests/mocks/node/netpolicy.c,
which every process on a node loads through the node's /etc/ld.so.preload).

The mock's nodes are sshd processes on loopback addresses of one host, so the kernel
would let any of them reach any other. The cloud's rules are therefore enforced where a
connection starts: a process on node S calling connect() towards node D's address is
let through only when one of D's ingress rules admits S's address on that protocol and
port; otherwise connect() fails as a dropped SYN ends (ETIMEDOUT), at once instead of
after the kernel's two minutes. Only nodes whose network groups the mock knows are
"governed" (a `node` line); any other address (the host, the broker, a node launched
with a group id the mock never saw) is not restricted, and processes that are not on a
node (the broker, the tests) are not restricted either (they stand outside the cloud).

File format, one rule a line, written atomically (rename) whenever the state is saved:
    node DST_IP                         DST_IP's ingress is governed
    allow DST_IP PROTO LO HI SRC_CIDR   PROTO tcp|udp|icmp|all, ports LO..HI (0..65535)

AWS (EC2): an instance's rules are the union of the inbound rules of its security groups;
a rule whose source is a security group admits the private addresses of the instances in
that group; security groups only allow, and what no rule allows is dropped (EC2 User
Guide, "Security group rules" and "Security group rules for different use cases"; VPC
User Guide, "Control traffic to your AWS resources using security groups"). Every group
of the instance must be known to the mock (made with CreateSecurityGroup), else the
instance is not governed.

GCP (Compute Engine): an instance's ingress is what the network's enabled INGRESS allow
rules let in, a rule with targetTags applying only to instances carrying one of them; a
sourceRanges entry admits addresses in it, and since the mock's nodes have loopback
addresses while Compute reports the region's subnet (gce_firewall.AUTO_RANGES), a range
that holds a node's subnet admits that node too; a sourceTags entry admits the instances
carrying that tag (VPC firewall rules, https://cloud.google.com/firewall/docs/firewalls;
gce_firewall.py [FI]). Deny rules are not modelled here (the driver's own check reads
them). Governed: instances with at least one network tag (a tenant's); the others are not.

OCI: a VNIC's ingress is what any rule of its subnet's security lists or of its network
security groups allows ("a packet is allowed if any rule in any of them allows it", OCI
docs, "Network Security Groups"; oci_nsg.py [NSG]); an NSG source admits the VNICs in that
NSG. Governed: instances in at least one NSG.
"""

import ipaddress
import os

from .cloud import log

PROTOS = {"-1": "all", "all": "all", "tcp": "tcp", "6": "tcp", "udp": "udp", "17": "udp",
          "icmp": "icmp", "1": "icmp"}


def _ports(perm):
    """EC2: FromPort/ToPort, absent or -1 for all ports (and for protocol -1)."""
    lo, hi = perm.get("from"), perm.get("to")
    try:
        lo = int(lo) if lo not in (None, "") else -1
        hi = int(hi) if hi not in (None, "") else -1
    except ValueError:
        return 0, 65535
    if lo < 0 or hi < 0 or PROTOS.get(str(perm.get("proto")), "") in ("all", "icmp"):
        return 0, 65535
    return lo, hi


def _live(inst):
    return inst["state"] not in ("terminated",) and inst.get("ip")


def aws_rules(cloud):
    """(governed ips, allow tuples) of the EC2 instances."""
    sgs = cloud.extra.get("ec2_security_groups", {})
    members = {}
    for inst in cloud.instances.values():
        if inst.get("provider", "aws") == "aws" and _live(inst):
            for g in inst.get("security_groups") or []:
                members.setdefault(g, []).append(inst["ip"])
    nodes, allows = [], []
    for inst in cloud.instances.values():
        if inst.get("provider", "aws") != "aws" or not _live(inst):
            continue
        groups = inst.get("security_groups") or []
        if not groups or any(g not in sgs for g in groups):
            continue
        dst = inst["ip"]
        nodes.append(dst)
        for g in groups:
            for perm in sgs[g]["ingress"]:
                proto = PROTOS.get(str(perm["proto"]))
                if proto is None:
                    continue
                lo, hi = _ports(perm)
                for c in perm["cidrs"]:
                    allows.append((dst, proto, lo, hi, c))
                for ref in perm["groups"]:
                    for ip in members.get(ref, []):
                        allows.append((dst, proto, lo, hi, ip + "/32"))
    return nodes, allows


def _gce_ports(allowed):
    """(proto, lo, hi) of a rule's allowed[] entries."""
    out = []
    for a in allowed or []:
        proto = PROTOS.get(str(a.get("IPProtocol", "")).lower())
        if proto is None:
            continue
        ports = a.get("ports") or []
        if not ports or proto in ("all", "icmp"):
            out.append((proto, 0, 65535))
            continue
        for pr in ports:
            lo, _, hi = str(pr).partition("-")
            try:
                out.append((proto, int(lo), int(hi or lo)))
            except ValueError:
                continue
    return out


def gcp_rules(cloud):
    from . import gce_firewall
    st = cloud.extra.get("gce") or {}
    rules = st.get("firewalls")
    if rules is None:
        rules = {r["name"]: dict(r, network="global/networks/default", direction="INGRESS", disabled=False)
                 for r in gce_firewall.DEFAULT_RULES}
    live = [i for i in cloud.instances.values()
            if i.get("provider") == "gcp" and _live(i) and not i.get("gce_deleted")]
    nodes, allows = [], []
    for dst in live:
        dtags = set(dst.get("network_tags") or [])
        if not dtags:
            continue
        nodes.append(dst["ip"])
        for r in rules.values():
            if r.get("disabled") or r.get("direction", "INGRESS") != "INGRESS" or not r.get("allowed"):
                continue
            if r.get("targetTags") and not dtags & set(r["targetTags"]):
                continue
            srcs = []
            for c in r.get("sourceRanges") or []:
                try:
                    net = ipaddress.ip_network(c, strict=False)
                except ValueError:
                    continue
                if net.version != 4:
                    continue
                srcs.append(str(net))
                for src in live:
                    sub = gce_firewall.AUTO_RANGES.get(src.get("region"))
                    if sub and ipaddress.ip_network(sub).subnet_of(net):
                        srcs.append(src["ip"] + "/32")
            for tg in r.get("sourceTags") or []:
                srcs += [src["ip"] + "/32" for src in live if tg in (src.get("network_tags") or [])]
            for proto, lo, hi in _gce_ports(r["allowed"]):
                allows += [(dst["ip"], proto, lo, hi, c) for c in srcs]
    return nodes, allows


def _oci_ports(rule):
    proto = {"all": "all", "6": "tcp", "17": "udp", "1": "icmp"}.get(str(rule.get("protocol")))
    if proto is None:
        return None
    opts = rule.get("tcpOptions") if proto == "tcp" else rule.get("udpOptions") if proto == "udp" else None
    rng = (opts or {}).get("destinationPortRange") or {}
    try:
        return proto, int(rng.get("min", 0)), int(rng.get("max", 65535))
    except (TypeError, ValueError):
        return None


def oci_rules(cloud):
    from . import oci_nsg
    st = cloud.extra.get("oci") or {}
    lists = st.get("security_lists") or {}
    groups = oci_nsg.nsgs(cloud)
    subnet_lists = {"ocid1.subnet.oc1..aaaaaaaamocktraining": ["ocid1.securitylist.oc1..aaaaaaaamocktraining"],
                    "ocid1.subnet.oc1..aaaaaaaamocknorule": ["ocid1.securitylist.oc1..aaaaaaaamocknorule"]}
    nodes, allows = [], []
    for dst in cloud.instances.values():
        if dst.get("provider") != "oci" or not _live(dst) or not dst.get("nsg_ids"):
            continue
        nodes.append(dst["ip"])
        rules = [r for sl in subnet_lists.get(dst.get("subnet_id"), []) for r in (lists.get(sl) or {}).get("rules", [])]
        rules = [dict(r, sourceType=r.get("sourceType", "CIDR_BLOCK"), direction="INGRESS") for r in rules]
        for gid in dst["nsg_ids"]:
            rules += [r for r in (groups.get(gid) or {}).get("rules", []) if r.get("direction") == "INGRESS"]
        for r in rules:
            pp = _oci_ports(r)
            if pp is None:
                continue
            if r.get("sourceType") == "NETWORK_SECURITY_GROUP":
                srcs = [i["ip"] + "/32" for i in oci_nsg.members(cloud, r.get("source"))]
            elif r.get("sourceType") == "CIDR_BLOCK":
                srcs = [r.get("source")]
            else:
                srcs = []
            allows += [(dst["ip"], pp[0], pp[1], pp[2], c) for c in srcs if c]
    return nodes, allows


COMPILERS = [aws_rules, gcp_rules, oci_rules]


def render(cloud):
    nodes, allows = [], []
    for fn in COMPILERS:
        n, a = fn(cloud)
        nodes += n
        allows += a
    lines = ["# mockcloud net-policy: see tests/mocks/mockcloud_lib/netpolicy.py"]
    lines += ["node %s" % ip for ip in sorted(set(nodes))]
    for dst, proto, lo, hi, src in sorted(set(allows)):
        try:
            src = str(ipaddress.ip_network(src, strict=False))
        except ValueError:
            continue
        lines.append("allow %s %s %d %d %s" % (dst, proto, lo, hi, src))
    return "\n".join(lines) + "\n"


def path_of(cloud):
    return os.path.join(cloud.state_dir, "net-policy")


def write(cloud):
    """Rewrites the policy when it changed (called with cloud.lock held, from save())."""
    try:
        text = render(cloud)
    except Exception as e:  # a rule the compiler cannot read must not stop the cloud
        log("net-policy: %r" % (e,))
        return
    if getattr(cloud, "_net_policy_text", None) == text:
        return
    p = path_of(cloud)
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, p)
    cloud._net_policy_text = text
