//! A world's navigation state in its saved form (`world/save.rs` writes the rest of the world).
//!
//! Kept: the grid's blocked cells and version, the formations, the field requests, the cache's
//! goals and clock, the dirty boxes, the pipeline's counters and credit, the portals. Not
//! kept, because they are computed again to the same values: the component labels and
//! clearance map (from the blocked cells), the cached and delivered fields (a field is a pure
//! function of the grid and its goal; a requested field is built on its due tick, as a fork's
//! is), the jobs not yet taken and the last tick's sorted orders (as [`NavState::fork`] drops them).

use super::*;
use crate::sim::bytes::{Dec, DecodeError, Enc};

/// Most dirty boxes a saved nav state may hold (one command adds at most four).
const MAX_DIRTY: usize = 1 << 20;

/// A vector that must be finite.
fn finite_vec(d: &mut Dec, what: &str) -> Result<Vec2, DecodeError> {
    let v = d.vec2()?;
    if v.is_finite() { Ok(v) } else { Err(d.err(format!("{what} is not finite"))) }
}

impl NavState {
    /// Appends the saved form.
    pub(crate) fn save(&self, e: &mut Enc) {
        let NavState { grid, cache, formations, next_formation, dirty, resolved_version, pending, next_request, jobs: _, pipeline, credit, sorted: _, portals } = self;
        grid.save(e);
        cache.save(e);
        e.u64(formations.len() as u64);
        for (id, f) in formations {
            let Formation { goal, slots, dist, taken, spacing, members } = f;
            e.u64(u64::from(*id));
            e.vec2(*goal);
            e.u64(slots.len() as u64);
            for ((s, dd), t) in slots.iter().zip(dist).zip(taken) {
                e.vec2(*s);
                e.f32(*dd);
                e.u8(u8::from(*t));
            }
            e.f32(*spacing);
            e.u64(u64::from(*members));
        }
        e.u64(u64::from(*next_formation));
        e.u64(dirty.len() as u64);
        for (lo, hi) in dirty {
            e.vec2(*lo);
            e.vec2(*hi);
        }
        e.u64(*resolved_version);
        e.u64(pending.len() as u64);
        for (gc, p) in pending {
            let Pending { id, goal, due, version, field: _ } = p;
            e.u64(u64::from(*gc));
            e.u64(*id);
            e.vec2(*goal);
            e.u64(*due);
            e.u64(*version);
        }
        e.u64(*next_request);
        let PipelineStats { requested, delivered, built_on_tick } = *pipeline;
        for v in [requested, delivered, built_on_tick, *credit] {
            e.u64(v);
        }
        portals.save(e);
    }

    /// Reads the saved form; the grid's shape and the cache's capacity come from the world's
    /// settings (as [`NavState::new`] takes them). `max_fields`: most cached fields allowed.
    pub(crate) fn load(d: &mut Dec, shape: NavShape, max_fields: usize) -> Result<NavState, DecodeError> {
        let NavShape { bounds, cell, clearance, capacity } = shape;
        let mut grid = NavGrid::empty(bounds, cell, clearance);
        grid.load(d)?;
        let grid = Arc::new(grid);
        let cache = FlowCache::load(d, capacity, max_fields, &grid)?;
        let cells = grid.len();
        let n = d.list_len()?;
        let mut formations = BTreeMap::new();
        for _ in 0..n {
            let id = d.u32()?;
            let goal = finite_vec(d, "formation goal")?;
            let k = d.list_len()?;
            let (mut slots, mut dist, mut taken) = (Vec::with_capacity(k.min(1024)), Vec::with_capacity(k.min(1024)), Vec::with_capacity(k.min(1024)));
            for _ in 0..k {
                slots.push(finite_vec(d, "formation slot")?);
                let dd = d.f32()?;
                if !dd.is_finite() {
                    return Err(d.err("formation slot distance is not finite"));
                }
                dist.push(dd);
                taken.push(d.bool()?);
            }
            let spacing = d.f32()?;
            if !(spacing.is_finite() && spacing > 0.0) {
                return Err(d.err("formation spacing must be a positive finite number"));
            }
            let members = d.u32()?;
            if formations.insert(id, Formation { goal, slots, dist, taken, spacing, members }).is_some() {
                return Err(d.err(format!("formation {id} twice")));
            }
        }
        let next_formation = d.u32()?;
        let n = d.list_len()?;
        if n > MAX_DIRTY {
            return Err(d.err("too many dirty boxes"));
        }
        let mut dirty = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let lo = finite_vec(d, "dirty box")?;
            let hi = finite_vec(d, "dirty box")?;
            dirty.push((lo, hi));
        }
        let resolved_version = d.u64()?;
        let n = d.list_len()?;
        let mut pending = BTreeMap::new();
        for _ in 0..n {
            let gc = d.u32()?;
            if gc as usize >= cells {
                return Err(d.err("requested field's goal cell is off the nav grid"));
            }
            let id = d.u64()?;
            let goal = finite_vec(d, "requested field's goal")?;
            let (due, version) = (d.u64()?, d.u64()?);
            if pending.insert(gc, Pending { id, goal, due, version, field: None }).is_some() {
                return Err(d.err(format!("field of goal cell {gc} requested twice")));
            }
        }
        let next_request = d.u64()?;
        let pipeline = PipelineStats { requested: d.u64()?, delivered: d.u64()?, built_on_tick: d.u64()? };
        let credit = d.u64()?;
        let portals = portals::Portals::load(d, &grid)?;
        Ok(NavState {
            grid,
            cache,
            formations,
            next_formation,
            dirty,
            resolved_version,
            pending,
            next_request,
            jobs: Vec::new(),
            pipeline,
            credit,
            sorted: Vec::new(),
            portals,
        })
    }
}
