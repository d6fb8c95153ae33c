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

    /// The scratch of agent `id` in tick `tick` of a world seeded 1 (as the world builds it).
    fn scratch_at(a: &Agent, tick: u64) -> Scratch {
        Scratch { rng: Rng::for_agent(1, a.id, tick), memory: a.memory, events: 0 }
    }

    /// `binomial()`'s first draw from the stream of (seed 1, `id`, `tick`), computed outside
    /// Rust (a Python SplitMix64: `-1 + (u >> 40) / 2^23`, exact in f32).
    const DRAW_1_0: f32 = -1.0 + 8_239_528.0 / 8_388_608.0; // agent 1, tick 0: −0.017771721
    const DRAW_1_1: f32 = -1.0 + 15_226_609.0 / 8_388_608.0; // agent 1, tick 1: 0.81515324
    const DRAW_7_3: f32 = -1.0 + 10_575_454.0 / 8_388_608.0; // agent 7, tick 3: 0.26069236
    const DRAW_8_3: f32 = -1.0 + 5_564_944.0 / 8_388_608.0; // agent 8, tick 3: −0.33660698
    const DRAW_7_4: f32 = -1.0 + 4_953_926.0 / 8_388_608.0; // agent 7, tick 4: −0.40944600

    #[test]
    fn millington_wander_matches_hand_computation() {
        // wander_rate 0 takes the draw out: only the geometry of the catalogue (docs/behaviors.md) is left.
        // p = (2, −1), θ = π/2 (heading (0, 1)), v = (1, 0), wander angle π/2.
        let mut a = agent_at(1, Vec2::new(2.0, -1.0), Vec2::new(1.0, 0.0));
        a.orientation = std::f32::consts::FRAC_PI_2;
        a.memory.wander_angle = std::f32::consts::FRAC_PI_2;
        let w = world_with(vec![a.clone()]);
        let view = w.view();
        let mut s = scratch_at(&a, 0);
        let p = WanderParams { wander_rate: 0.0, ..WanderParams::default() };
        let out = steer(&a, &p, &view, &mut s);
        // centre = p + heading·1.5 = (2, 0.5); target = centre + dir(θ + π/2)·1 = (2, 0.5) +
        // (−1, 0) = (1, 0.5); desired = dir((−1, 1.5))·5 = (−10, 15)/√13 = (−2.773501, 4.160251);
        // steering = desired − v = (−3.773501, 4.160251), |·| = 5.617 < max_accel 10.
        assert_close(out.linear, Vec2::new(-3.773_501, 4.160_251));
        assert_eq!(out.angular, 0.0);
        assert_near(s.memory.wander_angle, std::f32::consts::FRAC_PI_2);
    }

    #[test]
    fn millington_wander_angle_drifts_by_the_draw_times_the_rate() {
        // Angle 0, rate 0.25 (not the default, so a hard-coded rate shows): tick 0 adds
        // 0.25·DRAW_1_0 = −0.0044429302, tick 1 adds 0.25·DRAW_1_1 = 0.20378831, so after
        // tick 1 the angle is 0.19934538.
        let mut a = agent_at(1, Vec2::ZERO, Vec2::ZERO);
        let w = world_with(vec![a.clone()]);
        let view = w.view();
        let p = WanderParams { wander_rate: 0.25, ..WanderParams::default() };
        let mut s = scratch_at(&a, 0);
        steer(&a, &p, &view, &mut s);
        assert_eq!(s.memory.wander_angle, 0.25 * DRAW_1_0, "tick 0");
        a.memory = s.memory;
        let mut s = scratch_at(&a, 1);
        steer(&a, &p, &view, &mut s);
        assert_eq!(s.memory.wander_angle, 0.25 * DRAW_1_0 + 0.25 * DRAW_1_1, "tick 1");
        assert!((s.memory.wander_angle - 0.199_345_38).abs() < 1e-6, "tick 1: {}", s.memory.wander_angle);
        // Over many ticks each step stays within ±rate and uses most of it.
        let mut biggest = 0.0f32;
        for tick in 2..200 {
            a.memory = s.memory;
            s = scratch_at(&a, tick);
            steer(&a, &p, &view, &mut s);
            let step = crate::sim::math::wrap_angle(s.memory.wander_angle - a.memory.wander_angle);
            assert!(step.abs() <= 0.25 + 1e-6, "tick {tick}: step {step}");
            biggest = biggest.max(step.abs());
        }
        assert!(biggest > 0.2, "largest step {biggest} of rate 0.25");
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
        // The stream's first draw in [0, 2π): 2π·(DRAW_1_0 + 1)/2 = 2π·0.49111414 = 3.0857613.
        assert_near(s.memory.wander_angle, 3.085_761_3);
        // (dir(v)·1.5 + (cos, sin)(3.0857613)·1)/mass = ((0, 1.5) + (−0.9984418, 0.0558023))/2.
        assert_close(out.linear, Vec2::new(-0.499_220_9, 0.777_901_2));
    }

    #[test]
    fn wander_draws_from_the_stream_of_its_agent_and_tick() {
        // Default rate 0.5 from angle 0: the new angle is 0.5·(the stream's first draw), which
        // differs between agents and between ticks (hand-computed draws above).
        let a7 = agent_at(7, Vec2::ONE, Vec2::X);
        let a8 = agent_at(8, Vec2::ONE, Vec2::X);
        let w = world_with(vec![a7.clone(), a8.clone()]);
        let view = w.view();
        let p = WanderParams::default();
        for (a, tick, draw) in [(&a7, 3, DRAW_7_3), (&a8, 3, DRAW_8_3), (&a7, 4, DRAW_7_4)] {
            let mut s = scratch_at(a, tick);
            let out = steer(a, &p, &view, &mut s);
            assert_eq!(s.memory.wander_angle, 0.5 * draw, "agent {} tick {tick}", a.id);
            // target = (1, 1) + (1.5, 0) + (cos w, sin w); steering = dir(target − p)·5 − (1, 0).
            let w = 0.5 * draw;
            let expect = Vec2::new(1.5 + w.cos(), w.sin()).normalize() * 5.0 - Vec2::X;
            assert_close(out.linear, expect);
        }
    }
}
