//! Arrive (000, 003): seek, slowing down inside `slow_radius`, and stop inside `target_radius`.
//!
//! speed = max_speed, or max_speed·dist/slow_radius inside slow_radius;
//! steering = clamp((dir·speed − v)/time_to_target, max_accel).
//!
//! Inside `target_radius` 000's code returns zero steering, which leaves the agent drifting
//! through the target at its last speed (up to max_speed·target_radius/slow_radius) and back —
//! the oscillation 000's own comment ("停止", stop) says it should not have. We take the comment:
//! inside `target_radius` the desired velocity is zero, so the agent brakes to rest
//! (steering = clamp(−v/time_to_target, max_accel)), which is zero once it is at rest.

use glam::Vec2;

use super::Target;
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative, check_positive};
use crate::sim::math::clamp_len;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Tuning of arrive, shared with MoveTo and RandomTarget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArriveTuning {
    /// Inside this distance the agent has arrived and stops (default 1).
    pub target_radius: f32,
    /// Inside this distance the agent slows down in proportion (default 5).
    pub slow_radius: f32,
    /// Time over which the velocity error is corrected, seconds (default 0.25).
    pub time_to_target: f32,
}

impl Default for ArriveTuning {
    fn default() -> Self {
        ArriveTuning { target_radius: 1.0, slow_radius: 5.0, time_to_target: 0.25 }
    }
}

impl ArriveTuning {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_non_negative("target_radius", self.target_radius)?;
        check_positive("slow_radius", self.slow_radius)?;
        check_positive("time_to_target", self.time_to_target)?;
        if self.time_to_target < 1e-3 {
            return Err(SimError::invalid("time_to_target", "must be at least 0.001"));
        }
        Ok(())
    }
}

/// Parameters of Arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArriveParams {
    /// Point or agent to arrive at.
    pub target: Target,
    /// Radii and time constant.
    pub tuning: ArriveTuning,
}

impl ArriveParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        self.target.validate("target")?;
        self.tuning.validate()
    }
}

/// Arrive at a point (shared with RandomTarget, LeaderFollowing and MoveTo).
pub fn arrive_point(agent: &Agent, target: Vec2, t: &ArriveTuning) -> Steering {
    let to = target - agent.position;
    let dist = to.length();
    let desired = if dist < t.target_radius || dist <= 1e-6 {
        Vec2::ZERO
    } else {
        let speed = if dist > t.slow_radius {
            agent.limits.max_speed
        } else {
            agent.limits.max_speed * dist / t.slow_radius
        };
        to / dist * speed
    };
    Steering::linear(clamp_len((desired - agent.velocity) / t.time_to_target, agent.limits.max_accel))
}

/// Arrive's steering; zero when the target agent is gone.
pub fn steer(agent: &Agent, p: &ArriveParams, view: &WorldView) -> Steering {
    match p.target.resolve(view) {
        Some(k) => arrive_point(agent, k.position, &p.tuning),
        None => Steering::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{Behavior, Target};
    use super::*;

    fn arrive(x: f32) -> Behavior {
        Behavior::Arrive(ArriveParams { target: Target::Point(Vec2::new(x, 0.0)), tuning: ArriveTuning::default() })
    }

    #[test]
    fn arrive_full_speed_slowing_and_stopping() {
        // Far (dist 20 > 5): desired (5,0); from rest (5,0)/0.25 = (20,0) → clamp 10.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        assert_close(steer_one(&w, 1, &arrive(20.0)).linear, Vec2::new(10.0, 0.0));
        // dist 2 inside slow radius, moving (3,0): desired 5·2/5 = 2 → (2−3)/0.25 = −4.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(3.0, 0.0))]);
        assert_close(steer_one(&w, 1, &arrive(2.0)).linear, Vec2::new(-4.0, 0.0));
        // dist 0.5 inside target radius, moving (3,0): brake (0−3)/0.25 = −12 → clamp −10.
        assert_close(steer_one(&w, 1, &arrive(0.5)).linear, Vec2::new(-10.0, 0.0));
        // ... and moving (1,0): (0−1)/0.25 = −4, under the clamp.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(1.0, 0.0))]);
        assert_close(steer_one(&w, 1, &arrive(0.5)).linear, Vec2::new(-4.0, 0.0));
        // At rest inside target radius: nothing to do.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        assert_eq!(steer_one(&w, 1, &arrive(0.5)), Steering::ZERO);
    }

    #[test]
    fn tuning_validation_names_fields() {
        let t = ArriveTuning { slow_radius: 0.0, ..ArriveTuning::default() };
        assert!(t.validate().unwrap_err().to_string().contains("slow_radius"));
        let t = ArriveTuning { time_to_target: f32::NAN, ..ArriveTuning::default() };
        assert!(t.validate().unwrap_err().to_string().contains("time_to_target"));
    }
}
