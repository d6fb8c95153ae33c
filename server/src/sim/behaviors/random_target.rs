//! RandomTarget wander (003 `RandomSeekBehavior`): every `interval_min`–`interval_max` seconds
//! pick a random point within `radius` of the centre, and arrive at it.
//!
//! 003 draws the point inside a sphere round the world origin; we draw it inside a disc round
//! `center`, which defaults to the agent's position at the moment of the pick (so a spawned
//! crowd wanders locally instead of all converging on the origin).

use glam::Vec2;

use super::Scratch;
use super::arrive::{ArriveTuning, arrive_point};
use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative, check_vec};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of RandomTarget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomTargetParams {
    /// Radius of the disc targets are drawn from (default 10).
    pub radius: f32,
    /// Centre of the disc; `None` = the agent's position when it picks.
    pub center: Option<Vec2>,
    /// Shortest time between picks, seconds (default 1).
    pub interval_min: f32,
    /// Longest time between picks, seconds (default 2).
    pub interval_max: f32,
    /// How the agent arrives at each target (003 uses a deceleration radius of 2).
    pub arrive: ArriveTuning,
}

impl Default for RandomTargetParams {
    fn default() -> Self {
        RandomTargetParams {
            radius: 10.0,
            center: None,
            interval_min: 1.0,
            interval_max: 2.0,
            arrive: ArriveTuning { target_radius: 0.5, slow_radius: 2.0, time_to_target: 0.25 },
        }
    }
}

impl RandomTargetParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_non_negative("radius", self.radius)?;
        if let Some(c) = self.center {
            check_vec("center", c)?;
        }
        check_non_negative("interval_min", self.interval_min)?;
        check_non_negative("interval_max", self.interval_max)?;
        if self.interval_max < self.interval_min {
            return Err(SimError::invalid("interval_max", "must be >= interval_min"));
        }
        self.arrive.validate().map_err(|e| e.within("arrive"))
    }
}

/// The steering; a new target (and its deadline) goes to `scratch.memory`.
pub fn steer(agent: &Agent, p: &RandomTargetParams, view: &WorldView, scratch: &mut Scratch) -> Steering {
    let mem = &agent.memory;
    let target = match mem.random_target {
        Some(t) if view.time < mem.random_target_until => t,
        _ => {
            let centre = p.center.unwrap_or(agent.position);
            let r = p.radius * scratch.rng.next_f32().sqrt();
            let a = scratch.rng.range(0.0, std::f32::consts::TAU);
            let t = centre + Vec2::new(a.cos(), a.sin()) * r;
            scratch.memory.random_target = Some(t);
            scratch.memory.random_target_until = view.time + scratch.rng.range(p.interval_min, p.interval_max);
            t
        }
    };
    arrive_point(agent, target, &p.arrive)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::sim::rng::Rng;

    #[test]
    fn picks_a_point_in_the_disc_and_keeps_it_for_the_interval() {
        let a = agent_at(3, Vec2::new(10.0, 10.0), Vec2::ZERO);
        let w = world_with(vec![a.clone()]);
        let view = w.view();
        let p = RandomTargetParams::default();
        let mut s = scratch_for(&a);
        let out = steer(&a, &p, &view, &mut s);
        let mut r = Rng::for_agent(1, 3, 0);
        let rad = 10.0 * r.next_f32().sqrt();
        let ang = r.range(0.0, std::f32::consts::TAU);
        let until = r.range(1.0, 2.0);
        let t = Vec2::new(10.0, 10.0) + Vec2::new(ang.cos(), ang.sin()) * rad;
        assert_close(s.memory.random_target.unwrap_or(Vec2::NAN), t);
        assert_near(s.memory.random_target_until, until);
        assert!((1.0..2.0).contains(&s.memory.random_target_until));
        assert_eq!(out, arrive_point(&a, t, &p.arrive));
        // Before the deadline an existing target is kept (no new draw).
        let mut b = a.clone();
        b.memory.random_target = Some(Vec2::new(0.0, 10.0));
        b.memory.random_target_until = 5.0;
        let mut s = scratch_for(&b);
        let out = steer(&b, &p, &view, &mut s);
        assert_eq!(s.memory.random_target, Some(Vec2::new(0.0, 10.0)));
        // dist 10 > slow 2: desired (−5,0)/0.25 = (−20,0) → clamp 10.
        assert_close(out.linear, Vec2::new(-10.0, 0.0));
    }
}
