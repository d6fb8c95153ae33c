//! ObstacleAvoidance with a detection box (001, Buckland).
//!
//! box_len = min_box + (speed/max_speed)·min_box. Obstacles whose centre is within
//! box_len + their radius are moved to local space (x along the heading, y to its left);
//! x < 0 is behind and skipped; with R = ob.r + agent.r those with |y| ≥ R miss and are skipped;
//! the hit is at x − √(R² − y²), or x + √(R² − y²) when that is ≤ 0; the nearest hit wins.
//! Force in local space: m = `lateral_base` + (box_len − x)/box_len;
//! lateral = (ob.r − y)·m when y ≤ 0, (−ob.r − y)·m when y > 0; braking = (ob.r − x)·braking_weight;
//! rotated back to world space.
//!
//! 001's code writes the multiplier's base as 1.5 while Buckland's book uses 1.0; we take 1.0
//! by default and expose it as `lateral_base` so 001's reading is one setting away.

use glam::Vec2;

use crate::sim::agent::Agent;
use crate::sim::error::{MAX_QUERY_RADIUS, SimError, check_non_negative, check_positive};
use crate::sim::math::{dir, perp};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Parameters of ObstacleAvoidance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObstacleAvoidanceParams {
    /// Detection box length at rest; `None` = 4 × the agent's radius.
    pub min_box_length: Option<f32>,
    /// Weight of the braking force (default 0.6).
    pub braking_weight: f32,
    /// Base of the lateral multiplier (default 1.0; 001's code writes 1.5).
    pub lateral_base: f32,
}

impl Default for ObstacleAvoidanceParams {
    fn default() -> Self {
        ObstacleAvoidanceParams { min_box_length: None, braking_weight: 0.6, lateral_base: 1.0 }
    }
}

impl ObstacleAvoidanceParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        if let Some(b) = self.min_box_length {
            check_positive("min_box_length", b)?;
            // The detection box grows to twice this with speed; it is the obstacle query's radius.
            if b > MAX_QUERY_RADIUS / 2.0 {
                return Err(SimError::invalid("min_box_length", format!("must be at most {} (the box grows to twice this)", MAX_QUERY_RADIUS / 2.0)));
            }
        }
        check_non_negative("braking_weight", self.braking_weight)?;
        check_non_negative("lateral_base", self.lateral_base).map(|_| ())
    }
}

/// The direction an agent is moving in, or its orientation's heading when at rest.
pub fn travel_heading(agent: &Agent) -> Vec2 {
    let h = dir(agent.velocity);
    if h == Vec2::ZERO { agent.heading() } else { h }
}

/// The steering; zero when nothing is in the box.
pub fn steer(agent: &Agent, p: &ObstacleAvoidanceParams, view: &WorldView) -> Steering {
    let min_box = p.min_box_length.unwrap_or(agent.limits.radius * 4.0);
    let speed = agent.speed();
    let box_len = if agent.limits.max_speed > 0.0 {
        min_box + (speed / agent.limits.max_speed).min(1.0) * min_box
    } else {
        min_box
    };
    let h = travel_heading(agent);
    let side = perp(h);
    // (hit distance, local x, local y, obstacle radius)
    let mut best: Option<(f32, f32, f32, f32)> = None;
    view.for_each_obstacle_near(agent.position, box_len, |ob| {
        let d = ob.center - agent.position;
        let (x, y) = (d.dot(h), d.dot(side));
        if x < 0.0 {
            return;
        }
        let r = ob.radius + agent.limits.radius;
        if y.abs() >= r {
            return;
        }
        let s = (r * r - y * y).sqrt();
        let mut ip = x - s;
        if ip <= 0.0 {
            ip = x + s;
        }
        if best.is_none_or(|b| ip < b.0) {
            best = Some((ip, x, y, ob.radius));
        }
    });
    let Some((_, x, y, obr)) = best else { return Steering::ZERO };
    let m = p.lateral_base + (box_len - x) / box_len;
    let lateral = if y > 0.0 { (-obr - y) * m } else { (obr - y) * m };
    let braking = (obr - x) * p.braking_weight;
    Steering::linear(h * braking + side * lateral)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Behavior;
    use super::*;

    #[test]
    fn detection_box_force_matches_hand_computation() {
        // Agent at origin moving +x at 2.5 (half of max 5), radius 0.5, min box 4·0.5 = 2:
        // box_len = 2 + 0.5·2 = 3. Obstacle r = 1 at (2, 0.5): local x = 2, y = 0.5 (left).
        // R = 1.5, |y| < R: hit. m = 1 + (3 − 2)/3 = 4/3. y > 0: lateral = (−1 − 0.5)·4/3 = −2.
        // braking = (1 − 2)·0.6 = −0.6. World: (−0.6, −2).
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(2.5, 0.0))]);
        w.add_obstacle(Vec2::new(2.0, 0.5), 1.0).unwrap();
        w.rebuild_indexes();
        let s = steer_one(&w, 1, &Behavior::ObstacleAvoidance(ObstacleAvoidanceParams::default()));
        assert_close(s.linear, Vec2::new(-0.6, -2.0));
        // 001's base 1.5: m = 1.5 + 1/3 → lateral = −1.5·(11/6) = −2.75.
        let p = ObstacleAvoidanceParams { lateral_base: 1.5, ..ObstacleAvoidanceParams::default() };
        assert_close(steer_one(&w, 1, &Behavior::ObstacleAvoidance(p)).linear, Vec2::new(-0.6, -2.75));
    }

    #[test]
    fn obstacles_behind_beside_or_beyond_the_box_are_ignored() {
        for (c, r) in [(Vec2::new(-2.0, 0.0), 1.0), (Vec2::new(2.0, 1.6), 1.0), (Vec2::new(5.0, 0.0), 1.0)] {
            let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(2.5, 0.0))]);
            w.add_obstacle(c, r).unwrap();
            w.rebuild_indexes();
            let s = steer_one(&w, 1, &Behavior::ObstacleAvoidance(ObstacleAvoidanceParams::default()));
            assert_eq!(s, Steering::ZERO, "obstacle {c:?}");
        }
    }

    #[test]
    fn nearest_hit_wins_and_right_side_pushes_left() {
        // Three obstacles of radius 0.5 in the box (box_len = 3; R = 0.5 + 0.5 = 1), added with
        // the winner in the middle so that neither the first nor the last found wins by chance:
        //   A (2.6, 0):     hit at 2.6 − 1 = 1.6;
        //   B (1.5, −0.2):  hit at 1.5 − √(1 − 0.04) = 0.5202;
        //   C (1.2, 0.95):  hit at 1.2 − √(1 − 0.9025) = 0.8878 (nearest centre, not nearest hit).
        // B wins. y ≤ 0: m = 1 + (3 − 1.5)/3 = 1.5, lateral = (0.5 + 0.2)·1.5 = 1.05,
        // braking = (0.5 − 1.5)·0.6 = −0.6. (C would give (−0.42, −2.32); A (−1.26, 0.567).)
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(2.5, 0.0))]);
        w.add_obstacle(Vec2::new(2.6, 0.0), 0.5).unwrap();
        w.add_obstacle(Vec2::new(1.5, -0.2), 0.5).unwrap();
        w.add_obstacle(Vec2::new(1.2, 0.95), 0.5).unwrap();
        w.rebuild_indexes();
        let s = steer_one(&w, 1, &Behavior::ObstacleAvoidance(ObstacleAvoidanceParams::default()));
        assert_close(s.linear, Vec2::new(-0.6, 1.05));
    }
}
