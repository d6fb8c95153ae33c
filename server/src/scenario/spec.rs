//! The scenario file's JSON types. Points, limits and behaviours are `steer_proto`'s own wire
//! types, so a scenario writes them exactly as REST and WebSocket do (PROTOCOL.md §4); what is
//! here exists only in scenarios (bounds, groups, spawn shapes, bindings, orders, settings).

use serde::{Deserialize, Serialize};
use steer_proto::{BehaviorEntry, Limits, Point, ReciprocalAvoidance, SpawnArea};

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name.
    #[serde(default)]
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// World bounds.
    pub bounds: BoundsSpec,
    /// Edge rule: `clamp`, `wrap` or `bounce`.
    #[serde(default)]
    pub edge: EdgeSpec,
    /// Ticks per second.
    #[serde(default = "default_tick_rate")]
    pub tick_rate: f32,
    /// Seed of the world's random numbers.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Keep agents out of obstacles and walls in the integrator (default true).
    #[serde(default = "default_true")]
    pub solid_obstacles: bool,
    /// Push apart agents that would overlap after a step, in the integrator (default true).
    #[serde(default = "default_true")]
    pub solid_agents: bool,
    /// How MoveTo orders avoid other agents: `{"reciprocal": {…}}` (the default, with the
    /// defaults of the `reciprocal_avoidance` behaviour) or `"context"` (004's context
    /// avoidance and separation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_to_avoidance: Option<MoveToAvoidanceSpec>,
    /// How `--agents` scales the scenario: `density` (default: coordinates × √k, so the agents'
    /// density stays) or `spacing` (coordinates × k, so the spacing along rings and lines stays).
    #[serde(default)]
    pub scaling: ScalingSpec,
    /// Agent grid cell size (default: the largest neighbour radius).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_cell_size: Option<f32>,
    /// Obstacles.
    #[serde(default)]
    pub obstacles: Vec<ObstacleSpec>,
    /// Obstacles placed at random without overlap (001 `CreateObstacles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_obstacles: Option<RandomObstacles>,
    /// Walls.
    #[serde(default)]
    pub walls: Vec<WallSpec>,
    /// Agent groups, spawned in order.
    #[serde(default)]
    pub groups: Vec<GroupSpec>,
    /// Navigation grid cell size for MoveTo (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nav_cell_size: Option<f32>,
    /// Distance MoveTo navigation keeps from obstacles (default 0.75).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nav_clearance: Option<f32>,
    /// Most flow fields cached (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_cache_capacity: Option<usize>,
    /// Most flow fields requested per tick (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_builds_per_tick: Option<usize>,
    /// Ticks from requesting a flow field to using it; a server builds it in the background
    /// meanwhile (default 2; 0 = built within the tick).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_build_ticks: Option<u32>,
    /// Nav cells of flow fields requested per tick on average (default 50000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_build_cells_per_tick: Option<u32>,
    /// A MoveTo goal all of whose agents (at most this many) see it gets no flow field
    /// (default 32; 0 = always a field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub straight_line_max_agents: Option<u32>,
    /// MoveTo's reciprocal avoidance: an agent with nothing to avoid plans on one tick in this
    /// many, staggered by id (default 5; 1 = every tick; at most 20; see
    /// `MoveToParams::replan_every_ticks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replan_every_ticks: Option<u32>,
    /// MoveTo orders issued to whole groups at given ticks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<OrderSpec>,
    /// A server records the world from its start (see `server/RECORDING.md`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recording: bool,
}

/// How MoveTo orders avoid other agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MoveToAvoidanceSpec {
    /// Reciprocal avoidance with the parameters of the `reciprocal_avoidance` behaviour
    /// (every field optional, with that behaviour's defaults).
    Reciprocal(ReciprocalAvoidance),
    /// 004's context avoidance and separation.
    Context,
}

/// How `--agents` scales a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScalingSpec {
    /// Coordinates × √k: the same density of agents.
    #[default]
    Density,
    /// Coordinates × k: the same spacing along rings and lines (RVO2's Circle).
    Spacing,
}

/// A MoveTo order for every agent of a group, issued before tick `at_tick` runs: one order for
/// the group to `target` (they stop in a formation round it), or, with `antipode_of`, one order
/// per agent to its own point mirrored through that centre (each stops there alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderSpec {
    /// Tick before which the order is issued (0 = when the world is built).
    #[serde(default)]
    pub at_tick: u64,
    /// Group whose agents are ordered.
    pub group: String,
    /// Where to go (the whole group together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Point>,
    /// Each agent on its own to its position mirrored through this centre.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub antipode_of: Option<Point>,
    /// Stopping distance (default 1).
    #[serde(default = "one")]
    pub stopping_distance: f32,
}

fn default_tick_rate() -> f32 {
    20.0
}
fn default_seed() -> u64 {
    1
}
fn default_true() -> bool {
    true
}
fn one() -> f32 {
    1.0
}

/// Bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BoundsSpec {
    /// Lower-left corner.
    pub min: Point,
    /// Upper-right corner.
    pub max: Point,
}

/// Edge rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EdgeSpec {
    /// Stop at the edge.
    #[default]
    Clamp,
    /// Re-enter on the other side.
    Wrap,
    /// Reflect.
    Bounce,
}

/// A circular obstacle.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ObstacleSpec {
    /// Centre.
    pub center: Point,
    /// Radius.
    pub radius: f32,
}

/// A wall segment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WallSpec {
    /// Start.
    pub a: Point,
    /// End.
    pub b: Point,
}

/// Random non-overlapping obstacles (001): radius uniform in [min_radius, max_radius], at least
/// `border` from the bounds and `min_gap` between obstacles, up to 2000 tries each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RandomObstacles {
    /// How many to place (fewer if the tries run out).
    #[schema(maximum = 10000)]
    pub count: usize,
    /// Smallest radius.
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub min_radius: f32,
    /// Largest radius.
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub max_radius: f32,
    /// Least gap between obstacles (default 20).
    #[serde(default = "default_gap")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub min_gap: f32,
    /// Least distance from the bounds (default 10).
    #[serde(default = "default_border")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub border: f32,
    /// Seed of the placement (default: the scenario's seed).
    // A u64: `int64` would tell clients (and schemathesis) the top is 2^63 - 1.
    #[serde(default)]
    #[schema(format = "uint64", minimum = 0)]
    pub seed: Option<u64>,
    /// Keep this area free of obstacles (e.g. a spawn zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_clear: Option<BoundsSpec>,
}

fn default_gap() -> f32 {
    20.0
}
fn default_border() -> f32 {
    10.0
}

/// A group of agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Group name.
    pub name: String,
    /// Number of agents (ignored for `points`: one agent per point).
    #[serde(default)]
    pub count: usize,
    /// Where they spawn, written as in a `spawn` message (PROTOCOL.md §4).
    pub area: SpawnArea,
    /// With a `rect` area: the agents stand on a lattice filling it (as many columns as the
    /// rectangle's shape gives for `count`, row after row from the lower-left corner) instead
    /// of at random: a dense formation, as an army or a block of pedestrians is drawn up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lattice: bool,
    /// Limits, as in a `spawn` message (absent fields: 000's max speed 5, max accel 10, …).
    #[serde(default)]
    pub limits: Limits,
    /// Per-agent target binding.
    #[serde(default)]
    pub binding: BindingSpec,
    /// Initial speed along the initial orientation.
    #[serde(default)]
    pub initial_speed: f32,
    /// Initial orientation, radians (default random; ring spawns face the centre).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orientation: Option<f32>,
    /// Behaviours, written as in a `set_behaviors` message (PROTOCOL.md §4).
    #[serde(default)]
    pub behaviors: Vec<BehaviorEntry>,
}

/// Per-agent target binding.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BindingSpec {
    /// Targets as written.
    #[default]
    AsGiven,
    /// Point targets become the spawn point mirrored through `center`.
    Antipode { center: Point },
    /// Agent targets become member i mod n of the named group (spawned earlier).
    GroupMember { group: String },
}
