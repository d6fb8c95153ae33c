//! The flow-field cache: one field per goal cell, shared by every agent going there.
//!
//! Bounded by `capacity` with least-recently-used eviction; fields in use this tick are never
//! evicted (so the bound is soft when more goals are active than the capacity). Every field is
//! dropped when the grid changes ([`FlowCache::invalidate`]). The cache is touched only between
//! ticks (when MoveTo is issued and in the world's sequential pre-pass); the parallel compute
//! phase only reads it.

use std::sync::Arc;

use glam::Vec2;

use super::flowfield::FlowField;
use crate::sim::codec::{Dec, DecodeError, Enc};
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
    field: Arc<FlowField>,
    last_used: u64,
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
        self.entries.iter().find(|e| e.field.goal_cell() == goal_cell).map(|e| &*e.field)
    }

    /// The field for `goal_cell` (built towards `goal` if missing), counting `users` hits when
    /// it was cached. Marks it used now; evicts least-recently-used fields not used in the
    /// current round (see [`FlowCache::begin_round`]) beyond the capacity.
    pub fn fetch(&mut self, grid: &NavGrid, goal_cell: usize, goal: Vec2, users: u64) -> Arc<FlowField> {
        self.clock += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| e.field.goal_cell() == goal_cell) {
            e.last_used = self.clock;
            self.stats.hits += users;
            return e.field.clone();
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
        self.entries.push(Entry { field, last_used: self.clock });
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

    /// Bytes held by the cached fields.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|e| e.field.bytes()).sum::<usize>() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }
}


impl FlowCache {
    /// Appends what a saved world keeps of the cache (`world/save.rs`): each field's goal cell,
    /// goal and last use, the clock and the counters. Fields are built again on load: a field is
    /// a pure function of the grid and its goal, and every cached field is of the current grid.
    pub(crate) fn save(&self, e: &mut Enc) {
        let FlowCache { capacity: _, entries, clock, round_start, stats } = self;
        e.u64(entries.len() as u64);
        for en in entries {
            e.u64(en.field.goal_cell() as u64);
            e.vec2(en.field.goal());
            e.u64(en.last_used);
        }
        e.u64(*clock);
        e.u64(*round_start);
        let CacheStats { hits, builds, evictions, invalidations } = *stats;
        for v in [hits, builds, evictions, invalidations] {
            e.u64(v);
        }
    }

    /// Reads what [`FlowCache::save`] wrote, building the fields on `grid` (their builds run in
    /// parallel: each is independent). `max`: most fields the world can hold (the capacity, or
    /// more while more goals are in use in one round).
    pub(crate) fn load(d: &mut Dec, capacity: usize, max: usize, grid: &NavGrid) -> Result<FlowCache, DecodeError> {
        use rayon::prelude::*;
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
        let entries = keys.par_iter().map(|&(gc, goal, last_used)| Entry { field: Arc::new(FlowField::build(grid, gc, goal)), last_used }).collect();
        let clock = d.u64()?;
        let round_start = d.u64()?;
        let stats = CacheStats { hits: d.u64()?, builds: d.u64()?, evictions: d.u64()?, invalidations: d.u64()? };
        Ok(FlowCache { capacity: capacity.max(1), entries, clock, round_start, stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::view::Bounds;

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
}
