//! Global navigation for MoveTo: the navigation grid, flow fields and their cache, and the
//! stop formations of MoveTo groups.
//!
//! Everything here is mutated only between ticks — when MoveTo is issued and in the world's
//! sequential pre-pass ([`NavState::prepare`]) — and only read by the parallel compute phase,
//! so results do not depend on the thread count.
//!
//! **Formations.** A group arrives as a group: when MoveTo is issued, stop slots are laid out on
//! a hexagonal lattice round the goal (spacing 2.3 × the largest radius), keeping slots on free
//! cells of the goal's region that the goal sees, nearest first. An agent claims a slot when it
//! comes within the formation's radius plus four spacings of the goal, in id order: of the free
//! slots in the innermost free shell (within one spacing of the innermost free slot) it takes
//! the one nearest to itself, so the formation fills from the centre outwards and each arrival
//! takes a place on the near rim. A single agent's slot is the goal itself.
//!
//! **Field pipeline.** A flow field costs O(nav cells) — milliseconds on a large grid — so the
//! tick does not build it when an order needs it. The pre-pass *requests* it (at most
//! `max_builds` per tick, in goal-cell order) and uses it `latency` ticks later; meanwhile the
//! agents head straight for their goal. A request is published as a [`FieldJob`] (a snapshot
//! of the grid and the goal) that a host may build on another thread and hand back with
//! [`NavState::deliver`]; a field that has not arrived when it is due is built on the tick
//! itself. A field is a pure function of the grid version and the goal, and the tick at which
//! it is first used is fixed by the request, so states are bit-identical whether the host
//! builds in the background, late, or not at all.

pub mod cache;
pub mod flowfield;
mod formation;
pub mod grid;
mod pipeline;
pub mod portals;
mod save;
#[cfg(test)]
mod scenario_tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use glam::Vec2;
use rayon::prelude::*;

pub use self::formation::{Formation, SLOT_SPACING, hex_slots};
pub use self::pipeline::{FieldBudget, FieldJob, PipelineStats};
use self::pipeline::Pending;
use self::cache::FlowCache;
use self::flowfield::FlowField;
use self::grid::{NO_COMPONENT, NavGrid};
use super::agent::{Agent, MoveOrder};
use super::math::segment_intersection;
use super::roster::Roster;
use super::spatial::{AgentGrid, StaticIndex};
use super::geometry::{Bounds, Obstacle, Wall};

/// The grid's shape and the cache's capacity (the world's settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NavShape {
    pub bounds: Bounds,
    /// Nav cell side (`nav_cell_size`).
    pub cell: f32,
    /// Clearance kept from statics (`nav_clearance`).
    pub clearance: f32,
    /// Fields cached (`flow_cache_capacity`).
    pub capacity: usize,
}

/// Navigation state of a world.
#[derive(Debug, Clone)]
pub struct NavState {
    /// The grid (shared with the builders of requested fields; changes copy it on write).
    pub grid: Arc<NavGrid>,
    /// Flow fields.
    pub cache: FlowCache,
    formations: BTreeMap<u32, Formation>,
    next_formation: u32,
    dirty: Vec<(Vec2, Vec2)>,
    resolved_version: u64,
    pending: BTreeMap<u32, Pending>,
    /// Id of the next field request.
    next_request: u64,
    jobs: Vec<FieldJob>,
    pipeline: PipelineStats,
    /// Nav cells the pipeline may still request (see [`NavState::prepare`]).
    credit: u64,
    /// The last pre-pass's active orders in (goal cell, id) order: most ticks the set of
    /// active orders and their goal cells stay the same, and this order is reused instead of
    /// sorted again (see [`NavState::reuse_active`]).
    sorted: Vec<ActiveOrder>,
    /// Narrow passages and whose turn it is at each.
    portals: portals::Portals,
}

/// A resolved goal: (goal point, goal cell, unreachable).
type Resolved = Option<(Vec2, usize, bool)>;

/// Where an agent at `p` should go for `target`: (goal, goal cell, unreachable), or `None` when
/// the agent's region has no free cell at all.
fn resolve_goal(grid: &NavGrid, from_cell: usize, target: Vec2, stopping_distance: f32) -> Resolved {
    let comp = grid.component(from_cell);
    if comp == NO_COMPONENT {
        return None;
    }
    let tc = grid.cell_of(target);
    if grid.component(tc) == comp {
        return Some((target, tc, false));
    }
    let c = grid.nearest_in_component(target, comp)?;
    let goal = grid.center(c);
    let unreachable = goal.distance(target) > stopping_distance.max(grid.cell_size() * 1.5);
    Some((goal, c, unreachable))
}

/// A free cell for an agent at `p`: its own cell if free, else the nearest free cell within
/// three cells whose centre it reaches without crossing a wall.
pub fn free_cell_near(grid: &NavGrid, walls: &[Wall], statics: &StaticIndex, p: Vec2) -> Option<usize> {
    let own = grid.cell_of(p);
    if !grid.is_blocked(own) {
        return Some(own);
    }
    let (cx, cy) = grid.xy(own);
    let mut best: Option<(f32, usize)> = None;
    for dy in -3..=3 {
        for dx in -3..=3 {
            let Some(j) = grid.offset(cx, cy, dx, dy) else { continue };
            if grid.is_blocked(j) {
                continue;
            }
            let c = grid.center(j);
            let d = c.distance_squared(p);
            if best.is_some_and(|b| d >= b.0) {
                continue;
            }
            let mid = (p + c) * 0.5;
            let mut crosses = false;
            statics.for_each_wall(mid, (c - p).abs().max_element() * 0.5, |i| {
                if let Some(w) = walls.get(i as usize) {
                    crosses |= segment_intersection(p, c, w.a, w.b).is_some();
                }
            });
            if !crosses {
                best = Some((d, j));
            }
        }
    }
    best.map(|b| b.1)
}

impl NavState {
    /// A grid rasterized from the current statics, an empty cache.
    pub fn new(shape: NavShape, obstacles: &[Obstacle], walls: &[Wall], statics: &StaticIndex) -> Self {
        let NavShape { bounds, cell, clearance, capacity } = shape;
        let mut grid = NavGrid::empty(bounds, cell, clearance);
        grid.refresh(bounds.min, bounds.max, obstacles, walls, statics);
        NavState {
            grid: Arc::new(grid),
            cache: FlowCache::new(capacity),
            formations: BTreeMap::new(),
            next_formation: 1,
            dirty: Vec::new(),
            resolved_version: 0,
            pending: BTreeMap::new(),
            next_request: 0,
            jobs: Vec::new(),
            pipeline: PipelineStats::default(),
            credit: 0,
            sorted: Vec::new(),
            portals: portals::Portals::default(),
        }
    }

    /// Records that the box `lo`–`hi` changed (an obstacle or wall was added, moved or removed).
    pub fn mark_dirty(&mut self, lo: Vec2, hi: Vec2) {
        self.dirty.push((lo, hi));
    }

    /// Re-rasterizes the changed boxes and drops every flow field. Returns true if anything changed.
    pub fn apply_dirty(&mut self, obstacles: &[Obstacle], walls: &[Wall], statics: &StaticIndex) -> bool {
        if self.dirty.is_empty() {
            return false;
        }
        let grid = Arc::make_mut(&mut self.grid);
        for (lo, hi) in std::mem::take(&mut self.dirty) {
            grid.refresh(lo, hi, obstacles, walls, statics);
        }
        self.cache.invalidate();
        // Requests were for the old grid: drop them (their goals are requested again).
        self.pending.clear();
        self.jobs.clear();
        true
    }

    /// Labels the grid's components if it changed (copying the grid only when a builder still
    /// holds the old one).
    fn update_components(&mut self) {
        if !self.grid.components_current() {
            Arc::make_mut(&mut self.grid).update_components();
        }
    }

    /// A copy without the jobs not yet taken: nobody builds the copy's pending fields for it,
    /// so it builds each on the tick it is due (the same field a builder would hand back: the
    /// states are the same). Nor does it keep the last tick's sorted active orders: it reads
    /// every order anew on its first tick (which gives the same order).
    pub fn fork(&self) -> NavState {
        let mut n = self.clone();
        n.jobs.clear();
        n.sorted = Vec::new();
        n
    }

    /// Bytes held by the grid, the cached fields and the formations.
    pub fn bytes(&self) -> usize {
        self.grid.bytes()
            + self.cache.bytes()
            + self.formations.values().map(|f| f.slots.len() * (8 + 4 + 1)).sum::<usize>()
    }

    /// Gives every agent of `agents` (indexes into `all`, distinct) a MoveOrder to `target`.
    pub fn issue(
        &mut self,
        all: &mut [Agent],
        agents: &[usize],
        target: Vec2,
        stopping_distance: f32,
        walls: &[Wall],
        statics: &StaticIndex,
    ) {
        self.update_components();
        self.resolved_version = self.grid.version();
        // Goal per agent (memoised per component), then one formation per distinct goal cell.
        let mut by_comp: BTreeMap<u32, Resolved> = BTreeMap::new();
        let mut groups: BTreeMap<usize, (Vec2, bool, Vec<usize>)> = BTreeMap::new();
        let max_r = agents.iter().filter_map(|&i| all.get(i)).map(|a| a.limits.radius).fold(0.0, f32::max);
        for &i in agents {
            let Some(a) = all.get_mut(i) else { continue };
            if let Some(old) = a.order.take() {
                self.release(&old);
            }
            a.memory.last_move_dir = Vec2::ZERO;
            a.memory.last_avoid_dir = Vec2::ZERO;
            a.memory.avoid_clear = false;
            let cell = free_cell_near(&self.grid, walls, statics, a.position).unwrap_or_else(|| self.grid.cell_of(a.position));
            let comp = self.grid.component(cell);
            let r = *by_comp.entry(comp).or_insert_with(|| resolve_goal(&self.grid, cell, target, stopping_distance));
            // An agent with no free cell round it heads straight for the target.
            let (goal, gc, unreachable) = r.unwrap_or((target, self.grid.cell_of(target), true));
            groups.entry(gc).or_insert((goal, unreachable, Vec::new())).2.push(i);
        }
        let spacing = (max_r * SLOT_SPACING).max(1e-3);
        for (gc, (goal, unreachable, members)) in groups {
            let comp = self.grid.component(gc);
            let grid = &self.grid;
            // Formations already round this goal keep their slots: the new one takes the
            // lattice points further out, so that no two members of different formations ever
            // want the same spot (slot trades stay within a formation).
            let near: Vec<&Formation> = self.formations.values().filter(|f| f.goal.distance(goal) <= f.radius() + 2.0 * spacing + f.spacing).collect();
            let taken: usize = near.iter().map(|f| f.slots.len()).sum();
            let free_of_others = |p: Vec2| {
                near.iter().all(|f| p.distance(f.goal) > f.radius() + f.spacing || f.slots.iter().all(|q| q.distance(p) >= 0.5 * (spacing + f.spacing)))
            };
            let slots = if members.len() == 1 {
                vec![goal]
            } else {
                hex_slots(goal, spacing, members.len(), taken, |p| {
                    let c = grid.cell_of(p);
                    grid.dims() != (0, 0) && grid.component(c) == comp && grid.line_free(goal, p) && (p - goal).length() < 1e5 && free_of_others(p)
                })
            };
            let dist: Vec<f32> = slots.iter().map(|s| s.distance(goal)).collect();
            let n = slots.len();
            let id = self.next_formation;
            self.next_formation = self.next_formation.wrapping_add(1).max(1);
            let mut f = Formation { goal, slots, dist, taken: vec![false; n], spacing, members: members.len() as u32 };
            let single = members.len() == 1;
            let tolerance = if single { stopping_distance.max(0.05) } else { stopping_distance.min(0.3 * spacing).max(0.05) };
            let claim_radius = f.radius() + 4.0 * spacing;
            for &i in &members {
                let Some(a) = all.get_mut(i) else { continue };
                let mut order = MoveOrder {
                    target,
                    goal,
                    goal_cell: gc as u32,
                    formation: id,
                    slot: None,
                    stop_point: goal,
                    claim_radius,
                    tolerance,
                    stopping_distance,
                    unreachable,
                    done: false,
                    gave_up: false,
                    reported: false,
                    short_by: 0.0,
                    best: f32::INFINITY,
                    stall: 0,
                    sight: None,
                    portal: None,
                };
                if single && !f.taken.is_empty() {
                    f.taken[0] = true;
                    order.slot = Some(0);
                }
                a.order = Some(Box::new(order));
            }
            self.formations.insert(id, f);
        }
        // No field is built here: MoveTo is a command, and a command must stay cheap for the
        // world thread. The tick's pre-pass builds fields within its budget.
    }

    /// The pre-pass of tick `tick`: re-resolves goals after the grid changed, requests the
    /// flow fields of active goals and puts those due into the cache (see the module docs:
    /// at most `budget.max_builds` requests per tick, in goal-cell order, each used
    /// `budget.latency` ticks later; 0 builds it now), and lets agents near their goal claim
    /// slots. Agents whose field is not in the cache head straight for their goal.
    ///
    /// A goal without a field, requested or built, whose agents (at most
    /// `budget.straight_max`) all see it along free cells is not requested: they head straight
    /// for it.
    ///
    /// The cost of builds is bounded by `budget.cells_per_tick`: every tick adds that many nav cells
    /// to a credit (capped at two ticks' worth, or one field), a request spends the grid's
    /// cell count, and a field is due no sooner than its cells take at that rate
    /// (`max(latency, ⌈cells / cells_per_tick⌉)` ticks). So a builder that keeps that pace is
    /// never late, however large the grid.
    pub fn prepare(&mut self, roster: &mut Roster, walls: &[Wall], statics: &StaticIndex, tick: u64, budget: FieldBudget) {
        let cells = self.grid.len() as u64;
        let cells_per_tick = budget.cells_per_tick.max(1);
        self.credit = (self.credit + cells_per_tick).min((2 * cells_per_tick).max(cells));
        self.jobs.clear();
        // Goal resolution and slot claims depend on the order the agents are visited in: id
        // order, whatever order they are stored in.
        let (by_id, all) = roster.slots_and_storage_mut();
        let resolve = self.resolved_version != self.grid.version();
        let reused = if resolve { None } else { self.reuse_active(by_id, all) };
        let sorted = reused.is_some();
        let mut active = reused.unwrap_or_else(|| active_orders(&self.grid, by_id, all));
        if active.is_empty() {
            self.sorted.clear();
            self.pending.clear();
            return;
        }
        if resolve {
            self.resolve_goals(by_id, all, walls, statics);
            // Goals were resolved again: read the orders anew.
            active = active_orders(&self.grid, by_id, all);
        }
        // Fields for every active goal cell, shared by its agents: the active orders by (goal
        // cell, agent id), then per goal cell whether it needs a field.
        let unclaimed = active.iter().any(|x| x.unclaimed);
        if !sorted {
            // Built in id order: a stable sort by goal cell gives (goal cell, id) order. Keys
            // are unique (one order per agent): one order, whatever the storage order.
            radix_sort_by_key(&mut active, |x| u64::from(x.goal_cell));
        }
        let users = self.field_users(&active, all, budget.straight_max);
        self.sorted = active;
        self.cache.begin_round();
        // Requests whose goal nobody heads for any more are dropped.
        self.pending.retain(|gc, _| users.binary_search_by_key(gc, |u| u.0).is_ok());
        if self.cache.has_unbuilt() {
            let cells: Vec<u32> = users.iter().map(|u| u.0).collect();
            self.cache.build_loaded(&cells);
        }
        self.serve_fields(users, tick, budget);
        // Slot claims, in id order (none to make when every active order has its slot, as a
        // lone agent's order has from the start).
        if unclaimed {
            self.claim_slots(by_id, all);
        }
    }

    /// The grid changed: every active order's goal is resolved again (in id order) from the
    /// agent's free cell and component; an order whose goal cell moved stops near the new goal
    /// alone.
    fn resolve_goals(&mut self, by_id: &[u32], all: &mut [Agent], walls: &[Wall], statics: &StaticIndex) {
        self.update_components();
        self.resolved_version = self.grid.version();
        let mut memo: BTreeMap<(u32, u32), Resolved> = BTreeMap::new();
        for &slot in by_id {
            let Some(a) = all.get_mut(slot as usize) else { continue };
            let Some(o) = a.order.as_deref().copied().filter(|o| o.active()) else { continue };
            let cell = free_cell_near(&self.grid, walls, statics, a.position).unwrap_or_else(|| self.grid.cell_of(a.position));
            let comp = self.grid.component(cell);
            let key = (comp, o.formation);
            let r = *memo.entry(key).or_insert_with(|| resolve_goal(&self.grid, cell, o.target, o.stopping_distance));
            let Some((goal, gc, unreachable)) = r else { continue };
            if gc as u32 != o.goal_cell {
                // The goal moved (the old one got blocked or cut off): stop near it alone.
                self.release(&o);
                let tolerance = o.stopping_distance.max(0.05);
                a.order = Some(Box::new(MoveOrder {
                    goal,
                    goal_cell: gc as u32,
                    formation: 0,
                    slot: None,
                    stop_point: goal,
                    tolerance,
                    unreachable,
                    sight: None,
                    portal: None,
                    ..o
                }));
            }
        }
    }

    /// Per goal cell (in `active`'s (goal cell, id) order): whether it needs a field, in
    /// parallel. A goal with neither field nor request, all of whose agents (at most
    /// `straight_max`) see it, gets no field. An agent's sight is remembered with the grid
    /// version and its nav cell, and looked for again only when either changes; the group's
    /// agents are looked at in id order up to the first that does not see the goal, and that
    /// many are remembered. Answers (goal cell, goal, agents) of the goals that need a field,
    /// ascending goal cell.
    fn field_users(&self, active: &[ActiveOrder], all: &mut [Agent], straight_max: u32) -> Vec<(u32, Vec2, u64)> {
        let version = self.grid.version();
        let grid = &*self.grid;
        let (cache, pending, agents) = (&self.cache, &self.pending, &*all);
        let groups: Vec<Group> = active
            .par_chunk_by(|x, y| x.goal_cell == y.goal_cell)
            .map(|group| {
                let (gc, goal, n) = (group[0].goal_cell, group[0].goal, group.len());
                let unserved = !cache.contains(gc as usize) && !pending.contains_key(&gc);
                let mut looked = 0;
                let mut sees = unserved && n <= straight_max as usize;
                if sees {
                    for x in group {
                        looked += 1;
                        if !x.sight_holds && !sees_goal(grid, agents, x) {
                            sees = false;
                            break;
                        }
                    }
                }
                Group { gc, goal, n, sees, looked }
            })
            .collect();
        // (goal cell, goal, agents) of the goals that need a field, ascending goal cell.
        let mut users: Vec<(u32, Vec2, u64)> = Vec::new();
        let mut at = 0;
        for g in &groups {
            for (k, x) in active[at..at + g.looked].iter().enumerate() {
                if x.sight_holds {
                    continue;
                }
                let Some(a) = all.get_mut(x.index as usize) else { continue };
                let cell = self.grid.cell_of(a.position) as u32;
                let seen = g.sees || k + 1 < g.looked;
                if let Some(o) = a.order.as_deref_mut() {
                    o.sight = seen.then_some((version, cell));
                }
            }
            at += g.n;
            if !g.sees {
                users.push((g.gc, g.goal, g.n as u64));
            }
        }
        users
    }

    /// Last tick's active orders, read again, if they are still exactly the active orders
    /// with the same goal cells: each still names an agent of the same id rank with an active
    /// order for the same goal cell, and no other agent has one (the counts agree). Then their
    /// (goal cell, id) order holds and they need no sort. `None` otherwise.
    fn reuse_active(&mut self, by_id: &[u32], all: &[Agent]) -> Option<Vec<ActiveOrder>> {
        let mut v = std::mem::take(&mut self.sorted);
        if v.is_empty() {
            return None;
        }
        let grid = &*self.grid;
        let same = v.par_iter_mut().with_min_len(1024).all(|x| {
            let Some(&slot) = by_id.get(x.rank as usize) else { return false };
            let Some(a) = all.get(slot as usize).filter(|a| a.id == x.id) else { return false };
            let Some(o) = a.active_order().filter(|o| o.goal_cell == x.goal_cell) else { return false };
            *x = ActiveOrder::new(grid, x.rank as usize, slot, a, o);
            true
        });
        let count = all.par_iter().with_min_len(1024).filter(|a| a.active_order().is_some()).count();
        (same && count == v.len()).then_some(v)
    }
}

impl NavState {
    /// The portals (found on the last pre-pass).
    pub fn portals(&self) -> &[portals::Portal] {
        self.portals.list()
    }

    /// Takes turns at the portals (see [`portals`]): finds the grid's portals when it changed,
    /// gives each portal to a direction, and sets [`crate::sim::agent::MoveOrder::portal`] on
    /// every agent coming through one (saying `wait` to those that must wait), clearing it on
    /// the rest. Positions as of `grid` (the tick's start). Returns how many agents are coming
    /// through a portal.
    pub fn take_turns(&mut self, roster: &mut Roster, grid: &AgentGrid, tick: u64, rules: portals::PortalRules) -> usize {
        self.portals.take_turns(&self.grid, &self.cache, roster, grid, tick, rules)
    }
}

/// Sorts `v` by `key` with a least-significant-byte-first radix sort (stable), skipping the
/// bytes every key shares: the active orders of a tick, listed in id order, are sorted by goal
/// cell in a few linear passes, where a comparison sort of the whole crowd was a visible part
/// of the tick.
fn radix_sort_by_key<T: Copy>(v: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    let Some(&first) = v.first() else { return };
    // Every byte's histogram in one read.
    let mut counts = [[0usize; 256]; 8];
    for x in v.iter() {
        let k = key(x);
        for (b, c) in counts.iter_mut().enumerate() {
            c[((k >> (8 * b)) & 0xff) as usize] += 1;
        }
    }
    let mut other = vec![first; v.len()];
    for (b, c) in counts.iter().enumerate() {
        if c.contains(&v.len()) {
            continue;
        }
        let mut starts = [0usize; 256];
        let mut sum = 0;
        for (s, &n) in starts.iter_mut().zip(c) {
            *s = sum;
            sum += n;
        }
        for x in v.iter() {
            let d = ((key(x) >> (8 * b)) & 0xff) as usize;
            if let Some(slot) = other.get_mut(starts[d]) {
                *slot = *x;
            }
            starts[d] += 1;
        }
        std::mem::swap(v, &mut other);
    }
}

/// What [`NavState::prepare`] reads of one active order.
#[derive(Debug, Clone, Copy)]
struct ActiveOrder {
    goal_cell: u32,
    id: u32,
    /// Rank of the agent's id (its place in the roster's id order).
    rank: u32,
    /// Storage index of the agent.
    index: u32,
    goal: Vec2,
    /// The agent's remembered sight of its goal holds (same grid version and nav cell).
    sight_holds: bool,
    /// The order has no formation slot yet.
    unclaimed: bool,
}

impl ActiveOrder {
    /// Agent `a` (id rank `rank`, storage index `index`) with its active order `o`.
    fn new(grid: &NavGrid, rank: usize, index: u32, a: &Agent, o: &MoveOrder) -> Self {
        let cell = grid.cell_of(a.position) as u32;
        ActiveOrder {
            goal_cell: o.goal_cell,
            id: a.id,
            rank: rank as u32,
            index,
            goal: o.goal,
            sight_holds: o.sight == Some((grid.version(), cell)),
            unclaimed: o.slot.is_none(),
        }
    }
}

/// One goal cell's active orders, as the pre-pass sees them.
struct Group {
    gc: u32,
    goal: Vec2,
    /// Agents heading for it.
    n: usize,
    /// No field is needed: every agent sees the goal.
    sees: bool,
    /// How many of its agents (in id order) were looked at.
    looked: usize,
}

/// Whether the agent of `x` sees its goal along free cells (from where it stands now).
fn sees_goal(grid: &NavGrid, agents: &[Agent], x: &ActiveOrder) -> bool {
    agents.get(x.index as usize).is_some_and(|a| grid.line_free_from(a.position, x.goal))
}

/// The active orders of `agents`, in id order (`by_id`: storage slots in id order): one pass
/// over the agents (each order is a heap box, so one read of each per tick), in parallel on
/// the current rayon pool.
fn active_orders(grid: &NavGrid, by_id: &[u32], agents: &[Agent]) -> Vec<ActiveOrder> {
    by_id
        .par_iter()
        .enumerate()
        .with_min_len(1024)
        .filter_map(|(r, &slot)| {
            let a = agents.get(slot as usize)?;
            Some(ActiveOrder::new(grid, r, slot, a, a.active_order()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The radix sort orders as a comparison sort does (keys with shared and differing
        /// bytes, duplicates kept in their order: it is stable).
        #[test]
        fn radix_sort_matches_a_stable_comparison_sort(keys in proptest::collection::vec((0u64..4, any::<u32>(), 0u64..300), 0..400)) {
            let mut v: Vec<(u64, usize)> = keys.iter().enumerate().map(|(i, &(hi, mid, lo))| ((hi << 40) | (u64::from(mid) << 8) | lo, i)).collect();
            let mut want = v.clone();
            want.sort_by_key(|x| x.0);
            radix_sort_by_key(&mut v, |x| x.0);
            prop_assert_eq!(v, want);
        }
    }
}
