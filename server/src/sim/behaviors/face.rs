//! Face (000, 004): Align towards the direction of the target, orientation_of(target − p).

use super::Target;
use super::align::{AlignTuning, align_to};
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative, check_positive};
use crate::sim::math::orientation_of;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of Face.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceParams {
    /// Point or agent to look at.
    pub target: Target,
    /// Align tuning.
    pub tuning: AlignTuning,
}

impl FaceParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        self.target.validate("target")?;
        self.tuning.validate()
    }
}

pub(crate) fn validate_tuning(t: &AlignTuning) -> Result<(), SimError> {
    check_non_negative("target_radius", t.target_radius)?;
    check_positive("slow_radius", t.slow_radius)?;
    check_positive("time_to_target", t.time_to_target)?;
    if t.time_to_target < 1e-3 {
        return Err(SimError::invalid("time_to_target", "must be at least 0.001"));
    }
    Ok(())
}

/// Face's steering; zero when the target is gone or on top of the agent.
pub fn steer(agent: &Agent, p: &FaceParams, view: &WorldView) -> Steering {
    let Some(k) = p.target.resolve(view) else { return Steering::ZERO };
    let to = k.position - agent.position;
    if to.length_squared() < 1e-12 {
        return Steering::ZERO;
    }
    align_to(agent, orientation_of(to, agent.orientation), &p.tuning)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{Behavior, Target};
    use super::*;
    use glam::Vec2;

    #[test]
    fn face_turns_toward_the_target() {
        // Target at (0,1): wanted orientation π/2, r = 1.571 > 0.5 → ω* = 6 → clamp 20.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        let b = |t| Behavior::Face(FaceParams { target: Target::Point(t), tuning: AlignTuning::default() });
        assert_near(steer_one(&w, 1, &b(Vec2::new(0.0, 1.0))).angular, 20.0);
        // Target at (10, −2): wanted −0.1974, inside slow radius: ω* = −6·0.1974/0.5 = −2.369 → /0.1 = −23.7 → clamp −20.
        assert_near(steer_one(&w, 1, &b(Vec2::new(10.0, -2.0))).angular, -20.0);
        // Target at (10, −0.5): wanted −0.04996 inside target radius 0.1 → 0.
        assert_near(steer_one(&w, 1, &b(Vec2::new(10.0, -0.5))).angular, 0.0);
        // Target on the agent: nothing.
        assert_eq!(steer_one(&w, 1, &b(Vec2::ZERO)), Steering::ZERO);
    }
}
