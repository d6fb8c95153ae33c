//! Live handoff over HTTP (`docs/handoff.md`; the package and its import are `crate::handoff`):
//!
//! * `POST /worlds/{world}/handoff {"to": URL}` (admin): freezes the world, waits for its log to
//!   be on disk, packs its stored state with the sessions that use it, and sends the package to
//!   `to`'s `POST /cluster/worlds/{world}` with the cluster secret. When the target has the
//!   world running, the world is stopped here (its stored state deleted), every connection
//!   using it gets `moved`, and its name answers where it went. When the target refuses or
//!   does not answer in `cluster.transfer_timeout_ms`, the world thaws and runs on here.
//! * `POST /cluster/worlds/{world}` (server to server; `guard.rs` checks the cluster secret):
//!   imports the package through the recovery path, takes over the sessions, and starts the
//!   world, which ticks once the sessions connected to it on the old server have resumed (or
//!   `cluster.resume_wait_ms` passed).
//! * [`drain`]: at SIGTERM with `drain.handoff_to` set, every durable world is handed off there
//!   before the connections close.
//!
//! **Invariant:** a world runs on exactly one server at a time: the source stops it only after
//! the target answered that it runs there, and the target refuses a name it has (running or
//! stored).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use steer_proto as proto;
use utoipa::ToSchema;

use super::error::ApiError;
use super::state::AppState;
use crate::handoff::{HandoffError, Package, PackageMeta, SECRET_HEADER};
use crate::runtime::frames::Shared;
use crate::runtime::world::{Arrival, Request};

/// Body of `POST /worlds/{world}/handoff`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffBody {
    /// The steerd to move the world to: `http://host:port` (as this server reaches it).
    pub to: String,
    /// Where the world's clients reach that server (`ws://…/ws`); default: `to` with `ws` for
    /// `http` and `/ws` appended.
    pub client_url: Option<String>,
}

/// What a handoff did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HandoffReport {
    /// The world.
    pub world: String,
    /// The server it runs on now, and where its clients were sent.
    pub to: String,
    pub client_url: String,
    /// The sim tick it was frozen at here; the target goes on from the next one.
    pub tick: u64,
    /// `state_hash` at that tick (hex), equal on both servers.
    pub state_hash: String,
    /// Sessions handed over, and the connections told `moved`.
    pub sessions: usize,
    pub connections_told: usize,
    /// Bytes of the package sent.
    pub bytes: u64,
    /// Milliseconds from the freeze to the target's answer (the world ticked nowhere meanwhile).
    pub frozen_ms: f64,
}

/// What the target answers a transfer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ImportReport {
    /// The world, running here now.
    pub world: String,
    /// The sim tick it resumed at, and its `state_hash` there (hex).
    pub tick: u64,
    pub state_hash: String,
    /// Sessions taken over, and how many of them the world waits for before its first tick.
    pub sessions: usize,
    pub awaited: usize,
}

/// Longest wait, before `moved` goes out, for the fan-out to write the world's last frame.
const FANOUT_WAIT: Duration = Duration::from_millis(500);

fn conflict(m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, proto::ErrorCode::BadRequest, m)
}

/// `POST /worlds/{world}/handoff`: moves the running world to another steerd.
#[utoipa::path(post, path = "/worlds/{world}/handoff", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = HandoffBody,
    responses(
        (status = 200, description = "The world runs on the target now; its clients were told where", body = HandoffReport),
        (status = 409, description = "Handoff disabled (no `cluster.secret`), the world is not durable, a replay, or stepping (`bad_request`)", body = super::schema::ErrorBody),
        (status = 502, description = "The target refused the world or did not answer in time; the world runs on here (`internal`)", body = super::schema::ErrorBody),
        super::schema::WorldErrors, super::schema::AdminErrors, super::schema::BodyErrors))]
pub async fn handoff_world(State(state): State<AppState>, Path(name): Path<String>, body: Result<Json<HandoffBody>, axum::extract::rejection::JsonRejection>) -> Result<Response, ApiError> {
    let Json(b) = body?;
    let r = handoff(&state, &name, &b.to, b.client_url.as_deref()).await?;
    Ok(Json(r).into_response())
}

/// Hands world `name` off to the steerd at `to` (see the module doc).
pub async fn handoff(state: &AppState, name: &str, to: &str, client_url: Option<&str>) -> Result<HandoffReport, ApiError> {
    let Some(secret) = state.settings.cluster.secret.clone() else {
        return Err(conflict("handoff is disabled on this server: it has no cluster secret (`cluster.secret`, `--cluster-secret`)"));
    };
    let client_url = client_url_of(to, client_url)?;
    let w = state.registry.get(name)?;
    let Some(writer) = state.registry.persistence().cloned().filter(|_| w.durable.is_some()) else {
        return Err(conflict(format!(
            "world `{name}` is not durable: a handoff moves its stored log and snapshot (create it with `\"durable\": true`, or turn `persistence.enabled` on)"
        )));
    };
    let frozen_at = Instant::now();
    let frozen = w.ask(|reply| Request::Freeze { reply }).await?;
    let thaw = |why: String| {
        let w = w.clone();
        async move {
            if let Err(e) = w.ask(|reply| Request::Thaw { reply }).await {
                tracing::error!(world = %w.name, "handoff: cannot thaw: {e}");
            }
            why
        }
    };
    let files = match stored_state(writer, name).await {
        Ok(f) => f,
        Err(e) => return Err(conflict(thaw(format!("world `{name}` cannot be handed off: {e}")).await)),
    };
    let (sessions, conns) = state.registry.players.sessions_of_world(name, &frozen.owners);
    let meta = PackageMeta {
        world: name.to_string(),
        tick: frozen.tick,
        tick_offset: frozen.tick_offset,
        state_hash: format!("{:016x}", frozen.state_hash),
        sessions: sessions.clone(),
    };
    let bytes = Package { meta, state: files }.encode();
    let len = bytes.len() as u64;
    let c = &state.settings.cluster;
    if len > c.max_transfer_bytes {
        return Err(conflict(thaw(format!("world `{name}`: the transfer is {len} bytes, over `cluster.max_transfer_bytes` ({})", c.max_transfer_bytes)).await));
    }
    let url = format!("{}/cluster/worlds/{name}", to.trim_end_matches('/'));
    let sent = send(&url, &secret, bytes, Duration::from_millis(c.transfer_timeout_ms)).await;
    let answer = match sent {
        Ok(a) => a,
        Err(why) => {
            let msg = thaw(format!("handoff of world `{name}` to {to} failed, the world runs on here: {why}")).await;
            tracing::warn!("{msg}");
            return Err(ApiError::new(StatusCode::BAD_GATEWAY, proto::ErrorCode::Internal, msg));
        }
    };
    let frozen_ms = frozen_at.elapsed().as_secs_f64() * 1000.0;
    let want = format!("{:016x}", frozen.state_hash);
    if answer.state_hash != want || answer.tick != frozen.tick {
        // The target runs the world now either way; say loudly that it differs.
        tracing::error!(world = name, tick = frozen.tick, here = %want, there = %answer.state_hash, "handoff: the target's recovered world differs from the one handed off");
    }
    last_frame_written(state, &w).await;
    // Stopped here (its stored state deleted with it); its name says where it went.
    state.registry.handed_off(name, &client_url)?;
    let moved = Arc::new(Shared::new(proto::ServerMsg::Moved(proto::Moved { world: w.id, name: name.to_string(), to: client_url.clone() })));
    let told = conns.iter().filter(|c| c.events.try_send(moved.clone()).is_ok()).count();
    state.registry.players.forget_sessions(&sessions.iter().map(|s| s.token.clone()).collect::<Vec<_>>());
    state.metrics.handoffs.inc();
    tracing::info!(world = name, to, tick = frozen.tick, sessions = sessions.len(), told, bytes = len, frozen_ms, "handoff: the world runs on the target now");
    Ok(HandoffReport {
        world: name.to_string(),
        to: to.to_string(),
        client_url,
        tick: frozen.tick,
        state_hash: want,
        sessions: sessions.len(),
        connections_told: told,
        bytes: len,
        frozen_ms,
    })
}

/// The URL clients are told to follow to: `client_url` if given (ws:// or wss://), else the
/// WebSocket URL of `to` (which must be http:// or https://).
fn client_url_of(to: &str, client_url: Option<&str>) -> Result<String, ApiError> {
    if !(to.starts_with("http://") || to.starts_with("https://")) {
        return Err(ApiError::invalid(format!("field `to`: expected the target's http:// or https:// URL, got `{to}`")));
    }
    match client_url {
        Some(u) if u.starts_with("ws://") || u.starts_with("wss://") => Ok(u.to_string()),
        Some(u) => Err(ApiError::invalid(format!("field `client_url`: expected a ws:// or wss:// URL, got `{u}`"))),
        None => crate::handoff::client_url(to).map_err(|e| ApiError::invalid(format!("field `to`: {e}"))),
    }
}

/// The world's snapshot and log up to the freeze, once the writer has them on disk.
async fn stored_state(writer: Arc<crate::persist::Writer>, name: &str) -> Result<Vec<u8>, HandoffError> {
    let store = writer.store().clone();
    let n = name.to_string();
    tokio::task::spawn_blocking(move || {
        if !writer.drain(Duration::from_secs(10)) {
            return Err(HandoffError::Refused("the persistence writer did not catch up within 10 s".into()));
        }
        crate::handoff::export_state(&*store, &n)
    })
    .await
    .map_err(|e| HandoffError::Refused(e.to_string()))
    .and_then(|r| r)
}

/// Waits (at most [`FANOUT_WAIT`]) until the fan-out's writers wrote the world's last frame:
/// `moved` must come after the last frame the world published here (a subscriber that follows
/// at once misses no tick's state). Frames a connection reads itself go before it anyway (its
/// send task takes frames before direct messages); the fan-out writes the frames of steady
/// subscribers on its own.
async fn last_frame_written(state: &AppState, w: &crate::runtime::world::WorldHandle) {
    if let Some(seq) = w.latest().map(|f| f.seq) {
        let until = Instant::now() + FANOUT_WAIT;
        while !state.fanout_passed(w.id, seq) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Sends a package to the target; its answer, or why not.
async fn send(url: &str, secret: &str, bytes: Vec<u8>, timeout: Duration) -> Result<ImportReport, String> {
    let client = reqwest::Client::builder().timeout(timeout).build().map_err(|e| e.to_string())?;
    let resp = client
        .post(url)
        .header(SECRET_HEADER, secret)
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .body(bytes)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("{url}: reading the answer: {e}"))?;
    if !status.is_success() {
        let short: String = text.chars().take(500).collect();
        return Err(format!("{url} answered {status}: {short}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("{url}: unexpected answer ({e})"))
}

/// `POST /cluster/worlds/{world}`: takes a world handed off by another server.
#[utoipa::path(post, path = "/cluster/worlds/{world}", tag = "worlds", security(("cluster" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "A handoff package (docs/handoff.md)"),
    responses(
        (status = 200, description = "The world runs here now", body = ImportReport),
        (status = 400, description = "A malformed package, or one for another world (`bad_request`)", body = super::schema::ErrorBody),
        (status = 401, description = "No cluster secret sent (`unauthorized`)", body = super::schema::ErrorBody),
        (status = 403, description = "Wrong cluster secret, or this server has none (`forbidden`)", body = super::schema::ErrorBody),
        (status = 409, description = "A world of that name runs or is stored here (`bad_request`)", body = super::schema::ErrorBody),
        (status = 413, description = "Over `cluster.max_transfer_bytes` (`too_large`)", body = super::schema::ErrorBody),
        (status = 422, description = "The world does not recover from the package (`invalid_field`)", body = super::schema::ErrorBody)))]
pub async fn import_world(State(state): State<AppState>, Path(name): Path<String>, body: Bytes) -> Result<Response, ApiError> {
    let pkg = Package::decode(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if pkg.meta.world != name {
        return Err(ApiError::bad_request(format!("the package is world `{}`, the path names `{name}`", pkg.meta.world)));
    }
    if !crate::scenario::valid_name(&name) {
        return Err(ApiError::bad_request(format!("invalid world name `{name}`")));
    }
    if state.registry.get(&name).is_ok() {
        return Err(conflict(format!("world `{name}` runs here already")));
    }
    let Some(writer) = state.registry.persistence().cloned() else {
        return Err(conflict("this server has no store to take a world into"));
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (n, world_state) = (name.clone(), pkg.state);
    let rec = tokio::task::spawn_blocking(move || crate::handoff::import_state(&**writer.store(), &n, &world_state, threads))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, proto::ErrorCode::Internal, e.to_string()))?;
    let rec = match rec {
        Ok(r) => r,
        Err(e @ HandoffError::Refused(_)) => return Err(conflict(e.to_string())),
        Err(e @ HandoffError::Recover(_)) => return Err(ApiError::invalid(e.to_string())),
        Err(e) => return Err(ApiError::bad_request(e.to_string())),
    };
    let tick = rec.world.tick();
    let state_hash = format!("{:016x}", crate::sim::hash::state_hash(&rec.world));
    if tick != pkg.meta.tick || state_hash != pkg.meta.state_hash {
        // Not this world's state at the freeze: it must not run anywhere as if it were.
        if let Some(w) = state.registry.persistence() {
            w.remove(&name);
        }
        return Err(ApiError::invalid(format!(
            "the recovered world is at tick {tick} with state_hash {state_hash}; the package says tick {} with {}",
            pkg.meta.tick, pkg.meta.state_hash
        )));
    }
    let awaited = Arc::new(AtomicUsize::new(0));
    let sessions = state.registry.players.adopt(pkg.meta.sessions, &awaited);
    let waiting = awaited.load(std::sync::atomic::Ordering::SeqCst);
    let arrival = Arrival { tick_offset: pkg.meta.tick_offset, awaited, until: Instant::now() + Duration::from_millis(state.settings.cluster.resume_wait_ms) };
    let reg = state.registry.clone();
    let n = name.clone();
    tokio::task::spawn_blocking(move || reg.create_arrived(&n, rec, arrival))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, proto::ErrorCode::Internal, e.to_string()))??;
    tracing::info!(world = %name, tick, state_hash = %state_hash, sessions, awaited = waiting, "handoff: took the world over");
    Ok(Json(ImportReport { world: name, tick, state_hash, sessions, awaited: waiting }).into_response())
}

/// At SIGTERM with `drain.handoff_to` set: hands every durable world off there, one after the
/// other, before `deadline`. A world whose handoff fails stays (and stops with the server as
/// usual: autosave, stored state kept).
pub async fn drain(state: &AppState, deadline: tokio::time::Instant) {
    let Some(to) = state.settings.drain.handoff_to.clone() else { return };
    for w in state.registry.list() {
        if w.durable.is_none() || !w.alive() {
            continue;
        }
        // Each handoff is bounded by `cluster.transfer_timeout_ms`, and never cut in the middle
        // (a world cut between the target's answer and its stop here would run twice).
        if tokio::time::Instant::now() >= deadline {
            tracing::error!(world = %w.name, to = %to, "drain: no time left before the shutdown deadline; the world stops here");
            continue;
        }
        match handoff(state, &w.name, &to, None).await {
            Ok(r) => tracing::info!(world = %w.name, to = %to, tick = r.tick, sessions = r.sessions, "drain: handed off"),
            Err(e) => tracing::error!(world = %w.name, to = %to, "drain: handoff failed, the world stops here: {}", e.message),
        }
    }
}
