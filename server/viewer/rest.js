// REST calls to the server, and how their errors reach the user. Owns the admin token (kept in
// sessionStorage) that both REST and the stream's Hello send.

import { $, V } from './state.js';
import { logEvent } from './status.js';
import { selectedWorld } from './world.js';

/** This module's own state. */
const own = {
  token: sessionStorage.getItem('steerd-token') || '',
  needsToken: false,
};

/** The admin token ('' for none). */
export const token = () => own.token;

/** Sets the admin token ('' clears it), kept for this tab's session. */
export function setToken(t) {
  own.token = t;
  if (t) sessionStorage.setItem('steerd-token', t);
  else sessionStorage.removeItem('steerd-token');
}

// REST

export async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (own.token) headers.Authorization = `Bearer ${own.token}`;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!r.ok) {
    if (r.status === 401 || r.status === 403) showTokenField(true);
    const msg = data && data.message ? data.message : `${r.status} ${r.statusText}`;
    const err = new Error(`${method} ${path}: ${msg}`);
    err.status = r.status;
    throw err;
  }
  return data;
}

export const wpath = (suffix = '') => `/worlds/${encodeURIComponent(selectedWorld().name)}${suffix}`;

export function fail(e) {
  console.error(e);
  V.errors.push(String(e.message || e));
  toast(String(e.message || e));
  logEvent(String(e.message || e), 'err');
}

let toastTimer = 0;
export function toast(text, info = false) {
  const t = $('toast');
  t.textContent = text;
  t.className = info ? 'info' : '';
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, info ? 2000 : 5000);
}

export function showTokenField(needed) {
  own.needsToken = own.needsToken || needed;
  $('token-box').hidden = !own.needsToken && !own.token;
  if (needed && !own.token) $('token').focus();
}
