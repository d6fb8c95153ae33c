//! The binary encoding of sim values: [`Command`]s in a recording (see `server/RECORDING.md`),
//! and the behaviours, limits and targets inside a world's saved state (`world/save.rs`).
//!
//! Hand-written rather than derived: the sim core stays free of serde/bincode, and every
//! struct is destructured exhaustively, so a field added to a sim type fails to compile here
//! until the recording format (and the world's save format) learns it and its version moves.
//!
//! Values are written with the byte-level [`Enc`] and read with [`Dec`] (in `bytes.rs`).

use super::agent::{Limits, PathMode};
use super::behaviors::{
    Behavior, BehaviorEntry, BehaviorKind, Target, agent_avoidance, ahead_avoidance, align, alignment, arrive, cohesion, evade, face, flee,
    leader_following, look_where_you_are_going, obstacle_avoidance, path_following, pursue, random_target, reciprocal_avoidance, seek, separation,
    velocity_match, wall_avoidance, wander,
};
use super::world::types::{Command, SpawnArea, SpawnSpec, TargetBinding};

pub use super::bytes::{Dec, DecodeError, Enc, MAX_LIST};

/// Encodes a command.
pub fn encode_command(e: &mut Enc, c: &Command) {
    match c {
        Command::Spawn(s) => {
            e.u8(0);
            spawn(e, s);
        }
        Command::Despawn(id) => {
            e.u8(1);
            e.u64(u64::from(*id));
        }
        Command::SetBehaviors { agent, entries } => {
            e.u8(2);
            e.u64(u64::from(*agent));
            e.u64(entries.len() as u64);
            for en in entries {
                entry(e, en);
            }
        }
        Command::AddBehavior { agent, entry: en } => {
            e.u8(3);
            e.u64(u64::from(*agent));
            entry(e, en);
        }
        Command::RemoveBehavior { agent, kind } => {
            e.u8(4);
            e.u64(u64::from(*agent));
            e.str(kind.name());
        }
        Command::ResetBehaviors { agent } => {
            e.u8(5);
            e.u64(u64::from(*agent));
        }
        Command::AddObstacle { center, radius } => {
            e.u8(6);
            e.vec2(*center);
            e.f32(*radius);
        }
        Command::MoveObstacle { id, center, radius } => {
            e.u8(7);
            e.u64(u64::from(*id));
            e.vec2(*center);
            e.opt_f32(*radius);
        }
        Command::RemoveObstacle(id) => {
            e.u8(8);
            e.u64(u64::from(*id));
        }
        Command::AddWall { a, b } => {
            e.u8(9);
            e.vec2(*a);
            e.vec2(*b);
        }
        Command::RemoveWall(id) => {
            e.u8(10);
            e.u64(u64::from(*id));
        }
        Command::MoveTo { agents, target, stopping_distance } => {
            e.u8(11);
            // Ids ascend more often than not: delta-code them (zig-zag), most are one byte.
            e.u64(agents.len() as u64);
            let mut prev: i64 = 0;
            for &a in agents {
                let d = i64::from(a) - prev;
                e.u64(((d << 1) ^ (d >> 63)) as u64);
                prev = i64::from(a);
            }
            e.vec2(*target);
            e.f32(*stopping_distance);
        }
    }
}

/// Decodes a command.
pub fn decode_command(d: &mut Dec) -> Result<Command, DecodeError> {
    Ok(match d.u8()? {
        0 => Command::Spawn(decode_spawn(d)?),
        1 => Command::Despawn(d.u32()?),
        2 => {
            let agent = d.u32()?;
            Command::SetBehaviors { agent, entries: d.list(decode_entry)? }
        }
        3 => {
            let agent = d.u32()?;
            Command::AddBehavior { agent, entry: decode_entry(d)? }
        }
        4 => {
            let agent = d.u32()?;
            let name = d.string()?;
            let kind = BehaviorKind::from_name(&name).ok_or_else(|| d.err(format!("unknown behaviour kind `{name}`")))?;
            Command::RemoveBehavior { agent, kind }
        }
        5 => Command::ResetBehaviors { agent: d.u32()? },
        6 => Command::AddObstacle { center: d.vec2()?, radius: d.f32()? },
        7 => {
            let id = d.u32()?;
            Command::MoveObstacle { id, center: d.vec2()?, radius: d.opt_f32()? }
        }
        8 => Command::RemoveObstacle(d.u32()?),
        9 => Command::AddWall { a: d.vec2()?, b: d.vec2()? },
        10 => Command::RemoveWall(d.u32()?),
        11 => {
            let n = d.list_len()?;
            let mut agents = Vec::with_capacity(n.min(1024));
            let mut prev: i64 = 0;
            for _ in 0..n {
                let z = d.u64()?;
                let delta = ((z >> 1) as i64) ^ -((z & 1) as i64);
                let id = prev.checked_add(delta).and_then(|v| u32::try_from(v).ok()).ok_or_else(|| d.err("agent id out of range"))?;
                agents.push(id);
                prev = i64::from(id);
            }
            Command::MoveTo { agents, target: d.vec2()?, stopping_distance: d.f32()? }
        }
        t => return Err(d.err(format!("unknown command tag {t}"))),
    })
}

fn spawn(e: &mut Enc, s: &SpawnSpec) {
    let SpawnSpec { group, count, area, limits: l, behaviors, binding, initial_speed, orientation } = s;
    e.str(group);
    e.u64(*count as u64);
    match area {
        SpawnArea::Rect { min, max } => {
            e.u8(0);
            e.vec2(*min);
            e.vec2(*max);
        }
        SpawnArea::Disc { center, radius } => {
            e.u8(1);
            e.vec2(*center);
            e.f32(*radius);
        }
        SpawnArea::Ring { center, radius } => {
            e.u8(2);
            e.vec2(*center);
            e.f32(*radius);
        }
        SpawnArea::Points(ps) => {
            e.u8(3);
            e.u64(ps.len() as u64);
            for p in ps {
                e.vec2(*p);
            }
        }
    }
    limits(e, l);
    e.u64(behaviors.len() as u64);
    for en in behaviors {
        entry(e, en);
    }
    match binding {
        TargetBinding::AsGiven => e.u8(0),
        TargetBinding::Antipode { center } => {
            e.u8(1);
            e.vec2(*center);
        }
        TargetBinding::GroupMember { group } => {
            e.u8(2);
            e.u64(u64::from(*group));
        }
    }
    e.f32(*initial_speed);
    e.opt_f32(*orientation);
}

fn decode_spawn(d: &mut Dec) -> Result<SpawnSpec, DecodeError> {
    let group = d.string()?;
    let count = usize::try_from(d.u64()?).map_err(|_| d.err("count too large"))?;
    let area = match d.u8()? {
        0 => SpawnArea::Rect { min: d.vec2()?, max: d.vec2()? },
        1 => SpawnArea::Disc { center: d.vec2()?, radius: d.f32()? },
        2 => SpawnArea::Ring { center: d.vec2()?, radius: d.f32()? },
        3 => SpawnArea::Points(d.list(|d| d.vec2())?),
        t => return Err(d.err(format!("unknown spawn area tag {t}"))),
    };
    let limits = decode_limits(d)?;
    let behaviors = d.list(decode_entry)?;
    let binding = match d.u8()? {
        0 => TargetBinding::AsGiven,
        1 => TargetBinding::Antipode { center: d.vec2()? },
        2 => {
            let g = d.u64()?;
            TargetBinding::GroupMember { group: u16::try_from(g).map_err(|_| d.err("group id out of range"))? }
        }
        t => return Err(d.err(format!("unknown binding tag {t}"))),
    };
    Ok(SpawnSpec { group, count, area, limits, behaviors, binding, initial_speed: d.f32()?, orientation: d.opt_f32()? })
}

pub fn limits(e: &mut Enc, l: &Limits) {
    let Limits { max_speed, max_accel, max_rotation, max_angular_accel, radius, mass } = *l;
    for v in [max_speed, max_accel, max_rotation, max_angular_accel, radius, mass] {
        e.f32(v);
    }
}

pub fn decode_limits(d: &mut Dec) -> Result<Limits, DecodeError> {
    Ok(Limits { max_speed: d.f32()?, max_accel: d.f32()?, max_rotation: d.f32()?, max_angular_accel: d.f32()?, radius: d.f32()?, mass: d.f32()? })
}

pub fn entry(e: &mut Enc, en: &BehaviorEntry) {
    let BehaviorEntry { behavior: b, weight, priority } = en;
    behavior(e, b);
    e.f32(*weight);
    e.u8(*priority);
}

pub fn decode_entry(d: &mut Dec) -> Result<BehaviorEntry, DecodeError> {
    Ok(BehaviorEntry { behavior: decode_behavior(d)?, weight: d.f32()?, priority: d.u8()? })
}

pub fn target(e: &mut Enc, t: &Target) {
    match t {
        Target::Point(p) => {
            e.u8(0);
            e.vec2(*p);
        }
        Target::Agent(a) => {
            e.u8(1);
            e.u64(u64::from(*a));
        }
    }
}

pub fn decode_target(d: &mut Dec) -> Result<Target, DecodeError> {
    match d.u8()? {
        0 => Ok(Target::Point(d.vec2()?)),
        1 => Ok(Target::Agent(d.u32()?)),
        t => Err(d.err(format!("unknown target tag {t}"))),
    }
}

fn align_tuning(e: &mut Enc, t: &align::AlignTuning) {
    let align::AlignTuning { target_radius, slow_radius, time_to_target } = *t;
    e.f32(target_radius);
    e.f32(slow_radius);
    e.f32(time_to_target);
}

fn decode_align_tuning(d: &mut Dec) -> Result<align::AlignTuning, DecodeError> {
    Ok(align::AlignTuning { target_radius: d.f32()?, slow_radius: d.f32()?, time_to_target: d.f32()? })
}

fn arrive_tuning(e: &mut Enc, t: &arrive::ArriveTuning) {
    let arrive::ArriveTuning { target_radius, slow_radius, time_to_target } = *t;
    e.f32(target_radius);
    e.f32(slow_radius);
    e.f32(time_to_target);
}

fn decode_arrive_tuning(d: &mut Dec) -> Result<arrive::ArriveTuning, DecodeError> {
    Ok(arrive::ArriveTuning { target_radius: d.f32()?, slow_radius: d.f32()?, time_to_target: d.f32()? })
}

pub fn behavior(e: &mut Enc, b: &Behavior) {
    match b {
        Behavior::Seek(seek::SeekParams { target: t }) => {
            e.u8(0);
            target(e, t);
        }
        Behavior::Flee(flee::FleeParams { target: t, panic_distance }) => {
            e.u8(1);
            target(e, t);
            e.f32(*panic_distance);
        }
        Behavior::Arrive(arrive::ArriveParams { target: t, tuning }) => {
            e.u8(2);
            target(e, t);
            arrive_tuning(e, tuning);
        }
        Behavior::Pursue(pursue::PursueParams { target: t, max_prediction }) => {
            e.u8(3);
            e.u64(u64::from(*t));
            e.f32(*max_prediction);
        }
        Behavior::Evade(evade::EvadeParams { target: t, panic_distance, max_prediction }) => {
            e.u8(4);
            e.u64(u64::from(*t));
            e.f32(*panic_distance);
            e.f32(*max_prediction);
        }
        Behavior::Align(p) => align_params(e, p),
        Behavior::Face(face::FaceParams { target: t, tuning }) => {
            e.u8(6);
            target(e, t);
            align_tuning(e, tuning);
        }
        Behavior::LookWhereYouAreGoing(look_where_you_are_going::LookParams { tuning }) => {
            e.u8(7);
            align_tuning(e, tuning);
        }
        Behavior::VelocityMatch(velocity_match::VelocityMatchParams { target: t, time_to_target }) => {
            e.u8(8);
            e.u64(u64::from(*t));
            e.f32(*time_to_target);
        }
        Behavior::Wander(p) => wander_params(e, p),
        Behavior::RandomTarget(p) => random_target_params(e, p),
        Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams { min_box_length, braking_weight, lateral_base }) => {
            e.u8(11);
            e.opt_f32(*min_box_length);
            e.f32(*braking_weight);
            e.f32(*lateral_base);
        }
        Behavior::AheadAvoidance(ahead_avoidance::AheadAvoidanceParams { ahead_len, max_avoid_force, margin }) => {
            e.u8(12);
            e.f32(*ahead_len);
            e.f32(*max_avoid_force);
            e.f32(*margin);
        }
        Behavior::WallAvoidance(wall_avoidance::WallAvoidanceParams { look_ahead, avoid_distance }) => {
            e.u8(13);
            e.f32(*look_ahead);
            e.f32(*avoid_distance);
        }
        Behavior::AgentAvoidance(agent_avoidance::AgentAvoidanceParams { look_ahead, avoid_radius }) => {
            e.u8(14);
            e.f32(*look_ahead);
            e.f32(*avoid_radius);
        }
        Behavior::Separation(separation::SeparationParams { neighbor_radius }) => {
            e.u8(15);
            e.f32(*neighbor_radius);
        }
        Behavior::Cohesion(cohesion::CohesionParams { neighbor_radius }) => {
            e.u8(16);
            e.f32(*neighbor_radius);
        }
        Behavior::Alignment(alignment::AlignmentParams { neighbor_radius, time_to_target }) => {
            e.u8(17);
            e.f32(*neighbor_radius);
            e.f32(*time_to_target);
        }
        Behavior::PathFollowing(p) => path_following_params(e, p),
        Behavior::LeaderFollowing(p) => leader_following_params(e, p),
        Behavior::ReciprocalAvoidance(p) => reciprocal_avoidance_params(e, p),
    }
}

/// Align: its target (an orientation or an agent) and tuning.
fn align_params(e: &mut Enc, p: &align::AlignParams) {
    let align::AlignParams { target: t, tuning } = p;
    e.u8(5);
    match t {
        align::AlignTarget::Orientation(o) => {
            e.u8(0);
            e.f32(*o);
        }
        align::AlignTarget::Agent(a) => {
            e.u8(1);
            e.u64(u64::from(*a));
        }
    }
    align_tuning(e, tuning);
}

/// Wander: its variant and circle.
fn wander_params(e: &mut Enc, p: &wander::WanderParams) {
    let wander::WanderParams { variant, wander_offset, wander_radius, wander_rate } = p;
    e.u8(9);
    e.u8(match variant {
        wander::WanderVariant::Millington => 0,
        wander::WanderVariant::Circle => 1,
    });
    e.f32(*wander_offset);
    e.f32(*wander_radius);
    e.f32(*wander_rate);
}

/// RandomTarget: its area, intervals and arrive tuning.
fn random_target_params(e: &mut Enc, p: &random_target::RandomTargetParams) {
    let random_target::RandomTargetParams { radius, center, interval_min, interval_max, arrive } = p;
    e.u8(10);
    e.f32(*radius);
    e.opt_vec2(*center);
    e.f32(*interval_min);
    e.f32(*interval_max);
    arrive_tuning(e, arrive);
}

/// PathFollowing: its waypoints, radius and mode.
fn path_following_params(e: &mut Enc, p: &path_following::PathFollowingParams) {
    let path_following::PathFollowingParams { waypoints, path_radius, mode } = p;
    e.u8(18);
    e.u64(waypoints.len() as u64);
    for w in waypoints {
        e.vec2(*w);
    }
    e.f32(*path_radius);
    e.u8(match mode {
        PathMode::Once => 0,
        PathMode::Loop => 1,
        PathMode::PingPong => 2,
    });
}

/// LeaderFollowing: its leader, place behind it, separation and arrive tuning.
fn leader_following_params(e: &mut Enc, p: &leader_following::LeaderFollowingParams) {
    let leader_following::LeaderFollowingParams { leader, behind_distance, leader_sight_radius, separation_radius, separation_weight, arrive } = p;
    e.u8(19);
    e.u64(u64::from(*leader));
    e.f32(*behind_distance);
    e.f32(*leader_sight_radius);
    e.f32(*separation_radius);
    e.f32(*separation_weight);
    arrive_tuning(e, arrive);
}

/// ReciprocalAvoidance: its horizons and neighbours.
fn reciprocal_avoidance_params(e: &mut Enc, p: &reciprocal_avoidance::ReciprocalAvoidanceParams) {
    let reciprocal_avoidance::ReciprocalAvoidanceParams { time_horizon, obstacle_time_horizon, neighbor_dist, max_neighbors } = p;
    e.u8(20);
    e.f32(*time_horizon);
    e.f32(*obstacle_time_horizon);
    e.f32(*neighbor_dist);
    e.u64(u64::from(*max_neighbors));
}

pub fn decode_behavior(d: &mut Dec) -> Result<Behavior, DecodeError> {
    Ok(match d.u8()? {
        0 => Behavior::Seek(seek::SeekParams { target: decode_target(d)? }),
        1 => Behavior::Flee(flee::FleeParams { target: decode_target(d)?, panic_distance: d.f32()? }),
        2 => Behavior::Arrive(arrive::ArriveParams { target: decode_target(d)?, tuning: decode_arrive_tuning(d)? }),
        3 => Behavior::Pursue(pursue::PursueParams { target: d.u32()?, max_prediction: d.f32()? }),
        4 => Behavior::Evade(evade::EvadeParams { target: d.u32()?, panic_distance: d.f32()?, max_prediction: d.f32()? }),
        5 => {
            let target = match d.u8()? {
                0 => align::AlignTarget::Orientation(d.f32()?),
                1 => align::AlignTarget::Agent(d.u32()?),
                t => return Err(d.err(format!("unknown align target tag {t}"))),
            };
            Behavior::Align(align::AlignParams { target, tuning: decode_align_tuning(d)? })
        }
        6 => Behavior::Face(face::FaceParams { target: decode_target(d)?, tuning: decode_align_tuning(d)? }),
        7 => Behavior::LookWhereYouAreGoing(look_where_you_are_going::LookParams { tuning: decode_align_tuning(d)? }),
        8 => Behavior::VelocityMatch(velocity_match::VelocityMatchParams { target: d.u32()?, time_to_target: d.f32()? }),
        9 => {
            let variant = match d.u8()? {
                0 => wander::WanderVariant::Millington,
                1 => wander::WanderVariant::Circle,
                t => return Err(d.err(format!("unknown wander variant {t}"))),
            };
            Behavior::Wander(wander::WanderParams { variant, wander_offset: d.f32()?, wander_radius: d.f32()?, wander_rate: d.f32()? })
        }
        10 => Behavior::RandomTarget(random_target::RandomTargetParams {
            radius: d.f32()?,
            center: d.opt_vec2()?,
            interval_min: d.f32()?,
            interval_max: d.f32()?,
            arrive: decode_arrive_tuning(d)?,
        }),
        11 => Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams {
            min_box_length: d.opt_f32()?,
            braking_weight: d.f32()?,
            lateral_base: d.f32()?,
        }),
        12 => Behavior::AheadAvoidance(ahead_avoidance::AheadAvoidanceParams { ahead_len: d.f32()?, max_avoid_force: d.f32()?, margin: d.f32()? }),
        13 => Behavior::WallAvoidance(wall_avoidance::WallAvoidanceParams { look_ahead: d.f32()?, avoid_distance: d.f32()? }),
        14 => Behavior::AgentAvoidance(agent_avoidance::AgentAvoidanceParams { look_ahead: d.f32()?, avoid_radius: d.f32()? }),
        15 => Behavior::Separation(separation::SeparationParams { neighbor_radius: d.f32()? }),
        16 => Behavior::Cohesion(cohesion::CohesionParams { neighbor_radius: d.f32()? }),
        17 => Behavior::Alignment(alignment::AlignmentParams { neighbor_radius: d.f32()?, time_to_target: d.f32()? }),
        18 => {
            let waypoints = d.list(|d| d.vec2())?;
            let path_radius = d.f32()?;
            let mode = match d.u8()? {
                0 => PathMode::Once,
                1 => PathMode::Loop,
                2 => PathMode::PingPong,
                t => return Err(d.err(format!("unknown path mode {t}"))),
            };
            Behavior::PathFollowing(path_following::PathFollowingParams { waypoints, path_radius, mode })
        }
        19 => Behavior::LeaderFollowing(leader_following::LeaderFollowingParams {
            leader: d.u32()?,
            behind_distance: d.f32()?,
            leader_sight_radius: d.f32()?,
            separation_radius: d.f32()?,
            separation_weight: d.f32()?,
            arrive: decode_arrive_tuning(d)?,
        }),
        20 => Behavior::ReciprocalAvoidance(reciprocal_avoidance::ReciprocalAvoidanceParams {
            time_horizon: d.f32()?,
            obstacle_time_horizon: d.f32()?,
            neighbor_dist: d.f32()?,
            max_neighbors: d.u32()?,
        }),
        t => return Err(d.err(format!("unknown behaviour tag {t}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec2;
    use crate::sim::behaviors::Behavior;
    use proptest::prelude::*;

    fn all_behaviors() -> Vec<Behavior> {
        use crate::sim::behaviors::*;
        let t = Target::Point(Vec2::new(1.5, -2.25));
        vec![
            Behavior::Seek(seek::SeekParams { target: Target::Agent(7) }),
            Behavior::Flee(flee::FleeParams { target: t, panic_distance: 3.0 }),
            Behavior::Arrive(arrive::ArriveParams { target: t, tuning: arrive::ArriveTuning::default() }),
            Behavior::Pursue(pursue::PursueParams { target: 3, max_prediction: 0.7 }),
            Behavior::Evade(evade::EvadeParams { target: 4, panic_distance: 9.0, max_prediction: 1.1 }),
            Behavior::Align(align::AlignParams { target: align::AlignTarget::Orientation(0.3), tuning: align::AlignTuning::default() }),
            Behavior::Align(align::AlignParams { target: align::AlignTarget::Agent(12), tuning: align::AlignTuning::default() }),
            Behavior::Face(face::FaceParams { target: t, tuning: align::AlignTuning::default() }),
            Behavior::LookWhereYouAreGoing(look_where_you_are_going::LookParams { tuning: align::AlignTuning::default() }),
            Behavior::VelocityMatch(velocity_match::VelocityMatchParams { target: 2, time_to_target: 0.1 }),
            Behavior::Wander(wander::WanderParams { variant: wander::WanderVariant::Circle, ..wander::WanderParams::default() }),
            Behavior::RandomTarget(random_target::RandomTargetParams { center: Some(Vec2::new(3.0, 4.0)), ..random_target::RandomTargetParams::default() }),
            Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams { min_box_length: Some(2.0), braking_weight: 0.2, lateral_base: 0.1 }),
            Behavior::AheadAvoidance(ahead_avoidance::AheadAvoidanceParams { ahead_len: 1.0, max_avoid_force: 2.0, margin: 0.5 }),
            Behavior::WallAvoidance(wall_avoidance::WallAvoidanceParams { look_ahead: 3.0, avoid_distance: 1.0 }),
            Behavior::AgentAvoidance(agent_avoidance::AgentAvoidanceParams { look_ahead: 2.0, avoid_radius: 1.0 }),
            Behavior::Separation(separation::SeparationParams { neighbor_radius: 2.0 }),
            Behavior::Cohesion(cohesion::CohesionParams { neighbor_radius: 5.0 }),
            Behavior::Alignment(alignment::AlignmentParams { neighbor_radius: 5.0, time_to_target: 0.1 }),
            Behavior::PathFollowing(path_following::PathFollowingParams {
                waypoints: vec![Vec2::ZERO, Vec2::ONE],
                path_radius: 1.0,
                mode: PathMode::PingPong,
            }),
            Behavior::LeaderFollowing(leader_following::LeaderFollowingParams { leader: 1, ..leader_following::LeaderFollowingParams::default() }),
            Behavior::ReciprocalAvoidance(reciprocal_avoidance::ReciprocalAvoidanceParams::default()),
        ]
    }

    fn round_trip(c: &Command) -> Command {
        let mut e = Enc::default();
        encode_command(&mut e, c);
        let mut d = Dec::new(&e.buf);
        let back = decode_command(&mut d).unwrap();
        assert!(d.done(), "{c:?}: bytes left");
        back
    }

    #[test]
    fn every_command_and_behaviour_round_trips_bit_exactly() {
        let entries: Vec<BehaviorEntry> = all_behaviors().into_iter().enumerate().map(|(i, b)| BehaviorEntry { behavior: b, weight: -0.5 + i as f32, priority: i as u8 }).collect();
        let mut cmds = vec![
            Command::Despawn(u32::MAX),
            Command::SetBehaviors { agent: 5, entries: entries.clone() },
            Command::RemoveBehavior { agent: 5, kind: BehaviorKind::Separation },
            Command::ResetBehaviors { agent: 0 },
            Command::AddObstacle { center: Vec2::new(f32::MIN_POSITIVE, -0.0), radius: 1e-30 },
            Command::MoveObstacle { id: 3, center: Vec2::new(1.0, 2.0), radius: None },
            Command::MoveObstacle { id: 3, center: Vec2::new(1.0, 2.0), radius: Some(4.0) },
            Command::RemoveObstacle(9),
            Command::AddWall { a: Vec2::ZERO, b: Vec2::new(5.0, 5.0) },
            Command::RemoveWall(2),
            Command::MoveTo { agents: vec![5, 3, 1000, 1000, 0, u32::MAX], target: Vec2::new(3.0, 4.0), stopping_distance: 0.5 },
        ];
        for e in entries {
            cmds.push(Command::AddBehavior { agent: 1, entry: e });
        }
        for (area, binding) in [
            (SpawnArea::Rect { min: Vec2::ZERO, max: Vec2::ONE }, TargetBinding::AsGiven),
            (SpawnArea::Disc { center: Vec2::ONE, radius: 2.0 }, TargetBinding::Antipode { center: Vec2::ONE }),
            (SpawnArea::Ring { center: Vec2::ONE, radius: 2.0 }, TargetBinding::GroupMember { group: 3 }),
            (SpawnArea::Points(vec![Vec2::ONE, Vec2::NEG_ONE]), TargetBinding::AsGiven),
        ] {
            cmds.push(Command::Spawn(SpawnSpec { binding, orientation: Some(1.0), initial_speed: 2.0, behaviors: all_behaviors().into_iter().map(BehaviorEntry::new).collect(), ..SpawnSpec::new("g", 4, area) }));
        }
        for c in &cmds {
            let back = round_trip(c);
            // Debug prints the float bits' values; compare that too (PartialEq has -0.0 == 0.0).
            assert_eq!(&back, c);
            assert_eq!(format!("{back:?}"), format!("{c:?}"));
        }
    }

    #[test]
    fn truncated_or_garbage_input_is_an_error_not_a_panic() {
        let mut e = Enc::default();
        encode_command(&mut e, &Command::MoveTo { agents: vec![1, 2, 3], target: Vec2::ONE, stopping_distance: 1.0 });
        for n in 0..e.buf.len() {
            assert!(decode_command(&mut Dec::new(&e.buf[..n])).is_err(), "prefix {n}");
        }
        assert!(decode_command(&mut Dec::new(&[200])).is_err());
        // A huge list length is refused before allocating.
        let mut e = Enc::default();
        e.u8(11);
        e.u64(u64::MAX);
        assert!(decode_command(&mut Dec::new(&e.buf)).is_err());
    }

    proptest! {
        #[test]
        fn move_to_ids_and_floats_round_trip(ids in proptest::collection::vec(any::<u32>(), 0..64), x in any::<f32>(), y in any::<f32>(), s in any::<f32>()) {
            let c = Command::MoveTo { agents: ids.clone(), target: Vec2::new(x, y), stopping_distance: s };
            let mut e = Enc::default();
            encode_command(&mut e, &c);
            let back = decode_command(&mut Dec::new(&e.buf)).unwrap();
            let Command::MoveTo { agents, target, stopping_distance } = back else { panic!("{back:?}") };
            prop_assert_eq!(agents, ids);
            prop_assert_eq!((target.x.to_bits(), target.y.to_bits(), stopping_distance.to_bits()), (x.to_bits(), y.to_bits(), s.to_bits()));
        }

        #[test]
        fn varints_round_trip(v in any::<u64>()) {
            let mut e = Enc::default();
            e.u64(v);
            prop_assert!(e.buf.len() <= 10);
            prop_assert_eq!(Dec::new(&e.buf).u64().unwrap(), v);
        }
    }
}
