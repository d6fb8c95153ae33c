// End to end against a real steerd: connect as a player (a JWT minted by `steerd token`), spawn,
// MoveTo, DestinationReached, drop the socket, reconnect resuming the session (same
// player, so MoveTo on the same agents succeeds), continue, and the view's agent table equals
// REST /snapshot at the end. Binary (protocol v4: cells messages) and JSON (per-cell frames)
// encodings; a subscription with every_n_ticks 4. Then: dev mode (anonymous players),
// a resume refused after a kick, queued commands, bad tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, WorldView } from '../dist/index.js';
import { startServer, until } from './server.mjs';

let srv;
const ADMIN = 'sdk-e2e-admin-token';
const SECRET = 'sdk-e2e-player-jwt-secret-0123456789abcdef';
before(async () => { srv = await startServer({ adminToken: ADMIN, playerSecret: SECRET }); });
after(async () => { if (srv) await srv.stop(); });

const sortById = (l) => [...l].sort((a, b) => a.id - b.id);
/** The most a clock estimate can be off by from its Pong samples, in ms: half the round trip of
 * the worst sample `clock.ts` accepts (2× the best, or the best + its default 30 ms slack). */
const pongError = (clock) => Math.max(2 * clock.bestRttMs, clock.bestRttMs + 30) / 2;

async function scenario(encoding) {
  const world = `sdk-${encoding}`;
  await srv.rest('POST', '/worlds', { name: world });
  const player = `alice-${encoding}`;
  const client = await connect(srv.base, { encoding, token: srv.mintToken(player) });
  const errors = [];
  const resyncs = [];
  client.on('error', (e) => errors.push(String(e.message ?? JSON.stringify(e))));
  client.on('resync', (w, r) => resyncs.push(`${w}: ${r}`));
  const reached = new Set();
  client.on('destination_reached', (agent, w) => { if (w === world) reached.add(agent); });
  try {
    assert.equal(client.welcome.protocol_version, 11);
    assert.equal(client.playerId, player);
    assert.equal(client.role, 'player');
    assert.match(client.resumeToken, /^[0-9a-f]{32}$/);
    assert.ok(client.welcome.session_grace_secs > 0);
    const firstResume = client.resumeToken;
    const sub = await client.subscribe(world, { type: 'whole_world' });
    assert.equal(sub.type, 'subscribed');
    assert.ok(sub.cells.length > 0);
    const { view } = sub;
    // The whole world: every cell (protocol v7: one run in binary, a plain array in JSON).
    assert.deepEqual(sub.cells, [...Array(view.info.cols * view.info.rows).keys()]);
    // every_n_ticks 0 is refused by the server, naming the field (the subscription stays).
    await assert.rejects(client.subscribe(world, { type: 'whole_world' }, { everyNTicks: 0 }), (e) => e.code === 'invalid_field' && /every_n_ticks/.test(e.field ?? ''));

    const spawned = await client.spawn(world, { group: 'units', count: 3, area: { type: 'circle', x: 30, y: 30, radius: 4 } });
    assert.equal(spawned.type, 'spawned');
    assert.equal(spawned.agents.length, 3);
    const ids = spawned.agents;
    await until('the spawned agents in the view', () => ids.every((id) => view.agent(id)));

    // Walk to a point (~16 units: long enough to be a walk, short enough not to idle the suite);
    // every agent reports DestinationReached.
    assert.equal((await client.moveTo(world, ids, { x: 45, y: 36 }, { stoppingDistance: 1 })).type, 'ok');
    await until('destination_reached for every agent', () => ids.every((id) => reached.has(id)), 30000);
    const before = sortById(view.agents());
    assert.equal(before.length, 3);

    // An error outcome rejects with its code and field.
    await assert.rejects(client.moveTo('no-such-world', ids, { x: 1, y: 1 }), (e) => e.code === 'unknown_world');

    // Drop the socket: the view keeps its table during the drop, and the client reconnects with
    // Hello{resume}: the server hands it the same session.
    const reconnected = new Promise((r) => client.on('reconnect', (w, resumed) => r(resumed)));
    client.dropSocket();
    await until('the client to notice the drop', () => client.state !== 'open');
    assert.equal(view.size, 3, 'state kept across the drop');
    assert.equal(await reconnected, true, 'the session was resumed');
    assert.equal(client.reconnects, 1);
    assert.equal(client.resumes, 1);
    assert.equal(client.playerId, player);
    assert.equal(client.role, 'player');
    assert.notEqual(client.resumeToken, firstResume, 'each Welcome brings a new resume token');
    await until('keyframes after the reconnect', () => view.keyframes > 1 && ids.every((id) => view.agent(id)));

    // Continue: the resumed player still owns its agents, so MoveTo on them succeeds.
    reached.clear();
    assert.equal((await client.moveTo(world, ids, { x: 36, y: 48 }, { stoppingDistance: 1 })).type, 'ok');
    await until('destination_reached after the reconnect', () => ids.every((id) => reached.has(id)), 30000);

    // The clock is synced from Ping/Pong and sample() renders every agent near its state.
    await until('a clock sample', () => view.clock.synced);
    // (Frames stop when nothing moves, so the server's tick is read over REST to compare.)
    const t0 = performance.now();
    const info = await srv.rest('GET', `/worlds/${world}`);
    const t1 = performance.now();
    const st = view.serverTick((t0 + t1) / 2);
    // Off by at most the REST call's time and half the round trip of an accepted Pong sample
    // (at most 2× the best one, or the best + 30 ms: `clock.ts`).
    const slack = 20 + ((t1 - t0 + pongError(view.clock)) * view.tickRate) / 1000;
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
    // Protocol v4: binary connections get cells messages, JSON connections per-cell frames.
    if (encoding === 'binary') assert.ok(view.cellsMessages > 0, 'cells messages on a binary connection');
    else assert.equal(view.cellsMessages, 0, 'no cells message on a JSON connection');
    assert.deepEqual(errors, []);
    assert.deepEqual(resyncs, []);
  } finally {
    client.close();
  }
}

test('binary: connect as a player, spawn, MoveTo, destination_reached, drop, resume, MoveTo the same agents, table == /snapshot', () => scenario('binary'));
test('json: the same over the JSON encoding', () => scenario('json'));

test('every_n_ticks 4: deltas only on multiples of 4, span 4, checksums verified, the table == /snapshot', async () => {
  const world = 'sdk-every4';
  await srv.rest('POST', '/worlds', { name: world });
  // Record every cells message the views of this world apply (before any can arrive).
  const seen = [];
  const orig = WorldView.prototype.applyCells;
  WorldView.prototype.applyCells = function (m, t) {
    if (this.info.name === world) seen.push({ tick: m.tick, span: m.span, checksum: m.checksum, deltas: m.entries.filter((e) => 'delta' in e).length });
    return orig.call(this, m, t);
  };
  const client = await connect(srv.base, { token: srv.mintToken('every4') });
  const resyncs = [];
  client.on('resync', (w, r) => resyncs.push(`${w}: ${r}`));
  try {
    const { agents } = await client.spawn(world, {
      group: 'wanderers', count: 12, area: { type: 'circle', x: 50, y: 50, radius: 10 },
      behaviors: [{ behavior: { type: 'wander' } }],
    });
    const sub = await client.subscribe(world, { type: 'whole_world' }, { everyNTicks: 4 });
    const { view } = sub;
    assert.equal(view.everyNTicks, 4);
    await until('agents in the view', () => agents.every((id) => view.agent(id)));
    // Wandering agents change every tick: a message every 4th tick, each a multiple of 4.
    await until('20 cells messages', () => seen.length >= 20, 20000);
    const ticks = () => seen.map((m) => `${m.tick}${m.deltas ? '' : 'k'}`).join(' ');
    const moving = seen.filter((m) => m.deltas > 0);
    assert.ok(moving.length >= 15, `messages with delta entries: ${ticks()}`);
    assert.ok(moving.every((m) => m.tick % 4 === 0), `delta entries only on multiples of 4: ${ticks()}`);
    assert.ok(seen.every((m) => m.span === 4), 'span 4');
    const gaps = moving.slice(1).map((m, i) => m.tick - moving[i].tick);
    assert.ok(gaps.every((g) => g > 0 && g % 4 === 0), `gaps: ${gaps.join(' ')}`);
    assert.ok(gaps.filter((g) => g === 4).length >= gaps.length / 2, `mostly every 4th tick: ${gaps.join(' ')}`);
    assert.ok(seen.some((m) => m.checksum !== null), 'some messages carry a checksum (verified by the view)');
    assert.equal(view.span, 4);
    assert.equal(view.cellsMessages, seen.length);
    // Pause, bring the world to a multiple of 4 (the last state sent), and the table is exact.
    await srv.rest('PATCH', `/worlds/${world}`, { paused: true });
    const { tick } = await srv.rest('GET', `/worlds/${world}`);
    if (tick % 4 !== 0) await srv.rest('POST', `/worlds/${world}/step`, { ticks: 4 - (tick % 4) });
    let snap;
    await until('the view to equal /snapshot', async () => {
      snap = await srv.rest('GET', `/worlds/${world}/snapshot`);
      return JSON.stringify(view.agents()) === JSON.stringify(sortById(snap.quantized));
    }, 10000, 100);
    assert.equal(snap.tick % 4, 0);
    assert.deepEqual(view.agents(), sortById(snap.quantized));
    assert.equal(view.cellsTick, seen[seen.length - 1].tick);
    assert.deepEqual(resyncs, []);
    // PROTOCOL.md §6.8: keyframe entries come when owed, at any tick (k = a message with
    // keyframe entries only); every message after the first keyframes is on a multiple of 4.
    const first = seen.findIndex((m) => m.deltas > 0);
    assert.ok(first >= 0 && seen.slice(first).every((m) => m.tick % 4 === 0), `messages after the keyframes on multiples of 4: ${ticks()}`);
  } finally {
    WorldView.prototype.applyCells = orig;
    client.close();
  }
});

test('bad player tokens are refused at Hello: connect rejects with unauthorized, no reconnect', async () => {
  await assert.rejects(connect(srv.base, { token: 'wrong' }), (e) => e.code === 'unauthorized' && e.field === 'token');
  // Signed with another secret.
  const other = await startServer({ playerSecret: 'another-secret-of-enough-length-0123456789' });
  try {
    await assert.rejects(connect(srv.base, { token: other.mintToken('mallory') }), (e) => e.code === 'unauthorized');
  } finally {
    await other.stop();
  }
});

test('commands sent while reconnecting are queued and answered', async () => {
  const world = 'sdk-queue';
  await srv.rest('POST', '/worlds', { name: world });
  const client = await connect(srv.base, { token: srv.mintToken('queue') });
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

test('events about your agents reach every connection of the player, subscribed or not', async () => {
  const world = 'sdk-fanout';
  await srv.rest('POST', '/worlds', { name: world });
  const token = srv.mintToken('bob');
  const a = await connect(srv.base, { token });
  const b = await connect(srv.base, { token });
  try {
    assert.equal(b.playerId, 'bob');
    const { agents } = await a.spawn(world, { group: 'bob', count: 1, area: { type: 'circle', x: 20, y: 20, radius: 1 } });
    const seen = new Set();
    b.on('destination_reached', (agent, w) => { if (w === world) seen.add(agent); });
    // The second connection (never subscribed) commands the first one's agent: same player.
    assert.equal((await b.moveTo(world, agents, { x: 30, y: 25 }, { stoppingDistance: 1 })).type, 'ok');
    await until('destination_reached on the unsubscribed connection', () => seen.has(agents[0]), 30000);
  } finally {
    a.close();
    b.close();
  }
});

test('a MoveTo to a walled-off target ends in unreachable, with the distance, never destination_reached', async () => {
  const world = 'sdk-unreachable';
  await srv.rest('POST', '/worlds', { name: world });
  // A closed box of walls round (80, 80).
  for (const [a, b] of [[[70, 70], [90, 70]], [[90, 70], [90, 90]], [[90, 90], [70, 90]], [[70, 90], [70, 70]]]) {
    await srv.rest('POST', `/worlds/${world}/walls`, { a: { x: a[0], y: a[1] }, b: { x: b[0], y: b[1] } });
  }
  const client = await connect(srv.base, { token: srv.mintToken('erin') });
  const ended = new Map();
  const reached = [];
  client.on('unreachable', (agent, distance, w) => { if (w === world) ended.set(agent, distance); });
  client.on('destination_reached', (agent, w) => { if (w === world) reached.push(agent); });
  try {
    const { agents } = await client.spawn(world, { group: 'erin', count: 2, area: { type: 'circle', x: 40, y: 40, radius: 2 } });
    assert.equal((await client.moveTo(world, agents, { x: 80, y: 80 }, { stoppingDistance: 1 })).type, 'ok');
    await until('unreachable for both agents', () => agents.every((id) => ended.has(id)), 30000);
    for (const id of agents) {
      const d = ended.get(id);
      // Outside the box (half-width 10), near its wall.
      assert.ok(d > 10 && d < 16, `agent ${id} stopped ${d} from the target`);
    }
    assert.deepEqual(reached, [], 'an unreachable order is not an arrival');
  } finally {
    client.close();
  }
});

test('a kicked player cannot resume: session_lost, then a new session of the same player', async () => {
  const world = 'sdk-kick';
  await srv.rest('POST', '/worlds', { name: world });
  const client = await connect(srv.base, { token: srv.mintToken('carol') });
  const lost = [];
  client.on('session_lost', (why) => lost.push(why));
  try {
    await client.subscribe(world);
    const { agents } = await client.spawn(world, { group: 'carol', count: 1, area: { type: 'circle', x: 50, y: 50, radius: 1 } });
    const reconnected = new Promise((r) => client.on('reconnect', (w, resumed) => r(resumed)));
    await srv.rest('DELETE', `/worlds/${world}/players/carol`);
    assert.equal(await reconnected, false, 'the resume was refused, a fresh session started');
    assert.equal(lost.length, 1);
    assert.equal(client.playerId, 'carol');
    // The orphan policy (despawn by default) applied at the kick: the agent is gone.
    await assert.rejects(client.moveTo(world, agents, { x: 60, y: 60 }), (e) => e.code === 'unknown_agent' || e.code === 'forbidden');
  } finally {
    client.close();
  }
});

test('dev mode: an anonymous player resumes after a drop and keeps its agents; another player may not command them', async () => {
  // No player secret: every client without a token is an anonymous player with a fresh id.
  const dev = await startServer();
  const world = 'sdk-owner';
  await dev.rest('POST', '/worlds', { name: world });
  const client = await connect(dev.base);
  const other = await connect(dev.base);
  try {
    assert.equal(client.role, 'player');
    assert.ok(client.playerId && client.playerId !== other.playerId, 'a fresh id per anonymous player');
    const id = client.playerId;
    await client.subscribe(world);
    const { agents } = await client.spawn(world, { group: 'mine', count: 1, area: { type: 'circle', x: 50, y: 50, radius: 1 } });
    assert.equal((await client.moveTo(world, agents, { x: 60, y: 60 })).type, 'ok');
    const reconnected = new Promise((r) => client.on('reconnect', (w, resumed) => r(resumed)));
    client.dropSocket();
    assert.equal(await reconnected, true);
    assert.equal(client.playerId, id, 'the same anonymous player after the resume');
    assert.equal((await client.moveTo(world, agents, { x: 70, y: 70 })).type, 'ok');
    await assert.rejects(other.moveTo(world, agents, { x: 10, y: 10 }), (e) => e.code === 'forbidden');
  } finally {
    client.close();
    other.close();
    await dev.stop();
  }
});

test('per-world tick rates (protocol v9): the Welcome carries each world\'s rate, a PATCHed rate is announced and the view\'s clock follows', async () => {
  await srv.rest('POST', '/worlds', { name: 'sdk-rate-a' });
  await srv.rest('POST', '/worlds', { name: 'sdk-rate-b' });
  await srv.rest('PATCH', '/worlds/sdk-rate-b', { tick_rate: 30 });
  const client = await connect(srv.base, { token: srv.mintToken('rates') });
  const announced = [];
  client.on('tick_rate', (hz, world) => announced.push([world, hz]));
  try {
    const rate = (name) => client.welcome.worlds.find((w) => w.name === name).tick_rate_hz;
    assert.equal(rate('sdk-rate-a'), 20);
    assert.equal(rate('sdk-rate-b'), 30);
    const a = (await client.subscribe('sdk-rate-a')).view;
    const b = (await client.subscribe('sdk-rate-b')).view;
    assert.equal(a.tickRate, 20);
    assert.equal(b.tickRate, 30, 'each view ticks at its world\'s rate');
    await srv.rest('PATCH', '/worlds/sdk-rate-a', { tick_rate: 10 });
    await until('the rate change announced', () => announced.some(([w]) => w === 'sdk-rate-a'));
    assert.deepEqual(announced.filter(([w]) => w === 'sdk-rate-a'), [['sdk-rate-a', 10]]);
    // (b's own change, made just before the connect, may be announced with its next tick.)
    assert.ok(announced.every(([w, hz]) => w === 'sdk-rate-a' || hz === 30), JSON.stringify(announced));
    assert.equal(a.tickRate, 10, 'the view\'s clock follows');
    assert.equal(b.tickRate, 30);
    assert.equal(rate('sdk-rate-a'), 10);
    // The clock runs at the new rate: its estimate (Pong samples of the first subscribed world,
    // a) tracks the server's tick.
    await client.spawn('sdk-rate-a', { group: 'w', count: 2, area: { type: 'circle', x: 50, y: 50, radius: 5 }, behaviors: [{ behavior: { type: 'wander' } }] });
    await until('the clock synced at the new rate', () => a.clock.synced, 10000);
    const t0 = performance.now();
    const info = await srv.rest('GET', '/worlds/sdk-rate-a');
    const t1 = performance.now();
    assert.equal(info.tick_rate, 10);
    const st = a.serverTick((t0 + t1) / 2);
    const slack = 5 + ((t1 - t0 + pongError(a.clock)) * 10) / 1000;
    assert.ok(Math.abs(st - info.tick) < slack, `server tick estimate ${st} vs REST ${info.tick} (±${slack})`);
    // A later Welcome carries the new rate.
    const other = await connect(srv.base, { token: srv.mintToken('rates2') });
    try {
      assert.equal(other.welcome.worlds.find((w) => w.name === 'sdk-rate-a').tick_rate_hz, 10);
    } finally {
      other.close();
    }
  } finally {
    client.close();
  }
});

test('group names (protocol v9): sample() names each agent\'s group, from the Subscribed answer and the groups event', async () => {
  const world = 'sdk-groups';
  await srv.rest('POST', '/worlds', { name: world });
  const client = await connect(srv.base, { token: srv.mintToken('groups') });
  try {
    const red = (await client.spawn(world, { group: 'red', count: 2, area: { type: 'circle', x: 30, y: 30, radius: 3 } })).agents;
    // (The table a Subscribed answer carries is the one last published: let a few ticks pass.)
    const { tick } = await srv.rest('GET', `/worlds/${world}`);
    await until('a few ticks', async () => (await srv.rest('GET', `/worlds/${world}`)).tick > tick + 2);
    const { view } = await client.subscribe(world);
    assert.ok(view.groups.includes('red'), `groups at subscribe: ${view.groups}`);
    await until('the red agents in the view', () => red.every((id) => view.agent(id)));
    // A group the world did not have yet: the groups event brings the new table.
    const blue = (await client.spawn(world, { group: 'blue', count: 1, area: { type: 'circle', x: 60, y: 60, radius: 1 } })).agents;
    await until('the blue agent in the view', () => blue.every((id) => view.agent(id)));
    await until('the new group table', () => view.groups.includes('blue'));
    // (sample() draws an agent once the render time, interpDelayMs behind, reaches it.)
    await until('every agent drawn', () => [...red, ...blue].every((id) => view.sample().some((s) => s.id === id)));
    const names = new Map(view.sample().map((s) => [s.id, s.groupName]));
    for (const id of red) assert.equal(names.get(id), 'red');
    for (const id of blue) assert.equal(names.get(id), 'blue');
    assert.equal(view.groups[view.agent(blue[0]).group], 'blue');
  } finally {
    client.close();
  }
});

test('sample() tells your agents from the others (mine), across a resume, until despawned', async () => {
  const world = 'sdk-mine';
  await srv.rest('POST', '/worlds', { name: world });
  const a = await connect(srv.base, { token: srv.mintToken('mine-a') });
  const b = await connect(srv.base, { token: srv.mintToken('mine-b') });
  try {
    const va = (await a.subscribe(world)).view;
    const vb = (await b.subscribe(world)).view;
    const ours = (await a.spawn(world, { group: 'a', count: 3, area: { type: 'circle', x: 30, y: 30, radius: 3 } })).agents;
    const theirs = (await b.spawn(world, { group: 'b', count: 2, area: { type: 'circle', x: 60, y: 60, radius: 2 } })).agents;
    const all = [...ours, ...theirs];
    await until('every agent drawn in both views', () => all.every((id) => va.sample().some((s) => s.id === id) && vb.sample().some((s) => s.id === id)));
    const mineOf = (v) => new Map(v.sample().map((s) => [s.id, s.mine]));
    for (const id of ours) { assert.equal(mineOf(va).get(id), true); assert.equal(mineOf(vb).get(id), false); }
    for (const id of theirs) { assert.equal(mineOf(va).get(id), false); assert.equal(mineOf(vb).get(id), true); }
    // A resume is the same player: still ours.
    const resumed = new Promise((r) => a.on('reconnect', (w, res) => r(res)));
    a.dropSocket();
    assert.equal(await resumed, true);
    await until('drawn again after the resume', () => ours.every((id) => va.sample().some((s) => s.id === id && s.mine)));
    // Despawned: no longer ours (and no longer drawn).
    assert.equal((await a.despawn(world, [ours[0]])).type, 'ok');
    assert.equal(a.mine(world).has(ours[0]), false);
    assert.deepEqual([...a.mine(world)].sort(), ours.slice(1).sort());
    // The other player despawns its own: our client hears the despawned event, and nothing of ours changes.
    assert.equal((await b.despawn(world, theirs)).type, 'ok');
    assert.equal(b.mine(world).size, 0);
    await until('their agents gone from our view', () => !va.sample().some((s) => theirs.includes(s.id)));
    assert.equal(va.sample().filter((s) => s.mine).length, 2);
  } finally {
    a.close();
    b.close();
  }
});
