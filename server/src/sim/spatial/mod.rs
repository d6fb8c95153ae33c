//! Uniform-grid spatial indexes. Agents are re-bucketed every tick with a counting sort
//! (O(agents + cells)); obstacles and walls are bucketed by bounding box and rebuilt only when
//! they change. Cost of a neighbour query depends on local density, not on the agent count, so a
//! tick costs O(agents).
//!
//! **Invariant:** every query visits candidates in an order fixed by the data alone (needed for
//! bit-identical results): agents in a cell are listed in ascending id order, whatever order
//! they are stored in; static items in ascending index order.
//!
//! [`GridShape`] (in `shape`) is the lattice both indexes share; the agent grid and its queries
//! are in `agents`, the obstacle and wall index in `statics`.

mod agents;
mod shape;
mod statics;

pub use shape::{GridShape, MAX_CELLS};
pub use agents::{AgentGrid, Crowd, Neighbor, Yielding, CELLS_PER_AGENT, MIN_CELLS};
pub use statics::{StaticIndex, STATIC_INDEX_CELLS};

/// The world the spatial tests build their grids over.
#[cfg(test)]
pub(super) fn test_bounds() -> super::geometry::Bounds {
    super::geometry::Bounds { min: glam::Vec2::ZERO, max: glam::Vec2::splat(100.0) }
}
