// No ghost commands or subscriptions, against a real steerd behind a proxy that cuts the
// network: a command that times out while queued is never sent; one sent but unanswered is
// `outcome_unknown`; a refused subscription leaves no view and is never replayed; a world gone
// after a reconnect loses its view with a `view_removed` event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '../dist/index.js';
import { until } from './server.mjs';
import { proxiedServer } from './netcut.mjs';

const t = proxiedServer('ghost');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const FAST = { minDelayMs: 100, maxDelayMs: 200 };

async function positions(world, ids) {
  const snap = await t.srv.rest('GET', `/worlds/${world}/snapshot`);
  return ids.map((id) => snap.quantized.find((a) => a.id === id)?.pos);
}

async function waitTicks(world, n) {
  const { tick } = await t.srv.rest('GET', `/worlds/${world}`);
  await until(`${n} ticks of ${world}`, async () => (await t.srv.rest('GET', `/worlds/${world}`)).tick >= tick + n, 15000, 50);
}

test('a command that times out queued during a 2.5 s cut is never sent: the agents never act on it', async () => {
  const world = 'ghost-cmd';
  await t.srv.rest('POST', '/worlds', { name: world });
  const client = await connect(t.net.base, { token: t.srv.mintToken('ghost-cmd'), commandTimeoutMs: 1000, reconnect: FAST });
  try {
    const { agents } = await client.spawn(world, { group: 'g', count: 2, area: { type: 'points', points: [{ x: 20, y: 20 }, { x: 30, y: 20 }] } });
    await waitTicks(world, 5);
    const before = await positions(world, agents);
    const reconnected = new Promise((r) => client.on('reconnect', (w, resumed) => r(resumed)));
    const cutAt = Date.now();
    t.net.cut();
    await until('the client to see the cut', () => client.state === 'reconnecting');
    const moved = client.moveTo(world, agents, { x: 80, y: 80 });
    await assert.rejects(moved, (e) => e.code === 'timeout' && /dropped unsent/.test(e.message));
    assert.notEqual(client.state, 'open', 'still cut when the command timed out');
    await sleep(Math.max(0, 2500 - (Date.now() - cutAt)));
    t.net.heal();
    assert.equal(await reconnected, true, 'the session was resumed');
    await waitTicks(world, 40);
    assert.deepEqual(await positions(world, agents), before, 'the agents never acted on the timed-out command');
    // The session works: a command sent now is answered and acted on.
    assert.equal((await client.moveTo(world, agents, { x: 25, y: 40 })).type, 'ok');
    await until('the agents to move', async () => JSON.stringify(await positions(world, agents)) !== JSON.stringify(before), 10000, 100);
  } finally {
    t.net.heal();
    client.close();
  }
});

test('a command sent but unanswered within the timeout is outcome_unknown (here: it did run)', async () => {
  const world = 'ghost-unknown';
  await t.srv.rest('POST', '/worlds', { name: world });
  const client = await connect(t.net.base, { token: t.srv.mintToken('ghost-unknown'), commandTimeoutMs: 1000, reconnect: FAST });
  try {
    const { agents } = await client.spawn(world, { group: 'g', count: 1, area: { type: 'points', points: [{ x: 20, y: 20 }] } });
    await waitTicks(world, 5);
    const before = await positions(world, agents);
    t.net.hold();
    await assert.rejects(client.moveTo(world, agents, { x: 60, y: 20 }), (e) => e.code === 'outcome_unknown');
    assert.equal(client.state, 'open');
    t.net.release();
    await until('the held command to take effect', async () => JSON.stringify(await positions(world, agents)) !== JSON.stringify(before), 10000, 100);
  } finally {
    t.net.release();
    client.close();
  }
});

test('a refused subscription leaves no view and is never replayed; a refused change keeps the accepted one', async () => {
  const world = 'ghost-sub';
  await t.srv.rest('POST', '/worlds', { name: world });
  const client = await connect(t.net.base, { token: t.srv.mintToken('ghost-sub'), reconnect: FAST });
  const streamed = [];
  const onMessage = client.onMessage;
  client.onMessage = function (m) {
    if (m.type === 'cells' || m.type === 'keyframe' || m.type === 'delta') streamed.push(m.world);
    return onMessage.call(this, m);
  };
  try {
    await client.spawn(world, { group: 'w', count: 20, area: { type: 'circle', x: 50, y: 50, radius: 10 }, behaviors: [{ behavior: { type: 'wander' } }] });
    await assert.rejects(client.subscribe(world, { type: 'whole_world' }, { everyNTicks: 999 }), (e) => e.code === 'invalid_field' && e.field === 'every_n_ticks');
    assert.equal(client.view(world), undefined, 'no view for a refused subscription');
    const reconnected = new Promise((r) => client.on('reconnect', r));
    client.dropSocket();
    await reconnected;
    await waitTicks(world, 20);
    assert.equal(client.view(world), undefined);
    assert.deepEqual(streamed, [], 'nothing of the world streamed: the refused subscription was not replayed');

    // Accepted at every 2 ticks; a refused change to 999 leaves the view and its rate.
    const { view } = await client.subscribe(world, { type: 'whole_world' }, { everyNTicks: 2 });
    await assert.rejects(client.subscribe(world, { type: 'rect', min_x: 0, min_y: 0, max_x: 10, max_y: 10 }, { everyNTicks: 999 }), (e) => e.code === 'invalid_field');
    assert.equal(client.view(world), view);
    assert.equal(view.everyNTicks, 2);
    assert.deepEqual(view.area, { type: 'whole_world' });
    const again = new Promise((r) => client.on('reconnect', r));
    client.dropSocket();
    await again;
    const n = view.cellsMessages;
    await until('cells messages after the reconnect', () => view.cellsMessages > n + 3);
    assert.equal(view.span, 2, 'the reconnect replayed the accepted rate');
    assert.equal(view.size, 20, 'the accepted area (the whole world)');
  } finally {
    client.close();
  }
});

test('a world gone after a reconnect: its view is removed and cleared, with a view_removed event', async () => {
  const world = 'ghost-gone';
  await t.srv.rest('POST', '/worlds', { name: world });
  const client = await connect(t.net.base, { token: t.srv.mintToken('ghost-gone'), reconnect: FAST });
  const removed = [];
  client.on('view_removed', (w, why) => removed.push([w, why]));
  try {
    const { view } = await client.subscribe(world);
    const { agents } = await client.spawn(world, { group: 'g', count: 3, area: { type: 'circle', x: 50, y: 50, radius: 5 } });
    await until('agents in the view', () => agents.every((id) => view.agent(id)));
    const reconnected = new Promise((r) => client.on('reconnect', r));
    t.net.cut();
    await t.srv.rest('DELETE', `/worlds/${world}`);
    t.net.heal();
    await reconnected;
    assert.equal(removed.length, 1);
    assert.equal(removed[0][0], world);
    assert.match(removed[0][1], /gone/);
    assert.equal(client.view(world), undefined);
    assert.equal(view.size, 0);
    assert.deepEqual(view.sample(), []);
  } finally {
    t.net.heal();
    client.close();
  }
});
