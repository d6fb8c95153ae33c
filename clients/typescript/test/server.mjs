// Starts a real steerd (STEERD_BIN, default target/release/steerd) on a free loopback port with
// a scratch data directory, and talks REST to it. Used by the end-to-end test.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const BIN = process.env.STEERD_BIN || join(root, 'target/release/steerd');

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

export async function until(what, fn, timeoutMs = 15000, everyMs = 50) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * `adminToken`: started with `--admin-token` (REST calls then send it as a bearer token).
 * `playerSecret`: started with `--player-jwt-secret` (player tokens required: `mintToken`);
 * without it the server runs in dev mode (a client without a token is an anonymous player).
 * `args`: more flags (e.g. `--persistence`, `--cluster-secret`).
 */
export async function startServer({ adminToken, playerSecret, args = [] } = {}) {
  if (!existsSync(BIN)) throw new Error(`steerd binary not found at ${BIN} (set STEERD_BIN)`);
  const scratch = mkdtempSync(join(tmpdir(), 'steerd-sdk-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const proc = spawn(BIN, ['--listen', `127.0.0.1:${port}`, '--data-dir', join(scratch, 'data'), '--scenarios-dir', join(root, 'scenarios'), ...(adminToken ? ['--admin-token', adminToken] : []), ...(playerSecret ? ['--player-jwt-secret', playerSecret] : []), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' },
  });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  await until('steerd to answer /health', async () => {
    if (proc.exitCode !== null) throw new Error(`steerd exited (${proc.exitCode}):\n${log}`);
    try { return (await fetch(`${base}/health`)).ok; } catch { return false; }
  });
  const rest = async (method, path, body) => {
    const r = await fetch(base + path, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        ...(adminToken ? { Authorization: `Bearer ${adminToken}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  const stop = async () => {
    if (proc.exitCode === null) {
      proc.kill('SIGTERM');
      await Promise.race([new Promise((r) => proc.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
    rmSync(scratch, { recursive: true, force: true });
  };
  // A player JWT as the game's backend would issue it, minted by `steerd token`.
  const mintToken = (sub, role = 'player') => {
    if (!playerSecret) throw new Error('mintToken needs a server started with playerSecret');
    return execFileSync(BIN, ['token', '--sub', sub, '--role', role, '--ttl', '1h', '--secret', playerSecret], { encoding: 'utf8' }).trim();
  };
  return { base, port, rest, stop, mintToken, log: () => log };
}
