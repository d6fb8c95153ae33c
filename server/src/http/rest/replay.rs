//! Replay worlds: state, seek, play, pause and speed.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa::ToSchema;

use super::common::*;
use crate::http::state::AppState;
use crate::http::schema as doc;
use crate::runtime::world::{ReplayOp, ReplayView, Request};

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
