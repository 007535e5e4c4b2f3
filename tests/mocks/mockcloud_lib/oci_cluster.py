"""OCI compute clusters (Core API 20160918): an empty RDMA group in one availability
domain that bare-metal RDMA shapes join with LaunchInstance computeClusterId. oci.py
routes the calls here and asks check_launch() about every LaunchInstance.

References (cited beside each rule):
  [CC]   OCI docs, "Compute Clusters"
         https://docs.oracle.com/iaas/Content/Compute/Tasks/compute-clusters.htm
         ("A compute cluster is a group of high performance computing (HPC), GPU, or
         optimized instances that are connected with a high-bandwidth, ultra low-latency
         network"; supported shapes; instances are created in the cluster's availability
         domain; delete the instances before the cluster)
  [API]  Core API 20160918: CreateComputeCluster, GetComputeCluster, ListComputeClusters
         (ComputeClusterCollection {items}), DeleteComputeCluster (204)
         https://docs.oracle.com/iaas/api/#/en/iaas/20160918/ComputeCluster/
  [TF]   Terraform oci_core_compute_cluster: availability_domain and compartment_id are
         required; "The availability domain to place the compute cluster in"
         https://docs.cloud.oracle.com/iaas/tools/terraform-provider-oci/latest/docs/r/core_compute_cluster.html
  [ERR]  OCI API errors: 400 InvalidParameter, 404 NotAuthorizedOrNotFound,
         409 Conflict (https://docs.oracle.com/iaas/Content/API/References/apierrors.htm)
"""

import hashlib
import json
import secrets

from .cloud import log, now_ms

# The shapes that can join a compute cluster [CC] "Supported shapes" (RDMA cluster network
# shapes: bare-metal GPU and HPC/optimized). Any other shape is refused.
RDMA_SHAPES = frozenset([
    "BM.GPU.A100-v2.8", "BM.GPU4.8", "BM.GPU.B4.8", "BM.GPU.H100.8", "BM.GPU.H200.8",
    "BM.GPU.B200.8", "BM.GPU.GB200.4", "BM.GPU.MI300X.8", "BM.HPC2.36", "BM.Optimized3.36",
    "BM.HPC.E5.144",
])


def _err(status, code, message):
    from .oci import OciError
    return OciError(status, code, message)


def _clusters(cloud):
    return cloud.extra.setdefault("oci_compute_clusters", {})


def _json(c):
    return {"id": c["id"], "availabilityDomain": c["ad"], "compartmentId": c["compartment_id"],
            "displayName": c["display_name"], "lifecycleState": c["state"],
            "freeformTags": c["tags"], "definedTags": {}, "timeCreated": c["time_created"]}


def _members(cloud, cid):
    return [i for i in cloud.instances.values()
            if i.get("provider") == "oci" and i.get("compute_cluster_id") == cid
            and i["state"] != "terminated"]


def get(cloud, region, cid):
    c = _clusters(cloud).get(cid)
    if not c or c["region"] != region:
        raise _err(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    return c


def create(cloud, region, headers, body):
    from .oci import _compartment, _need, ad_names, state
    try:
        d = json.loads(body or b"null")
    except ValueError:
        raise _err(400, "InvalidParameter", "The request body is not valid JSON")
    if not isinstance(d, dict):
        raise _err(400, "InvalidParameter", "The request body must be a CreateComputeClusterDetails object")
    # [TF][API] availabilityDomain and compartmentId are required
    ad = _need(d, "availabilityDomain")
    comp = _compartment(cloud, _need(d, "compartmentId"))
    if ad not in ad_names(region):
        raise _err(400, "InvalidParameter", "Invalid availabilityDomain %s for region %s" % (ad, region))
    tags = d.get("freeformTags") or {}
    if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise _err(400, "InvalidParameter", "freeformTags must map strings to strings")
    token = headers.get("opc-retry-token")
    fp = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
    with cloud.lock:
        toks = state(cloud).setdefault("cluster_tokens", {})
        if token and token in toks:
            # [API] opc-retry-token: a retry returns the first result; other parameters: 409
            if toks[token]["fingerprint"] != fp:
                raise _err(409, "Conflict", "The retry token was already used with different "
                           "request parameters.")
            return 200, _json(_clusters(cloud)[toks[token]["id"]])
        cid = "ocid1.computecluster.oc1.%s.%s" % (region, secrets.token_hex(20))
        c = {"id": cid, "region": region, "ad": ad, "compartment_id": comp,
             "display_name": d.get("displayName") or cid, "state": "ACTIVE", "tags": dict(tags),
             "time_created": time_iso()}
        _clusters(cloud)[cid] = c
        if token:
            toks[token] = {"id": cid, "fingerprint": fp}
        cloud.save()
    log("CreateComputeCluster %s in %s" % (cid, ad))
    return 200, _json(c)


def time_iso():
    import time
    ms = now_ms()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000.0)) + ".%03dZ" % (ms % 1000)


def list_(cloud, region, q):
    from .oci import _compartment, _need, _paged
    comp = _compartment(cloud, _need(q, "compartmentId"))
    with cloud.lock:
        sel = [c for c in _clusters(cloud).values() if c["region"] == region and c["compartment_id"] == comp]
        if q.get("availabilityDomain"):
            sel = [c for c in sel if c["ad"] == q["availabilityDomain"]]
        if q.get("displayName"):
            sel = [c for c in sel if c["display_name"] == q["displayName"]]
        sel.sort(key=lambda c: (c["time_created"], c["id"]))
        key = hashlib.sha256(json.dumps([region, sorted((k, v) for k, v in q.items()
                                                        if k not in ("page", "limit"))]).encode()).hexdigest()[:12]
        page, nxt = _paged(sel, q, key)
        # [API] ListComputeClusters answers a ComputeClusterCollection, not a bare list
        return 200, {"items": [_json(c) for c in page]}, nxt


def delete(cloud, region, cid):
    with cloud.lock:
        get(cloud, region, cid)  # 404 for an unknown cluster
        if _members(cloud, cid):
            # [CC] "Before you can delete a compute cluster, you must terminate all the
            # instances in it"; [ERR] 409 Conflict (DeleteComputeCluster errors: 409 Conflict)
            raise _err(409, "Conflict", "The compute cluster %s still has instances" % cid)
        del _clusters(cloud)[cid]
        cloud.save()
    log("DeleteComputeCluster %s" % cid)
    return 204, None


def check_launch(cloud, region, d, ad, comp, shape):
    """LaunchInstance with computeClusterId: called before capacity checks."""
    cid = d.get("computeClusterId")
    if cid is None:
        return
    with cloud.lock:
        c = _clusters(cloud).get(cid)
        if not c or c["region"] != region or c["state"] != "ACTIVE":
            raise _err(404, "NotAuthorizedOrNotFound", "Compute cluster %s not found" % cid)
        if shape not in RDMA_SHAPES:
            # [CC] only the listed RDMA shapes can be in a compute cluster
            raise _err(400, "InvalidParameter", "Shape %s is not supported in a compute cluster" % shape)
        if c["ad"] != ad:
            # [CC][TF] a compute cluster belongs to one availability domain; its instances too
            raise _err(400, "InvalidParameter", "The instance must be in the compute cluster's "
                       "availability domain %s, not %s" % (c["ad"], ad))
        if c["compartment_id"] != comp:
            # facts "RDMA GPU clusters": same compartment and AD
            raise _err(400, "InvalidParameter", "The instance must be in the compute cluster's compartment")


def route(cloud, method, parts, q, region, headers, body):
    if parts[0] != "computeClusters":
        return None, None
    if len(parts) == 1 and method == "POST":
        return "CreateComputeCluster", lambda: create(cloud, region, headers, body)
    if len(parts) == 1 and method == "GET":
        return "ListComputeClusters", lambda: list_(cloud, region, q)
    if len(parts) == 2 and method == "GET":
        return "GetComputeCluster", lambda: (200, _json(get(cloud, region, parts[1])))
    if len(parts) == 2 and method == "DELETE":
        return "DeleteComputeCluster", lambda: delete(cloud, region, parts[1])
    return None, None
