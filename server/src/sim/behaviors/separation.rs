//! Separation (004 `ComputeSeparation`): neighbours within `neighbor_radius` push with
//! dir(p − q)/|p − q| (closer pushes harder); the pushes are averaged and normalised, and the
//! unit direction is scaled by max_accel to make a force.
//!
//! 004 skips a neighbour standing exactly on the agent (distance 0), which would leave two
//! coincident agents stuck together for ever; we push them apart along a direction fixed by the
//! agent's id (the golden angle times the id), weighted as if 1 mm apart.

use glam::Vec2;

use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_radius};
use crate::sim::math::{dir, heading};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of Separation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeparationParams {
    /// Neighbours within this distance push (004 `neighborRadius`).
    pub neighbor_radius: f32,
}

impl SeparationParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_radius("neighbor_radius", self.neighbor_radius)?;
        Ok(())
    }
}

/// Distance under which two agents count as coincident.
const COINCIDENT: f32 = 1e-3;

/// The unit separation direction of 004 (zero with no neighbours).
pub fn separation_dir(agent: &Agent, radius: f32, view: &WorldView) -> Vec2 {
    separation_dir_and_nearest(agent, radius, view).0
}

/// [`separation_dir`], and the smallest squared distance of another agent within `radius`
/// (infinity when none).
fn separation_dir_and_nearest(agent: &Agent, radius: f32, view: &WorldView) -> (Vec2, f32) {
    let mut sum = Vec2::ZERO;
    let mut n = 0u32;
    let mut nearest = f32::INFINITY;
    view.for_each_agent_near(agent.position, radius, |o| {
        if o.id == agent.id {
            return;
        }
        let away = agent.position - o.position;
        nearest = nearest.min(away.length_squared());
        let d = away.length();
        if d > COINCIDENT {
            sum += away / d / d;
        } else {
            sum += heading(agent.id as f32 * 2.399_963) / COINCIDENT;
        }
        n += 1;
    });
    if n == 0 {
        return (Vec2::ZERO, nearest);
    }
    (dir(sum / n as f32), nearest)
}

/// Separation's steering. Its neighbour walk doubles as the integrator's contact test: when it
/// reaches past where any agent could touch this one after the step and finds nobody there, it
/// sets [`super::reciprocal_avoidance::NO_CONTACT`] (the bound of reciprocal avoidance's flag:
/// both radii plus both top speeds' step; with 0.1 % to spare for rounding).
pub fn steer(agent: &Agent, p: &SeparationParams, view: &WorldView, scratch: &mut super::Scratch) -> Steering {
    let (d, nearest) = separation_dir_and_nearest(agent, p.neighbor_radius, view);
    let far = (agent.limits.radius + agent.limits.max_speed * view.dt + view.extent.0 + view.extent.1 * view.dt) * 1.001;
    if p.neighbor_radius >= far && nearest > far * far {
        scratch.events |= super::reciprocal_avoidance::NO_CONTACT;
    }
    Steering::linear(d * agent.limits.max_accel)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;

    #[test]
    fn closer_neighbours_push_harder() {
        // Neighbours at (1,0) (push (−1,0)/1) and (0,−2) (push (0,1)/2): sum (−1, 0.5), avg (−0.5, 0.25),
        // normalised (−0.8944, 0.4472), × max_accel 10.
        let w = world_with(vec![
            agent_at(1, Vec2::ZERO, Vec2::ZERO),
            agent_at(2, Vec2::new(1.0, 0.0), Vec2::ZERO),
            agent_at(3, Vec2::new(0.0, -2.0), Vec2::ZERO),
            agent_at(4, Vec2::new(0.0, 5.0), Vec2::ZERO), // outside radius 3
        ]);
        let s = steer_one(&w, 1, &Behavior::Separation(SeparationParams { neighbor_radius: 3.0 }));
        assert_close(s.linear, Vec2::new(-1.0, 0.5).normalize() * 10.0);
    }

    #[test]
    fn coincident_agents_get_distinct_finite_pushes() {
        let w = world_with(vec![agent_at(1, Vec2::ONE, Vec2::ZERO), agent_at(2, Vec2::ONE, Vec2::ZERO)]);
        let a = steer_one(&w, 1, &Behavior::Separation(SeparationParams { neighbor_radius: 3.0 }));
        let b = steer_one(&w, 2, &Behavior::Separation(SeparationParams { neighbor_radius: 3.0 }));
        assert!(a.linear.is_finite() && b.linear.is_finite());
        assert!((a.linear.length() - 10.0).abs() < 1e-3);
        assert!(a.linear.distance(b.linear) > 1.0);
        let alone = world_with(vec![agent_at(1, Vec2::ONE, Vec2::ZERO)]);
        assert_eq!(steer_one(&alone, 1, &Behavior::Separation(SeparationParams { neighbor_radius: 3.0 })), Steering::ZERO);
    }

    /// The contact flag is set only when the walk reaches past where anyone could touch the
    /// agent after the step and finds nobody there.
    #[test]
    fn an_empty_walk_past_the_contact_bound_clears_the_contact_test() {
        use super::super::reciprocal_avoidance::NO_CONTACT;
        let flag = |w: &crate::sim::World, radius: f32| {
            let view = w.view();
            let agent = view.agent(1).unwrap();
            let mut scratch = scratch_for(agent);
            steer(agent, &SeparationParams { neighbor_radius: radius }, &view, &mut scratch);
            let far = agent.limits.radius + agent.limits.max_speed * view.dt + view.extent.0 + view.extent.1 * view.dt;
            (scratch.events & NO_CONTACT != 0, far)
        };
        let alone = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(50.0, 0.0), Vec2::ZERO)]);
        let (set, far) = flag(&alone, 3.0);
        assert!(far < 3.0 && set, "nobody within {far}: the flag is set");
        assert!(!flag(&alone, far * 0.99).0, "a walk shorter than the bound proves nothing");
        // A neighbour beyond the bound but within the walk: still no contact possible.
        let near_but_apart = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(far * 1.01 + 0.01, 0.0), Vec2::ZERO)]);
        assert!(flag(&near_but_apart, far * 1.5).0);
        // One within the bound: the integrator's contact test must run.
        let close = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(far * 0.9, 0.0), Vec2::ZERO)]);
        assert!(!flag(&close, 3.0).0);
    }
}
