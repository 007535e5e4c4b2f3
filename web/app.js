// The Control Plane's shared code: the token (sessionStorage, this tab only), the
// API client, the header with its organisation picker, and small DOM helpers.
// Every value from the API is put into the page with textContent or as an
// attribute value, never parsed as HTML. There is no innerHTML in these pages.
'use strict';

const ISC = (() => {
  const TOKEN_KEY = 'isc.token';
  const ORG_KEY = 'isc.org';
  const listeners = [];
  let whoami = null;
  let orgs = [];

  function token() { return sessionStorage.getItem(TOKEN_KEY); }

  function signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(ORG_KEY);
    location.replace('index.html');
  }

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  // One API call with the bearer token. Replies: parsed JSON, or text when asked.
  // A 401 (the token expired or was revoked) signs the tab out.
  async function api(method, path, body, opts) {
    const headers = { Authorization: 'Bearer ' + ((opts && opts.token) || token() || '') };
    const init = { method, headers, credentials: 'omit', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    const type = resp.headers.get('Content-Type') || '';
    if (!resp.ok) {
      let msg = resp.status + ' ' + resp.statusText;
      if (type.startsWith('application/json')) {
        try { const e = await resp.json(); if (e && e.error) msg = e.error; } catch (_) { /* keep */ }
      }
      if (resp.status === 401 && !(opts && opts.token)) signOut();
      throw new ApiError(resp.status, msg);
    }
    if (opts && opts.raw) return resp;
    return type.startsWith('application/json') ? resp.json() : resp.text();
  }

  // Every row of a listing that comes in pages (docs/api.md, "Pages"): follows
  // X-Isc-Next until the last page, so a page of the Control Plane shows them all.
  async function apiAll(path) {
    const sep = path.includes('?') ? '&' : '?';
    let rows = [], after = null;
    do {
      const q = sep + 'limit=1000' + (after ? '&after=' + encodeURIComponent(after) : '');
      const resp = await api('GET', path + q, undefined, { raw: true });
      rows = rows.concat(await resp.json());
      after = resp.headers.get('X-Isc-Next');
    } while (after);
    return rows;
  }

  // el('td', {class: 'num', title: x}, 'text' | Node | [children]): attributes are set
  // with setAttribute (values, not markup), text with textContent.
  function el(tag, attrs, content) {
    const svg = ['svg', 'g', 'rect', 'line', 'text', 'title', 'path'].includes(tag);
    const n = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag)
      : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) throw new Error('no inline handlers: ' + k);
      n.setAttribute(k, v === true ? '' : String(v));
    }
    append(n, content);
    return n;
  }
  function append(n, content) {
    if (content === undefined || content === null) return n;
    if (Array.isArray(content)) content.forEach((c) => append(n, c));
    else if (content instanceof Node) n.appendChild(content);
    else n.appendChild(document.createTextNode(String(content)));
    return n;
  }
  function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); return n; }

  // Integer micro-dollars, the pages' one rule for an amount (issue 47): "$" and the
  // exact amount with six places, as `isc spend` and the API's decimal strings write it, so
  // a column of amounts lines up and nothing is rounded: "$1499.965784", "$0.007440",
  // "-$5.000000". decimals (2..6) shortens it, for round values only (a chart's ticks):
  // the digits cut must be zeros. Digits only, never through a float.
  function money(micros, decimals) {
    const neg = micros < 0;
    const s = BigInt(Math.abs(micros)).toString().padStart(7, '0');
    const d = decimals === undefined ? 6 : decimals;
    return (neg ? '-$' : '$') + s.slice(0, s.length - 6) + '.' + s.slice(s.length - 6, s.length - 6 + d);
  }
  // Ticks of a money axis from 0 to at least max (micro-dollars): about `count` steps of
  // 1, 2 or 5 times a power of ten, so the labels are round amounts ($0.05, $0.10, ...),
  // never the data's own odd maximum. Returns { step, top, decimals } (decimals: what
  // the labels need, 2 to 6).
  function moneyTicks(max, count) {
    const raw = Math.max(1, Math.ceil(Math.max(1, max) / (count || 4)));
    let mag = 1;
    while (mag * 10 <= raw) mag *= 10;
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    let zeros = 0;
    for (let v = step; v % 10 === 0 && zeros < 6; v /= 10) zeros++;
    return { step, top: Math.ceil(Math.max(1, max) / step) * step, decimals: Math.min(6, Math.max(2, 6 - zeros)) };
  }
  // "1 project", "2 projects": a count and its noun, singular for one.
  function plural(n, noun, nouns) {
    return n + ' ' + (n === 1 ? noun : (nouns || noun + 's'));
  }
  // "12.5" or "$1,000" to micro-dollars; null when it is not an amount.
  function parseDollars(text) {
    const t = String(text).trim().replace(/^\$/, '').replace(/,/g, '');
    const m = /^(\d{1,12})(?:\.(\d{0,6}))?$/.exec(t);
    if (!m) return null;
    return Number(m[1]) * 1e6 + Number((m[2] || '').padEnd(6, '0'));
  }
  function age(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm';
    if (s < 172800) return Math.floor(s / 3600) + 'h';
    return Math.floor(s / 86400) + 'd';
  }
  function when(ms) {
    return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
  }

  // Copies text; the button says so (clipboard API, with the selection as fallback).
  async function copy(text, button) {
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch (_) {
      const ta = el('textarea', { class: 'offscreen', readonly: true }, text);
      document.body.appendChild(ta);
      ta.select();
      ok = document.execCommand('copy');
      ta.remove();
    }
    const status = document.getElementById('status');
    if (status) status.textContent = ok ? 'Copied ' + text : 'Could not copy ' + text;
    if (button) {
      button.textContent = ok ? 'Copied' : 'Copy failed';
      button.setAttribute('data-copied', ok ? text : '');
      setTimeout(() => { button.textContent = 'Copy'; }, 1500);
    }
    return ok;
  }
  function copyButton(text, label) {
    const b = el('button', { type: 'button', class: 'copy', 'data-copy': text,
      'aria-label': label || ('Copy ' + text) }, 'Copy');
    b.addEventListener('click', () => copy(text, b));
    return b;
  }

  function showError(where, e) {
    const n = typeof where === 'string' ? document.getElementById(where) : where;
    if (!n) return;
    n.textContent = e ? (e.message || String(e)) : '';
    n.hidden = !e;
  }

  function org() { return sessionStorage.getItem(ORG_KEY) || ''; }
  function isOperator() { return !!(whoami && whoami.operator); }
  // The caller's role in the chosen org: member, admin, finance; 'operator' for the operator.
  function role() {
    if (isOperator()) return 'operator';
    const m = (whoami && whoami.orgs || []).find((o) => o.org === org());
    return m ? m.role : '';
  }
  function onOrgChange(fn) { listeners.push(fn); }

  // The header of every signed-in page: navigation, organisation picker, user, sign-out.
  function header(active) {
    const pages = [
      ['burst.html', 'Burst', null],
      ['experiments.html', 'Experiments', ['member', 'admin', 'operator']],
      ['projects.html', 'Projects', null],
      ['datasets.html', 'Datasets', null],
      ['members.html', 'Members', ['admin', 'operator']],
      ['spend.html', 'Spend', ['finance', 'admin', 'operator']],
    ];
    const nav = el('nav', { 'aria-label': 'Pages' });
    for (const [href, label, roles] of pages) {
      const a = el('a', { href, 'data-roles': roles ? roles.join(' ') : null,
        'aria-current': href === active ? 'page' : null }, label);
      nav.appendChild(a);
    }
    const picker = el('select', { id: 'org', 'aria-label': 'Organisation' });
    const who = el('span', { id: 'who', class: 'who' });
    const out = el('button', { type: 'button', id: 'signout' }, 'Sign out');
    out.addEventListener('click', signOut);
    const bar = el('header', { class: 'top' }, [
      el('a', { class: 'brand', href: 'burst.html' }, 'isc Control Plane'), nav,
      el('label', { class: 'orgpick' }, ['Organisation ', picker]), who, out]);
    document.body.insertBefore(bar, document.body.firstChild);
    picker.addEventListener('change', () => {
      sessionStorage.setItem(ORG_KEY, picker.value);
      refreshNav(nav);
      listeners.forEach((fn) => fn(picker.value));
    });
    return { nav, picker, who };
  }

  function refreshNav(nav) {
    const r = role();
    for (const a of nav.querySelectorAll('a')) {
      const roles = a.getAttribute('data-roles');
      a.hidden = !!roles && !roles.split(' ').includes(r);
    }
    const rl = document.getElementById('role');
    if (rl) rl.textContent = r ? 'Your role in ' + org() + ': ' + r : '';
  }

  // Starts a signed-in page: no token, back to sign-in; else whoami, the orgs,
  // the header, then main(org) now and whenever the organisation changes.
  async function page(active, main) {
    if (!token()) { location.replace('index.html'); return; }
    const h = header(active);
    try {
      whoami = await api('GET', '/v1/whoami');
      orgs = await apiAll('/v1/orgs');
    } catch (e) {
      showError('error', e);
      return;
    }
    h.who.textContent = whoami.operator ? 'operator' : whoami.user;
    clear(h.picker);
    if (!orgs.length) h.picker.appendChild(el('option', { value: '' }, 'no organisation'));
    for (const o of orgs) h.picker.appendChild(el('option', { value: o.name }, o.name));
    if (!orgs.some((o) => o.name === org())) {
      sessionStorage.setItem(ORG_KEY, orgs.length ? orgs[0].name : '');
    }
    h.picker.value = org();
    refreshNav(h.nav);
    onOrgChange(main);
    document.body.setAttribute('data-ready', '1');
    main(org());
  }

  // Calls fn every ms while the tab is visible; returns a stop function.
  function every(ms, fn) {
    let stopped = false;
    let timer = null;
    const tick = async () => {
      if (stopped) return;
      if (!document.hidden) { try { await fn(); } catch (_) { /* shown by fn */ } }
      if (!stopped) timer = setTimeout(tick, ms);
    };
    timer = setTimeout(tick, ms);
    return () => { stopped = true; clearTimeout(timer); };
  }

  return { api, apiAll, ApiError, el, append, clear, money, moneyTicks, plural, parseDollars, age, when, copy, copyButton,
    showError, org, role, isOperator, onOrgChange, page, every, token, signOut,
    setToken: (t) => sessionStorage.setItem(TOKEN_KEY, t) };
})();
