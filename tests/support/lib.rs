//! Support library of the end-to-end tests (`server/tests/it/`) and the reliability suite
//! (`tests/reliability/`): start the real `steerd` binary on `127.0.0.1:0` with its own data
//! dir, talk to it over real sockets, and stop or kill it.
//!
//! * [`server`](Server) — finding the binary, [`Server`] processes and their [`Opts`], [`TempDir`].
//! * `http` — [`Http`]: a raw HTTP/1.1 client (the tests need to send what no well-behaved
//!   client would: held bodies, bad lengths, odd headers).
//! * `ws` — [`Ws`]: a tokio-tungstenite client that keeps a [`steer_proto::ClientState`] and
//!   checks every frame chain it sees; message builders ([`spawn_msg`], [`move_to_msg`], …).
//! * `fixtures` — scenarios, worlds and `/metrics` reading shared by several tests.
//! * `figures` — throughput and kill-while-saving measurements, frame inspection helpers.
//!
//! **Finding the binary.** No nested `cargo build`: [`steerd_bin`] runs the binary Cargo
//! already built — `STEERD_BIN` when set (the reliability suite), otherwise `steerd` in the
//! profile directory of the running test binary (`<target>/<profile>/deps/it-<hash>` →
//! `<target>/<profile>/steerd`), which Cargo builds before it runs the `steerd` package's
//! integration tests (the `it` suite checks that this is `CARGO_BIN_EXE_steerd`). The one
//! exception is [`steer_swarm_bin`]: `steer-swarm` is another package, which Cargo builds for
//! `steerd`'s tests only in a workspace run, so it is built (a no-op when up to date) with the
//! `cargo` that runs the tests.
//!
//! Every wait is bounded; every server is killed when its [`Server`] drops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server;
pub use server::*;
mod http;
pub use http::*;
mod ws;
pub use ws::*;
mod fixtures;
pub use fixtures::*;
mod figures;
pub use figures::*;

pub use serde_json::json;
