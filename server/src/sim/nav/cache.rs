//! The flow-field cache: one field per goal cell, shared by every agent going there.
//!
//! Bounded by `capacity` with least-recently-used eviction; fields in use this tick are never
//! evicted (so the bound is soft when more goals are active than the capacity). Every field is
//! dropped when the grid changes ([`FlowCache::invalidate`]). The cache is touched only between
//! ticks (when MoveTo is issued and in the world's sequential pre-pass); the parallel compute
//! phase only reads it.
//!
//! A loaded cache ([`FlowCache::load`]) holds its fields' goals and builds each field the first
//! time it is read: every cached field is of the current grid (a grid change drops them all), so
//! a field built late is the one built early. A world restored from a snapshot starts stepping
//! without building the fields its agents no longer use.

use std::sync::{Arc, OnceLock};

use glam::Vec2;

use super::flowfield::FlowField;
use crate::sim::bytes::{Dec, DecodeError, Enc};
use super::grid::NavGrid;

/// Counters of the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Agent-lookups served by a field already in the cache (one per agent with an active
    /// order per tick, plus one per agent when an order is issued).
    pub hits: u64,
    /// Fields built (cache misses).
    pub builds: u64,
    /// Fields evicted by the LRU bound.
    pub evictions: u64,
    /// Times every field was dropped because obstacles or walls changed.
    pub invalidations: u64,
}

impl CacheStats {
    /// hits / (hits + builds); 0 with no lookups.
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.builds;
        if n == 0 { 0.0 } else { self.hits as f64 / n as f64 }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    goal_cell: usize,
    goal: Vec2,
    field: Slot,
    last_used: u64,
}

/// A cached field: built when it was cached, or (loaded) built on its first read.
#[derive(Debug, Clone)]
enum Slot {
    Built(Arc<FlowField>),
    Loaded { grid: Arc<NavGrid>, field: OnceLock<Arc<FlowField>> },
}

impl Entry {
    fn built(field: Arc<FlowField>, last_used: u64) -> Entry {
        let (goal_cell, goal) = (field.goal_cell(), field.goal());
        Entry { goal_cell, goal, field: Slot::Built(field), last_used }
    }

    /// The field, built now if this is a loaded entry's first read.
    fn field(&self) -> &Arc<FlowField> {
        match &self.field {
            Slot::Built(f) => f,
            Slot::Loaded { grid, field } => field.get_or_init(|| Arc::new(FlowField::build(grid, self.goal_cell, self.goal))),
        }
    }

    /// The field if it is built.
    fn if_built(&self) -> Option<&Arc<FlowField>> {
        match &self.field {
            Slot::Built(f) => Some(f),
            Slot::Loaded { field, .. } => field.get(),
        }
    }
}

/// The cache.
#[derive(Debug, Clone)]
pub struct FlowCache {
    capacity: usize,
    entries: Vec<Entry>,
    clock: u64,
    round_start: u64,
    stats: CacheStats,
}

impl FlowCache {
    /// An empty cache holding at most `capacity` fields (at least 1).
    pub fn new(capacity: usize) -> Self {
        FlowCache { capacity: capacity.max(1), entries: Vec::new(), clock: 0, round_start: 0, stats: CacheStats::default() }
    }

    /// The field for `goal_cell`, if cached (read-only; used by the compute phase).
    pub fn get(&self, goal_cell: usize) -> Option<&FlowField> {
        self.entries.iter().find(|e| e.goal_cell == goal_cell).map(|e| &**e.field())
    }

    /// Whether a field for `goal_cell` is cached (without building a loaded one).
    pub fn contains(&self, goal_cell: usize) -> bool {
        self.entries.iter().any(|e| e.goal_cell == goal_cell)
    }

    /// Whether a loaded field is not built yet.
    pub fn has_unbuilt(&self) -> bool {
        self.entries.iter().any(|e| e.if_built().is_none())
    }

    /// Builds, in parallel, the loaded fields of `goal_cells` (ascending) not read yet: those
    /// the next fetches read, which would build them one by one.
    pub fn build_loaded(&self, goal_cells: &[u32]) {
        use rayon::prelude::*;
        let wanted = |e: &&Entry| e.if_built().is_none() && u32::try_from(e.goal_cell).is_ok_and(|c| goal_cells.binary_search(&c).is_ok());
        let todo: Vec<&Entry> = self.entries.iter().filter(wanted).collect();
        if todo.len() > 1 {
            todo.par_iter().for_each(|e| {
                e.field();
            });
        }
    }

    /// The field for `goal_cell` (built towards `goal` if missing), counting `users` hits when
    /// it was cached. Marks it used now; evicts least-recently-used fields not used in the
    /// current round (see [`FlowCache::begin_round`]) beyond the capacity.
    pub fn fetch(&mut self, grid: &NavGrid, goal_cell: usize, goal: Vec2, users: u64) -> Arc<FlowField> {
        self.clock += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| e.goal_cell == goal_cell) {
            e.last_used = self.clock;
            self.stats.hits += users;
            return e.field().clone();
        }
        let field = Arc::new(FlowField::build(grid, goal_cell, goal));
        self.insert(field.clone(), users);
        field
    }

    /// Adds a field built elsewhere (the caller checked its goal cell is not cached), counting
    /// it as one build and `users − 1` hits, like a missing [`FlowCache::fetch`].
    pub fn insert(&mut self, field: Arc<FlowField>, users: u64) {
        self.clock += 1;
        self.stats.builds += 1;
        self.stats.hits += users.saturating_sub(1);
        self.entries.push(Entry::built(field, self.clock));
        self.evict();
    }

    /// Starts a round of fetches: fields fetched from now on are protected from eviction.
    pub fn begin_round(&mut self) {
        self.clock += 1;
        self.round_start = self.clock;
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
            // Oldest first; ties cannot happen (the clock is strictly increasing).
            let Some((i, e)) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.last_used) else { return };
            if e.last_used >= self.round_start {
                return;
            }
            self.entries.swap_remove(i);
            self.stats.evictions += 1;
        }
    }

    /// Drops every field (obstacles or walls changed).
    pub fn invalidate(&mut self) {
        if !self.entries.is_empty() {
            self.stats.invalidations += 1;
        }
        self.entries.clear();
    }

    /// Number of cached fields.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes held by the cached fields (those built so far).
    pub fn bytes(&self) -> usize {
        self.entries.iter().filter_map(Entry::if_built).map(|f| f.bytes()).sum::<usize>() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }
}

impl FlowCache {
    /// Appends what a saved world keeps of the cache (`world/save.rs`): each field's goal cell,
    /// goal and last use, the clock and the counters. Fields are built again after a load: a
    /// field is a pure function of the grid and its goal, and every cached field is of the
    /// current grid.
    pub(crate) fn save(&self, e: &mut Enc) {
        let FlowCache { capacity: _, entries, clock, round_start, stats } = self;
        e.u64(entries.len() as u64);
        for en in entries {
            e.u64(en.goal_cell as u64);
            e.vec2(en.goal);
            e.u64(en.last_used);
        }
        e.u64(*clock);
        e.u64(*round_start);
        let CacheStats { hits, builds, evictions, invalidations } = *stats;
        for v in [hits, builds, evictions, invalidations] {
            e.u64(v);
        }
    }

    /// Reads what [`FlowCache::save`] wrote; each field is built on `grid` when first read
    /// (see the module docs). `max`: most fields the world can hold (the capacity, or more
    /// while more goals are in use in one round).
    pub(crate) fn load(d: &mut Dec, capacity: usize, max: usize, grid: &Arc<NavGrid>) -> Result<FlowCache, DecodeError> {
        let n = d.list_len()?;
        if n > max {
            return Err(d.err(format!("{n} cached flow fields, more than the {max} the world can hold")));
        }
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let gc = usize::try_from(d.u64()?).ok().filter(|&c| c < grid.len()).ok_or_else(|| d.err("flow field goal cell off the nav grid"))?;
            let goal = d.vec2()?;
            if !goal.is_finite() {
                return Err(d.err("flow field goal is not finite"));
            }
            keys.push((gc, goal, d.u64()?));
        }
        if keys.iter().enumerate().any(|(i, k)| keys[..i].iter().any(|o| o.0 == k.0)) {
            return Err(d.err("a flow field's goal cell is cached twice"));
        }
        let entries = keys.into_iter().map(|(goal_cell, goal, last_used)| Entry { goal_cell, goal, field: Slot::Loaded { grid: grid.clone(), field: OnceLock::new() }, last_used }).collect();
        let clock = d.u64()?;
        let round_start = d.u64()?;
        let stats = CacheStats { hits: d.u64()?, builds: d.u64()?, evictions: d.u64()?, invalidations: d.u64()? };
        Ok(FlowCache { capacity: capacity.max(1), entries, clock, round_start, stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::geometry::Bounds;

    #[test]
    fn lru_eviction_hits_and_invalidation() {
        let g = NavGrid::empty(Bounds { min: Vec2::ZERO, max: Vec2::splat(8.0) }, 1.0, 0.0);
        let mut c = FlowCache::new(2);
        c.begin_round();
        c.fetch(&g, 0, g.center(0), 10); // build: 1 build + 9 hits
        c.begin_round();
        c.fetch(&g, 1, g.center(1), 1); // build
        c.begin_round();
        c.fetch(&g, 0, g.center(0), 5); // hit ×5; cell 1 is now least recently used
        c.begin_round();
        c.fetch(&g, 2, g.center(2), 1); // build, evicts cell 1
        assert_eq!(c.len(), 2);
        assert!(c.get(1).is_none() && c.get(0).is_some() && c.get(2).is_some());
        assert_eq!(c.stats(), CacheStats { hits: 14, builds: 3, evictions: 1, invalidations: 0 });
        assert!((c.stats().hit_rate() - 14.0 / 17.0).abs() < 1e-12);
        // 64 cells × (4 + 2) bytes per field plus the struct.
        assert!(c.bytes() >= 2 * 64 * 6);
        // Fields fetched in the same round are all kept even beyond the capacity.
        c.begin_round();
        for k in 3..6 {
            c.fetch(&g, k, g.center(k), 1);
        }
        assert_eq!(c.len(), 3);
        c.invalidate();
        assert!(c.is_empty());
        assert_eq!(c.stats().invalidations, 1);
    }

    /// A loaded cache holds the same goals, counters and clock, and builds each field on its
    /// first read into the field an eager build gives; saving it again writes the same bytes.
    #[test]
    fn a_loaded_cache_builds_its_fields_on_first_read_equal_to_an_eager_build() {
        let g = Arc::new(NavGrid::empty(Bounds { min: Vec2::ZERO, max: Vec2::splat(8.0) }, 1.0, 0.0));
        let mut c = FlowCache::new(4);
        for k in [3, 10, 40] {
            c.begin_round();
            c.fetch(&g, k, g.center(k), 2);
        }
        let mut e = Enc::default();
        c.save(&mut e);
        let loaded = FlowCache::load(&mut Dec::new(&e.buf), 4, 4, &g).unwrap();
        assert_eq!((loaded.len(), loaded.stats()), (3, c.stats()));
        assert!(loaded.has_unbuilt() && loaded.contains(10) && !loaded.contains(11));
        let empty = loaded.bytes();
        assert!(empty < c.bytes(), "no field is built by the load: {empty} vs {}", c.bytes());
        loaded.build_loaded(&[3, 40]);
        assert!(loaded.has_unbuilt(), "10 is not built yet");
        for k in [3, 10, 40] {
            let (eager, lazy) = (c.get(k).unwrap(), loaded.get(k).unwrap());
            for cell in 0..g.len() {
                let p = g.center(cell) + Vec2::splat(0.25);
                assert_eq!(eager.sample(&g, p), lazy.sample(&g, p), "goal {k}, cell {cell}");
            }
        }
        assert!(!loaded.has_unbuilt());
        let fields: usize = [3, 10, 40].iter().map(|&k| c.get(k).unwrap().bytes()).sum();
        assert_eq!(loaded.bytes(), empty + fields);
        let mut again = Enc::default();
        loaded.save(&mut again);
        assert_eq!(again.buf, e.buf);
        // A goal cell twice is refused, never two entries.
        let mut twice = Enc::default();
        twice.u64(2);
        for _ in 0..2 {
            twice.u64(3);
            twice.vec2(g.center(3));
            twice.u64(1);
        }
        for _ in 0..6 {
            twice.u64(0);
        }
        assert!(FlowCache::load(&mut Dec::new(&twice.buf), 4, 4, &g).is_err());
    }
}
