// Spend: GET /v1/spend?by=project&format=json names the org's projects with spend;
// GET /v1/spend?project=ID&by=day&format=json gives each one's days. The chart
// (SVG, stacked by project) and the table show those integers; the CSV holds the
// API's own amount strings.
'use strict';

const COLORS = ['#1f5fbf', '#e07b00', '#2e9e4f', '#b3261e', '#7a4fc1', '#0f8b8d', '#9c6b30', '#d14d9e'];
let report = null; // { org, projects: [{name, id, total_micros, total, days: [{key, amount_micros, amount}]}] }

function query(extra) {
  const q = new URLSearchParams({ org: ISC.org(), format: 'json' });
  for (const k of ['from', 'to', 'billing']) {
    const v = document.getElementById(k).value;
    if (v) q.set(k, v);
  }
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  return '/v1/spend?' + q.toString();
}

// Spend is for the org's finance users and admins: anyone else sees only the refusal,
// not filters and an empty table under it.
const READERS = ['finance', 'admin', 'operator'];
function refuse(why) {
  document.getElementById('report').hidden = true;
  ISC.showError('error', why);
}

async function load(org) {
  report = null;
  ISC.clear(document.getElementById('chart-box'));
  ISC.clear(document.getElementById('legend'));
  ISC.clear(document.querySelector('#spend tbody'));
  ISC.clear(document.querySelector('#spend tfoot'));
  document.getElementById('status').textContent = '';
  if (!org) return;
  if (!READERS.includes(ISC.role())) {
    refuse(new Error('Your role in ' + org + ' (' + (ISC.role() || 'none') + ') does not read its ' +
      'money: the Spend page is for its finance users and admins.'));
    return;
  }
  document.getElementById('report').hidden = false;
  try {
    const byProject = await ISC.api('GET', query({ by: 'project' }));
    const projects = [];
    for (const row of byProject.rows) {
      const days = await ISC.api('GET', query({ by: 'day', project: row.id }));
      projects.push({ name: row.key, id: row.id, total_micros: row.amount_micros, total: row.amount,
        days: days.rows });
    }
    report = { org, projects, total_micros: byProject.total_micros, total: byProject.total };
    ISC.showError('error', null);
  } catch (e) {
    if (e.status === 403) refuse(e);
    else ISC.showError('error', e);
    return;
  }
  draw();
}

function draw() {
  const days = [...new Set(report.projects.flatMap((p) => p.days.map((d) => d.key)))].sort();
  const perDay = new Map(days.map((d) => [d, 0]));
  for (const p of report.projects) for (const d of p.days) perDay.set(d.key, perDay.get(d.key) + d.amount_micros);
  // The axis runs to a round amount above the largest day, in round steps.
  const ticks = ISC.moneyTicks(Math.max(1, ...perDay.values()), 4);
  const max = ticks.top;

  const W = 1000, H = 320, L = 90, R = 10, T = 12, B = 40;
  const svg = ISC.el('svg', { class: 'chart', id: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': 'Spend per project by day', 'data-total-micros': report.total_micros });
  const plotH = H - T - B;
  // Axis labels at round amounts, with the places their step needs (the bars and the
  // table keep every amount exact).
  for (let v = 0; v <= max; v += ticks.step) {
    const y = T + plotH - (plotH * v) / max;
    svg.appendChild(ISC.el('line', { x1: L, x2: W - R, y1: y, y2: y, stroke: '#e3e7eb' }));
    svg.appendChild(ISC.el('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'tick',
      'data-micros': v }, ISC.money(v, ticks.decimals)));
  }
  const slot = days.length ? (W - L - R) / days.length : 0;
  const bw = Math.max(2, Math.min(60, slot * 0.7));
  days.forEach((day, i) => {
    const x = L + slot * i + (slot - bw) / 2;
    let y = T + plotH;
    report.projects.forEach((p, pi) => {
      const d = p.days.find((r) => r.key === day);
      if (!d || d.amount_micros <= 0) return;
      const h = (plotH * d.amount_micros) / max;
      y -= h;
      svg.appendChild(ISC.el('rect', { x, y, width: bw, height: Math.max(h, 0.5),
        fill: COLORS[pi % COLORS.length], class: 'bar', 'data-project': p.name,
        'data-day': day, 'data-micros': d.amount_micros },
      ISC.el('title', {}, p.name + ' ' + day + ': ' + ISC.money(d.amount_micros))));
    });
    if (days.length <= 31 || i % Math.ceil(days.length / 31) === 0) {
      svg.appendChild(ISC.el('text', { x: x + bw / 2, y: H - B + 16, 'text-anchor': 'middle' },
        day.slice(5)));
    }
  });
  if (!days.length) {
    svg.appendChild(ISC.el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' },
      'No spend in this range'));
  }
  document.getElementById('chart-box').appendChild(svg);

  const legend = document.getElementById('legend');
  report.projects.forEach((p, pi) => legend.appendChild(ISC.el('span', { 'data-project': p.name }, [
    ISC.el('span', { class: 'swatch sw' + (pi % COLORS.length) }), p.name + ' ', ISC.el('code', {}, p.id),
    ' ' + ISC.money(p.total_micros)])));

  const tbody = document.querySelector('#spend tbody');
  for (const day of days) {
    for (const p of report.projects) {
      const d = p.days.find((r) => r.key === day);
      if (!d) continue;
      tbody.appendChild(ISC.el('tr', {}, [ISC.el('td', {}, day), ISC.el('td', {}, p.name),
        ISC.el('td', { class: 'num', 'data-micros': d.amount_micros }, ISC.money(d.amount_micros))]));
    }
  }
  const foot = document.querySelector('#spend tfoot');
  for (const p of report.projects) {
    foot.appendChild(ISC.el('tr', { class: 'project-total', 'data-project': p.name }, [
      ISC.el('td', {}, 'Total'), ISC.el('td', {}, p.name),
      ISC.el('td', { class: 'num', 'data-micros': p.total_micros }, ISC.money(p.total_micros))]));
  }
  foot.appendChild(ISC.el('tr', { class: 'grand-total' }, [ISC.el('td', {}, 'Total'),
    ISC.el('td', {}, report.org), ISC.el('td', { class: 'num', 'data-micros': report.total_micros },
      ISC.money(report.total_micros))]));
  document.getElementById('status').textContent = ISC.plural(report.projects.length, 'project') +
    ', ' + ISC.plural(days.length, 'day') + ', ' + ISC.money(report.total_micros) + ' in all';
}

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
function csvField(v) {
  const s = String(v);
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

document.getElementById('csv').addEventListener('click', () => {
  if (!report) return;
  const lines = ['day,project,project_id,amount,amount_micros'];
  for (const p of report.projects) {
    for (const d of p.days) {
      lines.push([d.key, p.name, p.id, d.amount, d.amount_micros].map(csvField).join(','));
    }
  }
  const blob = new Blob([lines.join('\r\n') + '\r\n'], { type: 'text/csv' });
  const a = ISC.el('a', { href: URL.createObjectURL(blob),
    download: 'spend-' + report.org + '-by-day.csv' });
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
});
document.getElementById('filters').addEventListener('submit', (ev) => {
  ev.preventDefault();
  load(ISC.org());
});

ISC.page('spend.html', load);
