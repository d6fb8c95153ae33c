//! What every REST handler shares: the body and result types, the actor of a grant, the world look-up, the answers.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use steer_proto as proto;

use crate::http::state::AppState;
use crate::http::error::ApiError;
use crate::authz::Grant;
use crate::runtime::world::Actor;
use crate::runtime::WorldHandle;

pub(super) type Body<T> = Result<Json<T>, JsonRejection>;
pub(super) type ApiResult = Result<Response, ApiError>;

/// The actor of a granted call (a public call's caller, if it reached here, commands nothing).
pub(super) fn actor_of(grant: &Grant) -> Actor {
    grant.identity.as_ref().map_or_else(|| Actor { player: None, role: proto::Role::Spectator, team: None }, Actor::of)
}

pub(super) fn world(state: &AppState, name: &str) -> Result<WorldHandle, ApiError> {
    Ok(state.registry.get(name)?)
}

pub(super) fn ok<T: serde::Serialize>(v: T) -> ApiResult {
    Ok(Json(v).into_response())
}

pub(super) fn created<T: serde::Serialize>(v: T) -> ApiResult {
    Ok((StatusCode::CREATED, Json(v)).into_response())
}
