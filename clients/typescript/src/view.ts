// WorldView: the agent table of one subscribed world, kept from keyframes and deltas (one
// CellMap per AOI cell, PROTOCOL.md §6), with a short history per cell for interpolated rendering.
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)

import { ProtoError, QAgent } from './codec.js';
import { CellMap, CellsTxn, applyCells } from './cell.js';
import { ClockSync } from './clock.js';
import type { Area, Cells, Delta, Keyframe, Quantization, WorldInfo } from './types.js';

/** One agent as rendered at a moment: world units, radians (0 = +x, counter-clockwise). */
export interface SampledAgent {
  id: number;
  group: number;
  x: number;
  y: number;
  /** Radians in [0, 2π). */
  heading: number;
  /** Velocity (world units / s) of the state at or before the sampled moment. */
  vx: number;
  vy: number;
}

export interface ViewOptions {
  /** How far behind the estimated server time `sample()` renders (ms, default 100 = 2 ticks at 20 Hz). */
  interpDelayMs?: number;
  /** States kept per cell for interpolation (default 8, at least 2). */
  historyLength?: number;
}

const TWO_PI = Math.PI * 2;
const ORIENT_TO_RAD = TWO_PI / 65536;

/** A copy of one cell's agents at one state tick, in flat arrays (reused, grown on demand). */
class Snap {
  tick = -1;
  n = 0;
  id = new Float64Array(0);
  group = new Int32Array(0);
  v = new Int32Array(0); // n × [px, py, vx, vy, orient]
  fill(list: readonly QAgent[], tick: number): void {
    const n = list.length;
    if (this.id.length < n) {
      const cap = Math.max(n, this.id.length * 2, 16);
      this.id = new Float64Array(cap);
      this.group = new Int32Array(cap);
      this.v = new Int32Array(cap * 5);
    }
    const id = this.id;
    const group = this.group;
    const v = this.v;
    for (let i = 0; i < n; i++) {
      const a = list[i];
      id[i] = a.id;
      group[i] = a.group;
      const o = i * 5;
      v[o] = a.pos[0];
      v[o + 1] = a.pos[1];
      v[o + 2] = a.vel[0];
      v[o + 3] = a.vel[1];
      v[o + 4] = a.orient;
    }
    this.n = n;
    this.tick = tick;
  }
}

/** A ring of the last K snapshots of one cell, oldest first. */
class History {
  readonly snaps: Snap[] = [];
  start = 0;
  n = 0;
  constructor(k: number) {
    for (let i = 0; i < k; i++) this.snaps.push(new Snap());
  }
  at(i: number): Snap {
    return this.snaps[(this.start + i) % this.snaps.length];
  }
  push(list: readonly QAgent[], tick: number): void {
    const k = this.snaps.length;
    if (this.n > 0) {
      const last = this.at(this.n - 1);
      if (tick < last.tick) this.n = 0; // older than what we hold (a resync after a reset)
      else if (tick === last.tick) this.n--; // same tick again (a keyframe after a delta): replace
    }
    if (this.n === k) {
      this.start = (this.start + 1) % k;
      this.n--;
    }
    this.at(this.n).fill(list, tick);
    this.n++;
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
  /** The subscription's send rate (`every_n_ticks`, re-sent with the area). */
  everyNTicks = 1;
  /** Highest tick of any frame applied. */
  latestTick = -1;
  /**
   * Keyframes and deltas applied (a `cells` message counts each of its entries), `cells`
   * messages applied, and frames that could not be (each leads to a resubscribe).
   */
  keyframes = 0;
  deltas = 0;
  cellsMessages = 0;
  resyncs = 0;
  /** `span` of the last `cells` message (the subscription's every_n_ticks); 0 before one. */
  span = 0;
  /** Tick of the last `cells` message applied; -1 before one. */
  cellsTick = -1;
  /** Clock of this world's ticks: Ping/Pong samples when it is the connection's first subscribed world. */
  readonly clock = new ClockSync();
  interpDelayMs: number;

  /** Called with a reason when the view needs keyframes again (the client resubscribes). */
  onResync: (reason: string) => void = () => {};

  private readonly history = new Map<number, History>();
  private readonly txn = new CellsTxn();
  private readonly k: number;
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
    const key = (w: WorldInfo): string => JSON.stringify([w.bounds, w.aoi_cell_size, w.cols, w.rows]);
    const changed = key(info) !== key(this.info) || JSON.stringify(quant) !== JSON.stringify(this.quant);
    this.info = info;
    this.quant = quant;
    this.clock.setRate(tickRate);
    if (changed) this.clear();
  }

  /** Forgets every cell. */
  clear(): void {
    this.cells.clear();
    this.history.clear();
    this.subscribedCells = null;
    this.latestTick = -1;
  }

  /** The Subscribed answer: drop the cells no longer covered. */
  subscribed(cells: number[]): void {
    this.subscribedCells = new Set(cells);
    for (const c of this.cells.keys()) {
      if (this.subscribedCells.has(c)) continue;
      this.cells.delete(c);
      this.history.delete(c);
    }
  }

  /** Applies a keyframe of this world (`nowMs`: local arrival time). */
  keyframe(k: Keyframe, nowMs = NaN): void {
    if (this.subscribedCells && !this.subscribedCells.has(k.cell)) return;
    let cell = this.cells.get(k.cell);
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
    this.remember(k.cell, cell, k.tick, nowMs);
  }

  /** Applies a delta of this world; a chain break or a bad frame resyncs. */
  delta(d: Delta, nowMs = NaN): void {
    const cell = this.cells.get(d.cell);
    if (!cell) return; // not (yet) ours: its keyframe comes first
    try {
      if (!cell.delta(d, this.quant.predict_num)) {
        this.resync(`cell ${d.cell}: delta ${d.base_tick}→${d.tick} on a cell held at ${cell.tick}`);
        return;
      }
    } catch (e) {
      if (!(e instanceof ProtoError)) throw e;
      this.resync(`cell ${d.cell}: ${e.message}`);
      return;
    }
    this.deltas++;
    this.remember(d.cell, cell, d.tick, nowMs);
  }

  /**
   * Applies a `cells` message of this world (§6.8): every entry in order, then the message
   * checksum (when present) over the cells' states. A chain break, a malformed entry (a cell
   * outside the grid, a rule of §6.4) or a checksum mismatch puts every cell back to what it
   * held before the message and resyncs. Entries for cells the view no longer subscribes (a
   * message sent before a narrower Subscribe took effect) are skipped; a message with a skipped
   * delta entry cannot be checked against its checksum (the base is not held) and is applied
   * unchecked.
   */
  applyCells(m: Cells, nowMs = NaN): void {
    const why = applyCells(this.cells, m, this.info, this.quant.predict_num, this.subscribedCells, this.txn);
    if (why !== null) {
      this.resync(why);
      return;
    }
    this.cellsMessages++;
    this.span = m.span;
    this.cellsTick = m.tick;
    for (const e of m.entries) {
      const c = 'keyframe' in e ? e.keyframe.cell : e.delta.cell;
      const cell = this.cells.get(c);
      if (!cell) continue;
      if ('keyframe' in e) {
        if (this.subscribedCells && !this.subscribedCells.has(c)) continue;
        this.keyframes++;
      } else this.deltas++;
      this.remember(c, cell, cell.tick, nowMs);
    }
  }

  /** A frame could not be applied: the client subscribes again (same area) for keyframes. */
  resync(reason: string): void {
    this.resyncs++;
    this.onResync(reason);
  }

  private remember(c: number, cell: CellMap, tick: number, nowMs: number): void {
    let h = this.history.get(c);
    if (!h) this.history.set(c, (h = new History(this.k)));
    h.push(cell.agents, tick);
    if (tick > this.latestTick) {
      this.latestTick = tick;
      this.latestArrivalMs = nowMs;
    }
  }

  /** Number of agents in the view. */
  get size(): number {
    let n = 0;
    for (const c of this.cells.values()) n += c.agents.length;
    return n;
  }

  /** The agent table (quantized records, §6.1) sorted by id: the union of the cells. Records are live. */
  agents(): QAgent[] {
    const out: QAgent[] = [];
    for (const c of this.cells.values()) for (const a of c.agents) out.push(a);
    return out.sort((a, b) => a.id - b.id);
  }

  /** One agent's latest quantized record, or undefined. */
  agent(id: number): QAgent | undefined {
    for (const c of this.cells.values()) {
      const list = c.agents;
      let lo = 0;
      let hi = list.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1;
        if (list[mid].id === id) return list[mid];
        if (list[mid].id < id) lo = mid + 1;
        else hi = mid - 1;
      }
    }
    return undefined;
  }

  /** Ticks between two states sent (the subscription's every_n_ticks, at least 1). */
  private period(): number {
    return Math.max(1, this.everyNTicks);
  }

  /** Estimated server tick (fractional) at local time `nowMs`. */
  serverTick(nowMs: number): number {
    if (this.clock.synced) return this.clock.serverTick(nowMs);
    // No Ping/Pong samples for this world: the newest frame's arrival stands in.
    if (this.latestTick < 0 || !Number.isFinite(this.latestArrivalMs)) return this.latestTick;
    return this.latestTick + ((nowMs - this.latestArrivalMs) * this.tickRate) / 1000;
  }

  /**
   * The tick `sample(nowMs)` renders: server time − interpDelay, at most one send period (one
   * tick, or `everyNTicks`) past the newest state.
   */
  renderTick(nowMs: number): number {
    const st = this.serverTick(nowMs) - (this.interpDelayMs * this.tickRate) / 1000;
    if (!Number.isFinite(st)) return this.latestTick;
    return Math.min(st, this.latestTick + this.period());
  }

  /**
   * Every agent of the view at local time `renderTimeMs` (default `performance.now()`):
   * positions and headings interpolated between the two states around `renderTick` (each agent
   * as its cell held it then), extrapolated along the velocity by at most one send period past
   * the newest state. With `everyNTicks` N a cell's change reached at state tick t happened
   * somewhere in the N ticks before t: it is interpolated over them (give `interpDelayMs` at
   * least one send period, N / tick rate, to render between states rather than ahead of them). The returned array and its objects are reused by the next call.
   */
  sample(renderTimeMs: number = now()): SampledAgent[] {
    const target = this.renderTick(renderTimeMs);
    const out = this.out;
    const pool = this.pool;
    const ps = this.quant.pos_step;
    const vs = this.quant.vel_step;
    const period = this.period();
    const rate = this.tickRate;
    let n = 0;
    for (const h of this.history.values()) {
      if (h.n === 0) continue;
      // s0: newest snapshot at or before target (the oldest if none); s1: the one after it.
      let i = h.n - 1;
      while (i > 0 && h.at(i).tick > target) i--;
      const s0 = h.at(i);
      const s1 = i < h.n - 1 && s0.tick <= target ? h.at(i + 1) : null;
      let f = 0;
      let ext = 0;
      if (s1) {
        // The cell held s0 until the tick before s1.
        const t1 = Math.max(s0.tick, s1.tick - period);
        if (target > t1) f = (target - t1) / (s1.tick - t1);
      } else if (target > s0.tick) {
        ext = Math.min(target - s0.tick, period) / rate; // seconds of extrapolation
      }
      const ids = s0.id;
      const v0 = s0.v;
      const ids1 = s1 ? s1.id : null;
      const v1 = s1 ? s1.v : null;
      const n1 = s1 ? s1.n : 0;
      let j = 0;
      for (let a = 0; a < s0.n; a++) {
        const id = ids[a];
        const o = a * 5;
        let x = v0[o];
        let y = v0[o + 1];
        const vx = v0[o + 2];
        const vy = v0[o + 3];
        let hd = v0[o + 4];
        if (f > 0 && ids1 && v1) {
          while (j < n1 && ids1[j] < id) j++;
          if (j < n1 && ids1[j] === id) {
            const p = j * 5;
            x += (v1[p] - x) * f;
            y += (v1[p + 1] - y) * f;
            let dh = v1[p + 4] - hd;
            if (dh > 32768) dh -= 65536;
            else if (dh < -32768) dh += 65536;
            hd += dh * f;
          }
        } else if (ext > 0) {
          x += (vx * vs * ext) / ps;
          y += (vy * vs * ext) / ps;
        }
        let s = pool[n];
        if (!s) s = pool[n] = { id: 0, group: 0, x: 0, y: 0, heading: 0, vx: 0, vy: 0 };
        s.id = id;
        s.group = s0.group[a];
        s.x = x * ps;
        s.y = y * ps;
        let rad = hd * ORIENT_TO_RAD;
        if (rad >= TWO_PI) rad -= TWO_PI;
        else if (rad < 0) rad += TWO_PI;
        s.heading = rad;
        s.vx = vx * vs;
        s.vy = vy * vs;
        out[n++] = s;
      }
    }
    out.length = n;
    return out;
  }
}

function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
