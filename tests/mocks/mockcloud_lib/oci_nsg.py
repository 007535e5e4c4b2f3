"""OCI network security groups for the mock (Core API 20160918): create, list, get,
delete, add/list security rules, list VNICs; LaunchInstance's createVnicDetails.nsgIds
(oci.py calls check_launch). The rules are enforced on the nodes through netpolicy.py.

References (cited beside each rule):
  [NSG]  OCI docs, "Network Security Groups": an NSG belongs to one VCN; a rule's source
         may be a CIDR block, a service, or an NSG ("the rule applies to VNICs in the
         source NSG"); a VNIC is in at most five NSGs; "If a VNIC is in an NSG and its
         subnet has security lists, a packet is allowed if any rule in any of them allows
         it"; an NSG with VNICs cannot be deleted
         https://docs.oracle.com/en-us/iaas/Content/Network/Concepts/networksecuritygroups.htm
  [API]  Core API: CreateNetworkSecurityGroup (compartmentId, vcnId required; displayName,
         freeformTags; opc-retry-token), ListNetworkSecurityGroups (compartmentId, vcnId,
         displayName, lifecycleState), DeleteNetworkSecurityGroup (409 while VNICs are in
         it), AddNetworkSecurityGroupSecurityRules (POST .../actions/addSecurityRules,
         securityRules[]: direction INGRESS|EGRESS, protocol "all"|"1"|"6"|"17"|"58",
         source/sourceType CIDR_BLOCK|SERVICE_CIDR_BLOCK|NETWORK_SECURITY_GROUP,
         tcpOptions/udpOptions destinationPortRange{min,max}; at most 25 per call),
         ListNetworkSecurityGroupSecurityRules, ListNetworkSecurityGroupVnics
         https://docs.oracle.com/en-us/iaas/api/#/en/iaas/20160918/NetworkSecurityGroup/
"""

import datetime
import hashlib
import json
import secrets

from .cloud import log


def _err(status, code, message):
    from .oci import OciError
    return OciError(status, code, message)


def nsgs(cloud):
    return cloud.extra.setdefault("oci_nsgs", {})


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _json(g):
    return {"id": g["id"], "compartmentId": g["compartment_id"], "vcnId": g["vcn_id"],
            "displayName": g["display_name"], "lifecycleState": "AVAILABLE",
            "freeformTags": g["tags"], "definedTags": {}, "timeCreated": g["time_created"]}


def members(cloud, gid):
    """Instances (not terminated) whose VNIC is in NSG gid."""
    return [i for i in cloud.instances.values() if i.get("provider") == "oci"
            and gid in (i.get("nsg_ids") or []) and i["state"] != "terminated"]


def _get(cloud, gid):
    g = nsgs(cloud).get(gid)
    if not g:
        raise _err(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return g


def create(cloud, region, headers, body):
    from .oci import VCN, _compartment, _need
    try:
        d = json.loads(body or b"null")
    except ValueError:
        raise _err(400, "InvalidParameter", "The request body is not valid JSON")
    if not isinstance(d, dict):
        raise _err(400, "InvalidParameter", "The request body must be a CreateNetworkSecurityGroupDetails")
    comp = _compartment(cloud, _need(d, "compartmentId"))
    vcn = _need(d, "vcnId")
    if vcn != VCN:  # the mock has one VCN [API]
        raise _err(404, "NotAuthorizedOrNotFound", "VCN %s not found" % vcn)
    tags = d.get("freeformTags") or {}
    if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise _err(400, "InvalidParameter", "freeformTags must map strings to strings")
    token = headers.get("opc-retry-token")
    fp = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
    with cloud.lock:
        from .oci import state
        toks = state(cloud).setdefault("nsg_tokens", {})
        if token and token in toks:
            if toks[token]["fingerprint"] != fp:
                raise _err(409, "Conflict", "The retry token was already used with different "
                           "request parameters.")
            if toks[token]["id"] in nsgs(cloud):
                return 200, _json(nsgs(cloud)[toks[token]["id"]])
        gid = "ocid1.networksecuritygroup.oc1.%s.%s" % (region, secrets.token_hex(20))
        g = {"id": gid, "region": region, "compartment_id": comp, "vcn_id": vcn,
             "display_name": d.get("displayName") or gid, "tags": dict(tags), "rules": [],
             "time_created": _now()}
        nsgs(cloud)[gid] = g
        if token:
            toks[token] = {"id": gid, "fingerprint": fp}
        cloud.save()
    log("CreateNetworkSecurityGroup %s (%s)" % (gid, g["display_name"]))
    return 200, _json(g)


def list_(cloud, q):
    from .oci import _compartment, _need
    comp = _compartment(cloud, _need(q, "compartmentId"))
    with cloud.lock:
        out = [_json(g) for g in nsgs(cloud).values() if g["compartment_id"] == comp
               and q.get("vcnId") in (None, g["vcn_id"]) and q.get("displayName") in (None, g["display_name"])
               and q.get("lifecycleState") in (None, "AVAILABLE")]
    return 200, sorted(out, key=lambda g: g["timeCreated"])


def delete(cloud, gid):
    with cloud.lock:
        g = _get(cloud, gid)
        if members(cloud, gid):
            # [NSG] an NSG with VNICs cannot be deleted
            raise _err(409, "Conflict", "The network security group %s still has VNICs" % gid)
        refs = [x["id"] for x in nsgs(cloud).values() if x is not g
                for r in x["rules"] if r.get("source") == gid]
        if refs:
            raise _err(409, "Conflict", "Another network security group's rule names %s" % gid)
        del nsgs(cloud)[gid]
        cloud.save()
    log("DeleteNetworkSecurityGroup %s (%s)" % (gid, g["display_name"]))
    return 204, None


def _rule(cloud, r):
    if not isinstance(r, dict):
        raise _err(400, "InvalidParameter", "securityRules must be objects")
    if r.get("direction") not in ("INGRESS", "EGRESS"):
        raise _err(400, "InvalidParameter", "direction must be INGRESS or EGRESS")
    if str(r.get("protocol")) not in ("all", "1", "6", "17", "58"):
        raise _err(400, "InvalidParameter", "protocol must be all, 1, 6, 17 or 58")
    key, tkey = ("source", "sourceType") if r["direction"] == "INGRESS" else ("destination", "destinationType")
    if not r.get(key):
        raise _err(400, "MissingParameter", "%s is required" % key)
    typ = r.get(tkey, "CIDR_BLOCK")
    if typ not in ("CIDR_BLOCK", "SERVICE_CIDR_BLOCK", "NETWORK_SECURITY_GROUP"):
        raise _err(400, "InvalidParameter", "%s must be CIDR_BLOCK, SERVICE_CIDR_BLOCK or "
                   "NETWORK_SECURITY_GROUP" % tkey)
    if typ == "NETWORK_SECURITY_GROUP" and r[key] not in nsgs(cloud):
        raise _err(400, "InvalidParameter", "The %s NSG %s does not exist" % (key, r[key]))
    out = {k: r[k] for k in ("direction", "protocol", "source", "sourceType", "destination",
                             "destinationType", "isStateless", "description", "tcpOptions",
                             "udpOptions", "icmpOptions") if k in r}
    out[tkey] = typ
    out["id"] = secrets.token_hex(3).upper()
    out["isValid"] = True
    out["timeCreated"] = _now()
    return out


def add_rules(cloud, gid, body):
    try:
        d = json.loads(body or b"null")
    except ValueError:
        raise _err(400, "InvalidParameter", "The request body is not valid JSON")
    rules = d.get("securityRules") if isinstance(d, dict) else None
    if not isinstance(rules, list) or not rules or len(rules) > 25:
        raise _err(400, "InvalidParameter", "securityRules: 1 to 25 rules")
    with cloud.lock:
        g = _get(cloud, gid)
        made = [_rule(cloud, r) for r in rules]
        g["rules"].extend(made)
        cloud.save()
    log("AddNetworkSecurityGroupSecurityRules %s: %d rule(s)" % (gid, len(made)))
    return 200, {"securityRules": made}


def check_launch(cloud, vnic):
    """createVnicDetails.nsgIds: at most five, each an NSG of the subnet's VCN [NSG]."""
    from .oci import VCN
    ids = vnic.get("nsgIds") or []
    if not isinstance(ids, list) or len(ids) > 5 or not all(isinstance(x, str) for x in ids):
        raise _err(400, "InvalidParameter", "nsgIds: at most 5 NSG OCIDs")
    for gid in ids:
        g = nsgs(cloud).get(gid)
        if not g:
            raise _err(404, "NotAuthorizedOrNotFound", "NSG %s not found" % gid)
        if g["vcn_id"] != VCN:
            raise _err(400, "InvalidParameter", "NSG %s is in another VCN than the subnet" % gid)
    return list(ids)


def route(cloud, method, parts, q, region, headers, body):
    if parts[0] != "networkSecurityGroups":
        return None, None
    n = len(parts)
    if n == 1 and method == "POST":
        return "CreateNetworkSecurityGroup", lambda: create(cloud, region, headers, body)
    if n == 1 and method == "GET":
        return "ListNetworkSecurityGroups", lambda: list_(cloud, q)
    if n == 2 and method == "GET":
        return "GetNetworkSecurityGroup", lambda: (200, _json(_get(cloud, parts[1])))
    if n == 2 and method == "DELETE":
        return "DeleteNetworkSecurityGroup", lambda: delete(cloud, parts[1])
    if n == 3 and parts[2] == "securityRules" and method == "GET":
        return "ListNetworkSecurityGroupSecurityRules", lambda: (200, list(_get(cloud, parts[1])["rules"]))
    if n == 3 and parts[2] == "vnics" and method == "GET":
        return "ListNetworkSecurityGroupVnics", lambda: (200, [
            {"vnicId": i["vnic_id"], "resourceId": i["id"], "timeAssociated": _now()}
            for i in members(cloud, _get(cloud, parts[1])["id"])])
    if n == 4 and parts[2] == "actions" and parts[3] == "addSecurityRules" and method == "POST":
        return "AddNetworkSecurityGroupSecurityRules", lambda: add_rules(cloud, parts[1], body)
    return None, None
