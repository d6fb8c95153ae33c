//! Evade (000, 002, 003): flee from where the threat will be, while it is within
//! `panic_distance` (002's 'threat range'); look-ahead as Pursue.

use super::flee::flee_point;
use super::pursue::predicted_position;
use crate::sim::agent::{Agent, AgentId};
use crate::sim::error::{SimError, check_non_negative};
use crate::sim::steering::Steering;
use crate::sim::view::{Kinematic, WorldView};

/// Parameters of Evade.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvadeParams {
    /// Agent to evade.
    pub target: AgentId,
    /// Beyond this distance the threat is ignored (default 10).
    pub panic_distance: f32,
    /// Longest look-ahead, seconds (default 5).
    pub max_prediction: f32,
}

impl EvadeParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_non_negative("panic_distance", self.panic_distance)?;
        check_non_negative("max_prediction", self.max_prediction).map(|_| ())
    }
}

/// Evade's steering; zero when the threat is gone or far.
pub fn steer(agent: &Agent, p: &EvadeParams, view: &WorldView) -> Steering {
    let Some(t) = view.agent(p.target) else { return Steering::ZERO };
    if agent.position.distance(t.position) > p.panic_distance {
        return Steering::ZERO;
    }
    let k = Kinematic { position: t.position, velocity: t.velocity, orientation: t.orientation };
    flee_point(agent, predicted_position(agent, &k, p.max_prediction))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;
    use glam::Vec2;

    #[test]
    fn evade_flees_the_predicted_position() {
        // Threat at (6,0) moving (0,5): look_ahead = 6/(5+5) = 0.6 → predicted (6,3);
        // desired = dir((0,0)−(6,3))·5 = (−4.472, −2.236).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(6.0, 0.0), Vec2::new(0.0, 5.0))]);
        let b = Behavior::Evade(EvadeParams { target: 2, panic_distance: 10.0, max_prediction: 5.0 });
        assert_close(steer_one(&w, 1, &b).linear, Vec2::new(-6.0, -3.0).normalize() * 5.0);
        let b = Behavior::Evade(EvadeParams { target: 2, panic_distance: 5.0, max_prediction: 5.0 });
        assert_eq!(steer_one(&w, 1, &b), Steering::ZERO);
    }
}
