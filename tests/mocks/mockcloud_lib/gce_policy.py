"""Compute Engine resource policies (compact placement) for the mock: the regional
collection projects/P/regions/R/resourcePolicies, its regional Operations, and the rules
an instance's `resourcePolicies` must follow. gce.py routes here and asks
check_instance_policies() about every insert/bulkInsert.

References (cited beside each rule):
  [RP]  Compute v1 resourcePolicies (insert/get/list/delete) and ResourcePolicy /
        ResourcePolicyGroupPlacementPolicy (collocation COLLOCATED, vmCount,
        availabilityDomainCount) https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies
  [PP]  "About placement policies" https://cloud.google.com/compute/docs/instances/placement-policies-overview
        (placement policies are regional resources and apply only to VMs in that region;
        a VM can have one placement policy; a policy in use cannot be deleted)
  [CP]  "Use compact placement policies" (supported machine series; with vmCount, exactly
        that many VMs are created together)
        https://cloud.google.com/compute/docs/instances/use-compact-placement-policies
"""

import hashlib
import json
import re
import secrets

from .cloud import log, now_ms

# Machine series that take a compact placement policy [CP] (accelerator-optimized: A4X, A4,
# A3, A2, G4, G2 per the facts; compute- and general-purpose series the page lists).
COMPACT_SERIES = ("a4x-", "a4-", "a3-", "a2-", "g4-", "g2-", "c2-", "c2d-", "c3-", "c3d-",
                  "c4-", "c4d-", "h3-", "n2-", "n2d-")
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
SELF = "https://www.googleapis.com/compute/v1/"


def _err(status, reason, message):
    from .gce import GceError
    return GceError(status, reason, message)


def _state(gce):
    st = gce.state
    st.setdefault("resource_policies", {})   # "region|name" -> policy record
    st.setdefault("region_operations", {})   # name -> operation record
    return st


def _link(gce, region, name):
    return "%sprojects/%s/regions/%s/resourcePolicies/%s" % (SELF, gce.project, region, name)


def policy_json(gce, pol):
    out = {"kind": "compute#resourcePolicy", "id": pol["id"], "creationTimestamp": pol["created"],
           "name": pol["name"], "region": "%sprojects/%s/regions/%s" % (SELF, gce.project, pol["region"]),
           "selfLink": _link(gce, pol["region"], pol["name"]), "status": "READY",
           "groupPlacementPolicy": dict(pol["gpp"])}
    if pol.get("description"):
        out["description"] = pol["description"]
    return out


def _members(gce, pol):
    link = _link(gce, pol["region"], pol["name"])
    return [i for i in gce.cloud.instances.values() if i.get("provider") == "gcp"
            and link in (i.get("resource_policies") or []) and i["state"] != "terminated"
            and not i.get("gce_deleted")]


def _op(gce, region, op_type, target, error=None):
    st = _state(gce)
    gce.state["op_counter"] += 1
    name = "operation-%d-%s" % (now_ms(), secrets.token_hex(6))
    rl = "%sprojects/%s/regions/%s" % (SELF, gce.project, region)
    op = {"kind": "compute#operation", "id": str(8000000000000000000 + gce.state["op_counter"]), "name": name,
          "region": rl, "operationType": op_type, "status": "DONE", "progress": 100, "user": gce.email,
          "targetLink": "%s/resourcePolicies/%s" % (rl, target), "insertTime": _ts(), "startTime": _ts(),
          "endTime": _ts(), "selfLink": "%s/operations/%s" % (rl, name)}
    if error:
        op["error"] = {"errors": [{"code": error[0], "message": error[1]}]}
        op["httpErrorStatusCode"] = 400
        op["httpErrorMessage"] = "BAD REQUEST"
    st["region_operations"][name] = op
    return op


def _ts():
    from .gce import rfc3339
    return rfc3339(now_ms())


def _replay(gce, region, rid):
    r = gce.state["requests"].get("%s|%s" % (region, rid)) if rid else None
    return _state(gce)["region_operations"].get(r["op"]) if r else None


def _remember(gce, region, rid, op):
    if rid:
        gce.state["requests"]["%s|%s" % (region, rid)] = {"op": op["name"], "fingerprint": "policy"}


def insert(gce, region, q, body):
    from .gce import int64
    rid = gce._request_id(q)
    try:
        req = json.loads(body or b"{}")
    except ValueError:
        raise _err(400, "parseError", "Parse Error")
    with gce.lock:
        prev = _replay(gce, region, rid)
        if prev is not None:
            # requestId: a retry of a completed request is ignored (facts "requestId, Operations")
            return 200, prev
        name = req.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise _err(400, "invalid", "Invalid value for field 'resource.name': '%s'. Must be a match of "
                       "regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
        gpp = req.get("groupPlacementPolicy")
        if not isinstance(gpp, dict):
            raise _err(400, "invalid", "The mock cloud models group placement policies only "
                       "(groupPlacementPolicy is required)")
        coll = gpp.get("collocation", "UNSPECIFIED_COLLOCATION")
        if coll not in ("COLLOCATED", "UNSPECIFIED_COLLOCATION"):
            raise _err(400, "invalid", "Invalid value for field 'resource.groupPlacementPolicy.collocation': "
                       "'%s'." % coll)
        out = {"collocation": coll}
        if gpp.get("vmCount") is not None:
            vc = int64(gpp["vmCount"], "vmCount")
            if vc < 1:
                raise _err(400, "invalid", "Invalid value for field "
                           "'resource.groupPlacementPolicy.vmCount': '%d'." % vc)
            out["vmCount"] = vc
        if gpp.get("availabilityDomainCount") is not None:
            adc = int64(gpp["availabilityDomainCount"], "availabilityDomainCount")
            if coll == "COLLOCATED" and adc != 1:
                # [CP] a compact policy places its VMs in one availability domain
                raise _err(400, "invalid", "A COLLOCATED policy takes availabilityDomainCount 1")
            out["availabilityDomainCount"] = adc
        key = "%s|%s" % (region, name)
        if key in _state(gce)["resource_policies"]:
            raise _err(409, "alreadyExists", "The resource 'projects/%s/regions/%s/resourcePolicies/%s' "
                       "already exists" % (gce.project, region, name))
        pol = {"name": name, "region": region, "gpp": out, "description": req.get("description") or "",
               "id": str(int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)), "created": _ts()}
        _state(gce)["resource_policies"][key] = pol
        op = _op(gce, region, "insert", name)
        _remember(gce, region, rid, op)
        gce.cloud.save()
    log("gce: resourcePolicies.insert %s in %s %s" % (name, region, out))
    return 200, op


def get(gce, region, name):
    with gce.lock:
        pol = _state(gce)["resource_policies"].get("%s|%s" % (region, name))
        if not pol:
            raise _err(404, "notFound", "The resource 'projects/%s/regions/%s/resourcePolicies/%s' was not found"
                       % (gce.project, region, name))
        return 200, policy_json(gce, pol)


def list_(gce, region, q):
    flt = gce._filter(q)
    with gce.lock:
        items = [policy_json(gce, p) for p in sorted(_state(gce)["resource_policies"].values(),
                                                       key=lambda p: p["name"]) if p["region"] == region]
        items = [i for i in items if flt(i)]
        path = "projects/%s/regions/%s/resourcePolicies" % (gce.project, region)
        return gce._list_reply("compute#resourcePolicyList", path, q, items)


def delete(gce, region, q, name):
    rid = gce._request_id(q)
    with gce.lock:
        prev = _replay(gce, region, rid)
        if prev is not None:
            return 200, prev
        key = "%s|%s" % (region, name)
        pol = _state(gce)["resource_policies"].get(key)
        if not pol:
            raise _err(404, "notFound", "The resource 'projects/%s/regions/%s/resourcePolicies/%s' was not found"
                       % (gce.project, region, name))
        users = _members(gce, pol)
        if users:
            # [PP] a placement policy applied to a VM cannot be deleted
            raise _err(400, "resourceInUseByAnotherResource", "The resource_policy resource '%s' is already "
                       "being used by '%sprojects/%s/zones/%s/instances/%s'"
                       % (_link(gce, region, name), SELF, gce.project, users[0]["zone"], users[0]["name"]))
        del _state(gce)["resource_policies"][key]
        op = _op(gce, region, "delete", name)
        _remember(gce, region, rid, op)
        gce.cloud.save()
    log("gce: resourcePolicies.delete %s in %s" % (name, region))
    return 200, op


def op_get(gce, region, name):
    with gce.lock:
        op = _state(gce)["region_operations"].get(name)
        if not op or not op["region"].endswith("/regions/" + region):
            raise _err(404, "notFound", "The resource 'projects/%s/regions/%s/operations/%s' was not found"
                       % (gce.project, region, name))
        return 200, op


def check_instance_policies(gce, zone, props, count):
    """The resourcePolicies of an insert/bulkInsert of `count` VMs in `zone` (lock held).
    Returns their full URLs, as the instance reports them."""
    from .gce import region_of
    urls = props.get("resource_policies_raw") or []
    if not isinstance(urls, list):
        raise _err(400, "invalid", "Invalid value for field 'resourcePolicies'.")
    out, placement = [], 0
    for u in urls:
        m = re.search(r"(?:^|/)regions/([a-z0-9-]+)/resourcePolicies/([a-z0-9-]+)$", u or "")
        if not m:
            raise _err(400, "invalid", "Invalid value for field 'resourcePolicies': '%s'." % u)
        region, name = m.group(1), m.group(2)
        if region != region_of(zone):
            # [PP] a placement policy applies only to VMs in its region
            raise _err(400, "invalid", "Resource policy '%s' is in region %s; the instance is in zone %s"
                       % (name, region, zone))
        pol = _state(gce)["resource_policies"].get("%s|%s" % (region, name))
        if not pol:
            raise _err(404, "notFound", "The resource 'projects/%s/regions/%s/resourcePolicies/%s' was not found"
                       % (gce.project, region, name))
        placement += 1
        if placement > 1:
            # [PP] one placement policy per VM
            raise _err(400, "invalid", "An instance can have at most one placement policy")
        if pol["gpp"].get("collocation") == "COLLOCATED":
            if not props["machine_type"].startswith(COMPACT_SERIES):
                raise _err(400, "invalid", "Compact placement policies are not supported for machine "
                           "type %s" % props["machine_type"])
            zones = {i["zone"] for i in _members(gce, pol)}
            if zones and zone not in zones:
                # facts: "the VMs of one compact policy live in one zone"
                raise _err(400, "invalid", "The VMs of compact placement policy %s are in %s, not %s"
                           % (name, sorted(zones)[0], zone))
            vc = pol["gpp"].get("vmCount")
            if vc is not None and (count != vc or _members(gce, pol)):
                # facts/[CP]: with vmCount, exactly that many VMs are created together
                raise _err(400, "invalid", "Compact placement policy %s has vmCount %d: create exactly %d "
                           "VMs together (asked: %d)" % (name, vc, vc, count))
        out.append(_link(gce, region, name))
    return out


def route(gce, method, p):
    """(action, region, handler) for projects/P/regions/R/..., or None."""
    n = len(p)
    if n < 5 or p[2] != "regions":
        return None
    region = p[3]
    if n == 5 and p[4] == "resourcePolicies":
        if method == "POST":
            return "resourcePolicies.insert", region, lambda pp, q, b, h: insert(gce, region, q, b)
        if method == "GET":
            return "resourcePolicies.list", region, lambda pp, q, b, h: list_(gce, region, q)
    if n == 6 and p[4] == "resourcePolicies":
        if method == "GET":
            return "resourcePolicies.get", region, lambda pp, q, b, h: get(gce, region, p[5])
        if method == "DELETE":
            return "resourcePolicies.delete", region, lambda pp, q, b, h: delete(gce, region, q, p[5])
    if n == 6 and p[4] == "operations" and method == "GET":
        return "regionOperations.get", region, lambda pp, q, b, h: op_get(gce, region, p[5])
    if n == 7 and p[4] == "operations" and p[6] == "wait" and method == "POST":
        return "regionOperations.wait", region, lambda pp, q, b, h: op_get(gce, region, p[5])
    return None
