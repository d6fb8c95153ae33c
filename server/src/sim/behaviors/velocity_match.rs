//! VelocityMatch (000): steering = clamp((target.v − v)/time_to_target, max_accel).

use crate::sim::agent::{Agent, AgentId};
use crate::sim::error::{SimError, check_positive};
use crate::sim::math::clamp_len;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of VelocityMatch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VelocityMatchParams {
    /// Agent whose velocity to match.
    pub target: AgentId,
    /// Time over which the velocity error is corrected, seconds (default 0.1).
    pub time_to_target: f32,
}

impl VelocityMatchParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_positive("time_to_target", self.time_to_target)?;
        if self.time_to_target < 1e-3 {
            return Err(SimError::invalid("time_to_target", "must be at least 0.001"));
        }
        Ok(())
    }
}

/// Match a velocity (shared with flocking Alignment).
pub fn match_velocity(agent: &Agent, target_v: glam::Vec2, time_to_target: f32) -> Steering {
    Steering::linear(clamp_len((target_v - agent.velocity) / time_to_target, agent.limits.max_accel))
}

/// The steering; zero when the target is gone.
pub fn steer(agent: &Agent, p: &VelocityMatchParams, view: &WorldView) -> Steering {
    match view.agent(p.target) {
        Some(t) => match_velocity(agent, t.velocity, p.time_to_target),
        None => Steering::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;
    use glam::Vec2;

    #[test]
    fn matches_velocity_with_clamp() {
        // (0.5,0.5) − (0,0) over 0.1 → (5,5), |.| = 7.07 < 10.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::ONE, Vec2::new(0.5, 0.5))]);
        let b = Behavior::VelocityMatch(VelocityMatchParams { target: 2, time_to_target: 0.1 });
        assert_close(steer_one(&w, 1, &b).linear, Vec2::new(5.0, 5.0));
        // Time 0.01 → (50,50) → clamp to 10 along the diagonal.
        let b = Behavior::VelocityMatch(VelocityMatchParams { target: 2, time_to_target: 0.01 });
        assert_close(steer_one(&w, 1, &b).linear, Vec2::new(1.0, 1.0).normalize() * 10.0);
    }
}
