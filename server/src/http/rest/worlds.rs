//! Worlds: list, create (from a scenario, empty, or a recording to replay), read, patch, delete, step, reset, snapshot, load and save.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;
use steer_proto as proto;
use utoipa::ToSchema;

use super::common::*;
use crate::http::state::AppState;
use crate::http::error::ApiError;
use crate::http::schema as doc;
use crate::authz::{Grant, Sight};
use crate::runtime::world::{Request, Snapshot, WorldInfoView};
use crate::runtime::WorldHandle;
use crate::scenario::Scenario;

/// `GET /worlds`.
#[utoipa::path(get, path = "/worlds", tag = "worlds",
    responses((status = 200, description = "Every world (a dead one shows only `name`, `id` and `alive: false`)", body = [WorldInfoView])))]
pub async fn list_worlds(State(state): State<AppState>, Extension(grant): Extension<Grant>) -> ApiResult {
    let mut out = Vec::new();
    for w in state.registry.list() {
        // The worlds of the caller's token, each counted as far as the caller sees it.
        let sight = match &grant.identity {
            Some(id) if id.check_world(&w.name).is_err() => continue,
            Some(id) => crate::authz::sight_of(id, state.registry.policy(&w.name).visibility),
            None => Sight::All,
        };
        match w.ask(|reply| Request::Info { sight, reply }).await {
            Ok(i) => out.push(serde_json::to_value(i).unwrap_or_default()),
            Err(_) => out.push(json!({"name": w.name, "id": w.id, "alive": false})),
        }
    }
    ok(out)
}

/// Body of `POST /worlds`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorld {
    /// World name (1 to 64 of A-Z a-z 0-9 _ -).
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    /// Scenario to load (saved or shipped name); default: an empty 200×200 world.
    #[serde(default)]
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub scenario: Option<String>,
    /// Start paused.
    #[serde(default)]
    pub paused: bool,
    /// Play this recording (a name from `GET /recordings`, with or without `.rec`) as a
    /// read-only replay world instead of running a scenario (`server/RECORDING.md`). Opening
    /// runs the recording once to build its keyframes and check every recorded checkpoint.
    #[serde(default)]
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}(\.rec)?$")]
    pub replay: Option<String>,
    /// Durable: its command log and snapshots are written to the persistence directory and it
    /// is recovered on start (docs/persistence.md). Default: the server's `persistence.enabled`.
    #[serde(default)]
    pub durable: Option<bool>,
}

/// Opens a recording of the data dir as a replay world's player (on a blocking thread).
async fn open_replay(state: &AppState, name: &str) -> Result<crate::runtime::world::ReplaySpawn, ApiError> {
    let hub = state.registry.recorder().ok_or_else(|| ApiError::not_found("field `replay`: this server has no recordings directory"))?.clone();
    let rec = name.strip_suffix(".rec").unwrap_or(name).to_string();
    let path = hub.path_of(&rec).ok_or_else(|| ApiError::invalid(format!("field `replay`: `{name}` is not a recording name (1 to 64 of A-Z a-z 0-9 _ -)")))?;
    // A file a recorder wrote is at most recording_max_bytes plus its last chunk (≤ 4 MiB).
    let cap = state.settings.limits.recording_max_bytes.saturating_add(4 << 20).saturating_add(64);
    let meta = tokio::fs::metadata(&path).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ApiError::not_found(format!("field `replay`: no recording `{rec}`")),
        _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, proto::ErrorCode::Internal, format!("storage error: {e}")),
    })?;
    if meta.len() > cap {
        return Err(ApiError::invalid(format!("field `replay`: recording `{rec}` is {} bytes, more than a recording can be ({cap})", meta.len())));
    }
    let settings = state.registry.replay_settings();
    let max_speed = settings.max_speed;
    let recording = rec.clone();
    tokio::task::spawn_blocking(move || {
        let bytes = std::fs::read(&path).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, proto::ErrorCode::Internal, format!("storage error: {e}")))?;
        let parsed = crate::record::format::parse(&bytes).map_err(|e| ApiError::invalid(format!("field `replay`: recording `{recording}`: {e}")))?;
        let (player, world) = crate::record::player::Player::open(parsed, &settings).map_err(|e| ApiError::invalid(format!("field `replay`: recording `{recording}`: {e}")))?;
        Ok(crate::runtime::world::ReplaySpawn { player: Box::new(player), world, recording, max_speed })
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, proto::ErrorCode::Internal, e.to_string()))?
}

/// An empty 200×200 world's scenario.
pub fn empty_scenario() -> Result<Scenario, ApiError> {
    Scenario::from_json(r#"{"bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 200, "y": 200}}}"#)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, proto::ErrorCode::Internal, e.to_string()))
}

/// `POST /worlds`.
#[utoipa::path(post, path = "/worlds", tag = "worlds", security(("bearer" = [])),
    request_body = CreateWorld,
    responses(
        (status = 201, description = "Created and started", body = WorldInfoView),
        (status = 404, description = "No such scenario or recording (`not_found`)", body = doc::ErrorBody),
        (status = 409, description = "A world of that name exists (`bad_request`)", body = doc::ErrorBody),
        (status = 422, description = "`scenario` and `replay` both given, or the recording cannot be replayed: corrupt, several segments, a scenario that does not build (`invalid_field`, names `replay`)", body = doc::ErrorBody),
        doc::AdminErrors, doc::BodyErrors))]
pub async fn create_world(State(state): State<AppState>, body: Body<CreateWorld>) -> ApiResult {
    let Json(b) = body?;
    if let Some(rec) = &b.replay {
        if b.scenario.is_some() {
            return Err(ApiError::invalid("field `replay`: a replay world plays its recording's own scenario; give `scenario` or `replay`, not both"));
        }
        if !crate::scenario::valid_name(&b.name) {
            return Err(crate::runtime::RegistryError::BadName(b.name.clone()).into());
        }
        if state.registry.get(&b.name).is_ok() {
            return Err(crate::runtime::RegistryError::Exists(b.name.clone()).into());
        }
        let spawn = open_replay(&state, rec).await?;
        let reg = state.registry.clone();
        let name = b.name.clone();
        let h = tokio::task::spawn_blocking(move || reg.create_replay(&name, spawn, b.paused))
            .await
            .map_err(|e| ApiError::bad_request(e.to_string()))??;
        let info = h.ask(|reply| Request::Info { sight: Sight::All, reply }).await?;
        return created(info);
    }
    let (scenario, sname) = match &b.scenario {
        Some(n) => (state.store.get(n)?.0, Some(n.clone())),
        None => (empty_scenario()?, None),
    };
    let reg = state.registry.clone();
    let name = b.name.clone();
    let h = tokio::task::spawn_blocking(move || reg.create_durable(&name, scenario, sname, b.paused, b.durable))
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))??;
    let info = h.ask(|reply| Request::Info { sight: Sight::All, reply }).await?;
    created(info)
}

/// `GET /worlds/{world}`.
#[utoipa::path(get, path = "/worlds/{world}", tag = "worlds", params(("world" = String, Path, description = "World name")),
    responses((status = 200, description = "The world", body = WorldInfoView), doc::WorldErrors))]
pub async fn get_world(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path(name): Path<String>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Info { sight: grant.sight, reply }).await?)
}

/// Body of `PATCH /worlds/{world}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchWorld {
    /// Ticks per second.
    #[serde(default)]
    #[schema(minimum = 0.1, maximum = 1000)]
    pub tick_rate: Option<f32>,
    /// Pause or resume.
    #[serde(default)]
    pub paused: Option<bool>,
    /// Save the world (as scenario `<world>-autosave`) at shutdown.
    #[serde(default)]
    pub autosave: Option<bool>,
    /// Start or stop recording the world (`server/RECORDING.md`). A world changed since its
    /// load is first re-based on a snapshot of its state (subscribers get a reset).
    #[serde(default)]
    pub recording: Option<bool>,
    /// With `recording: true`: checkpoints carry per-agent digests.
    #[serde(default)]
    pub recording_digests: Option<bool>,
}

/// `PATCH /worlds/{world}`.
#[utoipa::path(patch, path = "/worlds/{world}", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = PatchWorld,
    responses((status = 200, description = "The world after the change", body = WorldInfoView), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn patch_world(State(state): State<AppState>, Path(name): Path<String>, body: Body<PatchWorld>) -> ApiResult {
    let Json(b) = body?;
    let w = world(&state, &name)?;
    let info = w.ask(|reply| Request::Patch { tick_rate: b.tick_rate, paused: b.paused, autosave: b.autosave, reply }).await?;
    match b.recording {
        Some(on) => ok(w.ask(|reply| Request::Recording { on, digests: b.recording_digests, reply }).await?),
        None if b.recording_digests.is_some() => Err(ApiError::invalid("field `recording_digests`: only with `recording: true`")),
        None => ok(info),
    }
}

/// `DELETE /worlds/{world}`.
#[utoipa::path(delete, path = "/worlds/{world}", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    responses(
        (status = 204, description = "Stopped and removed"),
        (status = 404, description = "No such world (`unknown_world`)", body = doc::ErrorBody),
        doc::AdminErrors))]
pub async fn delete_world(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    state.registry.remove(&name)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Body of `POST /worlds/{world}/step`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StepBody {
    /// Ticks to run now (1 to 10000).
    #[schema(minimum = 1, maximum = 10000)]
    pub ticks: u32,
}

/// `POST /worlds/{world}/step`.
#[utoipa::path(post, path = "/worlds/{world}/step", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = StepBody,
    responses((status = 200, description = "Stepped", body = doc::Tick), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn step(State(state): State<AppState>, Path(name): Path<String>, body: Body<StepBody>) -> ApiResult {
    let Json(b) = body?;
    if !(1..=10_000).contains(&b.ticks) {
        return Err(ApiError::invalid("field `ticks`: must be between 1 and 10000"));
    }
    let tick = world(&state, &name)?.ask(|reply| Request::Step { ticks: b.ticks, reply }).await?;
    ok(json!({"tick": tick}))
}

/// `POST /worlds/{world}/reset`: back to the scenario it was loaded from (also restarts a dead
/// world).
#[utoipa::path(post, path = "/worlds/{world}/reset", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    responses(
        (status = 200, description = "Reset (`{\"tick\": n}`), or a dead world restarted (its summary)", body = doc::ResetAnswer),
        doc::WorldErrors, doc::AdminErrors))]
pub async fn reset(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let w = world(&state, &name)?;
    if !w.alive() {
        return restart_dead(&state, &w).await;
    }
    let tick = w.ask(|reply| Request::Reset { reply }).await?;
    ok(json!({"tick": tick}))
}

async fn restart_dead(state: &AppState, w: &WorldHandle) -> ApiResult {
    let (scenario, sname) = match state.store.get(&format!("{}-autosave", w.name)) {
        Ok((s, _)) => (s, Some(format!("{}-autosave", w.name))),
        Err(_) => w.origin.lock().map(|o| o.clone()).unwrap_or_else(|p| p.into_inner().clone()),
    };
    let reg = state.registry.clone();
    let name = w.name.clone();
    let h = tokio::task::spawn_blocking(move || reg.restart(&name, scenario, sname))
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))??;
    ok(h.ask(|reply| Request::Info { sight: Sight::All, reply }).await?)
}

/// `GET /worlds/{world}/snapshot`.
#[utoipa::path(get, path = "/worlds/{world}/snapshot", tag = "worlds", params(("world" = String, Path, description = "World name")),
    responses((status = 200, description = "Full state", body = Snapshot), doc::WorldErrors))]
pub async fn snapshot(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path(name): Path<String>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Snapshot { sight: grant.sight, reply }).await?)
}

/// Body of `POST /worlds/{world}/load` and `/save`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRef {
    /// Scenario name.
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub scenario: String,
}

/// `POST /worlds/{world}/load`.
#[utoipa::path(post, path = "/worlds/{world}/load", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = ScenarioRef,
    responses((status = 200, description = "Loaded", body = doc::Loaded), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn load(State(state): State<AppState>, Path(name): Path<String>, body: Body<ScenarioRef>) -> ApiResult {
    let Json(b) = body?;
    let (sc, _) = state.store.get(&b.scenario)?;
    let tick = world(&state, &name)?.ask(|reply| Request::Load { scenario: Box::new(sc), name: b.scenario.clone(), reply }).await?;
    ok(json!({"tick": tick, "scenario": b.scenario}))
}

/// `POST /worlds/{world}/save`.
#[utoipa::path(post, path = "/worlds/{world}/save", tag = "worlds", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = ScenarioRef,
    responses(
        (status = 200, description = "Saved", body = doc::Saved),
        (status = 500, description = "Could not write (`internal`)", body = doc::ErrorBody),
        doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn save(State(state): State<AppState>, Path(name): Path<String>, body: Body<ScenarioRef>) -> ApiResult {
    let Json(b) = body?;
    let sc = world(&state, &name)?.ask(|reply| Request::Save { reply }).await?;
    let store = state.store.clone();
    let sname = b.scenario.clone();
    tokio::task::spawn_blocking(move || store.put(&sname, &sc)).await.map_err(|e| ApiError::bad_request(e.to_string()))??;
    ok(json!({"scenario": b.scenario}))
}
