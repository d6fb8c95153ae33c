//! Seek (000, 003): head for the target at full speed.
//! desired = dir(target − p)·max_speed; steering = clamp(desired − v, max_accel).

use glam::Vec2;

use super::Target;
use crate::sim::agent::Agent;
use crate::sim::math::{clamp_len, dir};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of Seek.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeekParams {
    /// Point or agent to head for.
    pub target: Target,
}

/// Seek towards a point: the rule shared by every behaviour that "seeks" something.
pub fn seek_point(agent: &Agent, target: Vec2) -> Steering {
    let desired = dir(target - agent.position) * agent.limits.max_speed;
    Steering::linear(clamp_len(desired - agent.velocity, agent.limits.max_accel))
}

/// Seek's steering; zero when the target agent is gone.
pub fn steer(agent: &Agent, p: &SeekParams, view: &WorldView) -> Steering {
    match p.target.resolve(view) {
        Some(t) => seek_point(agent, t.position),
        None => Steering::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{Behavior, Target};
    use super::*;

    #[test]
    fn seek_from_rest_and_while_moving() {
        // At rest at origin, target (3,4): desired = (0.6,0.8)·5 = (3,4); steering (3,4).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(3.0, 4.0), Vec2::ZERO)]);
        let s = steer_one(&w, 1, &Behavior::Seek(SeekParams { target: Target::Point(Vec2::new(3.0, 4.0)) }));
        assert_close(s.linear, Vec2::new(3.0, 4.0));
        // The same aiming at agent 2.
        let s = steer_one(&w, 1, &Behavior::Seek(SeekParams { target: Target::Agent(2) }));
        assert_close(s.linear, Vec2::new(3.0, 4.0));
        // Moving (−5,0): desired − v = (8,4), |.|=8.944 < 10: unclamped.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(-5.0, 0.0))]);
        let s = steer_one(&w, 1, &Behavior::Seek(SeekParams { target: Target::Point(Vec2::new(3.0, 4.0)) }));
        assert_close(s.linear, Vec2::new(8.0, 4.0));
        // Moving (−5,−5): desired − v = (8,9), |.|=12.04 → clamped to 10.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(-5.0, -5.0))]);
        let s = steer_one(&w, 1, &Behavior::Seek(SeekParams { target: Target::Point(Vec2::new(3.0, 4.0)) }));
        assert_close(s.linear, Vec2::new(8.0, 9.0) * (10.0 / 145f32.sqrt()));
    }

    #[test]
    fn seek_own_position_or_missing_agent_is_finite() {
        let w = world_with(vec![agent_at(1, Vec2::new(2.0, 2.0), Vec2::new(1.0, 0.0))]);
        let s = steer_one(&w, 1, &Behavior::Seek(SeekParams { target: Target::Point(Vec2::new(2.0, 2.0)) }));
        assert_close(s.linear, Vec2::new(-1.0, 0.0)); // desired zero → brake
        let s = steer_one(&w, 1, &Behavior::Seek(SeekParams { target: Target::Agent(99) }));
        assert_eq!(s, Steering::ZERO);
    }
}
