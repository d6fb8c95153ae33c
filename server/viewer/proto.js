// steerd wire protocol v1 — a JavaScript implementation of client-proto/PROTOCOL.md.
//
// Binary messages (bincode 2 "standard": varints, zig-zag, f32 LE) are decoded to plain
// objects shaped like the protocol's JSON form (§4), with one exception: a binary delta's
// `changed` entries name their agent by `index` (base index, §6.4) instead of `id`; `CellMap`
// (or `resolveChanged`) maps them through the cell state at `base_tick`.
//
// Errors are `ProtoError`s whose `kind` is one of "malformed", "unexpected_end",
// "trailing_bytes", "too_large" (the kinds of `tests/vectors/invalid.json`).
//
// Pure ES module, no dependencies: the viewer imports it, and so does the Node vector test.

export const PROTOCOL_VERSION = 3;
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

const malformed = (m) => new ProtoError('malformed', m);
const unexpectedEnd = (m) => new ProtoError('unexpected_end', m);

const U32_MAX = 0xffffffff;
const I32_MIN = -0x80000000;
const I32_MAX = 0x7fffffff;

// ---------------------------------------------------------------------------------------------
// Byte reader / writer (bincode level, §3)

class Reader {
  constructor(bytes) {
    this.b = bytes;
    this.p = 0;
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  need(n, what) {
    if (this.p + n > this.b.length) throw unexpectedEnd(`${what} runs past the end of the frame`);
  }
  u8() {
    this.need(1, 'u8');
    return this.b[this.p++];
  }
  /** bincode varint with a bound: max bytes of the integer type (2, 4, 8). */
  varint(maxBytes, what) {
    const first = this.u8();
    if (first < 251) return first;
    let v;
    if (first === 251) {
      this.need(2, what);
      v = this.dv.getUint16(this.p, true);
      this.p += 2;
    } else if (first === 252) {
      if (maxBytes < 4) throw malformed(`${what}: u32 marker for a u16`);
      this.need(4, what);
      v = this.dv.getUint32(this.p, true);
      this.p += 4;
    } else if (first === 253) {
      if (maxBytes < 8) throw malformed(`${what}: u64 marker for a ${maxBytes * 8}-bit integer`);
      this.need(8, what);
      const lo = this.dv.getUint32(this.p, true);
      const hi = this.dv.getUint32(this.p + 4, true);
      this.p += 8;
      v = hi * 0x100000000 + lo;
      if (v > Number.MAX_SAFE_INTEGER) throw malformed(`${what}: ${v} is beyond 2^53 (not representable here)`);
    } else {
      throw malformed(`${what}: invalid varint marker ${first}`);
    }
    return v;
  }
  u16() { return this.varint(2, 'u16'); }
  u32() { return this.varint(4, 'u32'); }
  u64() { return this.varint(8, 'u64'); }
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
    if (b > 1) throw malformed(`bool byte ${b}`);
    return b === 1;
  }
  len(what) {
    const n = this.varint(8, what);
    if (n > this.b.length - this.p) throw unexpectedEnd(`${what} of ${n} bytes runs past the end of the frame`);
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
    } catch {
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
    if (this.n + k <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + k) size *= 2;
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
    if (!Number.isInteger(v) || v < 0) throw malformed(`${what}: ${v} is not an unsigned integer`);
    if (maxBytes < 8 && v >= 2 ** (maxBytes * 8)) throw malformed(`${what}: ${v} out of range`);
    const dv = () => new DataView(this.buf.buffer, this.n);
    if (v < 251) return this.u8(v);
    if (v <= 0xffff) {
      this.u8(251);
      this.grow(2);
      dv().setUint16(0, v, true);
      this.n += 2;
    } else if (v <= U32_MAX) {
      this.u8(252);
      this.grow(4);
      dv().setUint32(0, v, true);
      this.n += 4;
    } else {
      this.u8(253);
      this.grow(8);
      const d = dv();
      d.setUint32(0, v % 0x100000000, true);
      d.setUint32(4, Math.floor(v / 0x100000000), true);
      this.n += 8;
    }
  }
  f32(v) {
    if (typeof v !== 'number') throw malformed(`f32: ${v} is not a number`);
    this.grow(4);
    new DataView(this.buf.buffer, this.n).setFloat32(0, v, true);
    this.n += 4;
  }
  string(s) {
    if (typeof s !== 'string') throw malformed(`string expected, got ${typeof s}`);
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

class Packed {
  constructor(bytes) {
    this.b = bytes;
    this.p = 0;
  }
  done() {
    return this.p >= this.b.length;
  }
  /** Minimal LEB128, at most 10 bytes; returned as a Number (exact below 2^53). */
  leb() {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.p >= this.b.length) throw malformed('packed record cut short');
      const byte = this.b[this.p++];
      v += (byte & 0x7f) * mul;
      if ((byte & 0x80) === 0) {
        if (byte === 0 && i > 0) throw malformed('non-minimal LEB128 varint');
        if (v > Number.MAX_SAFE_INTEGER) throw malformed('packed varint too large');
        return v;
      }
      mul *= 128;
    }
    throw malformed('LEB128 varint longer than 10 bytes');
  }
  /** Unsigned LEB128 bounded to `max`. */
  uint(max, what) {
    const v = this.leb();
    if (v > max) throw malformed(`${what} ${v} out of range`);
    return v;
  }
  /** Zig-zag LEB128 as i32. */
  zz32(what) {
    const n = this.leb();
    if (n > U32_MAX) throw malformed(`${what} out of i32 range`);
    return n % 2 === 0 ? n / 2 : -(n + 1) / 2;
  }
  byte() {
    if (this.p >= this.b.length) throw malformed('packed record cut short');
    return this.b[this.p++];
  }
}

const unzz = (n) => (n % 2 === 0 ? n / 2 : -(n + 1) / 2);
const zz = (v) => (v >= 0 ? v * 2 : -v * 2 - 1);

/** `heading(vel)` of §6.4: orientation units of the velocity's direction. */
export function heading(vx, vy) {
  if (vx === 0 && vy === 0) throw malformed('heading of a zero velocity');
  const h = Math.floor((Math.atan2(vy, vx) * 32768) / Math.PI + 0.5);
  return ((h % 65536) + 65536) % 65536;
}

function decodeRecords(bytes) {
  const p = new Packed(bytes);
  const out = [];
  let prev = -1;
  let group = 0;
  while (!p.done()) {
    const head = p.leb();
    // head may exceed 2^32: use arithmetic, not bit operators.
    const gap = Math.floor(head / 4);
    const f = head % 2;
    const sBit = Math.floor(head / 2) % 2;
    const id = prev + gap + 1;
    if (id > U32_MAX) throw malformed(`agent id ${id} beyond u32`);
    prev = id;
    if (sBit === 0) group = p.uint(0xffff, 'group');
    const px = p.zz32('pos.x');
    const py = p.zz32('pos.y');
    const vx = p.zz32('vel.x');
    const vy = p.zz32('vel.y');
    const orient = f === 1 ? heading(vx, vy) : p.uint(0xffff, 'orient');
    out.push({ id, group, pos: [px, py], vel: [vx, vy], orient });
  }
  return out;
}

function decodeIds(bytes) {
  const p = new Packed(bytes);
  const out = [];
  let prev = -1;
  while (!p.done()) {
    const id = prev + p.leb() + 1;
    if (id > U32_MAX) throw malformed(`agent id ${id} beyond u32`);
    out.push(id);
    prev = id;
  }
  return out;
}

function decodeChanges(bytes) {
  const p = new Packed(bytes);
  const out = [];
  let prev = -1;
  while (!p.done()) {
    const head = p.leb();
    const m = head % 4;
    const o = Math.floor(head / 4) % 4;
    const index = prev + Math.floor(head / 16) + 1;
    if (index > U32_MAX) throw malformed(`base index ${index} beyond u32`);
    prev = index;
    const c = { index };
    if (m === 1) {
      const b0 = p.byte();
      const b1 = p.byte();
      c.dpos = [unzz(b0 & 15), unzz(b0 >> 4)];
      c.dvel = [unzz(b1 & 15), unzz(b1 >> 4)];
    } else if (m === 2) {
      c.dpos = [p.zz32('dpos.x'), p.zz32('dpos.y')];
      c.dvel = [p.zz32('dvel.x'), p.zz32('dvel.y')];
    } else if (m === 3) {
      throw malformed('reserved motion mode 3');
    }
    if (o === 1) c.face = true;
    else if (o === 2) {
      const d = p.zz32('dorient');
      if (d < -32768 || d > 32767) throw malformed(`dorient ${d} does not fit i16`);
      c.dorient = d;
    } else if (o === 3) throw malformed('reserved orientation mode 3');
    out.push(c);
  }
  return out;
}

// Encoders of packed sections (used by tests and for completeness).
class PackedWriter {
  constructor() {
    this.a = [];
  }
  leb(v) {
    if (!Number.isInteger(v) || v < 0) throw malformed(`LEB128 of ${v}`);
    do {
      let byte = v % 128;
      v = Math.floor(v / 128);
      if (v > 0) byte |= 0x80;
      this.a.push(byte);
    } while (v > 0);
  }
  bytes() {
    return Uint8Array.from(this.a);
  }
}

function encodeRecords(list) {
  const w = new PackedWriter();
  let prev = -1;
  let group = 0;
  for (const r of list) {
    const gap = r.id - prev - 1;
    if (gap < 0) throw malformed('records must be sorted by id');
    const s = r.group === group ? 1 : 0;
    const nonZero = r.vel[0] !== 0 || r.vel[1] !== 0;
    const f = nonZero && heading(r.vel[0], r.vel[1]) === r.orient ? 1 : 0;
    w.leb(gap * 4 + s * 2 + f);
    if (!s) w.leb(r.group);
    for (const v of [r.pos[0], r.pos[1], r.vel[0], r.vel[1]]) w.leb(zz(v));
    if (!f) w.leb(r.orient);
    prev = r.id;
    group = r.group;
  }
  return w.bytes();
}

function encodeIds(list) {
  const w = new PackedWriter();
  let prev = -1;
  for (const id of list) {
    w.leb(id - prev - 1);
    prev = id;
  }
  return w.bytes();
}

function encodeChanges(list) {
  const w = new PackedWriter();
  let prev = -1;
  for (const c of list) {
    if (c.index === undefined) throw malformed('binary change entries need `index` (see resolveChanged)');
    const gap = c.index - prev - 1;
    if (gap < 0) throw malformed('changes must be in increasing index order');
    prev = c.index;
    const o = c.face ? 1 : c.dorient !== undefined ? 2 : 0;
    let m = 0;
    if (c.dpos) {
      const vals = [c.dpos[0], c.dpos[1], c.dvel[0], c.dvel[1]];
      m = vals.every((v) => v >= -8 && v <= 7) ? 1 : 2;
      w.leb(gap * 16 + o * 4 + m);
      if (m === 1) {
        w.a.push(zz(vals[0]) | (zz(vals[1]) << 4), zz(vals[2]) | (zz(vals[3]) << 4));
      } else {
        for (const v of vals) w.leb(zz(v));
      }
    } else {
      w.leb(gap * 16 + o * 4);
    }
    if (o === 2) w.leb(zz(c.dorient));
  }
  return w.bytes();
}

// ---------------------------------------------------------------------------------------------
// Schema of the messages (§5). A type is a string (primitive) or an object:
//   {struct: [[name, type, default?], ...]}, {opt: T}, {vec: T},
//   {tagged: [[name, structFields], ...]}   internally tagged enum: {"type": name, ...fields}
//   {names: [...]}                          fieldless enum: a string
//   {packed: 'records' | 'ids' | 'changes'} packed section

const P = (fields) => ({ struct: fields });
const opt = (t) => ({ opt: t });
const vec = (t) => ({ vec: t });
const tagged = (variants) => ({ tagged: variants });
const names = (list) => ({ names: list });

const Point = P([['x', 'f32'], ['y', 'f32']]);
const RectFields = [['min_x', 'f32'], ['min_y', 'f32'], ['max_x', 'f32'], ['max_y', 'f32']];
const CircleFields = [['x', 'f32'], ['y', 'f32'], ['radius', 'f32']];
const Area = tagged([['rect', RectFields], ['whole_world', []]]);
const SpawnArea = tagged([['rect', RectFields], ['circle', CircleFields]]);
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
  ['random_target', [['radius', 'f32'], ['interval_min', 'f32', 1], ['interval_max', 'f32', 2], ['center', opt(Point), null]]],
  ['obstacle_avoidance', [['min_box_length', opt('f32'), null], ['braking_weight', 'f32', 0.6], ['lateral_base', 'f32', 1]]],
  ['ahead_avoidance', [['ahead_len', 'f32', 4], ['max_avoid_force', 'f32', 0.4], ['margin', 'f32', 0]]],
  ['wall_avoidance', [['look_ahead', 'f32', 5], ['avoid_distance', 'f32', 3]]],
  ['agent_avoidance', [['look_ahead', 'f32', 3], ['avoid_radius', 'f32', 2]]],
  ['separation', [['neighbor_radius', 'f32', 3]]],
  ['cohesion', [['neighbor_radius', 'f32', 3]]],
  ['alignment', [['neighbor_radius', 'f32', 3], ['time_to_target', 'f32', 0.1]]],
  ['path_following', [['waypoints', vec(Point)], ['path_radius', 'f32', 1], ['mode', names(['once', 'loop', 'ping_pong']), 'once']]],
  ['leader_following', [['leader', 'u32'], ['behind_distance', 'f32', 2], ['leader_sight_radius', 'f32', 3]]],
  ['reciprocal_avoidance', [['time_horizon', 'f32', 1], ['obstacle_time_horizon', 'f32', 1], ['neighbor_dist', 'f32', 10], ['max_neighbors', 'u32', 10]]],
];
const Behavior = tagged(BEHAVIORS);
const BehaviorKind = names(BEHAVIORS.map(([n]) => n));
const BehaviorEntry = P([['behavior', Behavior], ['weight', 'f32', 1], ['priority', 'u8', 0]]);

const rid = ['request_id', 'u32'];
const world = ['world', 'string'];
const agents = ['agents', vec('u32')];

const CLIENT = tagged([
  ['hello', [['protocol_version', 'u16'], ['token', opt('string'), null], ['encoding', names(['binary', 'json']), 'binary'], ['resume', opt('string'), null]]],
  ['subscribe', [rid, world, ['area', Area]]],
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

const ErrorCode = names([
  'bad_request', 'invalid_field', 'unknown_world', 'unknown_agent', 'forbidden', 'unauthorized',
  'rate_limited', 'too_large', 'busy', 'not_found', 'unsupported_version', 'internal', 'quota_exceeded',
]);
const Role = names(['admin', 'player', 'spectator']);
const Quantization = P([['pos_step', 'f32'], ['vel_step', 'f32'], ['predict_num', 'i32'], ['orient_snap', 'f32']]);
const Rect = P(RectFields);
const WorldInfo = P([['id', 'u32'], ['name', 'string'], ['bounds', Rect], ['aoi_cell_size', 'f32'], ['cols', 'u32'], ['rows', 'u32']]);
const EventKind = tagged([
  ['destination_reached', [['agent', 'u32']]],
  ['path_completed', [['agent', 'u32']]],
  ['spawned', [['group', 'string'], agents]],
  ['despawned', [agents]],
]);
const ErrorFields = [['code', ErrorCode], ['message', 'string'], ['field', opt('string'), null]];
const Outcome = tagged([
  ['ok', []],
  ['subscribed', [['world', 'u32'], ['cells', vec('u32')]]],
  ['spawned', [agents]],
  ['error', ErrorFields],
]);

const SERVER = tagged([
  ['welcome', [['protocol_version', 'u16'], ['tick_rate_hz', 'f32'], ['quantization', Quantization], ['worlds', vec(WorldInfo)], ['max_message_bytes', 'u32'], ['player_id', 'string'], ['role', Role], ['resume_token', 'string'], ['session_grace_secs', 'u32']]],
  ['keyframe', [['world', 'u32'], ['cell', 'u32'], ['tick', 'u64'], ['checksum', 'checksum', null], ['agents', { packed: 'records' }]]],
  ['delta', [['world', 'u32'], ['cell', 'u32'], ['tick', 'u64'], ['base_tick', 'u64'], ['checksum', 'checksum', null], ['left', { packed: 'ids' }], ['changed', { packed: 'changes' }], ['entered', { packed: 'records' }]]],
  ['event', [['world', 'u32'], ['tick', 'u64'], ['event', EventKind]]],
  ['command_result', [rid, ['result', Outcome]]],
  ['error', ErrorFields],
  ['pong', [rid, ['server_tick', 'u64']]],
]);

// ---------------------------------------------------------------------------------------------
// Generic schema-driven decode / encode

function readStruct(r, fields, out) {
  for (const [name, type] of fields) out[name] = read(r, type);
  return out;
}

function read(r, t) {
  if (typeof t === 'string') {
    switch (t) {
      case 'u8': return r.u8();
      case 'u16': return r.u16();
      case 'u32': return r.u32();
      case 'u64': return r.u64();
      case 'i32': return r.i32();
      case 'f32': return r.f32();
      case 'bool': return r.bool();
      case 'string': return r.string();
      case 'checksum': {
        if (!r.bool()) return null;
        const b = r.bytes(8);
        let hex = '';
        for (let i = 7; i >= 0; i--) hex += b[i].toString(16).padStart(2, '0');
        return hex;
      }
      default: throw new Error(`schema: unknown type ${t}`);
    }
  }
  if (t.struct) return readStruct(r, t.struct, {});
  if (t.opt) return r.bool() ? read(r, t.opt) : null;
  if (t.vec) {
    const n = r.varint(8, 'vec length');
    const out = [];
    for (let i = 0; i < n; i++) out.push(read(r, t.vec));
    return out;
  }
  if (t.tagged) {
    const idx = r.varint(4, 'variant index');
    const v = t.tagged[idx];
    if (!v) throw malformed(`unknown variant index ${idx}`);
    return readStruct(r, v[1], { type: v[0] });
  }
  if (t.names) {
    const idx = r.varint(4, 'variant index');
    if (idx >= t.names.length) throw malformed(`unknown variant index ${idx}`);
    return t.names[idx];
  }
  if (t.packed) {
    const n = r.len('packed section');
    const bytes = r.bytes(n);
    if (t.packed === 'records') return decodeRecords(bytes);
    if (t.packed === 'ids') return decodeIds(bytes);
    return decodeChanges(bytes);
  }
  throw new Error('schema: bad type');
}

function defaulted(v, def, name) {
  if (v !== undefined) return v;
  if (def === undefined) throw malformed(`missing field \`${name}\``);
  return typeof def === 'function' ? def() : def;
}

function writeStruct(w, fields, obj) {
  for (const [name, type, def] of fields) write(w, type, defaulted(obj[name], def, name));
}

function write(w, t, v) {
  if (typeof t === 'string') {
    switch (t) {
      case 'u8':
        if (!Number.isInteger(v) || v < 0 || v > 255) throw malformed(`u8 ${v}`);
        return w.u8(v);
      case 'u16': return w.varint(v, 2, 'u16');
      case 'u32': return w.varint(v, 4, 'u32');
      case 'u64': return w.varint(v, 8, 'u64');
      case 'i32':
        if (!Number.isInteger(v) || v < I32_MIN || v > I32_MAX) throw malformed(`i32 ${v}`);
        return w.varint(zz(v), 4, 'i32');
      case 'f32': return w.f32(v);
      case 'bool': return w.u8(v ? 1 : 0);
      case 'string': return w.string(v);
      case 'checksum': {
        if (v === null) return w.u8(0);
        w.u8(1);
        const b = new Uint8Array(8);
        for (let i = 0; i < 8; i++) b[7 - i] = parseInt(v.slice(2 * i, 2 * i + 2), 16);
        return w.raw(b);
      }
      default: throw new Error(`schema: unknown type ${t}`);
    }
  }
  if (t.struct) return writeStruct(w, t.struct, v ?? {});
  if (t.opt) {
    if (v === null || v === undefined) return w.u8(0);
    w.u8(1);
    return write(w, t.opt, v);
  }
  if (t.vec) {
    w.varint(v.length, 8, 'vec length');
    for (const e of v) write(w, t.vec, e);
    return;
  }
  if (t.tagged) {
    const idx = t.tagged.findIndex(([n]) => n === v.type);
    if (idx < 0) throw malformed(`unknown type \`${v.type}\``);
    w.varint(idx, 4, 'variant');
    return writeStruct(w, t.tagged[idx][1], v);
  }
  if (t.names) {
    const idx = t.names.indexOf(v);
    if (idx < 0) throw malformed(`unknown variant \`${v}\``);
    return w.varint(idx, 4, 'variant');
  }
  if (t.packed) {
    const bytes = t.packed === 'records' ? encodeRecords(v) : t.packed === 'ids' ? encodeIds(v) : encodeChanges(v);
    w.varint(bytes.length, 8, 'packed length');
    return w.raw(bytes);
  }
  throw new Error('schema: bad type');
}

function toBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('expected bytes');
}

function decodeWith(schema, data, limit) {
  const bytes = toBytes(data);
  if (bytes.length > limit) throw new ProtoError('too_large', `frame of ${bytes.length} bytes exceeds the limit ${limit}`);
  const r = new Reader(bytes);
  const msg = read(r, schema);
  if (r.p !== bytes.length) throw new ProtoError('trailing_bytes', `${bytes.length - r.p} bytes after the message`);
  return msg;
}

/** Decodes a binary server frame (ServerMsg). */
export function decodeServer(data, limit = DEFAULT_SERVER_LIMIT) {
  return decodeWith(SERVER, data, limit);
}

/** Decodes a binary client frame (ClientMsg). */
export function decodeClient(data, limit = DEFAULT_CLIENT_LIMIT) {
  return decodeWith(CLIENT, data, limit);
}

/** Encodes a client message (JSON-shaped object; fields with defaults may be omitted). */
export function encodeClient(msg) {
  const w = new Writer();
  write(w, CLIENT, msg);
  return w.finish();
}

/** Encodes a server message (binary delta `changed` entries need `index`). */
export function encodeServer(msg) {
  const w = new Writer();
  write(w, SERVER, msg);
  return w.finish();
}

// ---------------------------------------------------------------------------------------------
// Cell state: checksum (§6.5), applying keyframes and deltas (§6.3, §6.4)

/** FNV-1a 64 of a sorted agent list, as 16 lowercase hex digits (§6.5). */
export function checksum(list) {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  const mix = (byte) => {
    lo = (lo ^ byte) >>> 0;
    // h * 0x100000001b3 = h * 0x1b3 + (h << 40)  (mod 2^64)
    const l = lo * 0x1b3;
    const carry = Math.floor(l / 0x100000000);
    const nlo = l >>> 0;
    hi = (Math.imul(hi, 0x1b3) + carry + (lo << 8)) >>> 0;
    lo = nlo;
  };
  const u16 = (v) => { mix(v & 0xff); mix((v >>> 8) & 0xff); };
  const u32 = (v) => { mix(v & 0xff); mix((v >>> 8) & 0xff); mix((v >>> 16) & 0xff); mix((v >>> 24) & 0xff); };
  for (const a of list) {
    u32(a.id);
    u16(a.group);
    u32(a.pos[0]);
    u32(a.pos[1]);
    u32(a.vel[0]);
    u32(a.vel[1]);
    u16(a.orient);
  }
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}

/** `predict(v)` of §6.4: floor((v·predict_num + 32768) / 65536), truncated to 32 bits. */
export function predict(v, predictNum) {
  return Math.floor((v * predictNum + 32768) / 65536) | 0;
}

/**
 * Maps the `index` of binary `changed` entries to agent ids through `base` (the cell's
 * agents at `base_tick`, sorted by id). Returns new entries `{id, dpos?, dvel?, face?|dorient?}`
 * in the JSON form (§6.6). Throws `malformed` on an index out of range.
 */
export function resolveChanged(changed, base) {
  return changed.map((c) => {
    if (c.id !== undefined) return c;
    const a = base[c.index];
    if (!a) throw malformed(`changed base index ${c.index} out of range (${base.length} agents held)`);
    const { index, ...rest } = c;
    void index;
    return { id: a.id, ...rest };
  });
}

/**
 * Applies a delta (binary or JSON form) to `base` (sorted agents at `base_tick`); returns the
 * new sorted list. Verifies the rules of §6.4 and throws `malformed` when broken.
 */
export function applyDelta(base, delta, predictNum) {
  const changed = resolveChanged(delta.changed, base);
  const byId = new Map(base.map((a) => [a.id, a]));
  const left = new Set();
  for (const id of delta.left) {
    if (!byId.has(id)) throw malformed(`left agent ${id} not in the cell`);
    left.add(id);
    byId.delete(id);
  }
  let prevId = -1;
  for (const c of changed) {
    const p = byId.get(c.id);
    if (!p) throw malformed(`changed agent ${c.id} not held (or left)`);
    if (c.id <= prevId) throw malformed('changed entries not in increasing order');
    prevId = c.id;
    const n = { id: p.id, group: p.group, pos: p.pos, vel: p.vel, orient: p.orient };
    if (c.dpos) {
      const vx = (p.vel[0] + c.dvel[0]) | 0;
      const vy = (p.vel[1] + c.dvel[1]) | 0;
      n.vel = [vx, vy];
      n.pos = [(p.pos[0] + predict(vx, predictNum) + c.dpos[0]) | 0, (p.pos[1] + predict(vy, predictNum) + c.dpos[1]) | 0];
    }
    if (c.face) n.orient = heading(n.vel[0], n.vel[1]);
    else if (c.dorient !== undefined) n.orient = (((p.orient + c.dorient) % 65536) + 65536) % 65536;
    byId.set(n.id, n);
  }
  for (const e of delta.entered) {
    if (byId.has(e.id)) throw malformed(`entered agent ${e.id} already in the cell`);
    byId.set(e.id, e);
  }
  return [...byId.values()].sort((a, b) => a.id - b.id);
}

/**
 * The client side of one (world, cell): holds the sorted agents at `tick` and applies frames.
 * `apply(frame)` returns true when applied, false on a chain break (the caller resubscribes);
 * throws ProtoError on a malformed frame or a checksum mismatch (`kind` "checksum").
 */
export class CellMap {
  constructor() {
    this.tick = -1;
    this.agents = [];
  }
  keyframe(k) {
    if (k.checksum !== null && checksum(k.agents) !== k.checksum) throw new ProtoError('checksum', `keyframe checksum mismatch in cell ${k.cell}`);
    this.tick = k.tick;
    this.agents = k.agents;
  }
  delta(d, predictNum) {
    if (this.tick !== d.base_tick || !(d.tick > d.base_tick)) return false;
    const next = applyDelta(this.agents, d, predictNum);
    if (d.checksum !== null && checksum(next) !== d.checksum) throw new ProtoError('checksum', `delta checksum mismatch in cell ${d.cell} at tick ${d.tick}`);
    this.tick = d.tick;
    this.agents = next;
    return true;
  }
}

/** Cell index of a point (§6.2). */
export function cellOf(info, x, y) {
  const s = info.aoi_cell_size;
  const col = Math.min(Math.max(Math.floor((x - info.bounds.min_x) / s), 0), info.cols - 1);
  const row = Math.min(Math.max(Math.floor((y - info.bounds.min_y) / s), 0), info.rows - 1);
  return row * info.cols + col;
}
