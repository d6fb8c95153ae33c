// WorldView: the agent table of one subscribed world, kept from keyframes and deltas (one
// CellMap per AOI cell, PROTOCOL.md §6), with a short history per agent for interpolated rendering.
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)
import { ProtoError } from './codec.js';
import { CellMap, CellsTxn, applyCells } from './cell.js';
import { ClockSync } from './clock.js';
const TWO_PI = Math.PI * 2;
const ORIENT_TO_RAD = TWO_PI / 65536;
/**
 * Per agent, its last K states oldest first, whichever cells they came from (so an agent crossing
 * cells interpolates across the boundary), in flat arrays indexed by a slot per agent (reused
 * after the agent is deleted). `gone[slot]`: the state tick from which the view no longer holds
 * the agent (it left the subscribed area or was despawned); +Infinity while it is held.
 */
class Tracks {
    constructor(k) {
        this.cap = 0;
        /** Slots in use or freed: 0 .. used-1. */
        this.used = 0;
        this.id = new Float64Array(0);
        this.live = new Uint8Array(0);
        this.start = new Int32Array(0);
        this.n = new Int32Array(0);
        this.group = new Int32Array(0);
        /** The cell that last reported the agent. */
        this.cell = new Int32Array(0);
        this.gone = new Float64Array(0);
        /** The first state came with a delta's `entered` (the agent came into the area), not a keyframe. */
        this.entered = new Uint8Array(0);
        this.ticks = new Float64Array(0); // K × cap
        this.v = new Int32Array(0); // K × cap × [px, py, vx, vy, orient]
        this.bySlot = new Map();
        this.free = [];
        this.k = k;
    }
    /** The slot of agent `id`, a new one (empty) if it has none. */
    slotOf(id, fromDelta) {
        const have = this.bySlot.get(id);
        if (have !== undefined)
            return have;
        let s = this.free.pop();
        if (s === undefined) {
            if (this.used === this.cap)
                this.grow();
            s = this.used++;
        }
        this.bySlot.set(id, s);
        this.id[s] = id;
        this.live[s] = 1;
        this.start[s] = 0;
        this.n[s] = 0;
        this.cell[s] = -1;
        this.gone[s] = Infinity;
        this.entered[s] = fromDelta ? 1 : 0;
        return s;
    }
    delete(s) {
        this.bySlot.delete(this.id[s]);
        this.id[s] = -1; // no agent id: a stale reference to the slot no longer matches
        this.live[s] = 0;
        this.n[s] = 0;
        this.free.push(s);
    }
    clear() {
        this.bySlot.clear();
        this.free = [];
        this.used = 0;
    }
    /**
     * Index into `ticks` of the slot's i-th state (0 = oldest). Ring position major, slot minor:
     * agents updated together write neighbouring memory.
     */
    at(s, i) {
        return ((this.start[s] + i) % this.k) * this.cap + s;
    }
    lastTick(s) {
        return this.n[s] > 0 ? this.ticks[this.at(s, this.n[s] - 1)] : -1;
    }
    grow() {
        const cap = Math.max(64, this.cap * 2);
        const k = this.k;
        const f64 = (a, m) => { const b = new Float64Array(cap * m); b.set(a); return b; };
        const i32 = (a, m) => { const b = new Int32Array(cap * m); b.set(a); return b; };
        const u8 = (a) => { const b = new Uint8Array(cap); b.set(a); return b; };
        this.id = f64(this.id, 1);
        this.live = u8(this.live);
        this.start = i32(this.start, 1);
        this.n = i32(this.n, 1);
        this.group = i32(this.group, 1);
        this.cell = i32(this.cell, 1);
        this.gone = f64(this.gone, 1);
        this.entered = u8(this.entered);
        // Ring position major: each position's block moves to its place in the larger arrays.
        const ticks = new Float64Array(cap * k);
        const v = new Int32Array(cap * k * 5);
        for (let r = 0; r < k; r++) {
            ticks.set(this.ticks.subarray(r * this.cap, (r + 1) * this.cap), r * cap);
            v.set(this.v.subarray(r * this.cap * 5, (r + 1) * this.cap * 5), r * cap * 5);
        }
        this.ticks = ticks;
        this.v = v;
        this.cap = cap;
    }
}
/** The agents (ids, ascending, and their track slots) a cell held at its last state. */
class Members {
    constructor() {
        this.n = 0;
        this.ids = new Float64Array(16);
        this.slots = new Int32Array(16);
        this.nextIds = new Float64Array(16);
        this.nextSlots = new Int32Array(16);
    }
    reserve(n) {
        if (this.nextIds.length >= n)
            return;
        const cap = Math.max(n, this.nextIds.length * 2);
        this.nextIds = new Float64Array(cap);
        this.nextSlots = new Int32Array(cap);
    }
    swap(n) {
        const ids = this.ids;
        const slots = this.slots;
        this.ids = this.nextIds;
        this.slots = this.nextSlots;
        this.nextIds = ids;
        this.nextSlots = slots;
        this.n = n;
    }
}
export class WorldView {
    constructor(info, quant, tickRate, area, opts = {}) {
        /** Per-cell agent maps. */
        this.cells = new Map();
        /** The world's group names (a record's `group` indexes them): from Subscribed and the `groups` event. */
        this.groups = [];
        /** Ids of the agents this client spawned in this world (`SampledAgent.mine`); the client keeps it. */
        this.mine = new Set();
        /** Cells of the last Subscribed answer (null before it). */
        this.subscribedCells = null;
        /** The subscription's send rate (`every_n_ticks`, re-sent with the area). */
        this.everyNTicks = 1;
        /** Highest tick of any frame applied. */
        this.latestTick = -1;
        /**
         * Keyframes and deltas applied (a `cells` message counts each of its entries), `cells`
         * messages applied, and frames that could not be (each leads to a resubscribe).
         */
        this.keyframes = 0;
        this.deltas = 0;
        this.cellsMessages = 0;
        this.resyncs = 0;
        /** `span` of the last `cells` message (the subscription's every_n_ticks); 0 before one. */
        this.span = 0;
        /** Tick of the last `cells` message applied; -1 before one. */
        this.cellsTick = -1;
        /** Clock of this world's ticks: Ping/Pong samples when it is the connection's first subscribed world. */
        this.clock = new ClockSync();
        /** Called with a reason when the view needs keyframes again (the client resubscribes). */
        this.onResync = () => { };
        /** Per cell: the agents it held at its last state (to notice who left it). */
        this.members = new Map();
        /** Slots of tracks marked gone, deleted once older than the history. */
        this.goneSlots = [];
        this.agentListeners = { added: new Set(), removed: new Set(), changed: new Set() };
        /** Whether any per-agent listener is set (the apply loop collects events only then). */
        this.listening = false;
        this.pendingAdded = [];
        this.pendingChanged = [];
        /** Slots marked gone since the last flush (reported if still gone when the tick is complete). */
        this.pendingRemoved = [];
        this.txn = new CellsTxn();
        this.pool = [];
        this.out = [];
        this.latestArrivalMs = NaN;
        this.info = info;
        this.quant = quant;
        this.area = area;
        this.clock.setRate(tickRate);
        this.interpDelayMs = opts.interpDelayMs ?? 100;
        this.k = Math.max(2, opts.historyLength ?? 8);
        this.tracks = new Tracks(this.k);
    }
    get tickRate() {
        return this.clock.tickRate;
    }
    /** The world's tick rate changed (the `tick_rate` event): the clock starts a new fit at the new rate (frame arrivals stand in until Pongs come). */
    setTickRate(hz) {
        this.info = { ...this.info, tick_rate_hz: hz };
        this.clock.setRate(hz);
    }
    /** A new Welcome (reconnect): same world name, maybe a new id, quantization or grid. */
    rebind(info, quant, tickRate) {
        const key = (w) => JSON.stringify([w.bounds, w.aoi_cell_size, w.cols, w.rows]);
        const changed = key(info) !== key(this.info) || JSON.stringify(quant) !== JSON.stringify(this.quant);
        this.info = info;
        this.quant = quant;
        this.clock.setRate(tickRate);
        if (changed)
            this.clear();
    }
    /** Adds a per-agent listener (`added`, `removed`, `changed`); returns a function that removes it. */
    on(name, cb) {
        const set = this.agentListeners[name];
        set.add(cb);
        this.listening = true;
        return () => {
            set.delete(cb);
            const l = this.agentListeners;
            this.listening = l.added.size + l.removed.size + l.changed.size > 0;
        };
    }
    /**
     * Reports the agents added and changed, and those removed that no cell took back: gone before
     * tick `complete` (the ticks whose every cell is applied; a per-cell frame of tick t may
     * still be followed by the cell that takes a crossing agent in).
     */
    flushAgentEvents(complete = Infinity) {
        if (!this.listening) {
            this.pendingAdded.length = this.pendingChanged.length = this.pendingRemoved.length = 0;
            return;
        }
        const tr = this.tracks;
        const removed = [];
        const later = [];
        for (const s of this.pendingRemoved) {
            if (tr.live[s] !== 1 || tr.gone[s] === Infinity)
                continue; // taken back by another cell
            if (tr.gone[s] < complete)
                removed.push(tr.id[s]);
            else
                later.push(s);
        }
        const added = this.pendingAdded;
        const changed = this.pendingChanged;
        this.pendingAdded = [];
        this.pendingChanged = [];
        this.pendingRemoved = later;
        const call = (name, arg) => {
            for (const cb of [...this.agentListeners[name]]) {
                try {
                    cb(arg);
                }
                catch (e) {
                    setTimeout(() => { throw e; }); // a listener's bug must not break the view
                }
            }
        };
        for (const id of removed)
            call('removed', id);
        for (const a of added)
            call('added', a);
        for (const a of changed)
            call('changed', a);
    }
    /** Forgets every cell. */
    clear() {
        if (this.listening) {
            const tr = this.tracks;
            for (let s = 0; s < tr.used; s++)
                if (tr.live[s] === 1 && tr.gone[s] === Infinity && tr.n[s] > 0) {
                    tr.gone[s] = Math.max(0, this.latestTick);
                    this.pendingRemoved.push(s);
                }
            this.pendingAdded = [];
            this.pendingChanged = [];
            this.flushAgentEvents();
        }
        this.cells.clear();
        this.tracks.clear();
        this.members.clear();
        this.goneSlots = [];
        this.subscribedCells = null;
        this.latestTick = -1;
    }
    /** The Subscribed answer: drop the cells no longer covered. */
    subscribed(cells) {
        this.subscribedCells = new Set(cells);
        for (const c of this.cells.keys()) {
            if (this.subscribedCells.has(c))
                continue;
            this.cells.delete(c);
            const m = this.members.get(c);
            this.members.delete(c);
            if (m)
                for (let i = 0; i < m.n; i++)
                    this.markGone(m.slots[i], m.ids[i], c, Math.max(0, this.latestTick));
        }
    }
    /** Applies a keyframe of this world (`nowMs`: local arrival time). */
    keyframe(k, nowMs = NaN) {
        if (this.subscribedCells && !this.subscribedCells.has(k.cell))
            return;
        let cell = this.cells.get(k.cell);
        if (!cell) {
            cell = new CellMap();
            this.cells.set(k.cell, cell);
        }
        try {
            cell.keyframe(k);
        }
        catch (e) {
            if (!(e instanceof ProtoError))
                throw e;
            this.resync(`cell ${k.cell}: ${e.message}`);
            return;
        }
        this.keyframes++;
        this.remember(k.cell, cell, k.tick, nowMs, false);
        this.flushAgentEvents(k.tick);
    }
    /** Applies a delta of this world; a chain break or a bad frame resyncs. */
    delta(d, nowMs = NaN) {
        const cell = this.cells.get(d.cell);
        if (!cell)
            return; // not (yet) ours: its keyframe comes first
        try {
            if (!cell.delta(d, this.quant.predict_num)) {
                this.resync(`cell ${d.cell}: delta ${d.base_tick}→${d.tick} on a cell held at ${cell.tick}`);
                return;
            }
        }
        catch (e) {
            if (!(e instanceof ProtoError))
                throw e;
            this.resync(`cell ${d.cell}: ${e.message}`);
            return;
        }
        this.deltas++;
        this.remember(d.cell, cell, d.tick, nowMs, true);
        this.flushAgentEvents(d.tick);
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
    applyCells(m, nowMs = NaN) {
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
            if (!cell)
                continue;
            const isDelta = !('keyframe' in e);
            if (!isDelta) {
                if (this.subscribedCells && !this.subscribedCells.has(c))
                    continue;
                this.keyframes++;
            }
            else
                this.deltas++;
            this.remember(c, cell, cell.tick, nowMs, isDelta);
        }
        // A cells message is a whole tick: every removal is final.
        this.flushAgentEvents();
    }
    /** A frame could not be applied: the client subscribes again (same area) for keyframes. */
    resync(reason) {
        this.resyncs++;
        this.onResync(reason);
    }
    /**
     * Cell `c` holds `cell.agents` at state `tick`: each agent's track takes the state; an agent the
     * cell held before and that no cell reported at this tick since is gone from `tick` on (a later
     * cell of the same message that takes it in revives it). `fromDelta`: new tracks came in by a
     * delta (entered the area), not by a keyframe. The cell's agents and its previous members are
     * both sorted by id: one merge walk finds the agents that stayed (their slots known) and left.
     */
    remember(c, cell, tick, nowMs, fromDelta) {
        const tr = this.tracks;
        const list = cell.agents;
        let m = this.members.get(c);
        if (!m)
            this.members.set(c, (m = new Members()));
        m.reserve(list.length);
        const nextIds = m.nextIds;
        const nextSlots = m.nextSlots;
        const k = tr.k;
        // The track arrays, re-read after slotOf (it may grow them). Track.push, inlined: this loop
        // runs for every agent of every cell message.
        let T = tr.ticks;
        let V = tr.v;
        let ST = tr.start;
        let N = tr.n;
        let cap = tr.cap;
        let j = 0;
        for (let i = 0; i < list.length; i++) {
            const a = list[i];
            const id = a.id;
            while (j < m.n && m.ids[j] < id) {
                this.markGone(m.slots[j], m.ids[j], c, tick);
                j++;
            }
            let s;
            if (j < m.n && m.ids[j] === id && tr.id[m.slots[j]] === id)
                s = m.slots[j++];
            else {
                if (j < m.n && m.ids[j] === id)
                    j++;
                s = tr.slotOf(id, fromDelta);
                const gone = tr.gone[s];
                if (gone !== Infinity && gone < tick) {
                    // Back after a gap (left the area and came back): the old states are not a path.
                    tr.n[s] = 0;
                    tr.entered[s] = fromDelta ? 1 : 0;
                }
                T = tr.ticks;
                V = tr.v;
                ST = tr.start;
                N = tr.n;
                cap = tr.cap;
            }
            let n = N[s];
            let st = ST[s];
            if (this.listening) {
                if (n === 0)
                    this.pendingAdded.push(a);
                else {
                    let li = st + n - 1;
                    if (li >= k)
                        li -= k;
                    const o = (li * cap + s) * 5;
                    if (V[o] !== a.pos[0] || V[o + 1] !== a.pos[1] || V[o + 2] !== a.vel[0] || V[o + 3] !== a.vel[1] || V[o + 4] !== a.orient || tr.group[s] !== a.group)
                        this.pendingChanged.push(a);
                }
            }
            if (n > 0) {
                let li = st + n - 1;
                if (li >= k)
                    li -= k;
                const last = T[li * cap + s];
                if (tick < last)
                    n = 0; // older than what we hold (a resync after a reset)
                else if (tick === last)
                    n--; // same tick again (a keyframe after a delta): replace
            }
            if (n === k) {
                st = st + 1 === k ? 0 : st + 1;
                ST[s] = st;
                n--;
            }
            let idx = st + n;
            if (idx >= k)
                idx -= k;
            idx = idx * cap + s;
            T[idx] = tick;
            const o = idx * 5;
            V[o] = a.pos[0];
            V[o + 1] = a.pos[1];
            V[o + 2] = a.vel[0];
            V[o + 3] = a.vel[1];
            V[o + 4] = a.orient;
            N[s] = n + 1;
            // (Compared before written: these rarely change.)
            if (tr.group[s] !== a.group)
                tr.group[s] = a.group;
            if (tr.cell[s] !== c)
                tr.cell[s] = c;
            if (tr.gone[s] !== Infinity)
                tr.gone[s] = Infinity;
            nextIds[i] = id;
            nextSlots[i] = s;
        }
        while (j < m.n) {
            this.markGone(m.slots[j], m.ids[j], c, tick);
            j++;
        }
        m.swap(list.length);
        if (tick > this.latestTick) {
            this.latestTick = tick;
            this.latestArrivalMs = nowMs;
            this.sweep();
        }
    }
    /** The agent of slot `s` is no longer in cell `c` at `tick`: gone, unless another cell reported it since. */
    markGone(s, id, c, tick) {
        const tr = this.tracks;
        if (tr.live[s] !== 1 || tr.id[s] !== id || tr.cell[s] !== c || tr.lastTick(s) >= tick || tr.gone[s] !== Infinity)
            return;
        tr.gone[s] = tick;
        this.goneSlots.push(s);
        if (this.listening)
            this.pendingRemoved.push(s);
    }
    /** Deletes the tracks gone for longer than the history spans. */
    sweep() {
        if (this.goneSlots.length === 0)
            return;
        const tr = this.tracks;
        const horizon = this.latestTick - this.k * this.period();
        const keep = [];
        for (const s of this.goneSlots) {
            if (tr.live[s] !== 1 || tr.gone[s] === Infinity)
                continue;
            if (tr.gone[s] < horizon)
                tr.delete(s);
            else
                keep.push(s);
        }
        this.goneSlots = keep;
    }
    /** Number of agents in the view. */
    get size() {
        let n = 0;
        for (const c of this.cells.values())
            n += c.agents.length;
        return n;
    }
    /** The agent table (quantized records, §6.1) sorted by id: the union of the cells. Records are live. */
    agents() {
        const out = [];
        for (const c of this.cells.values())
            for (const a of c.agents)
                out.push(a);
        return out.sort((a, b) => a.id - b.id);
    }
    /** One agent's latest quantized record, or undefined. */
    agent(id) {
        for (const c of this.cells.values()) {
            const list = c.agents;
            let lo = 0;
            let hi = list.length - 1;
            while (lo <= hi) {
                const mid = (lo + hi) >>> 1;
                if (list[mid].id === id)
                    return list[mid];
                if (list[mid].id < id)
                    lo = mid + 1;
                else
                    hi = mid - 1;
            }
        }
        return undefined;
    }
    /** Ticks between two states sent (the subscription's every_n_ticks, at least 1). */
    period() {
        return Math.max(1, this.everyNTicks);
    }
    /** Estimated server tick (fractional) at local time `nowMs`. */
    serverTick(nowMs) {
        if (this.clock.synced)
            return this.clock.serverTick(nowMs);
        // No Ping/Pong samples for this world: the newest frame's arrival stands in.
        if (this.latestTick < 0 || !Number.isFinite(this.latestArrivalMs))
            return this.latestTick;
        return this.latestTick + ((nowMs - this.latestArrivalMs) * this.tickRate) / 1000;
    }
    /**
     * The tick `sample(nowMs)` renders: server time − interpDelay, at most one send period (one
     * tick, or `everyNTicks`) past the newest state.
     */
    renderTick(nowMs) {
        const st = this.serverTick(nowMs) - (this.interpDelayMs * this.tickRate) / 1000;
        if (!Number.isFinite(st))
            return this.latestTick;
        return Math.min(st, this.latestTick + this.period());
    }
    /**
     * Every agent of the view at local time `renderTimeMs` (default `performance.now()`):
     * positions and headings interpolated between the agent's two states around `renderTick`
     * (whichever cells reported them: crossing a cell boundary is seamless), extrapolated along the
     * velocity by at most one send period past its newest state. An agent that left the area is
     * extrapolated until the tick it left, one that came in is drawn along its velocity up to one
     * send period before its first state (no hold, no jump at the area's edge). With `everyNTicks`
     * N a change reached at state tick t happened somewhere in the N ticks before t: it is
     * interpolated over them (give `interpDelayMs` at least one send period, N / tick rate, to
     * render between states rather than ahead of them). The returned array and its objects are
     * reused by the next call.
     */
    sample(renderTimeMs = now()) {
        const target = this.renderTick(renderTimeMs);
        const out = this.out;
        const pool = this.pool;
        const ps = this.quant.pos_step;
        const vs = this.quant.vel_step;
        const period = this.period();
        const rate = this.tickRate;
        const tr = this.tracks;
        const ticks = tr.ticks;
        const v = tr.v;
        let n = 0;
        for (let sl = 0; sl < tr.used; sl++) {
            const cnt = tr.n[sl];
            if (tr.live[sl] !== 1 || cnt === 0 || target >= tr.gone[sl])
                continue;
            // s0: the newest state at or before target (the oldest if none); s1: the one after it.
            let i = cnt - 1;
            while (i > 0 && ticks[tr.at(sl, i)] > target)
                i--;
            const i0 = tr.at(sl, i);
            const t0 = ticks[i0];
            const o = i0 * 5;
            let x = v[o];
            let y = v[o + 1];
            const vx = v[o + 2];
            const vy = v[o + 3];
            let hd = v[o + 4];
            if (target < t0) {
                // Before its first state: an agent that came into the area is drawn where its velocity
                // puts it, at most one send period earlier; one from a keyframe is held.
                if (tr.entered[sl] === 1) {
                    if (t0 - target > period)
                        continue;
                    const back = (t0 - target) / rate;
                    x -= (vx * vs * back) / ps;
                    y -= (vy * vs * back) / ps;
                }
            }
            else if (i < cnt - 1) {
                // The agent held s0 until the send period before s1, then moved to s1.
                const i1 = tr.at(sl, i + 1);
                const t1 = ticks[i1];
                const from = Math.max(t0, t1 - period);
                if (target > from) {
                    const f = (target - from) / (t1 - from);
                    const p = i1 * 5;
                    x += (v[p] - x) * f;
                    y += (v[p + 1] - y) * f;
                    let dh = v[p + 4] - hd;
                    if (dh > 32768)
                        dh -= 65536;
                    else if (dh < -32768)
                        dh += 65536;
                    hd += dh * f;
                }
            }
            else if (target > t0) {
                const ext = Math.min(target - t0, period) / rate; // seconds of extrapolation
                x += (vx * vs * ext) / ps;
                y += (vy * vs * ext) / ps;
            }
            let s = pool[n];
            if (!s)
                s = pool[n] = { id: 0, group: 0, groupName: '', mine: false, x: 0, y: 0, heading: 0, vx: 0, vy: 0 };
            s.id = tr.id[sl];
            s.group = tr.group[sl];
            s.groupName = this.groups[s.group] ?? '';
            s.mine = this.mine.has(s.id);
            s.x = x * ps;
            s.y = y * ps;
            let rad = hd * ORIENT_TO_RAD;
            if (rad >= TWO_PI)
                rad -= TWO_PI;
            else if (rad < 0)
                rad += TWO_PI;
            s.heading = rad;
            s.vx = vx * vs;
            s.vy = vy * vs;
            out[n++] = s;
        }
        out.length = n;
        return out;
    }
}
function now() {
    return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
