//! Per-tick frames shared by every subscriber of a world.
//!
//! The world thread builds one [`TickFrame`] per tick: for every AOI cell an optional delta (only
//! when the cell changed) and the cell's current keyframe. Each is encoded at most once per
//! encoding, lazily, by whichever connection needs it first ([`OnceLock`]), and then shared as
//! [`Bytes`]. A tick therefore costs O(agents) to encode however many clients watch.
//!
//! Binary connections (protocol 4 on) receive a tick as one `cells` message built from per-cell
//! entry bodies ([`Shared::body`]), also made once per cell and tick (a message re-codes only the
//! first position of each, which chains on the message's previous record). Subscriptions that cover
//! the same cells at the same rate, that need no keyframe and that see everything get the very
//! same message: the first send task that needs it builds it, the others clone its `Bytes`
//! ([`TickFrame::shared_message`]).
//!
//! **Invariant:** a cell that did not change reuses the previous tick's `Arc<Shared<_>>` key, so
//! the encodings of an idle cell are made once in all.
//!
//! **Invariant:** a shared message depends only on the frame, the span and the cell rectangle
//! (its key); anything per connection (keyframes owed, vision) makes the message private.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use steer_proto as proto;

/// A message encoded once per encoding on demand.
#[derive(Debug)]
pub struct Shared<T> {
    /// The message.
    pub msg: T,
    bin: OnceLock<Bytes>,
    json: OnceLock<Bytes>,
    /// A keyframe's or delta's body as an entry of a `cells` message.
    body: OnceLock<proto::EntryBody>,
    /// A keyframe's cell checksum.
    sum: OnceLock<u64>,
}

impl<T: serde::Serialize> Shared<T> {
    /// Wraps a message.
    pub fn new(msg: T) -> Self {
        Shared { msg, bin: OnceLock::new(), json: OnceLock::new(), body: OnceLock::new(), sum: OnceLock::new() }
    }
}

impl Shared<proto::ServerMsg> {
    /// The binary (bincode) encoding, made once.
    pub fn binary(&self) -> Bytes {
        self.bin
            .get_or_init(|| proto::encode_binary(&self.msg).map(Bytes::from).unwrap_or_default())
            .clone()
    }

    /// The JSON encoding, made once.
    pub fn json(&self) -> Bytes {
        self.json
            .get_or_init(|| proto::encode_json(&self.msg).map(Bytes::from).unwrap_or_default())
            .clone()
    }

    /// The entry body of a keyframe or delta in a `cells` message (PROTOCOL.md §6.8), made once;
    /// empty for other messages.
    pub fn body(&self) -> &proto::EntryBody {
        self.body.get_or_init(|| {
            let r = match &self.msg {
                proto::ServerMsg::Keyframe(k) => proto::keyframe_body(&k.agents),
                proto::ServerMsg::Delta(d) => proto::delta_body(&d.left, &d.changed, &d.entered),
                _ => Ok(proto::EntryBody::default()),
            };
            r.unwrap_or_else(|e| {
                tracing::error!("cannot encode a cell entry: {e}");
                proto::EntryBody::default()
            })
        })
    }

    /// The checksum of a keyframe's cell state, made once (the frame's own when it has one).
    pub fn sum(&self) -> u64 {
        *self.sum.get_or_init(|| match &self.msg {
            proto::ServerMsg::Keyframe(k) => k.checksum.map_or_else(|| proto::checksum(&k.agents), |c| c.0),
            _ => proto::FNV_OFFSET,
        })
    }

    /// The encoding for `enc`.
    pub fn encoded(&self, enc: proto::Encoding) -> Bytes {
        match enc {
            proto::Encoding::Binary => self.binary(),
            proto::Encoding::Json => self.json(),
        }
    }
}

/// One cell in one tick.
#[derive(Debug, Clone)]
pub struct CellFrame {
    /// The delta of this tick, if the cell changed.
    pub delta: Option<Arc<Shared<proto::ServerMsg>>>,
    /// The keyframe of the cell's current state.
    pub key: Arc<Shared<proto::ServerMsg>>,
}

/// The cells of one send rate (`every_n_ticks` > 1): diffed every `span` ticks against the state
/// sent `span` ticks before, shared by every subscriber of that rate.
#[derive(Debug)]
pub struct RateCells {
    /// The rate.
    pub span: u32,
    /// This tick is a multiple of `span`: its deltas are this tick's (otherwise none).
    pub due: bool,
    /// Per AOI cell; keys are the state at the rate's last diff.
    pub cells: Vec<CellFrame>,
}

/// Identifies a shared message: the span and the subscription's cell rectangle (first and last
/// cell and the number of cells; a subscription is always a rectangle of the grid, so these
/// determine its cells).
pub type SetKey = (u32, u32, u32, usize);

/// Everything a subscriber needs for one tick.
#[derive(Debug)]
pub struct TickFrame {
    /// World id.
    pub world: u32,
    /// Tick number.
    pub tick: u64,
    /// This world's frames published before it, plus one: consecutive frames (a frame may
    /// cover several ticks when the world catches up) have consecutive numbers, so a receiver
    /// tells a frame it missed from a tick the world ran without publishing.
    pub seq: u64,
    /// Per AOI cell (every tick: span 1).
    pub cells: Vec<CellFrame>,
    /// Cells of the other send rates in use.
    pub rates: Vec<RateCells>,
    /// The world's `checksum_every_ticks`.
    pub checksum_every: u64,
    /// `cells` messages made for more than one subscriber, by [`SetKey`] (bounded by
    /// `max_shared`; beyond it every subscriber builds its own).
    pub shared: std::sync::Mutex<std::collections::HashMap<SetKey, Arc<OnceLock<Bytes>>>>,
    /// Bound of `shared`.
    pub max_shared: usize,
    /// Events of this tick (already wire messages).
    pub events: Vec<FrameEvent>,
    /// The world was replaced (load/reset): subscribers must resync every cell from the
    /// keyframes of this frame; its deltas do not chain on anything a client holds.
    pub reset: bool,
    /// Under `owned` visibility: per vision key (`t:TEAM` or `p:PLAYER`), which AOI cells it
    /// may see this tick; `None` when the world's visibility is not `owned`.
    pub vision: Option<Arc<std::collections::HashMap<String, Vec<bool>>>>,
}

/// A world's newest frames, at most `cap` of them, oldest first: a new subscriber starts from
/// the newest, and a subscription that changes hands (a Subscribe that replaces it, a fan-out
/// handback) sends from them the frames it has not sent yet.
#[derive(Debug)]
pub struct Recent {
    frames: std::collections::VecDeque<Arc<TickFrame>>,
    cap: usize,
}

impl Recent {
    /// Keeps up to `cap` frames (at least one).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Recent { frames: std::collections::VecDeque::with_capacity(cap), cap }
    }

    /// Adds the newest frame, dropping the oldest past the bound.
    pub fn push(&mut self, frame: Arc<TickFrame>) {
        if self.frames.len() >= self.cap {
            self.frames.pop_front();
        }
        self.frames.push_back(frame);
    }

    /// The newest frame.
    pub fn newest(&self) -> Option<Arc<TickFrame>> {
        self.frames.back().cloned()
    }

    /// The frames after sequence number `seq`, oldest first (those still kept).
    pub fn after(&self, seq: u64) -> Vec<Arc<TickFrame>> {
        self.frames.iter().filter(|f| f.seq > seq).cloned().collect()
    }
}

impl TickFrame {
    /// The cells of send rate `span` and whether this tick is one of its ticks (`None`: the rate
    /// is not kept yet; its cells appear from the next tick).
    pub fn cells_at(&self, span: u32) -> Option<(&[CellFrame], bool)> {
        if span <= 1 {
            return Some((&self.cells, true));
        }
        self.rates.iter().find(|r| r.span == span).map(|r| (r.cells.as_slice(), r.due))
    }

    /// Whether a `cells` message of `span` at this tick carries the message checksum without
    /// keyframe entries (PROTOCOL.md §6.8).
    pub fn checksum_due(&self, span: u32) -> bool {
        let span = u64::from(span.max(1));
        let every = span * (self.checksum_every / span).max(1);
        self.tick % every == 0
    }

    /// The shared `cells` message of `key`, built by `build` once; `None` (build your own)
    /// when the table is full. Returns whether this call built it.
    pub fn shared_message(&self, key: SetKey, build: impl FnOnce() -> Bytes) -> Option<(Bytes, bool)> {
        let slot = {
            let mut t = self.shared.lock().ok()?;
            let n = t.len();
            match t.get(&key) {
                Some(s) => s.clone(),
                None if n >= self.max_shared => return None,
                None => t.entry(key).or_default().clone(),
            }
        };
        let mut built = false;
        let b = slot
            .get_or_init(|| {
                built = true;
                build()
            })
            .clone();
        Some((b, built))
    }
}

/// An event of a tick, with the player whose agents it is about.
#[derive(Debug)]
pub struct FrameEvent {
    /// The owner of its agents (`None`: agents of nobody).
    pub owner: Option<Arc<str>>,
    /// The owner's vision key.
    pub vision: Option<String>,
    /// About the world itself, not agents (a tick-rate change): every subscriber gets it,
    /// whatever the world's visibility.
    pub public: bool,
    /// The wire message.
    pub msg: Arc<Shared<proto::ServerMsg>>,
}
