//! Client-side state: one agent map per (world, cell), fed by keyframes and deltas.

use crate::frames::{AgentChange, Delta, Keyframe, Motion, OrientChange};
use crate::messages::ServerMsg;
use crate::quant::{QAgent, Quantization, checksum, heading};
use std::collections::HashMap;
use thiserror::Error;

/// Why a frame could not be applied. After any of these the cell's state is
/// unchanged; the client should resync (send `Subscribe` again).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApplyError {
    /// The delta does not chain on the state the client holds.
    #[error("delta {tick} for world {world} cell {cell} needs base tick {base_tick}, client holds {held:?}")]
    ChainBreak { world: u32, cell: u32, held: Option<u64>, base_tick: u64, tick: u64 },
    /// `tick <= base_tick`.
    #[error("delta tick {tick} is not after its base tick {base_tick}")]
    TickNotAfterBase { tick: u64, base_tick: u64 },
    /// A list is not strictly sorted by id.
    #[error("{list} ids not strictly increasing at {id}")]
    Unsorted { list: &'static str, id: u32 },
    /// `left` names an agent the cell does not hold.
    #[error("left agent {0} is not in the cell")]
    UnknownLeft(u32),
    /// `changed` names an agent the cell does not hold (or that just left).
    #[error("changed agent {0} is not in the cell")]
    UnknownChanged(u32),
    /// A `changed` base index is not below the number of agents held.
    #[error("changed base index {index} is out of range (cell holds {len} agents)")]
    ChangedIndexOutOfRange { index: u32, len: usize },
    /// A `changed` entry's id and base index name different agents.
    #[error("changed entry names id {id} but base index {index} holds id {held}")]
    ChangedKeyMismatch { id: u32, index: u32, held: u32 },
    /// A `changed` entry with neither id nor base index.
    #[error("changed entry without id or base index")]
    ChangedWithoutKey,
    /// `entered` names an agent the cell still holds.
    #[error("entered agent {0} is already in the cell")]
    DuplicateEntered(u32),
    /// `face` on an agent whose new velocity is zero.
    #[error("agent {0}: face orientation with zero velocity")]
    FaceWithoutVelocity(u32),
    /// The state after the frame does not hash to the frame's checksum.
    #[error("checksum mismatch: frame says {expected:016x}, state hashes to {actual:016x}")]
    ChecksumMismatch { expected: u64, actual: u64 },
}

fn check_sorted(list: &'static str, ids: impl Iterator<Item = u32>) -> Result<(), ApplyError> {
    let mut prev: Option<u32> = None;
    for id in ids {
        if prev.is_some_and(|p| p >= id) {
            return Err(ApplyError::Unsorted { list, id });
        }
        prev = Some(id);
    }
    Ok(())
}

/// Applies one change to the previous state of that agent.
pub fn apply_change(prev: &QAgent, c: &AgentChange, q: &Quantization) -> Result<QAgent, ApplyError> {
    changed(prev, c.motion, c.orient, q)
}

/// [`apply_change`] of a change given by its motion and orientation change.
#[inline(always)]
fn changed(prev: &QAgent, motion: Option<Motion>, orient: OrientChange, q: &Quantization) -> Result<QAgent, ApplyError> {
    let mut a = *prev;
    if let Some(m) = motion {
        for i in 0..2 {
            a.vel[i] = prev.vel[i].wrapping_add(m.dvel[i]);
            a.pos[i] = prev.pos[i].wrapping_add(q.predict(a.vel[i])).wrapping_add(m.dpos[i]);
        }
    }
    a.orient = match orient {
        OrientChange::Keep => prev.orient,
        OrientChange::Face => heading(a.vel).ok_or(ApplyError::FaceWithoutVelocity(prev.id))?,
        OrientChange::Turn(t) => prev.orient.wrapping_add(t as u16),
    };
    Ok(a)
}

/// The base position of one change, checking that its keys agree with
/// `base` (the state the delta applies to, sorted by id).
fn change_position(base: &[QAgent], c: &AgentChange) -> Result<usize, ApplyError> {
    match (c.index, c.id) {
        (Some(index), id) => {
            let i = index as usize;
            let held = base.get(i).ok_or(ApplyError::ChangedIndexOutOfRange { index, len: base.len() })?.id;
            match id {
                Some(id) if id != held => Err(ApplyError::ChangedKeyMismatch { id, index, held }),
                _ => Ok(i),
            }
        }
        (None, Some(id)) => base.binary_search_by_key(&id, |a| a.id).map_err(|_| ApplyError::UnknownChanged(id)),
        (None, None) => Err(ApplyError::ChangedWithoutKey),
    }
}

/// Checks every change against `base` without allocating: each change's keys
/// resolve (see [`change_position`]) and base positions strictly increase.
fn check_changes(base: &[QAgent], changes: &[AgentChange]) -> Result<(), ApplyError> {
    let mut prev: Option<usize> = None;
    for c in changes {
        next_position(base, c, &mut prev)?;
    }
    Ok(())
}

/// `c`'s base position (see [`change_position`]), which must come after `prev`; updates `prev`.
fn next_position(base: &[QAgent], c: &AgentChange, prev: &mut Option<usize>) -> Result<usize, ApplyError> {
    let i = change_position(base, c)?;
    if prev.is_some_and(|p| p >= i) {
        return Err(ApplyError::Unsorted { list: "changed", id: base.get(i).map_or(0, |a| a.id) });
    }
    *prev = Some(i);
    Ok(i)
}

/// Each change with both keys set. `base` is the state the delta applies to
/// (sorted by id); the changes must be strictly increasing.
fn resolve_changes(base: &[QAgent], changes: &[AgentChange]) -> Result<Vec<AgentChange>, ApplyError> {
    check_changes(base, changes)?;
    let mut out = Vec::with_capacity(changes.len());
    for c in changes {
        let i = change_position(base, c)?;
        let id = base.get(i).map(|a| a.id);
        // `i` < base.len() <= u32::MAX + 1 when it came from a u32 index or a search.
        let index = u32::try_from(i).map_err(|_| ApplyError::ChangedIndexOutOfRange { index: u32::MAX, len: base.len() })?;
        out.push(AgentChange { id, index: Some(index), ..*c });
    }
    Ok(out)
}

impl Delta {
    /// Fills in each change's missing key (the `id` of a delta decoded from
    /// binary, the `index` of one decoded from JSON) from `base`, the cell
    /// state at `base_tick`. Afterwards the delta encodes to either form.
    /// [`CellState::apply_delta`] does this internally; call it to compare,
    /// print or re-encode a decoded delta. On error the delta is unchanged.
    pub fn resolve(&mut self, base: &[QAgent]) -> Result<(), ApplyError> {
        self.changed = resolve_changes(base, &self.changed)?;
        Ok(())
    }
}

/// Why one entry of a binary `cells` message failed: its bytes, or its application.
enum EntryError {
    Pack(crate::PackError),
    Apply(ApplyError),
}

impl From<crate::PackError> for EntryError {
    fn from(e: crate::PackError) -> Self {
        EntryError::Pack(e)
    }
}

impl From<ApplyError> for EntryError {
    fn from(e: ApplyError) -> Self {
        EntryError::Apply(e)
    }
}

/// One cell's agents as the client holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellState {
    tick: u64,
    agents: Vec<QAgent>,
}

impl CellState {
    /// The cell state a keyframe describes.
    pub fn from_keyframe(k: &Keyframe) -> Result<Self, ApplyError> {
        check_sorted("keyframe", k.agents.iter().map(|a| a.id))?;
        verify(k.checksum.map(|c| c.0), &k.agents)?;
        Ok(CellState { tick: k.tick, agents: k.agents.clone() })
    }

    /// The state tick held.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Agents sorted by id.
    pub fn agents(&self) -> &[QAgent] {
        &self.agents
    }

    /// [`checksum`] of the held state.
    pub fn checksum(&self) -> u64 {
        checksum(&self.agents)
    }

    /// Applies a delta; on error the state is unchanged.
    pub fn apply_delta(&mut self, d: &Delta, q: &Quantization) -> Result<(), ApplyError> {
        let parts = DeltaParts { world: d.world, cell: d.cell, base_tick: d.base_tick, tick: d.tick, left: &d.left, changed: &d.changed, entered: &d.entered };
        self.apply_parts(&parts, d.checksum.map(|c| c.0), q, &mut Spare::default())
    }

    /// Applies a delta given by its parts, with `spare`'s buffers (any contents). On error the
    /// state is unchanged.
    fn apply_parts(&mut self, d: &DeltaParts, checksum: Option<u64>, q: &Quantization, spare: &mut Spare) -> Result<(), ApplyError> {
        self.check_chain(d.world, d.cell, d.base_tick, d.tick)?;
        check_sorted("left", d.left.iter().copied())?;
        check_sorted("entered", d.entered.iter().map(|a| a.id))?;
        if d.left.is_empty() && d.entered.is_empty() {
            // The common case: patch the state in place.
            self.patch(&mut spare.undo, |agents, log| patch_logged(agents, d.changed, q, log))?;
            if let Err(e) = verify(checksum, &self.agents) {
                undo(&mut self.agents, &spare.undo);
                return Err(e);
            }
        } else {
            // Agents leave or enter: the next state is built beside the held one.
            let out = &mut spare.agents;
            out.clear();
            merge(&self.agents, d, q, out)?;
            verify(checksum, out)?;
            std::mem::swap(&mut self.agents, out);
        }
        self.tick = d.tick;
        Ok(())
    }

    /// Patches the held agents in place with `patch` (changes alone: no agent left or entered),
    /// which notes in `log` each agent's state before it changed; on error the agents are put
    /// back as before.
    #[inline(always)]
    fn patch<E>(&mut self, log: &mut Vec<(usize, QAgent)>, patch: impl FnOnce(&mut [QAgent], &mut Vec<(usize, QAgent)>) -> Result<(), E>) -> Result<(), E> {
        log.clear();
        let r = patch(&mut self.agents, log);
        if r.is_err() {
            undo(&mut self.agents, log);
        }
        r
    }

    /// Whether a delta from `base_tick` to `tick` chains on the held state.
    fn check_chain(&self, world: u32, cell: u32, base_tick: u64, tick: u64) -> Result<(), ApplyError> {
        if base_tick != self.tick {
            return Err(ApplyError::ChainBreak { world, cell, held: Some(self.tick), base_tick, tick });
        }
        if tick <= base_tick {
            return Err(ApplyError::TickNotAfterBase { tick, base_tick });
        }
        Ok(())
    }
}

/// The buffers a cell's apply works in, reused from apply to apply.
#[derive(Debug, Clone, Default)]
struct Spare {
    /// The next state, when agents leave or enter (the previous state's buffer afterwards).
    agents: Vec<QAgent>,
    /// The agents a patch in place changed, as they were (for an undo).
    undo: Vec<(usize, QAgent)>,
}

/// A delta's parts, borrowed from a [`Delta`] or from buffers a decoder reuses.
struct DeltaParts<'a> {
    world: u32,
    cell: u32,
    base_tick: u64,
    tick: u64,
    left: &'a [u32],
    changed: &'a [AgentChange],
    entered: &'a [QAgent],
}

/// Appends to `out` the state after `d` with agents leaving or entering: one merge pass over
/// the base state, the sorted `left` ids, the changes (in base order) and the sorted `entered`
/// agents.
fn merge(base: &[QAgent], d: &DeltaParts, q: &Quantization, out: &mut Vec<QAgent>) -> Result<(), ApplyError> {
    // Afterwards every change names an agent of `base` (by a base index
    // below `base.len()` or by an id it holds), in increasing order.
    check_changes(base, d.changed)?;
    out.reserve(base.len() + d.entered.len());
    let mut left = d.left.iter().copied().peekable();
    let mut changes = d.changed.iter().peekable();
    let mut entered = d.entered.iter().peekable();
    // Reported after the errors of the base pass, as if `entered` were merged last.
    let mut duplicate = None;
    for (i, a) in base.iter().enumerate() {
        let change = changes.next_if(|c| match c.index {
            Some(index) => index as usize == i,
            None => c.id == Some(a.id),
        });
        while let Some(n) = entered.next_if(|n| n.id < a.id) {
            out.push(*n);
        }
        match left.peek() {
            Some(&id) if id < a.id => return Err(ApplyError::UnknownLeft(id)),
            Some(&id) if id == a.id => {
                if change.is_some() {
                    return Err(ApplyError::UnknownChanged(id));
                }
                left.next();
                continue;
            }
            _ => {}
        }
        if duplicate.is_none() && entered.peek().is_some_and(|n| n.id == a.id) {
            duplicate = Some(a.id);
        }
        out.push(match change {
            Some(c) => apply_change(a, c, q)?,
            None => *a,
        });
    }
    if let Some(id) = left.next() {
        return Err(ApplyError::UnknownLeft(id));
    }
    if let Some(id) = duplicate {
        return Err(ApplyError::DuplicateEntered(id));
    }
    out.extend(entered);
    Ok(())
}

/// Patches `agents` with `changes`, noting each agent's state before it changed; errors as
/// [`check_changes`] then [`apply_change`] in base order would report them.
fn patch_logged(agents: &mut [QAgent], changes: &[AgentChange], q: &Quantization, log: &mut Vec<(usize, QAgent)>) -> Result<(), ApplyError> {
    // The first `apply_change` error, reported only if every key checks out.
    let mut apply_error = None;
    let mut prev: Option<usize> = None;
    for c in changes {
        // Keys resolve against the patched agents as against the base: patches keep every id,
        // and each position is patched once, after it resolved.
        let i = next_position(agents, c, &mut prev)?;
        if let Some(slot) = agents.get_mut(i) {
            let next = apply_change(slot, c, q);
            patch_slot(i, slot, next, log, &mut apply_error);
        }
    }
    apply_error.map_or(Ok(()), Err)
}

/// Patches the agent at position `i` with its `next` state, noting the state before in `log`;
/// or, if `next` is an error, keeps the first such error in `apply_error`.
#[inline(always)]
fn patch_slot(i: usize, slot: &mut QAgent, next: Result<QAgent, ApplyError>, log: &mut Vec<(usize, QAgent)>, apply_error: &mut Option<ApplyError>) {
    match next {
        Ok(next) => {
            log.push((i, *slot));
            *slot = next;
        }
        Err(e) => {
            apply_error.get_or_insert(e);
        }
    }
}

/// A binary changes-only delta's `count` change records, read from `r` and patched into
/// `agents` as they are read, noting in `log` what [`patch_logged`] of
/// [`crate::pack::read_change`]'s records would, with the same errors (a malformed record ends
/// it at once); without building the records (a change's parts stay in registers).
fn patch_packed(agents: &mut [QAgent], r: &mut crate::pack::Reader, count: usize, q: &Quantization, log: &mut Vec<(usize, QAgent)>) -> Result<(), EntryError> {
    let mut apply_error = None;
    let mut prev = -1i64;
    for _ in 0..count {
        let (index, flags) = r.header(&mut prev, 4, "base index")?;
        let (motion, orient) = crate::pack::read_change_body(r, flags)?;
        // Gap coding makes the indices strictly increase: only their range is left to check.
        let len = agents.len();
        let slot = agents.get_mut(index as usize).ok_or(ApplyError::ChangedIndexOutOfRange { index, len })?;
        let next = changed(slot, motion, orient, q);
        patch_slot(index as usize, slot, next, log, &mut apply_error);
    }
    apply_error.map_or(Ok(()), |e| Err(e.into()))
}

/// Puts back the agents `log` noted before a patch.
fn undo(agents: &mut [QAgent], log: &[(usize, QAgent)]) {
    for &(i, a) in log.iter().rev() {
        if let Some(slot) = agents.get_mut(i) {
            *slot = a;
        }
    }
}

fn verify(expected: Option<u64>, agents: &[QAgent]) -> Result<(), ApplyError> {
    match expected {
        Some(expected) => {
            let actual = checksum(agents);
            if actual == expected { Ok(()) } else { Err(ApplyError::ChecksumMismatch { expected, actual }) }
        }
        None => Ok(()),
    }
}

/// Everything a client sees: one [`CellState`] per (world, cell).
#[derive(Debug, Clone, Default)]
pub struct ClientState {
    quant: Quantization,
    cells: HashMap<(u32, u32), CellState>,
    /// Buffers reused from message to message, so that applying a tick allocates nothing.
    scratch: Scratch,
}

#[derive(Debug, Clone, Default)]
struct Scratch {
    /// What a cell's apply works in.
    spare: Spare,
    /// A decoded delta's changes, left ids and entered agents.
    changed: Vec<AgentChange>,
    left: Vec<u32>,
    entered: Vec<QAgent>,
    /// The cells of the message being applied, for its checksum.
    cells: Vec<u32>,
}

/// One entry of a `cells` message applied by [`ClientState::apply_cells_binary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedEntry {
    /// The cell.
    pub cell: u32,
    /// A keyframe (the cell's whole state) rather than a delta.
    pub keyframe: bool,
    /// The state tick the cell holds now.
    pub tick: u64,
    /// Records applied: a keyframe's agents, or a delta's changed plus entered agents.
    pub records: usize,
}

/// Why a binary `cells` message could not be applied by [`ClientState::apply_cells_binary`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CellsError {
    /// The message's entries are malformed.
    #[error("malformed cells entries: {0}")]
    Malformed(#[from] crate::PackError),
    /// An entry does not apply to its cell (`cell` is `None` for the message checksum).
    #[error("cell {cell:?} tick {tick}: {error}")]
    Apply { cell: Option<u32>, tick: u64, error: ApplyError },
}

impl ClientState {
    /// Empty state using the quantization announced in `Welcome`.
    pub fn new(quant: Quantization) -> Self {
        ClientState { quant, ..ClientState::default() }
    }

    /// The quantization in use.
    pub fn quantization(&self) -> &Quantization {
        &self.quant
    }

    /// Applies a keyframe (replacing that cell).
    pub fn apply_keyframe(&mut self, k: &Keyframe) -> Result<(), ApplyError> {
        let cell = CellState::from_keyframe(k)?;
        self.cells.insert((k.world, k.cell), cell);
        Ok(())
    }

    /// Applies a delta to its cell.
    pub fn apply_delta(&mut self, d: &Delta) -> Result<(), ApplyError> {
        let parts = DeltaParts { world: d.world, cell: d.cell, base_tick: d.base_tick, tick: d.tick, left: &d.left, changed: &d.changed, entered: &d.entered };
        self.apply_parts(&parts, d.checksum.map(|c| c.0))
    }

    fn apply_parts(&mut self, d: &DeltaParts, checksum: Option<u64>) -> Result<(), ApplyError> {
        match self.cells.get_mut(&(d.world, d.cell)) {
            Some(cell) => cell.apply_parts(d, checksum, &self.quant, &mut self.scratch.spare),
            None => Err(ApplyError::ChainBreak {
                world: d.world,
                cell: d.cell,
                held: None,
                base_tick: d.base_tick,
                tick: d.tick,
            }),
        }
    }

    /// Applies the binary `cells` message at the start of `bytes` (a frame holds one message, or
    /// several back to back when batched), whose head [`crate::skim_cells_binary`] read,
    /// straight from its bytes: what [`crate::decode_binary`] then [`ClientState::apply_cells`]
    /// do, without building a [`crate::Cells`] and, once its buffers have grown, without
    /// allocating. `each` hears of every entry applied. The frame's next message starts at
    /// `head.len`.
    ///
    /// Entries apply in order as they are read, so on an error the entries before it stay
    /// applied (as with [`ClientState::apply_cells`]) and a malformed entry is found only after
    /// them; either way the client resyncs.
    pub fn apply_cells_binary(&mut self, head: &crate::CellsHead, bytes: &[u8], mut each: impl FnMut(AppliedEntry)) -> Result<(), CellsError> {
        let entries = bytes.get(head.len.saturating_sub(head.entries_len)..head.len).ok_or(crate::PackError::Truncated)?;
        let mut r = crate::cells::EntryReader::new(head.tick, head.span, entries)?;
        let mut cells = std::mem::take(&mut self.scratch.cells);
        cells.clear();
        let result = (|| {
            while let Some(entry) = r.head()? {
                let applied = self.apply_entry(head.world, head.tick, &mut r, entry).map_err(|e| match e {
                    EntryError::Pack(e) => CellsError::Malformed(e),
                    EntryError::Apply(error) => CellsError::Apply { cell: Some(entry.cell()), tick: head.tick, error },
                })?;
                cells.push(applied.cell);
                each(applied);
            }
            if let Some(expected) = head.checksum {
                let actual = self.fold_cells(head.world, &cells);
                if actual != expected {
                    return Err(CellsError::Apply { cell: None, tick: head.tick, error: ApplyError::ChecksumMismatch { expected, actual } });
                }
            }
            Ok(())
        })();
        self.scratch.cells = cells;
        result
    }

    /// Reads and applies one entry of a `cells` message of `world` at `tick`.
    fn apply_entry(&mut self, world: u32, tick: u64, r: &mut crate::cells::EntryReader, entry: crate::cells::EntryHead) -> Result<AppliedEntry, EntryError> {
        use crate::cells::EntryHead;
        match entry {
            EntryHead::Keyframe { cell, state_tick, count } => {
                let agents = r.records(count)?;
                let k = Keyframe { world, cell, tick: state_tick, checksum: None, agents };
                self.apply_keyframe(&k)?;
                Ok(AppliedEntry { cell, keyframe: true, tick: state_tick, records: count })
            }
            EntryHead::Delta { cell, base_tick, changes, left, entered } => {
                let ClientState { quant, cells, scratch } = self;
                let held = cells.get_mut(&(world, cell)).ok_or(ApplyError::ChainBreak { world, cell, held: None, base_tick, tick })?;
                if !left && !entered {
                    // The common case: each change record is read and patched in in one pass.
                    held.check_chain(world, cell, base_tick, tick)?;
                    held.patch(&mut scratch.spare.undo, |agents, log| patch_packed(agents, &mut r.r, changes, quant, log))?;
                    held.tick = tick;
                    return Ok(AppliedEntry { cell, keyframe: false, tick, records: changes });
                }
                r.changes_into(changes, &mut scratch.changed)?;
                r.ids_into(left, &mut scratch.left)?;
                r.entered_into(entered, &mut scratch.entered)?;
                let parts = DeltaParts { world, cell, base_tick, tick, left: &scratch.left, changed: &scratch.changed, entered: &scratch.entered };
                held.apply_parts(&parts, None, quant, &mut scratch.spare)?;
                Ok(AppliedEntry { cell, keyframe: false, tick, records: scratch.changed.len() + scratch.entered.len() })
            }
        }
    }

    /// [`crate::cells::fold_checksums`] of `cells` of `world` as held now.
    fn fold_cells(&self, world: u32, cells: &[u32]) -> u64 {
        crate::cells::fold_checksums(cells.iter().map(|&c| self.cell_checksum(world, c)))
    }

    /// The checksum of a cell as held ([`crate::FNV_OFFSET`], the empty state's, if not held).
    fn cell_checksum(&self, world: u32, cell: u32) -> u64 {
        self.cells.get(&(world, cell)).map_or(crate::quant::FNV_OFFSET, CellState::checksum)
    }

    /// Applies `Keyframe`/`Delta`, adopts `Welcome`'s quantization (and drops
    /// all cells); returns whether the message touched the state.
    pub fn apply(&mut self, msg: &ServerMsg) -> Result<bool, ApplyError> {
        match msg {
            ServerMsg::Keyframe(k) => self.apply_keyframe(k).map(|()| true),
            ServerMsg::Delta(d) => self.apply_delta(d).map(|()| true),
            ServerMsg::Cells(c) => self.apply_cells(c).map(|()| true),
            ServerMsg::Welcome(w) => {
                *self = ClientState::new(w.quantization);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Applies every entry of a `cells` message in order, then checks the message checksum
    /// (when present) against the cells' states. Stops at the first entry that does not apply;
    /// the entries before it stay applied (each cell is consistent on its own), and the client
    /// resyncs as after any failed frame.
    pub fn apply_cells(&mut self, c: &crate::cells::Cells) -> Result<(), ApplyError> {
        for e in &c.entries {
            match e {
                crate::cells::CellEntry::Keyframe(k) => self.apply_keyframe(k)?,
                crate::cells::CellEntry::Delta(d) => self.apply_delta(d)?,
            }
        }
        if let Some(expected) = c.checksum {
            let actual = self.cells_checksum(c);
            if actual != expected.0 {
                return Err(ApplyError::ChecksumMismatch { expected: expected.0, actual });
            }
        }
        Ok(())
    }

    /// The message checksum of `c`'s cells as held now (PROTOCOL.md §6.8): what a `cells`
    /// message's `checksum` must equal once its entries are applied.
    pub fn cells_checksum(&self, c: &crate::cells::Cells) -> u64 {
        crate::cells::fold_checksums(c.entries.iter().map(|e| self.cell_checksum(c.world, e.cell())))
    }

    /// The cell, if held.
    pub fn cell(&self, world: u32, cell: u32) -> Option<&CellState> {
        self.cells.get(&(world, cell))
    }

    /// Keeps only `cells` of `world` (after a `Subscribed` result).
    pub fn retain_cells(&mut self, world: u32, cells: &[u32]) {
        self.cells.retain(|&(w, c), _| w != world || cells.contains(&c));
    }

    /// Drops every cell of `world` (after `Unsubscribe`).
    pub fn remove_world(&mut self, world: u32) {
        self.cells.retain(|&(w, _), _| w != world);
    }

    /// Every agent in view (the union of held cells), unordered.
    pub fn agents(&self) -> impl Iterator<Item = (u32, &QAgent)> {
        self.cells.iter().flat_map(|(&(w, _), c)| c.agents.iter().map(move |a| (w, a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::{Checksum, FrameScope, encode_delta, encode_keyframe};
    use crate::frames::AgentChange;

    fn a(id: u32, x: i32) -> QAgent {
        QAgent { id, group: 0, pos: [x, 0], vel: [0, 0], orient: 0 }
    }

    #[test]
    fn chain_break_and_errors_leave_state_unchanged() {
        let q = Quantization::default();
        let scope = FrameScope { world: 0, cell: 1 };
        let k = encode_keyframe(scope, 3, &[a(1, 0), a(2, 0)], true).unwrap();
        let mut cs = ClientState::new(q);
        cs.apply_keyframe(&k).unwrap();
        let d = encode_delta(&k.agents, &[a(2, 5), a(3, 0)], scope, 3..4, &q, true).unwrap();
        let mut wrong = d.clone();
        wrong.base_tick = 2;
        assert!(matches!(cs.apply_delta(&wrong), Err(ApplyError::ChainBreak { held: Some(3), .. })));
        let mut bad_sum = d.clone();
        bad_sum.checksum = Some(Checksum(1));
        assert!(matches!(cs.apply_delta(&bad_sum), Err(ApplyError::ChecksumMismatch { .. })));
        let mut dup = d.clone();
        dup.entered = vec![a(2, 0)];
        dup.checksum = None;
        dup.left.clear();
        assert_eq!(cs.apply_delta(&dup), Err(ApplyError::DuplicateEntered(2)));
        let mut unknown = d.clone();
        unknown.left = vec![9];
        assert_eq!(cs.apply_delta(&unknown), Err(ApplyError::UnknownLeft(9)));
        assert_eq!(cs.cell(0, 1).unwrap().agents(), k.agents.as_slice());
        cs.apply_delta(&d).unwrap();
        assert_eq!(cs.cell(0, 1).unwrap().agents(), &[a(2, 5), a(3, 0)]);
        assert_eq!(cs.cell(0, 1).unwrap().tick(), 4);
        let mut other = d.clone();
        other.cell = 7;
        assert!(matches!(cs.apply_delta(&other), Err(ApplyError::ChainBreak { held: None, .. })));
        // Changes only (the common path): a bad checksum leaves the state unchanged, then two
        // good deltas in a row apply.
        let held = [a(2, 5), a(3, 0)];
        let d5 = encode_delta(&held, &[a(2, 6), a(3, 1)], scope, 4..5, &q, true).unwrap();
        assert!(d5.left.is_empty() && d5.entered.is_empty());
        let mut bad = d5.clone();
        bad.checksum = Some(Checksum(1));
        assert!(matches!(cs.apply_delta(&bad), Err(ApplyError::ChecksumMismatch { .. })));
        assert_eq!(cs.cell(0, 1).unwrap().agents(), &held);
        cs.apply_delta(&d5).unwrap();
        let d6 = encode_delta(&[a(2, 6), a(3, 1)], &[a(2, 6), a(3, 4)], scope, 5..6, &q, true).unwrap();
        cs.apply_delta(&d6).unwrap();
        assert_eq!(cs.cell(0, 1).unwrap().agents(), &[a(2, 6), a(3, 4)]);
        assert_eq!(cs.cell(0, 1).unwrap().tick(), 6);
        cs.retain_cells(0, &[2]);
        assert!(cs.cell(0, 1).is_none());
    }

    #[test]
    fn changes_resolve_by_index_or_id() {
        let q = Quantization::default();
        let base = [a(4, 0), a(9, 0), a(30, 0)];
        let scope = FrameScope::default();
        let d = encode_delta(&base, &[a(4, 0), a(9, 2), a(30, 0)], scope, 1..2, &q, false).unwrap();
        assert_eq!((d.changed[0].id, d.changed[0].index), (Some(9), Some(1)));
        let key = encode_keyframe(scope, 1, &base, false).unwrap();
        // Binary form (index only) and JSON form (id only) both apply and resolve alike.
        for c in [AgentChange { id: None, ..d.changed[0] }, AgentChange { index: None, ..d.changed[0] }] {
            let mut half = d.clone();
            half.changed = vec![c];
            let mut cell = CellState::from_keyframe(&key).unwrap();
            cell.apply_delta(&half, &q).unwrap();
            assert_eq!(cell.agents(), &[a(4, 0), a(9, 2), a(30, 0)]);
            half.resolve(&base).unwrap();
            assert_eq!(half, d);
        }
        let with = |c: AgentChange| Delta { changed: vec![c], ..d.clone() };
        let mut cell = CellState::from_keyframe(&key).unwrap();
        let out = with(AgentChange { id: None, index: Some(3), ..d.changed[0] });
        assert_eq!(cell.apply_delta(&out, &q), Err(ApplyError::ChangedIndexOutOfRange { index: 3, len: 3 }));
        let mismatch = with(AgentChange { id: Some(30), ..d.changed[0] });
        assert_eq!(cell.apply_delta(&mismatch, &q), Err(ApplyError::ChangedKeyMismatch { id: 30, index: 1, held: 9 }));
        let none = with(AgentChange { id: None, index: None, ..d.changed[0] });
        assert_eq!(cell.apply_delta(&none, &q), Err(ApplyError::ChangedWithoutKey));
        let mut gone = with(AgentChange { id: None, ..d.changed[0] });
        gone.left = vec![9];
        assert_eq!(cell.apply_delta(&gone, &q), Err(ApplyError::UnknownChanged(9)));
        let mut twice = with(AgentChange { id: None, ..d.changed[0] });
        twice.changed.push(twice.changed[0]);
        assert_eq!(cell.apply_delta(&twice, &q), Err(ApplyError::Unsorted { list: "changed", id: 9 }));
        assert_eq!(cell.agents(), base.as_slice());
    }

    #[test]
    fn a_failed_patch_in_place_is_undone() {
        // Agent 1 moves (+5 in x, patched in place first), then agent 2 asks to face along a
        // zero velocity: the delta fails and agent 1 must be back at x = 0. Likewise when every
        // change applies but the checksum does not match.
        let q = Quantization::default();
        let base = [a(1, 0), a(2, 0), a(3, 0)];
        let key = encode_keyframe(FrameScope::default(), 1, &base, false).unwrap();
        let moved = AgentChange { id: None, index: Some(0), motion: Some(crate::frames::Motion { dpos: [5, 0], dvel: [0, 0] }), orient: OrientChange::Keep };
        let face = AgentChange { id: None, index: Some(1), motion: None, orient: OrientChange::Face };
        let d = Delta { world: 0, cell: 0, tick: 2, base_tick: 1, checksum: None, left: vec![], changed: vec![moved, face], entered: vec![] };
        let mut cell = CellState::from_keyframe(&key).unwrap();
        assert_eq!(cell.apply_delta(&d, &q), Err(ApplyError::FaceWithoutVelocity(2)));
        assert_eq!((cell.agents(), cell.tick()), (&base[..], 1));
        let good = Delta { changed: vec![moved], checksum: Some(Checksum(1)), ..d.clone() };
        assert!(matches!(cell.apply_delta(&good, &q), Err(ApplyError::ChecksumMismatch { .. })));
        assert_eq!((cell.agents(), cell.tick()), (&base[..], 1));
        // The same two deltas as `cells` entries applied from their bytes, and one whose second
        // change names a position past the cell's agents.
        let mut client = ClientState::new(q);
        client.apply_keyframe(&key).unwrap();
        let past_end = AgentChange { index: Some(3), ..moved };
        let cases = [
            (vec![moved, face], None, Some(0), ApplyError::FaceWithoutVelocity(2)),
            (vec![moved, past_end], None, Some(0), ApplyError::ChangedIndexOutOfRange { index: 3, len: 3 }),
            (vec![moved], Some(1), None, ApplyError::ChecksumMismatch { expected: 1, actual: crate::cells::fold_checksums([checksum(&[a(1, 5), a(2, 0), a(3, 0)])]) }),
        ];
        for (changes, sum, cell, error) in cases {
            let body = crate::cells::delta_body(&[], &changes, &[]).unwrap();
            let mut w = crate::cells::EntriesWriter::new(2, 1, 64);
            w.delta(0, 1, &body).unwrap();
            let bytes = crate::cells::encode_cells_binary(0, 2, 1, sum, &w.finish()).unwrap();
            let head = crate::cells::skim_cells_binary(&bytes).unwrap();
            assert_eq!(client.apply_cells_binary(&head, &bytes, |_| {}), Err(CellsError::Apply { cell, tick: 2, error }));
            // The checksum fails after the entry applied (the entries before an error stay
            // applied); the other errors leave the cell as it was.
            let want: &[QAgent] = if sum.is_none() { &base } else { &[a(1, 5), a(2, 0), a(3, 0)] };
            assert_eq!(client.cell(0, 0).unwrap().agents(), want);
        }
    }

    #[test]
    fn change_of_left_agent_is_rejected() {
        let q = Quantization::default();
        let mut cell = CellState::from_keyframe(
            &encode_keyframe(FrameScope::default(), 1, &[a(1, 0), a(2, 0)], false).unwrap(),
        )
        .unwrap();
        let mut d = encode_delta(&[a(1, 0), a(2, 0)], &[a(1, 4), a(2, 0)], FrameScope::default(), 1..2, &q, false)
            .unwrap();
        d.left = vec![1];
        assert_eq!(cell.apply_delta(&d, &q), Err(ApplyError::UnknownChanged(1)));
        d.left.clear();
        d.tick = 1;
        assert!(matches!(cell.apply_delta(&d, &q), Err(ApplyError::TickNotAfterBase { .. })));
    }
}
