//! LeaderFollowing (003 names it; the rule is Reynolds'): arrive at a point `behind_distance`
//! behind the leader (behind = leader.p − heading·behind_distance, heading = dir(leader.v), or
//! the leader's orientation when it stands); when in the leader's way — within
//! `leader_sight_radius` of the point `behind_distance` ahead of the leader, or of the leader
//! itself — also evade the leader (flee its predicted position); and separate from the other
//! followers (004's separation within `separation_radius`, scaled by max_accel and
//! `separation_weight`).

use glam::Vec2;

use super::arrive::{ArriveTuning, arrive_point};
use super::flee::flee_point;
use super::pursue::predicted_position;
use super::separation::separation_dir;
use crate::sim::agent::{Agent, AgentId};
use crate::sim::error::{SimError, check_non_negative, check_radius};
use crate::sim::math::dir;
use crate::sim::steering::Steering;
use crate::sim::view::{Kinematic, WorldView};

/// Parameters of LeaderFollowing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaderFollowingParams {
    /// The leader.
    pub leader: AgentId,
    /// Distance behind the leader the follower aims at (default 2).
    pub behind_distance: f32,
    /// Radius of the leader's 'sight' ahead of it, inside which followers step aside (default 3).
    pub leader_sight_radius: f32,
    /// Followers closer than this push apart (default 1.5).
    pub separation_radius: f32,
    /// Weight of the separation force (default 1).
    pub separation_weight: f32,
    /// How the follower arrives behind the leader.
    pub arrive: ArriveTuning,
}

impl Default for LeaderFollowingParams {
    fn default() -> Self {
        LeaderFollowingParams {
            leader: 0,
            behind_distance: 2.0,
            leader_sight_radius: 3.0,
            separation_radius: 1.5,
            separation_weight: 1.0,
            arrive: ArriveTuning { target_radius: 0.5, slow_radius: 3.0, time_to_target: 0.25 },
        }
    }
}

impl LeaderFollowingParams {
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check_radius("behind_distance", self.behind_distance)?;
        check_radius("leader_sight_radius", self.leader_sight_radius)?;
        check_radius("separation_radius", self.separation_radius)?;
        check_non_negative("separation_weight", self.separation_weight)?;
        self.arrive.validate().map_err(|e| e.within("arrive"))
    }
}

/// LeaderFollowing's steering; zero when the leader is gone (or is the agent itself).
pub fn steer(agent: &Agent, p: &LeaderFollowingParams, view: &WorldView) -> Steering {
    let Some(leader) = view.agent(p.leader).filter(|l| l.id != agent.id) else { return Steering::ZERO };
    let h = {
        let v = dir(leader.velocity);
        if v == Vec2::ZERO { leader.heading() } else { v }
    };
    let behind = leader.position - h * p.behind_distance;
    let ahead = leader.position + h * p.behind_distance;
    let mut s = arrive_point(agent, behind, &p.arrive);
    let in_sight = agent.position.distance(ahead) <= p.leader_sight_radius || agent.position.distance(leader.position) <= p.leader_sight_radius;
    if in_sight {
        let k = Kinematic { position: leader.position, velocity: leader.velocity, orientation: leader.orientation };
        s += flee_point(agent, predicted_position(agent, &k, 1.0));
    }
    s += Steering::linear(separation_dir(agent, p.separation_radius, view) * (agent.limits.max_accel * p.separation_weight));
    s
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

    fn params() -> LeaderFollowingParams {
        LeaderFollowingParams { leader: 1, ..LeaderFollowingParams::default() }
    }

    #[test]
    fn arrives_behind_a_moving_leader() {
        // Leader at (10,0) moving (2,0): behind = (8,0). Follower at (0,0) at rest, 8 away
        // (> slow 3): desired (5,0); (5,0)/0.25 = (20,0) → clamp 10. Not in sight: ahead (12,0)
        // is 12 away, the leader 10 (> 3). No neighbours within 1.5.
        let w = world_with(vec![agent_at(1, Vec2::new(10.0, 0.0), Vec2::new(2.0, 0.0)), agent_at(2, Vec2::ZERO, Vec2::ZERO)]);
        assert_close(steer_one(&w, 2, &super::super::Behavior::LeaderFollowing(params())).linear, Vec2::new(10.0, 0.0));
    }

    #[test]
    fn steps_out_of_the_leaders_way() {
        // Leader at origin moving (2,0): ahead (2,0), behind (−2,0). Follower at (2, 1) at rest:
        // 1 from ahead → in sight. Arrive at (−2,0): to (−4,−1), dist 4.123 > 3: desired
        // 5·(−0.9701,−0.2425) = (−4.8507,−1.2127); /0.25 → length 20 → clamp 10: (−9.7014,−2.4254).
        // Evade: look-ahead = dist 2.236/(5 + 2) = 0.3194 (< 1): predicted (0.6389, 0);
        // flee dir (2 − 0.6389, 1) = (1.3611, 1)/1.6889 = (0.8059, 0.5921) × 5 = (4.0296, 2.9605).
        // Separation: the leader is 2.236 away (> 1.5): none. Sum (−5.6718, 0.5351).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(2.0, 0.0)), agent_at(2, Vec2::new(2.0, 1.0), Vec2::ZERO)]);
        let s = steer_one(&w, 2, &super::super::Behavior::LeaderFollowing(params()));
        assert!((s.linear - Vec2::new(-5.6718, 0.5351)).length() < 1e-3, "{:?}", s.linear);
    }

    #[test]
    fn no_leader_no_steering_and_validation() {
        let w = world_with(vec![agent_at(2, Vec2::ZERO, Vec2::ZERO)]);
        assert_eq!(steer_one(&w, 2, &super::super::Behavior::LeaderFollowing(params())), Steering::ZERO);
        let p = LeaderFollowingParams { behind_distance: -1.0, ..params() };
        assert!(p.validate().unwrap_err().to_string().contains("behind_distance"));
    }
}
