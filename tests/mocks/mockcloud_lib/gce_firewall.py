"""Compute Engine VPC firewall rules and subnetworks for the mock: the global collection
projects/P/global/firewalls (list, get) and projects/P/regions/R/subnetworks/NAME (get), so a
driver can check, before a gang launches, that its nodes may reach one another over TCP.
gce.py routes here; /_mock/gcp/firewalls lets a test remove or add a rule.

References (cited beside each rule):
  [FW]  Compute v1 firewalls.list / Firewall resource (network, direction INGRESS|EGRESS,
        allowed[].IPProtocol / ports, denied[], sourceRanges, sourceTags, targetTags,
        disabled, priority 0..65535, default 1000)
        https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/list
  [DR]  "VPC firewall rules": the default network's pre-populated rules (default-allow-internal:
        INGRESS from 10.128.0.0/9, tcp:0-65535, udp:0-65535, icmp, priority 65534;
        default-allow-ssh tcp:22, default-allow-rdp tcp:3389, default-allow-icmp, from
        0.0.0.0/0, priority 65534) https://cloud.google.com/firewall/docs/firewalls#more_rules_default_vpc
  [SN]  Compute v1 subnetworks.get / Subnetwork (ipCidrRange, network, region)
        https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks/get
  [FI]  Compute v1 firewalls.insert / firewalls.delete: a global Operation
        (globalOperations.get); a name already there: 409 alreadyExists; sourceTags only for
        INGRESS rules; requestId makes a retry return the first Operation
        https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/insert
        "VPC firewall rules" (https://cloud.google.com/firewall/docs/firewalls): rules allow or
        deny; ingress not allowed is denied (implied deny); a rule with targetTags applies to
        instances with one of those network tags, one without to every instance; a source
        tag matches traffic from instances with that tag (their primary internal address);
        enforced on the nodes through netpolicy.py (allows only: deny rules are not modelled
        there)
  [AM]  Auto mode VPC networks: one subnet per region, named after the network, inside
        10.128.0.0/9 (the per-region ranges table)
        https://cloud.google.com/vpc/docs/subnets#ip-ranges
"""

import copy
import hashlib
import ipaddress
import json
import re
import secrets

from .cloud import log, now_ms

SELF = "https://www.googleapis.com/compute/v1/"
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")

# Auto mode subnet ranges of some regions [AM]; another region's subnet is not found (404).
AUTO_RANGES = {
    "us-central1": "10.128.0.0/20", "europe-west1": "10.132.0.0/20", "us-west1": "10.138.0.0/20",
    "asia-east1": "10.140.0.0/20", "us-east1": "10.142.0.0/20", "asia-northeast1": "10.146.0.0/20",
    "asia-southeast1": "10.148.0.0/20", "us-east4": "10.150.0.0/20", "europe-west2": "10.154.0.0/20",
    "europe-west3": "10.156.0.0/20", "europe-west4": "10.164.0.0/20", "us-west4": "10.182.0.0/20",
}

# The default network's rules [DR].
DEFAULT_RULES = [
    {"name": "default-allow-internal", "description": "Allow internal traffic on the default network",
     "sourceRanges": ["10.128.0.0/9"],
     "allowed": [{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]},
                 {"IPProtocol": "icmp"}]},
    {"name": "default-allow-ssh", "description": "Allow SSH from anywhere", "sourceRanges": ["0.0.0.0/0"],
     "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}]},
    {"name": "default-allow-rdp", "description": "Allow RDP from anywhere", "sourceRanges": ["0.0.0.0/0"],
     "allowed": [{"IPProtocol": "tcp", "ports": ["3389"]}]},
    {"name": "default-allow-icmp", "description": "Allow ICMP from anywhere", "sourceRanges": ["0.0.0.0/0"],
     "allowed": [{"IPProtocol": "icmp"}]},
]


def _err(status, reason, message):
    from .gce import GceError
    return GceError(status, reason, message)


def _ts():
    from .gce import rfc3339
    return rfc3339(now_ms())


def _state(gce):
    st = gce.state
    if "firewalls" not in st:
        st["firewalls"] = {}
        for i, r in enumerate(DEFAULT_RULES):
            rule = dict(copy.deepcopy(r), network="global/networks/default", direction="INGRESS",
                        priority=65534, disabled=False, id=str(6000000000000000000 + i), created=_ts())
            st["firewalls"][rule["name"]] = rule
    return st


def firewall_json(gce, r):
    """A Firewall resource [FW]: empty lists are left out, as Compute does."""
    out = {"kind": "compute#firewall", "id": r["id"], "creationTimestamp": r["created"], "name": r["name"],
           "network": "%sprojects/%s/%s" % (SELF, gce.project, r["network"]), "priority": r["priority"],
           "direction": r["direction"], "disabled": r["disabled"],
           "selfLink": "%sprojects/%s/global/firewalls/%s" % (SELF, gce.project, r["name"]),
           "logConfig": {"enable": False}}
    for k in ("description", "allowed", "denied", "sourceRanges", "destinationRanges", "sourceTags",
              "targetTags", "sourceServiceAccounts", "targetServiceAccounts"):
        if r.get(k):
            out[k] = copy.deepcopy(r[k])
    return out


def _check_rule(body):
    """A rule added through /_mock/gcp/firewalls follows the resource's rules [FW]."""
    name = body.get("name") or ""
    if not NAME_RE.match(name):
        raise ValueError("name must match %s" % NAME_RE.pattern)
    if body.get("direction", "INGRESS") not in ("INGRESS", "EGRESS"):
        raise ValueError("direction is INGRESS or EGRESS")
    if bool(body.get("allowed")) == bool(body.get("denied")):
        raise ValueError("exactly one of allowed[] and denied[]")
    pr = int(body.get("priority", 1000))
    if not 0 <= pr <= 65535:
        raise ValueError("priority is 0..65535")
    for a in (body.get("allowed") or []) + (body.get("denied") or []):
        proto = a.get("IPProtocol")
        if not proto:
            raise ValueError("IPProtocol is required")
        if a.get("ports") and proto not in ("tcp", "udp", "sctp"):
            raise ValueError("ports only with tcp, udp or sctp")
    for c in body.get("sourceRanges") or []:
        ipaddress.ip_network(c, strict=False)
    return pr


def route(gce, method, p):
    """(action, region, handler) for global/firewalls and regions/R/subnetworks/NAME, or None."""
    n = len(p)
    if n == 4 and p[2] == "global" and p[3] == "firewalls" and method == "GET":
        return "firewalls.list", None, lambda pp, q, b, h: list_(gce, q)
    if n == 4 and p[2] == "global" and p[3] == "firewalls" and method == "POST":
        return "firewalls.insert", None, lambda pp, q, b, h: insert(gce, q, b)
    if n == 5 and p[2] == "global" and p[3] == "firewalls" and method == "GET":
        return "firewalls.get", None, lambda pp, q, b, h: get(gce, p[4])
    if n == 5 and p[2] == "global" and p[3] == "firewalls" and method == "DELETE":
        return "firewalls.delete", None, lambda pp, q, b, h: delete(gce, q, p[4])
    if n == 5 and p[2] == "global" and p[3] == "operations" and method == "GET":
        return "globalOperations.get", None, lambda pp, q, b, h: op_get(gce, p[4])
    if n == 6 and p[2] == "global" and p[3] == "operations" and p[5] == "wait" and method == "POST":
        return "globalOperations.wait", None, lambda pp, q, b, h: op_get(gce, p[4])
    if n == 6 and p[2] == "regions" and p[4] == "subnetworks" and method == "GET":
        return "subnetworks.get", p[3], lambda pp, q, b, h: subnet_get(gce, p[3], p[5])
    return None


def _op(gce, op_type, target):
    """A global Operation, DONE at once (a firewall change is quick) [FI]."""
    st = _state(gce)
    ops = st.setdefault("global_operations", {})
    gce.state["op_counter"] += 1
    name = "operation-%d-%s" % (now_ms(), secrets.token_hex(6))
    base = "%sprojects/%s/global" % (SELF, gce.project)
    op = {"kind": "compute#operation", "id": str(8100000000000000000 + gce.state["op_counter"]), "name": name,
          "operationType": op_type, "status": "DONE", "progress": 100, "user": gce.email,
          "targetLink": "%s/firewalls/%s" % (base, target), "insertTime": _ts(), "startTime": _ts(),
          "endTime": _ts(), "selfLink": "%s/operations/%s" % (base, name)}
    ops[name] = op
    return op


def _replay(gce, rid):
    r = gce.state["requests"].get("global|%s" % rid) if rid else None
    return _state(gce).get("global_operations", {}).get(r["op"]) if r else None


def insert(gce, q, body):
    rid = gce._request_id(q)
    try:
        req = json.loads(body or b"{}")
    except ValueError:
        raise _err(400, "parseError", "Parse Error")
    if not isinstance(req, dict):
        raise _err(400, "invalid", "Invalid value for field 'resource'.")
    with gce.lock:
        prev = _replay(gce, rid)
        if prev is not None:
            return 200, prev
        try:
            pr = _check_rule(req)
        except (ValueError, TypeError) as e:
            raise _err(400, "invalid", "Invalid value for field 'resource': %s" % e)
        direction = req.get("direction", "INGRESS")
        if req.get("sourceTags") and direction != "INGRESS":
            raise _err(400, "invalid", "Source tags cannot be set for an EGRESS firewall rule.")
        for tg in (req.get("sourceTags") or []) + (req.get("targetTags") or []):
            if not isinstance(tg, str) or not NAME_RE.match(tg):
                raise _err(400, "invalid", "Invalid value for field 'resource.sourceTags': '%s'." % tg)
        net = (req.get("network") or "global/networks/default").split("/projects/%s/" % gce.project)[-1]
        if net.startswith("projects/"):
            net = net.split("/", 2)[2]
        if net != "global/networks/default":
            raise _err(404, "notFound", "The resource 'projects/%s/%s' was not found" % (gce.project, net))
        st = _state(gce)
        if req["name"] in st["firewalls"]:
            raise _err(409, "alreadyExists", "The resource 'projects/%s/global/firewalls/%s' already exists"
                       % (gce.project, req["name"]))
        rule = {k: copy.deepcopy(v) for k, v in req.items() if k in (
            "name", "description", "allowed", "denied", "sourceRanges", "sourceTags", "targetTags")}
        rule.update(network=net, direction=direction, priority=pr, disabled=bool(req.get("disabled", False)),
                    id=str(int(hashlib.sha256(req["name"].encode()).hexdigest()[:15], 16)), created=_ts())
        st["firewalls"][rule["name"]] = rule
        op = _op(gce, "insert", rule["name"])
        if rid:
            gce.state["requests"]["global|%s" % rid] = {"op": op["name"], "fingerprint": "firewall"}
        gce.cloud.save()
    log("gce: firewalls.insert %s" % rule["name"])
    return 200, op


def delete(gce, q, name):
    rid = gce._request_id(q)
    with gce.lock:
        prev = _replay(gce, rid)
        if prev is not None:
            return 200, prev
        if not _state(gce)["firewalls"].pop(name, None):
            raise _err(404, "notFound", "The resource 'projects/%s/global/firewalls/%s' was not found"
                       % (gce.project, name))
        op = _op(gce, "delete", name)
        if rid:
            gce.state["requests"]["global|%s" % rid] = {"op": op["name"], "fingerprint": "firewall"}
        gce.cloud.save()
    log("gce: firewalls.delete %s" % name)
    return 200, op


def op_get(gce, name):
    with gce.lock:
        op = _state(gce).get("global_operations", {}).get(name)
        if not op:
            raise _err(404, "notFound", "The resource 'projects/%s/global/operations/%s' was not found"
                       % (gce.project, name))
        return 200, op


def list_(gce, q):
    flt = gce._filter(q)
    with gce.lock:
        items = [firewall_json(gce, r) for r in sorted(_state(gce)["firewalls"].values(), key=lambda r: r["name"])]
        items = [i for i in items if flt(i)]
        return gce._list_reply("compute#firewallList", "projects/%s/global/firewalls" % gce.project, q, items)


def get(gce, name):
    with gce.lock:
        r = _state(gce)["firewalls"].get(name)
        if not r:
            raise _err(404, "notFound", "The resource 'projects/%s/global/firewalls/%s' was not found"
                       % (gce.project, name))
        return 200, firewall_json(gce, r)


def subnet_get(gce, region, name):
    """Only the default network is modelled: auto mode, its subnet in a region is 'default' [AM]."""
    if name != "default" or region not in AUTO_RANGES:
        raise _err(404, "notFound", "The resource 'projects/%s/regions/%s/subnetworks/%s' was not found"
                   % (gce.project, region, name))
    rl = "%sprojects/%s/regions/%s" % (SELF, gce.project, region)
    cidr = AUTO_RANGES[region]
    gw = str(ipaddress.ip_network(cidr)[1])
    return 200, {"kind": "compute#subnetwork", "name": name, "region": rl, "ipCidrRange": cidr,
                 "gatewayAddress": gw, "network": "%sprojects/%s/global/networks/default" % (SELF, gce.project),
                 "selfLink": "%s/subnetworks/%s" % (rl, name), "stackType": "IPV4_ONLY",
                 "privateIpGoogleAccess": False, "purpose": "PRIVATE"}


def control(gce, method, path, req):
    """/_mock/gcp/firewalls: GET the rules; POST a rule (a Firewall body); DELETE
    /_mock/gcp/firewalls/NAME removes one (a project whose admin deleted default-allow-internal)."""
    base = "/_mock/gcp/firewalls"
    if path == base and method == "GET":
        with gce.lock:
            return 200, [firewall_json(gce, r) for r in _state(gce)["firewalls"].values()]
    if path == base and method == "POST":
        try:
            pr = _check_rule(req or {})
        except (ValueError, TypeError) as e:
            return 400, {"error": "bad rule: %s" % e}
        with gce.lock:
            st = _state(gce)
            rule = {k: copy.deepcopy(v) for k, v in req.items() if k in (
                "name", "description", "allowed", "denied", "sourceRanges", "sourceTags", "targetTags")}
            rule.update(network=(req.get("network") or "global/networks/default").split(
                "/projects/%s/" % gce.project)[-1], direction=req.get("direction", "INGRESS"), priority=pr,
                disabled=bool(req.get("disabled", False)), id=str(6000000000000001000 + len(st["firewalls"])),
                created=_ts())
            st["firewalls"][rule["name"]] = rule
            gce.cloud.save()
        log("gce: firewall rule %s added" % rule["name"])
        return 200, firewall_json(gce, rule)
    if path.startswith(base + "/") and method == "DELETE":
        name = path[len(base) + 1:]
        with gce.lock:
            gone = _state(gce)["firewalls"].pop(name, None)
            gce.cloud.save()
        if not gone:
            return 404, {"error": "no firewall rule %s" % name}
        log("gce: firewall rule %s removed" % name)
        return 200, {"ok": True, "removed": name}
    return None
