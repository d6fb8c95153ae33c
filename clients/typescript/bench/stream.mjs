// A synthetic 10,000-agent whole-world stream, as steerd sends it: a 200 × 200 world in 10 × 10
// AOI cells (100 agents each), one keyframe per cell, then per tick one delta per cell in which
// every agent moves (nibble and varint motion, face and turn orientations, a checksum every 10th
// tick) and a few agents cross to a neighbouring cell (left + entered). Deterministic (seeded).
// Both framings: per-cell keyframe / delta messages (`keyframes`, `ticks`: what a JSON
// connection gets, one message per cell) and protocol v4's one `cells` message per tick
// (`cellsKeyframe`, `cellsTicks`: what a binary connection gets).
// `writeStream(path)` stores it for the C# benchmark: per frame a u32 LE length + the bytes.
import { writeFileSync } from 'node:fs';
import { encodeServer, checksum, cellsChecksum, predict, heading, cellOf } from '../dist/index.js';

export const QUANT = { pos_step: 0.01, vel_step: 0.1, predict_num: 32768, orient_snap: 0.035 };
export const INFO = { id: 1, name: 'bench', bounds: { min_x: 0, min_y: 0, max_x: 200, max_y: 200 }, aoi_cell_size: 20, cols: 10, rows: 10 };

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

/** Returns {keyframes: Uint8Array[], ticks: Uint8Array[][]} for `agents` agents over `nTicks` ticks. */
export function makeStream(agents = 10000, nTicks = 100) {
  const r = rng(7);
  const cells = INFO.cols * INFO.rows;
  const state = []; // per cell: sorted list of agents
  for (let c = 0; c < cells; c++) state.push([]);
  for (let id = 0; id < agents; id++) {
    const x = Math.floor(r() * 19000) + 500;
    const y = Math.floor(r() * 19000) + 500;
    const vx = Math.floor(r() * 30) - 15;
    const vy = Math.floor(r() * 30) - 15;
    const a = { id, group: id % 4, pos: [x, y], vel: [vx, vy], orient: vx || vy ? heading(vx, vy) : 0 };
    state[cellOf(INFO, x * QUANT.pos_step, y * QUANT.pos_step)].push(a);
  }
  const tick0 = 1000;
  const keyframes = state.map((list, cell) => encodeServer({ type: 'keyframe', world: 1, cell, tick: tick0, checksum: checksum(list), agents: list }));
  const cellsKeyframe = encodeServer({ type: 'cells', world: 1, tick: tick0, span: 1, checksum: cellsChecksum(state), entries: state.map((agents, cell) => ({ keyframe: { cell, tick: tick0, agents } })) });
  const ticks = [];
  const cellsTicks = [];
  for (let t = 1; t <= nTicks; t++) {
    const tick = tick0 + t;
    const next = state.map(() => []);
    const changes = state.map(() => []);
    const left = state.map(() => []);
    const entered = state.map(() => []);
    for (let cell = 0; cell < cells; cell++) {
      state[cell].forEach((p, index) => {
        const big = r() < 0.2;
        const dvx = big ? Math.floor(r() * 40) - 20 : Math.floor(r() * 5) - 2;
        const dvy = big ? Math.floor(r() * 40) - 20 : Math.floor(r() * 5) - 2;
        let vx = p.vel[0] + dvx;
        let vy = p.vel[1] + dvy;
        if (Math.abs(vx) > 40) vx = -Math.sign(vx) * 10;
        if (Math.abs(vy) > 40) vy = -Math.sign(vy) * 10;
        const dpx = Math.floor(r() * 3) - 1;
        const dpy = Math.floor(r() * 3) - 1;
        let px = p.pos[0] + predict(vx, QUANT.predict_num) + dpx;
        let py = p.pos[1] + predict(vy, QUANT.predict_num) + dpy;
        if (px < 100 || px > 19900) { vx = -vx; px = Math.min(19900, Math.max(100, px)); }
        if (py < 100 || py > 19900) { vy = -vy; py = Math.min(19900, Math.max(100, py)); }
        // The entry as the server would encode it: dpos relative to the prediction.
        const edpx = px - p.pos[0] - predict(vx, QUANT.predict_num);
        const edpy = py - p.pos[1] - predict(vy, QUANT.predict_num);
        const evx = vx - p.vel[0];
        const evy = vy - p.vel[1];
        const face = (vx || vy) && r() < 0.9;
        const orient = face ? heading(vx, vy) : (p.orient + 100) % 65536;
        const a = { id: p.id, group: p.group, pos: [px, py], vel: [vx, vy], orient };
        const nc = cellOf(INFO, px * QUANT.pos_step, py * QUANT.pos_step);
        if (nc !== cell) {
          left[cell].push(p.id);
          entered[nc].push(a);
        } else {
          const e = { index, dpos: [edpx, edpy], dvel: [evx, evy] };
          if (face) e.face = true;
          else e.dorient = 100;
          changes[cell].push(e);
        }
        next[nc].push(a);
      });
    }
    const frames = [];
    const entries = [];
    for (let cell = 0; cell < cells; cell++) {
      next[cell].sort((a, b) => a.id - b.id);
      entered[cell].sort((a, b) => a.id - b.id);
      const ck = t % 10 === 0 ? checksum(next[cell]) : null;
      frames.push(encodeServer({ type: 'delta', world: 1, cell, tick, base_tick: tick - 1, checksum: ck, left: left[cell], changed: changes[cell], entered: entered[cell] }));
      entries.push({ delta: { cell, base_tick: tick - 1, left: left[cell], changed: changes[cell], entered: entered[cell] } });
    }
    ticks.push(frames);
    cellsTicks.push(encodeServer({ type: 'cells', world: 1, tick, span: 1, checksum: t % 10 === 0 ? cellsChecksum(next) : null, entries }));
    for (let c = 0; c < cells; c++) state[c] = next[c];
  }
  return { keyframes, ticks, cellsKeyframe, cellsTicks };
}

/**
 * The file the C# benchmark reads: u32 keyframe count K, u32 frames per tick F, then frames
 * (u32 LE length + bytes): K keyframes, then F per tick. With `cells`, the v4 framing: K = 1
 * (the keyframe message), F = 1 (one cells message per tick).
 */
export function writeStream(path, stream, cells = false) {
  if (cells) stream = { keyframes: [stream.cellsKeyframe], ticks: stream.cellsTicks.map((m) => [m]) };
  const all = [...stream.keyframes, ...stream.ticks.flat()];
  const size = all.reduce((n, f) => n + 4 + f.length, 0);
  const buf = Buffer.alloc(size + 8);
  let o = 0;
  buf.writeUInt32LE(stream.keyframes.length, o); o += 4;
  buf.writeUInt32LE(stream.ticks[0].length, o); o += 4;
  for (const f of all) { buf.writeUInt32LE(f.length, o); o += 4; buf.set(f, o); o += f.length; }
  writeFileSync(path, buf);
}
