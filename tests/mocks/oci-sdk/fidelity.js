// Mock-cloud fidelity: Oracle's own TypeScript SDK clients (oci-core, oci-identity,
// signing with oci-common from the mock's OCI config file) against the mock's OCI Core
// and Identity. What the SDK sends must pass the mock's signature check, and what the
// mock answers must deserialize into the SDK's models, errors and pagination.
//
//   MOCKCLOUD_URL=http://127.0.0.1:PORT OCI_CLI_CONFIG_FILE=STATE/oci/config node fidelity.js
//
// Last line: "oci-sdk: N passed, M failed"; exit 1 on any failure.
"use strict";

const common = require("oci-common");
const core = require("oci-core");
const identity = require("oci-identity");

const base = process.env.MOCKCLOUD_URL;
const configFile = process.env.OCI_CLI_CONFIG_FILE;
if (!base || !configFile) {
  console.error("fidelity.js: set MOCKCLOUD_URL and OCI_CLI_CONFIG_FILE");
  process.exit(2);
}
const REGION = "us-ashburn-1";
const endpoint = `${base}/oci/${REGION}`;
const SUBNET = "ocid1.subnet.oc1..aaaaaaaamocktraining";

// The tests decide about retries themselves; a circuit breaker would hide the mock's faults.
common.CircuitBreaker.EnableGlobalCircuitBreaker = false;
const noRetry = { retryConfiguration: common.NoRetryConfigurationDetails };

let passed = 0;
let failed = 0;
function check(what, ok, detail) {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + detail}`);
  }
}

async function control(method, path, body) {
  const r = await fetch(`${base}/_mock/${path}`, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return r.json();
}

async function expectError(what, fn, status, code) {
  try {
    await fn();
    check(what, false, "no error");
  } catch (e) {
    check(what, e.statusCode === status && e.serviceCode === code && !!e.opcRequestId,
          `${e.statusCode} ${e.serviceCode} ${e.message}`);
    return e;
  }
}

async function main() {
  const auth = new common.ConfigFileAuthenticationDetailsProvider(configFile, "DEFAULT");
  const tenancy = auth.getTenantId();
  const user = auth.getUser();
  const idc = new identity.IdentityClient({ authenticationDetailsProvider: auth }, noRetry);
  idc.endpoint = endpoint;
  const compute = new core.ComputeClient({ authenticationDetailsProvider: auth }, noRetry);
  compute.endpoint = endpoint;
  const vnet = new core.VirtualNetworkClient({ authenticationDetailsProvider: auth }, noRetry);
  vnet.endpoint = endpoint;

  // Identity: GetUser and ListAvailabilityDomains.
  const u = await idc.getUser({ userId: user });
  check("GetUser returns the config's user", u.user.id === user && u.user.compartmentId === tenancy,
        JSON.stringify(u.user));
  check("GetUser carries opc-request-id", !!u.opcRequestId);
  check("GetUser lifecycleState is a model value", u.user.lifecycleState === "ACTIVE");
  const ads = await idc.listAvailabilityDomains({ compartmentId: tenancy });
  const adNames = ads.items.map((a) => a.name);
  check("three ADs in us-ashburn-1", adNames.length === 3 && adNames[0] === "Mock:US-ASHBURN-AD-1",
        adNames.join(","));
  await expectError("GetUser of another user is 404 NotAuthorizedOrNotFound",
                    () => idc.getUser({ userId: "ocid1.user.oc1..someoneelse" }), 404,
                    "NotAuthorizedOrNotFound");

  // Core: a preemptible instance with tags, metadata and a retry token.
  const details = {
    availabilityDomain: adNames[0],
    compartmentId: tenancy,
    shape: "VM.GPU2.1",
    displayName: "sdk-node-0",
    sourceDetails: { sourceType: "image", imageId: "ocid1.image.oc1..aaaaaaaamockimage" },
    createVnicDetails: { subnetId: SUBNET, assignPublicIp: false },
    metadata: { ssh_authorized_keys: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNkaw== sdk" },
    freeformTags: { "isc:broker": "sdk-broker", "isc:cluster": "cl_sdk" },
    preemptibleInstanceConfig: { preemptionAction: { type: "TERMINATE", preserveBootVolume: false } },
  };
  const l1 = await compute.launchInstance({ launchInstanceDetails: details, opcRetryToken: "sdk-token-1" });
  const inst = l1.instance;
  check("LaunchInstance returns PROVISIONING", inst.lifecycleState === core.models.Instance.LifecycleState.Provisioning,
        inst.lifecycleState);
  check("LaunchInstance keeps the freeform tags", inst.freeformTags["isc:cluster"] === "cl_sdk");
  check("LaunchInstance keeps the preemptible config",
        inst.preemptibleInstanceConfig && inst.preemptibleInstanceConfig.preemptionAction.type === "TERMINATE");
  check("timeCreated is an RFC 3339 time", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(String(inst.timeCreated)) &&
        !isNaN(Date.parse(inst.timeCreated)), inst.timeCreated);
  const l2 = await compute.launchInstance({ launchInstanceDetails: details, opcRetryToken: "sdk-token-1" });
  check("the same retry token returns the same instance", l2.instance.id === inst.id);
  const changed = Object.assign({}, details, { displayName: "other" });
  await expectError("a retry token reused with another body is 409",
                    () => compute.launchInstance({ launchInstanceDetails: changed, opcRetryToken: "sdk-token-1" }),
                    409, "Conflict");

  // Pagination: two more, then pages of one.
  for (let i = 1; i <= 2; i++) {
    await compute.launchInstance({
      launchInstanceDetails: Object.assign({}, details, { displayName: `sdk-node-${i}` }),
      opcRetryToken: `sdk-token-${i + 1}`,
    });
  }
  const seen = [];
  let page;
  let pages = 0;
  do {
    const r = await compute.listInstances({ compartmentId: tenancy, limit: 1, page });
    seen.push(...r.items.map((x) => x.id));
    page = r.opcNextPage;
    pages++;
  } while (page && pages < 20);
  check("ListInstances pages with opc-next-page", pages >= 3 && new Set(seen).size === seen.length && seen.includes(inst.id),
        `${pages} pages, ${seen.length} items`);
  const all = [];
  for await (const x of common.paginateRecords({ compartmentId: tenancy, limit: 2 },
                                               (req) => compute.listInstances(req))) {
    all.push(x);
  }
  check("the SDK's own paginator walks every page", all.length === seen.length, `${all.length} vs ${seen.length}`);

  // Wait for RUNNING, then the VNIC path the driver uses.
  let running;
  for (let i = 0; i < 100; i++) {
    running = (await compute.getInstance({ instanceId: inst.id })).instance;
    if (running.lifecycleState === "RUNNING") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check("GetInstance reaches RUNNING", running.lifecycleState === "RUNNING", running.lifecycleState);
  const atts = await compute.listVnicAttachments({ compartmentId: tenancy, instanceId: inst.id });
  check("one ATTACHED VNIC attachment", atts.items.length === 1 && atts.items[0].lifecycleState === "ATTACHED",
        JSON.stringify(atts.items));
  const vnic = await vnet.getVnic({ vnicId: atts.items[0].vnicId });
  check("GetVnic gives a private IP", /^127\./.test(vnic.vnic.privateIp || ""), vnic.vnic.privateIp);
  const subnet = await vnet.getSubnet({ subnetId: SUBNET });
  check("GetSubnet gives CIDR and security lists", !!subnet.subnet.cidrBlock && subnet.subnet.securityListIds.length === 1);
  const sl = await vnet.getSecurityList({ securityListId: subnet.subnet.securityListIds[0] });
  check("GetSecurityList has ingress rules and an etag", sl.securityList.ingressSecurityRules.length >= 1 && !!sl.etag);
  const upd = await vnet.updateSecurityList({
    securityListId: sl.securityList.id,
    ifMatch: sl.etag,
    updateSecurityListDetails: { ingressSecurityRules: sl.securityList.ingressSecurityRules },
  });
  check("UpdateSecurityList with if-match gives a new etag", !!upd.etag && upd.etag !== sl.etag);
  await expectError("UpdateSecurityList with a stale etag is 412",
                    () => vnet.updateSecurityList({
                      securityListId: sl.securityList.id, ifMatch: sl.etag,
                      updateSecurityListDetails: { ingressSecurityRules: sl.securityList.ingressSecurityRules },
                    }), 412, "NoEtagMatch");

  // Faults arrive as OCI errors the SDK understands.
  await control("POST", "faults", { kind: "capacity", provider: "oci", instance_type: "VM.GPU2.1", count: 1 });
  const cap = await expectError("capacity is 500 InternalError",
                                () => compute.launchInstance({ launchInstanceDetails: details, opcRetryToken: "sdk-cap" }),
                                500, "InternalError");
  check("capacity says Out of host capacity", cap && /Out of host capacity/.test(cap.message), cap && cap.message);
  await control("POST", "faults", { kind: "quota", provider: "oci", count: 1 });
  await expectError("quota is 400 LimitExceeded",
                    () => compute.launchInstance({ launchInstanceDetails: details, opcRetryToken: "sdk-quota" }),
                    400, "LimitExceeded");
  await control("POST", "faults", { kind: "throttle", provider: "oci", action: "GetInstance", count: 1 });
  await expectError("throttling is 429 TooManyRequests", () => compute.getInstance({ instanceId: inst.id }),
                    429, "TooManyRequests");

  // Terminate: 204, TERMINATING then TERMINATED; unknown ids are 404.
  for (const id of seen) {
    await compute.terminateInstance({ instanceId: id, preserveBootVolume: false });
  }
  let gone = 0;
  for (let i = 0; i < 100 && gone < seen.length; i++) {
    const r = await compute.listInstances({ compartmentId: tenancy, lifecycleState: "TERMINATED" });
    gone = r.items.filter((x) => seen.includes(x.id)).length;
    if (gone < seen.length) await new Promise((r) => setTimeout(r, 100));
  }
  check("every instance reaches TERMINATED", gone === seen.length, `${gone}/${seen.length}`);
  await expectError("GetInstance of an unknown id is 404",
                    () => compute.getInstance({ instanceId: "ocid1.instance.oc1.iad.nope" }), 404,
                    "NotAuthorizedOrNotFound");

  // Boot volumes: 50 GB to 32 TB.
  const small = Object.assign({}, details, { sourceDetails: Object.assign({}, details.sourceDetails,
                                                                           { bootVolumeSizeInGBs: 20 }) });
  await expectError("a 20 GB boot volume is 400 InvalidParameter",
                    () => compute.launchInstance({ launchInstanceDetails: small }), 400, "InvalidParameter");

  // Compute clusters (tests/mocks/mockcloud_lib/oci_cluster.py): one AD, RDMA shapes only.
  const cc = await compute.createComputeCluster({
    createComputeClusterDetails: { availabilityDomain: adNames[0], compartmentId: tenancy,
                                   displayName: "sdk-cc", freeformTags: { "isc:broker": "sdk-broker" } },
    opcRetryToken: "sdk-cc-1",
  });
  check("CreateComputeCluster is ACTIVE in its AD",
        cc.computeCluster.lifecycleState === core.models.ComputeCluster.LifecycleState.Active &&
        cc.computeCluster.availabilityDomain === adNames[0], JSON.stringify(cc.computeCluster));
  const cc2 = await compute.createComputeCluster({
    createComputeClusterDetails: { availabilityDomain: adNames[0], compartmentId: tenancy,
                                   displayName: "sdk-cc", freeformTags: { "isc:broker": "sdk-broker" } },
    opcRetryToken: "sdk-cc-1",
  });
  check("the same retry token returns the same compute cluster", cc2.computeCluster.id === cc.computeCluster.id);
  const ccl = await compute.listComputeClusters({ compartmentId: tenancy, availabilityDomain: adNames[0] });
  check("ListComputeClusters: a ComputeClusterCollection with it",
        ccl.computeClusterCollection.items.some((x) => x.id === cc.computeCluster.id &&
                                                        x.freeformTags["isc:broker"] === "sdk-broker"),
        JSON.stringify(ccl.computeClusterCollection));
  const bm = Object.assign({}, details, { shape: "BM.GPU.H100.8", computeClusterId: cc.computeCluster.id,
                                          displayName: "sdk-rdma-0" });
  delete bm.preemptibleInstanceConfig;
  await expectError("a non-RDMA shape in a compute cluster is 400 InvalidParameter",
                    () => compute.launchInstance({ launchInstanceDetails: Object.assign({}, bm, { shape: "BM.GPU.A10.4" }) }),
                    400, "InvalidParameter");
  await expectError("another AD than the compute cluster's is 400 InvalidParameter",
                    () => compute.launchInstance({ launchInstanceDetails: Object.assign({}, bm, { availabilityDomain: adNames[1] }) }),
                    400, "InvalidParameter");
  const member = (await compute.launchInstance({ launchInstanceDetails: bm })).instance;
  check("an RDMA shape joins it (Instance.computeClusterId)", member.computeClusterId === cc.computeCluster.id,
        JSON.stringify(member));
  await expectError("DeleteComputeCluster with an instance in it is 409 Conflict",
                    () => compute.deleteComputeCluster({ computeClusterId: cc.computeCluster.id }), 409, "Conflict");
  await compute.terminateInstance({ instanceId: member.id, preserveBootVolume: false });
  let deleted = false;
  for (let i = 0; i < 100 && !deleted; i++) {
    try {
      await compute.deleteComputeCluster({ computeClusterId: cc.computeCluster.id });
      deleted = true;
    } catch (e) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  check("DeleteComputeCluster once its instance is terminated", deleted);
  await expectError("GetComputeCluster after the delete is 404",
                    () => compute.getComputeCluster({ computeClusterId: cc.computeCluster.id }), 404,
                    "NotAuthorizedOrNotFound");

  // Network security groups (tests/mocks/mockcloud_lib/oci_nsg.py): a tenant's group as the
  // broker's driver makes it (docs/security.md, issue 42), through the SDK's own models.
  const vcnId = subnet.subnet.vcnId;
  const nsg = (await vnet.createNetworkSecurityGroup({
    createNetworkSecurityGroupDetails: { compartmentId: tenancy, vcnId, displayName: "isc-tenant-sdk-7",
                                         freeformTags: { "isc:broker": "sdk-broker", "isc:tenant": "7" } },
    opcRetryToken: "sdk-nsg-1",
  })).networkSecurityGroup;
  check("CreateNetworkSecurityGroup is AVAILABLE in the VCN",
        nsg.lifecycleState === "AVAILABLE" && nsg.vcnId === vcnId && nsg.freeformTags["isc:tenant"] === "7",
        JSON.stringify(nsg));
  const again = (await vnet.createNetworkSecurityGroup({
    createNetworkSecurityGroupDetails: { compartmentId: tenancy, vcnId, displayName: "isc-tenant-sdk-7",
                                         freeformTags: { "isc:broker": "sdk-broker", "isc:tenant": "7" } },
    opcRetryToken: "sdk-nsg-1",
  })).networkSecurityGroup;
  check("the same retry token returns the same NSG", again.id === nsg.id);
  const added = await vnet.addNetworkSecurityGroupSecurityRules({
    networkSecurityGroupId: nsg.id,
    addNetworkSecurityGroupSecurityRulesDetails: { securityRules: [
      { direction: "INGRESS", protocol: "all", source: nsg.id, sourceType: "NETWORK_SECURITY_GROUP", isStateless: false },
      { direction: "INGRESS", protocol: "6", source: "192.0.2.0/24", sourceType: "CIDR_BLOCK", isStateless: false,
        tcpOptions: { destinationPortRange: { min: 22, max: 22 } } }] },
  });
  check("AddNetworkSecurityGroupSecurityRules returns both rules",
        added.addedNetworkSecurityGroupSecurityRules.securityRules.length === 2,
        JSON.stringify(added.addedNetworkSecurityGroupSecurityRules));
  const rules = await vnet.listNetworkSecurityGroupSecurityRules({ networkSecurityGroupId: nsg.id });
  check("ListNetworkSecurityGroupSecurityRules: the self rule by NSG source",
        rules.items.some((r) => r.source === nsg.id && r.sourceType === "NETWORK_SECURITY_GROUP" && r.protocol === "all"),
        JSON.stringify(rules.items));
  await expectError("an NSG source that does not exist is 400 InvalidParameter",
                    () => vnet.addNetworkSecurityGroupSecurityRules({
                      networkSecurityGroupId: nsg.id,
                      addNetworkSecurityGroupSecurityRulesDetails: { securityRules: [
                        { direction: "INGRESS", protocol: "all", source: "ocid1.networksecuritygroup.oc1..none",
                          sourceType: "NETWORK_SECURITY_GROUP" }] } }), 400, "InvalidParameter");
  const found = await vnet.listNetworkSecurityGroups({ compartmentId: tenancy, vcnId, displayName: "isc-tenant-sdk-7" });
  check("ListNetworkSecurityGroups by display name", found.items.length === 1 && found.items[0].id === nsg.id,
        JSON.stringify(found.items));
  const inNsg = Object.assign({}, details, { displayName: "sdk-nsg-0",
                                             createVnicDetails: { subnetId: SUBNET, assignPublicIp: false, nsgIds: [nsg.id] } });
  const tnode = (await compute.launchInstance({ launchInstanceDetails: inNsg })).instance;
  let tv = null;
  for (let i = 0; i < 100 && !tv; i++) {
    const a = await compute.listVnicAttachments({ compartmentId: tenancy, instanceId: tnode.id });
    if (a.items.length && a.items[0].vnicId) tv = (await vnet.getVnic({ vnicId: a.items[0].vnicId })).vnic;
    else await new Promise((r) => setTimeout(r, 100));
  }
  check("GetVnic lists the NSG of a VNIC launched into it", tv && tv.nsgIds && tv.nsgIds[0] === nsg.id,
        JSON.stringify(tv));
  const nv = await vnet.listNetworkSecurityGroupVnics({ networkSecurityGroupId: nsg.id });
  check("ListNetworkSecurityGroupVnics names the instance", nv.items.length === 1 && nv.items[0].resourceId === tnode.id,
        JSON.stringify(nv.items));
  await expectError("DeleteNetworkSecurityGroup with a VNIC in it is 409 Conflict",
                    () => vnet.deleteNetworkSecurityGroup({ networkSecurityGroupId: nsg.id }), 409, "Conflict");
  await compute.terminateInstance({ instanceId: tnode.id, preserveBootVolume: false });
  let nsgGone = false;
  for (let i = 0; i < 100 && !nsgGone; i++) {
    try {
      await vnet.deleteNetworkSecurityGroup({ networkSecurityGroupId: nsg.id });
      nsgGone = true;
    } catch (e) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  check("DeleteNetworkSecurityGroup once its VNIC is gone", nsgGone);

  // CreateComputeCapacityReport (issue 43): the report's JSON shape through the SDK's
  // models, availabilityStatus from the mock's capacity, the root compartment only.
  await control("POST", "capacity", { instance_type: "BM.GPU.H100.8", zone: "US-ASHBURN-AD-2", available: 0 });
  const rep = async (ad) => (await compute.createComputeCapacityReport({
    createComputeCapacityReportDetails: {
      compartmentId: tenancy, availabilityDomain: ad,
      shapeAvailabilities: [{ instanceShape: "BM.GPU.H100.8" }, { instanceShape: "GPU.NOT.A.SHAPE" }],
    },
  })).computeCapacityReport;
  const r1 = await rep(adNames[0]);
  check("CreateComputeCapacityReport: the AD and one availability per shape asked",
        r1.availabilityDomain === adNames[0] && r1.shapeAvailabilities.length === 2 && !!r1.timeCreated,
        JSON.stringify(r1));
  const CS = core.models.CapacityReportShapeAvailability.AvailabilityStatus;
  check("CreateComputeCapacityReport: AVAILABLE with an availableCount",
        r1.shapeAvailabilities[0].availabilityStatus === CS.Available && r1.shapeAvailabilities[0].availableCount > 0,
        JSON.stringify(r1.shapeAvailabilities[0]));
  check("CreateComputeCapacityReport: an unknown shape is HARDWARE_NOT_SUPPORTED",
        r1.shapeAvailabilities[1].availabilityStatus === CS.HardwareNotSupported);
  const r2 = await rep(adNames[1]);
  check("CreateComputeCapacityReport: no capacity left is OUT_OF_HOST_CAPACITY, count 0",
        r2.shapeAvailabilities[0].availabilityStatus === CS.OutOfHostCapacity &&
        r2.shapeAvailabilities[0].availableCount === 0, JSON.stringify(r2.shapeAvailabilities[0]));
  await control("POST", "capacity", { instance_type: "BM.GPU.H100.8", zone: "US-ASHBURN-AD-2", available: null });
  await expectError("CreateComputeCapacityReport in another compartment is 404 NotAuthorizedOrNotFound",
                    () => compute.createComputeCapacityReport({ createComputeCapacityReportDetails: {
                      compartmentId: "ocid1.compartment.oc1..aaaaaaaanotroot", availabilityDomain: adNames[0],
                      shapeAvailabilities: [{ instanceShape: "BM.GPU.H100.8" }] } }),
                    404, "NotAuthorizedOrNotFound");

  // A key the mock does not know is refused as NotAuthenticated.
  const crypto = require("crypto");
  const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const stranger = new common.SimpleAuthenticationDetailsProvider(
    tenancy, user, auth.getFingerprint(), privateKey.export({ type: "pkcs1", format: "pem" }), null,
    common.Region.US_ASHBURN_1);
  const badIdc = new identity.IdentityClient({ authenticationDetailsProvider: stranger }, noRetry);
  badIdc.endpoint = endpoint;
  await expectError("another key is 401 NotAuthenticated", () => badIdc.getUser({ userId: user }), 401,
                    "NotAuthenticated");
}

main()
  .catch((e) => {
    failed++;
    console.error("FAIL: unexpected error:", e && (e.stack || e.message || e));
  })
  .finally(() => {
    console.log(`oci-sdk: ${passed} passed, ${failed} failed`);
    process.exitCode = failed ? 1 : 0;
  });
