//! Alignment, the flocking rule (Reynolds; 000 VelocityMatch): match the mean velocity of the
//! neighbours within `neighbor_radius`: clamp((mean_v − v)/time_to_target, max_accel).

use glam::Vec2;

use super::velocity_match::match_velocity;
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_positive, check_radius};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of Alignment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlignmentParams {
    /// Neighbours within this distance count.
    pub neighbor_radius: f32,
    /// Time over which the velocity error is corrected, seconds (default 0.1, as VelocityMatch).
    pub time_to_target: f32,
}

impl AlignmentParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_radius("neighbor_radius", self.neighbor_radius)?;
        check_positive("time_to_target", self.time_to_target)?;
        if self.time_to_target < 1e-3 {
            return Err(SimError::invalid("time_to_target", "must be at least 0.001"));
        }
        Ok(())
    }
}

/// Alignment's steering; zero with no neighbours.
pub fn steer(agent: &Agent, p: &AlignmentParams, view: &WorldView) -> Steering {
    let mut sum = Vec2::ZERO;
    let mut n = 0u32;
    view.for_each_agent_near(agent.position, p.neighbor_radius, |o| {
        if o.id != agent.id {
            sum += o.velocity;
            n += 1;
        }
    });
    if n == 0 { Steering::ZERO } else { match_velocity(agent, sum / n as f32, p.time_to_target) }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;

    #[test]
    fn matches_the_mean_neighbour_velocity() {
        // Neighbours moving (1,0) and (0,1): mean (0.5,0.5); own v (0,0): (5,5) over 0.1 → 7.07 < 10.
        let w = world_with(vec![
            agent_at(1, Vec2::ZERO, Vec2::ZERO),
            agent_at(2, Vec2::new(1.0, 0.0), Vec2::new(1.0, 0.0)),
            agent_at(3, Vec2::new(0.0, 1.0), Vec2::new(0.0, 1.0)),
        ]);
        let s = steer_one(&w, 1, &Behavior::Alignment(AlignmentParams { neighbor_radius: 3.0, time_to_target: 0.1 }));
        assert_close(s.linear, Vec2::new(5.0, 5.0));
    }
}
