// Members (admins): GET /v1/members?org=, POST /v1/members (add or change role),
// DELETE /v1/members?org=&user= after a confirmation.
'use strict';

const ROLES = ['member', 'admin', 'finance'];
let removing = null;

async function change(user, role) {
  try {
    await ISC.api('POST', '/v1/members', { org: ISC.org(), user, role });
    document.getElementById('status').textContent = user + ' is now ' + role;
    ISC.showError('error', null);
  } catch (e) {
    ISC.showError('error', e);
  }
  load(ISC.org());
}

async function load(org) {
  const tbody = ISC.clear(document.querySelector('#members tbody'));
  if (!org) return;
  let list;
  try {
    list = await ISC.apiAll('/v1/members?org=' + encodeURIComponent(org));
    ISC.showError('error', null);
    document.getElementById('add-panel').hidden = false;
  } catch (e) {
    ISC.showError('error', e);
    document.getElementById('add-panel').hidden = true;
    return;
  }
  for (const m of list) {
    const sel = ISC.el('select', { 'aria-label': 'Role of ' + m.user, 'data-user': m.user },
      ROLES.map((r) => ISC.el('option', { value: r, selected: r === m.role }, r)));
    const save = ISC.el('button', { type: 'button', class: 'save' }, 'Change role');
    save.addEventListener('click', () => change(m.user, sel.value));
    const rm = ISC.el('button', { type: 'button', class: 'danger remove' }, 'Remove…');
    rm.addEventListener('click', () => {
      removing = m.user;
      document.getElementById('c-user').textContent = m.user;
      document.getElementById('c-org').textContent = org;
      document.getElementById('confirm').showModal();
    });
    tbody.appendChild(ISC.el('tr', { 'data-user': m.user, 'data-role': m.role }, [
      ISC.el('td', {}, m.user),
      ISC.el('td', {}, [sel, save]),
      ISC.el('td', {}, ISC.when(m.created_at_ms)),
      ISC.el('td', {}, rm),
    ]));
  }
}

document.getElementById('confirm').addEventListener('close', async () => {
  const d = document.getElementById('confirm');
  const user = removing;
  removing = null;
  if (d.returnValue !== 'yes' || !user) return;
  try {
    await ISC.api('DELETE', '/v1/members?org=' + encodeURIComponent(ISC.org()) +
      '&user=' + encodeURIComponent(user));
    document.getElementById('status').textContent = 'Removed ' + user;
    ISC.showError('error', null);
  } catch (e) {
    ISC.showError('error', e);
  }
  load(ISC.org());
});

document.getElementById('add').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const u = document.getElementById('add-user');
  change(u.value.trim(), document.getElementById('add-role').value);
  u.value = '';
});

ISC.page('members.html', load);
