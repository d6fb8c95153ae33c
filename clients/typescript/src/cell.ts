// The client side of one (world, cell): the sorted agent list at a state tick, keyframes and the
// delta chain (PROTOCOL.md §6.3, §6.4), checksum verification (§6.5).
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)

import { ProtoError, Packed, QAgent, ChangeEntry, ChangeScratch, readChange, malformed, heading, predict, checksum, cellsChecksum } from './codec.js';
import type { Keyframe, Delta, Cells } from './types.js';

/**
 * Maps the `index` of binary `changed` entries to agent ids through `base` (the cell's agents at
 * `base_tick`, sorted by id). Returns entries in the JSON form (§6.6). Throws `malformed` on an
 * index out of range.
 */
export function resolveChanged(changed: ChangeEntry[], base: readonly QAgent[]): ChangeEntry[] {
  return changed.map((c) => {
    if (c.id !== undefined) return c;
    const a = c.index === undefined ? undefined : base[c.index];
    if (!a) throw malformed(`changed base index ${c.index} out of range (${base.length} agents held)`);
    const { index, ...rest } = c;
    void index;
    return { id: a.id, ...rest };
  });
}

/** Index of `id` in the sorted `list`, or -1. */
function indexOfId(list: readonly QAgent[], id: number): number {
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = list[mid].id;
    if (v === id) return mid;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/** Feeds change records one at a time into a scratch object: from packed bytes or entries. */
class ChangeSource {
  private packed: Packed | null = null;
  private entries: ChangeEntry[] | null = null;
  private k = 0;
  readonly c: ChangeScratch = { index: -1, m: 0, dpx: 0, dpy: 0, dvx: 0, dvy: 0, o: 0, d: 0 };
  reset(changed: ChangeEntry[] | Uint8Array, base: readonly QAgent[]): void {
    this.c.index = -1;
    this.k = 0;
    if (changed instanceof Uint8Array) {
      this.packed = new Packed(changed);
      this.entries = null;
    } else {
      this.packed = null;
      // JSON entries name agents by id: map them to base indices (the state we hold).
      this.entries = changed.map((e) => {
        if (e.index !== undefined) return e;
        const i = e.id === undefined ? -1 : indexOfId(base, e.id);
        if (i < 0) throw malformed(`changed agent ${e.id} not held`);
        return { ...e, index: i };
      });
    }
  }
  /** Next record into `c`; false at the end. */
  next(): boolean {
    const c = this.c;
    if (this.packed) {
      if (this.packed.done()) return false;
      readChange(this.packed, c.index, c);
      return true;
    }
    const list = this.entries as ChangeEntry[];
    if (this.k >= list.length) return false;
    const e = list[this.k++];
    const index = e.index as number;
    if (!Number.isInteger(index) || index <= c.index) throw malformed('changed entries not in increasing order');
    c.index = index;
    if (e.dpos || e.dvel) {
      if (!e.dpos || !e.dvel) throw malformed('dpos and dvel must be both present or both absent');
      c.m = 2;
      c.dpx = e.dpos[0];
      c.dpy = e.dpos[1];
      c.dvx = e.dvel[0];
      c.dvy = e.dvel[1];
    } else c.m = 0;
    if (e.face && e.dorient !== undefined) throw malformed('at most one of face / dorient');
    c.o = e.face ? 1 : e.dorient !== undefined ? 2 : 0;
    c.d = e.dorient ?? 0;
    return true;
  }
}

const source = new ChangeSource();

/** New values of the changed agents of one delta (index, px, py, vx, vy, orient per change). */
let scratch = new Int32Array(6 * 256);
/** Their previous values, to roll back a delta whose checksum does not match. */
let saved = new Int32Array(6 * 256);

/** Validated delta, ready to commit: the new list and the changes to write into records. */
interface Plan {
  out: QAgent[];
  n: number;
}

/**
 * Checks a delta against `base` (§6.4) and computes the result without touching any record:
 * the new sorted list (unchanged and changed records, plus entered ones) and, in `scratch`, the
 * new values of the changed records. Throws `malformed` when a rule is broken.
 */
function plan(base: readonly QAgent[], delta: Pick<Delta, 'left' | 'changed' | 'entered'>, predictNum: number, touched?: QAgent[]): Plan {
  const { left, entered } = delta;
  const src = source;
  src.reset(delta.changed, base);
  const c = src.c;
  let haveChange = src.next();
  const out: QAgent[] = [];
  let li = 0;
  let ei = 0;
  let prevEntered = -1;
  let n = 0;
  const len = base.length;
  for (let i = 0; i < len; i++) {
    const a = base[i];
    const id = a.id;
    if (li < left.length && left[li] <= id) {
      if (left[li] < id) throw malformed(`left agent ${left[li]} not in the cell`);
      li++;
      if (haveChange && c.index === i) throw malformed(`changed agent ${id} is also in left`);
      continue;
    }
    if (haveChange && c.index === i) {
      let vx = a.vel[0];
      let vy = a.vel[1];
      let px = a.pos[0];
      let py = a.pos[1];
      if (c.m !== 0) {
        vx = (vx + c.dvx) | 0;
        vy = (vy + c.dvy) | 0;
        px = (px + predict(vx, predictNum) + c.dpx) | 0;
        py = (py + predict(vy, predictNum) + c.dpy) | 0;
      }
      let orient = a.orient;
      if (c.o === 1) orient = heading(vx, vy);
      else if (c.o === 2) orient = (((orient + c.d) % 65536) + 65536) % 65536;
      if (6 * (n + 1) > scratch.length) {
        const bigger = new Int32Array(scratch.length * 2);
        bigger.set(scratch);
        scratch = bigger;
      }
      const o = 6 * n++;
      scratch[o] = i;
      scratch[o + 1] = px;
      scratch[o + 2] = py;
      scratch[o + 3] = vx;
      scratch[o + 4] = vy;
      scratch[o + 5] = orient;
      if (touched) touched.push(a);
      haveChange = src.next();
    }
    while (ei < entered.length && entered[ei].id < id) {
      const e = entered[ei++];
      if (e.id <= prevEntered) throw malformed('entered records not sorted by id');
      prevEntered = e.id;
      out.push(e);
      if (touched) touched.push(e);
    }
    if (ei < entered.length && entered[ei].id === id) throw malformed(`entered agent ${id} already in the cell`);
    out.push(a);
  }
  if (li < left.length) throw malformed(`left agent ${left[li]} not in the cell`);
  if (haveChange) throw malformed(`changed base index ${c.index} out of range (${len} agents held)`);
  while (ei < entered.length) {
    const e = entered[ei++];
    if (e.id <= prevEntered) throw malformed('entered records not sorted by id');
    prevEntered = e.id;
    out.push(e);
    if (touched) touched.push(e);
  }
  return { out, n };
}

/** Room for `n` more saved changes (6 values each) at `off` in `buf`; returns the buffer to use. */
function room(buf: Int32Array<ArrayBuffer>, need: number): Int32Array<ArrayBuffer> {
  if (need <= buf.length) return buf;
  const bigger = new Int32Array(Math.max(need, buf.length * 2));
  bigger.set(buf);
  return bigger;
}

/**
 * Writes the planned values into the changed records, keeping the old ones in `dst` from `off`
 * (6 values per change: base index, px, py, vx, vy, orient; the caller made room).
 */
function commit(base: readonly QAgent[], n: number, dst: Int32Array, off: number): void {
  for (let k = 0; k < n; k++) {
    const o = 6 * k;
    const i = scratch[o];
    const a = base[i];
    const s = off + o;
    dst[s] = i;
    dst[s + 1] = a.pos[0];
    dst[s + 2] = a.pos[1];
    dst[s + 3] = a.vel[0];
    dst[s + 4] = a.vel[1];
    dst[s + 5] = a.orient;
    a.pos[0] = scratch[o + 1];
    a.pos[1] = scratch[o + 2];
    a.vel[0] = scratch[o + 3];
    a.vel[1] = scratch[o + 4];
    a.orient = scratch[o + 5];
  }
}

/** Puts back the values `commit` saved in `src` from `off`. */
function rollback(base: readonly QAgent[], n: number, src: Int32Array, off: number): void {
  for (let k = 0; k < n; k++) {
    const s = off + 6 * k;
    const a = base[src[s]];
    a.pos[0] = src[s + 1];
    a.pos[1] = src[s + 2];
    a.vel[0] = src[s + 3];
    a.vel[1] = src[s + 4];
    a.orient = src[s + 5];
  }
}

/** One applied entry of a `CellsTxn`: what the map held before, and where its saved records are. */
interface Step {
  map: CellMap;
  tick: number;
  agents: QAgent[];
  off: number;
  n: number;
}

/**
 * Undo log of one `cells` message (§6.8): its entries are applied one after the other (each a
 * keyframe or a delta of one CellMap, records updated in place), and when a later entry breaks a
 * rule or the message checksum does not match, `rollback()` puts every map back to what it held
 * before the message. Reused from message to message (no allocation per record).
 */
export class CellsTxn {
  private vals = new Int32Array(6 * 1024);
  private nv = 0;
  private readonly steps: Step[] = [];
  private nsteps = 0;

  /** Starts a message: forgets the previous one (it was kept). */
  begin(): void {
    this.nv = 0;
    this.nsteps = 0;
  }

  /** Number of entries applied since `begin`. */
  get size(): number {
    return this.nsteps;
  }

  private step(map: CellMap, n: number): Step {
    let st = this.steps[this.nsteps];
    if (!st) this.steps[this.nsteps] = st = { map, tick: 0, agents: [], off: 0, n: 0 };
    this.nsteps++;
    st.map = map;
    st.tick = map.tick;
    st.agents = map.agents;
    st.off = this.nv;
    st.n = n;
    return st;
  }

  /** Called by CellMap: a keyframe entry replaces the map's list. */
  keyframe(map: CellMap): void {
    this.step(map, 0);
  }

  /** Called by CellMap: commits a planned delta of `n` changes, saving the old values. */
  delta(map: CellMap, n: number): void {
    const st = this.step(map, n);
    this.vals = room(this.vals, this.nv + 6 * n);
    commit(map.agents, n, this.vals, st.off);
    this.nv += 6 * n;
  }

  /** Puts every map touched since `begin` back to its state before the message. */
  rollback(): void {
    for (let i = this.nsteps - 1; i >= 0; i--) {
      const st = this.steps[i];
      rollback(st.agents, st.n, this.vals, st.off);
      st.map.agents = st.agents;
      st.map.tick = st.tick;
    }
    this.nsteps = 0;
    this.nv = 0;
  }
}

/**
 * Applies a delta (binary or JSON form; `changed` as entries or packed bytes) to `base` (sorted
 * agents at `base_tick`) and returns the new sorted list. Returns new records for the changed
 * agents and leaves `base` untouched (CellMap updates its own records in place instead).
 * Verifies the rules of §6.4 and throws `malformed` when broken.
 */
export function applyDelta(base: readonly QAgent[], delta: Pick<Delta, 'left' | 'changed' | 'entered'>, predictNum: number): QAgent[] {
  const copy = base.map((a) => ({ id: a.id, group: a.group, pos: [a.pos[0], a.pos[1]] as [number, number], vel: [a.vel[0], a.vel[1]] as [number, number], orient: a.orient }));
  const p = plan(copy, delta, predictNum);
  saved = room(saved, 6 * p.n);
  commit(copy, p.n, saved, 0);
  return p.out;
}

/**
 * One (world, cell): the sorted agents at `tick`. `delta()` returns true when applied, false on a
 * chain break (the caller resubscribes); both throw ProtoError on a malformed frame or a checksum
 * mismatch (`kind` "checksum"), leaving the held state as it was.
 *
 * The records are the map's own and are updated in place by deltas (no allocation per agent
 * and tick): copy one to keep it. Do not share record objects between two CellMaps.
 */
export class CellMap {
  /** State tick of `agents`; -1 before the first keyframe. */
  tick = -1;
  agents: QAgent[] = [];
  /** `txn`: a `cells` entry (the message's `CellsTxn` can undo it). */
  keyframe(k: Pick<Keyframe, 'cell' | 'tick' | 'checksum' | 'agents'>, txn?: CellsTxn): void {
    const list = k.agents;
    for (let i = 1; i < list.length; i++) if (list[i].id <= list[i - 1].id) throw malformed('keyframe agents not sorted by id');
    if (k.checksum !== null && checksum(list) !== k.checksum) throw new ProtoError('checksum', `keyframe checksum mismatch in cell ${k.cell}`);
    if (txn) txn.keyframe(this);
    this.tick = k.tick;
    this.agents = list;
  }
  /**
   * `touched`: the changed and entered records are appended to it. `txn`: a `cells` entry (the
   * message's `CellsTxn` can undo it).
   */
  delta(d: Pick<Delta, 'cell' | 'tick' | 'base_tick' | 'checksum' | 'left' | 'changed' | 'entered'>, predictNum: number, touched?: QAgent[], txn?: CellsTxn): boolean {
    if (this.tick !== d.base_tick || !(d.tick > d.base_tick)) return false;
    const mark = touched ? touched.length : 0;
    let p: Plan;
    try {
      p = plan(this.agents, d, predictNum, touched);
    } catch (e) {
      if (touched) touched.length = mark;
      throw e;
    }
    if (txn) {
      // A cells entry carries no checksum of its own: the message's is verified after all entries.
      txn.delta(this, p.n);
      this.tick = d.tick;
      this.agents = p.out;
      return true;
    }
    saved = room(saved, 6 * p.n);
    commit(this.agents, p.n, saved, 0);
    if (d.checksum !== null && checksum(p.out) !== d.checksum) {
      rollback(this.agents, p.n, saved, 0);
      if (touched) touched.length = mark;
      throw new ProtoError('checksum', `delta checksum mismatch in cell ${d.cell} at tick ${d.tick}`);
    }
    this.tick = d.tick;
    this.agents = p.out;
    return true;
  }
}

const cellsStates: QAgent[][] = [];
const cellsCreated: number[] = [];

/**
 * Applies a `cells` message (§6.8) to the per-cell maps of its world (`cells`, created for
 * keyframe entries as needed): every entry in order, then the message checksum (when present)
 * over the cells' states. Returns null when applied, or the reason it was not: a chain break, a
 * malformed entry (a cell outside the `grid`, a rule of §6.4) or a checksum mismatch, in which
 * case every map is back to what it held before the message (`txn` undoes the applied entries,
 * maps it created are removed) and the caller resyncs.
 *
 * `subscribed` (the cells of the last Subscribed answer, or null): keyframe entries of other
 * cells (sent before a narrower Subscribe took effect) are not kept but still checked; delta
 * entries of cells not held are skipped (their keyframe comes first), and a message with one
 * cannot be checked against its checksum (the base is not held): it is applied unchecked.
 */
export function applyCells(
  cells: Map<number, CellMap>, m: Pick<Cells, 'tick' | 'checksum' | 'entries'>, grid: { cols: number; rows: number },
  predictNum: number, subscribed: Set<number> | null, txn: CellsTxn,
): string | null {
  const ncells = grid.cols * grid.rows;
  const states = m.checksum !== null ? cellsStates : null;
  cellsStates.length = 0;
  let verifiable = true;
  const created = cellsCreated;
  created.length = 0;
  txn.begin();
  const undo = (): void => {
    txn.rollback();
    for (const c of created) cells.delete(c);
  };
  try {
    for (const e of m.entries) {
      if ('keyframe' in e) {
        const k = e.keyframe;
        if (!(k.cell < ncells)) throw malformed(`keyframe entry of cell ${k.cell} outside the world's ${ncells} cells`);
        if (subscribed && !subscribed.has(k.cell)) {
          const list = k.agents;
          for (let i = 1; i < list.length; i++) if (list[i].id <= list[i - 1].id) throw malformed('keyframe agents not sorted by id');
          if (states) states.push(list);
          continue;
        }
        let cell = cells.get(k.cell);
        if (!cell) {
          cell = new CellMap();
          cells.set(k.cell, cell);
          created.push(k.cell);
        }
        cell.keyframe({ cell: k.cell, tick: k.tick, checksum: null, agents: k.agents }, txn);
        if (states) states.push(cell.agents);
      } else {
        const d = e.delta;
        if (!(d.cell < ncells)) throw malformed(`delta entry of cell ${d.cell} outside the world's ${ncells} cells`);
        const cell = cells.get(d.cell);
        if (!cell) {
          verifiable = false;
          continue;
        }
        const frame = { cell: d.cell, tick: m.tick, base_tick: d.base_tick, checksum: null, left: d.left, changed: d.changed, entered: d.entered };
        if (!cell.delta(frame, predictNum, undefined, txn)) {
          undo();
          return `cell ${d.cell}: delta entry ${d.base_tick}→${m.tick} on a cell held at ${cell.tick}`;
        }
        if (states) states.push(cell.agents);
      }
    }
    if (states && verifiable && cellsChecksum(states) !== m.checksum) {
      throw new ProtoError('checksum', `cells checksum mismatch at tick ${m.tick}`);
    }
  } catch (e) {
    if (!(e instanceof ProtoError)) throw e;
    undo();
    return `cells at tick ${m.tick}: ${e.message}`;
  } finally {
    cellsStates.length = 0;
    created.length = 0;
  }
  txn.begin();
  return null;
}
