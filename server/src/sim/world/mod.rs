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
//!
//! Files: `config.rs` (settings and their checks), `types.rs` (commands, outcomes, events,
//! spawn specs, step statistics, audits), `spawn.rs` (spawning and group target bindings),
//! `contact.rs` (the apply phase: the integrator, the push out of other agents, walls,
//! obstacles, edges), `settle.rs` (contact settling after the push: candidate pairs, rounds),
//! `edit.rs` (obstacles, walls, despawns and groups changed between ticks), `save.rs` (the
//! world's saved form: `World::save`, `World::load`); this file holds the `World` itself, its
//! commands and the two-phase step.

mod batch;
mod config;
mod contact;
mod edit;
mod save;
mod settle;
mod spawn;
pub(super) mod types;

pub use config::{EdgeRule, WorldConfig};
pub use contact::{FACE_VELOCITY_EPSILON, integrate};
use contact::{ApplyCtx, Contacts};
use settle::{Bodies, CONTACT_ROUNDS_MAX, ContactParams, Spot};
/// The largest `stopping_distance` of a MoveTo, world units (the REST schema states it too;
/// `http::rest::agents` checks that they agree).
pub const MAX_STOPPING_DISTANCE: f32 = 1000.0;

pub use save::{SAVE_MAGIC, SAVE_VERSION};
pub use types::{Audit, Command, Event, Outcome, SpawnArea, SpawnSpec, StepStats, TargetBinding};

use std::sync::Arc;

use glam::Vec2;
use rayon::prelude::*;

use super::agent::{Agent, AgentId, AgentMemory, GroupId};
use super::behaviors::move_to::{self, EVENT_DESTINATION_REACHED, EVENT_GAVE_UP, MoveToParams};
use super::behaviors::path_following::EVENT_PATH_COMPLETED;
use super::behaviors::reciprocal_avoidance::NO_CONTACT;
use super::behaviors::{Behavior, BehaviorSet, Scratch, Target};
use super::error::{SimError, check_finite, check_positive, check_vec};
use super::math::{clamp_len, closest_on_segment, dir, orientation_of, pair_dir, segment_intersection, wrap_angle};
use super::nav::flowfield::FlowField;
use super::nav::portals::PortalRules;
use super::nav::{FieldBudget, FieldJob, NavShape, NavState};
use super::rng::Rng;
use super::roster::{ById, Roster};
use super::spatial::{AgentGrid, Crowd, Neighbor, StaticIndex};
use super::steering::Steering;
use super::geometry::{Bounds, Obstacle, Wall};
use super::view::WorldView;

/// One agent's output of the compute phase: steering, behaviour memory, event flags. Aligned to
/// a cache line so that the apply phase, which reads these in a random order, touches one line
/// per agent instead of two.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct StepResult(Steering, AgentMemory, u8);

/// An agent whose step raised event flags: (id, storage index, flags).
type Flagged = (AgentId, u32, u8);

/// Two splits of the apply phase joined in index order: counters added, contact pairs, moved
/// agents and flagged agents concatenated.
type Applied = (StepStats, Vec<contact::ContactPair>, Vec<u32>, Vec<Flagged>);

fn merge_applied((x, mut xp, mut xn, mut xf): Applied, (y, yp, yn, yf): Applied) -> Applied {
    xp.extend(yp);
    xn.extend(yn);
    xf.extend(yf);
    (
        StepStats {
            wall_crossings: x.wall_crossings + y.wall_crossings,
            contacts: x.contacts + y.contacts,
            non_finite: x.non_finite + y.non_finite,
        },
        xp,
        xn,
        xf,
    )
}

/// The world's settings as the navigation state takes them (here, where the world meets
/// `sim::nav`, so that `config.rs` names nothing of it).
impl WorldConfig {
    /// The navigation grid's shape and the flow cache's capacity.
    pub fn nav_shape(&self) -> NavShape {
        NavShape { bounds: self.bounds, cell: self.nav_cell_size, clearance: self.nav_clearance, capacity: self.flow_cache_capacity }
    }

    /// How many flow fields a tick may ask for, and how soon they are due.
    pub fn field_budget(&self) -> FieldBudget {
        FieldBudget {
            max_builds: self.flow_builds_per_tick,
            latency: u64::from(self.flow_build_ticks),
            straight_max: self.move_to.straight_line_max_agents,
            cells_per_tick: u64::from(self.flow_build_cells_per_tick),
        }
    }
}

/// The agents are re-sorted into cell order when more than one in this many starts a break in
/// the grid's order (an agent whose cell-order successor is not stored right after it).
const RESORT_BREAKS_DIVISOR: usize = 8;

/// Seconds without progress after which an agent of a formation may trade slots with a
/// touching member ([`NavState::swap_blocked_slots`]).
const SWAP_AFTER_SECS: f32 = 1.0;

/// The simulation world. [`World::fork`] copies it (replay keyframes); [`World::save`] and
/// [`World::load`] (`save.rs`) turn it into bytes and back (durable worlds' snapshots).
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
    /// How much work contact settling may do per step (a test lowers it to show what the
    /// rounds past the first do).
    contact: ContactParams,
    /// Contact settling's buffer, reused every step (not copied by a fork).
    bodies: Bodies,
    /// Where each agent stands after the apply phase's parallel pass, by storage index (what
    /// contact settling reads and moves instead of the agents); kept from step to step (not
    /// copied by a fork: every step rewrites it).
    applied_at: Vec<Spot>,
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
            contact: ContactParams::default(),
            bodies: Bodies::default(),
            applied_at: Vec::new(),
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
                Ok(Outcome::Removed(set.remove(kind)))
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
        if stopping_distance > MAX_STOPPING_DISTANCE {
            return Err(SimError::invalid("stopping_distance", format!("must be at most {MAX_STOPPING_DISTANCE}")));
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
            self.nav = Some(NavState::new(c.nav_shape(), &self.obstacles, &self.walls, &self.statics));
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
            contact: self.contact,
            bodies: Bodies::default(),
            applied_at: Vec::new(),
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

    /// Request ids ([`FieldJob::id`]) of the fields the next step needs and has not been
    /// handed (see [`NavState::awaited`]).
    pub fn awaited_fields(&self) -> Vec<u64> {
        self.nav.as_ref().map(|n| n.awaited(self.tick)).unwrap_or_default()
    }

    /// Whether the field of request `id` is still wanted (see [`NavState::requested`]).
    pub fn field_requested(&self, id: u64) -> bool {
        self.nav.as_ref().is_some_and(|n| n.requested(id))
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

    /// Rebuilds the agent grid (and the static index if obstacles or walls changed).
    pub fn rebuild_indexes(&mut self) {
        self.rebuild_statics();
        self.rebuild_grid();
    }

    /// Rebuilds the agent grid.
    fn rebuild_grid(&mut self) {
        // The cell side: the setting, or the largest neighbour reach of any agent's behaviours
        // (at least 1, at most 1000), taken in the pass that reads the agents into the grid.
        let fixed = self.config.agent_cell_size;
        let agents = self.agents.storage();
        let move_to_reciprocal = self.config.move_to.reciprocal.is_some();
        self.grid.rebuild_sized(self.config.bounds, |reach| fixed.unwrap_or(reach.clamp(1.0, 1000.0)), agents.len(), |i| {
            let a = &agents[i];
            let yielding = a.gives_way();
            let reciprocal = match a.active_order() {
                Some(_) => move_to_reciprocal,
                None => (yielding.any() && move_to_reciprocal) || a.behaviors.reciprocal().is_some(),
            };
            let stall = a.active_order().map_or(0, |o| o.stall.min(u32::from(u16::MAX)) as u16);
            let reach = if fixed.is_some() { 0.0 } else { a.behaviors.neighbor_reach() };
            (Neighbor { id: a.id, radius: a.limits.radius, position: a.position, velocity: a.velocity }, Crowd { max_speed: a.limits.max_speed, stall, reciprocal, yielding }, reach)
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

    /// Once enough agents have left the cell order they are stored in, stores them in the
    /// grid's order again (see `sim::roster`): a step's phases then read memory almost
    /// sequentially. The results do not depend on when this happens.
    fn restore_storage_order(&mut self) {
        if self.grid.breaks() > self.agents.len() / RESORT_BREAKS_DIVISOR {
            let grid = &self.grid;
            if self.agents.permute(grid.order(), |i| grid.rank(i)) {
                self.grid.agents_permuted_into_order();
            }
        }
    }

    /// Advances one fixed step. Runs on the current rayon pool (install one to choose threads).
    pub fn step(&mut self) -> StepStats {
        self.rebuild_indexes();
        self.restore_storage_order();
        // Flow fields and slot claims: sequential, before the view is taken.
        self.prepare_nav();
        // Compute phase: every agent's steering from the immutable view.
        let mut results = std::mem::take(&mut self.results);
        self.compute(&mut results);
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
                max_speed: self.extent.1,
            }),
        };
        let mut applied_at = std::mem::take(&mut self.applied_at);
        applied_at.resize_with(self.agents.len(), Spot::default);
        let (stats, pairs, netted, flagged) = self
            .agents
            .storage_mut()
            .par_iter_mut()
            .zip(applied_at.par_iter())
            .with_min_len(256)
            .enumerate()
            // Each split accumulates into its own buffers (in index order, as a per-agent
            // map and reduce would): no tuple of vectors per agent.
            .fold(
                || (StepStats::default(), Vec::new(), Vec::new(), Vec::new()),
                |(mut x, mut pairs, mut netted, mut flagged): Applied, (i, (a, at))| {
                    let StepResult(s, mem, flags) = results_ref[grid.rank(i)];
                    a.memory = mem;
                    if flags & (EVENT_DESTINATION_REACHED | EVENT_PATH_COMPLETED) != 0 {
                        flagged.push((a.id, i as u32, flags));
                    }
                    if flags & EVENT_DESTINATION_REACHED != 0 {
                        let position = a.position;
                        if let Some(o) = a.order.as_mut() {
                            o.done = true;
                            if flags & EVENT_GAVE_UP != 0 {
                                o.gave_up = true;
                                o.short_by = position.distance(o.stop_point);
                                o.stop_point = position;
                            }
                        }
                        a.velocity = Vec2::ZERO;
                    }
                    let (y, moved) = ctx.apply(a, s, flags, i, &mut pairs);
                    let (pos, radius) = (a.position, a.limits.radius);
                    let tracked = a.active_order().is_some() || a.held_order().is_some();
                    if let Some(o) = a.order.as_mut().filter(|_| tracked) {
                        o.track_progress(pos, radius);
                    }
                    if moved {
                        netted.push(i as u32);
                    }
                    at.set(a.position);
                    x.wall_crossings += y.wall_crossings;
                    x.contacts += y.contacts;
                    x.non_finite += y.non_finite;
                    (x, pairs, netted, flagged)
                },
            )
            .reduce(|| (StepStats::default(), Vec::new(), Vec::new(), Vec::new()), merge_applied);
        if let Some(c) = &ctx.contacts {
            // Jam clusters: the halves of several overlaps can cancel in the one parallel push,
            // and the push and the wall and obstacle net move agents onto others that no
            // prediction told of. So the contacts of every agent moved so far are found from
            // where everyone now is, and relaxed one pair after another in id order; the agents
            // that relaxing moves are looked at again: the first round relaxes every pair, the
            // later ones only the pairs around one deeper than `CONTACT_TOLERANCE`, within the
            // budget of `self.contact`.
            let left = settle::Pushed { at: &applied_at, moved: netted, found: pairs };
            ctx.settle(c, self.agents.storage_mut(), &mut self.bodies, left, &self.contact);
        }
        self.applied_at = applied_at;
        // Events of the agents whose step raised flags, in id order.
        self.report_flagged(flagged);
        self.results = results;
        self.tick += 1;
        stats
    }

    /// Flow fields and slot claims, and whose turn it is at narrow passages: the navigation
    /// pre-pass of a step (sequential, before the view is taken).
    fn prepare_nav(&mut self) {
        if let Some(nav) = self.nav.as_mut() {
            let c = &self.config;
            nav.prepare(&mut self.agents, &self.walls, &self.statics, self.tick, c.field_budget());
            let after = (SWAP_AFTER_SECS * c.tick_rate).ceil() as u32;
            nav.swap_blocked_slots(&mut self.agents, &self.grid, after, self.extent.0);
            let m = &c.move_to;
            let rules = PortalRules { max_width: m.portal_radii * self.extent.0, turn: (m.portal_turn * c.tick_rate).ceil() as u64, max_radius: self.extent.0 };
            nav.take_turns(&mut self.agents, &self.grid, self.tick, rules);
        }
    }

    /// The compute phase: every agent's steering from the immutable view, in cell order so
    /// that neighbouring agents are computed together (`results` by cell rank).
    fn compute(&self, results: &mut Vec<StepResult>) {
        let seed = self.config.seed;
        let key = Rng::tick_key(self.tick);
        let view = self.view();
        let agents = self.agents.storage();
        self.grid
            .order()
            .par_iter()
            .with_min_len(256)
            .map(|&i| {
                let a = &agents[i as usize];
                let mut scratch = Scratch { rng: Rng::for_agent_in(seed, a.id, key), memory: a.memory, events: 0 };
                let s = match (a.active_order(), a.held_order()) {
                    (Some(o), _) => move_to::steer(a, o, view.move_to, &view, &mut scratch),
                    (None, Some(o)) => move_to::hold(a, o, view.move_to, &view, &mut scratch),
                    (None, None) => {
                        // Only MoveTo's avoidance plans vouch for the ticks after them.
                        scratch.memory.avoid_clear = false;
                        a.behaviors.steer(a, &view, &mut scratch)
                    }
                };
                StepResult(s, scratch.memory, scratch.events)
            })
            .collect_into_vec(results);
    }

    /// Events in id order for the agents whose step raised flags (`flagged`, found by the
    /// apply phase in any order): destination reached (once per order) and path completed.
    fn report_flagged(&mut self, mut flagged: Vec<Flagged>) {
        flagged.sort_unstable();
        for (_, i, flags) in flagged {
            let Some(a) = self.agents.storage_mut().get_mut(i as usize) else { continue };
            let (id, position) = (a.id, a.position);
            let (unreachable, gave_up, short_by) = a.order.as_ref().map_or((false, false, 0.0), |o| {
                let short_by = if o.gave_up {
                    o.short_by
                } else if o.unreachable {
                    position.distance(o.target)
                } else {
                    0.0
                };
                (o.unreachable, o.gave_up, short_by)
            });
            // An order ends once: a member sent on again by a slot trade reaches its new slot
            // without a second event.
            let first = a.order.as_mut().is_none_or(|o| !std::mem::replace(&mut o.reported, true));
            if flags & EVENT_DESTINATION_REACHED != 0 && first {
                self.push_event(Event::DestinationReached { id, position, unreachable, gave_up, short_by });
            }
            if flags & EVENT_PATH_COMPLETED != 0 {
                self.push_event(Event::PathCompleted { id });
            }
        }
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
