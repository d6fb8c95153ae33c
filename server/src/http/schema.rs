//! Schemas of the REST bodies the handlers build with `json!` (documentation only: the OpenAPI
//! document, `openapi.rs`, lists them; the handlers name them in their `utoipa::path`).

use std::collections::BTreeMap;

use utoipa::{IntoResponses, ToSchema};

use crate::runtime::world::WorldInfoView;

/// The body of every REST error.
#[derive(ToSchema)]
#[schema(example = json!({"error": "unknown_world", "message": "no world named `nope`"}))]
pub struct ErrorBody {
    /// Stable error code (`bad_request`, `invalid_field`, `not_found`, `unknown_world`,
    /// `unknown_agent`, `unauthorized`, `forbidden`, `busy`, `too_large`, `internal`, …).
    pub error: String,
    /// Human message; names the offending field where there is one.
    pub message: String,
}

/// The world's tick after the call.
#[derive(ToSchema, serde::Serialize)]
pub struct Tick {
    /// Tick.
    pub tick: u64,
}

/// `POST /worlds/{world}/reset`: the tick, or the summary of a dead world that was restarted.
#[derive(ToSchema, serde::Serialize)]
#[serde(untagged)]
pub enum ResetAnswer {
    /// A live world was reset.
    Tick(Tick),
    /// A dead world was restarted (from its autosave if there is one).
    Restarted(Box<WorldInfoView>),
}

/// The id of an obstacle or wall.
#[derive(ToSchema)]
pub struct Id {
    /// Id.
    pub id: u32,
}

/// Ids of the obstacles placed.
#[derive(ToSchema)]
pub struct Ids {
    /// Ids (fewer than asked when the tries ran out).
    pub ids: Vec<u32>,
}

/// Ids of the agents spawned.
#[derive(ToSchema)]
pub struct Spawned {
    /// Agent ids.
    pub agents: Vec<u32>,
}

/// The agent whose behaviours were set.
#[derive(ToSchema)]
pub struct AgentRef {
    /// Agent id.
    pub agent: u32,
}

/// A kicked player and the agents it owned in the world.
#[derive(ToSchema)]
pub struct Kicked {
    /// Player id.
    pub player: String,
    /// Agents it owned there (now under the orphan policy).
    pub agents: usize,
}

/// An agent and its new owner.
#[derive(ToSchema)]
pub struct Owner {
    /// Agent id.
    pub agent: u32,
    /// Player id (`null`: nobody).
    pub player: Option<String>,
}

/// Success.
#[derive(ToSchema)]
pub struct OkBody {
    /// Always `true`.
    pub ok: bool,
}

/// A scenario loaded into a world.
#[derive(ToSchema)]
pub struct Loaded {
    /// The world's tick after loading.
    pub tick: u64,
    /// Scenario name.
    pub scenario: String,
}

/// A world saved as a scenario.
#[derive(ToSchema)]
pub struct Saved {
    /// Scenario name.
    pub scenario: String,
}

/// A scenario in the store.
#[derive(ToSchema)]
pub struct ScenarioEntry {
    /// Name.
    pub name: String,
    /// Saved (in the data dir) or shipped (read-only).
    pub origin: crate::store::Origin,
}

/// `GET /health`.
#[derive(ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` when a world is dead.
    pub status: String,
    /// Names of the dead worlds.
    pub dead_worlds: Vec<String>,
    /// Names of the worlds that cannot keep their tick rate (they still answer; they tick
    /// slower). They do not make the status `degraded`.
    pub overloaded_worlds: Vec<String>,
    /// Every world by name.
    pub worlds: BTreeMap<String, WorldHealth>,
    /// `dev` (no player key: clients without a token are anonymous players) or `jwt` (player
    /// tokens required).
    pub auth: String,
    /// Player sessions held (live, and dropped ones still resumable).
    pub sessions: usize,
}

/// One world in `GET /health`.
#[derive(ToSchema)]
pub struct WorldHealth {
    /// Whether its thread runs.
    pub alive: bool,
    /// Its tick.
    pub tick: u64,
    /// Its nominal tick rate.
    pub tick_rate: f64,
    /// Ticks per second it actually ran over the last second.
    pub effective_tick_rate: f64,
    /// It dropped ticks in the last second: its tick takes longer than its period.
    pub overloaded: bool,
    /// Why it died.
    pub error: Option<String>,
}

// Error responses shared by many operations.

/// Errors of a call that needs the admin token.
#[derive(IntoResponses)]
pub enum AdminErrors {
    /// The server has an admin token and the call sent none (`unauthorized`).
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Wrong admin token, or the actor may not do this (`forbidden`).
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// Errors of a call with a JSON body.
#[derive(IntoResponses)]
pub enum BodyErrors {
    /// Malformed JSON or a bad name (`bad_request`).
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// Body larger than the limit (`too_large`).
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// No `Content-Type: application/json` (`bad_request`).
    #[response(status = 415)]
    UnsupportedMediaType(ErrorBody),
    /// A field is missing, unknown or out of range (`invalid_field`).
    #[response(status = 422)]
    Invalid(ErrorBody),
}

/// Errors of a call on one world.
#[derive(IntoResponses)]
pub enum WorldErrors {
    /// A path or query parameter that does not parse (e.g. a negative id) (`bad_request`).
    #[response(status = 400)]
    BadParameter(ErrorBody),
    /// No such world (`unknown_world`), agent (`unknown_agent`) or obstacle/wall (`not_found`).
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The world's command queue is full, or its thread is dead (`busy`, `internal`).
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

