//! AgentAvoidance (000 `AvoidAgent`): ahead = p + dir(v)·look_ahead; the other agent nearest
//! `ahead` with |ahead − q| < avoid_radius is the threat; seek q + dir(p − q)·avoid_radius.

use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_radius};
use crate::sim::math::dir;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

use super::seek::seek_point;

/// Parameters of AgentAvoidance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentAvoidanceParams {
    /// Distance of the probe point ahead (default 3).
    pub look_ahead: f32,
    /// Agents within this distance of the probe are threats (default 2).
    pub avoid_radius: f32,
}

impl Default for AgentAvoidanceParams {
    fn default() -> Self {
        AgentAvoidanceParams { look_ahead: 3.0, avoid_radius: 2.0 }
    }
}

impl AgentAvoidanceParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_radius("look_ahead", self.look_ahead)?;
        // The agent query's radius.
        check_radius("avoid_radius", self.avoid_radius).map(|_| ())
    }
}

/// The steering; zero when no other agent is near the probe.
pub fn steer(agent: &Agent, p: &AgentAvoidanceParams, view: &WorldView) -> Steering {
    let ahead = agent.position + dir(agent.velocity) * p.look_ahead;
    let mut threat: Option<(f32, glam::Vec2)> = None;
    view.for_each_agent_near(ahead, p.avoid_radius, |o| {
        if o.id == agent.id {
            return;
        }
        let d = ahead.distance(o.position);
        if d < p.avoid_radius && threat.is_none_or(|t| d < t.0) {
            threat = Some((d, o.position));
        }
    });
    let Some((_, q)) = threat else { return Steering::ZERO };
    seek_point(agent, q + dir(agent.position - q) * p.avoid_radius)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;
    use glam::Vec2;

    #[test]
    fn seeks_the_point_beside_the_threat() {
        // Agent at 0 moving (1,0): ahead (3,0). Threat at (3,1): distance 1 < 2.
        // target = (3,1) + dir((0,0)−(3,1))·2 = (3,1) + (−0.9487,−0.3162)·2 = (1.1026, 0.3675);
        // desired = dir(target)·5 = (4.7434, 1.5811); steering = desired − (1,0) = (3.7434, 1.5811).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(1.0, 0.0)), agent_at(2, Vec2::new(3.0, 1.0), Vec2::ZERO)]);
        let s = steer_one(&w, 1, &Behavior::AgentAvoidance(AgentAvoidanceParams::default()));
        let target = Vec2::new(3.0, 1.0) + Vec2::new(-3.0, -1.0).normalize() * 2.0;
        assert_close(s.linear, target.normalize() * 5.0 - Vec2::new(1.0, 0.0));
        assert_close(s.linear, Vec2::new(3.7434, 1.5811));
    }

    #[test]
    fn far_agents_are_no_threat() {
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(1.0, 0.0)), agent_at(2, Vec2::new(3.0, 2.5), Vec2::ZERO)]);
        assert_eq!(steer_one(&w, 1, &Behavior::AgentAvoidance(AgentAvoidanceParams::default())), Steering::ZERO);
    }
}
