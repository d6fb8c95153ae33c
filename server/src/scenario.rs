//! JSON scenarios: world settings, obstacles, walls and agent groups with their behaviours.
//!
//! This module is the only place where scenario JSON meets the simulation: it deserializes
//! (with the failing field's path in every error), then builds a [`World`] through the sim's
//! validating API (whose errors are prefixed with the path of the group or object).

use glam::Vec2;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::sim::agent::{Limits, PathMode};
use crate::sim::behaviors::{
    Behavior, BehaviorEntry, Target, agent_avoidance, reciprocal_avoidance, ahead_avoidance, align, alignment, arrive, cohesion, evade, face, flee,
    leader_following, look_where_you_are_going, obstacle_avoidance, path_following, pursue, random_target, seek, separation, velocity_match, wall_avoidance,
    wander,
};
use crate::sim::behaviors::move_to::MoveToParams;
use crate::sim::error::SimError;
use crate::sim::rng::Rng;
use crate::sim::view::Bounds;
use crate::sim::world::{EdgeRule, SpawnArea, SpawnSpec, TargetBinding, World, WorldConfig};

/// Largest scenario file accepted, bytes.
pub const MAX_SCENARIO_BYTES: usize = 16 << 20;

/// Why a scenario could not be loaded.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The JSON is malformed or a field has the wrong type; `path` is the field's path.
    #[error("scenario field `{path}`: {message}")]
    Parse { path: String, message: String },
    /// A value is out of range; the message names the field's path.
    #[error("scenario {0}")]
    Invalid(#[from] SimError),
    /// The file is too large.
    #[error("scenario is larger than {MAX_SCENARIO_BYTES} bytes")]
    TooLarge,
    /// The file could not be read.
    #[error("cannot read scenario {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// A 2-D point or vector in JSON: `{"x": 1, "y": 2}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct P {
    /// x (magnitude at most 1e6).
    #[schema(minimum = -1000000, maximum = 1000000)]
    pub x: f32,
    /// y (magnitude at most 1e6).
    #[schema(minimum = -1000000, maximum = 1000000)]
    pub y: f32,
}

impl From<P> for Vec2 {
    fn from(p: P) -> Vec2 {
        Vec2::new(p.x, p.y)
    }
}

impl From<Vec2> for P {
    fn from(v: Vec2) -> P {
        P { x: v.x, y: v.y }
    }
}

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
    /// MoveTo orders issued to whole groups at given ticks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<OrderSpec>,
    /// A server records the world from its start (see `server/RECORDING.md`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recording: bool,
}

/// How MoveTo orders avoid other agents.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MoveToAvoidanceSpec {
    /// Reciprocal avoidance with these parameters.
    Reciprocal(ReciprocalSpec),
    /// 004's context avoidance and separation.
    Context,
}

/// Parameters of reciprocal avoidance (every field optional, defaults as the behaviour's).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReciprocalSpec {
    /// Seconds ahead within which no neighbour may be touched (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_horizon: Option<f32>,
    /// Seconds ahead within which no obstacle or wall may be touched (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obstacle_time_horizon: Option<f32>,
    /// Neighbours further than this are ignored (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbor_dist: Option<f32>,
    /// Nearest neighbours considered (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_neighbors: Option<u32>,
}

impl ReciprocalSpec {
    /// The sim parameters (validated later by the sim).
    pub fn to_sim(self) -> reciprocal_avoidance::ReciprocalAvoidanceParams {
        let d = reciprocal_avoidance::ReciprocalAvoidanceParams::default();
        reciprocal_avoidance::ReciprocalAvoidanceParams {
            time_horizon: self.time_horizon.unwrap_or(d.time_horizon),
            obstacle_time_horizon: self.obstacle_time_horizon.unwrap_or(d.obstacle_time_horizon),
            neighbor_dist: self.neighbor_dist.unwrap_or(d.neighbor_dist),
            max_neighbors: self.max_neighbors.unwrap_or(d.max_neighbors),
        }
    }
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
    pub target: Option<P>,
    /// Each agent on its own to its position mirrored through this centre.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub antipode_of: Option<P>,
    /// Stopping distance (default 1).
    #[serde(default = "one")]
    pub stopping_distance: f32,
}

/// Path mode of path following.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PathModeSpec {
    /// Stop at the end.
    #[default]
    Once,
    /// Start over.
    Loop,
    /// Walk back and forth.
    PingPong,
}

fn d_behind() -> f32 {
    2.0
}
fn d_sight() -> f32 {
    3.0
}
fn d_follow_sep() -> f32 {
    1.5
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
    pub min: P,
    /// Upper-right corner.
    pub max: P,
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
    pub center: P,
    /// Radius.
    pub radius: f32,
}

/// A wall segment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WallSpec {
    /// Start.
    pub a: P,
    /// End.
    pub b: P,
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

/// Tries per obstacle before giving up (001).
pub const PLACEMENT_TRIES: usize = 2000;

/// Places obstacles at random without overlap (001 `CreateObstacles`); returns (centre, radius).
pub fn place_random_obstacles(
    bounds: Bounds,
    spec: &RandomObstacles,
    existing: &[(Vec2, f32)],
    seed: u64,
) -> Result<Vec<(Vec2, f32)>, SimError> {
    use crate::sim::error::{check_non_negative, check_positive};
    check_positive("min_radius", spec.min_radius)?;
    check_positive("max_radius", spec.max_radius)?;
    check_non_negative("min_gap", spec.min_gap)?;
    check_non_negative("border", spec.border)?;
    if spec.max_radius < spec.min_radius {
        return Err(SimError::invalid("max_radius", "must be >= min_radius"));
    }
    if spec.count > 10_000 {
        return Err(SimError::invalid("count", "must be at most 10000"));
    }
    if let Some(k) = spec.keep_clear {
        let kmin = crate::sim::error::check_vec("keep_clear.min", k.min.into())?;
        let kmax = crate::sim::error::check_vec("keep_clear.max", k.max.into())?;
        if kmin.x > kmax.x || kmin.y > kmax.y {
            return Err(SimError::invalid("keep_clear", "min must be <= max on both axes"));
        }
    }
    let mut rng = Rng::new(spec.seed.unwrap_or(seed));
    let mut placed: Vec<(Vec2, f32)> = existing.to_vec();
    let mut out = Vec::new();
    'each: for _ in 0..spec.count {
        for _ in 0..PLACEMENT_TRIES {
            let r = rng.range(spec.min_radius, spec.max_radius);
            let lo = bounds.min + Vec2::splat(r + spec.border);
            let hi = bounds.max - Vec2::splat(r + spec.border);
            if hi.x < lo.x || hi.y < lo.y {
                return Ok(out);
            }
            let c = Vec2::new(rng.range(lo.x, hi.x), rng.range(lo.y, hi.y));
            if let Some(k) = spec.keep_clear {
                let (kmin, kmax): (Vec2, Vec2) = (k.min.into(), k.max.into());
                let near = c.clamp(kmin, kmax);
                if near.distance(c) < r {
                    continue;
                }
            }
            // 001 `Overlapped`: circles (c, r + gap) and (other, other r) must not meet.
            if placed.iter().all(|&(o, orad)| o.distance(c) > r + spec.min_gap + orad) {
                placed.push((c, r));
                out.push((c, r));
                continue 'each;
            }
        }
        break;
    }
    Ok(out)
}

/// A group of agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Group name.
    pub name: String,
    /// Number of agents (ignored for `points`).
    #[serde(default)]
    pub count: usize,
    /// Where they spawn.
    pub area: AreaSpec,
    /// Limits (defaults: 000's max speed 5, max accel 10).
    #[serde(default)]
    pub limits: LimitsSpec,
    /// Per-agent target binding.
    #[serde(default)]
    pub binding: BindingSpec,
    /// Initial speed along the initial orientation.
    #[serde(default)]
    pub initial_speed: f32,
    /// Initial orientation, radians (default random; ring spawns face the centre).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orientation: Option<f32>,
    /// Behaviours.
    #[serde(default)]
    pub behaviors: Vec<EntrySpec>,
}

/// Spawn area.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AreaSpec {
    /// Uniform in a rectangle.
    Rect { min: P, max: P },
    /// Uniform in a disc.
    Disc { center: P, radius: f32 },
    /// Evenly on a circle.
    Ring { center: P, radius: f32 },
    /// At these points.
    Points(Vec<P>),
}

/// Agent limits; every field optional.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_speed: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_accel: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rotation: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_angular_accel: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mass: Option<f32>,
}

impl LimitsSpec {
    /// The limits with defaults filled in (not yet validated).
    pub fn to_limits(&self) -> Limits {
        let d = Limits::default();
        Limits {
            max_speed: self.max_speed.unwrap_or(d.max_speed),
            max_accel: self.max_accel.unwrap_or(d.max_accel),
            max_rotation: self.max_rotation.unwrap_or(d.max_rotation),
            max_angular_accel: self.max_angular_accel.unwrap_or(d.max_angular_accel),
            radius: self.radius.unwrap_or(d.radius),
            mass: self.mass.unwrap_or(d.mass),
        }
    }
}

/// Per-agent target binding.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BindingSpec {
    /// Targets as written.
    #[default]
    AsGiven,
    /// Point targets become the spawn point mirrored through `center`.
    Antipode { center: P },
    /// Agent targets become member i mod n of the named group (spawned earlier).
    GroupMember { group: String },
}

/// A target: a point `{"x":..,"y":..}` or an agent `{"agent": id}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum TargetSpec {
    /// A point.
    Point(P),
    /// An agent id.
    Agent {
        /// Agent id.
        agent: u32,
    },
}

impl From<TargetSpec> for Target {
    fn from(t: TargetSpec) -> Target {
        match t {
            TargetSpec::Point(p) => Target::Point(p.into()),
            TargetSpec::Agent { agent } => Target::Agent(agent),
        }
    }
}

/// A behaviour entry: `{"behavior": {"type": "seek", ...}, "weight": 1, "priority": 0}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntrySpec {
    /// The behaviour and its parameters.
    pub behavior: BehaviorSpec,
    /// Blend weight (default 1).
    #[serde(default = "one")]
    pub weight: f32,
    /// Priority group, lower first (default 0).
    #[serde(default)]
    pub priority: u8,
}

/// Align tuning with defaults. Only ever flattened into a [`BehaviorSpec`] variant, whose
/// `deny_unknown_fields` refuses what neither claims; denying here too would make its OpenAPI
/// schema (`additionalProperties: false` beside the variant's own fields in an `allOf`) refuse
/// every `align`, `face` and `look_where_you_are_going` behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlignTuningSpec {
    #[serde(default = "d_align_target_radius")]
    pub target_radius: f32,
    #[serde(default = "d_align_slow_radius")]
    pub slow_radius: f32,
    #[serde(default = "d_align_time")]
    pub time_to_target: f32,
}

impl Default for AlignTuningSpec {
    fn default() -> Self {
        AlignTuningSpec { target_radius: 0.1, slow_radius: 0.5, time_to_target: 0.1 }
    }
}

fn d_align_target_radius() -> f32 {
    0.1
}
fn d_align_slow_radius() -> f32 {
    0.5
}
fn d_align_time() -> f32 {
    0.1
}
fn d_panic() -> f32 {
    10.0
}
fn d_prediction() -> f32 {
    5.0
}
fn d_arrive_target_radius() -> f32 {
    1.0
}
fn d_arrive_slow_radius() -> f32 {
    5.0
}
fn d_arrive_time() -> f32 {
    0.25
}
fn d_wander_offset() -> f32 {
    1.5
}
fn d_wander_rate() -> f32 {
    0.5
}
fn d_rt_radius() -> f32 {
    10.0
}
fn d_rt_min() -> f32 {
    1.0
}
fn d_rt_max() -> f32 {
    2.0
}
fn d_braking() -> f32 {
    0.6
}
fn d_ahead_len() -> f32 {
    4.0
}
fn d_avoid_force() -> f32 {
    0.4
}
fn d_wall_look() -> f32 {
    5.0
}
fn d_wall_dist() -> f32 {
    3.0
}
fn d_agent_look() -> f32 {
    3.0
}
fn d_avoid_radius() -> f32 {
    2.0
}
fn d_neighbor_radius() -> f32 {
    3.0
}

/// Wander variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WanderVariantSpec {
    #[default]
    Millington,
    Circle,
}

/// Align target: an orientation (radians) or `{"agent": id}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum AlignTargetSpec {
    Orientation(f32),
    Agent { agent: u32 },
}

/// Every behaviour of the catalogue with its parameters (defaults from BEHAVIORS.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum BehaviorSpec {
    Seek {
        target: TargetSpec,
    },
    Flee {
        target: TargetSpec,
        #[serde(default = "d_panic")]
        panic_distance: f32,
    },
    Arrive {
        target: TargetSpec,
        #[serde(default = "d_arrive_target_radius")]
        target_radius: f32,
        #[serde(default = "d_arrive_slow_radius")]
        slow_radius: f32,
        #[serde(default = "d_arrive_time")]
        time_to_target: f32,
    },
    Pursue {
        target: u32,
        #[serde(default = "d_prediction")]
        max_prediction: f32,
    },
    Evade {
        target: u32,
        #[serde(default = "d_panic")]
        panic_distance: f32,
        #[serde(default = "d_prediction")]
        max_prediction: f32,
    },
    Align {
        target: AlignTargetSpec,
        #[serde(default, flatten)]
        tuning: AlignTuningSpec,
    },
    Face {
        target: TargetSpec,
        #[serde(default, flatten)]
        tuning: AlignTuningSpec,
    },
    LookWhereYouAreGoing {
        #[serde(default, flatten)]
        tuning: AlignTuningSpec,
    },
    VelocityMatch {
        target: u32,
        #[serde(default = "d_align_time")]
        time_to_target: f32,
    },
    Wander {
        #[serde(default)]
        variant: WanderVariantSpec,
        #[serde(default = "d_wander_offset")]
        wander_offset: f32,
        #[serde(default = "one")]
        wander_radius: f32,
        #[serde(default = "d_wander_rate")]
        wander_rate: f32,
    },
    RandomTarget {
        #[serde(default = "d_rt_radius")]
        radius: f32,
        #[serde(default)]
        center: Option<P>,
        #[serde(default = "d_rt_min")]
        interval_min: f32,
        #[serde(default = "d_rt_max")]
        interval_max: f32,
    },
    ObstacleAvoidance {
        #[serde(default)]
        min_box_length: Option<f32>,
        #[serde(default = "d_braking")]
        braking_weight: f32,
        #[serde(default = "one")]
        lateral_base: f32,
    },
    AheadAvoidance {
        #[serde(default = "d_ahead_len")]
        ahead_len: f32,
        #[serde(default = "d_avoid_force")]
        max_avoid_force: f32,
        #[serde(default)]
        margin: f32,
    },
    WallAvoidance {
        #[serde(default = "d_wall_look")]
        look_ahead: f32,
        #[serde(default = "d_wall_dist")]
        avoid_distance: f32,
    },
    AgentAvoidance {
        #[serde(default = "d_agent_look")]
        look_ahead: f32,
        #[serde(default = "d_avoid_radius")]
        avoid_radius: f32,
    },
    Separation {
        #[serde(default = "d_neighbor_radius")]
        neighbor_radius: f32,
    },
    Cohesion {
        #[serde(default = "d_neighbor_radius")]
        neighbor_radius: f32,
    },
    Alignment {
        #[serde(default = "d_neighbor_radius")]
        neighbor_radius: f32,
        #[serde(default = "d_align_time")]
        time_to_target: f32,
    },
    PathFollowing {
        waypoints: Vec<P>,
        #[serde(default = "one")]
        path_radius: f32,
        #[serde(default)]
        mode: PathModeSpec,
    },
    LeaderFollowing {
        leader: u32,
        #[serde(default = "d_behind")]
        behind_distance: f32,
        #[serde(default = "d_sight")]
        leader_sight_radius: f32,
        #[serde(default = "d_follow_sep")]
        separation_radius: f32,
        #[serde(default = "one")]
        separation_weight: f32,
    },
    ReciprocalAvoidance {
        #[serde(default)]
        time_horizon: Option<f32>,
        #[serde(default)]
        obstacle_time_horizon: Option<f32>,
        #[serde(default)]
        neighbor_dist: Option<f32>,
        #[serde(default)]
        max_neighbors: Option<u32>,
    },
}

impl AlignTuningSpec {
    fn to_sim(self) -> align::AlignTuning {
        align::AlignTuning { target_radius: self.target_radius, slow_radius: self.slow_radius, time_to_target: self.time_to_target }
    }
}

impl BehaviorSpec {
    /// The sim behaviour (validated later by the sim).
    pub fn to_sim(&self) -> Behavior {
        match *self {
            BehaviorSpec::Seek { target } => Behavior::Seek(seek::SeekParams { target: target.into() }),
            BehaviorSpec::Flee { target, panic_distance } => Behavior::Flee(flee::FleeParams { target: target.into(), panic_distance }),
            BehaviorSpec::Arrive { target, target_radius, slow_radius, time_to_target } => Behavior::Arrive(arrive::ArriveParams {
                target: target.into(),
                tuning: arrive::ArriveTuning { target_radius, slow_radius, time_to_target },
            }),
            BehaviorSpec::Pursue { target, max_prediction } => Behavior::Pursue(pursue::PursueParams { target, max_prediction }),
            BehaviorSpec::Evade { target, panic_distance, max_prediction } => {
                Behavior::Evade(evade::EvadeParams { target, panic_distance, max_prediction })
            }
            BehaviorSpec::Align { target, tuning } => Behavior::Align(align::AlignParams {
                target: match target {
                    AlignTargetSpec::Orientation(o) => align::AlignTarget::Orientation(o),
                    AlignTargetSpec::Agent { agent } => align::AlignTarget::Agent(agent),
                },
                tuning: tuning.to_sim(),
            }),
            BehaviorSpec::Face { target, tuning } => Behavior::Face(face::FaceParams { target: target.into(), tuning: tuning.to_sim() }),
            BehaviorSpec::LookWhereYouAreGoing { tuning } => {
                Behavior::LookWhereYouAreGoing(look_where_you_are_going::LookParams { tuning: tuning.to_sim() })
            }
            BehaviorSpec::VelocityMatch { target, time_to_target } => {
                Behavior::VelocityMatch(velocity_match::VelocityMatchParams { target, time_to_target })
            }
            BehaviorSpec::Wander { variant, wander_offset, wander_radius, wander_rate } => Behavior::Wander(wander::WanderParams {
                variant: match variant {
                    WanderVariantSpec::Millington => wander::WanderVariant::Millington,
                    WanderVariantSpec::Circle => wander::WanderVariant::Circle,
                },
                wander_offset,
                wander_radius,
                wander_rate,
            }),
            BehaviorSpec::RandomTarget { radius, center, interval_min, interval_max } => {
                Behavior::RandomTarget(random_target::RandomTargetParams {
                    radius,
                    center: center.map(Vec2::from),
                    interval_min,
                    interval_max,
                    ..random_target::RandomTargetParams::default()
                })
            }
            BehaviorSpec::ObstacleAvoidance { min_box_length, braking_weight, lateral_base } => {
                Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams { min_box_length, braking_weight, lateral_base })
            }
            BehaviorSpec::AheadAvoidance { ahead_len, max_avoid_force, margin } => {
                Behavior::AheadAvoidance(ahead_avoidance::AheadAvoidanceParams { ahead_len, max_avoid_force, margin })
            }
            BehaviorSpec::WallAvoidance { look_ahead, avoid_distance } => {
                Behavior::WallAvoidance(wall_avoidance::WallAvoidanceParams { look_ahead, avoid_distance })
            }
            BehaviorSpec::AgentAvoidance { look_ahead, avoid_radius } => {
                Behavior::AgentAvoidance(agent_avoidance::AgentAvoidanceParams { look_ahead, avoid_radius })
            }
            BehaviorSpec::Separation { neighbor_radius } => Behavior::Separation(separation::SeparationParams { neighbor_radius }),
            BehaviorSpec::Cohesion { neighbor_radius } => Behavior::Cohesion(cohesion::CohesionParams { neighbor_radius }),
            BehaviorSpec::Alignment { neighbor_radius, time_to_target } => {
                Behavior::Alignment(alignment::AlignmentParams { neighbor_radius, time_to_target })
            }
            BehaviorSpec::PathFollowing { ref waypoints, path_radius, mode } => {
                Behavior::PathFollowing(path_following::PathFollowingParams {
                    waypoints: waypoints.iter().map(|&p| p.into()).collect(),
                    path_radius,
                    mode: match mode {
                        PathModeSpec::Once => PathMode::Once,
                        PathModeSpec::Loop => PathMode::Loop,
                        PathModeSpec::PingPong => PathMode::PingPong,
                    },
                })
            }
            BehaviorSpec::LeaderFollowing { leader, behind_distance, leader_sight_radius, separation_radius, separation_weight } => {
                Behavior::LeaderFollowing(leader_following::LeaderFollowingParams {
                    leader,
                    behind_distance,
                    leader_sight_radius,
                    separation_radius,
                    separation_weight,
                    ..leader_following::LeaderFollowingParams::default()
                })
            }
            BehaviorSpec::ReciprocalAvoidance { time_horizon, obstacle_time_horizon, neighbor_dist, max_neighbors } => {
                Behavior::ReciprocalAvoidance(ReciprocalSpec { time_horizon, obstacle_time_horizon, neighbor_dist, max_neighbors }.to_sim())
            }
        }
    }
}

impl EntrySpec {
    /// The sim entry.
    pub fn to_sim(&self) -> BehaviorEntry {
        BehaviorEntry { behavior: self.behavior.to_sim(), weight: self.weight, priority: self.priority }
    }
}

impl Scenario {
    /// Parses JSON; a bad field's path is in the error.
    pub fn from_json(text: &str) -> Result<Self, ScenarioError> {
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(ScenarioError::TooLarge);
        }
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            ScenarioError::Parse { path, message: e.into_inner().to_string() }
        })
    }

    /// Reads and parses a file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ScenarioError> {
        let io = |source| ScenarioError::Io { path: path.display().to_string(), source };
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.len() > MAX_SCENARIO_BYTES as u64 {
            return Err(ScenarioError::TooLarge);
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Scenario::from_json(&text)
    }

    /// The world settings.
    pub fn world_config(&self) -> WorldConfig {
        let d = WorldConfig::default();
        WorldConfig {
            bounds: Bounds { min: self.bounds.min.into(), max: self.bounds.max.into() },
            edge: match self.edge {
                EdgeSpec::Clamp => EdgeRule::Clamp,
                EdgeSpec::Wrap => EdgeRule::Wrap,
                EdgeSpec::Bounce => EdgeRule::Bounce,
            },
            tick_rate: self.tick_rate,
            seed: self.seed,
            agent_cell_size: self.agent_cell_size,
            solid_obstacles: self.solid_obstacles,
            solid_agents: self.solid_agents,
            nav_cell_size: self.nav_cell_size.unwrap_or(d.nav_cell_size),
            nav_clearance: self.nav_clearance.unwrap_or(d.nav_clearance),
            flow_cache_capacity: self.flow_cache_capacity.unwrap_or(d.flow_cache_capacity),
            flow_builds_per_tick: self.flow_builds_per_tick.unwrap_or(d.flow_builds_per_tick),
            flow_build_ticks: self.flow_build_ticks.unwrap_or(d.flow_build_ticks),
            flow_build_cells_per_tick: self.flow_build_cells_per_tick.unwrap_or(d.flow_build_cells_per_tick),
            move_to: MoveToParams {
                straight_line_max_agents: self.straight_line_max_agents.unwrap_or(d.move_to.straight_line_max_agents),
                reciprocal: match self.move_to_avoidance {
                    None => d.move_to.reciprocal,
                    Some(MoveToAvoidanceSpec::Reciprocal(r)) => Some(r.to_sim()),
                    Some(MoveToAvoidanceSpec::Context) => None,
                },
                ..d.move_to
            },
            ..d
        }
    }

    /// Issues the orders due before tick `tick` (those with `at_tick == tick`).
    pub fn apply_orders(&self, world: &mut World, tick: u64) -> Result<(), ScenarioError> {
        for (i, o) in self.orders.iter().enumerate().filter(|(_, o)| o.at_tick == tick) {
            let at = format!("orders[{i}]");
            let g = world.group_id(&o.group).ok_or_else(|| SimError::UnknownGroup(o.group.clone()))?;
            let ids: Vec<u32> = world.agents().iter().filter(|a| a.group == g).map(|a| a.id).collect();
            match (o.target, o.antipode_of) {
                (Some(t), None) => world.move_to(&ids, t.into(), o.stopping_distance).map_err(|e| e.within(&at))?,
                (None, Some(c)) => {
                    let c: Vec2 = c.into();
                    let goals: Vec<(u32, Vec2)> =
                        world.agents().iter().filter(|a| a.group == g).map(|a| (a.id, c * 2.0 - a.position)).collect();
                    for (id, goal) in goals {
                        world.move_to(&[id], goal, o.stopping_distance).map_err(|e| e.within(&at))?;
                    }
                }
                _ => return Err(SimError::invalid(format!("{at}.target"), "give exactly one of `target` and `antipode_of`").into()),
            }
        }
        Ok(())
    }

    /// Builds the world: config, obstacles, walls, then the groups in order.
    pub fn build(&self) -> Result<World, ScenarioError> {
        let mut world = World::new(self.world_config())?;
        for (i, o) in self.obstacles.iter().enumerate() {
            world.add_obstacle(o.center.into(), o.radius).map_err(|e| e.within(&format!("obstacles[{i}]")))?;
        }
        if let Some(r) = &self.random_obstacles {
            let existing: Vec<(Vec2, f32)> = world.obstacles().iter().map(|o| (o.center, o.radius)).collect();
            let placed = place_random_obstacles(world.config().bounds, r, &existing, self.seed)
                .map_err(|e| e.within("random_obstacles"))?;
            for (c, rad) in placed {
                world.add_obstacle(c, rad).map_err(|e| e.within("random_obstacles"))?;
            }
        }
        for (i, w) in self.walls.iter().enumerate() {
            world.add_wall(w.a.into(), w.b.into()).map_err(|e| e.within(&format!("walls[{i}]")))?;
        }
        for (i, g) in self.groups.iter().enumerate() {
            let spec = g.to_spawn(&world).map_err(|e| e.within(&format!("groups[{i}]")))?;
            world.spawn(spec).map_err(|e| e.within(&format!("groups[{i}]")))?;
        }
        self.apply_orders(&mut world, 0)?;
        Ok(world)
    }

    /// The same scenario with `n` agents in all, in an area scaled to keep the density: every
    /// coordinate is multiplied by s = √(n / agents), group counts by s², random obstacle
    /// counts by s².
    pub fn scaled_to(&self, n: usize) -> Scenario {
        let total: usize = self.groups.iter().map(GroupSpec::agent_count).sum();
        if total == 0 || n == total {
            return self.clone();
        }
        let k = n as f64 / total as f64;
        let s = match self.scaling {
            ScalingSpec::Density => k.sqrt() as f32,
            ScalingSpec::Spacing => k as f32,
        };
        let sp = |p: P| P { x: p.x * s, y: p.y * s };
        let mut out = self.clone();
        out.bounds = BoundsSpec { min: sp(self.bounds.min), max: sp(self.bounds.max) };
        for o in &mut out.orders {
            o.target = o.target.map(sp);
            o.antipode_of = o.antipode_of.map(sp);
        }
        for o in &mut out.obstacles {
            o.center = sp(o.center);
        }
        for w in &mut out.walls {
            w.a = sp(w.a);
            w.b = sp(w.b);
        }
        if let Some(r) = &mut out.random_obstacles {
            r.count = ((r.count as f64) * k).round() as usize;
            if let Some(kc) = &mut r.keep_clear {
                kc.min = sp(kc.min);
                kc.max = sp(kc.max);
            }
        }
        let mut assigned = 0usize;
        let last = out.groups.len().saturating_sub(1);
        for (i, g) in out.groups.iter_mut().enumerate() {
            let c = if i == last { n.saturating_sub(assigned) } else { ((g.agent_count() as f64) * k).round() as usize };
            assigned += c;
            g.area = match &g.area {
                AreaSpec::Rect { min, max } => AreaSpec::Rect { min: sp(*min), max: sp(*max) },
                AreaSpec::Disc { center, radius } => AreaSpec::Disc { center: sp(*center), radius: radius * s },
                AreaSpec::Ring { center, radius } => AreaSpec::Ring { center: sp(*center), radius: radius * s },
                AreaSpec::Points(ps) => AreaSpec::Disc {
                    center: sp(ps.first().copied().unwrap_or(P { x: 0.0, y: 0.0 })),
                    radius: s * 10.0,
                },
            };
            g.count = c;
            if let BindingSpec::Antipode { center } = &mut g.binding {
                *center = sp(*center);
            }
            for e in &mut g.behaviors {
                scale_targets(&mut e.behavior, s);
            }
        }
        out
    }
}

fn scale_targets(b: &mut BehaviorSpec, s: f32) {
    let sc = |t: &mut TargetSpec| {
        if let TargetSpec::Point(p) = t {
            *p = P { x: p.x * s, y: p.y * s };
        }
    };
    match b {
        BehaviorSpec::Seek { target } | BehaviorSpec::Flee { target, .. } | BehaviorSpec::Arrive { target, .. } => sc(target),
        BehaviorSpec::Face { target, .. } => sc(target),
        BehaviorSpec::RandomTarget { center: Some(c), .. } => *c = P { x: c.x * s, y: c.y * s },
        BehaviorSpec::PathFollowing { waypoints, .. } => {
            for w in waypoints {
                *w = P { x: w.x * s, y: w.y * s };
            }
        }
        _ => {}
    }
}

impl GroupSpec {
    /// Number of agents this group spawns.
    pub fn agent_count(&self) -> usize {
        match &self.area {
            AreaSpec::Points(p) => p.len(),
            _ => self.count,
        }
    }

    /// The sim spawn spec (resolves a group binding against `world`).
    pub fn to_spawn(&self, world: &World) -> Result<SpawnSpec, SimError> {
        let area = match &self.area {
            AreaSpec::Rect { min, max } => SpawnArea::Rect { min: (*min).into(), max: (*max).into() },
            AreaSpec::Disc { center, radius } => SpawnArea::Disc { center: (*center).into(), radius: *radius },
            AreaSpec::Ring { center, radius } => SpawnArea::Ring { center: (*center).into(), radius: *radius },
            AreaSpec::Points(ps) => SpawnArea::Points(ps.iter().map(|&p| p.into()).collect()),
        };
        let binding = match &self.binding {
            BindingSpec::AsGiven => TargetBinding::AsGiven,
            BindingSpec::Antipode { center } => TargetBinding::Antipode { center: (*center).into() },
            BindingSpec::GroupMember { group } => TargetBinding::GroupMember {
                group: world.group_id(group).ok_or_else(|| SimError::invalid("binding.group_member.group", format!("no group `{group}` spawned before this one")))?,
            },
        };
        Ok(SpawnSpec {
            group: self.name.clone(),
            count: self.count,
            area,
            limits: self.limits.to_limits(),
            behaviors: self.behaviors.iter().map(EntrySpec::to_sim).collect(),
            binding,
            initial_speed: self.initial_speed,
            orientation: self.orientation,
        })
    }
}

/// The world's current state as a scenario: the base scenario's settings and groups (with their
/// behaviours, limits and bindings), each group's agents placed where they are now, obstacles and
/// walls as they are now.
///
/// Behaviour changes made to single agents after load are not captured (a saved group carries
/// the behaviours its scenario gave it).
pub fn snapshot_scenario(world: &World, base: &Scenario) -> Scenario {
    let mut out = base.clone();
    out.random_obstacles = None;
    out.obstacles = world.obstacles().iter().map(|o| ObstacleSpec { center: o.center.into(), radius: o.radius }).collect();
    out.walls = world.walls().iter().map(|w| WallSpec { a: w.a.into(), b: w.b.into() }).collect();
    let mut groups: Vec<GroupSpec> = Vec::new();
    for (gi, name) in world.groups().iter().enumerate() {
        let points: Vec<P> = world.agents().iter().filter(|a| usize::from(a.group) == gi).map(|a| a.position.into()).collect();
        if points.is_empty() {
            continue;
        }
        let mut g = base.groups.iter().find(|g| &g.name == name).cloned().unwrap_or_else(|| GroupSpec {
            name: name.clone(),
            count: 0,
            area: AreaSpec::Points(Vec::new()),
            limits: LimitsSpec::default(),
            binding: BindingSpec::AsGiven,
            initial_speed: 0.0,
            orientation: None,
            behaviors: Vec::new(),
        });
        if let Some(a) = world.agents().iter().find(|a| usize::from(a.group) == gi) {
            let l = a.limits;
            g.limits = LimitsSpec {
                max_speed: Some(l.max_speed),
                max_accel: Some(l.max_accel),
                max_rotation: Some(l.max_rotation),
                max_angular_accel: Some(l.max_angular_accel),
                radius: Some(l.radius),
                mass: Some(l.mass),
            };
        }
        g.count = points.len();
        g.area = AreaSpec::Points(points);
        // Agent-id bindings refer to ids of the old world; keep them only if the group they
        // name is kept too (ids are reassigned in order on load).
        groups.push(g);
    }
    out.groups = groups;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"{
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 100, "y": 100}},
        "groups": [{"name": "a", "count": 10, "area": {"rect": {"min": {"x": 10, "y": 10}, "max": {"x": 90, "y": 90}}},
                    "behaviors": [{"behavior": {"type": "wander"}}, {"behavior": {"type": "separation", "neighbor_radius": 2}, "weight": 2}]}]
    }"#;

    #[test]
    fn parses_and_builds_with_defaults() {
        let s = Scenario::from_json(MINI).unwrap();
        let w = s.build().unwrap();
        assert_eq!(w.agents().len(), 10);
        assert_eq!(w.config().tick_rate, 20.0);
        assert_eq!(w.agents()[0].behaviors.entries().len(), 2);
        assert_eq!(w.agents()[0].behaviors.entries()[1].weight, 2.0);
    }

    #[test]
    fn parse_errors_name_the_field_path() {
        let bad = MINI.replace(r#""neighbor_radius": 2"#, r#""neighbor_radius": "two""#);
        let e = Scenario::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("groups[0].behaviors[1].behavior"), "{e}");
        let bad = MINI.replace(r#""count": 10"#, r#""count": 10, "colour": 3"#);
        let e = Scenario::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("groups[0]") && e.contains("colour"), "{e}");
    }

    #[test]
    fn flattened_align_tuning_still_refuses_unknown_fields() {
        let with = |b: &str| MINI.replace(r#"{"type": "wander"}"#, b);
        let s = Scenario::from_json(&with(r#"{"type": "align", "target": 0.5, "slow_radius": 0.7}"#)).unwrap();
        let BehaviorSpec::Align { tuning, .. } = &s.groups[0].behaviors[0].behavior else { panic!("{s:?}") };
        assert!((tuning.slow_radius - 0.7).abs() < 1e-6 && (tuning.target_radius - 0.1).abs() < 1e-6);
        for b in [r#"{"type": "align", "target": 0.5, "colour": 1}"#, r#"{"type": "look_where_you_are_going", "colour": 1}"#] {
            let e = Scenario::from_json(&with(b)).unwrap_err().to_string();
            assert!(e.contains("colour"), "{b}: {e}");
        }
    }

    #[test]
    fn validation_errors_name_the_field_path() {
        let bad = MINI.replace(r#""neighbor_radius": 2"#, r#""neighbor_radius": -2"#);
        let e = Scenario::from_json(&bad).unwrap().build().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("groups[0].behaviors[1].params.neighbor_radius"), "{e}");
        let bad = MINI.replace(r#""count": 10,"#, r#""count": 10, "limits": {"max_speed": 1e39},"#);
        // 1e39 overflows f32 to inf in serde_json → rejected by validation as non-finite.
        let e = match Scenario::from_json(&bad) {
            Ok(s) => s.build().err().map(|e| e.to_string()).unwrap_or_default(),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("max_speed"), "{e}");
    }

    #[test]
    fn random_obstacles_keep_gap_border_and_are_seeded() {
        let b = Bounds { min: Vec2::ZERO, max: Vec2::splat(500.0) };
        let spec = RandomObstacles { count: 30, min_radius: 5.0, max_radius: 15.0, min_gap: 20.0, border: 10.0, seed: Some(3), keep_clear: None };
        let a = place_random_obstacles(b, &spec, &[], 0).unwrap();
        assert_eq!(a, place_random_obstacles(b, &spec, &[], 0).unwrap());
        assert!(!a.is_empty());
        for (i, &(c, r)) in a.iter().enumerate() {
            assert!((5.0..=15.0).contains(&r));
            assert!(c.x - r >= 10.0 && c.y - r >= 10.0 && c.x + r <= 490.0 && c.y + r <= 490.0);
            for &(d, s) in &a[i + 1..] {
                assert!(c.distance(d) > r + s + 20.0);
            }
        }
    }

    #[test]
    fn random_obstacles_refuse_a_keep_clear_area_out_of_range_or_inverted() {
        let b = Bounds { min: Vec2::ZERO, max: Vec2::splat(500.0) };
        let spec = |min: P, max: P| RandomObstacles {
            count: 3,
            min_radius: 1.0,
            max_radius: 2.0,
            min_gap: 1.0,
            border: 1.0,
            seed: Some(1),
            keep_clear: Some(BoundsSpec { min, max }),
        };
        // schemathesis's case: x beyond 1e6 (f32 infinity after parsing), and min.y > max.y.
        let far = spec(P { x: 6.5e16, y: 490_980.0 }, P { x: f32::INFINITY, y: -472_794.9 });
        let e = place_random_obstacles(b, &far, &[], 0).unwrap_err().to_string();
        assert!(e.contains("keep_clear.min.x"), "{e}");
        let inverted = spec(P { x: 0.0, y: 100.0 }, P { x: 50.0, y: 10.0 });
        let e = place_random_obstacles(b, &inverted, &[], 0).unwrap_err().to_string();
        assert!(e.contains("keep_clear") && e.contains("min must be <= max"), "{e}");
        assert!(place_random_obstacles(b, &spec(P { x: 0.0, y: 0.0 }, P { x: 50.0, y: 50.0 }), &[], 0).is_ok());
    }

    #[test]
    fn scaling_keeps_density() {
        let s = Scenario::from_json(MINI).unwrap().scaled_to(40);
        assert_eq!(s.groups[0].count, 40);
        assert!((s.bounds.max.x - 200.0).abs() < 1e-3);
    }
}
