"""SigV4 verification of incoming requests, done with botocore (independent of the
broker's own signer): the request is rebuilt as a botocore AWSRequest holding exactly
the headers the client said it signed, and botocore computes the signature it expects."""

import calendar
import hashlib
import hmac
import re
import time

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

MAX_SKEW_S = 15 * 60

_AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=([^,\s]+)\s*,\s*SignedHeaders=([^,\s]+)\s*,\s*Signature=([0-9a-fA-F]+)\s*$")


class AuthError(Exception):
    """kind: missing | unknown_key | bad_signature | expired | bad_token | malformed"""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def parse_scope(headers):
    """Returns (access_key, date, region, service) from the Authorization header, or None."""
    auth = headers.get("Authorization")
    if not auth:
        return None
    m = _AUTH_RE.match(auth.strip())
    if not m:
        return None
    parts = m.group(1).split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        return None
    return parts[0], parts[1], parts[2], parts[3]


def verify(method, path_qs, headers, body, access_key, secret_key, session_token=None, now=None):
    """Raises AuthError unless the request carries a valid SigV4 signature by the given
    credentials. headers: an email.message.Message-like object (http.server headers).
    Returns (region, service)."""
    auth = headers.get("Authorization")
    if not auth:
        raise AuthError("missing", "Request is missing Authentication Token")
    m = _AUTH_RE.match(auth.strip())
    if not m:
        raise AuthError("malformed", "Authorization header is malformed")
    credential, signed_headers, signature = m.group(1), m.group(2), m.group(3).lower()
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise AuthError("malformed", "Credential should be scoped to a valid region and service")
    akid, scope_date, region, service = parts[0], parts[1], parts[2], parts[3]
    if not hmac.compare_digest(akid, access_key):
        raise AuthError("unknown_key", "AWS was not able to validate the provided access credentials")
    amz_date = headers.get("X-Amz-Date")
    if not amz_date or not re.match(r"^\d{8}T\d{6}Z$", amz_date):
        raise AuthError("malformed", "Request must contain a valid X-Amz-Date header")
    if amz_date[:8] != scope_date:
        raise AuthError("bad_signature", "Credential scope date does not match X-Amz-Date")
    ts = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    now = time.time() if now is None else now
    if abs(now - ts) > MAX_SKEW_S:
        raise AuthError("expired", "Request has expired: X-Amz-Date %s is more than 15 minutes "
                        "from the server time" % amz_date)
    names = signed_headers.split(";")
    if "host" not in names or "x-amz-date" not in names:
        raise AuthError("bad_signature", "SignedHeaders must include host and x-amz-date")
    if names != sorted(names):
        raise AuthError("bad_signature", "SignedHeaders are not sorted")
    tok = headers.get("X-Amz-Security-Token")
    if session_token is not None:
        if tok is None or not hmac.compare_digest(tok, session_token):
            raise AuthError("bad_token", "The security token included in the request is invalid")
    elif tok is not None:
        raise AuthError("bad_token", "The security token included in the request is invalid")
    sha_hdr = headers.get("X-Amz-Content-SHA256")
    if sha_hdr is not None and sha_hdr != hashlib.sha256(body).hexdigest():
        raise AuthError("bad_signature", "The provided x-amz-content-sha256 header does not "
                        "match the computed hash of the body")
    req_headers = {}
    for n in names:
        vals = headers.get_all(n) if hasattr(headers, "get_all") else [headers.get(n)]
        if not vals or vals[0] is None:
            raise AuthError("bad_signature", "Signed header %s is missing from the request" % n)
        req_headers[n] = ",".join(vals)
    host = req_headers["host"]
    url = "http://" + host + path_qs
    req = AWSRequest(method=method, url=url, headers=req_headers, data=body)
    req.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(access_key, secret_key, session_token), service, region)
    canonical = signer.canonical_request(req)
    sts = signer.string_to_sign(req, canonical)
    expected = signer.signature(sts, req)
    if not hmac.compare_digest(expected, signature):
        raise AuthError("bad_signature", "The request signature we calculated does not match the "
                        "signature you provided. Check your AWS Secret Access Key and signing "
                        "method. Consult the service documentation for details.")
    return region, service
