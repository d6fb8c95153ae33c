// The viewer's decoder — the TypeScript SDK as committed for the viewer (server/viewer/sdk/, tsc
// output of clients/typescript; clients/run-tests.sh checks it matches its sources) — against the
// golden vectors of client-proto, the same files the Rust tests use. Table-driven from the
// directory: every NAME.hex/NAME.json pair and every entry of invalid.json; the frame chain and
// the protocol-4 cells messages (server_cells_*, what the viewer's binary connection receives)
// replayed in order with every checksum, as the viewer applies them (applyCells).
// Run: node --test tests/browser/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  decodeServer, decodeClient, encodeClient, encodeServer, CellMap, checksum, resolveChanged, ProtoError,
  applyCells, CellsTxn, PROTOCOL_VERSION,
} from '../../server/viewer/sdk/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const dir = process.env.VECTORS_DIR ?? join(here, '../../client-proto/tests/vectors');

const hex = (s) => Uint8Array.from(s.trim().match(/../g) ?? [], (h) => parseInt(h, 16));
const toHex = (b) => Buffer.from(b).toString('hex');

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

// The chain vectors: decoded in order, each delta resolved against the previous state.
const chain = pairs.filter((n) => n.startsWith('server_chain_'));
const cellsChain = pairs.filter((n) => n.startsWith('server_cells_'));
const plain = pairs.filter((n) => !n.startsWith('server_chain_') && !n.startsWith('server_cells_'));

for (const name of plain) {
  test(`vector ${name}: decode(hex) == json, encode(json) == hex`, () => {
    const bytes = hex(readFileSync(join(dir, `${name}.hex`), 'utf8'));
    const json = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
    const client = name.startsWith('client_');
    const msg = client ? decodeClient(bytes) : decodeServer(bytes);
    same(msg, json);
    // Frames with packed sections are checked by the chain test (changed entries need a base).
    if (json.type !== 'delta') {
      assert.equal(toHex(client ? encodeClient(json) : encodeServer(json)), toHex(bytes), 'encode(json) == hex');
    }
  });
}

test(`chain vectors (${chain.join(', ')}): decode, resolve base indices, apply, checksums`, () => {
  assert.ok(chain.length >= 2, 'the chain has a keyframe and deltas');
  const cell = new CellMap();
  // predict_num: the Welcome vector's quantization (the chain is produced with the defaults).
  const welcome = JSON.parse(readFileSync(join(dir, 'server_welcome.json'), 'utf8'));
  const predictNum = welcome.quantization.predict_num;
  for (const name of chain) {
    const bytes = hex(readFileSync(join(dir, `${name}.hex`), 'utf8'));
    const json = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
    const msg = decodeServer(bytes);
    if (msg.type === 'keyframe') {
      same(msg, json);
      cell.keyframe(msg); // verifies the checksum
      assert.equal(checksum(cell.agents), json.checksum ?? checksum(cell.agents));
    } else {
      assert.equal(msg.type, 'delta');
      const resolved = { ...msg, changed: resolveChanged(msg.changed, cell.agents) };
      same(resolved, json);
      // The JSON twin, resolved from ids, must produce the same binary (indices from the base).
      const index = new Map(cell.agents.map((a, i) => [a.id, i]));
      const asBinary = { ...json, changed: json.changed.map(({ id, ...rest }) => ({ index: index.get(id), ...rest })) };
      assert.equal(toHex(encodeServer(asBinary)), toHex(bytes), 'encode(json) == hex');
      // Applying the JSON form and the binary form gives the same state; both verify the checksum.
      // (A CellMap updates its records in place: the second map gets its own copies.)
      const viaJson = new CellMap();
      viaJson.tick = cell.tick;
      viaJson.agents = structuredClone(cell.agents);
      assert.ok(viaJson.delta(json, predictNum), `${name}: JSON delta applies`);
      assert.ok(cell.delta(msg, predictNum), `${name}: delta applies (chain rule)`);
      assert.deepEqual(viaJson.agents, cell.agents);
      if (json.checksum) assert.equal(checksum(cell.agents), json.checksum);
    }
  }
});

test(`cells vectors (${cellsChain.join(', ')}): decode == JSON twin, encode == hex, applied in order as the viewer does`, () => {
  assert.equal(PROTOCOL_VERSION, 11);
  assert.ok(cellsChain.length >= 2, 'protocol 4 and later have cells vectors (server_cells_*)');
  const welcome = JSON.parse(readFileSync(join(dir, 'server_welcome.json'), 'utf8'));
  const predictNum = welcome.quantization.predict_num;
  const read = (name) => [hex(readFileSync(join(dir, `${name}.hex`), 'utf8')), JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'))];
  const first = decodeServer(read(cellsChain[0])[0]);
  const grid = welcome.worlds.find((w) => w.id === first.world) ?? { cols: 65536, rows: 65536 };
  const cells = new Map(); // the viewer's S.cells
  const viaJson = new Map();
  const txn = new CellsTxn();
  let sums = 0;
  for (const name of cellsChain) {
    const [bytes, json] = read(name);
    const msg = decodeServer(bytes);
    const held = (c) => cells.get(c)?.agents ?? [];
    same({ ...msg, entries: msg.entries.map((e) => (e.delta ? { delta: { ...e.delta, changed: resolveChanged(e.delta.changed, held(e.delta.cell)) } } : e)) }, json);
    const asBinary = {
      ...json,
      entries: json.entries.map((e) => {
        if (e.keyframe) return e;
        const index = new Map(held(e.delta.cell).map((a, i) => [a.id, i]));
        return { delta: { ...e.delta, changed: e.delta.changed.map(({ id, ...rest }) => ({ index: index.get(id), ...rest })) } };
      }),
    };
    assert.equal(toHex(encodeServer(asBinary)), toHex(bytes), `${name}: encode(json) == hex`);
    assert.equal(applyCells(cells, decodeServer(bytes, { rawChanges: true }), grid, predictNum, null, txn), null, `${name} applies`);
    assert.equal(applyCells(viaJson, structuredClone(json), grid, predictNum, null, txn), null, `${name}: JSON form applies`);
    for (const [c, m] of cells) assert.deepEqual(viaJson.get(c).agents, m.agents, `${name} cell ${c}`);
    if (json.checksum) sums++;
  }
  assert.ok(sums > 0, 'checksums verified');
});

test('a delta on the wrong base is a chain break, not an error', () => {
  const names = chain.filter((n) => n.includes('delta'));
  const first = decodeServer(hex(readFileSync(join(dir, `${names[0]}.hex`), 'utf8')));
  const cell = new CellMap();
  cell.tick = first.base_tick + 1000;
  assert.equal(cell.delta(first, 32768), false);
});

test('a corrupted checksum is detected', () => {
  const key = decodeServer(hex(readFileSync(join(dir, `${chain[0]}.hex`), 'utf8')));
  const bad = { ...key, checksum: '0000000000000000' };
  assert.throws(() => new CellMap().keyframe(bad), (e) => e instanceof ProtoError && e.kind === 'checksum');
});

const invalid = JSON.parse(readFileSync(join(dir, 'invalid.json'), 'utf8'));
for (const v of invalid) {
  test(`invalid vector ${v.name} (${v.direction}) throws ${v.error}`, () => {
    const bytes = hex(v.hex);
    const decode = v.direction === 'client' ? decodeClient : decodeServer;
    assert.throws(() => decode(bytes), (e) => {
      assert.ok(e instanceof ProtoError, `ProtoError expected, got ${e}`);
      assert.equal(e.kind, v.error, `error kind for ${v.name}: ${e.message}`);
      return true;
    });
  });
}

test('too_large: a frame over the limit', () => {
  assert.throws(() => decodeClient(new Uint8Array(65537)), (e) => e.kind === 'too_large');
});
