//! Operations: `/health`, `/metrics`, and the admin-only fault injection under `/debug`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use super::common::*;
use crate::http::state::AppState;
use crate::http::error::ApiError;
use crate::http::schema as doc;

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
    let mut not_durable = Vec::new();
    for w in state.registry.list() {
        if let Some((st, policy)) = &w.durable {
            let v = st.view(*policy);
            if !v.durable && w.alive() {
                not_durable.push(w.name.clone());
            }
            if let Some(e) = worlds.get_mut(&w.name) {
                e["durable"] = json!(v.durable);
                e["durable_tick"] = json!(v.durable_tick);
                e["persistence_error"] = json!(v.error);
            }
        }
    }
    let status = if dead.is_empty() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut body = json!({"status": if dead.is_empty() { "ok" } else { "degraded" }, "dead_worlds": dead, "overloaded_worlds": overloaded, "worlds": worlds, "auth": state.mode.name(), "sessions": state.registry.players.sessions(),
        "not_durable_worlds": not_durable, "failed_recoveries": state.registry.failed_recoveries()});
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
    let (mut not_durable, mut backlog) = (0i64, 0i64);
    for w in &worlds {
        if let Some((st, policy)) = &w.durable {
            let v = st.view(*policy);
            not_durable += i64::from(!v.durable && w.alive());
            backlog += v.backlog_bytes as i64;
        }
    }
    state.metrics.worlds_not_durable.set(not_durable);
    state.metrics.persist_backlog_bytes.set(backlog);
    state.metrics.worlds_failed_recovery.set(state.registry.failed_recoveries().len() as i64);
    state.metrics.set_worlds(worlds.iter().map(|w| (w.name.as_str(), w.effective_tick_rate(), w.alive() && w.overloaded())));
    ([(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render()).into_response()
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

/// `POST /debug/stall` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StallBody {
    /// The world whose thread blocks.
    pub world: String,
    /// How long, milliseconds (at most `MAX_STALL_MS`).
    #[schema(minimum = 1, maximum = 10000)]
    pub millis: u64,
}

/// The longest stall `POST /debug/stall` asks for, milliseconds.
pub const MAX_STALL_MS: u64 = 10_000;

/// `POST /debug/stall`: fault injection for the reliability suite (docs/reliability.md, test 9):
/// the world's thread blocks for `millis` (or until `POST /debug/stall/release`), serving no tick
/// and no request, so its queue fills and further calls are answered `busy`. Served only when the server runs with
/// `fault_injection` (`--fault-injection`); 404 otherwise.
#[utoipa::path(post, path = "/debug/stall", tag = "ops", security(("bearer" = [])),
    request_body = StallBody,
    responses((status = 202, description = "The world thread blocks (answered once it does)", body = doc::OkBody),
        (status = 404, description = "Fault injection is off (the default), or no such world", body = doc::ErrorBody),
        doc::AdminErrors, doc::BodyErrors,
        (status = 503, description = "The world's queue is full or its thread is dead", body = doc::ErrorBody)))]
pub async fn debug_stall(State(state): State<AppState>, body: Body<StallBody>) -> ApiResult {
    if !state.settings.fault_injection {
        return Err(ApiError::not_found("no route /debug/stall (fault injection is off)"));
    }
    let Json(b) = body?;
    if b.millis == 0 || b.millis > MAX_STALL_MS {
        return Err(ApiError::invalid(format!("millis: must be between 1 and {MAX_STALL_MS} (got {})", b.millis)));
    }
    world(&state, &b.world)?.inject_stall(std::time::Duration::from_millis(b.millis)).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"ok": true}))).into_response())
}

/// `POST /debug/stall/release` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StallReleaseBody {
    /// The world whose stall ends.
    pub world: String,
}

/// `POST /debug/stall/release`: fault injection for the reliability suite (docs/reliability.md,
/// test 9): ends the world thread's stall (`POST /debug/stall`) now, or the next one at once, so
/// that the test, not a timer, decides how long the queue stays full. Served only when the
/// server runs with `fault_injection` (`--fault-injection`); 404 otherwise.
#[utoipa::path(post, path = "/debug/stall/release", tag = "ops", security(("bearer" = [])),
    request_body = StallReleaseBody,
    responses((status = 202, description = "The stall was ended", body = doc::OkBody),
        (status = 404, description = "Fault injection is off (the default), or no such world", body = doc::ErrorBody),
        doc::AdminErrors, doc::BodyErrors))]
pub async fn debug_stall_release(State(state): State<AppState>, body: Body<StallReleaseBody>) -> ApiResult {
    if !state.settings.fault_injection {
        return Err(ApiError::not_found("no route /debug/stall/release (fault injection is off)"));
    }
    let Json(b) = body?;
    world(&state, &b.world)?.release_stall();
    Ok((StatusCode::ACCEPTED, Json(json!({"ok": true}))).into_response())
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
