//! The scenario store: list, read, write (validated by building the world) and delete.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use super::common::*;
use crate::http::state::AppState;
use crate::http::error::ApiError;
use crate::http::schema as doc;
use crate::scenario::Scenario;

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
        crate::runtime::admission::check_scenario(&sc, &w, &crate::runtime::admission::Crowding::from(&limits)).map_err(ApiError::from)?;
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
