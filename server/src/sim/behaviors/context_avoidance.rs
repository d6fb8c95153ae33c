//! Context avoidance (004 `ComputeObstacleAvoidance`), used by MoveTo.
//!
//! Sample `samples` directions round the agent (sample i at angle i·360°/samples, 0 = +x); a
//! direction is blocked when a circle of `cast_radius` swept `cast_distance` along it hits an
//! obstacle, a wall, or a resting agent (no active order, slower than [`RESTING_SPEED`]);
//! the free ones are scored by dot(direction, wanted) and the best wins; the result is smoothed
//! as lerp(last, best, `smoothing`) (004: 0.2). All blocked: zero (004 returns zero).
//!
//! 004 scores against the straight direction to the target; we score against the wanted
//! direction (the flow field's), which is the straight direction only in open ground. 004 sweeps
//! from a point 0.5 above the ground; in 2-D we sweep from the agent's centre. A circle already
//! overlapping something blocks only the directions that lead further into it, so an agent
//! touching an obstacle can still leave.

use glam::Vec2;

use crate::sim::agent::Agent;
use crate::sim::error::{SimError, check_non_negative, check_positive, check_radius};
use crate::sim::math::{closest_on_segment, dir, heading, segment_intersection, sweep_circle};
use crate::sim::view::WorldView;

/// Agents slower than this without an active order are obstacles to context avoidance.
pub const RESTING_SPEED: f32 = 0.05;

/// Parameters of context avoidance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextAvoidanceParams {
    /// Directions sampled round the agent (004: 16).
    pub samples: u32,
    /// Radius of the swept circle; `None` = the agent's radius (004: 0.5).
    pub cast_radius: Option<f32>,
    /// Length of the sweep (004 `obstacleAvoidanceRadius`; default 2).
    pub cast_distance: f32,
    /// Weight of the new best direction in the smoothing lerp (004: 0.2).
    pub smoothing: f32,
}

impl Default for ContextAvoidanceParams {
    fn default() -> Self {
        ContextAvoidanceParams { samples: 16, cast_radius: None, cast_distance: 2.0, smoothing: 0.2 }
    }
}

impl ContextAvoidanceParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        if !(1..=256).contains(&self.samples) {
            return Err(SimError::invalid("samples", "must be between 1 and 256"));
        }
        if let Some(r) = self.cast_radius {
            // Added to the sweep length for the blocker query.
            check_radius("cast_radius", r)?;
        }
        check_positive("cast_distance", self.cast_distance)?;
        if self.cast_distance > 1000.0 {
            return Err(SimError::invalid("cast_distance", "must be at most 1000"));
        }
        check_non_negative("smoothing", self.smoothing)?;
        if self.smoothing > 1.0 {
            return Err(SimError::invalid("smoothing", "must be at most 1"));
        }
        Ok(())
    }
}

/// Most blockers of each kind considered per agent (nearest are not preferred; the index order
/// is deterministic). Keeps the test allocation-free.
const MAX_BLOCKERS: usize = 48;

/// Circles and segments near an agent that can block a sweep.
struct Blockers {
    circles: [(Vec2, f32); MAX_BLOCKERS],
    n_circles: usize,
    segments: [(Vec2, Vec2); MAX_BLOCKERS],
    n_segments: usize,
}

impl Blockers {
    fn gather(agent: &Agent, view: &WorldView, reach: f32) -> Self {
        let mut b = Blockers {
            circles: [(Vec2::ZERO, 0.0); MAX_BLOCKERS],
            n_circles: 0,
            segments: [(Vec2::ZERO, Vec2::ZERO); MAX_BLOCKERS],
            n_segments: 0,
        };
        let p = agent.position;
        view.for_each_obstacle_near(p, reach, |o| b.push_circle(o.center, o.radius));
        view.for_each_wall_near(p, reach, |w| {
            if b.n_segments < MAX_BLOCKERS {
                b.segments[b.n_segments] = (w.a, w.b);
                b.n_segments += 1;
            }
        });
        view.for_each_agent_near(p, reach + agent.limits.radius, |o| {
            if o.id != agent.id && o.velocity.length() < RESTING_SPEED && view.agent(o.id).is_some_and(|a| a.active_order().is_none()) {
                b.push_circle(o.position, o.radius);
            }
        });
        b
    }

    fn push_circle(&mut self, c: Vec2, r: f32) {
        if self.n_circles < MAX_BLOCKERS {
            self.circles[self.n_circles] = (c, r);
            self.n_circles += 1;
        }
    }

    /// True when a circle of radius `r` swept from `p` along unit `d` for `len` hits a blocker.
    fn blocks(&self, p: Vec2, d: Vec2, len: f32, r: f32) -> bool {
        for &(c, cr) in &self.circles[..self.n_circles] {
            let rr = r + cr;
            if p.distance_squared(c) < rr * rr {
                if d.dot(c - p) > 0.0 {
                    return true;
                }
            } else if sweep_circle(p, d, len, r, c, cr).is_some() {
                return true;
            }
        }
        let q = p + d * len;
        for &(a, b) in &self.segments[..self.n_segments] {
            if segment_intersection(p, q, a, b).is_some() {
                return true;
            }
            let near = [
                closest_on_segment(p, a, b).distance(p),
                closest_on_segment(q, a, b).distance(q),
                closest_on_segment(a, p, q).distance(a),
                closest_on_segment(b, p, q).distance(b),
            ];
            let gap = near.into_iter().fold(f32::INFINITY, f32::min);
            if gap < r {
                // Already touching: only moving towards the wall is blocked.
                let c = closest_on_segment(p, a, b);
                if c.distance(p) >= r || d.dot(c - p) > 0.0 {
                    return true;
                }
            }
        }
        false
    }
}

/// The best free sample direction (highest dot with `wanted`; ties: lowest sample index) for
/// a sweep of length `len`, or zero when every sample is blocked.
pub fn best_direction(agent: &Agent, p: &ContextAvoidanceParams, view: &WorldView, wanted: Vec2, len: f32) -> Vec2 {
    let r = p.cast_radius.unwrap_or(agent.limits.radius);
    let blockers = Blockers::gather(agent, view, len + r);
    let mut best = Vec2::ZERO;
    let mut best_score = f32::NEG_INFINITY;
    for i in 0..p.samples {
        let d = heading(std::f32::consts::TAU * i as f32 / p.samples as f32);
        if blockers.blocks(agent.position, d, len, r) {
            continue;
        }
        let score = d.dot(wanted);
        if score > best_score {
            best_score = score;
            best = d;
        }
    }
    best
}

/// 004's smoothed avoidance direction: lerp(`last`, best, smoothing), or zero when every
/// direction is blocked. `len` is the sweep length (at most `cast_distance`).
pub fn avoid_dir(agent: &Agent, p: &ContextAvoidanceParams, view: &WorldView, wanted: Vec2, last: Vec2, len: f32) -> Vec2 {
    let best = best_direction(agent, p, view, dir(wanted), len.min(p.cast_distance));
    if best == Vec2::ZERO {
        return Vec2::ZERO;
    }
    last.lerp(best, p.smoothing)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

    #[test]
    fn picks_the_free_sample_nearest_the_wanted_direction() {
        // Agent r 0.5 at origin, wanted +x; obstacle r 1 at (2, 0): sweeping +x (contact at 0.5)
        // is blocked; 22.5° (0.924, 0.383): distance from (2,0) to the ray is 2·sin 22.5° = 0.765
        // < 1.5 → blocked; 45°: 2·sin 45° = 1.414 < 1.5 → blocked; 67.5°: 1.848 ≥ 1.5 → free.
        // Same for the negative side; wanted is tilted a hair to +y, so 67.5° beats −67.5°.
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        w.add_obstacle(Vec2::new(2.0, 0.0), 1.0).unwrap();
        w.rebuild_indexes();
        let view = w.view();
        let a = view.agent(1).unwrap();
        let p = ContextAvoidanceParams::default();
        let best = best_direction(a, &p, &view, Vec2::new(1.0, 0.01), 2.0);
        assert_close(best, heading(67.5f32.to_radians()));
        // Smoothing from last (1, 0): (1,0) + ((0.383, 0.924) − (1,0))·0.2 = (0.8765, 0.1848).
        let s = avoid_dir(a, &p, &view, Vec2::new(1.0, 0.01), Vec2::X, 2.0);
        assert_close(s, Vec2::new(0.876_537, 0.184_776));
        // Nothing in reach: the wanted direction's own sample (0°) wins.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        let view = w.view();
        assert_close(best_direction(view.agent(1).unwrap(), &p, &view, Vec2::X, 2.0), Vec2::X);
    }

    #[test]
    fn walls_and_resting_agents_block_and_everything_blocked_gives_zero() {
        // A wall x = 1 across the path blocks +x (the sweep crosses it) and every direction
        // whose sweep comes within 0.5 of it: with len 2 the free samples have cos θ·2 < 0.5
        // → only |θ| ≥ 90° … except 90° itself where the circle stays 1 from the wall: free.
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(0.0, 1.5), Vec2::ZERO)]);
        w.add_wall(Vec2::new(1.0, -10.0), Vec2::new(1.0, 10.0)).unwrap();
        w.rebuild_indexes();
        let view = w.view();
        let a = view.agent(1).unwrap();
        let p = ContextAvoidanceParams::default();
        // +90° is blocked by the resting agent 2 at (0, 1.5) (contact after 0.5); −90° is free.
        let best = best_direction(a, &p, &view, Vec2::X, 2.0);
        assert_close(best, Vec2::new(0.0, -1.0));
        // Surrounded: obstacles all round → zero.
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        for k in 0..8 {
            w.add_obstacle(heading(k as f32 * std::f32::consts::FRAC_PI_4) * 1.6, 0.8).unwrap();
        }
        w.rebuild_indexes();
        let view = w.view();
        assert_eq!(avoid_dir(view.agent(1).unwrap(), &p, &view, Vec2::X, Vec2::X, 2.0), Vec2::ZERO);
    }
}
