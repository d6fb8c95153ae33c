//! PathFollowing (003 `CalculatePathsFollow`): seek the current waypoint; once within
//! `path_radius` of it, go on to the next.
//!
//! At the ends: `once` arrives at the last waypoint, stops there and reports `PathCompleted`
//! once; `loop` goes back to the first; `ping_pong` reverses the step (003). 003 starts with
//! step −1 and flips it whenever the current index is an end, which only works because of that
//! start value; we start with +1 and flip when the next index would leave the path — the same
//! walk, from either start.

use glam::Vec2;

use super::Scratch;
use super::arrive::{ArriveTuning, arrive_point};
use super::seek::seek_point;
use crate::sim::agent::{Agent, PathMode};
use crate::sim::error::{SimError, check_non_negative, check_vec};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Event flag: the agent finished a `once` path this tick.
pub const EVENT_PATH_COMPLETED: u8 = 2;

/// Most waypoints of one path.
pub const MAX_WAYPOINTS: usize = 1024;

/// Parameters of PathFollowing.
#[derive(Debug, Clone, PartialEq)]
pub struct PathFollowingParams {
    /// The waypoints, in order (at least one).
    pub waypoints: Vec<Vec2>,
    /// A waypoint counts as reached within this distance (003 `mPathRadius`, default 1).
    pub path_radius: f32,
    /// What happens at the ends.
    pub mode: PathMode,
}

impl PathFollowingParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        if self.waypoints.is_empty() || self.waypoints.len() > MAX_WAYPOINTS {
            return Err(SimError::invalid("waypoints", format!("must hold 1 to {MAX_WAYPOINTS} points")));
        }
        for (i, w) in self.waypoints.iter().enumerate() {
            check_vec(&format!("waypoints[{i}]"), *w)?;
        }
        check_non_negative("path_radius", self.path_radius).map(|_| ())
    }
}

/// The index after `i` moving by `step` on a path of `n` waypoints under `mode`, the new step,
/// and whether a `once` path just ended.
pub fn advance(i: u32, step: i8, n: u32, mode: PathMode) -> (u32, i8, bool) {
    let last = n.saturating_sub(1);
    let step = if step < 0 { -1 } else { 1 };
    match mode {
        PathMode::Once => {
            if i >= last { (last, step, true) } else { (i + 1, 1, false) }
        }
        PathMode::Loop => (if i >= last { 0 } else { i + 1 }, 1, false),
        PathMode::PingPong => {
            if n <= 1 {
                return (0, step, false);
            }
            let next = i64::from(i) + i64::from(step);
            if next < 0 || next > i64::from(last) {
                let step = -step;
                ((i64::from(i) + i64::from(step)).clamp(0, i64::from(last)) as u32, step, false)
            } else {
                (next as u32, step, false)
            }
        }
    }
}

/// PathFollowing's steering; the waypoint index, step and done flag go to `scratch.memory`.
pub fn steer(agent: &Agent, p: &PathFollowingParams, _view: &WorldView, scratch: &mut Scratch) -> Steering {
    let n = p.waypoints.len() as u32;
    let last = n.saturating_sub(1);
    let mem = &mut scratch.memory;
    let end_tuning = ArriveTuning { target_radius: p.path_radius.min(0.25), slow_radius: (p.path_radius * 3.0).max(1.0), time_to_target: 0.25 };
    if mem.path_done && p.mode == PathMode::Once {
        return arrive_point(agent, p.waypoints[last as usize], &end_tuning);
    }
    let mut i = mem.path_index.min(last);
    let current = p.waypoints[i as usize];
    if agent.position.distance(current) < p.path_radius {
        let (next, step, ended) = advance(i, mem.path_step, n, p.mode);
        mem.path_step = step;
        if ended {
            mem.path_done = true;
            scratch.events |= EVENT_PATH_COMPLETED;
            return arrive_point(agent, p.waypoints[last as usize], &end_tuning);
        }
        i = next;
    }
    mem.path_index = i;
    let target = p.waypoints[i as usize];
    if p.mode == PathMode::Once && i == last {
        arrive_point(agent, target, &end_tuning)
    } else {
        seek_point(agent, target)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

    fn path(mode: PathMode) -> PathFollowingParams {
        PathFollowingParams { waypoints: vec![Vec2::ZERO, Vec2::new(10.0, 0.0), Vec2::new(10.0, 10.0)], path_radius: 1.0, mode }
    }

    #[test]
    fn advance_walks_once_loop_and_ping_pong() {
        // 3 waypoints (last index 2).
        assert_eq!(advance(0, 1, 3, PathMode::Once), (1, 1, false));
        assert_eq!(advance(2, 1, 3, PathMode::Once), (2, 1, true));
        assert_eq!(advance(2, 1, 3, PathMode::Loop), (0, 1, false));
        // Ping-pong: 0 → 1 → 2 → 1 → 0 → 1 (003's walk).
        let mut s = (0u32, 1i8);
        let mut seen = vec![0];
        for _ in 0..5 {
            let (i, st, _) = advance(s.0, s.1, 3, PathMode::PingPong);
            s = (i, st);
            seen.push(i);
        }
        assert_eq!(seen, vec![0, 1, 2, 1, 0, 1]);
        assert_eq!(advance(0, 1, 1, PathMode::PingPong), (0, 1, false));
    }

    #[test]
    fn seeks_the_current_waypoint_and_advances_inside_the_radius() {
        // At (9.5, 0) (0.5 from waypoint 1 < radius 1) with index 1: advance to 2 = (10,10);
        // seek from rest: dir (0.5, 10)/|.|·5 = (0.2497, 4.9938), under max accel 10.
        let mut a = agent_at(1, Vec2::new(9.5, 0.0), Vec2::ZERO);
        a.memory.path_index = 1;
        let w = world_with(vec![a]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        let out = steer(a, &path(PathMode::Loop), &view, &mut s);
        assert_eq!(s.memory.path_index, 2);
        assert_close(out.linear, Vec2::new(0.5, 10.0).normalize() * 5.0);
        assert_eq!(s.events, 0);
    }

    #[test]
    fn once_completes_at_the_end_and_reports_once() {
        let mut a = agent_at(1, Vec2::new(10.0, 9.5), Vec2::ZERO);
        a.memory.path_index = 2;
        let w = world_with(vec![a]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        steer(a, &path(PathMode::Once), &view, &mut s);
        assert!(s.memory.path_done);
        assert_eq!(s.events, EVENT_PATH_COMPLETED);
        // Next tick (done already): no second event; arrive at the last waypoint:
        // dist 0.5, slow radius 3 → speed 5·0.5/3 = 0.8333 towards +y; from rest /0.25 = 3.333.
        let mut b = a.clone();
        b.memory = s.memory;
        let mut s2 = scratch_for(&b);
        let out = steer(&b, &path(PathMode::Once), &view, &mut s2);
        assert_eq!(s2.events, 0);
        assert_close(out.linear, Vec2::new(0.0, 3.333_333));
    }

    #[test]
    fn validation_names_fields() {
        let p = PathFollowingParams { waypoints: vec![], path_radius: 1.0, mode: PathMode::Once };
        assert!(p.validate().unwrap_err().to_string().contains("waypoints"));
        let p = PathFollowingParams { waypoints: vec![Vec2::new(f32::NAN, 0.0)], path_radius: 1.0, mode: PathMode::Once };
        assert!(p.validate().unwrap_err().to_string().contains("waypoints[0].x"));
        let p = PathFollowingParams { path_radius: -1.0, ..path(PathMode::Once) };
        assert!(p.validate().unwrap_err().to_string().contains("path_radius"));
    }
}
