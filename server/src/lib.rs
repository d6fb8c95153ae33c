//! steerd: an authoritative, networked 2-D steering-simulation server.
//!
//! * [`sim`]: the pure simulation core (no I/O).
//! * [`scenario`]: JSON scenarios and their conversion into a [`sim::World`].
//! * [`simulate`]: the headless `steerd simulate` runner and its report.

// Tests may unwrap: a panic there is a failed test, not a crash reachable by a peer.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod agones;
pub mod auth;
pub mod config;
pub mod convert;
pub mod http;
pub mod metrics;
pub mod runtime;
pub mod scenario;
pub mod sim;
pub mod simulate;
pub mod store;

#[cfg(test)]
mod scenario_tests;
