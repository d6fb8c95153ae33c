//! Request guards that run before any handler or extractor:
//!
//! * [`guard`]: a mutating call (any method but GET/HEAD/OPTIONS) is authenticated **before**
//!   its body is read, so an anonymous client cannot make the server buffer a body; then the
//!   body is read whole, bounded by `limits.max_body_bytes` (413) and by
//!   `limits.body_timeout_ms` (408), so a client that holds back the last byte holds nothing for
//!   long.
//! * [`json_errors`]: every error answer is `{"error": code, "message": text}` — also the
//!   rejections produced outside the handlers (path and query extractors, body limits, unknown
//!   routes and methods), which axum and tower-http write as plain text.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use steer_proto::ErrorCode;

use super::AppState;
use super::error::ApiError;

/// Largest error body [`json_errors`] rewrites (longer ones are cut).
const MAX_ERROR_TEXT: usize = 4096;

fn too_large(limit: usize) -> Response {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge, format!("request body larger than {limit} bytes")).into_response()
}

/// Authenticates mutating calls before their body is read, then reads the body with a size
/// and a time bound.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    if let Err(e) = super::rest::any_actor(&state, req.headers()) {
        return e.into_response();
    }
    let limit = state.settings.limits.max_body_bytes;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let timeout = Duration::from_millis(state.settings.limits.body_timeout_ms);
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(timeout, http_body_util::BodyExt::collect(limited)).await {
        Err(_) => ApiError::new(StatusCode::REQUEST_TIMEOUT, ErrorCode::BadRequest, format!("request body not received within {} ms", timeout.as_millis()))
            .into_response(),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => too_large(limit),
        Ok(Err(e)) => ApiError::bad_request(format!("reading the request body: {e}")).into_response(),
        Ok(Ok(collected)) => {
            let bytes = collected.to_bytes();
            // Every request body of this API is a JSON object; serde would also read a struct
            // from a JSON array (`[null, null]`), which the documented schema does not allow.
            let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
            // (Malformed JSON is left to the handler's 400.)
            if first.is_some_and(|b| *b != b'{')
                && parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"))
                && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok()
            {
                return ApiError::invalid("the request body must be a JSON object").into_response();
            }
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
    }
}

/// The wire code of an error status.
fn code_of(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        413 => ErrorCode::TooLarge,
        422 => ErrorCode::InvalidField,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::Busy,
        s if s >= 500 => ErrorCode::Internal,
        _ => ErrorCode::BadRequest,
    }
}

/// Rewrites error answers that are not JSON as `{"error": code, "message": text}`.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = match tokio::time::timeout(Duration::from_secs(1), axum::body::to_bytes(body, MAX_ERROR_TEXT)).await {
        Ok(Ok(b)) => String::from_utf8_lossy(&b).trim().to_string(),
        _ => String::new(),
    };
    let message = if text.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text };
    let body = serde_json::json!({"error": code_of(status).name(), "message": message}).to_string();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_wire_codes() {
        assert_eq!(code_of(StatusCode::BAD_REQUEST), ErrorCode::BadRequest);
        assert_eq!(code_of(StatusCode::PAYLOAD_TOO_LARGE), ErrorCode::TooLarge);
        assert_eq!(code_of(StatusCode::NOT_FOUND), ErrorCode::NotFound);
        assert_eq!(code_of(StatusCode::METHOD_NOT_ALLOWED), ErrorCode::BadRequest);
        assert_eq!(code_of(StatusCode::SERVICE_UNAVAILABLE), ErrorCode::Busy);
        assert_eq!(code_of(StatusCode::BAD_GATEWAY), ErrorCode::Internal);
    }
}
