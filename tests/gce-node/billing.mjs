// Mock fidelity: drives the mock cloud's Cloud Billing Catalog API (services.skus.list, see
// tests/mocks/mockcloud_lib/prices.py) with Google's own generated Node client, the
// cloudbilling v1 module of `googleapis` (the npm registry serves no @googleapis/cloudbilling;
// googleapis is the same generator's bundle and shares googleapis-common with
// @googleapis/compute). API key auth is the client's `auth: KEY` (sent as `key=`).
//
//   MOCK=http://127.0.0.1:PORT BILLING_KEY=... node billing.mjs
//
// Last line: "gce-billing: N passed, M failed".
import { google } from 'googleapis';

const MOCK = process.env.MOCK;
const KEY = process.env.BILLING_KEY || 'mock-billing-api-key';
const SERVICE = 'services/6F81-5844-456A';
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

async function control(body) {
  const r = await fetch(`${MOCK}/_mock/prices/api`, { method: 'POST', body: JSON.stringify(body) });
  return r.status;
}

async function rejects(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return e;
  }
}

const client = (auth) => google.cloudbilling({ version: 'v1', auth, rootUrl: `${MOCK}/`, retry: false });

// Google's client parses units as the proto3 JSON string of an int64 (it does not convert
// it), nanos as a number: dollars = units + nanos / 1e9 (google.type.Money).
const dollars = (m) => Number(BigInt(m.units || '0')) + (m.nanos || 0) / 1e9;

async function main() {
  const billing = client(KEY);

  // --- one reply with every SKU (the mock's default page) is the count to match
  const whole = await billing.services.skus.list({ parent: SERVICE, currencyCode: 'USD' });
  const total = whole.data.skus.length;
  check('one page holds every SKU by default', total > 20 && !whole.data.nextPageToken, {
    total, next: whole.data.nextPageToken,
  });

  // --- page through with a small cap: every nextPageToken is followed to the end
  const cap = 7;
  check('page cap set', (await control({ api: 'gcp-billing', page_cap: cap })) === 200);
  const seen = [];
  let pageToken;
  let pages = 0;
  let sizesOk = true;
  do {
    const r = await billing.services.skus.list({ parent: SERVICE, currencyCode: 'USD', pageToken });
    pages++;
    if (r.data.skus.length > cap || (r.data.nextPageToken && r.data.skus.length !== cap)) sizesOk = false;
    seen.push(...r.data.skus);
    pageToken = r.data.nextPageToken || undefined;
  } while (pageToken && pages < 1000);
  check('every page is at most the cap, full until the last', sizesOk);
  check('pages follow nextPageToken to the end', pages === Math.ceil(total / cap), { pages, total, cap });
  check('the paged SKU count equals the single reply', seen.length === total, { seen: seen.length, total });
  check('no SKU is repeated across pages', new Set(seen.map((s) => s.skuId)).size === total);

  // The client's own paging helper (pageSize asks for less than the cap)
  const small = await billing.services.skus.list({ parent: SERVICE, pageSize: 3 });
  check('pageSize below the cap is honoured', small.data.skus.length === 3 && small.data.nextPageToken);

  // --- a known SKU: its price parses as Google's client returns Money
  const t4 = seen.find((s) => s.description === 'Nvidia Tesla T4 GPU running in Americas');
  check('the T4 OnDemand Americas SKU is listed', t4 && t4.category.usageType === 'OnDemand', t4?.description);
  if (t4) {
    const expr = t4.pricingInfo[0].pricingExpression;
    const price = expr.tieredRates[0].unitPrice;
    check('units is an int64 string', typeof price.units === 'string' && /^-?\d+$/.test(price.units), price);
    check('nanos is an integer in [0, 1e9)', Number.isInteger(price.nanos) && price.nanos >= 0 && price.nanos < 1e9, price);
    check('T4 price parses to 0.35 USD/h', Math.abs(dollars(price) - 0.35) < 1e-9 && price.currencyCode === 'USD'
      && expr.usageUnit === 'h', { price, unit: expr.usageUnit });
    check('SKU name is parent/skus/skuId', t4.name === `${SERVICE}/skus/${t4.skuId}`, t4.name);
  }
  const big = seen.find((s) => s.description === 'A4 Nvidia B200 (1 gpu slice) running in EMEA');
  if (big) {
    const p = big.pricingInfo[0].pricingExpression.tieredRates[0].unitPrice;
    check('a price above a dollar splits into units and nanos', p.units === '13' && p.nanos === 585000000, p);
  } else {
    check('the A4 B200 EMEA SKU is listed', false);
  }

  // --- errors in Google's shape, as the client surfaces them
  const wrong = await rejects(client('not-the-key').services.skus.list({ parent: SERVICE }));
  check('a wrong key is 400 INVALID_ARGUMENT', wrong && wrong.status === 400
    && wrong.response?.data?.error?.status === 'INVALID_ARGUMENT'
    && /API key not valid/.test(wrong.message), { status: wrong?.status, data: wrong?.response?.data });
  const none = await rejects(client(undefined).services.skus.list({ parent: SERVICE }));
  check('no key is 403 PERMISSION_DENIED', none && none.status === 403
    && none.response?.data?.error?.status === 'PERMISSION_DENIED', { status: none?.status, data: none?.response?.data });
  const tok = await rejects(billing.services.skus.list({ parent: SERVICE, pageToken: 'bm90LWEtdG9rZW4' }));
  check('a token the server did not issue is 400 INVALID_ARGUMENT', tok && tok.status === 400
    && tok.response?.data?.error?.status === 'INVALID_ARGUMENT', { status: tok?.status, data: tok?.response?.data });
  const unknown = await rejects(billing.services.skus.list({ parent: 'services/0000-0000-0000' }));
  check('an unknown service id is 404 NOT_FOUND', unknown && unknown.status === 404
    && unknown.response?.data?.error?.status === 'NOT_FOUND', { status: unknown?.status, data: unknown?.response?.data });

  await control({ api: 'gcp-billing', page_cap: 5000 });
}

try {
  await main();
} catch (e) {
  failed++;
  console.error(`FAIL: unexpected error: ${e.stack || e}`);
}
console.log(`gce-billing: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
