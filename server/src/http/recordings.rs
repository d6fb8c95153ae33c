//! Recordings (issue 19): download a world's current recording, list and delete recordings.
//! Starting and stopping is `PATCH /worlds/{world} {"recording": true|false}`.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use steer_proto::ErrorCode;

use super::state::AppState;
use super::error::ApiError;
use super::schema as doc;
use crate::runtime::world::Request;

type ApiResult = Result<Response, ApiError>;

/// A recording on disk (`GET /recordings`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct RecordingEntry {
    /// Name (the file is `<name>.rec` in `<data_dir>/recordings`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// A world is writing it now.
    pub active: bool,
}

fn hub(state: &AppState) -> Result<&std::sync::Arc<crate::record::RecordHub>, ApiError> {
    state.registry.recorder().ok_or_else(|| ApiError::not_found("this server has no recordings directory"))
}

fn io_error(e: std::io::Error) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, format!("storage error: {e}"))
}

/// How long a download waits for the writer thread to write what the world queued before it.
const WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `GET /worlds/{world}/recording`: the world's current (or last) recording file, with everything
/// the world handed to the writer before the request (so a stopped recording ends with its `End`
/// record; waiting at most 5 s for a busy writer, then as written so far). A chunk still being
/// written may be cut short at the end; readers drop it.
#[utoipa::path(get, path = "/worlds/{world}/recording", tag = "recordings", params(("world" = String, Path, description = "World name")),
    responses(
        (status = 200, description = "The recording file (`application/octet-stream`, format in server/RECORDING.md)", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "No such world, or it has no recording (`unknown_world`, `not_found`)", body = doc::ErrorBody),
        (status = 503, description = "The world's queue is full or its thread is dead", body = doc::ErrorBody)))]
pub async fn get_recording(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let w = state.registry.get(&name)?;
    let info = w.ask(|reply| Request::Info { sight: crate::authz::Sight::All, reply }).await?;
    let Some(rec) = info.recording.name else { return Err(ApiError::not_found(format!("world `{name}` has no recording"))) };
    let hub = hub(&state)?.clone();
    let path = hub.path_of(&rec).ok_or_else(|| ApiError::not_found(format!("no recording `{rec}`")))?;
    // The stop that answered `"active": false` queued the last chunk and `End`; the writer
    // thread may not have written them yet.
    let _ = tokio::task::spawn_blocking(move || hub.drain(WRITER_WAIT)).await;
    let bytes = tokio::fs::read(&path).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ApiError::not_found(format!("recording `{rec}` is not on disk (deleted or not written yet)")),
        _ => io_error(e),
    })?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{rec}.{}\"", crate::record::EXT)),
        ],
        bytes,
    )
        .into_response())
}

/// `GET /recordings`.
#[utoipa::path(get, path = "/recordings", tag = "recordings",
    responses(
        (status = 200, description = "Recordings in the data directory", body = [RecordingEntry]),
        (status = 404, description = "No recordings directory (`not_found`)", body = doc::ErrorBody)))]
pub async fn list_recordings(State(state): State<AppState>) -> ApiResult {
    let hub = hub(&state)?.clone();
    let list = tokio::task::spawn_blocking(move || hub.list()).await.map_err(|e| io_error(std::io::Error::other(e.to_string())))?.map_err(io_error)?;
    let list: Vec<RecordingEntry> = list.into_iter().map(|(name, bytes, active)| RecordingEntry { name, bytes, active }).collect();
    Ok(axum::Json(list).into_response())
}

/// `DELETE /recordings/{name}`.
#[utoipa::path(delete, path = "/recordings/{name}", tag = "recordings", security(("bearer" = [])),
    params(("name" = String, Path, description = "Recording name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Bad name (`bad_request`)", body = doc::ErrorBody),
        (status = 404, description = "No such recording (`not_found`)", body = doc::ErrorBody),
        (status = 409, description = "A world is recording into it (stop it first)", body = doc::ErrorBody),
        doc::AdminErrors))]
pub async fn delete_recording(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let hub = hub(&state)?;
    let path = hub.path_of(&name).ok_or_else(|| ApiError::bad_request("invalid recording name: use 1 to 64 of A-Z a-z 0-9 _ -"))?;
    if hub.is_active(&name) {
        return Err(ApiError::new(StatusCode::CONFLICT, ErrorCode::BadRequest, format!("recording `{name}` is being written; stop it first")));
    }
    tokio::fs::remove_file(&path).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ApiError::not_found(format!("no recording `{name}`")),
        _ => io_error(e),
    })?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
