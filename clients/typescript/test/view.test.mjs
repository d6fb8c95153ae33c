// Unit tests: ClockSync (offset, drift, outliers) and WorldView.sample() (interpolation between
// the two states around the render tick, extrapolation of at most one tick, cell crossings).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClockSync, WorldView, heading } from '../dist/index.js';

const near = (a, b, tol, what) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b} (±${tol})`);

test('clock: offset and drift from noisy Ping/Pong samples, outliers ignored', () => {
  const c = new ClockSync();
  c.setRate(20);
  // Server tick at local ms t: 500 + 20 · (1 + 2e-4) · t / 1000 (a 200 ppm fast server clock).
  const truth = (t) => 500 + 0.02 * (1 + 2e-4) * t;
  let seed = 1;
  const rnd = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
  for (let i = 0; i < 60; i++) {
    const sent = 1000 + i * 500;
    const slow = i % 7 === 3; // a queued ping: 400 ms round trip, answered late
    const rtt = slow ? 400 : 4 + rnd() * 4;
    const at = sent + (slow ? 390 : rtt * rnd()); // the moment the server read its tick
    c.addSample(sent, sent + rtt, Math.floor(truth(at)));
  }
  assert.ok(c.synced);
  const t = 1000 + 60 * 500;
  near(c.serverTick(t), truth(t), 0.35, 'server tick estimate');
  near(c.driftRatio, 2e-4, 1e-3, 'drift');
});

test('clock: a tick counter going back restarts the fit', () => {
  const c = new ClockSync();
  c.setRate(20);
  for (let i = 0; i < 10; i++) c.addSample(i * 100, i * 100 + 2, 1000 + i * 2);
  c.addSample(2000, 2002, 3);
  near(c.serverTick(2001), 3.5, 0.01, 'after the reset');
});

const INFO = { id: 1, name: 'w', bounds: { min_x: 0, min_y: 0, max_x: 100, max_y: 100 }, aoi_cell_size: 50, cols: 2, rows: 1 };
const QUANT = { pos_step: 0.01, vel_step: 0.1, predict_num: 32768, orient_snap: 0.035 };
const rec = (id, x, y, vx, vy, orient) => ({ id, group: 0, pos: [x, y], vel: [vx, vy], orient: orient ?? heading(vx, vy) });
const kf = (cell, tick, agents) => ({ type: 'keyframe', world: 1, cell, tick, checksum: null, agents });

/** A view whose clock says: server tick = `tick` at local time 0, 20 ticks per second. */
function viewAt(opts) {
  const v = new WorldView(INFO, QUANT, 20, { type: 'whole_world' }, opts);
  return v;
}

test('sample: interpolates position and heading between the states around the render tick', () => {
  const v = viewAt({ interpDelayMs: 0 });
  v.keyframe(kf(0, 10, [rec(1, 1000, 1000, 20, 0, 0)]));
  // Tick 11 as a delta: +20 in x (vel 20 → predict 10 + dpos 10), orientation turned by 1000.
  v.delta({ type: 'delta', world: 1, cell: 0, tick: 11, base_tick: 10, checksum: null, left: [], changed: [{ id: 1, dpos: [10, 0], dvel: [0, 0], dorient: 1000 }], entered: [] });
  v.clock.addSample(0, 0, 10); // server tick 10.5 at local 0
  const s = v.sample(0)[0]; // render tick 10.5: halfway
  near(s.x, 10.1, 1e-9, 'x');
  near(s.y, 10, 1e-9, 'y');
  near(s.heading, (500 * 2 * Math.PI) / 65536, 1e-9, 'heading');
  // Heading wraps the short way: from 65000 to 500.
  const w = viewAt({ interpDelayMs: 0 });
  w.keyframe(kf(0, 10, [rec(2, 0, 0, 0, 0, 65000)]));
  w.keyframe(kf(0, 11, [rec(2, 0, 0, 0, 0, 500)]));
  w.clock.addSample(0, 0, 10);
  near(w.sample(0)[0].heading, (((65000 + 518) % 65536) * 2 * Math.PI) / 65536, 1e-9, 'wrapped heading');
});

test('sample: a cell that did not change for some ticks holds its state until the tick before the next', () => {
  const v = viewAt({ interpDelayMs: 0 });
  v.keyframe(kf(0, 10, [rec(1, 0, 0, 0, 0, 0)]));
  v.keyframe(kf(0, 14, [rec(1, 400, 0, 0, 0, 0)]));
  v.clock.addSample(0, 0, 12); // tick 12.5: still held at tick 10's state
  near(v.sample(0)[0].x, 0, 1e-9, 'held');
  v.clock.reset();
  v.clock.addSample(0, 0, 13); // tick 13.5: halfway from 13 to 14
  near(v.sample(0)[0].x, 2, 1e-9, 'moving in the last tick');
});

test('sample: extrapolates along the velocity by at most one tick, then renders behind by interpDelay', () => {
  const v = viewAt({ interpDelayMs: 0 });
  v.keyframe(kf(0, 10, [rec(1, 1000, 0, 20, 0)])); // 2 units/s
  v.clock.addSample(0, 0, 100); // far ahead of the data
  near(v.sample(0)[0].x, 10 + 2 / 20, 1e-9, 'one tick of extrapolation');
  const d = viewAt({ interpDelayMs: 100 });
  d.keyframe(kf(0, 10, [rec(1, 0, 0, 0, 0, 0)]));
  d.keyframe(kf(0, 11, [rec(1, 100, 0, 0, 0, 0)]));
  d.keyframe(kf(0, 12, [rec(1, 200, 0, 0, 0, 0)]));
  d.clock.addSample(0, 0, 12); // 12.5 - 2 ticks = 10.5
  near(d.renderTick(0), 10.5, 1e-9, 'render tick');
  near(d.sample(0)[0].x, 0.5, 1e-9, 'interpolated behind');
});

test('sample: an agent crossing cells appears exactly once', () => {
  const v = viewAt({ interpDelayMs: 0 });
  v.keyframe(kf(0, 10, [rec(1, 4990, 0, 20, 0), rec(2, 100, 100, 0, 0, 0)]));
  v.keyframe(kf(1, 10, []));
  v.subscribed([0, 1]);
  v.delta({ type: 'delta', world: 1, cell: 0, tick: 11, base_tick: 10, checksum: null, left: [1], changed: [], entered: [] });
  v.delta({ type: 'delta', world: 1, cell: 1, tick: 11, base_tick: 10, checksum: null, left: [], changed: [], entered: [rec(1, 5010, 0, 20, 0)] });
  for (const t of [10, 10.5, 11, 11.5]) {
    v.clock.reset();
    v.clock.addSample(0, 0, t - 0.5);
    const ids = v.sample(0).map((s) => s.id).sort();
    assert.deepEqual(ids, [1, 2], `tick ${t}`);
  }
  assert.equal(v.agent(1).pos[0], 5010);
  assert.deepEqual(v.agents().map((a) => a.id), [1, 2]);
});

test('a delta on the wrong base resyncs the view and keeps its table', () => {
  const v = viewAt();
  const reasons = [];
  v.onResync = (r) => reasons.push(r);
  v.keyframe(kf(0, 10, [rec(1, 0, 0, 0, 0, 0)]));
  v.delta({ type: 'delta', world: 1, cell: 0, tick: 13, base_tick: 12, checksum: null, left: [], changed: [], entered: [] });
  assert.equal(reasons.length, 1);
  assert.equal(v.size, 1);
  v.keyframe({ ...kf(0, 11, [rec(1, 5, 0, 0, 0, 0)]), checksum: '0123456789abcdef' });
  assert.equal(reasons.length, 2, 'checksum mismatch resyncs');
  assert.equal(v.agent(1).pos[0], 0, 'old state kept');
});

test('sample with everyNTicks 4: a change is interpolated over the 4 ticks before its state, extrapolated up to 4', () => {
  const v = viewAt({ interpDelayMs: 0 });
  v.everyNTicks = 4;
  v.applyCells({
    type: 'cells', world: 1, tick: 100, span: 4, checksum: null,
    entries: [{ keyframe: { cell: 0, tick: 100, agents: [rec(1, 1000, 1000, 0, 0, 0)] } }],
  });
  // Tick 104: +400 in x over the 4 ticks (vel 0: no prediction, all dpos).
  v.applyCells({
    type: 'cells', world: 1, tick: 104, span: 4, checksum: null,
    entries: [{ delta: { cell: 0, base_tick: 100, left: [], changed: [{ id: 1, dpos: [400, 0], dvel: [0, 0] }], entered: [] } }],
  });
  assert.equal(v.cellsTick, 104);
  v.clock.addSample(0, 0, 101); // server tick 101.5 at local 0
  near(v.sample(0)[0].x, 10 + (4 * 1.5) / 4 * 1, 1e-9, 'render tick 101.5: 1.5 of the 4 ticks done');
  // With everyNTicks 1 the same states would mean: at rest until tick 103, then the jump.
  v.everyNTicks = 1;
  near(v.sample(0)[0].x, 10, 1e-9, 'span 1: held until the tick before');
  // Extrapolation past the newest state is bounded by one send period (4 ticks).
  v.everyNTicks = 4;
  assert.equal(v.renderTick(10_000), 108);
});

test('per-agent callbacks: added, changed and removed once each; a cell crossing is neither a removal nor an addition', () => {
  const v = viewAt({ interpDelayMs: 0 });
  const log = [];
  v.on('added', (a) => log.push(`+${a.id}`));
  v.on('removed', (id) => log.push(`-${id}`));
  const offChanged = v.on('changed', (a) => log.push(`~${a.id}@${a.pos[0]}`));
  v.subscribed([0, 1]);
  v.applyCells({ type: 'cells', world: 1, tick: 10, span: 1, checksum: null, entries: [
    { keyframe: { cell: 0, tick: 10, agents: [rec(1, 4990, 0, 20, 0), rec(2, 100, 100, 0, 0, 0)] } },
    { keyframe: { cell: 1, tick: 10, agents: [] } },
  ] });
  assert.deepEqual(log.splice(0), ['+1', '+2']);
  // Tick 11: agent 1 crosses from cell 0 to cell 1 (left there, entered here).
  v.applyCells({ type: 'cells', world: 1, tick: 11, span: 1, checksum: null, entries: [
    { delta: { cell: 0, base_tick: 10, left: [1], changed: [], entered: [] } },
    { delta: { cell: 1, base_tick: 10, left: [], changed: [], entered: [rec(1, 5010, 0, 20, 0)] } },
  ] });
  assert.deepEqual(log.splice(0), ['~1@5010']);
  // Tick 12: agent 2 despawned, agent 3 spawned.
  v.applyCells({ type: 'cells', world: 1, tick: 12, span: 1, checksum: null, entries: [
    { delta: { cell: 0, base_tick: 11, left: [2], changed: [], entered: [rec(3, 200, 200, 0, 0, 0)] } },
  ] });
  assert.deepEqual(log.splice(0), ['-2', '+3']);
  // Per-cell frames (a JSON connection): the crossing back, in either order, is still a change;
  // a removal is reported once the tick is complete (the next tick's first frame).
  v.delta({ type: 'delta', world: 1, cell: 1, tick: 13, base_tick: 11, checksum: null, left: [1], changed: [], entered: [] });
  assert.deepEqual(log.splice(0), []);
  v.delta({ type: 'delta', world: 1, cell: 0, tick: 13, base_tick: 12, checksum: null, left: [3], changed: [], entered: [rec(1, 4980, 0, -20, 0)] });
  assert.deepEqual(log.splice(0), ['~1@4980']);
  offChanged();
  v.delta({ type: 'delta', world: 1, cell: 0, tick: 14, base_tick: 13, checksum: null, left: [], changed: [{ id: 1, dpos: [0, 0], dvel: [0, 0] }], entered: [] });
  assert.deepEqual(log.splice(0), ['-3'], 'agent 3 left at tick 13: reported with the next tick; no change listener any more');
});
