// Protocol v4 `cells` messages (PROTOCOL.md §6.8) from the spec, independent of the golden
// vectors: a seeded property-style round trip (random worlds over many ticks, encoded as cells
// messages with keyframe and delta entries, spans and ages; decode == the message, re-encode ==
// the bytes, applied through a WorldView equal to the truth with every message checksum), the
// all-or-nothing rule (a chain break, a malformed entry or a checksum mismatch leaves every cell
// as it was and resyncs), positions chained through the whole message (protocol v7, by hand),
// and the malformed encodings the decoder must refuse; and the run coding of `subscribed.cells`
// (protocol v7, §5.2) with its two malformed cases.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  decodeServer, encodeServer, decodeServerJson, encodeClient, decodeClient, WorldView, CellMap, checksum, cellsChecksum,
  predict, heading, robustHeading, ProtoError, resolveChanged,
} from '../dist/index.js';

const QUANT = { pos_step: 0.01, vel_step: 0.1, predict_num: 32768, orient_snap: 0.035 };
const INFO = { id: 3, name: 'cells', bounds: { min_x: 0, min_y: 0, max_x: 80, max_y: 80 }, aoi_cell_size: 20, cols: 4, rows: 4 };
const NCELLS = INFO.cols * INFO.rows;

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const copy = (a) => ({ id: a.id, group: a.group, pos: [a.pos[0], a.pos[1]], vel: [a.vel[0], a.vel[1]], orient: a.orient });

/** The delta from `prev` to `next` (sorted lists) as the server builds it (frames.rs encode_delta). */
function diff(prev, next) {
  const left = [];
  const changed = [];
  const entered = [];
  let i = 0;
  let j = 0;
  while (i < prev.length && j < next.length) {
    const p = prev[i];
    const n = next[j];
    if (p.id === n.id) {
      if (p.group !== n.group) {
        left.push(p.id);
        entered.push(n);
      } else {
        const moved = p.pos[0] !== n.pos[0] || p.pos[1] !== n.pos[1] || p.vel[0] !== n.vel[0] || p.vel[1] !== n.vel[1];
        const c = { index: i };
        if (moved) {
          c.dvel = [(n.vel[0] - p.vel[0]) | 0, (n.vel[1] - p.vel[1]) | 0];
          c.dpos = [(n.pos[0] - p.pos[0] - predict(n.vel[0], QUANT.predict_num)) | 0, (n.pos[1] - p.pos[1] - predict(n.vel[1], QUANT.predict_num)) | 0];
        }
        if (p.orient !== n.orient) {
          if (robustHeading(n.vel[0], n.vel[1]) === n.orient) c.face = true;
          else c.dorient = ((n.orient - p.orient + 98304) % 65536) - 32768;
        }
        if (moved || p.orient !== n.orient) changed.push(c);
      }
      i++;
      j++;
    } else if (p.id < n.id) {
      left.push(prev[i++].id);
    } else entered.push(next[j++]);
  }
  while (i < prev.length) left.push(prev[i++].id);
  while (j < next.length) entered.push(next[j++]);
  return { left, changed, entered };
}

/** A random world: `n` agents spread over the cells, evolving tick by tick. */
function world(seed, n) {
  const r = rng(seed);
  const agents = [];
  let id = 0;
  for (let k = 0; k < n; k++) {
    id += 1 + Math.floor(r() * (r() < 0.1 ? 5000 : 4));
    const vx = Math.floor(r() * 60) - 30;
    const vy = Math.floor(r() * 60) - 30;
    agents.push({ id, group: Math.floor(r() * 3), pos: [Math.floor(r() * 8000), Math.floor(r() * 8000)], vel: [vx, vy], orient: vx || vy ? heading(vx, vy) : Math.floor(r() * 65536) });
  }
  const cellOfAgent = (a) => Math.min(INFO.rows - 1, Math.max(0, Math.floor(a.pos[1] / 2000))) * INFO.cols + Math.min(INFO.cols - 1, Math.max(0, Math.floor(a.pos[0] / 2000)));
  const cells = () => {
    const out = Array.from({ length: NCELLS }, () => []);
    for (const a of agents) out[cellOfAgent(a)].push(copy(a));
    for (const l of out) l.sort((a, b) => a.id - b.id);
    return out;
  };
  const step = () => {
    for (const a of agents) {
      const roll = r();
      if (roll < 0.3) continue; // at rest this tick
      if (roll < 0.35) { a.orient = (a.orient + Math.floor(r() * 2000) - 1000 + 65536) % 65536; continue; }
      if (roll < 0.37) { a.group = (a.group + 1) % 3; continue; }
      const big = r() < 0.2;
      a.vel[0] = Math.max(-60, Math.min(60, a.vel[0] + (big ? Math.floor(r() * 40) - 20 : Math.floor(r() * 5) - 2)));
      a.vel[1] = Math.max(-60, Math.min(60, a.vel[1] + (big ? Math.floor(r() * 40) - 20 : Math.floor(r() * 5) - 2)));
      a.pos[0] = Math.max(0, Math.min(7999, a.pos[0] + predict(a.vel[0], QUANT.predict_num) + Math.floor(r() * 3) - 1));
      a.pos[1] = Math.max(0, Math.min(7999, a.pos[1] + predict(a.vel[1], QUANT.predict_num) + Math.floor(r() * 3) - 1));
      if (a.vel[0] || a.vel[1]) a.orient = r() < 0.8 ? heading(a.vel[0], a.vel[1]) : (a.orient + 7) % 65536;
    }
  };
  return { cells, step, r };
}

/** The JSON form of a binary-decoded cells message: delta `changed` by id, through `held` (cell → list at base). */
function toJsonForm(msg, held) {
  return {
    ...msg,
    entries: msg.entries.map((e) => ('keyframe' in e ? e : { delta: { ...e.delta, changed: resolveChanged(e.delta.changed, held.get(e.delta.cell)) } })),
  };
}

test('property: random worlds as cells messages round-trip and replay checksum-exact through a WorldView', () => {
  for (let seed = 1; seed <= 12; seed++) {
    const w = world(seed, 40 + seed * 15);
    const r = w.r;
    const span = 1 + (seed % 4);
    const view = new WorldView(INFO, QUANT, 20, { type: 'whole_world' }, { interpDelayMs: 0 });
    const reasons = [];
    view.onResync = (why) => reasons.push(why);
    view.subscribed([...Array(NCELLS).keys()]);
    // Per cell: last sent state and its state tick (the server's CellEncoder).
    let sent = w.cells();
    const stateTick = new Array(NCELLS).fill(0);
    let tick = span * 10;
    // First message: a keyframe entry for every cell, of varied ages (B = 1 and B = 0).
    const kf = { type: 'cells', world: INFO.id, tick, span, checksum: null, entries: [] };
    for (let c = 0; c < NCELLS; c++) {
      stateTick[c] = c % 3 === 0 ? tick : tick - 1 - (c % 5);
      kf.entries.push({ keyframe: { cell: c, tick: stateTick[c], agents: sent[c] } });
    }
    kf.checksum = cellsChecksum(kf.entries.map((e) => e.keyframe.agents));
    const held = new Map();
    let messages = 0;
    const check = (msg) => {
      const bytes = encodeServer(msg);
      const back = decodeServer(bytes);
      assert.deepEqual(back, msg, `seed ${seed} tick ${msg.tick}: decode(encode(m)) == m`);
      assert.deepEqual(Buffer.from(encodeServer(back)), Buffer.from(bytes), 'encode(decode(b)) == b');
      // The JSON form (changed by id) decodes and applies the same way.
      const json = JSON.parse(JSON.stringify(toJsonForm(back, held)));
      assert.deepEqual(decodeServerJson(JSON.stringify(json)), json);
      view.applyCells(decodeServer(bytes, { rawChanges: true }), 0);
      messages++;
    };
    check(kf);
    for (let c = 0; c < NCELLS; c++) held.set(c, sent[c].map(copy));
    for (let round = 0; round < 30; round++) {
      for (let s = 0; s < span; s++) w.step();
      tick += span;
      const now = w.cells();
      const msg = { type: 'cells', world: INFO.id, tick, span, checksum: null, entries: [] };
      const after = [];
      for (let c = 0; c < NCELLS; c++) {
        // Now and then a cell is re-keyed (a lag, a cell coming into sight): a keyframe entry.
        if (r() < 0.05) {
          const st = r() < 0.5 ? tick : Math.max(0, tick - 1 - Math.floor(r() * 3));
          msg.entries.push({ keyframe: { cell: c, tick: st, agents: now[c] } });
          after.push(now[c]);
          stateTick[c] = st;
          continue;
        }
        const d = diff(sent[c], now[c]);
        if (!d.left.length && !d.changed.length && !d.entered.length) continue; // unchanged: no entry
        msg.entries.push({ delta: { cell: c, base_tick: stateTick[c], ...d } });
        after.push(now[c]);
        stateTick[c] = tick;
      }
      if (round % 3 !== 2) msg.checksum = cellsChecksum(after);
      check(msg);
      sent = now;
      for (let c = 0; c < NCELLS; c++) held.set(c, now[c].map(copy));
    }
    assert.deepEqual(reasons, [], `seed ${seed}: no resync`);
    const truth = sent.flat().sort((a, b) => a.id - b.id);
    assert.deepEqual(view.agents().map(copy), truth, `seed ${seed}: the view equals the world`);
    assert.equal(view.cellsMessages, messages);
    assert.equal(view.span, span);
    for (let c = 0; c < NCELLS; c++) assert.equal(view.cells.get(c).tick, stateTick[c], `seed ${seed} cell ${c}: state tick`);
  }
});

/** A view holding two cells at tick 10 (span 1), and the messages to test against it. */
function twoCells() {
  const a = [{ id: 1, group: 0, pos: [100, 100], vel: [10, 0], orient: 0 }, { id: 4, group: 1, pos: [300, 120], vel: [0, 0], orient: 5 }];
  const b = [{ id: 7, group: 0, pos: [2500, 100], vel: [0, -3], orient: heading(0, -3) }];
  const view = new WorldView(INFO, QUANT, 20, { type: 'whole_world' }, { interpDelayMs: 0 });
  view.subscribed([...Array(NCELLS).keys()]);
  const reasons = [];
  view.onResync = (why) => reasons.push(why);
  const key = { type: 'cells', world: INFO.id, tick: 10, span: 1, checksum: cellsChecksum([a, b]), entries: [{ keyframe: { cell: 0, tick: 10, agents: a } }, { keyframe: { cell: 1, tick: 10, agents: b } }] };
  view.applyCells(decodeServer(encodeServer(key), { rawChanges: true }), 0);
  assert.deepEqual(reasons, []);
  const snapshot = () => JSON.stringify([...view.cells].map(([c, m]) => [c, m.tick, m.agents]));
  return { view, reasons, snapshot, a, b };
}

test('all or nothing: a later entry that breaks the chain, breaks a rule or the checksum undoes the earlier ones', () => {
  const moveA = { delta: { cell: 0, base_tick: 10, left: [], changed: [{ index: 0, dpos: [1, 0], dvel: [0, 0] }], entered: [] } };
  const cases = [
    ['chain break', { delta: { cell: 1, base_tick: 9, left: [], changed: [{ index: 0, dorient: 3 }], entered: [] } }, null, /on a cell held at 10/],
    ['left not held', { delta: { cell: 1, base_tick: 10, left: [8], changed: [], entered: [] } }, null, /left agent 8/],
    ['cell outside the world', { keyframe: { cell: NCELLS, tick: 11, agents: [] } }, null, /outside the world/],
    ['checksum mismatch', { delta: { cell: 1, base_tick: 10, left: [7], changed: [], entered: [] } }, '0123456789abcdef', /checksum mismatch/],
  ];
  for (const [what, second, sum, why] of cases) {
    const { view, reasons, snapshot } = twoCells();
    const before = snapshot();
    const msg = { type: 'cells', world: INFO.id, tick: 11, span: 1, checksum: sum, entries: [moveA, second] };
    view.applyCells(decodeServer(encodeServer(msg), { rawChanges: true }), 0);
    assert.equal(reasons.length, 1, `${what}: one resync`);
    assert.match(reasons[0], why, what);
    assert.equal(snapshot(), before, `${what}: every cell as before the message`);
    assert.equal(view.deltas, 0, `${what}: nothing counted as applied`);
  }
  // The same first entry with a good second one applies, and the checksum verifies.
  const { view, reasons, a, b } = twoCells();
  const a2 = a.map(copy);
  a2[0].pos[0] += predict(10, QUANT.predict_num) + 1;
  const msg = { type: 'cells', world: INFO.id, tick: 11, span: 1, checksum: cellsChecksum([a2, []]), entries: [moveA, { delta: { cell: 1, base_tick: 10, left: [b[0].id], changed: [], entered: [] } }] };
  view.applyCells(decodeServer(encodeServer(msg), { rawChanges: true }), 0);
  assert.deepEqual(reasons, []);
  assert.deepEqual(view.agents().map(copy), a2);
  assert.equal(view.deltas, 2);
});

test('a keyframe entry for a cell no longer subscribed is skipped but still checked; a delta for a cell not held is skipped', () => {
  const { view, reasons, a, b } = twoCells();
  view.subscribed([0]);
  const fresh = [{ id: 9, group: 2, pos: [2100, 2100], vel: [1, 1], orient: heading(1, 1) }];
  const msg = { type: 'cells', world: INFO.id, tick: 12, span: 2, checksum: cellsChecksum([a, fresh]), entries: [{ keyframe: { cell: 0, tick: 12, agents: a.map(copy) } }, { keyframe: { cell: 5, tick: 12, agents: fresh } }] };
  view.applyCells(decodeServer(encodeServer(msg)), 0);
  assert.deepEqual(reasons, []);
  assert.deepEqual([...view.cells.keys()], [0]);
  const bad = { ...msg, checksum: cellsChecksum([a, []]) };
  view.applyCells(decodeServer(encodeServer(bad)), 0);
  assert.equal(reasons.length, 1);
  void b;
});

test('message checksum: FNV-1a 64 over the cells\' 8-byte little-endian checksums, in entry order', () => {
  // By hand: fold the bytes of each cell checksum (little endian) with FNV-1a 64 in BigInt.
  const lists = [[{ id: 3, group: 1, pos: [5, -6], vel: [7, 8], orient: 9 }], [], [{ id: 1, group: 0, pos: [0, 0], vel: [0, 0], orient: 0 }]];
  let h = 0xcbf29ce484222325n;
  for (const l of lists) {
    const c = BigInt(`0x${checksum(l)}`);
    for (let i = 0n; i < 8n; i++) h = ((h ^ ((c >> (8n * i)) & 0xffn)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  assert.equal(cellsChecksum(lists), h.toString(16).padStart(16, '0'));
  assert.equal(cellsChecksum([]), 'cbf29ce484222325');
  assert.notEqual(cellsChecksum([lists[0], lists[2]]), cellsChecksum([lists[2], lists[0]]));
});

test('chained positions: every record carries the difference from the one before it in the message (32-bit wrapping)', () => {
  const agents = [
    { id: 2, group: 0, pos: [2147483647, -2147483648], vel: [0, 0], orient: 0 },
    { id: 3, group: 0, pos: [-2147483648, 2147483647], vel: [0, 0], orient: 0 },
  ];
  const next = [{ id: 1, group: 0, pos: [2147483647, -2147483648], vel: [0, 0], orient: 0 }];
  const msg = { type: 'cells', world: 0, tick: 5, span: 1, checksum: null, entries: [{ keyframe: { cell: 0, tick: 5, agents } }, { keyframe: { cell: 1, tick: 5, agents: next } }] };
  const bytes = encodeServer(msg);
  // 07 world 0 tick 5 span 1 no checksum; entries: 30 bytes. Cell 0: head 02 (K=1 B=0 cell 0),
  // n 2, record 1: 0a (gap 2, S=1: group 0 as initially, F=0), zz pos from (0, 0) (the message's
  // first record) = fe ff ff ff 0f, ff ff ff ff 0f, vel 00 00, orient 00; record 2: 02 (gap 0,
  // S=1), zz of the wrapped differences (+1, -1) = 02 01, vel 00 00, orient 00. Cell 1: head 02
  // (gap 0), n 1, record: 06 (gap 1 from -1: ids restart with each list, S=1), zz of the wrapped
  // differences from cell 0's last record (-1, +1) = 01 02, vel 00 00, orient 00.
  assert.equal(Buffer.from(bytes).toString('hex'), '07000501001e' + '02020afeffffff0fffffffff0f000000' + '020201000000' + '0201060102000000');
  assert.deepEqual(decodeServer(bytes), msg);
});

test('chained positions across entries: keyframe -> keyframe -> delta entered, one chain per message (v7)', () => {
  const a = [{ id: 2, group: 2, pos: [1000, 2000], vel: [0, 0], orient: 0 }, { id: 3, group: 2, pos: [1003, 1998], vel: [0, 0], orient: 0 }];
  const b = [{ id: 1, group: 0, pos: [1010, 1990], vel: [0, 0], orient: 0 }];
  const entered = [{ id: 9, group: 1, pos: [995, 2005], vel: [0, 0], orient: 0 }];
  const msg = {
    type: 'cells', world: 0, tick: 5, span: 1, checksum: null,
    entries: [
      { keyframe: { cell: 0, tick: 5, agents: a } },
      { keyframe: { cell: 1, tick: 5, agents: b } },
      { delta: { cell: 2, base_tick: 4, left: [], changed: [], entered } },
    ],
  };
  const bytes = encodeServer(msg);
  // entries: 35 bytes.
  // Cell 0: head 02 (K=1), n 2; id 2: 08 (gap 2, S=0) group 02, pos from (0, 0): zz 1000 = 2000
  //   -> d0 0f, zz 2000 = 4000 -> a0 1f, vel 00 00, orient 00; id 3: 02 (gap 0, S=1), (+3, -2) ->
  //   06 03, 00 00 00.
  // Cell 1: head 02 (gap 0, K=1), n 1; id 1: 06 (gap 1: ids restart; S=1: the group register
  //   restarts at 0 with each list), pos chained on cell 0's last record (1003, 1998): (+7, -8) ->
  //   0e 0f (version 6 restarted here: e4 0f 8c 1f), 00 00 00.
  // Cell 2: head 00 (gap 0, K=0, B=0: base = tick - span), c = 0 << 2 | E -> 01, 1 entered; id 9:
  //   24 (gap 9, S=0) group 01, pos chained on cell 1's record (1010, 1990): (-15, +15) -> 1d 1e,
  //   00 00 00.
  const entriesHex = '020208' + '02d00fa01f000000' + '020603000000' + '0201060e0f000000' + '000101' + '24011d1e000000';
  assert.equal(Buffer.from(bytes).toString('hex'), '0700050100' + '23' + entriesHex);
  assert.deepEqual(decodeServer(bytes), msg);
  assert.deepEqual(Buffer.from(encodeServer(decodeServer(bytes))), Buffer.from(bytes));
  // The same keyframe entry as the message's first: its position is from (0, 0), i.e. absolute.
  const alone = encodeServer({ ...msg, entries: [msg.entries[1]] });
  // head 06 (gap 1, K=1), n 1, id 1: 06, zz 1010 = 2020 -> e4 0f, zz 1990 = 3980 -> 8c 1f, 00 00 00.
  assert.equal(Buffer.from(alone).toString('hex'), '07000501000a' + '060106e40f8c1f000000');
  assert.deepEqual(decodeServer(alone).entries, [msg.entries[1]]);
  // An empty keyframe entry in between leaves the chain where it was.
  const withEmpty = { ...msg, entries: [msg.entries[0], { keyframe: { cell: 1, tick: 5, agents: [] } }, { delta: { cell: 2, base_tick: 4, left: [], changed: [], entered: b.map((r) => ({ ...r, id: 4 })) } }] };
  const h = Buffer.from(encodeServer(withEmpty)).toString('hex');
  // ... cell 1: 02 00; cell 2: 00 01 01, id 4: 12 (gap 4, S=1), (+7, -8) from cell 0's last record.
  assert.ok(h.endsWith('0200' + '000101' + '120e0f000000'), h);
  assert.deepEqual(decodeServer(encodeServer(withEmpty)), withEmpty);
  // Applied through a view: the entries decode to the absolute positions (cell 2 held at 4).
  const view = new WorldView(INFO, QUANT, 20, { type: 'whole_world' }, { interpDelayMs: 0 });
  view.subscribed([...Array(NCELLS).keys()]);
  const reasons = [];
  view.onResync = (why) => reasons.push(why);
  view.applyCells(decodeServer(encodeServer({ type: 'cells', world: INFO.id, tick: 4, span: 1, checksum: null, entries: [{ keyframe: { cell: 2, tick: 4, agents: [] } }] }), { rawChanges: true }), 0);
  const sum = cellsChecksum([a, b, entered]);
  view.applyCells(decodeServer(encodeServer({ ...msg, world: INFO.id, checksum: sum }), { rawChanges: true }), 0);
  assert.deepEqual(reasons, []);
  assert.deepEqual(view.agents().map(copy), [...b, ...a, ...entered]);
});

test('subscribed.cells: runs of consecutive cells in binary (v7), a plain array in JSON', () => {
  const hex = (s) => Uint8Array.from(s.match(/../g), (h) => parseInt(h, 16));
  // (Protocol v9 appended `groups`: here none, one byte.)
  const sub = (cells) => ({ type: 'command_result', request_id: 7, result: { type: 'subscribed', world: 2, cells, groups: [] } });
  const cases = [
    // The spec's example: (36, 2 cells), (38 + 18 = 56, 2 cells).
    [[36, 37, 56, 57], '0424011201'],
    // (0, 3 cells) -> 00 02, next 3; (3 + 7 = 10, 1) -> 07 00, next 11; (11 + 1 = 12, 2) -> 01 01,
    // next 14; the last cell 2^32 - 1 = 14 + 4294967281 (f1 ff ff ff 0f), 1 cell -> 00.
    [[0, 1, 2, 10, 12, 13, 4294967295], '0c' + '0002' + '0700' + '0101' + 'f1ffffff0f00'],
    // No cell: an empty byte string.
    [[], '00'],
  ];
  for (const [cells, runs] of cases) {
    const bytes = encodeServer(sub(cells));
    assert.equal(Buffer.from(bytes).toString('hex'), '04070102' + runs + '00', `cells ${cells}`);
    assert.deepEqual(decodeServer(bytes), sub(cells));
  }
  // The whole of 2^20 cells is one run (00, 2^20 - 1 = ff ff 3f): at the limit, accepted.
  const all = decodeServer(hex('0401010104' + '00ffff3f' + '00'));
  assert.equal(all.result.cells.length, 1 << 20);
  assert.equal(all.result.cells[(1 << 20) - 1], (1 << 20) - 1);
  assert.equal(Buffer.from(encodeServer(all)).toString('hex'), '040101010400ffff3f00');
  // JSON keeps the plain array.
  const json = JSON.stringify(sub([36, 37, 56, 57]));
  assert.deepEqual(decodeServerJson(json), sub([36, 37, 56, 57]));
  // The encoder needs increasing cells.
  for (const bad of [[3, 3], [5, 2], [-1], [4294967296], [1.5]]) {
    assert.throws(() => encodeServer(sub(bad)), (e) => e instanceof ProtoError && e.kind === 'malformed', `cells ${bad}`);
  }
});

test('subscribed.cells: a run past cell 2^32 - 1 or more than 2^20 cells in all is malformed, refused before allocating', () => {
  const hex = (s) => Uint8Array.from(s.match(/../g), (h) => parseInt(h, 16));
  const kinds = [
    // One run of 2^20 + 1 cells from cell 0 (00, 80 80 40): the invalid vector subscribed_too_many_cells.
    ['one run of 2^20 + 1 cells', '040101010400808040', 'malformed'],
    // Two runs, 2^20 + 1 cells in all: (0, 2^20 cells), (2^20 + 5, 1 cell).
    ['2^20 + 1 cells in two runs', '040101010600ffff3f0500', 'malformed'],
    // A run of 2^32 - 1 cells (length - 1 = fe ff ff ff 0f): refused, not made.
    ['a run of 2^32 - 1 cells', '040101010600feffffff0f', 'malformed'],
    // From cell 2^32 - 1, 2 cells: the invalid vector subscribed_cell_past_u32.
    ['a run past cell 2^32 - 1', '0401010106ffffffff0f01', 'malformed'],
    // (0, 1 cell), then a run starting at 1 + (2^32 - 1) = 2^32.
    ['a run starting past cell 2^32 - 1', '04010101080000ffffffff0f00', 'malformed'],
    // A length of 2^52 + 1.
    ['a run of 2^52 + 1 cells', '0401010109' + '00' + '80'.repeat(7) + '08', 'malformed'],
    // A start without its length.
    ['a run cut short', '040101010105', 'malformed'],
    // The byte string longer than the frame.
    ['runs longer than the frame', '04010101030001', 'unexpected_end'],
  ];
  // (Made, the run of 2^32 - 1 cells would exhaust the heap: this test would not end.)
  for (const [what, h, kind] of kinds) {
    assert.throws(() => decodeServer(hex(h)), (e) => e instanceof ProtoError && e.kind === kind, what);
  }
});

test('malformed cells messages are refused whole', () => {
  const hex = (s) => Uint8Array.from(s.match(/../g), (h) => parseInt(h, 16));
  const kinds = [
    ['span 0', '07000a000000', 'malformed'],
    ['age 0 on a keyframe entry', '07000a010003030000', 'malformed'],
    ['age 0 on a delta entry', '07000a010003010000', 'malformed'],
    ['state tick below 0', '07000a01000303' + '0b' + '00', 'malformed'],
    ['base tick below 0 (span beyond tick)', '07000a0b00020000', 'malformed'],
    ['record count past the end', '07000a0100020205', 'malformed'],
    ['change count past the end', '07000a0100020014', 'malformed'],
    ['reserved motion mode', '07000a010003000403', 'malformed'],
    ['entries longer than the frame', '07000a010005020000', 'unexpected_end'],
    ['trailing byte', '07000a01000000', 'trailing_bytes'],
  ];
  for (const [what, h, kind] of kinds) {
    assert.throws(() => decodeServer(hex(h)), (e) => e instanceof ProtoError && e.kind === kind, what);
  }
  // A well-formed empty message decodes (a tick with nothing to send is not sent, but is valid).
  assert.deepEqual(decodeServer(hex('07000a010000')), { type: 'cells', world: 0, tick: 10, span: 1, checksum: null, entries: [] });
});

test('Subscribe carries every_n_ticks (default 1)', () => {
  const msg = { type: 'subscribe', request_id: 5, world: 'w', area: { type: 'whole_world' } };
  const bytes = encodeClient(msg);
  assert.equal(Buffer.from(bytes).toString('hex'), '0105017701' + '01');
  assert.deepEqual(decodeClient(bytes), { ...msg, every_n_ticks: 1 });
  assert.equal(decodeClient(encodeClient({ ...msg, every_n_ticks: 4 })).every_n_ticks, 4);
  void CellMap;
});
