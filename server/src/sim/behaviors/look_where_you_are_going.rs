//! LookWhereYouAreGoing (000, 004): Align towards the velocity's direction.

use super::align::{AlignTuning, align_to};
use crate::sim::agent::Agent;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of LookWhereYouAreGoing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LookParams {
    /// Align tuning.
    pub tuning: AlignTuning,
}

/// Below this speed the agent keeps its orientation (and brakes any turn).
pub const MIN_SPEED: f32 = 1e-3;

/// The steering; with no speed it only brakes the turn.
pub fn steer(agent: &Agent, p: &LookParams, _view: &WorldView) -> Steering {
    let v = agent.velocity;
    let target = if v.length() > MIN_SPEED { crate::sim::math::atan2(v.y, v.x) } else { agent.orientation };
    align_to(agent, target, &p.tuning)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;
    use glam::Vec2;

    #[test]
    fn looks_along_the_velocity() {
        // Velocity (−1, 0): wanted π, r = π → −π? wrap(π) = π, so turn +: ω* = 6 → clamp 20.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(-1.0, 0.0))]);
        assert_near(steer_one(&w, 1, &Behavior::LookWhereYouAreGoing(LookParams::default())).angular, 20.0);
        // Velocity (1, 0.2): wanted 0.1974 inside slow: ω* = 6·0.1974/0.5 = 2.3688 → /0.1 → clamp 20.
        // With ω = 2.3: (2.3688 − 2.3)/0.1 = 0.688.
        let mut a = agent_at(1, Vec2::ZERO, Vec2::new(1.0, 0.2));
        a.angular_velocity = 2.3;
        let w = world_with(vec![a]);
        let expect = (6.0 * 0.2f32.atan2(1.0) / 0.5 - 2.3) / 0.1;
        assert_near(steer_one(&w, 1, &Behavior::LookWhereYouAreGoing(LookParams::default())).angular, expect);
    }
}
