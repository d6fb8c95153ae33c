//! Players of a world: list, kick, and agent ownership.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::json;
use steer_proto as proto;
use utoipa::ToSchema;

use super::common::*;
use crate::http::state::AppState;
use crate::http::error::ApiError;
use crate::http::schema as doc;
use crate::runtime::world::Request;

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
