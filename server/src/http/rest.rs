//! REST handlers (JSON). Mutating calls need the admin token when one is set; the agent calls
//! (spawn, despawn, behaviours, move-to) also take a player token, for that player's agents.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use steer_proto as proto;
use utoipa::ToSchema;

use super::state::AppState;
use super::error::ApiError;
use super::schema as doc;
use crate::authz::{Grant, Sight};
use crate::convert;
use crate::runtime::world::{Actor, AgentView, ObstacleView, ReplayOp, ReplayView, Request, Snapshot, WallView, WorldInfoView};
use crate::runtime::{CmdError, WorldHandle};
use crate::scenario::{RandomObstacles, Scenario};
use crate::convert::vec2;
use proto::Point;


use crate::sim::world::{Command, Outcome};

type Body<T> = Result<Json<T>, JsonRejection>;
type ApiResult = Result<Response, ApiError>;

/// The actor of a granted call (a public call's caller, if it reached here, commands nothing).
fn actor_of(grant: &Grant) -> Actor {
    grant.identity.as_ref().map_or_else(|| Actor { player: None, role: proto::Role::Spectator, team: None }, Actor::of)
}

fn world(state: &AppState, name: &str) -> Result<WorldHandle, ApiError> {
    Ok(state.registry.get(name)?)
}

fn ok<T: serde::Serialize>(v: T) -> ApiResult {
    Ok(Json(v).into_response())
}

fn created<T: serde::Serialize>(v: T) -> ApiResult {
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

/// `GET /health`: 200 when every world runs, 503 naming the dead ones otherwise.
#[utoipa::path(get, path = "/health", tag = "ops",
    responses(
        (status = 200, description = "Every world runs", body = doc::Health),
        (status = 503, description = "Some world is dead (`status` is `degraded`)", body = doc::Health)))]
pub async fn health(State(state): State<AppState>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let mut worlds = serde_json::Map::new();
    let mut dead = Vec::new();
    let mut overloaded = Vec::new();
    for w in state.registry.list() {
        let alive = w.alive();
        let reason = w.death.lock().ok().and_then(|d| d.clone());
        if !alive {
            dead.push(w.name.clone());
        }
        let over = alive && w.overloaded();
        if over {
            overloaded.push(w.name.clone());
        }
        worlds.insert(
            w.name.clone(),
            json!({
                "alive": alive,
                "tick": w.stats.tick.load(Relaxed),
                "tick_rate": f64::from(w.stats.tick_rate_milli.load(Relaxed)) / 1000.0,
                "effective_tick_rate": w.effective_tick_rate(),
                "overloaded": over,
                "error": reason,
            }),
        );
    }
    let status = if dead.is_empty() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut body = json!({"status": if dead.is_empty() { "ok" } else { "degraded" }, "dead_worlds": dead, "overloaded_worlds": overloaded, "worlds": worlds, "auth": state.mode.name(), "sessions": state.registry.players.sessions()});
    if state.mode == crate::authz::Mode::Dev {
        body["warning"] = json!("dev mode: no admin token and no player key, every REST call is open");
    }
    (status, Json(body)).into_response()
}

/// `GET /metrics`.
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus/OpenMetrics text", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let worlds = state.registry.list();
    let agents: u64 = worlds.iter().map(|w| w.stats.agents.load(std::sync::atomic::Ordering::Relaxed)).sum();
    state.metrics.agents.set(agents as i64);
    state.metrics.set_worlds(worlds.iter().map(|w| (w.name.as_str(), w.effective_tick_rate(), w.alive() && w.overloaded())));
    ([(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render()).into_response()
}

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
        if !crate::runtime::registry::valid_name(&b.name) {
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
    let h = tokio::task::spawn_blocking(move || reg.create(&name, scenario, sname, b.paused))
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

/// Query of `GET /worlds/{world}/agents`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// Most agents returned (default 1000, at most 100000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `GET /worlds/{world}/agents`.
#[utoipa::path(get, path = "/worlds/{world}/agents", tag = "agents",
    params(
        ("world" = String, Path, description = "World name"),
        ("limit" = Option<usize>, Query, description = "Most agents returned (default 1000, at most 100000)")),
    responses((status = 200, description = "Agents", body = [AgentView]), doc::WorldErrors))]
pub async fn list_agents(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path(name): Path<String>, Query(q): Query<ListQuery>) -> ApiResult {
    let limit = q.limit.unwrap_or(1000).min(100_000);
    ok(world(&state, &name)?.ask(|reply| Request::Agents { limit, sight: grant.sight, reply }).await?)
}

/// Body of `POST /worlds/{world}/agents` (a group).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnBody {
    /// Group name.
    pub group: String,
    /// Number of agents.
    #[schema(minimum = 1, maximum = 10000)]
    pub count: u32,
    /// Where (`steer_proto::SpawnArea`).
    pub area: proto::SpawnArea,
    /// Limits (`steer_proto::Limits`; defaults filled in).
    #[serde(default)]
    pub limits: proto::Limits,
    /// Behaviours (`steer_proto::BehaviorEntry`).
    #[serde(default)]
    pub behaviors: Vec<proto::BehaviorEntry>,
}

/// `POST /worlds/{world}/agents`: spawns a group, answers the ids.
#[utoipa::path(post, path = "/worlds/{world}/agents", tag = "agents", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = SpawnBody,
    responses((status = 201, description = "Spawned", body = doc::Spawned), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn spawn(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path(name): Path<String>, body: Body<SpawnBody>) -> ApiResult {
    let actor = actor_of(&grant);
    let Json(b) = body?;
    let spec = convert::spawn_spec(&b.group, b.count, &b.area, &b.limits, &b.behaviors).map_err(CmdError::Sim)?;
    match world(&state, &name)?.apply(Command::Spawn(spec), actor).await? {
        Outcome::Spawned(ids) => created(json!({"agents": ids})),
        other => ok(json!({"result": format!("{other:?}")})),
    }
}

/// `GET /worlds/{world}/agents/{id}`.
#[utoipa::path(get, path = "/worlds/{world}/agents/{id}", tag = "agents",
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Agent id")),
    responses((status = 200, description = "The agent", body = AgentView), doc::WorldErrors))]
pub async fn get_agent(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path((name, id)): Path<(String, u32)>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Agent { id, sight: grant.sight, reply }).await?)
}

/// `DELETE /worlds/{world}/agents/{id}`.
#[utoipa::path(delete, path = "/worlds/{world}/agents/{id}", tag = "agents", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Agent id")),
    responses((status = 204, description = "Despawned"), doc::WorldErrors, doc::AdminErrors))]
pub async fn delete_agent(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path((name, id)): Path<(String, u32)>) -> ApiResult {
    let actor = actor_of(&grant);
    world(&state, &name)?.apply(Command::Despawn(id), actor).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Query of `GET /worlds/{world}/flowfield`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowFieldQuery {
    /// The agent whose MoveTo field to show.
    pub agent: u32,
    /// Most sample blocks per side (1 to 256; default 64).
    pub max_side: Option<u32>,
}

/// `GET /worlds/{world}/flowfield?agent=ID[&max_side=N]`: the flow field the agent's MoveTo
/// follows, sampled on at most `max_side`² blocks.
#[utoipa::path(get, path = "/worlds/{world}/flowfield", tag = "agents",
    params(
        ("world" = String, Path, description = "World name"),
        ("agent" = u32, Query, description = "The agent whose MoveTo field to show"),
        ("max_side" = Option<u32>, Query, description = "Most sample blocks per side (1 to 256; default 64)", minimum = 1, maximum = 256)),
    responses(
        (status = 200, description = "The sampled flow field", body = crate::runtime::world::FlowFieldView),
        (status = 400, description = "Missing or malformed query (`bad_request`)", body = doc::ErrorBody),
        (status = 422, description = "`max_side` out of range (`invalid_field`)", body = doc::ErrorBody),
        doc::WorldErrors))]
pub async fn flow_field(
    State(state): State<AppState>,
    Extension(grant): Extension<Grant>,
    Path(name): Path<String>,
    q: Result<Query<FlowFieldQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(q) = q?;
    let max_side = q.max_side.unwrap_or(64);
    if !(1..=256).contains(&max_side) {
        return Err(ApiError::invalid("max_side: must be between 1 and 256"));
    }
    ok(world(&state, &name)?.ask(|reply| Request::FlowField { agent: q.agent, max_side, sight: grant.sight, reply }).await?)
}

/// `GET /worlds/{world}/agents/{id}/avoidance`: what reciprocal avoidance (ORCA) sees and
/// chooses for the agent now — its velocity-obstacle half-planes, preferred and chosen velocity.
#[utoipa::path(get, path = "/worlds/{world}/agents/{id}/avoidance", tag = "agents",
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Agent id")),
    responses((status = 200, description = "The agent's avoidance now", body = crate::runtime::world::AvoidanceView), doc::WorldErrors))]
pub async fn avoidance(State(state): State<AppState>, Path((name, id)): Path<(String, u32)>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Avoidance { agent: id, reply }).await?)
}

/// Body of `PUT /worlds/{world}/agents/{id}/behaviors`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BehaviorsBody {
    /// The new behaviour set (`steer_proto::BehaviorEntry`).
    pub behaviors: Vec<proto::BehaviorEntry>,
}

/// `PUT /worlds/{world}/agents/{id}/behaviors`.
#[utoipa::path(put, path = "/worlds/{world}/agents/{id}/behaviors", tag = "agents", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Agent id")),
    request_body = BehaviorsBody,
    responses((status = 200, description = "Set", body = doc::AgentRef), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn put_behaviors(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path((name, id)): Path<(String, u32)>, body: Body<BehaviorsBody>) -> ApiResult {
    let actor = actor_of(&grant);
    let Json(b) = body?;
    let entries = convert::entries(&b.behaviors).map_err(|e| ApiError::from(e.within("behaviors")))?;
    world(&state, &name)?.apply(Command::SetBehaviors { agent: id, entries }, actor).await?;
    ok(json!({"agent": id}))
}

/// Body of `POST /worlds/{world}/move-to`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveToBody {
    /// Agents to send.
    pub agents: Vec<u32>,
    /// Destination.
    pub target: Point,
    /// Stop within this distance of the target (default 0: the formation decides).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000)]
    pub stopping_distance: f32,
}

/// `POST /worlds/{world}/move-to`: flow-field MoveTo for a group.
#[utoipa::path(post, path = "/worlds/{world}/move-to", tag = "agents", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = MoveToBody,
    responses((status = 200, description = "Ordered", body = doc::OkBody), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn move_to(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path(name): Path<String>, body: Body<MoveToBody>) -> ApiResult {
    let actor = actor_of(&grant);
    let Json(b) = body?;
    let cmd = Command::MoveTo { agents: b.agents, target: vec2(b.target), stopping_distance: b.stopping_distance };
    world(&state, &name)?.apply(cmd, actor).await?;
    ok(json!({"ok": true}))
}

/// `GET /worlds/{world}/obstacles`.
#[utoipa::path(get, path = "/worlds/{world}/obstacles", tag = "obstacles", params(("world" = String, Path, description = "World name")),
    responses((status = 200, description = "Obstacles", body = [ObstacleView]), doc::WorldErrors))]
pub async fn list_obstacles(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Obstacles { reply }).await?)
}

/// Body of `POST /worlds/{world}/obstacles`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ObstacleBody {
    /// Centre.
    pub center: Point,
    /// Radius.
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub radius: f32,
}

/// `POST /worlds/{world}/obstacles`.
#[utoipa::path(post, path = "/worlds/{world}/obstacles", tag = "obstacles", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = ObstacleBody,
    responses((status = 201, description = "Added", body = doc::Id), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn add_obstacle(State(state): State<AppState>, Path(name): Path<String>, body: Body<ObstacleBody>) -> ApiResult {
    let actor = Actor::admin();
    let Json(b) = body?;
    match world(&state, &name)?.apply(Command::AddObstacle { center: vec2(b.center), radius: b.radius }, actor).await? {
        Outcome::Added(id) => created(json!({"id": id})),
        other => ok(json!({"result": format!("{other:?}")})),
    }
}

/// Body of `PATCH /worlds/{world}/obstacles/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveObstacleBody {
    /// New centre.
    pub center: Point,
    /// New radius (default: unchanged).
    #[serde(default)]
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub radius: Option<f32>,
}

/// `PATCH /worlds/{world}/obstacles/{id}`: moves (drags) and optionally resizes an obstacle.
#[utoipa::path(patch, path = "/worlds/{world}/obstacles/{id}", tag = "obstacles", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Obstacle id")),
    request_body = MoveObstacleBody,
    responses((status = 200, description = "Moved", body = doc::Id), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn move_obstacle(State(state): State<AppState>, Path((name, id)): Path<(String, u32)>, body: Body<MoveObstacleBody>) -> ApiResult {
    let actor = Actor::admin();
    let Json(b) = body?;
    world(&state, &name)?.apply(Command::MoveObstacle { id, center: vec2(b.center), radius: b.radius }, actor).await?;
    ok(json!({"id": id}))
}

/// `DELETE /worlds/{world}/obstacles/{id}`.
#[utoipa::path(delete, path = "/worlds/{world}/obstacles/{id}", tag = "obstacles", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Obstacle id")),
    responses((status = 204, description = "Removed"), doc::WorldErrors, doc::AdminErrors))]
pub async fn delete_obstacle(State(state): State<AppState>, Path((name, id)): Path<(String, u32)>) -> ApiResult {
    let actor = Actor::admin();
    world(&state, &name)?.apply(Command::RemoveObstacle(id), actor).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /worlds/{world}/obstacles/random`: places up to `count` obstacles at random, none overlapping another.
#[utoipa::path(post, path = "/worlds/{world}/obstacles/random", tag = "obstacles", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = RandomObstacles,
    responses((status = 201, description = "Placed", body = doc::Ids), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn random_obstacles(State(state): State<AppState>, Path(name): Path<String>, body: Body<RandomObstacles>) -> ApiResult {
    let Json(spec) = body?;
    let ids = world(&state, &name)?.ask(|reply| Request::RandomObstacles { spec, reply }).await?;
    created(json!({"ids": ids}))
}

/// `GET /worlds/{world}/walls`.
#[utoipa::path(get, path = "/worlds/{world}/walls", tag = "walls", params(("world" = String, Path, description = "World name")),
    responses((status = 200, description = "Walls", body = [WallView]), doc::WorldErrors))]
pub async fn list_walls(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Walls { reply }).await?)
}

/// Body of `POST /worlds/{world}/walls`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WallBody {
    /// Start.
    pub a: Point,
    /// End.
    pub b: Point,
}

/// `POST /worlds/{world}/walls`.
#[utoipa::path(post, path = "/worlds/{world}/walls", tag = "walls", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = WallBody,
    responses((status = 201, description = "Added", body = doc::Id), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn add_wall(State(state): State<AppState>, Path(name): Path<String>, body: Body<WallBody>) -> ApiResult {
    let actor = Actor::admin();
    let Json(b) = body?;
    match world(&state, &name)?.apply(Command::AddWall { a: vec2(b.a), b: vec2(b.b) }, actor).await? {
        Outcome::Added(id) => created(json!({"id": id})),
        other => ok(json!({"result": format!("{other:?}")})),
    }
}

/// `DELETE /worlds/{world}/walls/{id}`.
#[utoipa::path(delete, path = "/worlds/{world}/walls/{id}", tag = "walls", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Wall id")),
    responses((status = 204, description = "Removed"), doc::WorldErrors, doc::AdminErrors))]
pub async fn delete_wall(State(state): State<AppState>, Path((name, id)): Path<(String, u32)>) -> ApiResult {
    let actor = Actor::admin();
    world(&state, &name)?.apply(Command::RemoveWall(id), actor).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /scenarios`.
#[utoipa::path(get, path = "/scenarios", tag = "scenarios",
    responses((status = 200, description = "Saved and shipped scenarios", body = [doc::ScenarioEntry])))]
pub async fn list_scenarios(State(state): State<AppState>) -> ApiResult {
    let list: Vec<_> = state.store.list().into_iter().map(|(name, origin)| json!({"name": name, "origin": origin})).collect();
    ok(list)
}

/// `GET /scenarios/{name}`.
#[utoipa::path(get, path = "/scenarios/{name}", tag = "scenarios", params(("name" = String, Path, description = "Scenario name (1 to 64 of A-Z a-z 0-9 _ -)", pattern = r"^[A-Za-z0-9_-]{1,64}$")),
    responses(
        (status = 200, description = "The scenario file", body = Scenario),
        (status = 400, description = "Bad name (`bad_request`)", body = doc::ErrorBody),
        (status = 404, description = "No such scenario (`not_found`)", body = doc::ErrorBody)))]
pub async fn get_scenario(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ok(state.store.get(&name)?.0)
}

/// `PUT /scenarios/{name}`: validates by building the world, then stores it atomically.
#[utoipa::path(put, path = "/scenarios/{name}", tag = "scenarios", security(("bearer" = [])),
    params(("name" = String, Path, description = "Scenario name (1 to 64 of A-Z a-z 0-9 _ -)", pattern = r"^[A-Za-z0-9_-]{1,64}$")),
    request_body(content = Scenario, content_type = "application/json", description = "A scenario file; validated by building its world"),
    responses(
        (status = 204, description = "Stored"),
        (status = 400, description = "Bad name, or not UTF-8 (`bad_request`)", body = doc::ErrorBody),
        (status = 413, description = "Too large (`too_large`)", body = doc::ErrorBody),
        (status = 422, description = "Not a valid scenario (`invalid_field`)", body = doc::ErrorBody),
        (status = 500, description = "Could not write (`internal`)", body = doc::ErrorBody),
        doc::AdminErrors))]
pub async fn put_scenario(State(state): State<AppState>, Path(name): Path<String>, body: axum::body::Bytes) -> ApiResult {
    let text = std::str::from_utf8(&body).map_err(|_| ApiError::bad_request("body must be UTF-8 JSON"))?;
    let sc = Scenario::from_json(text).map_err(|e| ApiError::invalid(e.to_string()))?;
    let limits = state.settings.limits.clone();
    let store = state.store.clone();
    tokio::task::spawn_blocking(move || {
        let w = crate::runtime::world::build_world(&sc, limits.max_agents_per_world, limits.max_spawn).map_err(ApiError::from)?;
        crate::runtime::admission::check_scenario(&sc, &w, &limits.crowding()).map_err(ApiError::from)?;
        store.put(&name, &sc).map_err(ApiError::from)
    })
    .await
    .map_err(|e| ApiError::bad_request(e.to_string()))??;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `DELETE /scenarios/{name}`.
#[utoipa::path(delete, path = "/scenarios/{name}", tag = "scenarios", security(("bearer" = [])),
    params(("name" = String, Path, description = "Scenario name (1 to 64 of A-Z a-z 0-9 _ -)", pattern = r"^[A-Za-z0-9_-]{1,64}$")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Bad name (`bad_request`)", body = doc::ErrorBody),
        (status = 404, description = "No such scenario (`not_found`)", body = doc::ErrorBody),
        (status = 500, description = "Could not delete (`internal`)", body = doc::ErrorBody),
        doc::AdminErrors))]
pub async fn delete_scenario(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    state.store.delete(&name)?;
    Ok(StatusCode::NO_CONTENT.into_response())
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

/// One player of a world (`GET /worlds/{world}/players`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, ToSchema)]
pub struct PlayerView {
    /// Player id (the token's `sub`, or `anon-…` in dev mode).
    pub player: String,
    /// `player` or `spectator` (`null`: not connected and no longer known to the server).
    #[schema(value_type = Option<String>, example = "player")]
    pub role: Option<proto::Role>,
    pub team: Option<String>,
    /// Open connections (server-wide).
    pub connections: usize,
    /// Agents it owns in this world.
    pub agents: usize,
    /// Bytes per second sent to its connections over the last second.
    pub bytes_per_sec: u64,
    /// Its agents got the world's orphan policy (grace period over, or kicked).
    pub orphaned: bool,
}

/// `GET /worlds/{world}/players`: the players that own agents in the world or commanded in it.
#[utoipa::path(get, path = "/worlds/{world}/players", tag = "players", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    responses((status = 200, description = "Players", body = [PlayerView]), doc::WorldErrors, doc::AdminErrors))]
pub async fn list_players(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let rows = world(&state, &name)?.ask(|reply| Request::Players { reply }).await?;
    let hub = &state.registry.players;
    let out: Vec<PlayerView> = rows
        .into_iter()
        .map(|r| {
            let info = hub.info(&r.player);
            PlayerView {
                role: info.as_ref().map(|i| i.role),
                team: info.as_ref().and_then(|i| i.team.clone()),
                connections: info.as_ref().map_or(0, |i| i.connections),
                bytes_per_sec: info.as_ref().map_or(0, |i| i.bytes_per_sec),
                agents: r.agents,
                orphaned: r.orphaned,
                player: r.player,
            }
        })
        .collect();
    ok(out)
}

/// `DELETE /worlds/{world}/players/{player}`: kicks a player: its connections close (close code
/// 4003), its sessions cannot be resumed, and its agents in this world follow the world's
/// orphan policy now.
#[utoipa::path(delete, path = "/worlds/{world}/players/{player}", tag = "players", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("player" = String, Path, description = "Player id")),
    responses((status = 200, description = "Kicked: the agents it owned here", body = doc::Kicked), doc::WorldErrors, doc::AdminErrors))]
pub async fn kick_player(State(state): State<AppState>, Path((name, player)): Path<(String, String)>) -> ApiResult {
    let w = world(&state, &name)?;
    let connected = state.registry.players.kick(&player);
    let p = player.clone();
    let agents = w.ask(|reply| Request::Kick { player: p, reply }).await?;
    if !connected && agents == 0 {
        return Err(ApiError::new(StatusCode::NOT_FOUND, proto::ErrorCode::NotFound, format!("no player `{player}` in world `{name}`")));
    }
    ok(json!({"player": player, "agents": agents}))
}

/// Body of `PUT /worlds/{world}/agents/{id}/owner`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnerBody {
    /// The new owner's player id; `null` = nobody (only the admin commands it).
    pub player: Option<String>,
    /// Its team (default: the team of its connected session, if any).
    #[serde(default)]
    pub team: Option<String>,
}

/// `PUT /worlds/{world}/agents/{id}/owner`: hands an agent to a player (admin only).
#[utoipa::path(put, path = "/worlds/{world}/agents/{id}/owner", tag = "players", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name"), ("id" = u32, Path, description = "Agent id")),
    request_body = OwnerBody,
    responses((status = 200, description = "The new owner", body = doc::Owner), doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn put_owner(State(state): State<AppState>, Path((name, id)): Path<(String, u32)>, body: Body<OwnerBody>) -> ApiResult {
    let Json(b) = body?;
    let good = |s: &str| !s.is_empty() && s.len() <= crate::auth::MAX_ID_LEN && !s.chars().any(char::is_control);
    if b.player.as_deref().is_some_and(|p| !good(p) || p == "admin") {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, proto::ErrorCode::InvalidField, format!("player: 1 to {} printable characters, not `admin`", crate::auth::MAX_ID_LEN)));
    }
    if b.team.as_deref().is_some_and(|t| !good(t)) {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, proto::ErrorCode::InvalidField, format!("team: 1 to {} printable characters", crate::auth::MAX_ID_LEN)));
    }
    let team = b.team.clone().or_else(|| b.player.as_deref().and_then(|p| state.registry.players.team(p)));
    let player = b.player.clone();
    world(&state, &name)?.ask(|reply| Request::SetOwner { agent: id, player, team, reply }).await?;
    ok(json!({"agent": id, "player": b.player}))
}

/// `POST /debug/panic` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PanicBody {
    /// `world`: the named world's thread panics; `connection`: this request's connection task
    /// panics (the socket closes without an answer).
    pub target: PanicTarget,
    /// The world, for `target: world`.
    #[serde(default)]
    pub world: Option<String>,
}

/// What `POST /debug/panic` panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PanicTarget {
    /// A world's thread.
    World,
    /// The request's connection task.
    Connection,
}

/// `POST /debug/panic`: fault injection for the reliability suite (docs/reliability.md, test 18).
/// Served only when the server runs with `fault_injection` (`--fault-injection`); 404 otherwise.
#[utoipa::path(post, path = "/debug/panic", tag = "ops", security(("bearer" = [])),
    request_body = PanicBody,
    responses((status = 202, description = "The world thread was asked to panic", body = doc::OkBody),
        (status = 404, description = "Fault injection is off (the default), or no such world", body = doc::ErrorBody),
        doc::AdminErrors, doc::BodyErrors,
        (status = 503, description = "The world's queue is full or its thread is dead", body = doc::ErrorBody)))]
pub async fn debug_panic(State(state): State<AppState>, body: Body<PanicBody>) -> ApiResult {
    if !state.settings.fault_injection {
        return Err(ApiError::not_found("no route /debug/panic (fault injection is off)"));
    }
    let Json(b) = body?;
    match b.target {
        PanicTarget::Connection => panic!("fault injection: a connection task panic was asked for"),
        PanicTarget::World => {
            let name = b.world.ok_or_else(|| ApiError::invalid("missing field `world`"))?;
            world(&state, &name)?.inject_panic()?;
            Ok((StatusCode::ACCEPTED, Json(json!({"ok": true}))).into_response())
        }
    }
}

/// Body of `POST /worlds/{world}/replay/seek`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeekBody {
    /// The recording's tick to show (0 = its start; beyond its end = its end).
    pub tick: u64,
}

/// Body of `POST /worlds/{world}/replay/speed`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedBody {
    /// Playback speed, a multiple of the recorded tick rate (above 0, at most
    /// `limits.replay_max_speed`, 16 by default).
    #[schema(exclusive_minimum = 0.0, maximum = 1000.0, example = 2.0)]
    pub speed: f64,
}

async fn replay_control(state: &AppState, name: &str, op: ReplayOp) -> ApiResult {
    ok(world(state, name)?.ask(|reply| Request::Replay { op, reply }).await?)
}

/// `GET /worlds/{world}/replay`: a replay world's timeline.
#[utoipa::path(get, path = "/worlds/{world}/replay", tag = "replay", params(("world" = String, Path, description = "World name")),
    responses(
        (status = 200, description = "The replay's timeline and checks", body = ReplayView),
        (status = 409, description = "Not a replay world (`bad_request`)", body = doc::ErrorBody),
        doc::WorldErrors))]
pub async fn get_replay(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ok(world(&state, &name)?.ask(|reply| Request::Replay { op: ReplayOp::Get, reply }).await?)
}

/// `POST /worlds/{world}/replay/seek`: shows the state at a tick. Simulates from the nearest
/// keyframe at or before it (or from the current tick when that is nearer), so it costs fewer
/// ticks than the keyframe interval; `last_seek.ticks_simulated` says how many. Subscribers get
/// a reset frame (keyframes); the wire's ticks keep increasing.
#[utoipa::path(post, path = "/worlds/{world}/replay/seek", tag = "replay", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = SeekBody,
    responses(
        (status = 200, description = "The replay after the seek", body = ReplayView),
        (status = 409, description = "Not a replay world (`bad_request`)", body = doc::ErrorBody),
        doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn replay_seek(State(state): State<AppState>, Path(name): Path<String>, body: Body<SeekBody>) -> ApiResult {
    let Json(b) = body?;
    replay_control(&state, &name, ReplayOp::Seek(b.tick)).await
}

/// `POST /worlds/{world}/replay/play`: plays from the current tick at the current speed; it
/// pauses by itself at the end (at the end it stays paused).
#[utoipa::path(post, path = "/worlds/{world}/replay/play", tag = "replay", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    responses(
        (status = 200, description = "The replay", body = ReplayView),
        (status = 409, description = "Not a replay world (`bad_request`)", body = doc::ErrorBody),
        doc::WorldErrors, doc::AdminErrors))]
pub async fn replay_play(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    replay_control(&state, &name, ReplayOp::Play).await
}

/// `POST /worlds/{world}/replay/pause`.
#[utoipa::path(post, path = "/worlds/{world}/replay/pause", tag = "replay", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    responses(
        (status = 200, description = "The replay", body = ReplayView),
        (status = 409, description = "Not a replay world (`bad_request`)", body = doc::ErrorBody),
        doc::WorldErrors, doc::AdminErrors))]
pub async fn replay_pause(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    replay_control(&state, &name, ReplayOp::Pause).await
}

/// `POST /worlds/{world}/replay/speed`.
#[utoipa::path(post, path = "/worlds/{world}/replay/speed", tag = "replay", security(("bearer" = [])),
    params(("world" = String, Path, description = "World name")),
    request_body = SpeedBody,
    responses(
        (status = 200, description = "The replay at its new speed", body = ReplayView),
        (status = 409, description = "Not a replay world (`bad_request`)", body = doc::ErrorBody),
        (status = 422, description = "Speed not above 0 or above `limits.replay_max_speed` (`invalid_field`, names `speed`)", body = doc::ErrorBody),
        doc::WorldErrors, doc::AdminErrors, doc::BodyErrors))]
pub async fn replay_speed(State(state): State<AppState>, Path(name): Path<String>, body: Body<SpeedBody>) -> ApiResult {
    let Json(b) = body?;
    replay_control(&state, &name, ReplayOp::Speed(b.speed)).await
}
