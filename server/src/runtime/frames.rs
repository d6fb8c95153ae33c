//! Per-tick frames shared by every subscriber of a world.
//!
//! The world thread builds one [`TickFrame`] per tick: for every AOI cell an optional delta (only
//! when the cell changed) and the cell's current keyframe. Each is encoded at most once per
//! encoding, lazily, by whichever connection needs it first ([`OnceLock`]), and then shared as
//! [`Bytes`]. A tick therefore costs O(agents) to encode however many clients watch.
//!
//! **Invariant:** a cell that did not change reuses the previous tick's `Arc<KeyCell>`, so the
//! encodings of an idle cell are made once in all.

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
}

impl<T: serde::Serialize> Shared<T> {
    /// Wraps a message.
    pub fn new(msg: T) -> Self {
        Shared { msg, bin: OnceLock::new(), json: OnceLock::new() }
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

/// Everything a subscriber needs for one tick.
#[derive(Debug)]
pub struct TickFrame {
    /// World id.
    pub world: u32,
    /// Tick number.
    pub tick: u64,
    /// Per AOI cell.
    pub cells: Vec<CellFrame>,
    /// Events of this tick (already wire messages).
    pub events: Vec<FrameEvent>,
    /// The world was replaced (load/reset): subscribers must resync every cell from the
    /// keyframes of this frame; its deltas do not chain on anything a client holds.
    pub reset: bool,
    /// Under `owned` visibility: per vision key (`t:TEAM` or `p:PLAYER`), which AOI cells it
    /// may see this tick; `None` when the world's visibility is not `owned`.
    pub vision: Option<Arc<std::collections::HashMap<String, Vec<bool>>>>,
}

/// An event of a tick, with the player whose agents it is about.
#[derive(Debug)]
pub struct FrameEvent {
    /// The owner of its agents (`None`: agents of nobody).
    pub owner: Option<Arc<str>>,
    /// The owner's vision key.
    pub vision: Option<String>,
    /// The wire message.
    pub msg: Arc<Shared<proto::ServerMsg>>,
}
