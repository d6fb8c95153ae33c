// Smooth everywhere: an agent at a constant 5 units/s crossing into the subscribed area, across
// a cell boundary and out of the area again, streamed as the server does (one cells message per
// tick at 20 Hz, delta entries with left / changed / entered), sampled at 60 Hz: every step
// between two consecutive samples is within 5 % of the true speed, the agent is drawn once, and
// it is drawn without a gap from its entry to its exit. Deterministic: simulated clocks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WorldView, heading, predict } from '../dist/index.js';

const QUANT = { pos_step: 0.01, vel_step: 0.1, predict_num: 32768, orient_snap: 0.035 };
// Four columns of 25 units; the subscription covers the middle two (x in [25, 75)).
const INFO = { id: 1, name: 'w', bounds: { min_x: 0, min_y: 0, max_x: 100, max_y: 25 }, aoi_cell_size: 25, cols: 4, rows: 1 };
const SUBSCRIBED = [1, 2];
const RATE = 20;
const SPEED = 5; // units per second: 0.25 a tick

/** Per subscribed cell, the sorted records it holds at `tick`: one agent from x = 15 towards +x, one at rest. */
function cellsAt(tick) {
  const vel = Math.round(SPEED / QUANT.vel_step); // 50
  const x = Math.round((15 + (SPEED * tick) / RATE) / QUANT.pos_step);
  const agents = [
    { id: 7, group: 0, pos: [x, 1000], vel: [vel, 0], orient: heading(vel, 0) },
    { id: 9, group: 0, pos: [5000, 2000], vel: [0, 0], orient: 0 },
  ];
  const out = new Map(SUBSCRIBED.map((c) => [c, []]));
  for (const a of agents) {
    const c = Math.floor((a.pos[0] * QUANT.pos_step) / INFO.aoi_cell_size);
    if (out.has(c)) out.get(c).push(a);
  }
  return out;
}

/** The delta entry of one cell from `prev` to `next` (changed by id, positions after prediction). */
function delta(cell, prev, next) {
  const left = prev.filter((p) => !next.some((n) => n.id === p.id)).map((p) => p.id);
  const entered = next.filter((n) => !prev.some((p) => p.id === n.id));
  const changed = [];
  for (const n of next) {
    const p = prev.find((q) => q.id === n.id);
    if (!p || (p.pos[0] === n.pos[0] && p.pos[1] === n.pos[1] && p.vel[0] === n.vel[0] && p.vel[1] === n.vel[1])) continue;
    changed.push({
      id: n.id,
      dvel: [n.vel[0] - p.vel[0], n.vel[1] - p.vel[1]],
      dpos: [n.pos[0] - p.pos[0] - predict(n.vel[0], QUANT.predict_num), n.pos[1] - p.pos[1] - predict(n.vel[1], QUANT.predict_num)],
    });
  }
  if (!left.length && !entered.length && !changed.length) return null;
  return { delta: { cell, base_tick: 0, left, changed, entered } };
}

test('60 Hz samples of an agent at 5 u/s entering the area, crossing a cell boundary and leaving it: every step within 5 % of its speed', () => {
  const view = new WorldView(INFO, QUANT, RATE, { type: 'rect', min_x: 25, min_y: 0, max_x: 75, max_y: 25 }, { interpDelayMs: 100 });
  view.clock.addSample(0, 0, 0); // server tick = local ms · 20 / 1000
  const reasons = [];
  view.onResync = (r) => reasons.push(r);
  let held = null;
  let nextTick = 0;
  const deliver = (tick) => {
    const now = cellsAt(tick);
    let entries;
    if (!held) {
      view.subscribed(SUBSCRIBED);
      entries = SUBSCRIBED.map((c) => ({ keyframe: { cell: c, tick, agents: now.get(c) } }));
    } else {
      entries = SUBSCRIBED.map((c) => delta(c, held.cells.get(c), now.get(c))).filter(Boolean);
      for (const e of entries) e.delta.base_tick = held.tick[e.delta.cell];
    }
    const ticks = held ? held.tick : {};
    for (const e of entries) ticks['keyframe' in e ? e.keyframe.cell : e.delta.cell] = tick;
    view.applyCells({ type: 'cells', world: 1, tick, span: 1, checksum: null, entries }, tick * 50);
    held = { cells: now, tick: ticks };
  };

  const dtMs = 1000 / 60;
  let prev = null;
  const steps = [];
  let drawn = 0;
  let gaps = 0;
  let lastSeen = -1;
  let firstSeen = -1;
  for (let k = 0; k * dtMs <= 15000; k++) {
    const t = k * dtMs;
    while (nextTick * 50 <= t) deliver(nextTick++);
    const mine = view.sample(t).filter((a) => a.id === 7);
    assert.ok(mine.length <= 1, `agent drawn ${mine.length} times at ${t.toFixed(1)} ms`);
    const a = mine[0];
    if (a) {
      if (firstSeen < 0) firstSeen = k;
      else if (lastSeen !== k - 1) gaps++;
      lastSeen = k;
      drawn++;
      if (prev) steps.push({ t, x: a.x, speed: Math.hypot(a.x - prev.x, a.y - prev.y) / (dtMs / 1000) });
    }
    prev = a ? { x: a.x, y: a.y } : null;
  }
  assert.deepEqual(reasons, []);
  assert.equal(gaps, 0, 'drawn without a gap from entry to exit');
  // Through the area, 50 units at 5 u/s: 10 s, 600 samples.
  assert.ok(drawn > 580, `drawn in ${drawn} samples`);
  const xs = steps.map((s) => s.x);
  assert.ok(Math.min(...xs) < 25.5 && Math.max(...xs) > 74.5, `samples span the area: ${Math.min(...xs)}..${Math.max(...xs)}`);
  assert.ok(xs.some((x) => x > 49 && x < 51), 'samples across the cell boundary at x = 50');
  const bad = steps.filter((s) => Math.abs(s.speed - SPEED) > 0.05 * SPEED);
  assert.deepEqual(bad.map((s) => `x ${s.x.toFixed(3)}: ${s.speed.toFixed(2)} u/s`), [], 'every step within 5 % of 5 u/s');
});
