//! Flee (000, 003): run straight away from the target while it is within `panic_distance`.
//! desired = dir(p − target)·max_speed; steering = clamp(desired − v, max_accel).

use glam::Vec2;

use super::Target;
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative};
use crate::sim::math::{clamp_len, dir};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of Flee.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleeParams {
    /// Point or agent to run from.
    pub target: Target,
    /// Beyond this distance the agent ignores the threat (default 10).
    pub panic_distance: f32,
}

impl FleeParams {
    /// Default panic distance (000).
    pub const DEFAULT_PANIC_DISTANCE: f32 = 10.0;

    pub(crate) fn validate(&self) -> Result<(), SimError> {
        self.target.validate("target")?;
        check_non_negative("panic_distance", self.panic_distance).map(|_| ())
    }
}

/// Flee from a point, with no panic check (shared with Evade).
pub fn flee_point(agent: &Agent, from: Vec2) -> Steering {
    let desired = dir(agent.position - from) * agent.limits.max_speed;
    Steering::linear(clamp_len(desired - agent.velocity, agent.limits.max_accel))
}

/// Flee's steering.
pub fn steer(agent: &Agent, p: &FleeParams, view: &WorldView) -> Steering {
    let Some(t) = p.target.resolve(view) else { return Steering::ZERO };
    if agent.position.distance(t.position) > p.panic_distance {
        return Steering::ZERO;
    }
    flee_point(agent, t.position)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{Behavior, Target};
    use super::*;

    #[test]
    fn flee_inside_and_outside_panic_distance() {
        // Threat at (3,4), distance 5 < 10: desired = (−0.6,−0.8)·5 = (−3,−4).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(1.0, 0.0))]);
        let b = Behavior::Flee(FleeParams { target: Target::Point(Vec2::new(3.0, 4.0)), panic_distance: 10.0 });
        assert_close(steer_one(&w, 1, &b).linear, Vec2::new(-4.0, -4.0));
        // Panic distance 4.9 < 5: no steering.
        let b = Behavior::Flee(FleeParams { target: Target::Point(Vec2::new(3.0, 4.0)), panic_distance: 4.9 });
        assert_eq!(steer_one(&w, 1, &b), Steering::ZERO);
    }
}
