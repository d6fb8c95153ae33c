//! The one place where simulation types meet wire types (`steer-proto`).

use glam::Vec2;
use steer_proto as proto;

use crate::sim::behaviors::{
    BehaviorKind,
    Behavior, BehaviorEntry, Target, agent_avoidance, ahead_avoidance, align, alignment, arrive, cohesion, evade, face, flee,
    leader_following, look_where_you_are_going, obstacle_avoidance, path_following, pursue, random_target, reciprocal_avoidance, seek, separation,
    velocity_match, wall_avoidance, wander,
};
use crate::sim::error::SimError;
use crate::sim::world::{Command, Event, SpawnArea, SpawnSpec};
use crate::sim::agent::PathMode;
use crate::sim::{Agent, Limits};

/// Wire point → vector.
pub fn vec2(p: proto::Point) -> Vec2 {
    Vec2::new(p.x, p.y)
}

/// Vector → wire point.
pub fn point(v: Vec2) -> proto::Point {
    proto::Point { x: v.x, y: v.y }
}

fn target(t: &proto::Target) -> Target {
    match t {
        proto::Target::Point(p) => Target::Point(vec2(*p)),
        proto::Target::Agent(a) => Target::Agent(a.agent),
    }
}

fn align_tuning(a: &proto::AlignParams) -> align::AlignTuning {
    align::AlignTuning { target_radius: a.target_radius, slow_radius: a.slow_radius, time_to_target: a.time_to_target }
}

/// A wire behaviour as a sim behaviour (validated by the sim when applied).
pub fn behavior(b: &proto::Behavior) -> Result<Behavior, SimError> {
    use proto::Behavior as W;
    Ok(match b {
        W::Seek(p) => Behavior::Seek(seek::SeekParams { target: target(&p.target) }),
        W::Flee(p) => Behavior::Flee(flee::FleeParams { target: target(&p.target), panic_distance: p.panic_distance }),
        W::Arrive(p) => Behavior::Arrive(arrive::ArriveParams {
            target: target(&p.target),
            tuning: arrive::ArriveTuning { target_radius: p.target_radius, slow_radius: p.slow_radius, time_to_target: p.time_to_target },
        }),
        W::Pursue(p) => Behavior::Pursue(pursue::PursueParams { target: p.target_agent, max_prediction: p.max_prediction }),
        W::Evade(p) => Behavior::Evade(evade::EvadeParams {
            target: p.target_agent,
            panic_distance: p.panic_distance,
            max_prediction: p.max_prediction,
        }),
        W::Align(p) => Behavior::Align(align::AlignParams {
            target: match &p.target {
                proto::AlignTarget::Orientation(o) => align::AlignTarget::Orientation(o.radians),
                proto::AlignTarget::Agent(a) => align::AlignTarget::Agent(a.agent),
            },
            tuning: align_tuning(&p.align),
        }),
        W::Face(p) => Behavior::Face(face::FaceParams { target: target(&p.target), tuning: align_tuning(&p.align) }),
        W::LookWhereYouAreGoing(p) => {
            Behavior::LookWhereYouAreGoing(look_where_you_are_going::LookParams { tuning: align_tuning(&p.align) })
        }
        W::VelocityMatch(p) => {
            Behavior::VelocityMatch(velocity_match::VelocityMatchParams { target: p.target_agent, time_to_target: p.time_to_target })
        }
        W::Wander(p) => Behavior::Wander(wander::WanderParams {
            variant: match p.variant {
                proto::WanderVariant::Millington => wander::WanderVariant::Millington,
                proto::WanderVariant::Circle => wander::WanderVariant::Circle,
            },
            wander_offset: p.wander_offset,
            wander_radius: p.wander_radius,
            wander_rate: p.wander_rate,
        }),
        W::RandomTarget(p) => Behavior::RandomTarget(random_target::RandomTargetParams {
            radius: p.radius,
            center: p.center.map(vec2),
            interval_min: p.interval_min,
            interval_max: p.interval_max,
            ..random_target::RandomTargetParams::default()
        }),
        W::ObstacleAvoidance(p) => Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams {
            min_box_length: p.min_box_length,
            braking_weight: p.braking_weight,
            lateral_base: p.lateral_base,
        }),
        W::AheadAvoidance(p) => Behavior::AheadAvoidance(ahead_avoidance::AheadAvoidanceParams {
            ahead_len: p.ahead_len,
            max_avoid_force: p.max_avoid_force,
            margin: p.margin,
        }),
        W::WallAvoidance(p) => {
            Behavior::WallAvoidance(wall_avoidance::WallAvoidanceParams { look_ahead: p.look_ahead, avoid_distance: p.avoid_distance })
        }
        W::AgentAvoidance(p) => {
            Behavior::AgentAvoidance(agent_avoidance::AgentAvoidanceParams { look_ahead: p.look_ahead, avoid_radius: p.avoid_radius })
        }
        W::Separation(p) => Behavior::Separation(separation::SeparationParams { neighbor_radius: p.neighbor_radius }),
        W::Cohesion(p) => Behavior::Cohesion(cohesion::CohesionParams { neighbor_radius: p.neighbor_radius }),
        W::Alignment(p) => {
            Behavior::Alignment(alignment::AlignmentParams { neighbor_radius: p.neighbor_radius, time_to_target: p.time_to_target })
        }
        W::PathFollowing(p) => Behavior::PathFollowing(path_following::PathFollowingParams {
            waypoints: p.waypoints.iter().map(|w| vec2(*w)).collect(),
            path_radius: p.path_radius,
            mode: match p.mode {
                proto::PathMode::Once => PathMode::Once,
                proto::PathMode::Loop => PathMode::Loop,
                proto::PathMode::PingPong => PathMode::PingPong,
            },
        }),
        W::LeaderFollowing(p) => Behavior::LeaderFollowing(leader_following::LeaderFollowingParams {
            leader: p.leader,
            behind_distance: p.behind_distance,
            leader_sight_radius: p.leader_sight_radius,
            separation_radius: p.separation_radius,
            separation_weight: p.separation_weight,
            ..leader_following::LeaderFollowingParams::default()
        }),
        W::ReciprocalAvoidance(p) => Behavior::ReciprocalAvoidance(reciprocal(p)),
    })
}

/// Wire reciprocal-avoidance parameters (a behaviour's, or a scenario's MoveTo avoidance).
pub fn reciprocal(p: &proto::ReciprocalAvoidance) -> reciprocal_avoidance::ReciprocalAvoidanceParams {
    reciprocal_avoidance::ReciprocalAvoidanceParams {
        time_horizon: p.time_horizon,
        obstacle_time_horizon: p.obstacle_time_horizon,
        neighbor_dist: p.neighbor_dist,
        max_neighbors: p.max_neighbors,
    }
}

/// Wire behaviour entries as sim entries. The wire's own checks (`steer_proto::Validate`:
/// finite numbers and the ranges PROTOCOL.md lists) run first, so REST names a field as the
/// wire does (`[i].behavior.max_neighbors`); the sim's checks then name `[i].params...`.
pub fn entries(list: &[proto::BehaviorEntry]) -> Result<Vec<BehaviorEntry>, SimError> {
    list.iter()
        .enumerate()
        .map(|(i, e)| {
            proto::Validate::validate(e).map_err(|err| SimError::invalid(format!("[{i}].{}", err.field), err.reason))?;
            Ok(BehaviorEntry {
                behavior: behavior(&e.behavior).map_err(|err| err.within(&format!("[{i}]")))?,
                weight: e.weight,
                priority: e.priority,
            })
        })
        .collect()
}

/// Wire limits with the sim's defaults filled in.
pub fn limits(l: &proto::Limits) -> Limits {
    let d = Limits::default();
    Limits {
        max_speed: l.max_speed.unwrap_or(d.max_speed),
        max_accel: l.max_accel.unwrap_or(d.max_accel),
        max_rotation: l.max_rotation.unwrap_or(d.max_rotation),
        max_angular_accel: l.max_angular_accel.unwrap_or(d.max_angular_accel),
        radius: l.radius.unwrap_or(d.radius),
        mass: l.mass.unwrap_or(d.mass),
    }
}

/// Wire spawn area → sim spawn area.
pub fn spawn_area(a: &proto::SpawnArea) -> SpawnArea {
    match a {
        proto::SpawnArea::Rect(r) => SpawnArea::Rect { min: Vec2::new(r.min_x, r.min_y), max: Vec2::new(r.max_x, r.max_y) },
        proto::SpawnArea::Circle(c) => SpawnArea::Disc { center: Vec2::new(c.x, c.y), radius: c.radius },
        proto::SpawnArea::Ring(c) => SpawnArea::Ring { center: Vec2::new(c.x, c.y), radius: c.radius },
        proto::SpawnArea::Points(p) => SpawnArea::Points(p.points.iter().map(|&q| vec2(q)).collect()),
    }
}

/// An agent's float state as a protocol sample (for quantizing).
pub fn sample(a: &Agent) -> proto::AgentSample {
    proto::AgentSample {
        id: a.id,
        group: a.group,
        pos: [a.position.x, a.position.y],
        vel: [a.velocity.x, a.velocity.y],
        orientation: a.orientation,
    }
}

/// A sim event as a wire event kind. Every sim event has one (the match is exhaustive, so a new
/// sim event does not compile until it has a wire form).
pub fn event(e: &Event, groups: &[String]) -> proto::EventKind {
    match e {
        Event::Spawned { id, group } => proto::EventKind::Spawned(proto::SpawnedEvent {
            group: groups.get(usize::from(*group)).cloned().unwrap_or_default(),
            agents: vec![*id],
        }),
        Event::Despawned { id } => proto::EventKind::Despawned(proto::DespawnedEvent { agents: vec![*id] }),
        // Stopping short is never reported as arrival: a give-up first (it did not even reach
        // the nearest reachable point), then an unreachable target.
        Event::DestinationReached { id, gave_up: true, short_by, .. } => {
            proto::EventKind::GaveUp(proto::StoppedShortEvent { agent: *id, distance: *short_by })
        }
        Event::DestinationReached { id, unreachable: true, short_by, .. } => {
            proto::EventKind::Unreachable(proto::StoppedShortEvent { agent: *id, distance: *short_by })
        }
        Event::DestinationReached { id, .. } => proto::EventKind::DestinationReached(proto::AgentEvent { agent: *id }),
        Event::PathCompleted { id } => proto::EventKind::PathCompleted(proto::AgentEvent { agent: *id }),
    }
}

/// The sim error as a wire error body (code, message, field).
pub fn error_body(e: &SimError) -> proto::ErrorBody {
    let (code, field) = match e {
        SimError::InvalidField { field, .. } => (proto::ErrorCode::InvalidField, Some(field.clone())),
        SimError::UnknownAgent(_) => (proto::ErrorCode::UnknownAgent, None),
        SimError::UnknownObstacle(_) | SimError::UnknownWall(_) | SimError::UnknownGroup(_) => (proto::ErrorCode::NotFound, None),
        SimError::LimitExceeded { what, .. } => (proto::ErrorCode::InvalidField, Some(what.clone())),
    };
    proto::ErrorBody { code, message: e.to_string(), field }
}

/// A wire behaviour kind as the sim's (the same names).
pub fn behavior_kind(k: proto::BehaviorKind) -> BehaviorKind {
    use proto::BehaviorKind as W;
    match k {
        W::Seek => BehaviorKind::Seek,
        W::Flee => BehaviorKind::Flee,
        W::Arrive => BehaviorKind::Arrive,
        W::Pursue => BehaviorKind::Pursue,
        W::Evade => BehaviorKind::Evade,
        W::Align => BehaviorKind::Align,
        W::Face => BehaviorKind::Face,
        W::LookWhereYouAreGoing => BehaviorKind::LookWhereYouAreGoing,
        W::VelocityMatch => BehaviorKind::VelocityMatch,
        W::Wander => BehaviorKind::Wander,
        W::RandomTarget => BehaviorKind::RandomTarget,
        W::ObstacleAvoidance => BehaviorKind::ObstacleAvoidance,
        W::AheadAvoidance => BehaviorKind::AheadAvoidance,
        W::WallAvoidance => BehaviorKind::WallAvoidance,
        W::AgentAvoidance => BehaviorKind::AgentAvoidance,
        W::Separation => BehaviorKind::Separation,
        W::Cohesion => BehaviorKind::Cohesion,
        W::Alignment => BehaviorKind::Alignment,
        W::PathFollowing => BehaviorKind::PathFollowing,
        W::LeaderFollowing => BehaviorKind::LeaderFollowing,
        W::ReciprocalAvoidance => BehaviorKind::ReciprocalAvoidance,
    }
}

/// A wire MoveTo as a sim command (one command moves the whole group).
pub fn move_to(m: &proto::MoveTo) -> Command {
    Command::MoveTo { agents: m.agents.clone(), target: vec2(m.target), stopping_distance: m.stopping_distance }
}

/// A MoveTo as REST writes it (the wire message's fields but the request id and world), checked
/// by the wire's own rules first, as the WebSocket session checks it, then converted as
/// [`move_to`]: REST and WebSocket name a bad field alike.
pub fn rest_move_to(agents: Vec<u32>, target: proto::Point, stopping_distance: f32) -> Result<Command, SimError> {
    let m = proto::MoveTo { request_id: 0, world: String::new(), agents, target, stopping_distance };
    proto::Validate::validate(&m).map_err(|e| SimError::invalid(e.field, e.reason))?;
    Ok(move_to(&m))
}

/// The sim spawn of a wire spawn (REST `POST …/agents` and the WebSocket `Spawn`).
pub fn spawn_spec(group: &str, count: u32, area: &proto::SpawnArea, limits: &proto::Limits, behaviors: &[proto::BehaviorEntry]) -> Result<SpawnSpec, SimError> {
    // A spawn of nothing is a mistake, not a success with no ids (the documented minimum is 1;
    // schemathesis found `count: 0` answered 201 `{"agents": []}`). Scenario groups may still
    // have count 0 (a `points` group ignores it), so this is checked here, not in the sim.
    if count == 0 {
        return Err(SimError::invalid("count", "must be at least 1"));
    }
    if let proto::SpawnArea::Points(p) = area {
        if p.points.len() != count as usize {
            return Err(SimError::invalid("count", format!("must equal the number of area.points ({})", p.points.len())));
        }
    }
    Ok(SpawnSpec {
        limits: self::limits(limits),
        behaviors: entries(behaviors).map_err(|e| e.within("behaviors"))?,
        ..SpawnSpec::new(group, count as usize, spawn_area(area))
    })
}

/// The sim commands of a WebSocket world command (`Spawn`, `Despawn`, the behaviour commands,
/// `MoveTo`): the one conversion the WebSocket session applies through the world's runner, and
/// that the `command_apply` fuzz target (`fuzz/`) applies to a world directly. `None` for the
/// messages that are not world commands (`Hello`, `Ping`, `Subscribe`, `Unsubscribe`).
pub fn world_commands(msg: &proto::ClientMsg) -> Option<Result<Vec<Command>, SimError>> {
    use proto::ClientMsg as M;
    Some(match msg {
        M::Hello(_) | M::Ping(_) | M::Subscribe(_) | M::Unsubscribe(_) => return None,
        M::Spawn(s) => spawn_spec(&s.group, s.count, &s.area, &s.limits, &s.behaviors).map(|sp| vec![Command::Spawn(sp)]),
        M::Despawn(d) => Ok(d.agents.iter().map(|a| Command::Despawn(*a)).collect()),
        M::SetBehaviors(m) => entries(&m.behaviors)
            .map_err(|e| e.within("behaviors"))
            .map(|entries| m.agents.iter().map(|a| Command::SetBehaviors { agent: *a, entries: entries.clone() }).collect()),
        M::AddBehavior(m) => entries(std::slice::from_ref(&m.entry)).map_err(|e| e.within("entry")).and_then(|e| {
            let entry = e.into_iter().next().ok_or_else(|| SimError::invalid("entry", "missing"))?;
            Ok(m.agents.iter().map(|a| Command::AddBehavior { agent: *a, entry: entry.clone() }).collect())
        }),
        M::RemoveBehavior(m) => {
            let kind = behavior_kind(m.kind);
            Ok(m.agents.iter().map(|a| Command::RemoveBehavior { agent: *a, kind }).collect())
        }
        M::ResetBehaviors(m) => Ok(m.agents.iter().map(|a| Command::ResetBehaviors { agent: *a }).collect()),
        M::MoveTo(m) => Ok(vec![move_to(m)]),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::sim::error::MAX_QUERY_RADIUS;
    use steer_proto::Validate;

    /// A wire kind and the sim kind it becomes have the same name (what a recording stores);
    /// every sim kind is some wire kind's.
    #[test]
    fn behavior_kinds_keep_their_names() {
        for k in proto::BehaviorKind::ALL {
            assert_eq!(behavior_kind(*k).name(), k.name());
        }
        assert_eq!(proto::BehaviorKind::ALL.len(), BehaviorKind::ALL.len());
    }

    fn sim_params(w: &proto::ReciprocalAvoidance) -> reciprocal_avoidance::ReciprocalAvoidanceParams {
        match behavior(&proto::Behavior::ReciprocalAvoidance(w.clone())).unwrap() {
            Behavior::ReciprocalAvoidance(p) => p,
            other => panic!("converted to {other:?}"),
        }
    }

    /// Defaults live once, in `steer-proto`: a behaviour written with only its required fields
    /// converts to the sim's own `Default` parameters wherever the sim has them (the sim keeps
    /// them for behaviours it builds itself: MoveTo's avoidance, tests). The match is exhaustive,
    /// so a new behaviour is listed here by the compiler.
    #[test]
    fn wire_defaults_are_the_sims_defaults() {
        use proto::BehaviorKind as K;
        let lf = leader_following::LeaderFollowingParams::default();
        for kind in proto::BehaviorKind::ALL {
            let required = match kind {
                K::Seek | K::Flee | K::Arrive | K::Face => r#","target":{"type":"point","x":1,"y":2}"#,
                K::Pursue | K::Evade | K::VelocityMatch => r#","target_agent":3"#,
                K::Align => r#","target":{"type":"orientation","radians":0.5}"#,
                K::PathFollowing => r#","waypoints":[{"x":1,"y":2}]"#,
                K::LeaderFollowing => r#","leader":3"#,
                K::LookWhereYouAreGoing
                | K::Wander
                | K::RandomTarget
                | K::ObstacleAvoidance
                | K::AheadAvoidance
                | K::WallAvoidance
                | K::AgentAvoidance
                | K::Separation
                | K::Cohesion
                | K::Alignment
                | K::ReciprocalAvoidance => "",
            };
            let json = format!(r#"{{"type":"{}"{required}}}"#, kind.name());
            let wire: proto::Behavior = serde_json::from_str(&json).unwrap();
            let sim = behavior(&wire).unwrap();
            let defaults_match = match &sim {
                Behavior::Arrive(p) => p.tuning == arrive::ArriveTuning::default(),
                Behavior::Align(p) => p.tuning == align::AlignTuning::default(),
                Behavior::Face(p) => p.tuning == align::AlignTuning::default(),
                Behavior::LookWhereYouAreGoing(p) => *p == look_where_you_are_going::LookParams::default(),
                Behavior::Wander(p) => *p == wander::WanderParams::default(),
                Behavior::RandomTarget(p) => *p == random_target::RandomTargetParams::default(),
                Behavior::ObstacleAvoidance(p) => *p == obstacle_avoidance::ObstacleAvoidanceParams::default(),
                Behavior::AheadAvoidance(p) => *p == ahead_avoidance::AheadAvoidanceParams::default(),
                Behavior::WallAvoidance(p) => *p == wall_avoidance::WallAvoidanceParams::default(),
                Behavior::AgentAvoidance(p) => *p == agent_avoidance::AgentAvoidanceParams::default(),
                Behavior::LeaderFollowing(p) => *p == leader_following::LeaderFollowingParams { leader: 3, ..lf },
                Behavior::ReciprocalAvoidance(p) => *p == reciprocal_avoidance::ReciprocalAvoidanceParams::default(),
                // The sim has no defaults of its own for these: the wire's are the only ones.
                Behavior::Seek(_)
                | Behavior::Flee(_)
                | Behavior::Pursue(_)
                | Behavior::Evade(_)
                | Behavior::VelocityMatch(_)
                | Behavior::Separation(_)
                | Behavior::Cohesion(_)
                | Behavior::Alignment(_)
                | Behavior::PathFollowing(_) => true,
            };
            assert!(defaults_match, "{json} converts to {sim:?}, not the sim's defaults");
        }
    }

    #[test]
    fn a_spawn_of_zero_agents_is_invalid_naming_count() {
        let spawn = |count| {
            proto::ClientMsg::Spawn(proto::Spawn {
                request_id: 1,
                world: "w".into(),
                group: "g".into(),
                count,
                area: proto::SpawnArea::Rect(proto::Rect { min_x: 0.0, min_y: 0.0, max_x: 1.0, max_y: 1.0 }),
                limits: proto::Limits::default(),
                behaviors: vec![],
            })
        };
        match world_commands(&spawn(0)).unwrap() {
            Err(e) => assert!(e.to_string().contains("count"), "{e}"),
            other => panic!("count 0 gave {other:?}"),
        }
        assert!(world_commands(&spawn(1)).unwrap().is_ok());
    }

    #[test]
    fn reciprocal_avoidance_wire_defaults_and_bounds_are_the_sims() {
        let d = proto::ReciprocalAvoidance::default();
        assert_eq!(sim_params(&d), reciprocal_avoidance::ReciprocalAvoidanceParams::default());
        assert_eq!(proto::MAX_NEIGHBOR_DIST, MAX_QUERY_RADIUS);
        assert_eq!(proto::MAX_AVOIDANCE_NEIGHBORS, reciprocal_avoidance::MAX_NEIGHBORS);
        // The wire check and the sim check agree at and just beyond every bound.
        let cases = [
            proto::ReciprocalAvoidance { time_horizon: 60.0, obstacle_time_horizon: 60.0, neighbor_dist: 1000.0, max_neighbors: 32 },
            proto::ReciprocalAvoidance { neighbor_dist: 0.0, max_neighbors: 1, ..d.clone() },
            proto::ReciprocalAvoidance { time_horizon: 60.01, ..d.clone() },
            proto::ReciprocalAvoidance { time_horizon: 0.0, ..d.clone() },
            proto::ReciprocalAvoidance { obstacle_time_horizon: 61.0, ..d.clone() },
            proto::ReciprocalAvoidance { neighbor_dist: 1000.5, ..d.clone() },
            proto::ReciprocalAvoidance { neighbor_dist: -1.0, ..d.clone() },
            proto::ReciprocalAvoidance { max_neighbors: 0, ..d.clone() },
            proto::ReciprocalAvoidance { max_neighbors: 33, ..d.clone() },
        ];
        for w in cases {
            let wire = w.validate().map_err(|e| e.field);
            let sim = sim_params(&w).validate().map_err(|e| match e {
                SimError::InvalidField { field, .. } => field,
                other => panic!("{other:?}"),
            });
            assert_eq!(wire, sim, "{w:?}");
        }
    }

    /// An order that ended short of its goal is a `gave_up` or `unreachable` event with the
    /// distance, never `destination_reached`.
    #[test]
    fn stopping_short_is_not_arrival() {
        let at = glam::Vec2::new(3.0, 4.0);
        let ended = |unreachable, gave_up, short_by| event(&Event::DestinationReached { id: 7, position: at, unreachable, gave_up, short_by }, &[]);
        assert_eq!(ended(false, false, 0.0), proto::EventKind::DestinationReached(proto::AgentEvent { agent: 7 }));
        assert_eq!(ended(false, true, 2.5), proto::EventKind::GaveUp(proto::StoppedShortEvent { agent: 7, distance: 2.5 }));
        assert_eq!(ended(true, false, 9.0), proto::EventKind::Unreachable(proto::StoppedShortEvent { agent: 7, distance: 9.0 }));
        // Gave up on the way to the nearest reachable point: it gave up.
        assert_eq!(ended(true, true, 1.5), proto::EventKind::GaveUp(proto::StoppedShortEvent { agent: 7, distance: 1.5 }));
    }
}
