//! The steering-behaviour catalogue as wire types.
//!
//! Parameters with a listed default may be omitted in JSON (the default is
//! filled in on decode); the binary encoding always carries every field.
//! `Option` parameters mean "server default" when absent.

use crate::common::{AlignTarget, Point, Target};
use crate::validate::{FieldError, FieldPath, Validate, always_valid, check_range};
use serde::{Deserialize, Serialize};

/// Default-value functions for `#[serde(default = ...)]`.
mod d {
    macro_rules! consts {
        ($($name:ident = $v:expr),* $(,)?) => { $( pub fn $name() -> f32 { $v } )* };
    }
    consts!(
        zero_one = 0.1, quarter = 0.25, half = 0.5, point_four = 0.4, point_six = 0.6,
        one = 1.0, one_half = 1.5, two = 2.0, three = 3.0, four = 4.0, five = 5.0, ten = 10.0,
    );
    pub fn ten_u32() -> u32 {
        10
    }
}

/// Which wander algorithm to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WanderVariant {
    /// Millington's wander: a target jittered on a circle ahead of the agent.
    #[default]
    Millington,
    /// Reynolds' circle wander.
    Circle,
}

/// How a path is traversed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PathMode {
    /// Stop at the last waypoint.
    #[default]
    Once,
    /// Go back to the first waypoint after the last.
    Loop,
    /// Reverse direction at each end.
    PingPong,
}

always_valid!(WanderVariant, PathMode, BehaviorKind);

wire_struct! {
    #[openapi]
    /// Arrival/alignment tuning shared by `Align`, `Face` and `LookWhereYouAreGoing`.
    #[derive(Copy)]
    pub struct AlignParams {
        /// Radians within which the target orientation counts as reached (default 0.1).
        #[serde(default = "d::zero_one")] pub target_radius: f32,
        /// Radians within which rotation slows down (default 0.5).
        #[serde(default = "d::half")] pub slow_radius: f32,
        /// Seconds to reach the target rotation (default 0.1).
        #[serde(default = "d::zero_one")] pub time_to_target: f32,
    }
}

impl Default for AlignParams {
    fn default() -> Self {
        AlignParams { target_radius: 0.1, slow_radius: 0.5, time_to_target: 0.1 }
    }
}

wire_struct! {
    #[openapi]
    /// Move at full acceleration towards the target.
    pub struct Seek { pub target: Target }
}
wire_struct! {
    #[openapi]
    /// Move away from the target while closer than `panic_distance` (default 10).
    pub struct Flee {
        pub target: Target,
        #[serde(default = "d::ten")] pub panic_distance: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Seek that slows down and stops at the target.
    pub struct Arrive {
        pub target: Target,
        /// default 1
        #[serde(default = "d::one")] pub target_radius: f32,
        /// default 5
        #[serde(default = "d::five")] pub slow_radius: f32,
        /// default 0.25
        #[serde(default = "d::quarter")] pub time_to_target: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Seek the predicted position of a moving agent.
    pub struct Pursue {
        pub target_agent: u32,
        /// Seconds, default 5.
        #[serde(default = "d::five")] pub max_prediction: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Flee the predicted position of a moving agent.
    pub struct Evade {
        pub target_agent: u32,
        /// default 10
        #[serde(default = "d::ten")] pub panic_distance: f32,
        /// default 5
        #[serde(default = "d::five")] pub max_prediction: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Rotate to an orientation (or another agent's).
    pub struct Align {
        pub target: AlignTarget,
        #[serde(default)] pub align: AlignParams,
    }
}
wire_struct! {
    #[openapi]
    /// Rotate to face a point or agent.
    pub struct Face {
        pub target: Target,
        #[serde(default)] pub align: AlignParams,
    }
}
wire_struct! {
    #[openapi]
    /// Rotate to face the direction of travel.
    pub struct LookWhereYouAreGoing {
        #[serde(default)] pub align: AlignParams,
    }
}
wire_struct! {
    #[openapi]
    /// Match another agent's velocity.
    pub struct VelocityMatch {
        pub target_agent: u32,
        /// default 0.1
        #[serde(default = "d::zero_one")] pub time_to_target: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Random wandering.
    pub struct Wander {
        /// default `millington`
        #[serde(default)] pub variant: WanderVariant,
        /// default 1.5
        #[serde(default = "d::one_half")] pub wander_offset: f32,
        /// default 1
        #[serde(default = "d::one")] pub wander_radius: f32,
        /// Radians per tick of jitter, default 0.5.
        #[serde(default = "d::half")] pub wander_rate: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Arrive at random points within `radius` of `center` (default 10), re-drawn every
    /// `interval_min..interval_max` seconds (defaults 1 and 2). The arrive
    /// tuning of the walk is fixed server-side.
    pub struct RandomTarget {
        #[serde(default = "d::ten")] pub radius: f32,
        #[serde(default = "d::one")] pub interval_min: f32,
        #[serde(default = "d::two")] pub interval_max: f32,
        /// Centre of the picks; absent = the agent's position at pick time.
        #[serde(default)] pub center: Option<Point>,
    }
}
wire_struct! {
    #[openapi]
    /// Steer around static obstacles.
    pub struct ObstacleAvoidance {
        /// Absent = 4 × the agent's radius.
        pub min_box_length: Option<f32>,
        /// default 0.6
        #[serde(default = "d::point_six")] pub braking_weight: f32,
        /// Constant part of the lateral force multiplier
        /// (`lateral_base + (box_len - x) / box_len`), default 1.
        #[serde(default = "d::one")] pub lateral_base: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Steer around obstacles with an ahead vector.
    pub struct AheadAvoidance {
        /// default 4
        #[serde(default = "d::four")] pub ahead_len: f32,
        /// default 0.4
        #[serde(default = "d::point_four")] pub max_avoid_force: f32,
        /// Extra clearance added to each obstacle's radius, default 0.
        #[serde(default)] pub margin: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Keep away from walls.
    pub struct WallAvoidance {
        /// default 5
        #[serde(default = "d::five")] pub look_ahead: f32,
        /// default 3
        #[serde(default = "d::three")] pub avoid_distance: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Avoid collisions with other agents.
    pub struct AgentAvoidance {
        /// default 3
        #[serde(default = "d::three")] pub look_ahead: f32,
        /// default 2
        #[serde(default = "d::two")] pub avoid_radius: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Keep distance from neighbours within `neighbor_radius` (default 3).
    pub struct Separation {
        #[serde(default = "d::three")] pub neighbor_radius: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Move towards the centre of neighbours within `neighbor_radius` (default 3).
    pub struct Cohesion {
        #[serde(default = "d::three")] pub neighbor_radius: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Match the heading of neighbours within `neighbor_radius` (default 3).
    pub struct Alignment {
        #[serde(default = "d::three")] pub neighbor_radius: f32,
        /// Seconds to reach the neighbours' average heading, default 0.1.
        #[serde(default = "d::zero_one")] pub time_to_target: f32,
    }
}
wire_struct! {
    #[openapi]
    /// Follow a polyline.
    pub struct PathFollowing {
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub waypoints: Vec<Point>,
        /// default 1
        #[serde(default = "d::one")] pub path_radius: f32,
        /// default `once`
        #[serde(default)] pub mode: PathMode,
    }
}
wire_struct! {
    #[openapi]
    /// Follow a leader agent, staying `behind_distance` behind it (default 2)
    /// and out of its way within `leader_sight_radius` (default 3), pushing apart from
    /// followers closer than `separation_radius` (default 1.5) with `separation_weight`
    /// (default 1; the last two since version 5).
    pub struct LeaderFollowing {
        pub leader: u32,
        #[serde(default = "d::two")] pub behind_distance: f32,
        #[serde(default = "d::three")] pub leader_sight_radius: f32,
        #[serde(default = "d::one_half")] pub separation_radius: f32,
        #[serde(default = "d::one")] pub separation_weight: f32,
    }
}

/// Longest `time_horizon` / `obstacle_time_horizon` of [`ReciprocalAvoidance`], in seconds.
pub const MAX_TIME_HORIZON: f32 = 60.0;
/// Largest `neighbor_dist` of [`ReciprocalAvoidance`]: the server's cap on any neighbour query
/// radius (steerd's `MAX_QUERY_RADIUS`).
pub const MAX_NEIGHBOR_DIST: f32 = 1000.0;
/// Largest `max_neighbors` of [`ReciprocalAvoidance`].
pub const MAX_AVOIDANCE_NEIGHBORS: u32 = 32;

/// Reciprocal velocity obstacles (ORCA): not a force to blend but a filter on the velocity
/// the agent's other behaviours ask for, replaced by the closest velocity that touches none of
/// its `max_neighbors` nearest neighbours within `neighbor_dist` for `time_horizon` seconds,
/// nor an obstacle or wall for `obstacle_time_horizon` seconds. Weight and priority of its
/// entry do not matter (the first such entry's parameters win).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReciprocalAvoidance {
    /// Seconds, in (0, 60]; default 1.
    #[serde(default = "d::one")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 60))]
    pub time_horizon: f32,
    /// Seconds, in (0, 60]; default 1.
    #[serde(default = "d::one")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 60))]
    pub obstacle_time_horizon: f32,
    /// Centre-to-centre distance, in [0, 1000]; default 10.
    #[serde(default = "d::ten")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    pub neighbor_dist: f32,
    /// In 1..=32; default 10.
    #[serde(default = "d::ten_u32")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 32))]
    pub max_neighbors: u32,
}

impl Default for ReciprocalAvoidance {
    fn default() -> Self {
        ReciprocalAvoidance { time_horizon: 1.0, obstacle_time_horizon: 1.0, neighbor_dist: 10.0, max_neighbors: 10 }
    }
}

// Written out (this struct carries per-field serde defaults and OpenAPI ranges that
// `wire_struct!` does not take); `tests/schema.rs` checks the list against a serialized value.
impl crate::schema::Describe for ReciprocalAvoidance {
    fn describe() -> crate::schema::Type {
        crate::schema::Type::Struct {
            fields: vec![
                ("time_horizon", f32::describe()),
                ("obstacle_time_horizon", f32::describe()),
                ("neighbor_dist", f32::describe()),
                ("max_neighbors", u32::describe()),
            ],
        }
    }
}

impl Validate for ReciprocalAvoidance {
    fn validate_at(&self, path: &mut FieldPath) -> Result<(), FieldError> {
        path.field("time_horizon", |p| check_range(p, self.time_horizon, false, MAX_TIME_HORIZON))?;
        path.field("obstacle_time_horizon", |p| check_range(p, self.obstacle_time_horizon, false, MAX_TIME_HORIZON))?;
        path.field("neighbor_dist", |p| check_range(p, self.neighbor_dist, true, MAX_NEIGHBOR_DIST))?;
        path.field("max_neighbors", |p| {
            if (1..=MAX_AVOIDANCE_NEIGHBORS).contains(&self.max_neighbors) {
                Ok(())
            } else {
                Err(p.error(format!("must be between 1 and {MAX_AVOIDANCE_NEIGHBORS}, got {}", self.max_neighbors)))
            }
        })
    }
}

wire_enum! {
    #[openapi]
    /// One behaviour of the catalogue with its parameters.
    pub enum Behavior / BehaviorKind {
        Seek(Seek) = "seek",
        Flee(Flee) = "flee",
        Arrive(Arrive) = "arrive",
        Pursue(Pursue) = "pursue",
        Evade(Evade) = "evade",
        Align(Align) = "align",
        Face(Face) = "face",
        LookWhereYouAreGoing(LookWhereYouAreGoing) = "look_where_you_are_going",
        VelocityMatch(VelocityMatch) = "velocity_match",
        Wander(Wander) = "wander",
        RandomTarget(RandomTarget) = "random_target",
        ObstacleAvoidance(ObstacleAvoidance) = "obstacle_avoidance",
        AheadAvoidance(AheadAvoidance) = "ahead_avoidance",
        WallAvoidance(WallAvoidance) = "wall_avoidance",
        AgentAvoidance(AgentAvoidance) = "agent_avoidance",
        Separation(Separation) = "separation",
        Cohesion(Cohesion) = "cohesion",
        Alignment(Alignment) = "alignment",
        PathFollowing(PathFollowing) = "path_following",
        LeaderFollowing(LeaderFollowing) = "leader_following",
        ReciprocalAvoidance(ReciprocalAvoidance) = "reciprocal_avoidance",
    }
}

fn default_weight() -> f32 {
    1.0
}

wire_struct! {
    #[openapi]
    /// A behaviour with its blending weight and priority group.
    pub struct BehaviorEntry {
        pub behavior: Behavior,
        /// Blend weight, default 1.
        #[serde(default = "default_weight")] pub weight: f32,
        /// Priority group (lower runs first), default 0.
        #[serde(default)] pub priority: u8,
    }
}

impl From<Behavior> for BehaviorEntry {
    fn from(behavior: Behavior) -> Self {
        BehaviorEntry { behavior, weight: 1.0, priority: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Validate;

    #[test]
    fn json_defaults_fill_omitted_parameters() {
        let b: Behavior =
            serde_json::from_str(r#"{"type":"arrive","target":{"type":"agent","agent":3}}"#).unwrap();
        let Behavior::Arrive(a) = b else { panic!("wrong variant {b:?}") };
        assert!((a.target_radius - 1.0).abs() < 1e-6);
        assert!((a.slow_radius - 5.0).abs() < 1e-6);
        assert!((a.time_to_target - 0.25).abs() < 1e-6);
        let w: Behavior = serde_json::from_str(r#"{"type":"wander"}"#).unwrap();
        assert_eq!(
            w,
            Behavior::Wander(Wander {
                variant: WanderVariant::Millington,
                wander_offset: 1.5,
                wander_radius: 1.0,
                wander_rate: 0.5
            })
        );
        let parse = |s: &str| serde_json::from_str::<Behavior>(s).unwrap();
        assert_eq!(
            parse(r#"{"type":"random_target"}"#),
            Behavior::RandomTarget(RandomTarget { radius: 10.0, interval_min: 1.0, interval_max: 2.0, center: None })
        );
        assert_eq!(
            parse(r#"{"type":"random_target","radius":20}"#),
            Behavior::RandomTarget(RandomTarget { radius: 20.0, interval_min: 1.0, interval_max: 2.0, center: None })
        );
        let Behavior::RandomTarget(rt) = parse(r#"{"type":"random_target","radius":2,"center":{"x":1,"y":-2}}"#) else {
            panic!("not random_target")
        };
        assert_eq!(rt.center, Some(Point { x: 1.0, y: -2.0 }));
        assert_eq!(
            parse(r#"{"type":"obstacle_avoidance"}"#),
            Behavior::ObstacleAvoidance(ObstacleAvoidance { min_box_length: None, braking_weight: 0.6, lateral_base: 1.0 })
        );
        assert_eq!(
            parse(r#"{"type":"ahead_avoidance"}"#),
            Behavior::AheadAvoidance(AheadAvoidance { ahead_len: 4.0, max_avoid_force: 0.4, margin: 0.0 })
        );
        assert_eq!(parse(r#"{"type":"separation"}"#), Behavior::Separation(Separation { neighbor_radius: 3.0 }));
        assert_eq!(parse(r#"{"type":"cohesion"}"#), Behavior::Cohesion(Cohesion { neighbor_radius: 3.0 }));
        assert_eq!(
            parse(r#"{"type":"alignment"}"#),
            Behavior::Alignment(Alignment { neighbor_radius: 3.0, time_to_target: 0.1 })
        );
        assert_eq!(
            parse(r#"{"type":"leader_following","leader":4}"#),
            Behavior::LeaderFollowing(LeaderFollowing {
                leader: 4,
                behind_distance: 2.0,
                leader_sight_radius: 3.0,
                separation_radius: 1.5,
                separation_weight: 1.0
            })
        );
        let e: BehaviorEntry = serde_json::from_str(r#"{"behavior":{"type":"look_where_you_are_going"}}"#).unwrap();
        assert_eq!(e.weight, 1.0);
        assert_eq!(e.behavior.kind(), BehaviorKind::LookWhereYouAreGoing);
        assert_eq!(e.behavior.kind().name(), "look_where_you_are_going");
    }

    #[test]
    fn kind_names_roundtrip_through_json() {
        assert_eq!(BehaviorKind::ALL.len(), 21);
        // Appended last: the binary indices of the older behaviours stay as they were.
        assert_eq!(BehaviorKind::ALL.last(), Some(&BehaviorKind::ReciprocalAvoidance));
        assert_eq!(BehaviorKind::ALL.iter().position(|k| *k == BehaviorKind::LeaderFollowing), Some(19));
        for k in BehaviorKind::ALL {
            let s = serde_json::to_string(k).unwrap();
            assert_eq!(s, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<BehaviorKind>(&s).unwrap(), *k);
        }
    }

    #[test]
    fn validate_names_nested_field() {
        let e = BehaviorEntry::from(Behavior::Face(Face {
            target: Target::Point(Point { x: 1.0, y: f32::NAN }),
            align: AlignParams::default(),
        }));
        assert_eq!(e.validate().unwrap_err().field, "behavior.target.y");
    }

    #[test]
    fn reciprocal_avoidance_defaults_and_ranges() {
        let b: Behavior = serde_json::from_str(r#"{"type":"reciprocal_avoidance"}"#).unwrap();
        assert_eq!(b, Behavior::ReciprocalAvoidance(ReciprocalAvoidance::default()));
        let Behavior::ReciprocalAvoidance(d) = &b else { panic!("wrong variant {b:?}") };
        assert_eq!((d.time_horizon, d.obstacle_time_horizon, d.neighbor_dist, d.max_neighbors), (1.0, 1.0, 10.0, 10));
        assert!(b.validate().is_ok());
        let field = |r: ReciprocalAvoidance| BehaviorEntry::from(Behavior::ReciprocalAvoidance(r)).validate().unwrap_err().field;
        let d = ReciprocalAvoidance::default();
        assert_eq!(field(ReciprocalAvoidance { time_horizon: 0.0, ..d.clone() }), "behavior.time_horizon");
        assert_eq!(field(ReciprocalAvoidance { time_horizon: 60.5, ..d.clone() }), "behavior.time_horizon");
        assert_eq!(field(ReciprocalAvoidance { obstacle_time_horizon: f32::NAN, ..d.clone() }), "behavior.obstacle_time_horizon");
        assert_eq!(field(ReciprocalAvoidance { obstacle_time_horizon: -1.0, ..d.clone() }), "behavior.obstacle_time_horizon");
        assert_eq!(field(ReciprocalAvoidance { neighbor_dist: 1000.5, ..d.clone() }), "behavior.neighbor_dist");
        assert_eq!(field(ReciprocalAvoidance { neighbor_dist: -0.5, ..d.clone() }), "behavior.neighbor_dist");
        assert_eq!(field(ReciprocalAvoidance { max_neighbors: 0, ..d.clone() }), "behavior.max_neighbors");
        assert_eq!(field(ReciprocalAvoidance { max_neighbors: 33, ..d.clone() }), "behavior.max_neighbors");
        // The bounds themselves are allowed.
        let edge = ReciprocalAvoidance { time_horizon: 60.0, obstacle_time_horizon: 60.0, neighbor_dist: 1000.0, max_neighbors: 32 };
        assert!(Behavior::ReciprocalAvoidance(edge).validate().is_ok());
        let zero = ReciprocalAvoidance { neighbor_dist: 0.0, max_neighbors: 1, ..d };
        assert!(Behavior::ReciprocalAvoidance(zero).validate().is_ok());
    }
}
