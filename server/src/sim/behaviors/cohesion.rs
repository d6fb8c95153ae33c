//! Cohesion (004, Reynolds): seek the centre of the neighbours within `neighbor_radius`.

use glam::Vec2;

use super::seek::seek_point;
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_radius};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of Cohesion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CohesionParams {
    /// Neighbours within this distance count.
    pub neighbor_radius: f32,
}

impl CohesionParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_radius("neighbor_radius", self.neighbor_radius)?;
        Ok(())
    }
}

/// Cohesion's steering; zero with no neighbours.
pub fn steer(agent: &Agent, p: &CohesionParams, view: &WorldView) -> Steering {
    let mut sum = Vec2::ZERO;
    let mut n = 0u32;
    view.for_each_agent_near(agent.position, p.neighbor_radius, |o| {
        if o.id != agent.id {
            sum += o.position;
            n += 1;
        }
    });
    if n == 0 { Steering::ZERO } else { seek_point(agent, sum / n as f32) }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;

    #[test]
    fn seeks_the_neighbours_centre() {
        // Neighbours (2,0) and (0,2): centre (1,1); desired dir·5 = (3.5355, 3.5355).
        let w = world_with(vec![
            agent_at(1, Vec2::ZERO, Vec2::ZERO),
            agent_at(2, Vec2::new(2.0, 0.0), Vec2::ZERO),
            agent_at(3, Vec2::new(0.0, 2.0), Vec2::ZERO),
            agent_at(4, Vec2::new(-9.0, 0.0), Vec2::ZERO),
        ]);
        let s = steer_one(&w, 1, &Behavior::Cohesion(CohesionParams { neighbor_radius: 3.0 }));
        assert_close(s.linear, Vec2::new(3.5355, 3.5355));
        let s = steer_one(&w, 4, &Behavior::Cohesion(CohesionParams { neighbor_radius: 3.0 }));
        assert_eq!(s, Steering::ZERO);
    }
}
