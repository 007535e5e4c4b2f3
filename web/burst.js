// Burst: GET /v1/shapes ranks the catalog for a GPU count, as the broker would (isc shapes).
// The shapes this broker cannot place (no [providers.X] in iscd's config.toml, a region it
// does not list, no credentials) come last, marked with the API's "why", as the CLI's
// PLACEABLE column says it, and without a Copy button: a launch file naming only them is
// refused.
'use strict';

const GPU_TYPES = ['H100', 'H200', 'A100', 'A100-80GB', 'L4', 'L40S', 'A10G', 'T4', 'V100', 'B200'];

// The risk cell: each known part with its source (Spot Advisor band, placement score, OCI
// capacity report, this broker's history), as `isc shapes` prints it; the title has ages.
function riskText(r) {
  const parts = [];
  const title = [];
  if (r.band) {
    parts.push('band ' + r.band.label + ' (Spot Advisor)');
    title.push('band fetched ' + ISC.age(r.band.age_s) + ' ago');
  }
  if (r.score) {
    parts.push('score ' + r.score.score + '/10 for ' + r.score.target_capacity + ' nodes' +
      (r.score.zone ? ' in ' + r.score.zone : '') + ' (placement score)');
    title.push('score fetched ' + ISC.age(r.score.age_s) + ' ago');
  }
  if (r.capacity) {
    parts.push(r.capacity.status + ' ' + r.capacity.available + ' (OCI capacity report)');
    title.push('report fetched ' + ISC.age(r.capacity.age_s) + ' ago');
  }
  if (r.history) {
    parts.push(r.history.interruptions_30d + ' interruptions in ' + r.history.node_hours_30d +
      ' node-hours, 30 days (this broker)');
  }
  if (!parts.length) parts.push(r.rate_source === 'on-demand' ? 'on-demand' : 'unknown');
  title.push('model: ' + r.rate_source + ', q ' + r.q.toFixed(2) + ' (' + r.q_source + '), factor ' +
    r.factor.toFixed(4));
  return { text: parts.join('; '), title: title.join('; ') };
}

// The mode's cost per unit of work: expected in mode expected, plain otherwise.
function costOf(s, mode) {
  const v = mode === 'expected' ? s.expected_cost_micros : s.work_cost_micros;
  return v === undefined ? null : v;
}

async function rank() {
  const q = new URLSearchParams();
  const gpus = document.getElementById('gpus').value;
  q.set('gpus', gpus);
  for (const k of ['provider', 'gpu_type', 'market', 'limit', 'rank']) {
    const v = document.getElementById(k).value.trim();
    if (v) q.set(k, v);
  }
  if (document.getElementById('placeable').checked) q.set('placeable', '1');
  const tbody = document.querySelector('#shapes tbody');
  ISC.showError('error', null);
  let r;
  try {
    r = await ISC.api('GET', '/v1/shapes?' + q.toString());
  } catch (e) {
    ISC.showError('error', e);
    return;
  }
  ISC.clear(tbody);
  document.getElementById('warnings').textContent = r.warnings.join(' ');
  let placeable = 0;
  for (const s of r.shapes) {
    // The price's age and where it came from (catalog, gcp-billing-catalog, aws-spot-history, ...).
    const age = ISC.age(s.price_age_s) + (s.price_stale ? ' (stale)' : '') + ' ' +
      (s.price_source || 'catalog');
    const ok = s.placeable !== false;
    if (ok) placeable++;
    const id = [ISC.el('code', { class: 'shape-id' }, s.id)];
    if (ok) id.push(ISC.copyButton(s.id));
    tbody.appendChild(ISC.el('tr', { 'data-shape': s.id, 'data-placeable': ok ? 'yes' : 'no',
      class: ok ? null : 'unplaceable' }, [
      ISC.el('td', { class: 'num' }, s.rank),
      ISC.el('td', {}, id),
      ISC.el('td', {}, s.provider + ' ' + s.region),
      ISC.el('td', {}, s.gpu_type),
      ISC.el('td', { class: 'num' }, s.gpus_per_node),
      ISC.el('td', {}, s.nnodes + ' × ' + s.nproc),
      ISC.el('td', {}, s.spot ? 'spot' : 'on-demand'),
      ISC.el('td', { class: 'num', 'data-micros': s.node_price_micros }, ISC.money(s.node_price_micros)),
      ISC.el('td', { class: 'num', 'data-micros': s.cluster_price_micros },
        ISC.money(s.cluster_price_micros)),
      ISC.el('td', { class: s.price_stale ? 'stale' : null,
        title: s.price_source + ' price of ' + ISC.when(s.price_as_of_ms) }, age),
      ISC.el('td', { class: 'num', title: s.throughput_source },
        s.throughput === null ? 'unknown' : s.throughput.toFixed(2)),
      ISC.el('td', { class: 'risk', title: riskText(s.risk).title }, riskText(s.risk).text),
      ISC.el('td', { class: 'num', title: r.rank === 'expected' ? 'expected cost per A100-hour of work'
        : 'cost per A100-hour of work' }, costOf(s, r.rank) === null ? 'unknown' : ISC.money(costOf(s, r.rank))),
      ISC.el('td', { class: ok ? 'placeable' : 'why' }, ok ? 'yes' : 'no: ' + (s.why || '')),
    ]));
  }
  const n = r.shapes.length;
  document.getElementById('status').textContent =
    n + (n === 1 ? ' shape' : ' shapes') + ' for ' + gpus + ' GPUs' +
    (placeable < n ? ' (' + placeable + ' of them can be placed by this broker)' : '');
}

const dl = document.getElementById('gpu-types');
for (const t of GPU_TYPES) dl.appendChild(ISC.el('option', { value: t }));
document.getElementById('filters').addEventListener('submit', (ev) => {
  ev.preventDefault();
  rank();
});
ISC.page('burst.html', () => rank());
