// Projects: GET /v1/projects?org= (every role); admins POST /v1/projects and /v1/budgets.
'use strict';

async function load(org) {
  const tbody = document.querySelector('#projects tbody');
  ISC.clear(tbody);
  const admin = ['admin', 'operator'].includes(ISC.role());
  document.getElementById('admin').hidden = !admin;
  if (!org) return;
  let list;
  try {
    list = await ISC.apiAll('/v1/projects?org=' + encodeURIComponent(org));
    ISC.showError('error', null);
  } catch (e) {
    ISC.showError('error', e);
    return;
  }
  const sel = ISC.clear(document.getElementById('budget-project'));
  for (const p of list) {
    tbody.appendChild(ISC.el('tr', { 'data-project': p.id }, [
      ISC.el('td', {}, p.name),
      ISC.el('td', {}, [ISC.el('code', {}, p.id), ISC.copyButton(p.id)]),
      ISC.el('td', { class: 'num', 'data-micros': p.budget_micros },
        p.budget_micros === null || p.budget_micros === undefined ? 'none'
          : ISC.money(p.budget_micros)),
    ]));
    sel.appendChild(ISC.el('option', { value: p.name }, p.name));
  }
}

document.getElementById('add').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const name = document.getElementById('add-name');
  try {
    const p = await ISC.api('POST', '/v1/projects', { org: ISC.org(), name: name.value.trim() });
    document.getElementById('status').textContent = 'Added project ' + p.name + ' (' + p.id + ')';
    name.value = '';
    ISC.showError('error', null);
  } catch (e) {
    ISC.showError('error', e);
  }
  load(ISC.org());
});

document.getElementById('budget').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const text = document.getElementById('budget-amount').value.trim();
  const micros = text === '' ? null : ISC.parseDollars(text);
  if (text !== '' && micros === null) {
    ISC.showError('error', new Error('"' + text + '" is not an amount in dollars (e.g. 500 or 12.50)'));
    return;
  }
  try {
    const r = await ISC.api('POST', '/v1/budgets', { org: ISC.org(),
      project: document.getElementById('budget-project').value, budget_micros: micros });
    document.getElementById('status').textContent = r.budget_micros === null
      ? 'Removed the budget of ' + r.name : 'Budget of ' + r.name + ': ' + ISC.money(r.budget_micros);
    ISC.showError('error', null);
  } catch (e) {
    ISC.showError('error', e);
  }
  load(ISC.org());
});

ISC.page('projects.html', load);
