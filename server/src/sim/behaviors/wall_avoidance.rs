//! WallAvoidance (000 `AvoidWall`): cast a ray of `look_ahead` along the velocity; at the first
//! wall it hits, reflect the ray's direction about the wall's normal (the side facing the agent)
//! and seek hit + reflected·`avoid_distance`.

use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_radius};
use crate::sim::math::{dir, segment_intersection};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

use super::seek::seek_point;

/// Parameters of WallAvoidance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallAvoidanceParams {
    /// Length of the feeler ray (default 5).
    pub look_ahead: f32,
    /// How far from the hit point, along the reflection, the agent aims (default 3).
    pub avoid_distance: f32,
}

impl Default for WallAvoidanceParams {
    fn default() -> Self {
        WallAvoidanceParams { look_ahead: 5.0, avoid_distance: 3.0 }
    }
}

impl WallAvoidanceParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        // The feeler length is the wall query's extent.
        check_radius("look_ahead", self.look_ahead)?;
        check_radius("avoid_distance", self.avoid_distance).map(|_| ())
    }
}

/// The steering; zero when the ray hits nothing or the agent is at rest.
pub fn steer(agent: &Agent, p: &WallAvoidanceParams, view: &WorldView) -> Steering {
    let d = dir(agent.velocity);
    if d == glam::Vec2::ZERO {
        return Steering::ZERO;
    }
    let from = agent.position;
    let to = from + d * p.look_ahead;
    let mut best: Option<(f32, glam::Vec2)> = None;
    view.for_each_wall_near(from + d * (p.look_ahead * 0.5), p.look_ahead * 0.5, |w| {
        if let Some(t) = segment_intersection(from, to, w.a, w.b) {
            if best.is_none_or(|b| t < b.0) {
                let n = if d.dot(w.normal) > 0.0 { -w.normal } else { w.normal };
                best = Some((t, n));
            }
        }
    });
    let Some((t, n)) = best else { return Steering::ZERO };
    let hit = from + d * (p.look_ahead * t);
    let away = dir(d - 2.0 * d.dot(n) * n);
    seek_point(agent, hit + away * p.avoid_distance)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;
    use glam::Vec2;

    #[test]
    fn reflects_off_the_first_wall_hit() {
        // Moving (3,3)/√2-ish: v = (2,2), d = (0.7071,0.7071). Wall x = 2 from y −10..10 (normal faces −x).
        // Ray hits at (2,2) (t = 2.828/5). Reflection of d about n = (−1,0): (−0.7071, 0.7071).
        // Target = (2,2) + (−0.7071,0.7071)·3 = (−0.1213, 4.1213); seek from (0,0) with v (2,2):
        // desired = dir(target)·5 = (−0.14712, 4.99784); steering = desired − v = (−2.14712, 2.99784).
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(2.0, 2.0))]);
        w.add_wall(Vec2::new(2.0, -10.0), Vec2::new(2.0, 10.0)).unwrap();
        w.rebuild_indexes();
        let s = steer_one(&w, 1, &Behavior::WallAvoidance(WallAvoidanceParams::default()));
        let target = Vec2::new(2.0, 2.0) + Vec2::new(-1.0, 1.0).normalize() * 3.0;
        let expect = target.normalize() * 5.0 - Vec2::new(2.0, 2.0);
        assert_close(s.linear, expect);
        assert_close(s.linear, Vec2::new(-2.14712, 2.99784));
    }

    #[test]
    fn no_wall_in_reach_means_no_steering() {
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(1.0, 0.0))]);
        w.add_wall(Vec2::new(6.0, -1.0), Vec2::new(6.0, 1.0)).unwrap();
        w.rebuild_indexes();
        assert_eq!(steer_one(&w, 1, &Behavior::WallAvoidance(WallAvoidanceParams::default())), Steering::ZERO);
    }
}
