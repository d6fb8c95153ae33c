//! The simulation core: a pure, deterministic 2-D steering world.
//!
//! No tokio, no sockets, no clocks, no serde, no global RNG: `dt` comes from the world's tick
//! rate, and randomness from the world's seed. The server, the tests, the benchmarks and
//! `steerd simulate` all drive the same [`World::step`].

pub mod agent;
pub mod behaviors;
pub mod bytes;
pub mod codec;
pub mod error;
pub mod geometry;
pub mod hash;
pub mod math;
pub mod nav;
pub mod orca;
pub mod rng;
pub mod roster;
pub mod spatial;
pub mod steering;
pub mod view;
pub mod world;

pub use agent::{Agent, AgentId, GroupId, Limits, MoveOrder, PathMode};
pub use behaviors::{Behavior, BehaviorEntry, BehaviorSet, Target};
pub use error::SimError;
pub use steering::Steering;
pub use geometry::{Bounds, Obstacle, Wall};
pub use view::WorldView;
pub use world::{Audit, Command, EdgeRule, Event, Outcome, SpawnArea, SpawnSpec, StepStats, TargetBinding, World, WorldConfig};
