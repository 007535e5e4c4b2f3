// Experiments: GET /v1/experiments (what the caller may see), one experiment's
// events (/events?after=), the last 100 lines of rank 0 (/logs?tail=100, then
// from the offset reached) while it runs, and POST /cancel after a confirmation.
'use strict';

const LOG_LINES = 100;
let all = [];
let selected = null; // { id, afterEvent, logOffset, logLines, final }
let stopDetail = null;

function matches(e) {
  const mode = document.getElementById('mode').value;
  const state = document.getElementById('state').value;
  return e.org === ISC.org() && (!mode || e.compute_mode === mode) && (!state || e.status === state);
}

function render() {
  const tbody = document.querySelector('#experiments tbody');
  ISC.clear(tbody);
  const shown = all.filter(matches);
  for (const e of shown) {
    const open = ISC.el('button', { type: 'button', class: 'open', 'data-id': e.id }, 'Details');
    open.addEventListener('click', () => select(e.id));
    tbody.appendChild(ISC.el('tr', { 'data-id': e.id, 'data-status': e.status,
      class: selected && selected.id === e.id ? 'selected' : null }, [
      ISC.el('td', { class: 'name' }, e.name),
      ISC.el('td', {}, ISC.el('code', {}, e.id)),
      ISC.el('td', { class: 'project', title: e.project_id }, e.project || e.project_id),
      ISC.el('td', { class: 'launched-by' }, e.launched_by || 'operator'),
      ISC.el('td', {}, e.compute_mode),
      ISC.el('td', {}, ISC.el('span', { class: 'badge ' + e.status, title: e.status_reason }, e.status)),
      ISC.el('td', { class: 'num' }, e.gpus),
      ISC.el('td', {}, e.shape),
      // "settling": ended, but a node's last period is not charged yet (not the final cost).
      ISC.el('td', { class: 'num', 'data-micros': e.cost_micros,
        'data-settling': e.cost_settling ? '1' : null,
        title: e.cost_settling ? 'still settling: a node\'s last period is not charged yet' : null },
      ISC.money(e.cost_micros) + (e.cost_settling ? ' (settling)' : '')),
      ISC.el('td', {}, ISC.when(e.created_at_ms)),
      ISC.el('td', {}, open),
    ]));
  }
  document.getElementById('empty').hidden = shown.length > 0;
}

// The listing comes a page at a time (X-Isc-Next names the next one): the first
// page, and one more for each press of "More", read again on every refresh.
let pages = 1;
let more = false;

async function load() {
  try {
    const rows = [];
    let after = null;
    for (let i = 0; i < pages; i++) {
      const q = after ? '?after=' + encodeURIComponent(after) : '';
      const resp = await ISC.api('GET', '/v1/experiments' + q, undefined, { raw: true });
      rows.push(...await resp.json());
      after = resp.headers.get('X-Isc-Next');
      if (!after) break;
    }
    all = rows;
    more = !!after;
    ISC.showError('error', null);
  } catch (e) {
    all = [];
    more = false;
    ISC.showError('error', e);
  }
  render();
  document.getElementById('more').hidden = !more;
}

function detailStatus(status, reason, final) {
  const b = document.getElementById('d-status');
  b.textContent = status;
  b.className = 'badge ' + status;
  document.getElementById('d-reason').textContent = reason || '';
  document.getElementById('cancel').hidden = final;
}

async function pollEvents(s) {
  const r = await ISC.api('GET', '/v1/experiments/' + encodeURIComponent(s.id) +
    '/events?after=' + s.afterEvent);
  if (selected !== s) return;
  const ol = document.getElementById('events');
  for (const ev of r.events) {
    ol.appendChild(ISC.el('li', { 'data-kind': ev.kind }, [
      ISC.el('time', {}, ISC.when(ev.at_ms)), ISC.el('strong', {}, ev.kind), ' ', ev.message]));
    s.afterEvent = Math.max(s.afterEvent, ev.id);
  }
  s.final = r.final;
  detailStatus(r.status, r.status_reason, r.final);
}

async function pollLog(s) {
  const base = '/v1/experiments/' + encodeURIComponent(s.id) + '/logs?rank=0&';
  const resp = await ISC.api('GET', base + (s.logOffset === null ? 'tail=' + LOG_LINES
    : 'offset=' + s.logOffset), undefined, { raw: true });
  const text = await resp.text();
  if (selected !== s) return;
  s.logOffset = Number(resp.headers.get('X-Isc-Offset')) || 0;
  s.logText = (s.logText + text).split('\n').slice(-(LOG_LINES + 1)).join('\n');
  const pre = document.getElementById('log');
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.textContent = s.logText || (resp.headers.get('X-Isc-Missing') === '1'
    ? '(rank 0 has written nothing yet)' : '');
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

async function refreshDetail(s) {
  try {
    await pollEvents(s);
    await pollLog(s);
  } catch (e) {
    ISC.showError('error', e);
  }
  if (s.final && stopDetail) { stopDetail(); stopDetail = null; }
}

function select(id) {
  const e = all.find((x) => x.id === id);
  if (!e) return;
  if (stopDetail) stopDetail();
  selected = { id, afterEvent: 0, logOffset: null, logText: '', final: false, name: e.name };
  document.getElementById('detail').hidden = false;
  document.getElementById('d-name').textContent = e.name;
  document.getElementById('d-id').textContent = e.id;
  ISC.clear(document.getElementById('events'));
  document.getElementById('log').textContent = '';
  detailStatus(e.status, e.status_reason, false);
  render();
  const s = selected;
  refreshDetail(s).then(() => {
    if (!s.final && selected === s) stopDetail = ISC.every(2000, () => refreshDetail(s));
  });
}

document.getElementById('cancel').addEventListener('click', () => {
  if (!selected) return;
  document.getElementById('c-name').textContent = selected.name;
  document.getElementById('c-id').textContent = selected.id;
  document.getElementById('confirm').showModal();
});
document.getElementById('confirm').addEventListener('close', async () => {
  const d = document.getElementById('confirm');
  if (d.returnValue !== 'yes' || !selected) return;
  const s = selected;
  try {
    await ISC.api('POST', '/v1/experiments/' + encodeURIComponent(s.id) + '/cancel');
    document.getElementById('status').textContent = 'Cancel requested for ' + s.id;
  } catch (e) {
    ISC.showError('error', e);
  }
  load();
});
for (const id of ['mode', 'state']) document.getElementById(id).addEventListener('change', render);
document.getElementById('more').addEventListener('click', () => { pages++; load(); });

let polling = false;
ISC.page('experiments.html', () => {
  if (stopDetail) { stopDetail(); stopDetail = null; }
  selected = null;
  pages = 1;
  document.getElementById('detail').hidden = true;
  load();
  // Live status: the list is read again every 2 s while the tab is visible.
  if (!polling) { polling = true; ISC.every(2000, load); }
});
