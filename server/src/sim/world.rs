//! The world: agents, obstacles, walls, groups, and the fixed-step tick.
//!
//! A tick runs in two phases. **Compute:** every agent's steering is computed from an immutable
//! [`WorldView`] (in parallel with rayon when a pool is installed). **Apply:** each agent's
//! steering goes through the one integrator ([`integrate`]) and the safety constraints.
//!
//! **Invariant:** nothing in a tick depends on the order in which agents are stored or computed
//! (`agents` is stored in rough cell order, see [`super::roster`]; whatever is order-sensitive
//! goes by id), so the same scenario, seed and commands give bit-identical states on any number
//! of threads.
//!
//! **Invariant:** no non-finite number enters the world: every input is validated, steering is
//! sanitized before the integrator, and the apply phase refuses a non-finite result of the
//! integrator and the safety net (the agent keeps its last position and orientation, at rest).

use std::sync::Arc;

use glam::Vec2;
use rayon::prelude::*;

use super::agent::{Agent, AgentId, AgentMemory, GroupId, Limits};
use super::behaviors::move_to::{self, EVENT_DESTINATION_REACHED, MoveToParams};
use super::behaviors::path_following::EVENT_PATH_COMPLETED;
use super::behaviors::reciprocal_avoidance::NO_CONTACT;
use super::behaviors::{Behavior, BehaviorEntry, BehaviorSet, Scratch, Target};
use super::error::{SimError, check_finite, check_positive, check_vec};
use super::math::{clamp_len, closest_on_segment, dir, orientation_of, pair_dir, perp, segment_intersection, wrap_angle};
use super::nav::flowfield::FlowField;
use super::nav::{FieldJob, FieldTicket, NavState};
use super::rng::Rng;
use super::roster::{ById, Roster};
use super::spatial::{AgentGrid, Neighbor, StaticIndex};
use super::steering::Steering;
use super::view::{Bounds, Obstacle, Wall, WorldView};

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

/// Settings of one world. All validated by [`World::new`].
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
    /// A host may build requested fields on other threads meanwhile ([`World::take_field_jobs`]);
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
        super::error::check_non_negative("nav_clearance", self.nav_clearance)?;
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

/// Something that happened in the world, reported once.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Agents were spawned.
    Spawned { id: AgentId, group: GroupId },
    /// An agent was removed.
    Despawned { id: AgentId },
    /// A MoveTo agent stopped at its destination.
    DestinationReached { id: AgentId, position: Vec2, unreachable: bool },
    /// A `once` path follower reached the end of its path.
    PathCompleted { id: AgentId },
}

impl Event {
    /// Stable snake_case name of the event kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Spawned { .. } => "spawned",
            Event::Despawned { .. } => "despawned",
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

/// A command applied between ticks. Each returns an [`Outcome`] or a [`SimError`] and leaves
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
    RemoveBehavior { agent: AgentId, kind: String },
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

/// One agent's output of the compute phase: steering, behaviour memory, event flags. Aligned to
/// a cache line so that the apply phase, which reads these in a random order, touches one line
/// per agent instead of two.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct StepResult(Steering, AgentMemory, u8);

/// The agents are re-sorted into cell order when more than one in this many starts a break in
/// the grid's order (an agent whose cell-order successor is not stored right after it).
const RESORT_BREAKS_DIVISOR: usize = 8;

/// Fewest agents per rayon task in the light whole-world scans of a step (the neighbour reach
/// and the event flags): below this a scan stays on one thread.
const SCAN_MIN_LEN: usize = 16_384;

/// The simulation world. [`World::fork`] copies it (replay keyframes).
pub struct World {
    config: WorldConfig,
    /// The agents: stored in (roughly) cell order, found by id.
    agents: Roster,
    next_agent_id: AgentId,
    obstacles: Vec<Obstacle>,
    walls: Vec<Wall>,
    next_static_id: u32,
    groups: Vec<String>,
    grid: AgentGrid,
    statics: StaticIndex,
    statics_dirty: bool,
    nav: Option<NavState>,
    tick: u64,
    rng: Rng,
    events: Vec<Event>,
    /// Most events kept between drains; older ones are dropped (and counted).
    max_pending_events: usize,
    events_dropped: u64,
    /// Compute-phase output buffer, reused every tick (cell order).
    results: Vec<StepResult>,
    /// Largest radius and top speed any agent was spawned with (bounds for the contact query).
    extent: (f32, f32),
    /// Most contact rounds per step ([`CONTACT_ROUNDS_MAX`]; a test lowers it to show what the
    /// rounds past [`CONTACT_ROUNDS`] do).
    contact_rounds_max: usize,
}

impl World {
    /// An empty world.
    pub fn new(config: WorldConfig) -> Result<Self, SimError> {
        config.validate()?;
        let grid = AgentGrid::empty(config.bounds);
        let statics = StaticIndex::build(config.bounds, config.static_cell_size, &[], &[]);
        let rng = Rng::new(config.seed);
        Ok(World {
            config,
            agents: Roster::default(),
            next_agent_id: 1,
            obstacles: Vec::new(),
            walls: Vec::new(),
            next_static_id: 1,
            groups: Vec::new(),
            grid,
            statics,
            statics_dirty: false,
            nav: None,
            tick: 0,
            rng,
            events: Vec::new(),
            max_pending_events: 1 << 20,
            events_dropped: 0,
            results: Vec::new(),
            extent: (0.0, 0.0),
            contact_rounds_max: CONTACT_ROUNDS_MAX,
        })
    }

    /// Settings.
    pub fn config(&self) -> &WorldConfig {
        &self.config
    }

    /// The agents, in id order.
    pub fn agents(&self) -> ById<'_> {
        self.agents.by_id()
    }

    /// The agents in storage order (roughly cell order; any order as far as the results go).
    /// For sums and scans whose result does not depend on the order.
    pub fn agents_unordered(&self) -> &[Agent] {
        self.agents.storage()
    }

    /// The agent with `id`.
    pub fn agent(&self, id: AgentId) -> Option<&Agent> {
        self.agents.get(id)
    }

    fn agent_mut(&mut self, id: AgentId) -> Result<&mut Agent, SimError> {
        self.agents.get_mut(id).ok_or(SimError::UnknownAgent(id))
    }

    fn agent_index(&self, id: AgentId) -> Result<usize, SimError> {
        self.agents.slot(id).ok_or(SimError::UnknownAgent(id))
    }

    /// Obstacles.
    pub fn obstacles(&self) -> &[Obstacle] {
        &self.obstacles
    }

    /// Walls.
    pub fn walls(&self) -> &[Wall] {
        &self.walls
    }

    /// Group names; a [`GroupId`] indexes this list.
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// The id of group `name`, if it exists.
    pub fn group_id(&self, name: &str) -> Option<GroupId> {
        self.groups.iter().position(|g| g == name).map(|i| i as GroupId)
    }

    /// Ticks stepped so far.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Simulation time, seconds.
    pub fn time(&self) -> f64 {
        self.tick as f64 / f64::from(self.config.tick_rate)
    }

    /// Events since the last drain.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Events dropped because nobody drained them.
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= self.max_pending_events {
            self.events_dropped += 1;
        } else {
            self.events.push(e);
        }
    }

    /// Sets the agent caps (the server's limits).
    pub fn set_caps(&mut self, max_agents: usize, max_spawn: usize) {
        self.config.max_agents = max_agents;
        self.config.max_spawn = max_spawn;
    }

    /// Switches neighbour queries to the O(N²) brute-force baseline (same results, for benches).
    pub fn set_brute_force(&mut self, on: bool) {
        self.config.brute_force_neighbors = on;
    }

    /// Changes the tick rate (validated).
    pub fn set_tick_rate(&mut self, rate: f32) -> Result<(), SimError> {
        let cfg = WorldConfig { tick_rate: rate, ..self.config.clone() };
        cfg.validate()?;
        self.config = cfg;
        Ok(())
    }

    /// Applies a command.
    pub fn apply(&mut self, cmd: Command) -> Result<Outcome, SimError> {
        match cmd {
            Command::Spawn(spec) => self.spawn(spec).map(Outcome::Spawned),
            Command::Despawn(id) => self.despawn(id).map(|()| Outcome::Done),
            Command::SetBehaviors { agent, entries } => {
                self.agent_index(agent)?;
                let set = BehaviorSet::new(entries).map_err(|e| e.within("behaviors"))?;
                self.check_agent_targets(&set)?;
                let a = self.agent_mut(agent)?;
                a.behaviors = Arc::new(set);
                a.memory = AgentMemory::default();
                Ok(Outcome::Done)
            }
            Command::AddBehavior { agent, entry } => {
                let mut set = (*self.agent_mut(agent)?.behaviors).clone();
                set.add(entry).map_err(|e| e.within("behavior"))?;
                self.check_agent_targets(&set)?;
                self.agent_mut(agent)?.behaviors = Arc::new(set);
                Ok(Outcome::Done)
            }
            Command::RemoveBehavior { agent, kind } => {
                let set = Arc::make_mut(&mut self.agent_mut(agent)?.behaviors);
                Ok(Outcome::Removed(set.remove(&kind)))
            }
            Command::ResetBehaviors { agent } => {
                let a = self.agent_mut(agent)?;
                a.behaviors = Arc::new(BehaviorSet::default());
                a.memory = AgentMemory::default();
                Ok(Outcome::Done)
            }
            Command::AddObstacle { center, radius } => self.add_obstacle(center, radius).map(Outcome::Added),
            Command::MoveObstacle { id, center, radius } => self.reshape_obstacle(id, center, radius).map(|()| Outcome::Done),
            Command::RemoveObstacle(id) => self.remove_obstacle(id).map(|()| Outcome::Removed(1)),
            Command::AddWall { a, b } => self.add_wall(a, b).map(Outcome::Added),
            Command::RemoveWall(id) => self.remove_wall(id).map(|()| Outcome::Removed(1)),
            Command::MoveTo { agents, target, stopping_distance } => {
                self.move_to(&agents, target, stopping_distance).map(|()| Outcome::Done)
            }
        }
    }

    /// Issues a MoveTo order (see [`Command::MoveTo`]). Validates everything first: on error
    /// nothing changes.
    pub fn move_to(&mut self, agents: &[AgentId], target: Vec2, stopping_distance: f32) -> Result<(), SimError> {
        check_vec("target", target)?;
        if !self.config.bounds.contains(target) {
            return Err(SimError::invalid("target", "must lie inside the world bounds"));
        }
        super::error::check_non_negative("stopping_distance", stopping_distance)?;
        if stopping_distance > 1000.0 {
            return Err(SimError::invalid("stopping_distance", "must be at most 1000"));
        }
        if agents.len() > self.config.max_spawn {
            return Err(SimError::LimitExceeded { what: "agents".into(), max: self.config.max_spawn });
        }
        // In id order (goal resolution takes the first agent of each component), not in the
        // order the agents happen to be stored in.
        let mut by_id = Vec::with_capacity(agents.len());
        for &id in agents {
            by_id.push((id, self.agent_index(id)?));
        }
        by_id.sort_unstable();
        by_id.dedup();
        let idx: Vec<usize> = by_id.into_iter().map(|(_, slot)| slot).collect();
        self.ensure_nav();
        if let Some(nav) = self.nav.as_mut() {
            nav.issue(self.agents.storage_mut(), &idx, target, stopping_distance, &self.walls, &self.statics);
        }
        Ok(())
    }

    /// Builds the navigation grid if there is none, and brings it up to date.
    fn ensure_nav(&mut self) {
        self.rebuild_statics();
        if self.nav.is_none() {
            let c = &self.config;
            self.nav = Some(NavState::new(
                c.bounds,
                c.nav_cell_size,
                c.nav_clearance,
                c.flow_cache_capacity,
                &self.obstacles,
                &self.walls,
                &self.statics,
            ));
        }
    }

    /// A copy that continues bit-identically (same states and events at every later step,
    /// given the same commands) and shares nothing mutable with `self`: its pending flow
    /// fields are built on the tick they are due instead of by a builder (which the
    /// navigation pipeline guarantees gives the same fields), and the compute phase's output
    /// buffer, rewritten every step, is not copied.
    pub fn fork(&self) -> World {
        let mut w = World {
            config: self.config.clone(),
            agents: self.agents.clone(),
            next_agent_id: self.next_agent_id,
            obstacles: self.obstacles.clone(),
            walls: self.walls.clone(),
            next_static_id: self.next_static_id,
            groups: self.groups.clone(),
            grid: self.grid.clone(),
            statics: self.statics.clone(),
            statics_dirty: self.statics_dirty,
            nav: self.nav.as_ref().map(NavState::fork),
            tick: self.tick,
            rng: self.rng.clone(),
            events: self.events.clone(),
            max_pending_events: self.max_pending_events,
            events_dropped: self.events_dropped,
            results: Vec::new(),
            extent: self.extent,
            contact_rounds_max: self.contact_rounds_max,
        };
        w.results.shrink_to_fit();
        w
    }

    /// Bytes a [`World::fork`] holds of its own, estimated from its main buffers (agents, id
    /// index, agent grid, orders, obstacles, walls, pending events). Behaviour sets and flow
    /// fields are shared between forks (reference-counted) and not counted.
    pub fn fork_bytes(&self) -> usize {
        use std::mem::size_of;
        let n = self.agents.len();
        let orders = self.agents.storage().iter().filter(|a| a.order.is_some()).count();
        size_of::<World>()
            + n * (size_of::<Agent>() + 2 * size_of::<u32>())
            + self.grid.heap_bytes()
            + orders * size_of::<super::agent::MoveOrder>()
            + self.obstacles.len() * size_of::<Obstacle>()
            + self.walls.len() * size_of::<Wall>()
            + self.events.len() * size_of::<Event>()
            + self.groups.iter().map(|g| g.len() + size_of::<String>()).sum::<usize>()
    }

    /// The flow fields requested by the last step, to build off the tick thread and hand back
    /// with [`World::deliver_field`] before the step they are due (see [`NavState`]).
    pub fn take_field_jobs(&mut self) -> Vec<FieldJob> {
        self.nav.as_mut().map(NavState::take_jobs).unwrap_or_default()
    }

    /// Tickets of the requested fields the next step needs and has not been handed (see
    /// [`NavState::awaited`]).
    pub fn awaited_fields(&self) -> Vec<FieldTicket> {
        self.nav.as_ref().map(|n| n.awaited(self.tick)).unwrap_or_default()
    }

    /// Hands back a field built from a [`FieldJob`] (ignored if no longer awaited).
    pub fn deliver_field(&mut self, field: FlowField) {
        if let Some(nav) = self.nav.as_mut() {
            nav.deliver(field);
        }
    }

    /// Navigation state (built by the first MoveTo).
    pub fn nav(&self) -> Option<&NavState> {
        self.nav.as_ref()
    }

    fn mark_nav_dirty(&mut self, lo: Vec2, hi: Vec2) {
        self.statics_dirty = true;
        if let Some(nav) = self.nav.as_mut() {
            nav.mark_dirty(lo, hi);
        }
    }

    fn check_agent_targets(&self, set: &BehaviorSet) -> Result<(), SimError> {
        for (i, e) in set.entries().iter().enumerate() {
            if let Some(id) = e.behavior.target_agent() {
                if self.agent(id).is_none() {
                    return Err(SimError::invalid(format!("behaviors[{i}].params.target"), format!("no agent {id}")));
                }
            }
        }
        Ok(())
    }

    /// Adds an obstacle; returns its id.
    pub fn add_obstacle(&mut self, center: Vec2, radius: f32) -> Result<u32, SimError> {
        check_vec("center", center)?;
        check_positive("radius", radius)?;
        if self.obstacles.len() >= self.config.max_obstacles {
            return Err(SimError::LimitExceeded { what: "obstacles".into(), max: self.config.max_obstacles });
        }
        let id = self.next_static_id;
        self.next_static_id += 1;
        self.obstacles.push(Obstacle { id, center, radius });
        self.mark_nav_dirty(center - Vec2::splat(radius), center + Vec2::splat(radius));
        Ok(id)
    }

    /// Moves an obstacle.
    pub fn move_obstacle(&mut self, id: u32, center: Vec2) -> Result<(), SimError> {
        check_vec("center", center)?;
        let o = self.obstacles.iter_mut().find(|o| o.id == id).ok_or(SimError::UnknownObstacle(id))?;
        let (old, r) = (o.center, o.radius);
        o.center = center;
        self.mark_nav_dirty(old - Vec2::splat(r), old + Vec2::splat(r));
        self.mark_nav_dirty(center - Vec2::splat(r), center + Vec2::splat(r));
        Ok(())
    }

    /// Moves an obstacle and, with `radius`, resizes it (validated; nothing changes on error).
    pub fn reshape_obstacle(&mut self, id: u32, center: Vec2, radius: Option<f32>) -> Result<(), SimError> {
        check_vec("center", center)?;
        if let Some(r) = radius {
            check_positive("radius", r)?;
        }
        let o = self.obstacles.iter_mut().find(|o| o.id == id).ok_or(SimError::UnknownObstacle(id))?;
        let (old, old_r) = (o.center, o.radius);
        o.radius = radius.unwrap_or(old_r);
        let r = old_r.max(o.radius);
        self.move_obstacle(id, center)?;
        self.mark_nav_dirty(old - Vec2::splat(r), old + Vec2::splat(r));
        self.mark_nav_dirty(center - Vec2::splat(r), center + Vec2::splat(r));
        Ok(())
    }

    /// Removes an obstacle.
    pub fn remove_obstacle(&mut self, id: u32) -> Result<(), SimError> {
        let i = self.obstacles.iter().position(|o| o.id == id).ok_or(SimError::UnknownObstacle(id))?;
        let o = self.obstacles.remove(i);
        self.mark_nav_dirty(o.center - Vec2::splat(o.radius), o.center + Vec2::splat(o.radius));
        Ok(())
    }

    /// Adds a wall segment; returns its id.
    pub fn add_wall(&mut self, a: Vec2, b: Vec2) -> Result<u32, SimError> {
        check_vec("a", a)?;
        check_vec("b", b)?;
        if a.distance_squared(b) < 1e-8 {
            return Err(SimError::invalid("b", "a wall needs two distinct end points"));
        }
        if self.walls.len() >= self.config.max_walls {
            return Err(SimError::LimitExceeded { what: "walls".into(), max: self.config.max_walls });
        }
        let id = self.next_static_id;
        self.next_static_id += 1;
        self.walls.push(Wall { id, a, b, normal: dir(perp(b - a)) });
        self.mark_nav_dirty(a.min(b), a.max(b));
        Ok(id)
    }

    /// Removes a wall.
    pub fn remove_wall(&mut self, id: u32) -> Result<(), SimError> {
        let i = self.walls.iter().position(|w| w.id == id).ok_or(SimError::UnknownWall(id))?;
        let w = self.walls.remove(i);
        self.mark_nav_dirty(w.a.min(w.b), w.a.max(w.b));
        Ok(())
    }

    /// Removes an agent.
    pub fn despawn(&mut self, id: AgentId) -> Result<(), SimError> {
        let a = self.agents.remove(id).ok_or(SimError::UnknownAgent(id))?;
        if let (Some(nav), Some(o)) = (self.nav.as_mut(), a.order.as_deref()) {
            nav.release(o);
        }
        self.push_event(Event::Despawned { id });
        Ok(())
    }

    /// The id of group `name`, created if new.
    pub fn ensure_group(&mut self, name: &str) -> Result<GroupId, SimError> {
        if let Some(g) = self.group_id(name) {
            return Ok(g);
        }
        if name.is_empty() || name.len() > 64 {
            return Err(SimError::invalid("group", "must be 1 to 64 bytes"));
        }
        if self.groups.len() >= usize::from(u16::MAX) {
            return Err(SimError::LimitExceeded { what: "groups".into(), max: usize::from(u16::MAX) });
        }
        self.groups.push(name.to_string());
        Ok((self.groups.len() - 1) as GroupId)
    }

    /// Spawns a group; returns the new ids. Validates everything first: on error nothing changes.
    pub fn spawn(&mut self, spec: SpawnSpec) -> Result<Vec<AgentId>, SimError> {
        let limits = spec.limits.validated().map_err(|e| e.within("limits"))?;
        let set = BehaviorSet::new(spec.behaviors.clone()).map_err(|e| e.within("behaviors"))?;
        check_finite("initial_speed", spec.initial_speed)?;
        if let Some(o) = spec.orientation {
            check_finite("orientation", o)?;
        }
        let count = match &spec.area {
            SpawnArea::Points(p) => p.len(),
            _ => spec.count,
        };
        if count > self.config.max_spawn {
            return Err(SimError::LimitExceeded { what: "count".into(), max: self.config.max_spawn });
        }
        if self.agents.len() + count > self.config.max_agents {
            return Err(SimError::LimitExceeded { what: "agents".into(), max: self.config.max_agents });
        }
        match &spec.area {
            SpawnArea::Rect { min, max } => {
                check_vec("area.min", *min)?;
                check_vec("area.max", *max)?;
                if max.x < min.x || max.y < min.y {
                    return Err(SimError::invalid("area.max", "must not be less than area.min"));
                }
            }
            SpawnArea::Disc { center, radius } | SpawnArea::Ring { center, radius } => {
                check_vec("area.center", *center)?;
                super::error::check_non_negative("area.radius", *radius)?;
            }
            SpawnArea::Points(ps) => {
                for (i, p) in ps.iter().enumerate() {
                    check_vec(&format!("area.points[{i}]"), *p)?;
                }
            }
        }
        let members: Vec<AgentId> = match spec.binding {
            TargetBinding::GroupMember { group } => {
                let m: Vec<AgentId> = self.agents.by_id().iter().filter(|a| a.group == group).map(|a| a.id).collect();
                if m.is_empty() {
                    return Err(SimError::invalid("binding.group", "the group has no agents"));
                }
                m
            }
            _ => Vec::new(),
        };
        if let TargetBinding::AsGiven = spec.binding {
            self.check_agent_targets(&set)?;
        }
        if self.next_agent_id.checked_add(count as u32).is_none() {
            return Err(SimError::LimitExceeded { what: "agent ids".into(), max: u32::MAX as usize });
        }
        let group = self.ensure_group(&spec.group)?;
        self.extent = (self.extent.0.max(limits.radius), self.extent.1.max(limits.max_speed));
        let shared = Arc::new(set);
        let mut ids = Vec::with_capacity(count);
        for i in 0..count {
            let pos = self.spawn_position(&spec.area, i, count, limits.radius);
            let orientation = match (spec.orientation, &spec.area) {
                (Some(o), _) => o,
                (None, SpawnArea::Ring { center, .. }) => orientation_of(*center - pos, 0.0),
                (None, _) => self.rng.range(-std::f32::consts::PI, std::f32::consts::PI),
            };
            let behaviors = match spec.binding {
                TargetBinding::AsGiven => shared.clone(),
                TargetBinding::Antipode { center } => Arc::new(rebind(&shared, Some(center * 2.0 - pos), None)),
                TargetBinding::GroupMember { .. } => {
                    let m = members[i % members.len()];
                    Arc::new(rebind(&shared, None, Some(m)))
                }
            };
            let id = self.next_agent_id;
            self.next_agent_id += 1;
            // Ids come from `next_agent_id`, which only grows: never taken.
            let inserted = self.agents.insert(Agent {
                id,
                group,
                position: pos,
                velocity: clamp_len(super::math::heading(orientation) * spec.initial_speed, limits.max_speed),
                orientation: wrap_angle(orientation),
                angular_velocity: 0.0,
                limits,
                behaviors,
                memory: AgentMemory { path_step: 1, ..AgentMemory::default() },
                order: None,
            });
            debug_assert!(inserted, "agent id {id} taken");
            ids.push(id);
            self.push_event(Event::Spawned { id, group });
        }
        Ok(ids)
    }

    /// A spawn point: random in the area, retried (up to 32 times) to keep clear of obstacles.
    fn spawn_position(&mut self, area: &SpawnArea, i: usize, n: usize, radius: f32) -> Vec2 {
        let mut p = Vec2::ZERO;
        for _ in 0..32 {
            p = match area {
                SpawnArea::Rect { min, max } => Vec2::new(self.rng.range(min.x, max.x), self.rng.range(min.y, max.y)),
                SpawnArea::Disc { center, radius } => {
                    let r = radius * self.rng.next_f32().sqrt();
                    let a = self.rng.range(0.0, std::f32::consts::TAU);
                    *center + Vec2::new(a.cos(), a.sin()) * r
                }
                SpawnArea::Ring { center, radius } => {
                    let a = std::f32::consts::TAU * i as f32 / n.max(1) as f32;
                    return self.clamp_to_bounds(*center + Vec2::new(a.cos(), a.sin()) * *radius);
                }
                SpawnArea::Points(ps) => return self.clamp_to_bounds(ps.get(i).copied().unwrap_or(Vec2::ZERO)),
            };
            p = self.clamp_to_bounds(p);
            let clear = self.obstacles.iter().all(|o| o.center.distance(p) >= o.radius + radius)
                && self.walls.iter().all(|w| closest_on_segment(p, w.a, w.b).distance(p) >= radius);
            if clear {
                break;
            }
        }
        p
    }

    fn clamp_to_bounds(&self, p: Vec2) -> Vec2 {
        p.clamp(self.config.bounds.min, self.config.bounds.max)
    }

    /// Rebuilds the agent grid (and the static index if obstacles or walls changed).
    pub fn rebuild_indexes(&mut self) {
        self.rebuild_statics();
        let cell = self.config.agent_cell_size.unwrap_or_else(|| {
            // In parallel; runs of agents sharing one behaviour set are looked at once. `max` is
            // order-independent, so the cell size does not depend on the split.
            let reach = self
                .agents
                .storage()
                .par_iter()
                .with_min_len(SCAN_MIN_LEN)
                .fold(
                    || (1.0f32, 0usize),
                    |(reach, last), a| {
                        let p = Arc::as_ptr(&a.behaviors) as usize;
                        if p == last { (reach, last) } else { (reach.max(a.behaviors.neighbor_reach()), p) }
                    },
                )
                .map(|(reach, _)| reach)
                .reduce(|| 1.0, f32::max);
            reach.min(1000.0)
        });
        let agents = self.agents.storage();
        let move_to_reciprocal = self.config.move_to.reciprocal.is_some();
        self.grid.rebuild(self.config.bounds, cell, agents.len(), |i| {
            let a = &agents[i];
            let reciprocal = match a.active_order() {
                Some(_) => move_to_reciprocal,
                None => a.behaviors.reciprocal().is_some(),
            };
            Neighbor { id: a.id, radius: a.limits.radius, position: a.position, velocity: a.velocity, max_speed: a.limits.max_speed, reciprocal }
        });
    }

    /// Rebuilds the static index if obstacles or walls changed, and re-rasterizes the changed
    /// parts of the navigation grid (dropping the flow fields).
    fn rebuild_statics(&mut self) {
        if self.statics_dirty {
            self.statics =
                StaticIndex::build(self.config.bounds, self.config.static_cell_size, &self.obstacles, &self.walls);
            self.statics_dirty = false;
        }
        if let Some(nav) = self.nav.as_mut() {
            nav.apply_dirty(&self.obstacles, &self.walls, &self.statics);
        }
    }

    /// The read-only view of the current state (indexes as last rebuilt).
    pub fn view(&self) -> WorldView<'_> {
        WorldView {
            agents: &self.agents,
            grid: &self.grid,
            obstacles: &self.obstacles,
            walls: &self.walls,
            statics: &self.statics,
            bounds: self.config.bounds,
            dt: self.config.dt(),
            tick: self.tick,
            time: self.time() as f32,
            brute_force: self.config.brute_force_neighbors,
            nav: self.nav.as_ref(),
            move_to: &self.config.move_to,
            extent: self.extent,
        }
    }

    /// Advances one fixed step. Runs on the current rayon pool (install one to choose threads).
    pub fn step(&mut self) -> StepStats {
        self.rebuild_indexes();
        // Once enough agents have left the cell order they are stored in, store them in the
        // grid's order again (see `sim::roster`): the phases below then read memory almost
        // sequentially. The results do not depend on when this happens.
        if self.grid.breaks() > self.agents.len() / RESORT_BREAKS_DIVISOR {
            let grid = &self.grid;
            if self.agents.permute(grid.order(), |i| grid.rank(i)) {
                self.grid.agents_permuted_into_order();
            }
        }
        // Flow fields and slot claims: sequential, before the view is taken.
        if let Some(nav) = self.nav.as_mut() {
            let c = &self.config;
            let straight = c.move_to.straight_line_max_agents;
            nav.prepare(&mut self.agents, &self.walls, &self.statics, c.flow_builds_per_tick, self.tick, u64::from(c.flow_build_ticks), straight, u64::from(c.flow_build_cells_per_tick));
        }
        let seed = self.config.seed;
        let tick = self.tick;
        // Compute phase, in cell order so that neighbouring agents are computed together.
        let mut results = std::mem::take(&mut self.results);
        {
            let view = self.view();
            let agents = self.agents.storage();
            self.grid
                .order()
                .par_iter()
                .with_min_len(256)
                .map(|&i| {
                    let a = &agents[i as usize];
                    let mut scratch = Scratch { rng: Rng::for_agent(seed, a.id, tick), memory: a.memory, events: 0 };
                    let s = match a.active_order() {
                        Some(o) => move_to::steer(a, o, view.move_to, &view, &mut scratch),
                        None => a.behaviors.steer(a, &view, &mut scratch),
                    };
                    StepResult(s, scratch.memory, scratch.events)
                })
                .collect_into_vec(&mut results);
        }
        let grid = &self.grid;
        let results_ref = &results;
        let dt = self.config.dt();
        let ctx = ApplyCtx {
            dt,
            bounds: self.config.bounds,
            edge: self.config.edge,
            solid: self.config.solid_obstacles,
            obstacles: &self.obstacles,
            walls: &self.walls,
            statics: &self.statics,
            contacts: self.config.solid_agents.then_some(Contacts {
                grid,
                results: results_ref,
                reach: self.extent.0 + 2.0 * self.extent.1 * dt,
                max_radius: self.extent.0,
            }),
        };
        let (stats, pairs, netted) = self
            .agents
            .storage_mut()
            .par_iter_mut()
            .with_min_len(256)
            .enumerate()
            .map(|(i, a)| {
                let StepResult(s, mem, flags) = results_ref[grid.rank(i)];
                a.memory = mem;
                if flags & EVENT_DESTINATION_REACHED != 0 {
                    if let Some(o) = a.order.as_mut() {
                        o.done = true;
                    }
                    a.velocity = Vec2::ZERO;
                }
                let mut pairs = Vec::new();
                let (stats, netted) = ctx.apply(a, s, flags, i, &mut pairs);
                let netted = if netted { vec![i as u32] } else { Vec::new() };
                (stats, pairs, netted)
            })
            .reduce(
                || (StepStats::default(), Vec::new(), Vec::new()),
                |(x, mut xp, mut xn), (y, yp, yn)| {
                    xp.extend(yp);
                    xn.extend(yn);
                    (
                        StepStats {
                            wall_crossings: x.wall_crossings + y.wall_crossings,
                            contacts: x.contacts + y.contacts,
                            non_finite: x.non_finite + y.non_finite,
                        },
                        xp,
                        xn,
                    )
                },
            );
        if let Some(c) = &ctx.contacts {
            // Jam clusters: the halves of several overlaps can cancel in the one parallel push,
            // and the push and the wall and obstacle net move agents onto others that no
            // prediction told of. So the contacts of every agent moved so far are found from
            // where everyone now is, and relaxed one pair after another in id order; the agents
            // that relaxing moves are looked at again: `CONTACT_ROUNDS` rounds, then more while
            // a crush leaves some pair deeper than `CONTACT_TOLERANCE` (at most
            // `CONTACT_ROUNDS_MAX`).
            ctx.settle(c, self.agents.storage_mut(), netted, pairs, self.contact_rounds_max);
        }
        // Events in id order: the (few) agents with flags, found by a parallel scan of the
        // results in cell order, then sorted by id.
        let order = self.grid.order();
        let agents = self.agents.storage();
        let mut flagged: Vec<(AgentId, u32, u8)> = results
            .par_iter()
            .with_min_len(SCAN_MIN_LEN)
            .zip(order.par_iter())
            .filter(|(r, _)| r.2 & (EVENT_DESTINATION_REACHED | EVENT_PATH_COMPLETED) != 0)
            .filter_map(|(r, &i)| agents.get(i as usize).map(|a| (a.id, i, r.2)))
            .collect();
        flagged.sort_unstable();
        for (_, i, flags) in flagged {
            let Some(a) = self.agents.storage().get(i as usize) else { continue };
            let (id, position, unreachable) = (a.id, a.position, a.order.as_ref().is_some_and(|o| o.unreachable));
            if flags & EVENT_DESTINATION_REACHED != 0 {
                self.push_event(Event::DestinationReached { id, position, unreachable });
            }
            if flags & EVENT_PATH_COMPLETED != 0 {
                self.push_event(Event::PathCompleted { id });
            }
        }
        self.results = results;
        self.tick += 1;
        stats
    }

    /// Safety audit of the current state (rebuilds the indexes).
    pub fn audit(&mut self) -> Audit {
        self.rebuild_indexes();
        let max_r = self.agents.storage().iter().map(|a| a.limits.radius).fold(0.0, f32::max);
        let view = self.view();
        let mut out = Audit { min_obstacle_clearance: f32::INFINITY, ..Audit::default() };
        for a in view.agents.storage() {
            if !(a.position.is_finite() && a.velocity.is_finite() && a.orientation.is_finite() && a.angular_velocity.is_finite()) {
                out.non_finite += 1;
                continue;
            }
            if !view.bounds.contains(a.position) {
                out.out_of_bounds += 1;
            }
            view.for_each_obstacle_near(a.position, a.limits.radius + 50.0, |o| {
                let d = a.position.distance(o.center);
                if d < o.radius {
                    out.obstacle_penetrations += 1;
                }
                out.min_obstacle_clearance = out.min_obstacle_clearance.min(d - o.radius - a.limits.radius);
            });
            view.for_each_agent_near(a.position, a.limits.radius + max_r, |b| {
                if b.id <= a.id {
                    return;
                }
                let (d, rs) = (a.position.distance(b.position), a.limits.radius + b.radius);
                if d < 0.5 * rs {
                    out.agent_overlaps += 1;
                }
                if rs - d > 0.01 * rs {
                    out.overlap_pairs += 1;
                }
                out.max_penetration = out.max_penetration.max(rs - d);
            });
        }
        out
    }

    /// Test helper: inserts a fully built agent (its id must be free).
    #[cfg(test)]
    pub(crate) fn insert_agent_for_test(&mut self, a: Agent) {
        self.next_agent_id = self.next_agent_id.max(a.id + 1);
        self.extent = (self.extent.0.max(a.limits.radius), self.extent.1.max(a.limits.max_speed));
        assert!(self.agents.insert(a), "agent id taken");
    }

    /// Test helper: stores the agents in a random (seeded) order. Ids and states are unchanged,
    /// and so must be every result from here on (see `sim::roster`).
    #[cfg(test)]
    pub(crate) fn shuffle_storage_for_test(&mut self, seed: u64) {
        let n = self.agents.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        let mut rng = Rng::new(seed);
        for i in (1..n).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let mut rank = vec![0usize; n];
        for (k, &o) in order.iter().enumerate() {
            rank[o as usize] = k;
        }
        assert!(self.agents.permute(&order, |i| rank[i]), "a shuffle is a permutation");
    }
}

/// Copy of `set` with point targets replaced by `point` and agent targets by `agent`.
fn rebind(set: &BehaviorSet, point: Option<Vec2>, agent: Option<AgentId>) -> BehaviorSet {
    let mut out = BehaviorSet::default();
    for e in set.entries() {
        let mut e = e.clone();
        let t = |t: &mut Target| match t {
            Target::Point(p) => {
                if let Some(q) = point {
                    *p = q;
                }
            }
            Target::Agent(id) => {
                if let Some(m) = agent {
                    *id = m;
                }
            }
        };
        match &mut e.behavior {
            Behavior::Seek(p) => t(&mut p.target),
            Behavior::Flee(p) => t(&mut p.target),
            Behavior::Arrive(p) => t(&mut p.target),
            Behavior::Face(p) => t(&mut p.target),
            Behavior::Pursue(p) => p.target = agent.unwrap_or(p.target),
            Behavior::Evade(p) => p.target = agent.unwrap_or(p.target),
            Behavior::VelocityMatch(p) => p.target = agent.unwrap_or(p.target),
            Behavior::LeaderFollowing(p) => p.leader = agent.unwrap_or(p.leader),
            Behavior::Align(p) => {
                if let (super::behaviors::align::AlignTarget::Agent(id), Some(m)) = (&mut p.target, agent) {
                    *id = m;
                }
            }
            _ => {}
        }
        // Entries were validated when `set` was built; rebinding keeps them valid.
        let _ = out.add(e);
    }
    out
}

/// What the apply phase needs besides the agent.
struct ApplyCtx<'a> {
    dt: f32,
    bounds: Bounds,
    edge: EdgeRule,
    solid: bool,
    obstacles: &'a [Obstacle],
    walls: &'a [Wall],
    statics: &'a StaticIndex,
    /// Set when agents are solid (`WorldConfig::solid_agents`).
    contacts: Option<Contacts<'a>>,
}

/// Passes over the pairs in contact after the parallel push (see [`ApplyCtx::relax`]).
const CONTACT_RELAX_PASSES: usize = 4;

/// Rounds of finding and relaxing contacts after the parallel push (see [`World::step`]).
const CONTACT_ROUNDS: usize = 4;

/// Most rounds: past [`CONTACT_ROUNDS`], rounds go on only while some pair overlaps by more
/// than [`CONTACT_TOLERANCE`] of its radii sum (a jam's crush).
const CONTACT_ROUNDS_MAX: usize = 32;

/// Slack (in largest agent radii) within which two agents count as contact candidates.
const CONTACT_MARGIN: f32 = 0.5;

/// Overlap (fraction of the radii sum) that rounds past [`CONTACT_ROUNDS`] work off.
const CONTACT_TOLERANCE: f32 = 0.01;

/// Whether some pair overlaps by more than [`CONTACT_TOLERANCE`] of its radii sum.
fn deep_contact(bodies: &[Body], pairs: &[ContactPair]) -> bool {
    pairs.iter().any(|&(_, _, ia, ib)| match (bodies.get(ia as usize), bodies.get(ib as usize)) {
        (Some(a), Some(b)) => {
            let rs = a.radius + b.radius;
            a.position.distance(b.position) < rs * (1.0 - CONTACT_TOLERANCE)
        }
        _ => false,
    })
}

/// What contact settling reads of an agent, packed (16 bytes, by storage index) so that the
/// rounds over a jam's pairs stay in cache: its position (kept equal to the agent's), radius
/// and id.
#[derive(Debug, Clone, Copy)]
struct Body {
    position: Vec2,
    radius: f32,
    id: AgentId,
}

/// A pair of agents in contact: (lower id, higher id, storage index of each).
type ContactPair = (AgentId, AgentId, u32, u32);

/// The sort key of a pair: its ids (a pair's storage indexes follow from them).
fn pair_key(p: &ContactPair) -> u64 {
    (u64::from(p.0) << 32) | u64::from(p.1)
}

/// Adds the pairs in `fresh` (emptied) that `cand` (sorted by ids, each once) lacks, keeping it
/// sorted: the new ones are sorted alone and merged in.
fn absorb(cand: &mut Vec<ContactPair>, fresh: &mut Vec<ContactPair>) {
    if fresh.is_empty() {
        return;
    }
    fresh.sort_unstable_by_key(pair_key);
    fresh.dedup();
    if cand.is_empty() {
        std::mem::swap(cand, fresh);
        return;
    }
    let old = std::mem::take(cand);
    cand.reserve(old.len() + fresh.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(o), Some(f)) = (old.get(i), fresh.get(j)) {
        let (ko, kf) = (pair_key(o), pair_key(f));
        if kf < ko {
            cand.push(*f);
            j += 1;
        } else {
            cand.push(*o);
            i += 1;
            j += usize::from(kf == ko);
        }
    }
    cand.extend_from_slice(old.get(i..).unwrap_or(&[]));
    cand.extend_from_slice(fresh.get(j..).unwrap_or(&[]));
    fresh.clear();
}

/// What the agent contact rule reads: the grid of the tick (positions and velocities at its
/// start, by rank) and every agent's compute-phase result (by rank), from which anyone can tell
/// where any agent's step takes it.
struct Contacts<'a> {
    grid: &'a AgentGrid,
    results: &'a [StepResult],
    /// Largest radius plus the furthest two agents can move towards each other in a step.
    reach: f32,
    /// Largest radius.
    max_radius: f32,
}

impl Contacts<'_> {
    /// Where the integrator takes a neighbour this step (before the safety net).
    fn next_position(&self, rank: usize, n: &Neighbor, dt: f32) -> Vec2 {
        match self.results.get(rank) {
            Some(StepResult(s, _, flags)) if flags & EVENT_DESTINATION_REACHED == 0 => {
                n.position + clamp_len(n.velocity + s.sanitized().linear * dt, n.max_speed) * dt
            }
            _ => n.position,
        }
    }

    /// Adds to `cand` every agent that stands within the radii sum plus `margin` of agent `i`
    /// (a storage index), as a pair.
    fn candidates_of(&self, bodies: &[Body], i: u32, margin: f32, cand: &mut Vec<ContactPair>) {
        let order = self.grid.order();
        let Some(a) = bodies.get(i as usize) else { return };
        let r = a.radius;
        // Everyone moved at most `reach − max radius` from the grid's positions, plus the push
        // (at most its radius).
        self.grid.for_each_in_box_ranked(a.position, 2.0 * r + 2.0 * self.reach + margin, |rank, n| {
            let Some(&j) = order.get(rank) else { return };
            let Some(b) = bodies.get(j as usize) else { return };
            if n.id == a.id {
                return;
            }
            let rs = r + b.radius + margin;
            if a.position.distance_squared(b.position) < rs * rs {
                cand.push(if a.id < b.id { (a.id, b.id, i, j) } else { (b.id, a.id, j, i) });
            }
        });
    }

    /// The push that takes agent `a` (at `from` before the step, where it stands after it)
    /// out of every neighbour it would overlap after the step: half of each overlap, along the
    /// line of centres (a direction fixed by the ids when the centres coincide), at most `r`.
    /// Each of a pair computes the same overlap from the same predictions, so a lone pair ends
    /// just touching, whatever order the agents are applied in.
    /// Each pair found in contact is added to `pairs` (by the agent with the lower id, `me`
    /// being its storage index).
    fn push(&self, a: &Agent, me: usize, from: Vec2, dt: f32, pairs: &mut Vec<ContactPair>) -> Vec2 {
        let (id, r, to) = (a.id, a.limits.radius, a.position);
        let mut push = Vec2::ZERO;
        self.grid.for_each_in_box_ranked(from, r + self.reach, |rank, n| {
            if n.id == id {
                return;
            }
            let q = self.next_position(rank, n, dt);
            let d = to - q;
            let rs = r + n.radius;
            let d2 = d.length_squared();
            if d2 >= rs * rs {
                return;
            }
            let dist = d2.sqrt();
            let away = if dist > 1e-6 { d / dist } else { pair_dir(id, n.id) };
            push += away * ((rs - dist) * 0.5);
            if id < n.id {
                if let Some(&other) = self.grid.order().get(rank) {
                    pairs.push((id, n.id, me as u32, other));
                }
            }
        });
        clamp_len(push, r)
    }
}



/// Speed under which an agent without orientation steering keeps its orientation.
pub const FACE_VELOCITY_EPSILON: f32 = 1e-3;

/// The one integrator (000's usage example): v += linear·dt, clamp to max_speed, p += v·dt;
/// ω += angular·dt, clamp to max_rotation, θ += ω·dt — or, when no behaviour steers the
/// orientation, θ faces the velocity once speed > [`FACE_VELOCITY_EPSILON`].
pub fn integrate(a: &mut Agent, s: Steering, dt: f32) {
    let lim = a.limits;
    a.velocity = clamp_len(a.velocity + s.linear * dt, lim.max_speed);
    a.position += a.velocity * dt;
    if a.behaviors.steers_orientation() {
        a.angular_velocity = (a.angular_velocity + s.angular * dt).clamp(-lim.max_rotation, lim.max_rotation);
        a.orientation = wrap_angle(a.orientation + a.angular_velocity * dt);
    } else {
        a.angular_velocity = 0.0;
        if a.velocity.length() > FACE_VELOCITY_EPSILON {
            a.orientation = orientation_of(a.velocity, a.orientation);
        }
    }
}

/// `q.rem_euclid(size)`, skipping the (library) `fmod` call in the common case `0 ≤ q < size`,
/// where `rem_euclid` returns `q` itself: the same bits either way.
#[inline]
fn wrap_axis(q: f32, size: f32) -> f32 {
    if q >= 0.0 && q < size { q } else { q.rem_euclid(size) }
}

impl ApplyCtx<'_> {
    /// Relaxes the candidate pairs in contact [`CONTACT_RELAX_PASSES`] times, Gauss–Seidel: each
    /// overlapping pair is moved apart, each half the overlap, in the pairs' (sorted) order, so
    /// that a cluster whose pushes cancelled in the parallel pass comes apart too. A move that
    /// would cross a wall is not made; moved agents are kept out of obstacles and in bounds after.
    ///
    /// Returns the storage indexes of the agents it moved (sorted, each once).
    fn relax(&self, agents: &mut [Agent], bodies: &mut [Body], pairs: &[ContactPair]) -> Vec<u32> {
        // Which of each pair's agents a pass moved (bit 0: the first, bit 1: the second).
        let mut pair_moved = vec![0u8; pairs.len()];
        for _ in 0..CONTACT_RELAX_PASSES {
            let mut moved = false;
            for (&(id_a, id_b, ia, ib), pm) in pairs.iter().zip(pair_moved.iter_mut()) {
                let (ia, ib) = (ia as usize, ib as usize);
                let (Some(a), Some(b)) = (bodies.get(ia), bodies.get(ib)) else { continue };
                let d = a.position - b.position;
                let rs = a.radius + b.radius;
                let d2 = d.length_squared();
                if d2 >= rs * rs {
                    continue;
                }
                let dist = d2.sqrt();
                let away = if dist > 1e-6 { d / dist } else { pair_dir(id_a, id_b) };
                let corr = away * ((rs - dist) * 0.5);
                let (pa, pb) = (a.position, b.position);
                if self.count_crossings(pa, pa + corr) == 0 {
                    if let Some(a) = bodies.get_mut(ia) {
                        a.position = pa + corr;
                        moved = true;
                        *pm |= 1;
                    }
                }
                if self.count_crossings(pb, pb - corr) == 0 {
                    if let Some(b) = bodies.get_mut(ib) {
                        b.position = pb - corr;
                        moved = true;
                        *pm |= 2;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        let mut touched: Vec<u32> = Vec::new();
        for (&(_, _, ia, ib), &pm) in pairs.iter().zip(&pair_moved) {
            if pm & 1 != 0 {
                touched.push(ia);
            }
            if pm & 2 != 0 {
                touched.push(ib);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &i in &touched {
            if let (Some(a), Some(b)) = (agents.get_mut(i as usize), bodies.get_mut(i as usize)) {
                a.position = b.position;
                if self.solid {
                    self.resolve_obstacles(a);
                }
                self.apply_edge(a);
                b.position = a.position;
            }
        }
        touched
    }

    /// Settles the contacts left after the parallel push. `moved`: the agents the push or the
    /// wall and obstacle net moved (storage indexes); `found`: the pairs the push found.
    ///
    /// Each round looks up the neighbours of the agents moved last round that it has not looked
    /// up yet (or that moved more than half of [`CONTACT_MARGIN`] since), keeping every pair
    /// within its radii sum plus the margin as a candidate, then relaxes the candidates
    /// ([`ApplyCtx::relax`]). A pair missing from the candidates cannot touch: each of its
    /// agents either never moved, or was looked up and moved less than half the margin since.
    /// [`CONTACT_ROUNDS`] rounds, then more while a crush leaves some pair deeper than
    /// [`CONTACT_TOLERANCE`] of its radii sum, at most `rounds_max` in all. Each agent's
    /// neighbours are looked up about once per step, however many rounds a crush takes.
    fn settle(&self, c: &Contacts, agents: &mut [Agent], mut moved: Vec<u32>, found: Vec<ContactPair>, rounds_max: usize) {
        if moved.is_empty() && found.is_empty() {
            return;
        }
        let margin = CONTACT_MARGIN * c.max_radius;
        // Where each agent (by storage index) was when its neighbours were last looked up.
        let mut looked: Vec<Vec2> = Vec::new();
        let mut cand: Vec<ContactPair> = Vec::new();
        let mut bodies: Vec<Body> = agents.iter().map(|a| Body { position: a.position, radius: a.limits.radius, id: a.id }).collect();
        let mut fresh = found;
        for round in 0..rounds_max {
            for &i in &moved {
                let Some(p) = bodies.get(i as usize).map(|b| b.position) else { continue };
                if looked.is_empty() {
                    looked = vec![Vec2::NAN; agents.len()];
                }
                let Some(q) = looked.get_mut(i as usize) else { continue };
                // NaN (never looked up) compares false.
                if q.distance_squared(p) <= 0.25 * margin * margin {
                    continue;
                }
                *q = p;
                c.candidates_of(&bodies, i, margin, &mut fresh);
            }
            absorb(&mut cand, &mut fresh);
            if cand.is_empty() || (round >= CONTACT_ROUNDS && !deep_contact(&bodies, &cand)) {
                break;
            }
            moved = self.relax(agents, &mut bodies, &cand);
            if moved.is_empty() {
                break;
            }
        }
    }

    /// Also returns whether the contact push or the wall and obstacle net moved the agent.
    /// `flags` are the agent's compute-phase flags ([`NO_CONTACT`]: no agent can touch it this
    /// step, so the contact test is skipped).
    fn apply(&self, a: &mut Agent, s: Steering, flags: u8, me: usize, pairs: &mut Vec<ContactPair>) -> (StepStats, bool) {
        let mut stats = StepStats::default();
        let before = (a.position, a.velocity, a.orientation, a.angular_velocity);
        integrate(a, s.sanitized(), self.dt);
        if let Some(c) = self.contacts.as_ref().filter(|_| flags & NO_CONTACT == 0) {
            let push = c.push(a, me, before.0, self.dt, pairs);
            // A position correction only: the velocities stay the avoidance's, which already
            // aim apart (taking velocity away here would stall a jam that avoidance resolves).
            if push != Vec2::ZERO && push.is_finite() {
                a.position += push;
                stats.contacts += 1;
            }
        }
        // Pushed or netted: the agent may now touch agents no prediction told it of.
        let mut netted = stats.contacts > 0;
        if self.solid {
            let n = self.resolve_walls(a, before.0) + self.resolve_obstacles(a);
            stats.contacts += n;
            netted |= n > 0;
        }
        netted &= self.contacts.is_some();
        self.apply_edge(a);
        let finite = a.position.is_finite() && a.velocity.is_finite() && a.orientation.is_finite() && a.angular_velocity.is_finite();
        if !finite {
            (a.position, a.velocity, a.orientation, a.angular_velocity) = (before.0, Vec2::ZERO, before.2, 0.0);
            stats.non_finite += 1;
        }
        stats.wall_crossings += self.count_crossings(before.0, a.position);
        (stats, netted)
    }

    fn count_crossings(&self, from: Vec2, to: Vec2) -> u32 {
        if from == to || self.walls.is_empty() {
            return 0;
        }
        let mid = (from + to) * 0.5;
        let half = (to - from).abs().max_element() * 0.5;
        let mut n = 0;
        self.statics.for_each_wall(mid, half, |i| {
            if let Some(w) = self.walls.get(i as usize) {
                if segment_intersection(from, to, w.a, w.b).is_some() {
                    n += 1;
                }
            }
        });
        n
    }

    /// Stops a step that would cross a wall at the wall (sliding along it), then keeps the
    /// agent's centre at least its radius away from walls on the side it came from.
    fn resolve_walls(&self, a: &mut Agent, from: Vec2) -> u32 {
        if self.walls.is_empty() {
            return 0;
        }
        let mut contacts = 0;
        let r = a.limits.radius;
        let to = a.position;
        let mid = (from + to) * 0.5;
        let reach = (to - from).abs().max_element() * 0.5 + r;
        let mut first: Option<(f32, Vec2)> = None;
        self.statics.for_each_wall(mid, reach, |i| {
            let Some(w) = self.walls.get(i as usize) else { return };
            if let Some(t) = segment_intersection(from, to, w.a, w.b) {
                if first.is_none_or(|f| t < f.0) {
                    let n = if (from - w.a).dot(w.normal) >= 0.0 { w.normal } else { -w.normal };
                    first = Some((t, n));
                }
            }
        });
        if let Some((t, n)) = first {
            // Back to just before the wall, on the side we came from.
            a.position = from + (to - from) * t + n * 1e-3;
            a.velocity -= n * a.velocity.dot(n).min(0.0);
            contacts += 1;
        }
        // Push out to the radius from every nearby wall (on the side of `from`).
        let p = a.position;
        let mut push = Vec2::ZERO;
        self.statics.for_each_wall(p, r, |i| {
            let Some(w) = self.walls.get(i as usize) else { return };
            let c = closest_on_segment(p, w.a, w.b);
            let d = p.distance(c);
            if d < r {
                let side = if (from - w.a).dot(w.normal) >= 0.0 { w.normal } else { -w.normal };
                let away = if d > 1e-6 { (p - c) / d } else { side };
                // Only push towards the side the agent came from (never through the wall).
                let away = if away.dot(side) < 0.0 { side } else { away };
                push += away * (r - d);
            }
        });
        if push != Vec2::ZERO {
            let candidate = a.position + push;
            // Accept the push only if it does not itself cross a wall.
            if self.count_crossings(a.position, candidate) == 0 {
                a.position = candidate;
                let n = dir(push);
                a.velocity -= n * a.velocity.dot(n).min(0.0);
                contacts += 1;
            }
        }
        contacts
    }

    /// Pushes the agent out of any obstacle it overlaps (contact at radius sum), removing the
    /// velocity into the obstacle.
    fn resolve_obstacles(&self, a: &mut Agent) -> u32 {
        if self.obstacles.is_empty() {
            return 0;
        }
        let mut contacts = 0;
        let r = a.limits.radius;
        for _ in 0..2 {
            let p = a.position;
            let mut hit: Option<(Vec2, f32)> = None;
            self.statics.for_each_obstacle(p, r, |i| {
                let Some(o) = self.obstacles.get(i as usize) else { return };
                let reach = o.radius + r;
                if o.center.distance_squared(p) < reach * reach {
                    // Deepest overlap first.
                    let depth = reach - o.center.distance(p);
                    if hit.is_none_or(|h| depth > h.1) {
                        hit = Some((o.center, depth));
                    }
                }
            });
            let Some((c, depth)) = hit else { break };
            let mut n = dir(p - c);
            if n == Vec2::ZERO {
                n = if a.velocity != Vec2::ZERO { -dir(a.velocity) } else { Vec2::X };
            }
            let candidate = p + n * depth;
            if self.count_crossings(p, candidate) > 0 {
                break;
            }
            a.position = candidate;
            a.velocity -= n * a.velocity.dot(n).min(0.0);
            contacts += 1;
        }
        contacts
    }

    fn apply_edge(&self, a: &mut Agent) {
        let (min, max) = (self.bounds.min, self.bounds.max);
        match self.edge {
            EdgeRule::Clamp => {
                let p = a.position.clamp(min, max);
                if p.x != a.position.x {
                    a.velocity.x = 0.0;
                }
                if p.y != a.position.y {
                    a.velocity.y = 0.0;
                }
                a.position = p;
            }
            EdgeRule::Wrap => {
                let size = max - min;
                let q = a.position - min;
                let w = Vec2::new(wrap_axis(q.x, size.x), wrap_axis(q.y, size.y));
                a.position = (min + w).clamp(min, max);
            }
            EdgeRule::Bounce => {
                for axis in 0..2 {
                    let (lo, hi) = (min[axis], max[axis]);
                    let mut p = a.position[axis];
                    if p < lo {
                        p = (2.0 * lo - p).min(hi);
                        a.velocity[axis] = a.velocity[axis].abs();
                    } else if p > hi {
                        p = (2.0 * hi - p).max(lo);
                        a.velocity[axis] = -a.velocity[axis].abs();
                    }
                    a.position[axis] = p;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Agent, CONTACT_ROUNDS, CONTACT_TOLERANCE, World, wrap_axis};
    use glam::Vec2;

    proptest::proptest! {
        #[test]
        fn wrap_axis_equals_rem_euclid(q in -1.0e6f32..1.0e6, size in 0.001f32..1.0e5) {
            proptest::prop_assert_eq!(wrap_axis(q, size).to_bits(), q.rem_euclid(size).to_bits());
        }
    }

    #[test]
    fn absorb_merges_new_pairs_sorted_by_ids_each_once() {
        let mut cand = vec![(1, 5, 0, 4), (2, 3, 1, 2), (7, 9, 6, 8)];
        // Unsorted, with a duplicate of an old pair and one of a new pair.
        let mut fresh = vec![(7, 8, 6, 7), (2, 3, 1, 2), (1, 2, 0, 1), (7, 8, 6, 7), (9, 10, 8, 9)];
        super::absorb(&mut cand, &mut fresh);
        assert_eq!(cand, vec![(1, 2, 0, 1), (1, 5, 0, 4), (2, 3, 1, 2), (7, 8, 6, 7), (7, 9, 6, 8), (9, 10, 8, 9)]);
        assert!(fresh.is_empty());
        // Into an empty set: sorted and deduplicated.
        let mut empty = Vec::new();
        let mut fresh = vec![(3, 4, 2, 3), (1, 2, 0, 1), (3, 4, 2, 3)];
        super::absorb(&mut empty, &mut fresh);
        assert_eq!(empty, vec![(1, 2, 0, 1), (3, 4, 2, 3)]);
    }

    #[test]
    fn overlapping_pair_is_pushed_apart_half_each() {
        // Radii 0.5 at rest at (0,0) and (0.6,0): overlap 0.4, each moves 0.2 along the line of
        // centres, so they end just touching at (−0.2,0) and (0.8,0); one contact each.
        use crate::sim::behaviors::testkit::{agent_at, world_with};
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(0.6, 0.0), Vec2::ZERO)]);
        let stats = w.step();
        assert_eq!(stats.contacts, 2);
        let (a, b) = (w.agent(1).unwrap().position, w.agent(2).unwrap().position);
        assert!((a - Vec2::new(-0.2, 0.0)).length() < 1e-5, "{a}");
        assert!((b - Vec2::new(0.8, 0.0)).length() < 1e-5, "{b}");
        // Not solid: they stay where they are.
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(0.6, 0.0), Vec2::ZERO)]);
        w.config.solid_agents = false;
        assert_eq!(w.step().contacts, 0);
        assert_eq!(w.agent(2).unwrap().position, Vec2::new(0.6, 0.0));
    }

    #[test]
    fn a_cluster_whose_pushes_cancel_is_relaxed() {
        // Three in a row 0.8 apart (radii 0.5): overlaps 0.2 and 0.2. The parallel push moves
        // the ends out by 0.1 and the middle not at all (its two halves cancel), leaving 0.1 of
        // overlap on each side; the pairwise relaxation then takes both under 0.01.
        use crate::sim::behaviors::testkit::{agent_at, world_with};
        let mut w = world_with(vec![
            agent_at(1, Vec2::ZERO, Vec2::ZERO),
            agent_at(2, Vec2::new(0.8, 0.0), Vec2::ZERO),
            agent_at(3, Vec2::new(1.6, 0.0), Vec2::ZERO),
        ]);
        w.step();
        let p = |id| w.agent(id).unwrap().position;
        let (ab, bc) = (1.0 - p(1).distance(p(2)), 1.0 - p(2).distance(p(3)));
        assert!(ab < 0.01 && bc < 0.01, "overlaps {ab} {bc}");
        assert!(p(1).x < 0.0 && p(3).x > 1.6, "{} {}", p(1), p(3));
    }

    #[test]
    fn a_crushed_crowd_is_relaxed_to_the_tolerance() {
        // An 11 × 11 square lattice of radius-0.5 agents at rest, 0.7 apart: every neighbour
        // pair overlaps by 0.3 (30 % of the radii sum), and the crowd must grow from 7 to 10
        // units across to fit. The four rounds of the plain rule leave inner pairs overlapping
        // by several times the tolerance (checked below by running only those); the rounds
        // past them end with no pair deeper than 1 % of the radii sum.
        use crate::sim::behaviors::testkit::{agent_at, world_with};
        let crowd = || {
            let mut v = Vec::new();
            for i in 0..121u32 {
                v.push(agent_at(i + 1, Vec2::new((i % 11) as f32 * 0.7, (i / 11) as f32 * 0.7), Vec2::ZERO));
            }
            world_with(v)
        };
        let deepest = |w: &World| {
            let a: Vec<&Agent> = w.agents().iter().collect();
            let mut m = 0.0f32;
            for (i, x) in a.iter().enumerate() {
                for y in &a[i + 1..] {
                    m = m.max(1.0 - x.position.distance(y.position));
                }
            }
            m
        };
        let mut w = crowd();
        w.step();
        let tol = CONTACT_TOLERANCE * 1.0;
        assert!(deepest(&w) <= tol + 1e-4, "deepest overlap {} > {tol}", deepest(&w));
        // The same crowd, relaxed by the plain rounds alone, is still crushed: the extra rounds
        // are what meets the tolerance.
        let mut w = crowd();
        w.contact_rounds_max = CONTACT_ROUNDS;
        w.step();
        assert!(deepest(&w) > 2.0 * tol, "plain rounds already reach {}", deepest(&w));
    }

    #[test]
    fn wrap_axis_keeps_in_range_values_and_wraps_the_rest() {
        assert_eq!(wrap_axis(0.0, 10.0), 0.0);
        assert_eq!(wrap_axis(9.5, 10.0), 9.5);
        assert_eq!(wrap_axis(10.0, 10.0), 0.0);
        assert_eq!(wrap_axis(-0.5, 10.0), 9.5);
        assert_eq!(wrap_axis(25.0, 10.0), 5.0);
    }
}
