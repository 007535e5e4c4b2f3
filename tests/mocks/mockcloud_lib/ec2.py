"""EC2 Query API (2016-11-15) actions of the mock."""

import base64
import binascii
import fnmatch
import gzip
import hashlib
import json
import re
import threading
import secrets
import time

from .cloud import BASE_PRICES, STATE_CODES, hex17, log, now_ms
from .xmlout import el, items, t
from . import ec2_fabric

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None


class ApiError(Exception):
    def __init__(self, code, message, status=400):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


# The AWS account the request being served was signed for (server.py sets it per
# request): instances, spot requests and client tokens belong to one account, and
# an account sees and terminates only its own.
CTX = threading.local()


def account_of(cloud):
    return getattr(CTX, "account", None) or cloud.cfg.account_id


def mine(cloud, obj):
    return obj.get("account", cloud.cfg.account_id) == account_of(cloud)


def token_key(cloud, region, token):
    acct = account_of(cloud)
    return "%s|%s" % (region, token) if acct == cloud.cfg.account_id else "%s|%s|%s" % (acct, region, token)


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ms / 1000.0))


def parse_iso(s):
    s = s.strip()
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            import calendar
            return int(calendar.timegm(time.strptime(s, fmt)) * 1000)
        except ValueError:
            pass
    raise ApiError("InvalidParameterValue", "Invalid timestamp: %s" % s)


# ------------------------------------------------------------------ parameter helpers
def plist(params, prefix):
    """Values of prefix.1, prefix.2, ... in index order."""
    out = []
    rx = re.compile(r"^%s\.(\d+)$" % re.escape(prefix))
    for k, v in params.items():
        m = rx.match(k)
        if m:
            out.append((int(m.group(1)), v))
    return [v for _, v in sorted(out)]


def pstructs(params, prefix):
    """{N: {sub: value}} for prefix.N.sub..."""
    out = {}
    rx = re.compile(r"^%s\.(\d+)\.(.+)$" % re.escape(prefix))
    for k, v in params.items():
        m = rx.match(k)
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return [out[i] for i in sorted(out)]


def filters(params):
    out = []
    for f in pstructs(params, "Filter"):
        name = f.get("Name")
        if not name:
            raise ApiError("InvalidParameterValue", "Filter name must be given")
        vals = [v for k, v in sorted(((k, v) for k, v in f.items() if k.startswith("Value.")),
                                     key=lambda kv: int(kv[0].split(".")[1]) if kv[0].split(".")[1].isdigit() else 0)]
        out.append((name, vals))
    return out


def vmatch(value, patterns):
    if value is None:
        return False
    return any(fnmatch.fnmatchcase(str(value), p) for p in patterns)


def need(params, name):
    v = params.get(name)
    if v is None or v == "":
        raise ApiError("MissingParameter", "The request must contain the parameter %s" % name)
    return v


def int_param(params, name, default=None, lo=None, hi=None):
    v = params.get(name)
    if v is None:
        return default
    try:
        n = int(v)
    except ValueError:
        raise ApiError("InvalidParameterValue", "Value (%s) for parameter %s is invalid. "
                       "Expected an integer." % (v, name))
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise ApiError("InvalidParameterValue", "Value (%d) for parameter %s is invalid. "
                       "Expected a value between %s and %s." % (n, name, lo, hi))
    return n


def encode_token(offset, key):
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "k": key}).encode()).decode()


def decode_token(tok, key):
    try:
        d = json.loads(base64.urlsafe_b64decode(tok.encode()))
        if d.get("k") != key:
            raise ValueError
        return int(d["o"])
    except Exception:
        raise ApiError("InvalidPaginationToken", "The pagination token is invalid or expired.")


def stable_id(prefix, seed):
    return "%s-%s" % (prefix, hashlib.sha256(seed.encode()).hexdigest()[:17])


def zone_abbr(region):
    parts = region.split("-")
    if len(parts) < 3:
        return region
    return parts[0] + "".join(x[0] for x in parts[1:-1]) + parts[-1]


def zones(region):
    return [region + s for s in "abc"]


# ------------------------------------------------------------------ user data / keys
def keys_from_user_data(raw):
    """ssh_authorized_keys from a cloud-config user data (top level and users[*])."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError:
            return []
    text = raw.decode("utf-8", "replace")
    if not text.lstrip().startswith("#cloud-config"):
        return []
    found = []
    doc = None
    if yaml is not None:
        try:
            doc = yaml.safe_load(text)
        except Exception:
            doc = None
    if isinstance(doc, dict):
        def add(v):
            if isinstance(v, list):
                found.extend(str(k) for k in v if isinstance(k, str))
            elif isinstance(v, str):
                found.append(v)
        add(doc.get("ssh_authorized_keys"))
        for u in doc.get("users") or []:
            if isinstance(u, dict):
                add(u.get("ssh_authorized_keys") or u.get("ssh-authorized-keys"))
        return found
    # fallback: a "ssh_authorized_keys:" block of "- key" lines
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "ssh_authorized_keys:":
            for nxt in lines[i + 1:]:
                s = nxt.strip()
                if s.startswith("- "):
                    found.append(s[2:].strip().strip("'\""))
                elif s:
                    break
    return found


def key_fingerprint(pub):
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        k = serialization.load_ssh_public_key(pub.encode())
        if isinstance(k, rsa.RSAPublicKey):
            der = k.public_bytes(serialization.Encoding.DER,
                                 serialization.PublicFormat.SubjectPublicKeyInfo)
            h = hashlib.md5(der).hexdigest()
            return ":".join(h[i:i + 2] for i in range(0, 32, 2))
        blob = base64.b64decode(pub.split()[1])
        return base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    except Exception:
        return None


# ------------------------------------------------------------------ XML of an instance
def instance_xml(cloud, inst):
    st = inst["state"]
    has_ip = st != "terminated"
    ip = inst["ip"] if has_ip else None
    dns = ("ip-%s.%s.compute.internal" % (inst["ip"].replace(".", "-"), inst["region"])) if has_ip else None
    known = cloud.extra.get("ec2_security_groups", {})
    groups = items("groupSet", [t("groupId", g) + t("groupName", known[g]["name"] if g in known else "mock-" + g)
                                for g in inst.get("security_groups", [])])
    parts = [
        t("instanceId", inst["id"]), t("imageId", inst["image_id"]),
        el("instanceState", t("code", STATE_CODES[st]), t("name", st)),
        t("privateDnsName", dns), t("dnsName", dns), t("reason", inst.get("reason") or None),
    ]
    if inst.get("key_name"):
        parts.append(t("keyName", inst["key_name"]))
    parts += [
        t("amiLaunchIndex", inst.get("launch_index", 0)), el("productCodes"),
        t("instanceType", inst["instance_type"]), t("launchTime", iso(inst["launched_at"])),
        el("placement", t("availabilityZone", inst["zone"]), t("groupName", inst.get("placement_group")),
           t("tenancy", "default")),
        el("monitoring", t("state", "disabled")),
    ]
    if has_ip:
        parts += [t("subnetId", inst["subnet_id"]), t("vpcId", inst["vpc_id"]), t("privateIpAddress", ip),
                  t("ipAddress", ip)]
    parts += [t("sourceDestCheck", True), groups]
    if inst.get("state_reason"):
        parts.append(el("stateReason", t("code", inst["state_reason"]["code"]),
                        t("message", inst["state_reason"]["message"])))
    parts += [t("architecture", "x86_64"), t("rootDeviceType", "ebs"), t("rootDeviceName", "/dev/xvda"),
              el("blockDeviceMapping")]
    if inst.get("spot"):
        parts += [t("instanceLifecycle", "spot"), t("spotInstanceRequestId", inst["sir_id"])]
    parts += [t("virtualizationType", "hvm"), t("clientToken", inst.get("client_token") or None)]
    if inst.get("tags"):
        parts.append(items("tagSet", [t("key", k) + t("value", v) for k, v in inst["tags"].items()]))
    parts.append(t("hypervisor", "xen"))
    if has_ip:
        parts.append(items("networkInterfaceSet", [
            t("networkInterfaceId", inst["eni_id"]) + t("subnetId", inst["subnet_id"]) +
            t("vpcId", inst["vpc_id"]) + t("description", "Primary network interface") +
            t("interfaceType", (inst.get("iface_types") or ["interface"])[0]) +
            t("ownerId", cloud.cfg.account_id) + t("status", "in-use") +
            t("privateIpAddress", ip) + t("privateDnsName", dns) + t("sourceDestCheck", True) + groups +
            el("attachment", t("attachmentId", "eni-attach-" + inst["eni_id"][4:]), t("deviceIndex", 0),
               t("status", "attached"), t("attachTime", iso(inst["launched_at"])),
               t("deleteOnTermination", True)) +
            el("association", t("publicIp", ip), t("publicDnsName", dns), t("ipOwnerId", "amazon")) +
            items("privateIpAddressesSet", [t("privateIpAddress", ip) + t("privateDnsName", dns) +
                                            t("primary", True)])] +
            # the further interfaces (EFA on other network cards): no IP of their own here
            [t("networkInterfaceId", "%s-%d" % (inst["eni_id"], k)) + t("subnetId", inst["subnet_id"]) +
             t("vpcId", inst["vpc_id"]) + t("status", "in-use") + t("interfaceType", it) +
             el("attachment", t("deviceIndex", 0), t("networkCardIndex", k), t("status", "attached"))
             for k, it in enumerate((inst.get("iface_types") or ["interface"])[1:], start=1)]))
    parts.append(t("ebsOptimized", False))
    return "".join(parts)


def reservation_xml(cloud, res, insts):
    return (t("reservationId", res["id"]) + t("ownerId", cloud.cfg.account_id) +
            el("groupSet") + items("instancesSet", [instance_xml(cloud, i) for i in insts]))


# ------------------------------------------------------------------ actions
def run_instances(cloud, p, region):
    # one lock over the whole call: two concurrent calls with one token create once
    with cloud.lock:
        return _run_instances(cloud, p, region)


def _run_instances(cloud, p, region):
    image = need(p, "ImageId")
    itype = need(p, "InstanceType")
    mn = int_param(p, "MinCount", lo=1, hi=1000)
    mx = int_param(p, "MaxCount", lo=1, hi=1000)
    if mn is None:
        need(p, "MinCount")
    if mx is None:
        need(p, "MaxCount")
    if mn > mx:
        raise ApiError("InvalidParameterValue", "MinCount (%d) cannot be greater than MaxCount (%d)" % (mn, mx))
    if not re.match(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$", image):
        raise ApiError("InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")" % image)
    if not re.match(r"^[a-z0-9-]+\.[a-z0-9-]+$", itype):
        raise ApiError("InvalidParameterValue", "Invalid value '%s' for InstanceType." % itype)
    token = p.get("ClientToken")
    if token is not None and (len(token) > 64 or not token.isascii() or not token):
        raise ApiError("InvalidParameterValue", "The client token must be 1 to 64 ASCII characters.")
    fp = hashlib.sha256(json.dumps(sorted((k, v) for k, v in p.items()
                                          if k not in ("ClientToken", "Version"))).encode()).hexdigest()
    with cloud.lock:
        if token:
            prev = cloud.tokens.get(token_key(cloud, region, token))
            if prev:
                if prev["fingerprint"] != fp:
                    raise ApiError("IdempotentParameterMismatch",
                                   "Arguments on this idempotent request are inconsistent with "
                                   "arguments used in previous request(s).")
                res = cloud.reservations[prev["reservation_id"]]
                return reservation_xml(cloud, res, [cloud.instances[i] for i in res["instance_ids"]])

    # network
    nis = pstructs(p, "NetworkInterface")
    top_subnet = p.get("SubnetId")
    top_sgs = plist(p, "SecurityGroupId") + plist(p, "SecurityGroup")
    if nis and (top_subnet or top_sgs):
        raise ApiError("InvalidParameterCombination", "Network interfaces and an instance-level "
                       "subnet ID or security groups may not be specified on the same request")
    # placement: a subnet decides the zone (ec2_fabric [SUB])
    zone = p.get("Placement.AvailabilityZone")
    if zone is not None and zone not in zones(region):
        raise ApiError("InvalidParameterValue", "Invalid availability zone: [%s]" % zone)
    named_subnet = nis[0].get("SubnetId") if nis else top_subnet
    if named_subnet:
        zone = ec2_fabric.subnet_zone(cloud, region, named_subnet, zone)
    zone = zone or (region + "a")
    pgroup = p.get("Placement.GroupName")
    iface_types = ec2_fabric.check_interfaces(itype, nis) if nis else ["interface"]
    root_gb = ec2_fabric.check_block_devices(p)
    if nis:
        ni = nis[0]
        subnet = ni.get("SubnetId") or stable_id("subnet", zone)
        sgs = [v for k, v in sorted(ni.items()) if k.startswith("SecurityGroupId.")]
    else:
        subnet = top_subnet or stable_id("subnet", zone)
        sgs = top_sgs
    ec2_fabric.sg_check_launch(cloud, region, sgs)
    # market options
    spot = False
    mt = p.get("InstanceMarketOptions.MarketType")
    if mt is not None:
        if mt not in ("spot", "capacity-block"):
            raise ApiError("InvalidParameterValue", "Invalid value '%s' for MarketType" % mt)
        if mt == "capacity-block":
            raise ApiError("UnsupportedOperation", "capacity-block is not supported by the mock")
        spot = True
        stype = p.get("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time")
        beh = p.get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate")
        if stype not in ("one-time", "persistent") or beh not in ("terminate", "stop", "hibernate"):
            raise ApiError("InvalidParameterValue", "Invalid SpotOptions")
        if stype == "persistent" and beh == "terminate":
            raise ApiError("InvalidParameterCombination", "A persistent Spot request requires an "
                           "interruption behavior of stop or hibernate")
        if stype != "one-time" or beh != "terminate":
            raise ApiError("UnsupportedOperation", "The mock supports one-time spot requests with "
                           "InstanceInterruptionBehavior=terminate only")
        if beh == "terminate" and pgroup is None:
            pass
    # tags
    inst_tags, sir_tags = {}, {}
    for ts in pstructs(p, "TagSpecification"):
        rtype = ts.get("ResourceType")
        if rtype not in ("instance", "spot-instances-request", "volume", "network-interface"):
            raise ApiError("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation." % rtype)
        tags = {}
        for tg in pstructs({k: v for k, v in ts.items()}, "Tag"):
            if "Key" not in tg:
                raise ApiError("InvalidParameterValue", "Tag key must be given")
            if len(tg["Key"]) > 128 or len(tg.get("Value", "")) > 256 or tg["Key"].startswith("aws:"):
                raise ApiError("InvalidParameterValue", "Invalid tag key or value")
            tags[tg["Key"]] = tg.get("Value", "")
        if rtype == "instance":
            inst_tags.update(tags)
        elif rtype == "spot-instances-request":
            if not spot:
                raise ApiError("InvalidParameterValue", "spot-instances-request tags need a spot request")
            sir_tags.update(tags)
        if len(inst_tags) > 50 or len(sir_tags) > 50:
            raise ApiError("TagLimitExceeded", "The maximum number of tags per resource is 50")
    # keys
    auth_keys = []
    key_name = p.get("KeyName")
    if key_name:
        kp = cloud.key_pairs.get("%s|%s" % (region, key_name))
        if not kp:
            raise ApiError("InvalidKeyPair.NotFound", "The key pair '%s' does not exist" % key_name)
        auth_keys.append(kp["public_key"])
    ud = p.get("UserData")
    if ud:
        try:
            raw = base64.b64decode(ud, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
        if len(raw) > 16384:
            raise ApiError("InvalidParameterValue", "User data is limited to 16384 bytes")
        auth_keys += keys_from_user_data(raw)

    # faults and capacity
    if cloud.take_fault("quota", lambda f: f.get("region") in (None, region)):
        raise ApiError("VcpuLimitExceeded", "You have requested more vCPU capacity than your current "
                       "vCPU limit of 0 allows for the instance bucket that the specified instance type "
                       "belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request "
                       "an adjustment to this limit.")
    if cloud.take_fault("capacity", lambda f: f.get("instance_type") in (None, itype) and
                        f.get("zone") in (None, zone) and f.get("region") in (None, region)):
        raise ApiError("InsufficientInstanceCapacity", "We currently do not have sufficient %s capacity "
                       "in the Availability Zone you requested (%s). Our system will be working on "
                       "provisioning additional capacity. You can currently get %s capacity by not "
                       "specifying an Availability Zone in your request or choosing %s."
                       % (itype, zone, itype, ", ".join(z for z in zones(region) if z != zone)))
    if cloud.timing is not None and not cloud.timing.take_launch("aws", account_of(cloud), region, mx):
        # The RunInstances resource bucket (timing.py, "launch_bucket"): EC2 API reference,
        # "Request throttling": "RequestLimitExceeded" with HTTP 503 when a bucket is empty.
        raise ApiError("RequestLimitExceeded", "Request limit exceeded.", 503)
    with cloud.lock:
        ec2_fabric.check_placement(cloud, region, zone, itype, pgroup,
                                   p.get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"))
        n = mx
        cap = cloud.capacity.get("%s|%s" % (itype, zone))
        if cap is None:
            cap = cloud.capacity.get("%s|*" % itype)
        if cap is not None:
            live = sum(1 for i in cloud.instances.values() if i["instance_type"] == itype and
                       i["zone"] == zone and i["state"] in ("pending", "running"))
            avail = max(0, cap - live)
            if avail < mn:
                raise ApiError("InsufficientInstanceCapacity", "We currently do not have sufficient %s "
                               "capacity in the Availability Zone you requested (%s). Our system will be "
                               "working on provisioning additional capacity." % (itype, zone))
            n = min(mx, avail)
        partial = cloud.take_fault("partial", lambda f: f.get("instance_type") in (None, itype) and
                                   f.get("region") in (None, region))
        fail_k = min(n, int(partial.get("fail_nodes", 1))) if partial else 0
        res_id = "r-" + hex17()
        launched = now_ms()
        ids = []
        price = cloud.price_items(itype, zone)[0][1]
        for idx in range(n):
            iid = "i-" + hex17()
            inst = {
                "id": iid, "reservation_id": res_id, "region": region, "zone": zone,
                "instance_type": itype, "image_id": image, "state": "pending",
                "state_changed_at": launched, "launched_at": launched, "running_at": None,
                "terminated_at": None, "ip": cloud.new_ip(), "spot": spot, "sir_id": None,
                "client_token": token, "tags": dict(inst_tags), "key_name": key_name,
                "subnet_id": subnet, "vpc_id": stable_id("vpc", region),
                "security_groups": sgs or ["sg-0mockdefault0000"], "placement_group": pgroup,
                "eni_id": "eni-" + hex17(), "launch_index": idx, "authorized_keys": auth_keys,
                "state_reason": None, "reason": None, "fail_boot": idx >= n - fail_k,
                "boot_delay_ms": cloud.boot_delay_ms, "node": None, "interrupt_at_ms": None,
                "account": account_of(cloud), "iface_types": iface_types, "root_volume_gb": root_gb,
            }
            if spot:
                sir_id = "sir-" + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
                inst["sir_id"] = sir_id
                cloud.spot_requests[sir_id] = {
                    "id": sir_id, "instance_id": iid, "region": region, "zone": zone,
                    "instance_type": itype, "image_id": image, "key_name": key_name,
                    "state": "active", "status_code": "fulfilled",
                    "status_message": "Your spot request is fulfilled.", "update_time": launched,
                    "create_time": launched, "tags": dict(sir_tags), "spot_price": price,
                    "security_groups": inst["security_groups"], "account": account_of(cloud),
                }
            cloud.add_instance(inst)
            ids.append(iid)
        res = {"id": res_id, "region": region, "instance_ids": ids, "client_token": token}
        cloud.reservations[res_id] = res
        if token:
            cloud.tokens[token_key(cloud, region, token)] = {"reservation_id": res_id, "fingerprint": fp,
                                                      "created_at": launched}
        ec2_fabric.pin_placement(cloud, region, zone, pgroup)
        for iid in ids:
            cloud._start_boot(cloud.instances[iid])
        cloud.save()
        log("RunInstances %s x%d in %s%s%s -> %s" % (itype, n, zone, " spot" if spot else "",
                                                      " (%d will fail)" % fail_k if fail_k else "", ",".join(ids)))
        return reservation_xml(cloud, res, [cloud.instances[i] for i in ids])


INSTANCE_FILTERS = {
    "instance-state-name": lambda i: i["state"],
    "instance-state-code": lambda i: str(STATE_CODES[i["state"]]),
    "client-token": lambda i: i.get("client_token"),
    "instance-lifecycle": lambda i: "spot" if i.get("spot") else None,
    "instance-id": lambda i: i["id"],
    "instance-type": lambda i: i["instance_type"],
    "availability-zone": lambda i: i["zone"],
    "placement-group-name": lambda i: i.get("placement_group"),
    "reservation-id": lambda i: i["reservation_id"],
    "key-name": lambda i: i.get("key_name"),
    "image-id": lambda i: i["image_id"],
    "subnet-id": lambda i: i["subnet_id"],
    "spot-instance-request-id": lambda i: i.get("sir_id"),
    "private-ip-address": lambda i: i["ip"] if i["state"] != "terminated" else None,
    "ip-address": lambda i: i["ip"] if i["state"] != "terminated" else None,
}


def _inst_match(inst, flts):
    for name, vals in flts:
        if name.startswith("tag:"):
            if not vmatch(inst.get("tags", {}).get(name[4:]), vals):
                return False
        elif name == "tag-key":
            if not any(vmatch(k, vals) for k in inst.get("tags", {})):
                return False
        elif name == "tag-value":
            if not any(vmatch(v, vals) for v in inst.get("tags", {}).values()):
                return False
        elif name in INSTANCE_FILTERS:
            if not vmatch(INSTANCE_FILTERS[name](inst), vals):
                return False
        else:
            raise ApiError("InvalidParameterValue", "The filter '%s' is invalid" % name)
    return True


def check_instance_ids(cloud, ids):
    for iid in ids:
        if not re.match(r"^i-([0-9a-f]{8}|[0-9a-f]{17})$", iid):
            raise ApiError("InvalidInstanceID.Malformed", "Invalid id: \"%s\"" % iid)
    missing = [i for i in ids if i not in cloud.instances or not cloud.visible(cloud.instances[i])
               or not mine(cloud, cloud.instances[i])]
    if missing:
        if len(missing) == 1:
            raise ApiError("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % missing[0])
        raise ApiError("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist" % ", ".join(missing))


def describe_instances(cloud, p, region):
    ids = plist(p, "InstanceId")
    flts = filters(p)
    maxr = int_param(p, "MaxResults", lo=5, hi=1000)
    if maxr is not None and ids:
        raise ApiError("InvalidParameterCombination", "The parameter instancesSet cannot be used "
                       "with the parameter maxResults")
    with cloud.lock:
        if ids:
            check_instance_ids(cloud, ids)
            cand = sorted((cloud.instances[i] for i in set(ids)), key=lambda i: cloud.pos[i["id"]])
            cand = [i for i in cand if i["region"] == region]
            if len(cand) != len(set(ids)):
                other = [i for i in ids if cloud.instances[i]["region"] != region]
                raise ApiError("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % other[0])
        else:
            cand = [i for i in cloud.in_region("aws", region) if cloud.visible(i) and mine(cloud, i)]
            # Eventual consistency: a listing may not show instances launched a moment ago.
            lag = cloud.take_fault("describe_lag", lambda f: f.get("region") in (None, region))
            if lag:
                cand = [i for i in cand if now_ms() - i["launched_at"] >= lag["ms"]]
        sel = [i for i in cand if _inst_match(i, flts)]
        key = hashlib.sha256(json.dumps([region, flts]).encode()).hexdigest()[:16]
        start = decode_token(p["NextToken"], key) if p.get("NextToken") else 0
        page = sel[start:start + maxr] if maxr else sel[start:]
        nxt = encode_token(start + maxr, key) if maxr and start + maxr < len(sel) else None
        groups = []
        for inst in page:
            if groups and groups[-1][0]["id"] == inst["reservation_id"]:
                groups[-1][1].append(inst)
            else:
                groups.append((cloud.reservations[inst["reservation_id"]], [inst]))
        body = items("reservationSet", [reservation_xml(cloud, r, ins) for r, ins in groups])
        if nxt:
            body += t("nextToken", nxt)
        return body


def describe_instances_slow(cloud, p, region):
    """DescribeInstances, answered late under a describe_delay fault: the listing is
    taken when the call comes in and sent ms later, as a cloud API under load answers
    (issue 49 measured 1-28 s). DescribeInstances is eventually consistent and its
    latency is not bounded by the API reference
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/query-api-troubleshooting.html#eventual-consistency);
    other calls, and other regions and accounts unless the fault names them, answer at
    once (the mock serves each request on its own thread)."""
    slow = None
    if not plist(p, "InstanceId"):
        acct = account_of(cloud)
        slow = cloud.take_fault("describe_delay", lambda f: f.get("region") in (None, region)
                                and f.get("account") in (None, acct))
    body = describe_instances(cloud, p, region)
    if slow:
        log("fault: describe_delay %s %s: answering in %d ms" % (region, account_of(cloud), slow["ms"]))
        time.sleep(slow["ms"] / 1000.0)
    return body


def terminate_instances(cloud, p, region):
    ids = plist(p, "InstanceId")
    if not ids:
        raise ApiError("MissingParameter", "The request must contain the parameter InstanceId")
    if len(ids) > 1000:
        raise ApiError("InvalidParameterValue", "At most 1000 instance IDs may be given")
    with cloud.lock:
        check_instance_ids(cloud, ids)
        for i in ids:
            if cloud.instances[i]["region"] != region:
                raise ApiError("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % i)
        out = []
        seen = set()
        for iid in ids:
            if iid in seen:
                continue
            seen.add(iid)
            inst = cloud.instances[iid]
            prev = cloud.begin_terminate(inst)
            cur = inst["state"]
            out.append(t("instanceId", iid) +
                       el("currentState", t("code", STATE_CODES[cur]), t("name", cur)) +
                       el("previousState", t("code", STATE_CODES[prev]), t("name", prev)))
        cloud.save()
        log("TerminateInstances %s" % ",".join(ids))
        return items("instancesSet", out)


SIR_FILTERS = {
    "instance-id": lambda s: s.get("instance_id"),
    "status-code": lambda s: s["status_code"],
    "state": lambda s: s["state"],
    "spot-instance-request-id": lambda s: s["id"],
    "launched-availability-zone": lambda s: s["zone"],
    "type": lambda s: "one-time",
    "instance-type": lambda s: s["instance_type"],
    "launch.instance-type": lambda s: s["instance_type"],
}


def _sir_xml(cloud, s):
    parts = [
        t("spotInstanceRequestId", s["id"]), t("spotPrice", s["spot_price"]), t("type", "one-time"),
        t("state", s["state"]),
        el("status", t("code", s["status_code"]), t("updateTime", iso(s["update_time"])),
           t("message", s["status_message"])),
        el("launchSpecification", t("imageId", s["image_id"]),
           *( [t("keyName", s["key_name"])] if s.get("key_name") else []),
           items("groupSet", [t("groupId", g) + t("groupName", "mock-" + g) for g in s.get("security_groups", [])]),
           t("instanceType", s["instance_type"]),
           el("placement", t("availabilityZone", s["zone"])),
           el("monitoring", t("enabled", False)), t("ebsOptimized", False)),
        t("instanceId", s["instance_id"]), t("createTime", iso(s["create_time"])),
        t("productDescription", "Linux/UNIX"), t("launchedAvailabilityZone", s["zone"]),
        t("instanceInterruptionBehavior", "terminate"),
    ]
    if s.get("tags"):
        parts.append(items("tagSet", [t("key", k) + t("value", v) for k, v in s["tags"].items()]))
    return "".join(parts)


def describe_spot_instance_requests(cloud, p, region):
    ids = plist(p, "SpotInstanceRequestId")
    flts = filters(p)
    maxr = int_param(p, "MaxResults", lo=5, hi=1000)
    with cloud.lock:
        def visible(s):
            inst = cloud.instances.get(s.get("instance_id") or "")
            return inst is None or cloud.visible(inst)
        allr = [s for s in cloud.spot_requests.values() if s["region"] == region and mine(cloud, s)]
        allr.sort(key=lambda s: (s["create_time"], s["id"]))
        if ids:
            known = {s["id"] for s in allr}
            for i in ids:
                if i not in known:
                    raise ApiError("InvalidSpotInstanceRequestID.NotFound",
                                   "The spot instance request ID '%s' does not exist" % i)
            allr = [s for s in allr if s["id"] in set(ids)]
        else:
            allr = [s for s in allr if visible(s)]
        sel = []
        for s in allr:
            ok = True
            for name, vals in flts:
                if name.startswith("tag:"):
                    ok = vmatch(s.get("tags", {}).get(name[4:]), vals)
                elif name == "tag-key":
                    ok = any(vmatch(k, vals) for k in s.get("tags", {}))
                elif name in SIR_FILTERS:
                    ok = vmatch(SIR_FILTERS[name](s), vals)
                else:
                    raise ApiError("InvalidParameterValue", "The filter '%s' is invalid" % name)
                if not ok:
                    break
            if ok:
                sel.append(s)
        key = hashlib.sha256(json.dumps([region, flts, ids]).encode()).hexdigest()[:16]
        start = decode_token(p["NextToken"], key) if p.get("NextToken") else 0
        page = sel[start:start + maxr] if maxr else sel[start:]
        body = items("spotInstanceRequestSet", [_sir_xml(cloud, s) for s in page])
        if maxr and start + maxr < len(sel):
            body += t("nextToken", encode_token(start + maxr, key))
        return body


def describe_spot_price_history(cloud, p, region):
    types = plist(p, "InstanceType")
    prods = plist(p, "ProductDescription")
    az = p.get("AvailabilityZone")
    flts = filters(p)
    maxr = int_param(p, "MaxResults", lo=1, hi=10000)
    start_ms = parse_iso(p["StartTime"]) if p.get("StartTime") else None
    end_ms = parse_iso(p["EndTime"]) if p.get("EndTime") else None
    for name, vals in flts:
        if name == "availability-zone":
            pass
        elif name == "instance-type":
            types = types + vals if not types else [x for x in types if vmatch(x, vals)]
        elif name == "product-description":
            prods = prods + vals if not prods else [x for x in prods if vmatch(x, vals)]
        elif name not in ("spot-price", "timestamp"):
            raise ApiError("InvalidParameterValue", "The filter '%s' is invalid" % name)
    zf = [v for n, v in flts if n == "availability-zone"]
    with cloud.lock:
        if not types:
            known = set(BASE_PRICES)
            known |= {i["instance_type"] for i in cloud.instances.values()}
            known |= {k.split("|")[0] for k in cloud.price_history}
            types = sorted(known)
        types = [x for x in types if "*" not in x and "?" not in x] or types
        zs = [az] if az else zones(region)
        zs = [z for z in zs if all(vmatch(z, v) for v in zf)]
        prods = prods or ["Linux/UNIX"]
        rows = []
        for it in types:
            for z in zs:
                hist = cloud.price_items(it, z)  # newest first
                chosen = []
                for ts, price in hist:
                    if end_ms is not None and ts > end_ms:
                        continue
                    if start_ms is not None and ts < start_ms:
                        chosen.append((ts, price))  # the effective price at StartTime
                        break
                    chosen.append((ts, price))
                for pd in prods:
                    for ts, price in chosen:
                        rows.append((ts, it, z, pd, price))
        for name, vals in flts:
            if name == "spot-price":
                rows = [r for r in rows if vmatch(r[4], vals)]
        rows.sort(key=lambda r: (-r[0], r[1], r[2], r[3]))
        key = hashlib.sha256(json.dumps([region, types, prods, az, flts, start_ms, end_ms]).encode()).hexdigest()[:16]
        start = decode_token(p["NextToken"], key) if p.get("NextToken") else 0
        page = rows[start:start + maxr] if maxr else rows[start:]
        body = items("spotPriceHistorySet", [
            t("instanceType", it) + t("productDescription", pd) + t("spotPrice", price) +
            t("timestamp", iso(ts)) + t("availabilityZone", z) for ts, it, z, pd, price in page])
        body += t("nextToken", encode_token(start + maxr, key) if maxr and start + maxr < len(rows) else None)
        return body


def import_key_pair(cloud, p, region):
    name = need(p, "KeyName")
    material = need(p, "PublicKeyMaterial")
    pub = None
    try:
        dec = base64.b64decode(material, validate=True).decode("ascii").strip()
        if dec.split(" ")[0].startswith(("ssh-", "ecdsa-")):
            pub = dec
    except (binascii.Error, ValueError, UnicodeDecodeError):
        pass
    if pub is None and material.strip().split(" ")[0].startswith(("ssh-", "ecdsa-")):
        pub = material.strip()
    fp = key_fingerprint(pub) if pub else None
    if not fp:
        raise ApiError("InvalidKey.Format", "Key is not in valid OpenSSH public key format")
    with cloud.lock:
        k = "%s|%s" % (region, name)
        if k in cloud.key_pairs:
            raise ApiError("InvalidKeyPair.Duplicate", "The keypair already exists")
        kid = "key-" + hex17()
        tags = {}
        for ts in pstructs(p, "TagSpecification"):
            for tg in pstructs(ts, "Tag"):
                tags[tg.get("Key", "")] = tg.get("Value", "")
        cloud.key_pairs[k] = {"name": name, "id": kid, "public_key": pub, "fingerprint": fp,
                              "created_at": now_ms(), "tags": tags}
        cloud.save()
    return t("keyFingerprint", fp) + t("keyName", name) + t("keyPairId", kid)


def delete_key_pair(cloud, p, region):
    name = p.get("KeyName")
    kid = p.get("KeyPairId")
    if not name and not kid:
        raise ApiError("MissingParameter", "The request must contain the parameter KeyName or KeyPairId")
    with cloud.lock:
        for k, v in list(cloud.key_pairs.items()):
            if k.startswith(region + "|") and (v["name"] == name or v["id"] == kid):
                del cloud.key_pairs[k]
        cloud.save()
    return t("return", True)


def describe_key_pairs(cloud, p, region):
    names = plist(p, "KeyName")
    kids = plist(p, "KeyPairId")
    with cloud.lock:
        kps = [v for k, v in sorted(cloud.key_pairs.items()) if k.startswith(region + "|")]
        for n in names:
            if n not in {v["name"] for v in kps}:
                raise ApiError("InvalidKeyPair.NotFound", "The key pair '%s' does not exist" % n)
        for i in kids:
            if i not in {v["id"] for v in kps}:
                raise ApiError("InvalidKeyPair.NotFound", "The key pair '%s' does not exist" % i)
        if names or kids:
            kps = [v for v in kps if v["name"] in names or v["id"] in kids]
        for name, vals in filters(p):
            if name == "key-name":
                kps = [v for v in kps if vmatch(v["name"], vals)]
            elif name == "fingerprint":
                kps = [v for v in kps if vmatch(v["fingerprint"], vals)]
            elif name.startswith("tag:"):
                kps = [v for v in kps if vmatch(v.get("tags", {}).get(name[4:]), vals)]
            else:
                raise ApiError("InvalidParameterValue", "The filter '%s' is invalid" % name)
        pk = p.get("IncludePublicKey") == "true"
        return items("keySet", [
            t("keyPairId", v["id"]) + t("keyFingerprint", v["fingerprint"]) + t("keyName", v["name"]) +
            t("keyType", "rsa" if v["public_key"].startswith("ssh-rsa") else "ed25519") +
            (t("publicKey", v["public_key"]) if pk else "") + el("tagSet") +
            t("createTime", iso(v["created_at"])) for v in kps])


def describe_availability_zones(cloud, p, region):
    names = plist(p, "ZoneName")
    zs = zones(region)
    for n in names:
        if n not in zs:
            raise ApiError("InvalidParameterValue", "Invalid availability zone: [%s]" % n)
    if names:
        zs = [z for z in zs if z in names]
    for name, vals in filters(p):
        if name in ("zone-name", "region-name", "state", "zone-type"):
            val = {"zone-name": None, "region-name": region, "state": "available", "zone-type": "availability-zone"}[name]
            zs = [z for z in zs if vmatch(val if val else z, vals)]
        else:
            raise ApiError("InvalidParameterValue", "The filter '%s' is invalid" % name)
    return items("availabilityZoneInfo", [
        t("zoneName", z) + t("zoneState", "available") + t("regionName", region) +
        t("zoneId", "%s-az%d" % (zone_abbr(region), i + 1)) + el("messageSet") +
        t("zoneType", "availability-zone") for i, z in enumerate(zs)])


# GetSpotPlacementScores (EC2 API Reference, API_GetSpotPlacementScores; limits as botocore's
# ec2-2016-11-15 model states them): TargetCapacity is required, 1..2,000,000,000;
# TargetCapacityUnitType units|vcpu|memory-mib; InstanceType.N at most 1,000 and not with
# InstanceRequirementsWithMetadata; RegionName.N at most 10; MaxResults 10..1,000. The reply
# is spotPlacementScoreSet items {region, availabilityZoneId (SingleAvailabilityZone=true),
# score 1..10}, "the top 10 Regions or Availability Zones". With one or two instance types
# "the returned placement score will always be low" (InstanceType.N): capped at 3 here.
# How AWS computes a score is not published; the mock's model: the share of the target the
# capacity it has set ("/_mock/capacity", absent: plenty) can hold, times 10, rounded up.
SCORE_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1")


def get_spot_placement_scores(cloud, p, region):
    target = int_param(p, "TargetCapacity", lo=1, hi=2000000000)
    if target is None:
        raise ApiError("MissingParameter", "The request must contain the parameter TargetCapacity")
    unit = p.get("TargetCapacityUnitType", "units")
    if unit not in ("units", "vcpu", "memory-mib"):
        raise ApiError("InvalidParameterValue", "Value (%s) for parameter TargetCapacityUnitType is "
                       "invalid." % unit)
    types = plist(p, "InstanceType")
    has_req = any(k.startswith("InstanceRequirementsWithMetadata.") for k in p)
    if types and has_req:
        raise ApiError("InvalidParameterCombination", "You can't specify both InstanceTypes and "
                       "InstanceRequirementsWithMetadata.")
    if not types and not has_req:
        raise ApiError("MissingParameter", "The request must contain InstanceTypes or "
                       "InstanceRequirementsWithMetadata.")
    if len(types) > 1000:
        raise ApiError("InvalidParameterValue", "InstanceTypes: at most 1000 items")
    regions = plist(p, "RegionName")
    if len(regions) > 10:
        raise ApiError("InvalidParameterValue", "RegionNames: at most 10 items")
    maxr = int_param(p, "MaxResults", default=1000, lo=10, hi=1000)
    single = p.get("SingleAvailabilityZone", "false").lower() == "true"
    regions = regions or list(SCORE_REGIONS)
    for r in regions:
        if not re.match(r"^[a-z]{2}(-[a-z]+)+-\d+$", r):
            raise ApiError("InvalidParameterValue", "Invalid region: %s" % r)
    distinct = len(set(types)) if types else 3

    def avail(z):
        total = 0
        for it in (types or ["*"]):
            cap = cloud.capacity.get("%s|%s" % (it, z))
            if cap is None:
                cap = cloud.capacity.get("%s|*" % it)
            if cap is None:
                return None  # no limit set: plenty
            live = sum(1 for i in cloud.instances.values() if i["instance_type"] == it and
                       i["zone"] == z and i["state"] in ("pending", "running"))
            total += max(0, cap - live)
        return total

    def score(n):
        sc = 10 if n is None else max(1, min(10, -(-10 * n // target)))
        return min(sc, 3) if distinct < 3 else sc

    rows = []
    with cloud.lock:
        for r in regions:
            if single:
                for k, z in enumerate(zones(r)):
                    rows.append((score(avail(z)), r, "%s-az%d" % (zone_abbr(r), k + 1)))
            else:
                per = [avail(z) for z in zones(r)]
                rows.append((score(None if any(a is None for a in per) else sum(per)), r, None))
    rows.sort(key=lambda x: (-x[0], x[1], x[2] or ""))
    rows = rows[:10]
    key = "gsps|%s|%s|%d|%s" % (",".join(types), ",".join(regions), target, single)
    start = decode_token(p["NextToken"], key) if p.get("NextToken") else 0
    page = rows[start:start + maxr]
    nxt = encode_token(start + maxr, key) if start + maxr < len(rows) else None
    return items("spotPlacementScoreSet", [
        t("region", r) + (t("availabilityZoneId", z) if z else "") + t("score", sc)
        for sc, r, z in page]) + (t("nextToken", nxt) if nxt else "")


ACTIONS = {
    **ec2_fabric.ACTIONS,
    "RunInstances": run_instances,
    "DescribeInstances": describe_instances_slow,
    "TerminateInstances": terminate_instances,
    "DescribeSpotInstanceRequests": describe_spot_instance_requests,
    "DescribeSpotPriceHistory": describe_spot_price_history,
    "GetSpotPlacementScores": get_spot_placement_scores,
    "ImportKeyPair": import_key_pair,
    "DeleteKeyPair": delete_key_pair,
    "DescribeKeyPairs": describe_key_pairs,
    "DescribeAvailabilityZones": describe_availability_zones,
}
