//! Request guards that run before any handler or extractor:
//!
//! * [`guard`]: the gate of every route. In order: the `Host` header is one the server answers
//!   under (DNS rebinding); the route's authorization rule (`authz::ROUTES`; a route or method
//!   without one is judged as an admin call) is decided for the caller's token and the world the path names, **before**
//!   the body is read, so an unauthorized client cannot make the server buffer a body; a
//!   state-changing call passes the Origin rule of `/ws` and, when it has a body or a content
//!   type, carries JSON (no cross-site form posts); then the body is read whole, bounded by
//!   `limits.max_body_bytes` (413) and by `limits.body_timeout_ms` (408), so a client that
//!   holds back the last byte holds nothing for long. The handler receives the decision as an
//!   [`authz::Grant`] extension.
//! * [`json_errors`]: every error answer is `{"error": code, "message": text}` — also the
//!   rejections produced outside the handlers (path and query extractors, body limits, unknown
//!   routes and methods), which axum and tower-http write as plain text.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use steer_proto::ErrorCode;

use super::state::AppState;
use super::error::ApiError;
use crate::authz::{self, Caller};

/// Largest error body [`json_errors`] rewrites (longer ones are cut).
const MAX_ERROR_TEXT: usize = 4096;

fn too_large(limit: usize) -> Response {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge, format!("request body larger than {limit} bytes")).into_response()
}

/// The host part of a `Host` header value or an origin's authority (`name`, `name:port`,
/// `[v6]:port`), lower-cased, without the port.
pub fn host_name(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_string();
    }
    a.rsplit_once(':').filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit())).map_or(a.clone(), |(h, _)| h.to_string())
}

/// True for `localhost` and loopback addresses.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.ends_with(".localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The `Host` check of every route: a loopback name, an IP address (a browser sends an IP
/// address only when the page's own address is one, so DNS rebinding never carries one), or a
/// name of `same_origin_hosts`. A request without a `Host` is no browser's and passes.
pub fn host_allowed(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else { return true };
    let Ok(host) = host.to_str() else { return false };
    let name = host_name(host);
    is_loopback(&name) || name.parse::<std::net::IpAddr>().is_ok() || state.settings.same_origin_hosts.iter().any(|h| host_name(h) == name)
}

/// The Origin rule of `/ws` and of every state-changing REST call. Allowed: no `Origin` (not
/// a browser); an origin of `allowed_origins`; and the server's own pages (Origin =
/// `http(s)://` + Host) **only** when that Host is a loopback name or one of
/// `same_origin_hosts`. Comparing against the request's own Host alone would let DNS
/// rebinding through (`Host: evil.example` with `Origin: http://evil.example`, the attacker's
/// page talking to a server its name now resolves to).
pub fn origin_allowed(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return true };
    if state.settings.allowed_origins.iter().any(|o| o == origin) {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let same = origin == format!("http://{host}") || origin == format!("https://{host}");
    if !same {
        return false;
    }
    let name = host_name(host);
    is_loopback(&name) || state.settings.same_origin_hosts.iter().any(|h| host_name(h) == name)
}

/// The caller of a request, from its `Authorization: Bearer` header.
pub fn caller(state: &AppState, headers: &HeaderMap) -> Caller {
    let Some(v) = headers.get(header::AUTHORIZATION) else { return Caller::Nobody };
    let Some(token) = v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) else {
        return Caller::Invalid("the Authorization header must be `Bearer <token>`".into());
    };
    match state.auth.authenticate(Some(token)) {
        Ok(id) => Caller::Known(id),
        Err(e) => Caller::Invalid(e.0),
    }
}

/// The value of the `{world}` segment of `path` under the route `pattern`, if it has one.
fn world_segment<'a>(pattern: &str, path: &'a str) -> Option<&'a str> {
    pattern.split('/').zip(path.split('/')).find(|(p, _)| *p == "{world}").map(|(_, v)| v)
}

fn refuse(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// True for a JSON content type (`application/json`, with or without parameters).
fn is_json(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        let t = v.split(';').next().unwrap_or("").trim();
        t.eq_ignore_ascii_case("application/json")
    })
}

/// The gate of every route (see the module doc), then the bounded body read of mutating calls.
pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    if !host_allowed(&state, req.headers()) {
        return refuse(StatusCode::FORBIDDEN, ErrorCode::Forbidden, "Host not allowed: add it to `same_origin_hosts`");
    }
    // No route matched: the router answers 404 and no handler runs.
    let Some(pattern) = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()) else { return next.run(req).await };
    let method = req.method().clone();
    // A method the route does not serve (the router answers 405), or a route without a rule:
    // judged as an admin call (deny by default).
    let rule = authz::rule_of_route(method.as_str(), &pattern).unwrap_or(authz::Rule::Admin);
    let mutating = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
    if mutating && !origin_allowed(&state, req.headers()) {
        return refuse(StatusCode::FORBIDDEN, ErrorCode::Forbidden, "Origin not allowed");
    }
    if rule == authz::Rule::Cluster {
        return cluster_gate(&state, req, next).await;
    }
    let caller = caller(&state, req.headers());
    let target = world_segment(&pattern, req.uri().path()).map(|name| authz::Target { name, visibility: state.registry.policy(name).visibility });
    let grant = match authz::decide(state.mode, &caller, rule, target) {
        Ok(g) => g,
        Err(d) => return refuse(StatusCode::from_u16(d.status).unwrap_or(StatusCode::FORBIDDEN), d.code, d.message),
    };
    req.extensions_mut().insert(grant);
    if !mutating {
        return next.run(req).await;
    }
    // A cross-site form posts url-encoded, multipart or plain text without a preflight, and
    // can set no Authorization header: a body needs a JSON type, or the call a token.
    let has_body = req.headers().get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0") || req.headers().contains_key(header::TRANSFER_ENCODING);
    if (has_body || req.headers().contains_key(header::CONTENT_TYPE)) && !is_json(req.headers()) && !req.headers().contains_key(header::AUTHORIZATION) {
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, ErrorCode::BadRequest, "a request body must be JSON (`Content-Type: application/json`)");
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

/// The gate of the server-to-server routes (a handoff's transfer): the cluster secret in
/// [`crate::handoff::SECRET_HEADER`], compared in constant time — none configured: 403 (handoff
/// disabled), none sent: 401, another: 403 — then the body, bounded by
/// `cluster.max_transfer_bytes` (413) and `limits.body_timeout_ms` (408).
async fn cluster_gate(state: &AppState, req: Request, next: Next) -> Response {
    let Some(secret) = state.settings.cluster.secret.as_deref() else {
        return refuse(StatusCode::FORBIDDEN, ErrorCode::Forbidden, "handoff is disabled on this server: it has no cluster secret (`cluster.secret`)");
    };
    let Some(given) = req.headers().get(crate::handoff::SECRET_HEADER) else {
        return refuse(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, format!("a server-to-server call needs the cluster secret in `{}`", crate::handoff::SECRET_HEADER));
    };
    if !given.to_str().is_ok_and(|g| crate::handoff::secret_matches(secret, g)) {
        return refuse(StatusCode::FORBIDDEN, ErrorCode::Forbidden, "wrong cluster secret");
    }
    let limit = usize::try_from(state.settings.cluster.max_transfer_bytes).unwrap_or(usize::MAX);
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let timeout = Duration::from_millis(state.settings.limits.body_timeout_ms.max(state.settings.cluster.transfer_timeout_ms));
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(timeout, http_body_util::BodyExt::collect(http_body_util::Limited::new(body, limit))).await {
        Err(_) => ApiError::new(StatusCode::REQUEST_TIMEOUT, ErrorCode::BadRequest, format!("request body not received within {} ms", timeout.as_millis())).into_response(),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => too_large(limit),
        Ok(Err(e)) => ApiError::bad_request(format!("reading the request body: {e}")).into_response(),
        Ok(Ok(collected)) => next.run(Request::from_parts(parts, Body::from(collected.to_bytes()))).await,
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
    fn host_names_and_loopback() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("LocalHost"), "localhost");
        assert_eq!(host_name("evil.example:1234"), "evil.example");
        assert!(is_loopback("127.0.0.1") && is_loopback("127.5.6.7") && is_loopback("::1") && is_loopback("localhost"));
        assert!(!is_loopback("evil.example") && !is_loopback("10.0.0.1") && !is_loopback("localhost.evil.example"));
    }

    #[test]
    fn world_segments_and_json_types() {
        assert_eq!(world_segment("/worlds/{world}/agents/{id}", "/worlds/demo/agents/3"), Some("demo"));
        assert_eq!(world_segment("/scenarios/{name}", "/scenarios/demo"), None);
        let mut h = HeaderMap::new();
        assert!(!is_json(&h));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("Application/JSON; charset=utf-8"));
        assert!(is_json(&h));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
        assert!(!is_json(&h));
    }

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
