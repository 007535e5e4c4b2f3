"""HTTP front of the mock: EC2/STS Query API at / (SigV4-verified), Compute Engine at
/compute/v1/ with its OAuth2 token endpoint at /token (gce.py), and the JSON control API
at /_mock/ (unsigned)."""

import argparse
import decimal
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from . import ec2, gce, oci, prices, sigv4, timing
from .cloud import Cloud, log, now_ms
from .xmlout import ec2_error, ec2_response, sts_error, sts_response, t

MAX_BODY = 1 << 20
FAULT_KINDS = ("capacity", "quota", "throttle", "error5xx", "latency", "lose_response",
               "interrupt", "partial", "garbled_reply", "describe_lag", "preempt",
               "invalidate_token", "key_disabled", "describe_delay", "correlated_interrupt", "slow_boot")
PROVIDERS = ("aws", "gcp", "oci")


class LoseResponse(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mockcloud"
    sys_version = ""

    def log_message(self, fmt, *args):  # the mock logs its own one line per call
        pass

    # ------------------------------------------------------------------ plumbing
    def _send(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def _dispatch(self):
        cloud = self.server.cloud
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self._send(413, b"request body too large\n", "text/plain")
            return
        if self.path.startswith("/_mock/") or self.path == "/_mock":
            try:
                self._control(cloud, body)
            except Exception as e:
                log("control %s %s failed: %r" % (self.command, self.path, e))
                self._json(500, {"error": "internal: %r" % (e,)})
            return
        if urlsplit(self.path).path == "/spot-advisor-data.json" and self.command == "GET":
            self._spot_advisor(cloud)
            return
        if self.server.prices.handles(self.command, self.path, self.headers):
            status, ctype, out = self.server.prices.handle(self.command, self.path, self.headers, body)
            log("%s price-api %s -> %d" % (self.command, urlsplit(self.path).path, status))
            self._send(status, out, ctype)
            return
        if oci.handles(self.path):
            self._oci(cloud, body)
            return
        try:
            if gce.Gce.owns(self.path):
                self._gce(body)
            else:
                self._api(cloud, body)
        except LoseResponse:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # The Spot Instance Advisor's public data, as the advisor page's JSON shapes it
    # (spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json, anonymous GET; see
    # ../shared/docs/pricing-facts.md): "ranges" [{index, label, dots, max}], "instance_types",
    # "spot_advisor"[region]["Linux"|"Windows"][type] = {"s": savings %, "r": range index}.
    # The "max" values here are the labels' upper bounds (">20%": 100); the broker reads
    # whatever the file says, so nothing depends on them.
    SPOT_RANGES = [{"index": 0, "label": "<5%", "dots": 0, "max": 5},
                   {"index": 1, "label": "5-10%", "dots": 1, "max": 10},
                   {"index": 2, "label": "10-15%", "dots": 2, "max": 15},
                   {"index": 3, "label": "15-20%", "dots": 3, "max": 20},
                   {"index": 4, "label": ">20%", "dots": 4, "max": 100}]

    def _spot_advisor(self, cloud):
        with cloud.lock:
            if cloud.spot_advisor_down:
                return self._send(503, b"<Error><Code>SlowDown</Code></Error>", "application/xml")
            adv = {r: {"Linux": dict(types), "Windows": {}} for r, types in cloud.spot_advisor.items()}
            its = sorted({it for types in cloud.spot_advisor.values() for it in types})
        doc = {"global_rate": "<em>&lt;5%</em>", "ranges": self.SPOT_RANGES,
               "instance_types": {it: {"emr": False, "cores": 0, "ram_gb": 0} for it in its},
               "spot_advisor": adv}
        self._send(200, json.dumps(doc).encode(), "application/json")

    def _oci(self, cloud, body):
        status, hdrs, out, lost = oci.handle(cloud, self.command, self.path, self.headers, body)
        if lost:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if out:
            self.wfile.write(out)

    # ------------------------------------------------------------------ cloud API
    def _api(self, cloud, body):
        t0 = time.monotonic()
        rid = str(uuid.uuid4())
        split = urlsplit(self.path)
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        if self.command == "POST" and body:
            try:
                params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
            except UnicodeDecodeError:
                pass
        action = params.get("Action", "")
        scope = sigv4.parse_scope(self.headers)
        if scope:
            region, service = scope[2], scope[3]
        else:
            region, service = None, ("sts" if action == "GetCallerIdentity" else "ec2")
        if service not in ("ec2", "sts"):
            service = "ec2"
        status, code = 200, "OK"

        def fail(st, cd, msg):
            nonlocal status, code
            status, code = st, cd
            if service == "sts":
                return sts_error(cd, msg, rid, sender=st < 500)
            return ec2_error(cd, msg, rid)

        lost = False
        lat = cloud.latency_ms
        if lat:
            time.sleep(lat / 1000.0)
        # Which account the request is signed for: the platform's key, or one of the
        # extra accounts (MOCKCLOUD_AWS_EXTRA_ACCOUNTS), each with its own key and secret.
        akid = scope[0] if scope else None
        extra = cloud.cfg.extra_accounts.get(akid) if akid else None
        if extra:
            acct, key_id, secret, token = extra["account"], akid, extra["secret"], None
        else:
            acct, key_id, secret, token = (cloud.cfg.account_id, cloud.cfg.access_key_id,
                                           cloud.cfg.secret_access_key, cloud.cfg.session_token)
        ec2.CTX.account = acct
        try:
            sigv4.verify(self.command, self.path, self.headers, body, key_id, secret, token)
            auth_err = None
        except sigv4.AuthError as e:
            auth_err = e
        if auth_err is not None:
            k = auth_err.kind
            if service == "sts":
                if k == "unknown_key":
                    out = fail(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
                elif k in ("missing",):
                    out = fail(403, "MissingAuthenticationToken", auth_err.message)
                elif k == "bad_token":
                    out = fail(403, "InvalidClientTokenId", auth_err.message)
                elif k == "expired":
                    out = fail(403, "SignatureDoesNotMatch", "Signature expired: " + auth_err.message)
                elif k == "malformed":
                    out = fail(400, "IncompleteSignature", auth_err.message)
                else:
                    out = fail(403, "SignatureDoesNotMatch", auth_err.message)
            else:
                if k in ("unknown_key", "missing", "bad_token"):
                    out = fail(401, "AuthFailure", auth_err.message)
                elif k == "expired":
                    out = fail(400, "RequestExpired", auth_err.message)
                elif k == "malformed":
                    out = fail(400, "IncompleteSignature", auth_err.message)
                else:
                    out = fail(403, "SignatureDoesNotMatch", auth_err.message)
        elif cloud.take_fault("key_disabled", lambda f: f.get("account") in (None, acct) and
                              f.get("action") in (None, action)):
            # The account's owner disabled the access key (IAM UpdateAccessKey Inactive).
            if service == "sts":
                out = fail(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
            else:
                out = fail(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
        elif cloud.take_fault("throttle", lambda f: f.get("action") in (None, action) and f.get("region") in (None, region)):
            out = fail(503, "RequestLimitExceeded", "Request limit exceeded.")
        elif cloud.take_fault("error5xx", lambda f: f.get("action") in (None, action) and f.get("region") in (None, region)):
            out = fail(500, "InternalError", "An internal error has occurred")
        elif service == "sts":
            if action == "GetCallerIdentity":
                if extra:
                    arn = "arn:aws:iam::%s:user/%s" % (acct, extra["user"])
                    uid = "AIDA" + akid[-16:]
                elif cloud.cfg.session_token:
                    arn = "arn:aws:sts::%s:assumed-role/mockcloud/mock-session" % acct
                    uid = "AROAMOCKCLOUDROLE0001:mock-session"
                else:
                    arn = "arn:aws:iam::%s:user/mockcloud" % acct
                    uid = "AIDAMOCKCLOUDUSER0001"
                out = sts_response("GetCallerIdentity", rid, t("Arn", arn) + t("UserId", uid) + t("Account", acct))
            elif not action:
                out = fail(400, "MissingAction", "Missing Action")
            else:
                out = fail(400, "InvalidAction", "Could not find operation %s for version 2011-06-15" % action)
        else:
            fn = ec2.ACTIONS.get(action)
            if fn is None:
                if not action:
                    out = fail(400, "MissingAction", "The request must contain the parameter Action")
                else:
                    out = fail(400, "InvalidAction", "The action %s is not valid for this web service." % action)
            else:
                try:
                    out = ec2_response(action, rid, fn(cloud, params, region))
                except ec2.ApiError as e:
                    out = fail(e.status, e.code, e.message)
                except Exception as e:  # a bug in the mock: say so, keep serving
                    import traceback
                    traceback.print_exc()
                    out = fail(500, "InternalError", "mockcloud bug: %r" % (e,))
        if status == 200 and action and cloud.take_fault("garbled_reply", lambda f: f.get("action") in (None, action) and f.get("region") in (None, region)):
            # The action happened; its reply is cut off mid-element (a proxy that truncated it).
            out = out[: max(1, len(out) // 3)]
            code = "GARBLED"
        if status == 200 and action and cloud.take_fault("lose_response", lambda f: f.get("action") in (None, action) and f.get("region") in (None, region)):
            lost = True
            code = "LOST"
        cloud.count_call(action or "-", region, code, acct if auth_err is None else None)
        log("%s %s %s %s -> %d %s %dms%s" % (self.command, service, region or "-", action or "-", status, code,
                                             (time.monotonic() - t0) * 1000, " (response dropped)" if lost else ""))
        if lost:
            raise LoseResponse()
        self._send(status, out, "text/xml;charset=UTF-8")

    def _gce(self, body):
        status, obj, lost = self.server.gce.handle(self.command, self.path, self.headers, body)
        if lost:
            raise LoseResponse()
        raw = obj if isinstance(obj, bytes) else (json.dumps(obj, indent=1) + "\n").encode()
        self._send(status, raw, "application/json; charset=UTF-8")

    # ------------------------------------------------------------------ control API
    def _json(self, status, obj):
        self._send(status, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode(), "application/json")

    def _control(self, cloud, body):
        split = urlsplit(self.path)
        path = split.path.rstrip("/")
        q = dict(parse_qsl(split.query))
        m = self.command
        try:
            req = json.loads(body) if body.strip() else {}
        except ValueError:
            return self._json(400, {"error": "body is not JSON"})
        if m == "POST" and not isinstance(req, dict):
            return self._json(400, {"error": "body must be a JSON object"})
        if path == "/_mock/health" and m == "GET":
            with cloud.lock:
                n = len(cloud.instances)
            return self._json(200, {"ok": True, "instances": n, "uptime_ms": now_ms() - cloud.started_at,
                                    "state_dir": cloud.state_dir})
        if path == "/_mock/instances" and m == "GET":
            with cloud.lock:
                out = []
                for iid in cloud.order:
                    i = cloud.instances[iid]
                    if q.get("state") and i["state"] != q["state"]:
                        continue
                    if q.get("region") and i["region"] != q["region"]:
                        continue
                    if q.get("provider") and i.get("provider", "aws") != q["provider"]:
                        continue
                    # The timing model's draw (boot_ms, boot_family) for every provider.
                    model = {"boot_ms": i.get("boot_delay_ms"), "boot_family": i.get("boot_family")}
                    if i.get("provider") == "gcp":
                        out.append(dict(self.server.gce.listing(i), **model))
                        continue
                    sir = cloud.spot_requests.get(i.get("sir_id") or "")
                    out.append({"id": i["id"], "provider": i.get("provider", "aws"), "state": i["state"],
                                "instance_type": i["instance_type"], "region": i["region"],
                                "zone": i["zone"], "ip": i["ip"], "ssh_port": cloud.cfg.ssh_port,
                                "spot": bool(i["spot"]), "tags": i["tags"],
                                "account": i.get("account", cloud.cfg.account_id),
                                "client_token": i.get("client_token"), "launched_at": i["launched_at"],
                                "running_at": i.get("running_at"), "terminated_at": i.get("terminated_at"),
                                "terminate_requested_at": i.get("terminate_requested_at"),
                                "reservation_id": i.get("reservation_id"),
                                "placement_group": i.get("placement_group"),
                                "security_groups": i.get("security_groups") or [],
                                "interface_types": i.get("iface_types") or ["interface"],
                                "root_volume_gb": i.get("root_volume_gb") or i.get("disk_gb"),
                                "spot_request_id": i.get("sir_id"), **model,
                                "spot_status": sir["status_code"] if sir else None,
                                "state_reason": (i.get("state_reason") or {}).get("code"),
                                "node_dir": os.path.join(cloud.nodes_dir, i["id"])})
            return self._json(200, out)
        if path == "/_mock/placement_groups" and m == "GET":
            # EC2 placement groups (ec2_fabric.py), for the tests: deleted ones are gone
            with cloud.lock:
                pgs = sorted(cloud.extra.get("ec2_placement_groups", {}).values(), key=lambda g: g["name"])
                return self._json(200, [dict(g, members=sorted(
                    i["id"] for i in cloud.instances.values()
                    if i.get("placement_group") == g["name"] and i["region"] == g["region"]
                    and i["state"] != "terminated")) for g in pgs])
        if path == "/_mock/security_groups" and m == "GET":
            # EC2 security groups (ec2_fabric.py) with their live members
            with cloud.lock:
                gs = sorted(cloud.extra.get("ec2_security_groups", {}).values(), key=lambda g: g["id"])
                return self._json(200, [dict(g, members=sorted(
                    i["id"] for i in cloud.instances.values()
                    if g["id"] in (i.get("security_groups") or []) and i["state"] != "terminated"))
                    for g in gs])
        if path == "/_mock/net_policy" and m == "GET":
            # what the nodes enforce (netpolicy.py), as text
            from . import netpolicy
            with cloud.lock:
                body = netpolicy.render(cloud).encode()
            return self._send(200, body, "text/plain")
        if path == "/_mock/oci_compute_clusters" and m == "GET":
            # OCI compute clusters (oci_cluster.py), for the tests, with their live members
            with cloud.lock:
                cs = sorted(cloud.extra.get("oci_compute_clusters", {}).values(), key=lambda c: c["id"])
                return self._json(200, [dict(c, members=sorted(
                    i["id"] for i in cloud.instances.values()
                    if i.get("compute_cluster_id") == c["id"] and i["state"] != "terminated"))
                    for c in cs])
        if path == "/_mock/faults":
            if m == "GET":
                with cloud.lock:
                    return self._json(200, {"pending": cloud.faults, "injected": cloud.fault_counts,
                                            "latency_ms": cloud.latency_ms})
            if m == "DELETE":
                with cloud.lock:
                    cloud.faults = []
                    cloud.latency_ms = 0
                return self._json(200, {"ok": True})
            if m == "POST":
                return self._add_fault(cloud, req)
        if path == "/_mock/calls":
            if m == "GET":
                with cloud.lock:
                    return self._json(200, json.loads(json.dumps(cloud.calls)))
            if m == "DELETE":
                with cloud.lock:
                    cloud.calls = {"total": 0, "by_action": {}, "by_region": {}, "by_code": {},
                                   "by_account": {}}
                return self._json(200, {"ok": True})
        if path == "/_mock/spot_prices" and m == "POST":
            it, z, price = req.get("instance_type"), req.get("zone"), req.get("price")
            try:
                ok = isinstance(it, str) and isinstance(z, str) and decimal.Decimal(str(price)) >= 0
            except (ValueError, decimal.InvalidOperation):
                ok = False
            if not ok:
                return self._json(400, {"error": "need instance_type, zone and price (a decimal string)"})
            d = decimal.Decimal(str(price))
            if d.as_tuple().exponent > -6:
                d = d.quantize(decimal.Decimal("0.000001"))
            cloud.set_price(it, z, format(d, "f"))
            return self._json(200, {"ok": True})
        if path == "/_mock/spot_prices" and m == "GET":
            return self._json(200, {"overrides": cloud.price_history})
        if path == "/_mock/spot_advisor":
            if m == "GET":
                return self._json(200, cloud.spot_advisor)
            if m == "DELETE":
                with cloud.lock:
                    cloud.spot_advisor = {}
                    cloud.spot_advisor_down = False
                return self._json(200, {"ok": True})
            if m == "POST":
                if "down" in req:
                    cloud.spot_advisor_down = bool(req["down"])
                    return self._json(200, {"ok": True})
                rg, it, r, sv = req.get("region"), req.get("instance_type"), req.get("r"), req.get("s", 70)
                if not (isinstance(rg, str) and isinstance(it, str) and isinstance(r, int) and 0 <= r <= 4
                        and isinstance(sv, int)):
                    return self._json(400, {"error": "need region, instance_type, r (0..4), s (int)"})
                with cloud.lock:
                    cloud.spot_advisor.setdefault(rg, {})[it] = {"s": sv, "r": r}
                return self._json(200, {"ok": True})
        if path == "/_mock/boot_delay" and m == "POST":
            ms = req.get("ms")
            if not isinstance(ms, int) or ms < 0:
                return self._json(400, {"error": "need ms (integer >= 0)"})
            cloud.boot_delay_ms = ms
            return self._json(200, {"ok": True, "boot_delay_ms": ms})
        if path == "/_mock/capacity":
            if m == "GET":
                return self._json(200, cloud.capacity)
            if m == "POST":
                it, z, av = req.get("instance_type"), req.get("zone") or "*", req.get("available")
                if not isinstance(it, str) or not (av is None or (isinstance(av, int) and av >= 0)):
                    return self._json(400, {"error": "need instance_type and available (int >= 0 or null)"})
                with cloud.lock:
                    if av is None:
                        cloud.capacity.pop("%s|%s" % (it, z), None)
                    else:
                        cloud.capacity["%s|%s" % (it, z)] = av
                    cloud.save()
                return self._json(200, {"ok": True})
        if path.startswith("/_mock/gcp/"):
            return self._json(*self.server.gce.control(m, path, req))
        if path.startswith("/_mock/prices/"):
            return self._json(*self.server.prices.control(m, path, req))
        return self._json(404, {"error": "no such control endpoint: %s %s" % (m, path)})

    def _correlated(self, cloud, req):
        """{"kind":"correlated_interrupt","provider":P,"zone":Z,"instance_type":T,"count":K,
        "window_s":W?,"notice_s":S?}: K spot instances of (Z, T) interrupted within W seconds
        (the model's correlation window, scaled, by default; 180 without the model), each
        with the provider's notice (the model's, or S)."""
        prov = req.get("provider", "aws")
        zone, itype, k = req.get("zone"), req.get("instance_type"), req.get("count", 1)
        if prov not in PROVIDERS or not isinstance(zone, str) or not isinstance(itype, str) or \
                not isinstance(k, int) or k < 1:
            return self._json(400, {"error": "correlated_interrupt needs provider, zone, instance_type "
                                    "and count >= 1"})
        t = cloud.timing
        window = req.get("window_s")
        if window is not None and (not isinstance(window, (int, float)) or window < 0):
            return self._json(400, {"error": "window_s must be >= 0"})
        if window is None:
            window = t.p["correlation_window_s"] if t else 180.0
        notice = req.get("notice_s")
        if notice is None:
            notice = t.notice_s(prov) if t else {"aws": 120, "gcp": 30, "oci": 0}[prov]
        elif t is not None:
            notice = notice * t.scale
        if prov == "gcp":
            preempt = self.server.gce.preempt
        else:
            preempt = cloud.interrupt
        try:
            # window_s is model seconds: correlated_offsets scales it.
            plan = cloud.correlated_interrupt(zone, itype, k, window, notice, prov, preempt)
        except ValueError as e:
            return self._json(409, {"error": str(e)})
        with cloud.lock:
            cloud.fault_counts["correlated_interrupt"] = cloud.fault_counts.get("correlated_interrupt", 0) + 1
        return self._json(200, {"ok": True, "notice_s": notice,
                                "plan": [{"instance_id": i, "offset_s": o} for i, o in plan]})

    def _add_fault(self, cloud, req):
        kind = req.get("kind")
        if kind not in FAULT_KINDS:
            return self._json(400, {"error": "kind must be one of %s" % ", ".join(FAULT_KINDS)})
        count = req.get("count", 1)
        if not isinstance(count, int) or count < 1:
            return self._json(400, {"error": "count must be an integer >= 1"})
        if kind == "latency":
            ms = req.get("ms")
            if not isinstance(ms, (int, float)) or ms < 0:
                return self._json(400, {"error": "latency needs ms >= 0"})
            cloud.latency_ms = ms
            with cloud.lock:
                cloud.fault_counts["latency"] = cloud.fault_counts.get("latency", 0) + 1
            log("fault: latency %sms" % ms)
            return self._json(200, {"ok": True, "latency_ms": ms})
        if kind in ("interrupt", "preempt"):
            # instance_ids: several instances taken in one step, so no describe sees some
            # of them taken and the others not (the cloud reclaiming a rack at once).
            iids = req.get("instance_ids", [req.get("instance_id")])
            notice = req.get("notice_s")
            if notice is None and cloud.timing is not None and iids and isinstance(iids[0], str):
                # The timing model knows each cloud's notice (timing.py, "notice_s"), scaled.
                prov = "gcp" if (kind == "preempt" or self.server.gce.find_instance(iids[0]) is not None) \
                    else (cloud.instances.get(iids[0]) or {}).get("provider", "aws")
                notice = cloud.timing.notice_s(prov)
            elif notice is None:
                notice = 30 if kind == "preempt" else 120
            if (not isinstance(iids, list) or not iids or not all(isinstance(i, str) for i in iids)
                    or not isinstance(notice, (int, float)) or notice < 0):
                return self._json(400, {"error": "%s needs instance_id (or instance_ids) and "
                                        "notice_s >= 0" % kind})
            try:
                with cloud.lock:  # the GCE side shares this lock
                    for iid in iids:
                        if kind == "preempt" or self.server.gce.find_instance(iid) is not None:
                            at = self.server.gce.preempt(iid, notice)
                        else:
                            at = cloud.interrupt(iid, notice)
            except KeyError as e:
                return self._json(404, {"error": str(e)})
            except ValueError as e:
                return self._json(409, {"error": str(e)})
            return self._json(200, {"ok": True, "terminate_at": at})
        if kind == "correlated_interrupt":
            return self._correlated(cloud, req)
        f = {"kind": kind, "count": count}
        if kind in ("capacity", "partial"):
            if not isinstance(req.get("instance_type"), str):
                return self._json(400, {"error": "%s needs instance_type" % kind})
            f["instance_type"] = req["instance_type"]
            if kind == "capacity" and req.get("zone"):
                f["zone"] = req["zone"]
            if kind == "partial":
                k = req.get("fail_nodes", 1)
                if not isinstance(k, int) or k < 1:
                    return self._json(400, {"error": "fail_nodes must be an integer >= 1"})
                f["fail_nodes"] = k
        if kind == "key_disabled":
            if req.get("account") is not None:
                f["account"] = str(req["account"])
            if req.get("action") is not None:
                f["action"] = str(req["action"])
        if kind in ("error5xx", "lose_response", "throttle", "garbled_reply"):
            if req.get("action") is not None:
                f["action"] = str(req["action"])
            elif kind in ("lose_response", "garbled_reply"):
                return self._json(400, {"error": "%s needs action" % kind})
        if kind == "describe_lag":
            ms = req.get("ms", 10000)
            if not isinstance(ms, (int, float)) or ms < 0:
                return self._json(400, {"error": "describe_lag needs ms >= 0"})
            f["ms"] = ms
        if kind == "slow_boot":
            # The next count instances launched (of provider, in region) boot in ms instead
            # of their boot delay or the timing model's draw: a straggler on demand.
            ms = req.get("ms", 60000)
            if not isinstance(ms, (int, float)) or ms < 0:
                return self._json(400, {"error": "slow_boot needs ms >= 0"})
            f["ms"] = ms
        if kind == "describe_delay":
            ms = req.get("ms")
            if not isinstance(ms, (int, float)) or ms < 0:
                return self._json(400, {"error": "describe_delay needs ms >= 0"})
            f["ms"] = ms
            if req.get("account") is not None:
                f["account"] = str(req["account"])
            if req.get("provider") not in (None, "aws"):
                return self._json(400, {"error": "describe_delay is an EC2 fault (provider aws)"})
        if req.get("region"):
            f["region"] = req["region"]
        if req.get("provider") not in (None, "aws"):
            if req["provider"] not in PROVIDERS:
                return self._json(400, {"error": "provider must be one of %s" % ", ".join(PROVIDERS)})
            f["provider"] = req["provider"]
        with cloud.lock:
            cloud.faults.append(f)
        log("fault: %s" % json.dumps(f, sort_keys=True))
        return self._json(200, {"ok": True, "fault": f})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="mockcloud", description="Mock AWS EC2/STS on loopback "
                                 "(see docs/mock-cloud.md)")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--state-dir")
    ap.add_argument("--aws-access-key-id", default="AKIDMOCKCLOUD000001")
    ap.add_argument("--aws-secret-access-key", default=None,
                    help="prefer the environment variable MOCKCLOUD_AWS_SECRET_ACCESS_KEY")
    ap.add_argument("--aws-session-token", default=None,
                    help="require this X-Amz-Security-Token (or MOCKCLOUD_AWS_SESSION_TOKEN)")
    ap.add_argument("--account-id", default="123456789012")
    ap.add_argument("--boot-delay-ms", type=int, default=300)
    ap.add_argument("--shutdown-delay-ms", type=int, default=200)
    ap.add_argument("--terminated-ttl-s", type=int, default=3600)
    ap.add_argument("--node-ip-base", default="127.100")
    ap.add_argument("--ssh-port", type=int, default=2222)
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--no-nodes", action="store_true",
                    help="do not start sshd nodes (instances still go through their states)")
    ap.add_argument("--node-timeout-s", type=int, default=60)
    ap.add_argument("--hollow-nodes", metavar="DIR", default=None,
                    help="hollow mode: no sshd per instance; one hollow-node process on DIR serves "
                         "the node addresses, the cloud writes DIR/nodes/IP.keys at boot and removes "
                         "it at termination (docs/mock-cloud.md, \"Hollow nodes\")")
    ap.add_argument("--hollow-first", default=None,
                    help="hollow mode: the first node address (default NODE_IP_BASE.0.1)")
    ap.add_argument("--hollow-count", type=int, default=None,
                    help="hollow mode: how many addresses from --hollow-first (default: to the end "
                         "of the --node-ip-base range)")
    ap.add_argument("--save-interval-ms", type=int, default=None,
                    help="write the state file at most this often (default 0, at every change; "
                         "1000 in hollow mode)")
    ap.add_argument("--gcp-project", default="isc-mock-project")
    ap.add_argument("--gcp-token-ttl-s", type=int, default=3600,
                    help="lifetime of the access tokens the GCP token endpoint hands out")
    ap.add_argument("--time-model", default=os.environ.get("MOCKCLOUD_TIME_MODEL"),
                    help="the clouds' timing model (docs/mock-cloud.md, \"Timing model\"): 'on' for its "
                    "published defaults, or a JSON file of parameters; off by default")
    ap.add_argument("--time-scale", type=float, default=float(os.environ.get("MOCKCLOUD_TIME_SCALE") or 1.0),
                    help="multiplies every duration of the timing model (1: real time)")
    ap.add_argument("--time-seed", type=int,
                    default=int(os.environ["MOCKCLOUD_TIME_SEED"]) if os.environ.get("MOCKCLOUD_TIME_SEED") else None,
                    help="the timing model's seed (printed at start; random when not given)")
    ap.add_argument("--oci-region", default="us-ashburn-1",
                    help="OCI region of requests to /20160918/... (others use /oci/REGION/...)")
    a = ap.parse_args(argv)
    return a


class Config:
    pass


def ip_int(s):
    parts = s.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise ValueError(s)
    return (int(parts[0]) << 24) | (int(parts[1]) << 16) | (int(parts[2]) << 8) | int(parts[3])


def main(argv, script_dir):
    a = parse_args(argv)
    cfg = Config()
    cfg.access_key_id = a.aws_access_key_id
    cfg.secret_access_key = (a.aws_secret_access_key or os.environ.get("MOCKCLOUD_AWS_SECRET_ACCESS_KEY")
                             or "mock-secret-key-do-not-use-in-prod")
    cfg.session_token = a.aws_session_token or os.environ.get("MOCKCLOUD_AWS_SESSION_TOKEN") or None
    cfg.account_id = a.account_id
    # More AWS accounts (bring-your-own keys): "ACCOUNT:ACCESS_KEY_ID:SECRET[:USER],..." in
    # the environment, so no secret is on a command line.
    cfg.extra_accounts = {}
    for spec in filter(None, (os.environ.get("MOCKCLOUD_AWS_EXTRA_ACCOUNTS") or "").split(",")):
        parts = spec.split(":")
        if len(parts) not in (3, 4) or not re.match(r"^[0-9]{12}$", parts[0]):
            sys.exit("mockcloud: MOCKCLOUD_AWS_EXTRA_ACCOUNTS: want ACCOUNT:ACCESS_KEY_ID:SECRET[:USER]")
        cfg.extra_accounts[parts[1]] = {"account": parts[0], "secret": parts[2],
                                        "user": parts[3] if len(parts) == 4 else "byo"}
    cfg.boot_delay_ms = a.boot_delay_ms
    cfg.shutdown_delay_ms = a.shutdown_delay_ms
    cfg.terminated_ttl_s = a.terminated_ttl_s
    cfg.node_ip_base = a.node_ip_base
    cfg.ssh_port = a.ssh_port
    cfg.latency_ms = a.latency_ms
    cfg.nodes = not a.no_nodes
    cfg.node_timeout_s = a.node_timeout_s
    cfg.gcp_project = a.gcp_project
    cfg.gcp_token_ttl_s = a.gcp_token_ttl_s
    cfg.node_bin_dir = os.environ.get("MOCKCLOUD_NODE_BIN_DIR") or os.path.join(script_dir, "node")
    cfg.state_dir = os.path.abspath(a.state_dir or tempfile.mkdtemp(prefix="mockcloud."))
    os.makedirs(cfg.state_dir, exist_ok=True)
    if not cfg.node_ip_base.startswith("127."):
        sys.exit("mockcloud: --node-ip-base must be in 127.0.0.0/8")
    cfg.hollow_dir = os.path.abspath(a.hollow_nodes) if a.hollow_nodes else None
    cfg.save_interval_ms = a.save_interval_ms if a.save_interval_ms is not None else (
        1000 if cfg.hollow_dir else 0)
    if cfg.save_interval_ms < 0:
        sys.exit("mockcloud: --save-interval-ms must be >= 0")
    if (a.hollow_first or a.hollow_count is not None) and not cfg.hollow_dir:
        sys.exit("mockcloud: --hollow-first and --hollow-count need --hollow-nodes")
    if cfg.hollow_dir:
        # The range must lie in the node subnet (OCI's training subnet is derived from it).
        base = cfg.node_ip_base.strip(".").split(".")
        if len(base) not in (2, 3):
            sys.exit("mockcloud: --node-ip-base must have 2 or 3 octets")
        lo = ip_int(".".join(base + ["0"] * (4 - len(base))))
        hi = lo + (1 << (8 * (4 - len(base)))) - 1
        first = a.hollow_first or ".".join(base + ["0"] * (3 - len(base)) + ["1"])
        try:
            cfg.hollow_first = ip_int(first)
        except ValueError:
            sys.exit("mockcloud: --hollow-first must be an IPv4 address, got %r" % first)
        cfg.hollow_count = a.hollow_count if a.hollow_count is not None else hi - cfg.hollow_first
        if not (lo < cfg.hollow_first and cfg.hollow_count >= 1 and cfg.hollow_first + cfg.hollow_count - 1 < hi):
            sys.exit("mockcloud: the hollow range %s + %d must lie inside --node-ip-base %s (not its first "
                     "or last address)" % (first, cfg.hollow_count, cfg.node_ip_base))
        cfg.nodes = False  # no node-up / node-down

    cfg.timing = None
    if a.time_model:
        try:
            cfg.timing = timing.load(a.time_model, a.time_scale, a.time_seed)
        except (OSError, ValueError) as e:
            sys.exit("mockcloud: --time-model: %s" % e)
        log(cfg.timing.describe())
    cloud = Cloud(cfg)
    # OCI's one tenancy and API key; its training subnet holds the node addresses.
    cloud.oci_account = oci.Account(cfg.state_dir, a.oci_region, cfg.node_ip_base.strip(".") +
                                    (".0.0/16" if cfg.node_ip_base.count(".") == 1 else ".0/24"))
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.cloud = cloud
    port = srv.server_address[1]
    srv.gce = gce.Gce(cloud, cfg, port)
    srv.prices = prices.PriceApis(cloud)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    th.start()
    cloud.resume()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, a.port_file)
    log("listening on 127.0.0.1:%d, state dir %s, key id %s, nodes %s" % (
        port, cfg.state_dir, cfg.access_key_id,
        "hollow, %s" % cfg.hollow_dir if cfg.hollow_dir else cfg.node_bin_dir if cfg.nodes else "disabled"))
    while not stop.wait(1.0):
        pass
    log("stopping")
    srv.shutdown()
    cloud.shutdown()
    srv.server_close()
    log("stopped")
    return 0
