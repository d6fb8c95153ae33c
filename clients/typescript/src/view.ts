// WorldView: the agent table of one subscribed world, kept from keyframes and deltas (one
// CellMap per AOI cell, PROTOCOL.md §6), with per-agent history for interpolated rendering.

import { ProtoError, QAgent } from './codec.js';
import { CellMap } from './cell.js';
import { ClockSync } from './clock.js';
import type { Area, Delta, Keyframe, Quantization, WorldInfo } from './types.js';

/** One agent as rendered at a moment: world units, radians (0 = +x, counter-clockwise). */
export interface SampledAgent {
  id: number;
  group: number;
  x: number;
  y: number;
  heading: number;
  /** Velocity (world units / s) of the latest state at or before the sampled moment. */
  vx: number;
  vy: number;
}

export interface ViewOptions {
  /** How far behind the estimated server time `sample()` renders (ms, default 100 = 2 ticks at 20 Hz). */
  interpDelayMs?: number;
  /** States kept per agent for interpolation (default 8, at least 2). */
  historyLength?: number;
}

const TWO_PI = Math.PI * 2;
const ORIENT_TO_RAD = TWO_PI / 65536;
/** Ticks a vanished agent's track is kept (it may re-enter through another cell's delta). */
const GONE_GRACE_TICKS = 2;

/** The recent states of one agent: a ring of (tick, pos, vel, orient) in quantized units. */
class Track {
  id: number;
  group = 0;
  /** Cell holding the agent, or -1 once it left the view. */
  cell = -1;
  goneTick = 0;
  n = 0;
  start = 0;
  readonly d: Float64Array; // K × [tick, px, py, vx, vy, orient]
  constructor(id: number, k: number) {
    this.id = id;
    this.d = new Float64Array(6 * k);
  }
}

export class WorldView {
  /** The world (from Welcome). */
  info: WorldInfo;
  /** Quantization of the stream (from Welcome). */
  quant: Quantization;
  /** Per-cell agent maps. */
  readonly cells = new Map<number, CellMap>();
  /** Cells of the last Subscribed answer (null before it). */
  subscribedCells: Set<number> | null = null;
  /** The area last subscribed (re-sent on a resync or a reconnect). */
  area: Area;
  /** Highest tick of any frame applied. */
  latestTick = -1;
  /** Frames applied, chain breaks / bad frames seen (each leads to a resubscribe). */
  keyframes = 0;
  deltas = 0;
  resyncs = 0;
  /** Clock of this world's ticks: Ping/Pong samples when it is the connection's first subscribed world. */
  readonly clock = new ClockSync();
  interpDelayMs: number;

  /** Called with a reason when the view needs keyframes again (the client resubscribes). */
  onResync: (reason: string) => void = () => {};

  private readonly tracks = new Map<number, Track>();
  private readonly gone = new Set<Track>();
  private readonly k: number;
  private readonly touched: QAgent[] = [];
  private readonly pool: SampledAgent[] = [];
  private readonly out: SampledAgent[] = [];
  private latestArrivalMs = NaN;

  constructor(info: WorldInfo, quant: Quantization, tickRate: number, area: Area, opts: ViewOptions = {}) {
    this.info = info;
    this.quant = quant;
    this.area = area;
    this.clock.setRate(tickRate);
    this.interpDelayMs = opts.interpDelayMs ?? 100;
    this.k = Math.max(2, opts.historyLength ?? 8);
  }

  get tickRate(): number {
    return this.clock.tickRate;
  }

  /** A new Welcome (reconnect): same world name, maybe a new id, quantization or grid. */
  rebind(info: WorldInfo, quant: Quantization, tickRate: number): void {
    const grid = JSON.stringify([info.bounds, info.aoi_cell_size, info.cols, info.rows]) !== JSON.stringify([this.info.bounds, this.info.aoi_cell_size, this.info.cols, this.info.rows]);
    const q = JSON.stringify(quant) !== JSON.stringify(this.quant);
    this.info = info;
    this.quant = quant;
    this.clock.setRate(tickRate);
    if (grid || q) this.clear();
  }

  /** Forgets every cell and track. */
  clear(): void {
    this.cells.clear();
    this.tracks.clear();
    this.gone.clear();
    this.subscribedCells = null;
    this.latestTick = -1;
  }

  /** The Subscribed answer: drop the cells no longer covered. */
  subscribed(cells: number[]): void {
    this.subscribedCells = new Set(cells);
    for (const [c, m] of this.cells) {
      if (this.subscribedCells.has(c)) continue;
      this.cells.delete(c);
      for (const a of m.agents) this.markGone(a.id, c);
    }
  }

  /** Applies a keyframe of this world. */
  keyframe(k: Keyframe, nowMs = NaN): void {
    if (this.subscribedCells && !this.subscribedCells.has(k.cell)) return;
    let cell = this.cells.get(k.cell);
    const old = cell ? cell.agents : [];
    if (!cell) {
      cell = new CellMap();
      this.cells.set(k.cell, cell);
    }
    try {
      cell.keyframe(k);
    } catch (e) {
      if (!(e instanceof ProtoError)) throw e;
      this.resync(`cell ${k.cell}: ${e.message}`);
      return;
    }
    this.keyframes++;
    // Agents of the old map that are not in the new one left the cell.
    const now = cell.agents;
    let j = 0;
    for (const a of old) {
      while (j < now.length && now[j].id < a.id) j++;
      if (j >= now.length || now[j].id !== a.id) this.markGone(a.id, k.cell);
    }
    for (const a of now) this.record(a, k.tick, k.cell);
    this.noteTick(k.tick, nowMs);
  }

  /** Applies a delta of this world; a chain break or a bad frame resyncs. */
  delta(d: Delta, nowMs = NaN): void {
    const cell = this.cells.get(d.cell);
    if (!cell) return; // not (yet) ours: its keyframe comes first
    const touched = this.touched;
    touched.length = 0;
    try {
      if (!cell.delta(d, this.quant.predict_num, touched)) {
        this.resync(`cell ${d.cell}: delta ${d.base_tick}→${d.tick} on a cell held at ${cell.tick}`);
        return;
      }
    } catch (e) {
      if (!(e instanceof ProtoError)) throw e;
      this.resync(`cell ${d.cell}: ${e.message}`);
      return;
    }
    this.deltas++;
    for (const id of d.left) this.markGone(id, d.cell, d.tick);
    for (let i = 0; i < touched.length; i++) this.record(touched[i], d.tick, d.cell);
    touched.length = 0;
    this.noteTick(d.tick, nowMs);
  }

  /** A frame could not be applied: the client subscribes again (same area) for keyframes. */
  resync(reason: string): void {
    this.resyncs++;
    this.onResync(reason);
  }

  private noteTick(tick: number, nowMs: number): void {
    if (tick > this.latestTick) {
      this.latestTick = tick;
      this.latestArrivalMs = nowMs;
      if (this.gone.size) {
        for (const t of this.gone) {
          if (t.cell !== -1) this.gone.delete(t);
          else if (tick - t.goneTick > GONE_GRACE_TICKS) {
            this.gone.delete(t);
            if (this.tracks.get(t.id) === t) this.tracks.delete(t.id);
          }
        }
      }
    }
  }

  private markGone(id: number, cell: number, tick = this.latestTick): void {
    const t = this.tracks.get(id);
    if (!t || t.cell !== cell) return; // already re-entered elsewhere
    t.cell = -1;
    t.goneTick = tick;
    this.gone.add(t);
  }

  private record(a: QAgent, tick: number, cell: number): void {
    let t = this.tracks.get(a.id);
    if (!t) {
      t = new Track(a.id, this.k);
      this.tracks.set(a.id, t);
    }
    t.cell = cell;
    t.group = a.group;
    const d = t.d;
    const k = this.k;
    if (t.n > 0) {
      const last = ((t.start + t.n - 1) % k) * 6;
      const lt = d[last];
      if (tick < lt) {
        t.n = 0; // older than what we hold (a resync after a reset): start again
      } else if (tick === lt) {
        t.n--; // same tick again (a keyframe after a delta): replace
      }
    }
    if (t.n === k) {
      t.start = (t.start + 1) % k;
      t.n--;
    }
    const o = ((t.start + t.n) % k) * 6;
    d[o] = tick;
    d[o + 1] = a.pos[0];
    d[o + 2] = a.pos[1];
    d[o + 3] = a.vel[0];
    d[o + 4] = a.vel[1];
    d[o + 5] = a.orient;
    t.n++;
  }

  /** Number of agents in the view. */
  get size(): number {
    let n = 0;
    for (const c of this.cells.values()) n += c.agents.length;
    return n;
  }

  /** The agent table (quantized records, §6.1) sorted by id: the union of the cells. */
  agents(): QAgent[] {
    const out: QAgent[] = [];
    for (const c of this.cells.values()) for (const a of c.agents) out.push(a);
    return out.sort((a, b) => a.id - b.id);
  }

  /** One agent's latest quantized record, or undefined. */
  agent(id: number): QAgent | undefined {
    const t = this.tracks.get(id);
    if (!t || t.cell === -1) return undefined;
    const c = this.cells.get(t.cell);
    if (!c) return undefined;
    const list = c.agents;
    let lo = 0;
    let hi = list.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid].id === id) return list[mid];
      if (list[mid].id < id) lo = mid + 1;
      else hi = mid - 1;
    }
    return undefined;
  }

  /** Estimated server tick (fractional) at local time `nowMs`; NaN before any frame. */
  serverTick(nowMs: number): number {
    if (this.clock.synced) return this.clock.serverTick(nowMs);
    // No Ping/Pong samples for this world: the newest frame's arrival stands in.
    if (this.latestTick < 0 || !Number.isFinite(this.latestArrivalMs)) return this.latestTick;
    return this.latestTick + ((nowMs - this.latestArrivalMs) * this.tickRate) / 1000;
  }

  /** The tick `sample(nowMs)` renders: server time − interpDelay, at most one tick past the newest state. */
  renderTick(nowMs: number): number {
    const st = this.serverTick(nowMs) - (this.interpDelayMs * this.tickRate) / 1000;
    if (!Number.isFinite(st)) return this.latestTick;
    return Math.min(st, this.latestTick + 1);
  }

  /**
   * Every agent of the view at local time `renderTimeMs` (default `performance.now()`):
   * positions and headings interpolated between the two states around `renderTick`,
   * extrapolated along the velocity by at most one tick past the newest state. The returned
   * array and its objects are reused by the next call.
   */
  sample(renderTimeMs: number = now()): SampledAgent[] {
    const target = this.renderTick(renderTimeMs);
    const out = this.out;
    const pool = this.pool;
    const k = this.k;
    const ps = this.quant.pos_step;
    const vs = this.quant.vel_step;
    const rate = this.tickRate;
    let n = 0;
    for (const t of this.tracks.values()) {
      if (t.cell === -1 || t.n === 0) continue;
      const d = t.d;
      let s = pool[n];
      if (!s) s = pool[n] = { id: 0, group: 0, x: 0, y: 0, heading: 0, vx: 0, vy: 0 };
      s.id = t.id;
      s.group = t.group;
      // Newest state at or before target.
      let i = t.n - 1;
      let o = ((t.start + i) % k) * 6;
      while (i > 0 && d[o] > target) {
        i--;
        o = ((t.start + i) % k) * 6;
      }
      let x = d[o + 1];
      let y = d[o + 2];
      let h = d[o + 5];
      const vx = d[o + 3];
      const vy = d[o + 4];
      if (i < t.n - 1 && d[o] <= target) {
        // Between state i and i+1. The agent held state i until the tick before i+1.
        const o2 = ((t.start + i + 1) % k) * 6;
        const t2 = d[o2];
        const t1 = Math.max(d[o], t2 - 1);
        if (target > t1) {
          const f = (target - t1) / (t2 - t1);
          x += (d[o2 + 1] - x) * f;
          y += (d[o2 + 2] - y) * f;
          let dh = d[o2 + 5] - h;
          if (dh > 32768) dh -= 65536;
          else if (dh < -32768) dh += 65536;
          h += dh * f;
        }
      } else if (i === t.n - 1 && target > d[o] && (vx !== 0 || vy !== 0)) {
        // Past the newest state: extrapolate at most one tick.
        const dt = Math.min(target - d[o], 1) / rate;
        x += (vx * vs * dt) / ps;
        y += (vy * vs * dt) / ps;
      }
      s.x = x * ps;
      s.y = y * ps;
      let rad = h * ORIENT_TO_RAD;
      if (rad >= TWO_PI) rad -= TWO_PI;
      else if (rad < 0) rad += TWO_PI;
      s.heading = rad;
      s.vx = vx * vs;
      s.vy = vy * vs;
      out[n++] = s;
    }
    out.length = n;
    return out;
  }
}

function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
