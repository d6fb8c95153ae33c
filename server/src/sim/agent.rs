//! Agents: kinematic state, limits and per-agent behaviour memory.

use std::sync::Arc;

use glam::Vec2;

use super::spatial::Yielding;

use super::behaviors::BehaviorSet;
use super::error::{SimError, check_non_negative, check_positive};

/// Stable agent id, never reused within a world.
pub type AgentId = u32;
/// Index of an agent group in the world's group table.
pub type GroupId = u16;

/// Movement limits of one agent (000 `maxSpeed`/`maxAccel`/`maxRotation`, 001 radius, 003 mass).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Top speed, units/s.
    pub max_speed: f32,
    /// Largest linear acceleration, units/s² (003's `max_steer_force / mass`).
    pub max_accel: f32,
    /// Largest angular speed, rad/s.
    pub max_rotation: f32,
    /// Largest angular acceleration, rad/s².
    pub max_angular_accel: f32,
    /// Bounding radius, units (001).
    pub radius: f32,
    /// Mass (003); only scales forces that the seeds divide by mass.
    pub mass: f32,
}

impl Default for Limits {
    /// 000's usage example: max speed 5, max accel 10; rotation limits of a nimble unit.
    fn default() -> Self {
        Limits { max_speed: 5.0, max_accel: 10.0, max_rotation: 6.0, max_angular_accel: 20.0, radius: 0.5, mass: 1.0 }
    }
}

impl Limits {
    /// Validates every field; the error names the field (`max_speed`, …).
    pub fn validated(self) -> Result<Self, SimError> {
        check_non_negative("max_speed", self.max_speed)?;
        check_non_negative("max_accel", self.max_accel)?;
        check_non_negative("max_rotation", self.max_rotation)?;
        check_non_negative("max_angular_accel", self.max_angular_accel)?;
        check_positive("radius", self.radius)?;
        check_positive("mass", self.mass)?;
        if self.radius > 1000.0 {
            return Err(SimError::invalid("radius", "must be at most 1000"));
        }
        if self.mass < 1e-3 {
            return Err(SimError::invalid("mass", "must be at least 0.001"));
        }
        Ok(self)
    }
}

/// How a path follower walks its waypoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathMode {
    /// Stop at the last waypoint and emit `PathCompleted`.
    #[default]
    Once,
    /// Go back to the first waypoint after the last.
    Loop,
    /// Walk the waypoints back and forth (003 reverses the step).
    PingPong,
}

/// State that behaviours carry from tick to tick. Updated only in the apply phase.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AgentMemory {
    /// Millington wander: the wander angle relative to the heading. Circle wander: the angle on the circle.
    pub wander_angle: f32,
    /// RandomTarget wander: the current random target.
    pub random_target: Option<Vec2>,
    /// RandomTarget wander: simulation time (s) at which a new target is picked.
    pub random_target_until: f32,
    /// Context avoidance: the smoothed avoidance direction of the last tick (004 `lastAvoidanceDir`).
    pub last_avoid_dir: Vec2,
    /// MoveTo: the direction used last tick (004 `lastSteering`) for the direction threshold.
    pub last_move_dir: Vec2,
    /// Path following: index of the current waypoint.
    pub path_index: u32,
    /// Path following: +1 or −1 (ping-pong walks backwards with −1).
    pub path_step: i8,
    /// Path following: set once a `once` path reached its end.
    pub path_done: bool,
    /// MoveTo (reciprocal mode): the last avoidance plan found no agent able to touch this one
    /// before its next plan, so the ticks between plans skip the contact test too (see
    /// `MoveToParams::replan_every_ticks`). False after any other steering.
    pub avoid_clear: bool,
}

/// A MoveTo order (004 `MoveTo`): layered over the agent's behaviours while active; the
/// behaviours resume when it is done.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoveOrder {
    /// The point asked for.
    pub target: Vec2,
    /// Where the flow field leads: `target`, or the nearest reachable point when unreachable.
    pub goal: Vec2,
    /// Navigation cell of `goal` (the flow-field cache key).
    pub goal_cell: u32,
    /// Formation the agent stops in (world-side id).
    pub formation: u32,
    /// Slot claimed in the formation, if any.
    pub slot: Option<u32>,
    /// Where the agent stops: its slot once claimed, else `goal`.
    pub stop_point: Vec2,
    /// Distance from the goal inside which the agent claims a slot.
    pub claim_radius: f32,
    /// The agent stops when within this distance of `stop_point`.
    pub tolerance: f32,
    /// The stopping distance asked for.
    pub stopping_distance: f32,
    /// True when `target` could not be reached and `goal` is the nearest reachable point.
    pub unreachable: bool,
    /// Set when the agent has stopped at its stop point, or gave up.
    pub done: bool,
    /// Set once the order's `DestinationReached` was emitted (a formation member sent on again
    /// by a slot trade does not emit it twice).
    pub reported: bool,
    /// Set with `done` when the agent gave up short of its stop point (it then holds the place
    /// where it gave up: `stop_point` is moved there, and `short_by` says how far it was).
    pub gave_up: bool,
    /// How far from its stop point the agent gave up (0 unless `gave_up`).
    pub short_by: f32,
    /// Smallest distance to `stop_point` reached so far (progress bookkeeping of the apply phase).
    pub best: f32,
    /// Ticks since `best` last improved by a tenth of the agent's radius (saturating).
    pub stall: u32,
    /// The grid version and nav cell from which the agent last saw `goal` along free cells
    /// (the line-of-sight test is made again only when either changes).
    pub sight: Option<(u64, u32)>,
    /// Set while the agent comes to a narrow passage (see [`crate::sim::nav::portals`]).
    pub portal: Option<PortalTurn>,
}

/// An agent's turn at the narrow passage it comes to (see [`crate::sim::nav::portals`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortalTurn {
    /// Centre of the passage.
    pub center: Vec2,
    /// Radius of the disc round `center` that waiting agents keep clear.
    pub clear: f32,
    /// True when the agent must wait (the other direction has the passage).
    pub wait: bool,
}

impl PortalTurn {
    /// The passage's centre when the agent must wait there.
    pub fn waits_at(turn: Option<PortalTurn>) -> Option<(Vec2, f32)> {
        turn.filter(|t| t.wait).map(|t| (t.center, t.clear))
    }
}

/// Seconds without progress after which an agent on its way counts as stuck (in `simulate`'s
/// reports, REST and the viewer; it goes on trying until `give_up_after`).
pub const STUCK_SECS: f32 = 10.0;

impl MoveOrder {
    /// True while the agent is still moving to its destination.
    pub fn active(&self) -> bool {
        !self.done
    }

    /// The stall count from which an order counts as stuck at `tick_rate` ticks per second.
    pub fn stuck_ticks(tick_rate: f32) -> u32 {
        (STUCK_SECS * tick_rate).round() as u32
    }

    /// True while the agent is on its way and made no progress for [`STUCK_SECS`].
    pub fn stuck(&self, tick_rate: f32) -> bool {
        self.active() && self.stall >= Self::stuck_ticks(tick_rate)
    }

    /// Progress bookkeeping after a step that left the agent (of radius `radius`) at `position`:
    /// a new best distance to the stop point by a tenth of the radius restarts the stall count.
    /// A done order counts from where the agent was pushed off its stop point, and an agent
    /// back on it (within `tolerance`) is not stalled. Queueing at a narrow passage is not a stall.
    pub fn track_progress(&mut self, position: Vec2, radius: f32) {
        let d = position.distance(self.stop_point);
        if (self.done && d <= self.tolerance) || d < self.best - 0.1 * radius {
            self.best = d;
            self.stall = 0;
        } else if self.portal.is_none() {
            self.stall = self.stall.saturating_add(1);
        }
    }
}

/// One agent of the world. Aligned to a cache line (120 bytes padded to 128): the compute phase
/// reads agents in cell order, a random order in memory, and an aligned agent spans exactly two
/// lines instead of usually three.
#[derive(Debug, Clone)]
#[repr(align(64))]
pub struct Agent {
    /// Stable id.
    pub id: AgentId,
    /// Group index.
    pub group: GroupId,
    /// Position.
    pub position: Vec2,
    /// Velocity, units/s.
    pub velocity: Vec2,
    /// Orientation in radians; heading = (cos θ, sin θ).
    pub orientation: f32,
    /// Angular velocity, rad/s (000 `rotation`).
    pub angular_velocity: f32,
    /// Limits.
    pub limits: Limits,
    /// Behaviours, shared by the agents of a group until one is changed (copy on write).
    pub behaviors: Arc<BehaviorSet>,
    /// Behaviour memory.
    pub memory: AgentMemory,
    /// The current or last MoveTo order (boxed: most agents have none, and a smaller agent
    /// means fewer cache lines per agent in the tick).
    pub order: Option<Box<MoveOrder>>,
}

impl Agent {
    /// Current speed.
    pub fn speed(&self) -> f32 {
        self.velocity.length()
    }

    /// The active MoveTo order, if any.
    pub fn active_order(&self) -> Option<&MoveOrder> {
        self.order.as_deref().filter(|o| o.active())
    }

    /// The finished MoveTo order of an agent that holds its place: its order is done and no
    /// behaviour steers it. Such an agent keeps to the order's stop point, and steps aside for
    /// moving agents and comes back.
    pub fn held_order(&self) -> Option<&MoveOrder> {
        self.order.as_deref().filter(|o| o.done && self.behaviors.entries().is_empty())
    }

    /// True when the agent makes way for agents on their way: it holds its place after its
    /// order ([`Agent::held_order`]), or waits for its turn at a narrow passage.
    pub fn gives_way(&self) -> Yielding {
        if self.held_order().is_some() {
            Yielding::Holds
        } else if self.active_order().is_some_and(|o| o.portal.is_some_and(|t| t.wait)) {
            Yielding::Waits
        } else {
            Yielding::No
        }
    }

    /// Unit heading of the orientation.
    pub fn heading(&self) -> Vec2 {
        super::math::heading(self.orientation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_validation_names_fields() {
        assert!(Limits::default().validated().is_ok());
        let e = Limits { max_speed: f32::NAN, ..Limits::default() }.validated().unwrap_err();
        assert!(e.to_string().contains("max_speed"));
        let e = Limits { radius: 0.0, ..Limits::default() }.validated().unwrap_err();
        assert!(e.to_string().contains("radius"));
        let e = Limits { mass: 1e-9, ..Limits::default() }.validated().unwrap_err();
        assert!(e.to_string().contains("mass"));
    }
}
