// What the browser tests beside the viewer's share: a steerd on a free port (STEERD_BIN, scratch
// data directory), a static file server for pages that are not the server's own (a game's
// origin, allowed on /ws with --allowed-origins), and a headless Chromium (Debian's
// /usr/bin/chromium via playwright-core) that loads nothing from elsewhere.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttp } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, '../..');
export const BIN = process.env.STEERD_BIN || join(root, 'target/release/steerd');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

export async function until(what, fn, timeoutMs = 10000, everyMs = 50) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A scratch directory, removed by cleanup(). */
export function scratchDir(name) {
  return mkdtempSync(join(tmpdir(), `steerd-${name}-`));
}

/** Starts steerd on a free port: {base, rest(method, path, body), stop(), log()}. */
export async function startSteerd(scratch, extra = [], adminToken = null) {
  assert.ok(existsSync(BIN), `steerd binary not found at ${BIN} (set STEERD_BIN)`);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const args = ['--listen', `127.0.0.1:${port}`, '--data-dir', join(scratch, `data-${port}`), '--scenarios-dir', join(root, 'scenarios'), ...extra];
  if (adminToken) args.push('--admin-token', adminToken);
  const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' } });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  await until('the server to answer /health', async () => {
    if (proc.exitCode !== null) throw new Error(`steerd exited (${proc.exitCode}):\n${log}`);
    try { return (await fetch(`${base}/health`)).ok; } catch { return false; }
  }, 15000);
  const rest = async (method, path, body) => {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (adminToken) headers.Authorization = `Bearer ${adminToken}`;
    const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  const stop = async () => {
    if (proc.exitCode !== null) return;
    proc.kill('SIGTERM');
    await Promise.race([new Promise((r) => proc.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
    if (proc.exitCode === null) proc.kill('SIGKILL');
  };
  return { base, port, rest, stop, log: () => log };
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css', '.jslib': 'text/plain; charset=utf-8', '.json': 'application/json' };

/**
 * Serves files on a free port: `mounts` maps a URL prefix ('/sdk/') to a directory; `pages` maps
 * an exact path to {type, body}. Returns {origin, close()}.
 */
export async function staticServer(mounts, pages = {}) {
  const srv = createHttp((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const page = pages[path];
    if (page) {
      res.writeHead(200, { 'Content-Type': page.type, 'Cache-Control': 'no-store' });
      return res.end(page.body);
    }
    for (const [prefix, dir] of Object.entries(mounts)) {
      if (!path.startsWith(prefix)) continue;
      const file = normalize(join(dir, path.slice(prefix.length)));
      if (!file.startsWith(resolve(dir) + sep) || !existsSync(file)) break;
      res.writeHead(200, { 'Content-Type': TYPES[extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store' });
      return res.end(readFileSync(file));
    }
    res.writeHead(404);
    res.end('not found');
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { origin: `http://127.0.0.1:${srv.address().port}`, close: () => new Promise((r) => srv.close(r)) };
}

/** A headless Chromium page; `errors` collects page errors, console errors and outside requests. */
export async function launchPage(scratch, viewport = { width: 1280, height: 800 }) {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} not found (apt-get install chromium)`);
  const context = await chromium.launchPersistentContext(join(scratch, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    viewport,
    timeout: 20000,
  });
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(10000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  await context.route((url) => url.hostname !== '127.0.0.1', (r) => {
    errors.push(`external request: ${r.request().url()}`);
    return r.abort();
  });
  return { context, page, errors };
}

export function cleanup(dir) {
  if (dir) rmSync(dir, { recursive: true, force: true });
}
