//! World settings and their checks.

use glam::Vec2;

use crate::sim::behaviors::move_to::MoveToParams;
use crate::sim::error::{SimError, check_non_negative, check_positive, check_vec};
use crate::sim::geometry::Bounds;

/// What happens at the world's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EdgeRule {
    /// Agents stop at the edge (the outward velocity is removed).
    #[default]
    Clamp,
    /// Agents leaving one side enter on the opposite side.
    Wrap,
    /// Agents are reflected back in with the outward velocity reversed.
    Bounce,
}

/// Settings of one world. All validated by [`World::new`](super::World::new).
#[derive(Debug, Clone, PartialEq)]
pub struct WorldConfig {
    /// World bounds.
    pub bounds: Bounds,
    /// Edge rule.
    pub edge: EdgeRule,
    /// Ticks per second; dt = 1 / tick_rate.
    pub tick_rate: f32,
    /// Seed of every random number in the world.
    pub seed: u64,
    /// Cell size of the agent grid; `None` = the largest neighbour reach of any behaviour
    /// (at least 1).
    pub agent_cell_size: Option<f32>,
    /// Cell size of the obstacle/wall index.
    pub static_cell_size: f32,
    /// When true, agents are kept out of obstacles and from crossing walls by the integrator
    /// (a safety net under the avoidance behaviours; counted as contacts).
    pub solid_obstacles: bool,
    /// When true, agents that would overlap after a step are pushed apart by the integrator
    /// (each of a pair half the overlap, counted as contacts): a guarantee under the avoidance
    /// behaviours, which cannot always prevent contact in a jam.
    pub solid_agents: bool,
    /// Neighbour queries scan every agent (the O(N²) baseline for benchmarks) instead of the grid.
    pub brute_force_neighbors: bool,
    /// Most agents the world may hold.
    pub max_agents: usize,
    /// Most obstacles.
    pub max_obstacles: usize,
    /// Most walls.
    pub max_walls: usize,
    /// Most agents one spawn may create (and one MoveTo may order).
    pub max_spawn: usize,
    /// Cell size of the navigation grid used by MoveTo (default 1).
    pub nav_cell_size: f32,
    /// Distance navigation keeps from obstacles (cells closer are blocked; default 0.75).
    pub nav_clearance: f32,
    /// Most flow fields cached (least recently used evicted; default 16).
    pub flow_cache_capacity: usize,
    /// Most flow fields requested per tick (each costs O(nav cells) to build); agents whose
    /// field is not ready yet head straight for their goal meanwhile (default 2).
    pub flow_builds_per_tick: usize,
    /// Ticks from requesting a flow field to using it (0 = built within the requesting tick).
    /// A host may build requested fields on other threads meanwhile ([`World::take_field_jobs`](super::World::take_field_jobs));
    /// the states are the same either way (default 2).
    pub flow_build_ticks: u32,
    /// Nav cells of flow fields that may be requested per tick on average (fields of larger
    /// grids are requested less often and used later; default 50 000: a million cells a
    /// second at 20 Hz, about a sixth of a core).
    pub flow_build_cells_per_tick: u32,
    /// MoveTo tuning.
    pub move_to: MoveToParams,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(200.0) },
            edge: EdgeRule::Clamp,
            tick_rate: 20.0,
            seed: 1,
            agent_cell_size: None,
            static_cell_size: 8.0,
            solid_obstacles: true,
            solid_agents: true,
            brute_force_neighbors: false,
            max_agents: 200_000,
            max_obstacles: 10_000,
            max_walls: 10_000,
            max_spawn: 100_000,
            nav_cell_size: 1.0,
            nav_clearance: 0.75,
            flow_cache_capacity: 16,
            flow_builds_per_tick: 2,
            flow_build_ticks: 2,
            flow_build_cells_per_tick: 50_000,
            move_to: MoveToParams::default(),
        }
    }
}

impl WorldConfig {
    /// Validates every field; the error names it.
    pub fn validate(&self) -> Result<(), SimError> {
        check_vec("bounds.min", self.bounds.min)?;
        check_vec("bounds.max", self.bounds.max)?;
        let size = self.bounds.size();
        if size.x <= 0.0 || size.y <= 0.0 {
            return Err(SimError::invalid("bounds", "max must be greater than min on both axes"));
        }
        check_positive("tick_rate", self.tick_rate)?;
        if !(0.1..=1000.0).contains(&self.tick_rate) {
            return Err(SimError::invalid("tick_rate", "must be between 0.1 and 1000"));
        }
        if let Some(c) = self.agent_cell_size {
            check_positive("agent_cell_size", c)?;
        }
        check_positive("static_cell_size", self.static_cell_size)?;
        check_positive("nav_cell_size", self.nav_cell_size)?;
        if self.nav_cell_size < 0.05 {
            return Err(SimError::invalid("nav_cell_size", "must be at least 0.05"));
        }
        check_non_negative("nav_clearance", self.nav_clearance)?;
        if self.nav_clearance > 1000.0 {
            return Err(SimError::invalid("nav_clearance", "must be at most 1000"));
        }
        if !(1..=64).contains(&self.flow_builds_per_tick) {
            return Err(SimError::invalid("flow_builds_per_tick", "must be between 1 and 64"));
        }
        if self.flow_build_cells_per_tick == 0 {
            return Err(SimError::invalid("flow_build_cells_per_tick", "must be at least 1"));
        }
        if self.flow_build_ticks > 64 {
            return Err(SimError::invalid("flow_build_ticks", "must be at most 64"));
        }
        if !(1..=4096).contains(&self.flow_cache_capacity) {
            return Err(SimError::invalid("flow_cache_capacity", "must be between 1 and 4096"));
        }
        self.move_to.validate().map_err(|e| e.within("move_to"))?;
        for (name, v) in [
            ("max_agents", self.max_agents),
            ("max_obstacles", self.max_obstacles),
            ("max_walls", self.max_walls),
            ("max_spawn", self.max_spawn),
        ] {
            if v > 10_000_000 {
                return Err(SimError::invalid(name, "must be at most 10000000"));
            }
        }
        Ok(())
    }

    /// The fixed step, seconds.
    pub fn dt(&self) -> f32 {
        1.0 / self.tick_rate
    }
}
