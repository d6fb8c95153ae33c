// Conformance: the SDK against the golden vectors of client-proto (the files the Rust tests use).
// Every NAME.hex/NAME.json pair decodes to its JSON twin and re-encodes to its bytes; every
// entry of invalid.json fails with its error kind; the recorded frame chain replays through
// CellMap and WorldView (packed fast path, decoded entries and JSON form) with every checksum;
// the protocol-4 cells messages (server_cells_*) replay in order the same way, each message's
// checksum verified.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  decodeServer, decodeServerBatch, decodeServerJson, decodeClient, encodeClient, encodeServer, CellMap, WorldView,
  checksum, resolveChanged, ProtoError, helloMessage, PROTOCOL_VERSION, ROLES, ERROR_CODES, applyCells, CellsTxn,
} from '../dist/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const dir = process.env.VECTORS_DIR ?? join(here, '../../../client-proto/tests/vectors');

const hex = (s) => Uint8Array.from(s.trim().match(/../g) ?? [], (h) => parseInt(h, 16));
const toHex = (b) => Buffer.from(b).toString('hex');
const readHex = (name) => hex(readFileSync(join(dir, `${name}.hex`), 'utf8'));
const readJson = (name) => JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
const readText = (name) => readFileSync(join(dir, `${name}.json`), 'utf8');

/** Deep-equal where JSON numbers written for an f32 compare after rounding to f32. */
function same(actual, expected, path = '$') {
  if (typeof expected === 'number') {
    assert.equal(typeof actual, 'number', `${path}: number expected, got ${JSON.stringify(actual)}`);
    assert.ok(actual === expected || actual === Math.fround(expected), `${path}: ${actual} != ${expected}`);
    return;
  }
  if (expected === null || typeof expected !== 'object') {
    assert.equal(actual, expected, `${path}`);
    return;
  }
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${path}: array expected`);
    assert.equal(actual.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => same(actual[i], e, `${path}[${i}]`));
    return;
  }
  assert.ok(actual && typeof actual === 'object', `${path}: object expected`);
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${path}: keys`);
  for (const k of Object.keys(expected)) same(actual[k], expected[k], `${path}.${k}`);
}

const files = readdirSync(dir);
const pairs = files.filter((f) => f.endsWith('.hex')).map((f) => f.slice(0, -4)).sort();
assert.ok(pairs.length > 0, `no vectors in ${dir}`);
for (const name of pairs) assert.ok(files.includes(`${name}.json`), `${name}.hex has no JSON twin`);
const chain = pairs.filter((n) => n.startsWith('server_chain_'));
const cellsChain = pairs.filter((n) => n.startsWith('server_cells_'));
const plain = pairs.filter((n) => !n.startsWith('server_chain_') && !n.startsWith('server_cells_'));
const predictNum = readJson('server_welcome').quantization.predict_num;

for (const name of plain) {
  test(`vector ${name}: decode(hex) == json, encode(json) == hex`, () => {
    const bytes = readHex(name);
    const json = readJson(name);
    const client = name.startsWith('client_');
    const msg = client ? decodeClient(bytes) : decodeServer(bytes);
    same(msg, json);
    if (!client) same(decodeServerJson(readText(name)), json);
    assert.equal(toHex(client ? encodeClient(json) : encodeServer(json)), toHex(bytes), 'encode(json) == hex');
  });
}

test('the Hello this SDK sends is the golden Hello (new session and resume)', () => {
  assert.equal(PROTOCOL_VERSION, 11);
  const v = readJson('client_hello');
  assert.equal(v.protocol_version, PROTOCOL_VERSION);
  const h = helloMessage({ token: v.token, encoding: v.encoding });
  assert.equal(toHex(encodeClient(h)), toHex(readHex('client_hello')));
  // A reconnect's Hello carries the previous Welcome's resume token.
  const r = readJson('client_hello_resume');
  assert.ok(r.resume);
  const hr = helloMessage({ token: r.token, encoding: r.encoding, resume: r.resume });
  assert.equal(toHex(encodeClient(hr)), toHex(readHex('client_hello_resume')));
});

test('the golden Welcomes tell the player, its role and the resume token', () => {
  const w = decodeServer(readHex('server_welcome'));
  assert.equal(w.protocol_version, PROTOCOL_VERSION);
  assert.equal(w.player_id, 'alice');
  assert.equal(w.role, 'player');
  assert.equal(w.resume_token, '7f3a9c0e5b2d4f6a8c1e3b5d7f9a0c2e');
  assert.equal(w.session_grace_secs, 30);
  // Protocol v9: each world carries its own tick rate.
  assert.equal(w.worlds[0].tick_rate_hz, 20);
  assert.equal(decodeServer(readHex('server_event_tick_rate')).event.tick_rate_hz, 30);
  // Protocol v10: an order that ended short of its goal.
  assert.deepEqual(decodeServer(readHex('server_event_gave_up')).event, { type: 'gave_up', agent: 9, distance: 3.25 });
  // Protocol v11: the world moved to another server (a live handoff).
  assert.deepEqual(decodeServer(readHex('server_moved')), { type: 'moved', world: 1, name: 'arena', to: 'ws://10.0.0.7:8080/ws' });
  assert.deepEqual(decodeServer(readHex('server_event_unreachable')).event, { type: 'unreachable', agent: 10, distance: 12.5 });
  const s = decodeServer(readHex('server_welcome_spectator'));
  assert.equal(s.player_id, 'carol');
  assert.equal(s.role, 'spectator');
  assert.deepEqual(ROLES, ['admin', 'player', 'spectator']);
  assert.equal(ERROR_CODES.indexOf('quota_exceeded'), 12);
});

test(`chain vectors (${chain.join(', ')}): decode, resolve base indices, apply, checksums`, () => {
  assert.ok(chain.length >= 2, 'the chain has a keyframe and deltas');
  const cell = new CellMap(); // decoded entries
  const fast = new CellMap(); // packed bytes (rawChanges)
  const viaJson = new CellMap(); // JSON frames
  let checked = 0;
  for (const name of chain) {
    const bytes = readHex(name);
    const json = readJson(name);
    const msg = decodeServer(bytes);
    const raw = decodeServer(bytes, { rawChanges: true });
    const fromText = decodeServerJson(readText(name));
    if (msg.type === 'keyframe') {
      same(msg, json);
      cell.keyframe(msg);
      fast.keyframe(raw);
      viaJson.keyframe(fromText);
    } else {
      assert.equal(msg.type, 'delta');
      assert.ok(raw.changed instanceof Uint8Array);
      const resolved = { ...msg, changed: resolveChanged(msg.changed, cell.agents) };
      same(resolved, json);
      const index = new Map(cell.agents.map((a, i) => [a.id, i]));
      const asBinary = { ...json, changed: json.changed.map(({ id, ...rest }) => ({ index: index.get(id), ...rest })) };
      assert.equal(toHex(encodeServer(asBinary)), toHex(bytes), 'encode(json) == hex');
      assert.ok(cell.delta(msg, predictNum), `${name}: delta applies (chain rule)`);
      assert.ok(fast.delta(raw, predictNum), `${name}: packed delta applies`);
      assert.ok(viaJson.delta(fromText, predictNum), `${name}: JSON delta applies`);
    }
    assert.deepEqual(fast.agents, cell.agents);
    assert.deepEqual(viaJson.agents, cell.agents);
    if (json.checksum) {
      assert.equal(checksum(cell.agents), json.checksum);
      checked++;
    }
  }
  assert.ok(checked >= chain.length - 1, 'the chain carries checksums');
});

test('the chain through a WorldView: the agent table and no resync', () => {
  const welcome = readJson('server_welcome');
  const k0 = decodeServer(readHex(chain[0]));
  const info = { id: k0.world, name: 'w', bounds: { min_x: 0, min_y: 0, max_x: 1e6, max_y: 1e6 }, aoi_cell_size: 1e6, cols: 1, rows: 1, tick_rate_hz: 20 };
  const view = new WorldView(info, welcome.quantization, info.tick_rate_hz, { type: 'whole_world' }, { interpDelayMs: 0 });
  const reasons = [];
  view.onResync = (r) => reasons.push(r);
  const ref = new CellMap();
  for (const name of chain) {
    const m = decodeServer(readHex(name), { rawChanges: true });
    if (m.type === 'keyframe') { view.keyframe(m, 0); ref.keyframe(decodeServer(readHex(name))); } else { view.delta(m, 0); ref.delta(decodeServer(readHex(name)), predictNum); }
  }
  assert.deepEqual(reasons, []);
  assert.deepEqual(view.agents(), ref.agents);
  const last = readJson(chain[chain.length - 1]);
  assert.equal(checksum(view.agents()), last.checksum);
  assert.equal(view.sample(0).length, ref.agents.length);
});

/** The cells vectors' world: `server_welcome`'s world of that id (else a grid holding any cell). */
function cellsGrid(world) {
  const w = readJson('server_welcome').worlds.find((x) => x.id === world);
  return w ?? { cols: 65536, rows: 65536 };
}

test(`cells vectors (${cellsChain.join(', ')}): decode == JSON twin, encode == hex, applied in order with every message checksum`, () => {
  assert.ok(cellsChain.length >= 2, 'protocol 4 has cells vectors (server_cells_*)');
  const first = decodeServer(readHex(cellsChain[0]));
  const grid = cellsGrid(first.world);
  const maps = { fast: new Map(), decoded: new Map(), json: new Map() };
  const txn = new CellsTxn();
  let checked = 0;
  let deltas = 0;
  let keyframes = 0;
  for (const name of cellsChain) {
    const bytes = readHex(name);
    const json = readJson(name);
    const msg = decodeServer(bytes);
    assert.equal(msg.type, 'cells');
    // Binary delta entries name base indices: through the state held before the message they are the JSON ids.
    const held = (cell) => maps.decoded.get(cell)?.agents ?? [];
    const resolved = { ...msg, entries: msg.entries.map((e) => ('keyframe' in e ? e : { delta: { ...e.delta, changed: resolveChanged(e.delta.changed, held(e.delta.cell)) } })) };
    same(resolved, json);
    same(decodeServerJson(readText(name)), json);
    const asBinary = {
      ...json,
      entries: json.entries.map((e) => {
        if (e.keyframe) return e;
        const index = new Map(held(e.delta.cell).map((a, i) => [a.id, i]));
        return { delta: { ...e.delta, changed: e.delta.changed.map(({ id, ...rest }) => ({ index: index.get(id), ...rest })) } };
      }),
    };
    assert.equal(toHex(encodeServer(asBinary)), toHex(bytes), `${name}: encode(json) == hex`);
    for (const e of msg.entries) if ('keyframe' in e) keyframes++; else deltas++;
    assert.equal(applyCells(maps.fast, decodeServer(bytes, { rawChanges: true }), grid, predictNum, null, txn), null, `${name}: packed entries apply`);
    assert.equal(applyCells(maps.decoded, msg, grid, predictNum, null, txn), null, `${name}: decoded entries apply`);
    assert.equal(applyCells(maps.json, decodeServerJson(readText(name)), grid, predictNum, null, txn), null, `${name}: JSON form applies`);
    for (const m of [maps.fast, maps.json]) {
      assert.deepEqual([...m.keys()].sort(), [...maps.decoded.keys()].sort());
      for (const [c, cell] of m) assert.deepEqual(cell.agents, maps.decoded.get(c).agents, `${name} cell ${c}`);
    }
    if (json.checksum) checked++; // applyCells verified it (the next test flips one)
  }
  assert.ok(keyframes > 0 && deltas > 0, 'the cells vectors have keyframe and delta entries');
  assert.ok(checked > 0, 'the cells vectors carry checksums');
});

test('a cells vector with a wrong checksum, or applied on the wrong base, changes nothing and says why', () => {
  const grid = cellsGrid(decodeServer(readHex(cellsChain[0])).world);
  const txn = new CellsTxn();
  const maps = new Map();
  assert.equal(applyCells(maps, decodeServer(readHex(cellsChain[0]), { rawChanges: true }), grid, predictNum, null, txn), null);
  const snapshot = () => JSON.stringify([...maps].map(([c, m]) => [c, m.tick, m.agents]));
  const next = cellsChain.map((n) => ({ n, m: decodeServer(readHex(n), { rawChanges: true }) })).find(({ m }, i) => i > 0 && m.checksum !== null);
  assert.ok(next, 'a later cells vector with a checksum');
  const sum = next.m.checksum;
  const bad = { ...next.m, checksum: sum.slice(0, 15) + (sum[15] === '0' ? '1' : '0') };
  // Apply the messages between the first and `next` first, so that only the checksum is wrong.
  for (const n of cellsChain.slice(1, cellsChain.indexOf(next.n))) assert.equal(applyCells(maps, decodeServer(readHex(n), { rawChanges: true }), grid, predictNum, null, txn), null);
  const held = snapshot();
  assert.match(applyCells(maps, bad, grid, predictNum, null, txn) ?? '', /checksum/);
  assert.equal(snapshot(), held, 'every cell as before the bad message');
  // A delta entry's base not held: a chain break, nothing applied.
  const fresh = new Map();
  const withDelta = cellsChain.map((n) => decodeServer(readHex(n), { rawChanges: true })).find((m) => m.entries.some((e) => 'delta' in e));
  assert.ok(withDelta, 'a cells vector with a delta entry');
  for (const e of withDelta.entries) if ('delta' in e) fresh.set(e.delta.cell, Object.assign(new CellMap(), { tick: e.delta.base_tick - 1 }));
  const freshBefore = JSON.stringify([...fresh].map(([c, m]) => [c, m.tick, m.agents]));
  assert.match(applyCells(fresh, withDelta, grid, predictNum, null, txn) ?? '', /held at/);
  assert.equal(JSON.stringify([...fresh].map(([c, m]) => [c, m.tick, m.agents])), freshBefore);
});

test('a batched frame: several messages back to back; a cut one is unexpected_end', () => {
  const a = readHex('server_pong');
  const b = readHex('server_event_spawned');
  const both = new Uint8Array([...a, ...b]);
  const msgs = decodeServerBatch(both);
  same(msgs, [readJson('server_pong'), readJson('server_event_spawned')]);
  assert.throws(() => decodeServerBatch(both.subarray(0, both.length - 1)), (e) => e instanceof ProtoError && e.kind === 'unexpected_end');
});

test('a delta on the wrong base is a chain break (false), and the view resyncs', () => {
  const names = chain.filter((n) => n.includes('delta'));
  const first = decodeServer(readHex(names[0]), { rawChanges: true });
  const cell = new CellMap();
  cell.tick = first.base_tick + 1000;
  assert.equal(cell.delta(first, predictNum), false);
});

test('a corrupted checksum is detected and the held state is kept', () => {
  const key = decodeServer(readHex(chain[0]));
  const cell = new CellMap();
  cell.keyframe(key);
  const held = cell.agents;
  const d = decodeServer(readHex(chain[1]), { rawChanges: true });
  assert.throws(() => cell.delta({ ...d, checksum: '0000000000000000' }, predictNum), (e) => e instanceof ProtoError && e.kind === 'checksum');
  assert.equal(cell.agents, held);
  assert.equal(cell.tick, key.tick);
  assert.throws(() => new CellMap().keyframe({ ...key, checksum: '0000000000000000' }), (e) => e instanceof ProtoError && e.kind === 'checksum');
});

const invalid = JSON.parse(readFileSync(join(dir, 'invalid.json'), 'utf8'));
assert.ok(invalid.length > 0);
for (const v of invalid) {
  test(`invalid vector ${v.name} (${v.direction}) throws ${v.error}`, () => {
    const bytes = hex(v.hex);
    const decode = v.direction === 'client' ? (b) => decodeClient(b) : (b) => decodeServer(b);
    assert.throws(() => decode(bytes), (e) => {
      assert.ok(e instanceof ProtoError, `ProtoError expected, got ${e}`);
      assert.equal(e.kind, v.error, `error kind for ${v.name}: ${e.message}`);
      return true;
    });
  });
}

test('too_large: a frame over the limit', () => {
  assert.throws(() => decodeClient(new Uint8Array(65537)), (e) => e.kind === 'too_large');
  assert.throws(() => decodeServer(new Uint8Array(100), 99), (e) => e.kind === 'too_large');
});
