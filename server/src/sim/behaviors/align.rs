//! Align (000): turn to a target orientation, slowing the turn inside `slow_radius`.
//!
//! r = wrap(target θ − θ) into (−π, π]; ω* = max_rotation, or max_rotation·|r|/slow_radius
//! inside slow_radius, with the sign of r; angular = clamp((ω* − ω)/time_to_target,
//! max_angular_accel). Inside `target_radius` 000 returns zero, which leaves the agent spinning
//! past the target; as with Arrive we take "stop": ω* = 0 there, so the turn brakes to rest.

use super::face::validate_tuning;
use crate::sim::agent::{Agent, AgentId};
use crate::sim::error::{SimError, check_finite};
use crate::sim::math::wrap_angle;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Tuning shared by Align, Face and LookWhereYouAreGoing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlignTuning {
    /// Inside this angle (rad) the agent has aligned and stops turning (default 0.1).
    pub target_radius: f32,
    /// Inside this angle (rad) the turn slows in proportion (default 0.5).
    pub slow_radius: f32,
    /// Time over which the angular-speed error is corrected, seconds (default 0.1).
    pub time_to_target: f32,
}

impl Default for AlignTuning {
    fn default() -> Self {
        AlignTuning { target_radius: 0.1, slow_radius: 0.5, time_to_target: 0.1 }
    }
}

impl AlignTuning {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        validate_tuning(self)
    }
}

/// What Align turns towards.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AlignTarget {
    /// A fixed orientation, radians.
    Orientation(f32),
    /// Another agent's orientation.
    Agent(AgentId),
}

/// Parameters of Align.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlignParams {
    /// Orientation or agent to match.
    pub target: AlignTarget,
    /// Radii and time constant.
    pub tuning: AlignTuning,
}

impl AlignParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        if let AlignTarget::Orientation(o) = self.target {
            check_finite("target", o)?;
        }
        self.tuning.validate()
    }
}

/// Turn towards orientation `target` (shared with Face and LookWhereYouAreGoing).
pub fn align_to(agent: &Agent, target: f32, t: &AlignTuning) -> Steering {
    let r = wrap_angle(target - agent.orientation);
    let size = r.abs();
    let goal = if size < t.target_radius || size <= 1e-7 {
        0.0
    } else if size > t.slow_radius {
        agent.limits.max_rotation * r.signum()
    } else {
        agent.limits.max_rotation * size / t.slow_radius * r.signum()
    };
    let angular = (goal - agent.angular_velocity) / t.time_to_target;
    let m = agent.limits.max_angular_accel;
    Steering::angular(angular.clamp(-m, m))
}

/// Align's steering; zero when the target agent is gone.
pub fn steer(agent: &Agent, p: &AlignParams, view: &WorldView) -> Steering {
    let target = match p.target {
        AlignTarget::Orientation(o) => o,
        AlignTarget::Agent(id) => match view.agent(id) {
            Some(a) => a.orientation,
            None => return Steering::ZERO,
        },
    };
    align_to(agent, target, &p.tuning)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;
    use glam::Vec2;

    fn align(o: f32) -> Behavior {
        Behavior::Align(AlignParams { target: AlignTarget::Orientation(o), tuning: AlignTuning::default() })
    }

    #[test]
    fn align_turns_the_short_way_with_clamps() {
        // Limits: max_rotation 6, max_angular_accel 20.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        // r = 1 > slow 0.5: ω* = 6 → (6 − 0)/0.1 = 60 → clamp 20.
        assert_near(steer_one(&w, 1, &align(1.0)).angular, 20.0);
        // r = 0.25 inside slow: ω* = 6·0.25/0.5 = 3; with ω = 2.5: (3 − 2.5)/0.1 = 5.
        let mut a = agent_at(1, Vec2::ZERO, Vec2::ZERO);
        a.angular_velocity = 2.5;
        let w2 = world_with(vec![a]);
        assert_near(steer_one(&w2, 1, &align(0.25)).angular, 5.0);
        // Target 3π/2 from 0 wraps to −π/2: turn negative, −20.
        assert_near(steer_one(&w, 1, &align(3.0 * std::f32::consts::FRAC_PI_2)).angular, -20.0);
        // Inside target radius at rest: nothing.
        assert_near(steer_one(&w, 1, &align(0.05)).angular, 0.0);
        // Inside target radius while turning at ω = 1: brake (0 − 1)/0.1 = −10.
        let mut a = agent_at(1, Vec2::ZERO, Vec2::ZERO);
        a.angular_velocity = 1.0;
        let w3 = world_with(vec![a]);
        assert_near(steer_one(&w3, 1, &align(0.05)).angular, -10.0);
    }

    #[test]
    fn align_to_another_agents_orientation() {
        let mut b = agent_at(2, Vec2::new(5.0, 0.0), Vec2::ZERO);
        b.orientation = -0.3;
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), b]);
        // r = −0.3: ω* = −6·0.3/0.5 = −3.6 → −36 → clamp −20.
        let s = steer_one(&w, 1, &Behavior::Align(AlignParams { target: AlignTarget::Agent(2), tuning: AlignTuning::default() }));
        assert_near(s.angular, -20.0);
    }
}
