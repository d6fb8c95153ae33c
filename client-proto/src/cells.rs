//! The `cells` message (PROTOCOL.md §6.8): one tick's state for many AOI cells of one world in
//! one message, one small entry per cell.
//!
//! A server builds it from per-cell pieces made once per tick ([`keyframe_body`],
//! [`delta_body`]) with an [`EntriesWriter`], which adds each entry's head (its cell gap and
//! flags) and age and re-codes the one position of a piece that chains on the message's previous
//! record: everything else of a piece is the same bytes in every message it goes into. A client
//! decodes a [`Cells`] (its entries are ordinary [`Keyframe`]s and [`Delta`]s) and applies it with
//! [`crate::ClientState::apply_cells`].

use crate::frames::{AgentChange, Checksum, Delta, Keyframe};
use crate::pack::{self, PackError, Reader};
use crate::quant::{FNV_OFFSET, FNV_PRIME, QAgent};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One tick's entries for cells of one world.
#[derive(Debug, Clone, PartialEq)]
pub struct Cells {
    /// World id.
    pub world: u32,
    /// The simulation tick of the message.
    pub tick: u64,
    /// The subscription's `every_n_ticks`: a delta entry without an age chains on `tick - span`.
    pub span: u32,
    /// [`fold_checksums`] of the cells' states after the entries.
    pub checksum: Option<Checksum>,
    /// In strictly increasing cell order; every entry's `world` is the message's, its own
    /// `checksum` is `None`, and a delta's `tick` is the message tick.
    pub entries: Vec<CellEntry>,
}

/// One cell's part of a [`Cells`] message.
#[derive(Debug, Clone, PartialEq)]
pub enum CellEntry {
    /// The cell's whole state.
    Keyframe(Keyframe),
    /// The cell's changes since the state the client holds.
    Delta(Delta),
}

impl CellEntry {
    /// The cell it is about.
    pub fn cell(&self) -> u32 {
        match self {
            CellEntry::Keyframe(k) => k.cell,
            CellEntry::Delta(d) => d.cell,
        }
    }
}

/// The message checksum: FNV-1a 64 over each entry's cell checksum (8 bytes little endian),
/// in entry order.
pub fn fold_checksums(sums: impl IntoIterator<Item = u64>) -> u64 {
    let mut h = FNV_OFFSET;
    for s in sums {
        for b in s.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
    }
    h
}

const K_KEYFRAME: u64 = 2;
const B_AGE: u64 = 1;
const L_LEFT: u64 = 2;
const E_ENTERED: u64 = 1;

/// A cell's entry body, made once per cell and tick by [`keyframe_body`] or [`delta_body`] and
/// written into any number of messages by an [`EntriesWriter`]. Positions of absolute records
/// chain through a whole message (PROTOCOL.md §6.8), so a body holds its first absolute record's
/// position as is, and the writer rewrites those bytes relative to the message's previous record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryBody {
    bytes: Vec<u8>,
    chain: Option<Splice>,
}

/// The first absolute record's position in an [`EntryBody`]: its bytes, and the positions of the
/// body's first and last absolute records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Splice {
    at: usize,
    len: usize,
    first: [i32; 2],
    last: [i32; 2],
}

impl EntryBody {
    /// The body of a keyframe entry of an empty cell.
    pub fn empty_keyframe() -> Self {
        EntryBody { bytes: vec![0], chain: None }
    }

    /// Appends `records` to `out` as chained absolute records, the first one's position as is, and
    /// returns the body with what a writer needs to re-chain it.
    fn with_records(mut out: Vec<u8>, records: &[QAgent]) -> Result<Self, PackError> {
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Ok(EntryBody { bytes: out, chain: None });
        };
        let start = out.len();
        pack::write_records(records, Some(&mut [0, 0]), &mut out)?;
        let (at, len) = pack::record_pos_span(&out, start)?;
        Ok(EntryBody { bytes: out, chain: Some(Splice { at, len, first: first.pos, last: last.pos }) })
    }
}

/// The part of a keyframe entry after its head and age: the record count and the records
/// (sorted by id, positions chained).
pub fn keyframe_body(agents: &[QAgent]) -> Result<EntryBody, PackError> {
    let mut out = Vec::with_capacity(2 + 10 * agents.len());
    pack::put(&mut out, agents.len() as u64);
    EntryBody::with_records(out, agents)
}

/// The part of a delta entry after its head and age: counts and flags, changes (each with its
/// base index), then `left` and `entered` when not empty.
pub fn delta_body(left: &[u32], changed: &[AgentChange], entered: &[QAgent]) -> Result<EntryBody, PackError> {
    let mut out = Vec::with_capacity(2 + 4 * changed.len() + 10 * entered.len());
    let flags = if left.is_empty() { 0 } else { L_LEFT } | if entered.is_empty() { 0 } else { E_ENTERED };
    pack::put(&mut out, ((changed.len() as u64) << 2) | flags);
    pack::pack_changes(changed, &mut out)?;
    if !left.is_empty() {
        pack::put(&mut out, left.len() as u64);
        pack::pack_ids(left, &mut out)?;
    }
    if !entered.is_empty() {
        pack::put(&mut out, entered.len() as u64);
    }
    EntryBody::with_records(out, entered)
}

/// Why an entry could not be added to a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Entries must be added in strictly increasing cell order.
    #[error("cell {0} is not after the previous entry's cell")]
    Unordered(u32),
    /// A state or base tick must not be after the message tick (a delta's base before it).
    #[error("tick {0} is not before the message tick")]
    Tick(u64),
}

/// Writes the `entries` bytes of a message at `tick` with `span`, from bodies made by
/// [`keyframe_body`] and [`delta_body`].
#[derive(Debug)]
pub struct EntriesWriter {
    tick: u64,
    span: u32,
    prev: i64,
    /// The position of the last absolute record written (the chain of §6.8).
    pos: [i32; 2],
    out: Vec<u8>,
}

impl EntriesWriter {
    /// An empty message body.
    pub fn new(tick: u64, span: u32, capacity: usize) -> Self {
        EntriesWriter { tick, span, prev: -1, pos: [0, 0], out: Vec::with_capacity(capacity) }
    }

    fn head(&mut self, cell: u32, flags: u64) -> Result<(), EntryError> {
        let gap = i64::from(cell) - self.prev - 1;
        let gap = u64::try_from(gap).map_err(|_| EntryError::Unordered(cell))?;
        self.prev = i64::from(cell);
        pack::put(&mut self.out, (gap << 2) | flags);
        Ok(())
    }

    /// Appends a body, its first position re-chained from the message's previous record.
    fn body(&mut self, b: &EntryBody) {
        let Some(c) = b.chain else {
            self.out.extend_from_slice(&b.bytes);
            return;
        };
        self.out.extend_from_slice(b.bytes.get(..c.at).unwrap_or_default());
        for (v, p) in c.first.into_iter().zip(self.pos) {
            pack::put(&mut self.out, pack::zigzag(v.wrapping_sub(p)).into());
        }
        self.out.extend_from_slice(b.bytes.get(c.at + c.len..).unwrap_or_default());
        self.pos = c.last;
    }

    /// Adds a keyframe entry of `cell` whose state tick is `state_tick`.
    pub fn keyframe(&mut self, cell: u32, state_tick: u64, body: &EntryBody) -> Result<(), EntryError> {
        let age = self.tick.checked_sub(state_tick).ok_or(EntryError::Tick(state_tick))?;
        self.head(cell, K_KEYFRAME | if age > 0 { B_AGE } else { 0 })?;
        if age > 0 {
            pack::put(&mut self.out, age);
        }
        self.body(body);
        Ok(())
    }

    /// Adds a delta entry of `cell` from `base_tick` to the message tick.
    pub fn delta(&mut self, cell: u32, base_tick: u64, body: &EntryBody) -> Result<(), EntryError> {
        let age = self.tick.checked_sub(base_tick).filter(|&a| a > 0).ok_or(EntryError::Tick(base_tick))?;
        let implied = age == u64::from(self.span);
        self.head(cell, if implied { 0 } else { B_AGE })?;
        if !implied {
            pack::put(&mut self.out, age);
        }
        self.body(body);
        Ok(())
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The entries bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

impl Cells {
    /// The `entries` bytes of this message.
    pub fn pack_entries(&self) -> Result<Vec<u8>, String> {
        let mut w = EntriesWriter::new(self.tick, self.span, 64 * self.entries.len());
        for e in &self.entries {
            match e {
                CellEntry::Keyframe(k) => {
                    let body = keyframe_body(&k.agents).map_err(|e| e.to_string())?;
                    w.keyframe(k.cell, k.tick, &body).map_err(|e| e.to_string())?;
                }
                CellEntry::Delta(d) => {
                    if d.tick != self.tick {
                        return Err(format!("delta of cell {} is for tick {}, not the message tick {}", d.cell, d.tick, self.tick));
                    }
                    let body = delta_body(&d.left, &d.changed, &d.entered).map_err(|e| e.to_string())?;
                    w.delta(d.cell, d.base_tick, &body).map_err(|e| e.to_string())?;
                }
            }
        }
        Ok(w.finish())
    }

    /// Decodes `entries` bytes of a message (PROTOCOL.md §6.8).
    pub fn unpack_entries(world: u32, tick: u64, span: u32, buf: &[u8]) -> Result<Vec<CellEntry>, PackError> {
        let mut r = EntryReader::new(tick, span, buf)?;
        let mut out = Vec::new();
        while let Some(head) = r.head()? {
            out.push(match head {
                EntryHead::Keyframe { cell, state_tick, count } => {
                    CellEntry::Keyframe(Keyframe { world, cell, tick: state_tick, checksum: None, agents: r.records(count)? })
                }
                EntryHead::Delta { cell, base_tick, changes, left, entered } => {
                    let mut d = Delta { world, cell, tick, base_tick, checksum: None, left: Vec::new(), changed: Vec::new(), entered: Vec::new() };
                    r.changes_into(changes, &mut d.changed)?;
                    r.ids_into(left, &mut d.left)?;
                    r.entered_into(entered, &mut d.entered)?;
                    CellEntry::Delta(d)
                }
            });
        }
        Ok(out)
    }
}

/// An entry's head as [`EntryReader::head`] reads it; its records follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryHead {
    /// A keyframe of `count` records for the state at `state_tick`.
    Keyframe { cell: u32, state_tick: u64, count: usize },
    /// A delta from `base_tick`: `changes` change records, then the `left` ids and the `entered`
    /// records when flagged.
    Delta { cell: u32, base_tick: u64, changes: usize, left: bool, entered: bool },
}

/// Reads the entries of a `cells` message in order (PROTOCOL.md §6.8): after each [`head`]
/// the caller reads that entry's parts, in order, before the next head. The one reader of the
/// layout: [`Cells::unpack_entries`] and [`crate::ClientState::apply_cells_binary`] both walk it.
///
/// [`head`]: EntryReader::head
pub(crate) struct EntryReader<'a> {
    pub(crate) r: Reader<'a>,
    tick: u64,
    span: u32,
    /// The previous entry's cell (−1 before the first).
    prev: i64,
    /// The position chain of §6.8, through every absolute record of the message.
    pos: [i32; 2],
}

impl<'a> EntryReader<'a> {
    /// A reader of the entries `buf` of a message at `tick` with `span`.
    pub(crate) fn new(tick: u64, span: u32, buf: &'a [u8]) -> Result<Self, PackError> {
        if span == 0 {
            return Err(PackError::OutOfRange("span"));
        }
        Ok(EntryReader { r: Reader { buf, pos: 0 }, tick, span, prev: -1, pos: [0, 0] })
    }

    fn age(&mut self, present: bool, implied: u64) -> Result<u64, PackError> {
        let age = if present { self.r.u64()? } else { implied };
        if present && age == 0 {
            return Err(PackError::OutOfRange("age"));
        }
        self.tick.checked_sub(age).ok_or(PackError::OutOfRange("age"))
    }

    fn count(&mut self) -> Result<usize, PackError> {
        usize::try_from(self.r.u64()?).map_err(|_| PackError::OutOfRange("count"))
    }

    /// The next entry's head, or `None` at the end of the entries.
    pub(crate) fn head(&mut self) -> Result<Option<EntryHead>, PackError> {
        if self.r.done() {
            return Ok(None);
        }
        let (cell, flags) = self.r.header(&mut self.prev, 2, "cell")?;
        Ok(Some(if flags & K_KEYFRAME != 0 {
            let state_tick = self.age(flags & B_AGE != 0, 0)?;
            EntryHead::Keyframe { cell, state_tick, count: self.count()? }
        } else {
            let base_tick = self.age(flags & B_AGE != 0, u64::from(self.span))?;
            let c = self.r.u64()?;
            let changes = usize::try_from(c >> 2).map_err(|_| PackError::OutOfRange("count"))?;
            EntryHead::Delta { cell, base_tick, changes, left: c & L_LEFT != 0, entered: c & E_ENTERED != 0 }
        }))
    }

    /// `count` absolute records, their positions chained.
    pub(crate) fn records(&mut self, count: usize) -> Result<Vec<QAgent>, PackError> {
        pack::read_records(&mut self.r, Some(count), Some(&mut self.pos))
    }

    /// A delta's `count` change records into `out` (cleared first).
    pub(crate) fn changes_into(&mut self, count: usize, out: &mut Vec<AgentChange>) -> Result<(), PackError> {
        out.clear();
        pack::read_changes_into(&mut self.r, Some(count), out)
    }

    /// A delta's `left` ids into `out` (cleared first; left empty when the delta has none).
    pub(crate) fn ids_into(&mut self, present: bool, out: &mut Vec<u32>) -> Result<(), PackError> {
        out.clear();
        if present {
            let n = self.count()?;
            pack::read_ids_into(&mut self.r, Some(n), out)?;
        }
        Ok(())
    }

    /// A delta's `entered` records into `out` (cleared first; left empty when it has none).
    pub(crate) fn entered_into(&mut self, present: bool, out: &mut Vec<QAgent>) -> Result<(), PackError> {
        out.clear();
        if present {
            let n = self.count()?;
            pack::read_records_into(&mut self.r, Some(n), Some(&mut self.pos), out)?;
        }
        Ok(())
    }
}

impl EntryHead {
    /// The entry's cell.
    pub(crate) fn cell(&self) -> u32 {
        match *self {
            EntryHead::Keyframe { cell, .. } | EntryHead::Delta { cell, .. } => cell,
        }
    }
}

impl crate::validate::Validate for Cells {
    fn validate_at(&self, _: &mut crate::validate::FieldPath) -> Result<(), crate::validate::FieldError> {
        Ok(())
    }
}

/// Raw bytes in binary (bincode length + bytes).
struct RawBytes(Vec<u8>);

impl Serialize for RawBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for RawBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawBytes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("packed entries")
            }
            fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<RawBytes, E> {
                Ok(RawBytes(b.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, b: Vec<u8>) -> Result<RawBytes, E> {
                Ok(RawBytes(b))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// `ServerMsg::Cells`' variant index in the binary encoding.
const CELLS_VARIANT: u32 = 7;

/// A binary `cells` message's head, read by [`skim_cells_binary`] without its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellsHead {
    /// World id.
    pub world: u32,
    /// The simulation tick of the message.
    pub tick: u64,
    /// The subscription's `every_n_ticks`.
    pub span: u32,
    /// The message checksum, if it carries one.
    pub checksum: Option<u64>,
    /// Bytes of its packed entries.
    pub entries_len: usize,
    /// The whole message's encoded length: a batched frame's next message starts there.
    pub len: usize,
}

/// Reads the head of the binary `cells` message at the start of `bytes` and steps over its
/// entries without unpacking them: `None` when `bytes` does not start with a whole `cells`
/// message. For a client that only counts what it receives (a load generator's receive-only
/// bots); nothing is checked beyond the head and the entries' length, so a client that keeps
/// state must decode the message.
pub fn skim_cells_binary(bytes: &[u8]) -> Option<CellsHead> {
    #[derive(Deserialize)]
    struct Head {
        variant: u32,
        world: u32,
        tick: u64,
        span: u32,
        checksum: Option<Checksum>,
        entries_len: u64,
    }
    let (h, used): (Head, usize) = bincode::serde::decode_from_slice(bytes, crate::codec::bincode_config()).ok()?;
    let entries_len = usize::try_from(h.entries_len).ok()?;
    let len = used.checked_add(entries_len).filter(|&n| n <= bytes.len())?;
    (h.variant == CELLS_VARIANT).then_some(CellsHead { world: h.world, tick: h.tick, span: h.span, checksum: h.checksum.map(|c| c.0), entries_len, len })
}

/// The binary encoding of a whole `cells` message (`ServerMsg` variant 7) from entries already
/// packed by an [`EntriesWriter`]: exactly what [`crate::encode_binary`] makes of the same
/// message.
pub fn encode_cells_binary(world: u32, tick: u64, span: u32, checksum: Option<u64>, entries: &[u8]) -> Result<Vec<u8>, crate::frames::EncodeError> {
    #[derive(Serialize)]
    struct Raw<'a> {
        variant: u32,
        world: u32,
        tick: u64,
        span: u32,
        checksum: Option<Checksum>,
        entries: RawRef<'a>,
    }
    struct RawRef<'a>(&'a [u8]);
    impl Serialize for RawRef<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }
    let raw = Raw { variant: CELLS_VARIANT, world, tick, span, checksum: checksum.map(Checksum), entries: RawRef(entries) };
    bincode::serde::encode_to_vec(&raw, crate::codec::bincode_config()).map_err(|e| crate::frames::EncodeError::Serialize(e.to_string()))
}

#[derive(Serialize, Deserialize)]
struct CellsBin {
    world: u32,
    tick: u64,
    span: u32,
    checksum: Option<Checksum>,
    entries: RawBytes,
}

#[derive(Serialize, Deserialize)]
struct KeyJson {
    cell: u32,
    tick: u64,
    agents: Vec<QAgent>,
}

#[derive(Serialize, Deserialize)]
struct DeltaJson {
    cell: u32,
    base_tick: u64,
    left: Vec<u32>,
    changed: Vec<AgentChange>,
    entered: Vec<QAgent>,
}

#[derive(Serialize, Deserialize)]
enum EntryJson {
    #[serde(rename = "keyframe")]
    Keyframe(KeyJson),
    #[serde(rename = "delta")]
    Delta(DeltaJson),
}

#[derive(Serialize, Deserialize)]
struct CellsJson {
    world: u32,
    tick: u64,
    span: u32,
    #[serde(default)]
    checksum: Option<Checksum>,
    entries: Vec<EntryJson>,
}

impl Serialize for Cells {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error as _;
        if s.is_human_readable() {
            let entries = self
                .entries
                .iter()
                .map(|e| match e {
                    CellEntry::Keyframe(k) => EntryJson::Keyframe(KeyJson { cell: k.cell, tick: k.tick, agents: k.agents.clone() }),
                    CellEntry::Delta(d) => EntryJson::Delta(DeltaJson {
                        cell: d.cell,
                        base_tick: d.base_tick,
                        left: d.left.clone(),
                        changed: d.changed.clone(),
                        entered: d.entered.clone(),
                    }),
                })
                .collect();
            CellsJson { world: self.world, tick: self.tick, span: self.span, checksum: self.checksum, entries }.serialize(s)
        } else {
            let entries = RawBytes(self.pack_entries().map_err(S::Error::custom)?);
            CellsBin { world: self.world, tick: self.tick, span: self.span, checksum: self.checksum, entries }.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Cells {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        if d.is_human_readable() {
            let j = CellsJson::deserialize(d)?;
            if j.span == 0 {
                return Err(D::Error::custom("span: must be at least 1"));
            }
            let mut prev: Option<u32> = None;
            let mut entries = Vec::with_capacity(j.entries.len());
            for e in j.entries {
                let entry = match e {
                    EntryJson::Keyframe(k) => {
                        if k.tick > j.tick {
                            return Err(D::Error::custom(format!("entries: keyframe of cell {} is after the message tick", k.cell)));
                        }
                        CellEntry::Keyframe(Keyframe { world: j.world, cell: k.cell, tick: k.tick, checksum: None, agents: k.agents })
                    }
                    EntryJson::Delta(x) => {
                        if x.base_tick >= j.tick {
                            return Err(D::Error::custom(format!("entries: delta of cell {} has base_tick not before the message tick", x.cell)));
                        }
                        CellEntry::Delta(Delta {
                            world: j.world,
                            cell: x.cell,
                            tick: j.tick,
                            base_tick: x.base_tick,
                            checksum: None,
                            left: x.left,
                            changed: x.changed,
                            entered: x.entered,
                        })
                    }
                };
                if prev.is_some_and(|p| p >= entry.cell()) {
                    return Err(D::Error::custom(format!("entries: cell {} is not after the previous entry's cell", entry.cell())));
                }
                prev = Some(entry.cell());
                entries.push(entry);
            }
            Ok(Cells { world: j.world, tick: j.tick, span: j.span, checksum: j.checksum, entries })
        } else {
            let b = CellsBin::deserialize(d)?;
            let entries = Cells::unpack_entries(b.world, b.tick, b.span, &b.entries.0).map_err(|e| D::Error::custom(format!("entries: {e}")))?;
            Ok(Cells { world: b.world, tick: b.tick, span: b.span, checksum: b.checksum, entries })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::{FrameScope, encode_delta};
    use crate::quant::Quantization;

    fn a(id: u32, x: i32, y: i32) -> QAgent {
        QAgent { id, group: 1, pos: [x, y], vel: [0, 0], orient: 0 }
    }

    #[test]
    fn entry_heads_fold_gap_and_flags_and_positions_chain() {
        let body = keyframe_body(&[a(5, 1000, 2000), a(9, 1003, 1998)]).unwrap();
        // count 2; record id 5: head (5<<2)|S0 F0 = 20, group 1, pos zz(1000)=2000 -> d0 0f,
        // zz(2000)=4000 -> a0 1f, vel 0 0, orient 0; record id 9: gap 3 -> 12|S=2 = 14,
        // pos chained (+3, -2) -> zz 6, 3, vel 0 0, orient 0.
        assert_eq!(body.bytes, [2, 20, 1, 0xd0, 0x0f, 0xa0, 0x1f, 0, 0, 0, 14, 6, 3, 0, 0, 0]);
        // Alone, a body's first position is absolute: zz(1010)=2020 -> e4 0f, zz(1990)=3980 -> 8c 1f.
        let next = keyframe_body(&[a(2, 1010, 1990)]).unwrap();
        assert_eq!(next.bytes, [1, 8, 1, 0xe4, 0x0f, 0x8c, 0x1f, 0, 0, 0]);
        let mut w = EntriesWriter::new(100, 1, 0);
        w.keyframe(3, 100, &body).unwrap();
        w.keyframe(4, 97, &EntryBody::empty_keyframe()).unwrap();
        w.keyframe(5, 100, &next).unwrap();
        let empty_delta = delta_body(&[], &[], &[]).unwrap();
        w.delta(6, 99, &empty_delta).unwrap();
        w.delta(7, 90, &empty_delta).unwrap();
        assert_eq!(w.delta(7, 99, &empty_delta), Err(EntryError::Unordered(7)));
        assert_eq!(w.delta(8, 100, &empty_delta), Err(EntryError::Tick(100)));
        let bytes = w.finish();
        // cell 3: gap 3, K -> 14, then the body as it is (the message's first record); cell 4:
        // gap 0, K|B -> 3, age 3, no records; cell 5: gap 0, K -> 2, its record chained on the
        // last one of cell 3: (1010-1003, 1990-1998) = (7, -8) -> zz 14, 15; cell 6: gap 0,
        // implied base -> 0; cell 7: gap 0, B -> 1, age 10.
        assert_eq!(bytes.get(..1), Some(&[14u8][..]));
        assert_eq!(bytes.get(17..), Some(&[3u8, 3, 0, 2, 1, 8, 1, 14, 15, 0, 0, 0, 0, 0, 1, 10, 0][..]));
        let e = Cells::unpack_entries(2, 100, 1, &bytes).unwrap();
        assert_eq!(e.len(), 5);
        assert_eq!(e[0], CellEntry::Keyframe(Keyframe { world: 2, cell: 3, tick: 100, checksum: None, agents: vec![a(5, 1000, 2000), a(9, 1003, 1998)] }));
        assert!(matches!(&e[1], CellEntry::Keyframe(k) if k.tick == 97 && k.agents.is_empty()));
        assert_eq!(e[2], CellEntry::Keyframe(Keyframe { world: 2, cell: 5, tick: 100, checksum: None, agents: vec![a(2, 1010, 1990)] }));
        assert!(matches!(&e[3], CellEntry::Delta(d) if d.base_tick == 99 && d.tick == 100 && d.cell == 6));
        assert!(matches!(&e[4], CellEntry::Delta(d) if d.base_tick == 90 && d.cell == 7));
    }

    #[test]
    fn malformed_entries_are_refused() {
        // age 0, age beyond tick, span 0, count past the end, truncated record.
        assert_eq!(Cells::unpack_entries(0, 5, 1, &[3, 0, 0]), Err(PackError::OutOfRange("age")));
        assert_eq!(Cells::unpack_entries(0, 5, 1, &[3, 6, 0]), Err(PackError::OutOfRange("age")));
        assert_eq!(Cells::unpack_entries(0, 0, 1, &[0, 0]), Err(PackError::OutOfRange("age")));
        assert_eq!(Cells::unpack_entries(0, 5, 0, &[]), Err(PackError::OutOfRange("span")));
        assert_eq!(Cells::unpack_entries(0, 5, 1, &[2, 5]), Err(PackError::Truncated));
        assert_eq!(Cells::unpack_entries(0, 5, 1, &[2, 1, 0]), Err(PackError::Truncated));
        // A count far beyond the bytes is refused without allocating for it.
        assert_eq!(Cells::unpack_entries(0, 5, 1, &[2, 0xff, 0xff, 0xff, 0xff, 0x0f]), Err(PackError::Truncated));
    }

    #[test]
    fn a_message_round_trips_in_both_encodings() {
        let q = Quantization::default();
        let s = FrameScope { world: 1, cell: 9 };
        let prev = [a(1, 0, 0), a(2, 5, 5), a(4, 9, 9)];
        let next = [QAgent { vel: [3, 0], pos: [2, 0], ..a(1, 0, 0) }, a(3, 7, 7), a(4, 9, 9)];
        let mut d = encode_delta(&prev, &next, s, 40..42, &q, false).unwrap();
        let key = Keyframe { world: 1, cell: 2, tick: 30, checksum: None, agents: prev.to_vec() };
        let msg = crate::ServerMsg::Cells(Cells { world: 1, tick: 42, span: 2, checksum: Some(Checksum(7)), entries: vec![CellEntry::Keyframe(key.clone()), CellEntry::Delta(d.clone())] });
        let bin = crate::encode_binary(&msg).unwrap();
        let crate::ServerMsg::Cells(c) = &msg else { panic!() };
        assert_eq!(encode_cells_binary(1, 42, 2, Some(7), &c.pack_entries().unwrap()).unwrap(), bin);
        let back: crate::ServerMsg = crate::decode_binary(&bin, 1 << 20).unwrap();
        // Skimmed: the head as encoded, and the length of the whole message, also at the start
        // of a batch; a cut message, or another message, is not a cells message.
        let head = CellsHead { world: 1, tick: 42, span: 2, checksum: Some(7), entries_len: c.pack_entries().unwrap().len(), len: bin.len() };
        assert_eq!(skim_cells_binary(&bin), Some(head));
        let mut batch = bin.clone();
        batch.extend(crate::encode_binary(&crate::ServerMsg::Pong(crate::Pong { request_id: 3, server_tick: 42 })).unwrap());
        assert_eq!(skim_cells_binary(&batch), Some(head));
        assert_eq!(skim_cells_binary(&bin[..bin.len() - 1]), None);
        assert_eq!(skim_cells_binary(&batch[bin.len()..]), None);
        // Binary changes carry base indices only.
        d.changed.iter_mut().for_each(|c| c.id = None);
        let want = crate::ServerMsg::Cells(Cells { world: 1, tick: 42, span: 2, checksum: Some(Checksum(7)), entries: vec![CellEntry::Keyframe(key), CellEntry::Delta(d)] });
        assert_eq!(back, want);
        let json = crate::encode_json(&msg).unwrap();
        assert!(json.starts_with(r#"{"type":"cells","world":1,"tick":42,"span":2,"checksum":"0000000000000007","entries":[{"keyframe":{"cell":2,"tick":30,"#), "{json}");
        let from_json: crate::ServerMsg = crate::decode_json(&json, 1 << 20).unwrap();
        let crate::ServerMsg::Cells(c) = from_json else { panic!("not cells") };
        assert_eq!(c.entries.len(), 2);
        assert!(crate::decode_json::<crate::ServerMsg>(&json.replace(r#""cell":9"#, r#""cell":1"#), 1 << 20).is_err());
    }

    #[test]
    fn fold_is_fnv_over_little_endian_sums() {
        assert_eq!(fold_checksums([]), FNV_OFFSET);
        let mut h = FNV_OFFSET;
        for b in [1u8, 0, 0, 0, 0, 0, 0, 0] {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        assert_eq!(fold_checksums([1]), h);
        assert_ne!(fold_checksums([1, 2]), fold_checksums([2, 1]));
    }
}
