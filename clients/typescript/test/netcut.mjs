// A loopback TCP proxy in front of a test server that can cut the network: `cut()` closes every
// connection through it and refuses new ones until `heal()`; `hold()` keeps connections up but
// holds back what clients send (the server hears nothing) until `release()` delivers it.
import { createServer, connect } from 'node:net';
import { before, after } from 'node:test';
import { startServer } from './server.mjs';

export async function startProxy(targetBase) {
  const target = new URL(targetBase);
  const pairs = new Set();
  let mode = 'pass';
  const server = createServer((c) => {
    if (mode === 'cut') { c.destroy(); return; }
    const u = connect(Number(target.port), target.hostname);
    const pair = { c, u, held: [] };
    pairs.add(pair);
    c.on('data', (d) => { if (mode === 'hold') pair.held.push(d); else u.write(d); });
    u.on('data', (d) => c.write(d));
    const end = () => { pairs.delete(pair); c.destroy(); u.destroy(); };
    c.on('close', end);
    u.on('close', end);
    c.on('error', end);
    u.on('error', end);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    cut() {
      mode = 'cut';
      for (const p of [...pairs]) { p.c.resetAndDestroy(); p.u.destroy(); }
    },
    heal() { mode = 'pass'; },
    hold() { mode = 'hold'; },
    release() {
      mode = 'pass';
      for (const p of pairs) for (const d of p.held.splice(0)) p.u.write(d);
    },
    async stop() {
      for (const p of [...pairs]) { p.c.destroy(); p.u.destroy(); }
      await new Promise((ok) => server.close(ok));
    },
  };
}

/**
 * A test file's real steerd (admin token + player secret) behind a proxy, started before its
 * tests and stopped after them: `t.srv`, `t.net` once started.
 */
export function proxiedServer(name) {
  const t = { srv: null, net: null };
  before(async () => {
    t.srv = await startServer({ adminToken: `sdk-${name}-admin-token`, playerSecret: `sdk-${name}-player-jwt-secret-0123456789abcdef` });
    t.net = await startProxy(t.srv.base);
  });
  after(async () => {
    if (t.net) await t.net.stop();
    if (t.srv) await t.srv.stop();
  });
  return t;
}
