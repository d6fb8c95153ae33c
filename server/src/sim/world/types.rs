//! What goes into a world (commands, spawn specs) and what comes out (outcomes, events,
//! step statistics, audits).

use glam::Vec2;

use crate::sim::agent::{AgentId, GroupId, Limits};
use crate::sim::behaviors::{BehaviorEntry, BehaviorKind};

/// Something that happened in the world, reported once.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Agents were spawned.
    Spawned { id: AgentId, group: GroupId },
    /// An agent was removed.
    Despawned { id: AgentId },
    /// A MoveTo agent's order ended: it stopped at its destination, or short of it (`gave_up`:
    /// no progress for `give_up_after`, `short_by` from its stop point; `unreachable`: at the
    /// nearest reachable point, `short_by` from the target asked for).
    DestinationReached { id: AgentId, position: Vec2, unreachable: bool, gave_up: bool, short_by: f32 },
    /// A `once` path follower reached the end of its path.
    PathCompleted { id: AgentId },
}

impl Event {
    /// Stable snake_case name of the event kind; an order that ended short of its goal is
    /// named as the wire names it (`gave_up`, `unreachable`), never `destination_reached`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Spawned { .. } => "spawned",
            Event::Despawned { .. } => "despawned",
            Event::DestinationReached { gave_up: true, .. } => "gave_up",
            Event::DestinationReached { unreachable: true, .. } => "unreachable",
            Event::DestinationReached { .. } => "destination_reached",
            Event::PathCompleted { .. } => "path_completed",
        }
    }
}

/// Where a spawned group is placed.
#[derive(Debug, Clone, PartialEq)]
pub enum SpawnArea {
    /// Uniformly inside a rectangle.
    Rect { min: Vec2, max: Vec2 },
    /// Uniformly inside a disc.
    Disc { center: Vec2, radius: f32 },
    /// Evenly spaced on a circle (the `crossing` test).
    Ring { center: Vec2, radius: f32 },
    /// At these points (count = number of points).
    Points(Vec<Vec2>),
}

/// How targets of spawned agents are bound per agent at spawn time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TargetBinding {
    /// Targets stay as given.
    #[default]
    AsGiven,
    /// Every point target becomes the agent's spawn point mirrored through `center`
    /// (agents on a ring head for their antipodes).
    Antipode { center: Vec2 },
    /// Every agent target becomes member `i mod n` of `group` (agent `i` of this spawn).
    GroupMember { group: GroupId },
}

/// A group of agents to spawn.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnSpec {
    /// Group name (created on first use).
    pub group: String,
    /// Number of agents (ignored for [`SpawnArea::Points`]).
    pub count: usize,
    /// Placement.
    pub area: SpawnArea,
    /// Limits of every agent.
    pub limits: Limits,
    /// Behaviours of every agent.
    pub behaviors: Vec<BehaviorEntry>,
    /// Per-agent target binding.
    pub binding: TargetBinding,
    /// Initial speed along the initial orientation.
    pub initial_speed: f32,
    /// Initial orientation; `None` = random (faces the ring centre for [`SpawnArea::Ring`]).
    pub orientation: Option<f32>,
}

impl SpawnSpec {
    /// A spawn of `count` agents in a rectangle with default limits and no behaviours.
    pub fn new(group: &str, count: usize, area: SpawnArea) -> Self {
        SpawnSpec {
            group: group.to_string(),
            count,
            area,
            limits: Limits::default(),
            behaviors: Vec::new(),
            binding: TargetBinding::AsGiven,
            initial_speed: 0.0,
            orientation: None,
        }
    }
}

/// A command applied between ticks. Each returns an [`Outcome`] or a [`crate::sim::SimError`] and leaves
/// the world unchanged on error.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Spawn a group.
    Spawn(SpawnSpec),
    /// Remove an agent.
    Despawn(AgentId),
    /// Replace an agent's behaviours.
    SetBehaviors { agent: AgentId, entries: Vec<BehaviorEntry> },
    /// Add a behaviour.
    AddBehavior { agent: AgentId, entry: BehaviorEntry },
    /// Remove every behaviour of a kind.
    RemoveBehavior { agent: AgentId, kind: BehaviorKind },
    /// Remove every behaviour.
    ResetBehaviors { agent: AgentId },
    /// Add a circular obstacle.
    AddObstacle { center: Vec2, radius: f32 },
    /// Move (and optionally resize) an obstacle.
    MoveObstacle { id: u32, center: Vec2, radius: Option<f32> },
    /// Remove an obstacle.
    RemoveObstacle(u32),
    /// Add a wall segment.
    AddWall { a: Vec2, b: Vec2 },
    /// Remove a wall.
    RemoveWall(u32),
    /// Send agents to `target` along the flow field; each stops within `stopping_distance` of
    /// its place in the group's formation round the target and emits `DestinationReached` once.
    MoveTo { agents: Vec<AgentId>, target: Vec2, stopping_distance: f32 },
}

impl Command {
    /// A command on agents (spawn, despawn, their behaviours, MoveTo), which a player may give
    /// for its own agents; the others change the world's obstacles and walls (the admin's).
    pub fn is_agent_command(&self) -> bool {
        match self {
            Command::Spawn(_)
            | Command::Despawn(_)
            | Command::SetBehaviors { .. }
            | Command::AddBehavior { .. }
            | Command::RemoveBehavior { .. }
            | Command::ResetBehaviors { .. }
            | Command::MoveTo { .. } => true,
            Command::AddObstacle { .. } | Command::MoveObstacle { .. } | Command::RemoveObstacle(_) | Command::AddWall { .. } | Command::RemoveWall(_) => false,
        }
    }
}

/// The result of a successful command.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ids of spawned agents.
    Spawned(Vec<AgentId>),
    /// Id of the new obstacle or wall.
    Added(u32),
    /// Number of entries or objects removed.
    Removed(usize),
    /// Done.
    Done,
}

/// Counters of one tick.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepStats {
    /// Agent steps whose path crossed a wall segment (after the safety net).
    pub wall_crossings: u32,
    /// Times the safety net pushed an agent out of an obstacle or stopped it at a wall.
    pub contacts: u32,
    /// Integrator results refused for being non-finite (should stay 0).
    pub non_finite: u32,
}

/// Safety checks over the current state (used by reports and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Audit {
    /// Agents whose centre is inside an obstacle.
    pub obstacle_penetrations: u32,
    /// Smallest gap between an agent's edge and an obstacle's edge (∞ with no obstacles).
    pub min_obstacle_clearance: f32,
    /// Agent pairs closer than half the sum of their radii.
    pub agent_overlaps: u32,
    /// Largest overlap of two agents: radii sum minus centre distance (0 when none touch).
    pub max_penetration: f32,
    /// Agent pairs overlapping by more than 1 % of their radii sum.
    pub overlap_pairs: u32,
    /// Agents with a non-finite number in their state.
    pub non_finite: u32,
    /// Agents outside the bounds.
    pub out_of_bounds: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_ended_short_is_named_as_the_wire_names_it() {
        let ended = |unreachable, gave_up| Event::DestinationReached { id: 1, position: Vec2::ZERO, unreachable, gave_up, short_by: 2.0 }.kind();
        assert_eq!(ended(false, false), "destination_reached");
        assert_eq!(ended(false, true), "gave_up");
        assert_eq!(ended(true, false), "unreachable");
        assert_eq!(ended(true, true), "gave_up", "a give-up first, as on the wire");
    }
}
