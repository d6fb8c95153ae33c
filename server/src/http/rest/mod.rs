//! REST handlers (JSON). Mutating calls need the admin token when one is set; the agent calls
//! (spawn, despawn, behaviours, move-to) also take a player token, for that player's agents.
//!
//! One file per resource; `common.rs` holds what they share.

mod common;

pub mod agents;
pub mod obstacles;
pub mod ops;
pub mod players;
pub mod replay;
pub mod scenarios;
pub mod worlds;

pub use agents::*;
pub use obstacles::*;
pub use ops::*;
pub use players::*;
pub use replay::*;
pub use scenarios::*;
pub use worlds::*;
