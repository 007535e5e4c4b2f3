"""Mock Google Compute Engine v1 (JSON over HTTP at /compute/v1/) and Google's OAuth2
token endpoint (POST /token) for the mock cloud.

Authentication is checked the way Google does it, independently of the broker's C code:
the mock makes an RSA key, writes it as a service-account key file (STATE_DIR/
gcp-service-account.json, whose token_uri points back at the mock), verifies each
jwt-bearer assertion's RS256 signature with python3-cryptography against the public
half, and hands out bearer tokens that every Compute call must carry.

Instances live in the shared Cloud state (cloud.py) with provider "gcp", so they get
real sshd nodes and the same state machine as EC2 instances; this module maps that
state to GCE statuses, Operations, labels, filters and error JSON."""

import base64
import datetime
import fnmatch
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

from . import ec2, gce_firewall, gce_policy
from .cloud import log, now_ms

SELF = "https://www.googleapis.com/compute/v1/"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_AUDIENCES = ("https://oauth2.googleapis.com/token", "https://www.googleapis.com/oauth2/v4/token",
                    "https://accounts.google.com/o/oauth2/token")
ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# Families that come with their GPUs attached (no guestAccelerators allowed or needed).
GPU_FAMILIES = ("a2-", "a3-", "a4-", "g2-")
HTTP_TEXT = {400: "BAD REQUEST", 403: "FORBIDDEN", 404: "NOT FOUND", 409: "CONFLICT",
             500: "INTERNAL SERVER ERROR", 503: "SERVICE UNAVAILABLE"}


class GceError(Exception):
    def __init__(self, status, reason, message, domain="global"):
        Exception.__init__(self, message)
        self.status, self.reason, self.message, self.domain = status, reason, message, domain


def error_json(status, reason, message, domain="global", extra=None):
    e = {"message": message, "domain": domain, "reason": reason}
    if extra:
        e.update(extra)
    return {"error": {"code": status, "message": message, "errors": [e]}}


def rfc3339(ms):
    """Compute Engine writes its timestamps in Pacific time with an offset."""
    tz = datetime.timezone(datetime.timedelta(hours=-8))
    d = datetime.datetime.fromtimestamp(ms / 1000.0, tz)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03d" % (ms % 1000) + "-08:00"


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def region_of(zone):
    return zone.rsplit("-", 1)[0]


def int64(v, name):
    """int64 fields arrive as JSON strings (Google's mapping) or numbers (some clients)."""
    if isinstance(v, bool):
        raise GceError(400, "invalid", "Invalid value for field '%s': '%s'." % (name, v))
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.match(r"^-?[0-9]+$", v):
        return int(v)
    raise GceError(400, "invalid", "Invalid value for field '%s': '%s'." % (name, v))


# ---------------------------------------------------------------------- list filters
class FilterError(Exception):
    pass


_TOKEN = re.compile(r'\s*(\(|\)|"(?:[^"\\]|\\.)*"|!=|=|[^\s()="!]+)')


def _tokens(s):
    pos, out = 0, []
    s = s.strip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m or m.end() == pos:
            raise FilterError(s)
        out.append(m.group(1))
        pos = m.end()
        while pos < len(s) and s[pos].isspace():
            pos += 1
    return out


def _field(res, path):
    cur = res
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, (int, float)):
        return str(cur)
    return cur if isinstance(cur, str) else None


def parse_filter(text):
    """A list filter as Compute takes it: comparisons `field = "v"`, `field != v`,
    `field eq regex`, `field ne regex`, in parentheses, joined by AND, OR or nothing
    (AND). OR binds tighter than AND (AIP-160). Returns a predicate on a resource dict."""
    toks = _tokens(text)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        t = peek()
        if t is None:
            raise FilterError(text)
        pos[0] += 1
        return t

    def value(v):
        if v.startswith('"'):
            return re.sub(r'\\(.)', r'\1', v[1:-1])
        return v

    def comparison():
        field = take()
        if field in ("(", ")", "=", "!=", "AND", "OR"):
            raise FilterError(text)
        op = take()
        if op not in ("=", "!=", "eq", "ne", ":"):
            raise FilterError(text)
        v = value(take())
        if op in ("eq", "ne"):
            try:
                rx = re.compile(v)
            except re.error:
                raise FilterError(text)

            def f(res, field=field, rx=rx, neg=(op == "ne")):
                x = _field(res, field)
                return (x is not None and rx.fullmatch(x) is not None) != neg
            return f

        def g(res, field=field, v=v, op=op):
            x = _field(res, field)
            if op == ":":
                return x is not None and (v == "*" or v in x)
            hit = x is not None and (fnmatch.fnmatchcase(x, v) if "*" in v else x == v)
            return hit if op == "=" else not hit
        return g

    def term():
        neg = False
        if peek() == "NOT":
            take()
            neg = True
        if peek() == "(":
            take()
            e = conj()
            if take() != ")":
                raise FilterError(text)
        else:
            e = comparison()
        return (lambda r: not e(r)) if neg else e

    def disj():
        terms = [term()]
        while peek() == "OR":
            take()
            terms.append(term())
        return lambda r: any(t(r) for t in terms)

    def conj():
        parts = [disj()]
        while peek() not in (None, ")"):
            if peek() == "AND":
                take()
            parts.append(disj())
        return lambda r: all(p(r) for p in parts)

    if not toks:
        return lambda r: True
    e = conj()
    if pos[0] != len(toks):
        raise FilterError(text)
    return e


# ---------------------------------------------------------------------- the service
class Gce:
    def __init__(self, cloud, cfg, port):
        self.cloud = cloud
        self.cfg = cfg
        self.project = cfg.gcp_project
        self.project_number = str(100000000000 + int(hashlib.sha256(self.project.encode()).hexdigest()[:8], 16))
        self.token_ttl_s = cfg.gcp_token_ttl_s
        self.email = "isc-broker@%s.iam.gserviceaccount.com" % self.project
        self.token_uri = "http://127.0.0.1:%d/token" % port
        self.tokens = {}  # access token -> expiry (epoch ms); not persisted: a restart logs everyone out
        self.lock = cloud.lock
        ex = cloud.extra.setdefault("gce", {})
        ex.setdefault("operations", {})   # name -> operation record
        ex.setdefault("requests", {})     # "zone|requestId" -> {"op": name, "fingerprint": ...}
        ex.setdefault("op_counter", 0)
        self.state = ex
        self._load_key()
        self._write_key_file()

    # ------------------------------------------------------------------ the key
    def _load_key(self):
        path = os.path.join(self.cloud.state_dir, "gcp-key.pem")
        if os.path.exists(path):
            with open(path, "rb") as f:
                self.key = serialization.load_pem_private_key(f.read(), password=None)
        else:
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())
            fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            os.replace(path + ".tmp", path)
        self.public_key = self.key.public_key()
        der = self.public_key.public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
        self.key_id = hashlib.sha1(der).hexdigest()

    def _write_key_file(self):
        pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode()
        doc = {
            "type": "service_account", "project_id": self.project, "private_key_id": self.key_id,
            "private_key": pem, "client_email": self.email,
            "client_id": str(int(self.key_id[:15], 16)),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": self.token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/%s" % self.email,
            "universe_domain": "googleapis.com",
        }
        self.key_file = os.path.join(self.cloud.state_dir, "gcp-service-account.json")
        fd = os.open(self.key_file + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(self.key_file + ".tmp", self.key_file)

    # ------------------------------------------------------------------ routing
    @staticmethod
    def owns(path):
        return path.startswith("/compute/v1/") or path.split("?")[0] in ("/token", "/oauth2/v4/token")

    def handle(self, method, path, headers, body):
        """-> (status, json object or raw bytes, lost). `lost`: the call took effect; drop
        the reply."""
        t0 = time.monotonic()
        split = urlsplit(path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        if split.path in ("/token", "/oauth2/v4/token"):
            action, region = "oauth2.token", None
            status, obj = self._guarded(action, region, lambda: self._token(method, headers, body))
        else:
            parts = [unquote(p) for p in split.path[len("/compute/v1/"):].split("/")]
            action, region, fn = self._route(method, parts)
            status, obj = self._guarded(action, region, lambda: fn(parts, query, body, headers),
                                        auth=headers)
        code = "OK" if status == 200 else (obj.get("error", {}).get("errors", [{}])[0].get("reason")
                                           if isinstance(obj.get("error"), dict) else obj.get("error"))
        if status == 200 and self.cloud.take_fault(
                "garbled_reply", lambda f: f.get("action") in (None, action), provider="gcp") is not None:
            # The call happened; its reply is cut off mid-document (a proxy that truncated it).
            text = json.dumps(obj, indent=1).encode()
            obj = text[:max(1, len(text) // 3)]
            code = "GARBLED"
        lost = status == 200 and self.cloud.take_fault(
            "lose_response", lambda f: f.get("action") in (None, action), provider="gcp") is not None
        self.cloud.count_call(action, "gcp:" + (region or "-"), "LOST" if lost else (code or str(status)))
        log("%s gce %s %s -> %d %s %dms%s" % (method, region or "-", action, status, code or "",
                                              (time.monotonic() - t0) * 1000, " (response dropped)" if lost else ""))
        return status, obj, lost

    def _guarded(self, action, region, fn, auth=None):
        lat = self.cloud.latency_ms
        if lat:
            time.sleep(lat / 1000.0)
        try:
            if auth is not None:
                self._check_bearer(auth)
            match = lambda f: f.get("action") in (None, action) and f.get("region") in (None, region)  # noqa: E731
            if self.cloud.take_fault("throttle", match, provider="gcp"):
                if action == "oauth2.token":
                    return 429, {"error": "rate_limit_exceeded", "error_description": "Rate limit exceeded."}
                raise GceError(403, "rateLimitExceeded",
                               "Rate Limit Exceeded", domain="usageLimits")
            if self.cloud.take_fault("error5xx", match, provider="gcp"):
                if action == "oauth2.token":
                    return 503, {"error": "internal_failure", "error_description": "Backend Error"}
                raise GceError(503, "backendError", "Backend Error")
            return fn()
        except GceError as e:
            return e.status, error_json(e.status, e.reason, e.message, e.domain)
        except Exception as e:  # a bug in the mock: say so, keep serving
            import traceback
            traceback.print_exc()
            return 500, error_json(500, "backendError", "mockcloud bug: %r" % (e,))

    def _route(self, method, p):
        """-> (action, region, handler). Paths: projects/P[/zones/Z/...|/aggregated/...]."""
        n = len(p)
        if n >= 2 and p[0] == "projects":
            if n == 2 and method == "GET":
                return "projects.get", None, self._project_get
            if n >= 4 and p[2] == "zones":
                z = p[3]
                reg = region_of(z) if ZONE_RE.match(z) else None
                if n == 5 and p[4] == "instances":
                    if method == "GET":
                        return "instances.list", reg, self._instances_list
                    if method == "POST":
                        return "instances.insert", reg, self._instances_insert
                if n == 6 and p[4] == "instances" and p[5] == "bulkInsert" and method == "POST":
                    return "instances.bulkInsert", reg, self._bulk_insert
                if n == 6 and p[4] == "instances":
                    if method == "GET":
                        return "instances.get", reg, self._instances_get
                    if method == "DELETE":
                        return "instances.delete", reg, self._instances_delete
                if n == 5 and p[4] == "operations" and method == "GET":
                    return "zoneOperations.list", reg, self._ops_list
                if n == 6 and p[4] == "operations" and method == "GET":
                    return "zoneOperations.get", reg, self._op_get
                if n == 7 and p[4] == "operations" and p[6] == "wait" and method == "POST":
                    return "zoneOperations.wait", reg, self._op_wait
            pol = gce_policy.route(self, method, p) or gce_firewall.route(self, method, p)
            if pol is not None:
                return pol
            if n == 4 and p[2] == "aggregated" and method == "GET":
                if p[3] == "instances":
                    return "instances.aggregatedList", None, self._instances_aggregated
                if p[3] == "operations":
                    return "globalOperations.aggregatedList", None, self._ops_aggregated

        def not_found(*a):
            raise GceError(404, "notFound", "The requested URL was not found on this server.")
        return "unknown", None, not_found

    # ------------------------------------------------------------------ OAuth2
    def _token(self, method, headers, body):
        def bad(error, desc, status=400):
            return status, {"error": error, "error_description": desc}
        if method != "POST":
            return bad("invalid_request", "Only POST is supported.")
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if form.get("grant_type") != JWT_GRANT:
            return bad("unsupported_grant_type", "Invalid grant_type: %s" % form.get("grant_type", ""))
        parts = form.get("assertion", "").split(".")
        if len(parts) != 3:
            return bad("invalid_grant", "Invalid JWT: not three base64url parts.")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except (ValueError, UnicodeDecodeError):
            return bad("invalid_grant", "Invalid JWT: unreadable header or claims.")
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return bad("invalid_grant", "Invalid JWT: header and claims must be objects.")
        if header.get("alg") != "RS256":
            return bad("invalid_grant", "Invalid JWT: alg must be RS256.")
        if "kid" in header and header["kid"] != self.key_id:
            return bad("invalid_grant", "Invalid JWT Signature.")
        if claims.get("iss") != self.email:
            return bad("invalid_grant", "Invalid grant: account not found")
        try:
            self.public_key.verify(sig, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(),
                                   hashes.SHA256())
        except InvalidSignature:
            return bad("invalid_grant", "Invalid JWT Signature.")
        if claims.get("aud") not in (self.token_uri,) + GOOGLE_AUDIENCES:
            return bad("invalid_grant", "Invalid JWT: Failed audience check.")
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if (not isinstance(iat, int) or not isinstance(exp, int) or exp - iat > 3600 or exp <= iat
                or iat > now + 300 or exp < now - 300):
            return bad("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in "
                       "a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        scope = claims.get("scope")
        if not isinstance(scope, str) or not scope.strip():
            return bad("invalid_scope", "Empty or missing scope not allowed.")
        if not any(s in ("https://www.googleapis.com/auth/cloud-platform",
                         "https://www.googleapis.com/auth/compute") for s in scope.split()):
            return bad("invalid_scope", "The scope does not allow Compute Engine.")
        tok = "ya29.mock." + secrets.token_urlsafe(48)
        with self.lock:
            self.tokens[tok] = now_ms() + self.token_ttl_s * 1000
        return 200, {"access_token": tok, "expires_in": self.token_ttl_s, "token_type": "Bearer"}

    def _check_bearer(self, headers):
        auth = headers.get("Authorization") or ""
        if not auth.startswith("Bearer "):
            raise GceError(401, "required", "Request is missing required authentication credential. Expected "
                           "OAuth 2 access token, login cookie or other valid authentication credential.")
        with self.lock:
            exp = self.tokens.get(auth[7:].strip())
        if exp is None or exp <= now_ms():
            raise GceError(401, "authError", "Invalid Credentials")

    def _project(self, p):
        if p[1] != self.project:
            raise GceError(403, "forbidden", "Required 'compute.projects.get' permission for 'projects/%s'" % p[1])

    # ------------------------------------------------------------------ projects
    def _project_get(self, p, q, body, headers):
        self._project(p)
        with self.lock:
            live = [i for i in self.cloud.instances.values() if i.get("provider") == "gcp"
                    and i["state"] in ("pending", "running")]
        return 200, {
            "kind": "compute#project", "id": self.project_number,
            "creationTimestamp": rfc3339(self.cloud.started_at - 86400000), "name": self.project,
            "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": "mockFp00000="},
            "quotas": [{"metric": "INSTANCES", "limit": 1000.0, "usage": float(len(live))}],
            "selfLink": SELF + "projects/" + self.project,
            "defaultServiceAccount": "%s-compute@developer.gserviceaccount.com" % self.project_number,
            "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS", "defaultNetworkTier": "PREMIUM",
            "vmDnsSetting": "ZONAL_ONLY",
        }

    # ------------------------------------------------------------------ instances
    def _zone(self, p):
        self._project(p)
        z = p[3]
        if not ZONE_RE.match(z):
            raise GceError(404, "notFound", "The resource 'projects/%s/zones/%s' was not found" % (self.project, z))
        return z

    def _listed(self, zone=None):
        """The instances a list call shows; a describe_lag fault hides those launched
        less than its ms ago (lists are eventually consistent)."""
        insts = self._insts(zone)
        lag = self.cloud.take_fault("describe_lag", lambda f: f.get("region") in (
            None, region_of(zone) if zone else None), provider="gcp")
        if lag:
            insts = [i for i in insts if now_ms() - i["launched_at"] >= lag["ms"]]
        return insts

    def _insts(self, zone=None, with_deleted=False):
        out = []
        for i in self.cloud.in_region("gcp", region_of(zone)) if zone else self.cloud.of_provider("gcp"):
            if zone and i["zone"] != zone:
                continue
            if not with_deleted and self.deleted(i):
                continue
            out.append(i)
        return out

    @staticmethod
    def deleted(inst):
        return inst["state"] == "terminated" and inst.get("gce_deleted")

    def status(self, inst):
        st = inst["state"]
        if st == "pending":
            return "PROVISIONING" if now_ms() - inst["launched_at"] < inst.get("boot_delay_ms", 0) / 2 else "STAGING"
        if st == "running":
            return "STOPPING" if inst.get("interrupt_at_ms") else "RUNNING"
        if st == "shutting-down":
            return "STOPPING"
        return "TERMINATED"

    def instance_json(self, inst):
        zone, p = inst["zone"], self.project
        zl = "%sprojects/%s/zones/%s" % (SELF, p, zone)
        status = self.status(inst)
        nic = {"kind": "compute#networkInterface", "network": SELF + "projects/%s/%s" % (p, inst["network"]),
               "networkIP": inst["ip"], "name": "nic0", "fingerprint": "mockNic0000=", "stackType": "IPV4_ONLY"}
        if inst.get("subnetwork"):
            nic["subnetwork"] = SELF + "projects/%s/%s" % (p, inst["subnetwork"])
        if inst.get("access_configs"):
            nic["accessConfigs"] = []
            for ac in inst["access_configs"]:
                a = {"kind": "compute#accessConfig", "type": ac.get("type", "ONE_TO_ONE_NAT"),
                     "name": ac.get("name", "External NAT"), "networkTier": "PREMIUM"}
                if status != "TERMINATED":
                    a["natIP"] = inst["ip"]
                nic["accessConfigs"].append(a)
        out = {
            "kind": "compute#instance", "id": inst["gce_id"], "creationTimestamp": rfc3339(inst["launched_at"]),
            "name": inst["name"], "tags": {"fingerprint": "42WmSpB8rSM="},
            "machineType": "%s/machineTypes/%s" % (zl, inst["machine_type"]), "status": status,
            "zone": zl, "canIpForward": False, "networkInterfaces": [nic],
            "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
                       "source": "%s/disks/%s" % (zl, inst["name"]), "deviceName": "persistent-disk-0",
                       "index": 0, "boot": True, "autoDelete": True, "interface": "SCSI",
                       "diskSizeGb": str(inst.get("disk_gb", 10))}],
            "metadata": {"kind": "compute#metadata", "fingerprint": "mockMeta000=",
                         "items": inst.get("metadata_items", [])},
            "selfLink": "%s/instances/%s" % (zl, inst["name"]),
            "scheduling": dict(inst.get("scheduling", {}), preemptible=bool(inst["spot"])),
            "cpuPlatform": "Intel Sapphire Rapids" if status == "RUNNING" else "Unknown CPU Platform",
            "labels": inst.get("labels", {}), "labelFingerprint": "mockLabel00=",
            "tags": {"items": list(inst.get("network_tags") or []), "fingerprint": "mockTags000="}
            if inst.get("network_tags") else {"fingerprint": "42WmSpB8rSM="},
            "startRestricted": False, "deletionProtection": False, "fingerprint": "mockInst000=",
        }
        if inst.get("accelerators"):
            out["guestAccelerators"] = [{"acceleratorType": "%s/acceleratorTypes/%s" % (zl, a["acceleratorType"]),
                                         "acceleratorCount": a["acceleratorCount"]} for a in inst["accelerators"]]
        if inst.get("resource_policies"):
            out["resourcePolicies"] = list(inst["resource_policies"])
        if inst.get("running_at"):
            out["lastStartTimestamp"] = rfc3339(inst["running_at"])
        if status == "TERMINATED" and inst.get("terminated_at"):
            out["lastStopTimestamp"] = rfc3339(inst["terminated_at"])
        return out

    def _find(self, zone, name):
        for i in reversed(self._insts(zone)):
            if i["name"] == name:
                return i
        return None

    def _filter(self, q):
        try:
            return parse_filter(q.get("filter", ""))
        except FilterError:
            raise GceError(400, "invalid", "Invalid value for field 'filter': '%s'. Invalid list filter expression."
                           % q.get("filter", ""))

    def _page(self, q, items, scope_key):
        """Slices items per maxResults/pageToken. Tokens are opaque and bound to the query."""
        mx = q.get("maxResults")
        try:
            mx = 500 if mx in (None, "") else int(mx)
        except ValueError:
            raise GceError(400, "invalid", "Invalid value for field 'maxResults': '%s'." % mx)
        if mx < 0 or mx > 500:
            raise GceError(400, "invalid", "Invalid value for field 'maxResults': '%d'. Must be less than or equal "
                           "to 500" % mx)
        if mx == 0:
            mx = 500
        key = hashlib.sha256(json.dumps([scope_key, q.get("filter", "")]).encode()).hexdigest()[:12]
        off = 0
        tok = q.get("pageToken")
        if tok:
            try:
                k, o = base64.urlsafe_b64decode(tok.encode()).decode().split(":")
                off = int(o)
                if k != key or off < 0:
                    raise ValueError()
            except (ValueError, UnicodeDecodeError):
                raise GceError(400, "invalid", "Invalid value for field 'pageToken': '%s'." % tok)
        page = items[off:off + mx]
        nxt = None
        if off + mx < len(items):
            nxt = base64.urlsafe_b64encode(("%s:%d" % (key, off + mx)).encode()).decode()
        return page, nxt

    def _list_reply(self, kind, path, q, items):
        """A zonal list (kind compute#...List): items[] of one page, nextPageToken."""
        page, nxt = self._page(q, items, path)
        out = {"kind": kind, "id": "projects/%s/%s" % (self.project, path),
               "selfLink": "%sprojects/%s/%s" % (SELF, self.project, path)}
        if page:
            out["items"] = page  # Compute leaves items out of an empty list
        if nxt:
            out["nextPageToken"] = nxt
        return 200, out

    def _aggregated_reply(self, kind, field, q, items, zones_seen=()):
        """An aggregated list: items{"zones/Z": {field: [...]}} of one page, and a
        NO_RESULTS_ON_PAGE warning for each known zone without results on it."""
        path = "aggregated/" + field
        page, nxt = self._page(q, items, path)
        scopes = {}
        for j in page:
            scopes.setdefault("zones/" + j["zone"].rsplit("/", 1)[1], {field: []})[field].append(j)
        for z in zones_seen:
            scopes.setdefault("zones/" + z, {"warning": {
                "code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope 'zones/%s' on this page." % z,
                "data": [{"key": "scope", "value": "zones/" + z}]}})
        out = {"kind": kind, "id": "projects/%s/%s" % (self.project, path), "items": scopes,
               "selfLink": "%sprojects/%s/%s" % (SELF, self.project, path)}
        if nxt:
            out["nextPageToken"] = nxt
        return 200, out

    def _instances_list(self, p, q, body, headers):
        zone = self._zone(p)
        flt = self._filter(q)
        with self.lock:
            items = [j for j in (self.instance_json(i) for i in self._listed(zone)) if flt(j)]
        return self._list_reply("compute#instanceList", "zones/%s/instances" % zone, q, items)

    def _instances_aggregated(self, p, q, body, headers):
        self._project(p)
        flt = self._filter(q)
        with self.lock:
            insts = self._listed()
            items = [j for j in (self.instance_json(i) for i in insts) if flt(j)]
            zones_seen = sorted({i["zone"] for i in insts})
        return self._aggregated_reply("compute#instanceAggregatedList", "instances", q, items, zones_seen)

    def _instances_get(self, p, q, body, headers):
        """instances.get reads the instance itself, not a listing: describe_lag never hides
        it (a running instance answers 200 while the lists leave it out), and a deleted one
        is gone: 404 notFound, "The resource 'projects/P/zones/Z/instances/N' was not
        found" (https://cloud.google.com/compute/docs/reference/rest/v1/instances/get;
        instances.delete removes the instance:
        https://cloud.google.com/compute/docs/reference/rest/v1/instances/delete). The
        broker's confirm_gone counts on both."""
        zone = self._zone(p)
        with self.lock:
            inst = self._find(zone, p[5])
            if inst is None:
                raise GceError(404, "notFound", "The resource 'projects/%s/zones/%s/instances/%s' was not found"
                               % (self.project, zone, p[5]))
            return 200, self.instance_json(inst)

    def _request_id(self, q):
        rid = q.get("requestId")
        if rid is None:
            return None
        if not UUID_RE.match(rid) or rid.replace("-", "").strip("0") == "":
            raise GceError(400, "invalid", "Invalid value for field 'requestId': '%s'. Must be a valid UUID "
                           "other than all zeros." % rid)
        return rid.lower()

    def _replay(self, zone, rid, fingerprint):
        """The operation a requestId already made (the same call again), or None."""
        if rid is None:
            return None
        r = self.state["requests"].get("%s|%s" % (zone, rid))
        if r is None:
            return None
        op = self.state["operations"].get(r["op"])
        log("gce: requestId %s replayed -> %s%s" % (rid, r["op"], "" if r["fingerprint"] == fingerprint
                                                    else " (different body: ignored, as Compute does)"))
        return op

    def _props(self, zone, props):
        """Validates instanceProperties (bulkInsert) or an instance body (insert)."""
        if not isinstance(props, dict):
            raise GceError(400, "required", "Required field 'instanceProperties' not specified")
        mt = props.get("machineType")
        if not isinstance(mt, str) or not mt:
            raise GceError(400, "required", "Required field 'machineType' not specified")
        labels = props.get("labels") or {}
        if not isinstance(labels, dict) or len(labels) > 64:
            raise GceError(400, "invalid", "Invalid value for field 'labels'.")
        for k, v in labels.items():
            if not LABEL_KEY_RE.match(k) or not isinstance(v, str) or not LABEL_VALUE_RE.match(v):
                raise GceError(400, "invalid", "Invalid value for field 'resource.labels': '%s'. Label keys must "
                               "start with a lowercase letter; keys and values may contain only lowercase "
                               "letters, digits, '_' and '-', at most 63 characters." % k)
        # Network tags (Compute v1 Tags: items, each RFC 1035, at most 63 characters, at most
        # 64 per instance; VPC docs "Add network tags"): what firewall rules' sourceTags and
        # targetTags match (gce_firewall.py, netpolicy.py).
        tags_in = props.get("tags") if props.get("tags") is not None else {}
        ntags = (tags_in.get("items") or []) if isinstance(tags_in, dict) else None
        if ntags is None or not isinstance(ntags, list) or len(ntags) > 64 or not all(
                isinstance(x, str) and gce_firewall.NAME_RE.match(x) for x in ntags):
            raise GceError(400, "invalid", "Invalid value for field 'resource.tags.items': a network tag "
                           "is 1-63 lowercase letters, digits and '-', starting with a letter.")
        sched = props.get("scheduling") or {}
        model = sched.get("provisioningModel", "STANDARD")
        if model not in ("STANDARD", "SPOT"):
            raise GceError(400, "invalid", "Invalid value for field 'resource.scheduling.provisioningModel': '%s'."
                           % model)
        action = sched.get("instanceTerminationAction")
        if action not in (None, "STOP", "DELETE"):
            raise GceError(400, "invalid", "Invalid value for field "
                           "'resource.scheduling.instanceTerminationAction': '%s'." % action)
        spot = model == "SPOT" or bool(sched.get("preemptible"))
        accels = props.get("guestAccelerators") or []
        bare = mt.rsplit("/", 1)[-1]
        has_gpu = bool(accels) or bare.startswith(GPU_FAMILIES)
        if has_gpu and sched.get("onHostMaintenance", "MIGRATE") != "TERMINATE":
            raise GceError(400, "invalid", "Instances with guest accelerators do not support live migration.")
        if accels and bare.startswith(GPU_FAMILIES):
            raise GceError(400, "invalid", "Accelerator-optimized machine type %s comes with its GPUs; "
                           "guestAccelerators must be empty." % bare)
        for a in accels:
            if not isinstance(a, dict) or not isinstance(a.get("acceleratorType"), str):
                raise GceError(400, "invalid", "Invalid value for field 'guestAccelerators'.")
        nics = props.get("networkInterfaces") or [{"network": "global/networks/default"}]
        keys = []
        items = (props.get("metadata") or {}).get("items") or []
        for it in items:
            if not isinstance(it, dict) or not isinstance(it.get("key"), str):
                raise GceError(400, "invalid", "Invalid value for field 'metadata.items'.")
            val = it.get("value") or ""
            if it["key"] == "ssh-keys":
                for line in val.splitlines():
                    if ":" in line:
                        keys.append(line.split(":", 1)[1].strip())
            elif it["key"] == "user-data":
                keys.extend(ec2.keys_from_user_data(val.encode()))
        disks = props.get("disks") or []
        disk_gb = 10
        if disks and isinstance(disks[0], dict):
            disk_gb = int64((disks[0].get("initializeParams") or {}).get("diskSizeGb", 10), "diskSizeGb")
            if disk_gb < 10 or disk_gb > 65536:
                # A boot disk is never smaller than its image (public images: 10 GB) and a
                # persistent disk holds at most 64 TB (Compute docs, "Disk sizes and limits").
                raise GceError(400, "invalid", "Invalid value for field 'resource.disks[0]."
                               "initializeParams.diskSizeGb': '%d'. Requested disk size cannot be "
                               "smaller than the image size (10 GB) or larger than 65536 GB." % disk_gb)
        net = nics[0] if nics and isinstance(nics[0], dict) else {}
        return {
            "machine_type_raw": mt, "machine_type": bare, "labels": dict(labels), "spot": spot,
            "scheduling": {k: v for k, v in sched.items() if k != "preemptible"},
            "termination_action": action or ("STOP" if spot else None),
            "accelerators": [{"acceleratorType": a["acceleratorType"].rsplit("/", 1)[-1],
                              "acceleratorCount": int64(a.get("acceleratorCount", 1), "acceleratorCount")}
                             for a in accels],
            "authorized_keys": [k for k in keys if k], "metadata_items": items, "disk_gb": disk_gb,
            "network": (net.get("network") or "global/networks/default").split("/projects/%s/" % self.project)[-1],
            "subnetwork": net.get("subnetwork"), "access_configs": net.get("accessConfigs") or [],
            "resource_policies_raw": props.get("resourcePolicies") or [],
            "network_tags": sorted(set(ntags)),
        }

    def _new_op(self, zone, op_type, target_name, target_id=None, instance_ids=(), error=None, user=None):
        self.state["op_counter"] += 1
        name = "operation-%d-%s" % (now_ms(), secrets.token_hex(6))
        zl = "%sprojects/%s/zones/%s" % (SELF, self.project, zone)
        op = {"name": name, "id": str(7000000000000000000 + self.state["op_counter"]), "zone": zone,
              "operationType": op_type, "target": target_name, "targetId": target_id,
              "targetLink": "%s/instances/%s" % (zl, target_name) if target_name else None,
              "instance_ids": list(instance_ids), "insert_ms": now_ms(), "end_ms": None,
              "user": user or self.email, "error": error}
        self.state["operations"][name] = op
        return op

    def _op_done(self, op):
        if op.get("end_ms"):
            return True
        insts = [self.cloud.instances.get(i) for i in op["instance_ids"]]
        if op["error"] or op["operationType"] == "compute.instances.preempted":
            done = True
        elif op["operationType"] == "delete":
            done = all(i is None or i["state"] == "terminated" for i in insts)
        else:
            done = all(i is None or i["state"] in ("running", "terminated", "shutting-down") for i in insts)
        if done:
            op["end_ms"] = max(now_ms(), op["insert_ms"])
            self.cloud.save()
        return done

    def op_json(self, op):
        done = self._op_done(op)
        zl = "%sprojects/%s/zones/%s" % (SELF, self.project, op["zone"])
        fresh = now_ms() - op["insert_ms"] < 100
        out = {"kind": "compute#operation", "id": op["id"], "name": op["name"], "zone": zl,
               "operationType": op["operationType"], "status": "DONE" if done else ("PENDING" if fresh else "RUNNING"),
               "user": op["user"], "progress": 100 if done else 0, "insertTime": rfc3339(op["insert_ms"]),
               "startTime": rfc3339(op["insert_ms"]), "selfLink": "%s/operations/%s" % (zl, op["name"])}
        if op.get("targetLink"):
            out["targetLink"] = op["targetLink"]
        if op.get("targetId"):
            out["targetId"] = op["targetId"]
        if done:
            out["endTime"] = rfc3339(op["end_ms"])
        if op.get("error"):
            e = op["error"]
            out["error"] = {"errors": [{"code": e["code"], "message": e["message"]}]}
            out["httpErrorStatusCode"] = e["http"]
            out["httpErrorMessage"] = HTTP_TEXT.get(e["http"], "ERROR")
        if op["operationType"] == "bulkInsert":
            n = len(op["instance_ids"])
            target = op.get("target_count", n)
            out["instancesBulkInsertOperationMetadata"] = {"perLocationStatus": {"zones/" + op["zone"]: {
                "status": ("FAILED" if op.get("error") else "DONE") if done else "CREATING",
                "targetVmCount": target, "createdVmCount": n, "failedToCreateVmCount": 0 if n else target,
                "deletedVmCount": 0}}}
        if op["operationType"] == "compute.instances.preempted":
            out["statusMessage"] = "Instance was preempted."
        return out

    def _create(self, zone, props, names, rid, fp, op_type, target_count):
        """Creates len(names) instances (the caller checked capacity) and their Operation."""
        launched = now_ms()
        ids = []
        for name in names:
            gid = str(1000000000000000000 + secrets.randbits(59))
            iid = "gce-" + gid
            inst = {
                "id": iid, "provider": "gcp", "gce_id": gid, "name": name, "zone": zone,
                "region": region_of(zone), "instance_type": props["machine_type"], "state": "pending",
                "state_changed_at": launched, "launched_at": launched, "running_at": None,
                "terminated_at": None, "ip": self.cloud.new_ip(), "spot": props["spot"], "sir_id": None,
                "client_token": rid, "tags": props["labels"], "reservation_id": None,
                "authorized_keys": props["authorized_keys"], "state_reason": None, "reason": None,
                "fail_boot": False, "boot_delay_ms": self.cloud.boot_delay_ms, "node": None,
                "interrupt_at_ms": None, "gce_deleted": False,
            }
            inst.update({k: props[k] for k in ("machine_type", "labels", "scheduling", "termination_action",
                                               "accelerators", "metadata_items", "disk_gb", "network",
                                               "subnetwork", "access_configs", "network_tags")})
            inst["resource_policies"] = props.get("resource_policies") or []
            self.cloud.add_instance(inst)
            ids.append(iid)
        op = self._new_op(zone, op_type, names[0] if op_type == "insert" else None,
                          target_id=self.cloud.instances[ids[0]]["gce_id"] if op_type == "insert" else None,
                          instance_ids=ids)
        op["target_count"] = target_count
        if rid:
            self.state["requests"]["%s|%s" % (zone, rid)] = {"op": op["name"], "fingerprint": fp}
        for iid in ids:
            self.cloud._start_boot(self.cloud.instances[iid])
        self.cloud.save()
        log("gce: %s %s x%d in %s%s -> %s" % (op_type, props["machine_type"], len(names), zone,
                                              " spot" if props["spot"] else "", ",".join(names)))
        return op

    def _capacity_error(self, zone, props, count):
        """The Operation error a zone without room gives, or None."""
        mt = props["machine_type"]
        full = mt + "".join("+%sx%d" % (a["acceleratorType"], a["acceleratorCount"]) for a in props["accelerators"])
        f = self.cloud.take_fault("capacity", lambda f: f.get("instance_type") in (mt, full, props["machine_type_raw"])
                                  and f.get("zone") in (None, zone) and f.get("region") in (None, region_of(zone)),
                                  provider="gcp")
        short = f is not None
        if not short:
            part = self.cloud.take_fault("partial", lambda f: f.get("instance_type") in (mt, full), provider="gcp")
            short = part is not None
        if not short:
            lim = None
            for k in ("%s|%s" % (mt, zone), "%s|*" % mt):
                if k in self.cloud.capacity:
                    lim = self.cloud.capacity[k]
                    break
            if lim is not None:
                live = sum(1 for i in self.cloud.instances.values() if i.get("provider") == "gcp"
                           and i["zone"] == zone and i["instance_type"] == mt and i["state"] in ("pending", "running"))
                short = live + count > lim
        if not short:
            return None
        return {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "http": 503,
                "message": "The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill "
                           "the request.  Try a different zone, or try again later." % (self.project, zone)}

    def _quota_check(self, zone):
        if self.cloud.take_fault("quota", lambda f: f.get("region") in (None, region_of(zone)), provider="gcp"):
            raise GceError(403, "quotaExceeded", "Quota 'GPUS_PER_GPU_FAMILY' exceeded.  Limit: 0.0 in region %s."
                           % region_of(zone), domain="usageLimits")

    def _bulk_insert(self, p, q, body, headers):
        zone = self._zone(p)
        rid = self._request_id(q)
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            raise GceError(400, "parseError", "Parse Error")
        if not isinstance(req, dict):
            raise GceError(400, "parseError", "Parse Error")
        fp = hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()
        with self.lock:
            op = self._replay(zone, rid, fp)
            if op is not None:
                return 200, self.op_json(op)
            if req.get("sourceInstanceTemplate"):
                raise GceError(400, "invalid", "The mock cloud takes instanceProperties, not sourceInstanceTemplate.")
            count = int64(req.get("count"), "count") if req.get("count") is not None else None
            if count is None or count < 1 or count > 1000:
                raise GceError(400, "invalid", "Invalid value for field 'count': '%s'. Must be between 1 and 1000."
                               % req.get("count"))
            min_count = int64(req.get("minCount", count), "minCount")
            if min_count < 1 or min_count > count:
                raise GceError(400, "invalid", "Invalid value for field 'minCount': '%d'." % min_count)
            pattern = req.get("namePattern")
            if req.get("perInstanceProperties") or not isinstance(pattern, str) or "#" not in pattern:
                raise GceError(400, "invalid", "Invalid value for field 'namePattern': '%s'. It must contain "
                               "between 1 and 10 '#' characters." % pattern)
            props = self._props(zone, req.get("instanceProperties"))
            props["resource_policies"] = gce_policy.check_instance_policies(self, zone, props, count)
            self._quota_check(zone)
            if "/" in props["machine_type_raw"]:
                # bulkInsert takes a bare machine type; a URL fails inside the operation.
                op = self._new_op(zone, "bulkInsert", None, error={
                    "code": "INTERNAL_ERROR", "http": 500, "message": "Internal error. Please try again or "
                    "contact Google Support."})
            else:
                cap = self._capacity_error(zone, props, min_count)
                if cap is not None:
                    op = self._new_op(zone, "bulkInsert", None, error=cap)
                    op["target_count"] = count
                    log("gce: bulkInsert %s x%d in %s: no capacity" % (props["machine_type"], count, zone))
                else:
                    self._launch_limit(zone, count)
                    names = self._names(zone, pattern, count)
                    op = self._create(zone, props, names, rid, fp, "bulkInsert", count)
            if rid and "%s|%s" % (zone, rid) not in self.state["requests"]:
                self.state["requests"]["%s|%s" % (zone, rid)] = {"op": op["name"], "fingerprint": fp}
            self.cloud.save()
            return 200, self.op_json(op)

    def _launch_limit(self, zone, count):
        """The timing model's launch bucket (timing.py, "launch_bucket"), refused as Compute
        refuses a rate limit: 403 rateLimitExceeded, "Rate Limit Exceeded", domain
        usageLimits (Compute Engine API, "Rate quotas")."""
        t = self.cloud.timing
        if t is not None and not t.take_launch("gcp", self.project, region_of(zone), count):
            raise GceError(403, "rateLimitExceeded", "Rate Limit Exceeded", domain="usageLimits")

    def _names(self, zone, pattern, count):
        m = re.search(r"#+", pattern)
        width = len(m.group(0))
        rx = re.compile("^" + re.escape(pattern[:m.start()]) + r"([0-9]+)" + re.escape(pattern[m.end():]) + "$")
        top = 0
        for i in self._insts(zone):
            mm = rx.match(i["name"])
            if mm:
                top = max(top, int(mm.group(1)))
        names = [pattern[:m.start()] + str(top + k + 1).zfill(width) + pattern[m.end():] for k in range(count)]
        for n in names:
            if not NAME_RE.match(n):
                raise GceError(400, "invalid", "Invalid value for field 'namePattern': '%s'." % pattern)
        return names

    def _instances_insert(self, p, q, body, headers):
        zone = self._zone(p)
        rid = self._request_id(q)
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            raise GceError(400, "parseError", "Parse Error")
        fp = hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()
        with self.lock:
            op = self._replay(zone, rid, fp)
            if op is not None:
                return 200, self.op_json(op)
            name = req.get("name") if isinstance(req, dict) else None
            if not isinstance(name, str) or not NAME_RE.match(name):
                raise GceError(400, "invalid", "Invalid value for field 'resource.name': '%s'." % name)
            if self._find(zone, name):
                raise GceError(409, "alreadyExists", "The resource 'projects/%s/zones/%s/instances/%s' already exists"
                               % (self.project, zone, name))
            props = self._props(zone, req)
            props["resource_policies"] = gce_policy.check_instance_policies(self, zone, props, 1)
            self._quota_check(zone)
            cap = self._capacity_error(zone, props, 1)
            if cap is not None:
                op = self._new_op(zone, "insert", name, error=cap)
                if rid:
                    self.state["requests"]["%s|%s" % (zone, rid)] = {"op": op["name"], "fingerprint": fp}
                self.cloud.save()
                return 200, self.op_json(op)
            self._launch_limit(zone, 1)
            op = self._create(zone, props, [name], rid, fp, "insert", 1)
            return 200, self.op_json(op)

    def _instances_delete(self, p, q, body, headers):
        zone = self._zone(p)
        rid = self._request_id(q)
        with self.lock:
            op = self._replay(zone, rid, "delete|" + p[5])
            if op is not None:
                return 200, self.op_json(op)
            inst = self._find(zone, p[5])
            if inst is None:
                raise GceError(404, "notFound", "The resource 'projects/%s/zones/%s/instances/%s' was not found"
                               % (self.project, zone, p[5]))
            inst["gce_deleted"] = True
            inst["interrupt_at_ms"] = None
            self.cloud.begin_terminate(inst)
            op = self._new_op(zone, "delete", inst["name"], target_id=inst["gce_id"], instance_ids=[inst["id"]])
            if rid:
                self.state["requests"]["%s|%s" % (zone, rid)] = {"op": op["name"], "fingerprint": "delete|" + p[5]}
            self.cloud.save()
            log("gce: delete %s in %s" % (inst["name"], zone))
            return 200, self.op_json(op)

    # ------------------------------------------------------------------ operations
    def _op(self, p):
        zone = self._zone(p)
        op = self.state["operations"].get(p[5])
        if op is None or op["zone"] != zone:
            raise GceError(404, "notFound", "The resource 'projects/%s/zones/%s/operations/%s' was not found"
                           % (self.project, zone, p[5]))
        return op

    def _op_get(self, p, q, body, headers):
        with self.lock:
            return 200, self.op_json(self._op(p))

    def _op_wait(self, p, q, body, headers):
        deadline = time.monotonic() + 10  # Google waits up to ~2 min; callers must loop anyway
        while True:
            with self.lock:
                op = self._op(p)
                if self._op_done(op) or time.monotonic() > deadline:
                    return 200, self.op_json(op)
            time.sleep(0.05)

    def _ops_list(self, p, q, body, headers):
        zone = self._zone(p)
        flt = self._filter(q)
        with self.lock:
            items = [j for j in (self.op_json(o) for o in self.state["operations"].values() if o["zone"] == zone)
                     if flt(j)]
        return self._list_reply("compute#operationList", "zones/%s/operations" % zone, q, items)

    def _ops_aggregated(self, p, q, body, headers):
        self._project(p)
        flt = self._filter(q)
        with self.lock:
            items = [j for j in (self.op_json(o) for o in self.state["operations"].values()) if flt(j)]
        return self._aggregated_reply("compute#operationAggregatedList", "operations", q, items)

    # ------------------------------------------------------------------ control
    def find_instance(self, ident):
        """An instance by name (the newest of that name), GCE id or mock id."""
        with self.lock:
            for i in reversed(self._insts(with_deleted=True)):
                if ident in (i["name"], i["gce_id"], i["id"]):
                    return i
        return None

    def preempt(self, ident, notice_s):
        """Preemption as Compute does it ("Spot VMs", preemption process,
        https://cloud.google.com/compute/docs/instances/spot#preemption-process): a
        compute.instances.preempted operation now, the
        instance STOPPING for notice_s (ACPI soft off, 30 s on real GCE), then terminated and,
        with instanceTerminationAction DELETE, gone."""
        inst = self.find_instance(ident)
        if inst is None:
            raise KeyError("no GCE instance %s" % ident)
        with self.lock:
            if not inst["spot"]:
                raise ValueError("instance %s is not a Spot VM" % inst["name"])
            if inst["state"] not in ("pending", "running") or inst.get("interrupt_at_ms"):
                raise ValueError("instance %s is %s" % (inst["name"], self.status(inst)))
            self._new_op(inst["zone"], "compute.instances.preempted", inst["name"], target_id=inst["gce_id"],
                         user="system")
            inst["gce_deleted"] = inst.get("termination_action") == "DELETE"
        at = self.cloud.interrupt(inst["id"], notice_s)
        log("gce: instance %s preempted (gone in %ss)" % (inst["name"], notice_s))
        return at

    def listing(self, inst):
        """The /_mock/instances entry of a GCE instance."""
        return {"id": inst["name"], "provider": "gcp", "gce_id": inst["gce_id"], "state": inst["state"],
                "status": "DELETED" if self.deleted(inst) else self.status(inst),
                "instance_type": inst["instance_type"], "region": inst["region"], "zone": inst["zone"],
                "ip": inst["ip"], "ssh_port": self.cloud.cfg.ssh_port, "spot": bool(inst["spot"]),
                "tags": inst.get("labels", {}), "client_token": inst.get("client_token"),
                "launched_at": inst["launched_at"], "running_at": inst.get("running_at"),
                "terminated_at": inst.get("terminated_at"), "deleted": bool(inst.get("gce_deleted")),
                "preempted": bool(inst.get("interrupt_at_ms") or (inst.get("state_reason") or {}).get("code")
                                  == "Server.SpotInstanceTermination"),
                "resource_policies": [r.rsplit("/", 1)[-1] for r in inst.get("resource_policies") or []],
                "network_tags": list(inst.get("network_tags") or []),
                "node_dir": os.path.join(self.cloud.nodes_dir, inst["id"])}

    def control(self, method, path, req):
        """/_mock/gcp/...: -> (status, obj)."""
        if path == "/_mock/gcp/key" and method == "GET":
            return 200, {"key_file": self.key_file, "client_email": self.email, "project": self.project,
                         "token_uri": self.token_uri, "private_key_id": self.key_id}
        if path == "/_mock/gcp/tokens" and method == "DELETE":
            with self.lock:
                n = len(self.tokens)
                self.tokens.clear()
            log("gce: revoked %d access tokens" % n)
            return 200, {"ok": True, "revoked": n}
        if path == "/_mock/gcp/operations" and method == "GET":
            with self.lock:
                return 200, [self.op_json(o) for o in self.state["operations"].values()]
        fw = gce_firewall.control(self, method, path, req)
        if fw is not None:
            return fw
        return 404, {"error": "no such control endpoint: %s %s" % (method, path)}
