// Live handoff against two real steerd processes: a player with a view and agents on server A,
// the world handed off to server B; the client follows `moved` by itself (reconnect, resume,
// resubscribe), keeps its player and agents, its view goes on with B's ticks, and it commands
// its agents there. The game code only sees the `moved` event.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '../dist/index.js';
import { startServer, until } from './server.mjs';

const SECRET = 'sdk-handoff-cluster-secret-0123';
let a, b;
before(async () => {
  a = await startServer({ args: ['--persistence', '--cluster-secret', SECRET] });
  b = await startServer({ args: ['--persistence', '--cluster-secret', SECRET] });
});
after(async () => { if (a) await a.stop(); if (b) await b.stop(); });

test('a client follows its world to another server and keeps its agents', async () => {
  await a.rest('POST', '/worlds', { name: 'moving' });
  const client = await connect(a.base);
  const moved = [];
  const reconnects = [];
  client.on('moved', (w, to) => moved.push([w, to]));
  client.on('reconnect', (w, resumed) => reconnects.push(resumed));
  try {
    const player = client.playerId;
    const { view } = await client.subscribe('moving', { type: 'whole_world' });
    const { agents } = await client.spawn('moving', { group: 'mine', count: 3, area: { type: 'circle', x: 40, y: 40, radius: 5 }, behaviors: [{ behavior: { type: 'wander' }, weight: 1, priority: 0 }] });
    await until('the agents in the view, moving', () => agents.every((id) => view.agent(id)) && view.latestTick > 0);
    const tickOnA = view.latestTick;
    const r = await a.rest('POST', '/worlds/moving/handoff', { to: b.base });
    assert.equal(r.client_url, `ws://127.0.0.1:${b.port}/ws`);
    await until('the client resumed on B', () => reconnects.length > 0);
    assert.deepEqual(moved, [['moving', r.client_url]]);
    assert.deepEqual(reconnects, [true], 'the session resumed (same player)');
    assert.equal(client.playerId, player);
    assert.ok(client.welcome.worlds.some((w) => w.name === 'moving'));
    // The view goes on with B's ticks, the agents still in it.
    await until('ticks from B', () => view.latestTick > r.tick + 5 && agents.every((id) => view.agent(id)));
    assert.ok(view.latestTick > tickOnA);
    assert.deepEqual([...client.mine('moving')].sort(), [...agents].sort());
    assert.equal((await client.moveTo('moving', agents, { x: 60, y: 60 })).type, 'ok');
    const onB = await b.rest('GET', '/worlds/moving');
    assert.ok(onB.agents >= 3);
    await assert.rejects(a.rest('GET', '/worlds/moving'), /410/);
  } finally {
    client.close();
  }
});
