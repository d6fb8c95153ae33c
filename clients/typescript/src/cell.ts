// The client side of one (world, cell): the sorted agent list at a state tick, keyframes and the
// delta chain (PROTOCOL.md §6.3, §6.4), checksum verification (§6.5).
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)

import { ProtoError, Packed, QAgent, ChangeEntry, ChangeScratch, readChange, malformed, heading, predict, checksum } from './codec.js';
import type { Keyframe, Delta } from './types.js';

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
let saved = new Int32Array(5 * 256);

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

/** Writes the planned values into the changed records (keeping the old ones in `saved`). */
function commit(base: readonly QAgent[], n: number): void {
  if (5 * n > saved.length) saved = new Int32Array(Math.max(5 * n, saved.length * 2));
  for (let k = 0; k < n; k++) {
    const o = 6 * k;
    const a = base[scratch[o]];
    const s = 5 * k;
    saved[s] = a.pos[0];
    saved[s + 1] = a.pos[1];
    saved[s + 2] = a.vel[0];
    saved[s + 3] = a.vel[1];
    saved[s + 4] = a.orient;
    a.pos[0] = scratch[o + 1];
    a.pos[1] = scratch[o + 2];
    a.vel[0] = scratch[o + 3];
    a.vel[1] = scratch[o + 4];
    a.orient = scratch[o + 5];
  }
}

function rollback(base: readonly QAgent[], n: number): void {
  for (let k = 0; k < n; k++) {
    const a = base[scratch[6 * k]];
    const s = 5 * k;
    a.pos[0] = saved[s];
    a.pos[1] = saved[s + 1];
    a.vel[0] = saved[s + 2];
    a.vel[1] = saved[s + 3];
    a.orient = saved[s + 4];
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
  commit(copy, p.n);
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
  keyframe(k: Pick<Keyframe, 'cell' | 'tick' | 'checksum' | 'agents'>): void {
    const list = k.agents;
    for (let i = 1; i < list.length; i++) if (list[i].id <= list[i - 1].id) throw malformed('keyframe agents not sorted by id');
    if (k.checksum !== null && checksum(list) !== k.checksum) throw new ProtoError('checksum', `keyframe checksum mismatch in cell ${k.cell}`);
    this.tick = k.tick;
    this.agents = list;
  }
  /** `touched`: the changed and entered records are appended to it. */
  delta(d: Pick<Delta, 'cell' | 'tick' | 'base_tick' | 'checksum' | 'left' | 'changed' | 'entered'>, predictNum: number, touched?: QAgent[]): boolean {
    if (this.tick !== d.base_tick || !(d.tick > d.base_tick)) return false;
    const mark = touched ? touched.length : 0;
    let p: Plan;
    try {
      p = plan(this.agents, d, predictNum, touched);
    } catch (e) {
      if (touched) touched.length = mark;
      throw e;
    }
    commit(this.agents, p.n);
    if (d.checksum !== null && checksum(p.out) !== d.checksum) {
      rollback(this.agents, p.n);
      if (touched) touched.length = mark;
      throw new ProtoError('checksum', `delta checksum mismatch in cell ${d.cell} at tick ${d.tick}`);
    }
    this.tick = d.tick;
    this.agents = p.out;
    return true;
  }
}
