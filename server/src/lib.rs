//! steerd: an authoritative, networked 2-D steering-simulation server.
//!
//! * [`sim`]: the pure simulation core (no I/O).
//! * [`scenario`]: JSON scenarios and their conversion into a [`sim::World`].
//! * [`simulate`]: the headless `steerd simulate` runner and its report.

pub mod scenario;
pub mod sim;
pub mod simulate;

#[cfg(test)]
mod scenario_tests;
