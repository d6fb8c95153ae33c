// steerd wire protocol (client-proto/PROTOCOL.md) — encoder and decoder.
//
// Binary messages (bincode 2 "standard": varints, zig-zag, f32 LE) are decoded to plain objects
// shaped like the protocol's JSON form (§4), with one exception: a binary delta's `changed`
// entries name their agent by `index` (base index, §6.4) instead of `id`; `CellMap` (cell.ts)
// maps them through the cell state at `base_tick`. With `{ rawChanges: true }` a binary delta's
// `changed` stays the packed bytes (a Uint8Array) and `CellMap` applies it without building
// intermediate objects (the WorldView's fast path).
//
// Errors are `ProtoError`s whose `kind` is one of "malformed", "unexpected_end",
// "trailing_bytes", "too_large" (the kinds of client-proto/tests/vectors/invalid.json), or
// "checksum" (cell.ts).
//
// The session handshake (Hello / Welcome) is defined once, in `HELLO_FIELDS` / `WELCOME_FIELDS`
// and `helloMessage()`.
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)
export const PROTOCOL_VERSION = 11;
/** Largest server frame a client should accept (§1). */
export const DEFAULT_SERVER_LIMIT = 8 * 1024 * 1024;
/** Default largest client frame (§1, `Welcome.max_message_bytes`). */
export const DEFAULT_CLIENT_LIMIT = 65536;
export class ProtoError extends Error {
    constructor(kind, message) {
        super(`${kind}: ${message}`);
        this.name = 'ProtoError';
        this.kind = kind;
    }
}
export const malformed = (m) => new ProtoError('malformed', m);
const unexpectedEnd = (m) => new ProtoError('unexpected_end', m);
const U32_MAX = 0xffffffff;
const I32_MIN = -0x80000000;
const I32_MAX = 0x7fffffff;
// ---------------------------------------------------------------------------------------------
// Byte reader / writer (bincode level, §3)
class Reader {
    constructor(bytes) {
        this.p = 0;
        this.b = bytes;
        this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    need(n, what) {
        if (this.p + n > this.b.length)
            throw unexpectedEnd(`${what} runs past the end of the frame`);
    }
    u8() {
        this.need(1, 'u8');
        return this.b[this.p++];
    }
    /** bincode varint with a bound: max bytes of the integer type (2, 4, 8). */
    varint(maxBytes, what) {
        const first = this.u8();
        if (first < 251)
            return first;
        let v;
        if (first === 251) {
            this.need(2, what);
            v = this.dv.getUint16(this.p, true);
            this.p += 2;
        }
        else if (first === 252) {
            if (maxBytes < 4)
                throw malformed(`${what}: u32 marker for a u16`);
            this.need(4, what);
            v = this.dv.getUint32(this.p, true);
            this.p += 4;
        }
        else if (first === 253) {
            if (maxBytes < 8)
                throw malformed(`${what}: u64 marker for a ${maxBytes * 8}-bit integer`);
            this.need(8, what);
            const lo = this.dv.getUint32(this.p, true);
            const hi = this.dv.getUint32(this.p + 4, true);
            this.p += 8;
            v = hi * 0x100000000 + lo;
            if (v > Number.MAX_SAFE_INTEGER)
                throw malformed(`${what}: ${v} is beyond 2^53 (not representable here)`);
        }
        else {
            throw malformed(`${what}: invalid varint marker ${first}`);
        }
        return v;
    }
    i32() {
        const n = this.varint(4, 'i32');
        return n % 2 === 0 ? n / 2 : -(n + 1) / 2;
    }
    f32() {
        this.need(4, 'f32');
        const v = this.dv.getFloat32(this.p, true);
        this.p += 4;
        return v;
    }
    bool() {
        const b = this.u8();
        if (b > 1)
            throw malformed(`bool byte ${b}`);
        return b === 1;
    }
    len(what) {
        const n = this.varint(8, what);
        if (n > this.b.length - this.p)
            throw unexpectedEnd(`${what} of ${n} bytes runs past the end of the frame`);
        return n;
    }
    bytes(n) {
        this.need(n, 'bytes');
        const s = this.b.subarray(this.p, this.p + n);
        this.p += n;
        return s;
    }
    string() {
        const n = this.len('string length');
        const raw = this.bytes(n);
        try {
            return utf8dec.decode(raw);
        }
        catch {
            throw malformed('invalid UTF-8 in a string');
        }
    }
}
const utf8dec = new TextDecoder('utf-8', { fatal: true });
const utf8enc = new TextEncoder();
class Writer {
    constructor() {
        this.buf = new Uint8Array(64);
        this.n = 0;
    }
    grow(k) {
        if (this.n + k <= this.buf.length)
            return;
        let size = this.buf.length * 2;
        while (size < this.n + k)
            size *= 2;
        const nb = new Uint8Array(size);
        nb.set(this.buf.subarray(0, this.n));
        this.buf = nb;
    }
    u8(v) {
        this.grow(1);
        this.buf[this.n++] = v;
    }
    raw(bytes) {
        this.grow(bytes.length);
        this.buf.set(bytes, this.n);
        this.n += bytes.length;
    }
    varint(v, maxBytes, what) {
        if (!Number.isInteger(v) || v < 0)
            throw malformed(`${what}: ${v} is not an unsigned integer`);
        if (maxBytes < 8 && v >= 2 ** (maxBytes * 8))
            throw malformed(`${what}: ${v} out of range`);
        if (v < 251) {
            this.u8(v);
            return;
        }
        if (v <= 0xffff) {
            this.u8(251);
            this.grow(2);
            new DataView(this.buf.buffer, this.n).setUint16(0, v, true);
            this.n += 2;
        }
        else if (v <= U32_MAX) {
            this.u8(252);
            this.grow(4);
            new DataView(this.buf.buffer, this.n).setUint32(0, v, true);
            this.n += 4;
        }
        else {
            this.u8(253);
            this.grow(8);
            const d = new DataView(this.buf.buffer, this.n);
            d.setUint32(0, v % 0x100000000, true);
            d.setUint32(4, Math.floor(v / 0x100000000), true);
            this.n += 8;
        }
    }
    f32(v, what) {
        if (typeof v !== 'number')
            throw malformed(`${what}: ${String(v)} is not a number`);
        this.grow(4);
        new DataView(this.buf.buffer, this.n).setFloat32(0, v, true);
        this.n += 4;
    }
    string(s, what) {
        if (typeof s !== 'string')
            throw malformed(`${what}: string expected, got ${typeof s}`);
        const b = utf8enc.encode(s);
        this.varint(b.length, 8, 'string length');
        this.raw(b);
    }
    finish() {
        return this.buf.slice(0, this.n);
    }
}
// ---------------------------------------------------------------------------------------------
// Packed sections (§6.7): LEB128 varints, zig-zag, absolute / change records, id lists
/** Cursor over a packed section. */
export class Packed {
    constructor(bytes) {
        this.p = 0;
        this.b = bytes;
        this.end = bytes.length;
    }
    done() {
        return this.p >= this.end;
    }
    /** Minimal LEB128, at most 10 bytes; returned as a Number (exact below 2^53). */
    leb() {
        const b = this.b;
        if (this.p >= this.end)
            throw malformed('packed record cut short');
        let byte = b[this.p++];
        if (byte < 0x80)
            return byte; // fast path: one byte
        let v = byte & 0x7f;
        let mul = 128;
        for (let i = 1; i < 10; i++) {
            if (this.p >= this.end)
                throw malformed('packed record cut short');
            byte = b[this.p++];
            v += (byte & 0x7f) * mul;
            if ((byte & 0x80) === 0) {
                if (byte === 0)
                    throw malformed('non-minimal LEB128 varint');
                if (v > Number.MAX_SAFE_INTEGER)
                    throw malformed('packed varint too large');
                return v;
            }
            mul *= 128;
        }
        throw malformed('LEB128 varint longer than 10 bytes');
    }
    /** Unsigned LEB128 bounded to `max`. */
    uint(max, what) {
        const v = this.leb();
        if (v > max)
            throw malformed(`${what} ${v} out of range`);
        return v;
    }
    /** Zig-zag LEB128 as i32. */
    zz32(what) {
        const n = this.leb();
        if (n > U32_MAX)
            throw malformed(`${what} out of i32 range`);
        return n % 2 === 0 ? n / 2 : -(n + 1) / 2;
    }
    byte() {
        if (this.p >= this.end)
            throw malformed('packed record cut short');
        return this.b[this.p++];
    }
}
export const unzz = (n) => (n % 2 === 0 ? n / 2 : -(n + 1) / 2);
const zz = (v) => (v >= 0 ? v * 2 : -v * 2 - 1);
/** `heading(vel)` of §6.4: orientation units of the velocity's direction. */
export function heading(vx, vy) {
    if (vx === 0 && vy === 0)
        throw malformed('heading of a zero velocity');
    const h = Math.floor((Math.atan2(vy, vx) * 32768) / Math.PI + 0.5);
    return ((h % 65536) + 65536) % 65536;
}
/**
 * Reads absolute records from `p`: `count` of them, or (count < 0) until the section ends.
 * With `chain` (the entries of a `cells` message, §6.8), every position is the difference from
 * the position in `chain` (32-bit wrapping), which then becomes the record's own: positions chain
 * from record to record through the whole message. Id gaps and the same-group flag restart with
 * each list.
 */
export function readRecords(p, count, chain) {
    const out = [];
    let prev = -1;
    let group = 0;
    for (let k = 0; count < 0 ? !p.done() : k < count; k++) {
        const head = p.leb();
        // head may exceed 2^32: use arithmetic, not bit operators.
        const gap = Math.floor(head / 4);
        const f = head % 2;
        const sBit = Math.floor(head / 2) % 2;
        const id = prev + gap + 1;
        if (id > U32_MAX)
            throw malformed(`agent id ${id} beyond u32`);
        prev = id;
        if (sBit === 0)
            group = p.uint(0xffff, 'group');
        let px = p.zz32('pos.x');
        let py = p.zz32('pos.y');
        if (chain) {
            px = (chain.x + px) | 0;
            py = (chain.y + py) | 0;
            chain.x = px;
            chain.y = py;
        }
        const vx = p.zz32('vel.x');
        const vy = p.zz32('vel.y');
        const orient = f === 1 ? heading(vx, vy) : p.uint(0xffff, 'orient');
        out.push({ id, group, pos: [px, py], vel: [vx, vy], orient });
    }
    return out;
}
export function decodeRecords(bytes) {
    return readRecords(new Packed(bytes), -1, null);
}
/** Reads gap-coded ids: `count` of them, or (count < 0) until the section ends. */
export function readIds(p, count) {
    const out = [];
    let prev = -1;
    for (let k = 0; count < 0 ? !p.done() : k < count; k++) {
        const id = prev + p.leb() + 1;
        if (id > U32_MAX)
            throw malformed(`agent id ${id} beyond u32`);
        out.push(id);
        prev = id;
    }
    return out;
}
export function decodeIds(bytes) {
    return readIds(new Packed(bytes), -1);
}
/** Most cells a run list may hold (§5.2 `subscribed.cells`): a decoder refuses more. */
export const MAX_RUN_CELLS = 1 << 20;
/**
 * Decodes a run list (binary `subscribed.cells`, §5.2, since protocol 7): per run of consecutive
 * cells `start - next` (`next` = the cell after the previous run, initially 0), then `length - 1`.
 * A run going past cell 2^32 - 1, or more than `MAX_RUN_CELLS` cells in all, is malformed, and
 * refused before its cells are made.
 */
export function decodeRuns(bytes) {
    const p = new Packed(bytes);
    const out = [];
    let next = 0;
    while (!p.done()) {
        // Beyond 2^53 these sums round, but only ever far past 2^32: refused all the same.
        const start = next + p.leb();
        const len = p.leb() + 1;
        const end = start + len;
        if (end > U32_MAX + 1)
            throw malformed(`run of ${len} cells from cell ${start} goes past cell ${U32_MAX}`);
        if (out.length + len > MAX_RUN_CELLS)
            throw malformed(`run list of more than ${MAX_RUN_CELLS} cells`);
        for (let c = start; c < end; c++)
            out.push(c);
        next = end;
    }
    return out;
}
/** Reads the next change record of `p` into `c`; `prev` is the previous base index (-1 first). */
export function readChange(p, prev, c) {
    const head = p.leb();
    const m = head % 4;
    const o = Math.floor(head / 4) % 4;
    const index = prev + Math.floor(head / 16) + 1;
    if (index > U32_MAX)
        throw malformed(`base index ${index} beyond u32`);
    c.index = index;
    if (m === 1) {
        const b0 = p.byte();
        const b1 = p.byte();
        c.m = 1;
        c.dpx = unzz(b0 & 15);
        c.dpy = unzz(b0 >> 4);
        c.dvx = unzz(b1 & 15);
        c.dvy = unzz(b1 >> 4);
    }
    else if (m === 2) {
        c.m = 2;
        c.dpx = p.zz32('dpos.x');
        c.dpy = p.zz32('dpos.y');
        c.dvx = p.zz32('dvel.x');
        c.dvy = p.zz32('dvel.y');
    }
    else if (m === 3) {
        throw malformed('reserved motion mode 3');
    }
    else {
        c.m = 0;
    }
    c.o = o;
    if (o === 2) {
        const d = p.zz32('dorient');
        if (d < -32768 || d > 32767)
            throw malformed(`dorient ${d} does not fit i16`);
        c.d = d;
    }
    else if (o === 3)
        throw malformed('reserved orientation mode 3');
}
/** Reads change records as entries (base `index`): `count` of them, or (count < 0) until the end. */
export function readChanges(p, count) {
    const out = [];
    const c = { index: -1, m: 0, dpx: 0, dpy: 0, dvx: 0, dvy: 0, o: 0, d: 0 };
    for (let k = 0; count < 0 ? !p.done() : k < count; k++) {
        readChange(p, c.index, c);
        const e = { index: c.index };
        if (c.m !== 0) {
            e.dpos = [c.dpx, c.dpy];
            e.dvel = [c.dvx, c.dvy];
        }
        if (c.o === 1)
            e.face = true;
        else if (c.o === 2)
            e.dorient = c.d;
        out.push(e);
    }
    return out;
}
export function decodeChanges(bytes) {
    return readChanges(new Packed(bytes), -1);
}
const skipScratch = { index: -1, m: 0, dpx: 0, dpy: 0, dvx: 0, dvy: 0, o: 0, d: 0 };
/**
 * Reads (and validates) `count` change records of `p` and returns their bytes: the packed form
 * `CellMap` applies directly (a `cells` delta entry decoded with `rawChanges`).
 */
export function sliceChanges(p, count) {
    const start = p.p;
    skipScratch.index = -1;
    for (let k = 0; k < count; k++)
        readChange(p, skipScratch.index, skipScratch);
    return p.b.subarray(start, p.p);
}
/** A count read before `count` records that cannot fit in the bytes left is malformed. */
function fits(p, count, minBytes, what) {
    if (count * minBytes > p.end - p.p)
        throw malformed(`${what} count ${count} runs past the end of the entries`);
}
/**
 * Decodes the `entries` of a `cells` message (§6.8) of message tick `tick` and `span`. With
 * `raw`, a delta entry's `changed` stays packed (validated) bytes. Throws `malformed` for a
 * span of 0, an age of 0, a base or state tick below 0, a count past the end, or any §6.7 rule;
 * a cell outside the world is checked by the view (it knows the grid).
 */
export function decodeEntries(bytes, tick, span, raw) {
    if (!Number.isInteger(span) || span < 1)
        throw malformed(`cells span ${span} (must be at least 1)`);
    const p = new Packed(bytes);
    const out = [];
    let prev = -1;
    // The position chain of §6.8, through every absolute record of the message.
    const chain = { x: 0, y: 0 };
    while (!p.done()) {
        const head = p.leb();
        const b = head % 2;
        const k = Math.floor(head / 2) % 2;
        const cell = prev + Math.floor(head / 4) + 1;
        if (cell > U32_MAX)
            throw malformed(`cell ${cell} beyond u32`);
        prev = cell;
        let age = 0;
        if (b === 1) {
            age = p.leb();
            if (age === 0)
                throw malformed(`entry of cell ${cell}: age 0`);
        }
        if (k === 1) {
            const stateTick = tick - age;
            if (stateTick < 0)
                throw malformed(`keyframe entry of cell ${cell}: state tick below 0`);
            const n = p.leb();
            fits(p, n, 5, 'record');
            out.push({ keyframe: { cell, tick: stateTick, agents: readRecords(p, n, chain) } });
        }
        else {
            const base = b === 1 ? tick - age : tick - span;
            if (base < 0)
                throw malformed(`delta entry of cell ${cell}: base tick below 0`);
            const c = p.leb();
            const nc = Math.floor(c / 4);
            const hasLeft = Math.floor(c / 2) % 2 === 1;
            const hasEntered = c % 2 === 1;
            fits(p, nc, 1, 'change');
            const changed = raw ? sliceChanges(p, nc) : readChanges(p, nc);
            let left = [];
            if (hasLeft) {
                const nl = p.leb();
                fits(p, nl, 1, 'left');
                left = readIds(p, nl);
            }
            let entered = [];
            if (hasEntered) {
                const ne = p.leb();
                fits(p, ne, 5, 'entered');
                entered = readRecords(p, ne, chain);
            }
            out.push({ delta: { cell, base_tick: base, left, changed, entered } });
        }
    }
    return out;
}
class PackedWriter {
    constructor() {
        this.a = [];
    }
    leb(v) {
        if (!Number.isInteger(v) || v < 0)
            throw malformed(`LEB128 of ${v}`);
        do {
            let byte = v % 128;
            v = Math.floor(v / 128);
            if (v > 0)
                byte |= 0x80;
            this.a.push(byte);
        } while (v > 0);
    }
    bytes() {
        return Uint8Array.from(this.a);
    }
}
/**
 * `heading(vel)` when every correct `atan2` agrees on it (at least 1e-4 units from a rounding
 * tie), else null: an encoder sets the face flag only then (as steer-proto does).
 */
export function robustHeading(vx, vy) {
    if (vx === 0 && vy === 0)
        return null;
    const u = (Math.atan2(vy, vx) * 32768) / Math.PI + 65536;
    const frac = u - Math.floor(u);
    if (Math.abs(frac - 0.5) < 1e-4)
        return null;
    return Math.floor(u + 0.5) % 65536;
}
/**
 * Writes absolute records. With `chain` (the entries of a `cells` message, §6.8), each position
 * is the difference from the position in `chain`, which then becomes the record's own (see
 * `readRecords`).
 */
function writeRecords(w, list, chain) {
    let prev = -1;
    let group = 0;
    for (const r of list) {
        const gap = r.id - prev - 1;
        if (gap < 0)
            throw malformed('records must be sorted by id');
        const s = r.group === group ? 1 : 0;
        const f = robustHeading(r.vel[0], r.vel[1]) === r.orient ? 1 : 0;
        w.leb(gap * 4 + s * 2 + f);
        if (!s)
            w.leb(r.group);
        let px = r.pos[0];
        let py = r.pos[1];
        if (chain) {
            px = (px - chain.x) | 0;
            py = (py - chain.y) | 0;
            chain.x = r.pos[0];
            chain.y = r.pos[1];
        }
        for (const v of [px, py, r.vel[0], r.vel[1]])
            w.leb(zz(v));
        if (!f)
            w.leb(r.orient);
        prev = r.id;
        group = r.group;
    }
}
export function encodeRecords(list) {
    const w = new PackedWriter();
    writeRecords(w, list, null);
    return w.bytes();
}
function writeIds(w, list) {
    let prev = -1;
    for (const id of list) {
        w.leb(id - prev - 1);
        prev = id;
    }
}
export function encodeIds(list) {
    const w = new PackedWriter();
    writeIds(w, list);
    return w.bytes();
}
/** Writes strictly increasing cell numbers as runs of consecutive cells (see `decodeRuns`). */
function writeRuns(w, cells) {
    let next = 0;
    let k = 0;
    while (k < cells.length) {
        const start = cells[k];
        if (!Number.isInteger(start) || start < next || start > U32_MAX) {
            throw malformed(`cells must be increasing u32 cell numbers (${start} after ${next - 1})`);
        }
        let len = 1;
        while (k + len < cells.length && cells[k + len] === start + len)
            len++;
        w.leb(start - next);
        w.leb(len - 1);
        next = start + len;
        k += len;
    }
}
export function encodeRuns(cells) {
    const w = new PackedWriter();
    writeRuns(w, cells);
    return w.bytes();
}
function writeChanges(w, list) {
    let prev = -1;
    for (const c of list) {
        if (c.index === undefined)
            throw malformed('binary change entries need `index` (see resolveChanged)');
        const gap = c.index - prev - 1;
        if (gap < 0)
            throw malformed('changes must be in increasing index order');
        prev = c.index;
        const o = c.face ? 1 : c.dorient !== undefined ? 2 : 0;
        if (c.dpos && c.dvel) {
            const vals = [c.dpos[0], c.dpos[1], c.dvel[0], c.dvel[1]];
            const m = vals.every((v) => v >= -8 && v <= 7) ? 1 : 2;
            w.leb(gap * 16 + o * 4 + m);
            if (m === 1) {
                w.a.push(zz(vals[0]) | (zz(vals[1]) << 4), zz(vals[2]) | (zz(vals[3]) << 4));
            }
            else {
                for (const v of vals)
                    w.leb(zz(v));
            }
        }
        else {
            w.leb(gap * 16 + o * 4);
        }
        if (o === 2)
            w.leb(zz(c.dorient));
    }
}
export function encodeChanges(list) {
    const w = new PackedWriter();
    writeChanges(w, list);
    return w.bytes();
}
/**
 * Encodes the entries of a `cells` message of tick `tick` and `span` (§6.8): keyframe entries
 * with their state tick, delta entries with their base tick and `changed` by base `index`
 * (map JSON ids with `resolveChanged`). Entries must be in increasing cell order.
 */
export function encodeEntries(entries, tick, span) {
    if (!Number.isInteger(span) || span < 1)
        throw malformed(`cells span ${span} (must be at least 1)`);
    const w = new PackedWriter();
    let prev = -1;
    // The position chain of §6.8, through every absolute record of the message.
    const chain = { x: 0, y: 0 };
    for (const e of entries) {
        if ('keyframe' in e) {
            const k = e.keyframe;
            const gap = k.cell - prev - 1;
            if (gap < 0)
                throw malformed('cells entries must be in increasing cell order');
            prev = k.cell;
            const age = tick - k.tick;
            if (!Number.isInteger(age) || age < 0)
                throw malformed(`keyframe entry of cell ${k.cell}: state tick ${k.tick} after the message tick ${tick}`);
            w.leb(gap * 4 + 2 + (age > 0 ? 1 : 0));
            if (age > 0)
                w.leb(age);
            w.leb(k.agents.length);
            writeRecords(w, k.agents, chain);
        }
        else {
            const d = e.delta;
            const gap = d.cell - prev - 1;
            if (gap < 0)
                throw malformed('cells entries must be in increasing cell order');
            prev = d.cell;
            const age = tick - d.base_tick;
            if (!Number.isInteger(age) || age < 1)
                throw malformed(`delta entry of cell ${d.cell}: base tick ${d.base_tick} not before the message tick ${tick}`);
            const b = age === span ? 0 : 1;
            w.leb(gap * 4 + b);
            if (b)
                w.leb(age);
            if (d.changed instanceof Uint8Array)
                throw malformed('encodeEntries needs decoded change entries, not packed bytes');
            const hasLeft = d.left.length > 0 ? 1 : 0;
            const hasEntered = d.entered.length > 0 ? 1 : 0;
            w.leb(d.changed.length * 4 + hasLeft * 2 + hasEntered);
            writeChanges(w, d.changed);
            if (hasLeft) {
                w.leb(d.left.length);
                writeIds(w, d.left);
            }
            if (hasEntered) {
                w.leb(d.entered.length);
                writeRecords(w, d.entered, chain);
            }
        }
    }
    return w.bytes();
}
const P = (fields) => ({ struct: fields });
const opt = (t) => ({ opt: t });
const vec = (t) => ({ vec: t });
const tagged = (variants) => ({ tagged: variants });
const names = (list) => ({ names: list });
const Point = P([['x', 'f32'], ['y', 'f32']]);
const RectFields = [['min_x', 'f32'], ['min_y', 'f32'], ['max_x', 'f32'], ['max_y', 'f32']];
const CircleFields = [['x', 'f32'], ['y', 'f32'], ['radius', 'f32']];
const Area = tagged([['rect', RectFields], ['whole_world', []]]);
const SpawnArea = tagged([['rect', RectFields], ['circle', CircleFields], ['ring', CircleFields], ['points', [['points', vec(Point)]]]]);
const Limits = P(['max_speed', 'max_accel', 'max_rotation', 'max_angular_accel', 'radius', 'mass'].map((n) => [n, opt('f32'), null]));
const Target = tagged([['point', [['x', 'f32'], ['y', 'f32']]], ['agent', [['agent', 'u32']]]]);
const AlignTarget = tagged([['orientation', [['radians', 'f32']]], ['agent', [['agent', 'u32']]]]);
const alignDefault = () => ({ target_radius: 0.1, slow_radius: 0.5, time_to_target: 0.1 });
const AlignParams = P([['target_radius', 'f32', 0.1], ['slow_radius', 'f32', 0.5], ['time_to_target', 'f32', 0.1]]);
const BEHAVIORS = [
    ['seek', [['target', Target]]],
    ['flee', [['target', Target], ['panic_distance', 'f32', 10]]],
    ['arrive', [['target', Target], ['target_radius', 'f32', 1], ['slow_radius', 'f32', 5], ['time_to_target', 'f32', 0.25]]],
    ['pursue', [['target_agent', 'u32'], ['max_prediction', 'f32', 5]]],
    ['evade', [['target_agent', 'u32'], ['panic_distance', 'f32', 10], ['max_prediction', 'f32', 5]]],
    ['align', [['target', AlignTarget], ['align', AlignParams, alignDefault]]],
    ['face', [['target', Target], ['align', AlignParams, alignDefault]]],
    ['look_where_you_are_going', [['align', AlignParams, alignDefault]]],
    ['velocity_match', [['target_agent', 'u32'], ['time_to_target', 'f32', 0.1]]],
    ['wander', [['variant', names(['millington', 'circle']), 'millington'], ['wander_offset', 'f32', 1.5], ['wander_radius', 'f32', 1], ['wander_rate', 'f32', 0.5]]],
    ['random_target', [['radius', 'f32', 10], ['interval_min', 'f32', 1], ['interval_max', 'f32', 2], ['center', opt(Point), null]]],
    ['obstacle_avoidance', [['min_box_length', opt('f32'), null], ['braking_weight', 'f32', 0.6], ['lateral_base', 'f32', 1]]],
    ['ahead_avoidance', [['ahead_len', 'f32', 4], ['max_avoid_force', 'f32', 0.4], ['margin', 'f32', 0]]],
    ['wall_avoidance', [['look_ahead', 'f32', 5], ['avoid_distance', 'f32', 3]]],
    ['agent_avoidance', [['look_ahead', 'f32', 3], ['avoid_radius', 'f32', 2]]],
    ['separation', [['neighbor_radius', 'f32', 3]]],
    ['cohesion', [['neighbor_radius', 'f32', 3]]],
    ['alignment', [['neighbor_radius', 'f32', 3], ['time_to_target', 'f32', 0.1]]],
    ['path_following', [['waypoints', vec(Point)], ['path_radius', 'f32', 1], ['mode', names(['once', 'loop', 'ping_pong']), 'once']]],
    ['leader_following', [['leader', 'u32'], ['behind_distance', 'f32', 2], ['leader_sight_radius', 'f32', 3], ['separation_radius', 'f32', 1.5], ['separation_weight', 'f32', 1]]],
    ['reciprocal_avoidance', [['time_horizon', 'f32', 1], ['obstacle_time_horizon', 'f32', 1], ['neighbor_dist', 'f32', 10], ['max_neighbors', 'u32', 10]]],
];
const Behavior = tagged(BEHAVIORS);
/** The behaviour type names, in wire order (`BehaviorKind`). */
export const BEHAVIOR_KINDS = BEHAVIORS.map(([n]) => n);
const BehaviorKind = names(BEHAVIOR_KINDS);
const BehaviorEntry = P([['behavior', Behavior], ['weight', 'f32', 1], ['priority', 'u8', 0]]);
const rid = ['request_id', 'u32'];
const world = ['world', 'string'];
const agents = ['agents', vec('u32')];
/** Wire names of `ErrorCode`, index = binary value (§5.2); v3 appended `quota_exceeded` (12). */
export const ERROR_CODES = [
    'bad_request', 'invalid_field', 'unknown_world', 'unknown_agent', 'forbidden', 'unauthorized',
    'rate_limited', 'too_large', 'busy', 'not_found', 'unsupported_version', 'internal', 'quota_exceeded',
];
const ErrorCode = names(ERROR_CODES);
/** Wire names of `Encoding`. */
export const ENCODINGS = ['binary', 'json'];
/** Wire names of `Role`, index = binary value (§10, protocol v3). */
export const ROLES = ['admin', 'player', 'spectator'];
const Role = names(ROLES);
// ---- The handshake. Protocol version 3 (players, sessions) appended `resume` to Hello and
// `player_id`, `role`, `resume_token`, `session_grace_secs` to Welcome.
const HELLO_FIELDS = [
    ['protocol_version', 'u16'], ['token', opt('string'), null], ['encoding', names(ENCODINGS), 'binary'],
    ['resume', opt('string'), null],
];
const Quantization = P([['pos_step', 'f32'], ['vel_step', 'f32'], ['predict_num', 'i32'], ['orient_snap', 'f32']]);
const Rect = P(RectFields);
const WorldInfo = P([['id', 'u32'], ['name', 'string'], ['bounds', Rect], ['aoi_cell_size', 'f32'], ['cols', 'u32'], ['rows', 'u32'], ['tick_rate_hz', 'f32']]);
const WELCOME_FIELDS = [
    ['protocol_version', 'u16'], ['quantization', Quantization], ['worlds', vec(WorldInfo)],
    ['max_message_bytes', 'u32'], ['player_id', 'string'], ['role', Role], ['resume_token', 'string'],
    ['session_grace_secs', 'u32'],
];
/**
 * The Hello this client sends. `resume` is the `resume_token` of a previous Welcome: within the
 * session's grace period the server hands this connection that session (player, agents,
 * subscriptions) instead of starting a new one.
 */
export function helloMessage(opts) {
    return { type: 'hello', protocol_version: PROTOCOL_VERSION, token: opts.token ?? null, encoding: opts.encoding ?? 'binary', resume: opts.resume ?? null };
}
const CLIENT = tagged([
    ['hello', HELLO_FIELDS],
    ['subscribe', [rid, world, ['area', Area], ['every_n_ticks', 'u32', 1]]],
    ['unsubscribe', [rid, world]],
    ['move_to', [rid, world, agents, ['target', Point], ['stopping_distance', 'f32', 0]]],
    ['set_behaviors', [rid, world, agents, ['behaviors', vec(BehaviorEntry)]]],
    ['add_behavior', [rid, world, agents, ['entry', BehaviorEntry]]],
    ['remove_behavior', [rid, world, agents, ['kind', BehaviorKind]]],
    ['reset_behaviors', [rid, world, agents]],
    ['spawn', [rid, world, ['group', 'string'], ['count', 'u32'], ['area', SpawnArea], ['limits', Limits, () => ({})], ['behaviors', vec(BehaviorEntry), () => []]]],
    ['despawn', [rid, world, agents]],
    ['ping', [rid]],
]);
const EventKind = tagged([
    ['destination_reached', [['agent', 'u32']]],
    ['path_completed', [['agent', 'u32']]],
    ['spawned', [['group', 'string'], agents]],
    ['despawned', [agents]],
    ['target_lost', [['agent', 'u32'], ['target', 'u32']]],
    ['tick_rate', [['tick_rate_hz', 'f32']]],
    ['groups', [['groups', vec('string')]]],
    ['gave_up', [['agent', 'u32'], ['distance', 'f32']]],
    ['unreachable', [['agent', 'u32'], ['distance', 'f32']]],
]);
const ErrorFields = [['code', ErrorCode], ['message', 'string'], ['field', opt('string'), null]];
const Outcome = tagged([
    ['ok', []],
    // Since protocol 7 the cells are runs in binary (a byte string), still a plain array in JSON.
    ['subscribed', [['world', 'u32'], ['cells', { packed: 'runs' }], ['groups', vec('string')]]],
    ['spawned', [agents]],
    ['error', ErrorFields],
]);
const SERVER = tagged([
    ['welcome', WELCOME_FIELDS],
    ['keyframe', [['world', 'u32'], ['cell', 'u32'], ['tick', 'u64'], ['checksum', 'checksum', null], ['agents', { packed: 'records' }]]],
    ['delta', [['world', 'u32'], ['cell', 'u32'], ['tick', 'u64'], ['base_tick', 'u64'], ['checksum', 'checksum', null], ['left', { packed: 'ids' }], ['changed', { packed: 'changes' }], ['entered', { packed: 'records' }]]],
    ['event', [['world', 'u32'], ['tick', 'u64'], ['event', EventKind]]],
    ['command_result', [rid, ['result', Outcome]]],
    ['error', ErrorFields],
    ['pong', [rid, ['server_tick', 'u64']]],
    ['cells', [['world', 'u32'], ['tick', 'u64'], ['span', 'u32'], ['checksum', 'checksum', null], ['entries', { packed: 'entries' }]]],
    ['moved', [['world', 'u32'], ['name', 'string'], ['to', 'string']]],
]);
/**
 * The codec's tables of the two message enums, in the grammar of steer-proto's `schema.json`
 * (fields as `[name, type]` or `[name, type, default]`; `checksum` is optional by itself). The
 * test suite checks them against that file.
 */
export const WIRE_TABLES = { client: CLIENT, server: SERVER };
function readStruct(r, fields, out, raw) {
    for (const f of fields)
        out[f[0]] = read(r, f[1], raw, out);
    return out;
}
/** `ctx`: the struct being read (a `cells` message's entries need its `tick` and `span`). */
function read(r, t, raw, ctx) {
    if (typeof t === 'string') {
        switch (t) {
            case 'u8': return r.u8();
            case 'u16': return r.varint(2, 'u16');
            case 'u32': return r.varint(4, 'u32');
            case 'u64': return r.varint(8, 'u64');
            case 'i32': return r.i32();
            case 'f32': return r.f32();
            case 'bool': return r.bool();
            case 'string': return r.string();
            case 'checksum': {
                if (!r.bool())
                    return null;
                const b = r.bytes(8);
                let hex = '';
                for (let i = 7; i >= 0; i--)
                    hex += b[i].toString(16).padStart(2, '0');
                return hex;
            }
        }
    }
    if ('struct' in t)
        return readStruct(r, t.struct, {}, raw);
    if ('opt' in t)
        return r.bool() ? read(r, t.opt, raw) : null;
    if ('vec' in t) {
        const n = r.varint(8, 'vec length');
        if (n > r.b.length - r.p)
            throw unexpectedEnd(`vec of ${n} elements runs past the end of the frame`);
        const out = [];
        for (let i = 0; i < n; i++)
            out.push(read(r, t.vec, raw));
        return out;
    }
    if ('tagged' in t) {
        const idx = r.varint(4, 'variant index');
        const v = t.tagged[idx];
        if (!v)
            throw malformed(`unknown variant index ${idx}`);
        return readStruct(r, v[1], { type: v[0] }, raw);
    }
    if ('names' in t) {
        const idx = r.varint(4, 'variant index');
        if (idx >= t.names.length)
            throw malformed(`unknown variant index ${idx}`);
        return t.names[idx];
    }
    if ('packed' in t) {
        const n = r.len('packed section');
        const bytes = r.bytes(n);
        if (t.packed === 'records')
            return decodeRecords(bytes);
        if (t.packed === 'ids')
            return decodeIds(bytes);
        if (t.packed === 'runs')
            return decodeRuns(bytes);
        if (t.packed === 'entries')
            return decodeEntries(bytes, ctx.tick, ctx.span, raw);
        return raw ? bytes : decodeChanges(bytes);
    }
    throw new Error('schema: bad type');
}
function defaulted(v, def, hasDef, name) {
    if (v !== undefined)
        return v;
    if (!hasDef)
        throw malformed(`missing field \`${name}\``);
    return typeof def === 'function' ? def() : def;
}
function writeStruct(w, fields, obj) {
    for (const f of fields)
        write(w, f[1], defaulted(obj[f[0]], f[2], f.length > 2, f[0]), f[0], obj);
}
/** `ctx`: the struct being written (a `cells` message's entries need its `tick` and `span`). */
function write(w, t, v, name, ctx) {
    if (typeof t === 'string') {
        switch (t) {
            case 'u8':
                if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 255)
                    throw malformed(`${name}: u8 ${String(v)}`);
                return w.u8(v);
            case 'u16': return w.varint(v, 2, name);
            case 'u32': return w.varint(v, 4, name);
            case 'u64': return w.varint(v, 8, name);
            case 'i32':
                if (typeof v !== 'number' || !Number.isInteger(v) || v < I32_MIN || v > I32_MAX)
                    throw malformed(`${name}: i32 ${String(v)}`);
                return w.varint(zz(v), 4, name);
            case 'f32': return w.f32(v, name);
            case 'bool': return w.u8(v ? 1 : 0);
            case 'string': return w.string(v, name);
            case 'checksum': {
                if (v === null)
                    return w.u8(0);
                const s = v;
                if (typeof s !== 'string' || !/^[0-9a-f]{16}$/.test(s))
                    throw malformed(`${name}: 16 hex digits expected`);
                w.u8(1);
                const b = new Uint8Array(8);
                for (let i = 0; i < 8; i++)
                    b[7 - i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
                return w.raw(b);
            }
        }
    }
    if ('struct' in t)
        return writeStruct(w, t.struct, (v ?? {}));
    if ('opt' in t) {
        if (v === null || v === undefined)
            return w.u8(0);
        w.u8(1);
        return write(w, t.opt, v, name);
    }
    if ('vec' in t) {
        if (!Array.isArray(v))
            throw malformed(`${name}: array expected`);
        w.varint(v.length, 8, 'vec length');
        for (const e of v)
            write(w, t.vec, e, name);
        return;
    }
    if ('tagged' in t) {
        const o = v;
        const idx = o ? t.tagged.findIndex(([n]) => n === o.type) : -1;
        if (idx < 0)
            throw malformed(`${name}: unknown type \`${String(o && o.type)}\``);
        w.varint(idx, 4, 'variant');
        return writeStruct(w, t.tagged[idx][1], o);
    }
    if ('names' in t) {
        const idx = t.names.indexOf(v);
        if (idx < 0)
            throw malformed(`${name}: unknown variant \`${String(v)}\``);
        return w.varint(idx, 4, 'variant');
    }
    if ('packed' in t) {
        if (!Array.isArray(v))
            throw malformed(`${name}: array expected`);
        const bytes = t.packed === 'records' ? encodeRecords(v)
            : t.packed === 'ids' ? encodeIds(v)
                : t.packed === 'runs' ? encodeRuns(v)
                    : t.packed === 'entries' ? encodeEntries(v, ctx.tick, ctx.span)
                        : encodeChanges(v);
        w.varint(bytes.length, 8, 'packed length');
        return w.raw(bytes);
    }
    throw new Error('schema: bad type');
}
function toBytes(data) {
    if (data instanceof Uint8Array)
        return data;
    if (data instanceof ArrayBuffer)
        return new Uint8Array(data);
    if (ArrayBuffer.isView(data))
        return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    throw new TypeError('expected bytes');
}
function checkLimit(bytes, limit) {
    if (bytes.length > limit)
        throw new ProtoError('too_large', `frame of ${bytes.length} bytes exceeds the limit ${limit}`);
}
function decodeWith(schema, data, limit, raw) {
    const bytes = toBytes(data);
    checkLimit(bytes, limit);
    const r = new Reader(bytes);
    const msg = read(r, schema, raw);
    if (r.p !== bytes.length)
        throw new ProtoError('trailing_bytes', `${bytes.length - r.p} bytes after the message`);
    return msg;
}
/** Decodes a binary server frame (ServerMsg). `opts` may be a limit (number) for brevity. */
export function decodeServer(data, opts = {}) {
    const o = typeof opts === 'number' ? { limit: opts } : opts;
    return decodeWith(SERVER, data, o.limit ?? DEFAULT_SERVER_LIMIT, !!o.rawChanges);
}
/**
 * Decodes a batched binary server frame (`/ws?batch=1`, §1): one or more messages back to back.
 * A frame that ends inside a message is `unexpected_end`.
 */
export function decodeServerBatch(data, opts = {}) {
    const bytes = toBytes(data);
    checkLimit(bytes, opts.limit ?? DEFAULT_SERVER_LIMIT);
    const r = new Reader(bytes);
    const out = [];
    do
        out.push(read(r, SERVER, !!opts.rawChanges));
    while (r.p < bytes.length);
    return out;
}
/** Decodes a binary client frame (ClientMsg). */
export function decodeClient(data, limit = DEFAULT_CLIENT_LIMIT) {
    return decodeWith(CLIENT, data, limit, false);
}
/** Encodes a client message (JSON-shaped object; fields with defaults may be omitted). */
export function encodeClient(msg) {
    const w = new Writer();
    write(w, CLIENT, msg, 'message');
    return w.finish();
}
/** Encodes a server message (binary delta `changed` entries need `index`). */
export function encodeServer(msg) {
    const w = new Writer();
    write(w, SERVER, msg, 'message');
    return w.finish();
}
/**
 * Decodes a JSON server frame (§4). Checks the shape the client relies on (a known `type`);
 * the field contents are the server's JSON form, as the binary decoder produces them.
 */
export function decodeServerJson(text, limit = DEFAULT_SERVER_LIMIT) {
    if (text.length > limit)
        throw new ProtoError('too_large', `frame of ${text.length} characters exceeds the limit ${limit}`);
    let v;
    try {
        v = JSON.parse(text);
    }
    catch (e) {
        throw malformed(`invalid JSON: ${e.message}`);
    }
    const o = v;
    if (!o || typeof o !== 'object' || typeof o.type !== 'string')
        throw malformed('a JSON message needs a string `type`');
    if (!SERVER.tagged.some(([n]) => n === o.type))
        throw malformed(`unknown message type \`${o.type}\``);
    return o;
}
// ---------------------------------------------------------------------------------------------
// Checksum (§6.5), prediction (§6.4), AOI cells (§6.2)
// FNV-1a 64 in two 32-bit halves: h * 0x100000001b3 = h * 0x1b3 + (h << 40)  (mod 2^64).
let fnvHi = 0;
let fnvLo = 0;
function fnvByte(byte) {
    const lo = (fnvLo ^ byte) >>> 0;
    const l = lo * 0x1b3; // < 2^41: exact in a double
    fnvHi = (Math.imul(fnvHi, 0x1b3) + Math.floor(l / 0x100000000) + (lo << 8)) >>> 0;
    fnvLo = l >>> 0;
}
function fnv32(v) {
    fnvByte(v & 0xff);
    fnvByte((v >>> 8) & 0xff);
    fnvByte((v >>> 16) & 0xff);
    fnvByte((v >>> 24) & 0xff);
}
/** FNV-1a 64 of a sorted agent list, as 16 lowercase hex digits (§6.5). */
export function checksum(list) {
    hashList(list);
    return fnvHi.toString(16).padStart(8, '0') + fnvLo.toString(16).padStart(8, '0');
}
/** Leaves the checksum of `list` in fnvHi / fnvLo. */
function hashList(list) {
    fnvHi = 0xcbf29ce4;
    fnvLo = 0x84222325;
    for (let i = 0; i < list.length; i++) {
        const a = list[i];
        fnv32(a.id);
        fnvByte(a.group & 0xff);
        fnvByte((a.group >>> 8) & 0xff);
        fnv32(a.pos[0]);
        fnv32(a.pos[1]);
        fnv32(a.vel[0]);
        fnv32(a.vel[1]);
        fnvByte(a.orient & 0xff);
        fnvByte((a.orient >>> 8) & 0xff);
    }
}
/**
 * The checksum of a `cells` message (§6.8): FNV-1a 64 over, for each entry in order, the 8-byte
 * little-endian checksum (§6.5) of that cell's state after the entry. `states`: those states.
 */
export function cellsChecksum(states) {
    let hi = 0xcbf29ce4;
    let lo = 0x84222325;
    for (const list of states) {
        hashList(list);
        const cl = fnvLo;
        const ch = fnvHi;
        fnvHi = hi;
        fnvLo = lo;
        fnv32(cl);
        fnv32(ch);
        hi = fnvHi;
        lo = fnvLo;
    }
    return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}
/** `predict(v)` of §6.4: floor((v·predict_num + 32768) / 65536), truncated to 32 bits. */
export function predict(v, predictNum) {
    return Math.floor((v * predictNum + 32768) / 65536) | 0;
}
/** Cell index of a point (§6.2). */
export function cellOf(info, x, y) {
    const s = info.aoi_cell_size;
    const col = Math.min(Math.max(Math.floor((x - info.bounds.min_x) / s), 0), info.cols - 1);
    const row = Math.min(Math.max(Math.floor((y - info.bounds.min_y) / s), 0), info.rows - 1);
    return row * info.cols + col;
}
