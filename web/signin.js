// Sign-in: the token is checked with GET /v1/whoami before it is kept.
'use strict';

document.getElementById('signin').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = document.getElementById('token');
  const t = input.value.trim();
  try {
    await ISC.api('GET', '/v1/whoami', undefined, { token: t });
    ISC.setToken(t);
    input.value = '';
    location.replace('burst.html');
  } catch (e) {
    ISC.showError('error', e.status === 401 ? new Error('That token was refused: ' + e.message) : e);
  }
});
if (ISC.token()) location.replace('burst.html');
