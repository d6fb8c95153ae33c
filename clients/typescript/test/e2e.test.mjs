// End to end against a real steerd: connect, spawn, MoveTo, DestinationReached, drop the socket,
// reconnect (resubscribe; resume once the server speaks protocol v3), continue, and the view's
// agent table equals REST /snapshot at the end. Binary and JSON encodings.
//
// Protocol v2 has no session resume: agents belong to the connection that spawned them, so a
// plain client cannot command them after a reconnect (the last test pins that down). The main
// scenario therefore connects with the admin token; with v3 it runs as a player and resumes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '../dist/index.js';
import { startServer, until } from './server.mjs';

let srv;
const ADMIN = 'sdk-e2e-admin-token';
before(async () => { srv = await startServer({ adminToken: ADMIN }); });
after(async () => { if (srv) await srv.stop(); });

const sortById = (l) => [...l].sort((a, b) => a.id - b.id);

async function scenario(encoding) {
  const world = `sdk-${encoding}`;
  await srv.rest('POST', '/worlds', { name: world });
  const client = await connect(srv.base, { encoding, token: ADMIN });
  const errors = [];
  const resyncs = [];
  client.on('error', (e) => errors.push(String(e.message ?? JSON.stringify(e))));
  client.on('resync', (w, r) => resyncs.push(`${w}: ${r}`));
  const reached = new Set();
  client.on('destination_reached', (agent, w) => { if (w === world) reached.add(agent); });
  try {
    assert.equal(client.welcome.protocol_version, 2);
    const sub = await client.subscribe(world, { type: 'whole_world' });
    assert.equal(sub.type, 'subscribed');
    assert.ok(sub.cells.length > 0);
    const { view } = sub;
    await assert.rejects(client.subscribe(world, { type: 'whole_world' }, { everyNTicks: 2 }), /everyNTicks/);

    const spawned = await client.spawn(world, { group: 'units', count: 3, area: { type: 'circle', x: 30, y: 30, radius: 4 } });
    assert.equal(spawned.type, 'spawned');
    assert.equal(spawned.agents.length, 3);
    const ids = spawned.agents;
    await until('the spawned agents in the view', () => ids.every((id) => view.agent(id)));

    // Walk to a point; every agent reports DestinationReached.
    assert.equal((await client.moveTo(world, ids, { x: 70, y: 50 }, { stoppingDistance: 1 })).type, 'ok');
    await until('destination_reached for every agent', () => ids.every((id) => reached.has(id)), 30000);
    const before = sortById(view.agents());
    assert.equal(before.length, 3);

    // An error outcome rejects with its code and field.
    await assert.rejects(client.moveTo('no-such-world', ids, { x: 1, y: 1 }), (e) => e.code === 'unknown_world');

    // Drop the socket: the view keeps its table during the drop, and the client reconnects.
    const reconnected = new Promise((r) => client.on('reconnect', r));
    client.dropSocket();
    await until('the client to notice the drop', () => client.state !== 'open');
    assert.equal(view.size, 3, 'state kept across the drop');
    await reconnected;
    assert.equal(client.reconnects, 1);
    await until('keyframes after the reconnect', () => view.keyframes > 1 && ids.every((id) => view.agent(id)));

    // Continue: another walk after the reconnect.
    reached.clear();
    await client.moveTo(world, ids, { x: 40, y: 90 }, { stoppingDistance: 1 });
    await until('destination_reached after the reconnect', () => ids.every((id) => reached.has(id)), 30000);

    // The clock is synced from Ping/Pong and sample() renders every agent near its state.
    await until('a clock sample', () => view.clock.synced);
    // (Frames stop when nothing moves, so the server's tick is read over REST to compare.)
    const t0 = performance.now();
    const info = await srv.rest('GET', `/worlds/${world}`);
    const t1 = performance.now();
    const st = view.serverTick((t0 + t1) / 2);
    const slack = 20 + ((t1 - t0) * view.tickRate) / 1000;
    assert.ok(Math.abs(st - info.tick) < slack, `server tick estimate ${st} vs REST tick ${info.tick} (±${slack})`);
    const sampled = view.sample();
    assert.equal(sampled.length, 3);
    for (const s of sampled) {
      const a = view.agent(s.id);
      assert.ok(Number.isFinite(s.x) && Number.isFinite(s.y) && Number.isFinite(s.heading));
      assert.ok(Math.hypot(s.x - a.pos[0] * view.quant.pos_step, s.y - a.pos[1] * view.quant.pos_step) < 5, 'sampled near the latest state');
    }

    // Pause, then the agent table equals the server's quantized snapshot.
    await srv.rest('PATCH', `/worlds/${world}`, { paused: true });
    let snap;
    await until('the view to equal /snapshot', async () => {
      snap = await srv.rest('GET', `/worlds/${world}/snapshot`);
      return JSON.stringify(view.agents()) === JSON.stringify(sortById(snap.quantized));
    }, 10000, 100);
    assert.deepEqual(view.agents(), sortById(snap.quantized));
    assert.ok(view.latestTick <= snap.tick);
    assert.deepEqual(errors, []);
    assert.deepEqual(resyncs, []);
  } finally {
    client.close();
  }
}

test('binary: connect, spawn, MoveTo, destination_reached, drop, reconnect, continue, table == /snapshot', () => scenario('binary'));
test('json: the same over the JSON encoding', () => scenario('json'));

test('a wrong token is refused at Hello: connect rejects with the server\'s code, no reconnect', async () => {
  await assert.rejects(connect(srv.base, { token: 'wrong' }), (e) => e.code === 'forbidden');
});

test('commands sent while reconnecting are queued and answered', async () => {
  const world = 'sdk-queue';
  await srv.rest('POST', '/worlds', { name: world });
  const client = await connect(srv.base, { token: ADMIN });
  try {
    const { view } = await client.subscribe(world);
    const reconnected = new Promise((r) => client.on('reconnect', r));
    client.dropSocket();
    await until('reconnecting', () => client.state === 'reconnecting');
    const p = client.spawn(world, { group: 'late', count: 2, area: { type: 'rect', min_x: 10, min_y: 10, max_x: 20, max_y: 20 } });
    await reconnected;
    const r = await p;
    assert.equal(r.agents.length, 2);
    await until('the queued spawn in the view', () => r.agents.every((id) => view.agent(id)));
  } finally {
    client.close();
  }
});

test('protocol v2: without resume a reconnected plain client no longer owns its agents', async () => {
  // A server without an admin token: every session may spawn, and owns what it spawned.
  const open = await startServer();
  const world = 'sdk-owner';
  await open.rest('POST', '/worlds', { name: world });
  const client = await connect(open.base);
  try {
    await client.subscribe(world);
    const { agents } = await client.spawn(world, { group: 'mine', count: 1, area: { type: 'circle', x: 50, y: 50, radius: 1 } });
    assert.equal((await client.moveTo(world, agents, { x: 60, y: 60 })).type, 'ok');
    const reconnected = new Promise((r) => client.on('reconnect', r));
    client.dropSocket();
    await reconnected;
    // v3 (resume) turns this into 'ok': the resumed session keeps its agents.
    await assert.rejects(client.moveTo(world, agents, { x: 70, y: 70 }), (e) => e.code === 'forbidden');
  } finally {
    client.close();
    await open.stop();
  }
});
