//! End-to-end tests: each test starts the real `steerd` binary that Cargo built for this suite
//! (`CARGO_BIN_EXE_steerd`) on `127.0.0.1:0` with its own data dir and drives it over real
//! sockets, with the support library in `tests/support/` (crate `steerd-tests`).
//!
//! * `ws` — MoveTo over WebSocket, keyframe/delta chain vs snapshot, graceful shutdown.
//! * `fanout` — one shared `cells` message per tick, `every_n_ticks`, nothing for a world at rest.
//! * `rest` — `/health`, `/metrics`, `/openapi.json`.
//! * `bad_input` — every kind of malformed or out-of-range input.
//! * `avoidance` — the `reciprocal_avoidance` behaviour over REST and WebSocket, and
//!   `GET /worlds/{w}/agents/{id}/avoidance`.
//! * `auth` — admin token, agent ownership, Origin check.
//! * `authz` — the one authorization gate: every documented route × caller × world × mode and
//!   every WebSocket message kind against the test's own table of rules; regressions (tokenless
//!   mutations without an admin token, foreign Host/Origin, form posts, refused batches, hidden
//!   agents as targets); fog of war on every REST read and WebSocket frame over 600 ticks.
//! * `players` — player tokens, dev mode, ownership by player, resume, orphan policy, quotas,
//!   `owned` visibility (every frame decoded), the players REST calls.
//! * `sessions` — a resume takes only a dropped session, never past its token's expiry, and a
//!   failed one leaves the victim's session; per-player and per-address session caps.
//! * `http_guard` — auth before the body, body timeout, socket cap, JSON error bodies.
//! * `persist` — save/load across a restart, kill -9 while saving.
//! * `handoff` — a live world, its players and their agents move between two servers; the
//!   cluster secret gates the transfer.
//! * `limits` — 100 subscribers with 20 that never read.
//! * `record` — recording over REST and `--record`, download, list, delete, `steerd replay --verify`.
//! * `record_replay` — a shipped recording as a read-only replay world: WebSocket frames,
//!   play, pause, bounded seeks checked against `steerd replay --until`, refused commands.
//! * `overload` — a world whose tick overruns its period keeps answering; DELETE ends its thread.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth;
mod authz;
mod avoidance;
mod bad_input;
mod fanout;
mod handoff;
mod http_guard;
mod limits;
mod overload;
mod persist;
mod players;
mod record;
mod record_replay;
mod rest;
mod sessions;
mod ws;

/// The support library runs the binary Cargo built for this suite, not a stale or foreign one.
#[test]
fn runs_the_binary_cargo_built() {
    if std::env::var_os("STEERD_BIN").is_some() {
        return; // an explicit override (documented in tests/support/lib.rs)
    }
    let ours = std::fs::canonicalize(env!("CARGO_BIN_EXE_steerd")).unwrap();
    assert_eq!(std::fs::canonicalize(steerd_tests::steerd_bin()).unwrap(), ours);
}
