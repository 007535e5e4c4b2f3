// Mock fidelity: drives the mock cloud's Compute Engine with Google's own Node client
// (@googleapis/compute), so the mock is checked against the client Google generates from
// its API description rather than against our C driver. The JWT-bearer exchange is done
// here with node:crypto (google-auth-library always posts to Google's own token URL):
// a second, independent signer for the mock's token endpoint.
//
//   MOCK=http://127.0.0.1:PORT KEY=STATE_DIR/gcp-service-account.json node fidelity.mjs
//
// Last line: "gce-node: N passed, M failed".
import { compute } from '@googleapis/compute';
import { OAuth2Client } from 'google-auth-library';
import { createSign, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

const MOCK = process.env.MOCK;
const key = JSON.parse(readFileSync(process.env.KEY, 'utf8'));
const project = key.project_id;
let passed = 0;
let failed = 0;

function check(what, ok, detail) {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  }
}

const b64url = (b) => Buffer.from(b).toString('base64url');

function assertion(privateKey, iat) {
  const head = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: key.private_key_id }));
  const claims = b64url(JSON.stringify({
    iss: key.client_email, scope: 'https://www.googleapis.com/auth/cloud-platform',
    aud: key.token_uri, iat, exp: iat + 3600,
  }));
  const sig = createSign('RSA-SHA256').update(`${head}.${claims}`).sign(privateKey);
  return `${head}.${claims}.${b64url(sig)}`;
}

async function exchange(jwt) {
  const r = await fetch(key.token_uri, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: jwt }),
  });
  return { status: r.status, body: await r.json() };
}

async function mock(method, path, body) {
  const r = await fetch(`${MOCK}/_mock/${path}`, { method, body: body ? JSON.stringify(body) : undefined });
  return r.json();
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

async function rejects(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return e;
  }
}

async function main() {
  const now = Math.floor(Date.now() / 1000);
  // --- the token endpoint
  const tok = await exchange(assertion(key.private_key, now));
  check('token exchange accepted', tok.status === 200 && tok.body.token_type === 'Bearer', tok);
  const bad = await exchange(assertion(key.private_key, now).replace(/\.[^.]+$/, '.' + b64url('x'.repeat(256))));
  check('a forged signature is invalid_grant', bad.status === 400 && bad.body.error === 'invalid_grant', bad);
  const old = await exchange(assertion(key.private_key, now - 7200));
  check('an expired assertion is invalid_grant', old.status === 400 && old.body.error === 'invalid_grant', old);

  const auth = new OAuth2Client();
  auth.setCredentials({ access_token: tok.body.access_token, expiry_date: Date.now() + tok.body.expires_in * 1000 });
  const gce = compute({ version: 'v1', auth, rootUrl: `${MOCK}/`, retry: false });
  const zone = 'us-central1-f';

  // --- projects.get, and a call without credentials
  const proj = await gce.projects.get({ project });
  check('projects.get', proj.data.name === project && proj.data.kind === 'compute#project', proj.data);
  const anon = compute({ version: 'v1', rootUrl: `${MOCK}/`, retry: false });
  const e401 = await rejects(anon.projects.get({ project }));
  check('no bearer token: 401 required', e401 && e401.status === 401 &&
    e401.response?.data?.error?.errors?.[0]?.reason === 'required', e401?.response?.data);

  // --- bulkInsert, all or nothing, with a requestId
  const requestId = randomUUID();
  const body = {
    count: '3', minCount: '3', namePattern: 'fid-####',
    instanceProperties: {
      machineType: 'g2-standard-4',
      labels: { suite: 'fidelity' },
      scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', onHostMaintenance: 'TERMINATE', automaticRestart: false },
      disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'projects/debian-cloud/global/images/family/debian-12', diskSizeGb: '50' } }],
      networkInterfaces: [{ network: 'global/networks/default', accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }] }],
      metadata: { items: [{ key: 'ssh-keys', value: 'root:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFidelityKeyForTheMockOnly fidelity' }] },
    },
  };
  const op1 = await gce.instances.bulkInsert({ project, zone, requestId, requestBody: body });
  check('bulkInsert returns a zone Operation', op1.data.kind === 'compute#operation' &&
    ['PENDING', 'RUNNING'].includes(op1.data.status) && op1.data.operationType === 'bulkInsert', op1.data);
  let op = op1.data;
  for (let i = 0; i < 100 && op.status !== 'DONE'; i++) {
    op = (await gce.zoneOperations.wait({ project, zone, operation: op1.data.name })).data;
  }
  check('zoneOperations.wait reaches DONE without error', op.status === 'DONE' && !op.error, op);
  check('perLocationStatus counts the gang', op.instancesBulkInsertOperationMetadata?.perLocationStatus?.[`zones/${zone}`]?.createdVmCount === 3, op);
  const replay = await gce.instances.bulkInsert({ project, zone, requestId, requestBody: body });
  check('the same requestId returns the same Operation', replay.data.name === op1.data.name, replay.data);

  const list = await gce.instances.list({ project, zone, filter: 'labels.suite = "fidelity"' });
  const names = (list.data.items || []).map((i) => i.name).sort();
  check('instances.list by label: 3 nodes, numbered by the pattern',
    JSON.stringify(names) === JSON.stringify(['fid-0001', 'fid-0002', 'fid-0003']), names);
  check('the nodes are Spot and RUNNING', (list.data.items || []).every((i) => i.status === 'RUNNING' &&
    i.scheduling.provisioningModel === 'SPOT' && i.networkInterfaces[0].networkIP.startsWith('127.')), list.data.items);

  // --- aggregatedList with paging
  let pageToken;
  let seen = 0;
  let pages = 0;
  do {
    const r = await gce.instances.aggregatedList({ project, filter: 'labels.suite = "fidelity"', maxResults: 2, pageToken });
    for (const scope of Object.values(r.data.items || {})) seen += (scope.instances || []).length;
    pageToken = r.data.nextPageToken;
    pages++;
  } while (pageToken && pages < 10);
  check('aggregatedList pages through 3 nodes, 2 a page', seen === 3 && pages === 2, { seen, pages });

  const one = await gce.instances.get({ project, zone, instance: 'fid-0002' });
  check('instances.get', one.data.name === 'fid-0002' && one.data.labels.suite === 'fidelity', one.data);
  const e404 = await rejects(gce.instances.get({ project, zone, instance: 'no-such-node' }));
  check('instances.get of an unknown name: 404 notFound', e404 && e404.status === 404 &&
    e404.response?.data?.error?.errors?.[0]?.reason === 'notFound', e404?.response?.data);

  // --- faults, as the client sees them
  await mock('POST', 'faults', { kind: 'quota', provider: 'gcp' });
  const eq = await rejects(gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: body }));
  check('quota: HTTP 403 quotaExceeded', eq && eq.status === 403 &&
    eq.response?.data?.error?.errors?.[0]?.reason === 'quotaExceeded', eq?.response?.data);
  await mock('POST', 'faults', { kind: 'capacity', provider: 'gcp', instance_type: 'g2-standard-4', zone });
  let cop = (await gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: body })).data;
  for (let i = 0; i < 50 && cop.status !== 'DONE'; i++) {
    cop = (await gce.zoneOperations.get({ project, zone, operation: cop.name })).data;
  }
  check('stockout: DONE with ZONE_RESOURCE_POOL_EXHAUSTED', cop.status === 'DONE' &&
    cop.error?.errors?.[0]?.code === 'ZONE_RESOURCE_POOL_EXHAUSTED' && cop.httpErrorStatusCode === 503, cop);
  await mock('POST', 'faults', { kind: 'throttle', provider: 'gcp', action: 'projects.get' });
  const et = await rejects(gce.projects.get({ project }));
  check('throttle: HTTP 403 rateLimitExceeded', et && et.status === 403 &&
    et.response?.data?.error?.errors?.[0]?.reason === 'rateLimitExceeded', et?.response?.data);
  const ebad = await rejects(gce.instances.bulkInsert({ project, zone, requestId: '00000000-0000-0000-0000-000000000000', requestBody: body }));
  check('an all-zero requestId is refused', ebad && ebad.status === 400, ebad?.response?.data);

  // --- preemption, seen from outside
  await mock('POST', 'faults', { kind: 'preempt', instance_id: 'fid-0001', notice_s: 1 });
  const pre = await gce.globalOperations.aggregatedList({ project, filter: 'operationType = "compute.instances.preempted"' });
  const preOps = Object.values(pre.data.items || {}).flatMap((s) => s.operations || []);
  check('a compute.instances.preempted operation names the node',
    preOps.some((o) => o.targetLink.endsWith(`/zones/${zone}/instances/fid-0001`) && o.status === 'DONE'), preOps);
  const stopping = await gce.instances.get({ project, zone, instance: 'fid-0001' });
  check('the preempted node is STOPPING', stopping.data.status === 'STOPPING', stopping.data.status);
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    await sleep(100);
    gone = !!(await rejects(gce.instances.get({ project, zone, instance: 'fid-0001' })));
  }
  check('with instanceTerminationAction DELETE it is gone after the notice', gone);

  // --- delete
  const del = await gce.instances.delete({ project, zone, instance: 'fid-0002', requestId: randomUUID() });
  check('instances.delete returns an Operation', del.data.operationType === 'delete' &&
    del.data.targetLink.endsWith('/instances/fid-0002'), del.data);
  await gce.instances.delete({ project, zone, instance: 'fid-0003' });
  let left = 3;
  for (let i = 0; i < 100 && left > 0; i++) {
    await sleep(100);
    const r = await gce.instances.list({ project, zone, filter: 'labels.suite = "fidelity"' });
    left = (r.data.items || []).length;
  }
  check('every node deleted', left === 0, left);

  // --- compact placement (tests/mocks/mockcloud_lib/gce_policy.py): a regional resource
  // policy, attached at bulkInsert, refused elsewhere, not deletable while in use.
  const region = zone.replace(/-[a-z]$/, '');
  const pop = await gce.resourcePolicies.insert({ project, region, requestId: randomUUID(), requestBody: {
    name: 'fid-compact', description: 'isc:broker=fidelity',
    groupPlacementPolicy: { collocation: 'COLLOCATED', vmCount: 2, availabilityDomainCount: 1 } } });
  check('resourcePolicies.insert returns a region Operation', pop.data.kind === 'compute#operation' &&
    pop.data.region.endsWith(`/regions/${region}`), pop.data);
  const pw = await gce.regionOperations.get({ project, region, operation: pop.data.name });
  check('regionOperations.get: DONE', pw.data.status === 'DONE' && !pw.data.error, pw.data);
  const pol = await gce.resourcePolicies.get({ project, region, resourcePolicy: 'fid-compact' });
  check('resourcePolicies.get: COLLOCATED, vmCount 2', pol.data.groupPlacementPolicy.collocation === 'COLLOCATED' &&
    Number(pol.data.groupPlacementPolicy.vmCount) === 2, pol.data);
  const plist = await gce.resourcePolicies.list({ project, region });
  check('resourcePolicies.list has it', (plist.data.items || []).some((x) => x.name === 'fid-compact'), plist.data);
  const a2 = JSON.parse(JSON.stringify(body));
  a2.count = '2'; a2.minCount = '2'; a2.namePattern = 'cpt-####';
  a2.instanceProperties.machineType = 'a2-highgpu-1g';
  a2.instanceProperties.labels = { suite: 'compact' };
  a2.instanceProperties.resourcePolicies = [pol.data.selfLink];
  const three = JSON.parse(JSON.stringify(a2)); three.count = '3'; three.minCount = '3';
  const e3 = await rejects(gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: three }));
  check('3 VMs into a vmCount-2 compact policy: 400', e3 && e3.status === 400, e3?.response?.data);
  const tiny = JSON.parse(JSON.stringify(body)); tiny.instanceProperties.disks[0].initializeParams.diskSizeGb = '5';
  const etiny = await rejects(gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: tiny }));
  check('a 5 GB boot disk (smaller than the image): 400', etiny && etiny.status === 400, etiny?.response?.data);
  const n1 = JSON.parse(JSON.stringify(a2)); n1.instanceProperties.machineType = 'e2-standard-4';
  const en1 = await rejects(gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: n1 }));
  check('compact placement on an e2 machine type: 400', en1 && en1.status === 400, en1?.response?.data);
  let cpop = (await gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: a2 })).data;
  for (let i = 0; i < 100 && cpop.status !== 'DONE'; i++) {
    await sleep(50);
    cpop = (await gce.zoneOperations.get({ project, zone, operation: cpop.name })).data;
  }
  check('bulkInsert with the compact policy succeeds', cpop.status === 'DONE' && !cpop.error, cpop);
  const c1 = await gce.instances.get({ project, zone, instance: 'cpt-0001' });
  check('the instance reports resourcePolicies', (c1.data.resourcePolicies || [])[0] === pol.data.selfLink, c1.data.resourcePolicies);
  const inuse = await rejects(gce.resourcePolicies.delete({ project, region, resourcePolicy: 'fid-compact' }));
  check('deleting a policy in use: 400 resourceInUseByAnotherResource', inuse && inuse.status === 400 &&
    inuse.response?.data?.error?.errors?.[0]?.reason === 'resourceInUseByAnotherResource', inuse?.response?.data);
  await gce.instances.delete({ project, zone, instance: 'cpt-0001' });
  await gce.instances.delete({ project, zone, instance: 'cpt-0002' });
  let deleted = false;
  for (let i = 0; i < 100 && !deleted; i++) {
    await sleep(100);
    deleted = !(await rejects(gce.resourcePolicies.delete({ project, region, resourcePolicy: 'fid-compact' })));
  }
  check('the policy is deleted once its VMs are gone', deleted);

  // VPC firewall rules of the default network (firewalls.list,
  // https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/list) and its
  // auto mode subnet (subnetworks.get): what the GCP driver reads before a gang launches.
  const fw = await gce.firewalls.list({ project });
  const rules = fw.data.items || [];
  const internal = rules.find((x) => x.name === 'default-allow-internal');
  check('firewalls.list: compute#firewallList with the default rules', fw.data.kind === 'compute#firewallList' &&
    ['default-allow-internal', 'default-allow-ssh', 'default-allow-rdp', 'default-allow-icmp']
      .every((n) => rules.some((x) => x.name === n)), rules.map((x) => x.name));
  check('default-allow-internal: INGRESS from 10.128.0.0/9, tcp:0-65535, priority 65534',
    internal && internal.direction === 'INGRESS' && internal.disabled === false && internal.priority === 65534 &&
    internal.network.endsWith(`/projects/${project}/global/networks/default`) &&
    internal.sourceRanges?.[0] === '10.128.0.0/9' &&
    internal.allowed?.some((a) => a.IPProtocol === 'tcp' && a.ports?.[0] === '0-65535') && !internal.targetTags, internal);
  const page1 = await gce.firewalls.list({ project, maxResults: 2 });
  check('firewalls.list pages (maxResults 2)', (page1.data.items || []).length === 2 && !!page1.data.nextPageToken, page1.data);
  const byName = await gce.firewalls.list({ project, filter: 'name = "default-allow-ssh"' });
  check('firewalls.list filter on name', (byName.data.items || []).length === 1 &&
    byName.data.items[0].allowed[0].ports[0] === '22', byName.data.items);
  const fget = await gce.firewalls.get({ project, firewall: 'default-allow-internal' });
  check('firewalls.get', fget.data.name === 'default-allow-internal' && fget.data.kind === 'compute#firewall', fget.data);
  const sn = await gce.subnetworks.get({ project, region, subnetwork: 'default' });
  check('subnetworks.get: the auto mode subnet of us-central1 is 10.128.0.0/20',
    sn.data.ipCidrRange === '10.128.0.0/20' && sn.data.network.endsWith('/global/networks/default'), sn.data);
  await mock('DELETE', 'gcp/firewalls/default-allow-internal');
  const after = await gce.firewalls.list({ project });
  check('a removed rule is gone from firewalls.list', !(after.data.items || []).some((x) => x.name === 'default-allow-internal'));
  const fw404 = await rejects(gce.firewalls.get({ project, firewall: 'default-allow-internal' }));
  check('firewalls.get of a removed rule: 404 notFound', fw404 && fw404.status === 404 &&
    fw404.response?.data?.error?.errors?.[0]?.reason === 'notFound', fw404?.response?.data);
  await mock('POST', 'gcp/firewalls', internal);
  const back = await gce.firewalls.get({ project, firewall: 'default-allow-internal' });
  check('the rule put back reads the same', back.data.sourceRanges?.[0] === '10.128.0.0/9' && back.data.priority === 65534, back.data);

  // A tenant's rule and tag as the broker's driver makes them (docs/security.md, issue 42):
  // firewalls.insert / delete with global Operations, network tags on instances.
  const tenantRule = { name: 'isc-t-7-0a0b0c0d', network: 'global/networks/default', direction: 'INGRESS',
    priority: 1000, sourceTags: ['isc-t-7-0a0b0c0d'], targetTags: ['isc-t-7-0a0b0c0d'], allowed: [{ IPProtocol: 'all' }] };
  const frid = randomUUID();
  const fop = await gce.firewalls.insert({ project, requestId: frid, requestBody: tenantRule });
  check('firewalls.insert returns a global Operation', fop.data.kind === 'compute#operation' && !fop.data.zone && !fop.data.region, fop.data);
  const fopw = await gce.globalOperations.get({ project, operation: fop.data.name });
  check('globalOperations.get: DONE', fopw.data.status === 'DONE' && !fopw.data.error, fopw.data);
  const fop2 = await gce.firewalls.insert({ project, requestId: frid, requestBody: tenantRule });
  check('firewalls.insert with the same requestId: the first Operation', fop2.data.name === fop.data.name, fop2.data);
  const dup = await rejects(gce.firewalls.insert({ project, requestId: randomUUID(), requestBody: tenantRule }));
  check('firewalls.insert of a name there: 409 alreadyExists', dup && dup.status === 409 &&
        dup.response?.data?.error?.errors?.[0]?.reason === 'alreadyExists', dup?.response?.data);
  const egress = await rejects(gce.firewalls.insert({ project, requestId: randomUUID(), requestBody:
    Object.assign({}, tenantRule, { name: 'isc-t-egress', direction: 'EGRESS' }) }));
  check('sourceTags on an EGRESS rule: 400', egress && egress.status === 400, egress?.response?.data);
  const tr = await gce.firewalls.get({ project, firewall: tenantRule.name });
  check('firewalls.get: the tags and all protocols', tr.data.sourceTags?.[0] === tenantRule.name &&
        tr.data.targetTags?.[0] === tenantRule.name && tr.data.allowed?.[0]?.IPProtocol === 'all', tr.data);
  const tagged = JSON.parse(JSON.stringify(body));
  tagged.namePattern = 'tag-####';
  tagged.instanceProperties.tags = { items: [tenantRule.name] };
  let top = (await gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: tagged })).data;
  for (let i = 0; i < 100 && top.status !== 'DONE'; i++) {
    await sleep(50);
    top = (await gce.zoneOperations.get({ project, zone, operation: top.name })).data;
  }
  const ti = await gce.instances.get({ project, zone, instance: 'tag-0001' });
  check('the instance reports its network tag', ti.data.tags?.items?.[0] === tenantRule.name, ti.data.tags);
  const badTag = JSON.parse(JSON.stringify(tagged)); badTag.namePattern = 'bad-####';
  badTag.instanceProperties.tags = { items: ['Not_A_Tag'] };
  const ebt = await rejects(gce.instances.bulkInsert({ project, zone, requestId: randomUUID(), requestBody: badTag }));
  check('a network tag that is not RFC 1035: 400', ebt && ebt.status === 400, ebt?.response?.data);
  await gce.instances.delete({ project, zone, instance: 'tag-0001', requestId: randomUUID() });
  const fdel = await gce.firewalls.delete({ project, firewall: tenantRule.name, requestId: randomUUID() });
  check('firewalls.delete returns a global Operation', fdel.data.kind === 'compute#operation', fdel.data);
  const fgone = await rejects(gce.firewalls.get({ project, firewall: tenantRule.name }));
  check('firewalls.get after the delete: 404', fgone && fgone.status === 404, fgone?.response?.data);
}

try {
  await main();
} catch (e) {
  failed++;
  console.error('FAIL: unexpected', e?.response?.data ?? e);
}
console.log(`gce-node: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
