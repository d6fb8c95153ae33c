//! The server's caps on one world: the most agents it holds, the largest spawn, and the
//! crowding bounds (`admission.rs`) that every scenario, spawn and static shape must pass. The
//! runner asks this part; it keeps no cap of its own.

use glam::Vec2;

use super::types::CmdError;
use crate::runtime::admission::{self as adm, Crowding};
use crate::scenario::{CappedBuildError, Scenario};
use crate::sim::world::{Command, World};
use crate::sim::SimError;

/// The caps of one world.
pub(super) struct Caps {
    /// Most agents in the world.
    max_agents: usize,
    /// Most agents one spawn may create.
    max_spawn: usize,
    /// What spawns and static shapes may put into the world.
    crowding: Crowding,
}

impl Caps {
    /// The caps a world starts (and keeps) with.
    pub(super) fn new(max_agents: usize, max_spawn: usize, crowding: Crowding) -> Self {
        Caps { max_agents, max_spawn, crowding }
    }

    /// Most agents in the world.
    pub(super) fn max_agents(&self) -> usize {
        self.max_agents
    }

    /// Most agents one spawn may create.
    pub(super) fn max_spawn(&self) -> usize {
        self.max_spawn
    }

    /// A world built from `scenario` with the caps applied; with `admit`, its groups must also
    /// pass the crowding bounds (create, load and reset; a recording's re-base is the world as
    /// it is).
    pub(super) fn build(&self, scenario: &Scenario, admit: bool) -> Result<World, CmdError> {
        let world = build_world(scenario, self.max_agents, self.max_spawn)?;
        if admit {
            adm::check_scenario(scenario, &world, &self.crowding).map_err(CmdError::Sim)?;
        }
        Ok(world)
    }

    /// Whether one of `cmds` spawns more than `max_spawn` agents (invalid whoever asks).
    pub(super) fn oversize(&self, cmds: &[Command]) -> bool {
        cmds.iter().any(|c| spawn_count(std::slice::from_ref(c)) > self.max_spawn)
    }

    /// The recording hook of a world under these caps.
    pub(super) fn hook(&self, hub: Option<std::sync::Arc<crate::record::RecordHub>>) -> crate::record::Hook {
        crate::record::Hook::new(hub, self.max_agents, self.max_spawn)
    }

    /// Checks the spawns and static shapes among `cmds` against the crowding bounds, all of
    /// them (in order, each counting those before) before any is applied to `world`.
    pub(super) fn admit(&self, world: &World, cmds: &[Command]) -> Result<(), CmdError> {
        if cmds.iter().any(|c| matches!(c, Command::Spawn(_))) {
            let bounds = world.config().bounds;
            let mut covered = adm::cover(world);
            for c in cmds {
                if let Command::Spawn(spec) = c {
                    covered = adm::check_spawn(spec, bounds, covered, &self.crowding)?;
                }
            }
        }
        if cmds.iter().any(|c| matches!(c, Command::AddObstacle { .. } | Command::MoveObstacle { .. } | Command::AddWall { .. })) {
            let shape = adm::static_shape(world.config());
            let mut used = adm::static_cells(world, &shape);
            for c in cmds {
                match c {
                    Command::AddObstacle { center, radius } => {
                        let (lo, hi) = adm::obstacle_box(*center, *radius);
                        used = adm::check_static(used + adm::box_cells(&shape, lo, hi), "radius", &self.crowding)?;
                    }
                    Command::MoveObstacle { id, center, radius } => {
                        if let Some(o) = world.obstacles().iter().find(|o| o.id == *id) {
                            let (lo, hi) = adm::obstacle_box(o.center, o.radius);
                            let old = adm::box_cells(&shape, lo, hi);
                            let (lo, hi) = adm::obstacle_box(*center, radius.unwrap_or(o.radius));
                            used = adm::check_static(used.saturating_sub(old) + adm::box_cells(&shape, lo, hi), "radius", &self.crowding)?;
                        }
                    }
                    Command::AddWall { a, b } => {
                        used = adm::check_static(used + adm::box_cells(&shape, a.min(*b), a.max(*b)), "b", &self.crowding)?;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Checks that obstacles at `placed` (centre, radius) fit the static index of `world`
    /// (random obstacles; the field named is `max_radius`).
    pub(super) fn admit_obstacles(&self, world: &World, placed: &[(Vec2, f32)]) -> Result<(), SimError> {
        let shape = adm::static_shape(world.config());
        let adding: u64 = placed
            .iter()
            .map(|&(c, r)| {
                let (lo, hi) = adm::obstacle_box(c, r);
                adm::box_cells(&shape, lo, hi)
            })
            .sum();
        adm::check_static(adm::static_cells(world, &shape) + adding, "max_radius", &self.crowding).map(drop)
    }
}

/// Builds a world from a scenario with the server's caps applied.
pub fn build_world(scenario: &Scenario, max_agents: usize, max_spawn: usize) -> Result<World, CmdError> {
    scenario.build_capped(max_agents, max_spawn).map_err(|e| match e {
        CappedBuildError::TooMany(e) => CmdError::Sim(e),
        CappedBuildError::Scenario(e) => CmdError::Invalid(e.to_string()),
    })
}

/// Agents the spawns among `cmds` create.
pub(super) fn spawn_count(cmds: &[Command]) -> usize {
    cmds.iter()
        .map(|c| match c {
            Command::Spawn(spec) => match &spec.area {
                crate::sim::world::SpawnArea::Points(p) => p.len(),
                _ => spec.count,
            },
            _ => 0,
        })
        .fold(0usize, usize::saturating_add)
}

