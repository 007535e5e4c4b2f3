"""The clouds' public price APIs, in their real shapes (docs/mock-cloud.md, "Price APIs").

GCP: the Cloud Billing Catalog API, GET /v1/services/6F81-5844-456A/skus.
  https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list
  - authenticated here with an API key, `key=` (or the X-goog-api-key header); a missing key
    is 403 PERMISSION_DENIED, a wrong one 400 INVALID_ARGUMENT "API key not valid. Please pass a
    valid API key." (Google's error envelope: {"error": {code, message, status}},
    https://cloud.google.com/apis/design/errors);
  - `pageSize` (default 5000; the reference gives no maximum, the mock caps a page at 5000 or at
    the cap a test sets), `pageToken` -> `nextPageToken` (opaque; "" on the last page; a token
    the server did not issue is 400 INVALID_ARGUMENT), `currencyCode` (USD only here);
  - another service id in the path (services/{id}/skus; the catalog's parent is a service
    name) is, once the key is valid, 404 NOT_FOUND in the same envelope: the design guide's
    code for "a specified resource is not found" (https://cloud.google.com/apis/design/errors,
    NOT_FOUND); Google's own client (googleapis cloudbilling v1, tests/gce-node/billing.mjs)
    surfaces it as a 404 error;
  - a Sku: name "services/6F81-5844-456A/skus/<skuId>", skuId, description, category
    {serviceDisplayName "Compute Engine", resourceFamily, resourceGroup, usageType},
    serviceRegions, pricingInfo[{effectiveTime, pricingExpression {usageUnit,
    usageUnitDescription, baseUnit, baseUnitConversionFactor, displayQuantity, tieredRates
    [{startUsageAmount, unitPrice: Money}]}, currencyConversionRate}], serviceProviderName,
    geoTaxonomy. Money (google.type.Money): units an int64 as a JSON *string* (proto3 JSON),
    nanos an int32, 0 <= nanos < 1e9 for a positive amount
    (https://cloud.google.com/billing/docs/reference/rest/Shared.Types/Money).
  - Which SKUs: a core and a RAM SKU per machine series ("N1 Predefined Instance Core running
    in Americas", "A2 Instance Ram running in EMEA"), a GPU SKU per model ("Nvidia Tesla T4
    GPU running in Americas"), the A4 per-GPU slice SKU ("A4 Nvidia B200 (1 gpu slice)"), each
    for usageType OnDemand and Preemptible ("Spot Preemptible ..." descriptions), per
    geography with the regions of shapes/gcp.csv; and SKUs a reader must skip: a committed-use
    one (usageType Commit1Yr), N1 custom cores, a Storage one (resourceFamily "Storage").
    Prices are illustrative list prices of the right order, not Google's table.

OCI: the public price list, GET /pls/apex/cetools/api/v1/products/?currencyCode=USD
  (anonymous; the URL Oracle's price list page reads).
  - {"items": [{partNumber, displayName, metricName, serviceCategory,
    currencyCodeLocalizations: [{currencyCode, prices: [{model "PAY_AS_YOU_GO", value}]}]}]};
    value is a JSON number of dollars;
  - GPU shapes are priced per GPU-hour (metricName "GPU Per Hour", serviceCategory
    "Compute - GPU"), one global price; the list also has products a reader must skip: the
    NVIDIA AI Enterprise licence billed per GPU-hour on top, an OCPU product;
  - by default one reply holds every item (as public fetchers read it); with a page cap set
    by a test it pages the ORDS way (limit/offset, "hasMore", "count"), which the API's own
    documentation does not describe;
  - part numbers: B98415 is H100's as seen in public data; the others are the mock's own
    placeholders (B9M...).

AWS: the Price List Query API's GetProducts, POST / with X-Amz-Target
  AWSPriceListService.GetProducts, Content-Type application/x-amz-json-1.1, SigV4 for service
  "pricing" (region us-east-1, the API's endpoint)
  https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html
  - request: ServiceCode (required), Filters [{Type, Field, Value}] (TERM_MATCH: the product's
    attribute equals Value; the newer EQUALS/CONTAINS/ANY_OF/NONE_OF are answered
    ValidationException here), FormatVersion "aws_v1", MaxResults 1..100 (default 100),
    NextToken (opaque; one the server did not issue is InvalidNextTokenException);
  - reply: {"FormatVersion": "aws_v1", "PriceList": [strings, each one product's JSON:
    product {productFamily, attributes {instanceType, regionCode, operatingSystem, tenancy,
    preInstalledSw, capacitystatus, ...}, sku}, serviceCode, terms {OnDemand {SKU.OFFER:
    {priceDimensions {SKU.OFFER.RATE: {unit "Hrs", pricePerUnit {USD "3.0600000000"}}}}}}],
    "NextToken"}; errors {"__type", "Message"} with HTTP 400;
  - products: every on-demand row of shapes/aws.csv (its price), plus a Windows and a
    capacity-reservation variant of each (which the Linux/Shared/NA/Used filters must skip).
"""

import base64
import csv
import decimal
import json
import os
import re
import threading
from urllib.parse import parse_qsl, urlsplit

D = decimal.Decimal
GCP_SERVICE = "6F81-5844-456A"
GCP_PATH = "/v1/services/%s/skus" % GCP_SERVICE
GCP_ANY_PATH = re.compile(r"^/v1/services/[^/]+/skus$")  # any service id: 404 unless ours
GCP_KEY = os.environ.get("MOCKCLOUD_GCP_BILLING_KEY", "mock-billing-api-key")
REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# Base (Americas) USD per unit: (description without geography, resourceGroup, unit, on-demand, spot).
GCP_PARTS = [
    ("N1 Predefined Instance Core", "N1Standard", "h", "0.031611", "0.006655"),
    ("N1 Predefined Instance Ram", "N1Standard", "GiBy.h", "0.004237", "0.000892"),
    ("A2 Instance Core", "CPU", "h", "0.031611", "0.006655"),
    ("A2 Instance Ram", "RAM", "GiBy.h", "0.004237", "0.000892"),
    ("A3 Instance Core", "CPU", "h", "0.029563", "0.008869"),
    ("A3 Instance Ram", "RAM", "GiBy.h", "0.003963", "0.001189"),
    ("A3 Mega Instance Core", "CPU", "h", "0.029563", "0.008869"),
    ("A3 Mega Instance Ram", "RAM", "GiBy.h", "0.003963", "0.001189"),
    ("A3 Ultra Instance Core", "CPU", "h", "0.031200", "0.009360"),
    ("A3 Ultra Instance Ram", "RAM", "GiBy.h", "0.004180", "0.001254"),
    ("G2 Instance Core", "CPU", "h", "0.024988", "0.009995"),
    ("G2 Instance Ram", "RAM", "GiBy.h", "0.002927", "0.001171"),
    ("Nvidia Tesla T4 GPU", "GPU", "h", "0.35", "0.14"),
    ("Nvidia Tesla V100 GPU", "GPU", "h", "2.48", "0.992"),
    ("Nvidia Tesla P100 GPU", "GPU", "h", "1.46", "0.584"),
    ("Nvidia Tesla P4 GPU", "GPU", "h", "0.60", "0.24"),
    ("Nvidia Tesla A100 GPU", "GPU", "h", "2.933908", "1.173563"),
    ("Nvidia Tesla A100 80GB GPU", "GPU", "h", "3.92808", "1.571232"),
    ("Nvidia H100 80GB GPU", "GPU", "h", "9.79655", "3.91862"),
    ("Nvidia H100 80GB Mega GPU", "GPU", "h", "10.35", "4.14"),
    ("Nvidia H200 141GB GPU", "GPU", "h", "10.86", "4.344"),
    ("Nvidia L4 GPU", "GPU", "h", "0.560631", "0.224252"),
    ("A4 Nvidia B200 (1 gpu slice)", "GPU", "h", "12.35", "4.94"),
]
# The geographies of the SKU descriptions, by region prefix, and their multiplier.
GEOS = [("Americas", ("us-", "northamerica-", "southamerica-"), D("1")),
        ("EMEA", ("europe-", "me-", "africa-"), D("1.1")),
        ("APAC", ("asia-", "australia-"), D("1.2"))]
UNIT_TEXT = {"h": "hour", "GiBy.h": "gibibyte hour"}
OCI_PATH = "/pls/apex/cetools/api/v1/products/"
# (partNumber, displayName, metricName, serviceCategory, USD per unit)
OCI_PRODUCTS = [
    ("B9M001", "Compute - GPU - A10", "GPU Per Hour", "Compute - GPU", "2.00"),
    ("B9M002", "Compute - GPU - A100-v2", "GPU Per Hour", "Compute - GPU", "4.00"),
    ("B9M003", "Compute - GPU - B200", "GPU Per Hour", "Compute - GPU", "14.00"),
    ("B9M004", "Compute - GPU - B300", "GPU Per Hour", "Compute - GPU", "15.00"),
    ("B98415", "Compute - GPU - H100", "GPU Per Hour", "Compute - GPU", "10.00"),
    ("B9M006", "Compute - GPU - H200", "GPU Per Hour", "Compute - GPU", "10.00"),
    ("B9M007", "Compute - GPU - L40S", "GPU Per Hour", "Compute - GPU", "3.50"),
    ("B9M008", "Compute - GPU - MI300X", "GPU Per Hour", "Compute - GPU", "6.00"),
    ("B9M009", "Compute - GPU - MI355X", "GPU Per Hour", "Compute - GPU", "8.60"),
    ("B9M010", "Compute - GPU - RTXPRO", "GPU Per Hour", "Compute - GPU", "4.50"),
    ("B9M011", "Compute - GPU Standard - X7 - P100", "GPU Per Hour", "Compute - GPU", "1.275"),
    ("B9M012", "Compute - GPU Standard - X7 - V100", "GPU Per Hour", "Compute - GPU", "2.95"),
    ("B9M013", "Compute - GPU - A100", "GPU Per Hour", "Compute - GPU", "3.05"),
    ("B9M014", "OCI - NVIDIA AI Enterprise - H100", "GPU Per Hour", "Compute - GPU - Other", "2.50"),
    ("B9M015", "Compute - Standard - E5 - OCPU", "OCPU Per Hour", "Compute - Virtual Machine", "0.03"),
]


def _money(price):
    """google.type.Money of a non-negative decimal: units (string), nanos (int)."""
    p = D(price).quantize(D("0.000000001"), rounding=decimal.ROUND_HALF_UP)
    units = int(p)
    return {"currencyCode": "USD", "units": str(units), "nanos": int((p - units) * 1000000000)}


def _gcp_regions():
    try:
        with open(os.path.join(REPO, "shapes", "gcp.csv"), newline="") as f:
            return sorted({r["region"] for r in csv.DictReader(f)})
    except OSError:
        return ["us-central1", "us-east1", "europe-west4", "asia-east1"]


def _aws_rows():
    try:
        with open(os.path.join(REPO, "shapes", "aws.csv"), newline="") as f:
            return [(r["instance_type"], r["region"], r["price"]) for r in csv.DictReader(f)
                    if r["market"] == "ondemand"]
    except OSError:
        return [("g5.xlarge", "us-east-1", "1.006")]


class PriceApis:
    def __init__(self, cloud=None):
        self.cloud = cloud
        self.aws_prices = {}    # (instanceType, regionCode) -> decimal string
        self.aws_page_cap = 100
        self.aws_rows = _aws_rows()
        self.lock = threading.Lock()
        self.down = {}          # api -> True: answers 503 (the API is unavailable)
        self.garbled = {}       # api -> True: answers 200 with a body cut short
        self.calls = {}         # api -> count
        self.gcp_page_cap = 5000
        self.gcp_prices = {}    # (description, usage) -> decimal string, overrides GCP_PARTS
        self.oci_page_cap = 0   # 0: one reply with every item
        self.oci_prices = {}    # partNumber -> decimal string, overrides OCI_PRODUCTS
        self.regions = _gcp_regions()

    # ---------------------------------------------------------------- routing
    @staticmethod
    def handles(method, path, headers):
        p = urlsplit(path).path
        if method == "POST" and (headers.get("X-Amz-Target") or "").startswith("AWSPriceListService."):
            return True
        return method == "GET" and (p == OCI_PATH or GCP_ANY_PATH.match(p) is not None)

    def handle(self, method, path, headers, body):
        """-> (status, content type, bytes)."""
        split = urlsplit(path)
        q = dict(parse_qsl(split.query, keep_blank_values=True))
        if method == "POST":
            return self._aws(path, headers, body)
        with self.lock:
            api = "oci-price-list" if split.path == OCI_PATH else "gcp-billing"
            self.calls[api] = self.calls.get(api, 0) + 1
            if api == "gcp-billing":
                return self._gcp(q, headers, split.path)
            return self._oci(q)

    # ---------------------------------------------------------------- GCP
    def _gcp_error(self, code, status, message):
        return code, "application/json; charset=UTF-8", (json.dumps(
            {"error": {"code": code, "message": message, "status": status}}) + "\n").encode()

    def _gcp_skus(self):
        skus, n = [], 0
        for geo, prefixes, mult in GEOS:
            regions = [r for r in self.regions if r.startswith(prefixes)]
            if not regions:
                continue
            for desc, group, unit, od, spot in GCP_PARTS:
                for usage, base in (("OnDemand", od), ("Preemptible", spot)):
                    n += 1
                    price = D(self.gcp_prices.get((desc, usage), base)) * mult
                    full = ("Spot Preemptible " if usage == "Preemptible" else "") + \
                        "%s running in %s" % (desc, geo)
                    skus.append(self._sku(n, full, group, usage, unit, regions, price))
            # What a reader must skip: a commitment, a custom core, another family.
            n += 1
            skus.append(self._sku(n, "Commitment v1: A2 Cpu in %s for 1 Year" % geo, "CPU",
                                  "Commit1Yr", "h", regions, D("0.019915")))
            n += 1
            skus.append(self._sku(n, "Custom Instance Core running in %s" % geo, "N1Standard",
                                  "OnDemand", "h", regions, D("0.033174")))
            n += 1
            sk = self._sku(n, "Storage PD Capacity in %s" % geo, "PDStandard", "OnDemand",
                           "GiBy.mo", regions, D("0.04"))
            sk["category"]["resourceFamily"] = "Storage"
            skus.append(sk)
        return skus

    @staticmethod
    def _sku(n, desc, group, usage, unit, regions, price):
        sku_id = "%04X-%04X-%04X" % (0x1000 + n, 0xA000 + n, 0x5000 + n)
        return {
            "name": "services/%s/skus/%s" % (GCP_SERVICE, sku_id),
            "skuId": sku_id,
            "description": desc,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                         "resourceGroup": group, "usageType": usage},
            "serviceRegions": list(regions),
            "pricingInfo": [{
                "summary": "",
                "pricingExpression": {
                    "usageUnit": unit,
                    "displayQuantity": 1,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": _money(price)}],
                    "usageUnitDescription": UNIT_TEXT.get(unit, unit),
                    "baseUnit": "s" if unit == "h" else unit,
                    "baseUnitDescription": "second" if unit == "h" else unit,
                    "baseUnitConversionFactor": 3600 if unit == "h" else 1,
                },
                "currencyConversionRate": 1,
                "effectiveTime": "2026-11-01T00:00:00Z",
            }],
            "serviceProviderName": "Google",
            "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": list(regions)},
        }

    def _gcp(self, q, headers, path=GCP_PATH):
        key = q.get("key") or headers.get("X-goog-api-key")
        if not key:
            return self._gcp_error(403, "PERMISSION_DENIED",
                                   "The request is missing a valid API key.")
        if key != GCP_KEY:
            return self._gcp_error(400, "INVALID_ARGUMENT",
                                   "API key not valid. Please pass a valid API key.")
        if self.down.get("gcp-billing"):
            return self._gcp_error(503, "UNAVAILABLE", "The service is currently unavailable.")
        if path != GCP_PATH:
            return self._gcp_error(404, "NOT_FOUND", "Service not found: %s." % path.split("/")[3])
        if q.get("currencyCode", "USD") != "USD":
            return self._gcp_error(400, "INVALID_ARGUMENT", "Unsupported currency code.")
        try:
            size = int(q.get("pageSize") or 5000)
            if size < 0:
                raise ValueError
        except ValueError:
            return self._gcp_error(400, "INVALID_ARGUMENT", "Invalid page size.")
        size = min(size or 5000, 5000, self.gcp_page_cap)
        start = 0
        if q.get("pageToken"):
            try:
                start = int(base64.urlsafe_b64decode(q["pageToken"].encode()).decode()[len("o:"):])
            except (ValueError, UnicodeDecodeError):
                return self._gcp_error(400, "INVALID_ARGUMENT", "Invalid page token.")
        skus = self._gcp_skus()
        page = skus[start:start + size]
        nxt = ""
        if start + size < len(skus):
            nxt = base64.urlsafe_b64encode(("o:%d" % (start + size)).encode()).decode()
        out = (json.dumps({"skus": page, "nextPageToken": nxt}, indent=1) + "\n").encode()
        if self.garbled.get("gcp-billing"):
            out = out[: len(out) // 3]
        return 200, "application/json; charset=UTF-8", out

    # ---------------------------------------------------------------- OCI
    def _oci(self, q):
        if self.down.get("oci-price-list"):
            return 503, "text/html", b"<html><body>Service Unavailable</body></html>\n"
        cur = q.get("currencyCode", "USD")
        items = []
        for part, name, metric, cat, price in OCI_PRODUCTS:
            if q.get("partNumber") and q["partNumber"] != part:
                continue
            value = float(D(self.oci_prices.get(part, price)))
            items.append({"partNumber": part, "displayName": name, "metricName": metric,
                          "serviceCategory": cat,
                          "currencyCodeLocalizations": [{"currencyCode": cur, "prices": [
                              {"model": "PAY_AS_YOU_GO", "value": value}]}]})
        body = {"items": items}
        if self.oci_page_cap:
            try:
                off = int(q.get("offset") or 0)
            except ValueError:
                return 400, "application/json", b'{"code":"BadRequest","message":"offset"}\n'
            page = items[off:off + self.oci_page_cap]
            body = {"items": page, "hasMore": off + len(page) < len(items),
                    "limit": self.oci_page_cap, "offset": off, "count": len(page)}
        out = (json.dumps(body, indent=1) + "\n").encode()
        if self.garbled.get("oci-price-list"):
            out = out[: len(out) // 3]
        return 200, "application/json", out

    # ---------------------------------------------------------------- AWS
    def _aws_error(self, status, typ, msg):
        return status, "application/x-amz-json-1.1", (json.dumps(
            {"__type": "com.amazonaws.awspricing#" + typ, "Message": msg}) + "\n").encode()

    def _aws_product(self, it, region, os_name, cap, price):
        sku = "MOCK%08X" % (abs(hash((it, region, os_name, cap))) & 0xFFFFFFFF)
        offer, rate = "JRTCKXETXF", "6YS6EN2CT7"
        return {
            "product": {"productFamily": "Compute Instance", "sku": sku, "attributes": {
                "servicecode": "AmazonEC2", "instanceType": it, "regionCode": region,
                "operatingSystem": os_name, "tenancy": "Shared", "preInstalledSw": "NA",
                "capacitystatus": cap, "licenseModel": "No License required",
                "marketoption": "OnDemand"}},
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {"%s.%s" % (sku, offer): {
                "offerTermCode": offer, "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z",
                "priceDimensions": {"%s.%s.%s" % (sku, offer, rate): {
                    "unit": "Hrs", "endRange": "Inf", "beginRange": "0",
                    "rateCode": "%s.%s.%s" % (sku, offer, rate), "appliesTo": [],
                    "description": "$%s per On Demand %s %s Instance Hour" % (price, os_name, it),
                    "pricePerUnit": {"USD": format(D(price).quantize(D("0.0000000001")), "f")}}},
                "termAttributes": {}}}},
            "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
        }

    def _aws(self, path, headers, body):
        from . import sigv4
        with self.lock:
            self.calls["aws-pricing"] = self.calls.get("aws-pricing", 0) + 1
            cfg = self.cloud.cfg if self.cloud else None
            try:
                if cfg is None:
                    raise sigv4.AuthError("missing", "no credentials")
                _, service = sigv4.verify("POST", path, headers, body, cfg.access_key_id,
                                          cfg.secret_access_key, cfg.session_token)
                if service != "pricing":
                    raise sigv4.AuthError("bad_signature", "Credential should be scoped to correct service: 'pricing'.")
            except sigv4.AuthError as e:
                return self._aws_error(400 if e.kind == "malformed" else 403,
                                       "AccessDeniedException" if e.kind != "bad_signature" else "InvalidSignatureException",
                                       str(e))
            if headers.get("X-Amz-Target") != "AWSPriceListService.GetProducts":
                return self._aws_error(400, "UnknownOperationException", "Unknown operation")
            if self.down.get("aws-pricing"):
                return self._aws_error(503, "ServiceUnavailableException", "Service is unavailable")
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                return self._aws_error(400, "SerializationException", "body is not JSON")
            if req.get("ServiceCode") != "AmazonEC2":
                return self._aws_error(400, "InvalidParameterException", "Input for ServiceCode is invalid")
            mr = req.get("MaxResults", 100)
            if not isinstance(mr, int) or not 1 <= mr <= 100:
                return self._aws_error(400, "InvalidParameterException", "MaxResults must be 1..100")
            want = {}
            for f in req.get("Filters") or []:
                if f.get("Type") != "TERM_MATCH":
                    return self._aws_error(400, "ValidationException", "the mock answers TERM_MATCH only")
                want[f.get("Field")] = f.get("Value")
            products = []
            for it, region, price in self.aws_rows:
                if want.get("instanceType") not in (None, it) or want.get("regionCode") not in (None, region):
                    continue
                price = self.aws_prices.get((it, region), price)
                for os_name, cap in (("Linux", "Used"), ("Windows", "Used"), ("Linux", "UnusedCapacityReservation")):
                    p = self._aws_product(it, region, os_name, cap, price)
                    attrs = p["product"]["attributes"]
                    if all(attrs.get(k) == v for k, v in want.items()):
                        products.append(p)
            start = 0
            if req.get("NextToken"):
                try:
                    start = int(base64.urlsafe_b64decode(req["NextToken"].encode()).decode()[2:])
                except (ValueError, UnicodeDecodeError):
                    return self._aws_error(400, "InvalidNextTokenException", "The next token is invalid")
            size = min(mr, self.aws_page_cap)
            page = products[start:start + size]
            out = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in page]}
            if start + size < len(products):
                out["NextToken"] = base64.urlsafe_b64encode(("o:%d" % (start + size)).encode()).decode()
            raw = (json.dumps(out) + "\n").encode()
            if self.garbled.get("aws-pricing"):
                raw = raw[: len(raw) // 3]
            return 200, "application/x-amz-json-1.1", raw

    # ---------------------------------------------------------------- control
    def control(self, method, path, req):
        """/_mock/prices/...: -> (status, object)."""
        with self.lock:
            if path == "/_mock/prices/api" and method == "POST":
                api = req.get("api")
                if api not in ("gcp-billing", "oci-price-list", "aws-pricing"):
                    return 400, {"error": "api must be gcp-billing, oci-price-list or aws-pricing"}
                if "down" in req:
                    self.down[api] = bool(req["down"])
                if "garbled" in req:
                    self.garbled[api] = bool(req["garbled"])
                if "page_cap" in req:
                    if not isinstance(req["page_cap"], int) or req["page_cap"] < 1:
                        return 400, {"error": "page_cap must be an integer >= 1"}
                    if api == "gcp-billing":
                        self.gcp_page_cap = req["page_cap"]
                    elif api == "oci-price-list":
                        self.oci_page_cap = req["page_cap"]
                    else:
                        self.aws_page_cap = req["page_cap"]
                return 200, {"ok": True}
            if path == "/_mock/prices/gcp" and method == "POST":
                desc, usage, price = req.get("description"), req.get("usage", "OnDemand"), req.get("price")
                if desc not in [p[0] for p in GCP_PARTS] or usage not in ("OnDemand", "Preemptible"):
                    return 400, {"error": "need description (one of the mock's parts, without "
                                          "'running in') and usage OnDemand|Preemptible"}
                try:
                    if D(str(price)) < 0:
                        raise ValueError
                except (ValueError, decimal.InvalidOperation):
                    return 400, {"error": "price must be a non-negative decimal string"}
                self.gcp_prices[(desc, usage)] = str(price)
                return 200, {"ok": True}
            if path == "/_mock/prices/oci" and method == "POST":
                part, price = req.get("part_number"), req.get("price")
                if part not in [p[0] for p in OCI_PRODUCTS]:
                    return 400, {"error": "need part_number (one of the mock's products)"}
                try:
                    if D(str(price)) < 0:
                        raise ValueError
                except (ValueError, decimal.InvalidOperation):
                    return 400, {"error": "price must be a non-negative decimal string"}
                self.oci_prices[part] = str(price)
                return 200, {"ok": True}
            if path == "/_mock/prices/aws" and method == "POST":
                it, region, price = req.get("instance_type"), req.get("region"), req.get("price")
                if not isinstance(it, str) or not isinstance(region, str):
                    return 400, {"error": "need instance_type, region and price"}
                try:
                    if D(str(price)) < 0:
                        raise ValueError
                except (ValueError, decimal.InvalidOperation):
                    return 400, {"error": "price must be a non-negative decimal string"}
                self.aws_prices[(it, region)] = str(price)
                return 200, {"ok": True}
            if path == "/_mock/prices/calls" and method == "GET":
                return 200, dict(self.calls)
        return 404, {"error": "no such control endpoint: %s %s" % (method, path)}
