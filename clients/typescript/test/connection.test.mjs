// Connection life cycle against a real steerd (through the loopback proxy of netcut.mjs): connect
// errors carry a code and the URL, `retryFirstConnect` waits for a server that is not up yet,
// and the `disconnect` event tells a client close, a server close (with its code) and a network
// loss apart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { connect, ConnectError } from '../dist/index.js';
import { until } from './server.mjs';
import { proxiedServer } from './netcut.mjs';

const t = proxiedServer('conn');

const FAST = { minDelayMs: 50, maxDelayMs: 100 };

/** A loopback port nobody listens on. */
function deadPort() {
  return new Promise((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

test('connecting to a dead port rejects with ConnectError: code unreachable, the URL, the close code', async () => {
  const port = await deadPort();
  await assert.rejects(connect(`http://127.0.0.1:${port}`), (e) => {
    assert.ok(e instanceof ConnectError, String(e));
    assert.equal(e.code, 'unreachable');
    assert.equal(e.url, `ws://127.0.0.1:${port}/ws`);
    assert.equal(e.closeCode, 1006);
    assert.match(e.message, new RegExp(`ws://127\\.0\\.0\\.1:${port}/ws`));
    return true;
  });
  // With retries, the attempts are counted and it still ends.
  await assert.rejects(connect(`http://127.0.0.1:${port}`, { retryFirstConnect: true, reconnect: { ...FAST, maxAttempts: 2 } }), (e) => e.code === 'unreachable' && /after 3 attempts/.test(e.message));
});

test('a refusal at Hello is a ConnectError with the server\'s code, the field and the URL', async () => {
  await assert.rejects(connect(t.net.base, { token: 'wrong' }), (e) => e instanceof ConnectError && e.code === 'unauthorized' && e.field === 'token' && e.url.endsWith('/ws'));
});

test('retryFirstConnect: connect waits for the server to come up', async () => {
  t.net.cut();
  const disconnects = [];
  const p = connect(t.net.base, { token: t.srv.mintToken('late'), retryFirstConnect: true, reconnect: FAST });
  let settled = false;
  p.then(() => { settled = true; }, () => { settled = true; });
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(settled, false, 'still trying while the network is cut');
  t.net.heal();
  const client = await p;
  try {
    client.on('disconnect', (d) => disconnects.push(d));
    assert.equal(client.playerId, 'late');
  } finally {
    client.close();
  }
  assert.deepEqual(disconnects.map((d) => [d.cause, d.willReconnect]), [['client', false]], 'close() reports a client close');
});

test('disconnect causes: dropSocket is the client, a cut is the network, a kick is the server with its code', async () => {
  const world = 'conn-causes';
  await t.srv.rest('POST', '/worlds', { name: world });
  const client = await connect(t.net.base, { token: t.srv.mintToken('dave'), reconnect: FAST });
  const seen = [];
  client.on('disconnect', (d) => seen.push(d));
  const reconnects = () => new Promise((r) => { const off = client.on('reconnect', () => { off(); r(); }); });
  try {
    let back = reconnects();
    client.dropSocket();
    await back;
    assert.equal(seen.at(-1).cause, 'client');
    assert.equal(seen.at(-1).willReconnect, true);

    back = reconnects();
    t.net.cut();
    await until('the cut noticed', () => seen.length >= 2);
    t.net.heal();
    await back;
    // (Each failed attempt during the cut is a network disconnect too.)
    assert.ok(seen.slice(1).every((d) => d.cause === 'network' && d.code === 1006), JSON.stringify(seen.slice(1)));

    await client.subscribe(world);
    await client.spawn(world, { group: 'dave', count: 1, area: { type: 'circle', x: 50, y: 50, radius: 1 } });
    const n = seen.length;
    back = reconnects();
    await t.srv.rest('DELETE', `/worlds/${world}/players/dave`);
    await back;
    const kicked = seen[n];
    assert.equal(kicked.cause, 'server', JSON.stringify(kicked));
    assert.ok(kicked.code >= 1000 && kicked.code !== 1005 && kicked.code !== 1006, `the server's close code: ${kicked.code}`);
  } finally {
    client.close();
  }
});
