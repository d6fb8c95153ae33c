//! Agents: list, spawn, read, despawn, their behaviours, MoveTo, and the flow-field and avoidance views.

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
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
use crate::authz::Grant;
use crate::convert;
use crate::runtime::world::{AgentView, Request};
use crate::runtime::CmdError;
use proto::Point;

use crate::sim::world::{Command, Outcome};

/// Query of `GET /worlds/{world}/agents`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// Most agents returned (default 1000, at most 100000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only agents stuck on their way (no progress for 10 s).
    #[serde(default)]
    pub stuck: Option<bool>,
}

/// `GET /worlds/{world}/agents`.
#[utoipa::path(get, path = "/worlds/{world}/agents", tag = "agents",
    params(
        ("world" = String, Path, description = "World name"),
        ("limit" = Option<usize>, Query, description = "Most agents returned (default 1000, at most 100000)"),
        ("stuck" = Option<bool>, Query, description = "Only agents on their way that made no progress for 10 s (among those whose orders the caller may see: all for the admin and spectators, a player's own)")),
    responses((status = 200, description = "Agents", body = [AgentView]), doc::WorldErrors))]
pub async fn list_agents(State(state): State<AppState>, Extension(grant): Extension<Grant>, Path(name): Path<String>, Query(q): Query<ListQuery>) -> ApiResult {
    let limit = q.limit.unwrap_or(1000).min(100_000);
    let stuck = q.stuck.unwrap_or(false);
    ok(world(&state, &name)?.ask(|reply| Request::Agents { limit, stuck, sight: grant.sight, reply }).await?)
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
    /// Stop within this distance of the target (default 0: the formation decides; at most
    /// `sim::world::MAX_STOPPING_DISTANCE`).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000)]
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
    let cmd = convert::rest_move_to(b.agents, b.target, b.stopping_distance)?;
    world(&state, &name)?.apply(cmd, actor).await?;
    ok(json!({"ok": true}))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use utoipa::PartialSchema;

    use super::*;

    /// The REST contract states the sim's bound on `stopping_distance`, not a looser one.
    #[test]
    fn move_to_schema_states_the_sim_bound() {
        let schema = serde_json::to_value(MoveToBody::schema()).unwrap();
        let max = &schema["properties"]["stopping_distance"]["maximum"];
        assert_eq!(max.as_f64(), Some(f64::from(crate::sim::world::MAX_STOPPING_DISTANCE)), "{schema}");
    }

    /// A REST MoveTo is refused by the wire's checks, naming the field as the client wrote it,
    /// and one within bounds converts to the sim command.
    #[test]
    fn rest_move_to_is_converted_from_the_wire_type() {
        let e = convert::rest_move_to(vec![1], Point { x: f32::NAN, y: 0.0 }, 0.0).unwrap_err();
        assert!(e.to_string().contains("target"), "{e}");
        let cmd = convert::rest_move_to(vec![1, 2], Point { x: 3.0, y: 4.0 }, 2.5).unwrap();
        assert!(matches!(cmd, Command::MoveTo { ref agents, stopping_distance, .. } if agents == &[1, 2] && stopping_distance == 2.5));
    }
}
