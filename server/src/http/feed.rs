//! What a subscription is sent of each tick: the frame cursor of one subscription (which cells
//! owe a keyframe, which the viewer holds, which frames are covered), the `cells` message built
//! from the bodies every cell frame encodes once, the viewer's filter, and a connection's byte
//! rate. No I/O: the send task (`ws.rs`) and the fan-out writers (`fanout.rs`) call it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use steer_proto::{self as proto, Encoding, ServerMsg};

use crate::runtime::{CellFrame, SetKey, TickFrame};

/// What the send task filters frames and events by.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// The player (`None` for the admin).
    player: Option<String>,
    /// Admins and spectators see every cell and every event.
    sees_all: bool,
    /// The vision key (team or player) under `owned` visibility.
    key: String,
}

impl Viewer {
    pub(crate) fn nobody() -> Self {
        Viewer { player: None, sees_all: false, key: String::new() }
    }

    /// What `identity` sees: admins and spectators everything, a player what its vision key
    /// shows (`player` is `None` for the admin, who owns no agent).
    pub(crate) fn of(identity: &crate::auth::Identity) -> Self {
        Viewer {
            player: (identity.role != proto::Role::Admin).then(|| identity.player.clone()),
            sees_all: identity.role != proto::Role::Player,
            key: identity.vision_key(),
        }
    }

    /// What of `frame` this viewer sees under the frame's visibility.
    fn vision<'a>(&self, frame: &'a TickFrame) -> Sight<'a> {
        match &frame.vision {
            Some(v) if !self.sees_all => v.get(&self.key).map_or(Sight::Nothing, |cells| Sight::Only(cells)),
            _ => Sight::All,
        }
    }

    /// Admins and spectators see every cell and every event.
    pub(crate) fn sees_all(&self) -> bool {
        self.sees_all
    }

    /// Should this event of the broadcast go to this viewer?
    pub(crate) fn wants(&self, frame: &TickFrame, e: &crate::runtime::FrameEvent) -> bool {
        if e.owner.is_some() && e.owner.as_deref() == self.player.as_deref() {
            // Delivered to every connection of the owner directly.
            return false;
        }
        e.public || frame.vision.is_none() || self.sees_all || e.vision.as_deref() == Some(self.key.as_str())
    }
}

/// The cells of a frame a viewer sees.
#[derive(Debug, Clone, Copy)]
enum Sight<'a> {
    /// Every cell (no visibility filter, or a viewer who sees all).
    All,
    /// The cells marked.
    Only(&'a [bool]),
    /// None at all (nothing of the viewer's is in the world).
    Nothing,
}

/// An empty keyframe of a cell: what a viewer gets for a cell that goes out of its sight.
fn empty_keyframe(world: u32, cell: u32, tick: u64, enc: Encoding) -> Option<Bytes> {
    let k = proto::encode_keyframe(proto::FrameScope { world, cell }, tick, &[], true).ok()?;
    Some(encode(&ServerMsg::Keyframe(k), enc))
}

/// What a subscription takes of one cell this tick.
enum Want {
    Skip,
    Key,
    Delta,
    /// An empty keyframe: the cell went out of the viewer's sight.
    Empty,
}

/// The state tick of a key and the base tick of a delta.
fn frame_ticks(m: &ServerMsg) -> u64 {
    match m {
        ServerMsg::Keyframe(k) => k.tick,
        ServerMsg::Delta(d) => d.base_tick,
        _ => 0,
    }
}

/// The `cells` message (PROTOCOL.md §6.8) of `sub_cells` at `frame`'s tick: each cell's entry as
/// `want` says, from the bodies every cell frame encodes once. Empty when no cell has an entry.
fn build_cells(frame: &TickFrame, span: u32, cells: &[CellFrame], sub_cells: &[u32], mut want: impl FnMut(usize, u32, &CellFrame) -> Want) -> Bytes {
    let mut w = proto::EntriesWriter::new(frame.tick, span, 64 * sub_cells.len().min(4096));
    // The cell frames whose state each entry leaves (`None`: emptied), for the checksum.
    let mut after: Vec<Option<&CellFrame>> = Vec::new();
    let mut has_key = false;
    for (k, &c) in sub_cells.iter().enumerate() {
        let Some(cf) = cells.get(c as usize) else { continue };
        let r = match want(k, c, cf) {
            Want::Skip => continue,
            Want::Key => {
                has_key = true;
                after.push(Some(cf));
                w.keyframe(c, frame_ticks(&cf.key.msg), cf.key.body())
            }
            Want::Empty => {
                has_key = true;
                after.push(None);
                w.keyframe(c, frame.tick, &proto::EntryBody::empty_keyframe())
            }
            Want::Delta => match &cf.delta {
                Some(d) => {
                    after.push(Some(cf));
                    w.delta(c, frame_ticks(&d.msg), d.body())
                }
                None => continue,
            },
        };
        if let Err(e) = r {
            tracing::error!("cannot build a cells message: {e}");
            return Bytes::new();
        }
    }
    if w.is_empty() {
        return Bytes::new();
    }
    let checksum = (has_key || frame.checksum_due(span)).then(|| proto::fold_checksums(after.iter().map(|cf| cf.map_or(proto::FNV_OFFSET, |cf| cf.key.sum()))));
    proto::encode_cells_binary(frame.world, frame.tick, span, checksum, &w.finish()).map(Bytes::from).unwrap_or_default()
}

/// The `cells` message of a subscription with nothing per connection (no keyframe owed, every
/// cell in sight) at `frame`, if this tick has one for its rate: the message shared by every
/// subscription of the same rectangle and rate (`key`), built by the first to ask.
pub(crate) fn steady_cells(frame: &TickFrame, span: u32, key: SetKey, sub_cells: &[u32], m: &crate::metrics::Metrics) -> Option<Bytes> {
    let (cells, due) = frame.cells_at(span)?;
    if !due {
        return None;
    }
    let build = || build_cells(frame, span, cells, sub_cells, |_, _, _| Want::Delta);
    let (b, built) = frame.shared_message(key, build).unwrap_or_else(|| (build(), true));
    if built {
        m.cells_built.inc();
    } else {
        m.cells_shared_hits.inc();
    }
    (!b.is_empty()).then_some(b)
}

/// Where one subscription stands in its world's frames.
pub(crate) struct Cursor {
    /// Its AOI cells.
    pub(crate) cells: Arc<[u32]>,
    /// `every_n_ticks`.
    pub(crate) span: u32,
    /// Its shared messages' key.
    pub(crate) key: SetKey,
    /// Per cell: a keyframe is owed.
    need_key: Vec<bool>,
    /// Some `need_key` may be set (false: none is, so a tick costs no scan of the cells).
    owed: bool,
    /// Under `owned` visibility: the client holds this cell's content (a cell that goes out of
    /// sight is emptied with an empty keyframe).
    shown: Vec<bool>,
    /// Frames up to this tick are already covered by keyframes sent.
    pub(crate) after: u64,
    /// Frames up to this sequence number ([`TickFrame::seq`]) are handled.
    pub(crate) seq: u64,
}

impl Cursor {
    /// A new subscription of `cells` at rate `span`: every cell owes a keyframe.
    pub(crate) fn new(cells: Vec<u32>, span: u32) -> Self {
        let key = (span, cells.first().copied().unwrap_or(0), cells.last().copied().unwrap_or(0), cells.len());
        let n = cells.len();
        Cursor { need_key: vec![true; n], owed: true, shown: vec![false; n], span, key, cells: cells.into(), after: 0, seq: 0 }
    }

    /// Nothing is owed to this subscription and `frame` is the same for every viewer of it
    /// (binary, no vision filter, no reset): the fan-out may send its frames.
    pub(crate) fn steady(&self, frame: &TickFrame, viewer: &Viewer, enc: Encoding) -> bool {
        !self.owed && enc == Encoding::Binary && (frame.vision.is_none() || viewer.sees_all) && !frame.reset
    }

    /// Handles a frame of its world: skips what is covered, resyncs after a gap, and adds the
    /// frame's messages to `batch`. Returns the keyframes sent.
    pub(crate) fn on_frame(&mut self, frame: &TickFrame, viewer: &Viewer, enc: Encoding, batch: &mut Vec<(Bytes, Encoding)>, m: &crate::metrics::Metrics) -> u64 {
        if frame.seq <= self.seq {
            return 0;
        }
        // A frame this subscription never saw (its receiver was made anew after a fan-out
        // membership): the chain is broken, keyframes resync it.
        let gap = frame.seq > self.seq + 1;
        self.seq = frame.seq;
        if frame.tick <= self.after {
            return 0;
        }
        if gap {
            self.owe_all();
        }
        self.frame(frame, viewer, enc, batch, true, m)
    }

    /// This frame's state for the viewer: keyframes where owed, deltas on the subscription's
    /// ticks; under `owned` visibility only cells in sight, and an empty keyframe for a cell
    /// leaving it. Binary connections get one `cells` message (shared with every subscription
    /// of the same rectangle and rate when nothing about it is per connection), JSON ones a
    /// message per cell. With `events`, the frame's events for the viewer follow. Returns the
    /// keyframes sent.
    pub(crate) fn frame(&mut self, frame: &TickFrame, viewer: &Viewer, enc: Encoding, batch: &mut Vec<(Bytes, Encoding)>, events: bool, m: &crate::metrics::Metrics) -> u64 {
        if frame.reset {
            self.owe_all();
        }
        let mut keys = 0;
        if let Some((cells, due)) = frame.cells_at(self.span) {
            let vision = viewer.vision(frame);
            let owed = self.owed;
            if due || owed {
                keys = match enc {
                    Encoding::Binary => self.cells_message(frame, cells, due, vision, batch, m),
                    Encoding::Json => self.json_frames(frame, cells, due, vision, batch),
                };
            }
        }
        if events {
            for e in &frame.events {
                if viewer.wants(frame, e) {
                    batch.push((e.msg.encoded(enc), enc));
                }
            }
        }
        keys
    }

    /// Whether cell `c` is out of the viewer's sight; updates what the client holds.
    fn hidden(&mut self, k: usize, c: u32, vision: Sight<'_>) -> Option<Want> {
        let in_sight = match vision {
            Sight::All => return None,
            Sight::Only(v) => v.get(c as usize).copied().unwrap_or(false),
            Sight::Nothing => false,
        };
        if in_sight {
            self.shown[k] = true;
            return None;
        }
        // Back in sight later: a keyframe, never a delta on what the client does not hold.
        self.need_key[k] = true;
        self.owed = true;
        Some(if std::mem::replace(&mut self.shown[k], false) { Want::Empty } else { Want::Skip })
    }

    fn cells_message(&mut self, frame: &TickFrame, cells: &[CellFrame], due: bool, vision: Sight<'_>, batch: &mut Vec<(Bytes, Encoding)>, m: &crate::metrics::Metrics) -> u64 {
        let span = self.span;
        if matches!(vision, Sight::All) && !self.owed {
            // Nothing per connection (`due`, since `owed` is not set): the message every
            // subscription of this rectangle and rate gets.
            batch.extend(steady_cells(frame, span, self.key, &self.cells, m).map(|b| (b, Encoding::Binary)));
            return 0;
        }
        let mut keys = 0;
        let sub_cells = self.cells.clone();
        let b = build_cells(frame, span, cells, &sub_cells, |k, c, _| {
            if let Some(w) = self.hidden(k, c, vision) {
                return w;
            }
            if std::mem::replace(&mut self.need_key[k], false) {
                keys += 1;
                Want::Key
            } else if due {
                Want::Delta
            } else {
                Want::Skip
            }
        });
        self.owed = self.need_key.iter().any(|&k| k);
        m.cells_built.inc();
        if !b.is_empty() {
            batch.push((b, Encoding::Binary));
        }
        keys
    }

    /// Every cell owes a keyframe (after a lag or a world reset).
    pub(crate) fn owe_all(&mut self) {
        self.need_key.iter_mut().for_each(|k| *k = true);
        self.owed = true;
    }

    fn json_frames(&mut self, frame: &TickFrame, cells: &[CellFrame], due: bool, vision: Sight<'_>, batch: &mut Vec<(Bytes, Encoding)>) -> u64 {
        let enc = Encoding::Json;
        let mut keys = 0;
        for k in 0..self.cells.len() {
            let c = self.cells[k];
            let Some(cf) = cells.get(c as usize) else { continue };
            match self.hidden(k, c, vision) {
                Some(Want::Empty) => {
                    batch.extend(empty_keyframe(frame.world, c, frame.tick, enc).map(|b| (b, enc)));
                    continue;
                }
                Some(_) => continue,
                None => {}
            }
            if std::mem::replace(&mut self.need_key[k], false) {
                batch.push((cf.key.encoded(enc), enc));
                keys += 1;
            } else if let (true, Some(d)) = (due, &cf.delta) {
                batch.push((d.encoded(enc), enc));
            }
        }
        self.owed = self.need_key.iter().any(|&k| k);
        keys
    }
}

pub(crate) fn encode(msg: &ServerMsg, enc: Encoding) -> Bytes {
    let r = match enc {
        Encoding::Binary => proto::encode_binary(msg).map(Bytes::from),
        Encoding::Json => proto::encode_json(msg).map(Bytes::from),
    };
    r.unwrap_or_default()
}

/// A connection's outgoing bytes per second (`ConnHandle::bytes_per_sec`), over windows of about
/// a second, fed by everyone who writes to it: its send task and the world's fan-out.
pub(crate) struct ByteRate {
    window: std::sync::Mutex<(Instant, u64)>,
    per_sec: Arc<std::sync::atomic::AtomicU64>,
}

impl ByteRate {
    pub(crate) fn new(per_sec: Arc<std::sync::atomic::AtomicU64>) -> Self {
        ByteRate { window: std::sync::Mutex::new((Instant::now(), 0)), per_sec }
    }

    /// Counts `bytes` written at `now`.
    pub(crate) fn add(&self, bytes: u64, now: Instant) {
        let Ok(mut w) = self.window.lock() else { return };
        w.1 += bytes;
        let elapsed = now.saturating_duration_since(w.0);
        if elapsed >= Duration::from_secs(1) {
            self.per_sec.store((w.1 as f64 / elapsed.as_secs_f64()) as u64, std::sync::atomic::Ordering::Relaxed);
            *w = (now, 0);
        }
    }
}
