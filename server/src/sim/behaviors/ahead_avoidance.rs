//! Ahead-point avoidance (003): two probe points ahead of the agent,
//! ahead1 = p + v/max_speed·ahead_len and ahead2 = half of that; the obstacle nearest the agent
//! that contains ahead1, ahead2 or p (distance < its radius + `margin`) pushes with
//! clamp(ahead1 − centre, max_avoid_force)/mass.

use glam::Vec2;

use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative, check_radius};
use crate::sim::math::clamp_len;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of AheadAvoidance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AheadAvoidanceParams {
    /// Length of the probe at full speed (default 4).
    pub ahead_len: f32,
    /// Largest avoidance force (default 0.4).
    pub max_avoid_force: f32,
    /// Added to every obstacle's radius for the containment test (default 0; 003 uses a fixed
    /// influence radius per obstacle).
    pub margin: f32,
}

impl Default for AheadAvoidanceParams {
    fn default() -> Self {
        AheadAvoidanceParams { ahead_len: 4.0, max_avoid_force: 0.4, margin: 0.0 }
    }
}

impl AheadAvoidanceParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        // `ahead_len + margin` is the obstacle query's radius.
        check_radius("ahead_len", self.ahead_len)?;
        check_non_negative("max_avoid_force", self.max_avoid_force)?;
        check_radius("margin", self.margin).map(|_| ())
    }
}

/// The steering; zero when no obstacle contains a probe point.
pub fn steer(agent: &Agent, p: &AheadAvoidanceParams, view: &WorldView) -> Steering {
    let reach = if agent.limits.max_speed > 0.0 { agent.velocity / agent.limits.max_speed * p.ahead_len } else { Vec2::ZERO };
    let pos = agent.position;
    let (a1, a2) = (pos + reach, pos + reach * 0.5);
    let mut nearest: Option<(f32, Vec2)> = None;
    view.for_each_obstacle_near(pos, reach.length() + p.margin, |ob| {
        let r = ob.radius + p.margin;
        let inside = |q: Vec2| q.distance(ob.center) < r;
        if inside(a1) || inside(a2) || inside(pos) {
            let d = ob.center.distance(pos);
            if nearest.is_none_or(|n| d < n.0) {
                nearest = Some((d, ob.center));
            }
        }
    });
    match nearest {
        Some((_, c)) => Steering::linear(clamp_len(a1 - c, p.max_avoid_force) / agent.limits.mass),
        None => Steering::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;

    #[test]
    fn pushes_from_the_nearest_containing_obstacle() {
        // v = (5,0) = max speed: ahead1 = (4,0), ahead2 = (2,0). Obstacle r 1 at (4, 0.5)
        // contains ahead1. Force = clamp((4,0) − (4,0.5), 0.4) = (0, −0.4); mass 2 → (0, −0.2).
        let mut a = agent_at(1, Vec2::ZERO, Vec2::new(5.0, 0.0));
        a.limits.mass = 2.0;
        let mut w = world_with(vec![a]);
        w.add_obstacle(Vec2::new(4.0, 0.5), 1.0).unwrap();
        w.rebuild_indexes();
        let s = steer_one(&w, 1, &Behavior::AheadAvoidance(AheadAvoidanceParams::default()));
        assert_close(s.linear, Vec2::new(0.0, -0.2));
        // A nearer obstacle containing ahead2 wins: centre (2,−0.3): ahead1 − c = (2, 0.3) → 0.4·dir.
        w.add_obstacle(Vec2::new(2.0, -0.3), 0.5).unwrap();
        w.rebuild_indexes();
        let s = steer_one(&w, 1, &Behavior::AheadAvoidance(AheadAvoidanceParams::default()));
        assert_close(s.linear, Vec2::new(2.0, 0.3).normalize() * 0.4 / 2.0);
    }

    #[test]
    fn clear_path_means_no_force() {
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(5.0, 0.0))]);
        w.add_obstacle(Vec2::new(4.0, 2.0), 1.0).unwrap();
        w.rebuild_indexes();
        assert_eq!(steer_one(&w, 1, &Behavior::AheadAvoidance(AheadAvoidanceParams::default())), Steering::ZERO);
    }
}
