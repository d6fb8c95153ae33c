//! The packed binary layout of agent records inside `Keyframe` and `Delta`.
//!
//! In binary (bincode) messages the record lists are byte strings (bincode
//! length prefix + bytes) whose content is described in PROTOCOL.md §6.7; in
//! JSON they are plain arrays of objects. The `with` modules below switch on
//! `is_human_readable`. Varints here are LEB128 (7 bits per byte, low first,
//! high bit = more), always minimal; zig-zag maps `n` to `(n << 1) ^ (n >> 31)`.

use crate::frames::{AgentChange, Motion, OrientChange};
use crate::quant::{QAgent, heading, robust_heading};
use thiserror::Error;

/// Why a packed record section could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PackError {
    /// Ids must be strictly increasing.
    #[error("agent ids must be strictly increasing (at id {0})")]
    Unsorted(u32),
    /// The section ended inside a record.
    #[error("record section ends inside a record")]
    Truncated,
    /// A varint is longer than needed, too long, or out of range.
    #[error("bad varint ({0})")]
    BadVarint(&'static str),
    /// A value does not fit its field.
    #[error("{0} out of range")]
    OutOfRange(&'static str),
    /// A reserved mode value was used.
    #[error("reserved {0} mode")]
    Reserved(&'static str),
    /// The face flag was set on an agent with zero velocity.
    #[error("face flag on agent {0} with zero velocity")]
    FaceWithoutVelocity(u32),
    /// A JSON agent change is inconsistent.
    #[error("{0}")]
    Inconsistent(&'static str),
}

/// Appends a minimal LEB128 varint.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn zigzag(n: i32) -> u32 {
    ((n << 1) ^ (n >> 31)) as u32
}

pub(crate) fn unzigzag(z: u32) -> i32 {
    ((z >> 1) as i32) ^ -((z & 1) as i32)
}

/// Writes into a slice reserved for the worst case (see [`packed`]), so that
/// the write position stays in a register instead of the `Vec`'s length
/// being stored and reloaded for every byte.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Writer<'_> {
    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        // The reservation covers every record, so this never drops a byte.
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        } else {
            debug_assert!(false, "packed record longer than its reservation");
        }
    }

    /// Minimal LEB128.
    #[inline]
    pub(crate) fn put(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }
}

/// Appends the records of `items` to `out`, each written by `record` in at
/// most `max_record` bytes. Chunks of records are written into reserved,
/// zeroed space that is then trimmed to what was written; on error, `out`
/// ends after the last record written (like pushing byte by byte).
pub(crate) fn packed<T>(
    items: &[T],
    max_record: usize,
    out: &mut Vec<u8>,
    mut record: impl FnMut(&T, &mut Writer) -> Result<(), PackError>,
) -> Result<(), PackError> {
    const CHUNK: usize = 128;
    for chunk in items.chunks(CHUNK) {
        let start = out.len();
        out.resize(start + chunk.len() * max_record, 0);
        let mut w = Writer { buf: out.get_mut(start..).unwrap_or_default(), len: 0 };
        let result = chunk.iter().try_for_each(|item| record(item, &mut w));
        let len = w.len;
        out.truncate(start + len);
        result?;
    }
    Ok(())
}

pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl Reader<'_> {
    pub(crate) fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, PackError> {
        let b = *self.buf.get(self.pos).ok_or(PackError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// Minimal LEB128 of at most 64 bits.
    #[inline(always)]
    pub(crate) fn u64(&mut self) -> Result<u64, PackError> {
        // Fast path: most varints here are a single byte. The general case
        // takes and returns the position by value, so that it can stay in a
        // register here.
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => {
                let (v, pos) = varint(self.buf, self.pos)?;
                self.pos = pos;
                Ok(v)
            }
        }
    }

    #[inline]
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, PackError> {
        u32::try_from(self.u64()?).map_err(|_| PackError::OutOfRange(what))
    }

    #[inline]
    fn u16(&mut self, what: &'static str) -> Result<u16, PackError> {
        u16::try_from(self.u64()?).map_err(|_| PackError::OutOfRange(what))
    }

    #[inline]
    fn i32(&mut self, what: &'static str) -> Result<i32, PackError> {
        self.u32(what).map(unzigzag)
    }

    /// Header varint: `(gap << bits) | flags`; returns `(key, flags)` where
    /// `key` (an id, or a base index) is `prev + 1 + gap`.
    #[inline]
    pub(crate) fn header(&mut self, prev: &mut i64, bits: u32, what: &'static str) -> Result<(u32, u64), PackError> {
        let h = self.u64()?;
        // A gap of 2^32 or more overflows any u32 key (and must not wrap the i64).
        let key = i64::try_from(h >> bits).ok().and_then(|gap| prev.checked_add(gap)?.checked_add(1));
        let key = key.and_then(|k| u32::try_from(k).ok()).ok_or(PackError::OutOfRange(what))?;
        *prev = i64::from(key);
        Ok((key, h & ((1 << bits) - 1)))
    }
}

/// The minimal LEB128 (at most 64 bits) at `buf[pos..]`, and the position after it.
fn varint(buf: &[u8], mut pos: usize) -> Result<(u64, usize), PackError> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = *buf.get(pos).ok_or(PackError::Truncated)?;
        pos += 1;
        let bits = u64::from(b & 0x7f);
        if i == 9 && bits > 1 {
            return Err(PackError::BadVarint("overflows 64 bits"));
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(PackError::BadVarint("not minimal"));
            }
            return Ok((v, pos));
        }
    }
    Err(PackError::BadVarint("longer than 10 bytes"))
}

/// Gap of `key` after `prev` (`key - prev - 1`), advancing `prev`.
fn gap(prev: &mut i64, key: u32) -> Result<u64, PackError> {
    let d = i64::from(key) - *prev - 1;
    *prev = i64::from(key);
    u64::try_from(d).map_err(|_| PackError::Unsorted(key))
}

const F_FACE: u64 = 1;
const F_SAME_GROUP: u64 = 2;

/// Longest packed absolute record: header, group, four 32-bit varints, orientation.
const MAX_RECORD_BYTES: usize = 10 + 3 + 4 * 5 + 3;

/// Packs absolute records (keyframe agents, delta `entered`).
pub fn pack_records(agents: &[QAgent], out: &mut Vec<u8>) -> Result<(), PackError> {
    write_records(agents, None, out)
}

/// Packs absolute records. With `chain` (the entries of a `cells` message, PROTOCOL.md §6.8),
/// each record's position is the difference from the position in `chain`, which then becomes
/// the record's own: positions chain from record to record through the whole message.
pub(crate) fn write_records(agents: &[QAgent], mut chain: Option<&mut [i32; 2]>, out: &mut Vec<u8>) -> Result<(), PackError> {
    let (mut prev, mut group) = (-1i64, 0u16);
    packed(agents, MAX_RECORD_BYTES, out, |a, w| {
        let d = gap(&mut prev, a.id)?;
        let face = a.vel != [0, 0] && robust_heading(a.vel) == Some(a.orient);
        let same = a.group == group;
        let flags = if face { F_FACE } else { 0 } | if same { F_SAME_GROUP } else { 0 };
        w.put((d << 2) | flags);
        if !same {
            w.put(a.group.into());
            group = a.group;
        }
        let pos = match chain.as_deref_mut() {
            Some(p) => {
                let d = [a.pos[0].wrapping_sub(p[0]), a.pos[1].wrapping_sub(p[1])];
                *p = a.pos;
                d
            }
            None => a.pos,
        };
        for v in [pos[0], pos[1], a.vel[0], a.vel[1]] {
            w.put(zigzag(v).into());
        }
        if !face {
            w.put(a.orient.into());
        }
        Ok(())
    })
}

/// Unpacks absolute records.
pub fn unpack_records(buf: &[u8]) -> Result<Vec<QAgent>, PackError> {
    let mut r = Reader { buf, pos: 0 };
    read_records(&mut r, None, None)
}

/// Reads `count` absolute records (or until the reader ends when `None`); with `chain`, positions
/// are differences chained through `chain` (see [`write_records`]).
pub(crate) fn read_records(r: &mut Reader, count: Option<usize>, chain: Option<&mut [i32; 2]>) -> Result<Vec<QAgent>, PackError> {
    let mut out = Vec::new();
    read_records_into(r, count, chain, &mut out)?;
    Ok(out)
}

/// [`read_records`], appending to `out`.
pub(crate) fn read_records_into(r: &mut Reader, count: Option<usize>, mut chain: Option<&mut [i32; 2]>, out: &mut Vec<QAgent>) -> Result<(), PackError> {
    let (mut prev, mut group) = (-1i64, 0u16);
    // A record takes at least 5 bytes: a count beyond that is malformed, never an allocation.
    let room = r.buf.len().saturating_sub(r.pos);
    out.reserve(count.map_or(room / 6, |n| n.min(room / 5)));
    let mut left = count;
    while left.map_or(!r.done(), |n| n > 0) {
        left = left.map(|n| n - 1);
        let (id, flags) = r.header(&mut prev, 2, "agent id")?;
        if flags & F_SAME_GROUP == 0 {
            group = r.u16("group")?;
        }
        let mut pos = [r.i32("pos.x")?, r.i32("pos.y")?];
        if let Some(p) = chain.as_deref_mut() {
            pos = [p[0].wrapping_add(pos[0]), p[1].wrapping_add(pos[1])];
            *p = pos;
        }
        let vel = [r.i32("vel.x")?, r.i32("vel.y")?];
        let orient = if flags & F_FACE != 0 {
            heading(vel).ok_or(PackError::FaceWithoutVelocity(id))?
        } else {
            r.u16("orient")?
        };
        out.push(QAgent { id, group, pos, vel, orient });
    }
    Ok(())
}

/// Where the position of the absolute record that starts at `at` sits in `buf`: its offset and
/// byte length (the two zig-zag varints after the record's head and group).
pub(crate) fn record_pos_span(buf: &[u8], at: usize) -> Result<(usize, usize), PackError> {
    let mut r = Reader { buf, pos: at };
    let (_, flags) = r.header(&mut -1i64, 2, "agent id")?;
    if flags & F_SAME_GROUP == 0 {
        r.u16("group")?;
    }
    let start = r.pos;
    r.i32("pos.x")?;
    r.i32("pos.y")?;
    Ok((start, r.pos - start))
}

const M_NONE: u64 = 0;
const M_NIBBLES: u64 = 1;
const M_VARINTS: u64 = 2;
const O_KEEP: u64 = 0;
const O_FACE: u64 = 1;
const O_TURN: u64 = 2;

/// Longest packed change record: header, four 32-bit varints, turn.
const MAX_CHANGE_BYTES: usize = 10 + 4 * 5 + 3;

/// Packs delta change records, keyed by base index (each change needs its `index`).
pub fn pack_changes(changes: &[AgentChange], out: &mut Vec<u8>) -> Result<(), PackError> {
    let mut prev = -1i64;
    packed(changes, MAX_CHANGE_BYTES, out, |c, w| {
        let d = gap(&mut prev, c.index.ok_or(PackError::Inconsistent("a changed entry needs its base index"))?)?;
        let zz = c.motion.map(|m| [m.dpos[0], m.dpos[1], m.dvel[0], m.dvel[1]].map(zigzag));
        let motion = match zz {
            None => M_NONE,
            Some(z) if z.iter().all(|&v| v < 16) => M_NIBBLES,
            Some(_) => M_VARINTS,
        };
        let orient = match c.orient {
            OrientChange::Keep => O_KEEP,
            OrientChange::Face => O_FACE,
            OrientChange::Turn(_) => O_TURN,
        };
        w.put((d << 4) | (orient << 2) | motion);
        match zz {
            Some(z) if motion == M_NIBBLES => {
                w.byte((z[0] | (z[1] << 4)) as u8);
                w.byte((z[2] | (z[3] << 4)) as u8);
            }
            Some(z) => z.iter().for_each(|&v| w.put(v.into())),
            None => {}
        }
        if let OrientChange::Turn(t) = c.orient {
            w.put(zigzag(t.into()).into());
        }
        Ok(())
    })
}

/// Unpacks delta change records (with `index` set and `id` unknown).
pub fn unpack_changes(buf: &[u8]) -> Result<Vec<AgentChange>, PackError> {
    let mut r = Reader { buf, pos: 0 };
    read_changes(&mut r, None)
}

/// Reads `count` change records (or until the reader ends when `None`).
pub(crate) fn read_changes(r: &mut Reader, count: Option<usize>) -> Result<Vec<AgentChange>, PackError> {
    let mut out = Vec::new();
    read_changes_into(r, count, &mut out)?;
    Ok(out)
}

/// [`read_changes`], appending to `out`.
pub(crate) fn read_changes_into(r: &mut Reader, count: Option<usize>, out: &mut Vec<AgentChange>) -> Result<(), PackError> {
    let mut prev = -1i64;
    // A record takes at least 1 byte: a count beyond that is malformed, never an allocation.
    let room = r.buf.len().saturating_sub(r.pos);
    out.reserve(count.map_or(room / 3, |n| n.min(room)));
    let mut left = count;
    while left.map_or(!r.done(), |n| n > 0) {
        left = left.map(|n| n - 1);
        out.push(read_change(r, &mut prev)?);
    }
    Ok(())
}

/// Reads one change record (its `index` set, `id` unknown); `prev` is the previous record's base
/// index (−1 before the first).
#[inline]
pub(crate) fn read_change(r: &mut Reader, prev: &mut i64) -> Result<AgentChange, PackError> {
    let (index, flags) = r.header(prev, 4, "base index")?;
    let (motion, orient) = read_change_body(r, flags)?;
    Ok(AgentChange { id: None, index: Some(index), motion, orient })
}

/// A change record's motion and orientation change, read after its header (which gave
/// `flags`).
#[inline(always)]
pub(crate) fn read_change_body(r: &mut Reader, flags: u64) -> Result<(Option<Motion>, OrientChange), PackError> {
    let motion = match flags & 3 {
        M_NONE => None,
        M_NIBBLES => {
            let (a, b) = (r.byte()?, r.byte()?);
            let n = |x: u8| unzigzag(u32::from(x & 15));
            Some(Motion { dpos: [n(a), n(a >> 4)], dvel: [n(b), n(b >> 4)] })
        }
        M_VARINTS => Some(Motion {
            dpos: [r.i32("dpos.x")?, r.i32("dpos.y")?],
            dvel: [r.i32("dvel.x")?, r.i32("dvel.y")?],
        }),
        _ => return Err(PackError::Reserved("motion")),
    };
    let orient = match flags >> 2 {
        O_KEEP => OrientChange::Keep,
        O_FACE => OrientChange::Face,
        O_TURN => {
            let t = r.i32("dorient")?;
            OrientChange::Turn(i16::try_from(t).map_err(|_| PackError::OutOfRange("dorient"))?)
        }
        _ => return Err(PackError::Reserved("orientation")),
    };
    Ok((motion, orient))
}

/// Packs sorted ids as gaps.
pub fn pack_ids(ids: &[u32], out: &mut Vec<u8>) -> Result<(), PackError> {
    let mut prev = -1i64;
    packed(ids, 5, out, |&id, w| {
        w.put(gap(&mut prev, id)?);
        Ok(())
    })
}

/// Unpacks gap-coded ids.
pub fn unpack_ids(buf: &[u8]) -> Result<Vec<u32>, PackError> {
    let mut r = Reader { buf, pos: 0 };
    read_ids(&mut r, None)
}

/// Reads `count` id gaps (or until the reader ends when `None`).
pub(crate) fn read_ids(r: &mut Reader, count: Option<usize>) -> Result<Vec<u32>, PackError> {
    let mut out = Vec::new();
    read_ids_into(r, count, &mut out)?;
    Ok(out)
}

/// [`read_ids`], appending to `out`.
pub(crate) fn read_ids_into(r: &mut Reader, count: Option<usize>, out: &mut Vec<u32>) -> Result<(), PackError> {
    let mut prev = -1i64;
    let room = r.buf.len().saturating_sub(r.pos);
    out.reserve(count.map_or(room, |n| n.min(room)));
    let mut left = count;
    while left.map_or(!r.done(), |n| n > 0) {
        left = left.map(|n| n - 1);
        out.push(r.header(&mut prev, 0, "agent id")?.0);
    }
    Ok(())
}

/// Most cells a run list may expand to (PROTOCOL.md §5.2 `subscribed`): a decoder refuses more
/// instead of allocating them.
pub const MAX_RUN_CELLS: u64 = 1 << 20;

/// Packs strictly increasing cell numbers as runs of consecutive cells: per run `varint start -
/// next` (`next` = the cell after the previous run, initially 0) and `varint length - 1`.
pub fn pack_runs(cells: &[u32], out: &mut Vec<u8>) -> Result<(), PackError> {
    let mut next = 0u64;
    let mut k = 0;
    while let Some(&start) = cells.get(k) {
        let start = u64::from(start);
        if start < next {
            return Err(PackError::Unsorted(start as u32));
        }
        let mut len = 1u64;
        while cells.get(k + len as usize).is_some_and(|&c| u64::from(c) == start + len) {
            len += 1;
        }
        put(out, start - next);
        put(out, len - 1);
        next = start + len;
        k += len as usize;
    }
    Ok(())
}

/// Unpacks a run list (see [`pack_runs`]); more than [`MAX_RUN_CELLS`] cells, or a cell past
/// `u32::MAX`, is malformed.
pub fn unpack_runs(buf: &[u8]) -> Result<Vec<u32>, PackError> {
    let mut r = Reader { buf, pos: 0 };
    let (mut next, mut out) = (0u64, Vec::new());
    while !r.done() {
        let start = next.checked_add(r.u64()?).ok_or(PackError::OutOfRange("cell"))?;
        let len = r.u64()?.checked_add(1).ok_or(PackError::OutOfRange("run length"))?;
        let end = start.checked_add(len).filter(|&e| e <= u64::from(u32::MAX) + 1).ok_or(PackError::OutOfRange("cell"))?;
        if out.len() as u64 + len > MAX_RUN_CELLS {
            return Err(PackError::OutOfRange("cell count"));
        }
        out.extend((start..end).map(|c| c as u32));
        next = end;
    }
    Ok(out)
}

/// Generates a serde `with` module: packed bytes in binary, a plain array in JSON.
macro_rules! packed_with {
    ($module:ident, $t:ty, $pack:ident, $unpack:ident) => {
        pub mod $module {
            use super::*;
            use serde::de::{Deserializer, Visitor};
            use serde::ser::{Error as _, Serialize, Serializer};

            pub fn serialize<S: Serializer>(v: &[$t], s: S) -> Result<S::Ok, S::Error> {
                if s.is_human_readable() {
                    v.serialize(s)
                } else {
                    let mut out = Vec::with_capacity(v.len() * 4);
                    $pack(v, &mut out).map_err(S::Error::custom)?;
                    s.serialize_bytes(&out)
                }
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<$t>, D::Error> {
                if d.is_human_readable() {
                    return crate::common::bounded::vec(d);
                }
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Vec<$t>;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("packed records")
                    }
                    fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Self::Value, E> {
                        $unpack(b).map_err(E::custom)
                    }
                }
                d.deserialize_bytes(V)
            }
        }
    };
}

packed_with!(records, QAgent, pack_records, unpack_records);
packed_with!(changes, AgentChange, pack_changes, unpack_changes);
packed_with!(ids, u32, pack_ids, unpack_ids);
packed_with!(runs, u32, pack_runs, unpack_runs);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_maps_small_magnitudes_to_small_codes() {
        let pairs = [(0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4), (i32::MAX, u32::MAX - 1), (i32::MIN, u32::MAX)];
        for (n, z) in pairs {
            assert_eq!(zigzag(n), z);
            assert_eq!(unzigzag(z), n);
        }
    }

    #[test]
    fn varints_are_minimal_leb128() {
        let mut out = Vec::new();
        packed(&[300u64], 10, &mut out, |&v, w| {
            w.put(v);
            Ok(())
        })
        .unwrap();
        assert_eq!(out, [0xac, 0x02]);
        let mut r = Reader { buf: &out, pos: 0 };
        assert_eq!(r.u64(), Ok(300));
        let mut r = Reader { buf: &[0x80, 0x00], pos: 0 };
        assert_eq!(r.u64(), Err(PackError::BadVarint("not minimal")));
        let mut r = Reader { buf: &[0xff; 11], pos: 0 };
        assert!(r.u64().is_err());
        let mut r = Reader { buf: &[0x80], pos: 0 };
        assert_eq!(r.u64(), Err(PackError::Truncated));
    }

    #[test]
    fn records_roundtrip_and_use_flags() {
        let a = QAgent { id: 3, group: 0, pos: [100, -5], vel: [10, 0], orient: 0 };
        let b = QAgent { id: 4, group: 2, pos: [0, 0], vel: [0, 0], orient: 77 };
        let mut out = Vec::new();
        pack_records(&[a, b], &mut out).unwrap();
        // a: header (3<<2)|face|same = 15, pos 200, 9, vel 20, 0 (no orient)
        assert_eq!(&out[..6], &[15, 0xc8, 0x01, 9, 20, 0]);
        assert_eq!(unpack_records(&out).unwrap(), vec![a, b]);
        assert_eq!(pack_records(&[b, a], &mut Vec::new()), Err(PackError::Unsorted(3)));
        assert_eq!(pack_ids(&[5, 5], &mut Vec::new()), Err(PackError::Unsorted(5)));
    }

    #[test]
    fn changes_use_nibbles_when_small() {
        let small = AgentChange {
            id: None,
            index: Some(0),
            motion: Some(Motion { dpos: [1, -1], dvel: [7, -8] }),
            orient: OrientChange::Face,
        };
        let big = AgentChange {
            id: None,
            index: Some(9),
            motion: Some(Motion { dpos: [8, 0], dvel: [0, 0] }),
            orient: OrientChange::Turn(-300),
        };
        let mut out = Vec::new();
        pack_changes(&[small, big], &mut out).unwrap();
        assert_eq!(&out[..3], &[0b0101, 2 | (1 << 4), 14 | (15 << 4)]);
        // big: 2-byte header (gap 8 << 4), 4 one-byte varints, 2-byte turn.
        assert_eq!(out.len(), 3 + 2 + 4 + 2);
        assert_eq!(unpack_changes(&out).unwrap(), vec![small, big]);
        assert_eq!(unpack_changes(&[3]), Err(PackError::Reserved("motion")));
        assert_eq!(unpack_changes(&[12]), Err(PackError::Reserved("orientation")));
        let unkeyed = AgentChange { id: Some(4), index: None, ..small };
        assert!(matches!(pack_changes(&[unkeyed], &mut Vec::new()), Err(PackError::Inconsistent(_))));
    }

    #[test]
    fn extreme_records_fit_their_reservation() {
        let a = QAgent { id: u32::MAX, group: u16::MAX, pos: [i32::MIN, i32::MAX], vel: [i32::MIN, 1], orient: u16::MAX };
        let mut out = vec![7];
        pack_records(&[QAgent { id: 0, ..a }, a], &mut out).unwrap();
        assert_eq!(unpack_records(&out[1..]).unwrap(), vec![QAgent { id: 0, ..a }, a]);
        let c = AgentChange {
            id: None,
            index: Some(u32::MAX),
            motion: Some(Motion { dpos: [i32::MIN, i32::MAX], dvel: [i32::MIN, i32::MIN] }),
            orient: OrientChange::Turn(i16::MIN),
        };
        let first = AgentChange { index: Some(0), ..c };
        let mut out = Vec::new();
        pack_changes(&[first, c], &mut out).unwrap();
        assert_eq!(unpack_changes(&out).unwrap(), vec![first, c]);
        // Many records: several chunks.
        let many: Vec<u32> = (0..1000).map(|i| i * 4_000_000).collect();
        let mut out = Vec::new();
        pack_ids(&many, &mut out).unwrap();
        assert_eq!(unpack_ids(&out).unwrap(), many);
    }

    #[test]
    fn failed_packing_keeps_the_records_before_the_error() {
        let ids: Vec<u32> = (0..300).chain([5]).collect();
        let (mut out, mut good) = (vec![1, 2], vec![1, 2]);
        assert_eq!(pack_ids(&ids, &mut out), Err(PackError::Unsorted(5)));
        pack_ids(&ids[..300], &mut good).unwrap();
        assert_eq!(out, good);
    }

    #[test]
    fn ids_reject_overflow() {
        let mut out = Vec::new();
        pack_ids(&[0, u32::MAX], &mut out).unwrap();
        assert_eq!(unpack_ids(&out).unwrap(), vec![0, u32::MAX]);
        out.push(0);
        assert_eq!(unpack_ids(&out), Err(PackError::OutOfRange("agent id")));
        // Gaps that would wrap (or overflow) the running key.
        let huge = [0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(unpack_ids(&huge), Err(PackError::OutOfRange("agent id")));
        let huge = [0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(unpack_ids(&huge), Err(PackError::OutOfRange("agent id")));
    }
}
