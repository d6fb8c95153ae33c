//! steerd: an authoritative, networked 2-D steering-simulation server.
//!
//! * [`sim`]: the pure simulation core (no I/O).
//! * [`scenario`]: JSON scenarios and their conversion into a [`sim::World`].
//! * [`simulate`]: the headless `steerd simulate` runner and its report.
//! * [`convert`]: the one place where sim types meet `steer-proto` wire types.
//! * [`runtime`]: the world threads, the registry of worlds, players, shared tick frames and
//!   the flow-field builder threads.
//! * [`http`]: the HTTP front end: REST, `/ws`, the viewer, `/openapi.json`, request guards.
//! * [`auth`]: admin token, player JWTs, dev-mode players.
//! * [`record`]: record and replay (`steerd replay`, replay worlds).
//! * [`store`]: scenario files, written atomically. [`config`]: every setting with its
//!   default; [`cli`]: the flags and environment variables that override them. [`metrics`]: Prometheus metrics. [`agones`]: the Agones SDK sidecar client.
//!
//! Without the default `server` feature the library is the pure core alone (`sim`,
//! `scenario`, `convert`, `simulate`), as the fuzz targets build it.
//!
//! See `ARCHITECTURE.md` for the code map and the invariants.

// Tests may unwrap: a panic there is a failed test, not a crash reachable by a peer.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

// The pure core: what the fuzz targets build (`default-features = false`).
pub mod convert;
pub mod scenario;
pub mod sim;
pub mod simulate;

// The server (feature `server`, on by default).
#[cfg(feature = "server")]
pub mod agones;
#[cfg(feature = "server")]
pub mod auth;
#[cfg(feature = "server")]
pub mod authz;
#[cfg(feature = "server")]
pub mod cli;
#[cfg(feature = "server")]
pub mod config;
#[cfg(feature = "server")]
pub mod handoff;
#[cfg(feature = "server")]
pub mod http;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub mod plot;
#[cfg(feature = "server")]
pub mod record;
#[cfg(feature = "server")]
pub mod persist;
#[cfg(feature = "server")]
pub mod runtime;
#[cfg(feature = "server")]
pub mod store;

#[cfg(test)]
mod scenario_tests;

// The generated reference blocks of the docs, checked against the code.
#[cfg(all(test, feature = "server"))]
mod reference_docs;
