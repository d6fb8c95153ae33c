//! steer-proto: the steerd wire protocol. See `PROTOCOL.md` for the normative
//! description; this crate is the reference implementation.
//!
//! * Messages: [`ClientMsg`], [`ServerMsg`] and their payload structs.
//! * Codecs: [`encode_binary`] / [`decode_binary`] (bincode 2, one message per
//!   binary frame) and [`encode_json`] / [`decode_json`] (text frames).
//! * Agent state: [`Quantization`], [`QAgent`], [`encode_keyframe`],
//!   [`encode_delta`], [`CellEncoder`] (server) and [`ClientState`] /
//!   [`CellState`] (client), [`checksum`].
//! * [`Cells`]: one tick's entries for many cells (version 4's fan-out message).
//! * [`Validate`]: finite-number checks that name the offending field.

#[macro_use]
mod macros;

pub mod behavior;
pub mod cells;
pub mod close;
pub mod codec;
pub mod common;
pub mod frames;
pub mod messages;
pub mod pack;
pub mod quant;
pub mod schema;
pub mod state;
pub mod validate;

pub use behavior::*;
pub use cells::{CellEntry, Cells, CellsHead, EntriesWriter, EntryBody, EntryError, delta_body, encode_cells_binary, fold_checksums, keyframe_body, skim_cells_binary};
pub use codec::{
    DEFAULT_CLIENT_LIMIT, DEFAULT_SERVER_LIMIT, DecodeError, HARD_LIMIT, bincode_config, decode_binary, decode_binary_batch, decode_binary_first, peek_hello_version,
    decode_json, encode_binary, encode_json,
};
pub use common::*;
pub use frames::{
    AgentChange, CellEncoder, Checksum, Delta, EncodeError, FrameScope, Keyframe, Motion, OrientChange,
    diff_agent, encode_delta, encode_keyframe,
};
pub use messages::*;
pub use pack::PackError;
pub use quant::{
    AgentSample, FNV_OFFSET, PREDICT_SHIFT, QAgent, Quantization, checksum, heading, orient_from_radians, quantize,
    robust_heading,
};
pub use state::{AppliedEntry, ApplyError, CellState, CellsError, ClientState, apply_change};
pub use validate::{FieldError, FieldPath, Validate};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 11;
