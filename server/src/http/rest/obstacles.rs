//! Obstacles and walls of a world: list, add, move, remove, and random placement.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;
use steer_proto as proto;
use utoipa::ToSchema;

use super::common::*;
use crate::http::state::AppState;
use crate::http::schema as doc;
use crate::runtime::world::{Actor, ObstacleView, Request, WallView};
use crate::scenario::RandomObstacles;
use crate::convert::vec2;
use proto::Point;

use crate::sim::world::{Command, Outcome};

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
