"""OCI Core + Identity (API 20160918) of the mock: JSON over HTTP, every request's
draft-cavage signature checked with python3-cryptography against the public key of
the API key the mock generated (independent of the broker's C signer).

Paths are served at /20160918/... (the mock's default OCI region) and at
/oci/<region>/20160918/... (any region), so one endpoint template
`http://127.0.0.1:PORT/oci/{region}` covers every region a client uses.

OCI instances live in the shared Cloud state (provider "oci"), so they get the same
real sshd nodes, state machine, persistence and faults as EC2 instances; their
lifecycle states are the Cloud's, named the OCI way on the wire."""

import base64
import binascii
import email.utils
import hashlib
import json
import os
import re
import secrets
import time
from urllib.parse import parse_qsl, unquote, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .cloud import log, now_ms
from .ec2 import keys_from_user_data
from . import oci_cluster, oci_nsg

API = "/20160918"
MAX_SKEW_S = 5 * 60
LIFECYCLE = {"pending": "PROVISIONING", "running": "RUNNING", "shutting-down": "TERMINATING",
             "terminated": "TERMINATED", "stopping": "STOPPING", "stopped": "STOPPED"}
SUBNET_TRAINING = "ocid1.subnet.oc1..aaaaaaaamocktraining"
SUBNET_NORULE = "ocid1.subnet.oc1..aaaaaaaamocknorule"
SECLIST_TRAINING = "ocid1.securitylist.oc1..aaaaaaaamocktraining"
SECLIST_NORULE = "ocid1.securitylist.oc1..aaaaaaaamocknorule"
VCN = "ocid1.vcn.oc1..aaaaaaaamockvcn"
DEFAULT_LIMIT = 100
_PATH_RE = re.compile(r"^(?:/oci/([a-z0-9-]+))?(/20160918/.*)$")
_AUTH_PARAM_RE = re.compile(r'\s*([A-Za-z]+)="([^"]*)"\s*(?:,|$)')


class OciError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def handles(path):
    return bool(_PATH_RE.match(urlsplit(path).path))


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000.0)) + ".%03dZ" % (ms % 1000)


def region_key(region):
    return {"us-ashburn-1": "iad", "us-phoenix-1": "phx"}.get(region, region)


def ad_names(region):
    """The region's availability domains as the catalog spells them (tenancy prefix Mock:)."""
    if region == "us-ashburn-1":
        base, n = "US-ASHBURN-AD-", 3
    elif region == "us-phoenix-1":
        base, n = "PHX-AD-", 3
    else:
        base = region.upper() + "-AD-"
        n = 3 if region in ("us-chicago-1", "eu-frankfurt-1", "uk-london-1") else 1
    return ["Mock:%s%d" % (base, i) for i in range(1, n + 1)]


def ad_matches(fault_zone, ad):
    """A fault or capacity zone names an AD in full or by its part after ':'."""
    return fault_zone in (None, "*", ad, ad.split(":", 1)[-1])


# ------------------------------------------------------------------ the API key
class Account:
    """The one tenancy, user and API key of the mock; written to STATE_DIR/oci/ as an OCI
    config file so the sandbox, the tests and OCI's own SDKs can sign with it."""

    def __init__(self, state_dir, region, cidr):
        self.dir = os.path.join(state_dir, "oci")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self.key_file = os.path.join(self.dir, "oci_api_key.pem")
        self.config_file = os.path.join(self.dir, "config")
        self.tenancy = "ocid1.tenancy.oc1..aaaaaaaamocktenancy0000000000000000000000000000000000000000000"
        self.user = "ocid1.user.oc1..aaaaaaaamockuser00000000000000000000000000000000000000000000000"
        self.region = region
        self.cidr = cidr
        if os.path.exists(self.key_file):
            with open(self.key_file, "rb") as f:
                self.key = serialization.load_pem_private_key(f.read(), password=None)
        else:
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = self.key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.TraditionalOpenSSL,
                                         serialization.NoEncryption())
            fd = os.open(self.key_file + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            os.replace(self.key_file + ".tmp", self.key_file)
        self.public = self.key.public_key()
        der = self.public.public_bytes(serialization.Encoding.DER,
                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        h = hashlib.md5(der).hexdigest()
        # OCI's fingerprint of an API key: MD5 of the DER public key, colon-separated.
        self.fingerprint = ":".join(h[i:i + 2] for i in range(0, 32, 2))
        self.key_id = "%s/%s/%s" % (self.tenancy, self.user, self.fingerprint)
        with open(os.path.join(self.dir, "oci_api_key_public.pem"), "wb") as f:
            f.write(self.public.public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo))
        text = ("[DEFAULT]\nuser=%s\nfingerprint=%s\nkey_file=%s\ntenancy=%s\nregion=%s\n"
                % (self.user, self.fingerprint, self.key_file, self.tenancy, region))
        fd = os.open(self.config_file + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(self.config_file + ".tmp", self.config_file)


def _auth_params(value):
    if not value or not value.startswith("Signature "):
        return None
    rest = value[len("Signature "):]
    out, pos = {}, 0
    while pos < len(rest):
        m = _AUTH_PARAM_RE.match(rest, pos)
        if not m:
            return None
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def verify(acct, method, raw_path, headers, body):
    """Checks the request's signature the way OCI does; raises OciError(401) if not."""
    def refuse(why):
        raise OciError(401, "NotAuthenticated",
                       "The required information to complete authentication was not provided "
                       "or was incorrect. (%s)" % why)

    p = _auth_params(headers.get("Authorization"))
    if p is None:
        refuse("no or malformed Signature authorization header")
    if p.get("version", "1") != "1" or p.get("algorithm") != "rsa-sha256":
        refuse("only Signature version 1 with rsa-sha256 is accepted")
    if p.get("keyId") != acct.key_id:
        refuse("unknown keyId")
    signed = p.get("headers", "date").lower().split()
    need = ["date", "(request-target)", "host"]
    if method in ("POST", "PUT", "PATCH"):
        need += ["content-length", "content-type", "x-content-sha256"]
    missing = [h for h in need if h not in signed and not (h == "date" and "x-date" in signed)]
    if missing:
        refuse("headers not signed: %s" % " ".join(missing))
    lines = []
    for h in signed:
        if h == "(request-target)":
            lines.append("(request-target): %s %s" % (method.lower(), raw_path))
            continue
        v = headers.get(h)
        if v is None:
            refuse("signed header %s is missing" % h)
        lines.append("%s: %s" % (h, v.strip()))
    if "x-content-sha256" in signed:
        want = base64.b64encode(hashlib.sha256(body).digest()).decode()
        if headers.get("x-content-sha256", "").strip() != want:
            refuse("x-content-sha256 does not match the body")
    if "content-length" in signed and headers.get("content-length", "").strip() != str(len(body)):
        refuse("content-length does not match the body")
    date = headers.get("x-date") or headers.get("date")
    try:
        t = email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError, IndexError):
        refuse("unreadable date")
    if abs(time.time() - t) > MAX_SKEW_S:
        refuse("date is more than 5 minutes off the server's clock")
    try:
        sig = base64.b64decode(p.get("signature", ""), validate=True)
        acct.public.verify(sig, "\n".join(lines).encode(), padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, binascii.Error, ValueError):
        refuse("signature mismatch")


# ------------------------------------------------------------------ state helpers
def state(cloud):
    """OCI-only state kept in the Cloud's persisted extension dict."""
    st = cloud.extra.setdefault("oci", {})
    st.setdefault("tokens", {})       # retry token -> {"instance_id", "fingerprint"}
    st.setdefault("security_lists", {})
    if not st["security_lists"]:
        rule = {"protocol": "6", "source": cloud.oci_account.cidr, "sourceType": "CIDR_BLOCK",
                "isStateless": False, "description": "training traffic between nodes"}
        ssh = {"protocol": "6", "source": "0.0.0.0/0", "sourceType": "CIDR_BLOCK", "isStateless": False,
               "tcpOptions": {"destinationPortRange": {"min": 22, "max": 22}}}
        st["security_lists"] = {
            SECLIST_TRAINING: {"rules": [ssh, rule], "etag": secrets.token_hex(8)},
            SECLIST_NORULE: {"rules": [ssh], "etag": secrets.token_hex(8)},
        }
    return st


def instance_json(cloud, inst):
    acct = cloud.oci_account
    o = {
        "id": inst["id"], "compartmentId": inst["compartment_id"],
        "availabilityDomain": inst["zone"], "faultDomain": "FAULT-DOMAIN-1",
        "displayName": inst.get("display_name") or inst["id"], "shape": inst["instance_type"],
        "region": inst["region"], "lifecycleState": LIFECYCLE[inst["state"]],
        "timeCreated": iso(inst["launched_at"]), "imageId": inst["image_id"],
        "sourceDetails": {"sourceType": "image", "imageId": inst["image_id"],
                          "bootVolumeSizeInGBs": inst.get("disk_gb") or 47},
        "metadata": inst.get("metadata") or {}, "freeformTags": inst.get("tags") or {},
        "definedTags": {}, "extendedMetadata": {}, "launchMode": "PARAVIRTUALIZED",
        "agentConfig": {"isMonitoringDisabled": False, "isManagementDisabled": False},
    }
    if inst.get("spot"):
        o["preemptibleInstanceConfig"] = {"preemptionAction": {"type": "TERMINATE",
                                                               "preserveBootVolume": False}}
    if inst.get("compute_cluster_id"):
        o["computeClusterId"] = inst["compute_cluster_id"]
    del acct
    return o


def attachment_json(inst):
    st = inst["state"]
    o = {"id": inst["attachment_id"], "instanceId": inst["id"], "availabilityDomain": inst["zone"],
         "compartmentId": inst["compartment_id"], "subnetId": inst["subnet_id"], "nicIndex": 0,
         "displayName": "primary", "timeCreated": iso(inst["launched_at"]),
         "lifecycleState": {"pending": "ATTACHING", "running": "ATTACHED"}.get(st, "DETACHED")}
    if st == "running":
        o["vnicId"] = inst["vnic_id"]  # OCI leaves it out while the VNIC is attaching
    return o


def vnic_json(inst):
    o = {"id": inst["vnic_id"], "availabilityDomain": inst["zone"], "compartmentId": inst["compartment_id"],
         "subnetId": inst["subnet_id"], "isPrimary": True, "privateIp": inst["ip"],
         "hostnameLabel": inst["id"][-12:], "macAddress": "02:00:17:00:%02x:%02x" % tuple(
             int(x) for x in inst["ip"].split(".")[2:]),
         "lifecycleState": "AVAILABLE" if inst["state"] != "terminated" else "TERMINATED",
         "timeCreated": iso(inst["launched_at"]), "displayName": "primary",
         "nsgIds": list(inst.get("nsg_ids") or [])}
    if inst.get("assign_public_ip"):
        o["publicIp"] = inst["ip"]
    return o


def _paged(items, q, key):
    try:
        limit = int(q.get("limit", DEFAULT_LIMIT))
    except ValueError:
        raise OciError(400, "InvalidParameter", "limit must be an integer")
    if limit < 1 or limit > 1000:
        raise OciError(400, "InvalidParameter", "limit must be between 1 and 1000")
    start = 0
    if q.get("page"):
        try:
            d = json.loads(base64.urlsafe_b64decode(q["page"].encode()))
            if d["k"] != key:
                raise ValueError
            start = int(d["o"])
        except Exception:
            raise OciError(400, "InvalidParameter", "The page token is invalid")
    page = items[start:start + limit]
    nxt = None
    if start + limit < len(items):
        nxt = base64.urlsafe_b64encode(json.dumps({"o": start + limit, "k": key}).encode()).decode()
    return page, nxt


def _need(d, name):
    v = d.get(name)
    if v is None or v == "":
        raise OciError(400, "MissingParameter", "Missing parameter %s" % name)
    return v


def _compartment(cloud, cid):
    if not isinstance(cid, str) or not (cid == cloud.oci_account.tenancy or cid.startswith("ocid1.compartment.")):
        raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return cid


def _instance(cloud, iid, region):
    inst = cloud.instances.get(iid)
    if not inst or inst.get("provider") != "oci" or inst["region"] != region or not cloud.visible(inst):
        raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return inst


# ------------------------------------------------------------------ actions
def launch_instance(cloud, region, q, headers, body):
    try:
        d = json.loads(body or b"null")
    except ValueError:
        raise OciError(400, "InvalidParameter", "The request body is not valid JSON")
    if not isinstance(d, dict):
        raise OciError(400, "InvalidParameter", "The request body must be a LaunchInstanceDetails object")
    token = headers.get("opc-retry-token")
    if token is not None and not (1 <= len(token) <= 64):
        raise OciError(400, "InvalidParameter", "opc-retry-token must be 1 to 64 characters")
    fp = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
    with cloud.lock:
        st = state(cloud)
        if token and token in st["tokens"]:
            prev = st["tokens"][token]
            if prev["fingerprint"] != fp:
                raise OciError(409, "Conflict", "The retry token was already used with different "
                               "request parameters.")
            inst = cloud.instances.get(prev["instance_id"])
            if inst is None or not cloud.visible(inst) or cloud.take_fault(
                    "invalidate_token", lambda f: True, provider="oci"):
                raise OciError(409, "InvalidatedRetryToken", "The retry token has been invalidated.")
            return 200, instance_json(cloud, inst)
    ad = _need(d, "availabilityDomain")
    if ad not in ad_names(region):
        raise OciError(400, "InvalidParameter", "Invalid availabilityDomain %s for region %s" % (ad, region))
    comp = _compartment(cloud, _need(d, "compartmentId"))
    shape = _need(d, "shape")
    if not isinstance(shape, str) or not re.match(r"^(VM|BM)\.[A-Za-z0-9.\-]+$", shape):
        raise OciError(400, "InvalidParameter", "Invalid shape %r" % (shape,))
    src = d.get("sourceDetails") or {}
    image = src.get("imageId") or d.get("imageId")
    if not image:
        raise OciError(400, "MissingParameter", "sourceDetails.imageId is required")
    boot_gb = src.get("bootVolumeSizeInGBs")
    if boot_gb is not None and (not isinstance(boot_gb, int) or isinstance(boot_gb, bool)
                                or boot_gb < 50 or boot_gb > 32768):
        # OCI docs "Boot Volumes": a custom boot volume is 50 GB to 32 TB
        raise OciError(400, "InvalidParameter", "bootVolumeSizeInGBs must be between 50 and 32768")
    vnic = d.get("createVnicDetails") or {}
    subnet = vnic.get("subnetId") or d.get("subnetId")
    if subnet not in (SUBNET_TRAINING, SUBNET_NORULE):
        raise OciError(404, "NotAuthorizedOrNotFound", "Subnet %s not found" % subnet)
    with cloud.lock:
        nsg_ids = oci_nsg.check_launch(cloud, vnic)
    tags = d.get("freeformTags") or {}
    if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise OciError(400, "InvalidParameter", "freeformTags must map strings to strings")
    if any(len(k) > 100 or "." in k or " " in k or len(v) > 256 for k, v in tags.items()):
        raise OciError(400, "InvalidParameter", "Invalid freeform tag key or value")
    md = d.get("metadata") or {}
    if not isinstance(md, dict):
        raise OciError(400, "InvalidParameter", "metadata must be an object")
    keys = [k for k in str(md.get("ssh_authorized_keys", "")).splitlines() if k.strip()]
    if md.get("user_data"):
        try:
            raw = base64.b64decode(md["user_data"], validate=True)
        except (binascii.Error, ValueError):
            raise OciError(400, "InvalidParameter", "metadata.user_data must be base64")
        if len(raw) > 32000:
            raise OciError(400, "InvalidParameter", "metadata.user_data is larger than 32000 bytes")
        keys += keys_from_user_data(raw)
    oci_cluster.check_launch(cloud, region, d, ad, comp, shape)
    pre = d.get("preemptibleInstanceConfig")
    if pre is not None:
        act = (pre or {}).get("preemptionAction") or {}
        if act.get("type") != "TERMINATE":
            raise OciError(400, "InvalidParameter", "preemptionAction.type must be TERMINATE")

    # faults and capacity
    match = lambda f: f.get("region") in (None, region)  # noqa: E731
    if cloud.take_fault("quota", match, provider="oci"):
        raise OciError(400, "LimitExceeded", "You have reached your service limit in this Availability "
                       "Domain for this resource. Please try launching the instance in a different "
                       "availability domain or Region, or try using a different shape.")
    if cloud.take_fault("capacity", lambda f: match(f) and f.get("instance_type") in (None, shape) and
                        ad_matches(f.get("zone"), ad), provider="oci"):
        raise OciError(500, "InternalError", "Out of host capacity.")
    if cloud.timing is not None and not cloud.timing.take_launch("oci", cloud.oci_account.tenancy, region, 1):
        # The timing model's launch bucket (timing.py, "launch_bucket"), refused as OCI
        # refuses a rate limit: 429 TooManyRequests (OCI API Errors).
        raise OciError(429, "TooManyRequests", "Too many requests for the tenancy.")
    with cloud.lock:
        cap = None
        for k, v in cloud.capacity.items():
            it, z = k.split("|", 1)
            if it == shape and ad_matches(z, ad):
                cap = v
        if cap is not None:
            live = sum(1 for i in cloud.instances.values() if i.get("provider") == "oci" and
                       i["instance_type"] == shape and i["zone"] == ad and i["state"] in ("pending", "running"))
            if live >= cap:
                raise OciError(500, "InternalError", "Out of host capacity.")
        partial = cloud.take_fault("partial", lambda f: match(f) and f.get("instance_type") in (None, shape),
                                   provider="oci")
        launched = now_ms()
        iid = "ocid1.instance.oc1.%s.%s" % (region_key(region), secrets.token_hex(26))
        inst = {
            "id": iid, "provider": "oci", "reservation_id": None, "region": region, "zone": ad,
            "instance_type": shape, "image_id": image, "state": "pending", "state_changed_at": launched,
            "launched_at": launched, "running_at": None, "terminated_at": None, "ip": cloud.new_ip(),
            "spot": pre is not None, "sir_id": None, "client_token": token, "tags": dict(tags),
            "key_name": None, "subnet_id": subnet, "compartment_id": comp,
            "display_name": d.get("displayName"), "metadata": {k: v for k, v in md.items()},
            "compute_cluster_id": d.get("computeClusterId"), "disk_gb": boot_gb or 47,
            "nsg_ids": nsg_ids,
            "assign_public_ip": bool(vnic.get("assignPublicIp", False)),
            "vnic_id": "ocid1.vnic.oc1.%s.%s" % (region_key(region), secrets.token_hex(26)),
            "attachment_id": "ocid1.vnicattachment.oc1.%s.%s" % (region_key(region), secrets.token_hex(26)),
            "authorized_keys": keys, "state_reason": None, "reason": None,
            "fail_boot": bool(partial), "boot_delay_ms": cloud.boot_delay_ms, "node": None,
            "interrupt_at_ms": None,
        }
        cloud.add_instance(inst)
        if token:
            state(cloud)["tokens"][token] = {"instance_id": iid, "fingerprint": fp, "created_at": launched}
        cloud._start_boot(inst)
        cloud.save()
    log("LaunchInstance %s in %s%s%s -> %s" % (shape, ad, " preemptible" if pre is not None else "",
                                               " (will fail)" if partial else "", iid))
    return 200, instance_json(cloud, inst)


def list_instances(cloud, region, q):
    comp = _compartment(cloud, _need(q, "compartmentId"))
    with cloud.lock:
        sel = [i for i in cloud.in_region("oci", region)
               if i["compartment_id"] == comp and cloud.visible(i)]
        # Eventual consistency: a listing may not show instances launched a moment ago.
        lag = cloud.take_fault("describe_lag", lambda f: f.get("region") in (None, region), provider="oci")
        if lag:
            sel = [i for i in sel if now_ms() - i["launched_at"] >= lag["ms"]]
        for name, fn in (("availabilityDomain", lambda i: i["zone"]), ("displayName", lambda i: i.get("display_name")),
                         ("lifecycleState", lambda i: LIFECYCLE[i["state"]])):
            if q.get(name):
                sel = [i for i in sel if fn(i) == q[name]]
        desc = q.get("sortOrder", "DESC" if q.get("sortBy", "TIMECREATED") == "TIMECREATED" else "ASC") == "DESC"
        if q.get("sortBy") == "DISPLAYNAME":
            sel.sort(key=lambda i: i.get("display_name") or "", reverse=desc)
        else:
            sel.sort(key=lambda i: (i["launched_at"], cloud.pos[i["id"]]), reverse=desc)
        # A page token belongs to one query: the same filters and order (any page size).
        same = sorted((k, v) for k, v in q.items() if k not in ("page", "limit"))
        key = hashlib.sha256(json.dumps([region, same]).encode()).hexdigest()[:12]
        page, nxt = _paged(sel, q, key)
        return 200, [instance_json(cloud, i) for i in page], nxt


def terminate_instance(cloud, region, iid):
    with cloud.lock:
        inst = _instance(cloud, iid, region)
        cloud.begin_terminate(inst)
        cloud.save()
    log("TerminateInstance %s" % iid)
    return 204, None


def list_vnic_attachments(cloud, region, q):
    comp = _compartment(cloud, _need(q, "compartmentId"))
    with cloud.lock:
        sel = [i for i in cloud.in_region("oci", region)
               if i["compartment_id"] == comp and cloud.visible(i)]
        if q.get("instanceId"):
            sel = [i for i in sel if i["id"] == q["instanceId"]]
        if q.get("availabilityDomain"):
            sel = [i for i in sel if i["zone"] == q["availabilityDomain"]]
        key = hashlib.sha256(json.dumps([region, q.get("instanceId"), comp]).encode()).hexdigest()[:12]
        page, nxt = _paged(sel, q, key)
        return 200, [attachment_json(i) for i in page], nxt


def get_vnic(cloud, region, vid):
    with cloud.lock:
        for i in cloud.instances.values():
            if i.get("provider") == "oci" and i.get("vnic_id") == vid and i["region"] == region \
                    and i["state"] == "running":
                return 200, vnic_json(i)
    raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")


def get_subnet(cloud, sid):
    lists = {SUBNET_TRAINING: [SECLIST_TRAINING], SUBNET_NORULE: [SECLIST_NORULE]}.get(sid)
    if lists is None:
        raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return 200, {"id": sid, "cidrBlock": cloud.oci_account.cidr, "securityListIds": lists, "vcnId": VCN,
                 "compartmentId": cloud.oci_account.tenancy, "lifecycleState": "AVAILABLE",
                 "prohibitPublicIpOnVnic": True, "displayName": "training" if sid == SUBNET_TRAINING else "norule",
                 "routeTableId": "ocid1.routetable.oc1..aaaaaaaamockroutes"}


def security_list_json(cloud, sid, sl):
    return {"id": sid, "compartmentId": cloud.oci_account.tenancy, "vcnId": VCN, "lifecycleState": "AVAILABLE",
            "displayName": sid.rsplit("mock", 1)[-1], "ingressSecurityRules": sl["rules"],
            "egressSecurityRules": [{"protocol": "all", "destination": "0.0.0.0/0",
                                     "destinationType": "CIDR_BLOCK", "isStateless": False}]}


def security_list(cloud, method, sid, headers, body):
    with cloud.lock:
        sl = state(cloud)["security_lists"].get(sid)
        if sl is None:
            raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
        if method == "PUT":
            im = headers.get("if-match")
            if im and im != sl["etag"]:
                raise OciError(412, "NoEtagMatch", "The resource's etag does not match if-match")
            try:
                d = json.loads(body or b"null")
            except ValueError:
                raise OciError(400, "InvalidParameter", "The request body is not valid JSON")
            rules = d.get("ingressSecurityRules") if isinstance(d, dict) else None
            if rules is not None:
                if not isinstance(rules, list) or not all(isinstance(r, dict) and r.get("protocol") and r.get("source")
                                                          for r in rules):
                    raise OciError(400, "InvalidParameter", "ingressSecurityRules must be rules with protocol and source")
                sl["rules"] = rules
                sl["etag"] = secrets.token_hex(8)
                cloud.save()
                log("UpdateSecurityList %s: %d ingress rules" % (sid, len(rules)))
        return 200, security_list_json(cloud, sid, sl), sl["etag"]


def get_user(cloud, uid):
    acct = cloud.oci_account
    if uid != acct.user:
        raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return 200, {"id": acct.user, "compartmentId": acct.tenancy, "name": "mockcloud-user",
                 "description": "the mock cloud's API user", "lifecycleState": "ACTIVE",
                 "timeCreated": iso(cloud.started_at), "isMfaActivated": False,
                 "email": "mockcloud@localhost", "freeformTags": {}, "definedTags": {}}


def list_ads(cloud, region, q):
    cid = _need(q, "compartmentId")
    if cid != cloud.oci_account.tenancy:
        raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return 200, [{"name": n, "id": "ocid1.availabilitydomain.oc1..mock%d" % i, "compartmentId": cid}
                 for i, n in enumerate(ad_names(region), 1)]


# CreateComputeCapacityReport (Core Services API 20160918, POST /computeCapacityReports;
# the oci-core SDK's CreateComputeCapacityReportDetails / ComputeCapacityReport models):
# body {compartmentId, availabilityDomain, shapeAvailabilities[{instanceShape,
# instanceShapeConfig?, faultDomain?}]}; 200 with the report: the same compartment and AD,
# per shape {instanceShape, faultDomain, instanceShapeConfig, availableCount,
# availabilityStatus AVAILABLE | OUT_OF_HOST_CAPACITY | HARDWARE_NOT_SUPPORTED}, timeCreated.
# The compartment "should always be the root compartment": the mock answers any other as
# it answers a compartment it does not know (404). The mock's model of the count: what
# "/_mock/capacity" leaves for the shape in that AD (absent: 64, no limit), and a name that
# is not a VM./BM. shape is HARDWARE_NOT_SUPPORTED. dstack saw the real report say an H100
# bare metal shape was out of capacity while launches succeeded (#2343): a hint only.
def create_capacity_report(cloud, region, body):
    try:
        d = json.loads(body or b"null")
    except ValueError:
        raise OciError(400, "InvalidParameter", "The request body is not valid JSON")
    if not isinstance(d, dict):
        raise OciError(400, "InvalidParameter",
                       "The request body must be a CreateComputeCapacityReportDetails object")
    cid = _need(d, "compartmentId")
    if cid != cloud.oci_account.tenancy:
        raise OciError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    ad = _need(d, "availabilityDomain")
    if ad not in ad_names(region):
        raise OciError(400, "InvalidParameter", "Invalid availabilityDomain: %s" % ad)
    shapes = d.get("shapeAvailabilities")
    if not isinstance(shapes, list) or not shapes:
        raise OciError(400, "MissingParameter", "Missing parameter shapeAvailabilities")
    out = []
    with cloud.lock:
        for sa in shapes:
            if not isinstance(sa, dict):
                raise OciError(400, "InvalidParameter", "shapeAvailabilities items must be objects")
            shape = _need(sa, "instanceShape")
            if not (shape.startswith("VM.") or shape.startswith("BM.")):
                status, count = "HARDWARE_NOT_SUPPORTED", 0
            else:
                cap = None
                for k, v in cloud.capacity.items():
                    it, z = k.split("|", 1)
                    if it == shape and ad_matches(z, ad):
                        cap = v
                live = sum(1 for i in cloud.instances.values() if i.get("provider") == "oci" and
                           i["instance_type"] == shape and i["zone"] == ad and
                           i["state"] in ("pending", "running"))
                count = 64 if cap is None else max(0, cap - live)
                status = "AVAILABLE" if count > 0 else "OUT_OF_HOST_CAPACITY"
            out.append({"instanceShape": shape, "faultDomain": sa.get("faultDomain"),
                        "instanceShapeConfig": sa.get("instanceShapeConfig"),
                        "availableCount": count, "availabilityStatus": status})
    return 200, {"compartmentId": cid, "availabilityDomain": ad, "shapeAvailabilities": out,
                 "timeCreated": iso(now_ms())}


# ------------------------------------------------------------------ dispatch
def _route(cloud, method, path, q, region, headers, body):
    """(action, fn) for one request; fn returns (status, obj[, next_page or etag])."""
    parts = path[len(API):].strip("/").split("/")
    r = parts[0] if parts else ""
    if r == "instances" and len(parts) == 1:
        if method == "POST":
            return "LaunchInstance", lambda: launch_instance(cloud, region, q, headers, body)
        if method == "GET":
            return "ListInstances", lambda: list_instances(cloud, region, q)
    if r == "instances" and len(parts) == 2:
        if method == "GET":
            return "GetInstance", lambda: (200, instance_json(cloud, _instance(cloud, parts[1], region)))
        if method == "DELETE":
            return "TerminateInstance", lambda: terminate_instance(cloud, region, parts[1])
    if r == "vnicAttachments" and len(parts) == 1 and method == "GET":
        return "ListVnicAttachments", lambda: list_vnic_attachments(cloud, region, q)
    if r == "vnics" and len(parts) == 2 and method == "GET":
        return "GetVnic", lambda: get_vnic(cloud, region, parts[1])
    if r == "subnets" and len(parts) == 2 and method == "GET":
        return "GetSubnet", lambda: get_subnet(cloud, parts[1])
    if r == "securityLists" and len(parts) == 2 and method in ("GET", "PUT"):
        return ("GetSecurityList" if method == "GET" else "UpdateSecurityList",
                lambda: security_list(cloud, method, parts[1], headers, body))
    if r == "users" and len(parts) == 2 and method == "GET":
        return "GetUser", lambda: get_user(cloud, parts[1])
    if r == "availabilityDomains" and len(parts) == 1 and method == "GET":
        return "ListAvailabilityDomains", lambda: list_ads(cloud, region, q)
    if r == "computeCapacityReports" and len(parts) == 1 and method == "POST":
        return "CreateComputeCapacityReport", lambda: create_capacity_report(cloud, region, body)
    action, fn = oci_nsg.route(cloud, method, parts, q, region, headers, body)
    if action:
        return action, fn
    return oci_cluster.route(cloud, method, parts, q, region, headers, body)


def handle(cloud, method, raw_path, headers, body):
    """Serves one OCI request. Returns (status, [(header, value)], body bytes, lost):
    lost means the call took effect and the reply must be dropped."""
    t0 = time.monotonic()
    rid = secrets.token_hex(16).upper()
    split = urlsplit(raw_path)
    m = _PATH_RE.match(split.path)
    region = m.group(1) or cloud.oci_account.region
    path = unquote(m.group(2))
    q = dict(parse_qsl(split.query, keep_blank_values=True))
    action, fn = _route(cloud, method, path, q, region, headers, body)
    extra = []
    lost = False
    if cloud.latency_ms:
        time.sleep(cloud.latency_ms / 1000.0)
    try:
        verify(cloud.oci_account, method, raw_path, headers, body)
        match = lambda f: f.get("action") in (None, action) and f.get("region") in (None, region)  # noqa: E731
        if action is None:
            raise OciError(404, "NotAuthorizedOrNotFound", "No such operation: %s %s" % (method, path))
        if cloud.take_fault("throttle", match, provider="oci"):
            raise OciError(429, "TooManyRequests", "Too many requests for the tenancy.")
        if cloud.take_fault("error5xx", match, provider="oci"):
            raise OciError(503, "ServiceUnavailable", "The service is currently unavailable.")
        res = fn()
        status, obj = res[0], res[1]
        if len(res) > 2 and res[2]:
            extra.append(("opc-next-page" if action.startswith("List") else "etag", res[2]))
        code = "OK"
        garbled = cloud.take_fault("garbled_reply", match, provider="oci")
        if garbled:
            code = "GARBLED"
        if cloud.take_fault("lose_response", match, provider="oci"):
            lost, code = True, "LOST"
    except OciError as e:
        status, obj, code = e.status, {"code": e.code, "message": e.message}, e.code
    except Exception as e:  # a bug in the mock: say so, keep serving
        import traceback
        traceback.print_exc()
        status, obj, code = 500, {"code": "InternalError", "message": "mockcloud bug: %r" % (e,)}, "InternalError"
    cloud.count_call(action or "-", region, code)
    log("%s oci %s %s -> %d %s %dms%s" % (method, region, action or path, status, code,
                                          (time.monotonic() - t0) * 1000, " (response dropped)" if lost else ""))
    out = b"" if obj is None else json.dumps(obj).encode()
    if code == "GARBLED":
        out = out[: max(1, len(out) // 3)]  # the action happened; its reply is cut off
    hdrs = [("opc-request-id", rid)] + extra
    if obj is not None:
        hdrs.append(("Content-Type", "application/json"))
    return status, hdrs, out, lost
