// Datasets: GET /v1/datasets?org= (every role), read again every 2 s while one is
// Created or Caching; admins POST /v1/datasets (with the dataset's own keys) and
// DELETE /v1/datasets/{id} after a confirmation. Values go in as text only.
'use strict';

let poll = null;
let removing = null;
let pages = 1;

function admin() { return ['admin', 'operator'].includes(ISC.role()); }

function progress(d) {
  if (d.state === 'Available') return ISC.el('span', {}, '100%');
  if (d.state !== 'Caching' || !d.size_bytes) return ISC.el('span', { class: 'muted' }, '');
  const pct = Math.floor((d.cached_bytes * 100) / d.size_bytes);
  return ISC.el('span', {}, [
    ISC.el('progress', { max: d.size_bytes, value: d.cached_bytes }),
    ' ' + pct + '%']);
}

function credentials(c) {
  if (c.startsWith('sealed:')) return 'its own keys (' + c.slice(7) + ')';
  return c === 'broker' ? "the broker's" : c;
}

async function load(org) {
  const tbody = document.querySelector('#datasets tbody');
  const isAdmin = admin();
  document.getElementById('admin').hidden = !isAdmin;
  // An org's admin must give the dataset its own keys; only the operator may leave them
  // out (the broker's own credentials), as the API says.
  const operator = ISC.role() === 'operator';
  document.getElementById('add-akid').required = !operator;
  document.getElementById('add-secret').required = !operator;
  document.getElementById('keys-hint').textContent = operator
    ? "As the operator you may leave the keys empty: the broker's own AWS credentials are used."
    : '';
  if (!org) { ISC.clear(tbody); return; }
  const list = [];
  let after = null;
  try {
    // The listing comes a page at a time (X-Isc-Next names the next one): the first
    // page, and one more for each press of "More", read again on every refresh.
    for (let i = 0; i < pages; i++) {
      const q = after ? '&after=' + encodeURIComponent(after) : '';
      const resp = await ISC.api('GET', '/v1/datasets?org=' + encodeURIComponent(org) + q,
        undefined, { raw: true });
      list.push(...await resp.json());
      after = resp.headers.get('X-Isc-Next');
      if (!after) break;
    }
    ISC.showError('error', null);
  } catch (e) {
    ISC.clear(tbody);
    ISC.showError('error', e);
    return;
  }
  if (org !== ISC.org()) return; // the organisation changed while this was asked
  document.getElementById('more').hidden = !after;
  ISC.clear(tbody);
  for (const d of list) {
    const cells = [
      ISC.el('td', {}, d.name),
      ISC.el('td', {}, [ISC.el('code', {}, d.id), ISC.copyButton(d.id)]),
      ISC.el('td', {}, [ISC.el('span', { class: 'badge ds-' + d.state.toLowerCase() }, d.state),
        d.reason ? ISC.el('div', { class: 'muted reason' }, d.reason) : null]),
      ISC.el('td', { class: 'progress' }, progress(d)),
      ISC.el('td', { class: 'num' }, String(d.size_bytes)),
      ISC.el('td', {}, [ISC.el('code', {}, d.uri), d.folder ? ' (folder)' : '']),
      ISC.el('td', {}, credentials(d.credentials || '')),
    ];
    let rm = null;
    if (isAdmin) {
      // The API refuses to remove a dataset while it is being cached.
      rm = ISC.el('button', { type: 'button', class: 'danger remove',
        disabled: d.state === 'Caching',
        title: d.state === 'Caching' ? 'wait until it is Available or Failed' : null }, 'Remove…');
      rm.addEventListener('click', () => {
        removing = d;
        document.getElementById('c-name').textContent = d.name;
        document.getElementById('c-org').textContent = d.org;
        document.getElementById('confirm').showModal();
      });
    }
    cells.push(ISC.el('td', {}, rm));
    tbody.appendChild(ISC.el('tr', { 'data-dataset': d.name, 'data-id': d.id,
      'data-state': d.state, 'data-cached': d.cached_bytes }, cells));
  }
  // Live while something is on its way; quiet once everything is settled.
  const moving = list.some((d) => d.state === 'Created' || d.state === 'Caching');
  if (moving && !poll) {
    poll = ISC.every(2000, () => load(ISC.org()));
  } else if (!moving && poll) {
    poll();
    poll = null;
  }
}

document.getElementById('confirm').addEventListener('close', async () => {
  const d = removing;
  removing = null;
  if (document.getElementById('confirm').returnValue !== 'yes' || !d) return;
  try {
    await ISC.api('DELETE', '/v1/datasets/' + encodeURIComponent(d.id));
    document.getElementById('status').textContent = 'Removed dataset ' + d.name;
    ISC.showError('error', null);
  } catch (e) {
    ISC.showError('error', e);
  }
  load(ISC.org());
});

document.getElementById('add').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const v = (id) => document.getElementById(id).value.trim();
  const body = { org: ISC.org(), uri: v('add-uri') };
  for (const [id, key] of [['add-name', 'name'], ['add-etag', 'etag'],
    ['add-version', 'version_id'], ['add-volume', 'volume_size']]) {
    if (v(id)) body[key] = v(id);
  }
  const secret = document.getElementById('add-secret');
  const token = document.getElementById('add-token');
  if (v('add-akid') || secret.value) {
    body.credentials = { access_key_id: v('add-akid'), secret_access_key: secret.value };
    if (token.value) body.credentials.session_token = token.value;
  }
  // The keys leave the form now: nothing keeps them once the request is made.
  secret.value = '';
  token.value = '';
  const button = document.getElementById('add-submit');
  button.disabled = true;
  document.getElementById('status').textContent = 'Checking ' + body.uri + ' with S3…';
  try {
    const d = await ISC.api('POST', '/v1/datasets', body);
    document.getElementById('status').textContent =
      'Added dataset ' + d.name + ' (' + d.id + '), ' + d.state + ': iscd caches it now';
    ISC.showError('error', null);
    for (const id of ['add-uri', 'add-name', 'add-etag', 'add-version', 'add-volume', 'add-akid']) {
      document.getElementById(id).value = '';
    }
  } catch (e) {
    document.getElementById('status').textContent = '';
    ISC.showError('error', e);
  } finally {
    delete body.credentials;
    button.disabled = false;
  }
  load(ISC.org());
});

document.getElementById('more').addEventListener('click', () => { pages++; load(ISC.org()); });

ISC.page('datasets.html', (org) => { pages = 1; load(org); });
