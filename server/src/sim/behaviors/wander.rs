//! Wander (000 Millington; 003 circle variant). Random numbers come from the agent's seeded
//! stream for the tick, so runs repeat exactly.
//!
//! * `Millington` (000): wander_θ += rand(−1,1)·wander_rate; centre = p + heading·wander_offset;
//!   target = centre + heading(θ + wander_θ)·wander_radius; seek the target.
//! * `Circle` (003): a circle of `wander_radius` at dir(v)·wander_offset ahead; each tick a new
//!   random angle picks a point on it; the force (centre + point)/mass is the steering
//!   (clamped to max_accel by the blend).

use super::Scratch;
use super::seek::seek_point;
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative};
use crate::sim::math::{dir, heading};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Which wander of the seeds to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WanderVariant {
    /// 000: a wander angle drifting by `wander_rate` per tick, seek a point on a circle ahead.
    #[default]
    Millington,
    /// 003: a random point on a circle ahead of the velocity each tick, used as a force.
    Circle,
}

/// Parameters of Wander.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WanderParams {
    /// Variant.
    pub variant: WanderVariant,
    /// Distance of the wander circle ahead of the agent (default 1.5).
    pub wander_offset: f32,
    /// Radius of the wander circle (default 1).
    pub wander_radius: f32,
    /// Largest change of the wander angle per tick, radians (default 0.5; Millington only).
    pub wander_rate: f32,
}

impl Default for WanderParams {
    fn default() -> Self {
        WanderParams { variant: WanderVariant::Millington, wander_offset: 1.5, wander_radius: 1.0, wander_rate: 0.5 }
    }
}

impl WanderParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_non_negative("wander_offset", self.wander_offset)?;
        check_non_negative("wander_radius", self.wander_radius)?;
        check_non_negative("wander_rate", self.wander_rate).map(|_| ())
    }
}

/// Wander's steering; the next wander angle goes to `scratch.memory`.
pub fn steer(agent: &Agent, p: &WanderParams, _view: &WorldView, scratch: &mut Scratch) -> Steering {
    match p.variant {
        WanderVariant::Millington => {
            let wander = crate::sim::math::wrap_angle(agent.memory.wander_angle + scratch.rng.binomial() * p.wander_rate);
            scratch.memory.wander_angle = wander;
            let centre = agent.position + agent.heading() * p.wander_offset;
            let target = centre + heading(agent.orientation + wander) * p.wander_radius;
            seek_point(agent, target)
        }
        WanderVariant::Circle => {
            let angle = scratch.rng.range(0.0, std::f32::consts::TAU);
            scratch.memory.wander_angle = angle;
            let force = dir(agent.velocity) * p.wander_offset + heading(angle) * p.wander_radius;
            Steering::linear(force / agent.limits.mass)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::sim::rng::Rng;
    use glam::Vec2;

    #[test]
    fn millington_wander_matches_hand_computation() {
        let a = agent_at(1, Vec2::ZERO, Vec2::ZERO);
        let w = world_with(vec![a.clone()]);
        let view = w.view();
        let mut s = scratch_for(&a);
        let p = WanderParams::default();
        let out = steer(&a, &p, &view, &mut s);
        // Replay the draw: wander = 0 + r·0.5; target = (1.5,0) + (cos w, sin w).
        let r = Rng::for_agent(1, 1, 0).binomial();
        let wa = r * 0.5;
        assert_near(s.memory.wander_angle, wa);
        let target = Vec2::new(1.5 + wa.cos(), wa.sin());
        assert_close(out.linear, target.normalize() * 5.0);
        // The wander angle changes by at most the rate per tick.
        assert!(wa.abs() <= 0.5);
    }

    #[test]
    fn circle_wander_is_centre_plus_random_point_over_mass() {
        let mut a = agent_at(1, Vec2::ZERO, Vec2::new(0.0, 2.0));
        a.limits.mass = 2.0;
        let w = world_with(vec![a.clone()]);
        let view = w.view();
        let mut s = scratch_for(&a);
        let p = WanderParams { variant: WanderVariant::Circle, ..WanderParams::default() };
        let out = steer(&a, &p, &view, &mut s);
        let ang = Rng::for_agent(1, 1, 0).range(0.0, std::f32::consts::TAU);
        let expect = (Vec2::new(0.0, 1.5) + Vec2::new(ang.cos(), ang.sin())) / 2.0;
        assert_close(out.linear, expect);
    }

    #[test]
    fn same_seed_same_wander() {
        let a = agent_at(7, Vec2::ONE, Vec2::X);
        let w = world_with(vec![a.clone()]);
        let view = w.view();
        let p = WanderParams::default();
        let x = steer(&a, &p, &view, &mut scratch_for(&a));
        let y = steer(&a, &p, &view, &mut scratch_for(&a));
        assert_eq!(x, y);
    }
}
