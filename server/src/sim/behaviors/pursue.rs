//! Pursue (000, 002, 003): seek where the target will be.
//!
//! Early out (002): when the target is ahead (dot(to, heading) > 0) and faces us
//! (dot(heading, target.heading) < −0.95), seek its current position. Otherwise
//! look_ahead = min(dist/(max_speed + target.speed), max_prediction) and seek
//! target.p + target.v·look_ahead.

use glam::Vec2;

use super::seek::seek_point;
use crate::sim::agent::{Agent, AgentId};
use crate::sim::error::{SimError, check_non_negative};
use crate::sim::math::heading;
use crate::sim::steering::Steering;
use crate::sim::view::{Kinematic, WorldView};

/// Parameters of Pursue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PursueParams {
    /// Agent to chase.
    pub target: AgentId,
    /// Longest look-ahead, seconds (default 5).
    pub max_prediction: f32,
}

impl PursueParams {
    /// Default longest look-ahead (000).
    pub const DEFAULT_MAX_PREDICTION: f32 = 5.0;

    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_non_negative("max_prediction", self.max_prediction).map(|_| ())
    }
}

/// Where the target is expected to be: target.p + target.v·look_ahead.
pub fn predicted_position(agent: &Agent, target: &Kinematic, max_prediction: f32) -> Vec2 {
    let dist = agent.position.distance(target.position);
    let closing = agent.limits.max_speed + target.velocity.length();
    let look_ahead = if closing > 1e-6 { (dist / closing).min(max_prediction) } else { max_prediction };
    target.position + target.velocity * look_ahead
}

/// Pursue's steering; zero when the target is gone.
pub fn steer(agent: &Agent, p: &PursueParams, view: &WorldView) -> Steering {
    let Some(target) = view.agent(p.target) else { return Steering::ZERO };
    let k = Kinematic { position: target.position, velocity: target.velocity, orientation: target.orientation };
    let to = k.position - agent.position;
    let my_heading = agent.heading();
    if to.dot(my_heading) > 0.0 && my_heading.dot(heading(k.orientation)) < -0.95 {
        return seek_point(agent, k.position);
    }
    seek_point(agent, predicted_position(agent, &k, p.max_prediction))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;

    #[test]
    fn pursue_leads_a_crossing_target() {
        // Pursuer at rest at origin; target at (10,0) moving (0,5), facing +y.
        // look_ahead = 10/(5+5) = 1 → predicted (10,5); desired = dir(10,5)·5 = (4.472, 2.236).
        let mut t = agent_at(2, Vec2::new(10.0, 0.0), Vec2::new(0.0, 5.0));
        t.orientation = std::f32::consts::FRAC_PI_2;
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), t]);
        let s = steer_one(&w, 1, &Behavior::Pursue(PursueParams { target: 2, max_prediction: 5.0 }));
        assert_close(s.linear, Vec2::new(10.0, 5.0).normalize() * 5.0);
        // max_prediction 0.2 caps look_ahead: predicted (10,1).
        let s = steer_one(&w, 1, &Behavior::Pursue(PursueParams { target: 2, max_prediction: 0.2 }));
        assert_close(s.linear, Vec2::new(10.0, 1.0).normalize() * 5.0);
    }

    #[test]
    fn pursue_early_out_when_target_ahead_and_facing_us() {
        // Target ahead at (10,0) facing −x (heading dot = −1 < −0.95), moving (0,5) sideways:
        // the early out seeks its current position (10,0): desired (5,0).
        let mut t = agent_at(2, Vec2::new(10.0, 0.0), Vec2::new(0.0, 5.0));
        t.orientation = std::f32::consts::PI;
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), t]);
        let s = steer_one(&w, 1, &Behavior::Pursue(PursueParams { target: 2, max_prediction: 5.0 }));
        assert_close(s.linear, Vec2::new(5.0, 0.0));
    }
}
