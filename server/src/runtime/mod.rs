//! The server's runtime: one thread per world, a registry of worlds, and the frames they share
//! with subscribers.

pub mod admission;
pub mod fields;
pub mod frames;
pub mod players;
pub mod registry;
pub mod world;

pub use frames::{CellFrame, FrameEvent, Recent, SetKey, TickFrame};
pub use players::Players;
pub use registry::{Registry, RegistryError};
pub use world::{Actor, CmdError, RateGuard, SessionId, WorldHandle, WorldSpawn};
